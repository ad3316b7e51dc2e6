//! Byte-level encoding used throughout a JFR chunk.
//!
//! JFR "compressed integers" are little-endian base-128 groups with a
//! continuation bit, but a 64-bit value never takes more than nine bytes: the
//! ninth byte carries the top eight bits raw. (`jdk.jfr.internal.consumer.
//! RecordingInput.readLong` reads exactly this; a plain ten-byte LEB128 would be
//! misread.) `int`, `short` and `char` values use the same groups over their
//! own width: an `int` of -1 is five bytes, never nine, because readers that
//! read an `int` field as an int (async-profiler's) stop after five.

/// String encodings understood by `jdk.jfr.internal.consumer.StringParser`.
mod string_encoding {
    pub const NULL: u8 = 0;
    pub const EMPTY: u8 = 1;
    pub const UTF8: u8 = 3;
}

/// A growable byte buffer with JFR encoders.
#[derive(Default, Clone, Debug)]
pub struct ByteBuf {
    bytes: Vec<u8>,
}

impl ByteBuf {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(capacity: usize) -> Self {
        Self { bytes: Vec::with_capacity(capacity) }
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.bytes
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
    }

    pub fn into_vec(self) -> Vec<u8> {
        self.bytes
    }

    /// Shortens the buffer to its first `len` bytes.
    pub fn truncate(&mut self, len: usize) {
        self.bytes.truncate(len);
    }

    /// Moves `range` of the buffer to start at `to` (see
    /// [`slice::copy_within`]).
    pub fn copy_within(&mut self, range: std::ops::Range<usize>, to: usize) {
        self.bytes.copy_within(range, to);
    }

    /// Overwrites the bytes at `at` with `bytes`.
    pub fn write_at(&mut self, at: usize, bytes: &[u8]) {
        self.bytes[at..at + bytes.len()].copy_from_slice(bytes);
    }

    pub fn put_u8(&mut self, value: u8) {
        self.bytes.push(value);
    }

    pub fn put_bool(&mut self, value: bool) {
        self.bytes.push(u8::from(value));
    }

    pub fn put_bytes(&mut self, bytes: &[u8]) {
        self.bytes.extend_from_slice(bytes);
    }

    /// Big-endian fixed-width values, used only by the chunk header.
    pub fn put_be_u16(&mut self, value: u16) {
        self.bytes.extend_from_slice(&value.to_be_bytes());
    }

    pub fn put_be_i32(&mut self, value: i32) {
        self.bytes.extend_from_slice(&value.to_be_bytes());
    }

    pub fn put_be_i64(&mut self, value: i64) {
        self.bytes.extend_from_slice(&value.to_be_bytes());
    }

    /// A JFR `float`: four big-endian IEEE 754 bytes.
    pub fn put_be_f32(&mut self, value: f32) {
        self.put_bytes(&value.to_bits().to_be_bytes());
    }

    /// A JFR compressed unsigned 64-bit value (1 to 9 bytes).
    pub fn put_varint(&mut self, value: u64) {
        let mut rest = value;
        for _ in 0..8 {
            if rest < 0x80 {
                self.bytes.push(rest as u8);
                return;
            }
            self.bytes.push((rest as u8 & 0x7f) | 0x80);
            rest >>= 7;
        }
        self.bytes.push(rest as u8);
    }

    /// `value` (below 2^35) in exactly [`PADDED_VARINT_LEN`] bytes: the
    /// first four carry a continuation bit even where the value has ended,
    /// which readers decode as the value itself. A placeholder that a
    /// shorter varint can replace in place.
    pub fn put_varint_padded(&mut self, value: u64) {
        debug_assert!(value < 1 << 35, "{value} does not fit a padded varint");
        for i in 0..PADDED_VARINT_LEN - 1 {
            self.bytes.push((value >> (7 * i)) as u8 & 0x7f | 0x80);
        }
        self.bytes.push((value >> 28) as u8 & 0x7f);
    }

    /// A signed value: JFR stores the two's complement bit pattern, so small
    /// negative numbers take the full nine bytes (as in the JDK).
    pub fn put_varint_signed(&mut self, value: i64) {
        self.put_varint(value as u64);
    }

    /// A JFR `int`: the 32-bit pattern compressed (at most five bytes), as
    /// the JDK writes it.
    pub fn put_int(&mut self, value: i32) {
        self.put_varint(u64::from(value as u32));
    }

    /// A UTF-8 string (encoding 3), or the empty-string marker.
    pub fn put_string(&mut self, value: &str) {
        if value.is_empty() {
            self.bytes.push(string_encoding::EMPTY);
        } else {
            self.bytes.push(string_encoding::UTF8);
            self.put_varint(value.len() as u64);
            self.bytes.extend_from_slice(value.as_bytes());
        }
    }

    /// A UTF-8 string (encoding 3) even when empty: symbols, which
    /// async-profiler's reader accepts in no other encoding.
    pub fn put_utf8(&mut self, value: &str) {
        self.bytes.push(string_encoding::UTF8);
        self.put_varint(value.len() as u64);
        self.bytes.extend_from_slice(value.as_bytes());
    }

    pub fn put_optional_string(&mut self, value: Option<&str>) {
        match value {
            Some(s) => self.put_string(s),
            None => self.bytes.push(string_encoding::NULL),
        }
    }
}

/// Bytes of [`ByteBuf::put_varint_padded`].
pub const PADDED_VARINT_LEN: usize = 5;

/// Number of bytes `put_varint` uses for `value`.
pub fn varint_len(value: u64) -> usize {
    let mut rest = value;
    for len in 1..=8 {
        if rest < 0x80 {
            return len;
        }
        rest >>= 7;
    }
    9
}

/// Decodes a JFR compressed integer as the JDK reader does
/// (`RecordingInput.readLong`): seven bits per byte, at most nine bytes,
/// the ninth carrying eight raw bits. The value and its length, or `None`
/// if `bytes` ends first. The inverse of [`ByteBuf::put_varint`].
#[inline]
pub fn decode_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(8) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    Some((value | (u64::from(*bytes.get(8)?) << 56), 9))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_varint(bytes: &[u8]) -> (u64, usize) {
        decode_varint(bytes).expect("a complete varint")
    }

    #[test]
    fn varint_round_trips_at_every_width_boundary() {
        let mut values = vec![0u64, 1, u64::MAX, i64::MAX as u64, (-1i64) as u64];
        for shift in 1..64 {
            values.push((1u64 << shift) - 1);
            values.push(1u64 << shift);
        }
        for value in values {
            let mut buf = ByteBuf::new();
            buf.put_varint(value);
            assert_eq!(buf.len(), varint_len(value), "length of {value}");
            assert!(buf.len() <= 9);
            assert_eq!(read_varint(buf.as_slice()), (value, buf.len()), "value {value}");
        }
    }

    #[test]
    fn padded_varints_take_five_bytes_and_read_as_their_value() {
        for value in [0u64, 1, 127, 128, 16_383, 1 << 20, (1 << 35) - 1] {
            let mut buf = ByteBuf::new();
            buf.put_varint_padded(value);
            assert_eq!(buf.len(), PADDED_VARINT_LEN);
            assert_eq!(read_varint(buf.as_slice()), (value, PADDED_VARINT_LEN), "value {value}");
        }
    }

    #[test]
    fn ints_take_at_most_five_bytes() {
        let mut buf = ByteBuf::new();
        buf.put_int(-1);
        assert_eq!(buf.as_slice(), &[0xff, 0xff, 0xff, 0xff, 0x0f]);
        buf.clear();
        buf.put_int(i32::MIN);
        assert_eq!(buf.len(), 5);
        assert_eq!(read_varint(buf.as_slice()).0 as u32 as i32, i32::MIN);
        buf.clear();
        buf.put_int(42);
        assert_eq!(buf.as_slice(), &[42]);
    }

    #[test]
    fn small_values_take_one_byte() {
        let mut buf = ByteBuf::new();
        buf.put_varint(127);
        assert_eq!(buf.as_slice(), &[127]);
        buf.clear();
        buf.put_varint(128);
        assert_eq!(buf.as_slice(), &[0x80, 0x01]);
    }

    #[test]
    fn strings_use_utf8_encoding_with_byte_length() {
        let mut buf = ByteBuf::new();
        buf.put_string("héllo");
        assert_eq!(buf.as_slice()[0], 3);
        assert_eq!(buf.as_slice()[1], 6, "length counts UTF-8 bytes, not chars");
        assert_eq!(&buf.as_slice()[2..], "héllo".as_bytes());
        buf.clear();
        buf.put_string("");
        buf.put_optional_string(None);
        assert_eq!(buf.as_slice(), &[1, 0]);
        buf.clear();
        buf.put_utf8("");
        assert_eq!(buf.as_slice(), &[3, 0], "symbols are always UTF-8");
    }
}
