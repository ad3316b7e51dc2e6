//! Port of upstream `refCountGuard_ut` (see gtest-compat/README.md).
