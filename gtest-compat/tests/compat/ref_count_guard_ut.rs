//! Port of upstream `refCountGuard_ut` (see gtest-compat/README.md).
//!
//! Upstream protects a resource with a per-thread reference-count slot
//! (`RefCountGuard`: an active pointer, a count and a stack of outer
//! pointers for nesting) and drains it with timed waits. We protect with
//! hazard slots ([`Hazards`]): every protection claims a slot of its own,
//! publishes the resource, then re-checks that it is still current; a
//! reclaimer first makes the resource non-current, then waits until no
//! slot publishes it (`wait_unused`, unbounded) or asks whether one does
//! (`in_use`, a single scan). The cases below check upstream's contracts
//! against that mechanism: resources are plain addresses, and "freeing"
//! one is recorded in a flag that a reader asserts is unset when it uses
//! the resource.

use sampler::dictionary::hazard::{HazardGuard, Hazards};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Two distinct resource addresses (never 0 or 1, which slots reserve).
const R: usize = 0x1000;
const S: usize = 0x2000;

/// The reclaimer's side of a resource handover: `current` names the live
/// resource; retiring `R` makes `S` current, waits for `R`'s readers and
/// marks `R` freed.
struct Handover {
    hazards: Hazards,
    current: AtomicUsize,
    freed: AtomicBool,
    reclaimed: AtomicBool,
}

impl Handover {
    fn new() -> Self {
        Self {
            hazards: Hazards::new(),
            current: AtomicUsize::new(R),
            freed: AtomicBool::new(false),
            reclaimed: AtomicBool::new(false),
        }
    }

    fn retire_r(&self) {
        self.current.store(S, Ordering::SeqCst);
        self.hazards.wait_unused(R);
        self.reclaimed.store(true, Ordering::SeqCst);
        self.freed.store(true, Ordering::SeqCst);
    }

    /// What a reader does with what it protected: use it.
    fn use_resource(&self, guard: &HazardGuard<'_>) {
        if guard.protected() == R {
            assert!(!self.freed.load(Ordering::SeqCst), "a protected resource was freed under its reader");
        }
    }
}

/// Waits (bounded) for `cond`, yielding. Returns whether it became true.
fn eventually(cond: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::yield_now();
    }
    true
}

// ── The activation window ───────────────────────────────────────────────────

/// Upstream: the global drain must not return while a holder has published
/// its pointer but not yet counted itself. We have no global drain; our
/// earliest window is a slot claimed with nothing published yet. A drain
/// of `R` that runs then returns at once (nothing publishes `R`), and that
/// is safe: the reader then publishes `R`, its validation sees that `R` is
/// no longer current, and it protects `S` instead. It never uses the freed
/// resource.
#[test]
fn wait_for_all_blocks_during_activation_window() {
    let h = Handover::new();
    let (in_window_tx, in_window_rx) = mpsc::channel();
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let calls = AtomicU32::new(0);
            let guard = h
                .hazards
                .protect(3, || {
                    let seen = h.current.load(Ordering::SeqCst);
                    if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                        // Slot claimed, `R` read, nothing published: the
                        // reclaimer runs to completion right here.
                        in_window_tx.send(()).unwrap();
                        assert!(eventually(|| h.reclaimed.load(Ordering::SeqCst)), "the drain did not finish");
                    }
                    seen
                })
                .expect("a free slot");
            h.use_resource(&guard);
            guard.protected()
        });
        in_window_rx.recv().unwrap();
        h.retire_r();
        assert_eq!(reader.join().unwrap(), S, "the reader re-validated and took the current resource");
    });
}

/// A drain of `R` must not return while a reader has published `R` and not
/// yet validated it (the window between our publish and our re-check).
#[test]
fn wait_for_specific_blocks_during_activation_window() {
    let h = Handover::new();
    let (in_window_tx, in_window_rx) = mpsc::channel();
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let calls = AtomicU32::new(0);
            let guard = h
                .hazards
                .protect(3, || {
                    if calls.fetch_add(1, Ordering::SeqCst) == 1 {
                        // `R` is published, not yet validated: hold the
                        // window open while the reclaimer retires `R`.
                        in_window_tx.send(()).unwrap();
                        assert!(eventually(|| h.current.load(Ordering::SeqCst) == S));
                        for _ in 0..1000 {
                            std::thread::yield_now();
                        }
                        assert!(!h.reclaimed.load(Ordering::SeqCst), "the drain returned inside the window");
                    }
                    h.current.load(Ordering::SeqCst)
                })
                .expect("a free slot");
            h.use_resource(&guard);
            guard.protected()
        });
        in_window_rx.recv().unwrap();
        h.retire_r();
        assert_eq!(reader.join().unwrap(), S);
    });
    assert!(h.reclaimed.load(Ordering::SeqCst));
}

// ── Draining specific resources ─────────────────────────────────────────────

/// A protection of `resource` held on another thread until released.
struct Held<'s> {
    release: mpsc::Sender<()>,
    thread: std::thread::ScopedJoinHandle<'s, ()>,
}

impl<'s> Held<'s> {
    fn new(s: &'s std::thread::Scope<'s, '_>, hazards: &'s Hazards, resource: usize, released: &'s AtomicBool) -> Self {
        let (held_tx, held_rx) = mpsc::channel();
        let (release, release_rx) = mpsc::channel();
        let thread = s.spawn(move || {
            let guard = hazards.protect(resource, || resource).expect("a free slot");
            held_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            released.store(true, Ordering::SeqCst);
            drop(guard);
        });
        held_rx.recv().unwrap();
        Self { release, thread }
    }

    fn release(self) {
        self.release.send(()).unwrap();
        self.thread.join().unwrap();
    }
}

#[test]
fn returns_true_when_no_guard_references_targets() {
    let hazards = Hazards::new();
    assert!(!hazards.in_use(R) && !hazards.in_use(S));
    hazards.wait_unused(R);
    hazards.wait_unused(S);
}

/// Protections of unrelated resources neither delay nor fail the drain of a
/// target (a global drain would wait for them).
#[test]
fn ignores_guards_on_other_resources() {
    let hazards = Hazards::new();
    let released = AtomicBool::new(false);
    std::thread::scope(|s| {
        let held = Held::new(s, &hazards, S, &released);
        assert!(!hazards.in_use(R));
        let (drained_tx, drained_rx) = mpsc::channel();
        let hazards = &hazards;
        s.spawn(move || {
            hazards.wait_unused(R);
            drained_tx.send(()).unwrap();
        });
        let drained = drained_rx.recv_timeout(Duration::from_secs(10));
        assert!(!released.load(Ordering::SeqCst));
        held.release();
        assert!(drained.is_ok(), "the drain of R waited for a protection of S");
    });
}

/// A protection of any one of the targets is seen by the scan.
#[test]
fn returns_false_while_any_target_is_guarded() {
    const T: usize = 0x3000;
    let hazards = Hazards::new();
    let released = AtomicBool::new(false);
    std::thread::scope(|s| {
        let held = Held::new(s, &hazards, S, &released);
        assert!([R, S, T].iter().any(|&t| hazards.in_use(t)));
        assert!(hazards.in_use(S));
        held.release();
    });
    assert!(![R, S, T].iter().any(|&t| hazards.in_use(t)));
}

/// A drain waiting for a protected target returns once the last protection
/// is released, and not before.
#[test]
fn returns_true_once_guard_is_released() {
    let hazards = Hazards::new();
    let released = AtomicBool::new(false);
    let second_released = AtomicBool::new(false);
    std::thread::scope(|s| {
        let first = Held::new(s, &hazards, R, &released);
        let second = Held::new(s, &hazards, R, &second_released);
        let (waiting_tx, waiting_rx) = mpsc::channel();
        let releaser = s.spawn(move || {
            waiting_rx.recv().unwrap();
            first.release();
            second.release();
        });
        waiting_tx.send(()).unwrap();
        hazards.wait_unused(R);
        assert!(released.load(Ordering::SeqCst) && second_released.load(Ordering::SeqCst), "returned early");
        releaser.join().unwrap();
    });
}

// ── Nesting ─────────────────────────────────────────────────────────────────

/// A scan sees a resource protected by an outer protection while nested
/// protections on the same thread (a signal handler's lookup inside a
/// lookup) start and end. First the single-threaded contract, then a
/// scanner racing a thread that nests as fast as it can.
#[test]
fn sees_outer_resource_across_nested_guards() {
    let hazards = Hazards::new();
    {
        let outer = hazards.protect(5, || R).unwrap();
        let inner = hazards.protect(5, || R).unwrap();
        drop(inner);
        assert!(hazards.in_use(R), "the inner release took the outer protection with it");
        let inner = hazards.protect(5, || S).unwrap();
        drop(inner);
        assert!(hazards.in_use(R));
        drop(outer);
        assert!(!hazards.in_use(R));
    }

    let holding = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    let nestings = AtomicU32::new(0);
    let (scans, misses) = std::thread::scope(|s| {
        s.spawn(|| {
            let _outer = hazards.protect(5, || R).unwrap();
            holding.store(true, Ordering::SeqCst);
            let mut same = true;
            while !stop.load(Ordering::Relaxed) {
                // Nested protections alternate between the outer resource and another.
                let inner = hazards.protect(5, || if same { R } else { S });
                drop(inner.unwrap());
                same = !same;
                nestings.fetch_add(1, Ordering::Relaxed);
            }
        });
        assert!(eventually(|| holding.load(Ordering::SeqCst)));
        let deadline = Instant::now() + Duration::from_millis(500);
        let (mut scans, mut misses) = (0u64, 0u64);
        while (scans < 200_000 || nestings.load(Ordering::Relaxed) < 10_000) && Instant::now() < deadline {
            if !hazards.in_use(R) {
                misses += 1;
            }
            scans += 1;
        }
        stop.store(true, Ordering::Relaxed);
        (scans, misses)
    });
    assert!(nestings.load(Ordering::Relaxed) > 0);
    assert_eq!(misses, 0, "{misses} of {scans} scans missed the outer resource");
}
