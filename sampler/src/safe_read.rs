//! Reading memory that may not be mapped, from a signal handler.
//!
//! `safe_load` is [`arch::guarded_load`], an assembly routine whose load is
//! the only instruction that can fault. Our SIGSEGV/SIGBUS handler
//! ([`on_fault`]) recognises a fault at exactly that address and resumes at
//! a second entry that reports failure; every other fault goes to the
//! previous handler (the JVM's, which relies on SIGSEGV for implicit null
//! checks and more).
//! The handler is installed for every session (by `session::build_sampler` in the agent,
//! removed by `disarm` at stop), after the JVM has installed its own
//! (HotSpot refuses to start over a foreign handler).

use crate::chain::PREVIOUS;
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

/// Whether the code a sampling handler interrupted (its `ucontext`) had
/// SIGSEGV or SIGBUS blocked, as inside another SIGSEGV handler: then a
/// fault in [`safe_load`] would kill the process before any handler ran, so
/// nothing may be read. False for a null context. Holds for handlers that
/// do not block those signals themselves (ours). Signal-safe.
pub fn faults_blocked(ucontext: *const c_void) -> bool {
    if ucontext.is_null() {
        return false;
    }
    // SAFETY: the kernel passes a valid ucontext_t to SA_SIGINFO handlers;
    // `sigismember` only reads the set.
    unsafe {
        let mask = &(*ucontext.cast::<libc::ucontext_t>()).uc_sigmask;
        libc::sigismember(mask, libc::SIGSEGV) == 1 || libc::sigismember(mask, libc::SIGBUS) == 1
    }
}

/// VM memory read through [`safe_load`], for the HotSpot walker.
pub struct ProcessMemory;

impl hotspot::memory::VmMemory for ProcessMemory {
    #[inline]
    fn load(&self, address: u64) -> Option<u64> {
        safe_load(address)
    }
}

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
    let previous = if signo == libc::SIGBUS { &PREVIOUS.sigbus } else { &PREVIOUS.sigsegv };
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
    use crate::signals::{install_masked, restore, Mask, Pending};
    install_masked(libc::SIGSEGV, on_fault, &PREVIOUS.sigsegv, Mask::Chained)?;
    install_masked(libc::SIGBUS, on_fault, &PREVIOUS.sigbus, Mask::Chained).inspect_err(|_| {
        // Both or neither: SIGSEGV's goes back if SIGBUS's cannot be set.
        let _ = restore(libc::SIGSEGV, on_fault, &PREVIOUS.sigsegv, Pending::Keep);
    })
}

/// Control plane: puts the previous SIGSEGV and SIGBUS handlers back.
/// Call only once no sampling handler can run.
pub fn restore_fault_handlers() {
    use crate::signals::{restore, Pending};
    let _ = restore(libc::SIGSEGV, on_fault, &PREVIOUS.sigsegv, Pending::Keep);
    let _ = restore(libc::SIGBUS, on_fault, &PREVIOUS.sigbus, Pending::Keep);
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

    #[test]
    fn faults_blocked_reads_the_interrupted_mask() {
        // SAFETY: an all-zero ucontext_t is plain data; the calls only
        // write its mask.
        let mut context: libc::ucontext_t = unsafe { std::mem::zeroed() };
        let pointer = &context as *const libc::ucontext_t as *const c_void;
        assert!(!faults_blocked(pointer));
        assert!(!faults_blocked(std::ptr::null()));
        for signo in [libc::SIGSEGV, libc::SIGBUS] {
            // SAFETY: as above.
            unsafe { libc::sigemptyset(&mut context.uc_sigmask) };
            // SAFETY: as above.
            unsafe { libc::sigaddset(&mut context.uc_sigmask, signo) };
            let pointer = &context as *const libc::ucontext_t as *const c_void;
            assert!(faults_blocked(pointer), "{signo}");
        }
    }

    use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

    static FAULT_PAGE: AtomicUsize = AtomicUsize::new(0);
    static PROBE_PAGE: AtomicUsize = AtomicUsize::new(0);
    /// 0: the sampling handler did not run; 1: its read failed safely.
    static PROBED: AtomicU8 = AtomicU8::new(0);

    /// Stands for the JVM's SIGSEGV handler: a sampling signal arrives
    /// while it runs, then it repairs the fault.
    extern "C" fn vm_like(_: c_int, _: *mut libc::siginfo_t, _: *mut c_void) {
        // SAFETY: signals this thread, and opens the page mapped by the test.
        unsafe {
            libc::syscall(libc::SYS_tgkill, libc::getpid(), libc::gettid(), libc::SIGPROF);
            libc::mprotect(FAULT_PAGE.load(Ordering::SeqCst) as *mut c_void, 4096, libc::PROT_READ);
        }
    }

    /// Stands for a sampling handler whose walk reads unmapped memory.
    extern "C" fn sampler_like(_: c_int, _: *mut libc::siginfo_t, _: *mut c_void) {
        if safe_load(PROBE_PAGE.load(Ordering::SeqCst) as u64).is_none() {
            PROBED.store(1, Ordering::SeqCst);
        }
    }

    fn protected_page() -> usize {
        // SAFETY: an anonymous PROT_NONE mapping of our own.
        let page = unsafe {
            libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        assert_ne!(page, libc::MAP_FAILED);
        page as usize
    }

    /// In a child process (a fault here would kill the test runner): a
    /// sampling signal raised inside the handler we chain to must wait until
    /// ours returns. Delivered at once, its guarded read would fault while
    /// SIGSEGV is blocked, and the kernel kills a process for that without
    /// running any handler: the JVM died so, with no hs_err file.
    #[test]
    fn a_sampling_signal_waits_for_the_chained_fault_handler() {
        const CHILD: &str = "SAFE_READ_NESTING_CHILD";
        if std::env::var_os(CHILD).is_none() {
            let output = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "safe_read::tests::a_sampling_signal_waits_for_the_chained_fault_handler"])
                .args(["--test-threads=1", "--nocapture"])
                .env(CHILD, "1")
                .output()
                .unwrap();
            let log = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
            assert!(output.status.success(), "{:?}\n{log}", output.status);
            assert!(log.contains("1 passed"), "{log}");
            return;
        }
        FAULT_PAGE.store(protected_page(), Ordering::SeqCst);
        PROBE_PAGE.store(protected_page(), Ordering::SeqCst);
        let set = |signo, handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void)| {
            // SAFETY: installs a handler of this test's own in the child.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = handler as usize;
                action.sa_flags = libc::SA_SIGINFO;
                libc::sigemptyset(&mut action.sa_mask);
                assert_eq!(libc::sigaction(signo, &action, std::ptr::null_mut()), 0);
            }
        };
        set(libc::SIGSEGV, vm_like);
        set(libc::SIGPROF, sampler_like);
        install_fault_handlers().unwrap();
        // SAFETY: faults once; `vm_like` makes the page readable (zeros).
        let value = unsafe { std::ptr::read_volatile(FAULT_PAGE.load(Ordering::SeqCst) as *const u64) };
        assert_eq!((value, PROBED.load(Ordering::SeqCst)), (0, 1));
        restore_fault_handlers();
    }
}
