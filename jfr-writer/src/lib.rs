//! Java Flight Recorder chunk encoding.
//!
//! The crate turns typed events and constant-pool entries into the bytes of
//! a self-contained JFR chunk. It performs no I/O and has no policy about
//! when chunks start or end: callers decide where the bytes go. Frame
//! types are the `frames` crate's [`frames::FrameType`].
#![forbid(unsafe_code)]

pub mod buffer;
pub mod chunk;
pub mod events;
pub mod metadata;
pub mod pools;
pub mod schema;

pub use chunk::{ChunkClock, ChunkEnd, ChunkWriter};
pub use events::{ActiveSetting, Endpoint, Event, NativeLibrary, ProfilerCounter, Sample, SampleKind};
pub use pools::{ClassId, ConstantPools, FrameDef, MethodDef, MethodId, SymbolId, ThreadDef};
pub use schema::{Dialect, ThreadState};
