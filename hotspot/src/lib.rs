//! HotSpot's self-description and the walk of Java frames built on it
//! (`cstack=vm`/`vmx`). The only reader of VMStructs in the workspace.
//!
//! At start the control plane reads libjvm's VMStructs tables ([`tables`])
//! into a typed [`layout::VmLayout`] (JDK-version differences are decided
//! there, once) and the code cache's addresses; in the signal handler
//! [`JavaSegmentWalker`] walks Java frames with them, composing the code cache
//! ([`code_cache`]), nmethods' debug information ([`debug_info`]) and
//! methods ([`methods`]), remembering decoded return sites and jmethodIDs
//! across samples ([`memo`]), reading what the x86-64 code at an
//! interrupted pc says of its frame (`frame_state`: a prologue or epilogue
//! half done; `sp_scan`, over the length decoder `x86_insn`: words the
//! code pushed in the body), and reading memory only through a
//! [`memory::VmMemory`]. Module dependencies go one way: `memory` and
//! `tables` at the bottom, `compressed` over `memory`, `layout` over those
//! three and `unwind::arch` (frame-layout constants), `x86_insn` alone,
//! the walker's parts over `layout` (`sp_scan` over `memory` and
//! `x86_insn`), `memo` over `methods` and `java_frame`, `walker` on top.

pub mod code_cache;
pub mod compressed;
pub mod debug_info;
mod frame_state;
pub mod java_frame;
pub mod layout;
pub mod memo;
pub mod memory;
pub mod methods;
pub mod os_thread;
mod sp_scan;
pub mod tables;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod walker;
mod x86_insn;

pub use java_frame::JavaFrame;
pub use memo::{WalkCache, WalkMemo};
pub use methods::NO_JMETHOD_ID;
pub use walker::{Anchor, JavaSegmentWalker, SegmentEnd, VmFrame, WalkFailure};

#[cfg(test)]
mod tests;
