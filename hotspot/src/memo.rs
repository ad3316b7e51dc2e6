//! What walks remember. Across one stripe's samples ([`WalkCache`], used
//! under the stripe's lock): jmethodIDs by `Method*` ([`MethodIds`]) and
//! return sites by pc, what a return address in an nmethod decodes to (its
//! frames, innermost first, and the frame's size). Within one walk
//! ([`WalkMemo`]): the last return site checked, since deep recursion
//! returns to the same pc again and again (a copy of it, compared by pc
//! alone: no slot lookup per frame).
//!
//! A site decoded in an earlier sample is used only while the pc's nmethod
//! is the one it was decoded in and still in use: the same blob and compile
//! id (compile ids are never reused in a VM), and not made not entrant
//! (redefining a method it inlines does that, after which ids and bcis may
//! no longer name its frames). A frame without a jmethodID is never
//! remembered across samples: the id may exist by the next one. Code on a
//! walked stack cannot be freed under the walk, so within one walk one
//! check per pc is enough.

use crate::java_frame::JavaFrame;
use crate::methods::{MethodIds, NO_JMETHOD_ID};
use std::alloc::{alloc_zeroed, handle_alloc_error, Layout};

/// Frames remembered per return site (deeper inlining is decoded each time).
pub const SITE_FRAMES: usize = 8;
/// Return sites remembered per stripe, direct-mapped by pc.
const SITES: usize = 256;

/// A decoded return site. All zero bits is a valid (empty) site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Site {
    pub pc: u64,
    pub nmethod: u64,
    /// The nmethod's compile id when it was decoded, in use, if `lasting`.
    compile_id: u64,
    /// The site may be used in later samples; else only within the walk
    /// that decoded it.
    lasting: bool,
    /// The frame's size in words.
    pub frame_size: i64,
    len: usize,
    frames: [JavaFrame; SITE_FRAMES],
}

impl Site {
    const EMPTY: Site = Site {
        pc: 0,
        nmethod: 0,
        compile_id: 0,
        lasting: false,
        frame_size: 0,
        len: 0,
        frames: [JavaFrame::EMPTY; SITE_FRAMES],
    };

    /// A site of `frames` (at most [`SITE_FRAMES`], else `None`), lasting
    /// across samples under `compile_id` (the nmethod's, in use) only if
    /// every frame has a jmethodID.
    pub fn new(pc: u64, nmethod: u64, compile_id: Option<u64>, frame_size: i64, frames: &[JavaFrame]) -> Option<Site> {
        let mut site = Site { pc, nmethod, frame_size, len: frames.len(), ..Site::EMPTY };
        site.frames.get_mut(..frames.len())?.copy_from_slice(frames);
        if let Some(id) = compile_id.filter(|_| frames.iter().all(|f| f.method != NO_JMETHOD_ID)) {
            (site.compile_id, site.lasting) = (id, true);
        }
        Some(site)
    }

    pub fn frames(&self) -> &[JavaFrame] {
        self.frames.get(..self.len).unwrap_or_default()
    }
}

/// What one sample stripe's walks remember across samples.
pub struct WalkCache {
    pub(crate) ids: MethodIds,
    sites: Box<[Site; SITES]>,
}

impl Default for WalkCache {
    /// Not signal-safe: allocates. The sites start as zeroed memory, which
    /// the allocator leaves untouched (and not resident) until used.
    fn default() -> Self {
        let layout = Layout::new::<[Site; SITES]>();
        // SAFETY: the layout has a non-zero size.
        let sites = unsafe { alloc_zeroed(layout) }.cast::<[Site; SITES]>();
        if sites.is_null() {
            handle_alloc_error(layout);
        }
        // SAFETY: allocated by the global allocator with this type's
        // layout, and all zero bits is a valid `Site` (integers, a bool and
        // `JavaFrame`s, whose kind is a `repr(u8)` enum with a 0 variant).
        let sites = unsafe { Box::from_raw(sites) };
        Self { ids: MethodIds::default(), sites }
    }
}

impl WalkCache {
    fn slot(pc: u64) -> usize {
        (pc.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize % SITES
    }

    fn site(&self, pc: u64) -> Option<&Site> {
        self.sites.get(Self::slot(pc)).filter(|site| site.pc == pc && pc != 0)
    }
}

/// One walk's memory: the walked thread and the stripe's cache.
pub struct WalkMemo<'c> {
    /// The walked thread's `JavaThread*` (0 if unknown): where its
    /// continuation entry is.
    pub(crate) thread: u64,
    /// The site this walk checked or decoded last (pc 0 if none).
    last: Site,
    pub(crate) cache: &'c mut WalkCache,
}

impl<'c> WalkMemo<'c> {
    pub fn new(thread: u64, cache: &'c mut WalkCache) -> Self {
        Self { thread, last: Site::EMPTY, cache }
    }

    /// The site of return address `pc` if this walk checked it last.
    pub(crate) fn checked_site(&self, pc: u64) -> Option<&Site> {
        (pc == self.last.pc && pc != 0).then_some(&self.last)
    }

    /// The site of return address `pc` in `nmethod` remembered from an
    /// earlier sample, if `in_use_compile_id` (read only when there is a
    /// candidate) gives the compile id it was decoded under.
    pub(crate) fn lasting_site(
        &mut self,
        pc: u64,
        nmethod: u64,
        in_use_compile_id: impl FnOnce() -> Option<u64>,
    ) -> Option<&Site> {
        let site = self.cache.site(pc).filter(|site| site.nmethod == nmethod && site.lasting)?;
        if Some(site.compile_id) != in_use_compile_id() {
            return None;
        }
        self.last = *site;
        Some(&self.last)
    }

    /// Remembers a site decoded in this walk: for later samples too if it
    /// is lasting (one that is not would only evict one that is).
    pub(crate) fn remember(&mut self, site: Site) {
        if site.lasting {
            if let Some(slot) = self.cache.sites.get_mut(WalkCache::slot(site.pc)) {
                *slot = site;
            }
        }
        self.last = site;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use frames::JavaFrameKind;

    fn frame(method: u64) -> JavaFrame {
        JavaFrame { method, bci: 1, kind: JavaFrameKind::C2Compiled }
    }

    #[test]
    fn sites_last_across_walks_only_for_the_same_nmethod_in_use() {
        let mut cache = WalkCache::default();
        let site = Site::new(0x1000, 0x900, Some(7), 4, &[frame(1), frame(2)]).unwrap();
        WalkMemo::new(0, &mut cache).remember(site);
        let mut memo = WalkMemo::new(0, &mut cache);
        assert_eq!(memo.checked_site(0x1000), None, "a new walk has checked nothing");
        assert_eq!(memo.lasting_site(0x1000, 0x900, || Some(8)), None, "another compilation at that address");
        assert_eq!(memo.lasting_site(0x1000, 0x901, || Some(7)), None, "another blob");
        assert_eq!(memo.lasting_site(0x1000, 0x900, || None), None, "not in use");
        assert_eq!(memo.checked_site(0x1000), None);
        assert_eq!(memo.lasting_site(0x1000, 0x900, || Some(7)).unwrap().frames(), &[frame(1), frame(2)]);
        assert_eq!(memo.checked_site(0x1000), Some(&site));
    }

    #[test]
    fn a_site_with_a_frame_without_an_id_lasts_one_walk() {
        let mut cache = WalkCache::default();
        let site = Site::new(0x1000, 0x900, Some(7), 4, &[frame(NO_JMETHOD_ID), frame(2)]).unwrap();
        let mut memo = WalkMemo::new(0, &mut cache);
        memo.remember(site);
        assert_eq!(memo.checked_site(0x1000).map(|s| s.len), Some(2));
        let mut memo = WalkMemo::new(0, &mut cache);
        assert_eq!(memo.lasting_site(0x1000, 0x900, || panic!("no candidate: nothing to read")), None);
    }

    #[test]
    fn a_new_cache_is_empty_sites() {
        let cache = WalkCache::default();
        assert!(cache.sites.iter().all(|site| *site == Site::EMPTY), "zeroed memory reads as empty sites");
        assert_eq!(cache.site(0), None);
    }

    /// Two pcs sharing a slot: a lasting site takes it from the other; one
    /// that does not last serves its own walk and leaves the slot alone.
    #[test]
    fn a_slot_holds_the_last_lasting_site() {
        for second_lasts in [false, true] {
            let mut cache = WalkCache::default();
            let mut memo = WalkMemo::new(0, &mut cache);
            memo.remember(Site::new(0x1000, 0x900, Some(7), 4, &[frame(1)]).unwrap());
            let other = (0x1001..).find(|&pc| WalkCache::slot(pc) == WalkCache::slot(0x1000)).unwrap();
            memo.remember(Site::new(other, 0x900, second_lasts.then_some(7), 4, &[frame(2)]).unwrap());
            assert_eq!(memo.checked_site(other).map(Site::frames), Some(&[frame(2)][..]), "used within the walk");
            let mut memo = WalkMemo::new(0, &mut cache);
            assert_eq!(memo.lasting_site(0x1000, 0x900, || Some(7)).is_some(), !second_lasts);
            assert_eq!(memo.lasting_site(other, 0x900, || Some(7)).is_some(), second_lasts);
        }
        assert!(Site::new(0x1000, 0x900, None, 4, &[frame(1); SITE_FRAMES + 1]).is_none(), "too deep to remember");
    }
}
