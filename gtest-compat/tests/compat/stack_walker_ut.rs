//! Port of upstream `stackWalker_ut` (see gtest-compat/README.md).
