//! What delivering one sampling signal costs the thread it interrupts,
//! beyond the handler's own time (which the handler measures): the
//! kernel's signal frame, `rt_sigreturn` and, for a signal that must
//! interrupt the thread, the interrupt (on a virtual machine, the
//! hypervisor's exits too). The handler's clock reads cannot see it, yet
//! the application pays it: 18–24 µs a timer signal on the 2-core VM of
//! docs/benchmarks.md, a few µs on bare metal.
//!
//! Measured once per process, at the first governed `start`, before any
//! engine is armed, on a thread of its own: the same spin of work timed
//! on the thread's CPU clock (which the kernel charges with all of the
//! above) without signals and under signals that a handler doing nothing
//! else counts ([`on_calibration`]). The charge is the median, over
//! `ROUNDS` signalled rounds, of a round's extra time per signal it
//! received, so that a round disturbed by an interrupt storm or a
//! frequency change does not decide. One charge per way a signal
//! arrives ([`Delivery`]), as the engines send theirs:
//! - [`Delivery::Timer`]: a high-resolution timer's interrupt, as perf's
//!   `cpu-clock` delivers its signals;
//! - [`Delivery::AtTick`]: a signal raised while the thread runs, with no
//!   interrupt of its own, as the ctimer and itimer engines' signals come
//!   at the scheduler tick that happens anyway (measured with signals the
//!   thread queues to itself, the system call included: on the high
//!   side);
//! - [`Delivery::CrossThread`]: a signal another thread queues, as the
//!   wall-clock sampler sends them.
//!
//! Control plane only.

use crate::log;
use sampler::chain::PREVIOUS;
use sampler::clock::{thread_cpu_ns, timespec};
use sampler::counters;
use sampler::handler::on_calibration;
use sampler::origin::CALIBRATION_PAYLOAD;
use sampler::os_thread::current_tid;
use sampler::siginfo::RawSiginfo;
use sampler::signals::{self, Pending};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// The calibration signals' period: a few signals per round, far enough
/// apart that each is delivered on its own.
const PERIOD: Duration = Duration::from_micros(50);

/// The CPU time of one round's spin, with no signal.
const ROUND_CPU: Duration = Duration::from_micros(250);

/// Signals a thread queues to itself in one [`Delivery::AtTick`] round,
/// about one a `PERIOD` of its spin.
const QUEUED_PER_ROUND: u64 = 5;

/// Rounds of each kind: about 20 ms of CPU for each delivery on that VM.
const ROUNDS: usize = 31;

/// A charge above this is a measurement gone wrong (the thread starved,
/// someone else's signals landing on it), not a signal's cost: rejected.
const MAX_CHARGE: Duration = Duration::from_micros(200);

const SIGEV_THREAD_ID: libc::c_int = 4;

/// How a sampling signal reaches the sampled thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// A high-resolution timer interrupts it (perf `cpu-clock`).
    Timer,
    /// Raised at the scheduler tick while it runs (ctimer, itimer).
    AtTick,
    /// Queued by another thread (the wall-clock sampler).
    CrossThread,
}

/// What delivering one signal costs here, by [`Delivery`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignalCosts {
    pub timer: Duration,
    pub at_tick: Duration,
    pub cross_thread: Duration,
}

impl SignalCosts {
    pub fn of(&self, delivery: Delivery) -> Duration {
        match delivery {
            Delivery::Timer => self.timer,
            Delivery::AtTick => self.at_tick,
            Delivery::CrossThread => self.cross_thread,
        }
    }
}

/// What signals cost on this machine, measured once per process.
static COSTS: OnceLock<Option<SignalCosts>> = OnceLock::new();

/// What delivering a signal costs here, measured on first use; `None`
/// (logged once) if the timer's could not be measured, and the governor
/// then charges handler time alone. A delivery other than the timer's
/// that cannot be measured is charged as the timer's (logged).
pub fn costs() -> Option<SignalCosts> {
    *COSTS.get_or_init(|| {
        let measured = std::thread::Builder::new()
            .name("profiler-calibrate".into())
            .spawn(measure)
            .map_err(|e| e.to_string())
            .and_then(|thread| thread.join().map_err(|_| "the calibration thread panicked".to_owned()))
            .and_then(|result| result.map_err(|e| e.to_string()));
        match measured {
            Ok(costs) => {
                log::info!(
                    "delivering a sampling signal costs about {} ns by timer, {} ns at the tick, {} ns from another \
                     thread here (calibrated)",
                    costs.timer.as_nanos(),
                    costs.at_tick.as_nanos(),
                    costs.cross_thread.as_nanos()
                );
                Some(costs)
            }
            Err(e) => {
                log::warn!("cannot measure what a sampling signal costs to deliver ({e}); the overhead governor counts handler time only");
                None
            }
        }
    })
}

/// A CLOCK_MONOTONIC timer signalling the calling thread with SIGPROF and
/// the calibration payload; deleted when dropped.
struct Timer(libc::timer_t);

impl Timer {
    fn new() -> io::Result<Self> {
        // SAFETY: all-zero is a valid sigevent to fill in.
        let mut event: libc::sigevent = unsafe { std::mem::zeroed() };
        event.sigev_notify = SIGEV_THREAD_ID;
        event.sigev_signo = libc::SIGPROF;
        event.sigev_value = libc::sigval { sival_ptr: CALIBRATION_PAYLOAD as usize as *mut libc::c_void };
        event.sigev_notify_thread_id = sampler::os_thread::current_tid() as libc::c_int;
        let mut timer: libc::timer_t = std::ptr::null_mut();
        // SAFETY: a valid clock, sigevent and out pointer.
        if unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut event, &mut timer) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self(timer))
    }

    /// Fires every `period` from now; zero disarms.
    fn set(&self, period: Duration) -> io::Result<()> {
        let time = timespec(period);
        let spec = libc::itimerspec { it_interval: time, it_value: time };
        // SAFETY: a live timer of this process and a valid itimerspec.
        if unsafe { libc::timer_settime(self.0, 0, &spec, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        // SAFETY: a live timer, deleted once. A signal it left pending is
        // delivered to this thread on the way back from the call.
        unsafe { libc::timer_delete(self.0) };
    }
}

/// Work for the CPU alone (registers, no memory), so that what signals add
/// to it is their delivery, not cache misses of its own.
fn spin(iterations: u64) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..iterations {
        x = std::hint::black_box(x.rotate_left(5) ^ 0x5851_F42D).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    x
}

/// The calling thread's CPU time spent spinning `iterations` times.
fn spin_time(iterations: u64) -> u64 {
    let start = thread_cpu_ns();
    std::hint::black_box(spin(iterations));
    thread_cpu_ns().saturating_sub(start)
}

fn median(values: &mut [u64]) -> u64 {
    values.sort_unstable();
    values[values.len() / 2]
}

/// Runs on the calibration thread: installs the counting handler for the
/// measurement only (forwarding anything else to whatever SIGPROF did).
/// Restoring it discards SIGPROF signals pending then in any thread (see
/// `signals::Pending::Discard`): another profiler's, for a moment, once.
fn measure() -> io::Result<SignalCosts> {
    // SAFETY: sigset_t is plain data; unblocks SIGPROF on this thread only.
    let unblocked = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPROF);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut())
    };
    if unblocked != 0 {
        return Err(io::Error::from_raw_os_error(unblocked));
    }
    signals::install(libc::SIGPROF, on_calibration, &PREVIOUS.calibration)?;
    let costs = measure_each();
    signals::restore(libc::SIGPROF, on_calibration, &PREVIOUS.calibration, Pending::Discard)?;
    costs
}

/// Each delivery's charge, with the counting handler installed.
fn measure_each() -> io::Result<SignalCosts> {
    const PROBE: u64 = 100_000;
    let probe = (0..3).map(|_| spin_time(PROBE)).min().unwrap_or(0).max(1);
    let iterations = (PROBE as u128 * ROUND_CPU.as_nanos() / u128::from(probe)).clamp(1_000, 100_000_000) as u64;
    // The timer is gone (and its last signal delivered) before the handler.
    let timer = Timer::new().and_then(|timer| {
        rounds(iterations, |iterations| {
            timer.set(PERIOD)?;
            let taken = signalled_spin(iterations);
            timer.set(Duration::ZERO)?;
            Ok(taken)
        })
    })?;
    let or_timer = |delivery: &str, measured: io::Result<Duration>| {
        measured.unwrap_or_else(|e| {
            log::info!("cannot measure a {delivery} signal's delivery ({e}); charged as a timer's");
            timer
        })
    };
    let tid = current_tid();
    let at_tick = rounds(iterations, |iterations| {
        let (start, before) = (thread_cpu_ns(), counters::calibration_signals());
        for _ in 0..QUEUED_PER_ROUND {
            std::hint::black_box(spin(iterations / QUEUED_PER_ROUND));
            queue_calibration_signal(tid)?;
        }
        Ok((thread_cpu_ns().saturating_sub(start), counters::calibration_signals() - before))
    });
    let cross_thread = Sender::spawn(tid).and_then(|sender| {
        rounds(iterations, |iterations| {
            sender.sending.store(true, Ordering::Relaxed);
            let taken = signalled_spin(iterations);
            sender.sending.store(false, Ordering::Relaxed);
            // Signals still on their way land here, in no round.
            std::thread::sleep(PERIOD * 2);
            Ok(taken)
        })
    });
    Ok(SignalCosts {
        timer,
        at_tick: or_timer("self-queued", at_tick),
        cross_thread: or_timer("cross-thread", cross_thread),
    })
}

/// Queues one calibration signal to thread `tid` of this process.
fn queue_calibration_signal(tid: u32) -> io::Result<()> {
    let pid = std::process::id() as i32;
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let info = RawSiginfo::queued(libc::SIGPROF, pid, uid, CALIBRATION_PAYLOAD);
    // SAFETY: a valid siginfo for this process; the kernel copies it.
    if unsafe { libc::syscall(libc::SYS_rt_tgsigqueueinfo, pid, tid as i32, libc::SIGPROF, &info) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A thread queueing calibration signals to the calibration thread every
/// `PERIOD` while `sending`, as the wall-clock sampler does; stopped and
/// joined when dropped.
struct Sender {
    sending: std::sync::Arc<AtomicBool>,
    stop: std::sync::Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sender {
    fn spawn(target: u32) -> io::Result<Self> {
        let sending = std::sync::Arc::new(AtomicBool::new(false));
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (on, off) = (std::sync::Arc::clone(&sending), std::sync::Arc::clone(&stop));
        let thread = std::thread::Builder::new().name("profiler-calibrate-sender".into()).spawn(move || {
            while !off.load(Ordering::Relaxed) {
                if on.load(Ordering::Relaxed) && queue_calibration_signal(target).is_err() {
                    return;
                }
                std::thread::sleep(PERIOD);
            }
        })?;
        Ok(Self { sending, stop, thread: Some(thread) })
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The CPU time of a spin of `iterations` and the calibration signals
/// received during it.
fn signalled_spin(iterations: u64) -> (u64, u64) {
    let before = counters::calibration_signals();
    let time = spin_time(iterations);
    (time, counters::calibration_signals() - before)
}

/// Alternating quiet and signalled rounds of the same spin (`signalled`
/// spins `iterations` under signals and returns its CPU time and the
/// signals received during it).
fn rounds(iterations: u64, mut signalled: impl FnMut(u64) -> io::Result<(u64, u64)>) -> io::Result<Duration> {
    let mut quiet = Vec::with_capacity(ROUNDS);
    let mut taken = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        quiet.push(spin_time(iterations));
        taken.push(signalled(iterations)?);
    }
    charge(&mut quiet, &taken)
}

/// The median, over the signalled rounds (CPU time, signals received)
/// that received any, of the extra time per signal over the median quiet
/// round; an error if too few rounds received signals or the result is
/// not a signal's cost.
fn charge(quiet: &mut [u64], signalled: &[(u64, u64)]) -> io::Result<Duration> {
    let quiet = median(quiet);
    let mut per_signal: Vec<u64> = signalled
        .iter()
        .filter(|&&(_, signals)| signals > 0)
        .map(|&(time, signals)| time.saturating_sub(quiet) / signals)
        .collect();
    if per_signal.len() * 2 < signalled.len() {
        return Err(io::Error::other(format!("signals reached {} of {} rounds", per_signal.len(), signalled.len())));
    }
    let charge = Duration::from_nanos(median(&mut per_signal));
    if charge > MAX_CHARGE {
        return Err(io::Error::other(format!("{} ns a signal is not a signal's cost", charge.as_nanos())));
    }
    Ok(charge)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_charge_is_the_median_extra_time_per_signal() {
        let rounds = |extra_and_signals: &[(u64, u64)]| -> Vec<(u64, u64)> {
            extra_and_signals.iter().map(|&(extra, signals)| (250_000 + extra, signals)).collect()
        };
        // 100 us more for 4 signals: 25 us each; an outlier round does not
        // move the median, nor does a quiet round that ran long.
        let mut quiet = [250_000, 250_000, 900_000];
        assert_eq!(
            charge(&mut quiet, &rounds(&[(100_000, 4), (100_000, 4), (5_000_000, 5)])).unwrap(),
            Duration::from_micros(25)
        );
        // A round whose expiries merged into fewer signals counts per signal.
        let mut quiet = [250_000; 3];
        assert_eq!(
            charge(&mut quiet, &rounds(&[(50_000, 2), (100_000, 4), (75_000, 3)])).unwrap(),
            Duration::from_micros(25)
        );
        // Signalled rounds that happened to run faster cost nothing.
        let mut quiet = [250_000; 3];
        assert_eq!(charge(&mut quiet, &[(240_000, 4); 3]).unwrap(), Duration::ZERO);
        // Too few rounds reached, or a cost no signal has: errors.
        let mut quiet = [250_000; 3];
        assert!(charge(&mut quiet, &rounds(&[(100_000, 4), (0, 0), (0, 0)])).is_err());
        let mut quiet = [250_000; 3];
        assert!(charge(&mut quiet, &rounds(&[(1_000_000, 4); 3])).is_err());
    }

    #[test]
    fn delivering_a_signal_is_measured_on_this_machine() {
        let measured = costs().expect("measured charges");
        for delivery in [Delivery::Timer, Delivery::AtTick, Delivery::CrossThread] {
            assert!(measured.of(delivery) <= MAX_CHARGE, "{delivery:?}: {measured:?}");
        }
        // Measured once per process.
        assert_eq!(costs(), Some(measured));
    }
}
