//! Port of upstream `stress_stringDictionary` (upstream file
//! `stress_stringDictionary.cpp`, no `_ut` suffix; see gtest-compat/README.md).
//!
//! Same mapping as `string_dictionary_ut`: upstream's
//! `StringDictionaryBuffer` is our [`Buffer`], its persistent
//! `StringDictionary` our [`TripleBufferedDictionary`] with
//! [`Carry::Everything`], its standby buffer our dump buffer, and its
//! `rotate()` + `clearStandby()` our `rotate()`. Where upstream only checks
//! that nothing crashes (its sanitizer builds find the rest), these tests
//! also check the ids every operation returned, and that no buffer was
//! cleared under a protected reader (`dictionary_protection_violations`).
//! Upstream soaks for fixed times with sleeps; these run bounded numbers of
//! operations, with a time cap, and synchronise with flags and joins only.

use crate::dictionary_ut::protection_violations;
use sampler::dictionary::table::{Buffer, Wait};
use sampler::dictionary::{Carry, TripleBufferedDictionary};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Barrier, Mutex, RwLock};
use std::time::{Duration, Instant};

fn keys(thread: usize, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("t{thread}_k{i}")).collect()
}

fn persistent() -> TripleBufferedDictionary {
    TripleBufferedDictionary::new(1 << 14, Carry::Everything).expect("reserve the dictionary")
}

/// Upper bound on the wall time of a soak loop.
fn soak_deadline() -> Instant {
    Instant::now() + Duration::from_millis(1500)
}

// ── StringArena: concurrent growth ──────────────────────────────────────────

/// Eight threads insert long keys at once, into storage that is committed
/// as it is touched: every insert gets its own id and every key stays
/// readable.
#[test]
fn concurrent_chunk_growth_no_corruption() {
    const THREADS: usize = 8;
    const KEYS: usize = 1000;
    let buf = Buffer::new(1 << 14).unwrap();
    let pad = "z".repeat(68);
    let key = |t: usize, i: usize| format!("cg_{t}_{i}_{pad}");
    let id = |t: usize, i: usize| (t * KEYS + i + 1) as u32;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (buf, key) = (&buf, &key);
            s.spawn(move || {
                for i in 0..KEYS {
                    assert_eq!(buf.insert(&key(t, i), || id(t, i)), Some(id(t, i)), "insert {t}/{i}");
                }
            });
        }
    });
    for t in 0..THREADS {
        for i in 0..KEYS {
            assert_eq!(buf.find(&key(t, i), Wait::Publisher), Some(id(t, i)), "lookup {t}/{i}");
        }
    }
    assert_eq!(buf.len() as usize, THREADS * KEYS);
}

// ── StringDictionaryBuffer: concurrent inserts and reads ────────────────────

#[test]
fn concurrent_insert_no_corruption() {
    const THREADS: usize = 8;
    const KEYS: usize = 500;
    let buf = Buffer::new(1 << 13).unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let buf = &buf;
            s.spawn(move || {
                for (i, key) in keys(t, KEYS).iter().enumerate() {
                    let id = (t * KEYS + i + 1) as u32;
                    assert_eq!(buf.insert(key, || id), Some(id));
                }
            });
        }
    });
    assert_eq!(buf.len() as usize, THREADS * KEYS, "distinct keys: one entry each");
    let entries = buf.entries();
    assert_eq!(entries.len(), THREADS * KEYS);
    let ids: HashSet<u32> = entries.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids.len(), entries.len());
}

/// Readers probe keys that writers are inserting: a probe misses or finds
/// the key's own id, never another.
#[test]
fn concurrent_insert_and_lookup_no_corruption() {
    const WRITERS: usize = 4;
    const READERS: usize = 4;
    const OPS: usize = 1000;
    let buf = Buffer::new(1 << 13).unwrap();
    let writers_done = AtomicU32::new(0);
    std::thread::scope(|s| {
        for t in 0..WRITERS {
            let (buf, writers_done) = (&buf, &writers_done);
            s.spawn(move || {
                for (i, key) in keys(t, OPS).iter().enumerate() {
                    buf.insert(key, || (t * OPS + i + 1) as u32).unwrap();
                }
                writers_done.fetch_add(1, Ordering::SeqCst);
            });
        }
        for r in 0..READERS {
            let (buf, writers_done) = (&buf, &writers_done);
            s.spawn(move || {
                let probes = keys(0, OPS);
                let mut i = r;
                while writers_done.load(Ordering::SeqCst) < WRITERS as u32 {
                    let wait = if i % 2 == 0 { Wait::Bounded } else { Wait::Publisher };
                    let found = buf.find(&probes[i % OPS], wait);
                    assert!(found.is_none() || found == Some((i % OPS + 1) as u32), "{} -> {found:?}", probes[i % OPS]);
                    i += 1;
                }
            });
        }
    });
    for (i, key) in keys(0, OPS).iter().enumerate() {
        assert_eq!(buf.find(key, Wait::Bounded), Some((i + 1) as u32));
    }
}

/// Sixteen threads insert the same key with different ids at once: one id
/// wins and every thread gets it.
#[test]
fn concurrent_same_key_insert_returns_consistent_id() {
    const THREADS: u32 = 16;
    let buf = Buffer::new(64).unwrap();
    let start = Barrier::new(THREADS as usize);
    let results: Vec<Option<u32>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (buf, start) = (&buf, &start);
                s.spawn(move || {
                    start.wait();
                    buf.insert("shared/Key", || t + 1)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let winner = results[0].expect("an id");
    assert!((1..=THREADS).contains(&winner));
    assert!(results.iter().all(|&r| r == Some(winner)), "{results:?}");
    assert_eq!(buf.len(), 1);
}

// ── StringDictionary: concurrent inserts, lookups and rotations ─────────────

/// Keys inserted concurrently keep their ids through every later rotation.
#[test]
fn id_stability_under_concurrent_rotation() {
    const INSERTERS: usize = 4;
    const KEYS: usize = 200;
    let d = persistent();
    let recorded: Vec<HashMap<String, u32>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..INSERTERS)
            .map(|t| {
                let d = &d;
                s.spawn(move || {
                    keys(t, KEYS)
                        .into_iter()
                        .map(|k| {
                            let id = d.lookup(&k, t).unwrap();
                            (k, id)
                        })
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for rotation in 0..20 {
        d.rotate();
        for (key, &id) in recorded.iter().flatten() {
            assert_eq!(d.bounded_lookup(key, 0, 0), Some(id), "{key} at rotation {rotation}");
        }
    }
}

/// Inserts and rotations at the same time: every insert gets an id that
/// stays the key's id afterwards.
#[test]
fn concurrent_insert_and_rotate_no_corruption() {
    const INSERTERS: usize = 6;
    const KEYS: usize = 300;
    let d = persistent();
    let violations = protection_violations();
    let done = AtomicU32::new(0);
    let (recorded, rotations) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..INSERTERS)
            .map(|t| {
                let (d, done) = (&d, &done);
                s.spawn(move || {
                    let ids: Vec<(String, u32)> = keys(t, KEYS)
                        .into_iter()
                        .map(|k| {
                            let id = d.lookup(&k, t).expect("never full");
                            (k, id)
                        })
                        .collect();
                    done.fetch_add(1, Ordering::SeqCst);
                    ids
                })
            })
            .collect();
        let mut rotations = 0;
        while done.load(Ordering::SeqCst) < INSERTERS as u32 || rotations < 10 {
            d.rotate();
            rotations += 1;
        }
        let recorded: Vec<(String, u32)> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
        (recorded, rotations)
    });
    assert!(rotations >= 10);
    for (key, id) in &recorded {
        assert_eq!(d.bounded_lookup(key, 0, 0), Some(*id), "{key}");
    }
    assert_eq!(protection_violations(), violations);
}

/// Read-only probes (what signal handlers do) while others insert and
/// rotate: a key registered before always resolves, to its id.
#[test]
fn bounded_lookup_safe_under_concurrent_rotation() {
    const INSERTERS: usize = 4;
    const READERS: usize = 4;
    const KEYS: usize = 200;
    let d = persistent();
    let violations = protection_violations();
    let base: Vec<(String, u32)> = keys(99, 50)
        .into_iter()
        .map(|k| {
            let id = d.lookup(&k, 0).unwrap();
            (k, id)
        })
        .collect();
    let inserters_done = AtomicU32::new(0);
    let stop = AtomicBool::new(false);
    let probes = AtomicU32::new(0);
    std::thread::scope(|s| {
        for t in 0..INSERTERS {
            let (d, inserters_done) = (&d, &inserters_done);
            s.spawn(move || {
                for key in keys(t, KEYS) {
                    d.lookup(&key, t).expect("never full");
                }
                inserters_done.fetch_add(1, Ordering::SeqCst);
            });
        }
        for r in 0..READERS {
            let (d, base, stop, probes) = (&d, &base, &stop, &probes);
            s.spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    for (key, id) in base {
                        assert_eq!(d.bounded_lookup(key, 0, 10 + r), Some(*id), "{key}");
                    }
                    probes.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        let mut rotations = 0;
        let deadline = soak_deadline();
        while inserters_done.load(Ordering::SeqCst) < INSERTERS as u32
            || ((rotations < 50 || probes.load(Ordering::Relaxed) < 50) && Instant::now() < deadline)
        {
            d.rotate();
            rotations += 1;
        }
        stop.store(true, Ordering::SeqCst);
    });
    assert!(probes.load(Ordering::Relaxed) > 0);
    assert_eq!(protection_violations(), violations);
}

/// The dump thread looks up keys of the chunk being written while other
/// threads insert: it gets the keys' ids, and they are in the dump buffer.
#[test]
fn lookup_during_dump_safe_under_concurrent_inserts() {
    const INSERTERS: usize = 4;
    const KEYS: usize = 100;
    let d = persistent();
    let registered: Vec<(String, u32)> = keys(99, 20)
        .into_iter()
        .map(|k| {
            let id = d.lookup(&k, 0).unwrap();
            (k, id)
        })
        .collect();
    d.rotate();
    let started = Barrier::new(INSERTERS + 1);
    let dumped: Vec<(String, u32)> = std::thread::scope(|s| {
        for t in 0..INSERTERS {
            let (d, started) = (&d, &started);
            s.spawn(move || {
                started.wait();
                for key in keys(t, KEYS) {
                    d.lookup(&key, t).expect("never full");
                }
            });
        }
        started.wait();
        registered.iter().map(|(k, _)| (k.clone(), d.lookup(k, 50).expect("an id"))).collect()
    });
    assert_eq!(dumped, registered, "the dump thread got the registered ids");
    let dump: HashMap<u32, String> = d.dump_entries().into_iter().collect();
    for (key, id) in &dumped {
        assert_eq!(dump.get(id), Some(key), "{key} ({id}) not in the dump buffer");
    }
}

// ── Several dictionaries rotated together ───────────────────────────────────

/// Three dictionaries rotated under one lock (as a dump rotates every
/// store) while inserters and read-only probes run against all three:
/// after each rotation of the three, every seed id is in every dump
/// buffer, and probes always resolve the seeds to their ids.
#[test]
fn multi_dictionary_atomic_rotation() {
    const SEEDS: usize = 40;
    let dicts = [persistent(), persistent(), persistent()];
    let seeds: Vec<(String, [u32; 3])> = keys(99, SEEDS)
        .into_iter()
        .map(|k| {
            let ids = [0, 1, 2].map(|i| dicts[i].lookup(&k, 0).unwrap());
            (k, ids)
        })
        .collect();
    let rotate_all = Mutex::new(());
    let stop = AtomicBool::new(false);
    let violations = protection_violations();
    std::thread::scope(|s| {
        for (i, d) in dicts.iter().enumerate() {
            for t in 0..2 {
                let stop = &stop;
                s.spawn(move || {
                    let mine = keys(i * 10 + t, 100);
                    while !stop.load(Ordering::Relaxed) {
                        for k in &mine {
                            d.lookup(k, t).expect("never full");
                        }
                    }
                });
            }
        }
        for r in 0..3 {
            let (dicts, seeds, stop) = (&dicts, &seeds, &stop);
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    for (key, ids) in seeds {
                        for (d, id) in dicts.iter().zip(ids) {
                            assert_eq!(d.bounded_lookup(key, 0, 20 + r), Some(*id), "{key} drifted");
                        }
                    }
                }
            });
        }
        let deadline = soak_deadline();
        let mut rotations = 0;
        while rotations < 5 || (rotations < 60 && Instant::now() < deadline) {
            let _all = rotate_all.lock().unwrap();
            for d in &dicts {
                d.rotate();
            }
            for (i, d) in dicts.iter().enumerate() {
                let dump: HashSet<u32> = d.dump_entries().into_iter().map(|(id, _)| id).collect();
                for (key, ids) in &seeds {
                    assert!(dump.contains(&ids[i]), "dictionary {i}: dump buffer lacks {key} ({})", ids[i]);
                }
            }
            rotations += 1;
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert_eq!(protection_violations(), violations);
}

/// `rotate` needs no outside lock: with inserters running the whole time,
/// every dump buffer holds every key registered before.
#[test]
fn rotate_without_mutex_preserves_standby_snapshot() {
    let d = persistent();
    let seeds: Vec<(String, u32)> = keys(99, 50)
        .into_iter()
        .map(|k| {
            let id = d.lookup(&k, 0).unwrap();
            (k, id)
        })
        .collect();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for t in 0..6 {
            let (d, stop) = (&d, &stop);
            s.spawn(move || {
                let mine = keys(t, 200);
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    d.lookup(&mine[i % mine.len()], t).expect("never full");
                    i += 1;
                }
            });
        }
        for rotation in 0..30 {
            d.rotate();
            let dump: HashMap<u32, String> = d.dump_entries().into_iter().collect();
            for (key, id) in &seeds {
                assert_eq!(dump.get(id), Some(key), "rotation {rotation}: the dump buffer lacks {key}");
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
}

// ── clear_all while others use the dictionary ──────────────────────────────

/// `clear_all` without an outside lock, while other threads insert and
/// probe: nothing may be cleared under a reader. Ours switches the active
/// buffer and clears the old one, which is then the dump buffer that every
/// lookup missing the active buffer still probes: a probe that starts
/// after the wait for readers overlaps the clear (counted as a protection
/// violation; with a key present it reads freed key memory). To stay
/// memory-safe itself, this test only inserts fresh keys and probes keys
/// that are never present, so no probe dereferences a key; the overlap is
/// seen through the counter.
#[test]
fn clear_all_without_external_lock_is_safe() {
    let d = TripleBufferedDictionary::new(1 << 16, Carry::Everything).unwrap();
    let violations = protection_violations();
    let stop = AtomicBool::new(false);
    let fresh = AtomicU32::new(0);
    std::thread::scope(|s| {
        for t in 0..2 {
            let (d, stop, fresh) = (&d, &stop, &fresh);
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("fresh_{}", fresh.fetch_add(1, Ordering::Relaxed));
                    // A full buffer (writers outrunning the clears) is a miss.
                    let _ = d.lookup(&key, t);
                }
            });
        }
        for t in 0..2 {
            let (d, stop) = (&d, &stop);
            s.spawn(move || {
                let absent = keys(1000 + t, 50);
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    assert_eq!(d.bounded_lookup(&absent[i % absent.len()], 0, 10 + t), None);
                    i += 1;
                }
            });
        }
        let deadline = soak_deadline();
        let mut clears = 0;
        while Instant::now() < deadline && protection_violations() == violations {
            // Something to clear: the buffer's keys make the clear take a while.
            while d.len() < 1000 && Instant::now() < deadline {
                std::thread::yield_now();
            }
            d.clear_all();
            clears += 1;
        }
        assert!(clears > 0);
        stop.store(true, Ordering::Relaxed);
    });
    assert_eq!(protection_violations(), violations, "a buffer was cleared under a protected reader");
}

/// Callers that quiesce readers around `clear_all` (a read-write lock here)
/// see one consistent id per key in each epoch between clears.
#[test]
fn clear_all_under_concurrent_readers() {
    let d = persistent();
    let seed_keys = keys(99, 30);
    let reseed =
        || -> HashMap<String, u32> { seed_keys.iter().map(|k| (k.clone(), d.lookup(k, 0).unwrap())).collect() };
    let epoch = RwLock::new(reseed());
    let stop = AtomicBool::new(false);
    let checks = AtomicU32::new(0);
    std::thread::scope(|s| {
        for t in 0..2 {
            let (d, epoch, stop) = (&d, &epoch, &stop);
            s.spawn(move || {
                let mine = keys(t, 60);
                while !stop.load(Ordering::Relaxed) {
                    let _shared = epoch.read().unwrap();
                    for k in &mine {
                        d.lookup(k, t).expect("never full");
                    }
                }
            });
        }
        for r in 0..4 {
            let (d, epoch, stop, checks) = (&d, &epoch, &stop, &checks);
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let ids = epoch.read().unwrap();
                    for (key, id) in ids.iter() {
                        assert_eq!(d.bounded_lookup(key, 0, 10 + r), Some(*id), "{key}");
                    }
                    checks.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        for _ in 0..20 {
            // Let the readers check this epoch at least once.
            let seen = checks.load(Ordering::SeqCst);
            while checks.load(Ordering::SeqCst) < seen + 2 {
                std::thread::yield_now();
            }
            let mut ids = epoch.write().unwrap();
            d.clear_all();
            *ids = reseed();
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(checks.load(Ordering::Relaxed) > 0);
}
