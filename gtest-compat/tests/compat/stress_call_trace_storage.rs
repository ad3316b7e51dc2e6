//! Port of upstream `stress_callTraceStorage` (see gtest-compat/README.md).
//!
//! Bounded by operation counts, not by time: every stress case ends when
//! its workers have done their share. The signal cases install their own
//! handler for a real-time signal (never SIGPROF/SIGVTALRM), serialized by
//! `SIGNAL_TESTS`, and restore the previous disposition when done.

use super::support::asgct_sampler;
use frames::Frame;
use profiler_agent::ffi::entry::thread_exiting;
use sampler::asgct::{AsgctFrame, AsgctTrace};
use sampler::context;
use sampler::os_thread::current_tid;
use sampler::storage::call_traces::{CallTraceTable, TraceId};
use sampler::storage::samples::{SampleKind, SampleStripes};
use sampler::storage::trace_storage::CallTraceStorage;
use sampler::{SampleRequest, Sampler};
use std::collections::{HashMap, HashSet};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// Serializes the cases that install a process-wide signal handler.
static SIGNAL_TESTS: Mutex<()> = Mutex::new(());

fn signal_lock() -> std::sync::MutexGuard<'static, ()> {
    SIGNAL_TESTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// This module's signal, unused by the agent and the other suites' tests.
fn test_signal() -> c_int {
    libc::SIGRTMIN() + 6
}

/// A small deterministic generator (splitmix64): runs are reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `low..=high`.
    fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }
}

fn valid(id: TraceId) -> bool {
    id.0 >= TraceId::FIRST
}

/// Our handler for a signal until dropped; dropping passes through SIG_IGN
/// (which discards instances still pending anywhere in the process) back
/// to the previous action. Shared with the other signal suites.
pub(crate) struct InstalledHandler {
    signo: c_int,
    previous: libc::sigaction,
}

impl InstalledHandler {
    pub(crate) fn install(signo: c_int, handler: extern "C" fn(c_int), flags: c_int) -> Self {
        // SAFETY: sigaction with valid pointers; the handlers given here
        // only touch atomics and signal-safe agent functions.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handler as usize;
            action.sa_flags = flags;
            libc::sigemptyset(&mut action.sa_mask);
            let mut previous: libc::sigaction = std::mem::zeroed();
            assert_eq!(libc::sigaction(signo, &action, &mut previous), 0, "sigaction");
            Self { signo, previous }
        }
    }
}

impl Drop for InstalledHandler {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe {
            let mut ignore: libc::sigaction = std::mem::zeroed();
            ignore.sa_sigaction = libc::SIG_IGN;
            libc::sigaction(self.signo, &ignore, std::ptr::null_mut());
            libc::sigaction(self.signo, &self.previous, std::ptr::null_mut());
        }
    }
}

/// Thread ids a signaller fires at, and a handshake so that a thread
/// leaving the list is no longer targeted once it exits (a stale tid could
/// name another thread of this process: tids are reused). Shared with the
/// other signal suites.
pub(crate) struct Targets {
    tids: Vec<AtomicU32>,
    passes: AtomicU64,
    pub(crate) stop: AtomicBool,
}

impl Targets {
    pub(crate) fn new(count: usize) -> Self {
        Self {
            tids: (0..count).map(|_| AtomicU32::new(0)).collect(),
            passes: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        }
    }

    pub(crate) fn enter(&self, index: usize) {
        self.tids[index].store(current_tid(), Ordering::SeqCst);
    }

    /// Leaves the list and waits until the signaller finished a pass that
    /// started after that.
    pub(crate) fn leave(&self, index: usize) {
        self.tids[index].store(0, Ordering::SeqCst);
        let seen = self.passes.load(Ordering::SeqCst);
        while self.passes.load(Ordering::SeqCst) < seen + 2 && !self.stop.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
    }

    /// Fires `signo` at every listed thread, pass after pass, until `stop`
    /// is set or `budget` signals were sent (which sets `stop`). At most
    /// one signal per listed thread is in flight (sent, but not yet counted
    /// in `handled` by the handler): real-time signals queue, and a flood
    /// would keep a thread in its handler without end. Returns the signals
    /// sent.
    pub(crate) fn fire(&self, signo: c_int, budget: u64, handled: &AtomicU64) -> u64 {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        let base = handled.load(Ordering::SeqCst);
        let mut sent = 0;
        while !self.stop.load(Ordering::SeqCst) {
            for tid in &self.tids {
                let tid = tid.load(Ordering::SeqCst);
                let in_flight = sent - (handled.load(Ordering::SeqCst) - base).min(sent);
                if tid != 0 && sent < budget && in_flight < self.tids.len() as u64 {
                    // SAFETY: tgkill only sends a signal; a gone tid fails with ESRCH.
                    sent += u64::from(unsafe { libc::syscall(libc::SYS_tgkill, pid, tid as c_int, signo) } == 0);
                }
            }
            self.passes.fetch_add(1, Ordering::SeqCst);
            if sent >= budget {
                self.stop.store(true, Ordering::SeqCst);
            }
            std::thread::yield_now();
        }
        sent
    }
}

#[test]
fn swap_storm_test() {
    const THREADS: u64 = 8;
    const OPERATIONS: u64 = 5000;
    let storage = CallTraceStorage::new(1 << 16, 1 << 18).unwrap();
    let finished = AtomicU64::new(0);
    let (operations, successful, swaps) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (storage, finished) = (&storage, &finished);
                s.spawn(move || {
                    let mut rng = Rng(12345 + t);
                    let (mut operations, mut successful) = (0u64, 0u64);
                    for op in 0..OPERATIONS {
                        let frame = Frame::java(rng.range(0x1000, 0x9999), rng.range(1, 1000) as i32);
                        let id = storage.put(&[frame], false, t as usize);
                        assert_ne!(id.0, 0, "id 0 is never handed out");
                        successful += u64::from(valid(id));
                        operations += 1;
                        if op % 100 == 0 {
                            std::thread::yield_now();
                        }
                    }
                    finished.fetch_add(1, Ordering::SeqCst);
                    (operations, successful)
                })
            })
            .collect();
        let swapper = s.spawn(|| {
            let mut swaps = 0u64;
            while finished.load(Ordering::SeqCst) < THREADS {
                storage.rotate();
                let mut count = 0usize;
                storage.for_each_live(|_| count += 1);
                std::hint::black_box(count);
                swaps += 1;
            }
            swaps
        });
        let (operations, successful) = workers
            .into_iter()
            .map(|w| w.join().expect("worker panicked"))
            .fold((0, 0), |(o, s), (wo, ws)| (o + wo, s + ws));
        (operations, successful, swapper.join().expect("swapper panicked"))
    });
    assert_eq!(operations, THREADS * OPERATIONS, "every operation completed");
    assert!(swaps > 0, "no rotation happened");
    assert!(successful > 0, "no trace was stored");
}

#[test]
fn hash_table_contention_test() {
    const THREADS: u64 = 6;
    const TRACES: u64 = 3000;
    let ids = AtomicU32::new(TraceId::FIRST);
    let table = CallTraceTable::new(1 << 15, 1 << 16).unwrap();
    let stored: Vec<Vec<(u64, TraceId)>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (table, ids) = (&table, &ids);
                s.spawn(move || {
                    let mut rng = Rng(t);
                    (0..TRACES)
                        .map(|i| {
                            // Keys are per-thread (t in the high bits) and may repeat.
                            let key = t << 32 | rng.range(1, 10_000) << 16 | rng.range(0x1000, 0xFFFF);
                            if i % 500 == 0 {
                                std::thread::yield_now();
                            }
                            (key, table.put(&[Frame::java(key, (key >> 16) as i32)], false, ids))
                        })
                        .collect()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("worker panicked")).collect()
    });
    let mut by_key: HashMap<u64, TraceId> = HashMap::new();
    for &(key, id) in stored.iter().flatten() {
        assert!(valid(id), "nothing is dropped below capacity");
        assert_eq!(*by_key.entry(key).or_insert(id), id, "one stack, one id");
    }
    assert_eq!(by_key.values().collect::<HashSet<_>>().len(), by_key.len(), "distinct stacks, distinct ids");
    assert!(valid(table.put(&[Frame::java(0x99999, 99999)], false, &ids)), "the table still works");
}

/// Upstream checks that traces of up to 1024 random frames are handled
/// without overrunning buffers. Ours: such traces go in and come back
/// exactly (no frame lost, added or cut at arena boundaries), and one that
/// no longer fits the arena is refused without touching its neighbours.
#[test]
fn asgct_bounds_test() {
    const THREADS: u64 = 4;
    const TRACES: u64 = 250;
    const MAX_FRAMES: u64 = 1024;
    let ids = AtomicU32::new(TraceId::FIRST);
    let table = CallTraceTable::new(1 << 12, 1 << 20).unwrap();
    let stored: Vec<(TraceId, Vec<Frame>)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (table, ids) = (&table, &ids);
                s.spawn(move || {
                    let mut rng = Rng(0xA5 + t);
                    (0..TRACES)
                        .map(|_| {
                            let len = rng.range(1, MAX_FRAMES);
                            let frames: Vec<_> = (0..len)
                                .map(|_| Frame::java(rng.range(0x1000, 0xFFFFF), rng.next() as u32 as i32))
                                .collect();
                            (table.put(&frames, false, ids), frames)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("worker panicked")).collect()
    });
    let mut read_back = HashMap::new();
    table.for_each(|t| {
        read_back.insert(t.id, t.frames.to_vec());
    });
    assert_eq!(read_back.len(), stored.len());
    for (id, frames) in &stored {
        assert!(valid(*id));
        assert_eq!(read_back.get(id), Some(frames), "trace {id:?} read back differently");
    }

    let small = CallTraceTable::new(16, 100).unwrap();
    let first: Vec<_> = (0..60).map(|i| Frame::java(0x1000 + i, -1)).collect();
    let second: Vec<_> = (0..60).map(|i| Frame::java(0x2000 + i, i as i32)).collect();
    let first_id = small.put(&first, false, &ids);
    assert!(valid(first_id));
    assert_eq!(small.put(&second, false, &ids), TraceId::DROPPED, "the arena holds 100 frames");
    let mut left = Vec::new();
    small.for_each(|t| left.push((t.id, t.frames.to_vec())));
    assert_eq!(left, vec![(first_id, first)]);
}

/// Upstream writes random sizes into a 64-byte buffer and counts writes
/// that would overrun it. Ours: JFR encoding goes through `ByteBuf`, which
/// grows: a write past the initial 64 bytes is kept whole, never cut or
/// spilled, and what was written reads back exactly.
#[test]
fn jfr_tiny_buffer_test() {
    use jfr_writer::buffer::ByteBuf;
    const THREADS: u64 = 4;
    const OPERATIONS: u64 = 5000;
    const TINY: u64 = 64;
    let beyond_tiny: u64 = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    let mut rng = Rng(0x7177 + t);
                    let mut buffer = ByteBuf::with_capacity(TINY as usize);
                    let mut beyond = 0;
                    for i in 0..OPERATIONS {
                        let size = rng.range(1, TINY + 10) as usize;
                        let payload = vec![0xAAu8.wrapping_add((i % 16) as u8); size];
                        buffer.clear();
                        buffer.put_bytes(&payload);
                        assert_eq!(buffer.as_slice(), &payload[..]);
                        beyond += u64::from(size as u64 > TINY);
                    }
                    beyond
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("worker panicked")).sum()
    });
    assert!(beyond_tiny > 0, "some writes went past the initial capacity");
}

static PRESSURE_HANDLED: AtomicU64 = AtomicU64::new(0);
static PRESSURE_TORN: AtomicU64 = AtomicU64::new(0);

/// Reads the interrupted thread's context as a sample does. Workers always
/// write equal span ids, so unequal ones are a torn read.
extern "C" fn pressure_handler(_: c_int) {
    let tid = current_tid();
    if let Some(context) = context::state().and_then(|s| s.slots.find(tid)).and_then(|slot| slot.context()) {
        if context.span_id != context.root_span_id {
            PRESSURE_TORN.fetch_add(1, Ordering::Relaxed);
        }
    }
    PRESSURE_HANDLED.fetch_add(1, Ordering::Relaxed);
}

/// Signals at a high rate at threads that keep rewriting their context,
/// half of them with an alternate signal stack: no torn context is ever
/// seen, nothing deadlocks, and every thread finishes its writes.
#[test]
fn signal_pressure_test() {
    const WORKERS: usize = 3;
    const WRITES: u64 = 100_000;
    let _serial = signal_lock();
    PRESSURE_HANDLED.store(0, Ordering::SeqCst);
    PRESSURE_TORN.store(0, Ordering::SeqCst);
    let _handler = InstalledHandler::install(test_signal(), pressure_handler, libc::SA_RESTART | libc::SA_ONSTACK);
    let targets = Targets::new(WORKERS);
    let (sent, writes) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..WORKERS)
            .map(|index| {
                let targets = &targets;
                s.spawn(move || {
                    let mut alternate = (index % 2 == 0).then(|| vec![0u8; 64 * 1024]);
                    if let Some(stack) = alternate.as_mut() {
                        let new = libc::stack_t { ss_sp: stack.as_mut_ptr().cast(), ss_flags: 0, ss_size: stack.len() };
                        // SAFETY: the stack outlives its use: it is disabled below before being freed.
                        assert_eq!(unsafe { libc::sigaltstack(&new, std::ptr::null_mut()) }, 0);
                    }
                    context::set_spans(0, 0).unwrap();
                    targets.enter(index);
                    for n in 1..=WRITES {
                        context::set_spans(n, n).unwrap();
                        if n % 100 == 0 {
                            std::thread::yield_now();
                        }
                    }
                    targets.leave(index);
                    thread_exiting();
                    if alternate.is_some() {
                        let off = libc::stack_t { ss_sp: std::ptr::null_mut(), ss_flags: libc::SS_DISABLE, ss_size: 0 };
                        // SAFETY: not running on the alternate stack here.
                        assert_eq!(unsafe { libc::sigaltstack(&off, std::ptr::null_mut()) }, 0);
                    }
                    WRITES
                })
            })
            .collect();
        let signaller = s.spawn(|| targets.fire(test_signal(), u64::MAX, &PRESSURE_HANDLED));
        let writes: u64 = workers.into_iter().map(|w| w.join().expect("worker panicked")).sum();
        targets.stop.store(true, Ordering::SeqCst);
        (signaller.join().unwrap(), writes)
    });
    assert_eq!(writes, WORKERS as u64 * WRITES);
    assert!(sent > 0 && PRESSURE_HANDLED.load(Ordering::SeqCst) > 0, "signals were delivered");
    assert_eq!(PRESSURE_TORN.load(Ordering::SeqCst), 0, "a handler saw a torn context");
}

/// Many short-lived threads store traces, end through the agent's thread
/// end path, then keep using the storage: nothing fails, and a thread that
/// ended has no context any more.
#[test]
fn teardown_fuzz_test() {
    const THREADS: u64 = 1000;
    const BATCH: u64 = 8;
    let storage = CallTraceStorage::new(1 << 14, 1 << 16).unwrap();
    let (mut created, mut completed, mut work) = (0u64, 0u64, 0u64);
    for cycle in 0..THREADS / BATCH {
        let results: Vec<(u64, bool)> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..BATCH)
                .map(|t| {
                    let storage = &storage;
                    s.spawn(move || {
                        let tid = current_tid();
                        context::set_spans(u64::from(tid), u64::from(tid)).unwrap();
                        let stored = (0..10)
                            .filter(|w| {
                                let frame =
                                    Frame::java(0x1000 + u64::from(tid) * 16 + w, (cycle * 1000 + t * 100 + w) as i32);
                                valid(storage.put(&[frame], false, tid as usize))
                            })
                            .count() as u64;
                        thread_exiting();
                        let after: Vec<_> =
                            (0..3).map(|_| storage.put(&[Frame::java(0x999999, -1)], false, tid as usize)).collect();
                        let context_gone = context::state().unwrap().sample_context(tid) == Default::default();
                        (stored + after.iter().filter(|&&id| valid(id)).count() as u64, context_gone)
                    })
                })
                .collect();
            created += BATCH;
            threads.into_iter().map(|t| t.join().expect("thread panicked")).collect()
        });
        for (units, context_gone) in results {
            assert!(context_gone, "a thread still had context after its end");
            work += units;
            completed += 1;
        }
        if cycle % 10 == 0 {
            storage.rotate();
        }
    }
    storage.rotate();
    assert_eq!(created, completed);
    assert!(work > 0);
}

/// Upstream's ids carry an instance id per table; ours come from one
/// counter per storage. Across storages, threads and rapid rotations, an
/// id is never 0 and never names two different stacks within its storage.
#[test]
fn instance_id_trace_id_stress_test() {
    const THREADS: u64 = 6;
    const STORAGES: usize = 8;
    const OPERATIONS: u64 = 4000;
    const RAPID_SWAPS: usize = 300;
    let storages: Vec<CallTraceStorage> =
        (0..STORAGES).map(|_| CallTraceStorage::new(1 << 14, 1 << 16).unwrap()).collect();
    let results: Vec<Vec<(usize, TraceId, u64)>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let storages = &storages;
                s.spawn(move || {
                    let mut rng = Rng(0x1D + t);
                    let mut seen = Vec::new();
                    for op in 0..OPERATIONS {
                        let index = rng.range(0, STORAGES as u64 - 1) as usize;
                        let key = t << 40 | op << 20 | rng.range(1, 0xFFFFF);
                        let id = storages[index].put(&[Frame::java(key, (key & 0xFFFF) as i32)], false, t as usize);
                        assert_ne!(id.0, 0, "id 0 is never handed out");
                        if valid(id) {
                            seen.push((index, id, key));
                        }
                        if t == 0 && op % 100 == 0 {
                            for _ in 0..3 {
                                storages[index].rotate();
                            }
                        }
                    }
                    seen
                })
            })
            .collect();
        let swapper = s.spawn(|| {
            for swap in 0..RAPID_SWAPS {
                storages[swap % STORAGES].rotate();
            }
        });
        swapper.join().expect("swapper panicked");
        workers.into_iter().map(|w| w.join().expect("worker panicked")).collect()
    });
    let mut owner: HashMap<(usize, TraceId), u64> = HashMap::new();
    let mut total = 0;
    for &(index, id, key) in results.iter().flatten() {
        total += 1;
        assert_eq!(*owner.entry((index, id)).or_insert(key), key, "storage {index}: {id:?} names two stacks");
    }
    assert!(total > 0, "no id was handed out");
}

/// Many threads insert the same stacks at once, so most inserts meet a
/// slot another thread claimed and wait for its publication, which is
/// bounded: every insert returns, equal stacks agree on their id, and
/// few are given up as contended.
#[test]
fn hash_table_spin_wait_edge_cases_test() {
    const THREADS: u64 = 16;
    const OPERATIONS: u64 = 2000;
    const GROUPS: u64 = 50;
    let ids = Arc::new(AtomicU32::new(TraceId::FIRST));
    let table = Arc::new(CallTraceTable::new(1 << 12, 1 << 14).unwrap());
    let (done, results) = mpsc::channel();
    for t in 0..THREADS {
        let (ids, table, done) = (Arc::clone(&ids), Arc::clone(&table), done.clone());
        std::thread::spawn(move || {
            let mut rng = Rng(12345 + t);
            let inserted: Vec<(u64, TraceId)> = (0..OPERATIONS)
                .map(|op| {
                    let (group, member) = (rng.range(0, GROUPS - 1), rng.range(0, 19));
                    let key = group * 1000 + member;
                    if op % 50 == 0 {
                        std::thread::yield_now();
                    }
                    (key, table.put(&[Frame::java(0x100000 + group * 100 + member, key as i32)], false, &ids))
                })
                .collect();
            let _ = done.send(inserted);
        });
    }
    drop(done);
    let mut by_key: HashMap<u64, TraceId> = HashMap::new();
    let (mut stored, mut dropped) = (0u64, 0u64);
    for _ in 0..THREADS {
        let inserted = results.recv_timeout(Duration::from_secs(60)).expect("an inserting thread never finished");
        for (key, id) in inserted {
            if id == TraceId::DROPPED {
                dropped += 1;
                continue;
            }
            stored += 1;
            assert_eq!(*by_key.entry(key).or_insert(id), id, "one stack, one id");
        }
    }
    assert!(stored > 0);
    let drop_rate = dropped as f64 / (stored + dropped) as f64;
    assert!(drop_rate < 0.5, "drop rate {drop_rate}");
}

/// Large traces exhaust the arena: those are refused (DROPPED) and stay
/// refused, stored ones keep their id and frames, and no slot is left
/// claimed but unpublished (a re-insert of every stack answers at once
/// with its first answer).
#[test]
fn hash_table_allocation_failure_stress_test() {
    const THREADS: u64 = 8;
    const OPERATIONS: u64 = 300;
    const LARGE: u64 = 500;
    let ids = AtomicU32::new(TraceId::FIRST);
    let table = CallTraceTable::new(1 << 13, 1 << 18).unwrap();
    let attempts: Vec<(TraceId, Vec<Frame>)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (table, ids) = (&table, &ids);
                s.spawn(move || {
                    let mut rng = Rng(77 + t);
                    (0..OPERATIONS)
                        .map(|op| {
                            let len = rng.range(1, LARGE);
                            let frames: Vec<_> = (0..len)
                                .map(|f| {
                                    Frame::java(
                                        rng.range(0x100000, 0xFFFFFF) + f,
                                        (t * 10_000_000 + op * 1000 + f) as i32,
                                    )
                                })
                                .collect();
                            if op % 50 == 0 {
                                std::thread::yield_now();
                            }
                            (table.put(&frames, false, ids), frames)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("worker panicked")).collect()
    });
    let successful = attempts.iter().filter(|(id, _)| valid(*id)).count();
    let refused = attempts.len() - successful;
    assert!(successful > 0, "no large trace was stored");
    assert!(refused > 0, "the arena (262144 frames) cannot hold {} traces of up to {LARGE} frames", attempts.len());
    let mut read_back = HashMap::new();
    table.for_each(|t| {
        read_back.insert(t.id, t.frames.to_vec());
    });
    for (id, frames) in &attempts {
        let again = table.put(frames, false, &ids);
        if valid(*id) {
            assert_eq!(again, *id, "a stored trace keeps its id");
            assert_eq!(read_back.get(id), Some(frames));
        } else {
            assert_eq!(again, TraceId::DROPPED, "a refused trace stays refused");
        }
    }
}

static SAMPLER: AtomicPtr<Sampler> = AtomicPtr::new(std::ptr::null_mut());
static WALKS: AtomicU64 = AtomicU64::new(0);
static HANDLED: AtomicU64 = AtomicU64::new(0);

/// Stands in for AsyncGetCallTrace: 1 to 16 frames in one of 97 shapes,
/// frame `i` of shape `k` being (method 0x1000 + 64k + i, bci i).
unsafe extern "C" fn fake_walker(trace: *mut AsgctTrace, depth: i32, _ucontext: *mut c_void) {
    // SAFETY: the sampler passes a valid trace with room for `depth` frames.
    let trace = unsafe { &mut *trace };
    let shape = WALKS.fetch_add(1, Ordering::Relaxed) % 97;
    let n = depth.min(1 + (shape % 16) as i32);
    for i in 0..n {
        let method = (0x1000 + shape * 64 + i as u64) as usize;
        // SAFETY: as above.
        unsafe { trace.frames.add(i as usize).write(AsgctFrame { bci: i, method: method as _ }) };
    }
    trace.num_frames = n;
}

/// Whether `frames` is one of `fake_walker`'s shapes.
fn walker_shape(frames: &[Frame]) -> bool {
    let base = frames.first().map_or(0, |f| f.method);
    !frames.is_empty()
        && base.checked_sub(0x1000).is_some_and(|offset| offset.is_multiple_of(64))
        && frames.iter().enumerate().all(|(i, f)| f.method == base + i as u64 && f.bci == i as i32)
}

/// The real sample path (`Sampler::record`) in a signal handler.
extern "C" fn sampling_handler(_: c_int) {
    let sampler = SAMPLER.load(Ordering::SeqCst);
    if !sampler.is_null() {
        let request = SampleRequest::signal(std::ptr::null_mut(), 1, SampleKind::Cpu, None);
        // SAFETY: the test keeps the sampler alive until no thread can be
        // signalled any more, and only then clears SAMPLER.
        unsafe { &*sampler }.record(request, 0, current_tid());
    }
    HANDLED.fetch_add(1, Ordering::Relaxed);
}

/// One configuration: `signals` sent at `workers` threads storing traces,
/// and at the dumper, which rotates, drains and checks that every drained
/// sample's trace resolves to what the walker produced. Returns (signals
/// handled, samples checked).
fn signal_stress(signals: u64, workers: usize) -> (u64, u64) {
    let sampler = Arc::new(asgct_sampler(
        CallTraceStorage::new(1 << 12, 1 << 16).unwrap(),
        SampleStripes::new(1 << 12, 64).unwrap(),
        64,
        fake_walker,
    ));
    HANDLED.store(0, Ordering::SeqCst);
    SAMPLER.store(Arc::as_ptr(&sampler).cast_mut(), Ordering::SeqCst);
    let targets = Targets::new(workers + 1);
    let checked = std::thread::scope(|s| {
        for index in 0..workers {
            let (targets, sampler) = (&targets, &sampler);
            s.spawn(move || {
                targets.enter(index);
                let mut work = 0u64;
                while !targets.stop.load(Ordering::SeqCst) {
                    let frame = Frame::java(0x2000 + index as u64 * 100 + work % 50, (work % 50) as i32);
                    sampler.traces.put(&[frame], false, index);
                    work += 1;
                    if work.is_multiple_of(10) {
                        std::thread::yield_now();
                    }
                }
                targets.leave(index);
            });
        }
        let dumper = s.spawn(|| {
            targets.enter(workers);
            let (mut checked, mut drained) = (0u64, Vec::new());
            loop {
                let last = targets.stop.load(Ordering::SeqCst);
                sampler.traces.rotate();
                drained.clear();
                sampler.stripes.drain_into(&mut drained);
                let mut traces = HashMap::new();
                sampler.traces.for_each_live(|t| {
                    traces.insert(t.id.0, t.frames.to_vec());
                });
                for sample in drained.iter().filter(|r| r.trace != TraceId::DROPPED.0) {
                    let frames = traces.get(&sample.trace).unwrap_or_else(|| panic!("trace {} lost", sample.trace));
                    assert!(walker_shape(frames), "trace {} damaged: {frames:?}", sample.trace);
                    checked += 1;
                }
                if last {
                    break;
                }
                std::thread::yield_now();
            }
            targets.leave(workers);
            checked
        });
        let sent = targets.fire(test_signal(), signals * (workers as u64 + 1), &HANDLED);
        assert!(sent > 0);
        dumper.join().expect("dumper panicked")
    });
    // Every signalled thread has been joined: no handler can run any more.
    SAMPLER.store(std::ptr::null_mut(), Ordering::SeqCst);
    (HANDLED.load(Ordering::SeqCst), checked)
}

/// Upstream runs growing signal barrages in forked children, whose handler
/// stores traces while workers store and swap. Ours runs them in process,
/// with the real sample path in the handler and a dumper checking, after
/// every rotation, that no drained sample lost its trace.
#[test]
fn real_profiler_signal_stress_safe() {
    let _serial = signal_lock();
    let _handler = InstalledHandler::install(test_signal(), sampling_handler, libc::SA_RESTART);
    for (signals, workers) in [(50, 1), (200, 1), (500, 2), (1000, 2), (2000, 3)] {
        let (handled, checked) = signal_stress(signals, workers);
        assert!(handled > 0, "{signals} signals at {workers} workers: none handled");
        assert!(checked > 0, "{signals} signals at {workers} workers: no sample checked");
    }
}
