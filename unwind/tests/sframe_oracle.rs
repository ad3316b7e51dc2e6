//! Our SFrame reader agrees with the `simple-frame-rs` crate on a library
//! the system assembler emitted SFrame for, at every pc; and no input makes
//! it panic.

use object::{Object, ObjectSection};
use test_skip::{skip, InCi};
use unwind::sframe::SFrameSection;

const SOURCE: &str = r#"
int leaf(int n) { int s = 0; for (int i = 0; i < n; i++) s += i * i; return s; }
int middle(int n) { volatile char pad[64]; pad[0] = n; return leaf(n + pad[0]) + 1; }
int outer(int n) { int x = middle(n); return x * middle(x); }
long many(long a, long b, long c, long d, long e, long f, long g, long h) { return a*b + c*d + e*f + g*h + outer((int)a); }
"#;

/// Builds a shared library with SFrame, or returns None when the toolchain
/// cannot (the assembler predates --gsframe).
fn build_library() -> Option<Vec<u8>> {
    mutation::compile_library("sframe-oracle", SOURCE, &["-O1", "-fomit-frame-pointer", "-Wa,--gsframe"])
}

#[test]
fn rules_match_the_reference_parser_at_every_pc() {
    let Some(bytes) = build_library() else {
        return skip("the assembler cannot emit SFrame (`as --gsframe`, binutils 2.40+)", InCi::Required);
    };
    let file = object::File::parse(&*bytes).unwrap();
    let section = file.section_by_name(".sframe").expect(".sframe section");
    let data = section.data().unwrap();
    let ours = SFrameSection::parse(data, section.address()).unwrap();
    let reference = simple_frame_rs::SFrameSection::from(data, section.address()).unwrap();
    let text = file.section_by_name(".text").unwrap();
    let mut checked = 0;
    for pc in text.address()..text.address() + text.size() {
        let expected = reference.find_fde(pc).unwrap().and_then(|fde| fde.find_fre(&reference, pc).unwrap());
        let actual = ours.rule(pc);
        match (expected, actual) {
            (None, None) => {}
            (Some(fre), Some(rule)) => {
                assert_eq!(rule.cfa_from_sp, fre.get_cfa_base_reg_id() == 1, "base at {pc:#x}");
                assert_eq!(Some(rule.cfa_offset), fre.get_cfa_offset(&reference).unwrap(), "cfa at {pc:#x}");
                assert_eq!(rule.fp_offset, fre.get_fp_offset(&reference).unwrap(), "fp at {pc:#x}");
                assert_eq!(rule.ra_offset, fre.get_ra_offset(&reference).unwrap(), "ra at {pc:#x}");
                checked += 1;
            }
            (e, a) => panic!("at {pc:#x}: reference {e:?}, ours {a:?}"),
        }
    }
    assert!(checked > 50, "only {checked} pcs covered");
}

#[test]
fn garbage_never_panics() {
    let mut rng = mutation::Rng::new(0x1234_5678_9abc_def0);
    let mut next = move || rng.next();
    for _ in 0..20_000 {
        let len = (next() % 256) as usize;
        let mut data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if len >= 8 {
            data[0] = 0xe2;
            data[1] = 0xde;
            data[2] = 1 + (next() % 2) as u8;
            data[4] = 3;
        }
        if let Ok(section) = SFrameSection::parse(&data[..], 0x1000) {
            for _ in 0..16 {
                let _ = section.rule(0x1000 + next() % 0x1000);
            }
        }
    }
}
