//! Native stack unwinding for a signal handler, and [`arch`], the one home
//! of what differs between instruction sets.
//!
//! Every unwinder implements [`Unwinder::step`]: given the registers of one
//! frame, compute its caller's. Steps never allocate, never panic on bad
//! data, and read memory only through a [`StackReader`], which must refuse
//! (return `None` for) any address it cannot read without faulting.
//!
//! Addresses: the first frame's pc is the interrupted instruction; every
//! other frame's pc is a return address. The *attribution address* of a
//! frame (what symbolization must look up) is the pc itself for the first
//! frame and the return address minus one for the others, so a call that
//! is the last instruction of its function is attributed to that function.

pub mod arch;
pub mod dwarf;
pub mod fp;
pub mod rules;
pub mod sframe;

/// Reads the stack of the thread being unwound.
pub trait StackReader {
    /// The 8 bytes at `address`, or `None` if they cannot be read safely.
    fn read_u64(&mut self, address: u64) -> Option<u64>;
}

/// The registers an unwinding step needs (x86-64 names; on AArch64 `fp` is
/// x29 and `lr` the link register).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Registers {
    pub pc: u64,
    pub sp: u64,
    pub fp: u64,
    pub lr: u64,
}

/// Which kind of address a frame's pc is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PcKind {
    /// The interrupted instruction (first frame only).
    Interrupted,
    /// A return address read from the stack.
    ReturnAddress,
}

impl PcKind {
    /// The address symbolization should look up for `pc`.
    pub fn attribution(self, pc: u64) -> u64 {
        match self {
            PcKind::Interrupted => pc,
            PcKind::ReturnAddress => pc.saturating_sub(1),
        }
    }
}

/// Why a step could not produce the caller's frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepError {
    /// No unwind information covers the pc.
    NoUnwindInfo,
    /// A stack read was refused.
    ReadRefused,
    /// The frame pointer is misaligned, outside the stack or not increasing.
    BadFramePointer,
    /// The computed caller does not advance the stack.
    NoProgress,
    /// The unwind information is present but could not be used.
    BadUnwindInfo,
}

/// Largest distance between the stack pointer and a frame address that is
/// still believed to be on the same thread's stack.
pub const MAX_STACK_SPAN: u64 = 64 << 20;

/// One unwinding strategy.
pub trait Unwinder {
    /// Per-thread (here: per sampling stripe) mutable state, allocated
    /// before sampling starts.
    type Cache;

    /// Replaces `regs` (describing a frame whose pc is of kind `kind`) with
    /// the caller's registers. `Ok(false)` means the outermost frame was
    /// reached.
    fn step(
        &self,
        kind: PcKind,
        regs: &mut Registers,
        cache: &mut Self::Cache,
        stack: &mut dyn StackReader,
    ) -> Result<bool, StepError>;
}

/// Checks a caller frame computed by a step: it must have a pc and move
/// up the stack.
pub(crate) fn check_progress(old: &Registers, new: &Registers) -> Result<bool, StepError> {
    if new.pc == 0 {
        return Ok(false);
    }
    if new.sp <= old.sp || new.sp - old.sp > MAX_STACK_SPAN {
        return Err(StepError::NoProgress);
    }
    // A caller's stack pointer is at least word-aligned on every ABI we walk.
    if !new.sp.is_multiple_of(8) {
        return Err(StepError::NoProgress);
    }
    Ok(true)
}
