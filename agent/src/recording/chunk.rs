//! One JFR chunk in the making: samples are encoded as they are drained;
//! constant pools are built at the end, for exactly the stack traces and
//! threads the chunk's events reference.

use super::methods::{MethodInfo, MethodSource};
use crate::libraries::marks::Mark;
use crate::libraries::LibraryTable;
use crate::sampling::asgct::CallTraceError;
use crate::sampling::remote::RemoteFrame;
use crate::storage::call_traces::TraceId;
use crate::storage::trace_storage::CallTraceStorage;
use crate::storage::frame::{Frame, FrameKind, BCI_NATIVE_METHOD};
use crate::storage::samples::SampleRecord;
use crate::threads::ThreadInfo;
use jfr_writer::{
    schema, ActiveSetting, ChunkClock, ChunkEnd, ChunkWriter, ConstantPools, ExecutionSample, FrameDef, FrameType,
    MethodDef, NativeLibrary, ProfilerCounter, ThreadDef, ThreadState,
};
use std::collections::{HashMap, HashSet};

/// Event timestamps are microseconds since the chunk started.
const TICKS_PER_SECOND: i64 = 1_000_000;
const ACC_NATIVE: i32 = 0x100;
/// Pool keys for frames that are not Java methods: above any jmethodID.
const SYNTHETIC_METHOD_KEY: u64 = 1 << 63;
const NATIVE_METHOD_KEY: u64 = 1 << 62;
/// Packed remote frames have their two top bits clear.
const REMOTE_METHOD_KEY: u64 = 3 << 62;

pub struct ChunkBuilder {
    writer: ChunkWriter,
    start_mono_ns: u64,
    traces: HashSet<u32>,
    threads: HashSet<u64>,
}

/// What a finished chunk needs from the rest of the agent.
pub struct ChunkSources<'a> {
    pub traces: &'a CallTraceStorage,
    pub methods: &'a mut dyn MethodSource,
    /// Native libraries, for native frames and `jdk.NativeLibrary` events.
    pub libraries: Option<&'a LibraryTable>,
    pub thread: &'a dyn Fn(u64) -> Option<ThreadInfo>,
    pub counters: &'a [(&'static str, u64)],
}

impl ChunkBuilder {
    /// A chunk starting at `start_mono_ns` (CLOCK_MONOTONIC), which is
    /// `start_epoch_ns` in wall-clock time, opening with the settings.
    pub fn new(start_mono_ns: u64, start_epoch_ns: i64, settings: &[(String, String)]) -> Self {
        let clock = ChunkClock { start_nanos: start_epoch_ns, start_ticks: 0, ticks_per_second: TICKS_PER_SECOND };
        let mut writer = ChunkWriter::new(clock);
        for (name, value) in settings {
            writer.write(&ActiveSetting { start_ticks: 0, event_type: schema::id::EXECUTION_SAMPLE, name, value });
        }
        Self { writer, start_mono_ns, traces: HashSet::new(), threads: HashSet::new() }
    }

    fn ticks(&self, mono_ns: u64) -> i64 {
        (mono_ns as i64 - self.start_mono_ns as i64) / (1_000_000_000 / TICKS_PER_SECOND)
    }

    pub fn event_bytes(&self) -> usize {
        self.writer.event_bytes()
    }

    pub fn sample_count(&self) -> u64 {
        self.writer.event_count()
    }

    /// Encodes CPU samples; `thread_key` maps a kernel tid to its pool key.
    pub fn add_samples(&mut self, records: &[SampleRecord], mut thread_key: impl FnMut(u32) -> u64) {
        for record in records {
            let thread = thread_key(record.tid);
            self.threads.insert(thread);
            self.traces.insert(record.trace);
            let event = ExecutionSample {
                start_ticks: self.ticks(record.time_ns),
                thread,
                stack_trace: u64::from(record.trace),
                state: ThreadState::from_u8(record.state),
                weight: u64::from(record.weight),
            };
            self.writer.write(&event);
        }
    }

    /// Writes counters, the constant pools and the metadata.
    pub fn finish(mut self, sources: ChunkSources<'_>, end_mono_ns: u64, final_chunk: bool) -> Vec<u8> {
        let end_ticks = self.ticks(end_mono_ns);
        for &(name, count) in sources.counters {
            self.writer.write(&ProfilerCounter { start_ticks: end_ticks, name, count: count as i64 });
        }
        if let Some(libraries) = sources.libraries {
            for library in libraries.libraries() {
                let build_id = library.build_id.as_ref().map(|b| b.to_hex());
                self.writer.write(&NativeLibrary {
                    start_ticks: end_ticks,
                    name: &library.path,
                    base_address: library.image.start,
                    top_address: library.image.end,
                    build_id: build_id.as_deref(),
                    load_bias: library.bias,
                });
            }
        }
        let mut pools = ConstantPools::new();
        self.write_threads(&mut pools, sources.thread);
        let mut natives = NativeNames { libraries: sources.libraries, resolved: HashMap::new() };
        self.write_traces(&mut pools, sources.traces, sources.methods, &mut natives);
        let duration_nanos = end_mono_ns.saturating_sub(self.start_mono_ns) as i64;
        self.writer.finish(&pools, ChunkEnd { duration_nanos, final_chunk })
    }

    fn write_threads(&self, pools: &mut ConstantPools, thread: &dyn Fn(u64) -> Option<ThreadInfo>) {
        for &key in &self.threads {
            let info = thread(key);
            let os_name = info.as_ref().map_or("[unknown thread]", |i| i.os_name.as_str());
            pools.thread(
                key,
                &ThreadDef {
                    os_name,
                    os_thread_id: info.as_ref().map_or(0, |i| i64::from(i.tid)),
                    java_name: info.as_ref().map(|i| i.java_name.as_deref().unwrap_or(&i.os_name)),
                    java_thread_id: info.as_ref().map_or(0, |i| i.java_id),
                },
            );
        }
    }

    fn write_traces(
        &self,
        pools: &mut ConstantPools,
        table: &CallTraceStorage,
        methods: &mut dyn MethodSource,
        natives: &mut NativeNames<'_>,
    ) {
        let mut stored: HashMap<u32, (bool, Vec<Frame>)> = HashMap::new();
        table.for_each_live(|t| {
            if self.traces.contains(&t.id.0) {
                stored.insert(t.id.0, (t.truncated, t.frames.to_vec()));
            }
        });
        let mut frames = Vec::new();
        for &id in &self.traces {
            frames.clear();
            let truncated = match stored.get(&id) {
                Some((truncated, stack)) => {
                    frames.extend(stack.iter().map(|f| frame_def(pools, methods, natives, f)));
                    *truncated
                }
                None => {
                    // The dropped id, or a trace still being published.
                    let reason = if id == TraceId::DROPPED.0 { "[storage_full]" } else { "[trace_unavailable]" };
                    frames.push(FrameDef {
                        method: synthetic(pools, reason),
                        line: -1,
                        bci: -1,
                        frame_type: FrameType::Native,
                    });
                    false
                }
            };
            pools.stack_trace(u64::from(id), truncated, &frames);
        }
    }
}

/// A pseudo-method standing for a frame that is not a Java method.
fn synthetic(pools: &mut ConstantPools, name: &str) -> jfr_writer::MethodId {
    pools.method(SYNTHETIC_METHOD_KEY | u64::from(name_hash(name)), |p| MethodDef {
        class: p.class("", 0),
        name: p.symbol(name),
        descriptor: p.symbol("()L;"),
        modifiers: 0,
        hidden: false,
    })
}

fn name_hash(name: &str) -> u32 {
    name.bytes().fold(2_166_136_261u32, |h, b| (h ^ u32::from(b)).wrapping_mul(16_777_619))
}

fn java_method(pools: &mut ConstantPools, id: u64, info: &MethodInfo) -> jfr_writer::MethodId {
    pools.method(id, |p| MethodDef {
        class: p.class(&info.class_name, info.class_modifiers),
        name: p.symbol(&info.name),
        descriptor: p.symbol(&info.signature),
        modifiers: info.modifiers,
        hidden: false,
    })
}

/// Names of native frames, by attribution address, resolved once per chunk.
struct NativeNames<'a> {
    libraries: Option<&'a LibraryTable>,
    resolved: HashMap<u64, (String, FrameType)>,
}

impl NativeNames<'_> {
    fn resolve(&mut self, address: u64) -> &(String, FrameType) {
        let libraries = self.libraries;
        self.resolved.entry(address).or_insert_with(|| match libraries.and_then(|t| t.library_at(address)) {
            Some(library) => {
                let frame_type = if library.is_jvm { FrameType::Cpp } else { FrameType::Native };
                (library.describe(address), frame_type)
            }
            None => (format!("[unknown+{address:#x}]"), FrameType::Native),
        })
    }
}

fn native_method(pools: &mut ConstantPools, name: &str) -> jfr_writer::MethodId {
    pools.method(NATIVE_METHOD_KEY | name_hash64(name), |p| MethodDef {
        class: p.class("", 0),
        name: p.symbol(name),
        descriptor: p.symbol("()L;"),
        modifiers: ACC_NATIVE,
        hidden: false,
    })
}

/// A remote frame: class = the library's build-id, name = `<remote>`,
/// descriptor = the pc offset in hex (the remote-symbolication contract).
fn remote_method(pools: &mut ConstantPools, build_id: &str, remote: RemoteFrame) -> jfr_writer::MethodId {
    let identity = RemoteFrame { mark: Mark::None, ..remote }.pack().unwrap_or(0);
    pools.method(REMOTE_METHOD_KEY | identity, |p| MethodDef {
        class: p.class(build_id, 0),
        name: p.symbol("<remote>"),
        descriptor: p.symbol(&format!("{:#x}", remote.offset)),
        modifiers: ACC_NATIVE,
        hidden: false,
    })
}

fn name_hash64(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)) >> 2
}

fn frame_def(
    pools: &mut ConstantPools,
    methods: &mut dyn MethodSource,
    natives: &mut NativeNames<'_>,
    frame: &Frame,
) -> FrameDef {
    match frame.kind {
        FrameKind::Native => {
            let (name, frame_type) = natives.resolve(frame.method).clone();
            FrameDef { method: native_method(pools, &name), line: -1, bci: -1, frame_type }
        }
        FrameKind::RemoteNative => {
            let remote = RemoteFrame::unpack(frame.method);
            let build_id =
                natives.libraries.and_then(|t| t.by_index(remote.lib_index)).and_then(|l| l.build_id.clone());
            let method = match build_id {
                Some(build_id) => remote_method(pools, &build_id.to_hex(), remote),
                None => synthetic(pools, "[unknown_library]"),
            };
            FrameDef { method, line: -1, bci: -1, frame_type: FrameType::RemoteNative }
        }
        FrameKind::Java => match methods.method(frame.method) {
            Some(info) => {
                let native = frame.bci == BCI_NATIVE_METHOD || info.modifiers & ACC_NATIVE != 0;
                FrameDef {
                    method: java_method(pools, frame.method, info),
                    line: if native { -1 } else { info.line_of(frame.bci) },
                    bci: if native { -1 } else { frame.bci },
                    // AsyncGetCallTrace does not say whether a frame is
                    // interpreted or compiled; like async-profiler we call
                    // Java frames JIT compiled.
                    frame_type: if native { FrameType::Native } else { FrameType::JitCompiled },
                }
            }
            None => FrameDef {
                method: synthetic(pools, "[unknown_Java_method]"),
                line: -1,
                bci: frame.bci,
                frame_type: FrameType::JitCompiled,
            },
        },
        FrameKind::Error => {
            let error = CallTraceError::from_code(frame.method as i64);
            FrameDef { method: synthetic(pools, error.frame_name()), line: -1, bci: -1, frame_type: FrameType::Native }
        }
    }
}
