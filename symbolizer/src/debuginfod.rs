//! A debuginfod client: fetches debug files by build-id from the servers
//! in `DEBUGINFOD_URLS` (`GET <server>/buildid/<id>/debuginfo`), several at
//! once, into the standard client cache (`<cache>/<id>/debuginfo`, the
//! layout `debuginfod-find` uses), so later runs and other tools reuse them.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// What fetching one build-id gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fetched {
    /// In the cache (now or before).
    File(PathBuf),
    /// Every server answered that it does not know the build-id.
    NotFound,
    /// No server could be asked (the reasons, per server).
    Unreachable(String),
}

pub struct Debuginfod {
    urls: Vec<String>,
    cache: PathBuf,
    agent: ureq::Agent,
}

/// The client cache: `$DEBUGINFOD_CACHE_PATH`, else
/// `$XDG_CACHE_HOME/debuginfod_client`, else `~/.cache/debuginfod_client`.
pub fn default_cache() -> PathBuf {
    if let Some(path) = std::env::var_os("DEBUGINFOD_CACHE_PATH") {
        return PathBuf::from(path);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    base.join("debuginfod_client")
}

/// Server URLs from `DEBUGINFOD_URLS` (space separated).
pub fn urls_from_env() -> Vec<String> {
    std::env::var("DEBUGINFOD_URLS").unwrap_or_default().split_whitespace().map(str::to_owned).collect()
}

/// Where a build-id's debug file lives in the cache.
pub fn cache_path(cache: &Path, build_id: &str) -> PathBuf {
    cache.join(build_id).join("debuginfo")
}

const MAX_PARALLEL: usize = 8;

impl Debuginfod {
    pub fn new(urls: Vec<String>, cache: PathBuf) -> Self {
        let agent =
            ureq::AgentBuilder::new().timeout_connect(Duration::from_secs(5)).timeout(Duration::from_secs(120)).build();
        Self { urls, cache, agent }
    }

    pub fn has_servers(&self) -> bool {
        !self.urls.is_empty()
    }

    pub fn cached(&self, build_id: &str) -> Option<PathBuf> {
        let path = cache_path(&self.cache, build_id);
        path.is_file().then_some(path)
    }

    /// Fetches every build-id (at most [`MAX_PARALLEL`] at a time).
    pub fn fetch_all(&self, build_ids: &[String]) -> HashMap<String, Fetched> {
        let results = Mutex::new(HashMap::new());
        let next = Mutex::new(build_ids.iter());
        std::thread::scope(|scope| {
            for _ in 0..MAX_PARALLEL.min(build_ids.len()) {
                scope.spawn(|| {
                    while let Some(id) = next.lock().ok().and_then(|mut n| n.next().cloned()) {
                        let outcome = self.fetch(&id);
                        if let Ok(mut r) = results.lock() {
                            r.insert(id, outcome);
                        }
                    }
                });
            }
        });
        results.into_inner().unwrap_or_default()
    }

    pub fn fetch(&self, build_id: &str) -> Fetched {
        if let Some(path) = self.cached(build_id) {
            return Fetched::File(path);
        }
        let mut problems = Vec::new();
        let mut not_found = 0;
        for url in &self.urls {
            let address = format!("{}/buildid/{build_id}/debuginfo", url.trim_end_matches('/'));
            match self.agent.get(&address).call() {
                Ok(response) => match self.store(build_id, response) {
                    Ok(path) => return Fetched::File(path),
                    Err(e) => problems.push(format!("{url}: cannot store the download: {e}")),
                },
                Err(ureq::Error::Status(404, _)) => not_found += 1,
                Err(ureq::Error::Status(code, _)) => problems.push(format!("{url}: HTTP {code}")),
                Err(ureq::Error::Transport(t)) => problems.push(format!("{url}: {t}")),
            }
        }
        if not_found == self.urls.len() {
            Fetched::NotFound
        } else {
            Fetched::Unreachable(problems.join("; "))
        }
    }

    fn store(&self, build_id: &str, response: ureq::Response) -> std::io::Result<PathBuf> {
        let path = cache_path(&self.cache, build_id);
        let dir = path.parent().expect("cache path has a parent");
        std::fs::create_dir_all(dir)?;
        let partial = dir.join(format!(".debuginfo.{}.partial", std::process::id()));
        let mut file = std::fs::File::create(&partial)?;
        std::io::copy(&mut response.into_reader(), &mut file)?;
        file.flush()?;
        std::fs::rename(&partial, &path)?;
        Ok(path)
    }
}
