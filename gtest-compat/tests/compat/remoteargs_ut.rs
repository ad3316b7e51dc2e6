//! Port of upstream `remoteargs_ut` (see gtest-compat/README.md).
//!
//! Upstream parses into a mutable `Arguments` object and checks its
//! `_remote_symbolication` field; ours is the pure `args::parse`, whose
//! typed `Options` carries `remote_symbolication`.

use profiler_agent::args::{self, CpuEngineKind, Options};
use std::time::Duration;

/// Parses `input`, failing the test with the parser's message on error.
fn parse_ok(input: &str) -> Options {
    args::parse(input).unwrap_or_else(|e| panic!("'{input}' was refused: {e}"))
}

fn remotesym(input: &str) -> bool {
    parse_ok(input).remote_symbolication
}

#[test]
fn default_remote_symbolication_disabled() {
    assert!(!Options::default().remote_symbolication);
    // An option string that does not mention it leaves it off too.
    assert!(!remotesym(""));
    assert!(!remotesym("start,cpu=10ms"));
}

#[test]
fn enable_remote_symbolication() {
    assert!(remotesym("remotesym=true"));
}

#[test]
fn enable_remote_symbolication_short() {
    assert!(remotesym("remotesym=y"));
}

#[test]
fn disable_remote_symbolication() {
    assert!(!remotesym("remotesym=false"));
}

#[test]
fn multiple_args_with_remote_symbolication() {
    let options = parse_ok("event=cpu,interval=1000000,remotesym=true");
    assert!(options.remote_symbolication);
    // `event=cpu` with a bare interval: the perf CPU engine at 1,000,000 ns.
    assert_eq!(options.cpu, Some((CpuEngineKind::PerfCpuClock, Duration::from_nanos(1_000_000))));
    assert_eq!(options.wall, None);
}

/// Upstream pairs `remotesym` with `lightweight=true`; we have no
/// `lightweight` option (the parser refuses it as unknown), so the same
/// contract (another boolean flag and `remotesym` both take effect) is
/// checked with our boolean `filter`, in both orders.
#[test]
fn remote_symbolication_with_other_flags() {
    for input in ["filter=true,remotesym=true", "remotesym=true,filter=true"] {
        let options = parse_ok(input);
        assert!(options.filter, "{input}");
        assert!(options.remote_symbolication, "{input}");
    }
    let options = parse_ok("filter=true,remotesym=false");
    assert!(options.filter && !options.remote_symbolication);
}

#[test]
fn remote_symbolication_no_value() {
    assert!(remotesym("remotesym"));
    assert!(remotesym("start,remotesym,cpu"));
}

#[test]
fn remote_symbolication_numeric_values() {
    assert!(remotesym("remotesym=1"));
    assert!(!remotesym("remotesym=0"));
}

#[test]
fn remote_symbolication_no_variant() {
    assert!(!remotesym("remotesym=no"));
    assert!(!remotesym("remotesym=n"));
}

/// Upstream accepts an unrecognised value and enables the option. We
/// refuse it with an error naming the accepted spellings (deliberately:
/// typed config with precise errors; `args` unit tests and the
/// `options` integration test assert the refusal).
#[test]
/// Upstream treats an unknown value as "on"; we refuse it with an error
/// naming the option and the accepted spellings (a bad option must never
/// silently change what is recorded).
fn remote_symbolication_invalid_value() {
    let error = profiler_agent::args::parse("remotesym=invalid").unwrap_err();
    assert_eq!(error.option, "remotesym");
    assert!(error.message.contains("true") && error.message.contains("false"), "{error}");
}
