//! Which SIGPROF signals are ours. Engines register what they arm (perf
//! file descriptors, a cookie in timer payloads); the handler checks each
//! signal against that and forwards everything else to the previous
//! handler.

use super::siginfo::{RawSiginfo, POLL_HUP, POLL_IN, SI_KERNEL, SI_TIMER};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum CpuSource {
    Off = 0,
    Perf = 1,
    Ctimer = 2,
    Itimer = 3,
}

/// The payload our POSIX timers carry in `si_value`.
pub const TIMER_COOKIE: u64 = 0x5052_4f46_494c_4552;

const MAX_FDS: usize = 1 << 20;
static CPU_SOURCE: AtomicU8 = AtomicU8::new(CpuSource::Off as u8);
static PERF_FDS: [AtomicU64; MAX_FDS / 64] = [const { AtomicU64::new(0) }; MAX_FDS / 64];

pub fn set_cpu_source(source: CpuSource) {
    CPU_SOURCE.store(source as u8, Ordering::SeqCst);
}

/// Marks `fd` as one of our perf events; false if it is out of range.
pub fn add_perf_fd(fd: i32) -> bool {
    let Ok(fd) = usize::try_from(fd) else {
        return false;
    };
    if fd >= MAX_FDS {
        return false;
    }
    PERF_FDS[fd / 64].fetch_or(1 << (fd % 64), Ordering::SeqCst);
    true
}

pub fn remove_perf_fd(fd: i32) {
    if let Ok(fd) = usize::try_from(fd) {
        if fd < MAX_FDS {
            PERF_FDS[fd / 64].fetch_and(!(1 << (fd % 64)), Ordering::SeqCst);
        }
    }
}

fn is_perf_fd(fd: i32) -> bool {
    usize::try_from(fd)
        .ok()
        .filter(|&fd| fd < MAX_FDS)
        .is_some_and(|fd| PERF_FDS[fd / 64].load(Ordering::Relaxed) & (1 << (fd % 64)) != 0)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Ours: take a sample of this weight (periods elapsed).
    Ours {
        weight: u32,
    },
    Foreign,
}

/// Signal-safe.
pub fn classify_sigprof(info: &RawSiginfo) -> Origin {
    let source = CPU_SOURCE.load(Ordering::Relaxed);
    let ours = match source {
        s if s == CpuSource::Perf as u8 => (info.code == POLL_IN || info.code == POLL_HUP) && is_perf_fd(info.fd()),
        s if s == CpuSource::Ctimer as u8 => info.code == SI_TIMER && info.timer_value() == TIMER_COOKIE,
        s if s == CpuSource::Itimer as u8 => info.code == SI_KERNEL,
        _ => false,
    };
    if !ours {
        return Origin::Foreign;
    }
    let overrun = if source == CpuSource::Ctimer as u8 { info.timer_overrun().max(0) as u32 } else { 0 };
    Origin::Ours { weight: overrun.saturating_add(1) }
}
