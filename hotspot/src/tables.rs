//! HotSpot's self-description: the `gHotSpotVMStructs`, `gHotSpotVMTypes`,
//! `gHotSpotVMIntConstants` and `gHotSpotVMLongConstants` tables libjvm
//! exports for serviceability agents, read once into maps. Each table is an
//! array of entries whose layout is itself described by exported
//! `...Offset` and `...ArrayStride` symbols; a null type name ends it.

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

/// Longest name we accept from a table.
const MAX_NAME: usize = 256;
/// More entries than any JDK has: a missing terminator ends the read.
const MAX_ENTRIES: usize = 20_000;

impl VmTables {
    /// Reads the tables through `symbol` (the address of an exported libjvm
    /// symbol) and `memory`. Not signal-safe.
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
