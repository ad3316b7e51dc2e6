//! `java.util.concurrent` lock waits (`lock=`): those locks block in
//! `jdk.internal.misc.Unsafe.park`, a native method, so its entry is
//! replaced by [`park_hook`], which times the original and hands waits to
//! `jvmti_samples::parked`.
//!
//! The original entry is found by tracing `Unsafe.registerNatives` with
//! JNI's `RegisterNatives` swapped in the function table (JVMTI's
//! `NativeMethodBind` would miss it after an attach: the method was bound
//! long before). The hook is bound through a method of a small class the
//! agent defines in the boot loader, because HotSpot warns when code of
//! another loader (or none) rebinds a platform class's native.
//!
//! Bound once per JVM and never unbound, as async-profiler leaves it:
//! with no session tracing parks the hook is one atomic load and a jump
//! to the original, and no rebinding ever races threads parked inside it.
//!
//! A virtual thread (JDK 21+) parks by unmounting from its carrier, not
//! in `Unsafe.park` (unless pinned): [`virtual_threads`] times its lock
//! waits in `LockSupport`.

mod classfile;
pub mod virtual_threads;

use crate::callbacks;
use crate::callbacks::jvmti_samples::{self, LockSampling, Park};
use crate::jvm::boundary::ffi_boundary;
use crate::jvm::jni_env::JniEnv;
use crate::jvm::jvmti::{ClassRef, Jvmti, RegisterNativesFn};
use crate::jvm::vm;
use crate::log;
use jni::sys::{jboolean, jclass, jfieldID, jint, jlong, jobject, jvalue, JNIEnv, JNINativeMethod};
use sampler::clock;
use sampler::os_thread::current_tid;
use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

type ParkFn = unsafe extern "system" fn(*mut JNIEnv, jobject, jboolean, jlong);

const PARK: &CStr = c"park";
const PARK_SIGNATURE: &CStr = c"(ZJ)V";
/// The boot-loader class whose method rebinds `Unsafe.park`.
const BINDER: &str = "dev/jvmprofiler/boot/ParkBinder";
const BINDER_CLASS: &CStr = c"dev/jvmprofiler/boot/ParkBinder";

/// The hook in place of `Unsafe.park`: what it was bound with and what it
/// samples. Process-wide: the hook is bound once per JVM and never
/// unbound, so it outlives sessions; a session only sets `tracing` and
/// the sampling thresholds.
struct ParkHook {
    /// `Unsafe.park`'s own entry (0 until found).
    original_park: AtomicUsize,
    /// JNI's `RegisterNatives`, while the tracing hook stands in for it.
    original_register: AtomicUsize,
    /// `jdk.internal.misc.Unsafe`, a global reference.
    unsafe_class: AtomicPtr<c_void>,
    /// `Thread.parkBlocker`.
    park_blocker: AtomicPtr<c_void>,
    /// Whether a session records parks.
    tracing: AtomicBool,
    /// Whether `bind0`'s rebinding succeeded.
    hook_bound: AtomicBool,
    /// Which parks are sampled (`jvmti_samples::LockSampling`: `lock=`,
    /// `lockthreshold=`), in ns, while tracing: decided before the session
    /// is looked up, so parks not sampled cost two loads and a draw.
    interval_ns: AtomicU64,
    threshold_ns: AtomicU64,
    /// The outcome of binding the hook, once per JVM.
    bound: Mutex<Option<Result<(), String>>>,
}

static HOOK: ParkHook = ParkHook {
    original_park: AtomicUsize::new(0),
    original_register: AtomicUsize::new(0),
    unsafe_class: AtomicPtr::new(std::ptr::null_mut()),
    park_blocker: AtomicPtr::new(std::ptr::null_mut()),
    tracing: AtomicBool::new(false),
    hook_bound: AtomicBool::new(false),
    interval_ns: AtomicU64::new(u64::MAX),
    threshold_ns: AtomicU64::new(u64::MAX),
    bound: Mutex::new(None),
};

/// Starts recording parks on `java.util.concurrent` locks, binding the
/// hook the first time, and virtual threads' (JDK 21+) unless
/// `virtual_threads` is `Some(false)`. Fails with the reason when this
/// JVM's `Unsafe` cannot be traced (monitor waits are still recorded
/// then); virtual threads' parks not timed are a warning.
pub fn arm(jvmti: Jvmti, env: JniEnv, lock: LockSampling, virtual_threads: Option<bool>) -> Result<(), String> {
    let mut bound = HOOK.bound.lock().unwrap_or_else(|p| p.into_inner());
    bound.get_or_insert_with(|| bind(jvmti, env)).clone()?;
    HOOK.interval_ns.store(lock.interval_ns, Ordering::SeqCst);
    HOOK.threshold_ns.store(lock.threshold_ns, Ordering::SeqCst);
    HOOK.tracing.store(true, Ordering::SeqCst);
    if let Err(e) = virtual_threads::arm(jvmti, env, virtual_threads) {
        log::warn!("lock: virtual threads' java.util.concurrent lock waits are not profiled ({e})");
    }
    Ok(())
}

/// Stops recording parks (the hook stays bound and passes through, the
/// rewritten `LockSupport` returns to its own code).
pub fn disarm() {
    HOOK.tracing.store(false, Ordering::SeqCst);
    virtual_threads::disarm();
}

/// Whether a park of `waited` ns is sampled now (`lock=`, `lockthreshold=`).
fn sampled(waited: u64) -> bool {
    let sampling = LockSampling {
        interval_ns: HOOK.interval_ns.load(Ordering::Relaxed),
        threshold_ns: HOOK.threshold_ns.load(Ordering::Relaxed),
    };
    sampling.takes_now(waited)
}

/// Hands the calling thread's sampled park to `jvmti_samples::parked`
/// (`what` names the JVM's call for a panic's log line).
fn record(what: &str, jvmti: Jvmti, env: *mut JNIEnv, park: Park) {
    ffi_boundary(what, (), || {
        // SAFETY: the env the JVM passed to the calling hook or native.
        let Some(env) = (unsafe { JniEnv::from_raw(env) }) else { return };
        let blocker: jfieldID = HOOK.park_blocker.load(Ordering::Relaxed).cast();
        callbacks::with_active(|state| {
            // SAFETY: the env of this thread and Thread.parkBlocker's id.
            unsafe { jvmti_samples::parked(state, &jvmti, env, blocker, park, current_tid()) }
        });
    })
}

/// Finds `Unsafe.park`'s entry and binds [`park_hook`] in its place.
fn bind(jvmti: Jvmti, env: JniEnv) -> Result<(), String> {
    env.with_local_frame(16, || {
        let unsafe_class = env
            .find_class(c"jdk/internal/misc/Unsafe")
            .and_then(|c| env.global_class(c))
            .ok_or("jdk.internal.misc.Unsafe not found")?;
        HOOK.unsafe_class.store(unsafe_class.as_raw().cast(), Ordering::SeqCst);
        let register =
            env.static_method(unsafe_class, c"registerNatives", c"()V").ok_or("Unsafe.registerNatives not found")?;
        jvmti
            .with_register_natives_hook(capture_park, &HOOK.original_register, || {
                // SAFETY: registerNatives is static and takes no arguments.
                unsafe { env.call_static_void(unsafe_class, register, &[]) }
            })
            .map_err(|e| format!("cannot trace Unsafe.registerNatives: {e}"))?;
        if HOOK.original_park.load(Ordering::SeqCst) == 0 {
            return Err("Unsafe.park's entry not found".to_owned());
        }
        let blocker = env
            .find_class(c"java/lang/Thread")
            .and_then(|thread| env.field(thread, c"parkBlocker", c"Ljava/lang/Object;"))
            .ok_or("Thread.parkBlocker not found")?;
        HOOK.park_blocker.store(blocker.cast(), Ordering::SeqCst);
        let binder = env
            .define_boot_class(BINDER_CLASS, &binder_class())
            .or_else(|| env.find_class(BINDER_CLASS))
            .ok_or("cannot define the park binder class")?;
        let native = [(c"bind0", c"(J)V", bind0 as *mut c_void)];
        let rebind = env
            .register_natives(binder, &native)
            .then(|| env.static_method(binder, c"bind", c"(J)V"))
            .flatten()
            .ok_or("cannot link the park binder class")?;
        // The argument is not used: `bind0` binds `park_hook` alone.
        let unused = jvalue { j: 0 };
        HOOK.hook_bound.store(false, Ordering::SeqCst);
        // SAFETY: `bind` is static and takes one long.
        if unsafe { env.call_static_void(binder, rebind, &[unused]) } && HOOK.hook_bound.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err("rebinding Unsafe.park failed".to_owned())
        }
    })
}

/// Stands in for `RegisterNatives` while `Unsafe.registerNatives` runs:
/// notes `park`'s entry and registers nothing for `Unsafe` (its bindings
/// stay as they are); other classes' calls go through.
unsafe extern "system" fn capture_park(
    env: *mut JNIEnv,
    class: jclass,
    methods: *const JNINativeMethod,
    count: jint,
) -> jint {
    let original = HOOK.original_register.load(Ordering::SeqCst);
    if original == 0 {
        return jni::sys::JNI_ERR;
    }
    // SAFETY: the JVM passes its env; the stored class is a global reference.
    let ours = unsafe { JniEnv::from_raw(env) }
        .is_some_and(|e| unsafe { e.is_same_object(class, HOOK.unsafe_class.load(Ordering::SeqCst).cast()) });
    if !ours {
        // SAFETY: the JVM's own RegisterNatives, stored before this hook
        // was installed, with the caller's arguments.
        let original: RegisterNativesFn = unsafe { std::mem::transmute(original) };
        // SAFETY: that function, with the caller's arguments.
        return unsafe { original(env, class, methods, count) };
    }
    // SAFETY: the JVM passes `count` methods with NUL-terminated names.
    let methods = unsafe { std::slice::from_raw_parts(methods, count.max(0) as usize) };
    for method in methods {
        // SAFETY: as above.
        let (name, signature) = unsafe { (CStr::from_ptr(method.name), CStr::from_ptr(method.signature)) };
        if name == PARK && signature == PARK_SIGNATURE {
            HOOK.original_park.store(method.fnPtr as usize, Ordering::SeqCst);
        }
    }
    0
}

/// `ParkBinder.bind0(long)`: binds `Unsafe.park` to [`park_hook`] (only:
/// the class is reachable by reflection, so its argument is ignored) and
/// says whether that worked in `HOOK.hook_bound`.
unsafe extern "system" fn bind0(env: *mut JNIEnv, _class: jclass, _unused: jlong) {
    ffi_boundary("ParkBinder.bind0", (), || {
        // SAFETY: the env the JVM passed.
        let Some(env) = (unsafe { JniEnv::from_raw(env) }) else { return };
        let class = HOOK.unsafe_class.load(Ordering::SeqCst);
        if class.is_null() || HOOK.original_park.load(Ordering::SeqCst) == 0 {
            return;
        }
        // SAFETY: a global class reference, set before the binder exists.
        let class = unsafe { ClassRef::from_raw(class.cast()) };
        let hook = park_hook as *const () as *mut c_void;
        HOOK.hook_bound.store(env.register_natives(class, &[(PARK, PARK_SIGNATURE, hook)]), Ordering::SeqCst);
    })
}

/// `Unsafe.park(boolean isAbsolute, long time)`: the original, timed when
/// a session traces parks.
unsafe extern "system" fn park_hook(env: *mut JNIEnv, this: jobject, absolute: jboolean, time: jlong) {
    // SAFETY: the hook is bound only after the original entry was found.
    let original: ParkFn = unsafe { std::mem::transmute(HOOK.original_park.load(Ordering::Relaxed)) };
    if !HOOK.tracing.load(Ordering::Relaxed) {
        // SAFETY: the JVM's own entry, with the caller's arguments.
        return unsafe { original(env, this, absolute, time) };
    }
    let start = clock::monotonic_ns();
    // SAFETY: as above.
    unsafe { original(env, this, absolute, time) };
    let waited = clock::monotonic_ns().saturating_sub(start);
    let Some(vm) = vm::get().filter(|_| sampled(waited)) else { return };
    let timeout = jvmti_samples::ParkTimeout::of(absolute, time);
    // A pinned virtual thread parks here under the timer, which records it.
    // SAFETY: the env the JVM passed.
    if unsafe { JniEnv::from_raw(env) }.is_some_and(|e| virtual_threads::timed_elsewhere(&vm.jvmti(), e)) {
        return;
    }
    record("Unsafe.park", vm.jvmti(), env, Park { start, waited, timeout, own_frames: 0 });
}

/// The class file of `dev.jvmprofiler.boot.ParkBinder`:
/// `private static native void bind0(long)` and
/// `static void bind(long e) { bind0(e); }`.
fn binder_class() -> Vec<u8> {
    let mut class = classfile::ClassWriter::new(BINDER);
    class.method(classfile::ACC_PRIVATE | classfile::ACC_STATIC | classfile::ACC_NATIVE, "bind0", "(J)V", None);
    let bind0 = class.pool.method(BINDER, "bind0", "(J)V");
    let mut code = classfile::Code::default();
    code.op_u1(classfile::op::LLOAD, 0).op_u2(classfile::op::INVOKESTATIC, bind0).op(classfile::op::RETURN);
    let body = classfile::Body { max_stack: 2, max_locals: 2, code: &code, handlers: &[] };
    class.method(classfile::ACC_STATIC, "bind", "(J)V", Some(body));
    class.finish(49)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `javap` (the JDK's class-file reader) reads the binder as written.
    #[test]
    fn the_binder_class_is_a_valid_class_file() {
        let dir = std::env::temp_dir().join(format!("park-binder-{}", std::process::id()));
        let text = virtual_threads::tests::javap(&dir, BINDER, &binder_class());
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(text.contains("public final class dev.jvmprofiler.boot.ParkBinder"), "{text}");
        assert!(text.contains("private static native void bind0(long);"), "{text}");
        assert!(text.contains("static void bind(long);"), "{text}");
        assert!(text.contains("invokestatic") && text.contains("Method bind0:(J)V"), "{text}");
    }
}
