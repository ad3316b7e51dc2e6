use super::*;
use asgct::AsgctTrace;
use frames::{CallTraceError, FrameKind};
use java_thread::JavaThreads;
use jni_sys::JNIEnv;
use origin::Origins;
use std::sync::atomic::{AtomicU64, Ordering};
use thread_state::BlockingMethods;

static NEXT_METHOD: AtomicU64 = AtomicU64::new(0);

/// Writes a 3-frame stack whose top method rotates over 4 values, or as
/// many frames as allowed when asked for fewer.
unsafe extern "C" fn fake_asgct(trace: *mut AsgctTrace, depth: i32, _ucontext: *mut c_void) {
    // SAFETY: called by `asgct_walk::call` with a valid trace and buffer.
    let trace = unsafe { &mut *trace };
    let top = NEXT_METHOD.fetch_add(1, Ordering::Relaxed) % 4;
    let n = depth.min(3);
    for i in 0..n {
        // SAFETY: `depth` frames fit the buffer.
        unsafe { trace.frames.add(i as usize).write(AsgctFrame { bci: i, method: (100 + top + i as u64 * 10) as _ }) };
    }
    trace.num_frames = n;
}

fn attached() -> *mut JNIEnv {
    std::ptr::NonNull::dangling().as_ptr()
}

fn detached() -> *mut JNIEnv {
    std::ptr::null_mut()
}

fn sampler(max_depth: usize, current_env: fn() -> *mut JNIEnv) -> Sampler {
    Sampler {
        traces: CallTraceStorage::new(1024, 1 << 16).unwrap(),
        stripes: SampleStripes::new(1024, 64).unwrap(),
        max_depth,
        asgct: Some(fake_asgct),
        threads: JavaThreads::EnvFunction(current_env),
        native: None,
        hotspot: None,
        verify_walk: false,
        origins: Arc::new(Origins::new().unwrap()),
        filter: false,
        context: crate::context::init().unwrap(),
        blocking: BlockingMethods::default(),
        nativemem: None,
        idle: None,
    }
}

fn request() -> SampleRequest {
    SampleRequest::signal(std::ptr::null_mut(), 1, SampleKind::Cpu, None)
}

#[test]
fn records_a_sample_with_its_trace() {
    let s = sampler(64, attached);
    for i in 0..8 {
        s.record(request(), 1000 + i, 77);
    }
    let mut out = Vec::new();
    s.stripes.drain_into(&mut out);
    assert_eq!(out.len(), 8);
    assert!(out.iter().all(|r| r.tid == 77 && r.weight == 1));
    assert_eq!(s.traces.len(), 4, "four distinct stacks");
    s.traces.for_each_live(|t| {
        assert_eq!(t.frames.len(), 3);
        assert!(!t.truncated);
        assert!(t.frames.iter().all(|f| f.kind == FrameKind::Java));
    });
}

#[test]
fn depth_limit_marks_the_trace_truncated() {
    let s = sampler(2, attached);
    s.record(request(), 1, 5);
    s.traces.for_each_live(|t| {
        assert_eq!(t.frames.len(), 2);
        assert!(t.truncated);
        assert_eq!(t.frames[1], Frame::error(CallTraceError::Truncated), "the root says the stack was cut");
    });
}

#[test]
fn thread_without_jni_env_gets_a_marker_frame() {
    let s = sampler(64, detached);
    s.record(request(), 1, 5);
    let mut frames = Vec::new();
    s.traces.for_each_live(|t| frames.extend_from_slice(t.frames));
    assert_eq!(frames, vec![Frame::error(CallTraceError::NotJavaThread)]);
}

/// Held by the tests that publish a sampler or need none published.
static PUBLISHED: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn retire_hides_the_sampler_from_handlers() {
    let _published = PUBLISHED.lock().unwrap_or_else(|p| p.into_inner());
    let s = Arc::new(sampler(64, attached));
    publish(&s);
    let mut ran = false;
    with_active(|_| ran = true);
    assert!(ran);
    retire();
    ran = false;
    with_active(|_| ran = true);
    assert!(!ran);
}

static FORWARDED: AtomicU64 = AtomicU64::new(0);

extern "C" fn previous_handler(_signo: std::ffi::c_int, _info: *mut libc::siginfo_t, _ucontext: *mut c_void) {
    FORWARDED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

fn disposition(handler: libc::sighandler_t, flags: std::ffi::c_int) -> libc::sigaction {
    // SAFETY: an all-zero sigaction is a valid value.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = handler;
    action.sa_flags = flags;
    action
}

/// With no session published, even a signal that looks like ours (a late
/// wall-clock signal, a late perf signal) is not sampled: it goes to the
/// handler that was there before ours, unless that was the default
/// disposition or ignore (the default would terminate the JVM).
#[test]
fn a_signal_with_no_session_goes_to_the_previous_handler_unless_default_or_ignore() {
    use chain::PREVIOUS;
    use handler::{on_sigprof, on_sigvtalrm};
    use siginfo::RawSiginfo;
    use std::sync::atomic::Ordering::SeqCst;
    let _published = PUBLISHED.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: getpid and getuid have no preconditions.
    let (pid, uid) = unsafe { (libc::getpid(), libc::getuid()) };
    let mut wall = RawSiginfo::queued(libc::SIGVTALRM, pid, uid, origin::wall_payload(1));
    // SAFETY: an all-zero siginfo is a valid value (a kill from pid 0).
    let mut plain: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let wall_info = (&mut wall as *mut RawSiginfo).cast::<libc::siginfo_t>();
    let plain_info: *mut libc::siginfo_t = &mut plain;
    let cases: [(&chain::PreviousAction, &dyn Fn()); 2] = [
        (&PREVIOUS.sigvtalrm, &|| on_sigvtalrm(libc::SIGVTALRM, wall_info, std::ptr::null_mut())),
        (&PREVIOUS.sigprof, &|| on_sigprof(libc::SIGPROF, plain_info, std::ptr::null_mut())),
    ];
    for (previous, deliver) in cases {
        let before = FORWARDED.load(SeqCst);
        // SAFETY: no handler of ours is installed in unit tests.
        unsafe { previous.set(disposition(previous_handler as *const () as usize, libc::SA_SIGINFO)) };
        deliver();
        assert_eq!(FORWARDED.load(SeqCst), before + 1, "passed to the previous handler");
        for default_or_ignore in [libc::SIG_DFL, libc::SIG_IGN] {
            // SAFETY: as above.
            unsafe { previous.set(disposition(default_or_ignore, 0)) };
            deliver();
            assert_eq!(FORWARDED.load(SeqCst), before + 1, "dropped, not applied");
        }
    }
}
