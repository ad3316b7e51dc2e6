//! Marks: which libjvm functions end the native part of a stack walk,
//! because past them lie frames the Java walker reports (or JVM plumbing
//! nobody needs). A marked frame is kept; its callers are not. The mark
//! codes themselves are `frames::Mark` (remote frames pack them).

use frames::Mark;

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
    }
}
