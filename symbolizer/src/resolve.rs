//! Resolving remote frames (build-id, pc offset) to functions, source
//! lines and inline chains from debug files, with a cache keyed by
//! (build-id, address). The offset is already the attribution address
//! (the agent subtracted one from return addresses): it is looked up as is.

use crate::debuginfo::{Locator, Missing};
use addr2line::Loader;
use std::collections::HashMap;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedFrame {
    pub function: String,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// Why a frame has no name (or no line).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Unresolved {
    /// Code outside every file mapping (JIT output, anonymous memory).
    NoFileMapping,
    /// No source knows the build-id.
    UnknownBuildId,
    /// The build-id is known but its debug file cannot be had.
    DebugFileMissing,
    /// The debug file has no line information for the address.
    NoLineInfo,
}

impl Unresolved {
    pub const ALL: [Unresolved; 4] =
        [Unresolved::NoFileMapping, Unresolved::UnknownBuildId, Unresolved::DebugFileMissing, Unresolved::NoLineInfo];

    pub fn describe(self) -> &'static str {
        match self {
            Unresolved::NoFileMapping => "no file mapping (JIT or anonymous code)",
            Unresolved::UnknownBuildId => "unknown build-id",
            Unresolved::DebugFileMissing => "debug file missing",
            Unresolved::NoLineInfo => "no line information",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// The inline chain, innermost first; the last frame is the function
    /// whose code contains the address.
    Frames(Vec<ResolvedFrame>),
    /// A name from the symbol table, but no source lines.
    NameOnly(String),
    Unresolved(Unresolved),
}

impl Resolution {
    /// The category to report, if the frame is not fully resolved.
    pub fn problem(&self) -> Option<Unresolved> {
        match self {
            Resolution::Frames(frames) if frames.iter().all(|f| f.line.is_some()) => None,
            Resolution::Frames(_) | Resolution::NameOnly(_) => Some(Unresolved::NoLineInfo),
            Resolution::Unresolved(why) => Some(*why),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub lookups: u64,
    pub cache_hits: u64,
}

pub struct Resolver {
    locator: Locator,
    loaders: HashMap<String, Result<Loader, Unresolved>>,
    cache: HashMap<(String, u64), Resolution>,
    problems: Vec<String>,
    stats: Stats,
}

impl Resolver {
    pub fn new(locator: Locator) -> Self {
        Self { locator, loaders: HashMap::new(), cache: HashMap::new(), problems: Vec::new(), stats: Stats::default() }
    }

    /// Fetches the debug files of these build-ids from debuginfod servers,
    /// concurrently, before resolving.
    pub fn prefetch(&mut self, build_ids: &[String]) {
        self.locator.prefetch(build_ids);
    }

    /// What went wrong, one line per build-id.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    fn loader(&mut self, build_id: &str) -> Result<&Loader, Unresolved> {
        if !self.loaders.contains_key(build_id) {
            let loaded = match self.locator.locate(build_id) {
                Ok(path) => Loader::new(&path).map_err(|e| {
                    self.problems.push(format!("{build_id}: {} is not a usable debug file: {e}", path.display()));
                    Unresolved::DebugFileMissing
                }),
                Err(Missing::UnknownBuildId) => {
                    self.problems.push(format!("{build_id}: unknown build-id (no debug file anywhere)"));
                    Err(Unresolved::UnknownBuildId)
                }
                Err(Missing::DebugFileMissing(why)) => {
                    self.problems.push(format!("{build_id}: debug file missing: {why}"));
                    Err(Unresolved::DebugFileMissing)
                }
            };
            self.loaders.insert(build_id.to_owned(), loaded);
        }
        self.loaders[build_id].as_ref().map_err(|e| *e)
    }

    /// Resolves `offset` (a link-time address) in the library `build_id`.
    pub fn resolve(&mut self, build_id: &str, offset: u64) -> Resolution {
        self.stats.lookups += 1;
        let key = (build_id.to_owned(), offset);
        if let Some(hit) = self.cache.get(&key) {
            self.stats.cache_hits += 1;
            return hit.clone();
        }
        let resolution = match self.loader(build_id) {
            Ok(loader) => lookup(loader, offset),
            Err(why) => Resolution::Unresolved(why),
        };
        self.cache.insert(key, resolution.clone());
        resolution
    }
}

fn lookup(loader: &Loader, address: u64) -> Resolution {
    let mut frames = Vec::new();
    if let Ok(mut iter) = loader.find_frames(address) {
        while let Ok(Some(frame)) = iter.next() {
            let Some(function) = frame.function.as_ref().and_then(|f| f.demangle().ok()) else { continue };
            let location = frame.location.as_ref();
            frames.push(ResolvedFrame {
                function: function.into_owned(),
                file: location.and_then(|l| l.file).map(str::to_owned),
                line: location.and_then(|l| l.line),
            });
        }
    }
    if !frames.is_empty() {
        return Resolution::Frames(frames);
    }
    match loader.find_symbol(address) {
        Some(name) => Resolution::NameOnly(addr2line::demangle_auto(name.into(), None).into_owned()),
        None => Resolution::Unresolved(Unresolved::NoLineInfo),
    }
}
