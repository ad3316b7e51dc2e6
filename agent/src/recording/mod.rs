//! The recording of a profiling session: samples drained from the
//! sampler into JFR chunks, and chunks written to files.
//!
//! A chunk is finished ("rotated") when it grows past [`ROTATE_BYTES`], on
//! `dump` and on `stop`. Every finished chunk is appended to the session
//! file (`file=` given at start), which therefore always holds a complete,
//! parseable recording of the session so far. A `dump` (or `stop`) naming
//! another file writes there the chunks finished since the previous dump:
//! a self-contained recording of that interval.

pub mod chunk;
pub mod classes;
pub mod endpoints;
pub mod frames;
pub mod methods;
pub mod writer;

use crate::clock;
use crate::context;
use crate::counters::{self, Counter};
use crate::jni_env::JniEnv;
use crate::jvmti::Jvmti;
use crate::sampling::Sampler;
use crate::storage::samples::SampleRecord;
use crate::threads;
use chunk::{ChunkBuilder, ChunkSources};
use endpoints::Batch;
use methods::MethodCache;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Event bytes after which the current chunk is finished.
pub const ROTATE_BYTES: usize = 8 << 20;
/// Chunks of the current interval kept in memory when there is no session
/// file to hold them; beyond this the oldest are dropped (and counted).
const MAX_MEMORY_INTERVAL_BYTES: usize = 32 << 20;

/// What finishing a chunk needs: the sampler's traces, and JVMTI on a
/// thread attached to the JVM (the caller's).
pub struct DumpContext<'a> {
    pub sampler: &'a Sampler,
    pub jvmti: Jvmti,
    pub env: JniEnv,
}

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

pub struct Recording {
    chunk: ChunkBuilder,
    settings: Vec<(String, String)>,
    /// Context attribute names (`attributes=`).
    attributes: Vec<String>,
    interval: Vec<StoredChunk>,
    session_file: Option<SessionFile>,
    methods: MethodCache,
    drained: Vec<SampleRecord>,
}

impl Recording {
    pub fn new(settings: Vec<(String, String)>, attributes: Vec<String>, session_file: Option<PathBuf>) -> Self {
        Self {
            chunk: ChunkBuilder::new(clock::monotonic_ns(), clock::epoch_ns(), &settings, &attributes),
            settings,
            attributes,
            interval: Vec::new(),
            session_file: session_file.map(|path| SessionFile { path, len: 0 }),
            methods: MethodCache::default(),
            drained: Vec::new(),
        }
    }

    pub fn session_path(&self) -> Option<&Path> {
        self.session_file.as_ref().map(|f| f.path.as_path())
    }

    /// Encodes everything the sampler recorded since the last drain.
    pub fn drain(&mut self, sampler: &Sampler) {
        self.drained.clear();
        sampler.stripes.drain_into(&mut self.drained);
        self.chunk.add_samples(&self.drained, threads::key_for);
    }

    pub fn should_rotate(&self) -> bool {
        self.chunk.event_bytes() >= ROTATE_BYTES
    }

    /// Finishes the current chunk, starts the next, and stores the
    /// finished one (session file, and the current interval).
    ///
    /// Order matters: stores rotate first, so everything recorded from now
    /// on belongs to the next chunk, and what the finished chunk references
    /// is in the dump buffers (or, for samples drained right after, in the
    /// new active ones, which the pools also read).
    pub fn rotate(&mut self, ctx: &DumpContext<'_>, final_chunk: bool) -> io::Result<()> {
        counters::set(Counter::CallTraces, ctx.sampler.traces.len() as u64);
        ctx.sampler.traces.rotate();
        let endpoints =
            endpoints::endpoints().map(|e| e.rotate()).unwrap_or(Batch { events: Vec::new(), labels: Vec::new() });
        context::rotate_values();
        let classes = classes::classes().ok();
        if let Some(classes) = classes {
            classes.rotate();
        }
        self.drain(ctx.sampler);
        let context_values = context::state().map(|s| s.values.live_entries()).unwrap_or_default();
        let now = clock::monotonic_ns();
        let next = ChunkBuilder::new(now, clock::epoch_ns(), &self.settings, &self.attributes);
        let finished = std::mem::replace(&mut self.chunk, next);
        counters::increment(Counter::ChunksWritten);
        let counter_values = counters::snapshot();
        let mut methods = self.methods.source(ctx.jvmti, ctx.env);
        let bytes = finished.finish(
            ChunkSources {
                traces: &ctx.sampler.traces,
                methods: &mut methods,
                libraries: ctx.sampler.native.as_ref().map(|n| &*n.libraries),
                thread: &threads::info,
                thread_key: &threads::key_for,
                counters: &counter_values,
                endpoints: &endpoints,
                context_values: &context_values,
                classes,
            },
            now,
            final_chunk,
        );
        threads::purge_ended();
        self.methods.clear();
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
        while self.interval.len() > 1 && self.interval.iter().map(size).sum::<usize>() > MAX_MEMORY_INTERVAL_BYTES {
            self.interval.remove(0);
            counters::increment(Counter::ChunksDropped);
        }
    }

    /// Finishes the current chunk and writes the interval since the
    /// previous dump to `path` (unless that is the session file, which
    /// already has it). Returns where the data went.
    pub fn dump(&mut self, ctx: &DumpContext<'_>, path: Option<&Path>, final_chunk: bool) -> io::Result<PathBuf> {
        self.rotate(ctx, final_chunk)?;
        let interval = std::mem::take(&mut self.interval);
        let session = self.session_path().map(Path::to_path_buf);
        match (path, session) {
            (Some(p), Some(s)) if p == s => Ok(s),
            (Some(p), session) => {
                self.write_interval(p, &interval, session.as_deref())?;
                Ok(p.to_path_buf())
            }
            (None, Some(s)) => Ok(s),
            (None, None) => Err(io::Error::new(io::ErrorKind::InvalidInput, "no output file: give file=PATH")),
        }
    }

    fn write_interval(&self, path: &Path, chunks: &[StoredChunk], session: Option<&Path>) -> io::Result<()> {
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
}
