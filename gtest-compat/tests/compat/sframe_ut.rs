//! Port of upstream `sframe_ut` (see gtest-compat/README.md).
