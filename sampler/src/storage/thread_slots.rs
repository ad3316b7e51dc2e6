//! Per-thread state a signal handler reads: the trace context (span ids
//! and context values) and the thread-filter flag. Slots live in one
//! lazily committed mapping for the life of the agent, found by thread id
//! through open addressing, so a handler reaches its thread's slot with a
//! few atomic loads and no thread-local storage.
//!
//! Only a thread itself registers, writes and releases its own slot; a
//! handler reads the slot of the thread it interrupted. Context writes are
//! bracketed by a sequence number (odd while writing), so a handler that
//! interrupts a write sees it and records no context rather than a torn one.

use super::mapped::{MappedArray, Zeroable};
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Context values a thread can carry (the `attributes=` option names them).
pub const MAX_CONTEXT_VALUES: usize = 8;
const CAPACITY: usize = 1 << 16;
const EMPTY: u32 = 0;
const RELEASED: u32 = u32::MAX;
/// Held while a slot is being reset for its new owner: no lookup matches
/// it, so a handler never sees the previous owner's values under the new tid.
const CLAIMING: u32 = u32::MAX - 1;

#[repr(C)]
pub struct ThreadSlot {
    tid: AtomicU32,
    sequence: AtomicU32,
    span_id: AtomicU64,
    root_span_id: AtomicU64,
    values: [AtomicU32; MAX_CONTEXT_VALUES],
    /// Sampled while the thread filter is on.
    in_filter: AtomicBool,
}

// SAFETY: zeroed atomics are an empty slot.
unsafe impl Zeroable for ThreadSlot {}

/// A consistent copy of a thread's context.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Context {
    pub span_id: u64,
    pub root_span_id: u64,
    /// Context value ids (0: none), by slot.
    pub values: [u32; MAX_CONTEXT_VALUES],
}

impl ThreadSlot {
    fn write(&self, update: impl FnOnce(&Self)) {
        self.sequence.fetch_add(1, Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
        update(self);
        compiler_fence(Ordering::SeqCst);
        self.sequence.fetch_add(1, Ordering::Relaxed);
    }

    /// Sets the span ids (the owning thread only).
    pub fn set_spans(&self, span_id: u64, root_span_id: u64) {
        self.write(|s| {
            s.span_id.store(span_id, Ordering::Relaxed);
            s.root_span_id.store(root_span_id, Ordering::Relaxed);
        });
    }

    /// Sets context value `slot` to dictionary id `value` (owning thread only).
    pub fn set_value(&self, slot: usize, value: u32) {
        if let Some(cell) = self.values.get(slot) {
            self.write(|_| cell.store(value, Ordering::Relaxed));
        }
    }

    /// Clears span ids and values (owning thread only).
    pub fn clear_context(&self) {
        self.write(|s| {
            s.span_id.store(0, Ordering::Relaxed);
            s.root_span_id.store(0, Ordering::Relaxed);
            for v in &s.values {
                v.store(0, Ordering::Relaxed);
            }
        });
    }

    /// The context, or `None` if the handler interrupted a write on this
    /// thread. Signal-safe.
    pub fn context(&self) -> Option<Context> {
        let before = self.sequence.load(Ordering::Relaxed);
        if before % 2 == 1 {
            return None;
        }
        compiler_fence(Ordering::SeqCst);
        let mut context = Context {
            span_id: self.span_id.load(Ordering::Relaxed),
            root_span_id: self.root_span_id.load(Ordering::Relaxed),
            values: [0; MAX_CONTEXT_VALUES],
        };
        for (out, cell) in context.values.iter_mut().zip(&self.values) {
            *out = cell.load(Ordering::Relaxed);
        }
        compiler_fence(Ordering::SeqCst);
        (self.sequence.load(Ordering::Relaxed) == before).then_some(context)
    }

    pub fn set_in_filter(&self, in_filter: bool) {
        self.in_filter.store(in_filter, Ordering::Relaxed);
    }

    pub fn in_filter(&self) -> bool {
        self.in_filter.load(Ordering::Relaxed)
    }

    /// Context value ids currently set (for keeping them alive in the
    /// dictionary). Read from other threads: a torn read only keeps an
    /// extra value alive for a cycle.
    pub fn value_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.values.iter().map(|v| v.load(Ordering::Relaxed)).filter(|&v| v != 0)
    }

    fn reset(&self) {
        self.clear_context();
        self.in_filter.store(false, Ordering::Relaxed);
    }
}

pub struct ThreadSlots {
    slots: MappedArray<ThreadSlot>,
    mask: usize,
}

/// How far a thread's slot may sit from its hash position. Registration
/// reuses released slots, so a live thread always finds one within this
/// distance, and a lookup (the signal handler's, for every sample) never
/// scans further, however many released slots thread churn has left.
const MAX_PROBE: usize = 64;

fn start(tid: u32, mask: usize) -> usize {
    (tid.wrapping_mul(0x9E37_79B9) as usize) & mask
}

impl ThreadSlots {
    pub fn new() -> std::io::Result<Self> {
        Ok(Self { slots: MappedArray::new(CAPACITY)?, mask: CAPACITY - 1 })
    }

    /// The slot of thread `tid`, if registered. Signal-safe.
    pub fn find(&self, tid: u32) -> Option<&ThreadSlot> {
        let mut index = start(tid, self.mask);
        for _ in 0..MAX_PROBE.min(self.mask + 1) {
            let slot = self.slots.get(index);
            match slot.tid.load(Ordering::Acquire) {
                EMPTY => return None,
                t if t == tid => return Some(slot),
                _ => index = (index + 1) & self.mask,
            }
        }
        None
    }

    /// The calling thread's slot, registering it if needed (`None` if all
    /// [`MAX_PROBE`] slots near its hash position are live). Only the
    /// thread `tid` itself may call this. Not signal-safe by contract (it
    /// may be called while a handler reads other slots, which is fine).
    pub fn register(&self, tid: u32) -> Option<&ThreadSlot> {
        if let Some(slot) = self.find(tid) {
            return Some(slot);
        }
        let mut index = start(tid, self.mask);
        for _ in 0..MAX_PROBE.min(self.mask + 1) {
            let slot = self.slots.get(index);
            let current = slot.tid.load(Ordering::Acquire);
            if (current == EMPTY || current == RELEASED)
                && slot.tid.compare_exchange(current, CLAIMING, Ordering::AcqRel, Ordering::Acquire).is_ok()
            {
                slot.reset();
                slot.tid.store(tid, Ordering::Release);
                return Some(slot);
            }
            index = (index + 1) & self.mask;
        }
        None
    }

    /// Releases the calling thread's slot (the thread `tid` itself, with
    /// profiling signals blocked, so no handler of its own can be reading).
    pub fn release(&self, tid: u32) {
        if let Some(slot) = self.find(tid) {
            slot.reset();
            slot.tid.store(RELEASED, Ordering::Release);
        }
    }

    /// Every registered slot (for collecting live context values).
    pub fn for_each(&self, mut visit: impl FnMut(&ThreadSlot)) {
        for index in 0..=self.mask {
            let slot = self.slots.get(index);
            let tid = slot.tid.load(Ordering::Acquire);
            if tid != EMPTY && tid != RELEASED && tid != CLAIMING {
                visit(slot);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Thread churn leaves released slots behind; lookups and registrations
    /// stay within their probe bound and keep working (before the bound, a
    /// lookup of an unregistered tid scanned the whole table).
    #[test]
    fn churn_of_many_distinct_threads_keeps_slots_usable() {
        let slots = ThreadSlots::new().unwrap();
        for tid in 1..200_000u32 {
            slots.register(tid).expect("a released slot nearby is reused");
            slots.release(tid);
        }
        let live: Vec<u32> = (300_000..304_000).collect();
        for &tid in &live {
            slots.register(tid).unwrap().set_spans(u64::from(tid), 1);
        }
        assert!(live
            .iter()
            .all(|&tid| slots.find(tid).and_then(ThreadSlot::context).unwrap().span_id == u64::from(tid)));
        assert!(slots.find(250_000).is_none());
    }

    #[test]
    fn register_find_release_and_reuse() {
        let slots = ThreadSlots::new().unwrap();
        assert!(slots.find(42).is_none());
        let slot = slots.register(42).unwrap();
        slot.set_spans(7, 8);
        assert_eq!(slots.find(42).unwrap().context().unwrap().span_id, 7);
        slots.release(42);
        assert!(slots.find(42).is_none());
        let again = slots.register(42).unwrap();
        assert_eq!(again.context().unwrap(), Context::default(), "a reused slot starts clean");
    }

    #[test]
    fn a_write_in_progress_is_seen_as_such() {
        let slots = ThreadSlots::new().unwrap();
        let slot = slots.register(5).unwrap();
        slot.set_value(1, 99);
        assert_eq!(slot.context().unwrap().values[1], 99);
        slot.sequence.fetch_add(1, Ordering::Relaxed); // a writer interrupted mid-way
        assert!(slot.context().is_none());
        slot.sequence.fetch_add(1, Ordering::Relaxed);
        assert_eq!(slot.value_ids().collect::<Vec<_>>(), vec![99]);
        slot.set_value(MAX_CONTEXT_VALUES, 1); // out of range: ignored
    }

    #[test]
    fn colliding_thread_ids_get_their_own_slots() {
        let slots = ThreadSlots::new().unwrap();
        for tid in 1..2000u32 {
            slots.register(tid).unwrap().set_spans(u64::from(tid), 0);
        }
        for tid in 1..2000u32 {
            assert_eq!(slots.find(tid).unwrap().context().unwrap().span_id, u64::from(tid));
        }
        let mut n = 0;
        slots.for_each(|_| n += 1);
        assert_eq!(n, 1999);
    }
}
