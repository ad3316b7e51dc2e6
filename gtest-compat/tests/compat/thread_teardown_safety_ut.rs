//! Port of upstream `thread_teardown_safety_ut` (see gtest-compat/README.md).
