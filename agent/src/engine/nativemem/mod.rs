//! Native memory profiling (`nativemem`): the allocation functions every
//! loaded object imports (`malloc`, `calloc`, `realloc`, `free`,
//! `posix_memalign`, `aligned_alloc`) are pointed at hooks (`got`), which
//! sample allocations by bytes and record the frees of sampled ones
//! (`hooks`, `addresses`). The agent's own imports are never patched: its
//! calls, the hooks' included, reach the allocator directly.
//!
//! Hooks stay bound for the life of the process (an object may hold a
//! pointer it read from its slot); between sessions they only call
//! through. Objects the JVM loads later are patched as its `dlopen`
//! returns, others on the session's ticker.

mod addresses;
mod got;
pub mod hooks;

use crate::jvm::jni_env::JniEnv;
use crate::jvm::ticker::Tick;
use crate::libraries::scan;
use crate::log;
use addresses::Addresses;
use got::Hook;
use sampler::counters::{self, Counter};
use std::ops::Range;
use std::sync::atomic::Ordering;

/// Sampled allocations tracked until freed, at most (2^16 addresses, 512
/// KiB): beyond, an allocation is still recorded but its free is not.
const ADDRESS_BITS: u32 = 16;

/// Ticks between passes made whatever the counters say: a thread binding
/// a lazy slot as it is patched may write the resolved function over the
/// hook.
const TICKS_PER_PASS: u32 = 50;

fn hooks() -> [Hook; 7] {
    let hook = |name, address: *const ()| Hook { name, address: address as u64, only_in: None };
    [
        // The JVM's own loads (`System.load`, `loadLibrary`): a library is
        // patched before its `JNI_OnLoad` runs. libjvm has no RUNPATH, nor
        // has the agent, so its loads search the same paths through the
        // hook.
        Hook { name: c"dlopen", address: hooks::dlopen as *const () as u64, only_in: Some(b"/libjvm.so") },
        hook(c"malloc", hooks::malloc as *const ()),
        hook(c"calloc", hooks::calloc as *const ()),
        hook(c"realloc", hooks::realloc as *const ()),
        hook(c"free", hooks::free as *const ()),
        hook(c"posix_memalign", hooks::posix_memalign as *const ()),
        hook(c"aligned_alloc", hooks::aligned_alloc as *const ()),
    ]
}

/// The loaded image holding the agent's code.
pub(crate) fn own_image() -> Option<Range<u64>> {
    let probe = own_image as *const () as u64;
    let (objects, _) = scan::loaded_objects();
    objects.into_iter().find(|o| o.image.contains(&probe)).map(|o| o.image)
}

/// Patches every loaded object not patched yet; counts the objects and
/// slots hooked (`all`: by now; else newly).
pub(crate) fn patch(all: bool) -> Result<(), String> {
    let mut seen = hooks::HOOKS.patching.lock().unwrap_or_else(|p| p.into_inner());
    *seen = scan::load_counters();
    let (_, own) = hooks::HOOKS.state.get().ok_or("nativemem: not installed")?;
    let done = got::patch_loaded(&hooks(), own);
    let (objects, slots) = if all { (done.objects, done.slots) } else { (done.new_objects, done.new_slots) };
    counters::add(Counter::NativeMemLibraries, objects);
    counters::add(Counter::NativeMemSlots, slots);
    counters::add(Counter::NativeMemPatchFailures, done.failures);
    if done.failures > 0 {
        log::warn!("nativemem: {} import slots could not be made writable; their calls are not seen", done.failures);
    }
    Ok(())
}

/// Patches if objects were loaded or unloaded since the last pass began;
/// whether it did.
pub(crate) fn patch_if_loaded() -> bool {
    let seen = *hooks::HOOKS.patching.lock().unwrap_or_else(|p| p.into_inner());
    if scan::load_counters() == seen {
        return false;
    }
    match patch(false) {
        Ok(()) => true,
        Err(e) => {
            log::warn!("{e}");
            false
        }
    }
}

/// Starts sampling native allocations every `interval` bytes on average,
/// recording the frees of sampled ones unless `nofree`: installs the
/// hooks in every loaded object (once per process; objects loaded since
/// an earlier session are patched now). The published sampler receives
/// the samples.
pub fn start(interval: u32, nofree: bool) -> Result<(), String> {
    if hooks::HOOKS.state.get().is_none() {
        let own = own_image().ok_or("nativemem: cannot find the agent's own image among the loaded objects")?;
        let _ = hooks::HOOKS.state.set((Addresses::new(ADDRESS_BITS), own));
    }
    patch(true)?;
    if let Some((addresses, _)) = hooks::HOOKS.state.get() {
        addresses.clear();
    }
    hooks::HOOKS.generation.fetch_add(1, Ordering::SeqCst);
    hooks::HOOKS.track_frees.store(!nofree, Ordering::SeqCst);
    hooks::HOOKS.interval.store(u64::from(interval), Ordering::SeqCst);
    Ok(())
}

/// Stops sampling: the hooks call through from now on. A hook already
/// recording finishes under the published sampler, which the caller
/// retires after this.
pub fn stop() {
    hooks::HOOKS.interval.store(0, Ordering::SeqCst);
    hooks::HOOKS.track_frees.store(false, Ordering::SeqCst);
}

/// Patches objects loaded since the last pass (`dlopen` by other code
/// than the JVM's), and every [`TICKS_PER_PASS`] ticks all, on the
/// session's ticker.
#[derive(Default)]
pub struct RefreshTick {
    ticks: u32,
}

impl Tick for RefreshTick {
    fn tick(&mut self, _env: Option<JniEnv>) {
        self.ticks += 1;
        if !self.ticks.is_multiple_of(TICKS_PER_PASS) {
            patch_if_loaded();
        } else if let Err(e) = patch(false) {
            log::warn!("{e}");
        }
    }
}
