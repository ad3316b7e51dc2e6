//! OpenTelemetry profiles (OTLP, opentelemetry-proto v1.10.0:
//! `profiles/v1development` with the request-wide `ProfilesDictionary`),
//! as async-profiler 4.5 writes them and Pyroscope 2 and the OpenTelemetry
//! Collector take them: an `ExportProfilesServiceRequest` with one
//! resource, one scope (`jvmprofiler`) and one profile per event kind.
//!
//! The stacks and their weights are [`profile::build`]'s, so a profile's
//! values add up to what `symbolize collapsed --event KIND` shows (CPU in
//! intervals of the period, wall clock in nanoseconds: intervals times the
//! period). A sample is one stack on one thread under one span: thread
//! name and id as attributes, the span as a link. Every dictionary table
//! starts with its zero entry, as the .proto requires.
//!
//! Remote native frames (and local ones the agent could not name that a
//! library's build-id covers) are located in their library: the location's
//! mapping carries the library's file name and its GNU build-id
//! (`process.executable.build_id.gnu`, hex), its address is the frame's
//! link-time address (the offset recorded, already the attribution
//! address). Resolved, the location also has the lines (the inline chain);
//! unresolved, it has none, which tells a backend to symbolize it from the
//! build-id (debuginfod).

use crate::events::EventKind;
use crate::profile::{self, library_name, Profile};
use crate::recording::{Chunk, Frame, Recording, Sample};
use crate::report::Report;
use crate::resolve::Resolver;
use frames::FrameType;
use prost::Message as _;
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::Hash;

/// The messages generated from the vendored `.proto` files
/// (`symbolizer/proto/`, compiled by `build.rs`), in their packages'
/// modules below `opentelemetry.proto`.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod proto {
    pub mod common {
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/opentelemetry.proto.common.v1.rs"));
        }
    }
    pub mod resource {
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/opentelemetry.proto.resource.v1.rs"));
        }
    }
    pub mod profiles {
        pub mod v1development {
            include!(concat!(env!("OUT_DIR"), "/opentelemetry.proto.profiles.v1development.rs"));
        }
    }
    pub mod collector {
        pub mod profiles {
            pub mod v1development {
                include!(concat!(env!("OUT_DIR"), "/opentelemetry.proto.collector.profiles.v1development.rs"));
            }
        }
    }
}

use proto::collector::profiles::v1development::ExportProfilesServiceRequest;
use proto::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use proto::profiles::v1development as pb;
use proto::resource::v1::Resource;

/// The instrumentation scope's name.
pub const SCOPE_NAME: &str = "jvmprofiler";

/// The attribute of a mapping naming its library's GNU build-id in hex
/// (OpenTelemetry's semantic conventions).
pub const BUILD_ID_ATTRIBUTE: &str = "process.executable.build_id.gnu";

/// What goes into the request besides the recording.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OtlpOptions {
    /// The resource's `service.name` [default: the recording's main class
    /// if its stacks show one, else `java`].
    pub service: Option<String>,
    /// More resource attributes, in order; one replaces what the others
    /// (or `service`) set for its key.
    pub attributes: Vec<(String, String)>,
    /// The one kind to send [default: every kind the recording has, a
    /// profile each].
    pub event: Option<EventKind>,
}

/// The encoded `ExportProfilesServiceRequest` of `recording`: what an
/// OTLP/HTTP exporter posts as `application/x-protobuf` to
/// `/v1development/profiles`. Native frames are left as recorded: remote
/// ones go out as build-id mappings and addresses for the backend to
/// symbolize.
pub fn encode_request(recording: &Recording, options: &OtlpOptions) -> Vec<u8> {
    build_request(recording, options, None).0.encode_to_vec()
}

/// The request for `recording`, remote frames resolved with `resolver`
/// when given, and for each profile how its frames resolved.
pub fn build_request(
    recording: &Recording,
    options: &OtlpOptions,
    mut resolver: Option<&mut Resolver>,
) -> (ExportProfilesServiceRequest, Vec<Report>) {
    let mut dictionary = Dictionary::new();
    let mut profiles = Vec::new();
    let mut reports = Vec::new();
    let kinds: Vec<EventKind> = match options.event {
        Some(kind) => recording.kinds().contains_key(&kind).then_some(kind).into_iter().collect(),
        None => recording.kinds().into_keys().collect(),
    };
    let build_ids = library_names_by_build_id(recording);
    for kind in kinds {
        let (built, report, times) = profile::build_timed(recording, kind, resolver.as_deref_mut());
        let mut writer = ProfileWriter { recording, profile: &built, build_ids: &build_ids, dict: &mut dictionary };
        profiles.push(writer.write(&times));
        reports.push(report);
    }
    let resource = Resource {
        attributes: resource_attributes(recording, options)
            .into_iter()
            .map(|(key, value)| KeyValue { key, value: Some(string_value(value)), ..Default::default() })
            .collect(),
        ..Default::default()
    };
    let scope = InstrumentationScope {
        name: SCOPE_NAME.to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        ..Default::default()
    };
    let request = ExportProfilesServiceRequest {
        resource_profiles: vec![pb::ResourceProfiles {
            resource: Some(resource),
            scope_profiles: vec![pb::ScopeProfiles { scope: Some(scope), profiles, schema_url: String::new() }],
            schema_url: String::new(),
        }],
        dictionary: Some(dictionary.finish()),
    };
    (request, reports)
}

/// The resource's attributes: `service.name`, `process.runtime.name`, then
/// `options.attributes`, each replacing an earlier value of its key.
fn resource_attributes(recording: &Recording, options: &OtlpOptions) -> Vec<(String, String)> {
    let service = options.service.clone().or_else(|| main_class(recording)).unwrap_or_else(|| "java".to_owned());
    let mut attributes =
        vec![("service.name".to_owned(), service), ("process.runtime.name".to_owned(), "java".to_owned())];
    for (key, value) in &options.attributes {
        match attributes.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1.clone_from(value),
            None => attributes.push((key.clone(), value.clone())),
        }
    }
    attributes
}

/// The class whose `main` method is the outermost Java frame of most
/// stacks that have one (the application's entry point), as Java source
/// names it.
pub fn main_class(recording: &Recording) -> Option<String> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for stack in &recording.stacks {
        let outermost = stack.frames.iter().rev().map(|&f| &recording.frames[f as usize]).find(|f| !f.is_native_code());
        if let Some(frame) = outermost.filter(|f| f.method == "main" && f.descriptor.ends_with(")V")) {
            *counts.entry(frame.class.as_str()).or_default() += 1;
        }
    }
    // The most stacks, then the name: the same answer every run.
    let (class, _) = counts.into_iter().max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))?;
    Some(class.replace('/', "."))
}

/// Library file names by build-id, as the unresolved frames name them.
fn library_names_by_build_id(recording: &Recording) -> HashMap<String, String> {
    let libraries = profile::library_names(recording);
    let mut names = HashMap::new();
    for frame in &recording.frames {
        if let Some((build_id, _)) = frame.remote() {
            if !names.contains_key(build_id) {
                names.insert(build_id.to_owned(), library_name(frame, build_id, &libraries));
            }
        }
    }
    names
}

fn string_value(text: String) -> AnyValue {
    AnyValue { value: Some(any_value::Value::StringValue(text)) }
}

/// The sample type, the period's type and the period of a profile of
/// `kind`: the names Pyroscope's OTLP ingest and Go's profiles use (a
/// Pyroscope profile is named after its period type; `samples`/`count`
/// over a `cpu` period is the CPU profile it multiplies by the period,
/// `process_cpu`). `period_value` is the profile's (CPU and wall clock) or the
/// recording's sampling interval; 0 when unknown. The factor turns a
/// weight into the sample type's unit.
struct Types {
    sample: (&'static str, &'static str),
    period: (&'static str, &'static str),
    period_value: i64,
    factor: u64,
}

fn types(kind: EventKind, recording: &Recording, profile_period: i64) -> Types {
    let interval = |setting: &str| sampling_interval(recording, kind, setting);
    let (sample, period, period_value, factor) = match kind {
        EventKind::Cpu => (("samples", "count"), ("cpu", "nanoseconds"), profile_period, 1),
        EventKind::Wall if profile_period > 0 => {
            (("wall", "nanoseconds"), ("wall", "nanoseconds"), profile_period, profile_period as u64)
        }
        EventKind::Wall => (("samples", "count"), ("wall", "nanoseconds"), 0, 1),
        EventKind::Alloc => (("alloc_space", "bytes"), ("space", "bytes"), interval("alloc"), 1),
        EventKind::Live => (("inuse_space", "bytes"), ("space", "bytes"), interval("alloc"), 1),
        EventKind::Lock => (("delay", "nanoseconds"), ("mutex", "nanoseconds"), interval("lock"), 1),
        EventKind::NativeMem => (("malloc_space", "bytes"), ("space", "bytes"), interval("nativemem"), 1),
    };
    Types { sample, period, period_value, factor }
}

/// The shortest interval the chunks with samples of `kind` name in their
/// setting `name` (`"65536 bytes"`, `"10000 ns"` as we write them, a bare
/// number as async-profiler does); a native allocation interval of 0
/// (every allocation) is 1 byte. 0: none named.
fn sampling_interval(recording: &Recording, kind: EventKind, name: &str) -> i64 {
    let of = |chunk: &Chunk| -> Option<i64> {
        let (_, value) = chunk.settings.iter().rev().find(|(setting, _)| setting == name)?;
        let number = value.split(' ').next()?.parse::<i64>().ok()?;
        match kind {
            EventKind::NativeMem => Some(number.max(1)),
            _ => Some(number).filter(|&n| n > 0),
        }
    };
    let sampled = recording.chunks.iter().filter(|c| c.samples.iter().any(|s| s.kind == kind));
    sampled.filter_map(of).min().unwrap_or(0)
}

/// The `profile.frame.type` of OpenTelemetry's semantic conventions for a
/// recorded frame.
fn frame_type(frame: &Frame) -> &'static str {
    if frame.kind == Some(FrameType::Kernel) {
        "kernel"
    } else if frame.is_native_code() {
        "native"
    } else {
        "jvm"
    }
}

/// An attribute's value, as the dictionary keys it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Value {
    Str(String),
    Int(i64),
}

/// A location as the dictionary keys it: mapping, address, lines
/// (function, line), attributes.
type LocationKey = (i32, u64, Vec<(i32, i64)>, Vec<i32>);

/// Interns each table's entries by value, each table starting with its
/// zero entry.
struct Dictionary {
    out: pb::ProfilesDictionary,
    strings: FxHashMap<String, i32>,
    functions: FxHashMap<(i32, i32, i32), i32>,
    locations: FxHashMap<LocationKey, i32>,
    mappings: FxHashMap<String, i32>,
    attributes: FxHashMap<(i32, Value), i32>,
    stacks: FxHashMap<Vec<i32>, i32>,
    links: FxHashMap<u64, i32>,
}

/// `key`'s index in `table`, its entry made from it by `make` when new.
fn intern<K: Hash + Eq, T>(
    index: &mut FxHashMap<K, i32>,
    table: &mut Vec<T>,
    key: K,
    make: impl FnOnce(&K) -> T,
) -> i32 {
    match index.entry(key) {
        Entry::Occupied(entry) => *entry.get(),
        Entry::Vacant(entry) => {
            table.push(make(entry.key()));
            *entry.insert((table.len() - 1) as i32)
        }
    }
}

impl Dictionary {
    fn new() -> Self {
        let out = pb::ProfilesDictionary {
            mapping_table: vec![pb::Mapping::default()],
            location_table: vec![pb::Location::default()],
            function_table: vec![pb::Function::default()],
            link_table: vec![pb::Link::default()],
            string_table: vec![String::new()],
            attribute_table: vec![pb::KeyValueAndUnit::default()],
            stack_table: vec![pb::Stack::default()],
        };
        let mut dictionary = Dictionary {
            out,
            strings: FxHashMap::default(),
            functions: FxHashMap::default(),
            locations: FxHashMap::default(),
            mappings: FxHashMap::default(),
            attributes: FxHashMap::default(),
            stacks: FxHashMap::default(),
            links: FxHashMap::default(),
        };
        // The zero entries stand for the zero values: an empty stack is
        // stack 0, the empty string string 0.
        dictionary.strings.insert(String::new(), 0);
        dictionary.stacks.insert(Vec::new(), 0);
        dictionary
    }

    fn string(&mut self, text: &str) -> i32 {
        if let Some(&i) = self.strings.get(text) {
            return i;
        }
        self.out.string_table.push(text.to_owned());
        let i = (self.out.string_table.len() - 1) as i32;
        self.strings.insert(text.to_owned(), i);
        i
    }

    fn value_type(&mut self, (kind, unit): (&str, &str)) -> pb::ValueType {
        pb::ValueType { type_strindex: self.string(kind), unit_strindex: self.string(unit) }
    }

    fn attribute(&mut self, key: &str, value: Value) -> i32 {
        let key = self.string(key);
        let any = match &value {
            Value::Str(text) => any_value::Value::StringValue(text.clone()),
            Value::Int(n) => any_value::Value::IntValue(*n),
        };
        intern(&mut self.attributes, &mut self.out.attribute_table, (key, value), |_| pb::KeyValueAndUnit {
            key_strindex: key,
            value: Some(AnyValue { value: Some(any) }),
            unit_strindex: 0,
        })
    }

    fn function(&mut self, name: &str, system_name: &str, filename: &str) -> i32 {
        let key = (self.string(name), self.string(system_name), self.string(filename));
        intern(&mut self.functions, &mut self.out.function_table, key, |_| pb::Function {
            name_strindex: key.0,
            system_name_strindex: key.1,
            filename_strindex: key.2,
            start_line: 0,
        })
    }

    /// The mapping of the library with `build_id`, named `filename`.
    fn mapping(&mut self, build_id: &str, filename: &str) -> i32 {
        if let Some(&i) = self.mappings.get(build_id) {
            return i;
        }
        let mapping = pb::Mapping {
            filename_strindex: self.string(filename),
            attribute_indices: vec![self.attribute(BUILD_ID_ATTRIBUTE, Value::Str(build_id.to_owned()))],
            ..Default::default()
        };
        self.out.mapping_table.push(mapping);
        let i = (self.out.mapping_table.len() - 1) as i32;
        self.mappings.insert(build_id.to_owned(), i);
        i
    }

    fn location(&mut self, key: LocationKey) -> i32 {
        intern(&mut self.locations, &mut self.out.location_table, key, |(mapping_index, address, lines, attributes)| {
            pb::Location {
                mapping_index: *mapping_index,
                address: *address,
                lines: lines
                    .iter()
                    .map(|&(function_index, line)| pb::Line { function_index, line, column: 0 })
                    .collect(),
                attribute_indices: attributes.clone(),
            }
        })
    }

    fn stack(&mut self, locations: Vec<i32>) -> i32 {
        intern(&mut self.stacks, &mut self.out.stack_table, locations, |l| pb::Stack { location_indices: l.clone() })
    }

    /// The link to the span `span_id`; its trace is not recorded: a zero
    /// trace id.
    fn link(&mut self, span_id: u64) -> i32 {
        intern(&mut self.links, &mut self.out.link_table, span_id, |_| pb::Link {
            trace_id: vec![0; 16],
            span_id: span_id.to_be_bytes().to_vec(),
        })
    }

    fn finish(self) -> pb::ProfilesDictionary {
        self.out
    }
}

/// Writes one profile's samples into the dictionary.
struct ProfileWriter<'a> {
    recording: &'a Recording,
    profile: &'a Profile,
    build_ids: &'a HashMap<String, String>,
    dict: &'a mut Dictionary,
}

/// An OTLP sample's identity: its stack, its set of attributes (one of
/// [`ProfileWriter::write`]'s), its link.
type SampleKey = (i32, u32, i32);

impl ProfileWriter<'_> {
    /// The profile of `self.profile`'s kind; `times` says where each of
    /// the recording's samples of the kind went, in the recording's order.
    fn write(&mut self, times: &[profile::Timed]) -> pb::Profile {
        let recording = self.recording;
        let kind = self.profile.kind;
        let types = types(kind, recording, self.profile.period);
        let (start, duration) = time_span(recording);
        let mut out = pb::Profile {
            sample_type: Some(self.dict.value_type(types.sample)),
            period_type: Some(self.dict.value_type(types.period)),
            period: types.period_value,
            time_unix_nano: start.max(0) as u64,
            duration_nano: duration,
            ..Default::default()
        };
        // Each profile sample's stack and each thread's attributes, once;
        // threads whose attributes read the same share their samples.
        let mut stacks: Vec<Option<i32>> = vec![None; self.profile.samples.len()];
        let mut threads: FxHashMap<u32, u32> = FxHashMap::default();
        let mut attribute_sets: FxHashMap<Vec<i32>, u32> = FxHashMap::default();
        let mut sets: Vec<Vec<i32>> = Vec::new();
        let mut samples: FxHashMap<SampleKey, usize> = FxHashMap::default();
        let recorded = recording.chunks.iter().flat_map(|c| c.samples.iter()).filter(|s| s.kind == kind);
        for (sample, timed) in recorded.zip(times) {
            let stack = match stacks[timed.sample as usize] {
                Some(stack) => stack,
                None => {
                    let stack = self.stack(sample, &self.profile.samples[timed.sample as usize].stack);
                    stacks[timed.sample as usize] = Some(stack);
                    stack
                }
            };
            let set = *threads.entry(sample.thread).or_insert_with(|| {
                let attributes = self.thread_attributes(sample);
                *attribute_sets.entry(attributes).or_insert_with_key(|attributes| {
                    sets.push(attributes.clone());
                    (sets.len() - 1) as u32
                })
            });
            let link = if sample.span_id != 0 { self.dict.link(sample.span_id) } else { 0 };
            let value = timed.weight.saturating_mul(types.factor);
            let next = out.samples.len();
            let index = *samples.entry((stack, set, link)).or_insert(next);
            if index == next {
                out.samples.push(pb::Sample {
                    stack_index: stack,
                    attribute_indices: sets[set as usize].clone(),
                    link_index: link,
                    values: vec![0],
                    timestamps_unix_nano: Vec::new(),
                });
            }
            let total = &mut out.samples[index].values[0];
            *total = total.saturating_add(i64::try_from(value).unwrap_or(i64::MAX));
        }
        out
    }

    fn thread_attributes(&mut self, sample: &Sample) -> Vec<i32> {
        let thread = self.recording.thread(sample);
        let mut attributes = vec![self.dict.attribute("thread.name", Value::Str(thread.name().to_owned()))];
        if thread.java_id > 0 {
            attributes.push(self.dict.attribute("thread.id", Value::Int(thread.java_id)));
        }
        attributes
    }

    /// The stack of `frames` (indexes into the profile's frames, innermost
    /// first), which the profile built from `sample`'s recorded stack.
    fn stack(&mut self, sample: &Sample, frames: &[u32]) -> i32 {
        let origins = origins(self.recording, self.profile, sample, frames);
        let mut locations = Vec::new();
        let mut start = 0;
        for (i, &f) in frames.iter().enumerate() {
            // An inline chain (frames of one address, each inlined into the
            // next) is one location, its lines innermost first.
            if self.profile.frames[f as usize].inlined && i + 1 < frames.len() {
                continue;
            }
            let group = &frames[start..=i];
            locations.push(self.location(group, origins[start]));
            start = i + 1;
        }
        self.dict.stack(locations)
    }

    /// The location of an inline chain of display frames that came from
    /// the recorded frame `origin` (none: the class ending an allocation's
    /// or a lock's stack, a marker at a cut stack's root).
    fn location(&mut self, group: &[u32], origin: Option<&Frame>) -> i32 {
        let first = &self.profile.frames[group[0] as usize];
        let (mapping, address) = match &first.remote {
            Some((build_id, offset)) => {
                let filename = self.build_ids.get(build_id).map_or(build_id.as_str(), String::as_str);
                (self.dict.mapping(build_id, filename), *offset)
            }
            None => (0, 0),
        };
        let unresolved = first.remote.is_some() && first.kind == Some(FrameType::RemoteNative);
        let lines = if unresolved {
            // For the backend to symbolize: no function claims the address.
            Vec::new()
        } else {
            group
                .iter()
                .map(|&f| {
                    let frame = &self.profile.frames[f as usize];
                    let system_name = origin
                        .filter(|o| !o.is_native_code() && first.remote.is_none())
                        .map_or(String::new(), |o| format!("{}.{}{}", o.class, o.method, o.descriptor));
                    let file = frame.file.as_deref().unwrap_or("");
                    let function = self.dict.function(&frame.name, &system_name, file);
                    (function, frame.line.map_or(0, i64::from))
                })
                .collect()
        };
        let attributes = match origin {
            Some(frame) => vec![self.dict.attribute("profile.frame.type", Value::Str(frame_type(frame).to_owned()))],
            None => Vec::new(),
        };
        self.dict.location((mapping, address, lines, attributes))
    }
}

/// For each display frame of a profile stack (`frames`, innermost first),
/// the recorded frame of `sample` it came from: the profile puts the
/// leaf class first (when the sample has one), then each recorded frame
/// as one display frame or, a remote frame in inlined code, its inline
/// chain (every frame but the last inlined), then a marker when the stack
/// was cut.
fn origins<'r>(recording: &'r Recording, profile: &Profile, sample: &Sample, frames: &[u32]) -> Vec<Option<&'r Frame>> {
    let mut origins = Vec::with_capacity(frames.len());
    if sample.leaf.is_some() {
        origins.push(None);
    }
    for frame in recording.frames_of(sample) {
        while origins.len() < frames.len() {
            origins.push(Some(frame));
            if !profile.frames[frames[origins.len() - 1] as usize].inlined {
                break;
            }
        }
    }
    origins.resize(frames.len(), None);
    origins
}

/// When the recording's first chunk starts (unix nanoseconds), and how
/// long until its last one ends.
fn time_span(recording: &Recording) -> (i64, u64) {
    let start = recording.chunks.iter().map(|c| c.clock.start_nanos).min().unwrap_or(0);
    let end = recording.chunks.iter().map(|c| c.clock.start_nanos.saturating_add(c.clock.duration_nanos)).max();
    (start, end.map_or(0, |end| end.saturating_sub(start).max(0) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::SampleData;
    use crate::testing::*;

    const LIB: &str = "0123456789abcdef0123456789abcdef01234567";

    fn decode(bytes: &[u8]) -> ExportProfilesServiceRequest {
        ExportProfilesServiceRequest::decode(bytes).expect("a request")
    }

    fn strings(d: &pb::ProfilesDictionary, i: i32) -> &str {
        &d.string_table[i as usize]
    }

    /// `thread`'s CPU sample of `weight` under `span`.
    fn traced(thread: &str, weight: u64, span: u64, frames: Vec<Frame>) -> SampleData {
        SampleData { span_id: span, root_span_id: span, ..sample(thread, weight, frames) }
    }

    fn main_frame() -> Frame {
        let mut main = java("app/Main", "main", 7);
        main.descriptor = "([Ljava/lang/String;)V".to_owned();
        main
    }

    /// The stacks of a profile as names, outermost first, `;`-joined (an
    /// unresolved location as `[file+0xaddress]`), with their totals.
    fn collapsed(d: &pb::ProfilesDictionary, p: &pb::Profile) -> Vec<(String, i64)> {
        let mut out: Vec<(String, i64)> = Vec::new();
        for s in &p.samples {
            let mut names = Vec::new();
            for &l in &d.stack_table[s.stack_index as usize].location_indices {
                let location = &d.location_table[l as usize];
                if location.lines.is_empty() {
                    let mapping = &d.mapping_table[location.mapping_index as usize];
                    names.push(format!("[{}+{:#x}]", strings(d, mapping.filename_strindex), location.address));
                }
                for line in &location.lines {
                    names.push(strings(d, d.function_table[line.function_index as usize].name_strindex).to_owned());
                }
            }
            names.reverse();
            let stack = names.join(";");
            match out.iter_mut().find(|(k, _)| *k == stack) {
                Some(entry) => entry.1 += s.values[0],
                None => out.push((stack, s.values[0])),
            }
        }
        out
    }

    #[test]
    fn every_table_starts_with_its_zero_entry_and_strings_are_interned_once() {
        let frames = vec![java("app/Work", "run", 3), main_frame()];
        let rec = recording(vec![sample("t1", 2, frames.clone()), sample("t2", 1, frames)], vec![]);
        let request = decode(&encode_request(&rec, &OtlpOptions::default()));
        let d = request.dictionary.as_ref().unwrap();
        assert_eq!(d.string_table[0], "");
        assert_eq!(d.mapping_table[0], pb::Mapping::default());
        assert_eq!(d.location_table[0], pb::Location::default());
        assert_eq!(d.function_table[0], pb::Function::default());
        assert_eq!(d.link_table[0], pb::Link::default());
        assert_eq!(d.attribute_table[0], pb::KeyValueAndUnit::default());
        assert_eq!(d.stack_table[0], pb::Stack::default());
        let mut seen = std::collections::HashSet::new();
        assert!(d.string_table.iter().all(|s| seen.insert(s)), "{:?}", d.string_table);
        // Two threads, one stack: one stack entry, two samples.
        assert_eq!(d.stack_table.len(), 2);
        let p = &request.resource_profiles[0].scope_profiles[0].profiles[0];
        assert_eq!(p.samples.len(), 2);
        assert!(p.samples.iter().all(|s| s.stack_index == 1 && s.link_index == 0));
        // Java frames: dotted names, the JVM's name as system name, lines.
        let names: Vec<(&str, &str)> = d.function_table[1..]
            .iter()
            .map(|f| (strings(d, f.name_strindex), strings(d, f.system_name_strindex)))
            .collect();
        assert_eq!(
            names,
            [("app.Work.run", "app/Work.run()V"), ("app.Main.main", "app/Main.main([Ljava/lang/String;)V")]
        );
        let lines: Vec<i64> = d.location_table[1..].iter().map(|l| l.lines[0].line).collect();
        assert_eq!(lines, [3, 7]);
        let location = &d.location_table[1];
        let frame_type = &d.attribute_table[location.attribute_indices[0] as usize];
        assert_eq!(strings(d, frame_type.key_strindex), "profile.frame.type");
        assert_eq!(frame_type.value, Some(string_value("jvm".to_owned())));
    }

    #[test]
    fn an_unresolved_remote_frame_is_its_librarys_build_id_and_address() {
        let frames = vec![remote(LIB, 0x1a2b), native("JNI_call"), main_frame()];
        let rec = recording(vec![sample("t", 3, frames)], vec![library("/opt/app/libremote.so", LIB)]);
        let request = decode(&encode_request(&rec, &OtlpOptions::default()));
        let d = request.dictionary.as_ref().unwrap();
        assert_eq!(d.mapping_table.len(), 2);
        let mapping = &d.mapping_table[1];
        assert_eq!(strings(d, mapping.filename_strindex), "libremote.so");
        let build_id = &d.attribute_table[mapping.attribute_indices[0] as usize];
        assert_eq!(strings(d, build_id.key_strindex), BUILD_ID_ATTRIBUTE);
        assert_eq!(build_id.value, Some(string_value(LIB.to_owned())));
        let p = &request.resource_profiles[0].scope_profiles[0].profiles[0];
        let stack = &d.stack_table[p.samples[0].stack_index as usize];
        let leaf = &d.location_table[stack.location_indices[0] as usize];
        // No lines: nothing claims to know the function.
        assert_eq!((leaf.mapping_index, leaf.address, leaf.lines.len()), (1, 0x1a2b, 0));
        let native = &d.location_table[stack.location_indices[1] as usize];
        assert_eq!(native.mapping_index, 0);
        let kinds: Vec<&str> = stack
            .location_indices
            .iter()
            .map(|&l| {
                let attribute = &d.attribute_table[d.location_table[l as usize].attribute_indices[0] as usize];
                match &attribute.value.as_ref().unwrap().value {
                    Some(any_value::Value::StringValue(s)) => s.as_str(),
                    other => panic!("{other:?}"),
                }
            })
            .collect();
        assert_eq!(kinds, ["native", "native", "jvm"]);
        // Named as `collapsed` names it.
        assert_eq!(collapsed(d, p), [("app.Main.main;JNI_call;[libremote.so+0x1a2b]".to_owned(), 3)]);
    }

    #[test]
    fn a_resolved_remote_frame_keeps_its_mapping_and_gains_its_lines() {
        let tree = scratch_dir("otlp_resolved");
        link_in_build_id_tree(&tree, LIB, &std::env::current_exe().unwrap());
        let mut resolver = Resolver::new(crate::debuginfo::Locator::new(&[tree], &[], None).0);
        let address = known_function_address();
        let rec = recording(vec![sample("t", 2, vec![remote(LIB, address), main_frame()])], vec![]);
        let (request, reports) = build_request(&rec, &OtlpOptions::default(), Some(&mut resolver));
        assert_eq!(reports[0].remote_frames, 2);
        let d = request.dictionary.as_ref().unwrap();
        let p = &request.resource_profiles[0].scope_profiles[0].profiles[0];
        let leaf = &d.location_table[d.stack_table[p.samples[0].stack_index as usize].location_indices[0] as usize];
        assert_eq!((leaf.mapping_index, leaf.address), (1, address));
        let function = &d.function_table[leaf.lines.last().unwrap().function_index as usize];
        assert!(strings(d, function.name_strindex).ends_with("known_function"));
        assert!(strings(d, function.filename_strindex).ends_with("src/testing.rs"));
        assert_eq!(strings(d, function.system_name_strindex), "");
    }

    #[test]
    fn each_kind_is_a_profile_whose_values_add_up_to_the_collapsed_weights() {
        let work = || vec![java("app/Work", "run", 3), main_frame()];
        let wall = SampleData { kind: EventKind::Wall, event: "profiler.WallClockSample", ..sample("t", 4, work()) };
        let alloc = SampleData {
            kind: EventKind::Alloc,
            event: "jdk.ObjectAllocationSample",
            leaf: Some(("byte[]".to_owned(), FrameType::Kernel)),
            ..sample("t", 4096, work())
        };
        let mut all = chunk(vec![sample("t", 2, work()), wall, sample("u", 3, work()), alloc], vec![]);
        all.settings =
            vec![("interval".to_owned(), "1000000 ns".to_owned()), ("wall".to_owned(), "5000000 ns".to_owned())];
        let rec = recording_of(vec![all]);
        let request = decode(&encode_request(&rec, &OtlpOptions::default()));
        let d = request.dictionary.as_ref().unwrap();
        let profiles = &request.resource_profiles[0].scope_profiles[0].profiles;
        let summary: Vec<(&str, &str, &str, &str, i64, i64)> = profiles
            .iter()
            .map(|p| {
                let (st, pt) = (p.sample_type.as_ref().unwrap(), p.period_type.as_ref().unwrap());
                (
                    strings(d, st.type_strindex),
                    strings(d, st.unit_strindex),
                    strings(d, pt.type_strindex),
                    strings(d, pt.unit_strindex),
                    p.period,
                    p.samples.iter().map(|s| s.values[0]).sum(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("samples", "count", "cpu", "nanoseconds", 1_000_000, 5),
                ("wall", "nanoseconds", "wall", "nanoseconds", 5_000_000, 20_000_000),
                ("alloc_space", "bytes", "space", "bytes", 0, 4096),
            ]
        );
        for (kind, p) in [EventKind::Cpu, EventKind::Wall, EventKind::Alloc].into_iter().zip(profiles) {
            let (built, _) = profile::build(&rec, kind, None);
            let factor = if kind == EventKind::Wall { 5_000_000 } else { 1 };
            let expected: Vec<(String, i64)> = crate::collapsed::collapse(&built, false)
                .lines()
                .map(|l| {
                    let (stack, weight) = l.rsplit_once(' ').unwrap();
                    (stack.to_owned(), weight.parse::<i64>().unwrap() * factor)
                })
                .collect();
            assert_eq!(collapsed(d, p), expected, "{kind}");
        }
        // One kind asked for: one profile.
        let only = OtlpOptions { event: Some(EventKind::Alloc), ..OtlpOptions::default() };
        let request = decode(&encode_request(&rec, &only));
        assert_eq!(request.resource_profiles[0].scope_profiles[0].profiles.len(), 1);
        let none = OtlpOptions { event: Some(EventKind::Lock), ..OtlpOptions::default() };
        assert!(decode(&encode_request(&rec, &none)).resource_profiles[0].scope_profiles[0].profiles.is_empty());
    }

    #[test]
    fn samples_under_different_spans_stay_apart_and_link_their_span() {
        let frames = || vec![java("app/Work", "run", 3), main_frame()];
        let rec = recording(
            vec![
                traced("t", 1, 0x00f0_67aa_0ba9_02b7, frames()),
                traced("t", 2, 0x00f0_67aa_0ba9_02b7, frames()),
                traced("t", 4, 0x42, frames()),
                traced("t", 8, 0, frames()),
            ],
            vec![],
        );
        let request = decode(&encode_request(&rec, &OtlpOptions::default()));
        let d = request.dictionary.as_ref().unwrap();
        let p = &request.resource_profiles[0].scope_profiles[0].profiles[0];
        let samples: Vec<(i32, i64)> = p.samples.iter().map(|s| (s.link_index, s.values[0])).collect();
        assert_eq!(samples, [(1, 3), (2, 4), (0, 8)]);
        assert_eq!(d.link_table[1].span_id, [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]);
        assert_eq!(d.link_table[1].trace_id, [0; 16]);
        // The thread: its name and Java id.
        let attributes: Vec<(&str, Option<&any_value::Value>)> = p.samples[0]
            .attribute_indices
            .iter()
            .map(|&a| {
                let kv = &d.attribute_table[a as usize];
                (strings(d, kv.key_strindex), kv.value.as_ref().and_then(|v| v.value.as_ref()))
            })
            .collect();
        assert_eq!(
            attributes,
            [
                ("thread.name", Some(&any_value::Value::StringValue("t".to_owned()))),
                ("thread.id", Some(&any_value::Value::IntValue(1)))
            ]
        );
    }

    /// Two native threads of one name (no Java thread id) read the same:
    /// their samples of one stack are one sample, as the .proto asks.
    #[test]
    fn threads_that_read_the_same_share_their_samples() {
        let on = |os_id: i64, weight: u64| {
            let mut data = sample("GC Thread#0", weight, vec![native("do_work")]);
            (data.thread.java_name, data.thread.java_id, data.thread.os_id) = (None, 0, os_id);
            data
        };
        let rec = recording(vec![on(11, 2), on(12, 5)], vec![]);
        assert_eq!(rec.threads.len(), 2);
        let request = decode(&encode_request(&rec, &OtlpOptions::default()));
        let p = &request.resource_profiles[0].scope_profiles[0].profiles[0];
        let samples: Vec<(usize, i64)> = p.samples.iter().map(|s| (s.attribute_indices.len(), s.values[0])).collect();
        assert_eq!(samples, [(1, 7)]);
    }

    #[test]
    fn the_resource_names_the_service_and_the_runtime() {
        let rec = recording(vec![sample("main", 1, vec![java("app/Work", "run", 3), main_frame()])], vec![]);
        let resource = |options: &OtlpOptions| -> Vec<(String, String)> {
            let request = decode(&encode_request(&rec, options));
            let rp = &request.resource_profiles[0];
            assert_eq!(rp.scope_profiles[0].scope.as_ref().unwrap().name, SCOPE_NAME);
            rp.resource
                .as_ref()
                .unwrap()
                .attributes
                .iter()
                .map(|kv| match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                    Some(any_value::Value::StringValue(s)) => (kv.key.clone(), s.clone()),
                    other => panic!("{other:?}"),
                })
                .collect()
        };
        let pair = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        assert_eq!(
            resource(&OtlpOptions::default()),
            [pair("service.name", "app.Main"), pair("process.runtime.name", "java")]
        );
        let options = OtlpOptions {
            service: Some("checkout".to_owned()),
            attributes: vec![pair("deployment.environment.name", "test"), pair("process.runtime.name", "openjdk")],
            event: None,
        };
        assert_eq!(
            resource(&options),
            [
                pair("service.name", "checkout"),
                pair("process.runtime.name", "openjdk"),
                pair("deployment.environment.name", "test")
            ]
        );
        let anonymous = recording(vec![sample("t", 1, vec![native("start_thread")])], vec![]);
        assert_eq!(main_class(&anonymous), None);
        assert_eq!(resource_attributes(&anonymous, &OtlpOptions::default())[0], pair("service.name", "java"));
    }

    #[test]
    fn a_cut_stack_and_an_allocated_class_are_frames_of_their_own() {
        let mut alloc = SampleData {
            kind: EventKind::Alloc,
            event: "jdk.ObjectAllocationSample",
            leaf: Some(("byte[]".to_owned(), FrameType::Kernel)),
            truncated: true,
            ..sample("t", 64, vec![java("app/Work", "run", 3)])
        };
        alloc.thread.java_id = 0;
        let rec = recording(vec![alloc], vec![]);
        let request = decode(&encode_request(&rec, &OtlpOptions::default()));
        let d = request.dictionary.as_ref().unwrap();
        let p = &request.resource_profiles[0].scope_profiles[0].profiles[0];
        assert_eq!(collapsed(d, p), [("[truncated];app.Work.run;byte[]".to_owned(), 64)]);
        // Neither the class nor the marker is a frame of any runtime; no
        // Java thread id.
        let stack = &d.stack_table[p.samples[0].stack_index as usize];
        let typed: Vec<bool> = stack
            .location_indices
            .iter()
            .map(|&l| !d.location_table[l as usize].attribute_indices.is_empty())
            .collect();
        assert_eq!(typed, [false, true, false]);
        assert_eq!(p.samples[0].attribute_indices.len(), 1);
    }
}
