//! Just enough of the class file format (JVMS §4) for the agent's boot
//! classes: [`ClassWriter`] writes a small class, [`prepend`] puts a few
//! instructions in front of methods of a class the JVM hands to
//! `ClassFileLoadHook`. Pure logic on bytes; the JVM verifies the result.

/// The opcodes the agent's code uses.
pub mod op {
    pub const NOP: u8 = 0x00;
    pub const ACONST_NULL: u8 = 0x01;
    pub const ICONST_0: u8 = 0x03;
    pub const ICONST_1: u8 = 0x04;
    pub const LCONST_0: u8 = 0x09;
    pub const LLOAD: u8 = 0x16;
    pub const ALOAD: u8 = 0x19;
    pub const ALOAD_0: u8 = 0x2A;
    pub const LSTORE: u8 = 0x37;
    pub const ASTORE: u8 = 0x3A;
    pub const IFEQ: u8 = 0x99;
    pub const IFNE: u8 = 0x9A;
    pub const IRETURN: u8 = 0xAC;
    pub const RETURN: u8 = 0xB1;
    pub const GETSTATIC: u8 = 0xB2;
    pub const INVOKEVIRTUAL: u8 = 0xB6;
    pub const INVOKESTATIC: u8 = 0xB8;
    pub const ATHROW: u8 = 0xBF;
    pub const INSTANCEOF: u8 = 0xC1;
}

pub const ACC_PUBLIC: u16 = 0x0001;
pub const ACC_PRIVATE: u16 = 0x0002;
pub const ACC_STATIC: u16 = 0x0008;
pub const ACC_FINAL: u16 = 0x0010;
pub const ACC_SUPER: u16 = 0x0020;
pub const ACC_VOLATILE: u16 = 0x0040;
pub const ACC_NATIVE: u16 = 0x0100;

/// A constant pool being written: entries of a parsed class, then ours.
#[derive(Default)]
pub struct Pool {
    bytes: Vec<u8>,
    /// The index the next entry gets (the pool's count).
    next: u16,
    /// The UTF-8 entries, to find names.
    utf8: Vec<(Vec<u8>, u16)>,
    /// The entries added, to reuse.
    added: Vec<(Vec<u8>, u16)>,
}

impl Pool {
    fn new() -> Self {
        Self { next: 1, ..Self::default() }
    }

    fn push(&mut self, entry: &[u8]) -> u16 {
        if let Some(&(_, index)) = self.added.iter().find(|(bytes, _)| bytes == entry) {
            return index;
        }
        let index = self.next;
        self.bytes.extend_from_slice(entry);
        self.added.push((entry.to_vec(), index));
        // A pool holds at most 65,535 entries; the JVM refuses more.
        self.next = self.next.saturating_add(1);
        index
    }

    pub fn utf8(&mut self, text: &str) -> u16 {
        if let Some(&(_, index)) = self.utf8.iter().find(|(bytes, _)| bytes == text.as_bytes()) {
            return index;
        }
        let mut entry = vec![1];
        entry.extend((text.len() as u16).to_be_bytes());
        entry.extend(text.as_bytes());
        let index = self.push(&entry);
        self.utf8.push((text.as_bytes().to_vec(), index));
        index
    }

    fn pair(&mut self, tag: u8, a: u16, b: Option<u16>) -> u16 {
        let mut entry = vec![tag];
        entry.extend(a.to_be_bytes());
        entry.extend(b.map(u16::to_be_bytes).into_iter().flatten());
        self.push(&entry)
    }

    pub fn class(&mut self, name: &str) -> u16 {
        let name = self.utf8(name);
        self.pair(7, name, None)
    }

    fn member(&mut self, tag: u8, class: &str, name: &str, descriptor: &str) -> u16 {
        let class = self.class(class);
        let (name, descriptor) = (self.utf8(name), self.utf8(descriptor));
        let name_and_type = self.pair(12, name, Some(descriptor));
        self.pair(tag, class, Some(name_and_type))
    }

    pub fn field(&mut self, class: &str, name: &str, descriptor: &str) -> u16 {
        self.member(9, class, name, descriptor)
    }

    pub fn method(&mut self, class: &str, name: &str, descriptor: &str) -> u16 {
        self.member(10, class, name, descriptor)
    }

    /// The text of UTF-8 entry `index` (of a parsed class or ours).
    fn text(&self, index: u16) -> Option<&[u8]> {
        self.utf8.iter().find(|(_, i)| *i == index).map(|(bytes, _)| bytes.as_slice())
    }

    fn write(&self, out: &mut Vec<u8>) {
        out.extend(self.next.to_be_bytes());
        out.extend(&self.bytes);
    }
}

/// Bytecode with forward branches patched once their target is known.
#[derive(Default)]
pub struct Code {
    pub bytes: Vec<u8>,
}

impl Code {
    pub fn op(&mut self, op: u8) -> &mut Self {
        self.bytes.push(op);
        self
    }

    /// An instruction with a one-byte operand (a local's index).
    pub fn op_u1(&mut self, op: u8, operand: u8) -> &mut Self {
        self.bytes.extend([op, operand]);
        self
    }

    /// An instruction with a constant pool index.
    pub fn op_u2(&mut self, op: u8, index: u16) -> &mut Self {
        self.bytes.push(op);
        self.bytes.extend(index.to_be_bytes());
        self
    }

    pub fn here(&self) -> u16 {
        self.bytes.len() as u16
    }

    /// A branch to be [`Code::land`]ed later; returns its offset.
    pub fn branch(&mut self, op: u8) -> u16 {
        let at = self.here();
        self.op_u2(op, 0);
        at
    }

    /// Points the branch at `at` here.
    pub fn land(&mut self, at: u16) {
        let offset = (self.here() - at).to_be_bytes();
        self.bytes[usize::from(at) + 1..usize::from(at) + 3].copy_from_slice(&offset);
    }
}

/// An exception handler: `handler` catches anything thrown in
/// `start..end`.
pub struct Handler {
    pub start: u16,
    pub end: u16,
    pub handler: u16,
}

/// A method's body.
pub struct Body<'a> {
    pub max_stack: u16,
    pub max_locals: u16,
    pub code: &'a Code,
    pub handlers: &'a [Handler],
}

/// A small class extending `java.lang.Object`, written from scratch.
pub struct ClassWriter {
    pub pool: Pool,
    this: u16,
    superclass: u16,
    fields: Vec<u8>,
    field_count: u16,
    methods: Vec<u8>,
    method_count: u16,
}

impl ClassWriter {
    pub fn new(name: &str) -> Self {
        let mut pool = Pool::new();
        let this = pool.class(name);
        let superclass = pool.class("java/lang/Object");
        Self { pool, this, superclass, fields: Vec::new(), field_count: 0, methods: Vec::new(), method_count: 0 }
    }

    pub fn field(&mut self, flags: u16, name: &str, descriptor: &str) {
        let (name, descriptor) = (self.pool.utf8(name), self.pool.utf8(descriptor));
        [flags, name, descriptor, 0].iter().for_each(|v| self.fields.extend(v.to_be_bytes()));
        self.field_count += 1;
    }

    /// A method; `body` is `None` for a native one.
    pub fn method(&mut self, flags: u16, name: &str, descriptor: &str, body: Option<Body>) {
        let (name, descriptor) = (self.pool.utf8(name), self.pool.utf8(descriptor));
        let attributes = u16::from(body.is_some());
        [flags, name, descriptor, attributes].iter().for_each(|v| self.methods.extend(v.to_be_bytes()));
        if let Some(body) = body {
            let code_name = self.pool.utf8("Code");
            let handlers = body.handlers.len() as u16;
            let length = 2 + 2 + 4 + body.code.bytes.len() + 2 + 8 * usize::from(handlers) + 2;
            self.methods.extend(code_name.to_be_bytes());
            self.methods.extend((length as u32).to_be_bytes());
            self.methods.extend(body.max_stack.to_be_bytes());
            self.methods.extend(body.max_locals.to_be_bytes());
            self.methods.extend((body.code.bytes.len() as u32).to_be_bytes());
            self.methods.extend(&body.code.bytes);
            self.methods.extend(handlers.to_be_bytes());
            for h in body.handlers {
                [h.start, h.end, h.handler, 0].iter().for_each(|v| self.methods.extend(v.to_be_bytes()));
            }
            self.methods.extend(0u16.to_be_bytes());
        }
        self.method_count += 1;
    }

    /// The class file, of class file version `major`, public and final.
    pub fn finish(self, major: u16) -> Vec<u8> {
        let mut out = vec![0xCA, 0xFE, 0xBA, 0xBE, 0, 0];
        out.extend(major.to_be_bytes());
        self.pool.write(&mut out);
        [ACC_PUBLIC | ACC_FINAL | ACC_SUPER, self.this, self.superclass, 0, self.field_count]
            .iter()
            .for_each(|v| out.extend(v.to_be_bytes()));
        out.extend(&self.fields);
        out.extend(self.method_count.to_be_bytes());
        out.extend(&self.methods);
        out.extend(0u16.to_be_bytes());
        out
    }
}

/// Instructions to put in front of a method: they end without falling
/// through (a `return`), and may branch to the original code's first
/// instruction, which the method's initial frame describes.
pub struct Prefix {
    pub code: Code,
    /// The operand stack the prefix needs.
    pub max_stack: u16,
}

/// A reader over a class file, failing with what was cut short.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let slice = self.bytes.get(self.at..self.at + n).ok_or_else(|| format!("cut short at byte {}", self.at))?;
        self.at += n;
        Ok(slice)
    }

    fn u1(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u2(&mut self) -> Result<u16, String> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u4(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Copies `n` bytes to `out`.
    fn copy(&mut self, n: usize, out: &mut Vec<u8>) -> Result<(), String> {
        out.extend_from_slice(self.take(n)?);
        Ok(())
    }

    /// Copies a `u2` count of attributes to `out`.
    fn copy_attributes(&mut self, out: &mut Vec<u8>) -> Result<(), String> {
        let count = self.u2()?;
        out.extend(count.to_be_bytes());
        for _ in 0..count {
            self.copy(2, out)?;
            let length = self.u4()?;
            out.extend(length.to_be_bytes());
            self.copy(length as usize, out)?;
        }
        Ok(())
    }
}

/// Parses a constant pool into a [`Pool`] that continues it.
fn read_pool(r: &mut Reader) -> Result<Pool, String> {
    let count = r.u2()?;
    let start = r.at;
    let mut pool = Pool { next: count, ..Pool::default() };
    let mut index = 1;
    while index < count {
        let tag = r.u1()?;
        let size = match tag {
            1 => {
                let length = r.u2()?;
                pool.utf8.push((r.take(usize::from(length))?.to_vec(), index));
                0
            }
            7 | 8 | 16 | 19 | 20 => 2,
            15 => 3,
            3 | 4 | 9 | 10 | 11 | 12 | 17 | 18 => 4,
            5 | 6 => 8,
            _ => return Err(format!("constant pool tag {tag} at entry {index}")),
        };
        r.take(size)?;
        // Longs and doubles take two entries.
        index += if matches!(tag, 5 | 6) { 2 } else { 1 };
    }
    pool.bytes = r.bytes[start..r.at].to_vec();
    Ok(pool)
}

/// A static method by name and descriptor, and what writes its prefix
/// (with the class's pool, extended).
pub type Prepended<'a> = (&'a str, &'a str, &'a dyn Fn(&mut Pool) -> Prefix);

/// Rewrites `class` so that each method of `prefixes` first runs its
/// prefix. Fails, naming what, on a method not found or a code attribute
/// it cannot move.
pub fn prepend(class: &[u8], prefixes: &[Prepended]) -> Result<Vec<u8>, String> {
    let mut r = Reader { bytes: class, at: 0 };
    if r.u4()? != 0xCAFE_BABE {
        return Err("not a class file".into());
    }
    let version = r.take(4)?.to_vec();
    let mut pool = read_pool(&mut r)?;
    let mut rest = Vec::new();
    r.copy(6, &mut rest)?; // access, this, super
    let interfaces = r.u2()?;
    rest.extend(interfaces.to_be_bytes());
    r.copy(2 * usize::from(interfaces), &mut rest)?;
    let fields = r.u2()?;
    rest.extend(fields.to_be_bytes());
    for _ in 0..fields {
        r.copy(6, &mut rest)?;
        r.copy_attributes(&mut rest)?;
    }
    let methods = r.u2()?;
    rest.extend(methods.to_be_bytes());
    let mut done = vec![false; prefixes.len()];
    for _ in 0..methods {
        let (flags, name, descriptor) = (r.u2()?, r.u2()?, r.u2()?);
        [flags, name, descriptor].iter().for_each(|v| rest.extend(v.to_be_bytes()));
        let (name, descriptor) = (pool.text(name).unwrap_or_default(), pool.text(descriptor).unwrap_or_default());
        let target = prefixes.iter().position(|(n, d, _)| n.as_bytes() == name && d.as_bytes() == descriptor);
        let Some(target) = target.filter(|_| flags & ACC_STATIC != 0) else {
            r.copy_attributes(&mut rest)?;
            continue;
        };
        let attributes = r.u2()?;
        rest.extend(attributes.to_be_bytes());
        for _ in 0..attributes {
            let attribute = r.u2()?;
            let length = r.u4()? as usize;
            let body = r.take(length)?;
            let body = if pool.text(attribute) == Some(b"Code".as_slice()) {
                let prefix = (prefixes[target].2)(&mut pool);
                done[target] = true;
                moved_code(body, prefix, &mut pool).map_err(|e| format!("{}: {e}", prefixes[target].0))?
            } else {
                body.to_vec()
            };
            rest.extend(attribute.to_be_bytes());
            rest.extend((body.len() as u32).to_be_bytes());
            rest.extend(body);
        }
    }
    r.copy_attributes(&mut rest)?;
    if let Some(missing) = done.iter().position(|d| !d) {
        return Err(format!("no static method {}{}", prefixes[missing].0, prefixes[missing].1));
    }
    let mut out = class[..4].to_vec();
    out.extend(version);
    pool.write(&mut out);
    out.extend(rest);
    Ok(out)
}

/// A `Code` attribute's body with `prefix` in front of its code: the
/// prefix padded with `nop`s to a multiple of 4 bytes (so `tableswitch`
/// padding stays right), every bytecode offset outside the code moved by
/// as much, and a stack map frame where the original code now starts.
fn moved_code(body: &[u8], prefix: Prefix, pool: &mut Pool) -> Result<Vec<u8>, String> {
    let mut r = Reader { bytes: body, at: 0 };
    let (max_stack, max_locals, length) = (r.u2()?, r.u2()?, r.u4()? as usize);
    let code = r.take(length)?;
    let padding = (4 - prefix.code.bytes.len() % 4) % 4;
    let shift = (padding + prefix.code.bytes.len()) as u16;
    if length + usize::from(shift) >= 65_536 {
        return Err("method too long".into());
    }
    let mut out = Vec::new();
    out.extend(max_stack.max(prefix.max_stack).to_be_bytes());
    out.extend(max_locals.to_be_bytes());
    out.extend(((length + usize::from(shift)) as u32).to_be_bytes());
    out.extend(std::iter::repeat_n(op::NOP, padding));
    out.extend(&prefix.code.bytes);
    out.extend(code);
    let handlers = r.u2()?;
    out.extend(handlers.to_be_bytes());
    for _ in 0..handlers {
        let (start, end, handler, catch) = (r.u2()?, r.u2()?, r.u2()?, r.u2()?);
        [start + shift, end + shift, handler + shift, catch].iter().for_each(|v| out.extend(v.to_be_bytes()));
    }
    let mut attributes = Vec::new();
    let mut stack_map = None;
    for _ in 0..r.u2()? {
        let name = r.u2()?;
        let length = r.u4()? as usize;
        let data = r.take(length)?;
        let moved = match pool.text(name) {
            Some(b"LineNumberTable") => moved_lines(data, shift)?,
            Some(b"LocalVariableTable" | b"LocalVariableTypeTable") => moved_table(data, 10, shift)?,
            Some(b"StackMapTable") => {
                stack_map = Some(moved_frames(data, shift)?);
                continue;
            }
            other => {
                return Err(format!("cannot move code attribute {}", String::from_utf8_lossy(other.unwrap_or(b"?"))))
            }
        };
        attributes.push((name, moved));
    }
    // The original code's first instruction is a branch target now.
    let mut frames = if shift <= 63 { vec![shift as u8] } else { [vec![251], shift.to_be_bytes().to_vec()].concat() };
    let count = match stack_map {
        Some((count, moved)) => {
            frames.extend(moved);
            count + 1
        }
        None => 1,
    };
    let frames = [count.to_be_bytes().to_vec(), frames].concat();
    attributes.push((pool.utf8("StackMapTable"), frames));
    out.extend((attributes.len() as u16).to_be_bytes());
    for (name, data) in attributes {
        out.extend(name.to_be_bytes());
        out.extend((data.len() as u32).to_be_bytes());
        out.extend(data);
    }
    Ok(out)
}

/// A table of `entry`-byte rows whose first `u2` is a bytecode offset.
fn moved_table(data: &[u8], entry: usize, shift: u16) -> Result<Vec<u8>, String> {
    let mut r = Reader { bytes: data, at: 0 };
    let count = r.u2()?;
    let mut out = count.to_be_bytes().to_vec();
    for _ in 0..count {
        out.extend((r.u2()? + shift).to_be_bytes());
        r.copy(entry - 2, &mut out)?;
    }
    Ok(out)
}

/// A `LineNumberTable` moved, the prefix on the line where the method
/// begins (so that a frame in it has a line).
fn moved_lines(data: &[u8], shift: u16) -> Result<Vec<u8>, String> {
    let moved = moved_table(data, 4, shift)?;
    let rows: Vec<&[u8]> = moved[2..].chunks(4).collect();
    let Some(first) = rows.iter().min_by_key(|row| u16::from_be_bytes([row[0], row[1]])) else { return Ok(moved) };
    let count = rows.len() as u16 + 1;
    Ok([&count.to_be_bytes()[..], &[0, 0], &first[2..4], &moved[2..]].concat())
}

/// A `StackMapTable`'s frames (count, bytes) after a new first frame at
/// `shift`: the old first frame's offset, absolute, becomes relative to
/// that one; `Uninitialized` types' offsets move.
fn moved_frames(data: &[u8], shift: u16) -> Result<(u16, Vec<u8>), String> {
    let mut r = Reader { bytes: data, at: 0 };
    let count = r.u2()?;
    let mut out = Vec::new();
    for index in 0..count {
        let first = index == 0;
        let kind = r.u1()?;
        // The first frame's delta, one less: relative to the new frame.
        let relative = |delta: u16| if first { delta.checked_sub(1).ok_or("a frame at offset 0") } else { Ok(delta) };
        let types = match kind {
            0..=63 => {
                out.push(relative(u16::from(kind))? as u8);
                0
            }
            64..=127 => {
                out.push(64 + relative(u16::from(kind) - 64)? as u8);
                1
            }
            247..=255 => {
                out.push(kind);
                out.extend(relative(r.u2()?)?.to_be_bytes());
                match kind {
                    247 => 1,
                    252..=254 => usize::from(kind - 251),
                    255 => {
                        let locals = r.u2()?;
                        out.extend(locals.to_be_bytes());
                        moved_types(&mut r, usize::from(locals), shift, &mut out)?;
                        let stack = r.u2()?;
                        out.extend(stack.to_be_bytes());
                        usize::from(stack)
                    }
                    _ => 0,
                }
            }
            _ => return Err(format!("stack map frame type {kind}")),
        };
        moved_types(&mut r, types, shift, &mut out)?;
    }
    Ok((count, out))
}

/// Copies `count` verification types, moving `Uninitialized(offset)`.
fn moved_types(r: &mut Reader, count: usize, shift: u16, out: &mut Vec<u8>) -> Result<(), String> {
    for _ in 0..count {
        let tag = r.u1()?;
        out.push(tag);
        match tag {
            7 => r.copy(2, out)?,
            8 => out.extend((r.u2()? + shift).to_be_bytes()),
            0..=6 => {}
            _ => return Err(format!("verification type {tag}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `StackMapTable` of the given frames.
    fn table(frames: &[&[u8]]) -> Vec<u8> {
        [&(frames.len() as u16).to_be_bytes()[..], &frames.concat()].concat()
    }

    #[test]
    fn frames_move_behind_the_new_one() {
        // same (delta 5), same_locals_1 with an Uninitialized at 7,
        // extended (delta 300) with an Object, full with an Uninitialized.
        let frames = table(&[&[5], &[64 + 3, 8, 0, 7], &[247, 1, 44, 7, 0, 9], &[255, 0, 2, 0, 1, 8, 0, 20, 0, 0]]);
        let (count, moved) = moved_frames(&frames, 12).unwrap();
        assert_eq!(count, 4);
        let expected: Vec<u8> =
            [&[4][..], &[64 + 3, 8, 0, 19], &[247, 1, 44, 7, 0, 9], &[255, 0, 2, 0, 1, 8, 0, 32, 0, 0]].concat();
        assert_eq!(moved, expected);
        // Only the first frame's delta changes; one at offset 0 cannot move.
        assert!(moved_frames(&table(&[&[0]]), 12).is_err());
        assert!(moved_frames(&table(&[&[200]]), 12).is_err(), "reserved frame type");
    }

    #[test]
    fn tables_and_lines_move() {
        // Two line rows (start 0 → line 10, start 6 → line 11).
        let lines = [0, 2, 0, 0, 0, 10, 0, 6, 0, 11];
        let moved = moved_lines(&lines, 8).unwrap();
        // The prefix is on the first line.
        assert_eq!(moved, [0, 3, 0, 0, 0, 10, 0, 8, 0, 10, 0, 14, 0, 11]);
        let locals = [0, 1, 0, 2, 0, 9, 0, 1, 0, 2, 0, 0];
        assert_eq!(moved_table(&locals, 10, 8).unwrap(), [0, 1, 0, 10, 0, 9, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn a_prefix_lands_on_the_original_code_with_a_frame() {
        // A class whose static method `m()V` is `return`.
        let mut class = ClassWriter::new("T");
        let mut body = Code::default();
        body.op(op::RETURN);
        class.method(ACC_STATIC, "m", "()V", Some(Body { max_stack: 0, max_locals: 0, code: &body, handlers: &[] }));
        let bytes = class.finish(52);
        let prefix = |_: &mut Pool| {
            let mut code = Code::default();
            code.op(op::ICONST_0);
            let skip = code.branch(op::IFEQ);
            code.op(op::RETURN);
            code.land(skip);
            Prefix { code, max_stack: 1 }
        };
        let rewritten = prepend(&bytes, &[("m", "()V", &prefix)]).unwrap();
        // Three nops, iconst_0, ifeq +4, return: the original at 8.
        let code = [op::NOP, op::NOP, op::NOP, op::ICONST_0, op::IFEQ, 0, 4, op::RETURN, op::RETURN];
        let at = rewritten.windows(code.len()).position(|w| w == code).expect("the prefix");
        assert_eq!(rewritten[at - 4..at], 9u32.to_be_bytes(), "code length");
        let after = &rewritten[at + code.len()..];
        // No handlers, one attribute: a stack map of one same_frame at 8.
        assert_eq!(after[..4], [0, 0, 0, 1]);
        assert_eq!(after[6..10], 3u32.to_be_bytes());
        assert_eq!(after[10..13], [0, 1, 8]);
        assert!(rewritten.windows(13).any(|w| w == b"StackMapTable"));
        // Errors name what is missing.
        let missing = prepend(&bytes, &[("n", "()V", &prefix)]).unwrap_err();
        assert!(missing.contains("no static method n()V"), "{missing}");
        assert!(prepend(b"\0\0\0\0", &[]).is_err());
        assert!(prepend(&bytes[..bytes.len() - 3], &[]).is_err());
    }
}
