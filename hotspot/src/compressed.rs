//! HotSpot's compressed streams (scope descriptors, `CompressedReadStream`):
//! UNSIGNED5, a variable-length encoding of 32-bit values in 1 to 5 bytes.
//! Byte values below `L` end a number; the others carry 6 more bits each.
//! JDK 20 moved the encoding into `unsigned5.hpp` and excluded byte 0
//! (every byte is stored plus `X = 1`), so the variant depends on the JDK.

use crate::memory::VmMemory;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unsigned5 {
    /// JDK 19 and older: `L = 192`, no excluded bytes.
    Legacy,
    /// JDK 20 and newer: `X = 1`, `L = 191`.
    ExcludingZero,
}

const LG_H: u32 = 6;
const MAX_LENGTH: u64 = 5;

impl Unsigned5 {
    pub fn for_java_major(major: u32) -> Self {
        if major >= 20 {
            Unsigned5::ExcludingZero
        } else {
            Unsigned5::Legacy
        }
    }

    /// (X, L): the excluded-byte offset and the number of one-byte values.
    fn parameters(self) -> (u32, u32) {
        match self {
            Unsigned5::Legacy => (0, 192),
            Unsigned5::ExcludingZero => (1, 191),
        }
    }
}

/// A cursor over a compressed stream in VM memory.
pub struct CompressedReader<'m, M: VmMemory + ?Sized> {
    memory: &'m M,
    encoding: Unsigned5,
    position: u64,
    /// The aligned word last loaded (address, value): a stream's bytes
    /// are read a word at a time.
    word: Option<(u64, u64)>,
}

impl<'m, M: VmMemory + ?Sized> CompressedReader<'m, M> {
    pub fn new(memory: &'m M, encoding: Unsigned5, position: u64) -> Self {
        Self { memory, encoding, position, word: None }
    }

    fn byte(&mut self, address: u64) -> Option<u8> {
        let aligned = address & !7;
        let value = match self.word {
            Some((at, value)) if at == aligned => value,
            _ => {
                let value = self.memory.load(aligned)?;
                self.word = Some((aligned, value));
                value
            }
        };
        Some((value >> ((address - aligned) * 8)) as u8)
    }

    /// The next unsigned value, or `None` if memory is unreadable or a
    /// byte is one the encoding never writes.
    pub fn read_u32(&mut self) -> Option<u32> {
        let (x, l) = self.encoding.parameters();
        let mut sum: u32 = 0;
        let mut shift = 0;
        for i in 0..MAX_LENGTH {
            let byte = u32::from(self.byte(self.position + i)?);
            let digit = byte.checked_sub(x)?;
            sum = sum.wrapping_add(digit.wrapping_shl(shift));
            if digit < l || i == MAX_LENGTH - 1 {
                self.position += i + 1;
                return Some(sum);
            }
            shift += LG_H;
        }
        None
    }

    /// The next value as HotSpot's `read_int` returns it.
    pub fn read_i32(&mut self) -> Option<i32> {
        self.read_u32().map(|v| v as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeMemory;

    /// HotSpot's writer, for round trips.
    fn encode(encoding: Unsigned5, mut value: u32, out: &mut Vec<u8>) {
        let (x, l) = encoding.parameters();
        for i in 0..MAX_LENGTH {
            if value < l || i == MAX_LENGTH - 1 {
                out.push((value + x) as u8);
                return;
            }
            value -= l;
            out.push((l + (value & 63) + x) as u8);
            value >>= LG_H;
        }
    }

    #[test]
    fn round_trips_both_variants() {
        let values = [0, 1, 190, 191, 192, 193, 4000, 12_287, 12_288, 1 << 20, i32::MAX as u32, u32::MAX - 1, u32::MAX];
        for encoding in [Unsigned5::Legacy, Unsigned5::ExcludingZero] {
            let mut bytes = Vec::new();
            for &v in &values {
                encode(encoding, v, &mut bytes);
            }
            if encoding == Unsigned5::ExcludingZero {
                assert!(!bytes.contains(&0), "byte 0 is excluded");
            }
            let mut memory = FakeMemory::default();
            memory.put_bytes(0x4000, &bytes);
            memory.put_bytes(0x4000 + bytes.len() as u64, &[0; 16]);
            let mut reader = CompressedReader::new(&memory, encoding, 0x4000);
            for &v in &values {
                assert_eq!(reader.read_u32(), Some(v), "{encoding:?} {v}");
            }
        }
    }

    #[test]
    fn single_bytes_below_l() {
        let mut memory = FakeMemory::default();
        memory.put_bytes(0x100, &[5, 191, 0, 0, 0, 0, 0, 0]);
        let mut legacy = CompressedReader::new(&memory, Unsigned5::Legacy, 0x100);
        assert_eq!(legacy.read_u32(), Some(5));
        assert_eq!(legacy.read_u32(), Some(191));
        let mut modern = CompressedReader::new(&memory, Unsigned5::ExcludingZero, 0x100);
        assert_eq!(modern.read_u32(), Some(4));
        // 191 - 1 = 190 < 191: one byte.
        assert_eq!(modern.read_u32(), Some(190));
        assert_eq!(modern.read_u32(), None, "byte 0 never appears in the modern variant");
    }

    #[test]
    fn major_version_picks_the_variant() {
        assert_eq!(Unsigned5::for_java_major(17), Unsigned5::Legacy);
        assert_eq!(Unsigned5::for_java_major(21), Unsigned5::ExcludingZero);
        assert_eq!(Unsigned5::for_java_major(25), Unsigned5::ExcludingZero);
    }
}
