//! Native memory profiling (`nativemem[=BYTES]`, `nofree`) on a real JVM:
//! the JNI fixture `libnativemem.so` (`native/nativemem.c`, driven by
//! `NativeMemory.java`) mallocs 4 KiB blocks at two call sites in a 7:3
//! split by bytes, leaks at one of them, and calls each other allocation
//! function; its `profiler.Malloc` and `profiler.Free` events are read by
//! async-profiler's converter (`--nativemem`, `--leak`, `--total`: the
//! sampled allocations' sizes), the JDK's parser and `symbolize`.
//!
//! Sampling is Poisson over bytes: a 4 KiB block is sampled with
//! probability `1 - exp(-4096 / interval)`, so the 70% share of site seven
//! among the sampled blocks has a standard deviation of
//! `sqrt(0.21 / samples)`. The round counts give each interval about 4,000
//! sampled blocks: ±0.03 is four standard deviations.

use integration_tests::readers::{converter_collapsed_as, converter_jar, symbolize_collapsed, weight_of, Collapsed};
use integration_tests::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

const SEVEN: &str = "nativemem_site_seven";
const THREE: &str = "nativemem_site_three";
const BLOCK: f64 = 4096.0;
const MALLOC: &str = "profiler.Malloc";
const FREE: &str = "profiler.Free";
/// Debian's libjemalloc2.
const JEMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";

/// `NativeMemory <libnativemem.so> <mode> <rounds>` with the agent's
/// `options` (none: no agent), more JVM arguments and `LD_PRELOAD`; must
/// succeed.
fn run_fixture(options: Option<&str>, jvm_args: &[&str], preload: Option<&str>, mode: &str, rounds: u64) -> Output {
    let library = native_fixture("libnativemem.so");
    let rounds = rounds.to_string();
    let mut command = java_command(options, jvm_args, "NativeMemory", &[library.to_str().unwrap(), mode, &rounds]);
    if let Some(preload) = preload {
        command.env("LD_PRELOAD", preload);
    }
    let output = ChildGuard::spawn(&mut command).wait(Duration::from_secs(60));
    assert_success(&output);
    output
}

/// [`run_fixture`] under `start,nativemem=<interval>[,more],file=<test>/nativemem.jfr`.
fn record(test: &str, interval: &str, more: &str, preload: Option<&str>, mode: &str, rounds: u64) -> (Output, PathBuf) {
    record_with(test, interval, more, &[], preload, mode, rounds)
}

/// [`record`] with more JVM arguments.
fn record_with(
    test: &str,
    interval: &str,
    more: &str,
    jvm_args: &[&str],
    preload: Option<&str>,
    mode: &str,
    rounds: u64,
) -> (Output, PathBuf) {
    let file = scratch_file(test, "nativemem.jfr");
    let options = format!("start,nativemem={interval}{more},file={}", file.display());
    let output = run_fixture(Some(&options), jvm_args, preload, mode, rounds);
    assert!(file.exists(), "{test}: no recording at {}\nstderr: {}", file.display(), stderr(&output));
    (output, file)
}

/// The number after `key=` on the fixture's summary line (`seven=NNN`).
fn printed(output: &Output, key: &str) -> f64 {
    let text = stdout(output);
    let prefix = format!("{key}=");
    text.split_whitespace()
        .find_map(|word| word.strip_prefix(&prefix)?.parse().ok())
        .unwrap_or_else(|| panic!("no {key}= in the fixture's output:\n{text}"))
}

/// async-profiler's converter: `--nativemem --total [more]`; per stack,
/// the bytes of the sampled allocations (their `size`s, not weighted by
/// the interval).
fn converter_nativemem(jar: &Path, file: &Path, more: &[&str]) -> Collapsed {
    converter_collapsed_as(jar, file, &[&["--nativemem", "--total"], more].concat())
}

/// Whether a stack (innermost first) passes through the C function `name`.
fn through(frames: &[String], name: &str) -> bool {
    frames.iter().any(|f| f.contains(name))
}

/// The weights of the stacks through site seven and through site three.
fn sites(collapsed: &Collapsed) -> (f64, f64) {
    (weight_of(collapsed, |f| through(f, SEVEN)) as f64, weight_of(collapsed, |f| through(f, THREE)) as f64)
}

/// Every stack of `collapsed`, heaviest first, for messages.
fn heaviest(collapsed: &Collapsed, n: usize) -> String {
    let mut stacks: Vec<_> = collapsed.iter().collect();
    stacks.sort_by_key(|(_, weight)| std::cmp::Reverse(**weight));
    stacks.iter().take(n).map(|((thread, frames), weight)| format!("  {weight} [{thread}] {frames:?}\n")).collect()
}

/// `symbolize collapsed --event nativemem [more]`: stops the test with
/// `symbolize`'s message if it cannot show native memory yet.
fn symbolize_nativemem(file: &Path, more: &[&str]) -> Collapsed {
    let mut args = vec!["--event", "nativemem"];
    args.extend_from_slice(more);
    symbolize_collapsed(file, &args)
}

/// The Malloc events of `recording` on the fixture's thread.
fn mallocs(recording: &Recording) -> Vec<&Event> {
    recording.events.iter().filter(|e| e.kind == MALLOC && e.thread == "nativemem").collect()
}

fn in_function(event: &Event, function: &str) -> bool {
    event.frames.iter().any(|f| f.method == function)
}

/// The expected number of sampled blocks of `size` bytes among `blocks`.
fn expected_samples(blocks: f64, size: f64, interval: f64) -> f64 {
    blocks * (1.0 - (-size / interval).exp())
}

fn few_events(what: &str, file: &Path, events: &[&Event], recording: &Recording) -> String {
    format!(
        "{what}: {} Malloc events of the fixture's thread in {} ({} events in all, {} Malloc; nativemem setting {:?})",
        events.len(),
        file.display(),
        recording.events.len(),
        recording.events.iter().filter(|e| e.kind == MALLOC).count(),
        recording.settings.get("nativemem")
    )
}

/// `split` at `interval` (in bytes, `option` as given to the agent) for
/// `rounds` rounds: site seven's share of the sampled bytes is 0.70 ±
/// 0.03 through the converter (and through `symbolize`, whose weighted
/// total is within 10% of the bytes the fixture allocated at the sites).
fn check_split(test: &str, option: &str, interval: f64, rounds: u64) {
    let (output, file) = record(test, option, "", None, "split", rounds);
    let allocated = printed(&output, "seven") + printed(&output, "three");
    let expected = expected_samples(allocated / BLOCK, BLOCK, interval);
    // Missing, `converter_jar` has announced the skip; symbolize is still checked.
    if let Some(jar) = converter_jar() {
        let collapsed = converter_nativemem(&jar, &file, &[]);
        let (seven, three) = sites(&collapsed);
        let samples = (seven + three) / BLOCK;
        println!("{test}: converter: seven {seven}, three {three}: {samples} sampled blocks, ~{expected:.0} expected");
        assert!(
            samples >= 0.8 * expected,
            "{test}: the converter found {samples} sampled blocks at the two sites (stacks through {SEVEN} or \
             {THREE}), ~{expected:.0} expected at nativemem={option}; heaviest stacks:\n{}",
            heaviest(&collapsed, 8)
        );
        let share = seven / (seven + three);
        assert!(
            (share - 0.7).abs() <= 0.03,
            "{test}: converter: site seven has {:.1}% of {samples} sampled blocks; the fixture allocates 70% there",
            share * 100.0
        );
    }

    let collapsed = symbolize_nativemem(&file, &[]);
    let (seven, three) = sites(&collapsed);
    let total = seven + three;
    println!("{test}: symbolize: seven {seven}, three {three}: {total} bytes, the fixture allocated {allocated}");
    assert!(
        (total / allocated - 1.0).abs() <= 0.1,
        "{test}: symbolize weighs the two sites' samples at {total:.0} bytes; the fixture allocated {allocated:.0} \
         there; heaviest stacks:\n{}",
        heaviest(&collapsed, 8)
    );
    let share = seven / total;
    assert!((share - 0.7).abs() <= 0.03, "{test}: symbolize: site seven has {:.1}% of the bytes", share * 100.0);
}

#[test]
fn nativemem_1m_splits_the_bytes_7_to_3() {
    // ~4,300 sampled blocks of 110,000 x 40 KiB (4.5 GB, freed as it goes).
    check_split("nativemem_split_1m", "1m", 1048576.0, 110_000);
}

#[test]
fn nativemem_64k_splits_the_bytes_7_to_3() {
    // ~4,200 sampled blocks.
    check_split("nativemem_split_64k", "64k", 65536.0, 7_000);
}

#[test]
fn nativemem_8k_splits_the_bytes_7_to_3() {
    // ~3,900 sampled blocks (each block is sampled with probability 0.39).
    check_split("nativemem_split_8k", "8k", 8192.0, 1_000);
}

/// The recording as the JDK reads it: the setting, the events' fields, the
/// stack's shape (the site, the JNI entry, then the Java native method),
/// and a Free for every sampled block (each is freed), with no stack.
#[test]
fn malloc_and_free_events_carry_the_size_address_and_stack() {
    let rounds = 2_000;
    let (_, file) = record("nativemem_events", "64k", "", None, "split", rounds);
    let recording = read_recording(&file);
    assert_jfr_tool_accepts(&file);
    let ours = mallocs(&recording);
    let at_sites: Vec<&&Event> = ours.iter().filter(|e| in_function(e, SEVEN) || in_function(e, THREE)).collect();
    let expected = expected_samples(rounds as f64 * 10.0, BLOCK, 65536.0);
    assert!(at_sites.len() as f64 >= 0.7 * expected, "{}", few_events("64k", &file, &ours, &recording));
    assert_eq!(
        recording.settings.get("nativemem").map(String::as_str),
        Some("65536 bytes"),
        "{:?}",
        recording.settings
    );
    let library = "libnativemem.so";
    for event in &at_sites {
        assert_eq!(event.field("size"), "4096", "{:?}", event.fields);
        let address: u64 = event.field("address").parse().unwrap_or_else(|_| panic!("{:?}", event.fields));
        assert!(address != 0, "{:?}", event.fields);
        let site = event.frames.iter().position(|f| f.method == SEVEN || f.method == THREE).unwrap();
        let names: Vec<&str> = event.frames.iter().map(|f| f.method.as_str()).collect();
        assert!(
            event.frames[site].frame_type == "Native"
                && event.frames[site].class == library
                && names.get(site + 1) == Some(&"Java_NativeMemory_split")
                && names.get(site + 2) == Some(&"split")
                && event.frames[site + 2].class == "NativeMemory",
            "the site, the JNI entry, then NativeMemory.split: {:?}",
            event.frames
        );
    }
    // Every sampled block was freed after it was sampled.
    let frees: Vec<&Event> = recording.events.iter().filter(|e| e.kind == FREE).collect();
    assert!(frees.iter().all(|e| e.frames.is_empty()), "a Free with a stack");
    let mut freed: HashMap<&str, Vec<i64>> = HashMap::new();
    for free in &frees {
        freed.entry(free.field("address")).or_default().push(free.start_epoch_ns);
    }
    let unfreed = at_sites
        .iter()
        .filter(|m| !freed.get(m.field("address")).is_some_and(|times| times.iter().any(|&t| t >= m.start_epoch_ns)))
        .count();
    assert_eq!(unfreed, 0, "{unfreed} of {} sampled blocks have no Free ({} Free events)", at_sites.len(), frees.len());
    // Only sampled addresses: not one Free per free() (20,000 at the sites).
    assert!(frees.len() < 4 * at_sites.len() + 1000, "{} Free events for {} samples", frees.len(), at_sites.len());
}

/// `nofree`: allocations only, no Free events.
#[test]
fn nofree_records_allocations_and_no_frees() {
    let (_, file) = record("nativemem_nofree", "64k", ",nofree", None, "split", 2_000);
    let recording = read_recording(&file);
    let ours = mallocs(&recording);
    let at_sites = ours.iter().filter(|e| in_function(e, SEVEN) || in_function(e, THREE)).count();
    assert!(at_sites >= 100, "{}", few_events("nofree", &file, &ours, &recording));
    let frees = recording.events.iter().filter(|e| e.kind == FREE).count();
    assert_eq!(frees, 0, "nofree: {frees} Free events");
}

/// `leak`: site three never frees its blocks, site seven frees all of its
/// own: the converter's leak report (`--leak`: sampled allocations without
/// a later Free, those of the last 10% of the time left out, which the
/// fixture fills with rounds that free all they allocate) is site three,
/// among the two sites and overall; `symbolize --leak` agrees. Interpreted only (`-Xint`): the JIT
/// compilers' arenas, which HotSpot's chunk pool keeps, would be leaks of
/// their own, each a whole 32 KiB or more sampled.
#[test]
fn a_leak_at_one_site_is_what_the_leak_report_shows() {
    // 2,500 rounds: 31 MB leaked at site three, 72 MB allocated and freed at seven.
    let (output, file) = record_with("nativemem_leak", "16k", "", &["-Xint"], None, "leak", 2_500);
    let leaked = printed(&output, "leaked");
    // Missing, `converter_jar` has announced the skip; symbolize is still checked.
    if let Some(jar) = converter_jar() {
        let collapsed = converter_nativemem(&jar, &file, &["--leak"]);
        let (seven, three) = sites(&collapsed);
        let all = weight_of(&collapsed, |_| true) as f64;
        println!("converter --leak: three {three}, seven {seven}, all {all} (the fixture leaked {leaked})");
        // 7,500 blocks, each sampled with probability 0.22: ~1,660.
        assert!(
            three >= 800.0 * BLOCK,
            "converter --leak: only {three} bytes leaked at site three ({leaked} leaked); heaviest stacks:\n{}",
            heaviest(&collapsed, 8)
        );
        assert!(three >= 0.95 * (seven + three), "converter --leak: site three {three}, site seven {seven}");
        assert!(
            three >= 0.95 * all,
            "converter --leak: site three {three} of {all} leaked bytes; heaviest stacks:\n{}",
            heaviest(&collapsed, 8)
        );
    }

    let collapsed = symbolize_nativemem(&file, &["--leak"]);
    let (seven, three) = sites(&collapsed);
    println!("symbolize --leak: three {three}, seven {seven}");
    let top = collapsed.iter().max_by_key(|(_, weight)| **weight).map(|((_, frames), _)| frames.clone());
    assert!(
        top.as_deref().is_some_and(|frames| through(frames, THREE)),
        "symbolize --leak: the heaviest stack is not site three's:\n{}",
        heaviest(&collapsed, 8)
    );
    assert!(three >= 0.95 * (seven + three), "symbolize --leak: site three {three}, site seven {seven}");
}

/// Each allocation function, the fixture's site that calls it (once a
/// round, for a 4 KiB block), and the alignment of the addresses it
/// returns (16: malloc's own).
const FUNCTION_SITES: [(&str, &str, u64); 4] = [
    ("calloc", "nativemem_calloc_site", 16),
    ("realloc", "nativemem_realloc_site", 16),
    ("posix_memalign", "nativemem_memalign_site", 64),
    ("aligned_alloc", "nativemem_aligned_site", 256),
];

/// Each allocation function's blocks of a `funcs` run at `interval` are
/// recorded under its site (which calls nothing else that allocates),
/// with their size and an address aligned as asked.
fn check_functions(what: &str, file: &Path, rounds: u64, interval: f64) {
    let recording = read_recording(file);
    let ours = mallocs(&recording);
    let expected = expected_samples(rounds as f64, BLOCK, interval);
    for (function, site, alignment) in FUNCTION_SITES {
        let events: Vec<&&Event> = ours.iter().filter(|e| in_function(e, site)).collect();
        assert!(
            events.len() as f64 >= 0.6 * expected && events.len() as f64 <= 1.4 * expected,
            "{what}: {} samples of {function} (stacks through {site}), ~{expected:.0} expected; {}",
            events.len(),
            few_events(what, file, &ours, &recording)
        );
        for event in &events {
            assert_eq!(event.field("size"), "4096", "{what}: {function}: {:?}", event.fields);
            let address: u64 = event.field("address").parse().unwrap_or_else(|_| panic!("{:?}", event.fields));
            assert!(address != 0 && address.is_multiple_of(alignment), "{what}: {function} at {address:#x}");
            let at = event.frames.iter().position(|f| f.method == site).unwrap();
            assert_eq!(
                event.frames.get(at + 1).map(|f| f.method.as_str()),
                Some("Java_NativeMemory_funcs"),
                "{what}: {function}: {:?}",
                event.frames
            );
        }
    }
}

#[test]
fn calloc_realloc_posix_memalign_and_aligned_alloc_are_recorded() {
    let rounds = 2_000;
    let (_, file) = record("nativemem_funcs", "16k", "", None, "funcs", rounds);
    // ~440 samples of each.
    check_functions("funcs", &file, rounds, 16384.0);
}

/// With jemalloc in place of glibc's malloc (`LD_PRELOAD`): the same
/// split, every allocation function recorded, and the program prints what
/// it prints without the agent.
#[test]
fn allocations_are_recorded_with_jemalloc_preloaded() {
    if !Path::new(JEMALLOC).exists() {
        skip(&format!("{JEMALLOC} is missing (Debian: libjemalloc2)"), InCi::Required);
        return;
    }
    let rounds = 7_000;
    let plain = run_fixture(None, &[], Some(JEMALLOC), "split", rounds);
    let (output, file) = record("nativemem_jemalloc", "64k", "", Some(JEMALLOC), "split", rounds);
    assert_eq!(stdout(&output), stdout(&plain), "the program's output changed under the agent");
    let Some(jar) = converter_jar() else { return };
    let collapsed = converter_nativemem(&jar, &file, &[]);
    let (seven, three) = sites(&collapsed);
    let expected = expected_samples(rounds as f64 * 10.0, BLOCK, 65536.0);
    let samples = (seven + three) / BLOCK;
    assert!(
        samples >= 0.8 * expected,
        "jemalloc: {samples} sampled blocks at the sites, ~{expected:.0} expected; heaviest stacks:\n{}",
        heaviest(&collapsed, 8)
    );
    let share = seven / (seven + three);
    assert!((share - 0.7).abs() <= 0.03, "jemalloc: site seven has {:.1}% of {samples} blocks", share * 100.0);

    let rounds = 2_000;
    let (_, file) = record("nativemem_jemalloc_funcs", "16k", "", Some(JEMALLOC), "funcs", rounds);
    check_functions("jemalloc funcs", &file, rounds, 16384.0);
}

/// The JDK's own native allocations: zlib's deflate state (about 260 KiB
/// a stream, in blocks of up to 64 KiB) under `Deflater.init`, the JNI
/// entry of libzip above it.
#[test]
fn zlib_streams_of_the_jdk_are_recorded_under_deflater_init() {
    let (_, file) = record("nativemem_deflate", "64k", "", None, "deflate", 100);
    let recording = read_recording(&file);
    let ours = mallocs(&recording);
    let init = |e: &Event| e.frames.iter().position(|f| f.method == "init" && f.class == "java.util.zip.Deflater");
    let in_init: Vec<&&Event> = ours.iter().filter(|e| init(e).is_some()).collect();
    // Four 64 KiB blocks a stream, each sampled with probability 0.63: ~250.
    assert!(in_init.len() >= 120, "{}", few_events("deflate", &file, &ours, &recording));
    let with_jni = in_init
        .iter()
        .filter(|e| {
            let at = init(e).unwrap();
            at > 0 && e.frames[at - 1].method == "Java_java_util_zip_Deflater_init"
        })
        .count();
    assert!(
        with_jni * 10 >= in_init.len() * 9,
        "{with_jni} of {} samples under Deflater.init have the JNI entry above it: {:?}",
        in_init.len(),
        in_init[0].frames
    );
}

/// Started by attach in a JVM that already runs the fixture, stopped,
/// started again and stopped again: each recording holds the allocations
/// of the phase it was running for, no more and no less (the fixture runs
/// a phase when told and says when it is done: no sleeps).
#[test]
fn start_by_attach_stop_and_start_again_record_each_phase() {
    let dir = scratch_dir("nativemem_attach");
    let files = [dir.join("first.jfr"), dir.join("second.jfr")];
    let library = native_fixture("libnativemem.so");
    let mut command = java_command(None, &[], "NativeMemory", &[library.to_str().unwrap(), "phases"]);
    command.stdin(std::process::Stdio::piped());
    let mut run = ChildGuard::spawn(&mut command);
    run.wait_for_line("READY");
    let rounds = 4_000;
    let mut phase = 0;
    let mut run_phase = |run: &mut ChildGuard| {
        phase += 1;
        run.send(&format!("{rounds}\n"));
        run.wait_for_line(&format!("DONE {phase}"));
    };
    let agent = |run: &ChildGuard, options: &str| {
        let result = attach_agent(run.id(), options);
        let text = stdout(&result);
        assert!(result.status.success() && text.contains("return code: 0"), "{options}: {text}{}", stderr(&result));
    };
    // Before the agent, between the sessions, and in each.
    run_phase(&mut run);
    for file in &files {
        agent(&run, &format!("start,nativemem=64k,file={}", file.display()));
        run_phase(&mut run);
        agent(&run, "stop");
        run_phase(&mut run);
    }
    let output = run.wait(Duration::from_secs(60));
    assert_success(&output);
    assert_eq!(printed(&output, "seven"), 5.0 * rounds as f64 * 7.0 * BLOCK, "five phases ran");

    let expected = expected_samples(rounds as f64 * 10.0, BLOCK, 65536.0);
    let recordings = read_recordings_on(&jdk_tool("java"), &[files[0].as_path(), files[1].as_path()]);
    for (recording, file) in recordings.iter().zip(&files) {
        let ours = mallocs(recording);
        let at_sites = ours.iter().filter(|e| in_function(e, SEVEN) || in_function(e, THREE)).count();
        println!("{}: {at_sites} sampled blocks, ~{expected:.0} expected", file.display());
        assert!(
            (at_sites as f64 / expected - 1.0).abs() <= 0.15,
            "{}: {at_sites} sampled blocks, ~{expected:.0} expected of one phase; {}",
            file.display(),
            few_events("attach", file, &ours, recording)
        );
    }
}
