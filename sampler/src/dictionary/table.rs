//! One dictionary buffer: strings to integer ids in an open-addressing
//! table in a lazily committed mapping.
//!
//! Probing is signal-safe (atomic loads, no allocation, bounded). Inserting
//! allocates the key's copy and so is for ordinary threads only. An entry
//! is published in three steps: its hash is claimed with a
//! compare-and-swap, then its key pointer and finally its id are stored
//! (Release); readers that find the hash wait for the id (bounded for
//! signal handlers). Entries are removed only by [`Buffer::clear`], which
//! the owner calls when no reader can be inside.

use crate::storage::mapped::{MappedArray, Zeroable};
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

#[repr(C)]
struct Entry {
    hash: AtomicU64,
    id: AtomicU32,
    key: AtomicPtr<Box<str>>,
}

// SAFETY: zeroed atomics and a null pointer are an empty entry.
unsafe impl Zeroable for Entry {}

/// How long a probe waits for an entry being published by another thread.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// A bounded spin, then a miss (signal handlers).
    Bounded,
    /// Until published (ordinary threads: the publisher will finish).
    Publisher,
}

const BOUNDED_SPINS: u32 = 4096;

pub struct Buffer {
    entries: MappedArray<Entry>,
    mask: usize,
    /// Inserts stop at this many entries (load factor 3/4).
    limit: u32,
    len: AtomicU32,
    /// Bumped by every clear: lets tests see a buffer cleared under a reader.
    epoch: AtomicU64,
}

fn hash(key: &str) -> u64 {
    let h = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    (h ^ (h >> 29)).max(1)
}

impl Buffer {
    pub fn new(capacity: usize) -> std::io::Result<Self> {
        let capacity = capacity.next_power_of_two().max(16);
        Ok(Self {
            entries: MappedArray::new(capacity)?,
            mask: capacity - 1,
            limit: (capacity / 4 * 3) as u32,
            len: AtomicU32::new(0),
            epoch: AtomicU64::new(0),
        })
    }

    pub fn len(&self) -> u32 {
        self.len.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    fn published_id(entry: &Entry, wait: Wait) -> Option<u32> {
        let mut spins = 0u32;
        loop {
            let id = entry.id.load(Ordering::Acquire);
            if id != 0 {
                return Some(id);
            }
            match wait {
                Wait::Bounded if spins >= BOUNDED_SPINS => return None,
                Wait::Bounded => std::hint::spin_loop(),
                Wait::Publisher => std::thread::yield_now(),
            }
            spins += 1;
        }
    }

    fn key_matches(entry: &Entry, key: &str) -> bool {
        let stored = entry.key.load(Ordering::Acquire);
        // SAFETY: a published key pointer stays valid until `clear`, which
        // the owner runs only when no reader can be inside.
        !stored.is_null() && unsafe { &*stored }.as_bytes() == key.as_bytes()
    }

    /// The id of `key`, if present. Signal-safe with [`Wait::Bounded`].
    pub fn find(&self, key: &str, wait: Wait) -> Option<u32> {
        let h = hash(key);
        let mut index = h as usize & self.mask;
        for _ in 0..=self.mask {
            let entry = self.entries.get(index);
            match entry.hash.load(Ordering::Acquire) {
                0 => return None,
                eh if eh == h => {
                    let id = Self::published_id(entry, wait)?;
                    if Self::key_matches(entry, key) {
                        return Some(id);
                    }
                }
                _ => {}
            }
            index = (index + 1) & self.mask;
        }
        None
    }

    /// The id of `key`, inserting it with `new_id()` if absent; `None` when
    /// the buffer is full. Not signal-safe (allocates).
    pub fn insert(&self, key: &str, new_id: impl FnOnce() -> u32) -> Option<u32> {
        let h = hash(key);
        let mut index = h as usize & self.mask;
        for _ in 0..=self.mask {
            let entry = self.entries.get(index);
            let mut current = entry.hash.load(Ordering::Acquire);
            if current == 0 {
                if self.len.load(Ordering::Relaxed) >= self.limit {
                    return None;
                }
                match entry.hash.compare_exchange(0, h, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => {
                        self.len.fetch_add(1, Ordering::Relaxed);
                        let boxed: Box<Box<str>> = Box::new(key.into());
                        entry.key.store(Box::into_raw(boxed), Ordering::Release);
                        let id = new_id();
                        entry.id.store(id, Ordering::Release);
                        return Some(id);
                    }
                    Err(winner) => current = winner,
                }
            }
            if current == h {
                let id = Self::published_id(entry, Wait::Publisher)?;
                if Self::key_matches(entry, key) {
                    return Some(id);
                }
            }
            index = (index + 1) & self.mask;
        }
        None
    }

    /// Every (id, key), for writing constant pools. Not signal-safe.
    pub fn entries(&self) -> Vec<(u32, String)> {
        let mut out = Vec::with_capacity(self.len() as usize);
        for index in 0..=self.mask {
            let entry = self.entries.get(index);
            let id = entry.id.load(Ordering::Acquire);
            let key = entry.key.load(Ordering::Acquire);
            if id != 0 && !key.is_null() {
                // SAFETY: as in `key_matches`.
                out.push((id, unsafe { &**key }.to_string()));
            }
        }
        out
    }

    /// Empties the buffer and returns its memory. The caller guarantees no
    /// reader or writer is inside (hazards drained).
    pub fn clear(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        if self.len.load(Ordering::Relaxed) > 0 {
            for index in 0..=self.mask {
                let key = self.entries.get(index).key.swap(std::ptr::null_mut(), Ordering::AcqRel);
                if !key.is_null() {
                    // SAFETY: created by Box::into_raw in `insert`, freed once.
                    drop(unsafe { Box::from_raw(key) });
                }
            }
            self.entries.reset();
            self.len.store(0, Ordering::Relaxed);
        }
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn finds_what_it_inserted_and_misses_the_rest() {
        let buffer = Buffer::new(64).unwrap();
        let mut next = 10;
        let mut id = || {
            next += 1;
            next
        };
        assert_eq!(buffer.insert("alpha", &mut id), Some(11));
        assert_eq!(buffer.insert("beta", &mut id), Some(12));
        assert_eq!(buffer.insert("alpha", &mut id), Some(11), "present keys keep their id");
        assert_eq!(buffer.find("beta", Wait::Bounded), Some(12));
        assert_eq!(buffer.find("gamma", Wait::Bounded), None);
        let mut entries = buffer.entries();
        entries.sort();
        assert_eq!(entries, vec![(11, "alpha".to_owned()), (12, "beta".to_owned())]);
        buffer.clear();
        assert_eq!(buffer.find("alpha", Wait::Bounded), None);
        assert!(buffer.is_empty());
    }

    #[test]
    fn a_full_buffer_refuses_new_keys() {
        let buffer = Buffer::new(16).unwrap();
        let mut n = 0;
        let inserted = (0..20)
            .filter(|i| {
                buffer
                    .insert(&format!("k{i}"), || {
                        n += 1;
                        n
                    })
                    .is_some()
            })
            .count();
        assert_eq!(inserted, 12);
        assert_eq!(buffer.find("k0", Wait::Bounded), Some(1));
    }

    #[test]
    fn concurrent_inserts_of_the_same_keys_agree() {
        let buffer = Arc::new(Buffer::new(4096).unwrap());
        let ids = Arc::new(AtomicU32::new(0));
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let (buffer, ids) = (Arc::clone(&buffer), Arc::clone(&ids));
                std::thread::spawn(move || {
                    (0..1000)
                        .map(|i| {
                            buffer
                                .insert(&format!("key-{}", i % 300), || ids.fetch_add(1, Ordering::SeqCst) + 1)
                                .unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let results: Vec<Vec<u32>> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        for i in 0..1000 {
            assert!(results.iter().all(|r| r[i] == results[0][i]));
        }
        assert_eq!(buffer.len(), 300);
    }
}
