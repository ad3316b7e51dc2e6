//! Offline processing of recordings: reading our JFR files and turning
//! them into collapsed stacks and flame graphs.

pub mod collapsed;
pub mod flamegraph;
pub mod jfr;
pub mod profile;
