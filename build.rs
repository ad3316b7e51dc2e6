//! Packages the Java API (`java-api/src`) as `profiler.jar` next to
//! `libprofiler.so`, so `JavaProfiler.getInstance()` finds the library
//! beside its jar. Without a JDK the jar is skipped with a warning: the
//! agent itself does not need it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn java_sources(dir: &Path, sources: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        if path.is_dir() {
            java_sources(&path, sources);
        } else if path.extension().is_some_and(|x| x == "java") {
            sources.push(path);
        }
    }
}

fn jdk_tool(name: &str) -> PathBuf {
    match std::env::var("JAVA_HOME") {
        Ok(home) => PathBuf::from(home).join("bin").join(name),
        Err(_) => PathBuf::from(name),
    }
}

/// `target/<profile>`: where cargo puts the cdylib (three levels above OUT_DIR).
fn artifact_dir(out: &Path) -> Option<&Path> {
    out.ancestors().nth(3)
}

fn main() {
    println!("cargo:rerun-if-changed=java-api/src");
    println!("cargo:rerun-if-env-changed=JAVA_HOME");
    let mut sources = Vec::new();
    java_sources(Path::new("java-api/src"), &mut sources);
    sources.sort();
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let classes = out.join("java-api-classes");
    let _ = std::fs::remove_dir_all(&classes);
    std::fs::create_dir_all(&classes).expect("create the classes directory");
    let javac = Command::new(jdk_tool("javac")).args(["--release", "11", "-d"]).arg(&classes).args(&sources).status();
    match javac {
        Ok(status) if status.success() => {}
        Ok(_) => panic!("javac failed on java-api/src"),
        Err(e) => {
            println!("cargo:warning=profiler.jar not built: cannot run javac ({e}); install a JDK for the Java API");
            return;
        }
    }
    let jar = out.join("profiler.jar");
    let status =
        Command::new(jdk_tool("jar")).arg("--create").arg("--file").arg(&jar).arg("-C").arg(&classes).arg(".").status();
    assert!(status.is_ok_and(|s| s.success()), "jar failed on the Java API classes");
    if let Some(dir) = artifact_dir(&out) {
        std::fs::copy(&jar, dir.join("profiler.jar")).expect("copy profiler.jar next to the library");
    }
}
