//! The overhead governor (`overhead=`): a tick on the session's ticker
//! that weighs what the profiler costs against what the application uses,
//! and stretches the CPU and wall-clock sampling intervals when the
//! profiler's share passes the ceiling.
//!
//! The profiler's cost is what grows with the sampling rate: its signal
//! handlers (the handler-time counter), the delivery of each of their
//! signals (charged at the cost [`signal_cost`] measured for the way the
//! engine delivers them: the handler's own clock reads cannot see it) and
//! the wall-clock sampler thread. The writer thread's work (draining,
//! encoding, writing chunks) does not drive stretches: it is a cost per
//! distinct stack and per chunk more than per sample. The application's
//! CPU is the process's CPU time minus all of the profiler's.
//!
//! Every [`WINDOW`] the profiler's cost is judged against
//! [`allowance`]: `ceiling` percent of the application's CPU time, never
//! less than [`FLOOR_PERMILLE`] of one core, so that fixed costs do not
//! stretch an idle process. A window whose cost already passes what the
//! best end of the window could allow is judged at once ([`judged`]). A
//! stretch multiplies the intervals by the power of two that brings the
//! cost under the allowance in one step, up to the parser's ceiling, and
//! is never undone within a session. Each stretch is logged, counted
//! (`overhead_stretches`), shown by `status` ([`InForce`]) and starts a
//! new chunk whose settings carry the intervals now in force
//! (`overhead_stretch`, `interval`, `wall`), so that every chunk's samples
//! were taken at the intervals its settings name. Control plane only.
//!
//! Not measured: JVMTI allocation and lock callbacks (they run on the
//! application's threads, inside the JVM's own event machinery); they
//! count as the application's CPU.

pub mod signal_cost;

use crate::args::MAX_INTERVAL;
use crate::engine;
use crate::jvm::jni_env::JniEnv;
use crate::jvm::ticker::Tick;
use crate::jvm::vm::Vm;
use crate::log;
use crate::recording::{DumpContext, Recording};
use sampler::clock;
use sampler::counters::{self, Counter};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long costs are averaged before they are judged: long enough that a
/// burst (the JIT warming up, a GC) is not taken for the steady cost.
pub const WINDOW: Duration = Duration::from_secs(2);

/// What the profiler may always use, in thousandths of one core, however
/// little CPU the application uses: 1%.
pub const FLOOR_PERMILLE: u64 = 10;

/// What the profiler may use over `span` while the application used
/// `application`: `ceiling_percent` of that, never less than the floor.
pub fn allowance(application: Duration, span: Duration, ceiling_percent: u32) -> Duration {
    let share = application.as_nanos() * u128::from(ceiling_percent) / 100;
    let floor = span.as_nanos() * u128::from(FLOOR_PERMILLE) / 1000;
    Duration::from_nanos(u64::try_from(share.max(floor)).unwrap_or(u64::MAX))
}

/// One window's figures so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Measured {
    pub elapsed: Duration,
    /// The profiler's cost (what grows with the rate).
    pub profiler: Duration,
    /// The application's CPU time.
    pub application: Duration,
}

/// The allowance a window is judged against, if it is judged now: at
/// [`WINDOW`]'s end, what the application used allows; earlier, once the
/// profiler's cost passes what even the best end could allow (the
/// application using all `cpus` for the rest of the window), judged
/// against that best end, so never a larger stretch than the full window
/// would give. A profiler set far too fast is held within a few ticks,
/// not after a whole window at full cost (on a machine of many cores the
/// best end allows much, and the window runs its course).
pub fn judged(measured: Measured, cpus: u32, ceiling_percent: u32) -> Option<Duration> {
    if measured.elapsed >= WINDOW {
        return Some(allowance(measured.application, measured.elapsed, ceiling_percent));
    }
    let rest = (WINDOW - measured.elapsed).saturating_mul(cpus.max(1));
    let best = allowance(measured.application.saturating_add(rest), WINDOW, ceiling_percent);
    (measured.profiler > best).then_some(best)
}

/// The stretch after a window in which the profiler cost `cost` where
/// `allowed` was allowed: while over, multiplied by the power of two that
/// brings the cost (taken to fall in proportion to the rate) back under
/// the allowance in one step; never so far that `base * stretch` would
/// pass the interval ceiling.
pub fn next_stretch(stretch: u32, cost: Duration, allowed: Duration, base: Duration) -> u32 {
    let (used, allowed) = (cost.as_nanos(), allowed.as_nanos());
    if used <= allowed {
        return stretch;
    }
    // used / allowed <= used < 2^64 (a Duration's nanoseconds fit in
    // u64 here): the power of two above it fits in a u128.
    let mut factor = used.div_ceil(allowed.max(1)).next_power_of_two();
    let stretched = |factor: u128| base.as_nanos().saturating_mul(u128::from(stretch)).saturating_mul(factor);
    while factor > 1 && stretched(factor) > MAX_INTERVAL.as_nanos() {
        factor /= 2;
    }
    u32::try_from(u128::from(stretch) * factor).unwrap_or(stretch)
}

/// The sampling intervals in force: those asked for, times the governor's
/// stretch. Shared by the governor (which stretches) and the session
/// (`status`).
#[derive(Debug)]
pub struct InForce {
    cpu: Option<Duration>,
    wall: Option<Duration>,
    stretch: AtomicU32,
}

impl InForce {
    pub fn new(cpu: Option<Duration>, wall: Option<Duration>) -> Self {
        Self { cpu, wall, stretch: AtomicU32::new(1) }
    }

    pub fn stretch(&self) -> u32 {
        self.stretch.load(Ordering::Relaxed)
    }

    fn stretched(&self, asked: Duration) -> Duration {
        asked.saturating_mul(self.stretch()).min(MAX_INTERVAL)
    }

    /// The CPU interval in force, if CPU is sampled.
    pub fn cpu(&self) -> Option<Duration> {
        self.cpu.map(|d| self.stretched(d))
    }

    /// The wall-clock interval in force, if wall clock is sampled.
    pub fn wall(&self) -> Option<Duration> {
        self.wall.map(|d| self.stretched(d))
    }

    /// "cpu 4ms, wall 200ms (stretched 4x by the overhead governor from
    /// cpu 1ms, wall 50ms)", for `status` and the log.
    pub fn describe(&self) -> String {
        let list = |cpu: Option<Duration>, wall: Option<Duration>| {
            let named = [("cpu", cpu), ("wall", wall)];
            named.iter().filter_map(|(name, d)| d.map(|d| format!("{name} {d:?}"))).collect::<Vec<_>>().join(", ")
        };
        let now = list(self.cpu(), self.wall());
        match self.stretch() {
            1 => now,
            stretch => {
                format!("{now} (stretched {stretch}x by the overhead governor from {})", list(self.cpu, self.wall))
            }
        }
    }
}

/// Cumulative readings of the clocks a window is measured with.
#[derive(Clone, Copy, Debug, Default)]
struct Reading {
    profiler: u64,
    writer: u64,
    process: u64,
}

pub struct Governor {
    ceiling_percent: u32,
    /// What delivering one CPU and one wall-clock signal costs (zero if it
    /// could not be measured).
    cpu_charge: Duration,
    wall_charge: Duration,
    cpus: u32,
    in_force: Arc<InForce>,
    window_start: Instant,
    at_start: Reading,
    vm: &'static Vm,
    recording: Arc<Mutex<Recording>>,
}

impl Governor {
    /// A governor of the intervals `in_force`, holding the profiler under
    /// `ceiling_percent` of the application's CPU, each CPU signal's
    /// delivery charged at `cpu_charge` and each wall-clock signal's at
    /// `wall_charge`.
    pub fn new(
        ceiling_percent: u32,
        cpu_charge: Duration,
        wall_charge: Duration,
        in_force: Arc<InForce>,
        vm: &'static Vm,
        recording: Arc<Mutex<Recording>>,
    ) -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        let mut governor = Self {
            ceiling_percent,
            cpu_charge,
            wall_charge,
            cpus,
            in_force,
            window_start: Instant::now(),
            at_start: Reading::default(),
            vm,
            recording,
        };
        governor.at_start = governor.read();
        governor
    }

    /// The clocks now; runs on the ticker thread (the writer's).
    fn read(&self) -> Reading {
        let charge = |counter, per_signal: Duration| {
            counters::get(counter).saturating_mul(u64::try_from(per_signal.as_nanos()).unwrap_or(u64::MAX))
        };
        Reading {
            profiler: counters::get(Counter::HandlerNanos)
                .saturating_add(charge(Counter::CpuSignals, self.cpu_charge))
                .saturating_add(charge(Counter::WallSignals, self.wall_charge))
                .saturating_add(engine::wall::thread_cpu_ns()),
            writer: clock::thread_cpu_ns(),
            process: clock::process_cpu_ns(),
        }
    }

    /// Stretches the intervals `stretch` times those asked for, from now:
    /// the engines first, then a new chunk with the settings now in force.
    /// (The samples the engines take between the two, microseconds, end
    /// the old chunk, weighed at the old interval. Without a JNIEnv to
    /// finish a chunk with, the change is recorded inside the current
    /// chunk, whose samples before it `symbolize` then weighs at the new
    /// interval: the writer thread could not attach, and then no chunk is
    /// finished before a dump anyway.) A CPU interval the engine refuses
    /// stretches nothing.
    fn apply(&mut self, stretch: u32, measured: Measured, env: Option<JniEnv>) {
        let before = self.in_force.describe();
        let previous = self.in_force.stretch.swap(stretch, Ordering::Relaxed);
        if let Some(cpu) = self.in_force.cpu() {
            if let Err(e) = engine::set_interval(cpu) {
                // Threads the engine did change go back (best effort).
                self.in_force.stretch.store(previous, Ordering::Relaxed);
                let _ = self.in_force.cpu().map(engine::set_interval);
                log::warn!("cannot stretch the CPU sampling interval to {cpu:?}: {e}; the intervals stay as they are");
                return;
            }
        }
        if let Some(wall) = self.in_force.wall() {
            engine::wall::set_interval(wall);
        }
        counters::increment(Counter::OverheadStretches);
        let nanos = |d: Duration| format!("{} ns", d.as_nanos());
        let mut changes = vec![("overhead_stretch", stretch.to_string())];
        changes.extend(self.in_force.cpu().map(|d| ("interval", nanos(d))));
        changes.extend(self.in_force.wall().map(|d| ("wall", nanos(d))));
        let ctx = env.map(|env| DumpContext { jvmti: self.vm.jvmti(), env });
        self.recording.lock().unwrap_or_else(|p| p.into_inner()).change_settings(&changes, ctx.as_ref());
        let share = measured.profiler.as_nanos() * 1000 / measured.application.as_nanos().max(1);
        log::warn!(
            "the profiler used {}.{}% of the application's CPU ({:?} of {:?} in {:?}; signals' delivery charged at \
             {} ns by CPU engines, {} ns wall-clock), above overhead={}%: sampling intervals stretched from {before} \
             to {}; the recording's next chunk carries them in its settings",
            share / 10,
            share % 10,
            measured.profiler,
            measured.application,
            measured.elapsed,
            self.cpu_charge.as_nanos(),
            self.wall_charge.as_nanos(),
            self.ceiling_percent,
            self.in_force.describe()
        );
    }
}

impl Tick for Governor {
    fn tick(&mut self, env: Option<JniEnv>) {
        let now = self.read();
        let profiler = now.profiler.saturating_sub(self.at_start.profiler);
        let overhead = profiler.saturating_add(now.writer.saturating_sub(self.at_start.writer));
        let measured = Measured {
            elapsed: self.window_start.elapsed(),
            profiler: Duration::from_nanos(profiler),
            application: Duration::from_nanos(
                now.process.saturating_sub(self.at_start.process).saturating_sub(overhead),
            ),
        };
        let Some(allowed) = judged(measured, self.cpus, self.ceiling_percent) else { return };
        self.window_start = Instant::now();
        self.at_start = now;
        let stretch = self.in_force.stretch();
        let base = self.in_force.cpu.into_iter().chain(self.in_force.wall).max().unwrap_or(MAX_INTERVAL);
        let next = next_stretch(stretch, measured.profiler, allowed, base);
        if next != stretch {
            self.apply(next, measured, env);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    fn window(profiler: Duration, application: Duration) -> Measured {
        Measured { elapsed: WINDOW, profiler, application }
    }

    #[test]
    fn the_allowance_is_a_share_of_the_applications_cpu_with_a_floor() {
        // 5% of 4 s of application CPU in a 2 s window: 200 ms.
        assert_eq!(allowance(MS(4_000), WINDOW, 5), MS(200));
        // An idle application: 1% of one core, 20 ms in 2 s.
        assert_eq!(allowance(Duration::ZERO, WINDOW, 5), MS(20));
        assert_eq!(allowance(MS(100), WINDOW, 5), MS(20));
        // Off the floor from 400 ms of application CPU at 5%.
        assert_eq!(allowance(MS(800), WINDOW, 5), MS(40));
    }

    /// The costs of `threads` busy threads sampled every `interval` for a
    /// window, each sample costing `per_sample` (handler and delivery).
    fn busy(threads: u64, interval: Duration, per_sample: Duration) -> Measured {
        let samples = threads * (WINDOW.as_nanos() / interval.as_nanos()) as u64;
        let profiler = per_sample * samples as u32;
        window(profiler, WINDOW * threads as u32 - profiler)
    }

    #[test]
    fn a_service_with_many_busy_threads_at_the_default_rate_is_not_stretched() {
        // 64 busy threads on 64 cores at 10 ms, each signal costing 30 us
        // (handler and delivery on this VM, where a signal costs the most):
        // 0.3% of the application's CPU, though 19% of one core.
        let measured = busy(64, MS(10), Duration::from_micros(30));
        assert!(measured.profiler > WINDOW / 10, "more than the old ceiling of 5% of one core: {measured:?}");
        let allowed = judged(measured, 64, 5).unwrap();
        assert_eq!(next_stretch(1, measured.profiler, allowed, MS(10)), 1);
        // Never judged before the window ends either.
        let half = Measured { elapsed: WINDOW / 2, profiler: measured.profiler / 2, ..measured };
        assert_eq!(judged(half, 64, 5), None);
    }

    #[test]
    fn two_busy_threads_at_1ms_are_not_stretched_and_at_100us_are() {
        let per_sample = Duration::from_micros(25);
        let measured = busy(2, MS(1), per_sample);
        let allowed = judged(measured, 2, 5).unwrap();
        assert_eq!(next_stretch(1, measured.profiler, allowed, MS(1)), 1, "{measured:?}");
        // At 100 us the same costs are a third of the application's CPU:
        // stretched 8x, to 800 us, in one step, and early.
        let fast = busy(2, Duration::from_micros(100), per_sample);
        let allowed = judged(fast, 2, 5).unwrap();
        assert_eq!(next_stretch(1, fast.profiler, allowed, Duration::from_micros(100)), 8, "{fast:?}");
        let early = Measured { elapsed: WINDOW / 4, profiler: fast.profiler / 4, application: fast.application / 4 };
        let allowed = judged(early, 2, 5).expect("judged within a few ticks");
        let stretch = next_stretch(1, early.profiler, allowed, Duration::from_micros(100));
        assert!((2..=8).contains(&stretch), "early judgement never stretches more than the full window: {stretch}");
    }

    #[test]
    fn an_idle_application_is_not_stretched_by_fixed_costs() {
        // The wall-clock thread and a few signals: 10 ms in 2 s, the
        // application nearly idle.
        let measured = window(MS(10), MS(30));
        let allowed = judged(measured, 2, 5).unwrap();
        assert_eq!(next_stretch(1, measured.profiler, allowed, MS(50)), 1);
        // Past the floor it is stretched.
        let measured = window(MS(90), MS(30));
        let allowed = judged(measured, 2, 5).unwrap();
        assert_eq!(next_stretch(1, measured.profiler, allowed, MS(50)), 8);
    }

    #[test]
    fn intervals_stretch_in_one_step_while_the_profiler_is_over_its_allowance() {
        let second = Duration::from_secs(1);
        assert_eq!(next_stretch(1, MS(40), MS(50), MS(1)), 1);
        assert_eq!(next_stretch(1, MS(40), MS(30), MS(1)), 2);
        assert_eq!(next_stretch(2, MS(40), MS(30), MS(1)), 4);
        // Exactly at the allowance is not over it.
        assert_eq!(next_stretch(1, MS(50), MS(50), MS(1)), 1);
        // 5.6x over: the next power of two, at once.
        assert_eq!(next_stretch(1, MS(280), MS(50), MS(1)), 8);
        assert_eq!(next_stretch(4, MS(280), MS(50), MS(1)), 32);
        // Never past the interval ceiling (60 s): 20 s doubles once, no more.
        assert_eq!(next_stretch(1, second, MS(50), Duration::from_secs(20)), 2);
        assert_eq!(next_stretch(2, second, MS(50), Duration::from_secs(20)), 2);
        // 10,000x over: the next power of two, 16384x.
        assert_eq!(next_stretch(1, second * 100, MS(10), MS(1)), 16384);
        // 1 ms may go up to 60 s, but only by powers of two: 32768x.
        assert_eq!(next_stretch(1, second * 1000, MS(10), MS(1)), 32768);
        assert_eq!(next_stretch(u32::MAX, second, MS(50), MS(1)), u32::MAX);
        // No cost against no allowance is no cost.
        assert_eq!(next_stretch(1, Duration::ZERO, Duration::ZERO, MS(1)), 1);
    }

    #[test]
    fn the_intervals_in_force_are_described_with_their_stretch() {
        let in_force = InForce::new(Some(MS(1)), Some(MS(50)));
        assert_eq!(in_force.describe(), "cpu 1ms, wall 50ms");
        in_force.stretch.store(4, Ordering::Relaxed);
        assert_eq!((in_force.cpu(), in_force.wall()), (Some(MS(4)), Some(MS(200))));
        assert_eq!(
            in_force.describe(),
            "cpu 4ms, wall 200ms (stretched 4x by the overhead governor from cpu 1ms, wall 50ms)"
        );
        let wall_only = InForce::new(None, Some(Duration::from_secs(40)));
        wall_only.stretch.store(2, Ordering::Relaxed);
        assert_eq!(wall_only.wall(), Some(MAX_INTERVAL), "never past the ceiling");
    }
}
