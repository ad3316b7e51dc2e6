//! Port of upstream `hotspotMethodId_ut` (see gtest-compat/README.md).
//!
//! The `Id*` cases: a `Method*` is named by the jmethodID its holder keeps
//! (`Method → ConstMethod → ConstantPool → pool holder →
//! _methods_jmethod_ids`, whose slot 0 is the length and slot idnum + 1 the
//! id). Checked on `MethodReader::jmethod_id` over the synthetic VM of
//! `hotspot::testing` (methods A, B, C with idnums 0, 1, 2). The
//! null id is `NO_JMETHOD_ID`: a real method without an id (the walk
//! reports it without a method and goes on); `None` is kept for pointers
//! that do not lead to a method.

use hotspot::testing::*;
use hotspot::NO_JMETHOD_ID;

/// Where the holder keeps its jmethodID cache.
fn cache_slot() -> u64 {
    HOLDER + layout().methods.klass_jmethod_ids.offset
}

#[test]
fn id_returns_nullptr_for_unprimed_cache() {
    let (mut m, methods) = vm();
    m.put_u64(cache_slot(), 0);
    assert_eq!(method_reader().jmethod_id(&m, methods.a), Some(NO_JMETHOD_ID));
}

#[test]
fn id_returns_nullptr_for_shrunk_cache() {
    let (mut m, methods) = vm();
    m.put_u64(IDS, 1);
    assert_eq!(method_reader().jmethod_id(&m, methods.c), Some(NO_JMETHOD_ID), "idnum 2 with length 1");
    assert_eq!(method_reader().jmethod_id(&m, methods.a), Some(jmethod_id(0)), "idnum 0 is still inside");
}

#[test]
fn id_returns_null_for_empty_slot() {
    let (mut m, methods) = vm();
    m.put_u64(IDS, 2);
    m.put_u64(IDS + 8, 0);
    assert_eq!(method_reader().jmethod_id(&m, methods.a), Some(NO_JMETHOD_ID));
}

#[test]
fn id_returns_valid_id_for_populated_slot() {
    let (m, methods) = vm();
    assert_eq!(method_reader().jmethod_id(&m, methods.b), Some(jmethod_id(1)), "idnum 1, length 3: slot 2");
}
