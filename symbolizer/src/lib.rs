//! Offline processing of recordings: reading our JFR files, resolving
//! remote native frames from debug files found by build-id, keeping the
//! native allocations never freed (`leaks`), and writing collapsed stacks,
//! flame graphs (differential ones too), timelines, pprof profiles, OTLP
//! profiles (`otlp`) and JFR copies.

pub mod collapsed;
pub mod debuginfo;
pub mod debuginfod;
pub mod events;
pub mod flamegraph;
pub mod jfr_in;
pub mod jfr_out;
pub mod leaks;
pub mod otlp;
pub mod pprof;
pub mod profile;
pub mod recording;
pub mod report;
pub mod resolve;
pub mod symbols;
#[cfg(test)]
mod testing;
pub mod timeline;
