//! Virtual threads' `java.util.concurrent` lock waits (JDK 21+). A
//! virtual thread parks by unmounting from its carrier, not in
//! `Unsafe.park` (unless pinned), so its lock waits are timed in Java:
//! `LockSupport.park(Object)`, `parkNanos(Object, long)` and
//! `parkUntil(Object, long)` are rewritten, once per JVM, to first call
//! the method of the same name of `ParkTimer`, a class the agent defines
//! in the boot loader. While a session times them, for a virtual thread
//! whose blocker may be a lock (an `AbstractQueuedSynchronizer`, a
//! `StampedLock`), that method parks the thread itself (the blocker set
//! as `LockSupport` sets it), hands the wait to [`parked`] and returns
//! true, and the original body is skipped; otherwise it returns false
//! and the original runs. Other parks cost a static load and a type
//! check; mounts and unmounts cost nothing. The wait is timed across the
//! unmount and the remount on any carrier, with the virtual thread's own
//! stack.
//!
//! The rewrite stays (as the `Unsafe.park` hook does): between sessions
//! `ParkTimer.on` is false and the timer returns at once.

use super::classfile::{
    self, op, Body, ClassWriter, Code, Handler, Pool, Prefix, Prepended, ACC_NATIVE, ACC_PRIVATE, ACC_PUBLIC,
    ACC_STATIC, ACC_VOLATILE,
};
use crate::callbacks::jvmti_samples::{Park, ParkTimeout};
use crate::jvm::boundary::ffi_boundary;
use crate::jvm::jni_env::JniEnv;
use crate::jvm::jvmti::capabilities::{Capabilities, CAN_RETRANSFORM_CLASSES};
use crate::jvm::jvmti::events::Event;
use crate::jvm::jvmti::{ClassRef, Jvmti};
use crate::jvm::vm;
use jni::sys::{jboolean, jclass, jfieldID, jint, jlong, jobject, JNIEnv};
use sampler::clock;
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

const TIMER: &str = "dev/jvmprofiler/boot/ParkTimer";
const TIMER_CLASS: &CStr = c"dev/jvmprofiler/boot/ParkTimer";
const LOCK_SUPPORT: &str = "java/util/concurrent/locks/LockSupport";
const LOCK_SUPPORT_CLASS: &CStr = c"java/util/concurrent/locks/LockSupport";
/// JDK 21 made virtual threads final.
const VIRTUAL_THREADS_SINCE: u32 = 21;
/// `ParkTimer.parked`'s frame and the `ParkTimer` method's, above
/// `LockSupport`'s in a recorded stack.
const TIMER_FRAMES: u8 = 2;

/// The `LockSupport` methods rewritten, and what each parks with once
/// the timer has set the blocker: (name, time argument's descriptor,
/// whether the time is a deadline).
const PARKS: [(&str, &str, bool); 3] = [("park", "", false), ("parkNanos", "J", false), ("parkUntil", "J", true)];

/// The timer class and its switch, once `LockSupport` calls it.
struct Timer {
    class: ClassRef,
    on: jfieldID,
}

// SAFETY: a global class reference and a field id, valid on every thread.
unsafe impl Send for Timer {}

/// The rewritten `LockSupport`'s timer. Process-wide: `LockSupport` is
/// rewritten once per JVM and stays so; a session only turns timing on
/// and off.
struct TimerState {
    /// The outcome of rewriting `LockSupport`, once per JVM.
    installed: Mutex<Option<Result<Timer, String>>>,
    /// What `ClassFileLoadHook` made of `LockSupport` while it was rewritten.
    rewrite: Mutex<Option<Result<(), String>>>,
    /// Whether a session times virtual threads' parks: the `Unsafe.park`
    /// hook leaves a pinned virtual thread's park to the timer then.
    timing: AtomicBool,
    /// When it began: a park that began before (a wait across sessions) is
    /// not recorded.
    since_ns: AtomicU64,
}

static STATE: TimerState = TimerState {
    installed: Mutex::new(None),
    rewrite: Mutex::new(None),
    timing: AtomicBool::new(false),
    since_ns: AtomicU64::new(u64::MAX),
};

/// Times virtual threads' lock waits from now on, where the JDK has
/// virtual threads, unless `wanted` is `Some(false)`.
pub fn arm(jvmti: Jvmti, env: JniEnv, wanted: Option<bool>) -> Result<(), String> {
    let major = jvmti.version_number().map(crate::jvm::jdk_support::major).unwrap_or(0);
    if major < VIRTUAL_THREADS_SINCE {
        return Ok(());
    }
    let mut installed = STATE.installed.lock().unwrap_or_else(|p| p.into_inner());
    let on = wanted.unwrap_or(true);
    let timer = match installed.as_ref() {
        Some(Ok(timer)) => timer,
        // Installed only when first wanted.
        None | Some(Err(_)) if !on => return Ok(()),
        _ => installed.get_or_insert_with(|| install(jvmti, env)).as_ref().map_err(Clone::clone)?,
    };
    STATE.since_ns.store(clock::monotonic_ns(), Ordering::SeqCst);
    STATE.timing.store(on, Ordering::SeqCst);
    // SAFETY: `on` is the timer class's static boolean.
    unsafe { env.set_static_boolean(timer.class, timer.on, on) };
    Ok(())
}

/// Stops timing virtual threads' parks: the timer's native side stops
/// recording at once, its Java side stops timing when this thread can
/// reach the JVM (else at the next session's `arm`).
pub fn disarm() {
    if !STATE.timing.swap(false, Ordering::SeqCst) {
        return;
    }
    let installed = STATE.installed.lock().unwrap_or_else(|p| p.into_inner());
    let (Some(Ok(timer)), Some(vm)) = (installed.as_ref(), vm::get()) else { return };
    // SAFETY: the calling thread's env, when it has one.
    if let Some(env) = unsafe { JniEnv::from_raw(vm.current_env()) } {
        // SAFETY: as in `arm`.
        unsafe { env.set_static_boolean(timer.class, timer.on, false) };
    }
}

/// Whether the `Unsafe.park` hook should leave the calling thread's park
/// to the timer: a session times virtual threads, and this is one.
pub fn timed_elsewhere(jvmti: &Jvmti, env: JniEnv) -> bool {
    STATE.timing.load(Ordering::Relaxed)
        // SAFETY: the timer is on only where virtual threads exist (JDK 21+).
        && env.with_local_frame(4, || jvmti.current_thread().is_ok_and(|thread| unsafe { env.is_virtual(thread) }))
}

/// Defines the timer and rewrites `LockSupport` to call it.
fn install(jvmti: Jvmti, env: JniEnv) -> Result<Timer, String> {
    env.with_local_frame(16, || {
        let class = env
            .define_boot_class(TIMER_CLASS, &timer_class())
            .or_else(|| env.find_class(TIMER_CLASS))
            .and_then(|class| env.global_class(class))
            .ok_or("cannot define the park timer class")?;
        let native = [(c"parked", c"(JJZ)V", parked as *mut c_void)];
        if !env.register_natives(class, &native) {
            return Err("cannot link the park timer class".into());
        }
        let on = env.static_field(class, c"on", c"Z").ok_or("ParkTimer.on not found")?;
        let lock_support = env.find_class(LOCK_SUPPORT_CLASS).ok_or("LockSupport not found")?;
        // java.base links to the timer only if it reads the timer's module.
        let modules = env.module(lock_support).zip(env.module(class)).ok_or("modules not found")?;
        // SAFETY: the modules of two live classes.
        unsafe { jvmti.add_module_reads(modules.0, modules.1) }.map_err(|e| format!("AddModuleReads: {e}"))?;
        jvmti
            .add_capabilities(&Capabilities::default().with(CAN_RETRANSFORM_CLASSES))
            .map_err(|e| format!("{}: {e}", CAN_RETRANSFORM_CLASSES.name))?;
        *STATE.rewrite.lock().unwrap_or_else(|p| p.into_inner()) = None;
        jvmti.set_event_enabled(Event::ClassFileLoadHook, true).map_err(|e| format!("ClassFileLoadHook: {e}"))?;
        let retransformed = jvmti.retransform_class(lock_support);
        let _ = jvmti.set_event_enabled(Event::ClassFileLoadHook, false);
        retransformed.map_err(|e| format!("RetransformClasses(LockSupport): {e}"))?;
        let rewrite = STATE.rewrite.lock().unwrap_or_else(|p| p.into_inner()).take();
        rewrite.unwrap_or_else(|| Err("LockSupport was not handed over".into()))?;
        Ok(Timer { class, on })
    })
}

/// `ClassFileLoadHook`, enabled only while [`install`] retransforms
/// `LockSupport`: hands back `LockSupport` rewritten, and leaves other
/// classes (loaded meanwhile by other threads) as they are.
///
/// # Safety
/// Called by the JVM only, with `ClassFileLoadHook`'s arguments.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn class_file_load_hook(
    jvmti: *mut c_void,
    _env: *mut JNIEnv,
    redefined: jclass,
    _loader: jobject,
    name: *const c_char,
    _protection_domain: jobject,
    length: jint,
    bytes: *const u8,
    new_length: *mut jint,
    new_bytes: *mut *mut u8,
) {
    ffi_boundary("ClassFileLoadHook", (), || {
        // SAFETY: the JVM passes a NUL-terminated name, or null.
        let ours = !name.is_null() && unsafe { CStr::from_ptr(name) } == LOCK_SUPPORT_CLASS;
        if redefined.is_null() || !ours || bytes.is_null() {
            return;
        }
        // SAFETY: the JVM passes `length` bytes of class file.
        let class = unsafe { std::slice::from_raw_parts(bytes, usize::try_from(length).unwrap_or(0)) };
        // SAFETY: the jvmtiEnv the JVM passes to its callback.
        let jvmti = unsafe { Jvmti::from_raw(jvmti) };
        let outcome = rewritten(class).and_then(|rewritten| {
            let memory = jvmti.allocated_copy(&rewritten).map_err(|e| format!("Allocate: {e}"))?;
            // SAFETY: the JVM's out pointers; the bytes are JVMTI memory.
            unsafe {
                *new_length = rewritten.len() as jint;
                *new_bytes = memory;
            }
            Ok(())
        });
        *STATE.rewrite.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(outcome.map_err(|e| format!("{LOCK_SUPPORT}: {e}")));
    })
}

/// `LockSupport`'s class file with each of [`PARKS`] first calling the
/// timer: `if (ParkTimer.park(blocker[, time])) return;`.
fn rewritten(class: &[u8]) -> Result<Vec<u8>, String> {
    let prefix = |name: &'static str, time: &'static str| {
        move |pool: &mut Pool| {
            let timer = pool.method(TIMER, name, &format!("(Ljava/lang/Object;{time})Z"));
            let mut code = Code::default();
            code.op(op::ALOAD_0);
            if !time.is_empty() {
                code.op_u1(op::LLOAD, 1);
            }
            code.op_u2(op::INVOKESTATIC, timer);
            let skip = code.branch(op::IFEQ);
            code.op(op::RETURN);
            code.land(skip);
            Prefix { code, max_stack: 3 }
        }
    };
    let prefixes = PARKS.map(|(name, time, _)| (name, format!("(Ljava/lang/Object;{time})V"), prefix(name, time)));
    let table: Vec<Prepended> =
        prefixes.iter().map(|(name, descriptor, p)| (*name, descriptor.as_str(), p as _)).collect();
    classfile::prepend(class, &table)
}

/// The class file of `dev.jvmprofiler.boot.ParkTimer` (version 49, whose
/// methods need no stack maps; the boot loader's classes are not
/// verified):
///
/// ```java
/// static volatile boolean on;
/// private static native void parked(long start, long time, boolean absolute);
/// private static boolean timed(Object blocker) {
///     return on && (blocker instanceof AbstractQueuedSynchronizer || blocker instanceof StampedLock)
///         && Thread.currentThread().isVirtual();
/// }
/// // And parkNanos(blocker, nanos), parkUntil(blocker, deadline) alike:
/// public static boolean park(Object blocker) {
///     if (!timed(blocker)) return false;
///     long start = System.nanoTime();
///     LockSupport.setCurrentBlocker(blocker);
///     try {
///         LockSupport.park();
///         parked(start, 0, false);
///     } finally {
///         LockSupport.setCurrentBlocker(null);
///     }
///     return true;
/// }
/// ```
fn timer_class() -> Vec<u8> {
    let mut class = ClassWriter::new(TIMER);
    class.field(ACC_STATIC | ACC_VOLATILE, "on", "Z");
    class.method(ACC_PRIVATE | ACC_STATIC | ACC_NATIVE, "parked", "(JJZ)V", None);
    let pool = &mut class.pool;
    let on = pool.field(TIMER, "on", "Z");
    let synchronizer = pool.class("java/util/concurrent/locks/AbstractQueuedSynchronizer");
    let stamped = pool.class("java/util/concurrent/locks/StampedLock");
    let current = pool.method("java/lang/Thread", "currentThread", "()Ljava/lang/Thread;");
    let is_virtual = pool.method("java/lang/Thread", "isVirtual", "()Z");
    let mut timed = Code::default();
    timed.op_u2(op::GETSTATIC, on);
    let off = timed.branch(op::IFEQ);
    timed.op(op::ALOAD_0).op_u2(op::INSTANCEOF, synchronizer);
    let lock = timed.branch(op::IFNE);
    timed.op(op::ALOAD_0).op_u2(op::INSTANCEOF, stamped);
    let other = timed.branch(op::IFEQ);
    timed.land(lock);
    timed.op_u2(op::INVOKESTATIC, current).op_u2(op::INVOKEVIRTUAL, is_virtual).op(op::IRETURN);
    timed.land(off);
    timed.land(other);
    timed.op(op::ICONST_0).op(op::IRETURN);
    let body = Body { max_stack: 1, max_locals: 1, code: &timed, handlers: &[] };
    class.method(ACC_PRIVATE | ACC_STATIC, "timed", "(Ljava/lang/Object;)Z", Some(body));
    let pool = &mut class.pool;
    let timed = pool.method(TIMER, "timed", "(Ljava/lang/Object;)Z");
    let nano_time = pool.method("java/lang/System", "nanoTime", "()J");
    let set_blocker = pool.method(LOCK_SUPPORT, "setCurrentBlocker", "(Ljava/lang/Object;)V");
    let parked = pool.method(TIMER, "parked", "(JJZ)V");
    for (name, time, absolute) in PARKS {
        let park = class.pool.method(LOCK_SUPPORT, name, &format!("({time})V"));
        // Locals: the blocker, the time (two slots) if any, the start
        // (two), the exception.
        let start = if time.is_empty() { 1 } else { 3 };
        let thrown = start + 2;
        let mut code = Code::default();
        code.op(op::ALOAD_0).op_u2(op::INVOKESTATIC, timed);
        let go = code.branch(op::IFNE);
        code.op(op::ICONST_0).op(op::IRETURN);
        code.land(go);
        code.op_u2(op::INVOKESTATIC, nano_time).op_u1(op::LSTORE, start);
        code.op(op::ALOAD_0).op_u2(op::INVOKESTATIC, set_blocker);
        let try_start = code.here();
        if time.is_empty() {
            code.op_u2(op::INVOKESTATIC, park).op_u1(op::LLOAD, start).op(op::LCONST_0);
        } else {
            code.op_u1(op::LLOAD, 1).op_u2(op::INVOKESTATIC, park).op_u1(op::LLOAD, start).op_u1(op::LLOAD, 1);
        }
        code.op(if absolute { op::ICONST_1 } else { op::ICONST_0 }).op_u2(op::INVOKESTATIC, parked);
        let try_end = code.here();
        code.op(op::ACONST_NULL).op_u2(op::INVOKESTATIC, set_blocker).op(op::ICONST_1).op(op::IRETURN);
        let handler = code.here();
        code.op_u1(op::ASTORE, thrown).op(op::ACONST_NULL).op_u2(op::INVOKESTATIC, set_blocker);
        code.op_u1(op::ALOAD, thrown).op(op::ATHROW);
        let handlers = [Handler { start: try_start, end: try_end, handler }];
        let body = Body { max_stack: 5, max_locals: u16::from(thrown) + 1, code: &code, handlers: &handlers };
        let descriptor = format!("(Ljava/lang/Object;{time})Z");
        class.method(ACC_PUBLIC | ACC_STATIC, name, &descriptor, Some(body));
    }
    class.finish(49)
}

/// `ParkTimer.parked(start, time, absolute)`: the calling virtual thread
/// was parked on a lock (perhaps) since `start`, with `time` as
/// `LockSupport` took it; sampled as the `Unsafe.park` hook samples.
unsafe extern "system" fn parked(env: *mut JNIEnv, _class: jclass, start: jlong, time: jlong, absolute: jboolean) {
    let start = start as u64;
    if !STATE.timing.load(Ordering::Relaxed) || start < STATE.since_ns.load(Ordering::Relaxed) {
        return;
    }
    let waited = clock::monotonic_ns().saturating_sub(start);
    if let (true, Some(vm)) = (super::sampled(waited), vm::get()) {
        let park = Park { start, waited, timeout: ParkTimeout::of(absolute, time), own_frames: TIMER_FRAMES };
        super::record("ParkTimer.parked", vm.jvmti(), env, park);
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::jvm::jvmti::tests::java_home;
    use std::path::{Path, PathBuf};
    use std::process::Command;

    fn jdk_tool(name: &str) -> PathBuf {
        java_home().join("bin").join(name)
    }

    /// `javap -c -p -v` of `bytes` written as `class` under `dir`.
    pub(in crate::engine::park) fn javap(dir: &Path, class: &str, bytes: &[u8]) -> String {
        let path = dir.join(format!("{class}.class"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        let output = Command::new(jdk_tool("javap")).args(["-c", "-p", "-v"]).arg(&path).output().expect("run javap");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "{text}{}", String::from_utf8_lossy(&output.stderr));
        text
    }

    #[test]
    fn the_timer_class_reads_as_written() {
        let dir = std::env::temp_dir().join(format!("park-timer-{}", std::process::id()));
        let text = javap(&dir, TIMER, &timer_class());
        std::fs::remove_dir_all(&dir).unwrap();
        for needle in [
            "static volatile boolean on;",
            "private static native void parked(long, long, boolean);",
            "public static boolean park(java.lang.Object);",
            "public static boolean parkNanos(java.lang.Object, long);",
            "public static boolean parkUntil(java.lang.Object, long);",
            "Method java/util/concurrent/locks/LockSupport.parkUntil:(J)V",
            "Method java/lang/Thread.isVirtual:()Z",
            "// class java/util/concurrent/locks/StampedLock",
        ] {
            assert!(text.contains(needle), "{needle} in {text}");
        }
    }

    /// The JDK's own `LockSupport` (`JAVA_HOME`'s), rewritten, passes the
    /// JVM's verifier (boot classes verified too) and parks, with the
    /// timer beside it in the boot loader (its `on` false: the original
    /// bodies run).
    #[test]
    fn the_rewritten_lock_support_verifies_and_parks() {
        let dir = std::env::temp_dir().join(format!("lock-support-{}", std::process::id()));
        let image = dir.join("image");
        let status = Command::new(jdk_tool("jimage"))
            .args(["extract", "--dir"])
            .arg(&image)
            .args(["--include", r"regex:.*/java/util/concurrent/locks/LockSupport\.class"])
            .arg(java_home().join("lib/modules"))
            .status()
            .expect("run jimage");
        assert!(status.success());
        let path = "java/util/concurrent/locks/LockSupport.class";
        let original = std::fs::read(image.join("java.base").join(path)).unwrap();
        let write = |file: PathBuf, bytes: &[u8]| {
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, bytes).unwrap();
        };
        write(dir.join("patch").join(path), &rewritten(&original).unwrap());
        write(dir.join("boot").join(format!("{TIMER}.class")), &timer_class());
        let program = "import java.util.concurrent.locks.LockSupport;\n\
            class Park { public static void main(String[] a) {\n\
            LockSupport.parkNanos(new Object(), 1000L); LockSupport.parkUntil(new Object(), 0L);\n\
            Thread t = new Thread(() -> LockSupport.park(new Object())); t.start(); LockSupport.unpark(t);\n\
            System.out.println(\"parked\"); } }\n";
        write(dir.join("Park.java"), program.as_bytes());
        let output = Command::new(jdk_tool("java"))
            .arg(format!("--patch-module=java.base={}", dir.join("patch").display()))
            .arg("--add-reads=java.base=ALL-UNNAMED")
            .arg(format!("-Xbootclasspath/a:{}", dir.join("boot").display()))
            .args(["-XX:+UnlockDiagnosticVMOptions", "-XX:+BytecodeVerificationLocal", "-Xlog:verification=info"])
            .arg(dir.join("Park.java"))
            .output()
            .expect("run java");
        std::fs::remove_dir_all(&dir).unwrap();
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{text}{}", String::from_utf8_lossy(&output.stderr));
        assert!(text.contains("Verifying class java.util.concurrent.locks.LockSupport"), "{text}");
        assert!(text.lines().any(|l| l == "parked"), "{text}");
    }
}
