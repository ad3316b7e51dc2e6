//! An nmethod's debug information: the PcDesc for a pc and the chain of
//! scope descriptors it points to (the method and bci of each inlined
//! level, innermost first), in whichever place the JDK keeps them.

use crate::compressed::CompressedReader;
use crate::layout::{DebugInfo, DebugLayout, Field};
use crate::memory::VmMemory;

/// `DebugInformationRecorder::serialized_null`: no (more) scopes.
const SERIALIZED_NULL: i32 = 0;
/// `InvocationEntryBci`: scope bcis are stored minus this.
const INVOCATION_ENTRY_BCI: i32 = -1;
/// More inlining levels than C2 produces (MaxInlineLevel is 15).
const MAX_INLINE_DEPTH: usize = 64;

/// A pc in an nmethod.
#[derive(Clone, Copy)]
pub struct CodeSite {
    pub blob: u64,
    pub pc_offset: i64,
    pub interrupted: bool,
}

/// One level of a pc's scope chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scope {
    /// The `Method*`.
    pub method: u64,
    pub bci: i32,
    /// The nmethod's own method (the others are inlined into it).
    pub outermost: bool,
}

/// Reads nmethods' debug information.
#[derive(Clone, Copy, Debug)]
pub struct DebugInfoReader {
    layout: DebugLayout,
}

impl DebugInfoReader {
    pub fn new(layout: DebugLayout) -> Self {
        Self { layout }
    }

    /// The scopes (innermost first) of the PcDesc for `site`; none if the
    /// nmethod has no debug information there.
    pub fn scopes<'a, M: VmMemory + ?Sized>(&'a self, memory: &'a M, site: CodeSite) -> ScopeChain<'a, M> {
        // The interrupted instruction has not executed yet: its state is
        // the one recorded for the next PcDesc, as AsyncGetCallTrace reads
        // it. Return addresses have a PcDesc of their own.
        let target = if site.interrupted { site.pc_offset.saturating_add(1) } else { site.pc_offset };
        let found = self.debug_tables(memory, site.blob).and_then(|tables| {
            let decode_offset = self.scope_offset(memory, &tables, target)?;
            Some((tables, decode_offset))
        });
        let (tables, decode_offset) = found.unwrap_or((DebugTables::EMPTY, SERIALIZED_NULL));
        ScopeChain { reader: self, memory, tables, decode_offset, depth: 0 }
    }

    /// The pc offset of the first PcDesc at or after `offset` in `blob`
    /// (where HotSpot itself can walk the frame: the frame's sp is its
    /// own there).
    pub fn next_pc_desc<M: VmMemory + ?Sized>(&self, memory: &M, blob: u64, offset: i64) -> Option<i64> {
        self.pc_descs(memory, blob)?.next_at_or_after(memory, offset)
    }

    /// The PcDescs of `blob`, for several look-ups.
    pub fn pc_descs<M: VmMemory + ?Sized>(&self, memory: &M, blob: u64) -> Option<PcDescs<'_>> {
        Some(PcDescs { reader: self, tables: self.debug_tables(memory, blob)? })
    }

    /// The scope decode offset of the first PcDesc at or after `target`.
    fn scope_offset<M: VmMemory + ?Sized>(&self, memory: &M, tables: &DebugTables, target: i64) -> Option<i32> {
        let at = self.find_pc_desc(memory, tables, target)?;
        Some(self.layout.pc_desc_scope_offset.read_signed(memory, at)? as i32)
    }

    /// The address of the first PcDesc at or after `target` (PcDescs are
    /// sorted by pc offset).
    fn find_pc_desc<M: VmMemory + ?Sized>(&self, memory: &M, tables: &DebugTables, target: i64) -> Option<u64> {
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
        (low < count).then(|| tables.pcs + low * size)
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
}

/// One nmethod's PcDescs, where its debug tables say they are.
pub struct PcDescs<'a> {
    reader: &'a DebugInfoReader,
    tables: DebugTables,
}

impl PcDescs<'_> {
    /// The pc offset of the first PcDesc at or after `offset`.
    pub fn next_at_or_after<M: VmMemory + ?Sized>(&self, memory: &M, offset: i64) -> Option<i64> {
        let at = self.reader.find_pc_desc(memory, &self.tables, offset)?;
        self.reader.layout.pc_desc_pc_offset.read_signed(memory, at)
    }
}

/// The scope descriptors of one PcDesc, decoded one level at a time; it
/// ends at the outermost scope or at the first level that does not decode.
pub struct ScopeChain<'a, M: VmMemory + ?Sized> {
    reader: &'a DebugInfoReader,
    memory: &'a M,
    tables: DebugTables,
    decode_offset: i32,
    depth: usize,
}

impl<M: VmMemory + ?Sized> Iterator for ScopeChain<'_, M> {
    type Item = Scope;

    fn next(&mut self) -> Option<Scope> {
        let scope = self.decode();
        // A level that does not decode ends the chain.
        self.decode_offset = match scope {
            Some((_, sender)) => sender,
            None => SERIALIZED_NULL,
        };
        scope.map(|(scope, _)| scope)
    }
}

impl<M: VmMemory + ?Sized> ScopeChain<'_, M> {
    /// The scope at the current decode offset and its sender's offset.
    fn decode(&mut self) -> Option<(Scope, i32)> {
        if self.decode_offset == SERIALIZED_NULL || self.depth >= MAX_INLINE_DEPTH {
            return None;
        }
        self.depth += 1;
        let position = self.tables.scopes_data.checked_add(u64::try_from(self.decode_offset).ok()?)?;
        let mut reader = CompressedReader::new(self.memory, self.reader.layout.encoding, position);
        let (sender, index, bci) = (reader.read_i32()?, reader.read_i32()?, reader.read_i32()?);
        let method = self.tables.metadata_at(self.memory, index)?;
        let scope = Scope { method, bci: bci.wrapping_add(INVOCATION_ENTRY_BCI), outermost: sender == SERIALIZED_NULL };
        Some((scope, sender))
    }
}

/// Where one nmethod's debug information lies.
#[derive(Clone, Copy)]
struct DebugTables {
    pcs: u64,
    pcs_end: u64,
    scopes_data: u64,
    metadata: u64,
}

impl DebugTables {
    const EMPTY: DebugTables = DebugTables { pcs: 0, pcs_end: 0, scopes_data: 0, metadata: 0 };

    /// `nmethod::metadata_at`: index 0 is null, the others count from 1.
    fn metadata_at<M: VmMemory + ?Sized>(&self, memory: &M, index: i32) -> Option<u64> {
        let index = u64::try_from(index).ok().filter(|&i| i > 0)?;
        memory.u64(self.metadata.checked_add((index - 1).checked_mul(8)?)?).filter(|&m| m != 0)
    }
}
