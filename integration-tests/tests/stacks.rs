//! Java stacks: deep stacks recorded whole up to `jstackdepth`, with the
//! right methods, descriptors and line numbers.

use integration_tests::*;
use std::time::Duration;

const DEPTH: usize = 350;

fn deep_samples(test: &str, extra_options: &str) -> Vec<Event> {
    let file = scratch_file(test, "deep.jfr");
    let options = format!("start,interval=2ms,file={}{extra_options}", file.display());
    let output = run_java(Some(&options), "DeepStack", &[&DEPTH.to_string(), "3"], Duration::from_secs(60));
    assert_success(&output);
    read_recording(&file).samples().filter(|e| e.thread == "deep").cloned().collect()
}

#[test]
fn deep_stacks_are_whole_with_correct_lines() {
    let samples = deep_samples("deep", "");
    let in_burn: Vec<&Event> = samples.iter().filter(|e| e.top().is_some_and(|f| f.method == "burn")).collect();
    assert!(in_burn.len() >= 200, "only {} samples in burn", in_burn.len());

    let descend_line = marked_line("DeepStack", "descend");
    let leaf_call_line = marked_line("DeepStack", "leaf-call");
    let burn_body_line = marked_line("DeepStack", "burn");
    let mut whole = 0;
    let mut burn_lines_ok = 0;
    for sample in &in_burn {
        assert!(!sample.truncated);
        let top = sample.top().unwrap();
        assert_eq!((top.class.as_str(), top.descriptor.as_str()), ("DeepStack", "(J)J"));
        // The loop header or its body.
        if (burn_body_line - 1..=burn_body_line).contains(&top.line) {
            burn_lines_ok += 1;
        }
        let descends: Vec<&Frame> = sample.frames.iter().filter(|f| f.method == "descend").collect();
        if descends.len() == DEPTH + 1 {
            whole += 1;
            assert!(descends.iter().all(|f| f.descriptor == "(IJ)J"));
            assert_eq!(descends[0].line, leaf_call_line, "the frame calling burn");
            assert!(descends[1..].iter().all(|f| f.line == descend_line), "recursive call sites");
            let bottom = sample.frames.last().unwrap();
            assert_eq!((bottom.class.as_str(), bottom.method.as_str()), ("java.lang.Thread", "run"));
        }
    }
    assert!(whole as f64 >= 0.95 * in_burn.len() as f64, "{whole} of {} stacks whole", in_burn.len());
    assert!(
        burn_lines_ok as f64 >= 0.9 * in_burn.len() as f64,
        "{burn_lines_ok} of {} on burn's loop lines",
        in_burn.len()
    );
}

#[test]
fn jstackdepth_cuts_and_marks_truncated() {
    let samples = deep_samples("deep_cut", ",jstackdepth=100");
    let in_burn: Vec<&Event> = samples.iter().filter(|e| e.top().is_some_and(|f| f.method == "burn")).collect();
    assert!(!in_burn.is_empty());
    for sample in in_burn {
        assert_eq!(sample.frames.len(), 100);
        assert!(sample.truncated);
    }
}
