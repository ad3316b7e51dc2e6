//! Port of upstream `remoteargs_ut` (see gtest-compat/README.md).
