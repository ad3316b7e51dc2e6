//! The SIGPROF handler: the fixed routine around each CPU sample.

use super::chain::PREVIOUS_SIGPROF;
use super::origin::{classify_sigprof, Origin};
use super::siginfo::RawSiginfo;
use super::{with_active, SampleRequest};
use crate::clock::monotonic_ns;
use crate::counters::{self, Counter};
use jfr_writer::ThreadState;
use std::ffi::{c_int, c_void};

/// Saves errno on creation and restores it when dropped.
struct ErrnoGuard(c_int);

impl ErrnoGuard {
    fn save() -> Self {
        // SAFETY: __errno_location returns the calling thread's errno slot.
        Self(unsafe { *libc::__errno_location() })
    }
}

impl Drop for ErrnoGuard {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = self.0 };
    }
}

/// The calling thread's kernel id. Signal-safe.
#[inline]
pub fn current_tid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// Installed for SIGPROF with SA_SIGINFO.
pub extern "C" fn on_sigprof(signo: c_int, info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    let _errno = ErrnoGuard::save();
    if info.is_null() {
        return;
    }
    // SAFETY: the kernel passes a valid siginfo_t; RawSiginfo has its layout.
    let view = unsafe { &*info.cast::<RawSiginfo>() };
    match classify_sigprof(view) {
        Origin::Ours { weight, tid } => {
            let start = monotonic_ns();
            let request = SampleRequest { ucontext, weight, state: ThreadState::Runnable };
            let tid = tid.unwrap_or_else(current_tid);
            with_active(|sampler| sampler.record(request, start, tid));
            let elapsed = monotonic_ns().saturating_sub(start);
            counters::add(Counter::HandlerNanos, elapsed);
            crate::latency::HANDLER.record(elapsed);
        }
        Origin::Foreign => {
            counters::increment(Counter::ForeignSignals);
            PREVIOUS_SIGPROF.forward(signo, info, ucontext);
        }
    }
}
