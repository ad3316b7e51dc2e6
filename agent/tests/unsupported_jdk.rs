//! On a JDK the agent does not support (JDK 8, whose JVMTI is version 1.2;
//! no JDK 8 runtime is available to test with), every entry point returns
//! after asking the JVMTI version, without calling anything else: a
//! stand-in JavaVM whose JVMTI environment answers GetVersionNumber only,
//! every other function counting the call. `-agentpath` lets the JVM start
//! without the agent; attach and `System.load` fail.

use jni::sys::{jint, JavaVM, JNI_ERR, JNI_OK};
use profiler_agent::ffi::entry::{Agent_OnAttach, Agent_OnLoad, JNI_OnLoad};
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

/// The version GetVersionNumber reports.
static VERSION: AtomicI32 = AtomicI32::new(0);
/// Calls of any other JVMTI or invocation function.
static OTHER_CALLS: AtomicUsize = AtomicUsize::new(0);

/// Any function the agent must not call here: counted, answers an error.
unsafe extern "C" fn other() -> jint {
    OTHER_CALLS.fetch_add(1, Ordering::SeqCst);
    JNI_ERR
}

/// `jvmtiEnv::GetVersionNumber` (slot 88).
unsafe extern "C" fn get_version_number(_env: *mut c_void, version: *mut jint) -> jint {
    // SAFETY: the agent passes a valid out pointer.
    unsafe { *version = VERSION.load(Ordering::SeqCst) };
    0
}

/// A JVMTI function table (156 slots in JDK 8's jvmti.h; room for more).
struct Jvmti {
    table: Box<[usize; 192]>,
    env: Box<*const usize>,
}

impl Jvmti {
    fn new() -> Jvmti {
        let mut table = Box::new([other as *const () as usize; 192]);
        table[88 - 1] = get_version_number as *const () as usize;
        let env = Box::new(table.as_ptr());
        Jvmti { table, env }
    }
}

/// The environment GetEnv hands out.
static ENV: AtomicUsize = AtomicUsize::new(0);

/// `JavaVM::GetEnv`: the stand-in JVMTI environment.
unsafe extern "C" fn get_env(_vm: *mut JavaVM, env: *mut *mut c_void, _version: jint) -> jint {
    // SAFETY: the agent passes a valid out pointer.
    unsafe { *env = ENV.load(Ordering::SeqCst) as *mut c_void };
    JNI_OK
}

#[test]
fn jdk_8_gets_one_message_and_no_other_call() {
    let jvmti = Jvmti::new();
    ENV.store(&*jvmti.env as *const *const usize as usize, Ordering::SeqCst);
    // The invocation interface: 3 reserved words, DestroyJavaVM,
    // AttachCurrentThread, DetachCurrentThread, GetEnv, AttachCurrentThreadAsDaemon.
    let mut invoke = [other as *const () as usize; 8];
    invoke[6] = get_env as *const () as usize;
    let invoke_table: *const usize = invoke.as_ptr();
    let vm = &invoke_table as *const *const usize as *mut JavaVM;

    VERSION.store(0x3001_0200, Ordering::SeqCst);
    let options = c"start,cpu=10ms,file=/dev/null";
    // SAFETY: a JavaVM whose GetEnv gives a JVMTI environment, a valid option string.
    assert_eq!(unsafe { Agent_OnLoad(vm, options.as_ptr(), ptr::null_mut()) }, JNI_OK, "the JVM starts");
    // SAFETY: as above.
    assert_eq!(unsafe { Agent_OnAttach(vm, options.as_ptr(), ptr::null_mut()) }, JNI_ERR, "attach fails");
    // SAFETY: as above.
    assert_eq!(unsafe { JNI_OnLoad(vm, ptr::null_mut()) }, JNI_ERR, "System.load fails");
    assert_eq!(OTHER_CALLS.load(Ordering::SeqCst), 0, "only GetEnv and GetVersionNumber were called");
    assert!(jvmti.table.len() > 156);
}
