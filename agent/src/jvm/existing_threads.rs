//! Names the Java threads that were running before the agent started (it
//! was attached at runtime), which no ThreadStart event told us about.
//! Their kernel thread id comes from HotSpot's structures: `Thread.eetop`
//! (the JavaThread*), then [`OsThreadIds`]. Control plane only.

use crate::jvm::jni_env::JniEnv;
use crate::jvm::threads;
use crate::jvm::vm::Vm;
use hotspot::os_thread::OsThreadIds;
use sampler::safe_read::ProcessMemory;

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
