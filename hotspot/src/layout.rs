//! The offsets and sizes the walker uses, taken from [`VmTables`] once, so
//! JDK-version differences live here and not in the walker. A required
//! entry that is missing is an error naming it.

use crate::compressed::Unsigned5;
use crate::memory::VmMemory;
use crate::tables::{FieldEntry, VmTables};

/// A field of a VM structure: its offset and its width in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub offset: u64,
    pub width: u8,
}

impl Field {
    /// The field of the structure at `base`, zero-extended.
    #[inline]
    pub fn read<M: VmMemory + ?Sized>(self, memory: &M, base: u64) -> Option<u64> {
        memory.uint(base.checked_add(self.offset)?, self.width)
    }

    /// The field, sign-extended from its width.
    #[inline]
    pub fn read_signed<M: VmMemory + ?Sized>(self, memory: &M, base: u64) -> Option<i64> {
        let bits = u32::from(self.width) * 8;
        let raw = self.read(memory, base)?;
        Some(if bits >= 64 { raw as i64 } else { ((raw << (64 - bits)) as i64) >> (64 - bits) })
    }
}

/// Where a blob's instructions start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeStart {
    /// A pointer field (`CodeBlob::_code_begin`, up to JDK 22).
    Pointer(Field),
    /// An offset from the blob (`CodeBlob::_code_offset`, JDK 23+).
    Offset(Field),
}

/// How to tell an nmethod from other blobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlobKind {
    /// By name: "nmethod" or "native nmethod" (up to JDK 22).
    Name,
    /// By `CodeBlob::_kind` (JDK 23+): value 1 is an nmethod.
    Kind(Field),
}

/// Where an nmethod keeps its PcDescs, scope data and metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DebugInfo {
    /// In the blob (up to JDK 22): pcs from `_scopes_pcs_offset` to
    /// `_dependencies_offset`, scope data at the `_scopes_data_begin`
    /// pointer, metadata from `_metadata_offset`, all from the blob start.
    InBlob { pcs: Field, pcs_end: Field, scopes_data: Field, metadata: Field },
    /// In a separate immutable block (JDK 23+): pcs from `_scopes_pcs_offset`
    /// to `_scopes_data_offset` of `_immutable_data`; metadata in the
    /// mutable data right after the relocations.
    Immutable { data: Field, pcs: Field, scopes_data: Field, mutable_data: Field, relocation_size: Field },
}

/// Where an nmethod's deoptimization handlers are: a frame whose return
/// address was patched to one of them keeps its original pc in the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeoptHandlers {
    /// Pointer fields (`_deopt_handler_begin`, `_deopt_mh_handler_begin`,
    /// up to JDK 22).
    Pointers(Field, Field),
    /// Offsets from the blob (`_deopt_handler_offset`, ..., JDK 23+).
    Offsets(Field, Field),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deopt {
    pub handlers: DeoptHandlers,
    /// Where the original pc is saved: an offset from the unextended sp.
    pub orig_pc_offset: Field,
}

/// Where a mounted virtual thread's frames end (JDK 21+): its innermost
/// `ContinuationEntry` lives on the carrier's stack, at the sp of the frame
/// of `Continuation.enterSpecial`. Once the thread's frames were frozen
/// and thawed, its bottom frame returns to the continuation return
/// barrier (a frameless stub) and that frame is its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Continuations {
    /// VMStructs lists the thread's entry (JDK 25.0.3).
    Exported {
        /// `JavaThread::_cont_entry`.
        thread_entry: Field,
        /// The address of the static `ContinuationEntry::_return_pc`: the
        /// return address into `enterSpecial` (set once it is generated).
        return_pc: u64,
        /// `ContinuationEntry::size()`, its size rounded up to 16 bytes:
        /// the entry frame's fp is just above it.
        entry_size: u64,
    },
    /// VMStructs lists none of it (JDK 21 to 25.0.2); libjvm's symbol
    /// table has the two statics. Thawing lays the bottom frame out right
    /// below the entry, moved down by its stack arguments
    /// (`ContinuationEntry::bottom_sender_sp`), so the entry is found from
    /// the frame returning to the barrier; `enterSpecial`'s nmethod gives
    /// the entry frame's size.
    AtReturnBarrier {
        /// The address of the static `StubRoutines::_cont_returnBarrier`.
        return_barrier: u64,
        /// The address of the static `ContinuationEntry::_return_pc`.
        return_pc: u64,
    },
}

/// How a jmethodID names its method, chosen once from the JDK version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MethodIdScheme {
    /// Up to JDK 25: an id points at its `Method*`, so a remembered id is
    /// checked by one read.
    Checkable,
    /// JDK 26+ (JDK-8268406): ids are opaque; an id is checked through its
    /// holder's method array, and none is remembered across samples.
    Opaque,
}

impl MethodIdScheme {
    pub fn for_java_major(major: u32) -> Self {
        if major < 26 {
            MethodIdScheme::Checkable
        } else {
            MethodIdScheme::Opaque
        }
    }
}

/// Everything the walker reads from the tables, grouped by the part of
/// the walker that uses it.
#[derive(Clone, Debug)]
pub struct VmLayout {
    pub frames: FrameLayout,
    pub blobs: BlobLayout,
    pub debug: DebugLayout,
    pub methods: MethodLayout,
}

/// Thread anchors and the frames the walker steps through itself
/// (interpreted, entry, continuation entry).
#[derive(Clone, Copy, Debug)]
pub struct FrameLayout {
    pub thread_anchor: u64,
    pub anchor_sp: Field,
    pub anchor_pc: Field,
    pub anchor_fp: Field,
    pub call_wrapper_anchor: u64,
    /// `None` before JDK 21.
    pub continuations: Option<Continuations>,
    /// Word offsets from an interpreted frame's fp.
    pub interpreter_method: i64,
    pub interpreter_bcp: i64,
    pub interpreter_sender_sp: i64,
    /// Word offset of an entry frame's JavaCallWrapper from its fp.
    pub entry_call_wrapper: i64,
}

/// Code heaps and the blobs in them.
#[derive(Clone, Copy, Debug)]
pub struct BlobLayout {
    pub heap_block_size: u64,
    pub heap_block_used: Field,
    pub blob_name: Field,
    pub blob_size: Field,
    pub blob_frame_size: Field,
    pub blob_frame_complete: Field,
    pub blob_code: CodeStart,
    pub blob_kind: BlobKind,
    pub nmethod_method: Field,
    pub nmethod_comp_level: Field,
    /// `None` if the tables do not say (frames being deoptimized then
    /// decode at the handler, with the wrong bci).
    pub deopt: Option<Deopt>,
    /// `None` if the tables do not say (decoded return sites are then not
    /// remembered across samples).
    pub identity: Option<NmethodIdentity>,
}

/// What tells an nmethod from one that later took its place, and whether
/// it is still in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NmethodIdentity {
    /// `nmethod::_compile_id`: never reused within a VM.
    pub compile_id: Field,
    /// `nmethod::_state`: 0 (`in_use`, in every JDK) only while in use.
    pub state: Field,
}

/// An nmethod's PcDescs and scope descriptors.
#[derive(Clone, Copy, Debug)]
pub struct DebugLayout {
    pub encoding: Unsigned5,
    pub debug_info: DebugInfo,
    pub pc_desc_size: u64,
    pub pc_desc_pc_offset: Field,
    pub pc_desc_scope_offset: Field,
}

/// Methods, their classes and their jmethodIDs.
#[derive(Clone, Copy, Debug)]
pub struct MethodLayout {
    pub id_scheme: MethodIdScheme,
    pub method_const_method: Field,
    pub method_access_flags: Field,
    pub const_method_constants: Field,
    pub const_method_idnum: Field,
    pub const_method_code_size: Field,
    /// Bytecodes start right after the ConstMethod.
    pub const_method_size: u64,
    pub pool_holder: Field,
    pub klass_jmethod_ids: Field,
    pub klass_methods: Field,
    /// `None` if the tables do not say (an intrinsic's frame is then named
    /// by whatever id its class keeps in the intrinsics' slot).
    pub mh_intrinsics: Option<MhIntrinsics>,
}

/// What tells HotSpot's method-handle intrinsics apart: the methods
/// `MethodHandle.invokeBasic` and `linkTo*` that it makes at run time, one
/// per call shape, which `MethodHandle` does not list and which all have
/// idnum 0, so its jmethodID cache has no slot of their own (the one of
/// idnum 0 names whatever method got an id there first). An intrinsic's
/// `Method::_intrinsic_id` is one of `ids` (`is_method_handle_intrinsic`),
/// as is that of the `native` method `MethodHandle` declares under that
/// name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MhIntrinsics {
    /// `Method::_intrinsic_id`.
    pub intrinsic_id: Field,
    /// `vmIntrinsics::_invokeBasic`, `_linkToVirtual`, `_linkToStatic`,
    /// `_linkToSpecial`, `_linkToInterface` and `_linkToNative` (JDK 16+;
    /// [`MhIntrinsics::ABSENT`] before).
    pub ids: [u64; 6],
}

impl MhIntrinsics {
    /// An id no method has (intrinsic ids are 16-bit).
    pub const ABSENT: u64 = u64::MAX;

    /// Whether an `_intrinsic_id` is a method-handle intrinsic's.
    pub fn contains(&self, intrinsic_id: u64) -> bool {
        intrinsic_id != Self::ABSENT && self.ids.contains(&intrinsic_id)
    }
}

struct Lookup<'a> {
    tables: &'a VmTables,
}

impl Lookup<'_> {
    fn entry(&self, type_name: &str, field: &str) -> Result<&FieldEntry, String> {
        self.tables.field(type_name, field).ok_or_else(|| format!("VMStructs has no {type_name}::{field}"))
    }

    fn offset(&self, type_name: &str, field: &str) -> Result<u64, String> {
        Ok(self.entry(type_name, field)?.value)
    }

    fn field(&self, type_name: &str, field: &str) -> Result<Field, String> {
        let entry = self.entry(type_name, field)?;
        Ok(Field { offset: entry.value, width: self.width(&entry.type_string) })
    }

    fn static_address(&self, type_name: &str, field: &str) -> Result<u64, String> {
        let entry = self.entry(type_name, field)?;
        if !entry.is_static {
            return Err(format!("VMStructs: {type_name}::{field} is not static"));
        }
        Ok(entry.value)
    }

    fn size(&self, type_name: &str) -> Result<u64, String> {
        self.tables.types.get(type_name).copied().ok_or_else(|| format!("VMTypes has no {type_name}"))
    }

    fn constant(&self, name: &str) -> Option<i64> {
        self.tables.constants.get(name).copied()
    }

    /// A field's width from its declared type.
    fn width(&self, type_string: &str) -> u8 {
        let t = type_string.trim();
        if t.ends_with('*') || t == "address" {
            return 8;
        }
        let size = self.tables.types.get(t).copied().unwrap_or(match t.strip_prefix("volatile ").unwrap_or(t) {
            "u1" | "bool" | "int8_t" | "uint8_t" | "char" | "signed char" | "unsigned char" => 1,
            "u2" | "int16_t" | "uint16_t" | "jushort" | "jshort" => 2,
            "int" | "jint" | "u4" | "uint32_t" | "int32_t" | "juint" => 4,
            _ => 8,
        });
        size.clamp(1, 8) as u8
    }
}

impl VmLayout {
    /// The layout of the running JVM, whose version its tables give.
    pub fn read(tables: &VmTables, memory: &dyn VmMemory) -> Result<Self, String> {
        let java_major = tables
            .field("Abstract_VM_Version", "_vm_major_version")
            .filter(|f| f.is_static)
            .and_then(|f| memory.u32(f.value))
            .ok_or("VMStructs has no Abstract_VM_Version::_vm_major_version")?;
        Self::from_tables(tables, java_major)
    }

    /// The layout JDK `java_major`'s tables describe, with the frame
    /// offsets of this architecture; an error where the walker does not
    /// know the architecture's frames.
    pub fn from_tables(tables: &VmTables, java_major: u32) -> Result<Self, String> {
        let arch = unwind::arch::HOTSPOT_FRAME.ok_or("the HotSpot walker knows x86-64 frame layouts only")?;
        let l = Lookup { tables };
        let blob_code = match l.field("CodeBlob", "_code_begin") {
            Ok(field) => CodeStart::Pointer(field),
            Err(_) => CodeStart::Offset(l.field("CodeBlob", "_code_offset")?),
        };
        let blob_kind = match l.field("CodeBlob", "_kind") {
            Ok(field) => BlobKind::Kind(field),
            Err(_) => BlobKind::Name,
        };
        let debug_info = match l.field("nmethod", "_immutable_data") {
            Ok(data) => DebugInfo::Immutable {
                data,
                pcs: l.field("nmethod", "_scopes_pcs_offset")?,
                scopes_data: l.field("nmethod", "_scopes_data_offset")?,
                mutable_data: l.field("CodeBlob", "_mutable_data")?,
                relocation_size: l.field("CodeBlob", "_relocation_size")?,
            },
            Err(_) => DebugInfo::InBlob {
                pcs: l.field("nmethod", "_scopes_pcs_offset")?,
                pcs_end: l.field("nmethod", "_dependencies_offset")?,
                scopes_data: l.field("CompiledMethod", "_scopes_data_begin")?,
                metadata: l.field("nmethod", "_metadata_offset")?,
            },
        };
        let handlers = match (
            l.field("CompiledMethod", "_deopt_handler_begin"),
            l.field("CompiledMethod", "_deopt_mh_handler_begin"),
        ) {
            (Ok(a), Ok(b)) => Some(DeoptHandlers::Pointers(a, b)),
            _ => match (l.field("nmethod", "_deopt_handler_offset"), l.field("nmethod", "_deopt_mh_handler_offset")) {
                (Ok(a), Ok(b)) => Some(DeoptHandlers::Offsets(a, b)),
                _ => None,
            },
        };
        let deopt = handlers
            .zip(l.field("nmethod", "_orig_pc_offset").ok())
            .map(|(handlers, orig_pc_offset)| Deopt { handlers, orig_pc_offset });
        let continuations = match (
            l.field("JavaThread", "_cont_entry"),
            l.static_address("ContinuationEntry", "_return_pc"),
            l.size("ContinuationEntry"),
            l.static_address("StubRoutines", "_cont_returnBarrier"),
        ) {
            (Ok(thread_entry), Ok(return_pc), Ok(entry_size), _) => {
                Some(Continuations::Exported { thread_entry, return_pc, entry_size: entry_size.next_multiple_of(16) })
            }
            (_, Ok(return_pc), _, Ok(return_barrier)) => {
                Some(Continuations::AtReturnBarrier { return_barrier, return_pc })
            }
            _ => None,
        };
        let nmethod_type = if tables.field("nmethod", "_method").is_some() { "nmethod" } else { "CompiledMethod" };
        let frames = FrameLayout {
            thread_anchor: l.offset("JavaThread", "_anchor")?,
            anchor_sp: l.field("JavaFrameAnchor", "_last_Java_sp")?,
            anchor_pc: l.field("JavaFrameAnchor", "_last_Java_pc")?,
            anchor_fp: l.field("JavaFrameAnchor", "_last_Java_fp")?,
            call_wrapper_anchor: l.offset("JavaCallWrapper", "_anchor")?,
            continuations,
            interpreter_method: arch.interpreter_method,
            interpreter_bcp: arch.interpreter_bcp,
            interpreter_sender_sp: l
                .constant("frame::interpreter_frame_sender_sp_offset")
                .unwrap_or(arch.interpreter_sender_sp),
            entry_call_wrapper: l.constant("frame::entry_frame_call_wrapper_offset").unwrap_or(arch.entry_call_wrapper),
        };
        let blobs = BlobLayout {
            heap_block_size: l.size("HeapBlock")?,
            heap_block_used: l.field("HeapBlock::Header", "_used")?,
            blob_name: l.field("CodeBlob", "_name")?,
            blob_size: l.field("CodeBlob", "_size")?,
            blob_frame_size: l.field("CodeBlob", "_frame_size")?,
            blob_frame_complete: l.field("CodeBlob", "_frame_complete_offset")?,
            blob_code,
            blob_kind,
            nmethod_method: l.field(nmethod_type, "_method")?,
            nmethod_comp_level: l.field("nmethod", "_comp_level")?,
            deopt,
            identity: l
                .field("nmethod", "_compile_id")
                .ok()
                .zip(l.field("nmethod", "_state").ok())
                .map(|(compile_id, state)| NmethodIdentity { compile_id, state }),
        };
        let debug = DebugLayout {
            encoding: Unsigned5::for_java_major(java_major),
            debug_info,
            pc_desc_size: Some(l.size("PcDesc")?).filter(|&size| size > 0).ok_or("VMTypes gives PcDesc size 0")?,
            pc_desc_pc_offset: l.field("PcDesc", "_pc_offset")?,
            pc_desc_scope_offset: l.field("PcDesc", "_scope_decode_offset")?,
        };
        let methods = MethodLayout {
            id_scheme: MethodIdScheme::for_java_major(java_major),
            method_const_method: l.field("Method", "_constMethod")?,
            method_access_flags: l.field("Method", "_access_flags")?,
            const_method_constants: l.field("ConstMethod", "_constants")?,
            const_method_idnum: l.field("ConstMethod", "_method_idnum")?,
            const_method_code_size: l.field("ConstMethod", "_code_size")?,
            const_method_size: l.size("ConstMethod")?,
            pool_holder: l.field("ConstantPool", "_pool_holder")?,
            klass_jmethod_ids: l.field("InstanceKlass", "_methods_jmethod_ids")?,
            klass_methods: l.field("InstanceKlass", "_methods")?,
            mh_intrinsics: mh_intrinsics(&l),
        };
        Ok(VmLayout { frames, blobs, debug, methods })
    }
}

fn mh_intrinsics(l: &Lookup) -> Option<MhIntrinsics> {
    let id = |name: &str| l.constant(&format!("vmIntrinsics::{name}")).and_then(|v| u64::try_from(v).ok());
    Some(MhIntrinsics {
        intrinsic_id: l.field("Method", "_intrinsic_id").ok()?,
        ids: [
            id("_invokeBasic")?,
            id("_linkToVirtual")?,
            id("_linkToStatic")?,
            id("_linkToSpecial")?,
            id("_linkToInterface")?,
            id("_linkToNative").unwrap_or(MhIntrinsics::ABSENT),
        ],
    })
}

/// Addresses read once at start: where the code heaps, the interpreter
/// and the call stub are.
#[derive(Clone, Debug, Default)]
pub struct CodeAddresses {
    pub heaps: Vec<CodeHeap>,
    /// `[start, end)` of all code heaps.
    pub low: u64,
    pub high: u64,
    pub interpreter: (u64, u64),
    pub call_stub_return: u64,
}

/// One code heap: its reserved memory and segment map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeHeap {
    pub low: u64,
    pub high: u64,
    pub segmap: u64,
    pub log2_segment: u32,
}

/// At most this many code heaps (HotSpot has 1 or 3).
const MAX_HEAPS: u64 = 8;

impl CodeAddresses {
    /// Reads the code cache's static description. Call after VM init.
    pub fn read(tables: &VmTables, memory: &dyn VmMemory) -> Result<Self, String> {
        let l = Lookup { tables };
        let unreadable = |what: &str| format!("cannot read {what}");
        let deref = |address: u64, what: &str| memory.u64(address).ok_or_else(|| unreadable(what));
        let low = deref(l.static_address("CodeCache", "_low_bound")?, "CodeCache::_low_bound")?;
        let high = deref(l.static_address("CodeCache", "_high_bound")?, "CodeCache::_high_bound")?;
        let heaps_array = deref(l.static_address("CodeCache", "_heaps")?, "CodeCache::_heaps")?;
        // The growable arrays' base is `GenericGrowableArray` on JDK 11.
        let len_field = l.field("GrowableArrayBase", "_len").or_else(|_| l.field("GenericGrowableArray", "_len"))?;
        let data_offset = l.offset("GrowableArray<int>", "_data")?;
        let count = len_field.read(memory, heaps_array).ok_or_else(|| unreadable("the code heap count"))?;
        let data = deref(heaps_array + data_offset, "the code heap array")?;
        let memory_offset = l.offset("CodeHeap", "_memory")?;
        let segmap_offset = l.offset("CodeHeap", "_segmap")?;
        let low_boundary = l.offset("VirtualSpace", "_low_boundary")?;
        let high_boundary = l.offset("VirtualSpace", "_high_boundary")?;
        let log2 = l.field("CodeHeap", "_log2_segment_size")?;
        let mut heaps = Vec::new();
        for i in 0..count.min(MAX_HEAPS) {
            let heap = deref(data + 8 * i, "a code heap")?;
            heaps.push(CodeHeap {
                low: deref(heap + memory_offset + low_boundary, "a code heap's bounds")?,
                high: deref(heap + memory_offset + high_boundary, "a code heap's bounds")?,
                segmap: deref(heap + segmap_offset + low_boundary, "a segment map")?,
                log2_segment: log2
                    .read(memory, heap)
                    .filter(|&log2| log2 < 64)
                    .ok_or_else(|| unreadable("a segment size below 2^64"))? as u32,
            });
        }
        if heaps.is_empty() {
            return Err("the code cache has no heaps yet".into());
        }
        let queue = deref(l.static_address("AbstractInterpreter", "_code")?, "AbstractInterpreter::_code")?;
        let buffer = deref(queue + l.offset("StubQueue", "_stub_buffer")?, "the interpreter's code")?;
        let limit = l
            .field("StubQueue", "_buffer_limit")?
            .read(memory, queue)
            .ok_or_else(|| unreadable("the interpreter's size"))?;
        let call_stub_return = deref(
            l.static_address("StubRoutines", "_call_stub_return_address")?,
            "StubRoutines::_call_stub_return_address",
        )?;
        Ok(CodeAddresses { heaps, low, high, interpreter: (buffer, buffer + limit), call_stub_return })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::FieldEntry;

    /// JDK 17's tables list the method-handle intrinsics' ids (not the
    /// signature-polymorphic range around them); `_linkToNative` is
    /// JDK 16+, the others are required.
    #[test]
    fn method_handle_intrinsics_are_told_apart_by_the_ids_the_tables_list() {
        let mut tables = VmTables::default();
        let entry = FieldEntry { type_string: "u2".into(), is_static: false, value: 48 };
        tables.fields.insert("Method::_intrinsic_id".into(), entry);
        let names = ["_invokeBasic", "_linkToVirtual", "_linkToStatic", "_linkToSpecial", "_linkToInterface"];
        for (i, name) in names.into_iter().enumerate() {
            tables.constants.insert(format!("vmIntrinsics::{name}"), 341 + i as i64);
        }
        let read = |tables: &VmTables| mh_intrinsics(&Lookup { tables });
        let before_16 = read(&tables).unwrap();
        assert_eq!(before_16.intrinsic_id, Field { offset: 48, width: 2 });
        assert_eq!(before_16.ids, [341, 342, 343, 344, 345, MhIntrinsics::ABSENT]);
        assert!(before_16.contains(343) && !before_16.contains(340) && !before_16.contains(MhIntrinsics::ABSENT));
        tables.constants.insert("vmIntrinsics::_linkToNative".into(), 346);
        assert!(read(&tables).unwrap().contains(346));
        tables.constants.remove("vmIntrinsics::_linkToVirtual");
        assert_eq!(read(&tables), None);
    }
}
