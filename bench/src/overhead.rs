//! Throughput, sample counts, file size and memory: the workload
//! unprofiled, under our agent, under async-profiler at the same settings
//! and under the JDK's Flight Recorder; and, for wall-clock sampling, 4
//! busy threads among 200. Our agent runs with `overhead=0` here: its
//! governor would otherwise stretch the interval asked for, and every row
//! must sample at the same rate.

use crate::support::{async_profiler, counter, javac, median, root, sample_counts, tool, value};
use crate::Options;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Config {
    name: &'static str,
    kind: Kind,
    period_ms: u32,
    /// More agent options (`,cstack=vm`).
    extra: &'static str,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Baseline,
    Agent,
    AgentWall,
    /// async-profiler, the peer, with its defaults otherwise.
    Peer,
    PeerWall,
    Jfr,
}

const CPU_CONFIGS: &[Config] = &[
    Config { name: "unprofiled", kind: Kind::Baseline, period_ms: 0, extra: "" },
    Config { name: "agent cpu=10ms", kind: Kind::Agent, period_ms: 10, extra: "" },
    Config { name: "async-profiler cpu=10ms", kind: Kind::Peer, period_ms: 10, extra: "" },
    Config { name: "JFR 10ms", kind: Kind::Jfr, period_ms: 10, extra: "" },
    Config { name: "agent cpu=1ms", kind: Kind::Agent, period_ms: 1, extra: "" },
    Config { name: "async-profiler cpu=1ms", kind: Kind::Peer, period_ms: 1, extra: "" },
    Config { name: "JFR 1ms", kind: Kind::Jfr, period_ms: 1, extra: "" },
];

const WALL_CONFIGS: &[Config] = &[
    Config { name: "unprofiled", kind: Kind::Baseline, period_ms: 0, extra: "" },
    Config { name: "agent wall=5ms", kind: Kind::AgentWall, period_ms: 5, extra: "" },
    Config { name: "async-profiler wall=5ms", kind: Kind::PeerWall, period_ms: 5, extra: "" },
];

/// Deep stacks: AsyncGetCallTrace (with frame-pointer native stacks, the
/// default) against the HotSpot walker, at 1 ms; async-profiler with its
/// default (its own VMStructs walker).
const DEEP_CONFIGS: &[Config] = &[
    Config { name: "unprofiled", kind: Kind::Baseline, period_ms: 0, extra: "" },
    Config { name: "agent cpu=1ms", kind: Kind::Agent, period_ms: 1, extra: "" },
    Config { name: "agent cpu=1ms,cstack=vm", kind: Kind::Agent, period_ms: 1, extra: ",cstack=vm" },
    Config { name: "async-profiler cpu=1ms", kind: Kind::Peer, period_ms: 1, extra: "" },
    Config { name: "JFR 1ms", kind: Kind::Jfr, period_ms: 1, extra: "" },
];

/// The recursion depth of the deep-stack table.
pub const DEEP_DEPTH: usize = 400;

/// The wall-clock workload: 4 busy threads and 196 idle ones.
const WALL_BUSY: usize = 4;
const WALL_IDLE: usize = 196;

/// One benchmark: its configurations and workload shape.
struct Suite {
    configs: &'static [Config],
    busy: usize,
    idle: usize,
    depth: usize,
}

#[derive(Default, Clone)]
struct Run {
    ops: f64,
    cpu_ns: f64,
    peak_rss_kb: f64,
    samples: f64,
    worker_samples: f64,
    file_bytes: f64,
    handler_ns: f64,
    /// The run's wall time, JVM start to exit: a recording spans it.
    elapsed_s: f64,
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

fn run_once(config: &Config, suite: &Suite, options: &Options, classes: &Path, scratch: &Path, agent: &Path) -> Run {
    let file = scratch.join("bench.jfr");
    let _ = std::fs::remove_file(&file);
    let mut command = Command::new(tool("java"));
    match config.kind {
        Kind::Baseline => {}
        Kind::Agent | Kind::AgentWall => {
            let event = if config.kind == Kind::Agent { "cpu" } else { "wall" };
            command.arg(format!(
                "-agentpath:{}=start,{event}={}ms{},overhead=0,file={}",
                agent.display(),
                config.period_ms,
                config.extra,
                file.display()
            ));
        }
        Kind::Peer | Kind::PeerWall => {
            let event = if config.kind == Kind::Peer { "event=cpu,interval" } else { "wall" };
            command.arg(format!(
                "-agentpath:{}=start,{event}={}ms{},file={}",
                async_profiler().display(),
                config.period_ms,
                config.extra,
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
    let started = std::time::Instant::now();
    let output = command
        .args(["-Xms128m", "-Xmx128m", "-XX:+AlwaysPreTouch"])
        .arg("-cp")
        .arg(classes)
        .arg("Workload")
        .arg(suite.busy.to_string())
        .arg(options.seconds.to_string())
        .arg(suite.idle.to_string())
        .arg(suite.depth.to_string())
        .output()
        .expect("run java");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{}: {}", config.name, String::from_utf8_lossy(&output.stderr));
    let mut run = Run {
        ops: value(&stdout, "ops "),
        cpu_ns: value(&stdout, "cpu_ns "),
        peak_rss_kb: value(&stdout, "peak_rss_kb "),
        elapsed_s: started.elapsed().as_secs_f64(),
        ..Run::default()
    };
    if config.kind != Kind::Baseline {
        run.file_bytes = std::fs::metadata(&file).map(|m| m.len() as f64).unwrap_or(0.0);
    }
    // An agent build's samples in either dialect (`--baseline` may be older).
    let events: &[&str] = match config.kind {
        Kind::Agent => &["jdk.ExecutionSample", "datadog.ExecutionSample"],
        Kind::AgentWall => &["profiler.WallClockSample", "datadog.MethodSample"],
        Kind::Peer | Kind::Jfr => &["jdk.ExecutionSample"],
        Kind::PeerWall => &["profiler.WallClockSample"],
        Kind::Baseline => return run,
    };
    (run.samples, run.worker_samples) = sample_counts(&file, events);
    if matches!(config.kind, Kind::Agent | Kind::AgentWall) {
        run.handler_ns = counter(&file, "handler_ns_p50");
    }
    run
}

/// The CPU table: `--threads` busy threads, no idle ones.
pub fn run(options: &Options, agent: &Path, scratch: &Path) {
    run_suite(&Suite { configs: CPU_CONFIGS, busy: options.threads, idle: 0, depth: 0 }, options, agent, scratch);
}

/// The deep-stack table: `--threads` busy threads working 400 frames deep.
pub fn run_deep(options: &Options, agent: &Path, scratch: &Path) {
    let suite = Suite { configs: DEEP_CONFIGS, busy: options.threads, idle: 0, depth: DEEP_DEPTH };
    run_suite(&suite, options, agent, scratch);
}

/// The wall-clock table: 4 busy threads among 200 at `wall=5ms`.
pub fn run_wall(options: &Options, agent: &Path, scratch: &Path) {
    run_suite(&Suite { configs: WALL_CONFIGS, busy: WALL_BUSY, idle: WALL_IDLE, depth: 0 }, options, agent, scratch);
}

/// One row of a table: a configuration and the agent build it runs.
struct Row<'a> {
    name: String,
    config: &'a Config,
    agent: &'a Path,
}

/// The rows of `configs`: each as given, and each agent configuration once
/// more with the `--baseline` build right after it.
fn rows<'a>(configs: &'a [Config], agent: &'a Path, baseline: Option<&'a Path>) -> Vec<Row<'a>> {
    let mut rows = Vec::new();
    for config in configs {
        rows.push(Row { name: config.name.to_owned(), config, agent });
        if let (Some(other), Kind::Agent | Kind::AgentWall) = (baseline, config.kind) {
            rows.push(Row { name: format!("{} (baseline)", config.name), config, agent: other });
        }
    }
    rows
}

/// Runs every row round by round and prints the table.
fn run_suite(suite: &Suite, options: &Options, agent: &Path, scratch: &Path) {
    let classes = scratch.join("classes");
    javac(&classes, &[root().join("bench/java/Workload.java")]);
    let rows = rows(suite.configs, agent, options.baseline.as_deref());
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); rows.len()];
    for round in 0..options.rounds {
        for (i, row) in rows.iter().enumerate() {
            let run = run_once(row.config, suite, options, &classes, scratch, row.agent);
            eprintln!("round {} {:>15}: {:.0} ops", round + 1, row.name, run.ops);
            runs[i].push(run);
        }
    }

    let base_ops = median(runs[0].iter().map(|r| r.ops).collect());
    let base_rss = median(runs[0].iter().map(|r| r.peak_rss_kb).collect());
    println!(
        "\n{} busy and {} idle threads, stack depth {}+, {} s per run, {} rounds (medians; throughput relative to unprofiled runs of the same rounds)\n",
        suite.busy, suite.idle, suite.depth, options.seconds, options.rounds
    );
    println!(
        "| configuration | throughput | loss | samples / nominal | bytes / sample | extra peak RSS | handler time (median) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (row, runs) in rows.iter().zip(&runs) {
        let config = row.config;
        let throughput = median(runs.iter().map(|r| r.ops).collect()) / base_ops;
        let rss = median(runs.iter().map(|r| r.peak_rss_kb).collect()) - base_rss;
        if config.kind == Kind::Baseline {
            println!("| {} | 1.000 | - | - | - | - | - |", row.name);
            continue;
        }
        // Wall clock has no per-thread nominal count (walltpt threads per
        // tick): the events a second of the run instead.
        let nominal = match config.kind {
            Kind::AgentWall | Kind::PeerWall => {
                format!("{:.0}/s", median(runs.iter().map(|r| r.samples / r.elapsed_s).collect()))
            }
            _ => {
                let shares = runs.iter().map(|r| r.worker_samples / (r.cpu_ns / (f64::from(config.period_ms) * 1e6)));
                format!("{:.1}%", median(shares.collect()) * 100.0)
            }
        };
        let bytes = median(runs.iter().map(|r| r.file_bytes / r.samples.max(1.0)).collect());
        let handler = match config.kind {
            Kind::Agent | Kind::AgentWall => {
                format!("{:.2} µs", median(runs.iter().map(|r| r.handler_ns).collect()) / 1000.0)
            }
            _ => "-".to_owned(),
        };
        println!(
            "| {} | {:.3} | {:.1}% | {} | {:.1} | {:.1} MiB | {} |",
            row.name,
            throughput,
            (1.0 - throughput) * 100.0,
            nominal,
            bytes,
            rss / 1024.0,
            handler
        );
    }
}
