//! Heap allocation samples (`alloc=`): JVMTI's `SampledObjectAlloc`
//! callback, on the allocating Java thread, records the object's class,
//! size and the thread's Java stack next to the CPU and wall-clock samples.
//!
//! Not a signal handler (so it lives outside `sampling`): the callback runs
//! in the allocating thread where JVMTI may be called, so it asks JVMTI for
//! the stack (`GetStackTrace`) and the class name, and may allocate
//! (per-thread buffers, reused). It shares the lock-free stores of the
//! published sampler: call traces, stripes (`try_acquire`; a busy stripe or
//! a full buffer is a counted drop) and the session's class dictionary.

use crate::counters::{self, Counter};
use crate::dictionary::{Carry, TripleBufferedDictionary};
use crate::jvmti::{ClassRef, FrameInfo, Jvmti};
use crate::recording::methods::internal_class_name;
use crate::sampling::Sampler;
use crate::storage::samples::{SampleKind, SampleRecord};
use frames::{Frame, BCI_NATIVE_METHOD};
use std::cell::RefCell;

/// Classes a session names; later ones are recorded as unknown (id 0).
const CLASS_CAPACITY: u32 = 65_536;

/// A session's allocation sampling.
pub struct Allocations {
    /// Mean bytes between samples.
    pub interval: u32,
    /// Allocated classes by internal name (`[B`, `java/lang/String`).
    /// Never rotated: an id names one class for the whole session.
    pub classes: TripleBufferedDictionary,
}

impl Allocations {
    pub fn new(interval: u32) -> std::io::Result<Self> {
        Ok(Self { interval, classes: TripleBufferedDictionary::new(CLASS_CAPACITY as usize, Carry::Everything)? })
    }
}

thread_local! {
    /// The allocating thread's stack, from JVMTI and as stored frames.
    static STACK: RefCell<(Vec<FrameInfo>, Vec<Frame>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// The bytes a sample of `size` stands for when allocations are sampled
/// every `interval` bytes on average (a Poisson process over bytes): the
/// unbiased estimate `size / (1 - e^(-size/interval))`, about `interval`
/// for small objects and `size` for large ones.
pub fn weight(size: u64, interval: u32) -> u64 {
    if size == 0 || interval == 0 {
        return size;
    }
    let p = 1.0 - (-(size as f64) / f64::from(interval)).exp();
    (size as f64 / p).round() as u64
}

/// Records an allocation of `size` bytes of `class` by the calling thread
/// `tid` (the JVMTI callback's thread) in the published `sampler`.
pub fn record(sampler: &Sampler, jvmti: &Jvmti, class: ClassRef, size: u64, time_ns: u64, tid: u32) {
    let Some(allocations) = &sampler.allocations else { return };
    if !sampler.sampled(tid) {
        return;
    }
    let class_id = match jvmti.class_signature(class) {
        Ok(signature) => {
            let id = allocations.classes.bounded_lookup(internal_class_name(&signature), CLASS_CAPACITY, tid as usize);
            id.unwrap_or_else(|| {
                counters::increment(Counter::AllocClassesFull);
                0
            })
        }
        Err(_) => 0,
    };
    let trace = STACK.with_borrow_mut(|(raw, frames)| {
        raw.resize(sampler.max_depth, FrameInfo { method: std::ptr::null_mut(), location: -1 });
        let count = jvmti.own_stack_trace(raw).unwrap_or_else(|_| {
            counters::increment(Counter::AllocStackFailed);
            0
        });
        frames.clear();
        // JVMTI says -1 where a native method has no bytecode index.
        let bci = |f: &FrameInfo| if f.location < 0 { BCI_NATIVE_METHOD } else { f.location as i32 };
        frames.extend(raw[..count].iter().map(|f| Frame::java(f.method as u64, bci(f))));
        sampler.traces.put(frames, count == sampler.max_depth, tid as usize)
    });
    let Some(mut stripe) = sampler.stripes.try_acquire(tid) else {
        counters::increment(Counter::AllocDroppedBusy);
        return;
    };
    let record = SampleRecord {
        time_ns,
        tid,
        trace: trace.0,
        weight: 1,
        state: 0,
        kind: SampleKind::Alloc,
        class: class_id,
        size,
        context: sampler.context.sample_context(tid),
    };
    if stripe.push(record) {
        counters::increment(Counter::AllocSamples);
    } else {
        counters::increment(Counter::AllocDroppedBufferFull);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_stands_for_the_interval_or_its_own_size() {
        let interval = 512 * 1024;
        // Small objects: about one interval each.
        let small = weight(1024, interval);
        assert!((small as i64 - i64::from(interval)).abs() < 1024, "{small}");
        // Objects far beyond the interval: themselves.
        assert_eq!(weight(64 << 20, interval), 64 << 20);
        assert_eq!(weight(0, interval), 0);
    }
}
