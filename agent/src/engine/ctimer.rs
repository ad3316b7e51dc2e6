//! POSIX CPU timers: one `timer_create` per thread on that thread's CPU
//! clock, delivering SIGPROF to the thread itself (SIGEV_THREAD_ID). The
//! kernel coalesces expirations it could not deliver; `si_overrun` gives
//! their number and becomes the sample's weight.

use super::CpuEngine;
use sampler::clock::{thread_cpu_clock, timespec};
use sampler::origin;
use std::collections::HashMap;
use std::io;
use std::time::Duration;

const SIGEV_THREAD_ID: libc::c_int = 4;

/// Sets `timer` to expire every `interval` of its thread's CPU time.
///
/// # Safety
/// `timer` must be a live timer of this process.
unsafe fn arm(timer: libc::timer_t, interval: Duration) -> io::Result<()> {
    let spec = libc::itimerspec { it_interval: timespec(interval), it_value: timespec(interval) };
    // SAFETY: per the contract, a live timer; a valid itimerspec.
    if unsafe { libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub struct CtimerEngine {
    interval: Duration,
    timers: HashMap<u32, libc::timer_t>,
}

// SAFETY: timer ids are process-wide handles, usable from any thread.
unsafe impl Send for CtimerEngine {}

impl CtimerEngine {
    pub fn new(interval: Duration) -> Self {
        Self { interval, timers: HashMap::new() }
    }
}

impl CpuEngine for CtimerEngine {
    fn name(&self) -> &'static str {
        "ctimer (timer_create on thread CPU clocks)"
    }

    fn source(&self) -> origin::CpuSource {
        origin::CpuSource::Ctimer
    }

    fn add_thread(&mut self, tid: u32) -> io::Result<()> {
        if self.timers.contains_key(&tid) {
            return Ok(());
        }
        // SAFETY: all-zero is a valid sigevent to fill in.
        let mut event: libc::sigevent = unsafe { std::mem::zeroed() };
        event.sigev_notify = SIGEV_THREAD_ID;
        event.sigev_signo = libc::SIGPROF;
        event.sigev_value = libc::sigval { sival_ptr: origin::timer_payload(tid) as usize as *mut libc::c_void };
        event.sigev_notify_thread_id = tid as libc::c_int;
        let mut timer: libc::timer_t = std::ptr::null_mut();
        // SAFETY: valid clock id, event and out pointer.
        if unsafe { libc::timer_create(thread_cpu_clock(tid), &mut event, &mut timer) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: arming the timer we just created.
        if let Err(error) = unsafe { arm(timer, self.interval) } {
            // SAFETY: deleting our own timer.
            unsafe { libc::timer_delete(timer) };
            return Err(error);
        }
        self.timers.insert(tid, timer);
        Ok(())
    }

    fn remove_thread(&mut self, tid: u32) {
        if let Some(timer) = self.timers.remove(&tid) {
            // SAFETY: deleting our own timer.
            unsafe { libc::timer_delete(timer) };
        }
    }

    fn set_interval(&mut self, interval: Duration) -> io::Result<()> {
        self.interval = interval;
        let mut result = Ok(());
        for &timer in self.timers.values() {
            // SAFETY: one of our live timers.
            if let Err(e) = unsafe { arm(timer, interval) } {
                result = Err(e);
            }
        }
        result
    }

    fn stop(&mut self) {
        for (_, timer) in self.timers.drain() {
            // SAFETY: deleting our own timer.
            unsafe { libc::timer_delete(timer) };
        }
    }
}
