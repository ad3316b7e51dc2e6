//! Walking consecutive Java frames from HotSpot's own structures:
//! interpreted frames (method and bcp from the frame), compiled frames
//! (nmethod found through the code heap's segment map, inlined methods from
//! the scope descriptors), stubs (stepped over) and entry frames (where the
//! VM called Java from native code, ending a Java segment).
//!
//! The walker composes the code cache ([`CodeCache`]), nmethods' debug
//! information ([`DebugInfoReader`]) and methods ([`MethodReader`]). Every
//! read goes through [`VmMemory`]; a broken invariant ends the walk with a
//! [`WalkFailure`], never a fault. Nothing here allocates.

use crate::code_cache::CodeCache;
use crate::debug_info::{CodeSite, DebugInfoReader};
use crate::frame_state::{frame_state, FrameState};
use crate::java_frame::JavaFrame;
use crate::layout::{CodeAddresses, Continuations, FrameLayout, VmLayout};
use crate::memo::{Site, WalkMemo, SITE_FRAMES};
use crate::memory::VmMemory;
use crate::methods::{MethodReader, NO_JMETHOD_ID};
use crate::sp_scan::{depth_below_frame, NmethodCode};
use crate::tables::VmTables;
use frames::{JavaFrameKind, BCI_NATIVE_METHOD};
use unwind::MAX_STACK_SPAN;

/// More stub frames in a row than real stacks have (adapters, runtime
/// stubs and the frames they call are a handful at most).
const MAX_STUBS_IN_A_ROW: usize = 16;
/// More words of stack arguments than a Java method has (at most 255
/// argument slots), plus an alignment word.
const MAX_STACK_ARGUMENT_WORDS: u64 = 256;

/// A frame as the walker sees it: x86-64 registers plus the unextended
/// sp, from which a compiled frame's size is counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VmFrame {
    pub pc: u64,
    pub sp: u64,
    pub fp: u64,
    pub unextended_sp: u64,
    /// `pc` is the interrupted instruction, not a return or anchor address.
    pub interrupted: bool,
}

impl VmFrame {
    /// A frame whose pc is a return (or anchor) address.
    pub fn new(pc: u64, sp: u64, fp: u64) -> Self {
        Self { pc, sp, fp, unextended_sp: sp, interrupted: false }
    }

    /// The frame of an interrupted context.
    pub fn interrupted(pc: u64, sp: u64, fp: u64) -> Self {
        Self { interrupted: true, ..Self::new(pc, sp, fp) }
    }
}

/// A compiled or stub frame's shape: its size in words, where its frame
/// is complete and where its pc lies (offsets from the code start).
#[derive(Clone, Copy)]
struct FrameShape {
    words: i64,
    complete: i64,
    pc_offset: i64,
    /// An nmethod's frame: its caller is Java code, in the code cache.
    java: bool,
    /// What the instructions at an interrupted pc say.
    state: FrameState,
    /// The nmethod whose code may say how far below the frame the sp is,
    /// where the frame size does not lead to a caller (none for stubs and
    /// frames being deoptimized).
    pushes_in: Option<u64>,
}

impl FrameShape {
    /// The pc lies before the frame is complete.
    fn in_prologue(&self) -> bool {
        self.complete >= 0 && self.pc_offset < self.complete
    }
}

/// A last-Java-frame anchor: where a thread left Java for the VM or
/// native code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Anchor {
    pub sp: u64,
    pub pc: u64,
    pub fp: u64,
}

/// How a Java segment ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentEnd {
    /// The caller is native code; the frame describes it.
    Native,
    /// An entry frame: the VM called Java. The frame describes the entry
    /// frame's native caller; the anchor (if any) the Java frames the
    /// thread had left before.
    Entry(Option<Anchor>),
    /// No room for more frames.
    Full,
    Failed(WalkFailure),
}

/// Why a Java walk stopped early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkFailure {
    /// A pc inside the code cache that no live blob contains.
    NoCodeBlob,
    /// An interpreted frame whose fp or method does not check out.
    BadInterpretedFrame,
    /// A method with no jmethodID (or not a method at all).
    UnknownMethod,
    /// A compiled or stub frame whose caller could not be found.
    BadCompiledFrame,
    /// A step that did not move up the stack.
    NoProgress,
}

/// Walks one Java segment of a stack (from a pc in the code cache to the
/// native code or entry frame it returns to) through HotSpot's structures,
/// whose layout and code-cache addresses are fixed at start.
#[derive(Debug)]
pub struct JavaSegmentWalker {
    frames: FrameLayout,
    pub(crate) code: CodeCache,
    debug: DebugInfoReader,
    methods: MethodReader,
}

/// Whether an address is code we know (a library or the code cache): used
/// to check return addresses.
pub trait CodeCheck {
    fn is_code(&self, pc: u64) -> bool;
}

impl<F: Fn(u64) -> bool> CodeCheck for F {
    fn is_code(&self, pc: u64) -> bool {
        self(pc)
    }
}

/// One step's result.
enum Step {
    Continue,
    /// Continues at a continuation entry frame, whose sp may equal the
    /// frame returning to the return barrier (the barrier stub has no frame).
    ContinueAtEntry,
    End(SegmentEnd),
}

impl JavaSegmentWalker {
    pub fn new(layout: VmLayout, code: CodeAddresses) -> Self {
        let VmLayout { frames, blobs, debug, methods } = layout;
        Self {
            frames,
            code: CodeCache::new(blobs, code),
            debug: DebugInfoReader::new(debug),
            methods: MethodReader::new(methods),
        }
    }

    /// The walker for the running JVM, from its tables. Not signal-safe;
    /// call after VM init (the code cache must exist).
    pub fn from_tables(tables: &VmTables, memory: &dyn VmMemory) -> Result<Self, String> {
        Ok(Self::new(VmLayout::read(tables, memory)?, CodeAddresses::read(tables, memory)?))
    }

    /// Whether return sites decoded in one sample are used in the next
    /// (the layout identifies nmethods).
    pub fn remembers_sites(&self) -> bool {
        self.code.identifies_nmethods()
    }

    pub fn in_code_cache(&self, pc: u64) -> bool {
        self.code.contains(pc)
    }

    /// The anchor of a thread (`JavaThread*`), if it has a last Java frame.
    pub fn thread_anchor<M: VmMemory + ?Sized>(&self, memory: &M, thread: u64) -> Option<Anchor> {
        self.anchor_at(memory, thread.checked_add(self.frames.thread_anchor)?)
    }

    fn anchor_at<M: VmMemory + ?Sized>(&self, memory: &M, anchor: u64) -> Option<Anchor> {
        let l = &self.frames;
        let sp = l.anchor_sp.read(memory, anchor)?;
        if sp == 0 {
            return None;
        }
        let pc = l.anchor_pc.read(memory, anchor)?;
        let fp = l.anchor_fp.read(memory, anchor)?;
        Some(Anchor { sp, pc, fp })
    }

    /// The frame an anchor describes: its pc, or the return address just
    /// below its sp when the anchor did not record one.
    pub fn anchor_frame<M: VmMemory + ?Sized>(&self, memory: &M, anchor: Anchor) -> Option<VmFrame> {
        let pc = if anchor.pc != 0 { anchor.pc } else { memory.u64(anchor.sp.checked_sub(8)?)? };
        Some(VmFrame::new(pc, anchor.sp, anchor.fp))
    }

    /// Walks Java frames from `frame` (whose pc is in the code cache),
    /// giving them to `sink` innermost first; the sink returns `false` when
    /// it is full. Returns how the segment ended; `frame` then describes
    /// where to continue.
    pub fn walk_java<M: VmMemory + ?Sized>(
        &self,
        memory: &M,
        code: &dyn CodeCheck,
        frame: &mut VmFrame,
        memo: &mut WalkMemo,
        sink: &mut dyn FnMut(JavaFrame) -> bool,
    ) -> SegmentEnd {
        let start_sp = frame.sp;
        // Stubs emit no frame: a long run of them is a walk gone astray.
        let mut stubs_in_a_row = 0;
        loop {
            if !self.in_code_cache(frame.pc) {
                return SegmentEnd::Native;
            }
            let before = *frame;
            let stubs_before = stubs_in_a_row;
            let step = if self.code.is_call_stub_return(frame.pc) {
                self.entry_frame(memory, frame)
            } else if self.code.in_interpreter(frame.pc) {
                self.interpreted_frame(memory, frame, memo, sink)
            } else if let Some(site) = memo.checked_site(frame.pc).filter(|_| !frame.interrupted) {
                self.remembered_frame(memory, code, frame, site, sink)
            } else {
                match self.code.find_blob(memory, frame.pc) {
                    Some(blob) if self.code.is_nmethod(memory, blob) => {
                        self.compiled_frame(memory, code, blob, frame, memo, sink)
                    }
                    Some(_) if stubs_in_a_row >= MAX_STUBS_IN_A_ROW => {
                        Step::End(SegmentEnd::Failed(WalkFailure::NoProgress))
                    }
                    Some(blob) => {
                        stubs_in_a_row += 1;
                        self.stub_frame(memory, code, blob, frame, memo.thread)
                    }
                    None => Step::End(SegmentEnd::Failed(WalkFailure::NoCodeBlob)),
                }
            };
            let lowest_caller_sp = match step {
                Step::End(end) => return end,
                Step::Continue => before.sp.saturating_add(1),
                Step::ContinueAtEntry => before.sp,
            };
            if stubs_in_a_row == stubs_before {
                stubs_in_a_row = 0;
            }
            if frame.sp < lowest_caller_sp || frame.sp - start_sp > MAX_STACK_SPAN || !frame.sp.is_multiple_of(8) {
                return SegmentEnd::Failed(WalkFailure::NoProgress);
            }
        }
    }

    fn entry_frame<M: VmMemory + ?Sized>(&self, memory: &M, frame: &mut VmFrame) -> Step {
        let l = &self.frames;
        let fp = frame.fp;
        let caller = (|| {
            let wrapper = memory.u64(fp.checked_add_signed(l.entry_call_wrapper * 8)?)?;
            let anchor = self.anchor_at(memory, wrapper.checked_add(l.call_wrapper_anchor)?);
            let pc = memory.u64(fp.checked_add(8)?)?;
            let caller_fp = memory.u64(fp)?;
            Some((anchor, VmFrame::new(pc, fp.checked_add(16)?, caller_fp)))
        })();
        match caller {
            Some((anchor, caller)) if fp > frame.sp => {
                *frame = caller;
                Step::End(SegmentEnd::Entry(anchor))
            }
            _ => Step::End(SegmentEnd::Failed(WalkFailure::BadCompiledFrame)),
        }
    }

    fn interpreted_frame<M: VmMemory + ?Sized>(
        &self,
        memory: &M,
        frame: &mut VmFrame,
        memo: &mut WalkMemo,
        sink: &mut dyn FnMut(JavaFrame) -> bool,
    ) -> Step {
        let l = &self.frames;
        let fp = frame.fp;
        let fail = |why| Step::End(SegmentEnd::Failed(why));
        if !fp.is_multiple_of(8) || fp < frame.sp || fp - frame.sp > MAX_STACK_SPAN {
            return fail(WalkFailure::BadInterpretedFrame);
        }
        let word = |index: i64| fp.checked_add_signed(index * 8).and_then(|a| memory.u64(a));
        let Some(method) = word(l.interpreter_method) else { return fail(WalkFailure::BadInterpretedFrame) };
        let Some(id) = self.methods.remembered_jmethod_id(memory, &mut memo.cache.ids, method) else {
            return fail(WalkFailure::UnknownMethod);
        };
        let native = self.methods.is_native(memory, method);
        let bcp_bci = if native {
            None
        } else {
            word(l.interpreter_bcp).and_then(|bcp| self.methods.bci_of_bcp(memory, method, bcp))
        };
        // Without an id, only a bcp inside the method's bytecodes vouches
        // for the frame.
        if id == NO_JMETHOD_ID && bcp_bci.is_none() {
            return fail(WalkFailure::UnknownMethod);
        }
        let bci = if native { BCI_NATIVE_METHOD } else { bcp_bci.unwrap_or(0) };
        let kind = if native { JavaFrameKind::Native } else { JavaFrameKind::Interpreted };
        if !sink(JavaFrame { method: id, bci, kind }) {
            return Step::End(SegmentEnd::Full);
        }
        let (Some(pc), Some(caller_fp), Some(sp)) = (word(1), word(0), fp.checked_add(16)) else {
            return fail(WalkFailure::BadInterpretedFrame);
        };
        // The caller's sp at the call, before a c2i adapter or the caller's
        // expression stack extended it for the arguments (so above `sp`).
        let unextended = word(l.interpreter_sender_sp).filter(|&u| u >= sp && u - sp <= MAX_STACK_SPAN).unwrap_or(sp);
        *frame = VmFrame { unextended_sp: unextended, ..VmFrame::new(pc, sp, caller_fp) };
        Step::Continue
    }

    fn compiled_frame<M: VmMemory + ?Sized>(
        &self,
        memory: &M,
        code: &dyn CodeCheck,
        blob: u64,
        frame: &mut VmFrame,
        memo: &mut WalkMemo,
        sink: &mut dyn FnMut(JavaFrame) -> bool,
    ) -> Step {
        let fail = |why| Step::End(SegmentEnd::Failed(why));
        if !frame.interrupted {
            if let Some(site) = memo.lasting_site(frame.pc, blob, || self.code.in_use_compile_id(memory, blob)) {
                return self.remembered_frame(memory, code, frame, site, sink);
            }
        }
        let Some(code_begin) = self.code.code_begin(memory, blob) else { return fail(WalkFailure::BadCompiledFrame) };
        let Some(method) = self.code.nmethod_method(memory, blob) else { return fail(WalkFailure::BadCompiledFrame) };
        let outer_kind = match self.code.comp_level(memory, blob) {
            1..=3 => JavaFrameKind::C1Compiled,
            _ => JavaFrameKind::C2Compiled,
        };
        // A frame being deoptimized returns to a handler; its state is that
        // of the pc the handler replaced.
        let handler = if frame.interrupted { Some(false) } else { self.code.is_deopt_handler(memory, blob, frame.pc) };
        let original =
            if handler == Some(true) { self.code.original_pc(memory, blob, frame.unextended_sp) } else { None };
        let pc_offset = original.unwrap_or(frame.pc).wrapping_sub(code_begin) as i64;
        // Remember what this return address decodes to while emitting it
        // (one slot more than a site holds: a decode too deep to remember
        // shows as one that fills them all).
        let mut decoded = 0;
        let mut decoded_frames = [JavaFrame::EMPTY; SITE_FRAMES + 1];
        let mut remember = |f: JavaFrame| {
            if let Some(slot) = decoded_frames.get_mut(decoded) {
                *slot = f;
                decoded += 1;
            }
            sink(f)
        };
        let native = self.methods.is_native(memory, method);
        // The frames emitted are all this pc decodes to: the scope chain down
        // to its outermost level, or the method alone where there is none
        // (only such a decode may serve later samples).
        let mut whole = native;
        let mut emitted = false;
        if !native {
            let site = CodeSite { blob, pc_offset, interrupted: frame.interrupted };
            let mut chain = false;
            for scope in self.debug.scopes(memory, site) {
                chain = true;
                let Some(id) = self.methods.remembered_jmethod_id(memory, &mut memo.cache.ids, scope.method) else {
                    break;
                };
                let kind = if scope.outermost { outer_kind } else { JavaFrameKind::Inlined };
                if !remember(JavaFrame { method: id, bci: scope.bci, kind }) {
                    return Step::End(SegmentEnd::Full);
                }
                emitted = true;
                whole = scope.outermost;
            }
            whole |= !chain;
        }
        if !emitted {
            // A native wrapper, or no debug information at this pc: the
            // method alone (at bci 0), as AsyncGetCallTrace reports it.
            let Some(id) = self.methods.remembered_jmethod_id(memory, &mut memo.cache.ids, method) else {
                return fail(WalkFailure::UnknownMethod);
            };
            let (bci, kind) = if native { (BCI_NATIVE_METHOD, JavaFrameKind::Native) } else { (0, outer_kind) };
            if !remember(JavaFrame { method: id, bci, kind }) {
                return Step::End(SegmentEnd::Full);
            }
        }
        let Some(frame_size) = self.code.frame_size(memory, blob) else {
            return fail(WalkFailure::BadCompiledFrame);
        };
        if !frame.interrupted && original.is_none() {
            let frames = decoded_frames.get(..decoded).unwrap_or_default();
            // Never at a handler's pc: the frame returning there is decoded
            // at the pc it saved, which differs frame by frame.
            let lasting = whole && handler == Some(false);
            let compile_id = if lasting { self.code.in_use_compile_id(memory, blob) } else { None };
            if let Some(site) = Site::new(frame.pc, blob, compile_id, frame_size, frames) {
                memo.remember(site);
            }
        }
        let complete = self.code.frame_complete(memory, blob);
        // A frame at a handler is decoded at the pc it saved, not the
        // handler's: no code to read there.
        let pushes_in = original.is_none().then_some(blob);
        let mut shape =
            FrameShape { words: frame_size, complete, pc_offset, java: true, state: FrameState::Unknown, pushes_in };
        if frame.interrupted {
            shape.state = frame_state(memory, frame.pc, shape.in_prologue());
        }
        match self.compiled_caller(memory, code, frame, shape) {
            Some(caller) => {
                *frame = caller;
                Step::Continue
            }
            None => fail(WalkFailure::BadCompiledFrame),
        }
    }

    /// A compiled frame at a return address whose site is remembered.
    fn remembered_frame<M: VmMemory + ?Sized>(
        &self,
        memory: &M,
        code: &dyn CodeCheck,
        frame: &mut VmFrame,
        site: &Site,
        sink: &mut dyn FnMut(JavaFrame) -> bool,
    ) -> Step {
        for f in site.frames() {
            if !sink(*f) {
                return Step::End(SegmentEnd::Full);
            }
        }
        let shape = FrameShape {
            words: site.frame_size,
            complete: -1,
            pc_offset: 0,
            java: true,
            state: FrameState::Unknown,
            pushes_in: Some(site.nmethod),
        };
        match self.compiled_caller(memory, code, frame, shape) {
            Some(caller) => {
                *frame = caller;
                Step::Continue
            }
            None => Step::End(SegmentEnd::Failed(WalkFailure::BadCompiledFrame)),
        }
    }

    /// The caller of a compiled or stub frame of `frame_size` words. An
    /// interrupted frame may not be set up yet (prologue) or torn down
    /// already (epilogue): then its return address is where the
    /// instructions at its pc say, else tried at the sp (or one word above,
    /// after `push rbp`).
    fn compiled_caller<M: VmMemory + ?Sized>(
        &self,
        memory: &M,
        code: &dyn CodeCheck,
        frame: &VmFrame,
        shape: FrameShape,
    ) -> Option<VmFrame> {
        let is_caller = |pc: u64| if shape.java { self.in_code_cache(pc) } else { code.is_code(pc) };
        // The caller's fp stored at `slot`, its return address above it.
        let stored = |slot: u64| {
            let pc = memory.u64(slot.checked_add(8)?).filter(|&pc| is_caller(pc))?;
            Some(VmFrame::new(pc, slot.checked_add(16)?, memory.u64(slot)?))
        };
        // The return address at `slot`, the caller's fp still in rbp.
        let returns_at = |slot: u64| {
            let pc = memory.u64(slot).filter(|&pc| is_caller(pc))?;
            Some(VmFrame::new(pc, slot.checked_add(8)?, frame.fp))
        };
        // The frame size from the sp, else from where the code says the
        // frame's sp is.
        let framed = || {
            let from = |unextended_sp: u64| {
                let sender_sp = unextended_sp.checked_add(u64::try_from(shape.words).ok()?.checked_mul(8)?)?;
                stored(sender_sp.checked_sub(16)?)
            };
            from(frame.unextended_sp).or_else(|| {
                let depth = self.depth_below_frame(memory, shape.pushes_in?, frame, shape.words)?;
                // Read past words the frame size does not cover: a Java
                // frame returns to a return site, not a stale code address.
                from(frame.unextended_sp.checked_add(depth)?).filter(|caller| self.is_return_site(memory, caller.pc))
            })
        };
        if frame.interrupted {
            let decoded = match shape.state {
                FrameState::ReturnAddressAtSp => returns_at(frame.sp),
                FrameState::RbpPushed => stored(frame.sp),
                FrameState::RspLowered(offset) => returns_at(frame.sp.checked_add(offset + 8)?),
                FrameState::Built if shape.words > 0 => framed(),
                FrameState::Built | FrameState::Unknown => None,
            };
            if decoded.is_some() {
                return decoded;
            }
        }
        let tried = frame.interrupted && shape.state == FrameState::Built;
        if shape.words > 0 && !tried && !(frame.interrupted && shape.in_prologue()) {
            if let Some(caller) = framed() {
                return Some(caller);
            }
        }
        if !frame.interrupted {
            return None;
        }
        returns_at(frame.sp).or_else(|| stored(frame.sp)).or_else(|| {
            // A stub with an fp-based frame (`enter`/`leave`).
            let fp = frame.fp;
            if fp <= frame.sp || fp - frame.sp > MAX_STACK_SPAN || !fp.is_multiple_of(8) {
                return None;
            }
            stored(fp)
        })
    }

    /// How many bytes below its frame's sp the unextended sp of a built
    /// `frame` of `nmethod` (`words` in size) is, where the code pushed
    /// words of its own (C2's `string_compare`, for one): what the
    /// instructions from its pc on say ([`crate::sp_scan`]), if more than
    /// none.
    fn depth_below_frame<M: VmMemory + ?Sized>(
        &self,
        memory: &M,
        nmethod: u64,
        frame: &VmFrame,
        words: i64,
    ) -> Option<u64> {
        let pc_descs = self.debug.pc_descs(memory, nmethod)?;
        let next_pc_desc = |offset| pc_descs.next_at_or_after(memory, offset);
        let code = NmethodCode {
            begin: self.code.code_begin(memory, nmethod)?,
            end: self.code.blob_end(memory, nmethod)?,
            frame_words: words,
            next_pc_desc: &next_pc_desc,
        };
        depth_below_frame(memory, frame.pc, frame.unextended_sp, &code).filter(|&depth| depth > 0)
    }

    /// Whether `pc`, in the code cache, can be where a Java frame returns
    /// to: a call site of an nmethod (each has a PcDesc of its own), one of
    /// its deoptimization handlers, or code that is not an nmethod's.
    fn is_return_site<M: VmMemory + ?Sized>(&self, memory: &M, pc: u64) -> bool {
        if self.code.in_interpreter(pc) || self.code.is_call_stub_return(pc) {
            return true;
        }
        let Some(blob) = self.code.find_blob(memory, pc) else { return false };
        if !self.code.is_nmethod(memory, blob) {
            return true;
        }
        let Some(offset) =
            self.code.code_begin(memory, blob).and_then(|begin| i64::try_from(pc.checked_sub(begin)?).ok())
        else {
            return false;
        };
        self.debug.next_pc_desc(memory, blob, offset) == Some(offset)
            || self.code.is_deopt_handler(memory, blob, pc) == Some(true)
    }

    fn stub_frame<M: VmMemory + ?Sized>(
        &self,
        memory: &M,
        code: &dyn CodeCheck,
        blob: u64,
        frame: &mut VmFrame,
        thread: u64,
    ) -> Step {
        let shape = FrameShape {
            words: self.code.frame_size(memory, blob).unwrap_or(0),
            complete: self.code.frame_complete(memory, blob),
            pc_offset: self.code.code_begin(memory, blob).map_or(0, |begin| frame.pc.wrapping_sub(begin) as i64),
            java: false,
            state: FrameState::Unknown,
            pushes_in: None,
        };
        if let Some(caller) = self.compiled_caller(memory, code, frame, shape) {
            *frame = caller;
            return Step::Continue;
        }
        // A frameless stub a Java frame returns to: a mounted virtual
        // thread's bottom frame returns to the continuation return barrier,
        // whose caller is the continuation entry.
        match (!frame.interrupted).then(|| self.continuation_entry(memory, thread, frame)).flatten() {
            Some(entry) => {
                *frame = entry;
                Step::ContinueAtEntry
            }
            None => Step::End(SegmentEnd::Failed(WalkFailure::BadCompiledFrame)),
        }
    }

    /// The frame of `Continuation.enterSpecial` holding the thread's
    /// innermost continuation entry, the caller of `frame` (whose pc is the
    /// stub it returns to) if that entry lies at or above its sp (at it when
    /// the bottom frame is compiled and has no stack arguments): the
    /// entry's address is the frame's sp, its fp is just above the entry.
    fn continuation_entry<M: VmMemory + ?Sized>(&self, memory: &M, thread: u64, frame: &VmFrame) -> Option<VmFrame> {
        match self.frames.continuations? {
            Continuations::Exported { thread_entry, return_pc, entry_size } => {
                let entry = thread_entry.read(memory, Some(thread).filter(|&t| t != 0)?)?;
                if entry < frame.sp || entry - frame.sp > MAX_STACK_SPAN || !entry.is_multiple_of(8) {
                    return None;
                }
                let pc = memory.u64(return_pc).filter(|&pc| self.in_code_cache(pc))?;
                Some(VmFrame::new(pc, entry, entry.checked_add(entry_size)?))
            }
            Continuations::AtReturnBarrier { return_barrier, return_pc } => {
                if memory.u64(return_barrier)? != frame.pc {
                    return None;
                }
                let pc = memory.u64(return_pc).filter(|&pc| self.in_code_cache(pc))?;
                let blob = self.code.find_blob(memory, pc)?;
                let words = u64::try_from(self.code.frame_size(memory, blob)?).ok().filter(|&w| w >= 2)?;
                let size = words.checked_mul(8)?;
                // The entry is where the bottom frame's caller sp was at
                // its call (its unextended sp), above its stack arguments
                // if it has some (then the sp is also aligned down to 16
                // bytes): the first 16-byte aligned address from there
                // whose frame returns into the code cache.
                let lowest = frame.unextended_sp.checked_add(15)? & !15;
                (0..=MAX_STACK_ARGUMENT_WORDS / 2).find_map(|i| {
                    let entry = lowest.checked_add(i * 16)?;
                    let caller_pc = memory.u64(entry.checked_add(size - 8)?)?;
                    self.in_code_cache(caller_pc).then(|| VmFrame::new(pc, entry, entry + size - 16))
                })
            }
        }
    }
}
