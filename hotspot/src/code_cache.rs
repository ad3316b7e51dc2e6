//! The code cache: which blob holds a pc (through the code heap's segment
//! map), whether it is an nmethod, and where its instructions start.

use crate::layout::{BlobKind, CodeStart};
use crate::memory::VmMemory;
use crate::walker::HotSpotWalker;
use std::sync::atomic::Ordering;

/// `CodeBlobKind::Nmethod` (JDK 23+).
const KIND_NMETHOD: u64 = 1;
/// Segment-map hops before a lookup gives up.
const MAX_SEGMENT_HOPS: usize = 1 << 14;

impl HotSpotWalker {
    pub(super) fn code_begin<M: VmMemory + ?Sized>(&self, memory: &M, blob: u64) -> Option<u64> {
        match self.layout.blob_code {
            CodeStart::Pointer(field) => field.read(memory, blob),
            CodeStart::Offset(field) => blob.checked_add(field.read(memory, blob)?),
        }
    }

    pub(super) fn is_nmethod<M: VmMemory + ?Sized>(&self, memory: &M, blob: u64) -> bool {
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
}
