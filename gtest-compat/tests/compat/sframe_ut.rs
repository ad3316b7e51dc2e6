//! Port of upstream `sframe_ut` (see gtest-compat/README.md).
//!
//! Upstream's `SFrameParser` turns a whole `.sframe` section into a sorted
//! table of frame descriptions; ours (`unwind::sframe::SFrameSection`)
//! validates the header up front and answers `rule(pc)` lazily, without
//! allocating. So "the parser produced records R" becomes "the rules that
//! `rule()` answers over an address window, listed where they change, are
//! R", and "parse() fails" becomes "no pc gets a rule" (`parse` may reject
//! the section or every lookup may come back empty: either way the unwinder
//! falls back to frame pointers, as upstream falls back to DWARF).
//!
//! The sections are built byte by byte following the SFrame specification
//! (binutils `include/sframe.h`): FDE info = FRE type in bits 0-3 and the
//! PCMASK flag in bit 4; FRE info = CFA base register in bit 0 (1 = SP,
//! 0 = FP), offset count in bits 1-4, offset size in bits 5-6. Upstream's
//! test helpers use a private layout instead; the cases below keep their
//! meaning (base register, offset sizes, which offsets are tracked), not
//! their bytes.

use std::ops::Range;
use std::sync::Arc;
use unwind::fp::FramePointerUnwinder;
use unwind::sframe::{FrameRule, SFrameError, SFrameModule, SFrameSection, SFrameUnwinder};
use unwind::{PcKind, Registers, StackReader, Unwinder};

pub(crate) const MAGIC: u16 = 0xdee2;
pub(crate) const VERSION_2: u8 = 2;
pub(crate) const FLAG_FDE_SORTED: u8 = 0x1;
pub(crate) const ABI_AARCH64: u8 = 2;
pub(crate) const ABI_AMD64: u8 = 3;
/// The ABI of the machine running the tests, as upstream's `HOST_ABI`.
pub(crate) const HOST_ABI: u8 = if cfg!(target_arch = "aarch64") { ABI_AARCH64 } else { ABI_AMD64 };
pub(crate) const WRONG_ABI: u8 = if cfg!(target_arch = "aarch64") { ABI_AMD64 } else { ABI_AARCH64 };
pub(crate) const HEADER_SIZE: usize = 28;
pub(crate) const FDE_SIZE: usize = 20;

/// FRE start-address sizes (FDE info bits 0-3).
pub(crate) const ADDR1: u8 = 0;
pub(crate) const ADDR2: u8 = 1;
pub(crate) const ADDR4: u8 = 2;

/// FRE offset sizes (FRE info bits 5-6).
pub(crate) const OFF1: u8 = 0;
pub(crate) const OFF2: u8 = 1;
pub(crate) const OFF4: u8 = 2;

/// The FDE info byte.
pub(crate) fn fde_info(fre_type: u8, pcmask: bool) -> u8 {
    fre_type | (u8::from(pcmask) << 4)
}

/// The FRE info byte.
pub(crate) fn fre_info(sp_based: bool, offset_count: u8, offset_size: u8) -> u8 {
    u8::from(sp_based) | (offset_count << 1) | (offset_size << 5)
}

/// One FRE: its start offset in `addr_size` bytes, its info byte, then
/// `offsets` (CFA first) in the size the info byte names.
pub(crate) fn fre(start: u32, addr_size: u8, info: u8, offsets: &[i32]) -> Vec<u8> {
    let mut out = Vec::new();
    match addr_size {
        ADDR1 => out.push(start as u8),
        ADDR2 => out.extend_from_slice(&(start as u16).to_le_bytes()),
        _ => out.extend_from_slice(&start.to_le_bytes()),
    }
    out.push(info);
    for &offset in offsets {
        match (info >> 5) & 3 {
            OFF1 => out.push(offset as i8 as u8),
            OFF2 => out.extend_from_slice(&(offset as i16).to_le_bytes()),
            _ => out.extend_from_slice(&offset.to_le_bytes()),
        }
    }
    out
}

/// A 1-byte-address, 1-byte-offset FRE with the CFA `cfa_offset` above SP
/// (or FP) and optional further offsets.
pub(crate) fn fre1(start: u8, sp_based: bool, offsets: &[i32]) -> Vec<u8> {
    fre(u32::from(start), ADDR1, fre_info(sp_based, offsets.len() as u8, OFF1), offsets)
}

/// A version 2 `.sframe` section under construction.
pub(crate) struct Builder {
    pub flags: u8,
    pub abi: u8,
    pub fixed_fp: i8,
    pub fixed_ra: i8,
    pub aux: Vec<u8>,
    pub fdes: Vec<[u8; FDE_SIZE]>,
    pub fres: Vec<u8>,
    pub num_fres: u32,
}

impl Builder {
    /// A sorted section for `abi` with the fixed RA offset `fixed_ra`.
    pub(crate) fn new(abi: u8, fixed_ra: i8) -> Self {
        Self {
            flags: FLAG_FDE_SORTED,
            abi,
            fixed_fp: 0,
            fixed_ra,
            aux: Vec::new(),
            fdes: Vec::new(),
            fres: Vec::new(),
            num_fres: 0,
        }
    }

    /// The host ABI with the usual fixed RA offset (x86-64: CFA-8; AArch64: none).
    pub(crate) fn host() -> Self {
        Self::new(HOST_ABI, if HOST_ABI == ABI_AMD64 { -8 } else { 0 })
    }

    /// Appends an FDE whose FREs are `fres` (appended to the FRE sub-section).
    pub(crate) fn fde(&mut self, start: i32, size: u32, info: u8, fres: &[Vec<u8>]) -> &mut Self {
        let fre_off = self.fres.len() as u32;
        for f in fres {
            self.fres.extend_from_slice(f);
        }
        self.num_fres += fres.len() as u32;
        self.raw_fde(start, size, fre_off, fres.len() as u32, info, 0)
    }

    /// Appends an FDE with explicit fields (FREs are added separately).
    pub(crate) fn raw_fde(
        &mut self,
        start: i32,
        size: u32,
        fre_off: u32,
        fre_num: u32,
        info: u8,
        rep: u8,
    ) -> &mut Self {
        let mut fde = [0u8; FDE_SIZE];
        fde[0..4].copy_from_slice(&start.to_le_bytes());
        fde[4..8].copy_from_slice(&size.to_le_bytes());
        fde[8..12].copy_from_slice(&fre_off.to_le_bytes());
        fde[12..16].copy_from_slice(&fre_num.to_le_bytes());
        fde[16] = info;
        fde[17] = rep;
        self.fdes.push(fde);
        self
    }

    pub(crate) fn build(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.push(VERSION_2);
        out.push(self.flags);
        out.push(self.abi);
        out.push(self.fixed_fp as u8);
        out.push(self.fixed_ra as u8);
        out.push(self.aux.len() as u8);
        out.extend_from_slice(&(self.fdes.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.num_fres.to_le_bytes());
        out.extend_from_slice(&(self.fres.len() as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes()); // FDEs right after the (aux) header
        out.extend_from_slice(&((self.fdes.len() * FDE_SIZE) as u32).to_le_bytes());
        out.extend_from_slice(&self.aux);
        for fde in &self.fdes {
            out.extend_from_slice(fde);
        }
        out.extend_from_slice(&self.fres);
        out
    }
}

/// Overwrites the little-endian u32 header field at byte `at`.
pub(crate) fn patch_u32(data: &mut [u8], at: usize, value: u32) {
    data[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

/// The rules `rule()` answers over `window`, listed where they change
/// (upstream's table of records); empty when the section is rejected.
fn table(data: &[u8], address: u64, window: Range<u64>) -> Vec<(u64, FrameRule)> {
    let Ok(section) = SFrameSection::parse(data, address) else { return Vec::new() };
    let mut out: Vec<(u64, FrameRule)> = Vec::new();
    let mut previous = None;
    for pc in window {
        let rule = section.rule(pc);
        if let Some(r) = rule {
            if previous != Some(r) {
                out.push((pc, r));
            }
        }
        previous = rule;
    }
    out
}

/// Window used for the "no rule anywhere" checks: covers every FDE the
/// cases below build (all start below 0x10000 and span at most 0x200).
const WHOLE: Range<u64> = 0..0x11000;

fn sp_rule(cfa: i32, ra: Option<i32>, fp: Option<i32>) -> FrameRule {
    FrameRule { cfa_from_sp: true, cfa_offset: cfa, ra_offset: ra, fp_offset: fp }
}

/// The RA offset a host-ABI FRE without its own RA offset yields.
fn host_fixed_ra() -> Option<i32> {
    (HOST_ABI == ABI_AMD64).then_some(-8)
}

// ---- header validation ----

#[test]
fn invalid_magic() {
    let data = [0u8; HEADER_SIZE];
    assert_eq!(SFrameSection::parse(&data[..], 0).err(), Some(SFrameError::BadMagic));
}

#[test]
fn unsupported_version() {
    let mut data = Builder::host().build();
    data[2] = 3;
    assert_eq!(SFrameSection::parse(&data[..], 0).err(), Some(SFrameError::UnsupportedVersion));
}

#[test]
fn wrong_arch() {
    let mut b = Builder::new(WRONG_ABI, if WRONG_ABI == ABI_AMD64 { -8 } else { 0 });
    b.fde(0x1000, 64, fde_info(ADDR1, false), &[fre1(0, true, &[8])]);
    let data = b.build();
    assert!(SFrameSection::parse(&data[..], 0).is_err(), "a section for another architecture must be rejected");
}

#[test]
fn truncated_section() {
    let mut data = Builder::host().build();
    data.truncate(10);
    assert_eq!(SFrameSection::parse(&data[..], 0).err(), Some(SFrameError::TooShort));
}

#[test]
fn auxhdr_len_bounds_check() {
    let mut data = Builder::host().build();
    data[7] = 200; // the auxiliary header would end far past the section
    assert!(SFrameSection::parse(&data[..], 0).is_err());
}

#[test]
fn empty_fde_array() {
    let data = Builder::host().build();
    if let Ok(section) = SFrameSection::parse(&data[..], 0) {
        assert_eq!(section.fde_count(), 0);
    }
    assert!(table(&data, 0, WHOLE).is_empty());
}

/// Upstream skips PCMASK FDEs (its table cannot express them). We support
/// them (PLT entries): the FREs repeat every `rep_size` bytes. Same intent,
/// the FDE must not be read as an ordinary PCINC range: at start+16 the
/// block starts over.
#[test]
fn pcmask_skipped() {
    let mut b = Builder::host();
    b.fres = [fre1(0, true, &[8]), fre1(6, true, &[16])].concat();
    b.num_fres = 2;
    b.raw_fde(0x100, 64, 0, 2, fde_info(ADDR1, true), 16);
    let data = b.build();
    let section = SFrameSection::parse(&data[..], 0).unwrap();
    let cfa = |pc| section.rule(pc).map(|r| r.cfa_offset);
    assert_eq!(cfa(0x100), Some(8));
    assert_eq!(cfa(0x106), Some(16));
    assert_eq!(cfa(0x10f), Some(16));
    assert_eq!(cfa(0x110), Some(8), "PCMASK: the second block starts over");
    assert_eq!(cfa(0x116), Some(16));
    assert_eq!(cfa(0x140), None, "past the function");
}

#[test]
fn empty_fde_skipped() {
    let mut b = Builder::host();
    b.fde(0x100, 64, fde_info(ADDR1, false), &[]);
    let data = b.build();
    assert!(table(&data, 0, WHOLE).is_empty());
}

// ---- decoding ----

#[test]
fn single_fde_single_fre_sp_based() {
    let mut b = Builder::host();
    b.fde(0x1000, 64, fde_info(ADDR1, false), &[fre1(0, true, &[8])]);
    let records = table(&b.build(), 0, WHOLE);
    assert_eq!(records, vec![(0x1000, sp_rule(8, host_fixed_ra(), None))]);
}

#[test]
fn single_fde_single_fre_fp_based() {
    // CFA = FP+16, caller's FP saved at CFA-16; on AArch64 the RA slot
    // comes before the FP slot.
    let offsets: &[i32] = if HOST_ABI == ABI_AMD64 { &[16, -16] } else { &[16, -8, -16] };
    let mut b = Builder::host();
    b.fde(0x2000, 128, fde_info(ADDR1, false), &[fre1(4, false, offsets)]);
    let records = table(&b.build(), 0, WHOLE);
    assert_eq!(
        records,
        vec![(0x2004, FrameRule { cfa_from_sp: false, cfa_offset: 16, ra_offset: Some(-8), fp_offset: Some(-16) })]
    );
}

#[test]
fn fixed_ra_offset() {
    // The header fixes the RA at CFA-8; the FRE's second offset (-16) must
    // not be taken for the RA.
    let mut b = Builder::new(HOST_ABI, -8);
    b.fde(0x500, 32, fde_info(ADDR1, false), &[fre1(0, true, &[8, -16])]);
    let data = b.build();
    let rule = SFrameSection::parse(&data[..], 0).unwrap().rule(0x500).unwrap();
    assert_eq!(rule.ra_offset, Some(-8));
}

#[test]
fn per_fre_ra() {
    let mut b = Builder::new(HOST_ABI, 0);
    b.fde(0x3000, 64, fde_info(ADDR1, false), &[fre1(0, true, &[16, -8])]);
    let data = b.build();
    let rule = SFrameSection::parse(&data[..], 0).unwrap().rule(0x3000).unwrap();
    assert_eq!(rule.ra_offset, Some(-8));
}

#[test]
fn per_fre_ra_untracked() {
    // No fixed RA and none in the FRE: the RA is still in the link register.
    let mut b = Builder::new(HOST_ABI, 0);
    b.fde(0x4000, 32, fde_info(ADDR1, false), &[fre1(0, true, &[8])]);
    let data = b.build();
    let rule = SFrameSection::parse(&data[..], 0).unwrap().rule(0x4000).unwrap();
    assert_eq!(rule.ra_offset, None);
}

#[test]
fn offset_size_2b() {
    let mut b = Builder::host();
    b.fde(0x5000, 256, fde_info(ADDR2, false), &[fre(8, ADDR2, fre_info(true, 1, OFF2), &[512])]);
    let records = table(&b.build(), 0, WHOLE);
    assert_eq!(records, vec![(0x5008, sp_rule(512, host_fixed_ra(), None))]);
}

#[test]
fn offset_size_4b() {
    let mut b = Builder::host();
    b.fde(0x6000, 512, fde_info(ADDR4, false), &[fre(0, ADDR4, fre_info(true, 1, OFF4), &[65536])]);
    let records = table(&b.build(), 0, WHOLE);
    assert_eq!(records, vec![(0x6000, sp_rule(65536, host_fixed_ra(), None))]);
}

fn three_fdes(order: [i32; 3], sorted: bool) -> Vec<u8> {
    let mut b = Builder::host();
    if !sorted {
        b.flags = 0;
    }
    for (start, second) in order.into_iter().zip([8u8, 4, 2]) {
        b.fde(start, 32, fde_info(ADDR1, false), &[fre1(0, true, &[8]), fre1(second, true, &[16])]);
    }
    b.build()
}

#[test]
fn multiple_fdes() {
    let records = table(&three_fdes([0xA000, 0xB000, 0xC000], true), 0, WHOLE);
    let locs: Vec<u64> = records.iter().map(|r| r.0).collect();
    assert_eq!(locs, vec![0xA000, 0xA008, 0xB000, 0xB004, 0xC000, 0xC002]);
    assert!(records.iter().step_by(2).all(|r| r.1.cfa_offset == 8));
    assert!(records.iter().skip(1).step_by(2).all(|r| r.1.cfa_offset == 16));
}

#[test]
fn multiple_fdes_reverse_order() {
    // Descending FDEs without the sorted flag: every function is still found.
    let records = table(&three_fdes([0xC000, 0xB000, 0xA000], false), 0, WHOLE);
    let locs: Vec<u64> = records.iter().map(|r| r.0).collect();
    assert_eq!(locs, vec![0xA000, 0xA002, 0xB000, 0xB004, 0xC000, 0xC008]);
}

#[test]
fn address_translation() {
    // Section at 0x1000, function at +0x200, FRE at +0x10.
    let mut b = Builder::host();
    b.fde(0x200, 64, fde_info(ADDR1, false), &[fre1(0x10, true, &[8])]);
    let records = table(&b.build(), 0x1000, WHOLE);
    assert_eq!(records.first().map(|r| r.0), Some(0x1210));
    assert_eq!(records.len(), 1);
}

// ---- bounds checks ----

#[test]
fn bounds_check_fre_overrun() {
    // FDE 0's FREs would start exactly at the end of the FRE sub-section;
    // FDE 1 is fine.
    let mut b = Builder::host();
    b.fres = fre1(0, true, &[8]);
    b.num_fres = 1;
    b.raw_fde(0xD000, 64, 3, 1, fde_info(ADDR1, false), 0);
    b.raw_fde(0xE000, 64, 0, 1, fde_info(ADDR1, false), 0);
    let records = table(&b.build(), 0, WHOLE);
    assert_eq!(records, vec![(0xE000, sp_rule(8, host_fixed_ra(), None))]);
}

#[test]
fn bounds_check_addr_size_truncated() {
    // A 2-byte start address of which only one byte is there.
    let mut b = Builder::host();
    b.fres = vec![0x00];
    b.num_fres = 1;
    b.raw_fde(0x1000, 64, 0, 1, fde_info(ADDR2, false), 0);
    assert!(table(&b.build(), 0, WHOLE).is_empty());
}

#[test]
fn bounds_check_info_byte_truncated() {
    let mut b = Builder::host();
    b.fres = vec![0x00];
    b.num_fres = 1;
    b.raw_fde(0x1000, 64, 0, 1, fde_info(ADDR1, false), 0);
    assert!(table(&b.build(), 0, WHOLE).is_empty());
}

#[test]
fn bounds_check_fde_off_out_of_bounds() {
    let mut b = Builder::host();
    b.fde(0x1000, 64, fde_info(ADDR1, false), &[fre1(0, true, &[8])]);
    let mut data = b.build();
    patch_u32(&mut data, 20, 9999); // fdeoff
    assert_eq!(SFrameSection::parse(&data[..], 0).err(), Some(SFrameError::BadOffsets));
    assert!(table(&data, 0, WHOLE).is_empty());
}

#[test]
fn bounds_check_fre_len_overflow() {
    let mut b = Builder::host();
    b.fde(0x1000, 64, fde_info(ADDR1, false), &[fre1(0, true, &[8])]);
    let mut data = b.build();
    patch_u32(&mut data, 16, 9999); // fre_len
    assert_eq!(SFrameSection::parse(&data[..], 0).err(), Some(SFrameError::BadOffsets));
}

#[test]
fn bounds_check_fre_off_out_of_bounds() {
    let mut b = Builder::host();
    b.fres = fre1(0, true, &[8]);
    b.num_fres = 1;
    b.raw_fde(0x1000, 64, b.fres.len() as u32, 1, fde_info(ADDR1, false), 0);
    assert!(table(&b.build(), 0, WHOLE).is_empty());
}

#[test]
fn reserved_fre_addr_size() {
    let mut b = Builder::host();
    b.fde(0x1000, 64, fde_info(3, false), &[fre1(0, true, &[8])]);
    assert!(table(&b.build(), 0, WHOLE).is_empty());
}

#[test]
fn reserved_fre_offset_size() {
    let mut b = Builder::host();
    b.fres = vec![0x00, fre_info(true, 1, 3), 8];
    b.num_fres = 1;
    b.raw_fde(0x1000, 64, 0, 1, fde_info(ADDR1, false), 0);
    assert!(table(&b.build(), 0, WHOLE).is_empty());
}

#[test]
fn auxhdr_len_non_zero() {
    // The FDE and FRE offsets count from the end of the auxiliary header.
    let mut b = Builder::host();
    b.aux = 0xDEAD_BEEFu32.to_le_bytes().to_vec();
    b.fde(0x1000, 64, fde_info(ADDR1, false), &[fre1(0, true, &[8])]);
    let records = table(&b.build(), 0, WHOLE);
    assert_eq!(records, vec![(0x1000, sp_rule(8, host_fixed_ra(), None))]);
}

/// Upstream: a failed parse frees its table (checked by ASan). Ours owns
/// nothing after a failure: the section data handed in is dropped, so an
/// `Arc` of it is back to one owner.
#[test]
fn parse_failure_frees_table() {
    let data: Arc<[u8]> = Arc::from(vec![0u8; HEADER_SIZE]);
    assert!(SFrameSection::parse(data.clone(), 0).is_err());
    assert_eq!(Arc::strong_count(&data), 1);
    let good: Arc<[u8]> = Arc::from(Builder::host().build());
    let section = SFrameSection::parse(good.clone(), 0).unwrap();
    assert_eq!(Arc::strong_count(&good), 2);
    drop(section);
    assert_eq!(Arc::strong_count(&good), 1);
}

/// A stack that answers every aligned read from a map (unknown addresses
/// read as zero) and records what was read.
#[derive(Default)]
pub(crate) struct MapStack {
    pub values: std::collections::HashMap<u64, u64>,
    pub reads: Vec<u64>,
}

impl StackReader for MapStack {
    fn read_u64(&mut self, address: u64) -> Option<u64> {
        self.reads.push(address);
        Some(self.values.get(&address).copied().unwrap_or(0))
    }
}

/// Upstream detects the default frame layout (used where no SFrame record
/// applies) from the FP-based records it parsed. Ours has one default: the
/// frame-pointer record, used for every pc the section does not cover.
#[test]
fn default_frame_detection() {
    let offsets: &[i32] = if HOST_ABI == ABI_AMD64 { &[16, -16] } else { &[16, -8, -16] };
    let mut b = Builder::host();
    b.fde(0xF000, 64, fde_info(ADDR1, false), &[fre1(4, false, offsets)]);
    let data = b.build();
    let unwinder = SFrameUnwinder::new(vec![SFrameModule {
        text: 0xF000..0xF040,
        section: SFrameSection::parse(data, 0).unwrap(),
    }]);
    let stack = || MapStack {
        values: [(0x8000, 0x8100), (0x8008, 0xAAAA), (0x8100 - 16, 0x9000), (0x8100 - 8, 0xBBBB)].into(),
        reads: Vec::new(),
    };
    let start = Registers { pc: 0x1234, sp: 0x7000, fp: 0x8000, lr: 0 };

    // Outside every FDE: the frame-pointer layout.
    let mut ours = start;
    unwinder.step(PcKind::Interrupted, &mut ours, &mut (), &mut stack()).unwrap();
    let mut fp = start;
    FramePointerUnwinder::step_fp(&mut fp, &mut stack()).unwrap();
    assert_eq!(ours, fp);
    assert_eq!(ours.pc, 0xAAAA);

    // Inside the FDE: its own rule (CFA = FP+16 here, like a frame record).
    let mut inside = Registers { pc: 0xF010, sp: 0x7000, fp: 0x80F0, lr: 0 };
    unwinder.step(PcKind::Interrupted, &mut inside, &mut (), &mut stack()).unwrap();
    assert_eq!(inside, Registers { pc: 0xBBBB, sp: 0x8100, fp: 0x9000, lr: 0 });
}

#[test]
fn both_ra_and_fp_tracked_correct_order() {
    // Wire order after the CFA offset: RA, then FP.
    let mut b = Builder::new(HOST_ABI, 0);
    b.fde(0x7000, 64, fde_info(ADDR1, false), &[fre1(0, true, &[16, -8, -16])]);
    let data = b.build();
    let rule = SFrameSection::parse(&data[..], 0).unwrap().rule(0x7000).unwrap();
    assert_eq!(rule.ra_offset, Some(-8), "RA slot");
    assert_eq!(rule.fp_offset, Some(-16), "FP slot");
}

/// FDE 1 claims two FREs but the section ends after its first: it must
/// contribute nothing, not a partial rule, and FDE 0 is unaffected.
#[test]
fn partial_fde_rollback_count_restored() {
    let mut b = Builder::host();
    b.fres = [fre1(0, true, &[8]), fre1(0, true, &[8])].concat();
    b.num_fres = 3;
    b.raw_fde(0xA000, 32, 0, 1, fde_info(ADDR1, false), 0);
    b.raw_fde(0xB000, 32, 3, 2, fde_info(ADDR1, false), 0);
    let records = table(&b.build(), 0, WHOLE);
    assert_eq!(records, vec![(0xA000, sp_rule(8, host_fixed_ra(), None))]);
}

/// Upstream: a corrupt FP-based FDE must not leave parser state behind
/// (the detected default frame). Ours keeps no state between lookups; the
/// same intent: a valid FDE answers the same with or without a corrupt FDE
/// beside it, and pcs of the corrupt one get the default frame-pointer
/// layout.
#[test]
fn partial_fde_rollback_linked_frame_size_restored() {
    let fp_offsets: &[i32] = if HOST_ABI == ABI_AMD64 { &[16, -16] } else { &[16, -8, -16] };
    let mut alone = Builder::host();
    alone.fde(0xC000, 32, fde_info(ADDR1, false), &[fre1(0, true, &[8])]);
    let alone = alone.build();

    let mut b = Builder::host();
    b.flags = 0; // FDEs out of address order
    b.fres = [fre1(0, true, &[8]), fre1(0, false, fp_offsets)].concat();
    b.num_fres = 3;
    b.raw_fde(0xC000, 32, 0, 1, fde_info(ADDR1, false), 0);
    b.raw_fde(0xA000, 64, 3, 2, fde_info(ADDR1, false), 0); // second FRE missing
    let data = b.build();

    assert_eq!(table(&data, 0, WHOLE), table(&alone, 0, WHOLE));
    let section = SFrameSection::parse(&data[..], 0).unwrap();
    assert_eq!(section.rule(0xA000), None);

    let unwinder = SFrameUnwinder::new(vec![SFrameModule { text: 0xA000..0xD000, section }]);
    let mut stack = MapStack { values: [(0x8000, 0x8100), (0x8008, 0xAAAA)].into(), reads: Vec::new() };
    let mut regs = Registers { pc: 0xA010, sp: 0x7000, fp: 0x8000, lr: 0 };
    unwinder.step(PcKind::Interrupted, &mut regs, &mut (), &mut stack).unwrap();
    assert_eq!(regs, Registers { pc: 0xAAAA, sp: 0x8010, fp: 0x8100, lr: 0 });
}

/// Upstream documents (without testing) a guard against section offsets
/// above 4 GiB being truncated to 32 bits. Ours takes 64-bit addresses: a
/// section mapped high keeps its full address.
#[test]
fn section_offset_overflow_guard_documented() {
    let address = 0x7f12_3456_7000u64;
    let mut b = Builder::host();
    b.fde(0x200, 64, fde_info(ADDR1, false), &[fre1(0x10, true, &[8])]);
    let data = b.build();
    let section = SFrameSection::parse(&data[..], address).unwrap();
    assert_eq!(section.rule(address + 0x210).map(|r| r.cfa_offset), Some(8));
    assert_eq!(section.rule(0x3456_7000 + 0x210), None, "no match at the truncated address");
    assert_eq!(section.rule(address + 0x1ff), None);
}
