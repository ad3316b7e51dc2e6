//! Port of upstream `safefetch_ut` (see gtest-compat/README.md).
//!
//! Upstream has `safeFetch32`/`safeFetch64`/`loadPtr` (a default value on
//! failure), `isReadable` and a bulk byte copy, `safeCopy`. Ours is one
//! primitive, `sampler::safe_read::safe_load`: an aligned 8-byte read
//! that answers `None` when the address is below 4096, misaligned, or
//! faults (our SIGSEGV/SIGBUS handler resumes it). A 32-bit field is read
//! through the aligned word holding it; memory ranges are read word by
//! word, as the native unwinder reads stacks. Cases whose read can fault
//! run in a child process of their own: the fault handlers are process-
//! wide, and other suites install and restore them too.

use sampler::safe_read::{install_fault_handlers, restore_fault_handlers, safe_load};

/// Runs `body` in a child process running only this case, with the fault
/// handlers installed there (and restored before it exits).
fn with_fault_handlers(case: &str, body: impl FnOnce()) {
    crate::isolation::in_own_process(&format!("safefetch_ut::{case}"), &[], || {
        install_fault_handlers().expect("install the fault handlers");
        body();
        restore_fault_handlers();
    });
}

/// `safeFetch32`: the 32-bit value at `address` (4-aligned), read through
/// the aligned word that holds it, or `default`.
fn fetch32(address: u64, default: i32) -> i32 {
    safe_load(address & !7).map_or(default, |word| (word >> ((address & 7) * 8)) as u32 as i32)
}

/// `safeFetch64`.
fn fetch64(address: u64, default: i64) -> i64 {
    safe_load(address).map_or(default, |word| word as i64)
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as u64 }
}

/// Two adjacent pages of which only the first is readable: the second is
/// made `PROT_NONE` (it stays reserved, so nothing else can be mapped there
/// while a case reads it, as could happen to an unmapped page).
struct PageBeforeHole {
    base: *mut u8,
    size: usize,
}

impl PageBeforeHole {
    fn new() -> Self {
        let size = page_size() as usize;
        // SAFETY: an anonymous private mapping of two pages; the second is
        // made inaccessible at once.
        let base = unsafe {
            let base = libc::mmap(
                std::ptr::null_mut(),
                2 * size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(base, libc::MAP_FAILED);
            assert_eq!(libc::mprotect(base.cast::<u8>().add(size).cast(), size, libc::PROT_NONE), 0);
            base.cast::<u8>()
        };
        Self { base, size }
    }

    /// The first address past the readable page.
    fn end(&self) -> u64 {
        self.base as u64 + self.size as u64
    }

    fn write_word(&self, address: u64, value: u64) {
        assert!(address >= self.base as u64 && address + 8 <= self.end());
        // SAFETY: inside the mapped, writable page (checked above), aligned.
        unsafe { (address as *mut u64).write(value) };
    }
}

impl Drop for PageBeforeHole {
    fn drop(&mut self) {
        // SAFETY: unmaps the two pages mapped in `new`.
        unsafe { libc::munmap(self.base.cast(), 2 * self.size) };
    }
}

/// An anonymous page holding `value` in its first word, then protected
/// with `PROT_NONE`; unmapped when dropped.
struct ProtectedPage(*mut libc::c_void, usize);

impl ProtectedPage {
    fn new(value: u64) -> Self {
        let size = page_size() as usize;
        // SAFETY: an anonymous private mapping, written, then protected.
        unsafe {
            let page = libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(page, libc::MAP_FAILED);
            page.cast::<u64>().write(value);
            assert_eq!(libc::mprotect(page, size, libc::PROT_NONE), 0);
            Self(page, size)
        }
    }

    fn address(&self) -> u64 {
        self.0 as u64
    }
}

impl Drop for ProtectedPage {
    fn drop(&mut self) {
        // SAFETY: unmaps the page mapped in `new`.
        unsafe { libc::munmap(self.0, self.1) };
    }
}

#[repr(C, align(8))]
struct Aligned<T>(T);

#[test]
fn valid_access32() {
    let mut pair = Aligned([0i32; 2]);
    for value in [42, i32::MAX, i32::MIN] {
        pair.0 = [value, !value];
        let address = pair.0.as_ptr() as u64;
        assert_eq!(fetch32(address, -1), value);
        assert_eq!(fetch32(address + 4, 0), !value, "the upper half of the word");
    }
}

#[test]
fn invalid_access32() {
    assert_eq!(fetch32(0, -1), -1);
    assert_eq!(fetch32(0, -2), -2);
}

#[test]
fn valid_access64() {
    for (value, default) in [(42i64, -1), (i64::MIN, -19), (i64::MAX, -1)] {
        let cell = Aligned(value);
        assert_eq!(fetch64(&cell.0 as *const i64 as u64, default), value);
    }
}

#[test]
fn invalid_access64() {
    assert_eq!(fetch64(0, -1), -1);
    assert_eq!(fetch64(0, -2), -2);
}

#[test]
fn valid_access_ptr() {
    let c = b'a';
    let p: *const u8 = &c;
    let pp: *const *const u8 = &p;
    assert_eq!(safe_load(pp as u64), Some(p as u64));
}

#[test]
fn invalid_access_ptr() {
    let (a, b) = (1i32, 2i32);
    let (ap, bp) = (&a as *const i32 as u64, &b as *const i32 as u64);
    assert_eq!(safe_load(0).unwrap_or(ap), ap);
    assert_eq!(safe_load(0).unwrap_or(bp), bp);
}

#[test]
fn is_readable() {
    let x = Aligned(0x78u64);
    assert!(safe_load(&x.0 as *const u64 as u64).is_some());
    assert!(safe_load(0).is_none());
}

#[test]
fn mprotected_memory32() {
    with_fault_handlers("mprotected_memory32", || {
        let page = ProtectedPage::new(0xDEAD_BEEF);
        assert_eq!(fetch32(page.address(), -999), -999, "must fail, not crash");
        assert_eq!(fetch32(page.address() + 4, -999), -999);
    });
}

#[test]
fn mprotected_memory64() {
    with_fault_handlers("mprotected_memory64", || {
        let page = ProtectedPage::new(0xDEAD_BEEF_CAFE_BABE);
        assert_eq!(fetch64(page.address(), -999), -999, "must fail, not crash");
    });
}

#[test]
fn safe_copy_unmapped_source_returns_false() {
    with_fault_handlers("safe_copy_unmapped_source_returns_false", || {
        let hole = PageBeforeHole::new();
        for offset in (0..32).step_by(8) {
            assert_eq!(safe_load(hole.end() + offset), None);
        }
    });
}

#[test]
fn safe_copy_prot_none_source_returns_false() {
    with_fault_handlers("safe_copy_prot_none_source_returns_false", || {
        let page = ProtectedPage::new(u64::from_le_bytes(*b"ignored\0"));
        assert!((0..32).step_by(8).all(|offset| safe_load(page.address() + offset).is_none()));
        // SAFETY: makes our own page readable again.
        assert_eq!(unsafe { libc::mprotect(page.0, page.1, libc::PROT_READ) }, 0);
        assert_eq!(safe_load(page.address()), Some(u64::from_le_bytes(*b"ignored\0")));
    });
}

/// The last word before an unmapped page reads fine: a read never
/// touches memory past the word asked for.
#[test]
fn safe_copy_tail_near_unmapped_boundary_still_succeeds() {
    with_fault_handlers("safe_copy_tail_near_unmapped_boundary_still_succeeds", || {
        let hole = PageBeforeHole::new();
        hole.write_word(hole.end() - 8, 0x5958_0000_0000_0000);
        assert_eq!(safe_load(hole.end() - 8), Some(0x5958_0000_0000_0000));
    });
}

#[test]
fn safe_copy_requested_range_crosses_unmapped_page_returns_false() {
    with_fault_handlers("safe_copy_requested_range_crosses_unmapped_page_returns_false", || {
        let hole = PageBeforeHole::new();
        hole.write_word(hole.end() - 8, 7);
        let words: Vec<_> = [hole.end() - 8, hole.end()].into_iter().map(safe_load).collect();
        assert_eq!(words, vec![Some(7), None], "the range reaches into the unmapped page");
    });
}

/// Reading a range word by word up to a fault: every readable word comes
/// back exactly, the first unreadable one fails, and reading stops there.
#[test]
fn safe_copy_partial_prefix_copied_before_fault() {
    with_fault_handlers("safe_copy_partial_prefix_copied_before_fault", || {
        let hole = PageBeforeHole::new();
        let prefix = [0x4845_4c4c_4f00_0001u64, 2, 3, 4, 5];
        let start = hole.end() - 8 * prefix.len() as u64;
        for (i, &word) in prefix.iter().enumerate() {
            hole.write_word(start + 8 * i as u64, word);
        }
        let mut copied = Vec::new();
        let mut address = start;
        while let Some(word) = safe_load(address) {
            copied.push(word);
            address += 8;
        }
        assert_eq!(copied, prefix, "the readable prefix, exactly");
        assert_eq!(address, hole.end(), "stopped at the unmapped page");
    });
}

/// Failure is `None`, never a value: words that look like markers (0, all
/// ones, a fill pattern) are read as they are.
#[test]
fn safe_copy_data_matching_single_sentinel_still_succeeds() {
    for value in [0u64, u64::MAX, 0x55AA_55AA_55AA_55AA, 0x55AA_55AA] {
        let cell = Aligned(value);
        assert_eq!(safe_load(&cell.0 as *const u64 as u64), Some(value));
    }
}
