//! Everything that runs inside a profiling signal handler (and inside the
//! native allocation hooks, under the same rules): the handler, the mixed
//! walk, the stores it writes, and the signal-safe leaves they call.
//!
//! Rules for this crate: no allocation, no blocking locks, no formatting,
//! no panicking paths, errno preserved. Its dependencies are only what a
//! handler may use (no ELF parser, no demangler, no JFR writer, no log),
//! so such a call here does not compile. Session state is reached only
//! through the [`Sampler`] published before signals are armed; a test
//! with a counting allocator (`agent/tests/sampling_allocations.rs`)
//! checks that a sample allocates nothing. Functions marked "Not
//! signal-safe" are the control plane's constructors and drains.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic))]

pub mod asgct;
pub mod asgct_walk;
pub mod chain;
pub mod clock;
pub mod context;
pub mod counters;
pub mod dictionary;
pub mod handler;
pub mod heap;
pub mod java_thread;
pub mod kernel;
pub mod latency;
pub mod libraries;
pub mod mixed;
pub mod native;
pub mod origin;
pub mod os_thread;
pub mod publication;
pub mod random;
pub mod safe_read;
pub mod siginfo;
pub mod signals;
pub mod storage;
pub mod thread_state;
mod verify;
pub mod vm_stack;

use crate::context::ContextState;
use crate::counters::Counter;
use crate::storage::call_traces::{trace_key, TraceId};
use crate::storage::idle::{BatchSink, IdleThreads, Note};
use crate::storage::samples::{SampleKind, SampleRecord, SampleStripes};
use crate::storage::trace_storage::CallTraceStorage;
use asgct::{AsgctFn, AsgctFrame};
use asgct_walk::AsgctWalk;
use frames::Frame;
use frames::ThreadState;
use java_thread::JavaThreads;
use origin::Origins;
use publication::Publication;
use safe_read::ProcessMemory;
use std::ffi::c_void;
use std::ops::Range;
use std::sync::Arc;
use thread_state::BlockingMethods;

/// One session's state: everything a sample touches, built before signals
/// are armed, published through [`publish`], hidden again by [`retire`]
/// once they are disarmed. Handlers read session state through these
/// fields only; besides them a sample touches process-wide counters (and
/// `verify`'s turn counter) and latency histograms, the previous signal
/// actions it forwards foreign signals to, the fault-recovery state of
/// `safe_read`, and, only with the [`JavaThreads::EnvFunction`] fallback
/// the session installs when the TLS-free lookup is unavailable, the `VM`
/// static (`vm::get`, set once at agent load) whose `GetEnv` it calls.
pub struct Sampler {
    /// Which signals are ours; engines register in it while they run.
    pub origins: Arc<Origins>,
    /// The thread filter (`filter`): when on, only threads added to it
    /// through the API are sampled.
    pub filter: bool,
    /// Per-thread filter membership and trace context (agent-wide: it
    /// outlives sessions).
    pub context: &'static ContextState,
    /// The stack traces samples refer to, deduplicated.
    pub traces: CallTraceStorage,
    /// Sample records, per stripe, until the recording drains them.
    pub stripes: SampleStripes,
    /// Frames kept per stack (`jstackdepth`).
    pub max_depth: usize,
    /// How the interrupted thread's JavaThread and JNIEnv are found.
    pub threads: JavaThreads,
    /// AsyncGetCallTrace, if the JVM exports it: the Java source unless
    /// `hotspot` is present, and the reference of `verify_walk`.
    pub asgct: Option<AsgctFn>,
    /// Native stack unwinding (`cstack=`), if enabled.
    pub native: Option<native::NativeUnwinder>,
    /// Java frames from HotSpot's structures (`cstack=vm`/`vmx`), used
    /// instead of AsyncGetCallTrace when present.
    pub hotspot: Option<vm_stack::HotSpotSource>,
    /// Also walk every sample with AsyncGetCallTrace and count agreement
    /// and time (`verifywalk`).
    pub verify_walk: bool,
    /// The Java methods that tell a wall-clock sample's thread state.
    pub blocking: BlockingMethods,
    /// Mean bytes between native allocation samples (`nativemem=`), if on.
    pub nativemem: Option<u32>,
    /// Wall-clock samples of idle threads, folded (with wall-clock
    /// sampling): handlers note the threads they find off CPU.
    pub idle: Option<IdleThreads>,
}

/// One sample's inputs, from the handler.
#[derive(Clone, Copy)]
pub struct SampleRequest {
    pub ucontext: *mut c_void,
    pub weight: u32,
    pub kind: SampleKind,
    /// The calling thread's ring of kernel call chains, if its counter
    /// records them (the ring stays mapped while the sampler is published).
    pub kernel: Option<kernel::Ring>,
    /// A native allocation's size and address (0 for other kinds).
    pub value: u64,
    pub address: u64,
}

impl SampleRequest {
    /// A signal's sample (no allocation's size or address).
    pub fn signal(ucontext: *mut c_void, weight: u32, kind: SampleKind, kernel: Option<kernel::Ring>) -> Self {
        Self { ucontext, weight, kind, kernel, value: 0, address: 0 }
    }
}

/// The one published sampler: where handlers, which outlive sessions, find
/// the running one.
static ACTIVE: Publication<Sampler> = Publication::new();

/// Makes `sampler` visible to signal handlers. The caller keeps its `Arc`
/// alive until [`retire`] returns.
pub fn publish(sampler: &Arc<Sampler>) {
    ACTIVE.publish(sampler);
}

/// Hides the sampler from handlers and returns once no handler can still
/// be using it.
pub fn retire() {
    ACTIVE.retire();
}

/// Whether a sampler is published right now: a hint that lets callers skip
/// work before [`with_active`], which alone decides. Signal-safe.
pub fn is_published() -> bool {
    ACTIVE.is_published()
}

/// Runs `f` with the published sampler, if any, and returns its result.
/// Signal-safe.
#[inline]
pub fn with_active<R>(f: impl FnOnce(&Sampler) -> R) -> Option<R> {
    ACTIVE.with(f)
}

impl Sampler {
    /// Whether thread `tid` is sampled (the thread filter). Signal-safe.
    pub fn sampled(&self, tid: u32) -> bool {
        !self.filter || self.context.in_filter(tid)
    }

    /// Records one sample of the calling thread. Signal-safe.
    pub fn record(&self, request: SampleRequest, time_ns: u64, tid: u32) {
        // A sample not taken still consumes its kernel call chain.
        // SAFETY: the ring stays mapped while this sampler is published,
        // and the handler passes only the calling thread's own.
        let discard = || request.kernel.map(|ring| unsafe { ring.discard() });
        if !self.sampled(tid) {
            counters::increment(Counter::SamplesFiltered);
            discard();
            return;
        }
        if safe_read::faults_blocked(request.ucontext) {
            counters::increment(Counter::SamplesDroppedFaultsBlocked);
            discard();
            return;
        }
        let Some(mut stripe) = self.stripes.try_acquire(tid) else {
            counters::increment(request.kind.counters().busy);
            discard();
            return;
        };
        let index = stripe.index();
        let mut state = ThreadState::Runnable;
        // Whether a note about the thread is due, and the stack's key.
        let mut idle = false;
        let key;
        let trace = {
            let scratch = stripe.scratch();
            let capacity = self.max_depth.min(scratch.frames.len()).min(scratch.words.len() / 2);
            // SAFETY: the stripe's scratch mapping holds at least `capacity`
            // frames, and the stripe lock makes it ours alone.
            let frames = unsafe { std::slice::from_raw_parts_mut(scratch.frames.as_ptr(), capacity) };
            let raw = scratch.words.as_ptr().cast::<AsgctFrame>();
            // Kernel frames first (innermost), then the walk from the
            // interrupted user context; at most half the stack.
            let kernel = match (request.kernel, self.native.is_some()) {
                // SAFETY: the ring stays mapped while this sampler is
                // published, and the handler passes only the calling
                // thread's own.
                (Some(ring), true) => unsafe {
                    ring.take_kernel_frames(frames.get_mut(..capacity / 2).unwrap_or_default())
                },
                _ => 0,
            };
            let user = frames.get_mut(kernel..).unwrap_or_default();
            // SAFETY: `stripe` is the guard of stripe `index`, held until
            // the sample is recorded.
            let (len, truncated) = unsafe { self.walk(index, user, raw, request.ucontext) };
            let walked = frames.get(..kernel + len).unwrap_or_default();
            key = trace_key(walked, truncated);
            if request.kind == SampleKind::Wall {
                let in_syscall = thread_state::in_syscall(request.ucontext);
                state = thread_state::classify(&self.blocking, in_syscall, walked);
                // Off CPU: waiting in a system call (not merely in native code).
                idle = in_syscall && self.idle.is_some();
            }
            self.traces.put_keyed(key, walked, truncated, tid as usize)
        };
        let record = SampleRecord {
            time_ns,
            tid,
            trace: trace.0,
            weight: request.weight,
            state: state as u8,
            kind: request.kind,
            class: 0,
            value: request.value,
            park_time: 0,
            address: request.address,
            context: self.context.sample_context(tid),
        };
        stripe.push_counted(record);
        if let (Some(notes), true) = (&self.idle, idle && trace != TraceId::DROPPED) {
            notes.note(Note { tid, key, cpu_ns: crate::clock::thread_cpu_ns(), state: state as u8 });
        }
    }

    /// Records a sample of the calling thread where it is now, as if a
    /// signal had interrupted it in the first caller outside `own` (the
    /// agent's image): a native allocation of `size` bytes at `address`.
    /// Signal-safe.
    pub fn record_here(&self, size: u64, address: u64, own: &Range<u64>, tid: u32) {
        let kind = SampleKind::Malloc;
        let Some(regs) = native::caller_outside(unwind::arch::current_registers(), own) else {
            counters::increment(Counter::StackWalkFailed);
            return;
        };
        // SAFETY: an all-zero ucontext_t is plain data.
        let mut context: libc::ucontext_t = unsafe { std::mem::zeroed() };
        unwind::arch::set_registers(&mut context, regs);
        // The thread's signal mask, as an interrupted context holds it: a
        // walk reads no memory while faults are blocked.
        // SAFETY: a null new set only reads the mask into ours.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut context.uc_sigmask) };
        let ucontext = (&mut context as *mut libc::ucontext_t).cast::<c_void>();
        let request = SampleRequest { ucontext, weight: 1, kind, kernel: None, value: size, address };
        self.record(request, crate::clock::monotonic_ns(), tid);
    }

    /// Records the release at `time_ns` of the sampled allocation at
    /// `address` by the calling thread (no stack). Signal-safe.
    pub fn record_free(&self, address: u64, time_ns: u64, tid: u32) {
        let kind = SampleKind::Free;
        let Some(mut stripe) = self.stripes.try_acquire(tid) else {
            counters::increment(kind.counters().busy);
            return;
        };
        stripe.push_counted(SampleRecord {
            time_ns,
            tid,
            trace: 0,
            weight: 1,
            kind,
            address,
            ..SampleRecord::default()
        });
    }

    /// Where folded wall-clock samples are recorded: this session's stores.
    pub fn batch_sink(&self) -> BatchSink<'_> {
        BatchSink { stripes: &self.stripes, traces: &self.traces, context: self.context }
    }

    /// Records the folded wall-clock samples (before a rotation). Not
    /// signal-safe.
    pub fn flush_idle(&self) {
        if let Some(idle) = &self.idle {
            idle.flush(self.batch_sink());
        }
    }

    /// Fills `frames` with the mixed stack, innermost first: native frames
    /// down to the JVM boundary, then the Java frames. Returns the frame
    /// count and whether the depth limit cut the stack.
    ///
    /// # Safety
    /// The caller holds stripe `stripe`; `raw` has room for as many frames
    /// as `frames`.
    unsafe fn walk(
        &self,
        stripe: usize,
        frames: &mut [Frame],
        raw: *mut AsgctFrame,
        ucontext: *mut c_void,
    ) -> (usize, bool) {
        if let Some(hotspot) = &self.hotspot {
            // SAFETY: this function's contract.
            return unsafe { self.walk_hotspot(hotspot, stripe, frames, raw, ucontext) };
        }
        // SAFETY: `raw` has room for the stack (this function's contract);
        // ucontext is the handler's.
        let mut java = unsafe { AsgctWalk::new(self.asgct, &self.threads, raw, ucontext) };
        let regs = native::registers(ucontext);
        // SAFETY: the caller holds `stripe` (this function's contract).
        let walk = unsafe { mixed::walk(self.native.as_ref(), stripe, regs, &mut java, frames) };
        (walk.frames, walk.truncated())
    }

    /// The mixed stack from HotSpot's structures, checked against
    /// AsyncGetCallTrace when verifying.
    ///
    /// # Safety
    /// The caller holds stripe `stripe`; `raw` has room for as many frames
    /// as `frames`.
    unsafe fn walk_hotspot(
        &self,
        hotspot: &vm_stack::HotSpotSource,
        stripe: usize,
        frames: &mut [Frame],
        raw: *mut AsgctFrame,
        ucontext: *mut c_void,
    ) -> (usize, bool) {
        let Some(regs) = native::registers(ucontext) else { return (0, false) };
        let thread = self.threads.current_thread();
        let verify = self.verify_walk && thread != 0;
        // Alternate which walker goes first, so neither always finds the
        // caches warmed by the other.
        let reference_first = verify && verify::reference_goes_first(&hotspot.verify_turns);
        let mut reference = None;
        if reference_first {
            reference = verify::reference_walk(self.asgct, &self.threads, raw, frames.len(), ucontext);
        }
        let started = if verify { crate::clock::monotonic_ns() } else { 0 };
        // SAFETY: the caller holds `stripe` (this function's contract).
        let walk = unsafe { hotspot.walk(self.native.as_ref(), stripe, thread, &ProcessMemory, regs, frames) };
        if verify {
            counters::add(Counter::WalkVmNanos, crate::clock::monotonic_ns().saturating_sub(started));
            if !reference_first {
                reference = verify::reference_walk(self.asgct, &self.threads, raw, frames.len(), ucontext);
            }
        }
        if let Some(reference) = reference {
            verify::compare(frames.get(..walk.frames).unwrap_or_default(), reference);
        }
        (walk.frames, walk.truncated())
    }
}

#[cfg(test)]
mod tests;
