//! The session's periodic thread: every [`PERIOD`] it runs the session's
//! ticks (the library table's refresh, the recording's writer) in order,
//! until stopped. Attached to the JVM as a daemon, for the ticks that call
//! JVMTI. One thread for all ticks: a thread per tick would be one more
//! thread for wall-clock sampling to visit and recordings to show.

use crate::jvm::jni_env::JniEnv;
use crate::jvm::vm::Vm;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Short enough that stripe buffers never fill at any sane sampling rate
/// and a library loaded meanwhile is named within it.
pub const PERIOD: Duration = Duration::from_millis(100);

/// One duty the ticker runs every period.
pub trait Tick: Send {
    /// `env` is the ticker thread's JNIEnv, `None` if it could not attach.
    fn tick(&mut self, env: Option<JniEnv>);
}

pub struct Ticker {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<JoinHandle<()>>,
}

impl Ticker {
    pub fn spawn(vm: &'static Vm, mut ticks: Vec<Box<dyn Tick>>) -> std::io::Result<Self> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let signal = Arc::clone(&stop);
        let handle = std::thread::Builder::new().name("profiler-writer".into()).spawn(move || {
            let env = vm.attach_daemon(c"Profiler Writer").ok().and_then(|e| {
                // SAFETY: the env of this thread, just attached.
                unsafe { JniEnv::from_raw(e) }
            });
            run(env, &mut ticks, &signal);
            if env.is_some() {
                vm.detach_current();
            }
        })?;
        Ok(Self { stop, handle: Some(handle) })
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let (flag, wake) = &*self.stop;
        *flag.lock().unwrap_or_else(|p| p.into_inner()) = true;
        wake.notify_all();
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn run(env: Option<JniEnv>, ticks: &mut [Box<dyn Tick>], stop: &(Mutex<bool>, Condvar)) {
    let (flag, wake) = stop;
    let mut stopped = flag.lock().unwrap_or_else(|p| p.into_inner());
    while !*stopped {
        stopped = wake.wait_timeout(stopped, PERIOD).unwrap_or_else(|p| p.into_inner()).0;
        if *stopped {
            break;
        }
        drop(stopped);
        for tick in ticks.iter_mut() {
            tick.tick(env);
        }
        stopped = flag.lock().unwrap_or_else(|p| p.into_inner());
    }
}
