//! Wall-clock sampling: a sampler thread wakes every interval and sends
//! SIGVTALRM (`rt_tgsigqueueinfo`, carrying a cookie and the weight) to
//! the next `threads_per_tick` threads of the process in round-robin
//! order, so every thread is sampled over time whether it runs or not.
//! Each sample's weight is the number of intervals it stands for: the
//! eligible threads divided by those signalled per tick, rounded up.
//!
//! The thread list is re-read from `/proc/self/task` every 100 ms; with
//! the thread filter on, only threads in the filter are eligible.
//!
//! A thread that has not run since a sample found it off CPU is not
//! signalled: its samples are folded into one (`storage::idle`;
//! `wallbatch=false` signals every time).

use crate::jvm::threads::process_threads;
use crate::log;
use sampler::chain::PREVIOUS;
use sampler::clock;
use sampler::counters::{self, Counter};
use sampler::handler::on_sigvtalrm;
use sampler::origin::wall_payload;
use sampler::os_thread::current_tid;
use sampler::siginfo::RawSiginfo;
use sampler::signals::{self, Pending};
use sampler::Sampler;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const REFRESH: Duration = Duration::from_millis(100);

/// The wall-clock engine while armed (kept in `super::ENGINES`).
pub(super) struct Running {
    control: Arc<Control>,
    thread: JoinHandle<()>,
}

/// Round-robin choice of the threads to signal in one tick.
#[derive(Default)]
pub struct Rotation {
    cursor: usize,
}

impl Rotation {
    /// The next `per_tick` of `eligible` (sorted), and the weight of each.
    pub fn next<'a>(&mut self, eligible: &'a [u32], per_tick: usize) -> (impl Iterator<Item = u32> + 'a, u32) {
        let len = eligible.len();
        let count = per_tick.min(len);
        let start = if len == 0 { 0 } else { self.cursor % len };
        self.cursor = start + count;
        let weight = if count == 0 { 0 } else { len.div_ceil(count) as u32 };
        ((0..count).map(move |k| eligible[(start + k) % len]), weight)
    }
}

/// Sends one wall-clock signal to `tid` (false if it is gone).
fn signal(pid: i32, uid: u32, tid: u32, weight: u32) -> bool {
    let info = RawSiginfo::queued(libc::SIGVTALRM, pid, uid, wall_payload(weight));
    // SAFETY: a valid siginfo for this process; the kernel copies it.
    unsafe { libc::syscall(libc::SYS_rt_tgsigqueueinfo, pid, tid as i32, libc::SIGVTALRM, &info) == 0 }
}

/// What the control plane shares with the sampler thread: the stop
/// request, the interval (the overhead governor may stretch it) and the
/// thread's CPU time (for the governor). The stop flag is read without a
/// lock between signals; the mutex is held only while waiting between
/// ticks, so [`stop`] never waits for a tick that overruns (nor for any
/// tick).
#[derive(Default)]
struct Control {
    requested: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
    interval_ns: AtomicU64,
    cpu_ns: AtomicU64,
}

impl Control {
    fn new(interval: Duration) -> Self {
        let control = Self::default();
        control.set_interval(interval);
        control
    }

    fn requested(&self) -> bool {
        self.requested.load(Ordering::Acquire)
    }

    fn request(&self) {
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.requested.store(true, Ordering::Release);
        self.wake.notify_all();
    }

    fn interval(&self) -> Duration {
        Duration::from_nanos(self.interval_ns.load(Ordering::Relaxed).max(1))
    }

    fn set_interval(&self, interval: Duration) {
        self.interval_ns.store(u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Sleeps until `deadline` or a stop request; true if stop was requested.
    fn wait_until(&self, deadline: Instant) -> bool {
        let mut guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        while !self.requested() {
            let wait = deadline.saturating_duration_since(Instant::now());
            if wait.is_zero() {
                break;
            }
            guard = self.wake.wait_timeout(guard, wait).unwrap_or_else(|p| p.into_inner()).0;
        }
        self.requested()
    }
}

/// The tick schedule: ticks fall on `origin + k * interval`. A tick that
/// ends after the next one was due does not queue the ticks it overran:
/// they are skipped (and counted), and the next tick is the first one
/// still ahead, so the sampler always sleeps between ticks.
struct Schedule {
    origin: Instant,
    interval: Duration,
    tick: u64,
}

impl Schedule {
    fn new(origin: Instant, interval: Duration) -> Self {
        Self { origin, interval, tick: 0 }
    }

    fn at(&self, tick: u64) -> Instant {
        let nanos = self.interval.as_nanos().saturating_mul(u128::from(tick));
        self.origin + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// The next tick after one that ended at `now`, and how many due
    /// ticks were skipped to reach it.
    fn next(&mut self, now: Instant) -> (Instant, u64) {
        let elapsed = now.saturating_duration_since(self.origin).as_nanos();
        let first_ahead = u64::try_from(elapsed / self.interval.as_nanos().max(1) + 1).unwrap_or(u64::MAX);
        let skipped = first_ahead.saturating_sub(self.tick + 1);
        self.tick = first_ahead.max(self.tick + 1);
        (self.at(self.tick), skipped)
    }
}

fn run(per_tick: usize, sampler: &Sampler, control: &Control) {
    let own = current_tid();
    // SAFETY: getpid and getuid have no preconditions.
    let (pid, uid) = unsafe { (libc::getpid(), libc::getuid()) };
    let mut threads: Vec<u32> = Vec::new();
    let mut eligible: Vec<u32> = Vec::new();
    let mut refreshed: Option<Instant> = None;
    let mut rotation = Rotation::default();
    let mut schedule = Schedule::new(Instant::now(), control.interval());
    loop {
        if control.interval() != schedule.interval {
            // A batch's weight counts intervals of one length: those folded
            // so far are written before the governor's longer ones start.
            if let Some(idle) = sampler.idle.as_ref() {
                idle.flush(sampler.batch_sink());
            }
            schedule = Schedule::new(Instant::now(), control.interval());
        }
        let (next, skipped) = schedule.next(Instant::now());
        if skipped > 0 {
            counters::add(Counter::WallTicksSkipped, skipped);
        }
        control.cpu_ns.store(clock::thread_cpu_ns(), Ordering::Relaxed);
        if control.wait_until(next) {
            return;
        }
        let idle = sampler.idle.as_ref();
        if refreshed.is_none_or(|t| t.elapsed() >= REFRESH) {
            threads = process_threads();
            threads.retain(|&tid| tid != own);
            threads.sort_unstable();
            refreshed = Some(Instant::now());
            if let Some(idle) = idle {
                idle.forget_gone(&threads, sampler.batch_sink());
            }
        }
        if let Some(idle) = idle {
            idle.absorb(sampler.batch_sink());
        }
        eligible.clear();
        eligible.extend(threads.iter().copied().filter(|&tid| sampler.sampled(tid)));
        let (chosen, weight) = rotation.next(&eligible, per_tick);
        let now = clock::monotonic_ns();
        for tid in chosen {
            if control.requested() {
                return;
            }
            let folded = idle
                .is_some_and(|idle| idle.fold(tid, || clock::thread_cpu_ns_of(tid), weight, now, sampler.batch_sink()));
            if !folded {
                signal(pid, uid, tid, weight);
            }
        }
    }
}

/// Installs the SIGVTALRM handler and starts the sampler thread, which
/// signals the threads `sampler` samples (the session's thread filter) and
/// folds its idle ones.
pub fn start(interval: Duration, threads_per_tick: usize, sampler: Arc<Sampler>) -> Result<(), String> {
    let mut running = super::ENGINES.wall.lock().unwrap_or_else(|p| p.into_inner());
    if running.is_some() {
        return Err("wall-clock sampling is already running".to_owned());
    }
    signals::install(libc::SIGVTALRM, on_sigvtalrm, &PREVIOUS.sigvtalrm)
        .map_err(|e| format!("cannot install the SIGVTALRM handler: {e}"))?;
    let control = Arc::new(Control::new(interval));
    let shared = Arc::clone(&control);
    let spawned = std::thread::Builder::new()
        .name("profiler-wall".to_owned())
        .spawn(move || run(threads_per_tick.max(1), &sampler, &shared));
    match spawned {
        Ok(thread) => {
            *running = Some(Running { control, thread });
            Ok(())
        }
        Err(e) => {
            let _ = signals::restore(libc::SIGVTALRM, on_sigvtalrm, &PREVIOUS.sigvtalrm, Pending::Discard);
            Err(format!("cannot start the wall-clock thread: {e}"))
        }
    }
}

/// Changes the running sampler's interval (from its next tick).
pub fn set_interval(interval: Duration) {
    if let Some(running) = super::ENGINES.wall.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
        running.control.set_interval(interval);
    }
}

/// CPU time the sampler thread has used (as of its last tick; 0 when not
/// running).
pub fn thread_cpu_ns() -> u64 {
    super::ENGINES
        .wall
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .map_or(0, |r| r.control.cpu_ns.load(Ordering::Relaxed))
}

/// Stops the sampler thread, then restores the previous SIGVTALRM handler
/// (discarding signals still pending). Idempotent. Bounded whatever the
/// interval and the load: the thread sees the request before its next
/// signal, or wakes from its wait at once.
pub fn stop() {
    let Some(running) = super::ENGINES.wall.lock().unwrap_or_else(|p| p.into_inner()).take() else {
        return;
    };
    running.control.request();
    if running.thread.join().is_err() {
        log::error!("the wall-clock thread panicked");
    }
    if let Err(e) = signals::restore(libc::SIGVTALRM, on_sigvtalrm, &PREVIOUS.sigvtalrm, Pending::Discard) {
        log::warn!("cannot restore the SIGVTALRM handler: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_visits_every_thread_and_weights_the_unsampled() {
        let threads: Vec<u32> = (100..110).collect();
        let mut rotation = Rotation::default();
        let mut seen = Vec::new();
        for _ in 0..3 {
            let (chosen, weight) = rotation.next(&threads, 4);
            assert_eq!(weight, 3, "10 threads, 4 per tick: each sample stands for 3 ticks");
            seen.extend(chosen);
        }
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen, threads, "three ticks of four cover all ten");
        let (chosen, weight) = rotation.next(&threads[..2], 16);
        assert_eq!((chosen.count(), weight), (2, 1));
        let (chosen, weight) = rotation.next(&[], 16);
        assert_eq!((chosen.count(), weight), (0, 0));
    }

    #[test]
    fn overrun_ticks_are_skipped_and_counted_not_queued() {
        let origin = Instant::now();
        let ms = Duration::from_millis;
        let mut schedule = Schedule::new(origin, ms(10));
        assert_eq!(schedule.next(origin), (origin + ms(10), 0), "on time: the next tick, nothing skipped");
        assert_eq!(schedule.next(origin + ms(12)), (origin + ms(20), 0), "a tick that ran 2 ms");
        // The tick due at 20 ms ran until 55 ms: 30, 40 and 50 were due.
        assert_eq!(schedule.next(origin + ms(55)), (origin + ms(60), 3));
        assert_eq!(schedule.next(origin + ms(60)), (origin + ms(70), 0), "a tick ending on the next due time");
        // The next tick is always ahead, so the sampler always sleeps.
        let (next, _) = schedule.next(origin + ms(1000));
        assert!(next > origin + ms(1000));
    }

    #[test]
    fn stop_is_seen_without_waiting_for_the_deadline() {
        let stop = Control::default();
        assert!(!stop.wait_until(Instant::now()), "a deadline already past returns at once");
        stop.request();
        let started = Instant::now();
        assert!(stop.wait_until(started + Duration::from_secs(3600)));
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
