//! Shared helpers: locating tools, compiling Java, reading recordings.

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

pub fn tool(name: &str) -> PathBuf {
    std::env::var_os("JAVA_HOME").map_or_else(|| PathBuf::from(name), |h| PathBuf::from(h).join("bin").join(name))
}

pub fn agent() -> PathBuf {
    let agent = root().join("target/release/libprofiler.so");
    assert!(agent.exists(), "{} missing: run `cargo build --release` first", agent.display());
    agent
}

/// async-profiler's agent, the peer the side-by-side tables run.
pub fn async_profiler() -> PathBuf {
    let library = root().join("../shared/tools/async-profiler/lib/libasyncProfiler.so");
    assert!(library.exists(), "{} missing: async-profiler is the benchmarks' peer", library.display());
    library
}

/// Compiles Java sources into `out`.
pub fn javac(out: &Path, sources: &[PathBuf]) {
    javac_with(out, sources, None);
}

/// Compiles Java sources into `out` against `classpath`, if given.
pub fn javac_with(out: &Path, sources: &[PathBuf], classpath: Option<&Path>) {
    std::fs::create_dir_all(out).unwrap();
    let mut command = Command::new(tool("javac"));
    if let Some(classpath) = classpath {
        command.arg("-cp").arg(classpath);
    }
    let status = command.arg("-d").arg(out).args(sources).status().expect("run javac");
    assert!(status.success(), "javac failed");
}

pub fn value(stdout: &str, key: &str) -> f64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(key).map(str::trim))
        .unwrap_or_else(|| panic!("no {key} in workload output: {stdout}"))
        .parse()
        .unwrap()
}

/// Number of events of the `events` types recorded (an agent's in either
/// dialect), and how many of them sampled the workload's worker threads,
/// from `jfr print`.
pub fn sample_counts(file: &Path, events: &[&str]) -> (f64, f64) {
    let out = Command::new(tool("jfr"))
        .args(["print", "--events", &events.join(",")])
        .arg(file)
        .output()
        .expect("run jfr print");
    let text = String::from_utf8_lossy(&out.stdout);
    let all = text.lines().filter(|l| events.iter().any(|e| l.starts_with(&format!("{e} {{")))).count();
    let workers = text.lines().filter(|l| l.contains("Thread = \"worker-")).count();
    (all as f64, workers as f64)
}

pub fn counter(file: &Path, name: &str) -> f64 {
    let out = Command::new(tool("jfr"))
        .args(["print", "--events", "jvmprofiler.Counter,datadog.ProfilerCounter"])
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

pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}
