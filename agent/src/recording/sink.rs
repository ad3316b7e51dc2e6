//! Where finished chunks go: the only file I/O of the recording.
//!
//! Every finished chunk is appended to the session file (`file=` at
//! start), which therefore always holds a complete, parseable recording of
//! the session so far, and belongs to the current interval: the chunks
//! since the previous dump, which a dump naming another file writes there.
//! Without a session file the interval is kept in memory, bounded.

use crate::counters::{self, Counter};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Chunks of the current interval kept in memory when there is no session
/// file to hold them; beyond this the oldest are dropped (and counted).
const MAX_MEMORY_INTERVAL_BYTES: usize = 32 << 20;

enum StoredChunk {
    Memory(Vec<u8>),
    InSessionFile { offset: u64, len: u64 },
}

struct SessionFile {
    path: PathBuf,
    len: u64,
}

impl SessionFile {
    /// Appends a chunk (the first write truncates) and returns its offset.
    fn append(&mut self, bytes: &[u8]) -> io::Result<u64> {
        let mut file = OpenOptions::new().create(true).write(true).truncate(self.len == 0).open(&self.path)?;
        file.seek(SeekFrom::Start(self.len))?;
        file.write_all(bytes)?;
        file.set_len(self.len + bytes.len() as u64)?;
        let offset = self.len;
        self.len += bytes.len() as u64;
        Ok(offset)
    }
}

pub struct Sink {
    session_file: Option<SessionFile>,
    interval: Vec<StoredChunk>,
    memory_bound: usize,
}

impl Sink {
    pub fn new(session_file: Option<PathBuf>) -> Self {
        Self::bounded(session_file, MAX_MEMORY_INTERVAL_BYTES)
    }

    fn bounded(session_file: Option<PathBuf>, memory_bound: usize) -> Self {
        Self { session_file: session_file.map(|path| SessionFile { path, len: 0 }), interval: Vec::new(), memory_bound }
    }

    pub fn session_path(&self) -> Option<&Path> {
        self.session_file.as_ref().map(|f| f.path.as_path())
    }

    /// Stores a finished chunk: in the session file if there is one, and
    /// in the current interval.
    pub fn store(&mut self, bytes: Vec<u8>) -> io::Result<()> {
        match self.session_file.as_mut() {
            Some(file) => {
                let offset = file.append(&bytes)?;
                self.interval.push(StoredChunk::InSessionFile { offset, len: bytes.len() as u64 });
            }
            None => {
                self.interval.push(StoredChunk::Memory(bytes));
                self.bound_memory();
            }
        }
        Ok(())
    }

    fn bound_memory(&mut self) {
        let size = |c: &StoredChunk| {
            if let StoredChunk::Memory(b) = c {
                b.len()
            } else {
                0
            }
        };
        while self.interval.len() > 1 && self.interval.iter().map(size).sum::<usize>() > self.memory_bound {
            self.interval.remove(0);
            counters::increment(Counter::ChunksDropped);
        }
    }

    /// Ends the current interval and writes it to `path` (unless that is
    /// the session file, which already has it). Returns where the data
    /// went.
    pub fn dump(&mut self, path: Option<&Path>) -> io::Result<PathBuf> {
        let interval = std::mem::take(&mut self.interval);
        let session = self.session_path().map(Path::to_path_buf);
        match (path, session) {
            (Some(p), Some(s)) if p == s => Ok(s),
            (Some(p), session) => {
                write_interval(p, &interval, session.as_deref())?;
                Ok(p.to_path_buf())
            }
            (None, Some(s)) => Ok(s),
            (None, None) => Err(io::Error::new(io::ErrorKind::InvalidInput, "no output file: give file=PATH")),
        }
    }
}

fn write_interval(path: &Path, chunks: &[StoredChunk], session: Option<&Path>) -> io::Result<()> {
    let mut out = File::create(path)?;
    let mut source = match session {
        Some(s) if chunks.iter().any(|c| matches!(c, StoredChunk::InSessionFile { .. })) => Some(File::open(s)?),
        _ => None,
    };
    for chunk in chunks {
        match chunk {
            StoredChunk::Memory(bytes) => out.write_all(bytes)?,
            StoredChunk::InSessionFile { offset, len } => {
                let file = source.as_mut().ok_or_else(|| io::Error::other("session file missing"))?;
                file.seek(SeekFrom::Start(*offset))?;
                io::copy(&mut Read::by_ref(file).take(*len), &mut out)?;
            }
        }
    }
    out.sync_data()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory for one test.
    fn scratch(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("profiler-sink-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_session_file_holds_every_chunk_and_a_dump_elsewhere_the_interval() {
        let dir = scratch("session");
        let session = dir.join("session.jfr");
        let mut sink = Sink::new(Some(session.clone()));
        sink.store(b"one".to_vec()).unwrap();
        assert_eq!(sink.dump(None).unwrap(), session, "no path: the session file has it");
        sink.store(b"two".to_vec()).unwrap();
        sink.store(b"three".to_vec()).unwrap();
        let other = dir.join("interval.jfr");
        assert_eq!(sink.dump(Some(&other)).unwrap(), other);
        assert_eq!(std::fs::read(&other).unwrap(), b"twothree");
        sink.store(b"four".to_vec()).unwrap();
        assert_eq!(sink.dump(Some(&session)).unwrap(), session, "naming the session file writes nothing more");
        assert_eq!(std::fs::read(&session).unwrap(), b"onetwothreefour");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn without_a_session_file_the_interval_is_kept_in_memory_and_bounded() {
        let dir = scratch("memory");
        let mut sink = Sink::bounded(None, 8);
        assert!(sink.dump(None).is_err(), "nowhere to write");
        for chunk in [&b"aaaa"[..], b"bbbb", b"cccc"] {
            sink.store(chunk.to_vec()).unwrap();
        }
        let out = dir.join("dump.jfr");
        sink.dump(Some(&out)).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"bbbbcccc", "the oldest chunk was dropped");
        sink.store(b"a chunk larger than the bound".to_vec()).unwrap();
        sink.dump(Some(&out)).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"a chunk larger than the bound", "the newest chunk is kept");
        let _ = std::fs::remove_dir_all(dir);
    }
}
