//! Port of upstream `dwarf_ut` (see gtest-compat/README.md).
//!
//! Upstream's `DwarfParser` turns `.eh_frame` (linearly, or through
//! `.eh_frame_hdr`) into a table of frame records. Ours compiles the simple
//! rules into a table too (`unwind::rules`) and hands the sections to
//! framehop for the rest (`unwind::dwarf::DwarfUnwinder`): a record is
//! observed through `step()`, of the agent's unwinder and of framehop
//! alone, which must agree. Every case builds a module whose
//! `.eh_frame` is crafted in the test, then unwinds one frame at a chosen
//! address from a fake stack laid out so that the outcome names the rule
//! that was applied:
//!
//! * the FDE's rule (CFA = SP+16, return address at CFA-8) returns to
//!   [`DWARF_RA`];
//! * the CIE's other rule used below (CFA = SP+8) returns to [`JUST_RA`];
//! * the frame-pointer fallback, used where DWARF gives nothing (no FDE,
//!   or unwind data that could not be read), returns to [`FP_RA`].
//!
//! "No records" upstream is "the frame-pointer fallback, and no panic"
//! here. Frames are unwound as return addresses (not the interrupted
//! frame), so a pc not covered by any FDE also falls back to frame pointers.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use unwind::dwarf::{new_cache, DwarfModule, DwarfUnwinder, SectionData};
use unwind::rules::CompiledRules;
use unwind::{PcKind, Registers, StackReader, Unwinder};

const TEXT: Range<u64> = 0x1000..0x2000;
const EH_FRAME_HDR_SVMA: u64 = 0x2000;
const EH_FRAME_SVMA: u64 = 0x3000;
const BIAS: u64 = 0x5555_0000_0000;

const SP: u64 = 0x10000;
const FP: u64 = 0x20000;
const DWARF_RA: u64 = 0xD1D1;
const JUST_RA: u64 = 0x7777;
const FP_RA: u64 = 0xF1F1;

const DW_CFA_ADVANCE_LOC1: u8 = 0x02;
pub(super) const DW_CFA_DEF_CFA: u8 = 0x0c;
const DW_CFA_DEF_CFA_OFFSET: u8 = 0x0e;
const DW_CFA_OFFSET_RA: u8 = 0x80 | 16;
const RSP: u8 = 7;
/// `DW_EH_PE_pcrel | DW_EH_PE_sdata4`.
const PCREL_SDATA4: u8 = 0x1b;
const UDATA4: u8 = 0x03;
/// `DW_EH_PE_datarel | DW_EH_PE_sdata4`.
const DATAREL_SDATA4: u8 = 0x3b;

/// Which rule a step applied (see the module comment).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    Dwarf,
    JustReturn,
    FramePointer,
    Other(Result<Registers, unwind::StepError>),
}

struct FakeStack(HashMap<u64, u64>);

impl StackReader for FakeStack {
    fn read_u64(&mut self, address: u64) -> Option<u64> {
        self.0.get(&address).copied()
    }
}

fn uleb(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn put32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// Appends a CIE ("zR", pcrel sdata4 pointers, data alignment -8, return
/// address in register 16) whose initial rule is CFA = RSP + `cfa_offset`
/// with the return address at CFA-8. Returns its offset.
pub(super) fn cie(out: &mut Vec<u8>, code_align: u64, cfa_offset: u64) -> usize {
    let at = out.len();
    let mut body = Vec::new();
    put32(&mut body, 0); // CIE id
    body.push(1); // version
    body.extend_from_slice(b"zR\0");
    uleb(&mut body, code_align);
    body.push(0x78); // data alignment -8 (SLEB128)
    body.push(16); // return address register
    body.push(1); // augmentation data length
    body.push(PCREL_SDATA4);
    body.extend_from_slice(&[DW_CFA_DEF_CFA, RSP]);
    uleb(&mut body, cfa_offset);
    body.extend_from_slice(&[DW_CFA_OFFSET_RA, 1]);
    while (body.len() + 4) % 8 != 0 {
        body.push(0); // DW_CFA_nop
    }
    put32(out, body.len() as u32);
    out.extend_from_slice(&body);
    at
}

/// Appends an FDE for `cie_at` covering `range` (link-time addresses) with
/// `instructions`, and `aug_len` as its augmentation data length (the
/// bytes themselves are not written). Returns its offset.
fn fde_with_aug_len(out: &mut Vec<u8>, cie_at: usize, range: Range<u64>, instructions: &[u8], aug_len: u64) -> usize {
    let at = out.len();
    let mut body = Vec::new();
    put32(&mut body, (at + 4 - cie_at) as u32); // back to the CIE
    let pc_begin_field = EH_FRAME_SVMA + at as u64 + 8;
    put32(&mut body, range.start.wrapping_sub(pc_begin_field) as u32);
    put32(&mut body, (range.end - range.start) as u32);
    uleb(&mut body, aug_len);
    body.extend_from_slice(instructions);
    put32(out, body.len() as u32);
    out.extend_from_slice(&body);
    at
}

pub(super) fn fde(out: &mut Vec<u8>, cie_at: usize, range: Range<u64>, instructions: &[u8]) -> usize {
    fde_with_aug_len(out, cie_at, range, instructions, 0)
}

pub(super) fn terminator(out: &mut Vec<u8>) {
    put32(out, 0);
}

/// An `.eh_frame_hdr` for `fde_count` table entries `(function start, FDE
/// offset in .eh_frame)`; `entries` may be shorter than the count claims.
fn eh_frame_hdr(fde_count: u32, entries: &[(u64, usize)]) -> Vec<u8> {
    let mut out = vec![1, PCREL_SDATA4, UDATA4, DATAREL_SDATA4];
    put32(&mut out, EH_FRAME_SVMA.wrapping_sub(EH_FRAME_HDR_SVMA + 4) as u32);
    put32(&mut out, fde_count);
    for &(start, fde_at) in entries {
        put32(&mut out, start.wrapping_sub(EH_FRAME_HDR_SVMA) as u32);
        put32(&mut out, (EH_FRAME_SVMA + fde_at as u64).wrapping_sub(EH_FRAME_HDR_SVMA) as u32);
    }
    out
}

/// The crafted module two ways: as the agent builds it (the rules
/// compiled ahead of time, framehop for the rest) and framehop alone, so
/// both readers of the crafted sections are checked.
pub(super) struct Unwinders {
    compiled: DwarfUnwinder,
    framehop: DwarfUnwinder,
}

pub(super) fn unwinder(eh_frame: &[u8], hdr: Option<&[u8]>) -> Unwinders {
    let section = |svma: u64, data: &[u8]| -> (Range<u64>, SectionData) {
        (svma..svma + data.len() as u64, Arc::from(data.to_vec()))
    };
    let mut module = DwarfModule {
        name: "crafted".into(),
        avma: TEXT.start + BIAS..TEXT.end + BIAS,
        bias: BIAS,
        text_svma: Some(TEXT),
        eh_frame: Some(section(EH_FRAME_SVMA, eh_frame)),
        eh_frame_hdr: hdr.map(|h| section(EH_FRAME_HDR_SVMA, h)),
        debug_frame: None,
        got_svma: None,
        rules: None,
    };
    let mut framehop = DwarfUnwinder::new();
    framehop.add_module(&module);
    module.rules = CompiledRules::compile(&module).map(Arc::new);
    let mut compiled = DwarfUnwinder::new();
    compiled.add_module(&module);
    Unwinders { compiled, framehop }
}

/// Unwinds the frame whose return address is just past link-time `svma`
/// (so `svma` is the address looked up), with and without the compiled
/// rules, which must agree.
pub(super) fn probe(unwinders: &Unwinders, svma: u64) -> Outcome {
    let outcome = |unwinder: &DwarfUnwinder| {
        let mut stack =
            FakeStack(HashMap::from([(SP, JUST_RA), (SP + 8, DWARF_RA), (FP, FP + 0x100), (FP + 8, FP_RA)]));
        let mut regs = Registers { pc: svma + BIAS + 1, sp: SP, fp: FP, lr: 0 };
        let mut cache = new_cache();
        let result = unwinder.step(PcKind::ReturnAddress, &mut regs, &mut cache, &mut stack).map(|_| regs);
        match result {
            Ok(r) if r == (Registers { pc: DWARF_RA, sp: SP + 16, fp: FP, lr: 0 }) => Outcome::Dwarf,
            Ok(r) if r == (Registers { pc: JUST_RA, sp: SP + 8, fp: FP, lr: 0 }) => Outcome::JustReturn,
            Ok(r) if r == (Registers { pc: FP_RA, sp: FP + 16, fp: FP + 0x100, lr: 0 }) => Outcome::FramePointer,
            other => Outcome::Other(other),
        }
    };
    let compiled = outcome(&unwinders.compiled);
    assert_eq!(compiled, outcome(&unwinders.framehop), "compiled rules and framehop at {svma:#x}");
    compiled
}

/// Probes a spread of addresses over the text: none may get a DWARF rule.
fn assert_no_records(unwinder: &Unwinders) {
    for svma in (TEXT.start..TEXT.end).step_by(0x40) {
        assert_eq!(probe(unwinder, svma), Outcome::FramePointer, "at {svma:#x}");
    }
}

pub(super) const FUNCTION: Range<u64> = 0x1100..0x1200;

#[test]
fn empty_section() {
    assert_no_records(&unwinder(&[], None));
}

#[test]
fn terminator_only() {
    let mut eh = Vec::new();
    terminator(&mut eh);
    assert_no_records(&unwinder(&eh, None));
}

#[test]
fn cie_only() {
    let mut eh = Vec::new();
    cie(&mut eh, 1, 16);
    terminator(&mut eh);
    assert_no_records(&unwinder(&eh, None));
}

#[test]
fn cie_and_fde() {
    let mut eh = Vec::new();
    let c = cie(&mut eh, 1, 16);
    fde(&mut eh, c, FUNCTION, &[]);
    terminator(&mut eh);
    let u = unwinder(&eh, None);
    assert_eq!(probe(&u, FUNCTION.start - 1), Outcome::FramePointer, "before the function");
    assert_eq!(probe(&u, FUNCTION.start), Outcome::Dwarf);
    assert_eq!(probe(&u, FUNCTION.end - 1), Outcome::Dwarf);
    assert_eq!(probe(&u, FUNCTION.end), Outcome::FramePointer, "the range ends at start + length");
}

// ---- bounds guards ----

#[test]
fn truncated_record() {
    let mut eh = Vec::new();
    cie(&mut eh, 1, 16);
    eh.truncate(10); // the CIE's length runs past the section
    assert_no_records(&unwinder(&eh, None));
}

#[test]
fn short_cie_body() {
    let mut eh = Vec::new();
    put32(&mut eh, 4); // length 4: the CIE id and nothing else
    put32(&mut eh, 0);
    terminator(&mut eh);
    assert_no_records(&unwinder(&eh, None));
}

#[test]
fn fde_aug_data_overrun() {
    let mut eh = Vec::new();
    let c = cie(&mut eh, 1, 16);
    fde_with_aug_len(&mut eh, c, FUNCTION, &[], 100); // 100 bytes claimed, none there
    terminator(&mut eh);
    let u = unwinder(&eh, None);
    assert_eq!(probe(&u, FUNCTION.start), Outcome::FramePointer);
    assert_no_records(&u);
}

#[test]
fn fde_at_exact_image_boundary() {
    let mut eh = Vec::new();
    let c = cie(&mut eh, 1, 16);
    fde(&mut eh, c, FUNCTION, &[]); // the section ends with the FDE: no terminator
    let u = unwinder(&eh, None);
    assert_eq!(probe(&u, FUNCTION.start), Outcome::Dwarf);
    assert_eq!(probe(&u, FUNCTION.end - 1), Outcome::Dwarf);
}

/// The header's only table entry points at an FDE whose length runs past
/// the end of `.eh_frame`.
#[test]
fn fde_exceeds_image_end() {
    let mut eh = Vec::new();
    put32(&mut eh, 100);
    put32(&mut eh, 4);
    let hdr = eh_frame_hdr(1, &[(FUNCTION.start, 0)]);
    let u = unwinder(&eh, Some(&hdr));
    assert_eq!(probe(&u, FUNCTION.start), Outcome::FramePointer);
    assert_no_records(&u);
}

/// The header claims 1024 table entries and has none: nothing may be read
/// past it, even with a valid `.eh_frame` behind it.
#[test]
fn fde_count_overrun() {
    let mut eh = Vec::new();
    let c = cie(&mut eh, 1, 16);
    fde(&mut eh, c, FUNCTION, &[]);
    terminator(&mut eh);
    let hdr = eh_frame_hdr(1024, &[]);
    let u = unwinder(&eh, Some(&hdr));
    assert_no_records(&u);
}

/// Two CIEs with code alignment 1 and 4, an FDE for each that advances 10
/// code units then changes the CFA: the second FDE's change must land 40
/// bytes in, not 10 (its own CIE's factor, not the first one's).
#[test]
fn per_fde_cie_alignment_does_not_leak() {
    let first = 0x1100..0x1200;
    let second = 0x1400..0x1500;
    let instructions = [DW_CFA_ADVANCE_LOC1, 10, DW_CFA_DEF_CFA_OFFSET, 16, DW_CFA_ADVANCE_LOC1, 5];
    let mut eh = Vec::new();
    let c1 = cie(&mut eh, 1, 8);
    let f1 = fde(&mut eh, c1, first.clone(), &instructions);
    let c2 = cie(&mut eh, 4, 8);
    let f2 = fde(&mut eh, c2, second.clone(), &instructions);
    terminator(&mut eh);
    let hdr = eh_frame_hdr(2, &[(first.start, f1), (second.start, f2)]);

    for u in [unwinder(&eh, Some(&hdr)), unwinder(&eh, None)] {
        assert_eq!(probe(&u, first.start), Outcome::JustReturn);
        assert_eq!(probe(&u, first.start + 9), Outcome::JustReturn);
        assert_eq!(probe(&u, first.start + 10), Outcome::Dwarf, "code alignment 1");

        assert_eq!(probe(&u, second.start), Outcome::JustReturn);
        assert_eq!(probe(&u, second.start + 10), Outcome::JustReturn, "the first CIE's alignment leaked");
        assert_eq!(probe(&u, second.start + 39), Outcome::JustReturn);
        assert_eq!(probe(&u, second.start + 40), Outcome::Dwarf, "code alignment 4");
    }
}
