//! What a thread was doing when a wall-clock signal interrupted it, from
//! two signal-safe observations:
//!
//! - whether it was inside a system call ([`unwind::arch::in_syscall`]);
//! - its innermost Java frame: a blocked thread in `Thread.sleep`,
//!   `Unsafe.park` or `Object.wait` is sleeping, parked or waiting; any other
//!   Java `native` method is "in native".
//!
//! The blocking methods' jmethodIDs are found by the control plane at
//! `start` ([`BlockingMethods`], part of the published session); the
//! handler compares ids only.

use super::native::registers;
use super::safe_read::safe_load;
use frames::ThreadState;
use frames::{Frame, BCI_NATIVE_METHOD};
use std::ffi::c_void;
use unwind::arch;

const MAX_BLOCKING: usize = 16;

/// Which Java methods block, by (class signature, method name). Names cover
/// JDK 11 to 25 (`sleep` became `sleep0`/`sleepNanos0`, `wait` `wait0`).
pub const BLOCKING_METHODS: &[(&str, &str, ThreadState)] = &[
    ("Ljava/lang/Thread;", "sleep", ThreadState::Sleeping),
    ("Ljava/lang/Thread;", "sleep0", ThreadState::Sleeping),
    ("Ljava/lang/Thread;", "sleepNanos0", ThreadState::Sleeping),
    ("Ljdk/internal/misc/Unsafe;", "park", ThreadState::Parked),
    ("Lsun/misc/Unsafe;", "park", ThreadState::Parked),
    ("Ljava/lang/Object;", "wait", ThreadState::Waiting),
    ("Ljava/lang/Object;", "wait0", ThreadState::Waiting),
];

/// The jmethodIDs of the blocking methods found at `start` and the state
/// each stands for (id 0: unused entry).
#[derive(Clone, Copy, Debug)]
pub struct BlockingMethods([(u64, ThreadState); MAX_BLOCKING]);

impl Default for BlockingMethods {
    /// No blocking method known (without wall-clock sampling, or a JNIEnv
    /// at start).
    fn default() -> Self {
        Self::new(&[])
    }
}

impl BlockingMethods {
    /// At most 16 methods are kept.
    pub fn new(methods: &[(u64, ThreadState)]) -> Self {
        let mut table = [(0, ThreadState::Unknown); MAX_BLOCKING];
        for (entry, method) in table.iter_mut().zip(methods) {
            *entry = *method;
        }
        Self(table)
    }

    fn state_of(&self, method: u64) -> Option<ThreadState> {
        self.0.iter().find(|(id, _)| method != 0 && *id == method).map(|(_, state)| *state)
    }
}

/// The byte at `address`, through the fault-safe load.
fn byte_at(address: u64) -> Option<u8> {
    let word = safe_load(address & !7)?;
    Some((word >> ((address & 7) * 8)) as u8)
}

/// Whether the interrupted context was inside a system call.
pub fn in_syscall(ucontext: *mut c_void) -> bool {
    registers(ucontext).is_some_and(|r| arch::in_syscall(r.pc, byte_at))
}

/// The state of a thread from whether it was in a system call and its
/// walked stack (innermost first). Signal-safe.
pub fn classify(blocking: &BlockingMethods, in_syscall: bool, frames: &[Frame]) -> ThreadState {
    let top_java = frames.iter().find(|f| f.kind.is_java());
    match (in_syscall, top_java) {
        (true, Some(frame)) => blocking.state_of(frame.method).unwrap_or(if frame.bci == BCI_NATIVE_METHOD {
            ThreadState::InNative
        } else {
            ThreadState::Syscall
        }),
        (true, None) => ThreadState::Syscall,
        (false, Some(frame)) if frame.bci == BCI_NATIVE_METHOD => ThreadState::InNative,
        (false, _) => ThreadState::Runnable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_from_syscall_and_top_java_frame() {
        let blocking = BlockingMethods::new(&[(0x5000, ThreadState::Sleeping), (0x6000, ThreadState::Parked)]);
        let classify = |in_syscall, frames: &[Frame]| classify(&blocking, in_syscall, frames);
        let sleeping = [Frame::native(0x1234), Frame::java(0x5000, BCI_NATIVE_METHOD), Frame::java(0x7000, 3)];
        assert_eq!(classify(true, &sleeping), ThreadState::Sleeping);
        assert_eq!(classify(true, &[Frame::java(0x6000, BCI_NATIVE_METHOD)]), ThreadState::Parked);
        assert_eq!(classify(true, &[Frame::java(0x8000, BCI_NATIVE_METHOD)]), ThreadState::InNative);
        assert_eq!(classify(true, &[Frame::java(0x8000, 12)]), ThreadState::Syscall);
        assert_eq!(classify(true, &[Frame::native(0x1)]), ThreadState::Syscall);
        assert_eq!(classify(false, &[Frame::java(0x8000, BCI_NATIVE_METHOD)]), ThreadState::InNative);
        assert_eq!(classify(false, &[Frame::java(0x7000, 5)]), ThreadState::Runnable);
        assert_eq!(classify(false, &[]), ThreadState::Runnable);
    }
}
