//! Mixed stacks from HotSpot's own structures (`cstack=vm` and `vmx`).
//!
//! A walk alternates two parts. The native part unwinds library frames
//! (DWARF) until a pc in the code cache, a marked JVM function or a frame it
//! cannot unwind; the Java part walks Java frames through the code cache
//! until they return to native code or reach an entry frame (the VM calling
//! Java). Where a native part cannot reach Java code, the thread's
//! last-Java-frame anchor says where its Java frames are. At an entry frame
//! `vm` jumps to the Java frames the caller left (the anchor saved in the
//! JavaCallWrapper); `vmx` walks the native frames in between.

use super::native::{NativeStop, NativeUnwinder};
use super::safe_read::ProcessMemory;
use crate::counters::{self, Counter};
use frames::{Frame, JavaFrameKind};
use std::cell::UnsafeCell;
use unwind::hotspot::{
    self, Anchor, HotSpotWalker, JavaFrame, MethodIds, SegmentEnd, VmFrame, WalkFailure, WalkMemo, NO_JMETHOD_ID,
};
use unwind::{PcKind, Registers};

/// Java and native parts a walk may alternate through before it stops:
/// more than any real stack has (each JNI upcall adds two).
const MAX_PARTS: usize = 256;

pub struct VmStackWalker {
    hotspot: HotSpotWalker,
    /// `vmx`: keep the native frames between Java frames.
    extended: bool,
    /// One jmethodID table per sample stripe, used under the stripe lock.
    method_ids: Box<[UnsafeCell<MethodIds>]>,
}

// SAFETY: table `i` is only touched by the holder of stripe `i`'s lock.
unsafe impl Sync for VmStackWalker {}

/// The result of a walk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VmWalk {
    pub frames: usize,
    /// The depth limit or a broken invariant cut the stack.
    pub truncated: bool,
    pub java_frames: usize,
}

/// Frames written so far into the caller's buffer.
struct FrameWriter<'a> {
    out: &'a mut [Frame],
    len: usize,
    java: usize,
    /// A Java frame was met, written or not.
    met_java: bool,
}

impl FrameWriter<'_> {
    fn push_java(&mut self, frame: JavaFrame) -> bool {
        let Some(slot) = self.out.get_mut(self.len) else { return false };
        if frame.method == NO_JMETHOD_ID {
            counters::increment(Counter::VmWalkMethodWithoutId);
            // The innermost Java frame without a method names nothing:
            // dropped, as in the AsyncGetCallTrace walk (only that one).
            if !self.met_java {
                self.met_java = true;
                return true;
            }
        }
        self.met_java = true;
        *slot = Frame::java_of_kind(frame.method, frame.bci, java_frame_kind(frame.kind));
        self.len += 1;
        self.java += 1;
        true
    }

    fn rest(&mut self) -> &mut [Frame] {
        self.out.get_mut(self.len..).unwrap_or_default()
    }
}

/// The walker's kind in the shared vocabulary (until the walker reports
/// `frames::JavaFrameKind` itself).
fn java_frame_kind(kind: hotspot::JavaFrameKind) -> JavaFrameKind {
    match kind {
        hotspot::JavaFrameKind::Interpreted => JavaFrameKind::Interpreted,
        hotspot::JavaFrameKind::C1Compiled => JavaFrameKind::C1Compiled,
        hotspot::JavaFrameKind::C2Compiled => JavaFrameKind::C2Compiled,
        hotspot::JavaFrameKind::Inlined => JavaFrameKind::Inlined,
        hotspot::JavaFrameKind::Native => JavaFrameKind::Native,
    }
}

fn count(failure: WalkFailure) {
    counters::increment(match failure {
        WalkFailure::NoCodeBlob => Counter::VmWalkNoCodeBlob,
        WalkFailure::BadInterpretedFrame => Counter::VmWalkBadInterpretedFrame,
        WalkFailure::UnknownMethod => Counter::VmWalkUnknownMethod,
        WalkFailure::BadCompiledFrame => Counter::VmWalkBadCompiledFrame,
        WalkFailure::NoProgress => Counter::VmWalkNoProgress,
    });
}

/// Where the walk goes next.
enum Next {
    Java(VmFrame),
    Native {
        regs: Registers,
        kind: PcKind,
        marks_end: bool,
    },
    /// Continue at an anchor's Java frames, if there is one.
    Anchor(Option<Anchor>),
    Stop {
        truncated: bool,
    },
}

impl VmStackWalker {
    /// Not signal-safe: allocates the per-stripe tables.
    pub fn new(hotspot: HotSpotWalker, extended: bool, stripes: usize) -> Self {
        let method_ids = (0..stripes).map(|_| UnsafeCell::new(MethodIds::default())).collect();
        Self { hotspot, extended, method_ids }
    }

    /// Writes the stack of the interrupted thread (`thread` is its
    /// `JavaThread*`, 0 for a thread the JVM does not run Java on) into
    /// `out`, innermost first. Signal-safe.
    ///
    /// # Safety
    /// The caller holds stripe `stripe`: no other thread walks with it
    /// until this returns.
    pub unsafe fn walk(
        &self,
        native: Option<&NativeUnwinder>,
        stripe: usize,
        regs: Registers,
        thread: u64,
        out: &mut [Frame],
    ) -> VmWalk {
        let hotspot = &self.hotspot;
        let memory = ProcessMemory;
        let is_code = |pc: u64| hotspot.in_code_cache(pc) || native.is_some_and(|n| n.in_library(pc));
        let mut writer = FrameWriter { out, len: 0, java: 0, met_java: false };
        let Some(ids) = self.method_ids.get(stripe) else {
            return VmWalk::default();
        };
        // SAFETY: the caller holds stripe `stripe` (this function's
        // contract), so its table is ours alone.
        let mut memo = WalkMemo::new(thread, unsafe { &mut *ids.get() });
        // Where the thread's Java frames are if the native part cannot
        // reach them: the thread's anchor at first, then an entry frame's.
        let mut anchor = if thread != 0 { hotspot.thread_anchor(&memory, thread) } else { None };
        // The highest stack pointer the walk has reached: an anchor below
        // it would walk frames again.
        let mut reached = regs.sp;
        // A failed Java segment was skipped: the stack has a hole.
        let mut skipped = false;
        let mut next = if hotspot.in_code_cache(regs.pc) {
            Next::Java(VmFrame::interrupted(regs.pc, regs.sp, regs.fp))
        } else {
            Next::Native { regs, kind: PcKind::Interrupted, marks_end: true }
        };
        for _ in 0..MAX_PARTS {
            next = match next {
                Next::Java(mut frame) => {
                    let end = hotspot.walk_java(&memory, &is_code, &mut frame, &mut memo, &mut |f| writer.push_java(f));
                    reached = reached.max(frame.sp);
                    match end {
                        SegmentEnd::Native => {
                            anchor = None;
                            let regs = Registers { pc: frame.pc, sp: frame.sp, fp: frame.fp, lr: 0 };
                            Next::Native { regs, kind: PcKind::ReturnAddress, marks_end: true }
                        }
                        SegmentEnd::Entry(caller_anchor) if self.extended => {
                            anchor = caller_anchor;
                            let regs = Registers { pc: frame.pc, sp: frame.sp, fp: frame.fp, lr: 0 };
                            // JavaCalls::call_helper is marked; it ends the
                            // walk only at the bottom (no Java frames below).
                            Next::Native { regs, kind: PcKind::ReturnAddress, marks_end: anchor.is_none() }
                        }
                        SegmentEnd::Entry(caller_anchor) => Next::Anchor(caller_anchor),
                        SegmentEnd::Full => Next::Stop { truncated: true },
                        SegmentEnd::Failed(failure) => {
                            count(failure);
                            // An anchor not used yet, above what was
                            // walked, still leads to sound Java frames.
                            match anchor.take().filter(|a| a.sp >= reached) {
                                Some(target) => {
                                    skipped = true;
                                    Next::Anchor(Some(target))
                                }
                                None => Next::Stop { truncated: true },
                            }
                        }
                    }
                }
                Next::Native { regs, kind, marks_end } => match native {
                    Some(walker) => {
                        // SAFETY: the caller holds `stripe` (this function's contract).
                        let walk = unsafe { walker.walk_from(stripe, regs, kind, writer.rest(), marks_end) };
                        writer.len += walk.frames;
                        reached = reached.max(walk.regs.sp);
                        match walk.stop {
                            NativeStop::OutsideLibraries if hotspot.in_code_cache(walk.regs.pc) => {
                                let r = walk.regs;
                                Next::Java(match walk.kind {
                                    PcKind::Interrupted => VmFrame::interrupted(r.pc, r.sp, r.fp),
                                    PcKind::ReturnAddress => VmFrame::new(r.pc, r.sp, r.fp),
                                })
                            }
                            NativeStop::Full => Next::Stop { truncated: true },
                            _ => Next::Anchor(anchor.take()),
                        }
                    }
                    None => Next::Anchor(anchor.take()),
                },
                Next::Anchor(Some(target)) => match hotspot.anchor_frame(&memory, target) {
                    Some(frame) if hotspot.in_code_cache(frame.pc) && frame.sp >= reached => Next::Java(frame),
                    _ => {
                        counters::increment(Counter::VmWalkBadAnchor);
                        Next::Stop { truncated: true }
                    }
                },
                Next::Anchor(None) => Next::Stop { truncated: false },
                Next::Stop { truncated } => {
                    return VmWalk { frames: writer.len, truncated: truncated || skipped, java_frames: writer.java };
                }
            };
        }
        VmWalk { frames: writer.len, truncated: true, java_frames: writer.java }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn java(method: u64, bci: i32) -> JavaFrame {
        JavaFrame { method, bci, kind: hotspot::JavaFrameKind::C2Compiled }
    }

    #[test]
    fn only_the_innermost_java_frame_without_an_id_is_dropped() {
        let mut out = [Frame::default(); 4];
        let mut writer = FrameWriter { out: &mut out, len: 0, java: 0, met_java: false };
        for frame in [java(NO_JMETHOD_ID, 1), java(NO_JMETHOD_ID, 2), java(0x1234, 3)] {
            assert!(writer.push_java(frame));
        }
        assert_eq!((writer.len, writer.java), (2, 2));
        assert_eq!(&out[..2], &[Frame::java(NO_JMETHOD_ID, 2), Frame::java(0x1234, 3)]);
    }

    #[test]
    fn a_java_frame_without_an_id_after_a_named_one_is_kept() {
        let mut out = [Frame::default(); 4];
        let mut writer = FrameWriter { out: &mut out, len: 0, java: 0, met_java: false };
        assert!(writer.push_java(java(0x1234, 3)));
        assert!(writer.push_java(java(NO_JMETHOD_ID, 4)));
        assert_eq!(&out[..2], &[Frame::java(0x1234, 3), Frame::java(NO_JMETHOD_ID, 4)]);
    }
}
