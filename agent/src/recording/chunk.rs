//! One JFR chunk in the making: samples are encoded as they are drained,
//! each with its stack's id in the call trace storage; constant pools are
//! built at the end, for exactly the stack traces and threads the chunk's
//! events reference. Stack traces get their keys then, by content and the
//! most sampled first (the shortest varints for the most samples), and
//! the samples' ids are replaced with those keys. Bytes from what the
//! caller hands in ([`ChunkSources`]): no I/O, no process-wide state.

use super::endpoints::Batch;
use super::frame_names::FrameNames;
use super::methods::MethodSource;
use super::Format;
use crate::jvm::threads::ThreadInfo;
use crate::libraries::kernel::KernelNames;
use crate::libraries::LibraryTable;
use frames::{Frame, Marker};
use jfr_writer::{
    schema, ActiveSetting, ChunkClock, ChunkEnd, ChunkWriter, ConstantPools, Endpoint, NativeLibrary, ProfilerCounter,
    Sample, SampleKind as Kind, ThreadDef, ThreadState,
};
use sampler::storage::call_traces::TraceId;
use sampler::storage::samples::{SampleKind, SampleRecord};
use sampler::storage::thread_slots::{Context, MAX_CONTEXT_VALUES};
use sampler::storage::trace_storage::CallTraceStorage;
use std::collections::{HashMap, HashSet};

/// Event ticks are CLOCK_MONOTONIC microseconds counted from a session's
/// [`Ticks`] origin: one clock for every chunk of the session.
const TICKS_PER_SECOND: i64 = 1_000_000;
const NANOS_PER_TICK: u64 = 1_000_000_000 / TICKS_PER_SECOND as u64;

/// A session's tick origin, one second before the session began (so no
/// time of the session, nor a chunk's start, is tick 0). A tick is a
/// microsecond: every event stamps one, and small ticks are short
/// varints (4 bytes for the first 268 s of a session, 5 bytes up to 9.5
/// hours, 6 bytes up to 51 days, where nanoseconds would take 5 bytes
/// from 268 ms, 6 from 34 s and 7 from 73 minutes). A thread's CPU and
/// wall-clock samples come at most every 100 µs, and a lock wait's
/// duration is rounded to the nearest microsecond (a sampled wait stands
/// for at least the `lock` interval, 1 µs or more; thresholds are whole
/// microseconds), so a microsecond loses nothing a reader can use (events
/// of several threads, or allocations, may share one). A time before the origin (a wait that began
/// more than a second before the session) is stamped at the origin. The
/// ticks are this session's own: nothing lines them up with another
/// clock's (the JVM's own JFR ticks by its TSC when it can).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticks {
    origin_mono_ns: u64,
}

impl Ticks {
    pub fn starting_at(session_start_mono_ns: u64) -> Self {
        Self { origin_mono_ns: session_start_mono_ns.saturating_sub(1_000_000_000) }
    }

    /// The tick of a CLOCK_MONOTONIC time (0 for a time before the origin).
    pub fn at(self, mono_ns: u64) -> i64 {
        Self::span(mono_ns.saturating_sub(self.origin_mono_ns))
    }

    /// The ticks of a span of time, rounded down as [`Self::at`] rounds
    /// times.
    pub fn span(nanos: u64) -> i64 {
        (nanos / NANOS_PER_TICK) as i64
    }

    /// The ticks of a measured duration (a lock wait), rounded to the
    /// nearest: unbiased where the durations add up.
    pub fn duration(nanos: u64) -> i64 {
        (nanos.saturating_add(NANOS_PER_TICK / 2) / NANOS_PER_TICK) as i64
    }

    /// How far `mono_ns` is past the start of its tick. A chunk's header
    /// pairs its start tick with the wall-clock time of that tick's start,
    /// so every chunk maps ticks to time alike: a reader converting one
    /// chunk's ticks by another's header gets the same times.
    pub fn past_tick_start(self, mono_ns: u64) -> u64 {
        mono_ns.saturating_sub(self.origin_mono_ns) % NANOS_PER_TICK
    }
}

pub struct ChunkBuilder {
    writer: ChunkWriter,
    ticks: Ticks,
    start_mono_ns: u64,
    format: Format,
    /// Samples per stored stack trace id.
    traces: HashMap<u32, u64>,
    threads: HashSet<u64>,
    context_values: HashSet<u32>,
}

/// What a finished chunk needs from the rest of the agent.
pub struct ChunkSources<'a> {
    pub traces: &'a CallTraceStorage,
    pub methods: &'a mut dyn MethodSource,
    /// Native libraries, for native frames and `jdk.NativeLibrary` events.
    pub libraries: Option<&'a LibraryTable>,
    /// Names of kernel frames, kept for the session.
    pub kernel: &'a mut KernelNames,
    pub thread: &'a dyn Fn(u64) -> Option<ThreadInfo>,
    pub thread_key: &'a dyn Fn(u32) -> u64,
    pub counters: &'a [(&'static str, u64)],
    /// Endpoint events of the chunk, with their labels.
    pub endpoints: &'a Batch,
    /// Context values that may be referenced (id to text).
    pub context_values: &'a HashMap<u32, String>,
    /// The session's constant pools (keys that mean one thing in every
    /// chunk).
    pub pools: &'a mut ConstantPools,
}

/// A sampled object still alive at a dump (`live`), its stack stored
/// under `trace` for this chunk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveRecord {
    pub tid: u32,
    pub trace: u32,
    /// An id of the session's class table.
    pub class: u32,
    pub size: u64,
    /// CLOCK_MONOTONIC time of the allocation.
    pub time_ns: u64,
    /// Garbage collections survived.
    pub age: u64,
    pub span_id: u64,
    pub root_span_id: u64,
}

/// A finished chunk.
pub struct Finished {
    pub bytes: Vec<u8>,
    /// Context values a sample referenced that were no longer known
    /// (written empty; see [`ChunkBuilder::finish`]).
    pub context_values_expired: u64,
}

impl ChunkBuilder {
    /// A chunk of the session whose clock is `ticks`, starting at
    /// `start_mono_ns` (CLOCK_MONOTONIC), which is `start_epoch_ns` in
    /// wall-clock time, opening with the settings.
    pub fn new(
        ticks: Ticks,
        start_mono_ns: u64,
        start_epoch_ns: i64,
        settings: &[(String, String)],
        format: &Format,
    ) -> Self {
        let start_ticks = ticks.at(start_mono_ns);
        // The header's start is the start of the start tick.
        let into_tick = ticks.past_tick_start(start_mono_ns);
        let start_nanos = start_epoch_ns - into_tick as i64;
        let clock = ChunkClock { start_nanos, start_ticks, ticks_per_second: TICKS_PER_SECOND };
        let mut writer = ChunkWriter::with_provisional_stack_ids(clock, format.dialect);
        writer.declare(&format.events);
        for (name, value) in settings {
            writer.write(&ActiveSetting { start_ticks, event_type: schema::id::EXECUTION_SAMPLE, name, value });
        }
        Self {
            writer,
            ticks,
            start_mono_ns: start_mono_ns - into_tick,
            format: format.clone(),
            traces: HashMap::new(),
            threads: HashSet::new(),
            context_values: HashSet::new(),
        }
    }

    /// Records a setting that changed at `now_mono_ns` (CLOCK_MONOTONIC).
    pub fn add_setting(&mut self, now_mono_ns: u64, name: &str, value: &str) {
        let start_ticks = self.ticks.at(now_mono_ns);
        self.writer.write(&ActiveSetting { start_ticks, event_type: schema::id::EXECUTION_SAMPLE, name, value });
    }

    pub fn event_bytes(&self) -> usize {
        self.writer.event_bytes()
    }

    /// Encodes samples (CPU, wall clock, allocations, lock waits).
    /// `thread_key` maps a kernel tid to its pool key, `class_key` an
    /// allocation or lock record's class id to its class's pool key (0:
    /// unknown), `weight` an allocation's kind (heap or native) and size to
    /// the bytes it stands for.
    pub fn add_samples(
        &mut self,
        records: &[SampleRecord],
        mut thread_key: impl FnMut(u32) -> u64,
        mut class_key: impl FnMut(u32) -> u64,
        weight: impl Fn(SampleKind, u64) -> u64,
    ) {
        for record in records {
            let (kind, state, weight) = match record.kind {
                SampleKind::Cpu => (Kind::Cpu, self.format.dialect.cpu_state(), u64::from(record.weight)),
                SampleKind::Wall => (Kind::Wall, ThreadState::from_u8(record.state), u64::from(record.weight)),
                SampleKind::Alloc => {
                    let kind = Kind::Alloc { class: class_key(record.class), size: record.value };
                    (kind, ThreadState::Runnable, weight(record.kind, record.value))
                }
                SampleKind::Malloc => {
                    let kind = Kind::Malloc { address: record.address, size: record.value };
                    (kind, ThreadState::Runnable, weight(record.kind, record.value))
                }
                SampleKind::Free => (Kind::Free { address: record.address }, ThreadState::Runnable, 0),
                SampleKind::Lock => {
                    let kind =
                        Kind::Lock { class: class_key(record.class), duration_ticks: Ticks::duration(record.value) };
                    (kind, ThreadState::Blocked, record.value)
                }
                SampleKind::Park => {
                    let kind = Kind::Park {
                        class: class_key(record.class),
                        duration_ticks: Ticks::duration(record.value),
                        timeout_ns: (record.park_time > 0).then_some(record.park_time),
                        until_ms: (record.park_time < 0).then(|| record.park_time.saturating_neg()),
                    };
                    (kind, ThreadState::Parked, record.value)
                }
            };
            let thread = thread_key(record.tid);
            self.put(kind, record.time_ns, thread, record.trace, state, weight, &record.context);
        }
    }

    /// Encodes the sampled objects still alive at `now_ns` (`live`), keys
    /// and weights as for [`Self::add_samples`].
    pub fn add_live_objects(
        &mut self,
        objects: &[LiveRecord],
        now_ns: u64,
        mut thread_key: impl FnMut(u32) -> u64,
        mut class_key: impl FnMut(u32) -> u64,
        weight: impl Fn(SampleKind, u64) -> u64,
    ) {
        for object in objects {
            let kind = Kind::Live {
                class: class_key(object.class),
                size: object.size,
                allocation_ticks: self.ticks.at(object.time_ns),
                age: object.age,
            };
            let context = Context { span_id: object.span_id, root_span_id: object.root_span_id, ..Context::default() };
            let thread = thread_key(object.tid);
            let weight = weight(SampleKind::Alloc, object.size);
            self.put(kind, now_ns, thread, object.trace, ThreadState::Runnable, weight, &context);
        }
    }

    /// Encodes one sample of `thread` (a pool key) with stack `trace`.
    #[allow(clippy::too_many_arguments)]
    fn put(
        &mut self,
        kind: Kind,
        time_ns: u64,
        thread: u64,
        trace: u32,
        state: ThreadState,
        weight: u64,
        context: &Context,
    ) {
        self.threads.insert(thread);
        if !matches!(kind, Kind::Free { .. }) {
            *self.traces.entry(trace).or_default() += 1;
        }
        let mut values = [0u64; MAX_CONTEXT_VALUES];
        let attributes = self.format.attributes.len().min(MAX_CONTEXT_VALUES);
        for (key, &value) in values.iter_mut().zip(&context.values).take(attributes) {
            *key = u64::from(value);
            if value != 0 {
                self.context_values.insert(value);
            }
        }
        self.writer.sample(&Sample {
            kind,
            start_ticks: self.ticks.at(time_ns),
            thread,
            stack_trace: u64::from(trace),
            state,
            weight,
            span_id: context.span_id,
            local_root_span_id: context.root_span_id,
            context: &values[..attributes],
        });
    }

    /// Writes counters, the constant pools and the metadata.
    pub fn finish(mut self, sources: ChunkSources<'_>, end_mono_ns: u64, final_chunk: bool) -> Finished {
        let end_ticks = self.ticks.at(end_mono_ns);
        for &(name, count) in sources.counters {
            self.writer.write(&ProfilerCounter { start_ticks: end_ticks, name, count: count as i64 });
        }
        if let Some(libraries) = sources.libraries {
            for library in libraries.libraries() {
                let build_id = library.build_id.as_ref().map(|b| b.to_hex());
                self.writer.write(&NativeLibrary {
                    start_ticks: end_ticks,
                    name: &library.path,
                    base_address: library.image.start,
                    top_address: library.image.end,
                    build_id: build_id.as_deref(),
                    load_bias: library.bias,
                });
            }
        }
        let pools = sources.pools;
        self.write_endpoints(pools, sources.endpoints, sources.thread_key);
        let context_values_expired = self.write_context_values(pools, sources.context_values);
        self.write_threads(pools, sources.thread);
        let mut frames = FrameNames::new(sources.methods, sources.libraries, &mut *sources.kernel, self.format.dialect);
        self.write_traces(pools, sources.traces, &mut frames);
        drop(frames);
        sources.kernel.end_chunk();
        let duration_nanos = end_mono_ns.saturating_sub(self.start_mono_ns) as i64;
        let end = ChunkEnd { duration_nanos, final_chunk };
        let bytes = self.writer.finish(pools, end, &self.format.attributes);
        Finished { bytes, context_values_expired }
    }

    fn write_endpoints(&mut self, pools: &mut ConstantPools, batch: &Batch, thread_key: &dyn Fn(u32) -> u64) {
        let mut used = HashSet::new();
        for event in &batch.events {
            let thread = thread_key(event.tid);
            self.threads.insert(thread);
            used.insert(event.endpoint);
            used.insert(event.operation);
            self.writer.write(&Endpoint {
                start_ticks: self.ticks.at(event.time_ns),
                thread,
                endpoint: u64::from(event.endpoint),
                operation: u64::from(event.operation),
                local_root_span_id: event.root_span_id,
            });
        }
        for (id, label) in &batch.labels {
            if used.contains(id) {
                pools.string(u64::from(*id), label);
            }
        }
    }

    /// Every context value a sample referenced; one no longer known (it
    /// cannot be, by the carry-over rule, but a missing constant would make
    /// the chunk unreadable) is written empty. Returns how many were.
    fn write_context_values(&self, pools: &mut ConstantPools, values: &HashMap<u32, String>) -> u64 {
        let mut expired = 0;
        for &id in &self.context_values {
            match values.get(&id) {
                Some(text) => pools.attribute_value(u64::from(id), text),
                None => {
                    expired += 1;
                    pools.attribute_value(u64::from(id), "");
                }
            }
        }
        expired
    }

    fn write_threads(&self, pools: &mut ConstantPools, thread: &dyn Fn(u64) -> Option<ThreadInfo>) {
        for &key in &self.threads {
            let info = thread(key);
            let os_name = info.as_ref().map_or("[unknown thread]", |i| i.os_name.as_str());
            pools.thread(
                key,
                &ThreadDef {
                    os_name,
                    os_thread_id: info.as_ref().map_or(0, |i| i64::from(i.tid)),
                    java_name: info.as_ref().map(|i| i.java_name.as_deref().unwrap_or(&i.os_name)),
                    java_thread_id: info.as_ref().map_or(0, |i| i.java_id),
                },
            );
        }
    }

    /// The stack traces the samples reference, most sampled first, keyed
    /// by the pools; the samples' ids become those keys.
    fn write_traces(&mut self, pools: &mut ConstantPools, table: &CallTraceStorage, names: &mut FrameNames<'_>) {
        let mut stored: HashMap<u32, (bool, Vec<Frame>)> = HashMap::new();
        table.for_each_live(|t| {
            if self.traces.contains_key(&t.id.0) {
                stored.insert(t.id.0, (t.truncated, t.frames.to_vec()));
            }
        });
        let mut by_use: Vec<(u32, u64)> = self.traces.iter().map(|(&id, &samples)| (id, samples)).collect();
        by_use.sort_unstable_by_key(|&(id, samples)| (std::cmp::Reverse(samples), id));
        let mut keys = HashMap::with_capacity(by_use.len());
        let mut frames = Vec::new();
        for (id, _) in by_use {
            frames.clear();
            let truncated = match stored.get(&id) {
                Some((truncated, stack)) => {
                    frames.extend(stack.iter().map(|f| names.frame(pools, f)));
                    *truncated
                }
                None => {
                    // The dropped id, or a trace still being published.
                    let reason = if id == TraceId::DROPPED.0 { Marker::StorageFull } else { Marker::TraceUnavailable };
                    frames.push(names.marker(pools, reason.name()));
                    false
                }
            };
            keys.insert(u64::from(id), pools.stack_trace(truncated, &frames));
        }
        // Every sample's id is among the keys: `put` counted it.
        self.writer.renumber_stack_traces(|id| keys.get(&id).copied().unwrap_or(0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::methods::NoMethods;

    /// The last chunk of a session whose sources are `traces` and the
    /// context `values` alone.
    fn finish(chunk: ChunkBuilder, traces: &CallTraceStorage, values: &HashMap<u32, String>) -> Finished {
        let sources = ChunkSources {
            traces,
            methods: &mut NoMethods,
            libraries: None,
            kernel: &mut KernelNames::default(),
            thread: &|_| None,
            thread_key: &|tid| u64::from(tid),
            counters: &[],
            endpoints: &Batch::default(),
            context_values: values,
            pools: &mut ConstantPools::new(),
        };
        chunk.finish(sources, 3_000, true)
    }

    #[test]
    fn a_chunk_comes_from_its_sources_alone_and_reports_unknown_context_values() {
        let format = Format { attributes: vec!["route".to_owned()], ..Format::default() };
        let mut chunk = ChunkBuilder::new(Ticks::starting_at(1_000), 1_000, 0, &[], &format);
        let mut known = SampleRecord { time_ns: 2_000, tid: 7, ..Default::default() };
        known.context.values[0] = 1;
        let mut unknown = known;
        unknown.context.values[0] = 2;
        chunk.add_samples(&[known, unknown], u64::from, |_| 0, |_, size| size);
        let traces = CallTraceStorage::new(64, 1024).unwrap();
        let values = HashMap::from([(1, "/orders".to_owned())]);
        let finished = finish(chunk, &traces, &values);
        assert!(finished.bytes.starts_with(b"FLR\0"));
        assert_eq!(finished.context_values_expired, 1, "value 2 is not among the sources");
    }

    /// Each sample's stack trace key and top frame's bytecode index, as
    /// `jfrs` reads the chunk.
    fn sampled_keys(chunk: &[u8]) -> Vec<(i64, i64)> {
        use jfrs::reader::event::Accessor;
        use jfrs::reader::value_descriptor::{Primitive, ValueDescriptor};
        let mut reader = jfrs::reader::JfrReader::new(std::io::Cursor::new(chunk));
        let (mut events, chunk) = reader.chunks().next().unwrap().unwrap();
        let mut keys = Vec::new();
        for event in events.events(&chunk) {
            let event = event.unwrap();
            let Some(stack) = event.value().get_field_raw("stackTrace") else { continue };
            let &ValueDescriptor::ConstantPool { constant_index, .. } = stack.value else { panic!("not pooled") };
            let top = stack.resolve().and_then(|s| s.get_field("frames")).and_then(Accessor::as_iter).unwrap().next();
            let bci = match top.and_then(|f| f.get_field("bytecodeIndex")).unwrap().value {
                ValueDescriptor::Primitive(Primitive::Integer(bci)) => i64::from(*bci),
                other => panic!("{other:?}"),
            };
            keys.push((constant_index, bci));
        }
        keys.sort_unstable();
        keys
    }

    /// Keys go to the most sampled traces first; stored traces that read
    /// the same (here two jmethodIDs whose methods are both gone) share one.
    #[test]
    fn stack_trace_keys_follow_use_and_content() {
        let traces = CallTraceStorage::new(64, 1024).unwrap();
        let stored = [Frame::java(1, 10), Frame::java(2, 20), Frame::java(3, 30), Frame::java(4, 30)]
            .map(|frame| traces.put(&[frame], false, 0).0);
        let mut records = Vec::new();
        for (trace, samples) in stored.into_iter().zip([1, 5, 2, 2]) {
            records.extend(std::iter::repeat_n(
                SampleRecord { time_ns: 2_000, tid: 7, trace, ..Default::default() },
                samples,
            ));
        }
        let mut chunk = ChunkBuilder::new(Ticks::starting_at(1_000), 1_000, 0, &[], &Format::default());
        chunk.add_samples(&records, u64::from, |_| 0, |_, size| size);
        let finished = finish(chunk, &traces, &HashMap::new());
        let mut expected = vec![(1, 20); 5];
        expected.extend([(2, 30); 4]);
        expected.push((3, 10));
        assert_eq!(sampled_keys(&finished.bytes), expected);
    }

    /// Chunks started at different points within their first tick still
    /// map every tick to one time: a reader may convert all chunks by the
    /// first one's header (the JDK's parser does) and get each chunk's times.
    #[test]
    fn every_chunk_of_a_session_maps_ticks_to_the_same_time() {
        let ticks = Ticks::starting_at(5_000_000_000);
        let epoch_offset = 1_700_000_000_000_000_000i64;
        let origin_epoch = |start_mono_ns: u64| {
            let chunk =
                ChunkBuilder::new(ticks, start_mono_ns, start_mono_ns as i64 + epoch_offset, &[], &Format::default());
            let header = finish(chunk, &CallTraceStorage::new(64, 1024).unwrap(), &HashMap::new()).bytes;
            let field = |at: usize| i64::from_be_bytes(header[at..at + 8].try_into().unwrap());
            let (start_nanos, start_ticks, per_second) = (field(32), field(48), field(56));
            assert_eq!(per_second, TICKS_PER_SECOND);
            start_nanos - start_ticks * (1_000_000_000 / per_second)
        };
        let first = origin_epoch(5_000_000_000);
        assert_eq!(first, 4_000_000_000 + epoch_offset, "tick 0 is the origin");
        for start in [5_000_000_001, 6_000_000_999, 7_123_456_789] {
            assert_eq!(origin_epoch(start), first, "a chunk starting at {start}");
        }
    }

    #[test]
    fn ticks_count_from_a_second_before_the_session() {
        let ticks = Ticks::starting_at(5_000_000_000);
        assert_eq!(ticks.at(5_000_000_000), 1_000_000);
        assert_eq!(ticks.at(5_000_123_999), 1_000_123, "microseconds, rounded down");
        assert_eq!(ticks.at(3_000_000_000), 0, "before the origin");
        assert_eq!(Ticks::starting_at(10_000).at(10_000), 10, "a session in the first second of the clock");
        assert_eq!(Ticks::span(10_000_999), 10_000);
        assert_eq!((Ticks::duration(10_499), Ticks::duration(10_500), Ticks::duration(u64::MAX) > 0), (10, 11, true));
        assert_eq!(ticks.past_tick_start(5_000_123_999), 999);
        assert_eq!(ticks.past_tick_start(3_000_000_001), 0, "before the origin: tick 0 starts there");
    }
}
