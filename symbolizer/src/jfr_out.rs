//! A copy of a recording in which remote frames are replaced by named
//! native frames (their inline chains expanded), so JDK Mission Control
//! and other JFR tools show function names. Everything else is carried
//! over chunk by chunk with the original clocks (CPU and wall-clock
//! samples, endpoints, settings, libraries, counters) in the dialect the
//! recording was written in; remote frames that could not be resolved stay
//! as they were. Pool keys mean one thing in every chunk of the copy
//! (see `jfr_writer::pools`).

use crate::recording::{Chunk, Frame, Recording, Sample, Thread};
use crate::resolve::{Resolution, Resolver};
use frames::{FrameType, NON_JAVA_DESCRIPTOR};
use jfr_writer::{
    schema, ActiveSetting, ChunkClock, ChunkEnd, ChunkWriter, ConstantPools, Dialect, Endpoint, FrameDef, MethodDef,
    NativeLibrary, ProfilerCounter, Sample as SampleEvent, SampleKind, ThreadDef, ThreadState,
};
use std::collections::{HashMap, HashSet};

const ACC_NATIVE: i32 = 0x100;

fn thread_state(name: &str) -> ThreadState {
    ThreadState::ALL.into_iter().find(|s| s.name() == name).unwrap_or(ThreadState::Unknown)
}

/// A stack trace's identity: truncation, then (method, line, bci, type) per frame.
type TraceKey = (bool, Vec<(jfr_writer::MethodId, i32, i32, u8)>);

/// The wall-clock sample events of both dialects.
const WALL_EVENTS: [&str; 2] = ["profiler.WallClockSample", "datadog.MethodSample"];

/// The copy's pools and the keys it gave threads, stack traces, strings
/// and attribute values: one set for the whole file.
struct Rewriter<'r> {
    pools: ConstantPools,
    /// Keys are per chunk: see [`ConstantPools::method`].
    methods: HashMap<(String, String, String, i32), jfr_writer::MethodId>,
    threads: HashMap<Thread, u64>,
    traces: HashMap<TraceKey, u64>,
    /// The stack traces the current chunk's pool holds.
    chunk_traces: HashSet<u64>,
    values: HashMap<String, u64>,
    labels: HashMap<String, u64>,
    resolver: Option<&'r mut Resolver>,
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
        let resolution = match (frame.remote(), self.resolver.as_deref_mut()) {
            (Some((build_id, offset)), Some(resolver)) => Some(resolver.resolve(build_id, offset)),
            _ => None,
        };
        match resolution {
            Some(Resolution::Frames(chain)) => {
                let last = chain.len() - 1;
                for (i, f) in chain.iter().enumerate() {
                    let method = self.method("", &f.function, NON_JAVA_DESCRIPTOR, ACC_NATIVE);
                    let frame_type = if i < last { FrameType::Inlined } else { FrameType::Native };
                    out.push(FrameDef { method, line: f.line.map_or(-1, |l| l as i32), bci: -1, frame_type });
                }
            }
            Some(Resolution::NameOnly(name)) => {
                let method = self.method("", &name, NON_JAVA_DESCRIPTOR, ACC_NATIVE);
                out.push(FrameDef { method, line: -1, bci: -1, frame_type: FrameType::Native });
            }
            Some(Resolution::Unresolved(_)) | None => {
                let method = self.method(&frame.class, &frame.method, &frame.descriptor, frame.modifiers);
                // A type we never write is carried over as JIT compiled.
                let frame_type = frame.kind.unwrap_or(FrameType::JitCompiled);
                out.push(FrameDef { method, line: frame.line, bci: frame.bci, frame_type });
            }
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

    fn trace(&mut self, sample: &Sample) -> u64 {
        let mut frames = Vec::with_capacity(sample.frames.len());
        for frame in &sample.frames {
            self.frames(frame, &mut frames);
        }
        let key = (
            sample.truncated,
            frames.iter().map(|f| (f.method, f.line, f.bci, f.frame_type as u8)).collect::<Vec<_>>(),
        );
        let next = self.traces.len() as u64 + 1;
        let id = *self.traces.entry(key).or_insert(next);
        if self.chunk_traces.insert(id) {
            self.pools.stack_trace(id, sample.truncated, &frames);
        }
        id
    }

    fn write_chunk(&mut self, chunk: &Chunk, final_chunk: bool) -> Vec<u8> {
        let clock = ChunkClock {
            start_nanos: chunk.clock.start_nanos,
            start_ticks: chunk.clock.start_ticks,
            ticks_per_second: chunk.clock.ticks_per_second,
        };
        let start = chunk.clock.start_ticks;
        let dialect = dialect(chunk);
        let mut writer = ChunkWriter::new(clock, dialect.unwrap_or_default());
        self.methods.clear();
        self.chunk_traces.clear();
        for (name, value) in &chunk.settings {
            writer.write(&ActiveSetting { start_ticks: start, event_type: schema::id::EXECUTION_SAMPLE, name, value });
        }
        // The profiler's own sample events (a JDK recording's are not copied).
        let samples = chunk.samples.iter().filter(|_| dialect.is_some());
        let mut threads: HashMap<u64, &Thread> = HashMap::new();
        let mut values: HashMap<u64, &str> = HashMap::new();
        for sample in samples {
            let context: Vec<u64> = sample
                .attributes
                .iter()
                .map(|value| match value {
                    Some(text) => {
                        let key = intern(&mut self.values, text);
                        values.insert(key, text);
                        key
                    }
                    None => 0,
                })
                .collect();
            let thread = self.thread(&sample.thread);
            threads.insert(thread, &sample.thread);
            writer.sample(&SampleEvent {
                kind: if WALL_EVENTS.contains(&sample.event.as_str()) { SampleKind::Wall } else { SampleKind::Cpu },
                start_ticks: sample.start_ticks,
                thread,
                stack_trace: self.trace(sample),
                state: thread_state(&sample.state),
                weight: sample.weight,
                span_id: sample.span_id,
                local_root_span_id: sample.root_span_id,
                context: &context,
            });
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

/// The rewritten recording, all chunks concatenated.
pub fn rewrite(recording: &Recording, resolver: Option<&mut Resolver>) -> Vec<u8> {
    let mut rewriter = Rewriter {
        pools: ConstantPools::new(),
        methods: HashMap::new(),
        threads: HashMap::new(),
        traces: HashMap::new(),
        chunk_traces: HashSet::new(),
        values: HashMap::new(),
        labels: HashMap::new(),
        resolver,
    };
    let mut out = Vec::new();
    let last = recording.chunks.len().saturating_sub(1);
    for (i, chunk) in recording.chunks.iter().enumerate() {
        out.extend(rewriter.write_chunk(chunk, i == last));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::debuginfo::Locator;
    use crate::recording::{Endpoint as EndpointEvent, NativeLibrary as Library};
    use crate::testing::*;

    const ID: &str = "abcdef0123456789abcdef0123456789abcdef01";

    fn read_back(test: &str, bytes: &[u8]) -> Recording {
        let path = scratch_dir(test).join("copy.jfr");
        std::fs::write(&path, bytes).unwrap();
        let outcome = crate::recording::read(&path).unwrap();
        assert!(outcome.error.is_none(), "{:?}", outcome.error);
        outcome.recording
    }

    /// Two chunks with every event kind the copy carries; the first has
    /// context attributes, a wall-clock sample and a remote frame.
    fn original() -> Recording {
        let mut wall = sample("sleeper", 3, vec![native("epoll_wait"), java("app/Main", "idle", 40)]);
        wall.event = "datadog.MethodSample".to_owned();
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
        let mut second = chunk(vec![sample("worker", 2, vec![java("app/Main", "work", 13)])], vec![]);
        second.clock.start_nanos += 50;
        second.clock.start_ticks = 50;
        Recording { chunks: vec![first, second] }
    }

    fn assert_same_samples(copy: &Sample, original: &Sample) {
        let fields = |s: &Sample| {
            (s.event.clone(), s.start_ticks, s.thread.clone(), s.state.clone(), s.weight, s.span_id, s.root_span_id)
        };
        assert_eq!(fields(copy), fields(original));
        assert_eq!((&copy.attributes, copy.truncated), (&original.attributes, original.truncated));
        assert_eq!(copy.frames, original.frames);
    }

    #[test]
    fn without_a_resolver_the_copy_reads_back_as_the_original() {
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
            for (copy, original) in copy.samples.iter().zip(&original.samples) {
                assert_same_samples(copy, original);
            }
        }
    }

    #[test]
    fn resolved_remote_frames_become_named_native_frames() {
        let tree = scratch_dir("jfr_out_resolved_tree");
        link_in_build_id_tree(&tree, ID, &std::env::current_exe().unwrap());
        let mut resolver = Resolver::new(Locator::new(&[tree], &[], None).0);
        let address = known_function_address();
        let original = recording(vec![sample("t", 1, vec![remote(ID, address), java("app/Main", "main", 3)])], vec![]);
        let copy = read_back("jfr_out_resolved", &rewrite(&original, Some(&mut resolver)));
        let frames = &copy.chunks[0].samples[0].frames;
        let named = &frames[frames.len() - 2];
        assert!(named.method.ends_with("known_function"), "{named:?}");
        assert_eq!((named.class.as_str(), named.kind, named.bci), ("", NATIVE, -1));
        assert!(named.line > 0, "{named:?}");
        assert!(named.remote().is_none());
        assert_eq!(frames.last(), original.chunks[0].samples[0].frames.last());
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
