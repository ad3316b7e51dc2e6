//! `recordTraceRoot`: endpoint events with their labels interned in a
//! triple-buffered dictionary, which serves the JNI threads recording
//! endpoints while the recording rotates it (no signal handler uses it).
//!
//! Review comment 1 of the dictionary PR: an event must land in the chunk
//! whose constant pool holds its labels. Recording (label lookup + append)
//! and rotation (dictionary rotation + batch swap) take the same lock, so an
//! event either precedes a rotation (its labels are in the dump buffer the
//! finished chunk's pool is written from, the event in the batch taken with
//! it) or follows it (both go to the next chunk).

use super::rotation::Rotate;
use sampler::clock;
use sampler::dictionary::{Carry, TripleBufferedDictionary};
use std::sync::{Mutex, OnceLock};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndpointEvent {
    pub time_ns: u64,
    pub tid: u32,
    pub endpoint: u32,
    pub operation: u32,
    pub root_span_id: u64,
}

/// A finished batch: events and the labels they reference.
#[derive(Default)]
pub struct Batch {
    pub events: Vec<EndpointEvent>,
    pub labels: Vec<(u32, String)>,
}

pub struct Endpoints {
    labels: TripleBufferedDictionary,
    pending: Mutex<Vec<EndpointEvent>>,
    /// What rotations ended, until the chunk takes it.
    ended: Mutex<Batch>,
    /// Test-only: rotate the dictionary outside the lock (the reviewed race).
    #[cfg(test)]
    rotate_outside_lock: bool,
    #[cfg(test)]
    during_rotation: Option<sampler::dictionary::RotationHook<Endpoints>>,
}

const LABEL_CAPACITY: usize = 1 << 16;
/// Endpoint events and labels, agent-wide: the Java API records them from
/// request threads at any time, also between sessions.
static ENDPOINTS: OnceLock<Endpoints> = OnceLock::new();

/// The process-wide recorder, allocated on first use.
pub fn endpoints() -> Result<&'static Endpoints, String> {
    if let Some(e) = ENDPOINTS.get() {
        return Ok(e);
    }
    let recorder = Endpoints::new().map_err(|e| format!("cannot reserve the endpoint dictionary: {e}"))?;
    Ok(ENDPOINTS.get_or_init(|| recorder))
}

impl Endpoints {
    pub fn new() -> std::io::Result<Self> {
        Ok(Self {
            labels: TripleBufferedDictionary::new(LABEL_CAPACITY, Carry::Nothing)?,
            pending: Mutex::new(Vec::new()),
            ended: Mutex::new(Batch::default()),
            #[cfg(test)]
            rotate_outside_lock: false,
            #[cfg(test)]
            during_rotation: None,
        })
    }

    /// Records an endpoint for the calling thread; false when the endpoint
    /// is new and the chunk already has `size_limit` distinct labels.
    pub fn record(&self, tid: u32, root_span_id: u64, endpoint: &str, operation: &str, size_limit: u32) -> bool {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        self.record_locked(&mut pending, tid, root_span_id, endpoint, operation, size_limit)
    }

    fn record_locked(
        &self,
        pending: &mut Vec<EndpointEvent>,
        tid: u32,
        root_span_id: u64,
        endpoint: &str,
        operation: &str,
        size_limit: u32,
    ) -> bool {
        let hint = tid as usize;
        let Some(endpoint) = self.labels.bounded_lookup(endpoint, size_limit, hint) else { return false };
        let Some(operation) = self.labels.bounded_lookup(operation, size_limit.saturating_add(1), hint) else {
            return false;
        };
        pending.push(EndpointEvent { time_ns: clock::monotonic_ns(), tid, endpoint, operation, root_span_id });
        true
    }

    /// The events of the chunks rotations ended, with their labels.
    pub fn take_ended(&self) -> Batch {
        std::mem::take(&mut *self.ended.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Drops what an earlier session left behind (a `stop` that wrote no
    /// chunk). Called at `start`, before the new session's sampler is
    /// published, so no call can be recording for the new session yet.
    pub fn discard(&self) {
        self.rotate();
        drop(self.take_ended());
    }

    /// Ends a chunk: the events since the last rotation with their labels.
    fn end_chunk(&self) -> Batch {
        #[cfg(test)]
        if self.rotate_outside_lock {
            self.labels.rotate();
            if let Some(hook) = &self.during_rotation {
                hook(self);
            }
            let events = std::mem::take(&mut *self.pending.lock().unwrap());
            return Batch { events, labels: self.labels.dump_entries() };
        }
        let events = {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            self.labels.rotate();
            #[cfg(test)]
            if let Some(hook) = &self.during_rotation {
                hook(self);
            }
            std::mem::take(&mut *pending)
        };
        Batch { events, labels: self.labels.dump_entries() }
    }
}

impl Rotate for Endpoints {
    /// Keeps the ended batch for [`Endpoints::take_ended`]; a batch not
    /// taken yet is extended, each part with its own labels.
    fn rotate(&self) {
        let batch = self.end_chunk();
        let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        ended.events.extend(batch.events);
        ended.labels.extend(batch.labels);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn a_discarded_session_leaves_nothing_for_the_next() {
        let store = Endpoints::new().unwrap();
        assert!(store.record(1, 7, "GET /old", "old", 100));
        store.discard();
        assert!(store.record(1, 8, "GET /new", "new", 100));
        store.rotate();
        let batch = store.take_ended();
        assert_eq!(batch.events.iter().map(|e| e.root_span_id).collect::<Vec<_>>(), [8]);
    }

    /// Every event of a batch has its labels in that batch.
    fn consistent(batch: &Batch) -> bool {
        let ids: HashSet<u32> = batch.labels.iter().map(|(id, _)| *id).collect();
        batch.events.iter().all(|e| ids.contains(&e.endpoint) && ids.contains(&e.operation))
    }

    /// A thread records an endpoint in the middle of a rotation (a
    /// try-lock stands in for "another thread, right now").
    fn event_during_rotation_is_consistent(rotate_outside_lock: bool) -> bool {
        let mut endpoints = Endpoints::new().unwrap();
        endpoints.rotate_outside_lock = rotate_outside_lock;
        endpoints.during_rotation = Some(Box::new(|e: &Endpoints| {
            if let Ok(mut pending) = e.pending.try_lock() {
                e.record_locked(&mut pending, 1, 9, "/late", "late.op", 100);
            }
        }));
        endpoints.record(1, 8, "/early", "early.op", 100);
        let first = endpoints.end_chunk();
        endpoints.during_rotation = None;
        let second = endpoints.end_chunk();
        consistent(&first) && consistent(&second)
    }

    #[test]
    fn an_event_recorded_during_a_rotation_lands_with_its_labels() {
        assert!(event_during_rotation_is_consistent(false));
    }

    #[test]
    fn rotating_outside_the_lock_reintroduces_the_reviewed_race() {
        assert!(!event_during_rotation_is_consistent(true), "the test must catch the reviewed race");
    }

    #[test]
    fn concurrent_recording_and_rotation_stay_consistent() {
        const PER_WRITER: u64 = 5_000;
        let endpoints = std::sync::Arc::new(Endpoints::new().unwrap());
        let writers: Vec<_> = (0..4u32)
            .map(|t| {
                let endpoints = endpoints.clone();
                std::thread::spawn(move || {
                    for i in 0..PER_WRITER {
                        assert!(endpoints.record(t, i, &format!("/e{}", i % 97), &format!("op{}", i % 13), 1000));
                    }
                })
            })
            .collect();
        let mut events = 0;
        let mut rotations = 0;
        while writers.iter().any(|w| !w.is_finished()) || rotations == 0 {
            let batch = endpoints.end_chunk();
            events += batch.events.len();
            assert!(consistent(&batch));
            rotations += 1;
        }
        writers.into_iter().for_each(|w| w.join().unwrap());
        let last = endpoints.end_chunk();
        assert!(consistent(&last));
        events += last.events.len();
        assert_eq!(events as u64, 4 * PER_WRITER, "every accepted event lands in exactly one rotation");
    }

    #[test]
    fn a_rotation_keeps_its_batch_until_taken() {
        let endpoints = Endpoints::new().unwrap();
        endpoints.record(1, 1, "/a", "op.a", 100);
        Rotate::rotate(&endpoints);
        endpoints.record(1, 2, "/b", "op.b", 100);
        let first = endpoints.take_ended();
        assert_eq!(first.events.iter().map(|e| e.root_span_id).collect::<Vec<_>>(), [1]);
        assert!(consistent(&first));
        Rotate::rotate(&endpoints);
        endpoints.record(1, 3, "/c", "op.c", 100);
        Rotate::rotate(&endpoints);
        let both = endpoints.take_ended();
        assert_eq!(both.events.iter().map(|e| e.root_span_id).collect::<Vec<_>>(), [2, 3]);
        assert!(consistent(&both), "each rotation's events came with their own labels");
        assert!(endpoints.take_ended().events.is_empty());
    }

    #[test]
    fn the_size_limit_refuses_new_endpoints_but_not_known_ones() {
        let endpoints = Endpoints::new().unwrap();
        assert!(endpoints.record(1, 1, "/a", "op", 2));
        assert!(!endpoints.record(1, 1, "/b", "op", 2), "two labels already");
        assert!(endpoints.record(1, 1, "/a", "op", 2));
    }
}
