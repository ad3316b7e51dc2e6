//! Names the Java threads that were running before the agent started (it
//! was attached at runtime), which no ThreadStart event told us about.
//! Their kernel thread id comes from HotSpot's structures, as described by
//! VMStructs: `Thread.eetop` (the JavaThread*) → `Thread::_osthread` →
//! `OSThread::_thread_id`. Control plane only.

use crate::jni_env::JniEnv;
use crate::sampling::safe_read::ProcessMemory;
use crate::threads;
use crate::vm::Vm;
use hotspot::memory::VmMemory;
use hotspot::tables::VmTables;

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

/// Registers every live Java thread under its Java name and id, keyed by
/// its kernel thread id. Needs the fault handlers installed. Returns how
/// many threads were named.
pub fn name_existing_threads(vm: &Vm, env: JniEnv) -> Result<usize, String> {
    let ids = OsThreadIds::from_tables(vm.vm_tables()?)?;
    let jvmti = vm.jvmti();
    // Threads ending meanwhile wait in ThreadEnd (their JavaThread intact)
    // and are marked ended after being named; those that ended before are
    // skipped.
    let _naming = threads::naming();
    let live = threads::process_threads();
    // Room for a reference to each thread (at most one per kernel thread).
    let capacity = i32::try_from(live.len()).unwrap_or(i32::MAX - 16) + 16;
    env.with_local_frame(capacity, || {
        let all = jvmti.all_threads().map_err(|e| format!("GetAllThreads: {e}"))?;
        let mut named = 0;
        for thread in all {
            env.with_local_frame(16, || {
                let java_thread = env.thread_eetop(thread).filter(|&p| p != 0)?;
                let tid = ids.tid(&ProcessMemory, java_thread as u64).filter(|tid| live.contains(tid))?;
                let name = jvmti.thread_name(thread).ok();
                threads::name_running_thread(tid, name, env.java_thread_id(thread).unwrap_or(0));
                named += 1;
                Some(())
            });
        }
        Ok(named)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotspot::tables::FieldEntry;
    use hotspot::testing::FakeMemory;

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
