//! Everything that differs between the instruction sets we run on, in one
//! place: the registers of a signal's `ucontext`, the fault-recoverable
//! load, the system-call instruction, framehop's unwinder types, the
//! registers of compiled DWARF rules and the HotSpot frame-layout
//! constants. One part per architecture, with the
//! same items; any other target fails to compile here.

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod x86_64;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub use x86_64::*;

#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
mod aarch64;
#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
pub use aarch64::*;

#[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
compile_error!("the profiler supports Linux on x86-64 and AArch64 only");

/// Word offsets in HotSpot's frames that VMStructs exports late or not at
/// all; each part's `HOTSPOT_FRAME` has them where the HotSpot walker
/// knows the architecture's frames, and is `None` elsewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HotSpotFrameOffsets {
    /// From an interpreted frame's fp: its `Method*`, its bcp and its
    /// sender's sp.
    pub interpreter_method: i64,
    pub interpreter_bcp: i64,
    pub interpreter_sender_sp: i64,
    /// From an entry frame's fp: its JavaCallWrapper.
    pub entry_call_wrapper: i64,
}

/// The DWARF registers compiled unwind rules ([`crate::rules`]) read: the
/// CFA's bases (stack and frame pointer), the frame pointer's rule, and
/// the return address, which must be saved at `ra_offset` from the CFA.
/// Each part's `CFI_REGISTERS` is `None` where rules are not compiled
/// (framehop unwinds every frame there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CfiRegisters {
    pub sp: gimli::Register,
    pub fp: gimli::Register,
    pub ra: gimli::Register,
    pub ra_offset: i64,
}

extern "C" {
    /// Loads the 8 bytes at `address` into `*out` and returns 1; its load
    /// is the only instruction that can fault, at [`fault_site`]. Defined
    /// by the architecture part.
    fn profiler_safe_load(address: u64, out: *mut u64) -> u32;
    static profiler_safe_load_fault_site: u8;
    static profiler_safe_load_resume: u8;
}

/// The address of the load in [`guarded_load`]: a SIGSEGV or SIGBUS there
/// must be answered by moving the pc to [`resume_site`] (with
/// [`set_pc`]), which makes the load return `false`.
pub fn fault_site() -> u64 {
    // Code labels: their addresses are taken, never read.
    std::ptr::addr_of!(profiler_safe_load_fault_site) as u64
}

pub fn resume_site() -> u64 {
    std::ptr::addr_of!(profiler_safe_load_resume) as u64
}

/// The 8 bytes at `address`, or `None` if the load faulted. Signal-safe.
///
/// # Safety
/// A fault at [`fault_site`] must be redirected to [`resume_site`] by the
/// thread's SIGSEGV and SIGBUS handlers, or `address` must be readable.
#[inline]
pub unsafe fn guarded_load(address: u64) -> Option<u64> {
    let mut value = 0u64;
    // SAFETY: the routine only reads `address` (a fault resumes at the
    // failure exit, per the contract) and writes `value`.
    (unsafe { profiler_safe_load(address, &mut value) } == 1).then_some(value)
}

/// Whether a thread interrupted at `pc` was inside a system call: the
/// kernel delivers a signal with the pc just after the system-call
/// instruction (the call returned EINTR) or on it (the call will be
/// restarted, SA_RESTART). `byte_at` must refuse unreadable addresses.
pub fn in_syscall(pc: u64, byte_at: impl Fn(u64) -> Option<u8>) -> bool {
    let syscall_at = |address: u64| {
        SYSCALL_INSTRUCTION.iter().zip(0u64..).all(|(&byte, i)| address.checked_add(i).and_then(&byte_at) == Some(byte))
    };
    let len = SYSCALL_INSTRUCTION.len() as u64;
    syscall_at(pc) || (pc > len && syscall_at(pc - len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_the_syscall_instruction_at_and_before_the_pc() {
        let base = 0x1000u64;
        let len = SYSCALL_INSTRUCTION.len() as u64;
        let mut code = [0xAAu8; 16];
        code[4..4 + SYSCALL_INSTRUCTION.len()].copy_from_slice(SYSCALL_INSTRUCTION);
        let byte_at = |address: u64| code.get(usize::try_from(address.checked_sub(base)?).ok()?).copied();
        assert!(in_syscall(base + 4, byte_at), "on the instruction: restarted");
        assert!(in_syscall(base + 4 + len, byte_at), "just after it: interrupted");
        assert!(!in_syscall(base + 5, byte_at));
        assert!(!in_syscall(base + 4 + len + 1, byte_at));
        assert!(!in_syscall(base + 3, byte_at));
        assert!(!in_syscall(0x10, byte_at), "unreadable");
    }

    #[test]
    fn the_guarded_load_reads_readable_memory() {
        let value = 0x1122_3344_5566_7788u64;
        // SAFETY: the address of a live local is readable.
        assert_eq!(unsafe { guarded_load(&value as *const u64 as u64) }, Some(value));
        assert_ne!(fault_site(), resume_site());
    }
}
