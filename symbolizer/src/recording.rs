//! Reading recordings (ours in either dialect, async-profiler's, the
//! JDK's) with the bounded reader [`crate::jfr_in`] into plain data: per
//! chunk, its clock, its sample events of every kind ([`EventKind`]) with
//! full stacks and weights, its endpoints, settings and counters, and the
//! native libraries it lists. A chunk is read whole or not at all: a
//! damaged one is left out and described ([`Damage`]); a file without one
//! complete chunk is not a recording ([`ReadError::NotARecording`]).

use crate::events::{event_type, java_class_name, EventKind, EventType, Weight};
use crate::jfr_in::{self, Accessor, Split};
use frames::{FrameType, NON_JAVA_DESCRIPTOR, REMOTE_METHOD_NAME};
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read {path}: {source}")]
    Open { path: String, source: std::io::Error },
    #[error("{path} is not a readable JFR recording: {message}")]
    NotARecording { path: String, message: String },
}

/// A chunk left out of the read, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// Its index in the file (the first is 0).
    pub chunk: usize,
    /// Where it begins in the file.
    pub offset: u64,
    pub message: String,
    /// Whether the read stopped there: nothing after it can be found.
    pub last: bool,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "chunk {} (at byte {}): {}", self.chunk, self.offset, self.message)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    /// Internal class name (`java/lang/String`); empty for native frames;
    /// the build-id for remote frames.
    pub class: String,
    pub method: String,
    pub descriptor: String,
    pub modifiers: i32,
    pub line: i32,
    pub bci: i32,
    /// `None` for a type we never write (another writer's).
    pub kind: Option<FrameType>,
    /// The package of the frame's class when it is a library's build-id:
    /// a remote frame in the JDK dialect.
    pub build_id: Option<String>,
}

impl Frame {
    /// A remote-symbolication frame's build-id and pc offset: in the
    /// Datadog dialect, class = build-id, name `<remote>`, descriptor =
    /// offset; in the JDK dialect, name `[library+0xoffset]` of class
    /// `library` in the build-id's package.
    pub fn remote(&self) -> Option<(&str, u64)> {
        let hex = |text: &str| u64::from_str_radix(text.strip_prefix("0x")?, 16).ok();
        if self.method == REMOTE_METHOD_NAME {
            return Some((&self.class, hex(&self.descriptor)?));
        }
        let build_id = self.build_id.as_deref()?;
        let offset = self.method.strip_prefix('[')?.strip_suffix(']')?.strip_prefix(self.class.as_str())?;
        Some((build_id, hex(offset.strip_prefix('+')?)?))
    }

    /// Whether the frame is native code (C, C++, the kernel) rather than a
    /// Java method: its class, if any, is the library's file name. A Java
    /// `native` method is a Native frame too, but it has a Java class and
    /// descriptor; native code has [`NON_JAVA_DESCRIPTOR`] (`(Lk;)L;` for
    /// async-profiler's kernel frames), which no Java method has.
    pub fn is_native_code(&self) -> bool {
        let non_java = self.descriptor.strip_suffix(&NON_JAVA_DESCRIPTOR[1..]).is_some_and(|d| d.starts_with('('));
        matches!(self.kind, Some(FrameType::Cpp | FrameType::Kernel | FrameType::RemoteNative))
            || self.class.is_empty()
            || non_java
    }

    /// `com.example.Foo.bar` for Java frames, the symbol for native ones
    /// (as async-profiler's converter names them).
    pub fn display_name(&self) -> String {
        if self.is_native_code() {
            self.method.clone()
        } else {
            format!("{}.{}", self.class.replace('/', "."), self.method)
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Thread {
    pub os_name: String,
    pub os_id: i64,
    pub java_name: Option<String>,
    pub java_id: i64,
}

impl Thread {
    pub fn name(&self) -> &str {
        self.java_name.as_deref().unwrap_or(&self.os_name)
    }
}

/// The class that ends an allocation's or a lock wait's stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassLeaf {
    /// As Java source names it (`byte[]`, `java.lang.Object`).
    pub class: String,
    /// How async-profiler colours it: inlined for a TLAB allocation and a
    /// lock's class, kernel for an allocation outside a TLAB.
    pub kind: FrameType,
}

#[derive(Clone, Debug)]
pub struct Sample {
    pub event: String,
    pub kind: EventKind,
    pub start_ticks: i64,
    pub thread: Thread,
    pub state: String,
    /// In the kind's unit: intervals, bytes or nanoseconds.
    pub weight: u64,
    pub leaf: Option<ClassLeaf>,
    pub span_id: u64,
    pub root_span_id: u64,
    /// Values of the chunk's context attributes, in order.
    pub attributes: Vec<Option<String>>,
    pub truncated: bool,
    /// Innermost first.
    pub frames: Vec<Frame>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NativeLibrary {
    pub name: String,
    pub base_address: u64,
    pub top_address: u64,
    pub build_id: Option<String>,
    pub load_bias: u64,
}

/// A `jvmprofiler.Endpoint` (`datadog.Endpoint`) event: the endpoint a trace root served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub start_ticks: i64,
    pub thread: Thread,
    pub endpoint: String,
    pub operation: String,
    pub root_span_id: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock {
    pub start_nanos: i64,
    pub start_ticks: i64,
    pub ticks_per_second: i64,
    pub duration_nanos: i64,
}

#[derive(Clone, Debug)]
pub struct Chunk {
    pub clock: Clock,
    /// Context attribute names (the `attributes` setting).
    pub attributes: Vec<String>,
    pub samples: Vec<Sample>,
    pub endpoints: Vec<Endpoint>,
    pub settings: Vec<(String, String)>,
    pub counters: Vec<(String, i64)>,
    pub libraries: Vec<NativeLibrary>,
}

#[derive(Debug, Default)]
pub struct Recording {
    pub chunks: Vec<Chunk>,
}

impl Recording {
    /// Samples of every kind.
    pub fn samples(&self) -> impl Iterator<Item = &Sample> {
        self.chunks.iter().flat_map(|c| c.samples.iter())
    }

    /// The kinds of samples the recording has: for each, the number of
    /// events and their total weight.
    pub fn kinds(&self) -> std::collections::BTreeMap<EventKind, (u64, u64)> {
        let mut kinds = std::collections::BTreeMap::new();
        for sample in self.samples() {
            let (events, weight): &mut (u64, u64) = kinds.entry(sample.kind).or_default();
            *events += 1;
            *weight += sample.weight;
        }
        kinds
    }

    pub fn libraries(&self) -> impl Iterator<Item = &NativeLibrary> {
        self.chunks.iter().flat_map(|c| c.libraries.iter())
    }
}

/// The result of reading: what could be read (at least one chunk), and
/// the chunks that could not.
#[derive(Debug)]
pub struct ReadOutcome {
    pub recording: Recording,
    pub damage: Vec<Damage>,
}

/// A string field, also when it is a pooled simple type wrapping one
/// string (`jdk.types.Symbol`, `jdk.types.FrameType`,
/// `profiler.types.AttributeValue`, ...): at most a few wrappers deep, as
/// a damaged pool may wrap a value in itself.
fn string(accessor: Option<Accessor<'_>>) -> Option<String> {
    fn unwrap(accessor: Option<Accessor<'_>>, depth: usize) -> Option<String> {
        let value = accessor?.resolve()?;
        if let Some(s) = value.as_str() {
            return Some(s.to_owned());
        }
        if depth >= 4 {
            return None;
        }
        ["string", "description", "name", "value"]
            .iter()
            .find_map(|field| value.get_field(field))
            .and_then(|inner| unwrap(Some(inner), depth + 1))
    }
    unwrap(accessor, 0)
}

fn long(accessor: Option<Accessor<'_>>) -> Option<i64> {
    accessor?.as_long()
}

fn boolean(accessor: Option<Accessor<'_>>) -> bool {
    accessor.and_then(|a| a.as_bool()) == Some(true)
}

fn frame(frame: Accessor<'_>) -> Frame {
    let method = frame.get_field("method").and_then(Accessor::resolve);
    let field = |name: &str| method.as_ref().and_then(|m| m.get_field(name));
    let class_type = field("type").and_then(Accessor::resolve);
    let class = class_type.as_ref().and_then(|t| string(t.get_field("name"))).unwrap_or_default();
    let package = string(class_type.and_then(|t| t.get_field("package")));
    let kind = string(frame.get_field("type")).and_then(|d| FrameType::from_description(&d));
    // Only a native frame's package can be a build-id (Java packages hold '/' or are words).
    let native = matches!(kind, Some(FrameType::Native | FrameType::Cpp));
    let build_id =
        package.filter(|p| native && !p.is_empty() && p.len() % 2 == 0 && p.bytes().all(|b| b.is_ascii_hexdigit()));
    Frame {
        class,
        method: string(field("name")).unwrap_or_else(|| "[unknown]".to_owned()),
        descriptor: string(field("descriptor")).unwrap_or_default(),
        modifiers: long(field("modifiers")).unwrap_or(0) as i32,
        line: long(frame.get_field("lineNumber")).unwrap_or(-1) as i32,
        bci: long(frame.get_field("bytecodeIndex")).unwrap_or(-1) as i32,
        kind,
        build_id,
    }
}

fn thread(event: &Accessor<'_>) -> Thread {
    let Some(t) =
        event.get_field("eventThread").or_else(|| event.get_field("sampledThread")).and_then(Accessor::resolve)
    else {
        return Thread { os_name: "[unknown thread]".to_owned(), ..Thread::default() };
    };
    Thread {
        os_name: string(t.get_field("osName")).unwrap_or_default(),
        os_id: long(t.get_field("osThreadId")).unwrap_or(0),
        java_name: string(t.get_field("javaName")),
        java_id: long(t.get_field("javaThreadId")).unwrap_or(0),
    }
}

/// An event's weight in its kind's unit.
fn weight(event_type: &EventType, event: &Accessor<'_>, clock: &Clock) -> u64 {
    match event_type.weight {
        Weight::Intervals(fields) => fields.iter().find_map(|f| long(event.get_field(f))).unwrap_or(1).max(1) as u64,
        Weight::Bytes(field) => long(event.get_field(field)).unwrap_or(0).max(0) as u64,
        Weight::ScaledBytes { size, objects } => {
            let size = long(event.get_field(size)).unwrap_or(0).max(0) as f64;
            let objects = event.get_field(objects).and_then(|a| a.as_float()).unwrap_or(1.0).max(0.0);
            (size * objects).round() as u64
        }
        Weight::Duration => ticks_to_nanos(long(event.get_field("duration")).unwrap_or(0), clock.ticks_per_second),
    }
}

/// A duration in a chunk's ticks, in nanoseconds (0 for a negative one).
pub fn ticks_to_nanos(ticks: i64, ticks_per_second: i64) -> u64 {
    let ticks = ticks.max(0) as u128;
    let per_second = ticks_per_second.max(1) as u128;
    u64::try_from(ticks * 1_000_000_000 / per_second).unwrap_or(u64::MAX)
}

/// The class ending an allocation's or lock wait's stack.
fn leaf(event_type: &EventType, event: &Accessor<'_>) -> Option<ClassLeaf> {
    let (field, kind) = event_type.class_field?;
    let class = event.get_field(field).and_then(Accessor::resolve);
    let name = string(class.and_then(|c| c.get_field("name")))?;
    Some(ClassLeaf { class: java_class_name(&name), kind })
}

fn sample(event_type: &EventType, event: Accessor<'_>, chunk: &Chunk) -> Sample {
    let stack = event.get_field("stackTrace").and_then(Accessor::resolve);
    let mut sample = Sample {
        event: event_type.name.to_owned(),
        kind: event_type.kind,
        start_ticks: long(event.get_field("startTime")).unwrap_or(0),
        thread: thread(&event),
        state: string(event.get_field("state")).unwrap_or_default(),
        weight: weight(event_type, &event, &chunk.clock),
        leaf: leaf(event_type, &event),
        span_id: 0,
        root_span_id: 0,
        attributes: Vec::new(),
        truncated: boolean(stack.as_ref().and_then(|s| s.get_field("truncated"))),
        frames: stack
            .and_then(|s| s.get_field("frames"))
            .and_then(Accessor::as_iter)
            .map(|frames| frames.map(frame).collect())
            .unwrap_or_default(),
    };
    set_context(&mut sample, &event, &chunk.attributes);
    sample
}

/// A sample's trace context, from the sample (Datadog dialect) or the
/// `jvmprofiler.SampleContext` that follows it (JDK dialect).
fn set_context(sample: &mut Sample, event: &Accessor<'_>, attributes: &[String]) {
    sample.span_id = long(event.get_field("spanId")).unwrap_or(0) as u64;
    sample.root_span_id = long(event.get_field("localRootSpanId")).unwrap_or(0) as u64;
    sample.attributes = attributes.iter().map(|a| string(event.get_field(a))).collect();
}

/// Reads the recording at `path`.
pub fn read(path: &Path) -> Result<ReadOutcome, ReadError> {
    let display = path.display().to_string();
    let file = std::fs::read(path).map_err(|source| ReadError::Open { path: display.clone(), source })?;
    read_bytes(&file, &display)
}

/// Reads a recording held in memory; `display` names it in errors.
pub fn read_bytes(file: &[u8], display: &str) -> Result<ReadOutcome, ReadError> {
    let not_a_recording = |message: String| ReadError::NotARecording { path: display.to_owned(), message };
    if file.is_empty() {
        return Err(not_a_recording("the file is empty".to_owned()));
    }
    let mut recording = Recording::default();
    let mut damage = Vec::new();
    let mut offset = 0;
    while offset < file.len() {
        let index = recording.chunks.len() + damage.len();
        let damaged = |message: String, last: bool| Damage { chunk: index, offset: offset as u64, message, last };
        let header = match jfr_in::header(file, offset) {
            Ok(header) => header,
            Err(Split::Malformed(e)) if offset == 0 => return Err(not_a_recording(e.to_string())),
            Err(Split::Malformed(e)) => {
                damage.push(damaged(format!("not a chunk: {e}"), true));
                break;
            }
            Err(Split::Truncated { chunk_size, available }) => {
                damage.push(damaged(format!("cut short: {available} of its {chunk_size} bytes are in the file"), true));
                break;
            }
        };
        let size = header.chunk_size as usize;
        match read_chunk(&file[offset..offset + size], offset as u64, header) {
            Ok(chunk) => recording.chunks.push(chunk),
            Err(e) => damage.push(damaged(e.to_string(), false)),
        }
        offset += size;
    }
    if recording.chunks.is_empty() {
        let reasons: Vec<String> = damage.iter().map(Damage::to_string).collect();
        return Err(not_a_recording(format!("no chunk can be read: {}", reasons.join("; "))));
    }
    Ok(ReadOutcome { recording, damage })
}

/// The events `read_chunk` reads; every other event is skipped.
fn is_read(name: &str) -> bool {
    matches!(
        name,
        "jdk.ActiveSetting"
            | "jvmprofiler.Counter"
            | "datadog.ProfilerCounter"
            | "jdk.NativeLibrary"
            | "jvmprofiler.Endpoint"
            | "datadog.Endpoint"
            | "jvmprofiler.SampleContext"
    ) || event_type(name).is_some()
}

fn read_chunk(bytes: &[u8], offset: u64, header: jfr_in::Header) -> Result<Chunk, jfr_in::Malformed> {
    let chunk = jfr_in::Chunk::read(bytes, offset, header)?;
    let mut data = Chunk {
        clock: Clock {
            start_nanos: header.start_nanos,
            start_ticks: header.start_ticks,
            ticks_per_second: header.ticks_per_second,
            duration_nanos: header.duration_nanos,
        },
        attributes: Vec::new(),
        samples: Vec::new(),
        endpoints: Vec::new(),
        settings: Vec::new(),
        counters: Vec::new(),
        libraries: Vec::new(),
    };
    chunk.events(is_read, |event| {
        let value = event.value;
        match event.name {
            "jdk.ActiveSetting" => {
                let (name, text) = (
                    string(value.get_field("name")).unwrap_or_default(),
                    string(value.get_field("value")).unwrap_or_default(),
                );
                if name == "attributes" && !text.is_empty() {
                    data.attributes = text.split(';').map(str::to_owned).collect();
                }
                data.settings.push((name, text));
            }
            "jvmprofiler.Counter" | "datadog.ProfilerCounter" => data.counters.push((
                string(value.get_field("name")).unwrap_or_default(),
                long(value.get_field("count")).unwrap_or(0),
            )),
            "jdk.NativeLibrary" => data.libraries.push(NativeLibrary {
                name: string(value.get_field("name")).unwrap_or_default(),
                base_address: long(value.get_field("baseAddress")).unwrap_or(0) as u64,
                top_address: long(value.get_field("topAddress")).unwrap_or(0) as u64,
                build_id: string(value.get_field("buildId")),
                load_bias: long(value.get_field("loadBias")).unwrap_or(0) as u64,
            }),
            "jvmprofiler.Endpoint" | "datadog.Endpoint" => data.endpoints.push(Endpoint {
                start_ticks: long(value.get_field("startTime")).unwrap_or(0),
                thread: thread(&value),
                endpoint: string(value.get_field("endpoint")).unwrap_or_default(),
                operation: string(value.get_field("operation")).unwrap_or_default(),
                root_span_id: long(value.get_field("localRootSpanId")).unwrap_or(0) as u64,
            }),
            "jvmprofiler.SampleContext" => {
                if let Some(last) = data.samples.last_mut() {
                    set_context(last, &value, &data.attributes);
                }
            }
            other => {
                if let Some(event_type) = event_type(other) {
                    let sample = sample(event_type, value, &data);
                    data.samples.push(sample);
                }
            }
        }
    })?;
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    #[test]
    fn durations_are_converted_from_the_chunk_ticks() {
        assert_eq!(ticks_to_nanos(1_500, 1_000_000_000), 1_500);
        // A TSC clock of 2.5 GHz.
        assert_eq!(ticks_to_nanos(2_500_000_000, 2_500_000_000), 1_000_000_000);
        assert_eq!(ticks_to_nanos(i64::MAX, 1), u64::MAX);
        assert_eq!(ticks_to_nanos(-5, 1_000_000_000), 0);
        assert_eq!(ticks_to_nanos(5, 0), 5_000_000_000);
    }

    #[test]
    fn native_code_is_named_by_its_symbol_alone() {
        // async-profiler's and ours: the library as class, `()L;`.
        let mut cpp = remote_jdk("libjvm.so", "ab", 0x10);
        (cpp.method, cpp.build_id, cpp.kind) = ("JVM_Sleep".to_owned(), None, Some(FrameType::Cpp));
        assert_eq!(cpp.display_name(), "JVM_Sleep");
        let mut native = cpp.clone();
        native.kind = Some(FrameType::Native);
        assert_eq!(native.display_name(), "JVM_Sleep");
        let mut kernel = native.clone();
        (kernel.class, kernel.descriptor, kernel.kind) = (String::new(), "(Lk;)L;".to_owned(), Some(FrameType::Kernel));
        assert_eq!(kernel.display_name(), "JVM_Sleep");
        assert_eq!(crate::testing::native("memcpy").display_name(), "memcpy");
        // A Java `native` method keeps its class.
        let mut java_native = java("java/lang/Thread", "sleep0", -1);
        (java_native.kind, java_native.descriptor) = (Some(FrameType::Native), "(J)V".to_owned());
        assert!(!java_native.is_native_code());
        assert_eq!(java_native.display_name(), "java.lang.Thread.sleep0");
    }

    const ID: &str = "abcdef0123456789";

    #[test]
    fn remote_frames_are_recognised_in_both_dialects() {
        assert_eq!(remote(ID, 0x1a2b).remote(), Some((ID, 0x1a2b)));
        assert_eq!(remote_jdk("libjvm.so", ID, 0x5d7203).remote(), Some((ID, 0x5d7203)));
        // A native frame that names its library but has no build-id, or
        // whose name is a function, is not remote.
        let mut plain = remote_jdk("libjvm.so", ID, 0x10);
        plain.build_id = None;
        assert_eq!(plain.remote(), None);
        let mut named = remote_jdk("libjvm.so", ID, 0x10);
        named.method = "JVM_Sleep".to_owned();
        assert_eq!(named.remote(), None);
        assert_eq!(native("memcpy").remote(), None);
        assert_eq!(java("a/B", "c", 1).remote(), None);
    }
}
