//! Port of upstream `ddprof_ut` (see gtest-compat/README.md).
//!
//! Only the `Buffer` cases have a counterpart: our JFR encoding is
//! `jfr_writer::buffer::ByteBuf`, a growable buffer (no fixed capacity, no
//! flush callback, no overflow assertion; the agent decides when bytes go
//! to the file). The other upstream cases (OS, Context, ThreadFilter,
//! ThreadInfo, AsyncSampleMutex, JavaVersionAccess) test classes our
//! design does not have; see the README table.

use jfr_writer::buffer::{varint_len, ByteBuf};

/// JFR's string encoding tag for UTF-8 (`StringParser`).
const UTF8: u8 = 3;

fn read_varint(bytes: &[u8]) -> (u64, usize) {
    jfr_writer::buffer::decode_varint(bytes).expect("a complete varint")
}

/// Decodes one UTF-8 string entry: (text, bytes consumed).
fn read_string(bytes: &[u8]) -> (&str, usize) {
    assert_eq!(bytes[0], UTF8, "UTF-8 encoding tag");
    let (len, prefix) = read_varint(&bytes[1..]);
    let start = 1 + prefix;
    let end = start + len as usize;
    (std::str::from_utf8(&bytes[start..end]).expect("valid UTF-8"), end)
}

#[test]
fn var64_encoding() {
    // 2097150 = 0x1f_fffe: three seven-bit groups, low group first.
    let mut buf = ByteBuf::new();
    buf.put_varint(2_097_150);
    assert_eq!(buf.as_slice(), &[0xfe, 0xff, 0x7f]);
    assert_eq!(varint_len(2_097_150), 3);
    assert_eq!(read_varint(buf.as_slice()), (2_097_150, 3));

    // Around it: the largest three-byte value and the first four-byte one;
    // the full 64-bit range stays within nine bytes.
    for (value, len) in [(0x1f_ffff, 3), (0x20_0000, 4), (u64::MAX, 9)] {
        let mut buf = ByteBuf::new();
        buf.put_varint(value);
        assert_eq!(buf.len(), len, "{value:#x}");
        assert_eq!(read_varint(buf.as_slice()), (value, len), "{value:#x}");
    }
}

#[test]
fn write_string() {
    // A 4191-character string after other content, written twice: each
    // entry is tag, byte length, bytes, and the second does not disturb
    // the first (upstream: the second write overflows its fixed buffer
    // and must assert; ours grows).
    let text = "a".repeat(4191);
    let mut buf = ByteBuf::new();
    buf.put_bytes(&[0x55; 100]);
    buf.put_string(&text);
    assert_eq!(buf.len(), 100 + 1 + varint_len(4191) + 4191);
    buf.put_string(&text);
    let bytes = &buf.as_slice()[100..];
    let (first, used) = read_string(bytes);
    assert_eq!(first, text);
    assert_eq!(used, 1 + 2 + 4191, "a two-byte length prefix");
    let (second, rest) = read_string(&bytes[used..]);
    assert_eq!(second, text);
    assert_eq!(used + rest, bytes.len());
}

#[test]
fn write_string_with_length() {
    // A 64 KiB string in one buffer leaves another buffer unaffected, and
    // is written whole, with its exact byte length.
    let text = "a".repeat(1 << 16);
    let mut bufs = [ByteBuf::new(), ByteBuf::new()];
    bufs[0].put_string(&text);
    bufs[1].put_u8(1);
    assert_eq!(bufs[1].as_slice(), &[1]);
    let (written, used) = read_string(bufs[0].as_slice());
    assert_eq!(written.len(), 1 << 16);
    assert_eq!(used, bufs[0].len());

    // Multi-byte characters: the length counts bytes.
    let mut buf = ByteBuf::new();
    buf.put_string("ünïcødé €");
    assert_eq!(read_string(buf.as_slice()), ("ünïcødé €", buf.len()));
}

/// Upstream truncates a long string to 8191 characters (its
/// `MAX_STRING_LENGTH`, guarding a fixed 64 KiB buffer); `put_string`
/// writes every byte.
#[test]
/// Upstream cuts strings at 8191 bytes to fit its fixed buffer; ours grows,
/// so a long string (a generated class name, a long thread name) is
/// written whole and reads back intact.
fn write_string_with_length_truncates_to_8191() {
    let mut buf = ByteBuf::new();
    let long = "a".repeat(1 << 16);
    buf.put_string(&long);
    let (written, used) = read_string(buf.as_slice());
    assert_eq!(written, long);
    assert_eq!(used, buf.len());
}
