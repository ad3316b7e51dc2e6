//! Installing and removing our signal handlers. Control plane only.

use crate::chain::PreviousAction;
use std::ffi::{c_int, c_void};
use std::io;

pub type SigInfoHandler = extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void);

fn sigaction(signo: c_int, action: &libc::sigaction) -> io::Result<libc::sigaction> {
    // SAFETY: an all-zero sigaction is valid as an out value.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: valid signal number and pointers.
    if unsafe { libc::sigaction(signo, action, &mut old) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(old)
}

fn action_of(handler: usize, flags: c_int) -> libc::sigaction {
    // SAFETY: all-zero is a valid starting point; the mask is set below.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = handler;
    action.sa_flags = flags;
    // SAFETY: valid pointer to the mask.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    action
}

/// Installs `handler` for `signo`, remembering the previous action in
/// `previous` for forwarding and for [`restore`].
pub fn install(signo: c_int, handler: SigInfoHandler, previous: &PreviousAction) -> io::Result<()> {
    install_masked(signo, handler, previous, Mask::Empty)
}

/// The signals blocked while our handler runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mask {
    /// None but `signo` itself.
    Empty,
    /// Those the handler we chain to blocks, with its alternate-stack flag,
    /// and the profiling signals (HotSpot's mask holds them already; a
    /// foreign handler's may not): a chained handler runs under the mask
    /// it asked for, and no sampling handler nests in it. A sampling handler
    /// nested in a SIGSEGV handler would read memory while SIGSEGV is
    /// blocked, and a fault there is fatal without any handler running
    /// (the kernel resets a blocked synchronous signal to its default).
    Chained,
}

/// [`install`], with the given [`Mask`].
pub fn install_masked(signo: c_int, handler: SigInfoHandler, previous: &PreviousAction, mask: Mask) -> io::Result<()> {
    // SAFETY: a null action only queries.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: valid out pointer.
    if unsafe { libc::sigaction(signo, std::ptr::null(), &mut current) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if current.sa_sigaction == handler as usize {
        return Ok(()); // already ours: keep the original previous action
    }
    // SAFETY: our handler is not installed for `signo` yet.
    unsafe { previous.set(current) };
    let mut action = action_of(handler as usize, libc::SA_SIGINFO | libc::SA_RESTART);
    if mask == Mask::Chained {
        action.sa_mask = current.sa_mask;
        action.sa_flags |= current.sa_flags & libc::SA_ONSTACK;
        // SAFETY: valid pointer to the mask; valid signal numbers.
        unsafe {
            libc::sigaddset(&mut action.sa_mask, libc::SIGPROF);
            libc::sigaddset(&mut action.sa_mask, libc::SIGVTALRM);
        }
    }
    sigaction(signo, &action)?;
    Ok(())
}

/// Blocks the profiling signals (SIGPROF, SIGVTALRM) on the calling thread
/// until dropped, so no sampling handler runs on it in between: used around
/// the release of a thread's per-thread records at thread end.
pub struct SignalBlocker(libc::sigset_t);

impl SignalBlocker {
    pub fn block() -> Self {
        // SAFETY: sigset_t is plain data; the calls only write the sets.
        unsafe {
            let mut block: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut block);
            libc::sigaddset(&mut block, libc::SIGPROF);
            libc::sigaddset(&mut block, libc::SIGVTALRM);
            libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
            Self(old)
        }
    }
}

impl Drop for SignalBlocker {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved by `block` on this same thread.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

/// What to do with signals still pending when a handler is removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pending {
    /// Discard them: passing through SIG_IGN drops pending instances in
    /// every thread (POSIX), so a late sampling signal cannot reach a
    /// default disposition that would terminate the process.
    Discard,
    /// Keep them (for synchronous faults: ignoring SIGSEGV even for an
    /// instant would turn the JVM's own faults fatal).
    Keep,
}

/// Puts the previous action back.
pub fn restore(signo: c_int, handler: SigInfoHandler, previous: &PreviousAction, pending: Pending) -> io::Result<()> {
    // SAFETY: a null action only queries.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: valid out pointer.
    if unsafe { libc::sigaction(signo, std::ptr::null(), &mut current) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if current.sa_sigaction != handler as usize {
        return Ok(()); // someone replaced us; leave their handler alone
    }
    if pending == Pending::Discard {
        sigaction(signo, &action_of(libc::SIG_IGN, 0))?;
    }
    let original = previous.get().unwrap_or_else(|| action_of(libc::SIG_DFL, 0));
    sigaction(signo, &original)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    static OURS: AtomicU32 = AtomicU32::new(0);
    static THEIRS: AtomicU32 = AtomicU32::new(0);

    extern "C" fn ours(signo: c_int, info: *mut libc::siginfo_t, uc: *mut c_void) {
        OURS.fetch_add(1, Ordering::SeqCst);
        PREVIOUS.forward(signo, info, uc);
    }

    extern "C" fn theirs(_: c_int) {
        THEIRS.fetch_add(1, Ordering::SeqCst);
    }

    static PREVIOUS: PreviousAction = PreviousAction::new();

    #[test]
    fn install_forwards_and_restore_puts_the_old_handler_back() {
        // SIGUSR2 is unused by the test harness.
        let signo = libc::SIGUSR2;
        sigaction(signo, &action_of(theirs as extern "C" fn(c_int) as usize, 0)).unwrap();
        install(signo, ours, &PREVIOUS).unwrap();
        install(signo, ours, &PREVIOUS).unwrap(); // idempotent
                                                  // SAFETY: raising a signal with handlers installed.
        unsafe { libc::raise(signo) };
        assert_eq!((OURS.load(Ordering::SeqCst), THEIRS.load(Ordering::SeqCst)), (1, 1));
        restore(signo, ours, &PREVIOUS, Pending::Discard).unwrap();
        // SAFETY: as above.
        unsafe { libc::raise(signo) };
        assert_eq!((OURS.load(Ordering::SeqCst), THEIRS.load(Ordering::SeqCst)), (1, 2));
    }
}
