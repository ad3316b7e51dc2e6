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
//! in `Unsafe.park` (unless pinned): its wait is timed from JVMTI's
//! `VirtualThreadUnmount` to the `VirtualThreadMount` that resumes it,
//! perhaps on another carrier, the start kept in the virtual thread's own
//! JVMTI thread-local value, and handed to `jvmti_samples::parked` at the
//! mount, where the virtual thread runs with its own stack.

use crate::clock;
use crate::entry::ffi_boundary;
use crate::jni_env::JniEnv;
use crate::jvmti::capabilities::{Capabilities, CAN_SUPPORT_VIRTUAL_THREADS};
use crate::jvmti::{jthread, ClassRef, Jvmti, RegisterNativesFn, ThreadExtensionEventFn};
use crate::jvmti_samples::{self, LockSampling};
use crate::log;
use crate::os_thread::current_tid;
use crate::sampling;
use crate::vm;
use jni::sys::{jboolean, jclass, jfieldID, jint, jlong, jobject, jvalue, JNIEnv, JNINativeMethod};
use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

type ParkFn = unsafe extern "system" fn(*mut JNIEnv, jobject, jboolean, jlong);

const PARK: &CStr = c"park";
const PARK_SIGNATURE: &CStr = c"(ZJ)V";
/// The boot-loader class whose method rebinds `Unsafe.park`.
const BINDER_CLASS: &CStr = c"dev/jvmprofiler/boot/ParkBinder";

/// `Unsafe.park`'s own entry (0 until found).
static ORIGINAL_PARK: AtomicUsize = AtomicUsize::new(0);
/// JNI's `RegisterNatives`, while the tracing hook stands in for it.
static ORIGINAL_REGISTER: AtomicUsize = AtomicUsize::new(0);
/// `jdk.internal.misc.Unsafe`, a global reference.
static UNSAFE_CLASS: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
/// `Thread.parkBlocker`.
static PARK_BLOCKER: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
/// Whether a session records parks.
static TRACING: AtomicBool = AtomicBool::new(false);
/// Whether `bind0`'s rebinding succeeded.
static HOOK_BOUND: AtomicBool = AtomicBool::new(false);
/// Which parks are sampled (`jvmti_samples::LockSampling`: `lock=`,
/// `lockthreshold=`), in ns, while tracing: decided before the session is
/// looked up, so parks not sampled cost two loads and a draw.
static INTERVAL_NS: AtomicU64 = AtomicU64::new(u64::MAX);
static THRESHOLD_NS: AtomicU64 = AtomicU64::new(u64::MAX);
/// The outcome of binding the hook, once per JVM.
static BOUND: Mutex<Option<Result<(), String>>> = Mutex::new(None);
/// The extension events that time virtual threads' parks (mount, unmount),
/// found once per JVM; `None` inside on a JDK without virtual threads.
static VIRTUAL_EVENTS: Mutex<Option<Result<Option<[jint; 2]>, String>>> = Mutex::new(None);

const MOUNT_EVENT: &str = "com.sun.hotspot.events.VirtualThreadMount";
const UNMOUNT_EVENT: &str = "com.sun.hotspot.events.VirtualThreadUnmount";
/// JDK 21 made virtual threads final (and JVMTI's support of them).
const VIRTUAL_THREADS_SINCE: u32 = 21;
/// Where timing virtual threads' parks is on by default: on JDK 21 (21.0.8
/// measured) `SetThreadLocalStorage` stops every virtual thread's mount
/// and unmount in the JVM, so a park timed at each unmount cost a workload
/// of nothing but switches 90% of its throughput (JDK 25: 18 points more
/// than lock profiling without it); 22 to 24 are not measured.
const VIRTUAL_THREADS_CHEAP_SINCE: u32 = 25;

/// Starts recording parks on `java.util.concurrent` locks, binding the
/// hook the first time, and virtual threads' (JDK 21+) as
/// `virtual_threads` says (`None`: from JDK 25, where it is cheap). Fails with the reason when this JVM's `Unsafe`
/// cannot be traced (monitor waits are still recorded then).
pub fn arm(jvmti: Jvmti, env: JniEnv, lock: LockSampling, virtual_threads: Option<bool>) -> Result<(), String> {
    let mut bound = BOUND.lock().unwrap_or_else(|p| p.into_inner());
    bound.get_or_insert_with(|| bind(jvmti, env)).clone()?;
    INTERVAL_NS.store(lock.interval_ns, Ordering::SeqCst);
    THRESHOLD_NS.store(lock.threshold_ns, Ordering::SeqCst);
    TRACING.store(true, Ordering::SeqCst);
    let major = jvmti.version_number().map(crate::jdk_support::major).unwrap_or(0);
    if !virtual_threads.unwrap_or(major >= VIRTUAL_THREADS_CHEAP_SINCE) {
        return Ok(());
    }
    let mut virtual_events = VIRTUAL_EVENTS.lock().unwrap_or_else(|p| p.into_inner());
    match virtual_events.get_or_insert_with(|| bind_virtual(jvmti)) {
        Ok(Some(events)) => {
            jvmti_samples::keep_wait_starts_in_jvmti(true);
            for &index in events.iter() {
                if let Err(e) = jvmti.set_extension_event_enabled(index, true) {
                    log::warn!("lock: virtual threads' java.util.concurrent lock waits are not profiled ({e})");
                }
            }
        }
        Ok(None) => {}
        Err(e) => log::warn!("lock: virtual threads' java.util.concurrent lock waits are not profiled ({e})"),
    }
    Ok(())
}

/// Stops recording parks (the hook stays bound and passes through; the
/// virtual threads' events are turned off).
pub fn disarm(jvmti: Jvmti) {
    TRACING.store(false, Ordering::SeqCst);
    jvmti_samples::keep_wait_starts_in_jvmti(false);
    if let Some(Ok(Some(events))) = VIRTUAL_EVENTS.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
        for &index in events.iter() {
            let _ = jvmti.set_extension_event_enabled(index, false);
        }
    }
}

/// Sets up the timing of virtual threads' parks: the capability (granted
/// at load and attach alike) and the mount and unmount callbacks. `None`
/// on a JDK without virtual threads.
fn bind_virtual(jvmti: Jvmti) -> Result<Option<[jint; 2]>, String> {
    let version = jvmti.version_number().map_err(|e| format!("GetVersionNumber: {e}"))?;
    if crate::jdk_support::major(version) < VIRTUAL_THREADS_SINCE {
        return Ok(None);
    }
    jvmti
        .add_capabilities(&Capabilities::default().with(CAN_SUPPORT_VIRTUAL_THREADS))
        .map_err(|e| format!("{}: {e}", CAN_SUPPORT_VIRTUAL_THREADS.name))?;
    let events = jvmti.extension_events().map_err(|e| format!("GetExtensionEvents: {e}"))?;
    let index = |id: &str| {
        events.iter().find(|(_, name)| name == id).map(|&(index, _)| index).ok_or(format!("{id} not offered"))
    };
    let (mount, unmount) = (index(MOUNT_EVENT)?, index(UNMOUNT_EVENT)?);
    let callbacks: [(jint, ThreadExtensionEventFn); 2] = [(mount, on_mount), (unmount, on_unmount)];
    for (index, callback) in callbacks {
        jvmti.set_extension_event_callback(index, Some(callback)).map_err(|e| format!("{e} setting a callback"))?;
    }
    Ok(Some([mount, unmount]))
}

/// `VirtualThreadUnmount`, on the virtual thread about to leave its
/// carrier: notes when, in the virtual thread's thread-local value.
unsafe extern "C" fn on_unmount(jvmti: *mut c_void, _env: *mut JNIEnv, _thread: jthread) {
    if TRACING.load(Ordering::Relaxed) {
        // SAFETY: the jvmtiEnv the JVM passes to its callback.
        jvmti_samples::unmounting(&unsafe { Jvmti::from_raw(jvmti) });
    }
}

/// `VirtualThreadMount`, on the virtual thread back on a carrier: the time
/// since its unmount, sampled as a park's (`jvmti_samples::parked` keeps
/// it if the park blocker is a lock).
unsafe extern "C" fn on_mount(jvmti: *mut c_void, env: *mut JNIEnv, _thread: jthread) {
    if !TRACING.load(Ordering::Relaxed) {
        return;
    }
    // SAFETY: the jvmtiEnv the JVM passes to its callback.
    let jvmti = unsafe { Jvmti::from_raw(jvmti) };
    let Some(start) = jvmti_samples::mounted(&jvmti) else { return };
    let waited = clock::monotonic_ns().saturating_sub(start);
    if sampled(waited) {
        // The timeout of a virtual thread's park is not known here.
        record("VirtualThreadMount", jvmti, env, start, waited, jvmti_samples::ParkTimeout(0));
    }
}

/// Whether a park of `waited` ns is sampled now (`lock=`, `lockthreshold=`).
fn sampled(waited: u64) -> bool {
    let sampling = LockSampling {
        interval_ns: INTERVAL_NS.load(Ordering::Relaxed),
        threshold_ns: THRESHOLD_NS.load(Ordering::Relaxed),
    };
    sampling.takes_now(waited)
}

/// Hands the calling thread's sampled park to `jvmti_samples::parked`
/// (`what` names the JVM's call for a panic's log line).
fn record(what: &str, jvmti: Jvmti, env: *mut JNIEnv, start: u64, waited: u64, timeout: jvmti_samples::ParkTimeout) {
    ffi_boundary(what, (), || {
        // SAFETY: the env the JVM passed to the calling hook or callback.
        let Some(env) = (unsafe { JniEnv::from_raw(env) }) else { return };
        let blocker: jfieldID = PARK_BLOCKER.load(Ordering::Relaxed).cast();
        sampling::with_active(|sampler| {
            // SAFETY: the env of this thread and Thread.parkBlocker's id.
            unsafe { jvmti_samples::parked(sampler, &jvmti, env, blocker, start, waited, timeout, current_tid()) }
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
        UNSAFE_CLASS.store(unsafe_class.as_raw().cast(), Ordering::SeqCst);
        let register =
            env.static_method(unsafe_class, c"registerNatives", c"()V").ok_or("Unsafe.registerNatives not found")?;
        jvmti
            .with_register_natives_hook(capture_park, &ORIGINAL_REGISTER, || {
                // SAFETY: registerNatives is static and takes no arguments.
                unsafe { env.call_static_void(unsafe_class, register, &[]) }
            })
            .map_err(|e| format!("cannot trace Unsafe.registerNatives: {e}"))?;
        if ORIGINAL_PARK.load(Ordering::SeqCst) == 0 {
            return Err("Unsafe.park's entry not found".to_owned());
        }
        let blocker = env
            .find_class(c"java/lang/Thread")
            .and_then(|thread| env.field(thread, c"parkBlocker", c"Ljava/lang/Object;"))
            .ok_or("Thread.parkBlocker not found")?;
        PARK_BLOCKER.store(blocker.cast(), Ordering::SeqCst);
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
        HOOK_BOUND.store(false, Ordering::SeqCst);
        // SAFETY: `bind` is static and takes one long.
        if unsafe { env.call_static_void(binder, rebind, &[unused]) } && HOOK_BOUND.load(Ordering::SeqCst) {
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
    let original = ORIGINAL_REGISTER.load(Ordering::SeqCst);
    if original == 0 {
        return jni::sys::JNI_ERR;
    }
    // SAFETY: the JVM passes its env; the stored class is a global reference.
    let ours = unsafe { JniEnv::from_raw(env) }
        .is_some_and(|e| unsafe { e.is_same_object(class, UNSAFE_CLASS.load(Ordering::SeqCst).cast()) });
    if !ours {
        // SAFETY: the JVM's own RegisterNatives, stored before this hook
        // was installed, with the caller's arguments.
        let original: RegisterNativesFn = unsafe { std::mem::transmute(original) };
        return unsafe { original(env, class, methods, count) };
    }
    // SAFETY: the JVM passes `count` methods with NUL-terminated names.
    let methods = unsafe { std::slice::from_raw_parts(methods, count.max(0) as usize) };
    for method in methods {
        // SAFETY: as above.
        let (name, signature) = unsafe { (CStr::from_ptr(method.name), CStr::from_ptr(method.signature)) };
        if name == PARK && signature == PARK_SIGNATURE {
            ORIGINAL_PARK.store(method.fnPtr as usize, Ordering::SeqCst);
        }
    }
    0
}

/// `ParkBinder.bind0(long)`: binds `Unsafe.park` to [`park_hook`] (only:
/// the class is reachable by reflection, so its argument is ignored) and
/// says whether that worked in [`HOOK_BOUND`].
unsafe extern "system" fn bind0(env: *mut JNIEnv, _class: jclass, _unused: jlong) {
    ffi_boundary("ParkBinder.bind0", (), || {
        // SAFETY: the env the JVM passed.
        let Some(env) = (unsafe { JniEnv::from_raw(env) }) else { return };
        let class = UNSAFE_CLASS.load(Ordering::SeqCst);
        if class.is_null() || ORIGINAL_PARK.load(Ordering::SeqCst) == 0 {
            return;
        }
        // SAFETY: a global class reference, set before the binder exists.
        let class = unsafe { ClassRef::from_raw(class.cast()) };
        let hook = park_hook as *const () as *mut c_void;
        HOOK_BOUND.store(env.register_natives(class, &[(PARK, PARK_SIGNATURE, hook)]), Ordering::SeqCst);
    })
}

/// `Unsafe.park(boolean isAbsolute, long time)`: the original, timed when
/// a session traces parks.
unsafe extern "system" fn park_hook(env: *mut JNIEnv, this: jobject, absolute: jboolean, time: jlong) {
    // SAFETY: the hook is bound only after the original entry was found.
    let original: ParkFn = unsafe { std::mem::transmute(ORIGINAL_PARK.load(Ordering::Relaxed)) };
    if !TRACING.load(Ordering::Relaxed) {
        // SAFETY: the JVM's own entry, with the caller's arguments.
        return unsafe { original(env, this, absolute, time) };
    }
    let start = clock::monotonic_ns();
    // SAFETY: as above.
    unsafe { original(env, this, absolute, time) };
    let waited = clock::monotonic_ns().saturating_sub(start);
    if let (true, Some(vm)) = (sampled(waited), vm::get()) {
        record("Unsafe.park", vm.jvmti(), env, start, waited, jvmti_samples::ParkTimeout::of(absolute, time));
    }
}

/// The class file of `dev.jvmprofiler.boot.ParkBinder` (Java 11, version
/// 55): `private static native void bind0(long)` and
/// `static void bind(long e) { bind0(e); }` — straight-line code, so no
/// stack map is needed.
fn binder_class() -> Vec<u8> {
    fn utf8(out: &mut Vec<u8>, text: &CStr) {
        let bytes = text.to_bytes();
        out.push(1);
        out.extend((bytes.len() as u16).to_be_bytes());
        out.extend(bytes);
    }
    let u16s = |out: &mut Vec<u8>, values: &[u16]| values.iter().for_each(|v| out.extend(v.to_be_bytes()));
    let mut class = vec![0xCA, 0xFE, 0xBA, 0xBE];
    u16s(&mut class, &[0, 55, 11]); // minor, major, constant pool count + 1
    utf8(&mut class, BINDER_CLASS); // #1
    class.push(7); // #2 Class #1
    u16s(&mut class, &[1]);
    utf8(&mut class, c"java/lang/Object"); // #3
    class.push(7); // #4 Class #3
    u16s(&mut class, &[3]);
    utf8(&mut class, c"bind0"); // #5
    utf8(&mut class, c"(J)V"); // #6
    class.push(12); // #7 NameAndType #5 #6
    u16s(&mut class, &[5, 6]);
    class.push(10); // #8 Methodref #2 #7
    u16s(&mut class, &[2, 7]);
    utf8(&mut class, c"bind"); // #9
    utf8(&mut class, c"Code"); // #10
                               // public final super; this #2, super #4; no interfaces or fields; two methods.
    u16s(&mut class, &[0x0031, 2, 4, 0, 0, 2]);
    // bind0: private static native, no attributes.
    u16s(&mut class, &[0x010A, 5, 6, 0]);
    // bind: static, one Code attribute of 17 bytes: max stack 2, max
    // locals 2, 5 bytes of code (lload_0, invokestatic #8, return), no
    // exception table or attributes.
    u16s(&mut class, &[0x0008, 9, 6, 1, 10, 0, 17, 2, 2, 0, 5]);
    class.extend([0x1E, 0xB8, 0x00, 0x08, 0xB1]);
    u16s(&mut class, &[0, 0, 0]); // exception table, code attributes, class attributes
    class
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `javap` (the JDK's class-file reader) reads the binder as written.
    #[test]
    fn the_binder_class_is_a_valid_class_file() {
        let dir = std::env::temp_dir().join(format!("park-binder-{}", std::process::id()));
        let path = dir.join("dev/jvmprofiler/boot/ParkBinder.class");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, binder_class()).unwrap();
        let javap = match std::env::var("JAVA_HOME") {
            Ok(home) => std::path::PathBuf::from(home).join("bin/javap"),
            Err(_) => "javap".into(),
        };
        let output = std::process::Command::new(javap).args(["-c", "-p"]).arg(&path).output().expect("run javap");
        let text = String::from_utf8_lossy(&output.stdout);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(output.status.success(), "{text}{}", String::from_utf8_lossy(&output.stderr));
        assert!(text.contains("public final class dev.jvmprofiler.boot.ParkBinder"), "{text}");
        assert!(text.contains("private static native void bind0(long);"), "{text}");
        assert!(text.contains("static void bind(long);"), "{text}");
        assert!(text.contains("invokestatic") && text.contains("Method bind0:(J)V"), "{text}");
    }
}
