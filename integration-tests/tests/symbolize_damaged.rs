//! `symbolize` (the release binary) on damaged and foreign input: real
//! recordings — ours, async-profiler's, the JDK's own — emptied, cut,
//! replaced by random bytes, flipped byte by byte, or with a chunk cut
//! short or broken. It never dies of a signal; input it cannot read is
//! exit status 1 with no output file; a damaged recording's complete
//! chunks are written with status 3 (0 with `--partial`) and are exactly
//! what those chunks alone give. Our reader and `jfrs` (an independent
//! reader) read the undamaged recordings' samples alike.

use integration_tests::readers::{
    async_profiler_agent, converter_jar, frame_name, read_jfrs, record_with_async_profiler,
};
use integration_tests::*;
use mutation::Rng;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// Runs `symbolize <command> <input> -o <dir>/out [more]`; its output and
/// whether it left an output file.
fn run(command: &str, input: &Path, dir: &Path, more: &[&str]) -> (Output, Option<Vec<u8>>) {
    let out = dir.join("out");
    let _ = std::fs::remove_file(&out);
    let output = Command::new(symbolize_binary())
        .args([command, input.to_str().unwrap(), "-o", out.to_str().unwrap(), "--no-debuginfod"])
        .args(more)
        .output()
        .expect("run symbolize");
    let leftovers: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left behind: {leftovers:?}");
    (output, std::fs::read(&out).ok())
}

/// Exit status 1, no output file, and a message.
fn assert_refused(what: &str, (output, written): &(Output, Option<Vec<u8>>)) {
    assert_eq!(output.status.code(), Some(1), "{what}: {}", stderr(output));
    assert!(written.is_none(), "{what}: an output file was written: {}", stderr(output));
    assert!(!stderr(output).is_empty(), "{what}: no message");
}

/// A recording of `EventKinds` by our agent, async-profiler (when its
/// converter is there) and the JDK's own recorder, each one chunk.
fn recordings(dir: &Path) -> Vec<(&'static str, PathBuf)> {
    let ours = dir.join("ours.jfr");
    let options = format!("start,event=cpu,interval=1ms,wall=5ms,file={}", ours.display());
    assert_success(
        &ChildGuard::spawn(&mut java_command(Some(&options), &[], "EventKinds", &["1"])).wait(Duration::from_secs(60)),
    );
    let jdk = dir.join("jdk.jfr");
    let jfr = format!("-XX:StartFlightRecording=filename={},settings=profile", jdk.display());
    // Three seconds: the JDK's recorder samples at most every 10 ms, and
    // under CI load one second once gave it only 8 samples.
    assert_success(
        &ChildGuard::spawn(&mut java_command(None, &[&jfr], "EventKinds", &["3"])).wait(Duration::from_secs(60)),
    );
    let mut files = vec![("ours", ours), ("jdk", jdk)];
    if let Some(jar) = converter_jar() {
        let agent = async_profiler_agent(&jar);
        files.push(("async-profiler", record_with_async_profiler("damaged_ap", &agent, "event=cpu,interval=1ms", "1")));
    }
    for (name, file) in &files {
        let bytes = std::fs::read(file).unwrap();
        let size = u64::from_be_bytes(bytes[8..16].try_into().unwrap());
        assert_eq!(size, bytes.len() as u64, "{name}: one chunk");
    }
    files
}

/// Our reader and `jfrs` read the same CPU and wall-clock samples.
fn assert_read_like_jfrs(name: &str, file: &Path) {
    let theirs = read_jfrs(file);
    let ours = symbolizer::recording::read(file).unwrap();
    assert!(ours.damage.is_empty(), "{name}: {:?}", ours.damage);
    let recording = &ours.recording;
    let key = |kind: &str, thread: &str, frames: Vec<String>| format!("{kind} {thread} {frames:?}");
    let mut expected: Vec<String> =
        theirs.samples.iter().map(|s| key(&format!("{:?}", s.kind), &s.thread, s.frames.clone())).collect();
    let mut read: Vec<String> = ours
        .recording
        .samples()
        .filter_map(|s| {
            let kind = match s.kind {
                symbolizer::events::EventKind::Cpu => "Cpu",
                symbolizer::events::EventKind::Wall => "Wall",
                _ => return None,
            };
            let frames = recording
                .frames_of(s)
                .map(|f| frame_name(f.kind.map_or("?", |k| k.description()), &f.class, &f.method, &f.descriptor))
                .collect();
            Some(key(kind, recording.thread(s).name(), frames))
        })
        .collect();
    expected.sort();
    read.sort();
    assert!(expected.len() >= 10, "{name}: only {} samples", expected.len());
    assert!(read == expected, "{name}: {} samples read, jfrs read {}", read.len(), expected.len());
}

#[test]
fn unreadable_input_is_refused_and_damaged_input_never_kills_symbolize() {
    let dir = scratch_dir("symbolize_damaged");
    let out_dir = dir.join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let files = recordings(&dir);
    for (name, file) in &files {
        assert_read_like_jfrs(name, file);
    }

    // Not recordings: every command refuses them, writing nothing.
    let mut rng = Rng::new(16);
    let empty = dir.join("empty.jfr");
    std::fs::write(&empty, b"").unwrap();
    let random = dir.join("random.jfr");
    std::fs::write(&random, rng.bytes(64 * 1024)).unwrap();
    let mut inputs = vec![("empty file".to_owned(), empty), ("random bytes".to_owned(), random)];
    inputs.push(("a directory".to_owned(), out_dir.clone()));
    for (name, file) in &files {
        let bytes = std::fs::read(file).unwrap();
        for percent in [10, 50, 99] {
            let cut = dir.join(format!("{name}-cut{percent}.jfr"));
            std::fs::write(&cut, &bytes[..bytes.len() * percent / 100]).unwrap();
            inputs.push((format!("{name} cut at {percent}%"), cut));
        }
    }
    for (what, input) in &inputs {
        for command in ["collapsed", "flamegraph", "pprof", "jfr"] {
            assert_refused(&format!("{command} of {what}"), &run(command, input, &out_dir, &[]));
        }
    }

    // One byte flipped at offsets spread over each recording, and at random
    // ones: a normal exit, 1 with nothing written, or 0/3 with the output.
    let mut statuses = std::collections::BTreeMap::new();
    for (name, file) in &files {
        let bytes = std::fs::read(file).unwrap();
        let flipped = dir.join(format!("{name}-flipped.jfr"));
        let spread = (0..40).map(|i| i * bytes.len() / 40);
        let header = 0..68;
        let random: Vec<usize> = (0..40).map(|_| rng.below(bytes.len())).collect();
        for (i, offset) in header.step_by(4).chain(spread).chain(random).enumerate() {
            let mut damaged = bytes.clone();
            damaged[offset] ^= [0xff, 0x80, 0x01, 0x7f][i % 4];
            std::fs::write(&flipped, &damaged).unwrap();
            let command = ["collapsed", "pprof", "jfr"][i % 3];
            let (output, written) = run(command, &flipped, &out_dir, &[]);
            let what = format!("{command} of {name} with byte {offset} flipped");
            let code = output.status.code().unwrap_or_else(|| panic!("{what}: killed: {:?}", output.status));
            assert!([0, 1, 3].contains(&code), "{what}: status {code}: {}", stderr(&output));
            assert_eq!(written.is_some(), code != 1, "{what}: status {code}, output written: {}", stderr(&output));
            if command == "jfr" && code != 1 {
                let copy = out_dir.join("copy.jfr");
                std::fs::write(&copy, written.unwrap()).unwrap();
                let reread = symbolizer::recording::read(&copy);
                assert!(reread.is_ok_and(|r| r.damage.is_empty()), "{what}: the copy does not read back");
            }
            *statuses.entry(code).or_insert(0) += 1;
        }
    }
    eprintln!("exit statuses of one-byte flips: {statuses:?}");
    assert!(statuses.get(&1).is_some_and(|&n| n > 10), "few flips refused: {statuses:?}");
}

/// A three-chunk file: the second chunk broken (its metadata offset out of
/// range) or the third cut short. Status 3 with the complete chunks'
/// profile, 0 with `--partial`; stderr names the chunk left out.
#[test]
fn a_damaged_chunk_is_left_out_with_status_3_unless_partial() {
    let dir = scratch_dir("symbolize_damaged_chunk");
    let file = dir.join("ours.jfr");
    let options = format!("start,event=cpu,interval=1ms,file={}", file.display());
    assert_success(
        &ChildGuard::spawn(&mut java_command(Some(&options), &[], "EventKinds", &["1"])).wait(Duration::from_secs(60)),
    );
    let chunk = std::fs::read(&file).unwrap();
    let write = |name: &str, parts: &[&[u8]]| {
        let path = dir.join(name);
        std::fs::write(&path, parts.concat()).unwrap();
        path
    };
    let mut broken = chunk.clone();
    broken[24..32].copy_from_slice(&i64::MAX.to_be_bytes()); // the metadata offset
    let cut = &chunk[..chunk.len() / 2];
    let two = write("two.jfr", &[&chunk, &chunk]);
    let out_dir = dir.join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let (expected, written) = run("collapsed", &two, &out_dir, &[]);
    assert_success(&expected);
    let expected = written.unwrap();
    for (name, parts, left_out) in [
        ("broken-middle.jfr", [&chunk[..], &broken, &chunk], "chunk 1 (at byte"),
        ("cut-last.jfr", [&chunk[..], &chunk, cut], "chunk 2 (at byte"),
    ] {
        let input = write(name, &parts);
        let (output, written) = run("collapsed", &input, &out_dir, &[]);
        assert_eq!(output.status.code(), Some(3), "{name}: {}", stderr(&output));
        assert!(stderr(&output).contains(left_out), "{name}: {}", stderr(&output));
        assert!(written.as_ref() == Some(&expected), "{name}: not the profile of the two complete chunks");
        let (output, written) = run("collapsed", &input, &out_dir, &["--partial"]);
        assert_success(&output);
        assert!(written.as_ref() == Some(&expected), "{name} --partial: not the profile of the two complete chunks");
    }
    // Cut inside its only chunk: nothing to read, with or without --partial.
    let only_cut = write("only-cut.jfr", &[cut]);
    assert_refused("a cut single chunk", &run("collapsed", &only_cut, &out_dir, &[]));
    assert_refused("a cut single chunk, --partial", &run("collapsed", &only_cut, &out_dir, &["--partial"]));
}
