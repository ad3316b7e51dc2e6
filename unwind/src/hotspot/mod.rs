//! Walking Java frames from HotSpot's own structures (`cstack=vm`/`vmx`).
//!
//! At start the control plane reads libjvm's VMStructs tables
//! ([`tables`]) into a typed [`layout::VmLayout`] and the code cache's
//! addresses; in the signal handler [`walker::HotSpotWalker`] walks Java
//! frames with them, reading memory only through a [`memory::VmMemory`].

pub mod compressed;
pub mod layout;
pub mod memory;
pub mod tables;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod walker;

pub use walker::{
    Anchor, HotSpotWalker, JavaFrame, JavaFrameKind, MethodIds, SegmentEnd, VmFrame, WalkFailure, WalkMemo,
};

#[cfg(test)]
mod tests;
