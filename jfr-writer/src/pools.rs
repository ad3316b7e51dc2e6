//! Constant pools, written into each chunk's checkpoint event.
//!
//! One [`ConstantPools`] serves every chunk of a file: each chunk's
//! checkpoint holds the entries that chunk used, and a key means the same
//! value in every chunk. Readers rely on that: the JDK's parser keeps the
//! constants it resolved in one chunk and, meeting the same key in the
//! next, reuses them without reading the new entry; async-profiler's
//! reader keeps one dictionary for the whole file.
//!
//! Symbols, packages, classes, methods and stack traces are interned by
//! content, under keys that are never reused (interning tables are
//! forgotten past [`INTERNED_LIMIT`] entries; new keys continue after the
//! old ones). A stack trace's content is its entry as a reader sees it, so
//! a stack sampled in every chunk keeps one key for the whole file (until
//! the file has had [`INTERNED_LIMIT`] distinct stacks), and
//! stacks that differ only in what the entry does not record (two return
//! addresses in one native function) share one. Threads, strings and
//! attribute values are keyed by the caller, whose keys must obey the
//! same rule. Keys start at 1 (0 is how JFR spells null). A pool with no
//! entry is left out of the checkpoint (the JDK reader rejects empty
//! pools), except frame types and thread states, which are always written
//! whole so every value an event can carry resolves.

use crate::buffer::ByteBuf;
use crate::schema::{id, ThreadState};
use frames::FrameType;
use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

/// Entries an interning table holds before it is forgotten.
pub const INTERNED_LIMIT: usize = 1 << 16;

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

impl ClassId {
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

/// Content-to-key interning whose keys are never reused.
struct Interner<K> {
    keys: HashMap<K, u64>,
    next: u64,
}

impl<K> Default for Interner<K> {
    fn default() -> Self {
        Self { keys: HashMap::new(), next: 1 }
    }
}

impl<K: Hash + Eq> Interner<K> {
    fn key(&mut self, content: K) -> u64 {
        if let Some(&key) = self.keys.get(&content) {
            return key;
        }
        if self.keys.len() >= INTERNED_LIMIT {
            self.keys.clear();
        }
        let key = self.next;
        self.next += 1;
        self.keys.insert(content, key);
        key
    }
}

/// A class's identity: name, package and modifiers.
type ClassContent = (u64, u64, i32);
/// A method's identity: class, name and descriptor keys, modifiers, hidden.
type MethodContent = (u64, u64, u64, i32, bool);
/// A stack trace's identity: a 128-bit hash of its encoded entry (two
/// independent 64-bit SipHashes), so a session's traces are told apart
/// without keeping their frames.
type TraceContent = (u64, u64);

fn trace_content(entry: &[u8]) -> TraceContent {
    let half = |seed: u8| {
        let mut hasher = DefaultHasher::new();
        hasher.write_u8(seed);
        hasher.write(entry);
        hasher.finish()
    };
    (half(0), half(1))
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

    fn clear(&mut self) {
        self.count = 0;
        self.entries.clear();
    }
}

/// The constant pools of a file; see the module documentation.
#[derive(Default)]
pub struct ConstantPools {
    symbol_keys: Interner<String>,
    package_keys: Interner<u64>,
    class_keys: Interner<ClassContent>,
    method_keys: Interner<MethodContent>,
    trace_keys: Interner<TraceContent>,
    /// The stack trace being interned, encoded.
    trace_entry: ByteBuf,
    /// Interned keys the current chunk's pools hold.
    written: HashSet<(u64, u64)>,
    /// The current chunk's methods by the caller's key.
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

    /// Whether the current chunk still lacks entry `key` of pool
    /// `type_id` (and from now on counts it as written).
    fn first_in_chunk(&mut self, type_id: u64, key: u64) -> bool {
        self.written.insert((type_id, key))
    }

    pub fn symbol(&mut self, text: &str) -> SymbolId {
        let key = match self.symbol_keys.keys.get(text) {
            Some(&key) => key,
            None => self.symbol_keys.key(text.to_owned()),
        };
        if self.first_in_chunk(id::SYMBOL, key) {
            self.symbols.entry(key).put_utf8(text);
        }
        SymbolId(key)
    }

    /// A package by its internal name (`java/lang`).
    pub fn package(&mut self, name: &str) -> PackageId {
        let symbol = self.symbol(name);
        let key = self.package_keys.key(symbol.0);
        if self.first_in_chunk(id::PACKAGE, key) {
            self.packages.entry(key).put_varint(symbol.0);
        }
        PackageId(key)
    }

    /// A class by its internal name (`java/lang/String`); the package is
    /// derived from the name.
    pub fn class(&mut self, name: &str, modifiers: i32) -> ClassId {
        let package = name.rfind('/').map(|end| &name[..end]);
        self.class_in(name, package, modifiers)
    }

    /// A class whose package is not part of its name (`None`: no package):
    /// a native library, with its build-id as package.
    pub fn class_in(&mut self, name: &str, package: Option<&str>, modifiers: i32) -> ClassId {
        let symbol = self.symbol(name);
        let package = package.map_or(0, |p| self.package(p).0);
        let key = self.class_keys.key((symbol.0, package, modifiers));
        if self.first_in_chunk(id::CLASS, key) {
            let out = self.classes.entry(key);
            out.put_varint(0); // class loader: null
            out.put_varint(symbol.0);
            out.put_varint(package);
            out.put_int(modifiers);
            out.put_bool(false);
        }
        ClassId(key)
    }

    /// The method the caller knows as `key` in this chunk; `define` runs
    /// only the first time a chunk sees a key. (Callers' keys need not be
    /// stable across chunks: the pool key comes from the definition.)
    pub fn method(&mut self, key: u64, define: impl FnOnce(&mut Self) -> MethodDef) -> MethodId {
        if let Some(&id) = self.method_ids.get(&key) {
            return id;
        }
        let def = define(self);
        let pool_key = self.method_keys.key((def.class.0, def.name.0, def.descriptor.0, def.modifiers, def.hidden));
        if self.first_in_chunk(id::METHOD, pool_key) {
            let out = self.methods.entry(pool_key);
            out.put_varint(def.class.0);
            out.put_varint(def.name.0);
            out.put_varint(def.descriptor.0);
            out.put_int(def.modifiers);
            out.put_bool(def.hidden);
        }
        let id = MethodId(pool_key);
        self.method_ids.insert(key, id);
        id
    }

    /// The key of the stack trace of `frames`, top (innermost) first: the
    /// id events reference. Keys go to new content in the order asked, so
    /// a caller that asks for its most used traces first gives them the
    /// shortest keys.
    pub fn stack_trace(&mut self, truncated: bool, frames: &[FrameDef]) -> u64 {
        let entry = &mut self.trace_entry;
        entry.clear();
        entry.put_bool(truncated);
        entry.put_varint(frames.len() as u64);
        for frame in frames {
            entry.put_varint(frame.method.0);
            entry.put_int(frame.line);
            entry.put_int(frame.bci);
            entry.put_varint(frame.frame_type.key());
        }
        let key = self.trace_keys.key(trace_content(entry.as_slice()));
        if self.first_in_chunk(id::STACK_TRACE, key) {
            self.stack_traces.entry(key).put_bytes(self.trace_entry.as_slice());
        }
        key
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
    /// each non-empty pool. Ends the chunk: the next starts with empty
    /// pools and the same keys.
    pub(crate) fn encode_chunk(&mut self, out: &mut ByteBuf) {
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
        self.next_chunk();
    }

    fn next_chunk(&mut self) {
        self.written.clear();
        self.method_ids.clear();
        for pool in [
            &mut self.threads,
            &mut self.stack_traces,
            &mut self.methods,
            &mut self.classes,
            &mut self.packages,
            &mut self.symbols,
            &mut self.strings,
            &mut self.attribute_values,
        ] {
            pool.clear();
        }
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
        let mut pools = ConstantPools::new();
        let mut out = ByteBuf::new();
        pools.encode_chunk(&mut out);
        // Only the frame type and thread state pools.
        assert_eq!(out.as_slice()[0], 2);
    }

    fn define(p: &mut ConstantPools, class: &str, name: &str) -> MethodDef {
        MethodDef {
            class: p.class(class, 1),
            name: p.symbol(name),
            descriptor: p.symbol("()V"),
            modifiers: 1,
            hidden: false,
        }
    }

    /// Every chunk writes the entries it uses, under the keys earlier
    /// chunks gave the same content; other content never gets those keys.
    #[test]
    fn keys_mean_one_thing_in_every_chunk() {
        let mut pools = ConstantPools::new();
        let run = pools.method(7, |p| define(p, "a/Worker", "run"));
        let mut first = ByteBuf::new();
        pools.encode_chunk(&mut first);

        // The caller's key 7 now names another method (a reused jmethodID).
        let other = pools.method(7, |p| define(p, "b/Other", "call"));
        assert_ne!(other, run);
        let again = pools.method(8, |p| define(p, "a/Worker", "run"));
        assert_eq!(again, run, "the same method keeps its key");
        let mut second = ByteBuf::new();
        pools.encode_chunk(&mut second);
        // Both methods, their classes, packages and symbols are in the second chunk.
        assert!(second.len() > first.len());
        let mut third = ByteBuf::new();
        pools.encode_chunk(&mut third);
        assert_eq!(third.as_slice()[0], 2, "an unused chunk writes no interned entry");
    }

    #[test]
    fn forgotten_content_gets_a_new_key_never_an_old_one() {
        let mut interner = Interner::default();
        let first = interner.key("a".to_owned());
        for i in 0..INTERNED_LIMIT {
            interner.key(format!("x{i}"));
        }
        let again = interner.key("a".to_owned());
        assert_ne!(again, first);
        assert_eq!(again, INTERNED_LIMIT as u64 + 2);
    }

    #[test]
    fn stack_traces_are_keyed_by_what_their_entry_says() {
        let mut pools = ConstantPools::new();
        let run = pools.method(1, |p| define(p, "a/Worker", "run"));
        let main = pools.method(2, |p| define(p, "a/Main", "main"));
        let frame = |method, line| FrameDef { method, line, bci: 0, frame_type: FrameType::JitCompiled };
        let stack = [frame(run, 10), frame(main, 3)];
        let key = pools.stack_trace(false, &stack);
        assert_eq!(key, 1, "the first content gets the first key");
        assert_eq!(pools.stack_trace(false, &stack), key);
        let others = [
            pools.stack_trace(true, &stack),
            pools.stack_trace(false, &stack[..1]),
            pools.stack_trace(false, &[frame(run, 11), frame(main, 3)]),
            pools.stack_trace(false, &[frame(main, 3), frame(run, 10)]),
            pools.stack_trace(false, &[FrameDef { frame_type: FrameType::Inlined, ..stack[0] }, stack[1]]),
        ];
        assert_eq!(others, [2, 3, 4, 5, 6]);
        let mut first = ByteBuf::new();
        pools.encode_chunk(&mut first);
        // The next chunk writes the entry again, under the same key.
        assert_eq!(pools.stack_trace(false, &stack), key);
        assert_eq!(pools.stack_traces.count, 1);
        let mut second = ByteBuf::new();
        pools.encode_chunk(&mut second);
        assert!(second.len() < first.len());
    }

    #[test]
    fn library_classes_differ_by_build_id_package() {
        let mut pools = ConstantPools::new();
        let a = pools.class_in("libfoo.so", Some("aa11"), 0);
        let b = pools.class_in("libfoo.so", Some("bb22"), 0);
        assert_ne!(a, b);
        assert_eq!(pools.class_in("libfoo.so", Some("aa11"), 0), a);
    }
}
