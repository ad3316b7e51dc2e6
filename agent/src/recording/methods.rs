//! Java method names and line tables, resolved from jmethodIDs through
//! JVMTI at dump time and copied into our own memory.

use crate::jvm::jni_env::JniEnv;
use crate::jvm::jvmti::{internal_class_name, Jvmti, LineNumberEntry};
use std::collections::HashMap;

/// Everything a JFR frame needs about a Java method.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodInfo {
    /// Internal class name (`java/lang/String`).
    pub class_name: String,
    pub class_modifiers: i32,
    pub name: String,
    /// JVM descriptor (`(I)V`).
    pub signature: String,
    pub modifiers: i32,
    /// Sorted by bytecode index.
    pub lines: Vec<LineNumberEntry>,
}

impl MethodInfo {
    /// The source line of bytecode index `bci`, or -1 when unknown.
    pub fn line_of(&self, bci: i32) -> i32 {
        let bci = i64::from(bci);
        if bci < 0 {
            return -1;
        }
        match self.lines.partition_point(|e| e.start_bci <= bci) {
            0 => self.lines.first().map_or(-1, |e| e.line),
            n => self.lines[n - 1].line,
        }
    }
}

/// Resolves jmethodIDs (as `u64`) to method information.
pub trait MethodSource {
    fn method(&mut self, id: u64) -> Option<&MethodInfo>;
}

/// A source that knows no method: to JVMTI every id would be unloaded.
#[cfg(test)]
pub(crate) struct NoMethods;

#[cfg(test)]
impl MethodSource for NoMethods {
    fn method(&mut self, _id: u64) -> Option<&MethodInfo> {
        None
    }
}

/// A cache of resolved methods, kept for one chunk: HotSpot reuses the
/// jmethodID slots of unloaded classes, so an id must not be trusted to
/// name the same method across chunks.
#[derive(Default)]
pub struct MethodCache {
    resolved: HashMap<u64, Option<MethodInfo>>,
}

impl MethodCache {
    /// Forgets everything (after a chunk is finished).
    pub fn clear(&mut self) {
        self.resolved.clear();
    }

    /// A source resolving through `jvmti` on the thread owning `env`.
    pub fn source(&mut self, jvmti: Jvmti, env: JniEnv) -> JvmtiMethods<'_> {
        JvmtiMethods { cache: self, jvmti, env }
    }
}

pub struct JvmtiMethods<'a> {
    cache: &'a mut MethodCache,
    jvmti: Jvmti,
    env: JniEnv,
}

impl MethodSource for JvmtiMethods<'_> {
    fn method(&mut self, id: u64) -> Option<&MethodInfo> {
        let (jvmti, env) = (self.jvmti, self.env);
        self.cache.resolved.entry(id).or_insert_with(|| resolve(jvmti, env, id)).as_ref()
    }
}

fn resolve(jvmti: Jvmti, env: JniEnv, id: u64) -> Option<MethodInfo> {
    if id == 0 {
        return None;
    }
    // SAFETY: ids come from AsyncGetCallTrace, which reports real jmethodIDs.
    let method = unsafe { crate::jvm::jvmti::MethodRef::from_raw(id as jni::sys::jmethodID) };
    env.with_local_frame(4, || {
        let names = jvmti.method_name(method).ok()?;
        let class = jvmti.method_declaring_class(method).ok()?;
        let signature = jvmti.class_signature(class).ok()?;
        Some(MethodInfo {
            class_name: internal_class_name(&signature).to_owned(),
            class_modifiers: jvmti.class_modifiers(class).unwrap_or(0),
            name: names.name,
            signature: names.signature,
            modifiers: jvmti.method_modifiers(method).unwrap_or(0),
            lines: {
                let mut lines = jvmti.line_number_table(method).unwrap_or_default();
                lines.sort_by_key(|e| e.start_bci);
                lines
            },
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn method(lines: &[(i64, i32)]) -> MethodInfo {
        MethodInfo {
            class_name: "a/B".into(),
            class_modifiers: 1,
            name: "m".into(),
            signature: "()V".into(),
            modifiers: 1,
            lines: lines.iter().map(|&(start_bci, line)| LineNumberEntry { start_bci, line }).collect(),
        }
    }

    #[test]
    fn line_of_picks_the_last_entry_starting_at_or_before_the_bci() {
        let m = method(&[(0, 10), (4, 11), (9, 15)]);
        assert_eq!(m.line_of(0), 10);
        assert_eq!(m.line_of(3), 10);
        assert_eq!(m.line_of(4), 11);
        assert_eq!(m.line_of(100), 15);
        assert_eq!(m.line_of(-3), -1);
        assert_eq!(method(&[]).line_of(5), -1);
    }

    #[test]
    fn class_signatures_become_internal_names() {
        assert_eq!(internal_class_name("Ljava/lang/String;"), "java/lang/String");
        assert_eq!(internal_class_name("[I"), "[I");
    }
}
