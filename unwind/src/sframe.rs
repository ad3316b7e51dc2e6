//! SFrame (`.sframe`, PT_GNU_SFRAME): a compact table giving, for each pc,
//! how to find the canonical frame address (CFA) from the stack or frame
//! pointer, and where the return address and saved frame pointer sit
//! relative to the CFA. Versions 1 (binutils 2.40) and 2 are read.
//!
//! The parser is allocation-free and bounds-checked so it can run in a
//! signal handler: malformed data gives `None`, never a panic.
//!
//! Layout (little-endian): a 28-byte header (magic 0xdee2, version, flags,
//! ABI, fixed FP and RA offsets, aux header length, FDE and FRE counts, FRE
//! bytes, FDE and FRE sub-section offsets relative to the header end), then
//! the FDEs (17 bytes in v1, 20 in v2: function start, size, first FRE
//! offset, FRE count, info, [repetition size, padding]) and the FREs (a
//! start offset of 1, 2 or 4 bytes, an info byte, then 1 to 3 signed stack
//! offsets of 1, 2 or 4 bytes: CFA, then RA and/or FP as the ABI says).

use crate::arch::SFRAME_ABI;
use crate::fp::FramePointerUnwinder;
use crate::{check_progress, PcKind, Registers, StackReader, StepError, Unwinder};
use std::ops::Range;

const MAGIC: u16 = 0xdee2;
const HEADER_SIZE: usize = 28;
const FLAG_FDE_SORTED: u8 = 0x1;
const FLAG_FUNC_START_PCREL: u8 = 0x4;
pub(crate) const ABI_AARCH64_LE: u8 = 2;
pub(crate) const ABI_AMD64_LE: u8 = 3;
/// PLT entries on x86-64, the repetition block of v1 PCMASK FDEs.
const V1_REP_SIZE: u64 = 16;

fn u8_at(d: &[u8], at: usize) -> Option<u8> {
    d.get(at).copied()
}

fn u16_at(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(d.get(at..at.checked_add(2)?)?.try_into().ok()?))
}

fn u32_at(d: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(d.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

/// How to recover the caller's frame at one pc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRule {
    /// The CFA is based on the stack pointer (else the frame pointer).
    pub cfa_from_sp: bool,
    pub cfa_offset: i32,
    /// Where the return address is saved, relative to the CFA (`None`: in
    /// the link register, AArch64 leaf functions).
    pub ra_offset: Option<i32>,
    /// Where the caller's frame pointer is saved, if it was.
    pub fp_offset: Option<i32>,
}

#[derive(Clone, Debug)]
pub struct SFrameSection<D> {
    data: D,
    /// Runtime address of the section's first byte.
    address: u64,
    version: u8,
    flags: u8,
    fixed_fp_offset: i8,
    fixed_ra_offset: i8,
    num_fdes: usize,
    fde_start: usize,
    fde_size: usize,
    fre_start: usize,
    fre_end: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SFrameError {
    TooShort,
    BadMagic,
    UnsupportedVersion,
    UnsupportedAbi,
    /// A supported ABI, but not this machine's.
    ForeignAbi,
    BadOffsets,
}

struct Fde {
    start: u64,
    size: u64,
    fre_offset: usize,
    num_fres: usize,
    info: u8,
    rep_size: u64,
}

impl<D: AsRef<[u8]>> SFrameSection<D> {
    /// Parses the header of section `data`, loaded at runtime `address`.
    pub fn parse(data: D, address: u64) -> Result<Self, SFrameError> {
        let d = data.as_ref();
        if d.len() < HEADER_SIZE {
            return Err(SFrameError::TooShort);
        }
        if u16_at(d, 0) != Some(MAGIC) {
            return Err(SFrameError::BadMagic);
        }
        let version = d[2];
        let fde_size = match version {
            1 => 17,
            2 => 20,
            _ => return Err(SFrameError::UnsupportedVersion),
        };
        let abi = d[4];
        if abi != ABI_AMD64_LE && abi != ABI_AARCH64_LE {
            return Err(SFrameError::UnsupportedAbi);
        }
        // Sections of another ABI than the code we run in are refused:
        // their offsets would be read with the wrong registers.
        if abi != SFRAME_ABI {
            return Err(SFrameError::ForeignAbi);
        }
        let body = HEADER_SIZE + usize::from(d[7]);
        let num_fdes = u32_at(d, 8).ok_or(SFrameError::TooShort)? as usize;
        let fre_len = u32_at(d, 16).ok_or(SFrameError::TooShort)? as usize;
        let fde_start =
            body.checked_add(u32_at(d, 20).ok_or(SFrameError::TooShort)? as usize).ok_or(SFrameError::BadOffsets)?;
        let fre_start =
            body.checked_add(u32_at(d, 24).ok_or(SFrameError::TooShort)? as usize).ok_or(SFrameError::BadOffsets)?;
        let fde_end =
            num_fdes.checked_mul(fde_size).and_then(|n| n.checked_add(fde_start)).ok_or(SFrameError::BadOffsets)?;
        let fre_end = fre_start.checked_add(fre_len).ok_or(SFrameError::BadOffsets)?;
        if fde_end > d.len() || fre_end > d.len() {
            return Err(SFrameError::BadOffsets);
        }
        Ok(Self {
            version,
            flags: d[3],
            fixed_fp_offset: d[5] as i8,
            fixed_ra_offset: d[6] as i8,
            num_fdes,
            fde_start,
            fde_size,
            fre_start,
            fre_end,
            address,
            data,
        })
    }

    pub fn fde_count(&self) -> usize {
        self.num_fdes
    }

    fn fde(&self, index: usize) -> Option<Fde> {
        let d = self.data.as_ref();
        let at = self.fde_start.checked_add(index.checked_mul(self.fde_size)?)?;
        let raw_start = i64::from(u32_at(d, at)? as i32);
        let base =
            if self.flags & FLAG_FUNC_START_PCREL != 0 { self.address.checked_add(at as u64)? } else { self.address };
        Some(Fde {
            start: base.wrapping_add_signed(raw_start),
            size: u64::from(u32_at(d, at + 4)?),
            fre_offset: u32_at(d, at + 8)? as usize,
            num_fres: u32_at(d, at + 12)? as usize,
            info: u8_at(d, at + 16)?,
            rep_size: if self.version >= 2 { u64::from(u8_at(d, at + 17)?) } else { V1_REP_SIZE },
        })
    }

    /// The FDE covering `pc`: binary search when sorted (the linker sorts),
    /// a bounded scan otherwise.
    fn find_fde(&self, pc: u64) -> Option<Fde> {
        let covers = |f: &Fde| pc >= f.start && pc - f.start < f.size;
        if self.flags & FLAG_FDE_SORTED == 0 {
            return (0..self.num_fdes).filter_map(|i| self.fde(i)).find(covers);
        }
        let (mut low, mut high) = (0usize, self.num_fdes);
        while low < high {
            let mid = low + (high - low) / 2;
            if self.fde(mid)?.start <= pc {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        self.fde(low.checked_sub(1)?).filter(covers)
    }

    /// The unwinding rule at `pc`, if the section covers it.
    pub fn rule(&self, pc: u64) -> Option<FrameRule> {
        let d = self.data.as_ref();
        let fde = self.find_fde(pc)?;
        let address_size = match fde.info & 0xf {
            0 => 1,
            1 => 2,
            2 => 4,
            _ => return None,
        };
        let pc_mask = fde.info & 0x10 != 0;
        let offset_in_function = pc - fde.start;
        let key = if pc_mask { offset_in_function.checked_rem(fde.rep_size)? } else { offset_in_function };
        let mut at = self.fre_start.checked_add(fde.fre_offset)?;
        let mut found: Option<(u8, usize)> = None;
        for _ in 0..fde.num_fres {
            let start = match address_size {
                1 => u64::from(u8_at(d, at)?),
                2 => u64::from(u16_at(d, at)?),
                _ => u64::from(u32_at(d, at)?),
            };
            let info = u8_at(d, at + address_size)?;
            let offsets_at = at + address_size + 1;
            let offset_size = match (info >> 5) & 3 {
                0 => 1,
                1 => 2,
                2 => 4,
                _ => return None,
            };
            let count = usize::from((info >> 1) & 0xf);
            let next = offsets_at.checked_add(count.checked_mul(offset_size)?)?;
            if next > self.fre_end {
                return None;
            }
            if start > key {
                break;
            }
            found = Some((info, offsets_at));
            at = next;
        }
        let (info, offsets_at) = found?;
        let offset_size = [1, 2, 4][usize::from((info >> 5) & 3)];
        let count = usize::from((info >> 1) & 0xf);
        let offset = |i: usize| -> Option<i32> {
            if i >= count {
                return None;
            }
            let at = offsets_at + i * offset_size;
            Some(match offset_size {
                1 => i32::from(u8_at(d, at)? as i8),
                2 => i32::from(u16_at(d, at)? as i16),
                _ => u32_at(d, at)? as i32,
            })
        };
        let cfa_offset = offset(0)?;
        // After the CFA offset come the RA offset, unless the header fixes
        // it, then the FP offset, unless the header fixes it (libsframe's
        // rule; a fixed offset of 0 means "not fixed").
        let mut next = 1;
        let mut tracked = |fixed: i8| {
            if fixed != 0 {
                return Some(i32::from(fixed));
            }
            next += 1;
            offset(next - 1)
        };
        let ra_offset = tracked(self.fixed_ra_offset);
        let fp_offset = tracked(self.fixed_fp_offset);
        Some(FrameRule { cfa_from_sp: info & 1 == 1, cfa_offset, ra_offset, fp_offset })
    }
}

/// One module's SFrame section and the runtime text range it covers.
#[derive(Clone, Debug)]
pub struct SFrameModule<D> {
    pub text: Range<u64>,
    pub section: SFrameSection<D>,
}

/// Unwinds with SFrame where a module has it, with frame pointers
/// elsewhere. `modules` must be sorted by text start.
pub struct SFrameUnwinder<D> {
    modules: Vec<SFrameModule<D>>,
}

impl<D: AsRef<[u8]>> SFrameUnwinder<D> {
    pub fn new(mut modules: Vec<SFrameModule<D>>) -> Self {
        modules.sort_by_key(|m| m.text.start);
        Self { modules }
    }

    fn rule(&self, pc: u64) -> Option<FrameRule> {
        let index = self.modules.partition_point(|m| m.text.start <= pc).checked_sub(1)?;
        let module = &self.modules[index];
        if !module.text.contains(&pc) {
            return None;
        }
        module.section.rule(pc)
    }
}

impl<D: AsRef<[u8]>> Unwinder for SFrameUnwinder<D> {
    type Cache = ();

    fn step(
        &self,
        kind: PcKind,
        regs: &mut Registers,
        _cache: &mut (),
        stack: &mut dyn StackReader,
    ) -> Result<bool, StepError> {
        let Some(rule) = self.rule(kind.attribution(regs.pc)) else {
            return FramePointerUnwinder::step_fp(regs, stack);
        };
        let base = if rule.cfa_from_sp { regs.sp } else { regs.fp };
        let cfa = base.checked_add_signed(i64::from(rule.cfa_offset)).ok_or(StepError::BadUnwindInfo)?;
        let read_at = |stack: &mut dyn StackReader, offset: i32| -> Result<u64, StepError> {
            let address = cfa.checked_add_signed(i64::from(offset)).ok_or(StepError::BadUnwindInfo)?;
            stack.read_u64(address).ok_or(StepError::ReadRefused)
        };
        let pc = match rule.ra_offset {
            Some(offset) => read_at(stack, offset)?,
            None if kind == PcKind::Interrupted => regs.lr,
            None => return Err(StepError::BadUnwindInfo),
        };
        let fp = match rule.fp_offset {
            Some(offset) => read_at(stack, offset)?,
            None => regs.fp,
        };
        let caller = Registers { pc, sp: cfa, fp, lr: 0 };
        let more = check_progress(regs, &caller)?;
        *regs = caller;
        Ok(more)
    }
}
