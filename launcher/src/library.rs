//! The agent library as the JVM must name it: the copy it has loaded
//! already, ours when it sees the same file, else a copy placed in its
//! `/tmp` (a container that does not see our file system).

use crate::jvms::Jvm;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The agent next to this executable (`cargo build` puts both in one
/// directory, and so does a release archive).
pub fn beside_us() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let library = exe.with_file_name("libprofiler.so");
    if library.is_file() {
        Ok(library)
    } else {
        Err(format!("{} not found (give the agent's path with --lib)", library.display()))
    }
}

/// The path under which `jvm` loads `ours`. A JVM that has loaded an agent
/// of that name (by `-agentpath` or an earlier attach) is given that path
/// again, so the one agent it has answers, never a second copy.
pub fn for_jvm(jvm: &Jvm, ours: &Path) -> Result<String, String> {
    let name = ours.file_name().and_then(|n| n.to_str()).unwrap_or("libprofiler.so");
    if let Some(loaded) = jvm.mapped_files().into_iter().find(|path| path.rsplit('/').next() == Some(name)) {
        return Ok(loaded);
    }
    let ours_text = ours.to_str().ok_or_else(|| format!("{}: not a UTF-8 path", ours.display()))?;
    let same = |a: &Path, b: &Path| match (fs::metadata(a), fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    };
    if same(ours, &jvm.host_path(ours_text)) {
        return Ok(ours_text.to_owned());
    }
    copy_into(jvm, ours, name)
}

/// Copies the library to `/tmp/jprofile-<uid>/` as the JVM sees it (a
/// directory only its user may write), replacing a different copy by
/// rename so that a JVM mapping the old one keeps it intact.
fn copy_into(jvm: &Jvm, ours: &Path, name: &str) -> Result<String, String> {
    let dir = format!("/tmp/jprofile-{}", jvm.uid);
    let host_dir = jvm.host_path(&dir);
    match fs::DirBuilder::new().mode(0o700).create(&host_dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let owner = fs::symlink_metadata(&host_dir).map(|m| (m.uid(), m.is_dir())).ok();
            if owner != Some((jvm.uid, true)) {
                return Err(format!("{}: exists and is not a directory of the JVM's user", host_dir.display()));
            }
        }
        Err(e) => return Err(format!("{}: {e}", host_dir.display())),
    }
    let bytes = fs::read(ours).map_err(|e| format!("{}: {e}", ours.display()))?;
    let target = host_dir.join(name);
    if fs::read(&target).is_ok_and(|existing| existing == bytes) {
        return Ok(format!("{dir}/{name}"));
    }
    let temporary = host_dir.join(format!(".{name}.{}", std::process::id()));
    let written = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o755)
        .open(&temporary)
        .and_then(|mut file| file.write_all(&bytes))
        .and_then(|()| fs::rename(&temporary, &target));
    if let Err(e) = written {
        let _ = fs::remove_file(&temporary);
        return Err(format!("copying the agent to {}: {e}", target.display()));
    }
    Ok(format!("{dir}/{name}"))
}
