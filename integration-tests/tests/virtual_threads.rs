//! Virtual threads (JDK 21+) on the JVM under test: CPU and wall-clock
//! samples of a virtual thread carry its own Java frames and, below them,
//! its carrier's, with both Java sources (AsyncGetCallTrace and the HotSpot
//! walker). On a JDK without virtual threads the tests skip visibly.

use integration_tests::*;
use std::time::Duration;

/// The virtual thread's frames, innermost first: the known method and its
/// callers in the fixture.
const VIRTUAL: [&str; 3] = ["spin", "step", "task"];
/// The carrier's frames below a mounted virtual thread's: the continuation
/// entry and the scheduler's call that mounted it.
const CARRIER: [&str; 2] = ["enterSpecial", "runContinuation"];

/// The frame types of Java frames.
const JAVA: [&str; 4] = ["Interpreted", "JIT compiled", "C1 compiled", "Inlined"];

/// Whether `frames` hold these methods in this order (others may come between).
fn in_order(frames: &[Frame], methods: &[&str]) -> bool {
    let mut rest = frames.iter();
    methods.iter().all(|m| rest.any(|f| f.method == *m))
}

/// Runs ManyVirtualThreads (1,000 threads, 3 s) under `options`; `None`
/// (after a visible skip) on a JDK without virtual threads.
fn record(test: &str, options: &str) -> Option<Recording> {
    let file = scratch_file(test, "virtual.jfr");
    // overhead=0: samples are counted against the intervals asked for.
    let output = run_recorded(
        &format!("{options},overhead=0"),
        &file,
        "ManyVirtualThreads",
        &["1000", "3"],
        Duration::from_secs(120),
    );
    let out = stdout(&output);
    if out.contains("NO_VIRTUAL_THREADS") {
        let feature = summary_value(&out, "JAVA");
        skip(&format!("JDK {feature} has no virtual threads"), InCi::Optional);
        return None;
    }
    assert!(summary_value(&out, "ROUNDS") >= 1000, "every thread worked: {out}");
    Some(read_recording(&file))
}

/// Of the samples whose innermost Java frame is `spin`, at least 90% show
/// the virtual thread's callers and then its carrier's frames.
fn assert_virtual_stacks(label: &str, samples: Vec<&Event>) {
    let innermost_java = |e: &Event| e.frames.iter().find(|f| JAVA.contains(&f.frame_type.as_str())).cloned();
    let in_spin: Vec<&Event> =
        samples.into_iter().filter(|e| innermost_java(e).is_some_and(|f| f.method == "spin")).collect();
    let whole: Vec<&Event> =
        in_spin.iter().copied().filter(|e| in_order(&e.frames, &[&VIRTUAL[..], &CARRIER[..]].concat())).collect();
    println!(
        "{label}: {} of {} samples in spin show spin, step, task, enterSpecial, runContinuation",
        whole.len(),
        in_spin.len()
    );
    assert!(in_spin.len() >= 300, "{label}: only {} samples in spin", in_spin.len());
    let example = in_spin.iter().find(|e| !whole.iter().any(|w| std::ptr::eq(*w, **e)));
    assert!(
        whole.len() * 10 >= in_spin.len() * 9,
        "{label}: {} of {} samples whole; e.g. {:?}",
        whole.len(),
        in_spin.len(),
        example.map(|e| e.frames.iter().map(|f| f.method.as_str()).collect::<Vec<_>>())
    );
}

/// 1,000 virtual threads burning CPU in a known method and parking or
/// sleeping between bursts, sampled by CPU time and wall clock with
/// AsyncGetCallTrace (`javawalk=asgct`).
#[test]
fn virtual_thread_samples_show_their_frames_with_async_get_call_trace() {
    let Some(recording) = record("virtual-asgct", "cpu=1ms,wall=5ms,cstack=fp,javawalk=asgct") else { return };
    assert_virtual_stacks("cpu, AsyncGetCallTrace", recording.samples().collect());
    assert_virtual_stacks("wall, AsyncGetCallTrace", recording.wall_samples().collect());
}

/// The same with the HotSpot walker (`cstack=vm`), checked against
/// AsyncGetCallTrace sample by sample (`verifywalk`).
#[test]
fn virtual_thread_samples_show_their_frames_with_the_hotspot_walker() {
    let Some(recording) = record("virtual-vm", "cpu=1ms,wall=5ms,cstack=vm,verifywalk") else { return };
    assert_walks_agree("virtual threads, cstack=vm", &recording);
    assert_virtual_stacks("cpu, cstack=vm", recording.samples().collect());
    assert_virtual_stacks("wall, cstack=vm", recording.wall_samples().collect());
}
