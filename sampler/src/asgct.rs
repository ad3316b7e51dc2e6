//! AsyncGetCallTrace: HotSpot's signal-safe Java stack walker.

use jni_sys::{jint, jmethodID, JNIEnv};
use std::ffi::c_void;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct AsgctFrame {
    /// The bytecode index, or [`frames::BCI_NATIVE_METHOD`] for a `native`
    /// method.
    pub bci: jint,
    pub method: jmethodID,
}

#[repr(C)]
pub struct AsgctTrace {
    pub env: *mut JNIEnv,
    /// Frames written, or a negative [`frames::CallTraceError`] code.
    pub num_frames: jint,
    pub frames: *mut AsgctFrame,
}

pub type AsgctFn = unsafe extern "C" fn(trace: *mut AsgctTrace, depth: jint, ucontext: *mut c_void);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_layout_matches_asgct_call_frame() {
        assert_eq!(std::mem::size_of::<AsgctFrame>(), 16);
        assert_eq!(std::mem::size_of::<AsgctTrace>(), 24);
    }
}
