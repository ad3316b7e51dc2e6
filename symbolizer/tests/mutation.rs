//! The reader of recordings against damaged files: recordings of every
//! event kind, in both dialects, three chunks each, mutated (bit flips,
//! truncations, inflated lengths, insertions) for a few seconds with a
//! fixed seed. No case may panic, hang or allocate more than a bounded
//! multiple of its size; a case is read or refused, and what is read of
//! the chunks before the first damaged byte is exactly the original. The
//! profile, pprof and JFR writers and the leak filter run on whatever was
//! read.

use frames::FrameType;
use jfr_writer::*;
use mutation::{Campaign, Case};
use std::time::Duration;
use symbolizer::events::EventKind;
use symbolizer::recording::{self, Recording};
use symbolizer::{collapsed, jfr_out, leaks, pprof, profile};

#[global_allocator]
static ALLOC: mutation::Metered = mutation::Metered;

const TICKS_PER_SECOND: i64 = 1_000_000_000;

/// One chunk with samples of every kind, context, an endpoint, settings,
/// a counter and a native library.
fn chunk(dialect: Dialect, pools: &mut ConstantPools, index: i64, final_chunk: bool) -> Vec<u8> {
    let clock =
        ChunkClock { start_nanos: 1_000 + index * 100, start_ticks: index * 100, ticks_per_second: TICKS_PER_SECOND };
    let mut chunk = ChunkWriter::new(clock, dialect);
    let method = |pools: &mut ConstantPools, key: u64, class: &str, name: &str| {
        pools.method(key, |p| MethodDef {
            class: p.class(class, 1),
            name: p.symbol(name),
            descriptor: p.symbol("()V"),
            modifiers: 1,
            hidden: false,
        })
    };
    let main = method(pools, 1, "app/Main", "main");
    let work = method(pools, 2, "app/Main", "work");
    let native = method(pools, 3, "", "memcpy");
    let frame = |method, frame_type| FrameDef { method, line: 7, bci: 3, frame_type };
    let first = pools.stack_trace(false, &[frame(work, FrameType::JitCompiled), frame(main, FrameType::Interpreted)]);
    let second = pools.stack_trace(true, &[frame(native, FrameType::Native), frame(work, FrameType::Inlined)]);
    pools.thread(1, &ThreadDef { os_name: "main", os_thread_id: 10, java_name: Some("main"), java_thread_id: 1 });
    pools.thread(2, &ThreadDef { os_name: "worker", os_thread_id: 11, java_name: None, java_thread_id: 0 });
    pools.attribute_value(1, "GET /users");
    pools.string(1, "GET /users");
    pools.string(2, "servlet.request");
    let class = pools.class("[B", 1).key();
    let start = index * 100;
    chunk.write(&ActiveSetting { start_ticks: start, event_type: 0, name: "attributes", value: "route" });
    chunk.write(&ActiveSetting { start_ticks: start, event_type: 0, name: "interval", value: "10000000 ns" });
    chunk.write(&NativeLibrary {
        start_ticks: start,
        name: "/opt/lib/libfoo.so",
        base_address: 0x7000_0000,
        top_address: 0x7010_0000,
        build_id: Some("abcdef0123456789"),
        load_bias: 0x7000_0000,
    });
    let kinds = [
        SampleKind::Cpu,
        SampleKind::Wall,
        SampleKind::Alloc { class, size: 4096 },
        SampleKind::Lock { class, duration_ticks: 5_000 },
        SampleKind::Malloc { address: 0x7f00_1000 + index as u64, size: 4096 },
        // No stack; the Datadog dialect has no free (its writer drops it).
        SampleKind::Free { address: 0x7f00_1000 },
    ];
    for (i, kind) in kinds.into_iter().enumerate() {
        for (n, trace) in [(0, first), (1, second)] {
            chunk.sample(&Sample {
                kind,
                start_ticks: start + i as i64,
                thread: 1 + n,
                stack_trace: trace,
                state: ThreadState::Runnable,
                weight: 1 + i as u64,
                span_id: 7 * (n + 2),
                local_root_span_id: 8,
                context: &[n],
            });
        }
    }
    chunk.write(&Endpoint { start_ticks: start + 9, thread: 1, endpoint: 1, operation: 2, local_root_span_id: 8 });
    chunk.write(&ProfilerCounter { start_ticks: start + 9, name: "samples", count: 8 });
    chunk.finish(pools, ChunkEnd { duration_nanos: 90, final_chunk }, &["route".to_owned()])
}

fn recording(dialect: Dialect) -> Vec<u8> {
    let mut pools = ConstantPools::new();
    (0..3).flat_map(|i| chunk(dialect, &mut pools, i, i == 2)).collect()
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    vec![("datadog".to_owned(), recording(Dialect::Datadog)), ("jdk".to_owned(), recording(Dialect::Jdk))]
}

/// The chunks' offsets in an undamaged recording.
fn chunk_offsets(file: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut at = 0;
    while at < file.len() {
        offsets.push(at);
        at += u64::from_be_bytes(file[at + 8..at + 16].try_into().unwrap()) as usize;
    }
    offsets
}

/// Everything the first `chunks` chunks' reading produced, comparable.
fn summary(recording: &Recording, chunks: usize) -> String {
    summary_of(recording, 0..chunks)
}

fn summary_of(recording: &Recording, chunks: std::ops::Range<usize>) -> String {
    let chunks = recording.chunks.get(chunks).unwrap_or_default();
    let samples = |c: &recording::Chunk| c.samples.iter().map(|s| recording.data(s)).collect::<Vec<_>>();
    let frees = |c: &recording::Chunk| {
        c.frees
            .iter()
            .map(|f| (f.start_ticks, f.address, f.after, &recording.threads[f.thread as usize]))
            .collect::<Vec<_>>()
    };
    format!("{:?}", chunks.iter().map(|c| (samples(c), frees(c), &c.libraries, &c.settings)).collect::<Vec<_>>())
}

fn check(case: &Case<'_>) {
    let outcome = match recording::read_bytes(case.data, case.seed) {
        Ok(outcome) => outcome,
        Err(error) => {
            assert!(!case.mutations.is_empty(), "an undamaged seed is refused: {error}");
            return;
        }
    };
    let original = recording::read_bytes(case.original, case.seed).expect("the seed reads");
    if case.mutations.is_empty() {
        assert!(outcome.damage.is_empty(), "{:?}", outcome.damage);
        assert_eq!(outcome.recording.chunks.len(), 3);
    }
    // The chunks that end before the first changed byte read as before.
    let ends = chunk_offsets(case.original).into_iter().skip(1).chain([case.original.len()]);
    let intact = ends.filter(|&end| end <= case.first_change()).count();
    assert!(outcome.damage.iter().all(|d| d.chunk >= intact), "an intact chunk reported damaged: {:?}", outcome.damage);
    assert_eq!(
        summary(&outcome.recording, intact),
        summary(&original.recording, intact),
        "intact chunks read differently"
    );
    // Whatever was read goes through every writer.
    for kind in EventKind::ALL {
        let (profile, _) = profile::build(&outcome.recording, kind, None);
        let _ = collapsed::collapse(&profile, true);
        let _ = pprof::encode(&pprof::to_pprof(&profile, 10));
    }
    let copy = jfr_out::rewrite(&outcome.recording, None);
    let reread = recording::read_bytes(&copy, "copy").expect("the copy of what was read reads");
    assert!(reread.damage.is_empty());
    let mut read = outcome.recording;
    leaks::keep_leaks(&mut read, 0.1);
    let _ = profile::build(&read, EventKind::NativeMem, None);
}

#[test]
fn damaged_recordings_are_read_or_refused_never_misread() {
    // Reading, profiles and a JFR copy together stay within a few dozen
    // times the input (about 27 times at most measured).
    let report = Campaign::new("symbolizer reader", seeds())
        .budget(Duration::from_secs(4))
        .memory(|len| 64 * len + (1 << 20))
        .run(check);
    assert!(report.cases > 100, "{report:?}");
}

/// Every single-bit flip of the header and of the start of the first
/// event, and every truncation length of a small recording: the
/// exhaustive neighbour of the random campaign.
#[test]
fn every_truncation_and_every_header_bit() {
    let file = recording(Dialect::Datadog);
    let first = chunk_offsets(&file)[1];
    for len in 0..file.len() {
        match recording::read_bytes(&file[..len], "cut") {
            Ok(outcome) => {
                assert!(len >= first, "a cut inside the first chunk read: {len}");
                let at_boundary = chunk_offsets(&file).contains(&len);
                assert_eq!(outcome.damage.is_empty(), at_boundary, "cut at {len}: {:?}", outcome.damage);
                assert!(
                    outcome.damage.iter().all(|d| d.last && d.message.contains("cut short")),
                    "{:?}",
                    outcome.damage
                );
            }
            Err(e) => assert!(len < first, "cut at {len} of {}: {e}", file.len()),
        }
    }
    for bit in 0..(80 * 8) {
        let mut damaged = file.clone();
        damaged[bit / 8] ^= 1 << (bit % 8);
        let _ = recording::read_bytes(&damaged, "flipped");
    }
}

/// The undamaged seeds read by `jfrs` (an independent reader): the same
/// sample events, threads and frames as ours.
#[test]
fn seeds_read_like_jfrs_reads_them() {
    use jfrs::reader::event::Accessor;
    fn string(accessor: Option<Accessor<'_>>) -> String {
        let Some(value) = accessor.and_then(Accessor::resolve) else { return String::new() };
        if let Ok(s) = <&str>::try_from(value.value) {
            return s.to_owned();
        }
        string(value.get_field("string").or_else(|| value.get_field("name")))
    }
    for (name, bytes) in seeds() {
        let mut theirs = Vec::new();
        let mut reader = jfrs::reader::JfrReader::new(std::io::Cursor::new(&bytes));
        for chunk in reader.chunks() {
            let (mut chunk_reader, chunk) = chunk.unwrap();
            for event in chunk_reader.events(&chunk) {
                let event = event.unwrap();
                if symbolizer::events::event_type(event.class.name()).is_none() {
                    continue;
                }
                let value = event.value();
                let thread = value.get_field("eventThread").or_else(|| value.get_field("sampledThread"));
                let thread = thread.and_then(Accessor::resolve);
                let thread =
                    [thread.as_ref().and_then(|t| t.get_field("javaName")), thread.and_then(|t| t.get_field("osName"))]
                        .into_iter()
                        .map(string)
                        .find(|s| !s.is_empty())
                        .unwrap_or_default();
                let frames: Vec<String> = value
                    .get_field("stackTrace")
                    .and_then(|s| s.get_field("frames"))
                    .and_then(Accessor::as_iter)
                    .map(|frames| {
                        frames.map(|f| string(f.get_field("method").and_then(|m| m.get_field("name")))).collect()
                    })
                    .unwrap_or_default();
                theirs.push((event.class.name().to_owned(), thread, frames));
            }
        }
        let ours = recording::read_bytes(&bytes, &name).unwrap().recording;
        let ours: Vec<_> = ours
            .samples()
            .map(|s| {
                let frames = ours.frames_of(s).map(|f| f.method.clone()).collect::<Vec<_>>();
                (s.event.to_owned(), ours.thread(s).name().to_owned(), frames)
            })
            .collect();
        assert!(ours.len() >= 24, "{name}: {} samples", ours.len());
        assert_eq!(ours, theirs, "{name}");
    }
}

/// Every event's size field (including the metadata's and the
/// checkpoint's) of every seed's first chunk set to 0, 1, one more, one
/// less and the largest value its varint width holds: the chunk is
/// refused or reads, the chunks after it read as before.
#[test]
fn every_event_size_damaged() {
    use jfr_writer::buffer::decode_varint;
    for (name, file) in seeds() {
        let original = recording::read_bytes(&file, &name).unwrap().recording;
        let end = chunk_offsets(&file)[1];
        let mut at = 68;
        let mut events = 0;
        while at < end {
            let (size, width) = decode_varint(&file[at..]).unwrap();
            let max = (1u64 << (7 * width as u32).min(63)) - 1;
            for value in [0, 1, size + 1, size - 1, max] {
                if value > max {
                    continue;
                }
                let mut damaged = file.clone();
                for i in 0..width {
                    let more = if i + 1 < width { 0x80 } else { 0 };
                    damaged[at + i] = ((value >> (7 * i)) & 0x7f) as u8 | more;
                }
                let outcome = recording::read_bytes(&damaged, &name).expect("the later chunks read");
                let later = outcome.recording.chunks.len() - 2;
                assert_eq!(
                    summary_of(&outcome.recording, later..later + 2),
                    summary_of(&original, 1..3),
                    "{name}: event at {at} sized {value}"
                );
            }
            at += size as usize;
            events += 1;
        }
        assert!(events >= 15, "{name}: {events} events");
    }
}
