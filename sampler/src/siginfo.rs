//! The parts of `siginfo_t` our engines set, read through a `repr(C)`
//! view of the kernel layout (the libc crate does not expose them).
//!
//! After `si_signo`, `si_errno`, `si_code` (and 4 bytes of padding on
//! 64-bit targets) comes a union at offset 16: for SIGPOLL-style signals
//! `{ long si_band; int si_fd; }`, for POSIX timers
//! `{ int si_tid; int si_overrun; sigval si_sigval; }`.

use std::ffi::c_int;

#[repr(C)]
pub struct RawSiginfo {
    pub signo: c_int,
    pub errno: c_int,
    pub code: c_int,
    _pad: c_int,
    fields: [u64; 14],
}

/// `si_code` values.
pub const SI_KERNEL: c_int = 0x80;
pub const SI_TIMER: c_int = -2;
pub const SI_QUEUE: c_int = -1;
pub const POLL_IN: c_int = 1;
pub const POLL_HUP: c_int = 6;

impl RawSiginfo {
    /// `si_fd` of an I/O (fasync) signal.
    pub fn fd(&self) -> c_int {
        self.fields[1] as u32 as c_int
    }

    /// `si_overrun` of a POSIX timer signal.
    pub fn timer_overrun(&self) -> c_int {
        (self.fields[0] >> 32) as u32 as c_int
    }

    /// `si_value` (as a pointer-sized integer) of a POSIX timer signal or a
    /// queued signal (`sigqueue`, `rt_tgsigqueueinfo`).
    pub fn timer_value(&self) -> u64 {
        self.fields[1]
    }

    /// `si_pid` of a queued signal.
    pub fn sender_pid(&self) -> c_int {
        self.fields[0] as u32 as c_int
    }

    /// A queued signal (`SI_QUEUE`) from process `pid` carrying `value`.
    pub fn queued(signo: c_int, pid: c_int, uid: u32, value: u64) -> Self {
        let mut fields = [0u64; 14];
        fields[0] = u64::from(pid as u32) | u64::from(uid) << 32;
        fields[1] = value;
        Self { signo, errno: 0, code: SI_QUEUE, _pad: 0, fields }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_libc() {
        assert_eq!(std::mem::size_of::<RawSiginfo>(), std::mem::size_of::<libc::siginfo_t>());
        // SAFETY: siginfo_t is plain data; all-zero is a valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        info.si_code = SI_TIMER;
        // SAFETY: same size and a compatible prefix.
        let view = unsafe { &*(&info as *const libc::siginfo_t).cast::<RawSiginfo>() };
        assert_eq!(view.code, SI_TIMER);
    }
}
