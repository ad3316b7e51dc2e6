//! The overhead governor on a real JVM: what it stretches and what it
//! leaves alone, and that a stretched profile still weighs its phases by
//! the CPU time they took.

use integration_tests::readers::{has_frame, symbolize_collapsed, weight_of};
use integration_tests::*;
use std::time::Duration;

/// Deadline for a JVM that should exit on its own within seconds. It only
/// detects a hang (the test fails on expiry); nothing waits for it.
const HANG: Duration = Duration::from_secs(120);

/// Held by each test while its JVM runs: the governor weighs the
/// profiler's cost against the application's CPU, which JVMs running side
/// by side on a small machine take from each other.
static ONE_JVM_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_jvm_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_JVM_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

/// The setting `name` in nanoseconds (`"1000000 ns"`).
fn nanos(recording: &Recording, name: &str) -> u64 {
    recording.settings[name]
        .strip_suffix(" ns")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("setting {name} is not in nanoseconds: {:?}", recording.settings.get(name)))
}

/// CPU sampling at its floor (100 us) and wall clock at 1 ms on two busy
/// threads cost far more than `overhead=1` (1% of the application's
/// CPU): the intervals are stretched, counted, recorded as settings,
/// each stretch logged with the delivery cost the governor measured.
#[test]
fn the_overhead_governor_stretches_intervals_past_its_ceiling() {
    let _alone = one_jvm_at_a_time();
    let file = scratch_file("governor-stretch", "governed.jfr");
    let output = run_recorded("cpu=100us,wall=1ms,overhead=1", &file, "CpuShares", &["5"], HANG);
    let recording = read_recording(&file);
    let stretches = recording.counter("overhead_stretches");
    println!("{stretches} stretches; settings {:?}", recording.settings);
    assert!(stretches >= 1);
    assert_eq!(recording.settings.get("overhead").map(String::as_str), Some("1%"));
    let stretch: u64 = recording.settings["overhead_stretch"].parse().unwrap();
    assert!(stretch >= 2 && stretch.is_power_of_two(), "{stretch}");
    assert_eq!(nanos(&recording, "interval"), 100_000 * stretch, "the interval in force");
    assert_eq!(nanos(&recording, "wall"), 1_000_000 * stretch);
    // Each signal's delivery, measured at start, is part of the cost.
    let signal_cost = nanos(&recording, "signal_cost");
    let wall_signal_cost = nanos(&recording, "wall_signal_cost");
    assert!(signal_cost < 200_000 && wall_signal_cost < 200_000, "{signal_cost} ns, {wall_signal_cost} ns a signal");
    let err = stderr(&output);
    assert_eq!(err.matches("above overhead=1%").count() as i64, stretches, "every stretch logged: {err}");
    assert!(
        err.contains(&format!("charged at {signal_cost} ns by CPU engines, {wall_signal_cost} ns wall-clock")),
        "{err}"
    );
    // Each stretch starts a chunk: the settings of each say what it was
    // sampled at.
    assert!(recording.counter("chunks_written") > stretches, "{}", recording.counter("chunks_written"));
}

/// Two busy threads sampled every millisecond with default options (about
/// what async-profiler costs at that rate, a few percent of the
/// application's CPU): the governor leaves the interval alone.
#[test]
fn two_busy_threads_at_1ms_are_not_stretched_by_default() {
    let _alone = one_jvm_at_a_time();
    let file = scratch_file("governor-1ms", "default.jfr");
    let output = run_recorded("cpu=1ms", &file, "CpuShares", &["5"], HANG);
    let recording = read_recording(&file);
    let handled = recording.counter("cpu_signals_handled");
    let handler = recording.counter("handler_ns_total");
    println!(
        "{handled} signals, {} ns handler mean, signal cost {}",
        handler / handled.max(1),
        recording.settings["signal_cost"]
    );
    assert_eq!(recording.counter("overhead_stretches"), 0, "{}", stderr(&output));
    assert_eq!(nanos(&recording, "interval"), 1_000_000);
    assert!(!recording.settings.contains_key("overhead_stretch"));
}

/// CPU sampling at 100 us with default options is stretched early in the
/// first of two phases of equal CPU time, so the first phase has far more
/// samples than the second; weighed by the interval each chunk was taken
/// at (each stretch starts a chunk that says so), the profile still reads
/// the phases half and half.
#[test]
fn a_stretched_profile_weighs_each_sample_by_its_interval() {
    let _alone = one_jvm_at_a_time();
    let file = scratch_file("governor-phases", "phases.jfr");
    run_recorded("cpu=100us", &file, "Phases", &["3000"], HANG);
    let recording = read_recording(&file);
    let stretch: u64 = recording.settings["overhead_stretch"].parse().expect("stretched");
    let collapsed = symbolize_collapsed(&file, &[]);
    let first = weight_of(&collapsed, |frames| has_frame(frames, "Phases.firstPhase"));
    let second = weight_of(&collapsed, |frames| has_frame(frames, "Phases.secondPhase"));
    let events_first = recording.samples().filter(|s| s.frames.iter().any(|f| f.method == "firstPhase")).count();
    let events_second = recording.samples().filter(|s| s.frames.iter().any(|f| f.method == "secondPhase")).count();
    let share = first as f64 / (first + second) as f64;
    println!(
        "stretched {stretch}x; events {events_first} / {events_second}; weighed {first} / {second}: {:.1}% first",
        share * 100.0
    );
    assert!(
        events_first > events_second * 6 / 5,
        "the first phase is sampled faster: {events_first} / {events_second}"
    );
    assert!((share - 0.5).abs() <= 0.05, "the phases read {:.1}% / {:.1}%", share * 100.0, 100.0 - share * 100.0);
}
