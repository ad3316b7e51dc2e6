//! Time sources.

/// Clock `clock` in nanoseconds; `None` if the kernel refuses it (a
/// thread's clock once the thread is gone). Signal-safe (a vDSO call or a
/// system call).
#[inline]
fn read(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a clock id (the kernel checks it) and an out pointer.
    let status = unsafe { libc::clock_gettime(clock, &mut ts) };
    (status == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// CLOCK_MONOTONIC in nanoseconds. Signal-safe (a vDSO call).
#[inline]
pub fn monotonic_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC).unwrap_or(0)
}

/// The calling thread's CPU time in nanoseconds. Signal-safe.
pub fn thread_cpu_ns() -> u64 {
    read(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0)
}

/// The CPU time of the whole process in nanoseconds, every thread's (the
/// profiler's included).
pub fn process_cpu_ns() -> u64 {
    read(libc::CLOCK_PROCESS_CPUTIME_ID).unwrap_or(0)
}

/// The CPU-time clock of thread `tid` of this process (Linux's
/// `MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`).
pub fn thread_cpu_clock(tid: u32) -> libc::clockid_t {
    const PER_THREAD_SCHED: libc::clockid_t = 4 | 2;
    (!(tid as libc::clockid_t) << 3) | PER_THREAD_SCHED
}

/// The CPU time of thread `tid` of this process in nanoseconds, through
/// its per-thread CPU clock; `None` if the thread is gone.
pub fn thread_cpu_ns_of(tid: u32) -> Option<u64> {
    read(thread_cpu_clock(tid))
}

/// `d` as a `timespec`.
pub fn timespec(d: std::time::Duration) -> libc::timespec {
    libc::timespec { tv_sec: d.as_secs() as libc::time_t, tv_nsec: d.subsec_nanos() as libc::c_long }
}

/// Nanoseconds since the Unix epoch.
pub fn epoch_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// The proleptic Gregorian date (year, month, day) of the day `days`
/// after 1970-01-01 (Howard Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_threads_cpu_time_is_read_through_its_clock() {
        let (sender, receiver) = std::sync::mpsc::channel();
        let (done, finish) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            while thread_cpu_ns() < 10_000_000 {
                std::hint::black_box(0u64);
            }
            sender.send((crate::os_thread::current_tid(), thread_cpu_ns())).unwrap();
            finish.recv().unwrap();
        });
        let (tid, own) = receiver.recv().unwrap();
        let seen = thread_cpu_ns_of(tid).expect("a live thread has a CPU clock");
        assert!(seen >= own, "{own} ns by itself, {seen} ns seen from here");
        done.send(()).unwrap();
        worker.join().unwrap();
        // The kernel lets join() return before the thread leaves its tables.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while thread_cpu_ns_of(tid).is_some() {
            assert!(std::time::Instant::now() < deadline, "thread {tid} still has a CPU clock 10 s after it ended");
            std::thread::yield_now();
        }
    }
}
