//! One self-contained JFR chunk: a 68-byte header, events, then a
//! checkpoint event holding the constant pools and the metadata event.
//!
//! Header (big-endian): magic `FLR\0`, version 2.0, chunk size, offset of
//! the (only) checkpoint, offset of the metadata, start time (epoch ns),
//! duration (ns), start ticks, ticks per second, then a state byte (0 =
//! finished) and a flag byte (bit 0: compressed integers, bit 1: final chunk).
//!
//! The chunks of one file share one tick clock and one [`ConstantPools`]
//! (see [`ChunkClock`] and [`crate::pools`]): readers carry both from one
//! chunk to the next.

use crate::buffer::{decode_varint, varint_len, ByteBuf, PADDED_VARINT_LEN};
use crate::events::{stack_field, Event, Sample, SampleKind, StackIds, MAX_REPEAT};
use crate::metadata::{encode_metadata_body, Kind};
use crate::pools::ConstantPools;
use crate::schema::{self, Dialect};

const MAGIC: &[u8; 4] = b"FLR\0";
const HEADER_SIZE: usize = 68;
const METADATA_EVENT: u64 = 0;
const CHECKPOINT_EVENT: u64 = 1;
const FLAG_COMPRESSED_INTEGERS: i32 = 1;
const FLAG_FINAL_CHUNK: i32 = 2;
const CHECKPOINT_FLUSH: u8 = 1;

/// The clock of a chunk: event timestamps are ticks, and a tick value `t`
/// means `start_nanos + (t - start_ticks) * 1e9 / ticks_per_second`.
///
/// Every chunk of a file must count ticks on one clock (not from 0 per
/// chunk), and every header must map ticks to time alike: a reader may
/// convert the ticks of every chunk with the first chunk's clock. Any
/// frequency reads (the JDK's own recordings tick at the TSC's); the
/// JDK's parser computes `start_nanos + (long) ((t - start_ticks) /
/// (ticks_per_second / 1e9))` in doubles (for microsecond ticks `k /
/// 0.001` rounds to exactly `1000 k` while that is below 2^53).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkClock {
    pub start_nanos: i64,
    pub start_ticks: i64,
    pub ticks_per_second: i64,
}

/// How a chunk ends.
#[derive(Clone, Copy, Debug)]
pub struct ChunkEnd {
    pub duration_nanos: i64,
    /// The last chunk of a recording (sets the header's final-chunk flag).
    pub final_chunk: bool,
}

pub struct ChunkWriter {
    out: ByteBuf,
    scratch: ByteBuf,
    clock: ChunkClock,
    dialect: Dialect,
    stacks: StackIds,
    /// The event types the metadata declares (bit `id`): those written
    /// and those [`Self::declare`]d. Other event types are left out.
    event_types: u128,
}

impl ChunkWriter {
    /// A writer whose samples carry their stack trace keys.
    pub fn new(clock: ChunkClock, dialect: Dialect) -> Self {
        let mut out = ByteBuf::with_capacity(64 * 1024);
        out.put_bytes(&[0; HEADER_SIZE]);
        Self { out, scratch: ByteBuf::new(), clock, dialect, stacks: StackIds::Final, event_types: 0 }
    }

    /// A writer whose samples carry provisional stack ids (below 2^35),
    /// each in five bytes until [`Self::renumber_stack_traces`] replaces
    /// them with their keys: keys can then be chosen once the chunk's
    /// samples are known (the most used traces first, in the shortest
    /// varints).
    pub fn with_provisional_stack_ids(clock: ChunkClock, dialect: Dialect) -> Self {
        Self { stacks: StackIds::Provisional, ..Self::new(clock, dialect) }
    }

    /// Replaces the provisional stack id `id` of every sample written so
    /// far with `key(id)`, shrinking the events in place: a key below
    /// 2^35 takes at most the five bytes of the id it replaces (a larger
    /// one, which pools never give, is written as 0, no stack). Samples
    /// written after this carry their keys. Nothing to do for a writer
    /// made by [`Self::new`].
    pub fn renumber_stack_traces(&mut self, mut key: impl FnMut(u64) -> u64) {
        if self.stacks == StackIds::Final {
            return;
        }
        self.stacks = StackIds::Final;
        let end = self.out.len();
        let (mut read, mut write) = (HEADER_SIZE, HEADER_SIZE);
        let mut payload = ByteBuf::new();
        while read < end {
            let bytes = &self.out.as_slice()[read..end];
            let Some((size, stack_at)) = sample_stack_at(bytes) else {
                // Not an event this writer wrote: what follows is dropped
                // rather than left with provisional ids.
                debug_assert!(false, "an event this writer did not write at offset {read}");
                self.out.truncate(write);
                return;
            };
            let Some(stack_at) = stack_at else {
                self.out.copy_within(read..read + size, write);
                read += size;
                write += size;
                continue;
            };
            let (id, _) = decode_varint(&bytes[stack_at..]).unwrap_or_default();
            payload.clear();
            payload.put_bytes(&bytes[varint_len(size as u64)..stack_at]);
            payload.put_varint(Some(key(id)).filter(|&key| key < 1 << 35).unwrap_or(0));
            payload.put_bytes(&bytes[stack_at + PADDED_VARINT_LEN..size]);
            self.scratch.clear();
            put_sized(&mut self.scratch, payload.as_slice());
            // The event only shrank: it ends at or before where it ended.
            self.out.write_at(write, self.scratch.as_slice());
            read += size;
            write += self.scratch.len();
        }
        self.out.truncate(write);
    }

    /// Declares event types whether or not the chunk writes them: a
    /// recording whose chunks all declare what any of them may write
    /// describes its types alike in every chunk.
    pub fn declare(&mut self, type_ids: &[u64]) {
        for &type_id in type_ids {
            self.note(type_id);
        }
    }

    fn note(&mut self, type_id: u64) {
        self.event_types |= type_bit(type_id);
    }

    fn declares(&self, type_id: u64) -> bool {
        self.event_types & type_bit(type_id) != 0
    }

    /// Bytes of events written so far (excluding the header; provisional
    /// stack ids count their five bytes).
    pub fn event_bytes(&self) -> usize {
        self.out.len() - HEADER_SIZE
    }

    pub fn write<E: Event>(&mut self, event: &E) {
        self.note(E::TYPE_ID);
        self.scratch.clear();
        self.scratch.put_varint(E::TYPE_ID);
        event.write_fields(&mut self.scratch);
        put_sized(&mut self.out, self.scratch.as_slice());
    }

    /// Writes a sample as the dialect spells it. Datadog: one event with
    /// weight and context. JDK: a wall-clock sample once with its weight
    /// as `samples`, an allocation once with its weight in bytes as
    /// `weight`, a CPU sample once per interval it stands for (at most
    /// [`MAX_REPEAT`] times; readers count CPU samples), each followed by
    /// its context, if it has any, as a `jvmprofiler.SampleContext`.
    pub fn sample(&mut self, sample: &Sample<'_>) {
        if self.dialect == Dialect::Datadog && matches!(sample.kind, SampleKind::Free { .. }) {
            // The Datadog profiler has no free event.
            return;
        }
        self.note(sample.type_id());
        self.scratch.clear();
        self.scratch.put_varint(sample.type_id());
        match self.dialect {
            Dialect::Datadog => {
                sample.write_datadog(&mut self.scratch, self.stacks);
                put_sized(&mut self.out, self.scratch.as_slice());
            }
            Dialect::Jdk => {
                sample.write_jdk(&mut self.scratch, self.stacks);
                let mut context = ByteBuf::new();
                if sample.has_context() {
                    self.note(schema::id::SAMPLE_CONTEXT);
                    context.put_varint(schema::id::SAMPLE_CONTEXT);
                    sample.write_context_event(&mut context);
                }
                let times = match sample.kind {
                    SampleKind::Cpu => sample.weight.clamp(1, MAX_REPEAT),
                    SampleKind::Wall
                    | SampleKind::Alloc { .. }
                    | SampleKind::Live { .. }
                    | SampleKind::Lock { .. }
                    | SampleKind::Park { .. }
                    | SampleKind::Malloc { .. }
                    | SampleKind::Free { .. } => 1,
                };
                for _ in 0..times {
                    put_sized(&mut self.out, self.scratch.as_slice());
                    if !context.is_empty() {
                        put_sized(&mut self.out, context.as_slice());
                    }
                }
            }
        }
    }

    /// Appends the constant pools (ending their chunk) and the metadata
    /// (every type but the events neither written nor declared, with the
    /// context `attributes` as fields), fills in the header and returns the
    /// complete chunk.
    pub fn finish(mut self, pools: &mut ConstantPools, end: ChunkEnd, attributes: &[String]) -> Vec<u8> {
        let checkpoint_offset = self.out.len();
        let mut body = ByteBuf::new();
        body.put_varint(CHECKPOINT_EVENT);
        body.put_varint_signed(self.clock.start_ticks);
        body.put_varint(0); // duration
        body.put_varint(0); // delta to the previous checkpoint: none
        body.put_u8(CHECKPOINT_FLUSH);
        pools.encode_chunk(&mut body);
        put_sized(&mut self.out, body.as_slice());

        let metadata_offset = self.out.len();
        let mut types = schema::types(self.dialect);
        types.retain(|t| t.kind != Kind::Event || self.declares(t.id));
        let metadata =
            encode_metadata_body(&types, &schema::ANNOTATIONS, &schema::extensions(self.dialect, attributes));
        body.clear();
        body.put_varint(METADATA_EVENT);
        body.put_varint_signed(self.clock.start_ticks);
        body.put_varint(0); // duration
        body.put_varint(metadata_id(&metadata));
        body.put_bytes(&metadata);
        put_sized(&mut self.out, body.as_slice());

        let chunk_size = self.out.len() as i64;
        let mut header = ByteBuf::with_capacity(HEADER_SIZE);
        header.put_bytes(MAGIC);
        header.put_be_u16(2);
        header.put_be_u16(0);
        header.put_be_i64(chunk_size);
        header.put_be_i64(checkpoint_offset as i64);
        header.put_be_i64(metadata_offset as i64);
        header.put_be_i64(self.clock.start_nanos);
        header.put_be_i64(end.duration_nanos.max(0));
        header.put_be_i64(self.clock.start_ticks);
        header.put_be_i64(self.clock.ticks_per_second);
        let flags = FLAG_COMPRESSED_INTEGERS | if end.final_chunk { FLAG_FINAL_CHUNK } else { 0 };
        header.put_be_i32(flags);
        debug_assert_eq!(header.len(), HEADER_SIZE);
        let mut bytes = self.out.into_vec();
        bytes[..HEADER_SIZE].copy_from_slice(header.as_slice());
        bytes
    }
}

/// An event type's bit in [`ChunkWriter::event_types`]: event type ids
/// are below 128 (`schema`'s tests check it; a writer in the host JVM
/// does not abort for one past it).
fn type_bit(type_id: u64) -> u128 {
    debug_assert!(type_id < 128, "event type id {type_id} past 127");
    1u128.checked_shl(type_id as u32).unwrap_or(0)
}

/// The metadata's id: the JDK's parser reuses the previous chunk's
/// metadata (and parsers) when the ids are equal, so equal ids must mean
/// equal metadata. A hash of the content, positive and non-zero.
fn metadata_id(metadata: &[u8]) -> u64 {
    let hash = metadata.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    (hash >> 1).max(1)
}

/// The size of the event `bytes` start with and, for a sample, the offset
/// of its stack trace field; `None` if the bytes end first.
fn sample_stack_at(bytes: &[u8]) -> Option<(usize, Option<usize>)> {
    let (size, size_len) = decode_varint(bytes)?;
    let size = usize::try_from(size).ok().filter(|&s| s > size_len && s <= bytes.len())?;
    let (type_id, type_len) = decode_varint(&bytes[size_len..size])?;
    let Some(before) = stack_field(type_id) else {
        return Some((size, None));
    };
    let mut at = size_len + type_len;
    for _ in 0..before {
        at += decode_varint(bytes.get(at..size)?)?.1;
    }
    (at + PADDED_VARINT_LEN <= size).then_some((size, Some(at)))
}

/// Writes an event: its total size (which counts the size field itself)
/// followed by `payload`.
fn put_sized(out: &mut ByteBuf, payload: &[u8]) {
    let mut size = payload.len() as u64 + 1;
    while varint_len(size) + payload.len() != size as usize {
        size = (payload.len() + varint_len(size)) as u64;
    }
    out.put_varint(size);
    out.put_bytes(payload);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::ActiveSetting;

    /// The type ids of the events before the checkpoint.
    fn event_types(chunk: &[u8]) -> Vec<u64> {
        let checkpoint = i64::from_be_bytes(chunk[16..24].try_into().unwrap()) as usize;
        let mut at = HEADER_SIZE;
        let mut types = Vec::new();
        while at < checkpoint {
            let (size, used) = crate::buffer::decode_varint(&chunk[at..]).unwrap();
            types.push(crate::buffer::decode_varint(&chunk[at + used..]).unwrap().0);
            at += size as usize;
        }
        types
    }

    fn chunk_of(dialect: Dialect, samples: &[Sample<'_>]) -> Vec<u8> {
        let clock = ChunkClock { start_nanos: 0, start_ticks: 0, ticks_per_second: 1_000_000_000 };
        let mut writer = ChunkWriter::new(clock, dialect);
        for sample in samples {
            writer.sample(sample);
        }
        writer.finish(&mut ConstantPools::new(), ChunkEnd { duration_nanos: 1, final_chunk: true }, &[])
    }

    #[test]
    fn the_jdk_dialect_repeats_weighted_cpu_samples_and_adds_context() {
        use crate::schema::{id, ThreadState};
        let cpu = Sample {
            kind: SampleKind::Cpu,
            start_ticks: 1,
            thread: 1,
            stack_trace: 2,
            state: ThreadState::Default,
            weight: 3,
            span_id: 0,
            local_root_span_id: 0,
            context: &[0],
        };
        let traced = Sample { weight: 1, span_id: 9, ..cpu };
        let wall = Sample { kind: SampleKind::Wall, weight: 5, context: &[4], ..cpu };
        let alloc = Sample { kind: SampleKind::Alloc { class: 3, size: 1024 }, weight: 1 << 19, ..cpu };
        let lock = Sample { kind: SampleKind::Lock { class: 3, duration_ticks: 5_000_000 }, ..cpu };
        let park_kind = SampleKind::Park { class: 3, duration_ticks: 5_000_000, timeout_ns: None, until_ms: Some(7) };
        let park = Sample { kind: park_kind, ..cpu };
        let live_kind = SampleKind::Live { class: 3, size: 1024, allocation_ticks: 1, age: 2 };
        let live = Sample { kind: live_kind, weight: 1 << 19, ..cpu };
        let malloc = Sample { kind: SampleKind::Malloc { address: 1 << 20, size: 64 }, weight: 1 << 19, ..cpu };
        let free = Sample { kind: SampleKind::Free { address: 1 << 20 }, ..cpu };
        let huge = Sample { weight: u64::MAX, ..cpu };
        let (e, c, w) = (id::EXECUTION_SAMPLE, id::SAMPLE_CONTEXT, id::METHOD_SAMPLE);
        let traced_twice = Sample { weight: 2, ..traced };
        let (a, m, p, l) = (id::ALLOCATION_SAMPLE, id::MONITOR_ENTER, id::THREAD_PARK, id::LIVE_OBJECT);
        assert_eq!(
            event_types(&chunk_of(Dialect::Jdk, &[cpu, traced_twice, wall, alloc, lock, park, live, malloc, free])),
            [e, e, e, e, c, e, c, w, c, a, m, p, l, id::MALLOC, id::FREE]
        );
        assert_eq!(
            event_types(&chunk_of(Dialect::Datadog, &[cpu, traced_twice, wall, alloc, lock, park, live, malloc, free])),
            [e, e, w, a, m, p, l, id::MALLOC]
        );
        assert_eq!(event_types(&chunk_of(Dialect::Jdk, &[huge])).len() as u64, MAX_REPEAT);
    }

    /// Samples of every kind, each of whose stack ids is `stack(i)`.
    fn every_kind(stack: impl Fn(u64) -> u64) -> Vec<Sample<'static>> {
        use crate::schema::ThreadState;
        let cpu = Sample {
            kind: SampleKind::Cpu,
            start_ticks: 1 << 40,
            thread: 300,
            stack_trace: stack(0),
            state: ThreadState::Default,
            weight: 2,
            span_id: 9,
            local_root_span_id: 0,
            context: &[4],
        };
        let park = SampleKind::Park { class: 3, duration_ticks: 5_000_000, timeout_ns: None, until_ms: Some(7) };
        let kinds = [
            SampleKind::Wall,
            SampleKind::Alloc { class: 3, size: 1024 },
            SampleKind::Lock { class: 3, duration_ticks: 5_000_000 },
            park,
            SampleKind::Live { class: 3, size: 1024, allocation_ticks: 1, age: 2 },
            SampleKind::Malloc { address: 0x7f00_0000_1000, size: 4096 },
            SampleKind::Free { address: 0x7f00_0000_1000 },
        ];
        let mut samples = vec![cpu];
        for (i, kind) in kinds.into_iter().enumerate() {
            samples.push(Sample { kind, stack_trace: stack(i as u64 + 1), ..cpu });
        }
        // A payload near 127 bytes, whose size field shrinks with its id.
        samples.push(Sample { stack_trace: stack(8), span_id: u64::MAX, local_root_span_id: u64::MAX, ..cpu });
        samples
    }

    #[test]
    fn renumbered_stack_ids_give_the_chunk_written_with_the_keys() {
        let ids = [1u64 << 34, 200, 3, 70_000, 5, 128, 11, 12, 9];
        let keys = [1u64, 300, 2, 1 << 30, 127, 128, 7, 8, 100_000];
        let key_of = |id: u64| keys[ids.iter().position(|&i| i == id).unwrap()];
        let end = ChunkEnd { duration_nanos: 1, final_chunk: true };
        for dialect in [Dialect::Jdk, Dialect::Datadog] {
            let clock = ChunkClock { start_nanos: 0, start_ticks: 0, ticks_per_second: 1_000_000_000 };
            let mut provisional = ChunkWriter::with_provisional_stack_ids(clock, dialect);
            let mut direct = ChunkWriter::new(clock, dialect);
            let setting = ActiveSetting { start_ticks: 1, event_type: 2, name: "a", value: "b" };
            provisional.write(&setting);
            direct.write(&setting);
            for (sample, keyed) in every_kind(|i| ids[i as usize]).iter().zip(every_kind(|i| keys[i as usize])) {
                provisional.sample(sample);
                direct.sample(&keyed);
            }
            let padded = provisional.event_bytes();
            provisional.renumber_stack_traces(key_of);
            assert!(provisional.event_bytes() < padded);
            // Later samples carry their keys.
            let later = Sample { stack_trace: 5, ..every_kind(|_| 5)[0] };
            provisional.sample(&later);
            direct.sample(&later);
            let renumbered = provisional.finish(&mut ConstantPools::new(), end, &[]);
            assert_eq!(renumbered, direct.finish(&mut ConstantPools::new(), end, &[]), "{dialect:?}");
        }
    }

    #[test]
    fn a_key_too_long_for_its_place_is_written_as_no_stack() {
        let clock = ChunkClock { start_nanos: 0, start_ticks: 0, ticks_per_second: 1_000_000_000 };
        let end = ChunkEnd { duration_nanos: 1, final_chunk: true };
        let mut provisional = ChunkWriter::with_provisional_stack_ids(clock, Dialect::Jdk);
        let mut direct = ChunkWriter::new(clock, Dialect::Jdk);
        for (sample, keyed) in every_kind(|i| i + 1).iter().zip(every_kind(|_| 0)) {
            provisional.sample(sample);
            direct.sample(&keyed);
        }
        provisional.renumber_stack_traces(|_| 1 << 35);
        let renumbered = provisional.finish(&mut ConstantPools::new(), end, &[]);
        assert_eq!(renumbered, direct.finish(&mut ConstantPools::new(), end, &[]));
    }

    #[test]
    fn a_writer_with_keys_has_nothing_to_renumber() {
        let clock = ChunkClock { start_nanos: 0, start_ticks: 0, ticks_per_second: 1_000_000_000 };
        let mut writer = ChunkWriter::new(clock, Dialect::Jdk);
        for sample in every_kind(|i| i + 1) {
            writer.sample(&sample);
        }
        let before = writer.out.as_slice().to_vec();
        writer.renumber_stack_traces(|_| panic!("no provisional ids"));
        assert_eq!(writer.out.as_slice(), before);
    }

    /// The metadata declares every type but the events the chunk neither
    /// wrote nor declared.
    #[test]
    fn metadata_declares_the_events_written_or_declared() {
        let clock = ChunkClock { start_nanos: 0, start_ticks: 0, ticks_per_second: 1_000_000 };
        let mut writer = ChunkWriter::new(clock, Dialect::Jdk);
        writer.declare(&[schema::id::THREAD_PARK]);
        let cpu = every_kind(|_| 1)[0];
        writer.sample(&Sample { context: &[], span_id: 0, ..cpu });
        writer.write(&ActiveSetting {
            start_ticks: 0,
            event_type: schema::id::EXECUTION_SAMPLE,
            name: "a",
            value: "b",
        });
        let chunk = writer.finish(&mut ConstantPools::new(), ChunkEnd { duration_nanos: 1, final_chunk: true }, &[]);
        let metadata = &chunk[i64::from_be_bytes(chunk[24..32].try_into().unwrap()) as usize..];
        let declares = |name: &str| metadata.windows(name.len()).any(|w| w == name.as_bytes());
        for name in
            ["jdk.ExecutionSample", "jdk.ThreadPark", "jdk.ActiveSetting", "jdk.types.StackTrace", "java.lang.Thread"]
        {
            assert!(declares(name), "{name} is declared");
        }
        for name in [
            "profiler.WallClockSample",
            "jdk.ObjectAllocationSample",
            "jdk.JavaMonitorEnter",
            "profiler.LiveObject",
            "jvmprofiler.SampleContext",
            "jvmprofiler.Endpoint",
            "jvmprofiler.Counter",
            "jdk.NativeLibrary",
        ] {
            assert!(!declares(name), "{name} is neither written nor declared");
        }
    }

    #[test]
    fn metadata_ids_follow_the_content() {
        let metadata = |dialect, attributes: &[String]| {
            metadata_id(&encode_metadata_body(
                &schema::types(dialect),
                &schema::ANNOTATIONS,
                &schema::extensions(dialect, attributes),
            ))
        };
        let none: &[String] = &[];
        assert_eq!(metadata(Dialect::Jdk, none), metadata(Dialect::Jdk, none));
        assert_ne!(metadata(Dialect::Jdk, none), metadata(Dialect::Datadog, none));
        assert_ne!(metadata(Dialect::Jdk, none), metadata(Dialect::Jdk, &["route".to_owned()]));
    }

    #[test]
    fn event_size_counts_its_own_varint() {
        for len in [0usize, 1, 125, 126, 127, 128, 16_380, 16_381, 16_382, 16_383, 20_000] {
            let payload = vec![7u8; len];
            let mut out = ByteBuf::new();
            put_sized(&mut out, &payload);
            let bytes = out.as_slice();
            let mut size = 0u64;
            let mut used = 0;
            for (i, b) in bytes.iter().enumerate() {
                size |= u64::from(b & 0x7f) << (7 * i);
                if b & 0x80 == 0 {
                    used = i + 1;
                    break;
                }
            }
            assert_eq!(size as usize, bytes.len(), "payload {len}");
            assert_eq!(used + len, bytes.len());
        }
    }
}
