//! A lock-free histogram of signal-handler durations. The mean alone is
//! misleading: a handler preempted by the scheduler counts milliseconds
//! for one sample, so percentiles are reported too.
//!
//! Buckets are log-linear: four per power of two (so a reported value is
//! within 19% of the truth), up to 2^40 ns.

use std::sync::atomic::{AtomicU64, Ordering};

const SUB_BUCKETS: u32 = 4;
const BUCKETS: usize = 41 * SUB_BUCKETS as usize;

pub struct Histogram {
    buckets: [AtomicU64; BUCKETS],
}

fn bucket_of(ns: u64) -> usize {
    if ns < u64::from(SUB_BUCKETS) {
        return ns as usize;
    }
    let log = 63 - ns.leading_zeros();
    let sub = ((ns >> (log - 2)) & u64::from(SUB_BUCKETS - 1)) as u32;
    ((log - 1) * SUB_BUCKETS + sub).min(BUCKETS as u32 - 1) as usize
}

/// The smallest value that falls into `bucket`.
fn lower_bound(bucket: usize) -> u64 {
    let bucket = bucket as u32;
    if bucket < SUB_BUCKETS {
        return u64::from(bucket);
    }
    let log = bucket / SUB_BUCKETS + 1;
    let sub = u64::from(bucket % SUB_BUCKETS);
    (1u64 << log) + (sub << (log - 2))
}

impl Histogram {
    pub const fn new() -> Self {
        Self { buckets: [const { AtomicU64::new(0) }; BUCKETS] }
    }

    /// Signal-safe.
    #[inline]
    pub fn record(&self, ns: u64) {
        if let Some(bucket) = self.buckets.get(bucket_of(ns)) {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn reset(&self) {
        for b in &self.buckets {
            b.store(0, Ordering::Relaxed);
        }
    }

    /// How many durations were recorded.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// The value at quantile `q` (0..=1), as its bucket's midpoint; 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &count) in counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                let next = if i + 1 < BUCKETS { lower_bound(i + 1) } else { lower_bound(i) * 2 };
                return (lower_bound(i) + next) / 2;
            }
        }
        0
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_bounds_round_trip() {
        for ns in [0u64, 1, 3, 4, 5, 7, 8, 100, 1000, 1500, 1 << 20, (1 << 20) + (1 << 19)] {
            let b = bucket_of(ns);
            assert!(lower_bound(b) <= ns, "{ns}");
            assert!(b + 1 >= BUCKETS || lower_bound(b + 1) > ns, "{ns}");
        }
        for b in 1..BUCKETS {
            assert!(lower_bound(b) > lower_bound(b - 1));
        }
    }

    #[test]
    fn quantiles_ignore_rare_outliers() {
        let h = Histogram::new();
        for _ in 0..990 {
            h.record(1_200);
        }
        for _ in 0..10 {
            h.record(4_000_000);
        }
        let median = h.quantile(0.5);
        assert!((1_000..1_500).contains(&median), "{median}");
        assert!(h.quantile(0.999) > 3_000_000);
    }
}
