//! Contended monitor profiling (`lock=`) on a real JVM: every wait past the
//! threshold is recorded with its duration, the monitor's class and the
//! waiting stack.

use integration_tests::readers::{converter_collapsed_as, converter_jar};
use integration_tests::*;
use std::time::Duration;

#[test]
fn monitor_waits_add_up_to_what_the_threads_measured() {
    let dir = scratch_dir("lock_shares");
    let file = dir.join("lock.jfr");
    let output = run_java(
        Some(&format!("start,lock=100us,file={}", file.display())),
        "LockShares",
        &["3"],
        Duration::from_secs(60),
    );
    assert_success(&output);
    assert_jfr_tool_accepts(&file);
    let out = stdout(&output);
    let measured: f64 = out.lines().find_map(|l| l.strip_prefix("waited ")).expect("waited").trim().parse().unwrap();
    let recording = read_recording(&file);
    assert_eq!(recording.settings.get("lock").map(String::as_str), Some("100000 ns"));
    let waits: Vec<&Event> = recording
        .events
        .iter()
        .filter(|e| e.kind == "jdk.JavaMonitorEnter" && e.thread.starts_with("contender-"))
        .collect();
    assert!(waits.len() >= 50, "only {} monitor waits recorded", waits.len());
    let recorded: f64 = waits.iter().map(|e| e.field("durationNanos").parse::<f64>().unwrap()).sum();
    assert!(recorded >= 0.7 * measured, "recorded {recorded:.0} ns of {measured:.0} ns measured");
    assert!(recorded <= 1.05 * measured, "recorded {recorded:.0} ns, more than the {measured:.0} ns measured");
    for wait in &waits {
        assert!(wait.field("monitorClass").contains("LockShares$Monitor"), "{:?}", wait.fields);
        assert!(wait.frames.iter().any(|f| f.method == "waitForMonitor"), "{:?}", wait.frames);
    }
    assert!(recording.counter("lock_samples") >= waits.len() as i64);

    // async-profiler's converter reads the waits too.
    let Some(jar) = converter_jar() else { return };
    let collapsed = converter_collapsed_as(&jar, &file, "--lock");
    let in_wait: i64 = collapsed
        .iter()
        .filter(|((_, frames), _)| frames.iter().any(|f| f.ends_with("LockShares.waitForMonitor")))
        .map(|(_, n)| n)
        .sum();
    assert!(in_wait as usize >= waits.len(), "converter: {in_wait} waits in waitForMonitor of {}", waits.len());
}

#[test]
fn bad_lock_values_are_option_errors() {
    for bad in ["lock=abc", "lock=0"] {
        let output = run_java(Some(&format!("start,{bad}")), "LockShares", &["0"], Duration::from_secs(30));
        let err = stderr(&output);
        assert!(err.contains("lock") && err.contains("ms"), "{bad}: {err}");
    }
}
