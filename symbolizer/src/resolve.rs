//! Resolving remote frames (build-id, pc offset) in tiers: (a) DWARF from
//! a debug file — function, file, line and the inline chain; (b) the
//! symbol table (`.symtab`, else `.dynsym`) of the library's debug file
//! or binary — the function's name; (c) nothing — the frame stays
//! `[library+0xoffset]`. Results are cached by (build-id, address). The
//! offset is already the attribution address (the agent subtracted one
//! from return addresses): it is looked up as is.

use crate::debuginfo::{has_dwarf, mmap, Locator, Missing};
use crate::recording::Recording;
use crate::symbols::SymbolTable;
use addr2line::Loader;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

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
    /// The build-id is known but neither a debug file nor a binary with
    /// symbols can be had.
    DebugFileMissing,
    /// The library is known but no function of it holds the address.
    NoSymbol,
    /// Named from a symbol table, or by DWARF without a line: no line.
    NoLineInfo,
}

impl Unresolved {
    pub const ALL: [Unresolved; 5] = [
        Unresolved::NoFileMapping,
        Unresolved::UnknownBuildId,
        Unresolved::DebugFileMissing,
        Unresolved::NoSymbol,
        Unresolved::NoLineInfo,
    ];

    pub fn describe(self) -> &'static str {
        match self {
            Unresolved::NoFileMapping => "no file mapping (JIT or anonymous code)",
            Unresolved::UnknownBuildId => "unknown build-id",
            Unresolved::DebugFileMissing => "debug file and binary missing",
            Unresolved::NoSymbol => "no function at the address",
            Unresolved::NoLineInfo => "no line information",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// Tier (a), DWARF: the inline chain, innermost first; the last frame
    /// is the function whose code contains the address.
    Frames(Vec<ResolvedFrame>),
    /// Tier (b): a name from a symbol table, no source lines.
    NameOnly(String),
    /// Tier (c).
    Unresolved(Unresolved),
}

/// How a frame was resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tier {
    Dwarf,
    Symbols,
    Unresolved,
}

impl Tier {
    pub const ALL: [Tier; 3] = [Tier::Dwarf, Tier::Symbols, Tier::Unresolved];

    pub fn describe(self) -> &'static str {
        match self {
            Tier::Dwarf => "DWARF (function, file:line, inlined calls)",
            Tier::Symbols => "symbol table (function name)",
            Tier::Unresolved => "unresolved ([library+0xoffset])",
        }
    }
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

    pub fn tier(&self) -> Tier {
        match self {
            Resolution::Frames(_) => Tier::Dwarf,
            Resolution::NameOnly(_) => Tier::Symbols,
            Resolution::Unresolved(_) => Tier::Unresolved,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub lookups: u64,
    pub cache_hits: u64,
}

/// What a library's frames are resolved from.
enum Source {
    /// A debug file with DWARF, and its symbol table for addresses its
    /// DWARF does not cover.
    Dwarf {
        loader: Box<Loader>,
        symbols: Option<SymbolTable>,
        path: PathBuf,
    },
    Symbols {
        table: SymbolTable,
        path: PathBuf,
    },
}

impl Source {
    fn describe(&self) -> String {
        match self {
            Source::Dwarf { path, .. } => format!("DWARF of {}", path.display()),
            Source::Symbols { table, path } => format!("{} of {} (no debug file)", table.table, path.display()),
        }
    }
}

/// Why a library's frames cannot be resolved.
struct Failure {
    why: Unresolved,
    detail: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.why.describe(), self.detail)
    }
}

fn symbol_table(path: &Path) -> Option<SymbolTable> {
    SymbolTable::parse(&mmap(path).ok()?)
}

pub struct Resolver {
    locator: Locator,
    sources: HashMap<String, Result<Source, Failure>>,
    cache: HashMap<(String, u64), Resolution>,
    problems: Vec<String>,
    stats: Stats,
}

impl Resolver {
    pub fn new(locator: Locator) -> Self {
        Self { locator, sources: HashMap::new(), cache: HashMap::new(), problems: Vec::new(), stats: Stats::default() }
    }

    /// Learns the library files the recording names (`jdk.NativeLibrary`)
    /// and fetches the debug files of its remote frames' build-ids from
    /// debuginfod servers, concurrently, before resolving.
    pub fn prepare(&mut self, recording: &Recording) {
        for library in recording.libraries() {
            if let Some(build_id) = &library.build_id {
                self.locator.add_recorded_library(build_id, Path::new(&library.name));
            }
        }
        let mut ids: Vec<String> = recording
            .samples()
            .flat_map(|s| s.frames.iter().filter_map(|f| f.remote().map(|(id, _)| id.to_owned())))
            .collect();
        ids.sort();
        ids.dedup();
        self.prefetch(&ids);
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

    /// What the frames of `build_id` were resolved from (after resolving
    /// one), or why they were not.
    pub fn describe(&self, build_id: &str) -> Option<String> {
        Some(match self.sources.get(build_id)? {
            Ok(source) => source.describe(),
            Err(failure) => failure.to_string(),
        })
    }

    /// The source of `build_id`'s frames: a debug file with DWARF, else the
    /// first binary or symbol-only debug file with a `.symtab`, else the
    /// first with a `.dynsym`.
    fn source(&mut self, build_id: &str) -> Result<&Source, Unresolved> {
        if !self.sources.contains_key(build_id) {
            let source = self.find_source(build_id);
            self.sources.insert(build_id.to_owned(), source);
        }
        self.sources[build_id].as_ref().map_err(|f| f.why)
    }

    fn find_source(&mut self, build_id: &str) -> Result<Source, Failure> {
        let mut candidates = Vec::new();
        let mut missing = match self.locator.locate(build_id) {
            Ok(path) if has_dwarf(&path) => match Loader::new(&path) {
                Ok(loader) => {
                    return Ok(Source::Dwarf { symbols: symbol_table(&path), loader: Box::new(loader), path })
                }
                Err(e) => Some(format!("{} is not a usable debug file: {e}", path.display())),
            },
            Ok(path) => {
                let problem = format!("{} is not a usable debug file: it has no DWARF", path.display());
                candidates.push(path);
                Some(problem)
            }
            Err(Missing::UnknownBuildId) => None,
            Err(Missing::DebugFileMissing(why)) => Some(why),
        };
        candidates.extend(self.locator.binaries(build_id));
        let tables: Vec<(SymbolTable, PathBuf)> =
            candidates.iter().filter_map(|path| Some((symbol_table(path)?, path.clone()))).collect();
        let best = tables.iter().position(|(t, _)| t.table == crate::symbols::Table::Symtab).or(
            // Only `.dynsym`s: the first.
            (!tables.is_empty()).then_some(0),
        );
        if let Some(index) = best {
            let (table, path) = tables.into_iter().nth(index).expect("index of a table");
            return Ok(Source::Symbols { table, path });
        }
        if let Some(binary) = candidates.first() {
            missing.get_or_insert_with(|| format!("{} has no symbols", binary.display()));
        }
        let recorded = self.locator.recorded_problem(build_id);
        let failure = match missing {
            Some(why) => Failure {
                why: Unresolved::DebugFileMissing,
                detail: [Some(why.as_str()), recorded].into_iter().flatten().collect::<Vec<_>>().join("; "),
            },
            None => Failure {
                why: Unresolved::UnknownBuildId,
                detail: recorded.unwrap_or("no debug file or binary anywhere").to_owned(),
            },
        };
        self.problems.push(format!("{build_id}: {failure}"));
        Err(failure)
    }

    /// Resolves `offset` (a link-time address) in the library `build_id`.
    pub fn resolve(&mut self, build_id: &str, offset: u64) -> Resolution {
        self.stats.lookups += 1;
        let key = (build_id.to_owned(), offset);
        if let Some(hit) = self.cache.get(&key) {
            self.stats.cache_hits += 1;
            return hit.clone();
        }
        let resolution = match self.source(build_id) {
            Ok(Source::Dwarf { loader, symbols, .. }) => lookup(loader, symbols.as_ref(), offset),
            Ok(Source::Symbols { table, .. }) => match table.lookup(offset) {
                Some(name) => Resolution::NameOnly(name),
                None => Resolution::Unresolved(Unresolved::NoSymbol),
            },
            Err(why) => Resolution::Unresolved(why),
        };
        self.cache.insert(key, resolution.clone());
        resolution
    }
}

fn lookup(loader: &Loader, symbols: Option<&SymbolTable>, address: u64) -> Resolution {
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
    match symbols.and_then(|s| s.lookup(address)) {
        Some(name) => Resolution::NameOnly(name),
        None => Resolution::Unresolved(Unresolved::NoSymbol),
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
    fn an_address_outside_every_function_has_no_name() {
        let tree = scratch_dir("resolve_no_line");
        link_in_build_id_tree(&tree, ID, &std::env::current_exe().unwrap());
        let resolution = resolver(tree).resolve(ID, u64::MAX - 1);
        assert_eq!(resolution, Resolution::Unresolved(Unresolved::NoSymbol));
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
