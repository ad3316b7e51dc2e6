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
//! `java.lang.Thread.eetop` (its JavaThread*). The result, a property of
//! the JVM, is kept for later sessions (by the agent's `Vm`); each
//! session's published state carries a copy ([`JavaThreads`]), which is
//! all the handler reads.

use super::safe_read::safe_load;
use jni_sys::JNIEnv;

/// Keys tried: glibc's PTHREAD_KEYS_MAX.
const MAX_KEYS: u32 = 1024;
/// A JNIEnv further than this into its JavaThread would be implausible.
const MAX_OFFSET: u64 = 4096;

/// Where a thread's JavaThread and JNIEnv are, found on this JVM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JavaThreadKey {
    /// The pthread key holding the current `Thread*`.
    key: libc::pthread_key_t,
    /// The JNIEnv's offset inside its JavaThread.
    env_offset: u64,
    /// The JNI function table every JNIEnv of the VM starts with.
    functions: u64,
}

/// Finds the pthread key and JNIEnv offset on the calling Java thread
/// (`env` is its JNIEnv, `eetop` reads its `Thread.eetop`). Not
/// signal-safe.
pub fn discover(env: *mut JNIEnv, eetop: impl FnOnce() -> Option<i64>) -> Result<JavaThreadKey, String> {
    let thread = eetop().ok_or("cannot read Thread.eetop")? as u64;
    let raw = env as u64;
    let env_offset =
        raw.checked_sub(thread).filter(|&o| o < MAX_OFFSET).ok_or("the JNIEnv is not inside its thread")?;
    // SAFETY: pthread_getspecific only reads the calling thread's key table.
    let key = (0..MAX_KEYS)
        .map(|k| k as libc::pthread_key_t)
        .find(|&k| unsafe { libc::pthread_getspecific(k) } as u64 == thread)
        .ok_or("no pthread key holds the current JavaThread")?;
    // SAFETY: a JNIEnv is a pointer to the function table.
    let functions = unsafe { *(raw as *const u64) };
    Ok(JavaThreadKey { key, env_offset, functions })
}

impl JavaThreadKey {
    /// The calling thread's `JavaThread*`, or 0 if it is not a Java thread.
    /// Signal-safe: no TLS, no allocation, a fault-safe read.
    pub fn current_thread(&self) -> u64 {
        // SAFETY: reads the calling thread's key table only.
        let thread = unsafe { libc::pthread_getspecific(self.key) } as u64;
        if thread == 0 {
            return 0;
        }
        // A JavaThread embeds a JNIEnv that starts with the VM's function table.
        match safe_load(thread.wrapping_add(self.env_offset)) {
            Some(table) if table == self.functions => thread,
            _ => 0,
        }
    }

    /// The calling thread's JNIEnv, or null if it is not a Java thread.
    /// Signal-safe: no TLS, no allocation, a fault-safe read.
    pub fn current_env(&self) -> *mut JNIEnv {
        match self.current_thread() {
            0 => std::ptr::null_mut(),
            thread => thread.wrapping_add(self.env_offset) as *mut JNIEnv,
        }
    }
}

/// How the handler finds the interrupted thread's JavaThread and JNIEnv.
#[derive(Clone, Copy, Debug)]
pub enum JavaThreads {
    /// TLS-free, through the discovered key.
    Key(JavaThreadKey),
    /// Through a function returning the JNIEnv (the JVM's `GetEnv` when
    /// discovery failed: not TLS-free; a stand-in in tests); it finds no
    /// JavaThread.
    EnvFunction(fn() -> *mut JNIEnv),
}

impl JavaThreads {
    /// The calling thread's `JavaThread*`, or 0. Signal-safe.
    pub fn current_thread(&self) -> u64 {
        match self {
            Self::Key(key) => key.current_thread(),
            Self::EnvFunction(_) => 0,
        }
    }

    /// The calling thread's JNIEnv, or null if it is not attached.
    /// Signal-safe with [`Self::Key`].
    pub fn current_env(&self) -> *mut JNIEnv {
        match self {
            Self::Key(key) => key.current_env(),
            Self::EnvFunction(env) => env(),
        }
    }
}
