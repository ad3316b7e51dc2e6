//! A copy of a recording in which remote frames are replaced by named
//! native frames (their inline chains expanded), so JDK Mission Control
//! and other JFR tools show function names. Everything else is carried
//! over chunk by chunk with the original clocks (CPU and wall-clock
//! samples, native allocations and their frees, endpoints, settings,
//! libraries, counters) in the dialect the recording was written in.
//! Every native frame is written as async-profiler writes one — class =
//! the library's file name, descriptor `()L;`, type Native (C++ for the
//! JVM's) — and a remote frame that could not be
//! resolved as `[libjvm.so+0x5d7203]` of that class: no build-id package,
//! no `<remote>`, nothing `jfr print` cannot print. Pool keys mean one
//! thing in every chunk of the copy (see `jfr_writer::pools`).

use crate::events::EventKind;
use crate::profile::{library_name, library_names};
use crate::recording::{Chunk, Frame, Free, Recording, Sample, Thread};
use crate::resolve::{Resolution, Resolver, Tier};
use frames::{FrameType, NON_JAVA_DESCRIPTOR, NON_JAVA_POSITION};
use jfr_writer::{
    schema, ActiveSetting, ChunkClock, ChunkEnd, ChunkWriter, ConstantPools, Dialect, Endpoint, FrameDef, MethodDef,
    NativeLibrary, ProfilerCounter, Sample as SampleEvent, SampleKind, ThreadDef, ThreadState,
};
use std::collections::{BTreeMap, HashMap};

const ACC_NATIVE: i32 = 0x100;

fn thread_state(name: &str) -> ThreadState {
    ThreadState::ALL.into_iter().find(|s| s.name() == name).unwrap_or(ThreadState::Unknown)
}

/// The copy's pools (which key stack traces by content) and the keys it
/// gave threads, strings and attribute values: one set for the whole file.
struct Rewriter<'r> {
    pools: ConstantPools,
    /// Keys are per chunk: see [`ConstantPools::method`].
    methods: HashMap<(String, String, String, i32), jfr_writer::MethodId>,
    threads: HashMap<Thread, u64>,
    values: HashMap<String, u64>,
    labels: HashMap<String, u64>,
    resolver: Option<&'r mut Resolver>,
    /// Library file names by build-id, from the recording.
    libraries: HashMap<String, String>,
    /// Remote frames written, per tier.
    tiers: HashMap<Tier, u64>,
    /// Sample events not copied, per kind.
    skipped: BTreeMap<EventKind, u64>,
    /// `profiler.Free` events not copied.
    skipped_frees: u64,
}

impl Rewriter<'_> {
    fn method(&mut self, class: &str, name: &str, descriptor: &str, modifiers: i32) -> jfr_writer::MethodId {
        let key = (class.to_owned(), name.to_owned(), descriptor.to_owned(), modifiers);
        if let Some(&id) = self.methods.get(&key) {
            return id;
        }
        let next = self.methods.len() as u64 + 1;
        let id = self.pools.method(next, |p| MethodDef {
            class: p.class(class, 0),
            name: p.symbol(name),
            descriptor: p.symbol(descriptor),
            modifiers,
            hidden: false,
        });
        self.methods.insert(key, id);
        id
    }

    fn frames(&mut self, frame: &Frame, out: &mut Vec<FrameDef>) {
        let Some((build_id, offset)) = frame.remote() else {
            let method = self.method(&frame.class, &frame.method, &frame.descriptor, frame.modifiers);
            // A type we never write is carried over as JIT compiled.
            let frame_type = frame.kind.unwrap_or(FrameType::JitCompiled);
            out.push(FrameDef { method, line: frame.line, bci: frame.bci, frame_type });
            return;
        };
        let resolution = match self.resolver.as_deref_mut() {
            Some(resolver) => resolver.resolve(build_id, offset).clone(),
            None => Resolution::Unresolved(crate::resolve::Unresolved::DebugFileMissing),
        };
        *self.tiers.entry(resolution.tier()).or_default() += 1;
        let library = library_name(frame, build_id, &self.libraries);
        // The JVM's own code is C++, as the recording said.
        let frame_type = if frame.kind == Some(FrameType::Cpp) { FrameType::Cpp } else { FrameType::Native };
        let native = |rewriter: &mut Self, name: &str, line: Option<u32>| {
            let method = rewriter.method(&library, name, NON_JAVA_DESCRIPTOR, ACC_NATIVE);
            let line = line.and_then(|l| i32::try_from(l).ok()).unwrap_or(NON_JAVA_POSITION);
            FrameDef { method, line, bci: NON_JAVA_POSITION, frame_type }
        };
        match resolution {
            // Inlined native functions are native frames too (the JFR type
            // `Inlined` means inlined Java, and converters print it so).
            Resolution::Frames(chain) => out.extend(chain.iter().map(|f| native(self, &f.function, f.line))),
            Resolution::NameOnly(name) => out.push(native(self, &name, None)),
            Resolution::Unresolved(_) => out.push(native(self, &format!("[{library}+{offset:#x}]"), None)),
        }
    }

    fn thread(&mut self, thread: &Thread) -> u64 {
        if let Some(&key) = self.threads.get(thread) {
            return key;
        }
        let key = self.threads.len() as u64 + 1;
        self.threads.insert(thread.clone(), key);
        key
    }

    /// The copy's key of a recorded stack (`traces` holds this chunk's).
    fn trace(&mut self, recording: &Recording, sample: &Sample, traces: &mut HashMap<u32, u64>) -> u64 {
        if let Some(&key) = traces.get(&sample.stack) {
            return key;
        }
        let stack = recording.stack(sample);
        let mut frames = Vec::with_capacity(stack.frames.len());
        for frame in recording.frames_of(sample) {
            self.frames(frame, &mut frames);
        }
        let key = self.pools.stack_trace(stack.truncated, &frames);
        traces.insert(sample.stack, key);
        key
    }

    /// Writes a free in the JDK dialect; the Datadog dialect has none,
    /// and another writer's are not copied.
    fn free<'a>(
        &mut self,
        recording: &'a Recording,
        free: &Free,
        (writer, dialect): (&mut ChunkWriter, Option<Dialect>),
        threads: &mut HashMap<u64, &'a Thread>,
    ) {
        if dialect != Some(Dialect::Jdk) {
            self.skipped_frees += 1;
            return;
        }
        let thread = &recording.threads[free.thread as usize];
        let key = self.thread(thread);
        threads.insert(key, thread);
        writer.sample(&SampleEvent {
            kind: SampleKind::Free { address: free.address },
            start_ticks: free.start_ticks,
            thread: key,
            stack_trace: 0,
            state: ThreadState::Unknown,
            weight: 0,
            span_id: 0,
            local_root_span_id: 0,
            context: &[],
        });
    }

    fn write_chunk(&mut self, recording: &Recording, chunk: &Chunk, final_chunk: bool) -> Vec<u8> {
        let clock = ChunkClock {
            start_nanos: chunk.clock.start_nanos,
            start_ticks: chunk.clock.start_ticks,
            ticks_per_second: chunk.clock.ticks_per_second,
        };
        let start = chunk.clock.start_ticks;
        let dialect = dialect(chunk);
        let mut writer = ChunkWriter::new(clock, dialect.unwrap_or_default());
        writer.declare(&REWRITTEN_EVENTS);
        self.methods.clear();
        for (name, value) in &chunk.settings {
            writer.write(&ActiveSetting { start_ticks: start, event_type: schema::id::EXECUTION_SAMPLE, name, value });
        }
        let mut threads: HashMap<u64, &Thread> = HashMap::new();
        let mut values: HashMap<u64, &str> = HashMap::new();
        let mut traces = HashMap::new();
        // Each free where the file had it among the samples: it orders the
        // free against an allocation of the same tick.
        let mut frees = chunk.frees.iter().peekable();
        for (i, sample) in chunk.samples.iter().enumerate() {
            for free in std::iter::from_fn(|| frees.next_if(|f| f.after as usize <= i)) {
                self.free(recording, free, (&mut writer, dialect), &mut threads);
            }
            // The profiler's own sample events (another writer's are not
            // copied): CPU and wall-clock samples, native allocations.
            let kind = match sample.kind {
                EventKind::Cpu => SampleKind::Cpu,
                EventKind::Wall => SampleKind::Wall,
                EventKind::NativeMem => SampleKind::Malloc { address: sample.address, size: sample.size },
                EventKind::Alloc | EventKind::Live | EventKind::Lock => {
                    *self.skipped.entry(sample.kind).or_default() += 1;
                    continue;
                }
            };
            if dialect.is_none() {
                *self.skipped.entry(sample.kind).or_default() += 1;
                continue;
            }
            // One value per attribute the chunk declares (null for those
            // the sample has none of).
            let attributes = recording.attributes(sample);
            let context: Vec<u64> = (0..chunk.attributes.len())
                .map(|i| match attributes.get(i) {
                    Some(Some(text)) => {
                        let key = intern(&mut self.values, text);
                        values.insert(key, text);
                        key
                    }
                    _ => 0,
                })
                .collect();
            let thread = self.thread(recording.thread(sample));
            threads.insert(thread, recording.thread(sample));
            writer.sample(&SampleEvent {
                kind,
                start_ticks: sample.start_ticks,
                thread,
                stack_trace: self.trace(recording, sample, &mut traces),
                state: thread_state(recording.state(sample)),
                weight: sample.weight,
                span_id: sample.span_id,
                local_root_span_id: sample.root_span_id,
                context: &context,
            });
        }
        for free in frees {
            self.free(recording, free, (&mut writer, dialect), &mut threads);
        }
        let mut labels: HashMap<u64, &str> = HashMap::new();
        for endpoint in &chunk.endpoints {
            let thread = self.thread(&endpoint.thread);
            threads.insert(thread, &endpoint.thread);
            let [endpoint_key, operation_key] = [&endpoint.endpoint, &endpoint.operation].map(|text| {
                let key = intern(&mut self.labels, text);
                labels.insert(key, text);
                key
            });
            writer.write(&Endpoint {
                start_ticks: endpoint.start_ticks,
                thread,
                endpoint: endpoint_key,
                operation: operation_key,
                local_root_span_id: endpoint.root_span_id,
            });
        }
        for library in &chunk.libraries {
            writer.write(&NativeLibrary {
                start_ticks: start,
                name: &library.name,
                base_address: library.base_address,
                top_address: library.top_address,
                build_id: library.build_id.as_deref(),
                load_bias: library.load_bias,
            });
        }
        for (name, count) in &chunk.counters {
            writer.write(&ProfilerCounter { start_ticks: start, name, count: *count });
        }
        for (&key, thread) in &threads {
            self.pools.thread(
                key,
                &ThreadDef {
                    os_name: &thread.os_name,
                    os_thread_id: thread.os_id,
                    java_name: thread.java_name.as_deref(),
                    java_thread_id: thread.java_id,
                },
            );
        }
        for (&key, text) in &values {
            self.pools.attribute_value(key, text);
        }
        for (&key, text) in &labels {
            self.pools.string(key, text);
        }
        writer.finish(
            &mut self.pools,
            ChunkEnd { duration_nanos: chunk.clock.duration_nanos, final_chunk },
            &chunk.attributes,
        )
    }
}

/// Every event type a rewritten chunk can hold, declared in every chunk
/// so that all describe the same types.
const REWRITTEN_EVENTS: [u64; 9] = [
    schema::id::EXECUTION_SAMPLE,
    schema::id::METHOD_SAMPLE,
    schema::id::MALLOC,
    schema::id::FREE,
    schema::id::SAMPLE_CONTEXT,
    schema::id::ACTIVE_SETTING,
    schema::id::ENDPOINT,
    schema::id::PROFILER_COUNTER,
    schema::id::NATIVE_LIBRARY,
];

/// The key of `text` in `keys`, assigned (1, 2, ...) on first use.
fn intern(keys: &mut HashMap<String, u64>, text: &str) -> u64 {
    if let Some(&key) = keys.get(text) {
        return key;
    }
    let key = keys.len() as u64 + 1;
    keys.insert(text.to_owned(), key);
    key
}

/// The dialect our profiler wrote a chunk in (its `jfrdialect` setting;
/// recordings older than the setting are Datadog's), or `None` for a
/// recording of another profiler.
fn dialect(chunk: &Chunk) -> Option<Dialect> {
    match chunk.settings.iter().find(|(name, _)| name == "jfrdialect") {
        Some((_, value)) => Dialect::from_name(value),
        None => chunk.samples.iter().any(|s| s.event.starts_with("datadog.")).then_some(Dialect::Datadog),
    }
}

/// A rewritten recording and what the rewrite did.
pub struct Rewritten {
    /// All chunks, concatenated.
    pub bytes: Vec<u8>,
    /// Remote frames written, per tier that resolved them.
    pub tiers: HashMap<Tier, u64>,
    /// Sample events not copied, per kind: heap allocations, live objects
    /// and locks, and any event of a recording another profiler wrote.
    pub skipped: BTreeMap<EventKind, u64>,
    /// Frees of native allocations not copied: another profiler's, and
    /// any in the Datadog dialect (which has no free event).
    pub skipped_frees: u64,
}

/// The rewritten recording, all chunks concatenated.
pub fn rewrite(recording: &Recording, resolver: Option<&mut Resolver>) -> Vec<u8> {
    rewrite_counting(recording, resolver).bytes
}

/// [`rewrite`], and what it did.
pub fn rewrite_counting(recording: &Recording, mut resolver: Option<&mut Resolver>) -> Rewritten {
    if let Some(r) = resolver.as_deref_mut() {
        r.prepare([recording]);
    }
    let libraries = library_names(recording);
    let mut rewriter = Rewriter {
        pools: ConstantPools::new(),
        methods: HashMap::new(),
        threads: HashMap::new(),
        values: HashMap::new(),
        labels: HashMap::new(),
        resolver,
        libraries,
        tiers: HashMap::new(),
        skipped: BTreeMap::new(),
        skipped_frees: 0,
    };
    let mut out = Vec::new();
    let last = recording.chunks.len().saturating_sub(1);
    for (i, chunk) in recording.chunks.iter().enumerate() {
        out.extend(rewriter.write_chunk(recording, chunk, i == last));
    }
    Rewritten { bytes: out, tiers: rewriter.tiers, skipped: rewriter.skipped, skipped_frees: rewriter.skipped_frees }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::debuginfo::Locator;
    use crate::events::EventKind;
    use crate::recording::{Endpoint as EndpointEvent, NativeLibrary as Library, SampleData};
    use crate::testing::*;

    const ID: &str = "abcdef0123456789abcdef0123456789abcdef01";

    fn read_back(test: &str, bytes: &[u8]) -> Recording {
        let path = scratch_dir(test).join("copy.jfr");
        std::fs::write(&path, bytes).unwrap();
        let outcome = crate::recording::read(&path).unwrap();
        assert!(outcome.damage.is_empty(), "{:?}", outcome.damage);
        outcome.recording
    }

    /// Two chunks with every event kind the copy carries; the first has
    /// context attributes, a wall-clock sample and a remote frame.
    fn original() -> Recording {
        let mut wall = sample("sleeper", 3, vec![native("epoll_wait"), java("app/Main", "idle", 40)]);
        (wall.event, wall.kind) = ("datadog.MethodSample", EventKind::Wall);
        wall.state = "STATE_SLEEPING".to_owned();
        wall.attributes = vec![Some("GET /".to_owned()), None];
        let mut cpu = sample("worker", 1, vec![remote(ID, 0x1a2b), java("app/Main", "work", 12)]);
        cpu.span_id = 42;
        cpu.root_span_id = 41;
        cpu.truncated = true;
        cpu.attributes = vec![None, Some("tenant-7".to_owned())];
        let mut first = chunk(vec![cpu, wall], vec![library("/opt/lib/libfoo.so", ID)]);
        first.attributes = vec!["route".to_owned(), "tenant".to_owned()];
        first.settings =
            vec![("cstack".to_owned(), "fp".to_owned()), ("attributes".to_owned(), "route;tenant".to_owned())];
        first.counters = vec![("samples".to_owned(), 2)];
        first.endpoints = vec![EndpointEvent {
            start_ticks: 20,
            thread: thread("worker"),
            endpoint: "GET /".to_owned(),
            operation: "servlet.request".to_owned(),
            root_span_id: 41,
        }];
        let later =
            SampleData { attributes: vec![None, None], ..sample("worker", 2, vec![java("app/Main", "work", 13)]) };
        let mut second = chunk(vec![later], vec![]);
        second.clock.start_nanos += 50;
        second.clock.start_ticks = 50;
        // As read: the first chunk's settings (and attributes) still in force.
        (second.settings, second.attributes) = (first.settings.clone(), first.attributes.clone());
        recording_of(vec![first, second])
    }

    /// A chunk that writes no settings reads with those of the chunk
    /// before it (async-profiler writes its settings in the first chunk
    /// only), each setting's last value; a chunk with settings of its own
    /// (the JDK's, ours) inherits nothing.
    #[test]
    fn a_chunk_without_settings_reads_with_those_before_it() {
        let at = |ticks: i64, settings: &[(&str, &str)]| {
            let mut chunk = chunk(vec![sample("worker", 1, vec![java("app/Main", "work", 12)])], vec![]);
            chunk.settings = settings.iter().map(|&(n, v)| (n.to_owned(), v.to_owned())).collect();
            chunk.clock.start_ticks = ticks;
            chunk
        };
        let mut first = at(0, &[("interval", "1000000"), ("cstack", "fp"), ("interval", "4000000")]);
        first.settings.push(("attributes".to_owned(), "route".to_owned()));
        first.attributes = vec!["route".to_owned()];
        let chunks = vec![first, at(50, &[]), at(60, &[("interval", "2000000")])];
        let copy = read_back("jfr_out_settings", &rewrite(&recording_of(chunks), None));
        let settings = |i: usize| copy.chunks[i].settings.clone();
        let pairs = |list: &[(&str, &str)]| list.iter().map(|&(n, v)| (n.to_owned(), v.to_owned())).collect::<Vec<_>>();
        assert_eq!(settings(1), pairs(&[("interval", "4000000"), ("cstack", "fp"), ("attributes", "route")]));
        assert_eq!(copy.chunks[1].attributes, ["route"]);
        assert_eq!(settings(2), pairs(&[("interval", "2000000")]), "its own settings alone");
        assert!(copy.chunks[2].attributes.is_empty());
    }

    /// Settings carried into chunks without settings are bounded by the
    /// file's size: many settings, then many chunks without any, cannot
    /// multiply them.
    #[test]
    fn carried_settings_are_bounded_by_the_files_size() {
        let mut first = chunk(vec![], vec![]);
        first.settings = (0..2000).map(|i| (format!("setting-{i}"), "x".to_owned())).collect();
        let empty = |i: i64| {
            let mut empty = chunk(vec![], vec![]);
            empty.clock.start_ticks = i;
            empty
        };
        let chunks: Vec<_> = std::iter::once(first).chain((1..200).map(empty)).collect();
        let bytes = rewrite(&recording_of(chunks), None);
        let copy = read_back("jfr_out_carry_bound", &bytes);
        assert_eq!(copy.chunks.len(), 200);
        let carried: usize = copy.chunks[1..].iter().map(|c| c.settings.len()).sum();
        assert!(carried > 0 && carried <= bytes.len() / 8, "{carried} settings carried in {} bytes", bytes.len());
    }

    /// An unresolved remote frame as the copy writes it: an ordinary
    /// native frame of the library.
    fn unresolved(library: &str, offset: u64, kind: Option<FrameType>) -> Frame {
        Frame {
            class: library.to_owned(),
            method: format!("[{library}+{offset:#x}]"),
            descriptor: "()L;".to_owned(),
            modifiers: 0x100,
            line: NON_JAVA_POSITION,
            bci: NON_JAVA_POSITION,
            kind,
            build_id: None,
        }
    }

    fn assert_same_samples(copy: &SampleData, original: &SampleData) {
        let fields = |s: &SampleData| {
            (s.event, s.start_ticks, s.thread.clone(), s.state.clone(), s.weight, s.span_id, s.root_span_id)
        };
        assert_eq!(fields(copy), fields(original));
        assert_eq!((&copy.attributes, copy.truncated), (&original.attributes, original.truncated));
        // Remote frames come back as the native frames `[library+0xoffset]`,
        // which the reader looks up by the build-id of the listed library.
        let expected: Vec<Frame> = original
            .frames
            .iter()
            .map(|f| match f.remote() {
                Some((id, offset)) => {
                    Frame { build_id: Some(id.to_owned()), ..unresolved("libfoo.so", offset, NATIVE) }
                }
                None => f.clone(),
            })
            .collect();
        assert_eq!(copy.frames, expected);
    }

    #[test]
    fn without_a_resolver_the_copy_reads_back_as_the_original_but_for_remote_frames() {
        let original = original();
        let copy = read_back("jfr_out_identity", &rewrite(&original, None));
        assert_eq!(copy.chunks.len(), 2);
        for (copy, original) in copy.chunks.iter().zip(&original.chunks) {
            assert_eq!(copy.clock, original.clock);
            assert_eq!(copy.attributes, original.attributes);
            assert_eq!(copy.settings, original.settings);
            assert_eq!(copy.counters, original.counters);
            assert_eq!(copy.endpoints, original.endpoints);
            assert_eq!(copy.libraries, original.libraries);
            assert_eq!(copy.samples.len(), original.samples.len());
        }
        let data = |r: &Recording| r.samples().map(|s| r.data(s)).collect::<Vec<_>>();
        for (copy, original) in data(&copy).iter().zip(&data(&original)) {
            assert_same_samples(copy, original);
        }
    }

    #[test]
    fn resolved_remote_frames_become_named_native_frames() {
        let tree = scratch_dir("jfr_out_resolved_tree");
        link_in_build_id_tree(&tree, ID, &std::env::current_exe().unwrap());
        let mut resolver = Resolver::new(Locator::new(&[tree], &[], None).0);
        let address = known_function_address();
        let frames = vec![remote(ID, address), java("app/Main", "main", 3)];
        let original = recording(vec![sample("t", 1, frames)], vec![library("/opt/lib/libfoo.so", ID)]);
        let rewritten = rewrite_counting(&original, Some(&mut resolver));
        assert_eq!(rewritten.tiers, HashMap::from([(Tier::Dwarf, 1)]));
        assert!(rewritten.skipped.is_empty());
        let copy = read_back("jfr_out_resolved", &rewritten.bytes);
        let frames = &copy.data(&copy.chunks[0].samples[0]).frames;
        let named = &frames[frames.len() - 2];
        assert!(named.method.ends_with("known_function"), "{named:?}");
        // Named as async-profiler names native frames: the library as class.
        assert_eq!(
            (named.class.as_str(), named.descriptor.as_str(), named.kind, named.bci),
            ("libfoo.so", "()L;", NATIVE, NON_JAVA_POSITION)
        );
        assert!(named.line > 0, "{named:?}");
        assert!(named.remote().is_none() && named.is_native_code());
        // Inlined functions, if any, are native frames too.
        assert!(frames[..frames.len() - 1].iter().all(|f| f.kind == NATIVE && f.class == "libfoo.so"), "{frames:?}");
        assert_eq!(frames.last(), original.data(&original.chunks[0].samples[0]).frames.last());
    }

    /// A JDK-dialect recording: remote frames `[libjvm.so+0x..]` of class
    /// libjvm.so in the build-id's package, typed C++.
    fn jdk_dialect(chunks: usize) -> Recording {
        let mut parts = Vec::new();
        for i in 0..chunks {
            let frames = vec![remote_jdk("libjvm.so", ID, 0x5d7203 + i as u64), java("app/Main", "main", 3)];
            let mut cpu = sample("t", 1, frames.clone());
            cpu.event = "jdk.ExecutionSample";
            cpu.frames[0].kind = Some(FrameType::Cpp);
            let mut wall = sample("t", 4, frames);
            (wall.event, wall.kind, wall.state) =
                ("profiler.WallClockSample", EventKind::Wall, "STATE_SLEEPING".to_owned());
            // Events the copy does not carry (another writer's).
            let mut alloc = sample("t", 4096, vec![java("app/Main", "main", 3)]);
            (alloc.event, alloc.kind) = ("jdk.ObjectAllocationSample", EventKind::Alloc);
            let mut chunk = chunk(vec![cpu, wall, alloc], vec![]);
            chunk.settings = vec![("jfrdialect".to_owned(), "jdk".to_owned())];
            chunk.clock.start_ticks = 100 * i as i64;
            chunk.clock.start_nanos += 100 * i as i64;
            parts.push(chunk);
        }
        recording_of(parts)
    }

    #[test]
    fn unresolved_remote_frames_become_plain_native_frames_of_their_library() {
        let original = jdk_dialect(1);
        let rewritten = rewrite_counting(&original, None);
        assert_eq!(rewritten.skipped, BTreeMap::from([(EventKind::Alloc, 1)]));
        assert_eq!(rewritten.tiers, HashMap::from([(Tier::Unresolved, 2)]));
        let copy = read_back("jfr_out_unresolved_jdk", &rewritten.bytes);
        let samples: Vec<SampleData> = copy.chunks[0].samples.iter().map(|s| copy.data(s)).collect();
        assert_eq!(
            samples.iter().map(|s| (s.event, s.kind)).collect::<Vec<_>>(),
            [("jdk.ExecutionSample", EventKind::Cpu), ("profiler.WallClockSample", EventKind::Wall)]
        );
        // No build-id package: nothing left to resolve, nothing `<remote>`.
        assert_eq!(samples[0].frames[0], unresolved("libjvm.so", 0x5d7203, Some(FrameType::Cpp)));
        assert_eq!(samples[1].frames[0], unresolved("libjvm.so", 0x5d7203, NATIVE));
        assert!(samples.iter().flat_map(|s| &s.frames).all(|f| f.remote().is_none() && f.method != "<remote>"));
    }

    /// Splits a file into its chunks (the size is at offset 8 of each header).
    fn chunks_of(bytes: &[u8]) -> Vec<&[u8]> {
        let mut chunks = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            assert_eq!(&rest[..4], b"FLR\0");
            let size = u64::from_be_bytes(rest[8..16].try_into().unwrap()) as usize;
            let (chunk, tail) = rest.split_at(size);
            chunks.push(chunk);
            rest = tail;
        }
        chunks
    }

    #[test]
    fn the_copy_reads_the_same_whole_and_chunk_by_chunk() {
        let bytes = rewrite(&jdk_dialect(3), None);
        let whole = read_back("jfr_out_whole", &bytes);
        let parts = chunks_of(&bytes);
        assert_eq!(parts.len(), 3);
        let summary = |r: &Recording| -> Vec<_> {
            r.samples().map(|s| r.data(s)).map(|s| (s.event, s.start_ticks, s.thread, s.weight, s.frames)).collect()
        };
        let mut split = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            split.extend(summary(&read_back(&format!("jfr_out_part{i}"), part)));
        }
        assert_eq!(split, summary(&whole));
        assert_eq!(split.len(), 6);
        assert_eq!(split[4].4[0].method, "[libjvm.so+0x5d7205]");
    }

    /// Our native allocations (their stacks resolved like the others) and
    /// frees are copied, each free where the original had it among the
    /// samples: the copy's leaks are the original's.
    #[test]
    fn native_allocations_and_frees_survive_a_rewrite() {
        let frames = || vec![remote(ID, 0x1a2b), java("app/Main", "allocate", 3)];
        let mut ours = chunk(
            vec![
                malloc(10, 0xa, 64, frames()),
                malloc(20, 0xb, 128, frames()),
                // Freed at 20 before this allocation took the address again.
                malloc(20, 0xa, 32, frames()),
                SampleData { event: "jdk.ExecutionSample", ..sample("t", 1, vec![java("app/Main", "main", 1)]) },
            ],
            vec![library("/opt/lib/libfoo.so", ID)],
        );
        ours.settings =
            vec![("jfrdialect".to_owned(), "jdk".to_owned()), ("nativemem".to_owned(), "524288 bytes".to_owned())];
        ours.freed = vec![(20, 0xa, 2), (30, 0xb, 4)];
        let original = recording_of(vec![ours]);
        let rewritten = rewrite_counting(&original, None);
        assert!(rewritten.skipped.is_empty() && rewritten.skipped_frees == 0, "{:?}", rewritten.skipped);
        // One stack, its remote frame written once.
        assert_eq!(rewritten.tiers, HashMap::from([(Tier::Unresolved, 1)]));
        let copy = read_back("jfr_out_native_memory", &rewritten.bytes);
        let data = |r: &Recording| r.samples().map(|s| r.data(s)).collect::<Vec<_>>();
        for (copy, original) in data(&copy).iter().zip(&data(&original)) {
            assert_same_samples(copy, original);
            assert_eq!((copy.kind, copy.address, copy.size), (original.kind, original.address, original.size));
        }
        let frees = |r: &Recording| -> Vec<_> {
            r.chunks[0]
                .frees
                .iter()
                .map(|f| (f.start_ticks, f.address, f.after, r.threads[f.thread as usize].clone()))
                .collect()
        };
        assert_eq!(frees(&copy), frees(&original));
        let leaks = |mut r: Recording| {
            crate::leaks::keep_leaks(&mut r, 0.0);
            r.samples()
                .filter(|s| s.kind == EventKind::NativeMem)
                .map(|s| (s.start_ticks, s.address))
                .collect::<Vec<_>>()
        };
        assert_eq!(leaks(copy), [(20, 0xa)]);
        assert_eq!(leaks(original), [(20, 0xa)]);
    }

    /// A Datadog native allocation keeps the bytes it stands for; that
    /// dialect has no free event (nor has another writer's copy): counted.
    #[test]
    fn frees_the_copy_cannot_carry_are_counted() {
        let datadog = SampleData {
            event: jfr_writer::schema::names::DATADOG_NATIVE_ALLOCATION,
            weight: 16 * 32_768,
            ..malloc(10, 0xa, 16, vec![native("malloc")])
        };
        let mut ours = chunk(vec![datadog.clone()], vec![]);
        ours.settings = vec![("jfrdialect".to_owned(), "datadog".to_owned())];
        ours.freed = vec![(20, 0xa, 1)];
        let mut theirs = chunk(vec![malloc(10, 0xa, 16, vec![native("malloc")])], vec![]);
        theirs.freed = vec![(20, 0xa, 1)];
        theirs.clock.start_ticks = 100;
        let rewritten = rewrite_counting(&recording_of(vec![ours, theirs]), None);
        assert_eq!((rewritten.skipped, rewritten.skipped_frees), (BTreeMap::from([(EventKind::NativeMem, 1)]), 2));
        let copy = read_back("jfr_out_datadog_native_memory", &rewritten.bytes);
        let copied: Vec<SampleData> = copy.samples().map(|s| copy.data(s)).collect();
        assert_eq!(copied.len(), 1);
        assert_same_samples(&copied[0], &datadog);
        assert_eq!((copied[0].address, copied[0].size), (0xa, 16));
        assert!(copy.chunks.iter().all(|c| c.frees.is_empty()));
    }

    #[test]
    fn library_entries_survive_with_and_without_build_ids() {
        let mut anonymous = library("/opt/lib/libbar.so", ID);
        anonymous.build_id = None;
        let original = recording(vec![], vec![library("/opt/lib/libfoo.so", ID), anonymous]);
        let copy = read_back("jfr_out_libraries", &rewrite(&original, None));
        let libraries: &Vec<Library> = &copy.chunks[0].libraries;
        assert_eq!(libraries, &original.chunks[0].libraries);
    }
}
