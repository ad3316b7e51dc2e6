//! Reading our recordings (`datadog.ExecutionSample` and friends) with the
//! `jfrs` parser. A chunk that cannot be parsed ends the read with what was
//! read so far and an error describing the rest.

use crate::profile::{Frame, FrameKind, Profile, Sample};
use jfrs::reader::event::Accessor;
use jfrs::reader::JfrReader;
use std::fs::File;
use std::path::Path;

/// Event types that carry a stack and a weight.
pub const SAMPLE_EVENTS: &[&str] = &["datadog.ExecutionSample", "datadog.MethodSample", "jdk.ExecutionSample"];

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot open {path}: {source}")]
    Open { path: String, source: std::io::Error },
    #[error("{path} is not a readable JFR recording (chunk {chunk}): {message}")]
    Format { path: String, chunk: usize, message: String },
}

/// The result of reading: the profile, plus the error that stopped the
/// read early, if any (a truncated file still yields its complete chunks).
pub struct ReadOutcome {
    pub profile: Profile,
    pub error: Option<ReadError>,
}

/// A string field, also when it is a pooled simple type wrapping one
/// string (`jdk.types.Symbol`, `jdk.types.FrameType`, ...).
fn string(accessor: Option<Accessor<'_>>) -> Option<String> {
    let value = accessor?.resolve()?;
    if let Ok(s) = <&str>::try_from(value.value) {
        return Some(s.to_owned());
    }
    ["string", "description", "name"]
        .iter()
        .find_map(|field| value.get_field(field))
        .and_then(|inner| string(Some(inner)))
}

fn java_class_name(internal: &str) -> String {
    internal.replace('/', ".")
}

fn frame(frame: Accessor<'_>) -> Frame {
    let method = frame.get_field("method").and_then(Accessor::resolve);
    let class = method
        .as_ref()
        .and_then(|m| m.get_field("type"))
        .and_then(Accessor::resolve)
        .and_then(|t| string(t.get_field("name")))
        .unwrap_or_default();
    let name = method.as_ref().and_then(|m| string(m.get_field("name"))).unwrap_or_else(|| "[unknown]".to_owned());
    let kind = string(frame.get_field("type")).map_or(FrameKind::Other, |d| FrameKind::from_description(&d));
    let name = if class.is_empty() { name } else { format!("{}.{name}", java_class_name(&class)) };
    Frame { name, kind }
}

fn thread_name(event: &Accessor<'_>) -> String {
    let thread =
        event.get_field("eventThread").or_else(|| event.get_field("sampledThread")).and_then(Accessor::resolve);
    thread
        .and_then(|t| string(t.get_field("javaName")).or_else(|| string(t.get_field("osName"))))
        .unwrap_or_else(|| "[unknown thread]".to_owned())
}

pub fn read(path: &Path) -> Result<ReadOutcome, ReadError> {
    let display = path.display().to_string();
    let file = File::open(path).map_err(|source| ReadError::Open { path: display.clone(), source })?;
    let mut reader = JfrReader::new(file);
    let mut profile = Profile::default();
    for (index, chunk) in reader.chunks().enumerate() {
        let (mut chunk_reader, chunk) = match chunk {
            Ok(c) => c,
            Err(e) => {
                let error = ReadError::Format { path: display, chunk: index, message: format!("{e:?}") };
                return Ok(ReadOutcome { profile, error: Some(error) });
            }
        };
        for event in chunk_reader.events(&chunk) {
            let event = match event {
                Ok(e) => e,
                Err(e) => {
                    let error = ReadError::Format { path: display, chunk: index, message: format!("{e:?}") };
                    return Ok(ReadOutcome { profile, error: Some(error) });
                }
            };
            let event_name = event.class.name();
            if !SAMPLE_EVENTS.contains(&event_name) {
                continue;
            }
            let value = event.value();
            let weight = value.get_field("weight").and_then(|w| i64::try_from(w.value).ok()).unwrap_or(1).max(1) as u64;
            let thread = thread_name(&value);
            let frames: Vec<Frame> = value
                .get_field("stackTrace")
                .and_then(Accessor::resolve)
                .and_then(|s| s.get_field("frames"))
                .and_then(Accessor::as_iter)
                .map(|frames| frames.map(frame).collect())
                .unwrap_or_default();
            let stack = frames.into_iter().map(|f| profile.intern(f)).collect();
            profile.samples.push(Sample { event: event_name.to_owned(), thread, weight, stack });
        }
    }
    Ok(ReadOutcome { profile, error: None })
}
