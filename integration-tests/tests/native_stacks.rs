//! Mixed native + Java stacks with each native unwinder, JDK native code
//! (zlib), libraries loaded after start, and build-ids.

use integration_tests::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const CHAIN: [&str; 4] = ["leaf", "middle", "outer", "Java_NativeChain_run"];

fn record(test: &str, options: &str, main: &str, args: &[&str]) -> Recording {
    let file = scratch_file(test, "native.jfr");
    run_recorded(&format!("interval=1ms,overhead=0,{options}"), &file, main, args, Duration::from_secs(90));
    read_recording(&file)
}

/// Share of samples taken in `leaf` whose stack is leaf, middle, outer,
/// the JNI entry (native frames whose class is `library`), then the Java
/// caller frames in order.
fn whole_chain_share(recording: &Recording, library: &Path) -> (usize, f64) {
    let library = library.file_name().unwrap().to_str().unwrap();
    let in_leaf: Vec<&Event> = recording
        .samples()
        .filter(|e| e.thread == "native-caller" && e.top().is_some_and(|f| f.method == "leaf"))
        .collect();
    let whole = in_leaf
        .iter()
        .filter(|e| {
            let frames = e.user_frames();
            let names: Vec<&str> = frames.iter().map(|f| f.method.as_str()).collect();
            names.len() >= 7
                && names[..4] == CHAIN
                && names[4..7] == ["run", "callNative", "lambda$main$0"]
                && frames[4].class == "NativeChain"
                && frames[..4].iter().all(|f| f.frame_type == "Native" && f.class == library)
        })
        .count();
    (in_leaf.len(), whole as f64 / in_leaf.len().max(1) as f64)
}

fn check_chain(test: &str, cstack: &str, library: &Path) {
    let recording = record(test, &format!("cstack={cstack}"), "NativeChain", &[library.to_str().unwrap(), "3"]);
    let (samples, share) = whole_chain_share(&recording, library);
    assert!(samples >= 500, "{test}: only {samples} samples in leaf");
    assert!(share >= 0.9, "{test}: {:.1}% of {samples} leaf samples show the whole chain", share * 100.0);
}

#[test]
fn frame_pointers_walk_a_library_built_with_them() {
    check_chain("native_fp", "fp", &native_fixture("libchain_fp.so"));
}

#[test]
fn dwarf_walks_a_library_without_frame_pointers() {
    check_chain("native_dwarf", "dwarf", &native_fixture("libchain_nofp.so"));
}

#[test]
fn sframe_walks_a_library_with_sframe_and_no_frame_pointers() {
    // Without the fixture `sframe_fixture` has announced the skip.
    let Some(library) = sframe_fixture() else { return };
    check_chain("native_sframe", "sframe", &library);
}

#[test]
fn zlib_frames_appear_under_the_java_frames() {
    let recording = record("zlib", "cstack=dwarf", "Compress", &["3"]);
    let in_zip: Vec<&Event> = recording
        .samples()
        .filter(|e| e.thread == "compressor" && e.frames.iter().any(|f| f.method.starts_with("Java_java_util_zip_")))
        .collect();
    assert!(in_zip.len() >= 200, "only {} samples in libzip", in_zip.len());
    let with_zlib = in_zip
        .iter()
        .filter(|e| {
            let jni = e.frames.iter().position(|f| f.method.starts_with("Java_java_util_zip_")).unwrap();
            let java = &e.frames[jni + 1];
            let zlib_above = e.frames[..jni]
                .iter()
                .any(|f| f.method.contains("libz.so") || ["deflate", "crc32", "crc32_z"].contains(&f.method.as_str()));
            // The Java native method: JIT compiled in the JDK dialect, as async-profiler types it.
            zlib_above && java.class.starts_with("java.util.zip.") && java.frame_type == "JIT compiled"
        })
        .count();
    assert!(
        with_zlib as f64 >= 0.5 * in_zip.len() as f64,
        "{with_zlib} of {} libzip samples show zlib below",
        in_zip.len()
    );
}

#[test]
fn a_library_loaded_after_start_is_symbolized() {
    let library = native_fixture("libchain_fp.so");
    let recording = record("late_load", "cstack=fp", "NativeChain", &[library.to_str().unwrap(), "3", "5"]);
    let (samples, share) = whole_chain_share(&recording, &library);
    assert!(samples >= 500, "only {samples} samples in leaf");
    assert!(share >= 0.9, "{:.1}% of leaf samples symbolized", share * 100.0);
}

fn readelf_build_id(path: &str) -> Option<String> {
    let out = Command::new("readelf").args(["-n", path]).output().ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_owned))
}

#[test]
fn build_ids_from_memory_match_the_files() {
    let recording = record("build_ids", "cstack=fp", "CpuShares", &["1"]);
    let libraries: Vec<&Event> = recording.events.iter().filter(|e| e.kind == "jdk.NativeLibrary").collect();
    assert!(!libraries.is_empty());
    let mut compared = 0;
    for library in &libraries {
        let path = &library.thread; // JfrDump puts the library name in this column
        if !path.starts_with('/') {
            continue; // the vDSO has no file
        }
        let expected = readelf_build_id(path);
        assert_eq!(library.state.as_str(), expected.as_deref().unwrap_or("-"), "build-id of {path}");
        compared += 1;
    }
    assert!(compared >= 5, "only {compared} libraries compared");
}

/// A thread created in native code that attaches to the JVM is reported by
/// JVMTI ThreadStart like any other: the CPU engine arms it, its samples
/// carry its Java frames and the name it attached with, and its detach
/// (ThreadEnd) releases it cleanly.
#[test]
fn a_native_thread_attached_to_the_jvm_is_sampled() {
    let library = native_fixture("libchain_fp.so");
    let recording = record("attached", "cstack=fp", "NativeChain", &[library.to_str().unwrap(), "2", "0", "attached"]);
    let attached: Vec<&Event> = recording.samples().filter(|e| e.thread == "native-attached").collect();
    assert!(attached.len() >= 100, "{} samples of the attached thread", attached.len());
    let in_spin = attached.iter().filter(|e| e.frames.iter().any(|f| f.method == "spinFromNative")).count();
    assert!(in_spin * 10 >= attached.len() * 9, "{in_spin} of {} samples in spinFromNative", attached.len());
}

/// The system libc's build-id, if its debug file (Debian's `libc6-dbg`)
/// is installed where the agent looks for it; otherwise the calling test
/// is skipped ([`skip`]; under CI, which installs it, it fails).
fn libc_with_debug_file() -> Option<String> {
    let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    let Some(id) = symbolizer::debuginfo::file_build_id(libc) else {
        skip(&format!("{} (with a build-id) is not this machine's libc", libc.display()), InCi::Optional);
        return None;
    };
    let debug = Path::new("/usr/lib/debug/.build-id").join(&id[..2]).join(format!("{}.debug", &id[2..]));
    if !debug.exists() {
        skip(&format!("libc's debug file {} is not installed (Debian: libc6-dbg)", debug.display()), InCi::Required);
        return None;
    }
    Some(id)
}

/// Parked and sleeping threads sampled by wall clock wait in libc's
/// futex functions, which Debian strips from libc into its debug file:
/// named locally from that file, found by build-id (not `[libc.so.6+0x…]`).
#[test]
fn libc_internal_functions_are_named_from_its_debug_file() {
    let Some(_) = libc_with_debug_file() else { return };
    let file = scratch_file("libc_debug_names", "wall.jfr");
    run_recorded("wall=10ms", &file, "WallThreads", &["1", "12", "2"], Duration::from_secs(90));
    let recording = read_recording(&file);
    // Idle threads' samples are folded: weigh them.
    let parked: Vec<&Event> = recording.wall_samples().filter(|e| e.thread.starts_with("park-")).collect();
    let weight = |ends: &dyn Fn(&str) -> bool| -> i64 {
        parked.iter().filter(|e| e.top().is_some_and(|f| ends(&f.method))).map(|e| e.weight).sum()
    };
    let (all, named) = (weight(&|_| true), weight(&|m| m.contains("futex")));
    let unnamed = weight(&|m| m.starts_with("[libc.so.6+"));
    println!("{all} parked samples: {named} end in a futex function, {unnamed} in an unnamed libc frame");
    assert!(all >= 100, "only {all} samples of parked threads");
    assert!(named * 10 >= all * 9, "{named} of {all} end in a named futex function");
    assert_eq!(unnamed, 0);
}

/// CPU samples of a thread that spends its time in system calls carry the
/// kernel's part of the stack above its own (innermost first), typed
/// `Kernel` and named from `/proc/kallsyms`, where perf_events counts the
/// kernel for this process.
#[test]
fn cpu_samples_carry_kernel_frames_where_perf_allows() {
    let recording = record("kernel_frames", "cpu=1ms", "Syscalls", &["3"]);
    let engine = recording.settings.get("engine").cloned().unwrap_or_default();
    let refused = recording.counter("kernel_stack_threads_refused");
    if engine != "perf_events cpu-clock" || refused > 0 {
        let why = format!("perf_events does not count the kernel here (engine {engine}, {refused} threads refused)");
        skip(&why, InCi::Optional);
        return;
    }
    let main: Vec<&Event> = recording.samples().filter(|e| e.thread == "main").collect();
    let named =
        main.iter().flat_map(|e| &e.frames).filter(|f| f.frame_type == "Kernel" && f.method != "[kernel]").count();
    if named == 0 {
        skip("/proc/kallsyms shows no kernel addresses to this process (kptr_restrict)", InCi::Optional);
        return;
    }
    let in_kernel: Vec<&Event> =
        main.iter().copied().filter(|e| e.frames.first().is_some_and(|f| f.frame_type == "Kernel")).collect();
    println!("{} of {} main-thread samples start in the kernel", in_kernel.len(), main.len());
    assert!(in_kernel.len() * 5 >= main.len(), "{} of {} samples in the kernel", in_kernel.len(), main.len());
    for sample in &in_kernel {
        let kernel = sample.frames.iter().take_while(|f| f.frame_type == "Kernel").count();
        assert!(sample.frames[kernel..].iter().all(|f| f.frame_type != "Kernel"), "kernel frames innermost only");
        assert!(sample.frames[..kernel].iter().all(|f| !f.method.is_empty() && !f.method.starts_with('[')));
    }
    // The Java caller below the kernel (the main thread also enters the
    // kernel starting the JVM, before the fixture's code runs).
    let from_java = in_kernel.iter().filter(|e| e.frames.iter().any(|f| f.class == "Syscalls")).count();
    assert!(from_java * 10 >= in_kernel.len() * 9, "{from_java} of {} reach the fixture's frames", in_kernel.len());
}
