//! Sampling engines: what makes the profiling signals arrive. CPU engines
//! (SIGPROF; one active at a time) cover every thread of the process
//! present at start and every thread the JVM reports starting afterwards;
//! the wall-clock engine ([`wall`], SIGVTALRM) picks threads itself;
//! allocation and monitor sampling ([`jvmti_events`]) have JVMTI call back
//! instead of a signal, and `java.util.concurrent` lock waits ([`park`])
//! come from a hook in place of `Unsafe.park`.
//! Control plane only.

mod ctimer;
mod itimer;
pub mod jvmti_events;
pub mod nativemem;
pub mod park;
mod perf;
pub mod wall;

use crate::log;
use sampler::chain::PREVIOUS;
use sampler::handler::on_sigprof;
use sampler::kernel::Ring;
use sampler::origin::{CpuSource, Origins};
use sampler::signals;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A source of SIGPROF signals.
pub trait CpuEngine: Send {
    fn name(&self) -> &'static str;
    /// How the handler recognises this engine's signals.
    fn source(&self) -> CpuSource;
    /// Starts sampling `tid` (idempotent).
    fn add_thread(&mut self, tid: u32) -> io::Result<()>;
    fn remove_thread(&mut self, tid: u32);
    /// Samples every `interval` from now on, on every thread (the
    /// overhead governor's stretch).
    fn set_interval(&mut self, interval: Duration) -> io::Result<()>;
    /// Disarms everything.
    fn stop(&mut self);
}

/// The CPU sampling engine (`event=cpu`, `event=ctimer`, `event=itimer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuEngineKind {
    /// perf_events `cpu-clock` per thread, falling back to `ctimer`, then `itimer`.
    PerfCpuClock,
    /// `timer_create` on each thread's CPU clock, falling back to `itimer`.
    Ctimer,
    /// `setitimer(ITIMER_PROF)`: process-wide CPU time.
    Itimer,
}

/// The armed engine and the session origins it registers its signals in.
struct Armed {
    engine: Box<dyn CpuEngine>,
    origins: Arc<Origins>,
}

/// The engines armed now, and what stopped ones leave behind. A static,
/// not the session's value: `disarm` stops them on any path out of a
/// start, even one that failed before the session existed, and the
/// governor stretches their intervals.
struct Engines {
    /// The CPU engine while armed.
    cpu: Mutex<Option<Armed>>,
    /// The wall-clock engine while armed.
    wall: Mutex<Option<wall::Running>>,
    /// Rings of a stopped perf engine, unmapped by `perf::release_rings`
    /// once no handler can be reading them (after the session's sampler
    /// is retired: they outlive the engine).
    retired_rings: Mutex<Vec<Ring>>,
}

static ENGINES: Engines =
    Engines { cpu: Mutex::new(None), wall: Mutex::new(None), retired_rings: Mutex::new(Vec::new()) };

fn candidates(
    kind: CpuEngineKind,
    interval: Duration,
    kernel_stacks: bool,
    origins: &Arc<Origins>,
) -> Vec<Box<dyn CpuEngine>> {
    let perf = || Box::new(perf::PerfEngine::new(interval, kernel_stacks, Arc::clone(origins))) as Box<dyn CpuEngine>;
    let ctimer = || Box::new(ctimer::CtimerEngine::new(interval)) as Box<dyn CpuEngine>;
    let itimer = || Box::new(itimer::ItimerEngine::new(interval)) as Box<dyn CpuEngine>;
    match kind {
        CpuEngineKind::PerfCpuClock => vec![perf(), ctimer(), itimer()],
        CpuEngineKind::Ctimer => vec![ctimer(), itimer()],
        CpuEngineKind::Itimer => vec![itimer()],
    }
}

/// Installs the SIGPROF handler and arms the first engine of `kind`'s
/// fallback chain that works, for every thread in `threads()`, registering
/// its signals in `origins` (the published session's), with kernel call
/// chains where the engine records them and `kernel_stacks` asks. Returns
/// the engine's name; each fallback's reason is logged.
pub fn start(
    kind: CpuEngineKind,
    interval: Duration,
    kernel_stacks: bool,
    threads: impl Fn() -> Vec<u32>,
    origins: Arc<Origins>,
) -> Result<&'static str, String> {
    let mut active = ENGINES.cpu.lock().map_err(|_| "engine state poisoned".to_owned())?;
    if active.is_some() {
        return Err("a CPU engine is already running".to_owned());
    }
    signals::install(libc::SIGPROF, on_sigprof, &PREVIOUS.sigprof)
        .map_err(|e| format!("cannot install SIGPROF handler: {e}"))?;
    let mut reasons = Vec::new();
    for mut engine in candidates(kind, interval, kernel_stacks, &origins) {
        origins.set_cpu_source(engine.source());
        // Listing under the lock: a thread starting now either is listed or
        // waits for the lock in `thread_started` and is added then.
        let tids = threads();
        let failures: Vec<io::Error> = tids.iter().filter_map(|&tid| engine.add_thread(tid).err()).collect();
        if failures.len() < tids.len() {
            if let Some(e) = failures.first() {
                // Threads listed a moment ago may have exited since.
                log::debug!("{}: {} of {} threads not armed ({e})", engine.name(), failures.len(), tids.len());
            }
            if !reasons.is_empty() {
                log::warn!("CPU engine fell back to {}: {}", engine.name(), reasons.join("; "));
            }
            let name = engine.name();
            *active = Some(Armed { engine, origins });
            return Ok(name);
        }
        engine.stop();
        let reason = failures.first().map(ToString::to_string).unwrap_or_else(|| "no threads to sample".to_owned());
        reasons.push(format!("{} unavailable: {reason}", engine.name()));
    }
    origins.set_cpu_source(CpuSource::Off);
    let _ = signals::restore(libc::SIGPROF, on_sigprof, &PREVIOUS.sigprof, signals::Pending::Discard);
    Err(format!("no CPU engine could be started: {}", reasons.join("; ")))
}

/// Disarms the engine and restores the previous SIGPROF handler.
pub fn stop() {
    let Ok(mut active) = ENGINES.cpu.lock() else {
        return;
    };
    if let Some(Armed { mut engine, origins }) = active.take() {
        engine.stop();
        origins.set_cpu_source(CpuSource::Off);
        if let Err(e) = signals::restore(libc::SIGPROF, on_sigprof, &PREVIOUS.sigprof, signals::Pending::Discard) {
            log::warn!("cannot restore the SIGPROF handler: {e}");
        }
    }
}

/// Unmaps what stopped engines left for handlers to read (perf's rings of
/// kernel call chains). Call once no handler can be running
/// (`sampler::retire` has returned).
pub fn release() {
    perf::release_rings();
}

/// Changes the armed CPU engine's interval (no engine: nothing to do).
pub fn set_interval(interval: Duration) -> io::Result<()> {
    let mut active = ENGINES.cpu.lock().map_err(|_| io::Error::other("engine state poisoned"))?;
    active.as_mut().map_or(Ok(()), |armed| armed.engine.set_interval(interval))
}

/// A thread started (JVMTI ThreadStart, on that thread).
pub fn thread_started(tid: u32) {
    if let Ok(mut active) = ENGINES.cpu.lock() {
        if let Some(Armed { engine, .. }) = active.as_mut() {
            if let Err(e) = engine.add_thread(tid) {
                log::debug!("cannot sample thread {tid}: {e}");
            }
        }
    }
}

/// A thread is ending (JVMTI ThreadEnd, on that thread).
pub fn thread_ended(tid: u32) {
    if let Ok(mut active) = ENGINES.cpu.lock() {
        if let Some(Armed { engine, .. }) = active.as_mut() {
            engine.remove_thread(tid);
        }
    }
}
