//! Read-only maps of library files. Parsing a library touches only the
//! pages it reads (headers, symbol tables, unwind sections); reading the
//! whole file into the heap instead raised the process's resident memory
//! by the file's size for a moment (about 20 MB for libjvm). Control plane
//! only.
//!
//! A file truncated in place while mapped would fault on access; package
//! managers replace libraries by renaming a new file over the old one,
//! which leaves this mapping intact.

use std::ffi::c_void;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

pub struct FileMap {
    address: *mut c_void,
    len: usize,
}

impl FileMap {
    pub fn open(path: &str) -> io::Result<Self> {
        let file = File::open(path)?;
        let len = usize::try_from(file.metadata()?.len()).map_err(|_| io::Error::other("file too large"))?;
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "empty file"));
        }
        // SAFETY: a fresh read-only private mapping of an open file; the
        // descriptor may close afterwards, the mapping stays.
        let address =
            unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0) };
        if address == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { address, len })
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `len` readable bytes are mapped at `address` until drop.
        unsafe { std::slice::from_raw_parts(self.address.cast::<u8>(), self.len) }
    }
}

impl Drop for FileMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `open`.
        unsafe { libc::munmap(self.address, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_a_file_and_refuses_what_is_not_one() {
        let exe = std::env::current_exe().unwrap();
        let map = FileMap::open(exe.to_str().unwrap()).unwrap();
        assert_eq!(&map.bytes()[..4], b"\x7fELF");
        assert_eq!(map.bytes().len() as u64, std::fs::metadata(&exe).unwrap().len());
        assert!(FileMap::open("/nonexistent/library.so").is_err());
        assert!(FileMap::open("/dev/null").is_err(), "empty");
    }
}
