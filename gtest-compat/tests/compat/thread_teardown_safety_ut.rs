//! Port of upstream `thread_teardown_safety_ut` (see gtest-compat/README.md).
//!
//! Upstream's per-thread record is a heap `ProfiledThread` behind a TLS
//! key, freed at release. Ours is a slot in `context`'s thread table (one
//! mapping, never freed), found by thread id; a thread gets one on its
//! first context call and gives it back in `entry::thread_exiting` (the
//! JVMTI ThreadEnd path), which blocks SIGPROF and SIGVTALRM around the
//! release. "current() from a handler" is therefore
//! `context::state()?.slots.find(current_tid())`, and the handlers below
//! run on this module's own real-time signal, serialized by `SIGNAL_TESTS`.

use super::stress_call_trace_storage::InstalledHandler;
use profiler_agent::ffi::entry::thread_exiting;
use sampler::context;
use sampler::os_thread::current_tid;
use sampler::signals::SignalBlocker;
use sampler::storage::samples::SampleStripes;
use sampler::storage::thread_slots::{ThreadSlot, ThreadSlots};
use std::ffi::c_int;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{mpsc, Mutex};

static SIGNAL_TESTS: Mutex<()> = Mutex::new(());

fn signal_lock() -> std::sync::MutexGuard<'static, ()> {
    SIGNAL_TESTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// This module's signal, unused by the agent and the other suites' tests.
fn test_signal() -> c_int {
    libc::SIGRTMIN() + 7
}

/// The calling thread's slot, if it has one. Signal-safe.
fn own_slot() -> Option<&'static ThreadSlot> {
    context::state().and_then(|s| s.slots.find(current_tid()))
}

const NOT_RUN: u8 = 0;
const FOUND: u8 = 1;
const ABSENT: u8 = 2;
static SEEN: AtomicU8 = AtomicU8::new(NOT_RUN);

extern "C" fn probe_handler(_: c_int) {
    SEEN.store(if own_slot().is_some() { FOUND } else { ABSENT }, Ordering::SeqCst);
}

/// Raises the test signal on the calling thread (delivered before the call
/// returns) and reports what `probe_handler` saw.
fn probe_from_handler() -> u8 {
    SEEN.store(NOT_RUN, Ordering::SeqCst);
    // SAFETY: signals the calling thread, whose handler is installed.
    assert_eq!(unsafe { libc::pthread_kill(libc::pthread_self(), test_signal()) }, 0);
    SEEN.load(Ordering::SeqCst)
}

/// Runs `body` on a thread of its own, with `probe_handler` installed.
fn on_probed_thread(body: impl FnOnce() + Send) {
    let _serial = signal_lock();
    let _handler = InstalledHandler::install(test_signal(), probe_handler, libc::SA_RESTART);
    std::thread::scope(|s| s.spawn(body).join().expect("thread body failed"));
}

#[test]
fn tls_accessible_during_lifetime_null_after_release() {
    on_probed_thread(|| {
        context::set_spans(1, 2).unwrap();
        assert_eq!(probe_from_handler(), FOUND, "a live thread's handler finds its slot");
        thread_exiting();
        assert_eq!(probe_from_handler(), ABSENT, "after the thread end path, a handler finds no slot");
    });
}

/// Upstream's window: TLS cleared, object not yet freed. Ours: the slot is
/// released first (the context step of the thread end path), the engine
/// and thread registry steps come after. A signal in between finds no
/// slot, and completing the path afterwards releases nothing twice.
#[test]
fn signal_in_tls_clear_delete_window_does_not_crash() {
    on_probed_thread(|| {
        context::set_spans(3, 4).unwrap();
        let tid = current_tid();
        context::release_thread(tid);
        assert_eq!(probe_from_handler(), ABSENT, "the released slot is invisible to a handler");
        thread_exiting();
        assert_eq!(probe_from_handler(), ABSENT);
        assert_eq!(context::state().unwrap().sample_context(tid), Default::default());
    });
}

#[test]
fn double_release_is_idempotent() {
    std::thread::spawn(|| {
        context::set_spans(5, 6).unwrap();
        thread_exiting();
        thread_exiting();
        assert!(own_slot().is_none());
        // The thread may take a slot again, and it starts clean.
        context::set_value(0, None, 1).unwrap();
        assert_eq!(own_slot().and_then(ThreadSlot::context), Some(Default::default()));
        thread_exiting();
    })
    .join()
    .unwrap();
}

#[test]
fn signal_safe_accessor_returns_null_without_init() {
    context::init().unwrap();
    on_probed_thread(|| {
        assert_eq!(probe_from_handler(), ABSENT, "a thread that never set context has no slot");
    });
}

static HANDLED: AtomicU64 = AtomicU64::new(0);
static FOREIGN: AtomicU64 = AtomicU64::new(0);
/// The worker that has just been through the thread end path (0: none).
static RELEASED_TID: AtomicU32 = AtomicU32::new(0);
static STALE: AtomicU64 = AtomicU64::new(0);

/// Each worker's span id is its own tid: anything else is another thread's
/// record. A worker that went through the thread end path must have none.
extern "C" fn teardown_handler(_: c_int) {
    let tid = current_tid();
    let slot = own_slot();
    let span = slot.and_then(ThreadSlot::context).map_or(0, |c| c.span_id);
    if span != 0 && span != u64::from(tid) {
        FOREIGN.fetch_add(1, Ordering::Relaxed);
    }
    if RELEASED_TID.load(Ordering::SeqCst) == tid && slot.is_some() {
        STALE.fetch_add(1, Ordering::Relaxed);
    }
    HANDLED.fetch_add(1, Ordering::SeqCst);
}

fn reset_teardown_counters() {
    HANDLED.store(0, Ordering::SeqCst);
    FOREIGN.store(0, Ordering::SeqCst);
    STALE.store(0, Ordering::SeqCst);
    RELEASED_TID.store(0, Ordering::SeqCst);
}

/// 5 rounds of 20 threads, each signalling itself ten times and then
/// ending: every signal is handled, none sees another thread's record.
#[test]
fn concurrent_signals_during_teardown_stress() {
    let _serial = signal_lock();
    reset_teardown_counters();
    let _handler = InstalledHandler::install(test_signal(), teardown_handler, libc::SA_RESTART);
    for _ in 0..5 {
        std::thread::scope(|s| {
            for _ in 0..20 {
                s.spawn(|| {
                    let tid = u64::from(current_tid());
                    context::set_spans(tid, tid).unwrap();
                    for _ in 0..10 {
                        // SAFETY: signals the calling thread, whose handler is installed.
                        unsafe { libc::pthread_kill(libc::pthread_self(), test_signal()) };
                    }
                    thread_exiting();
                });
            }
        });
    }
    assert_eq!(HANDLED.load(Ordering::SeqCst), 5 * 20 * 10);
    assert_eq!(FOREIGN.load(Ordering::SeqCst), 0, "a handler saw another thread's record");
}

/// Checks, on a fresh thread, that the blocker adds SIGPROF and SIGVTALRM
/// to the mask and puts back exactly the mask it found.
#[test]
fn signal_blocker_masks_and_restores_prof_signals() {
    fn mask() -> libc::sigset_t {
        // SAFETY: queries the calling thread's mask into a plain sigset_t.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut set);
            set
        }
    }
    fn blocked(set: &libc::sigset_t, signo: c_int) -> bool {
        // SAFETY: reads a valid set.
        unsafe { libc::sigismember(set, signo) == 1 }
    }
    std::thread::spawn(|| {
        let before = mask();
        {
            let _blocker = SignalBlocker::block();
            let during = mask();
            assert!(blocked(&during, libc::SIGVTALRM), "SIGVTALRM blocked");
            assert!(blocked(&during, libc::SIGPROF), "SIGPROF blocked");
        }
        let after = mask();
        for signo in [libc::SIGPROF, libc::SIGVTALRM] {
            assert_eq!(blocked(&before, signo), blocked(&after, signo), "signal {signo} restored");
        }
        // A signal the thread had blocked before stays blocked afterwards.
        // SAFETY: builds a set and blocks SIGPROF on this thread only.
        unsafe {
            let mut prof: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut prof);
            libc::sigaddset(&mut prof, libc::SIGPROF);
            libc::pthread_sigmask(libc::SIG_BLOCK, &prof, std::ptr::null_mut());
        }
        drop(SignalBlocker::block());
        let after = mask();
        assert!(blocked(&after, libc::SIGPROF), "a signal blocked before stays blocked");
        assert!(!blocked(&after, libc::SIGVTALRM), "a signal unblocked before is unblocked again");
    })
    .join()
    .unwrap();
}

#[test]
fn double_init_is_idempotent() {
    std::thread::spawn(|| {
        context::set_spans(7, 8).unwrap();
        let first = own_slot().expect("registered") as *const ThreadSlot;
        context::set_spans(9, 10).unwrap();
        let second = own_slot().expect("registered") as *const ThreadSlot;
        assert_eq!(first, second, "a second registration reuses the thread's slot");
        assert_eq!(own_slot().and_then(ThreadSlot::context).map(|c| (c.span_id, c.root_span_id)), Some((9, 10)));
        thread_exiting();
    })
    .join()
    .unwrap();
    let slots = ThreadSlots::new().unwrap();
    let a = slots.register(42).unwrap() as *const ThreadSlot;
    let b = slots.register(42).unwrap() as *const ThreadSlot;
    assert_eq!(a, b);
}

/// 100 short-lived threads, one after the other, each under a stream of
/// signals for its whole life. A thread waits for a signal before and
/// after its thread end, so both sides of the release are hit every time;
/// the stream stops before the thread exits (its tid may be reused). One
/// signal at a time is in flight: real-time signals queue, and a flood
/// would keep the thread in its handler forever.
#[test]
fn high_frequency_signals_during_thread_churn() {
    const THREADS: usize = 100;
    let _serial = signal_lock();
    reset_teardown_counters();
    let _handler = InstalledHandler::install(test_signal(), teardown_handler, libc::SA_RESTART);
    fn wait_for_a_signal() {
        let seen = HANDLED.load(Ordering::SeqCst);
        while HANDLED.load(Ordering::SeqCst) == seen {
            std::thread::yield_now();
        }
    }
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let (to_injector, from_worker) = mpsc::channel::<u32>();
    for _ in 0..THREADS {
        let (may_exit, exit_allowed) = mpsc::channel::<()>();
        let to_injector = to_injector.clone();
        let worker = std::thread::spawn(move || {
            let tid = current_tid();
            context::set_spans(u64::from(tid), u64::from(tid)).unwrap();
            to_injector.send(tid).unwrap();
            wait_for_a_signal();
            thread_exiting();
            RELEASED_TID.store(tid, Ordering::SeqCst);
            wait_for_a_signal();
            to_injector.send(0).unwrap();
            exit_allowed.recv().unwrap();
            RELEASED_TID.store(0, Ordering::SeqCst);
        });
        let tid = from_worker.recv().expect("worker started");
        let mut handled = None;
        while let Err(mpsc::TryRecvError::Empty) = from_worker.try_recv() {
            let now = HANDLED.load(Ordering::SeqCst);
            if handled != Some(now) {
                handled = Some(now);
                // SAFETY: the worker cannot exit before `may_exit` is sent below.
                unsafe { libc::syscall(libc::SYS_tgkill, pid, tid as c_int, test_signal()) };
            }
            std::thread::yield_now();
        }
        may_exit.send(()).unwrap();
        worker.join().expect("worker failed");
    }
    assert!(HANDLED.load(Ordering::SeqCst) >= 2 * THREADS as u64);
    assert_eq!(FOREIGN.load(Ordering::SeqCst), 0, "a handler saw another thread's record");
    assert_eq!(STALE.load(Ordering::SeqCst), 0, "a handler found a released thread's slot");
}

/// Upstream rejects a nested critical section on the same thread. Ours
/// has no per-thread flag: what a sample needs exclusively is its stripe,
/// and a handler nested on a thread that holds one takes another (each
/// stripe has its own scratch), or none after three; released stripes are
/// taken again.
#[test]
fn critical_section_reentrancy_guard() {
    let stripes = SampleStripes::new(4, 8).unwrap();
    let tid = 9;
    let outer = stripes.try_acquire(tid).expect("outer");
    let nested = stripes.try_acquire(tid).expect("first nesting");
    let deeper = stripes.try_acquire(tid).expect("second nesting");
    assert_ne!(outer.index(), nested.index());
    assert!(![outer.index(), nested.index()].contains(&deeper.index()));
    assert!(stripes.try_acquire(tid).is_none(), "a fourth level is refused");
    let outer_index = outer.index();
    drop((deeper, nested, outer));
    assert_eq!(stripes.try_acquire(tid).expect("free again").index(), outer_index);
}

/// Upstream checks its per-thread allocation is accounted and given back.
/// Ours allocates nothing per thread: a slot is taken while the thread
/// lives and given back at its end (counted on a private table, and seen
/// on the agent's).
#[test]
fn native_mem_thread_local_balances_on_release() {
    let slots = ThreadSlots::new().unwrap();
    let count = || {
        let mut n = 0;
        slots.for_each(|_| n += 1);
        n
    };
    assert_eq!(count(), 0);
    slots.register(1234).unwrap();
    assert_eq!(count(), 1);
    slots.release(1234);
    assert_eq!(count(), 0, "release gives the slot back");

    let tid = std::thread::spawn(|| {
        context::set_spans(11, 12).unwrap();
        assert!(own_slot().is_some());
        thread_exiting();
        assert!(own_slot().is_none());
        current_tid()
    })
    .join()
    .unwrap();
    assert!(context::state().unwrap().slots.find(tid).is_none());
}

/// A thread that exits without the JVMTI ThreadEnd path still gives its
/// slot back: registering a slot also arms a thread-local destructor that
/// releases it (with the profiling signals blocked) when the thread exits.
#[test]
fn native_mem_thread_local_released_on_thread_exit() {
    let tid = std::thread::spawn(|| {
        context::set_spans(13, 14).unwrap();
        current_tid()
    })
    .join()
    .unwrap();
    assert!(context::state().unwrap().slots.find(tid).is_none(), "the exited thread's slot is still registered");
}
