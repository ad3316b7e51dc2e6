//! The recording of a profiling session: samples drained from the
//! sampler into JFR chunks, and chunks handed to the sink.
//!
//! Split by duty: [`rotation`] ends a chunk in every store it references,
//! [`chunk`] turns samples and stores into a chunk's bytes (no I/O),
//! [`sink`] puts finished chunks into files (the only file I/O), and
//! [`writer`] is the periodic tick that drains samples and finishes chunks
//! that grew too large. [`frame_names`] and [`methods`] name what a
//! chunk's pools hold; [`endpoints`] is the store of endpoint events.
//!
//! The chunks of a session share one tick clock (CLOCK_MONOTONIC
//! microseconds, `chunk::Ticks`) and one set of constant pools, so that
//! any run of them in a file reads the same whole as chunk by chunk (see
//! `jfr_writer::pools`).
//!
//! A chunk is finished ("rotated") when it grows past `chunksize` or
//! lasts `chunktime` ([`ChunkLimits`]), on `dump`, on `stop`, and at the
//! end of each period of a looping session ([`periods`]), whose next
//! period starts a new file.

pub mod chunk;
pub mod endpoints;
pub mod export;
pub mod frame_names;
pub mod methods;
pub mod periods;
pub mod retention;
pub mod rotation;
pub mod sink;
pub mod writer;

/// A fresh directory for one test of the recording's file handling.
#[cfg(test)]
fn scratch(module: &str, test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("profiler-{module}-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

use crate::callbacks::jvmti_samples;
use crate::callbacks::CallbackState;
use crate::jvm::jni_env::JniEnv;
use crate::jvm::jvmti::Jvmti;
use crate::jvm::threads;
use crate::libraries::kernel;
use crate::recording::export::{Exporters, Period};
use chunk::{ChunkBuilder, ChunkSources, LiveRecord, Ticks};
use jfr_writer::{ConstantPools, Dialect};
use methods::MethodCache;
use periods::Periods;
use rotation::Stores;
use sampler::clock;
use sampler::counters::{self, Counter};
use sampler::storage::samples::{SampleKind, SampleRecord};
use sink::Sink;
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// When the current chunk is finished: past `size` event bytes, or
/// after `time`.
#[derive(Clone, Copy, Debug)]
pub struct ChunkLimits {
    pub size: u64,
    pub time: Option<std::time::Duration>,
}

/// What finishing a chunk needs from the caller: JVMTI on a thread
/// attached to the JVM (the caller's).
pub struct DumpContext {
    pub jvmti: Jvmti,
    pub env: JniEnv,
}

/// What a session's chunks declare: the dialect, the context attribute
/// names (`attributes=`), sample fields in slot order, and the event
/// types the session may write (`jfr_writer::schema::id`), declared in
/// every chunk whether it holds such events or not, so that all chunks
/// describe the same types (others are left out of the metadata).
#[derive(Clone, Debug, Default)]
pub struct Format {
    pub dialect: Dialect,
    pub attributes: Vec<String>,
    pub events: Vec<u64>,
}

pub struct Recording {
    chunk: ChunkBuilder,
    /// The session's clock: every chunk's ticks count from one origin.
    ticks: Ticks,
    /// Wall-clock minus CLOCK_MONOTONIC nanoseconds, taken once: every
    /// chunk's header maps ticks to time by it, so that all chunks convert
    /// alike (the JDK's parser converts them all with the first one's).
    epoch_offset: i64,
    settings: Vec<(String, String)>,
    format: Format,
    stores: Stores,
    sink: Sink,
    methods: MethodCache,
    pools: ConstantPools,
    /// Allocated classes' names by class dictionary id (a cache of the
    /// dictionary, whose ids name one class for the session).
    class_names: HashMap<u32, String>,
    drained: Vec<SampleRecord>,
    limits: ChunkLimits,
    chunk_started: Instant,
    /// A looping session's periods.
    periods: Option<Periods>,
    /// The current period's chunks, for the exporters, if any.
    export: Option<ExportTap>,
}

/// What the exporters get of a recording: each period's chunks, and the
/// times its first chunk started and its last ended.
pub struct ExportTap {
    exporters: Exporters,
    chunks: Vec<u8>,
    started: SystemTime,
    ended: SystemTime,
}

impl ExportTap {
    /// A tap of a session whose sampling started at `started`.
    pub fn new(exporters: Exporters, started: SystemTime) -> Self {
        Self { exporters, chunks: Vec::new(), started, ended: started }
    }

    /// Takes a finished chunk, which ended at `end`.
    fn chunk(&mut self, bytes: &[u8], end: SystemTime) {
        self.chunks.extend_from_slice(bytes);
        self.ended = end;
    }

    /// Ships the period's chunks (if any); the next period starts where
    /// its last chunk ended.
    fn ship(&mut self) {
        if !self.chunks.is_empty() {
            let jfr = std::mem::take(&mut self.chunks);
            self.exporters.ship(Period { jfr, start: self.started, end: self.ended });
        }
        self.started = self.ended;
    }
}

impl Recording {
    /// A recording into `sink` (whose session file `start` created),
    /// moving to a new file each of `periods`.
    pub fn new(
        settings: Vec<(String, String)>,
        format: Format,
        stores: Stores,
        sink: Sink,
        limits: ChunkLimits,
        periods: Option<Periods>,
        export: Option<ExportTap>,
    ) -> Self {
        let now = clock::monotonic_ns();
        let epoch_offset = clock::epoch_ns() - now as i64;
        let ticks = Ticks::starting_at(now);
        // The first period starts with the first chunk.
        let mut periods = periods;
        if let Some(periods) = &mut periods {
            periods.restart();
        }
        Self {
            chunk: ChunkBuilder::new(ticks, now, now as i64 + epoch_offset, &settings, &format),
            ticks,
            epoch_offset,
            settings,
            format,
            stores,
            sink,
            methods: MethodCache::default(),
            pools: ConstantPools::new(),
            class_names: HashMap::new(),
            drained: Vec::new(),
            limits,
            chunk_started: Instant::now(),
            periods,
            export,
        }
    }

    /// The period files kept besides the current one, and their bytes.
    pub fn files_kept(&self) -> Option<(usize, u64)> {
        self.sink.files_kept()
    }

    /// The period files finished since the last call (see [`Sink::take_finished`]).
    pub fn take_finished_files(&mut self) -> Vec<PathBuf> {
        self.sink.take_finished()
    }

    /// At stop: keeps the looping session's files the Java API has still
    /// to report (see [`Sink::keep_finished_after_stop`]).
    pub fn keep_finished_after_stop(&mut self, last_complete: bool) {
        self.sink.keep_finished_after_stop(last_complete);
    }

    /// Whether the current period ends: on time, or early when its file
    /// holds half of `maxsize`.
    pub fn period_due(&self) -> bool {
        self.periods.as_ref().is_some_and(|periods| periods.due() || self.sink.current_file_full())
    }

    /// Ends the current period as a dump does (live objects, then the
    /// chunk, the file's last) and moves to the next period's file.
    pub fn next_period(&mut self, ctx: &DumpContext) {
        let Some(periods) = self.periods.as_mut() else { return };
        let path = periods.start_next();
        self.add_live_objects(ctx.env, false);
        // The last chunk of a file (a period that goes on in the same
        // file, shipped alone, is no file's last).
        self.rotate(ctx, path.is_some());
        if let Some(tap) = &mut self.export {
            tap.ship();
            self.sink.forget_unfiled();
        }
        if let Some(path) = path {
            self.sink.next_file(path);
        }
    }

    /// At the session's end, after its last chunk: ships the last period
    /// and hands over the exporters, to be finished outside the
    /// recording's lock.
    pub fn end_exports(&mut self) -> Option<Exporters> {
        let mut tap = self.export.take()?;
        tap.ship();
        Some(tap.exporters)
    }

    /// Whether periods are shipped.
    pub fn exports(&self) -> bool {
        self.export.is_some()
    }

    pub fn session_path(&self) -> Option<&Path> {
        self.sink.session_path()
    }

    /// Encodes everything the sampler recorded since the last drain.
    pub fn drain(&mut self) {
        self.drained.clear();
        self.stores.callbacks.sampler.stripes.drain_into(&mut self.drained);
        let (class_key, weight) = class_keys(&mut self.pools, &mut self.class_names, &self.stores.callbacks);
        self.chunk.add_samples(&self.drained, threads::key_for, class_key, weight);
    }

    /// Stops tracking sampled objects (`live`) without writing them: the
    /// session ends with nothing to write.
    pub fn release_live_objects(&self, env: JniEnv) {
        if let Some(live) = self.stores.callbacks.jvmti.as_ref().and_then(|s| s.live.as_ref()) {
            live.release(env);
        }
    }

    /// Encodes the sampled objects still alive (`live`), their stacks
    /// stored anew for this chunk; at the session's end, stops tracking
    /// them.
    fn add_live_objects(&mut self, env: JniEnv, session_ends: bool) {
        let callbacks = &self.stores.callbacks;
        let Some(live) = callbacks.jvmti.as_ref().and_then(|s| s.live.as_ref()) else { return };
        let mut objects = Vec::new();
        live.survivors(env, |object| {
            objects.push(LiveRecord {
                tid: object.tid,
                trace: callbacks.sampler.traces.put(object.frames, object.truncated, object.tid as usize).0,
                class: object.class,
                size: object.size,
                time_ns: object.time_ns,
                age: object.age,
                span_id: object.span_id,
                root_span_id: object.root_span_id,
            });
        });
        if session_ends {
            live.release(env);
        }
        let now = clock::monotonic_ns();
        let (class_key, weight) = class_keys(&mut self.pools, &mut self.class_names, callbacks);
        self.chunk.add_live_objects(&objects, now, threads::key_for, class_key, weight);
    }

    pub fn should_rotate(&self) -> bool {
        self.chunk.event_bytes() as u64 >= self.limits.size
            || self.limits.time.is_some_and(|time| self.chunk_started.elapsed() >= time)
    }

    /// Finishes the current chunk, starts the next, and hands the finished
    /// one to the sink (which keeps it, in a file or in memory). Folded
    /// wall-clock samples go into the stripes first, then the stores
    /// rotate, then the stripes are drained, then the chunk reads the
    /// stores (see [`rotation`]).
    pub fn rotate(&mut self, ctx: &DumpContext, final_chunk: bool) {
        counters::set(Counter::CallTraces, self.stores.callbacks.sampler.traces.len() as u64);
        self.stores.callbacks.sampler.flush_idle();
        self.stores.rotate();
        let endpoints = self.stores.endpoints.take_ended();
        self.drain();
        let context_values = self.stores.context.values.live_entries();
        let now = clock::monotonic_ns();
        let next = ChunkBuilder::new(self.ticks, now, now as i64 + self.epoch_offset, &self.settings, &self.format);
        let finished = std::mem::replace(&mut self.chunk, next);
        self.chunk_started = Instant::now();
        counters::increment(Counter::ChunksWritten);
        let counter_values = counters::snapshot();
        let mut methods = self.methods.source(ctx.jvmti, ctx.env);
        let callbacks = &self.stores.callbacks;
        let finished = finished.finish(
            ChunkSources {
                traces: &callbacks.sampler.traces,
                methods: &mut methods,
                libraries: callbacks.libraries.as_deref(),
                kernel: &mut kernel::names(),
                thread: &threads::info,
                thread_key: &threads::key_for,
                counters: &counter_values,
                endpoints: &endpoints,
                context_values: &context_values,
                pools: &mut self.pools,
            },
            now,
            final_chunk,
        );
        counters::add(Counter::ContextValuesExpired, finished.context_values_expired);
        threads::purge_ended();
        self.methods.clear();
        if let Some(tap) = &mut self.export {
            let end = Duration::from_nanos(u64::try_from(now as i64 + self.epoch_offset).unwrap_or(0));
            tap.chunk(&finished.bytes, SystemTime::UNIX_EPOCH + end);
        }
        self.sink.store(finished.bytes);
    }

    /// Changes (or adds) settings from now on. With `ctx`, the current
    /// chunk is finished as it was set and the next starts with the new
    /// settings, so that a chunk's settings are those all its samples were
    /// taken under (readers that count events per chunk see the change at
    /// the boundary); without (no JNIEnv to finish a chunk with), the
    /// change is recorded now in the current chunk, and at the start of
    /// every later one.
    pub fn change_settings(&mut self, changes: &[(&str, String)], ctx: Option<&DumpContext>) {
        let now = clock::monotonic_ns();
        for (name, value) in changes {
            if ctx.is_none() {
                self.chunk.add_setting(now, name, value);
            }
            match self.settings.iter_mut().find(|(n, _)| n == name) {
                Some(setting) => setting.1.clone_from(value),
                None => self.settings.push(((*name).to_owned(), value.clone())),
            }
        }
        if let Some(ctx) = ctx {
            self.rotate(ctx, false);
        }
    }

    /// Writes what the sink still holds (a stopped session's chunks that
    /// could not be written) to `path`, or the session file.
    pub fn write_kept(&mut self, path: Option<&Path>) -> io::Result<PathBuf> {
        self.sink.dump(path)
    }

    /// Whether a dump to `path` can be written (see [`Sink::check_target`]).
    pub fn check_target(&mut self, path: Option<&Path>) -> io::Result<()> {
        self.sink.check_target(path)
    }

    /// Finishes the current chunk and writes the interval since the
    /// previous dump to `path` (see [`Sink::dump`]). Returns where the data
    /// went.
    pub fn dump(&mut self, ctx: &DumpContext, path: Option<&Path>, final_chunk: bool) -> io::Result<PathBuf> {
        self.add_live_objects(ctx.env, final_chunk);
        self.rotate(ctx, final_chunk);
        self.sink.dump(path)
    }
}

/// A class table id's class pool key (0: unknown; `names` caches the
/// table) and a heap or native allocation size's weight, for encoding
/// allocation, live object, lock and native memory samples.
fn class_keys<'a>(
    pools: &'a mut ConstantPools,
    names: &'a mut HashMap<u32, String>,
    callbacks: &'a CallbackState,
) -> (impl FnMut(u32) -> u64 + 'a, impl Fn(SampleKind, u64) -> u64) {
    let sampling = callbacks.jvmti.as_ref();
    let alloc = sampling.and_then(|s| s.alloc_interval).unwrap_or(0);
    let native = callbacks.sampler.nativemem.unwrap_or(0);
    let class_key = move |class: u32| {
        let Some(sampling) = sampling else { return 0 };
        if class != 0 && !names.contains_key(&class) {
            names.extend(sampling.classes.live_entries());
        }
        names.get(&class).map_or(0, |name| pools.class(name, 0).key())
    };
    let weight = move |kind, size| match kind {
        SampleKind::Malloc => jvmti_samples::weight(size, native),
        _ => jvmti_samples::weight(size, alloc),
    };
    (class_key, weight)
}
