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
use crate::dwarf::{sound_eh_frame_hdr, DwarfModule};
use crate::{Registers, StackReader};
use gimli::{
    BaseAddresses, CfaRule, CieOrFde, EhFrame, EhFrameHdr, NativeEndian, RegisterRule, UnwindContext, UnwindSection,
};
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
    /// from the CFA; `None` if a read was refused. In the `interrupted`
    /// frame, a frame pointer saved below the stack pointer was popped
    /// already (an epilogue's last instructions, whose CFI still names the
    /// slot): it is the one in the register, as framehop takes it.
    /// Signal-safe.
    pub fn caller(
        self,
        regs: &Registers,
        interrupted: bool,
        ra_offset: i64,
        stack: &mut dyn StackReader,
    ) -> Option<Registers> {
        let cfa = match self.cfa {
            Cfa::Sp(offset) => regs.sp.wrapping_add_signed(i64::from(offset)),
            Cfa::Fp(offset) => regs.fp.wrapping_add_signed(i64::from(offset)),
        };
        let pc = stack.read_u64(cfa.wrapping_add_signed(ra_offset))?;
        let fp = match self.saved_fp.map(|offset| cfa.wrapping_add_signed(i64::from(offset))) {
            Some(slot) if interrupted && slot < regs.sp => regs.fp,
            Some(slot) => stack.read_u64(slot)?,
            None => regs.fp,
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

/// FDE rows, as offsets from the table's base, and the number of their
/// rule (1 + its index, or [`NOT_COMPILED`]).
#[derive(Clone, Copy, Debug)]
struct Row {
    start: u32,
    end: u32,
    rule: u16,
}

/// Rules numbered as they are met; past `u16`'s range, not compiled.
#[derive(Default)]
struct Numbering {
    rules: Vec<Rule>,
    numbers: HashMap<Rule, u16>,
}

impl Numbering {
    fn number(&mut self, rule: Option<Rule>) -> u16 {
        let Some(rule) = rule else { return NOT_COMPILED };
        if let Some(&number) = self.numbers.get(&rule) {
            return number;
        }
        let Ok(number) = u16::try_from(self.rules.len() + 1) else { return NOT_COMPILED };
        self.rules.push(rule);
        self.numbers.insert(rule, number);
        number
    }
}

/// The table in the making, from rows in ascending order of start.
#[derive(Default)]
struct TableBuilder {
    starts: Vec<u32>,
    row_rules: Vec<u16>,
    /// The end of the rows so far (`None` before the first).
    covered_to: Option<u32>,
    last_start: u32,
    /// False once a row came before the one pushed before it.
    in_order: bool,
}

impl TableBuilder {
    fn new() -> Self {
        Self { in_order: true, ..Self::default() }
    }

    fn mark(&mut self, start: u32, rule: u16) {
        if self.row_rules.last() != Some(&rule) {
            self.starts.push(start);
            self.row_rules.push(rule);
        }
    }

    /// Adds `row`: gaps before it, and its part that overlaps an earlier
    /// row (which FDE a lookup finds is framehop's call), are not compiled.
    /// False (and nothing more is added) once a row comes before the one
    /// pushed before it.
    fn push(&mut self, row: Row) -> bool {
        if !self.in_order || row.start < self.last_start {
            self.in_order = false;
            return false;
        }
        if row.start >= row.end {
            return true;
        }
        self.last_start = row.start;
        match self.covered_to {
            Some(covered_to) if row.start < covered_to => {
                self.mark(row.start, NOT_COMPILED);
                self.covered_to = Some(covered_to.max(row.end));
                return true;
            }
            Some(covered_to) if row.start > covered_to => self.mark(covered_to, NOT_COMPILED),
            _ => {}
        }
        self.mark(row.start, row.rule);
        self.covered_to = Some(row.end);
        true
    }

    fn finish(mut self, base: u64, rules: Vec<Rule>, ra_offset: i64) -> Option<CompiledRules> {
        let covered_to = self.covered_to?;
        self.mark(covered_to, NOT_COMPILED);
        if self.row_rules.iter().all(|&rule| rule == NOT_COMPILED) {
            return None;
        }
        Some(CompiledRules {
            ra_offset,
            base,
            starts: self.starts.into_boxed_slice(),
            row_rules: self.row_rules.into_boxed_slice(),
            rules: rules.into_boxed_slice(),
        })
    }
}

impl CompiledRules {
    /// The rules of `module`'s `.eh_frame` for its executable code, or
    /// `None` where this architecture's rules are not compiled, the module
    /// has no `.eh_frame`, an `.eh_frame_hdr` that lies about its table
    /// (framehop is given neither: see `DwarfUnwinder::add_module`) or no
    /// simple row. Allocates; each FDE is evaluated at most twice, so the
    /// work is bounded by the section's size (FDEs that do not parse are
    /// left to framehop); about 25 ms for libjvm. FDEs are read in address
    /// order through `.eh_frame_hdr`'s table, rows straight into the table;
    /// without a header, or where its entries are not in strictly rising
    /// order of the FDEs they name, from `.eh_frame` and sorted (12 bytes a
    /// row while compiling).
    pub fn compile(module: &DwarfModule) -> Option<CompiledRules> {
        let registers = CFI_REGISTERS?;
        let base = module.avma.start.wrapping_sub(module.bias);
        let mut numbering = Numbering::default();
        let mut table = TableBuilder::new();
        let header = match &module.eh_frame_hdr {
            Some(hdr) if !sound_eh_frame_hdr(hdr, module.eh_frame.as_ref()?) => return None,
            header => header.as_ref(),
        };
        let in_order = header.is_some()
            && each_row(module, FdeOrder::Address, base, &registers, &mut numbering, |row| table.push(row))
                == Some(true);
        if !in_order {
            let mut rows = Vec::new();
            each_row(module, FdeOrder::Section, base, &registers, &mut numbering, |row| {
                rows.push(row);
                true
            })?;
            rows.sort_unstable_by_key(|row| (row.start, row.end));
            table = TableBuilder::new();
            rows.into_iter().for_each(|row| {
                table.push(row);
            });
        }
        table.finish(base, numbering.rules, registers.ra_offset)
    }

    /// The rule at link-time address `svma`, if compiled. Signal-safe.
    pub fn lookup(&self, svma: u64) -> Option<Rule> {
        let offset = u32::try_from(svma.checked_sub(self.base)?).ok()?;
        let row = self.starts.partition_point(|&start| start <= offset).checked_sub(1)?;
        let index = usize::from(*self.row_rules.get(row)?).checked_sub(1)?;
        self.rules.get(index).copied()
    }

    /// Rows and distinct rules.
    #[cfg(test)]
    fn size(&self) -> (usize, usize) {
        (self.starts.len(), self.rules.len())
    }
}

/// The order [`each_row`] reads FDEs in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FdeOrder {
    /// By address, through `.eh_frame_hdr`'s sorted table (none without it).
    Address,
    /// As `.eh_frame` lists them.
    Section,
}

/// Hands every row of `module`'s `.eh_frame` within 4 GiB above `base`
/// to `each`, its rule numbered, its FDEs read in `order`, until `each`
/// returns false. `Some(true)` if every FDE was read, `Some(false)` if
/// `each` or the header's order stopped it, `None` without the sections
/// the order needs. The header's entries must rise strictly and each must
/// name an FDE that starts where the entry says: a header that names one
/// FDE many times stops at the second.
fn each_row(
    module: &DwarfModule,
    order: FdeOrder,
    base: u64,
    registers: &CfiRegisters,
    numbering: &mut Numbering,
    mut each: impl FnMut(Row) -> bool,
) -> Option<bool> {
    let (svma, data) = module.eh_frame.as_ref()?;
    let eh_frame = EhFrame::new(&data[..], NativeEndian);
    let mut bases = BaseAddresses::default().set_eh_frame(svma.start);
    if let Some(text) = &module.text_svma {
        bases = bases.set_text(text.start);
    }
    let offset = |address: u64| u32::try_from(address.checked_sub(base)?).ok();
    let mut context = Box::new(UnwindContext::new());
    let mut rows_of = |fde: gimli::FrameDescriptionEntry<_>| -> bool {
        let Ok(mut rows) = fde.rows(&eh_frame, &bases, &mut context) else { return true };
        while let Ok(Some(row)) = rows.next_row() {
            if let (Some(start), Some(end)) = (offset(row.start_address()), offset(row.end_address())) {
                if !each(Row { start, end, rule: numbering.number(simple_rule(registers, row)) }) {
                    return false;
                }
            }
        }
        true
    };
    match order {
        FdeOrder::Address => {
            let (hdr_svma, hdr) = module.eh_frame_hdr.as_ref()?;
            let bases = bases.clone().set_eh_frame_hdr(hdr_svma.start);
            let parsed =
                EhFrameHdr::new(&hdr[..], NativeEndian).parse(&bases, std::mem::size_of::<usize>() as u8).ok()?;
            let table = parsed.table()?;
            let mut entries = table.iter(&bases);
            let mut last = None;
            while let Ok(Some((location, fde))) = entries.next() {
                let Ok(location) = location.direct() else { return Some(false) };
                if last.is_some_and(|last| location <= last) {
                    return Some(false);
                }
                last = Some(location);
                // `sound_eh_frame_hdr` checked the pointer: the subtraction
                // in `pointer_to_offset` does not overflow.
                let Ok(at) = table.pointer_to_offset(fde) else { continue };
                let Ok(fde) = eh_frame.fde_from_offset(&bases, at, EhFrame::cie_from_offset) else { continue };
                if fde.initial_address() != location {
                    return Some(false);
                }
                if !rows_of(fde) {
                    return Some(false);
                }
            }
        }
        FdeOrder::Section => {
            let mut entries = eh_frame.entries(&bases);
            while let Ok(Some(entry)) = entries.next() {
                let CieOrFde::Fde(partial) = entry else { continue };
                if let Ok(fde) = partial.parse(EhFrame::cie_from_offset) {
                    if !rows_of(fde) {
                        return Some(false);
                    }
                }
            }
        }
    }
    Some(true)
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

    const SP8: Rule = Rule { cfa: Cfa::Sp(8), saved_fp: None };
    const FP16: Rule = Rule { cfa: Cfa::Fp(16), saved_fp: Some(-16) };

    /// `rows` (start, end, rule: 1 is `SP8`, 2 `FP16`) from 0x1000.
    fn table(rows: &[(u32, u32, u16)]) -> Option<CompiledRules> {
        let mut table = TableBuilder::new();
        for &(start, end, rule) in rows {
            assert!(table.push(Row { start, end, rule }));
        }
        table.finish(0x1000, vec![SP8, FP16], -8)
    }

    #[test]
    fn rows_become_a_table_with_gaps_and_overlaps_left_to_framehop() {
        let table = table(&[
            (0x0, 0x4, 1),
            (0x4, 0x10, 1), // same rule: merged
            (0x10, 0x20, 2),
            (0x30, 0x40, NOT_COMPILED),
            (0x40, 0x50, 1),
            (0x48, 0x60, 2), // overlaps the row before
            (0x70, 0x70, 2), // empty
        ])
        .unwrap();
        assert_eq!(table.size(), (5, 2));
        let at = |address| table.lookup(address);
        assert_eq!(at(0xfff), None, "before the first row");
        assert_eq!(at(0x1000), Some(SP8));
        assert_eq!(at(0x100f), Some(SP8));
        assert_eq!(at(0x1010), Some(FP16));
        assert_eq!(at(0x101f), Some(FP16));
        assert_eq!(at(0x1020), None, "between FDEs");
        assert_eq!(at(0x1035), None, "a row that is not simple");
        assert_eq!(at(0x1040), Some(SP8));
        assert_eq!(at(0x1048), None, "overlapping FDEs");
        assert_eq!(at(0x1060), None, "after the last row");
        assert_eq!(at(u64::MAX), None);
    }

    #[test]
    fn a_row_out_of_order_is_noticed() {
        let mut table = TableBuilder::new();
        assert!(table.push(Row { start: 0x10, end: 0x20, rule: 1 }));
        assert!(!table.push(Row { start: 0x0, end: 0x10, rule: 1 }));
        assert!(!table.push(Row { start: 0x30, end: 0x40, rule: 1 }), "nothing more once out of order");
        assert!(!table.in_order);
    }

    #[test]
    fn nothing_simple_is_no_table() {
        assert!(table(&[(0x0, 0x10, NOT_COMPILED)]).is_none());
        assert!(table(&[]).is_none());
    }

    #[test]
    fn rules_past_sixteen_bits_are_not_compiled() {
        let mut numbering = Numbering::default();
        let rule = |offset| Some(Rule { cfa: Cfa::Sp(offset), saved_fp: None });
        for offset in 0..i32::from(u16::MAX) {
            assert_eq!(numbering.number(rule(offset)), offset as u16 + 1);
        }
        assert_eq!(numbering.number(rule(-1)), NOT_COMPILED);
        assert_eq!(numbering.number(rule(7)), 8, "a rule met before keeps its number");
        assert_eq!(numbering.number(None), NOT_COMPILED);
    }

    /// Where the test loads each module: runtime is link-time plus this.
    const BIAS: u64 = 0x7f00_0000_0000;

    /// The module of the ELF file `bytes`, loaded at [`BIAS`].
    fn module_of(name: &str, bytes: &[u8]) -> DwarfModule {
        let file = object::File::parse(bytes).unwrap();
        let section = |name: &str| {
            let s = file.section_by_name(name)?;
            Some((s.address()..s.address() + s.size(), SectionData::from(s.data().ok()?)))
        };
        let text = section(".text").unwrap().0;
        DwarfModule {
            name: name.to_owned(),
            avma: text.start + BIAS..text.end + BIAS,
            bias: BIAS,
            text_svma: Some(text),
            eh_frame: section(".eh_frame"),
            eh_frame_hdr: section(".eh_frame_hdr"),
            ..DwarfModule::default()
        }
    }

    /// A thread's stack as the agent reads it: nothing below where the
    /// walk started; above, a value made from each address, 0 at some.
    struct Stack {
        floor: u64,
    }

    impl StackReader for Stack {
        fn read_u64(&mut self, address: u64) -> Option<u64> {
            if address < self.floor {
                return None;
            }
            Some(if (address >> 3).is_multiple_of(13) { 0 } else { 0x5000_0000 + (address & 0xfff8) * 3 })
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
    /// there or returning there, with a frame pointer above, below and at
    /// zero, the compiled rules (or framehop, where they step aside) give
    /// the caller framehop alone gives; most steps are the compiled rules'
    /// own. Compiled with or without `.eh_frame_hdr`, the same rules.
    #[test]
    fn compiled_rules_step_as_framehop_does() {
        for path in libraries() {
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            let module = module_of(&path, &bytes);
            let rules = Arc::new(CompiledRules::compile(&module).unwrap());
            // Without `.eh_frame_hdr`, FDEs read as listed and sorted: the same rules.
            let unsorted = CompiledRules::compile(&DwarfModule { eh_frame_hdr: None, ..module.clone() }).unwrap();
            for table in [&*rules, &unsorted] {
                for &start in table.starts.iter() {
                    let at = table.base + u64::from(start);
                    assert_eq!(rules.lookup(at), unsorted.lookup(at), "{path} at {at:#x}");
                }
            }
            let mut compiled = DwarfUnwinder::new();
            compiled.add_module(&DwarfModule { rules: Some(Arc::clone(&rules)), ..module.clone() });
            let mut framehop = DwarfUnwinder::new();
            framehop.add_module(&module);
            let (mut cache, mut framehop_cache) = (new_cache(), new_cache());
            let (mut checked, mut own, mut differ) = (0, 0, Vec::new());
            for (row, &start) in rules.starts.iter().enumerate() {
                if rules.row_rules[row] == NOT_COMPILED {
                    continue;
                }
                let end = rules.starts.get(row + 1).map_or(start + 1, |&next| next);
                let first = BIAS + rules.base + u64::from(start);
                let last = BIAS + rules.base + u64::from(end) - 1;
                let at =
                    [(PcKind::Interrupted, first), (PcKind::Interrupted, last), (PcKind::ReturnAddress, first + 1)];
                for ((kind, pc), fp) in at.into_iter().flat_map(|at| [0x20_0000, 0x8_0000, 0].map(|fp| (at, fp))) {
                    let start_regs = Registers { pc, sp: 0x10_0000, fp, lr: 0 };
                    let mut stack = Stack { floor: start_regs.sp };
                    let (mut ours, mut theirs, mut alone) = (start_regs, start_regs, start_regs);
                    let a = compiled.step(kind, &mut ours, &mut cache, &mut stack);
                    let b = framehop.step(kind, &mut theirs, &mut framehop_cache, &mut stack);
                    own += usize::from(compiled.compiled_step(kind, &mut alone, &mut stack).is_some());
                    checked += 1;
                    if (a, ours) != (b, theirs) {
                        differ.push(format!("{kind:?} {pc:#x}: {a:?} {ours:x?} / framehop {b:?} {theirs:x?}"));
                    }
                }
            }
            eprintln!(
                "{path}: {:?} rows and rules, {checked} steps ({own} compiled), {} differ",
                rules.size(),
                differ.len()
            );
            assert!(
                differ.is_empty(),
                "{path}: {} of {checked} steps differ: {:#?}",
                differ.len(),
                &differ[..differ.len().min(10)]
            );
            assert!(checked > 1000 && own * 2 > checked, "{path}: {own} of {checked} steps by the compiled rules");
        }
    }
}
