//! Port of upstream `libraries_ut` (see gtest-compat/README.md).
