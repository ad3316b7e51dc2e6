//! Rotation: ending the current chunk in every store whose entries a chunk
//! references by id, in one fixed order, handed to the recording when it
//! is built.
//!
//! Why this order (the races the dictionary PR's review found, and
//! docs/design.md, "Dictionaries and dumps while sampling"):
//! 0. Folded wall-clock samples (`storage::idle`) go into the stripes
//!    first, their stacks into the active call-trace table, so they belong
//!    to the chunk the rotation ends (`Recording::rotate`).
//! 1. Every store rotates before the sample stripes are drained and before
//!    the finished chunk reads any store (`Recording::rotate`). Entries
//!    recorded from the rotation on belong to the next chunk; a sample
//!    drained after it that references an entry made just after it finds
//!    that entry in the store's new active buffer, which the chunk reads
//!    with the dump buffer (`CallTraceStorage::for_each_live`,
//!    `live_entries` of the context values).
//! 2. Each store keeps its own rule inside its `rotate`: endpoint events
//!    are taken in the same critical section as their labels' rotation
//!    (review comment 1, `endpoints`); context values carry the ids threads
//!    still hold into the new active buffer, which a thread publishes under
//!    hazard protection (`context`); the dictionaries swap before they
//!    copy or clear, and readers hold hazard slots of their own (review
//!    comments 2 and 3, `dictionary`).
//! 3. No store's entries hold another store's ids, so the order among the
//!    stores (call traces, endpoints, context values) is fixed for
//!    reproducibility only. The class map is not rotated: the recording
//!    owns it for the whole session (`classes`).

use super::endpoints::Endpoints;
use crate::callbacks::CallbackState;
use sampler::context::ContextState;
use sampler::storage::trace_storage::CallTraceStorage;
use std::sync::Arc;

/// A store whose entries chunks reference by id.
pub trait Rotate: Send + Sync {
    /// Ends the store's current chunk: what is recorded from now on belongs
    /// to the next one; what the ended chunk references stays readable
    /// until the next rotation. Not signal-safe; one caller at a time (the
    /// recording's lock).
    fn rotate(&self);
}

impl Rotate for CallTraceStorage {
    fn rotate(&self) {
        CallTraceStorage::rotate(self);
    }
}

impl Rotate for ContextState {
    fn rotate(&self) {
        self.rotate_values();
    }
}

/// What a session's recording reads and rotates.
pub struct Stores {
    /// The session's sampler (its stripes are drained into chunks, its
    /// call traces rotate and are pooled), its JVMTI samples' classes and
    /// live objects, and its library table, which names native frames.
    pub callbacks: Arc<CallbackState>,
    /// Endpoint events and labels, recorded by JNI threads (`recordTraceRoot`).
    pub endpoints: &'static Endpoints,
    /// The sampler's context state: its values are set by JNI threads
    /// (`setContextValue`) and read into chunks.
    pub context: &'static ContextState,
}

impl Stores {
    /// The rotatable stores, in rotation order (see the module comment).
    fn in_rotation_order(&self) -> [&dyn Rotate; 3] {
        [&self.callbacks.sampler.traces, self.endpoints, self.context]
    }

    /// Ends the current chunk in every store. Not signal-safe.
    pub fn rotate(&self) {
        for store in self.in_rotation_order() {
            store.rotate();
        }
    }
}
