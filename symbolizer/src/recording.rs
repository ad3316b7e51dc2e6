//! Reading recordings (ours in either dialect, async-profiler's, the
//! JDK's) with the bounded reader [`crate::jfr_in`] into plain data: per
//! chunk, its clock, its sample events of every kind ([`EventKind`]) with
//! their stacks and weights, the frees of native allocations, its
//! endpoints, settings and counters, and the native libraries it lists.
//! Frames, stacks, threads and strings are interned once per recording and samples refer to them by index, so a
//! recording takes memory in proportion to its distinct stacks, not to
//! samples times depth; each constant (a stack trace, a method) is
//! converted once, not once per event that uses it. A chunk is read whole
//! or not at all: a damaged one is left out and described ([`Damage`]); a
//! file without one complete chunk is not a recording
//! ([`ReadError::NotARecording`]).

use crate::events::{event_type, java_class_name, EventKind, EventType, Weight};
use crate::jfr_in::{self, Accessor, Pooled, Split};
use frames::{FrameType, NON_JAVA_DESCRIPTOR, REMOTE_METHOD_NAME};
use jfr_writer::schema::names;
use rustc_hash::FxHashMap;
use std::collections::HashMap;
use std::hash::Hash;
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
        let (_, offset) = self.unnamed_library()?;
        Some((build_id, offset))
    }

    /// A native frame the agent could not name: `[library+0xoffset]` of
    /// class `library`; its library and offset.
    pub fn unnamed_library(&self) -> Option<(&str, u64)> {
        if self.class.is_empty() || !matches!(self.kind, Some(FrameType::Native | FrameType::Cpp)) {
            return None;
        }
        let offset = self.method.strip_prefix('[')?.strip_suffix(']')?.strip_prefix(self.class.as_str())?;
        Some((&self.class, u64::from_str_radix(offset.strip_prefix("+0x")?, 16).ok()?))
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClassLeaf {
    /// Index into [`Recording::strings`]: the class as Java source names
    /// it (`byte[]`, `java.lang.Object`).
    pub class: u32,
    /// How async-profiler colours it: inlined for a TLAB allocation and a
    /// lock's class, kernel for an allocation outside a TLAB.
    pub kind: FrameType,
}

/// A stack as recorded: indexes into [`Recording::frames`], innermost
/// first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Stack {
    pub frames: Box<[u32]>,
    pub truncated: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub event: &'static str,
    pub kind: EventKind,
    pub start_ticks: i64,
    /// Index into [`Recording::threads`].
    pub thread: u32,
    /// Index into [`Recording::strings`].
    pub state: u32,
    /// In the kind's unit: intervals, bytes or nanoseconds.
    pub weight: u64,
    pub leaf: Option<ClassLeaf>,
    pub span_id: u64,
    pub root_span_id: u64,
    /// Index into [`Recording::contexts`]: values of the chunk's context
    /// attributes, in order (0: none).
    pub context: u32,
    /// Index into [`Recording::stacks`].
    pub stack: u32,
    /// The address a native allocation returned, and the bytes it asked
    /// for (0 for other kinds).
    pub address: u64,
    pub size: u64,
}

/// A `profiler.Free`: the end of the native allocation at `address`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Free {
    pub start_ticks: i64,
    /// Index into [`Recording::threads`].
    pub thread: u32,
    pub address: u64,
    /// How many of its chunk's samples were read before it: where it lies
    /// among them in the file, which orders it against an allocation of
    /// the same tick.
    pub after: u32,
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

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Clock {
    pub start_nanos: i64,
    pub start_ticks: i64,
    pub ticks_per_second: i64,
    pub duration_nanos: i64,
}

impl Clock {
    /// When the chunk's tick `ticks` was, in unix nanoseconds (a tick
    /// before the chunk's start reads as its start).
    pub fn nanos_at(&self, ticks: i64) -> i64 {
        let since = ticks_to_nanos(ticks.saturating_sub(self.start_ticks), self.ticks_per_second);
        self.start_nanos.saturating_add(i64::try_from(since).unwrap_or(i64::MAX))
    }
}

#[derive(Clone, Debug, Default)]
pub struct Chunk {
    pub clock: Clock,
    /// Context attribute names (the `attributes` setting).
    pub attributes: Vec<String>,
    pub samples: Vec<Sample>,
    /// In the order read, `after` never decreasing.
    pub frees: Vec<Free>,
    pub endpoints: Vec<Endpoint>,
    pub settings: Vec<(String, String)>,
    pub counters: Vec<(String, i64)>,
    pub libraries: Vec<NativeLibrary>,
}

impl Chunk {
    /// Keeps the samples whose flag in `keep` (one per sample) is set;
    /// each free keeps its place among those kept.
    pub fn keep_samples(&mut self, keep: &[bool]) {
        debug_assert_eq!(keep.len(), self.samples.len());
        // Samples kept before each place among them: a free's new place.
        let mut before = Vec::with_capacity(keep.len() + 1);
        let mut kept = 0u32;
        for &k in keep {
            before.push(kept);
            kept += u32::from(k);
        }
        before.push(kept);
        for free in &mut self.frees {
            free.after = before[(free.after as usize).min(keep.len())];
        }
        let mut flags = keep.iter();
        self.samples.retain(|_| flags.next().copied().unwrap_or(true));
    }
}

/// A sample with its stack, thread and strings spelled out: what tests
/// build recordings from and compare them by.
#[derive(Clone, Debug, PartialEq)]
pub struct SampleData {
    pub event: &'static str,
    pub kind: EventKind,
    pub start_ticks: i64,
    pub thread: Thread,
    pub state: String,
    pub weight: u64,
    /// The leaf class's name and colour.
    pub leaf: Option<(String, FrameType)>,
    pub span_id: u64,
    pub root_span_id: u64,
    pub attributes: Vec<Option<String>>,
    pub truncated: bool,
    /// Innermost first.
    pub frames: Vec<Frame>,
    pub address: u64,
    pub size: u64,
}

/// A recording's chunks and the tables their samples refer to.
#[derive(Clone, Debug)]
pub struct Recording {
    pub chunks: Vec<Chunk>,
    pub frames: Vec<Frame>,
    pub stacks: Vec<Stack>,
    pub threads: Vec<Thread>,
    /// Thread states and class names.
    pub strings: Vec<String>,
    /// Context attribute values; the first is the empty list.
    pub contexts: Vec<Box<[Option<String>]>>,
}

impl Default for Recording {
    fn default() -> Self {
        Self {
            chunks: Vec::new(),
            frames: Vec::new(),
            stacks: Vec::new(),
            threads: Vec::new(),
            strings: Vec::new(),
            contexts: vec![Box::default()],
        }
    }
}

impl Recording {
    /// Samples of every kind.
    pub fn samples(&self) -> impl Iterator<Item = &Sample> {
        self.chunks.iter().flat_map(|c| c.samples.iter())
    }

    pub fn stack(&self, sample: &Sample) -> &Stack {
        &self.stacks[sample.stack as usize]
    }

    /// A sample's frames, innermost first.
    pub fn frames_of(&self, sample: &Sample) -> impl ExactSizeIterator<Item = &Frame> + '_ {
        self.stacks[sample.stack as usize].frames.iter().map(|&f| &self.frames[f as usize])
    }

    pub fn thread(&self, sample: &Sample) -> &Thread {
        &self.threads[sample.thread as usize]
    }

    pub fn state(&self, sample: &Sample) -> &str {
        &self.strings[sample.state as usize]
    }

    pub fn leaf_class(&self, leaf: &ClassLeaf) -> &str {
        &self.strings[leaf.class as usize]
    }

    pub fn attributes(&self, sample: &Sample) -> &[Option<String>] {
        &self.contexts[sample.context as usize]
    }

    /// A sample spelled out.
    pub fn data(&self, sample: &Sample) -> SampleData {
        SampleData {
            event: sample.event,
            kind: sample.kind,
            start_ticks: sample.start_ticks,
            thread: self.thread(sample).clone(),
            state: self.state(sample).to_owned(),
            weight: sample.weight,
            leaf: sample.leaf.map(|leaf| (self.leaf_class(&leaf).to_owned(), leaf.kind)),
            span_id: sample.span_id,
            root_span_id: sample.root_span_id,
            attributes: self.attributes(sample).to_vec(),
            truncated: self.stack(sample).truncated,
            frames: self.frames_of(sample).cloned().collect(),
            address: sample.address,
            size: sample.size,
        }
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

    /// Gives local frames the agent could not name (`[libc.so.6+0x1a2b]`
    /// of class `libc.so.6`: no symbol covered the address on the host)
    /// their library's build-id from the recording's library list, so that
    /// they resolve offline like remote frames and are reported with them.
    fn attach_build_ids(&mut self) {
        let mut by_name: HashMap<&str, &str> = HashMap::new();
        for library in self.chunks.iter().flat_map(|c| &c.libraries) {
            if let Some(build_id) = &library.build_id {
                by_name.insert(library.name.rsplit('/').next().unwrap_or(&library.name), build_id);
            }
        }
        for frame in self.frames.iter_mut().filter(|f| f.build_id.is_none() && f.unnamed_library().is_some()) {
            frame.build_id = by_name.get(frame.class.as_str()).map(|id| (*id).to_owned());
        }
    }

    /// Keeps the samples (and frees) taken within `window` (unix
    /// nanoseconds, from inclusive, to exclusive; an open end bounds
    /// nothing) and returns how many samples are kept.
    pub fn keep_window(&mut self, (from, to): (Option<i64>, Option<i64>)) -> usize {
        let mut kept = 0;
        for chunk in &mut self.chunks {
            let clock = chunk.clock;
            let inside = |ticks: i64| {
                let at = clock.nanos_at(ticks);
                from.is_none_or(|from| at >= from) && to.is_none_or(|to| at < to)
            };
            let keep: Vec<bool> = chunk.samples.iter().map(|s| inside(s.start_ticks)).collect();
            chunk.keep_samples(&keep);
            chunk.frees.retain(|free| inside(free.start_ticks));
            kept += chunk.samples.len();
        }
        kept
    }

    /// When its first chunk starts (unix nanoseconds).
    pub fn start_nanos(&self) -> i64 {
        self.chunks.first().map_or(0, |chunk| chunk.clock.start_nanos)
    }

    /// Several recordings as one: their chunks in order, their tables
    /// appended (indexes moved along).
    pub fn merge(recordings: impl IntoIterator<Item = Recording>) -> Recording {
        let mut merged = Recording { contexts: Vec::new(), ..Recording::default() };
        for mut recording in recordings {
            let base = |table: usize| table as u32;
            let (frames, stacks, threads, strings, contexts) = (
                base(merged.frames.len()),
                base(merged.stacks.len()),
                base(merged.threads.len()),
                base(merged.strings.len()),
                base(merged.contexts.len()),
            );
            for stack in &mut recording.stacks {
                stack.frames.iter_mut().for_each(|f| *f += frames);
            }
            for sample in recording.chunks.iter_mut().flat_map(|c| c.samples.iter_mut()) {
                sample.stack += stacks;
                sample.thread += threads;
                sample.state += strings;
                sample.context += contexts;
                if let Some(leaf) = &mut sample.leaf {
                    leaf.class += strings;
                }
            }
            for free in recording.chunks.iter_mut().flat_map(|c| c.frees.iter_mut()) {
                free.thread += threads;
            }
            merged.chunks.append(&mut recording.chunks);
            merged.frames.append(&mut recording.frames);
            merged.stacks.append(&mut recording.stacks);
            merged.threads.append(&mut recording.threads);
            merged.strings.append(&mut recording.strings);
            merged.contexts.append(&mut recording.contexts);
        }
        if merged.contexts.is_empty() {
            merged.contexts.push(Box::default());
        }
        merged
    }
}

/// A table of distinct values, each with its index.
struct Interned<T> {
    index: FxHashMap<T, u32>,
}

impl<T: Hash + Eq + Clone> Interned<T> {
    fn new() -> Self {
        Self { index: FxHashMap::default() }
    }

    /// `value`'s index in `table`, appended if new.
    fn get(&mut self, table: &mut Vec<T>, value: T) -> u32 {
        if let Some(&i) = self.index.get(&value) {
            return i;
        }
        let i = table.len() as u32;
        table.push(value.clone());
        self.index.insert(value, i);
        i
    }
}

/// Builds a [`Recording`]: interns its frames, stacks, threads and
/// strings as samples are added.
pub struct Builder {
    recording: Recording,
    frames: Interned<Frame>,
    stacks: Interned<Stack>,
    threads: Interned<Thread>,
    strings: Interned<String>,
    contexts: Interned<Box<[Option<String>]>>,
}

impl Default for Builder {
    fn default() -> Self {
        let mut contexts = Interned::new();
        contexts.index.insert(Box::default(), 0);
        Self {
            recording: Recording::default(),
            frames: Interned::new(),
            stacks: Interned::new(),
            threads: Interned::new(),
            strings: Interned::new(),
            contexts,
        }
    }
}

impl Builder {
    pub fn frame(&mut self, frame: Frame) -> u32 {
        self.frames.get(&mut self.recording.frames, frame)
    }

    pub fn stack(&mut self, stack: Stack) -> u32 {
        self.stacks.get(&mut self.recording.stacks, stack)
    }

    pub fn thread(&mut self, thread: Thread) -> u32 {
        self.threads.get(&mut self.recording.threads, thread)
    }

    pub fn string(&mut self, text: &str) -> u32 {
        match self.strings.index.get(text) {
            Some(&i) => i,
            None => self.strings.get(&mut self.recording.strings, text.to_owned()),
        }
    }

    pub fn context(&mut self, values: Vec<Option<String>>) -> u32 {
        if values.is_empty() {
            return 0;
        }
        self.contexts.get(&mut self.recording.contexts, values.into())
    }

    /// Frames (innermost first) as an interned stack.
    pub fn frames(&mut self, frames: Vec<Frame>, truncated: bool) -> u32 {
        let frames = frames.into_iter().map(|f| self.frame(f)).collect();
        self.stack(Stack { frames, truncated })
    }

    /// A spelled-out sample interned.
    pub fn sample(&mut self, data: SampleData) -> Sample {
        Sample {
            event: data.event,
            kind: data.kind,
            start_ticks: data.start_ticks,
            thread: self.thread(data.thread),
            state: self.string(&data.state),
            weight: data.weight,
            leaf: data.leaf.map(|(class, kind)| ClassLeaf { class: self.string(&class), kind }),
            span_id: data.span_id,
            root_span_id: data.root_span_id,
            context: self.context(data.attributes),
            stack: self.frames(data.frames, data.truncated),
            address: data.address,
            size: data.size,
        }
    }

    /// A free spelled out (its thread) interned.
    pub fn free(&mut self, start_ticks: i64, address: u64, thread: Thread, after: u32) -> Free {
        Free { start_ticks, thread: self.thread(thread), address, after }
    }

    pub fn push_chunk(&mut self, chunk: Chunk) {
        self.recording.chunks.push(chunk);
    }

    pub fn finish(self) -> Recording {
        self.recording
    }
}

/// The result of reading: what could be read (at least one chunk), and
/// the chunks that could not.
#[derive(Debug)]
pub struct ReadOutcome {
    pub recording: Recording,
    pub damage: Vec<Damage>,
    /// Keys read that no chunk of the file defines, read as null (as the
    /// JDK's parser reads them).
    pub undefined: u64,
}

/// A string field, also when it is a pooled simple type wrapping one
/// string (`jdk.types.Symbol`, `jdk.types.FrameType`,
/// `profiler.types.AttributeValue`, ...): at most a few wrappers deep, as
/// a damaged pool may wrap a value in itself.
fn string(accessor: Option<Accessor<'_>>) -> Option<String> {
    fn unwrap(accessor: Option<Accessor<'_>>, depth: usize) -> Option<String> {
        let value = accessor?;
        if let Some(s) = value.as_str() {
            return Some(s);
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

/// An event's `address` (an unsigned long).
fn address(event: &Accessor<'_>) -> u64 {
    long(event.get_field("address")).unwrap_or(0) as u64
}

fn boolean(accessor: Option<Accessor<'_>>) -> bool {
    accessor.and_then(|a| a.as_bool()) == Some(true)
}

/// An event's weight in its kind's unit.
fn weight(event_type: &EventType, event: &Accessor<'_>, clock: &Clock) -> u64 {
    match event_type.weight {
        Weight::Intervals(fields) => fields.iter().find_map(|f| long(event.get_field(f))).unwrap_or(1).max(1) as u64,
        Weight::Bytes(field) | Weight::SampledBytes(field) => long(event.get_field(field)).unwrap_or(0).max(0) as u64,
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

/// What a method constant says, as its frames need it.
struct Method {
    class: String,
    name: String,
    descriptor: String,
    modifiers: i32,
    /// Its class's package: a library's build-id for a remote frame in
    /// the JDK dialect.
    package: Option<String>,
}

/// The conversions kept in constants' memos ([`jfr_in::Memo`]), one per
/// kind of constant.
mod memo {
    pub const STACK: u8 = 0;
    pub const METHOD: u8 = 1;
    pub const THREAD: u8 = 2;
    pub const CLASS_NAME: u8 = 3;
    pub const STRING: u8 = 4;
    pub const FRAME_TYPE: u8 = 5;
}

/// Converts a file's events into a [`Recording`], each constant once.
struct Converter {
    builder: Builder,
    /// Methods as converted, by the index their constants' memos hold.
    methods: Vec<Method>,
    /// (method, line, bci, frame type) → frame.
    frame_keys: FxHashMap<(u32, i32, i32, u32), u32>,
    /// A frame's bytes in the chunk being read → frame (its keys are the
    /// chunk's, so it is cleared with each chunk): a frame's few bytes
    /// packed with their length into one integer.
    frame_bytes: FxHashMap<u128, u32>,
}

impl Converter {
    /// A pooled field's conversion: from the constant's memo, else made by
    /// `convert` and kept there. An inline field is converted each time.
    fn memoized(
        &mut self,
        event: &Accessor<'_>,
        field: &str,
        tag: u8,
        convert: impl FnOnce(&mut Self, Option<Accessor<'_>>) -> u32,
    ) -> u32 {
        let Some(pooled) = event.pooled(field) else {
            return convert(self, event.get_field(field));
        };
        memo(self, &pooled, tag, convert)
    }

    fn method(&mut self, method: Option<Accessor<'_>>) -> u32 {
        let Some(method) = method else {
            return u32::MAX;
        };
        let class_type = method.get_field("type");
        self.methods.push(Method {
            class: class_type.as_ref().and_then(|t| string(t.get_field("name"))).unwrap_or_default(),
            package: string(class_type.and_then(|t| t.get_field("package"))),
            name: string(method.get_field("name")).unwrap_or_else(|| "[unknown]".to_owned()),
            descriptor: string(method.get_field("descriptor")).unwrap_or_default(),
            modifiers: long(method.get_field("modifiers")).unwrap_or(0) as i32,
        });
        self.methods.len() as u32 - 1
    }

    /// The frame of these bytes of the chunk (`raw`), converted from
    /// `frame` the first time they are met.
    fn frame<'a>(&mut self, raw: Option<&[u8]>, frame: impl FnOnce() -> Accessor<'a>) -> u32 {
        let packed = raw
            .filter(|raw| raw.len() < 16)
            .map(|raw| raw.iter().fold(raw.len() as u128, |packed, &b| packed << 8 | u128::from(b)));
        if let Some(&id) = packed.and_then(|key| self.frame_bytes.get(&key)) {
            return id;
        }
        let id = self.convert_frame(frame());
        if let Some(key) = packed {
            self.frame_bytes.insert(key, id);
        }
        id
    }

    fn convert_frame(&mut self, frame: Accessor<'_>) -> u32 {
        let method = self.memoized(&frame, "method", memo::METHOD, Self::method);
        let kind = self.memoized(&frame, "type", memo::FRAME_TYPE, |_, t| {
            let kind = string(t).and_then(|d| FrameType::from_description(&d));
            kind.and_then(|k| FrameType::ALL.iter().position(|&t| t == k)).map_or(0, |i| i as u32 + 1)
        });
        let line = long(frame.get_field("lineNumber")).unwrap_or(-1) as i32;
        let bci = long(frame.get_field("bytecodeIndex")).unwrap_or(-1) as i32;
        if let Some(&id) = self.frame_keys.get(&(method, line, bci, kind)) {
            return id;
        }
        let kind_type = kind.checked_sub(1).and_then(|k| FrameType::ALL.get(k as usize).copied());
        let unknown = Method {
            class: String::new(),
            name: "[unknown]".to_owned(),
            descriptor: String::new(),
            modifiers: 0,
            package: None,
        };
        let m = self.methods.get(method as usize).unwrap_or(&unknown);
        // Only a native frame's package can be a build-id (Java packages hold '/' or are words).
        let native = matches!(kind_type, Some(FrameType::Native | FrameType::Cpp));
        let build_id = m
            .package
            .clone()
            .filter(|p| native && !p.is_empty() && p.len() % 2 == 0 && p.bytes().all(|b| b.is_ascii_hexdigit()));
        let converted = Frame {
            class: m.class.clone(),
            method: m.name.clone(),
            descriptor: m.descriptor.clone(),
            modifiers: m.modifiers,
            line,
            bci,
            kind: kind_type,
            build_id,
        };
        let id = self.builder.frame(converted);
        self.frame_keys.insert((method, line, bci, kind), id);
        id
    }

    fn stack(&mut self, stack: Option<Accessor<'_>>) -> u32 {
        let truncated = boolean(stack.as_ref().and_then(|s| s.get_field("truncated")));
        let frames = stack.and_then(|s| s.get_field("frames"));
        // Frames lie inline (their bytes found without reading them), but
        // in a writer that pooled them.
        let frames: Box<[u32]> = match (frames.as_ref().and_then(Accessor::inline_elements), &frames) {
            (Some(elements), Some(frames)) => {
                elements.map(|e| self.frame(Some(e.raw()), || frames.element(e))).collect()
            }
            _ => frames
                .and_then(Accessor::as_iter)
                .map(|f| f.map(|f| self.frame(f.raw(), || f)).collect())
                .unwrap_or_default(),
        };
        self.builder.stack(Stack { frames, truncated })
    }

    fn thread(&mut self, thread: Option<Accessor<'_>>) -> u32 {
        let thread = match thread {
            Some(t) => Thread {
                os_name: string(t.get_field("osName")).unwrap_or_default(),
                os_id: long(t.get_field("osThreadId")).unwrap_or(0),
                java_name: string(t.get_field("javaName")),
                java_id: long(t.get_field("javaThreadId")).unwrap_or(0),
            },
            None => Thread { os_name: "[unknown thread]".to_owned(), ..Thread::default() },
        };
        self.builder.thread(thread)
    }

    fn event_thread(&mut self, event: &Accessor<'_>) -> u32 {
        let field = if event.pooled("eventThread").is_some() { "eventThread" } else { "sampledThread" };
        self.memoized(event, field, memo::THREAD, Self::thread)
    }

    fn string(&mut self, text: Option<Accessor<'_>>) -> u32 {
        self.builder.string(&string(text).unwrap_or_default())
    }

    /// The class ending an allocation's or lock wait's stack.
    fn leaf(&mut self, event_type: &EventType, event: &Accessor<'_>) -> Option<ClassLeaf> {
        let (field, kind) = event_type.class_field?;
        let class = self.memoized(event, field, memo::CLASS_NAME, |this, class| {
            match string(class.and_then(|c| c.get_field("name"))) {
                Some(name) => this.builder.string(&java_class_name(&name)),
                None => u32::MAX,
            }
        });
        (class != u32::MAX).then_some(ClassLeaf { class, kind })
    }

    fn sample(&mut self, event_type: &'static EventType, event: Accessor<'_>, chunk: &Chunk) -> Sample {
        let (address, size) = match event_type.kind {
            EventKind::NativeMem => (address(&event), long(event.get_field("size")).unwrap_or(0).max(0) as u64),
            _ => (0, 0),
        };
        Sample {
            event: event_type.name,
            kind: event_type.kind,
            start_ticks: long(event.get_field("startTime")).unwrap_or(0),
            thread: self.event_thread(&event),
            state: self.memoized(&event, "state", memo::STRING, Self::string),
            weight: weight(event_type, &event, &chunk.clock),
            leaf: self.leaf(event_type, &event),
            span_id: long(event.get_field("spanId")).unwrap_or(0) as u64,
            root_span_id: long(event.get_field("localRootSpanId")).unwrap_or(0) as u64,
            context: self.context(&event, &chunk.attributes),
            stack: self.memoized(&event, "stackTrace", memo::STACK, Self::stack),
            address,
            size,
        }
    }

    /// A sample's context attribute values, from the sample (Datadog
    /// dialect) or the `jvmprofiler.SampleContext` that follows it (JDK
    /// dialect).
    fn context(&mut self, event: &Accessor<'_>, attributes: &[String]) -> u32 {
        let values: Vec<Option<String>> = attributes.iter().map(|a| string(event.get_field(a))).collect();
        self.builder.context(values)
    }
}

/// [`Converter::memoized`] for a constant at hand.
fn memo<C>(
    this: &mut C,
    pooled: &Pooled<'_>,
    tag: u8,
    convert: impl FnOnce(&mut C, Option<Accessor<'_>>) -> u32,
) -> u32 {
    let memo = pooled.memo();
    if let Some(id) = memo.get(tag) {
        return id;
    }
    let id = convert(this, pooled.value());
    memo.set(tag, id);
    id
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
    let mut converter = Converter {
        builder: Builder::default(),
        methods: Vec::new(),
        frame_keys: FxHashMap::default(),
        frame_bytes: FxHashMap::default(),
    };
    let mut reader = jfr_in::File::new(file);
    let mut damage = Vec::new();
    let mut chunks = 0;
    let mut offset = 0;
    // Settings carried into chunks: one for every 8 bytes of the file.
    let mut carry_budget = file.len() / 8;
    while offset < file.len() {
        let index = chunks + damage.len();
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
        match read_chunk(&mut reader, &mut converter, offset, header) {
            Ok(mut chunk) => {
                if let Some(previous) = converter.builder.recording.chunks.last().filter(|_| chunks > 0) {
                    carry_settings(previous, &mut chunk, &mut carry_budget);
                }
                converter.builder.push_chunk(chunk);
                chunks += 1;
            }
            Err(e) => damage.push(damaged(e.to_string(), false)),
        }
        offset += header.chunk_size as usize;
    }
    if chunks == 0 {
        let reasons: Vec<String> = damage.iter().map(Damage::to_string).collect();
        return Err(not_a_recording(format!("no chunk can be read: {}", reasons.join("; "))));
    }
    let mut recording = converter.builder.finish();
    recording.attach_build_ids();
    Ok(ReadOutcome { recording, damage, undefined: reader.undefined() })
}

/// The events `read_chunk` reads; every other event is skipped.
fn is_read(name: &str) -> bool {
    matches!(
        name,
        names::ACTIVE_SETTING
            | names::COUNTER
            | names::DATADOG_COUNTER
            | names::NATIVE_LIBRARY
            | names::ENDPOINT
            | names::DATADOG_ENDPOINT
            | names::SAMPLE_CONTEXT
            | names::FREE
    ) || event_type(name).is_some()
}

/// A chunk of the file that writes no settings of its own reads with
/// those of the chunk before it (async-profiler writes its settings in the
/// first chunk only; the JDK and we write them in every chunk), each
/// setting's last value. `budget` bounds the settings carried in a file
/// (a damaged or hostile file of many chunks without settings after one
/// with many would multiply them).
fn carry_settings(previous: &Chunk, chunk: &mut Chunk, budget: &mut usize) {
    if !chunk.settings.is_empty() || previous.settings.len() > *budget {
        return;
    }
    *budget -= previous.settings.len();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut kept: Vec<(String, String)> = Vec::new();
    for (name, value) in &previous.settings {
        match index.get(name.as_str()) {
            Some(&i) => kept[i].1.clone_from(value),
            None => {
                index.insert(name, kept.len());
                kept.push((name.clone(), value.clone()));
            }
        }
    }
    chunk.settings = kept;
    chunk.attributes.clone_from(&previous.attributes);
}

fn read_chunk(
    reader: &mut jfr_in::File<'_>,
    converter: &mut Converter,
    offset: usize,
    header: jfr_in::Header,
) -> Result<Chunk, jfr_in::Malformed> {
    let chunk = reader.chunk(offset, header)?;
    converter.frame_bytes.clear();
    let mut data = Chunk {
        clock: Clock {
            start_nanos: header.start_nanos,
            start_ticks: header.start_ticks,
            ticks_per_second: header.ticks_per_second,
            duration_nanos: header.duration_nanos,
        },
        ..Chunk::default()
    };
    chunk.events(is_read, |event| {
        let value = event.value;
        match event.name {
            names::ACTIVE_SETTING => {
                let (name, text) = (
                    string(value.get_field("name")).unwrap_or_default(),
                    string(value.get_field("value")).unwrap_or_default(),
                );
                if name == "attributes" && !text.is_empty() {
                    data.attributes = text.split(';').map(str::to_owned).collect();
                }
                data.settings.push((name, text));
            }
            names::COUNTER | names::DATADOG_COUNTER => data.counters.push((
                string(value.get_field("name")).unwrap_or_default(),
                long(value.get_field("count")).unwrap_or(0),
            )),
            names::NATIVE_LIBRARY => data.libraries.push(NativeLibrary {
                name: string(value.get_field("name")).unwrap_or_default(),
                base_address: long(value.get_field("baseAddress")).unwrap_or(0) as u64,
                top_address: long(value.get_field("topAddress")).unwrap_or(0) as u64,
                build_id: string(value.get_field("buildId")),
                load_bias: long(value.get_field("loadBias")).unwrap_or(0) as u64,
            }),
            names::ENDPOINT | names::DATADOG_ENDPOINT => {
                let thread = converter.event_thread(&value);
                data.endpoints.push(Endpoint {
                    start_ticks: long(value.get_field("startTime")).unwrap_or(0),
                    thread: converter.builder.recording.threads[thread as usize].clone(),
                    endpoint: string(value.get_field("endpoint")).unwrap_or_default(),
                    operation: string(value.get_field("operation")).unwrap_or_default(),
                    root_span_id: long(value.get_field("localRootSpanId")).unwrap_or(0) as u64,
                })
            }
            names::FREE => data.frees.push(Free {
                start_ticks: long(value.get_field("startTime")).unwrap_or(0),
                thread: converter.event_thread(&value),
                address: address(&value),
                after: data.samples.len() as u32,
            }),
            names::SAMPLE_CONTEXT => {
                let context = converter.context(&value, &data.attributes);
                if let Some(last) = data.samples.last_mut() {
                    last.span_id = long(value.get_field("spanId")).unwrap_or(0) as u64;
                    last.root_span_id = long(value.get_field("localRootSpanId")).unwrap_or(0) as u64;
                    last.context = context;
                }
            }
            other => {
                if let Some(event_type) = event_type(other) {
                    let sample = converter.sample(event_type, value, &data);
                    data.samples.push(sample);
                }
            }
        }
    })?;
    chunk.commit();
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
