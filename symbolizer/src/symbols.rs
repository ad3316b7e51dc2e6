//! Naming addresses from an ELF symbol table: `.symtab` when the file has
//! one (every function, local ones included), else `.dynsym` (the
//! exported functions only); PLT stubs as `symbol@plt`, as objdump names
//! them. Only function symbols count, and an address is named only by a
//! symbol whose extent holds it: in a `.dynsym`-only library the code of a
//! hidden function that follows an exported one is not that function, and
//! stays unnamed.

use object::{
    Architecture, Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, SectionFlags, SectionIndex, SymbolIndex,
    SymbolKind,
};
use std::fmt;

/// Which table the names come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    Symtab,
    Dynsym,
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Table::Symtab => ".symtab",
            Table::Dynsym => ".dynsym",
        })
    }
}

/// A symbol's name as `symbolize` shows it: demangled (C++, Rust) when it
/// is mangled, as is otherwise.
pub fn demangle(raw: &str) -> String {
    addr2line::demangle_auto(raw.into(), None).into_owned()
}

/// A function symbol as the file lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawSymbol {
    pub address: u64,
    /// 0 when the symbol does not say (hand-written assembly).
    pub size: u64,
    /// Preferred among symbols at one address: 0 global, 1 weak, 2 local.
    pub rank: u8,
    pub name: String,
    /// The end of the section holding it.
    pub section_end: u64,
}

#[derive(Debug)]
struct Entry {
    start: u64,
    end: u64,
    name: String,
}

/// A file's function symbols, sorted by address.
#[derive(Debug)]
pub struct SymbolTable {
    pub table: Table,
    entries: Vec<Entry>,
    /// The longest symbol: how far back a lookup has to look for one that
    /// holds an address.
    longest: u64,
}

fn is_executable(file: &object::File<'_>, index: SectionIndex) -> bool {
    let Ok(section) = file.section_by_index(index) else { return false };
    match section.flags() {
        SectionFlags::Elf { sh_flags } => sh_flags & u64::from(object::elf::SHF_EXECINSTR) != 0,
        _ => section.kind() == object::SectionKind::Text,
    }
}

/// The function symbols of one table: functions, and untyped symbols with
/// a size placed in code (assembly).
fn raw_symbols<'data, 'file>(
    file: &'file object::File<'data>,
    symbols: impl Iterator<Item = object::Symbol<'data, 'file>>,
) -> Vec<RawSymbol> {
    symbols
        .filter_map(|s| {
            let section = s.section_index()?;
            let function = match s.kind() {
                SymbolKind::Text => true,
                SymbolKind::Unknown => s.size() > 0 && is_executable(file, section),
                _ => false,
            };
            let name = s.name().ok().filter(|n| !n.is_empty() && function && s.address() != 0)?;
            let rank = if s.is_weak() {
                1
            } else if s.is_global() {
                0
            } else {
                2
            };
            let section_end = file.section_by_index(section).map_or(u64::MAX, |x| x.address().saturating_add(x.size()));
            Some(RawSymbol { address: s.address(), size: s.size(), rank, name: name.to_owned(), section_end })
        })
        .collect()
}

/// The size of a PLT's header and of each of its entries.
fn plt_layout(architecture: Architecture) -> Option<(u64, u64)> {
    match architecture {
        Architecture::X86_64 => Some((16, 16)),
        Architecture::Aarch64 => Some((32, 16)),
        _ => None,
    }
}

/// The PLT stubs of a 64-bit little-endian ELF file, named `symbol@plt`:
/// entry i of `.plt` (past its header) and of `.plt.sec` (when the file has
/// one) jumps through the slot of the i-th `.rela.plt` relocation.
fn plt_stubs(file: &object::File<'_>) -> Vec<RawSymbol> {
    let Some((header, entry)) = plt_layout(file.architecture()).filter(|_| file.is_64() && file.is_little_endian())
    else {
        return Vec::new();
    };
    let (Some(relocations), Some(dynsym)) =
        (file.section_by_name(".rela.plt").and_then(|s| s.data().ok()), file.dynamic_symbol_table())
    else {
        return Vec::new();
    };
    // Elf64_Rela: r_offset, r_info (symbol index in the high half), r_addend.
    let names: Vec<Option<String>> = relocations
        .chunks_exact(24)
        .map(|rela| {
            let info = u64::from_le_bytes(rela[8..16].try_into().ok()?);
            let symbol = dynsym.symbol_by_index(SymbolIndex((info >> 32) as usize)).ok()?;
            symbol.name().ok().filter(|n| !n.is_empty()).map(|n| format!("{n}@plt"))
        })
        .collect();
    let mut stubs = Vec::new();
    for (section, skip) in [(".plt", header), (".plt.sec", 0)] {
        let Some(plt) = file.section_by_name(section) else { continue };
        let section_end = plt.address().saturating_add(plt.size());
        for (i, name) in names.iter().enumerate() {
            let address = plt.address() + skip + entry * i as u64;
            if address + entry > section_end {
                break;
            }
            if let Some(name) = name {
                stubs.push(RawSymbol { address, size: entry, rank: 0, name: name.clone(), section_end });
            }
        }
    }
    stubs
}

impl SymbolTable {
    /// The function symbols of an ELF file: its `.symtab`, or its `.dynsym`
    /// when it has no `.symtab` (or one without functions), with its PLT
    /// stubs; `None` when they name no function.
    pub fn parse(data: &[u8]) -> Option<SymbolTable> {
        let file = object::File::parse(data).ok()?;
        let (table, mut raw) = [
            (Table::Symtab, raw_symbols(&file, file.symbols())),
            (Table::Dynsym, raw_symbols(&file, file.dynamic_symbols())),
        ]
        .into_iter()
        .find(|(_, raw)| !raw.is_empty())?;
        raw.extend(plt_stubs(&file));
        Some(SymbolTable::new(table, raw)).filter(|t| !t.entries.is_empty())
    }

    /// The table of these symbols. Of several at one address the best
    /// ranked (then the first by name) names it. A symbol without a size
    /// reaches to the next symbol (or its section's end) in a `.symtab`,
    /// which lists every function so that nothing unnamed lies in between;
    /// in a `.dynsym` it is left out.
    pub fn new(table: Table, mut raw: Vec<RawSymbol>) -> SymbolTable {
        raw.sort_by(|a, b| (a.address, a.rank, &a.name).cmp(&(b.address, b.rank, &b.name)));
        raw.dedup_by_key(|s| s.address);
        let mut entries = Vec::with_capacity(raw.len());
        for (i, symbol) in raw.iter().enumerate() {
            let end = match (symbol.size, table) {
                (0, Table::Dynsym) => continue,
                (0, Table::Symtab) => raw.get(i + 1).map_or(u64::MAX, |n| n.address).min(symbol.section_end),
                (size, _) => symbol.address.saturating_add(size),
            };
            if end > symbol.address {
                entries.push(Entry { start: symbol.address, end, name: symbol.name.clone() });
            }
        }
        let longest = entries.iter().map(|e| e.end - e.start).max().unwrap_or(0);
        SymbolTable { table, entries, longest }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The symbol (as in the file, mangled) whose extent holds `address`:
    /// of those that do, the one starting last (a symbol nested in a
    /// function is the more precise name).
    pub fn lookup_raw(&self, address: u64) -> Option<&str> {
        let after = self.entries.partition_point(|e| e.start <= address);
        self.entries[..after]
            .iter()
            .rev()
            .take_while(|e| address - e.start < self.longest)
            .find(|e| address < e.end)
            .map(|e| e.name.as_str())
    }

    /// The demangled name of the function holding `address`.
    pub fn lookup(&self, address: u64) -> Option<String> {
        self.lookup_raw(address).map(demangle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::known_function_address;

    fn symbol(address: u64, size: u64, rank: u8, name: &str) -> RawSymbol {
        RawSymbol { address, size, rank, name: name.to_owned(), section_end: 0x1000 }
    }

    #[test]
    fn an_address_is_named_only_inside_a_symbol() {
        let table = SymbolTable::new(Table::Dynsym, vec![symbol(0x100, 0x20, 0, "exported"), symbol(0x200, 8, 0, "b")]);
        assert_eq!(table.lookup_raw(0x100), Some("exported"));
        assert_eq!(table.lookup_raw(0x11f), Some("exported"));
        // Past its end: a hidden function's code, not `exported`.
        assert_eq!(table.lookup_raw(0x120), None);
        assert_eq!(table.lookup_raw(0x1ff), None);
        assert_eq!(table.lookup_raw(0x207), Some("b"));
        assert_eq!(table.lookup_raw(0x208), None);
        assert_eq!(table.lookup_raw(0xff), None);
    }

    #[test]
    fn a_nested_symbol_names_its_range_and_the_function_the_rest() {
        let table =
            SymbolTable::new(Table::Symtab, vec![symbol(0x100, 0x100, 0, "outer"), symbol(0x140, 0x10, 2, "inner")]);
        assert_eq!(table.lookup_raw(0x13f), Some("outer"));
        assert_eq!(table.lookup_raw(0x140), Some("inner"));
        assert_eq!(table.lookup_raw(0x150), Some("outer"));
        assert_eq!(table.lookup_raw(0x1ff), Some("outer"));
        assert_eq!(table.lookup_raw(0x200), None);
    }

    #[test]
    fn sizeless_symbols_reach_the_next_only_in_a_symtab() {
        let raw = vec![symbol(0x100, 0, 2, "asm_stub"), symbol(0x180, 0x10, 0, "f"), symbol(0x800, 0, 2, "last")];
        let symtab = SymbolTable::new(Table::Symtab, raw.clone());
        assert_eq!(symtab.lookup_raw(0x17f), Some("asm_stub"));
        assert_eq!(symtab.lookup_raw(0x180), Some("f"));
        // The last reaches its section's end.
        assert_eq!(symtab.lookup_raw(0xfff), Some("last"));
        assert_eq!(symtab.lookup_raw(0x1000), None);
        let dynsym = SymbolTable::new(Table::Dynsym, raw);
        assert_eq!(dynsym.lookup_raw(0x100), None);
        assert_eq!(dynsym.len(), 1);
    }

    #[test]
    fn of_aliases_the_global_name_wins() {
        let raw =
            vec![symbol(0x100, 8, 2, "__GI_memcpy"), symbol(0x100, 8, 1, "weak_memcpy"), symbol(0x100, 8, 0, "memcpy")];
        assert_eq!(SymbolTable::new(Table::Symtab, raw).lookup_raw(0x104), Some("memcpy"));
    }

    #[test]
    fn names_are_demangled() {
        let table = SymbolTable::new(Table::Symtab, vec![symbol(0x100, 8, 0, "_ZN10JavaThread3runEv")]);
        assert_eq!(table.lookup(0x100).as_deref(), Some("JavaThread::run()"));
    }

    #[test]
    fn the_test_binary_names_a_function_anywhere_inside_it() {
        let data = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let table = SymbolTable::parse(&data).expect("the test binary has a symbol table");
        assert_eq!(table.table, Table::Symtab);
        let address = known_function_address();
        for inside in [address, address + 1] {
            let name = table.lookup(inside).unwrap_or_default();
            assert!(name.ends_with("testing::known_function"), "{inside:#x}: {name}");
        }
        assert_eq!(table.lookup(0), None);
        assert_eq!(table.lookup(u64::MAX - 1), None);
    }
}
