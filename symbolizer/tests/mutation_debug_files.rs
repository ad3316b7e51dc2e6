//! The symbolizer's readers of debug files and binaries (which may come
//! from a debuginfod server): real libraries mutated for a few seconds with
//! a fixed seed, given as `--binary`, and every address of their `.text`
//! resolved through the tiers (build-id, debug link, DWARF with addr2line,
//! `.symtab`/`.dynsym`). No panic, no hang, bounded memory.

use mutation::Campaign;
use object::{Object, ObjectSection};
use symbolizer::debuginfo::{file_build_id, Locator};
use symbolizer::resolve::Resolver;
use symbolizer::symbols::SymbolTable;

#[global_allocator]
static ALLOC: mutation::Metered = mutation::Metered;

#[test]
fn mutated_binaries_resolve_or_stay_unresolved() {
    let dir = std::env::temp_dir().join(format!("symbolizer-mutation-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let binary = dir.join("lib.so");
    Campaign::new("symbolizer debug files", mutation::elf_seeds()).run(move |case| {
        let text = object::File::parse(case.original)
            .ok()
            .and_then(|f| f.section_by_name(".text").map(|s| s.address()..s.address() + s.size()))
            .unwrap_or(0..0);
        if let Some(table) = SymbolTable::parse(case.data) {
            for address in text.clone().step_by(13) {
                let _ = table.lookup(address);
            }
        }
        std::fs::write(&binary, case.data).unwrap();
        let Some(build_id) = file_build_id(&binary) else { return };
        let mut resolver = Resolver::new(Locator::new(&[], std::slice::from_ref(&binary), None).0);
        for address in text.step_by(13).take(2000) {
            let _ = resolver.resolve(&build_id, address);
        }
        let _ = resolver.describe(&build_id);
    });
}
