//! Trace context: span ids and context values per thread, set from Java
//! through the API on the thread itself, read by the signal handler into
//! each sample (through the published session, which refers to this
//! state). Lives for the agent's lifetime (not per session), so context
//! set before `start` is not lost.
//!
//! Context values are strings interned in a triple-buffered dictionary,
//! which serves the threads setting values while a dump rotates it (the
//! signal handler reads only the ids, from the thread slots). At every
//! rotation (`recording::rotation`) the ids still set on some thread are
//! carried into the new active buffer, so a value stays resolvable for as
//! long as any thread carries it, and is purged two rotations after the
//! last one let go.

use crate::counters::{self, Counter};
use crate::dictionary::{Carry, TripleBufferedDictionary};
use crate::os_thread::current_tid;
use crate::storage::thread_slots::{Context, ThreadSlot, ThreadSlots, MAX_CONTEXT_VALUES};
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

const VALUE_CAPACITY: usize = 1 << 16;

/// The context attributes configured at the last start: the slots the API
/// may set, between sessions too.
pub fn attribute_count() -> usize {
    state().map_or(0, |state| state.attributes.load(Ordering::SeqCst))
}

/// Adds or removes the calling thread from the filter.
pub fn filter_thread(add: bool) -> Result<(), String> {
    own_slot()?.set_in_filter(add);
    Ok(())
}

/// Per-thread filter membership and trace context, and the dictionary of
/// context values. Agent-wide (it outlives sessions): the Java API sets
/// them at any time, and threads keep them across sessions.
pub struct ContextState {
    pub slots: ThreadSlots,
    pub values: TripleBufferedDictionary,
    /// Context attributes configured at the last start (`attributes=`).
    attributes: AtomicUsize,
}

impl ContextState {
    /// Whether thread `tid` is in the thread filter. Signal-safe.
    pub fn in_filter(&self, tid: u32) -> bool {
        self.slots.find(tid).is_some_and(ThreadSlot::in_filter)
    }

    /// The context of thread `tid` for a sample. Signal-safe.
    pub fn sample_context(&self, tid: u32) -> Context {
        self.slots.find(tid).and_then(ThreadSlot::context).unwrap_or_default()
    }

    /// Sets the context attributes configured at a start (`attributes=`).
    pub fn set_attribute_count(&self, count: usize) {
        self.attributes.store(count.min(MAX_CONTEXT_VALUES), Ordering::SeqCst);
    }

    /// Ids of context values set on any thread right now.
    fn live_value_ids(&self) -> HashSet<u32> {
        let mut ids = HashSet::new();
        self.slots.for_each(|slot| ids.extend(slot.value_ids()));
        ids
    }

    /// Rotates the value dictionary, keeping every value some thread
    /// carries. Not signal-safe; one caller at a time (the recording's
    /// rotation).
    pub fn rotate_values(&self) {
        self.values.rotate();
        self.values.carry_ids(&self.live_value_ids());
    }
}

/// The context state, allocated on first use and kept for the process.
static STATE: OnceLock<ContextState> = OnceLock::new();

/// The state, once initialised. Signal-safe (an atomic load).
pub fn state() -> Option<&'static ContextState> {
    STATE.get()
}

/// Allocates the state on first use. Not signal-safe.
pub fn init() -> Result<&'static ContextState, String> {
    if let Some(state) = STATE.get() {
        return Ok(state);
    }
    let slots = ThreadSlots::new().map_err(|e| format!("cannot reserve thread slots: {e}"))?;
    let values = TripleBufferedDictionary::new(VALUE_CAPACITY, Carry::Nothing)
        .map_err(|e| format!("cannot reserve the context dictionary: {e}"))?;
    Ok(STATE.get_or_init(|| ContextState { slots, values, attributes: AtomicUsize::new(0) }))
}

/// Releases a thread's slot when the thread exits, for threads that end
/// without a JVMTI ThreadEnd (after ThreadEnd it finds nothing to release).
struct ReleaseAtExit(u32);

impl Drop for ReleaseAtExit {
    fn drop(&mut self) {
        let _blocked = crate::signals::SignalBlocker::block();
        release_thread(self.0);
    }
}

thread_local! {
    static RELEASE_AT_EXIT: std::cell::OnceCell<ReleaseAtExit> = const { std::cell::OnceCell::new() };
}

fn own_slot() -> Result<&'static ThreadSlot, String> {
    let state = init()?;
    let tid = current_tid();
    let slot = state.slots.register(tid).ok_or_else(|| "too many threads carry context".to_owned())?;
    // Ignored when thread-local destructors already run (the thread is exiting).
    let _ = RELEASE_AT_EXIT.try_with(|guard| {
        guard.get_or_init(|| ReleaseAtExit(tid));
    });
    Ok(slot)
}

/// Sets the calling thread's span ids.
pub fn set_spans(span_id: u64, root_span_id: u64) -> Result<(), String> {
    own_slot()?.set_spans(span_id, root_span_id);
    Ok(())
}

/// Clears the calling thread's span ids and context values.
pub fn clear() -> Result<(), String> {
    own_slot()?.clear_context();
    Ok(())
}

/// Sets context value `slot` (< `attributes`) of the calling thread;
/// `None` clears it. A value that finds the dictionary full is counted and
/// recorded as unset: context must never fail the application's request.
pub fn set_value(slot: usize, value: Option<&str>, attributes: usize) -> Result<(), String> {
    if slot >= attributes.min(MAX_CONTEXT_VALUES) {
        return Err(format!(
            "context slot {slot} is out of range: {attributes} attribute(s) configured at start (attributes=name1;name2;...)"
        ));
    }
    let own = own_slot()?;
    let Some(text) = value else {
        own.set_value(slot, 0);
        return Ok(());
    };
    let published = init()?.values.lookup_and_publish(text, current_tid() as usize, |id| own.set_value(slot, id));
    if published.is_none() {
        counters::increment(Counter::ContextValuesDropped);
        own.set_value(slot, 0);
    }
    Ok(())
}

/// Frees the slot of thread `tid`, which is ending (called on that thread,
/// with the profiling signals blocked).
pub fn release_thread(tid: u32) {
    if let Some(state) = state() {
        state.slots.release(tid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_carried_by_a_thread_survive_rotations() {
        set_value(1, Some("customer-42"), 2).unwrap();
        let id = state().unwrap().sample_context(current_tid()).values[1];
        assert_ne!(id, 0);
        for _ in 0..4 {
            state().unwrap().rotate_values();
        }
        assert_eq!(state().unwrap().values.live_entries().get(&id).map(String::as_str), Some("customer-42"));
        set_value(1, None, 2).unwrap();
        assert_eq!(state().unwrap().sample_context(current_tid()).values[1], 0);
        assert!(set_value(2, Some("x"), 2).unwrap_err().contains("out of range"));
    }
}
