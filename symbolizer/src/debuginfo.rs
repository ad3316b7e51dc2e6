//! Finding the files that describe a library by its build-id: a debug file
//! (`.build-id` directory trees given on the command line,
//! `/usr/lib/debug/.build-id`, the debuginfod cache, binaries given by path
//! or recorded in the recording — themselves, or the file their
//! `.gnu_debuglink` names — and finally debuginfod servers), and the
//! binaries themselves, whose symbol tables name functions when no debug
//! file has DWARF.

use crate::debuginfod::{Artifact, Debuginfod, Fetched};
use memmap2::Mmap;
use object::{Object, ObjectSection};
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

/// Why no debug file is available for a build-id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Missing {
    /// No source knows the build-id (never published).
    UnknownBuildId,
    /// The build-id is known but its debug file cannot be had (server
    /// unreachable, dangling link, unreadable or corrupt file).
    DebugFileMissing(String),
}

pub struct Locator {
    build_id_dirs: Vec<PathBuf>,
    /// `--binary` files by build-id, in the order given.
    binaries: HashMap<String, Vec<PathBuf>>,
    /// The file a `jdk.NativeLibrary` event names for a build-id, when it
    /// exists on this host with that build-id; else why not.
    recorded: HashMap<String, Result<PathBuf, String>>,
    debuginfod: Option<Debuginfod>,
    fetched: HashMap<String, Fetched>,
    /// Binaries fetched from debuginfod (for build-ids without a debug file).
    fetched_binaries: HashMap<String, Fetched>,
}

pub(crate) fn mmap(path: &Path) -> std::io::Result<Mmap> {
    let file = File::open(path)?;
    // SAFETY: read-only mapping; a file changing under us yields wrong data
    // at worst, which the parsers treat as malformed input.
    unsafe { Mmap::map(&file) }
}

/// The hex build-id of an ELF file, if it has one.
pub fn file_build_id(path: &Path) -> Option<String> {
    let data = mmap(path).ok()?;
    buildid::from_file_bytes(&data).ok().map(|b| b.to_hex())
}

/// Whether an ELF file has DWARF (a non-empty `.debug_info`).
pub fn has_dwarf(path: &Path) -> bool {
    let Ok(data) = mmap(path) else { return false };
    object::File::parse(&*data).is_ok_and(|f| f.section_by_name(".debug_info").is_some_and(|s| s.size() > 0))
}

/// The entries a `.build-id` tree at `root` has for `build_id`, in search
/// order: `<root>/.build-id/ab/cdef…<suffix>`, then `<root>/ab/cdef…<suffix>`
/// (when `root` is the `.build-id` directory itself); the suffix is
/// `.debug` for a debug file, none for the binary. An entry may be a
/// dangling link.
fn in_build_id_tree(root: &Path, build_id: &str, suffix: &str) -> Vec<PathBuf> {
    if build_id.len() < 3 {
        return Vec::new();
    }
    let (head, tail) = build_id.split_at(2);
    let name = format!("{tail}{suffix}");
    [root.join(".build-id").join(head).join(&name), root.join(head).join(&name)]
        .into_iter()
        .filter(|p| p.symlink_metadata().is_ok())
        .collect()
}

/// The debug file a binary's `.gnu_debuglink` names, searched where GDB
/// looks: next to the binary, in its `.debug/`, and under `/usr/lib/debug`.
fn via_debuglink(binary: &Path) -> Option<PathBuf> {
    if has_dwarf(binary) {
        return Some(binary.to_path_buf());
    }
    let data = mmap(binary).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let link = file.section_by_name(".gnu_debuglink")?.data().ok()?;
    let name = std::str::from_utf8(&link[..link.iter().position(|&b| b == 0)?]).ok()?;
    let dir = binary.parent()?;
    let system = Path::new("/usr/lib/debug").join(dir.strip_prefix("/").unwrap_or(dir));
    [dir.join(name), dir.join(".debug").join(name), system.join(name)].into_iter().find(|p| p.is_file())
}

impl Locator {
    /// `debug_dirs` are searched first, then `/usr/lib/debug`; `binaries`
    /// are indexed by their build-id.
    pub fn new(debug_dirs: &[PathBuf], binaries: &[PathBuf], debuginfod: Option<Debuginfod>) -> (Self, Vec<String>) {
        let mut problems = Vec::new();
        let mut by_id: HashMap<String, Vec<PathBuf>> = HashMap::new();
        for binary in binaries {
            match file_build_id(binary) {
                Some(id) => by_id.entry(id).or_default().push(binary.clone()),
                None => problems.push(format!("{}: not an ELF file with a build-id; ignored", binary.display())),
            }
        }
        let mut dirs = debug_dirs.to_vec();
        dirs.push(PathBuf::from("/usr/lib/debug"));
        let locator = Self {
            build_id_dirs: dirs,
            binaries: by_id,
            recorded: HashMap::new(),
            debuginfod,
            fetched: HashMap::new(),
            fetched_binaries: HashMap::new(),
        };
        (locator, problems)
    }

    /// Notes the file a recording's `jdk.NativeLibrary` event names for
    /// `build_id`: used like a `--binary` (after them) when it exists here
    /// and has that build-id.
    pub fn add_recorded_library(&mut self, build_id: &str, path: &Path) {
        if self.recorded.get(build_id).is_some_and(Result::is_ok) {
            return;
        }
        let found = match file_build_id(path) {
            Some(id) if id == build_id => Ok(path.to_path_buf()),
            Some(id) => Err(format!("{} on this host has another build-id ({id})", path.display())),
            None if path.exists() => Err(format!("{} on this host has no build-id", path.display())),
            None => Err(format!("{} is not on this host", path.display())),
        };
        self.recorded.insert(build_id.to_owned(), found);
    }

    /// The binaries known for `build_id`, in this order: `--binary` files,
    /// the recorded library file, the binaries of the `.build-id` trees
    /// (`ab/cdef…` beside `ab/cdef….debug`), debuginfod's.
    pub fn binaries(&self, build_id: &str) -> Vec<PathBuf> {
        let mut binaries: Vec<PathBuf> = self.binaries.get(build_id).into_iter().flatten().cloned().collect();
        binaries.extend(self.recorded.get(build_id).and_then(|r| r.as_ref().ok()).cloned());
        binaries.extend(
            self.build_id_dirs.iter().flat_map(|dir| in_build_id_tree(dir, build_id, "")).filter(|p| p.is_file()),
        );
        let cached = self.debuginfod.as_ref().and_then(|d| d.cached_of(build_id, Artifact::Executable));
        let fetched = match self.fetched_binaries.get(build_id) {
            Some(Fetched::File(path)) => Some(path.clone()),
            _ => None,
        };
        binaries.extend(cached.or(fetched));
        binaries
    }

    /// Why the recorded library file of `build_id` cannot be used, if the
    /// recording names one.
    pub fn recorded_problem(&self, build_id: &str) -> Option<&str> {
        self.recorded.get(build_id).and_then(|r| r.as_ref().err()).map(String::as_str)
    }

    /// The debug file of `build_id` from the local sources, tried in order
    /// (trees, debuginfod cache, binaries given, the recorded binary). A source that knows the
    /// build-id but fails (a dangling link, a debug link leading nowhere)
    /// does not end the search; without a file, the error is the first
    /// such failure, or `None` if no local source knows the build-id.
    fn local(&self, build_id: &str) -> Result<PathBuf, Option<String>> {
        let mut failure = None;
        for path in self.build_id_dirs.iter().flat_map(|dir| in_build_id_tree(dir, build_id, ".debug")) {
            if path.is_file() {
                return Ok(path);
            }
            failure.get_or_insert_with(|| format!("{} is a dangling link", path.display()));
        }
        if let Some(path) = self.debuginfod.as_ref().and_then(|d| d.cached(build_id)) {
            return Ok(path);
        }
        for binary in self.binaries(build_id) {
            match via_debuglink(&binary) {
                Some(path) => return Ok(path),
                None => {
                    failure.get_or_insert_with(|| {
                        format!("{} has no debug information and no debug link to a file here", binary.display())
                    });
                }
            }
        }
        Err(failure)
    }

    /// Fetches, concurrently, the debug file of every build-id without a
    /// local one, then the binary of every build-id still without a debug
    /// file or a binary. A build-id is asked for once per run, whatever
    /// the answer.
    pub fn prefetch(&mut self, build_ids: &[String]) {
        let Some(client) = self.debuginfod.as_ref().filter(|d| d.has_servers()) else { return };
        let wanted: Vec<String> =
            build_ids.iter().filter(|id| !self.fetched.contains_key(*id) && self.local(id).is_err()).cloned().collect();
        if wanted.is_empty() {
            return;
        }
        let fetched = client.fetch_all(&wanted);
        let binaries: Vec<String> = wanted
            .iter()
            .filter(|id| !matches!(fetched.get(*id), Some(Fetched::File(_))) && self.binaries(id).is_empty())
            .cloned()
            .collect();
        let fetched_binaries = client.fetch_all_of(&binaries, Artifact::Executable);
        self.fetched.extend(fetched);
        self.fetched_binaries.extend(fetched_binaries);
    }

    /// The debug file of `build_id`: local sources, then what debuginfod
    /// fetched. Without one, a local source's failure is the reason before
    /// debuginfod's (it is the more specific).
    pub fn locate(&self, build_id: &str) -> Result<PathBuf, Missing> {
        let local_failure = match self.local(build_id) {
            Ok(path) => return Ok(path),
            Err(failure) => failure,
        };
        match (self.fetched.get(build_id), local_failure) {
            (Some(Fetched::File(path)), _) => Ok(path.clone()),
            (_, Some(why)) => Err(Missing::DebugFileMissing(why)),
            (Some(Fetched::Unreachable(why)), None) => Err(Missing::DebugFileMissing(format!("debuginfod: {why}"))),
            (Some(Fetched::NotFound) | None, None) => Err(Missing::UnknownBuildId),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{link_in_build_id_tree, scratch_dir};
    use std::io::{Read, Write};

    const ID: &str = "abcdef0123456789abcdef0123456789abcdef01";

    /// A file standing for a debug file (the locator does not open it).
    fn file(dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, name).unwrap();
        path
    }

    fn locator(dirs: &[PathBuf], binaries: &[PathBuf], cache: Option<&Path>) -> Locator {
        let debuginfod = cache.map(|c| Debuginfod::new(Vec::new(), c.to_path_buf()));
        let (locator, problems) = Locator::new(dirs, binaries, debuginfod);
        assert!(problems.is_empty(), "{problems:?}");
        locator
    }

    #[test]
    fn debug_directories_are_searched_in_the_order_given() {
        let dir = scratch_dir("debuginfo_order");
        let (first, second) = (dir.join("first"), dir.join("second"));
        let in_second = link_in_build_id_tree(&second, ID, &file(&dir, "b.debug"));
        let both = [first.clone(), second.clone()];
        assert_eq!(locator(&both, &[], None).locate(ID), Ok(in_second));
        let in_first = link_in_build_id_tree(&first, ID, &file(&dir, "a.debug"));
        assert_eq!(locator(&both, &[], None).locate(ID), Ok(in_first));
    }

    #[test]
    fn a_directory_may_be_the_build_id_directory_itself() {
        let dir = scratch_dir("debuginfo_itself");
        let linked = link_in_build_id_tree(&dir, ID, &file(&dir, "a.debug"));
        assert_eq!(locator(&[dir.join(".build-id")], &[], None).locate(ID), Ok(linked));
    }

    #[test]
    fn unknown_and_malformed_build_ids_are_unknown() {
        let dir = scratch_dir("debuginfo_unknown");
        let locator = locator(std::slice::from_ref(&dir), &[], None);
        assert_eq!(locator.locate(ID), Err(Missing::UnknownBuildId));
        assert_eq!(locator.locate("ab"), Err(Missing::UnknownBuildId));
    }

    #[test]
    fn a_dangling_link_does_not_end_the_search() {
        let dir = scratch_dir("debuginfo_dangling_later");
        let (broken, good) = (dir.join("broken"), dir.join("good"));
        link_in_build_id_tree(&broken, ID, &dir.join("nowhere"));
        let linked = link_in_build_id_tree(&good, ID, &file(&dir, "a.debug"));
        assert_eq!(locator(&[broken.clone(), good], &[], None).locate(ID), Ok(linked));
        let exe = std::env::current_exe().unwrap();
        let id = file_build_id(&exe).expect("the test binary has a GNU build-id");
        link_in_build_id_tree(&broken, &id, &dir.join("nowhere"));
        assert_eq!(locator(&[broken], std::slice::from_ref(&exe), None).locate(&id), Ok(exe));
    }

    #[test]
    fn a_dangling_link_is_the_reason_only_when_nothing_resolves() {
        let dir = scratch_dir("debuginfo_dangling_only");
        link_in_build_id_tree(&dir, ID, &dir.join("nowhere"));
        let found = locator(std::slice::from_ref(&dir), &[], None).locate(ID);
        assert!(matches!(&found, Err(Missing::DebugFileMissing(why)) if why.contains("dangling link")), "{found:?}");
    }

    #[test]
    fn debuginfod_is_asked_past_a_dangling_link() {
        let dir = scratch_dir("debuginfo_dangling_debuginfod");
        link_in_build_id_tree(&dir, ID, &dir.join("nowhere"));
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", server.local_addr().unwrap());
        let serve = std::thread::spawn(move || {
            let (mut stream, _) = server.accept().unwrap();
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request).unwrap();
            stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nDEBUG").unwrap();
        });
        let cache = dir.join("cache");
        let (mut locator, _) =
            Locator::new(std::slice::from_ref(&dir), &[], Some(Debuginfod::new(vec![url], cache.clone())));
        locator.prefetch(&[ID.to_owned()]);
        // Asserted before joining: a locator that did not ask leaves the
        // server waiting.
        assert_eq!(locator.locate(ID), Ok(crate::debuginfod::cache_path(&cache, ID)));
        serve.join().unwrap();
    }

    #[test]
    fn the_debuginfod_cache_comes_after_directories_and_before_binaries() {
        let dir = scratch_dir("debuginfo_cache");
        let exe = std::env::current_exe().unwrap();
        let id = file_build_id(&exe).expect("the test binary has a GNU build-id");
        let cache = dir.join("cache");
        std::fs::create_dir_all(cache.join(&id)).unwrap();
        let cached = file(&cache.join(&id), "debuginfo");
        // A binary with debug information is its own debug file.
        assert_eq!(locator(&[], std::slice::from_ref(&exe), None).locate(&id), Ok(exe.clone()));
        assert_eq!(locator(&[], std::slice::from_ref(&exe), Some(&cache)).locate(&id), Ok(cached));
        let tree = dir.join("tree");
        let linked = link_in_build_id_tree(&tree, &id, &file(&dir, "a.debug"));
        assert_eq!(locator(&[tree], &[exe], Some(&cache)).locate(&id), Ok(linked));
    }

    #[test]
    fn a_recorded_library_counts_only_with_its_build_id() {
        let dir = scratch_dir("debuginfo_recorded");
        let exe = std::env::current_exe().unwrap();
        let id = file_build_id(&exe).expect("the test binary has a GNU build-id");
        let mut locator = locator(&[], &[], None);
        locator.add_recorded_library(&id, &exe);
        assert_eq!(locator.binaries(&id), std::slice::from_ref(&exe));
        assert_eq!(locator.recorded_problem(&id), None);
        // Another build's file at the recorded path, or none.
        locator.add_recorded_library(ID, &exe);
        assert!(locator.binaries(ID).is_empty());
        assert!(locator.recorded_problem(ID).is_some_and(|p| p.contains("has another build-id")));
        let other = "0123456789abcdef0123456789abcdef01234567";
        locator.add_recorded_library(other, &dir.join("libgone.so"));
        assert!(locator.recorded_problem(other).is_some_and(|p| p.ends_with("libgone.so is not on this host")));
        // A later chunk naming a file that does not match changes nothing.
        locator.add_recorded_library(&id, &dir.join("libgone.so"));
        assert_eq!(locator.binaries(&id), [exe]);
    }

    #[test]
    fn binaries_come_given_then_recorded_then_from_trees_then_from_debuginfod() {
        let dir = scratch_dir("debuginfo_binaries");
        let exe = std::env::current_exe().unwrap();
        let id = file_build_id(&exe).expect("the test binary has a GNU build-id");
        let copy = |name: &str| {
            let path = dir.join(name);
            std::fs::copy(&exe, &path).unwrap();
            path
        };
        let (given, recorded) = (copy("given"), copy("recorded"));
        let tree = dir.join("tree");
        let in_tree = tree.join(".build-id").join(&id[..2]).join(&id[2..]);
        std::fs::create_dir_all(in_tree.parent().unwrap()).unwrap();
        std::fs::copy(&exe, &in_tree).unwrap();
        let cache = dir.join("cache");
        let cached = crate::debuginfod::cache_path_of(&cache, &id, Artifact::Executable);
        std::fs::create_dir_all(cached.parent().unwrap()).unwrap();
        std::fs::copy(&exe, &cached).unwrap();
        let mut locator = locator(&[tree], std::slice::from_ref(&given), Some(&cache));
        locator.add_recorded_library(&id, &recorded);
        assert_eq!(locator.binaries(&id), [given, recorded, in_tree, cached]);
    }

    #[test]
    fn a_binary_without_a_build_id_is_ignored_with_a_problem() {
        let dir = scratch_dir("debuginfo_not_elf");
        let (_, problems) = Locator::new(&[], &[file(&dir, "script.sh")], None);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].ends_with("not an ELF file with a build-id; ignored"), "{problems:?}");
    }
}
