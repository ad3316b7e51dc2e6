//! `symbolize --event nativemem [--leak]` end to end on async-profiler's
//! own native memory recordings (`profiler.Malloc`, `profiler.Free`) of a
//! small program, `NativeAlloc`: zlib streams of which a
//! third are never ended, and direct buffers, all kept. Recorded at every
//! allocation (`nativemem=0`), our stacks and weights are async-profiler's
//! converter's (`--nativemem --total`: sums of sizes) exactly, and so are
//! the leaks (`--leak`, with the default tail and others); sampled
//! (`nativemem=64k`), the stacks are the converter's and each allocation
//! weighs what its sampling stands for.

use integration_tests::readers::{
    async_profiler_agent, converter_collapsed_as, converter_jar, has_frame, symbolize_collapsed, weight_of, Collapsed,
};
use integration_tests::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The frame of a zlib stream's allocation, and of a direct buffer's.
const DEFLATER: &str = "java.util.zip.Deflater.init";
const DIRECT: &str = "jdk.internal.misc.Unsafe.allocateMemory0";

/// `NativeAlloc 2` under async-profiler's agent (`Some`) or ours
/// (`None`) with `options`: the recording.
fn record(test: &str, async_profiler: Option<&Path>, options: &str) -> PathBuf {
    let file = scratch_file(test, "nativemem.jfr");
    let options = format!("start,{options},file={}", file.display());
    let mut java = match async_profiler {
        Some(agent) => {
            let agent = format!("-agentpath:{}={options}", agent.display());
            java_command(None, &[&agent], "NativeAlloc", &["2"])
        }
        None => java_command(Some(&options), &[], "NativeAlloc", &["2"]),
    };
    assert_success(&ChildGuard::spawn(&mut java).wait(Duration::from_secs(60)));
    file
}

/// async-profiler's converter: `--nativemem --total [more]`.
fn converter(jar: &Path, file: &Path, more: &[&str]) -> Collapsed {
    converter_collapsed_as(jar, file, &[&["--nativemem", "--total"], more].concat())
}

fn total(collapsed: &Collapsed) -> i64 {
    collapsed.values().sum()
}

fn stacks(collapsed: &Collapsed) -> BTreeSet<&(String, Vec<String>)> {
    collapsed.keys().collect()
}

/// The stacks only one side has, a few of each.
fn differences(ours: &Collapsed, theirs: &Collapsed) -> String {
    let few = |a: &Collapsed, b: &Collapsed| -> Vec<(String, Vec<String>)> {
        stacks(a).difference(&stacks(b)).take(3).map(|&stack| stack.clone()).collect()
    };
    format!("stacks only we have: {:?}\nstacks only the converter has: {:?}", few(ours, theirs), few(theirs, ours))
}

/// Ours (`what`) are the converter's stacks, weight for weight.
fn assert_same_as_converter(what: &str, ours: &Collapsed, theirs: &Collapsed) {
    assert!(
        ours == theirs,
        "{what}: ours {}, the converter's {}\n{}",
        total(ours),
        total(theirs),
        differences(ours, theirs)
    );
    println!("{what}: {} stacks, {} bytes", ours.len(), total(ours));
}

/// The weight of the stacks through `frame`.
fn through(collapsed: &Collapsed, frame: &str) -> i64 {
    weight_of(collapsed, |frames| has_frame(frames, frame))
}

/// Recorded at every allocation, `symbolize collapsed --event nativemem`
/// is the converter's `--nativemem --total`, stack by stack, and
/// `--leak` (tails 10% by default, 0, 50%) its `--leak`: a third of the
/// zlib streams' bytes leak, nearly all the direct buffers' (all but those
/// of the last tail).
#[test]
fn every_allocation_and_every_leak_reads_as_the_converter_reads_them() {
    let Some(jar) = converter_jar() else { return };
    let file = record("symbolize_nativemem_every", Some(&async_profiler_agent(&jar)), "nativemem=0");
    let all = symbolize_collapsed(&file, &["--event", "nativemem"]);
    assert_same_as_converter("every allocation", &all, &converter(&jar, &file, &[]));
    for tail in [None, Some("0"), Some("50%")] {
        let more: Vec<&str> = ["--leak"].into_iter().chain(tail.into_iter().flat_map(|t| ["--tail", t])).collect();
        let leaks = symbolize_collapsed(&file, &more);
        assert_same_as_converter(&format!("{more:?}"), &leaks, &converter(&jar, &file, &more));
        if tail.is_none() {
            let (streams, buffers) = (through(&leaks, DEFLATER) as f64, through(&leaks, DIRECT) as f64);
            let streams_share = streams / through(&all, DEFLATER) as f64;
            let buffers_share = buffers / through(&all, DIRECT) as f64;
            assert!((0.2..=0.4).contains(&streams_share), "zlib streams: {streams_share:.3} of their bytes leak");
            assert!((0.8..=1.0).contains(&buffers_share), "direct buffers: {buffers_share:.3} of their bytes leak");
        }
    }
    let output = Command::new(symbolize_binary())
        .args(["collapsed", path(&file), "--event", "cpu", "--leak", "--no-debuginfod"])
        .output()
        .expect("run symbolize");
    assert_eq!(output.status.code(), Some(1), "--leak with --event cpu");
    assert!(stderr(&output).contains("--event nativemem, not --event cpu"), "{}", stderr(&output));
}

/// Sampled every 64 KiB, the stacks are the converter's, with and
/// without `--leak`; each allocation of `size` bytes weighs `size / (1 -
/// exp(-size / 65536))` (the converter sums sizes): our total is that sum
/// over the sizes the JDK's parser reads, and so is `report`'s.
#[test]
fn sampled_allocations_weigh_what_their_sampling_stands_for() {
    let Some(jar) = converter_jar() else { return };
    let file = record("symbolize_nativemem_sampled", Some(&async_profiler_agent(&jar)), "nativemem=64k");
    let output = Command::new(jdk_tool("jfr"))
        .args(["print", "--json", "--events", "profiler.Malloc"])
        .arg(&file)
        .output()
        .expect("run jfr print");
    assert_success(&output);
    let printed: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("jfr print --json");
    let sizes: Vec<u64> = printed["recording"]["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["values"]["size"].as_u64().expect("a size"))
        .collect();
    assert!(sizes.len() > 100, "{} Malloc events", sizes.len());
    let expected: u64 = sizes.iter().map(|&size| symbolizer::events::sampled_bytes(size, 65536)).sum();

    let ours = symbolize_collapsed(&file, &["--event", "nativemem"]);
    let theirs = converter(&jar, &file, &[]);
    assert!(stacks(&ours) == stacks(&theirs), "{}", differences(&ours, &theirs));
    assert!(ours.iter().all(|(stack, &weight)| weight >= theirs[stack]), "a sample weighs less than its size");
    assert_eq!(total(&ours) as u64, expected, "the sampled sizes weighed");
    assert_eq!(total(&theirs) as u64, sizes.iter().sum::<u64>(), "the converter's: the sizes");
    println!(
        "{} allocations of {} bytes sampled at 64 KiB stand for {} bytes",
        sizes.len(),
        total(&theirs),
        total(&ours)
    );
    let report = Command::new(symbolize_binary())
        .args(["report", path(&file), "--event", "nativemem", "--no-debuginfod"])
        .output()
        .expect("run symbolize");
    assert_success(&report);
    let first = format!("nativemem: {expected} bytes in {} events", sizes.len());
    assert!(stdout(&report).starts_with(&first), "{first:?} expected:\n{}", stdout(&report));

    let leaks = symbolize_collapsed(&file, &["--leak"]);
    let theirs = converter(&jar, &file, &["--leak"]);
    assert!(stacks(&leaks) == stacks(&theirs), "--leak: {}", differences(&leaks, &theirs));
    println!("--leak: {} stacks, {} bytes (the converter's sizes: {})", leaks.len(), total(&leaks), total(&theirs));
}

/// Our agent's native allocations and frees (sampled every 64 KiB) survive
/// `symbolize jfr`: the converter reads the copy as it reads the original,
/// with and without `--leak` (so each free kept its place), and so does
/// `symbolize`.
#[test]
fn our_native_memory_events_survive_the_jfr_copy() {
    let Some(jar) = converter_jar() else { return };
    let file = record("symbolize_nativemem_copy", None, "nativemem=64k");
    let copy = file.with_extension("copy.jfr");
    let output = Command::new(symbolize_binary())
        .args(["jfr", path(&file), "-o", path(&copy), "--no-debuginfod"])
        .output()
        .expect("run symbolize");
    assert_success(&output);
    assert!(!stderr(&output).contains("not copied"), "{}", stderr(&output));
    for more in [&[][..], &["--leak"]] {
        let (original, copied) = (converter(&jar, &file, more), converter(&jar, &copy, more));
        assert!(original.len() > 1, "{more:?}: {} stacks", original.len());
        assert!(
            copied == original,
            "{more:?}: the converter reads the copy otherwise\n{}",
            differences(&copied, &original)
        );
        let event: &[&str] = if more.is_empty() { &["--event", "nativemem"] } else { more };
        assert_eq!(symbolize_collapsed(&copy, event), symbolize_collapsed(&file, event), "{more:?}: symbolize");
        println!("{more:?}: {} stacks, {} bytes in the converter's reading of both", original.len(), total(&original));
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}
