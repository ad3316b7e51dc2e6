//! The file the agent writes its answer to (`reply=`), in the JVM's /tmp,
//! created by us and read back here.

use crate::jvms::Jvm;
use std::fs::{self, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

static SEQUENCE: AtomicU32 = AtomicU32::new(0);

/// A reply file, removed when dropped.
pub struct File {
    jvm_path: String,
    host_path: PathBuf,
}

impl File {
    pub fn create(jvm: &Jvm) -> Result<Self, String> {
        let n = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let jvm_path = format!("/tmp/.jprofile-{}-{n}.reply", std::process::id());
        let host_path = jvm.host_path(&jvm_path);
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&host_path)
            .map_err(|e| format!("creating the reply file {}: {e}", host_path.display()))?;
        Ok(Self { jvm_path, host_path })
    }

    /// The path as the JVM names it.
    pub fn jvm_path(&self) -> &str {
        &self.jvm_path
    }

    /// What the agent wrote (nothing when it had nothing to say).
    pub fn read(&self) -> String {
        fs::read_to_string(&self.host_path).unwrap_or_default()
    }
}

impl Drop for File {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.host_path);
    }
}
