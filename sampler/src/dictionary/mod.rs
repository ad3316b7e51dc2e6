//! Triple-buffered dictionaries: strings to integer ids, with three
//! buffers in rotating roles, for strings that threads insert while a dump
//! reads them. They serve the JNI threads of the Java API: endpoint labels
//! (`recording::endpoints`, `recordTraceRoot`) and context values
//! (`context`, `setContextValue`). No signal handler looks strings up,
//! though [`TripleBufferedDictionary::bounded_lookup`] with a size limit of
//! 0 is signal-safe.
//!
//! - **active**: where lookups and inserts go;
//! - **dump**: the previous active, read while a chunk's constant pools are
//!   written;
//! - **scratch**: the one before, cleared (after its readers drained) so it
//!   can become active at the next rotation.
//!
//! Entries are purged after two rotations unless carried over, so memory
//! stays bounded across any number of dumps. Ids come from one counter per
//! dictionary and never change for a key while it lives in the active or
//! dump buffer: a lookup that misses the active buffer but finds the key in
//! the dump buffer re-inserts it under the same id.
//!
//! The races of the dictionary PR's review, and how this design avoids them:
//! 1. *Labels inserted after the pool snapshot while their event still lands
//!    in the chunk*: callers that write events (endpoints) do lookup and
//!    append under one lock that rotation also takes (see
//!    `recording::endpoints`); ids of the dump buffer are all in the pool.
//! 2. *Keys inserted into the old active while a persistent copy iterates*:
//!    rotation first makes the new buffer active, then waits for the
//!    writers of the old one to drain, then copies; later inserts go to the
//!    new buffer and reuse the old ids (`rotate`).
//! 3. *A signal handler re-entering a lookup releases the outer guard*: each
//!    protection takes its own hazard slot ([`hazard`]).
//!
//! Dictionaries that carry only the ids still in use (context values) add
//! one more rule: an id is stored where the carry-over looks while the
//! buffer it came from is still protected ([`TripleBufferedDictionary::lookup_and_publish`]).

pub mod hazard;
pub mod table;

use crate::counters::{self, Counter};
use hazard::Hazards;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;
use table::{Buffer, Wait};

/// What a rotation carries from the old active buffer into the new one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Carry {
    /// Every entry: ids are kept until `clear_all` (upstream's persistent
    /// dictionary; no store of the agent uses it since class ids became
    /// keys of the recording's session-wide constant pools).
    Everything,
    /// Nothing automatically; callers carry what they still use
    /// ([`TripleBufferedDictionary::carry_ids`]).
    Nothing,
}

/// Test-only switch selecting a broken rotation order, to show that the
/// tests catch the race it reintroduces.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RotationOrder {
    /// Swap, drain, copy (this design).
    SwapThenCopy,
    /// Copy, then swap without draining (the reviewed PR).
    CopyThenSwap,
}

/// A test hook run in the middle of a rotation of a `T` (here and in the
/// agent's endpoint store).
pub type RotationHook<T> = Box<dyn Fn(&T) + Send + Sync>;

pub struct TripleBufferedDictionary {
    buffers: [Buffer; 3],
    active: AtomicUsize,
    next_id: AtomicU32,
    carry: Carry,
    hazards: Hazards,
    rotation: Mutex<()>,
    #[cfg(test)]
    pub(crate) order: RotationOrder,
    /// Test hook run inside a rotation, where the reviewed race lived.
    #[cfg(test)]
    pub(crate) during_rotation: Option<RotationHook<TripleBufferedDictionary>>,
}

impl TripleBufferedDictionary {
    /// Three buffers of `capacity` entries each (reserved, committed as used).
    pub fn new(capacity: usize, carry: Carry) -> std::io::Result<Self> {
        Ok(Self {
            buffers: [Buffer::new(capacity)?, Buffer::new(capacity)?, Buffer::new(capacity)?],
            active: AtomicUsize::new(0),
            next_id: AtomicU32::new(1),
            carry,
            hazards: Hazards::new(),
            rotation: Mutex::new(()),
            #[cfg(test)]
            order: RotationOrder::SwapThenCopy,
            #[cfg(test)]
            during_rotation: None,
        })
    }

    fn address(&self, index: usize) -> usize {
        self.buffers.get(index % 3).map_or(0, |buffer| buffer as *const Buffer as usize)
    }

    fn active_address(&self) -> usize {
        self.address(self.active.load(Ordering::SeqCst))
    }

    fn dump_address(&self) -> usize {
        self.address(self.active.load(Ordering::SeqCst) + 2)
    }

    fn buffer(&self, address: usize) -> &Buffer {
        // SAFETY: `address` is one of `address(i)`, a buffer of `self`.
        unsafe { &*(address as *const Buffer) }
    }

    pub fn active_buffer(&self) -> &Buffer {
        self.buffer(self.active_address())
    }

    /// The id of `key`. Inserts it if absent and the active buffer holds
    /// fewer than `size_limit` entries. With `size_limit == 0` it never
    /// inserts and is signal-safe: a miss is a miss. `hint` (a thread id)
    /// spreads hazard slots.
    pub fn bounded_lookup(&self, key: &str, size_limit: u32, hint: usize) -> Option<u32> {
        let wait = if size_limit == 0 { Wait::Bounded } else { Wait::Publisher };
        if let Some(id) = self.protected_find(key, wait, hint, || self.active_address())? {
            return Some(id);
        }
        let previous = self.protected_find(key, wait, hint, || self.dump_address())?;
        if size_limit == 0 {
            return if self.carry == Carry::Everything { previous } else { None };
        }
        let guard = self.hazards.protect(hint, || self.active_address())?;
        let active = self.buffer(guard.protected());
        if previous.is_none() && active.len() >= size_limit {
            return active.find(key, wait);
        }
        active.insert(key, || previous.unwrap_or_else(|| self.next_id.fetch_add(1, Ordering::Relaxed)))
    }

    /// Looks `key` up in the buffer `which()` names, under hazard
    /// protection. The outer `None` means no hazard slot was free. A buffer
    /// cleared while protected would be a broken invariant: counted.
    fn protected_find(&self, key: &str, wait: Wait, hint: usize, which: impl Fn() -> usize) -> Option<Option<u32>> {
        let Some(guard) = self.hazards.protect(hint, which) else {
            counters::increment(Counter::DictionaryNoHazardSlot);
            return None;
        };
        let buffer = self.buffer(guard.protected());
        let epoch = buffer.epoch();
        let found = buffer.find(key, wait);
        if buffer.epoch() != epoch {
            counters::increment(Counter::DictionaryProtectionViolations);
        }
        Some(found)
    }

    /// The id of `key`, inserting it if absent (`None` only when full).
    /// Not signal-safe.
    pub fn lookup(&self, key: &str, hint: usize) -> Option<u32> {
        self.bounded_lookup(key, u32::MAX, hint)
    }

    /// [`lookup`](Self::lookup), then hands the id to `publish` (which stores
    /// it where a rotation will look, e.g. a thread's context slot) while the
    /// buffer that was active when the call began is still protected. A
    /// rotation waits for that protection to go before it returns, so what
    /// `publish` stored is visible to anything the rotating thread reads
    /// afterwards (the ids it carries over): an id can never be stored just
    /// after the carry-over snapshot and then outlive its buffer.
    pub fn lookup_and_publish(&self, key: &str, hint: usize, publish: impl FnOnce(u32)) -> Option<u32> {
        let Some(_pinned) = self.hazards.protect(hint, || self.active_address()) else {
            counters::increment(Counter::DictionaryNoHazardSlot);
            return None;
        };
        let id = self.lookup(key, hint)?;
        publish(id);
        Some(id)
    }

    /// Makes the scratch buffer active, turns the old active into the dump
    /// buffer (carrying entries per the policy) and clears the old dump.
    /// Never blocks lookups; waits only for readers to leave the buffers it
    /// copies from and clears. Not signal-safe.
    #[allow(clippy::indexing_slicing)]
    pub fn rotate(&self) {
        let _rotating = self.rotation.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.active.load(Ordering::SeqCst);
        let new = (old + 1) % 3;
        let copy = |this: &Self| {
            if this.carry == Carry::Everything {
                for (id, key) in this.buffers[old].entries() {
                    this.buffers[new].insert(&key, || id);
                }
            }
        };
        #[cfg(test)]
        let copy_first = self.order == RotationOrder::CopyThenSwap;
        #[cfg(not(test))]
        let copy_first = false;
        if copy_first {
            copy(self);
            self.run_hook();
            self.active.store(new, Ordering::SeqCst);
        } else {
            self.active.store(new, Ordering::SeqCst);
            self.run_hook();
            self.hazards.wait_unused(self.address(old));
            copy(self);
        }
        let scratch = (old + 2) % 3;
        self.hazards.wait_unused(self.address(scratch));
        self.buffers[scratch].clear();
    }

    #[cfg(test)]
    fn run_hook(&self) {
        if let Some(hook) = &self.during_rotation {
            hook(self);
        }
    }

    #[cfg(not(test))]
    fn run_hook(&self) {}

    /// After a rotation: copies the given ids from the dump buffer into the
    /// active one (the values callers still reference). Not signal-safe.
    #[allow(clippy::indexing_slicing)]
    pub fn carry_ids(&self, ids: &HashSet<u32>) {
        if ids.is_empty() {
            return;
        }
        let _rotating = self.rotation.lock().unwrap_or_else(|p| p.into_inner());
        let active = self.active.load(Ordering::SeqCst);
        for (id, key) in self.buffers[(active + 2) % 3].entries() {
            if ids.contains(&id) {
                self.buffers[active].insert(&key, || id);
            }
        }
    }

    /// Entries of the dump buffer (what the chunk just finished used).
    pub fn dump_entries(&self) -> Vec<(u32, String)> {
        let _rotating = self.rotation.lock().unwrap_or_else(|p| p.into_inner());
        self.buffer(self.dump_address()).entries()
    }

    /// Every live id (dump and active buffers) with its key.
    pub fn live_entries(&self) -> HashMap<u32, String> {
        let _rotating = self.rotation.lock().unwrap_or_else(|p| p.into_inner());
        let mut all: HashMap<u32, String> = self.buffer(self.dump_address()).entries().into_iter().collect();
        all.extend(self.active_buffer().entries());
        all
    }

    /// Empties all three buffers (at profiler stop). Three swaps, each
    /// clearing the one buffer that is then neither active nor dump, so no
    /// lookup can reach a buffer while it is cleared. Ids are not reused:
    /// an id still held somewhere cannot come to mean another key.
    #[allow(clippy::indexing_slicing)] // Not signal-safe.
    pub fn clear_all(&self) {
        let _rotating = self.rotation.lock().unwrap_or_else(|p| p.into_inner());
        for _ in 0..3 {
            let old = self.active.load(Ordering::SeqCst);
            self.active.store((old + 1) % 3, Ordering::SeqCst);
            let unreachable = (old + 2) % 3;
            self.hazards.wait_unused(self.address(unreachable));
            self.buffers[unreachable].clear();
        }
    }

    /// Entries in the active buffer.
    pub fn len(&self) -> u32 {
        self.active_buffer().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests;
