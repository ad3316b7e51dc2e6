//! Names of kernel frames, from `/proc/kallsyms`, kept for the process
//! (the kernel's functions outlive sessions): [`names`]. The table (about
//! 120k functions, 4 MB, a tenth of a second to read) is not kept: when a
//! chunk meets kernel addresses not named yet, it is read, names them, and
//! is kept while chunks keep needing it, then dropped once none did for
//! [`KEEP`]; the names stay, one per distinct address (hundreds, in
//! practice). Control plane only.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a table no chunk needed is kept (frequent dumps of a workload
/// still meeting new kernel code read it once, not once a dump).
const KEEP: Duration = Duration::from_secs(60);

const KALLSYMS: &str = "/proc/kallsyms";

/// The text functions of a kallsyms listing, sorted by address.
struct Table {
    listing: String,
    /// Address, then where the name lies in `listing`.
    symbols: Vec<(u64, u32, u32)>,
}

impl Table {
    /// The table of `listing`; empty when every address reads 0
    /// (`kptr_restrict` hides them from this process).
    fn new(listing: String) -> Self {
        let mut symbols = Vec::new();
        let mut offset = 0;
        for line in listing.split_inclusive('\n') {
            let start = offset;
            offset += line.len();
            let mut fields = line.split_ascii_whitespace();
            let (Some(address), Some(kind), Some(name)) = (fields.next(), fields.next(), fields.next()) else {
                continue;
            };
            let Ok(address) = u64::from_str_radix(address, 16) else { continue };
            let name_start = start + (name.as_ptr() as usize - line.as_ptr() as usize);
            let (Ok(at), Ok(len)) = (u32::try_from(name_start), u32::try_from(name.len())) else { continue };
            if matches!(kind, "t" | "T") && address != 0 {
                symbols.push((address, at, len));
            }
        }
        symbols.sort_unstable_by_key(|&(address, _, _)| address);
        Self { listing, symbols }
    }

    /// The function holding `address`.
    fn containing(&self, address: u64) -> Option<&str> {
        let index = self.symbols.partition_point(|&(start, _, _)| start <= address).checked_sub(1)?;
        let &(_, at, len) = self.symbols.get(index)?;
        self.listing.get(at as usize..(at + len) as usize)
    }
}

/// The kernel's symbols (`/proc/kallsyms`), read once per process: they do
/// not change, and reading them takes a while.
static NAMES: Mutex<KernelNames> = Mutex::new(KernelNames { names: None, table: None });

/// The process's kernel frame names, for writing a chunk.
pub fn names() -> MutexGuard<'static, KernelNames> {
    NAMES.lock().unwrap_or_else(|p| p.into_inner())
}

/// Kernel frame names.
#[derive(Default)]
pub struct KernelNames {
    /// By address (a `HashMap` made on first use: a static needs a
    /// `const` start).
    names: Option<HashMap<u64, String>>,
    /// The table, if a recent chunk needed it, and when one last did.
    table: Option<(Table, Instant)>,
}

impl KernelNames {
    /// The name of the kernel function at `address`: `[kernel]` where
    /// kallsyms cannot say (unreadable, or addresses hidden).
    pub fn name(&mut self, address: u64) -> &str {
        let table = &mut self.table;
        self.names.get_or_insert_with(HashMap::new).entry(address).or_insert_with(|| {
            let (table, used) = table.get_or_insert_with(|| {
                (Table::new(std::fs::read_to_string(KALLSYMS).unwrap_or_default()), Instant::now())
            });
            *used = Instant::now();
            table.containing(address).unwrap_or("[kernel]").to_owned()
        })
    }

    /// After a chunk is written: drops the table if no chunk needed it
    /// for [`KEEP`].
    pub fn end_chunk(&mut self) {
        if self.table.as_ref().is_some_and(|(_, used)| used.elapsed() >= KEEP) {
            self.table = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_named_by_the_text_symbol_below_them() {
        let listing = "ffffffff81000100 T second\nffffffff81000000 T _stext\nffffffff81000080 D data\n\
                       ffffffff81000200 t local\t[module]\n0000000000000000 T hidden\nbroken\n";
        let table = Table::new(listing.to_owned());
        assert_eq!(table.symbols.len(), 3);
        assert_eq!(table.containing(0xffff_ffff_8100_0090), Some("_stext"), "data symbols do not count");
        assert_eq!(table.containing(0xffff_ffff_8100_0100), Some("second"));
        assert_eq!(table.containing(0xffff_ffff_8100_0300), Some("local"));
        assert_eq!(table.containing(0xffff_ffff_8000_0000), None);
        assert!(Table::new("0000000000000000 T a\n0000000000000000 t b\n".to_owned()).symbols.is_empty());
    }

    /// This machine's kernel names its own entry points (when kallsyms
    /// shows addresses to this process).
    #[test]
    fn this_kernels_functions_are_named() {
        let listing = std::fs::read_to_string(KALLSYMS).unwrap_or_default();
        let stext = listing.lines().find(|l| l.ends_with(" T _stext")).and_then(|l| l.split(' ').next());
        let Some(address) = stext.and_then(|a| u64::from_str_radix(a, 16).ok()).filter(|&a| a != 0) else {
            test_skip::skip("/proc/kallsyms shows no kernel addresses to this process", test_skip::InCi::Optional);
            return;
        };
        let mut names = KernelNames::default();
        assert!(!names.name(address).is_empty());
        assert_ne!(names.name(address), "[kernel]");
        names.end_chunk();
        assert!(names.table.is_some(), "kept while chunks need it");
        if let Some((_, used)) = names.table.as_mut() {
            *used -= KEEP;
        }
        names.end_chunk();
        assert!(names.table.is_none(), "dropped once none did for a while");
    }
}
