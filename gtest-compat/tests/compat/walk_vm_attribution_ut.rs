//! Port of upstream `walkVmAttribution_ut` (see gtest-compat/README.md):
//! the native path of the HotSpot walk. Ours is the same native walker
//! every `cstack` mode uses (DWARF for `vm`/`vmx`), so the DWARF cases run
//! on framehop through the crafted `.eh_frame` of the `dwarf_ut` port.

use super::dwarf_ut::{cie, fde, probe, terminator, unwinder, Outcome, DW_CFA_DEF_CFA, FUNCTION};
use unwind::PcKind;

/// DWARF register numbers (x86-64 psABI).
const RBX: u8 = 3;

/// A caller read from a return slot is looked up one byte before the
/// return address (the call), the interrupted pc at itself: at a boundary
/// where B starts right after A ends, the return address names A.
#[test]
fn caller_frame_from_return_slot_attributes_to_the_caller() {
    let b_start = 0x2000u64;
    assert_eq!(PcKind::ReturnAddress.attribution(b_start), b_start - 1, "A's last byte");
    assert_eq!(PcKind::Interrupted.attribution(b_start), b_start, "B");
}

/// A CFA defined from a register the unwinder does not track (RBX) is not
/// followed: no frame is computed from it; the step falls back to the
/// frame-pointer rule.
#[test]
fn walk_dwarf_stops_on_an_unhandled_cfa_register() {
    let mut eh = Vec::new();
    let c = cie(&mut eh, 1, 16);
    fde(&mut eh, c, FUNCTION, &[DW_CFA_DEF_CFA, RBX, 16]);
    terminator(&mut eh);
    let outcome = probe(&unwinder(&eh, None), FUNCTION.start + 8);
    assert_eq!(outcome, Outcome::FramePointer);
}
