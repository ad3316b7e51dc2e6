//! Collapsed stacks (`frame;frame;frame weight`, outermost first), the
//! input format of flamegraph.pl, speedscope and many other tools.

use crate::profile::Profile;
use std::collections::HashMap;
use std::fmt::Write;

/// One line per distinct stack, sorted. With `by_thread`, the thread name
/// is the outermost frame.
pub fn collapse(profile: &Profile, by_thread: bool) -> String {
    let names: Vec<String> = profile.frames.iter().map(|f| f.name.replace(';', ":")).collect();
    // Samples of one stack (and thread) added up first, each distinct
    // stack spelled once.
    let mut folded: HashMap<(&[u32], &str), u64> = HashMap::new();
    // A sample without frames (another writer's; ours carry a marker
    // frame) has no stack to show: left out, as async-profiler's converter
    // leaves it out.
    for sample in profile.samples.iter().filter(|s| !s.stack.is_empty()) {
        let thread = if by_thread { sample.thread.as_str() } else { "" };
        *folded.entry((&sample.stack, thread)).or_default() += sample.weight;
    }
    let mut lines: Vec<(String, u64)> = folded
        .into_iter()
        .map(|((stack, thread), weight)| {
            let mut key = thread.replace(';', ":");
            for &frame in stack.iter().rev() {
                if !key.is_empty() {
                    key.push(';');
                }
                key.push_str(&names[frame as usize]);
            }
            (key, weight)
        })
        .collect();
    lines.sort_unstable();
    // Stacks that read the same (equal names) are one line.
    lines.dedup_by(|next, kept| {
        let same = next.0 == kept.0;
        if same {
            kept.1 += next.1;
        }
        same
    });
    let mut out = String::with_capacity(lines.iter().map(|(key, _)| key.len() + 12).sum());
    for (stack, weight) in lines {
        let _ = writeln!(out, "{stack} {weight}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventKind;
    use crate::profile::{self, Profile};
    use crate::recording::Recording;
    use crate::testing::*;

    fn build(recording: &Recording, _: Option<()>) -> (Profile, ()) {
        (profile::build(recording, EventKind::Cpu, None).0, ())
    }

    #[test]
    fn stacks_are_outermost_first_summed_and_sorted() {
        let samples = vec![
            sample("w", 2, vec![java("app/B", "leaf", 1), java("app/Main", "main", 1)]),
            sample("w", 3, vec![java("app/A", "leaf", 1), java("app/Main", "main", 1)]),
            sample("x", 4, vec![java("app/B", "leaf", 1), java("app/Main", "main", 1)]),
        ];
        let (profile, _) = build(&recording(samples, vec![]), None);
        assert_eq!(collapse(&profile, false), "app.Main.main;app.A.leaf 3\napp.Main.main;app.B.leaf 6\n");
        assert_eq!(
            collapse(&profile, true),
            "w;app.Main.main;app.A.leaf 3\nw;app.Main.main;app.B.leaf 2\nx;app.Main.main;app.B.leaf 4\n"
        );
    }

    #[test]
    fn separators_in_names_become_colons() {
        let samples = vec![sample("pool;1", 1, vec![native("operator;weird"), java("app/Main", "main", 1)])];
        let (profile, _) = build(&recording(samples, vec![]), None);
        assert_eq!(collapse(&profile, true), "pool:1;app.Main.main;operator:weird 1\n");
    }

    #[test]
    fn an_empty_stack_is_left_out_as_the_converter_leaves_it_out() {
        let samples = vec![sample("idle", 2, vec![]), sample("busy", 1, vec![native("spin")])];
        let (profile, _) = build(&recording(samples, vec![]), None);
        assert_eq!(collapse(&profile, true), "busy;spin 1\n");
    }
}
