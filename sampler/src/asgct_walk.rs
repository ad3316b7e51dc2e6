//! Java frames from AsyncGetCallTrace, as one sample's [`JavaWalk`]: after
//! the native part (at most [`MAX_NATIVE_FRAMES`]), AsyncGetCallTrace walks
//! the whole Java stack from the interrupted context in one part.

use super::asgct::{AsgctFn, AsgctFrame, AsgctTrace};
use super::java_thread::JavaThreads;
use super::mixed::{drops_java_frame, marker_frame, Cut, JavaWalk, Next};
use super::native::{EndAt, NativeWalk};
use crate::counters::{self, Counter};
use frames::{CallTraceError, Frame};
use jni_sys::JNIEnv;
use std::ffi::c_void;
use unwind::{PcKind, Registers};

/// At most this many native frames precede the Java frames of a sample.
const MAX_NATIVE_FRAMES: usize = 512;

/// Calls AsyncGetCallTrace for the interrupted context `ucontext` of the
/// thread of `env`, into `raw` (room for `capacity` frames); returns its
/// frame count or negative error code. Signal-safe.
///
/// # Safety
/// `raw` has room for `capacity` frames; `ucontext` is the context the
/// signal handler was given.
pub unsafe fn call(
    asgct: AsgctFn,
    env: *mut JNIEnv,
    raw: *mut AsgctFrame,
    capacity: usize,
    ucontext: *mut c_void,
) -> i32 {
    let mut trace = AsgctTrace { env, num_frames: 0, frames: raw };
    let depth = i32::try_from(capacity).unwrap_or(i32::MAX);
    // SAFETY: per this function's contract.
    unsafe { asgct(&mut trace, depth, ucontext) };
    trace.num_frames
}

/// AsyncGetCallTrace's frames as a stack keeps them: without a leaf that
/// [`drops_java_frame`] leaves out.
pub(super) fn kept(frames: &[AsgctFrame]) -> &[AsgctFrame] {
    match frames.split_first() {
        Some((leaf, callers)) if drops_java_frame(true, leaf.method as u64) => callers,
        _ => frames,
    }
}

/// One sample's walk with AsyncGetCallTrace.
pub struct AsgctWalk<'a> {
    asgct: Option<AsgctFn>,
    threads: &'a JavaThreads,
    /// AsyncGetCallTrace's buffer: room for as many frames as the stack.
    raw: *mut AsgctFrame,
    ucontext: *mut c_void,
    /// Native frames precede the Java part.
    after_native: bool,
}

impl<'a> AsgctWalk<'a> {
    /// # Safety
    /// `raw` has room for as many frames as the stack this walk writes;
    /// `ucontext` is the context the signal handler was given.
    pub unsafe fn new(
        asgct: Option<AsgctFn>,
        threads: &'a JavaThreads,
        raw: *mut AsgctFrame,
        ucontext: *mut c_void,
    ) -> Self {
        Self { asgct, threads, raw, ucontext, after_native: false }
    }

    /// Writes the Java stack into `out`; returns the frame count and
    /// whether the depth limit cut it. A stack that cannot be walked gets a
    /// marker frame saying why, unless native frames already describe a
    /// thread that runs no Java code.
    fn java_frames(&self, out: &mut [Frame]) -> (usize, Option<Cut>) {
        let error = |out: &mut [Frame], e: CallTraceError| (marker_frame(out, e, self.after_native), None);
        let Some(asgct) = self.asgct else {
            return error(out, CallTraceError::NoWalker);
        };
        let env = self.threads.current_env();
        if env.is_null() {
            return error(out, CallTraceError::NotJavaThread);
        }
        if out.is_empty() {
            return (0, Some(Cut::Depth));
        }
        // SAFETY: `raw` has room for as many frames as the stack, so for
        // `out.len()` (this type's contract); ucontext is the handler's.
        let num_frames = unsafe { call(asgct, env, self.raw, out.len(), self.ucontext) };
        if num_frames <= 0 {
            return error(out, CallTraceError::from_code(i64::from(num_frames)));
        }
        let written = (num_frames as usize).min(out.len());
        // SAFETY: AsyncGetCallTrace wrote `written` frames to `raw`, which
        // is apart from `out` and ours for the sample (this type's contract).
        let kept = kept(unsafe { std::slice::from_raw_parts(self.raw, written) });
        if kept.is_empty() {
            return error(out, CallTraceError::UnknownJava);
        }
        for (slot, f) in out.iter_mut().zip(kept) {
            *slot = Frame::java(f.method as u64, f.bci);
        }
        let cut = (written == out.len()).then_some(Cut::Depth);
        if cut.is_some() {
            counters::increment(Counter::StackTruncated);
        }
        (kept.len(), cut)
    }
}

impl JavaWalk for AsgctWalk<'_> {
    const NATIVE_BUDGET: usize = MAX_NATIVE_FRAMES;

    fn start(&mut self, regs: Option<Registers>) -> Next {
        match regs {
            Some(regs) => Next::Native { regs, kind: PcKind::Interrupted, end_at: EndAt::EveryMark },
            None => Next::Java,
        }
    }

    fn after_native(&mut self, walk: &NativeWalk) -> Next {
        self.after_native = walk.frames > 0;
        Next::Java
    }

    fn walk_java(&mut self, out: &mut [Frame]) -> (usize, Next) {
        let (written, cut) = self.java_frames(out);
        (written, Next::Stop { cut })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(method: usize, bci: i32) -> AsgctFrame {
        AsgctFrame { bci, method: method as _ }
    }

    #[test]
    fn only_a_leaf_without_a_method_id_is_left_out() {
        let frames = [frame(0, 1), frame(0x1234, 2), frame(0, 3)];
        let left: Vec<_> = kept(&frames).iter().map(|f| (f.method as usize, f.bci)).collect();
        assert_eq!(left, [(0x1234, 2), (0, 3)]);
        assert_eq!(kept(&frames[1..]).len(), 2);
        assert!(kept(&frames[..1]).is_empty());
        assert!(kept(&[]).is_empty());
    }
}
