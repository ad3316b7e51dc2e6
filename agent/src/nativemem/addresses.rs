//! The addresses of sampled native allocations not yet freed: a bounded,
//! lock-free open-addressing set, so that a `free` is recorded only for
//! the allocations that were (leaks are then the allocations without
//! one). Signal-safe but [`Addresses::new`].

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// A slot never used since the last clear: a probe for an address ends
/// here.
const EMPTY: u64 = 0;
/// A slot whose address was removed: probes go on past it, inserts reuse
/// it. (No allocation is at address 1.)
const GONE: u64 = 1;
/// Slots an insert or a lookup tries at most.
const PROBES: usize = 32;

pub struct Addresses {
    slots: Box<[AtomicU64]>,
    /// Addresses in the set: frees skip the lookup while it is zero.
    live: AtomicUsize,
}

impl Addresses {
    /// A set of `2^bits` slots. Not signal-safe (allocates).
    pub fn new(bits: u32) -> Self {
        Self { slots: (0..1usize << bits).map(|_| AtomicU64::new(EMPTY)).collect(), live: AtomicUsize::new(0) }
    }

    fn probes(&self, address: u64) -> impl Iterator<Item = &AtomicU64> {
        let mask = self.slots.len() - 1;
        let start = ((address >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize;
        (0..PROBES).filter_map(move |i| self.slots.get(start.wrapping_add(i) & mask))
    }

    /// Adds `address`; false when its probe range is full (the caller
    /// counts it: the allocation's free will not be recorded).
    pub fn insert(&self, address: u64) -> bool {
        for slot in self.probes(address) {
            let seen = slot.load(Ordering::Acquire);
            if (seen == EMPTY || seen == GONE)
                && slot.compare_exchange(seen, address, Ordering::AcqRel, Ordering::Relaxed).is_ok()
            {
                self.live.fetch_add(1, Ordering::Relaxed);
                return true;
            }
        }
        false
    }

    /// Removes `address`; whether it was there. A slot becomes EMPTY only
    /// by [`Self::clear`], so a probe that meets one has passed every slot
    /// an insert of `address` can have taken.
    pub fn remove(&self, address: u64) -> bool {
        if self.live.load(Ordering::Relaxed) == 0 || address <= GONE {
            return false;
        }
        for slot in self.probes(address) {
            match slot.load(Ordering::Acquire) {
                EMPTY => return false,
                seen if seen == address => {
                    if slot.compare_exchange(address, GONE, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                        self.live.fetch_sub(1, Ordering::Relaxed);
                        return true;
                    }
                    return false;
                }
                _ => {}
            }
        }
        false
    }

    /// Empties the set (a new session: no allocation of an earlier one is
    /// tracked).
    pub fn clear(&self) {
        for slot in self.slots.iter() {
            slot.store(EMPTY, Ordering::Relaxed);
        }
        self.live.store(0, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_found_once_and_only_after_insertion() {
        let set = Addresses::new(4);
        assert!(!set.remove(0x1000));
        assert!(set.insert(0x1000) && set.insert(0x2000));
        assert!(set.remove(0x1000));
        assert!(!set.remove(0x1000), "removed already");
        assert!(set.remove(0x2000));
        assert!(!set.remove(0));
    }

    #[test]
    fn a_full_set_refuses_and_reuses_removed_slots() {
        let set = Addresses::new(4);
        let addresses: Vec<u64> = (1..=16).map(|i| i << 12).collect();
        assert!(addresses.iter().all(|&a| set.insert(a)));
        assert!(!set.insert(0x100_0000), "16 slots hold 16 addresses");
        assert!(set.remove(addresses[3]));
        assert!(set.insert(0x100_0000));
        assert!(addresses.iter().filter(|&&a| a != addresses[3]).all(|&a| set.remove(a)));
        assert!(set.remove(0x100_0000));
        set.clear();
        assert!(set.insert(0x5000) && set.remove(0x5000));
    }

    #[test]
    fn racing_threads_each_find_their_own_addresses() {
        let set = std::sync::Arc::new(Addresses::new(12));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let set = std::sync::Arc::clone(&set);
                std::thread::spawn(move || {
                    for round in 0..2000u64 {
                        let address = (t << 40) | (round << 4) | 0x1_0000;
                        assert!(set.insert(address));
                        assert!(set.remove(address));
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(set.live.load(Ordering::SeqCst), 0);
    }
}
