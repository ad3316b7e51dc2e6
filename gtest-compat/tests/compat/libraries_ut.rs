//! Port of upstream `libraries_ut` (see gtest-compat/README.md).
//!
//! Upstream's `Libraries` resolves symbols by name and finds libraries by
//! address or name. Ours (`profiler_agent::libraries::LibraryTable`) maps
//! addresses to libraries and addresses to symbol names (what the sampler
//! and the recording need); names are resolved to addresses only through
//! the dynamic loader (`dlsym`, as `vm` does for AsyncGetCallTrace). So
//! the two symbol-resolution cases check the same pairing in the direction
//! our table supports: from malloc's address (given by `dlsym`) back to its
//! name, and nothing for addresses that are no function.

use profiler_agent::libraries::sections::Wanted;
use profiler_agent::libraries::symbols::demangle;
use profiler_agent::libraries::LibraryTable;
use std::sync::OnceLock;

/// The table of this process, scanned once (upstream's `updateSymbols` in
/// `SetUp`; the libraries these cases look at do not change).
fn table() -> &'static LibraryTable {
    static TABLE: OnceLock<LibraryTable> = OnceLock::new();
    TABLE.get_or_init(|| LibraryTable::new(Wanted::Nothing))
}

fn malloc_address() -> u64 {
    // SAFETY: dlsym with a NUL-terminated name.
    let address = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"malloc".as_ptr()) };
    assert!(!address.is_null());
    address as u64
}

#[test]
fn symbol_resolution() {
    let address = malloc_address();
    let library = table().library_at(address).expect("the library holding malloc");
    let hit = library.symbols.find(address - library.bias).expect("a symbol at malloc's address");
    assert_eq!(hit.start, address - library.bias, "the symbol starts at malloc");
    assert!(demangle(hit.mangled).contains("malloc"), "{}", hit.mangled);
    assert!(library.describe(address).contains("malloc"), "{}", library.describe(address));
}

#[test]
fn symbol_resolution_non_existent() {
    let library = table().library_at(malloc_address()).unwrap();
    assert!(library.symbols.find(0).is_none());
    assert!(library.symbols.find(u64::MAX).is_none());
    let on_the_heap = Box::new(0u64);
    let heap_address = &*on_the_heap as *const u64 as u64;
    assert!(table().library_at(heap_address).is_none(), "heap memory is no library code");
}

#[test]
fn find_library_by_address() {
    let address = malloc_address();
    let library = table().library_at(address).expect("found by the table");
    assert!(library.contains(address));
    let snapshot = table().snapshots().current().expect("a snapshot for handlers");
    let same = snapshot.library_at(address).expect("found by the handler view");
    assert_eq!(same.index, library.index);
}

#[test]
fn find_library_by_name() {
    let libraries = table().libraries();
    let libc = libraries.iter().find(|l| l.name().starts_with("libc.so")).expect("libc by name");
    assert!(libc.contains(malloc_address()), "libc holds malloc");
    assert!(libc.build_id.is_some());
}

#[test]
fn find_library_by_invalid_address() {
    let snapshot = table().snapshots().current().unwrap();
    for address in [0u64, 1] {
        assert!(table().library_at(address).is_none(), "{address:#x}");
        assert!(snapshot.library_at(address).is_none(), "{address:#x}");
    }
}
