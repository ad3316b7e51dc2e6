//! What the JVM's callbacks and the agent's hooks read of the session —
//! JVMTI's sampled allocations and contended monitors, the park hook and
//! the virtual threads' park timer, the Java API's endpoints, the
//! `dlopen` hook — published beside the sampler, under an in-flight count
//! of its own. They run on Java threads, where JVMTI may be called and
//! memory allocated, so their state stays out of what handlers see.

pub mod jvmti_samples;
pub mod live_objects;

use crate::libraries::LibraryTable;
use jvmti_samples::JvmtiSamples;
use sampler::publication::Publication;
use sampler::Sampler;
use std::sync::Arc;

/// One session's state as callbacks see it.
pub struct CallbackState {
    /// The session's sampler: callbacks record into its stores.
    pub sampler: Arc<Sampler>,
    /// Samples JVMTI delivers (`alloc=`, `lock=`), if on.
    pub jvmti: Option<JvmtiSamples>,
    /// The library table the native unwinder's snapshots come from
    /// (`cstack=` with native frames), if any.
    pub libraries: Option<Arc<LibraryTable>>,
}

/// The session's callback state, while one runs: the one place callbacks
/// find it (they run on any Java thread, and outlive sessions).
static ACTIVE: Publication<CallbackState> = Publication::new();

/// Makes `state` visible to callbacks. The caller keeps its `Arc` alive
/// until [`retire`] returns.
pub fn publish(state: &Arc<CallbackState>) {
    ACTIVE.publish(state);
}

/// Hides the state from callbacks and returns once none is using it.
pub fn retire() {
    ACTIVE.retire();
}

/// Whether a session's state is published: a hint ([`with_active`] alone
/// decides).
pub fn is_published() -> bool {
    ACTIVE.is_published()
}

/// Runs `f` with the published state, if any.
pub fn with_active<R>(f: impl FnOnce(&CallbackState) -> R) -> Option<R> {
    ACTIVE.with(f)
}
