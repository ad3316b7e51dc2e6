//! Overhead benchmark, measured side by side in one run.
//!
//! Runs `Workload` (two busy threads by default) unprofiled, under our
//! agent and under the JDK's Flight Recorder at the same sampling periods,
//! interleaving the configurations round by round so drift on a shared
//! machine hits all of them alike. Reports, per configuration, the median
//! throughput relative to the unprofiled runs, samples against the nominal
//! count (CPU time / period), bytes of recording per sample, extra peak
//! resident memory, and (for our agent) the mean time in the signal
//! handler.
//!
//! Usage: `cargo run --release -p bench -- [--rounds N] [--seconds S] [--threads T]`
//! (needs `cargo build --release` first, for the agent).

use std::path::{Path, PathBuf};
use std::process::Command;

struct Config {
    name: &'static str,
    kind: Kind,
    period_ms: u32,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Baseline,
    Agent,
    Jfr,
}

const CONFIGS: &[Config] = &[
    Config { name: "unprofiled", kind: Kind::Baseline, period_ms: 0 },
    Config { name: "agent cpu=10ms", kind: Kind::Agent, period_ms: 10 },
    Config { name: "JFR 10ms", kind: Kind::Jfr, period_ms: 10 },
    Config { name: "agent cpu=1ms", kind: Kind::Agent, period_ms: 1 },
    Config { name: "JFR 1ms", kind: Kind::Jfr, period_ms: 1 },
];

#[derive(Default, Clone)]
struct Run {
    ops: f64,
    cpu_ns: f64,
    peak_rss_kb: f64,
    samples: f64,
    worker_samples: f64,
    file_bytes: f64,
    handler_ns: f64,
}

struct Options {
    rounds: usize,
    seconds: f64,
    threads: usize,
}

fn parse_options() -> Options {
    let mut options = Options { rounds: 5, seconds: 8.0, threads: 2 };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).unwrap_or_else(|| panic!("{} needs a value", pair[0]));
        match pair[0].as_str() {
            "--rounds" => options.rounds = value.parse().expect("--rounds N"),
            "--seconds" => options.seconds = value.parse().expect("--seconds S"),
            "--threads" => options.threads = value.parse().expect("--threads T"),
            other => panic!("unknown argument {other} (accepted: --rounds, --seconds, --threads)"),
        }
    }
    options
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn tool(name: &str) -> PathBuf {
    std::env::var_os("JAVA_HOME").map_or_else(|| PathBuf::from(name), |h| PathBuf::from(h).join("bin").join(name))
}

fn compile_workload(out: &Path) {
    std::fs::create_dir_all(out).unwrap();
    let status = Command::new(tool("javac"))
        .arg("-d")
        .arg(out)
        .arg(root().join("bench/java/Workload.java"))
        .status()
        .expect("run javac");
    assert!(status.success(), "javac failed");
}

fn jfc(dir: &Path, period_ms: u32) -> PathBuf {
    let path = dir.join(format!("cpu-{period_ms}ms.jfc"));
    let text = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<configuration version="2.0" label="cpu sampling only">
  <event name="jdk.ExecutionSample"><setting name="enabled">true</setting><setting name="period">{period_ms} ms</setting></event>
  <event name="jdk.NativeMethodSample"><setting name="enabled">false</setting></event>
</configuration>
"#
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn value(stdout: &str, key: &str) -> f64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(key).map(str::trim))
        .unwrap_or_else(|| panic!("no {key} in workload output: {stdout}"))
        .parse()
        .unwrap()
}

/// Number of `event` events recorded, and how many of them sampled the
/// workload's worker threads, from `jfr print`.
fn sample_counts(file: &Path, event: &str) -> (f64, f64) {
    let out = Command::new(tool("jfr")).args(["print", "--events", event]).arg(file).output().expect("run jfr print");
    let text = String::from_utf8_lossy(&out.stdout);
    let all = text.lines().filter(|l| l.starts_with(event)).count();
    let workers = text.lines().filter(|l| l.contains("Thread = \"worker-")).count();
    (all as f64, workers as f64)
}

fn counter(file: &Path, name: &str) -> f64 {
    let out = Command::new(tool("jfr"))
        .args(["print", "--events", "datadog.ProfilerCounter"])
        .arg(file)
        .output()
        .expect("run jfr print");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() == format!("name = \"{name}\"") {
            let count = lines.next().unwrap().trim().trim_start_matches("count = ");
            return count.parse().unwrap();
        }
    }
    0.0
}

fn run_once(config: &Config, options: &Options, classes: &Path, scratch: &Path, agent: &Path) -> Run {
    let file = scratch.join("bench.jfr");
    let _ = std::fs::remove_file(&file);
    let mut command = Command::new(tool("java"));
    match config.kind {
        Kind::Baseline => {}
        Kind::Agent => {
            command.arg(format!(
                "-agentpath:{}=start,cpu={}ms,file={}",
                agent.display(),
                config.period_ms,
                file.display()
            ));
        }
        Kind::Jfr => {
            command.arg(format!(
                "-XX:StartFlightRecording=settings={},filename={}",
                jfc(scratch, config.period_ms).display(),
                file.display()
            ));
        }
    }
    // A fixed, pre-touched heap keeps the JVM's own resident memory constant,
    // so differences in peak RSS are the profiler's.
    let output = command
        .args(["-Xms128m", "-Xmx128m", "-XX:+AlwaysPreTouch"])
        .arg("-cp")
        .arg(classes)
        .arg("Workload")
        .arg(options.threads.to_string())
        .arg(options.seconds.to_string())
        .output()
        .expect("run java");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{}: {}", config.name, String::from_utf8_lossy(&output.stderr));
    let mut run = Run {
        ops: value(&stdout, "ops "),
        cpu_ns: value(&stdout, "cpu_ns "),
        peak_rss_kb: value(&stdout, "peak_rss_kb "),
        ..Run::default()
    };
    if config.kind != Kind::Baseline {
        run.file_bytes = std::fs::metadata(&file).map(|m| m.len() as f64).unwrap_or(0.0);
    }
    let event = match config.kind {
        Kind::Agent => "datadog.ExecutionSample",
        Kind::Jfr => "jdk.ExecutionSample",
        Kind::Baseline => return run,
    };
    (run.samples, run.worker_samples) = sample_counts(&file, event);
    if config.kind == Kind::Agent {
        run.handler_ns = counter(&file, "handler_ns_p50");
    }
    run
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// The signal-delivery floor: loop throughput of a C program taking
/// SIGPROF from a perf cpu-clock counter with an empty handler, relative
/// to the same loop without signals. What any signal-based sampler pays
/// on this machine before doing any work.
fn signal_floor(scratch: &Path, options: &Options) {
    let binary = scratch.join("signal_floor");
    let status = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&binary)
        .arg(root().join("bench/c/signal_floor.c"))
        .status()
        .expect("run cc");
    assert!(status.success(), "cc failed");
    let run = |period_ns: u64| -> f64 {
        let out = Command::new(&binary).arg(period_ns.to_string()).arg("3").output().expect("run signal_floor");
        value(&String::from_utf8_lossy(&out.stdout), "iterations ")
    };
    println!("\nSignal delivery floor (empty SIGPROF handler, perf cpu-clock, one thread, medians):\n");
    println!("| period | loop throughput | loss |");
    println!("|---|---|---|");
    for period_ms in [10u64, 1] {
        let mut ratios = Vec::new();
        for _ in 0..options.rounds {
            let base = run(0);
            ratios.push(run(period_ms * 1_000_000) / base);
        }
        let ratio = median(ratios);
        println!("| {period_ms} ms | {ratio:.3} | {:.1}% |", (1.0 - ratio) * 100.0);
    }
}

fn main() {
    let options = parse_options();
    let agent = root().join("target/release/libprofiler.so");
    assert!(agent.exists(), "{} missing: run `cargo build --release` first", agent.display());
    let scratch = root().join("target/bench");
    let classes = scratch.join("classes");
    compile_workload(&classes);

    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); CONFIGS.len()];
    for round in 0..options.rounds {
        for (i, config) in CONFIGS.iter().enumerate() {
            let run = run_once(config, &options, &classes, &scratch, &agent);
            eprintln!("round {} {:>15}: {:.0} ops", round + 1, config.name, run.ops);
            runs[i].push(run);
        }
    }

    let base_ops = median(runs[0].iter().map(|r| r.ops).collect());
    let base_rss = median(runs[0].iter().map(|r| r.peak_rss_kb).collect());
    println!(
        "\n{} threads, {} s per run, {} rounds (medians; throughput relative to unprofiled runs of the same rounds)\n",
        options.threads, options.seconds, options.rounds
    );
    println!(
        "| configuration | throughput | loss | samples / nominal | bytes / sample | extra peak RSS | handler time (median) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (config, runs) in CONFIGS.iter().zip(&runs) {
        let throughput = median(runs.iter().map(|r| r.ops).collect()) / base_ops;
        let rss = median(runs.iter().map(|r| r.peak_rss_kb).collect()) - base_rss;
        if config.kind == Kind::Baseline {
            println!("| {} | 1.000 | - | - | - | - | - |", config.name);
            continue;
        }
        let nominal: Vec<f64> =
            runs.iter().map(|r| r.worker_samples / (r.cpu_ns / (f64::from(config.period_ms) * 1e6))).collect();
        let bytes = median(runs.iter().map(|r| r.file_bytes / r.samples.max(1.0)).collect());
        let handler = match config.kind {
            Kind::Agent => format!("{:.2} µs", median(runs.iter().map(|r| r.handler_ns).collect()) / 1000.0),
            _ => "-".to_owned(),
        };
        println!(
            "| {} | {:.3} | {:.1}% | {:.1}% | {:.1} | {:.1} MiB | {} |",
            config.name,
            throughput,
            (1.0 - throughput) * 100.0,
            median(nominal) * 100.0,
            bytes,
            rss / 1024.0,
            handler
        );
    }
    signal_floor(&scratch, &options);
}
