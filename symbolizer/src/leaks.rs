//! `--leak`: the native allocations a recording never saw freed, found as
//! async-profiler's converter finds them (its `MallocLeakAggregator`).
//! Allocations and frees are replayed in time order across all chunks
//! (events of one time in the order the file holds them): a free of an
//! address ends its allocation, a later allocation at the address replaces
//! it. What remains is a leak, but for the allocations of the last `tail`
//! of the time the events span: too young to call leaks.

use crate::events::EventKind;
use crate::recording::Recording;
use rustc_hash::FxHashMap;

/// What [`keep_leaks`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Leaks {
    /// Native allocations and frees replayed.
    pub allocations: u64,
    pub frees: u64,
    /// Allocations never freed, made at or before `cutoff`: the samples kept.
    pub kept: u64,
    /// Unix nanoseconds: the last time an allocation counts at (`None`: no
    /// allocation or free at all).
    pub cutoff: Option<i64>,
}

/// The last time an allocation counts at, of events spanning
/// `first..=last`, when the last `tail` (a ratio in [0, 1]) of the span is
/// left out: the converter's `(long) (first * tail + last * (1 - tail))`,
/// computed from `first` so that large times lose no precision.
pub fn cutoff(first: i64, last: i64, tail: f64) -> i64 {
    first.saturating_add(((last.saturating_sub(first)) as f64 * (1.0 - tail)) as i64)
}

/// An allocation or free, in the recording's order.
struct Replayed {
    nanos: i64,
    ticks: i64,
    address: u64,
    /// The allocation's chunk and sample index; `None` for a free, and for
    /// an allocation of no bytes, which the converter takes as one.
    allocation: Option<(u32, u32)>,
}

/// Keeps, of the native allocation samples, those never freed and made
/// at or before the [`cutoff`] for `tail`; samples of other kinds stay.
pub fn keep_leaks(recording: &mut Recording, tail: f64) -> Leaks {
    let mut leaks = Leaks::default();
    let mut replayed = Vec::new();
    for (c, chunk) in recording.chunks.iter().enumerate() {
        let clock = chunk.clock;
        let free = |free: &crate::recording::Free| Replayed {
            nanos: clock.nanos_at(free.start_ticks),
            ticks: free.start_ticks,
            address: free.address,
            allocation: None,
        };
        let mut frees = chunk.frees.iter().peekable();
        for (i, sample) in chunk.samples.iter().enumerate() {
            replayed.extend(std::iter::from_fn(|| frees.next_if(|f| f.after as usize <= i)).map(free));
            if sample.kind == EventKind::NativeMem {
                leaks.allocations += 1;
                replayed.push(Replayed {
                    nanos: clock.nanos_at(sample.start_ticks),
                    ticks: sample.start_ticks,
                    address: sample.address,
                    allocation: (sample.size > 0).then_some((c as u32, i as u32)),
                });
            }
        }
        replayed.extend(frees.map(free));
    }
    leaks.frees = replayed.len() as u64 - leaks.allocations;
    // Stable: events of one time stay in the file's order. Within a file,
    // nanoseconds and ticks order alike; ticks part events of one nanosecond.
    replayed.sort_by_key(|r| (r.nanos, r.ticks));
    let (Some(first), Some(last)) = (replayed.first(), replayed.last()) else {
        return leaks;
    };
    let cutoff = cutoff(first.nanos, last.nanos, tail);
    leaks.cutoff = Some(cutoff);
    let mut live: FxHashMap<u64, &Replayed> = FxHashMap::default();
    for event in &replayed {
        match event.allocation {
            Some(_) => live.insert(event.address, event),
            None => live.remove(&event.address),
        };
    }
    let mut keep: Vec<Vec<bool>> = recording
        .chunks
        .iter()
        .map(|chunk| chunk.samples.iter().map(|s| s.kind != EventKind::NativeMem).collect())
        .collect();
    for (c, i) in live.values().filter(|r| r.nanos <= cutoff).filter_map(|r| r.allocation) {
        keep[c as usize][i as usize] = true;
        leaks.kept += 1;
    }
    for (chunk, keep) in recording.chunks.iter_mut().zip(&keep) {
        chunk.keep_samples(keep);
    }
    leaks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    /// The allocations kept, as (ticks, address).
    fn kept(recording: &Recording) -> Vec<(i64, u64)> {
        recording.samples().filter(|s| s.kind == EventKind::NativeMem).map(|s| (s.start_ticks, s.address)).collect()
    }

    #[test]
    fn the_cutoff_leaves_out_the_last_tail_of_the_span() {
        assert_eq!(cutoff(100, 200, 0.1), 190);
        assert_eq!(cutoff(100, 200, 0.0), 200);
        assert_eq!(cutoff(100, 200, 1.0), 100);
        assert_eq!(cutoff(100, 101, 0.5), 100, "truncated, as the converter's cast");
        // Unix nanoseconds lose nothing (the converter's formula in doubles
        // would be 256 ns off here).
        let first = 1_764_000_000_123_456_789;
        assert_eq!(cutoff(first, first + 1_000_000_000, 0.25), first + 750_000_000);
    }

    /// Frees end the allocation at their address, a later allocation at an
    /// address replaces the one before, an allocation of no bytes counts as
    /// a free; events of one tick in the file's order; frees and
    /// allocations in other chunks count.
    #[test]
    fn allocations_are_matched_to_frees_by_address_in_time_order() {
        let frames = || vec![native("malloc"), java("app/Main", "allocate", 3)];
        let mut first = chunk(
            vec![
                malloc(10, 0xa, 100, frames()),
                malloc(20, 0xb, 200, frames()),
                malloc(30, 0xc, 300, frames()),
                // Replaces 0xa's first allocation.
                malloc(40, 0xa, 400, frames()),
                // Freed at its own tick, after it (the free follows it in the file).
                malloc(50, 0xd, 500, frames()),
                // Freed at its own tick, before it: the address is used again.
                malloc(60, 0xe, 600, frames()),
                malloc(70, 0xf, 700, frames()),
                // A CPU sample stays.
                sample("t", 1, vec![java("app/Main", "main", 1)]),
            ],
            vec![],
        );
        first.freed = vec![(25, 0xb, 2), (50, 0xd, 5), (60, 0xe, 5)];
        // 0xf is freed in the next chunk, 0xc ended by an empty allocation.
        let mut second = chunk(vec![malloc(90, 0x10, 900, frames()), malloc(95, 0xc, 0, frames())], vec![]);
        second.clock.start_ticks = 80;
        second.clock.start_nanos += 80;
        second.freed = vec![(85, 0xf, 0), (100, 0x12, 2)];
        let mut recording = recording_of(vec![first, second]);
        let leaks = keep_leaks(&mut recording, 0.0);
        assert_eq!(kept(&recording), [(40, 0xa), (60, 0xe), (90, 0x10)]);
        assert_eq!(
            leaks,
            Leaks { allocations: 9, frees: 5, kept: 3, cutoff: Some(recording.chunks[0].clock.nanos_at(100)) }
        );
        assert_eq!(recording.samples().filter(|s| s.kind == EventKind::Cpu).count(), 1);
    }

    /// The span runs from the first to the last allocation or free; the
    /// allocations in its last `tail` are left out, those at the cutoff kept.
    #[test]
    fn allocations_in_the_tail_are_too_young_to_be_leaks() {
        let at = |ticks: i64| malloc(ticks, ticks as u64, 64, vec![native("malloc")]);
        let mut only = chunk((0..=10).map(|i| at(100 + 10 * i)).collect(), vec![]);
        // A free after the last allocation stretches the span to 300.
        only.freed = vec![(300, 0xdead, 11)];
        let mut recording = recording_of(vec![only]);
        let all = recording.clone();
        // Cutoff 100 + 200 * 0.5 = 200: the allocations up to 200 inclusive.
        let leaks = keep_leaks(&mut recording, 0.5);
        assert_eq!(
            kept(&recording).iter().map(|k| k.0).collect::<Vec<_>>(),
            [100, 110, 120, 130, 140, 150, 160, 170, 180, 190, 200]
        );
        assert_eq!((leaks.kept, leaks.cutoff), (11, Some(all.chunks[0].clock.nanos_at(200))));
        let mut recording = all.clone();
        keep_leaks(&mut recording, 0.75);
        // Cutoff 100 + 200 * 0.25 = 150.
        assert_eq!(kept(&recording).iter().map(|k| k.0).collect::<Vec<_>>(), [100, 110, 120, 130, 140, 150]);
        let mut recording = all;
        assert_eq!(keep_leaks(&mut recording, 1.0).kept, 1, "the first allocation, at the cutoff");
        let mut empty = recording_of(vec![chunk(vec![sample("t", 1, vec![])], vec![])]);
        assert_eq!(keep_leaks(&mut empty, 0.1), Leaks::default());
        assert_eq!(empty.samples().count(), 1);
    }

    /// Frees keep their place among the samples a window keeps: a free
    /// read before an allocation of its tick still comes before it.
    #[test]
    fn a_window_keeps_the_order_of_frees_and_allocations() {
        let mut only =
            chunk(vec![malloc(10, 0xa, 8, vec![]), malloc(20, 0xb, 8, vec![]), malloc(20, 0xa, 8, vec![])], vec![]);
        only.freed = vec![(20, 0xa, 2), (30, 0xb, 3)];
        let mut recording = recording_of(vec![only]);
        let from = recording.chunks[0].clock.nanos_at(15);
        assert_eq!(recording.keep_window((Some(from), None)), 2);
        let frees: Vec<(i64, u64, u32)> =
            recording.chunks[0].frees.iter().map(|f| (f.start_ticks, f.address, f.after)).collect();
        assert_eq!(frees, [(20, 0xa, 1), (30, 0xb, 2)]);
        keep_leaks(&mut recording, 0.0);
        assert_eq!(kept(&recording), [(20, 0xa)]);
    }
}
