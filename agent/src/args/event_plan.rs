//! Which events a session runs, decided once from its options: the
//! engines to arm with their settings, the event types its chunks
//! declare, the settings recorded for them, whether JVMTI's callbacks
//! sample and whether the overhead governor runs. `session::start`
//! follows the plan instead of testing options per event.

use crate::args::{CpuEngineKind, Options};
use crate::callbacks::jvmti_samples::LockSampling;
use jfr_writer::schema::id;
use std::time::Duration;

/// A session's events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventPlan {
    /// CPU samples (`event=cpu`, `interval=`): the engine and its interval.
    pub cpu: Option<(CpuEngineKind, Duration)>,
    pub wall: Option<Wall>,
    pub alloc: Option<Alloc>,
    pub lock: Option<Lock>,
    pub nativemem: Option<NativeMem>,
    /// The overhead governor's bound in percent (`overhead=`), when it
    /// runs: a signal engine is asked for and the bound is not 0.
    pub governor: Option<u32>,
}

/// Wall-clock samples (`wall=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wall {
    pub interval: Duration,
    /// Threads signalled per tick (`walltpt=`).
    pub threads_per_tick: u32,
    /// Idle threads' samples folded into batches (`wallbatch=`).
    pub fold_idle: bool,
}

/// Sampled heap allocations (`alloc=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Alloc {
    /// Mean bytes between samples.
    pub interval: u32,
    /// Sampled objects still alive are tracked (`live`).
    pub live: bool,
}

/// Lock waits (`lock=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lock {
    pub sampling: LockSampling,
    /// `lockvirtual=`, if given (else the JDK's default).
    pub virtual_threads: Option<bool>,
}

/// Sampled native allocations (`nativemem=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NativeMem {
    /// Mean bytes between samples.
    pub interval: u32,
    /// The sampled allocations' frees are recorded (not `nofree`).
    pub frees: bool,
}

impl EventPlan {
    /// The plan of `options`, or an error if they select no event.
    pub fn of(options: &Options) -> Result<EventPlan, String> {
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let plan = EventPlan {
            cpu: options.cpu,
            wall: options.wall.map(|interval| Wall {
                interval,
                threads_per_tick: options.wall_threads_per_tick,
                fold_idle: options.wall_batch,
            }),
            alloc: options.alloc.map(|interval| Alloc { interval, live: options.live }),
            lock: options.lock.map(|interval| Lock {
                sampling: LockSampling { interval_ns: nanos(interval), threshold_ns: nanos(options.lock_threshold) },
                virtual_threads: options.lock_virtual,
            }),
            nativemem: options.nativemem.map(|interval| NativeMem { interval, frees: !options.nofree }),
            governor: (options.overhead > 0 && (options.cpu.is_some() || options.wall.is_some()))
                .then_some(options.overhead),
        };
        let selected = [plan.cpu.is_some(), plan.wall.is_some(), plan.alloc.is_some(), plan.lock.is_some()];
        if !selected.contains(&true) && plan.nativemem.is_none() {
            return Err("start: no event selected (cpu, wall, alloc, lock or nativemem)".to_owned());
        }
        Ok(plan)
    }

    /// Whether JVMTI's callbacks (or the park hook) deliver samples.
    pub fn jvmti_samples(&self) -> bool {
        self.alloc.is_some() || self.lock.is_some()
    }

    /// The event types a session may write: its modes' samples, and what
    /// any session may (settings, counters, native libraries, and the Java
    /// API's endpoints and trace context, which can come at any time). CPU
    /// samples are always declared: the settings are recorded against them.
    pub fn event_types(&self) -> Vec<u64> {
        let mut events = vec![
            id::EXECUTION_SAMPLE,
            id::ACTIVE_SETTING,
            id::PROFILER_COUNTER,
            id::NATIVE_LIBRARY,
            id::ENDPOINT,
            id::SAMPLE_CONTEXT,
        ];
        let modes = [
            (self.wall.is_some(), &[id::METHOD_SAMPLE][..]),
            (self.alloc.is_some(), &[id::ALLOCATION_SAMPLE]),
            (self.alloc.is_some_and(|a| a.live), &[id::LIVE_OBJECT]),
            (self.lock.is_some(), &[id::MONITOR_ENTER, id::THREAD_PARK]),
            (self.nativemem.is_some(), &[id::MALLOC]),
            (self.nativemem.is_some_and(|n| n.frees), &[id::FREE]),
        ];
        for (on, types) in modes {
            if on {
                events.extend_from_slice(types);
            }
        }
        events
    }

    /// The recorded settings of the events, as given; `cpu_engine` is the
    /// CPU engine that runs, if any.
    pub fn settings(&self, cpu_engine: Option<&str>) -> Vec<(String, String)> {
        let nanos = |d: Duration| format!("{} ns", d.as_nanos());
        let mut settings: Vec<(String, String)> = Vec::new();
        if let (Some(engine), Some((_, interval))) = (cpu_engine, self.cpu) {
            settings.push(("engine".into(), engine.into()));
            settings.push(("interval".into(), nanos(interval)));
        }
        if let Some(alloc) = self.alloc {
            settings.push(("alloc".into(), format!("{} bytes", alloc.interval)));
            settings.push(("live".into(), alloc.live.to_string()));
        }
        if let Some(lock) = self.lock {
            settings.push(("lock".into(), format!("{} ns", lock.sampling.interval_ns)));
            settings.push(("lockthreshold".into(), format!("{} ns", lock.sampling.threshold_ns)));
            let lock_virtual = lock.virtual_threads.map_or("default".to_owned(), |on| on.to_string());
            settings.push(("lockvirtual".into(), lock_virtual));
        }
        if let Some(nativemem) = self.nativemem {
            settings.push(("nativemem".into(), format!("{} bytes", nativemem.interval)));
            settings.push(("nofree".into(), (!nativemem.frees).to_string()));
        }
        if let Some(wall) = self.wall {
            settings.push(("wall".into(), nanos(wall.interval)));
            settings.push(("walltpt".into(), wall.threads_per_tick.to_string()));
            settings.push(("wallbatch".into(), wall.fold_idle.to_string()));
        }
        settings
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args;

    fn plan(text: &str) -> Result<EventPlan, String> {
        EventPlan::of(&args::parse(text).unwrap())
    }

    #[test]
    fn the_plan_declares_what_its_events_write_and_no_more() {
        let cpu = plan("start,event=cpu").unwrap();
        assert!(!cpu.event_types().contains(&id::METHOD_SAMPLE));
        assert!(!cpu.jvmti_samples());
        let all = plan("start,event=cpu,wall=10ms,alloc=512k,live,lock=1ms,nativemem=1m").unwrap();
        let types = all.event_types();
        for wanted in [id::METHOD_SAMPLE, id::ALLOCATION_SAMPLE, id::LIVE_OBJECT, id::THREAD_PARK, id::MALLOC, id::FREE]
        {
            assert!(types.contains(&wanted), "{wanted}");
        }
        assert!(all.jvmti_samples());
        assert!(!plan("start,nativemem=1m,nofree").unwrap().event_types().contains(&id::FREE));
    }

    #[test]
    fn the_governor_runs_only_over_signal_engines_with_a_bound() {
        assert_eq!(plan("start,event=cpu,overhead=2").unwrap().governor, Some(2));
        assert_eq!(plan("start,event=cpu,overhead=0").unwrap().governor, None);
        assert_eq!(plan("start,alloc=512k,overhead=2").unwrap().governor, None);
    }

    #[test]
    fn no_event_is_an_error() {
        let mut options = args::parse("start").unwrap();
        options.cpu = None;
        assert!(EventPlan::of(&options).unwrap_err().contains("no event selected"));
    }
}
