//! GNU build-id (`NT_GNU_BUILD_ID`) extraction.
//!
//! Two entry points share one parser: [`from_file_bytes`] for an ELF file's
//! contents (notes found through the section or program headers at their
//! file offsets) and [`from_image`] for an image mapped by the dynamic
//! loader (notes found through `PT_NOTE` program headers at
//! `load bias + p_vaddr`, read through a caller-supplied, fallible reader).
//!
//! Hardening: only ELFCLASS64 little-endian images are accepted; the
//! program header table must lie inside the data, `e_phoff` must be aligned
//! and `e_phentsize` must be the 64-bit size; every note header is checked
//! to fit before its name and descriptor are read, and name/descriptor
//! lengths are bounded. Malformed input yields an [`Error`], never a panic
//! or an out-of-bounds read.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

const ELF_MAGIC: [u8; 4] = [0x7f, b'E', b'L', b'F'];
const ELFCLASS64: u8 = 2;
const ELFDATA2LSB: u8 = 1;
const EHDR_SIZE: usize = 64;
const PHDR_SIZE: usize = 56;
const SHDR_SIZE: usize = 64;
const PT_NOTE: u32 = 4;
const SHT_NOTE: u32 = 7;
const NT_GNU_BUILD_ID: u32 = 3;
/// Build-ids are 16 (MD5/UUID) or 20 (SHA-1) bytes; anything up to 64 is accepted.
const MAX_BUILD_ID: usize = 64;
/// Upper bound on program headers and notes walked, against hostile counts.
const MAX_HEADERS: usize = 4096;
const MAX_NOTE_SEGMENT: u64 = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Not an ELF image (bad magic).
    NotElf,
    /// ELF, but not 64-bit little-endian.
    Unsupported,
    /// A header or table points outside the data or is misaligned.
    Malformed,
    /// A well-formed image without a GNU build-id note.
    NoBuildId,
    /// The image memory could not be read.
    Unreadable,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::NotElf => "not an ELF file",
            Error::Unsupported => "not a 64-bit little-endian ELF file",
            Error::Malformed => "malformed ELF headers",
            Error::NoBuildId => "no GNU build-id note",
            Error::Unreadable => "ELF image memory is not readable",
        })
    }
}

/// A build-id's raw bytes.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct BuildId(Vec<u8>);

impl BuildId {
    pub fn from_bytes(bytes: &[u8]) -> Self {
        Self(bytes.to_vec())
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Lower-case hex, as `readelf -n` and `.build-id/` paths spell it.
    pub fn to_hex(&self) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut s = String::with_capacity(self.0.len() * 2);
        for &b in &self.0 {
            s.push(DIGITS[usize::from(b >> 4)] as char);
            s.push(DIGITS[usize::from(b & 15)] as char);
        }
        s
    }
}

impl fmt::Debug for BuildId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BuildId({})", self.to_hex())
    }
}

/// Reads bytes of a mapped image; false when the range is not readable.
pub trait ImageReader {
    fn read(&self, address: u64, out: &mut [u8]) -> bool;
}

/// A byte slice as an image whose address 0 is its first byte.
pub struct SliceReader<'a>(pub &'a [u8]);

impl ImageReader for SliceReader<'_> {
    fn read(&self, address: u64, out: &mut [u8]) -> bool {
        let Ok(start) = usize::try_from(address) else { return false };
        match start.checked_add(out.len()).and_then(|end| self.0.get(start..end)) {
            Some(bytes) => {
                out.copy_from_slice(bytes);
                true
            }
            None => false,
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(v)
}

struct Header {
    phoff: u64,
    phnum: usize,
    shoff: u64,
    shnum: usize,
}

fn header(reader: &dyn ImageReader, base: u64) -> Result<Header, Error> {
    let mut ehdr = [0u8; EHDR_SIZE];
    if !reader.read(base, &mut ehdr) {
        return if reader.read(base, &mut ehdr[..4]) && ehdr[..4] != ELF_MAGIC {
            Err(Error::NotElf)
        } else {
            Err(Error::Unreadable)
        };
    }
    if ehdr[..4] != ELF_MAGIC {
        return Err(Error::NotElf);
    }
    if ehdr[4] != ELFCLASS64 || ehdr[5] != ELFDATA2LSB {
        return Err(Error::Unsupported);
    }
    let phoff = u64_at(&ehdr, 32);
    let shoff = u64_at(&ehdr, 40);
    let phentsize = usize::from(u16_at(&ehdr, 54));
    let phnum = usize::from(u16_at(&ehdr, 56));
    let shentsize = usize::from(u16_at(&ehdr, 58));
    let shnum = usize::from(u16_at(&ehdr, 60));
    if phnum > 0 && (phentsize != PHDR_SIZE || !phoff.is_multiple_of(8) || phoff < EHDR_SIZE as u64) {
        return Err(Error::Malformed);
    }
    let sections_ok = shnum == 0 || (shentsize == SHDR_SIZE && shoff.is_multiple_of(8));
    Ok(Header {
        phoff,
        phnum: phnum.min(MAX_HEADERS),
        shoff,
        shnum: if sections_ok { shnum.min(MAX_HEADERS) } else { 0 },
    })
}

/// Searches a note area of `len` bytes at `address` for a GNU build-id.
fn find_in_notes(reader: &dyn ImageReader, address: u64, len: u64) -> Result<Option<BuildId>, Error> {
    let len = len.min(MAX_NOTE_SEGMENT);
    let end = address.checked_add(len).ok_or(Error::Malformed)?;
    let mut at = address;
    for _ in 0..MAX_HEADERS {
        let Some(header_end) = at.checked_add(12).filter(|&e| e <= end) else { return Ok(None) };
        let mut nhdr = [0u8; 12];
        if !reader.read(at, &mut nhdr) {
            return Err(Error::Unreadable);
        }
        let namesz = u64::from(u32_at(&nhdr, 0));
        let descsz = u64::from(u32_at(&nhdr, 4));
        let kind = u32_at(&nhdr, 8);
        let name_end = header_end.checked_add(namesz).ok_or(Error::Malformed)?;
        let desc_start = header_end.checked_add((namesz + 3) & !3).ok_or(Error::Malformed)?;
        let desc_end = desc_start.checked_add(descsz).ok_or(Error::Malformed)?;
        if name_end > end || desc_end > end {
            return Err(Error::Malformed);
        }
        if kind == NT_GNU_BUILD_ID && namesz == 4 && (1..=MAX_BUILD_ID as u64).contains(&descsz) {
            let mut name = [0u8; 4];
            if !reader.read(header_end, &mut name) {
                return Err(Error::Unreadable);
            }
            if &name == b"GNU\0" {
                let mut id = [0u8; MAX_BUILD_ID];
                let id = &mut id[..descsz as usize];
                if !reader.read(desc_start, id) {
                    return Err(Error::Unreadable);
                }
                return Ok(Some(BuildId::from_bytes(id)));
            }
        }
        at = desc_start.checked_add((descsz + 3) & !3).ok_or(Error::Malformed)?;
        if at >= end {
            return Ok(None);
        }
    }
    Ok(None)
}

/// Walks `PT_NOTE` segments, placing each at `bias + p_vaddr` when
/// `loaded`, or at `p_offset` for a file.
fn from_program_headers(
    reader: &dyn ImageReader,
    base: u64,
    h: &Header,
    bias: Option<u64>,
) -> Result<Option<BuildId>, Error> {
    for i in 0..h.phnum {
        let at =
            base.checked_add(h.phoff).and_then(|a| a.checked_add((i * PHDR_SIZE) as u64)).ok_or(Error::Malformed)?;
        let mut phdr = [0u8; PHDR_SIZE];
        if !reader.read(at, &mut phdr) {
            return Err(Error::Malformed);
        }
        if u32_at(&phdr, 0) != PT_NOTE {
            continue;
        }
        let address = match bias {
            Some(bias) => bias.checked_add(u64_at(&phdr, 16)),
            None => base.checked_add(u64_at(&phdr, 8)),
        }
        .ok_or(Error::Malformed)?;
        if let Some(id) = find_in_notes(reader, address, u64_at(&phdr, 32))? {
            return Ok(Some(id));
        }
    }
    Ok(None)
}

/// The build-id of an ELF file's contents (notes from section headers,
/// else from program headers at their file offsets).
pub fn from_file_bytes(data: &[u8]) -> Result<BuildId, Error> {
    let reader = SliceReader(data);
    let h = header(&reader, 0)?;
    for i in 0..h.shnum {
        let at = h.shoff.checked_add((i * SHDR_SIZE) as u64).ok_or(Error::Malformed)?;
        let mut shdr = [0u8; SHDR_SIZE];
        if !reader.read(at, &mut shdr) {
            break; // a broken section table: fall back to program headers
        }
        if u32_at(&shdr, 4) == SHT_NOTE {
            if let Ok(Some(id)) = find_in_notes(&reader, u64_at(&shdr, 24), u64_at(&shdr, 32)) {
                return Ok(id);
            }
        }
    }
    from_program_headers(&reader, 0, &h, None)?.ok_or(Error::NoBuildId)
}

/// The build-id of an image mapped at `base` (its ELF header) with load
/// bias `bias`, read through `reader`.
pub fn from_image(reader: &dyn ImageReader, base: u64, bias: u64) -> Result<BuildId, Error> {
    let h = header(reader, base)?;
    from_program_headers(reader, base, &h, Some(bias))?.ok_or(Error::NoBuildId)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 with one PT_NOTE segment holding `notes`.
    pub(crate) fn elf_with_notes(notes: &[u8]) -> Vec<u8> {
        let mut elf = vec![0u8; EHDR_SIZE + PHDR_SIZE];
        elf[..4].copy_from_slice(&ELF_MAGIC);
        elf[4] = ELFCLASS64;
        elf[5] = ELFDATA2LSB;
        elf[32..40].copy_from_slice(&(EHDR_SIZE as u64).to_le_bytes());
        elf[54..56].copy_from_slice(&(PHDR_SIZE as u16).to_le_bytes());
        elf[56..58].copy_from_slice(&1u16.to_le_bytes());
        let ph = EHDR_SIZE;
        let notes_at = elf.len() as u64;
        elf[ph..ph + 4].copy_from_slice(&PT_NOTE.to_le_bytes());
        elf[ph + 8..ph + 16].copy_from_slice(&notes_at.to_le_bytes());
        elf[ph + 16..ph + 24].copy_from_slice(&notes_at.to_le_bytes());
        elf[ph + 32..ph + 40].copy_from_slice(&(notes.len() as u64).to_le_bytes());
        elf.extend_from_slice(notes);
        elf
    }

    fn note(kind: u32, name: &[u8], desc: &[u8]) -> Vec<u8> {
        let mut n = Vec::new();
        n.extend_from_slice(&(name.len() as u32).to_le_bytes());
        n.extend_from_slice(&(desc.len() as u32).to_le_bytes());
        n.extend_from_slice(&kind.to_le_bytes());
        n.extend_from_slice(name);
        n.resize(n.len().next_multiple_of(4), 0);
        n.extend_from_slice(desc);
        n.resize(n.len().next_multiple_of(4), 0);
        n
    }

    #[test]
    fn finds_the_build_id_after_other_notes() {
        let mut notes = note(1, b"GNU\0", &[0; 16]);
        notes.extend(note(NT_GNU_BUILD_ID, b"GNU\0", &[0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4]));
        let elf = elf_with_notes(&notes);
        assert_eq!(from_file_bytes(&elf).unwrap().to_hex(), "deadbeef01020304");
        assert_eq!(from_image(&SliceReader(&elf), 0, 0).unwrap().to_hex(), "deadbeef01020304");
    }

    #[test]
    fn rejects_what_it_must() {
        assert_eq!(
            from_file_bytes(b"not an elf at all, just text........................................"),
            Err(Error::NotElf)
        );
        let mut elf = elf_with_notes(&note(NT_GNU_BUILD_ID, b"GNU\0", &[1; 20]));
        elf[4] = 1; // ELFCLASS32
        assert_eq!(from_file_bytes(&elf), Err(Error::Unsupported));
        let mut elf = elf_with_notes(&note(NT_GNU_BUILD_ID, b"GNU\0", &[1; 20]));
        elf[32] = 65; // misaligned e_phoff
        assert_eq!(from_file_bytes(&elf), Err(Error::Malformed));
        let elf = elf_with_notes(&note(NT_GNU_BUILD_ID, b"XYZ\0", &[1; 20]));
        assert_eq!(from_file_bytes(&elf), Err(Error::NoBuildId));
        let mut notes = note(NT_GNU_BUILD_ID, b"GNU\0", &[1; 20]);
        notes[4..8].copy_from_slice(&0xffff_fff0u32.to_le_bytes()); // descsz far past the end
        assert_eq!(from_file_bytes(&elf_with_notes(&notes)), Err(Error::Malformed));
        let elf = elf_with_notes(&note(NT_GNU_BUILD_ID, b"GNU\0", &[7; 20]));
        assert!(from_file_bytes(&elf[..elf.len() - 4]).is_err(), "truncated");
    }
}
