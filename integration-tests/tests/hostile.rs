//! Hostile settings and bad input (issue 16): the profiler never hangs the
//! JVM, never loses a session, never reports success for a failure.

use integration_tests::*;
use std::time::{Duration, Instant};

/// Deadline for a JVM that should exit on its own within seconds. It only
/// detects a hang (the test fails on expiry); nothing waits for it.
const HANG: Duration = Duration::from_secs(120);

/// 1,000 blocked threads, and a wall-clock sampler asked to signal all of
/// them every tick: far more than one sampler thread can send in an
/// interval. The JVM still exits by itself when `main` returns, the
/// recording written at VM death parses, and the ticks the sampler could
/// not keep are counted. (Before the fix the sampler held the lock that
/// `stop` waits for across its loop, and the JVM never exited.)
#[test]
fn an_overloaded_wall_clock_sampler_does_not_hold_the_jvm_at_exit() {
    let dir = scratch_dir("hostile-wall-exit");
    let mut runs = Vec::new();
    // overhead=0: the governor would stretch the intervals and hide the overload.
    for (label, wall) in [("5ms", "wall=5ms,walltpt=1024,overhead=0"), ("floor", "wall=100us,walltpt=1024,overhead=0")]
    {
        let file = dir.join(format!("{label}.jfr"));
        let options = format!("start,{wall},file={}", file.display());
        let run = ChildGuard::spawn(&mut java_command(Some(&options), &[], "WallThreads", &["0", "1000", "2"]));
        runs.push((label, file, run, Instant::now()));
    }
    for (label, file, run, started) in runs {
        let output = run.wait(HANG);
        println!("{label}: the JVM ran {:?}", started.elapsed());
        assert_success(&output);
        let recording = read_recording(&file);
        let skipped = recording.counter("wall_ticks_skipped");
        println!("{label}: {} wall samples, {skipped} ticks skipped", recording.wall_samples().count());
        assert!(recording.wall_samples().count() > 0, "{label}: no wall samples");
        if label == "floor" {
            assert!(skipped > 0, "{label}: 1,000 signals every 100 us cannot all be sent");
        }
    }
}

/// `stop` through jcmd while the overloaded sampler runs returns promptly
/// (the bound docs/threads.md states), with the recording written.
#[test]
fn stop_returns_promptly_while_the_wall_clock_sampler_overruns() {
    let file = scratch_file("hostile-wall-stop", "stopped.jfr");
    let options = format!("start,wall=100us,walltpt=1024,overhead=0,file={}", file.display());
    let mut run = ready_java(Some(&options), "WallThreads", &["0", "1000", "1"]);
    let started = Instant::now();
    let result = jcmd(run.id(), &["JVMTI.agent_load", agent_library().to_str().unwrap(), "\"stop\""]);
    let took = started.elapsed();
    println!("jcmd stop took {took:?}");
    assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stdout));
    assert!(took < Duration::from_secs(30), "stop took {took:?}");
    run.go();
    assert_success(&run.wait(HANG));
    let recording = read_recording(&file);
    assert!(recording.wall_samples().count() > 0);
    assert!(recording.counter("wall_ticks_skipped") > 0);
}

/// Paths that cannot take a recording: a missing directory, a file on
/// `/proc` (it looks regular), a directory.
fn unwritable(dir: &std::path::Path) -> Vec<(String, &'static str)> {
    vec![
        (dir.join("no/such/dir/x.jfr").display().to_string(), "No such file or directory"),
        ("/proc/self/mem".to_owned(), "pseudo file system"),
        (dir.display().to_string(), "is a directory"),
    ]
}

/// `-agentpath:...=start,file=X` with an X that cannot be written: the JVM
/// refuses to start (it used to run, exit 0, and lose the recording).
#[test]
fn an_unwritable_file_at_agentpath_refuses_to_start_the_jvm() {
    let dir = scratch_dir("hostile-file-agentpath");
    let runs: Vec<_> = unwritable(&dir)
        .into_iter()
        .map(|(path, reason)| {
            let options = format!("start,cpu=10ms,file={path}");
            (path, reason, ChildGuard::spawn(&mut java_command(Some(&options), &[], "CpuShares", &["0"])))
        })
        .collect();
    for (path, reason, run) in runs {
        let output = run.wait(HANG);
        assert!(!output.status.success(), "{path}: the JVM started");
        let err = stderr(&output);
        assert!(err.contains("cannot write the recording to") && err.contains(reason), "{path}: {err}");
        assert!(!stdout(&output).contains("cpu heavy"), "{path}: the program ran");
    }
    // A 100 KB path is refused with a message that repeats 200 characters of it.
    let long = format!("{}/{}", dir.display(), "p".repeat(100_000));
    let output = run_java(Some(&format!("start,file={long}")), "CpuShares", &["0"], HANG);
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(err.len() < 2000 && err.contains("bytes in all)") && err.contains("File name too long"), "{err}");
}

/// jcmd: a `start` whose file cannot be written is an error (with the
/// reason) and nothing runs; a `stop` whose file cannot be written, or
/// whose session file was removed, is an error and profiling continues;
/// a `stop` naming a good file then gets the whole recording.
#[test]
fn unwritable_files_through_jcmd_are_errors_and_the_session_survives() {
    let dir = scratch_dir("hostile-file-jcmd");
    let mut run = ready_java(None, "CpuShares", &["3"]);
    let refused = |result: std::process::Output, what: &str| {
        let text = String::from_utf8_lossy(&result.stdout).into_owned();
        assert!(text.contains("return code: -1") || !result.status.success(), "{what}: {text}");
    };
    for (path, _) in unwritable(&dir) {
        refused(attach_agent(run.id(), &format!("start,cpu=5ms,file={path}")), &path);
    }
    let status = attach_agent(run.id(), "status");
    assert!(status.status.success());

    let session = dir.join("session.jfr");
    assert_attached(run.id(), &format!("start,cpu=5ms,file={}", session.display()));
    assert!(session.exists(), "the session file is created at start");
    run.go();
    refused(attach_agent(run.id(), &format!("stop,file={}", dir.join("no/such/dir/x.jfr").display())), "stop");
    std::fs::remove_file(&session).unwrap();
    refused(attach_agent(run.id(), "stop"), "stop after the session file was removed");
    let rescued = dir.join("rescued.jfr");
    assert_attached(run.id(), &format!("stop,file={}", rescued.display()));
    let output = run.wait(HANG);
    assert_success(&output);
    let err = stderr(&output);
    for (path, reason) in unwritable(&dir) {
        assert!(err.contains(&format!("cannot write the recording to {path}: ")) && err.contains(reason), "{err}");
    }
    assert!(err.contains("profiling continues") && err.contains("removed or replaced"), "{err}");
    let recording = read_recording(&rescued);
    assert!(recording.samples().count() > 50, "{} samples", recording.samples().count());
    assert!(recording.counter("session_file_write_failures") >= 1);
}

/// What `-Xcheck:jni` prints (on the JVM's stdout, `tty`) when native
/// code misuses JNI.
fn assert_no_jni_warnings(label: &str, output: &std::process::Output) {
    let text = format!("{}{}", stdout(output), stderr(output));
    for warning in ["WARNING: JNI local refs", "WARNING in native method", "FATAL ERROR in native method"] {
        assert!(!text.contains(warning), "{label}: {warning}:\n{text}");
    }
}

/// `java -Xcheck:jni` with the agent in every mode and every entry point
/// (-agentpath with a jcmd dump, a jcmd start, the Java API): no JNI
/// warning. Starting used to list every loaded class as local references
/// without room for them (`JNI local refs: 443, exceeds capacity: 32`).
#[test]
fn no_jni_warnings_under_xcheck_jni() {
    let dir = scratch_dir("hostile-xcheck-jni");
    let checked = |options: Option<&str>, main: &str, args: &[&str]| {
        let mut command = java_command(options, &["-Xcheck:jni", "-Dfixture.gate=true"], main, args);
        command.stdin(std::process::Stdio::piped());
        ChildGuard::spawn(&mut command)
    };
    // Lets a gated run end: no JNI warning, and samples in `recording`.
    let finish = |mut run: ChildGuard, how: &str, recording: &std::path::Path| {
        run.go();
        let output = run.wait(HANG);
        assert_success(&output);
        assert_no_jni_warnings(how, &output);
        assert!(read_recording(recording).samples().count() > 0);
    };

    let session = dir.join("agentpath.jfr");
    let options = format!("start,cpu=1ms,wall=5ms,alloc=64k,lock=1ms,file={}", session.display());
    let mut run = checked(Some(&options), "CpuShares", &["2"]);
    run.wait_for_line("READY");
    let dumped = dir.join("dumped.jfr");
    assert_attached(run.id(), &format!("dump,file={}", dumped.display()));
    finish(run, "agentpath", &session);
    read_recording(&dumped);

    let attached = dir.join("attached.jfr");
    let mut run = checked(None, "CpuShares", &["2"]);
    run.wait_for_line("READY");
    assert_attached(run.id(), &format!("start,cpu=1ms,wall=5ms,file={}", attached.display()));
    finish(run, "jcmd", &attached);

    let api = dir.join("api");
    std::fs::create_dir_all(&api).unwrap();
    let library = agent_library();
    let run = checked(None, "ApiUse", &[library.to_str().unwrap(), api.to_str().unwrap()]);
    let output = run.wait(HANG);
    assert_success(&output);
    assert!(stdout(&output).lines().any(|l| l == "DONE"), "{}", stdout(&output));
    assert_no_jni_warnings("Java API", &output);
}

/// Limits the size of files the JVM `pid` may write (`RLIMIT_FSIZE`): past
/// it writes fail with EFBIG, as on a full disk (HotSpot ignores SIGXFSZ).
fn limit_file_size(pid: u32, bytes: u64) {
    let limit = libc::rlimit { rlim_cur: bytes, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: a valid rlimit for our own child process; no old value wanted.
    let status = unsafe { libc::prlimit(pid as libc::pid_t, libc::RLIMIT_FSIZE, &limit, std::ptr::null_mut()) };
    assert_eq!(status, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// Writes that fail after `start` (files limited to 4 KiB, as on a full
/// disk): a dump to the session file is an error and the chunk is kept;
/// a `stop` whose write fails after its check keeps the stopped session's
/// recording; once files can grow again, `stop,file=` writes all of it.
#[test]
fn a_recording_that_cannot_be_written_is_kept_until_it_can() {
    let dir = scratch_dir("hostile-file-full");
    let session = dir.join("session.jfr");
    let options = format!("start,cpu=1ms,file={}", session.display());
    let mut run = ready_java(Some(&options), "CpuShares", &["3"]);
    limit_file_size(run.id(), 4096);
    run.go();
    let refused = |result: std::process::Output, what: &str| {
        let text = String::from_utf8_lossy(&result.stdout).into_owned();
        assert!(text.contains("return code: -1") || !result.status.success(), "{what}: {text}");
    };
    refused(attach_agent(run.id(), "dump"), "dump to the full session file");
    let rescued = dir.join("rescued.jfr");
    let stop = format!("stop,file={}", rescued.display());
    refused(attach_agent(run.id(), &stop), "stop to a full disk");
    limit_file_size(run.id(), libc::RLIM_INFINITY);
    assert_attached(run.id(), &stop);
    let output = run.wait(HANG);
    assert_success(&output);
    let err = stderr(&output);
    assert!(err.contains("cannot write the session file") && err.contains("kept in memory"), "{err}");
    assert!(err.contains("its recording is kept: stop,file=PATH writes it"), "{err}");
    let recording = read_recording(&rescued);
    assert!(recording.samples().count() > 0);
    assert!(recording.counter("session_file_write_failures") >= 1);
    assert_eq!(recording.counter("chunks_dropped"), 0);
    assert_eq!(recording.counter("chunks_written"), 2, "the dump's chunk and the last one");
}
