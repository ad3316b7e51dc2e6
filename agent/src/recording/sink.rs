//! Where finished chunks go: the only file I/O of the recording.
//!
//! Every finished chunk is appended to the session file (`file=` at
//! start), which therefore always holds a complete, parseable recording of
//! the session so far, and belongs to the current interval: the chunks
//! since the previous dump, which a dump naming another file writes there.
//! Without a session file the interval is kept in memory, bounded.
//!
//! The session file is created at `start` ([`create_output`]), so a path
//! that cannot take a recording fails `start`, not `stop`. If appending
//! fails later (disk full, the file removed or replaced), the sink logs it
//! once, counts it, and keeps the interval's new chunks in memory
//! (bounded, drops counted and logged); each later chunk retries the
//! session file, and a dump or stop naming another file gets everything
//! since the previous dump. Nothing leaves the interval before it was
//! written somewhere.
//!
//! A looping session (`loop=`) moves to a new file each period
//! ([`Sink::next_file`]): the finished file is complete (its chunks
//! written) and handed to [`Retention`], which removes the session's
//! oldest files past its bounds. A period file that cannot be created
//! (disk full, directory removed) is retried with each chunk, the chunks
//! kept in memory meanwhile (bounded, drops counted).

use super::retention::Retention;
use crate::args::echo;
use crate::log;
use sampler::counters::{self, Counter};
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

/// Chunks of the current interval kept in memory when there is no session
/// file to hold them; beyond this the oldest are dropped (and counted).
const MAX_MEMORY_INTERVAL_BYTES: usize = 32 << 20;

/// Finished period files remembered for the Java API between two polls.
const MAX_FINISHED_LISTED: usize = 1024;

/// File systems whose files look regular but are not storage (`statfs`
/// magic numbers: proc, sysfs, debugfs, tracefs, cgroup, cgroup2,
/// securityfs, bpf).
const PSEUDO_FILE_SYSTEMS: [i64; 8] =
    [0x9fa0, 0x6265_6572, 0x6462_6720, 0x7472_6163, 0x0027_e0eb, 0x6367_7270, 0x7363_6673, 0xcafe_4a11];

fn refused(reason: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, reason)
}

/// Refuses what is not a regular file on a storage file system.
fn check_kind(metadata: &std::fs::Metadata, file_system: i64) -> io::Result<()> {
    if metadata.is_dir() {
        return Err(refused("it is a directory"));
    }
    if !metadata.is_file() {
        return Err(refused("it is not a regular file (a device, pipe or socket)"));
    }
    if PSEUDO_FILE_SYSTEMS.contains(&file_system) {
        return Err(refused("it is on a pseudo file system (proc, sysfs, ...), not storage"));
    }
    Ok(())
}

/// The `statfs` type of the file system holding `file`.
fn file_system_of(file: &File) -> io::Result<i64> {
    use std::os::fd::AsRawFd;
    // SAFETY: statfs is plain data; all-zero is a valid value to fill in.
    let mut info: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a descriptor owned by `file` and a valid out pointer.
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut info) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info.f_type as i64)
}

/// The `statfs` type of the file system holding `path`, without opening
/// it (opening a FIFO would block).
fn file_system_at(path: &Path) -> io::Result<i64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| refused("the path holds a NUL"))?;
    // SAFETY: statfs is plain data; all-zero is a valid value to fill in.
    let mut info: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a valid out pointer.
    if unsafe { libc::statfs(path.as_ptr(), &mut info) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info.f_type as i64)
}

/// Creates (or empties) `path` to take a recording, refusing a directory,
/// a device, pipe or socket, and a file on a pseudo file system such as
/// `/proc`. An existing file is checked before it is opened, so nothing
/// that is not a regular file is ever truncated.
pub fn create_output(path: &Path) -> io::Result<File> {
    if let Ok(metadata) = std::fs::metadata(path) {
        check_kind(&metadata, file_system_at(path)?)?;
    }
    let file = OpenOptions::new().create(true).read(true).write(true).truncate(true).open(path)?;
    check_kind(&file.metadata()?, file_system_of(&file)?)?;
    Ok(file)
}

enum StoredChunk {
    Memory(Vec<u8>),
    InSessionFile { offset: u64, len: u64 },
}

const REMOVED: &str = "it was removed or replaced since start";

struct SessionFile {
    path: PathBuf,
    file: File,
    /// (device, inode) of the file created at start.
    identity: (u64, u64),
    /// Bytes of chunks written: the end of the last good write.
    len: u64,
    /// Why the last append failed, until one succeeds again.
    failure: Option<String>,
    /// Where each chunk written starts, oldest first.
    chunk_starts: std::collections::VecDeque<u64>,
}

impl SessionFile {
    fn create(path: PathBuf) -> io::Result<Self> {
        let file = create_output(&path)?;
        // Written anew: no longer a stopped session's finished file.
        stopped_finished().retain(|finished| *finished != path);
        let metadata = file.metadata()?;
        let identity = (metadata.dev(), metadata.ino());
        Ok(Self { path, file, identity, len: 0, failure: None, chunk_starts: std::collections::VecDeque::new() })
    }

    /// `path` names the file created at start.
    fn is_at(&self, path: &Path) -> bool {
        std::fs::metadata(path).is_ok_and(|m| (m.dev(), m.ino()) == self.identity)
    }

    /// Records why the file cannot be written: logged and counted once per
    /// spell of failures.
    fn fail(&mut self, error: &io::Error, memory_bound: usize) {
        if self.failure.is_none() {
            counters::increment(Counter::SessionFileWriteFailures);
            log::error!(
                "cannot write the session file {}: {error}; the recording since its last good write is kept in \
                 memory (up to {} MiB) for the next dump or stop naming another file, or the next period's file",
                echo(&self.path.display().to_string()),
                memory_bound >> 20
            );
        }
        self.failure = Some(error.to_string());
    }

    /// Appends a chunk after the last good write and returns its offset.
    /// A file removed or replaced since start is not written (the data
    /// would reach no one); a failed write is cut off again.
    fn append(&mut self, bytes: &[u8]) -> io::Result<u64> {
        if !self.is_at(&self.path) {
            return Err(io::Error::new(io::ErrorKind::NotFound, REMOVED));
        }
        if let Err(e) = self.file.write_all_at(bytes, self.len) {
            let _ = self.file.set_len(self.len);
            return Err(e);
        }
        let offset = self.len;
        self.len += bytes.len() as u64;
        self.chunk_starts.push_back(offset);
        Ok(offset)
    }

    /// Cuts the file's oldest chunks, keeping those from `keep_from` (a
    /// chunk's start): the rest is copied to a new file beside it, which
    /// replaces it by a rename, the last step (nothing can fail after it).
    /// Any run of a session's chunks is a whole recording.
    fn drop_front(&mut self, keep_from: u64) -> io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let name = self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let temp = self.path.with_file_name(format!(".{name}.{}.trim", std::process::id()));
        let kept = self.len - keep_from;
        let copied = (|| {
            let mut out = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&temp)?;
            let mut from = self.file.try_clone()?;
            std::io::Seek::seek(&mut from, io::SeekFrom::Start(keep_from))?;
            if std::io::copy(&mut std::io::Read::take(from, kept), &mut out)? != kept {
                return Err(io::Error::other("the file is shorter than the chunks written to it"));
            }
            out.sync_data()?;
            let metadata = out.metadata()?;
            std::fs::rename(&temp, &self.path)?;
            Ok((out, (metadata.dev(), metadata.ino())))
        })();
        let (file, identity) = copied.inspect_err(|_| {
            let _ = std::fs::remove_file(&temp);
        })?;
        (self.file, self.identity, self.len) = (file, identity, kept);
        self.chunk_starts.retain(|&start| start >= keep_from);
        for start in &mut self.chunk_starts {
            *start -= keep_from;
        }
        Ok(())
    }
}

/// Finished files of stopped looping sessions that the Java API has not
/// reported yet: they outlive their session.
static STOPPED_FINISHED: Mutex<VecDeque<PathBuf>> = Mutex::new(VecDeque::new());

fn stopped_finished() -> std::sync::MutexGuard<'static, VecDeque<PathBuf>> {
    STOPPED_FINISHED.lock().unwrap_or_else(|p| p.into_inner())
}

/// The files stopped sessions finished that were not reported yet, oldest
/// first (see [`Sink::keep_finished_after_stop`]).
pub fn take_finished_after_stop() -> Vec<PathBuf> {
    stopped_finished().drain(..).collect()
}

pub struct Sink {
    session_file: Option<SessionFile>,
    interval: Vec<StoredChunk>,
    memory_bound: usize,
    /// A looping session's finished files.
    retention: Option<Retention>,
    /// A session file's bound, without `loop` (`maxsize`): past it, its
    /// oldest chunks are cut.
    file_bound: Option<u64>,
    /// A period's file that could not be created yet, and why.
    pending: Option<(PathBuf, String)>,
    /// Period files finished and not yet taken (the newest
    /// [`MAX_FINISHED_LISTED`]), for the Java API.
    finished: VecDeque<PathBuf>,
}

impl Sink {
    /// A sink writing to `session_file`, created now (see [`create_output`]).
    pub fn new(session_file: Option<PathBuf>) -> io::Result<Self> {
        Self::bounded(session_file, MAX_MEMORY_INTERVAL_BYTES)
    }

    fn bounded(session_file: Option<PathBuf>, memory_bound: usize) -> io::Result<Self> {
        Ok(Self {
            session_file: session_file.map(SessionFile::create).transpose()?,
            interval: Vec::new(),
            memory_bound,
            retention: None,
            file_bound: None,
            pending: None,
            finished: VecDeque::new(),
        })
    }

    /// Keeps the session file (of a session without `loop`) within `bytes`:
    /// past it, its oldest chunks are cut until it holds half as much.
    pub fn bound_file(&mut self, bytes: u64) {
        self.file_bound = Some(bytes);
    }

    /// Keeps the session's files within `retention` as it loops.
    pub fn retain_within(&mut self, retention: Retention) {
        self.retention = Some(retention);
    }

    /// The period files finished since the last call, oldest first.
    pub fn take_finished(&mut self) -> Vec<PathBuf> {
        self.finished.drain(..).collect()
    }

    /// At stop: keeps a looping session's finished files not yet taken for
    /// [`take_finished_after_stop`], and its last file too if `stop` wrote
    /// it whole (`last_complete`, and no write to it failed).
    pub fn keep_finished_after_stop(&mut self, last_complete: bool) {
        let mut files = self.take_finished();
        if self.retention.is_some() && last_complete {
            let last = self.session_file.as_ref().filter(|f| f.len > 0 && f.failure.is_none() && f.is_at(&f.path));
            files.extend(last.map(|f| f.path.clone()));
        }
        let mut kept = stopped_finished();
        kept.extend(files);
        let excess = kept.len().saturating_sub(MAX_FINISHED_LISTED);
        kept.drain(..excess);
    }

    /// The period files kept besides the one being written, and their bytes.
    pub fn files_kept(&self) -> Option<(usize, u64)> {
        self.retention.as_ref().map(Retention::kept)
    }

    /// Whether a looping session's current file holds half its `maxsize`:
    /// its period ends early, so that no file outgrows the bound.
    pub fn current_file_full(&self) -> bool {
        let max_size = self.retention.as_ref().and_then(Retention::max_size);
        let len = self.session_file.as_ref().map_or(0, |f| f.len);
        max_size.is_some_and(|max| len >= max / 2)
    }

    /// Ends the current period's file and writes from now on to `path`
    /// (created now, or retried with each chunk while it cannot be). The
    /// interval restarts with the new file, but for chunks still held in
    /// memory, which go to it first.
    pub fn next_file(&mut self, path: PathBuf) {
        self.flush_to_session_file();
        // A spell of failures goes on in the next file: logged once.
        let mut failure = None;
        if let Some(finished) = self.session_file.take() {
            failure = finished.failure.clone();
            // Only the file the session created, still at its path.
            if finished.is_at(&finished.path) {
                if finished.len == 0 {
                    // Nothing reached it (the disk was full): no file is
                    // left that no reader can open; its chunks go to the next.
                    let _ = std::fs::remove_file(&finished.path);
                } else {
                    if let Some(retention) = &mut self.retention {
                        retention.finished(&finished.path, finished.identity, finished.len, SystemTime::now());
                    }
                    if self.finished.len() == MAX_FINISHED_LISTED {
                        self.finished.pop_front();
                    }
                    self.finished.push_back(finished.path);
                }
            }
        }
        self.interval.retain(|chunk| matches!(chunk, StoredChunk::Memory(_)));
        // A period file that could not be created: the next one inherits
        // the spell of failures (logged once).
        let failed = self.pending.take().map(|(_, why)| why).unwrap_or_default();
        self.pending = Some((path, failed));
        self.open_pending();
        if let Some(file) = &mut self.session_file {
            file.failure = failure;
        }
        self.flush_to_session_file();
        self.enforce_retention();
    }

    /// Creates the pending period file; a failure is logged and counted
    /// once per file.
    fn open_pending(&mut self) {
        let Some((path, failed)) = self.pending.take() else { return };
        match SessionFile::create(path.clone()) {
            Ok(file) => {
                counters::increment(Counter::PeriodFiles);
                if let Some(retention) = &mut self.retention {
                    retention.reused(&path);
                }
                self.finished.retain(|finished| *finished != path);
                if !failed.is_empty() {
                    log::warn!("the period file {} could be created now", echo(&path.display().to_string()));
                }
                self.session_file = Some(file);
            }
            Err(e) => {
                if failed.is_empty() {
                    counters::increment(Counter::PeriodFileCreateFailures);
                    log::error!(
                        "cannot create the period file {}: {e}; its chunks are kept in memory (up to {} MiB) \
                         and the file is tried again with each chunk",
                        echo(&path.display().to_string()),
                        self.memory_bound >> 20
                    );
                }
                self.pending = Some((path, e.to_string()));
            }
        }
    }

    fn enforce_retention(&mut self) {
        let current = self.session_file.as_ref().map_or(0, |f| f.len);
        if let Some(retention) = &mut self.retention {
            retention.enforce(current, SystemTime::now());
        }
        let (Some(bound), Some(file)) = (self.file_bound, self.session_file.as_mut()) else { return };
        if file.len <= bound || file.failure.is_some() {
            return;
        }
        // The oldest chunks go until the newest half of the bound is left
        // (the newest chunk always stays).
        let last = file.chunk_starts.back().copied().unwrap_or(0);
        let keep_from = file.chunk_starts.iter().copied().find(|&start| file.len - start <= bound / 2).unwrap_or(last);
        if keep_from == 0 {
            return;
        }
        let shown = echo(&file.path.display().to_string());
        match file.drop_front(keep_from) {
            Ok(()) => {
                counters::add(Counter::RetentionBytesRemoved, keep_from);
                log::info!("cut the oldest {keep_from} bytes of {shown}: it passed maxsize ({bound} bytes)");
                // Chunks of the interval that were cut are gone; the rest moved.
                self.interval.retain_mut(|chunk| match chunk {
                    StoredChunk::InSessionFile { offset, .. } if *offset < keep_from => false,
                    StoredChunk::InSessionFile { offset, .. } => {
                        *offset -= keep_from;
                        true
                    }
                    StoredChunk::Memory(_) => true,
                });
            }
            Err(e) => {
                log::warn!("cannot cut the oldest chunks of {shown} (past maxsize): {e}; it grows on");
                self.file_bound = None;
            }
        }
    }

    /// Forgets the chunks held in memory when there is no session file to
    /// write them to (a session that ships its periods and keeps none).
    pub fn forget_unfiled(&mut self) {
        if self.session_file.is_none() {
            self.interval.clear();
        }
    }

    pub fn session_path(&self) -> Option<&Path> {
        self.session_file.as_ref().map(|f| f.path.as_path())
    }

    /// Stores a finished chunk: in the session file if there is one and it
    /// takes it, and in the current interval (in memory otherwise).
    pub fn store(&mut self, bytes: Vec<u8>) {
        self.interval.push(StoredChunk::Memory(bytes));
        self.open_pending();
        self.flush_to_session_file();
        self.bound_memory();
        self.enforce_retention();
    }

    /// Moves the interval's chunks held in memory into the session file,
    /// in order, until one fails (logged and counted once per failure
    /// spell).
    fn flush_to_session_file(&mut self) {
        let Some(file) = self.session_file.as_mut() else { return };
        for chunk in &mut self.interval {
            let StoredChunk::Memory(bytes) = chunk else { continue };
            match file.append(bytes) {
                Ok(offset) => *chunk = StoredChunk::InSessionFile { offset, len: bytes.len() as u64 },
                Err(e) => {
                    file.fail(&e, self.memory_bound);
                    return;
                }
            }
        }
        if !file.is_at(&file.path) {
            // Nothing to write now, but the next chunk would fail.
            file.fail(&io::Error::new(io::ErrorKind::NotFound, REMOVED), self.memory_bound);
            return;
        }
        if file.failure.take().is_some() {
            log::warn!("the session file {} takes chunks again", echo(&file.path.display().to_string()));
        }
    }

    fn bound_memory(&mut self) {
        let size = |c: &StoredChunk| {
            if let StoredChunk::Memory(b) = c {
                b.len()
            } else {
                0
            }
        };
        while self.interval.iter().filter(|c| size(c) > 0).count() > 1
            && self.interval.iter().map(size).sum::<usize>() > self.memory_bound
        {
            let Some(oldest) = self.interval.iter().position(|c| size(c) > 0) else { break };
            let dropped = size(&self.interval.remove(oldest));
            counters::increment(Counter::ChunksDropped);
            log::warn!(
                "dropped a recording chunk of {dropped} bytes: the chunks held in memory passed {} MiB",
                self.memory_bound >> 20
            );
        }
    }

    /// `path` unless it names the session file (which already has the
    /// interval; a path it was removed from names another file).
    fn elsewhere<'p>(&self, path: Option<&'p Path>) -> Option<&'p Path> {
        path.filter(|p| !self.session_file.as_ref().is_some_and(|s| s.is_at(p)))
    }

    /// The session file, once it took every chunk of the interval (retried
    /// now); `None` without one; an error while it cannot be written.
    fn session_file_ready(&mut self) -> io::Result<Option<PathBuf>> {
        self.flush_to_session_file();
        match &self.session_file {
            None => Ok(None),
            Some(SessionFile { failure: Some(reason), .. }) => Err(io::Error::other(format!(
                "{reason}; the recording since its last good write is kept: give file=PATH to write it elsewhere"
            ))),
            Some(session) => Ok(Some(session.path.clone())),
        }
    }

    /// Whether a dump to `path` (`None`: the session file, if any) can be
    /// written, checked before a command that cannot be undone (`stop`):
    /// another file is created now, the session file must take chunks.
    pub fn check_target(&mut self, path: Option<&Path>) -> io::Result<()> {
        match self.elsewhere(path) {
            Some(path) => create_output(path).map(drop),
            None => self.session_file_ready().map(drop),
        }
    }

    /// Ends the current interval and writes it to `path` (unless that is
    /// the session file, which already has it). Returns where the data
    /// went. On failure the interval is kept for the next dump.
    pub fn dump(&mut self, path: Option<&Path>) -> io::Result<PathBuf> {
        if let Some(path) = self.elsewhere(path) {
            write_interval(path, &self.interval, self.session_file.as_ref().map(|s| &s.file))?;
            self.interval.clear();
            return Ok(path.to_path_buf());
        }
        let session = self
            .session_file_ready()?
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no output file: give file=PATH"))?;
        self.interval.clear();
        Ok(session)
    }
}

fn write_interval(path: &Path, chunks: &[StoredChunk], session: Option<&File>) -> io::Result<()> {
    let mut out = create_output(path)?;
    let mut buffer = Vec::new();
    for chunk in chunks {
        match chunk {
            StoredChunk::Memory(bytes) => out.write_all(bytes)?,
            StoredChunk::InSessionFile { offset, len } => {
                let file = session.ok_or_else(|| io::Error::other("session file missing"))?;
                buffer.resize(*len as usize, 0);
                file.read_exact_at(&mut buffer, *offset)?;
                out.write_all(&buffer)?;
            }
        }
    }
    out.sync_data()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(test: &str) -> PathBuf {
        super::super::scratch("sink", test)
    }

    #[test]
    fn the_session_file_holds_every_chunk_and_a_dump_elsewhere_the_interval() {
        let dir = scratch("session");
        let session = dir.join("session.jfr");
        std::fs::write(&session, b"an older recording").unwrap();
        let mut sink = Sink::new(Some(session.clone())).unwrap();
        assert_eq!(std::fs::read(&session).unwrap(), b"", "created (emptied) at start");
        sink.store(b"one".to_vec());
        assert_eq!(sink.dump(None).unwrap(), session, "no path: the session file has it");
        sink.store(b"two".to_vec());
        sink.store(b"three".to_vec());
        let other = dir.join("interval.jfr");
        assert_eq!(sink.dump(Some(&other)).unwrap(), other);
        assert_eq!(std::fs::read(&other).unwrap(), b"twothree");
        sink.store(b"four".to_vec());
        assert_eq!(sink.dump(Some(&session)).unwrap(), session, "naming the session file writes nothing more");
        let spelled = dir.join(".").join("session.jfr");
        assert_eq!(sink.dump(Some(&spelled)).unwrap(), session, "nor naming it another way");
        assert_eq!(std::fs::read(&session).unwrap(), b"onetwothreefour");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_session_file_past_its_bound_loses_its_oldest_chunks() {
        let dir = scratch("bound");
        let session = dir.join("session.jfr");
        let mut sink = Sink::new(Some(session.clone())).unwrap();
        sink.bound_file(10);
        let removed = counters::get(Counter::RetentionBytesRemoved);
        sink.store(b"aaaa".to_vec());
        sink.store(b"bbbb".to_vec());
        assert_eq!(std::fs::read(&session).unwrap(), b"aaaabbbb", "within the bound");
        sink.store(b"cccc".to_vec());
        assert_eq!(std::fs::read(&session).unwrap(), b"cccc", "past it: the newest half of the bound");
        assert!(counters::get(Counter::RetentionBytesRemoved) >= removed + 8);
        sink.store(b"dd".to_vec());
        let out = dir.join("dump.jfr");
        sink.dump(Some(&out)).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"ccccdd", "the interval's chunks that are left");
        sink.store(b"ee".to_vec());
        assert_eq!(std::fs::read(&session).unwrap(), b"ccccddee", "the new file takes chunks");
        assert_eq!(sink.dump(None).unwrap(), session);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn without_a_session_file_the_interval_is_kept_in_memory_and_bounded() {
        let dir = scratch("memory");
        let mut sink = Sink::bounded(None, 8).unwrap();
        assert!(sink.dump(None).is_err(), "nowhere to write");
        for chunk in [&b"aaaa"[..], b"bbbb", b"cccc"] {
            sink.store(chunk.to_vec());
        }
        let out = dir.join("dump.jfr");
        sink.dump(Some(&out)).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"bbbbcccc", "the oldest chunk was dropped");
        sink.store(b"a chunk larger than the bound".to_vec());
        sink.dump(Some(&out)).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"a chunk larger than the bound", "the newest chunk is kept");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn what_cannot_take_a_recording_is_refused_before_anything_is_written() {
        let dir = scratch("refused");
        // A FIFO is refused without being opened (which would block).
        let fifo = dir.join("fifo");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        for (path, reason) in [
            (dir.join("no/such/dir/x.jfr"), "No such file"),
            (dir.clone(), "directory"),
            (PathBuf::from("/proc/self/mem"), "pseudo file system"),
            (PathBuf::from("/dev/null"), "not a regular file"),
            (fifo.clone(), "not a regular file"),
        ] {
            let e = create_output(&path).expect_err(&path.display().to_string()).to_string();
            assert!(e.contains(reason), "{}: {e}", path.display());
            assert!(Sink::new(Some(path)).is_err());
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_failed_dump_keeps_the_interval_for_the_next() {
        let dir = scratch("failed-dump");
        let mut sink = Sink::new(None).unwrap();
        sink.store(b"kept".to_vec());
        assert!(sink.dump(Some(&dir.join("no/such/dir/x.jfr"))).is_err());
        assert!(sink.dump(Some(&dir)).is_err(), "a directory");
        let out = dir.join("good.jfr");
        sink.dump(Some(&out)).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"kept");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_removed_session_file_keeps_the_chunks_for_a_dump_elsewhere() {
        let dir = scratch("removed");
        let session = dir.join("session.jfr");
        let mut sink = Sink::new(Some(session.clone())).unwrap();
        sink.store(b"one".to_vec());
        std::fs::remove_file(&session).unwrap();
        let failures = counters::get(Counter::SessionFileWriteFailures);
        sink.store(b"two".to_vec());
        sink.store(b"three".to_vec());
        assert!(counters::get(Counter::SessionFileWriteFailures) > failures, "counted");
        assert!(!session.exists(), "a removed session file is not written again behind the user's back");
        let e = sink.dump(None).expect_err("the session file is gone").to_string();
        assert!(e.contains("removed") && e.contains("file=PATH"), "{e}");
        // The chunk written before the removal is read through the open
        // file; the rest come from memory.
        let out = dir.join("rescued.jfr");
        sink.dump(Some(&out)).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"onetwothree");
        // Naming the old path again writes a new file there.
        sink.store(b"four".to_vec());
        sink.dump(Some(&session)).unwrap();
        assert_eq!(std::fs::read(&session).unwrap(), b"four");
        let _ = std::fs::remove_dir_all(dir);
    }
}
