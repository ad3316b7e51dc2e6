//! Call traces in three tables with rotating roles (active, dump,
//! scratch), like the dictionaries: samplers insert into the active table
//! under hazard protection; a chunk's stack traces are read from the dump
//! table (the previous active) and the active one; the scratch table is
//! cleared, once its readers left, to become active next. Trace ids come
//! from one counter, so an id means one trace in every table; a stack seen
//! again after a rotation gets a new id in the new table. Memory is bounded
//! by two tables and returned as tables are cleared.

use super::call_traces::{trace_key, CallTraceTable, StoredTrace, TraceId};
use crate::counters::{self, Counter};
use crate::dictionary::hazard::Hazards;
use frames::Frame;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;

pub struct CallTraceStorage {
    tables: [CallTraceTable; 3],
    active: AtomicUsize,
    ids: AtomicU32,
    hazards: Hazards,
    rotation: Mutex<()>,
}

impl CallTraceStorage {
    /// Three tables of `capacity` slots and `arena_frames` frames each
    /// (reserved; committed as used). Not signal-safe.
    pub fn new(capacity: usize, arena_frames: usize) -> std::io::Result<Self> {
        Ok(Self {
            tables: [
                CallTraceTable::new(capacity, arena_frames)?,
                CallTraceTable::new(capacity, arena_frames)?,
                CallTraceTable::new(capacity, arena_frames)?,
            ],
            active: AtomicUsize::new(0),
            ids: AtomicU32::new(TraceId::FIRST),
            hazards: Hazards::new(),
            rotation: Mutex::new(()),
        })
    }

    fn address(&self, index: usize) -> usize {
        self.tables.get(index % 3).map_or(0, |table| table as *const CallTraceTable as usize)
    }

    fn active_address(&self) -> usize {
        self.address(self.active.load(Ordering::SeqCst))
    }

    /// Stores a trace in the active table. Signal-safe; `hint` (a thread
    /// id) spreads hazard slots.
    pub fn put(&self, frames: &[Frame], truncated: bool, hint: usize) -> TraceId {
        self.put_keyed(trace_key(frames, truncated), frames, truncated, hint)
    }

    /// [`put`](Self::put) for a caller that already has the trace's key
    /// (`trace_key(frames, truncated)`). Signal-safe.
    pub fn put_keyed(&self, key: u64, frames: &[Frame], truncated: bool, hint: usize) -> TraceId {
        let Some(guard) = self.hazards.protect(hint, || self.active_address()) else {
            counters::increment(Counter::TracesDroppedContended);
            return TraceId::DROPPED;
        };
        // SAFETY: the guard protects one of our own tables.
        let table = unsafe { &*(guard.protected() as *const CallTraceTable) };
        table.put_keyed(key, frames, truncated, &self.ids)
    }

    /// Starts a new active table; waits for samplers still inserting into
    /// the old one and clears the table before it. Not signal-safe.
    #[allow(clippy::indexing_slicing)]
    pub fn rotate(&self) {
        let _rotating = self.rotation.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.active.load(Ordering::SeqCst);
        self.active.store((old + 1) % 3, Ordering::SeqCst);
        self.hazards.wait_unused(self.address(old));
        let scratch = (old + 2) % 3;
        self.hazards.wait_unused(self.address(scratch));
        self.tables[scratch].clear();
    }

    /// Copies the frames of the trace whose key is `key` (see
    /// [`trace_key`](super::call_traces::trace_key)) into `out`, from the
    /// active table or else the dump table, under hazard protection;
    /// returns whether the trace was truncated, or `None` if neither table
    /// holds it (any more). Not signal-safe.
    pub fn copy_frames(&self, key: u64, hint: usize, out: &mut Vec<Frame>) -> Option<bool> {
        [0, 2].into_iter().find_map(|role| {
            let guard = self.hazards.protect(hint, || self.address(self.active.load(Ordering::SeqCst) + role))?;
            // SAFETY: the guard protects one of our own tables from being cleared.
            let table = unsafe { &*(guard.protected() as *const CallTraceTable) };
            let trace = table.find(key)?;
            out.clear();
            out.extend_from_slice(trace.frames);
            Some(trace.truncated)
        })
    }

    /// Visits the traces of the dump and active tables: every trace a
    /// sample drained since the previous rotation can refer to.
    #[allow(clippy::indexing_slicing)] // Not signal-safe.
    pub fn for_each_live(&self, mut visit: impl FnMut(StoredTrace<'_>)) {
        let _rotating = self.rotation.lock().unwrap_or_else(|p| p.into_inner());
        let active = self.active.load(Ordering::SeqCst);
        self.tables[(active + 2) % 3].for_each(&mut visit);
        self.tables[active].for_each(&mut visit);
    }

    /// Traces in the active table. Not signal-safe.
    #[allow(clippy::indexing_slicing)]
    pub fn len(&self) -> usize {
        self.tables[self.active.load(Ordering::SeqCst)].len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(seed: u64) -> Vec<Frame> {
        (0..4).map(|i| Frame::java(seed * 10 + i, 0)).collect()
    }

    fn live_ids(storage: &CallTraceStorage) -> Vec<TraceId> {
        let mut ids = Vec::new();
        storage.for_each_live(|t| ids.push(t.id));
        ids.sort();
        ids
    }

    #[test]
    fn ids_stay_unique_across_rotations_and_old_traces_are_purged() {
        let storage = CallTraceStorage::new(256, 4096).unwrap();
        let a = storage.put(&trace(1), false, 0);
        assert_eq!(storage.put(&trace(1), false, 0), a);
        storage.rotate();
        let b = storage.put(&trace(1), false, 0);
        assert_ne!(a, b, "a new table, a new id");
        assert_eq!(live_ids(&storage), vec![a, b], "the dump table is still readable");
        storage.rotate();
        assert_eq!(live_ids(&storage), vec![b]);
        storage.rotate();
        assert!(live_ids(&storage).is_empty());
    }

    #[test]
    fn frames_are_found_by_key_while_their_table_is_live() {
        use crate::storage::call_traces::trace_key;
        let storage = CallTraceStorage::new(256, 4096).unwrap();
        storage.put(&trace(3), true, 0);
        let key = trace_key(&trace(3), true);
        let mut out = Vec::new();
        assert_eq!(storage.copy_frames(key, 0, &mut out), Some(true));
        assert_eq!(out, trace(3));
        storage.rotate();
        out.clear();
        assert_eq!(storage.copy_frames(key, 0, &mut out), Some(true), "from the dump table");
        assert_eq!(out, trace(3));
        storage.rotate();
        assert_eq!(storage.copy_frames(key, 0, &mut out), None, "purged");
        assert_eq!(storage.copy_frames(trace_key(&trace(4), false), 0, &mut out), None, "never stored");
    }

    #[test]
    fn a_full_table_yields_the_dropped_id_until_the_next_rotation() {
        let storage = CallTraceStorage::new(16, 4096).unwrap();
        let ids: Vec<_> = (0..20).map(|i| storage.put(&trace(i), false, 0)).collect();
        assert!(ids.contains(&TraceId::DROPPED));
        storage.rotate();
        assert_ne!(storage.put(&trace(99), false, 0), TraceId::DROPPED);
    }
}
