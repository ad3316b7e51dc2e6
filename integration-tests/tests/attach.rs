//! Starting through `jcmd` in a running JVM, and living with signals that
//! are not ours.

use integration_tests::*;
use std::time::Duration;

#[test]
fn start_by_attach_samples_threads_that_already_run() {
    let dir = scratch_dir("attach_start");
    let file = dir.join("attached.jfr");
    let run = ChildGuard::spawn(&mut java_command(None, &[], "CpuShares", &["5"]));
    wait_attachable(run.id());
    let result = attach_agent(run.id(), &format!("start,interval=5ms,file={}", file.display()));
    assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stdout));
    assert_success(&run.wait(Duration::from_secs(60)));

    let recording = read_recording(&file);
    for thread in ["heavy", "light"] {
        let samples = recording.samples().filter(|e| e.thread == thread).count();
        assert!(samples > 20, "thread {thread} started before the agent: {samples} samples");
    }
}

#[test]
fn invalid_options_through_attach_leave_the_jvm_running() {
    let run = ChildGuard::spawn(&mut java_command(None, &[], "CpuShares", &["2"]));
    wait_attachable(run.id());
    let result = attach_agent(run.id(), "start,interval=fast");
    let text = String::from_utf8_lossy(&result.stdout);
    assert!(text.contains("return code: -1") || !result.status.success(), "{text}");
    let output = run.wait(Duration::from_secs(60));
    assert_success(&output);
    assert!(stderr(&output).contains("interval: 'fast' is not a number"), "{}", stderr(&output));
    assert!(stdout(&output).contains("cpu heavy"), "the program ran to its end");
}

#[test]
fn foreign_sigprof_is_forwarded_not_fatal() {
    let dir = scratch_dir("foreign_signal");
    let file = dir.join("f.jfr");
    let run =
        ChildGuard::spawn(&mut java_command(Some(&format!("start,file={}", file.display())), &[], "CpuShares", &["3"]));
    wait_attachable(run.id());
    for _ in 0..20 {
        // SAFETY: sending a signal to our own child process.
        assert_eq!(unsafe { libc::kill(run.id() as libc::pid_t, libc::SIGPROF) }, 0);
    }
    assert_success(&run.wait(Duration::from_secs(60)));
    assert!(read_recording(&file).counter("signals_forwarded") >= 1);
}
