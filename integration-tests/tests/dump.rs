//! `dump` through `jcmd JVMTI.agent_load` while sampling continues, and the
//! session file written at VM death.

use integration_tests::*;
use std::time::Duration;

#[test]
fn dump_writes_a_complete_recording_while_sampling_continues() {
    let dir = scratch_dir("dump");
    let session = dir.join("session.jfr");
    let dumped = dir.join("dumped.jfr");
    let options = format!("start,interval=2ms,file={}", session.display());
    let mut run = ready_java(Some(&options), "CpuShares", &["6"]);
    run.go();
    let agent = agent_library();
    let result =
        jcmd(run.id(), &["JVMTI.agent_load", agent.to_str().unwrap(), &format!("\"dump,file={}\"", dumped.display())]);
    assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stdout));

    // The dump is complete and readable now, while the JVM keeps sampling.
    let first = read_recording(&dumped);
    let first_samples = first.samples().count();
    assert!(first_samples > 0);

    let output = run.wait(Duration::from_secs(60));
    assert_success(&output);
    // The session file holds the whole session: both chunks.
    let whole = read_recording(&session);
    assert!(whole.samples().count() > first_samples);
    let last_dump_end = first.samples().map(|e| e.start_epoch_ns).max().unwrap();
    assert!(whole.samples().any(|e| e.start_epoch_ns > last_dump_end), "sampling continued after the dump");
}
