//! The profiling session: start, stop, dump and status, driven by agent
//! options from any entry point. Control plane only; one session at a time.

pub mod governor;

use crate::args::event_plan::EventPlan;
use crate::args::stack_plan::{JavaSource, StackPlan};
use crate::args::{self, Action, Options};
use crate::callbacks::jvmti_samples::JvmtiSamples;
use crate::callbacks::{self, CallbackState};
use crate::engine;
use crate::engine::nativemem;
use crate::jvm::existing_threads;
use crate::jvm::jni_env::JniEnv;
use crate::jvm::threads;
use crate::jvm::ticker::{Tick, Ticker};
use crate::jvm::vm::{self, Vm};
use crate::libraries::sections::Wanted;
use crate::libraries::LibraryTable;
use crate::log;
use crate::recording::endpoints;
use crate::recording::export::{self, Exporters};
use crate::recording::periods::{self, Periods};
use crate::recording::retention::Retention;
use crate::recording::rotation::Stores;
use crate::recording::sink::{self, Sink};
use crate::recording::writer::Writer;
use crate::recording::{ChunkLimits, DumpContext, ExportTap, Format, Recording};
use crate::session::governor::signal_cost::{self, Delivery, SignalCosts};
use crate::session::governor::{Governor, InForce};
use sampler::context;
use sampler::counters;
use sampler::java_thread::{self, JavaThreads};
use sampler::native::{NativeMode, NativeUnwinder};
use sampler::origin::{CpuSource, Origins};
use sampler::storage::idle::IdleThreads;
use sampler::storage::samples::{SampleStripes, STRIPES};
use sampler::storage::trace_storage::CallTraceStorage;
use sampler::thread_state::{self, BlockingMethods};
use sampler::vm_stack::HotSpotSource;
use sampler::{self, safe_read, Sampler};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Trace table slots: room for 3/4 of this many distinct stacks.
const TRACE_SLOTS: usize = 1 << 17;
/// Frames in the trace arena (reserved; committed as used).
const ARENA_FRAMES: usize = 1 << 23;
/// Sample records per stripe between two drains.
const STRIPE_CAPACITY: usize = 4096;

struct Session {
    /// Holds the published callback state and sampler (its stores), so
    /// they outlive `disarm`.
    recording: Arc<Mutex<Recording>>,
    ticker: Ticker,
    /// The engines sampling, for `status` ("perf, wall").
    engines: String,
    /// The sampling intervals in force, for `status`.
    intervals: Arc<InForce>,
    started: Instant,
    /// Set (and signalled) when the session stops: ends its `timeout=` timer.
    stopped: Arc<(Mutex<bool>, Condvar)>,
}

/// The sessions as commands from any entry point find them: the one
/// running, one given at load and waiting for the VM, one stopped whose
/// recording is kept. Each behind its own lock.
struct Sessions {
    running: Mutex<Option<Session>>,
    /// A `start` given at load time, carried out once the VM is
    /// initialised (`on_vm_init`).
    pending: Mutex<Option<Options>>,
    /// The recording of a stopped session that its `stop` could not write
    /// (the file failed after the check: disk full, ...), kept for a later
    /// `stop,file=PATH` (or `stop`, if the session file takes it again).
    unsaved: Mutex<Option<Arc<Mutex<Recording>>>>,
}

static SESSIONS: Sessions =
    Sessions { running: Mutex::new(None), pending: Mutex::new(None), unsaved: Mutex::new(None) };

/// What kind of failure a command met (the Java API maps each to an
/// exception type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A bad option or argument.
    Argument,
    /// The command does not fit the profiler's state (not running, ...).
    State,
    /// The system refused: a file, a signal, perf_events, memory.
    Io,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandError {
    pub kind: ErrorKind,
    pub message: String,
}

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

fn argument(message: impl Into<String>) -> CommandError {
    CommandError { kind: ErrorKind::Argument, message: message.into() }
}

fn state(message: impl Into<String>) -> CommandError {
    CommandError { kind: ErrorKind::State, message: message.into() }
}

fn io(message: impl Into<String>) -> CommandError {
    CommandError { kind: ErrorKind::Io, message: message.into() }
}

pub type CommandResult<T> = Result<T, CommandError>;

fn session() -> std::sync::MutexGuard<'static, Option<Session>> {
    SESSIONS.running.lock().unwrap_or_else(|p| p.into_inner())
}

/// Keeps a `start` given at load time (its output prepared) until the VM
/// is initialised.
pub fn defer_start(options: Options) {
    *SESSIONS.pending.lock().unwrap_or_else(|p| p.into_inner()) = Some(options);
}

/// The `start` given at load time, once.
pub fn take_deferred_start() -> Option<Options> {
    SESSIONS.pending.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// Carries out the action of `options`. `env` is the calling thread's
/// JNIEnv (needed to resolve methods when writing a recording). Returns a
/// message for the caller (status, version, where a file was written).
pub fn execute(options: &Options, env: Option<JniEnv>) -> CommandResult<String> {
    match options.action {
        None => Ok(String::new()),
        Some(Action::Start) => start(options, env),
        Some(Action::Stop) => stop(options.file.as_deref(), env, true),
        Some(Action::Dump) => dump(options.file.as_deref(), env),
        Some(Action::Status) => Ok(status()),
        Some(Action::Version) => Ok(version()),
    }
}

pub fn version() -> String {
    format!("profiler {}", env!("CARGO_PKG_VERSION"))
}

pub fn is_running() -> bool {
    session().is_some()
}

fn status() -> String {
    match session().as_ref() {
        Some(s) => {
            let intervals = s.intervals.describe();
            let intervals = if intervals.is_empty() { String::new() } else { format!(", intervals: {intervals}") };
            let recording = s.recording.lock().unwrap_or_else(|p| p.into_inner());
            let file = recording.session_path().map(|p| format!(", file: {}", shown(p))).unwrap_or_default();
            let kept = recording
                .files_kept()
                .map(|(files, bytes)| format!(", earlier files kept: {files} ({bytes} bytes)"))
                .unwrap_or_default();
            format!(
                "Profiling is running for {} seconds (engines: {}{intervals}, samples: {}{file}{kept})",
                s.started.elapsed().as_secs(),
                s.engines,
                counters::get(counters::Counter::Samples)
            )
        }
        None => "Profiler is not active".to_owned(),
    }
}

/// What uploads say of this process.
fn identity(vm: &Vm, options: &Options, plan: &EventPlan) -> export::Identity {
    let property = |name: &std::ffi::CStr| vm.jvmti().system_property(name).ok().filter(|v| !v.is_empty());
    let service =
        options.export.service.clone().or_else(|| property(c"sun.java.command").and_then(|c| export::service_of(&c)));
    let interval = plan.cpu.map(|(_, interval)| interval).or(plan.wall.map(|wall| wall.interval));
    export::Identity {
        service: service.unwrap_or_else(|| "java".to_owned()),
        tags: options.export.tags.clone(),
        host: export::host_name(),
        pid: std::process::id(),
        // `java.version` is set by Java code, after JVMTI's properties:
        // it is `java.vm.version` without its build (`21.0.8+9-LTS`).
        runtime_version: property(c"java.vm.version")
            .map(|version| version.split('+').next().unwrap_or_default().to_owned())
            .unwrap_or_default(),
        interval_ns: interval.map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
    }
}

/// The file a `file=` pattern names now (`%n` is 0: a looping session's
/// first period).
fn output_path(template: &str) -> PathBuf {
    periods::path(template, 0)
}

/// A path as messages show it (cut when long).
fn shown(path: &Path) -> String {
    args::echo(&path.display().to_string())
}

/// The session file of a `start` given at JVM load, created now so that a
/// path that cannot take a recording stops the JVM from starting; `file=`
/// becomes the path expanded now (`%t` is the load time), so the `start`
/// at VM init writes the very file checked here.
///
/// A looping session keeps its pattern (each period expands it again):
/// only its directory is checked.
pub fn prepare_output(options: &mut Options) -> CommandResult<()> {
    let Some(template) = options.file.as_deref() else { return Ok(()) };
    let path = output_path(template);
    if options.continuous.period.is_some() {
        // Each period names its own file at its start: only the directory
        // is checked now, with a file of the agent's own.
        let probe = path.with_file_name(format!(".profiler-probe-{}", std::process::id()));
        let created = std::fs::OpenOptions::new().write(true).create_new(true).open(&probe);
        created.map_err(|e| io(format!("start: cannot write the recording beside {}: {e}", shown(&path))))?;
        let _ = std::fs::remove_file(&probe);
        return Ok(());
    }
    sink::create_output(&path)
        .map_err(|e| io(format!("start: cannot write the recording to {}: {e}", shown(&path))))?;
    options.file = Some(args::escape_path(&path.to_string_lossy()));
    Ok(())
}

/// The handler's way to the interrupted thread's JNIEnv: TLS-free when
/// discovery worked on this JVM, else `GetEnv` (which can deadlock if a
/// signal lands in `malloc` while TLS is being set up: logged at start).
fn java_threads(vm: &Vm, env: Option<JniEnv>) -> JavaThreads {
    fn get_env() -> *mut jni::sys::JNIEnv {
        vm::get().map_or(std::ptr::null_mut(), Vm::current_env)
    }
    let discovered = match vm.java_thread_key() {
        Some(key) => Ok(key),
        None => env
            .ok_or_else(|| "no JNIEnv at start".to_owned())
            .and_then(|env| java_thread::discover(env.as_raw(), || env.current_thread_eetop())),
    };
    match discovered {
        Ok(key) => JavaThreads::Key(vm.remember_java_thread_key(key)),
        Err(e) => {
            log::warn!("TLS-free JNIEnv lookup unavailable ({e}); falling back to GetEnv in the signal handler");
            JavaThreads::EnvFunction(get_env)
        }
    }
}

/// A new library table loading the unwind sections `plan`'s native
/// unwinder needs, if it has one.
fn library_table(plan: StackPlan) -> Option<Arc<LibraryTable>> {
    let wanted = match plan.native? {
        NativeMode::FramePointer => Wanted::Nothing,
        NativeMode::Dwarf => Wanted::Dwarf,
        NativeMode::SFrame => Wanted::SFrame,
    };
    Some(Arc::new(LibraryTable::new(wanted)))
}

/// The HotSpot Java source `plan` asks for, or `None` (with a warning
/// saying why) to walk Java frames with AsyncGetCallTrace. It needs the
/// TLS-free JavaThread lookup.
fn hotspot_source(plan: StackPlan, vm: &Vm, threads: &JavaThreads) -> Option<HotSpotSource> {
    let JavaSource::HotSpot { extended } = plan.java else { return None };
    let fallback = |why: &str| {
        let instead = plan.without_hotspot();
        log::warn!(
            "the HotSpot walker (cstack={}) cannot run: {why}; walking Java frames with AsyncGetCallTrace \
             (recorded as cstack={}, javawalk={})",
            plan.spelling(),
            instead.spelling(),
            instead.java_spelling()
        );
    };
    if !matches!(threads, JavaThreads::Key(_)) {
        fallback("the JavaThread lookup is unavailable");
        return None;
    }
    match vm.java_segment_walker() {
        Ok(segments) => {
            if !segments.remembers_sites() {
                log::info!(
                    "VMStructs does not say which compilation an nmethod is: return sites are decoded in every sample"
                );
            }
            Some(HotSpotSource::new(segments, extended, STRIPES))
        }
        Err(e) => {
            fallback(&e.to_string());
            None
        }
    }
}

/// The recorded settings: the options as given, except `cstack` and
/// `javawalk`, which are the plan that runs (`cstack`).
fn settings(options: &Options, plan: &EventPlan, cpu_engine: Option<&str>, cstack: StackPlan) -> Vec<(String, String)> {
    let mut settings: Vec<(String, String)> = vec![("enabled".into(), "true".into())];
    settings.extend(plan.settings(cpu_engine));
    settings.extend([
        ("cstack".into(), cstack.spelling().into()),
        ("javawalk".into(), cstack.java_spelling().into()),
        ("jstackdepth".into(), options.jstackdepth.to_string()),
        ("remotesym".into(), options.remote_symbolication.to_string()),
        ("attributes".into(), options.attributes.join(";")),
        ("jfrdialect".into(), options.dialect.name().into()),
        ("filter".into(), options.filter.to_string()),
        ("overhead".into(), format!("{}%", options.overhead)),
        ("version".into(), version()),
    ]);
    settings
}

/// Stops every engine, then hides the callback state from callbacks and
/// the sampler from handlers, in that order (no new signals or callbacks,
/// then none in flight: callbacks hold the sampler too), then unhooks the
/// fault handlers.
/// Safe to call when only part of it was set up.
fn disarm() {
    if let Some(vm) = vm::get() {
        engine::jvmti_events::disarm(vm.jvmti());
    }
    nativemem::stop();
    engine::wall::stop();
    engine::stop();
    callbacks::retire();
    sampler::retire();
    engine::release();
    safe_read::restore_fault_handlers();
}

/// Arms the engines `plan` asks for, registering their signals in the
/// published `sampler`; returns their description and the CPU engine's
/// name. Allocation or lock sampling that the JVM cannot do is reported
/// and left out while the other engines run; alone, it is an error.
fn arm_engines(
    vm: &Vm,
    plan: &EventPlan,
    sampler: &Arc<Sampler>,
    env: Option<JniEnv>,
) -> Result<(String, Option<&'static str>), String> {
    let mut engines = Vec::new();
    let cpu = match plan.cpu {
        Some((kind, interval)) => {
            let kernel_stacks = sampler.native.is_some();
            Some(engine::start(kind, interval, kernel_stacks, threads::process_threads, Arc::clone(&sampler.origins))?)
        }
        None => None,
    };
    engines.extend(cpu);
    if let Some(wall) = plan.wall {
        engine::wall::start(wall.interval, wall.threads_per_tick as usize, Arc::clone(sampler))?;
        engines.push("wall");
    }
    let jvmti_engines = [
        (plan.alloc.map(|alloc| engine::jvmti_events::arm_alloc(vm.jvmti(), alloc.interval, alloc.live)), "alloc"),
        (
            plan.lock.map(|lock| engine::jvmti_events::arm_lock(vm.jvmti(), env, lock.sampling, lock.virtual_threads)),
            "lock",
        ),
    ];
    let hook_engines = [(plan.nativemem.map(|native| nativemem::start(native.interval, !native.frees)), "nativemem")];
    for (armed, name) in jvmti_engines.into_iter().chain(hook_engines) {
        match armed {
            Some(Ok(())) => engines.push(name),
            Some(Err(e)) if !engines.is_empty() => log::warn!("{e}; profiling without it"),
            Some(Err(e)) => return Err(e),
            None => {}
        }
    }
    Ok((engines.join(", "), cpu))
}

/// Builds the session's published state from `options`. Installs the fault
/// handlers (undone by [`disarm`]) once nothing else can fail: handlers
/// read memory fault-safely (the JNIEnv check, native and HotSpot walks,
/// the wall-clock state check), and so do setting up the HotSpot walker
/// and naming running threads (after this, in `start`).
fn build_sampler(
    vm: &Vm,
    options: &Options,
    plan: &EventPlan,
    env: Option<JniEnv>,
    blocking: BlockingMethods,
    libraries: Option<&LibraryTable>,
) -> CommandResult<Sampler> {
    let depth = options.jstackdepth as usize;
    let traces = CallTraceStorage::new(TRACE_SLOTS, ARENA_FRAMES)
        .map_err(|e| io(format!("cannot reserve trace storage: {e}")))?;
    let stripes =
        SampleStripes::new(STRIPE_CAPACITY, depth).map_err(|e| io(format!("cannot reserve sample buffers: {e}")))?;
    let origins = Origins::new().map_err(|e| io(format!("cannot reserve the perf descriptor table: {e}")))?;
    let context = context::init().map_err(io)?;
    safe_read::install_fault_handlers().map_err(|e| io(format!("cannot install the fault handler: {e}")))?;
    let threads = java_threads(vm, env);
    Ok(Sampler {
        origins: Arc::new(origins),
        filter: options.filter,
        context,
        traces,
        stripes,
        max_depth: depth,
        threads,
        asgct: vm.asgct(),
        native: options.cstack.native.zip(libraries).map(|(mode, table)| {
            NativeUnwinder::new(mode, options.remote_symbolication, Arc::clone(table.snapshots()), STRIPES)
        }),
        hotspot: hotspot_source(options.cstack, vm, &threads),
        verify_walk: options.verify_walk,
        blocking,
        nativemem: plan.nativemem.map(|native| native.interval),
        idle: plan.wall.is_some_and(|wall| wall.fold_idle).then(IdleThreads::new),
    })
}

/// Build, publish, arm: the session's state is complete before any
/// handler can see it, and published before any signal is armed.
fn start(options: &Options, env: Option<JniEnv>) -> CommandResult<String> {
    options.cstack.check(options.verify_walk, options.remote_symbolication).map_err(argument)?;
    for warning in &options.warnings {
        log::warn!("{warning}");
    }
    let vm = vm::get().ok_or_else(|| state("the agent is not initialised"))?;
    let mut current = session();
    if current.is_some() {
        return Err(state("start: profiling is already running (stop it first)"));
    }
    if unsaved().take().is_some() {
        log::error!("start: the recording of the previous session, which its stop could not write, is discarded");
    }
    let plan = EventPlan::of(options).map_err(argument)?;
    let file = options.file.as_deref().map(output_path);
    let mut sink = Sink::new(file.clone()).map_err(|e| {
        let path = file.as_deref().map(shown).unwrap_or_default();
        io(format!("start: cannot write the recording to {path}: {e}"))
    })?;
    let continuous = &options.continuous;
    let looping = continuous.period.zip(options.file.clone());
    let periods = match looping {
        Some((length, template)) => {
            sink.retain_within(Retention::new(continuous.retention));
            Some(Periods::new(Some(template), length))
        }
        None => {
            if let Some(bound) = continuous.retention.max_size {
                sink.bound_file(bound);
            }
            // Periods shipped, in the session's one file if any.
            let length = continuous.period.unwrap_or(export::DEFAULT_PERIOD);
            options.export.any().then(|| Periods::new(None, length))
        }
    };
    // Before any engine is armed: the measurement has SIGPROF to itself.
    let signal_costs = plan.governor.and_then(|_| signal_cost::costs());
    let blocking = env.map(|env| preload_methods(vm, env, plan.wall.is_some()));
    counters::reset();
    let endpoints = endpoints::endpoints().map_err(io)?;
    endpoints.discard();
    let libraries = library_table(options.cstack);
    let sampler = Arc::new(build_sampler(vm, options, &plan, env, blocking.unwrap_or_default(), libraries.as_deref())?);
    let jvmti = plan
        .jvmti_samples()
        .then(|| {
            let alloc = plan.alloc.map(|alloc| alloc.interval);
            JvmtiSamples::new(alloc, plan.alloc.is_some_and(|a| a.live), plan.lock.map(|lock| lock.sampling))
        })
        .transpose()
        .map_err(|e| {
            safe_read::restore_fault_handlers();
            io(format!("cannot reserve the class table: {e}"))
        })?;
    let callbacks = Arc::new(CallbackState { sampler: Arc::clone(&sampler), jvmti, libraries });
    if let Some(env) = env {
        // After an attach, threads already running get their Java names
        // (those started later are named by ThreadStart).
        if let Err(e) = existing_threads::name_existing_threads(vm, env) {
            log::warn!("threads that were already running keep their kernel names: {e}");
        }
    }
    sampler.context.set_attribute_count(options.attributes.len());
    let sampling_started = std::time::SystemTime::now();
    sampler::publish(&sampler);
    callbacks::publish(&callbacks);
    let (engines, cpu_engine) = arm_engines(vm, &plan, &sampler, env).map_err(|e| {
        disarm();
        io(e)
    })?;
    let stores = Stores { callbacks: Arc::clone(&callbacks), endpoints, context: sampler.context };
    let format =
        Format { dialect: options.dialect, attributes: options.attributes.clone(), events: plan.event_types() };
    let cstack = if sampler.hotspot.is_none() { options.cstack.without_hotspot() } else { options.cstack };
    let cpu_interval = plan.cpu.map(|(_, interval)| interval).filter(|_| cpu_engine.is_some());
    let wall_interval = plan.wall.map(|wall| wall.interval);
    let overhead = plan.governor.filter(|_| cpu_interval.is_some() || wall_interval.is_some());
    let mut settings = settings(options, &plan, cpu_engine, cstack);
    let cpu_delivery = match sampler.origins.cpu_source() {
        CpuSource::Ctimer | CpuSource::Itimer => Delivery::AtTick,
        CpuSource::Perf | CpuSource::Off => Delivery::Timer,
    };
    let charges = signal_costs
        .filter(|_| overhead.is_some())
        .map(|costs: SignalCosts| (costs.of(cpu_delivery), costs.of(Delivery::CrossThread)));
    if let Some((cpu, wall)) = charges {
        let nanos = |d: Duration| format!("{} ns", d.as_nanos());
        settings.extend(cpu_interval.map(|_| ("signal_cost".to_owned(), nanos(cpu))));
        settings.extend(wall_interval.map(|_| ("wall_signal_cost".to_owned(), nanos(wall))));
    }
    let limits = ChunkLimits { size: continuous.chunk_size, time: continuous.chunk_time };
    let export = match options.export.any() {
        true => {
            let exporters = Exporters::start(&options.export, identity(vm, options, &plan)).map_err(|e| {
                disarm();
                argument(e)
            })?;
            Some(ExportTap::new(exporters, sampling_started))
        }
        false => None,
    };
    let recording = Arc::new(Mutex::new(Recording::new(settings, format, stores, sink, limits, periods, export)));
    let mut ticks: Vec<Box<dyn Tick>> = Vec::new();
    if let Some(libraries) = &callbacks.libraries {
        ticks.push(Box::new(LibraryRefresh(Arc::clone(libraries))));
    }
    if plan.nativemem.is_some() {
        ticks.push(Box::<nativemem::RefreshTick>::default());
    }
    ticks.push(Box::new(Writer::new(vm, Arc::clone(&recording))));
    let intervals = Arc::new(InForce::new(cpu_interval, wall_interval));
    if let Some(overhead) = overhead {
        let (cpu, wall) = charges.unwrap_or_default();
        let governor = Governor::new(overhead, cpu, wall, Arc::clone(&intervals), vm, Arc::clone(&recording));
        ticks.push(Box::new(governor));
    }
    let ticker = Ticker::spawn(vm, ticks).map_err(|e| {
        disarm();
        io(format!("cannot start the writer thread: {e}"))
    })?;
    log::info!("profiling started: {engines}");
    let message = format!("Profiling started ({engines})");
    let stopped = Arc::new((Mutex::new(false), Condvar::new()));
    if let Some(timeout) = options.continuous.timeout {
        stop_after(vm, timeout, Arc::clone(&stopped));
    }
    *current = Some(Session { recording, ticker, engines, intervals, started: Instant::now(), stopped });
    Ok(message)
}

/// The library table's tick on the session's ticker: picks up libraries
/// loaded or unloaded since the last tick (`System.load`, `dlopen`).
struct LibraryRefresh(Arc<LibraryTable>);

impl Tick for LibraryRefresh {
    fn tick(&mut self, _env: Option<JniEnv>) {
        self.0.refresh_if_changed();
    }
}

/// `timeout=`: a thread that stops the session after `timeout`, unless
/// `stopped` is set first (the session stopped otherwise). It attaches to
/// the JVM to write the recording, as `stop` does.
fn stop_after(vm: &'static Vm, timeout: Duration, stopped: Arc<(Mutex<bool>, Condvar)>) {
    let spawned = std::thread::Builder::new().name("profiler-timeout".into()).spawn(move || {
        let (flag, wake) = &*stopped;
        let deadline = Instant::now() + timeout;
        let mut done = flag.lock().unwrap_or_else(|p| p.into_inner());
        while !*done {
            let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) else { break };
            done = wake.wait_timeout(done, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        if *done {
            return;
        }
        drop(done);
        let Some(env) = vm.attach_daemon(c"Profiler Timeout").ok().and_then(|e| {
            // SAFETY: the env of this thread, just attached.
            unsafe { JniEnv::from_raw(e) }
        }) else {
            log::error!("timeout: cannot attach to the JVM to write the recording; profiling continues");
            return;
        };
        let current = session();
        // The session this timer belongs to, and no later one.
        if current.as_ref().is_some_and(|s| Arc::ptr_eq(&s.stopped, &stopped)) {
            log::info!("timeout: stopping after {} s", timeout.as_secs());
            // A recording that cannot be written keeps profiling running,
            // as a `stop` does, with the error logged.
            match stop_locked(current, None, Some(env), true) {
                Ok(message) => log::info!("{message}"),
                Err(e) => log::error!("timeout: {e}"),
            }
        } else {
            drop(current);
        }
        vm.detach_current();
    });
    if let Err(e) = spawned {
        log::error!("timeout: cannot start its timer thread ({e}); stop the session yourself");
    }
}

/// Makes HotSpot create jmethodIDs for every loaded class, so
/// AsyncGetCallTrace can name their methods (classes loaded later are
/// handled on ClassPrepare). With `blocking`, also finds the methods that
/// tell a wall-clock sample's thread state.
fn preload_methods(vm: &Vm, env: JniEnv, blocking: bool) -> BlockingMethods {
    let jvmti = vm.jvmti();
    let found = env.with_loaded_classes(jvmti, |classes| {
        let mut found = Vec::new();
        for class in classes {
            let methods = jvmti.class_methods(class).unwrap_or_default();
            let signature = if blocking { jvmti.class_signature(class).ok() } else { None };
            let wanted: Vec<_> = thread_state::BLOCKING_METHODS
                .iter()
                .filter(|(class_signature, _, _)| signature.as_deref() == Some(*class_signature))
                .collect();
            for method in methods.iter().filter(|_| !wanted.is_empty()) {
                let Ok(name) = jvmti.method_name(*method) else { continue };
                if let Some((_, _, state)) = wanted.iter().find(|(_, method_name, _)| name.name == *method_name) {
                    found.push((method.as_raw() as u64, *state));
                }
            }
        }
        found
    });
    BlockingMethods::new(&found.unwrap_or_default())
}

/// The recording a failed `stop` kept (`Sessions::unsaved`).
fn unsaved() -> std::sync::MutexGuard<'static, Option<Arc<Mutex<Recording>>>> {
    SESSIONS.unsaved.lock().unwrap_or_else(|p| p.into_inner())
}

/// Stops the session and writes its recording. Unless the JVM is dying
/// (`checked`), the target is checked first: if the recording could not be
/// written there, profiling continues and the error says why. If writing
/// fails anyway, the recording is kept (see [`Sessions::unsaved`]).
fn stop(file: Option<&str>, env: Option<JniEnv>, checked: bool) -> CommandResult<String> {
    stop_locked(session(), file, env, checked)
}

/// [`stop`], with the session lock held.
fn stop_locked(
    mut current: MutexGuard<'static, Option<Session>>,
    file: Option<&str>,
    env: Option<JniEnv>,
    checked: bool,
) -> CommandResult<String> {
    let path = file.map(output_path);
    let Some(running) = current.as_ref() else {
        drop(current);
        return write_unsaved(path);
    };
    if checked {
        let mut recording = running.recording.lock().unwrap_or_else(|p| p.into_inner());
        recording.check_target(path.as_deref()).map_err(|e| {
            let target = path.as_deref().or(recording.session_path()).map(shown).unwrap_or_default();
            io(format!("stop: cannot write {target}: {e}; profiling continues"))
        })?;
    }
    let Some(session) = current.take() else { return Err(state("stop: profiling is not running")) };
    drop(current);
    let (flag, wake) = &*session.stopped;
    *flag.lock().unwrap_or_else(|p| p.into_inner()) = true;
    wake.notify_all();
    disarm();
    session.ticker.stop();
    let mut recording = session.recording.lock().unwrap_or_else(|p| p.into_inner());
    log::info!("profiling stopped after {} s", session.started.elapsed().as_secs());
    if path.is_none() && recording.session_path().is_none() {
        if !recording.exports() {
            if let Some(env) = env {
                recording.release_live_objects(env);
            }
            return Ok("Profiling stopped; no file was given, so the data since the last dump was discarded".to_owned());
        }
        // The last period, shipped and not kept.
        if let (Some(vm), Some(env)) = (vm::get(), env) {
            recording.rotate(&DumpContext { jvmti: vm.jvmti(), env }, true);
            recording.release_live_objects(env);
        }
        let exporters = recording.end_exports();
        drop(recording);
        finish_exports(exporters);
        return Ok("Profiling stopped; the last period was shipped".to_owned());
    }
    let written = write_recording(&mut recording, env, path, true);
    let exporters = recording.end_exports();
    match written {
        Ok(written) => {
            recording.keep_finished_after_stop(true);
            drop(recording);
            finish_exports(exporters);
            Ok(format!("Profiling stopped; recording written to {}", shown(&written)))
        }
        Err(e) => {
            // The files finished before are complete; the last one is not.
            recording.keep_finished_after_stop(false);
            drop(recording);
            finish_exports(exporters);
            *unsaved() = Some(session.recording);
            Err(CommandError {
                kind: e.kind,
                message: format!("{e}; profiling stopped, and its recording is kept: stop,file=PATH writes it"),
            })
        }
    }
}

/// Delivers the last periods within [`export::FINISH_WAIT`], then gives up.
fn finish_exports(exporters: Option<Exporters>) {
    if let Some(exporters) = exporters {
        exporters.finish(export::FINISH_WAIT);
    }
}

/// `stop` with no session running: writes the recording a failed `stop`
/// kept, if there is one.
fn write_unsaved(path: Option<PathBuf>) -> CommandResult<String> {
    let mut kept = unsaved();
    let Some(recording) = kept.as_ref() else { return Err(state("stop: profiling is not running")) };
    let written = recording.lock().unwrap_or_else(|p| p.into_inner()).write_kept(path.as_deref()).map_err(|e| {
        io(format!("stop: the stopped session's recording is still kept, as it cannot be written: {e}"))
    })?;
    *kept = None;
    Ok(format!("The stopped session's recording was written to {}", shown(&written)))
}

/// Writes the data since the previous dump to `path` (or the session
/// file); sampling continues.
pub fn dump_to(path: Option<PathBuf>, env: Option<JniEnv>) -> CommandResult<String> {
    let current = session();
    let session = current.as_ref().ok_or_else(|| state("dump: profiling is not running"))?;
    let mut recording = session.recording.lock().unwrap_or_else(|p| p.into_inner());
    let written = write_recording(&mut recording, env, path, false)?;
    Ok(format!("Recording written to {}", shown(&written)))
}

/// The files looping sessions finished since the last call, oldest first:
/// those of stopped sessions (their last files included), then the
/// running one's.
pub fn take_finished_files() -> Vec<PathBuf> {
    let mut files = sink::take_finished_after_stop();
    if let Some(s) = session().as_ref() {
        files.extend(s.recording.lock().unwrap_or_else(|p| p.into_inner()).take_finished_files());
    }
    files
}

fn dump(file: Option<&str>, env: Option<JniEnv>) -> CommandResult<String> {
    dump_to(file.map(output_path), env)
}

fn write_recording(
    recording: &mut Recording,
    env: Option<JniEnv>,
    path: Option<PathBuf>,
    final_chunk: bool,
) -> CommandResult<PathBuf> {
    let vm = vm::get().ok_or_else(|| state("the agent is not initialised"))?;
    let env = env.ok_or_else(|| state("cannot write a recording from a thread not attached to the JVM"))?;
    let ctx = DumpContext { jvmti: vm.jvmti(), env };
    let target = path.clone().or_else(|| recording.session_path().map(PathBuf::from));
    recording.dump(&ctx, path.as_deref(), final_chunk).map_err(|e| match target {
        Some(t) => io(format!("cannot write {}: {e}", shown(&t))),
        None => argument(e.to_string()),
    })
}

/// VM death: a running session is stopped and its recording written.
pub fn on_vm_death(env: Option<JniEnv>) {
    if unsaved().is_some() {
        log::error!("the recording of a stopped session, which its stop could not write, is lost with the JVM");
    }
    if is_running() {
        match stop(None, env, false) {
            Ok(message) => log::info!("{message}"),
            Err(e) => log::error!("{e}"),
        }
    }
}
