//! The writer thread: drains sample buffers into the recording every
//! [`DRAIN_PERIOD`] (so stripe buffers never fill at any sane rate) and
//! finishes chunks that grew past their size limit.

use super::{DumpContext, Recording};
use crate::jni_env::JniEnv;
use crate::log;
use crate::sampling::Sampler;
use crate::vm::Vm;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub const DRAIN_PERIOD: Duration = Duration::from_millis(100);

pub struct Writer {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<JoinHandle<()>>,
}

impl Writer {
    pub fn spawn(vm: &'static Vm, sampler: Arc<Sampler>, recording: Arc<Mutex<Recording>>) -> std::io::Result<Self> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let signal = Arc::clone(&stop);
        let handle = std::thread::Builder::new().name("profiler-writer".into()).spawn(move || {
            let env = vm.attach_daemon(c"Profiler Writer").ok().and_then(|e| {
                // SAFETY: the env of this thread, just attached.
                unsafe { JniEnv::from_raw(e) }
            });
            run(vm, env, &sampler, &recording, &signal);
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

impl Drop for Writer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn run(vm: &Vm, env: Option<JniEnv>, sampler: &Sampler, recording: &Mutex<Recording>, stop: &(Mutex<bool>, Condvar)) {
    let (flag, wake) = stop;
    let mut stopped = flag.lock().unwrap_or_else(|p| p.into_inner());
    while !*stopped {
        stopped = wake.wait_timeout(stopped, DRAIN_PERIOD).unwrap_or_else(|p| p.into_inner()).0;
        if *stopped {
            break;
        }
        drop(stopped);
        if let Some(native) = &sampler.native {
            native.libraries.refresh_if_changed();
        }
        if let Ok(mut recording) = recording.lock() {
            recording.drain(sampler);
            if let (true, Some(env)) = (recording.should_rotate(), env) {
                let ctx = DumpContext { sampler, jvmti: vm.jvmti(), env };
                if let Err(e) = recording.rotate(&ctx, false) {
                    log::warn!("cannot write a recording chunk: {e}");
                }
            }
        }
        stopped = flag.lock().unwrap_or_else(|p| p.into_inner());
    }
}
