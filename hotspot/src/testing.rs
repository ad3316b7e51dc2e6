//! Test support: memory made of written words only, and a synthetic VM
//! laid out in it (a C2 nmethod with one inlined method, called from an
//! interpreted frame, called from an entry frame), for the walker's tests
//! here and in gtest-compat. Built for tests and with feature `testing`.

use crate::compressed::Unsigned5;
use crate::java_frame::JavaFrame;
use crate::layout::{
    BlobKind, BlobLayout, CodeAddresses, CodeHeap, CodeStart, Continuations, DebugInfo, DebugLayout, Deopt,
    DeoptHandlers, Field, FrameLayout, MethodIdScheme, MethodLayout, MhIntrinsics, NmethodIdentity, VmLayout,
};
use crate::memo::{WalkCache, WalkMemo};
use crate::memory::VmMemory;
use crate::methods::MethodReader;
use crate::walker::*;
use std::collections::BTreeMap;

/// Sparse memory for tests: unwritten words are unreadable.
#[derive(Default)]
pub struct FakeMemory {
    words: BTreeMap<u64, u64>,
}

impl FakeMemory {
    pub fn put_bytes(&mut self, address: u64, bytes: &[u8]) {
        for (i, &b) in bytes.iter().enumerate() {
            let a = address + i as u64;
            let word = self.words.entry(a & !7).or_insert(0);
            let shift = (a & 7) * 8;
            *word = (*word & !(0xff << shift)) | (u64::from(b) << shift);
        }
    }

    pub fn put_u64(&mut self, address: u64, value: u64) {
        self.put_bytes(address, &value.to_le_bytes());
    }

    pub fn put_u32(&mut self, address: u64, value: u32) {
        self.put_bytes(address, &value.to_le_bytes());
    }

    pub fn put_u16(&mut self, address: u64, value: u16) {
        self.put_bytes(address, &value.to_le_bytes());
    }
}

impl VmMemory for FakeMemory {
    fn load(&self, address: u64) -> Option<u64> {
        self.words.get(&address).copied()
    }
}

pub const HEAP: u64 = 0x10_0000;
pub const SEGMAP: u64 = 0x30_0000;
pub const INTERPRETER: (u64, u64) = (0x18_0000, 0x18_8000);
pub const CALL_STUB_RETURN: u64 = 0x19_0040;
pub const BLOB: u64 = HEAP + 16;
pub const CODE: u64 = BLOB + 0x80;
pub const SCOPES: u64 = 0x40_0000;
pub const DEOPT_HANDLER: u64 = CODE + 0x60;
pub const NATIVE_CALLER: u64 = 0x5000_0000;
pub const SP: u64 = 0x7000_0000;
/// Where the static `ContinuationEntry::_return_pc` is.
pub const CONT_RETURN_PC: u64 = 0x51_0000;
/// Where the static `StubRoutines::_cont_returnBarrier` is.
pub const CONT_RETURN_BARRIER: u64 = 0x51_0008;
/// The walked thread's `JavaThread*`.
pub const THREAD: u64 = 0x52_0000;

/// A field at `offset` of `width` bytes.
pub fn field(offset: u64, width: u8) -> Field {
    Field { offset, width }
}

/// A JDK-17-like layout with the synthetic VM's offsets.
pub fn layout() -> VmLayout {
    VmLayout {
        frames: FrameLayout {
            thread_anchor: 0x100,
            anchor_sp: field(0, 8),
            anchor_pc: field(8, 8),
            anchor_fp: field(16, 8),
            call_wrapper_anchor: 32,
            continuations: Some(Continuations::Exported {
                thread_entry: field(0x200, 8),
                return_pc: CONT_RETURN_PC,
                entry_size: 64,
            }),
            interpreter_method: -3,
            interpreter_bcp: -8,
            interpreter_sender_sp: -1,
            entry_call_wrapper: -6,
        },
        blobs: BlobLayout {
            heap_block_size: 16,
            heap_block_used: field(8, 1),
            blob_name: field(0x08, 8),
            blob_size: field(0x10, 4),
            blob_frame_size: field(0x14, 4),
            blob_frame_complete: field(0x18, 4),
            blob_code: CodeStart::Pointer(field(0x20, 8)),
            blob_kind: BlobKind::Name,
            nmethod_method: field(0x28, 8),
            nmethod_comp_level: field(0x30, 4),
            deopt: Some(Deopt {
                handlers: DeoptHandlers::Pointers(field(0x58, 8), field(0x60, 8)),
                orig_pc_offset: field(0x68, 4),
            }),
            identity: Some(NmethodIdentity { compile_id: field(0x70, 4), state: field(0x74, 1) }),
        },
        debug: DebugLayout {
            encoding: Unsigned5::Legacy,
            debug_info: DebugInfo::InBlob {
                pcs: field(0x40, 4),
                pcs_end: field(0x44, 4),
                scopes_data: field(0x48, 8),
                metadata: field(0x50, 4),
            },
            pc_desc_size: 16,
            pc_desc_pc_offset: field(0, 4),
            pc_desc_scope_offset: field(4, 4),
        },
        methods: MethodLayout {
            id_scheme: MethodIdScheme::Checkable,
            method_const_method: field(8, 8),
            method_access_flags: field(40, 4),
            const_method_constants: field(8, 8),
            const_method_idnum: field(38, 2),
            const_method_code_size: field(32, 2),
            const_method_size: 48,
            pool_holder: field(24, 8),
            klass_jmethod_ids: field(344, 8),
            klass_methods: field(408, 8),
            mh_intrinsics: Some(MhIntrinsics {
                intrinsic_id: field(48, 2),
                ids: [INVOKE_BASIC, INVOKE_BASIC + 1, LINK_TO_STATIC, LINK_TO_STATIC + 1, LINK_TO_STATIC + 2, 346],
            }),
        },
    }
}

/// The methods of the synthetic VM's layout.
pub fn method_reader() -> MethodReader {
    MethodReader::new(layout().methods)
}

/// The walker over the synthetic VM's code cache.
pub fn walker() -> JavaSegmentWalker {
    walker_with(layout())
}

/// [`walker`] with another layout.
pub fn walker_with(layout: VmLayout) -> JavaSegmentWalker {
    let code = CodeAddresses {
        heaps: vec![CodeHeap { low: HEAP, high: HEAP + 0x10_0000, segmap: SEGMAP, log2_segment: 7 }],
        low: HEAP,
        high: HEAP + 0x10_0000,
        interpreter: INTERPRETER,
        call_stub_return: CALL_STUB_RETURN,
    };
    JavaSegmentWalker::new(layout, code)
}

/// Methods A (compiled, at 0x60_0000), B (inlined into A) and C
/// (interpreted), all of one class whose jmethodID cache is filled.
pub struct Methods {
    pub a: u64,
    pub b: u64,
    pub c: u64,
}

pub const HOLDER: u64 = 0x61_0000;
pub const IDS: u64 = 0x62_0000;

/// The jmethodID of the method with this idnum.
pub fn jmethod_id(idnum: u64) -> u64 {
    0x63_0000 + idnum * 8
}

pub fn add_methods(m: &mut FakeMemory) -> Methods {
    let pool = 0x61_8000;
    m.put_u64(pool + 24, HOLDER);
    m.put_u64(HOLDER + 344, IDS);
    m.put_u64(IDS, 3);
    let mut methods = [0u64; 3];
    for (idnum, method) in methods.iter_mut().enumerate() {
        let idnum = idnum as u64;
        *method = 0x60_0000 + idnum * 0x100;
        let const_method = 0x60_8000 + idnum * 0x100;
        m.put_u64(*method + 8, const_method);
        m.put_u32(*method + 40, 0);
        m.put_u64(const_method + 8, pool);
        m.put_u16(const_method + 32, 20);
        m.put_u16(const_method + 38, idnum as u16);
        m.put_u64(IDS + 8 * (idnum + 1), jmethod_id(idnum));
        m.put_u64(jmethod_id(idnum), *method);
    }
    Methods { a: methods[0], b: methods[1], c: methods[2] }
}

/// `vmIntrinsics::_invokeBasic` and `_linkToStatic` (JDK 17's values).
pub const INVOKE_BASIC: u64 = 341;
pub const LINK_TO_STATIC: u64 = 343;
/// `MethodHandle`, with its own jmethodID cache.
pub const MH_HOLDER: u64 = 0x66_0000;
pub const MH_IDS: u64 = 0x67_0000;

/// The jmethodID of `MethodHandle`'s method with this idnum.
pub fn mh_jmethod_id(idnum: u64) -> u64 {
    0x68_0000 + idnum * 8
}

/// `MethodHandle`'s methods, as on JDK 17: it declares `native`
/// `invokeBasic` (idnum 0) and `linkToStatic` (idnum 1), both with
/// jmethodIDs, and HotSpot made intrinsics for call shapes: two of
/// `invokeBasic`, one of `linkToStatic`, all of idnum 0, with their own
/// constant pool, not listed among its methods.
pub struct MhMethods {
    pub invoke_basic: u64,
    pub link_to_static: u64,
    pub basic_shapes: [u64; 2],
    pub static_shape: u64,
    /// Its method array.
    pub array: u64,
}

pub fn add_mh_intrinsics(m: &mut FakeMemory) -> MhMethods {
    const ACC_NATIVE: u32 = 0x100;
    let pool = 0x66_8000;
    let intrinsic_pool = 0x66_9000;
    m.put_u64(pool + 24, MH_HOLDER);
    m.put_u64(intrinsic_pool + 24, MH_HOLDER);
    m.put_u64(MH_HOLDER + 344, MH_IDS);
    m.put_u64(MH_IDS, 2);
    let mut add = |method: u64, pool: u64, idnum: u16, iid: u64| {
        let const_method = method + 0x8000;
        m.put_u64(method + 8, const_method);
        m.put_u32(method + 40, ACC_NATIVE);
        m.put_u16(method + 48, iid as u16);
        m.put_u64(const_method + 8, pool);
        m.put_u16(const_method + 32, 0);
        m.put_u16(const_method + 38, idnum);
        method
    };
    let methods = MhMethods {
        invoke_basic: add(0x6a_0000, pool, 0, INVOKE_BASIC),
        link_to_static: add(0x6a_0100, pool, 1, LINK_TO_STATIC),
        basic_shapes: [
            add(0x6a_0200, intrinsic_pool, 0, INVOKE_BASIC),
            add(0x6a_0300, intrinsic_pool, 0, INVOKE_BASIC),
        ],
        static_shape: add(0x6a_0400, intrinsic_pool, 0, LINK_TO_STATIC),
        array: 0x69_0000,
    };
    for (idnum, method) in [(0, methods.invoke_basic), (1, methods.link_to_static)] {
        m.put_u64(MH_IDS + 8 * (idnum + 1), mh_jmethod_id(idnum));
        m.put_u64(mh_jmethod_id(idnum), method);
    }
    m.put_u64(MH_HOLDER + 408, methods.array);
    m.put_u32(methods.array, 2);
    m.put_u64(methods.array + 8, methods.link_to_static);
    m.put_u64(methods.array + 16, methods.invoke_basic);
    methods
}

/// The nmethod of A: frame of 4 words, two PcDescs (one with B inlined).
pub fn add_nmethod(m: &mut FakeMemory, methods: &Methods) {
    // Three 128-byte segments: the block's first, then hops back.
    m.put_bytes(SEGMAP, &[0, 1, 2, 0xFF, 0, 0, 0, 0]);
    m.put_u64(HEAP, 3);
    m.put_u64(HEAP + 8, 1);
    let name = 0x50_0000;
    m.put_bytes(name, b"nmethod\0");
    m.put_u64(BLOB + 0x08, name);
    m.put_u32(BLOB + 0x10, 0x170);
    m.put_u32(BLOB + 0x14, 4);
    m.put_u32(BLOB + 0x18, 0);
    m.put_u64(BLOB + 0x20, CODE);
    m.put_u64(BLOB + 0x28, methods.a);
    m.put_u32(BLOB + 0x30, 4);
    m.put_u32(BLOB + 0x40, 0x100);
    m.put_u32(BLOB + 0x44, 0x140);
    m.put_u64(BLOB + 0x48, SCOPES);
    m.put_u32(BLOB + 0x50, 0x140);
    m.put_u64(BLOB + 0x58, DEOPT_HANDLER);
    m.put_u64(BLOB + 0x60, DEOPT_HANDLER + 8);
    m.put_u32(BLOB + 0x68, 8);
    // Compile id 42, in use.
    m.put_u32(BLOB + 0x70, 42);
    m.put_u32(BLOB + 0x74, 0);
    // Metadata: index 1 is A, index 2 is B.
    m.put_u64(BLOB + 0x140, methods.a);
    m.put_u64(BLOB + 0x148, methods.b);
    // Scopes (sender, method index, bci + 1): A@5 at offset 1, B@3 inlined
    // into it at offset 4.
    m.put_bytes(SCOPES, &[0xFF, 0, 1, 6, 1, 2, 4, 0]);
    let descs: [(i32, i32); 4] = [(-1, 0), (0x20, 4), (0x40, 1), (i32::MAX, 0)];
    for (i, (pc_offset, scope)) in descs.iter().enumerate() {
        let at = BLOB + 0x100 + 16 * i as u64;
        m.put_u32(at, *pc_offset as u32);
        m.put_u32(at + 4, *scope as u32);
        m.put_u64(at + 8, 0);
    }
}

/// The stack: A's frame at SP, C's interpreted frame above it, then an
/// entry frame whose wrapper has no anchor (the thread's first Java call).
pub fn add_stack(m: &mut FakeMemory, methods: &Methods) -> (u64, u64) {
    let interpreted_fp = SP + 0x100;
    let entry_fp = SP + 0x200;
    // A's frame: 4 words, return address and saved fp on top.
    m.put_u64(SP, 0);
    m.put_u64(SP + 8, 0);
    m.put_u64(SP + 16, interpreted_fp);
    m.put_u64(SP + 24, INTERPRETER.0 + 0x100);
    // C, interpreted, at bci 7.
    let const_method_c = 0x60_8000 + 2 * 0x100;
    m.put_u64(interpreted_fp - 64, const_method_c + 48 + 7);
    m.put_u64(interpreted_fp - 24, methods.c);
    m.put_u64(interpreted_fp - 8, interpreted_fp + 16);
    m.put_u64(interpreted_fp, entry_fp);
    m.put_u64(interpreted_fp + 8, CALL_STUB_RETURN);
    // The entry frame and its JavaCallWrapper (no anchor).
    let wrapper = 0x64_0000;
    m.put_u64(entry_fp - 48, wrapper);
    m.put_u64(wrapper + 32, 0);
    m.put_u64(entry_fp, 0);
    m.put_u64(entry_fp + 8, NATIVE_CALLER);
    (interpreted_fp, entry_fp)
}

/// The walked thread's last-Java-frame anchor (at `JavaThread::_anchor`,
/// 0x100).
pub fn add_anchor(m: &mut FakeMemory, sp: u64, pc: u64, fp: u64) {
    let anchor = THREAD + 0x100;
    m.put_u64(anchor, sp);
    m.put_u64(anchor + 8, pc);
    m.put_u64(anchor + 16, fp);
}

/// C's interpreted frame at `fp`, at bci 2, with its saved sender sp,
/// caller fp and return address.
pub fn add_interpreted_c(m: &mut FakeMemory, methods: &Methods, fp: u64, sender_sp: u64, caller_fp: u64, pc: u64) {
    let const_method_c = 0x60_8000 + 2 * 0x100;
    m.put_u64(fp - 64, const_method_c + 48 + 2);
    m.put_u64(fp - 24, methods.c);
    m.put_u64(fp - 8, sender_sp);
    m.put_u64(fp, caller_fp);
    m.put_u64(fp + 8, pc);
}

/// Walks Java frames from `frame` (up to 64), with the code cache and
/// [`NATIVE_CALLER`] counted as code.
pub fn walk(m: &FakeMemory, frame: VmFrame) -> (Vec<JavaFrame>, SegmentEnd, VmFrame) {
    walk_with(m, frame, &mut WalkCache::default())
}

/// [`walk`] with a given cache (kept across walks).
pub fn walk_with(m: &FakeMemory, frame: VmFrame, cache: &mut WalkCache) -> (Vec<JavaFrame>, SegmentEnd, VmFrame) {
    walk_until(m, frame, cache, |frames| frames.len() >= 64)
}

/// Walks until `full` says the frames so far fill the sink (the walk then
/// ends `Full`, at the frame of the last one).
pub fn walk_until(
    m: &FakeMemory,
    frame: VmFrame,
    cache: &mut WalkCache,
    full: impl Fn(&[JavaFrame]) -> bool,
) -> (Vec<JavaFrame>, SegmentEnd, VmFrame) {
    walk_on(&walker(), m, frame, cache, full)
}

/// [`walk_until`] with a given walker.
pub fn walk_on(
    w: &JavaSegmentWalker,
    m: &FakeMemory,
    mut frame: VmFrame,
    cache: &mut WalkCache,
    full: impl Fn(&[JavaFrame]) -> bool,
) -> (Vec<JavaFrame>, SegmentEnd, VmFrame) {
    let code = |pc: u64| w.in_code_cache(pc) || pc == NATIVE_CALLER;
    let mut frames = Vec::new();
    let mut memo = WalkMemo::new(THREAD, cache);
    let end = w.walk_java(m, &code, &mut frame, &mut memo, &mut |f| {
        frames.push(f);
        !full(&frames)
    });
    (frames, end, frame)
}

/// A stub blob (not an nmethod, no frame of its own) after the nmethod.
pub const STUB: u64 = HEAP + 4 * 128 + 16;
pub const STUB_CODE: u64 = STUB + 0x40;

pub fn add_stub(m: &mut FakeMemory) {
    m.put_bytes(SEGMAP + 4, &[0, 1, 0xFF, 0xFF]);
    m.put_u64(STUB - 16, 2);
    m.put_u64(STUB - 8, 1);
    let name = 0x50_0100;
    m.put_bytes(name, b"StubRoutines\0");
    m.put_u64(STUB + 0x08, name);
    m.put_u32(STUB + 0x10, 0xF0);
    m.put_u32(STUB + 0x14, 0);
    m.put_u32(STUB + 0x18, u32::MAX);
    m.put_u64(STUB + 0x20, STUB_CODE);
}

/// The whole synthetic VM: methods, the nmethod of A, a stub and the stack.
pub fn vm() -> (FakeMemory, Methods) {
    let mut m = FakeMemory::default();
    let methods = add_methods(&mut m);
    add_nmethod(&mut m, &methods);
    add_stub(&mut m);
    add_stack(&mut m, &methods);
    (m, methods)
}

/// A xorshift64 generator started at `seed` (not zero): the same numbers
/// every run, for tests fed with random input.
pub fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}
