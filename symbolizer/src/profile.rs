//! A recording reduced to the stacks of one event kind, as display
//! frames, with remote frames resolved (and expanded into their inline
//! chains) where possible, and the class an allocation or lock wait was
//! about as the innermost frame.

use crate::events::{event_type, sampled_bytes, EventKind, Weight, NATIVEMEM_SETTING};
use crate::recording::{Chunk, ClassLeaf, Frame, Recording, Sample, Stack};
use crate::report::Report;
use crate::resolve::{Resolution, Resolver, Tier, Unresolved};
use frames::{CallTraceError, FrameType, UnknownNative};
use rustc_hash::FxHashMap;
use std::collections::HashMap;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StackFrame {
    /// `com.example.Foo.bar` for Java, the function for native frames.
    pub name: String,
    pub kind: Option<FrameType>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// For frames that came from a remote frame: its build-id and offset.
    pub remote: Option<(String, u64)>,
    /// Inlined into the next (outer) frame: both come from one address.
    pub inlined: bool,
}

/// The samples of one stack on one thread.
#[derive(Clone, Debug)]
pub struct ProfileSample {
    pub thread: String,
    /// In the kind's unit ([`EventKind::unit`]): the samples' total.
    pub weight: u64,
    /// The events it stands for.
    pub events: u64,
    /// Indexes into [`Profile::frames`], innermost first.
    pub stack: Vec<u32>,
}

#[derive(Default, Debug)]
pub struct Profile {
    pub kind: EventKind,
    /// For CPU and wall-clock profiles, the interval (nanoseconds) one
    /// unit of weight stands for: the shortest any chunk was sampled at
    /// (0: no chunk names one).
    pub period: i64,
    pub frames: Vec<StackFrame>,
    index: FxHashMap<StackFrame, u32>,
    pub samples: Vec<ProfileSample>,
}

impl Profile {
    pub fn new(kind: EventKind) -> Self {
        Self { kind, ..Self::default() }
    }

    pub fn intern(&mut self, frame: StackFrame) -> u32 {
        if let Some(&i) = self.index.get(&frame) {
            return i;
        }
        let i = self.frames.len() as u32;
        self.frames.push(frame.clone());
        self.index.insert(frame, i);
        i
    }

    pub fn total_weight(&self) -> u64 {
        self.samples.iter().map(|s| s.weight).sum()
    }
}

/// A recorded stack (or frame) as display frames, and what its remote
/// frames met.
#[derive(Clone, Default)]
struct Expanded {
    frames: Vec<u32>,
    problems: Vec<Unresolved>,
    /// Each remote frame's library and tier.
    remote: Vec<(String, Tier)>,
    /// Each unnamed frame's library, of those without a build-id.
    without_build_id: Vec<String>,
}

/// Library file names by build-id, from the recording's `jdk.NativeLibrary` events.
pub fn library_names(recording: &Recording) -> HashMap<String, String> {
    recording
        .libraries()
        .filter_map(|l| {
            let name = l.name.rsplit('/').next().unwrap_or(&l.name).to_owned();
            Some((l.build_id.clone()?, name))
        })
        .collect()
}

/// The file name of the library a remote frame belongs to: from the
/// recording's `jdk.NativeLibrary` events, else the frame's class (in the
/// JDK dialect), else the start of the build-id.
pub fn library_name(frame: &Frame, build_id: &str, libraries: &HashMap<String, String>) -> String {
    match libraries.get(build_id) {
        Some(name) => name.clone(),
        None if frame.build_id.is_some() && !frame.class.is_empty() => frame.class.clone(),
        None => build_id.chars().take(12).collect(),
    }
}

/// Turns one recorded frame into display frames (several for a remote
/// frame whose address lies in inlined code), innermost first, and says
/// how a remote frame was resolved.
fn expand(
    frame: &Frame,
    resolver: &mut Option<&mut Resolver>,
    libraries: &HashMap<String, String>,
    problems: &mut Vec<Unresolved>,
) -> (Vec<StackFrame>, Option<Tier>) {
    let plain = |name: String, kind, file: Option<String>, line| StackFrame {
        name,
        kind,
        file,
        line,
        remote: None,
        inlined: false,
    };
    let Some((build_id, offset)) = frame.remote() else {
        if frame.kind == Some(FrameType::Native) && frame.method.starts_with(UnknownNative::PREFIX) {
            problems.push(Unresolved::NoFileMapping);
        } else if frame.unnamed_library().is_some() {
            problems.push(Unresolved::NoBuildId);
        }
        let line = u32::try_from(frame.line).ok().filter(|&l| l > 0);
        return (vec![plain(frame.display_name(), frame.kind, None, line)], None);
    };
    let remote = Some((build_id.to_owned(), offset));
    let resolution = match resolver {
        Some(r) => r.resolve(build_id, offset),
        None => &Resolution::Unresolved(Unresolved::DebugFileMissing),
    };
    if let Some(problem) = resolution.problem() {
        problems.push(problem);
    }
    let tier = Some(resolution.tier());
    // The JVM's own code is C++, as the recording said.
    let native = if frame.kind == Some(FrameType::Cpp) { FrameType::Cpp } else { FrameType::Native };
    let frames = match resolution {
        Resolution::Frames(frames) => {
            let last = frames.len() - 1;
            frames
                .iter()
                .enumerate()
                .map(|(i, f)| StackFrame {
                    name: f.function.to_string(),
                    kind: Some(native),
                    file: f.file.as_deref().map(str::to_owned),
                    line: f.line,
                    remote: remote.clone(),
                    inlined: i < last,
                })
                .collect()
        }
        Resolution::NameOnly(name) => {
            vec![StackFrame { name: name.clone(), kind: Some(native), file: None, line: None, remote, inlined: false }]
        }
        Resolution::Unresolved(_) => {
            let name = format!("[{}+{offset:#x}]", library_name(frame, build_id, libraries));
            vec![StackFrame {
                name,
                kind: Some(FrameType::RemoteNative),
                file: None,
                line: None,
                remote,
                inlined: false,
            }]
        }
    };
    (frames, tier)
}

/// The setting `name` of a chunk in `unit`, if positive: the last value
/// its settings give (`"1000000 ns"`, `"524288 bytes"` as we write them,
/// `"1000000"` as async-profiler does).
fn setting_amount(chunk: &Chunk, name: &str, unit: &str) -> Option<i64> {
    let (_, value) = chunk.settings.iter().rev().find(|(setting, _)| setting == name)?;
    value.strip_suffix(unit).unwrap_or(value).parse().ok().filter(|&amount: &i64| amount > 0)
}

fn setting_nanos(chunk: &Chunk, name: &str) -> Option<i64> {
    setting_amount(chunk, name, " ns")
}

/// The sampling interval of `kind` (CPU or wall clock) a chunk's samples
/// were taken at, in nanoseconds (ours records the wall-clock interval as
/// `wall`, async-profiler the interval of its one event as `interval`).
pub fn chunk_interval(chunk: &Chunk, kind: EventKind) -> Option<i64> {
    let names: &[&str] = match kind {
        EventKind::Cpu => &["interval"],
        EventKind::Wall => &["wall", "interval"],
        _ => return None,
    };
    names.iter().find_map(|name| setting_nanos(chunk, name))
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// How a chunk's samples of one kind are weighed: their own weight times
/// `scale`, and at least `floor`; a native allocation sampled over bytes
/// ([`Weight::SampledBytes`]) by what it stands for at the chunk's
/// `bytes_interval` (0: every allocation recorded, or not said).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Weighing {
    scale: u64,
    floor: u64,
    bytes_interval: u64,
}

impl Weighing {
    fn weigh(self, sample: &Sample) -> u64 {
        let sampled_over_bytes =
            || event_type(sample.event).is_some_and(|t| matches!(t.weight, Weight::SampledBytes(_)));
        if self.bytes_interval > 1 && sampled_over_bytes() {
            return sampled_bytes(sample.weight, self.bytes_interval);
        }
        sample.weight.saturating_mul(self.scale).max(self.floor)
    }
}

/// The profile's period and each chunk's [`Weighing`]. CPU and wall
/// clock: the period is the greatest common divisor of the intervals the
/// chunks with such samples name (the shortest, when each is a multiple of
/// it, as the overhead governor's stretches are), and a chunk's samples
/// are scaled by their interval over it, exactly (a sample taken at four
/// times that interval weighs four: stretches, recordings taken at
/// different rates); chunks naming no interval keep their weights. Lock waits: sampled by
/// the time waited, a recorded wait weighs at least the chunk's `lock`
/// interval (a shorter wait was recorded with a probability of its length
/// over the interval: ours, and async-profiler's by accumulated time).
/// Native allocations: by their chunk's [`NATIVEMEM_SETTING`] (`"524288
/// bytes"` as we write it, `"524288"` as async-profiler does).
fn weighings(recording: &Recording, kind: EventKind) -> (i64, Vec<Weighing>) {
    let plain = Weighing { scale: 1, floor: 0, bytes_interval: 0 };
    match kind {
        EventKind::Lock => {
            let floor = |chunk: &Chunk| setting_nanos(chunk, "lock").unwrap_or(0) as u64;
            return (0, recording.chunks.iter().map(|chunk| Weighing { floor: floor(chunk), ..plain }).collect());
        }
        EventKind::NativeMem => {
            let interval = |chunk: &Chunk| setting_amount(chunk, NATIVEMEM_SETTING, " bytes").unwrap_or(0) as u64;
            let weighing = |chunk: &Chunk| Weighing { bytes_interval: interval(chunk), ..plain };
            return (0, recording.chunks.iter().map(weighing).collect());
        }
        _ => {}
    }
    let intervals: Vec<Option<i64>> = recording.chunks.iter().map(|chunk| chunk_interval(chunk, kind)).collect();
    let sampled =
        recording.chunks.iter().zip(&intervals).filter(|(chunk, _)| chunk.samples.iter().any(|s| s.kind == kind));
    let period = sampled.filter_map(|(_, interval)| *interval).fold(0, gcd);
    let weighings = intervals
        .iter()
        .map(|interval| match interval {
            Some(interval) if period > 0 && interval % period == 0 => {
                Weighing { scale: (interval / period) as u64, ..plain }
            }
            _ => plain,
        })
        .collect();
    (period, weighings)
}

/// How a chunk's stacks are found cut short, for another writer's (ours
/// write a marker frame at a cut stack's root, and say `jfrdialect`):
/// with its depth limit, if it names one (`jstackdepth`, as
/// async-profiler records it).
fn cut_rules(recording: &Recording) -> Vec<Option<Option<usize>>> {
    let setting =
        |chunk: &Chunk, name: &str| chunk.settings.iter().rev().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    let rule = |chunk: &Chunk| {
        setting(chunk, "jfrdialect")
            .is_none()
            .then(|| setting(chunk, "jstackdepth").and_then(|v| v.parse().ok()).filter(|&depth: &usize| depth > 0))
    };
    recording.chunks.iter().map(rule).collect()
}

/// Whether another writer's stack was cut short: flagged `truncated` (the
/// JDK's writer), or holding as many Java frames as its chunk's limit
/// (async-profiler's, which cuts its Java walk there and flags nothing: a
/// guess, wrong for a whole stack exactly that deep).
fn is_cut(recording: &Recording, stack: &Stack, rule: Option<Option<usize>>) -> bool {
    let Some(limit) = rule else { return false };
    let java = || {
        let is_java = |&id: &u32| {
            matches!(
                recording.frames[id as usize].kind,
                Some(FrameType::Interpreted | FrameType::JitCompiled | FrameType::Inlined | FrameType::C1Compiled)
            )
        };
        stack.frames.iter().filter(|id| is_java(id)).count()
    };
    stack.truncated || limit.is_some_and(|limit| java() >= limit)
}

/// The marker frame at the root of a cut stack whose outermost frame does
/// not already say why it ends (ours carry `[truncated]` or
/// `[unknown_Java]`), so that no reader takes the last frame walked for
/// the thread's first.
fn cut_marker() -> StackFrame {
    StackFrame {
        name: CallTraceError::Truncated.name().to_owned(),
        kind: Some(FrameType::Native),
        file: None,
        line: None,
        remote: None,
        inlined: false,
    }
}

/// One sample of a [`build_timed`] profile in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timed {
    /// When it was taken, in unix nanoseconds.
    pub at: i64,
    /// The [`Profile::samples`] entry it was folded into.
    pub sample: u32,
    /// Its weight, in the kind's unit.
    pub weight: u64,
}

/// Builds the profile of the samples of `kind`, resolving remote frames
/// with `resolver` (when given), and reports how they resolved.
pub fn build(recording: &Recording, kind: EventKind, resolver: Option<&mut Resolver>) -> (Profile, Report) {
    build_with(recording, kind, resolver, None)
}

/// As [`build`], with when each sample was taken and where it went, in
/// the recording's order.
pub fn build_timed(
    recording: &Recording,
    kind: EventKind,
    resolver: Option<&mut Resolver>,
) -> (Profile, Report, Vec<Timed>) {
    let mut times = Vec::new();
    let (profile, report) = build_with(recording, kind, resolver, Some(&mut times));
    (profile, report, times)
}

fn build_with(
    recording: &Recording,
    kind: EventKind,
    mut resolver: Option<&mut Resolver>,
    mut times: Option<&mut Vec<Timed>>,
) -> (Profile, Report) {
    let libraries = library_names(recording);
    if let Some(r) = resolver.as_deref_mut() {
        r.prepare([recording]);
    }
    let (period, weighings) = weighings(recording, kind);
    let rules = cut_rules(recording);
    let mut profile = Profile { period, ..Profile::new(kind) };
    let mut report = Report::new(kind, recording.kinds());
    let mut names: HashMap<String, String> = HashMap::new();
    // Each recorded frame expanded once, each distinct stack (with its
    // leaf class) assembled once.
    let mut frames: Vec<Option<Expanded>> = vec![None; recording.frames.len()];
    let mut expanded: FxHashMap<(u32, Option<ClassLeaf>, bool), Expanded> = FxHashMap::default();
    // Samples of one stack and thread are one profile sample.
    let mut folded: FxHashMap<(u32, Option<ClassLeaf>, u32), usize> = FxHashMap::default();
    let chunks = recording.chunks.iter().zip(weighings.into_iter().zip(rules));
    let samples = chunks.flat_map(|(chunk, how)| chunk.samples.iter().map(move |sample| (sample, &chunk.clock, how)));
    for (sample, clock, (weighing, rule)) in samples.filter(|(s, _, _)| s.kind == kind) {
        let weight = weighing.weigh(sample);
        let count = report.frame_count(weight);
        let recorded = recording.stack(sample);
        let cut = is_cut(recording, recorded, rule);
        let stack = expanded.entry((sample.stack, sample.leaf, cut)).or_insert_with(|| {
            let mut stack = Expanded::default();
            if let Some(leaf) = &sample.leaf {
                let frame = StackFrame {
                    name: recording.leaf_class(leaf).to_owned(),
                    kind: Some(leaf.kind),
                    file: None,
                    line: None,
                    remote: None,
                    inlined: false,
                };
                stack.frames.push(profile.intern(frame));
            }
            for &id in recorded.frames.iter() {
                let done = frames[id as usize].get_or_insert_with(|| {
                    let frame = &recording.frames[id as usize];
                    let mut one = Expanded::default();
                    let (expanded, tier) = expand(frame, &mut resolver, &libraries, &mut one.problems);
                    if let (Some(tier), Some((build_id, _))) = (tier, frame.remote()) {
                        one.remote.push((build_id.to_owned(), tier));
                        names.entry(build_id.to_owned()).or_insert_with(|| library_name(frame, build_id, &libraries));
                    }
                    if let (None, Some((library, _))) = (frame.remote(), frame.unnamed_library()) {
                        one.without_build_id.push(library.to_owned());
                    }
                    one.frames = expanded.into_iter().map(|f| profile.intern(f)).collect();
                    one
                });
                stack.frames.extend_from_slice(&done.frames);
                stack.problems.extend_from_slice(&done.problems);
                stack.remote.extend_from_slice(&done.remote);
                stack.without_build_id.extend_from_slice(&done.without_build_id);
            }
            let root = recorded.frames.last().map(|&id| recording.frames[id as usize].method.as_str());
            // `[unknown]` is also async-profiler's name for a native frame it
            // could not name: not a marker.
            let marked = root.and_then(CallTraceError::from_name).filter(|&e| e != CallTraceError::Other);
            if cut && marked.is_none() {
                stack.frames.push(profile.intern(cut_marker()));
            }
            stack
        });
        for (build_id, tier) in &stack.remote {
            report.add_remote(build_id, *tier, count);
        }
        for library in &stack.without_build_id {
            *report.without_build_id.entry(library.clone()).or_default() += count;
        }
        report.add_sample(weight, &stack.problems);
        let next = profile.samples.len();
        let index = *folded.entry((sample.stack, sample.leaf, sample.thread)).or_insert(next);
        if index == next {
            let thread = recording.thread(sample).name().to_owned();
            profile.samples.push(ProfileSample { thread, weight: 0, events: 0, stack: stack.frames.clone() });
        }
        profile.samples[index].weight += weight;
        profile.samples[index].events += 1;
        if let Some(times) = times.as_deref_mut() {
            times.push(Timed { at: clock.nanos_at(sample.start_ticks), sample: index as u32, weight });
        }
    }
    for (build_id, library) in &mut report.libraries {
        library.name = names.remove(build_id).unwrap_or_default();
        library.source = match resolver.as_deref() {
            Some(r) => r.describe(build_id).unwrap_or_default(),
            None => "not resolved (no resolver)".to_owned(),
        };
    }
    if let Some(r) = resolver {
        report.problems = r.problems().to_vec();
    }
    (profile, report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::debuginfo::Locator;
    use crate::testing::*;

    fn build_cpu(recording: &Recording, resolver: Option<&mut Resolver>) -> (Profile, Report) {
        build(recording, EventKind::Cpu, resolver)
    }

    fn names(profile: &Profile, sample: usize) -> Vec<&str> {
        profile.samples[sample].stack.iter().map(|&f| profile.frames[f as usize].name.as_str()).collect()
    }

    fn frame(profile: &Profile, sample: usize, index: usize) -> &StackFrame {
        &profile.frames[profile.samples[sample].stack[index] as usize]
    }

    #[test]
    fn java_frames_are_named_by_dotted_class_native_frames_by_symbol() {
        let frames = vec![native("memcpy"), java("com/example/Foo", "bar", 12), java("com/example/Main", "main", 0)];
        let (profile, report) = build_cpu(&recording(vec![sample("worker", 3, frames)], vec![]), None);
        assert_eq!(names(&profile, 0), ["memcpy", "com.example.Foo.bar", "com.example.Main.main"]);
        assert_eq!(profile.samples[0].thread, "worker");
        assert_eq!(profile.samples[0].weight, 3);
        // Positive line numbers only; nothing is remote or inlined.
        let lines: Vec<Option<u32>> = (0..3).map(|i| frame(&profile, 0, i).line).collect();
        assert_eq!(lines, [None, Some(12), None]);
        assert!((0..3).all(|i| frame(&profile, 0, i).remote.is_none() && !frame(&profile, 0, i).inlined));
        assert_eq!((report.total_weight, report.remote_frames), (3, 0));
        assert!(report.categories.is_empty());
    }

    /// A chunk sampled at four times the interval of another (a stretch
    /// of the overhead governor) weighs its samples four times: equal CPU
    /// time reads equal.
    #[test]
    fn samples_weigh_the_interval_their_chunk_was_taken_at() {
        let at = |nanos: &str, method: &str, samples: usize| {
            let mut chunk = chunk(vec![sample("t", 1, vec![java("app/Main", method, 1)]); samples], vec![]);
            chunk.settings =
                vec![("interval".to_owned(), "1000000 ns".to_owned()), ("interval".to_owned(), nanos.to_owned())];
            chunk
        };
        let stretched = recording_of(vec![at("1000000 ns", "early", 400), at("4000000", "late", 100)]);
        let (profile, report) = build_cpu(&stretched, None);
        assert_eq!(profile.period, 1_000_000, "the shortest interval");
        let weight_in = |profile: &Profile, method: &str| -> u64 {
            profile
                .samples
                .iter()
                .filter(|s| profile.frames[s.stack[0] as usize].name.ends_with(method))
                .map(|s| s.weight)
                .sum()
        };
        assert_eq!((weight_in(&profile, "early"), weight_in(&profile, "late")), (400, 400));
        assert_eq!(report.total_weight, 800);
        // Intervals that are not multiples of each other: their common
        // divisor is the unit (1.5 ms weighs three of 0.5 ms, 1 ms two).
        let mixed = recording_of(vec![at("1000000 ns", "early", 3), at("1500000", "late", 2)]);
        let (profile, _) = build_cpu(&mixed, None);
        assert_eq!((profile.period, weight_in(&profile, "early"), weight_in(&profile, "late")), (500_000, 6, 6));
        // A chunk naming no interval keeps its weights; none at all: period 0.
        let (profile, _) = build_cpu(&recording(vec![sample("t", 3, vec![])], vec![]), None);
        assert_eq!((profile.period, profile.samples[0].weight), (0, 3));
        // Wall clock reads our `wall` setting first.
        let mut wall = at("2000000 ns", "w", 1);
        wall.settings.push(("wall".to_owned(), "50000000 ns".to_owned()));
        assert_eq!(chunk_interval(&wall, EventKind::Wall), Some(50_000_000));
        assert_eq!(chunk_interval(&wall, EventKind::Cpu), Some(2_000_000));
        assert_eq!(chunk_interval(&wall, EventKind::Alloc), None);
    }

    /// A lock wait sampled by time waited weighs at least the interval of
    /// its chunk's `lock` setting; without one, its duration.
    #[test]
    fn lock_waits_weigh_at_least_their_sampling_interval() {
        let wait = |nanos: u64| crate::recording::SampleData {
            kind: EventKind::Lock,
            ..sample("t", nanos, vec![java("app/Main", "take", 1)])
        };
        let mut sampled = chunk(vec![wait(2_000), wait(50_000)], vec![]);
        sampled.settings = vec![("lock".to_owned(), "10000 ns".to_owned())];
        let unsampled = chunk(vec![wait(2_000)], vec![]);
        let (profile, report) = build(&recording_of(vec![sampled, unsampled]), EventKind::Lock, None);
        // 10,000 + 50,000 + 2,000: the three waits of one stack, one sample.
        let weights: Vec<(u64, u64)> = profile.samples.iter().map(|s| (s.weight, s.events)).collect();
        assert_eq!(weights, [(62_000, 3)]);
        assert_eq!((report.total_weight, report.events, profile.period), (62_000, 3, 0));
    }

    /// A sampled native allocation weighs what it stands for at its
    /// chunk's `nativemem` interval, spelled as we write it or as
    /// async-profiler does; recorded at every allocation (`0`), or with no
    /// interval it can read, its size. A Datadog one weighs its size times
    /// its own weight, whatever the setting.
    #[test]
    fn native_allocations_weigh_by_their_chunks_sampling_interval() {
        let small = || malloc(10, 0xa, 16, vec![native("malloc"), java("app/Main", "main", 1)]);
        let weigh = |setting: Option<&str>, allocation: crate::recording::SampleData| {
            let mut chunk = chunk(vec![allocation], vec![]);
            chunk.settings = setting.map(|v| ("nativemem".to_owned(), v.to_owned())).into_iter().collect();
            let (profile, report) = build(&recording_of(vec![chunk]), EventKind::NativeMem, None);
            assert_eq!((report.total_weight, report.events), (profile.total_weight(), 1));
            profile.total_weight()
        };
        // 16 / (1 - exp(-16/524288))
        assert_eq!(weigh(Some("524288 bytes"), small()), 524_296);
        assert_eq!(weigh(Some("524288"), small()), 524_296);
        for every in [Some("0"), Some("1"), Some("0 bytes"), None, Some("512 KiB"), Some("")] {
            assert_eq!(weigh(every, small()), 16, "{every:?}");
        }
        let datadog = crate::recording::SampleData {
            event: jfr_writer::schema::names::DATADOG_NATIVE_ALLOCATION,
            weight: 16 * 32_768,
            ..small()
        };
        assert_eq!(weigh(Some("524288 bytes"), datadog), 16 * 32_768);
        // Other kinds ignore the setting.
        let mut cpu = chunk(vec![sample("t", 3, vec![])], vec![]);
        cpu.settings = vec![("nativemem".to_owned(), "524288 bytes".to_owned())];
        assert_eq!(build_cpu(&recording_of(vec![cpu]), None).0.total_weight(), 3);
    }

    #[test]
    fn a_profile_shows_one_kind_and_its_class_ends_the_stack() {
        let mut alloc = sample("a", 4096, vec![java("app/Main", "allocate", 5), java("app/Main", "main", 1)]);
        alloc.kind = EventKind::Alloc;
        alloc.leaf = Some(("byte[]".to_owned(), FrameType::Kernel));
        let mut wall = sample("a", 7, vec![java("app/Main", "main", 1)]);
        wall.kind = EventKind::Wall;
        let samples = vec![sample("a", 2, vec![java("app/Main", "main", 1)]), alloc, wall];
        let recording = recording(samples, vec![]);
        let weights = |kind| {
            let (profile, report) = build(&recording, kind, None);
            assert_eq!(profile.kind, kind);
            assert_eq!(report.total_weight, profile.total_weight());
            (profile.samples.len(), profile.total_weight())
        };
        assert_eq!(weights(EventKind::Cpu), (1, 2));
        assert_eq!(weights(EventKind::Wall), (1, 7));
        assert_eq!(weights(EventKind::Alloc), (1, 4096));
        assert_eq!(weights(EventKind::Lock), (0, 0));
        let (profile, report) = build(&recording, EventKind::Alloc, None);
        assert_eq!(names(&profile, 0), ["byte[]", "app.Main.allocate", "app.Main.main"]);
        assert_eq!(frame(&profile, 0, 0).kind, Some(FrameType::Kernel));
        assert_eq!(report.kinds[&EventKind::Cpu], (1, 2));
    }

    /// A stack cut short sits under `[truncated]`: flagged (the JDK's
    /// writer) or as deep as its chunk's `jstackdepth` (async-profiler's);
    /// a stack whose root already names why it ends (ours) gets no second
    /// marker, and a whole stack none.
    #[test]
    fn cut_stacks_sit_under_a_marker_root() {
        let deep = |n: usize| (0..n).map(|i| java("app/Main", &format!("f{i}"), 1)).collect::<Vec<_>>();
        let flagged = crate::recording::SampleData { truncated: true, ..sample("jdk", 1, deep(2)) };
        let mut marked = deep(2);
        marked.push(native(CallTraceError::UnknownJava.name()));
        let mut cut = chunk(
            vec![flagged, sample("ap", 1, deep(3)), sample("ours", 1, marked), sample("whole", 1, deep(2))],
            vec![],
        );
        cut.settings = vec![("jstackdepth".to_owned(), "3".to_owned())];
        let (profile, _) = build_cpu(&recording_of(vec![cut]), None);
        let roots: Vec<(&str, &str)> = profile
            .samples
            .iter()
            .map(|s| (s.thread.as_str(), profile.frames[*s.stack.last().unwrap() as usize].name.as_str()))
            .collect();
        assert_eq!(
            roots,
            [("jdk", "[truncated]"), ("ap", "[truncated]"), ("ours", "[unknown_Java]"), ("whole", "app.Main.f1")]
        );
        assert_eq!(profile.samples[0].stack.len(), 3, "the frames walked, then the marker");

        // Ours mark a cut root themselves: nothing is added to a chunk that
        // names its dialect, flagged or as deep as its limit.
        let flagged = crate::recording::SampleData { truncated: true, ..sample("ours", 1, deep(3)) };
        let mut ours = chunk(vec![flagged], vec![]);
        ours.settings = vec![("jstackdepth".to_owned(), "3".to_owned()), ("jfrdialect".to_owned(), "jdk".to_owned())];
        let (profile, _) = build_cpu(&recording_of(vec![ours]), None);
        assert_eq!(profile.samples[0].stack.len(), 3);
        // Native frames do not count toward async-profiler's Java depth;
        // `[unknown]` (its unnamed native frame) is not a marker.
        let mut frames = vec![native("memcpy"), native("start_thread")];
        frames.splice(1..1, deep(2));
        frames.push(native(CallTraceError::Other.name()));
        let mut theirs =
            chunk(vec![sample("ap", 1, frames.clone()), sample("ap-cut", 1, [&deep(3)[..], &frames].concat())], vec![]);
        theirs.settings = vec![("jstackdepth".to_owned(), "3".to_owned())];
        let (profile, _) = build_cpu(&recording_of(vec![theirs]), None);
        let root = |i: usize| profile.frames[*profile.samples[i].stack.last().unwrap() as usize].name.as_str();
        assert_eq!((root(0), root(1)), ("[unknown]", "[truncated]"));
    }

    #[test]
    fn equal_frames_are_interned_once_and_weights_add_up() {
        let samples = vec![
            sample("a", 1, vec![java("app/Main", "work", 5), java("app/Main", "main", 1)]),
            sample("b", 2, vec![java("app/Main", "work", 5), java("app/Main", "main", 1)]),
            sample("a", 4, vec![java("app/Main", "work", 6), java("app/Main", "main", 1)]),
        ];
        let (profile, _) = build_cpu(&recording(samples, vec![]), None);
        // `work` at line 6 is another frame than at line 5.
        assert_eq!(profile.frames.len(), 3);
        assert_eq!(profile.samples[0].stack, profile.samples[1].stack);
        assert_ne!(profile.samples[0].stack, profile.samples[2].stack);
        assert_eq!(profile.total_weight(), 7);
    }

    #[test]
    fn native_code_outside_every_mapping_counts_as_no_file_mapping() {
        let samples = vec![
            sample("t", 2, vec![native(&UnknownNative(0x7f00_1234_5678).to_string()), java("app/Main", "main", 1)]),
            sample("t", 1, vec![native("memcpy")]),
        ];
        let (_, report) = build_cpu(&recording(samples, vec![]), None);
        assert_eq!(report.stats(Unresolved::NoFileMapping), crate::report::CategoryStats { frames: 2, samples: 2 });
        assert_eq!(report.categories.len(), 1);
    }

    #[test]
    fn unresolved_remote_frames_are_named_by_library_file_and_offset() {
        let known = "0123456789abcdef0123456789abcdef01234567";
        let unknown = "fedcba9876543210fedcba9876543210fedcba98";
        let frames = vec![remote(known, 0x1a2b), remote(unknown, 0x10), java("app/Main", "main", 1)];
        let samples = vec![sample("t", 5, frames)];
        let (profile, report) = build_cpu(&recording(samples, vec![library("/opt/app/lib/libfoo.so", known)]), None);
        // A library the recording lists by its file name; another by the
        // start of its build-id.
        assert_eq!(names(&profile, 0), ["[libfoo.so+0x1a2b]", "[fedcba987654+0x10]", "app.Main.main"]);
        let first = frame(&profile, 0, 0);
        assert_eq!(first.kind, REMOTE_NATIVE);
        assert_eq!(first.remote, Some((known.to_owned(), 0x1a2b)));
        assert_eq!(report.remote_frames, 10);
        assert_eq!(report.tier(Tier::Unresolved), 10);
        assert_eq!(report.libraries[known].name, "libfoo.so");
        assert_eq!(report.libraries[unknown].name, "fedcba987654");
        assert_eq!(report.stats(Unresolved::DebugFileMissing), crate::report::CategoryStats { frames: 10, samples: 5 });
    }

    #[test]
    fn resolved_remote_frames_carry_function_file_and_line() {
        let build_id = "abcdef0123456789abcdef0123456789abcdef01";
        let tree = scratch_dir("profile_resolved");
        link_in_build_id_tree(&tree, build_id, &std::env::current_exe().unwrap());
        let mut resolver = Resolver::new(Locator::new(&[tree], &[], None).0);
        let address = known_function_address();
        let samples = vec![sample("t", 2, vec![remote(build_id, address), java("app/Main", "main", 1)])];
        let (profile, report) = build_cpu(&recording(samples, vec![]), Some(&mut resolver));
        // The inline chain at the address (what the optimizer inlined into
        // `known_function`, if anything), then the function, then Java.
        let stack = &profile.samples[0].stack;
        let chain: Vec<&StackFrame> = stack[..stack.len() - 1].iter().map(|&f| &profile.frames[f as usize]).collect();
        let (function, inlined) = chain.split_last().unwrap();
        assert!(function.name.ends_with("known_function"), "{chain:?}");
        assert!(function.file.as_deref().is_some_and(|f| f.ends_with("src/testing.rs")), "{function:?}");
        assert!(function.line.is_some(), "{function:?}");
        assert!(!function.inlined && inlined.iter().all(|f| f.inlined), "{chain:?}");
        let remote = Some((build_id.to_owned(), address));
        assert!(chain.iter().all(|f| f.kind == NATIVE && f.remote == remote), "{chain:?}");
        assert_eq!(names(&profile, 0).last(), Some(&"app.Main.main"));
        assert_eq!(report.remote_frames, 2);
        assert_eq!(report.tier(Tier::Dwarf), 2);
        assert!(report.libraries[build_id].source.starts_with("DWARF of "), "{report}");
        assert!(report.categories.is_empty(), "{report}");
    }
}
