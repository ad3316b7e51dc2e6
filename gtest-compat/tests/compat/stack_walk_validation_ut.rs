//! Port of upstream `stackWalkValidation_ut` (see gtest-compat/README.md).
//!
//! Upstream checks addresses with small helpers before following them (a
//! dead zone at both ends of the address space, word alignment, "same
//! stack", a rising frame-pointer chain). Ours apply the same rules where
//! addresses are followed: `safe_load` refuses the first page and
//! misaligned addresses without reading; the frame-pointer step
//! (`FramePointerUnwinder::step_fp`) ends at a null frame pointer, refuses
//! a misaligned one, one below the stack pointer or more than
//! `MAX_STACK_SPAN` above it, and a caller frame pointer that does not
//! rise. (The HotSpot walker checks interpreted frame pointers and every
//! step's progress by the same rules.)

use super::sframe_ut::MapStack;
use sampler::safe_read::safe_load;
use unwind::fp::FramePointerUnwinder;
use unwind::{Registers, StepError, MAX_STACK_SPAN};

const RA: u64 = 0x4242;

/// One frame-pointer step from (sp, fp) over `stack`.
fn step(sp: u64, fp: u64, stack: &mut MapStack) -> Result<bool, StepError> {
    let mut regs = Registers { pc: 0x1234, sp, fp, lr: 0 };
    FramePointerUnwinder::step_fp(&mut regs, stack)
}

/// A frame record at `fp` whose caller's frame pointer is `caller_fp`.
fn record(fp: u64, caller_fp: u64) -> MapStack {
    MapStack { values: [(fp, caller_fp), (fp + 8, RA)].into(), reads: Vec::new() }
}

#[test]
fn in_dead_zone_null_pointer() {
    assert_eq!(safe_load(0), None);
    assert_eq!(step(0x1000, 0, &mut MapStack::default()), Ok(false), "a null frame pointer ends the walk");
}

#[test]
fn in_dead_zone_low_address() {
    for address in [0x100, 0xff8] {
        assert_eq!(safe_load(address), None, "{address:#x}");
    }
}

#[test]
fn in_dead_zone_valid_address() {
    for fp in [0x1000u64, 0x10000] {
        assert_eq!(step(fp - 0x100, fp, &mut record(fp, fp + 0x100)), Ok(true), "{fp:#x} is followed");
    }
}

#[test]
fn in_dead_zone_high_address() {
    // Aligned, readable frame pointers whose frame record would wrap past
    // the top of the address space.
    for fp in [u64::MAX - 7, u64::MAX - 15] {
        let mut stack = MapStack { values: [(fp, 0)].into(), reads: Vec::new() };
        assert_eq!(step(fp - 0x1000, fp, &mut stack), Err(StepError::BadFramePointer), "{fp:#x}");
    }
}

#[test]
fn aligned_word_aligned() {
    for fp in [0x1000u64, 0x1008, 0x7fff_0000_0000] {
        assert_eq!(step(fp - 0x100, fp, &mut record(fp, fp + 0x100)), Ok(true), "{fp:#x}");
    }
}

#[test]
fn aligned_not_aligned() {
    let base = 0x7fff_0000_0000u64;
    for fp in [base + 1, base + 2, base + 4, base + 7] {
        assert_eq!(step(base - 0x100, fp, &mut record(fp, fp + 0x100)), Err(StepError::BadFramePointer), "{fp:#x}");
    }
    // Readable memory, read misaligned: refused without reading.
    let words = [0x1111_2222_3333_4444u64; 2];
    let mapped = words.as_ptr() as u64;
    assert_eq!(safe_load(mapped), Some(words[0]));
    for offset in [1, 2, 4, 7] {
        assert_eq!(safe_load(mapped + offset), None, "{offset}: misaligned reads are refused");
    }
}

/// "Same stack" is a frame address at or above the stack pointer and at
/// most `MAX_STACK_SPAN` (64 MiB) above it.
#[test]
fn same_stack_same_location() {
    let sp = 0x7ffd_0000_0000u64;
    assert_eq!(step(sp, sp, &mut record(sp, sp + 0x100)), Ok(true));
}

#[test]
fn same_stack_nearby_locations() {
    let sp = 0x7ffd_0000_0000u64;
    let fp = sp + 4088;
    assert_eq!(step(sp, fp, &mut record(fp, fp + 0x100)), Ok(true));
}

/// Upstream's bound is 64 KiB; ours is `MAX_STACK_SPAN`, since Java threads
/// run deep stacks (a 400-frame recursion passes 64 KiB).
#[test]
fn same_stack_far_apart() {
    let sp = 0x7ffd_0000_0000u64;
    let near = sp + 64 * 1024;
    assert_eq!(step(sp, near, &mut record(near, near + 0x100)), Ok(true), "64 KiB up is still this stack");
    let far = sp + MAX_STACK_SPAN + 8;
    assert_eq!(step(sp, far, &mut record(far, far + 0x100)), Err(StepError::BadFramePointer));
}

#[test]
fn fp_chain_progression_valid_chain() {
    let base = 0x7ffd_0000_0000u64;
    let mut stack = MapStack {
        values: [
            (base, base + 0x40),
            (base + 8, RA),
            (base + 0x40, base + 0x100),
            (base + 0x48, RA),
            (base + 0x100, 0),
            (base + 0x108, RA),
        ]
        .into(),
        reads: Vec::new(),
    };
    let mut regs = Registers { pc: 0x1234, sp: base - 0x20, fp: base, lr: 0 };
    let mut fps = vec![regs.fp];
    while regs.fp != 0 {
        assert_eq!(FramePointerUnwinder::step_fp(&mut regs, &mut stack), Ok(true));
        fps.push(regs.fp);
    }
    assert_eq!(fps, [base, base + 0x40, base + 0x100, 0], "rising, then 0 ends the chain");
}

#[test]
fn fp_chain_progression_backwards_chain() {
    let fp = 0x7ffd_0000_1000u64;
    assert_eq!(step(fp - 0x100, fp, &mut record(fp, fp - 0x40)), Err(StepError::BadFramePointer));
}

#[test]
fn fp_chain_progression_same_address() {
    let fp = 0x7ffd_0000_1000u64;
    assert_eq!(step(fp - 0x100, fp, &mut record(fp, fp)), Err(StepError::BadFramePointer));
}
