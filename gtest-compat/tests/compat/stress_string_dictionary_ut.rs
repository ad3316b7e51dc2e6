//! Port of upstream `stress_stringDictionary_ut` (see gtest-compat/README.md).
