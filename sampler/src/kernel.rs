//! Kernel frames of a CPU sample: the perf_events counter of the thread
//! (`engine::perf`, where the kernel allows it) records the kernel part of
//! the call chain at each overflow into a ring buffer shared with us; the
//! handler of the overflow's signal takes the newest sample's kernel
//! addresses from it, innermost first, and consumes the ring.
//!
//! The ring is `perf_event_mmap_page` (one page, `data_head` at 1024 and
//! `data_tail` at 1032) followed by its data pages; records are 8-byte
//! aligned and may wrap around the data's end. A sample record with
//! `PERF_SAMPLE_CALLCHAIN` alone is its header, `nr`, then `nr` addresses,
//! among which context markers (`PERF_CONTEXT_KERNEL`, ...) sit.

use frames::Frame;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where the kernel's write position (`data_head`) and ours (`data_tail`)
/// sit in the ring's first page.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;
/// `PERF_RECORD_SAMPLE`.
const RECORD_SAMPLE: u32 = 9;
/// Call chain entries at or above this are context markers, not addresses
/// (`PERF_CONTEXT_MAX` is -4095).
const CONTEXT_MARKERS: u64 = (-4095i64) as u64;
/// The kernel half of the x86-64 and AArch64 address spaces.
const KERNEL_SPACE: u64 = 0xffff_0000_0000_0000;

/// A thread's ring: its first page's address and the size of its data
/// (a power of two, after that page).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ring {
    pub base: usize,
    pub page: usize,
    pub data_size: usize,
}

impl Ring {
    /// The `u64` at `offset` into the data, wrapping around its end (an
    /// offset not 8-byte aligned, from a damaged ring, is read aligned).
    ///
    /// # Safety
    /// The ring is mapped (this module's contract).
    unsafe fn data_u64(self, offset: u64) -> u64 {
        let at = (offset as usize) & (self.data_size - 1) & !7;
        // SAFETY: `at` is 8-byte aligned and inside the data pages after
        // the first page, mapped per the contract.
        unsafe { std::ptr::read_volatile((self.base + self.page + at) as *const u64) }
    }

    /// The ring's `data_head` (the kernel's write position) and
    /// `data_tail` (ours).
    ///
    /// # Safety
    /// The ring is mapped (this module's contract).
    unsafe fn positions(self) -> (&'static AtomicU64, &'static AtomicU64) {
        // SAFETY: both words lie in the first page, mapped per the
        // contract (for as long as the caller uses them), 8-byte aligned;
        // the kernel and this thread access them atomically.
        unsafe { (&*((self.base + DATA_HEAD) as *const AtomicU64), &*((self.base + DATA_TAIL) as *const AtomicU64)) }
    }

    /// Consumes every record in the ring without reading it (a sample
    /// not taken: the thread filtered out, its stripe busy), so that the
    /// next sample finds its own call chain newest. Signal-safe.
    ///
    /// # Safety
    /// As [`Self::take_kernel_frames`].
    pub unsafe fn discard(self) {
        // SAFETY: this function's contract.
        let (head, tail) = unsafe { self.positions() };
        tail.store(head.load(Ordering::Acquire), Ordering::Release);
    }

    /// Writes the kernel addresses of the newest sample in the ring into
    /// `out`, innermost first, and consumes every record in it; returns how
    /// many. Signal-safe: no allocation, plain loads and one store.
    ///
    /// # Safety
    /// The ring is mapped for the whole call, and its counter samples the
    /// calling thread (no other thread consumes it).
    pub unsafe fn take_kernel_frames(self, out: &mut [Frame]) -> usize {
        if self.data_size == 0 || !self.data_size.is_power_of_two() {
            return 0;
        }
        // SAFETY: this function's contract.
        let (head_at, tail_at) = unsafe { self.positions() };
        // The records up to `head` are written before `head` is (Acquire).
        let (head, tail) = (head_at.load(Ordering::Acquire), tail_at.load(Ordering::Relaxed));
        let mut newest = None;
        let mut at = tail;
        // The kernel never writes past unread data: more than the data's
        // size pending is a damaged ring, consumed without reading.
        let sane = head >= tail && head - tail <= self.data_size as u64;
        while sane && at < head {
            // SAFETY: inside the data (wrapped), mapped per the contract.
            let header = unsafe { self.data_u64(at) };
            let (kind, size) = (header as u32, header >> 48);
            if size < 8 || at.checked_add(size).is_none_or(|end| end > head) {
                break;
            }
            if kind == RECORD_SAMPLE {
                newest = Some((at + 8, at + size));
            }
            at += size;
        }
        let mut written = 0;
        if let Some((chain, end)) = newest {
            // No more addresses than the record holds.
            // SAFETY: as above.
            let count = unsafe { self.data_u64(chain) }.min(((end - chain) / 8).saturating_sub(1));
            for i in 0..count {
                // SAFETY: as above.
                let address = unsafe { self.data_u64(chain + 8 + 8 * i) };
                if !(KERNEL_SPACE..CONTEXT_MARKERS).contains(&address) {
                    continue;
                }
                let Some(slot) = out.get_mut(written) else { break };
                *slot = Frame::kernel(address);
                written += 1;
            }
        }
        // Our reads of the records happen before the kernel may reuse them.
        tail_at.store(head, Ordering::Release);
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring in plain memory: a first page, then `data_pages` of data.
    struct FakeRing {
        memory: Vec<u64>,
        page: usize,
        data_size: usize,
    }

    impl FakeRing {
        fn new(page: usize, data_size: usize) -> Self {
            Self { memory: vec![0; (page + data_size) / 8], page, data_size }
        }

        fn ring(&mut self) -> Ring {
            Ring { base: self.memory.as_mut_ptr() as usize, page: self.page, data_size: self.data_size }
        }

        fn head(&mut self) -> &mut u64 {
            &mut self.memory[DATA_HEAD / 8]
        }

        fn tail(&self) -> u64 {
            self.memory[DATA_TAIL / 8]
        }

        /// Appends a record of `kind` with `words` after its header.
        fn push(&mut self, kind: u32, words: &[u64]) {
            let head = *self.head();
            let size = 8 * (words.len() as u64 + 1);
            let header = u64::from(kind) | size << 48;
            for (i, word) in std::iter::once(header).chain(words.iter().copied()).enumerate() {
                let at = (head as usize + 8 * i) & (self.data_size - 1);
                self.memory[(self.page + at) / 8] = word;
            }
            *self.head() = head + size;
        }
    }

    const KERNEL: u64 = (-128i64) as u64;

    #[test]
    fn the_newest_samples_kernel_addresses_are_taken_and_the_ring_consumed() {
        let mut fake = FakeRing::new(4096, 256);
        fake.push(RECORD_SAMPLE, &[3, KERNEL, 0xffff_ffff_8100_0010, 0xffff_ffff_8100_0020]);
        fake.push(2, &[1, 2]);
        fake.push(RECORD_SAMPLE, &[4, KERNEL, 0xffff_ffff_8200_0010, 0xffff_ffff_8200_0020, 0x7f00_0000_1000]);
        let mut out = [Frame::default(); 8];
        // SAFETY: a ring in this test's own memory, read by this thread.
        let n = unsafe { fake.ring().take_kernel_frames(&mut out) };
        assert_eq!(out[..n], [Frame::kernel(0xffff_ffff_8200_0010), Frame::kernel(0xffff_ffff_8200_0020)]);
        assert_eq!(fake.tail(), *fake.head(), "consumed");
        // Nothing new: nothing taken.
        // SAFETY: as above.
        assert_eq!(unsafe { fake.ring().take_kernel_frames(&mut out) }, 0);
        // Discarded records are not taken by the next sample.
        fake.push(RECORD_SAMPLE, &[2, KERNEL, 0xffff_ffff_8300_0010]);
        // SAFETY: as above.
        unsafe { fake.ring().discard() };
        assert_eq!(fake.tail(), *fake.head());
        // SAFETY: as above.
        assert_eq!(unsafe { fake.ring().take_kernel_frames(&mut out) }, 0);
    }

    #[test]
    fn records_that_wrap_around_the_data_are_read_whole() {
        let mut fake = FakeRing::new(4096, 64);
        // Four words fill 32 of 64 bytes; the next record wraps.
        fake.push(2, &[0, 0, 0]);
        let mut out = [Frame::default(); 8];
        // SAFETY: as above.
        assert_eq!(unsafe { fake.ring().take_kernel_frames(&mut out) }, 0);
        fake.push(2, &[0]);
        fake.push(RECORD_SAMPLE, &[3, KERNEL, 0xffff_ffff_8100_0001, 0xffff_ffff_8100_0002]);
        // SAFETY: as above.
        let n = unsafe { fake.ring().take_kernel_frames(&mut out[..1]) };
        assert_eq!(out[..n], [Frame::kernel(0xffff_ffff_8100_0001)], "no more than the room given");
    }

    #[test]
    fn a_damaged_ring_yields_nothing_and_no_endless_loop() {
        let mut fake = FakeRing::new(4096, 64);
        *fake.head() = 1 << 40;
        let mut out = [Frame::default(); 8];
        // SAFETY: as above; every record header reads as size 0.
        assert_eq!(unsafe { fake.ring().take_kernel_frames(&mut out) }, 0);
        let mut odd = FakeRing::new(4096, 48);
        // SAFETY: as above.
        assert_eq!(unsafe { odd.ring().take_kernel_frames(&mut out) }, 0, "a data size not a power of two");
    }
}
