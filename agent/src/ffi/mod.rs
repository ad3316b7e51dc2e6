//! The functions the JVM calls into: the exported agent entry points and
//! JVMTI callbacks (`entry`) and the Java API's JNI natives (`java_api`).
//! (The natives the park engine binds in place of the JDK's stay beside
//! the state they share, in `engine::park`.) Each runs its body inside
//! [`ffi_boundary`], so a panic is logged and answered with a fallback
//! instead of unwinding into the JVM.

pub mod entry;
pub mod java_api;

pub(crate) use crate::jvm::boundary::ffi_boundary;
