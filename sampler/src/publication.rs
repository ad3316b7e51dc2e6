//! A session's state published to code that runs on arbitrary threads
//! (signal handlers, JVMTI callbacks, hooks): a pointer they load and an
//! in-flight count, so that the control plane knows when none of them can
//! still be using what it hides.

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Arc;

/// One published value at a time, or none.
pub struct Publication<T> {
    active: AtomicPtr<T>,
    in_flight: AtomicUsize,
}

// `T: Sync`: readers on many threads share the one published value.
impl<T: Sync> Publication<T> {
    pub const fn new() -> Self {
        Self { active: AtomicPtr::new(std::ptr::null_mut()), in_flight: AtomicUsize::new(0) }
    }

    /// Makes `value` visible. The caller keeps its `Arc` alive until
    /// [`retire`](Self::retire) returns.
    pub fn publish(&self, value: &Arc<T>) {
        self.active.store(Arc::as_ptr(value).cast_mut(), Ordering::SeqCst);
    }

    /// Hides the value and returns once no reader can still be using it:
    /// a reader announces itself (`in_flight`) before loading the pointer,
    /// so after the null store, waiting for `in_flight` to reach zero
    /// covers every reader that may have seen the old pointer. Not
    /// signal-safe (it waits).
    pub fn retire(&self) {
        self.active.store(std::ptr::null_mut(), Ordering::SeqCst);
        while self.in_flight.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
    }

    /// Whether a value is published right now: a hint; [`with`](Self::with)
    /// alone decides. Signal-safe.
    pub fn is_published(&self) -> bool {
        !self.active.load(Ordering::Relaxed).is_null()
    }

    /// Runs `f` with the published value, if any. Signal-safe.
    #[inline]
    pub fn with<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let value = self.active.load(Ordering::SeqCst);
        let result = if value.is_null() {
            None
        } else {
            // SAFETY: a non-null pointer stays valid until `retire` has
            // seen `in_flight` drop to zero, which cannot happen before we
            // decrement.
            Some(f(unsafe { &*value }))
        };
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        result
    }
}

impl<T: Sync> Default for Publication<T> {
    fn default() -> Self {
        Self::new()
    }
}
