//! Samples taken on the Java thread itself: sampled heap allocations
//! (`alloc=`, JVMTI `SampledObjectAlloc`), contended monitor waits
//! (`lock=`, `MonitorContendedEnter`/`Entered`) and waits parked on
//! `java.util.concurrent` locks (`lock=`, the `Unsafe.park` hook and the
//! virtual threads' timer of `engine::park`). Each records the object's class, an amount (bytes, or
//! nanoseconds waited) and the thread's Java stack next to the CPU and
//! wall-clock samples; an allocation made by JNI code has that code's
//! native frames on top (`cstack=`, as CPU samples have them).
//!
//! Not a signal handler (so it lives outside the `sampler` crate): the callbacks run
//! in the Java thread where JVMTI may be called, so they ask JVMTI for the
//! stack (`GetStackTrace`) and the class name, and may allocate (per-thread
//! buffers, reused). They share the lock-free stores of the published
//! sampler: call traces, stripes (`try_acquire`; a busy stripe or a full
//! buffer is a counted drop) and the session's class table.

use crate::callbacks::live_objects::{Allocation, LiveObjects};
use crate::callbacks::CallbackState;
use crate::jvm::jni_env::JniEnv;
use crate::jvm::jvmti::internal_class_name;
use crate::jvm::jvmti::{ClassRef, FrameInfo, Jvmti};
use frames::{Frame, BCI_NATIVE_METHOD};
use sampler::clock;
use sampler::counters::{self, Counter};
use sampler::dictionary::{Carry, TripleBufferedDictionary};
use sampler::mixed::Cut;
use sampler::storage::call_traces::TraceId;
use sampler::storage::samples::{SampleKind, SampleRecord};
use sampler::storage::thread_slots::Context;
use sampler::Sampler;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Classes a session names; later ones are recorded as unknown (id 0).
const CLASS_CAPACITY: u32 = 65_536;

/// Lock waits sampled by the time waited (`lock=INTERVAL`,
/// `lockthreshold=`): a wait of at least `interval_ns` is always recorded
/// and weighs itself; a shorter one is recorded with probability
/// waited / interval and weighs one interval, so that the weights add up
/// to the time waited (in expectation), however short and frequent the
/// waits; a wait shorter than `threshold_ns` is never recorded. A
/// recorded wait keeps its own duration: its weight, `max(duration,
/// interval)`, follows from the `lock` setting, so readers that know the
/// setting weigh it without a field of its own (async-profiler's
/// converter reads the JDK's fields by position). Independent draws per
/// wait: no aliasing with regular wait patterns, no shared counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockSampling {
    pub interval_ns: u64,
    pub threshold_ns: u64,
}

impl LockSampling {
    /// Whether a wait of `waited` ns is recorded, given `draw`, uniformly
    /// distributed over all `u64`s.
    pub fn takes(self, waited: u64, draw: u64) -> bool {
        if waited == 0 || waited < self.threshold_ns {
            return false;
        }
        // draw / 2^64 < waited / interval, exactly.
        waited >= self.interval_ns || (u128::from(draw) * u128::from(self.interval_ns)) >> 64 < u128::from(waited)
    }

    /// Whether a wait of `waited` ns is recorded, drawn from the calling
    /// thread's own generator.
    pub fn takes_now(self, waited: u64) -> bool {
        // Long waits need no draw.
        waited >= self.interval_ns && waited >= self.threshold_ns || self.takes(waited, sampler::random::next_u64())
    }
}

/// A session's JVMTI-delivered sampling.
pub struct JvmtiSamples {
    /// Mean bytes between allocation samples (`alloc=`).
    pub alloc_interval: Option<u32>,
    /// Which lock waits are recorded (`lock=`, `lockthreshold=`).
    pub lock: Option<LockSampling>,
    /// Sampled objects still alive (`live`).
    pub live: Option<LiveObjects>,
    /// Sampled objects' classes by internal name (`[B`,
    /// `java/lang/String`). Never rotated: an id names one class for the
    /// whole session.
    pub classes: TripleBufferedDictionary,
}

impl JvmtiSamples {
    pub fn new(alloc_interval: Option<u32>, live: bool, lock: Option<LockSampling>) -> std::io::Result<Self> {
        let classes = TripleBufferedDictionary::new(CLASS_CAPACITY as usize, Carry::Everything)?;
        let live = live.then(LiveObjects::default);
        Ok(Self { alloc_interval, lock, live, classes })
    }

    /// The class table id of `class` (0 when unknown or the table is full).
    fn class_id(&self, jvmti: &Jvmti, class: ClassRef, tid: u32) -> u32 {
        let Ok(signature) = jvmti.class_signature(class) else { return 0 };
        self.classes.bounded_lookup(internal_class_name(&signature), CLASS_CAPACITY, tid as usize).unwrap_or_else(
            || {
                counters::increment(Counter::ObjectClassesFull);
                0
            },
        )
    }
}

thread_local! {
    /// The thread's stack, from JVMTI and as stored frames.
    static STACK: RefCell<(Vec<FrameInfo>, Vec<Frame>)> = const { RefCell::new((Vec::new(), Vec::new())) };
    /// When the thread began waiting for a contended monitor (0: not).
    static WAIT_START: Cell<u64> = const { Cell::new(0) };
}

/// The bytes a sample of `size` stands for when allocations are sampled
/// every `interval` bytes on average (a Poisson process over bytes): the
/// unbiased estimate `size / (1 - e^(-size/interval))`, about `interval`
/// for small objects and `size` for large ones.
pub fn weight(size: u64, interval: u32) -> u64 {
    if size == 0 || interval == 0 {
        return size;
    }
    let p = 1.0 - (-(size as f64) / f64::from(interval)).exp();
    (size as f64 / p).round() as u64
}

/// The calling thread's Java frames from JVMTI, less the innermost
/// `skip`, into `STACK`'s raw frames. No stripe may be held: JVMTI may
/// wait out a safepoint.
fn java_frames(sampler: &Sampler, jvmti: &Jvmti, skip: u8) {
    STACK.with_borrow_mut(|(raw, _)| {
        raw.resize(sampler.max_depth, FrameInfo { method: std::ptr::null_mut(), location: -1 });
        let count = jvmti.own_stack_trace(skip, raw).unwrap_or_else(|_| {
            counters::increment(Counter::JvmtiStackFailed);
            0
        });
        raw.truncate(count);
    })
}

/// The calling thread's stack, stored: with native stacks on (`cstack=`)
/// and stripe `native_in` held, the JNI code that called the JVM first
/// (none when Java code did), then the Java frames [`java_frames`] took.
fn stored_trace(sampler: &Sampler, tid: u32, native_in: Option<usize>) -> TraceId {
    STACK.with_borrow_mut(|(raw, frames)| {
        frames.clear();
        frames.resize(sampler.max_depth - raw.len(), Frame::default());
        let native = match (native_in, sampler.native.as_ref()) {
            // SAFETY: the caller holds stripe `stripe`; the registers are
            // this thread's own, taken here.
            (Some(stripe), Some(unwinder)) => unsafe {
                unwinder.walk_jvm_caller(stripe, unwind::arch::current_registers(), frames)
            },
            _ => 0,
        };
        frames.truncate(native);
        // JVMTI says -1 where a native method has no bytecode index.
        let bci = |f: &FrameInfo| if f.location < 0 { BCI_NATIVE_METHOD } else { f.location as i32 };
        frames.extend(raw.iter().map(|f| Frame::java(f.method as u64, bci(f))));
        let truncated = frames.len() == sampler.max_depth;
        if let (true, Some(root)) = (truncated, frames.last_mut()) {
            *root = Cut::Depth.marker();
        }
        sampler.traces.put(frames, truncated, tid as usize)
    })
}

/// What one sample saw: an object of `class` (allocated, or waited for)
/// and `value` (bytes, or nanoseconds waited since `time_ns`), by code
/// under the innermost `own_frames` Java frames (the agent's).
struct Observed {
    kind: SampleKind,
    class: ClassRef,
    value: u64,
    park_time: i64,
    time_ns: u64,
    own_frames: u8,
}

/// Records `observed` as a sample of the calling thread `tid`; returns
/// the sample's class id, its stack's trace id (the stack stays in
/// `STACK`) and its context.
fn record(
    sampler: &Sampler,
    samples: &JvmtiSamples,
    jvmti: &Jvmti,
    observed: Observed,
    tid: u32,
) -> (u32, TraceId, Context) {
    let class = samples.class_id(jvmti, observed.class, tid);
    java_frames(sampler, jvmti, observed.own_frames);
    // Held from here to the push: a native walk uses the stripe's caches.
    let stripe = sampler.stripes.try_acquire(tid);
    let native_in = stripe.as_ref().filter(|_| observed.kind == SampleKind::Alloc).map(|s| s.index());
    let trace = stored_trace(sampler, tid, native_in);
    let context = sampler.context.sample_context(tid);
    let Some(mut stripe) = stripe else {
        counters::increment(observed.kind.counters().busy);
        return (class, trace, context);
    };
    let record = SampleRecord {
        time_ns: observed.time_ns,
        tid,
        trace: trace.0,
        weight: 1,
        state: 0,
        kind: observed.kind,
        class,
        value: observed.value,
        park_time: observed.park_time,
        address: 0,
        context,
    };
    stripe.push_counted(record);
    (class, trace, context)
}

/// Records an allocation of `size` bytes of `class` by the calling thread
/// `tid` (the JVMTI callback's thread, whose `env` this is) in the
/// published `sampler`, and with `live` tracks the allocated `object`.
///
/// # Safety
/// `object` must be the reference the JVMTI callback received.
#[allow(clippy::too_many_arguments)]
pub unsafe fn record_allocation(
    state: &CallbackState,
    jvmti: &Jvmti,
    env: Option<JniEnv>,
    object: jni::sys::jobject,
    class: ClassRef,
    size: u64,
    time_ns: u64,
    tid: u32,
) {
    let sampler = &state.sampler;
    let Some(samples) = state.jvmti.as_ref().filter(|s| s.alloc_interval.is_some()) else { return };
    if !sampler.sampled(tid) {
        return;
    }
    let observed = Observed { kind: SampleKind::Alloc, class, value: size, park_time: 0, time_ns, own_frames: 0 };
    let (class, trace, context) = record(sampler, samples, jvmti, observed, tid);
    let (Some(live), Some(env)) = (samples.live.as_ref(), env) else { return };
    STACK.with_borrow(|(_, frames)| {
        let sample = Allocation {
            class,
            size,
            time_ns,
            tid,
            trace: trace.0,
            frames,
            truncated: frames.len() >= sampler.max_depth,
            span_id: context.span_id,
            root_span_id: context.root_span_id,
        };
        // SAFETY: per the contract, a live reference of this thread.
        unsafe { live.track(env, object, &sample) };
    });
}

/// Where contended monitor waits' starts are kept. Set by each session
/// that records locks, but process-wide: `MonitorContendedEnter` stores a
/// start without looking up the session (it records nothing).
struct WaitStarts {
    /// Whether they are kept in threads' JVMTI thread-local values (JDK
    /// 24+: a virtual thread blocked on a monitor unmounts, and enters on
    /// another carrier), else in the OS thread's.
    in_jvmti: AtomicBool,
    /// Since when: a start from before (an earlier session's, whose events
    /// ended before the wait did) is dropped.
    since_ns: AtomicU64,
}

static WAIT_STARTS: WaitStarts = WaitStarts { in_jvmti: AtomicBool::new(false), since_ns: AtomicU64::new(u64::MAX) };

/// Keeps monitor waits' starts in JVMTI thread-local values from now on,
/// or (off) in OS threads' again.
pub fn keep_wait_starts_in_jvmti(on: bool) {
    WAIT_STARTS.since_ns.store(clock::monotonic_ns(), Ordering::SeqCst);
    WAIT_STARTS.in_jvmti.store(on, Ordering::SeqCst);
}

/// The calling thread starts waiting for a contended monitor.
pub fn contended_enter(jvmti: &Jvmti) {
    let now = clock::monotonic_ns();
    if WAIT_STARTS.in_jvmti.load(Ordering::Relaxed) && jvmti.set_thread_local(now as usize).is_ok() {
        return;
    }
    WAIT_START.set(now);
}

/// When the calling thread began waiting for the monitor it entered (0:
/// not known).
fn contended_start(jvmti: &Jvmti) -> u64 {
    let start = WAIT_START.replace(0);
    if !WAIT_STARTS.in_jvmti.load(Ordering::Relaxed) {
        return start;
    }
    let kept = jvmti.thread_local().unwrap_or(0) as u64;
    if kept == 0 || kept < WAIT_STARTS.since_ns.load(Ordering::Relaxed) {
        return start;
    }
    let _ = jvmti.set_thread_local(0);
    kept
}

/// The calling thread `tid` entered the contended monitor `object`: its
/// wait, if sampled ([`LockSampling`]), is recorded in the published
/// `sampler`.
///
/// # Safety
/// `object` must be the monitor reference the JVMTI callback received.
pub unsafe fn contended_entered(
    state: &CallbackState,
    jvmti: &Jvmti,
    env: JniEnv,
    object: jni::sys::jobject,
    tid: u32,
) {
    let start = contended_start(jvmti);
    let sampler = &state.sampler;
    let Some(samples) = state.jvmti.as_ref() else { return };
    let Some(lock) = samples.lock else { return };
    let waited = clock::monotonic_ns().saturating_sub(start);
    if start == 0 || !lock.takes_now(waited) || !sampler.sampled(tid) {
        return;
    }
    // SAFETY: per the contract, a valid reference on this thread.
    let Some(class) = (unsafe { env.object_class(object) }) else { return };
    let observed =
        Observed { kind: SampleKind::Lock, class, value: waited, park_time: 0, time_ns: start, own_frames: 0 };
    record(sampler, samples, jvmti, observed, tid);
    env.delete_local_ref(class);
}

/// `Unsafe.park`'s time argument as a sample keeps it (see
/// `SampleRecord::park_time`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParkTimeout(pub i64);

impl ParkTimeout {
    /// From `Unsafe.park(isAbsolute, time)`: a deadline in epoch ms when
    /// absolute, else a timeout in ns (0: none).
    pub fn of(absolute: bool, time: i64) -> Self {
        Self(if absolute { time.saturating_neg() } else { time.max(0) })
    }
}

/// The synchronizers whose parks are lock waits, by class name prefix:
/// `ReentrantLock` and `ReentrantReadWriteLock` (their `Sync`s), the
/// `Semaphore`'s, and `StampedLock`. Parks with other blockers (a
/// `Condition`, a queue, a future) are waits for work, not for a lock.
const LOCK_CLASSES: [&str; 4] = [
    "Ljava/util/concurrent/locks/ReentrantLock",
    "Ljava/util/concurrent/locks/ReentrantReadWriteLock",
    "Ljava/util/concurrent/Semaphore",
    "Ljava/util/concurrent/locks/StampedLock",
];

/// Whether a park blocker of class `signature` is a lock.
fn is_lock(signature: &str) -> bool {
    LOCK_CLASSES.iter().any(|prefix| signature.starts_with(prefix))
}

/// A park the park hooks timed and sampled ([`LockSampling`]).
pub struct Park {
    /// When it began, monotonic ns.
    pub start: u64,
    pub waited: u64,
    pub timeout: ParkTimeout,
    /// The agent's Java frames on top of the parking code's.
    pub own_frames: u8,
}

/// The calling thread `tid` was parked as `park` says: if its park
/// blocker (`Thread.parkBlocker`, field `blocker`) is a lock, the wait is
/// recorded in the published `sampler`.
///
/// # Safety
/// `env` must be the calling thread's and `blocker` the id of
/// `Thread.parkBlocker`.
pub unsafe fn parked(
    state: &CallbackState,
    jvmti: &Jvmti,
    env: JniEnv,
    blocker: jni::sys::jfieldID,
    park: Park,
    tid: u32,
) {
    let sampler = &state.sampler;
    let Some(samples) = state.jvmti.as_ref().filter(|s| s.lock.is_some()) else { return };
    if blocker.is_null() || !sampler.sampled(tid) || env.clear_exception() {
        return;
    }
    env.with_local_frame(8, || {
        let Ok(thread) = jvmti.current_thread() else { return };
        // SAFETY: a live Thread reference and, per the contract, its
        // parkBlocker field (still set: LockSupport clears it after park
        // returns to Java).
        let object = unsafe { env.object_field(thread.as_raw(), blocker) };
        // SAFETY: a local reference of this thread, or null.
        let Some(class) = (unsafe { env.object_class(object) }) else { return };
        if !jvmti.class_signature(class).is_ok_and(|s| is_lock(&s)) {
            return;
        }
        let observed = Observed {
            kind: SampleKind::Park,
            class,
            value: park.waited,
            park_time: park.timeout.0,
            time_ns: park.start,
            own_frames: park.own_frames,
        };
        record(sampler, samples, jvmti, observed, tid);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_stands_for_the_interval_or_its_own_size() {
        let interval = 512 * 1024;
        // Small objects: about one interval each.
        let small = weight(1024, interval);
        assert!((small as i64 - i64::from(interval)).abs() < 1024, "{small}");
        // Objects far beyond the interval: themselves.
        assert_eq!(weight(64 << 20, interval), 64 << 20);
        assert_eq!(weight(0, interval), 0);
    }

    #[test]
    fn waits_are_sampled_in_proportion_to_their_length() {
        let lock = LockSampling { interval_ns: 10_000, threshold_ns: 0 };
        // What a recorded wait stands for (readers weigh it so, from the
        // `lock` setting): itself from the interval on, else an interval.
        let weight = |waited: u64| waited.max(lock.interval_ns);
        // From the interval on, always.
        assert!(lock.takes(10_000, u64::MAX) && lock.takes(1_000_000, u64::MAX));
        // Shorter: with probability waited / interval.
        let quarter = u64::MAX / 4;
        assert!(lock.takes(2_500, quarter - (1 << 20)) && !lock.takes(2_500, quarter + (1 << 20)));
        assert!(!lock.takes(0, 0), "no wait, nothing to record");
        // Below the threshold, never.
        let threshold = LockSampling { interval_ns: 10_000, threshold_ns: 50_000 };
        assert!(!threshold.takes(40_000, 0) && threshold.takes(50_000, u64::MAX));
        // The weights of many sampled waits add up to the time waited.
        let waits: Vec<u64> = (0..200_000u64).map(|i| 500 + i % 15_000).collect();
        let waited: u64 = waits.iter().sum();
        let recorded: u64 = waits.iter().filter(|&&w| lock.takes_now(w)).map(|&w| weight(w)).sum();
        let ratio = recorded as f64 / waited as f64;
        assert!((ratio - 1.0).abs() < 0.02, "recorded {recorded} of {waited} ns waited");
    }

    #[test]
    fn lock_blockers_are_told_from_other_parks() {
        assert!(is_lock("Ljava/util/concurrent/locks/ReentrantLock$NonfairSync;"));
        assert!(is_lock("Ljava/util/concurrent/locks/ReentrantReadWriteLock$FairSync;"));
        assert!(is_lock("Ljava/util/concurrent/Semaphore$NonfairSync;"));
        assert!(!is_lock("Ljava/util/concurrent/locks/AbstractQueuedSynchronizer$ConditionObject;"));
        assert!(!is_lock("Ljava/util/concurrent/CompletableFuture$Signaller;"));
    }

    #[test]
    fn park_times_keep_their_kind() {
        assert_eq!(ParkTimeout::of(false, 0), ParkTimeout(0));
        assert_eq!(ParkTimeout::of(false, 5_000), ParkTimeout(5_000));
        assert_eq!(ParkTimeout::of(true, 1_700_000_000_000), ParkTimeout(-1_700_000_000_000));
    }
}
