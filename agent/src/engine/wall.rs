//! Wall-clock sampling: a sampler thread wakes every interval and sends
//! SIGVTALRM (`rt_tgsigqueueinfo`, carrying a cookie and the weight) to
//! the next `threads_per_tick` threads of the process in round-robin
//! order, so every thread is sampled over time whether it runs or not.
//! Each sample's weight is the number of intervals it stands for: the
//! eligible threads divided by those signalled per tick, rounded up.
//!
//! The thread list is re-read from `/proc/self/task` every 100 ms; with
//! the thread filter on, only threads in the filter are eligible.

use super::signals::{self, Pending};
use crate::log;
use crate::os_thread::current_tid;
use crate::sampling::chain::PREVIOUS_SIGVTALRM;
use crate::sampling::handler::on_sigvtalrm;
use crate::sampling::origin::wall_payload;
use crate::sampling::siginfo::RawSiginfo;
use crate::threads::process_threads;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const REFRESH: Duration = Duration::from_millis(100);

struct Running {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: JoinHandle<()>,
}

static RUNNING: Mutex<Option<Running>> = Mutex::new(None);

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

fn run(interval: Duration, per_tick: usize, sampled: &dyn Fn(u32) -> bool, stop: &(Mutex<bool>, Condvar)) {
    let own = current_tid();
    // SAFETY: getpid and getuid have no preconditions.
    let (pid, uid) = unsafe { (libc::getpid(), libc::getuid()) };
    let mut threads: Vec<u32> = Vec::new();
    let mut eligible: Vec<u32> = Vec::new();
    let mut refreshed: Option<Instant> = None;
    let mut rotation = Rotation::default();
    let mut next = Instant::now();
    let mut stopped = stop.0.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        next += interval;
        let now = Instant::now();
        if next < now {
            next = now; // missed ticks are skipped, not caught up
        }
        // Paces the ticks and wakes at once on stop.
        while !*stopped && Instant::now() < next {
            let wait = next.saturating_duration_since(Instant::now());
            stopped = stop.1.wait_timeout(stopped, wait).unwrap_or_else(|p| p.into_inner()).0;
        }
        if *stopped {
            return;
        }
        if refreshed.is_none_or(|t| t.elapsed() >= REFRESH) {
            threads = process_threads();
            threads.retain(|&tid| tid != own);
            threads.sort_unstable();
            refreshed = Some(Instant::now());
        }
        eligible.clear();
        eligible.extend(threads.iter().copied().filter(|&tid| sampled(tid)));
        let (chosen, weight) = rotation.next(&eligible, per_tick);
        for tid in chosen {
            signal(pid, uid, tid, weight);
        }
    }
}

/// Installs the SIGVTALRM handler and starts the sampler thread, which
/// signals the threads `sampled` accepts (the session's thread filter).
pub fn start(
    interval: Duration,
    threads_per_tick: usize,
    sampled: impl Fn(u32) -> bool + Send + 'static,
) -> Result<(), String> {
    let mut running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
    if running.is_some() {
        return Err("wall-clock sampling is already running".to_owned());
    }
    signals::install(libc::SIGVTALRM, on_sigvtalrm, &PREVIOUS_SIGVTALRM)
        .map_err(|e| format!("cannot install the SIGVTALRM handler: {e}"))?;
    let stop = Arc::new((Mutex::new(false), Condvar::new()));
    let flag = Arc::clone(&stop);
    let spawned = std::thread::Builder::new()
        .name("profiler-wall".to_owned())
        .spawn(move || run(interval, threads_per_tick.max(1), &sampled, &flag));
    match spawned {
        Ok(thread) => {
            *running = Some(Running { stop, thread });
            Ok(())
        }
        Err(e) => {
            let _ = signals::restore(libc::SIGVTALRM, on_sigvtalrm, &PREVIOUS_SIGVTALRM, Pending::Discard);
            Err(format!("cannot start the wall-clock thread: {e}"))
        }
    }
}

/// Stops the sampler thread, then restores the previous SIGVTALRM handler
/// (discarding signals still pending). Idempotent.
pub fn stop() {
    let Some(running) = RUNNING.lock().unwrap_or_else(|p| p.into_inner()).take() else {
        return;
    };
    *running.stop.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
    running.stop.1.notify_all();
    if running.thread.join().is_err() {
        log::error!("the wall-clock thread panicked");
    }
    if let Err(e) = signals::restore(libc::SIGVTALRM, on_sigvtalrm, &PREVIOUS_SIGVTALRM, Pending::Discard) {
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
}
