//! Remote symbolication end to end: the agent records (build-id, offset)
//! frames for a stripped library whose hidden helpers the host cannot name,
//! and the symbolizer resolves them from the split-out debug file exactly
//! as binutils' addr2line does, inline frames included.

use integration_tests::*;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use symbolizer::debuginfo::{file_build_id, Locator};
use symbolizer::events::EventKind;
use symbolizer::profile::{self, Profile};
use symbolizer::recording::{self, Recording};
use symbolizer::resolve::{Resolution, Resolver, Tier};

struct Fixture {
    library: PathBuf,
    debug_file: PathBuf,
    debug_tree: PathBuf,
    build_id: String,
}

fn fixture(name: &str) -> Fixture {
    let library = native_fixture(name);
    let debug_file = library.with_file_name(format!("{name}.debug"));
    let build_id = file_build_id(&library).expect("fixture has a build-id");
    Fixture { debug_tree: library.with_file_name("debug"), library, debug_file, build_id }
}

fn record(test: &str, fixture: &Fixture, mode: &str, remotesym: bool) -> Recording {
    record_with(test, fixture, mode, remotesym, "fp")
}

fn record_with(test: &str, fixture: &Fixture, mode: &str, remotesym: bool, cstack: &str) -> Recording {
    let file = scratch_file(test, "remote.jfr");
    let options =
        format!("start,interval=1ms,overhead=0,cstack={cstack},remotesym={remotesym},file={}", file.display());
    let output = run_java(
        Some(&options),
        "RemoteChain",
        &[fixture.library.to_str().unwrap(), "3", mode],
        Duration::from_secs(60),
    );
    assert_success(&output);
    let outcome = recording::read(&file).unwrap();
    assert!(outcome.damage.is_empty(), "{:?}", outcome.damage);
    outcome.recording
}

fn resolver(debug_tree: &Path) -> Resolver {
    Resolver::new(Locator::new(&[debug_tree.to_path_buf()], &[], None).0)
}

/// The CPU profile of `recording`, its remote frames resolved from the
/// fixture's debug files.
fn resolved_profile(recording: &Recording, fixture: &Fixture) -> Profile {
    let mut resolver = resolver(&fixture.debug_tree);
    profile::build(recording, EventKind::Cpu, Some(&mut resolver)).0
}

/// `addr2line -f -i -e <debug file> <offset>`: (function, "file:line") pairs, innermost first.
fn addr2line(debug_file: &Path, offset: u64) -> Vec<(String, String)> {
    let out = Command::new("addr2line")
        .arg("-f")
        .arg("-i")
        .arg("-e")
        .arg(debug_file)
        .arg(format!("{offset:#x}"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    lines.chunks(2).map(|pair| (pair[0].to_owned(), pair.get(1).map_or("", |l| l).to_owned())).collect()
}

fn offsets(recording: &Recording, build_id: &str) -> HashSet<u64> {
    recording
        .samples()
        .flat_map(|s| recording.frames_of(s))
        .filter_map(|f| f.remote().filter(|(id, _)| *id == build_id).map(|(_, offset)| offset))
        .collect()
}

fn native_caller_stacks(profile: &Profile) -> Vec<Vec<&str>> {
    profile
        .samples
        .iter()
        .filter(|s| s.thread == "native-caller")
        .flat_map(|s| {
            // One stack per event the (folded) sample stands for.
            let stack: Vec<&str> = s.stack.iter().map(|&f| profile.frames[f as usize].name.as_str()).collect();
            std::iter::repeat_n(stack, s.events as usize)
        })
        .collect()
}

fn check_resolution(test: &str, library: &str, cstack: &str) {
    let fixture = fixture(library);
    let recording = record_with(test, &fixture, "chain", true, cstack);
    let offsets = offsets(&recording, &fixture.build_id);
    assert!(offsets.len() >= 4, "{test}: remote frames of the fixture: {offsets:?}");
    let mut resolver = resolver(&fixture.debug_tree);
    for &offset in &offsets {
        let Resolution::Frames(chain) = resolver.resolve(&fixture.build_id, offset) else {
            panic!("{test}: {offset:#x} did not resolve");
        };
        let ours: Vec<(String, String)> = chain
            .iter()
            .map(|f| {
                (
                    f.function.to_string(),
                    format!(
                        "{}:{}",
                        f.file.as_deref().unwrap_or("??"),
                        f.line.map_or("?".to_owned(), |l| l.to_string())
                    ),
                )
            })
            .collect();
        let expected: Vec<(String, String)> = addr2line(&fixture.debug_file, offset)
            .into_iter()
            .map(|(f, l)| (f, l.split(" (").next().unwrap().to_owned()))
            .collect();
        assert_eq!(ours, expected, "{test}: {offset:#x}");
    }
    let (profile, report) = profile::build(&recording, EventKind::Cpu, Some(&mut resolver));
    assert!(!report.problems.iter().any(|p| p.starts_with(&fixture.build_id)), "{test}: {report}");
    let stacks = native_caller_stacks(&profile);
    let in_leaf: Vec<&Vec<&str>> = stacks.iter().filter(|s| s.first() == Some(&"hot_leaf")).collect();
    let chain = ["hot_leaf", "inlined_step", "hot_middle", "hot_outer", "Java_RemoteChain_run", "RemoteChain.run"];
    let whole = in_leaf.iter().filter(|s| s.len() > chain.len() && s[..chain.len()] == chain).count();
    assert!(in_leaf.len() >= 500, "{test}: {} samples in hot_leaf", in_leaf.len());
    assert!(whole as f64 >= 0.9 * in_leaf.len() as f64, "{test}: {whole} of {} show the true chain", in_leaf.len());
}

#[test]
fn remote_frames_resolve_like_addr2line_with_inline_frames() {
    check_resolution("remote", "libremote.so", "fp");
}

/// The HotSpot walker resolves the native frames it meets by the same
/// contract: the same chain, symbolized the same way.
#[test]
fn remote_frames_mean_the_same_under_the_hotspot_walker() {
    check_resolution("remote_vm", "libremote.so", "vm");
    check_resolution("remote_vmx", "libremote.so", "vmx");
}

#[test]
fn a_library_linked_at_a_nonzero_address_resolves_too() {
    check_resolution("remote_offset", "libremote_offset.so", "fp");
}

/// Without remote symbolication the host cannot name the hidden helpers
/// (`[libremote.so+0x…]`); `symbolize` looks those frames up by the
/// library's build-id, from the recording's library list, and names them
/// from the debug file, or reports them unresolved.
#[test]
fn without_remote_symbolication_hidden_helpers_have_no_names_until_symbolized() {
    let fixture = fixture("libremote.so");
    let recording = record("remote_off", &fixture, "chain", false);
    let (profile, report) = profile::build(&recording, EventKind::Cpu, None);
    let stacks = native_caller_stacks(&profile);
    let in_native: Vec<&Vec<&str>> = stacks.iter().filter(|s| s.contains(&"Java_RemoteChain_run")).collect();
    assert!(in_native.len() >= 500);
    assert!(profile.frames.iter().all(|f| !f.name.contains("hot_")), "hidden helpers must not be nameable on the host");
    let unnamed = in_native.iter().filter(|s| s[0].starts_with("[libremote.so+0x")).count();
    assert!(unnamed as f64 >= 0.9 * in_native.len() as f64);
    // Not "everything resolved": the unnamed frames are counted, by library.
    assert!(report.tier(Tier::Unresolved) >= unnamed as u64, "{report}");
    assert!(report.libraries.get(&fixture.build_id).is_some_and(|l| l.name == "libremote.so"), "{report}");
    assert!(!report.to_string().contains("everything resolved"), "{report}");
    // With the debug file, the same recording names them.
    assert!(offsets(&recording, &fixture.build_id).len() >= 4);
    let profile = resolved_profile(&recording, &fixture);
    let stacks = native_caller_stacks(&profile);
    let in_leaf = stacks.iter().filter(|s| s.first() == Some(&"hot_leaf")).count();
    assert!(in_leaf as f64 >= 0.9 * unnamed as f64, "{in_leaf} of {unnamed} named hot_leaf");
}

#[test]
fn a_call_that_ends_a_function_is_attributed_to_the_caller() {
    let fixture = fixture("libremote.so");
    let recording = record("off_by_one", &fixture, "spin", true);
    let profile = resolved_profile(&recording, &fixture);
    let stacks = native_caller_stacks(&profile);
    let spinning: Vec<&Vec<&str>> = stacks.iter().filter(|s| s.first() == Some(&"spin_forever")).collect();
    assert!(spinning.len() >= 500, "{} samples in spin_forever", spinning.len());
    for stack in &spinning {
        assert_eq!(stack[1], "ends_with_call", "{stack:?}");
    }
    assert!(profile.frames.iter().all(|f| f.name != "function_after"));
}

#[test]
fn pprof_and_jfr_outputs_carry_resolved_names() {
    let fixture = fixture("libremote.so");
    let recording = record("remote_outputs", &fixture, "chain", true);
    let mut resolver = resolver(&fixture.debug_tree);
    let (profile, _) = profile::build(&recording, EventKind::Cpu, Some(&mut resolver));

    let encoded = symbolizer::pprof::encode(&symbolizer::pprof::to_pprof(&profile, 1_000_000));
    let mut raw = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&encoded[..]), &mut raw).unwrap();
    let decoded: symbolizer::pprof::PprofProfile = prost::Message::decode(&raw[..]).unwrap();
    let name =
        |id: u64| decoded.string_table[decoded.function.iter().find(|f| f.id == id).unwrap().name as usize].clone();
    let inline_location = decoded
        .location
        .iter()
        .find(|l| l.line.len() == 2 && name(l.line[0].function_id) == "inlined_step")
        .expect("a location with inlined_step inlined into hot_middle");
    assert_eq!(name(inline_location.line[1].function_id), "hot_middle");
    assert!(decoded.mapping.iter().any(|m| decoded.string_table[m.build_id as usize] == fixture.build_id));

    let copy = scratch_file("remote_outputs_jfr", "resolved.jfr");
    std::fs::write(&copy, symbolizer::jfr_out::rewrite(&recording, Some(&mut resolver))).unwrap();
    assert_jfr_tool_accepts(&copy);
    let resolved = read_recording(&copy);
    let named = resolved.samples().filter(|e| e.top().is_some_and(|f| f.method == "hot_leaf" && f.line > 0)).count();
    assert!(named >= 500, "{named} samples named hot_leaf in the JFR copy");
    // No frame of the fixture library stays unresolved (`[libchain.so+0x...]`).
    let library = fixture.library.file_name().unwrap().to_str().unwrap();
    let unresolved = |f: &Frame| f.method == "<remote>" || (f.class == library && f.method.starts_with('['));
    assert!(resolved.samples().all(|e| !e.frames.iter().any(unresolved)));
}

#[test]
fn libjvm_resolves_by_build_id_when_its_debug_package_is_installed() {
    let libjvm =
        test_java_home().unwrap_or_else(|| "/usr/lib/jvm/java-17-openjdk-amd64".into()).join("lib/server/libjvm.so");
    // The JDK's debug package is not installed by CI (hundreds of MB, and
    // it must match the JDK's exact build): an optional prerequisite.
    let Some(build_id) = file_build_id(&libjvm) else {
        return skip(
            &format!("{} is not a libjvm with a build-id (set JAVA_HOME or PROFILER_TEST_JAVA_HOME)", libjvm.display()),
            InCi::Optional,
        );
    };
    let debug = Path::new("/usr/lib/debug/.build-id").join(&build_id[..2]).join(format!("{}.debug", &build_id[2..]));
    if !debug.exists() {
        let reason = format!(
            "no debug file for libjvm ({build_id}) under /usr/lib/debug/.build-id; install the JDK's debug symbols \
             (openjdk-17-dbg for Debian's JDK 17)"
        );
        return skip(&reason, InCi::Optional);
    }
    let file = scratch_file("libjvm_remote", "jvm.jfr");
    run_recorded("interval=1ms,overhead=0,remotesym", &file, "CpuShares", &["2"], Duration::from_secs(60));
    let recording = recording::read(&file).unwrap().recording;
    let offsets = offsets(&recording, &build_id);
    assert!(!offsets.is_empty(), "libjvm frames were recorded remotely");
    let mut resolver = Resolver::new(Locator::new(&[], &[], None).0);
    let resolved = offsets.iter().filter(|&&o| matches!(resolver.resolve(&build_id, o), Resolution::Frames(_))).count();
    assert!(resolved as f64 >= 0.95 * offsets.len() as f64, "{resolved} of {}", offsets.len());
}
