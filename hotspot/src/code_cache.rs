//! The code cache: which blob holds a pc (through the code heap's segment
//! map), whether it is an nmethod, where its instructions start, and the
//! blob fields a frame's caller is found with.

use crate::layout::{BlobKind, BlobLayout, CodeAddresses, CodeStart, DeoptHandlers};
use crate::memory::VmMemory;
use std::sync::atomic::{AtomicU64, Ordering};

/// `CodeBlobKind::Nmethod` (JDK 23+).
const KIND_NMETHOD: u64 = 1;
/// `nmethod::in_use` (every JDK).
const NMETHOD_IN_USE: i64 = 0;
/// Segment-map hops before a lookup gives up.
const MAX_SEGMENT_HOPS: usize = 1 << 14;

/// The code cache of one JVM: its addresses, fixed at start, and how its
/// blobs are laid out.
#[derive(Debug)]
pub struct CodeCache {
    layout: BlobLayout,
    addresses: CodeAddresses,
    /// Name pointers seen on nmethods (up to JDK 22 names tell blob kinds
    /// apart; every nmethod shares one of two string literals).
    nmethod_names: [AtomicU64; 2],
}

impl CodeCache {
    pub fn new(layout: BlobLayout, addresses: CodeAddresses) -> Self {
        Self { layout, addresses, nmethod_names: [AtomicU64::new(0), AtomicU64::new(0)] }
    }

    pub fn contains(&self, pc: u64) -> bool {
        pc >= self.addresses.low && pc < self.addresses.high
    }

    pub fn in_interpreter(&self, pc: u64) -> bool {
        pc >= self.addresses.interpreter.0 && pc < self.addresses.interpreter.1
    }

    /// The return address into the call stub: an entry frame's pc.
    pub fn is_call_stub_return(&self, pc: u64) -> bool {
        pc == self.addresses.call_stub_return
    }

    pub fn code_begin<M: VmMemory + ?Sized>(&self, memory: &M, blob: u64) -> Option<u64> {
        match self.layout.blob_code {
            CodeStart::Pointer(field) => field.read(memory, blob),
            CodeStart::Offset(field) => blob.checked_add(field.read(memory, blob)?),
        }
    }

    pub fn is_nmethod<M: VmMemory + ?Sized>(&self, memory: &M, blob: u64) -> bool {
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

    /// Where a blob ends (its header, code and data).
    pub fn blob_end<M: VmMemory + ?Sized>(&self, memory: &M, blob: u64) -> Option<u64> {
        blob.checked_add(self.layout.blob_size.read(memory, blob)?)
    }

    /// A blob's frame size in words.
    pub fn frame_size<M: VmMemory + ?Sized>(&self, memory: &M, blob: u64) -> Option<i64> {
        self.layout.blob_frame_size.read_signed(memory, blob)
    }

    /// The offset from the code start where a blob's frame is complete
    /// (-1 if it does not say).
    pub fn frame_complete<M: VmMemory + ?Sized>(&self, memory: &M, blob: u64) -> i64 {
        self.layout.blob_frame_complete.read_signed(memory, blob).unwrap_or(-1)
    }

    /// An nmethod's `Method*`.
    pub fn nmethod_method<M: VmMemory + ?Sized>(&self, memory: &M, nmethod: u64) -> Option<u64> {
        self.layout.nmethod_method.read(memory, nmethod)
    }

    pub fn identifies_nmethods(&self) -> bool {
        self.layout.identity.is_some()
    }

    /// An nmethod's compile id, if it is in use (`_state` 0) and the layout
    /// says where both are.
    pub fn in_use_compile_id<M: VmMemory + ?Sized>(&self, memory: &M, nmethod: u64) -> Option<u64> {
        let identity = self.layout.identity?;
        if identity.state.read_signed(memory, nmethod)? != NMETHOD_IN_USE {
            return None;
        }
        identity.compile_id.read(memory, nmethod)
    }

    /// An nmethod's compilation level (C2's 4 if unreadable).
    pub fn comp_level<M: VmMemory + ?Sized>(&self, memory: &M, nmethod: u64) -> i64 {
        self.layout.nmethod_comp_level.read_signed(memory, nmethod).unwrap_or(4)
    }

    /// Whether `pc` is one of `nmethod`'s deoptimization handlers (where a
    /// frame being deoptimized returns); `None` if the layout or memory
    /// does not say.
    pub fn is_deopt_handler<M: VmMemory + ?Sized>(&self, memory: &M, nmethod: u64, pc: u64) -> Option<bool> {
        let (first, second) = match self.layout.deopt?.handlers {
            DeoptHandlers::Pointers(a, b) => (a.read(memory, nmethod)?, b.read(memory, nmethod)?),
            DeoptHandlers::Offsets(a, b) => {
                (nmethod.checked_add(a.read(memory, nmethod)?)?, nmethod.checked_add(b.read(memory, nmethod)?)?)
            }
        };
        Some(pc == first || pc == second)
    }

    /// The pc a deoptimization handler of `nmethod` replaced as the return
    /// address of the frame whose unextended sp is `unextended_sp` (one
    /// returning to a handler), saved in that frame.
    pub fn original_pc<M: VmMemory + ?Sized>(&self, memory: &M, nmethod: u64, unextended_sp: u64) -> Option<u64> {
        let offset = self.layout.deopt?.orig_pc_offset.read_signed(memory, nmethod)?;
        memory.u64(unextended_sp.checked_add_signed(offset)?)
    }

    /// The blob containing `pc`, through the segment map of its code heap:
    /// each segment's byte is 0xFF if free, else the distance (in segments,
    /// possibly in several hops) back to its block's first segment.
    pub fn find_blob<M: VmMemory + ?Sized>(&self, memory: &M, pc: u64) -> Option<u64> {
        let l = &self.layout;
        let heap = self.addresses.heaps.iter().find(|h| pc >= h.low && pc < h.high)?;
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
}
