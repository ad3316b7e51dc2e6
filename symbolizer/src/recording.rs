//! Reading our recordings with the `jfrs` parser into plain data: per
//! chunk, its clock, its sample events with full stacks, its endpoints,
//! settings and counters, and the native libraries it lists. A chunk that cannot be
//! parsed ends the read with what came before it and an error describing
//! the rest.

use frames::{FrameType, NON_JAVA_DESCRIPTOR, REMOTE_METHOD_NAME};
use jfrs::reader::event::Accessor;
use jfrs::reader::value_descriptor::{Primitive, ValueDescriptor};
use jfrs::reader::JfrReader;
use std::fs::File;
use std::path::Path;

/// Event types that carry a stack and a weight.
pub const SAMPLE_EVENTS: &[&str] =
    &["jdk.ExecutionSample", "profiler.WallClockSample", "datadog.ExecutionSample", "datadog.MethodSample"];

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot open {path}: {source}")]
    Open { path: String, source: std::io::Error },
    #[error("{path} is not a readable JFR recording (chunk {chunk}): {message}")]
    Format { path: String, chunk: usize, message: String },
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

    /// `com.example.Foo.bar` for Java frames (`native` methods included),
    /// the symbol for native ones, whose class, if any, is their library.
    pub fn display_name(&self) -> String {
        if self.class.is_empty() || self.descriptor == NON_JAVA_DESCRIPTOR {
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

#[derive(Clone, Debug)]
pub struct Sample {
    pub event: String,
    pub start_ticks: i64,
    pub thread: Thread,
    pub state: String,
    pub weight: u64,
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
    pub fn samples(&self) -> impl Iterator<Item = &Sample> {
        self.chunks.iter().flat_map(|c| c.samples.iter())
    }

    pub fn libraries(&self) -> impl Iterator<Item = &NativeLibrary> {
        self.chunks.iter().flat_map(|c| c.libraries.iter())
    }
}

/// The result of reading: what could be read, and the error that stopped
/// the read early, if any.
pub struct ReadOutcome {
    pub recording: Recording,
    pub error: Option<ReadError>,
}

/// A string field, also when it is a pooled simple type wrapping one
/// string (`jdk.types.Symbol`, `jdk.types.FrameType`,
/// `profiler.types.AttributeValue`, ...).
fn string(accessor: Option<Accessor<'_>>) -> Option<String> {
    let value = accessor?.resolve()?;
    if let Ok(s) = <&str>::try_from(value.value) {
        return Some(s.to_owned());
    }
    ["string", "description", "name", "value"]
        .iter()
        .find_map(|field| value.get_field(field))
        .and_then(|inner| string(Some(inner)))
}

fn long(accessor: Option<Accessor<'_>>) -> Option<i64> {
    match accessor?.resolve()?.value {
        ValueDescriptor::Primitive(Primitive::Long(v)) => Some(*v),
        ValueDescriptor::Primitive(Primitive::Integer(v)) => Some(i64::from(*v)),
        ValueDescriptor::Primitive(Primitive::Short(v)) => Some(i64::from(*v)),
        ValueDescriptor::Primitive(Primitive::Byte(v)) => Some(i64::from(*v)),
        _ => None,
    }
}

fn boolean(accessor: Option<Accessor<'_>>) -> bool {
    matches!(
        accessor.and_then(Accessor::resolve).map(|a| a.value),
        Some(ValueDescriptor::Primitive(Primitive::Boolean(true)))
    )
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

fn sample(name: &str, event: Accessor<'_>, attributes: &[String]) -> Sample {
    let stack = event.get_field("stackTrace").and_then(Accessor::resolve);
    let mut sample = Sample {
        event: name.to_owned(),
        start_ticks: long(event.get_field("startTime")).unwrap_or(0),
        thread: thread(&event),
        state: string(event.get_field("state")).unwrap_or_default(),
        weight: long(event.get_field("weight").or_else(|| event.get_field("samples"))).unwrap_or(1).max(1) as u64,
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
    set_context(&mut sample, &event, attributes);
    sample
}

/// A sample's trace context, from the sample (Datadog dialect) or the
/// `jvmprofiler.SampleContext` that follows it (JDK dialect).
fn set_context(sample: &mut Sample, event: &Accessor<'_>, attributes: &[String]) {
    sample.span_id = long(event.get_field("spanId")).unwrap_or(0) as u64;
    sample.root_span_id = long(event.get_field("localRootSpanId")).unwrap_or(0) as u64;
    sample.attributes = attributes.iter().map(|a| string(event.get_field(a))).collect();
}

pub fn read(path: &Path) -> Result<ReadOutcome, ReadError> {
    let display = path.display().to_string();
    let file = File::open(path).map_err(|source| ReadError::Open { path: display.clone(), source })?;
    let mut reader = JfrReader::new(file);
    let mut recording = Recording::default();
    let format = |chunk: usize, e: &dyn std::fmt::Debug| ReadError::Format {
        path: display.clone(),
        chunk,
        message: format!("{e:?}"),
    };
    for (index, chunk) in reader.chunks().enumerate() {
        let (mut chunk_reader, chunk) = match chunk {
            Ok(c) => c,
            Err(e) => return Ok(ReadOutcome { recording, error: Some(format(index, &e)) }),
        };
        let header = &chunk.header;
        let mut data = Chunk {
            clock: Clock {
                start_nanos: header.start_time_nanos,
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
        for event in chunk_reader.events(&chunk) {
            let event = match event {
                Ok(e) => e,
                Err(e) => {
                    recording.chunks.push(data);
                    return Ok(ReadOutcome { recording, error: Some(format(index, &e)) });
                }
            };
            let name = event.class.name();
            let value = event.value();
            match name {
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
                _ if SAMPLE_EVENTS.contains(&name) => data.samples.push(sample(name, value, &data.attributes)),
                "jvmprofiler.SampleContext" => {
                    if let Some(last) = data.samples.last_mut() {
                        set_context(last, &value, &data.attributes);
                    }
                }
                _ => {}
            }
        }
        recording.chunks.push(data);
    }
    Ok(ReadOutcome { recording, error: None })
}

#[cfg(test)]
mod tests {
    use crate::testing::*;

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
