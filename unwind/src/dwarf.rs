//! DWARF CFI unwinding (`.eh_frame`, `.eh_frame_hdr`, `.debug_frame`)
//! through framehop, with its allocation-free cache policy. Addresses not
//! covered by any module fall back to frame pointers inside framehop.

use crate::arch::{from_framehop, to_framehop, FramehopCache, FramehopUnwinder};
use crate::{check_progress, PcKind, Registers, StackReader, StepError, Unwinder};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, MustNotAllocateDuringUnwind, Unwinder as _};
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
}

impl DwarfUnwinder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a module (not signal-safe: allocates).
    pub fn add_module(&mut self, module: &DwarfModule) {
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: module.text_svma.clone(),
            eh_frame_svma: module.eh_frame.as_ref().map(|(r, _)| r.clone()),
            eh_frame: module.eh_frame.as_ref().map(|(_, d)| d.clone()),
            eh_frame_hdr_svma: module.eh_frame_hdr.as_ref().map(|(r, _)| r.clone()),
            eh_frame_hdr: module.eh_frame_hdr.as_ref().map(|(_, d)| d.clone()),
            debug_frame: module.debug_frame.clone(),
            got_svma: module.got_svma.clone(),
            ..Default::default()
        };
        self.inner.add_module(Module::new(module.name.clone(), module.avma.clone(), module.bias, info));
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
