//! What stayed unresolved, by category: frame counts and the share of
//! samples touched, so a degraded profile says why it is degraded.

use crate::resolve::Unresolved;
use std::collections::BTreeMap;
use std::fmt;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CategoryStats {
    /// Frames in the category, weighted by their sample's weight.
    pub frames: u64,
    /// Total weight of samples with at least one such frame.
    pub samples: u64,
}

#[derive(Clone, Debug, Default)]
pub struct Report {
    pub total_weight: u64,
    /// Remote frames met (weighted).
    pub remote_frames: u64,
    pub categories: BTreeMap<Unresolved, CategoryStats>,
    /// One line per build-id that could not be (fully) used.
    pub problems: Vec<String>,
}

impl Report {
    pub fn add_sample(&mut self, weight: u64, problems: &[Unresolved]) {
        self.total_weight += weight;
        for category in Unresolved::ALL {
            let frames = problems.iter().filter(|&&p| p == category).count() as u64;
            if frames > 0 {
                let stats = self.categories.entry(category).or_default();
                stats.frames += frames * weight;
                stats.samples += weight;
            }
        }
    }

    pub fn stats(&self, category: Unresolved) -> CategoryStats {
        self.categories.get(&category).copied().unwrap_or_default()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} samples, {} remote frames", self.total_weight, self.remote_frames)?;
        if self.categories.is_empty() {
            return writeln!(f, "everything resolved");
        }
        writeln!(f, "unresolved:")?;
        for (category, stats) in &self.categories {
            let share = 100.0 * stats.samples as f64 / self.total_weight.max(1) as f64;
            writeln!(f, "  {:<42} {:>8} frames in {:>5.1}% of samples", category.describe(), stats.frames, share)?;
        }
        for problem in &self.problems {
            writeln!(f, "  {problem}")?;
        }
        Ok(())
    }
}
