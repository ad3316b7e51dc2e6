//! Allocation and lock profiling side by side: the `AllocLockWorkload`
//! program unprofiled, under our agent, under async-profiler at the same
//! settings and under the JDK's Flight Recorder (its own sampling of the
//! same events), interleaved round by round: throughput, events recorded,
//! bytes per event, extra peak RSS.

use crate::support::{async_profiler, javac, median, root, sample_counts, tool, value};
use crate::Options;
use std::path::Path;
use std::process::Command;

#[derive(Clone, Copy, PartialEq)]
enum Profiler {
    None,
    Ours,
    /// async-profiler, the peer.
    Peer,
    Jfr,
}

struct Config {
    name: &'static str,
    profiler: Profiler,
    /// Agent options after `start,` (ours and async-profiler's), or the
    /// JFR settings' event elements.
    settings: &'static str,
}

const ALLOC_EVENTS: &[&str] = &[
    "jdk.ObjectAllocationSample",
    "jdk.ObjectAllocationInNewTLAB",
    "jdk.ObjectAllocationOutsideTLAB",
    "profiler.LiveObject",
];
const LOCK_EVENTS: &[&str] = &["jdk.JavaMonitorEnter", "jdk.ThreadPark"];

const ALLOC_CONFIGS: &[Config] = &[
    Config { name: "unprofiled", profiler: Profiler::None, settings: "" },
    Config { name: "ours alloc=512k", profiler: Profiler::Ours, settings: "alloc=512k" },
    Config { name: "ours alloc=512k,live", profiler: Profiler::Ours, settings: "alloc=512k,live" },
    Config { name: "async-profiler alloc=512k", profiler: Profiler::Peer, settings: "alloc=512k" },
    Config { name: "async-profiler alloc=512k,live", profiler: Profiler::Peer, settings: "alloc=512k,live" },
    Config {
        name: "JFR ObjectAllocationSample 150/s",
        profiler: Profiler::Jfr,
        settings: r#"<event name="jdk.ObjectAllocationSample"><setting name="enabled">true</setting><setting name="throttle">150/s</setting><setting name="stackTrace">true</setting></event>"#,
    },
];

const LOCK_CONFIGS: &[Config] = &[
    Config { name: "unprofiled", profiler: Profiler::None, settings: "" },
    Config { name: "ours lock=1ms", profiler: Profiler::Ours, settings: "lock=1ms" },
    Config { name: "async-profiler lock=1ms", profiler: Profiler::Peer, settings: "lock=1ms" },
    Config { name: "ours lock (10us, the default)", profiler: Profiler::Ours, settings: "lock" },
    Config { name: "async-profiler lock=10us", profiler: Profiler::Peer, settings: "lock=10us" },
    Config {
        name: "JFR JavaMonitorEnter+ThreadPark 1ms",
        profiler: Profiler::Jfr,
        settings: r#"<event name="jdk.JavaMonitorEnter"><setting name="enabled">true</setting><setting name="threshold">1 ms</setting><setting name="stackTrace">true</setting></event><event name="jdk.ThreadPark"><setting name="enabled">true</setting><setting name="threshold">1 ms</setting><setting name="stackTrace">true</setting></event>"#,
    },
];

/// Native memory profiling of a malloc-heavy workload (zlib streams,
/// `Unsafe` blocks), at the default interval and a small one.
const NATIVEMEM_CONFIGS: &[Config] = &[
    Config { name: "unprofiled", profiler: Profiler::None, settings: "" },
    Config { name: "ours nativemem=512k", profiler: Profiler::Ours, settings: "nativemem=512k" },
    Config { name: "async-profiler nativemem=512k", profiler: Profiler::Peer, settings: "nativemem=512k" },
    Config { name: "ours nativemem=512k,nofree", profiler: Profiler::Ours, settings: "nativemem=512k,nofree" },
    Config {
        name: "async-profiler nativemem=512k,nofree",
        profiler: Profiler::Peer,
        settings: "nativemem=512k,nofree",
    },
    Config { name: "ours nativemem=32k", profiler: Profiler::Ours, settings: "nativemem=32k" },
    Config { name: "async-profiler nativemem=32k", profiler: Profiler::Peer, settings: "nativemem=32k" },
];
const NATIVEMEM_EVENTS: &[&str] = &["profiler.Malloc", "profiler.Free"];

/// Shipping to backends that are down, never answer, or refuse
/// (`export`, on the allocation workload): the JVM's throughput must not
/// notice. `{down}`, `{slow}` and `{refuse}` are the bench's receivers.
const EXPORT_CONFIGS: &[Config] = &[
    Config { name: "unprofiled", profiler: Profiler::None, settings: "" },
    Config { name: "ours cpu=10ms", profiler: Profiler::Ours, settings: "cpu=10ms" },
    Config { name: "ours + pyroscope, down", profiler: Profiler::Ours, settings: "cpu=10ms,loop=1s,pyroscope={down}" },
    Config {
        name: "ours + pyroscope, never answers",
        profiler: Profiler::Ours,
        settings: "cpu=10ms,loop=1s,pyroscope={slow}",
    },
    Config {
        name: "ours + pyroscope, answers 400",
        profiler: Profiler::Ours,
        settings: "cpu=10ms,loop=1s,pyroscope={refuse}",
    },
];
const CPU_EVENTS: &[&str] = &["jdk.ExecutionSample"];

/// The receivers of the `export` table: a port nobody listens on, one
/// that accepts and never answers, one that answers 400. They live as
/// long as the bench.
fn receivers() -> [(&'static str, String); 3] {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    let url = |listener: &TcpListener| format!("http://{}", listener.local_addr().unwrap());
    let down = url(&TcpListener::bind("127.0.0.1:0").unwrap());
    let slow = TcpListener::bind("127.0.0.1:0").unwrap();
    let refuse = TcpListener::bind("127.0.0.1:0").unwrap();
    let (slow_url, refuse_url) = (url(&slow), url(&refuse));
    std::thread::spawn(move || {
        // Accepted, read from by nobody, answered never.
        let mut held = Vec::new();
        for stream in slow.incoming() {
            held.push(stream);
        }
    });
    std::thread::spawn(move || {
        for mut stream in refuse.incoming().flatten() {
            let mut buffer = [0u8; 65536];
            let _ = stream.read(&mut buffer);
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    [("{down}", down), ("{slow}", slow_url), ("{refuse}", refuse_url)]
}

/// Virtual threads' many short parks (`vlock`, JDK 21+): what timing
/// them costs.
const VIRTUAL_LOCK_CONFIGS: &[Config] = &[
    Config { name: "unprofiled", profiler: Profiler::None, settings: "" },
    Config { name: "ours lock (10us, the default)", profiler: Profiler::Ours, settings: "lock" },
    Config { name: "async-profiler lock=10us", profiler: Profiler::Peer, settings: "lock=10us" },
    Config { name: "ours lock,lockvirtual=false", profiler: Profiler::Ours, settings: "lock,lockvirtual=false" },
];

#[derive(Default, Clone)]
struct Run {
    ops: f64,
    peak_rss_kb: f64,
    events: f64,
    file_bytes: f64,
}

#[allow(clippy::too_many_arguments)]
fn run_once(
    config: &Config,
    mode: &str,
    seconds: f64,
    classes: &Path,
    scratch: &Path,
    agent: &Path,
    urls: &[(&str, String)],
) -> Run {
    let file = scratch.join("alloc-lock.jfr");
    let _ = std::fs::remove_file(&file);
    let shipping = urls.iter().any(|(name, _)| config.settings.contains(name));
    let mut command = Command::new(tool("java"));
    match config.profiler {
        Profiler::None => {}
        // A session shipping to a receiver keeps no file (a looping one
        // would need a file per period).
        Profiler::Ours if shipping => {
            let settings = urls.iter().fold(config.settings.to_owned(), |s, (name, url)| s.replace(name, url));
            command.arg(format!("-agentpath:{}=start,{settings}", agent.display()));
        }
        Profiler::Ours => {
            command.arg(format!("-agentpath:{}=start,{},file={}", agent.display(), config.settings, file.display()));
        }
        Profiler::Peer => {
            let library = async_profiler();
            command.arg(format!("-agentpath:{}=start,{},file={}", library.display(), config.settings, file.display()));
        }
        Profiler::Jfr => {
            let jfc = scratch.join(format!("{mode}.jfc"));
            let text = format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<configuration version=\"2.0\">{}</configuration>\n",
                config.settings
            );
            std::fs::write(&jfc, text).unwrap();
            command.arg(format!("-XX:StartFlightRecording=settings={},filename={}", jfc.display(), file.display()));
        }
    }
    // A fixed, pre-touched heap keeps the JVM's own resident memory
    // constant, so differences in peak RSS are the profiler's.
    let output = command
        .args(["-Xms512m", "-Xmx512m", "-XX:+AlwaysPreTouch", "-cp"])
        .arg(classes)
        .args(["AllocLockWorkload", if mode == "export" { "alloc" } else { mode }, &seconds.to_string()])
        .output()
        .expect("run java");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{}: {}", config.name, String::from_utf8_lossy(&output.stderr));
    let mut run = Run { ops: value(&stdout, "ops "), peak_rss_kb: value(&stdout, "peak_rss_kb "), ..Run::default() };
    if config.profiler != Profiler::None && !shipping {
        run.file_bytes = std::fs::metadata(&file).map(|m| m.len() as f64).unwrap_or(0.0);
        let events = match mode {
            "alloc" => ALLOC_EVENTS,
            "nativemem" => NATIVEMEM_EVENTS,
            "export" => CPU_EVENTS,
            _ => LOCK_EVENTS,
        };
        run.events = sample_counts(&file, events).events;
    }
    run
}

/// The allocation table (`mode` `alloc`), the lock table (`lock`), the
/// virtual threads' lock table (`vlock`), the native memory table
/// (`nativemem`) or the shipping table (`export`).
pub fn run(options: &Options, agent: &Path, scratch: &Path, mode: &str) {
    let classes = scratch.join("classes");
    javac(&classes, &[root().join("bench/java/AllocLockWorkload.java")]);
    let configs = match mode {
        "alloc" => ALLOC_CONFIGS,
        "lock" => LOCK_CONFIGS,
        "nativemem" => NATIVEMEM_CONFIGS,
        "export" => EXPORT_CONFIGS,
        _ => VIRTUAL_LOCK_CONFIGS,
    };
    let urls = if mode == "export" { receivers().to_vec() } else { Vec::new() };
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); configs.len()];
    for round in 0..options.rounds {
        for (i, config) in configs.iter().enumerate() {
            let run = run_once(config, mode, options.seconds, &classes, scratch, agent, &urls);
            eprintln!("round {} {:>35}: {:.0} ops", round + 1, config.name, run.ops);
            runs[i].push(run);
        }
    }
    let base_ops = median(runs[0].iter().map(|r| r.ops).collect());
    let base_rss = median(runs[0].iter().map(|r| r.peak_rss_kb).collect());
    println!(
        "\n{mode} workload, {} s per run, {} rounds (medians; throughput relative to unprofiled runs of the same rounds)\n",
        options.seconds, options.rounds
    );
    println!("| configuration | throughput | loss | events | bytes / event | extra peak RSS |");
    println!("|---|---|---|---|---|---|");
    for (config, runs) in configs.iter().zip(&runs) {
        let throughput = median(runs.iter().map(|r| r.ops).collect()) / base_ops;
        if config.profiler == Profiler::None {
            println!("| {} | 1.000 | - | - | - | - |", config.name);
            continue;
        }
        let events = median(runs.iter().map(|r| r.events).collect());
        let bytes = median(runs.iter().map(|r| r.file_bytes / r.events.max(1.0)).collect());
        let rss = median(runs.iter().map(|r| r.peak_rss_kb).collect()) - base_rss;
        println!(
            "| {} | {:.3} | {:.1}% | {:.0} | {:.1} | {:.1} MiB |",
            config.name,
            throughput,
            (1.0 - throughput) * 100.0,
            events,
            bytes,
            rss / 1024.0
        );
    }
}
