//! What delivering one sampling signal costs the thread it interrupts,
//! beyond the handler's own time (which the handler measures): the timer
//! interrupt, the kernel's signal frame, `rt_sigreturn` and, on a virtual
//! machine, the hypervisor's exits. The handler's clock reads cannot see
//! it, yet the application pays it: 18–24 µs a signal on the README's
//! 2-core VM, a few µs on bare metal.
//!
//! Measured once per process, at the first governed `start`, before any
//! engine is armed, on a thread of its own: the same spin of work timed
//! on the thread's CPU clock (which the kernel charges with all of the
//! above) without signals and under a CLOCK_MONOTONIC timer signalling
//! that thread every `PERIOD`, whose signals a handler that does
//! nothing else counts ([`on_calibration`]). The charge is the median,
//! over `ROUNDS` signalled rounds, of a round's extra time per signal it
//! received, so that a round disturbed by an interrupt storm or a
//! frequency change does not decide. It is the cost of a high-resolution
//! timer's signal, as perf's `cpu-clock` delivers them; for the ctimer
//! and itimer engines (signals at the scheduler tick) and wall-clock
//! signals (sent from another CPU) it is an estimate, likely on the high
//! side. Control plane only.

use crate::clock::{thread_cpu_ns, timespec};
use crate::engine::signals::{self, Pending};
use crate::log;
use crate::sampling::chain::PREVIOUS_CALIBRATION;
use crate::sampling::handler::{on_calibration, CALIBRATION_SIGNALS};
use crate::sampling::origin::CALIBRATION_PAYLOAD;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;
use std::time::Duration;

/// The calibration timer's period: a few signals per round, far enough
/// apart that each is delivered on its own.
const PERIOD: Duration = Duration::from_micros(50);

/// The CPU time of one round's spin, with no signal.
const ROUND_CPU: Duration = Duration::from_micros(250);

/// Rounds of each kind: about 20 ms of CPU in all on that VM.
const ROUNDS: usize = 31;

/// A charge above this is a measurement gone wrong (the thread starved,
/// someone else's signals landing on it), not a signal's cost: rejected.
const MAX_CHARGE: Duration = Duration::from_micros(200);

const SIGEV_THREAD_ID: libc::c_int = 4;

static CHARGE: OnceLock<Option<Duration>> = OnceLock::new();

/// The cost of delivering one signal here, measured on first use; `None`
/// (logged once) if it could not be measured, and the governor then
/// charges handler time alone.
pub fn per_signal() -> Option<Duration> {
    *CHARGE.get_or_init(|| {
        let measured = std::thread::Builder::new()
            .name("profiler-calibrate".into())
            .spawn(measure)
            .map_err(|e| e.to_string())
            .and_then(|thread| thread.join().map_err(|_| "the calibration thread panicked".to_owned()))
            .and_then(|result| result.map_err(|e| e.to_string()));
        match measured {
            Ok(charge) => {
                log::info!("delivering a sampling signal costs about {} ns here (calibrated)", charge.as_nanos());
                Some(charge)
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
        event.sigev_notify_thread_id = crate::os_thread::current_tid() as libc::c_int;
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
fn measure() -> io::Result<Duration> {
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
    signals::install(libc::SIGPROF, on_calibration, &PREVIOUS_CALIBRATION)?;
    // The timer is gone (and its last signal delivered) before the handler.
    let charge = Timer::new().and_then(|timer| rounds(&timer));
    signals::restore(libc::SIGPROF, on_calibration, &PREVIOUS_CALIBRATION, Pending::Discard)?;
    charge
}

/// Alternating quiet and signalled rounds of the same spin.
fn rounds(timer: &Timer) -> io::Result<Duration> {
    const PROBE: u64 = 100_000;
    let probe = (0..3).map(|_| spin_time(PROBE)).min().unwrap_or(0).max(1);
    let iterations = (PROBE as u128 * ROUND_CPU.as_nanos() / u128::from(probe)).clamp(1_000, 100_000_000) as u64;
    let mut quiet = Vec::with_capacity(ROUNDS);
    let mut signalled = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        quiet.push(spin_time(iterations));
        timer.set(PERIOD)?;
        let before = CALIBRATION_SIGNALS.load(Ordering::Relaxed);
        let time = spin_time(iterations);
        signalled.push((time, CALIBRATION_SIGNALS.load(Ordering::Relaxed) - before));
        timer.set(Duration::ZERO)?;
    }
    charge(&mut quiet, &signalled)
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
        return Err(io::Error::other(format!("the timer reached {} of {} rounds", per_signal.len(), signalled.len())));
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
        let charge = per_signal().expect("a measured charge");
        assert!(charge <= MAX_CHARGE, "{charge:?}");
        // Measured once per process.
        assert_eq!(per_signal(), Some(charge));
    }
}
