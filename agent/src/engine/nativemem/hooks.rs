//! The hooks that replace the allocation functions in every patched
//! object (and libjvm's `dlopen`). The allocation hooks run on every thread, Java or not, inside callers that may
//! hold their own locks, so the rules of signal handlers apply: no
//! allocation (the calls made here go to the allocator through the agent's
//! own, unpatched imports), no blocking lock, bounded work, errno
//! preserved, reentrancy guarded. Off (between sessions), a hook costs the
//! call through and one atomic load.

use super::addresses::Addresses;
use crate::callbacks;
use sampler::counters::{self, Counter};
use sampler::handler::ErrnoGuard;
use sampler::random;
use sampler::with_active;
use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// The native allocation hooks' state: what they read, and the patching
/// that leads allocation calls to them. Process-wide, as the hooks are:
/// they stay bound after a session ends; a session sets the interval and
/// frees, and a new generation.
pub struct Hooks {
    /// Mean bytes between samples; 0: off.
    pub interval: AtomicU64,
    /// Whether frees of sampled allocations are recorded (not `nofree`).
    pub track_frees: AtomicBool,
    /// Which session's gaps a thread's countdown holds: a new session draws
    /// anew (its interval may differ).
    pub generation: AtomicU64,
    /// The sampled addresses not yet freed, and the agent's image (whose
    /// frames a sample leaves out): set once, before any slot is patched.
    pub state: OnceLock<(Addresses, Range<u64>)>,
    /// Patching is one pass at a time (never taken by a hook); the
    /// loader's load/unload counters when the last pass began.
    pub patching: Mutex<(u64, u64)>,
}

pub static HOOKS: Hooks = Hooks {
    interval: AtomicU64::new(0),
    track_frees: AtomicBool::new(false),
    generation: AtomicU64::new(0),
    state: OnceLock::new(),
    patching: Mutex::new((0, 0)),
};

thread_local! {
    /// The generation and bytes left before the thread's next sample.
    static COUNTDOWN: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    /// Set while the thread records a sample: an allocation made meanwhile
    /// (none is, but a hook must not recurse if one were) is not sampled.
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// Whether an allocation of `size` bytes is sampled: allocations are
/// sampled as a Poisson process over bytes (exponential gaps of mean
/// `interval`, per thread), so one of `size` bytes is with probability
/// `1 - e^(-size/interval)` and no regular pattern of sizes aliases.
fn due(size: u64, interval: u64) -> bool {
    let generation = HOOKS.generation.load(Ordering::Relaxed);
    COUNTDOWN
        .try_with(|countdown| {
            let (seen, left) = countdown.get();
            let left = if seen == generation { left } else { random::exponential(interval) };
            if size < left {
                countdown.set((generation, left - size));
                false
            } else {
                countdown.set((generation, random::exponential(interval)));
                true
            }
        })
        .unwrap_or(false)
}

/// Runs `f` unless the thread is already inside it.
fn guarded(f: impl FnOnce()) {
    if BUSY.try_with(|busy| busy.replace(true)).unwrap_or(true) {
        return;
    }
    let _errno = ErrnoGuard::save();
    f();
    let _ = BUSY.try_with(|busy| busy.set(false));
}

/// After an allocation of `size` bytes at `address` (null: failed).
#[inline]
fn allocated(address: *mut c_void, size: usize) {
    let interval = HOOKS.interval.load(Ordering::Relaxed);
    if interval == 0 || address.is_null() || size == 0 || !due(size as u64, interval) {
        return;
    }
    let Some((addresses, own)) = HOOKS.state.get() else { return };
    guarded(|| {
        with_active(|sampler| {
            let tid = sampler::os_thread::current_tid();
            if !sampler.sampled(tid) {
                return;
            }
            if HOOKS.track_frees.load(Ordering::Relaxed) {
                if addresses.insert(address as u64) {
                    counters::increment(Counter::NativeMemTracked);
                } else {
                    counters::increment(Counter::NativeMemTableFull);
                }
            }
            sampler.record_here(size as u64, address as u64, own, tid);
        });
    });
}

/// Before the release of the allocation at `address`: whether it was
/// sampled (then it is no longer tracked), and when. Before, not after:
/// once released, the address may be another thread's new allocation,
/// sampled and tracked anew.
#[inline]
fn releasing(address: *mut c_void) -> Option<u64> {
    if address.is_null() || !HOOKS.track_frees.load(Ordering::Relaxed) {
        return None;
    }
    let (addresses, _) = HOOKS.state.get()?;
    addresses.remove(address as u64).then(sampler::clock::monotonic_ns)
}

/// Records the release at `time_ns` (from [`releasing`]) of the sampled
/// allocation at `address`.
fn released(address: *mut c_void, time_ns: u64) {
    guarded(|| {
        with_active(|sampler| sampler.record_free(address as u64, time_ns, sampler::os_thread::current_tid()));
    });
}

/// `malloc`.
///
/// # Safety
/// As `malloc`.
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    // SAFETY: the allocator's malloc, through the agent's own import.
    let address = unsafe { libc::malloc(size) };
    allocated(address, size);
    address
}

/// `calloc`.
///
/// # Safety
/// As `calloc`.
pub unsafe extern "C" fn calloc(count: usize, size: usize) -> *mut c_void {
    // SAFETY: as in `malloc`.
    let address = unsafe { libc::calloc(count, size) };
    allocated(address, count.saturating_mul(size));
    address
}

/// `realloc`: the release of the old block and a new allocation.
///
/// # Safety
/// As `realloc`.
pub unsafe extern "C" fn realloc(old: *mut c_void, size: usize) -> *mut c_void {
    let sampled = releasing(old);
    // SAFETY: as in `malloc`.
    let address = unsafe { libc::realloc(old, size) };
    match sampled {
        // Failed: the old block lives on, tracked again.
        Some(_) if address.is_null() && size != 0 => {
            if let Some((addresses, _)) = HOOKS.state.get() {
                addresses.insert(old as u64);
            }
        }
        Some(time_ns) => released(old, time_ns),
        None => {}
    }
    allocated(address, size);
    address
}

/// `free`.
///
/// # Safety
/// As `free`.
pub unsafe extern "C" fn free(address: *mut c_void) {
    let sampled = releasing(address);
    // SAFETY: as in `malloc`.
    unsafe { libc::free(address) };
    if let Some(time_ns) = sampled {
        released(address, time_ns);
    }
}

/// `posix_memalign`.
///
/// # Safety
/// As `posix_memalign`.
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, alignment: usize, size: usize) -> c_int {
    // SAFETY: as in `malloc`.
    let result = unsafe { libc::posix_memalign(out, alignment, size) };
    if result == 0 && !out.is_null() {
        // SAFETY: filled by the successful call.
        allocated(unsafe { *out }, size);
    }
    result
}

/// `aligned_alloc`.
///
/// # Safety
/// As `aligned_alloc`.
pub unsafe extern "C" fn aligned_alloc(alignment: usize, size: usize) -> *mut c_void {
    // SAFETY: as in `malloc`.
    let address = unsafe { libc::aligned_alloc(alignment, size) };
    allocated(address, size);
    address
}

/// libjvm's `dlopen`: while sampling, the objects it loads are patched
/// and the session's library table learns them before it returns, so
/// their first allocations are seen, with their native frames. Not an
/// allocation hook: it runs where `dlopen` may, and takes locks.
///
/// # Safety
/// As `dlopen`.
pub unsafe extern "C" fn dlopen(file: *const std::ffi::c_char, mode: c_int) -> *mut c_void {
    // SAFETY: the loader's dlopen, through the agent's own import.
    let handle = unsafe { libc::dlopen(file, mode) };
    if !handle.is_null() && HOOKS.interval.load(Ordering::Relaxed) != 0 && super::patch_if_loaded() {
        callbacks::with_active(|state| state.libraries.as_ref().map(|table| table.refresh_if_changed()));
    }
    handle
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Allocations are sampled with probability `1 - e^(-size/interval)`.
    #[test]
    fn allocations_are_sampled_in_proportion_to_their_size() {
        let interval = 64 * 1024;
        for size in [4096u64, 64 * 1024, 1 << 20] {
            let n = 20_000;
            let taken = (0..n).filter(|_| due(size, interval)).count() as f64;
            let expected = n as f64 * (1.0 - (-(size as f64) / interval as f64).exp());
            assert!((taken - expected).abs() < 5.0 * expected.sqrt() + 1.0, "{size}: {taken} vs {expected}");
        }
    }
}
