//! Port of upstream `stringDictionary_ut` (see gtest-compat/README.md).
