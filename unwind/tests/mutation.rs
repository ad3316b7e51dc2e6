//! The unwinders' readers of unwind information taken from library
//! files, mutated from real libraries for a few seconds each with a fixed
//! seed: our SFrame reader, framehop's `.eh_frame`/`.eh_frame_hdr`
//! reader and our compiler of `.eh_frame` rules. Each mutated file's
//! sections are loaded (and their rules compiled) as the agent loads them
//! and unwound from pcs across `.text` against a fake stack: no panic, no
//! hang, no step that does not move up the stack.

use mutation::{Campaign, Case};
use object::{Object, ObjectSection};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use test_skip::{skip, InCi};
use unwind::dwarf::{new_cache, DwarfModule, DwarfUnwinder};
use unwind::rules::CompiledRules;
use unwind::sframe::{SFrameModule, SFrameSection, SFrameUnwinder};
use unwind::{PcKind, Registers, StackReader, Unwinder};

#[global_allocator]
static ALLOC: mutation::Metered = mutation::Metered;

/// A stack of 4 KiB at 0x10_0000 holding pseudo-random words, some of
/// them plausible code and stack addresses.
struct FakeStack(Vec<u64>);

const STACK: u64 = 0x10_0000;

impl FakeStack {
    fn new(text: &Range<u64>) -> Self {
        let mut rng = mutation::Rng::new(7);
        let words = (0..512)
            .map(|i| match i % 3 {
                0 => text.start + rng.next() % (text.end - text.start).max(1),
                1 => STACK + rng.next() % 4096,
                _ => rng.next(),
            })
            .collect();
        FakeStack(words)
    }
}

impl StackReader for FakeStack {
    fn read_u64(&mut self, address: u64) -> Option<u64> {
        let index = address.checked_sub(STACK)? / 8;
        self.0.get(usize::try_from(index).ok()?).copied()
    }
}

/// Unwinds up to 16 frames from every 7th pc of `text`: every step that
/// succeeds moves up the stack.
fn unwind_across<U: Unwinder>(unwinder: &U, cache: &mut U::Cache, text: &Range<u64>, case: &Case<'_>) {
    let mut stack = FakeStack::new(text);
    for pc in (text.start..text.end).step_by(7).take(4096) {
        let mut regs = Registers { pc, sp: STACK + 64, fp: STACK + 256, lr: 0 };
        let mut kind = PcKind::Interrupted;
        for _ in 0..16 {
            let before = regs;
            match unwinder.step(kind, &mut regs, cache, &mut stack) {
                Ok(true) => assert!(regs.sp > before.sp, "{case}: a step from {:#x} did not move up", before.pc),
                Ok(false) | Err(_) => break,
            }
            kind = PcKind::ReturnAddress;
        }
    }
}

fn section(file: &object::File<'_>, name: &str) -> Option<(Range<u64>, Arc<[u8]>)> {
    let s = file.section_by_name(name)?;
    let data = s.data().ok().filter(|d| !d.is_empty())?;
    Some((s.address()..s.address().saturating_add(s.size()), Arc::from(data)))
}

/// What one library's unwind sections need besides their bytes.
#[derive(Clone)]
struct Library {
    text: Range<u64>,
    got: Option<Range<u64>>,
    eh_frame: Option<(Range<u64>, Arc<[u8]>)>,
    eh_frame_hdr: Option<(Range<u64>, Arc<[u8]>)>,
    sframe: Option<(u64, Arc<[u8]>)>,
}

/// The seed libraries' unwind sections, keyed by the seed name each
/// section is mutated under (`<library> <section>`): mutating the section
/// itself, not the whole file, puts every mutation where the reader looks.
fn libraries() -> HashMap<String, (String, Library)> {
    let mut sections = HashMap::new();
    for (name, bytes) in mutation::elf_seeds() {
        let file = object::File::parse(&bytes[..]).expect("a seed parses");
        let Some((text, _)) = section(&file, ".text") else { continue };
        let library = Library {
            text,
            got: section(&file, ".got").map(|(r, _)| r),
            eh_frame: section(&file, ".eh_frame"),
            eh_frame_hdr: section(&file, ".eh_frame_hdr"),
            sframe: section(&file, ".sframe").map(|(r, d)| (r.start, d)),
        };
        for kind in [".eh_frame", ".eh_frame_hdr", ".sframe"] {
            sections.insert(format!("{name} {kind}"), (kind.to_owned(), library.clone()));
        }
    }
    sections
}

/// Seeds: the named section of every library that has it.
fn seeds(libraries: &HashMap<String, (String, Library)>, kinds: &[&str]) -> Vec<(String, Vec<u8>)> {
    let mut seeds: Vec<(String, Vec<u8>)> = libraries
        .iter()
        .filter(|(_, (kind, _))| kinds.contains(&kind.as_str()))
        .filter_map(|(name, (kind, library))| {
            let data = match kind.as_str() {
                ".eh_frame" => library.eh_frame.as_ref().map(|(_, d)| d),
                ".eh_frame_hdr" => library.eh_frame_hdr.as_ref().map(|(_, d)| d),
                _ => library.sframe.as_ref().map(|(_, d)| d),
            }?;
            Some((name.clone(), data.to_vec()))
        })
        .collect();
    seeds.sort();
    seeds
}

#[test]
fn mutated_eh_frame_unwinds_or_stops() {
    let libraries = libraries();
    let seeds = seeds(&libraries, &[".eh_frame", ".eh_frame_hdr"]);
    Campaign::new(".eh_frame and .eh_frame_hdr (framehop, compiled rules)", seeds).run(move |case| {
        let (kind, library) = &libraries[case.seed];
        let mutated = |original: &Option<(Range<u64>, Arc<[u8]>)>| {
            original.as_ref().map(|(range, _)| (range.clone(), Arc::from(case.data)))
        };
        let mut module = DwarfModule {
            name: case.seed.to_owned(),
            avma: library.text.clone(),
            bias: 0,
            text_svma: Some(library.text.clone()),
            eh_frame: if kind == ".eh_frame" { mutated(&library.eh_frame) } else { library.eh_frame.clone() },
            eh_frame_hdr: if kind == ".eh_frame_hdr" {
                mutated(&library.eh_frame_hdr)
            } else {
                library.eh_frame_hdr.clone()
            },
            debug_frame: None,
            got_svma: library.got.clone(),
            rules: None,
        };
        // framehop alone, then as the agent builds it (rules compiled).
        let mut framehop = DwarfUnwinder::new();
        framehop.add_module(&module);
        unwind_across(&framehop, &mut new_cache(), &library.text, case);
        module.rules = CompiledRules::compile(&module).map(Arc::new);
        let mut unwinder = DwarfUnwinder::new();
        unwinder.add_module(&module);
        unwind_across(&unwinder, &mut new_cache(), &library.text, case);
    });
}

#[test]
fn mutated_sframe_unwinds_or_stops() {
    let libraries = libraries();
    let seeds = seeds(&libraries, &[".sframe"]);
    if seeds.is_empty() {
        return skip("no library with an .sframe section (`as --gsframe`, binutils 2.40+)", InCi::Required);
    }
    Campaign::new("SFrame", seeds).run(move |case| {
        let (_, library) = &libraries[case.seed];
        let address = library.sframe.as_ref().map_or(0, |(a, _)| *a);
        let Ok(section) = SFrameSection::parse(case.data, address) else { return };
        if case.mutations.is_empty() {
            assert!(section.fde_count() > 0, "{case}: no FDEs");
        }
        let unwinder = SFrameUnwinder::new(vec![SFrameModule { text: library.text.clone(), section }]);
        unwind_across(&unwinder, &mut (), &library.text, case);
    });
}
