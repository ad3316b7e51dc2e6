//! The import slots of loaded objects: each object's dynamic section names
//! the relocations of the functions it imports (`.rela.plt`, `.rela.dyn`),
//! and a slot (PLT/GOT entry) pointed at a hook sends that object's calls
//! to it. Read from the objects as loaded (no file is opened). The loader
//! lists an object before it relocates it, so an object is patched only
//! once `dlopen(RTLD_NOLOAD)` has returned it (which waits for a load in
//! progress to end, and pins the object until the pass ends). Control
//! plane only.

use std::ffi::{c_int, c_void, CStr};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

/// `Elf64_Dyn`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Dyn {
    tag: i64,
    value: u64,
}

/// `Elf64_Rela`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Rela {
    offset: u64,
    info: u64,
    addend: i64,
}

/// `Elf64_Sym`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Sym {
    name: u32,
    info: u8,
    other: u8,
    shndx: u16,
    value: u64,
    size: u64,
}

const DT_NULL: i64 = 0;
const DT_PLTRELSZ: i64 = 2;
const DT_STRTAB: i64 = 5;
const DT_SYMTAB: i64 = 6;
const DT_RELA: i64 = 7;
const DT_RELASZ: i64 = 8;
const DT_STRSZ: i64 = 10;
const DT_JMPREL: i64 = 23;
/// Dynamic entries read at most.
const MAX_DYNAMIC: usize = 4096;

/// A function to hook: its name, the hook's address, and the objects
/// whose imports of it are hooked (those whose path ends so; all: None).
pub struct Hook {
    pub name: &'static CStr,
    pub address: u64,
    pub only_in: Option<&'static [u8]>,
}

/// What a pass over the loaded objects did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Patched {
    /// Objects with a slot pointing at a hook, and of them those with a
    /// slot newly pointed at one.
    pub objects: u64,
    pub new_objects: u64,
    /// Slots pointing at a hook, and of them those newly pointed.
    pub slots: u64,
    pub new_slots: u64,
    /// Slots that could not be made writable.
    pub failures: u64,
}

struct Pass<'a> {
    hooks: &'a [Hook],
    /// The agent's image: its own imports are never hooked.
    own: &'a Range<u64>,
    page: u64,
    /// The objects to patch, by name and load bias: the first walk lists
    /// them, the second patches those pinned meanwhile.
    objects: Vec<(Vec<u8>, u64)>,
    patching: bool,
    done: Patched,
}

/// Points every import slot of a `hooks` function in every loaded object
/// but the one holding `own` at its hook. Slots already pointing at their
/// hook are left alone, so a later pass patches only what was loaded
/// since.
pub fn patch_loaded(hooks: &[Hook], own: &Range<u64>) -> Patched {
    // SAFETY: sysconf has no preconditions.
    let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let mut pass = Pass { hooks, own, page, objects: Vec::new(), patching: false, done: Patched::default() };
    // SAFETY: `visit` matches the callback signature; `pass` outlives the
    // call.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&mut pass as *mut Pass).cast()) };
    // The main program (no name) was relocated before the agent ran.
    let mut pinned = Vec::new();
    pass.objects.retain(|(name, _)| {
        if name.is_empty() {
            return true;
        }
        let Ok(path) = std::ffi::CString::new(name.clone()) else { return false };
        // SAFETY: a loaded object's path; RTLD_NOLOAD loads nothing.
        let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
        pinned.extend((!handle.is_null()).then_some(handle));
        !handle.is_null()
    });
    pass.patching = true;
    // SAFETY: as above.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&mut pass as *mut Pass).cast()) };
    for handle in pinned {
        // SAFETY: a handle of the dlopen above.
        unsafe { libc::dlclose(handle) };
    }
    pass.done
}

unsafe extern "C" fn visit(info: *mut libc::dl_phdr_info, _size: libc::size_t, data: *mut c_void) -> c_int {
    // SAFETY: the loader passes a valid entry, and `data` is the `Pass`
    // of `patch_loaded`.
    let (info, pass) = unsafe { (&*info, &mut *data.cast::<Pass>()) };
    if info.dlpi_phdr.is_null() {
        return 0;
    }
    // SAFETY: the loader's program headers of this object.
    let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
    let name = if info.dlpi_name.is_null() {
        &b""[..]
    } else {
        // SAFETY: the loader's NUL-terminated name of this object.
        unsafe { CStr::from_ptr(info.dlpi_name) }.to_bytes()
    };
    let bias = info.dlpi_addr;
    let range = |h: &libc::Elf64_Phdr| bias + h.p_vaddr..bias + h.p_vaddr + h.p_memsz;
    let holds_agent = headers.iter().any(|h| h.p_type == libc::PT_LOAD && range(h).contains(&pass.own.start));
    // The loader's own calls reach the allocator by its own pointers, and
    // the vDSO imports nothing.
    let skipped = name.windows(9).any(|w| w == b"ld-linux-") || name.starts_with(b"linux-vdso");
    if holds_agent || skipped {
        return 0;
    }
    if !pass.patching {
        pass.objects.push((name.to_vec(), bias));
        return 0;
    }
    if !pass.objects.iter().any(|(n, b)| n == name && *b == bias) {
        return 0;
    }
    let Some(dynamic) = headers.iter().find(|h| h.p_type == libc::PT_DYNAMIC) else { return 0 };
    let relro = headers.iter().find(|h| h.p_type == libc::PT_GNU_RELRO).map(range).unwrap_or_default();
    // The loader write-protects whole pages of the RELRO range only.
    let protected = relro.start & !(pass.page - 1)..relro.end & !(pass.page - 1);
    // SAFETY: the dynamic section of a loaded object, as the loader holds it.
    let (slots, new) = unsafe { patch_object(pass, name, bias, range(dynamic).start, &protected) };
    pass.done.objects += u64::from(slots > 0);
    pass.done.new_objects += u64::from(new > 0);
    pass.done.slots += slots;
    pass.done.new_slots += new;
    0
}

/// Patches one object's slots; returns how many point at hooks, and how
/// many of them it pointed.
///
/// # Safety
/// `dynamic` is the runtime address of the dynamic section of a loaded
/// object with load bias `bias`, which stays loaded during the call.
unsafe fn patch_object(pass: &mut Pass, path: &[u8], bias: u64, dynamic: u64, protected: &Range<u64>) -> (u64, u64) {
    // Dynamic addresses: the loader relocates them in place where the
    // section is writable; others are link-time addresses.
    let at = |value: u64| if value < bias { value + bias } else { value };
    let (mut symtab, mut strtab, mut strsz) = (0, 0, 0);
    let mut tables = [(0u64, 0u64); 2];
    for i in 0..MAX_DYNAMIC {
        // SAFETY: entries up to DT_NULL lie in the section (this
        // function's contract).
        let entry = unsafe { std::ptr::read_unaligned((dynamic as *const Dyn).add(i)) };
        match entry.tag {
            DT_NULL => break,
            DT_SYMTAB => symtab = at(entry.value),
            DT_STRTAB => strtab = at(entry.value),
            DT_STRSZ => strsz = entry.value,
            DT_JMPREL => tables[0].0 = at(entry.value),
            DT_PLTRELSZ => tables[0].1 = entry.value,
            DT_RELA => tables[1].0 = at(entry.value),
            DT_RELASZ => tables[1].1 = entry.value,
            _ => {}
        }
    }
    if symtab == 0 || strtab == 0 {
        return (0, 0);
    }
    let (mut hooked, mut patched) = (0, 0);
    for (table, size) in tables.into_iter().filter(|&(table, _)| table != 0) {
        for i in 0..size / std::mem::size_of::<Rela>() as u64 {
            // SAFETY: the relocation table the dynamic section names.
            let rela = unsafe { std::ptr::read_unaligned((table as *const Rela).add(i as usize)) };
            if !unwind::arch::IMPORT_RELOCATIONS.contains(&(rela.info as u32)) {
                continue;
            }
            // SAFETY: a relocation's symbol index is in the symbol table.
            let symbol = unsafe { std::ptr::read_unaligned((symtab as *const Sym).add((rela.info >> 32) as usize)) };
            if u64::from(symbol.name) >= strsz {
                continue;
            }
            // SAFETY: a symbol's name is a NUL-terminated string in the
            // string table, within its size (checked above).
            let name = unsafe { CStr::from_ptr((strtab + u64::from(symbol.name)) as *const libc::c_char) };
            let wanted = |h: &&Hook| h.name == name && h.only_in.is_none_or(|suffix| path.ends_with(suffix));
            let Some(hook) = pass.hooks.iter().find(wanted) else { continue };
            // SAFETY: the slot this relocation filled in the loaded object.
            match unsafe {
                point(bias + rela.offset, hook.address, protected.contains(&(bias + rela.offset)), pass.page)
            } {
                Some(new) => {
                    hooked += 1;
                    patched += u64::from(new);
                }
                None => pass.done.failures += 1,
            }
        }
    }
    (hooked, patched)
}

/// Points the slot at `slot` at `hook`; whether it changed it (None: its
/// page could not be made writable). A slot in a write-protected page
/// (`read_only`, RELRO) is made writable for the store and protected
/// again.
///
/// # Safety
/// `slot` is an aligned, mapped pointer-sized slot of a loaded object.
unsafe fn point(slot: u64, hook: u64, read_only: bool, page: u64) -> Option<bool> {
    // SAFETY: this function's contract; other threads read it as a word.
    let cell = unsafe { &*(slot as *const AtomicU64) };
    if cell.load(Ordering::Relaxed) == hook {
        return Some(false);
    }
    let start = (slot & !(page - 1)) as *mut c_void;
    let page = page as usize;
    if read_only {
        // SAFETY: the page of a loaded object's slot.
        if unsafe { libc::mprotect(start, page, libc::PROT_READ | libc::PROT_WRITE) } != 0 {
            return None;
        }
    }
    cell.store(hook, Ordering::SeqCst);
    if read_only {
        // SAFETY: as above, back to what the loader left.
        unsafe { libc::mprotect(start, page, libc::PROT_READ) };
    }
    Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    static MALLOCS: AtomicUsize = AtomicUsize::new(0);
    /// One test at a time: a pass pins every loaded object, so a pass of one
    /// test keeps another's library from unloading.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    unsafe extern "C" fn counting_malloc(size: usize) -> *mut c_void {
        MALLOCS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: the allocator's malloc.
        unsafe { libc::malloc(size) }
    }

    type Compress2 = unsafe extern "C" fn(*mut u8, *mut libc::c_ulong, *const u8, libc::c_ulong, c_int) -> c_int;

    /// zlib's `compress2`, which mallocs its stream's state and frees it.
    fn compress(library: *mut c_void) {
        // SAFETY: a symbol of the loaded zlib, of this signature.
        let compress2: Compress2 = unsafe { std::mem::transmute(libc::dlsym(library, c"compress2".as_ptr())) };
        let input = [7u8; 4096];
        let mut output = [0u8; 8192];
        let mut length = output.len() as libc::c_ulong;
        // SAFETY: buffers of the lengths given.
        let result = unsafe { compress2(output.as_mut_ptr(), &mut length, input.as_ptr(), 4096, 6) };
        assert_eq!(result, 0, "compress2");
    }

    /// Passes racing a thread that loads and unloads a library (lazily
    /// bound, with RELRO) patch only what is loaded whole: nothing faults,
    /// and the library, when patched, calls the hook.
    #[test]
    fn passes_racing_loads_patch_only_loaded_objects() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        let own = super::super::own_image().expect("the test's own image");
        let hooks =
            [Hook { name: c"malloc", address: counting_malloc as *const () as u64, only_in: Some(b"libbz2.so.1.0") }];
        let library = c"libbz2.so.1.0";
        // SAFETY: loading and unloading a system library nothing else uses.
        let available = unsafe { libc::dlopen(library.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
        if available.is_null() {
            test_skip::skip("libbz2.so.1.0 cannot be loaded", test_skip::InCi::Required);
            return;
        }
        // SAFETY: the handle just opened.
        unsafe { libc::dlclose(available) };
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let loads = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let loader = {
            let (stop, loads) = (std::sync::Arc::clone(&stop), std::sync::Arc::clone(&loads));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    // SAFETY: as above.
                    let handle = unsafe { libc::dlopen(library.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
                    assert!(!handle.is_null(), "libbz2.so.1.0 loaded before");
                    // Held a moment, so that some passes find it loaded.
                    for i in 0..20_000u32 {
                        std::hint::black_box(i);
                    }
                    // SAFETY: the handle just opened.
                    unsafe { libc::dlclose(handle) };
                    loads.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        // Passes until the loader has loaded and unloaded it 200 times.
        let mut passes = 0;
        while loads.load(Ordering::Relaxed) < 200 && !loader.is_finished() {
            passes += usize::from(patch_loaded(&hooks, &own).new_objects > 0);
        }
        stop.store(true, Ordering::Relaxed);
        loader.join().unwrap();
        let loads = loads.load(Ordering::Relaxed);
        println!("{loads} loads, {passes} passes patched it");
    }

    /// A library loaded after a pass is patched by the next; one unloaded
    /// is forgotten (no pass touches it), and loaded again is patched again;
    /// a child forked with patched slots calls through them.
    #[test]
    fn loaded_libraries_are_patched_and_unloaded_ones_forgotten() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        let open = || {
            // SAFETY: loading a system library.
            unsafe { libc::dlopen(c"libz.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) }
        };
        let library = open();
        if library.is_null() {
            test_skip::skip("libz.so.1 cannot be loaded", test_skip::InCi::Required);
            return;
        }
        let own = super::super::own_image().expect("the test's own image");
        let hooks =
            [Hook { name: c"malloc", address: counting_malloc as *const () as u64, only_in: Some(b"libz.so.1") }];
        let first = patch_loaded(&hooks, &own);
        assert_eq!((first.new_objects, first.failures), (1, 0), "{first:?}");
        assert_eq!(patch_loaded(&hooks, &own).new_slots, 0, "a second pass finds nothing new");
        let before = MALLOCS.load(Ordering::SeqCst);
        compress(library);
        assert!(MALLOCS.load(Ordering::SeqCst) > before, "zlib's mallocs reach the hook");
        // SAFETY: fork in a test; the child only compresses and exits.
        match unsafe { libc::fork() } {
            0 => {
                compress(library);
                // SAFETY: ends the child without running the parent's exit handlers.
                unsafe { libc::_exit(0) }
            }
            child => {
                let mut status = 0;
                // SAFETY: waits for the child just forked.
                assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
                assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child status {status}");
            }
        }
        // SAFETY: the handle from dlopen; nothing of zlib is in use.
        assert_eq!(unsafe { libc::dlclose(library) }, 0);
        let unloaded = patch_loaded(&hooks, &own);
        assert_eq!((unloaded.failures, unloaded.new_slots), (0, 0), "{unloaded:?}");
        let again = open();
        let reloaded = patch_loaded(&hooks, &own);
        assert_eq!(reloaded.new_objects, 1, "loaded anew, patched anew: {reloaded:?}");
        let before = MALLOCS.load(Ordering::SeqCst);
        compress(again);
        assert!(MALLOCS.load(Ordering::SeqCst) > before);
        // SAFETY: as above.
        unsafe { libc::dlclose(again) };
    }
}
