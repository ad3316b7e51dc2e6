//! The recording's tick on the session's ticker: drains sample buffers
//! into the recording every tick, finishes chunks past their limits, and
//! moves a looping session to its next period's file.

use super::{DumpContext, Recording};
use crate::jvm::jni_env::JniEnv;
use crate::jvm::ticker::Tick;
use crate::jvm::vm::Vm;
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
        let Some(env) = env else { return };
        let ctx = DumpContext { jvmti: self.vm.jvmti(), env };
        if recording.period_due() {
            recording.next_period(&ctx);
        } else if recording.should_rotate() {
            recording.rotate(&ctx, false);
        }
    }
}
