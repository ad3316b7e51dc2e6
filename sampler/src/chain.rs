//! The handler that was installed before ours, for forwarding signals that
//! are not ours. Written by the control plane only while our handler is
//! not installed for that signal; read by our handler.

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

pub struct PreviousAction {
    valid: AtomicBool,
    action: UnsafeCell<libc::sigaction>,
}

// SAFETY: `action` is written only while `valid` is false and our handler
// is not installed, and read only after `valid` was set (SeqCst).
unsafe impl Sync for PreviousAction {}

impl PreviousAction {
    pub const fn new() -> Self {
        // SAFETY: an all-zero sigaction is a valid value (SIG_DFL, empty mask).
        Self { valid: AtomicBool::new(false), action: UnsafeCell::new(unsafe { std::mem::zeroed() }) }
    }

    /// Control plane: records the action our handler replaced.
    ///
    /// # Safety
    /// Our handler must not be installed for the signal while this runs.
    pub unsafe fn set(&self, action: libc::sigaction) {
        self.valid.store(false, Ordering::SeqCst);
        // SAFETY: per the contract, nobody reads concurrently.
        unsafe { *self.action.get() = action };
        self.valid.store(true, Ordering::SeqCst);
    }

    pub fn get(&self) -> Option<libc::sigaction> {
        // SAFETY: read after `valid` was published.
        self.valid.load(Ordering::SeqCst).then(|| unsafe { *self.action.get() })
    }

    /// Signal-safe: passes the signal to the previous handler. A default or
    /// ignored disposition drops it: the default for SIGPROF and SIGVTALRM
    /// would terminate the JVM over a signal meant for a profiler.
    pub fn forward(&self, signo: c_int, info: *mut libc::siginfo_t, ucontext: *mut c_void) {
        self.forward_or_default(signo, info, ucontext);
    }

    /// Signal-safe: calls the previous handler if there was one (true), or
    /// returns false when the previous disposition was default or ignore.
    pub fn forward_or_default(&self, signo: c_int, info: *mut libc::siginfo_t, ucontext: *mut c_void) -> bool {
        let Some(action) = self.get() else { return false };
        let handler = action.sa_sigaction;
        if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
            return false;
        }
        if action.sa_flags & libc::SA_SIGINFO != 0 {
            // SAFETY: an SA_SIGINFO handler has this signature.
            let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) = unsafe { std::mem::transmute(handler) };
            f(signo, info, ucontext);
        } else {
            // SAFETY: a plain handler takes the signal number only.
            let f: extern "C" fn(c_int) = unsafe { std::mem::transmute(handler) };
            f(signo);
        }
        true
    }
}

impl Default for PreviousAction {
    fn default() -> Self {
        Self::new()
    }
}

/// What each signal the agent handles did before: a foreign signal is
/// forwarded there. Process-wide: a handler the agent installed may still
/// run after its session (a signal in flight when it was restored, or one
/// that another library's handler chains to), and a restore puts back
/// only what is still ours.
pub struct Previous {
    pub sigprof: PreviousAction,
    pub sigvtalrm: PreviousAction,
    /// What SIGPROF did before the governor's calibration handler replaced
    /// it for the few milliseconds of its measurement.
    pub calibration: PreviousAction,
    /// The fault handlers `safe_read` chains to.
    pub sigsegv: PreviousAction,
    pub sigbus: PreviousAction,
}

pub static PREVIOUS: Previous = Previous {
    sigprof: PreviousAction::new(),
    sigvtalrm: PreviousAction::new(),
    calibration: PreviousAction::new(),
    sigsegv: PreviousAction::new(),
    sigbus: PreviousAction::new(),
};
