//! A sampled thread's state: what a wall-clock sample saw the thread
//! doing, decided in the handler and named in the recording.

/// A sampled thread's state, as named in the `jdk.types.ThreadState` pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ThreadState {
    Runnable = 0,
    Sleeping = 1,
    Waiting = 2,
    TimedWaiting = 3,
    Parked = 4,
    TimedParked = 5,
    Blocked = 6,
    InNative = 7,
    Syscall = 8,
    Unknown = 9,
    /// A CPU sample in the JDK dialect (async-profiler's name).
    Default = 10,
}

impl ThreadState {
    pub const ALL: [ThreadState; 11] = [
        ThreadState::Runnable,
        ThreadState::Sleeping,
        ThreadState::Waiting,
        ThreadState::TimedWaiting,
        ThreadState::Parked,
        ThreadState::TimedParked,
        ThreadState::Blocked,
        ThreadState::InNative,
        ThreadState::Syscall,
        ThreadState::Unknown,
        ThreadState::Default,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ThreadState::Runnable => "STATE_RUNNABLE",
            ThreadState::Sleeping => "STATE_SLEEPING",
            ThreadState::Waiting => "STATE_IN_OBJECT_WAIT",
            ThreadState::TimedWaiting => "STATE_IN_OBJECT_WAIT_TIMED",
            ThreadState::Parked => "STATE_PARKED",
            ThreadState::TimedParked => "STATE_PARKED_TIMED",
            ThreadState::Blocked => "STATE_BLOCKED_ON_MONITOR_ENTER",
            ThreadState::InNative => "STATE_IN_NATIVE",
            ThreadState::Syscall => "STATE_SYSCALL",
            ThreadState::Unknown => "STATE_UNKNOWN",
            ThreadState::Default => "STATE_DEFAULT",
        }
    }

    pub fn key(self) -> u64 {
        self as u64 + 1
    }

    pub fn from_u8(value: u8) -> ThreadState {
        ThreadState::ALL.get(usize::from(value)).copied().unwrap_or(ThreadState::Unknown)
    }
}
