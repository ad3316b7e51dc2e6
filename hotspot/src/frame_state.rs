//! How far an interrupted compiled frame is set up, read from the x86-64
//! instructions at its pc. The frame size applies only once the prologue
//! has built the frame and until the epilogue tears it down; in between
//! those the return address is found from what the instructions did.
//!
//! C2 and C1 prologues: an optional stack bang (`mov [rsp-N], eax`), then
//! `push rbp; sub rsp, N` (or, without a bang, `sub rsp, N;
//! mov [rsp+N-8], rbp`), then the nmethod entry barrier
//! (`cmp dword [r15+d], imm; jne`), all before `frame_complete` (checked
//! against the code of JDK 17 and 25).
//! Epilogue: `add rsp, N; pop rbp`, the return poll
//! (`cmp rsp, [r15+d]; ja`, whose slow path is a stub in the nmethod; on
//! JDK 11 a load of the polling page, `mov r10, [r15+d]; test [r10], eax`),
//! `ret`; C1's exception unwind leaves by `pop rbp; jmp`.

use crate::memory::VmMemory;

/// Where the caller's return address is, relative to the interrupted sp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FrameState {
    /// Nothing pushed yet, or all of the frame popped: at sp.
    ReturnAddressAtSp,
    /// rbp pushed and not popped: the caller's fp at sp, the return
    /// address above it.
    RbpPushed,
    /// rsp lowered by the frame but rbp not stored yet (`sub rsp, N;
    /// mov [rsp+offset], rbp` at the `mov`): rbp is still the caller's
    /// fp, the return address is at sp + offset + 8.
    RspLowered(u64),
    /// The frame is built: its size applies.
    Built,
    /// Nothing recognised.
    Unknown,
}

/// Bytes of code from 24 before the pc to 16 after it.
struct Code([u8; 40]);

impl Code {
    const BEFORE: u64 = 24;

    fn read<M: VmMemory + ?Sized>(memory: &M, pc: u64) -> Option<Self> {
        let start = pc.checked_sub(Self::BEFORE)?;
        let base = start & !7;
        let mut bytes = [0u8; 48];
        for (i, chunk) in bytes.chunks_exact_mut(8).enumerate() {
            chunk.copy_from_slice(&memory.u64(base.checked_add(8 * i as u64)?)?.to_le_bytes());
        }
        let skip = (start - base) as usize;
        let mut window = [0u8; 40];
        window.copy_from_slice(bytes.get(skip..skip + 40)?);
        Some(Self(window))
    }

    /// The byte at pc + `offset` (-24..16).
    fn at(&self, offset: i64) -> u8 {
        usize::try_from(Self::BEFORE as i64 + offset).ok().and_then(|i| self.0.get(i).copied()).unwrap_or(0)
    }

    /// Whether the bytes from pc + `offset` are `pattern`.
    fn has(&self, offset: i64, pattern: &[u8]) -> bool {
        pattern.iter().zip(offset..).all(|(&b, at)| self.at(at) == b)
    }
}

const PUSH_RBP: u8 = 0x55;
const POP_RBP: u8 = 0x5D;
const RET: u8 = 0xC3;
const JMP_REL32: u8 = 0xE9;
/// `mov dword [rsp+disp32], eax`: the stack bang.
const STACK_BANG: [u8; 3] = [0x89, 0x84, 0x24];
/// `mov rbp, rsp` (with `-XX:+PreserveFramePointer`).
const MOV_RBP_RSP: [u8; 3] = [0x48, 0x89, 0xE5];
/// `mov qword [rsp], rbp`, `[rsp+disp8]`, `[rsp+disp32]`.
const STORE_RBP: [u8; 4] = [0x48, 0x89, 0x2C, 0x24];
const STORE_RBP_DISP8: [u8; 4] = [0x48, 0x89, 0x6C, 0x24];
const STORE_RBP_DISP32: [u8; 4] = [0x48, 0x89, 0xAC, 0x24];
/// `sub rsp, imm32` and `sub rsp, imm8`.
const SUB_RSP_IMM32: [u8; 3] = [0x48, 0x81, 0xEC];
const SUB_RSP_IMM8: [u8; 3] = [0x48, 0x83, 0xEC];
/// `cmp dword [r15+disp8], imm32`: the nmethod entry barrier (8 bytes),
/// followed by `jne` (C2) or `je +5; call` (C1).
const ENTRY_BARRIER: [u8; 3] = [0x41, 0x81, 0x7F];
const JE_OVER_CALL: [u8; 2] = [0x74, 0x05];
/// `cmp rsp, qword [r15+disp8]` (4 bytes) and `[r15+disp32]` (7 bytes):
/// the return poll (then `ja`), and the reserved-stack check (then `jb`).
const POLL_DISP8: [u8; 3] = [0x49, 0x3B, 0x67];
const POLL_DISP32: [u8; 3] = [0x49, 0x3B, 0xA7];
const JA: [u8; 2] = [0x0F, 0x87];
/// JDK 11's return poll: `mov r10, qword [r15+disp8]` (4 bytes) or
/// `[r15+disp32]` (7 bytes), then `test dword [r10], eax`.
const LOAD_POLL_PAGE_DISP8: [u8; 3] = [0x4D, 0x8B, 0x57];
const LOAD_POLL_PAGE_DISP32: [u8; 3] = [0x4D, 0x8B, 0x97];
const TEST_POLL_PAGE: [u8; 3] = [0x41, 0x85, 0x02];
const JB: [u8; 2] = [0x0F, 0x82];
/// The return poll's slow path: `movabs r10, imm64` (10 bytes),
/// `mov [r15+disp32], r10` (7 bytes), `jmp`.
const MOVABS_R10: [u8; 2] = [0x49, 0xBA];
const STORE_R10: [u8; 3] = [0x4D, 0x89, 0x97];

/// The state of a compiled frame interrupted at `pc`; `in_prologue` says
/// whether the pc is before the nmethod's `frame_complete` offset.
pub(super) fn frame_state<M: VmMemory + ?Sized>(memory: &M, pc: u64, in_prologue: bool) -> FrameState {
    match Code::read(memory, pc) {
        Some(code) if in_prologue => prologue_state(&code),
        Some(code) => body_state(&code),
        None => FrameState::Unknown,
    }
}

fn prologue_state(code: &Code) -> FrameState {
    let disp32 = || u32::from_le_bytes([code.at(4), code.at(5), code.at(6), code.at(7)]);
    if code.at(0) == PUSH_RBP || code.has(0, &STACK_BANG) {
        FrameState::ReturnAddressAtSp
    } else if code.has(0, &STORE_RBP) {
        FrameState::RspLowered(0)
    } else if code.has(0, &STORE_RBP_DISP8) {
        FrameState::RspLowered(u64::from(code.at(4)))
    } else if code.has(0, &STORE_RBP_DISP32) {
        FrameState::RspLowered(u64::from(disp32()))
    } else if at_entry_barrier(code) {
        FrameState::Built
    } else if code.at(-1) == PUSH_RBP || code.has(-3, &MOV_RBP_RSP) {
        FrameState::RbpPushed
    } else if code.has(0, &SUB_RSP_IMM32) || code.has(0, &SUB_RSP_IMM8) {
        FrameState::ReturnAddressAtSp
    } else {
        FrameState::Unknown
    }
}

/// At the entry barrier, its branch, C1's call after it, or the alignment
/// nops before it: the frame is built.
fn at_entry_barrier(code: &Code) -> bool {
    let nop = code.at(0) == 0x90 || code.at(0) == 0x66 || code.has(0, &[0x0F, 0x1F]);
    code.has(0, &ENTRY_BARRIER)
        || code.has(-8, &ENTRY_BARRIER)
        || (code.has(-10, &ENTRY_BARRIER) && code.has(-2, &JE_OVER_CALL))
        || (nop && (1..=8).any(|k| code.has(k, &ENTRY_BARRIER)))
}

/// At JDK 11's return poll, which follows `pop rbp` (the same load and
/// test in a body poll a safepoint and keep the frame).
fn at_page_poll(code: &Code) -> bool {
    let load_at = |at: i64| {
        code.at(at - 1) == POP_RBP
            && ((code.has(at, &LOAD_POLL_PAGE_DISP8) && code.has(at + 4, &TEST_POLL_PAGE))
                || (code.has(at, &LOAD_POLL_PAGE_DISP32) && code.has(at + 7, &TEST_POLL_PAGE)))
    };
    load_at(0) || load_at(-4) || load_at(-7)
}

fn body_state(code: &Code) -> FrameState {
    let at_poll = code.has(0, &POLL_DISP8) || code.has(0, &POLL_DISP32);
    let after_poll =
        (code.has(0, &JA) || code.has(0, &JB)) && (code.has(-4, &POLL_DISP8) || code.has(-7, &POLL_DISP32));
    let poll_stub = (code.has(0, &MOVABS_R10) && code.has(10, &STORE_R10))
        || (code.has(-10, &MOVABS_R10) && code.has(0, &STORE_R10))
        || (code.at(0) == JMP_REL32 && code.has(-17, &MOVABS_R10) && code.has(-7, &STORE_R10));
    // C1's exception unwind: `pop rbp; jmp` to the unwind stub.
    let unwinding = code.at(0) == JMP_REL32 && code.at(-1) == POP_RBP;
    if code.at(0) == RET || at_poll || after_poll || poll_stub || unwinding || at_page_poll(code) {
        FrameState::ReturnAddressAtSp
    } else if code.at(0) == POP_RBP {
        FrameState::RbpPushed
    } else {
        FrameState::Built
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeMemory;

    const PC: u64 = 0x7000_0033;

    /// The state at a pc whose code is `before` then `at` (the pc is at
    /// the first byte of `at`).
    fn state(before: &[u8], at: &[u8], in_prologue: bool) -> FrameState {
        let mut memory = FakeMemory::default();
        memory.put_bytes(PC - 32, &[0xCC; 64]);
        memory.put_bytes(PC - before.len() as u64, before);
        memory.put_bytes(PC, at);
        frame_state(&memory, PC, in_prologue)
    }

    #[test]
    fn prologue_states() {
        use FrameState::*;
        assert_eq!(state(&[], &[0x55, 0x48, 0x83, 0xEC, 0x20], true), ReturnAddressAtSp, "at push rbp");
        assert_eq!(state(&[], &[0x89, 0x84, 0x24, 0x00, 0xC0, 0xFE, 0xFF], true), ReturnAddressAtSp, "stack bang");
        assert_eq!(state(&[0x55], &[0x48, 0x83, 0xEC, 0x20], true), RbpPushed, "after push rbp");
        assert_eq!(state(&[0x55], &[0x48, 0x81, 0xEC, 0x20, 0, 0, 0], true), RbpPushed, "sub rsp after push rbp");
        assert_eq!(
            state(&[0x0F, 0x1F, 0], &[0x48, 0x81, 0xEC, 0x18, 0, 0, 0], true),
            ReturnAddressAtSp,
            "sub rsp first"
        );
        let sub = [0x48, 0x81, 0xEC, 0x18, 0, 0, 0];
        assert_eq!(state(&sub, &[0x48, 0x89, 0x6C, 0x24, 0x10], true), RspLowered(0x10), "then mov [rsp+0x10], rbp");
        let barrier = [0x41, 0x81, 0x7F, 0x20, 0x01, 0x00, 0x00, 0x00];
        assert_eq!(state(&[], &barrier, true), Built, "at the entry barrier");
        assert_eq!(state(&barrier, &[0x0F, 0x85, 0, 0, 0, 0], true), Built, "at its jne");
        assert_eq!(state(&[0x48, 0x83, 0xEC, 0x08], &[0x48, 0x89, 0x2C, 0x24], true), RspLowered(0), "mov [rsp], rbp");
        let store32 = [0x48, 0x89, 0xAC, 0x24, 0x80, 0x01, 0, 0];
        assert_eq!(state(&[0x48, 0x81, 0xEC, 0x88, 0x01, 0, 0], &store32, true), RspLowered(0x180), "disp32");
        assert_eq!(
            state(&[0x55, 0x48, 0x89, 0xE5], &[0x48, 0x83, 0xEC, 0x20], true),
            RbpPushed,
            "PreserveFramePointer"
        );
        let nops_then_barrier = [0x0F, 0x1F, 0x40, 0x00, 0x41, 0x81, 0x7F, 0x20, 1, 0, 0, 0];
        assert_eq!(state(&[], &nops_then_barrier, true), Built, "alignment before the barrier");
        assert_eq!(
            state(&[0x66, 0x90, 0x41, 0x81, 0x7F, 0x20, 1, 0, 0, 0, 0x74, 0x05], &[0xE8, 0, 0, 0, 0], true),
            Built
        );
        assert_eq!(state(&[], &[0xCC], true), Unknown);
    }

    #[test]
    fn epilogue_and_body_states() {
        use FrameState::*;
        assert_eq!(state(&[0x48, 0x83, 0xC4, 0x20], &[0x5D, 0x49, 0x3B, 0x67, 0x28], false), RbpPushed, "pop rbp");
        assert_eq!(state(&[0x5D], &[0x49, 0x3B, 0x67, 0x28, 0x0F, 0x87], false), ReturnAddressAtSp, "the poll");
        assert_eq!(state(&[0x5D], &[0x49, 0x3B, 0xA7, 0x28, 0x01, 0, 0], false), ReturnAddressAtSp, "disp32 poll");
        assert_eq!(state(&[0x49, 0x3B, 0x67, 0x28], &[0x0F, 0x87, 1, 0, 0, 0], false), ReturnAddressAtSp, "its ja");
        assert_eq!(state(&[0x49, 0x3B, 0xA7, 0x28, 1, 0, 0], &[0x0F, 0x87], false), ReturnAddressAtSp, "disp32 ja");
        assert_eq!(state(&[0x0F, 0x87, 1, 0, 0, 0], &[0xC3], false), ReturnAddressAtSp, "ret");
        assert_eq!(state(&[0x48, 0x83, 0xC4], &[0x0F, 0x87, 1, 0, 0, 0], false), Built, "a ja in the body");
        assert_eq!(state(&[], &[0x48, 0x83, 0xC4, 0x20], false), Built, "add rsp: the frame is still whole");
        assert_eq!(
            state(&[0x49, 0x3B, 0xA7, 0x28, 1, 0, 0], &[0x0F, 0x82], false),
            ReturnAddressAtSp,
            "reserved stack"
        );
        let poll_stub = [0x49, 0xBA, 1, 2, 3, 4, 5, 6, 7, 8, 0x4D, 0x89, 0x97, 0x38, 0x05, 0, 0, 0xE9, 0, 0, 0, 0];
        for at in [0, 10, 17] {
            assert_eq!(state(&poll_stub[..at], &poll_stub[at..], false), ReturnAddressAtSp, "poll stub +{at}");
        }
        assert_eq!(state(&[0x49, 0xBA, 1, 2, 3, 4, 5, 6, 7, 8], &[0x48, 0x89, 0x07], false), Built, "a constant load");
        assert_eq!(state(&[0x5D], &[0xE9, 0, 0, 0, 0], false), ReturnAddressAtSp, "C1 unwind");
        let page_poll = [0x5D, 0x4D, 0x8B, 0x97, 0x08, 0x01, 0, 0, 0x41, 0x85, 0x02, 0xC3];
        for at in [1, 8, 11] {
            assert_eq!(state(&page_poll[..at], &page_poll[at..], false), ReturnAddressAtSp, "JDK 11 poll +{at}");
        }
        let short_poll = [0x5D, 0x4D, 0x8B, 0x57, 0x28, 0x41, 0x85, 0x02];
        assert_eq!(state(&short_poll[..5], &short_poll[5..], false), ReturnAddressAtSp, "JDK 11 disp8 poll");
        assert_eq!(state(&page_poll[1..8], &page_poll[8..], false), Built, "a safepoint poll in the body");
    }

    #[test]
    fn unreadable_code_is_unknown() {
        assert_eq!(frame_state(&FakeMemory::default(), PC, false), FrameState::Unknown);
    }
}
