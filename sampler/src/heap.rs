//! The agent's own heap (the bytes it asked the allocator for; not its
//! mappings, nor the allocator's overhead), measured: the shipped library installs
//! [`Counting`] as its global allocator, so the bytes the agent holds are
//! known at any time (`agent_heap_bytes`) and can be told apart from the
//! JVM's and the C library's (the JVM's Native Memory Tracking does not see
//! them). Elsewhere (unit tests) nothing is counted.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes allocated through [`Counting`] and not yet freed. Process-wide:
/// the agent's heap outlives any session.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting live bytes (one relaxed atomic add per
/// call; no allocation, no lock).
pub struct Counting;

// SAFETY: every call is forwarded to `System` with the caller's arguments;
// the counting has no effect on the memory returned.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let pointer = unsafe { System.alloc_zeroed(layout) };
        if !pointer.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(pointer, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            let old_size = layout.size();
            if new_size >= old_size {
                LIVE.fetch_add(new_size - old_size, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(old_size - new_size, Ordering::Relaxed);
            }
        }
        moved
    }
}

/// The bytes the agent holds now (0 where [`Counting`] is not installed).
pub fn live_bytes() -> u64 {
    LIVE.load(Ordering::Relaxed) as u64
}
