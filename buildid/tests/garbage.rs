//! Property test: no input makes the parser panic or read out of bounds
//! (the slice reader would panic on an out-of-range index), and a real
//! build-id survives intact until the bytes holding it are damaged.

use buildid::{from_file_bytes, from_image, Error, ImageReader};
use mutation::{Campaign, Rng};

#[global_allocator]
static ALLOC: mutation::Metered = mutation::Metered;

/// A reader over a byte slice that must never be asked for bytes outside it.
struct StrictReader<'a>(&'a [u8]);

impl ImageReader for StrictReader<'_> {
    fn read(&self, address: u64, out: &mut [u8]) -> bool {
        let start = address as usize;
        match start.checked_add(out.len()).filter(|&end| address <= usize::MAX as u64 && end <= self.0.len()) {
            Some(end) => {
                out.copy_from_slice(&self.0[start..end]);
                true
            }
            None => false,
        }
    }
}

fn sample_elf() -> Vec<u8> {
    let path = std::env::current_exe().unwrap();
    std::fs::read(path).unwrap()
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
    for round in 0..20_000 {
        let len = rng.below(512);
        let mut data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if round % 2 == 0 && len >= 6 {
            data[..4].copy_from_slice(b"\x7fELF");
            data[4] = 2;
            data[5] = 1;
        }
        let _ = from_file_bytes(&data);
        let _ = from_image(&StrictReader(&data), 0, rng.next() % 4096);
    }
}

#[test]
fn mutated_real_elf_headers_never_panic() {
    let original = sample_elf();
    let id = from_file_bytes(&original).expect("the test binary has a build-id");
    let mut rng = Rng::new(42);
    // Damage the ELF header, program headers and the area after them.
    let hot = original.len().min(4096);
    for _ in 0..3_000 {
        let mut data = original[..hot.max(1024).min(original.len())].to_vec();
        for _ in 0..1 + rng.below(8) {
            let at = rng.below(data.len());
            data[at] = rng.next() as u8;
        }
        match from_file_bytes(&data) {
            Ok(found) => assert!(found.as_bytes().len() <= 64),
            Err(Error::NotElf | Error::Unsupported | Error::Malformed | Error::NoBuildId | Error::Unreadable) => {}
        }
        let _ = from_image(&StrictReader(&data), 0, 0);
    }
    assert_eq!(from_file_bytes(&original).unwrap(), id);
}

/// Real libraries mutated anywhere (flips, cuts, inflated sizes and
/// offsets): never a panic, never more memory than the file's size.
#[test]
fn mutated_real_libraries_never_panic() {
    Campaign::new("buildid", mutation::elf_seeds()).memory(|len| len + 4096).run(|case| {
        let found = from_file_bytes(case.data);
        if case.mutations.is_empty() {
            assert!(found.is_ok(), "{}: {found:?}", case.seed);
        }
        if let Ok(id) = found {
            assert!(id.as_bytes().len() <= 64);
        }
        let _ = from_image(&StrictReader(case.data), 0, 0);
    });
}
