//! A library's function symbols (`.symtab` and `.dynsym`), sorted by
//! link-time address for binary search, and the few marked among them
//! apart. Names are kept mangled in one string arena and demangled when
//! written out.

use super::marks::mark_of;
use frames::Mark;
use object::{Architecture, Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, SectionKind, SymbolKind};
use sampler::libraries::Marks;
use std::borrow::Cow;
use std::ops::Range;

#[derive(Clone, Copy, Debug)]
struct Entry {
    start: u64,
    end: u64,
    name_offset: u32,
    name_len: u32,
}

/// Symbols without a size extend to the next symbol, at most this far.
const MAX_UNSIZED_SPAN: u64 = 64 * 1024;

#[derive(Default, Debug)]
pub struct SymbolTable {
    entries: Vec<Entry>,
    names: String,
    /// The marked symbols' ranges, each up to the next symbol's start (where
    /// a lookup in `entries` would find that one), sorted.
    marked: Vec<(Range<u64>, Mark)>,
}

/// A symbol found for an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SymbolHit<'a> {
    pub mangled: &'a str,
    /// Link-time start address.
    pub start: u64,
}

impl SymbolTable {
    /// Function symbols of an ELF image (any parse problem gives an empty table).
    pub fn from_elf(data: &[u8]) -> SymbolTable {
        Self::from_elfs([data])
    }

    /// Function symbols of the ELF images of one library: its file and its
    /// separate debug file, whose `.symtab` holds the local functions the
    /// file was stripped of, at the same link-time addresses (an image
    /// that does not parse adds nothing).
    pub fn from_elfs<'a>(images: impl IntoIterator<Item = &'a [u8]>) -> SymbolTable {
        let files: Vec<object::File<'a>> =
            images.into_iter().filter_map(|data| object::File::parse(data).ok()).collect();
        let mut raw: Vec<(u64, u64, Cow<'a, str>)> = files
            .iter()
            .flat_map(|file| file.symbols().chain(file.dynamic_symbols()))
            .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
            .filter_map(|s| Some((s.address(), s.size(), Cow::Borrowed(s.name().ok().filter(|n| !n.is_empty())?))))
            .collect();
        raw.extend(files.iter().flat_map(plt_entries).map(|(start, size, name)| (start, size, Cow::Owned(name))));
        Self::from_symbols(raw)
    }

    /// The table of `(link-time address, size, mangled name)` symbols.
    fn from_symbols(mut raw: Vec<(u64, u64, Cow<'_, str>)>) -> SymbolTable {
        raw.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        raw.dedup_by_key(|s| s.0);
        let mut table = SymbolTable { entries: Vec::with_capacity(raw.len()), ..SymbolTable::default() };
        for (i, (start, size, name)) in raw.iter().enumerate() {
            let (start, size, name) = (*start, *size, name.as_ref());
            let next = raw.get(i + 1).map_or(u64::MAX, |n| n.0);
            // Saturating: a damaged file may place a symbol at the top of the address space.
            let end =
                if size > 0 { start.saturating_add(size) } else { next.min(start.saturating_add(MAX_UNSIZED_SPAN)) };
            let name_offset = table.names.len() as u32;
            table.names.push_str(name);
            table.entries.push(Entry { start, end, name_offset, name_len: name.len() as u32 });
            match mark_of(name) {
                Mark::None => {}
                mark => table.marked.push((start..end.min(next), mark)),
            }
        }
        table.entries.shrink_to_fit();
        table.names.shrink_to_fit();
        table
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn entry(&self, address: u64) -> Option<&Entry> {
        let index = self.entries.partition_point(|e| e.start <= address).checked_sub(1)?;
        self.entries.get(index).filter(|e| address < e.end)
    }

    /// The symbol containing link-time `address`.
    pub fn find(&self, address: u64) -> Option<SymbolHit<'_>> {
        let e = self.entry(address)?;
        let name = self.names.get(e.name_offset as usize..(e.name_offset + e.name_len) as usize)?;
        Some(SymbolHit { mangled: name, start: e.start })
    }

    /// The marked symbols, for handlers (taken: the table keeps none).
    pub fn take_marks(&mut self) -> Marks {
        Marks::new(std::mem::take(&mut self.marked))
    }
}

/// `name@plt` for each entry of an x86-64 procedure linkage table, as
/// async-profiler names them: a call through the PLT is sampled there, and
/// the symbol before it (`_init`) is not what runs. `.rela.plt` holds one
/// relocation per entry, in order (a JUMP_SLOT names its function; an
/// IFUNC's IRELATIVE has no name); the entries callers reach are
/// `.plt.sec`'s (with IBT) or `.plt`'s after its 16-byte header. Nothing
/// if the counts differ.
fn plt_entries(file: &object::File<'_>) -> Vec<(u64, u64, String)> {
    const R_X86_64_JUMP_SLOT: u64 = 7;
    const RELA: usize = 24;
    const ENTRY: u64 = 16;
    if file.architecture() != Architecture::X86_64 || !file.is_little_endian() {
        return Vec::new();
    }
    let (Some(rela), Some(symbols)) = (file.section_by_name(".rela.plt"), file.dynamic_symbol_table()) else {
        return Vec::new();
    };
    let (table, header) = match file.section_by_name(".plt.sec") {
        Some(section) => (section, 0),
        None => match file.section_by_name(".plt") {
            Some(section) => (section, 1),
            None => return Vec::new(),
        },
    };
    let Ok(data) = rela.data() else { return Vec::new() };
    let word = |entry: &[u8], at: usize| entry.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
    let slots: Vec<Option<String>> = data
        .chunks_exact(RELA)
        .map(|entry| {
            let info = word(entry, 8)?;
            let symbol = symbols.symbol_by_index(object::SymbolIndex((info >> 32) as usize)).ok()?;
            (info & 0xffff_ffff == R_X86_64_JUMP_SLOT).then(|| symbol.name().ok().map(str::to_owned)).flatten()
        })
        .collect();
    if table.kind() != SectionKind::Text || slots.is_empty() || table.size() / ENTRY != slots.len() as u64 + header {
        return Vec::new();
    }
    let first = table.address() + header * ENTRY;
    let named = slots.into_iter().enumerate().filter_map(|(i, name)| Some((i, name.filter(|n| !n.is_empty())?)));
    named.map(|(i, name)| (first + i as u64 * ENTRY, ENTRY, format!("{name}@plt"))).collect()
}

/// The link-time address of the symbol `name` of the ELF file `data`, of
/// any kind, local ones included (`.symtab`, then `.dynsym`): for a symbol
/// the dynamic loader does not export.
pub fn link_address_of(data: &[u8], name: &str) -> Option<u64> {
    let file = object::File::parse(data).ok()?;
    let symbol = file.symbols().chain(file.dynamic_symbols()).find(|s| s.name() == Ok(name) && s.address() != 0)?;
    Some(symbol.address())
}

/// A readable name: Rust and C++ symbols demangled (C++ without parameter
/// lists, as profilers show them), anything else as is.
pub fn demangle(mangled: &str) -> String {
    if let Ok(rust) = rustc_demangle::try_demangle(mangled) {
        return format!("{rust:#}");
    }
    if mangled.starts_with("_Z") {
        if let Ok(symbol) = cpp_demangle::Symbol::new(mangled) {
            let options = cpp_demangle::DemangleOptions::new().no_params().no_return_type();
            if let Ok(text) = symbol.demangle_with_options(&options) {
                return text;
            }
        }
    }
    mangled.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_cpp_and_rust() {
        assert_eq!(
            demangle("_ZN9JavaCalls11call_helperEP9JavaValueRK12methodHandleP17JavaCallArgumentsP10JavaThread"),
            "JavaCalls::call_helper"
        );
        assert_eq!(demangle("_ZN3std2rt10lang_start17h0123456789abcdefE"), "std::rt::lang_start");
        assert_eq!(demangle("memcpy"), "memcpy");
        assert_eq!(demangle("_Zgarbage"), "_Zgarbage");
    }

    #[test]
    fn finds_symbols_of_this_test_binary() {
        let data = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let table = SymbolTable::from_elf(&data);
        assert!(table.len() > 100);
        let probe = table.entries[table.len() / 2];
        let hit = table.find(probe.start).unwrap();
        assert_eq!(hit.start, probe.start);
        assert!(table.find(probe.end.max(probe.start + 1) - 1).is_some());
        assert!(table.find(0).is_none());
        assert!(SymbolTable::from_elf(b"not elf").is_empty());
    }

    /// Marks are found apart from the other symbols, with the same answer
    /// a lookup of the symbol containing the address gives: a symbol nested
    /// in a marked one is not marked, nor is what follows it.
    #[test]
    fn marks_cover_the_marked_symbols_up_to_the_next_symbol() {
        let call_helper = "_ZN9JavaCalls11call_helperEP9JavaValueRK12methodHandleP17JavaCallArgumentsP10JavaThread";
        let mut table = SymbolTable::from_symbols(
            [
                (0x2000, 0x10, "_ZN18InterpreterRuntime3newEP10JavaThreadP12ConstantPooli"),
                (0x1000, 0x100, call_helper),
                (0x1080, 0x10, "nested"),
                (0x3000, 0, "unsized"),
            ]
            .map(|(start, size, name)| (start, size, Cow::Borrowed(name)))
            .to_vec(),
        );
        let marked = table.take_marks();
        let marks = [0xfff, 0x1000, 0x107f, 0x1080, 0x1090, 0x2000, 0x200f, 0x2010, 0x3000].map(|a| marked.mark_at(a));
        use Mark::{Interpreter as I, None as N, VmRuntime as V};
        assert_eq!(marks, [N, V, V, N, N, I, I, N, N]);
        assert_eq!(table.find(0x1085).map(|h| h.mangled), Some("nested"));
    }

    /// Calls through the PLT are named after the function called: libc's
    /// JUMP_SLOT entries (its IFUNCs' entries have no name), and this test
    /// binary's, which has no `.plt.sec`.
    #[test]
    fn plt_entries_are_named_after_the_function_called() {
        for path in ["/lib/x86_64-linux-gnu/libc.so.6".into(), std::env::current_exe().unwrap()] {
            let Ok(data) = std::fs::read(&path) else {
                test_skip::skip(&format!("{} is not here", path.display()), test_skip::InCi::Optional);
                continue;
            };
            let file = object::File::parse(&*data).unwrap();
            let entries = plt_entries(&file);
            assert!(!entries.is_empty(), "{}: no PLT entry named", path.display());
            let table = SymbolTable::from_elf(&data);
            for (start, size, name) in &entries {
                assert!(name.ends_with("@plt") && !name.starts_with('@'), "{name}");
                assert_eq!(table.find(start + size - 1).map(|h| h.mangled), Some(name.as_str()));
            }
            let plt = file.section_by_name(".plt.sec").or_else(|| file.section_by_name(".plt")).unwrap();
            assert!(entries.iter().all(|(start, _, _)| plt.address() <= *start && *start < plt.address() + plt.size()));
        }
    }

    /// A local data symbol is found at its link-time address.
    #[test]
    fn finds_local_data_symbols() {
        // Mutable through an atomic, so not merged with other constants;
        // `#[used]` keeps it in an optimized build.
        #[used]
        static PROBE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(7);
        let data = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let probe = file
            .symbols()
            .find(|s| s.kind() == SymbolKind::Data && s.name().is_ok_and(|n| n.contains("PROBE")))
            .expect("the probe's symbol");
        std::hint::black_box(&PROBE);
        let name = probe.name().unwrap();
        assert_eq!(link_address_of(&data, name), Some(probe.address()));
        assert_eq!(link_address_of(&data, "no_such_symbol_anywhere"), None);
        assert_eq!(link_address_of(b"not elf", name), None);
    }
}
