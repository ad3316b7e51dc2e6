//! The boundary every function the JVM calls runs its body in: a panic
//! becomes a log line and a fallback value, never an unwind into the JVM.

use crate::log;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `f`, turning a panic into `fallback` (and a log line) instead of
/// unwinding into the JVM.
pub(crate) fn ffi_boundary<R>(what: &str, fallback: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        log::error!("internal error in {what}; the profiler keeps the JVM running");
        fallback
    })
}
