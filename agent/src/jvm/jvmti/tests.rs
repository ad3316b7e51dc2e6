//! Checks our slot numbers, capability bits, event numbers and callback
//! table size against the JDK's `jvmti.h`.

use super::capabilities::REQUESTED;
use super::events::{Event, EventCallbacks, FIRST_EVENT, LAST_EVENT};
use super::BOUND_SLOTS;
use std::collections::HashMap;
use std::path::PathBuf;

/// The JDK under test's home: `$JAVA_HOME`, else `javac`'s.
pub(crate) fn java_home() -> PathBuf {
    if let Ok(home) = std::env::var("JAVA_HOME") {
        return PathBuf::from(home);
    }
    // `javac` lives in $JAVA_HOME/bin.
    let javac = std::process::Command::new("sh")
        .args(["-c", "readlink -f \"$(command -v javac)\""])
        .output()
        .expect("locate javac");
    let path = PathBuf::from(String::from_utf8(javac.stdout).unwrap().trim());
    path.parent().and_then(|bin| bin.parent()).expect("JAVA_HOME from javac").to_path_buf()
}

fn jvmti_h() -> String {
    let path = java_home().join("include/jvmti.h");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Slot number → function name, from `/* n : ... */` comments followed by
/// `(JNICALL *Name)`.
fn function_slots(header: &str) -> HashMap<usize, String> {
    let body = &header[header.find("typedef struct jvmtiInterface_1_").expect("function table")..];
    let mut slots = HashMap::new();
    let mut pending: Option<usize> = None;
    for line in body.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("/*") {
            if let Some((number, _)) = rest.split_once(':') {
                pending = number.trim().parse().ok();
            }
        } else if let (Some(n), Some(start)) = (pending, line.find("(JNICALL *")) {
            let name = &line[start + "(JNICALL *".len()..];
            slots.insert(n, name[..name.find(')').unwrap()].to_owned());
            pending = None;
        }
        if line.starts_with("} jvmtiInterface_1;") {
            break;
        }
    }
    slots
}

#[test]
fn bound_slots_match_jvmti_h() {
    let slots = function_slots(&jvmti_h());
    for slot in BOUND_SLOTS {
        assert_eq!(slots.get(&slot.number).map(String::as_str), Some(slot.name), "slot {}", slot.number);
    }
}

#[test]
fn capability_bits_match_jvmti_h() {
    let header = jvmti_h();
    let start = header.find("unsigned int can_tag_objects").expect("capabilities struct");
    let names: Vec<&str> = header[start..]
        .lines()
        .map_while(|l| l.trim().strip_prefix("unsigned int "))
        .filter_map(|l| l.split_whitespace().next().filter(|n| n.starts_with("can_")))
        .collect();
    for capability in REQUESTED {
        assert_eq!(names.get(capability.bit).copied(), Some(capability.name));
    }
}

#[test]
fn event_numbers_and_callback_table_match_jvmti_h() {
    let header = jvmti_h();
    for (event, name) in Event::ALL {
        let needle = format!("{name} = {},", event as i32);
        assert!(header.contains(&needle), "{needle}");
    }
    let callbacks = &header[..header.find("} jvmtiEventCallbacks;").unwrap()];
    let start = callbacks.rfind("typedef struct {").unwrap();
    let entries = callbacks[start..].lines().filter(|l| l.trim_end().ends_with(';')).count();
    // JDK 11 to 17 declare 37 slots; newer JDKs append (and accept our size).
    assert!(entries > LAST_EVENT - FIRST_EVENT, "{entries} callback slots");
    assert_eq!(std::mem::size_of::<EventCallbacks>(), (LAST_EVENT - FIRST_EVENT + 1) * 8);
}
