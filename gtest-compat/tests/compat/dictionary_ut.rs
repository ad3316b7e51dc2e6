//! Port of upstream `dictionary_ut` (see gtest-compat/README.md).
//!
//! Upstream has a plain `Dictionary` (one table, ids of its own) and, in
//! older versions of the suite, a non-persistent `TripleBufferedDictionary`
//! with a separate `clearStandby()`. Both map onto our
//! [`TripleBufferedDictionary`]: without rotations it is one table, and with
//! [`Carry::Nothing`] it is the non-persistent kind. Our `rotate` clears the
//! old dump buffer itself (upstream's `rotate()` + `clearStandby()`), the
//! dump buffer is upstream's "standby" and `dump_entries` its `collect`; a
//! refused or missed lookup is `None` where upstream returns `INT_MAX`.
//!
//! The helpers at the end are shared with the other dictionary suites.

use profiler_agent::recording::endpoints::Endpoints;
use sampler::counters::{self, Counter};
use sampler::dictionary::{Carry, TripleBufferedDictionary};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering};

fn dictionary(carry: Carry) -> TripleBufferedDictionary {
    TripleBufferedDictionary::new(4096, carry).expect("reserve the dictionary")
}

// ── Dictionary ──────────────────────────────────────────────────────────────

#[test]
fn lookup_returns_same_id_for_same_key() {
    let d = dictionary(Carry::Nothing);
    let id = d.lookup("hello", 1).expect("an id for a new key");
    assert!(id > 0, "0 is never a valid id");
    assert_eq!(d.lookup("hello", 2), Some(id), "the same key from another thread hint");
    assert_eq!(d.len(), 1, "the second lookup found the key, it did not insert again");
}

/// Upstream counts the dictionary's native memory (`NM_DICTIONARY`) and
/// checks that it grows with inserts, returns to the post-construction
/// baseline on `clear()` and to zero on destruction. We have no such
/// accounting; the same balance is checked on what the process really
/// holds: heap bytes in use (glibc `mallinfo2`) and resident anonymous
/// memory (the lazily committed tables), measured in a child process that
/// runs this test alone so no other test disturbs the numbers.
#[test]
fn native_mem_accounting_balances_across_lifecycle() {
    run_alone(&case_path(module_path!(), "native_mem_accounting_balances_across_lifecycle"), || {
        const KEYS: usize = 40_000;
        let before = heap_in_use();
        {
            let d = TripleBufferedDictionary::new(1 << 16, Carry::Nothing).unwrap();
            let after_new = heap_in_use();
            let resident_after_new = resident_anon_bytes();
            for i in 0..KEYS {
                d.lookup(&format!("symbol_{i}"), 0).unwrap();
            }
            assert!(heap_in_use() > after_new + (1 << 20), "key copies are on the heap");
            let resident_full = resident_anon_bytes();
            // 40 000 entries touch most pages of a 1.5 MiB table.
            assert!(resident_full >= resident_after_new + (1 << 20), "{resident_after_new} -> {resident_full}");
            d.clear_all();
            assert_heap_near(after_new, "clear_all frees every key copy");
            let resident_cleared = resident_anon_bytes();
            assert!(
                resident_cleared < resident_full - (1 << 20),
                "clear_all gives the table's pages back: {resident_full} -> {resident_cleared}"
            );
        }
        assert_heap_near(before, "dropping the dictionary releases everything");
    });
}

#[test]
fn lookup_returns_different_ids_for_different_keys() {
    let d = dictionary(Carry::Nothing);
    let alpha = d.lookup("alpha", 0).unwrap();
    let beta = d.lookup("beta", 0).unwrap();
    assert_ne!(alpha, beta);
}

#[test]
fn bounded_lookup_skips_insert_when_at_limit() {
    let d = dictionary(Carry::Nothing);
    d.lookup("key1", 0).unwrap();
    assert_eq!(d.bounded_lookup("key2", 1, 0), None, "one entry, limit one: no insert");
    assert_eq!(d.len(), 1);
    assert!(d.live_entries().values().all(|k| k != "key2"), "the refused key left no trace");
    // The same rule through its user: a new endpoint label beyond the
    // chunk's size limit refuses the event.
    let endpoints = Endpoints::new().unwrap();
    assert!(endpoints.record(1, 7, "/first", "op", 2));
    assert!(!endpoints.record(1, 7, "/second", "op", 2), "two labels already, a third is refused");
}

#[test]
fn bounded_lookup_returns_existing_id_when_at_limit() {
    let d = dictionary(Carry::Nothing);
    let existing = d.lookup("key1", 0).unwrap();
    assert_eq!(d.bounded_lookup("key1", 1, 0), Some(existing), "the limit only stops inserts");
    assert_eq!(d.bounded_lookup("key1", 0, 0), Some(existing), "nor does the read-only probe miss it");
    let endpoints = Endpoints::new().unwrap();
    assert!(endpoints.record(1, 7, "/first", "op", 2));
    assert!(endpoints.record(1, 8, "/first", "op", 2), "known labels are accepted at the limit");
}

#[test]
fn collect_returns_all_inserted_entries() {
    let d = dictionary(Carry::Nothing);
    let ids: Vec<u32> = ["a", "b", "c"].iter().map(|k| d.lookup(k, 0).unwrap()).collect();
    let live = d.live_entries();
    assert_eq!(live.len(), 3);
    for (key, id) in ["a", "b", "c"].iter().zip(ids) {
        assert_eq!(live.get(&id).map(String::as_str), Some(*key));
    }
}

#[test]
fn clear_resets_to_empty() {
    let d = dictionary(Carry::Nothing);
    d.lookup("x", 0).unwrap();
    d.clear_all();
    assert!(d.live_entries().is_empty());
    assert!(d.is_empty());
    assert_eq!(d.bounded_lookup("x", 0, 0), None);
}

// ── TripleBufferedDictionary ────────────────────────────────────────────────

#[test]
fn lookup_goes_to_active() {
    let d = dictionary(Carry::Nothing);
    let id = d.lookup("cls", 0).unwrap();
    assert_eq!(d.lookup("cls", 0), Some(id));
    assert_eq!(d.active_buffer().entries(), vec![(id, "cls".to_owned())]);
}

#[test]
fn bounded_lookup_goes_to_active() {
    let d = dictionary(Carry::Nothing);
    let id = d.bounded_lookup("ep", 100, 0).expect("below the limit: inserted");
    assert_eq!(d.bounded_lookup("ep", 100, 0), Some(id));
    assert_eq!(d.active_buffer().entries(), vec![(id, "ep".to_owned())]);
}

/// A read-only probe (size limit 0, what signal handlers use) of a
/// non-persistent dictionary sees the active buffer only: keys of the
/// previous chunk are not found through the dump buffer.
#[test]
fn bounded_lookup_read_only_does_not_fall_back() {
    let d = dictionary(Carry::Nothing);
    let id = d.lookup("cls", 0).unwrap();
    assert_eq!(d.bounded_lookup("cls", 0, 0), Some(id));
    d.rotate();
    assert_eq!(d.dump_entries(), vec![(id, "cls".to_owned())], "the key is in the dump buffer");
    assert_eq!(d.bounded_lookup("cls", 0, 0), None, "but the probe does not look there");
    assert_eq!(d.bounded_lookup("missing", 0, 0), None);
    assert!(d.is_empty(), "and the probe inserted nothing");
}

#[test]
fn rotate_makes_old_active_readable_as_standby() {
    let d = dictionary(Carry::Nothing);
    let id = d.lookup("cls", 0).unwrap();
    d.rotate();
    assert_eq!(d.dump_entries(), vec![(id, "cls".to_owned())]);
}

#[test]
fn inserts_after_rotate_go_to_new_active_not_standby() {
    let d = dictionary(Carry::Nothing);
    let a = d.lookup("a", 0).unwrap();
    d.rotate();
    let b = d.lookup("b", 0).unwrap();
    assert_eq!(d.dump_entries(), vec![(a, "a".to_owned())], "only the key of the previous chunk");
    d.rotate();
    assert_eq!(d.dump_entries(), vec![(b, "b".to_owned())], "only the key of the chunk just ended");
}

/// Upstream clears the standby buffer with a separate call; our `rotate`
/// clears the old dump buffer as its last step. Either way the clear never
/// touches the active buffer.
#[test]
fn clear_standby_does_not_affect_active_entries() {
    let d = dictionary(Carry::Nothing);
    d.lookup("a", 0).unwrap();
    d.rotate();
    let b = d.lookup("b", 0).unwrap();
    d.rotate(); // clears the buffer that held "a" before the last chunk
    assert_eq!(d.dump_entries(), vec![(b, "b".to_owned())]);
    d.rotate();
    assert!(d.dump_entries().is_empty());
    assert!(d.live_entries().is_empty(), "nothing was carried: all purged after two rotations");
}

#[test]
fn standby_is_empty_after_clear_standby_and_rotate() {
    let d = dictionary(Carry::Nothing);
    d.lookup("a", 0).unwrap();
    d.rotate();
    d.rotate();
    assert!(d.dump_entries().is_empty(), "nothing was inserted in the chunk just ended");
}

#[test]
fn multi_cycle_rotate_and_clear_is_stable() {
    let d = dictionary(Carry::Nothing);
    for cycle in 0..10 {
        let key = format!("key{cycle}");
        let id = d.lookup(&key, 0).unwrap();
        d.rotate();
        assert_eq!(d.dump_entries(), vec![(id, key)], "cycle {cycle}");
    }
}

#[test]
fn clear_all_resets_active_too() {
    let d = dictionary(Carry::Nothing);
    d.lookup("x", 0).unwrap();
    d.rotate();
    d.lookup("y", 0).unwrap();
    d.clear_all();
    assert!(d.dump_entries().is_empty());
    assert!(d.is_empty(), "the active buffer too");
    d.rotate();
    assert!(d.dump_entries().is_empty());
    assert!(d.live_entries().is_empty());
}

/// Writers run while another thread rotates (upstream's writers finish
/// first and the rotations follow; here they overlap). Every lookup gets an
/// id, ids stay unique per key within a chunk, no buffer is cleared under a
/// protected reader, and afterwards everything is purged.
#[test]
fn writers_during_rotate_produce_no_corruption() {
    const WRITERS: usize = 4;
    const KEYS_PER_WRITER: usize = 500;
    let d = TripleBufferedDictionary::new(1 << 14, Carry::Nothing).unwrap();
    let violations = protection_violations();
    let done = AtomicU32::new(0);
    let rotations = std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (d, done) = (&d, &done);
            s.spawn(move || {
                for n in 0..KEYS_PER_WRITER {
                    let key = format!("t{w}_{n}");
                    let id = d.lookup(&key, w).expect("never full");
                    assert!(id > 0);
                }
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        let mut rotations = 0;
        while done.load(Ordering::SeqCst) < WRITERS as u32 || rotations < 20 {
            d.rotate();
            let dump = d.dump_entries();
            let ids: HashSet<u32> = dump.iter().map(|(id, _)| *id).collect();
            let keys: HashSet<&String> = dump.iter().map(|(_, key)| key).collect();
            assert_eq!(ids.len(), dump.len(), "an id names one key");
            assert_eq!(keys.len(), dump.len(), "a key has one id per buffer");
            rotations += 1;
        }
        rotations
    });
    assert!(rotations >= 20);
    d.rotate();
    d.rotate();
    assert!(d.live_entries().is_empty());
    assert_eq!(protection_violations(), violations);
}

// Upstream `AllBuffersHaveRealId`, `RotateKeepsRealIdOnAllBuffers` and
// `ClearStandbyKeepsRealIdOnAllBuffers` check which per-dictionary counter
// row each buffer reports to: not applicable, we have no per-dictionary
// counter rows (our dictionary counters are process-wide).

// ── Helpers shared with the other dictionary suites ─────────────────────────

/// Protection violations counted so far (a buffer cleared under a reader).
pub(crate) fn protection_violations() -> u64 {
    counters::get(Counter::DictionaryProtectionViolations)
}

/// `entries` sorted, for comparisons.
pub(crate) fn sorted_entries(mut entries: Vec<(u32, String)>) -> Vec<(u32, String)> {
    entries.sort();
    entries
}

/// The libtest name of `case` in the module whose `module_path!()` is
/// `module` (the crate's own name stripped).
pub(crate) fn case_path(module: &str, case: &str) -> String {
    let module = module.split_once("::").map_or(module, |(_, rest)| rest);
    format!("{module}::{case}")
}

/// Runs `body` in a child process of this test binary that runs only the
/// test `case` (its libtest path), so process-wide measurements see no
/// other test. Freed chunks parked in glibc's per-thread cache count as in
/// use in `mallinfo2`: without the cache the heap figures are exact.
pub(crate) fn run_alone(case: &str, body: impl FnOnce()) {
    crate::isolation::in_own_process(case, &[("GLIBC_TUNABLES", "glibc.malloc.tcache_count=0")], body);
}

/// Heap bytes in use by the process (all arenas, plus mmapped chunks).
pub(crate) fn heap_in_use() -> usize {
    // SAFETY: mallinfo2 only reads allocator statistics.
    let info = unsafe { libc::mallinfo2() };
    info.uordblks + info.hblkhd
}

/// Slack for allocations the test harness itself makes meanwhile (its
/// main thread in the child). Any per-key leak is far larger: the tests
/// insert tens of thousands of keys, each allocation at least 32 bytes.
const HEAP_SLACK: usize = 4096;

/// Asserts that the heap in use is back to `baseline` (within the slack).
pub(crate) fn assert_heap_near(baseline: usize, what: &str) {
    let now = heap_in_use();
    assert!(now.abs_diff(baseline) <= HEAP_SLACK, "{what}: heap in use {baseline} -> {now}");
}

/// Resident anonymous memory of the process (`RssAnon`), in bytes.
pub(crate) fn resident_anon_bytes() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let line = status.lines().find(|l| l.starts_with("RssAnon:")).expect("RssAnon in /proc/self/status");
    let kib: usize = line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("RssAnon in kB");
    kib * 1024
}
