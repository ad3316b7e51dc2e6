//! The agent's parsers of bytes it does not control, mutated from real
//! inputs for a few seconds each with a fixed seed: the option string
//! (from `-agentpath`, `jcmd` or the Java API) and the ELF files of the
//! libraries it loads symbols and unwind sections from. No panic, no hang,
//! memory bounded by the input's size.

use mutation::Campaign;
use profiler_agent::args;
use profiler_agent::libraries::sections::{self, Wanted};
use profiler_agent::libraries::symbols::{link_address_of, SymbolTable};

#[global_allocator]
static ALLOC: mutation::Metered = mutation::Metered;

const OPTIONS: [&str; 5] = [
    "start,event=cpu,interval=1ms,wall=5ms,file=/tmp/profile.jfr",
    "start,cpu=10ms,alloc=512k,lock=10us,cstack=dwarf,jstackdepth=1024,remotesym=true,attributes=route;tenant,\
     jfrdialect=datadog,filter,log=/tmp/agent.log,loglevel=debug",
    "start,event=wall,walltpt=16,cstack=vmx,verifywalk=true",
    "dump,file=out.jfr",
    "stop",
];

#[test]
fn mutated_option_strings_parse_or_fail_cleanly() {
    let seeds = OPTIONS.iter().map(|o| (o.to_string(), o.as_bytes().to_vec())).collect();
    Campaign::new("agent options", seeds).budget(std::time::Duration::from_secs(2)).run(|case| {
        let text = String::from_utf8_lossy(case.data);
        match args::parse(&text) {
            Ok(_) => {}
            Err(e) => {
                assert!(!case.mutations.is_empty(), "{:?} refused: {e}", case.seed);
                assert!(!e.to_string().is_empty());
            }
        }
    });
}

#[test]
fn mutated_libraries_give_symbols_and_sections_or_nothing() {
    Campaign::new("agent symbols and unwind sections", mutation::elf_seeds()).memory(|len| 16 * len + (1 << 20)).run(
        |case| {
            let mut table = SymbolTable::from_elf(case.data);
            if case.mutations.is_empty() && case.seed.contains("compiled") {
                assert!(!table.is_empty(), "{}: no symbols", case.seed);
            }
            let marks = table.take_marks();
            for address in (0..case.data.len() as u64).step_by(997) {
                if let Some(hit) = table.find(address) {
                    assert!(hit.start <= address);
                }
                let _ = marks.mark_at(address);
            }
            let _ = link_address_of(case.data, "middle");
            for wanted in [Wanted::Dwarf, Wanted::SFrame] {
                let _ = sections::read(case.data, wanted);
            }
        },
    );
}
