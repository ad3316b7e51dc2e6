//! Samples JVMTI delivers instead of signals: heap allocations (`alloc=`;
//! JVMTI samples them itself and calls `SampledObjectAlloc` on the
//! allocating thread) and contended monitor waits (`lock=`;
//! `MonitorContendedEnter`/`Entered`, with `java.util.concurrent` locks
//! from the [`park`] hook), recorded by `jvmti_samples`. Arming sets the
//! interval and enables the events; disarming disables them.

use super::park;
use crate::callbacks::jvmti_samples::{self, LockSampling};
use crate::jvm::jni_env::JniEnv;
use crate::jvm::jvmti::events::Event;
use crate::jvm::jvmti::Jvmti;
use crate::log;

/// Samples allocations every `interval` bytes on average, counting
/// garbage collections for `live`. Fails with the reason on a JVM without
/// the capability (JDK 8) or the event.
pub fn arm_alloc(jvmti: Jvmti, interval: u32, live: bool) -> Result<(), String> {
    let interval = i32::try_from(interval).map_err(|_| format!("alloc: {interval} bytes is too large"))?;
    jvmti.set_heap_sampling_interval(interval).map_err(|e| format!("alloc: SetHeapSamplingInterval: {e} (JDK 11+)"))?;
    if live {
        enable(jvmti, Event::GarbageCollectionFinish).map_err(|e| format!("live: {e}"))?;
    }
    enable(jvmti, Event::SampledObjectAlloc).map_err(|e| format!("alloc: {e}"))
}

/// Delivers contended monitor waits and, given the calling thread's
/// `env`, parks on `java.util.concurrent` locks (without them, with a
/// warning saying why, if `Unsafe.park` cannot be hooked), virtual
/// threads' too unless `virtual_threads` is `Some(false)`. From JDK 24,
/// where a virtual thread blocked on a monitor unmounts and may enter on
/// another carrier, monitor waits' starts are kept in JVMTI's thread-local
/// values.
pub fn arm_lock(
    jvmti: Jvmti,
    env: Option<JniEnv>,
    lock: LockSampling,
    virtual_threads: Option<bool>,
) -> Result<(), String> {
    let major = jvmti.version_number().map(crate::jvm::jdk_support::major).unwrap_or(0);
    jvmti_samples::keep_wait_starts_in_jvmti(major >= UNMOUNTED_MONITORS_SINCE);
    enable(jvmti, Event::MonitorContendedEnter)
        .and_then(|()| enable(jvmti, Event::MonitorContendedEntered))
        .map_err(|e| format!("lock: {e}"))?;
    let parks = env
        .ok_or_else(|| "no JNI environment on this thread".to_owned())
        .and_then(|env| park::arm(jvmti, env, lock, virtual_threads));
    if let Err(e) = parks {
        log::warn!("lock: java.util.concurrent locks are not profiled ({e}); Java monitors are");
    }
    Ok(())
}

/// JDK 24 unmounts a virtual thread blocked on a monitor.
const UNMOUNTED_MONITORS_SINCE: u32 = 24;

fn enable(jvmti: Jvmti, event: Event) -> Result<(), String> {
    jvmti.set_event_enabled(event, true).map_err(|e| format!("cannot enable {event:?}: {e}"))
}

/// Stops both (callbacks already running may still record into the
/// session, which `callbacks::retire` waits for).
pub fn disarm(jvmti: Jvmti) {
    park::disarm();
    jvmti_samples::keep_wait_starts_in_jvmti(false);
    for event in [
        Event::SampledObjectAlloc,
        Event::GarbageCollectionFinish,
        Event::MonitorContendedEnter,
        Event::MonitorContendedEntered,
    ] {
        let _ = jvmti.set_event_enabled(event, false);
    }
}
