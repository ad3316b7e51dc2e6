//! Where a JavaThread keeps its kernel thread id, as described by
//! VMStructs: `JavaThread*` → `Thread::_osthread` → `OSThread::_thread_id`.

use crate::memory::VmMemory;
use crate::tables::VmTables;

/// Where a JavaThread keeps its kernel thread id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OsThreadIds {
    /// `Thread::_osthread`, the OSThread* in a JavaThread.
    osthread: u64,
    /// `OSThread::_thread_id`, a pid_t.
    thread_id: u64,
}

impl OsThreadIds {
    pub fn from_tables(tables: &VmTables) -> Result<Self, String> {
        let offset = |type_names: &[&str], field: &str| {
            type_names
                .iter()
                .find_map(|t| tables.field(t, field).filter(|f| !f.is_static))
                .map(|f| f.value)
                .ok_or_else(|| format!("VMStructs has no {}::{field}", type_names[0]))
        };
        Ok(Self {
            osthread: offset(&["Thread", "JavaThread"], "_osthread")?,
            thread_id: offset(&["OSThread"], "_thread_id")?,
        })
    }

    /// The kernel thread id of the thread whose JavaThread* is `java_thread`.
    /// Reads are fault-safe: a thread may end (and its JavaThread be freed)
    /// while we look.
    pub fn tid<M: VmMemory + ?Sized>(&self, memory: &M, java_thread: u64) -> Option<u32> {
        let osthread = memory.u64(java_thread.checked_add(self.osthread)?).filter(|&p| p != 0)?;
        memory.u32(osthread.checked_add(self.thread_id)?).filter(|&tid| tid != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::FieldEntry;
    use crate::testing::FakeMemory;

    fn tables(fields: &[(&str, u64)]) -> VmTables {
        let mut tables = VmTables::default();
        for &(name, offset) in fields {
            let entry = FieldEntry { type_string: String::new(), is_static: false, value: offset };
            tables.fields.insert(name.to_owned(), entry);
        }
        tables
    }

    #[test]
    fn the_kernel_thread_id_is_read_through_the_osthread() {
        let ids =
            OsThreadIds::from_tables(&tables(&[("Thread::_osthread", 0x1d0), ("OSThread::_thread_id", 0x48)])).unwrap();
        let mut memory = FakeMemory::default();
        let (java_thread, osthread) = (0x7000_0000u64, 0x7100_0000u64);
        memory.put_u64(java_thread + 0x1d0, osthread);
        memory.put_u32(osthread + 0x48, 4242);
        assert_eq!(ids.tid(&memory, java_thread), Some(4242));
        // A thread torn down under us: no OSThread, or nothing readable.
        memory.put_u64(java_thread + 0x1d0, 0);
        assert_eq!(ids.tid(&memory, java_thread), None);
        assert_eq!(ids.tid(&memory, 0x7200_0000), None);
    }

    #[test]
    fn missing_fields_are_named() {
        let error = OsThreadIds::from_tables(&tables(&[("Thread::_osthread", 0x1d0)])).unwrap_err();
        assert_eq!(error, "VMStructs has no OSThread::_thread_id");
        let declared_on_java_thread = tables(&[("JavaThread::_osthread", 0x10), ("OSThread::_thread_id", 0x8)]);
        let ids = OsThreadIds::from_tables(&declared_on_java_thread);
        assert_eq!(ids, Ok(OsThreadIds { osthread: 0x10, thread_id: 0x8 }));
    }
}
