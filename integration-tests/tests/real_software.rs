//! Real software nobody here wrote, from Debian's packages, profiled with
//! default options and checked against the truth the workload measures
//! itself: Apache Lucene 8 (`liblucene8-java`) indexing and searching.
//! `.ci/run` installs the packages; without them the tests are skipped
//! (failing under CI).

use integration_tests::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Debian's Lucene jars the workload needs.
const LUCENE_JARS: [&str; 2] =
    ["/usr/share/java/lucene-core-8.7.0.jar", "/usr/share/java/lucene-analyzers-common-8.7.0.jar"];

/// Compiles the workload `source` (under `java/realsoft/`) against `jars`
/// into a scratch directory; returns the class path to run it with, or
/// `None` (the test skipped) when a jar is missing.
fn compile(test: &str, source: &str, jars: &[&str]) -> Option<String> {
    if let Some(missing) = jars.iter().find(|jar| !Path::new(jar).exists()) {
        skip(&format!("{missing} is not installed (Debian: liblucene8-java)"), InCi::Required);
        return None;
    }
    let dir = scratch_dir(test);
    let source: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("java/realsoft").join(source);
    let class_path = jars.join(":");
    let output = Command::new(build_jdk_tool("javac"))
        .args(["--release", "11", "-cp", &class_path, "-d"])
        .arg(&dir)
        .arg(&source)
        .output()
        .expect("run javac");
    assert_success(&output);
    Some(format!("{class_path}:{}", dir.display()))
}

/// The weights `symbolize collapsed` gives stacks containing each of
/// `methods`, in order.
fn weights(file: &Path, methods: &[&str]) -> Vec<u64> {
    let output = Command::new(symbolize_binary())
        .args(["collapsed", file.to_str().unwrap(), "--no-debuginfod"])
        .output()
        .expect("run symbolize");
    assert_success(&output);
    let mut weights = vec![0; methods.len()];
    for line in stdout(&output).lines() {
        let Some((stack, weight)) = line.rsplit_once(' ') else { continue };
        let weight: u64 = weight.parse().unwrap_or_else(|_| panic!("bad line {line}"));
        if let Some(i) = methods.iter().position(|m| stack.split(';').any(|f| f == *m)) {
            weights[i] += weight;
        }
    }
    weights
}

/// Lucene indexing, then searching, on the main thread, profiled at 1 ms
/// with default options: each phase's share of the samples is within 3
/// points of the share of CPU time the thread measured in it. (An
/// overhead governor that stretched the interval in the first phase
/// weighed it 2-4 times too much.)
#[test]
fn lucene_phases_weigh_the_cpu_time_they_took() {
    let Some(class_path) = compile("real_lucene", "LuceneWork.java", &LUCENE_JARS) else { return };
    let file = scratch_dir("real_lucene_run").join("lucene.jfr");
    let options = format!("-agentpath:{}=start,cpu=1ms,file={}", agent_library().display(), file.display());
    let run = ChildGuard::spawn(
        Command::new(jdk_tool("java"))
            .arg(options)
            .args(["-cp", &class_path, "LuceneWork", "1500"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
    );
    let output = run.wait(Duration::from_secs(120));
    assert_success(&output);
    let measured = |phase: &str| -> f64 {
        let key = format!("cpu {phase}");
        summary_value(&stdout(&output), &key) as f64
    };
    let truth = measured("index") / (measured("index") + measured("search"));
    let [index, search] = weights(&file, &["LuceneWork.index", "LuceneWork.search"])[..] else { unreachable!() };
    let share = index as f64 / (index + search) as f64;
    println!(
        "indexing: {:.1}% of samples ({index} of {}), {:.1}% of the CPU time measured",
        share * 100.0,
        index + search,
        truth * 100.0
    );
    assert!(index + search >= 1500, "only {} samples in the two phases", index + search);
    assert!(
        (share - truth).abs() <= 0.03,
        "indexing {:.1}% of samples, {:.1}% of CPU time",
        share * 100.0,
        truth * 100.0
    );
}
