//! Resolving remote frames (build-id, pc offset) in tiers: (a) DWARF from
//! a debug file — function, file, line and the inline chain; (b) the
//! symbol table (`.symtab`, else `.dynsym`) of the library's debug file
//! or binary — the function's name; (c) nothing — the frame stays
//! `[library+0xoffset]`. Results are cached by (build-id, address); a
//! recording's distinct addresses are resolved up front on all cores. The
//! offset is already the attribution address (the agent subtracted one
//! from return addresses): it is looked up as is.

use crate::debuginfo::{has_dwarf, mmap, Locator, Missing};
use crate::recording::Recording;
use crate::symbols::SymbolTable;
use addr2line::gimli::{Reader as _, ReaderOffset as _};
use addr2line::Loader;
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedFrame {
    /// Demangled; shared by every frame of the function.
    pub function: Arc<str>,
    pub file: Option<Arc<str>>,
    pub line: Option<u32>,
}

/// How far [`Resolver::prepare_reporting`] has come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Fetching the debug files of this many libraries (those not found
    /// locally, from debuginfod servers).
    Fetching { libraries: usize },
    /// About to resolve this many distinct addresses.
    Resolving { addresses: usize },
    /// This many more of them resolved (one library's).
    Resolved { addresses: usize },
}

/// Why a frame has no name (or no line).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Unresolved {
    /// Code outside every file mapping (JIT output, anonymous memory).
    NoFileMapping,
    /// An unnamed frame of a library the recording gives no build-id:
    /// nothing to look it up by.
    NoBuildId,
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
    pub const ALL: [Unresolved; 6] = [
        Unresolved::NoFileMapping,
        Unresolved::NoBuildId,
        Unresolved::UnknownBuildId,
        Unresolved::DebugFileMissing,
        Unresolved::NoSymbol,
        Unresolved::NoLineInfo,
    ];

    pub fn describe(self) -> &'static str {
        match self {
            Unresolved::NoFileMapping => "no file mapping (JIT or anonymous code)",
            Unresolved::NoBuildId => "library without a build-id",
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
        dwarf: Box<Dwarf>,
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

/// Fewer uncached addresses of one library than this are resolved on the
/// calling thread: a thread's own loader is not worth it.
const PARALLEL_MIN: usize = 4096;

/// Resolves remote frames, caching every result by (build-id, address).
pub struct Resolver {
    sources: Sources,
    /// Each build-id's cache, by the index `cache_index` gave it.
    caches: Vec<FxHashMap<u64, Resolution>>,
    cache_index: HashMap<String, usize>,
    stats: Stats,
}

/// Where frames are resolved from, found once per build-id.
struct Sources {
    locator: Locator,
    sources: HashMap<String, Result<Source, Failure>>,
    problems: Vec<String>,
}

/// A debug file's DWARF and the names its lookups produced, which live
/// and die together (see [`Names`]).
struct Dwarf {
    loader: Loader,
    names: Names,
}

impl Dwarf {
    fn open(path: &Path) -> Result<Dwarf, Box<dyn std::error::Error>> {
        Ok(Dwarf { loader: Loader::new(path)?, names: Names::default() })
    }

    fn lookup(&mut self, symbols: Option<&SymbolTable>, address: u64) -> Resolution {
        lookup(&self.loader, symbols, address, &mut self.names)
    }
}

/// Demangled function names and file names already seen, so that a name
/// is demangled and copied once, however many addresses share it. Keyed
/// by where the name's bytes lie (address and length) in a loader's data
/// (the mapped debug file, its parsed line tables), which stays put while
/// the loader lives: a table serves one loader and lives no longer (both
/// are a [`Dwarf`]'s), so a key names one string, and a name is neither
/// hashed nor validated as UTF-8 again. (A string stored twice gets two
/// keys with one value.)
#[derive(Default)]
struct Names {
    functions: FxHashMap<(u64, u64), Arc<str>>,
    files: FxHashMap<(usize, usize), Arc<str>>,
}

impl Resolver {
    pub fn new(locator: Locator) -> Self {
        let sources = Sources { locator, sources: HashMap::new(), problems: Vec::new() };
        Self { sources, caches: Vec::new(), cache_index: HashMap::new(), stats: Stats::default() }
    }

    /// Learns the library files the recordings name (`jdk.NativeLibrary`),
    /// fetches the debug files of their remote frames' build-ids from
    /// debuginfod servers, concurrently, and resolves every distinct remote
    /// frame, each library's addresses on all cores.
    pub fn prepare<'r>(&mut self, recordings: impl IntoIterator<Item = &'r Recording>) {
        self.prepare_reporting(recordings, &mut |_| {});
    }

    /// [`Resolver::prepare`], saying how far it has come to `report` (a
    /// progress bar).
    pub fn prepare_reporting<'r>(
        &mut self,
        recordings: impl IntoIterator<Item = &'r Recording>,
        report: &mut dyn FnMut(Step),
    ) {
        let mut offsets: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
        for recording in recordings {
            for library in recording.libraries() {
                if let Some(build_id) = &library.build_id {
                    self.sources.locator.add_recorded_library(build_id, Path::new(&library.name));
                }
            }
            for (build_id, offset) in recording.frames.iter().filter_map(|f| f.remote()) {
                offsets.entry(build_id).or_default().push(offset);
            }
        }
        let ids: Vec<String> = offsets.keys().map(|&id| id.to_owned()).collect();
        report(Step::Fetching { libraries: ids.len() });
        self.prefetch(&ids);
        for offsets in offsets.values_mut() {
            offsets.sort_unstable();
            offsets.dedup();
        }
        report(Step::Resolving { addresses: offsets.values().map(Vec::len).sum() });
        for (build_id, offsets) in offsets {
            let addresses = offsets.len();
            self.resolve_all(build_id, offsets);
            report(Step::Resolved { addresses });
        }
    }

    /// Fetches the debug files of these build-ids from debuginfod servers,
    /// concurrently, before resolving.
    pub fn prefetch(&mut self, build_ids: &[String]) {
        self.sources.locator.prefetch(build_ids);
    }

    /// What went wrong, one line per build-id.
    pub fn problems(&self) -> &[String] {
        &self.sources.problems
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// What the frames of `build_id` were resolved from (after resolving
    /// one), or why they were not.
    pub fn describe(&self, build_id: &str) -> Option<String> {
        Some(match self.sources.sources.get(build_id)? {
            Ok(source) => source.describe(),
            Err(failure) => failure.to_string(),
        })
    }

    fn cache_of(&mut self, build_id: &str) -> usize {
        if let Some(&index) = self.cache_index.get(build_id) {
            return index;
        }
        self.caches.push(FxHashMap::default());
        self.cache_index.insert(build_id.to_owned(), self.caches.len() - 1);
        self.caches.len() - 1
    }

    /// Resolves `offset` (a link-time address) in the library `build_id`.
    pub fn resolve(&mut self, build_id: &str, offset: u64) -> &Resolution {
        self.stats.lookups += 1;
        let index = self.cache_of(build_id);
        match self.caches[index].entry(offset) {
            Entry::Occupied(hit) => {
                self.stats.cache_hits += 1;
                hit.into_mut()
            }
            Entry::Vacant(slot) => slot.insert(self.sources.resolve(build_id, offset)),
        }
    }

    /// Resolves every address of `offsets` in the library `build_id` into
    /// the cache: with DWARF and many addresses, on all cores, each thread
    /// with its own loader over a contiguous run of the sorted addresses
    /// (so each parses only the compilation units its addresses are in).
    pub fn resolve_all(&mut self, build_id: &str, mut offsets: Vec<u64>) {
        let index = self.cache_of(build_id);
        let cache = &mut self.caches[index];
        offsets.retain(|o| !cache.contains_key(o));
        offsets.sort_unstable();
        offsets.dedup();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let parallel = match self.sources.source(build_id) {
            Ok(Source::Dwarf { path, symbols, .. }) if threads > 1 && offsets.len() >= PARALLEL_MIN => {
                let part = offsets.len().div_ceil(threads);
                let (path, symbols) = (path.as_path(), symbols.as_ref());
                std::thread::scope(|scope| {
                    let parts: Vec<_> = offsets
                        .chunks(part)
                        .map(|part| scope.spawn(move || resolve_part(path, symbols, part)))
                        .collect();
                    parts.into_iter().filter_map(|p| p.join().ok().flatten()).flatten().collect::<Vec<_>>()
                })
            }
            _ => Vec::new(),
        };
        let cache = &mut self.caches[index];
        cache.extend(parallel);
        // What no thread resolved (a loader that could not open the file).
        for offset in offsets {
            if !self.caches[index].contains_key(&offset) {
                let resolution = self.sources.resolve(build_id, offset);
                self.caches[index].insert(offset, resolution);
            }
        }
    }
}

/// One thread's share of [`Resolver::resolve_all`]: `offsets` resolved
/// with a loader of its own over the debug file at `path` (`None` if it
/// cannot be opened).
fn resolve_part(path: &Path, symbols: Option<&SymbolTable>, offsets: &[u64]) -> Option<Vec<(u64, Resolution)>> {
    let mut dwarf = Dwarf::open(path).ok()?;
    Some(offsets.iter().map(|&offset| (offset, dwarf.lookup(symbols, offset))).collect())
}

impl Sources {
    /// The source of `build_id`'s frames: a debug file with DWARF, else the
    /// first binary or symbol-only debug file with a `.symtab`, else the
    /// first with a `.dynsym`.
    fn source(&mut self, build_id: &str) -> Result<&mut Source, Unresolved> {
        if !self.sources.contains_key(build_id) {
            let source = self.find_source(build_id);
            self.sources.insert(build_id.to_owned(), source);
        }
        self.sources.get_mut(build_id).expect("inserted above").as_mut().map_err(|f| f.why)
    }

    fn resolve(&mut self, build_id: &str, offset: u64) -> Resolution {
        match self.source(build_id) {
            Ok(Source::Dwarf { dwarf, symbols, .. }) => dwarf.lookup(symbols.as_ref(), offset),
            Ok(Source::Symbols { table, .. }) => match table.lookup(offset) {
                Some(name) => Resolution::NameOnly(name),
                None => Resolution::Unresolved(Unresolved::NoSymbol),
            },
            Err(why) => Resolution::Unresolved(why),
        }
    }

    fn find_source(&mut self, build_id: &str) -> Result<Source, Failure> {
        let mut candidates = Vec::new();
        let mut missing = match self.locator.locate(build_id) {
            Ok(path) if has_dwarf(&path) => match Dwarf::open(&path) {
                Ok(dwarf) => return Ok(Source::Dwarf { symbols: symbol_table(&path), dwarf: Box::new(dwarf), path }),
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
}

fn lookup(loader: &Loader, symbols: Option<&SymbolTable>, address: u64, names: &mut Names) -> Resolution {
    let mut frames = Vec::new();
    if let Ok(mut iter) = loader.find_frames(address) {
        while let Ok(Some(frame)) = iter.next() {
            let Some(function) = frame.function.as_ref() else { continue };
            let key = (function.name.offset_id().0, function.name.len().into_u64());
            let function = match names.functions.entry(key) {
                Entry::Occupied(name) => name.get().clone(),
                Entry::Vacant(slot) => {
                    let Ok(raw) = function.raw_name() else { continue };
                    slot.insert(addr2line::demangle_auto(raw, function.language).into()).clone()
                }
            };
            let location = frame.location.as_ref();
            let file = location
                .and_then(|l| l.file)
                .map(|f| names.files.entry((f.as_ptr() as usize, f.len())).or_insert_with(|| f.into()).clone());
            frames.push(ResolvedFrame { function, file, line: location.and_then(|l| l.line) });
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
        let first = resolver.resolve(ID, address).clone();
        let Resolution::Frames(frames) = &first else { panic!("{first:?}") };
        let function = frames.last().unwrap();
        assert!(function.function.ends_with("known_function"), "{function:?}");
        assert!(function.file.as_deref().is_some_and(|f| f.ends_with("src/testing.rs")), "{function:?}");
        assert!(function.line.is_some_and(|l| l > 0), "{function:?}");
        assert_eq!(first.problem(), None);
        assert_eq!(resolver.resolve(ID, address), &first);
        assert_eq!(resolver.stats(), Stats { lookups: 2, cache_hits: 1 });
        assert!(resolver.problems().is_empty(), "{:?}", resolver.problems());
    }

    /// Names shared across lookups (keyed by where their bytes lie) give
    /// every address the frames a lookup with no shared names gives.
    #[test]
    fn shared_names_resolve_as_fresh_ones() {
        use object::{Object, ObjectSection};
        let exe = std::env::current_exe().unwrap();
        let data = std::fs::read(&exe).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let text = file.section_by_name(".text").expect(".text");
        let loader = Loader::new(&exe).unwrap();
        let mut shared = Names::default();
        let (mut named, step) = (0, (text.size() / 3000).max(1));
        for address in (text.address()..text.address() + text.size()).step_by(step as usize) {
            let fresh = lookup(&loader, None, address, &mut Names::default());
            named += usize::from(matches!(fresh, Resolution::Frames(_)));
            assert_eq!(lookup(&loader, None, address, &mut shared), fresh, "{address:#x}");
        }
        assert!(named > 2000, "{named} of 3000 addresses have DWARF frames");
        assert!(shared.functions.len() > 100, "{} distinct functions", shared.functions.len());
    }

    #[test]
    fn an_unknown_build_id_is_reported_once() {
        let mut resolver = resolver(scratch_dir("resolve_unknown"));
        for offset in [0x10, 0x20, 0x10] {
            assert_eq!(resolver.resolve(ID, offset), &Resolution::Unresolved(Unresolved::UnknownBuildId));
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
        assert_eq!(resolver.resolve(ID, 0x10), &Resolution::Unresolved(Unresolved::DebugFileMissing));
        assert_eq!(resolver.resolve(dangling, 0x10), &Resolution::Unresolved(Unresolved::DebugFileMissing));
        let problems = resolver.problems();
        assert!(problems[0].contains("is not a usable debug file"), "{problems:?}");
        assert!(problems[1].contains("dangling link"), "{problems:?}");
    }

    #[test]
    fn an_address_outside_every_function_has_no_name() {
        let tree = scratch_dir("resolve_no_line");
        link_in_build_id_tree(&tree, ID, &std::env::current_exe().unwrap());
        let mut resolver = resolver(tree);
        assert_eq!(resolver.resolve(ID, u64::MAX - 1), &Resolution::Unresolved(Unresolved::NoSymbol));
    }

    #[test]
    fn only_frames_all_with_lines_are_fully_resolved() {
        let frame = |line| ResolvedFrame { function: "f".into(), file: None, line };
        assert_eq!(Resolution::Frames(vec![frame(Some(1)), frame(Some(2))]).problem(), None);
        assert_eq!(Resolution::Frames(vec![frame(Some(1)), frame(None)]).problem(), Some(Unresolved::NoLineInfo));
        assert_eq!(Resolution::NameOnly("f".to_owned()).problem(), Some(Unresolved::NoLineInfo));
        for why in Unresolved::ALL {
            assert_eq!(Resolution::Unresolved(why).problem(), Some(why));
        }
    }
}
