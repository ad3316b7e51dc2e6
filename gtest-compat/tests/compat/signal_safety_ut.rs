//! Port of upstream `signalSafety_ut` (see gtest-compat/README.md).
