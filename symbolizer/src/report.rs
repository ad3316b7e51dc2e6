//! What a profile holds and how well its remote frames resolved: the
//! event kind shown (and the others the recording has), how many remote
//! frames each tier resolved, overall and per library, and what stayed
//! unresolved by category, so a degraded profile says why it is degraded.
//!
//! Frames are counted once per sample for CPU and wall-clock profiles (a
//! sample of weight k counts k times) and once per event for allocation
//! and lock profiles, whose weights are bytes and nanoseconds.

use crate::events::{EventKind, Unit};
use crate::resolve::{Tier, Unresolved};
use std::collections::BTreeMap;
use std::fmt;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CategoryStats {
    /// Frames in the category.
    pub frames: u64,
    /// Total weight of samples with at least one such frame.
    pub samples: u64,
}

/// One library whose remote frames the profile met.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LibraryReport {
    /// Its file name (from `jdk.NativeLibrary`, or the frame's class).
    pub name: String,
    /// What its frames were resolved from, or why not.
    pub source: String,
    /// Frames per tier.
    pub tiers: BTreeMap<Tier, u64>,
}

#[derive(Clone, Debug, Default)]
pub struct Report {
    pub kind: EventKind,
    /// Every kind of sample the recording has: events and total weight.
    pub kinds: BTreeMap<EventKind, (u64, u64)>,
    /// Total weight of the profile (in the kind's unit).
    pub total_weight: u64,
    /// Events in the profile.
    pub events: u64,
    /// Remote frames met.
    pub remote_frames: u64,
    /// Remote frames per tier.
    pub tiers: BTreeMap<Tier, u64>,
    /// By build-id.
    pub libraries: BTreeMap<String, LibraryReport>,
    pub categories: BTreeMap<Unresolved, CategoryStats>,
    /// Unnamed native frames of libraries without a build-id, by library
    /// file name (counted as [`Report::frame_count`] counts).
    pub without_build_id: BTreeMap<String, u64>,
    /// One line per build-id that could not be (fully) used.
    pub problems: Vec<String>,
}

impl Report {
    pub fn new(kind: EventKind, kinds: BTreeMap<EventKind, (u64, u64)>) -> Self {
        Self { kind, kinds, ..Self::default() }
    }

    /// How many times a sample of this weight counts its frames.
    pub fn frame_count(&self, weight: u64) -> u64 {
        match self.kind.unit() {
            Unit::Samples => weight,
            Unit::Bytes | Unit::Nanoseconds => 1,
        }
    }

    /// A remote frame of library `build_id`, resolved by `tier`.
    pub fn add_remote(&mut self, build_id: &str, tier: Tier, count: u64) {
        self.remote_frames += count;
        *self.tiers.entry(tier).or_default() += count;
        *self.libraries.entry(build_id.to_owned()).or_default().tiers.entry(tier).or_default() += count;
    }

    /// A sample of `weight` whose frames had these problems.
    pub fn add_sample(&mut self, weight: u64, problems: &[Unresolved]) {
        self.total_weight += weight;
        self.events += 1;
        let count = self.frame_count(weight);
        for category in Unresolved::ALL {
            let frames = problems.iter().filter(|&&p| p == category).count() as u64;
            if frames > 0 {
                let stats = self.categories.entry(category).or_default();
                stats.frames += frames * count;
                stats.samples += weight;
            }
        }
    }

    pub fn stats(&self, category: Unresolved) -> CategoryStats {
        self.categories.get(&category).copied().unwrap_or_default()
    }

    pub fn tier(&self, tier: Tier) -> u64 {
        self.tiers.get(&tier).copied().unwrap_or(0)
    }
}

fn short(build_id: &str) -> &str {
    &build_id[..build_id.len().min(12)]
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = self.kind.unit();
        match unit {
            Unit::Samples => write!(f, "{}: {} samples", self.kind, self.total_weight)?,
            _ => write!(f, "{}: {} {} in {} events", self.kind, self.total_weight, unit.name(), self.events)?,
        }
        let others: Vec<String> = self
            .kinds
            .iter()
            .filter(|(k, _)| **k != self.kind)
            .map(|(k, (events, _))| format!("{k} ({events} events)"))
            .collect();
        if !others.is_empty() {
            write!(f, "; also in the recording (--event): {}", others.join(", "))?;
        }
        writeln!(f)?;
        writeln!(f, "{} remote frames (and unnamed native frames, looked up by build-id)", self.remote_frames)?;
        if self.remote_frames > 0 {
            for tier in Tier::ALL {
                writeln!(f, "  {:<46} {:>10}", tier.describe(), self.tier(tier))?;
            }
            writeln!(f, "by library:")?;
            for (build_id, library) in &self.libraries {
                let counts: Vec<String> = Tier::ALL
                    .iter()
                    .filter_map(|t| library.tiers.get(t).map(|n| format!("{n} {}", tier_word(*t))))
                    .collect();
                writeln!(f, "  {} ({}…): {} — {}", library.name, short(build_id), counts.join(", "), library.source)?;
            }
        }
        if self.categories.is_empty() {
            return writeln!(f, "everything resolved");
        }
        writeln!(f, "not fully resolved:")?;
        for (category, stats) in &self.categories {
            let share = 100.0 * stats.samples as f64 / self.total_weight.max(1) as f64;
            writeln!(f, "  {:<42} {:>8} frames in {:>5.1}% of the weight", category.describe(), stats.frames, share)?;
        }
        for (library, frames) in &self.without_build_id {
            writeln!(f, "  {library}: {frames} unnamed frames, no build-id in the recording to look them up by")?;
        }
        for problem in &self.problems {
            writeln!(f, "  {problem}")?;
        }
        Ok(())
    }
}

fn tier_word(tier: Tier) -> &'static str {
    match tier {
        Tier::Dwarf => "by DWARF",
        Tier::Symbols => "by symbol",
        Tier::Unresolved => "unresolved",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_count_per_sample_for_time_and_per_event_otherwise() {
        let mut cpu = Report::new(EventKind::Cpu, BTreeMap::new());
        cpu.add_sample(3, &[Unresolved::NoLineInfo, Unresolved::NoLineInfo]);
        assert_eq!(cpu.stats(Unresolved::NoLineInfo), CategoryStats { frames: 6, samples: 3 });
        let mut alloc = Report::new(EventKind::Alloc, BTreeMap::new());
        alloc.add_sample(4096, &[Unresolved::UnknownBuildId]);
        alloc.add_sample(1024, &[]);
        assert_eq!(alloc.stats(Unresolved::UnknownBuildId), CategoryStats { frames: 1, samples: 4096 });
        assert_eq!((alloc.total_weight, alloc.events), (5120, 2));
    }

    #[test]
    fn the_report_names_the_kind_the_other_kinds_and_each_tier() {
        let kinds = BTreeMap::from([(EventKind::Cpu, (10, 10)), (EventKind::Alloc, (2, 4096))]);
        let mut report = Report::new(EventKind::Alloc, kinds);
        report.add_sample(4096, &[Unresolved::NoLineInfo]);
        report.add_remote("0123456789abcdef", Tier::Symbols, 1);
        report.add_remote("0123456789abcdef", Tier::Unresolved, 2);
        report.libraries.get_mut("0123456789abcdef").unwrap().name = "libjvm.so".to_owned();
        report.libraries.get_mut("0123456789abcdef").unwrap().source = ".symtab of /x/libjvm.so".to_owned();
        let text = report.to_string();
        assert!(
            text.starts_with("alloc: 4096 bytes in 1 events; also in the recording (--event): cpu (10 events)"),
            "{text}"
        );
        assert!(text.contains("3 remote frames"), "{text}");
        assert!(text.contains("symbol table (function name)"), "{text}");
        assert!(
            text.contains("libjvm.so (0123456789ab…): 1 by symbol, 2 unresolved — .symtab of /x/libjvm.so"),
            "{text}"
        );
        assert!(text.contains("no line information"), "{text}");
    }
}
