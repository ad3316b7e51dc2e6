//! Reading memory that may not be mapped, from a signal handler.
//!
//! `safe_load` is [`arch::guarded_load`], an assembly routine whose load is
//! the only instruction that can fault. Our SIGSEGV/SIGBUS handler
//! ([`on_fault`]) recognises a fault at exactly that address and resumes at
//! a second entry that reports failure; every other fault goes to the
//! previous handler (the JVM's, which relies on SIGSEGV for implicit null
//! checks and more).
//! The handler is installed for every session (by `profiler::build_sampler`,
//! removed by `disarm` at stop), after the JVM has installed its own
//! (HotSpot refuses to start over a foreign handler).

use super::chain::PreviousAction;
use std::ffi::{c_int, c_void};
use unwind::arch;

/// The 8 bytes at `address`, or `None` if reading them faulted. Requires
/// [`on_fault`] to be installed for SIGSEGV and SIGBUS, or `address` to be
/// known-readable. Signal-safe.
#[inline]
pub fn safe_load(address: u64) -> Option<u64> {
    if address < 4096 || !address.is_multiple_of(8) {
        return None;
    }
    // SAFETY: a fault at the load is redirected by `on_fault` (installed
    // per this function's contract) or cannot happen.
    unsafe { arch::guarded_load(address) }
}

/// VM memory read through [`safe_load`], for the HotSpot walker.
pub struct ProcessMemory;

impl hotspot::memory::VmMemory for ProcessMemory {
    #[inline]
    fn load(&self, address: u64) -> Option<u64> {
        safe_load(address)
    }
}

pub static PREVIOUS_SIGSEGV: PreviousAction = PreviousAction::new();
pub static PREVIOUS_SIGBUS: PreviousAction = PreviousAction::new();

/// Moves a context stopped at the fault site to the resume site.
fn redirect(ucontext: *mut c_void) -> bool {
    if ucontext.is_null() {
        return false;
    }
    // SAFETY: the kernel passes a valid ucontext_t to SA_SIGINFO handlers.
    let context = unsafe { &mut *ucontext.cast::<libc::ucontext_t>() };
    if arch::registers(context).pc != arch::fault_site() {
        return false;
    }
    arch::set_pc(context, arch::resume_site());
    true
}

/// Installed for SIGSEGV and SIGBUS while a session is built or runs.
pub extern "C" fn on_fault(signo: c_int, info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    if redirect(ucontext) {
        return;
    }
    let previous = if signo == libc::SIGBUS { &PREVIOUS_SIGBUS } else { &PREVIOUS_SIGSEGV };
    if !previous.forward_or_default(signo, info, ucontext) {
        // No handler before us: restore the default action and return, so
        // the faulting instruction runs again and the fault is fatal as it
        // would have been without the profiler.
        // SAFETY: resetting a disposition is async-signal-safe.
        unsafe { libc::signal(signo, libc::SIG_DFL) };
    }
}

/// Control plane: installs [`on_fault`] for SIGSEGV and SIGBUS (after the
/// JVM's own handlers, which it chains to).
pub fn install_fault_handlers() -> std::io::Result<()> {
    use crate::engine::signals::install;
    install(libc::SIGSEGV, on_fault, &PREVIOUS_SIGSEGV)?;
    install(libc::SIGBUS, on_fault, &PREVIOUS_SIGBUS)
}

/// Control plane: puts the previous SIGSEGV and SIGBUS handlers back.
/// Call only once no sampling handler can run.
pub fn restore_fault_handlers() {
    use crate::engine::signals::{restore, Pending};
    let _ = restore(libc::SIGSEGV, on_fault, &PREVIOUS_SIGSEGV, Pending::Keep);
    let _ = restore(libc::SIGBUS, on_fault, &PREVIOUS_SIGBUS, Pending::Keep);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_mapped_memory_and_survives_unreadable_memory() {
        install_fault_handlers().unwrap();
        let value = 0x1122_3344_5566_7788u64;
        assert_eq!(safe_load(&value as *const u64 as u64), Some(value));
        // A PROT_NONE page that stays reserved while we read it: reading it
        // faults. (An unmapped page would not do: other test threads may map
        // something there in between.)
        // SAFETY: an anonymous PROT_NONE mapping of our own.
        let page = unsafe {
            libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        assert_ne!(page, libc::MAP_FAILED);
        assert_eq!(safe_load(page as u64), None);
        assert_eq!(safe_load(page as u64 + 8), None);
        // SAFETY: the page mapped above, not used after this.
        unsafe { libc::munmap(page, 4096) };
        assert_eq!(safe_load(0), None);
        assert_eq!(safe_load(&value as *const u64 as u64 + 1), None, "misaligned");
        restore_fault_handlers();
    }
}
