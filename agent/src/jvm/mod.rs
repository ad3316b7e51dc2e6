//! The JVM as the agent talks to it: the boundary every call from the JVM
//! runs in (`boundary`), the JVMTI binding (`jvmti`), JNI
//! environments (`jni_env`), the VM's handle and exports (`vm`), which
//! JDKs are supported (`jdk_support`), Java threads' names (`threads`,
//! `existing_threads`), and the session's periodic thread attached to the
//! JVM (`ticker`). Control plane.

pub mod boundary;
pub mod existing_threads;
pub mod jdk_support;
pub mod jni_env;
pub mod jvmti;
pub mod threads;
pub mod ticker;
pub mod vm;
