//! Which SIGPROF and SIGVTALRM signals are ours. Engines register what they
//! arm (the CPU source, perf file descriptors, a cookie in timer payloads)
//! in the session's [`Origins`]; the handler checks each signal against it
//! and forwards everything else to the previous handler. Both
//! registrations also name the target thread, which saves the handler a
//! `gettid` system call.

use super::kernel::Ring;
use super::siginfo::{RawSiginfo, POLL_HUP, POLL_IN, SI_KERNEL, SI_QUEUE, SI_TIMER};
use crate::storage::mapped::MappedArray;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum CpuSource {
    Off = 0,
    Perf = 1,
    Ctimer = 2,
    Itimer = 3,
}

/// The high half of the payload our POSIX timers carry in `si_value`; the
/// low half is the target thread's id.
const TIMER_COOKIE: u64 = 0x5052_4f46 << 32;

pub fn timer_payload(tid: u32) -> u64 {
    TIMER_COOKIE | u64::from(tid)
}

/// The high half of the payload of our wall-clock signals; the low half is
/// the sample's weight.
const WALL_COOKIE: u64 = 0x5741_4c4c << 32;

/// The `si_value` of a wall-clock signal of `weight`.
pub fn wall_payload(weight: u32) -> u64 {
    WALL_COOKIE | u64::from(weight)
}

/// The payload of the overhead governor's calibration signals
/// (`governor::signal_cost`: its timer's, and those queued by this
/// process), which no session samples.
pub const CALIBRATION_PAYLOAD: u64 = 0x4341_4c49 << 32;

/// Whether `info` is a calibration signal: the calibration timer's, or
/// one queued by this process. Signal-safe.
pub fn is_calibration(info: &RawSiginfo) -> bool {
    let sent = info.code == SI_TIMER || (info.code == SI_QUEUE && info.sender_pid() == std::process::id() as i32);
    sent && info.timer_value() == CALIBRATION_PAYLOAD
}

/// File descriptor numbers the perf table covers.
const MAX_FDS: usize = 1 << 20;

/// What makes a signal ours, for one session. The CPU source and the perf
/// table change while the session runs (engine fallbacks, threads coming
/// and going), hence atomics; everything else is fixed at creation.
pub struct Origins {
    /// This process, as the sender our wall-clock signals carry.
    own_pid: i32,
    /// The CPU engine whose SIGPROF signals are ours ([`CpuSource`]).
    cpu_source: AtomicU8,
    /// For each of our perf file descriptors, the thread it samples (0: not
    /// ours). 4 MiB of address space, resident only where touched.
    perf_fd_tids: MappedArray<AtomicU32>,
    /// For each of our perf file descriptors whose counter records kernel
    /// call chains, the first page of its ring (0: none; see
    /// [`super::kernel`]). 8 MiB of address space, resident where touched.
    perf_fd_rings: MappedArray<AtomicU64>,
    /// The rings' page and data sizes, the same for every ring.
    ring_page: AtomicUsize,
    ring_data: AtomicUsize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Ours: take a sample of this weight (periods elapsed), on `tid` when
    /// the engine told us which thread it targets, with the kernel frames
    /// `ring` holds if the counter records them.
    Ours {
        weight: u32,
        tid: Option<u32>,
        ring: Option<Ring>,
    },
    Foreign,
}

impl Origins {
    /// No CPU source yet, no perf descriptor. Not signal-safe (maps the
    /// perf table).
    pub fn new() -> std::io::Result<Self> {
        Ok(Self {
            own_pid: std::process::id() as i32,
            cpu_source: AtomicU8::new(CpuSource::Off as u8),
            perf_fd_tids: MappedArray::new(MAX_FDS)?,
            perf_fd_rings: MappedArray::new(MAX_FDS)?,
            ring_page: AtomicUsize::new(0),
            ring_data: AtomicUsize::new(0),
        })
    }

    pub fn set_cpu_source(&self, source: CpuSource) {
        self.cpu_source.store(source as u8, Ordering::SeqCst);
    }

    /// The CPU engine whose signals are ours now.
    pub fn cpu_source(&self) -> CpuSource {
        match self.cpu_source.load(Ordering::SeqCst) {
            1 => CpuSource::Perf,
            2 => CpuSource::Ctimer,
            3 => CpuSource::Itimer,
            _ => CpuSource::Off,
        }
    }

    fn perf_slot(&self, fd: i32) -> Option<&AtomicU32> {
        usize::try_from(fd).ok().filter(|&fd| fd < self.perf_fd_tids.len()).map(|fd| self.perf_fd_tids.get(fd))
    }

    /// Marks `fd` as our perf event sampling `tid`; false if out of range.
    pub fn add_perf_fd(&self, fd: i32, tid: u32) -> bool {
        self.perf_slot(fd).map(|slot| slot.store(tid, Ordering::SeqCst)).is_some()
    }

    pub fn remove_perf_fd(&self, fd: i32) {
        if let Some(slot) = self.perf_slot(fd) {
            slot.store(0, Ordering::SeqCst);
        }
        if let Some(slot) = self.ring_slot(fd) {
            slot.store(0, Ordering::SeqCst);
        }
    }

    fn ring_slot(&self, fd: i32) -> Option<&AtomicU64> {
        usize::try_from(fd).ok().filter(|&fd| fd < self.perf_fd_rings.len()).map(|fd| self.perf_fd_rings.get(fd))
    }

    /// Marks `ring` as the kernel call chains of our perf event `fd`
    /// (registered with [`Self::add_perf_fd`]); false if out of range.
    pub fn add_perf_ring(&self, fd: i32, ring: Ring) -> bool {
        self.ring_page.store(ring.page, Ordering::SeqCst);
        self.ring_data.store(ring.data_size, Ordering::SeqCst);
        self.ring_slot(fd).map(|slot| slot.store(ring.base as u64, Ordering::SeqCst)).is_some()
    }

    /// The ring of perf event `fd`, if it has one. Signal-safe.
    fn perf_ring(&self, fd: i32) -> Option<Ring> {
        let base = self.ring_slot(fd)?.load(Ordering::Acquire);
        (base != 0).then(|| Ring {
            base: base as usize,
            page: self.ring_page.load(Ordering::Relaxed),
            data_size: self.ring_data.load(Ordering::Relaxed),
        })
    }

    /// Signal-safe.
    pub fn classify_sigprof(&self, info: &RawSiginfo) -> Origin {
        let source = self.cpu_source.load(Ordering::Relaxed);
        if source == CpuSource::Perf as u8 && (info.code == POLL_IN || info.code == POLL_HUP) {
            return match self.perf_slot(info.fd()).map(|slot| slot.load(Ordering::Relaxed)) {
                Some(tid) if tid != 0 => Origin::Ours { weight: 1, tid: Some(tid), ring: self.perf_ring(info.fd()) },
                _ => Origin::Foreign,
            };
        }
        if source == CpuSource::Ctimer as u8 && info.code == SI_TIMER && info.timer_value() >> 32 == TIMER_COOKIE >> 32
        {
            let weight = (info.timer_overrun().max(0) as u32).saturating_add(1);
            return Origin::Ours { weight, tid: Some(info.timer_value() as u32), ring: None };
        }
        if source == CpuSource::Itimer as u8 && info.code == SI_KERNEL {
            return Origin::Ours { weight: 1, tid: None, ring: None };
        }
        Origin::Foreign
    }

    /// The weight of a wall-clock signal if it is ours. Signal-safe.
    pub fn classify_sigvtalrm(&self, info: &RawSiginfo) -> Option<u32> {
        let ours =
            info.code == SI_QUEUE && info.timer_value() >> 32 == WALL_COOKIE >> 32 && info.sender_pid() == self.own_pid;
        ours.then(|| (info.timer_value() as u32).max(1))
    }
}
