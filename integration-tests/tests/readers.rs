//! Every recording shape read by every independent JFR reader, which must
//! read the same samples: `jdk.jfr.consumer` of JDK 11, 17, 21 and 25,
//! `jfr print`, the `jfrs` crate and async-profiler's converter
//! (`integration_tests::readers`). Each test records once, for a few
//! seconds.

use integration_tests::readers::*;
use integration_tests::*;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::Duration;

/// Runs `main` under the agent with `options` (and `file=`) to completion.
fn record(test: &str, options: &str, main: &str, args: &[&str]) -> (std::path::PathBuf, std::process::Output) {
    let file = scratch_file(test, "recording.jfr");
    let output = run_recorded(options, &file, main, args, Duration::from_secs(60));
    (file, output)
}

/// The samples on top of which `method` is, of the converter's stacks.
fn on_top(collapsed: &Collapsed, method: &str) -> i64 {
    collapsed.iter().filter(|((_, frames), _)| frames.first().is_some_and(|f| f == method)).map(|(_, n)| n).sum()
}

/// CpuShares (one thread in `heavyWork` all the time, one in `lightWork`
/// 3 ms of every 7): every reader reads the same samples and top frames,
/// and the converter's `--cpu` stacks split between the two methods as the
/// threads' measured CPU time does, within 5 points; `--wall` finds none.
#[test]
fn a_cpu_profile_reads_the_same_in_every_reader() {
    let (file, output) = record("readers-cpu", "interval=1ms", "CpuShares", &["3"]);
    let agreed = assert_readers_agree(&file, Dialect::Jdk);
    let workers = agreed.samples.iter().filter(|s| s.thread == "heavy" || s.thread == "light").count();
    assert!(workers >= 1000, "{workers} samples of the two workers");
    let (Some(cpu), Some(wall)) = (&agreed.cpu, &agreed.wall) else { return };
    assert!(wall.is_empty(), "--wall of a CPU profile: {} stacks", wall.len());
    let (heavy, light) = (on_top(cpu, "CpuShares.heavyWork") as f64, on_top(cpu, "CpuShares.lightWork") as f64);
    let (heavy_ns, light_ns) = (measured_cpu_ns(&output, "heavy"), measured_cpu_ns(&output, "light"));
    let (share, truth) = (heavy / (heavy + light), heavy_ns / (heavy_ns + light_ns));
    assert!(
        (share - truth).abs() <= 0.05,
        "converter --cpu: heavyWork {:.1}% of {} samples, its thread {:.1}% of the CPU",
        share * 100.0,
        heavy + light,
        truth * 100.0
    );
}

/// CPU and wall-clock sampling together, of threads that spin, sleep, park
/// and wait: the converter's `--wall` stacks are the wall samples (weighted
/// by `samples`) and its `--cpu` stacks the CPU samples, none of the other.
#[test]
fn wall_clock_samples_are_what_the_converter_calls_wall() {
    let (file, _) = record("readers-wall", "cpu=10ms,wall=10ms", "WallThreads", &["2", "24", "3"]);
    let agreed = assert_readers_agree(&file, Dialect::Jdk);
    let wall: Vec<&Sample> = agreed.samples.iter().filter(|s| s.kind == Kind::Wall).collect();
    let cpu = agreed.samples.len() - wall.len();
    let sleeping = wall.iter().filter(|s| s.thread.starts_with("sleep-")).count();
    assert!(cpu >= 100 && wall.len() >= 200 && sleeping >= 10, "{cpu} cpu, {} wall ({sleeping} sleeping)", wall.len());
    let (Some(cpu_stacks), Some(wall_stacks)) = (&agreed.cpu, &agreed.wall) else { return };
    assert_eq!(cpu_stacks.values().sum::<i64>(), cpu as i64, "--cpu counts every CPU sample once");
    assert_eq!(wall_stacks.values().sum::<i64>(), wall.iter().map(|s| s.weight).sum::<i64>(), "--wall sums samples");
    assert!(!cpu_stacks.keys().any(|(thread, _)| thread.starts_with("sleep-")), "a sleeping thread in --cpu");
}

/// Remote frames (`remotesym=true`): `jfr print` of every JDK reads them,
/// and every reader names them `[libremote.so+0x<offset>]` alike.
#[test]
fn remote_frames_read_the_same_in_every_reader() {
    let library = native_fixture("libremote.so");
    let (file, _) = record(
        "readers-remote",
        "interval=1ms,cstack=fp,remotesym=true",
        "RemoteChain",
        &[library.to_str().unwrap(), "2", "chain"],
    );
    let agreed = assert_readers_agree(&file, Dialect::Jdk);
    let caller: Vec<&Sample> = agreed.samples.iter().filter(|s| s.thread == "native-caller").collect();
    // (Under the kernel's frames, in a sample taken as the thread was
    // scheduled: any frame.)
    let remote = caller.iter().filter(|s| s.frames.iter().any(|f| f.starts_with("[libremote.so+0x"))).count();
    assert!(
        remote >= 300 && remote * 10 >= caller.len() * 9,
        "{remote} of {} native-caller samples have a [libremote.so+0x...] frame; one: {:?}",
        caller.len(),
        caller.first().map(|s| &s.frames[..s.frames.len().min(4)])
    );
}

/// A session of several chunks (three dumps through jcmd, then `stop`):
/// read whole and chunk by chunk, `jdk.jfr.consumer` of every JDK and
/// `jfrs` read exactly the same samples, and the converter the same stacks.
#[test]
fn a_multi_chunk_recording_reads_the_same_whole_and_chunk_by_chunk() {
    let dir = scratch_dir("readers-chunks");
    let session = dir.join("session.jfr");
    let options = format!("start,interval=1ms,file={}", session.display());
    let mut run = ready_java(Some(&options), "CpuShares", &["3"]);
    run.go();
    for i in 0..3 {
        let dump = dir.join(format!("dump-{i}.jfr"));
        let result = attach_agent(run.id(), &format!("dump,file={}", dump.display()));
        assert!(result.status.success(), "dump {i}: {}", stdout(&result));
    }
    let result = attach_agent(run.id(), "stop");
    assert!(result.status.success(), "stop: {}", stdout(&result));
    assert_success(&run.wait(Duration::from_secs(60)));

    let chunk_dir = dir.join("chunks");
    std::fs::create_dir_all(&chunk_dir).unwrap();
    let chunks = split_chunks(&session, &chunk_dir);
    assert!(chunks.len() >= 4, "{} chunks after three dumps and the end", chunks.len());
    let paths: Vec<&Path> = std::iter::once(session.as_path()).chain(chunks.iter().map(|c| c.as_path())).collect();
    let readings = read_on_every_jdk(&paths);

    let whole: Vec<(&Jdk, &Recording)> = readings.iter().map(|(jdk, r)| (jdk, &r[0])).collect();
    let agreed = assert_readers_agree_with(&session, Dialect::Jdk, &whole);
    for (jdk, recordings) in &readings {
        let by_chunk: Vec<Sample> = recordings[1..].iter().flat_map(jdk_samples).collect();
        let what = format!("{} ({} chunks)", session.display(), chunks.len());
        assert_same_samples(
            &what,
            (&format!("{} whole", jdk.label()), &jdk_samples(&recordings[0])),
            (&format!("{} chunk by chunk", jdk.label()), &by_chunk),
        );
    }
    let by_chunk: Vec<Sample> = chunks.iter().flat_map(|c| read_jfrs(c).samples).collect();
    assert_same_samples("jfrs", ("whole", &agreed.samples), ("chunk by chunk", &by_chunk));
    assert_trace_keys_are_content_keys(&session);

    let Some(whole) = &agreed.cpu else { return };
    let jar = converter_jar().expect("the converter read the whole file");
    let parts: Vec<Collapsed> = chunks.iter().map(|c| converter_collapsed(&jar, c, Kind::Cpu)).collect();
    assert_same_collapsed("converter --cpu", ("whole", whole), ("sum of the chunks", &sum_collapsed(&parts)));
}

/// A stack trace key means one trace in every chunk of `session`, and a
/// trace keeps one key in every chunk it is in: a long session's keys grow
/// with its distinct stacks, not with its dumps.
fn assert_trace_keys_are_content_keys(session: &Path) {
    let mut trace_of = HashMap::new();
    let mut key_of = HashMap::new();
    let mut chunks_of: HashMap<i64, BTreeSet<usize>> = HashMap::new();
    let keys = jfrs_stack_trace_keys(session);
    for (chunk, key, trace) in &keys {
        assert_eq!(
            *trace_of.entry(*key).or_insert(trace),
            trace,
            "key {key} in chunk {chunk} of {}",
            session.display()
        );
        assert_eq!(*key_of.entry(trace).or_insert(*key), *key, "{trace} in chunk {chunk} of {}", session.display());
        chunks_of.entry(*key).or_default().insert(*chunk);
    }
    let shared = chunks_of.values().filter(|chunks| chunks.len() > 1).count();
    assert!(shared > 0, "no stack sampled in two chunks of {}: nothing to check", session.display());
    eprintln!("{} samples, {} stack traces, {shared} of them in several chunks", keys.len(), trace_of.len());
}

/// Records CpuShares with CPU and wall sampling in a dialect (`None`: the
/// default) and checks every reader agrees and sees only that dialect's
/// event names, samples of both kinds, and the dialect's setting.
fn check_dialect(test: &str, option: Option<Dialect>) {
    let expected = option.unwrap_or(Dialect::Jdk);
    let options = match option {
        Some(dialect) => format!("cpu=5ms,wall=20ms,jfrdialect={}", dialect.option()),
        None => "cpu=5ms,wall=20ms".to_owned(),
    };
    let (file, _) = record(test, &options, "CpuShares", &["2"]);
    let agreed = assert_readers_agree(&file, expected);
    let events = &agreed.event_counts;
    for name in [expected.cpu_sample(), expected.wall_sample(), expected.counter()] {
        assert!(events.get(name).is_some_and(|&n| n > 0), "{test}: no {name} events: {events:?}");
    }
    for other in Dialect::ALL.into_iter().filter(|&d| d != expected) {
        for name in [other.cpu_sample(), other.wall_sample(), other.counter(), other.endpoint()] {
            assert!(!events.contains_key(name), "{test}: {name} in a {expected:?} recording: {events:?}");
        }
    }
    assert_eq!(agreed.recording.settings.get("jfrdialect").map(String::as_str), Some(expected.option()));
}

/// `jfrdialect=datadog`: `datadog.ExecutionSample` and
/// `datadog.MethodSample`, read alike by every JDK, `jfr print` and `jfrs`.
#[test]
fn the_datadog_dialect_reads_the_same_in_every_reader() {
    check_dialect("readers-datadog", Some(Dialect::Datadog));
}

/// Without `jfrdialect=`: `jdk.ExecutionSample` and
/// `profiler.WallClockSample`, read alike by every reader.
#[test]
fn the_jdk_dialect_is_the_default() {
    check_dialect("readers-jdk", None);
}
