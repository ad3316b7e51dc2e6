//! A cursor over one chunk's bytes that never reads past its end and
//! checks every count it reads against the bytes that remain before the
//! count sizes anything.

use std::fmt;

/// Why a chunk cannot be read: what was wrong, and at which byte of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed {
    pub offset: u64,
    pub what: String,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at byte {})", self.what, self.offset)
    }
}

impl std::error::Error for Malformed {}

pub type Result<T> = std::result::Result<T, Malformed>;

/// A string as JFR encodes it: absent, inline, or a key into the chunk's
/// `java.lang.String` pool.
#[derive(Debug, PartialEq, Eq)]
pub enum JfrString {
    Null,
    Inline(Box<str>),
    Pooled(i64),
}

#[derive(Clone)]
pub struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
    /// The file offset of `data[0]`, for messages.
    base: u64,
    /// Integers as varints (the header's flag), else big-endian.
    compressed: bool,
}

impl<'a> Bytes<'a> {
    pub fn new(data: &'a [u8], base: u64, compressed: bool) -> Self {
        Self { data, pos: 0, base, compressed }
    }

    pub fn error<T>(&self, what: impl Into<String>) -> Result<T> {
        Err(Malformed { offset: self.base + self.pos as u64, what: what.into() })
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    /// The next `len` bytes.
    pub fn prefix(&self, len: usize) -> Option<&'a [u8]> {
        self.data.get(self.pos..self.pos.checked_add(len)?)
    }

    /// Where the cursor is in the file.
    pub fn file_offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The `len` bytes from `start` as a cursor of their own.
    pub fn slice(&self, start: usize, len: usize) -> Result<Bytes<'a>> {
        match start.checked_add(len).and_then(|end| self.data.get(start..end)) {
            Some(data) => Ok(Bytes { data, pos: 0, base: self.base + start as u64, compressed: self.compressed }),
            None => Err(Malformed {
                offset: self.base + start as u64,
                what: format!("{len} bytes at {start} run past the end ({} bytes)", self.data.len()),
            }),
        }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        match self.data.get(self.pos..self.pos + N) {
            Some(bytes) => {
                self.pos += N;
                Ok(bytes.try_into().unwrap_or([0; N]))
            }
            None => self.error("unexpected end of data"),
        }
    }

    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take::<1>()?[0])
    }

    pub fn be_i16(&mut self) -> Result<i16> {
        self.take().map(i16::from_be_bytes)
    }

    pub fn be_i32(&mut self) -> Result<i32> {
        self.take().map(i32::from_be_bytes)
    }

    pub fn be_i64(&mut self) -> Result<i64> {
        self.take().map(i64::from_be_bytes)
    }

    #[inline]
    fn varint(&mut self) -> Result<u64> {
        // Most integers are small: one byte.
        if let Some(&b) = self.data.get(self.pos).filter(|&&b| b < 0x80) {
            self.pos += 1;
            return Ok(u64::from(b));
        }
        match jfr_writer::buffer::decode_varint(&self.data[self.pos..]) {
            Some((value, used)) => {
                self.pos += used;
                Ok(value)
            }
            None => self.error("unexpected end of data in a compressed integer"),
        }
    }

    /// A `long` (and the sizes, ids and keys stored as longs).
    pub fn long(&mut self) -> Result<i64> {
        if self.compressed {
            self.varint().map(|v| v as i64)
        } else {
            self.be_i64()
        }
    }

    /// An `int`: a varint truncated to 32 bits, as the JDK reads it.
    pub fn int(&mut self) -> Result<i32> {
        if self.compressed {
            self.varint().map(|v| v as i32)
        } else {
            self.be_i32()
        }
    }

    pub fn short(&mut self) -> Result<i16> {
        if self.compressed {
            self.varint().map(|v| v as i16)
        } else {
            self.be_i16()
        }
    }

    pub fn float(&mut self) -> Result<f32> {
        self.take().map(f32::from_be_bytes)
    }

    pub fn double(&mut self) -> Result<f64> {
        self.take().map(f64::from_be_bytes)
    }

    /// A count of things of at least `min_size` bytes each: rejected
    /// unless that many fit in the bytes that remain, so no count read
    /// from a file sizes more than the file holds.
    pub fn count(&mut self, min_size: usize, what: &str) -> Result<usize> {
        let count = self.int()?;
        match usize::try_from(count) {
            Ok(n) if n.saturating_mul(min_size.max(1)) <= self.remaining() => Ok(n),
            _ => self.error(format!("{what} count {count} does not fit in the {} bytes left", self.remaining())),
        }
    }

    pub fn string(&mut self) -> Result<JfrString> {
        match self.u8()? {
            0 => Ok(JfrString::Null),
            1 => Ok(JfrString::Inline("".into())),
            2 => Ok(JfrString::Pooled(self.long()?)),
            3 => {
                let bytes = self.bytes("UTF-8 string")?;
                Ok(JfrString::Inline(String::from_utf8_lossy(bytes).into()))
            }
            4 => {
                let len = self.count(1, "UTF-16 string")?;
                let mut units = Vec::with_capacity(len);
                for _ in 0..len {
                    units.push(self.short()? as u16);
                }
                Ok(JfrString::Inline(String::from_utf16_lossy(&units).into()))
            }
            5 => {
                let bytes = self.bytes("Latin-1 string")?;
                Ok(JfrString::Inline(bytes.iter().map(|&b| char::from(b)).collect::<String>().into()))
            }
            other => {
                self.pos -= 1;
                self.error(format!("unknown string encoding {other}"))
            }
        }
    }

    /// Moves past a string; a pooled one's key.
    pub fn skip_string(&mut self) -> Result<Option<i64>> {
        match self.u8()? {
            0 | 1 => Ok(None),
            2 => Ok(Some(self.long()?)),
            3 | 5 => self.bytes("string").map(|_| None),
            4 => {
                let len = self.count(1, "UTF-16 string")?;
                for _ in 0..len {
                    self.short()?;
                }
                Ok(None)
            }
            other => {
                self.pos -= 1;
                self.error(format!("unknown string encoding {other}"))
            }
        }
    }

    fn bytes(&mut self, what: &str) -> Result<&'a [u8]> {
        let len = self.count(1, what)?;
        let bytes = &self.data[self.pos..self.pos + len];
        self.pos += len;
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_larger_than_the_rest_are_refused_before_anything_is_sized() {
        // 0x7fffffff as a varint, then two bytes.
        let data = [0xff, 0xff, 0xff, 0xff, 0x07, 1, 2];
        let mut bytes = Bytes::new(&data, 100, true);
        let error = bytes.count(1, "pool").unwrap_err();
        assert_eq!(error.offset, 105);
        assert!(error.what.contains("pool count 2147483647"), "{error}");
        let mut bytes = Bytes::new(&[0x7f, 0, 0], 0, true); // 127, with two bytes left
        assert!(bytes.count(1, "x").is_err());
        let mut negative = Bytes::new(&[0xff, 0xff, 0xff, 0xff, 0x0f], 0, true);
        assert!(negative.count(0, "x").is_err());
        let mut fits = Bytes::new(&[2, 9, 9], 0, true);
        assert_eq!(fits.count(1, "x"), Ok(2));
    }

    #[test]
    fn strings_in_every_encoding() {
        let data = [
            0, // null
            1, // empty
            2, 5, // pooled, key 5
            3, 2, b'h', 0xc3, // UTF-8 of two bytes, one invalid
            4, 2, 0x68, 0xe9, 0x01, // UTF-16: 'h', 0xe9 (é) as a varint
            5, 1, 0xe9, // Latin-1 é
        ];
        let mut bytes = Bytes::new(&data, 0, true);
        assert_eq!(bytes.string(), Ok(JfrString::Null));
        assert_eq!(bytes.string(), Ok(JfrString::Inline("".into())));
        assert_eq!(bytes.string(), Ok(JfrString::Pooled(5)));
        assert_eq!(bytes.string(), Ok(JfrString::Inline("h\u{fffd}".into())));
        assert_eq!(bytes.string(), Ok(JfrString::Inline("hé".into())));
        assert_eq!(bytes.string(), Ok(JfrString::Inline("é".into())));
        assert!(bytes.is_empty());
        assert!(Bytes::new(&[3, 10, b'a'], 0, true).string().is_err());
        assert!(Bytes::new(&[9], 0, true).string().is_err());
    }

    #[test]
    fn reads_stop_at_the_end() {
        let mut bytes = Bytes::new(&[0x80, 0x80], 0, true);
        assert!(bytes.long().is_err());
        let mut raw = Bytes::new(&[0, 0, 0], 0, false);
        assert!(raw.int().is_err());
        assert!(raw.slice(1, 3).is_err());
        assert!(raw.slice(usize::MAX, 2).is_err());
        assert_eq!(raw.slice(1, 2).map(|s| s.remaining()), Ok(2));
    }
}
