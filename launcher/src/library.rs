//! The agent library as the JVM must name it: the copy it has loaded
//! already, ours when it sees the same file and may read it, else a copy
//! placed in its `/tmp` (a container that does not see our file system).

use crate::inroot::Dir;
use crate::jvms::Jvm;
use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Our agent: its path and bytes (read while we are still ourselves).
pub struct Agent {
    pub path: PathBuf,
    pub bytes: Vec<u8>,
    /// Named by `--lib`: used even if the JVM has another loaded.
    pub explicit: bool,
}

impl Agent {
    /// `--lib`, else the agent next to this executable (`cargo build` puts
    /// both in one directory, and so does a release archive).
    pub fn find(lib: Option<&Path>) -> Result<Self, String> {
        let (path, explicit) = match lib {
            Some(path) => (fs::canonicalize(path).map_err(|e| format!("--lib {}: {e}", path.display()))?, true),
            None => {
                let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
                (exe.with_file_name("libprofiler.so"), false)
            }
        };
        let bytes = fs::read(&path).map_err(|e| match explicit {
            true => format!("--lib {}: {e}", path.display()),
            false => format!("{}: {e} (give the agent's path with --lib)", path.display()),
        })?;
        Ok(Self { path, bytes, explicit })
    }
}

/// The path under which `jvm` loads `agent`. Unless `--lib` named one, a
/// JVM that has mapped a library of the agent's name (by `-agentpath` or
/// an earlier attach) is given that path again, so the one agent it has
/// answers, never a second copy.
pub fn for_jvm(jvm: &Jvm, agent: &Agent) -> Result<String, String> {
    let name = agent.path.file_name().and_then(|n| n.to_str()).unwrap_or("libprofiler.so");
    if !agent.explicit {
        if let Some(loaded) = jvm.mapped_files().into_iter().find(|path| path.rsplit('/').next() == Some(name)) {
            return Ok(loaded);
        }
    }
    let ours = agent.path.to_str().ok_or_else(|| format!("{}: not a UTF-8 path", agent.path.display()))?;
    // The same file, which the JVM's user (our effective user now) may read.
    let theirs = jvm.host_path(ours);
    let same = match (fs::metadata(&agent.path), fs::metadata(&theirs)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino() && fs::File::open(&theirs).is_ok(),
        _ => false,
    };
    if same {
        return Ok(ours.to_owned());
    }
    copy_into(jvm, agent, name)
}

/// Copies the library to `/tmp/jprofile-<uid>/` as the JVM sees it (a
/// directory only its user may write), replacing a different copy by
/// rename so that a JVM mapping the old one keeps it intact.
fn copy_into(jvm: &Jvm, agent: &Agent, name: &str) -> Result<String, String> {
    let dir_name = format!("jprofile-{}", jvm.uid);
    let shown = format!("/tmp/{dir_name}");
    let tmp = Dir::in_root(jvm.pid, "/tmp").map_err(|e| format!("the JVM's /tmp: {e}"))?;
    match tmp.mkdir(&dir_name, 0o700) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let ours =
                tmp.stat(&dir_name).is_ok_and(|s| s.st_mode & libc::S_IFMT == libc::S_IFDIR && s.st_uid == jvm.uid);
            if !ours {
                return Err(format!("{shown}: exists and is not a directory of the JVM's user"));
            }
        }
        Err(e) => return Err(format!("{shown}: {e}")),
    }
    let dir = tmp.subdir(&dir_name).map_err(|e| format!("{shown}: {e}"))?;
    if dir.read(name).is_ok_and(|existing| existing == agent.bytes) {
        return Ok(format!("{shown}/{name}"));
    }
    let temporary = format!(".{name}.{}", std::process::id());
    let written = dir
        .create_new(&temporary, 0o755)
        .and_then(|mut file| file.write_all(&agent.bytes))
        .and_then(|()| dir.rename(&temporary, name));
    if let Err(e) = written {
        let _ = dir.remove(&temporary);
        return Err(format!("copying the agent to {shown}/{name}: {e}"));
    }
    Ok(format!("{shown}/{name}"))
}
