//! Throughput, sample counts, file size and memory: the workload
//! unprofiled, under our agent, under async-profiler at the same settings
//! and under the JDK's Flight Recorder; and, for wall-clock sampling, 4
//! busy threads among 200. Our agent runs with `overhead=0` here: its
//! governor would otherwise stretch the interval asked for, and every row
//! must sample at the same rate. The governor table is the exception: it
//! samples deep stacks at the interval floor, where only the governor
//! (on by default) holds the cost down.

use crate::support::{
    async_profiler, counter, debian_jar, javac, javac_with, median, root, sample_counts, setting, tool, value,
};
use crate::Options;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Config {
    name: &'static str,
    kind: Kind,
    /// The sampling interval in microseconds.
    period_us: u32,
    /// More options (`,cstack=vm`; our agent's rows name `overhead`).
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

/// Our agent with its overhead governor off (see the module comment).
const UNGOVERNED: &str = ",overhead=0";

const CPU_CONFIGS: &[Config] = &[
    Config { name: "unprofiled", kind: Kind::Baseline, period_us: 0, extra: "" },
    Config { name: "agent cpu=10ms", kind: Kind::Agent, period_us: 10_000, extra: UNGOVERNED },
    Config { name: "async-profiler cpu=10ms", kind: Kind::Peer, period_us: 10_000, extra: "" },
    Config { name: "JFR 10ms", kind: Kind::Jfr, period_us: 10_000, extra: "" },
    Config { name: "agent cpu=1ms", kind: Kind::Agent, period_us: 1_000, extra: UNGOVERNED },
    Config { name: "async-profiler cpu=1ms", kind: Kind::Peer, period_us: 1_000, extra: "" },
    Config { name: "JFR 1ms", kind: Kind::Jfr, period_us: 1_000, extra: "" },
];

const WALL_CONFIGS: &[Config] = &[
    Config { name: "unprofiled", kind: Kind::Baseline, period_us: 0, extra: "" },
    Config { name: "agent wall=5ms", kind: Kind::AgentWall, period_us: 5_000, extra: UNGOVERNED },
    Config {
        name: "agent wall=5ms,wallbatch=false",
        kind: Kind::AgentWall,
        period_us: 5_000,
        extra: ",overhead=0,wallbatch=false",
    },
    // Every thread visited every interval, as async-profiler visits them.
    Config {
        name: "agent wall=5ms,walltpt=256",
        kind: Kind::AgentWall,
        period_us: 5_000,
        extra: ",overhead=0,walltpt=256",
    },
    Config { name: "async-profiler wall=5ms", kind: Kind::PeerWall, period_us: 5_000, extra: "" },
];

/// Deep stacks: AsyncGetCallTrace (with frame-pointer native stacks)
/// against the HotSpot walker (the default), at 1 ms; async-profiler with
/// its default (its own VMStructs walker).
const DEEP_CONFIGS: &[Config] = &[
    Config { name: "unprofiled", kind: Kind::Baseline, period_us: 0, extra: "" },
    Config {
        name: "agent cpu=1ms,javawalk=asgct",
        kind: Kind::Agent,
        period_us: 1_000,
        extra: ",cstack=fp,javawalk=asgct,overhead=0",
    },
    Config { name: "agent cpu=1ms,cstack=vm", kind: Kind::Agent, period_us: 1_000, extra: ",cstack=vm,overhead=0" },
    Config { name: "async-profiler cpu=1ms", kind: Kind::Peer, period_us: 1_000, extra: "" },
    Config { name: "JFR 1ms", kind: Kind::Jfr, period_us: 1_000, extra: "" },
];

/// The governor at work: deep stacks sampled at the CPU interval's floor
/// (100 us), where the profiler would take far more than the default
/// ceiling (10% of the application's CPU): ungoverned, governed by
/// default, the interval the governor settles on ungoverned, and
/// async-profiler at the asked interval (it has no governor); and at 1 ms,
/// where the default leaves the interval alone.
const GOVERNOR_CONFIGS: &[Config] = &[
    Config { name: "unprofiled", kind: Kind::Baseline, period_us: 0, extra: "" },
    Config { name: "agent cpu=100us,overhead=0", kind: Kind::Agent, period_us: 100, extra: UNGOVERNED },
    Config { name: "agent cpu=100us (overhead=10, the default)", kind: Kind::Agent, period_us: 100, extra: "" },
    // Ungoverned at the interval the governor settles on here (4x):
    // what the governed run costs once stretched.
    Config { name: "agent cpu=400us,overhead=0", kind: Kind::Agent, period_us: 400, extra: UNGOVERNED },
    Config { name: "async-profiler cpu=100us", kind: Kind::Peer, period_us: 100, extra: "" },
    Config { name: "agent cpu=1ms (overhead=10, the default)", kind: Kind::Agent, period_us: 1_000, extra: "" },
    Config { name: "async-profiler cpu=1ms", kind: Kind::Peer, period_us: 1_000, extra: "" },
];

/// A real application: the H2 SQL engine (Debian's libh2-java) under
/// load, default settings otherwise on every side.
const H2_CONFIGS: &[Config] = &[
    Config { name: "unprofiled", kind: Kind::Baseline, period_us: 0, extra: "" },
    Config { name: "agent cpu=10ms", kind: Kind::Agent, period_us: 10_000, extra: UNGOVERNED },
    Config { name: "async-profiler cpu=10ms", kind: Kind::Peer, period_us: 10_000, extra: "" },
    Config { name: "JFR 10ms", kind: Kind::Jfr, period_us: 10_000, extra: "" },
    Config {
        name: "agent cpu=1ms,javawalk=asgct",
        kind: Kind::Agent,
        period_us: 1_000,
        extra: ",cstack=fp,javawalk=asgct,overhead=0",
    },
    Config { name: "agent cpu=1ms,cstack=vm", kind: Kind::Agent, period_us: 1_000, extra: ",cstack=vm,overhead=0" },
    Config { name: "async-profiler cpu=1ms", kind: Kind::Peer, period_us: 1_000, extra: "" },
];

/// The recursion depth of the deep-stack table.
pub const DEEP_DEPTH: usize = 400;

/// The wall-clock workload: 4 busy threads and 196 idle ones.
const WALL_BUSY: usize = 4;
const WALL_IDLE: usize = 196;

/// What `Workload`'s busy threads do.
#[derive(Clone, Copy, PartialEq)]
enum Work {
    /// Arithmetic and sorting: Java code only.
    Sort,
    /// `java.util.zip.Deflater`: zlib's C code under a native method.
    Deflate,
}

impl Work {
    fn arg(self) -> &'static str {
        match self {
            Work::Sort => "sort",
            Work::Deflate => "deflate",
        }
    }
}

/// Native stacks: zlib (Debian's `libz.so.1`, built without frame
/// pointers) under `Deflater`, at 1 ms, each side with its default Java
/// source and with DWARF unwinding asked for explicitly. No JFR row: its
/// execution samples stop at the native method.
const ZLIB_CONFIGS: &[Config] = &[
    Config { name: "unprofiled", kind: Kind::Baseline, period_us: 0, extra: "" },
    Config { name: "agent cpu=1ms", kind: Kind::Agent, period_us: 1_000, extra: UNGOVERNED },
    Config {
        name: "agent cpu=1ms,cstack=dwarf",
        kind: Kind::Agent,
        period_us: 1_000,
        extra: ",cstack=dwarf,overhead=0",
    },
    Config { name: "async-profiler cpu=1ms", kind: Kind::Peer, period_us: 1_000, extra: "" },
    Config { name: "async-profiler cpu=1ms,cstack=dwarf", kind: Kind::Peer, period_us: 1_000, extra: ",cstack=dwarf" },
];

/// The Java program a table runs.
#[derive(Clone, Copy, PartialEq)]
enum Program {
    /// `bench/java/Workload.java`: arithmetic and sorting, optionally deep
    /// or among idle threads.
    Workload,
    /// `bench/java/H2Workload.java`: SQL against embedded H2.
    H2,
}

/// One benchmark: its configurations and workload shape.
struct Suite {
    configs: &'static [Config],
    program: Program,
    busy: usize,
    idle: usize,
    depth: usize,
    work: Work,
    /// Also print the governor's table (stretches, handler CPU).
    governor: bool,
}

#[derive(Default, Clone)]
struct Run {
    ops: f64,
    cpu_ns: f64,
    peak_rss_kb: f64,
    /// Events recorded; of them on worker threads; the samples they
    /// stand for (async-profiler folds idle wall-clock samples).
    samples: f64,
    worker_samples: f64,
    folded_samples: f64,
    file_bytes: f64,
    handler_ns: f64,
    /// Signal handler CPU time in all (our agent).
    handler_total_ns: f64,
    /// The governor's stretches and the CPU interval in force at the end,
    /// in microseconds (our agent).
    stretches: f64,
    interval_us: f64,
    /// The run's wall time, JVM start to exit: a recording spans it.
    elapsed_s: f64,
}

/// A JFR configuration sampling CPU every `period_us` (whole milliseconds).
fn jfc(dir: &Path, period_us: u32) -> PathBuf {
    assert_eq!(period_us % 1000, 0, "JFR rows sample at whole milliseconds");
    let period_ms = period_us / 1000;
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

fn run_once(config: &Config, suite: &Suite, options: &Options, classpath: &str, scratch: &Path, agent: &Path) -> Run {
    let file = scratch.join("bench.jfr");
    let _ = std::fs::remove_file(&file);
    let mut command = Command::new(tool("java"));
    match config.kind {
        Kind::Baseline => {}
        Kind::Agent | Kind::AgentWall => {
            let event = if config.kind == Kind::Agent { "cpu" } else { "wall" };
            command.arg(format!(
                "-agentpath:{}=start,{event}={}us{},file={}",
                agent.display(),
                config.period_us,
                config.extra,
                file.display()
            ));
        }
        Kind::Peer | Kind::PeerWall => {
            let event = if config.kind == Kind::Peer { "event=cpu,interval" } else { "wall" };
            command.arg(format!(
                "-agentpath:{}=start,{event}={}us{},file={}",
                async_profiler().display(),
                config.period_us,
                config.extra,
                file.display()
            ));
        }
        Kind::Jfr => {
            command.arg(format!(
                "-XX:StartFlightRecording=settings={},filename={}",
                jfc(scratch, config.period_us).display(),
                file.display()
            ));
        }
    }
    // A fixed, pre-touched heap keeps the JVM's own resident memory constant,
    // so differences in peak RSS are the profiler's.
    command.args(["-Xms128m", "-Xmx128m", "-XX:+AlwaysPreTouch", "-cp", classpath]);
    match suite.program {
        Program::Workload => command.arg("Workload"),
        Program::H2 => command.arg("H2Workload"),
    };
    command.arg(suite.busy.to_string()).arg(options.seconds.to_string());
    if suite.program == Program::Workload {
        command.arg(suite.idle.to_string()).arg(suite.depth.to_string()).arg(suite.work.arg());
    }
    let started = std::time::Instant::now();
    let output = command.output().expect("run java");
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
    let counts = sample_counts(&file, events);
    (run.samples, run.worker_samples, run.folded_samples) = (counts.events, counts.workers, counts.samples);
    if matches!(config.kind, Kind::Agent | Kind::AgentWall) {
        run.handler_ns = counter(&file, "handler_ns_p50");
        run.handler_total_ns = counter(&file, "handler_ns_total");
        run.stretches = counter(&file, "overhead_stretches");
        // "100000 ns"
        run.interval_us = setting(&file, "interval")
            .and_then(|v| v.strip_suffix(" ns").and_then(|ns| ns.parse::<f64>().ok()))
            .map_or(0.0, |ns| ns / 1000.0);
    }
    run
}

impl Suite {
    /// `threads` threads of `program` busy with `configs`' rows: the
    /// shallow sort work, no idle threads.
    fn busy(configs: &'static [Config], program: Program, threads: usize) -> Self {
        Suite { configs, program, busy: threads, idle: 0, depth: 0, work: Work::Sort, governor: false }
    }
}

/// The CPU table: `--threads` busy threads, no idle ones.
pub fn run(options: &Options, agent: &Path, scratch: &Path) {
    run_suite(&Suite::busy(CPU_CONFIGS, Program::Workload, options.threads), options, agent, scratch);
}

/// The deep-stack table: `--threads` busy threads working 400 frames deep.
pub fn run_deep(options: &Options, agent: &Path, scratch: &Path) {
    let suite = Suite { depth: DEEP_DEPTH, ..Suite::busy(DEEP_CONFIGS, Program::Workload, options.threads) };
    run_suite(&suite, options, agent, scratch);
}

/// The native-stack table: `--threads` busy threads in zlib.
pub fn run_zlib(options: &Options, agent: &Path, scratch: &Path) {
    let suite = Suite { work: Work::Deflate, ..Suite::busy(ZLIB_CONFIGS, Program::Workload, options.threads) };
    run_suite(&suite, options, agent, scratch);
}

/// The real-application table: H2 with `--threads` workers.
pub fn run_h2(options: &Options, agent: &Path, scratch: &Path) {
    run_suite(&Suite::busy(H2_CONFIGS, Program::H2, options.threads), options, agent, scratch);
}

/// The governor table: `--threads` busy threads 400 frames deep, sampled
/// at 100 us.
pub fn run_governor(options: &Options, agent: &Path, scratch: &Path) {
    let suite = Suite {
        depth: DEEP_DEPTH,
        governor: true,
        ..Suite::busy(GOVERNOR_CONFIGS, Program::Workload, options.threads)
    };
    run_suite(&suite, options, agent, scratch);
}

/// The wall-clock table: 4 busy threads among 200 at `wall=5ms`.
pub fn run_wall(options: &Options, agent: &Path, scratch: &Path) {
    let suite = Suite { idle: WALL_IDLE, ..Suite::busy(WALL_CONFIGS, Program::Workload, WALL_BUSY) };
    run_suite(&suite, options, agent, scratch);
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
    let classpath = match suite.program {
        Program::Workload => {
            javac(&classes, &[root().join("bench/java/Workload.java")]);
            classes.display().to_string()
        }
        Program::H2 => {
            let h2 = debian_jar("libh2-java", "h2.jar");
            javac_with(&classes, &[root().join("bench/java/H2Workload.java")], Some(&h2));
            format!("{}:{}", classes.display(), h2.display())
        }
    };
    let rows = rows(suite.configs, agent, options.baseline.as_deref());
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); rows.len()];
    for round in 0..options.rounds {
        for (i, row) in rows.iter().enumerate() {
            let run = run_once(row.config, suite, options, &classpath, scratch, row.agent);
            eprintln!("round {} {:>15}: {:.0} ops", round + 1, row.name, run.ops);
            runs[i].push(run);
        }
    }

    let base_ops = median(runs[0].iter().map(|r| r.ops).collect());
    let base_rss = median(runs[0].iter().map(|r| r.peak_rss_kb).collect());
    let program = match suite.program {
        Program::Workload => format!("Workload, {}", suite.work.arg()),
        Program::H2 => "H2Workload".to_owned(),
    };
    println!(
        "\n{program}: {} busy and {} idle threads, stack depth {}+, {} s per run, {} rounds (medians; throughput relative to unprofiled runs of the same rounds)\n",
        suite.busy, suite.idle, suite.depth, options.seconds, options.rounds
    );
    println!(
        "| configuration | throughput | loss | samples / nominal | bytes / sample | extra peak RSS | handler time: median (mean) |"
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
        // tick): the events a second of the run instead, and the samples
        // they stand for.
        let nominal = match config.kind {
            Kind::AgentWall | Kind::PeerWall => format!(
                "{:.0}/s ({:.0} samples/s)",
                median(runs.iter().map(|r| r.samples / r.elapsed_s).collect()),
                median(runs.iter().map(|r| r.folded_samples / r.elapsed_s).collect())
            ),
            _ => {
                let shares = runs.iter().map(|r| r.worker_samples / (r.cpu_ns / (f64::from(config.period_us) * 1e3)));
                format!("{:.1}%", median(shares.collect()) * 100.0)
            }
        };
        let bytes = median(runs.iter().map(|r| r.file_bytes / r.samples.max(1.0)).collect());
        // The median comes from quarter-octave buckets; the mean is the
        // handlers' total time over the samples recorded (CPU only: a
        // wall-clock event may stand for no signal; a dropped sample's
        // handler time counts toward it).
        let handler_median = median(runs.iter().map(|r| r.handler_ns).collect()) / 1000.0;
        let handler = match config.kind {
            Kind::Agent => format!(
                "{handler_median:.2} µs ({:.2} µs)",
                median(runs.iter().map(|r| r.handler_total_ns / r.samples.max(1.0)).collect()) / 1000.0
            ),
            Kind::AgentWall => format!("{handler_median:.2} µs"),
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
    if suite.governor {
        print_governor(&rows, &runs);
    }
    if suite.configs.iter().any(|c| matches!(c.kind, Kind::AgentWall | Kind::PeerWall)) {
        print_cost_per_sample(suite, &rows, &runs, base_ops);
    }
}

/// Wall-clock rows: the application's CPU lost per sample taken, the
/// throughput lost (as a share of the cores the busy threads can use)
/// over the samples a second the events stand for.
fn print_cost_per_sample(suite: &Suite, rows: &[Row], runs: &[Vec<Run>], base_ops: f64) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()).min(suite.busy) as f64;
    println!("\n| configuration | samples / s | CPU lost per sample |");
    println!("|---|---|---|");
    for (row, runs) in rows.iter().zip(runs) {
        if !matches!(row.config.kind, Kind::AgentWall | Kind::PeerWall) {
            continue;
        }
        let loss = 1.0 - median(runs.iter().map(|r| r.ops).collect()) / base_ops;
        let per_second = median(runs.iter().map(|r| r.folded_samples / r.elapsed_s).collect());
        println!("| {} | {per_second:.0} | {:.1} µs |", row.name, loss * cores * 1e6 / per_second.max(1.0));
    }
}

/// Per agent row: the governor's stretches, the CPU interval in force at
/// the end and the signal handlers' CPU time as a share of one core over
/// the run.
fn print_governor(rows: &[Row], runs: &[Vec<Run>]) {
    println!("\n| configuration | stretches | interval in force | handler CPU (share of one core) |");
    println!("|---|---|---|---|");
    for (row, runs) in rows.iter().zip(runs) {
        if row.config.kind != Kind::Agent {
            continue;
        }
        let stretches = median(runs.iter().map(|r| r.stretches).collect());
        let interval_us = median(runs.iter().map(|r| r.interval_us).collect());
        let share = median(runs.iter().map(|r| r.handler_total_ns / (r.elapsed_s * 1e9)).collect());
        println!("| {} | {stretches:.0} | {interval_us:.0} us | {:.1}% |", row.name, share * 100.0);
    }
}
