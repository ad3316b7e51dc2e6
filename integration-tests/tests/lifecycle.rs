//! Start/stop cycles and thread churn on a real JVM.

use integration_tests::*;
use std::time::Duration;

fn measure(out: &str, prefix: &str) -> (f64, f64) {
    let line = out.lines().find_map(|l| l.strip_prefix(prefix)).unwrap_or_else(|| panic!("{prefix}: {out}"));
    let value = |key: &str| -> f64 {
        let field = line.split_whitespace().find_map(|f| f.strip_prefix(key)).unwrap();
        field.parse().unwrap()
    };
    (value("fds="), value("rss="))
}

/// 100 start/stop cycles (CPU at 1 ms and wall clock, a recording written
/// each time): open file descriptors and resident memory after the last
/// cycle are within 10% of what they were after the first five (signal
/// handlers restored, perf descriptors and timers closed, memory unmapped).
#[test]
fn a_hundred_start_stop_cycles_return_fds_and_memory() {
    let dir = scratch_dir("cycles");
    let jvm = ["-Xms128m", "-Xmx128m", "-XX:+AlwaysPreTouch"];
    let mut command = java_command(Some(""), &jvm, "Cycles", &[dir.to_str().unwrap(), "100", "5"]);
    let output = ChildGuard::spawn(&mut command).wait(Duration::from_secs(180));
    assert_success(&output);
    let out = stdout(&output);
    let (warm_fds, warm_rss) = measure(&out, "WARM ");
    let (end_fds, end_rss) = measure(&out, "END ");
    assert!(end_fds <= warm_fds * 1.1, "fds {warm_fds} -> {end_fds}");
    assert!(end_rss <= warm_rss * 1.1, "RSS {warm_rss} kB -> {end_rss} kB");
    read_recording(&dir.join("cycle.jfr"));
}

/// The churn run: 16 short-lived threads started and joined
/// continuously, classes defined in throwaway loaders and unloaded
/// continuously, CPU and wall clock at 1 ms, AsyncGetCallTrace
/// (`cstack=fp,javawalk=asgct`), a dump every 100 ms, for 20 s (`CHURN_SECONDS`): the JVM survives and every dump parses with
/// `jdk.jfr.consumer` with every sample's thread, stack and frames
/// resolvable. The ten-minute run with every kind of profiling is the
/// `soak` benchmark's.
#[test]
fn thread_and_class_churn_under_sampling_and_dumps() {
    let seconds = std::env::var("CHURN_SECONDS").unwrap_or_else(|_| "20".to_owned());
    churn("churn", &seconds, "cstack=fp,javawalk=asgct");
}

/// The same churn with Java frames walked from HotSpot's structures.
#[test]
fn thread_and_class_churn_with_the_hotspot_walker() {
    churn("churn_vm", "15", "cstack=vm");
    churn("churn_vmx", "15", "cstack=vmx");
}

/// The churn with allocation and lock profiling in the same session: all
/// three kinds of event in the dumps, every dump parsing.
#[test]
fn thread_and_class_churn_with_allocations_and_locks() {
    let out = churn("churn_alloc_lock", "15", "alloc=512k,lock=1ms");
    for kind in ["ALLOC_SAMPLES", "MONITOR_WAITS", "PARK_WAITS"] {
        assert!(summary_value(&out, kind) > 0, "no {kind}: {out}");
    }
}

/// Runs the churn fixture for `seconds` with extra agent `options`; returns
/// its summary.
fn churn(test: &str, seconds: &str, options: &str) -> String {
    let dir = scratch_dir(test);
    let mut command = java_command(Some(""), &["-Xmx256m"], "Churn", &[dir.to_str().unwrap(), seconds, options]);
    let output = ChildGuard::spawn(&mut command).wait(Duration::from_secs(300));
    assert_success(&output);
    let out = stdout(&output);
    let errors = error_lines(&out);
    assert!(errors.is_empty(), "{test}: {errors:#?}");
    let value = |key: &str| summary_value(&out, key);
    let dumps = value("DUMPS");
    assert!(dumps >= 10, "{test}: {out}");
    assert_eq!(value("VERIFIED"), dumps, "{test}: every dump parsed");
    // At least 1000 threads and 100 unloaded classes a minute.
    let seconds: u64 = seconds.parse().expect("seconds");
    assert!(value("THREADS") >= seconds * 1000 / 60, "{test}: {out}");
    assert!(value("CLASSES_UNLOADED") >= seconds * 100 / 60, "{test}: {out}");
    assert!(value("SAMPLES") > 0 && value("WALL_SAMPLES") > 0, "{test}: {out}");
    println!("{test}: {out}");
    out
}
