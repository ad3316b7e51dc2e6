//! The library's exported entry points and JVMTI event callbacks: every
//! call from the JVM enters here, and no panic leaves.

use crate::args::{self, Action, Options};
use crate::callbacks;
use crate::callbacks::jvmti_samples;
use crate::callbacks::live_objects;
use crate::engine;
use crate::ffi::ffi_boundary;
use crate::ffi::java_api;
use crate::jvm::jni_env::JniEnv;
use crate::jvm::jvmti::events::EventCallbacks;
use crate::jvm::jvmti::{jthread, ClassRef, ThreadRef};
use crate::jvm::threads;
use crate::jvm::vm::{self, Vm, JNI_VERSION};
use crate::log;
use crate::session;
use jni::sys::{jclass, jint, jlong, jmethodID, jobject, JNIEnv, JavaVM, JNI_ERR, JNI_OK};
use sampler::clock;
use sampler::context;
use sampler::os_thread::current_tid;
use sampler::signals::SignalBlocker;
use std::ffi::{c_char, c_void, CStr};

fn options_string(options: *const c_char) -> String {
    if options.is_null() {
        return String::new();
    }
    // SAFETY: the JVM passes a NUL-terminated option string.
    unsafe { CStr::from_ptr(options) }.to_string_lossy().into_owned()
}

/// Where a command's answer goes: the `reply=` file when the option string
/// names one (`jprofile` reads it), else the JVM's stdout (messages) and
/// stderr (errors), or only the log (`Shown::Logged`).
struct Answer<'a> {
    reply: Option<&'a str>,
    shown: Shown,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Shown {
    /// A command a person typed (`-agentpath`, attach): its message is printed.
    Printed,
    /// A command carried out later (a `start` at VM init): its message is logged.
    Logged,
}

impl<'a> Answer<'a> {
    fn to(options_text: &'a str, shown: Shown) -> Self {
        Self { reply: args::reply_path(options_text), shown }
    }

    fn message(&self, text: &str) {
        if text.is_empty() || self.replied(text) {
            return;
        }
        match self.shown {
            Shown::Printed => println!("{text}"),
            Shown::Logged => log::info!("{text}"),
        }
    }

    fn error(&self, text: &str) {
        let line = format!("[profiler] ERROR: {text}");
        if !self.replied(&line) {
            eprintln!("{line}");
        }
    }

    /// Writes the answer to the `reply=` file; false when there is none or
    /// it cannot be written (the answer is then printed as without one).
    fn replied(&self, text: &str) -> bool {
        let Some(path) = self.reply else { return false };
        match std::fs::write(path, format!("{text}\n")) {
            Ok(()) => true,
            Err(e) => {
                log::warn!("reply={}: cannot write the answer there ({e})", args::echo(path));
                false
            }
        }
    }

    fn options(&self, text: &str) -> Option<Options> {
        match args::parse(text) {
            Ok(options) => {
                log::configure(options.log_level, options.log_file.as_deref());
                Some(options)
            }
            Err(e) => {
                self.error(&format!("invalid agent option {e}"));
                None
            }
        }
    }

    fn report(&self, result: Result<String, session::CommandError>) -> jint {
        match result {
            Ok(message) => {
                self.message(&message);
                JNI_OK
            }
            Err(e) => {
                self.error(&e.to_string());
                JNI_ERR
            }
        }
    }
}

/// `-agentpath:libprofiler.so=<options>`. Invalid options, and a `start`
/// whose `file=` cannot take a recording, make the JVM refuse to start,
/// with the reason on stderr; on a JDK the agent does not
/// support (before 11) it says so once and the JVM starts without it.
///
/// # Safety
/// Called by the JVM with its `JavaVM*` and a NUL-terminated option string.
#[no_mangle]
pub unsafe extern "C" fn Agent_OnLoad(vm: *mut JavaVM, options: *const c_char, _reserved: *mut c_void) -> jint {
    ffi_boundary("Agent_OnLoad", JNI_ERR, || {
        let text = options_string(options);
        let answer = Answer::to(&text, Shown::Printed);
        let Some(mut options) = answer.options(&text) else {
            return JNI_ERR;
        };
        // SAFETY: the JavaVM* given to this entry point.
        if let Err(e) = unsafe { vm::init(vm, callbacks) } {
            answer.error(&e.to_string());
            return if matches!(e, vm::InitError::UnsupportedJdk(_)) { JNI_OK } else { JNI_ERR };
        }
        match options.action {
            Some(Action::Start) => {
                if let Err(e) = session::prepare_output(&mut options) {
                    answer.error(&e.to_string());
                    return JNI_ERR;
                }
                session::defer_start(options);
                JNI_OK
            }
            Some(Action::Stop | Action::Dump) => {
                answer.error("stop and dump need a running profiler (use them through jcmd or the Java API)");
                JNI_ERR
            }
            _ => answer.report(session::execute(&options, None)),
        }
    })
}

/// `jcmd <pid> JVMTI.agent_load <path> "<options>"`. Invalid options are
/// reported and the JVM keeps running untouched.
///
/// # Safety
/// Called by the JVM with its `JavaVM*` and a NUL-terminated option string.
#[no_mangle]
pub unsafe extern "C" fn Agent_OnAttach(vm: *mut JavaVM, options: *const c_char, _reserved: *mut c_void) -> jint {
    ffi_boundary("Agent_OnAttach", JNI_ERR, || {
        let text = options_string(options);
        let answer = Answer::to(&text, Shown::Printed);
        let Some(options) = answer.options(&text) else {
            return JNI_ERR;
        };
        // SAFETY: the JavaVM* given to this entry point.
        let vm = match unsafe { vm::init(vm, callbacks) } {
            Ok(vm) => vm,
            Err(e) => {
                answer.error(&e.to_string());
                return JNI_ERR;
            }
        };
        // SAFETY: the attach listener thread's own env.
        let env = unsafe { JniEnv::from_raw(vm.current_env()) };
        if let Some(env) = env {
            java_api::bind_loaded(vm.jvmti(), env);
        }
        answer.report(session::execute(&options, env))
    })
}

/// `System.load` of this library (the Java API).
///
/// # Safety
/// Called by the JVM with its `JavaVM*`.
#[no_mangle]
pub unsafe extern "C" fn JNI_OnLoad(vm: *mut JavaVM, _reserved: *mut c_void) -> jint {
    // SAFETY: the JavaVM* given to this entry point.
    ffi_boundary("JNI_OnLoad", JNI_ERR, || match unsafe { vm::init(vm, callbacks) } {
        Ok(_) => JNI_VERSION,
        Err(e) => {
            eprintln!("[profiler] ERROR: {e}");
            JNI_ERR
        }
    })
}

fn callbacks() -> EventCallbacks {
    EventCallbacks::default()
        .vm_start(on_vm_start)
        .vm_init(on_vm_init)
        .vm_death(on_vm_death)
        .thread_start(on_thread_start)
        .thread_end(on_thread_end)
        .class_load(on_class_load)
        .class_file_load_hook(engine::park::virtual_threads::class_file_load_hook)
        .class_prepare(on_class_prepare)
        .compiled_method_load(on_compiled_method_load)
        .monitor_contended_enter(on_monitor_contended_enter)
        .monitor_contended_entered(on_monitor_contended_entered)
        .sampled_object_alloc(on_sampled_object_alloc)
        .garbage_collection_finish(on_garbage_collection_finish)
}

/// Registers the calling Java thread under its Java name and id.
fn name_calling_thread(vm: &Vm, env: Option<JniEnv>, thread: ThreadRef) -> u32 {
    let name = vm.jvmti().thread_name(thread).ok();
    let java_id = env.and_then(|e| e.java_thread_id(thread)).unwrap_or(0);
    let tid = current_tid();
    threads::java_thread_started(tid, name, java_id);
    tid
}

/// # Safety
/// `env` and `thread` are what a JVMTI thread callback received.
unsafe fn register_java_thread(env: *mut JNIEnv, thread: jthread) {
    let Some(vm) = vm::get() else { return };
    // SAFETY: per the contract, both belong to the calling thread.
    let (env, thread) = unsafe { (JniEnv::from_raw(env), ThreadRef::from_raw(thread)) };
    engine::thread_started(name_calling_thread(vm, env, thread));
}

thread_local! {
    static ADOPTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Names a Java thread that was running before the agent loaded (so no
/// ThreadStart told us about it) when it first calls the Java API.
pub(crate) fn adopt_calling_thread(env: JniEnv) {
    if ADOPTED.replace(true) {
        return;
    }
    let Some(vm) = vm::get() else { return };
    env.with_local_frame(4, || {
        if let Ok(thread) = vm.jvmti().current_thread() {
            name_calling_thread(vm, Some(env), thread);
        }
    });
}

/// Creates `MethodHandle`'s jmethodIDs as soon as JNI works, before Java
/// code can link a method handle. HotSpot's method-handle intrinsics
/// (`invokeBasic`, `linkTo*`, made at run time for each call shape) have
/// the idnum of `MethodHandle`'s first method, so the first id made for
/// one of them (CompiledMethodLoad reports their compiled wrappers, making
/// ids for them) takes that method's slot for good, naming it and every
/// intrinsic read through it as that one call shape: JRuby's start-up (a
/// module path: no archived module graph) did so before VMInit.
unsafe extern "C" fn on_vm_start(_jvmti: *mut c_void, env: *mut JNIEnv) {
    ffi_boundary("VMStart", (), || {
        let Some(vm) = vm::get() else { return };
        // SAFETY: the VMStart thread's own env.
        let Some(env) = (unsafe { JniEnv::from_raw(env) }) else { return };
        env.with_local_frame(4, || {
            if let Some(class) = env.find_class(c"java/lang/invoke/MethodHandle") {
                let _ = vm.jvmti().class_methods(class);
            }
        });
    })
}

unsafe extern "C" fn on_vm_init(_jvmti: *mut c_void, env: *mut JNIEnv, thread: jthread) {
    ffi_boundary("VMInit", (), || {
        // SAFETY: the arguments of this callback.
        unsafe { register_java_thread(env, thread) };
        if let Some(options) = session::take_deferred_start() {
            // SAFETY: the VMInit thread's own env.
            let env = unsafe { JniEnv::from_raw(env) };
            let reply = options.reply.as_deref();
            Answer { reply, shown: Shown::Logged }.report(session::execute(&options, env));
        }
    })
}

unsafe extern "C" fn on_vm_death(_jvmti: *mut c_void, env: *mut JNIEnv) {
    ffi_boundary("VMDeath", (), || {
        // SAFETY: the VMDeath thread's own env.
        session::on_vm_death(unsafe { JniEnv::from_raw(env) });
    })
}

unsafe extern "C" fn on_thread_start(_jvmti: *mut c_void, env: *mut JNIEnv, thread: jthread) {
    // SAFETY: the arguments of this callback.
    ffi_boundary("ThreadStart", (), || unsafe { register_java_thread(env, thread) })
}

/// Releases the ending thread's per-thread records (its CPU timer or perf
/// event, its context slot) with the profiling signals blocked, so no
/// handler can run on this thread between unregistering and releasing.
unsafe extern "C" fn on_thread_end(_jvmti: *mut c_void, _env: *mut JNIEnv, _thread: jthread) {
    ffi_boundary("ThreadEnd", (), thread_exiting)
}

/// The calling thread is ending: releases its per-thread records with the
/// profiling signals blocked across unregister-and-release.
pub fn thread_exiting() {
    let tid = current_tid();
    let _blocked = SignalBlocker::block();
    engine::thread_ended(tid);
    context::release_thread(tid);
    threads::thread_ended(tid);
}

/// Enabling ClassLoad events is what lets AsyncGetCallTrace run at all.
unsafe extern "C" fn on_class_load(_jvmti: *mut c_void, _env: *mut JNIEnv, _thread: jthread, _class: jclass) {}

/// Creates the class's jmethodIDs now, so samples can name its methods.
unsafe extern "C" fn on_class_prepare(_jvmti: *mut c_void, env: *mut JNIEnv, _thread: jthread, class: jclass) {
    ffi_boundary("ClassPrepare", (), || {
        if let Some(vm) = vm::get() {
            // SAFETY: the class reference and env this callback received.
            let (class, env) = unsafe { (ClassRef::from_raw(class), JniEnv::from_raw(env)) };
            let _ = vm.jvmti().class_methods(class);
            if let Some(env) = env {
                java_api::bind_if_api_class(vm.jvmti(), env, class);
            }
        }
    })
}

/// A sampled heap allocation (`alloc=`), on the allocating thread.
unsafe extern "C" fn on_sampled_object_alloc(
    _jvmti: *mut c_void,
    env: *mut JNIEnv,
    _thread: jthread,
    object: jobject,
    class: jclass,
    size: jlong,
) {
    ffi_boundary("SampledObjectAlloc", (), || {
        let Some(vm) = vm::get() else { return };
        // SAFETY: the class reference and env this callback received.
        let (class, env) = unsafe { (ClassRef::from_raw(class), JniEnv::from_raw(env)) };
        let (time_ns, tid) = (clock::monotonic_ns(), current_tid());
        let size = u64::try_from(size).unwrap_or(0);
        callbacks::with_active(|state| {
            // SAFETY: the object reference this callback received.
            unsafe { jvmti_samples::record_allocation(state, &vm.jvmti(), env, object, class, size, time_ns, tid) }
        });
    })
}

/// A garbage collection finished (`live`: objects' ages count them).
unsafe extern "C" fn on_garbage_collection_finish(_jvmti: *mut c_void) {
    live_objects::collection_finished();
}

/// The calling thread begins waiting for a contended monitor (`lock=`).
unsafe extern "C" fn on_monitor_contended_enter(
    jvmti: *mut c_void,
    _env: *mut JNIEnv,
    _thread: jthread,
    _object: jobject,
) {
    // SAFETY: the jvmtiEnv the JVM passes to its callback.
    let jvmti = unsafe { crate::jvm::jvmti::Jvmti::from_raw(jvmti) };
    ffi_boundary("MonitorContendedEnter", (), || jvmti_samples::contended_enter(&jvmti))
}

/// The calling thread entered the monitor it waited for (`lock=`).
unsafe extern "C" fn on_monitor_contended_entered(
    _jvmti: *mut c_void,
    env: *mut JNIEnv,
    _thread: jthread,
    object: jobject,
) {
    ffi_boundary("MonitorContendedEntered", (), || {
        let Some(vm) = vm::get() else { return };
        // SAFETY: the env this callback received.
        let Some(env) = (unsafe { JniEnv::from_raw(env) }) else { return };
        let tid = current_tid();
        callbacks::with_active(|state| {
            // SAFETY: the monitor reference this callback received.
            unsafe { jvmti_samples::contended_entered(state, &vm.jvmti(), env, object, tid) }
        });
    })
}

/// Enabled so HotSpot records debug information at non-safepoint pcs,
/// which makes AsyncGetCallTrace's line numbers precise.
unsafe extern "C" fn on_compiled_method_load(
    _jvmti: *mut c_void,
    _method: jmethodID,
    _code_size: jint,
    _code_addr: *const c_void,
    _map_length: jint,
    _map: *const c_void,
    _compile_info: *const c_void,
) {
}
