//! Samples JVMTI delivers instead of signals: heap allocations (`alloc=`;
//! JVMTI samples them itself and calls `SampledObjectAlloc` on the
//! allocating thread) and contended monitor waits (`lock=`;
//! `MonitorContendedEnter`/`Entered`), recorded by `jvmti_samples`.
//! Arming sets the interval and enables the events; disarming disables
//! them.

use crate::jvmti::events::Event;
use crate::jvmti::Jvmti;

/// Samples allocations every `interval` bytes on average. Fails with the
/// reason on a JVM without the capability (JDK 8) or the event.
pub fn arm_alloc(jvmti: Jvmti, interval: u32) -> Result<(), String> {
    let interval = i32::try_from(interval).map_err(|_| format!("alloc: {interval} bytes is too large"))?;
    jvmti.set_heap_sampling_interval(interval).map_err(|e| format!("alloc: SetHeapSamplingInterval: {e} (JDK 11+)"))?;
    enable(jvmti, Event::SampledObjectAlloc).map_err(|e| format!("alloc: {e}"))
}

/// Delivers contended monitor waits.
pub fn arm_lock(jvmti: Jvmti) -> Result<(), String> {
    enable(jvmti, Event::MonitorContendedEnter)
        .and_then(|()| enable(jvmti, Event::MonitorContendedEntered))
        .map_err(|e| format!("lock: {e}"))
}

fn enable(jvmti: Jvmti, event: Event) -> Result<(), String> {
    jvmti.set_event_enabled(event, true).map_err(|e| format!("cannot enable {event:?}: {e}"))
}

/// Stops both (callbacks already running may still record into the
/// session, which `sampling::retire` waits for).
pub fn disarm(jvmti: Jvmti) {
    for event in [Event::SampledObjectAlloc, Event::MonitorContendedEnter, Event::MonitorContendedEntered] {
        let _ = jvmti.set_event_enabled(event, false);
    }
}
