//! The in-process JVM profiler's agent: everything but the code that runs
//! in signal handlers (the `sampler` crate). Folders by where code runs,
//! each importing only the ones listed after it
//! (`tests/layering.rs` checks):
//!
//! - `ffi`: the JVM's entry points, JVMTI callbacks and the Java API's
//!   natives, panics caught at the boundary;
//! - `session`: a profiling session's start, stop and dump, and the
//!   overhead governor on its ticker;
//! - `recording`: samples into JFR chunks, files, periods, and their
//!   shipping to backends (`export`);
//! - `args`: options parsed into typed `Options`, and the plans decided
//!   from them once (events, stacks, exporters);
//! - `engine`: what makes samples arrive (signal timers, JVMTI events, the
//!   park hook, the native allocation hooks);
//! - `callbacks`: code that runs on Java threads inside JVM callbacks, and
//!   the session state it reads, published beside the sampler;
//! - `jvm`: the JVMTI and JNI bindings, the VM handle, Java threads;
//! - `libraries`: the process's loaded objects, read from their files;
//! - `log`.

pub mod args;
pub mod callbacks;
pub mod engine;
pub mod ffi;
pub mod jvm;
pub mod libraries;
pub mod log;
pub mod recording;
pub mod session;
