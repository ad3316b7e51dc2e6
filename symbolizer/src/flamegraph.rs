//! A self-contained interactive HTML flame graph (zoom, search, tooltips),
//! with the call tree embedded as flat arrays (no nesting limit on depth);
//! and the differential flame graph of two profiles, drawn by the same
//! page with its own colours and tooltips ([`render_diff`]).

use crate::profile::Profile;
use frames::FrameType;
use rustc_hash::FxHashMap;
use std::fmt::Write;

const TEMPLATE: &str = include_str!("../assets/flamegraph.html");
/// What a differential page adds to the template's script.
const DIFF_SCRIPT: &str = include_str!("../assets/flamegraph_diff.js");
/// The id of the element holding a differential page's data (JSON).
pub const DIFF_DATA_ID: &str = "diff-data";

struct Node {
    name: u32,
    kind: u8,
    parent: u32,
    /// The weight under the node in each profile the tree was built from
    /// (one, or two for a differential graph).
    totals: [u64; 2],
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

/// Builds the call tree of one or two profiles (`sides`; root first,
/// parents before children, children in the order of their names) with the
/// thread name as the first level when `by_thread` is set: a node is a path
/// of frames any side has, with each side's weight under it.
fn tree<'a>(sides: &[&'a Profile], by_thread: bool) -> (Vec<&'a str>, Vec<Node>) {
    assert!(sides.len() <= 2, "a tree of one or two profiles");
    let mut names: Vec<&str> = vec!["all"];
    let mut name_index: FxHashMap<&str, u32> = FxHashMap::default();
    let mut intern = |names: &mut Vec<&'a str>, name: &'a str| -> u32 {
        *name_index.entry(name).or_insert_with(|| {
            names.push(name);
            names.len() as u32 - 1
        })
    };
    let frames: Vec<Vec<u32>> =
        sides.iter().map(|p| p.frames.iter().map(|f| intern(&mut names, f.name.as_str())).collect()).collect();
    let threads: Vec<Vec<u32>> = sides
        .iter()
        .map(|p| match by_thread {
            true => p.samples.iter().map(|s| intern(&mut names, s.thread.as_str())).collect(),
            false => Vec::new(),
        })
        .collect();
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
    // A stack's levels (root first), its side and its weight.
    type Sample = (Vec<(u32, u8)>, usize, u64);
    let mut samples: Vec<Sample> = Vec::new();
    for (side, profile) in sides.iter().enumerate() {
        samples.extend(profile.samples.iter().enumerate().map(|(i, sample)| {
            let thread_level = threads[side].get(i).map(|&thread| (rank[thread as usize], none));
            let frames =
                sample.stack.iter().rev().map(|&f| {
                    (rank[frames[side][f as usize] as usize], kind_color_index(profile.frames[f as usize].kind))
                });
            (thread_level.into_iter().chain(frames).collect(), side, sample.weight)
        }));
    }
    samples.sort_unstable();
    let mut nodes = vec![Node { name: 0, kind: none, parent: 0, totals: [0; 2] }];
    let mut path: Vec<((u32, u8), u32)> = Vec::new();
    for (levels, side, weight) in samples {
        let shared = path.iter().zip(&levels).take_while(|((level, _), next)| level == *next).count();
        path.truncate(shared);
        for &(name_rank, kind) in &levels[shared..] {
            let parent = path.last().map_or(0, |&(_, node)| node);
            nodes.push(Node { name: alphabetical[name_rank as usize], kind, parent, totals: [0; 2] });
            path.push(((name_rank, kind), nodes.len() as u32 - 1));
        }
        let leaf = path.last().map_or(0, |&(_, node)| node);
        nodes[leaf as usize].totals[side] += weight;
    }
    // Children after their parents: totals add up from the last node.
    for i in (1..nodes.len()).rev() {
        let (parent, totals) = (nodes[i].parent as usize, nodes[i].totals);
        for (sum, total) in nodes[parent].totals.iter_mut().zip(totals) {
            *sum += total;
        }
    }
    (names, nodes)
}

pub(crate) fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '<' => out.push_str("\\u003c"),
            // Never a template's placeholder (`%NAMES%`, `/*%SCRIPT%*/`).
            '%' => out.push_str("\\u0025"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

pub(crate) fn json_array<T: std::fmt::Display>(values: impl Iterator<Item = T>) -> String {
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

pub(crate) fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('%', "&#37;")
}

/// What the template is filled with.
struct Page<'a> {
    title: &'a str,
    units: &'a str,
    names: &'a [&'a str],
    nodes: &'a [Node],
    /// Each node's width (its weight, or what stands for it).
    widths: String,
    /// An element the page's script reads (a differential page's data).
    data: String,
    /// Script run before the graph is drawn (a differential page's
    /// colours, tooltips and status line).
    script: &'a str,
}

fn fill(page: Page) -> String {
    let mut names_json = String::from("[");
    for (i, name) in page.names.iter().enumerate() {
        if i > 0 {
            names_json.push(',');
        }
        json_string(&mut names_json, name);
    }
    names_json.push(']');
    // The page's own pieces last: nothing they hold is taken for a
    // placeholder.
    TEMPLATE
        .replace("%UNITS%", page.units)
        .replace("%TITLE%", &html_escape(page.title))
        .replace("%NAMES%", &names_json)
        .replace("%NODE_NAME%", &json_array(page.nodes.iter().map(|n| n.name)))
        .replace("%NODE_KIND%", &json_array(page.nodes.iter().map(|n| n.kind)))
        .replace("%NODE_PARENT%", &json_array(page.nodes.iter().map(|n| n.parent)))
        .replace("%NODE_TOTAL%", &page.widths)
        .replace("/*%SCRIPT%*/", page.script)
        .replace("<!--%DATA%-->", &page.data)
}

/// Renders the profile as an HTML page (weights in the profile's unit).
pub fn render(profile: &Profile, title: &str, by_thread: bool) -> String {
    let (names, nodes) = tree(&[profile], by_thread);
    fill(Page {
        title,
        units: profile.kind.unit().name(),
        names: &names,
        widths: json_array(nodes.iter().map(|n| n.totals[0])),
        nodes: &nodes,
        data: String::new(),
        script: "",
    })
}

/// A node's share of each side's total weight (0 when a side has none).
pub fn shares(totals: [u64; 2], of: [u64; 2]) -> [f64; 2] {
    [0, 1].map(|side| if of[side] == 0 { 0.0 } else { totals[side] as f64 / of[side] as f64 })
}

/// The width a differential graph gives a node: the mean of its two
/// shares, so that a frame only one side has is seen, and children never
/// outgrow their parent.
pub fn diff_width([before, after]: [f64; 2]) -> f64 {
    (before + after) / 2.0
}

/// Renders the differential flame graph of `before` and `after` (of one
/// event kind): the union of both call trees, each node as wide as the
/// mean of its two shares of its profile's total, coloured by the change
/// of its share (red: grows, blue: shrinks); the page holds, as JSON in
/// the element [`DIFF_DATA_ID`], each node's name, parent and shares.
pub fn render_diff(before: &Profile, after: &Profile, names: [&str; 2], title: &str, by_thread: bool) -> String {
    let (frame_names, nodes) = tree(&[before, after], by_thread);
    let of = nodes[0].totals;
    let mut data = String::from("{\"before\":{\"name\":");
    json_string(&mut data, names[0]);
    let _ = write!(data, ",\"total\":{}}},\"after\":{{\"name\":", of[0]);
    json_string(&mut data, names[1]);
    let _ = write!(data, ",\"total\":{}}},\"units\":\"{}\",\"nodes\":[", of[1], after.kind.unit().name());
    for (i, node) in nodes.iter().enumerate() {
        let [b, a] = shares(node.totals, of);
        data.push_str(if i == 0 { "{\"name\":" } else { ",{\"name\":" });
        json_string(&mut data, frame_names[node.name as usize]);
        let _ = write!(data, ",\"parent\":{},\"before\":{b},\"after\":{a}}}", node.parent);
    }
    data.push_str("]}");
    fill(Page {
        title,
        units: after.kind.unit().name(),
        names: &frame_names,
        widths: json_array(nodes.iter().map(|n| diff_width(shares(n.totals, of)))),
        nodes: &nodes,
        data: format!("<script type=\"application/json\" id=\"{DIFF_DATA_ID}\">{data}</script>"),
        script: DIFF_SCRIPT,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventKind;
    use crate::profile::{ProfileSample, StackFrame};

    /// Names from a recording never stand in for the page's placeholders.
    #[test]
    fn recorded_names_cannot_fill_placeholders() {
        let page = render(&profile(&[(&["main", "/*%SCRIPT%*/", "<!--%DATA%-->"], 1)]), "%NAMES% title", false);
        assert!(page.contains("\\u0025SCRIPT\\u0025") && page.contains("&#37;NAMES&#37; title"), "escaped");
        assert!(!page.contains("%NAMES%") && !page.contains("%SCRIPT%"), "every placeholder filled once");
    }

    /// A profile of stacks (root first) with their weights.
    fn profile(stacks: &[(&[&str], u64)]) -> Profile {
        let mut profile = Profile::new(EventKind::Cpu);
        for (names, weight) in stacks {
            let frame = |name: &str| StackFrame {
                name: name.to_owned(),
                kind: Some(FrameType::JitCompiled),
                file: None,
                line: None,
                remote: None,
                inlined: false,
            };
            let stack = names.iter().rev().map(|n| profile.intern(frame(n))).collect();
            profile.samples.push(ProfileSample { thread: "t".to_owned(), weight: *weight, events: 1, stack });
        }
        profile
    }

    /// The hot method moves from a to b, between profiles of different
    /// lengths: each side is read as shares of its own total, a frame
    /// only one side has is in the tree, and widths never outgrow their
    /// parent's.
    #[test]
    fn a_diff_compares_each_frames_share_of_its_side() {
        let before = profile(&[(&["main", "a"], 90), (&["main", "c"], 10)]);
        let after = profile(&[(&["main", "b"], 300), (&["main", "c"], 100)]);
        let (names, nodes) = tree(&[&before, &after], false);
        let of = nodes[0].totals;
        assert_eq!(of, [100, 400]);
        let by_name = |name: &str| {
            let node = nodes.iter().find(|n| names[n.name as usize] == name).unwrap();
            shares(node.totals, of)
        };
        assert_eq!(by_name("main"), [1.0, 1.0]);
        assert_eq!(by_name("a"), [0.9, 0.0], "only before: still a node");
        assert_eq!(by_name("b"), [0.0, 0.75]);
        assert_eq!(by_name("c"), [0.1, 0.25], "grows: a quarter after, a tenth before");
        let children: f64 = ["a", "b", "c"].map(|n| diff_width(by_name(n))).iter().sum();
        assert!((children - diff_width(by_name("main"))).abs() < 1e-12, "{children}");
        assert_eq!(shares([3, 0], [0, 0]), [0.0, 0.0], "an empty side has no share");

        // The page holds the same, as JSON, for a test or a tool to read.
        let page = render_diff(&before, &after, ["b.jfr", "a.jfr"], "t", false);
        let json = page.split(&format!("id=\"{DIFF_DATA_ID}\">")).nth(1).unwrap().split("</script>").next().unwrap();
        let data: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!((data["before"]["total"].as_u64(), data["after"]["name"].as_str()), (Some(100), Some("a.jfr")));
        let nodes = data["nodes"].as_array().unwrap();
        let node = |name: &str| nodes.iter().find(|n| n["name"] == name).unwrap();
        assert_eq!((node("a")["before"].as_f64(), node("a")["after"].as_f64()), (Some(0.9), Some(0.0)));
        assert_eq!((node("c")["before"].as_f64(), node("c")["after"].as_f64()), (Some(0.1), Some(0.25)));
        assert_eq!(nodes[node("c")["parent"].as_u64().unwrap() as usize]["name"], "main");
        assert!(page.contains("fillOf = (node) =>") && !page.contains("%SCRIPT%"), "the diff's colours");
        // A plain flame graph is the page it was: no data element, no script.
        let plain = render(&after, "t", false);
        assert!(!plain.contains(DIFF_DATA_ID) && !plain.contains("%DATA%") && !plain.contains("%SCRIPT%"));
    }
}
