//! Striped sample buffers: where a signal handler leaves one fixed-size
//! record per sample for the dump side to encode later.
//!
//! A sampler takes a stripe with `try_lock` (its thread id picks the first
//! stripe to try, then the next two) and never waits: if all three are busy
//! or the stripe's buffer is full, the sample is counted as dropped. A
//! stripe also owns scratch space for stack walking, so the handler needs
//! no stack space proportional to `jstackdepth`.
//!
//! The drain side swaps a stripe's buffer for an empty one of the same
//! capacity while holding the lock for just that swap. Drained buffers are
//! kept as spares, so after the first cycle draining allocates nothing.

use super::call_traces::TraceId;
use super::mapped::MappedArray;
use crate::counters::{self, Counter};
use frames::Frame;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};

/// Which engine took a sample.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum SampleKind {
    /// CPU time (SIGPROF): a `jdk.ExecutionSample` (`datadog.ExecutionSample`).
    #[default]
    Cpu = 0,
    /// Wall clock (SIGVTALRM): a `profiler.WallClockSample`
    /// (`datadog.MethodSample`).
    Wall = 1,
    /// A sampled heap allocation (JVMTI `SampledObjectAlloc`): a
    /// `jdk.ObjectAllocationSample` (`datadog.ObjectSample`).
    Alloc = 2,
    /// A contended monitor wait (JVMTI `MonitorContendedEntered`): a
    /// `jdk.JavaMonitorEnter`.
    Lock = 3,
    /// A wait parked on a `java.util.concurrent` lock (the `Unsafe.park`
    /// hook): a `jdk.ThreadPark`.
    Park = 4,
    /// A sampled native allocation (`nativemem`'s hooks): a
    /// `profiler.Malloc` (`datadog.NativeMemoryAllocation`).
    Malloc = 5,
    /// The release of a sampled native allocation: a `profiler.Free`.
    Free = 6,
}

/// The counters of one kind of sample.
pub struct KindCounters {
    pub taken: Counter,
    /// Dropped: every stripe tried was busy.
    pub busy: Counter,
    /// Dropped: the stripe's buffer was full.
    pub buffer_full: Counter,
}

impl SampleKind {
    /// Its counters. Signal-safe.
    pub const fn counters(self) -> KindCounters {
        let (taken, busy, buffer_full) = match self {
            SampleKind::Cpu | SampleKind::Wall => {
                (Counter::Samples, Counter::SamplesDroppedBusy, Counter::SamplesDroppedBufferFull)
            }
            SampleKind::Alloc => (Counter::AllocSamples, Counter::AllocDroppedBusy, Counter::AllocDroppedBufferFull),
            SampleKind::Lock | SampleKind::Park => {
                (Counter::LockSamples, Counter::LockDroppedBusy, Counter::LockDroppedBufferFull)
            }
            SampleKind::Malloc => {
                (Counter::NativeMemSamples, Counter::NativeMemDroppedBusy, Counter::NativeMemDroppedBufferFull)
            }
            SampleKind::Free => {
                (Counter::NativeMemFrees, Counter::NativeMemDroppedBusy, Counter::NativeMemDroppedBufferFull)
            }
        };
        KindCounters { taken, busy, buffer_full }
    }
}

/// One sample, as recorded by the handler.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleRecord {
    /// CLOCK_MONOTONIC time of the sample.
    pub time_ns: u64,
    pub tid: u32,
    pub trace: u32,
    pub weight: u32,
    /// A `jfr_writer::ThreadState` discriminant.
    pub state: u8,
    pub kind: SampleKind,
    /// An allocation's, a monitor's or a lock's class (an id of the
    /// session's class table) and the allocation's size in bytes or the
    /// wait in nanoseconds, or a native allocation's size; 0 for other
    /// kinds.
    pub class: u32,
    pub value: u64,
    /// A park's time argument: a timeout in ns (> 0), a deadline in epoch
    /// milliseconds, negated (< 0), or none (0).
    pub park_time: i64,
    /// A native allocation's or free's address (0 for other kinds).
    pub address: u64,
    /// The thread's trace context when sampled.
    pub context: crate::storage::thread_slots::Context,
}

pub const STRIPES: usize = 16;
const STRIPES_TRIED: usize = 3;
/// Rounds over every stripe [`SampleStripes::acquire`] makes.
const ACQUIRE_ROUNDS: usize = 1000;

/// Scratch space for one stack walk.
pub struct Scratch {
    pub frames: MappedArray<Frame>,
    pub words: MappedArray<u64>,
}

struct StripeData {
    scratch: Scratch,
    samples: Vec<SampleRecord>,
}

struct Stripe {
    locked: AtomicBool,
    data: UnsafeCell<StripeData>,
}

pub struct SampleStripes {
    stripes: Box<[Stripe]>,
    capacity: usize,
    /// Empty buffers for the drain side to swap in (drain side only).
    spares: std::sync::Mutex<Vec<Vec<SampleRecord>>>,
}

// SAFETY: `data` is only accessed by the holder of `locked`.
unsafe impl Sync for SampleStripes {}

/// Exclusive access to one stripe until dropped.
pub struct StripeGuard<'a> {
    stripe: &'a Stripe,
    index: usize,
    /// Every stripe, for a record the held one has no room for.
    all: &'a [Stripe],
}

impl StripeGuard<'_> {
    /// Which stripe this is (per-stripe state elsewhere is indexed by it).
    pub fn index(&self) -> usize {
        self.index
    }

    fn data(&mut self) -> &mut StripeData {
        // SAFETY: the guard holds the stripe's lock, so access is exclusive.
        unsafe { &mut *self.stripe.data.get() }
    }

    pub fn scratch(&mut self) -> &mut Scratch {
        &mut self.data().scratch
    }

    /// Appends a record; false (and nothing stored) if the buffer is full.
    /// Never allocates: the buffer's capacity is fixed.
    pub fn push(&mut self, record: SampleRecord) -> bool {
        let samples = &mut self.data().samples;
        if samples.len() == samples.capacity() {
            return false;
        }
        samples.push(record);
        true
    }

    /// [`push`](Self::push), or when the held stripe's buffer is full, to
    /// the first other stripe free and with room (a burst of one thread's
    /// samples spreads over every stripe before any is dropped); counted
    /// by the record's kind: taken or dropped (all full), and its stack if
    /// it could not be stored. Signal-safe.
    pub fn push_counted(&mut self, record: SampleRecord) {
        let counters = record.kind.counters();
        let (all, held) = (self.all, self.index);
        let spilled = || {
            (1..all.len()).any(|i| {
                let index = (held + i) % all.len();
                let Some(stripe) = all.get(index) else { return false };
                if stripe.locked.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
                    return false;
                }
                StripeGuard { stripe, index, all }.push(record)
            })
        };
        if self.push(record) || spilled() {
            counters::increment(counters.taken);
        } else {
            counters::increment(counters.buffer_full);
        }
        if record.trace == TraceId::DROPPED.0 {
            counters::increment(Counter::StackWalkFailed);
        }
    }
}

impl Drop for StripeGuard<'_> {
    fn drop(&mut self) {
        self.stripe.locked.store(false, Ordering::Release);
    }
}

impl SampleStripes {
    /// `capacity` records per stripe, `scratch_frames` frames of walking
    /// space per stripe. Not signal-safe.
    pub fn new(capacity: usize, scratch_frames: usize) -> std::io::Result<Self> {
        let stripes = (0..STRIPES)
            .map(|_| {
                Ok(Stripe {
                    locked: AtomicBool::new(false),
                    data: UnsafeCell::new(StripeData {
                        scratch: Scratch {
                            frames: MappedArray::new(scratch_frames)?,
                            words: MappedArray::new(scratch_frames * 2)?,
                        },
                        samples: Vec::with_capacity(capacity),
                    }),
                })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Self { stripes: stripes.into_boxed_slice(), capacity, spares: Default::default() })
    }

    /// Takes one of the stripes preferred for `tid` without waiting.
    /// Signal-safe.
    pub fn try_acquire(&self, tid: u32) -> Option<StripeGuard<'_>> {
        (0..STRIPES_TRIED).find_map(|i| {
            let index = (tid as usize + i) % STRIPES;
            let stripe = self.stripes.get(index)?;
            stripe
                .locked
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .ok()
                .map(|_| StripeGuard { stripe, index, all: &self.stripes })
        })
    }

    /// Takes a stripe for a thread that is not a signal handler, trying
    /// every stripe and yielding between rounds (a handler holds one for a
    /// single sample); `None` after `ACQUIRE_ROUNDS` rounds found all busy.
    pub fn acquire(&self, tid: u32) -> Option<StripeGuard<'_>> {
        for _ in 0..ACQUIRE_ROUNDS {
            let free = (0..STRIPES / STRIPES_TRIED + 1)
                .find_map(|round| self.try_acquire(tid.wrapping_add((round * STRIPES_TRIED) as u32)));
            if free.is_some() {
                return free;
            }
            std::thread::yield_now();
        }
        None
    }

    /// Moves every recorded sample out, in stripe order, appending to
    /// `out`. Not signal-safe: it may allocate a spare buffer (before
    /// locking) and spins until each stripe is free, which a sampler holds
    /// only for the duration of one handler.
    pub fn drain_into(&self, out: &mut Vec<SampleRecord>) {
        let mut spares = self.spares.lock().unwrap_or_else(|p| p.into_inner());
        for stripe in self.stripes.iter() {
            let mut buffer = spares.pop().unwrap_or_else(|| Vec::with_capacity(self.capacity));
            while stripe.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
                std::thread::yield_now();
            }
            let guard = StripeGuard { stripe, index: 0, all: &self.stripes };
            // SAFETY: we hold the lock through `guard`.
            let data = unsafe { &mut *stripe.data.get() };
            std::mem::swap(&mut data.samples, &mut buffer);
            drop(guard);
            out.extend_from_slice(&buffer);
            buffer.clear();
            spares.push(buffer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn record(tid: u32) -> SampleRecord {
        SampleRecord {
            time_ns: 1,
            tid,
            trace: 2,
            weight: 1,
            state: 0,
            kind: SampleKind::Cpu,
            class: 0,
            value: 0,
            park_time: 0,
            address: 0,
            context: Default::default(),
        }
    }

    #[test]
    fn a_held_stripe_sends_the_next_sampler_elsewhere_and_three_held_stripes_refuse() {
        let stripes = SampleStripes::new(4, 8).unwrap();
        let a = stripes.try_acquire(0).unwrap();
        let b = stripes.try_acquire(0).unwrap();
        let c = stripes.try_acquire(0).unwrap();
        assert!(stripes.try_acquire(0).is_none());
        assert!(stripes.try_acquire(5).is_some(), "other stripes stay free");
        drop((a, b, c));
        assert!(stripes.try_acquire(0).is_some());
    }

    #[test]
    fn full_buffer_refuses_without_growing() {
        let stripes = SampleStripes::new(2, 8).unwrap();
        let mut guard = stripes.try_acquire(3).unwrap();
        assert!(guard.push(record(3)));
        assert!(guard.push(record(3)));
        assert!(!guard.push(record(3)));
        drop(guard);
        let mut out = Vec::new();
        stripes.drain_into(&mut out);
        assert_eq!(out.len(), 2);
        stripes.drain_into(&mut out);
        assert_eq!(out.len(), 2, "drained buffers start empty");
    }

    #[test]
    fn concurrent_producers_and_drainer_lose_nothing_that_was_accepted() {
        let stripes = Arc::new(SampleStripes::new(1 << 16, 8).unwrap());
        let producers: Vec<_> = (0..4u32)
            .map(|t| {
                let stripes = Arc::clone(&stripes);
                std::thread::spawn(move || {
                    let mut accepted = 0u64;
                    for _ in 0..20_000 {
                        if let Some(mut g) = stripes.try_acquire(t * 5) {
                            accepted += u64::from(g.push(record(t)));
                        }
                    }
                    accepted
                })
            })
            .collect();
        let mut drained = Vec::new();
        while !producers.iter().all(|p| p.is_finished()) {
            stripes.drain_into(&mut drained);
        }
        let accepted: u64 = producers.into_iter().map(|p| p.join().unwrap()).sum();
        stripes.drain_into(&mut drained);
        assert_eq!(drained.len() as u64, accepted);
    }
}
