//! A bounded JFR reader: only what the symbolizer needs (chunk header,
//! metadata, constant pools, events of the types asked for), written for
//! untrusted files. Every length and count read from a file is checked
//! against the bytes that hold it before it sizes anything, so a damaged
//! file is an error, never a panic or an allocation beyond its size.
//!
//! The format as the JDK's `ChunkParser` reads it: a chunk is a 68-byte
//! big-endian header (magic `FLR\0`, version, chunk size, offsets of the
//! last checkpoint and of the metadata, clock, flags) followed by events,
//! each `size, type id, fields…`; type 0 is the metadata, type 1 a
//! checkpoint holding constant pools (checkpoints are chained by a
//! relative offset, 0 ending the chain). With the compressed-integers
//! flag every integer is a varint.

pub mod bytes;
pub mod metadata;
pub mod pools;
pub mod values;

pub use bytes::Malformed;
use bytes::{Bytes, Result};
use metadata::{Class, Layout, Metadata};
pub use pools::Memo;
use pools::{Entry, Loc, Pools, Staged};
use std::cell::Cell;
use std::collections::HashSet;
use std::rc::Rc;
use values::{read_primitive, Scalar, Walker};

pub const MAGIC: &[u8; 4] = b"FLR\0";
pub const HEADER_SIZE: usize = 68;
const METADATA_EVENT: i64 = 0;
const CHECKPOINT_EVENT: i64 = 1;
const FLAG_COMPRESSED_INTEGERS: i32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub major: i16,
    pub minor: i16,
    pub chunk_size: u64,
    pub checkpoint_offset: i64,
    pub metadata_offset: i64,
    pub start_nanos: i64,
    pub duration_nanos: i64,
    pub start_ticks: i64,
    pub ticks_per_second: i64,
    pub compressed: bool,
}

/// How the bytes at some offset of a file fail to begin a complete chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Split {
    /// Not a chunk: no magic, an unknown version, an impossible size.
    Malformed(Malformed),
    /// A chunk header whose chunk runs past the end of the file (or is
    /// still being written: size 0): a recording cut short.
    Truncated { chunk_size: u64, available: u64 },
}

/// Reads the header of the chunk that starts `file[offset..]`, checking
/// that the whole chunk is there.
pub fn header(file: &[u8], offset: usize) -> std::result::Result<Header, Split> {
    let rest = file.get(offset..).unwrap_or_default();
    let available = rest.len() as u64;
    let malformed = |at: usize, what: String| Split::Malformed(Malformed { offset: (offset + at) as u64, what });
    if !rest.starts_with(MAGIC) {
        if MAGIC.starts_with(rest) {
            return Err(Split::Truncated { chunk_size: HEADER_SIZE as u64, available });
        }
        return Err(malformed(0, "no JFR magic (FLR\\0)".into()));
    }
    let Some(fields) = rest.get(..HEADER_SIZE) else {
        return Err(Split::Truncated { chunk_size: HEADER_SIZE as u64, available });
    };
    let be = |at: usize, len: usize| fields[at..at + len].iter().fold(0i64, |v, &b| v << 8 | i64::from(b));
    let (major, minor) = (be(4, 2) as i16, be(6, 2) as i16);
    if !(1..=2).contains(&major) {
        return Err(malformed(4, format!("unsupported JFR version {major}.{minor}")));
    }
    let size = be(8, 8);
    if size == 0 || size as u64 > available && size > 0 {
        // 0: the size of a chunk the JDK is still writing.
        return Err(Split::Truncated { chunk_size: size as u64, available });
    }
    if size < HEADER_SIZE as i64 {
        return Err(malformed(8, format!("chunk size {size} is smaller than its header")));
    }
    Ok(Header {
        major,
        minor,
        chunk_size: size as u64,
        checkpoint_offset: be(16, 8),
        metadata_offset: be(24, 8),
        start_nanos: be(32, 8),
        duration_nanos: be(40, 8),
        start_ticks: be(48, 8),
        ticks_per_second: be(56, 8),
        compressed: be(64, 4) as i32 & FLAG_COMPRESSED_INTEGERS != 0,
    })
}

/// A chunk read so far: where it lies and how its values are laid out.
struct ChunkInfo {
    start: usize,
    end: usize,
    compressed: bool,
    metadata: Rc<Metadata>,
    /// Each class's pool in the file's [`Pools`].
    pool_of: Rc<[usize]>,
    /// The metadata event's bytes: a chunk with the same shares the parse.
    metadata_bytes: std::ops::Range<usize>,
}

/// A recording's bytes and what holds across its chunks: the constant
/// pools (a later chunk may refer to an earlier chunk's constants, as
/// async-profiler's do and the JDK's parser allows) and the metadata that
/// lays out each chunk's constants.
pub struct File<'f> {
    data: &'f [u8],
    chunks: Vec<ChunkInfo>,
    pools: Pools,
    /// Keys read that no chunk defines (read as null).
    undefined: Cell<u64>,
}

/// One chunk whose metadata and constant pools are read and checked; its
/// constants join the file's by [`Chunk::commit`], once its events have
/// been read whole (a chunk dropped uncommitted leaves nothing behind).
pub struct Chunk<'a, 'f> {
    file: &'a mut File<'f>,
    pub header: Header,
    staged: Staged,
    /// Values left for the events.
    budget: usize,
    committed: bool,
}

/// An event: its type's name and its value.
pub struct Event<'c> {
    pub name: &'c str,
    pub value: Accessor<'c>,
}

impl<'f> File<'f> {
    pub fn new(data: &'f [u8]) -> Self {
        Self { data, chunks: Vec::new(), pools: Pools::default(), undefined: Cell::new(0) }
    }

    /// How many keys read so far no chunk defines: read as null.
    pub fn undefined(&self) -> u64 {
        self.undefined.get()
    }

    /// Reads the metadata and constant pools of the chunk at `offset`,
    /// whose header is `header` (the whole chunk is in the file).
    pub fn chunk(&mut self, offset: usize, header: Header) -> Result<Chunk<'_, 'f>> {
        let data = &self.data[offset..offset + header.chunk_size as usize];
        let bytes = Bytes::new(data, offset as u64, header.compressed);
        if header.ticks_per_second <= 0 {
            return Err(Malformed {
                offset: offset as u64 + 56,
                what: format!("{} ticks per second", header.ticks_per_second),
            });
        }
        if data.len() > u32::MAX as usize {
            return bytes.error(format!("a chunk of {} bytes", data.len()));
        }
        let (metadata_at, size) = event_at(&bytes, header.metadata_offset, "metadata")?;
        let metadata_bytes =
            offset + header.metadata_offset as usize..offset + (header.metadata_offset + size) as usize;
        let previous =
            self.chunks.last().filter(|c| self.data[c.metadata_bytes.clone()] == self.data[metadata_bytes.clone()]);
        let (metadata, pool_of) = match previous {
            Some(previous) => (previous.metadata.clone(), previous.pool_of.clone()),
            None => {
                let mut event = metadata_at;
                if event.long()? != METADATA_EVENT {
                    return event.error("the header's metadata offset is not a metadata event");
                }
                for _ in 0..3 {
                    event.long()?; // start, duration, metadata id
                }
                let metadata = metadata::read(&mut event)?;
                let pool_of: Rc<[usize]> = metadata.classes.iter().map(|c| self.pools.index(&c.name)).collect();
                (Rc::new(metadata), pool_of)
            }
        };
        let index = self.chunks.len() as u32;
        self.chunks.push(ChunkInfo {
            start: offset,
            end: offset + data.len(),
            compressed: header.compressed,
            metadata: metadata.clone(),
            pool_of: pool_of.clone(),
            metadata_bytes,
        });
        let mut chunk = Chunk { file: self, header, staged: Staged::default(), budget: 0, committed: false };
        chunk.budget = chunk.read_pools(&bytes, index, &metadata, &pool_of)?;
        Ok(chunk)
    }

    fn scope<'a>(&'a self, staged: &'a Staged) -> Scope<'a> {
        Scope { data: self.data, chunks: &self.chunks, pools: &self.pools, staged, undefined: &self.undefined }
    }
}

impl<'a, 'f> Chunk<'a, 'f> {
    /// Walks the checkpoint chain, staging every constant where it lies
    /// (each value walked once, to find its end and check its size).
    /// Returns the values left for the events. A key a constant holds that
    /// no chunk defines reads as null, as the JDK's parser reads it
    /// (async-profiler's later chunks refer to packages none defines); a
    /// key an event holds must be defined ([`Chunk::events`]).
    fn read_pools(&mut self, bytes: &Bytes<'_>, index: u32, metadata: &Metadata, pool_of: &[usize]) -> Result<usize> {
        let mut walker = Walker::new(metadata, bytes.remaining());
        // Keys not yet defined when read (a pool may refer to a later one).
        let mut at = self.header.checkpoint_offset;
        let mut seen = HashSet::new();
        while seen.insert(at) {
            let (mut event, _) = event_at(bytes, at, "checkpoint")?;
            if event.long()? != CHECKPOINT_EVENT {
                return event.error("a checkpoint offset that is not a checkpoint event");
            }
            event.long()?; // start
            event.long()?; // duration
            let delta = event.long()?;
            event.u8()?; // checkpoint type (flush)
            let pool_count = event.count(2, "constant pool")?;
            for _ in 0..pool_count {
                let class = class_index(&event.clone(), metadata, event.long()?)?;
                let count = event.count(1, "constant")?;
                for _ in 0..count {
                    let key = event.long()?;
                    let offset = (event.file_offset() - self.header_offset()) as u32;
                    walker.skip(&mut event, class, &mut |_, _| {})?;
                    self.staged.insert(pool_of[class], key, Loc { chunk: index, class: class as u32, offset });
                }
            }
            if delta == 0 {
                self.staged.seal();
                return Ok(walker.budget());
            }
            at = match at.checked_add(delta) {
                Some(next) => next,
                None => return event.error(format!("checkpoint delta {delta} overflows")),
            };
        }
        bytes.error(format!("the checkpoint chain loops at offset {at}"))
    }

    fn header_offset(&self) -> u64 {
        self.file.chunks.last().map_or(0, |c| c.start as u64)
    }

    fn info(&self) -> &ChunkInfo {
        self.file.chunks.last().expect("the chunk being read is the file's last")
    }

    pub fn classes(&self) -> &[Class] {
        &self.info().metadata.classes
    }

    /// Reads every event whose type `wanted` accepts (others are skipped
    /// by their size) and hands it to `each`.
    pub fn events(&self, wanted: impl Fn(&str) -> bool, mut each: impl FnMut(Event<'_>)) -> Result<()> {
        let info = self.info();
        let index = self.file.chunks.len() as u32 - 1;
        let metadata = &*info.metadata;
        let bytes = Bytes::new(&self.file.data[info.start..info.end], info.start as u64, info.compressed);
        let wanted: Vec<bool> = metadata.classes.iter().map(|c| wanted(&c.name)).collect();
        let scope = self.file.scope(&self.staged);
        let mut walker = Walker::with_budget(metadata, self.budget);
        let mut at = HEADER_SIZE as i64;
        while (at as usize) < bytes.remaining() {
            let (mut event, size) = event_at(&bytes, at, "event")?;
            at += size;
            let type_id = event.long()?;
            if type_id == METADATA_EVENT || type_id == CHECKPOINT_EVENT {
                continue;
            }
            let class = class_index(&event, metadata, type_id)?;
            if !wanted[class] {
                continue;
            }
            let start = event.clone();
            let mut dangling = None;
            walker.skip(&mut event, class, &mut |class, key| {
                if dangling.is_none() && scope.entry(index, class, key).is_none() {
                    dangling = Some((class, key));
                }
            })?;
            if let Some(dangling) = dangling {
                return start.error(dangling_message(metadata, dangling, &metadata.classes[class].name));
            }
            let value = Accessor { scope: &scope, chunk: index, class, at: At::Value { bytes: start, exact: false } };
            each(Event { name: &metadata.classes[class].name, value });
        }
        Ok(())
    }

    /// The chunk is whole: its constants join the file's.
    pub fn commit(mut self) {
        self.committed = true;
        let staged = std::mem::take(&mut self.staged);
        self.file.pools.commit(staged);
    }
}

impl Drop for Chunk<'_, '_> {
    fn drop(&mut self) {
        if !self.committed {
            self.file.chunks.pop();
        }
    }
}

/// What values are read against: the file's chunks and pools, and the
/// constants of the chunk being read.
pub struct Scope<'a> {
    data: &'a [u8],
    chunks: &'a [ChunkInfo],
    pools: &'a Pools,
    staged: &'a Staged,
    undefined: &'a Cell<u64>,
}

impl<'a> Scope<'a> {
    /// The constant `key` of class `class` of chunk `chunk`'s metadata.
    fn entry(&self, chunk: u32, class: usize, key: i64) -> Option<&'a Entry> {
        let pool = *self.chunks.get(chunk as usize)?.pool_of.get(class)?;
        self.pools.get(self.staged, pool, key)
    }

    /// [`Scope::entry`] for reading: a key no chunk defines (not null) is counted.
    fn defined(&self, chunk: u32, class: usize, key: i64) -> Option<&'a Entry> {
        let entry = self.entry(chunk, class, key);
        if entry.is_none() && key != 0 {
            self.undefined.set(self.undefined.get() + 1);
        }
        entry
    }

    /// A constant's value, where it lies.
    fn decode(&'a self, entry: &Entry) -> Option<Accessor<'a>> {
        let info = self.chunks.get(entry.loc.chunk as usize)?;
        let chunk = Bytes::new(&self.data[info.start..info.end], info.start as u64, info.compressed);
        let offset = entry.loc.offset as usize;
        let bytes = chunk.slice(offset, chunk.remaining().checked_sub(offset)?).ok()?;
        Some(Accessor {
            scope: self,
            chunk: entry.loc.chunk,
            class: entry.loc.class as usize,
            at: At::Value { bytes, exact: false },
        })
    }
}

/// A value where it lies, with what is needed to read it. Every accessor
/// handed out is resolved: where the file has a key, its constant was
/// looked up. Its value was walked whole before ([`Walker::skip`]), so
/// reads of it cannot fail but for a damaged file changing under us.
#[derive(Clone)]
pub struct Accessor<'a> {
    scope: &'a Scope<'a>,
    /// The chunk whose metadata lays the value out.
    chunk: u32,
    /// Its class (an array's element class).
    class: usize,
    at: At<'a>,
}

#[derive(Clone)]
enum At<'a> {
    /// A cursor at the value; `exact`: it holds the value alone.
    Value { bytes: Bytes<'a>, exact: bool },
    /// A cursor at the first of `count` elements.
    Array { count: usize, pooled: bool, elements: Bytes<'a> },
}

/// An element of an array of inline values: its bytes exactly.
pub struct Element<'a>(Bytes<'a>);

impl<'a> Element<'a> {
    /// Its bytes: equal bytes of one chunk are equal values.
    pub fn raw(&self) -> &'a [u8] {
        self.0.prefix(self.0.remaining()).unwrap_or_default()
    }
}

/// One of two iterators of the same items.
enum Either<A, B> {
    Inline(A),
    Keyed(B),
}

impl<T, A: Iterator<Item = T>, B: Iterator<Item = T>> Iterator for Either<A, B> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        match self {
            Either::Inline(a) => a.next(),
            Either::Keyed(b) => b.next(),
        }
    }
}

/// A pooled field: its constant, which a reader may convert once and keep
/// the result of in the constant's [`Memo`].
pub struct Pooled<'a> {
    scope: &'a Scope<'a>,
    entry: &'a Entry,
}

impl<'a> Pooled<'a> {
    pub fn memo(&self) -> Memo<'a> {
        self.entry.memo()
    }

    pub fn value(&self) -> Option<Accessor<'a>> {
        self.scope.decode(self.entry)
    }
}

/// Walks without a budget: for values already walked whole.
fn walker(metadata: &Metadata) -> Walker<'_> {
    Walker::with_budget(metadata, usize::MAX)
}

impl<'a> Accessor<'a> {
    fn metadata(&self) -> &'a Metadata {
        &self.scope.chunks[self.chunk as usize].metadata
    }

    fn value_bytes(&self) -> Option<Bytes<'a>> {
        match &self.at {
            At::Value { bytes, .. } => Some(bytes.clone()),
            At::Array { .. } => None,
        }
    }

    /// The value of class `class` at `bytes`, a key's constant if a key.
    fn at(&self, class: usize, mut bytes: Bytes<'a>, pooled: bool) -> Option<Accessor<'a>> {
        let key = if pooled {
            bytes.long().ok()?
        } else if self.metadata().classes.get(class)?.layout == Layout::String {
            match bytes.clone().skip_string().ok()? {
                Some(key) => key,
                None => return Some(Accessor { at: At::Value { bytes, exact: false }, class, ..self.clone() }),
            }
        } else {
            return Some(Accessor { at: At::Value { bytes, exact: false }, class, ..self.clone() });
        };
        self.scope.decode(self.scope.defined(self.chunk, class, key)?)
    }

    /// A field of an object: its description and a cursor at it.
    fn field_at(&self, name: &str) -> Option<(&'a metadata::Field, Bytes<'a>)> {
        let metadata = self.metadata();
        let class = metadata.classes.get(self.class)?;
        let index = class.field(name)?;
        let mut bytes = self.value_bytes()?;
        let mut walker = walker(metadata);
        for field in &class.fields[..index] {
            walker.skip_field(&mut bytes, field, &mut |_, _| {}).ok()?;
        }
        Some((&class.fields[index], bytes))
    }

    /// A field of an object.
    pub fn get_field(&self, name: &str) -> Option<Self> {
        let (field, mut bytes) = self.field_at(name)?;
        if field.array {
            let count = bytes.count(1, "array element").ok()?;
            let at = At::Array { count, pooled: field.pooled, elements: bytes };
            return Some(Accessor { at, class: field.class, ..self.clone() });
        }
        self.at(field.class, bytes, field.pooled)
    }

    /// A field written as a key: its constant (not yet read).
    pub fn pooled(&self, name: &str) -> Option<Pooled<'a>> {
        let (field, mut bytes) = self.field_at(name)?;
        if !field.pooled || field.array {
            return None;
        }
        let key = bytes.long().ok()?;
        Some(Pooled { scope: self.scope, entry: self.scope.defined(self.chunk, field.class, key)? })
    }

    /// An array's elements (null keys left out).
    pub fn as_iter(self) -> Option<impl Iterator<Item = Accessor<'a>>> {
        if let Some(elements) = self.inline_elements() {
            return Some(Either::Inline(elements.map(move |e| self.element(e))));
        }
        let At::Array { count, pooled, elements } = self.at.clone() else {
            return None;
        };
        let metadata = self.metadata();
        let field = metadata::Field { name: "".into(), class: self.class, pooled, array: false };
        let mut bytes = elements;
        Some(Either::Keyed(
            (0..count)
                .map_while(move |_| {
                    let start = bytes.clone();
                    walker(metadata).skip_field(&mut bytes, &field, &mut |_, _| {}).ok()?;
                    Some(self.at(field.class, start, field.pooled))
                })
                .flatten(),
        ))
    }

    /// An array of values that lie where they are written (neither keys
    /// nor strings, which may be keys): each element's bytes, found but
    /// not read ([`Self::element`] reads one).
    pub fn inline_elements(&self) -> Option<impl Iterator<Item = Element<'a>> + use<'a>> {
        let At::Array { count, pooled: false, elements } = self.at.clone() else {
            return None;
        };
        let metadata = self.metadata();
        let class = metadata.classes.get(self.class)?;
        if class.layout == Layout::String {
            return None;
        }
        let (index, flat) = (self.class, class.flat.as_deref());
        let mut bytes = elements;
        Some((0..count).map_while(move |_| {
            let start = bytes.clone();
            match flat {
                Some(flat) => values::skip_flat(&mut bytes, flat, &mut |_, _| {}).ok()?,
                None => walker(metadata).skip(&mut bytes, index, &mut |_, _| {}).ok()?,
            }
            Some(Element(start.slice(start.position(), bytes.position() - start.position()).ok()?))
        }))
    }

    /// One of this array's [`Self::inline_elements`].
    pub fn element(&self, element: Element<'a>) -> Accessor<'a> {
        Accessor { at: At::Value { bytes: element.0, exact: true }, ..self.clone() }
    }

    /// The bytes of a value (not of an array): equal bytes of one chunk
    /// are equal values.
    pub fn raw(&self) -> Option<&'a [u8]> {
        if let At::Value { bytes, exact: true } = &self.at {
            return bytes.prefix(bytes.remaining());
        }
        let start = self.value_bytes()?;
        let mut end = start.clone();
        walker(self.metadata()).skip(&mut end, self.class, &mut |_, _| {}).ok()?;
        start.prefix(end.position() - start.position())
    }

    fn scalar(&self) -> Option<Scalar> {
        match self.metadata().classes.get(self.class)?.layout {
            Layout::Primitive(p) => read_primitive(&mut self.value_bytes()?, p).ok(),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<String> {
        if self.metadata().classes.get(self.class)?.layout != Layout::String {
            return None;
        }
        match self.value_bytes()?.string().ok()? {
            bytes::JfrString::Inline(s) => Some(s.into()),
            _ => None,
        }
    }

    pub fn as_long(&self) -> Option<i64> {
        match self.scalar()? {
            Scalar::Int(v) => Some(v),
            _ => None,
        }
    }

    /// A float, or an integer as one.
    pub fn as_float(&self) -> Option<f64> {
        match self.scalar()? {
            Scalar::Float(v) => Some(v),
            Scalar::Int(v) => Some(v as f64),
            Scalar::Bool(_) => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self.scalar()? {
            Scalar::Bool(v) => Some(v),
            _ => None,
        }
    }
}

/// The event at `offset` of the chunk: a cursor over its bytes after the
/// size field, and its size.
fn event_at<'f>(chunk: &Bytes<'f>, offset: i64, what: &str) -> Result<(Bytes<'f>, i64)> {
    let start = match usize::try_from(offset) {
        Ok(start) if start >= HEADER_SIZE && start < chunk.remaining() => start,
        _ => return chunk.error(format!("{what} offset {offset} outside the chunk")),
    };
    let mut rest = chunk.slice(start, chunk.remaining() - start)?;
    let size = rest.int()?;
    let header_len = rest.position();
    match usize::try_from(size) {
        Ok(len) if len > header_len && len <= chunk.remaining() - start => {
            Ok((chunk.slice(start + header_len, len - header_len)?, i64::from(size)))
        }
        _ => rest.error(format!("{what} size {size} does not fit in the chunk")),
    }
}

fn dangling_message(metadata: &Metadata, (class, key): (usize, i64), holder: &str) -> String {
    let name = metadata.classes.get(class).map_or("?", |c| &c.name);
    format!("{holder} refers to {name} {key}, which the chunk does not define")
}

fn class_index(bytes: &Bytes<'_>, metadata: &Metadata, id: i64) -> Result<usize> {
    match metadata.by_id.get(&id) {
        Some(&index) => Ok(index),
        None => bytes.error(format!("undeclared type id {id}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jfr_writer::*;

    /// A chunk with one CPU sample of stack trace `trace` (1 is defined).
    fn chunk(trace: u64) -> Vec<u8> {
        let clock = ChunkClock { start_nanos: 0, start_ticks: 0, ticks_per_second: 1_000_000_000 };
        let mut writer = ChunkWriter::new(clock, Dialect::Jdk);
        let mut pools = ConstantPools::new();
        let method = pools.method(1, |p| MethodDef {
            class: p.class("a/B", 1),
            name: p.symbol("c"),
            descriptor: p.symbol("()V"),
            modifiers: 1,
            hidden: false,
        });
        let frame = FrameDef { method, line: 1, bci: 0, frame_type: frames::FrameType::JitCompiled };
        assert_eq!(pools.stack_trace(false, &[frame]), 1);
        pools.thread(1, &ThreadDef { os_name: "t", os_thread_id: 1, java_name: None, java_thread_id: 1 });
        writer.sample(&Sample {
            kind: SampleKind::Cpu,
            start_ticks: 0,
            thread: 1,
            stack_trace: trace,
            state: ThreadState::Runnable,
            weight: 1,
            span_id: 0,
            local_root_span_id: 0,
            context: &[],
        });
        writer.finish(&mut pools, ChunkEnd { duration_nanos: 1, final_chunk: true }, &[])
    }

    fn set(bytes: &mut [u8], at: usize, value: i64) {
        bytes[at..at + 8].copy_from_slice(&value.to_be_bytes());
    }

    fn read(bytes: &[u8]) -> Result<usize> {
        let header = header(bytes, 0).expect("a complete chunk");
        let mut file = File::new(bytes);
        let chunk = file.chunk(0, header)?;
        let mut events = 0;
        chunk.events(|name| name == "jdk.ExecutionSample", |_| events += 1)?;
        Ok(events)
    }

    #[test]
    fn headers_tell_a_cut_chunk_from_bytes_that_are_no_chunk() {
        let bytes = chunk(1);
        let truncated = |r| matches!(r, Err(Split::Truncated { .. }));
        let malformed = |r| matches!(r, Err(Split::Malformed(_)));
        assert!(header(&bytes, 0).is_ok());
        assert!(truncated(header(b"", 0)) && truncated(header(b"FL", 0)) && truncated(header(&bytes[..67], 0)));
        assert!(truncated(header(&bytes[..bytes.len() - 1], 0)));
        assert!(malformed(header(b"FLX\0", 0)) && malformed(header(b"\x7fELF", 0)));
        let mut damaged = bytes.clone();
        damaged[4..6].copy_from_slice(&3u16.to_be_bytes());
        assert!(malformed(header(&damaged, 0)), "version 3");
        let mut damaged = bytes.clone();
        set(&mut damaged, 8, 0);
        assert!(truncated(header(&damaged, 0)), "size 0: still being written");
        set(&mut damaged, 8, 20);
        assert!(malformed(header(&damaged, 0)), "smaller than a header");
        set(&mut damaged, 8, -5);
        assert!(malformed(header(&damaged, 0)));
        set(&mut damaged, 8, i64::MAX);
        assert!(truncated(header(&damaged, 0)));
    }

    #[test]
    fn a_chunk_is_checked_before_its_events_are_read() {
        let bytes = chunk(1);
        assert_eq!(read(&bytes), Ok(1));
        let error = |bytes: &[u8]| read(bytes).unwrap_err().what;
        let mut damaged = bytes.clone();
        set(&mut damaged, 56, 0);
        assert!(error(&damaged).contains("0 ticks per second"));
        for (field, name) in [(24, "metadata"), (16, "checkpoint")] {
            for offset in [0, 67, bytes.len() as i64, -1, i64::MAX] {
                let mut damaged = bytes.clone();
                set(&mut damaged, field, offset);
                assert!(error(&damaged).contains(&format!("{name} offset {offset} outside the chunk")), "{offset}");
            }
        }
        let mut swapped = bytes.clone();
        set(&mut swapped, 24, i64::from_be_bytes(bytes[16..24].try_into().unwrap()));
        assert!(error(&swapped).contains("not a metadata event"));
        // A sample of a stack trace the chunk does not define.
        assert!(
            error(&chunk(99)).contains("jdk.ExecutionSample refers to jdk.types.StackTrace 99"),
            "{}",
            error(&chunk(99))
        );
    }
}
