//! Collapsed stacks (`frame;frame;frame weight`, outermost first), the
//! input format of flamegraph.pl, speedscope and many other tools.

use crate::profile::Profile;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One line per distinct stack, sorted. With `by_thread`, the thread name
/// is the outermost frame.
pub fn collapse(profile: &Profile, by_thread: bool) -> String {
    let mut stacks: BTreeMap<String, u64> = BTreeMap::new();
    for sample in &profile.samples {
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
