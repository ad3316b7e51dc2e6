//! Finding the executable objects of this process: `dl_iterate_phdr` for
//! everything the dynamic loader knows (with load bias, program headers and
//! build-id read from memory), plus file-backed executable mappings from
//! `/proc/self/maps` that the loader does not know about. Control plane.

use buildid::{BuildId, ImageReader};
use std::ffi::{c_int, c_void, CStr};
use std::ops::Range;

const PT_LOAD: u32 = 1;
const PF_X: u32 = 1;

/// An object mapped into the process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadedObject {
    /// File path; for objects without a file (the vDSO), their loader name.
    pub path: String,
    /// Runtime address minus link-time address.
    pub bias: u64,
    /// Executable segments at runtime.
    pub text: Vec<Range<u64>>,
    /// All loaded segments at runtime (for reading an in-memory image).
    pub image: Range<u64>,
    /// Address of the ELF header in memory, when the first segment maps it.
    pub header: Option<u64>,
    pub build_id: Option<BuildId>,
    /// Not backed by a file on disk (the vDSO): symbols come from memory.
    pub in_memory: bool,
}

/// Reads this process's memory with `process_vm_readv`, which reports an
/// unmapped range as an error instead of faulting.
pub struct OwnMemory;

impl ImageReader for OwnMemory {
    fn read(&self, address: u64, out: &mut [u8]) -> bool {
        read_own_memory(address, out)
    }
}

pub fn read_own_memory(address: u64, out: &mut [u8]) -> bool {
    let local = libc::iovec { iov_base: out.as_mut_ptr().cast(), iov_len: out.len() };
    let remote = libc::iovec { iov_base: address as *mut c_void, iov_len: out.len() };
    // SAFETY: valid iovecs; the kernel checks the remote range.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    n == out.len() as isize
}

struct Collector {
    objects: Vec<LoadedObject>,
    adds: u64,
    subs: u64,
}

fn main_executable() -> String {
    std::fs::read_link("/proc/self/exe").map(|p| p.to_string_lossy().into_owned()).unwrap_or_default()
}

unsafe extern "C" fn collect(info: *mut libc::dl_phdr_info, _size: libc::size_t, data: *mut c_void) -> c_int {
    // SAFETY: dl_iterate_phdr passes a valid info and our collector.
    let (info, collector) = unsafe { (&*info, &mut *data.cast::<Collector>()) };
    collector.adds = info.dlpi_adds;
    collector.subs = info.dlpi_subs;
    let name = if info.dlpi_name.is_null() {
        String::new()
    } else {
        // SAFETY: the loader's NUL-terminated name.
        unsafe { CStr::from_ptr(info.dlpi_name) }.to_string_lossy().into_owned()
    };
    let first = collector.objects.is_empty();
    let bias = info.dlpi_addr;
    let mut text = Vec::new();
    let mut image: Option<Range<u64>> = None;
    let mut header = None;
    for i in 0..usize::from(info.dlpi_phnum) {
        // SAFETY: dlpi_phdr points at dlpi_phnum program headers.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        if ph.p_type != PT_LOAD {
            continue;
        }
        let start = bias.wrapping_add(ph.p_vaddr);
        let range = start..start.wrapping_add(ph.p_memsz);
        if ph.p_offset == 0 {
            header = Some(start);
        }
        if ph.p_flags & PF_X != 0 {
            text.push(range.clone());
        }
        image = Some(match image {
            Some(r) => r.start.min(range.start)..r.end.max(range.end),
            None => range,
        });
    }
    let Some(image) = image else { return 0 };
    if text.is_empty() {
        return 0;
    }
    let in_memory = !name.is_empty() && !name.starts_with('/');
    let path = if name.is_empty() && first { main_executable() } else { name };
    let build_id = header.and_then(|h| buildid::from_image(&OwnMemory, h, bias).ok());
    collector.objects.push(LoadedObject { path, bias, text, image, header, build_id, in_memory });
    0
}

/// Every object the dynamic loader has loaded, and its load/unload counters
/// (which change whenever the set changes).
pub fn loaded_objects() -> (Vec<LoadedObject>, (u64, u64)) {
    let mut collector = Collector { objects: Vec::new(), adds: 0, subs: 0 };
    // SAFETY: `collect` matches the callback signature; collector outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(collect), (&mut collector as *mut Collector).cast()) };
    (collector.objects, (collector.adds, collector.subs))
}

/// The loader's load/unload counters alone (cheap change detection).
pub fn load_counters() -> (u64, u64) {
    unsafe extern "C" fn counters(info: *mut libc::dl_phdr_info, _size: libc::size_t, data: *mut c_void) -> c_int {
        // SAFETY: as in `collect`.
        let (info, out) = unsafe { (&*info, &mut *data.cast::<(u64, u64)>()) };
        *out = (info.dlpi_adds, info.dlpi_subs);
        1 // the counters are the same in every entry: stop after the first
    }
    let mut out = (0u64, 0u64);
    // SAFETY: as above.
    unsafe { libc::dl_iterate_phdr(Some(counters), (&mut out as *mut (u64, u64)).cast()) };
    out
}

/// One line of `/proc/self/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub range: Range<u64>,
    pub executable: bool,
    pub offset: u64,
    pub path: String,
}

/// Parses `/proc/<pid>/maps` text; malformed lines are skipped.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (start, end) = fields.next()?.split_once('-')?;
            let perms = fields.next()?;
            let offset = u64::from_str_radix(fields.next()?, 16).ok()?;
            let _device = fields.next()?;
            let _inode = fields.next()?;
            let path = fields.collect::<Vec<_>>().join(" ");
            Some(Mapping {
                range: u64::from_str_radix(start, 16).ok()?..u64::from_str_radix(end, 16).ok()?,
                executable: perms.as_bytes().get(2) == Some(&b'x'),
                offset,
                path,
            })
        })
        .collect()
}

/// File-backed executable mappings not covered by any loaded object (for
/// example a library mapped by hand). Each becomes an object of its own,
/// with the bias derived from the file's program headers.
pub fn unlisted_mappings(known: &[LoadedObject]) -> Vec<LoadedObject> {
    let Ok(text) = std::fs::read_to_string("/proc/self/maps") else { return Vec::new() };
    parse_maps(&text)
        .into_iter()
        .filter(|m| m.executable && m.path.starts_with('/') && !m.path.ends_with(" (deleted)"))
        .filter(|m| !known.iter().any(|o| o.text.iter().any(|t| t.start < m.range.end && m.range.start < t.end)))
        .filter_map(|m| {
            let bias = bias_of_mapping(&m)?;
            Some(LoadedObject {
                path: m.path.clone(),
                bias,
                text: vec![m.range.clone()],
                image: m.range.clone(),
                header: None,
                build_id: None,
                in_memory: false,
            })
        })
        .collect()
}

/// For a mapping of file offset `offset`, the bias from the PT_LOAD
/// segment of the file that starts at that offset.
fn bias_of_mapping(mapping: &Mapping) -> Option<u64> {
    let data = super::file_map::FileMap::open(&mapping.path).ok()?;
    let file = object::read::elf::ElfFile64::<object::Endianness>::parse(data.bytes()).ok()?;
    use object::read::elf::ProgramHeader;
    let endian = file.endian();
    file.elf_program_headers().iter().find_map(|ph| {
        let page = |v: u64| v & !0xfff;
        (ph.p_type(endian) == object::elf::PT_LOAD && page(ph.p_offset(endian)) == mapping.offset)
            .then(|| mapping.range.start.wrapping_sub(page(ph.p_vaddr(endian))))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_maps_lines() {
        let maps = parse_maps(
            "7f00-7f80 r-xp 00002000 08:01 1234 /usr/lib/libz.so.1.2.13\n\
             7f80-7f90 rw-p 00000000 00:00 0 \n\
             garbage line\n\
             ffff-1000 r-xp 00000000 00:00 0 [vdso]\n",
        );
        assert_eq!(maps.len(), 3);
        assert_eq!(
            maps[0],
            Mapping { range: 0x7f00..0x7f80, executable: true, offset: 0x2000, path: "/usr/lib/libz.so.1.2.13".into() }
        );
        assert!(!maps[1].executable);
        assert_eq!(maps[2].path, "[vdso]");
    }

    #[test]
    fn finds_this_process_with_build_ids() {
        let (objects, (adds, _)) = loaded_objects();
        assert!(adds >= objects.len() as u64);
        let libc = objects.iter().find(|o| o.path.contains("libc.so")).expect("libc is loaded");
        assert!(libc.build_id.is_some());
        assert!(!libc.text.is_empty() && libc.header.is_some());
        let from_file = buildid::from_file_bytes(&std::fs::read(&libc.path).unwrap()).unwrap();
        assert_eq!(libc.build_id.as_ref(), Some(&from_file), "memory and file agree");
        assert!(objects.iter().any(|o| o.in_memory), "the vDSO");
        assert_eq!(load_counters().0, adds);
    }
}
