//! The recording's tick on the session's ticker: drains sample buffers
//! into the recording every period and finishes chunks that grew past
//! their size limit.

use super::{DumpContext, Recording};
use crate::jni_env::JniEnv;
use crate::ticker::Tick;
use crate::vm::Vm;
use std::sync::{Arc, Mutex};

pub struct Writer {
    vm: &'static Vm,
    recording: Arc<Mutex<Recording>>,
}

impl Writer {
    pub fn new(vm: &'static Vm, recording: Arc<Mutex<Recording>>) -> Self {
        Self { vm, recording }
    }
}

impl Tick for Writer {
    fn tick(&mut self, env: Option<JniEnv>) {
        let Ok(mut recording) = self.recording.lock() else { return };
        recording.drain();
        if let (true, Some(env)) = (recording.should_rotate(), env) {
            let ctx = DumpContext { jvmti: self.vm.jvmti(), env };
            recording.rotate(&ctx, false);
        }
    }
}
