//! DWARF CFI unwinding (`.eh_frame`, `.eh_frame_hdr`, `.debug_frame`):
//! through a module's compiled rules where they apply ([`crate::rules`]),
//! else through framehop, with its allocation-free cache policy. Addresses
//! not covered by any module fall back to frame pointers inside framehop.

use crate::arch::{from_framehop, to_framehop, FramehopCache, FramehopUnwinder};
use crate::rules::CompiledRules;
use crate::{check_progress, PcKind, Registers, StackReader, StepError, Unwinder};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, MustNotAllocateDuringUnwind, Unwinder as _};
use gimli::{BaseAddresses, EhFrameHdr, NativeEndian};
use std::ops::Range;
use std::sync::Arc;

/// Section data shared between unwinder generations.
pub type SectionData = Arc<[u8]>;

/// A loaded module's unwind sections (addresses are link-time, "SVMA").
#[derive(Clone, Debug, Default)]
pub struct DwarfModule {
    pub name: String,
    /// Runtime range of the module's executable code.
    pub avma: Range<u64>,
    /// Load bias: runtime address minus link-time address.
    pub bias: u64,
    pub text_svma: Option<Range<u64>>,
    pub eh_frame: Option<(Range<u64>, SectionData)>,
    pub eh_frame_hdr: Option<(Range<u64>, SectionData)>,
    pub debug_frame: Option<SectionData>,
    pub got_svma: Option<Range<u64>>,
    /// `.eh_frame`'s rules compiled ([`CompiledRules::compile`]), shared
    /// between unwinder generations.
    pub rules: Option<Arc<CompiledRules>>,
}

/// The per-stripe cache: framehop's rule cache, sized at creation and
/// never grown during an unwind.
pub type DwarfCache = FramehopCache<MustNotAllocateDuringUnwind>;

pub fn new_cache() -> Box<DwarfCache> {
    Box::new(DwarfCache::new_in())
}

#[derive(Clone, Default)]
pub struct DwarfUnwinder {
    inner: FramehopUnwinder<SectionData, MustNotAllocateDuringUnwind>,
    /// Modules with compiled rules, by runtime address.
    compiled: Vec<CompiledModule>,
}

#[derive(Clone)]
struct CompiledModule {
    avma: Range<u64>,
    bias: u64,
    rules: Arc<CompiledRules>,
}

impl DwarfUnwinder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a module (not signal-safe: allocates). A damaged
    /// `.eh_frame_hdr` (see [`sound_eh_frame_hdr`]) leaves the module's
    /// `.eh_frame` out with it, as a header that lies about its table is
    /// no index to trust: the module unwinds by frame pointers.
    pub fn add_module(&mut self, module: &DwarfModule) {
        let (eh_frame, eh_frame_hdr) = match (&module.eh_frame, &module.eh_frame_hdr) {
            (Some(eh_frame), Some(hdr)) if !sound_eh_frame_hdr(hdr, eh_frame) => (None, None),
            (eh_frame, hdr) => (eh_frame.as_ref(), hdr.as_ref()),
        };
        if let (Some(_), Some(rules)) = (eh_frame, &module.rules) {
            let at = self.compiled.partition_point(|m| m.avma.start < module.avma.start);
            let compiled = CompiledModule { avma: module.avma.clone(), bias: module.bias, rules: Arc::clone(rules) };
            self.compiled.insert(at, compiled);
        }
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: module.text_svma.clone(),
            eh_frame_svma: eh_frame.map(|(r, _)| r.clone()),
            eh_frame: eh_frame.map(|(_, d)| d.clone()),
            eh_frame_hdr_svma: eh_frame_hdr.map(|(r, _)| r.clone()),
            eh_frame_hdr: eh_frame_hdr.map(|(_, d)| d.clone()),
            debug_frame: module.debug_frame.clone(),
            got_svma: module.got_svma.clone(),
            ..Default::default()
        };
        self.inner.add_module(Module::new(module.name.clone(), module.avma.clone(), module.bias, info));
    }
}

/// Whether a `.eh_frame_hdr` parses and every entry of its lookup table
/// points into `.eh_frame`. The lookup (gimli's, inside framehop)
/// subtracts the `.eh_frame` address from an entry without a check, which
/// a damaged table overflows.
pub(crate) fn sound_eh_frame_hdr(hdr: &(Range<u64>, SectionData), eh_frame: &(Range<u64>, SectionData)) -> bool {
    let bases = BaseAddresses::default().set_eh_frame_hdr(hdr.0.start).set_eh_frame(eh_frame.0.start);
    let Ok(parsed) = EhFrameHdr::new(&hdr.1[..], NativeEndian).parse(&bases, std::mem::size_of::<usize>() as u8) else {
        return false;
    };
    let Ok(start) = parsed.eh_frame_ptr().direct() else { return false };
    let end = start.saturating_add(eh_frame.1.len() as u64);
    let Some(table) = parsed.table() else { return true };
    let mut entries = table.iter(&bases);
    loop {
        match entries.next() {
            Ok(Some((_, fde))) if fde.direct().is_ok_and(|at| (start..end).contains(&at)) => {}
            Ok(None) => return true,
            Ok(Some(_)) | Err(_) => return false,
        }
    }
}

impl DwarfUnwinder {
    /// A step by the compiled rule of the frame's module that reads its
    /// caller and moves up the stack; `None` otherwise (no rule here, a
    /// read refused, a return address of 0, no progress), where framehop
    /// takes the step and decides how it ends, as it would have alone.
    pub(crate) fn compiled_step(
        &self,
        kind: PcKind,
        regs: &mut Registers,
        stack: &mut dyn StackReader,
    ) -> Option<Result<bool, StepError>> {
        let address = kind.attribution(regs.pc);
        let module = &self.compiled[self.compiled.partition_point(|m| m.avma.start <= address).checked_sub(1)?];
        if !module.avma.contains(&address) {
            return None;
        }
        let rule = module.rules.lookup(address.wrapping_sub(module.bias))?;
        let interrupted = kind == PcKind::Interrupted;
        let caller = rule.caller(regs, interrupted, module.rules.ra_offset, stack).filter(|caller| caller.pc != 0)?;
        let more = check_progress(regs, &caller).ok()?;
        *regs = caller;
        Some(Ok(more))
    }
}

impl Unwinder for DwarfUnwinder {
    type Cache = DwarfCache;

    fn step(
        &self,
        kind: PcKind,
        regs: &mut Registers,
        cache: &mut DwarfCache,
        stack: &mut dyn StackReader,
    ) -> Result<bool, StepError> {
        if let Some(step) = self.compiled_step(kind, regs, stack) {
            return step;
        }
        let address = match kind {
            PcKind::Interrupted => FrameAddress::from_instruction_pointer(regs.pc),
            PcKind::ReturnAddress => FrameAddress::from_return_address(regs.pc).ok_or(StepError::NoProgress)?,
        };
        let mut framehop_regs = to_framehop(regs);
        let mut read = |address: u64| stack.read_u64(address).ok_or(());
        match self.inner.unwind_frame(address, &mut framehop_regs, cache, &mut read) {
            Ok(Some(return_address)) => {
                let caller = from_framehop(return_address, &framehop_regs);
                let more = check_progress(regs, &caller)?;
                *regs = caller;
                Ok(more)
            }
            Ok(None) => Ok(false),
            Err(framehop::Error::CouldNotReadStack(_)) => Err(StepError::ReadRefused),
            Err(framehop::Error::FramepointerUnwindingMovedBackwards) => Err(StepError::BadFramePointer),
            Err(framehop::Error::DidNotAdvance) => Err(StepError::NoProgress),
            Err(_) => Err(StepError::BadUnwindInfo),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::{Object, ObjectSection};

    fn section(file: &object::File<'_>, name: &str) -> (Range<u64>, SectionData) {
        let s = file.section_by_name(name).unwrap();
        (s.address()..s.address() + s.size(), SectionData::from(s.data().unwrap()))
    }

    #[test]
    fn a_sound_eh_frame_hdr_is_kept_and_a_damaged_table_is_not() {
        let bytes = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        let (hdr, eh_frame) = (section(&file, ".eh_frame_hdr"), section(&file, ".eh_frame"));
        assert!(sound_eh_frame_hdr(&hdr, &eh_frame));
        // The first entry's FDE pointer (after the 12-byte header and the
        // entry's initial location), moved before `.eh_frame`.
        let mut damaged = hdr.1.to_vec();
        damaged[16..20].copy_from_slice(&i32::MIN.to_le_bytes());
        assert!(!sound_eh_frame_hdr(&(hdr.0.clone(), SectionData::from(damaged)), &eh_frame));
        assert!(!sound_eh_frame_hdr(&(hdr.0, SectionData::from(&[1u8, 2][..])), &eh_frame));
    }
}
