//! Compiles the Java fixtures and tools with `javac` into OUT_DIR.

use std::path::{Path, PathBuf};
use std::process::Command;

fn java_sources(dir: &Path) -> Vec<PathBuf> {
    let mut sources: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "java"))
        .collect();
    sources.sort();
    sources
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("java");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("classes");
    std::fs::create_dir_all(&out).unwrap();
    let javac = match std::env::var("JAVA_HOME") {
        Ok(home) => PathBuf::from(home).join("bin/javac"),
        Err(_) => PathBuf::from("javac"),
    };
    for dir in ["fixtures", "tools"] {
        println!("cargo:rerun-if-changed=java/{dir}");
        let sources = java_sources(&root.join(dir));
        let status = Command::new(&javac).arg("-d").arg(&out).args(&sources).status().unwrap_or_else(|e| {
            panic!("cannot run {}: {e} (install a JDK, e.g. openjdk-17-jdk-headless)", javac.display())
        });
        assert!(status.success(), "javac failed for java/{dir}");
    }
    println!("cargo:rerun-if-env-changed=JAVA_HOME");
    println!("cargo:rustc-env=FIXTURE_CLASSES={}", out.display());
}
