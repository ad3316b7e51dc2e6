//! Values as the metadata lays them out, and the constant pools their
//! keys refer to. Reading is bounded three ways: by the bytes (every
//! count is checked against what remains), by nesting (an inline class
//! that contains itself takes no bytes, so depth is capped) and by a
//! budget of values per chunk (a class of empty classes takes no bytes
//! either), so memory stays proportional to the chunk's size.

use super::bytes::{Bytes, JfrString, Result};
use super::metadata::{Layout, Metadata, Primitive};

/// Inline (not pooled) classes nest this deep at most: the JDK's deepest
/// is a handful.
const MAX_DEPTH: usize = 32;

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Box<str>),
    /// A key into the constant pool of the class with this index.
    Ref {
        class: usize,
        key: i64,
    },
    Object {
        class: usize,
        fields: Box<[Value]>,
    },
    Array(Box<[Value]>),
}

/// Reads values of one chunk's classes.
pub struct ValueReader<'m> {
    metadata: &'m Metadata,
    /// Values that may still be created in this chunk.
    budget: usize,
}

impl<'m> ValueReader<'m> {
    /// Allows a few values per byte of the chunk: real data has fewer
    /// than two (every primitive takes a byte, objects wrap them).
    pub fn new(metadata: &'m Metadata, chunk_len: usize) -> Self {
        Self::with_budget(metadata, chunk_len.saturating_mul(4).saturating_add(4096))
    }

    pub fn with_budget(metadata: &'m Metadata, budget: usize) -> Self {
        Self { metadata, budget }
    }

    /// The values that may still be created.
    pub fn budget(&self) -> usize {
        self.budget
    }

    fn spend(&mut self, bytes: &Bytes<'_>, n: usize) -> Result<()> {
        match self.budget.checked_sub(n) {
            Some(left) => {
                self.budget = left;
                Ok(())
            }
            None => bytes.error("more values than the chunk's size allows"),
        }
    }

    pub fn value(&mut self, bytes: &mut Bytes<'_>, class: usize) -> Result<Value> {
        self.value_at(bytes, class, 0)
    }

    fn value_at(&mut self, bytes: &mut Bytes<'_>, class: usize, depth: usize) -> Result<Value> {
        self.spend(bytes, 1)?;
        let Some(desc) = self.metadata.classes.get(class) else {
            return bytes.error(format!("class index {class}"));
        };
        Ok(match desc.layout {
            Layout::Primitive(p) => match p {
                Primitive::Boolean => Value::Bool(bytes.u8()? != 0),
                Primitive::Byte => Value::Int(i64::from(bytes.u8()? as i8)),
                Primitive::Char | Primitive::Short => Value::Int(i64::from(bytes.short()?)),
                Primitive::Int => Value::Int(i64::from(bytes.int()?)),
                Primitive::Long => Value::Int(bytes.long()?),
                Primitive::Float => Value::Float(f64::from(bytes.float()?)),
                Primitive::Double => Value::Float(bytes.double()?),
            },
            Layout::String => match bytes.string()? {
                JfrString::Null => Value::Null,
                JfrString::Inline(s) => Value::Str(s),
                JfrString::Pooled(key) => Value::Ref { class, key },
            },
            Layout::Composite => {
                if depth >= MAX_DEPTH {
                    return bytes.error(format!("{} nests inline values too deep", desc.name));
                }
                let mut fields = Vec::with_capacity(desc.fields.len());
                for field in &desc.fields {
                    let single = |reader: &mut Self, bytes: &mut Bytes<'_>| {
                        if field.pooled {
                            reader.spend(bytes, 1)?;
                            Ok(Value::Ref { class: field.class, key: bytes.long()? })
                        } else {
                            reader.value_at(bytes, field.class, depth + 1)
                        }
                    };
                    fields.push(if field.array {
                        let count = bytes.count(1, "array element")?;
                        self.spend(bytes, count)?;
                        let mut elements = Vec::with_capacity(count);
                        for _ in 0..count {
                            elements.push(single(self, bytes)?);
                        }
                        Value::Array(elements.into())
                    } else {
                        single(self, bytes)?
                    });
                }
                Value::Object { class, fields: fields.into() }
            }
        })
    }
}

/// A chunk's constant pools: per class index, its entries sorted by key
/// (looked up by binary search: no hashing, so no key a file chooses can
/// make lookups slow).
#[derive(Debug, Default)]
pub struct Pools {
    by_class: Vec<Vec<(i64, Value)>>,
}

impl Pools {
    pub fn new(classes: usize) -> Self {
        Pools { by_class: (0..classes).map(|_| Vec::new()).collect() }
    }

    /// Adds an entry; [`Pools::seal`] must follow before lookups.
    pub fn insert(&mut self, class: usize, key: i64, value: Value) {
        if let Some(entries) = self.by_class.get_mut(class) {
            entries.push((key, value));
        }
    }

    /// Sorts the entries for lookup; of entries with one key, the last
    /// added counts.
    pub fn seal(&mut self) {
        for entries in &mut self.by_class {
            entries.sort_by_key(|e| e.0);
            entries.reverse();
            entries.dedup_by_key(|e| e.0);
            entries.reverse();
        }
    }

    pub fn get(&self, class: usize, key: i64) -> Option<&Value> {
        let entries = self.by_class.get(class)?;
        entries.binary_search_by_key(&key, |e| e.0).ok().map(|i| &entries[i].1)
    }

    /// The first key in `value` (0 is null) that no pool holds: a writer
    /// defines every constant its chunk refers to, so a missing one means
    /// a damaged key (or pool).
    pub fn dangling(&self, value: &Value) -> Option<(usize, i64)> {
        match value {
            Value::Ref { class, key } => (*key != 0 && self.get(*class, *key).is_none()).then_some((*class, *key)),
            Value::Object { fields: values, .. } | Value::Array(values) => values.iter().find_map(|v| self.dangling(v)),
            _ => None,
        }
    }

    pub fn values(&self) -> impl Iterator<Item = &Value> {
        self.by_class.iter().flatten().map(|(_, v)| v)
    }
}

/// A value with what is needed to read it: its chunk's classes and pools.
#[derive(Clone, Copy)]
pub struct Accessor<'a> {
    metadata: &'a Metadata,
    pools: &'a Pools,
    pub value: &'a Value,
}

impl<'a> Accessor<'a> {
    pub fn new(metadata: &'a Metadata, pools: &'a Pools, value: &'a Value) -> Self {
        Self { metadata, pools, value }
    }

    fn with(self, value: &'a Value) -> Self {
        Self { value, ..self }
    }

    /// The pooled value a key refers to (`None` if the pool lacks it);
    /// any other value as it is.
    pub fn resolve(self) -> Option<Self> {
        match *self.value {
            Value::Ref { class, key } => self.pools.get(class, key).map(|v| self.with(v)),
            _ => Some(self),
        }
    }

    /// A field of an object (or of the pooled object a key refers to),
    /// resolved if it is itself a key.
    pub fn get_field(&self, name: &str) -> Option<Self> {
        let target = self.resolve()?;
        let Value::Object { class, fields } = target.value else {
            return None;
        };
        let index = self.metadata.classes.get(*class)?.field(name)?;
        self.with(fields.get(index)?).resolve()
    }

    pub fn as_iter(self) -> Option<impl Iterator<Item = Accessor<'a>>> {
        match self.resolve()?.value {
            Value::Array(elements) => Some(elements.iter().map(move |v| self.with(v))),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&'a str> {
        match self.resolve()?.value {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_long(&self) -> Option<i64> {
        match self.resolve()?.value {
            Value::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// A float, or an integer as one.
    pub fn as_float(&self) -> Option<f64> {
        match self.resolve()?.value {
            Value::Float(v) => Some(*v),
            Value::Int(v) => Some(*v as f64),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self.resolve()?.value {
            Value::Bool(v) => Some(*v),
            _ => None,
        }
    }
}
