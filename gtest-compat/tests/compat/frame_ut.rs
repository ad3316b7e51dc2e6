//! Port of upstream `frame_ut` (see gtest-compat/README.md).
//!
//! Upstream packs a frame type into the bci (`FrameType::encode`: marker
//! bit 20, type in bits 21..23, bci masked to 16 bits, raw-pointer flag
//! bit 30) and decodes it at dump time; a value that never went through
//! `encode` (a raw AsyncGetCallTrace bci) decodes as JIT compiled. We
//! store the kind in its own field (`frames::Frame::kind`) next to
//! the whole bci, and name the JFR frame type at dump time
//! (`recording::frame_names::FrameNames`), where Java frames, whose type
//! AsyncGetCallTrace does not tell, are JIT compiled. The bit-layout cases
//! have no counterpart; the round-trip and decode contracts are checked
//! through the call-trace table and `FrameNames`.

use frames::{CallTraceError, Frame, FrameKind, FrameType, RemoteFrame, BCI_NATIVE_METHOD};
use jfr_writer::{ConstantPools, Dialect};
use profiler_agent::libraries::kernel::KernelNames;
use profiler_agent::recording::frame_names::FrameNames;
use profiler_agent::recording::methods::{MethodInfo, MethodSource};
use sampler::storage::call_traces::{CallTraceTable, TraceId};
use std::sync::atomic::AtomicU32;

/// Every method id resolves to the same plain (not `native`) Java method.
struct OneMethod(MethodInfo);

impl OneMethod {
    fn new() -> Self {
        OneMethod(MethodInfo {
            class_name: "com/example/Work".to_owned(),
            class_modifiers: 1,
            name: "run".to_owned(),
            signature: "()V".to_owned(),
            modifiers: 1,
            lines: Vec::new(),
        })
    }
}

impl MethodSource for OneMethod {
    fn method(&mut self, _id: u64) -> Option<&MethodInfo> {
        Some(&self.0)
    }
}

/// The JFR frame type `frame` is written with in the Datadog dialect (no
/// library table: native frames are then unknown, remote ones unresolved).
fn frame_type_of(frame: Frame) -> FrameType {
    let mut methods = OneMethod::new();
    let mut pools = ConstantPools::new();
    let mut kernel = KernelNames::default();
    FrameNames::new(&mut methods, None, &mut kernel, Dialect::Datadog).frame(&mut pools, &frame).frame_type
}

/// One frame of each kind, with bci `bci` where the kind has one.
fn one_of_each_kind(bci: i32) -> [Frame; 4] {
    let packed = RemoteFrame { offset: 0x40, mark: Default::default(), lib_index: 3 }.pack().unwrap();
    let mut frames = [
        Frame::java(0x7f00_1234, bci),
        Frame::error(CallTraceError::GcActive),
        Frame::native(0x5555_0000),
        Frame::remote(packed),
    ];
    for frame in &mut frames {
        if frame.kind != FrameKind::Java {
            // The kind, not the bci, says what a frame is: give every kind
            // the same bci so only `kind` can tell them apart.
            frame.bci = bci;
        }
    }
    frames
}

/// Stores `frames` as one trace and reads it back.
fn round_trip(frames: &[Frame]) -> Vec<Frame> {
    let table = CallTraceTable::new(64, 1024).unwrap();
    let ids = AtomicU32::new(TraceId::FIRST);
    let id = table.put(frames, false, &ids);
    assert_ne!(id, TraceId::DROPPED);
    let mut stored = Vec::new();
    table.for_each(|t| {
        assert_eq!(t.id, id);
        stored = t.frames.to_vec();
    });
    stored
}

const KINDS: [FrameKind; 4] = [FrameKind::Java, FrameKind::Error, FrameKind::Native, FrameKind::RemoteNative];

// ---- encode ------------------------------------------------------------

#[test]
fn encode_bci_stored_in_lower16_bits() {
    // Storing a frame keeps its bci (whole: we do not mask to 16 bits).
    let stored = round_trip(&[Frame::java(42, 0x1234)]);
    assert_eq!(stored[0].bci, 0x1234);
    assert_eq!(stored[0].kind, FrameKind::Java);
}

// ---- decode ------------------------------------------------------------

#[test]
fn decode_zero_returns_jit_compiled() {
    assert_eq!(frame_type_of(Frame::java(1, 0)), FrameType::JitCompiled);
    // The all-zero frame (what a zeroed slot holds) is a Java frame too.
    assert_eq!(Frame::default().kind, FrameKind::Java);
    assert_eq!(frame_type_of(Frame::default()), FrameType::JitCompiled);
}

#[test]
fn decode_negative_returns_jit_compiled() {
    for bci in [-1, i32::MIN, -100] {
        assert_eq!(frame_type_of(Frame::java(1, bci)), FrameType::JitCompiled, "bci {bci}");
    }
    // A Java frame whose bci equals the remote marker is still a Java
    // frame: only `kind` makes a frame remote.
    assert_eq!(frame_type_of(Frame::java(1, -19)), FrameType::JitCompiled);
    // The one negative bci with a meaning: AsyncGetCallTrace's marker for
    // frames of Java `native` methods.
    assert_eq!(frame_type_of(Frame::java(1, BCI_NATIVE_METHOD)), FrameType::Native);
}

#[test]
fn decode_unencoded_positive_returns_jit_compiled() {
    // Raw AsyncGetCallTrace bcis, including ones with the bits upstream
    // uses as its encoded marker (bit 20) and raw-pointer flag (bit 30).
    for bci in [1, 42, 0xffff, 1 << 20, 1 << 30, (1 << 30) | (1 << 20), i32::MAX] {
        assert_eq!(frame_type_of(Frame::java(1, bci)), FrameType::JitCompiled, "bci {bci:#x}");
    }
}

#[test]
fn round_trip_all_types_zero_bci() {
    let frames = one_of_each_kind(0);
    assert_eq!(round_trip(&frames), frames);
    assert_eq!(frames.map(|f| f.kind), KINDS);
}

#[test]
fn round_trip_all_types_non_zero_bci() {
    for bci in [1, 4, 7, 16, 20, 100, 1000, 0x8000, 0xffff] {
        let frames = one_of_each_kind(bci);
        let stored = round_trip(&frames);
        assert_eq!(stored, frames, "bci {bci}");
        assert_eq!(stored.iter().map(|f| f.kind).collect::<Vec<_>>(), KINDS, "bci {bci}");
    }

    // The kind is part of a trace's identity: frames that differ only in
    // kind are different traces, never merged.
    let table = CallTraceTable::new(64, 1024).unwrap();
    let ids = AtomicU32::new(TraceId::FIRST);
    let mut seen = Vec::new();
    for kind in KINDS {
        let id = table.put(&[Frame { method: 0x1234, bci: 7, kind }], false, &ids);
        assert!(!seen.contains(&id), "{kind:?} merged with another kind");
        seen.push(id);
    }
}

#[test]
fn decoded_type_is_in_valid_range() {
    let expected = [FrameType::JitCompiled, FrameType::Native, FrameType::Native, FrameType::RemoteNative];
    for (frame, expected) in one_of_each_kind(42).into_iter().zip(expected) {
        let frame_type = frame_type_of(frame);
        assert_eq!(frame_type, expected, "{:?}", frame.kind);
        // Its pool key is one the always-written frame-type pool defines.
        assert!(FrameType::ALL.iter().any(|t| t.key() == frame_type.key()), "{frame_type:?}");
    }
}
