//! Port of upstream `ddprof_ut` (see gtest-compat/README.md).
