//! The loaded libraries as handlers see them: each library's place in
//! memory, its build-id and libjvm's marked functions, and the snapshot
//! of those loaded now with the unwinders built for them. The control
//! plane reads the files (symbols, unwind sections) and publishes each
//! new snapshot here; a handler only looks up.

use buildid::BuildId;
use frames::Mark;
use std::ops::Range;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex};
use unwind::dwarf::{DwarfUnwinder, SectionData};
use unwind::sframe::SFrameUnwinder;

/// A loaded library, as a handler needs it.
#[derive(Debug)]
pub struct Library {
    /// Its index in the session's library table (remote frames carry it).
    pub index: u32,
    pub path: String,
    /// Runtime address minus link-time address.
    pub bias: u64,
    /// Executable segments at runtime.
    pub text: Vec<Range<u64>>,
    /// Lowest to highest runtime address of the loaded image.
    pub image: Range<u64>,
    pub build_id: Option<BuildId>,
    /// libjvm: frames here are JVM C++ code and may carry marks.
    pub is_jvm: bool,
    /// Its marked functions (libjvm's), by link-time address.
    pub marks: Marks,
}

impl Library {
    /// The file name (`libz.so.1`).
    pub fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }

    /// Whether runtime `address` lies in its code. Signal-safe.
    pub fn contains(&self, address: u64) -> bool {
        self.text.iter().any(|t| t.contains(&address))
    }

    /// The mark of the function at runtime `address`. Signal-safe.
    pub fn mark_at(&self, address: u64) -> Mark {
        if self.is_jvm {
            self.marks.mark_at(address.wrapping_sub(self.bias))
        } else {
            Mark::None
        }
    }
}

/// Marked functions' link-time ranges, sorted and disjoint: about seventy
/// in libjvm (`InterpreterRuntime`'s functions, mostly), so the handler's
/// check of every libjvm frame searches a few KiB instead of every symbol.
#[derive(Clone, Debug, Default)]
pub struct Marks(Vec<(Range<u64>, Mark)>);

impl Marks {
    /// The marks of `ranges`, sorted by start and disjoint.
    pub fn new(mut ranges: Vec<(Range<u64>, Mark)>) -> Self {
        ranges.shrink_to_fit();
        Marks(ranges)
    }

    /// The mark of link-time `address`. Signal-safe.
    pub fn mark_at(&self, address: u64) -> Mark {
        let index = self.0.partition_point(|(range, _)| range.start <= address).checked_sub(1);
        match index.and_then(|i| self.0.get(i)) {
            Some((range, mark)) if range.contains(&address) => *mark,
            _ => Mark::None,
        }
    }
}

/// What handlers see: loaded libraries by address, and the unwinders
/// built for them.
pub struct Snapshot {
    ranges: Vec<(Range<u64>, Arc<Library>)>,
    pub dwarf: Option<DwarfUnwinder>,
    pub sframe: Option<SFrameUnwinder<SectionData>>,
}

impl Snapshot {
    /// The snapshot of `loaded`, with their unwinders. Not signal-safe.
    pub fn new<'a>(
        loaded: impl IntoIterator<Item = &'a Arc<Library>>,
        dwarf: Option<DwarfUnwinder>,
        sframe: Option<SFrameUnwinder<SectionData>>,
    ) -> Snapshot {
        let mut ranges: Vec<(Range<u64>, Arc<Library>)> =
            loaded.into_iter().flat_map(|l| l.text.iter().map(move |t| (t.clone(), Arc::clone(l)))).collect();
        ranges.sort_by_key(|(r, _)| r.start);
        Snapshot { ranges, dwarf, sframe }
    }

    /// The loaded library whose code contains `address`. Signal-safe.
    pub fn library_at(&self, address: u64) -> Option<&Library> {
        let index = self.ranges.partition_point(|(r, _)| r.start <= address).checked_sub(1)?;
        let (range, library) = self.ranges.get(index)?;
        range.contains(&address).then_some(&**library)
    }
}

/// The current snapshot, replaced as libraries load and unload. Replaced
/// snapshots are kept until this is dropped: a handler may still read one.
#[derive(Default)]
pub struct Snapshots {
    current: AtomicPtr<Snapshot>,
    /// Boxed: handlers may hold pointers to these, so they must not move.
    #[allow(clippy::vec_box)]
    retired: Mutex<Vec<Box<Snapshot>>>,
}

impl Snapshots {
    /// Makes `snapshot` the current one. Not signal-safe.
    pub fn publish(&self, snapshot: Snapshot) {
        let previous = self.current.swap(Box::into_raw(Box::new(snapshot)), Ordering::AcqRel);
        if !previous.is_null() {
            // SAFETY: `previous` came from Box::into_raw, and is owned here
            // once swapped out; it is kept alive until `self` is dropped.
            let previous = unsafe { Box::from_raw(previous) };
            self.retired.lock().unwrap_or_else(|p| p.into_inner()).push(previous);
        }
    }

    /// The current snapshot. Signal-safe; valid while `self` lives.
    pub fn current(&self) -> Option<&Snapshot> {
        // SAFETY: snapshots are only freed when `self` is dropped.
        unsafe { self.current.load(Ordering::Acquire).as_ref() }
    }
}

impl Drop for Snapshots {
    fn drop(&mut self) {
        let current = *self.current.get_mut();
        if !current.is_null() {
            // SAFETY: from Box::into_raw; no handler can use it any more.
            drop(unsafe { Box::from_raw(current) });
        }
    }
}
