//! A fixed-capacity array in an anonymous private mapping: reserved up
//! front, zero-filled, and committed by the kernel only where touched, so a
//! generous capacity costs resident memory only as it is used.

use std::marker::PhantomData;
use std::ptr::NonNull;

/// Types whose all-zero bit pattern is a valid value.
///
/// # Safety
/// Implementors must be valid when zero-initialized.
pub unsafe trait Zeroable {}

// SAFETY: integers and atomics are valid when zero.
unsafe impl Zeroable for u64 {}
// SAFETY: as above.
unsafe impl Zeroable for std::sync::atomic::AtomicU64 {}
// SAFETY: all-zero bytes are `Frame::java(0, 0)` (the layout contract
// documented on `frames::Frame`).
unsafe impl Zeroable for frames::Frame {}
// SAFETY: all-zero is the atomic 0.
unsafe impl Zeroable for std::sync::atomic::AtomicU32 {}

pub struct MappedArray<T: Zeroable> {
    base: NonNull<T>,
    len: usize,
    _owns: PhantomData<T>,
}

// SAFETY: the mapping is owned; sharing follows `T`'s own rules.
unsafe impl<T: Zeroable + Send> Send for MappedArray<T> {}
// SAFETY: shared access only hands out `&T`, so `T: Sync` suffices.
unsafe impl<T: Zeroable + Sync> Sync for MappedArray<T> {}

impl<T: Zeroable> MappedArray<T> {
    /// Maps `len` zeroed elements. Not signal-safe (mmap).
    pub fn new(len: usize) -> std::io::Result<Self> {
        let bytes = len.checked_mul(std::mem::size_of::<T>()).filter(|&b| b > 0).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "mapping size overflows or is zero")
        })?;
        // SAFETY: an anonymous private mapping with no address hint.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let Some(base) = NonNull::new(base.cast::<T>()) else {
            return Err(std::io::Error::other("mmap returned null"));
        };
        Ok(Self { base, len, _owns: PhantomData })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_ptr(&self) -> *mut T {
        self.base.as_ptr()
    }

    /// Zeroes every element and gives the pages back to the kernel (they
    /// are committed again, zero-filled, when next touched). The caller
    /// must ensure nobody else accesses the array meanwhile.
    pub fn reset(&self) {
        // SAFETY: the mapping is ours; MADV_DONTNEED on a private anonymous
        // mapping makes the range read back as zeroes.
        unsafe { libc::madvise(self.base.as_ptr().cast(), self.len * std::mem::size_of::<T>(), libc::MADV_DONTNEED) };
    }

    /// The element at `index`. Panics if out of range (callers on the
    /// sampling path check bounds first, so this never fires there).
    pub fn get(&self, index: usize) -> &T {
        assert!(index < self.len);
        // SAFETY: in bounds of a live mapping; zeroed memory is a valid T.
        unsafe { &*self.base.as_ptr().add(index) }
    }
}

impl<T: Zeroable> Drop for MappedArray<T> {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped; no references outlive self.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len * std::mem::size_of::<T>()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn starts_zeroed_and_is_writable() {
        let a: MappedArray<AtomicU64> = MappedArray::new(1 << 20).unwrap();
        assert_eq!(a.get(12345).load(Ordering::Relaxed), 0);
        a.get(12345).store(7, Ordering::Relaxed);
        assert_eq!(a.get(12345).load(Ordering::Relaxed), 7);
        assert_eq!(a.len(), 1 << 20);
    }

    #[test]
    fn reset_zeroes_and_releases() {
        let a: MappedArray<AtomicU64> = MappedArray::new(1 << 16).unwrap();
        a.get(100).store(5, Ordering::Relaxed);
        a.reset();
        assert_eq!(a.get(100).load(Ordering::Relaxed), 0);
    }

    #[test]
    fn zero_length_is_an_error() {
        assert!(MappedArray::<u64>::new(0).is_err());
    }
}
