//! Java frames from HotSpot's own structures (`cstack=vm` and `vmx`), as
//! one sample's [`JavaWalk`], and what a sample keeps of such a walk
//! ([`HotSpotSource::walk`]: a cut stack is counted, an empty one marked).
//!
//! Java parts walk Java frames through the code cache until they return to
//! native code or reach an entry frame (the VM calling Java). Where a
//! native part cannot reach Java code, the thread's last-Java-frame anchor
//! says where its Java frames are. At an entry frame `vm` jumps to the
//! Java frames the caller left (the anchor saved in the JavaCallWrapper);
//! `vmx` walks the native frames in between.

use super::mixed::{self, drops_java_frame, marker_frame, Cut, JavaWalk, MixedWalk, Next};
use super::native::{EndAt, NativeStop, NativeUnwinder, NativeWalk};
use crate::counters::{self, Counter};
use frames::{CallTraceError, Frame, Mark};
use hotspot::memory::VmMemory;
use hotspot::{
    Anchor, JavaFrame, JavaSegmentWalker, SegmentEnd, VmFrame, WalkCache, WalkFailure, WalkMemo, NO_JMETHOD_ID,
};
use std::cell::UnsafeCell;
use std::sync::atomic::AtomicU64;
use unwind::{PcKind, Registers};

/// The walker of HotSpot's Java segments, and one walk cache (decoded
/// return sites, jmethodIDs) per sample stripe.
pub struct HotSpotSource {
    segments: JavaSegmentWalker,
    /// `vmx`: keep the native frames between Java frames.
    extended: bool,
    /// Cache `i` is used under stripe `i`'s lock.
    caches: Box<[UnsafeCell<WalkCache>]>,
    /// With `verifywalk`: whose turn it is to walk first, this walker or
    /// AsyncGetCallTrace (they alternate).
    pub(crate) verify_turns: AtomicU64,
}

// SAFETY: cache `i` is only touched by the holder of stripe `i`'s lock.
unsafe impl Sync for HotSpotSource {}

impl HotSpotSource {
    /// Not signal-safe: allocates the per-stripe caches.
    pub fn new(segments: JavaSegmentWalker, extended: bool, stripes: usize) -> Self {
        let caches = (0..stripes).map(|_| UnsafeCell::new(WalkCache::default())).collect();
        Self { segments, extended, caches, verify_turns: AtomicU64::new(0) }
    }

    /// The walk of one sample of the interrupted thread (`thread` is its
    /// `JavaThread*`, 0 for a thread the JVM does not run Java on), reading
    /// memory through `memory`, with `native` for native parts; `None` if
    /// there is no cache for `stripe`. Signal-safe.
    ///
    /// # Safety
    /// The caller holds stripe `stripe` until the walk is dropped.
    pub unsafe fn begin<'a, M: VmMemory>(
        &'a self,
        native: Option<&'a NativeUnwinder>,
        stripe: usize,
        thread: u64,
        memory: &'a M,
    ) -> Option<HotSpotWalk<'a, M>> {
        let cache = self.caches.get(stripe)?;
        // SAFETY: the caller holds stripe `stripe` (this function's
        // contract), so its cache is ours alone.
        let memo = WalkMemo::new(thread, unsafe { &mut *cache.get() });
        let anchor = if thread != 0 { self.segments.thread_anchor(memory, thread) } else { None };
        Some(HotSpotWalk { source: self, native, memory, memo, pending: None, anchor, reached: 0, met_java: false })
    }

    /// Writes the mixed stack of one sample into `out`, as [`Self::begin`]
    /// and [`mixed::walk`] from the interrupted registers `regs`, with this
    /// source's policy for the result: a cut stack is counted, and a stack
    /// with no frames gets a marker frame saying why. Signal-safe.
    ///
    /// # Safety
    /// The caller holds stripe `stripe` until this returns.
    pub unsafe fn walk<M: VmMemory>(
        &self,
        native: Option<&NativeUnwinder>,
        stripe: usize,
        thread: u64,
        memory: &M,
        regs: Registers,
        out: &mut [Frame],
    ) -> MixedWalk {
        // SAFETY: the caller holds `stripe` (this function's contract).
        let walk = match unsafe { self.begin(native, stripe, thread, memory) } {
            // SAFETY: as above.
            Some(mut java) => unsafe { mixed::walk(native, stripe, Some(regs), &mut java, out) },
            None => MixedWalk { frames: 0, cut: None },
        };
        if walk.truncated() {
            counters::increment(Counter::StackTruncated);
        }
        if walk.frames == 0 {
            let error = if thread == 0 { CallTraceError::NotJavaThread } else { CallTraceError::UnknownJava };
            return MixedWalk { frames: marker_frame(out, error, false), cut: None };
        }
        walk
    }
}

/// One sample's walk through HotSpot's structures.
pub struct HotSpotWalk<'a, M: VmMemory> {
    source: &'a HotSpotSource,
    native: Option<&'a NativeUnwinder>,
    memory: &'a M,
    memo: WalkMemo<'a>,
    /// Where the next Java part starts.
    pending: Option<VmFrame>,
    /// Where the thread's Java frames are if the native part cannot reach
    /// them: the thread's anchor at first, then an entry frame's.
    anchor: Option<Anchor>,
    /// The highest stack pointer the walk has reached: an anchor below it
    /// would walk frames again.
    reached: u64,
    /// A Java frame was met, written or not.
    met_java: bool,
}

/// Java frames written into the rest of the caller's buffer.
struct FrameWriter<'a> {
    out: &'a mut [Frame],
    len: usize,
    /// A Java frame was met (in this part or an earlier one).
    met_java: bool,
}

impl FrameWriter<'_> {
    fn push_java(&mut self, frame: JavaFrame) -> bool {
        let Some(slot) = self.out.get_mut(self.len) else { return false };
        if frame.method == NO_JMETHOD_ID {
            counters::increment(Counter::VmWalkMethodWithoutId);
        }
        let innermost = !self.met_java;
        self.met_java = true;
        if drops_java_frame(innermost, frame.method) {
            return true;
        }
        *slot = Frame::java_of_kind(frame.method, frame.bci, frame.kind);
        self.len += 1;
        true
    }

    /// Marks frames that could not be walked, where they would stand (if
    /// there is room).
    fn push_hole(&mut self) {
        if let Some(slot) = self.out.get_mut(self.len) {
            *slot = Cut::Broken.marker();
            self.len += 1;
        }
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

/// Whether a native part that stopped as `stop` after writing `frames`
/// frames lost the frames below it: it broke (a frame it could not
/// unwind, a pc in no library and no code the VM knows) after walking
/// some. (A part that wrote nothing walked nothing: with no native
/// unwinder, `cstack=no`, nothing is lost there.)
fn lost_native_frames(stop: NativeStop, frames: usize) -> bool {
    frames > 0 && matches!(stop, NativeStop::Failed | NativeStop::OutsideLibraries)
}

fn registers(frame: &VmFrame) -> Registers {
    Registers { pc: frame.pc, sp: frame.sp, fp: frame.fp, lr: 0 }
}

impl<M: VmMemory> HotSpotWalk<'_, M> {
    fn java_at(&mut self, frame: VmFrame) -> Next {
        self.pending = Some(frame);
        Next::Java
    }

    /// Continues at an anchor's Java frames, if there is one.
    fn at_anchor(&mut self, anchor: Option<Anchor>) -> Next {
        let Some(target) = anchor else { return Next::Stop { cut: None } };
        let segments = &self.source.segments;
        match segments.anchor_frame(self.memory, target) {
            Some(frame) if segments.in_code_cache(frame.pc) && frame.sp >= self.reached => self.java_at(frame),
            _ => {
                counters::increment(Counter::VmWalkBadAnchor);
                Next::Stop { cut: Some(Cut::Broken) }
            }
        }
    }
}

impl<M: VmMemory> JavaWalk for HotSpotWalk<'_, M> {
    const NATIVE_BUDGET: usize = usize::MAX;

    fn start(&mut self, regs: Option<Registers>) -> Next {
        let Some(regs) = regs else { return Next::Stop { cut: None } };
        self.reached = regs.sp;
        if self.source.segments.in_code_cache(regs.pc) {
            self.java_at(VmFrame::interrupted(regs.pc, regs.sp, regs.fp))
        } else {
            // Inside `JavaCalls::call_helper` with Java frames below (a JNI
            // upcall entering or leaving Java, a class initializer called
            // from the VM), `vmx` walks on to the code that called the VM.
            // Without an anchor to lead to Java frames, only native
            // unwinding reaches them: through every mark but a compiler's.
            let end_at = match (self.anchor.is_some(), self.source.extended) {
                (false, _) => EndAt::CompilerOnly,
                (true, true) => EndAt::MarksButJavaCalls,
                (true, false) => EndAt::EveryMark,
            };
            Next::Native { regs, kind: PcKind::Interrupted, end_at }
        }
    }

    fn after_native(&mut self, walk: &NativeWalk) -> Next {
        let r = walk.regs;
        self.reached = self.reached.max(r.sp);
        match walk.stop {
            NativeStop::OutsideLibraries if self.source.segments.in_code_cache(r.pc) => self.java_at(match walk.kind {
                PcKind::Interrupted => VmFrame::interrupted(r.pc, r.sp, r.fp),
                PcKind::ReturnAddress => VmFrame::new(r.pc, r.sp, r.fp),
            }),
            NativeStop::Full => Next::Stop { cut: Some(Cut::Depth) },
            // An interpreter runtime entry is always called from Java code,
            // which the thread's anchor leads to: without one, the frames
            // below cannot be walked (not the thread's first).
            NativeStop::Mark(Mark::Interpreter) if self.anchor.is_none() => {
                counters::increment(Counter::VmWalkBadAnchor);
                Next::Stop { cut: Some(Cut::Broken) }
            }
            // Native frames lost on the way to an anchor are native code
            // only (the anchor is the last Java frame): the stack goes on,
            // whole but for them. Without an anchor, it ends where the
            // unwinder stopped, not at the thread's first frame: below Java
            // frames met, unknown Java frames may follow; below native code
            // alone (a GC or compiler thread), unknown native code.
            stop => match self.anchor.take() {
                None if lost_native_frames(stop, walk.frames) => {
                    Next::Stop { cut: Some(if self.met_java { Cut::Broken } else { Cut::BrokenNative }) }
                }
                anchor => self.at_anchor(anchor),
            },
        }
    }

    fn walk_java(&mut self, out: &mut [Frame]) -> (usize, Next) {
        let Some(mut frame) = self.pending.take() else { return (0, Next::Stop { cut: Some(Cut::Broken) }) };
        let source = self.source;
        let native = self.native;
        let is_code = |pc: u64| source.segments.in_code_cache(pc) || native.is_some_and(|n| n.in_library(pc));
        let mut writer = FrameWriter { out, len: 0, met_java: self.met_java };
        let end =
            source.segments.walk_java(self.memory, &is_code, &mut frame, &mut self.memo, &mut |f| writer.push_java(f));
        self.met_java = writer.met_java;
        self.reached = self.reached.max(frame.sp);
        let next = match end {
            SegmentEnd::Native => {
                self.anchor = None;
                Next::Native { regs: registers(&frame), kind: PcKind::ReturnAddress, end_at: EndAt::EveryMark }
            }
            SegmentEnd::Entry(caller_anchor) if source.extended => {
                self.anchor = caller_anchor;
                // JavaCalls::call_helper is marked; it ends the walk only
                // at the bottom (no Java frames below).
                Next::Native {
                    regs: registers(&frame),
                    kind: PcKind::ReturnAddress,
                    end_at: if caller_anchor.is_none() { EndAt::EveryMark } else { EndAt::NoMark },
                }
            }
            SegmentEnd::Entry(caller_anchor) => self.at_anchor(caller_anchor),
            SegmentEnd::Full => Next::Stop { cut: Some(Cut::Depth) },
            SegmentEnd::Failed(failure) => {
                count(failure);
                // An anchor not used yet, above what was walked, still
                // leads to sound Java frames: the frames in between are
                // marked as a hole.
                match self.anchor.take().filter(|a| a.sp >= self.reached) {
                    Some(target) => {
                        writer.push_hole();
                        self.at_anchor(Some(target))
                    }
                    None => Next::Stop { cut: Some(Cut::Broken) },
                }
            }
        };
        (writer.len, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use frames::JavaFrameKind;
    use hotspot::testing;

    fn java(method: u64, bci: i32) -> JavaFrame {
        JavaFrame { method, bci, kind: JavaFrameKind::C2Compiled }
    }

    #[test]
    fn only_the_innermost_java_frame_without_an_id_is_dropped() {
        let mut out = [Frame::default(); 4];
        let mut writer = FrameWriter { out: &mut out, len: 0, met_java: false };
        for frame in [java(NO_JMETHOD_ID, 1), java(NO_JMETHOD_ID, 2), java(0x1234, 3)] {
            assert!(writer.push_java(frame));
        }
        assert_eq!(writer.len, 2);
        assert_eq!(&out[..2], &[Frame::java(NO_JMETHOD_ID, 2), Frame::java(0x1234, 3)]);
    }

    #[test]
    fn a_java_frame_without_an_id_after_a_named_one_is_kept() {
        let mut out = [Frame::default(); 4];
        let mut writer = FrameWriter { out: &mut out, len: 0, met_java: false };
        assert!(writer.push_java(java(0x1234, 3)));
        assert!(writer.push_java(java(NO_JMETHOD_ID, 4)));
        assert_eq!(&out[..2], &[Frame::java(0x1234, 3), Frame::java(NO_JMETHOD_ID, 4)]);
    }

    /// A sample in native code (in the VM): the native part ends at every
    /// marked JVM function, but with `vmx` and Java frames below (the
    /// thread's anchor) not at `JavaCalls::call_helper`: inside a JNI
    /// upcall, the native frames down to the Java code that called native
    /// code are walked; and with no anchor, only at a compiler's entry:
    /// Java frames below are reached by unwinding into them (an interpreter
    /// runtime entry called as a leaf sets no anchor).
    #[test]
    fn vmx_walks_through_call_helper_when_java_frames_are_below() {
        let (mut memory, _) = testing::vm();
        testing::add_anchor(&mut memory, testing::SP, testing::CODE + 0x40, 0);
        let regs = Registers { pc: testing::NATIVE_CALLER, sp: testing::SP - 0x100, fp: 0, lr: 0 };
        let end_at = |extended: bool, thread: u64| {
            let source = HotSpotSource::new(testing::walker(), extended, 1);
            // SAFETY: this test alone uses `source`'s stripe 0.
            let mut walk = unsafe { source.begin(None, 0, thread, &memory) }.unwrap();
            match walk.start(Some(regs)) {
                Next::Native { end_at, .. } => end_at,
                next => panic!("{next:?}"),
            }
        };
        assert_eq!(end_at(true, testing::THREAD), EndAt::MarksButJavaCalls);
        assert_eq!(end_at(false, testing::THREAD), EndAt::EveryMark);
        assert_eq!(end_at(true, testing::THREAD + 8), EndAt::CompilerOnly, "no anchor");
        assert_eq!(end_at(false, testing::THREAD + 8), EndAt::CompilerOnly);
    }

    #[test]
    fn native_parts_that_broke_after_some_frames_lost_the_rest() {
        assert!(lost_native_frames(NativeStop::Failed, 3));
        assert!(lost_native_frames(NativeStop::OutsideLibraries, 1), "a pc no library or VM code holds");
        assert!(!lost_native_frames(NativeStop::Failed, 0), "nothing walked, nothing lost (cstack=no)");
        for stop in [NativeStop::End, NativeStop::Mark(Mark::VmRuntime), NativeStop::Full] {
            assert!(!lost_native_frames(stop, 5), "{stop:?}");
        }
    }

    /// What a sample keeps of a walk: the frames found; a cut stack,
    /// counted; for no frames, a marker saying why (no JavaThread, or
    /// unknown Java state), counted as a failed walk.
    #[test]
    fn a_cut_walk_is_counted_and_an_empty_one_marked() {
        let (memory, _) = testing::vm();
        let source = HotSpotSource::new(testing::walker(), false, 1);
        let java = Registers { pc: testing::CODE + 0x1f, sp: testing::SP, fp: 0, lr: 0 };
        let outside = Registers { pc: testing::NATIVE_CALLER, ..java };
        let mut out = [Frame::default(); 16];
        // SAFETY: this test alone uses `source`'s stripe 0.
        let walk = |out: &mut [Frame], thread, regs| unsafe { source.walk(None, 0, thread, &memory, regs, out) };
        assert_eq!(walk(&mut out, testing::THREAD, java), MixedWalk { frames: 3, cut: None });
        let whole = out;
        let cut = counters::get(Counter::StackTruncated);
        // Cut at the depth limit: the outermost slot says so.
        assert_eq!(walk(&mut out[..2], testing::THREAD, java), MixedWalk { frames: 2, cut: Some(Cut::Depth) });
        assert_eq!(out[..2], [whole[0], Frame::error(CallTraceError::Truncated)]);
        assert!(counters::get(Counter::StackTruncated) > cut);
        let failed = counters::get(Counter::StackWalkFailed);
        assert_eq!(walk(&mut out, 0, outside), MixedWalk { frames: 1, cut: None });
        assert_eq!(out[0], Frame::error(CallTraceError::NotJavaThread));
        // A JavaThread with no last-Java-frame anchor to lead to Java code.
        let no_anchor = testing::THREAD + 8;
        assert_eq!(walk(&mut out, no_anchor, outside), MixedWalk { frames: 1, cut: None });
        assert_eq!(out[0], Frame::error(CallTraceError::UnknownJava));
        assert!(counters::get(Counter::StackWalkFailed) >= failed + 2);
    }
}
