//! Always-on recording: `loop=` cuts a session into files, each readable
//! alone by every reader, none losing or repeating a sample at a
//! boundary; retention (`maxfiles`, `maxsize`, `maxage`) keeps the
//! session's files within its bounds, counted; `timeout=` stops the
//! session by itself.

use integration_tests::readers::{converter_collapsed, converter_jar, read_on_every_jdk, symbolize_collapsed, Kind};
use integration_tests::Stream;
use integration_tests::*;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The session's files in `dir` (named `p-<n>-...jfr`), in sequence order.
fn period_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_owned();
            let n = name.strip_prefix("p-")?.split('-').next()?.parse().ok()?;
            name.ends_with(".jfr").then_some((n, p))
        })
        .collect();
    files.sort();
    files.into_iter().map(|(_, p)| p).collect()
}

/// Runs `main args` under `options` plus `loop=...,file=<dir>/p-%n-%t.jfr`.
fn run_looping(test: &str, options: &str, main: &str, args: &[&str]) -> (PathBuf, std::process::Output) {
    let dir = scratch_dir(test);
    let options = format!("start,{options},file={}/p-%n-%t.jfr", dir.display());
    let output = run_java(Some(&options), main, args, Duration::from_secs(120));
    assert_success(&output);
    (dir, output)
}

fn total_bytes(files: &[PathBuf]) -> u64 {
    files.iter().map(|f| std::fs::metadata(f).unwrap().len()).sum()
}

/// `loop=3s` over 15 s of two busy threads at 1 ms: 4 to 7 files, each
/// read alone by `jdk.jfr.consumer` of every JDK and by async-profiler's
/// converter; together they hold every sample the session took (its
/// `samples` counter), and no sample is in two files.
#[test]
fn a_looping_session_cuts_files_that_read_alone_and_lose_nothing() {
    let Some(jar) = converter_jar() else { return };
    let (dir, _) = run_looping("continuous_loop", "cpu=1ms,loop=3s", "CpuShares", &["15"]);
    let files = period_files(&dir);
    assert!((4..=7).contains(&files.len()), "{} files: {files:?}", files.len());
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let readings = read_on_every_jdk(&paths);
    let (_, recordings) = &readings[0];
    for (jdk, read) in &readings {
        let counts: Vec<usize> = read.iter().map(|r| r.samples().count()).collect();
        let first: Vec<usize> = recordings.iter().map(|r| r.samples().count()).collect();
        assert_eq!(counts, first, "{}: the same samples in each file", jdk.label());
    }
    let mut seen = HashSet::new();
    let mut written = 0;
    let mut working = 0;
    for (file, recording) in files.iter().zip(recordings) {
        let samples: Vec<_> = recording.samples().collect();
        // The last file may hold only the JVM's exit, after the work.
        let named = samples.iter().all(|s| !s.frames.is_empty() && s.frames.iter().all(|f| !f.method.is_empty()));
        assert!(named, "{}: its stacks are named from its own constants", file.display());
        working += usize::from(samples.iter().any(|s| s.frames.iter().any(|f| f.method == "heavyWork")));
        let theirs: i64 = converter_collapsed(&jar, file, Kind::Cpu).values().sum();
        assert_eq!(theirs, samples.len() as i64, "{}: the converter's samples", file.display());
        for sample in samples {
            assert!(seen.insert((sample.tid, sample.start_epoch_ns)), "a sample in two files: {sample:?}");
            written += 1;
        }
    }
    assert!(working + 1 >= files.len(), "{working} of {} files hold the fixture's work", files.len());
    let taken = recordings.last().unwrap().counter("samples");
    println!("{} files, {written} samples written, {taken} taken", files.len());
    assert_eq!(written, taken, "every sample taken is in a file");

    // A window of whole seconds across the files' boundaries: `symbolize`
    // over the directory counts the samples the JDK's reader times in it.
    let times: Vec<i64> = recordings.iter().flat_map(|r| r.samples().map(|s| s.start_epoch_ns)).collect();
    let from = times.iter().min().unwrap() / 1_000_000_000 + 4;
    let (from_ns, to_ns) = (from * 1_000_000_000, (from + 5) * 1_000_000_000);
    let expected = times.iter().filter(|&&t| t >= from_ns && t < to_ns).count() as i64;
    let collapsed = symbolize_collapsed(&dir, &["--from", &from.to_string(), "--to", &(from + 5).to_string()]);
    let within: i64 = collapsed.values().sum();
    println!("{within} samples from {from} to {}", from + 5);
    assert_eq!(within, expected, "the samples of the window");
    assert!(within > 0 && within < written);
}

/// `maxfiles=2` leaves the newest two files and counts what it removed;
/// `maxsize=150k` leaves the session's files within 150 KiB plus one
/// file; `maxage=2s` removes files that ended more than 2 s ago, and
/// `timeout=5s` stops the session by itself (the fixture runs 8 s).
#[test]
fn retention_keeps_the_newest_files_within_each_bound() {
    let (dir, _) = run_looping("continuous_maxfiles", "cpu=1ms,loop=1s,maxfiles=2", "CpuShares", &["5"]);
    let files = period_files(&dir);
    let names: Vec<_> = files.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(files.len(), 2, "{names:?}");
    let last = read_recording(files.last().unwrap());
    let removed = last.counter("retention_files_removed");
    assert!(removed >= 2, "{removed} removed");
    let numbers: Vec<i64> = names.iter().map(|n| n[2..].split('-').next().unwrap().parse().unwrap()).collect();
    assert_eq!(numbers[1] - numbers[0], 1, "the newest two: {names:?}");
    assert_eq!(numbers[0], removed, "the files before them were removed");

    let (dir, _) = run_looping("continuous_maxsize", "cpu=1ms,loop=1s,maxsize=150k", "DeepStack", &["200", "8"]);
    let files = period_files(&dir);
    let largest = files.iter().map(|f| std::fs::metadata(f).unwrap().len()).max().unwrap();
    let last = read_recording(files.last().unwrap());
    println!("maxsize: {} files, {} bytes, largest {largest}", files.len(), total_bytes(&files));
    assert!(total_bytes(&files) <= (150 << 10) + largest, "{} bytes in {files:?}", total_bytes(&files));
    assert!(last.counter("retention_bytes_removed") > 0, "nothing removed");

    let (dir, output) =
        run_looping("continuous_maxage", "cpu=1ms,loop=1s,maxage=2s,timeout=5s,loglevel=info", "CpuShares", &["8"]);
    let files = period_files(&dir);
    let last = read_recording(files.last().unwrap());
    assert!(last.counter("retention_files_removed") >= 1, "nothing aged out: {files:?}");
    assert!(files.len() <= 4, "files that ended 2 s before the last one stay: {files:?}");
    let stopped = stderr(&output);
    assert!(stopped.contains("timeout: stopping after 5 s"), "{stopped}");
    let span_ns = |r: &Recording| r.samples().map(|s| s.start_epoch_ns).max().unwrap();
    let first_sample = read_recording(&files[0]).samples().map(|s| s.start_epoch_ns).min().unwrap();
    assert!(span_ns(&last) - first_sample < 4_500_000_000, "samples after the timeout");
}

/// Driven through jcmd as at load: a looping session started by attach
/// rotates and keeps its bound, `status` names the current period file and
/// the files kept, and `stop` finishes the last file.
#[test]
fn a_looping_session_is_driven_through_jcmd() {
    let dir = scratch_dir("continuous_jcmd");
    let mut run = ready_java(None, "CpuShares", &["2"]);
    let start = format!("start,cpu=1ms,loop=1s,maxfiles=2,loglevel=info,file={}/p-%n-%t.jfr", dir.display());
    assert_attached(run.id(), &start);
    run.go();
    // The third period has begun once the first file is removed.
    run.wait_for(Stream::Stderr, |line| line.contains("removed") && line.contains("/p-0-"));
    assert!(attach_agent(run.id(), "status").status.success());
    let status = run.wait_for(Stream::Stdout, |line| line.starts_with("Profiling is running"));
    let current = format!("file: {}/p-", dir.display());
    assert!(status.contains(&current) && status.contains("earlier files kept: 1 ("), "{status}");
    assert!(attach_agent(run.id(), "stop").status.success());
    assert_success(&run.wait(Duration::from_secs(60)));
    let files = period_files(&dir);
    assert_eq!(files.len(), 2, "{files:?}");
    // Each reads alone (the reader fails the test otherwise).
    let recordings: Vec<Recording> = files.iter().map(|f| read_recording(f)).collect();
    assert!(recordings[1].counter("retention_files_removed") >= 1);
    // The shipped library counts its own heap.
    let heap = recordings[1].counter("agent_heap_bytes");
    assert!(heap > 0 && heap < 1 << 30, "agent_heap_bytes: {heap}");
}

/// A tmpfs of its own for one test (root may mount one), unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Self> {
        std::fs::create_dir_all(dir).unwrap();
        let output = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output();
        match output {
            Ok(o) if o.status.success() => Some(Self(dir.to_path_buf())),
            Ok(o) => {
                skip(&format!("cannot mount a tmpfs here: {}", stderr(&o).trim()), InCi::Optional);
                None
            }
            Err(e) => {
                skip(&format!("cannot run mount: {e}"), InCi::Optional);
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).output();
    }
}

/// The disk fills while a session loops (a 192 KiB tmpfs, nearly filled
/// by another file): the JVM goes on, the failures are counted and logged
/// once, no empty file is left, and once space returns later periods are
/// written again, the chunks kept meanwhile with them (`maxsize` keeps
/// the session within the disk from then on).
#[test]
fn a_full_disk_while_looping_is_survived_and_recovered_from() {
    let dir = scratch_dir("continuous_full_disk");
    let Some(disk) = Tmpfs::mount(&dir.join("disk"), "192k") else { return };
    let filler = disk.0.join("filler");
    std::fs::write(&filler, vec![0u8; 150 << 10]).unwrap();
    let options = format!("start,cpu=1ms,loop=1s,maxsize=96k,loglevel=warn,file={}/p-%n-%t.jfr", disk.0.display());
    let mut run = ChildGuard::spawn(&mut java_command(Some(&options), &[], "CpuShares", &["10"]));
    let full = run.wait_for(Stream::Stderr, |line| {
        line.contains("cannot write the session file") || line.contains("cannot create the period file")
    });
    std::fs::remove_file(&filler).unwrap();
    let back = run
        .wait_for(Stream::Stderr, |line| line.contains("takes chunks again") || line.contains("could be created now"));
    let output = run.wait(Duration::from_secs(60));
    assert_success(&output);
    println!("{full}\n{back}");
    let files = period_files(&disk.0);
    let last = read_recording(files.last().unwrap());
    let failures = last.counter("session_file_write_failures") + last.counter("period_file_create_failures");
    assert!(failures >= 1, "the failures are counted");
    let logged = stderr(&output).lines().filter(|l| l.contains("cannot write") || l.contains("cannot create")).count();
    assert_eq!(logged, 1, "logged once: {}", stderr(&output));
    assert!(files.iter().all(|f| std::fs::metadata(f).unwrap().len() > 0), "an empty file is left: {files:?}");
    let last_number: u64 =
        files.last().unwrap().file_name().unwrap().to_str().unwrap()[2..].split('-').next().unwrap().parse().unwrap();
    assert!(last_number >= 5 && files.len() >= 2, "later periods are written again: {files:?}");
    assert!(last.samples().count() > 0);
}

/// Without `loop`, `maxsize` bounds the one session file (the default
/// bound, 256 MiB, forced down for the test): past it the oldest chunks
/// are cut, and the file stays a whole recording that readers open.
#[test]
fn a_single_session_file_keeps_its_newest_chunks_within_maxsize() {
    let file = scratch_file("continuous_single_file", "session.jfr");
    let options = format!("start,cpu=1ms,chunktime=1s,maxsize=100k,file={}", file.display());
    assert_success(&run_java(Some(&options), "DeepStack", &["200", "6"], Duration::from_secs(60)));
    let size = std::fs::metadata(&file).unwrap().len();
    let recording = read_recording(&file);
    println!("{size} bytes, {} samples", recording.samples().count());
    assert!(size <= 100 << 10, "{size} bytes");
    assert!(recording.counter("retention_bytes_removed") > 0, "nothing was cut");
    assert!(recording.samples().any(|s| s.frames.iter().any(|f| f.method == "descend")), "named stacks");
    assert_jfr_tool_accepts(&file);
}
