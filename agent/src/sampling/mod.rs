//! Everything that runs inside a profiling signal handler.
//!
//! Rules for this module tree: no allocation, no blocking locks, no
//! formatting, no panicking paths, errno preserved. Memory is reached
//! through the [`Sampler`] published before signals are armed; a test with
//! a counting allocator checks that a sample allocates nothing.

pub mod asgct;
pub mod chain;
pub mod handler;
pub mod origin;
pub mod siginfo;

use crate::counters::{self, Counter};
use crate::storage::call_traces::{CallTraceTable, TraceId};
use crate::storage::frame::Frame;
use crate::storage::samples::{SampleRecord, SampleStripes, Scratch};
use asgct::{AsgctFn, AsgctFrame, AsgctTrace, CallTraceError};
use jni::sys::JNIEnv;
use std::ffi::c_void;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Arc;

/// Where Java stacks come from.
#[derive(Clone, Copy)]
pub struct JavaWalker {
    pub asgct: Option<AsgctFn>,
    /// Returns the calling thread's JNIEnv (null when not attached).
    pub current_env: fn() -> *mut JNIEnv,
}

/// What the handler needs, allocated before sampling starts.
pub struct Sampler {
    pub traces: CallTraceTable,
    pub stripes: SampleStripes,
    pub max_depth: usize,
    pub walker: JavaWalker,
}

/// One sample's inputs, from the handler.
#[derive(Clone, Copy)]
pub struct SampleRequest {
    pub ucontext: *mut c_void,
    pub weight: u32,
    pub state: jfr_writer::ThreadState,
}

static ACTIVE: AtomicPtr<Sampler> = AtomicPtr::new(std::ptr::null_mut());
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// Makes `sampler` visible to signal handlers. The caller keeps its `Arc`
/// alive until [`retire`] returns.
pub fn publish(sampler: &Arc<Sampler>) {
    ACTIVE.store(Arc::as_ptr(sampler).cast_mut(), Ordering::SeqCst);
}

/// Hides the sampler from handlers and returns once no handler can still
/// be using it: a handler announces itself (IN_FLIGHT) before loading the
/// pointer, so after the null store, waiting for IN_FLIGHT to reach zero
/// covers every handler that may have seen the old pointer.
pub fn retire() {
    ACTIVE.store(std::ptr::null_mut(), Ordering::SeqCst);
    while IN_FLIGHT.load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
}

/// Runs `f` with the published sampler, if any. Signal-safe.
#[inline]
pub fn with_active(f: impl FnOnce(&Sampler)) {
    IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
    let sampler = ACTIVE.load(Ordering::SeqCst);
    if !sampler.is_null() {
        // SAFETY: a non-null pointer stays valid until `retire` has seen
        // IN_FLIGHT drop to zero, which cannot happen before we decrement.
        f(unsafe { &*sampler });
    }
    IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
}

impl Sampler {
    /// Records one sample of the calling thread. Signal-safe.
    pub fn record(&self, request: SampleRequest, time_ns: u64, tid: u32) {
        let Some(mut stripe) = self.stripes.try_acquire(tid) else {
            counters::increment(Counter::SamplesDroppedBusy);
            return;
        };
        let trace = {
            let scratch = stripe.scratch();
            let (len, truncated) = self.walk_java(scratch, request.ucontext);
            // SAFETY: `walk_java` initialised `len` frames of scratch space.
            let frames = unsafe { std::slice::from_raw_parts(scratch.frames.as_ptr(), len) };
            self.traces.put(frames, truncated)
        };
        let record = SampleRecord { time_ns, tid, trace: trace.0, weight: request.weight, state: request.state as u8 };
        if stripe.push(record) {
            counters::increment(Counter::Samples);
        } else {
            counters::increment(Counter::SamplesDroppedBufferFull);
        }
        if trace == TraceId::DROPPED {
            counters::increment(Counter::StackWalkFailed);
        }
    }

    /// Fills scratch frames with the Java stack (innermost first); returns
    /// the frame count and whether the depth limit cut the stack.
    fn walk_java(&self, scratch: &mut Scratch, ucontext: *mut c_void) -> (usize, bool) {
        let capacity = self.max_depth.min(scratch.frames.len()).min(scratch.words.len() / 2);
        let error = |e: CallTraceError| {
            // SAFETY: the frames mapping has at least one element.
            unsafe { scratch.frames.as_ptr().write(Frame::error(e.code() as u64)) };
            counters::increment(Counter::StackWalkFailed);
            (1, false)
        };
        let Some(asgct) = self.walker.asgct else {
            return error(CallTraceError::NoWalker);
        };
        let env = (self.walker.current_env)();
        if env.is_null() {
            return error(CallTraceError::NotJavaThread);
        }
        let raw = scratch.words.as_ptr().cast::<AsgctFrame>();
        let mut trace = AsgctTrace { env, num_frames: 0, frames: raw };
        // SAFETY: `raw` has room for `capacity` frames (two words each);
        // ucontext is the interrupted context given to the handler.
        unsafe { asgct(&mut trace, capacity as i32, ucontext) };
        if trace.num_frames <= 0 {
            return error(CallTraceError::from_code(i64::from(trace.num_frames)));
        }
        let len = (trace.num_frames as usize).min(capacity);
        for i in 0..len {
            // SAFETY: AsyncGetCallTrace wrote `len` frames to `raw`; frame
            // `i` of the output is in bounds of the frames mapping.
            unsafe {
                let f = *raw.add(i);
                scratch.frames.as_ptr().add(i).write(Frame::java(f.method as u64, f.bci));
            }
        }
        let truncated = len == capacity;
        if truncated {
            counters::increment(Counter::StackTruncated);
        }
        (len, truncated)
    }
}

#[cfg(test)]
mod tests;
