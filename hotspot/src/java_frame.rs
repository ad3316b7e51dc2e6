//! A Java frame as the walker reports it.

use frames::JavaFrameKind;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JavaFrame {
    /// The method's jmethodID.
    pub method: u64,
    pub bci: i32,
    pub kind: JavaFrameKind,
}

impl JavaFrame {
    /// All zero bits (`JavaFrameKind::Interpreted` is 0).
    pub(crate) const EMPTY: JavaFrame = JavaFrame { method: 0, bci: 0, kind: JavaFrameKind::Interpreted };
}
