//! The in-process JVM profiler.
//!
//! Layout by where code runs: `sampling` (and the `storage` it writes to)
//! runs inside signal handlers and obeys their rules, and `os_thread` (the
//! calling thread's kernel id) serves handlers and control plane alike;
//! everything else is control plane: entry points and JVMTI callbacks
//! (`entry`), the option parser (`args`) and the stack plan it produces
//! from `cstack=` (`stack_plan`), the session (`profiler`), engines arming
//! signals (`engine`), the session's periodic thread (`ticker`), and the
//! recording that turns samples into JFR (`recording`).

pub mod args;
pub mod callback_state;
pub mod engine;
pub mod entry;
pub mod event_plan;
pub mod existing_threads;
pub mod export;
pub mod governor;
pub mod java_api;
pub mod jdk_support;
pub mod jni_env;
pub mod jvmti;
pub mod jvmti_samples;
pub mod libraries;
pub mod live_objects;
pub mod log;
pub mod nativemem;
pub mod profiler;
pub mod recording;
pub mod stack_plan;
pub mod threads;
pub mod ticker;
pub mod vm;
