//! The JVM this agent lives in: its `JavaVM*`, our JVMTI environment and
//! AsyncGetCallTrace. Set up once, on the first of `Agent_OnLoad`,
//! `Agent_OnAttach` or `JNI_OnLoad`, and never torn down.

use crate::jvm::jdk_support;
use crate::jvm::jvmti::capabilities::{self, Capabilities};
use crate::jvm::jvmti::events::{Event, EventCallbacks};
use crate::jvm::jvmti::{Jvmti, JVMTI_VERSION_1_2};
use crate::libraries::file_map::FileMap;
use crate::libraries::{scan, symbols};
use crate::log;
use hotspot::tables::VmTables;
use hotspot::JavaSegmentWalker;
use jni::sys::{jint, JNIEnv, JavaVM, JNI_OK};
use sampler::asgct::AsgctFn;
use sampler::java_thread::JavaThreadKey;
use sampler::safe_read::ProcessMemory;
use std::ffi::{c_void, CStr, CString};
use std::ptr;
use std::sync::OnceLock;

pub const JNI_VERSION: jint = 0x0001_0008;

pub struct Vm {
    java_vm: *mut JavaVM,
    jvmti: Jvmti,
    asgct: Option<AsgctFn>,
    /// libjvm's VMStructs tables, read on first use (they never change).
    tables: OnceLock<Result<VmTables, String>>,
    /// Where a thread's JavaThread and JNIEnv are, once a start found it
    /// (a property of the JVM: later sessions keep it).
    java_thread_key: OnceLock<JavaThreadKey>,
}

// SAFETY: `JavaVM*` and `jvmtiEnv*` are process-wide and thread-safe.
unsafe impl Send for Vm {}
// SAFETY: as above.
unsafe impl Sync for Vm {}

/// The JVM the agent was loaded into, set once at load: it outlives every
/// session.
static VM: OnceLock<Vm> = OnceLock::new();

/// The VM, once [`init`] has run. Signal-safe (an atomic load).
pub fn get() -> Option<&'static Vm> {
    VM.get()
}

/// Why [`init`] failed.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// A JDK the agent does not support ([`jdk_support`]): nothing was set up.
    #[error("{0}")]
    UnsupportedJdk(String),
    #[error("{0}")]
    Failed(String),
}

/// Keeps this library mapped for the life of the process: the JVMTI
/// environment made below calls into it, and JDK 21+ unloads an agent
/// library whose `Agent_OnAttach` fails (a refused `start` through jcmd),
/// which would leave those callbacks pointing at unmapped code.
fn pin_library() {
    // SAFETY: an all-zero Dl_info is a valid out parameter.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: the address of a function of this library and a valid out
    // pointer.
    let found = unsafe { libc::dladdr(pin_library as *const () as *const c_void, &mut info) } != 0;
    if found && !info.dli_fname.is_null() {
        // SAFETY: the path the loader reported for this library, already
        // loaded (RTLD_NOLOAD): this only marks it never to be unloaded.
        let handle = unsafe { libc::dlopen(info.dli_fname, libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE) };
        if handle.is_null() {
            crate::log::warn!("cannot pin the agent library in memory; a failed attach may unload it");
        }
    }
}

/// Sets up our JVMTI environment, on a supported JDK only: capabilities,
/// event callbacks, events. Idempotent; later calls return the first result.
///
/// # Safety
/// `java_vm` must be the `JavaVM*` the JVM passed to an entry point.
pub unsafe fn init(java_vm: *mut JavaVM, callbacks: fn() -> EventCallbacks) -> Result<&'static Vm, InitError> {
    if let Some(vm) = VM.get() {
        return Ok(vm);
    }
    pin_library();
    let mut env: *mut c_void = ptr::null_mut();
    // SAFETY: per the contract, a valid JavaVM*.
    let rc = unsafe { ((**java_vm).v1_2.GetEnv)(java_vm, &mut env, JVMTI_VERSION_1_2) };
    if rc != JNI_OK || env.is_null() {
        return Err(InitError::UnsupportedJdk(format!(
            "JVMTI 1.2 is not available (GetEnv returned {rc}): the profiler needs JDK {} or newer and does \
             nothing in this JVM",
            jdk_support::OLDEST_SUPPORTED
        )));
    }
    // SAFETY: GetEnv returned a jvmtiEnv*.
    let jvmti = unsafe { Jvmti::from_raw(env) };
    let version = jvmti.version_number().map_err(|e| InitError::Failed(format!("GetVersionNumber: {e}")))?;
    jdk_support::check(version).map_err(InitError::UnsupportedJdk)?;
    for &capability in capabilities::REQUESTED {
        if let Err(e) = jvmti.add_capabilities(&Capabilities::default().with(capability)) {
            log::warn!("capability {} unavailable: {e}", capability.name);
        }
    }
    jvmti.set_event_callbacks(&callbacks()).map_err(|e| InitError::Failed(format!("SetEventCallbacks: {e}")))?;
    for event in Event::ALWAYS {
        if let Err(e) = jvmti.set_event_enabled(event, true) {
            log::warn!("cannot enable JVMTI event {event:?}: {e}");
        }
    }
    let symbol = libjvm_symbol(java_vm, c"AsyncGetCallTrace");
    // SAFETY: the symbol, when present, is AsyncGetCallTrace with this ABI.
    let asgct = (!symbol.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, AsgctFn>(symbol) });
    if asgct.is_none() {
        log::warn!("AsyncGetCallTrace not found in libjvm: Java stacks will not be collected");
    }
    Ok(VM.get_or_init(|| Vm { java_vm, jvmti, asgct, tables: OnceLock::new(), java_thread_key: OnceLock::new() }))
}

/// A symbol of the library that implements the JavaVM function table
/// (libjvm), whether or not it was loaded RTLD_GLOBAL; null if absent.
fn libjvm_symbol(java_vm: *mut JavaVM, name: &CStr) -> *mut c_void {
    // SAFETY: dlsym with a NUL-terminated name; a null result is handled.
    let symbol = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if !symbol.is_null() {
        return symbol;
    }
    let Some(path) = libjvm_path(java_vm).and_then(|p| CString::new(p).ok()) else {
        return ptr::null_mut();
    };
    // SAFETY: RTLD_NOLOAD only returns an already loaded library.
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: as above.
    unsafe { libc::dlsym(handle, name.as_ptr()) }
}

/// The runtime address of a symbol libjvm does not export, from its
/// file's symbol table (which Temurin builds keep); `None` if it has none.
fn libjvm_local_symbol(java_vm: *mut JavaVM, name: &str) -> Option<u64> {
    let path = libjvm_path(java_vm)?;
    let map = FileMap::open(&path).ok()?;
    let link_address = symbols::link_address_of(map.bytes(), name)?;
    let (objects, _) = scan::loaded_objects();
    let libjvm = objects.iter().find(|o| o.path == path)?;
    libjvm.bias.checked_add(link_address)
}

/// The file of the library that implements the JavaVM function table.
fn libjvm_path(java_vm: *mut JavaVM) -> Option<String> {
    // SAFETY: Dl_info is plain C data (pointers); all zeroes is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: GetEnv's address lies in libjvm; dladdr only reads it.
    let get_env = unsafe { (**java_vm).v1_2.GetEnv } as *const c_void;
    // SAFETY: valid address and out struct.
    if unsafe { libc::dladdr(get_env, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr gave a NUL-terminated name that lives with the library.
    Some(unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned())
}

impl Vm {
    pub fn jvmti(&self) -> Jvmti {
        self.jvmti
    }

    /// The JavaThread lookup an earlier start found, if any.
    pub fn java_thread_key(&self) -> Option<JavaThreadKey> {
        self.java_thread_key.get().copied()
    }

    /// Keeps `key` for later starts; returns the one kept (the first).
    pub fn remember_java_thread_key(&self, key: JavaThreadKey) -> JavaThreadKey {
        *self.java_thread_key.get_or_init(|| key)
    }

    pub fn asgct(&self) -> Option<AsgctFn> {
        self.asgct
    }

    /// libjvm's VMStructs tables. Not signal-safe.
    /// Needs the fault handlers installed (the first call reads them).
    pub fn vm_tables(&self) -> Result<&VmTables, String> {
        let lookup = |name: &str| {
            let c_name = CString::new(name).ok()?;
            let symbol = libjvm_symbol(self.java_vm, &c_name);
            if symbol.is_null() {
                libjvm_local_symbol(self.java_vm, name)
            } else {
                Some(symbol as u64)
            }
        };
        self.tables.get_or_init(|| VmTables::read(&lookup, &ProcessMemory)).as_ref().map_err(Clone::clone)
    }

    /// The walker of this JVM's Java segments, from libjvm's VMStructs
    /// tables. Not signal-safe; call after VM init (the code cache must
    /// exist).
    pub fn java_segment_walker(&self) -> Result<JavaSegmentWalker, String> {
        JavaSegmentWalker::from_tables(self.vm_tables()?, &ProcessMemory)
    }

    /// The calling thread's JNIEnv, or null if it is not attached.
    /// Signal-safe in HotSpot (a thread-local read), as async-profiler relies on.
    #[inline]
    pub fn current_env(&self) -> *mut JNIEnv {
        let mut env: *mut c_void = ptr::null_mut();
        // SAFETY: valid JavaVM*; GetEnv writes the out pointer or leaves it null.
        let rc = unsafe { ((**self.java_vm).v1_2.GetEnv)(self.java_vm, &mut env, JNI_VERSION) };
        if rc == JNI_OK {
            env.cast()
        } else {
            ptr::null_mut()
        }
    }

    /// Attaches the calling (Rust-created) thread as a daemon thread with
    /// the given Java name and returns its JNIEnv.
    pub fn attach_daemon(&self, name: &CStr) -> Result<*mut JNIEnv, String> {
        #[repr(C)]
        struct AttachArgs {
            version: jint,
            name: *const std::ffi::c_char,
            group: *mut c_void,
        }
        let mut args = AttachArgs { version: JNI_VERSION, name: name.as_ptr(), group: ptr::null_mut() };
        let mut env: *mut c_void = ptr::null_mut();
        // SAFETY: valid JavaVM*, out pointer and JavaVMAttachArgs layout.
        let rc = unsafe {
            ((**self.java_vm).v1_4.AttachCurrentThreadAsDaemon)(
                self.java_vm,
                &mut env,
                (&mut args as *mut AttachArgs).cast(),
            )
        };
        if rc == JNI_OK {
            Ok(env.cast())
        } else {
            Err(format!("AttachCurrentThreadAsDaemon returned {rc}"))
        }
    }

    pub fn detach_current(&self) {
        // SAFETY: valid JavaVM*; detaching an unattached thread is a no-op error.
        unsafe { ((**self.java_vm).v1_1.DetachCurrentThread)(self.java_vm) };
    }
}
