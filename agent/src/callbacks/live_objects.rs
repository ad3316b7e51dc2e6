//! Sampled objects still alive (`live`, with `alloc`): each allocation
//! sample's object is held under a JNI weak reference, with what its sample
//! recorded (class, size, time, thread, span ids, stack). At each dump and
//! at `stop` the objects the collector has not freed are written again, so
//! a leak shows as a stack whose live bytes grow dump after dump.
//!
//! Bounded: at most [`CAPACITY`] objects. A full table first forgets the
//! collected ones; if none were, later samples are not tracked (counted in
//! `live_objects_full`) until the next dump looks again. Stacks are kept
//! once per allocation trace, shared by the objects allocated there.
//!
//! Control plane only: JVMTI callbacks on the allocating thread and the
//! dump path take the table's lock; no signal handler touches it.

use crate::jvm::jni_env::JniEnv;
use frames::Frame;
use jni::sys::jobject;
use sampler::counters::{self, Counter};
use sampler::storage::call_traces::TraceId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Objects tracked at most: at the default 512 KiB interval, a live heap of
/// about 16 GiB of sampled objects.
pub const CAPACITY: usize = 32_768;

/// Garbage collections finished since the agent was loaded (JVMTI
/// `GarbageCollectionFinish`, enabled with `live`): objects' ages count
/// them, across sessions.
static COLLECTIONS: AtomicU64 = AtomicU64::new(0);

/// Counts a finished garbage collection (called from the JVMTI callback,
/// where only raw monitors and a few functions may be used).
pub fn collection_finished() {
    COLLECTIONS.fetch_add(1, Ordering::Relaxed);
}

/// A stack as an allocation sample stored it.
struct Stack {
    frames: Box<[Frame]>,
    truncated: bool,
}

struct Tracked {
    /// A JNI weak global reference.
    object: usize,
    class: u32,
    size: u64,
    time_ns: u64,
    collections: u64,
    tid: u32,
    span_id: u64,
    root_span_id: u64,
    stack: Arc<Stack>,
}

/// An allocation sample, as [`LiveObjects::track`] keeps it.
pub struct Allocation<'a> {
    pub class: u32,
    pub size: u64,
    pub time_ns: u64,
    pub tid: u32,
    /// The id its stack was stored under (shares stacks between objects).
    pub trace: u32,
    pub frames: &'a [Frame],
    pub truncated: bool,
    pub span_id: u64,
    pub root_span_id: u64,
}

/// A tracked object still alive at a dump.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Survivor<'a> {
    pub class: u32,
    pub size: u64,
    /// CLOCK_MONOTONIC time of its allocation.
    pub time_ns: u64,
    /// Garbage collections it survived.
    pub age: u64,
    pub tid: u32,
    pub span_id: u64,
    pub root_span_id: u64,
    pub frames: &'a [Frame],
    pub truncated: bool,
}

#[derive(Default)]
struct Table {
    objects: Vec<Tracked>,
    /// Stacks by the trace id they were stored under at allocation.
    stacks: HashMap<u32, Arc<Stack>>,
    /// A purge found nothing collected: no more tries until the next dump.
    full: bool,
}

#[derive(Default)]
pub struct LiveObjects {
    table: Mutex<Table>,
}

impl LiveObjects {
    /// Tracks `object`, the object of `sample` (on the allocating thread,
    /// whose `env` this is).
    ///
    /// # Safety
    /// `object` must be a live reference of the calling thread.
    pub unsafe fn track(&self, env: JniEnv, object: jobject, sample: &Allocation<'_>) {
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if table.objects.len() >= CAPACITY && !table.full {
            table.forget_collected(env);
            table.full = table.objects.len() >= CAPACITY;
        }
        if table.objects.len() >= CAPACITY {
            counters::increment(Counter::LiveObjectsFull);
            return;
        }
        // SAFETY: per the contract.
        let Some(weak) = (unsafe { env.new_weak_ref(object) }) else { return };
        let new_stack = || Arc::new(Stack { frames: sample.frames.into(), truncated: sample.truncated });
        // The dropped id stands for no one stack: such an object keeps its own.
        let stack = if sample.trace == TraceId::DROPPED.0 {
            new_stack()
        } else {
            Arc::clone(table.stacks.entry(sample.trace).or_insert_with(new_stack))
        };
        table.objects.push(Tracked {
            object: weak as usize,
            class: sample.class,
            size: sample.size,
            time_ns: sample.time_ns,
            collections: COLLECTIONS.load(Ordering::Relaxed),
            tid: sample.tid,
            span_id: sample.span_id,
            root_span_id: sample.root_span_id,
            stack,
        });
        counters::set(Counter::LiveObjects, table.objects.len() as u64);
    }

    /// Forgets the objects the collector freed and visits the others.
    pub fn survivors(&self, env: JniEnv, mut visit: impl FnMut(&Survivor<'_>)) {
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        table.forget_collected(env);
        table.full = false;
        let now = COLLECTIONS.load(Ordering::Relaxed);
        for object in &table.objects {
            visit(&Survivor {
                class: object.class,
                size: object.size,
                time_ns: object.time_ns,
                age: now.saturating_sub(object.collections),
                tid: object.tid,
                span_id: object.span_id,
                root_span_id: object.root_span_id,
                frames: &object.stack.frames,
                truncated: object.stack.truncated,
            });
        }
        counters::set(Counter::LiveObjects, table.objects.len() as u64);
    }

    /// Releases every weak reference (the session ends).
    pub fn release(&self, env: JniEnv) {
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        for object in table.objects.drain(..) {
            // SAFETY: a weak reference this table created and still owns.
            unsafe { env.delete_weak_ref(object.object as jobject) };
        }
        table.stacks.clear();
    }
}

impl Table {
    /// Drops the objects whose weak reference was cleared, and the stacks
    /// no object shares any more.
    fn forget_collected(&mut self, env: JniEnv) {
        self.objects.retain(|object| {
            // SAFETY: a weak reference this table created and still owns.
            let collected = unsafe { env.is_same_object(object.object as jobject, std::ptr::null_mut()) };
            if collected {
                // SAFETY: as above; not used again.
                unsafe { env.delete_weak_ref(object.object as jobject) };
            }
            !collected
        });
        self.stacks.retain(|_, stack| Arc::strong_count(stack) > 1);
    }
}
