//! Reading VM memory that may be unmapped or changing under us.

/// A reader of process memory that refuses (returns `None`) instead of
/// faulting. Only [`VmMemory::load`] must be provided.
pub trait VmMemory {
    /// The 8 bytes at `address`, which is a multiple of 8, or `None`.
    fn load(&self, address: u64) -> Option<u64>;

    /// `width` (1 to 8) little-endian bytes at any `address`, zero-extended.
    fn uint(&self, address: u64, width: u8) -> Option<u64> {
        let width = u32::from(width.clamp(1, 8));
        let aligned = address & !7;
        let shift = (address - aligned) as u32;
        let low = self.load(aligned)? >> (shift * 8);
        let value = if shift + width > 8 { low | self.load(aligned + 8)? << ((8 - shift) * 8) } else { low };
        Some(if width == 8 { value } else { value & ((1u64 << (width * 8)) - 1) })
    }

    fn u64(&self, address: u64) -> Option<u64> {
        self.uint(address, 8)
    }

    fn u32(&self, address: u64) -> Option<u32> {
        self.uint(address, 4).map(|v| v as u32)
    }

    fn u16(&self, address: u64) -> Option<u16> {
        self.uint(address, 2).map(|v| v as u16)
    }

    fn u8(&self, address: u64) -> Option<u8> {
        self.uint(address, 1).map(|v| v as u8)
    }

    /// A NUL-terminated string of at most `max` bytes, written into `out`;
    /// returns its length. `None` if unreadable or longer than `max`.
    fn c_string(&self, address: u64, out: &mut [u8]) -> Option<usize> {
        for (i, slot) in out.iter_mut().enumerate() {
            let byte = self.u8(address.checked_add(i as u64)?)?;
            if byte == 0 {
                return Some(i);
            }
            *slot = byte;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeMemory;

    #[test]
    fn unaligned_reads_span_two_words() {
        let mut m = FakeMemory::default();
        m.put_bytes(0x1000, &(0u8..16).collect::<Vec<_>>());
        assert_eq!(m.u32(0x1006), Some(u32::from_le_bytes([6, 7, 8, 9])));
        assert_eq!(m.u16(0x1001), Some(0x0201));
        assert_eq!(m.u64(0x1000), Some(u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7])));
        assert_eq!(m.u32(0x100e), None, "second word unreadable");
    }

    #[test]
    fn strings_are_bounded() {
        let mut m = FakeMemory::default();
        m.put_bytes(0x2000, b"nmethod\0");
        let mut buf = [0u8; 16];
        assert_eq!(m.c_string(0x2000, &mut buf), Some(7));
        assert_eq!(&buf[..7], b"nmethod");
        assert_eq!(m.c_string(0x2000, &mut buf[..4]), None);
    }
}
