//! The pprof format (`profile.proto` of github.com/google/pprof), gzipped
//! as `go tool pprof` and most viewers expect. Messages are declared by
//! hand with prost's derive (no build step); field numbers follow
//! profile.proto.

use crate::events::EventKind;
use crate::profile::Profile;
use flate2::write::GzEncoder;
use rustc_hash::FxHashMap;
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
    index: FxHashMap<String, i64>,
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

/// The sample type of a profile of `kind` (the names Go's profiles use),
/// and for sampled time the period's type.
fn value_types(kind: EventKind) -> ((&'static str, &'static str), Option<(&'static str, &'static str)>) {
    match kind {
        EventKind::Cpu => (("samples", "count"), Some(("cpu", "nanoseconds"))),
        EventKind::Wall => (("samples", "count"), Some(("wall", "nanoseconds"))),
        EventKind::Alloc => (("alloc_space", "bytes"), None),
        EventKind::Live => (("inuse_space", "bytes"), None),
        EventKind::Lock => (("delay", "nanoseconds"), None),
        EventKind::NativeMem => (("malloc_space", "bytes"), None),
    }
}

/// Builds the pprof message: one location per distinct frame (remote
/// frames of one address share a location, their inline chain as lines),
/// one mapping per build-id, samples labelled with their thread. The
/// period (the sampling interval, for CPU and wall-clock profiles) is
/// `period_nanos`.
pub fn to_pprof(profile: &Profile, period_nanos: i64) -> PprofProfile {
    let mut strings = Strings::new();
    let ((sample_type, sample_unit), period) = value_types(profile.kind);
    let mut out = PprofProfile {
        sample_type: vec![ValueType { r#type: strings.id(sample_type), unit: strings.id(sample_unit) }],
        period_type: period.map(|(kind, unit)| ValueType { r#type: strings.id(kind), unit: strings.id(unit) }),
        period: if period.is_some() { period_nanos } else { 0 },
        ..Default::default()
    };
    let mut functions: FxHashMap<(String, Option<String>), u64> = FxHashMap::default();
    let mut mappings: FxHashMap<String, u64> = FxHashMap::default();
    let mut locations: FxHashMap<&[u32], u64> = FxHashMap::default();
    let thread_key = strings.id("thread");
    for sample in &profile.samples {
        // An inline chain (frames inlined into the next) forms one
        // location: a group ends at a frame not inlined, or the root.
        let mut location_ids = Vec::new();
        let mut start = 0;
        for (i, &f) in sample.stack.iter().enumerate() {
            if profile.frames[f as usize].inlined && i + 1 < sample.stack.len() {
                continue;
            }
            let group = &sample.stack[start..=i];
            start = i + 1;
            let next_id = locations.len() as u64 + 1;
            let id = *locations.entry(group).or_insert(next_id);
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
    // Fastest compression, as Go's runtime/pprof writes its profiles.
    let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&bytes).expect("writing to memory");
    gz.finish().expect("writing to memory")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{ProfileSample, StackFrame};
    use crate::testing::{INTERPRETED, NATIVE};
    use std::io::Read;

    const LIB: &str = "0123456789abcdef0123456789abcdef01234567";

    fn frame(name: &str, file: Option<&str>, line: u32, remote: Option<u64>, inlined: bool) -> StackFrame {
        StackFrame {
            name: name.to_owned(),
            kind: if remote.is_some() { NATIVE } else { INTERPRETED },
            file: file.map(str::to_owned),
            line: Some(line),
            remote: remote.map(|offset| (LIB.to_owned(), offset)),
            inlined,
        }
    }

    /// Two threads; a remote inline chain (`inner` inlined into `outer` at
    /// 0x40), a remote frame of its own (0x80), and a Java frame.
    fn profile() -> Profile {
        let mut profile = Profile::default();
        let inner = profile.intern(frame("inner", Some("a.c"), 3, Some(0x40), true));
        let outer = profile.intern(frame("outer", Some("a.c"), 10, Some(0x40), false));
        let other = profile.intern(frame("other", Some("b.c"), 20, Some(0x80), false));
        let main = profile.intern(frame("app.Main.main", None, 7, None, false));
        for (thread, weight, stack) in
            [("t1", 2, vec![inner, outer, main]), ("t2", 5, vec![other, main]), ("t1", 1, vec![inner, outer, main])]
        {
            profile.samples.push(ProfileSample { thread: thread.to_owned(), weight, events: 1, stack });
        }
        profile
    }

    fn decode(bytes: &[u8]) -> PprofProfile {
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(bytes).read_to_end(&mut raw).expect("gzip");
        <PprofProfile as prost::Message>::decode(raw.as_slice()).expect("a profile message")
    }

    #[test]
    fn allocation_and_lock_profiles_have_their_own_sample_types_and_no_period() {
        for (kind, expected) in [
            (EventKind::Alloc, ("alloc_space", "bytes")),
            (EventKind::Lock, ("delay", "nanoseconds")),
            (EventKind::NativeMem, ("malloc_space", "bytes")),
        ] {
            let mut profile = profile();
            profile.kind = kind;
            let p = to_pprof(&profile, 10_000_000);
            let s = |i: i64| p.string_table[i as usize].as_str();
            assert_eq!((s(p.sample_type[0].r#type), s(p.sample_type[0].unit)), expected);
            assert_eq!((p.period_type.clone(), p.period), (None, 0));
            assert_eq!(p.sample.iter().map(|x| x.value[0]).sum::<i64>(), 8);
        }
        let mut wall = profile();
        wall.kind = EventKind::Wall;
        let p = to_pprof(&wall, 5_000_000);
        let period = p.period_type.as_ref().unwrap();
        assert_eq!((p.string_table[period.r#type as usize].as_str(), p.period), ("wall", 5_000_000));
    }

    #[test]
    fn the_encoded_profile_decodes_to_the_built_message() {
        let built = to_pprof(&profile(), 10_000_000);
        assert_eq!(decode(&encode(&built)), built);
    }

    #[test]
    fn locations_group_inline_chains_under_one_mapping_per_build_id() {
        let p = decode(&encode(&to_pprof(&profile(), 10_000_000)));
        let s = |i: i64| p.string_table[i as usize].as_str();
        assert_eq!(s(0), "");
        assert_eq!((s(p.sample_type[0].r#type), s(p.sample_type[0].unit)), ("samples", "count"));
        let period = p.period_type.as_ref().unwrap();
        assert_eq!((s(period.r#type), s(period.unit), p.period), ("cpu", "nanoseconds", 10_000_000));

        assert_eq!(p.mapping.len(), 1);
        let mapping = &p.mapping[0];
        assert_eq!((mapping.id, s(mapping.filename), s(mapping.build_id), mapping.has_functions), (1, LIB, LIB, true));

        // The chain, the other remote frame, the Java frame.
        let function = |id: u64| {
            let f = p.function.iter().find(|f| f.id == id).unwrap();
            (s(f.name), s(f.filename))
        };
        let lines = |l: &Location| -> Vec<(&str, &str, i64)> {
            l.line.iter().map(|line| (function(line.function_id).0, function(line.function_id).1, line.line)).collect()
        };
        // Numbered in order of first use.
        assert_eq!(p.location.iter().map(|l| l.id).collect::<Vec<_>>(), [1, 2, 3]);
        let (chain, java, other) = (&p.location[0], &p.location[1], &p.location[2]);
        assert_eq!((chain.mapping_id, chain.address), (1, 0x40));
        assert_eq!(lines(chain), [("inner", "a.c", 3), ("outer", "a.c", 10)]);
        assert_eq!((java.mapping_id, java.address), (0, 0));
        assert_eq!(lines(java), [("app.Main.main", "", 7)]);
        assert_eq!((other.mapping_id, other.address), (1, 0x80));
        assert_eq!(lines(other), [("other", "b.c", 20)]);
        assert_eq!(p.function.len(), 4);

        // Samples: locations innermost first, weight, thread label.
        let samples: Vec<(Vec<u64>, Vec<i64>, &str, &str)> = p
            .sample
            .iter()
            .map(|x| (x.location_id.clone(), x.value.clone(), s(x.label[0].key), s(x.label[0].str)))
            .collect();
        assert_eq!(
            samples,
            [
                (vec![chain.id, java.id], vec![2], "thread", "t1"),
                (vec![other.id, java.id], vec![5], "thread", "t2"),
                (vec![chain.id, java.id], vec![1], "thread", "t1"),
            ]
        );
    }
}
