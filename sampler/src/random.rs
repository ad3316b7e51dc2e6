//! The calling thread's own random numbers, for sampling decisions that
//! must not alias with regular patterns: no shared state, no lock, no
//! allocation. Signal-safe.

use std::cell::Cell;

thread_local! {
    /// xorshift64* state; 0 until the thread's first draw.
    static STATE: Cell<u64> = const { Cell::new(0) };
}

/// A uniformly distributed `u64` from the calling thread's generator
/// (xorshift64*, seeded from the thread's id and the clock on first use).
pub fn next_u64() -> u64 {
    let draw = |state: &Cell<u64>| {
        let mut x = state.get();
        if x == 0 {
            x = (u64::from(crate::os_thread::current_tid()) << 32 ^ crate::clock::monotonic_ns()) | 1;
        }
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    // A thread past its thread-locals' end still gets a number.
    STATE.try_with(draw).unwrap_or_else(|_| crate::clock::monotonic_ns().wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// An exponentially distributed gap with mean `mean`: the distance to the
/// next point of a Poisson process, rounded up (at least 1).
pub fn exponential(mean: u64) -> u64 {
    // Uniform in (0, 1]: 53 random bits, plus one.
    let uniform = ((next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64;
    let gap = -(mean as f64) * uniform.ln();
    (gap.ceil() as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_gaps_have_the_mean_asked_for() {
        let n = 200_000u64;
        let mean = 4096;
        let total: u64 = (0..n).map(|_| exponential(mean)).sum();
        let measured = total as f64 / n as f64;
        // The standard error of the mean is mean / sqrt(n), about 0.2%.
        assert!((measured / mean as f64 - 1.0).abs() < 0.02, "{measured}");
        assert!((0..1000).all(|_| exponential(1) >= 1));
    }
}
