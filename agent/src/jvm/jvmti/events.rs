//! JVMTI event numbers and the `jvmtiEventCallbacks` table (slots for
//! events 50 to 86, the JDK 11+ layout; later JDKs append after it and
//! accept the shorter size we pass).

use super::jthread;
use jni::sys::{jclass, jint, jlong, jmethodID, jobject, JNIEnv};
use std::ffi::{c_char, c_void};

pub const FIRST_EVENT: usize = 50;
pub const LAST_EVENT: usize = 86;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Event {
    VmInit = 50,
    VmDeath = 51,
    ThreadStart = 52,
    ThreadEnd = 53,
    ClassFileLoadHook = 54,
    ClassLoad = 55,
    ClassPrepare = 56,
    VmStart = 57,
    CompiledMethodLoad = 68,
    MonitorContendedEnter = 75,
    MonitorContendedEntered = 76,
    GarbageCollectionFinish = 82,
    SampledObjectAlloc = 86,
}

impl Event {
    /// The events enabled while the agent is loaded; the others are
    /// enabled by the session that needs them.
    pub const ALWAYS: [Event; 8] = [
        Event::VmStart,
        Event::VmInit,
        Event::VmDeath,
        Event::ThreadStart,
        Event::ThreadEnd,
        Event::ClassLoad,
        Event::ClassPrepare,
        Event::CompiledMethodLoad,
    ];

    pub const ALL: [(Event, &'static str); 13] = [
        (Event::VmStart, "JVMTI_EVENT_VM_START"),
        (Event::VmInit, "JVMTI_EVENT_VM_INIT"),
        (Event::VmDeath, "JVMTI_EVENT_VM_DEATH"),
        (Event::ThreadStart, "JVMTI_EVENT_THREAD_START"),
        (Event::ThreadEnd, "JVMTI_EVENT_THREAD_END"),
        (Event::ClassFileLoadHook, "JVMTI_EVENT_CLASS_FILE_LOAD_HOOK"),
        (Event::ClassLoad, "JVMTI_EVENT_CLASS_LOAD"),
        (Event::ClassPrepare, "JVMTI_EVENT_CLASS_PREPARE"),
        (Event::CompiledMethodLoad, "JVMTI_EVENT_COMPILED_METHOD_LOAD"),
        (Event::MonitorContendedEnter, "JVMTI_EVENT_MONITOR_CONTENDED_ENTER"),
        (Event::MonitorContendedEntered, "JVMTI_EVENT_MONITOR_CONTENDED_ENTERED"),
        (Event::GarbageCollectionFinish, "JVMTI_EVENT_GARBAGE_COLLECTION_FINISH"),
        (Event::SampledObjectAlloc, "JVMTI_EVENT_SAMPLED_OBJECT_ALLOC"),
    ];
}

pub type JvmtiEnvPtr = *mut c_void;
pub type VmInitFn = unsafe extern "C" fn(JvmtiEnvPtr, *mut JNIEnv, jthread);
pub type VmDeathFn = unsafe extern "C" fn(JvmtiEnvPtr, *mut JNIEnv);
pub type VmStartFn = unsafe extern "C" fn(JvmtiEnvPtr, *mut JNIEnv);
pub type ThreadFn = unsafe extern "C" fn(JvmtiEnvPtr, *mut JNIEnv, jthread);
/// `ClassFileLoadHook`: (env, jni, class being redefined, loader, name,
/// protection domain, length, bytes, new length out, new bytes out).
pub type ClassFileLoadHookFn = unsafe extern "C" fn(
    JvmtiEnvPtr,
    *mut JNIEnv,
    jclass,
    jobject,
    *const c_char,
    jobject,
    jint,
    *const u8,
    *mut jint,
    *mut *mut u8,
);
pub type ClassFn = unsafe extern "C" fn(JvmtiEnvPtr, *mut JNIEnv, jthread, jclass);
pub type GarbageCollectionFn = unsafe extern "C" fn(JvmtiEnvPtr);
pub type MonitorFn = unsafe extern "C" fn(JvmtiEnvPtr, *mut JNIEnv, jthread, jobject);
pub type SampledObjectAllocFn = unsafe extern "C" fn(JvmtiEnvPtr, *mut JNIEnv, jthread, jobject, jclass, jlong);
pub type CompiledMethodLoadFn =
    unsafe extern "C" fn(JvmtiEnvPtr, jmethodID, jint, *const c_void, jint, *const c_void, *const c_void);

/// `jvmtiEventCallbacks`: one function pointer per event number.
#[repr(C)]
pub struct EventCallbacks {
    slots: [*const c_void; LAST_EVENT - FIRST_EVENT + 1],
}

impl Default for EventCallbacks {
    fn default() -> Self {
        Self { slots: [std::ptr::null(); LAST_EVENT - FIRST_EVENT + 1] }
    }
}

impl EventCallbacks {
    fn set(&mut self, event: Event, f: *const c_void) {
        self.slots[event as usize - FIRST_EVENT] = f;
    }

    pub fn vm_start(mut self, f: VmStartFn) -> Self {
        self.set(Event::VmStart, f as *const c_void);
        self
    }

    pub fn vm_init(mut self, f: VmInitFn) -> Self {
        self.set(Event::VmInit, f as *const c_void);
        self
    }

    pub fn vm_death(mut self, f: VmDeathFn) -> Self {
        self.set(Event::VmDeath, f as *const c_void);
        self
    }

    pub fn thread_start(mut self, f: ThreadFn) -> Self {
        self.set(Event::ThreadStart, f as *const c_void);
        self
    }

    pub fn thread_end(mut self, f: ThreadFn) -> Self {
        self.set(Event::ThreadEnd, f as *const c_void);
        self
    }

    pub fn class_file_load_hook(mut self, f: ClassFileLoadHookFn) -> Self {
        self.set(Event::ClassFileLoadHook, f as *const c_void);
        self
    }

    pub fn class_load(mut self, f: ClassFn) -> Self {
        self.set(Event::ClassLoad, f as *const c_void);
        self
    }

    pub fn class_prepare(mut self, f: ClassFn) -> Self {
        self.set(Event::ClassPrepare, f as *const c_void);
        self
    }

    pub fn compiled_method_load(mut self, f: CompiledMethodLoadFn) -> Self {
        self.set(Event::CompiledMethodLoad, f as *const c_void);
        self
    }

    pub fn monitor_contended_enter(mut self, f: MonitorFn) -> Self {
        self.set(Event::MonitorContendedEnter, f as *const c_void);
        self
    }

    pub fn monitor_contended_entered(mut self, f: MonitorFn) -> Self {
        self.set(Event::MonitorContendedEntered, f as *const c_void);
        self
    }

    pub fn garbage_collection_finish(mut self, f: GarbageCollectionFn) -> Self {
        self.set(Event::GarbageCollectionFinish, f as *const c_void);
        self
    }

    pub fn sampled_object_alloc(mut self, f: SampledObjectAllocFn) -> Self {
        self.set(Event::SampledObjectAlloc, f as *const c_void);
        self
    }
}
