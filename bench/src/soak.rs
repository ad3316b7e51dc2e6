//! The soak run (`--only soak`, never part of a plain run): the churn
//! fixture of the integration tests (16 short-lived threads started and
//! joined continuously, a class loaded into a throwaway loader and dropped
//! over and over, four threads contending for a monitor and a lock) under
//! CPU and wall clock at 1 ms, allocation and lock profiling, with a dump
//! through the Java API every second, for `--soak-seconds` (600). The
//! JVM's resident memory, open descriptors and threads are read from
//! `/proc` every 5 s, and once a minute the memory the JVM itself has
//! committed (Native Memory Tracking, through `jcmd`): what matters is
//! that they are flat after the first minute, and that what grows is not
//! the agent's (resident memory less the JVM's committed memory). The heap
//! is fixed and pre-touched, so that its pages do not count as growth.
//!
//! `--only soak-loop` runs the same load as an always-on session does:
//! `loop=1m,maxfiles=10` and a dump every 30 s, and reads the period
//! files on disk with the rest (a file a minute; disk use flat at the
//! bound once ten minutes have passed), and the agent's own heap
//! (`agent_heap_bytes`) from the newest finished file each minute.

use crate::dumps::churn_classpath;
use crate::support::{counter_at_end, tool, value};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How often `/proc` is read.
const EVERY: Duration = Duration::from_secs(5);

/// Where "after the first minute" starts.
const SETTLED: Duration = Duration::from_secs(60);

#[derive(Clone, Copy)]
struct Reading {
    at: Duration,
    rss_kb: u64,
    fds: u64,
    threads: u64,
    /// Period files on disk and their bytes (`soak-loop`).
    files: (u64, u64),
    /// The JVM's committed memory (NMT), read once a minute.
    jvm_committed_kb: Option<u64>,
    /// The agent's own heap (`agent_heap_bytes`) at the end of the newest
    /// finished period file, read once a minute (`soak-loop`).
    agent_heap_kb: Option<u64>,
}

/// The process's resident memory and threads (`/proc/PID/status`) and
/// open descriptors; `None` once it has gone.
fn read(pid: u32, at: Duration) -> Option<Reading> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        line[name.len()..].split_whitespace().next()?.parse().ok()
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    let threads = field("Threads:")?;
    Some(Reading {
        at,
        rss_kb: field("VmRSS:")?,
        fds,
        threads,
        files: (0, 0),
        jvm_committed_kb: None,
        agent_heap_kb: None,
    })
}

/// The JVM's committed memory by its own Native Memory Tracking:
/// `Total: reserved=…KB, committed=…KB` of `jcmd PID VM.native_memory summary`.
fn jvm_committed_kb(pid: u32) -> Option<u64> {
    let out = Command::new(tool("jcmd")).arg(pid.to_string()).args(["VM.native_memory", "summary"]).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let total = text.lines().find(|l| l.trim_start().starts_with("Total:"))?;
    total.split("committed=").nth(1)?.trim_end_matches("KB").split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// `agent_heap_bytes` at the end of the newest finished period file in
/// `dir` (the newest of all is still being written), in KiB.
fn agent_heap_kb(dir: &Path) -> Option<u64> {
    let mut files: Vec<_> = std::fs::read_dir(dir).ok()?.filter_map(|e| Some(e.ok()?.path())).collect();
    files.sort();
    let finished = files.iter().rev().nth(1)?;
    counter_at_end(finished, "agent_heap_bytes").map(|bytes| bytes as u64 / 1024)
}

/// The period files in `dir` and their bytes.
fn files_in(dir: &Path) -> (u64, u64) {
    let sizes: Vec<u64> = std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).collect())
        .unwrap_or_default();
    (sizes.len() as u64, sizes.iter().sum())
}

/// What the soak runs under the churn load.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every kind of profiling, a dump a second.
    Dumps,
    /// An always-on session: `loop=1m,maxfiles=10`, a dump every 30 s.
    Loop,
    /// No agent: the baseline.
    Unprofiled,
}

pub fn run(seconds: u64, agent: &Path, scratch: &Path, mode: Mode) {
    let looping = mode == Mode::Loop;
    let classpath = churn_classpath(scratch);
    let dir = scratch.join("soak");
    let periods = scratch.join("soak-periods");
    for d in [&dir, &periods] {
        let _ = std::fs::remove_dir_all(d);
        std::fs::create_dir_all(d).unwrap();
    }
    let (extra, dump_every) = match mode {
        Mode::Loop => (format!("alloc,lock=1ms,loop=1m,maxfiles=10,file={}/p-%t.jfr", periods.display()), "30000"),
        Mode::Dumps => ("alloc,lock=1ms".to_owned(), "1000"),
        Mode::Unprofiled => ("unprofiled".to_owned(), "1000"),
    };
    let mut java = Command::new(tool("java"));
    if mode != Mode::Unprofiled {
        java.arg(format!("-agentpath:{}=", agent.display()));
    }
    let mut child = java
        .args(["-Xms256m", "-Xmx256m", "-XX:+AlwaysPreTouch", "-XX:NativeMemoryTracking=summary"])
        .args(["-cp", &classpath, "Churn"])
        .arg(&dir)
        .arg(seconds.to_string())
        .args([extra.as_str(), dump_every])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run java");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).expect("read the fixture's output");
        text
    });
    let started = Instant::now();
    let mut readings = Vec::new();
    let mut next_minute = Duration::ZERO;
    // Twice the asked time, and a minute for the JVM to start and end.
    let deadline = Duration::from_secs(seconds * 2 + 60);
    while child.try_wait().expect("wait for java").is_none() {
        if started.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("Churn did not end within {} s of a {seconds} s soak: killed", deadline.as_secs());
        }
        // The JVM's own figure first (jcmd waits for a JVM still starting),
        // then /proc's, as close together as they can be.
        let (jvm, heap) = if started.elapsed() >= next_minute {
            next_minute += SETTLED;
            (jvm_committed_kb(child.id()), if looping { agent_heap_kb(&periods) } else { None })
        } else {
            (None, None)
        };
        if let Some(mut reading) = read(child.id(), started.elapsed()) {
            reading.jvm_committed_kb = jvm;
            reading.agent_heap_kb = heap;
            reading.files = files_in(&periods);
            eprintln!(
                "{:>4} s: {:.1} MiB, {} fds, {} threads, JVM committed {:?} KiB, {} period files ({} bytes)",
                reading.at.as_secs(),
                reading.rss_kb as f64 / 1024.0,
                reading.fds,
                reading.threads,
                reading.jvm_committed_kb,
                reading.files.0,
                reading.files.1
            );
            readings.push(reading);
        }
        std::thread::sleep(EVERY);
    }
    let status = child.wait().expect("wait for java");
    let stdout = reader.join().unwrap();
    assert!(status.success(), "Churn exited with {status}: {stdout}");
    assert!(!stdout.contains("ERROR"), "Churn: {stdout}");
    report(seconds, &readings, &stdout, mode);
}

fn report(seconds: u64, readings: &[Reading], stdout: &str, mode: Mode) {
    let how = match mode {
        Mode::Loop => {
            "CPU and wall clock at 1 ms, allocation and lock profiling, loop=1m,maxfiles=10 and a dump every 30 s"
        }
        Mode::Dumps => "CPU and wall clock at 1 ms, allocation and lock profiling, a dump a second",
        Mode::Unprofiled => "no profiler (the baseline)",
    };
    println!("\nSoak: thread and class churn, {how}, {seconds} s\n");
    println!(
        "{:.0} dumps written and read back, {:.0} threads and {:.0} classes run; {:.0} CPU, {:.0} wall-clock, {:.0} allocation samples, {:.0} monitor and {:.0} park events read from the dumps\n",
        value(stdout, "VERIFIED "),
        value(stdout, "THREADS "),
        value(stdout, "CLASSES_LOADED "),
        value(stdout, "SAMPLES "),
        value(stdout, "WALL_SAMPLES "),
        value(stdout, "ALLOC_SAMPLES "),
        value(stdout, "MONITOR_WAITS "),
        value(stdout, "PARK_WAITS "),
    );
    println!(
        "| minute | resident memory | JVM committed (NMT) | resident less JVM committed | agent heap | open descriptors | threads | period files on disk |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mib = |kb: u64| kb as f64 / 1024.0;
    // The first reading of each minute (with the JVM's figure when jcmd gave one).
    let mut minute = None;
    for reading in readings {
        if minute == Some(reading.at.as_secs() / 60) {
            continue;
        }
        minute = Some(reading.at.as_secs() / 60);
        let (jvm, rest) = match reading.jvm_committed_kb {
            Some(jvm) => (format!("{:.1} MiB", mib(jvm)), format!("{:.1} MiB", mib(reading.rss_kb) - mib(jvm))),
            None => ("—".to_owned(), "—".to_owned()),
        };
        let heap = reading.agent_heap_kb.map_or("—".to_owned(), |kb| format!("{:.1} MiB", mib(kb)));
        println!(
            "| {} | {:.1} MiB | {jvm} | {rest} | {heap} | {} | {} | {} ({:.1} MiB) |",
            reading.at.as_secs() / 60,
            mib(reading.rss_kb),
            reading.fds,
            reading.threads,
            reading.files.0,
            reading.files.1 as f64 / (1 << 20) as f64
        );
    }
    let settled: Vec<&Reading> = readings.iter().filter(|r| r.at >= SETTLED).collect();
    let (Some(first), Some(last)) = (settled.first(), settled.last()) else {
        println!("\n(the run was shorter than a minute: nothing to compare)");
        return;
    };
    let range = |f: fn(&Reading) -> u64| {
        let values = settled.iter().map(|r| f(r));
        (values.clone().min().unwrap(), values.max().unwrap())
    };
    let (rss_min, rss_max) = range(|r| r.rss_kb);
    let (fds_min, fds_max) = range(|r| r.fds);
    let minutes = (last.at - first.at).as_secs_f64() / 60.0;
    println!(
        "\nAfter the first minute ({} readings over {minutes:.1} min): resident memory {:.1} to {:.1} MiB ({:+.2} MiB from the first to the last reading; least-squares trend {:+.3} MiB a minute), open descriptors {fds_min} to {fds_max} ({:+} from first to last)",
        settled.len(),
        rss_min as f64 / 1024.0,
        rss_max as f64 / 1024.0,
        (last.rss_kb as f64 - first.rss_kb as f64) / 1024.0,
        trend_per_minute(&settled, |r| r.rss_kb as f64 / 1024.0),
        last.fds as i64 - first.fds as i64
    );
    let minutes: Vec<&Reading> = settled.iter().copied().filter(|r| r.jvm_committed_kb.is_some()).collect();
    if minutes.len() >= 2 {
        println!(
            "Resident memory less the JVM's committed memory (the agent, the C library's heap, thread stacks), from minute to minute: least-squares trend {:+.3} MiB a minute; the JVM's committed memory: {:+.3} MiB a minute",
            trend_per_minute(&minutes, |r| (r.rss_kb as f64 - r.jvm_committed_kb.unwrap_or(0) as f64) / 1024.0),
            trend_per_minute(&minutes, |r| r.jvm_committed_kb.unwrap_or(0) as f64 / 1024.0)
        );
    }
    let heaps: Vec<&Reading> = settled.iter().copied().filter(|r| r.agent_heap_kb.is_some()).collect();
    if let (Some(first), Some(last)) = (heaps.first(), heaps.last()) {
        println!(
            "The agent's own heap (agent_heap_bytes): {:.1} MiB after the first minute, {:.1} MiB at the end; least-squares trend {:+.3} MiB a minute",
            first.agent_heap_kb.unwrap_or(0) as f64 / 1024.0,
            last.agent_heap_kb.unwrap_or(0) as f64 / 1024.0,
            trend_per_minute(&heaps, |r| r.agent_heap_kb.unwrap_or(0) as f64 / 1024.0)
        );
    }
}

/// The least-squares slope of `f` over the readings, per minute.
fn trend_per_minute(readings: &[&Reading], f: fn(&Reading) -> f64) -> f64 {
    let n = readings.len() as f64;
    let xs = readings.iter().map(|r| r.at.as_secs_f64() / 60.0);
    let mean_x = xs.clone().sum::<f64>() / n;
    let mean_y = readings.iter().map(|r| f(r)).sum::<f64>() / n;
    let covariance: f64 = readings.iter().map(|r| (r.at.as_secs_f64() / 60.0 - mean_x) * (f(r) - mean_y)).sum();
    let variance: f64 = xs.map(|x| (x - mean_x).powi(2)).sum();
    if variance > 0.0 {
        covariance / variance
    } else {
        0.0
    }
}
