//! The addresses of sampled native allocations not yet freed: a bounded,
//! lock-free set, so that a `free` is recorded only for the allocations
//! that were (leaks are then the allocations without one). An address
//! lives in one bucket of eight slots, a cache line: a lookup reads that
//! line and nothing else, however long the set has been in use (no
//! tombstones: a removed address leaves its slot empty). Signal-safe but
//! [`Addresses::new`].

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// An empty slot (no allocation is at address 0).
const EMPTY: u64 = 0;
const SLOTS: usize = 8;

#[repr(align(64))]
struct Bucket([AtomicU64; SLOTS]);

/// Its own cache line: every `free` reads it, inserts and removes write it.
#[repr(align(64))]
struct Live(AtomicUsize);

pub struct Addresses {
    buckets: Box<[Bucket]>,
    /// Addresses in the set: frees skip the lookup while it is zero.
    live: Live,
}

impl Addresses {
    /// A set of `2^bits` slots. Not signal-safe (allocates).
    pub fn new(bits: u32) -> Self {
        let buckets = (0..(1usize << bits) / SLOTS).map(|_| Bucket(std::array::from_fn(|_| AtomicU64::new(EMPTY))));
        Self { buckets: buckets.collect(), live: Live(AtomicUsize::new(0)) }
    }

    fn bucket(&self, address: u64) -> Option<&Bucket> {
        let hash = (address >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        self.buckets.get(hash as usize % self.buckets.len().max(1))
    }

    /// Adds `address`; false when its bucket is full (the caller counts
    /// it: the allocation's free will not be recorded).
    pub fn insert(&self, address: u64) -> bool {
        let Some(bucket) = self.bucket(address).filter(|_| address != EMPTY) else { return false };
        let taken = bucket.0.iter().any(|slot| {
            slot.load(Ordering::Relaxed) == EMPTY
                && slot.compare_exchange(EMPTY, address, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        });
        if taken {
            self.live.0.fetch_add(1, Ordering::Relaxed);
        }
        taken
    }

    /// Removes `address`; whether it was there.
    pub fn remove(&self, address: u64) -> bool {
        if self.live.0.load(Ordering::Relaxed) == 0 || address == EMPTY {
            return false;
        }
        let Some(bucket) = self.bucket(address) else { return false };
        let removed = bucket.0.iter().any(|slot| {
            slot.load(Ordering::Acquire) == address
                && slot.compare_exchange(address, EMPTY, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        });
        if removed {
            self.live.0.fetch_sub(1, Ordering::Relaxed);
        }
        removed
    }

    /// Empties the set (a new session: no allocation of an earlier one is
    /// tracked).
    pub fn clear(&self) {
        for slot in self.buckets.iter().flat_map(|b| b.0.iter()) {
            slot.store(EMPTY, Ordering::Relaxed);
        }
        self.live.0.store(0, Ordering::SeqCst);
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
        assert!(!set.insert(0) && !set.remove(0));
    }

    /// Addresses of one bucket: eight fit, a ninth is refused until one
    /// goes; a long run of inserts and removes leaves every lookup one
    /// bucket's read, and the set empty.
    #[test]
    fn a_full_bucket_refuses_and_takes_again_once_emptied() {
        let set = Addresses::new(10);
        let home = |a: u64| set.bucket(a).map(|b| b as *const Bucket);
        let first = 0x10_0000u64;
        let same: Vec<u64> =
            (1..1_000_000u64).map(|i| first + (i << 4)).filter(|&a| home(a) == home(first)).take(9).collect();
        assert!(set.insert(first));
        assert!(same[..7].iter().all(|&a| set.insert(a)));
        assert!(!set.insert(same[7]), "eight slots hold eight addresses");
        assert!(set.remove(same[3]));
        assert!(set.insert(same[7]));
        for round in 0..100_000u64 {
            let address = 0x7f00_0000_0000 + (round << 4);
            if set.insert(address) {
                assert!(set.remove(address));
            }
        }
        for &a in [first].iter().chain(&same[..3]).chain(&same[4..8]) {
            assert!(set.remove(a), "{a:#x}");
        }
        assert_eq!(set.live.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn racing_threads_each_find_their_own_addresses() {
        let set = std::sync::Arc::new(Addresses::new(12));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let set = std::sync::Arc::clone(&set);
                std::thread::spawn(move || {
                    for round in 0..20_000u64 {
                        let address = (t << 40) | (round << 4) | 0x1_0000;
                        if set.insert(address) {
                            assert!(set.remove(address));
                        }
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(set.live.0.load(Ordering::SeqCst), 0);
    }
}
