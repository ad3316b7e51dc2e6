//! Unwind information a library contributes, read from its file (or
//! in-memory image) once, when the library is added.

use object::{Object, ObjectSection};
use std::ops::Range;
use unwind::dwarf::SectionData;

/// Link-time ranges and copies of the sections the unwinders use.
#[derive(Clone, Debug, Default)]
pub struct UnwindSections {
    pub text: Option<Range<u64>>,
    pub got: Option<Range<u64>>,
    pub eh_frame: Option<(Range<u64>, SectionData)>,
    pub eh_frame_hdr: Option<(Range<u64>, SectionData)>,
    pub debug_frame: Option<SectionData>,
    pub sframe: Option<(u64, SectionData)>,
}

/// What to copy: DWARF sections, the SFrame section, or neither.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wanted {
    Nothing,
    Dwarf,
    SFrame,
}

fn range(section: &object::Section<'_, '_>) -> Range<u64> {
    // Saturating: a damaged file may describe a section past the top of the address space.
    section.address()..section.address().saturating_add(section.size())
}

fn copy(section: &object::Section<'_, '_>) -> Option<SectionData> {
    section.data().ok().filter(|d| !d.is_empty()).map(SectionData::from)
}

pub fn read(data: &[u8], wanted: Wanted) -> UnwindSections {
    let Ok(file) = object::File::parse(data) else { return UnwindSections::default() };
    let section = |name: &str| file.section_by_name(name);
    let mut out = UnwindSections {
        text: section(".text").map(|s| range(&s)),
        got: section(".got").map(|s| range(&s)),
        ..Default::default()
    };
    match wanted {
        Wanted::Nothing => {}
        Wanted::Dwarf => {
            out.eh_frame = section(".eh_frame").and_then(|s| Some((range(&s), copy(&s)?)));
            out.eh_frame_hdr = section(".eh_frame_hdr").and_then(|s| Some((range(&s), copy(&s)?)));
            out.debug_frame = section(".debug_frame").and_then(|s| copy(&s));
        }
        Wanted::SFrame => {
            out.sframe = section(".sframe").and_then(|s| Some((s.address(), copy(&s)?)));
        }
    }
    out
}
