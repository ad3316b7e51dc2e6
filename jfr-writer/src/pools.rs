//! Constant pools of one chunk, written into its checkpoint event.
//!
//! The builder hands out typed ids. Symbols, packages and classes are
//! interned by content; methods, stack traces and threads are keyed by the
//! caller. Pool keys start at 1 (0 is how JFR spells null). A pool with no
//! entry is left out of the checkpoint (the JDK reader rejects empty pools),
//! except frame types and thread states, which are always written whole so
//! every value an event can carry resolves.

use crate::buffer::ByteBuf;
use crate::schema::{id, ThreadState};
use frames::FrameType;
use std::collections::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SymbolId(u64);
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PackageId(u64);
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClassId(u64);
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MethodId(u64);

impl MethodId {
    pub fn key(self) -> u64 {
        self.0
    }
}

/// A method's pool entry.
#[derive(Clone, Copy, Debug)]
pub struct MethodDef {
    pub class: ClassId,
    pub name: SymbolId,
    pub descriptor: SymbolId,
    pub modifiers: i32,
    pub hidden: bool,
}

/// One frame of a stack trace entry.
#[derive(Clone, Copy, Debug)]
pub struct FrameDef {
    pub method: MethodId,
    pub line: i32,
    pub bci: i32,
    pub frame_type: FrameType,
}

/// A thread's pool entry.
#[derive(Clone, Copy, Debug)]
pub struct ThreadDef<'a> {
    pub os_name: &'a str,
    pub os_thread_id: i64,
    pub java_name: Option<&'a str>,
    pub java_thread_id: i64,
}

/// Encoded entries of one pool.
#[derive(Default)]
struct Pool {
    count: u64,
    entries: ByteBuf,
}

impl Pool {
    fn entry(&mut self, key: u64) -> &mut ByteBuf {
        self.count += 1;
        self.entries.put_varint(key);
        &mut self.entries
    }

    fn write(&self, type_id: u64, out: &mut ByteBuf) -> bool {
        if self.count == 0 {
            return false;
        }
        out.put_varint(type_id);
        out.put_varint(self.count);
        out.put_bytes(self.entries.as_slice());
        true
    }
}

#[derive(Default)]
pub struct ConstantPools {
    symbol_ids: HashMap<String, SymbolId>,
    package_ids: HashMap<SymbolId, PackageId>,
    class_ids: HashMap<String, ClassId>,
    method_ids: HashMap<u64, MethodId>,
    symbols: Pool,
    packages: Pool,
    classes: Pool,
    methods: Pool,
    stack_traces: Pool,
    threads: Pool,
    strings: Pool,
    attribute_values: Pool,
}

impl ConstantPools {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn symbol(&mut self, text: &str) -> SymbolId {
        if let Some(&id) = self.symbol_ids.get(text) {
            return id;
        }
        let id = SymbolId(self.symbol_ids.len() as u64 + 1);
        self.symbols.entry(id.0).put_string(text);
        self.symbol_ids.insert(text.to_owned(), id);
        id
    }

    /// A package by its internal name (`java/lang`).
    pub fn package(&mut self, name: &str) -> PackageId {
        let symbol = self.symbol(name);
        if let Some(&id) = self.package_ids.get(&symbol) {
            return id;
        }
        let id = PackageId(self.package_ids.len() as u64 + 1);
        self.packages.entry(id.0).put_varint(symbol.0);
        self.package_ids.insert(symbol, id);
        id
    }

    /// A class by its internal name (`java/lang/String`); the package is
    /// derived from the name. Interned: the first `modifiers` given win.
    /// Ids are numbered from 2^40, clear of the keys of [`Self::class_keyed`].
    pub fn class(&mut self, name: &str, modifiers: i32) -> ClassId {
        let key = (1 << 40) + self.class_ids.len() as u64 + 1;
        self.class_keyed(key, name, modifiers)
    }

    /// A class under the caller's key (for ids that stay the same across
    /// chunks); a name already present keeps its first key.
    pub fn class_keyed(&mut self, key: u64, name: &str, modifiers: i32) -> ClassId {
        if let Some(&id) = self.class_ids.get(name) {
            return id;
        }
        let symbol = self.symbol(name);
        let package = match name.rfind('/') {
            Some(end) => self.package(&name[..end]).0,
            None => 0,
        };
        let id = ClassId(key);
        let out = self.classes.entry(id.0);
        out.put_varint(0); // class loader: null
        out.put_varint(symbol.0);
        out.put_varint(package);
        out.put_varint_signed(i64::from(modifiers));
        out.put_bool(false);
        self.class_ids.insert(name.to_owned(), id);
        id
    }

    /// The method the caller knows as `key`; `define` runs only the first
    /// time a key is seen.
    pub fn method(&mut self, key: u64, define: impl FnOnce(&mut Self) -> MethodDef) -> MethodId {
        if let Some(&id) = self.method_ids.get(&key) {
            return id;
        }
        let def = define(self);
        let id = MethodId(self.method_ids.len() as u64 + 1);
        let out = self.methods.entry(id.0);
        out.put_varint(def.class.0);
        out.put_varint(def.name.0);
        out.put_varint(def.descriptor.0);
        out.put_varint_signed(i64::from(def.modifiers));
        out.put_bool(def.hidden);
        self.method_ids.insert(key, id);
        id
    }

    /// A stack trace under the caller's key (the id events reference).
    /// Frames go top (innermost) first.
    pub fn stack_trace(&mut self, key: u64, truncated: bool, frames: &[FrameDef]) {
        let out = self.stack_traces.entry(key);
        out.put_bool(truncated);
        out.put_varint(frames.len() as u64);
        for frame in frames {
            out.put_varint(frame.method.0);
            out.put_varint_signed(i64::from(frame.line));
            out.put_varint_signed(i64::from(frame.bci));
            out.put_varint(frame.frame_type.key());
        }
    }

    pub fn thread(&mut self, key: u64, def: &ThreadDef<'_>) {
        let out = self.threads.entry(key);
        out.put_string(def.os_name);
        out.put_varint_signed(def.os_thread_id);
        out.put_optional_string(def.java_name);
        out.put_varint_signed(def.java_thread_id);
    }

    /// An entry of the `java.lang.String` pool, under the caller's key.
    pub fn string(&mut self, key: u64, text: &str) {
        self.strings.entry(key).put_string(text);
    }

    /// An entry of the attribute value pool, under the caller's key.
    pub fn attribute_value(&mut self, key: u64, text: &str) {
        self.attribute_values.entry(key).put_string(text);
    }

    /// The checkpoint body after its event header fields: pool count, then
    /// each non-empty pool.
    pub(crate) fn encode(&self, out: &mut ByteBuf) {
        let mut body = ByteBuf::new();
        let mut written = 0u64;
        let mut frame_types = Pool::default();
        for t in FrameType::ALL {
            frame_types.entry(t.key()).put_string(t.description());
        }
        let mut states = Pool::default();
        for s in ThreadState::ALL {
            states.entry(s.key()).put_string(s.name());
        }
        let pools: [(u64, &Pool); 10] = [
            (id::FRAME_TYPE, &frame_types),
            (id::THREAD_STATE, &states),
            (id::THREAD, &self.threads),
            (id::STACK_TRACE, &self.stack_traces),
            (id::METHOD, &self.methods),
            (id::CLASS, &self.classes),
            (id::PACKAGE, &self.packages),
            (id::SYMBOL, &self.symbols),
            (id::STRING, &self.strings),
            (id::ATTRIBUTE_VALUE, &self.attribute_values),
        ];
        for (type_id, pool) in pools {
            written += u64::from(pool.write(type_id, &mut body));
        }
        out.put_varint(written);
        out.put_bytes(body.as_slice());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_returns_the_same_id_for_the_same_content() {
        let mut pools = ConstantPools::new();
        let a = pools.symbol("run");
        assert_eq!(pools.symbol("run"), a);
        assert_ne!(pools.symbol("main"), a);
        let c = pools.class("java/lang/Thread", 1);
        assert_eq!(pools.class("java/lang/Thread", 1), c);
        assert_eq!(pools.package("java/lang"), pools.package("java/lang"));
    }

    #[test]
    fn method_definition_runs_once_per_key() {
        let mut pools = ConstantPools::new();
        let mut calls = 0;
        for _ in 0..3 {
            pools.method(42, |p| {
                calls += 1;
                MethodDef {
                    class: p.class("Foo", 0),
                    name: p.symbol("bar"),
                    descriptor: p.symbol("()V"),
                    modifiers: 1,
                    hidden: false,
                }
            });
        }
        assert_eq!(calls, 1);
    }

    #[test]
    fn empty_pools_are_not_written() {
        let pools = ConstantPools::new();
        let mut out = ByteBuf::new();
        pools.encode(&mut out);
        // Only the frame type and thread state pools.
        assert_eq!(out.as_slice()[0], 2);
    }
}
