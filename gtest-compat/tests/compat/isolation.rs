//! One test in a child process of this test binary, for tests that own
//! process-wide state (signal dispositions, allocator statistics) and must
//! neither disturb nor be disturbed by the tests running beside them.

use std::process::Command;

const CHILD: &str = "GTEST_COMPAT_CHILD";

/// In the child — the process running only `test` (its libtest path) —
/// runs `body`. Elsewhere spawns that child with `extra_env` and checks
/// that it ran exactly that test and passed.
pub(crate) fn in_own_process(test: &str, extra_env: &[(&str, &str)], body: impl FnOnce()) {
    if std::env::var(CHILD).as_deref() == Ok(test) {
        body();
        return;
    }
    let output = Command::new(std::env::current_exe().expect("the test binary"))
        .args([test, "--exact", "--include-ignored", "--test-threads=1", "--nocapture"])
        .env(CHILD, test)
        .envs(extra_env.iter().copied())
        .output()
        .expect("run the test binary");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{test} failed in its child process ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}
