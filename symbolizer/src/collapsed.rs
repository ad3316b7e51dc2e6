//! Collapsed stacks (`frame;frame;frame weight`, outermost first), the
//! input format of flamegraph.pl, speedscope and many other tools.

use crate::profile::Profile;
use rustc_hash::FxHashMap;
use std::fmt::Write;

/// One line per distinct stack, sorted by thread, then frame by frame
/// from the outermost (as names compare: `app;x` before `app.Main;y`).
/// With `by_thread`, the thread name is the outermost frame.
pub fn collapse(profile: &Profile, by_thread: bool) -> String {
    let names: Vec<String> = profile.frames.iter().map(|f| f.name.replace(';', ":")).collect();
    // Samples of one stack (and thread) added up first, each distinct
    // stack spelled once.
    let mut folded: FxHashMap<(&[u32], &str), u64> = FxHashMap::default();
    // A sample without frames (another writer's; ours carry a marker
    // frame) has no stack to show: left out, as async-profiler's converter
    // leaves it out.
    for sample in profile.samples.iter().filter(|s| !s.stack.is_empty()) {
        let thread = if by_thread { sample.thread.as_str() } else { "" };
        *folded.entry((&sample.stack, thread)).or_default() += sample.weight;
    }
    // Sorted by thread, then by the names outermost first, so stacks that
    // read the same (equal names) are adjacent, and become one line.
    let mut stacks: Vec<(String, &[u32], u64)> =
        folded.into_iter().map(|((stack, thread), weight)| (thread.replace(';', ":"), stack, weight)).collect();
    // Frames ranked by name (equal names, equal ranks): stacks compare as
    // their ranks do, outermost first.
    let mut by_name: Vec<u32> = (0..names.len() as u32).collect();
    by_name.sort_unstable_by(|&a, &b| names[a as usize].cmp(&names[b as usize]));
    let mut rank = vec![0u32; names.len()];
    for (i, pair) in by_name.windows(2).enumerate() {
        let tie = names[pair[0] as usize] == names[pair[1] as usize];
        rank[pair[1] as usize] = if tie { rank[pair[0] as usize] } else { i as u32 + 1 };
    }
    let ranks = |stack: &[u32]| stack.iter().rev().map(|&f| rank[f as usize]).collect::<Vec<u32>>();
    stacks.sort_by_cached_key(|(thread, stack, _)| (thread.clone(), ranks(stack)));
    let reads_the_same = |a: &(String, &[u32], u64), b: &(String, &[u32], u64)| {
        a.0 == b.0 && a.1.len() == b.1.len() && a.1.iter().zip(b.1).all(|(&x, &y)| rank[x as usize] == rank[y as usize])
    };
    let mut out = String::new();
    let mut i = 0;
    while i < stacks.len() {
        let (thread, stack, mut weight) = &stacks[i];
        let mut next = i + 1;
        while next < stacks.len() && reads_the_same(&stacks[i], &stacks[next]) {
            weight += stacks[next].2;
            next += 1;
        }
        out.push_str(thread);
        for (n, &frame) in stack.iter().rev().enumerate() {
            if n > 0 || !thread.is_empty() {
                out.push(';');
            }
            out.push_str(&names[frame as usize]);
        }
        let _ = writeln!(out, " {weight}");
        i = next;
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
