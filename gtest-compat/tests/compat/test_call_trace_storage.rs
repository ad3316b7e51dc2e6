//! Port of upstream `test_callTraceStorage` (see gtest-compat/README.md).
//!
//! Upstream's storage swaps tables on `processTraces` and can carry traces
//! a liveness checker names into the next table; its hash table grows by
//! chaining generations. Ours (`storage::trace_storage`) rotates three
//! fixed-capacity tables: after `rotate()` the previous active table is the
//! dump table, readable through `for_each_live` until the next rotation,
//! and a full table answers `TraceId::DROPPED`. Ids come from one counter,
//! so an id names one trace in every table. There is no liveness checker
//! and no dropped-trace sentinel entry, so counts below carry no "+1".

use frames::Frame;
use sampler::storage::call_traces::{CallTraceTable, TraceId};
use sampler::storage::samples::{SampleRecord, SampleStripes};
use sampler::storage::trace_storage::CallTraceStorage;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// The agent's table size (`agent/src/session/mod.rs`: 1 << 17 slots, 3/4 usable).
const AGENT_SLOTS: usize = 1 << 17;

fn frame(method: u64, bci: i32) -> Frame {
    Frame::java(method, bci)
}

fn small_storage() -> CallTraceStorage {
    CallTraceStorage::new(1 << 10, 1 << 14).unwrap()
}

fn valid(id: TraceId) -> bool {
    id.0 >= TraceId::FIRST
}

/// Every trace `for_each_live` shows: id -> (truncated, frames).
fn live(storage: &CallTraceStorage) -> HashMap<TraceId, (bool, Vec<Frame>)> {
    let mut traces = HashMap::new();
    storage.for_each_live(|t| {
        assert!(traces.insert(t.id, (t.truncated, t.frames.to_vec())).is_none(), "id {:?} listed twice", t.id);
    });
    traces
}

fn table_traces(table: &CallTraceTable) -> HashMap<TraceId, Vec<Frame>> {
    let mut traces = HashMap::new();
    table.for_each(|t| {
        traces.insert(t.id, t.frames.to_vec());
    });
    traces
}

/// The `i`-th of a family of distinct one-frame traces, built as upstream's
/// expansion tests build them (bci `i`, method `i + 1`).
fn distinct(i: u32) -> [Frame; 1] {
    [frame(u64::from(i) + 1, i as i32)]
}

#[test]
fn basic_functionality() {
    let storage = small_storage();
    let id = storage.put(&[frame(0x1234, 10)], false, 1);
    assert!(valid(id), "a stored trace gets a real id, got {id:?}");
    storage.rotate();
    let traces = live(&storage);
    assert_eq!(traces.get(&id), Some(&(false, vec![frame(0x1234, 10)])));
}

#[test]
fn trace_id_preservation() {
    let storage = small_storage();
    let original = storage.put(&[frame(0x1234, 10)], false, 1);
    assert!(valid(original));
    storage.rotate();
    // The interval's traces stay readable after the rotation, under the
    // same id and with intact frames (upstream reads them after the swap).
    let traces = live(&storage);
    assert_eq!(traces.len(), 1);
    assert_eq!(traces.get(&original), Some(&(false, vec![frame(0x1234, 10)])));
    // The same stack seen again lands in the new table under a new id; the
    // old id keeps naming the old trace: ids never alias.
    let again = storage.put(&[frame(0x1234, 10)], false, 1);
    assert!(valid(again) && again != original);
    let traces = live(&storage);
    assert_eq!(traces.get(&original).map(|t| &t.1), Some(&vec![frame(0x1234, 10)]));
    assert_eq!(traces.get(&again).map(|t| &t.1), Some(&vec![frame(0x1234, 10)]));
}

#[test]
fn clear_method() {
    let ids = AtomicU32::new(TraceId::FIRST);
    let table = CallTraceTable::new(64, 1024).unwrap();
    for i in 0..5 {
        assert!(valid(table.put(&[frame(0x1234 + i, 10)], false, &ids)));
    }
    table.clear();
    assert_eq!(table.len(), 0);
    assert!(table_traces(&table).is_empty(), "no trace survives clear()");
}

#[test]
fn concurrent_clear_and_put() {
    let ids = AtomicU32::new(TraceId::FIRST);
    let table = CallTraceTable::new(64, 1024).unwrap();
    let first = table.put(&[frame(0x1234, 10)], false, &ids);
    assert!(valid(first));
    table.clear();
    let after = table.put(&[frame(0x1234, 10)], false, &ids);
    assert!(valid(after), "a cleared table takes traces again");
    assert_eq!(table_traces(&table), HashMap::from([(after, vec![frame(0x1234, 10)])]));
}

#[test]
fn concurrent_table_expansion_regression() {
    const THREADS: u64 = 4;
    const PER_THREAD: u64 = 2000;
    let ids = AtomicU32::new(TraceId::FIRST);
    let table = CallTraceTable::new(1 << 14, 1 << 16).unwrap();
    let results: Vec<Vec<TraceId>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (table, ids) = (&table, &ids);
                s.spawn(move || {
                    (0..PER_THREAD)
                        .map(|i| {
                            let unique = t * 1000 + i;
                            let id = table.put(&[frame(0x1000 + unique, unique as i32)], false, ids);
                            if i % 100 == 0 {
                                std::thread::yield_now();
                            }
                            id
                        })
                        .collect()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("worker panicked")).collect()
    });
    // Upstream's keys overlap between threads (t * 1000 + i): equal stacks
    // must agree on their id, distinct ones must not share one.
    // Below capacity a put gives up only when it met a slot another thread
    // claimed and had not published yet (that thread preempted in between):
    // rare, and such a trace is not stored at all.
    let mut by_key: HashMap<u64, TraceId> = HashMap::new();
    let mut contended = 0;
    for (t, ids_of_thread) in results.iter().enumerate() {
        for (i, &id) in ids_of_thread.iter().enumerate() {
            if id == TraceId::DROPPED {
                contended += 1;
                continue;
            }
            assert!(valid(id));
            assert_eq!(*by_key.entry(t as u64 * 1000 + i as u64).or_insert(id), id);
        }
    }
    assert!(contended * 100 <= THREADS * PER_THREAD, "{contended} puts gave up waiting");
    let distinct_ids: HashSet<_> = by_key.values().collect();
    assert_eq!(distinct_ids.len(), by_key.len());
    assert_eq!(table.len(), by_key.len());
    assert!(valid(table.put(&[frame(0x99999, 99999)], false, &ids)), "the table still works");
}

/// Rotations while samplers insert: a sample drained after a rotation
/// must find its trace in the dump or the active table, with the frames
/// it stored. That holds only if the rotation waited for inserts still in
/// the old active table (hazards) and cleared only the table nobody reads.
/// Workers follow the handler's order (stripe, put, push).
#[test]
fn hazard_pointer_synchronization_during_swap() {
    const WORKERS: u64 = 3;
    const PUTS: u64 = 20_000;
    let storage = CallTraceStorage::new(1 << 12, 1 << 16).unwrap();
    let stripes = SampleStripes::new(1 << 12, 8).unwrap();
    let finished = AtomicU64::new(0);
    let stack = |key: u64| [frame(key, 1), frame(key ^ 0x5555, 2)];
    let (rotations, checked) = std::thread::scope(|s| {
        for w in 0..WORKERS {
            let (storage, stripes, finished) = (&storage, &stripes, &finished);
            s.spawn(move || {
                for i in 0..PUTS {
                    let key = w << 32 | (i % 300);
                    if let Some(mut stripe) = stripes.try_acquire(w as u32) {
                        let id = storage.put(&stack(key), false, w as usize);
                        stripe.push(SampleRecord { time_ns: key, tid: w as u32, trace: id.0, ..Default::default() });
                    }
                }
                finished.fetch_add(1, Ordering::SeqCst);
            });
        }
        let dumper = s.spawn(|| {
            let (mut rotations, mut checked) = (0u64, 0u64);
            let mut drained = Vec::new();
            loop {
                let last = finished.load(Ordering::SeqCst) == WORKERS;
                storage.rotate();
                rotations += 1;
                drained.clear();
                stripes.drain_into(&mut drained);
                let traces = live(&storage);
                for record in drained.iter().filter(|r| r.trace != TraceId::DROPPED.0) {
                    let stored = traces.get(&TraceId(record.trace)).map(|t| t.1.as_slice());
                    assert_eq!(stored, Some(&stack(record.time_ns)[..]), "sample trace {} lost", record.trace);
                    checked += 1;
                }
                // At least two rounds, even if the workers finished first.
                if last && rotations >= 2 {
                    return (rotations, checked);
                }
            }
        });
        dumper.join().expect("dumper panicked")
    });
    assert!(rotations > 1 && checked > 0, "{rotations} rotations, {checked} samples checked");
}

/// Upstream's ordering: traces stored, a rotation (on its own thread)
/// collects them, then two threads insert into the new active table.
#[test]
fn ref_count_guard_synchronization_during_swap() {
    let storage = small_storage();
    for i in 0..5 {
        assert!(valid(storage.put(&[frame(0x1000, 100 + i)], false, 0)));
    }
    let initial = std::thread::scope(|s| {
        s.spawn(|| {
            storage.rotate();
            let mut initial = 0;
            storage.for_each_live(|t| initial += usize::from(matches!(t.frames[0].bci, 100..=104)));
            initial
        })
        .join()
        .unwrap()
    });
    assert_eq!(initial, 5, "the rotation's readers see the interval's traces");
    let (put, delayed) = std::thread::scope(|s| {
        let put = s.spawn(|| storage.put(&[frame(0x999, 999)], false, 1));
        let delayed = s.spawn(|| storage.put(&[frame(0x777, 777)], false, 2));
        (put.join().unwrap(), delayed.join().unwrap())
    });
    assert!(valid(put) && valid(delayed) && put != delayed);
    let verification = storage.put(&[frame(0x5555, 5555)], false, 3);
    assert!(valid(verification), "storage keeps working after the rotation");
    let traces = live(&storage);
    for (id, f) in [(put, frame(0x999, 999)), (delayed, frame(0x777, 777)), (verification, frame(0x5555, 5555))] {
        assert_eq!(traces.get(&id).map(|t| &t.1), Some(&vec![f]));
    }
}

/// Upstream's bug: the processor read traces from a table already freed
/// by the swap. Ours: the table a rotation clears is never one the
/// following `for_each_live` reads; traces of the finished interval are
/// read whole, frame by frame, after the rotation and again after the next
/// interval's traces were stored.
#[test]
fn use_after_free_in_process_traces() {
    const TRACES: u64 = 100;
    const FRAMES: u64 = 20;
    let stack = |i: u64, base: u64| -> Vec<Frame> {
        (0..FRAMES).map(|j| frame(base + i * 100 + j, (i * 1000 + j) as i32)).collect()
    };
    let storage = CallTraceStorage::new(1 << 10, 1 << 16).unwrap();
    let first: Vec<_> = (0..TRACES).map(|i| (storage.put(&stack(i, 0x10000), false, 0), stack(i, 0x10000))).collect();
    assert!(first.iter().all(|(id, _)| valid(*id)));
    storage.rotate();
    let second: Vec<_> = (0..TRACES).map(|i| (storage.put(&stack(i, 0x90000), false, 0), stack(i, 0x90000))).collect();
    let traces = live(&storage);
    assert_eq!(traces.len(), 2 * TRACES as usize);
    for (id, frames) in first.iter().chain(&second) {
        assert_eq!(traces.get(id), Some(&(false, frames.clone())), "trace {id:?} damaged");
    }
    // The next rotation clears the first interval's table; the second's,
    // now the dump table, is still whole.
    storage.rotate();
    let traces = live(&storage);
    assert_eq!(traces.len(), TRACES as usize);
    for (id, frames) in &second {
        assert_eq!(traces.get(id), Some(&(false, frames.clone())), "trace {id:?} damaged");
    }
}

/// Upstream: inserting into a full table must not probe forever. Ours: a
/// full table answers DROPPED at once, and known traces are still found.
#[test]
fn put_with_existing_id_no_infinite_loop_when_full() {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let ids = AtomicU32::new(TraceId::FIRST);
        let table = CallTraceTable::new(64, 1 << 12).unwrap();
        let stored: Vec<_> = (0..48).map(|i| table.put(&distinct(i), false, &ids)).collect();
        let overflow: Vec<_> = (48..48 + 128).map(|i| table.put(&distinct(i), false, &ids)).collect();
        let again = table.put(&distinct(7), false, &ids);
        let _ = done.send((stored, overflow, again));
    });
    let (stored, overflow, again) =
        finished.recv_timeout(Duration::from_secs(10)).expect("put into a full table did not return within 10 s");
    assert!(stored.iter().all(|&id| valid(id)), "48 of 64 slots are usable");
    assert!(overflow.iter().all(|&id| id == TraceId::DROPPED));
    assert_eq!(again, stored[7]);
}

#[test]
fn clear_table_only_disconnects_full_chain() {
    const TRACES: u32 = 50_000;
    let storage = CallTraceStorage::new(AGENT_SLOTS, 1 << 17).unwrap();
    for i in 0..TRACES {
        let id = storage.put(&[frame(u64::from(i) + 1, (i % 1000) as i32)], false, 0);
        assert!(valid(id), "trace {i} dropped");
    }
    storage.rotate();
    assert_eq!(live(&storage).len(), TRACES as usize);
    // Two rotations without inserts: the full table was cleared on the way
    // and comes back as the active one, without stale entries.
    storage.rotate();
    assert!(live(&storage).is_empty());
    storage.rotate();
    assert!(live(&storage).is_empty());
    let fresh = storage.put(&[frame(0xabc, 1)], false, 0);
    assert_eq!(live(&storage).into_keys().collect::<Vec<_>>(), vec![fresh]);
}

#[test]
fn collect_finds_all_traces_across_expanded_chain() {
    const TRACES: u32 = 50_000;
    let storage = CallTraceStorage::new(AGENT_SLOTS, 1 << 17).unwrap();
    let inserted: HashSet<TraceId> =
        (0..TRACES).map(|i| storage.put(&[frame(u64::from(i) + 1, (i % 1000) as i32)], false, 0)).collect();
    assert!(!inserted.contains(&TraceId::DROPPED));
    storage.rotate();
    let seen: HashSet<TraceId> = live(&storage).into_keys().collect();
    assert_eq!(seen, inserted);
}

#[test]
fn expansion_produces_no_duplicate_trace_ids() {
    // Upstream's count: past its first growth threshold, plus 1000 more.
    const TOTAL: u32 = 49_152 + 100 + 1000;
    let ids = AtomicU32::new(TraceId::FIRST);
    let table = CallTraceTable::new(AGENT_SLOTS, 1 << 17).unwrap();
    let mut seen = HashSet::new();
    for i in 0..TOTAL {
        let id = table.put(&distinct(i), false, &ids);
        assert!(valid(id), "trace {i} dropped");
        assert!(seen.insert(id), "id {id:?} handed out twice");
    }
}

#[test]
fn trace_id_stable_across_expansion() {
    let ids = AtomicU32::new(TraceId::FIRST);
    let table = CallTraceTable::new(AGENT_SLOTS, 1 << 17).unwrap();
    let original = [frame(0xdead_beef, 999_999_999)];
    let id = table.put(&original, false, &ids);
    assert!(valid(id));
    for i in 0..49_152 + 100 {
        table.put(&distinct(i), false, &ids);
    }
    assert_eq!(table.put(&original, false, &ids), id);
}

/// Upstream grows twice within one tenure. Ours does not grow: a table of
/// the agent's size keeps 3/4 of its slots; what it cannot hold is
/// DROPPED, and ids stay unique either way.
#[test]
fn two_expansions_within_one_tenure_no_duplicate_trace_ids() {
    const TOTAL: u32 = 49_152 + 98_304 + 100;
    let ids = AtomicU32::new(TraceId::FIRST);
    let table = CallTraceTable::new(AGENT_SLOTS, 1 << 19).unwrap();
    let mut seen = HashSet::new();
    let mut dropped = 0u32;
    for i in 0..TOTAL {
        let id = table.put(&distinct(i), false, &ids);
        if id == TraceId::DROPPED {
            dropped += 1;
        } else {
            assert!(valid(id) && seen.insert(id), "id {id:?} invalid or handed out twice");
        }
    }
    assert_eq!(seen.len(), AGENT_SLOTS / 4 * 3, "a table holds 3/4 of its slots");
    assert_eq!(dropped as usize, TOTAL as usize - seen.len());
}

/// Upstream guards its slot-id arithmetic against 2^32. Ours: the id
/// counter wrapping past u32::MAX must never hand out 0 or the DROPPED id
/// as a trace's own id; such traces are stored as dropped, consistently.
#[test]
fn rejects_only_values_that_exceed_slot_id_range() {
    let ids = AtomicU32::new(u32::MAX - 1);
    let table = CallTraceTable::new(64, 1024).unwrap();
    let below = table.put(&distinct(1), false, &ids);
    let at_max = table.put(&distinct(2), false, &ids);
    assert_eq!((below, at_max), (TraceId(u32::MAX - 1), TraceId(u32::MAX)));
    let wrapped_to_zero = table.put(&distinct(3), false, &ids);
    let wrapped_to_dropped = table.put(&distinct(4), false, &ids);
    assert_eq!((wrapped_to_zero, wrapped_to_dropped), (TraceId::DROPPED, TraceId::DROPPED));
    assert_eq!(table.put(&distinct(3), false, &ids), TraceId::DROPPED, "the refused trace stays refused");
    assert_eq!(table.put(&distinct(5), false, &ids), TraceId(TraceId::FIRST));
    let listed: HashSet<_> = table_traces(&table).into_keys().collect();
    assert_eq!(listed, HashSet::from([below, at_max, TraceId(TraceId::FIRST)]));
}

/// Upstream doubles capacity per generation. Ours: the capacity is fixed
/// at construction, rounded up to a power of two (at least 16), of which
/// 3/4 is usable.
#[test]
fn next_generation_capacity_is_double() {
    for (requested, usable) in [(0, 12), (1, 12), (100, 96), (65_536, 49_152)] {
        let ids = AtomicU32::new(TraceId::FIRST);
        let table = CallTraceTable::new(requested, 1 << 17).unwrap();
        let stored = (0..).take_while(|&i| valid(table.put(&distinct(i), false, &ids))).count();
        assert_eq!(stored, usable, "capacity {requested}");
        assert_eq!(table.len(), usable);
    }
}
