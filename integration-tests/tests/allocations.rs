//! Heap allocation sampling (`alloc=`) on a real JVM: samples name the
//! allocating method and the allocated class, and their weights add up to
//! the bytes the program allocated.

use integration_tests::readers::{converter_collapsed_as, converter_jar};
use integration_tests::*;
use std::time::Duration;

/// The bytes the fixture says `method` allocated.
fn allocated(output: &std::process::Output, method: &str) -> f64 {
    let prefix = format!("allocated {method} ");
    let out = stdout(output);
    let line = out.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap_or_else(|| panic!("{prefix}?\n{out}"));
    line.trim().parse().unwrap()
}

fn allocation_samples(recording: &Recording) -> Vec<&Event> {
    recording.events.iter().filter(|e| e.kind == "jdk.ObjectAllocationSample").collect()
}

fn in_method(event: &Event, method: &str) -> bool {
    event.frames.iter().take(2).any(|f| f.method == method && f.class == "AllocShares")
}

#[test]
fn allocation_samples_follow_the_bytes_each_method_allocated() {
    let file = scratch_file("alloc_shares", "alloc.jfr");
    let output = run_recorded("alloc", &file, "AllocShares", &["3"], Duration::from_secs(60));
    assert_jfr_tool_accepts(&file);
    let (most, less) = (allocated(&output, "allocateMost"), allocated(&output, "allocateLess"));
    let recording = read_recording(&file);
    assert_eq!(recording.settings.get("alloc").map(String::as_str), Some("524288 bytes"), "the default");
    let samples = allocation_samples(&recording);
    let ours: Vec<&&Event> = samples.iter().filter(|e| e.thread == "main").collect();
    assert!(ours.len() >= 200, "only {} allocation samples of the main thread", ours.len());

    let weight_of =
        |method: &str| -> f64 { ours.iter().filter(|e| in_method(e, method)).map(|e| e.weight as f64).sum() };
    let (most_weight, less_weight) = (weight_of("allocateMost"), weight_of("allocateLess"));
    let share = most_weight / (most_weight + less_weight);
    assert!((share - 0.7).abs() <= 0.05, "allocateMost has {:.1}% of the sampled bytes", share * 100.0);
    let total = most_weight + less_weight;
    assert!(
        (total / (most + less) - 1.0).abs() <= 0.2,
        "samples stand for {total:.0} bytes; the program allocated {:.0}",
        most + less
    );
    // The class is named, and the stack continues into main.
    let sample = ours.iter().find(|e| in_method(e, "allocateMost")).unwrap();
    // `[B`, which readers print as `byte[]`.
    assert!(sample.field("objectClass").contains("name = \"[B\""), "{:?}", sample.fields);
    assert!(sample.frames.iter().any(|f| f.method == "main"), "{:?}", sample.frames);
    assert!(recording.counter("alloc_samples") >= ours.len() as i64);
    assert_eq!(recording.counter("alloc_dropped_buffer_full") + recording.counter("alloc_dropped_busy"), 0);

    // async-profiler's converter reads the samples (it counts them) with the same split.
    let Some(jar) = converter_jar() else { return };
    let collapsed = converter_collapsed_as(&jar, &file, &["--alloc"]);
    let count = |method: &str| -> i64 {
        collapsed.iter().filter(|((_, frames), _)| frames.iter().any(|f| f.ends_with(method))).map(|(_, n)| n).sum()
    };
    let (most, less) = (count("AllocShares.allocateMost"), count("AllocShares.allocateLess"));
    let share = most as f64 / (most + less) as f64;
    assert!(
        (share - 0.7).abs() <= 0.05,
        "converter: allocateMost has {:.1}% of {} samples",
        share * 100.0,
        most + less
    );
}

/// Allocations made by JNI code (`NewByteArray` under two C functions)
/// carry those native frames above the Java native method, as CPU samples
/// do, with each native unwinder; the JVM's and the agent's own frames are
/// left out, and allocations by Java code have no native frames.
#[test]
fn allocations_by_jni_code_carry_its_native_frames() {
    let chain = ["alloc_middle", "alloc_outer", "Java_NativeChain_allocate"];
    for (cstack, library) in [("fp", "libchain_fp.so"), ("dwarf", "libchain_nofp.so"), ("no", "libchain_fp.so")] {
        let library = native_fixture(library);
        let name = library.file_name().unwrap().to_str().unwrap().to_owned();
        let file = scratch_file(&format!("alloc_jni_{cstack}"), "alloc.jfr");
        let options = format!("start,alloc=16k,cstack={cstack},file={}", file.display());
        let args = [library.to_str().unwrap(), "3", "0", "alloc"];
        let output = run_java(Some(&options), "NativeChain", &args, Duration::from_secs(60));
        assert_success(&output);
        let recording = read_recording(&file);
        let samples: Vec<&Event> =
            allocation_samples(&recording).into_iter().filter(|e| e.thread == "native-caller").collect();
        let position = |e: &Event, method: &str| e.frames.iter().position(|f| f.method == method);
        let by_jni: Vec<&&Event> = samples.iter().filter(|e| position(e, "allocate").is_some()).collect();
        let by_java: Vec<&&Event> = samples.iter().filter(|e| position(e, "allocateInJava").is_some()).collect();
        assert!(by_jni.len() >= 100 && by_java.len() >= 100, "{cstack}: {} and {}", by_jni.len(), by_java.len());
        let expected: &[&str] = if cstack == "no" { &[] } else { &chain };
        let whole = by_jni
            .iter()
            .filter(|e| {
                let names: Vec<&str> = e.frames.iter().map(|f| f.method.as_str()).collect();
                names.len() > expected.len()
                    && names[..expected.len()] == *expected
                    && e.frames[..expected.len()].iter().all(|f| f.frame_type == "Native" && f.class == name)
                    && names[expected.len()] == "allocate"
                    && e.frames[expected.len()].class == "NativeChain"
            })
            .count();
        assert!(
            whole as f64 >= 0.9 * by_jni.len() as f64,
            "{cstack}: {whole} of {} JNI allocations have exactly {expected:?} on top: {:?}",
            by_jni.len(),
            by_jni[0].frames
        );
        let in_java = by_java.iter().filter(|e| position(e, "allocateInJava") == Some(0)).count();
        assert!(
            in_java as f64 >= 0.9 * by_java.len() as f64,
            "{cstack}: {in_java} of {} Java allocations start in Java: {:?}",
            by_java.len(),
            by_java[0].frames
        );
        // Of any type: the JVM's own frames are typed C++.
        let internal = samples
            .iter()
            .flat_map(|e| &e.frames)
            .find(|f| f.class.contains("libjvm") || f.class.contains("libprofiler"));
        assert!(internal.is_none(), "{cstack}: a frame of the JVM or the agent: {internal:?}");
    }
}

#[test]
fn bad_alloc_values_are_option_errors() {
    for bad in ["alloc=0", "alloc=-1", "alloc=1x"] {
        let output = run_java(Some(&format!("start,{bad}")), "AllocShares", &["0"], Duration::from_secs(30));
        let err = stderr(&output);
        assert!(err.contains("alloc") && err.contains("512k"), "{bad}: {err}");
    }
    let output = run_java(Some("start,live"), "AllocShares", &["0"], Duration::from_secs(30));
    let err = stderr(&output);
    assert!(err.contains("live") && err.contains("alloc"), "live without alloc: {err}");
}

/// Live objects of `recording` allocated in `LiveLeak.<method>`.
fn live_in<'a>(recording: &'a Recording, kind: &str, method: &str) -> Vec<&'a Event> {
    recording
        .events
        .iter()
        .filter(|e| e.kind == kind && e.frames.iter().take(2).any(|f| f.method == method && f.class == "LiveLeak"))
        .collect()
}

/// `live`: after each round, a collection and a dump; the objects `keep`
/// retains are there dump after dump, growing, and those `drop` let go
/// are not.
#[test]
fn live_objects_show_the_leak_growing_dump_after_dump() {
    for (dialect, kind) in [("jdk", "profiler.LiveObject"), ("datadog", "datadog.HeapLiveObject")] {
        let dir = scratch_dir(&format!("live_leak_{dialect}"));
        let options = format!("start,alloc=64k,live,jfrdialect={dialect},file={}", dir.join("session.jfr").display());
        let output = run_java(Some(&options), "LiveLeak", &[dir.to_str().unwrap(), "4"], Duration::from_secs(60));
        assert_success(&output);
        let mut kept = Vec::new();
        for round in 0..4 {
            let file = dir.join(format!("live-{round}.jfr"));
            assert_jfr_tool_accepts(&file);
            let recording = read_recording(&file);
            assert_eq!(recording.settings.get("live").map(String::as_str), Some("true"));
            let live = live_in(&recording, kind, "keep");
            let dropped = live_in(&recording, kind, "drop");
            // The last array `drop` made may still be referenced.
            assert!(dropped.len() <= 1, "{dialect} round {round}: {} dropped objects reported live", dropped.len());
            let object = live.first().unwrap_or_else(|| panic!("{dialect} round {round}: no live object from keep"));
            assert!(object.field("objectClass").contains("name = \"[B\""), "{:?}", object.fields);
            assert!(object.frames.iter().any(|f| f.method == "main"), "{:?}", object.frames);
            if dialect == "datadog" {
                assert_eq!(object.field("size"), "1040", "{:?}", object.fields);
                let age: u64 = object.field("age").parse().unwrap();
                assert!(age >= 1 || round == 0, "survived a collection: {:?}", object.fields);
            } else {
                assert_eq!(object.field("allocationSize"), "1040", "{:?}", object.fields);
            }
            kept.push(live.len());
        }
        // 20,000 arrays of 1,040 bytes a round, sampled every 64 KiB: about
        // 320 more live objects a round.
        for pair in kept.windows(2) {
            assert!(pair[1] > pair[0] + 100, "{dialect}: live objects per dump {kept:?}");
        }
        // `symbolize --event live`: the live bytes are keep's, in either
        // dialect (Datadog's weight scales each object to the bytes its
        // sample stands for; async-profiler's event counts the object).
        let last = dir.join("live-3.jfr");
        let output = std::process::Command::new(symbolize_binary())
            .args(["collapsed", last.to_str().unwrap(), "--event", "live", "--no-debuginfod"])
            .output()
            .expect("run symbolize");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let collapsed = String::from_utf8_lossy(&output.stdout).into_owned();
        // The arrays' stacks (not those of the list's growing backing array).
        let bytes_in = |method: &str| -> u64 {
            collapsed
                .lines()
                .filter(|l| l.contains(method) && l.contains(";byte[] "))
                .filter_map(|l| l.rsplit_once(' ').and_then(|(_, n)| n.parse::<u64>().ok()))
                .sum()
        };
        let per_object = if dialect == "jdk" { 1040.0 } else { 64.0 * 1024.0 };
        let expected = kept[3] as f64 * per_object;
        let keep = bytes_in("LiveLeak.keep") as f64;
        assert!((keep / expected - 1.0).abs() < 0.2, "{dialect}: {keep} live bytes in keep, ~{expected} expected");
        assert!(bytes_in("LiveLeak.drop") as f64 <= per_object * 1.5, "{dialect}: {collapsed}");
        if dialect == "jdk" {
            // async-profiler's converter reads them too.
            let Some(jar) = converter_jar() else { continue };
            let collapsed = converter_collapsed_as(&jar, &last, &["--live"]);
            let count = |method: &str| -> i64 {
                collapsed
                    .iter()
                    .filter(|((_, frames), _)| frames.iter().any(|f| f.ends_with(method)))
                    .map(|(_, n)| n)
                    .sum()
            };
            assert!(count("LiveLeak.keep") as usize >= kept[3], "converter: {collapsed:?}");
            assert!(count("LiveLeak.drop") <= 1, "converter: {collapsed:?}");
        }
    }
}
