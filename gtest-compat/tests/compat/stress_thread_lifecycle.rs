//! Port of upstream `stress_threadLifecycle` (see gtest-compat/README.md).
//!
//! Upstream drives its per-thread lifecycle (ProfiledThread init/release,
//! thread-filter slot register/add/remove/unregister) from many threads
//! while a dump thread processes the trace storage under all shard locks.
//! Ours: a thread's context slot (`context::filter_thread` registers it
//! and sets its filter flag) released by `entry::thread_exiting`, samples
//! written under a stripe taken with `try_acquire` (our shard locks), and
//! a dump that rotates the storage, drains the stripes and reads the live
//! traces, as `recording` does.

use frames::Frame;
use profiler_agent::ffi::entry::thread_exiting;
use sampler::context;
use sampler::os_thread::current_tid;
use sampler::storage::call_traces::TraceId;
use sampler::storage::samples::{SampleRecord, SampleStripes};
use sampler::storage::trace_storage::CallTraceStorage;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

const CHURN_WORKERS: usize = 16;
const CHURN_ITERATIONS: u64 = 2000;

/// The four frames a worker records for `salt`.
fn stack(salt: u64) -> [Frame; 4] {
    std::array::from_fn(|i| Frame::java(0x1000 + i as u64 + salt, (i as u64 + salt) as i32))
}

/// Writes one sample the way the handler does: a stripe taken without
/// waiting (or no sample), the trace stored, the record pushed.
fn record_trace(storage: &CallTraceStorage, stripes: &SampleStripes, salt: u64, tid: u32) {
    if let Some(mut stripe) = stripes.try_acquire(tid) {
        let id = storage.put(&stack(salt), false, tid as usize);
        stripe.push(SampleRecord { time_ns: salt, tid, trace: id.0, ..Default::default() });
    }
}

/// One thread's start-work-end cycles, `CHURN_ITERATIONS` times.
fn churn_worker(dump: Option<(&CallTraceStorage, &SampleStripes)>) {
    let slots = &context::init().unwrap().slots;
    for i in 0..CHURN_ITERATIONS {
        let tid = current_tid();
        context::filter_thread(true).unwrap();
        let own = slots.find(tid).expect("a registered thread has a slot");
        assert!(own.in_filter());
        if let Some((storage, stripes)) = dump {
            record_trace(storage, stripes, i, tid);
        }
        std::thread::yield_now();
        context::filter_thread(false).unwrap();
        thread_exiting();
        assert!(slots.find(tid).is_none(), "the thread end path released the slot");
    }
}

#[test]
fn smoke() {
    let storage = CallTraceStorage::new(1 << 10, 1 << 12).unwrap();
    storage.rotate();
    storage.rotate();
    let mut live = 0;
    storage.for_each_live(|_| live += 1);
    assert_eq!(live, 0);
}

#[test]
fn churn_only() {
    std::thread::scope(|s| {
        for _ in 0..CHURN_WORKERS {
            s.spawn(|| churn_worker(None));
        }
    });
}

/// Churn while a dump thread rotates and drains: every drained sample's
/// trace is readable, with the frames its thread stored.
#[test]
fn churn_during_dump() {
    let storage = CallTraceStorage::new(1 << 14, 1 << 17).unwrap();
    let stripes = SampleStripes::new(1 << 12, 8).unwrap();
    let finished = AtomicUsize::new(0);
    let (rotations, checked) = std::thread::scope(|s| {
        for _ in 0..CHURN_WORKERS {
            let (storage, stripes, finished) = (&storage, &stripes, &finished);
            s.spawn(move || {
                churn_worker(Some((storage, stripes)));
                finished.fetch_add(1, Ordering::SeqCst);
            });
        }
        s.spawn(|| {
            let (mut rotations, mut checked, mut drained) = (0u64, 0u64, Vec::new());
            loop {
                let last = finished.load(Ordering::SeqCst) == CHURN_WORKERS;
                storage.rotate();
                rotations += 1;
                drained.clear();
                stripes.drain_into(&mut drained);
                let mut traces = HashMap::new();
                storage.for_each_live(|t| {
                    traces.insert(t.id.0, t.frames.to_vec());
                });
                for sample in drained.iter().filter(|r| r.trace != TraceId::DROPPED.0) {
                    assert_eq!(traces.get(&sample.trace).map(Vec::as_slice), Some(&stack(sample.time_ns)[..]));
                    checked += 1;
                }
                if last {
                    return (rotations, checked);
                }
                std::thread::yield_now();
            }
        })
        .join()
        .expect("dump thread failed")
    });
    assert!(rotations > 1 && checked > 0, "{rotations} rotations, {checked} samples checked");
}
