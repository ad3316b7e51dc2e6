//! Port of upstream `unwindHelperContract_ut` (see gtest-compat/README.md).
//!
//! The contract: stepping out of a stub or out of a compiled frame caught
//! in its prologue or epilogue yields the caller's raw return address (no
//! "minus one", which only symbolization applies) and the right stack
//! pointer. Checked on `HotSpotWalker::walk_java` over the synthetic VM of
//! `unwind::hotspot::testing`: the walk steps out of the frame under test,
//! then out of A's 4-word frame (or straight into native code) and stops at
//! `NATIVE_CALLER`, so the stack pointer it ends at tells which slots the
//! first step used.

use unwind::hotspot::testing::*;
use unwind::hotspot::{JavaFrameKind, SegmentEnd, VmFrame};

/// A stack for these cases, away from the synthetic VM's own.
const S: u64 = 0x7100_0000;

#[test]
fn unwind_stub_at_entry_recovers_the_raw_sender_pc() {
    let (mut m, _) = vm();
    // The stub has no frame: its return address (into A) is at the sp.
    m.put_u64(S, CODE + 0x40);
    // A's 4-word frame above it returns to native code.
    m.put_u64(S + 8 + 24, NATIVE_CALLER);
    m.put_u64(S + 8 + 16, 0);
    let (frames, end, frame) = walk(&m, VmFrame::interrupted(STUB_CODE, S, 0));
    assert_eq!(frames.len(), 1, "the stub is stepped over, A is reported: {frames:?}");
    assert_eq!(frames[0].method, jmethod_id(0));
    assert_eq!(end, SegmentEnd::Native);
    assert_eq!((frame.pc, frame.sp), (NATIVE_CALLER, S + 8 + 32));
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
    let (mut m, _) = vm();
    with_prologue(&mut m);
    m.put_u64(S, NATIVE_CALLER);
    let (frames, end, frame) = walk(&m, VmFrame::interrupted(CODE, S, 0x5555));
    assert_eq!(frames.last().map(|f| (f.method, f.kind)), Some((jmethod_id(0), JavaFrameKind::C2Compiled)));
    assert_eq!(end, SegmentEnd::Native);
    assert_eq!((frame.pc, frame.sp, frame.fp), (NATIVE_CALLER, S + 8, 0x5555));
}

#[test]
fn unwind_prologue_after_frame_setup_recovers_the_raw_sender_pc() {
    let (mut m, _) = vm();
    with_prologue(&mut m);
    // After `push rbp`: the caller's fp at the sp, the return address above.
    m.put_u64(S, 0x7100_0400);
    m.put_u64(S + 8, NATIVE_CALLER);
    let (_, end, frame) = walk(&m, VmFrame::interrupted(CODE + 1, S, 0x5555));
    assert_eq!(end, SegmentEnd::Native);
    assert_eq!((frame.pc, frame.sp, frame.fp), (NATIVE_CALLER, S + 16, 0x7100_0400));
}

#[test]
fn unwind_epilogue_at_return_recovers_the_raw_sender_pc() {
    let (mut m, _) = vm();
    with_prologue(&mut m);
    // At `ret`: the frame is gone, the return address is at the sp and the
    // words where the frame was hold no return address.
    m.put_u64(S, NATIVE_CALLER);
    m.put_u64(S + 24, 0);
    let (_, end, frame) = walk(&m, VmFrame::interrupted(CODE + 0x50, S, 0x5555));
    assert_eq!(end, SegmentEnd::Native);
    assert_eq!((frame.pc, frame.sp), (NATIVE_CALLER, S + 8), "the same as at entry");
}
