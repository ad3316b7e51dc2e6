//! Port of upstream `remotesymbolication_ut` (see gtest-compat/README.md).
//!
//! Upstream keeps a `RemoteFrameInfo` (build-id string, pc offset, library
//! index) per frame and extracts build-ids from a path or a memory range
//! with C pointers. Ours: a stored frame packs library index, mark and pc
//! offset into 64 bits (`frames::RemoteFrame`, kind
//! `RemoteNative`, bci `BCI_NATIVE_FRAME_REMOTE`); the build-id lives once
//! per library in the library table; `buildid` parses file bytes
//! (`from_file_bytes`) or a mapped image through a fallible reader
//! (`from_image`). Null pointers cannot be expressed in those APIs.

use buildid::{BuildId, Error, SliceReader};
use frames::{CallTraceError, Frame, FrameKind, Mark, RemoteFrame, BCI_NATIVE_FRAME_REMOTE, BCI_NATIVE_METHOD};
use profiler_agent::libraries::scan::{self, OwnMemory};
use std::path::{Path, PathBuf};

/// A file's build-id the way the library table gets it for a library it
/// cannot read from memory: read the file, parse its bytes.
fn build_id_of_file(path: &Path) -> Result<BuildId, Option<Error>> {
    let bytes = std::fs::read(path).map_err(|_| None)?;
    buildid::from_file_bytes(&bytes).map_err(Some)
}

/// A file in the temporary directory, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(tag: &str, contents: &[u8]) -> TempFile {
        let path = std::env::temp_dir().join(format!("gtest-compat-{tag}-{}", std::process::id()));
        std::fs::write(&path, contents).expect("temporary file written");
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn remote_frame_info_construction() {
    // What a remote frame carries: the library's build-id (through its
    // index in the library table) and the pc offset in that library.
    let build_id = BuildId::from_bytes(&[0xde, 0xad, 0xbe, 0xef, 0xca, 0xfe, 0xba, 0xbe]);
    assert_eq!(build_id.to_hex(), "deadbeefcafebabe");

    let info = RemoteFrame { offset: 0x1234, mark: Mark::None, lib_index: 5 };
    let frame = Frame::remote(info.pack().expect("small offset and index pack"));
    assert_eq!(frame.kind, FrameKind::RemoteNative);
    let back = RemoteFrame::unpack(frame.method);
    assert_eq!(back.offset, 0x1234);
    assert_eq!(back.lib_index, 5);
    assert_eq!(back.mark, Mark::None);
    assert_eq!(back, info);

    // The library index leads to the build-id: this process's own
    // libraries, as the loader reports them, carry theirs.
    let (objects, _) = scan::loaded_objects();
    let libc = objects
        .iter()
        .find(|o| o.path.rsplit('/').next().is_some_and(|name| name.starts_with("libc.so")))
        .expect("libc is loaded");
    let libc_id = libc.build_id.as_ref().expect("libc has a build-id");
    assert_eq!(build_id_of_file(Path::new(&libc.path)).as_ref(), Ok(libc_id), "memory and file agree");
}

#[test]
fn bci_frame_type_constants() {
    assert_eq!(BCI_NATIVE_FRAME_REMOTE, -19);
    let remote = Frame::remote(0);
    assert_eq!(remote.bci, BCI_NATIVE_FRAME_REMOTE);

    // No other stored frame uses the remote marker as its bci: native
    // frames (upstream BCI_NATIVE_FRAME), error markers (BCI_ERROR) and
    // Java `native` methods have their own.
    let others = [
        Frame::native(0x1000),
        Frame::error(CallTraceError::NoClassLoad),
        Frame::java(1, BCI_NATIVE_METHOD),
        Frame::java(1, 0),
    ];
    for other in others {
        assert_ne!(other.bci, BCI_NATIVE_FRAME_REMOTE, "{other:?}");
        assert_ne!(other.kind, remote.kind, "{other:?}");
    }
    assert_ne!(BCI_NATIVE_FRAME_REMOTE, BCI_NATIVE_METHOD);
}

#[test]
fn build_id_extraction_basic() {
    // A file that does not exist has no build-id, and nothing breaks.
    assert_eq!(build_id_of_file(Path::new("/nonexistent")), Err(None));
    assert!(buildid::from_file_bytes(&[]).is_err(), "an empty file has none either");

    // A real ELF file: this test binary, linked with a build-id, gives the
    // same id from its file as the loader's view of it in memory.
    let exe = std::env::current_exe().expect("test binary path");
    let from_file = build_id_of_file(&exe).expect("the test binary has a build-id");
    assert!(matches!(from_file.as_bytes().len(), 16 | 20), "{from_file:?}");
    let (objects, _) = scan::loaded_objects();
    let main = objects.first().expect("the main executable is listed first");
    assert_eq!(main.build_id.as_ref(), Some(&from_file));
}

#[test]
fn build_id_extraction_invalid_input() {
    // Null path and null output parameter: not expressible (`&[u8]` in,
    // `Result` out).
    let text = TempFile::new("not-an-elf", b"This is not an ELF file");
    assert_eq!(build_id_of_file(&text.0), Err(Some(Error::NotElf)));
    // Longer than an ELF header, still not ELF.
    assert_eq!(buildid::from_file_bytes(&[b'x'; 256]), Err(Error::NotElf));
}

#[test]
fn build_id_from_memory_invalid_input() {
    // A null image address: nothing mapped at page zero.
    assert_eq!(buildid::from_image(&OwnMemory, 0, 0), Err(Error::Unreadable));

    // A zero-sized image.
    let dummy = [0u8; 10];
    assert_eq!(buildid::from_image(&SliceReader(&dummy[..0]), 0, 0), Err(Error::Unreadable));

    // Readable memory that is not an ELF image (zeros).
    let zeros = [0u8; 128];
    let address = zeros.as_ptr() as u64;
    assert_eq!(buildid::from_image(&OwnMemory, address, address), Err(Error::NotElf));
    assert_eq!(buildid::from_image(&SliceReader(&zeros), 0, 0), Err(Error::NotElf));
    // Null output parameter: not expressible (`Result` out).
}
