//! What several suites build the same way.

use profiler_agent::sampling::asgct::AsgctFn;
use profiler_agent::sampling::java_thread::JavaThreads;
use profiler_agent::sampling::origin::Origins;
use profiler_agent::sampling::thread_state::BlockingMethods;
use profiler_agent::sampling::Sampler;
use profiler_agent::storage::samples::SampleStripes;
use profiler_agent::storage::trace_storage::CallTraceStorage;
use std::sync::Arc;

/// A sampler whose Java stacks come from `asgct` (at most `max_depth`
/// frames), on threads that all count as attached (a non-null JNIEnv), with
/// nothing else on: no native unwinding, HotSpot walker, walk verification,
/// thread filter, native memory or JVMTI samples.
pub fn asgct_sampler(traces: CallTraceStorage, stripes: SampleStripes, max_depth: usize, asgct: AsgctFn) -> Sampler {
    Sampler {
        traces,
        stripes,
        max_depth,
        asgct: Some(asgct),
        threads: JavaThreads::EnvFunction(|| std::ptr::NonNull::dangling().as_ptr()),
        native: None,
        hotspot: None,
        verify_walk: false,
        origins: Arc::new(Origins::new().unwrap()),
        filter: false,
        context: profiler_agent::context::init().unwrap(),
        blocking: BlockingMethods::default(),
        nativemem: None,
        jvmti_samples: None,
        idle: None,
    }
}
