//! The file the agent writes its answer to (`reply=`), in the JVM's /tmp,
//! created by us and read back here.

use crate::inroot::Dir;
use crate::jvms::Jvm;
use std::sync::atomic::{AtomicU32, Ordering};

static SEQUENCE: AtomicU32 = AtomicU32::new(0);

/// A reply file, removed when dropped.
pub struct File {
    tmp: Dir,
    name: String,
}

impl File {
    pub fn create(jvm: &Jvm) -> Result<Self, String> {
        let n = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let name = format!(".jprofile-{}-{n}.reply", std::process::id());
        let tmp = Dir::in_root(jvm.pid, "/tmp").map_err(|e| format!("the JVM's /tmp: {e}"))?;
        tmp.create_new(&name, 0o600).map_err(|e| format!("creating the reply file /tmp/{name}: {e}"))?;
        Ok(Self { tmp, name })
    }

    /// The path as the JVM names it.
    pub fn jvm_path(&self) -> String {
        format!("/tmp/{}", self.name)
    }

    /// What the agent wrote (nothing when it had nothing to say).
    pub fn read(&self) -> String {
        String::from_utf8_lossy(&self.tmp.read(&self.name).unwrap_or_default()).into_owned()
    }
}

impl Drop for File {
    fn drop(&mut self) {
        let _ = self.tmp.remove(&self.name);
    }
}
