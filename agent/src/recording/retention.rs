//! Which of a looping session's finished files stay on disk: each bound
//! (`maxfiles`, `maxsize`, `maxage`) removes the oldest files past it,
//! never the file being written and never a file this session did not
//! write. Removals are counted and logged; reaching a bound never stops
//! profiling.

use crate::args::{self, echo};
use crate::log;
use sampler::counters::{self, Counter};
use std::collections::VecDeque;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// A finished file of the session.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Kept {
    path: PathBuf,
    /// (device, inode) of the file the session wrote: a file put at its
    /// path since is not the session's, and is never removed.
    identity: (u64, u64),
    bytes: u64,
    /// When its last chunk was written.
    ended: SystemTime,
}

/// The (device, inode) of the file at `path`, if there is one.
pub fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

pub struct Retention {
    limits: args::Retention,
    /// Oldest first.
    files: VecDeque<Kept>,
    /// Their bytes.
    bytes: u64,
}

impl Retention {
    pub fn new(limits: args::Retention) -> Self {
        Self { limits, files: VecDeque::new(), bytes: 0 }
    }

    /// A file of the session, `identity` at `path`, was finished. A name
    /// used again (`%n{MAX}`) replaced the older file of that name.
    pub fn finished(&mut self, path: &Path, identity: (u64, u64), bytes: u64, ended: SystemTime) {
        self.forget(path);
        self.bytes += bytes;
        self.files.push_back(Kept { path: path.to_path_buf(), identity, bytes, ended });
    }

    /// The file being written now has `path`: an older file of that name
    /// (`%n{MAX}`) was overwritten and is no longer kept.
    pub fn reused(&mut self, path: &Path) {
        self.forget(path);
    }

    fn forget(&mut self, path: &Path) {
        let bytes = &mut self.bytes;
        self.files.retain(|kept| {
            let other = kept.path != path;
            if !other {
                *bytes -= kept.bytes;
            }
            other
        });
    }

    /// The bound on the bytes of the session's files, if any.
    pub fn max_size(&self) -> Option<u64> {
        self.limits.max_size
    }

    /// The finished files kept, and their bytes.
    pub fn kept(&self) -> (usize, u64) {
        (self.files.len(), self.bytes)
    }

    /// Removes the oldest finished files past any bound, counting the
    /// file being written (`current` bytes) toward `maxfiles` and `maxsize`.
    pub fn enforce(&mut self, current: u64, now: SystemTime) {
        let max_age = self.limits.max_age.unwrap_or(Duration::MAX);
        while let Some(oldest) = self.files.front() {
            let (count, bytes) = self.kept();
            let too_many = self.limits.max_files.is_some_and(|max| count + 1 > max as usize);
            let too_large = self.limits.max_size.is_some_and(|max| bytes + current > max);
            let too_old = now.duration_since(oldest.ended).is_ok_and(|age| age > max_age);
            let Some(why) = [(too_many, "maxfiles"), (too_large, "maxsize"), (too_old, "maxage")]
                .into_iter()
                .find_map(|(past, bound)| past.then_some(bound))
            else {
                break;
            };
            let Some(oldest) = self.files.pop_front() else { break };
            self.bytes -= oldest.bytes;
            remove(&oldest, why);
        }
    }
}

/// Removes one kept file: counted, logged at info level; a file already
/// gone, or replaced at its path by another, counts nothing.
fn remove(file: &Kept, bound: &str) {
    let shown = echo(&file.path.display().to_string());
    if identity(&file.path) != Some(file.identity) {
        return;
    }
    match std::fs::remove_file(&file.path) {
        Ok(()) => {
            counters::increment(Counter::RetentionFilesRemoved);
            counters::add(Counter::RetentionBytesRemoved, file.bytes);
            log::info!("removed {shown} ({} bytes): past {bound}", file.bytes);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => log::warn!("cannot remove {shown} (past {bound}): {e}; it is no longer tracked"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(test: &str) -> PathBuf {
        super::super::scratch("retention", test)
    }

    /// `n` files of `bytes` each, finished a second apart from `start`.
    fn files(dir: &Path, retention: &mut Retention, n: usize, bytes: usize, start: SystemTime) -> Vec<PathBuf> {
        (0..n)
            .map(|i| {
                let path = dir.join(format!("p{i}.jfr"));
                std::fs::write(&path, vec![0u8; bytes]).unwrap();
                let identity = identity(&path).unwrap();
                retention.finished(&path, identity, bytes as u64, start + Duration::from_secs(i as u64));
                path
            })
            .collect()
    }

    fn left(paths: &[PathBuf]) -> Vec<usize> {
        (0..paths.len()).filter(|&i| paths[i].exists()).collect()
    }

    #[test]
    fn each_bound_removes_the_oldest_files_past_it() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let dir = scratch("bounds");
        let removed = counters::get(Counter::RetentionFilesRemoved);
        let mut by_count = Retention::new(args::Retention { max_files: Some(3), ..Default::default() });
        let paths = files(&dir, &mut by_count, 5, 10, t0);
        by_count.enforce(0, t0);
        assert_eq!(left(&paths), [3, 4], "two finished files and the one being written");
        assert!(counters::get(Counter::RetentionFilesRemoved) >= removed + 3);

        let dir = scratch("size");
        let mut by_size = Retention::new(args::Retention { max_size: Some(35), ..Default::default() });
        let paths = files(&dir, &mut by_size, 5, 10, t0);
        by_size.enforce(5, t0);
        assert_eq!(left(&paths), [2, 3, 4], "30 bytes finished and 5 being written");
        assert_eq!(by_size.kept(), (3, 30));

        let dir = scratch("age");
        let mut by_age =
            Retention::new(args::Retention { max_age: Some(Duration::from_secs(2)), ..Default::default() });
        let paths = files(&dir, &mut by_age, 5, 10, t0);
        by_age.enforce(0, t0 + Duration::from_secs(5));
        assert_eq!(left(&paths), [3, 4], "ended 2 s and 1 s before");
        for dir in ["bounds", "size", "age"] {
            let _ = std::fs::remove_dir_all(scratch(dir));
        }
    }

    #[test]
    fn only_the_sessions_files_are_removed_and_a_reused_name_is_tracked_once() {
        let t0 = SystemTime::UNIX_EPOCH;
        let dir = scratch("own");
        let stranger = dir.join("not-ours.jfr");
        std::fs::write(&stranger, b"someone else's").unwrap();
        let mut retention = Retention::new(args::Retention { max_files: Some(1), ..Default::default() });
        let paths = files(&dir, &mut retention, 2, 4, t0);
        retention.reused(&paths[0]);
        assert_eq!(retention.kept(), (1, 4), "p0 is being written again");
        retention.enforce(0, t0);
        assert!(stranger.exists() && paths[0].exists() && !paths[1].exists());
        // A file removed by someone else is simply no longer tracked, and
        // one put in its place is not the session's: it stays.
        retention.finished(&paths[0], identity(&paths[0]).unwrap(), 4, t0);
        std::fs::remove_file(&paths[0]).unwrap();
        retention.enforce(0, t0);
        assert_eq!(retention.kept(), (0, 0));
        std::fs::write(&paths[1], b"ours").unwrap();
        retention.finished(&paths[1], identity(&paths[1]).unwrap(), 4, t0);
        // (Written while ours still exists: another inode.)
        std::fs::write(dir.join("stranger.tmp"), b"a stranger's").unwrap();
        std::fs::rename(dir.join("stranger.tmp"), &paths[1]).unwrap();
        retention.enforce(0, t0);
        assert!(paths[1].exists(), "a file put at a kept path is not removed");
        let _ = std::fs::remove_dir_all(dir);
    }
}
