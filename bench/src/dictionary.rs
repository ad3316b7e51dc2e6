//! Dictionary latencies: the read-only `bounded_lookup` (the upstream
//! contract's signal-safe probe; no handler of the agent reads a
//! dictionary) and insert (a JNI thread's lookup of a new key), alone and
//! while other threads hammer the same dictionary, and rotation time while
//! they do.

use sampler::dictionary::{Carry, TripleBufferedDictionary};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

const CAPACITY: usize = 1 << 16;
const RESIDENT: usize = 10_000;
const OPS: usize = 200_000;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

/// Mean ns per call of `op` over `count` calls (indexes passed through).
fn ns_per_op(count: usize, mut op: impl FnMut(usize)) -> f64 {
    let start = Instant::now();
    for i in 0..count {
        op(i);
    }
    start.elapsed().as_nanos() as f64 / count as f64
}

fn dictionary(carry: Carry) -> Arc<TripleBufferedDictionary> {
    let d = TripleBufferedDictionary::new(CAPACITY, carry).expect("reserve the dictionary");
    for i in 0..RESIDENT {
        d.lookup(&format!("com/example/Resident{i}"), 0);
    }
    Arc::new(d)
}

/// Runs `threads` background threads doing lookups (hits and inserts of
/// fresh keys, as JNI threads do) until the returned guard is dropped.
struct Contention {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Contention {
    fn start(d: &Arc<TripleBufferedDictionary>, threads: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..threads)
            .map(|t| {
                let (d, stop) = (Arc::clone(d), Arc::clone(&stop));
                std::thread::spawn(move || {
                    let mut i = 0usize;
                    while !stop.load(Ordering::Relaxed) {
                        d.lookup(&format!("com/example/Resident{}", i % RESIDENT), t + 1);
                        d.lookup(&format!("contender{t}/{}", i % 4096), t + 1);
                        i += 1;
                    }
                })
            })
            .collect();
        Self { stop, threads }
    }
}

impl Drop for Contention {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.threads.drain(..).for_each(|t| t.join().unwrap());
    }
}

fn lookups(threads: usize) -> (f64, f64) {
    let d = dictionary(Carry::Everything);
    let hits: Vec<String> = (0..RESIDENT).map(|i| format!("com/example/Resident{i}")).collect();
    let fresh: Vec<String> = (0..OPS.min(CAPACITY - RESIDENT - 5000)).map(|i| format!("fresh/Key{i}")).collect();
    let _contention = Contention::start(&d, threads);
    let probe = ns_per_op(OPS, |i| {
        std::hint::black_box(d.bounded_lookup(&hits[i % RESIDENT], 0, 0));
    });
    let insert = ns_per_op(fresh.len(), |i| {
        std::hint::black_box(d.lookup(&fresh[i], 0));
    });
    (probe, insert)
}

fn rotations(carry: Carry, threads: usize) -> (f64, f64) {
    let d = dictionary(carry);
    let _contention = Contention::start(&d, threads);
    let mut times: Vec<f64> = (0..200)
        .map(|_| {
            let start = Instant::now();
            d.rotate();
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    (percentile(&times, 0.5), percentile(&times, 0.99))
}

pub fn run(options: &crate::Options) {
    let contenders = options.threads;
    println!(
        "\n## Dictionary ({RESIDENT} resident keys; contention = {contenders} threads looking up and inserting)\n"
    );
    println!("| operation | alone | under contention |");
    println!("|---|---|---|");
    let (probe, insert) = lookups(0);
    let (probe_c, insert_c) = lookups(contenders);
    println!("| bounded_lookup, read-only hit | {probe:.0} ns | {probe_c:.0} ns |");
    println!("| lookup, insert of a new key | {insert:.0} ns | {insert_c:.0} ns |");
    for (name, carry) in [("persistent", Carry::Everything), ("carry-nothing (endpoints, context)", Carry::Nothing)] {
        let (p50, p99) = rotations(carry, 0);
        let (p50_c, p99_c) = rotations(carry, contenders);
        println!("| rotate, {name} | {p50:.1} µs (p99 {p99:.1}) | {p50_c:.1} µs (p99 {p99_c:.1}) |");
    }
}
