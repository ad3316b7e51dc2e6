//! The calling OS thread's kernel id, for handlers and control plane alike.

/// The calling thread's kernel id. Signal-safe.
#[inline]
pub fn current_tid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}
