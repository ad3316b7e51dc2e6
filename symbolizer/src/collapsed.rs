//! Collapsed stacks (`frame;frame;frame weight`, outermost first), the
//! input format of flamegraph.pl, speedscope and many other tools.

use crate::profile::Profile;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One line per distinct stack, sorted. With `by_thread`, the thread name
/// is the outermost frame.
pub fn collapse(profile: &Profile, by_thread: bool) -> String {
    let mut stacks: BTreeMap<String, u64> = BTreeMap::new();
    // A sample without frames (another writer's; ours carry a marker
    // frame) has no stack to show: left out, as async-profiler's converter
    // leaves it out.
    for sample in profile.samples.iter().filter(|s| !s.stack.is_empty()) {
        let mut key = String::new();
        if by_thread {
            key.push_str(&sample.thread.replace(';', ":"));
        }
        for &frame in sample.stack.iter().rev() {
            if !key.is_empty() {
                key.push(';');
            }
            key.push_str(&profile.frames[frame as usize].name.replace(';', ":"));
        }
        *stacks.entry(key).or_default() += sample.weight;
    }
    let mut out = String::new();
    for (stack, weight) in stacks {
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
