//! Skipping a test whose prerequisite is missing, visibly.
//!
//! The test harness keeps what `println!`/`eprintln!` print unless the test
//! fails, so a skip announced with them passes without a trace in a log.
//! [`skip`] writes to the process's stderr directly, which the harness does
//! not capture, and under CI (`CI` set, as CI runners do) fails the test
//! instead when `.ci/run` installs the prerequisite: there its absence is a
//! broken CI, not a reason to check less.
#![forbid(unsafe_code)]

use std::io::Write;

/// Whether CI provides a test's prerequisite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InCi {
    /// `.ci/run` installs it: missing under CI fails the test.
    Required,
    /// CI does not provide it either: skipped (visibly) there too.
    Optional,
}

/// Whether a value of `CI` means CI: set to anything but empty, `0` or
/// `false`.
fn means_ci(value: Option<&str>) -> bool {
    value.is_some_and(|v| !matches!(v, "" | "0" | "false"))
}

/// Announces that the calling test checks nothing (more) for want of a
/// prerequisite: writes `SKIPPED <test>: <reason>` to stderr, or panics
/// under CI if the prerequisite is [`InCi::Required`]. The caller returns.
pub fn skip(reason: &str, in_ci: InCi) {
    let thread = std::thread::current();
    // The harness runs each test on a thread named after it.
    let test = thread.name().unwrap_or("a test");
    if in_ci == InCi::Required && means_ci(std::env::var("CI").ok().as_deref()) {
        panic!("{test}: {reason} (CI installs this: it may not be skipped under CI)");
    }
    // A failed write to stderr leaves nothing better to report to.
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {test}: {reason}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_is_any_value_but_empty_zero_or_false() {
        for value in ["true", "1", "yes"] {
            assert!(means_ci(Some(value)), "{value}");
        }
        for value in [None, Some(""), Some("0"), Some("false")] {
            assert!(!means_ci(value), "{value:?}");
        }
    }
}
