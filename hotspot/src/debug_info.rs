//! An nmethod's debug information: the PcDesc for a pc and the chain of
//! scope descriptors it points to (the method and bci of each inlined
//! level, innermost first), in whichever place the JDK keeps them.

use crate::compressed::CompressedReader;
use crate::layout::{DebugInfo, Field};
use crate::memory::VmMemory;
use crate::walker::{HotSpotWalker, JavaFrame, JavaFrameKind, WalkMemo};

/// `DebugInformationRecorder::serialized_null`: no (more) scopes.
const SERIALIZED_NULL: i32 = 0;
/// `InvocationEntryBci`: scope bcis are stored minus this.
const INVOCATION_ENTRY_BCI: i32 = -1;
/// More inlining levels than C2 produces (MaxInlineLevel is 15).
const MAX_INLINE_DEPTH: usize = 64;

/// A pc in an nmethod.
#[derive(Clone, Copy)]
pub(super) struct CodeSite {
    pub(super) blob: u64,
    pub(super) pc_offset: i64,
    pub(super) interrupted: bool,
}

impl HotSpotWalker {
    /// Gives `sink` the scopes (innermost first) of the PcDesc for
    /// `pc_offset`.
    pub(super) fn emit_scopes<M: VmMemory + ?Sized>(
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
        let target = if site.interrupted { site.pc_offset.saturating_add(1) } else { site.pc_offset };
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
        let offset = |f: Field, base: u64| f.read(memory, blob).and_then(|o| base.checked_add(o));
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
}

/// What [`HotSpotWalker::emit_scopes`] did.
pub(super) enum Scopes {
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
