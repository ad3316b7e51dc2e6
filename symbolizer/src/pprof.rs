//! The pprof format (`profile.proto` of github.com/google/pprof), gzipped
//! as `go tool pprof` and most viewers expect. Messages are declared by
//! hand with prost's derive (no build step); field numbers follow
//! profile.proto.

use crate::profile::Profile;
use flate2::write::GzEncoder;
use std::collections::HashMap;
use std::io::Write;

#[derive(Clone, PartialEq, prost::Message)]
pub struct PprofProfile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    pub period: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    #[prost(int64, tag = "1")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    pub str: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    #[prost(int64, tag = "5")]
    pub filename: i64,
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// Innermost (inlined) first; the last is the caller they were inlined into.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    #[prost(int64, tag = "2")]
    pub line: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
}

#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Self {
        let mut s = Strings::default();
        s.id(""); // index 0 is the empty string
        s
    }

    fn id(&mut self, text: &str) -> i64 {
        if let Some(&i) = self.index.get(text) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(text.to_owned());
        self.index.insert(text.to_owned(), i);
        i
    }
}

/// Builds the pprof message: one location per distinct frame (remote
/// frames of one address share a location, their inline chain as lines),
/// one mapping per build-id, samples labelled with their thread.
pub fn to_pprof(profile: &Profile, period_nanos: i64) -> PprofProfile {
    let mut strings = Strings::new();
    let mut out = PprofProfile {
        sample_type: vec![ValueType { r#type: strings.id("samples"), unit: strings.id("count") }],
        period_type: Some(ValueType { r#type: strings.id("cpu"), unit: strings.id("nanoseconds") }),
        period: period_nanos,
        ..Default::default()
    };
    let mut functions: HashMap<(String, Option<String>), u64> = HashMap::new();
    let mut mappings: HashMap<String, u64> = HashMap::new();
    let mut locations: HashMap<Vec<u32>, u64> = HashMap::new();
    let thread_key = strings.id("thread");
    for sample in &profile.samples {
        // An inline chain (frames inlined into the next) forms one location.
        let mut groups: Vec<Vec<u32>> = Vec::new();
        let mut open = false;
        for &f in &sample.stack {
            match groups.last_mut() {
                Some(group) if open => group.push(f),
                _ => groups.push(vec![f]),
            }
            open = profile.frames[f as usize].inlined;
        }
        let mut location_ids = Vec::with_capacity(groups.len());
        for group in groups {
            let next_id = locations.len() as u64 + 1;
            let id = *locations.entry(group.clone()).or_insert(next_id);
            if id == next_id {
                let first = &profile.frames[group[0] as usize];
                let (mapping_id, address) = match &first.remote {
                    Some((build_id, offset)) => {
                        let next = mappings.len() as u64 + 1;
                        let mapping = *mappings.entry(build_id.clone()).or_insert(next);
                        if mapping == next {
                            out.mapping.push(Mapping {
                                id: mapping,
                                filename: strings.id(build_id),
                                build_id: strings.id(build_id),
                                has_functions: true,
                                ..Default::default()
                            });
                        }
                        (mapping, *offset)
                    }
                    None => (0, 0),
                };
                let lines = group
                    .iter()
                    .map(|&f| {
                        let frame = &profile.frames[f as usize];
                        let key = (frame.name.clone(), frame.file.clone());
                        let next = functions.len() as u64 + 1;
                        let function_id = *functions.entry(key).or_insert(next);
                        if function_id == next {
                            let name = strings.id(&frame.name);
                            let filename = frame.file.as_deref().map_or(0, |f| strings.id(f));
                            out.function.push(Function { id: function_id, name, system_name: name, filename });
                        }
                        Line { function_id, line: frame.line.map_or(0, i64::from) }
                    })
                    .collect();
                out.location.push(Location { id, mapping_id, address, line: lines });
            }
            location_ids.push(id);
        }
        out.sample.push(Sample {
            location_id: location_ids,
            value: vec![sample.weight as i64],
            label: vec![Label { key: thread_key, str: strings.id(&sample.thread) }],
        });
    }
    out.string_table = strings.table;
    out
}

/// The gzipped, encoded profile.
pub fn encode(profile: &PprofProfile) -> Vec<u8> {
    let bytes = prost::Message::encode_to_vec(profile);
    let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&bytes).expect("writing to memory");
    gz.finish().expect("writing to memory")
}
