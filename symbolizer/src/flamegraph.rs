//! A self-contained interactive HTML flame graph (zoom, search, tooltips),
//! with the call tree embedded as flat arrays (no nesting limit on depth).

use crate::profile::Profile;
use frames::FrameType;
use rustc_hash::FxHashMap;
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

/// Builds the call tree (root first, parents before children, children
/// in the order of their names) with the thread name as the first level
/// when `by_thread` is set.
fn tree<'a>(profile: &'a Profile, by_thread: bool) -> (Vec<&'a str>, Vec<Node>) {
    let mut names: Vec<&str> = vec!["all"];
    let mut name_index: FxHashMap<&str, u32> = FxHashMap::default();
    let mut intern = |names: &mut Vec<&'a str>, name: &'a str| -> u32 {
        *name_index.entry(name).or_insert_with(|| {
            names.push(name);
            names.len() as u32 - 1
        })
    };
    let frames: Vec<u32> = profile.frames.iter().map(|f| intern(&mut names, f.name.as_str())).collect();
    let threads: Vec<u32> = match by_thread {
        true => profile.samples.iter().map(|s| intern(&mut names, s.thread.as_str())).collect(),
        false => Vec::new(),
    };
    // Names ranked alphabetically: a level is (rank, colour), and the
    // samples sorted by their levels put every stack that shares a prefix
    // next to the others, so each node is made once, by the first of them.
    let mut rank = vec![0u32; names.len()];
    let mut alphabetical: Vec<u32> = (0..names.len() as u32).collect();
    alphabetical.sort_unstable_by_key(|&n| names[n as usize]);
    for (r, &n) in alphabetical.iter().enumerate() {
        rank[n as usize] = r as u32;
    }
    let none = kind_color_index(None);
    let mut samples: Vec<(Vec<(u32, u8)>, u64)> = profile
        .samples
        .iter()
        .enumerate()
        .map(|(i, sample)| {
            let thread_level = threads.get(i).map(|&thread| (rank[thread as usize], none));
            let frames = sample
                .stack
                .iter()
                .rev()
                .map(|&f| (rank[frames[f as usize] as usize], kind_color_index(profile.frames[f as usize].kind)));
            (thread_level.into_iter().chain(frames).collect(), sample.weight)
        })
        .collect();
    samples.sort_unstable();
    let mut nodes = vec![Node { name: 0, kind: none, parent: 0, total: 0 }];
    let mut path: Vec<((u32, u8), u32)> = Vec::new();
    for (levels, weight) in samples {
        let shared = path.iter().zip(&levels).take_while(|((level, _), next)| level == *next).count();
        path.truncate(shared);
        for &(name_rank, kind) in &levels[shared..] {
            let parent = path.last().map_or(0, |&(_, node)| node);
            nodes.push(Node { name: alphabetical[name_rank as usize], kind, parent, total: 0 });
            path.push(((name_rank, kind), nodes.len() as u32 - 1));
        }
        let leaf = path.last().map_or(0, |&(_, node)| node);
        nodes[leaf as usize].total += weight;
    }
    // Children after their parents: totals add up from the last node.
    for i in (1..nodes.len()).rev() {
        let (parent, total) = (nodes[i].parent as usize, nodes[i].total);
        nodes[parent].total += total;
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
