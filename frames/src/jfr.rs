//! The JFR frame types (`jdk.types.FrameType`): the descriptions the
//! recording writes and the symbolizer parses back, from one table.

use crate::frame::FrameKind;

/// The descriptor of a frame that is not a Java method (a native function,
/// a marker): no Java method has it, since `L;` names no class.
pub const NON_JAVA_DESCRIPTOR: &str = "()L;";

/// The line number and bytecode index of a frame that is not a Java
/// method's, as async-profiler writes them: 0, one varint byte each (-1,
/// a 32-bit all-ones, takes five). Readers show no line for 0.
pub const NON_JAVA_POSITION: i32 = 0;

/// A frame's type, as named in the `jdk.types.FrameType` pool. Every variant
/// is written to every chunk, so any id an event uses resolves. Not what a
/// stored frame's fields mean ([`FrameKind`]); `From<FrameKind>` below maps
/// one to the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameType {
    Interpreted = 0,
    JitCompiled = 1,
    Inlined = 2,
    Native = 3,
    Cpp = 4,
    Kernel = 5,
    C1Compiled = 6,
    RemoteNative = 7,
}

impl FrameType {
    pub const ALL: [FrameType; 8] = [
        FrameType::Interpreted,
        FrameType::JitCompiled,
        FrameType::Inlined,
        FrameType::Native,
        FrameType::Cpp,
        FrameType::Kernel,
        FrameType::C1Compiled,
        FrameType::RemoteNative,
    ];

    /// The description written in the pool (the JDK's own for the types it
    /// has).
    pub const fn description(self) -> &'static str {
        match self {
            FrameType::Interpreted => "Interpreted",
            FrameType::JitCompiled => "JIT compiled",
            FrameType::Inlined => "Inlined",
            FrameType::Native => "Native",
            FrameType::Cpp => "C++",
            FrameType::Kernel => "Kernel",
            FrameType::C1Compiled => "C1 compiled",
            FrameType::RemoteNative => "Remote native",
        }
    }

    /// The type whose [`FrameType::description`] this is; `None` for one we
    /// never write.
    pub fn from_description(description: &str) -> Option<FrameType> {
        FrameType::ALL.into_iter().find(|t| t.description() == description)
    }

    /// The pool key: async-profiler's and the JDK's numbering (0 is
    /// interpreted), which async-profiler's converter reads as a raw byte
    /// without consulting the pool.
    pub const fn key(self) -> u64 {
        self as u64
    }
}

impl From<FrameKind> for FrameType {
    /// The type a stored frame is written with, as far as its kind tells:
    /// AsyncGetCallTrace does not say whether a frame is interpreted or
    /// compiled, so like async-profiler we call its frames JIT compiled;
    /// markers are written as native frames. The recording refines two
    /// cases: a Java `native` method is [`FrameType::Native`], a native
    /// frame in the JVM's own library [`FrameType::Cpp`].
    fn from(kind: FrameKind) -> Self {
        match kind {
            FrameKind::Java => FrameType::JitCompiled,
            FrameKind::Interpreted => FrameType::Interpreted,
            FrameKind::C1Compiled => FrameType::C1Compiled,
            FrameKind::Inlined => FrameType::Inlined,
            FrameKind::Error | FrameKind::Native => FrameType::Native,
            FrameKind::RemoteNative => FrameType::RemoteNative,
            FrameKind::Kernel => FrameType::Kernel,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_description_parses_back_to_its_type() {
        for t in FrameType::ALL {
            assert_eq!(FrameType::from_description(t.description()), Some(t));
        }
        assert_eq!(FrameType::from_description("jit compiled"), None);
        assert_eq!(FrameType::from_description(""), None);
    }

    #[test]
    fn all_lists_every_type_once_in_key_order() {
        for (i, t) in FrameType::ALL.into_iter().enumerate() {
            assert_eq!(t as usize, i);
            assert_eq!(t.key(), i as u64);
        }
    }

    #[test]
    fn stored_kinds_map_to_frame_types() {
        let kinds = [
            (FrameKind::Java, FrameType::JitCompiled),
            (FrameKind::Error, FrameType::Native),
            (FrameKind::Native, FrameType::Native),
            (FrameKind::RemoteNative, FrameType::RemoteNative),
            (FrameKind::Interpreted, FrameType::Interpreted),
            (FrameKind::C1Compiled, FrameType::C1Compiled),
            (FrameKind::Inlined, FrameType::Inlined),
            (FrameKind::Kernel, FrameType::Kernel),
        ];
        for (kind, frame_type) in kinds {
            assert_eq!(FrameType::from(kind), frame_type, "{kind:?}");
        }
    }
}
