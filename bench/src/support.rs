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

/// A jar of a Debian Java package (`/usr/share/java/JAR`), the package
/// installed first if it is not.
pub fn debian_jar(package: &str, jar: &str) -> PathBuf {
    let path = Path::new("/usr/share/java").join(jar);
    if !path.exists() {
        eprintln!("installing {package} (for {})", path.display());
        let status = Command::new("apt-get").args(["install", "-y", package]).status().expect("run apt-get");
        assert!(status.success() && path.exists(), "`apt-get install -y {package}` did not give {}", path.display());
    }
    path
}

pub fn value(stdout: &str, key: &str) -> f64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(key).map(str::trim))
        .unwrap_or_else(|| panic!("no {key} in workload output: {stdout}"))
        .parse()
        .unwrap()
}

/// What a recording holds of the `events` types (an agent's in either
/// dialect), from `jfr print`.
pub struct SampleCounts {
    pub events: f64,
    /// Of them, those that sampled the workload's worker threads.
    pub workers: f64,
    /// The samples the events stand for: their `samples` fields summed
    /// where they have one (wall-clock events of a folded idle thread, ours
    /// and async-profiler's; `weight` in the Datadog dialect's
    /// `datadog.MethodSample`), else one each.
    pub samples: f64,
}

/// `jfr print --events EVENTS FILE`'s text.
fn jfr_print(file: &Path, events: &str) -> String {
    let out = Command::new(tool("jfr")).args(["print", "--events", events]).arg(file).output().expect("run jfr print");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The values of the line after each `name = "NAME"` line of `jfr print`
/// text whose key is `key` (`count`, `value`), in order.
fn named_values<'a>(text: &'a str, name: &str, key: &str) -> Vec<&'a str> {
    let (name_line, prefix) = (format!("name = \"{name}\""), format!("{key} = "));
    let mut lines = text.lines().map(str::trim);
    let mut values = Vec::new();
    while let Some(line) = lines.next() {
        if line == name_line {
            values.extend(lines.next().and_then(|l| l.strip_prefix(&prefix)).map(|v| v.trim_matches('"')));
        }
    }
    values
}

pub fn sample_counts(file: &Path, events: &[&str]) -> SampleCounts {
    let text = jfr_print(file, &events.join(","));
    let mut counts = SampleCounts { events: 0.0, workers: 0.0, samples: 0.0 };
    // The field that says how many samples the current event stands for.
    let mut count_field = "samples = ";
    for line in text.lines() {
        if let Some(event) = events.iter().find(|e| line.starts_with(&format!("{e} {{"))) {
            counts.events += 1.0;
            counts.samples += 1.0;
            count_field = if *event == "datadog.MethodSample" { "weight = " } else { "samples = " };
        } else if line.contains("Thread = \"worker-") {
            counts.workers += 1.0;
        } else if let Some(n) = line.trim().strip_prefix(count_field).and_then(|n| n.parse::<f64>().ok()) {
            // The current event stands for `n` samples, not one.
            counts.samples += n - 1.0;
        }
    }
    counts
}

/// A counter of ours (either dialect); 0 if the recording has none.
pub fn counter(file: &Path, name: &str) -> f64 {
    let text = jfr_print(file, "jvmprofiler.Counter,datadog.ProfilerCounter");
    named_values(&text, name, "count").first().map_or(0.0, |count| count.parse().unwrap())
}

/// A counter of ours as the recording's last chunk gives it (the value
/// at the recording's end, for a counter that is a level, not a sum).
pub fn counter_at_end(file: &Path, name: &str) -> Option<f64> {
    let text = jfr_print(file, "jvmprofiler.Counter,datadog.ProfilerCounter");
    named_values(&text, name, "count").last().and_then(|count| count.parse().ok())
}

/// The last value a recording gives the setting `name` (a setting
/// updated mid-recording, such as a stretched interval, is written again).
pub fn setting(file: &Path, name: &str) -> Option<String> {
    named_values(&jfr_print(file, "jdk.ActiveSetting"), name, "value").last().map(|v| (*v).to_owned())
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
