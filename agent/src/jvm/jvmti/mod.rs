//! Our binding of the JVMTI functions the agent uses.
//!
//! A `jvmtiEnv*` points at a pointer to the JVMTI function table; slot `n`
//! of `jvmti.h` ("/* n : Name */") is entry `n - 1`. Each bound slot is
//! listed in [`BOUND_SLOTS`], which a test checks against
//! `$JAVA_HOME/include/jvmti.h`, together with the capability bits and
//! event numbers. All wrappers copy JVMTI-owned memory into Rust values and
//! deallocate it before returning.

pub mod capabilities;
pub mod events;

use jni::sys::{jboolean, jclass, jint, jlong, jmethodID, jobject};

/// A `java.lang.Thread` reference (`jthread` in jvmti.h).
#[allow(non_camel_case_types)]
pub type jthread = jobject;

macro_rules! jvm_handle {
    ($(#[$doc:meta])* $name:ident($raw:ty)) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $name($raw);

        impl $name {
            /// # Safety
            /// `raw` must be a valid handle of this kind for the calling thread.
            pub unsafe fn from_raw(raw: $raw) -> Self {
                Self(raw)
            }

            pub fn as_raw(self) -> $raw {
                self.0
            }
        }
    };
}

jvm_handle!(
    /// A JNI reference to a `java.lang.Class`, valid on the calling thread.
    ClassRef(jclass)
);
jvm_handle!(
    /// A JNI reference to a `java.lang.Thread`, valid on the calling thread.
    ThreadRef(jthread)
);
jvm_handle!(
    /// A jmethodID handed out by the JVM (they stay valid for the JVM's life;
    /// HotSpot reports methods of unloaded classes as invalid).
    MethodRef(jmethodID)
);
use std::ffi::{c_char, c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `JVMTI_VERSION_1_2`: the oldest version that has everything we use.
pub const JVMTI_VERSION_1_2: jint = 0x3001_0200;

/// A function-table slot: its number in `jvmti.h` and its name there.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    pub number: usize,
    pub name: &'static str,
}

macro_rules! slots {
    ($($konst:ident = $number:literal $name:literal;)*) => {
        $(pub const $konst: Slot = Slot { number: $number, name: $name };)*
        /// Every slot the agent calls.
        pub const BOUND_SLOTS: &[Slot] = &[$($konst),*];
    };
}

slots! {
    SET_EVENT_NOTIFICATION_MODE = 2 "SetEventNotificationMode";
    GET_ALL_THREADS = 4 "GetAllThreads";
    GET_THREAD_INFO = 9 "GetThreadInfo";
    GET_CURRENT_THREAD = 18 "GetCurrentThread";
    ALLOCATE = 46 "Allocate";
    DEALLOCATE = 47 "Deallocate";
    GET_CLASS_SIGNATURE = 48 "GetClassSignature";
    GET_CLASS_MODIFIERS = 51 "GetClassModifiers";
    GET_CLASS_METHODS = 52 "GetClassMethods";
    GET_METHOD_NAME = 64 "GetMethodName";
    GET_METHOD_DECLARING_CLASS = 65 "GetMethodDeclaringClass";
    GET_METHOD_MODIFIERS = 66 "GetMethodModifiers";
    GET_LINE_NUMBER_TABLE = 70 "GetLineNumberTable";
    GET_LOADED_CLASSES = 78 "GetLoadedClasses";
    GET_VERSION_NUMBER = 88 "GetVersionNumber";
    ADD_MODULE_READS = 94 "AddModuleReads";
    GET_THREAD_LOCAL_STORAGE = 102 "GetThreadLocalStorage";
    SET_THREAD_LOCAL_STORAGE = 103 "SetThreadLocalStorage";
    GET_STACK_TRACE = 104 "GetStackTrace";
    SET_JNI_FUNCTION_TABLE = 120 "SetJNIFunctionTable";
    GET_JNI_FUNCTION_TABLE = 121 "GetJNIFunctionTable";
    SET_EVENT_CALLBACKS = 122 "SetEventCallbacks";
    GET_ERROR_NAME = 128 "GetErrorName";
    GET_SYSTEM_PROPERTY = 131 "GetSystemProperty";
    GET_PHASE = 133 "GetPhase";
    ADD_CAPABILITIES = 142 "AddCapabilities";
    RETRANSFORM_CLASSES = 152 "RetransformClasses";
    SET_HEAP_SAMPLING_INTERVAL = 156 "SetHeapSamplingInterval";
}

/// A JVMTI error code with its JVMTI name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("JVMTI error {code} ({name})")]
pub struct JvmtiError {
    pub code: jint,
    pub name: String,
}

pub type JvmtiResult<T> = Result<T, JvmtiError>;

#[repr(C)]
struct RawThreadInfo {
    name: *mut c_char,
    priority: jint,
    is_daemon: jboolean,
    thread_group: jobject,
    context_class_loader: jobject,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct RawLineNumberEntry {
    start_location: jlong,
    line_number: jint,
}

/// One frame of `GetStackTrace` (`jvmtiFrameInfo`): a method and its
/// bytecode index (-1 in a native method).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameInfo {
    pub method: jmethodID,
    pub location: jlong,
}

/// One row of a method's line number table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineNumberEntry {
    pub start_bci: i64,
    pub line: i32,
}

/// Names of a method as `GetMethodName` returns them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodName {
    pub name: String,
    pub signature: String,
}

/// JNI's `RegisterNatives`.
pub type RegisterNativesFn =
    unsafe extern "system" fn(*mut jni::sys::JNIEnv, jclass, *const jni::sys::JNINativeMethod, jint) -> jint;

/// A `jvmtiEnv*`. Copyable; valid for the life of the JVM once obtained.
#[derive(Clone, Copy, Debug)]
pub struct Jvmti {
    env: *mut *const *const c_void,
}

// SAFETY: a jvmtiEnv may be used from any thread attached to the VM; the
// pointer itself is immutable.
unsafe impl Send for Jvmti {}
// SAFETY: as above; JVMTI functions are thread-safe.
unsafe impl Sync for Jvmti {}

impl Jvmti {
    /// # Safety
    /// `env` must be a `jvmtiEnv*` obtained from `JavaVM::GetEnv`.
    pub unsafe fn from_raw(env: *mut c_void) -> Self {
        Self { env: env.cast() }
    }

    pub fn as_raw(&self) -> *mut c_void {
        self.env.cast()
    }

    /// The function in `slot`, as an untyped pointer.
    fn function(&self, slot: Slot) -> *const c_void {
        // SAFETY: `env` points at the table pointer, and every bound slot
        // number is within the table of any JVMTI 1.2+ implementation.
        unsafe { *(*self.env).add(slot.number - 1) }
    }

    fn check(&self, code: jint) -> JvmtiResult<()> {
        if code == 0 {
            Ok(())
        } else {
            Err(JvmtiError { code, name: self.error_name(code) })
        }
    }

    fn error_name(&self, code: jint) -> String {
        type F = unsafe extern "C" fn(*mut c_void, jint, *mut *mut c_char) -> jint;
        let mut name = ptr::null_mut();
        // SAFETY: slot 128 has this signature in every JVMTI version.
        let f: F = unsafe { std::mem::transmute(self.function(GET_ERROR_NAME)) };
        // SAFETY: valid env and out pointer.
        if unsafe { f(self.as_raw(), code, &mut name) } != 0 || name.is_null() {
            return "unknown".to_owned();
        }
        // SAFETY: JVMTI returned a NUL-terminated string it allocated.
        unsafe { self.take_string(name) }
    }

    /// Copies and deallocates a JVMTI-allocated string.
    ///
    /// # Safety
    /// `s` must be null or a NUL-terminated string allocated by this env.
    unsafe fn take_string(&self, s: *mut c_char) -> String {
        if s.is_null() {
            return String::new();
        }
        // SAFETY: per the contract above.
        let owned = unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
        self.deallocate(s.cast());
        owned
    }

    fn deallocate(&self, memory: *mut u8) {
        type F = unsafe extern "C" fn(*mut c_void, *mut u8) -> jint;
        if memory.is_null() {
            return;
        }
        // SAFETY: slot 47 has this signature.
        let f: F = unsafe { std::mem::transmute(self.function(DEALLOCATE)) };
        // SAFETY: `memory` was allocated by this env.
        unsafe { f(self.as_raw(), memory) };
    }

    /// Copies a JVMTI-allocated array into a Vec and deallocates it.
    ///
    /// # Safety
    /// `data` must be null or point at `count` values allocated by this env.
    unsafe fn take_array<T: Copy>(&self, data: *mut T, count: jint) -> Vec<T> {
        if data.is_null() {
            return Vec::new();
        }
        // SAFETY: per the contract above.
        let v = unsafe { std::slice::from_raw_parts(data, count.max(0) as usize) }.to_vec();
        self.deallocate(data.cast());
        v
    }

    /// Calls a function whose only parameter after the env is a `jint`
    /// out pointer.
    ///
    /// # Safety
    /// `slot` must be such a function.
    unsafe fn jint_result(&self, slot: Slot) -> JvmtiResult<jint> {
        type F = unsafe extern "C" fn(*mut c_void, *mut jint) -> jint;
        let mut value = 0;
        // SAFETY: per the contract, the slot has this signature.
        let f: F = unsafe { std::mem::transmute(self.function(slot)) };
        // SAFETY: valid env and out pointer.
        self.check(unsafe { f(self.as_raw(), &mut value) })?;
        Ok(value)
    }

    /// The JVMTI version (`0x300B0000` for JDK 11, `0x30010200` for 1.2).
    pub fn version_number(&self) -> JvmtiResult<jint> {
        // SAFETY: slot 88 is `GetVersionNumber(env, jint*)`.
        unsafe { self.jint_result(GET_VERSION_NUMBER) }
    }

    pub fn phase(&self) -> JvmtiResult<jint> {
        // SAFETY: slot 133 is `GetPhase(env, jvmtiPhase*)`, a jint enum.
        unsafe { self.jint_result(GET_PHASE) }
    }

    pub fn add_capabilities(&self, caps: &capabilities::Capabilities) -> JvmtiResult<()> {
        type F = unsafe extern "C" fn(*mut c_void, *const capabilities::Capabilities) -> jint;
        // SAFETY: slot 142 has this signature.
        let f: F = unsafe { std::mem::transmute(self.function(ADD_CAPABILITIES)) };
        // SAFETY: `caps` has the layout of jvmtiCapabilities.
        self.check(unsafe { f(self.as_raw(), caps) })
    }

    pub fn set_event_callbacks(&self, callbacks: &events::EventCallbacks) -> JvmtiResult<()> {
        type F = unsafe extern "C" fn(*mut c_void, *const events::EventCallbacks, jint) -> jint;
        // SAFETY: slot 122 has this signature.
        let f: F = unsafe { std::mem::transmute(self.function(SET_EVENT_CALLBACKS)) };
        let size = std::mem::size_of::<events::EventCallbacks>() as jint;
        // SAFETY: `callbacks` has the layout of jvmtiEventCallbacks (JDK 11+).
        self.check(unsafe { f(self.as_raw(), callbacks, size) })
    }

    /// Enables or disables delivery of `event` for all threads.
    pub fn set_event_enabled(&self, event: events::Event, enabled: bool) -> JvmtiResult<()> {
        type F = unsafe extern "C" fn(*mut c_void, jint, jint, jthread, ...) -> jint;
        // SAFETY: slot 2 has this (variadic) signature.
        let f: F = unsafe { std::mem::transmute(self.function(SET_EVENT_NOTIFICATION_MODE)) };
        let mode = if enabled { 1 } else { 0 };
        // SAFETY: valid env; a null thread means all threads.
        self.check(unsafe { f(self.as_raw(), mode, event as jint, ptr::null_mut()) })
    }

    /// A copy of `bytes` in memory this env allocated, as
    /// `ClassFileLoadHook` hands new class bytes to the JVM.
    pub fn allocated_copy(&self, bytes: &[u8]) -> JvmtiResult<*mut u8> {
        type F = unsafe extern "C" fn(*mut c_void, jlong, *mut *mut u8) -> jint;
        let mut memory = ptr::null_mut();
        // SAFETY: slot 46 has this signature.
        let f: F = unsafe { std::mem::transmute(self.function(ALLOCATE)) };
        // SAFETY: valid env and out pointer.
        self.check(unsafe { f(self.as_raw(), bytes.len() as jlong, &mut memory) })?;
        // SAFETY: JVMTI allocated `bytes.len()` bytes at `memory`.
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), memory, bytes.len()) };
        Ok(memory)
    }

    /// Makes `module` read `other` (so that its classes may link to
    /// `other`'s exported ones).
    ///
    /// # Safety
    /// Both must be live references to `java.lang.Module`s.
    pub unsafe fn add_module_reads(&self, module: jobject, other: jobject) -> JvmtiResult<()> {
        type F = unsafe extern "C" fn(*mut c_void, jobject, jobject) -> jint;
        // SAFETY: slot 94 has this signature.
        let f: F = unsafe { std::mem::transmute(self.function(ADD_MODULE_READS)) };
        // SAFETY: valid env; module references, per the contract.
        self.check(unsafe { f(self.as_raw(), module, other) })
    }

    /// Has the JVM load `class` again from its class file, through
    /// `ClassFileLoadHook` (needs `can_retransform_classes`).
    pub fn retransform_class(&self, class: ClassRef) -> JvmtiResult<()> {
        type F = unsafe extern "C" fn(*mut c_void, jint, *const jclass) -> jint;
        // SAFETY: slot 152 has this signature.
        let f: F = unsafe { std::mem::transmute(self.function(RETRANSFORM_CLASSES)) };
        let classes = [class.as_raw()];
        // SAFETY: valid env and one class reference.
        self.check(unsafe { f(self.as_raw(), 1, classes.as_ptr()) })
    }

    /// The calling thread's JVMTI thread-local value (a virtual thread's
    /// own, on a virtual thread).
    pub fn thread_local(&self) -> JvmtiResult<usize> {
        type F = unsafe extern "C" fn(*mut c_void, jthread, *mut *mut c_void) -> jint;
        let mut value = ptr::null_mut();
        // SAFETY: slot 102 has this signature.
        let f: F = unsafe { std::mem::transmute(self.function(GET_THREAD_LOCAL_STORAGE)) };
        // SAFETY: valid env; a null thread is the current one.
        self.check(unsafe { f(self.as_raw(), ptr::null_mut(), &mut value) })?;
        Ok(value as usize)
    }

    /// Sets the calling thread's JVMTI thread-local value.
    pub fn set_thread_local(&self, value: usize) -> JvmtiResult<()> {
        type F = unsafe extern "C" fn(*mut c_void, jthread, *const c_void) -> jint;
        // SAFETY: slot 103 has this signature.
        let f: F = unsafe { std::mem::transmute(self.function(SET_THREAD_LOCAL_STORAGE)) };
        // SAFETY: valid env; a null thread is the current one; the value is
        // only stored.
        self.check(unsafe { f(self.as_raw(), ptr::null_mut(), value as *const c_void) })
    }

    /// The calling thread's java.lang.Thread (a local reference).
    pub fn current_thread(&self) -> JvmtiResult<ThreadRef> {
        type F = unsafe extern "C" fn(*mut c_void, *mut jthread) -> jint;
        let mut thread = ptr::null_mut();
        // SAFETY: slot 18 has this signature.
        let f: F = unsafe { std::mem::transmute(self.function(GET_CURRENT_THREAD)) };
        // SAFETY: valid env and out pointer.
        self.check(unsafe { f(self.as_raw(), &mut thread) })?;
        Ok(ThreadRef(thread))
    }

    /// Every live platform thread (local references).
    pub fn all_threads(&self) -> JvmtiResult<Vec<ThreadRef>> {
        // SAFETY: slot 4 is `GetAllThreads(env, jint*, jthread**)`.
        Ok(unsafe { self.references(GET_ALL_THREADS) }?.into_iter().map(ThreadRef).collect())
    }

    /// Calls a function of the shape `(env, jint* count, jobject** refs)`
    /// and takes the array of local references it allocates.
    ///
    /// # Safety
    /// `slot` must have that signature.
    unsafe fn references(&self, slot: Slot) -> JvmtiResult<Vec<jobject>> {
        type F = unsafe extern "C" fn(*mut c_void, *mut jint, *mut *mut jobject) -> jint;
        let (mut count, mut refs) = (0, ptr::null_mut());
        // SAFETY: the caller promises the signature.
        let f: F = unsafe { std::mem::transmute(self.function(slot)) };
        // SAFETY: valid env and out pointers.
        self.check(unsafe { f(self.as_raw(), &mut count, &mut refs) })?;
        // SAFETY: JVMTI allocated `count` references, local to this thread.
        Ok(unsafe { self.take_array(refs, count) })
    }

    /// The Java name of `thread`.
    pub fn thread_name(&self, thread: ThreadRef) -> JvmtiResult<String> {
        type F = unsafe extern "C" fn(*mut c_void, jthread, *mut RawThreadInfo) -> jint;
        let mut info = RawThreadInfo {
            name: ptr::null_mut(),
            priority: 0,
            is_daemon: false,
            thread_group: ptr::null_mut(),
            context_class_loader: ptr::null_mut(),
        };
        // SAFETY: slot 9 has this signature.
        let f: F = unsafe { std::mem::transmute(self.function(GET_THREAD_INFO)) };
        // SAFETY: valid env, thread reference and out struct.
        self.check(unsafe { f(self.as_raw(), thread.as_raw(), &mut info) })?;
        // SAFETY: JVMTI allocated the name.
        Ok(unsafe { self.take_string(info.name) })
    }

    /// The calling thread's Java frames, innermost first, into `frames`
    /// (its length is the most taken), less the innermost `skip`. Returns
    /// how many were filled.
    pub fn own_stack_trace(&self, skip: u8, frames: &mut [FrameInfo]) -> JvmtiResult<usize> {
        type F = unsafe extern "C" fn(*mut c_void, jthread, jint, jint, *mut FrameInfo, *mut jint) -> jint;
        let max = jint::try_from(frames.len()).unwrap_or(jint::MAX);
        let mut count = 0;
        // SAFETY: slot 104 has this signature.
        let f: F = unsafe { std::mem::transmute(self.function(GET_STACK_TRACE)) };
        // SAFETY: valid env; a null thread is the current one; `frames`
        // holds `max` entries.
        self.check(unsafe { f(self.as_raw(), ptr::null_mut(), skip.into(), max, frames.as_mut_ptr(), &mut count) })?;
        Ok(usize::try_from(count).unwrap_or(0).min(frames.len()))
    }

    /// Samples heap allocations every `bytes` on average (JDK 11+;
    /// `SampledObjectAlloc` delivers them); 0 samples every allocation.
    pub fn set_heap_sampling_interval(&self, bytes: jint) -> JvmtiResult<()> {
        type F = unsafe extern "C" fn(*mut c_void, jint) -> jint;
        // SAFETY: slot 156 has this signature (JDK 11+; the caller checks
        // the capability first, which older JVMs do not grant).
        let f: F = unsafe { std::mem::transmute(self.function(SET_HEAP_SAMPLING_INTERVAL)) };
        // SAFETY: valid env.
        self.check(unsafe { f(self.as_raw(), bytes) })
    }

    /// Runs `f` with JNI's `RegisterNatives` replaced by `hook` in every
    /// thread's function table, then puts the original back. The original
    /// is stored in `original` before any thread can reach `hook`, which
    /// forwards the calls that are not its concern there.
    pub fn with_register_natives_hook<R>(
        &self,
        hook: RegisterNativesFn,
        original: &AtomicUsize,
        f: impl FnOnce() -> R,
    ) -> JvmtiResult<R> {
        type Get = unsafe extern "C" fn(*mut c_void, *mut *mut jni::sys::JNINativeInterface_) -> jint;
        type Set = unsafe extern "C" fn(*mut c_void, *const jni::sys::JNINativeInterface_) -> jint;
        let mut table = ptr::null_mut();
        // SAFETY: slots 121 and 120 have these signatures.
        let (get, set) = unsafe {
            (
                std::mem::transmute::<*const c_void, Get>(self.function(GET_JNI_FUNCTION_TABLE)),
                std::mem::transmute::<*const c_void, Set>(self.function(SET_JNI_FUNCTION_TABLE)),
            )
        };
        // SAFETY: valid env and out pointer.
        self.check(unsafe { get(self.as_raw(), &mut table) })?;
        // SAFETY: JVMTI returned a copy of the table, ours to change and free.
        let copy = unsafe { &mut *table };
        // SAFETY: the table is a JNI 1.1+ table, so its v1_1 view is valid.
        let jvm_register = unsafe { copy.v1_1.RegisterNatives };
        original.store(jvm_register as usize, Ordering::SeqCst);
        copy.v1_1.RegisterNatives = hook;
        // SAFETY: a complete function table; the JVM copies it.
        let installed = self.check(unsafe { set(self.as_raw(), copy) });
        let result = installed.map(|()| f());
        copy.v1_1.RegisterNatives = jvm_register;
        // SAFETY: as above, now with the original entry.
        let restored = self.check(unsafe { set(self.as_raw(), copy) });
        let result = result.and_then(|r| restored.map(|()| r));
        self.deallocate(table.cast());
        result
    }

    pub fn loaded_classes(&self) -> JvmtiResult<Vec<ClassRef>> {
        // SAFETY: slot 78 is `GetLoadedClasses(env, jint*, jclass**)`.
        Ok(unsafe { self.references(GET_LOADED_CLASSES) }?.into_iter().map(ClassRef).collect())
    }

    /// The class's methods. Calling this makes HotSpot create a jmethodID
    /// for each, which AsyncGetCallTrace needs to report the method.
    pub fn class_methods(&self, class: ClassRef) -> JvmtiResult<Vec<MethodRef>> {
        type F = unsafe extern "C" fn(*mut c_void, jclass, *mut jint, *mut *mut jmethodID) -> jint;
        let (mut count, mut methods) = (0, ptr::null_mut());
        // SAFETY: slot 52 has this signature.
        let f: F = unsafe { std::mem::transmute(self.function(GET_CLASS_METHODS)) };
        // SAFETY: valid env, class reference and out pointers.
        self.check(unsafe { f(self.as_raw(), class.as_raw(), &mut count, &mut methods) })?;
        // SAFETY: JVMTI allocated `count` method ids.
        Ok(unsafe { self.take_array(methods, count) }.into_iter().map(MethodRef).collect())
    }

    /// A system property of the VM (`java.version`, `sun.java.command`).
    pub fn system_property(&self, name: &std::ffi::CStr) -> JvmtiResult<String> {
        type F = unsafe extern "C" fn(*mut c_void, *const c_char, *mut *mut c_char) -> jint;
        let mut value = ptr::null_mut();
        // SAFETY: slot 131 has this signature.
        let f: F = unsafe { std::mem::transmute(self.function(GET_SYSTEM_PROPERTY)) };
        // SAFETY: valid env, NUL-terminated name and out pointer.
        self.check(unsafe { f(self.as_raw(), name.as_ptr(), &mut value) })?;
        // SAFETY: JVMTI allocated the string.
        Ok(unsafe { self.take_string(value) })
    }

    /// The JVM signature of a class (`Ljava/lang/String;`).
    pub fn class_signature(&self, class: ClassRef) -> JvmtiResult<String> {
        type F = unsafe extern "C" fn(*mut c_void, jclass, *mut *mut c_char, *mut *mut c_char) -> jint;
        let mut signature = ptr::null_mut();
        // SAFETY: slot 48 has this signature.
        let f: F = unsafe { std::mem::transmute(self.function(GET_CLASS_SIGNATURE)) };
        // SAFETY: valid env and class; a null generic pointer is allowed.
        self.check(unsafe { f(self.as_raw(), class.as_raw(), &mut signature, ptr::null_mut()) })?;
        // SAFETY: JVMTI allocated the string.
        Ok(unsafe { self.take_string(signature) })
    }

    pub fn class_modifiers(&self, class: ClassRef) -> JvmtiResult<jint> {
        type F = unsafe extern "C" fn(*mut c_void, jclass, *mut jint) -> jint;
        let mut modifiers = 0;
        // SAFETY: slot 51 has this signature.
        let f: F = unsafe { std::mem::transmute(self.function(GET_CLASS_MODIFIERS)) };
        // SAFETY: valid env, class and out pointer.
        self.check(unsafe { f(self.as_raw(), class.as_raw(), &mut modifiers) })?;
        Ok(modifiers)
    }

    pub fn method_name(&self, method: MethodRef) -> JvmtiResult<MethodName> {
        type F =
            unsafe extern "C" fn(*mut c_void, jmethodID, *mut *mut c_char, *mut *mut c_char, *mut *mut c_char) -> jint;
        let (mut name, mut signature) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: slot 64 has this signature.
        let f: F = unsafe { std::mem::transmute(self.function(GET_METHOD_NAME)) };
        // SAFETY: valid env and out pointers; HotSpot checks the method id.
        self.check(unsafe { f(self.as_raw(), method.as_raw(), &mut name, &mut signature, ptr::null_mut()) })?;
        // SAFETY: JVMTI allocated both strings.
        Ok(MethodName { name: unsafe { self.take_string(name) }, signature: unsafe { self.take_string(signature) } })
    }

    /// The declaring class, as a local reference of the calling thread.
    pub fn method_declaring_class(&self, method: MethodRef) -> JvmtiResult<ClassRef> {
        type F = unsafe extern "C" fn(*mut c_void, jmethodID, *mut jclass) -> jint;
        let mut class = ptr::null_mut();
        // SAFETY: slot 65 has this signature.
        let f: F = unsafe { std::mem::transmute(self.function(GET_METHOD_DECLARING_CLASS)) };
        // SAFETY: valid env and out pointer.
        self.check(unsafe { f(self.as_raw(), method.as_raw(), &mut class) })?;
        Ok(ClassRef(class))
    }

    pub fn method_modifiers(&self, method: MethodRef) -> JvmtiResult<jint> {
        type F = unsafe extern "C" fn(*mut c_void, jmethodID, *mut jint) -> jint;
        let mut modifiers = 0;
        // SAFETY: slot 66 has this signature.
        let f: F = unsafe { std::mem::transmute(self.function(GET_METHOD_MODIFIERS)) };
        // SAFETY: valid env and out pointer.
        self.check(unsafe { f(self.as_raw(), method.as_raw(), &mut modifiers) })?;
        Ok(modifiers)
    }

    /// The line number table; empty for native and abstract methods or
    /// classes compiled without line numbers.
    pub fn line_number_table(&self, method: MethodRef) -> JvmtiResult<Vec<LineNumberEntry>> {
        type F = unsafe extern "C" fn(*mut c_void, jmethodID, *mut jint, *mut *mut RawLineNumberEntry) -> jint;
        const ABSENT_INFORMATION: jint = 101;
        const NATIVE_METHOD: jint = 104;
        let (mut count, mut table) = (0, ptr::null_mut());
        // SAFETY: slot 70 has this signature.
        let f: F = unsafe { std::mem::transmute(self.function(GET_LINE_NUMBER_TABLE)) };
        // SAFETY: valid env and out pointers.
        let code = unsafe { f(self.as_raw(), method.as_raw(), &mut count, &mut table) };
        if code == ABSENT_INFORMATION || code == NATIVE_METHOD {
            return Ok(Vec::new());
        }
        self.check(code)?;
        // SAFETY: JVMTI allocated `count` entries.
        let raw = unsafe { self.take_array(table, count) };
        Ok(raw.iter().map(|e| LineNumberEntry { start_bci: e.start_location, line: e.line_number }).collect())
    }
}

/// `Lcom/foo/Bar;` → `com/foo/Bar`; array signatures stay as they are.
pub fn internal_class_name(signature: &str) -> &str {
    signature.strip_prefix('L').and_then(|s| s.strip_suffix(';')).unwrap_or(signature)
}

#[cfg(test)]
pub(crate) mod tests;
