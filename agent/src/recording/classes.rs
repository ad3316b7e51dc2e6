//! The class map: class names to ids that stay the same for the whole
//! session (a persistent triple-buffered dictionary), used as the class
//! keys of every chunk's constant pool and, with `bounded_lookup`, from
//! signal handlers that need a class id.

use crate::dictionary::{Carry, TripleBufferedDictionary};
use std::sync::OnceLock;

const CAPACITY: usize = 1 << 17;
static CLASSES: OnceLock<TripleBufferedDictionary> = OnceLock::new();

/// The class map, allocated on first use.
pub fn classes() -> Result<&'static TripleBufferedDictionary, String> {
    if let Some(c) = CLASSES.get() {
        return Ok(c);
    }
    let map = TripleBufferedDictionary::new(CAPACITY, Carry::Everything)
        .map_err(|e| format!("cannot reserve the class map: {e}"))?;
    Ok(CLASSES.get_or_init(|| map))
}
