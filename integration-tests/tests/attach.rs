//! Starting through `jcmd` in a running JVM, and living with signals that
//! are not ours.

use integration_tests::*;
use std::time::Duration;

#[test]
fn start_by_attach_samples_threads_that_already_run() {
    let recording = attached_recording("attach_start", "interval=5ms", "CpuShares", &["5"]);
    for thread in ["heavy", "light"] {
        let samples = recording.samples().filter(|e| e.thread == thread).count();
        assert!(samples > 20, "thread {thread} started before the agent: {samples} samples");
    }
}

/// The HotSpot walker started through jcmd: the VMStructs layout and the
/// JavaThread lookup are set up on the attach thread, and the stacks agree
/// with AsyncGetCallTrace.
#[test]
fn the_hotspot_walker_starts_by_attach() {
    let recording = attached_recording("attach_vm", "cpu=1ms,cstack=vmx,verifywalk", "DeepStack", &["100", "4"]);
    assert_walks_agree("attached vmx", &recording);
}

#[test]
fn invalid_options_through_attach_leave_the_jvm_running() {
    let mut run = ready_java(None, "CpuShares", &["2"]);
    let result = attach_agent(run.id(), "start,interval=fast");
    let text = String::from_utf8_lossy(&result.stdout);
    assert!(text.contains("return code: -1") || !result.status.success(), "{text}");
    run.go();
    let output = run.wait(Duration::from_secs(60));
    assert_success(&output);
    assert!(stderr(&output).contains("interval: 'fast' is not a number"), "{}", stderr(&output));
    assert!(stdout(&output).contains("cpu heavy"), "the program ran to its end");
}

#[test]
fn foreign_sigprof_is_forwarded_not_fatal() {
    let file = scratch_file("foreign_signal", "f.jfr");
    let options = format!("start,file={}", file.display());
    let mut run = ready_java(Some(&options), "CpuShares", &["3"]);
    for _ in 0..20 {
        // SAFETY: sending a signal to our own child process.
        assert_eq!(unsafe { libc::kill(run.id() as libc::pid_t, libc::SIGPROF) }, 0);
    }
    // Only now may the program run towards its end (and restore the
    // default disposition, which a late signal would find).
    run.go();
    assert_success(&run.wait(Duration::from_secs(60)));
    assert!(read_recording(&file).counter("signals_forwarded") >= 1);
}

/// Attached to a JVM that already runs 50 threads: the CPU engine arms every
/// one of them (they exist before `start`), so all are sampled once they
/// burn CPU, and each is named with its Java name (longer than a kernel
/// thread name can be, so it was found through the JavaThread).
#[test]
fn attach_samples_threads_that_already_exist() {
    let file = scratch_file("attach-50", "attach.jfr");
    let mut command = java_command(None, &[], "ManyThreads", &["50", "150"]);
    command.stdin(std::process::Stdio::piped());
    let mut run = ChildGuard::spawn(&mut command);
    run.wait_for_line("READY");
    assert_attached(run.id(), &format!("start,cpu=2ms,file={}", file.display()));
    run.send("go\n");
    assert_success(&run.wait(Duration::from_secs(120)));
    let recording = read_recording(&file);
    let mut per_thread: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for sample in recording.samples().filter(|e| e.thread.starts_with("spinning-")) {
        *per_thread.entry(sample.thread.as_str()).or_default() += 1;
    }
    let missing: Vec<String> =
        (0..50).map(|i| format!("spinning-worker-{i}")).filter(|t| !per_thread.contains_key(t.as_str())).collect();
    assert!(missing.is_empty(), "never sampled: {missing:?}");
    assert!(per_thread.values().all(|&n| n >= 10), "{per_thread:?}");
}
