//! A library's separate debug file, found where GDB looks for it: by
//! build-id (`/usr/lib/debug/.build-id/ab/cdef….debug`), else by the
//! name its `.gnu_debuglink` gives, next to the library, in its `.debug/`
//! and under `/usr/lib/debug/<its directory>/`. Distributions strip their
//! libraries' local symbols into such files (Debian's `libc6-dbg`: libc's
//! `__futex_abstimed_wait_common`, `msort_with_tmp`, `clone3` are there
//! only), so naming native frames locally reads their symbol tables too.
//! A candidate whose build-id differs from the library's is not its debug
//! file and is skipped. Control plane only.

use super::file_map::FileMap;
use buildid::BuildId;
use object::{Object, ObjectSection};

/// Where system debug files live.
const DEBUG_ROOT: &str = "/usr/lib/debug";

/// The paths a debug file of `build_id` is looked for under, by build-id.
fn by_build_id(build_id: &BuildId) -> Option<String> {
    let hex = build_id.to_hex();
    let (head, tail) = (hex.get(..2)?, hex.get(2..).filter(|t| !t.is_empty())?);
    Some(format!("{DEBUG_ROOT}/.build-id/{head}/{tail}.debug"))
}

/// The paths the `.gnu_debuglink` of the library at `path` (contents
/// `data`) names, in GDB's order.
fn by_debuglink(path: &str, data: &[u8]) -> Vec<String> {
    let Ok(file) = object::File::parse(data) else { return Vec::new() };
    let Some(link) = file.section_by_name(".gnu_debuglink").and_then(|s| s.data().ok()) else { return Vec::new() };
    let name = link.iter().position(|&b| b == 0).and_then(|end| std::str::from_utf8(&link[..end]).ok());
    let (Some(name), Some((dir, _))) = (name.filter(|n| !n.is_empty() && !n.contains('/')), path.rsplit_once('/'))
    else {
        return Vec::new();
    };
    vec![format!("{dir}/{name}"), format!("{dir}/.debug/{name}"), format!("{DEBUG_ROOT}{dir}/{name}")]
}

/// The separate debug file of the library at `path` (contents `data`,
/// build-id `build_id`), mapped, if one is installed.
pub fn find(path: &str, data: &[u8], build_id: Option<&BuildId>) -> Option<FileMap> {
    let candidates = build_id.and_then(by_build_id).into_iter().chain(by_debuglink(path, data));
    candidates.filter(|candidate| candidate != path).find_map(|candidate| {
        let map = FileMap::open(&candidate).ok()?;
        let theirs = buildid::from_file_bytes(map.bytes()).ok();
        match (build_id, theirs) {
            (Some(ours), Some(theirs)) if *ours != theirs => None,
            _ => Some(map),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_files_are_looked_for_where_gdb_looks() {
        let id = BuildId::from_bytes(&[0xab, 0xcd, 0xef, 0x01]);
        assert_eq!(by_build_id(&id).as_deref(), Some("/usr/lib/debug/.build-id/ab/cdef01.debug"));
        assert_eq!(by_build_id(&BuildId::from_bytes(&[0xab])), None, "too short to split");
        assert!(by_debuglink("/usr/lib/libx.so", b"not an ELF file").is_empty());
    }

    /// Debian's libc keeps its local functions in libc6-dbg's debug file:
    /// found by build-id and read, when installed.
    #[test]
    fn the_system_libc_debug_file_is_found_by_build_id_when_installed() {
        let libc = "/lib/x86_64-linux-gnu/libc.so.6";
        let Ok(map) = FileMap::open(libc) else {
            test_skip::skip(&format!("{libc} is not this machine's libc"), test_skip::InCi::Optional);
            return;
        };
        let id = buildid::from_file_bytes(map.bytes()).ok();
        match find(libc, map.bytes(), id.as_ref()) {
            Some(debug) => {
                let ours = buildid::from_file_bytes(debug.bytes()).ok();
                assert_eq!(ours, id, "the debug file of that very build");
            }
            None => {
                test_skip::skip("libc's debug file is not installed (Debian: libc6-dbg)", test_skip::InCi::Required)
            }
        }
    }
}
