//! One x86-64 instruction's length and what it does to the stack pointer
//! and to control flow: the little of an instruction the walker needs to
//! follow compiled code forward from an interrupted pc ([`crate::sp_scan`]).
//! Legacy, REX, VEX and EVEX encodings; what it does not know (or what
//! writes rsp in a way it does not model) is [`Flow::Unknown`]. No
//! HotSpot knowledge here, and no allocation or panic.

/// The longest x86 instruction.
pub const MAX_LEN: usize = 15;

/// What an instruction does that matters to a forward walk of the stack
/// pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Goes on to the next instruction; rsp moves by this many bytes
    /// (`push`: -8, `pop`: 8, otherwise 0).
    Next(i32),
    /// `add rsp, imm` (`sub rsp, imm` as a negative amount; also
    /// `lea rsp, [rsp+disp]`), then the next instruction.
    AddRsp(i32),
    /// `pop rbp`, then the next instruction (rsp moves by 8).
    PopRbp,
    /// `pop rsp`: rsp becomes the word at the top of the stack.
    PopRsp,
    /// A call: the callee returns to the next instruction, rsp as before.
    Call,
    /// A conditional branch by this much from the next instruction (or on
    /// to the next instruction).
    Branch(i64),
    /// An unconditional relative jump by this much from the next
    /// instruction.
    Jump(i64),
    /// A return.
    Return,
    /// An indirect jump, a trap, halt, `leave`, a write of rsp from
    /// elsewhere, or an instruction this decoder does not know.
    Unknown,
}

/// A decoded instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    pub len: usize,
    pub flow: Flow,
}

/// Immediate operand sizes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Imm {
    None,
    B,
    W,
    /// 2 bytes with the operand-size prefix, else 4.
    Z,
    /// `mov r, imm`: 8 bytes with REX.W, else as `Z`.
    V,
    /// `enter`: 3 bytes.
    Enter,
    /// `mov` to or from an absolute address: 8 bytes (4 with 0x67).
    Moffs,
}

/// The prefixes seen, and where the opcode is.
#[derive(Clone, Copy, Default)]
struct Prefixes {
    operand16: bool,
    address32: bool,
    w: bool,
    r: bool,
    x: bool,
    b: bool,
}

/// Register number 4 (without a REX extension): rsp.
const RSP: u8 = 4;
const RBP: u8 = 5;

/// Decodes the instruction at the start of `code` (up to [`MAX_LEN`]
/// bytes; fewer if the code ends sooner). `None` if it is not a complete
/// instruction this decoder knows.
pub fn decode(code: &[u8]) -> Option<Insn> {
    let byte = |i: usize| code.get(i).copied();
    let mut p = Prefixes::default();
    let mut at = 0;
    // Legacy prefixes, then an optional REX.
    loop {
        match byte(at)? {
            0x66 => p.operand16 = true,
            0x67 => p.address32 = true,
            0xF0 | 0xF2 | 0xF3 | 0x2E | 0x36 | 0x3E | 0x26 | 0x64 | 0x65 => {}
            _ => break,
        }
        at += 1;
        if at >= MAX_LEN {
            return None;
        }
    }
    let first = byte(at)?;
    if first & 0xF0 == 0x40 {
        p.w = first & 8 != 0;
        p.r = first & 4 != 0;
        p.x = first & 2 != 0;
        p.b = first & 1 != 0;
        at += 1;
    }
    let op = byte(at)?;
    at += 1;
    let insn = match op {
        0xC4 | 0xC5 | 0x62 => vex(code, at, op)?,
        0x0F => two_byte(code, at, &p)?,
        _ => one_byte(code, at, op, &p)?,
    };
    (insn.len <= MAX_LEN && insn.len <= code.len()).then_some(insn)
}

/// The ModRM byte at `at` and the bytes it and its SIB and displacement
/// take.
struct ModRm {
    md: u8,
    reg: u8,
    rm: u8,
    /// The SIB byte, if any.
    sib: Option<u8>,
    len: usize,
    /// The displacement (0 if none).
    disp: i32,
}

impl ModRm {
    fn read(code: &[u8], at: usize) -> Option<ModRm> {
        let m = *code.get(at)?;
        let (md, reg, rm) = (m >> 6, (m >> 3) & 7, m & 7);
        let mut len = 1;
        let mut sib = None;
        let mut disp_len = match md {
            1 => 1,
            2 => 4,
            _ => 0,
        };
        if md != 3 && rm == 4 {
            let s = *code.get(at + 1)?;
            sib = Some(s);
            len += 1;
            if md == 0 && s & 7 == 5 {
                disp_len = 4;
            }
        }
        if md == 0 && rm == 5 {
            disp_len = 4;
        }
        let start = at + len;
        let disp = match disp_len {
            1 => i32::from(*code.get(start)? as i8),
            4 => i32::from_le_bytes(code.get(start..start + 4)?.try_into().ok()?),
            _ => 0,
        };
        Some(ModRm { md, reg, rm, sib, len: len + disp_len, disp })
    }

    /// The register operand `rm` names, if it names one: rsp is 4.
    fn rm_register(&self, p: &Prefixes) -> Option<u8> {
        (self.md == 3).then_some(self.rm | if p.b { 8 } else { 0 })
    }

    fn reg_register(&self, p: &Prefixes) -> u8 {
        self.reg | if p.r { 8 } else { 0 }
    }
}

fn imm_len(imm: Imm, p: &Prefixes) -> usize {
    match imm {
        Imm::None => 0,
        Imm::B => 1,
        Imm::W => 2,
        Imm::Z if p.operand16 && !p.w => 2,
        Imm::Z => 4,
        Imm::V if p.w => 8,
        Imm::V if p.operand16 => 2,
        Imm::V => 4,
        Imm::Enter => 3,
        Imm::Moffs if p.address32 => 4,
        Imm::Moffs => 8,
    }
}

/// A signed immediate of `len` bytes at `at`.
fn imm_value(code: &[u8], at: usize, len: usize) -> Option<i64> {
    Some(match len {
        1 => i64::from(*code.get(at)? as i8),
        2 => i64::from(i16::from_le_bytes(code.get(at..at + 2)?.try_into().ok()?)),
        4 => i64::from(i32::from_le_bytes(code.get(at..at + 4)?.try_into().ok()?)),
        _ => return None,
    })
}

fn one_byte(code: &[u8], at: usize, op: u8, p: &Prefixes) -> Option<Insn> {
    use Imm::*;
    // Opcodes without ModRM first.
    let plain = |imm: Imm, flow: Flow| Some(Insn { len: at + imm_len(imm, p), flow });
    let next = Flow::Next(0);
    match op {
        // ALU op with an immediate to al/eax.
        0x04 | 0x0C | 0x14 | 0x1C | 0x24 | 0x2C | 0x34 | 0x3C => return plain(B, next),
        0x05 | 0x0D | 0x15 | 0x1D | 0x25 | 0x2D | 0x35 | 0x3D => return plain(Z, next),
        0x50..=0x57 if p.operand16 => return plain(None, Flow::Unknown),
        0x50..=0x57 => return plain(None, Flow::Next(-8)),
        0x58..=0x5F => {
            let reg = (op & 7) | if p.b { 8 } else { 0 };
            let flow = match reg {
                _ if p.operand16 => Flow::Unknown,
                RSP => Flow::PopRsp,
                RBP => Flow::PopRbp,
                _ => Flow::Next(8),
            };
            return plain(None, flow);
        }
        0x68 => return plain(Z, Flow::Next(-8)),
        0x6A => return plain(B, Flow::Next(-8)),
        0x6C..=0x6F => return plain(None, next),
        0x70..=0x7F | 0xE0..=0xE3 => return Some(Insn { len: at + 1, flow: Flow::Branch(imm_value(code, at, 1)?) }),
        0x90..=0x99 | 0x9B | 0x9E | 0x9F => {
            // xchg with rsp (0x94) moves it.
            let flow = if op == 0x94 && !p.b { Flow::Unknown } else { next };
            return plain(None, flow);
        }
        0x9C => return plain(None, Flow::Next(-8)),
        0x9D => return plain(None, Flow::Next(8)),
        0xA0..=0xA3 => return plain(Moffs, next),
        0xA4..=0xA7 | 0xAA..=0xAF => return plain(None, next),
        0xA8 => return plain(B, next),
        0xA9 => return plain(Z, next),
        0xB0..=0xB7 => return plain(B, next),
        0xB8..=0xBF => {
            let flow = if op == 0xBC && !p.b { Flow::Unknown } else { next };
            return plain(V, flow);
        }
        0xC2 => return plain(W, Flow::Return),
        0xC3 => return plain(None, Flow::Return),
        0xC8 => return plain(Enter, Flow::Unknown),
        0xC9 | 0xCA | 0xCB | 0xCC | 0xCE | 0xCF | 0xF1 | 0xF4 => return plain(None, Flow::Unknown),
        0xCD => return plain(B, Flow::Unknown),
        0xD7 | 0xF5 | 0xF8..=0xFD => return plain(None, next),
        0xE4..=0xE7 => return plain(B, next),
        0xEC..=0xEF => return plain(None, next),
        0xE8 => return plain(Z, Flow::Call),
        0xE9 => return Some(Insn { len: at + 4, flow: Flow::Jump(imm_value(code, at, 4)?) }),
        0xEB => return Some(Insn { len: at + 1, flow: Flow::Jump(imm_value(code, at, 1)?) }),
        _ => {}
    }
    // Opcodes with ModRM; invalid ones in 64-bit mode are refused.
    let imm = match op {
        0x00..=0x03 | 0x08..=0x0B | 0x10..=0x13 | 0x18..=0x1B => None,
        0x20..=0x23 | 0x28..=0x2B | 0x30..=0x33 | 0x38..=0x3B => None,
        0x63 | 0x84..=0x8F | 0xD0..=0xD3 | 0xD8..=0xDF | 0xFE | 0xFF => None,
        0x69 | 0x81 | 0xC7 => Z,
        0x6B | 0x80 | 0x83 | 0xC0 | 0xC1 | 0xC6 => B,
        0xF6 | 0xF7 => None, // immediate only for `test`, below
        _ => return Option::None,
    };
    let m = ModRm::read(code, at)?;
    let imm = match op {
        0xF6 if m.reg < 2 => B,
        0xF7 if m.reg < 2 => Z,
        _ => imm,
    };
    let imm_at = at + m.len;
    let imm_size = imm_len(imm, p);
    let len = imm_at + imm_size;
    let writes_rsp_rm = m.rm_register(p) == Some(RSP);
    let writes_rsp_reg = m.reg_register(p) == RSP;
    let flow = match op {
        // ALU r/m, r (cmp and test write nothing).
        0x00..=0x3B if op & 7 < 2 && op & 0xF8 != 0x38 && writes_rsp_rm => Flow::Unknown,
        // ALU r, r/m.
        0x00..=0x3B if op & 7 >= 2 && op & 0xF8 != 0x38 && writes_rsp_reg => Flow::Unknown,
        0x81 | 0x83 if writes_rsp_rm => match m.reg {
            0 | 5 if p.w => {
                let value = i32::try_from(imm_value(code, imm_at, imm_size)?).ok()?;
                Flow::AddRsp(if m.reg == 0 { value } else { value.checked_neg()? })
            }
            7 => next,
            _ => Flow::Unknown,
        },
        0x80 | 0x84 | 0x85 | 0x38..=0x3B => next,
        0x87 | 0x89 | 0xC7 | 0xC1 | 0xD1 | 0xD3 | 0xC0 | 0xD0 | 0xD2 if writes_rsp_rm => Flow::Unknown,
        0x87 | 0x8B | 0x63 | 0x69 | 0x6B if writes_rsp_reg => Flow::Unknown,
        0x8D if writes_rsp_reg => lea_rsp(&m, p),
        0x8F if m.reg == 0 => Flow::Next(8),
        0x8F => Flow::Unknown,
        0xF7 if writes_rsp_rm && m.reg >= 2 => Flow::Unknown,
        0xFF => match m.reg {
            0 | 1 if writes_rsp_rm => Flow::Unknown,
            0 | 1 => next,
            2 => Flow::Call,
            6 => Flow::Next(-8),
            _ => Flow::Unknown,
        },
        _ => next,
    };
    Some(Insn { len, flow })
}

/// `lea rsp, [rsp+disp]` moves rsp by `disp`; any other `lea` into rsp is
/// not followed.
fn lea_rsp(m: &ModRm, p: &Prefixes) -> Flow {
    let plain_rsp_base = m.md != 3 && m.rm == 4 && m.sib == Some(0x24) && !p.b && !p.x;
    if plain_rsp_base && p.w && !p.address32 {
        Flow::AddRsp(m.disp)
    } else {
        Flow::Unknown
    }
}

fn two_byte(code: &[u8], at: usize, p: &Prefixes) -> Option<Insn> {
    let op = *code.get(at)?;
    let at = at + 1;
    let plain = |flow: Flow| Some(Insn { len: at, flow });
    match op {
        0x38 | 0x3A => {
            let imm = if op == 0x3A { 1 } else { 0 };
            let m = ModRm::read(code, at + 1)?;
            return Some(Insn { len: at + 1 + m.len + imm, flow: Flow::Next(0) });
        }
        0x80..=0x8F => return Some(Insn { len: at + 4, flow: Flow::Branch(imm_value(code, at, 4)?) }),
        0x0B | 0x05 | 0x07 | 0x34 | 0x35 | 0xA1 | 0xA9 | 0xAA => return plain(Flow::Unknown),
        0x06 | 0x08 | 0x09 | 0x0E | 0x30..=0x33 | 0x37 | 0x77 | 0xA2 | 0xC8..=0xCF => {
            let flow = if op == 0xCC && !p.b { Flow::Unknown } else { Flow::Next(0) };
            return plain(flow);
        }
        0xA0 | 0xA8 => return plain(Flow::Next(-8)),
        _ => {}
    }
    let imm = match op {
        0x00..=0x03 | 0x0D | 0x10..=0x2F | 0x40..=0x6F | 0x74..=0x76 | 0x78..=0x79 | 0x7C..=0x7F => 0,
        0x90..=0x9F | 0xA3 | 0xA5 | 0xAB | 0xAD..=0xB9 | 0xBB..=0xC1 | 0xC3 | 0xC7 | 0xD0..=0xFF => 0,
        0x70..=0x73 | 0xA4 | 0xAC | 0xBA | 0xC2 | 0xC4..=0xC6 => 1,
        _ => return None,
    };
    let m = ModRm::read(code, at)?;
    // cmov and imul into rsp move it.
    let flow = match op {
        0x40..=0x4F | 0xAF | 0xB6 | 0xB7 | 0xBE | 0xBF | 0xB8 | 0xBC | 0xBD if m.reg_register(p) == RSP => {
            Flow::Unknown
        }
        _ => Flow::Next(0),
    };
    Some(Insn { len: at + m.len + imm, flow })
}

/// A VEX (0xC4, 0xC5) or EVEX (0x62) instruction whose prefix starts
/// before `at`. None of them touches rsp or control flow.
fn vex(code: &[u8], at: usize, escape: u8) -> Option<Insn> {
    let (map, opcode_at) = match escape {
        0xC5 => (1, at + 1),
        0xC4 => (*code.get(at)? & 0x1F, at + 2),
        _ => (*code.get(at)? & 0x07, at + 3),
    };
    let op = *code.get(opcode_at)?;
    let at = opcode_at + 1;
    // vzeroupper and vzeroall have no ModRM.
    if map == 1 && op == 0x77 {
        return Some(Insn { len: at, flow: Flow::Next(0) });
    }
    let imm = match map {
        1 if matches!(op, 0x70..=0x73 | 0xC2 | 0xC4..=0xC6) => 1,
        1 | 2 | 5 | 6 => 0,
        3 => 1,
        _ => return None,
    };
    let m = ModRm::read(code, at)?;
    Some(Insn { len: at + m.len + imm, flow: Flow::Next(0) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(bytes: &[u8]) -> Insn {
        decode(bytes).unwrap_or_else(|| panic!("{bytes:x?} does not decode"))
    }

    /// Instructions of a C2 nmethod of JDK 17 (`TreeMap.merge` with the
    /// `String.compareTo` intrinsic inlined), each with its length as
    /// objdump gives it.
    #[test]
    fn lengths_of_c2_instructions() {
        let cases: &[&[u8]] = &[
            &[0x44, 0x8b, 0x56, 0x08],                         // mov r10d, [rsi+8]
            &[0x49, 0xbb, 0, 0, 0, 0xf7, 0xfb, 0x7e, 0, 0],    // movabs r11, imm64
            &[0x0f, 0x85, 0xe6, 0xaf, 0xab, 0xff],             // jne rel32
            &[0x66, 0x90],                                     // xchg ax, ax
            &[0x0f, 0x1f, 0x40, 0x00],                         // nopl [rax+0]
            &[0x89, 0x84, 0x24, 0x00, 0xc0, 0xfe, 0xff],       // mov [rsp-0x14000], eax
            &[0x48, 0x83, 0xec, 0x60],                         // sub rsp, 0x60
            &[0x48, 0x89, 0x34, 0x24],                         // mov [rsp], rsi
            &[0x0f, 0xbe, 0x5a, 0x10],                         // movsbl ebx, [rdx+0x10]
            &[0x45, 0x8b, 0x4c, 0xd4, 0x10],                   // mov r9d, [r12+r10*8+0x10]
            &[0x81, 0xff, 0x20, 0xec, 0, 0],                   // cmp edi, 0xec20
            &[0x0f, 0x4e, 0xd0],                               // cmovle edx, eax
            &[0x0f, 0xb6, 0x04, 0x17],                         // movzbl eax, [rdi+rdx]
            &[0xc5, 0xfe, 0x6f, 0x0c, 0x07],                   // vmovdqu ymm1, [rdi+rax]
            &[0xc5, 0xf5, 0xef, 0xc9],                         // vpxor ymm1, ymm1, ymm1
            &[0xc4, 0xe2, 0x7d, 0x17, 0xc9],                   // vptest ymm1, ymm1
            &[0x66, 0x0f, 0x3a, 0x61, 0x0c, 0x06, 0x19],       // pcmpestri xmm1, [rsi+rax], 0x19
            &[0x62, 0xf1, 0xfe, 0x48, 0x6f, 0x04, 0x07],       // vmovdqu64 zmm0, [rdi+rax]
            &[0x62, 0xf3, 0x7d, 0x48, 0x3e, 0x0c, 0x06, 0x04], // vpcmpub k1, zmm0, [rsi+rax], 4
            &[0xc5, 0xf8, 0x77],                               // vzeroupper
            &[0x4d, 0x8b, 0x97, 0x08, 0x01, 0, 0],             // mov r10, [r15+0x108]
            &[0x41, 0x85, 0x02],                               // test [r10], eax
            &[0xf3, 0x48, 0x0f, 0xb8, 0xc1],                   // popcnt rax, rcx
            &[0x48, 0x81, 0xc4, 0x80, 0, 0, 0],                // add rsp, 0x80
            &[0xdd, 0x04, 0x24],                               // fld qword [rsp]
            &[0xf2, 0x0f, 0x2c, 0xc0],                         // cvttsd2si eax, xmm0
            &[0x66, 0xc7, 0x44, 0x24, 0x08, 0x34, 0x12],       // mov word [rsp+8], 0x1234
            &[0xf6, 0x40, 0x10, 0x01],                         // test byte [rax+0x10], 1
            &[0xf7, 0xd8],                                     // neg eax
            &[0x48, 0xa1, 1, 2, 3, 4, 5, 6, 7, 8],             // movabs rax, [moffs64]
        ];
        for bytes in cases {
            let mut padded = bytes.to_vec();
            padded.extend_from_slice(&[0xCC; MAX_LEN]);
            assert_eq!(flow(&padded).len, bytes.len(), "{bytes:x?}");
        }
    }

    #[test]
    fn stack_and_control_flow() {
        let f = |bytes: &[u8]| flow(bytes).flow;
        assert_eq!(f(&[0x51]), Flow::Next(-8), "push rcx");
        assert_eq!(f(&[0x41, 0x50]), Flow::Next(-8), "push r8");
        assert_eq!(f(&[0x59]), Flow::Next(8), "pop rcx");
        assert_eq!(f(&[0x58]), Flow::Next(8), "pop rax");
        assert_eq!(f(&[0x5D]), Flow::PopRbp);
        assert_eq!(f(&[0x41, 0x5D]), Flow::Next(8), "pop r13");
        assert_eq!(f(&[0x5C]), Flow::PopRsp, "pop rsp");
        assert_eq!(f(&[0x41, 0x5C]), Flow::Next(8), "pop r12");
        assert_eq!(f(&[0x9C]), Flow::Next(-8), "pushfq");
        assert_eq!(f(&[0x9D]), Flow::Next(8), "popfq");
        assert_eq!(f(&[0x48, 0x83, 0xEC, 0x08]), Flow::AddRsp(-8), "sub rsp, 8");
        assert_eq!(f(&[0x48, 0x83, 0xC4, 0x10]), Flow::AddRsp(16), "add rsp, 16");
        assert_eq!(f(&[0x48, 0x81, 0xC4, 0x80, 0, 0, 0]), Flow::AddRsp(0x80));
        assert_eq!(f(&[0x49, 0x83, 0xC4, 0x10]), Flow::Next(0), "add r12, 16");
        assert_eq!(f(&[0x83, 0xC4, 0x10]), Flow::Unknown, "add esp, 16");
        assert_eq!(f(&[0x48, 0x83, 0xE4, 0xF0]), Flow::Unknown, "and rsp, -16");
        assert_eq!(f(&[0x48, 0x83, 0xFC, 0x10]), Flow::Next(0), "cmp rsp, 16");
        assert_eq!(f(&[0x48, 0x8D, 0x64, 0x24, 0x08]), Flow::AddRsp(8), "lea rsp, [rsp+8]");
        assert_eq!(f(&[0x48, 0x8D, 0x65, 0xF0]), Flow::Unknown, "lea rsp, [rbp-16]");
        assert_eq!(f(&[0x48, 0x89, 0xEC]), Flow::Unknown, "mov rsp, rbp");
        assert_eq!(f(&[0x48, 0x8B, 0xE5]), Flow::Unknown, "mov rsp, rbp (8B)");
        assert_eq!(f(&[0x48, 0x89, 0xE5]), Flow::Next(0), "mov rbp, rsp");
        assert_eq!(f(&[0x48, 0x8B, 0x0C, 0x24]), Flow::Next(0), "mov rcx, [rsp]");
        assert_eq!(f(&[0x48, 0x29, 0xC4]), Flow::Unknown, "sub rsp, rax");
        assert_eq!(f(&[0x48, 0x39, 0xC4]), Flow::Next(0), "cmp rsp, rax");
        assert_eq!(f(&[0x49, 0x3B, 0x67, 0x28]), Flow::Next(0), "cmp rsp, [r15+0x28]");
        assert_eq!(f(&[0xFF, 0x34, 0x24]), Flow::Next(-8), "push qword [rsp]");
        assert_eq!(f(&[0x8F, 0x04, 0x24]), Flow::Next(8), "pop qword [rsp]");
        assert_eq!(f(&[0xE8, 1, 0, 0, 0]), Flow::Call);
        assert_eq!(f(&[0x41, 0xFF, 0xD2]), Flow::Call, "call r10");
        assert_eq!(f(&[0x41, 0xFF, 0xE2]), Flow::Unknown, "jmp r10");
        assert_eq!(f(&[0xE9, 0x10, 0, 0, 0]), Flow::Jump(16));
        assert_eq!(f(&[0xEB, 0xFE]), Flow::Jump(-2));
        assert_eq!(f(&[0x74, 0x05]), Flow::Branch(5));
        assert_eq!(f(&[0x75, 0xE9]), Flow::Branch(-0x17));
        assert_eq!(f(&[0x0F, 0x87, 1, 0, 0, 0]), Flow::Branch(1));
        assert_eq!(f(&[0x0F, 0x84, 0x28, 0xFF, 0xFF, 0xFF]), Flow::Branch(-0xD8));
        assert_eq!(f(&[0xC3]), Flow::Return);
        assert_eq!(f(&[0xC9]), Flow::Unknown, "leave");
        assert_eq!(f(&[0x0F, 0x0B]), Flow::Unknown, "ud2");
        assert_eq!(f(&[0xF4]), Flow::Unknown, "hlt");
    }

    /// Any bytes at all (JIT code read from another process may be
    /// anything): no panic, and a length within the bytes given.
    #[test]
    fn random_bytes_decode_within_bounds() {
        let mut next = crate::testing::xorshift(0x2545_F491_4F6C_DD1D);
        let mut decoded = 0;
        for _ in 0..200_000 {
            let mut bytes = [0u8; MAX_LEN];
            for chunk in bytes.chunks_mut(8) {
                let word = next().to_le_bytes();
                chunk.copy_from_slice(&word[..chunk.len()]);
            }
            let len = (next() % (MAX_LEN as u64 + 1)) as usize;
            if let Some(insn) = decode(&bytes[..len]) {
                assert!(insn.len >= 1 && insn.len <= len, "{:x?}: {insn:?}", &bytes[..len]);
                decoded += 1;
            }
        }
        assert!(decoded > 100_000, "most byte strings are some instruction: {decoded}");
    }

    #[test]
    fn truncated_or_unknown_bytes_do_not_decode() {
        assert_eq!(decode(&[]), None);
        assert_eq!(decode(&[0x48]), None, "a REX alone");
        assert_eq!(decode(&[0x48, 0x81, 0xC4, 0x80, 0]), None, "a cut immediate");
        assert_eq!(decode(&[0x06]), None, "invalid in 64-bit mode");
        assert_eq!(decode(&[0x66; 20]), None, "prefixes only");
        assert_eq!(decode(&[0xC4, 0xE7, 0x7D, 0x17, 0xC9]), None, "VEX map 7");
    }
}
