//! The walker on the synthetic VM of [`super::testing`].

use crate::java_frame::JavaFrame;
use crate::layout::{BlobLayout, MethodLayout, VmLayout};
use crate::memo::WalkCache;
use crate::memory::VmMemory;
use crate::methods::{MethodIds, MethodReader, NO_JMETHOD_ID};
use crate::tables::VmTables;
use crate::testing::*;
use crate::walker::*;
use frames::JavaFrameKind;

#[test]
fn compiled_inlined_interpreted_then_entry_frame() {
    let (m, _) = vm();
    // Interrupted just before pc offset 0x20: B inlined into A.
    let (frames, end, frame) = walk(&m, VmFrame::interrupted(CODE + 0x1f, SP, 0));
    assert_eq!(
        frames,
        [
            JavaFrame { method: jmethod_id(1), bci: 3, kind: JavaFrameKind::Inlined },
            JavaFrame { method: jmethod_id(0), bci: 5, kind: JavaFrameKind::C2Compiled },
            JavaFrame { method: jmethod_id(2), bci: 7, kind: JavaFrameKind::Interpreted },
        ]
    );
    assert_eq!(end, SegmentEnd::Entry(None));
    assert_eq!((frame.pc, frame.sp), (NATIVE_CALLER, SP + 0x210));
}

#[test]
fn return_addresses_match_their_pc_desc_exactly() {
    let (m, _) = vm();
    // A return address at 0x40: A alone.
    let (frames, _, _) = walk(&m, VmFrame::new(CODE + 0x40, SP, 0));
    assert_eq!(frames[0], JavaFrame { method: jmethod_id(0), bci: 5, kind: JavaFrameKind::C2Compiled });
    assert_eq!(frames[1].kind, JavaFrameKind::Interpreted);
}

#[test]
fn c1_frames_are_told_apart_by_compilation_level() {
    let (mut m, _) = vm();
    m.put_u32(BLOB + 0x30, 3);
    let (frames, _, _) = walk(&m, VmFrame::new(CODE + 0x40, SP, 0));
    assert_eq!(frames[0].kind, JavaFrameKind::C1Compiled);
}

#[test]
fn segment_map_finds_the_block_start_and_refuses_free_segments() {
    let (m, _) = vm();
    let w = walker();
    assert_eq!(w.code.find_blob(&m, BLOB + 0x150), Some(BLOB), "two hops back");
    assert_eq!(w.code.find_blob(&m, HEAP + 3 * 128 + 4), None, "free segment");
    assert_eq!(w.code.find_blob(&m, HEAP + 0x10_0000), None, "outside every heap");
}

/// A method whose class has no jmethodID for it (being prepared, or an
/// old version left running by a redefinition) is reported without a
/// method, as AsyncGetCallTrace reports it, and the walk goes on.
#[test]
fn a_method_without_jmethod_id_is_reported_without_one_and_the_walk_goes_on() {
    let (mut m, methods) = vm();
    let start = VmFrame::new(CODE + 0x40, SP, 0);
    let (named, named_end, _) = walk(&m, start);
    m.put_u64(IDS + 8 * 3, 0);
    let (frames, end, _) = walk(&m, start);
    assert_eq!(frames.iter().map(|f| f.method).collect::<Vec<_>>(), [jmethod_id(0), NO_JMETHOD_ID]);
    assert_eq!((frames[1].bci, frames[1].kind), (named[1].bci, named[1].kind));
    assert_eq!(end, named_end);
    // Without an id, an interpreted frame whose bcp is not in its method's
    // bytecodes is not trusted.
    let (interpreted_fp, _) = add_stack(&mut m, &methods);
    m.put_u64(interpreted_fp - 64, 0x10);
    let (frames, end, _) = walk(&m, start);
    assert_eq!(frames.len(), 1);
    assert_eq!(end, SegmentEnd::Failed(WalkFailure::UnknownMethod));
}

/// A jmethodID that leads to another method says the `Method*` was not
/// what the frame claimed: the walk ends with a reason.
#[test]
fn a_jmethod_id_of_another_method_ends_the_walk_with_a_reason() {
    let (mut m, methods) = vm();
    m.put_u64(IDS + 8 * 3, jmethod_id(0));
    assert_eq!(method_reader().jmethod_id(&m, methods.c), None);
    let (frames, end, _) = walk(&m, VmFrame::new(CODE + 0x40, SP, 0));
    assert_eq!(frames.len(), 1, "A is named; C is not");
    assert_eq!(end, SegmentEnd::Failed(WalkFailure::UnknownMethod));
}

/// A class redefined while its method runs: the jmethodID now points at
/// the new version (same holder and idnum); the old version's frame is
/// still named by it. An id leading to a method of another slot is not.
#[test]
fn a_frame_of_a_redefined_method_is_named_by_the_moved_jmethod_id() {
    let (mut m, methods) = vm();
    let new_version = 0x60_0800;
    let new_const_method = 0x60_8800;
    m.put_u64(new_version + 8, new_const_method);
    m.put_u64(new_const_method + 8, 0x61_8000);
    m.put_u16(new_const_method + 38, 2);
    m.put_u64(jmethod_id(2), new_version);
    let (before, before_end, _) = walk(&vm().0, VmFrame::new(CODE + 0x40, SP, 0));
    let (frames, end, _) = walk(&m, VmFrame::new(CODE + 0x40, SP, 0));
    assert_eq!(frames.iter().map(|f| f.method).collect::<Vec<_>>(), [jmethod_id(0), jmethod_id(2)]);
    assert_eq!((frames, end), (before, before_end), "walked as before the redefinition");
    m.put_u16(new_const_method + 38, 1);
    assert_eq!(method_reader().jmethod_id(&m, methods.c), None, "another method's slot");
}

/// HotSpot's method-handle intrinsics (`invokeBasic`, `linkTo*`, one per
/// call shape) all have idnum 0 and no jmethodID slot of their own: slot 0
/// is the one of the method `MethodHandle` lists first (`invokeBasic` on
/// JDK 17). Each intrinsic is named by the `native` method its class
/// declares with its intrinsic id, never by slot 0's id as such (which
/// named every intrinsic `invokeBasic`).
#[test]
fn a_method_handle_intrinsic_is_named_by_the_method_its_class_declares() {
    let mut m = vm().0;
    let mh = add_mh_intrinsics(&mut m);
    let r = method_reader();
    let names = |m: &FakeMemory| [mh.basic_shapes[0], mh.static_shape].map(|i| r.jmethod_id(m, i));
    assert_eq!(names(&m), [Some(mh_jmethod_id(0)), Some(mh_jmethod_id(1))]);
    // The declared methods are named by their own ids.
    assert_eq!([mh.invoke_basic, mh.link_to_static].map(|d| r.jmethod_id(&m, d)), names(&m));
    // A layout that cannot tell intrinsics apart reads slot 0, as before.
    let blind = MethodReader::new(MethodLayout { mh_intrinsics: None, ..layout().methods });
    assert_eq!(blind.jmethod_id(&m, mh.static_shape), Some(mh_jmethod_id(0)), "linkToStatic named invokeBasic");
    // Without an id for the declared method, the intrinsic has none.
    m.put_u64(MH_IDS + 8 * 2, 0);
    assert_eq!(r.jmethod_id(&m, mh.static_shape), Some(NO_JMETHOD_ID));
}

/// When an intrinsic's compiled wrapper is reported (CompiledMethodLoad)
/// before `MethodHandle`'s methods have ids, HotSpot makes slot 0's id for
/// that intrinsic: it then points at one call shape of `linkToStatic`, say,
/// for good, and names every frame read through slot 0 so (on JDK 17
/// under JRuby, 9.4% of the CPU samples). An `invokeBasic` intrinsic has
/// then no id that names it: it is written without one. One of the same
/// kind names it.
#[test]
fn an_intrinsic_is_not_named_by_an_id_made_for_an_intrinsic_of_another_kind() {
    let mut m = vm().0;
    let mh = add_mh_intrinsics(&mut m);
    let r = method_reader();
    m.put_u64(mh_jmethod_id(0), mh.static_shape);
    assert_eq!(r.jmethod_id(&m, mh.basic_shapes[0]), Some(NO_JMETHOD_ID));
    assert_eq!(r.jmethod_id(&m, mh.static_shape), Some(mh_jmethod_id(1)));
    let mut ids = MethodIds::default();
    for _ in 0..2 {
        assert_eq!(r.remembered_jmethod_id(&m, &mut ids, mh.basic_shapes[0]), Some(NO_JMETHOD_ID));
    }
    m.put_u64(mh_jmethod_id(0), mh.basic_shapes[1]);
    assert_eq!(r.jmethod_id(&m, mh.basic_shapes[0]), Some(mh_jmethod_id(0)), "an invokeBasic shape");
    assert_eq!(r.remembered_jmethod_id(&m, &mut ids, mh.basic_shapes[0]), Some(mh_jmethod_id(0)), "read again");
}

/// An intrinsic's id is remembered across samples like any other: while it
/// points where it did, the class's methods are not read again.
#[test]
fn a_method_handle_intrinsics_id_is_remembered_while_it_points_where_it_did() {
    let mut m = vm().0;
    let mh = add_mh_intrinsics(&mut m);
    let r = method_reader();
    let mut ids = MethodIds::default();
    assert_eq!(r.remembered_jmethod_id(&m, &mut ids, mh.static_shape), Some(mh_jmethod_id(1)));
    m.put_u32(mh.array, 0);
    assert_eq!(r.jmethod_id(&m, mh.static_shape), Some(mh_jmethod_id(0)), "not found among the methods: slot 0");
    assert_eq!(r.remembered_jmethod_id(&m, &mut ids, mh.static_shape), Some(mh_jmethod_id(1)), "remembered");
    // The declared method's id is replaced: read again.
    m.put_u32(mh.array, 2);
    let replacement = 0x63_1000;
    m.put_u64(mh_jmethod_id(1), 0);
    m.put_u64(replacement, mh.link_to_static);
    m.put_u64(MH_IDS + 8 * 2, replacement);
    assert_eq!(r.remembered_jmethod_id(&m, &mut ids, mh.static_shape), Some(replacement));
}

/// A sample in an intrinsic's compiled wrapper (a frameless `native`
/// nmethod that jumps to its target) under an interpreted caller: the
/// wrapper's frame is named by the declared method, then the caller.
#[test]
fn a_sample_in_a_method_handle_intrinsic_names_the_declared_method_then_its_caller() {
    let (mut m, methods) = vm();
    let mh = add_mh_intrinsics(&mut m);
    // A's nmethod becomes the intrinsic's wrapper: no frame.
    m.put_u64(BLOB + 0x28, mh.static_shape);
    m.put_u32(BLOB + 0x14, 0);
    m.put_bytes(CODE, &[0x90; 0x40]);
    let (interpreted_fp, _) = add_stack(&mut m, &methods);
    m.put_u64(SP, INTERPRETER.0 + 0x100);
    let (frames, end, _) = walk(&m, VmFrame::interrupted(CODE + 0x10, SP, interpreted_fp));
    assert_eq!(
        frames,
        [
            JavaFrame { method: mh_jmethod_id(1), bci: frames::BCI_NATIVE_METHOD, kind: JavaFrameKind::Native },
            JavaFrame { method: jmethod_id(2), bci: 7, kind: JavaFrameKind::Interpreted },
        ]
    );
    assert_eq!(end, SegmentEnd::Entry(None));
}

#[test]
fn unreadable_memory_ends_the_walk_without_a_fault() {
    let (mut m, _) = vm();
    // A's frame points at an interpreted fp whose words are missing.
    m.put_u64(SP + 16, 0x7100_0000);
    let (frames, end, _) = walk(&m, VmFrame::new(CODE + 0x40, SP, 0));
    assert_eq!(frames.len(), 1);
    assert_eq!(end, SegmentEnd::Failed(WalkFailure::BadInterpretedFrame));
}

#[test]
fn layout_names_the_first_missing_entry() {
    let error = VmLayout::from_tables(&VmTables::default(), 17).unwrap_err();
    assert!(error.contains("::"), "{error}");
    assert!(error.starts_with("VMStructs has no"), "{error}");
}

/// An interpreted frame called from compiled code through a c2i adapter,
/// which extended the caller's stack for the arguments: the compiled
/// caller's frame is counted from the sender sp the interpreter saved, not
/// from just above the interpreted frame.
#[test]
fn compiled_caller_of_an_interpreted_frame_starts_at_its_saved_sender_sp() {
    let (mut m, methods) = vm();
    let fp = SP + 0x40;
    let caller_sp = fp + 16 + 32;
    let entry_fp = SP + 0x200;
    add_interpreted_c(&mut m, &methods, fp, caller_sp, 0x1234, CODE + 0x40);
    // A's 4-word frame from the saved sender sp: saved fp and return
    // address (into the call stub) in its top two words.
    m.put_u64(caller_sp + 16, entry_fp);
    m.put_u64(caller_sp + 24, CALL_STUB_RETURN);
    let (frames, end, _) = walk(&m, VmFrame::interrupted(INTERPRETER.0 + 0x10, SP, fp));
    assert_eq!(
        frames,
        [
            JavaFrame { method: jmethod_id(2), bci: 2, kind: JavaFrameKind::Interpreted },
            JavaFrame { method: jmethod_id(0), bci: 5, kind: JavaFrameKind::C2Compiled },
        ]
    );
    assert_eq!(end, SegmentEnd::Entry(None));
}

/// A frame being deoptimized returns to its nmethod's deoptimization
/// handler; it is decoded at the original pc saved in the frame.
#[test]
fn a_frame_being_deoptimized_decodes_at_its_original_pc() {
    let (mut m, _) = vm();
    // The original pc (offset 0x20: B inlined into A) in A's frame.
    m.put_u64(SP + 8, CODE + 0x20);
    let (frames, _, _) = walk(&m, VmFrame::new(DEOPT_HANDLER, SP, 0));
    assert_eq!(frames[0], JavaFrame { method: jmethod_id(1), bci: 3, kind: JavaFrameKind::Inlined });
    assert_eq!(frames[1], JavaFrame { method: jmethod_id(0), bci: 5, kind: JavaFrameKind::C2Compiled });
}

/// A jmethodID remembered from an earlier sample is used only while it
/// still points at its method: when HotSpot replaces it, the chain is read
/// again.
#[test]
fn remembered_jmethod_ids_are_checked_before_reuse() {
    let (mut m, methods) = vm();
    let mut cache = WalkCache::default();
    let start = VmFrame::new(CODE + 0x40, SP, 0);
    let (frames, _, _) = walk_with(&m, start, &mut cache);
    assert_eq!(frames[1].method, jmethod_id(2));
    // C's id is retired and a new one created.
    let replacement = 0x63_1000;
    m.put_u64(jmethod_id(2), 0);
    m.put_u64(replacement, methods.c);
    m.put_u64(IDS + 8 * 3, replacement);
    let (frames, _, _) = walk_with(&m, start, &mut cache);
    assert_eq!(frames[1].method, replacement);
}

/// A return site decoded in one sample is used in the next without its
/// debug information, while its nmethod is the same compilation and in
/// use; a new compilation at that address, or the same one made not
/// entrant, is decoded again. An interrupted pc is always decoded.
#[test]
fn return_sites_are_remembered_across_samples_while_their_nmethod_is_in_use() {
    let (mut m, _) = vm();
    let mut cache = WalkCache::default();
    let start = VmFrame::new(CODE + 0x20, SP, 0);
    let b_at = |frames: &[JavaFrame]| (frames[0].method, frames[0].bci);
    let (frames, end, _) = walk_with(&m, start, &mut cache);
    assert_eq!(b_at(&frames), (jmethod_id(1), 3));
    // B's bci in the scope data changes under the remembered site.
    m.put_bytes(SCOPES + 6, &[9]);
    let (again, again_end, _) = walk_with(&m, start, &mut cache);
    assert_eq!((again, again_end), (frames.clone(), end), "remembered: the scope data was not read");
    assert_eq!(b_at(&walk_with(&m, VmFrame::interrupted(CODE + 0x1f, SP, 0), &mut cache).0), (jmethod_id(1), 8));
    // Made not entrant: decoded again.
    m.put_bytes(BLOB + 0x74, &[1]);
    assert_eq!(b_at(&walk_with(&m, start, &mut cache).0), (jmethod_id(1), 8));
    // A new compilation in use at that address (B at 8): decoded and remembered.
    m.put_bytes(BLOB + 0x74, &[0]);
    m.put_u32(BLOB + 0x70, 43);
    assert_eq!(b_at(&walk_with(&m, start, &mut cache).0), (jmethod_id(1), 8));
    m.put_bytes(SCOPES + 6, &[4]);
    assert_eq!(b_at(&walk_with(&m, start, &mut cache).0), (jmethod_id(1), 8), "remembered");
    // Another compilation: decoded (B at 3).
    m.put_u32(BLOB + 0x70, 44);
    assert_eq!(b_at(&walk_with(&m, start, &mut cache).0), (jmethod_id(1), 3), "a new compile id");
}

/// A decode cut short (an inlined method's id unreadable for a moment:
/// the method alone is reported) serves no later sample.
#[test]
fn a_return_site_decoded_in_part_is_not_remembered() {
    let (mut m, methods) = vm();
    let mut cache = WalkCache::default();
    let start = VmFrame::new(CODE + 0x20, SP, 0);
    let const_method_b = m.u64(methods.b + 8).unwrap();
    m.put_u64(methods.b + 8, 0);
    let (frames, _, _) = walk_with(&m, start, &mut cache);
    assert_eq!(frames[0], JavaFrame { method: jmethod_id(0), bci: 0, kind: JavaFrameKind::C2Compiled }, "A alone");
    m.put_u64(methods.b + 8, const_method_b);
    let (frames, _, _) = walk_with(&m, start, &mut cache);
    assert_eq!((frames[0].method, frames[1].method), (jmethod_id(1), jmethod_id(0)), "decoded in full");
}

/// Where the layout does not say where the deoptimization handlers are, a
/// return address could be one: it serves no later sample.
#[test]
fn without_the_deoptimization_handlers_no_return_site_is_remembered() {
    let (mut m, _) = vm();
    let w = walker_with(VmLayout { blobs: BlobLayout { deopt: None, ..layout().blobs }, ..layout() });
    let mut cache = WalkCache::default();
    let start = VmFrame::new(CODE + 0x20, SP, 0);
    let walk = |m: &FakeMemory, cache: &mut WalkCache| walk_on(&w, m, start, cache, |f| f.len() >= 64).0[0].bci;
    assert_eq!(walk(&m, &mut cache), 3);
    m.put_bytes(SCOPES + 6, &[9]);
    assert_eq!(walk(&m, &mut cache), 8);
}

/// Stub frames emit nothing, so a walk stepping from stub to stub is
/// stopped after a run longer than real stacks have.
#[test]
fn a_long_run_of_stub_frames_ends_the_walk() {
    let (mut m, _) = vm();
    m.put_u32(STUB + 0x14, 2);
    let chain = |m: &mut FakeMemory, stubs: u64| {
        for k in 0..stubs {
            m.put_u64(SP + 16 * k, 0);
            m.put_u64(SP + 16 * k + 8, STUB_CODE + 0x10);
        }
        m.put_u64(SP + 16 * stubs - 8, NATIVE_CALLER);
    };
    chain(&mut m, 8);
    assert_eq!(walk(&m, VmFrame::new(STUB_CODE + 0x10, SP, 0)).1, SegmentEnd::Native, "8 stubs, then native code");
    chain(&mut m, 40);
    assert_eq!(walk(&m, VmFrame::new(STUB_CODE + 0x10, SP, 0)).1, SegmentEnd::Failed(WalkFailure::NoProgress));
}

/// Interrupted in A's epilogue (`add rsp; pop rbp; cmp rsp, [r15+d];
/// ja; ret`): the instructions say how much of the frame is left, whatever
/// the slot the frame size points at holds (here a code address).
#[test]
fn an_epilogue_is_unwound_from_its_instructions() {
    let (mut m, vm_methods) = vm();
    m.put_bytes(CODE + 0x30, &[0xCC; 0x50]);
    m.put_bytes(CODE + 0x60, &[0x5D, 0x49, 0x3B, 0x67, 0x28, 0x0F, 0x87, 0, 0, 0, 0, 0xC3]);
    let expected = walk(&m, VmFrame::interrupted(CODE + 0x1f, SP, 0));
    let methods = |frames: &[JavaFrame]| frames.iter().map(|f| f.method).collect::<Vec<_>>();
    // At `pop rbp`: rsp is at the saved rbp.
    m.put_u64(SP + 40, CODE + 0x40);
    let (frames, end, frame) = walk(&m, VmFrame::interrupted(CODE + 0x60, SP + 16, 0));
    assert_eq!(methods(&frames[1..]), methods(&expected.0[2..]), "A, then C");
    assert_eq!((end, frame.pc), (expected.1, expected.2.pc));
    // At the poll, its ja and the ret: rsp is at the return address.
    let (interpreted_fp, _) = add_stack(&mut m, &vm_methods);
    for pc in [CODE + 0x61, CODE + 0x65, CODE + 0x6B] {
        m.put_u64(SP + 48, CODE + 0x40);
        let (frames, end, _) = walk(&m, VmFrame::interrupted(pc, SP + 24, interpreted_fp));
        assert_eq!(methods(&frames[1..]), methods(&expected.0[2..]), "at {:#x}", pc - CODE);
        assert_eq!(end, expected.1);
    }
}

/// Interrupted in A's prologue (`sub rsp, 0x18; mov [rsp+0x10], rbp`)
/// at the `mov`: the frame is allocated, rbp still the caller's fp.
#[test]
fn a_prologue_is_unwound_from_its_instructions() {
    let (mut m, vm_methods) = vm();
    let expected = walk(&m, VmFrame::interrupted(CODE + 0x1f, SP, 0));
    m.put_u32(BLOB + 0x18, 0x20);
    m.put_bytes(CODE - 0x10, &[0xCC; 0x30]);
    m.put_bytes(CODE + 0x08, &[0x48, 0x81, 0xEC, 0x18, 0, 0, 0, 0x48, 0x89, 0x6C, 0x24, 0x10]);
    let (interpreted_fp, _) = add_stack(&mut m, &vm_methods);
    m.put_u64(SP + 16, 0x7777); // rbp is not stored yet
    let (frames, end, _) = walk(&m, VmFrame::interrupted(CODE + 0x0F, SP, interpreted_fp));
    assert_eq!((frames, end), (expected.0, expected.1), "B inlined in A, then C");
}

/// A mounted virtual thread's bottom frame returns to the continuation
/// return barrier (a frameless stub); its caller is the frame of
/// `enterSpecial` holding the thread's continuation entry, whose address
/// is that frame's sp.
#[test]
fn a_virtual_thread_continues_at_its_continuation_entry() {
    let (mut m, methods) = vm();
    let fp = SP + 0x40;
    add_interpreted_c(&mut m, &methods, fp, fp + 16, 0, STUB_CODE + 0x10);
    let without = walk(&m, VmFrame::interrupted(INTERPRETER.0 + 0x10, SP, fp));
    assert_eq!(without.1, SegmentEnd::Failed(WalkFailure::BadCompiledFrame), "no continuation entry");

    // The entry at E; enterSpecial (here A's nmethod) returns from E to
    // the carrier's frames: C interpreted, then the entry frame.
    let entry = SP + 0xC0;
    let (carrier_fp, _) = add_stack(&mut m, &methods);
    m.put_u64(THREAD + 0x200, entry);
    m.put_u64(CONT_RETURN_PC, CODE + 0x40);
    m.put_u64(entry + 24, INTERPRETER.0 + 0x100);
    m.put_u64(entry + 16, carrier_fp);
    let (frames, end, frame) = walk(&m, VmFrame::interrupted(INTERPRETER.0 + 0x10, SP, fp));
    let methods = frames.iter().map(|f| f.method).collect::<Vec<_>>();
    assert_eq!(methods, [jmethod_id(2), jmethod_id(0), jmethod_id(2)]);
    assert_eq!((end, frame.pc), (SegmentEnd::Entry(None), NATIVE_CALLER));

    // An entry below the frame being left is not this frame's caller.
    m.put_u64(THREAD + 0x200, SP - 0x100);
    assert_eq!(walk(&m, VmFrame::interrupted(INTERPRETER.0 + 0x10, SP, fp)).1, without.1);
}

/// JDK 21 to 25.0.2 list no continuation entry in VMStructs: the entry is
/// found from the frame returning to the return barrier (whose address
/// libjvm's symbol table gives), at that frame's unextended sp, or above
/// it past the bottom frame's stack arguments; `enterSpecial`'s frame size
/// comes from its nmethod.
#[test]
fn without_exported_entries_a_virtual_thread_continues_above_its_return_barrier_frame() {
    let mut layout = crate::testing::layout();
    layout.frames.continuations = Some(crate::layout::Continuations::AtReturnBarrier {
        return_barrier: CONT_RETURN_BARRIER,
        return_pc: CONT_RETURN_PC,
    });
    let w = walker_with(layout);
    let walk = |m: &FakeMemory, frame| walk_on(&w, m, frame, &mut WalkCache::default(), |f| f.len() >= 64);

    // C, interpreted, the virtual thread's bottom frame: it returns to the
    // barrier, its locals reach up to the entry at E (its sender sp).
    let (mut m, methods) = vm();
    let fp = SP + 0x40;
    let entry = SP + 0xC0;
    add_interpreted_c(&mut m, &methods, fp, entry, 0, STUB_CODE + 0x10);
    let start = VmFrame::interrupted(INTERPRETER.0 + 0x10, SP, fp);
    assert_eq!(walk(&m, start).1, SegmentEnd::Failed(WalkFailure::BadCompiledFrame), "no barrier address yet");

    // The entry frame of enterSpecial (here A's nmethod, 4 words: the
    // saved fp and return address at E + 16 and E + 24) returns to the
    // carrier's frames: C interpreted, then the entry frame.
    let (carrier_fp, _) = add_stack(&mut m, &methods);
    m.put_u64(CONT_RETURN_BARRIER, STUB_CODE + 0x10);
    m.put_u64(CONT_RETURN_PC, CODE + 0x40);
    m.put_u64(entry, 0x7777);
    m.put_u64(entry + 8, 0x7777);
    m.put_u64(entry + 16, carrier_fp);
    m.put_u64(entry + 24, INTERPRETER.0 + 0x100);
    let (frames, end, frame) = walk(&m, start);
    let ids = frames.iter().map(|f| f.method).collect::<Vec<_>>();
    assert_eq!(ids, [jmethod_id(2), jmethod_id(0), jmethod_id(2)]);
    assert_eq!((end, frame.pc), (SegmentEnd::Entry(None), NATIVE_CALLER));

    // Three words of stack arguments below the entry: the bottom frame's
    // caller sp is E - 24, aligned down to E - 32; E - 16 is not an entry
    // (what it would hold as a return address is not code).
    m.put_u64(fp - 8, entry - 32);
    assert_eq!(walk(&m, start).0.len(), 3, "past stack arguments");

    // A frameless stub other than the barrier is no way into the carrier.
    m.put_u64(fp - 8, entry);
    m.put_u64(CONT_RETURN_BARRIER, STUB_CODE + 0x20);
    assert_eq!(walk(&m, start).1, SegmentEnd::Failed(WalkFailure::BadCompiledFrame), "not the barrier");

    // enterSpecial not generated yet: no entry frame to decode.
    m.put_u64(CONT_RETURN_BARRIER, STUB_CODE + 0x10);
    m.put_u64(CONT_RETURN_PC, 0);
    assert_eq!(walk(&m, start).1, SegmentEnd::Failed(WalkFailure::BadCompiledFrame), "no enterSpecial");
}

/// A compiled bottom frame without stack arguments returns to the barrier
/// from right below the entry: the entry frame's sp is that frame's caller
/// sp (the barrier has no frame), and the walk goes on into the carrier,
/// however the entry is found.
#[test]
fn a_compiled_bottom_frame_continues_at_the_entry_right_above_it() {
    let exported = crate::testing::layout().frames.continuations;
    let at_barrier = Some(crate::layout::Continuations::AtReturnBarrier {
        return_barrier: CONT_RETURN_BARRIER,
        return_pc: CONT_RETURN_PC,
    });
    for continuations in [exported, at_barrier] {
        let mut layout = crate::testing::layout();
        layout.frames.continuations = continuations;
        let w = walker_with(layout);
        let (mut m, methods) = vm();
        let (carrier_fp, _) = add_stack(&mut m, &methods);
        let entry = SP + 0xC0;
        // A's frame (4 words) right below the entry, returning to the barrier.
        m.put_u64(entry - 16, 0);
        m.put_u64(entry - 8, STUB_CODE + 0x10);
        m.put_u64(THREAD + 0x200, entry);
        m.put_u64(CONT_RETURN_BARRIER, STUB_CODE + 0x10);
        m.put_u64(CONT_RETURN_PC, CODE + 0x40);
        m.put_u64(entry + 16, carrier_fp);
        m.put_u64(entry + 24, INTERPRETER.0 + 0x100);
        let start = VmFrame::new(CODE + 0x40, entry - 32, 0);
        let (frames, end, frame) = walk_on(&w, &m, start, &mut WalkCache::default(), |f| f.len() >= 64);
        let ids = frames.iter().map(|f| f.method).collect::<Vec<_>>();
        assert_eq!(ids, [jmethod_id(0), jmethod_id(0), jmethod_id(2)], "{continuations:?}");
        assert_eq!((end, frame.pc), (SegmentEnd::Entry(None), NATIVE_CALLER), "{continuations:?}");
    }
}

/// Interrupted in code that pushed a word of its own (C2's
/// `string_compare` keeps the length difference on the stack for its whole
/// loop): A's frame is one word above the sp, its return address not where
/// the frame size read from the sp says. The instructions from the pc on
/// (to the `pop` and on to a PcDesc) say how far; the walk goes on as
/// from A's own sp.
#[test]
fn a_frame_whose_code_pushed_a_word_is_walked_from_above_the_push() {
    let (mut m, _) = vm();
    let expected = walk(&m, VmFrame::interrupted(CODE + 0x1f, SP, 0));
    // 10: push rcx; 11: cmovle edx, eax; 14: test edx, edx; 16: pop rcx;
    // then nops to the PcDesc at 0x20.
    m.put_bytes(CODE + 0x10, &[0x51, 0x0f, 0x4e, 0xd0, 0x85, 0xd2, 0x59]);
    m.put_bytes(CODE + 0x17, &[0x90; 9]);
    m.put_u64(SP - 8, 0x2a);
    let (frames, end, frame) = walk(&m, VmFrame::interrupted(CODE + 0x11, SP - 8, 0));
    assert_eq!((frames, end, frame.pc), (expected.0.clone(), expected.1, expected.2.pc), "B inlined in A, then C");

    // Found that way, a return address into an nmethod must be one of its
    // call sites (a PcDesc): here A's own code at 0x11 is not.
    m.put_u64(SP + 24, CODE + 0x11);
    let (frames, end, _) = walk(&m, VmFrame::interrupted(CODE + 0x11, SP - 8, 0));
    assert_eq!((frames.len(), end), (2, SegmentEnd::Failed(WalkFailure::BadCompiledFrame)), "not a return site");
    m.put_u64(SP + 24, CODE + 0x40);
    let (frames, _, frame) = walk(&m, VmFrame::interrupted(CODE + 0x11, SP - 8, 0));
    assert_eq!((frames.len(), frame.sp), (3, SP + 32), "A called from A's call site at 0x40");
    m.put_u64(SP + 24, INTERPRETER.0 + 0x100);

    // What the instructions cannot explain (here rsp written from rbp
    // before the pop) still ends the walk.
    m.put_bytes(CODE + 0x14, &[0x48, 0x89, 0xec]);
    let (frames, end, _) = walk(&m, VmFrame::interrupted(CODE + 0x11, SP - 8, 0));
    assert_eq!(frames.len(), 2, "B and A");
    assert_eq!(end, SegmentEnd::Failed(WalkFailure::BadCompiledFrame));
}

/// A frameless stub called while A's code had a word pushed (a float
/// conversion's fix-up: `sub rsp, 8; movss [rsp], xmm0; call; pop`)
/// returns into A above the push: from that return address the same
/// reading finds A's frame, in this sample and in the next, which finds
/// the return site remembered.
#[test]
fn a_return_address_inside_pushed_words_is_walked_from_above_them() {
    let (mut m, _) = vm();
    let expected = walk(&m, VmFrame::new(CODE + 0x40, SP, 0));
    // 30: pop rax; then nops to the PcDesc at 0x40.
    m.put_bytes(CODE + 0x30, &[0x58]);
    m.put_bytes(CODE + 0x31, &[0x90; 15]);
    m.put_u64(SP - 8, 0x2a);
    m.put_u64(SP - 16, CODE + 0x30);
    let mut cache = WalkCache::default();
    for sample in ["first", "second"] {
        let (frames, end, frame) = walk_with(&m, VmFrame::interrupted(STUB_CODE + 0x10, SP - 16, 0), &mut cache);
        let ids = |frames: &[JavaFrame]| frames.iter().map(|f| f.method).collect::<Vec<_>>();
        assert_eq!(ids(&frames), ids(&expected.0), "{sample}: A, then C");
        assert_eq!((end, frame.pc), (expected.1, expected.2.pc), "{sample}");
    }
}
