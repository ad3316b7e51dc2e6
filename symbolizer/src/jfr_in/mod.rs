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
pub mod values;

pub use bytes::Malformed;
use bytes::{Bytes, Result};
use metadata::{Class, Metadata};
use std::collections::HashSet;
pub use values::{Accessor, Value};
use values::{Pools, ValueReader};

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

/// One chunk's metadata and constant pools, read and checked whole.
pub struct Chunk<'f> {
    pub header: Header,
    bytes: Bytes<'f>,
    metadata: Metadata,
    pools: Pools,
    /// Values left for the events (shared with the pools).
    values: usize,
}

/// An event: its type's name and its value.
pub struct Event<'c> {
    pub name: &'c str,
    pub value: Accessor<'c>,
}

impl<'f> Chunk<'f> {
    /// `data` is exactly the chunk (its header's size), which starts at
    /// byte `offset` of its file.
    pub fn read(data: &'f [u8], offset: u64, header: Header) -> Result<Self> {
        let bytes = Bytes::new(data, offset, header.compressed);
        if header.ticks_per_second <= 0 {
            return Err(Malformed {
                offset: offset + 56,
                what: format!("{} ticks per second", header.ticks_per_second),
            });
        }
        let (metadata_at, _) = event_at(&bytes, header.metadata_offset, "metadata")?;
        let mut event = metadata_at;
        if event.long()? != METADATA_EVENT {
            return event.error("the header's metadata offset is not a metadata event");
        }
        for _ in 0..3 {
            event.long()?; // start, duration, metadata id
        }
        let metadata = metadata::read(&mut event)?;
        let mut reader = ValueReader::new(&metadata, data.len());
        let mut pools = Pools::new(metadata.classes.len());
        let mut at = header.checkpoint_offset;
        let mut seen = HashSet::new();
        while seen.insert(at) {
            let (mut event, _) = event_at(&bytes, at, "checkpoint")?;
            if event.long()? != CHECKPOINT_EVENT {
                return event.error("a checkpoint offset that is not a checkpoint event");
            }
            event.long()?; // start
            event.long()?; // duration
            let delta = event.long()?;
            event.u8()?; // checkpoint type (flush)
            let pool_count = event.count(2, "constant pool")?;
            for _ in 0..pool_count {
                let class = class_index(&event.clone(), &metadata, event.long()?)?;
                let count = event.count(1, "constant")?;
                for _ in 0..count {
                    let key = event.long()?;
                    let value = reader.value(&mut event, class)?;
                    pools.insert(class, key, value);
                }
            }
            if delta == 0 {
                pools.seal();
                if let Some(dangling) = pools.values().find_map(|v| pools.dangling(v)) {
                    return bytes.error(dangling_message(&metadata, dangling, "a constant"));
                }
                let values = reader.budget();
                return Ok(Self { header, bytes, metadata, pools, values });
            }
            at = match at.checked_add(delta) {
                Some(next) => next,
                None => return event.error(format!("checkpoint delta {delta} overflows")),
            };
        }
        bytes.error(format!("the checkpoint chain loops at offset {at}"))
    }

    pub fn classes(&self) -> &[Class] {
        &self.metadata.classes
    }

    /// Reads every event whose type `wanted` accepts (others are skipped
    /// by their size) and hands it to `each`.
    pub fn events(&self, wanted: impl Fn(&str) -> bool, mut each: impl FnMut(Event<'_>)) -> Result<()> {
        let wanted: Vec<bool> = self.metadata.classes.iter().map(|c| wanted(&c.name)).collect();
        let mut reader = ValueReader::with_budget(&self.metadata, self.values);
        let mut at = HEADER_SIZE as i64;
        while (at as usize) < self.bytes.remaining() {
            let (mut event, size) = event_at(&self.bytes, at, "event")?;
            at += size;
            let type_id = event.long()?;
            if type_id == METADATA_EVENT || type_id == CHECKPOINT_EVENT {
                continue;
            }
            let class = class_index(&event, &self.metadata, type_id)?;
            if !wanted[class] {
                continue;
            }
            let value = reader.value(&mut event, class)?;
            if let Some(dangling) = self.pools.dangling(&value) {
                return event.error(dangling_message(&self.metadata, dangling, &self.metadata.classes[class].name));
            }
            each(Event {
                name: &self.metadata.classes[class].name,
                value: Accessor::new(&self.metadata, &self.pools, &value),
            });
        }
        Ok(())
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
        let chunk = Chunk::read(bytes, 0, header)?;
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
