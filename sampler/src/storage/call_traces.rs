//! The call-trace table: stack traces deduplicated by content and numbered
//! with small, stable ids, filled from signal handlers.
//!
//! Layout: an open-addressing hash table of `(key, value)` slots plus an
//! arena of frames. `key` is a 64-bit hash of the frames (never 0, which
//! marks an empty slot); `value` is 0 until the inserting thread has copied
//! the frames and publishes `id << 40 | arena offset`.
//!
//! Signal-safety: inserting claims a slot with one compare-and-swap and
//! arena space with one fetch-add; nothing blocks and nothing allocates.
//! A sampler that finds a slot claimed but not yet published spins for a
//! bounded number of iterations (the publisher may be the very thread it
//! interrupted) and then reports [`TraceId::DROPPED`]. So does a full
//! table or arena: a sample is then counted, never waited for.
//!
//! Two different stacks with equal 64-bit hashes would share an id; with
//! at most a few hundred thousand traces per table the chance is below
//! 1e-8, the same trade the C++ profilers make.

use super::mapped::MappedArray;
use crate::counters::{self, Counter};
use frames::Frame;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// A stack trace's id, unique across the tables of a storage (ids come
/// from one counter); also its JFR pool key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TraceId(pub u32);

impl TraceId {
    /// Stands for every sample whose trace could not be stored.
    pub const DROPPED: TraceId = TraceId(1);
    pub const FIRST: u32 = 2;
}

const ID_SHIFT: u32 = 32;
const OFFSET_MASK: u64 = (1 << ID_SHIFT) - 1;
/// A published value meaning "this key's trace could not be stored".
const DROPPED_VALUE: u64 = (TraceId::DROPPED.0 as u64) << ID_SHIFT;
const PUBLISH_SPINS: u32 = 4096;

#[repr(C)]
struct Slot {
    key: AtomicU64,
    value: AtomicU64,
}

// SAFETY: two zeroed atomics are an empty slot.
unsafe impl super::mapped::Zeroable for Slot {}

/// Per-trace header stored in the arena just before the frames.
fn header(len: usize, truncated: bool) -> Frame {
    Frame::java(len as u64, i32::from(truncated))
}

pub struct CallTraceTable {
    slots: MappedArray<Slot>,
    mask: usize,
    /// Insertions stop at this many traces (load factor 3/4).
    max_traces: u32,
    traces: AtomicU32,
    arena: MappedArray<Frame>,
    arena_used: AtomicUsize,
}

/// A stored trace as read back at dump time.
#[derive(Clone, Copy, Debug)]
pub struct StoredTrace<'a> {
    pub id: TraceId,
    pub truncated: bool,
    pub frames: &'a [Frame],
}

impl CallTraceTable {
    /// A table for up to 3/4 of `capacity` traces (rounded up to a power of
    /// two) holding up to `arena_frames` frames in total. Not signal-safe.
    pub fn new(capacity: usize, arena_frames: usize) -> std::io::Result<Self> {
        let capacity = capacity.next_power_of_two().max(16);
        Ok(Self {
            slots: MappedArray::new(capacity)?,
            mask: capacity - 1,
            max_traces: (capacity / 4 * 3) as u32,
            traces: AtomicU32::new(0),
            arena: MappedArray::new(arena_frames)?,
            arena_used: AtomicUsize::new(0),
        })
    }

    /// Stores `frames` (innermost first) and returns the trace's id, taking
    /// new ids from `ids`. Signal-safe: no allocation, no blocking.
    pub fn put(&self, frames: &[Frame], truncated: bool, ids: &AtomicU32) -> TraceId {
        self.put_keyed(trace_key(frames, truncated), frames, truncated, ids)
    }

    /// [`put`](Self::put) of a trace whose key (`trace_key(frames,
    /// truncated)`) the caller has. Signal-safe.
    pub fn put_keyed(&self, key: u64, frames: &[Frame], truncated: bool, ids: &AtomicU32) -> TraceId {
        let mut index = key as usize & self.mask;
        for _ in 0..=self.mask {
            let slot = self.slots.get(index);
            let current = slot.key.load(Ordering::Acquire);
            if current == key {
                return self.await_published(slot);
            }
            if current == 0 {
                if self.traces.load(Ordering::Relaxed) >= self.max_traces {
                    counters::increment(Counter::TracesDroppedTableFull);
                    return TraceId::DROPPED;
                }
                match slot.key.compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => {
                        self.traces.fetch_add(1, Ordering::Relaxed);
                        return self.publish(slot, frames, truncated, ids);
                    }
                    Err(winner) if winner == key => return self.await_published(slot),
                    Err(_) => {} // another trace took the slot: keep probing
                }
            }
            index = (index + 1) & self.mask;
        }
        counters::increment(Counter::TracesDroppedTableFull);
        TraceId::DROPPED
    }

    fn publish(&self, slot: &Slot, frames: &[Frame], truncated: bool, ids: &AtomicU32) -> TraceId {
        let needed = frames.len() + 1;
        let offset = self.arena_used.fetch_add(needed, Ordering::Relaxed);
        let id = ids.fetch_add(1, Ordering::Relaxed);
        if offset + needed > self.arena.len() || offset > OFFSET_MASK as usize || id < TraceId::FIRST {
            counters::increment(Counter::TracesDroppedArenaFull);
            slot.value.store(DROPPED_VALUE, Ordering::Release);
            return TraceId::DROPPED;
        }
        // SAFETY: `offset..offset + needed` is inside the arena and was
        // handed to this thread alone by the fetch_add above; readers only
        // look at it after the Release store below.
        unsafe {
            let base = self.arena.as_ptr().add(offset);
            base.write(header(frames.len(), truncated));
            std::ptr::copy_nonoverlapping(frames.as_ptr(), base.add(1), frames.len());
        }
        slot.value.store(u64::from(id) << ID_SHIFT | offset as u64, Ordering::Release);
        TraceId(id)
    }

    fn await_published(&self, slot: &Slot) -> TraceId {
        for _ in 0..PUBLISH_SPINS {
            let value = slot.value.load(Ordering::Acquire);
            if value != 0 {
                return TraceId((value >> ID_SHIFT) as u32);
            }
            std::hint::spin_loop();
        }
        counters::increment(Counter::TracesDroppedContended);
        TraceId::DROPPED
    }

    /// Number of traces stored.
    pub fn len(&self) -> usize {
        self.traces.load(Ordering::Relaxed) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Empties the table and returns its memory. The caller guarantees no
    /// sampler is inside (hazards drained).
    pub fn clear(&self) {
        self.slots.reset();
        self.arena.reset();
        self.traces.store(0, Ordering::Relaxed);
        self.arena_used.store(0, Ordering::Relaxed);
    }

    /// The published trace whose key ([`trace_key`]) is `key`, if this
    /// table holds it. Not signal-safe: the caller keeps the table from
    /// being cleared while it reads (hazard protection).
    pub fn find(&self, key: u64) -> Option<StoredTrace<'_>> {
        let mut index = key as usize & self.mask;
        for _ in 0..=self.mask {
            let slot = self.slots.get(index);
            match slot.key.load(Ordering::Acquire) {
                0 => return None,
                current if current == key => return self.stored(slot.value.load(Ordering::Acquire)),
                _ => index = (index + 1) & self.mask,
            }
        }
        None
    }

    /// The trace a slot's published value points at (none if unpublished
    /// or dropped).
    fn stored(&self, value: u64) -> Option<StoredTrace<'_>> {
        if value == 0 || value == DROPPED_VALUE {
            return None;
        }
        let offset = (value & OFFSET_MASK) as usize;
        // SAFETY: a published offset points at a header and its frames,
        // fully written before the Release store that published them.
        let (header, frames) = unsafe {
            let base = self.arena.as_ptr().add(offset);
            let header = *base;
            (header, std::slice::from_raw_parts(base.add(1), header.method as usize))
        };
        Some(StoredTrace { id: TraceId((value >> ID_SHIFT) as u32), truncated: header.bci != 0, frames })
    }

    /// Visits every published trace. Not signal-safe; meant for the dump,
    /// which reads traces whose samples it has already drained (so their
    /// publication happened before).
    pub fn for_each(&self, mut visit: impl FnMut(StoredTrace<'_>)) {
        for index in 0..=self.mask {
            if let Some(trace) = self.stored(self.slots.get(index).value.load(Ordering::Acquire)) {
                visit(trace);
            }
        }
    }
}

/// A trace's key in every table: a 64-bit hash of its frames; never 0.
/// Signal-safe.
pub fn trace_key(frames: &[Frame], truncated: bool) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = (frames.len() as u64).wrapping_mul(K) ^ u64::from(truncated);
    for frame in frames {
        h = (h ^ frame.method).wrapping_mul(K).rotate_left(29);
        h = (h ^ (u64::from(frame.bci as u32) << 8 | frame.kind as u64)).wrapping_mul(K).rotate_left(31);
    }
    // fmix64 finalizer (MurmurHash3).
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Arc;

    fn ids() -> AtomicU32 {
        AtomicU32::new(TraceId::FIRST)
    }

    fn trace(seed: u64, depth: usize) -> Vec<Frame> {
        (0..depth).map(|i| Frame::java(seed * 1000 + i as u64, i as i32)).collect()
    }

    #[test]
    fn equal_traces_share_an_id_and_ids_are_small_and_sequential() {
        let ids = ids();
        let table = CallTraceTable::new(1024, 1 << 16).unwrap();
        let a = table.put(&trace(1, 5), false, &ids);
        let b = table.put(&trace(2, 5), false, &ids);
        assert_eq!((a, b), (TraceId(2), TraceId(3)));
        assert_eq!(table.put(&trace(1, 5), false, &ids), a);
        assert_ne!(table.put(&trace(1, 5), true, &ids), a, "truncation is part of the identity");
        assert_eq!(table.len(), 3);
    }

    #[test]
    fn stored_frames_read_back_in_order() {
        let ids = ids();
        let table = CallTraceTable::new(64, 1024).unwrap();
        let frames = trace(7, 9);
        let id = table.put(&frames, true, &ids);
        let mut seen = 0;
        table.for_each(|t| {
            assert_eq!(t.id, id);
            assert!(t.truncated);
            assert_eq!(t.frames, &frames[..]);
            seen += 1;
        });
        assert_eq!(seen, 1);
    }

    #[test]
    fn full_table_returns_the_dropped_id() {
        let counter = ids();
        let table = CallTraceTable::new(16, 1 << 12).unwrap();
        let ids: Vec<_> = (0..20).map(|i| table.put(&trace(i, 3), false, &counter)).collect();
        assert_eq!(ids.iter().filter(|&&id| id == TraceId::DROPPED).count(), 8, "12 of 16 slots usable");
        // Known traces are still found when the table is full.
        assert_eq!(table.put(&trace(0, 3), false, &counter), ids[0]);
    }

    #[test]
    fn full_arena_returns_the_dropped_id_consistently() {
        let ids = ids();
        let table = CallTraceTable::new(64, 10).unwrap();
        assert_ne!(table.put(&trace(1, 4), false, &ids), TraceId::DROPPED);
        assert_eq!(table.put(&trace(2, 8), false, &ids), TraceId::DROPPED);
        assert_eq!(table.put(&trace(2, 8), false, &ids), TraceId::DROPPED);
    }

    #[test]
    fn concurrent_inserts_agree_on_ids() {
        let shared = Arc::new(ids());
        let table = Arc::new(CallTraceTable::new(1 << 14, 1 << 20).unwrap());
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let (table, ids) = (Arc::clone(&table), Arc::clone(&shared));
                std::thread::spawn(move || {
                    (0..2000).map(|i| (i, table.put(&trace(i % 500, 6), false, &ids))).collect::<Vec<_>>()
                })
            })
            .collect();
        let mut by_trace: HashMap<u64, TraceId> = HashMap::new();
        let mut contended = 0;
        for worker in workers {
            for (i, id) in worker.join().unwrap() {
                // A put that met a slot claimed but not yet published by a
                // thread preempted in between gives up (by design).
                if id == TraceId::DROPPED {
                    contended += 1;
                    continue;
                }
                assert_eq!(*by_trace.entry(i % 500).or_insert(id), id);
            }
        }
        assert!(contended <= 80, "{contended} of 8000 puts gave up waiting");
        assert_eq!(table.len(), by_trace.len());
        let mut distinct: Vec<_> = by_trace.values().collect();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), by_trace.len());
    }
}
