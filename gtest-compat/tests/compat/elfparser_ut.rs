//! Port of upstream `elfparser_ut` (see gtest-compat/README.md).
//!
//! Upstream parses ELF files into code caches (`ElfParser`,
//! `Symbols::parseLibraries`). Ours: `SymbolTable::from_elf` for a file's
//! symbols, `scan` for what is mapped (`dl_iterate_phdr` plus executable
//! file mappings from `/proc/self/maps`), `LibraryTable` for the whole
//! table, and `buildid` for the build-id, read from the file or from the
//! mapped image. The invalid-ELF cases map a crafted file executable, as
//! upstream does, and scan the process: the scan must not crash and must
//! not take the mapping for a library.
//!
//! Not ported: `ElfReladyn.*`: upstream
//! resolves import slots (`.rela.plt`, `.rela.dyn`) to hook
//! `pthread_create` and friends; we patch no imports (threads are found
//! through JVMTI ThreadStart and `/proc/self/task`).

use buildid::ImageReader;
use profiler_agent::libraries::scan::{self, OwnMemory};
use profiler_agent::libraries::sections::Wanted;
use profiler_agent::libraries::symbols::{demangle, SymbolTable};
use profiler_agent::libraries::LibraryTable;
use std::ffi::{c_void, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Where the crafted files go: the target directory, which (unlike some
/// /tmp mounts) allows executable mappings.
fn scratch_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("elfparser_ut");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A file of ours in [`scratch_dir`], removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, contents: &[u8], len: u64) -> Self {
        let path = scratch_dir().join(format!("{}-{name}", std::process::id()));
        std::fs::write(&path, contents).unwrap();
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(len.max(contents.len() as u64)).unwrap();
        Self(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `len` bytes of `file` mapped readable and executable, unmapped on drop.
struct ExecMapping {
    address: *mut c_void,
    len: usize,
}

impl ExecMapping {
    fn new(file: &TempFile, len: usize) -> Self {
        let path = CString::new(file.0.as_os_str().as_bytes()).unwrap();
        // SAFETY: plain open/mmap/close of our own file.
        let address = unsafe {
            let fd = libc::open(path.as_ptr(), libc::O_RDONLY);
            assert!(fd >= 0, "open {}", file.0.display());
            let address =
                libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_EXEC, libc::MAP_PRIVATE, fd, 0);
            libc::close(fd);
            address
        };
        assert_ne!(address, libc::MAP_FAILED, "mmap {} executable", file.0.display());
        Self { address, len }
    }

    fn start(&self) -> u64 {
        self.address as u64
    }
}

impl Drop for ExecMapping {
    fn drop(&mut self) {
        // SAFETY: unmaps what `new` mapped.
        unsafe { libc::munmap(self.address, self.len) };
    }
}

/// A 64-byte ELF header with a valid magic but a 32-bit class.
fn invalid_elf_header() -> Vec<u8> {
    let mut header = vec![0u8; 64];
    header[..7].copy_from_slice(&[0x7f, b'E', b'L', b'F', 1, 1, 1]);
    header
}

/// Scans the process with `mapping` in place: the scan completes, and
/// nothing (unlisted mappings, the library table) takes the mapping for a
/// library.
fn scan_ignores(file: &TempFile, mapping: &ExecMapping) {
    let path = file.0.to_string_lossy().into_owned();
    let maps = scan::parse_maps(&std::fs::read_to_string("/proc/self/maps").unwrap());
    assert!(
        maps.iter().any(|m| m.path == path && m.executable && m.range.contains(&mapping.start())),
        "the crafted file is mapped executable"
    );
    let (objects, _) = scan::loaded_objects();
    assert!(!objects.iter().any(|o| o.path == path));
    assert!(!scan::unlisted_mappings(&objects).iter().any(|o| o.path == path));

    for wanted in [Wanted::Dwarf, Wanted::SFrame] {
        let table = LibraryTable::new(wanted);
        assert!(table.snapshots().current().unwrap().library_at(mapping.start()).is_none());
        assert!(table.library_at(mapping.start()).is_none());
        assert!(!table.libraries().iter().any(|l| l.path == path));
    }

    // The build-id readers reject it too, from the file and from memory.
    let bytes = std::fs::read(&file.0).unwrap();
    assert!(buildid::from_file_bytes(&bytes).is_err());
    assert!(buildid::from_image(&OwnMemory, mapping.start(), mapping.start()).is_err());
    assert!(SymbolTable::from_elf(&bytes).is_empty());
}

#[inline(never)]
fn read_sym_table_probe() -> u32 {
    std::hint::black_box(41) + 1
}

/// Parses this test binary's own symbol table from its file and finds a
/// function of it by link-time address.
#[test]
fn read_sym_table() {
    assert_eq!(read_sym_table_probe(), 42);
    let bytes = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    let symbols = SymbolTable::from_elf(&bytes);
    assert!(symbols.len() > 100, "{} symbols", symbols.len());
    assert!(symbols.find(0).is_none(), "undefined (imported) symbols claim no address");

    let runtime = read_sym_table_probe as *const () as u64;
    let (objects, _) = scan::loaded_objects();
    let exe = objects.iter().find(|o| o.text.iter().any(|t| t.contains(&runtime))).expect("the executable");
    let hit = symbols.find(runtime - exe.bias).expect("the probe's symbol");
    assert_eq!(hit.start, runtime - exe.bias);
    assert!(demangle(hit.mangled).ends_with("elfparser_ut::read_sym_table_probe"), "{}", demangle(hit.mangled));
}

#[test]
fn invalid_elf() {
    let file = TempFile::new("invalid_elf", &invalid_elf_header(), 4096);
    let mapping = ExecMapping::new(&file, 4096);
    scan_ignores(&file, &mapping);
}

#[test]
fn non_elf_file() {
    let file = TempFile::new("non_elf", b"This is not an ELF file\0", 0);
    let mapping = ExecMapping::new(&file, 24);
    scan_ignores(&file, &mapping);
}

#[test]
fn invalid_elf_small_mapping() {
    // Only 16 bytes of the 64-byte header mapped.
    let file = TempFile::new("invalid_elf_small", &invalid_elf_header(), 0);
    let mapping = ExecMapping::new(&file, 16);
    scan_ignores(&file, &mapping);
    let mut magic = [0u8; 4];
    assert!(OwnMemory.read(mapping.start(), &mut magic));
    assert_eq!(&magic, b"\x7fELF");
}

#[test]
fn non_elf_file_small_mapping() {
    let file = TempFile::new("non_elf_small", b"Not ELF", 0);
    let mapping = ExecMapping::new(&file, 7);
    scan_ignores(&file, &mapping);
}

const SMALL_LIB_SOURCE: &str = "int small_lib_function(int x) { return 3 * x + 1; }\n";

/// Builds a small shared library with the system C compiler (as the
/// integration tests build their JNI fixtures).
fn build_small_lib() -> (TempFile, TempFile) {
    let source = TempFile::new("small.c", SMALL_LIB_SOURCE.as_bytes(), 0);
    let library = TempFile(scratch_dir().join(format!("{}-libsmall-lib.so", std::process::id())));
    let status = Command::new("cc")
        .args(["-O1", "-shared", "-fPIC", "-Wl,--build-id", "-o"])
        .arg(&library.0)
        .arg(&source.0)
        .status()
        .expect("a C compiler (cc) to build the test library");
    assert!(status.success(), "cc failed");
    (source, library)
}

/// Upstream: `dlclose` the library from another thread 3 to 20 ms into a
/// scan (parameterised by the delay), which must not crash. Ours: for each
/// delay, scan (loader walk with build-ids read from memory, maps walk,
/// table refresh) in a loop while the library is closed underneath; then
/// the table must have dropped it.
#[test]
fn invalid_elf_small_mapping_after_unmap() {
    let (_source, library) = build_small_lib();
    let name = library.0.file_name().unwrap().to_string_lossy().into_owned();
    let path = CString::new(library.0.as_os_str().as_bytes()).unwrap();
    let table = LibraryTable::new(Wanted::Dwarf);
    for delay in 3..=20u64 {
        // SAFETY: loading our own trivial library; its handle is closed once below.
        let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW) };
        assert!(!handle.is_null(), "dlopen {}", library.0.display());
        // SAFETY: dlsym on a live handle with a NUL-terminated name.
        let function = unsafe { libc::dlsym(handle, c"small_lib_function".as_ptr()) } as u64;
        assert_ne!(function, 0);

        table.refresh_if_changed();
        let loaded = table.snapshots().current().unwrap().library_at(function).map(|l| l.name().to_owned());
        assert_eq!(loaded.as_deref(), Some(name.as_str()), "delay {delay}");

        let handle = handle as usize;
        let closer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(delay));
            // SAFETY: the handle from dlopen above, closed exactly once.
            unsafe { libc::dlclose(handle as *mut c_void) };
        });
        while !closer.is_finished() {
            let (objects, _) = scan::loaded_objects();
            let _ = scan::unlisted_mappings(&objects);
            table.refresh_if_changed();
        }
        closer.join().unwrap();

        table.refresh_if_changed();
        let after = table.snapshots().current().unwrap().library_at(function).map(|l| l.name().to_owned());
        assert_ne!(after.as_deref(), Some(name.as_str()), "delay {delay}: still listed after dlclose");
    }
}
