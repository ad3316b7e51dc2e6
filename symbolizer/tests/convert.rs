//! Reading recordings written by `jfr-writer` and converting them.

use jfr_writer::*;
use symbolizer::{collapsed, flamegraph, profile, recording};

fn sample_recording() -> Vec<u8> {
    let clock = ChunkClock { start_nanos: 0, start_ticks: 0, ticks_per_second: 1_000_000 };
    let mut chunk = ChunkWriter::new(clock);
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
    pools.stack_trace(2, false, &[frame(work, FrameType::JitCompiled), frame(main, FrameType::Interpreted)]);
    pools.stack_trace(
        3,
        false,
        &[frame(native, FrameType::Native), frame(work, FrameType::JitCompiled), frame(main, FrameType::Interpreted)],
    );
    pools.thread(1, &ThreadDef { os_name: "main", os_thread_id: 10, java_name: Some("main"), java_thread_id: 1 });
    for (trace, weight) in [(2, 1), (2, 2), (3, 1)] {
        chunk.write(&ExecutionSample {
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
    chunk.finish(&pools, ChunkEnd { duration_nanos: 1, final_chunk: true }, &[])
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
    assert!(outcome.error.is_none());
    let (profile, report) = profile::build(&outcome.recording, None);
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
    let (profile, _) = profile::build(&outcome.recording, None);
    let html = flamegraph::render(&profile, "t<1>", false);
    assert!(html.contains("\"app.Main.work\"") && html.contains("\"memcpy\""));
    assert!(html.contains("<title>t&lt;1&gt;</title>"));
    assert!(html.contains("const NODE_TOTAL = [4,4,4,1];"), "root, main, work, memcpy");
    assert!(!html.contains("%NAMES%") && !html.contains("%NODE_"), "every placeholder filled");
}

#[test]
fn truncated_recording_is_reported_not_fatal() {
    let mut bytes = sample_recording();
    bytes.extend_from_slice(&sample_recording()[..200]);
    let path = write_temp("t.jfr", &bytes);
    let outcome = recording::read(&path).unwrap();
    assert_eq!(outcome.recording.samples().map(|s| s.weight).sum::<u64>(), 4, "the complete first chunk is kept");
    assert!(outcome.error.is_some(), "the broken second chunk is reported");
}

#[test]
fn missing_file_is_a_clear_error() {
    let error = recording::read(std::path::Path::new("/nonexistent/x.jfr")).err().unwrap();
    assert!(error.to_string().contains("cannot open /nonexistent/x.jfr"));
}
