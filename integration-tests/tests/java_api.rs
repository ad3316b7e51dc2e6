//! The Java API (`dev.jvmprofiler.JavaProfiler`) on a real JVM, reached the
//! four ways users reach it: the library loaded by the API, the agent loaded
//! with `-agentpath`, the library found beside `profiler.jar`, and the agent
//! attached at runtime. Each run drives a session with context, endpoints,
//! dumps and every misuse the API must report (fixture `ApiUse`).

use integration_tests::*;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

const SPAN: &str = "20015998343868"; // ApiUse.SPAN
const ROOT: &str = "68414056839"; // ApiUse.ROOT
const CHECKS: &[&str] = &[
    "same-instance",
    "dump-before-start",
    "stop-before-start",
    "bad-option",
    "null-command",
    "trace-root-before-start",
    "unwritable-start",
    "directory-start",
    "proc-start",
    "not-running-after-failed-start",
    "unwritable-stop",
    "running-after-failed-stop",
    "start-twice",
    "slot-out-of-range",
    "negative-slot",
    "negative-limit",
    "null-endpoint",
    "trace-root",
    "known-labels-within-limit",
    "new-label-over-limit",
    "unwritable-dump",
    "null-dump",
    "counters",
    "status",
    "stop-twice",
    "trace-root-after-stop",
    "no-finished-files",
    "status-names-the-file",
    "finished-files",
    "finished-files-taken",
    "finished-at-stop",
    "finished-at-stop-taken",
    "rewritten-not-reported",
];

fn has_frame(event: &Event, method: &str) -> bool {
    event.frames.iter().any(|f| f.class == "ApiUse" && f.method == method)
}

/// Every check passed, and the recordings carry the context and endpoints.
fn verify(output: &std::process::Output, dir: &Path) {
    assert_success(output);
    let out = stdout(output);
    let failures: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(failures.is_empty(), "{failures:#?}\n{out}");
    for check in CHECKS {
        assert!(
            out.lines().any(|l| l == format!("OK {check}") || l.starts_with(&format!("OK {check}:"))),
            "{check}: {out}"
        );
    }
    assert!(out.lines().any(|l| l == "DONE"), "{out}");

    let dump = read_recording(&dir.join("dump.jfr"));
    let with_context: Vec<&Event> = dump.samples().filter(|e| has_frame(e, "contextWork")).collect();
    let without: Vec<&Event> = dump.samples().filter(|e| has_frame(e, "noContextWork")).collect();
    assert!(with_context.len() >= 20 && without.len() >= 10, "{} / {} samples", with_context.len(), without.len());
    for sample in &with_context {
        assert_eq!(sample.context("spanId"), Some(SPAN));
        assert_eq!(sample.context("localRootSpanId"), Some(ROOT));
        assert_eq!(sample.context("customer"), Some("customer-7"));
        assert_eq!(sample.context("region"), Some("eu-west"));
    }
    for sample in &without {
        assert_eq!(sample.context("spanId"), None);
        assert_eq!(sample.context("localRootSpanId"), None);
        assert_eq!(sample.context("customer"), None);
    }
    let endpoints: Vec<&Event> = dump.endpoints().collect();
    assert_eq!(endpoints.len(), 2, "{endpoints:#?}");
    for endpoint in endpoints {
        assert_eq!(endpoint.field("endpoint"), "GET /orders");
        assert_eq!(endpoint.field("operation"), "servlet.request");
        assert_eq!(endpoint.field("localRootSpanId"), ROOT);
        assert_eq!(endpoint.thread, "main");
    }
    let session = read_recording(&dir.join("session.jfr"));
    assert_eq!(session.settings.get("attributes").map(String::as_str), Some("customer;region"));
    assert!(
        session.samples().count() >= with_context.len() + without.len(),
        "the session file holds the dumped chunk too"
    );
    assert_jfr_tool_accepts(&dir.join("session.jfr"));
}

fn api_use(agent_options: Option<&str>, before: &[&Path], library: &str, dir: &Path) -> std::process::Output {
    let mut command =
        java_command_on(&jdk_tool("java"), agent_options, &[], before, "ApiUse", &[library, dir.to_str().unwrap()]);
    ChildGuard::spawn(&mut command).wait(Duration::from_secs(60))
}

#[test]
fn the_api_loads_the_library_itself() {
    let dir = scratch_dir("api-load");
    let output = api_use(None, &[], agent_library().to_str().unwrap(), &dir);
    verify(&output, &dir);
}

#[test]
fn the_api_uses_an_agent_loaded_with_agentpath() {
    let dir = scratch_dir("api-agentpath");
    let output = api_use(Some(""), &[], "-", &dir);
    verify(&output, &dir);
}

#[test]
fn the_api_finds_the_library_beside_its_jar() {
    let dir = scratch_dir("api-jar");
    let jar = agent_library().with_file_name("profiler.jar");
    assert!(jar.exists(), "{} is missing: the build packages it beside the library", jar.display());
    let output = api_use(None, &[&jar], "-", &dir);
    verify(&output, &dir);
}

#[test]
fn the_api_binds_to_an_agent_attached_at_runtime() {
    let dir = scratch_dir("api-attach");
    let mut command = java_command(None, &[], "ApiUse", &["-", dir.to_str().unwrap(), "wait"]);
    command.stdin(Stdio::piped());
    let mut run = ChildGuard::spawn(&mut command);
    run.wait_for_line("READY");
    assert_attached(run.id(), "status");
    run.send("go\n");
    verify(&run.wait(Duration::from_secs(60)), &dir);
}

/// The stress run: 8 threads calling `recordTraceRoot` and
/// `setContextValue` with fresh strings in bursts, CPU sampling at 1 ms,
/// `dump()` every 10 ms for 30 s. Every dump parses with
/// `jdk.jfr.consumer` without a missing constant, and resident memory at
/// the end is within 20% of what it was after 5 s (heap fixed and
/// pre-touched, so the profiler's memory is what can grow).
#[test]
fn dumps_every_10ms_under_api_stress_parse_and_memory_stays_bounded() {
    let dir = scratch_dir("api-stress");
    let jvm = ["-Xms256m", "-Xmx256m", "-XX:+AlwaysPreTouch"];
    let mut command = java_command(Some(""), &jvm, "StressApi", &[dir.to_str().unwrap(), "30"]);
    let output = ChildGuard::spawn(&mut command).wait(Duration::from_secs(240));
    assert_success(&output);
    let out = stdout(&output);
    let errors = error_lines(&out);
    let counters = out.lines().find(|l| l.starts_with("COUNTERS")).unwrap_or_default();
    // A full dictionary would record values unset (null to the reader),
    // an expired value empty: neither may happen at the fixture's pace.
    for counter in ["context_values_dropped_dictionary_full=0", "context_values_expired=0"] {
        assert!(counters.contains(counter), "{counters}");
    }
    assert!(errors.is_empty(), "{errors:#?}\n{counters}");
    let value = |key: &str| summary_value(&out, key);
    let dumps = value("DUMPS");
    // 10 ms apart plus the time a dump takes (more when other tests share the CPUs).
    assert!(dumps >= 500, "only {dumps} dumps in 30 s: {out}");
    assert_eq!(value("VERIFIED"), dumps, "every dump was parsed");
    assert!(value("SAMPLES") > 1000 && value("CONTEXT_SAMPLES") > 100 && value("ENDPOINTS") > 10_000, "{out}");
    let (early, end) = (value("RSS_5S"), value("RSS_END"));
    assert!(end as f64 <= early as f64 * 1.2, "RSS grew from {early} kB at 5 s to {end} kB: {out}");
    println!("{out}");
}

/// `filter`: only threads added with `addThread()` (and not removed again)
/// are sampled, by the CPU and the wall-clock engine alike; the rest is
/// counted as filtered out.
#[test]
fn the_thread_filter_samples_only_added_threads() {
    let file = scratch_file("api-filter", "filter.jfr");
    let output = run_java(Some(""), "FilterUse", &[file.to_str().unwrap()], Duration::from_secs(60));
    assert_success(&output);
    let recording = read_recording(&file);
    for (kind, samples) in [("cpu", recording.samples().collect()), ("wall", recording.wall_samples().collect())] {
        let samples: Vec<&Event> = samples;
        let threads: std::collections::HashSet<&str> = samples.iter().map(|e| e.thread.as_str()).collect();
        assert!(samples.len() >= 50, "{kind}: {} samples of the added thread", samples.len());
        assert_eq!(threads.into_iter().collect::<Vec<_>>(), vec!["filtered-in"], "{kind}: only the added thread");
    }
    assert!(recording.counter("samples_filtered_out") >= 100);
}
