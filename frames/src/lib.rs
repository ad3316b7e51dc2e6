//! The frame vocabulary, defined once for everything that writes or reads
//! frames: the 16-byte frame stored in call traces, its kinds and the bci
//! sentinels ([`Frame`], [`FrameKind`], [`JavaFrameKind`]); the markers
//! that stand for what no method names ([`CallTraceError`], [`Marker`]);
//! the packing of native frames for remote symbolication ([`RemoteFrame`],
//! [`Mark`]); and the JFR frame types with the descriptions written into
//! recordings and parsed back from them ([`FrameType`]). The mappings
//! between kinds are `From` impls next to the types.
//!
//! Sampling writes these types inside signal handlers, so the crate is
//! `no_std`: nothing here allocates, blocks or panics.

#![cfg_attr(not(test), no_std)]

mod frame;
mod jfr;
mod marker;
mod remote;
mod thread_state;

pub use frame::{Frame, FrameKind, JavaFrameKind, BCI_NATIVE_FRAME_REMOTE, BCI_NATIVE_METHOD};
pub use jfr::{FrameType, NON_JAVA_DESCRIPTOR, NON_JAVA_POSITION};
pub use marker::{CallTraceError, Marker, UnknownNative};
pub use remote::{Mark, RemoteFrame, REMOTE_METHOD_NAME};
pub use thread_state::ThreadState;
