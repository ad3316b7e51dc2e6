//! The sampling path allocates nothing: real SIGPROF signals from the
//! itimer engine run the real handler, stitching DWARF-unwound native
//! frames with AsyncGetCallTrace's (a stand-in) into new and known stack
//! traces, while a counting global allocator watches; then the stitched
//! walk with the HotSpot source (`cstack=vm`) walks the synthetic VM of
//! `hotspot::testing` (compiled frame with an inlined method,
//! interpreted frame, entry frame) a thousand times under the same watch.
//!
//! This test binary holds a single test so nothing else allocates while
//! the counter is armed: the test thread itself only spins and reads
//! atomics during that window.

use frames::{Frame, FrameKind};
use hotspot::testing;
use profiler_agent::args::CpuEngineKind;
use profiler_agent::counters::{self, Counter};
use profiler_agent::engine;
use profiler_agent::libraries::sections::Wanted;
use profiler_agent::libraries::LibraryTable;
use profiler_agent::sampling::asgct::{AsgctFrame, AsgctTrace};
use profiler_agent::sampling::java_thread::JavaThreads;
use profiler_agent::sampling::mixed::{self, MixedWalk};
use profiler_agent::sampling::native::{NativeMode, NativeUnwinder};
use profiler_agent::sampling::origin::Origins;
use profiler_agent::sampling::thread_state::BlockingMethods;
use profiler_agent::sampling::vm_stack::HotSpotSource;
use profiler_agent::sampling::{self, Sampler};
use profiler_agent::storage::samples::SampleStripes;
use profiler_agent::storage::samples::STRIPES;
use profiler_agent::storage::trace_storage::CallTraceStorage;
use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use unwind::Registers;

struct CountingAllocator;

static ARMED: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: delegates to the system allocator; only counts.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ARMED.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ARMED.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if ARMED.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

static CALLS: AtomicU64 = AtomicU64::new(0);

/// Stands in for AsyncGetCallTrace: a 20-frame stack whose frames vary
/// over 97 shapes, so the run inserts new traces as well as finding old ones.
unsafe extern "C" fn fake_walker(trace: *mut AsgctTrace, depth: i32, _ucontext: *mut c_void) {
    // SAFETY: called by the sampler with a valid trace and buffer.
    let trace = unsafe { &mut *trace };
    let shape = CALLS.fetch_add(1, Ordering::Relaxed) % 97;
    let n = depth.min(20);
    for i in 0..n {
        let method = (0x1000 + shape * 64 + i as u64) as usize as jni::sys::jmethodID;
        // SAFETY: the buffer holds `depth` frames.
        unsafe { trace.frames.add(i as usize).write(AsgctFrame { bci: i, method }) };
    }
    trace.num_frames = n;
}

fn attached() -> *mut jni::sys::JNIEnv {
    std::ptr::NonNull::dangling().as_ptr()
}

#[test]
fn sampling_path_does_not_allocate() {
    let libraries = Arc::new(LibraryTable::new(Wanted::Dwarf));
    libraries.refresh_if_changed();
    let sampler = Arc::new(Sampler {
        traces: CallTraceStorage::new(1 << 12, 1 << 16).unwrap(),
        stripes: SampleStripes::new(1 << 14, 64).unwrap(),
        max_depth: 64,
        asgct: Some(fake_walker),
        threads: JavaThreads::EnvFunction(attached),
        native: Some(NativeUnwinder::new(NativeMode::Dwarf, false, libraries, STRIPES)),
        hotspot: None,
        verify_walk: false,
        origins: Arc::new(Origins::new().unwrap()),
        filter: false,
        context: profiler_agent::context::init().unwrap(),
        blocking: BlockingMethods::default(),
    });
    sampling::publish(&sampler);
    let me = vec![profiler_agent::os_thread::current_tid()];
    engine::start(CpuEngineKind::Itimer, Duration::from_millis(1), move || me.clone(), Arc::clone(&sampler.origins))
        .expect("itimer engine");

    ALLOCATIONS.store(0, Ordering::SeqCst);
    ARMED.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut spin = 0u64;
    while counters::get(Counter::Samples) < 300 && Instant::now() < deadline {
        spin = spin.wrapping_mul(6364136223846793005).wrapping_add(1);
    }
    ARMED.store(false, Ordering::SeqCst);
    std::hint::black_box(spin);

    engine::stop();
    sampling::retire();
    let samples = counters::get(Counter::Samples);
    assert!(samples >= 300, "only {samples} samples arrived");
    assert!(sampler.traces.len() >= 97, "new traces were inserted while armed");
    let mut native = 0;
    sampler.traces.for_each_live(|t| native += t.frames.iter().filter(|f| f.kind == FrameKind::Native).count());
    assert!(native > 0, "native frames were unwound and stitched");
    assert_eq!(ALLOCATIONS.load(Ordering::SeqCst), 0, "allocations during {samples} samples");

    let (memory, _) = testing::vm();
    let source = HotSpotSource::new(testing::walker(), false, 1);
    let regs = Registers { pc: testing::CODE + 0x1f, sp: testing::SP, fp: 0, lr: 0 };
    let mut out = [Frame::default(); 16];
    let mut frames = 0usize;
    ARMED.store(true, Ordering::SeqCst);
    for _ in 0..1000 {
        // SAFETY: this thread alone uses stripe 0 of `source`.
        let mut walk = unsafe { source.begin(None, 0, testing::THREAD, &memory) }.expect("stripe 0");
        // SAFETY: as above.
        let walked = unsafe { mixed::walk(None, 0, Some(regs), &mut walk, &mut out) };
        assert_eq!(walked, MixedWalk { frames: 3, truncated: false }, "three Java frames, then the entry frame");
        frames += walked.frames;
    }
    ARMED.store(false, Ordering::SeqCst);
    assert_eq!(frames, 3000);
    assert_eq!(ALLOCATIONS.load(Ordering::SeqCst), 0, "allocations during 1000 HotSpot walks");
}
