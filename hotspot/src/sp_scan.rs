//! How far below its frame's sp a compiled frame's sp is at a pc where
//! the code has pushed words of its own: read by following the x86-64
//! instructions from that pc forward to a pc where HotSpot's frame
//! invariant holds again.
//!
//! HotSpot walks a compiled frame only at pcs with debug information
//! (calls and safepoint polls, and with `DebugNonSafepoints`, on whenever
//! a JVMTI agent takes compiled-method events, the start of every machine
//! node): there the sp is the frame's, `frame_size` words below the
//! caller's. Within some of C2's x86-64 machine nodes rsp moves:
//! `string_compare` (`String.compareTo`, `StringLatin1/UTF16.compareTo`)
//! pushes the length difference for its whole loop; `string_indexof`
//! (`String.indexOf(String)`) saves rsp, copies short strings below it,
//! pushes its operands and the saved rsp, and leaves by `pop rsp`; a spill
//! copy from one stack slot to another is `push [rsp+a]; pop [rsp+b]`; a
//! float-to-int conversion's slow path, `ModD`/`ModF` and the
//! floating-point compare fix-up push a word for a few instructions. No
//! table says so; the frame size read at such a pc leads to a slot of the
//! frame, not its return address (issue 28, item 7: samples in
//! `TreeMap.merge` whose compare of `String` keys was interrupted ended
//! the walk there).
//!
//! So from the interrupted pc the instructions are decoded one after
//! another and what they do to rsp is added up, until a pc with a PcDesc
//! or the epilogue's `add rsp, (frame_size - 2) * 8; pop rbp`: there rsp
//! is the frame's sp, so the frame's sp at the interrupted pc is that many
//! bytes above (`pop rsp` sets rsp to the word it pops, read from the
//! stack when the path has pushed nothing). Paths are followed depth
//! first: on past conditional branches (their targets kept for later),
//! along direct jumps, each jump target once (a loop's way back leads to
//! a target already taken: the path ends there and the last target kept
//! is tried). Compiled code has one stack depth at each pc whatever the
//! path to it (`string_indexof`, whose depth in its search loop depends on
//! whether it copied its strings below rsp, restores rsp from the stack
//! before any PcDesc), so the first landing place answers. A path ends
//! without an answer at control flow or a write of rsp the decoder does
//! not model ([`Flow::Unknown`]), a return before the epilogue, or a jump
//! out of the nmethod; with no path left, or past a bound on the
//! instructions decoded, there is no answer. Nothing here allocates or
//! panics. It costs about 3,500 cycles a scan (JDK 17, `string_compare`
//! and `string_indexof` loops; code read 64 bytes at a time, the PcDesc
//! table located once): it runs only where the frame size failed.

use crate::memory::VmMemory;
use crate::x86_insn::{decode, Flow, Insn, MAX_LEN};

/// Instructions decoded before giving up (C2's `string_compare` is well
/// under 200 on any path).
const MAX_INSNS: usize = 1024;
/// Branch targets kept for later, and jump targets remembered as taken.
const MAX_PENDING: usize = 16;
const MAX_TAKEN: usize = 64;
/// More bytes than an intrinsic ever pushes.
const MAX_DEPTH: i64 = 512;

/// An nmethod's code as the scan reads it: where its instructions lie, its
/// frame size in words, and where its PcDescs are.
pub(crate) struct NmethodCode<'a> {
    pub begin: u64,
    pub end: u64,
    pub frame_words: i64,
    /// The offset from `begin` of the first PcDesc at or after an offset.
    pub next_pc_desc: &'a dyn Fn(i64) -> Option<i64>,
}

/// Where rsp is on a path, from the interrupted sp.
#[derive(Clone, Copy, Default)]
struct Rsp {
    /// Bytes rsp has moved.
    moved: i64,
    /// The path moved rsp down (pushed, or made room): the words from
    /// there up are the path's, not what the stack holds.
    lowered: bool,
}

impl Rsp {
    fn by(self, bytes: i32) -> Rsp {
        Rsp { moved: self.moved.saturating_add(i64::from(bytes)), lowered: self.lowered || bytes < 0 }
    }
}

/// The paths of one scan: branch targets not followed yet (with rsp at
/// the branch) and jump targets already taken.
struct Paths {
    pending: [(u64, Rsp); MAX_PENDING],
    pending_len: usize,
    taken: [u64; MAX_TAKEN],
    taken_len: usize,
}

impl Paths {
    fn new(start: u64) -> Self {
        let mut taken = [0; MAX_TAKEN];
        taken[0] = start;
        Self { pending: [(0, Rsp::default()); MAX_PENDING], pending_len: 0, taken, taken_len: 1 }
    }

    fn was_taken(&self, pc: u64) -> bool {
        self.taken.get(..self.taken_len).unwrap_or_default().contains(&pc)
    }

    /// Keeps a branch target for later (unless it is known already, or
    /// there is no room left).
    fn keep(&mut self, pc: u64, rsp: Rsp) {
        let kept = self.pending.get(..self.pending_len).unwrap_or_default().iter().any(|&(p, _)| p == pc);
        if kept || self.was_taken(pc) {
            return;
        }
        if let Some(slot) = self.pending.get_mut(self.pending_len) {
            *slot = (pc, rsp);
            self.pending_len += 1;
        }
    }

    /// Whether a jump to `pc` goes somewhere new (remembered as taken if
    /// there is room: past that, the bound on instructions ends a loop).
    fn take(&mut self, pc: u64) -> bool {
        if self.was_taken(pc) {
            return false;
        }
        if let Some(slot) = self.taken.get_mut(self.taken_len) {
            *slot = pc;
            self.taken_len += 1;
        }
        true
    }

    /// The last target kept and not taken since.
    fn next(&mut self) -> Option<(u64, Rsp)> {
        while self.pending_len > 0 {
            self.pending_len -= 1;
            let (pc, rsp) = *self.pending.get(self.pending_len)?;
            if self.take(pc) {
                return Some((pc, rsp));
            }
        }
        None
    }
}

/// Where one instruction leads a path.
enum Step {
    /// On at this pc, with rsp there.
    At(u64, Rsp),
    /// rsp is the frame's sp here, having moved this far.
    Landed(i64),
    /// The path ends without an answer.
    End,
}

/// Bytes from the interrupted `sp` at `pc` up to the frame's sp (0 when
/// no word is pushed), or `None` if the instructions do not say.
pub(crate) fn depth_below_frame<M: VmMemory + ?Sized>(memory: &M, pc: u64, sp: u64, code: &NmethodCode) -> Option<u64> {
    let epilogue = code.frame_words.checked_sub(2)?.checked_mul(8)?;
    let offset = |at: u64| i64::try_from(at.checked_sub(code.begin)?).ok();
    let mut paths = Paths::new(pc);
    let mut window = CodeWindow::new();
    let (mut at, mut rsp) = (pc, Rsp::default());
    let mut desc = offset(at).and_then(code.next_pc_desc);
    for _ in 0..MAX_INSNS {
        let here = offset(at)?;
        if desc.is_some_and(|d| d < here) {
            desc = (code.next_pc_desc)(here);
        }
        if desc == Some(here) {
            return landed(rsp.moved);
        }
        let step = match window.instruction(memory, at, code.end) {
            Some(insn) => step(memory, code, epilogue, (at, sp), rsp, insn, (&mut paths, &mut window)),
            None => Step::End,
        };
        let (next, next_rsp) = match step {
            Step::At(next, next_rsp) => (next, next_rsp),
            Step::Landed(moved) => return landed(moved),
            Step::End => paths.next()?,
        };
        // A jump or another path: the next PcDesc from there.
        if next < at || next > at.saturating_add(MAX_LEN as u64) {
            desc = offset(next).and_then(code.next_pc_desc);
        }
        (at, rsp) = (next, next_rsp);
    }
    None
}

/// Follows `insn` at `at`, with `rsp` there (`sp` the interrupted one).
fn step<M: VmMemory + ?Sized>(
    memory: &M,
    code: &NmethodCode,
    epilogue: i64,
    (at, sp): (u64, u64),
    rsp: Rsp,
    insn: Insn,
    (paths, window): (&mut Paths, &mut CodeWindow),
) -> Step {
    let in_code = |pc: u64| pc >= code.begin && pc < code.end;
    let Some(next) = at.checked_add(insn.len as u64) else { return Step::End };
    let (next, rsp) = match insn.flow {
        // `add rsp, (frame_size - 2) * 8; pop rbp`: the epilogue.
        Flow::AddRsp(by) if i64::from(by) == epilogue && window.pops_rbp(memory, next, code.end) => {
            return Step::Landed(rsp.moved)
        }
        Flow::Next(by) | Flow::AddRsp(by) => (next, rsp.by(by)),
        Flow::PopRbp if epilogue == 0 => return Step::Landed(rsp.moved),
        // The word popped is the stack's only if the path wrote nothing
        // below the interrupted sp and it lies at or above that sp.
        Flow::PopRsp if rsp.lowered || rsp.moved < 0 => return Step::End,
        Flow::PopRsp => {
            let restored = sp.checked_add_signed(rsp.moved).and_then(|top| memory.u64(top));
            match restored.and_then(|value| i64::try_from(value.checked_sub(sp)?).ok()) {
                Some(moved) => (next, Rsp { moved, ..rsp }),
                None => return Step::End,
            }
        }
        Flow::Call => (next, rsp),
        Flow::Branch(by) => {
            if let Some(target) = next.checked_add_signed(by).filter(|&t| in_code(t)) {
                paths.keep(target, rsp);
            }
            (next, rsp)
        }
        Flow::Jump(by) => match next.checked_add_signed(by) {
            Some(target) if paths.take(target) => (target, rsp),
            _ => return Step::End,
        },
        Flow::PopRbp | Flow::Return | Flow::Unknown => return Step::End,
    };
    if rsp.moved.abs() > MAX_DEPTH || !in_code(next) {
        return Step::End;
    }
    Step::At(next, rsp)
}

/// At a pc where rsp is the frame's sp, having moved `moved` bytes from
/// the interrupted sp.
fn landed(moved: i64) -> Option<u64> {
    u64::try_from(moved).ok().filter(|m| m % 8 == 0)
}

/// Code read ahead, eight words at a time: most instructions cost no read.
struct CodeWindow {
    base: u64,
    bytes: [u8; 64],
    read: usize,
}

impl CodeWindow {
    fn new() -> Self {
        Self { base: 0, bytes: [0; 64], read: 0 }
    }

    /// The instruction at `at`, reading no further than `end`.
    fn instruction<M: VmMemory + ?Sized>(&mut self, memory: &M, at: u64, end: u64) -> Option<Insn> {
        let window_end = self.base.checked_add(self.read as u64)?;
        if at < self.base || at.checked_add(MAX_LEN as u64)? > window_end {
            self.base = at & !7;
            self.read = 0;
            for (i, chunk) in self.bytes.chunks_exact_mut(8).enumerate() {
                let Some(word) = self.base.checked_add(8 * i as u64).and_then(|a| memory.u64(a)) else { break };
                chunk.copy_from_slice(&word.to_le_bytes());
                self.read += 8;
            }
        }
        let skip = usize::try_from(at.checked_sub(self.base)?).ok()?;
        let available = usize::try_from(end.saturating_sub(at)).unwrap_or(usize::MAX);
        let stop = self.read.min(skip.saturating_add(MAX_LEN)).min(skip.saturating_add(available));
        decode(self.bytes.get(skip..stop)?)
    }

    fn pops_rbp<M: VmMemory + ?Sized>(&mut self, memory: &M, at: u64, end: u64) -> bool {
        self.instruction(memory, at, end).is_some_and(|insn| insn.flow == Flow::PopRbp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeMemory;

    const BEGIN: u64 = 0x7000_0000;

    const SP: u64 = 0x7f00_0000;

    /// Code at `BEGIN` with PcDescs at `descs`, scanned from `pc_offset`.
    fn depth(code: &[u8], descs: &[i64], words: i64, pc_offset: u64) -> Option<u64> {
        depth_with_stack(code, descs, words, pc_offset, &[])
    }

    /// [`depth`], with the words from `SP` up.
    fn depth_with_stack(code: &[u8], descs: &[i64], words: i64, pc_offset: u64, stack: &[u64]) -> Option<u64> {
        let mut memory = FakeMemory::default();
        memory.put_bytes(BEGIN, code);
        memory.put_bytes(BEGIN + code.len() as u64, &[0xCC; 32]);
        for (i, &word) in stack.iter().enumerate() {
            memory.put_u64(SP + 8 * i as u64, word);
        }
        let next = |offset: i64| descs.iter().copied().find(|&d| d >= offset);
        let nmethod =
            NmethodCode { begin: BEGIN, end: BEGIN + code.len() as u64, frame_words: words, next_pc_desc: &next };
        depth_below_frame(&memory, BEGIN + pc_offset, SP, &nmethod)
    }

    /// C2's `string_compare` (Latin-1, AVX2) as JDK 17 emits it inlined,
    /// cut to its shape: the length difference pushed, a first-byte check,
    /// a vector loop, both ways out (`pop`), then the code after the
    /// intrinsic up to the next call, whose return address has a PcDesc.
    #[rustfmt::skip]
    const STRING_COMPARE: &[u8] = &[
        0x89, 0xc1, //                          00: mov ecx, eax
        0x89, 0xc8, //                          02: mov eax, ecx
        0x29, 0xd1, //                          04: sub ecx, edx
        0x51, //                                06: push rcx
        0x0f, 0x4e, 0xd0, //                    07: cmovle edx, eax
        0x85, 0xd2, //                          0a: test edx, edx
        0x0f, 0x84, 0x2d, 0x00, 0x00, 0x00, //  0c: je 0x3f (the length difference)
        0x0f, 0xb6, 0x07, //                    12: movzbl eax, [rdi]
        0x0f, 0xb6, 0x0e, //                    15: movzbl ecx, [rsi]
        0x29, 0xc8, //                          18: sub eax, ecx
        0x0f, 0x85, 0x1f, 0x00, 0x00, 0x00, //  1a: jne 0x3f
        0xc5, 0xfe, 0x6f, 0x0c, 0x07, //        20: vmovdqu ymm1, [rdi+rax]
        0xc5, 0xf5, 0xef, 0x0c, 0x06, //        25: vpxor ymm1, ymm1, [rsi+rax]
        0xc4, 0xe2, 0x7d, 0x17, 0xc9, //        2a: vptest ymm1, ymm1
        0x75, 0x0e, //                          2f: jne 0x3f
        0x48, 0x83, 0xc0, 0x20, //              31: add rax, 0x20
        0x75, 0xe9, //                          35: jne 0x20
        0xe9, 0x00, 0x00, 0x00, 0x00, //        37: jmp 0x3c
        0x90, 0x90, 0x90, //                    3c: nops
        0x58, //                                3f: pop rax
        0xeb, 0x01, //                          40: jmp 0x43
        0x59, //                                42: pop rcx (another way out)
        0x89, 0x44, 0x24, 0x28, //              43: mov [rsp+0x28], eax
        0xe8, 0x00, 0x01, 0x00, 0x00, //        47: call
        0x90, //                                4c: (a PcDesc: the return address)
    ];

    #[test]
    fn inside_string_compare_the_sp_is_one_word_below_the_frame() {
        let descs = [0x00, 0x4c];
        for pc in [0x07, 0x0a, 0x12, 0x1a, 0x20, 0x2a, 0x35, 0x3f] {
            assert_eq!(depth(STRING_COMPARE, &descs, 14, pc), Some(8), "at {pc:#x}");
        }
        for pc in [0x40, 0x43, 0x47] {
            assert_eq!(depth(STRING_COMPARE, &descs, 14, pc), Some(0), "after the pop, at {pc:#x}");
        }
        assert_eq!(depth(STRING_COMPARE, &descs, 14, 0x00), Some(0), "before the push: at a PcDesc");
        assert_eq!(depth(STRING_COMPARE, &descs, 14, 0x02), Some(0), "before the push");
    }

    /// The same intrinsic (JDK 17, AVX2) inlined in a loop, from its vector
    /// loop on: the tail re-enters the vector loop by a jump back
    /// (`jmp 0x00`), so the only way out is a conditional branch
    /// (`je 0x98`) to the `pop`.
    #[test]
    fn a_loop_left_only_by_a_branch_is_left_by_it() {
        #[rustfmt::skip]
        let code = [
            0xc5, 0xfe, 0x6f, 0x24, 0x07, //        00: vmovdqu ymm4, [rdi+rax]
            0xc5, 0xdd, 0xef, 0x24, 0x06, //        05: vpxor ymm4, ymm4, [rsi+rax]
            0xc4, 0xe2, 0x7d, 0x17, 0xe4, //        0a: vptest ymm4, ymm4
            0x0f, 0x85, 0x22, 0x00, 0x00, 0x00, //  0f: jne 0x37
            0x48, 0x83, 0xc0, 0x20, //              15: add rax, 0x20
            0x83, 0xea, 0x20, //                    19: sub edx, 0x20
            0x75, 0xe2, //                          1c: jne 0x00
            0xc5, 0xdd, 0xef, 0xe4, //              1e: vpxor ymm4, ymm4, ymm4
            0x48, 0x85, 0xc0, //                    22: test rax, rax
            0x0f, 0x84, 0x6d, 0x00, 0x00, 0x00, //  25: je 0x98
            0xb8, 0x20, 0x00, 0x00, 0x00, //        2b: mov eax, 0x20
            0x8b, 0xd0, //                          30: mov edx, eax
            0x48, 0xf7, 0xd8, //                    32: neg rax
            0xeb, 0xc9, //                          35: jmp 0x00
            0xc5, 0xdd, 0xef, 0xe4, //              37: vpxor ymm4, ymm4, ymm4
            0xe9, 0x58, 0x00, 0x00, 0x00, //        3b: jmp 0x98
        ];
        let mut padded = code.to_vec();
        padded.resize(0x98, 0x90);
        // 98: pop rax; 99: mov [rsp+8], eax; 9d: call; a2: (a PcDesc)
        padded.extend_from_slice(&[0x58, 0x89, 0x44, 0x24, 0x08, 0xe8, 0, 1, 0, 0, 0x90]);
        for pc in [0x00, 0x0a, 0x0f, 0x1c, 0x25, 0x35, 0x37] {
            assert_eq!(depth(&padded, &[0xa2], 10, pc), Some(8), "at {pc:#x}");
        }
        assert_eq!(depth(&padded, &[0xa2], 10, 0x99), Some(0));
    }

    /// C2's `string_indexof` (JDK 17, non-constant substring) saves rsp,
    /// pushes its operands and the saved rsp, and leaves by `pop rsp`.
    #[test]
    fn pop_rsp_restores_the_saved_sp() {
        #[rustfmt::skip]
        let code = [
            0x48, 0x8b, 0xcc, //                    00: mov rcx, rsp
            0x50, 0x56, 0x57, 0x51, //              03: push rax; push rsi; push rdi; push rcx
            0xc4, 0xe3, 0x79, 0x61, 0x03, 0x0c, //  07: vpcmpestri xmm0, [rbx], 0x0c
            0x72, 0x02, //                          0d: jb 0x11
            0xeb, 0xf6, //                          0f: jmp 0x07
            0x5c, //                                11: pop rsp
            0x90, //                                12: (a PcDesc)
        ];
        // Interrupted at the pcmpestri, four words pushed: the top one is
        // the saved rsp.
        assert_eq!(depth_with_stack(&code, &[0, 0x12], 14, 0x07, &[SP + 32]), Some(32));
        assert_eq!(depth_with_stack(&code, &[0, 0x12], 14, 0x11, &[SP + 32]), Some(32), "at the pop");
        assert_eq!(depth_with_stack(&code, &[0, 0x12], 14, 0x07, &[SP - 8]), None, "a saved rsp below the sp");
        assert_eq!(depth(&code, &[0, 0x12], 14, 0x07), None, "an unreadable stack");
        // Interrupted before the pushes: what `pop rsp` would pop is not
        // on the stack yet.
        assert_eq!(depth_with_stack(&code, &[0, 0x12], 14, 0x03, &[SP + 32]), None, "pushed on the path");
    }

    /// A spill copy between stack slots: `push [rsp+0x20]; pop [rsp+0x18]`.
    #[test]
    fn a_stack_to_stack_spill_copy() {
        let code = [0x48, 0xff, 0x74, 0x24, 0x20, 0x48, 0x8f, 0x44, 0x24, 0x18, 0x90];
        assert_eq!(depth(&code, &[0, 10], 14, 5), Some(8), "between the push and the pop");
        assert_eq!(depth(&code, &[0, 10], 14, 0), Some(0));
    }

    /// A path that ends without an answer leaves the others to answer.
    #[test]
    fn a_dead_end_leaves_the_other_paths() {
        // 0: push rcx; 1: je 6; 3: jmp r10; 6: pop rcx; 7: nop (a PcDesc)
        let code = [0x51, 0x74, 0x03, 0x41, 0xff, 0xe2, 0x59, 0x90];
        assert_eq!(depth(&code, &[7], 14, 1), Some(8));
        // 0: push rcx; 1: je 4; 3: hlt; 4: pop rcx; 5: nop (a PcDesc)
        let code = [0x51, 0x74, 0x01, 0xf4, 0x59, 0x90];
        assert_eq!(depth(&code, &[5], 14, 1), Some(8));
    }

    /// Without a PcDesc after it, the epilogue tells where the frame's sp
    /// is: `add rsp, (words - 2) * 8` right before `pop rbp`.
    #[test]
    fn the_epilogue_is_where_rsp_is_the_frames() {
        // push rcx; pop rcx; add rsp, 0x60; pop rbp; ret
        let code = [0x51, 0x59, 0x48, 0x83, 0xc4, 0x60, 0x5d, 0xc3];
        assert_eq!(depth(&code, &[], 14, 1), Some(8));
        assert_eq!(depth(&code, &[], 14, 2), Some(0));
        assert_eq!(depth(&code, &[], 13, 1), None, "another frame size: an add of rsp in the body, then a pop");
        // A frame of two words has no add: pop rbp alone.
        assert_eq!(depth(&[0x51, 0x59, 0x5d, 0xc3], &[], 2, 1), Some(8));
    }

    /// A floating-point remainder's `sub rsp, 8 ... add rsp, 8`.
    #[test]
    fn a_lowered_rsp_is_counted() {
        // sub rsp, 8; movsd [rsp], xmm0; fld qword [rsp]; add rsp, 8; nop (a PcDesc)
        #[rustfmt::skip]
        let code = [
            0x48, 0x83, 0xec, 0x08, 0xf2, 0x0f, 0x11, 0x04, 0x24, 0xdd, 0x04, 0x24, 0x48, 0x83, 0xc4, 0x08, 0x90,
        ];
        assert_eq!(depth(&code, &[16], 14, 4), Some(8));
        assert_eq!(depth(&code, &[16], 14, 9), Some(8));
        assert_eq!(depth(&code, &[16], 14, 0), Some(0));
    }

    /// Random code, PcDescs and stack: no panic, and an answer only as
    /// a whole number of words within the bound.
    #[test]
    fn random_code_gives_a_bounded_answer_or_none() {
        let mut next = crate::testing::xorshift(0x9E37_79B9_7F4A_7C15);
        let mut answered = 0;
        for _ in 0..2_000 {
            let code: Vec<u8> = (0..256).map(|_| next() as u8).collect();
            let descs: Vec<i64> = {
                let mut d: Vec<i64> = (0..next() % 8).map(|_| (next() % 256) as i64).collect();
                d.sort_unstable();
                d
            };
            let stack: Vec<u64> = (0..8).map(|_| SP + next() % 1024).collect();
            let words = (next() % 40) as i64;
            let pc = next() % 256;
            if let Some(depth) = depth_with_stack(&code, &descs, words, pc, &stack) {
                assert!(depth % 8 == 0 && depth <= MAX_DEPTH as u64, "{depth}");
                answered += 1;
            }
        }
        assert!(answered > 0, "some random code lands somewhere");
    }

    #[test]
    fn what_the_decoder_does_not_follow_gives_no_answer() {
        // push rcx; mov rsp, rbp; nop (a PcDesc)
        assert_eq!(depth(&[0x51, 0x48, 0x89, 0xec, 0x90], &[4], 14, 1), None, "a write of rsp");
        // push rcx; jmp r10
        assert_eq!(depth(&[0x51, 0x41, 0xff, 0xe2, 0x90], &[4], 14, 1), None, "an indirect jump");
        // push rcx; ret
        assert_eq!(depth(&[0x51, 0xc3, 0x90], &[2], 14, 1), None, "a return before the epilogue");
        // jmp -2 (itself), forever
        assert_eq!(depth(&[0xeb, 0xfe, 0x90], &[2], 14, 0), None, "a loop without a PcDesc");
        // push rcx; l: jne l; jmp l
        assert_eq!(depth(&[0x51, 0x75, 0xfe, 0xeb, 0xfc, 0x90], &[5], 14, 0), None, "a loop with a branch");
        // jmp out of the code
        assert_eq!(depth(&[0xe9, 0x00, 0x10, 0x00, 0x00, 0x90], &[5], 14, 0), None, "a jump out of the nmethod");
        // pop rcx; pop rcx; ...: more than any intrinsic pushes
        assert_eq!(depth(&[0x59; 80], &[79], 14, 0), None, "too deep");
        // push rcx; pop rcx; then the end of the code
        assert_eq!(depth(&[0x51, 0x59], &[], 14, 0), None, "runs off the end");
        // An unreadable instruction.
        let memory = FakeMemory::default();
        let next = |_: i64| Some(8);
        let nmethod = NmethodCode { begin: BEGIN, end: BEGIN + 8, frame_words: 14, next_pc_desc: &next };
        assert_eq!(depth_below_frame(&memory, BEGIN, SP, &nmethod), None);
    }
}
