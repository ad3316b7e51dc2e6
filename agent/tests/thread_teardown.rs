//! Thread teardown under signal load, in the spirit of the upstream
//! ThreadTeardownSafetyTest: thousands of short-lived threads register
//! per-thread context, then exit through the agent's ThreadEnd path while
//! another thread fires SIGVTALRM at them as fast as it can. The handler
//! reads the interrupted thread's record as a sample does. Nothing may
//! crash, and a handler must never see another thread's values. Run once
//! natively and, where valgrind is installed, again under memcheck (which
//! reports any read of freed memory).

use profiler_agent::ffi::entry::thread_exiting;
use sampler::context;
use sampler::os_thread::current_tid;
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use test_skip::{skip, InCi};

static HANDLED: AtomicU64 = AtomicU64::new(0);
static FOREIGN_VALUES: AtomicU64 = AtomicU64::new(0);

/// Each thread's span id is its own tid: anything else is another thread's.
extern "C" fn on_signal(_: c_int) {
    let tid = current_tid();
    let span = context::state().unwrap().sample_context(tid).span_id;
    if span != 0 && span != u64::from(tid) {
        FOREIGN_VALUES.fetch_add(1, Ordering::Relaxed);
    }
    HANDLED.fetch_add(1, Ordering::Relaxed);
}

fn threads_to_run() -> usize {
    std::env::var("TEARDOWN_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(4000)
}

#[test]
fn signals_at_exiting_threads_never_touch_released_records() {
    // SAFETY: installs a handler that only reads atomics and context slots.
    unsafe { libc::signal(libc::SIGVTALRM, on_signal as extern "C" fn(c_int) as libc::sighandler_t) };
    const BATCH: usize = 8;
    let live: Arc<[AtomicU32; BATCH]> = Arc::new([const { AtomicU32::new(0) }; BATCH]);
    let stop = Arc::new(AtomicBool::new(false));
    let shooter = {
        let (live, stop) = (Arc::clone(&live), Arc::clone(&stop));
        std::thread::spawn(move || {
            // SAFETY: getpid has no preconditions.
            let pid = unsafe { libc::getpid() };
            let mut sent = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for slot in live.iter() {
                    let tid = slot.load(Ordering::Relaxed);
                    if tid != 0 {
                        // SAFETY: tgkill only sends a signal; a gone tid fails with ESRCH.
                        unsafe { libc::syscall(libc::SYS_tgkill, pid, tid as i32, libc::SIGVTALRM) };
                        sent += 1;
                    }
                }
                // Lets the targets run (matters under valgrind, which runs
                // one thread at a time).
                std::thread::yield_now();
            }
            sent
        })
    };
    let total = threads_to_run();
    for batch in 0..total.div_ceil(BATCH) {
        let workers: Vec<_> = (0..BATCH.min(total - batch * BATCH))
            .map(|index| {
                let live = Arc::clone(&live);
                std::thread::spawn(move || {
                    let tid = current_tid();
                    context::set_spans(u64::from(tid), 1).unwrap();
                    live[index].store(tid, Ordering::Relaxed);
                    (0..20).for_each(|_| std::thread::yield_now());
                    thread_exiting();
                    // Signals still arrive after the release (the shooter
                    // does not know yet): they must find no record.
                    (0..20).for_each(|_| std::thread::yield_now());
                    live[index].store(0, Ordering::Relaxed);
                })
            })
            .collect();
        workers.into_iter().for_each(|w| w.join().unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    let sent = shooter.join().unwrap();
    assert!(sent > 0 && HANDLED.load(Ordering::Relaxed) > 0, "signals were delivered");
    assert_eq!(FOREIGN_VALUES.load(Ordering::Relaxed), 0, "a handler saw another thread's record");
}

/// The same test under valgrind's memcheck, if valgrind is installed.
#[test]
fn the_teardown_test_is_clean_under_valgrind() {
    if std::process::Command::new("valgrind").arg("--version").output().is_err() {
        return skip("valgrind is not installed (apt-get install valgrind)", InCi::Required);
    }
    let exe = std::env::current_exe().unwrap();
    let output = std::process::Command::new("valgrind")
        .args(["--tool=memcheck", "--error-exitcode=99", "--quiet"])
        .arg(&exe)
        .args(["--exact", "signals_at_exiting_threads_never_touch_released_records", "--test-threads=1"])
        .env("TEARDOWN_THREADS", "64")
        .output()
        .expect("run valgrind");
    assert!(
        output.status.success(),
        "valgrind: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
