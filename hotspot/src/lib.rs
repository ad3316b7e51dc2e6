//! Walking Java frames from HotSpot's own structures (`cstack=vm`/`vmx`).
//!
//! At start the control plane reads libjvm's VMStructs tables
//! ([`tables`]) into a typed [`layout::VmLayout`] and the code cache's
//! addresses; in the signal handler [`walker::HotSpotWalker`] walks Java
//! frames with them, reading memory only through a [`memory::VmMemory`].

mod code_cache;
pub mod compressed;
mod debug_info;
mod frame_state;
pub mod layout;
pub mod memory;
mod methods;
pub mod tables;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod walker;

pub use methods::{MethodIds, NO_JMETHOD_ID};
pub use walker::{Anchor, HotSpotWalker, JavaFrame, JavaFrameKind, SegmentEnd, VmFrame, WalkFailure, WalkMemo};

#[cfg(test)]
mod tests;
