//! Reader protection for buffers that are cleared and reused: hazard slots.
//!
//! A reader claims a free slot, publishes the buffer it is about to read,
//! and re-checks that the buffer is still the current one; a reclaimer
//! that wants to clear a buffer first makes it non-current, then waits
//! until no slot publishes it. Every acquisition takes a slot of its own,
//! so a signal handler that interrupts a reader on the same thread and
//! reads too (re-entry) cannot release the outer reader's protection: the
//! failure of a per-thread guard (review comment 3 of the dictionary PR).
//! Reclamation waits for readers by construction, never for a time.
//!
//! Signal-safe: claiming is a bounded scan of compare-and-swaps; if every
//! slot is taken the read is refused (and counted by the caller).

use std::sync::atomic::{AtomicUsize, Ordering};

pub const SLOTS: usize = 256;
/// A claimed slot that protects nothing yet.
const CLAIMED: usize = 1;

pub struct Hazards {
    slots: [AtomicUsize; SLOTS],
}

/// Protection of one buffer until dropped.
pub struct HazardGuard<'a> {
    slot: &'a AtomicUsize,
    protected: usize,
}

impl HazardGuard<'_> {
    /// The protected buffer's address.
    pub fn protected(&self) -> usize {
        self.protected
    }
}

impl Drop for HazardGuard<'_> {
    fn drop(&mut self) {
        self.slot.store(0, Ordering::SeqCst);
    }
}

impl Hazards {
    pub const fn new() -> Self {
        Self { slots: [const { AtomicUsize::new(0) }; SLOTS] }
    }

    /// Protects the buffer `current()` returns (an address, never 0 or 1),
    /// starting the slot search at `hint` (a thread id spreads threads).
    /// `None` if all slots are taken. Signal-safe.
    pub fn protect(&self, hint: usize, current: impl Fn() -> usize) -> Option<HazardGuard<'_>> {
        let slot = (0..SLOTS)
            .filter_map(|i| self.slots.get((hint + i) % SLOTS))
            .find(|slot| slot.compare_exchange(0, CLAIMED, Ordering::SeqCst, Ordering::Relaxed).is_ok())?;
        loop {
            let buffer = current();
            slot.store(buffer, Ordering::SeqCst);
            // Publish-then-validate: if the buffer is still current after
            // the slot holds it, any reclaimer that has not yet scanned will
            // see the slot; one that scanned earlier made it non-current
            // first, which this check would have seen.
            if current() == buffer {
                return Some(HazardGuard { slot, protected: buffer });
            }
        }
    }

    /// Whether any reader protects `buffer` right now.
    pub fn in_use(&self, buffer: usize) -> bool {
        self.slots.iter().any(|s| s.load(Ordering::SeqCst) == buffer)
    }

    /// Waits until no reader protects `buffer`. Call only after `buffer`
    /// stopped being current. Not signal-safe (it waits).
    pub fn wait_unused(&self, buffer: usize) {
        while self.in_use(buffer) {
            std::thread::yield_now();
        }
    }
}

impl Default for Hazards {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A reader protection scheme under test.
    trait Protection {
        fn enter(&self, thread: usize, buffer: usize);
        fn leave(&self, thread: usize);
        fn in_use(&self, buffer: usize) -> bool;
    }

    /// This design: one slot per acquisition, released in LIFO order.
    struct Slots(Hazards, std::cell::RefCell<Vec<HazardGuard<'static>>>);

    impl Protection for &'static Slots {
        fn enter(&self, thread: usize, buffer: usize) {
            let guard = self.0.protect(thread, || buffer).unwrap();
            self.1.borrow_mut().push(guard);
        }
        fn leave(&self, _thread: usize) {
            self.1.borrow_mut().pop();
        }
        fn in_use(&self, buffer: usize) -> bool {
            self.0.in_use(buffer)
        }
    }

    /// The reviewed design: one slot per thread, overwritten by a nested
    /// reader and cleared when it leaves.
    struct PerThread([AtomicUsize; 8]);

    impl Protection for PerThread {
        fn enter(&self, thread: usize, buffer: usize) {
            self.0[thread].store(buffer, Ordering::SeqCst);
        }
        fn leave(&self, thread: usize) {
            self.0[thread].store(0, Ordering::SeqCst);
        }
        fn in_use(&self, buffer: usize) -> bool {
            self.0.iter().any(|s| s.load(Ordering::SeqCst) == buffer)
        }
    }

    /// Review comment 3: a reader on thread 3 is interrupted by a signal
    /// handler that reads too; once the handler leaves, is the outer read
    /// still protected against a reclaimer?
    fn outer_read_survives_a_nested_read(p: &dyn Protection) -> bool {
        p.enter(3, 0x1000);
        p.enter(3, 0x1000); // the signal handler
        p.leave(3); // the handler returns
        let protected = p.in_use(0x1000);
        p.leave(3);
        protected && !p.in_use(0x1000)
    }

    #[test]
    fn nested_protection_survives_the_inner_release() {
        let slots: &'static Slots = Box::leak(Box::new(Slots(Hazards::new(), Default::default())));
        assert!(outer_read_survives_a_nested_read(&slots));
    }

    #[test]
    fn the_reviewed_per_thread_guard_fails_the_same_check() {
        let per_thread = PerThread([const { AtomicUsize::new(0) }; 8]);
        assert!(!outer_read_survives_a_nested_read(&per_thread), "the test must catch the reviewed race");
    }

    #[test]
    fn validation_refuses_a_buffer_that_stopped_being_current() {
        let hazards = Hazards::new();
        let current = AtomicUsize::new(0x1000);
        let calls = AtomicUsize::new(0);
        // The first call sees the old buffer; by the validating call it changed.
        let guard = hazards
            .protect(0, || {
                if calls.fetch_add(1, Ordering::SeqCst) == 1 {
                    current.store(0x2000, Ordering::SeqCst);
                }
                current.load(Ordering::SeqCst)
            })
            .unwrap();
        assert_eq!(guard.protected(), 0x2000);
    }

    #[test]
    fn refuses_when_every_slot_is_taken() {
        let hazards = Hazards::new();
        let guards: Vec<_> = (0..SLOTS).map(|i| hazards.protect(i, || 0x10).unwrap()).collect();
        assert!(hazards.protect(0, || 0x10).is_none());
        drop(guards);
        assert!(hazards.protect(0, || 0x10).is_some());
    }
}
