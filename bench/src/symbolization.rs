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
