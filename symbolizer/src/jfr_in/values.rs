//! Values as the metadata lays them out, walked where they lie: nothing is
//! built, a field is found by skipping the fields before it. Every value
//! is walked once, whole, before anything reads it ([`Walker::skip`]),
//! bounded three ways: by the bytes (every count is checked against what
//! remains), by nesting (an inline class that contains itself takes no
//! bytes, so depth is capped) and by a budget of values per chunk (a class
//! of empty classes takes no bytes either), so the time any later read
//! takes is bounded by the chunk's size.

use super::bytes::{Bytes, Result};
use super::metadata::{Field, Flat, Layout, Metadata, Primitive};

/// Inline (not pooled) classes nest this deep at most: the JDK's deepest
/// is a handful.
const MAX_DEPTH: usize = 32;

/// Walks values of one chunk's classes.
pub struct Walker<'m> {
    metadata: &'m Metadata,
    /// Values that may still be walked in this chunk.
    budget: usize,
}

impl<'m> Walker<'m> {
    /// Allows a few values per byte of the chunk: real data has fewer
    /// than two (every primitive takes a byte, objects wrap them).
    pub fn new(metadata: &'m Metadata, chunk_len: usize) -> Self {
        Self::with_budget(metadata, chunk_len.saturating_mul(4).saturating_add(4096))
    }

    pub fn with_budget(metadata: &'m Metadata, budget: usize) -> Self {
        Self { metadata, budget }
    }

    /// The values that may still be walked.
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

    /// Moves `bytes` past one value of `class`, calling `refs` with the
    /// class and key of every non-null key the value holds.
    pub fn skip(&mut self, bytes: &mut Bytes<'_>, class: usize, refs: &mut impl FnMut(usize, i64)) -> Result<()> {
        self.skip_at(bytes, class, 0, refs)
    }

    /// Moves `bytes` past a field's value (an array's elements, a key).
    pub fn skip_field(
        &mut self,
        bytes: &mut Bytes<'_>,
        field: &Field,
        refs: &mut impl FnMut(usize, i64),
    ) -> Result<()> {
        self.field_at(bytes, field, 0, refs)
    }

    fn field_at(
        &mut self,
        bytes: &mut Bytes<'_>,
        field: &Field,
        depth: usize,
        refs: &mut impl FnMut(usize, i64),
    ) -> Result<()> {
        let count = if field.array { bytes.count(1, "array element")? } else { 1 };
        self.spend(bytes, count)?;
        let flat = self.metadata.classes.get(field.class).and_then(|c| c.flat.as_deref());
        if let (Some(flat), false) = (flat, field.pooled) {
            // Elements of a flat class (stack frames): walked as skip_at
            // walks each, without looking their class up again.
            self.spend(bytes, count.saturating_mul(1 + 2 * flat.len()))?;
            for _ in 0..count {
                skip_flat(bytes, flat, refs)?;
            }
            return Ok(());
        }
        for _ in 0..count {
            if field.pooled {
                self.spend(bytes, 1)?;
                let key = bytes.long()?;
                if key != 0 {
                    refs(field.class, key);
                }
            } else {
                self.skip_at(bytes, field.class, depth + 1, refs)?;
            }
        }
        Ok(())
    }

    fn skip_at(
        &mut self,
        bytes: &mut Bytes<'_>,
        class: usize,
        depth: usize,
        refs: &mut impl FnMut(usize, i64),
    ) -> Result<()> {
        self.spend(bytes, 1)?;
        let metadata = self.metadata;
        let Some(desc) = metadata.classes.get(class) else {
            return bytes.error(format!("class index {class}"));
        };
        match (desc.layout, desc.flat.as_deref()) {
            (Layout::Primitive(p), _) => {
                read_primitive(bytes, p)?;
            }
            (Layout::String, _) => {
                if let Some(key) = bytes.skip_string()? {
                    refs(class, key);
                }
            }
            (Layout::Composite, Some(flat)) => {
                // As many values as the fields walked one by one spend.
                self.spend(bytes, 2 * flat.len())?;
                skip_flat(bytes, flat, refs)?;
            }
            (Layout::Composite, None) => {
                if depth >= MAX_DEPTH {
                    return bytes.error(format!("{} nests inline values too deep", desc.name));
                }
                for field in &desc.fields {
                    self.field_at(bytes, field, depth, refs)?;
                }
            }
        }
        Ok(())
    }
}

/// Moves `bytes` past one value of a flat class (its [`Flat`] fields),
/// calling `refs` with the class and key of every non-null key.
pub fn skip_flat(bytes: &mut Bytes<'_>, flat: &[Flat], refs: &mut impl FnMut(usize, i64)) -> Result<()> {
    for field in flat {
        match *field {
            Flat::Key(class) => {
                let key = bytes.long()?;
                if key != 0 {
                    refs(class, key);
                }
            }
            Flat::Scalar(p) => {
                read_primitive(bytes, p)?;
            }
        }
    }
    Ok(())
}

/// A primitive's value: integers as `Int`, floats as `Float`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
}

pub fn read_primitive(bytes: &mut Bytes<'_>, p: Primitive) -> Result<Scalar> {
    Ok(match p {
        Primitive::Boolean => Scalar::Bool(bytes.u8()? != 0),
        Primitive::Byte => Scalar::Int(i64::from(bytes.u8()? as i8)),
        Primitive::Char | Primitive::Short => Scalar::Int(i64::from(bytes.short()?)),
        Primitive::Int => Scalar::Int(i64::from(bytes.int()?)),
        Primitive::Long => Scalar::Int(bytes.long()?),
        Primitive::Float => Scalar::Float(f64::from(bytes.float()?)),
        Primitive::Double => Scalar::Float(bytes.double()?),
    })
}
