//! What several suites build the same way.

use sampler::asgct::AsgctFn;
use sampler::java_thread::JavaThreads;
use sampler::origin::Origins;
use sampler::storage::samples::SampleStripes;
use sampler::storage::trace_storage::CallTraceStorage;
use sampler::thread_state::BlockingMethods;
use sampler::Sampler;
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
        context: sampler::context::init().unwrap(),
        blocking: BlockingMethods::default(),
        nativemem: None,
        idle: None,
    }
}
