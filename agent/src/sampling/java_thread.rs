//! The interrupted thread's JNIEnv, found without thread-local storage.
//!
//! `JavaVM::GetEnv` reads HotSpot's `__thread` variable, and in a shared
//! library that goes through `__tls_get_addr`, which may call `malloc` to
//! grow the thread's TLS vector (a thread's first access, or the first
//! after any `dlopen` of a library with TLS). A signal that interrupted
//! `malloc` then deadlocks in the handler. HotSpot also keeps the current
//! `Thread*` under a pthread key, and a JavaThread embeds its JNIEnv at a
//! fixed offset, so the handler reads `pthread_getspecific(key) + offset`
//! instead and accepts it only if it starts with the JNI function table,
//! which every JNIEnv of the VM shares.
//!
//! The key and the offset are found once by the control plane on a Java
//! thread ([`discover`]): the key is the one holding the thread's
//! `java.lang.Thread.eetop` (its JavaThread*).

use super::safe_read::safe_load;
use crate::jni_env::JniEnv;
use jni::sys::JNIEnv;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const UNKNOWN: u32 = u32::MAX;
/// Keys tried: glibc's PTHREAD_KEYS_MAX.
const MAX_KEYS: u32 = 1024;
/// A JNIEnv further than this into its JavaThread would be implausible.
const MAX_OFFSET: u64 = 4096;

static KEY: AtomicU32 = AtomicU32::new(UNKNOWN);
static ENV_OFFSET: AtomicU64 = AtomicU64::new(0);
static FUNCTIONS: AtomicU64 = AtomicU64::new(0);

/// Finds the pthread key and JNIEnv offset on the calling Java thread.
/// Idempotent.
pub fn discover(env: JniEnv) -> Result<(), String> {
    if KEY.load(Ordering::SeqCst) != UNKNOWN {
        return Ok(());
    }
    let thread = env.current_thread_eetop().ok_or("cannot read Thread.eetop")? as u64;
    let raw = env.as_raw() as u64;
    let offset = raw.checked_sub(thread).filter(|&o| o < MAX_OFFSET).ok_or("the JNIEnv is not inside its thread")?;
    // SAFETY: pthread_getspecific only reads the calling thread's key table.
    let key = (0..MAX_KEYS)
        .find(|&k| unsafe { libc::pthread_getspecific(k as libc::pthread_key_t) } as u64 == thread)
        .ok_or("no pthread key holds the current JavaThread")?;
    // SAFETY: a JNIEnv is a pointer to the function table.
    let functions = unsafe { *(raw as *const u64) };
    FUNCTIONS.store(functions, Ordering::SeqCst);
    ENV_OFFSET.store(offset, Ordering::SeqCst);
    KEY.store(key, Ordering::SeqCst);
    Ok(())
}

/// Whether [`current_env`] can answer (discovery succeeded).
pub fn discovered() -> bool {
    KEY.load(Ordering::SeqCst) != UNKNOWN
}

/// The calling thread's `JavaThread*`, or 0 if it is not a Java thread (or
/// discovery failed). Signal-safe: no TLS, no allocation, a fault-safe read.
pub fn current_thread() -> u64 {
    let key = KEY.load(Ordering::Relaxed);
    if key == UNKNOWN {
        return 0;
    }
    // SAFETY: reads the calling thread's key table only.
    let thread = unsafe { libc::pthread_getspecific(key as libc::pthread_key_t) } as u64;
    if thread == 0 {
        return 0;
    }
    // A JavaThread embeds a JNIEnv that starts with the VM's function table.
    match safe_load(thread + ENV_OFFSET.load(Ordering::Relaxed)) {
        Some(table) if table == FUNCTIONS.load(Ordering::Relaxed) => thread,
        _ => 0,
    }
}

/// The calling thread's JNIEnv, or null if it is not a Java thread (or
/// discovery failed). Signal-safe: no TLS, no allocation, a fault-safe read.
pub fn current_env() -> *mut JNIEnv {
    match current_thread() {
        0 => std::ptr::null_mut(),
        thread => (thread + ENV_OFFSET.load(Ordering::Relaxed)) as *mut JNIEnv,
    }
}
