//! Frame-pointer unwinding (x86-64 and AArch64 frame records): each frame
//! stores the caller's frame pointer at `[fp]` and the return address at
//! `[fp + 8]`.
//!
//! Validation: the frame pointer must be 8-aligned, lie at or above the
//! stack pointer and within [`MAX_STACK_SPAN`] of it, and strictly increase
//! from frame to frame.

use crate::{check_progress, PcKind, Registers, StackReader, StepError, Unwinder, MAX_STACK_SPAN};

#[derive(Clone, Copy, Debug, Default)]
pub struct FramePointerUnwinder;

impl FramePointerUnwinder {
    /// One frame-pointer step, also used as the fallback of other unwinders.
    pub fn step_fp(regs: &mut Registers, stack: &mut dyn StackReader) -> Result<bool, StepError> {
        let fp = regs.fp;
        if fp == 0 {
            return Ok(false);
        }
        if !fp.is_multiple_of(8) || fp < regs.sp || fp - regs.sp > MAX_STACK_SPAN {
            return Err(StepError::BadFramePointer);
        }
        // The frame record and the caller's sp above it must not wrap.
        let caller_sp = fp.checked_add(16).ok_or(StepError::BadFramePointer)?;
        let caller_fp = stack.read_u64(fp).ok_or(StepError::ReadRefused)?;
        let return_address = stack.read_u64(fp + 8).ok_or(StepError::ReadRefused)?;
        let caller = Registers { pc: return_address, sp: caller_sp, fp: caller_fp, lr: 0 };
        if caller_fp != 0 && caller_fp <= fp {
            return Err(StepError::BadFramePointer);
        }
        let more = check_progress(regs, &caller)?;
        *regs = caller;
        Ok(more)
    }
}

impl Unwinder for FramePointerUnwinder {
    type Cache = ();

    fn step(
        &self,
        _kind: PcKind,
        regs: &mut Registers,
        _cache: &mut (),
        stack: &mut dyn StackReader,
    ) -> Result<bool, StepError> {
        Self::step_fp(regs, stack)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    pub(crate) struct FakeStack(pub HashMap<u64, u64>);

    impl StackReader for FakeStack {
        fn read_u64(&mut self, address: u64) -> Option<u64> {
            self.0.get(&address).copied()
        }
    }

    #[test]
    fn walks_a_chain_of_frame_records() {
        let mut stack = FakeStack(HashMap::from([
            (0x1000, 0x1040), // frame A: caller fp
            (0x1008, 0xaaaa), // return into B
            (0x1040, 0x1100),
            (0x1048, 0xbbbb),
            (0x1100, 0),
            (0x1108, 0xcccc),
        ]));
        let mut regs = Registers { pc: 0x9999, sp: 0x0ff0, fp: 0x1000, lr: 0 };
        let mut pcs = vec![regs.pc];
        while FramePointerUnwinder.step(PcKind::ReturnAddress, &mut regs, &mut (), &mut stack).unwrap() {
            pcs.push(regs.pc);
            if regs.fp == 0 {
                break;
            }
        }
        assert_eq!(pcs, vec![0x9999, 0xaaaa, 0xbbbb, 0xcccc]);
    }

    #[test]
    fn rejects_bad_frame_pointers() {
        let mut stack = FakeStack(HashMap::from([(0x1000, 0x0800), (0x1008, 0xaaaa)]));
        let mut regs = Registers { pc: 1, sp: 0x0ff0, fp: 0x1000, lr: 0 };
        assert_eq!(FramePointerUnwinder::step_fp(&mut regs, &mut stack), Err(StepError::BadFramePointer), "decreasing");
        let mut regs = Registers { pc: 1, sp: 0x0ff0, fp: 0x1004, lr: 0 };
        assert_eq!(FramePointerUnwinder::step_fp(&mut regs, &mut stack), Err(StepError::BadFramePointer), "misaligned");
        let mut regs = Registers { pc: 1, sp: 0x2000, fp: 0x1000, lr: 0 };
        assert_eq!(FramePointerUnwinder::step_fp(&mut regs, &mut stack), Err(StepError::BadFramePointer), "below sp");
        let mut regs = Registers { pc: 1, sp: 0x0ff0, fp: 0x5000, lr: 0 };
        assert_eq!(FramePointerUnwinder::step_fp(&mut regs, &mut stack), Err(StepError::ReadRefused));
    }
}
