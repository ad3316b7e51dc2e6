//! Port of upstream `dictionary_ut` (see gtest-compat/README.md).
