//! A debuginfod client: fetches debug files, and binaries, by build-id
//! from the servers in `DEBUGINFOD_URLS` (`GET
//! <server>/buildid/<id>/debuginfo` or `.../executable`), several at once,
//! into the standard client cache (`<cache>/<id>/debuginfo`, `.../executable`,
//! the layout `debuginfod-find` uses), so later runs and other tools reuse
//! them.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// What a server is asked for: a build-id's debug file, or its binary
/// (whose symbol table names functions when no debug file exists).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Artifact {
    Debuginfo,
    Executable,
}

impl Artifact {
    /// The last segment of its URL, and its file name in the cache.
    pub fn name(self) -> &'static str {
        match self {
            Artifact::Debuginfo => "debuginfo",
            Artifact::Executable => "executable",
        }
    }
}

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
    cache_path_of(cache, build_id, Artifact::Debuginfo)
}

/// Where a build-id's `artifact` lives in the cache.
pub fn cache_path_of(cache: &Path, build_id: &str, artifact: Artifact) -> PathBuf {
    cache.join(build_id).join(artifact.name())
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

    /// The debug file of `build_id`, if the cache has it.
    pub fn cached(&self, build_id: &str) -> Option<PathBuf> {
        self.cached_of(build_id, Artifact::Debuginfo)
    }

    pub fn cached_of(&self, build_id: &str, artifact: Artifact) -> Option<PathBuf> {
        let path = cache_path_of(&self.cache, build_id, artifact);
        path.is_file().then_some(path)
    }

    /// Fetches the debug file of every build-id (at most [`MAX_PARALLEL`] at a time).
    pub fn fetch_all(&self, build_ids: &[String]) -> HashMap<String, Fetched> {
        self.fetch_all_of(build_ids, Artifact::Debuginfo)
    }

    /// Fetches `artifact` of every build-id (at most [`MAX_PARALLEL`] at a time).
    pub fn fetch_all_of(&self, build_ids: &[String], artifact: Artifact) -> HashMap<String, Fetched> {
        let results = Mutex::new(HashMap::new());
        let next = Mutex::new(build_ids.iter());
        std::thread::scope(|scope| {
            for _ in 0..MAX_PARALLEL.min(build_ids.len()) {
                scope.spawn(|| {
                    while let Some(id) = next.lock().ok().and_then(|mut n| n.next().cloned()) {
                        let outcome = self.fetch_of(&id, artifact);
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
        self.fetch_of(build_id, Artifact::Debuginfo)
    }

    pub fn fetch_of(&self, build_id: &str, artifact: Artifact) -> Fetched {
        if let Some(path) = self.cached_of(build_id, artifact) {
            return Fetched::File(path);
        }
        let mut problems = Vec::new();
        let mut not_found = 0;
        for url in &self.urls {
            let address = format!("{}/buildid/{build_id}/{}", url.trim_end_matches('/'), artifact.name());
            match self.agent.get(&address).call() {
                Ok(response) => match self.store(build_id, artifact, response) {
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

    fn store(&self, build_id: &str, artifact: Artifact, response: ureq::Response) -> std::io::Result<PathBuf> {
        let path = cache_path_of(&self.cache, build_id, artifact);
        let dir = path.parent().expect("cache path has a parent");
        std::fs::create_dir_all(dir)?;
        let partial = dir.join(format!(".{}.{}.partial", artifact.name(), std::process::id()));
        let mut file = std::fs::File::create(&partial)?;
        std::io::copy(&mut response.into_reader(), &mut file)?;
        file.flush()?;
        std::fs::rename(&partial, &path)?;
        Ok(path)
    }
}
