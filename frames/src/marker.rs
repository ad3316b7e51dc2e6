//! Markers: frames that name no method but say what stands there. A
//! stack that could not be walked is stored as one [`FrameKind::Error`]
//! frame holding a [`CallTraceError`] code; the recording writes a
//! [`Marker`] or an [`UnknownNative`] name for what it cannot resolve.
//!
//! [`FrameKind::Error`]: crate::FrameKind::Error

use core::fmt;

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
    /// The root of a stack cut at the depth limit (`jstackdepth`): the
    /// frames beyond it are not recorded.
    Truncated,
    Other,
}

impl CallTraceError {
    pub const ALL: [Self; 15] = [
        Self::NoJavaFrame,
        Self::NoClassLoad,
        Self::GcActive,
        Self::UnknownNotJava,
        Self::NotWalkableNotJava,
        Self::UnknownJava,
        Self::NotWalkableJava,
        Self::UnknownState,
        Self::ThreadExit,
        Self::Deopt,
        Self::Safepoint,
        Self::NotJavaThread,
        Self::NoWalker,
        Self::Truncated,
        Self::Other,
    ];

    pub const fn from_code(code: i64) -> Self {
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
            -103 => Self::Truncated,
            _ => Self::Other,
        }
    }

    pub const fn code(self) -> i64 {
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
            Self::Truncated => -103,
        }
    }

    /// The frame name written for such samples.
    pub const fn name(self) -> &'static str {
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
            Self::Truncated => "[truncated]",
            Self::Other => "[unknown]",
        }
    }

    /// The error a frame of this name marks (a reader's view of a stack's
    /// root: walked to its end, or cut and saying why).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|error| error.name() == name)
    }
}

/// Frames the recording writes where a stored trace or frame names
/// nothing it can resolve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    /// A sample whose trace did not fit in the call-trace storage.
    StorageFull,
    /// A trace id with no stored trace (still being published).
    TraceUnavailable,
    /// A remote frame whose library has no build-id.
    UnknownLibrary,
    /// A Java frame whose method had no jmethodID when it was sampled.
    UnknownJavaMethod,
    /// A jmethodID JVMTI no longer knows: its class was unloaded.
    UnloadedJavaMethod,
}

impl Marker {
    pub const fn name(self) -> &'static str {
        match self {
            Self::StorageFull => "[storage_full]",
            Self::TraceUnavailable => "[trace_unavailable]",
            Self::UnknownLibrary => "[unknown_library]",
            Self::UnknownJavaMethod => "[unknown_Java_method]",
            Self::UnloadedJavaMethod => "[unloaded_Java_method]",
        }
    }
}

/// The name of a native frame at an address no library covers:
/// `[unknown+0x…]`, displayed through `fmt::Display`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownNative(pub u64);

impl UnknownNative {
    /// How every such name starts (what readers look for).
    pub const PREFIX: &'static str = "[unknown+";
}

impl fmt::Display for UnknownNative {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{:#x}]", Self::PREFIX, self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_round_trip() {
        for error in CallTraceError::ALL {
            assert_eq!(CallTraceError::from_code(error.code()), error);
            assert_eq!(CallTraceError::from_name(error.name()), Some(error));
        }
        assert_eq!(CallTraceError::from_name("[unknown+0x10]"), None);
        assert_eq!(CallTraceError::from_code(-55), CallTraceError::Other);
    }

    #[test]
    fn marker_names_are_bracketed_and_distinct() {
        let names = [
            Marker::StorageFull,
            Marker::TraceUnavailable,
            Marker::UnknownLibrary,
            Marker::UnknownJavaMethod,
            Marker::UnloadedJavaMethod,
        ]
        .map(Marker::name);
        let errors = CallTraceError::ALL.map(CallTraceError::name);
        let all: Vec<&str> = names.iter().chain(&errors).copied().collect();
        for (i, name) in all.iter().enumerate() {
            assert!(name.starts_with('[') && name.ends_with(']'), "{name}");
            assert!(!all[..i].contains(name), "{name} twice");
        }
    }

    #[test]
    fn unknown_native_names_start_with_the_prefix() {
        let name = UnknownNative(0x7f00_1234).to_string();
        assert_eq!(name, "[unknown+0x7f001234]");
        assert!(name.starts_with(UnknownNative::PREFIX));
        // `[unknown]` (CallTraceError::Other) is not an unknown native name.
        assert!(!CallTraceError::Other.name().starts_with(UnknownNative::PREFIX));
    }
}
