//! `setitimer(ITIMER_PROF)`: one process-wide CPU-time timer; the kernel
//! sends SIGPROF to whichever thread is running when it expires.

use super::CpuEngine;
use sampler::origin;
use std::io;
use std::time::Duration;

pub struct ItimerEngine {
    interval: Duration,
    armed: bool,
}

impl ItimerEngine {
    pub fn new(interval: Duration) -> Self {
        Self { interval, armed: false }
    }

    fn set(&self, interval: Duration) -> io::Result<()> {
        let tv = libc::timeval {
            tv_sec: interval.as_secs() as libc::time_t,
            tv_usec: interval.subsec_micros() as libc::suseconds_t,
        };
        let value = libc::itimerval { it_interval: tv, it_value: tv };
        // SAFETY: valid itimerval; no old value requested.
        if unsafe { libc::setitimer(libc::ITIMER_PROF, &value, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl CpuEngine for ItimerEngine {
    fn name(&self) -> &'static str {
        "itimer (setitimer ITIMER_PROF)"
    }

    fn source(&self) -> origin::CpuSource {
        origin::CpuSource::Itimer
    }

    fn add_thread(&mut self, _tid: u32) -> io::Result<()> {
        if !self.armed {
            self.set(self.interval.max(Duration::from_micros(1)))?;
            self.armed = true;
        }
        Ok(())
    }

    fn remove_thread(&mut self, _tid: u32) {}

    fn set_interval(&mut self, interval: Duration) -> io::Result<()> {
        self.interval = interval;
        if self.armed {
            self.set(interval.max(Duration::from_micros(1)))?;
        }
        Ok(())
    }

    fn stop(&mut self) {
        if self.armed {
            let _ = self.set(Duration::ZERO);
            self.armed = false;
        }
    }
}
