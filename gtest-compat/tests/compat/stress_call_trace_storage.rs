//! Port of upstream `stress_callTraceStorage` (see gtest-compat/README.md).
