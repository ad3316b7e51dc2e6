//! The signal handlers: SIGPROF for CPU samples, SIGVTALRM for wall-clock
//! samples, and the fixed routine around each sample; and the overhead
//! governor's calibration handler, which only counts its timer's signals.

use super::chain::PREVIOUS;
use super::origin::{self, Origin};
use super::siginfo::RawSiginfo;
use super::{with_active, SampleRequest, Sampler};
use crate::clock::monotonic_ns;
use crate::counters::{self, Counter};
use crate::os_thread::current_tid;
use crate::storage::samples::SampleKind;
use std::ffi::{c_int, c_void};

/// Saves errno on creation and restores it when dropped.
pub struct ErrnoGuard(c_int);

impl ErrnoGuard {
    pub fn save() -> Self {
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

/// Takes one sample of the interrupted thread `tid` and accounts its cost.
fn take_sample(sampler: &Sampler, request: SampleRequest, tid: u32) {
    let kind = request.kind;
    let start = monotonic_ns();
    sampler.record(request, start, tid);
    let elapsed = monotonic_ns().saturating_sub(start);
    counters::add(Counter::HandlerNanos, elapsed);
    counters::increment(match kind {
        SampleKind::Wall => Counter::WallSignals,
        _ => Counter::CpuSignals,
    });
    counters::record_handler_ns(elapsed);
}

/// The siginfo the kernel passed a handler, if any.
fn siginfo<'a>(info: *mut libc::siginfo_t) -> Option<&'a RawSiginfo> {
    // SAFETY: the kernel passes a valid siginfo_t (or none); RawSiginfo has
    // its layout, and it lives while the handler runs.
    unsafe { info.cast::<RawSiginfo>().as_ref() }
}

/// Installed for SIGPROF with SA_SIGINFO.
pub extern "C" fn on_sigprof(signo: c_int, info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    let _errno = ErrnoGuard::save();
    let Some(view) = siginfo(info) else { return };
    let ours = with_active(|sampler| match sampler.origins.classify_sigprof(view) {
        Origin::Ours { weight, tid, ring } => {
            let tid = tid.unwrap_or_else(current_tid);
            // A ring is read by the thread its counter samples only (a
            // signal queued before its descriptor was closed and reused
            // names another thread's).
            let kernel = ring.filter(|_| current_tid() == tid);
            let request = SampleRequest::signal(ucontext, weight, SampleKind::Cpu, kernel);
            take_sample(sampler, request, tid);
            true
        }
        Origin::Foreign => false,
    });
    // Forwarded outside `with_active`: the previous handler may not return.
    if ours != Some(true) {
        counters::increment(Counter::ForeignSignals);
        PREVIOUS.sigprof.forward(signo, info, ucontext);
    }
}

/// Installed for SIGVTALRM with SA_SIGINFO.
pub extern "C" fn on_sigvtalrm(signo: c_int, info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    let _errno = ErrnoGuard::save();
    let Some(view) = siginfo(info) else { return };
    let ours = with_active(|sampler| match sampler.origins.classify_sigvtalrm(view) {
        Some(weight) => {
            let request = SampleRequest::signal(ucontext, weight, SampleKind::Wall, None);
            take_sample(sampler, request, current_tid());
            true
        }
        None => false,
    });
    // Forwarded outside `with_active`: the previous handler may not return.
    if ours != Some(true) {
        counters::increment(Counter::ForeignSignals);
        PREVIOUS.sigvtalrm.forward(signo, info, ucontext);
    }
}

/// Installed for SIGPROF, with SA_SIGINFO, only while the overhead governor
/// measures what delivering a signal costs (`governor::signal_cost`):
/// counts the calibration signals (its timer's, and those queued by this
/// process) and does nothing else, so that what they cost is delivery
/// alone; forwards every other signal.
pub extern "C" fn on_calibration(signo: c_int, info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    let _errno = ErrnoGuard::save();
    if let Some(view) = siginfo(info) {
        if origin::is_calibration(view) {
            counters::calibration_signal();
            return;
        }
    }
    PREVIOUS.calibration.forward(signo, info, ucontext);
}
