//! A self-contained interactive HTML flame graph (zoom, search, tooltips),
//! with the call tree embedded as flat arrays (no nesting limit on depth).

use crate::profile::Profile;
use frames::FrameType;
use std::collections::HashMap;
use std::fmt::Write;

const TEMPLATE: &str = include_str!("../assets/flamegraph.html");

struct Node {
    name: u32,
    kind: u8,
    parent: u32,
    total: u64,
}

/// The template's palette index of a frame type (`None`: the root, thread
/// levels and types we never write).
fn kind_color_index(kind: Option<FrameType>) -> u8 {
    match kind {
        Some(FrameType::JitCompiled) => 0,
        Some(FrameType::Interpreted) => 1,
        Some(FrameType::Inlined) => 2,
        Some(FrameType::C1Compiled) => 3,
        Some(FrameType::Native) => 4,
        Some(FrameType::Cpp) => 5,
        Some(FrameType::Kernel) => 6,
        Some(FrameType::RemoteNative) => 7,
        None => 8,
    }
}

/// Builds the call tree (root first) with the thread name as the first
/// level when `by_thread` is set.
fn tree(profile: &Profile, by_thread: bool) -> (Vec<String>, Vec<Node>) {
    let mut names: Vec<String> = vec!["all".to_owned()];
    let mut name_index: HashMap<String, u32> = HashMap::new();
    let mut intern = |names: &mut Vec<String>, name: &str| -> u32 {
        *name_index.entry(name.to_owned()).or_insert_with(|| {
            names.push(name.to_owned());
            names.len() as u32 - 1
        })
    };
    let mut nodes = vec![Node { name: 0, kind: kind_color_index(None), parent: 0, total: 0 }];
    let mut child_of: HashMap<(u32, u32, u8), u32> = HashMap::new();
    for sample in &profile.samples {
        nodes[0].total += sample.weight;
        let mut current = 0u32;
        let thread_level = by_thread.then(|| (intern(&mut names, &sample.thread), kind_color_index(None)));
        let frames = sample.stack.iter().rev().map(|&f| {
            let frame = &profile.frames[f as usize];
            (intern(&mut names, &frame.name), kind_color_index(frame.kind))
        });
        for (name, kind) in thread_level.into_iter().chain(frames.collect::<Vec<_>>()) {
            let next = *child_of.entry((current, name, kind)).or_insert_with(|| {
                nodes.push(Node { name, kind, parent: current, total: 0 });
                nodes.len() as u32 - 1
            });
            nodes[next as usize].total += sample.weight;
            current = next;
        }
    }
    (names, nodes)
}

fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '<' => out.push_str("\\u003c"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json_array<T: std::fmt::Display>(values: impl Iterator<Item = T>) -> String {
    let mut out = String::from("[");
    for (i, v) in values.enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{v}");
    }
    out.push(']');
    out
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Renders the profile as an HTML page (weights in the profile's unit).
pub fn render(profile: &Profile, title: &str, by_thread: bool) -> String {
    let (names, nodes) = tree(profile, by_thread);
    let mut names_json = String::from("[");
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            names_json.push(',');
        }
        json_string(&mut names_json, name);
    }
    names_json.push(']');
    TEMPLATE
        .replace("%UNITS%", profile.kind.unit().name())
        .replace("%TITLE%", &html_escape(title))
        .replace("%NAMES%", &names_json)
        .replace("%NODE_NAME%", &json_array(nodes.iter().map(|n| n.name)))
        .replace("%NODE_KIND%", &json_array(nodes.iter().map(|n| n.kind)))
        .replace("%NODE_PARENT%", &json_array(nodes.iter().map(|n| n.parent)))
        .replace("%NODE_TOTAL%", &json_array(nodes.iter().map(|n| n.total)))
}
