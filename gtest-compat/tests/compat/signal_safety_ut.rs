//! Port of upstream `signalSafety_ut` (see gtest-compat/README.md).
//!
//! Upstream counts, per thread, how deep it is in signal handlers
//! (`SignalHandlerScope`), so that code such as its dlopen hook can ask
//! "am I in a handler?", and compensates the count after a longjmp out of
//! a handler. We keep no such depth: we hook no dlopen (new libraries are
//! found by the library table's refresh tick), never longjmp out of a
//! handler (a faulting read resumes inside `safe_load`'s own routine), and
//! a sample's state is held by acquisitions that are released exactly once
//! when dropped (its stripe, its hazard slot). The ported cases check that:
//! a sample leaves nothing held, a sample nested in another on the same
//! thread gets its own stripe and both complete, and a thread without
//! per-thread context is sampled without it.

use super::stress_call_trace_storage::InstalledHandler;
use super::support::asgct_sampler;
use frames::Frame;
use sampler::asgct::{AsgctFrame, AsgctTrace};
use sampler::context;
use sampler::os_thread::current_tid;
use sampler::storage::call_traces::TraceId;
use sampler::storage::samples::{SampleKind, SampleRecord, SampleStripes, STRIPES};
use sampler::storage::trace_storage::CallTraceStorage;
use sampler::{SampleRequest, Sampler};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use std::sync::Mutex;

/// Serializes the cases using `nesting_walker` (its state is global) and
/// the one installing a signal handler.
static SAMPLER_TESTS: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SAMPLER_TESTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// This module's signal, unused by the agent and the other suites' tests.
fn test_signal() -> c_int {
    libc::SIGRTMIN() + 8
}

/// Nesting level of `nesting_walker` calls (one thread uses it at a time:
/// the cases calling it are serialized).
static WALK_DEPTH: AtomicU32 = AtomicU32::new(0);
static SAMPLER: AtomicPtr<Sampler> = AtomicPtr::new(std::ptr::null_mut());

const OUTER_METHOD: u64 = 0xA000;
const NESTED_METHOD: u64 = 0xB000;

/// A stand-in for AsyncGetCallTrace that, when called for an outer sample,
/// raises the test signal on its own thread: the handler takes a nested
/// sample in the middle of the outer one's stack walk.
unsafe extern "C" fn nesting_walker(trace: *mut AsgctTrace, _depth: i32, _ucontext: *mut c_void) {
    let outer = WALK_DEPTH.fetch_add(1, Ordering::SeqCst) == 0;
    if outer && !SAMPLER.load(Ordering::SeqCst).is_null() {
        // SAFETY: signals the calling thread; the handler is installed.
        unsafe { libc::pthread_kill(libc::pthread_self(), test_signal()) };
    }
    let method = if outer { OUTER_METHOD } else { NESTED_METHOD };
    // SAFETY: the sampler passes a valid trace with room for its depth (>= 1).
    unsafe {
        (*trace).frames.write(AsgctFrame { bci: 1, method: method as usize as _ });
        (*trace).num_frames = 1;
    }
    WALK_DEPTH.fetch_sub(1, Ordering::SeqCst);
}

extern "C" fn nested_sample_handler(_: c_int) {
    let sampler = SAMPLER.load(Ordering::SeqCst);
    if !sampler.is_null() {
        // SAFETY: the test clears SAMPLER before the sampler goes away.
        unsafe { &*sampler }.record(request(), 0, current_tid());
    }
}

fn request() -> SampleRequest {
    SampleRequest::signal(std::ptr::null_mut(), 1, SampleKind::Cpu, None)
}

fn sampler() -> Sampler {
    asgct_sampler(CallTraceStorage::new(64, 1024).unwrap(), SampleStripes::new(16, 8).unwrap(), 8, nesting_walker)
}

/// Whether every stripe can be taken (nothing left held).
fn all_stripes_free(stripes: &SampleStripes) -> bool {
    let held: Vec<_> = (0..STRIPES as u32).map_while(|tid| stripes.try_acquire(tid)).collect();
    held.len() == STRIPES
}

fn drain(sampler: &Sampler) -> (Vec<SampleRecord>, HashMap<TraceId, Vec<Frame>>) {
    let mut samples = Vec::new();
    sampler.stripes.drain_into(&mut samples);
    let mut traces = HashMap::new();
    sampler.traces.for_each_live(|t| {
        traces.insert(t.id, t.frames.to_vec());
    });
    (samples, traces)
}

/// One sample, taken and finished: it was recorded, and it left no stripe
/// held (upstream: the depth is back to zero after the scope).
#[test]
fn depth_symmetry() {
    let _serial = serial();
    let sampler = sampler();
    assert!(all_stripes_free(&sampler.stripes));
    sampler.record(request(), 7, current_tid());
    assert!(all_stripes_free(&sampler.stripes), "the sample released its stripe");
    let (samples, traces) = drain(&sampler);
    assert_eq!(samples.len(), 1);
    assert_eq!(traces.get(&TraceId(samples[0].trace)), Some(&vec![Frame::java(OUTER_METHOD, 1)]));
}

/// A sample nested in another on the same thread (a signal arriving while
/// the outer one walks the stack): both are recorded, each with its own
/// trace, and afterwards nothing is held.
#[test]
fn nested_depth() {
    let _serial = serial();
    let _handler = InstalledHandler::install(test_signal(), nested_sample_handler, libc::SA_RESTART);
    let sampler = sampler();
    SAMPLER.store(&sampler as *const Sampler as *mut Sampler, Ordering::SeqCst);
    let tid = current_tid();
    sampler.record(request(), 1, tid);
    SAMPLER.store(std::ptr::null_mut(), Ordering::SeqCst);
    assert!(all_stripes_free(&sampler.stripes), "both samples released their stripes");
    let (samples, traces) = drain(&sampler);
    assert_eq!(samples.len(), 2, "the outer and the nested sample");
    let mut methods: Vec<_> = samples
        .iter()
        .map(|s| {
            assert_eq!(s.tid, tid);
            traces.get(&TraceId(s.trace)).expect("trace stored")[0].method
        })
        .collect();
    methods.sort();
    assert_eq!(methods, vec![OUTER_METHOD, NESTED_METHOD]);
}

/// Upstream: releasing a scope early, then leaving it, decrements once.
/// Ours: a stripe released early (dropped) is released once; the end of
/// the original scope does not release it again from under its next owner.
#[test]
fn release_decrements_and_destructor_is_no_op() {
    let stripes = SampleStripes::new(4, 8).unwrap();
    let next_owner;
    {
        let early = stripes.try_acquire(3).unwrap();
        let index = early.index();
        drop(early);
        next_owner = stripes.try_acquire(3).unwrap();
        assert_eq!(next_owner.index(), index, "the released stripe is free again");
    }
    let other = stripes.try_acquire(3).unwrap();
    assert_ne!(other.index(), next_owner.index(), "the next owner still holds its stripe");
}

/// Upstream: when a thread's context cannot be set up in the handler, the
/// scope stays inactive and nothing dereferences it. Ours: a thread that
/// has no context slot is sampled with an empty context, and sampling
/// creates no slot for it.
#[test]
fn priming_failure_leaves_scope_inactive() {
    let _serial = serial();
    context::init().unwrap();
    std::thread::spawn(|| {
        let tid = current_tid();
        let slots = &context::state().unwrap().slots;
        assert!(slots.find(tid).is_none(), "a fresh thread has no slot");
        let sampler = sampler();
        sampler.record(request(), 1, tid);
        assert!(slots.find(tid).is_none(), "sampling registers nothing");
        let (samples, _) = drain(&sampler);
        assert_eq!(samples.len(), 1);
        assert_eq!(samples[0].context, Default::default());
        assert_ne!(samples[0].trace, TraceId::DROPPED.0);
    })
    .join()
    .unwrap();
}
