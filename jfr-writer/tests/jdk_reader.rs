//! The JDK's own `jfr` tool and the `jfrs` reader accept what we write.

use frames::FrameType;
use jfr_writer::*;
use std::process::Command;

const START_NANOS: i64 = 1_700_000_000_000_000_000;

fn sample_chunk(dialect: Dialect) -> Vec<u8> {
    let clock = ChunkClock { start_nanos: START_NANOS, start_ticks: 0, ticks_per_second: 1_000_000_000 };
    let mut chunk = ChunkWriter::new(clock, dialect);
    let mut pools = ConstantPools::new();
    let run = pools.method(1, |p| MethodDef {
        class: p.class("com/example/Worker", 1),
        name: p.symbol("run"),
        descriptor: p.symbol("(I)J"),
        modifiers: 1,
        hidden: false,
    });
    let native = pools.method(2, |p| MethodDef {
        class: p.class("", 0),
        name: p.symbol("[GC_active]"),
        descriptor: p.symbol("()L;"),
        modifiers: 0x100,
        hidden: false,
    });
    let trace = pools.stack_trace(
        false,
        &[
            FrameDef { method: native, line: -1, bci: -1, frame_type: FrameType::Native },
            FrameDef { method: run, line: 42, bci: 3, frame_type: FrameType::JitCompiled },
        ],
    );
    pools.thread(
        1,
        &ThreadDef { os_name: "worker-1", os_thread_id: 1234, java_name: Some("worker-1"), java_thread_id: 17 },
    );
    chunk.write(&ActiveSetting {
        start_ticks: 0,
        event_type: schema::id::EXECUTION_SAMPLE,
        name: "interval",
        value: "10ms",
    });
    pools.attribute_value(5, "GET /orders");
    pools.string(1, "/api/orders");
    pools.string(2, "servlet.request");
    for i in 0..3 {
        chunk.sample(&Sample {
            kind: SampleKind::Cpu,
            start_ticks: 1000 * i,
            thread: 1,
            stack_trace: trace,
            state: dialect.cpu_state(),
            weight: 1,
            span_id: 11,
            local_root_span_id: 12,
            context: &[5, 0],
        });
    }
    chunk.write(&Endpoint { start_ticks: 4000, thread: 1, endpoint: 1, operation: 2, local_root_span_id: 12 });
    chunk.write(&ProfilerCounter { start_ticks: 5000, name: "samples", count: 3 });
    let attributes = ["route".to_owned(), "customer".to_owned()];
    chunk.finish(&mut pools, ChunkEnd { duration_nanos: 5_000_000, final_chunk: true }, &attributes)
}

/// Two chunks of one file through one set of pools: the caller's method
/// key 1 names another method in the second chunk, whose clock continues
/// the first's.
fn two_chunks() -> Vec<u8> {
    let mut pools = ConstantPools::new();
    let mut file = Vec::new();
    for (i, name) in ["first", "second"].into_iter().enumerate() {
        let start_ticks = i as i64 * 1_000_000_000;
        let clock = ChunkClock { start_nanos: START_NANOS + start_ticks, start_ticks, ticks_per_second: 1_000_000_000 };
        let mut chunk = ChunkWriter::new(clock, Dialect::Jdk);
        let method = pools.method(1, |p| MethodDef {
            class: p.class("com/example/Phase", 1),
            name: p.symbol(name),
            descriptor: p.symbol("()V"),
            modifiers: 1,
            hidden: false,
        });
        let trace =
            pools.stack_trace(false, &[FrameDef { method, line: 10, bci: 0, frame_type: FrameType::Interpreted }]);
        pools.thread(1, &ThreadDef { os_name: "main", os_thread_id: 1, java_name: Some("main"), java_thread_id: 1 });
        chunk.sample(&Sample {
            kind: SampleKind::Cpu,
            start_ticks: start_ticks + 500_000_000,
            thread: 1,
            stack_trace: trace,
            state: ThreadState::Default,
            weight: 1,
            span_id: 0,
            local_root_span_id: 0,
            context: &[],
        });
        file.extend(chunk.finish(&mut pools, ChunkEnd { duration_nanos: 1_000_000_000, final_chunk: i == 1 }, &[]));
    }
    file
}

fn jfr_tool() -> String {
    match std::env::var("JAVA_HOME") {
        Ok(home) => format!("{home}/bin/jfr"),
        Err(_) => "jfr".to_owned(),
    }
}

/// `jfr print` of `bytes`, which must succeed.
fn jfr_print(name: &str, bytes: &[u8]) -> String {
    let dir = std::env::temp_dir().join(format!("jfr-writer-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    let output = Command::new(jfr_tool()).arg("print").arg(&path).output().expect("run the JDK's jfr tool");
    assert!(output.status.success(), "jfr print failed: {}", String::from_utf8_lossy(&output.stderr));
    let summary = Command::new(jfr_tool()).arg("summary").arg(&path).output().unwrap();
    assert!(summary.status.success());
    if std::env::var_os("KEEP_JFR").is_none() {
        std::fs::remove_file(&path).ok();
    }
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn jdk_jfr_tool_prints_our_events_in_both_dialects() {
    for (dialect, cpu, counter, state) in [
        (Dialect::Jdk, "jdk.ExecutionSample", "jvmprofiler.Counter", "STATE_DEFAULT"),
        (Dialect::Datadog, "datadog.ExecutionSample", "datadog.ProfilerCounter", "STATE_RUNNABLE"),
    ] {
        let stdout = jfr_print(&format!("{}.jfr", dialect.name()), &sample_chunk(dialect));
        check_printed(&stdout, cpu, counter, state);
    }
}

#[test]
fn a_file_of_two_chunks_reads_as_each_chunk_says() {
    let stdout = jfr_print("two.jfr", &two_chunks());
    let samples: Vec<&str> = stdout.split("jdk.ExecutionSample").skip(1).collect();
    assert_eq!(samples.len(), 2, "{stdout}");
    assert!(samples[0].contains("com.example.Phase.first()"), "{stdout}");
    assert!(samples[1].contains("com.example.Phase.second()"), "{stdout}");
    // 0.5 s and 1.5 s after the file's start (22:13:20 UTC).
    assert!(samples[0].contains("22:13:20.500"), "{}", samples[0]);
    assert!(samples[1].contains("22:13:21.500"), "{}", samples[1]);
}

fn check_printed(stdout: &str, cpu: &str, counter: &str, state: &str) {
    assert_eq!(stdout.matches(&format!("{cpu} {{")).count(), 3, "{stdout}");
    assert!(stdout.contains("com.example.Worker.run(int)"), "{stdout}");
    assert!(stdout.contains("line: 42"), "{stdout}");
    assert!(stdout.contains("worker-1"), "{stdout}");
    assert!(stdout.contains(state), "{stdout}");
    assert!(stdout.contains("jdk.ActiveSetting"), "{stdout}");
    assert!(stdout.contains(counter), "{stdout}");
    assert!(stdout.contains("spanId = 11") && stdout.contains("localRootSpanId = 12"), "{stdout}");
    assert!(stdout.contains("route = \"GET /orders\"") && stdout.contains("customer = N/A"), "{stdout}");
    assert!(
        stdout.contains("endpoint = \"/api/orders\"") && stdout.contains("operation = \"servlet.request\""),
        "{stdout}"
    );
}

#[test]
fn jfrs_reads_stack_frames_and_types() {
    let bytes = sample_chunk(Dialect::Jdk);
    let mut reader = jfrs::reader::JfrReader::new(std::io::Cursor::new(bytes));
    let mut samples = 0;
    for (mut chunk_reader, chunk) in reader.chunks().flatten() {
        for event in chunk_reader.events(&chunk).flatten() {
            if event.class.name() != "jdk.ExecutionSample" {
                continue;
            }
            samples += 1;
            let frames = event.value().get_field("stackTrace").and_then(|s| s.get_field("frames")).unwrap();
            let jfrs::reader::value_descriptor::ValueDescriptor::Array(frames) = frames.value else {
                panic!("frames is not an array");
            };
            assert_eq!(frames.len(), 2);
        }
    }
    assert_eq!(samples, 3);
}
