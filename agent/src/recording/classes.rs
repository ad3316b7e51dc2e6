//! The class map: class names to ids that stay the same for a whole
//! session, so every chunk pools a class under the same key.
//!
//! Only the recording uses it, while it finishes a chunk under its own
//! lock: no signal handler and no JNI thread reads or writes it, so it is
//! a plain map owned by the session's recording, dropped with it.

use std::collections::HashMap;

/// Classes a session keys (what the triple-buffered map this replaced
/// held); later ones are pooled under a per-chunk key.
const CAPACITY: usize = 98_304;

#[derive(Default)]
pub struct ClassIds {
    ids: HashMap<String, u32>,
}

impl ClassIds {
    /// The id of class `name` (from 1, assigned on first use), or `None`
    /// once the map is full.
    pub fn id(&mut self, name: &str) -> Option<u32> {
        if let Some(&id) = self.ids.get(name) {
            return Some(id);
        }
        if self.ids.len() >= CAPACITY {
            return None;
        }
        let id = u32::try_from(self.ids.len()).ok()?.checked_add(1)?;
        self.ids.insert(name.to_owned(), id);
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_refused_only_when_full() {
        let mut classes = ClassIds::default();
        assert_eq!(classes.id("a/A"), Some(1));
        assert_eq!(classes.id("b/B"), Some(2));
        assert_eq!(classes.id("a/A"), Some(1));
        for i in 2..CAPACITY {
            assert!(classes.id(&format!("c/C{i}")).is_some());
        }
        assert_eq!(classes.id("d/New"), None, "full");
        assert_eq!(classes.id("b/B"), Some(2), "known classes keep their ids");
    }
}
