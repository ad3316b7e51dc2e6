//! perf_events `cpu-clock`, one counter per thread: the kernel sends the
//! thread itself a SIGPROF (via F_SETSIG/F_SETOWN_EX on the event's file)
//! each time it has used one sampling period of CPU time.

use super::CpuEngine;
use crate::sampling::origin::{CpuSource, Origins};
use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::time::Duration;

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
const PERF_ATTR_SIZE_VER5: u32 = 112;
const FLAG_DISABLED: u64 = 1 << 0;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
/// `_IOW('$', 4, __u64)`: a new sample period for a running counter.
const PERF_EVENT_IOC_PERIOD: libc::c_ulong = 0x4008_2404;
/// fcntl commands and `struct f_owner_ex` from <fcntl.h> (Linux).
const F_SETSIG: libc::c_int = 10;
const F_SETOWN_EX: libc::c_int = 15;
const F_OWNER_TID: libc::c_int = 0;

#[repr(C)]
struct FOwnerEx {
    kind: libc::c_int,
    pid: libc::pid_t,
}

/// `struct perf_event_attr` up to `PERF_ATTR_SIZE_VER5`.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved: u16,
}

pub struct PerfEngine {
    period_ns: u64,
    /// Whether kernel-mode time is counted (needs perf_event_paranoid < 2
    /// or privileges); dropped on EACCES.
    include_kernel: bool,
    fds: HashMap<u32, i32>,
    /// Where each descriptor is registered as ours.
    origins: Arc<Origins>,
}

impl PerfEngine {
    pub fn new(interval: Duration, origins: Arc<Origins>) -> Self {
        Self { period_ns: interval.as_nanos().max(1) as u64, include_kernel: true, fds: HashMap::new(), origins }
    }

    fn open(&mut self, tid: u32) -> io::Result<i32> {
        let result = open_counter(&self.origins, tid, self.period_ns, self.include_kernel);
        match result {
            Err(e) if self.include_kernel && e.raw_os_error() == Some(libc::EACCES) => {
                self.include_kernel = false;
                open_counter(&self.origins, tid, self.period_ns, false)
            }
            other => other,
        }
    }
}

fn open_counter(origins: &Origins, tid: u32, period_ns: u64, include_kernel: bool) -> io::Result<i32> {
    let mut attr = PerfEventAttr {
        kind: PERF_TYPE_SOFTWARE,
        size: PERF_ATTR_SIZE_VER5,
        config: PERF_COUNT_SW_CPU_CLOCK,
        sample_period: period_ns,
        flags: FLAG_DISABLED,
        wakeup_events: 1,
        ..Default::default()
    };
    if !include_kernel {
        attr.flags |= FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV;
    }
    // SAFETY: valid attr pointer; pid = tid, any cpu, no group.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            tid as libc::pid_t,
            -1,
            -1,
            PERF_FLAG_FD_CLOEXEC,
        )
    } as i32;
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let arm = || -> io::Result<()> {
        let owner = FOwnerEx { kind: F_OWNER_TID, pid: tid as libc::pid_t };
        // SAFETY: fcntl on our own fd with valid arguments.
        unsafe {
            if libc::fcntl(fd, libc::F_SETFL, libc::O_ASYNC) != 0
                || libc::fcntl(fd, F_SETSIG, libc::SIGPROF) != 0
                || libc::fcntl(fd, F_SETOWN_EX, &owner as *const FOwnerEx) != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        if !origins.add_perf_fd(fd, tid) {
            return Err(io::Error::other("file descriptor number too large"));
        }
        // SAFETY: ioctl on our own perf fd.
        if unsafe { libc::ioctl(fd, PERF_EVENT_IOC_ENABLE as _, 0) } != 0 {
            origins.remove_perf_fd(fd);
            return Err(io::Error::last_os_error());
        }
        Ok(())
    };
    if let Err(e) = arm() {
        // SAFETY: closing our own fd.
        unsafe { libc::close(fd) };
        return Err(e);
    }
    Ok(fd)
}

fn close_counter(origins: &Origins, fd: i32) {
    // Forget the fd before closing it, so its number cannot be reused while
    // still registered as ours.
    origins.remove_perf_fd(fd);
    // SAFETY: closing our own fd stops the counter and its signals.
    unsafe { libc::close(fd) };
}

impl CpuEngine for PerfEngine {
    fn name(&self) -> &'static str {
        "perf_events cpu-clock"
    }

    fn source(&self) -> CpuSource {
        CpuSource::Perf
    }

    fn add_thread(&mut self, tid: u32) -> io::Result<()> {
        if self.fds.contains_key(&tid) {
            return Ok(());
        }
        let fd = self.open(tid)?;
        self.fds.insert(tid, fd);
        Ok(())
    }

    fn remove_thread(&mut self, tid: u32) {
        if let Some(fd) = self.fds.remove(&tid) {
            close_counter(&self.origins, fd);
        }
    }

    fn set_interval(&mut self, interval: Duration) -> io::Result<()> {
        self.period_ns = interval.as_nanos().max(1) as u64;
        let mut result = Ok(());
        for &fd in self.fds.values() {
            // SAFETY: ioctl on our own perf fd with a pointer to the new period.
            if unsafe { libc::ioctl(fd, PERF_EVENT_IOC_PERIOD as _, &self.period_ns as *const u64) } != 0 {
                result = Err(io::Error::last_os_error());
            }
        }
        result
    }

    fn stop(&mut self) {
        for (_, fd) in self.fds.drain() {
            close_counter(&self.origins, fd);
        }
    }
}
