//! Port of upstream `elfparser_ut` (see gtest-compat/README.md).
