//! Benchmarks, measured side by side in one run:
//!
//! - `overhead`: the `Workload` program (two busy threads by default)
//!   unprofiled, under our agent and under the JDK's Flight Recorder at the
//!   same periods, interleaved round by round so drift on a shared machine
//!   hits all alike: throughput, samples against the nominal count, bytes
//!   per sample, extra peak RSS, handler time.
//! - `wall`: the same for wall-clock sampling at 5 ms, 4 busy threads
//!   among 200 (the rest sleeping or parked).
//! - `deep`: the same at 1 ms with the work 400 frames deep, for
//!   AsyncGetCallTrace (`cstack=fp,javawalk=asgct`), the HotSpot walker (`cstack=vm`,
//!   the default), async-profiler and JFR.
//! - `zlib`: the same at 1 ms with the work in zlib's C code under
//!   `Deflater` (native stacks, unwound with DWARF), each side with its
//!   default Java source and with `cstack=dwarf`.
//! - `alloc`, `lock`: allocation (`alloc=512k`, and with `live`) and lock
//!   (`lock=1ms`) profiling of allocation- and lock-heavy workloads, ours
//!   against async-profiler at the same settings and the JDK's Flight
//!   Recorder: throughput, events, bytes per event, extra peak RSS.
//! - `nativemem`: native memory profiling (`nativemem=512k`, with and
//!   without `nofree`, and `32k`) of a malloc-heavy workload (zlib
//!   streams, `Unsafe` blocks), ours against async-profiler.
//! - `export`: the allocation workload shipping every second to backends
//!   that are down, never answer, or answer 400: throughput unaffected.
//! - `dumps`: the integration tests' churn fixture (thread and class
//!   churn, a dump every 100 ms) for 20 s: dumps written, dump time p50/p99.
//! - `walks`: time per walk, HotSpot walker against AsyncGetCallTrace on
//!   the same samples.
//! - `floor`: what signal delivery alone costs on this machine.
//! - `native`: handler time per sample of each native unwinder on a
//!   30-deep native stack.
//! - `symbolizer`: real recordings (~10 MB of 400-deep stacks at 1 ms,
//!   ours and async-profiler's) to collapsed stacks, `symbolize` against
//!   async-profiler's converter: time and peak RSS; and resolving 100k
//!   distinct addresses, cold and cached,
//!   against binutils' addr2line on the same file.
//! - `dictionary`: `bounded_lookup`, insert and rotation latencies, alone
//!   and under contention.
//!
//! - `h2`: a real application, the H2 SQL engine (Debian's libh2-java,
//!   installed by the bench if missing) embedded, under SQL load from
//!   `--threads` workers: the `overhead` columns at 10 ms and 1 ms.
//! - `governor` (`--only governor`): deep stacks sampled at the CPU
//!   interval's floor (100 us), ungoverned, under the default governor and
//!   under async-profiler; the governor's stretches and handler CPU.
//! - `soak` (only with `--only soak`): 10 minutes (`--soak-seconds`) of
//!   thread and class churn with every kind of profiling and a dump a
//!   second; resident memory, descriptors and threads over time.
//!   `--only soak-loop`: the same as an always-on session (`loop=1m`,
//!   `maxfiles=10`), with the period files on disk over time;
//!   `--only soak-unprofiled`: the same load without the agent (the
//!   baseline of what the JVM's own memory does under it).
//!
//! Usage: `cargo run --release -p bench -- [--rounds N] [--seconds S] [--threads T] [--only overhead|wall|deep|zlib|h2|governor|alloc|lock|vlock|nativemem|export|dumps|walks|floor|native|symbolizer|dictionary|soak|soak-loop|soak-unprofiled] [--soak-seconds S] [--baseline PATH]`
//! (needs `cargo build --release` first, for the agent). `--baseline` names
//! another build of `libprofiler.so` (say, the previous commit's): the
//! `overhead`, `wall`, `deep`, `zlib`, `h2` and `governor` tables then run
//! each agent configuration with it too, in the same rounds, as rows marked
//! `(baseline)`.

mod alloc_lock;
mod dictionary;
mod dumps;
mod floor;
mod native;
mod overhead;
mod soak;
mod support;
mod symbolization;
mod walker;

use std::path::Path;

struct Options {
    rounds: usize,
    seconds: f64,
    threads: usize,
    /// Run only this benchmark (`overhead`, `wall`, `deep`, `zlib`, `h2`, `governor`, `alloc`, `lock`, `vlock`, `nativemem`, `export`, `dumps`, `walks`, `floor`,
    /// `native`, `symbolizer`, `dictionary` or `soak`).
    only: Option<String>,
    /// How long the soak runs.
    soak_seconds: u64,
    /// Another agent build to run side by side with this one.
    baseline: Option<std::path::PathBuf>,
}

impl Options {
    fn wants(&self, name: &str) -> bool {
        self.only.as_deref().is_none_or(|only| only == name)
    }
}

fn parse_options() -> Options {
    let mut options = Options { rounds: 5, seconds: 8.0, threads: 2, only: None, soak_seconds: 600, baseline: None };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).unwrap_or_else(|| panic!("{} needs a value", pair[0]));
        match pair[0].as_str() {
            "--rounds" => options.rounds = value.parse().expect("--rounds N"),
            "--seconds" => options.seconds = value.parse().expect("--seconds S"),
            "--threads" => options.threads = value.parse().expect("--threads T"),
            "--only" => options.only = Some(value.clone()),
            "--soak-seconds" => options.soak_seconds = value.parse().expect("--soak-seconds S"),
            "--baseline" => {
                let path = std::path::PathBuf::from(value);
                assert!(path.is_file(), "--baseline {}: no such file", path.display());
                options.baseline = Some(path);
            }
            other => panic!("unknown argument {other} (accepted: --rounds, --seconds, --threads, --only, --soak-seconds, --baseline)"),
        }
    }
    options
}

/// A table's run: the options, the agent, the scratch directory.
type Run = fn(&Options, &Path, &Path);

fn main() {
    let options = parse_options();
    let agent = support::agent();
    let scratch = support::root().join("target/bench");
    // The CPU overhead tables, in this order.
    let overhead_tables: [(&str, Run); 6] = [
        ("overhead", overhead::run),
        ("wall", overhead::run_wall),
        ("deep", overhead::run_deep),
        ("zlib", overhead::run_zlib),
        ("h2", overhead::run_h2),
        ("governor", overhead::run_governor),
    ];
    for (mode, run) in overhead_tables {
        if options.wants(mode) {
            run(&options, &agent, &scratch);
        }
    }
    // vlock needs virtual threads (a JDK 21+ as JAVA_HOME): only when named.
    for mode in ["alloc", "lock", "vlock", "nativemem", "export"] {
        if options.wants(mode) && (mode != "vlock" || options.only.is_some()) {
            alloc_lock::run(&options, &agent, &scratch, mode);
        }
    }
    if options.wants("dumps") {
        dumps::run(&options, &agent, &scratch);
    }
    if options.wants("walks") {
        walker::run(&scratch, &options, &agent);
    }
    if options.wants("floor") {
        floor::run(&scratch, &options);
    }
    if options.wants("native") {
        native::run(&scratch, &options, &agent);
    }
    if options.wants("symbolizer") {
        symbolization::run(&agent);
        symbolization::run_recordings(&options, &agent, &scratch);
    }
    if options.wants("dictionary") {
        dictionary::run(&options);
    }
    // Ten minutes: only when asked for by name.
    if let Some(mode) = options.only.as_deref().and_then(|only| match only {
        "soak" => Some(soak::Mode::Dumps),
        "soak-loop" => Some(soak::Mode::Loop),
        "soak-unprofiled" => Some(soak::Mode::Unprofiled),
        _ => None,
    }) {
        soak::run(options.soak_seconds, &agent, &scratch, mode);
    }
}
