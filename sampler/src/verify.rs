//! `verifywalk`: every sample the HotSpot walker takes is walked again by
//! AsyncGetCallTrace, and counters say how often each found Java frames,
//! how often both did and agreed (same methods and bytecode indexes, in
//! order), and how long each took. For tests and benchmarks.

use super::asgct::{AsgctFn, AsgctFrame};
use super::asgct_walk;
use super::java_thread::JavaThreads;
use crate::counters::{self, Counter};
use frames::Frame;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};

/// Whether AsyncGetCallTrace walks before the HotSpot walker this time
/// (every other sample, by the session's `turns`). Signal-safe.
pub(super) fn reference_goes_first(turns: &AtomicU64) -> bool {
    turns.fetch_add(1, Ordering::Relaxed).is_multiple_of(2)
}

/// AsyncGetCallTrace's frames as the stack keeps them, and
/// whether they filled `capacity`.
pub(super) struct Reference<'a> {
    frames: &'a [AsgctFrame],
    full: bool,
}

/// Walks the interrupted stack with AsyncGetCallTrace into `raw` (room for
/// `capacity` frames), timed. Signal-safe.
pub(super) fn reference_walk<'a>(
    asgct: Option<AsgctFn>,
    threads: &JavaThreads,
    raw: *mut AsgctFrame,
    capacity: usize,
    ucontext: *mut c_void,
) -> Option<Reference<'a>> {
    let asgct = asgct?;
    let env = threads.current_env();
    if env.is_null() {
        return None;
    }
    let started = crate::clock::monotonic_ns();
    // SAFETY: `raw` has room for `capacity` frames (two words each);
    // ucontext is the interrupted context given to the handler.
    let num_frames = unsafe { asgct_walk::call(asgct, env, raw, capacity, ucontext) };
    counters::add(Counter::WalkAsgctNanos, crate::clock::monotonic_ns().saturating_sub(started));
    counters::increment(Counter::WalkVerified);
    let written = usize::try_from(num_frames).unwrap_or(0).min(capacity);
    // SAFETY: AsyncGetCallTrace wrote `written` frames to `raw`, which the
    // caller's stripe keeps ours until the sample is recorded.
    let frames = unsafe { std::slice::from_raw_parts(raw, written) };
    Some(Reference { frames: asgct_walk::kept(frames), full: written == capacity })
}

/// Counts the outcome of one sample: `walked` is the HotSpot walker's mixed
/// stack, whose Java frames must equal the reference's. Signal-safe.
pub(super) fn compare(walked: &[Frame], reference: Reference) {
    let mut java = walked.iter().filter(|f| f.kind.is_java());
    let vm_found = java.clone().next().is_some();
    counters::add(Counter::WalkVmSucceeded, u64::from(vm_found));
    counters::add(Counter::WalkAsgctSucceeded, u64::from(!reference.frames.is_empty()));
    if !vm_found || reference.frames.is_empty() || reference.full {
        return;
    }
    counters::increment(Counter::WalkCompared);
    let same =
        reference.frames.iter().all(|a| java.next().is_some_and(|f| f.method == a.method as u64 && f.bci == a.bci))
            && java.next().is_none();
    counters::add(Counter::WalkAgreed, u64::from(same));
}
