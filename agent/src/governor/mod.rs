//! The overhead governor (`overhead=`): a tick on the session's ticker
//! that measures the CPU time the profiler costs — its signal handlers
//! (the handler-time counter), the delivery of each of their signals
//! (charged at the cost [`signal_cost`] measured: the handler's own clock
//! reads cannot see it), the wall-clock sampler thread and the ticker
//! thread itself (draining samples, writing chunks) — and, when a
//! window's share of one core passes the ceiling (or, before the window
//! ends, once its cost passes what the whole window allows:
//! [`judged_span`]), stretches the CPU and wall-clock sampling intervals
//! (by the power of two that brings the cost under the ceiling, up to the
//! parser's ceiling). Each stretch is counted (`overhead_stretches`) and
//! recorded in the settings (`overhead_stretch`, and the `interval` and
//! `wall` now in force); the first one is logged. Intervals are never
//! shrunk back within a session. Control plane only.
//!
//! Not measured: JVMTI allocation and lock callbacks (they run on the
//! application's threads, inside the JVM's own event machinery).

pub mod signal_cost;

use crate::args::MAX_INTERVAL;
use crate::clock;
use crate::counters::{self, Counter};
use crate::engine;
use crate::jni_env::JniEnv;
use crate::latency;
use crate::log;
use crate::recording::Recording;
use crate::ticker::Tick;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the profiler's CPU use is averaged before it is judged: long
/// enough that a burst (a chunk written, the JIT warming up) is not taken
/// for the steady cost.
const WINDOW: Duration = Duration::from_secs(2);

/// The stretch after a window in which the profiler used `cost` of CPU
/// time over `elapsed`: while above `ceiling_percent` of one core,
/// multiplied by the power of two that brings the cost (taken to fall in
/// proportion to the rate) back under the ceiling in one step; never so
/// far that `base * stretch` would pass the interval ceiling.
pub fn next_stretch(stretch: u32, cost: Duration, elapsed: Duration, ceiling_percent: u32, base: Duration) -> u32 {
    let allowed = elapsed.as_nanos() * u128::from(ceiling_percent);
    let used = cost.as_nanos() * 100;
    if used <= allowed {
        return stretch;
    }
    // used / allowed <= used < 2^101 (a Duration's nanoseconds, times
    // 100): the power of two above it fits in a u128.
    let mut factor = used.div_ceil(allowed.max(1)).next_power_of_two();
    let stretched = |factor: u128| base.as_nanos().saturating_mul(u128::from(stretch)).saturating_mul(factor);
    while factor > 1 && stretched(factor) > MAX_INTERVAL.as_nanos() {
        factor /= 2;
    }
    u32::try_from(u128::from(stretch) * factor).unwrap_or(stretch)
}

pub struct Governor {
    ceiling_percent: u32,
    cpu: Option<Duration>,
    wall: Option<Duration>,
    /// What delivering one signal costs (zero if it could not be measured).
    per_signal: Duration,
    stretch: u32,
    window_start: Instant,
    cost_at_start: Duration,
    recording: Arc<Mutex<Recording>>,
}

/// The profiler's CPU time so far this session, each handled signal's
/// delivery charged at `per_signal`. Runs on the ticker thread.
fn profiler_cpu(per_signal: Duration) -> Duration {
    let per_signal = u64::try_from(per_signal.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(
        counters::get(Counter::HandlerNanos)
            .saturating_add(latency::HANDLER.count().saturating_mul(per_signal))
            .saturating_add(engine::wall::thread_cpu_ns())
            .saturating_add(clock::thread_cpu_ns()),
    )
}

impl Governor {
    /// A governor of the CPU interval `cpu` and the wall-clock interval
    /// `wall` (those sampled), holding the profiler under
    /// `ceiling_percent` of one core, each signal's delivery charged at
    /// `per_signal`.
    pub fn new(
        ceiling_percent: u32,
        cpu: Option<Duration>,
        wall: Option<Duration>,
        per_signal: Duration,
        recording: Arc<Mutex<Recording>>,
    ) -> Self {
        Self {
            ceiling_percent,
            cpu,
            wall,
            per_signal,
            stretch: 1,
            window_start: Instant::now(),
            cost_at_start: Duration::ZERO,
            recording,
        }
    }

    fn apply(&mut self, stretch: u32, used_percent: u128) {
        self.stretch = stretch;
        let stretched = |d: Duration| d.saturating_mul(stretch).min(MAX_INTERVAL);
        if let Some(cpu) = self.cpu {
            if let Err(e) = engine::set_interval(stretched(cpu)) {
                log::warn!("cannot stretch the CPU sampling interval: {e}");
            }
        }
        if let Some(wall) = self.wall {
            engine::wall::set_interval(stretched(wall));
        }
        let first = counters::get(Counter::OverheadStretches) == 0;
        counters::increment(Counter::OverheadStretches);
        let mut recording = self.recording.lock().unwrap_or_else(|p| p.into_inner());
        recording.update_setting("overhead_stretch", stretch.to_string());
        for (setting, base) in [("interval", self.cpu), ("wall", self.wall)] {
            if let Some(base) = base {
                recording.update_setting(setting, format!("{} ns", stretched(base).as_nanos()));
            }
        }
        drop(recording);
        if first {
            let intervals: Vec<String> = [("cpu", self.cpu), ("wall", self.wall)]
                .iter()
                .filter_map(|(name, base)| base.map(|d| format!("{name} {:?}", stretched(d))))
                .collect();
            log::warn!(
                "the profiler used {used_percent}% of one core (its signals' delivery charged at {} ns each), \
                 above overhead={}%: sampling intervals stretched {stretch}x ({}); further stretches are counted \
                 (overhead_stretches), not logged",
                self.per_signal.as_nanos(),
                self.ceiling_percent,
                intervals.join(", ")
            );
        }
    }
}

/// The span a window that has lasted `elapsed` and cost `used` is judged
/// over, if it is judged now: `WINDOW` or more once it has lasted that
/// long; earlier when `used` already passes what a whole window allows
/// (the full window could only judge it over the ceiling too), as if the
/// rest of the window cost nothing, so never a larger stretch than the
/// full window would give. A profiler set far too fast is held within a
/// few ticks, not after a whole window at full cost.
pub fn judged_span(used: Duration, elapsed: Duration, ceiling_percent: u32) -> Option<Duration> {
    if elapsed >= WINDOW {
        return Some(elapsed);
    }
    let allowed = WINDOW.as_nanos() * u128::from(ceiling_percent);
    (used.as_nanos() * 100 > allowed).then_some(WINDOW)
}

impl Tick for Governor {
    fn tick(&mut self, _env: Option<JniEnv>) {
        let elapsed = self.window_start.elapsed();
        let cost = profiler_cpu(self.per_signal);
        let used = cost.saturating_sub(self.cost_at_start);
        let Some(span) = judged_span(used, elapsed, self.ceiling_percent) else { return };
        self.window_start = Instant::now();
        self.cost_at_start = cost;
        let base = self.cpu.into_iter().chain(self.wall).max().unwrap_or(MAX_INTERVAL);
        let next = next_stretch(self.stretch, used, span, self.ceiling_percent, base);
        if next != self.stretch {
            self.apply(next, used.as_nanos() * 100 / span.as_nanos().max(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_is_judged_when_it_ends_or_once_it_spent_a_whole_windows_allowance() {
        let ms = Duration::from_millis;
        // 5% of a 2 s window is 100 ms of CPU.
        assert_eq!(judged_span(ms(10), ms(300), 5), None);
        assert_eq!(judged_span(ms(100), ms(300), 5), None, "exactly the allowance is not over it");
        assert_eq!(judged_span(ms(101), ms(300), 5), Some(WINDOW));
        assert_eq!(judged_span(ms(10), ms(2100), 5), Some(ms(2100)));
        assert_eq!(judged_span(ms(0), ms(2000), 5), Some(WINDOW));
        // Judged early over the whole window: 150 ms in 300 ms (50%) is
        // stretched as 150 ms in 2 s (7.5%), by 2, not by 16.
        let span = judged_span(ms(150), ms(300), 5).unwrap();
        assert_eq!(next_stretch(1, ms(150), span, 5, Duration::from_micros(100)), 2);
    }

    #[test]
    fn intervals_stretch_in_one_step_while_the_profiler_is_over_its_ceiling() {
        let ms = Duration::from_millis;
        let second = Duration::from_secs(1);
        // 40 ms of CPU a second is 4%: under a 5% ceiling, over a 3% one.
        assert_eq!(next_stretch(1, ms(40), second, 5, ms(1)), 1);
        assert_eq!(next_stretch(1, ms(40), second, 3, ms(1)), 2);
        assert_eq!(next_stretch(2, ms(40), second, 3, ms(1)), 4);
        // Exactly at the ceiling is not over it.
        assert_eq!(next_stretch(1, ms(50), second, 5, ms(1)), 1);
        // 28% against 5% needs 5.6x: the next power of two, at once.
        assert_eq!(next_stretch(1, ms(280), second, 5, ms(1)), 8);
        assert_eq!(next_stretch(4, ms(280), second, 5, ms(1)), 32);
        // Never past the interval ceiling (60 s): 20 s doubles once, no more.
        assert_eq!(next_stretch(1, second, second, 5, Duration::from_secs(20)), 2);
        assert_eq!(next_stretch(2, second, second, 5, Duration::from_secs(20)), 2);
        // 10,000x over: the next power of two, 16384x.
        assert_eq!(next_stretch(1, second * 100, second, 1, ms(1)), 16384);
        // 1 ms may go up to 60 s, but only by powers of two: 32768x.
        assert_eq!(next_stretch(1, second * 1000, second, 1, ms(1)), 32768);
        assert_eq!(next_stretch(u32::MAX, second, second, 5, ms(1)), u32::MAX);
        // A cost of zero time over zero time is no cost.
        assert_eq!(next_stretch(1, Duration::ZERO, Duration::ZERO, 5, ms(1)), 1);
    }
}
