//! DWARF unwind rules compiled ahead of time. A module's `.eh_frame` is
//! evaluated once, off the signal path, into an address-sorted table of the
//! rules simple enough to apply directly: the CFA is the stack or frame
//! pointer plus an offset, the return address sits at the architecture's
//! fixed place below it, the frame pointer is kept or saved at an offset
//! from the CFA. A step through the table is one binary search and one or
//! two reads, where a miss in framehop's rule cache parses an FDE and its
//! CIE and runs their CFA programs. Everything else (expressions, other
//! registers, addresses no FDE covers, overlapping FDEs) is left to
//! framehop.

use crate::arch::{CfiRegisters, CFI_REGISTERS};
use crate::dwarf::DwarfModule;
use crate::{Registers, StackReader};
use gimli::{BaseAddresses, CfaRule, CieOrFde, EhFrame, NativeEndian, RegisterRule, UnwindContext, UnwindSection};
use std::collections::HashMap;

/// Where a frame's CFA is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cfa {
    /// The stack pointer plus this offset.
    Sp(i32),
    /// The frame pointer plus this offset.
    Fp(i32),
}

/// How to find the caller's registers from a frame's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rule {
    pub cfa: Cfa,
    /// Where the caller's frame pointer was saved, from the CFA (`None`:
    /// the frame did not change it).
    pub saved_fp: Option<i32>,
}

impl Rule {
    /// The caller's registers, its return address read at `ra_offset`
    /// from the CFA; `None` if a read was refused. Signal-safe.
    pub fn caller(self, regs: &Registers, ra_offset: i64, stack: &mut dyn StackReader) -> Option<Registers> {
        let cfa = match self.cfa {
            Cfa::Sp(offset) => regs.sp.wrapping_add_signed(i64::from(offset)),
            Cfa::Fp(offset) => regs.fp.wrapping_add_signed(i64::from(offset)),
        };
        let pc = stack.read_u64(cfa.wrapping_add_signed(ra_offset))?;
        let fp = match self.saved_fp {
            None => regs.fp,
            Some(offset) => stack.read_u64(cfa.wrapping_add_signed(i64::from(offset)))?,
        };
        Some(Registers { pc, sp: cfa, fp, lr: regs.lr })
    }
}

/// Row rule index meaning "not compiled: ask framehop".
const NOT_COMPILED: u16 = 0;

/// A module's compiled rules: 6 bytes a row (rows with the rule of the
/// row before are merged).
pub struct CompiledRules {
    /// Where the return address is saved, from the CFA.
    pub ra_offset: i64,
    /// Link-time address the row starts count from.
    base: u64,
    /// Where each row starts, from `base`, ascending.
    starts: Box<[u32]>,
    /// Each row's rule: 1 + its index in `rules`, or [`NOT_COMPILED`].
    row_rules: Box<[u16]>,
    rules: Box<[Rule]>,
}

impl std::fmt::Debug for CompiledRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CompiledRules({} rows, {} rules)", self.starts.len(), self.rules.len())
    }
}

/// One FDE row: link-time address range and its rule, if simple.
type RawRow = (u64, u64, Option<Rule>);

impl CompiledRules {
    /// The rules of `module`'s `.eh_frame`, or `None` where this
    /// architecture's rules are not compiled, the module has no
    /// `.eh_frame` or no row is simple. Allocates; bounded by the
    /// section's size (FDEs that do not parse are left to framehop).
    pub fn compile(module: &DwarfModule) -> Option<CompiledRules> {
        let registers = CFI_REGISTERS?;
        let (svma, data) = module.eh_frame.as_ref()?;
        let eh_frame = EhFrame::new(&data[..], NativeEndian);
        let mut bases = BaseAddresses::default().set_eh_frame(svma.start);
        if let Some(text) = &module.text_svma {
            bases = bases.set_text(text.start);
        }
        let mut context = Box::new(UnwindContext::new());
        let mut rows: Vec<RawRow> = Vec::new();
        let mut entries = eh_frame.entries(&bases);
        while let Ok(Some(entry)) = entries.next() {
            let CieOrFde::Fde(partial) = entry else { continue };
            let Ok(fde) = partial.parse(|section, bases, offset| section.cie_from_offset(bases, offset)) else {
                continue;
            };
            let Ok(mut table) = fde.rows(&eh_frame, &bases, &mut context) else { continue };
            while let Ok(Some(row)) = table.next_row() {
                let rule = simple_rule(&registers, row);
                rows.push((row.start_address(), row.end_address(), rule));
            }
        }
        Self::from_rows(rows, registers.ra_offset)
    }

    /// The table of `rows` (in any order): gaps between FDEs, and a later
    /// row overlapping an earlier one, are not compiled.
    fn from_rows(mut rows: Vec<RawRow>, ra_offset: i64) -> Option<CompiledRules> {
        rows.retain(|&(start, end, _)| start < end);
        rows.sort_unstable_by_key(|&(start, end, _)| (start, end));
        let base = rows.first()?.0;
        let mut starts = Vec::new();
        let mut row_rules = Vec::new();
        let mut rules = Vec::new();
        let mut index_of = HashMap::new();
        let mut covered_to = base;
        let mut push = |start: u64, rule: u16| {
            if row_rules.last() == Some(&rule) {
                return Some(());
            }
            starts.push(u32::try_from(start - base).ok()?);
            row_rules.push(rule);
            Some(())
        };
        for (start, end, rule) in rows {
            if start < covered_to {
                // Overlaps the row before: which FDE a lookup finds is
                // framehop's call.
                push(start, NOT_COMPILED)?;
                covered_to = covered_to.max(end);
                continue;
            }
            if start > covered_to {
                push(covered_to, NOT_COMPILED)?;
            }
            let index = match rule {
                Some(rule) => *index_of.entry(rule).or_insert_with(|| {
                    rules.push(rule);
                    u16::try_from(rules.len()).unwrap_or(NOT_COMPILED)
                }),
                None => NOT_COMPILED,
            };
            push(start, index)?;
            covered_to = end;
        }
        push(covered_to, NOT_COMPILED)?;
        if rules.is_empty() {
            return None;
        }
        // Rules past u16's range were numbered NOT_COMPILED; the table
        // keeps only those it can number.
        rules.truncate(usize::from(u16::MAX));
        Some(CompiledRules {
            ra_offset,
            base,
            starts: starts.into_boxed_slice(),
            row_rules: row_rules.into_boxed_slice(),
            rules: rules.into_boxed_slice(),
        })
    }

    /// The rule at link-time address `svma`, if compiled. Signal-safe.
    pub fn lookup(&self, svma: u64) -> Option<Rule> {
        let offset = u32::try_from(svma.checked_sub(self.base)?).ok()?;
        let row = self.starts.partition_point(|&start| start <= offset).checked_sub(1)?;
        let index = usize::from(*self.row_rules.get(row)?).checked_sub(1)?;
        self.rules.get(index).copied()
    }

    /// Rows and distinct rules.
    pub fn size(&self) -> (usize, usize) {
        (self.starts.len(), self.rules.len())
    }
}

/// A row's rule if the table can apply it: CFA from the stack or frame
/// pointer, the return address at its fixed place, the frame pointer kept
/// or saved at an offset from the CFA.
fn simple_rule(registers: &CfiRegisters, row: &gimli::UnwindTableRow<usize>) -> Option<Rule> {
    let cfa = match *row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } => {
            let offset = i32::try_from(offset).ok()?;
            if register == registers.sp {
                Cfa::Sp(offset)
            } else if register == registers.fp {
                Cfa::Fp(offset)
            } else {
                return None;
            }
        }
        CfaRule::Expression(_) => return None,
    };
    match row.register(registers.ra) {
        Some(RegisterRule::Offset(offset)) if offset == registers.ra_offset => {}
        _ => return None,
    }
    let saved_fp = match row.register(registers.fp) {
        None | Some(RegisterRule::SameValue) => None,
        Some(RegisterRule::Offset(offset)) => Some(i32::try_from(offset).ok()?),
        Some(_) => return None,
    };
    Some(Rule { cfa, saved_fp })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dwarf::{new_cache, DwarfUnwinder, SectionData};
    use crate::{PcKind, Unwinder};
    use object::{Object, ObjectSection};
    use std::sync::Arc;

    const SP8: Option<Rule> = Some(Rule { cfa: Cfa::Sp(8), saved_fp: None });
    const FP16: Option<Rule> = Some(Rule { cfa: Cfa::Fp(16), saved_fp: Some(-16) });

    #[test]
    fn rows_become_a_table_with_gaps_and_overlaps_left_to_framehop() {
        let rows = vec![
            (0x1010, 0x1020, FP16),
            (0x1000, 0x1004, SP8),
            (0x1004, 0x1010, SP8), // same rule: merged
            (0x1030, 0x1040, None),
            (0x1040, 0x1050, SP8),
            (0x1048, 0x1060, FP16), // overlaps the row before
        ];
        let table = CompiledRules::from_rows(rows, -8).unwrap();
        assert_eq!(table.size(), (5, 2));
        let at = |address| table.lookup(address);
        assert_eq!(at(0xfff), None, "before the first row");
        assert_eq!(at(0x1000), SP8);
        assert_eq!(at(0x100f), SP8);
        assert_eq!(at(0x1010), FP16);
        assert_eq!(at(0x101f), FP16);
        assert_eq!(at(0x1020), None, "between FDEs");
        assert_eq!(at(0x1035), None, "a row that is not simple");
        assert_eq!(at(0x1040), SP8);
        assert_eq!(at(0x1048), None, "overlapping FDEs");
        assert_eq!(at(0x1060), None, "after the last row");
        assert_eq!(at(u64::MAX), None);
    }

    #[test]
    fn nothing_simple_is_no_table() {
        assert!(CompiledRules::from_rows(vec![(0x1000, 0x1010, None)], -8).is_none());
        assert!(CompiledRules::from_rows(Vec::new(), -8).is_none());
    }

    /// The module of the ELF file `bytes` at its link-time addresses.
    fn module_of(name: &str, bytes: &[u8]) -> DwarfModule {
        let file = object::File::parse(bytes).unwrap();
        let section = |name: &str| {
            let s = file.section_by_name(name)?;
            Some((s.address()..s.address() + s.size(), SectionData::from(s.data().ok()?)))
        };
        let text = section(".text").unwrap().0;
        DwarfModule {
            name: name.to_owned(),
            avma: text.clone(),
            text_svma: Some(text),
            eh_frame: section(".eh_frame"),
            eh_frame_hdr: section(".eh_frame_hdr"),
            ..DwarfModule::default()
        }
    }

    /// Memory that answers every read with a value made from its address.
    struct Patterned;

    impl StackReader for Patterned {
        fn read_u64(&mut self, address: u64) -> Option<u64> {
            Some(0x5000_0000 + (address & 0xfff8) * 3)
        }
    }

    /// The ELF files to check: this test, the C library it runs on, and
    /// the JDK's libjvm when `JAVA_HOME` names one.
    fn libraries() -> Vec<String> {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let libc = maps.lines().filter_map(|l| l.split_whitespace().nth(5)).find(|p| p.contains("/libc.so"));
        let mut paths = vec![std::env::current_exe().unwrap().display().to_string()];
        paths.extend(libc.map(str::to_owned));
        match std::env::var("JAVA_HOME") {
            Ok(home) => paths.push(format!("{home}/lib/server/libjvm.so")),
            Err(_) => eprintln!("JAVA_HOME is not set: libjvm's rules are not checked"),
        }
        paths
    }

    /// From the first and last address of every compiled row, interrupted
    /// there or returning there, the compiled rules give the caller
    /// framehop gives.
    #[test]
    fn compiled_rules_step_as_framehop_does() {
        for path in libraries() {
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            let module = module_of(&path, &bytes);
            let rules = Arc::new(CompiledRules::compile(&module).unwrap());
            let mut compiled = DwarfUnwinder::new();
            compiled.add_module(&DwarfModule { rules: Some(Arc::clone(&rules)), ..module.clone() });
            let mut framehop = DwarfUnwinder::new();
            framehop.add_module(&module);
            let (mut cache, mut framehop_cache) = (new_cache(), new_cache());
            let (mut checked, mut differ) = (0, Vec::new());
            for (row, &start) in rules.starts.iter().enumerate() {
                if rules.row_rules[row] == NOT_COMPILED {
                    continue;
                }
                let end = rules.starts.get(row + 1).map_or(start + 1, |&next| next);
                let first = rules.base + u64::from(start);
                let last = rules.base + u64::from(end) - 1;
                for (kind, pc) in
                    [(PcKind::Interrupted, first), (PcKind::Interrupted, last), (PcKind::ReturnAddress, first + 1)]
                {
                    let start_regs = Registers { pc, sp: 0x10_0000, fp: 0x20_0000, lr: 0 };
                    let (mut ours, mut theirs) = (start_regs, start_regs);
                    let a = compiled.step(kind, &mut ours, &mut cache, &mut Patterned);
                    let b = framehop.step(kind, &mut theirs, &mut framehop_cache, &mut Patterned);
                    checked += 1;
                    if (a, ours) != (b, theirs) {
                        differ.push(format!("{kind:?} {pc:#x}: {a:?} {ours:x?} / framehop {b:?} {theirs:x?}"));
                    }
                }
            }
            eprintln!("{path}: {:?} rows and rules, {checked} steps, {} differ", rules.size(), differ.len());
            assert!(
                differ.is_empty(),
                "{path}: {} of {checked} steps differ: {:#?}",
                differ.len(),
                &differ[..differ.len().min(10)]
            );
            assert!(checked > 100, "{path}: only {checked} steps checked");
        }
    }
}
