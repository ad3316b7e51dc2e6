//! Constant pools that hold across a file's chunks, as the JDK's parser
//! keeps them: a pool per type (by name), each constant where its bytes
//! lie rather than decoded, so memory is proportional to the number of
//! constants, not to their size. A later chunk's constant replaces an
//! earlier one of the same key; a key no chunk so far defined is
//! dangling. Entries are sorted by key and found by binary search (no
//! hashing: no key a file chooses can make lookups slow).

use std::cell::Cell;

/// Where a constant's value lies: the chunk that wrote it (whose metadata
/// lays it out), its class there, its byte offset within the chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loc {
    pub chunk: u32,
    pub class: u32,
    pub offset: u32,
}

/// A constant, and what a reader made of it (see [`Memo`]).
#[derive(Debug)]
pub struct Entry {
    pub key: i64,
    pub loc: Loc,
    memo: Cell<u64>,
}

/// A reader's conversion of a constant (a stack trace's id in its own
/// tables, say), kept with the constant so that it is made once per
/// constant, not once per use. Tagged with what kind of conversion it is:
/// a damaged file may declare a field of one type with another's pool.
pub struct Memo<'a>(&'a Cell<u64>);

impl Memo<'_> {
    pub fn get(&self, tag: u8) -> Option<u32> {
        let packed = self.0.get();
        (packed >> 32 == u64::from(tag) + 1).then_some(packed as u32)
    }

    pub fn set(&self, tag: u8, value: u32) {
        self.0.set((u64::from(tag) + 1) << 32 | u64::from(value));
    }
}

impl Entry {
    pub fn memo(&self) -> Memo<'_> {
        Memo(&self.memo)
    }
}

/// Pools by index; [`Pools::index`] names them.
#[derive(Debug, Default)]
pub struct Pools {
    names: std::collections::HashMap<std::rc::Rc<str>, usize>,
    by_pool: Vec<Vec<Entry>>,
}

/// One chunk's constants, before the chunk is known to be whole: merged
/// into the file's pools by [`Pools::commit`], dropped with a damaged chunk.
#[derive(Debug, Default)]
pub struct Staged {
    by_pool: Vec<Vec<Entry>>,
    sealed: bool,
}

impl Pools {
    /// The pool of the type named `name`.
    pub fn index(&mut self, name: &std::rc::Rc<str>) -> usize {
        let next = self.names.len();
        *self.names.entry(name.clone()).or_insert(next)
    }

    fn find(entries: &[Entry], key: i64) -> Option<&Entry> {
        entries.binary_search_by_key(&key, |e| e.key).ok().map(|i| &entries[i])
    }

    /// The constant `key` of pool `pool`: the staged chunk's, else the
    /// latest earlier chunk's.
    pub fn get<'a>(&'a self, staged: &'a Staged, pool: usize, key: i64) -> Option<&'a Entry> {
        staged.by_pool.get(pool).and_then(|e| Self::find(e, key)).or_else(|| Self::find(self.by_pool.get(pool)?, key))
    }

    /// Merges a whole chunk's constants in; of one key, the chunk's wins.
    pub fn commit(&mut self, staged: Staged) {
        for (pool, new) in staged.by_pool.into_iter().enumerate() {
            if new.is_empty() {
                continue;
            }
            if self.by_pool.len() <= pool {
                self.by_pool.resize_with(pool + 1, Vec::new);
            }
            let old = std::mem::take(&mut self.by_pool[pool]);
            let mut merged = Vec::with_capacity(old.len() + new.len());
            let (mut old, mut new) = (old.into_iter().peekable(), new.into_iter().peekable());
            loop {
                let take_new = match (old.peek().map(|e| e.key), new.peek().map(|e| e.key)) {
                    (Some(o), Some(n)) => {
                        if o == n {
                            old.next();
                        }
                        o >= n
                    }
                    (None, Some(_)) => true,
                    (Some(_), None) => false,
                    (None, None) => break,
                };
                merged.extend(if take_new { new.next() } else { old.next() });
            }
            self.by_pool[pool] = merged;
        }
    }
}

impl Staged {
    pub fn insert(&mut self, pool: usize, key: i64, loc: Loc) {
        if self.by_pool.len() <= pool {
            self.by_pool.resize_with(pool + 1, Vec::new);
        }
        self.by_pool[pool].push(Entry { key, loc, memo: Cell::new(0) });
    }

    /// Sorts for lookup; of entries with one key, the last added counts.
    pub fn seal(&mut self) {
        for entries in &mut self.by_pool {
            entries.reverse();
            entries.sort_by_key(|e| e.key); // stable: the last added first
            entries.dedup_by_key(|e| e.key);
        }
        self.sealed = true;
    }

    pub fn is_sealed(&self) -> bool {
        self.sealed
    }

    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.by_pool.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(chunk: u32) -> Loc {
        Loc { chunk, class: 0, offset: 0 }
    }

    #[test]
    fn later_chunks_replace_keys_and_keep_the_rest() {
        let mut pools = Pools::default();
        let pool = pools.index(&"jdk.types.Symbol".into());
        assert_eq!(pools.index(&"jdk.types.Symbol".into()), pool);
        let mut first = Staged::default();
        for key in [5, 1, 3, 1] {
            first.insert(pool, key, loc(key as u32));
        }
        first.seal();
        let none = Staged::default();
        // Of two entries of key 1 in one chunk, the last counts.
        assert_eq!(pools.get(&first, pool, 1).map(|e| e.loc), Some(loc(1)));
        pools.commit(first);
        let mut second = Staged::default();
        second.insert(pool, 3, loc(30));
        second.insert(pool, 4, loc(40));
        second.seal();
        assert_eq!(pools.get(&second, pool, 3).map(|e| e.loc), Some(loc(30)), "the staged chunk's first");
        assert_eq!(pools.get(&none, pool, 3).map(|e| e.loc), Some(loc(3)), "not yet committed");
        pools.commit(second);
        let keys: Vec<(i64, u32)> =
            [1, 3, 4, 5].iter().map(|&k| (k, pools.get(&none, pool, k).unwrap().loc.chunk)).collect();
        assert_eq!(keys, [(1, 1), (3, 30), (4, 40), (5, 5)]);
        assert!(pools.get(&none, pool, 2).is_none() && pools.get(&none, pool + 1, 1).is_none());
    }

    #[test]
    fn memos_are_read_back_only_under_their_tag() {
        let mut staged = Staged::default();
        staged.insert(0, 1, loc(0));
        let entry = staged.entries().next().unwrap();
        assert_eq!(entry.memo().get(0), None);
        entry.memo().set(2, 7);
        assert_eq!((entry.memo().get(2), entry.memo().get(0)), (Some(7), None));
        entry.memo().set(0, u32::MAX);
        assert_eq!(entry.memo().get(0), Some(u32::MAX));
    }
}
