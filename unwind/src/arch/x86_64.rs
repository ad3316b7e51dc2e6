//! x86-64 (System V, Linux).

use super::HotSpotFrameOffsets;
use crate::Registers;
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};

std::arch::global_asm!(
    ".text",
    ".globl profiler_safe_load",
    ".hidden profiler_safe_load",
    ".type profiler_safe_load, @function",
    "profiler_safe_load:",
    ".globl profiler_safe_load_fault_site",
    ".hidden profiler_safe_load_fault_site",
    "profiler_safe_load_fault_site:",
    "    mov rax, qword ptr [rdi]",
    "    mov qword ptr [rsi], rax",
    "    mov eax, 1",
    "    ret",
    ".globl profiler_safe_load_resume",
    ".hidden profiler_safe_load_resume",
    "profiler_safe_load_resume:",
    "    xor eax, eax",
    "    ret",
    ".size profiler_safe_load, . - profiler_safe_load",
);

/// The registers of an interrupted context.
pub fn registers(context: &libc::ucontext_t) -> Registers {
    let g = &context.uc_mcontext.gregs;
    Registers {
        pc: g[libc::REG_RIP as usize] as u64,
        sp: g[libc::REG_RSP as usize] as u64,
        fp: g[libc::REG_RBP as usize] as u64,
        lr: 0,
    }
}

/// The registers of the function this is inlined into, at this point:
/// where a walk of the calling thread's own stack starts (its pc is of
/// kind `Interrupted`). The frame pointer is that function's own only
/// when it keeps one (`force-frame-pointers`).
#[inline(always)]
pub fn current_registers() -> Registers {
    let (pc, sp, fp): (u64, u64, u64);
    // SAFETY: copies rip, rsp and rbp into registers; no memory, no flags.
    unsafe {
        std::arch::asm!(
            "lea {pc}, [rip]",
            "mov {sp}, rsp",
            "mov {fp}, rbp",
            pc = out(reg) pc,
            sp = out(reg) sp,
            fp = out(reg) fp,
            options(nomem, nostack, preserves_flags),
        );
    }
    Registers { pc, sp, fp, lr: 0 }
}

/// Makes `context` hold `regs`: a context for a walk of the calling
/// thread's own stack, as if a signal had interrupted it there.
pub fn set_registers(context: &mut libc::ucontext_t, regs: Registers) {
    let g = &mut context.uc_mcontext.gregs;
    g[libc::REG_RIP as usize] = regs.pc as i64;
    g[libc::REG_RSP as usize] = regs.sp as i64;
    g[libc::REG_RBP as usize] = regs.fp as i64;
}

/// Makes an interrupted context resume at `pc`.
pub fn set_pc(context: &mut libc::ucontext_t, pc: u64) {
    context.uc_mcontext.gregs[libc::REG_RIP as usize] = pc as i64;
}

/// `syscall`.
pub const SYSCALL_INSTRUCTION: &[u8] = &[0x0f, 0x05];

/// The relocations of a dynamic object's imported functions: its PLT
/// slots (`R_X86_64_JUMP_SLOT`) and GOT entries (`R_X86_64_GLOB_DAT`).
pub const IMPORT_RELOCATIONS: [u32; 2] = [7, 6];

/// framehop's unwinder, cache and registers for this architecture.
pub type FramehopUnwinder<D, P> = UnwinderX86_64<D, P>;
pub type FramehopCache<P> = CacheX86_64<P>;
pub type FramehopRegs = UnwindRegsX86_64;

pub fn to_framehop(regs: &Registers) -> FramehopRegs {
    UnwindRegsX86_64::new(regs.pc, regs.sp, regs.fp)
}

/// The caller's registers after framehop unwound to `return_address`.
pub fn from_framehop(return_address: u64, regs: &FramehopRegs) -> Registers {
    Registers { pc: return_address, sp: regs.sp(), fp: regs.bp(), lr: 0 }
}

/// The return address is pushed by `call`, just below the CFA.
pub const CFI_REGISTERS: Option<super::CfiRegisters> =
    Some(super::CfiRegisters { sp: gimli::X86_64::RSP, fp: gimli::X86_64::RBP, ra: gimli::X86_64::RA, ra_offset: -8 });

/// The ABI code of SFrame sections for this architecture.
pub const SFRAME_ABI: u8 = crate::sframe::ABI_AMD64_LE;

/// HotSpot's frame layout (`frame_x86.hpp`), stable since JDK 9 (which
/// added the mirror slot). The HotSpot walker knows this architecture's
/// frames (its prologue and epilogue decoding is x86-64 code).
pub const HOTSPOT_FRAME: Option<HotSpotFrameOffsets> = Some(HotSpotFrameOffsets {
    interpreter_method: -3,
    interpreter_bcp: -8,
    interpreter_sender_sp: -1,
    entry_call_wrapper: -6,
});
