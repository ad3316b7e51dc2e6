//! Port of upstream `stress_threadLifecycle` (see gtest-compat/README.md).
