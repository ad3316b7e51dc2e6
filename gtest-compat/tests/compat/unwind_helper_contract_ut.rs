//! Port of upstream `unwindHelperContract_ut` (see gtest-compat/README.md).
//!
//! The contract: stepping out of a stub or out of a compiled frame caught
//! in its prologue or epilogue yields the caller's raw return address (no
//! "minus one", which only symbolization applies) and the right stack
//! pointer. Checked on `JavaSegmentWalker::walk_java` over the synthetic VM of
//! `hotspot::testing`: A (compiled) returns to C's interpreted
//! frame, as compiled Java returns only to code in the code cache; the
//! walk stops at C, so the frame it ends at (C's pc, sp and fp) tells
//! which slots the step out of A used.

use frames::JavaFrameKind;
use hotspot::testing::*;
use hotspot::{JavaFrame, SegmentEnd, VmFrame, WalkCache};

/// The stack for these cases: below C's frame, above the words of A's
/// frame the synthetic VM uses.
const S: u64 = SP + 0x40;
/// Where A returns to: into C's interpreted frame.
const INTO_C: u64 = INTERPRETER.0 + 0x100;

/// The synthetic VM and the fp of C's interpreted frame.
fn vm_and_c() -> (FakeMemory, u64) {
    let (mut m, methods) = vm();
    let (interpreted_fp, _) = add_stack(&mut m, &methods);
    (m, interpreted_fp)
}

/// Walks from `start` up to C's frame: the frames and the frame reached.
fn walk_to_c(m: &FakeMemory, start: VmFrame) -> (Vec<JavaFrame>, VmFrame) {
    let at_c = |frames: &[JavaFrame]| frames.last().is_some_and(|f| f.method == jmethod_id(2));
    let (frames, end, frame) = walk_until(m, start, &mut WalkCache::default(), at_c);
    assert_eq!(end, SegmentEnd::Full, "C reached: {frames:?}");
    (frames, frame)
}

#[test]
fn unwind_stub_at_entry_recovers_the_raw_sender_pc() {
    let (mut m, c_fp) = vm_and_c();
    // The stub has no frame: its return address (into A) is at the sp.
    m.put_u64(S, CODE + 0x40);
    // A's 4-word frame above it returns to C.
    m.put_u64(S + 8 + 24, INTO_C);
    m.put_u64(S + 8 + 16, c_fp);
    let (frames, frame) = walk_to_c(&m, VmFrame::interrupted(STUB_CODE, S, 0));
    assert_eq!(frames.len(), 2, "the stub is stepped over, A and C are reported: {frames:?}");
    assert_eq!(frames[0].method, jmethod_id(0));
    assert_eq!((frame.pc, frame.sp, frame.fp), (INTO_C, S + 8 + 32, c_fp));
}

#[test]
fn helper_never_applies_the_adjustment_itself() {
    let (mut m, _) = vm();
    m.put_u64(S, NATIVE_CALLER);
    let (_, end, frame) = walk(&m, VmFrame::interrupted(STUB_CODE, S, 0));
    assert_eq!(end, SegmentEnd::Native);
    assert_eq!(frame.pc, NATIVE_CALLER, "the raw return address, not minus one");
    assert!(!frame.interrupted, "a return address from here on");
}

/// A's frame is complete 0x10 bytes into its code.
fn with_prologue(m: &mut FakeMemory) {
    m.put_u32(BLOB + 0x18, 0x10);
}

#[test]
fn unwind_prologue_at_entry_recovers_the_raw_sender_pc() {
    let (mut m, c_fp) = vm_and_c();
    with_prologue(&mut m);
    m.put_u64(S, INTO_C);
    let (frames, frame) = walk_to_c(&m, VmFrame::interrupted(CODE, S, c_fp));
    let a = frames.iter().rfind(|f| f.method == jmethod_id(0)).map(|f| f.kind);
    assert_eq!(a, Some(JavaFrameKind::C2Compiled));
    assert_eq!((frame.pc, frame.sp, frame.fp), (INTO_C, S + 8, c_fp));
}

#[test]
fn unwind_prologue_after_frame_setup_recovers_the_raw_sender_pc() {
    let (mut m, c_fp) = vm_and_c();
    with_prologue(&mut m);
    // After `push rbp`: the caller's fp at the sp, the return address above.
    m.put_u64(S, c_fp);
    m.put_u64(S + 8, INTO_C);
    let (_, frame) = walk_to_c(&m, VmFrame::interrupted(CODE + 1, S, 0x5555));
    assert_eq!((frame.pc, frame.sp, frame.fp), (INTO_C, S + 16, c_fp));
}

#[test]
fn unwind_epilogue_at_return_recovers_the_raw_sender_pc() {
    let (mut m, c_fp) = vm_and_c();
    with_prologue(&mut m);
    // At `ret`: the frame is gone, the return address is at the sp and the
    // words where the frame was hold no return address.
    m.put_u64(S, INTO_C);
    m.put_u64(S + 24, 0);
    let (_, frame) = walk_to_c(&m, VmFrame::interrupted(CODE + 0x50, S, c_fp));
    assert_eq!((frame.pc, frame.sp), (INTO_C, S + 8), "the same as at entry");
}
