//! Port of upstream `safefetch_ut` (see gtest-compat/README.md).
