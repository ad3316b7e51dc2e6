//! No code: the ported suites live in `tests/compat/`, one module per
//! upstream suite (`<suite>::<case>`), indexed in this crate's README.
