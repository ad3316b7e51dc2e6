//! The threads samples come from: a small stable key per thread (the JFR
//! thread pool id) and the names written for it; a key never changes
//! names (a thread the JVM names after it was seen gets a new one).
//! Control plane only.

use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadInfo {
    pub tid: u32,
    pub os_name: String,
    pub java_name: Option<String>,
    /// `Thread.getId()`, or 0 for threads the JVM did not report.
    pub java_id: i64,
    ended: bool,
}

#[derive(Default)]
struct Registry {
    by_key: HashMap<u64, ThreadInfo>,
    by_tid: HashMap<u32, u64>,
    next_key: u64,
}

impl Registry {
    fn insert(&mut self, info: ThreadInfo) -> u64 {
        self.next_key += 1;
        let key = self.next_key;
        self.by_tid.insert(info.tid, key);
        self.by_key.insert(key, info);
        key
    }
}

/// The threads of the process as recordings name them. Process-wide: a
/// thread's key names it the same way in every session's chunks, and
/// threads start and end between sessions too.
struct Threads {
    registry: Mutex<Option<Registry>>,
    /// Held while threads that were already running are named, and by a
    /// thread ending: a thread cannot end unseen while it is being named.
    naming: Mutex<()>,
}

static THREADS: Threads = Threads { registry: Mutex::new(None), naming: Mutex::new(()) };

fn with_registry<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    let mut guard = THREADS.registry.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    f(guard.get_or_insert_with(Registry::default))
}

/// The kernel's name for a thread of this process (`comm`, 15 bytes).
pub fn os_thread_name(tid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).ok().map(|s| s.trim_end().to_owned())
}

/// Every thread of the process.
pub fn process_threads() -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect()
}

/// A Java thread started (or was found running) on `tid`: names the live
/// entry of `tid` if there is one (it may have been registered from `/proc`
/// before the JVM told us), else registers it.
pub fn java_thread_started(tid: u32, java_name: Option<String>, java_id: i64) {
    let os_name = os_thread_name(tid).unwrap_or_default();
    with_registry(|r| {
        let live = r.by_tid.get(&tid).and_then(|key| r.by_key.get_mut(key)).filter(|info| !info.ended);
        if let Some(info) = live {
            if info.java_name == java_name && info.java_id == java_id {
                return;
            }
            // Named now, seen before: a new key, so that a key names one
            // thread one way in every chunk (readers carry resolved threads
            // from chunk to chunk). The old entry serves samples already
            // taken until it is purged.
            info.ended = true;
        }
        r.insert(ThreadInfo { tid, os_name, java_name, java_id, ended: false });
    });
}

/// Holds off threads ending while the caller names running threads with
/// [`name_running_thread`].
pub fn naming() -> std::sync::MutexGuard<'static, ()> {
    THREADS.naming.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Names a thread found running (not reported by ThreadStart), unless it
/// has ended already. Call with [`naming`] held.
pub fn name_running_thread(tid: u32, java_name: Option<String>, java_id: i64) {
    let ended = with_registry(|r| r.by_tid.get(&tid).and_then(|key| r.by_key.get(key)).is_some_and(|i| i.ended));
    if !ended {
        java_thread_started(tid, java_name, java_id);
    }
}

/// The thread on `tid` is ending. Its entry (made now if it had none, so
/// that naming running threads skips it) stays until [`purge_ended`], so
/// samples it took before ending still resolve.
pub fn thread_ended(tid: u32) {
    let _naming = naming();
    let mark_ended =
        |r: &mut Registry| r.by_tid.get(&tid).and_then(|key| r.by_key.get_mut(key)).map(|info| info.ended = true);
    if with_registry(mark_ended).is_some() {
        return;
    }
    // Unknown so far: its kernel name, read outside the registry's lock.
    let os_name = os_thread_name(tid).unwrap_or_default();
    with_registry(|r| {
        if mark_ended(r).is_none() {
            r.insert(ThreadInfo { tid, os_name, java_name: None, java_id: 0, ended: true });
        }
    });
}

/// The key of the thread on `tid`, registering it from `/proc` if the JVM
/// never reported it (a native or JVM-internal thread).
pub fn key_for(tid: u32) -> u64 {
    with_registry(|r| {
        if let Some(&key) = r.by_tid.get(&tid) {
            return key;
        }
        let os_name = os_thread_name(tid).unwrap_or_else(|| format!("[tid {tid}]"));
        r.insert(ThreadInfo { tid, os_name, java_name: None, java_id: 0, ended: false })
    })
}

pub fn info(key: u64) -> Option<ThreadInfo> {
    with_registry(|r| r.by_key.get(&key).cloned())
}

/// Forgets threads that have ended. Call only after their samples were
/// drained (a chunk was finished).
pub fn purge_ended() {
    with_registry(|r| {
        let ended: Vec<u64> = r.by_key.iter().filter(|(_, i)| i.ended).map(|(&k, _)| k).collect();
        for key in ended {
            if let Some(info) = r.by_key.remove(&key) {
                if r.by_tid.get(&info.tid) == Some(&key) {
                    r.by_tid.remove(&info.tid);
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_until_a_tid_is_reused_and_ended_threads_are_purged() {
        let tid = 4_000_001; // not a live thread
        java_thread_started(tid, Some("worker".into()), 12);
        let key = key_for(tid);
        assert_eq!(key_for(tid), key);
        assert_eq!(info(key).unwrap().java_name.as_deref(), Some("worker"));
        thread_ended(tid);
        assert_eq!(key_for(tid), key, "samples drained after the end still resolve");
        purge_ended();
        assert!(info(key).is_none());
        let fresh = key_for(tid);
        assert_ne!(fresh, key);
        assert_eq!(info(fresh).unwrap().os_name, format!("[tid {tid}]"));
        java_thread_started(tid, Some("adopted".into()), 40);
        let named = key_for(tid);
        assert_ne!(named, fresh, "a thread named after it was seen gets a new key");
        assert_eq!(info(named).unwrap().java_name.as_deref(), Some("adopted"));
        assert_eq!(info(fresh).unwrap().java_name, None, "the old key keeps what it meant");
        java_thread_started(tid, Some("adopted".into()), 40);
        assert_eq!(key_for(tid), named, "the same names keep the key");
        purge_ended();
        assert!(info(fresh).is_none());
        assert_eq!(key_for(tid), named);
    }

    #[test]
    fn a_thread_that_ended_is_not_named_as_running() {
        let tid = 4_000_002; // not a live thread
        thread_ended(tid);
        {
            let _naming = naming();
            name_running_thread(tid, Some("gone".into()), 7);
        }
        assert_eq!(info(key_for(tid)).unwrap().java_name, None);
        purge_ended();
        let _naming = naming();
        name_running_thread(tid, Some("running".into()), 8);
        assert_eq!(info(key_for(tid)).unwrap().java_name.as_deref(), Some("running"));
    }

    #[test]
    fn process_threads_include_the_caller() {
        let me = sampler::os_thread::current_tid();
        assert!(process_threads().contains(&me));
        assert!(os_thread_name(me).is_some());
    }
}
