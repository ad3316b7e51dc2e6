//! The metadata event: a string table and a tree of elements whose
//! `class` elements (with their `field` children) describe how every
//! event and constant is laid out. Read into [`Class`]es whose fields
//! name their type by index, checked once so that reading values cannot
//! meet an unknown type.

use super::bytes::{Bytes, JfrString, Result};
use std::collections::HashMap;
use std::rc::Rc;

/// Elements nest as root → metadata → class → field → annotation; deeper
/// trees are not metadata.
const MAX_ELEMENT_DEPTH: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Primitive {
    Boolean,
    Byte,
    Char,
    Short,
    Int,
    Long,
    Float,
    Double,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Primitive(Primitive),
    String,
    /// Its fields, in order.
    Composite,
}

#[derive(Debug)]
pub struct Field {
    pub name: Rc<str>,
    /// Index into the chunk's classes.
    pub class: usize,
    /// Written as a key into the class's constant pool.
    pub pooled: bool,
    pub array: bool,
}

/// A field of a flat class: a key, or a primitive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flat {
    /// A key into this class's pool.
    Key(usize),
    Scalar(Primitive),
}

#[derive(Debug)]
pub struct Class {
    pub id: i64,
    pub name: Rc<str>,
    pub layout: Layout,
    pub fields: Vec<Field>,
    /// For a composite class whose fields are all single keys and
    /// primitives (a stack frame): those fields, walked without descending
    /// into their classes.
    pub flat: Option<Box<[Flat]>>,
}

impl Class {
    pub fn field(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| &*f.name == name)
    }
}

#[derive(Debug)]
pub struct Metadata {
    pub classes: Vec<Class>,
    /// Class id → index.
    pub by_id: HashMap<i64, usize>,
}

struct Element {
    name: Rc<str>,
    attributes: Vec<(Rc<str>, Rc<str>)>,
    children: Vec<Element>,
}

impl Element {
    fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.iter().find(|(k, _)| &**k == key).map(|(_, v)| &**v)
    }
}

/// Reads the metadata event's body (after its id): strings, then the
/// element tree.
pub fn read(bytes: &mut Bytes<'_>) -> Result<Metadata> {
    let count = bytes.count(1, "metadata string")?;
    let mut strings = Vec::with_capacity(count);
    for _ in 0..count {
        strings.push(match bytes.string()? {
            JfrString::Null => Rc::from(""),
            JfrString::Inline(s) => Rc::from(s),
            JfrString::Pooled(_) => return bytes.error("a pooled string in the metadata"),
        });
    }
    let root = element(bytes, &strings, 0)?;
    classes(bytes, &root)
}

fn string(bytes: &mut Bytes<'_>, strings: &[Rc<str>]) -> Result<Rc<str>> {
    let index = bytes.int()?;
    match usize::try_from(index).ok().and_then(|i| strings.get(i)) {
        Some(s) => Ok(s.clone()),
        None => bytes.error(format!("metadata string index {index} of {}", strings.len())),
    }
}

fn element(bytes: &mut Bytes<'_>, strings: &[Rc<str>], depth: usize) -> Result<Element> {
    if depth > MAX_ELEMENT_DEPTH {
        return bytes.error("metadata elements nested too deep");
    }
    let name = string(bytes, strings)?;
    let count = bytes.count(2, "metadata attribute")?;
    let mut attributes = Vec::with_capacity(count);
    for _ in 0..count {
        attributes.push((string(bytes, strings)?, string(bytes, strings)?));
    }
    let count = bytes.count(3, "metadata element")?;
    let mut children = Vec::with_capacity(count);
    for _ in 0..count {
        children.push(element(bytes, strings, depth + 1)?);
    }
    Ok(Element { name, attributes, children })
}

fn primitive(name: &str) -> Option<Layout> {
    Some(Layout::Primitive(match name {
        "boolean" => Primitive::Boolean,
        "byte" => Primitive::Byte,
        "char" => Primitive::Char,
        "short" => Primitive::Short,
        "int" => Primitive::Int,
        "long" => Primitive::Long,
        "float" => Primitive::Float,
        "double" => Primitive::Double,
        "java.lang.String" => return Some(Layout::String),
        _ => return None,
    }))
}

/// A composite class's fields as [`Flat`] ones, if all are.
fn flat(classes: &[Class], class: &Class) -> Option<Box<[Flat]>> {
    if class.layout != Layout::Composite || class.fields.is_empty() {
        return None;
    }
    let flat = |field: &Field| match (field.array, field.pooled, classes[field.class].layout) {
        (true, _, _) => None,
        (false, true, _) => Some(Flat::Key(field.class)),
        (false, false, Layout::Primitive(p)) => Some(Flat::Scalar(p)),
        (false, false, _) => None,
    };
    class.fields.iter().map(flat).collect()
}

fn classes(bytes: &Bytes<'_>, root: &Element) -> Result<Metadata> {
    let elements: Vec<&Element> = root
        .children
        .iter()
        .filter(|e| &*e.name == "metadata")
        .flat_map(|m| m.children.iter().filter(|e| &*e.name == "class"))
        .collect();
    let mut by_id = HashMap::with_capacity(elements.len());
    let id = |e: &Element, key: &str| -> Result<i64> {
        match e.attribute(key).map(str::parse::<i64>) {
            Some(Ok(id)) => Ok(id),
            _ => bytes.error(format!("metadata {} without a numeric {key}", e.name)),
        }
    };
    for (index, class) in elements.iter().enumerate() {
        if by_id.insert(id(class, "id")?, index).is_some() {
            return bytes.error(format!("class id {} declared twice", id(class, "id")?));
        }
    }
    let mut classes = Vec::with_capacity(elements.len());
    for class in &elements {
        let Some(name) = class.attributes.iter().find(|(k, _)| &**k == "name").map(|(_, v)| v.clone()) else {
            return bytes.error("metadata class without a name");
        };
        let mut fields = Vec::new();
        for field in class.children.iter().filter(|e| &*e.name == "field") {
            let Some(field_name) = field.attributes.iter().find(|(k, _)| &**k == "name").map(|(_, v)| v.clone()) else {
                return bytes.error(format!("a field of {name} without a name"));
            };
            let type_id = id(field, "class")?;
            let Some(&class) = by_id.get(&type_id) else {
                return bytes.error(format!("field {name}.{field_name} of undeclared class {type_id}"));
            };
            fields.push(Field {
                name: field_name,
                class,
                pooled: field.attribute("constantPool") == Some("true"),
                array: field.attribute("dimension").is_some_and(|d| d != "0"),
            });
        }
        let layout = primitive(&name).unwrap_or(Layout::Composite);
        classes.push(Class { id: id(class, "id")?, name, layout, fields, flat: None });
    }
    for index in 0..classes.len() {
        classes[index].flat = flat(&classes, &classes[index]);
    }
    Ok(Metadata { classes, by_id })
}
