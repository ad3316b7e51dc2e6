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
    for (label, wall) in [("5ms", "wall=5ms,walltpt=1024"), ("floor", "wall=100us,walltpt=1024")] {
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
/// (the README's bound), with the recording written.
#[test]
fn stop_returns_promptly_while_the_wall_clock_sampler_overruns() {
    let dir = scratch_dir("hostile-wall-stop");
    let file = dir.join("stopped.jfr");
    let options = format!("start,wall=100us,walltpt=1024,file={}", file.display());
    let mut run = ChildGuard::spawn(&mut gated_java_command(Some(&options), "WallThreads", &["0", "1000", "1"]));
    run.wait_for_line("READY");
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
