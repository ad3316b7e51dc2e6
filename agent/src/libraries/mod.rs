//! The library table: every executable object of the process, with a
//! stable index for the life of a profiling session, its symbols, build-id
//! and unwind sections.
//!
//! Signal handlers see the table through an immutable [`Snapshot`] that
//! it publishes in its [`Snapshots`] (the sampler's read side). A refresh
//! (new libraries loaded) builds a new snapshot and swaps it in; old
//! snapshots are kept until the last holder of the `Snapshots` drops it,
//! after the sampler has been retired, so a handler can never hold a
//! freed snapshot. ELF parsing happens only in
//! control-plane threads: at `start`, and in the session's library refresh tick
//! on the session's ticker.

mod debug_file;
pub mod file_map;
pub mod kernel;
pub mod marks;
pub mod scan;
pub mod sections;
pub mod symbols;

use file_map::FileMap;
use sampler::counters::{self, Counter};
use sampler::libraries::{Library as Mapped, Marks, Snapshot, Snapshots};
use scan::LoadedObject;
use sections::{UnwindSections, Wanted};
use std::collections::HashMap;
use std::ops::{Deref, Range};
use std::sync::{Arc, Mutex};
use symbols::SymbolTable;
use unwind::dwarf::{DwarfModule, DwarfUnwinder, SectionData};
use unwind::rules::CompiledRules;
use unwind::sframe::{SFrameModule, SFrameSection, SFrameUnwinder};

/// A library as the control plane knows it: what handlers see of it
/// (`mapped`, shared with the snapshots), its symbols and the unwind
/// sections read from its file.
pub struct Library {
    pub mapped: Arc<Mapped>,
    pub symbols: SymbolTable,
    sections: UnwindSections,
    /// `.eh_frame`'s rules, compiled once when the library is loaded.
    rules: Option<Arc<CompiledRules>>,
}

impl Deref for Library {
    type Target = Mapped;

    fn deref(&self) -> &Mapped {
        &self.mapped
    }
}

/// An object without a file (the vDSO) as its memory holds it: through its
/// section header table, which lies past its loaded segment (the kernel
/// maps the whole image), else the loaded segment alone (no symbols).
fn read_in_memory_image(loaded: &Range<u64>) -> Option<Vec<u8>> {
    let read = |len: u64| {
        let mut bytes = vec![0u8; usize::try_from(len).ok()?];
        scan::read_own_memory(loaded.start, &mut bytes).then_some(bytes)
    };
    let segment = loaded.end.checked_sub(loaded.start)?;
    // ELF64 header: e_shoff at 0x28, e_shentsize at 0x3a, e_shnum at 0x3c.
    let header = read(64)?;
    let field = |at: usize, len: usize| {
        header.get(at..at + len).map(|b| b.iter().rev().fold(0u64, |v, &x| v << 8 | u64::from(x)))
    };
    let (Some(offset), Some(size), Some(count)) = (field(0x28, 8), field(0x3a, 2), field(0x3c, 2)) else {
        return read(segment);
    };
    let whole = offset.checked_add(size * count).filter(|&end| end > segment && end <= 1 << 20);
    whole.and_then(read).or_else(|| read(segment))
}

impl Library {
    fn load(index: u32, object: &LoadedObject, wanted: Wanted) -> Library {
        let (image, mapped);
        let data: Option<&[u8]> = if object.in_memory {
            image = read_in_memory_image(&object.image);
            image.as_deref()
        } else {
            mapped = FileMap::open(&object.path).ok();
            mapped.as_ref().map(FileMap::bytes)
        };
        let build_id = object.build_id.clone().or_else(|| data.and_then(|d| buildid::from_file_bytes(d).ok()));
        let debug = match data {
            Some(bytes) if !object.in_memory => debug_file::find(&object.path, bytes, build_id.as_ref()),
            _ => None,
        };
        let (mut symbols, sections) = match data {
            Some(bytes) => {
                let images = [Some(bytes), debug.as_ref().map(FileMap::bytes)];
                (SymbolTable::from_elfs(images.into_iter().flatten()), sections::read(bytes, wanted))
            }
            None => (SymbolTable::default(), UnwindSections::default()),
        };
        let is_jvm = object.path.ends_with("/libjvm.so");
        let mapped = Mapped {
            index,
            path: object.path.clone(),
            bias: object.bias,
            text: object.text.clone(),
            image: object.image.clone(),
            build_id,
            is_jvm,
            marks: if is_jvm { symbols.take_marks() } else { Marks::default() },
        };
        let mut library = Library { mapped: Arc::new(mapped), symbols, sections, rules: None };
        library.rules = CompiledRules::compile(&library.dwarf_module()).map(Arc::new);
        library
    }

    /// A display name for runtime `address`: the demangled function, or
    /// `[library+0xoffset]` with the link-time offset.
    pub fn describe(&self, address: u64) -> String {
        let link_time = address.wrapping_sub(self.bias);
        match self.symbols.find(link_time) {
            Some(hit) => symbols::demangle(hit.mangled),
            None => format!("[{}+{link_time:#x}]", self.name()),
        }
    }

    fn dwarf_module(&self) -> DwarfModule {
        let start = self.text.iter().map(|t| t.start).min().unwrap_or(0);
        let end = self.text.iter().map(|t| t.end).max().unwrap_or(0);
        DwarfModule {
            name: self.path.clone(),
            avma: start..end,
            bias: self.bias,
            text_svma: self.sections.text.clone(),
            eh_frame: self.sections.eh_frame.clone(),
            eh_frame_hdr: self.sections.eh_frame_hdr.clone(),
            debug_frame: self.sections.debug_frame.clone(),
            got_svma: self.sections.got.clone(),
            rules: self.rules.clone(),
        }
    }

    fn sframe_modules(&self) -> Vec<SFrameModule<SectionData>> {
        let Some((svma, data)) = &self.sections.sframe else { return Vec::new() };
        let Ok(section) = SFrameSection::parse(data.clone(), svma.wrapping_add(self.bias)) else { return Vec::new() };
        self.text.iter().map(|t| SFrameModule { text: t.clone(), section: section.clone() }).collect()
    }
}

/// Identity of a loaded object: path, load bias and first text address.
type ObjectKey = (String, u64, u64);

struct TableState {
    libraries: Vec<Arc<Library>>,
    /// Objects already parsed (build-id, symbols): seen again, they are
    /// reused in O(1) and counted as cache hits.
    processed: HashMap<ObjectKey, u32>,
    loaded: Vec<u32>,
    counters: (u64, u64),
}

pub struct LibraryTable {
    wanted: Wanted,
    state: Mutex<TableState>,
    /// What handlers read: the loaded libraries' snapshot.
    snapshots: Arc<Snapshots>,
}

impl LibraryTable {
    /// Scans the process. Not signal-safe.
    pub fn new(wanted: Wanted) -> LibraryTable {
        let table = LibraryTable {
            wanted,
            state: Mutex::new(TableState {
                libraries: Vec::new(),
                processed: HashMap::new(),
                loaded: Vec::new(),
                counters: (0, 0),
            }),
            snapshots: Arc::default(),
        };
        table.refresh();
        table
    }

    /// Picks up libraries loaded or unloaded since the last scan; true if
    /// anything changed. Cheap when nothing did (two loader counters).
    pub fn refresh_if_changed(&self) -> bool {
        let counters = scan::load_counters();
        let unchanged = self.state.lock().map(|s| s.counters == counters).unwrap_or(true);
        if unchanged {
            return false;
        }
        self.refresh();
        true
    }

    fn refresh(&self) {
        let (mut objects, counters) = scan::loaded_objects();
        let unlisted = scan::unlisted_mappings(&objects);
        objects.extend(unlisted);
        let Ok(mut state) = self.state.lock() else { return };
        state.counters = counters;
        let mut loaded = Vec::with_capacity(objects.len());
        for object in &objects {
            let key = (object.path.clone(), object.bias, object.text.first().map_or(0, |t| t.start));
            let index = match state.processed.get(&key) {
                Some(&index) => {
                    counters::increment(Counter::RemoteBuildIdCacheHits);
                    index
                }
                None => {
                    let index = state.libraries.len() as u32;
                    let library = Library::load(index, object, self.wanted);
                    if library.build_id.is_some() {
                        counters::increment(Counter::RemoteLibsWithBuildId);
                    }
                    state.libraries.push(Arc::new(library));
                    state.processed.insert(key, index);
                    index
                }
            };
            loaded.push(index);
        }
        state.loaded = loaded;
        self.snapshots.publish(self.build_snapshot(&state));
    }

    fn build_snapshot(&self, state: &TableState) -> Snapshot {
        let loaded: Vec<&Arc<Library>> = state.loaded.iter().map(|&i| &state.libraries[i as usize]).collect();
        let dwarf = (self.wanted == Wanted::Dwarf).then(|| {
            let mut unwinder = DwarfUnwinder::new();
            for library in &loaded {
                unwinder.add_module(&library.dwarf_module());
            }
            unwinder
        });
        let sframe = (self.wanted == Wanted::SFrame)
            .then(|| SFrameUnwinder::new(loaded.iter().flat_map(|l| l.sframe_modules()).collect()));
        Snapshot::new(loaded.iter().map(|l| &l.mapped), dwarf, sframe)
    }

    /// What handlers read of this table.
    pub fn snapshots(&self) -> &Arc<Snapshots> {
        &self.snapshots
    }

    /// Every library seen in this session, loaded or since unloaded.
    pub fn libraries(&self) -> Vec<Arc<Library>> {
        self.state.lock().map(|s| s.libraries.clone()).unwrap_or_default()
    }

    /// The library with session index `index`.
    pub fn by_index(&self, index: u32) -> Option<Arc<Library>> {
        self.state.lock().ok()?.libraries.get(index as usize).cloned()
    }

    /// The library (loaded now, or seen earlier) containing `address`.
    pub fn library_at(&self, address: u64) -> Option<Arc<Library>> {
        let state = self.state.lock().ok()?;
        let loaded = state.loaded.iter().map(|&i| &state.libraries[i as usize]);
        let library = loaded
            .clone()
            .find(|l| l.contains(address))
            .or_else(|| state.libraries.iter().find(|l| l.contains(address)));
        library.cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_finds_libc_and_symbolizes_its_functions() {
        let table = LibraryTable::new(Wanted::Dwarf);
        let snapshot = table.snapshots().current().unwrap();
        let getpid = libc::getpid as unsafe extern "C" fn() -> libc::pid_t as usize as u64;
        let library = snapshot.library_at(getpid).expect("libc contains getpid");
        assert!(library.name().starts_with("libc.so"), "{}", library.path);
        assert!(library.build_id.is_some());
        let named = table.by_index(library.index).unwrap().describe(getpid);
        assert!(named.contains("getpid"), "{named}");
        assert!(snapshot.dwarf.is_some());
        assert!(snapshot.library_at(0).is_none());
        assert!(!table.refresh_if_changed(), "nothing was loaded meanwhile");
        assert_eq!(table.library_at(getpid).unwrap().index, library.index);
    }

    /// The vDSO has no file: its functions are named from its image in
    /// memory, whose symbol table lies past its loaded segment.
    #[test]
    fn the_vdsos_functions_are_named_from_memory() {
        // SAFETY: getauxval only reads the auxiliary vector.
        let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
        if base == 0 {
            test_skip::skip("this process has no vDSO", test_skip::InCi::Optional);
            return;
        }
        let table = LibraryTable::new(Wanted::Dwarf);
        let snapshot = table.snapshots().current().unwrap();
        let vdso = (base..base + 0x4000).step_by(16).find_map(|a| snapshot.library_at(a)).expect("the vDSO's code");
        let vdso = table.by_index(vdso.index).unwrap();
        assert!(!vdso.symbols.is_empty(), "{}: no symbols", vdso.path);
        let named =
            vdso.text.iter().flat_map(|t| (t.start..t.end).step_by(16)).filter(|&a| !vdso.describe(a).starts_with('['));
        assert!(named.map(|a| vdso.describe(a)).any(|name| name.contains("clock_gettime")));
    }
}
