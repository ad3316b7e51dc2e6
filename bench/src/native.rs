//! Handler time per sample for each native unwinder on a 30-deep native
//! stack (the JNI fixture of the integration tests, built three ways).

use crate::support::{counter, javac, median, root};
use crate::Options;
use std::path::{Path, PathBuf};
use std::process::Command;

const MODES: [(&str, &str, &[&str]); 4] = [
    ("no", "libchain_fp.so", &["-fno-omit-frame-pointer"]),
    ("fp", "libchain_fp.so", &["-fno-omit-frame-pointer"]),
    ("dwarf", "libchain_nofp.so", &["-fomit-frame-pointer"]),
    ("sframe", "libchain_sframe.so", &["-fomit-frame-pointer", "-Wa,--gsframe"]),
];

fn java_include() -> PathBuf {
    let javac = Command::new("sh").args(["-c", "readlink -f \"$(command -v javac)\""]).output().expect("find javac");
    let home = std::env::var_os("JAVA_HOME").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(String::from_utf8_lossy(&javac.stdout).trim()).parent().unwrap().parent().unwrap().to_path_buf()
    });
    home.join("include")
}

fn build_library(out: &Path, name: &str, flags: &[&str]) -> bool {
    let include = java_include();
    Command::new("cc")
        .args(["-O2", "-shared", "-fPIC"])
        .args(flags)
        .arg("-I")
        .arg(&include)
        .arg("-I")
        .arg(include.join("linux"))
        .arg("-o")
        .arg(out.join(name))
        .arg(root().join("integration-tests/native/chain.c"))
        .status()
        .is_ok_and(|s| s.success())
}

pub fn run(scratch: &Path, options: &Options, agent: &Path) {
    let out = scratch.join("native");
    javac(&out, &[root().join("integration-tests/java/fixtures/NativeChain.java")]);
    println!(
        "\nSignal handler time on a 30-deep native stack under a Java frame (1 ms, medians of {} runs):\n",
        options.rounds
    );
    println!("| cstack | handler time (median) | handler time (p99) |");
    println!("|---|---|---|");
    for (mode, library, flags) in MODES {
        if !build_library(&out, library, flags) {
            println!("| {mode} | not built here | - |");
            continue;
        }
        let (mut p50, mut p99) = (Vec::new(), Vec::new());
        for _ in 0..options.rounds {
            let file = out.join("native.jfr");
            let status = Command::new(crate::support::tool("java"))
                .arg(format!("-agentpath:{}=start,interval=1ms,cstack={mode},file={}", agent.display(), file.display()))
                .arg("-cp")
                .arg(&out)
                .args(["NativeChain", out.join(library).to_str().unwrap(), "3", "0", "deep"])
                .status()
                .expect("run java");
            assert!(status.success(), "NativeChain failed with cstack={mode}");
            p50.push(counter(&file, "handler_ns_p50"));
            p99.push(counter(&file, "handler_ns_p99"));
        }
        println!("| {mode} | {:.2} µs | {:.2} µs |", median(p50) / 1000.0, median(p99) / 1000.0);
    }
}
