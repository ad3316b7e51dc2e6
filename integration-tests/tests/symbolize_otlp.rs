//! `symbolize otlp` end to end: recordings of real JVMs by our agent,
//! converted to an OTLP `ExportProfilesServiceRequest` and decoded by the
//! OpenTelemetry project's own Python definitions (PyPI
//! `opentelemetry-proto` 1.43+, which has proto v1.10.0): each event kind
//! a profile whose stacks and values are `symbolize collapsed`'s, the
//! service named, and remote native frames left unresolved as mappings
//! carrying their library's GNU build-id.

use integration_tests::otlp::{decode_otlp, python_ready};
use integration_tests::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// `symbolize <args> --no-debuginfod` (no test asks a server).
fn symbolize(args: &[&str]) -> Output {
    Command::new(symbolize_binary()).args(args).arg("--no-debuginfod").output().expect("run symbolize")
}

/// `symbolize otlp <recording> -o <out> [more]`, decoded by [`DECODE`].
fn otlp(recording: &Path, out: &Path, more: &[&str]) -> Value {
    let mut args = vec!["otlp", path(recording), "-o", path(out)];
    args.extend_from_slice(more);
    assert_success(&symbolize(&args));
    decode_otlp(out)
}

/// `symbolize collapsed <recording> --event <kind> [more]`: stack → weight.
fn collapsed(recording: &Path, kind: &str, more: &[&str]) -> BTreeMap<String, i64> {
    let mut args = vec!["collapsed", path(recording), "--event", kind];
    args.extend_from_slice(more);
    let output = symbolize(&args);
    assert_success(&output);
    stdout(&output)
        .lines()
        .map(|line| {
            let (stack, weight) = line.rsplit_once(' ').unwrap_or_else(|| panic!("collapsed line {line:?}"));
            (stack.to_owned(), weight.parse().unwrap())
        })
        .collect()
}

/// The decoded profile whose sample type is `sample_type`.
fn profile<'a>(summary: &'a Value, sample_type: &str) -> &'a Value {
    let profiles = summary["profiles"].as_array().unwrap();
    profiles
        .iter()
        .find(|p| p["sample_type"][0] == sample_type)
        .unwrap_or_else(|| panic!("no {sample_type} profile in {profiles:#?}"))
}

fn stacks(profile: &Value) -> BTreeMap<String, i64> {
    profile["stacks"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_i64().unwrap())).collect()
}

/// The profile of `kind` has `collapsed`'s stacks, each weighing its
/// collapsed weight times `factor` (the period for wall clock, in
/// nanoseconds), exactly.
fn assert_agrees(what: &str, profile: &Value, collapsed: &BTreeMap<String, i64>, factor: i64) {
    let expected: BTreeMap<String, i64> = collapsed.iter().map(|(k, v)| (k.clone(), v * factor)).collect();
    let ours = stacks(profile);
    let differing: Vec<_> = ours.iter().filter(|(k, v)| expected.get(*k) != Some(v)).take(3).collect();
    let missing: Vec<_> = expected.keys().filter(|k| !ours.contains_key(*k)).take(3).collect();
    assert!(differing.is_empty() && missing.is_empty(), "{what}: differing {differing:?}, missing {missing:?}");
    assert_eq!(profile["total"].as_i64().unwrap(), expected.values().sum::<i64>(), "{what}: total");
    println!(
        "{what}: {} over {} period {}: {} stacks, total {} ({} samples, {} linked), threads {}",
        profile["sample_type"],
        profile["period_type"],
        profile["period"],
        ours.len(),
        profile["total"],
        profile["samples"],
        profile["linked"],
        profile["threads"].as_array().map_or(0, Vec::len),
    );
}

/// The GNU build-id `readelf -n` reads from `library`.
fn readelf_build_id(library: &Path) -> String {
    let notes = stdout(&Command::new("readelf").arg("-n").arg(library).output().expect("run readelf"));
    let line = notes.lines().find_map(|l| l.trim().strip_prefix("Build ID: ")).expect("a GNU build-id note");
    line.trim().to_owned()
}

/// CPU, wall-clock, allocation and lock profiles of `EventKinds`: each a
/// profile with `collapsed`'s stacks and totals, the service named.
#[test]
fn every_kind_is_a_profile_that_agrees_with_collapsed() {
    if !python_ready() {
        return;
    }
    let dir = scratch_dir("symbolize_otlp_kinds");
    let file = dir.join("kinds.jfr");
    let options = format!("start,cpu=1ms,wall=5ms,alloc=64k,lock=100us,overhead=0,file={}", file.display());
    assert_success(&run_java(Some(&options), "EventKinds", &["2"], Duration::from_secs(60)));

    let out = dir.join("kinds.otlp.pb");
    let summary = otlp(&file, &out, &["--service", "otlp-test", "--attribute", "deployment.environment.name=ci"]);
    let resource = &summary["resource"];
    assert_eq!(resource["service.name"], "otlp-test");
    assert_eq!(resource["process.runtime.name"], "java");
    assert_eq!(resource["deployment.environment.name"], "ci");
    let kinds = [
        ("cpu", "samples", "count", "cpu", 1_000_000),
        ("wall", "wall", "nanoseconds", "wall", 5_000_000),
        ("alloc", "alloc_space", "bytes", "space", 65_536),
        ("lock", "delay", "nanoseconds", "mutex", 100_000),
    ];
    assert_eq!(summary["profiles"].as_array().unwrap().len(), kinds.len(), "one profile per kind recorded");
    for (kind, sample_type, unit, period_type, period) in kinds {
        let p = profile(&summary, sample_type);
        assert_eq!(p["sample_type"][1], unit, "{kind}");
        assert_eq!(p["period_type"][0], period_type, "{kind}");
        assert_eq!(p["period"], period, "{kind}");
        assert!(p["time_unix_nano"].as_u64().unwrap() > 1_600_000_000_000_000_000, "{kind}");
        assert!(p["duration_nano"].as_u64().unwrap() >= 1_000_000_000, "{kind}");
        let factor = if kind == "wall" { period } else { 1 };
        assert_agrees(kind, p, &collapsed(&file, kind, &[]), factor);
        assert!(p["total"].as_i64().unwrap() > 0, "{kind}");
    }
    // The threads each kind was about.
    let threads = |sample_type: &str| profile(&summary, sample_type)["threads"].clone();
    assert!(threads("samples").as_array().unwrap().iter().any(|t| t == "burner"), "{}", threads("samples"));
    assert!(threads("alloc_space").as_array().unwrap().iter().any(|t| t == "allocator"));

    // Without --service: the class whose main method the stacks start in.
    let summary = otlp(&file, &dir.join("default.otlp.pb"), &["--event", "cpu"]);
    assert_eq!(summary["resource"]["service.name"], "EventKinds");
    assert_eq!(summary["profiles"].as_array().unwrap().len(), 1);
}

struct Fixture {
    library: PathBuf,
    debug_tree: PathBuf,
}

/// A recording of `RemoteChain` calling into `libremote.so` (stripped; its
/// debug file in a build-id tree) with `remotesym=true`: native frames as
/// (build-id, offset).
fn remote_recording(dir: &Path) -> (PathBuf, Fixture) {
    let library = native_fixture("libremote.so");
    let fixture = Fixture { debug_tree: library.with_file_name("debug"), library };
    let file = dir.join("remote.jfr");
    let options = format!("start,interval=1ms,overhead=0,cstack=fp,remotesym=true,file={}", file.display());
    let output =
        run_java(Some(&options), "RemoteChain", &[path(&fixture.library), "2", "chain"], Duration::from_secs(60));
    assert_success(&output);
    (file, fixture)
}

/// Unresolved, libremote.so's frames are locations without lines in a
/// mapping named after the library that carries its build-id (readelf's):
/// what a backend symbolizes them by. Resolved from the debug file, the
/// same mapping, now with lines, and `collapsed`'s stacks.
#[test]
fn remote_frames_carry_their_librarys_build_id() {
    if !python_ready() {
        return;
    }
    let dir = scratch_dir("symbolize_otlp_remote");
    let (file, fixture) = remote_recording(&dir);
    let build_id = readelf_build_id(&fixture.library);
    let mapping = |summary: &Value| -> Value {
        let mappings = summary["mappings"].as_array().unwrap();
        mappings
            .iter()
            .find(|m| m["filename"] == "libremote.so")
            .unwrap_or_else(|| panic!("no libremote.so mapping in {mappings:#?}"))
            .clone()
    };

    let unresolved = otlp(&file, &dir.join("unresolved.otlp.pb"), &["--no-resolve"]);
    let remote = mapping(&unresolved);
    assert_eq!(remote["build_id"], build_id.as_str());
    assert_eq!(remote["with_lines"], 0, "{remote}");
    let addresses = remote["addresses"].as_array().unwrap();
    assert!(addresses.len() >= 4, "{remote}");
    // Every mapping of a remote frame carries its build-id.
    for m in unresolved["mappings"].as_array().unwrap() {
        assert!(m["build_id"].as_str().is_some_and(|id| id.len() >= 16), "{m}");
    }
    let cpu = profile(&unresolved, "samples");
    let in_library = stacks(cpu).keys().filter(|k| k.contains("[libremote.so+0x")).count();
    assert!(in_library > 0, "{cpu}");
    let total = |c: &BTreeMap<String, i64>| c.values().sum::<i64>();
    let debug_dir = ["--debug-dir", path(&fixture.debug_tree)];
    let expected = collapsed(&file, "cpu", &debug_dir);
    assert_eq!(cpu["total"].as_i64().unwrap(), total(&expected), "totals agree unresolved too");
    println!(
        "unresolved: libremote.so build-id {build_id}, {} locations at {} addresses; {in_library} stacks in it",
        remote["locations"],
        addresses.len()
    );

    let resolved = otlp(&file, &dir.join("resolved.otlp.pb"), &debug_dir);
    let remote = mapping(&resolved);
    assert_eq!(remote["build_id"], build_id.as_str());
    assert_eq!(remote["with_lines"], remote["locations"], "{remote}");
    let cpu = profile(&resolved, "samples");
    assert_agrees("resolved cpu", cpu, &expected, 1);
    assert!(stacks(cpu).keys().any(|k| k.ends_with("hot_outer;hot_middle;inlined_step;hot_leaf")), "{cpu}");
}

/// Samples taken under a span (`ApiUse`'s worker, its context set with the
/// Java API) link it: the span id as set, a zero trace id (the agent
/// records none), and only the stacks of the work under it.
#[test]
fn samples_under_a_span_link_it() {
    if !python_ready() {
        return;
    }
    let dir = scratch_dir("symbolize_otlp_spans");
    let library = agent_library();
    let command = &mut java_command(None, &[], "ApiUse", &[path(&library), path(&dir)]);
    assert_success(&ChildGuard::spawn(command).wait(Duration::from_secs(60)));
    let file = dir.join("dump.jfr");
    let summary = otlp(&file, &dir.join("dump.otlp.pb"), &["--event", "cpu"]);
    let cpu = profile(&summary, "samples");
    assert_agrees("cpu with spans", cpu, &collapsed(&file, "cpu", &[]), 1);
    // ApiUse.SPAN, 0x123456789abc.
    let spans = cpu["spans"].as_object().unwrap();
    let span = format!("{}/{:016x}", "0".repeat(32), 0x1234_5678_9abc_u64);
    assert_eq!(spans.keys().collect::<Vec<_>>(), [&span], "{spans:?}");
    // Every sample in contextWork is under the span, none after it was
    // cleared (a sample on the way in or out may be under it elsewhere).
    let under: Vec<&str> = cpu["span_stacks"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    let in_work: BTreeMap<String, i64> =
        stacks(cpu).into_iter().filter(|(k, _)| k.contains("ApiUse.contextWork")).collect();
    assert!(!in_work.is_empty());
    assert!(in_work.keys().all(|k| under.contains(&k.as_str())), "{in_work:?} / {under:?}");
    assert!(spans[&span].as_i64().unwrap() >= in_work.values().sum::<i64>());
    assert!(under.iter().all(|k| !k.contains("ApiUse.noContextWork")), "{under:?}");
    let without: i64 = stacks(cpu).iter().filter(|(k, _)| k.contains("ApiUse.noContextWork")).map(|(_, v)| v).sum();
    assert!(without > 0, "the work after the context was cleared is sampled too");
    println!("spans: {spans:?} over {} stacks; {without} samples without", under.len());
}
