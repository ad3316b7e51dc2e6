//! AArch64 (AAPCS64, Linux).

use super::HotSpotFrameOffsets;
use crate::Registers;
use framehop::aarch64::{CacheAarch64, UnwindRegsAarch64, UnwinderAarch64};

std::arch::global_asm!(
    ".text",
    ".globl profiler_safe_load",
    ".hidden profiler_safe_load",
    ".type profiler_safe_load, %function",
    "profiler_safe_load:",
    ".globl profiler_safe_load_fault_site",
    ".hidden profiler_safe_load_fault_site",
    "profiler_safe_load_fault_site:",
    "    ldr x2, [x0]",
    "    str x2, [x1]",
    "    mov w0, #1",
    "    ret",
    ".globl profiler_safe_load_resume",
    ".hidden profiler_safe_load_resume",
    "profiler_safe_load_resume:",
    "    mov w0, #0",
    "    ret",
    ".size profiler_safe_load, . - profiler_safe_load",
);

/// The registers of an interrupted context (`fp` is x29, `lr` x30).
pub fn registers(context: &libc::ucontext_t) -> Registers {
    let m = &context.uc_mcontext;
    Registers { pc: m.pc, sp: m.sp, fp: m.regs[29], lr: m.regs[30] }
}

/// The registers of the function this is inlined into, at this point:
/// where a walk of the calling thread's own stack starts (its pc is of
/// kind `Interrupted`). The frame pointer is that function's own only
/// when it keeps one (`force-frame-pointers`).
#[inline(always)]
pub fn current_registers() -> Registers {
    let (pc, sp, fp, lr): (u64, u64, u64, u64);
    // SAFETY: copies the pc, sp, x29 and x30 into the scratch registers
    // x9-x12 (named, so none of them can be x29 or x30 before it is read);
    // no memory, no flags.
    unsafe {
        std::arch::asm!(
            "mov x12, x30",
            "mov x11, x29",
            "mov x10, sp",
            "adr x9, .",
            out("x9") pc,
            out("x10") sp,
            out("x11") fp,
            out("x12") lr,
            options(nomem, nostack, preserves_flags),
        );
    }
    Registers { pc, sp, fp, lr }
}

/// Makes `context` hold `regs`: a context for a walk of the calling
/// thread's own stack, as if a signal had interrupted it there.
pub fn set_registers(context: &mut libc::ucontext_t, regs: Registers) {
    let m = &mut context.uc_mcontext;
    m.pc = regs.pc;
    m.sp = regs.sp;
    m.regs[29] = regs.fp;
    m.regs[30] = regs.lr;
}

/// Makes an interrupted context resume at `pc`.
pub fn set_pc(context: &mut libc::ucontext_t, pc: u64) {
    context.uc_mcontext.pc = pc;
}

/// `svc #0`.
pub const SYSCALL_INSTRUCTION: &[u8] = &[0x01, 0x00, 0x00, 0xd4];

/// The relocations of a dynamic object's imported functions: its PLT
/// slots (`R_AARCH64_JUMP_SLOT`) and GOT entries (`R_AARCH64_GLOB_DAT`).
pub const IMPORT_RELOCATIONS: [u32; 2] = [1026, 1025];

/// framehop's unwinder, cache and registers for this architecture.
pub type FramehopUnwinder<D, P> = UnwinderAarch64<D, P>;
pub type FramehopCache<P> = CacheAarch64<P>;
pub type FramehopRegs = UnwindRegsAarch64;

pub fn to_framehop(regs: &Registers) -> FramehopRegs {
    UnwindRegsAarch64::new(regs.lr, regs.sp, regs.fp)
}

/// The caller's registers after framehop unwound to `return_address`.
pub fn from_framehop(return_address: u64, regs: &FramehopRegs) -> Registers {
    Registers { pc: return_address, sp: regs.sp(), fp: regs.fp(), lr: regs.lr() }
}

/// A leaf function's return address stays in the link register, which
/// the table does not model: framehop unwinds every frame.
pub const CFI_REGISTERS: Option<super::CfiRegisters> = None;

/// The ABI code of SFrame sections for this architecture.
pub const SFRAME_ABI: u8 = crate::sframe::ABI_AARCH64_LE;

/// HotSpot's frame layout: not known here. The HotSpot walker's prologue
/// and epilogue decoding is x86-64 code, so the walker is refused on this
/// architecture, and no unverified offsets exist to be used by mistake.
pub const HOTSPOT_FRAME: Option<HotSpotFrameOffsets> = None;
