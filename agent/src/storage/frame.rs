//! The frame as stored in a call trace: 16 bytes, interpreted by `kind`.

use super::mapped::Zeroable;

/// What a stored frame's `method` and `bci` mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameKind {
    /// `method` is a jmethodID from AsyncGetCallTrace; `bci` its bytecode
    /// index, or [`BCI_NATIVE_METHOD`] for a Java `native` method.
    Java = 0,
    /// A marker for a sample whose stack could not be walked: `method` is
    /// an [`crate::sampling::asgct::CallTraceError`] code.
    Error = 1,
    /// A native frame: `method` is its attribution address (the pc of the
    /// interrupted frame, return address minus one for the others).
    Native = 2,
    /// A native frame for remote symbolication: `method` is a packed
    /// [`crate::sampling::remote::RemoteFrame`], `bci` the remote marker.
    RemoteNative = 3,
    /// Java frames from the HotSpot walker, which knows how each runs;
    /// `method` and `bci` as for [`FrameKind::Java`] (which it uses for
    /// C2-compiled frames and `native` methods).
    Interpreted = 4,
    C1Compiled = 5,
    Inlined = 6,
}

impl FrameKind {
    /// Whether `method` is a jmethodID.
    pub fn is_java(self) -> bool {
        matches!(self, FrameKind::Java | FrameKind::Interpreted | FrameKind::C1Compiled | FrameKind::Inlined)
    }
}

/// AsyncGetCallTrace's bci for frames of `native` Java methods.
pub const BCI_NATIVE_METHOD: i32 = -3;

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    pub method: u64,
    pub bci: i32,
    pub kind: FrameKind,
}

impl Frame {
    pub const fn java(method: u64, bci: i32) -> Self {
        Self { method, bci, kind: FrameKind::Java }
    }

    /// A Java frame of a given kind (one of those [`FrameKind::is_java`]
    /// accepts).
    pub const fn java_of_kind(method: u64, bci: i32, kind: FrameKind) -> Self {
        Self { method, bci, kind }
    }

    pub const fn error(code: u64) -> Self {
        Self { method: code, bci: 0, kind: FrameKind::Error }
    }

    pub const fn native(address: u64) -> Self {
        Self { method: address, bci: 0, kind: FrameKind::Native }
    }

    pub const fn remote(packed: u64) -> Self {
        Self { method: packed, bci: crate::sampling::remote::BCI_NATIVE_FRAME_REMOTE, kind: FrameKind::RemoteNative }
    }
}

impl Default for Frame {
    fn default() -> Self {
        Self::java(0, 0)
    }
}

// SAFETY: all-zero is `Frame { method: 0, bci: 0, kind: Java }`.
unsafe impl Zeroable for Frame {}
