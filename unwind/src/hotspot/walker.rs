//! Walking consecutive Java frames from HotSpot's own structures:
//! interpreted frames (method and bcp from the frame), compiled frames
//! (nmethod found through the code heap's segment map, inlined methods from
//! the scope descriptors), stubs (stepped over) and entry frames (where the
//! VM called Java from native code, ending a Java segment).
//!
//! Every read goes through [`VmMemory`]; a broken invariant ends the walk
//! with a [`WalkFailure`], never a fault. Nothing here allocates.

use super::compressed::CompressedReader;
use super::layout::{BlobKind, CodeAddresses, CodeStart, DebugInfo, DeoptHandlers, VmLayout};
use super::memory::VmMemory;
use crate::MAX_STACK_SPAN;
use std::sync::atomic::{AtomicU64, Ordering};

/// `DebugInformationRecorder::serialized_null`: no (more) scopes.
const SERIALIZED_NULL: i32 = 0;
/// `InvocationEntryBci`: scope bcis are stored minus this.
const INVOCATION_ENTRY_BCI: i32 = -1;
/// AsyncGetCallTrace's bci for `native` methods.
pub const BCI_NATIVE: i32 = -3;
const ACC_NATIVE: u64 = 0x100;
/// `CodeBlobKind::Nmethod` (JDK 23+).
const KIND_NMETHOD: u64 = 1;
/// More inlining levels than C2 produces (MaxInlineLevel is 15).
const MAX_INLINE_DEPTH: usize = 64;
/// Segment-map hops before a lookup gives up.
const MAX_SEGMENT_HOPS: usize = 1 << 14;

/// What a Java frame is, as the JFR FrameType pool names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JavaFrameKind {
    Interpreted,
    C1Compiled,
    C2Compiled,
    Inlined,
    /// A Java `native` method (its compiled wrapper or interpreter entry).
    Native,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JavaFrame {
    /// The method's jmethodID.
    pub method: u64,
    pub bci: i32,
    pub kind: JavaFrameKind,
}

impl JavaFrame {
    const EMPTY: JavaFrame = JavaFrame { method: 0, bci: 0, kind: JavaFrameKind::Interpreted };
}

/// Frames remembered per return address.
const MEMO_FRAMES: usize = 8;
/// Entries of a [`MethodIds`] table.
const METHOD_IDS: usize = 512;

/// jmethodIDs by `Method*`, kept across samples by one sampling stripe
/// (used under its lock). The jmethodID chain is eight dependent reads; a
/// hit is one, checking that the id still points at its method (HotSpot
/// clears the slot when the method goes away). Not used from JDK 26, whose
/// ids are opaque and cannot be checked that way.
pub struct MethodIds {
    entries: [(u64, u64); METHOD_IDS],
}

impl Default for MethodIds {
    fn default() -> Self {
        Self { entries: [(0, 0); METHOD_IDS] }
    }
}

impl MethodIds {
    fn slot(method: u64) -> usize {
        ((method >> 3) ^ (method >> 12)) as usize % METHOD_IDS
    }
}

/// What one sample's walk has decoded already. Deep recursion returns to
/// the same pc again and again, and within one walk a pc decodes the same
/// way each time (code on the walked stack cannot be freed under it), so
/// repeats cost two stack reads instead of a code-cache lookup, a PcDesc
/// search and scope decoding. Lives on the handler's stack, one per walk.
pub struct WalkMemo<'c> {
    /// The walked thread's `JavaThread*` (0 if unknown): where its
    /// continuation entry is.
    thread: u64,
    pc: u64,
    frame_size: i64,
    frames: [JavaFrame; MEMO_FRAMES],
    len: usize,
    ids: &'c mut MethodIds,
}

impl<'c> WalkMemo<'c> {
    pub fn new(thread: u64, ids: &'c mut MethodIds) -> Self {
        Self { thread, pc: 0, frame_size: 0, frames: [JavaFrame::EMPTY; MEMO_FRAMES], len: 0, ids }
    }
}

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
}

/// A pc in an nmethod.
#[derive(Clone, Copy)]
struct CodeSite {
    blob: u64,
    pc_offset: i64,
    interrupted: bool,
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

/// The HotSpot walker: layout plus code-cache addresses, fixed at start.
#[derive(Debug)]
pub struct HotSpotWalker {
    pub layout: VmLayout,
    pub code: CodeAddresses,
    /// Name pointers seen on nmethods (up to JDK 22 names tell blob kinds
    /// apart; every nmethod shares one of two string literals).
    nmethod_names: [AtomicU64; 2],
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
    End(SegmentEnd),
}

impl HotSpotWalker {
    pub fn new(layout: VmLayout, code: CodeAddresses) -> Self {
        Self { layout, code, nmethod_names: [AtomicU64::new(0), AtomicU64::new(0)] }
    }

    pub fn in_code_cache(&self, pc: u64) -> bool {
        pc >= self.code.low && pc < self.code.high
    }

    /// The anchor of a thread (`JavaThread*`), if it has a last Java frame.
    pub fn thread_anchor<M: VmMemory + ?Sized>(&self, memory: &M, thread: u64) -> Option<Anchor> {
        self.anchor_at(memory, thread.checked_add(self.layout.thread_anchor)?)
    }

    fn anchor_at<M: VmMemory + ?Sized>(&self, memory: &M, anchor: u64) -> Option<Anchor> {
        let l = &self.layout;
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
        loop {
            if !self.in_code_cache(frame.pc) {
                return SegmentEnd::Native;
            }
            let before = *frame;
            let step = if frame.pc == self.code.call_stub_return {
                self.entry_frame(memory, frame)
            } else if frame.pc >= self.code.interpreter.0 && frame.pc < self.code.interpreter.1 {
                self.interpreted_frame(memory, frame, memo, sink)
            } else if !frame.interrupted && memo.len > 0 && memo.pc == frame.pc {
                self.remembered_frame(memory, code, frame, memo, sink)
            } else {
                match self.find_blob(memory, frame.pc) {
                    Some(blob) if self.is_nmethod(memory, blob) => {
                        self.compiled_frame(memory, code, blob, frame, memo, sink)
                    }
                    Some(blob) => self.stub_frame(memory, code, blob, frame, memo.thread),
                    None => Step::End(SegmentEnd::Failed(WalkFailure::NoCodeBlob)),
                }
            };
            if let Step::End(end) = step {
                return end;
            }
            if frame.sp <= before.sp || frame.sp - start_sp > MAX_STACK_SPAN || !frame.sp.is_multiple_of(8) {
                return SegmentEnd::Failed(WalkFailure::NoProgress);
            }
        }
    }

    fn entry_frame<M: VmMemory + ?Sized>(&self, memory: &M, frame: &mut VmFrame) -> Step {
        let l = &self.layout;
        let fp = frame.fp;
        let caller = (|| {
            let wrapper = memory.u64(fp.checked_add_signed(l.entry_call_wrapper * 8)?)?;
            let anchor = self.anchor_at(memory, wrapper.checked_add(l.call_wrapper_anchor)?);
            let pc = memory.u64(fp.checked_add(8)?)?;
            let caller_fp = memory.u64(fp)?;
            Some((anchor, VmFrame::new(pc, fp + 16, caller_fp)))
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
        let l = &self.layout;
        let fp = frame.fp;
        let fail = |why| Step::End(SegmentEnd::Failed(why));
        if !fp.is_multiple_of(8) || fp < frame.sp || fp - frame.sp > MAX_STACK_SPAN {
            return fail(WalkFailure::BadInterpretedFrame);
        }
        let word = |index: i64| fp.checked_add_signed(index * 8).and_then(|a| memory.u64(a));
        let Some(method) = word(l.interpreter_method) else { return fail(WalkFailure::BadInterpretedFrame) };
        let Some(id) = self.memo_jmethod_id(memory, memo, method) else { return fail(WalkFailure::UnknownMethod) };
        let bci = if self.is_native(memory, method) {
            BCI_NATIVE
        } else {
            word(l.interpreter_bcp).and_then(|bcp| self.bci_of_bcp(memory, method, bcp)).unwrap_or(0)
        };
        let kind = if bci == BCI_NATIVE { JavaFrameKind::Native } else { JavaFrameKind::Interpreted };
        if !sink(JavaFrame { method: id, bci, kind }) {
            return Step::End(SegmentEnd::Full);
        }
        let (Some(pc), Some(caller_fp)) = (word(1), word(0)) else {
            return fail(WalkFailure::BadInterpretedFrame);
        };
        let sp = fp + 16;
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
        let l = &self.layout;
        let fail = |why| Step::End(SegmentEnd::Failed(why));
        let Some(code_begin) = self.code_begin(memory, blob) else { return fail(WalkFailure::BadCompiledFrame) };
        let Some(method) = l.nmethod_method.read(memory, blob) else { return fail(WalkFailure::BadCompiledFrame) };
        let level = l.nmethod_comp_level.read_signed(memory, blob).unwrap_or(4);
        let outer_kind = match level {
            1..=3 => JavaFrameKind::C1Compiled,
            _ => JavaFrameKind::C2Compiled,
        };
        // A frame being deoptimized returns to a handler; its state is that
        // of the pc the handler replaced.
        let original = if frame.interrupted { None } else { self.original_pc(memory, blob, frame) };
        let pc_offset = original.unwrap_or(frame.pc).wrapping_sub(code_begin) as i64;
        // Remember what this return address decodes to while emitting it.
        memo.len = 0;
        let mut memo_len = 0;
        let mut memo_frames = [JavaFrame::EMPTY; MEMO_FRAMES];
        let mut remember = |f: JavaFrame| {
            if let Some(slot) = memo_frames.get_mut(memo_len) {
                *slot = f;
            }
            memo_len += 1;
            sink(f)
        };
        let sink = &mut remember;
        let scopes = if self.is_native(memory, method) {
            Scopes::None
        } else {
            let site = CodeSite { blob, pc_offset, interrupted: frame.interrupted };
            self.emit_scopes(memory, site, outer_kind, memo, sink)
        };
        match scopes {
            Scopes::Full => return Step::End(SegmentEnd::Full),
            Scopes::Some => {}
            Scopes::None => {
                // A native wrapper, or no debug information at this pc: the
                // method alone (at bci 0), as AsyncGetCallTrace reports it.
                let Some(id) = self.jmethod_id(memory, method) else { return fail(WalkFailure::UnknownMethod) };
                let (bci, kind) =
                    if self.is_native(memory, method) { (BCI_NATIVE, JavaFrameKind::Native) } else { (0, outer_kind) };
                if !sink(JavaFrame { method: id, bci, kind }) {
                    return Step::End(SegmentEnd::Full);
                }
            }
        }
        let Some(frame_size) = l.blob_frame_size.read_signed(memory, blob) else {
            return fail(WalkFailure::BadCompiledFrame);
        };
        if !frame.interrupted && original.is_none() && (1..=MEMO_FRAMES).contains(&memo_len) {
            memo.frames = memo_frames;
            memo.len = memo_len;
            memo.pc = frame.pc;
            memo.frame_size = frame_size;
        }
        let complete = l.blob_frame_complete.read_signed(memory, blob).unwrap_or(-1);
        let shape = FrameShape { words: frame_size, complete, pc_offset };
        match self.compiled_caller(memory, code, frame, shape) {
            Some(caller) => {
                *frame = caller;
                Step::Continue
            }
            None => fail(WalkFailure::BadCompiledFrame),
        }
    }

    /// The pc a deoptimization handler replaced as `frame`'s return address,
    /// if it did.
    fn original_pc<M: VmMemory + ?Sized>(&self, memory: &M, blob: u64, frame: &VmFrame) -> Option<u64> {
        let deopt = self.layout.deopt?;
        let (first, second) = match deopt.handlers {
            DeoptHandlers::Pointers(a, b) => (a.read(memory, blob)?, b.read(memory, blob)?),
            DeoptHandlers::Offsets(a, b) => {
                (blob.checked_add(a.read(memory, blob)?)?, blob.checked_add(b.read(memory, blob)?)?)
            }
        };
        if frame.pc != first && frame.pc != second {
            return None;
        }
        let offset = deopt.orig_pc_offset.read_signed(memory, blob)?;
        memory.u64(frame.unextended_sp.checked_add_signed(offset)?)
    }

    /// A compiled frame at the return address decoded last.
    fn remembered_frame<M: VmMemory + ?Sized>(
        &self,
        memory: &M,
        code: &dyn CodeCheck,
        frame: &mut VmFrame,
        memo: &WalkMemo,
        sink: &mut dyn FnMut(JavaFrame) -> bool,
    ) -> Step {
        for f in &memo.frames[..memo.len] {
            if !sink(*f) {
                return Step::End(SegmentEnd::Full);
            }
        }
        let shape = FrameShape { words: memo.frame_size, complete: -1, pc_offset: 0 };
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
    /// already (epilogue): then its return address is at the sp (or one
    /// word above, after `push rbp`).
    fn compiled_caller<M: VmMemory + ?Sized>(
        &self,
        memory: &M,
        code: &dyn CodeCheck,
        frame: &VmFrame,
        shape: FrameShape,
    ) -> Option<VmFrame> {
        let frameless = |skip: u64| {
            let slot = frame.sp.checked_add(skip * 8)?;
            let pc = memory.u64(slot)?;
            let fp = if skip == 1 { memory.u64(frame.sp)? } else { frame.fp };
            code.is_code(pc).then(|| VmFrame::new(pc, slot + 8, fp))
        };
        let in_prologue = shape.complete >= 0 && shape.pc_offset < shape.complete;
        let framed = || {
            let sender_sp = frame.unextended_sp.checked_add(shape.words as u64 * 8)?;
            let pc = memory.u64(sender_sp - 8).filter(|&pc| code.is_code(pc))?;
            Some(VmFrame::new(pc, sender_sp, memory.u64(sender_sp - 16)?))
        };
        if shape.words > 0 && !(frame.interrupted && in_prologue) {
            if let Some(caller) = framed() {
                return Some(caller);
            }
        }
        if !frame.interrupted {
            return None;
        }
        frameless(0).or_else(|| frameless(1)).or_else(|| {
            // A stub with an fp-based frame (`enter`/`leave`).
            let fp = frame.fp;
            if fp <= frame.sp || fp - frame.sp > MAX_STACK_SPAN || !fp.is_multiple_of(8) {
                return None;
            }
            let pc = memory.u64(fp + 8)?;
            code.is_code(pc).then_some(VmFrame::new(pc, fp + 16, memory.u64(fp)?))
        })
    }

    fn stub_frame<M: VmMemory + ?Sized>(
        &self,
        memory: &M,
        code: &dyn CodeCheck,
        blob: u64,
        frame: &mut VmFrame,
        thread: u64,
    ) -> Step {
        let l = &self.layout;
        let shape = FrameShape {
            words: l.blob_frame_size.read_signed(memory, blob).unwrap_or(0),
            complete: l.blob_frame_complete.read_signed(memory, blob).unwrap_or(-1),
            pc_offset: self.code_begin(memory, blob).map_or(0, |begin| frame.pc.wrapping_sub(begin) as i64),
        };
        let caller = self.compiled_caller(memory, code, frame, shape).or_else(|| {
            // A frameless stub a Java frame returns to: a mounted virtual
            // thread's bottom frame returns to the continuation return
            // barrier, whose caller is the continuation entry.
            (!frame.interrupted).then(|| self.continuation_entry(memory, thread, frame)).flatten()
        });
        match caller {
            Some(caller) => {
                *frame = caller;
                Step::Continue
            }
            None => Step::End(SegmentEnd::Failed(WalkFailure::BadCompiledFrame)),
        }
    }

    /// The frame of `Continuation.enterSpecial` holding the thread's
    /// innermost continuation entry, if that entry lies above `frame`: the
    /// entry's address is the frame's sp, the fp is just above the entry.
    fn continuation_entry<M: VmMemory + ?Sized>(&self, memory: &M, thread: u64, frame: &VmFrame) -> Option<VmFrame> {
        let c = self.layout.continuations?;
        let entry = c.thread_entry.read(memory, Some(thread).filter(|&t| t != 0)?)?;
        if entry <= frame.sp || entry - frame.sp > MAX_STACK_SPAN || !entry.is_multiple_of(8) {
            return None;
        }
        let pc = memory.u64(c.return_pc).filter(|&pc| self.in_code_cache(pc))?;
        Some(VmFrame::new(pc, entry, entry.checked_add(c.entry_size)?))
    }

    /// Gives `sink` the scopes (innermost first) of the PcDesc for
    /// `pc_offset`.
    fn emit_scopes<M: VmMemory + ?Sized>(
        &self,
        memory: &M,
        site: CodeSite,
        outer_kind: JavaFrameKind,
        memo: &mut WalkMemo,
        sink: &mut dyn FnMut(JavaFrame) -> bool,
    ) -> Scopes {
        let Some(tables) = self.debug_tables(memory, site.blob) else { return Scopes::None };
        // The interrupted instruction has not executed yet: its state is
        // the one recorded for the next PcDesc, as AsyncGetCallTrace reads
        // it. Return addresses have a PcDesc of their own.
        let target = if site.interrupted { site.pc_offset + 1 } else { site.pc_offset };
        let desc = self.find_pc_desc(memory, &tables, target);
        let Some(mut decode_offset) = desc else { return Scopes::None };
        let mut emitted = Scopes::None;
        for _ in 0..MAX_INLINE_DEPTH {
            if decode_offset == SERIALIZED_NULL {
                break;
            }
            let Some(position) = tables.scopes_data.checked_add(decode_offset as u64) else { break };
            let mut reader = CompressedReader::new(memory, self.layout.encoding, position);
            let (Some(sender), Some(index), Some(bci)) = (reader.read_i32(), reader.read_i32(), reader.read_i32())
            else {
                break;
            };
            let Some(method) = self.metadata_at(memory, &tables, index) else { break };
            let Some(id) = self.memo_jmethod_id(memory, memo, method) else { break };
            let kind = if sender == SERIALIZED_NULL { outer_kind } else { JavaFrameKind::Inlined };
            if !sink(JavaFrame { method: id, bci: bci.wrapping_add(INVOCATION_ENTRY_BCI), kind }) {
                return Scopes::Full;
            }
            emitted = Scopes::Some;
            decode_offset = sender;
        }
        emitted
    }

    /// The scope decode offset of the first PcDesc at or after `target`
    /// (PcDescs are sorted by pc offset).
    fn find_pc_desc<M: VmMemory + ?Sized>(&self, memory: &M, tables: &DebugTables, target: i64) -> Option<i32> {
        let l = &self.layout;
        let size = l.pc_desc_size;
        let count = tables.pcs_end.checked_sub(tables.pcs)? / size;
        let pc_offset_at = |i: u64| l.pc_desc_pc_offset.read_signed(memory, tables.pcs + i * size);
        let (mut low, mut high) = (0u64, count);
        while low < high {
            let mid = low + (high - low) / 2;
            if pc_offset_at(mid)? < target {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        if low >= count {
            return None;
        }
        Some(l.pc_desc_scope_offset.read_signed(memory, tables.pcs + low * size)? as i32)
    }

    fn debug_tables<M: VmMemory + ?Sized>(&self, memory: &M, blob: u64) -> Option<DebugTables> {
        let offset = |f: super::layout::Field, base: u64| f.read(memory, blob).and_then(|o| base.checked_add(o));
        match self.layout.debug_info {
            DebugInfo::InBlob { pcs, pcs_end, scopes_data, metadata } => Some(DebugTables {
                pcs: offset(pcs, blob)?,
                pcs_end: offset(pcs_end, blob)?,
                scopes_data: scopes_data.read(memory, blob)?,
                metadata: offset(metadata, blob)?,
            }),
            DebugInfo::Immutable { data, pcs, scopes_data, mutable_data, relocation_size } => {
                let base = data.read(memory, blob)?;
                let relocations = relocation_size.read(memory, blob)?;
                Some(DebugTables {
                    pcs: offset(pcs, base)?,
                    pcs_end: offset(scopes_data, base)?,
                    scopes_data: offset(scopes_data, base)?,
                    metadata: mutable_data.read(memory, blob)?.checked_add(relocations)?,
                })
            }
        }
    }

    /// `nmethod::metadata_at`: index 0 is null, the others count from 1.
    fn metadata_at<M: VmMemory + ?Sized>(&self, memory: &M, tables: &DebugTables, index: i32) -> Option<u64> {
        let index = u64::try_from(index).ok().filter(|&i| i > 0)?;
        memory.u64(tables.metadata.checked_add((index - 1) * 8)?).filter(|&m| m != 0)
    }

    fn code_begin<M: VmMemory + ?Sized>(&self, memory: &M, blob: u64) -> Option<u64> {
        match self.layout.blob_code {
            CodeStart::Pointer(field) => field.read(memory, blob),
            CodeStart::Offset(field) => blob.checked_add(field.read(memory, blob)?),
        }
    }

    fn is_nmethod<M: VmMemory + ?Sized>(&self, memory: &M, blob: u64) -> bool {
        match self.layout.blob_kind {
            BlobKind::Kind(field) => field.read(memory, blob) == Some(KIND_NMETHOD),
            BlobKind::Name => {
                let Some(name_ptr) = self.layout.blob_name.read(memory, blob).filter(|&p| p != 0) else {
                    return false;
                };
                if self.nmethod_names.iter().any(|known| known.load(Ordering::Relaxed) == name_ptr) {
                    return true;
                }
                let mut name = [0u8; 16];
                let slot = match memory.c_string(name_ptr, &mut name).map(|len| &name[..len]) {
                    Some(b"nmethod") => 0,
                    Some(b"native nmethod") => 1,
                    _ => return false,
                };
                self.nmethod_names[slot].store(name_ptr, Ordering::Relaxed);
                true
            }
        }
    }

    /// The blob containing `pc`, through the segment map of its code heap:
    /// each segment's byte is 0xFF if free, else the distance (in segments,
    /// possibly in several hops) back to its block's first segment.
    pub fn find_blob<M: VmMemory + ?Sized>(&self, memory: &M, pc: u64) -> Option<u64> {
        let l = &self.layout;
        let heap = self.code.heaps.iter().find(|h| pc >= h.low && pc < h.high)?;
        let mut segment = (pc - heap.low) >> heap.log2_segment;
        let mut hops = 0;
        loop {
            let tag = memory.u8(heap.segmap.checked_add(segment)?)?;
            if tag == 0xFF {
                return None;
            }
            if tag == 0 {
                break;
            }
            segment = segment.checked_sub(u64::from(tag))?;
            hops += 1;
            if hops > MAX_SEGMENT_HOPS {
                return None;
            }
        }
        let block = heap.low + (segment << heap.log2_segment);
        if l.heap_block_used.read(memory, block)? & 0xff == 0 {
            return None;
        }
        let blob = block + l.heap_block_size;
        let size = l.blob_size.read(memory, blob)?;
        (pc < blob.checked_add(size)?).then_some(blob)
    }

    fn is_native<M: VmMemory + ?Sized>(&self, memory: &M, method: u64) -> bool {
        self.layout.method_access_flags.read(memory, method).is_some_and(|flags| flags & ACC_NATIVE != 0)
    }

    /// The bci a bytecode pointer stands for, if it points into the
    /// method's bytecodes.
    fn bci_of_bcp<M: VmMemory + ?Sized>(&self, memory: &M, method: u64, bcp: u64) -> Option<i32> {
        let l = &self.layout;
        let const_method = l.method_const_method.read(memory, method)?;
        let code_size = l.const_method_code_size.read(memory, const_method)?;
        let bci = bcp.checked_sub(const_method + l.const_method_size)?;
        (bci < code_size).then_some(bci as i32)
    }

    fn memo_jmethod_id<M: VmMemory + ?Sized>(&self, memory: &M, memo: &mut WalkMemo, method: u64) -> Option<u64> {
        let checkable = self.layout.java_major < 26;
        let slot = MethodIds::slot(method);
        let (known, id) = memo.ids.entries[slot];
        if checkable && known == method && method != 0 && memory.u64(id) == Some(method) {
            return Some(id);
        }
        let id = self.jmethod_id(memory, method)?;
        if checkable {
            memo.ids.entries[slot] = (method, id);
        }
        Some(id)
    }

    /// The jmethodID of a `Method*`, from its holder's jmethodID cache
    /// (`[length, id for idnum 0, ...]`). `None` if the method has none
    /// yet or the pointer does not lead back to itself.
    pub fn jmethod_id<M: VmMemory + ?Sized>(&self, memory: &M, method: u64) -> Option<u64> {
        let l = &self.layout;
        let const_method = l.method_const_method.read(memory, method).filter(|&p| p != 0)?;
        let constants = l.const_method_constants.read(memory, const_method).filter(|&p| p != 0)?;
        let holder = l.pool_holder.read(memory, constants).filter(|&p| p != 0)?;
        let idnum = l.const_method_idnum.read(memory, const_method)?;
        let ids = l.klass_jmethod_ids.read(memory, holder).filter(|&p| p != 0)?;
        let length = memory.u64(ids)?;
        if idnum >= length {
            return None;
        }
        let id = memory.u64(ids.checked_add((idnum + 1) * 8)?).filter(|&id| id != 0)?;
        self.id_names(memory, id, method, holder, idnum).then_some(id)
    }

    /// Whether `id` stands for `method`: a jmethodID that points at its
    /// `Method*` (up to JDK 25) must; an opaque one (JDK 26+, JDK-8268406)
    /// is checked through the holder's method array instead.
    fn id_names<M: VmMemory + ?Sized>(&self, memory: &M, id: u64, method: u64, holder: u64, idnum: u64) -> bool {
        if self.layout.java_major < 26 {
            return memory.u64(id) == Some(method);
        }
        let Some(methods) = self.layout.klass_methods.read(memory, holder) else { return false };
        // Array<Method*>: an int length, then the elements, word-aligned.
        let Some(length) = memory.u32(methods) else { return false };
        let at = |i: u64| memory.u64(methods + 8 + 8 * i);
        if idnum < u64::from(length) && at(idnum) == Some(method) {
            return true;
        }
        (0..u64::from(length).min(4096)).any(|i| at(i) == Some(method))
    }
}

/// What [`HotSpotWalker::emit_scopes`] did.
enum Scopes {
    None,
    Some,
    Full,
}

/// Where one nmethod's debug information lies.
struct DebugTables {
    pcs: u64,
    pcs_end: u64,
    scopes_data: u64,
    metadata: u64,
}
