//! The frame as stored in a call trace: 16 bytes whose `method` and `bci`
//! mean what its kind says; the kinds, the bci sentinels, and the kind a
//! Java walker that reads HotSpot's structures reports.

use crate::marker::CallTraceError;

/// The bci of a frame of a Java `native` method (AsyncGetCallTrace's value,
/// which the HotSpot walker reports too).
pub const BCI_NATIVE_METHOD: i32 = -3;

/// The bci of a packed remote frame ([`FrameKind::RemoteNative`]).
pub const BCI_NATIVE_FRAME_REMOTE: i32 = -19;

/// What a stored frame's `method` and `bci` mean. Zero is [`FrameKind::Java`]
/// (a zeroed [`Frame`] is valid). Not the JFR frame type a reader sees
/// ([`crate::FrameType`]); `From<FrameKind> for FrameType` maps one to the
/// other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameKind {
    /// `method` is a jmethodID from AsyncGetCallTrace; `bci` its bytecode
    /// index, or [`BCI_NATIVE_METHOD`] for a Java `native` method.
    Java = 0,
    /// A marker for a sample whose stack could not be walked: `method` is
    /// a [`CallTraceError`] code.
    Error = 1,
    /// A native frame: `method` is its attribution address (the pc of the
    /// interrupted frame, return address minus one for the others).
    Native = 2,
    /// A native frame for remote symbolication: `method` is a packed
    /// [`crate::RemoteFrame`], `bci` is [`BCI_NATIVE_FRAME_REMOTE`].
    RemoteNative = 3,
    /// Java frames from the HotSpot walker, which knows how each runs;
    /// `method` and `bci` as for [`FrameKind::Java`] (which it uses for
    /// C2-compiled frames and `native` methods).
    Interpreted = 4,
    C1Compiled = 5,
    Inlined = 6,
    /// A kernel frame: `method` is its address, from the kernel's part of
    /// a perf_events call chain.
    Kernel = 7,
}

impl FrameKind {
    /// Whether `method` is a jmethodID.
    pub const fn is_java(self) -> bool {
        matches!(self, FrameKind::Java | FrameKind::Interpreted | FrameKind::C1Compiled | FrameKind::Inlined)
    }
}

/// How a Java frame runs, as a walker that reads HotSpot's structures
/// tells it (AsyncGetCallTrace does not: its frames are [`FrameKind::Java`]).
/// One byte, 0 a valid value: tables of frames may start as zeroed memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum JavaFrameKind {
    Interpreted = 0,
    C1Compiled,
    C2Compiled,
    Inlined,
    /// A Java `native` method (its compiled wrapper or interpreter entry).
    Native,
}

impl From<JavaFrameKind> for FrameKind {
    /// C2-compiled frames and `native` methods are stored as
    /// AsyncGetCallTrace's are: [`FrameKind::Java`] (a `native` method's bci
    /// says it is one).
    fn from(kind: JavaFrameKind) -> Self {
        match kind {
            JavaFrameKind::Interpreted => FrameKind::Interpreted,
            JavaFrameKind::C1Compiled => FrameKind::C1Compiled,
            JavaFrameKind::Inlined => FrameKind::Inlined,
            JavaFrameKind::C2Compiled | JavaFrameKind::Native => FrameKind::Java,
        }
    }
}

/// A stored frame. `repr(C)`, 16 bytes; all-zero bytes are a valid frame
/// (`Frame::java(0, 0)`, the default), so zeroed memory may hold frames.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    pub method: u64,
    pub bci: i32,
    pub kind: FrameKind,
}

impl Frame {
    /// A frame from AsyncGetCallTrace.
    pub const fn java(method: u64, bci: i32) -> Self {
        Self { method, bci, kind: FrameKind::Java }
    }

    /// A Java frame from a walker that tells how it runs; a `native`
    /// method's bci is [`BCI_NATIVE_METHOD`] whatever `bci` says.
    pub fn java_of_kind(method: u64, bci: i32, kind: JavaFrameKind) -> Self {
        let bci = if matches!(kind, JavaFrameKind::Native) { BCI_NATIVE_METHOD } else { bci };
        Self { method, bci, kind: FrameKind::from(kind) }
    }

    /// The marker of a stack that could not be walked.
    pub const fn error(error: CallTraceError) -> Self {
        Self { method: error.code() as u64, bci: 0, kind: FrameKind::Error }
    }

    pub const fn native(address: u64) -> Self {
        Self { method: address, bci: 0, kind: FrameKind::Native }
    }

    pub const fn kernel(address: u64) -> Self {
        Self { method: address, bci: 0, kind: FrameKind::Kernel }
    }

    /// A remote frame; `packed` is a [`crate::RemoteFrame::pack`] result.
    pub const fn remote(packed: u64) -> Self {
        Self { method: packed, bci: BCI_NATIVE_FRAME_REMOTE, kind: FrameKind::RemoteNative }
    }
}

impl Default for Frame {
    fn default() -> Self {
        Self::java(0, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JAVA_KINDS: [JavaFrameKind; 5] = [
        JavaFrameKind::Interpreted,
        JavaFrameKind::C1Compiled,
        JavaFrameKind::C2Compiled,
        JavaFrameKind::Inlined,
        JavaFrameKind::Native,
    ];

    #[test]
    fn layout_is_16_bytes_and_zero_is_the_default_frame() {
        assert_eq!(std::mem::size_of::<Frame>(), 16);
        assert_eq!(std::mem::align_of::<Frame>(), 8);
        assert_eq!(FrameKind::Java as u8, 0);
        // SAFETY: the test checks the contract that makes this sound: the
        // all-zero bytes are a valid `Frame` (kind 0 is `Java`).
        let zeroed: Frame = unsafe { std::mem::zeroed() };
        assert_eq!(zeroed, Frame::default());
    }

    #[test]
    fn walker_kinds_map_to_stored_kinds() {
        let stored = JAVA_KINDS.map(FrameKind::from);
        assert_eq!(
            stored,
            [FrameKind::Interpreted, FrameKind::C1Compiled, FrameKind::Java, FrameKind::Inlined, FrameKind::Java]
        );
        assert!(stored.iter().all(|k| k.is_java()));
        assert!(![FrameKind::Error, FrameKind::Native, FrameKind::RemoteNative, FrameKind::Kernel]
            .iter()
            .any(|k| k.is_java()));
    }

    #[test]
    fn java_frames_of_a_kind_keep_their_bci_unless_native() {
        for kind in JAVA_KINDS {
            let frame = Frame::java_of_kind(0x1234, 7, kind);
            assert_eq!((frame.method, frame.kind), (0x1234, FrameKind::from(kind)));
            let bci = if kind == JavaFrameKind::Native { BCI_NATIVE_METHOD } else { 7 };
            assert_eq!(frame.bci, bci, "{kind:?}");
        }
        assert_eq!(Frame::java_of_kind(1, BCI_NATIVE_METHOD, JavaFrameKind::Native), Frame::java(1, BCI_NATIVE_METHOD));
    }

    #[test]
    fn constructors_set_kind_and_sentinels() {
        assert_eq!(Frame::remote(5), Frame { method: 5, bci: BCI_NATIVE_FRAME_REMOTE, kind: FrameKind::RemoteNative });
        assert_eq!(Frame::native(9), Frame { method: 9, bci: 0, kind: FrameKind::Native });
        assert_eq!(Frame::kernel(9), Frame { method: 9, bci: 0, kind: FrameKind::Kernel });
        let error = Frame::error(CallTraceError::GcActive);
        assert_eq!((error.method as i64, error.kind), (-2, FrameKind::Error));
        assert_ne!(BCI_NATIVE_METHOD, BCI_NATIVE_FRAME_REMOTE);
    }
}
