//! perf_events `cpu-clock`, one counter per thread: the kernel sends the
//! thread itself a SIGPROF (via F_SETSIG/F_SETOWN_EX on the event's file)
//! each time it has used one sampling period of CPU time.
//!
//! With native stacks on, each counter also records the kernel part of
//! the call chain at every overflow (`PERF_SAMPLE_CALLCHAIN`, user part
//! excluded) into a ring mapped for it, which the handler reads
//! (`sampler::kernel`). That needs the kernel counted (perf_event_paranoid
//! of 1 or less, or CAP_PERFMON / CAP_SYS_ADMIN) and the ring mapped
//! (locked memory: `perf_event_mlock_kb` for unprivileged users); where
//! either is refused, the thread is sampled without kernel frames,
//! counted (`kernel_stack_threads_refused`) and logged once. A ring is
//! unmapped when its thread ends (on that thread: no handler of its can be
//! reading it) or, at the session's end, once no handler can be running
//! ([`release_rings`], after the sampler is retired).

use super::CpuEngine;
use crate::log;
use sampler::counters::{self, Counter};
use sampler::kernel::Ring;
use sampler::origin::{CpuSource, Origins};
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
const FLAG_EXCLUDE_CALLCHAIN_USER: u64 = 1 << 22;
const PERF_SAMPLE_CALLCHAIN: u64 = 1 << 5;
/// Data pages of a thread's ring (a power of two): room for several
/// samples of up to 127 kernel frames, each consumed at its signal.
const RING_DATA_PAGES: usize = 1;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
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

/// A thread's counter: its descriptor and, if it records kernel call
/// chains, its ring.
struct Counted {
    fd: i32,
    ring: Option<Ring>,
}

pub struct PerfEngine {
    period_ns: u64,
    /// Whether kernel-mode time is counted (needs perf_event_paranoid < 2
    /// or privileges); dropped on EACCES.
    include_kernel: bool,
    /// Whether counters record kernel call chains (native stacks on).
    kernel_stacks: bool,
    /// Why kernel frames are missing, once said.
    refusal_logged: bool,
    counters: HashMap<u32, Counted>,
    /// Where each descriptor is registered as ours.
    origins: Arc<Origins>,
}

impl PerfEngine {
    pub fn new(interval: Duration, kernel_stacks: bool, origins: Arc<Origins>) -> Self {
        Self {
            period_ns: interval.as_nanos().max(1) as u64,
            include_kernel: true,
            kernel_stacks,
            refusal_logged: false,
            counters: HashMap::new(),
            origins,
        }
    }

    /// The counter of thread `tid`: with its ring of kernel call chains
    /// where wanted and allowed; where refused, without (and without the
    /// call chains the kernel would collect for nothing), counted.
    fn open(&mut self, tid: u32) -> io::Result<Counted> {
        let result = open_counter(&self.origins, tid, self.period_ns, self.include_kernel, self.kernel_stacks);
        let counted = match result {
            Err(e) if self.include_kernel && e.raw_os_error() == Some(libc::EACCES) => {
                self.include_kernel = false;
                if self.kernel_stacks {
                    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap_or_default();
                    self.refused(&format!(
                        "perf_event_paranoid is {} (kernel frames need 1 or less, or CAP_PERFMON)",
                        paranoid.trim()
                    ));
                }
                open_counter(&self.origins, tid, self.period_ns, false, false)
            }
            Ok(counted) if self.kernel_stacks && self.include_kernel && counted.ring.is_none() => {
                close_counter(&self.origins, counted);
                self.refused(
                    "the kernel refused to map a ring for its call chains (locked memory: perf_event_mlock_kb)",
                );
                open_counter(&self.origins, tid, self.period_ns, true, false)
            }
            Ok(counted) if self.kernel_stacks && !self.include_kernel => {
                self.refused("the kernel is not counted for this process");
                Ok(counted)
            }
            other => other,
        }?;
        Ok(counted)
    }

    /// A thread sampled without kernel frames: counted, and the first
    /// reason logged.
    fn refused(&mut self, why: &str) {
        counters::increment(Counter::KernelStackThreadsRefused);
        if !self.refusal_logged {
            self.refusal_logged = true;
            log::warn!(
                "CPU samples are recorded without kernel frames: {why}; threads counted in kernel_stack_threads_refused"
            );
        }
    }
}

/// Maps the ring of perf event `fd`: its first page and the data pages.
fn map_ring(fd: i32) -> io::Result<Ring> {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let data_size = page * RING_DATA_PAGES;
    // SAFETY: a shared mapping of our own perf descriptor, as perf_event_open(2) describes.
    let base = unsafe {
        libc::mmap(std::ptr::null_mut(), page + data_size, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
    };
    if base == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(Ring { base: base as usize, page, data_size })
}

fn unmap_ring(ring: Ring) {
    // SAFETY: a mapping `map_ring` made, which no handler reads any more
    // (the callers' contract), unmapped once.
    unsafe { libc::munmap(ring.base as *mut libc::c_void, ring.page + ring.data_size) };
}

/// Unmaps the rings of stopped engines. Call only once no handler can be
/// running (`sampler::retire` has returned).
pub fn release_rings() {
    for ring in super::ENGINES.retired_rings.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
        unmap_ring(ring);
    }
}

fn open_counter(
    origins: &Origins,
    tid: u32,
    period_ns: u64,
    include_kernel: bool,
    kernel_stacks: bool,
) -> io::Result<Counted> {
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
    } else if kernel_stacks {
        attr.sample_type = PERF_SAMPLE_CALLCHAIN;
        attr.flags |= FLAG_EXCLUDE_CALLCHAIN_USER;
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
    // Without its ring a counter still signals; it only has no kernel frames.
    let ring = if include_kernel && kernel_stacks { map_ring(fd).ok() } else { None };
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
        if let Some(ring) = ring {
            origins.add_perf_ring(fd, ring);
        }
        // SAFETY: ioctl on our own perf fd.
        if unsafe { libc::ioctl(fd, PERF_EVENT_IOC_ENABLE as _, 0) } != 0 {
            origins.remove_perf_fd(fd);
            return Err(io::Error::last_os_error());
        }
        Ok(())
    };
    if let Err(e) = arm() {
        // A ring published for a moment may be read by a handler still:
        // unmapped with the session's.
        super::ENGINES
            .retired_rings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(close_counter(origins, Counted { fd, ring }));
        return Err(e);
    }
    Ok(Counted { fd, ring })
}

/// Stops a counter: disables it and its signals (a mapped ring keeps the
/// counter alive past `close` until it is unmapped: its signals must stop
/// now, before SIGPROF's handler is restored), forgets its descriptor, so
/// its number cannot be reused while still registered as ours, then closes
/// it; returns its ring.
fn close_counter(origins: &Origins, counted: Counted) -> Option<Ring> {
    // SAFETY: ioctl and fcntl on our own perf fd.
    unsafe {
        libc::ioctl(counted.fd, PERF_EVENT_IOC_DISABLE as _, 0);
        libc::fcntl(counted.fd, libc::F_SETFL, 0);
    }
    origins.remove_perf_fd(counted.fd);
    // SAFETY: closing our own fd (the counter ends with it, or with its
    // ring's mapping).
    unsafe { libc::close(counted.fd) };
    counted.ring
}

impl CpuEngine for PerfEngine {
    fn name(&self) -> &'static str {
        "perf_events cpu-clock"
    }

    fn source(&self) -> CpuSource {
        CpuSource::Perf
    }

    fn add_thread(&mut self, tid: u32) -> io::Result<()> {
        if self.counters.contains_key(&tid) {
            return Ok(());
        }
        let counted = self.open(tid)?;
        self.counters.insert(tid, counted);
        Ok(())
    }

    /// Called on the ending thread itself: no handler of its runs, and
    /// none of another thread reads its ring (they read their own).
    fn remove_thread(&mut self, tid: u32) {
        if let Some(counted) = self.counters.remove(&tid) {
            if let Some(ring) = close_counter(&self.origins, counted) {
                unmap_ring(ring);
            }
        }
    }

    fn set_interval(&mut self, interval: Duration) -> io::Result<()> {
        self.period_ns = interval.as_nanos().max(1) as u64;
        let mut result = Ok(());
        for fd in self.counters.values().map(|c| c.fd) {
            // SAFETY: ioctl on our own perf fd with a pointer to the new period.
            if unsafe { libc::ioctl(fd, PERF_EVENT_IOC_PERIOD as _, &self.period_ns as *const u64) } != 0 {
                result = Err(io::Error::last_os_error());
            }
        }
        result
    }

    fn stop(&mut self) {
        let rings: Vec<Ring> =
            self.counters.drain().filter_map(|(_, counted)| close_counter(&self.origins, counted)).collect();
        super::ENGINES.retired_rings.lock().unwrap_or_else(|p| p.into_inner()).extend(rings);
    }
}
