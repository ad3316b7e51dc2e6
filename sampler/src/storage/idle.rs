//! Wall-clock samples of idle threads, folded. A thread that has not run
//! since its last wall-clock sample is still where that sample found it,
//! so instead of signalling it again the wall-clock thread adds the tick's
//! samples to the thread's batch, which becomes one sample standing for
//! all of them. A signal costs the sampled thread a wake-up, a handler and
//! a stack walk; a fold costs the wall-clock thread one read of the
//! thread's CPU clock.
//!
//! 1. A handler that finds a thread off CPU (a wall-clock sample that
//!    interrupted a system call) leaves a [`Note`] ([`IdleThreads::note`]:
//!    signal-safe, lock-free, a bounded ring): the thread, its stack's key
//!    in the call-trace storage, the thread's CPU time after the walk.
//! 2. Each tick the wall-clock thread takes the notes
//!    ([`IdleThreads::absorb`]) and copies each noted stack out of the
//!    storage (a stack is readable for at least one rotation after it was
//!    stored; one already purged is simply not folded).
//! 3. Before signalling a thread it asks [`IdleThreads::fold`]: if the
//!    thread's CPU time moved by at most [`RUN_THRESHOLD_NS`] since its
//!    note (the return from the handler into the wait it was in), the
//!    tick's samples join the thread's batch and no signal is sent. The
//!    threshold is the one approximation: a thread that woke, ran less
//!    than that and blocked elsewhere keeps its old stack until it runs
//!    more.
//! 4. A batch is recorded as one wall-clock sample (its stack stored
//!    anew, its weight the samples it stands for, its time the first
//!    folded tick's, the thread's context as the first folded tick found
//!    it) when the thread runs again, when it is gone, after
//!    [`MAX_BATCH_NS`], and before every rotation ([`IdleThreads::flush`]:
//!    dumps, chunks that grew full, `stop`), so each chunk holds the
//!    samples folded during it. Recording takes a stripe before storing
//!    the stack, as a handler does, so the record and its stack land in
//!    the same chunk.
//!
//! Notes are written by handlers; batches belong to the wall-clock thread
//! and the rotation, under a mutex no handler takes.

use super::samples::{SampleKind, SampleRecord, SampleStripes};
use super::thread_slots::Context;
use super::trace_storage::CallTraceStorage;
use crate::context::ContextState;
use crate::counters::{self, Counter};
use frames::Frame;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// CPU time a thread may use after its sample and still be taken as
/// where the sample found it: the return from the signal handler into the
/// interrupted wait, not enough to reach another one.
pub const RUN_THRESHOLD_NS: u64 = 10_000;

/// The longest span of time one folded sample stands for.
pub const MAX_BATCH_NS: u64 = 1_000_000_000;

const NOTE_SLOTS: usize = 1024;
/// Slots a note tries before it is dropped (and its thread signalled
/// again next time: nothing is lost but the saving).
const NOTE_PROBES: usize = 8;
const FREE: u32 = 0;
const WRITING: u32 = 1;
const READY: u32 = 2;

/// What a handler leaves about a thread it found off CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Note {
    pub tid: u32,
    /// The sampled stack's key ([`trace_key`](super::call_traces::trace_key)).
    pub key: u64,
    /// The thread's CPU time at the end of its sample.
    pub cpu_ns: u64,
    /// A `jfr_writer::ThreadState` discriminant.
    pub state: u8,
}

#[derive(Default)]
struct NoteSlot {
    status: AtomicU32,
    tid: AtomicU32,
    state: AtomicU32,
    key: AtomicU64,
    cpu_ns: AtomicU64,
}

/// A thread found idle, and the samples folded since its batch was last
/// recorded (with the time and the thread's context at the first of
/// them: the thread sets its context itself, so it cannot change until
/// the thread runs, which ends the batch).
struct Idle {
    cpu_ns: u64,
    state: u8,
    truncated: bool,
    frames: Vec<Frame>,
    samples: u64,
    since_ns: u64,
    context: Context,
}

/// Where batches are recorded: the session's stores.
#[derive(Clone, Copy)]
pub struct BatchSink<'a> {
    pub stripes: &'a SampleStripes,
    pub traces: &'a CallTraceStorage,
    pub context: &'a ContextState,
}

pub struct IdleThreads {
    notes: Box<[NoteSlot]>,
    next_note: AtomicUsize,
    threads: Mutex<HashMap<u32, Idle>>,
}

impl Default for IdleThreads {
    fn default() -> Self {
        Self::new()
    }
}

impl IdleThreads {
    /// Allocates the note ring. Not signal-safe.
    pub fn new() -> Self {
        Self {
            notes: (0..NOTE_SLOTS).map(|_| NoteSlot::default()).collect(),
            next_note: AtomicUsize::new(0),
            threads: Mutex::new(HashMap::new()),
        }
    }

    /// Leaves `note` for the wall-clock thread. Signal-safe: claims a free
    /// slot with one compare-and-swap, or drops the note (counted).
    pub fn note(&self, note: Note) {
        let start = self.next_note.fetch_add(1, Ordering::Relaxed);
        for probe in 0..NOTE_PROBES {
            let Some(slot) = self.notes.get(start.wrapping_add(probe) % NOTE_SLOTS) else { break };
            if slot.status.compare_exchange(FREE, WRITING, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                slot.tid.store(note.tid, Ordering::Relaxed);
                slot.state.store(u32::from(note.state), Ordering::Relaxed);
                slot.key.store(note.key, Ordering::Relaxed);
                slot.cpu_ns.store(note.cpu_ns, Ordering::Relaxed);
                slot.status.store(READY, Ordering::Release);
                return;
            }
        }
        counters::increment(Counter::WallIdleNotesDropped);
    }

    fn threads(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Idle>> {
        self.threads.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the notes handlers left: each thread's newest one replaces
    /// what was known of it (a batch it had is recorded first: the thread
    /// ran since). Not signal-safe; the wall-clock thread, each tick.
    pub fn absorb(&self, sink: BatchSink<'_>) {
        let mut threads = self.threads();
        for slot in self.notes.iter() {
            if slot.status.load(Ordering::Acquire) != READY {
                continue;
            }
            let note = Note {
                tid: slot.tid.load(Ordering::Relaxed),
                key: slot.key.load(Ordering::Relaxed),
                cpu_ns: slot.cpu_ns.load(Ordering::Relaxed),
                state: slot.state.load(Ordering::Relaxed) as u8,
            };
            slot.status.store(FREE, Ordering::Release);
            if threads.get(&note.tid).is_some_and(|known| known.cpu_ns >= note.cpu_ns) {
                continue;
            }
            let mut frames = match threads.remove(&note.tid) {
                Some(known) => {
                    record(sink, note.tid, &known);
                    known.frames
                }
                None => Vec::new(),
            };
            if let Some(truncated) = sink.traces.copy_frames(note.key, note.tid as usize, &mut frames) {
                let idle = Idle {
                    cpu_ns: note.cpu_ns,
                    state: note.state,
                    truncated,
                    frames,
                    samples: 0,
                    since_ns: 0,
                    context: Context::default(),
                };
                threads.insert(note.tid, idle);
            }
        }
    }

    /// Whether thread `tid`, known idle and whose CPU time `cpu_ns` reads
    /// (`None`: gone), is still where its last sample found it; if so its
    /// batch takes `weight` samples of the tick at `now_ns` and the caller
    /// sends no signal. Otherwise the thread's batch is recorded and
    /// forgotten.
    pub fn fold(
        &self,
        tid: u32,
        cpu_ns: impl FnOnce() -> Option<u64>,
        weight: u32,
        now_ns: u64,
        sink: BatchSink<'_>,
    ) -> bool {
        let mut threads = self.threads();
        let Some(idle) = threads.get_mut(&tid) else { return false };
        let ran = cpu_ns().is_none_or(|now| now.checked_sub(idle.cpu_ns).is_none_or(|ran| ran > RUN_THRESHOLD_NS));
        if ran {
            if let Some(gone) = threads.remove(&tid) {
                record(sink, tid, &gone);
            }
            return false;
        }
        if idle.samples == 0 {
            idle.since_ns = now_ns;
            idle.context = sink.context.sample_context(tid);
        }
        idle.samples += u64::from(weight);
        if now_ns.saturating_sub(idle.since_ns) >= MAX_BATCH_NS {
            record(sink, tid, idle);
            idle.samples = 0;
        }
        counters::increment(Counter::WallSamplesFolded);
        true
    }

    /// Threads known to be idle (noted, not seen running since).
    pub fn known(&self) -> usize {
        self.threads().len()
    }

    /// Records and forgets the threads not in `alive` (sorted).
    pub fn forget_gone(&self, alive: &[u32], sink: BatchSink<'_>) {
        self.threads().retain(|&tid, idle| {
            let keep = alive.binary_search(&tid).is_ok();
            if !keep {
                record(sink, tid, idle);
            }
            keep
        });
    }

    /// Records every batch (before a rotation, so that the chunk it ends
    /// holds the samples folded during it). Not signal-safe.
    pub fn flush(&self, sink: BatchSink<'_>) {
        for (&tid, idle) in self.threads().iter_mut() {
            record(sink, tid, idle);
            idle.samples = 0;
        }
    }
}

/// Records `idle`'s batch, if it holds samples, as one wall-clock sample of
/// `tid`. Takes a stripe first (waiting for one, as a drain does: a handler
/// holds it for one sample), then stores the stack, as a handler does.
fn record(sink: BatchSink<'_>, tid: u32, idle: &Idle) {
    if idle.samples == 0 {
        return;
    }
    let Some(mut stripe) = sink.stripes.acquire(tid) else {
        counters::increment(Counter::SamplesDroppedBusy);
        return;
    };
    let trace = sink.traces.put(&idle.frames, idle.truncated, tid as usize);
    let record = SampleRecord {
        time_ns: idle.since_ns,
        tid,
        trace: trace.0,
        weight: u32::try_from(idle.samples).unwrap_or(u32::MAX),
        state: idle.state,
        kind: SampleKind::Wall,
        class: 0,
        value: 0,
        park_time: 0,
        address: 0,
        context: idle.context,
    };
    stripe.push_counted(record);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::call_traces::trace_key;

    struct Stores {
        stripes: SampleStripes,
        traces: CallTraceStorage,
    }

    impl Stores {
        fn new() -> Self {
            Self { stripes: SampleStripes::new(256, 16).unwrap(), traces: CallTraceStorage::new(256, 4096).unwrap() }
        }

        fn sink(&self) -> BatchSink<'_> {
            BatchSink { stripes: &self.stripes, traces: &self.traces, context: crate::context::init().unwrap() }
        }

        /// Stores a stack as a handler would and returns the note it leaves.
        fn sampled(&self, tid: u32, seed: u64, cpu_ns: u64) -> Note {
            let frames = stack(seed);
            self.traces.put(&frames, false, 0);
            Note { tid, key: trace_key(&frames, false), cpu_ns, state: 1 }
        }

        fn records(&self) -> Vec<SampleRecord> {
            let mut out = Vec::new();
            self.stripes.drain_into(&mut out);
            out
        }

        fn frames_of(&self, record: &SampleRecord) -> Vec<Frame> {
            let mut frames = Vec::new();
            self.traces.for_each_live(|t| {
                if t.id.0 == record.trace {
                    frames = t.frames.to_vec();
                }
            });
            frames
        }
    }

    fn stack(seed: u64) -> Vec<Frame> {
        (0..5).map(|i| Frame::java(seed * 100 + i, 0)).collect()
    }

    #[test]
    fn an_idle_threads_ticks_fold_into_one_sample_with_their_weight() {
        let stores = Stores::new();
        let idle = IdleThreads::new();
        idle.note(stores.sampled(7, 1, 5_000_000));
        idle.absorb(stores.sink());
        assert_eq!(idle.known(), 1);
        assert!(idle.fold(7, || Some(5_000_000), 3, 100, stores.sink()), "no CPU used: folded");
        assert!(
            idle.fold(7, || Some(5_000_000 + RUN_THRESHOLD_NS), 3, 200, stores.sink()),
            "the return from a handler"
        );
        assert!(!idle.fold(8, || Some(0), 3, 200, stores.sink()), "a thread never noted is signalled");
        assert!(stores.records().is_empty(), "nothing recorded while the thread sleeps");
        idle.flush(stores.sink());
        let records = stores.records();
        assert_eq!(records.len(), 1);
        let record = records[0];
        assert_eq!((record.tid, record.weight, record.time_ns, record.state), (7, 6, 100, 1));
        assert_eq!(record.kind, SampleKind::Wall);
        assert_eq!(stores.frames_of(&record), stack(1), "the sampled stack");
        idle.flush(stores.sink());
        assert!(stores.records().is_empty(), "a flushed batch is not recorded twice");
    }

    #[test]
    fn a_thread_that_ran_or_ended_is_signalled_and_its_batch_recorded() {
        let stores = Stores::new();
        let idle = IdleThreads::new();
        idle.note(stores.sampled(7, 1, 1_000));
        idle.note(stores.sampled(9, 2, 1_000));
        idle.absorb(stores.sink());
        assert!(idle.fold(7, || Some(1_000), 2, 10, stores.sink()));
        assert!(!idle.fold(7, || Some(1_000 + RUN_THRESHOLD_NS + 1), 2, 20, stores.sink()), "it ran: signal it");
        assert!(idle.fold(9, || Some(1_000), 4, 10, stores.sink()));
        assert!(!idle.fold(9, || None, 4, 20, stores.sink()), "gone");
        let weights: Vec<_> = stores.records().iter().map(|r| (r.tid, r.weight)).collect();
        assert_eq!(weights, [(7, 2), (9, 4)], "in stripe order");
        assert_eq!(idle.known(), 0, "both are forgotten until sampled again");
        assert!(!idle.fold(7, || Some(1_000), 2, 30, stores.sink()));
    }

    #[test]
    fn a_reused_thread_id_with_less_cpu_time_is_not_taken_for_the_idle_thread() {
        let stores = Stores::new();
        let idle = IdleThreads::new();
        idle.note(stores.sampled(7, 1, 50_000_000));
        idle.absorb(stores.sink());
        assert!(!idle.fold(7, || Some(1_000), 1, 10, stores.sink()));
    }

    #[test]
    fn batches_are_cut_after_their_longest_span_and_when_threads_go() {
        let stores = Stores::new();
        let idle = IdleThreads::new();
        idle.note(stores.sampled(7, 1, 0));
        idle.note(stores.sampled(9, 2, 0));
        idle.absorb(stores.sink());
        assert!(idle.fold(7, || Some(0), 1, 0, stores.sink()));
        assert!(idle.fold(7, || Some(0), 1, MAX_BATCH_NS, stores.sink()), "still folded, the batch recorded");
        assert_eq!(stores.records().iter().map(|r| r.weight).collect::<Vec<_>>(), [2]);
        assert!(idle.fold(9, || Some(0), 5, 0, stores.sink()));
        idle.forget_gone(&[7], stores.sink());
        assert_eq!(stores.records().iter().map(|r| (r.tid, r.weight)).collect::<Vec<_>>(), [(9, 5)]);
        assert_eq!(idle.known(), 1);
    }

    #[test]
    fn only_the_newest_note_of_a_thread_counts_and_purged_stacks_are_not_folded() {
        let stores = Stores::new();
        let idle = IdleThreads::new();
        let newer = stores.sampled(7, 2, 2_000);
        idle.note(newer);
        idle.note(stores.sampled(7, 1, 1_000));
        idle.absorb(stores.sink());
        assert!(idle.fold(7, || Some(2_000), 1, 0, stores.sink()));
        idle.flush(stores.sink());
        let records = stores.records();
        assert_eq!(stores.frames_of(&records[0]), stack(2));
        let purged = stores.sampled(11, 3, 0);
        stores.traces.rotate();
        stores.traces.rotate();
        idle.note(purged);
        idle.absorb(stores.sink());
        assert!(!idle.fold(11, || Some(0), 1, 0, stores.sink()), "its stack is gone: signal it");
    }

    #[test]
    fn a_batch_keeps_the_context_its_first_tick_found() {
        let stores = Stores::new();
        let idle = IdleThreads::new();
        let tid = crate::os_thread::current_tid();
        crate::context::set_spans(11, 1).unwrap();
        idle.note(stores.sampled(tid, 1, 0));
        idle.absorb(stores.sink());
        assert!(idle.fold(tid, || Some(0), 1, 0, stores.sink()));
        // The thread runs and takes the next request's span: the batch
        // recorded then is the idle time of the first.
        crate::context::set_spans(22, 2).unwrap();
        assert!(!idle.fold(tid, || Some(RUN_THRESHOLD_NS * 10), 1, 1, stores.sink()));
        let records = stores.records();
        assert_eq!((records[0].context.span_id, records[0].context.root_span_id), (11, 1));
        crate::context::clear().unwrap();
    }

    #[test]
    fn a_newer_note_records_the_batch_it_replaces() {
        let stores = Stores::new();
        let idle = IdleThreads::new();
        idle.note(stores.sampled(7, 1, 0));
        idle.absorb(stores.sink());
        assert!(idle.fold(7, || Some(0), 4, 0, stores.sink()));
        idle.note(stores.sampled(7, 2, 90_000));
        idle.absorb(stores.sink());
        let records = stores.records();
        assert_eq!(records.iter().map(|r| r.weight).collect::<Vec<_>>(), [4]);
        assert_eq!(stores.frames_of(&records[0]), stack(1));
        assert!(idle.fold(7, || Some(90_000), 1, 5, stores.sink()), "the new note is what folds now");
        idle.flush(stores.sink());
        assert_eq!(stores.frames_of(&stores.records()[0]), stack(2));
    }

    #[test]
    fn a_full_note_ring_drops_notes_and_counts_them() {
        let stores = Stores::new();
        let idle = IdleThreads::new();
        let before = counters::get(Counter::WallIdleNotesDropped);
        for tid in 0..(NOTE_SLOTS as u32 + 10) {
            idle.note(stores.sampled(tid, 1, 0));
        }
        assert!(counters::get(Counter::WallIdleNotesDropped) - before >= 10);
        idle.absorb(stores.sink());
        assert_eq!(idle.known(), NOTE_SLOTS);
    }
}
