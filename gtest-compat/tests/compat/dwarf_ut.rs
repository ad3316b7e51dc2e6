//! Port of upstream `dwarf_ut` (see gtest-compat/README.md).
