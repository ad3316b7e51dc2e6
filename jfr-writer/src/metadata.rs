//! The metadata event: a string table followed by an element tree that
//! declares every type, field and annotation the chunk uses.
//!
//! Layout read by `jdk.jfr.internal.MetadataReader`: `root` holds a
//! `metadata` element (one `class` child per type) and a `region` element.
//! Attributes are pairs of string-table indexes.

use crate::buffer::ByteBuf;
use std::collections::HashMap;

/// How a field's value is stored and what its number means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    None,
    /// An absolute time in chunk ticks (`@Timestamp("TICKS")`).
    TimestampTicks,
    /// A duration in chunk ticks (`@Timespan("TICKS")`).
    TimespanTicks,
    /// A duration in milliseconds (`@Timespan("MILLISECONDS")`).
    TimespanMillis,
    /// A duration in nanoseconds (`@Timespan("NANOSECONDS")`).
    TimespanNanos,
    /// An absolute time in epoch milliseconds (`@Timestamp("MILLISECONDS_SINCE_EPOCH")`).
    TimestampMillis,
    /// A byte count (`@DataAmount("BYTES")`).
    Bytes,
    /// A memory address (`@MemoryAddress`).
    Address,
}

/// One field of a type.
#[derive(Clone, Copy, Debug)]
pub struct FieldDef {
    pub name: &'static str,
    pub type_id: u64,
    pub label: &'static str,
    /// The value is a key into the constant pool of `type_id`.
    pub constant_pool: bool,
    /// The value is an array (length-prefixed).
    pub array: bool,
    pub unit: Unit,
}

impl FieldDef {
    pub const fn new(name: &'static str, type_id: u64, label: &'static str) -> Self {
        Self { name, type_id, label, constant_pool: false, array: false, unit: Unit::None }
    }

    pub const fn pooled(self) -> Self {
        Self { constant_pool: true, ..self }
    }

    pub const fn array(self) -> Self {
        Self { array: true, ..self }
    }

    pub const fn unit(self, unit: Unit) -> Self {
        Self { unit, ..self }
    }
}

/// The kind of a declared type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A primitive or `java.lang.String`: no fields.
    Primitive,
    /// A structured value type (possibly pooled by events that use it).
    Value,
    /// A value type with a single field whose value stands for the whole
    /// (`simpleType`), such as `jdk.types.Symbol`.
    Simple,
    /// An event type (`superType = jdk.jfr.Event`).
    Event,
    /// An annotation type.
    Annotation,
}

#[derive(Clone, Copy, Debug)]
pub struct TypeDef {
    pub id: u64,
    pub name: &'static str,
    pub kind: Kind,
    pub label: Option<&'static str>,
    pub category: &'static [&'static str],
    pub fields: &'static [FieldDef],
}

/// Type ids of the annotations the metadata encoder attaches by itself.
#[derive(Clone, Copy, Debug)]
pub struct AnnotationIds {
    pub label: u64,
    pub category: u64,
    pub timestamp: u64,
    pub timespan: u64,
    pub data_amount: u64,
    pub memory_address: u64,
}

struct Element {
    name: &'static str,
    attributes: Vec<(&'static str, String)>,
    children: Vec<Element>,
}

impl Element {
    fn new(name: &'static str) -> Self {
        Self { name, attributes: Vec::new(), children: Vec::new() }
    }

    fn attr(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.attributes.push((key, value.into()));
        self
    }

    fn child(mut self, child: Element) -> Self {
        self.children.push(child);
        self
    }
}

#[derive(Default)]
struct StringTable {
    index: HashMap<String, u64>,
    strings: Vec<String>,
}

impl StringTable {
    fn intern(&mut self, s: &str) -> u64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.strings.len() as u64;
        self.strings.push(s.to_owned());
        self.index.insert(s.to_owned(), i);
        i
    }
}

fn label_annotation(ids: &AnnotationIds, text: &str) -> Element {
    Element::new("annotation").attr("class", ids.label.to_string()).attr("value", text)
}

fn unit_annotation(ids: &AnnotationIds, unit: Unit) -> Option<Element> {
    let (class, value) = match unit {
        Unit::None => return None,
        Unit::TimestampTicks => (ids.timestamp, Some("TICKS")),
        Unit::TimespanTicks => (ids.timespan, Some("TICKS")),
        Unit::TimespanMillis => (ids.timespan, Some("MILLISECONDS")),
        Unit::TimespanNanos => (ids.timespan, Some("NANOSECONDS")),
        Unit::TimestampMillis => (ids.timestamp, Some("MILLISECONDS_SINCE_EPOCH")),
        Unit::Bytes => (ids.data_amount, Some("BYTES")),
        Unit::Address => (ids.memory_address, None),
    };
    let element = Element::new("annotation").attr("class", class.to_string());
    Some(match value {
        Some(v) => element.attr("value", v),
        None => element,
    })
}

/// Fields appended at runtime to a type: context attributes named by the
/// user, all constant-pool references of one type.
#[derive(Clone, Copy, Debug)]
pub struct Extension<'a> {
    pub type_id: u64,
    pub field_type: u64,
    pub names: &'a [String],
}

fn type_element(ids: &AnnotationIds, def: &TypeDef, extensions: &[Extension<'_>]) -> Element {
    let mut element = Element::new("class").attr("name", def.name).attr("id", def.id.to_string());
    match def.kind {
        Kind::Event => element = element.attr("superType", "jdk.jfr.Event"),
        Kind::Annotation => element = element.attr("superType", "java.lang.annotation.Annotation"),
        Kind::Simple => element = element.attr("simpleType", "true"),
        Kind::Primitive | Kind::Value => {}
    }
    if let Some(label) = def.label {
        element = element.child(label_annotation(ids, label));
    }
    if !def.category.is_empty() {
        let mut category = Element::new("annotation").attr("class", ids.category.to_string());
        for (i, name) in def.category.iter().enumerate() {
            category = category.attr(category_key(i), *name);
        }
        element = element.child(category);
    }
    for field in def.fields {
        let mut f = Element::new("field").attr("name", field.name).attr("class", field.type_id.to_string());
        if field.constant_pool {
            f = f.attr("constantPool", "true");
        }
        if field.array {
            f = f.attr("dimension", "1");
        }
        if !field.label.is_empty() {
            f = f.child(label_annotation(ids, field.label));
        }
        if let Some(unit) = unit_annotation(ids, field.unit) {
            f = f.child(unit);
        }
        element = element.child(f);
    }
    for extension in extensions.iter().filter(|e| e.type_id == def.id) {
        for name in extension.names {
            let field = Element::new("field")
                .attr("name", name.as_str())
                .attr("class", extension.field_type.to_string())
                .attr("constantPool", "true")
                .child(label_annotation(ids, name));
            element = element.child(field);
        }
    }
    element
}

/// Array-valued annotation attributes are spelled `value-0`, `value-1`, ...
fn category_key(i: usize) -> &'static str {
    const KEYS: [&str; 4] = ["value-0", "value-1", "value-2", "value-3"];
    KEYS[i.min(KEYS.len() - 1)]
}

fn write_element(out: &mut ByteBuf, strings: &mut StringTable, element: &Element) {
    out.put_varint(strings.intern(element.name));
    out.put_varint(element.attributes.len() as u64);
    for (key, value) in &element.attributes {
        out.put_varint(strings.intern(key));
        out.put_varint(strings.intern(value));
    }
    out.put_varint(element.children.len() as u64);
    for child in &element.children {
        write_element(out, strings, child);
    }
}

/// Encodes the body of the metadata event (after its event header):
/// the string table, then the element tree.
pub fn encode_metadata_body(types: &[TypeDef], ids: &AnnotationIds, extensions: &[Extension<'_>]) -> Vec<u8> {
    let mut metadata = Element::new("metadata");
    for def in types {
        metadata = metadata.child(type_element(ids, def, extensions));
    }
    let region = Element::new("region").attr("locale", "en_US").attr("gmtOffset", "0");
    let root = Element::new("root").child(metadata).child(region);

    let mut strings = StringTable::default();
    let mut tree = ByteBuf::new();
    write_element(&mut tree, &mut strings, &root);

    let mut out = ByteBuf::with_capacity(tree.len() + strings.strings.len() * 16);
    out.put_varint(strings.strings.len() as u64);
    for s in &strings.strings {
        out.put_string(s);
    }
    out.put_bytes(tree.as_slice());
    out.into_vec()
}
