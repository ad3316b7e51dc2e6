//! Memory the sampling path writes into: everything here is allocated
//! before sampling starts and is then used without allocation or blocking.

pub mod call_traces;
pub mod idle;
pub mod mapped;
pub mod samples;
pub mod thread_slots;
pub mod trace_storage;
