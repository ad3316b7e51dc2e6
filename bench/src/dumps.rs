//! Dump latency under thread and class churn: the churn fixture of the
//! integration tests (`integration-tests/java/fixtures/Churn.java`: 16
//! short-lived threads started and joined continuously, a class loaded
//! into a throwaway loader and dropped over and over, CPU and wall clock
//! at 1 ms, a dump through the Java API after every 100 ms sleep, each
//! dump parsed by a verifier thread) for 20 s: the dumps written and the
//! dump times' p50, p99 and maximum (medians over rounds), for this build
//! and the `--baseline` build in the same rounds.

use crate::support::{javac_with, median, root, tool, value};
use crate::Options;
use std::path::Path;
use std::process::Command;

#[derive(Clone, Copy, Default)]
struct Run {
    dumps: f64,
    classes: f64,
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
}

/// The churn run of the issue that set the target: 20 s, whatever
/// `--seconds` says.
const SECONDS: u64 = 20;

fn run_once(agent: &Path, classpath: &str, scratch: &Path) -> Run {
    let dir = scratch.join("dumps");
    std::fs::create_dir_all(&dir).unwrap();
    let output = Command::new(tool("java"))
        .arg(format!("-agentpath:{}=", agent.display()))
        .args(["-Xmx256m", "-cp", classpath, "Churn"])
        .arg(&dir)
        .arg(SECONDS.to_string())
        .output()
        .expect("run java");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "Churn: {}", String::from_utf8_lossy(&output.stderr));
    assert!(!stdout.contains("ERROR"), "Churn: {stdout}");
    Run {
        dumps: value(&stdout, "DUMPS "),
        classes: value(&stdout, "CLASSES_LOADED "),
        p50_us: value(&stdout, "DUMP_P50_US "),
        p99_us: value(&stdout, "DUMP_P99_US "),
        max_us: value(&stdout, "DUMP_MAX_US "),
    }
}

/// Compiles the churn fixture; returns its class path (with the Java API).
pub fn churn_classpath(scratch: &Path) -> String {
    let jar = root().join("target/release/profiler.jar");
    assert!(jar.exists(), "{} missing: run `cargo build --release` first", jar.display());
    let classes = scratch.join("churn-classes");
    let fixtures = root().join("integration-tests/java/fixtures");
    let sources = ["Churn.java", "ChurnPayload.java", "FixtureSupport.java"].map(|name| fixtures.join(name));
    javac_with(&classes, &sources, Some(&jar));
    format!("{}:{}", classes.display(), jar.display())
}

pub fn run(options: &Options, agent: &Path, scratch: &Path) {
    let classpath = churn_classpath(scratch);
    let mut agents = vec![("this build", agent)];
    if let Some(baseline) = options.baseline.as_deref() {
        agents.push(("baseline", baseline));
    }
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); agents.len()];
    for round in 0..options.rounds {
        for (i, (name, agent)) in agents.iter().enumerate() {
            let run = run_once(agent, &classpath, scratch);
            eprintln!("round {} {name:>10}: {:.0} dumps, p50 {:.1} ms", round + 1, run.dumps, run.p50_us / 1000.0);
            runs[i].push(run);
        }
    }
    println!(
        "\nDumps under thread and class churn (CPU and wall clock at 1 ms, a dump after every 100 ms sleep, each parsed by a verifier thread), {SECONDS} s per run, {} rounds (medians)\n",
        options.rounds
    );
    println!("| agent | dumps | classes loaded | dump p50 | dump p99 | dump max |");
    println!("|---|---|---|---|---|---|");
    for ((name, _), runs) in agents.iter().zip(&runs) {
        let m = |f: fn(&Run) -> f64| median(runs.iter().map(f).collect());
        println!(
            "| {name} | {:.0} | {:.0} | {:.1} ms | {:.1} ms | {:.1} ms |",
            m(|r| r.dumps),
            m(|r| r.classes),
            m(|r| r.p50_us) / 1000.0,
            m(|r| r.p99_us) / 1000.0,
            m(|r| r.max_us) / 1000.0
        );
    }
}
