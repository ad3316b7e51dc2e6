//! The sampling path allocates nothing: real SIGPROF signals from the
//! itimer engine run the real handler, stitching native frames (each
//! native unwinder in turn: frame pointers, DWARF with remote frames,
//! SFrame with its frame-pointer fallback, the thread filter on) with
//! AsyncGetCallTrace's (a stand-in) into new and known stack traces, and
//! queued SIGVTALRM signals run the wall-clock path (the idle-thread note, thread-state
//! classification included), while a counting global allocator watches;
//! then the stitched walk with the HotSpot source (`cstack=vm`) walks the
//! synthetic VM of `hotspot::testing` (compiled frame with an inlined
//! method, interpreted frame, entry frame) a thousand times under the same
//! watch; a thousand CPU samples take kernel frames from a perf ring
//! (one filled in memory as the kernel fills it) before their walk; and
//! the overhead governor's calibration handler counts a hundred
//! calibration signals under it too; and so do the native allocation
//! hooks, sampling every allocation and recording every free.
//!
//! This test binary holds a single test so nothing else allocates while
//! the counter is armed: the test thread itself only spins, reads atomics
//! and sends itself signals during that window.

use frames::{Frame, FrameKind};
use hotspot::testing;
use profiler_agent::args::CpuEngineKind;
use profiler_agent::engine;
use profiler_agent::engine::nativemem::{self, hooks};
use profiler_agent::libraries::sections::Wanted;
use profiler_agent::libraries::LibraryTable;
use sampler::asgct::{AsgctFrame, AsgctTrace};
use sampler::chain::PREVIOUS;
use sampler::counters::{self, Counter};
use sampler::handler::{on_calibration, on_sigvtalrm};
use sampler::java_thread::JavaThreads;
use sampler::kernel::Ring;
use sampler::mixed::{self, MixedWalk};
use sampler::native::{NativeMode, NativeUnwinder};
use sampler::origin::{wall_payload, Origins, CALIBRATION_PAYLOAD};
use sampler::siginfo::{RawSiginfo, SI_TIMER};
use sampler::signals::{self, Pending};
use sampler::storage::idle::IdleThreads;
use sampler::storage::samples::{SampleKind, SampleStripes, STRIPES};
use sampler::storage::trace_storage::CallTraceStorage;
use sampler::thread_state::BlockingMethods;
use sampler::vm_stack::HotSpotSource;
use sampler::{self, SampleRequest, Sampler};
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

/// One configuration of the sampling path.
struct Scenario {
    name: &'static str,
    mode: NativeMode,
    wanted: Wanted,
    remote: bool,
    filter: bool,
}

const SCENARIOS: [Scenario; 3] = [
    Scenario { name: "fp", mode: NativeMode::FramePointer, wanted: Wanted::Nothing, remote: false, filter: false },
    Scenario { name: "dwarf,remotesym", mode: NativeMode::Dwarf, wanted: Wanted::Dwarf, remote: true, filter: true },
    Scenario { name: "sframe", mode: NativeMode::SFrame, wanted: Wanted::SFrame, remote: false, filter: false },
];

/// Wall-clock signals the test thread sends itself per scenario.
const WALL_SIGNALS: u64 = 50;

fn sampler(scenario: &Scenario) -> Arc<Sampler> {
    let libraries = Arc::new(LibraryTable::new(scenario.wanted));
    libraries.refresh_if_changed();
    Arc::new(Sampler {
        traces: CallTraceStorage::new(1 << 12, 1 << 16).unwrap(),
        stripes: SampleStripes::new(1 << 14, 64).unwrap(),
        max_depth: 64,
        asgct: Some(fake_walker),
        threads: JavaThreads::EnvFunction(attached),
        native: Some(NativeUnwinder::new(scenario.mode, scenario.remote, Arc::clone(libraries.snapshots()), STRIPES)),
        hotspot: None,
        verify_walk: false,
        origins: Arc::new(Origins::new().unwrap()),
        filter: scenario.filter,
        context: sampler::context::init().unwrap(),
        blocking: BlockingMethods::default(),
        nativemem: None,
        idle: Some(IdleThreads::new()),
    })
}

/// Sends the calling thread `info` (a process may queue itself any code).
fn send_self(info: &RawSiginfo) {
    // SAFETY: getpid and gettid have no preconditions.
    let (pid, tid) = unsafe { (libc::getpid(), libc::gettid()) };
    // SAFETY: a valid siginfo for this process; the kernel copies it.
    let sent = unsafe { libc::syscall(libc::SYS_rt_tgsigqueueinfo, pid, tid, info.signo, info) };
    assert_eq!(sent, 0, "rt_tgsigqueueinfo");
}

/// Sends the calling thread a wall-clock signal, as the wall engine does.
fn wall_signal() {
    // SAFETY: getpid and getuid have no preconditions.
    let (pid, uid) = unsafe { (libc::getpid(), libc::getuid()) };
    send_self(&RawSiginfo::queued(libc::SIGVTALRM, pid, uid, wall_payload(1)));
}

/// Samples the test thread under `scenario` with the counter armed;
/// returns the sampler and how many wall-clock samples it recorded.
fn run_armed(scenario: &Scenario) -> (Arc<Sampler>, u64) {
    let sampler = sampler(scenario);
    if scenario.filter {
        sampler::context::filter_thread(true).unwrap();
    }
    sampler::publish(&sampler);
    let me = vec![sampler::os_thread::current_tid()];
    let origins = Arc::clone(&sampler.origins);
    engine::start(CpuEngineKind::Itimer, Duration::from_millis(1), false, move || me.clone(), origins)
        .expect("itimer engine");
    let first = counters::get(Counter::Samples);

    ALLOCATIONS.store(0, Ordering::SeqCst);
    ARMED.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut spin = 0u64;
    for _ in 0..WALL_SIGNALS {
        wall_signal();
    }
    while counters::get(Counter::Samples) - first < 300 + WALL_SIGNALS && Instant::now() < deadline {
        spin = spin.wrapping_mul(6364136223846793005).wrapping_add(1);
    }
    ARMED.store(false, Ordering::SeqCst);
    std::hint::black_box(spin);

    engine::stop();
    sampler::retire();
    let samples = counters::get(Counter::Samples) - first;
    let name = scenario.name;
    assert!(samples >= 300 + WALL_SIGNALS, "{name}: only {samples} samples arrived");
    assert_eq!(ALLOCATIONS.load(Ordering::SeqCst), 0, "{name}: allocations during {samples} samples");
    let mut records = Vec::new();
    sampler.stripes.drain_into(&mut records);
    let wall = records.iter().filter(|r| r.kind == SampleKind::Wall).count() as u64;
    (sampler, wall)
}

#[test]
fn sampling_path_does_not_allocate() {
    signals::install(libc::SIGVTALRM, on_sigvtalrm, &PREVIOUS.sigvtalrm).expect("SIGVTALRM handler");
    for scenario in &SCENARIOS {
        let remote_before = counters::get(Counter::RemoteFrames);
        let (sampler, wall) = run_armed(scenario);
        let name = scenario.name;
        assert_eq!(wall, WALL_SIGNALS, "{name}: every wall-clock signal was sampled");
        let idle = sampler.idle.as_ref().unwrap();
        idle.absorb(sampler.batch_sink());
        // The signals the thread sends itself arrive as its system call
        // returns: each sample finds it in a system call, and leaves a note.
        assert_eq!(idle.known(), 1, "{name}: off-CPU wall-clock samples left notes about the thread");
        assert!(sampler.traces.len() >= 97, "{name}: new traces were inserted while armed");
        let mut native = 0;
        let native_kind = if scenario.remote { FrameKind::RemoteNative } else { FrameKind::Native };
        sampler.traces.for_each_live(|t| native += t.frames.iter().filter(|f| f.kind == native_kind).count());
        assert!(native > 0, "{name}: native frames were unwound and stitched");
        if scenario.remote {
            assert!(
                counters::get(Counter::RemoteFrames) > remote_before,
                "{name}: frames packed for remote symbolication"
            );
        }
    }
    signals::restore(libc::SIGVTALRM, on_sigvtalrm, &PREVIOUS.sigvtalrm, Pending::Discard).expect("restore SIGVTALRM");

    let (mut memory, _) = testing::vm();
    // The thread's anchor: it left Java at the return address of A's call
    // (a return site, decoded once, then remembered across walks).
    testing::add_anchor(&mut memory, testing::SP, testing::CODE + 0x20, 0);
    let source = HotSpotSource::new(testing::walker(), false, 1);
    let interrupted = Registers { pc: testing::CODE + 0x1f, sp: testing::SP, fp: 0, lr: 0 };
    // Interrupted in native code the walk cannot unwind: on from the anchor.
    let in_native = Registers { pc: testing::NATIVE_CALLER, sp: testing::SP - 64, fp: 0, lr: 0 };
    // Interrupted in A after its code pushed a word (`push rcx` at 0x10,
    // `pop rcx` at 0x16, nops to the PcDesc at 0x20): the frame's sp is
    // read from the instructions.
    let mut pushed = testing::vm().0;
    testing::add_anchor(&mut pushed, testing::SP, testing::CODE + 0x20, 0);
    pushed.put_bytes(testing::CODE + 0x10, &[0x51, 0x0f, 0x4e, 0xd0, 0x85, 0xd2, 0x59]);
    pushed.put_bytes(testing::CODE + 0x17, &[0x90; 9]);
    let in_pushed = Registers { pc: testing::CODE + 0x11, sp: testing::SP - 8, ..interrupted };
    let mut out = [Frame::default(); 16];
    let mut frames = 0usize;
    ARMED.store(true, Ordering::SeqCst);
    for (memory, regs) in [(&memory, interrupted), (&memory, in_native), (&pushed, in_pushed)] {
        for _ in 0..1000 {
            // SAFETY: this thread alone uses stripe 0 of `source`.
            let mut walk = unsafe { source.begin(None, 0, testing::THREAD, memory) }.expect("stripe 0");
            // SAFETY: as above.
            let walked = unsafe { mixed::walk(None, 0, Some(regs), &mut walk, &mut out) };
            assert_eq!(walked, MixedWalk { frames: 3, cut: None }, "three Java frames, then the entry frame");
            frames += walked.frames;
        }
    }
    ARMED.store(false, Ordering::SeqCst);
    assert_eq!(frames, 9000);
    assert_eq!(ALLOCATIONS.load(Ordering::SeqCst), 0, "allocations during 3000 HotSpot walks");

    // CPU samples with kernel frames: a ring as perf_events fills it, one
    // sample record of three kernel addresses before each sample.
    let kernel_sampler = sampler(&SCENARIOS[0]);
    let mut ring_memory = vec![0u64; 2 * 4096 / 8];
    let ring = Ring { base: ring_memory.as_mut_ptr() as usize, page: 4096, data_size: 4096 };
    let record =
        [9 | (48u64 << 48), 4, (-128i64) as u64, 0xffff_ffff_8100_0010, 0xffff_ffff_8100_0020, 0xffff_ffff_8100_0030];
    let request = SampleRequest::signal(std::ptr::null_mut(), 1, SampleKind::Cpu, Some(ring));
    ARMED.store(true, Ordering::SeqCst);
    for i in 0..1000u64 {
        let head = i * 48;
        for (w, word) in record.iter().enumerate() {
            ring_memory[512 + ((head as usize + 8 * w) % 4096) / 8] = *word;
        }
        ring_memory[1024 / 8] = head + 48;
        kernel_sampler.record(request, i, 1);
    }
    ARMED.store(false, Ordering::SeqCst);
    assert_eq!(ALLOCATIONS.load(Ordering::SeqCst), 0, "allocations during 1000 samples with kernel frames");
    let kernel = [0xffff_ffff_8100_0010, 0xffff_ffff_8100_0020, 0xffff_ffff_8100_0030].map(Frame::kernel);
    let mut stacks = 0;
    kernel_sampler.traces.for_each_live(|t| {
        stacks += 1;
        assert_eq!(t.frames[..3], kernel, "the kernel frames first");
        assert!(t.frames[3..].iter().all(|f| f.kind == FrameKind::Java), "then the walk's");
    });
    assert!(stacks >= 97, "{stacks} stacks");

    // Native allocation hooks, every allocation sampled (its stack walked
    // from inside the hook) and every free of one recorded.
    let hooked = sampler(&SCENARIOS[0]);
    sampler::publish(&hooked);
    nativemem::start(1, false).expect("hooks installed");
    let (samples, frees) = (counters::get(Counter::NativeMemSamples), counters::get(Counter::NativeMemFrees));
    ARMED.store(true, Ordering::SeqCst);
    for size in (1..=1000usize).map(|i| i * 8) {
        // SAFETY: each block is released by the hook of its release.
        unsafe {
            let block = hooks::malloc(size);
            let block = hooks::realloc(block, size * 2);
            hooks::free(block);
            hooks::free(hooks::calloc(size, 2));
            hooks::free(hooks::aligned_alloc(64, size));
            let mut aligned = std::ptr::null_mut();
            assert_eq!(hooks::posix_memalign(&mut aligned, 64, size), 0);
            hooks::free(aligned);
        }
    }
    ARMED.store(false, Ordering::SeqCst);
    nativemem::stop();
    sampler::retire();
    let (samples, frees) =
        (counters::get(Counter::NativeMemSamples) - samples, counters::get(Counter::NativeMemFrees) - frees);
    assert_eq!(ALLOCATIONS.load(Ordering::SeqCst), 0, "allocations during {samples} native allocation samples");
    assert!(samples >= 4000 && frees >= 4000, "{samples} allocations and {frees} frees recorded (5000 made)");

    // The calibration timer's signals, as the kernel fills them in.
    signals::install(libc::SIGPROF, on_calibration, &PREVIOUS.calibration).expect("calibration handler");
    let mut info = RawSiginfo::queued(libc::SIGPROF, 0, 0, CALIBRATION_PAYLOAD);
    info.code = SI_TIMER;
    let before = counters::calibration_signals();
    ARMED.store(true, Ordering::SeqCst);
    for _ in 0..100 {
        send_self(&info);
    }
    ARMED.store(false, Ordering::SeqCst);
    signals::restore(libc::SIGPROF, on_calibration, &PREVIOUS.calibration, Pending::Discard).expect("restore SIGPROF");
    assert_eq!(counters::calibration_signals() - before, 100, "every calibration signal counted");
    assert_eq!(ALLOCATIONS.load(Ordering::SeqCst), 0, "allocations during 100 calibration signals");
}
