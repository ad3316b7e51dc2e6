//! Time per stack walk: the HotSpot walker (`cstack=vm`) against
//! AsyncGetCallTrace on the same samples. With `verifywalk` the agent walks
//! every sample with both and adds up each one's time, so both see the
//! same stacks at the same moments.

use crate::overhead::DEEP_DEPTH;
use crate::support::{counter, javac, median, root, tool};
use crate::Options;
use std::path::Path;
use std::process::Command;

struct Walks {
    vm_ns: f64,
    asgct_ns: f64,
    agreement: f64,
}

fn run_once(agent: &Path, classes: &Path, scratch: &Path, depth: usize, options: &Options) -> Walks {
    let file = scratch.join("walks.jfr");
    let _ = std::fs::remove_file(&file);
    let output = Command::new(tool("java"))
        .arg(format!("-agentpath:{}=start,cpu=1ms,cstack=vm,verifywalk,file={}", agent.display(), file.display()))
        .arg("-cp")
        .arg(classes)
        .arg("Workload")
        .arg(options.threads.to_string())
        .arg(options.seconds.to_string())
        .arg("0")
        .arg(depth.to_string())
        .output()
        .expect("run java");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let samples = counter(&file, "walk_verify_samples").max(1.0);
    Walks {
        vm_ns: counter(&file, "walk_verify_vm_ns_total") / samples,
        asgct_ns: counter(&file, "walk_verify_asgct_ns_total") / samples,
        agreement: counter(&file, "walk_verify_agreed") / counter(&file, "walk_verify_compared").max(1.0),
    }
}

pub fn run(scratch: &Path, options: &Options, agent: &Path) {
    let classes = scratch.join("classes");
    javac(&classes, &[root().join("bench/java/Workload.java")]);
    println!(
        "\nTime per walk on the same samples (`verifywalk`, {} s per run, {} rounds, medians)\n",
        options.seconds, options.rounds
    );
    println!("| stacks | HotSpot walker | AsyncGetCallTrace | AsyncGetCallTrace / walker | stacks that agree |");
    println!("|---|---|---|---|---|");
    for (name, depth) in [("Workload (about 10 frames)", 0), ("Workload, 400 frames deep", DEEP_DEPTH)] {
        let runs: Vec<Walks> =
            (0..options.rounds).map(|_| run_once(agent, &classes, scratch, depth, options)).collect();
        let vm = median(runs.iter().map(|w| w.vm_ns).collect());
        let asgct = median(runs.iter().map(|w| w.asgct_ns).collect());
        let agreement = median(runs.iter().map(|w| w.agreement).collect());
        println!(
            "| {name} | {:.2} µs | {:.2} µs | {:.2} | {:.2}% |",
            vm / 1000.0,
            asgct / 1000.0,
            asgct / vm.max(1.0),
            agreement * 100.0
        );
    }
}
