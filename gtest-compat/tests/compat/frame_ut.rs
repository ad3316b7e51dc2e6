//! Port of upstream `frame_ut` (see gtest-compat/README.md).
