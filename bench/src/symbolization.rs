//! Symbolizer throughput: 100k distinct addresses spread over the text of
//! a binary with DWARF line tables (the agent library itself), resolved
//! with inline chains by our resolver (cold, then again from its cache)
//! and by `addr2line -f -i` from binutils.

use object::{Object, ObjectSection};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;
use symbolizer::debuginfo::{file_build_id, Locator};
use symbolizer::resolve::{Resolution, Resolver};

const ADDRESSES: u64 = 100_000;

fn text_range(binary: &Path) -> std::ops::Range<u64> {
    let data = std::fs::read(binary).expect("read the binary");
    let file = object::File::parse(&*data).expect("parse the binary");
    let text = file.section_by_name(".text").expect(".text");
    text.address()..text.address() + text.size()
}

pub fn run(binary: &Path) {
    let text = text_range(binary);
    let step = ((text.end - text.start) / ADDRESSES).max(1);
    let addresses: Vec<u64> = (0..ADDRESSES).map(|i| text.start + i * step).filter(|&a| a < text.end).collect();
    let build_id = file_build_id(binary).expect("the binary has a build-id");

    let new_resolver = || Resolver::new(Locator::new(&[], &[binary.to_path_buf()], None).0);
    let started = Instant::now();
    let mut resolver = new_resolver();
    let resolved =
        addresses.iter().filter(|&&a| matches!(resolver.resolve(&build_id, a), Resolution::Frames(_))).count();
    let cold_one = started.elapsed();
    // As `symbolize` resolves a recording's addresses: all at once, on all cores.
    let started = Instant::now();
    let mut resolver = new_resolver();
    resolver.resolve_all(&build_id, addresses.clone());
    let cold = started.elapsed();
    let started = Instant::now();
    for &a in &addresses {
        resolver.resolve(&build_id, a);
    }
    let cached = started.elapsed();

    let started = Instant::now();
    let mut child = Command::new("addr2line")
        .args(["-f", "-i", "-e"])
        .arg(binary)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("run addr2line");
    let mut input = String::with_capacity(addresses.len() * 12);
    for a in &addresses {
        input.push_str(&format!("{a:#x}\n"));
    }
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait().unwrap();
    let binutils = started.elapsed();

    let rate = |d: std::time::Duration| addresses.len() as f64 / d.as_secs_f64();
    println!(
        "\nSymbolizing {} distinct addresses of {} ({resolved} with line information):\n",
        addresses.len(),
        binary.display()
    );
    println!("| resolver | time | addresses / s |");
    println!("|---|---|---|");
    println!(
        "| symbolize, cold, one thread (loads the DWARF) | {:.2} s | {:.0} |",
        cold_one.as_secs_f64(),
        rate(cold_one)
    );
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "| symbolize, cold, {threads} threads (as `symbolize` runs) | {:.2} s | {:.0} |",
        cold.as_secs_f64(),
        rate(cold)
    );
    println!("| symbolize, cached | {:.3} s | {:.0} |", cached.as_secs_f64(), rate(cached));
    println!("| addr2line -f -i (binutils) | {:.2} s | {:.0} |", binutils.as_secs_f64(), rate(binutils));
}

/// One conversion's wall time (s) and peak resident memory (MB), measured
/// by GNU time around the whole process (a JVM's start-up included).
fn timed(command: &mut Command) -> (f64, f64) {
    let output = Command::new("/usr/bin/time")
        .args(["-f", "%e %M"])
        .arg(command.get_program())
        .args(command.get_args())
        .stdout(Stdio::null())
        .output()
        .expect("run /usr/bin/time (GNU time)");
    assert!(output.status.success(), "{:?}: {}", command, String::from_utf8_lossy(&output.stderr));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    let mut fields = last.split_whitespace().map(|v| v.parse::<f64>().unwrap_or(f64::NAN));
    (fields.next().unwrap_or(f64::NAN), fields.next().unwrap_or(f64::NAN) / 1024.0)
}

/// Real recordings, converted to collapsed stacks by `symbolize` and by
/// async-profiler's `jfr-converter.jar`, alternating round by round: a
/// recording of ours and one of async-profiler's of the `DeepTree`
/// workload (four threads 400 frames deep over 4,096 paths, 30 s at 1 ms:
/// about 10 MB each).
pub fn run_recordings(options: &crate::Options, agent: &Path, scratch: &Path) {
    use crate::support::{async_profiler, javac, median, root, tool};
    let classes = scratch.join("deeptree");
    javac(&classes, &[root().join("bench/java/DeepTree.java")]);
    let converter = root().join("../shared/tools/async-profiler/jar/jfr-converter.jar");
    let symbolize = root().join("target/release/symbolize");
    let record = |name: &str, agent_arg: String| {
        let file = scratch.join(name);
        let status = Command::new(tool("java"))
            .arg(agent_arg.replace("FILE", &file.display().to_string()))
            .arg("-cp")
            .arg(&classes)
            .args(["DeepTree", "4", "30"])
            .stdout(Stdio::null())
            .status()
            .expect("run java");
        assert!(status.success(), "recording {name}");
        file
    };
    let files = [
        record("deeptree-ours.jfr", format!("-agentpath:{}=start,cpu=1ms,overhead=0,file=FILE", agent.display())),
        record(
            "deeptree-async-profiler.jfr",
            format!("-agentpath:{}=start,event=cpu,interval=1ms,file=FILE", async_profiler().display()),
        ),
    ];
    println!("\nReal recordings to collapsed stacks ({} rounds, alternating; medians, min–max):\n", options.rounds);
    println!("| recording | size | symbolize time | symbolize peak RSS | converter time | converter peak RSS |");
    println!("|---|---|---|---|---|---|");
    let out = scratch.join("deeptree.collapsed");
    for file in &files {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..options.rounds {
            ours.push(timed(Command::new(&symbolize).arg("collapsed").arg(file).arg("-o").arg(&out)));
            theirs.push(timed(
                Command::new(tool("java")).arg("-jar").arg(&converter).args(["-o", "collapsed"]).arg(file).arg(&out),
            ));
        }
        let cell = |runs: &[(f64, f64)], pick: fn(&(f64, f64)) -> f64, unit: &str| {
            let values: Vec<f64> = runs.iter().map(pick).collect();
            let (min, max) = values.iter().fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
            format!("{:.2} {unit} ({min:.2}–{max:.2})", median(values.clone()))
        };
        let size = std::fs::metadata(file).map_or(0.0, |m| m.len() as f64 / 1e6);
        println!(
            "| {} | {size:.1} MB | {} | {} | {} | {} |",
            file.file_name().unwrap().to_string_lossy(),
            cell(&ours, |r| r.0, "s"),
            cell(&ours, |r| r.1, "MB"),
            cell(&theirs, |r| r.0, "s"),
            cell(&theirs, |r| r.1, "MB"),
        );
    }
}
