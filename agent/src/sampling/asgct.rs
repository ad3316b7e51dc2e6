//! AsyncGetCallTrace: HotSpot's signal-safe Java stack walker.

use jni::sys::{jint, jmethodID, JNIEnv};
use std::ffi::c_void;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct AsgctFrame {
    /// The bytecode index, or -3 for a `native` method.
    pub bci: jint,
    pub method: jmethodID,
}

#[repr(C)]
pub struct AsgctTrace {
    pub env: *mut JNIEnv,
    /// Frames written, or a negative [`CallTraceError`] code.
    pub num_frames: jint,
    pub frames: *mut AsgctFrame,
}

pub type AsgctFn = unsafe extern "C" fn(trace: *mut AsgctTrace, depth: jint, ucontext: *mut c_void);

/// Why a stack could not be walked: AsyncGetCallTrace's codes (`forte.cpp`)
/// plus our own for threads it cannot be called on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallTraceError {
    NoJavaFrame,
    NoClassLoad,
    GcActive,
    UnknownNotJava,
    NotWalkableNotJava,
    UnknownJava,
    NotWalkableJava,
    UnknownState,
    ThreadExit,
    Deopt,
    Safepoint,
    /// Not attached to the JVM (a GC, compiler or native thread).
    NotJavaThread,
    /// AsyncGetCallTrace is not available.
    NoWalker,
    Other,
}

impl CallTraceError {
    pub fn from_code(code: i64) -> Self {
        match code {
            0 => Self::NoJavaFrame,
            -1 => Self::NoClassLoad,
            -2 => Self::GcActive,
            -3 => Self::UnknownNotJava,
            -4 => Self::NotWalkableNotJava,
            -5 => Self::UnknownJava,
            -6 => Self::NotWalkableJava,
            -7 => Self::UnknownState,
            -8 => Self::ThreadExit,
            -9 => Self::Deopt,
            -10 => Self::Safepoint,
            -100 => Self::NotJavaThread,
            -101 => Self::NoWalker,
            _ => Self::Other,
        }
    }

    pub fn code(self) -> i64 {
        match self {
            Self::NoJavaFrame => 0,
            Self::NoClassLoad => -1,
            Self::GcActive => -2,
            Self::UnknownNotJava => -3,
            Self::NotWalkableNotJava => -4,
            Self::UnknownJava => -5,
            Self::NotWalkableJava => -6,
            Self::UnknownState => -7,
            Self::ThreadExit => -8,
            Self::Deopt => -9,
            Self::Safepoint => -10,
            Self::NotJavaThread => -100,
            Self::NoWalker => -101,
            Self::Other => -102,
        }
    }

    /// The frame name shown for such samples.
    pub fn frame_name(self) -> &'static str {
        match self {
            Self::NoJavaFrame => "[no_Java_frame]",
            Self::NoClassLoad => "[no_class_load]",
            Self::GcActive => "[GC_active]",
            Self::UnknownNotJava => "[unknown_not_Java]",
            Self::NotWalkableNotJava => "[not_walkable_not_Java]",
            Self::UnknownJava => "[unknown_Java]",
            Self::NotWalkableJava => "[not_walkable_Java]",
            Self::UnknownState => "[unknown_state]",
            Self::ThreadExit => "[thread_exit]",
            Self::Deopt => "[deoptimization]",
            Self::Safepoint => "[safepoint]",
            Self::NotJavaThread => "[not_Java_thread]",
            Self::NoWalker => "[no_stack_walker]",
            Self::Other => "[unknown]",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for code in [0, -1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -100, -101] {
            assert_eq!(CallTraceError::from_code(code).code(), code);
        }
        assert_eq!(CallTraceError::from_code(-55), CallTraceError::Other);
    }

    #[test]
    fn frame_layout_matches_asgct_call_frame() {
        assert_eq!(std::mem::size_of::<AsgctFrame>(), 16);
        assert_eq!(std::mem::size_of::<AsgctTrace>(), 24);
    }
}
