//! The native half of the Java API (`dev.jvmprofiler.JavaProfiler`).
//!
//! The functions are exported under their JNI names, for when Java loads
//! this library itself, and also bound with `RegisterNatives` when the
//! class is prepared in a JVM whose agent was loaded with `-agentpath` or
//! `jcmd` (JNI would not look in an agent library otherwise). Every entry
//! catches panics; failures travel back as `kind\nmessage` strings that the
//! Java side turns into exceptions.

use crate::args;
use crate::callbacks;
use crate::ffi::entry::adopt_calling_thread;
use crate::ffi::ffi_boundary;
use crate::jvm::jni_env::JniEnv;
use crate::jvm::jvmti::{ClassRef, Jvmti};
use crate::recording::endpoints::endpoints;
use crate::session::{self, CommandResult, ErrorKind};
use jni::sys::{jboolean, jclass, jint, jlong, jstring, JNIEnv};
use sampler::context;
use sampler::counters;
use sampler::os_thread::current_tid;
use std::ffi::{c_void, CStr};

pub const CLASS_SIGNATURE: &str = "Ldev/jvmprofiler/JavaProfiler;";

/// The calling thread's env, naming the thread first if it predates the agent.
///
/// # Safety
/// `env` is the JNIEnv a native method received.
unsafe fn env(env: *mut JNIEnv) -> Option<JniEnv> {
    // SAFETY: per the contract.
    let env = unsafe { JniEnv::from_raw(env) };
    env.inspect(|e| adopt_calling_thread(*e))
}

/// A String argument of a native method (`None` for null).
///
/// # Safety
/// `s` is a `String` argument the native method received with `env`.
unsafe fn java_string(env: Option<JniEnv>, s: jstring) -> Option<String> {
    // SAFETY: per the contract, a live local reference of this thread.
    env.and_then(|e| unsafe { e.string(s) })
}

fn encode(result: CommandResult<String>) -> String {
    match result {
        Ok(message) => format!("ok\n{message}"),
        Err(e) => {
            let kind = match e.kind {
                ErrorKind::Argument => "argument",
                ErrorKind::State => "state",
                ErrorKind::Io => "io",
            };
            format!("{kind}\n{}", e.message)
        }
    }
}

fn reply(env: Option<JniEnv>, text: &str) -> jstring {
    env.map_or(std::ptr::null_mut(), |e| e.new_string(text))
}

extern "system" fn is_agent_loaded(_env: *mut JNIEnv, _class: jclass) -> jboolean {
    true
}

extern "system" fn execute(raw: *mut JNIEnv, _class: jclass, command: jstring) -> jstring {
    ffi_boundary("JavaProfiler.execute", std::ptr::null_mut(), || {
        // SAFETY: the arguments of this native method.
        let env = unsafe { env(raw) };
        // SAFETY: a String argument of this native method.
        let text = unsafe { java_string(env, command) }.unwrap_or_default();
        let result = match args::parse(&text) {
            Ok(options) => session::execute(&options, env),
            Err(e) => Err(session::CommandError { kind: ErrorKind::Argument, message: format!("invalid option {e}") }),
        };
        reply(env, &encode(result))
    })
}

extern "system" fn dump(raw: *mut JNIEnv, _class: jclass, path: jstring) -> jstring {
    ffi_boundary("JavaProfiler.dump", std::ptr::null_mut(), || {
        // SAFETY: the arguments of this native method.
        let env = unsafe { env(raw) };
        // SAFETY: a String argument of this native method.
        let path = unsafe { java_string(env, path) }.unwrap_or_default();
        reply(env, &encode(session::dump_to(Some(path.into()), env)))
    })
}

extern "system" fn counters(raw: *mut JNIEnv, _class: jclass) -> jstring {
    ffi_boundary("JavaProfiler.getDebugCounters", std::ptr::null_mut(), || {
        let text: String = counters::snapshot().iter().map(|(name, value)| format!("{name}={value}\n")).collect();
        // SAFETY: the env of this native method.
        reply(unsafe { env(raw) }, &text)
    })
}

extern "system" fn finished_files(raw: *mut JNIEnv, _class: jclass) -> jstring {
    ffi_boundary("JavaProfiler.pollFinishedFiles", std::ptr::null_mut(), || {
        let text: String = session::take_finished_files().iter().map(|path| format!("{}\n", path.display())).collect();
        // SAFETY: the env of this native method.
        reply(unsafe { env(raw) }, &text)
    })
}

extern "system" fn set_context(raw: *mut JNIEnv, _class: jclass, span_id: jlong, root_span_id: jlong) {
    ffi_boundary("JavaProfiler.setContext", (), || {
        // SAFETY: the env of this native method.
        unsafe { env(raw) };
        let _ = context::set_spans(span_id as u64, root_span_id as u64);
    })
}

extern "system" fn clear_context(_env: *mut JNIEnv, _class: jclass) {
    ffi_boundary("JavaProfiler.clearContext", (), || {
        let _ = context::clear();
    })
}

extern "system" fn set_context_value(raw: *mut JNIEnv, _class: jclass, slot: jint, value: jstring) -> jstring {
    ffi_boundary("JavaProfiler.setContextValue", std::ptr::null_mut(), || {
        // SAFETY: the arguments of this native method.
        let env = unsafe { env(raw) };
        // SAFETY: a String argument of this native method.
        let value = unsafe { java_string(env, value) };
        let slot = usize::try_from(slot).unwrap_or(usize::MAX);
        match context::set_value(slot, value.as_deref(), context::attribute_count()) {
            Ok(()) => std::ptr::null_mut(),
            Err(message) => reply(env, &message),
        }
    })
}

extern "system" fn record_trace_root(
    raw: *mut JNIEnv,
    _class: jclass,
    root_span_id: jlong,
    endpoint: jstring,
    operation: jstring,
    size_limit: jint,
) -> jboolean {
    ffi_boundary("JavaProfiler.recordTraceRoot", false, || {
        if !callbacks::is_published() {
            return false;
        }
        // SAFETY: the arguments of this native method.
        let env = unsafe { env(raw) };
        // SAFETY: String arguments of this native method.
        let labels = unsafe { (java_string(env, endpoint), java_string(env, operation)) };
        let (Some(endpoint), Some(operation)) = labels else {
            return false;
        };
        let limit = u32::try_from(size_limit).unwrap_or(0);
        // Recorded while the session's callback state is published: `stop`
        // hides it and waits for such calls before its final rotation, so an
        // event lands in this session's last chunk, or is refused, or (a
        // `stop` that writes nothing) is dropped by the next `start`;
        // never in the next session's first chunk. No session lock is
        // taken: request threads do not wait for a dump (only, briefly,
        // for the endpoint store's swap of its pending events).
        callbacks::with_active(|_| {
            endpoints().is_ok_and(|e| e.record(current_tid(), root_span_id as u64, &endpoint, &operation, limit))
        })
        .unwrap_or(false)
    })
}

extern "system" fn filter_thread(raw: *mut JNIEnv, _class: jclass, add: jboolean) {
    ffi_boundary("JavaProfiler.addThread", (), || {
        // SAFETY: the env of this native method.
        unsafe { env(raw) };
        let _ = context::filter_thread(add);
    })
}

type Natives = [(&'static CStr, &'static CStr, *mut c_void); 10];

fn natives() -> Natives {
    [
        (c"isAgentLoaded0", c"()Z", is_agent_loaded as *mut c_void),
        (c"execute0", c"(Ljava/lang/String;)Ljava/lang/String;", execute as *mut c_void),
        (c"dump0", c"(Ljava/lang/String;)Ljava/lang/String;", dump as *mut c_void),
        (c"counters0", c"()Ljava/lang/String;", counters as *mut c_void),
        (c"finishedFiles0", c"()Ljava/lang/String;", finished_files as *mut c_void),
        (c"setContext0", c"(JJ)V", set_context as *mut c_void),
        (c"clearContext0", c"()V", clear_context as *mut c_void),
        (c"setContextValue0", c"(ILjava/lang/String;)Ljava/lang/String;", set_context_value as *mut c_void),
        (c"recordTraceRoot0", c"(JLjava/lang/String;Ljava/lang/String;I)Z", record_trace_root as *mut c_void),
        (c"filterThread0", c"(Z)V", filter_thread as *mut c_void),
    ]
}

/// Binds the natives if `class` is the API class.
pub fn bind_if_api_class(jvmti: Jvmti, env: JniEnv, class: ClassRef) {
    if jvmti.class_signature(class).is_ok_and(|s| s == CLASS_SIGNATURE) && !env.register_natives(class, &natives()) {
        crate::log::warn!("cannot bind the Java API's native methods");
    }
}

/// Binds the natives if the API class is already loaded (runtime attach).
pub fn bind_loaded(jvmti: Jvmti, env: JniEnv) {
    let _ = env.with_loaded_classes(jvmti, |classes| {
        for class in classes {
            bind_if_api_class(jvmti, env, class);
        }
    });
}

macro_rules! exported {
    ($($name:ident => $f:ident ($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        $(
            /// JNI entry point for `dev.jvmprofiler.JavaProfiler` (see the module docs).
            #[no_mangle]
            pub extern "system" fn $name(env: *mut JNIEnv, class: jclass, $($arg: $ty),*) -> $ret {
                $f(env, class, $($arg),*)
            }
        )*
    };
}

exported! {
    Java_dev_jvmprofiler_JavaProfiler_isAgentLoaded0 => is_agent_loaded() -> jboolean;
    Java_dev_jvmprofiler_JavaProfiler_execute0 => execute(command: jstring) -> jstring;
    Java_dev_jvmprofiler_JavaProfiler_dump0 => dump(path: jstring) -> jstring;
    Java_dev_jvmprofiler_JavaProfiler_counters0 => counters() -> jstring;
    Java_dev_jvmprofiler_JavaProfiler_finishedFiles0 => finished_files() -> jstring;
    Java_dev_jvmprofiler_JavaProfiler_setContext0 => set_context(span_id: jlong, root_span_id: jlong) -> ();
    Java_dev_jvmprofiler_JavaProfiler_clearContext0 => clear_context() -> ();
    Java_dev_jvmprofiler_JavaProfiler_setContextValue0 => set_context_value(slot: jint, value: jstring) -> jstring;
    Java_dev_jvmprofiler_JavaProfiler_recordTraceRoot0 =>
        record_trace_root(root_span_id: jlong, endpoint: jstring, operation: jstring, size_limit: jint) -> jboolean;
    Java_dev_jvmprofiler_JavaProfiler_filterThread0 => filter_thread(add: jboolean) -> ();
}
