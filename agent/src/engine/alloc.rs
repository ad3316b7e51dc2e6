//! Heap allocation sampling (`alloc=`): no signals, JVMTI samples
//! allocations itself and calls `SampledObjectAlloc` on the allocating
//! thread (see `sampling::allocation`). Arming sets the interval and
//! enables the event; disarming disables it.

use crate::jvmti::events::Event;
use crate::jvmti::Jvmti;

/// Samples allocations every `interval` bytes on average. Fails with the
/// reason on a JVM without the capability (JDK 8) or the event.
pub fn start(jvmti: Jvmti, interval: u32) -> Result<(), String> {
    let interval = i32::try_from(interval).map_err(|_| format!("alloc: {interval} bytes is too large"))?;
    jvmti.set_heap_sampling_interval(interval).map_err(|e| format!("alloc: SetHeapSamplingInterval: {e} (JDK 11+)"))?;
    jvmti
        .set_event_enabled(Event::SampledObjectAlloc, true)
        .map_err(|e| format!("alloc: cannot enable SampledObjectAlloc: {e} (JDK 11+)"))
}

/// Stops allocation sampling (callbacks already running may still record
/// into the session, which `sampling::retire` waits for).
pub fn stop(jvmti: Jvmti) {
    let _ = jvmti.set_event_enabled(Event::SampledObjectAlloc, false);
}
