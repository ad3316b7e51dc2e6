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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    const ID: &str = "abcdef0123456789abcdef0123456789abcdef01";

    fn resolver(tree: std::path::PathBuf) -> Resolver {
        Resolver::new(Locator::new(&[tree], &[], None).0)
    }

    #[test]
    fn an_address_resolves_to_its_function_file_and_line_once() {
        let tree = scratch_dir("resolve_cached");
        link_in_build_id_tree(&tree, ID, &std::env::current_exe().unwrap());
        let mut resolver = resolver(tree);
        let address = known_function_address();
        let first = resolver.resolve(ID, address);
        let Resolution::Frames(frames) = &first else { panic!("{first:?}") };
        let function = frames.last().unwrap();
        assert!(function.function.ends_with("known_function"), "{function:?}");
        assert!(function.file.as_deref().is_some_and(|f| f.ends_with("src/testing.rs")), "{function:?}");
        assert!(function.line.is_some_and(|l| l > 0), "{function:?}");
        assert_eq!(first.problem(), None);
        assert_eq!(resolver.resolve(ID, address), first);
        assert_eq!(resolver.stats(), Stats { lookups: 2, cache_hits: 1 });
        assert!(resolver.problems().is_empty(), "{:?}", resolver.problems());
    }

    #[test]
    fn an_unknown_build_id_is_reported_once() {
        let mut resolver = resolver(scratch_dir("resolve_unknown"));
        for offset in [0x10, 0x20, 0x10] {
            assert_eq!(resolver.resolve(ID, offset), Resolution::Unresolved(Unresolved::UnknownBuildId));
        }
        assert_eq!(resolver.stats(), Stats { lookups: 3, cache_hits: 1 });
        assert_eq!(resolver.problems().len(), 1, "{:?}", resolver.problems());
        assert!(resolver.problems()[0].starts_with(ID), "{:?}", resolver.problems());
    }

    #[test]
    fn a_debug_file_that_cannot_be_used_is_missing() {
        let tree = scratch_dir("resolve_unusable");
        let junk = tree.join("junk");
        std::fs::write(&junk, b"not an ELF file").unwrap();
        link_in_build_id_tree(&tree, ID, &junk);
        let dangling = "0123456789abcdef0123456789abcdef01234567";
        link_in_build_id_tree(&tree, dangling, &tree.join("nowhere"));
        let mut resolver = resolver(tree);
        assert_eq!(resolver.resolve(ID, 0x10), Resolution::Unresolved(Unresolved::DebugFileMissing));
        assert_eq!(resolver.resolve(dangling, 0x10), Resolution::Unresolved(Unresolved::DebugFileMissing));
        let problems = resolver.problems();
        assert!(problems[0].contains("is not a usable debug file"), "{problems:?}");
        assert!(problems[1].contains("dangling link"), "{problems:?}");
    }

    #[test]
    fn an_address_outside_every_function_has_no_line_information() {
        let tree = scratch_dir("resolve_no_line");
        link_in_build_id_tree(&tree, ID, &std::env::current_exe().unwrap());
        let resolution = resolver(tree).resolve(ID, u64::MAX - 1);
        assert_eq!(resolution, Resolution::Unresolved(Unresolved::NoLineInfo));
    }

    #[test]
    fn only_frames_all_with_lines_are_fully_resolved() {
        let frame = |line| ResolvedFrame { function: "f".to_owned(), file: None, line };
        assert_eq!(Resolution::Frames(vec![frame(Some(1)), frame(Some(2))]).problem(), None);
        assert_eq!(Resolution::Frames(vec![frame(Some(1)), frame(None)]).problem(), Some(Unresolved::NoLineInfo));
        assert_eq!(Resolution::NameOnly("f".to_owned()).problem(), Some(Unresolved::NoLineInfo));
        for why in Unresolved::ALL {
            assert_eq!(Resolution::Unresolved(why).problem(), Some(why));
        }
    }
}
