//! Marks: JVM-internal functions at which the native part of a stack walk
//! ends, because past them lie frames the Java walker reports (or JVM
//! plumbing nobody needs). A marked frame is kept; its callers are not.

/// Packed into 3 bits by remote symbolication, so values stay below 8.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Mark {
    #[default]
    None = 0,
    /// The VM calling into Java (`JavaCalls::call_helper`).
    VmRuntime = 1,
    /// Runtime entries called from the interpreter.
    Interpreter = 2,
    /// A compiler thread compiling a method.
    CompilerEntry = 3,
}

impl Mark {
    pub fn from_bits(bits: u8) -> Mark {
        match bits {
            1 => Mark::VmRuntime,
            2 => Mark::Interpreter,
            3 => Mark::CompilerEntry,
            _ => Mark::None,
        }
    }
}

/// The mark of a (mangled) libjvm symbol.
pub fn mark_of(mangled: &str) -> Mark {
    if mangled.starts_with("_ZN9JavaCalls11call_helper") {
        Mark::VmRuntime
    } else if mangled.starts_with("_ZN18InterpreterRuntime") {
        Mark::Interpreter
    } else if mangled.starts_with("_ZN13CompileBroker25invoke_compiler_on_method") {
        Mark::CompilerEntry
    } else {
        Mark::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_known_entries_and_nothing_else() {
        assert_eq!(
            mark_of("_ZN9JavaCalls11call_helperEP9JavaValueRK12methodHandleP17JavaCallArgumentsP10JavaThread"),
            Mark::VmRuntime
        );
        assert_eq!(mark_of("_ZN18InterpreterRuntime4_newEP10JavaThreadP12ConstantPooli"), Mark::Interpreter);
        assert_eq!(mark_of("_ZN13CompileBroker25invoke_compiler_on_methodEP11CompileTask"), Mark::CompilerEntry);
        assert_eq!(mark_of("memcpy"), Mark::None);
        for bits in 0..8 {
            assert_eq!(Mark::from_bits(bits) as u8, if bits < 4 { bits } else { 0 });
        }
    }
}
