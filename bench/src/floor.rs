//! The cost of signal delivery itself, without any profiler.

use crate::support::{median, root, value};
use crate::Options;
use std::path::Path;
use std::process::Command;

/// The signal-delivery floor: loop throughput of a C program taking
/// SIGPROF from a perf cpu-clock counter with an empty handler, relative
/// to the same loop without signals. What any signal-based sampler pays
/// on this machine before doing any work.
pub fn run(scratch: &Path, options: &Options) {
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
