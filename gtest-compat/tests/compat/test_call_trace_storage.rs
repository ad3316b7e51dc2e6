//! Port of upstream `test_callTraceStorage` (see gtest-compat/README.md).
