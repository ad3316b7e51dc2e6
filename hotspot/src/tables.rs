//! HotSpot's self-description: the `gHotSpotVMStructs`, `gHotSpotVMTypes`,
//! `gHotSpotVMIntConstants` and `gHotSpotVMLongConstants` tables libjvm
//! exports for serviceability agents, read once into maps. Each table is an
//! array of entries whose layout is itself described by exported
//! `...Offset` and `...ArrayStride` symbols; a null type name ends it.
//! A few static fields some JDKs leave out of the tables are taken from
//! libjvm's symbol table instead ([`SYMBOL_STATICS`]).

use crate::memory::VmMemory;
use std::collections::HashMap;

/// One `VMStructEntry`: a field offset, or the address of a static field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldEntry {
    pub type_string: String,
    pub is_static: bool,
    /// The offset in its type, or (for a static field) its address.
    pub value: u64,
}

#[derive(Debug, Default)]
pub struct VmTables {
    /// Keyed by `Type::field`.
    pub fields: HashMap<String, FieldEntry>,
    /// Type sizes by name.
    pub types: HashMap<String, u64>,
    /// Int and long constants by name.
    pub constants: HashMap<String, i64>,
}

/// Static fields that JDK 21 to 25.0.2 do not list in VMStructs (25.0.3
/// lists the first), found by their libjvm symbol instead when the symbol
/// table has them: `(type, field, mangled symbol)`. Both are `address`es.
pub const SYMBOL_STATICS: [(&str, &str, &str); 2] = [
    ("ContinuationEntry", "_return_pc", "_ZN17ContinuationEntry10_return_pcE"),
    ("StubRoutines", "_cont_returnBarrier", "_ZN12StubRoutines19_cont_returnBarrierE"),
];

/// Longest name we accept from a table.
const MAX_NAME: usize = 256;
/// More entries than any JDK has: a missing terminator ends the read.
const MAX_ENTRIES: usize = 20_000;

impl VmTables {
    /// Reads the tables through `symbol` (the address of a libjvm symbol:
    /// the tables' own are exported, [`SYMBOL_STATICS`] are local ones) and
    /// `memory`. Not signal-safe.
    pub fn read(symbol: &dyn Fn(&str) -> Option<u64>, memory: &dyn VmMemory) -> Result<Self, String> {
        let reader = TableReader { symbol, memory };
        let mut tables = VmTables::default();
        reader.each("gHotSpotVMStructs", "gHotSpotVMStructEntry", "TypeName", |entry| {
            let type_name = reader.string_at(entry, "gHotSpotVMStructEntryTypeNameOffset")?;
            let field = reader.string_at(entry, "gHotSpotVMStructEntryFieldNameOffset")?;
            let type_string = reader.string_at(entry, "gHotSpotVMStructEntryTypeStringOffset").unwrap_or_default();
            let is_static = reader.u32_at(entry, "gHotSpotVMStructEntryIsStaticOffset")? != 0;
            let value = if is_static {
                reader.u64_at(entry, "gHotSpotVMStructEntryAddressOffset")?
            } else {
                reader.u64_at(entry, "gHotSpotVMStructEntryOffsetOffset")?
            };
            tables.fields.insert(format!("{type_name}::{field}"), FieldEntry { type_string, is_static, value });
            Some(())
        })?;
        reader.each("gHotSpotVMTypes", "gHotSpotVMTypeEntry", "TypeName", |entry| {
            let name = reader.string_at(entry, "gHotSpotVMTypeEntryTypeNameOffset")?;
            let size = reader.u64_at(entry, "gHotSpotVMTypeEntrySizeOffset")?;
            tables.types.insert(name, size);
            Some(())
        })?;
        reader.each("gHotSpotVMIntConstants", "gHotSpotVMIntConstantEntry", "Name", |entry| {
            let name = reader.string_at(entry, "gHotSpotVMIntConstantEntryNameOffset")?;
            let value = reader.u32_at(entry, "gHotSpotVMIntConstantEntryValueOffset")? as i32;
            tables.constants.insert(name, i64::from(value));
            Some(())
        })?;
        reader.each("gHotSpotVMLongConstants", "gHotSpotVMLongConstantEntry", "Name", |entry| {
            let name = reader.string_at(entry, "gHotSpotVMLongConstantEntryNameOffset")?;
            let value = reader.u64_at(entry, "gHotSpotVMLongConstantEntryValueOffset")? as i64;
            tables.constants.insert(name, value);
            Some(())
        })?;
        for (type_name, field, mangled) in SYMBOL_STATICS {
            let key = format!("{type_name}::{field}");
            if tables.fields.contains_key(&key) {
                continue;
            }
            if let Some(address) = symbol(mangled) {
                tables
                    .fields
                    .insert(key, FieldEntry { type_string: "address".into(), is_static: true, value: address });
            }
        }
        Ok(tables)
    }

    pub fn field(&self, type_name: &str, field: &str) -> Option<&FieldEntry> {
        self.fields.get(&format!("{type_name}::{field}"))
    }
}

struct TableReader<'a> {
    symbol: &'a dyn Fn(&str) -> Option<u64>,
    memory: &'a dyn VmMemory,
}

impl TableReader<'_> {
    /// The value of an exported `uint64_t` (an offset or stride).
    fn exported(&self, name: &str) -> Option<u64> {
        self.memory.u64((self.symbol)(name)?)
    }

    fn u64_at(&self, entry: u64, offset_symbol: &str) -> Option<u64> {
        self.memory.u64(entry + self.exported(offset_symbol)?)
    }

    fn u32_at(&self, entry: u64, offset_symbol: &str) -> Option<u32> {
        self.memory.u32(entry + self.exported(offset_symbol)?)
    }

    fn string_at(&self, entry: u64, offset_symbol: &str) -> Option<String> {
        let pointer = self.u64_at(entry, offset_symbol)?;
        if pointer == 0 {
            return None;
        }
        let mut buf = [0u8; MAX_NAME];
        let len = self.memory.c_string(pointer, &mut buf)?;
        Some(String::from_utf8_lossy(&buf[..len]).into_owned())
    }

    /// Calls `f` on each entry of table `table` until the entry whose
    /// `<prefix><terminator>Offset` name pointer is null.
    fn each(
        &self,
        table: &str,
        prefix: &str,
        terminator: &str,
        mut f: impl FnMut(u64) -> Option<()>,
    ) -> Result<(), String> {
        let missing = |what: &str| format!("libjvm does not export {what}");
        let mut entry =
            self.memory.u64((self.symbol)(table).ok_or_else(|| missing(table))?).ok_or_else(|| missing(table))?;
        let stride_name = format!("{prefix}ArrayStride");
        let stride = self.exported(&stride_name).ok_or_else(|| missing(&stride_name))?;
        let end_name = format!("{prefix}{terminator}Offset");
        for _ in 0..MAX_ENTRIES {
            if self.u64_at(entry, &end_name).ok_or_else(|| missing(&end_name))? == 0 {
                return Ok(());
            }
            f(entry).ok_or_else(|| format!("{table}: unreadable entry at {entry:#x}"))?;
            entry += stride;
        }
        Err(format!("{table}: no terminating entry"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeMemory;

    /// Tables of one struct entry (`JavaThread::_anchor`), no types and no
    /// constants, laid out as libjvm lays them out, with the symbols that
    /// describe them; `local` adds the symbol of `ContinuationEntry::_return_pc`.
    fn read(local: bool, listed_return_pc: bool) -> VmTables {
        let mut m = FakeMemory::default();
        let mut symbols: HashMap<String, u64> = HashMap::new();
        let mut next = 0x1000u64;
        let mut export = |m: &mut FakeMemory, name: &str, value: u64| {
            m.put_u64(next, value);
            symbols.insert(name.to_owned(), next);
            next += 8;
        };
        // Struct entries: type name, field name, type string, is static, offset, address.
        for (name, offset) in [("TypeName", 0), ("FieldName", 8), ("TypeString", 16), ("IsStatic", 24)] {
            export(&mut m, &format!("gHotSpotVMStructEntry{name}Offset"), offset);
        }
        export(&mut m, "gHotSpotVMStructEntryOffsetOffset", 32);
        export(&mut m, "gHotSpotVMStructEntryAddressOffset", 40);
        export(&mut m, "gHotSpotVMStructEntryArrayStride", 48);
        let strings = [
            (0x9000, "JavaThread"),
            (0x9100, "_anchor"),
            (0x9200, "JavaFrameAnchor"),
            (0x9300, "ContinuationEntry"),
            (0x9400, "_return_pc"),
            (0x9500, "address"),
        ];
        for (at, text) in strings {
            m.put_bytes(at, text.as_bytes());
            m.put_bytes(at + text.len() as u64, &[0]);
        }
        let structs = 0x2000;
        m.put_u64(structs, 0x9000);
        m.put_u64(structs + 8, 0x9100);
        m.put_u64(structs + 16, 0x9200);
        m.put_u32(structs + 24, 0);
        m.put_u64(structs + 32, 0x398);
        let mut end = structs + 48;
        if listed_return_pc {
            m.put_u64(end, 0x9300);
            m.put_u64(end + 8, 0x9400);
            m.put_u64(end + 16, 0x9500);
            m.put_u32(end + 24, 1);
            m.put_u64(end + 40, 0xAAAA);
            end += 48;
        }
        m.put_u64(end, 0);
        export(&mut m, "gHotSpotVMStructs", structs);
        // Empty type and constant tables: a null name first.
        for (table, prefix, terminator) in [
            ("gHotSpotVMTypes", "gHotSpotVMTypeEntry", "TypeName"),
            ("gHotSpotVMIntConstants", "gHotSpotVMIntConstantEntry", "Name"),
            ("gHotSpotVMLongConstants", "gHotSpotVMLongConstantEntry", "Name"),
        ] {
            m.put_u64(0x3000, 0);
            export(&mut m, table, 0x3000);
            export(&mut m, &format!("{prefix}ArrayStride"), 16);
            export(&mut m, &format!("{prefix}{terminator}Offset"), 0);
        }
        if local {
            symbols.insert("_ZN17ContinuationEntry10_return_pcE".into(), 0xBBBB);
        }
        VmTables::read(&|name| symbols.get(name).copied(), &m).unwrap()
    }

    /// A static field VMStructs leaves out is taken from libjvm's symbol
    /// table; one it lists is kept as listed.
    #[test]
    fn statics_missing_from_the_tables_come_from_the_symbol_table() {
        let tables = read(true, false);
        assert_eq!(tables.field("JavaThread", "_anchor").map(|f| (f.is_static, f.value)), Some((false, 0x398)));
        let from_symbol = tables.field("ContinuationEntry", "_return_pc").unwrap();
        assert_eq!((from_symbol.is_static, from_symbol.value), (true, 0xBBBB));
        assert!(tables.field("StubRoutines", "_cont_returnBarrier").is_none(), "no symbol, no field");

        let listed = read(true, true);
        assert_eq!(listed.field("ContinuationEntry", "_return_pc").map(|f| f.value), Some(0xAAAA));
        assert!(read(false, false).field("ContinuationEntry", "_return_pc").is_none());
    }
}
