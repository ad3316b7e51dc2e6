//! Port of upstream `remotesymbolication_ut` (see gtest-compat/README.md).
