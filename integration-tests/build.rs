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

/// `$JAVA_HOME`, or the JDK that `javac` on the PATH belongs to.
fn java_home() -> PathBuf {
    if let Ok(home) = std::env::var("JAVA_HOME") {
        return PathBuf::from(home);
    }
    let out = Command::new("sh").args(["-c", "readlink -f \"$(command -v javac)\""]).output().expect("find javac");
    let javac = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    javac.parent().and_then(|bin| bin.parent()).expect("JDK home from javac").to_path_buf()
}

/// The JNI fixture library, built three ways. The SFrame build needs an
/// assembler with `--gsframe` (binutils 2.40+); without one it is left out
/// with a cargo warning, and the tests that need it skip (fail under CI).
fn build_native_fixtures(out: &Path) {
    let source = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("native/chain.c");
    println!("cargo:rerun-if-changed=native/chain.c");
    let include = java_home().join("include");
    let variants: [(&str, &[&str], bool); 3] = [
        ("libchain_fp.so", &["-fno-omit-frame-pointer"], true),
        ("libchain_nofp.so", &["-fomit-frame-pointer"], true),
        ("libchain_sframe.so", &["-fomit-frame-pointer", "-Wa,--gsframe"], false),
    ];
    for (name, flags, required) in variants {
        let status = Command::new("cc")
            .args(["-O2", "-g", "-shared", "-fPIC", "-Wl,--build-id"])
            .args(flags)
            .arg("-I")
            .arg(&include)
            .arg("-I")
            .arg(include.join("linux"))
            .arg("-o")
            .arg(out.join(name))
            .arg(&source)
            .status()
            .expect("run cc (install gcc)");
        assert!(status.success() || !required, "cc failed for {name}");
        if !status.success() {
            println!("cargo:warning={name} not built: the assembler cannot emit SFrame (binutils 2.40+)");
        }
    }
}

/// The native memory fixture (`nativemem=`): two malloc call sites and one
/// for each other allocation function, each a frame of its own (frame
/// pointers, no sibling calls), named by its symbol (not stripped).
fn build_nativemem_fixture(out: &Path) {
    let source = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("native/nativemem.c");
    println!("cargo:rerun-if-changed=native/nativemem.c");
    let include = java_home().join("include");
    let status = Command::new("cc")
        .args(["-O2", "-g", "-shared", "-fPIC", "-Wl,--build-id"])
        .args(["-fno-omit-frame-pointer", "-fno-optimize-sibling-calls"])
        .arg("-I")
        .arg(&include)
        .arg("-I")
        .arg(include.join("linux"))
        .arg("-o")
        .arg(out.join("libnativemem.so"))
        .arg(&source)
        .status()
        .expect("run cc (install gcc)");
    assert!(status.success(), "cc failed for libnativemem.so");
}

fn run(command: &mut Command) {
    let status = command.status().unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    assert!(status.success(), "{command:?} failed");
}

/// The remote-symbolication fixture: built with a build-id and hidden
/// helpers, its debug information split out with objcopy into a
/// `.build-id` tree, then stripped of all symbols (a copy as linked is kept
/// in `unstripped/`). Twice: linked at 0, and linked at a nonzero address.
fn build_remote_fixtures(out: &Path) {
    let source = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("native/remote.c");
    println!("cargo:rerun-if-changed=native/remote.c");
    let include = java_home().join("include");
    let debug_tree = out.join("debug");
    for (name, extra) in [("libremote.so", None), ("libremote_offset.so", Some("-Wl,-Ttext-segment=0x40000000"))] {
        let library = out.join(name);
        let mut cc = Command::new("cc");
        cc.args(["-O2", "-g", "-shared", "-fPIC", "-fvisibility=hidden", "-fno-omit-frame-pointer"])
            .args(["-fno-optimize-sibling-calls", "-fno-reorder-functions", "-falign-functions=1", "-Wl,--build-id"])
            .args(extra)
            .arg("-I")
            .arg(&include)
            .arg("-I")
            .arg(include.join("linux"))
            .arg("-o")
            .arg(&library)
            .arg(&source);
        run(&mut cc);
        // As linked (DWARF, .symtab): the symbolizer's tier tests strip copies of it.
        let unstripped = out.join("unstripped");
        std::fs::create_dir_all(&unstripped).unwrap();
        std::fs::copy(&library, unstripped.join(name)).unwrap();
        let debug = out.join(format!("{name}.debug"));
        run(Command::new("objcopy").arg("--only-keep-debug").arg(&library).arg(&debug));
        run(Command::new("strip").arg("--strip-all").arg(&library));
        let notes = Command::new("readelf").arg("-n").arg(&debug).output().expect("run readelf");
        let text = String::from_utf8_lossy(&notes.stdout);
        let id =
            text.lines().find_map(|l| l.trim().strip_prefix("Build ID: ")).expect("fixture has a build-id").to_owned();
        let dir = debug_tree.join(".build-id").join(&id[..2]);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(&debug, dir.join(format!("{}.debug", &id[2..]))).unwrap();
    }
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("java");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("classes");
    std::fs::create_dir_all(&out).unwrap();
    let javac = match std::env::var("JAVA_HOME") {
        Ok(home) => PathBuf::from(home).join("bin/javac"),
        Err(_) => PathBuf::from("javac"),
    };
    // The Java API first: fixtures use it as users would.
    let api = root.join("../../java-api/src");
    println!("cargo:rerun-if-changed={}", api.display());
    for (name, dir) in
        [("java-api", api.join("dev/jvmprofiler")), ("fixtures", root.join("fixtures")), ("tools", root.join("tools"))]
    {
        println!("cargo:rerun-if-changed={}", dir.display());
        let sources = java_sources(&dir);
        let status = Command::new(&javac)
            .args(["--release", "11"])
            .arg("-cp")
            .arg(&out)
            .arg("-d")
            .arg(&out)
            .args(&sources)
            .status()
            .unwrap_or_else(|e| {
                panic!("cannot run {}: {e} (install a JDK, e.g. openjdk-17-jdk-headless)", javac.display())
            });
        assert!(status.success(), "javac failed for {name}");
    }
    let native = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("native");
    std::fs::create_dir_all(&native).unwrap();
    build_native_fixtures(&native);
    build_nativemem_fixture(&native);
    build_remote_fixtures(&native);
    println!("cargo:rerun-if-env-changed=JAVA_HOME");
    println!("cargo:rustc-env=FIXTURE_CLASSES={}", out.display());
    println!("cargo:rustc-env=FIXTURE_NATIVE={}", native.display());
}
