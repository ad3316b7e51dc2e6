//! Mutation testing of parsers of untrusted bytes, as plain tests.
//!
//! A [`Campaign`] takes real files as seeds and, for a time budget, hands
//! its check mutated copies: bit flips, byte overwrites, truncations,
//! length fields inflated to huge values, inserted and removed runs. Case
//! `i` is a pure function of the base seed and `i`, so a failure names
//! the case and `MUTATION_CASE=i` replays exactly it. Every case runs
//! under a watchdog (a hang fails the test, naming the case) and an
//! allocation meter: the test binary installs [`Metered`] as its global
//! allocator and the campaign fails a case that allocates more than its
//! bound.
//!
//! Environment: `MUTATION_SECONDS` (overrides every campaign's budget,
//! e.g. for a long local run), `MUTATION_SEED` (another base seed),
//! `MUTATION_CASE` (run only that case).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// SplitMix64's finaliser: spreads a counter into a seed.
pub fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// xorshift64*: deterministic, dependency-free randomness.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(splitmix(seed) | 1)
    }

    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Values a length or count field becomes when inflated: as JFR varints
/// (`i32::MAX`, `u64::MAX`) and as big-endian 32- and 64-bit integers
/// (`i32::MAX`, `u32::MAX`, `i64::MAX`, `i64::MIN`), little-endian ones
/// (`u32::MAX`, `2^31`), and one just past what a small file holds.
const INFLATED: [&[u8]; 9] = [
    &[0xff, 0xff, 0xff, 0xff, 0x07],
    &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
    &[0x7f, 0xff, 0xff, 0xff],
    &[0xff, 0xff, 0xff, 0xff],
    &[0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
    &[0x80, 0, 0, 0, 0, 0, 0, 0],
    &[0, 0, 0, 0x80],
    &[0xff, 0xff, 0xff, 0x7f],
    &[0x80, 0x80, 0x04],
];

/// One change to a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mutation {
    Flip {
        offset: usize,
        bit: u8,
    },
    Byte {
        offset: usize,
        value: u8,
    },
    Truncate {
        len: usize,
    },
    /// Overwrites the bytes at `offset` with a huge length.
    Inflate {
        offset: usize,
        bytes: Vec<u8>,
    },
    Insert {
        offset: usize,
        bytes: Vec<u8>,
    },
    Remove {
        offset: usize,
        len: usize,
    },
}

impl Mutation {
    /// A random mutation of a file of `len` bytes.
    pub fn random(rng: &mut Rng, len: usize) -> Mutation {
        let offset = rng.below(len.max(1));
        match rng.below(16) {
            0..=5 => Mutation::Flip { offset, bit: rng.below(8) as u8 },
            6 | 7 => Mutation::Byte { offset, value: [0, 0xff, 0x7f, 0x80, rng.next() as u8][rng.below(5)] },
            8 | 9 => Mutation::Truncate { len: rng.below(len.max(1)) },
            10..=12 => Mutation::Inflate { offset, bytes: INFLATED[rng.below(INFLATED.len())].to_vec() },
            13 | 14 => {
                let n = 1 + rng.below(16);
                Mutation::Insert { offset, bytes: rng.bytes(n) }
            }
            _ => Mutation::Remove { offset, len: 1 + rng.below(16) },
        }
    }

    pub fn apply(&self, data: &mut Vec<u8>) {
        match self {
            Mutation::Flip { offset, bit } => {
                if let Some(b) = data.get_mut(*offset) {
                    *b ^= 1 << bit;
                }
            }
            Mutation::Byte { offset, value } => {
                if let Some(b) = data.get_mut(*offset) {
                    *b = *value;
                }
            }
            Mutation::Truncate { len } => data.truncate(*len),
            Mutation::Inflate { offset, bytes } => {
                for (i, &b) in bytes.iter().enumerate() {
                    if let Some(d) = data.get_mut(offset + i) {
                        *d = b;
                    }
                }
            }
            Mutation::Insert { offset, bytes } => {
                let at = (*offset).min(data.len());
                data.splice(at..at, bytes.iter().copied());
            }
            Mutation::Remove { offset, len } => {
                let start = (*offset).min(data.len());
                let end = start.saturating_add(*len).min(data.len());
                data.drain(start..end);
            }
        }
    }

    /// The first byte it changes (for a removal or insertion, every byte
    /// from there on moves).
    pub fn first_offset(&self) -> usize {
        match self {
            Mutation::Flip { offset, .. }
            | Mutation::Byte { offset, .. }
            | Mutation::Inflate { offset, .. }
            | Mutation::Insert { offset, .. }
            | Mutation::Remove { offset, .. } => *offset,
            Mutation::Truncate { len } => *len,
        }
    }
}

impl fmt::Display for Mutation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mutation::Flip { offset, bit } => write!(f, "flip bit {bit} of byte {offset}"),
            Mutation::Byte { offset, value } => write!(f, "byte {offset} := {value:#04x}"),
            Mutation::Truncate { len } => write!(f, "truncate to {len} bytes"),
            Mutation::Inflate { offset, bytes } => write!(f, "inflate at {offset}: {bytes:02x?}"),
            Mutation::Insert { offset, bytes } => write!(f, "insert {} bytes at {offset}", bytes.len()),
            Mutation::Remove { offset, len } => write!(f, "remove {len} bytes at {offset}"),
        }
    }
}

// ------------------------------------------------------------------ ELF seeds

/// Compiles C `source` into a shared library with `cc -shared -fPIC` and
/// `flags`; its bytes, or `None` when the compiler fails (or is missing).
pub fn compile_library(name: &str, source: &str, flags: &[&str]) -> Option<Vec<u8>> {
    // One directory per call: tests of one binary run in parallel and
    // compile the same library name at the same time.
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("mutation-{name}-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let (c, library) = (dir.join("lib.c"), dir.join("lib.so"));
    std::fs::write(&c, source).ok()?;
    let status = std::process::Command::new("cc")
        .args(flags)
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&c)
        .status()
        .ok()?;
    let bytes = status.success().then(|| std::fs::read(&library).ok()).flatten();
    let _ = std::fs::remove_dir_all(&dir);
    bytes
}

const C_SOURCE: &str = r#"
#include <string.h>
static int leaf(int n) { int s = 0; for (int i = 0; i < n; i++) s += i * i; return s; }
__attribute__((noinline)) int middle(int n) { volatile char pad[64]; pad[0] = n; return leaf(n + pad[0]) + 1; }
int outer(int n, char *out) { int x = middle(n); memcpy(out, &x, sizeof x); return x * middle(x); }
"#;

/// Real ELF files to mutate: a library compiled here (DWARF, `.eh_frame`
/// and its header, SFrame when the assembler can, a build-id, `.symtab`
/// and `.dynsym`) and the small shared libraries this process has mapped.
pub fn elf_seeds() -> Vec<(String, Vec<u8>)> {
    let common = ["-O1", "-g", "-Wl,--build-id"];
    let with_sframe = [&common[..], &["-Wa,--gsframe"]].concat();
    let compiled = compile_library("elf-seed", C_SOURCE, &with_sframe)
        .or_else(|| compile_library("elf-seed", C_SOURCE, &common))
        .expect("cc builds a shared library");
    let mut seeds = vec![("compiled lib.so".to_owned(), compiled)];
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut mapped: Vec<&str> =
        maps.lines().filter_map(|l| l.split_whitespace().nth(5)).filter(|p| p.contains(".so")).collect();
    mapped.sort();
    mapped.dedup();
    for path in mapped {
        match std::fs::read(path) {
            Ok(bytes) if bytes.len() <= 512 * 1024 => seeds.push((path.to_owned(), bytes)),
            _ => {}
        }
    }
    seeds
}

// ------------------------------------------------------------ allocation meter

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn account(delta: isize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get().wrapping_add(delta);
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

/// The system allocator, counting each thread's live bytes and their
/// peak. Install it in a test binary with
/// `#[global_allocator] static ALLOC: mutation::Metered = mutation::Metered;`.
pub struct Metered;

// SAFETY: every call is forwarded unchanged to `System`, which upholds
// the `GlobalAlloc` contract; the accounting touches only const-initialised
// thread-local cells (no allocation, no destructor).
unsafe impl GlobalAlloc for Metered {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout contract is passed on as is.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            account(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            account(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        account(-(layout.size() as isize));
        // SAFETY: `ptr` came from `System` with this layout (see `alloc`).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as in `dealloc`; `new_size` is the caller's, unchanged.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            account(new_size as isize - layout.size() as isize);
        }
        p
    }
}

/// Runs `f`, returning its result and the most bytes it had allocated
/// (live, on this thread) at any moment.
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let start = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(start));
    let result = f();
    let peak = PEAK.with(Cell::get);
    (result, peak.saturating_sub(start).max(0) as usize)
}

/// Whether [`Metered`] is this binary's allocator.
pub fn metering() -> bool {
    let (vec, peak) = measure(|| std::hint::black_box(Vec::<u8>::with_capacity(std::hint::black_box(64))));
    drop(vec);
    peak >= 64
}

// -------------------------------------------------------------------- campaign

/// One mutated input.
pub struct Case<'a> {
    pub index: u64,
    /// The seed file's name and bytes.
    pub seed: &'a str,
    pub original: &'a [u8],
    /// Empty for the first case of each seed: the file as it is.
    pub mutations: &'a [Mutation],
    pub data: &'a [u8],
}

impl Case<'_> {
    /// The first byte the mutations changed (the file's length if none).
    pub fn first_change(&self) -> usize {
        self.mutations.iter().map(Mutation::first_offset).min().unwrap_or(self.original.len())
    }
}

impl fmt::Display for Case<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let changes: Vec<String> = self.mutations.iter().map(Mutation::to_string).collect();
        let changes = if changes.is_empty() { "unchanged".to_owned() } else { changes.join(", ") };
        write!(f, "case {} (MUTATION_CASE={0}): {} ({} bytes): {changes}", self.index, self.seed, self.original.len())
    }
}

/// What a campaign covered.
#[derive(Clone, Copy, Debug)]
pub struct Report {
    pub cases: u64,
    pub bytes: u64,
    pub elapsed: Duration,
    pub peak_bytes: usize,
}

pub struct Campaign {
    pub name: String,
    /// Named seed files.
    pub seeds: Vec<(String, Vec<u8>)>,
    /// How long to run (`MUTATION_SECONDS` overrides).
    pub budget: Duration,
    /// A case taking longer than this is a hang.
    pub hang: Duration,
    /// The most a case may allocate, given its input's length.
    pub memory: fn(usize) -> usize,
    /// The base seed (`MUTATION_SEED` overrides).
    pub seed: u64,
}

impl Campaign {
    pub fn new(name: &str, seeds: Vec<(String, Vec<u8>)>) -> Self {
        Campaign {
            name: name.to_owned(),
            seeds,
            budget: Duration::from_secs(3),
            hang: Duration::from_secs(10),
            memory: |len| 64 * len + (64 << 20),
            seed: 0x05EE_D0FF_11E5,
        }
    }

    pub fn budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }

    pub fn memory(mut self, memory: fn(usize) -> usize) -> Self {
        self.memory = memory;
        self
    }

    /// Case `index`'s mutations of its seed (index modulo the seeds).
    fn case(&self, index: u64) -> (usize, Vec<Mutation>, Vec<u8>) {
        let which = (index % self.seeds.len() as u64) as usize;
        let mut data = self.seeds[which].1.clone();
        if index < self.seeds.len() as u64 {
            return (which, Vec::new(), data);
        }
        let mut rng = Rng::new(self.seed ^ splitmix(index));
        let count = [1, 1, 1, 2, 3][rng.below(5)];
        let mut mutations = Vec::with_capacity(count);
        for _ in 0..count {
            let mutation = Mutation::random(&mut rng, data.len());
            mutation.apply(&mut data);
            mutations.push(mutation);
        }
        (which, mutations, data)
    }

    /// Hands every case to `check` until the budget is spent; fails (with
    /// the case's description) on a panic, a hang or too much memory.
    pub fn run(self, check: impl Fn(&Case<'_>) + Send + Sync + 'static) -> Report {
        assert!(!self.seeds.is_empty(), "{}: no seed files", self.name);
        assert!(metering(), "{}: install mutation::Metered as the test's global allocator", self.name);
        let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<f64>().ok());
        let mut campaign = self;
        if let Some(seconds) = env("MUTATION_SECONDS") {
            campaign.budget = Duration::from_secs_f64(seconds);
        }
        if let Some(seed) = env("MUTATION_SEED") {
            campaign.seed = seed as u64;
        }
        let only = env("MUTATION_CASE").map(|c| c as u64);
        let campaign = Arc::new(campaign);
        let (tx, rx) = mpsc::channel::<Result<String, Report>>();
        let worker = {
            let campaign = campaign.clone();
            std::thread::spawn(move || {
                let start = Instant::now();
                let mut report = Report { cases: 0, bytes: 0, elapsed: Duration::ZERO, peak_bytes: 0 };
                let mut index = only.unwrap_or(0);
                loop {
                    let (which, mutations, data) = campaign.case(index);
                    let (seed, original) = (&campaign.seeds[which].0, &campaign.seeds[which].1);
                    let case = Case { index, seed, original, mutations: &mutations, data: &data };
                    let description = case.to_string();
                    if tx.send(Ok(description.clone())).is_err() {
                        return;
                    }
                    let ((), peak) = measure(|| check(&case));
                    let limit = (campaign.memory)(data.len());
                    assert!(peak <= limit, "{description}: allocated {peak} bytes at once, more than {limit}");
                    report.cases += 1;
                    report.bytes += data.len() as u64;
                    report.peak_bytes = report.peak_bytes.max(peak);
                    index += 1;
                    let seeds_done = index >= campaign.seeds.len() as u64;
                    if only.is_some() || seeds_done && start.elapsed() >= campaign.budget {
                        break;
                    }
                }
                report.elapsed = start.elapsed();
                let _ = tx.send(Err(report));
            })
        };
        let mut current = String::from("(before the first case)");
        loop {
            match rx.recv_timeout(campaign.hang) {
                Ok(Ok(description)) => current = description,
                Ok(Err(report)) => {
                    let _ = worker.join();
                    let seconds = report.elapsed.as_secs_f64().max(1e-9);
                    eprintln!(
                        "{}: {} cases ({:.1} MB) in {seconds:.2} s: {:.0} cases/s, {:.1} MB/s; peak allocation {} KB",
                        campaign.name,
                        report.cases,
                        report.bytes as f64 / 1e6,
                        report.cases as f64 / seconds,
                        report.bytes as f64 / 1e6 / seconds,
                        report.peak_bytes / 1024
                    );
                    return report;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("{}: {current} took longer than {:?}: a hang", campaign.name, campaign.hang)
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let cause = match worker.join() {
                        Err(payload) => payload
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default(),
                        Ok(()) => String::new(),
                    };
                    panic!("{}: {current} failed: {cause}", campaign.name)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_are_a_function_of_seed_and_index() {
        let campaign = Campaign::new("t", vec![("a".into(), vec![1; 100]), ("b".into(), vec![2; 50])]);
        assert_eq!(campaign.case(0), (0, Vec::new(), vec![1; 100]), "each seed first as it is");
        assert_eq!(campaign.case(1).0, 1);
        assert_eq!(campaign.case(7), campaign.case(7));
        assert_ne!(campaign.case(7).2, campaign.case(9).2);
    }

    #[test]
    fn mutations_stay_inside_the_data() {
        let mut rng = Rng::new(1);
        for _ in 0..10_000 {
            let len = rng.below(40);
            let mut data = vec![0u8; len];
            let mutation = Mutation::random(&mut rng, len);
            mutation.apply(&mut data);
            assert!(data.len() <= len + 16, "{mutation}");
        }
        let mut data = vec![0u8; 4];
        Mutation::Inflate { offset: 2, bytes: vec![0xff; 4] }.apply(&mut data);
        assert_eq!(data, [0, 0, 0xff, 0xff]);
    }
}
