//! Reading recordings written by `jfr-writer` and converting them.

use frames::FrameType;
use jfr_writer::*;
use symbolizer::events::EventKind;
use symbolizer::{collapsed, flamegraph, profile, recording};

fn sample_recording() -> Vec<u8> {
    recording_with(|_, _| {})
}

/// The CPU samples of [`sample_recording`], plus whatever `more` writes
/// (thread 1 and stack traces 1 and 2 exist).
fn recording_with(more: impl FnOnce(&mut ChunkWriter, &mut ConstantPools)) -> Vec<u8> {
    let clock = ChunkClock { start_nanos: 0, start_ticks: 0, ticks_per_second: 1_000_000 };
    let mut chunk = ChunkWriter::new(clock, Dialect::Datadog);
    let mut pools = ConstantPools::new();
    let method = |pools: &mut ConstantPools, key: u64, class: &str, name: &str| {
        pools.method(key, |p| MethodDef {
            class: p.class(class, 1),
            name: p.symbol(name),
            descriptor: p.symbol("()V"),
            modifiers: 1,
            hidden: false,
        })
    };
    let main = method(&mut pools, 1, "app/Main", "main");
    let work = method(&mut pools, 2, "app/Main", "work");
    let native = method(&mut pools, 3, "", "memcpy");
    let frame = |method, frame_type| FrameDef { method, line: 1, bci: 0, frame_type };
    let first = pools.stack_trace(false, &[frame(work, FrameType::JitCompiled), frame(main, FrameType::Interpreted)]);
    let second = pools.stack_trace(
        false,
        &[frame(native, FrameType::Native), frame(work, FrameType::JitCompiled), frame(main, FrameType::Interpreted)],
    );
    pools.thread(1, &ThreadDef { os_name: "main", os_thread_id: 10, java_name: Some("main"), java_thread_id: 1 });
    for (trace, weight) in [(first, 1), (first, 2), (second, 1)] {
        chunk.sample(&Sample {
            kind: SampleKind::Cpu,
            start_ticks: 0,
            thread: 1,
            stack_trace: trace,
            state: ThreadState::Runnable,
            weight,
            span_id: 0,
            local_root_span_id: 0,
            context: &[],
        });
    }
    more(&mut chunk, &mut pools);
    chunk.finish(&mut pools, ChunkEnd { duration_nanos: 1, final_chunk: true }, &[])
}

fn write_temp(name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("symbolizer-{}-{name}", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn collapsed_stacks_sum_weights_per_stack() {
    let path = write_temp("c.jfr", &sample_recording());
    let outcome = recording::read(&path).unwrap();
    assert!(outcome.damage.is_empty(), "{:?}", outcome.damage);
    let (profile, report) = profile::build(&outcome.recording, EventKind::Cpu, None);
    assert_eq!(profile.total_weight(), 4);
    assert!(report.categories.is_empty());
    assert_eq!(
        collapsed::collapse(&profile, false),
        "app.Main.main;app.Main.work 3\napp.Main.main;app.Main.work;memcpy 1\n"
    );
    assert_eq!(
        collapsed::collapse(&profile, true),
        "main;app.Main.main;app.Main.work 3\nmain;app.Main.main;app.Main.work;memcpy 1\n"
    );
}

#[test]
fn flamegraph_embeds_frames_and_weights() {
    let path = write_temp("f.jfr", &sample_recording());
    let outcome = recording::read(&path).unwrap();
    let (profile, _) = profile::build(&outcome.recording, EventKind::Cpu, None);
    let html = flamegraph::render(&profile, "t<1>", false);
    assert!(html.contains("\"app.Main.work\"") && html.contains("\"memcpy\""));
    assert!(html.contains("<title>t&lt;1&gt;</title>"));
    assert!(html.contains("const NODE_TOTAL = [4,4,4,1];"), "root, main, work, memcpy");
    assert!(html.contains("const UNITS = \"samples\";"));
    assert!(!html.contains("%NAMES%") && !html.contains("%NODE_"), "every placeholder filled");
}

#[test]
fn truncated_recording_is_reported_not_fatal() {
    let mut bytes = sample_recording();
    bytes.extend_from_slice(&sample_recording()[..200]);
    let path = write_temp("t.jfr", &bytes);
    let outcome = recording::read(&path).unwrap();
    assert_eq!(outcome.recording.samples().map(|s| s.weight).sum::<u64>(), 4, "the complete first chunk is kept");
    assert_eq!(outcome.damage.len(), 1, "the broken second chunk is reported");
    assert_eq!(outcome.damage[0].chunk, 1);
    assert!(outcome.damage[0].last && outcome.damage[0].message.contains("cut short"), "{}", outcome.damage[0]);
}

#[test]
fn missing_file_is_a_clear_error() {
    let error = recording::read(std::path::Path::new("/nonexistent/x.jfr")).err().unwrap();
    assert!(error.to_string().contains("cannot read /nonexistent/x.jfr"));
}

/// `symbolize jfr` keeps every event kind it reads: wall-clock samples stay
/// wall-clock samples, endpoints are carried over with their labels.
#[test]
fn the_jfr_copy_keeps_wall_clock_samples_and_endpoints() {
    let bytes = recording_with(|chunk, pools| {
        let sample = |start_ticks, weight| Sample {
            kind: SampleKind::Wall,
            start_ticks,
            thread: 1,
            stack_trace: 2,
            state: ThreadState::Sleeping,
            weight,
            span_id: 7,
            local_root_span_id: 8,
            context: &[],
        };
        chunk.sample(&sample(5, 10));
        chunk.sample(&sample(6, 20));
        pools.string(1, "GET /users");
        pools.string(2, "servlet.request");
        chunk.write(&Endpoint { start_ticks: 9, thread: 1, endpoint: 1, operation: 2, local_root_span_id: 8 });
    });
    let original = recording::read(&write_temp("w.jfr", &bytes)).unwrap().recording;
    let copy_path = write_temp("w-copy.jfr", &symbolizer::jfr_out::rewrite(&original, None));
    let outcome = recording::read(&copy_path).unwrap();
    assert!(outcome.damage.is_empty(), "{:?}", outcome.damage);
    let summary = |r: &recording::Recording| {
        r.samples().map(|s| (s.event, s.weight, r.state(s).to_owned(), r.stack(s).frames.len())).collect::<Vec<_>>()
    };
    assert_eq!(summary(&outcome.recording), summary(&original));
    assert_eq!(summary(&original).iter().filter(|s| s.0 == "datadog.MethodSample").count(), 2);
    let endpoints: Vec<_> = outcome.recording.chunks.iter().flat_map(|c| c.endpoints.clone()).collect();
    assert_eq!(endpoints, original.chunks[0].endpoints);
    assert_eq!(
        (endpoints[0].endpoint.as_str(), endpoints[0].operation.as_str(), endpoints[0].root_span_id),
        ("GET /users", "servlet.request", 8)
    );
    assert_eq!(endpoints[0].thread.java_name.as_deref(), Some("main"));
}
