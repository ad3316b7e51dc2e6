//! Bad agent options stop the JVM at load with a message naming the
//! option and what it accepts.

use integration_tests::*;
use std::time::Duration;

#[test]
fn bad_options_refuse_to_start_the_jvm_with_a_clear_error() {
    let cases: &[(&str, &[&str])] = &[
        ("start,frequency=10", &["frequency", "unknown option", "interval"]),
        ("start,interval=fast", &["interval", "not a number"]),
        ("start,interval=10min", &["interval", "unknown unit 'min'", "ms"]),
        ("start,remotesym=maybe", &["remotesym", "not a boolean", "true", "false"]),
        ("start,file=", &["file", "requires a value"]),
        ("start,jstackdepth=0", &["jstackdepth", "out of range"]),
        ("start,cstack=lbr", &["cstack", "fp, dwarf"]),
        ("start,cstack=vmx,javawalk=asgct", &["javawalk", "cstack=fp, dwarf, sframe or no"]),
        ("start,cstack=vm,verifywalk=sometimes", &["verifywalk", "not a boolean"]),
        ("start,interval=1ns", &["interval", "below the floor of 100us"]),
        ("start,wall=1us", &["wall", "below the floor of 100us"]),
        ("start,event=cpu,event=wall", &["event", "given twice", "event=cpu", "event=wall"]),
        ("start,event=wall,cpu", &["'cpu' contradicts 'event=wall'"]),
        ("start,,", &["empty"]),
        ("start,nativemem=0", &["nativemem", "'0'"]),
        ("start,nativemem=abc", &["nativemem", "'abc'"]),
        ("start,nofree", &["nofree", "nativemem"]),
    ];
    let runs: Vec<_> = cases
        .iter()
        .map(|(options, _)| ChildGuard::spawn(&mut java_command(Some(options), &[], "CpuShares", &["0"])))
        .collect();
    for (run, (options, expected)) in runs.into_iter().zip(cases) {
        let output = run.wait(Duration::from_secs(60));
        assert!(!output.status.success(), "{options}: the JVM started");
        let err = stderr(&output);
        for needle in *expected {
            assert!(err.contains(needle), "{options}: stderr lacks {needle:?}:\n{err}");
        }
    }
}

/// A valid option that cannot be honoured in this combination: `start`
/// reports why and the program runs on unprofiled.
#[test]
fn verifywalk_without_the_hotspot_walker_is_refused_and_the_jvm_runs() {
    let options = "start,cpu,cstack=fp,javawalk=asgct,verifywalk";
    let output = run_java(Some(options), "CpuShares", &["0"], Duration::from_secs(60));
    assert_success(&output);
    let err = stderr(&output);
    assert!(err.contains("verifywalk") && err.contains("javawalk=hotspot"), "{err}");
    assert!(stdout(&output).contains("cpu heavy"), "the program ran to its end");
}

#[test]
fn version_and_status_at_load_let_the_jvm_run() {
    let output = run_java(Some("version"), "CpuShares", &["0"], Duration::from_secs(60));
    assert_success(&output);
    assert!(stdout(&output).contains("profiler "), "{}", stdout(&output));
}
