//! The agent option string (`-agentpath:libprofiler.so=<options>`, the
//! `jcmd ... JVMTI.agent_load` argument, or `JavaProfiler.execute`) parsed
//! into a typed configuration. Pure: no side effects, no global state.

pub mod event_plan;
pub mod export;
mod paths;
pub mod stack_plan;
mod values;

pub use crate::engine::CpuEngineKind;
pub use crate::log::{echo, LogLevel};
use jfr_writer::Dialect;
use paths::varies_by_period;
pub use paths::{escape_path, expand_path, Naming};
use stack_plan::{JavaSource, StackPlan};
use std::fmt;
use std::time::Duration;
use values::{
    limit, no_value, parse_attributes, parse_count, parse_log_level, parse_size, parse_time, required, spell,
};
pub use values::{parse_bool, parse_bytes, parse_interval};

/// What a command asks the profiler to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Start,
    Stop,
    Dump,
    Status,
    Version,
}

pub const DEFAULT_CPU_INTERVAL: Duration = Duration::from_millis(10);
pub const DEFAULT_WALL_INTERVAL: Duration = Duration::from_millis(50);
/// Threads signalled per wall-clock interval by default (`walltpt=`).
pub const DEFAULT_WALL_THREADS_PER_TICK: u32 = 16;
const MAX_WALL_THREADS_PER_TICK: u32 = 1024;
/// Wall-clock signals a second (`walltpt` per `wall` interval) beyond which
/// a warning is logged: the default asks for 320.
const COSTLY_WALL_SIGNALS_PER_SECOND: u64 = 20_000;
pub const DEFAULT_JSTACKDEPTH: u32 = 2048;
pub const MAX_JSTACKDEPTH: u32 = 65_536;
/// Java frames per sample beyond which a warning is logged: each sample
/// walks (and stores) up to this many.
const COSTLY_JSTACKDEPTH: u32 = 8192;
/// At most this many context attributes (`attributes=`).
pub const MAX_ATTRIBUTES: usize = 8;
/// The profiler's CPU use, in percent of the application's, past which the
/// overhead governor stretches the sampling intervals (`overhead=`; 0:
/// never): about two and a half times what sampling two busy threads
/// every millisecond is charged on the VM of docs/benchmarks.md (4%).
pub const DEFAULT_OVERHEAD_PERCENT: u32 = 10;
const MAX_OVERHEAD_PERCENT: u32 = 1000;
/// Lock waits are sampled every this much time waited by default
/// (`lock`), as async-profiler samples them: short, frequent contention
/// shows, each sample weighing the wait it stands for.
pub const DEFAULT_LOCK_INTERVAL: Duration = Duration::from_micros(10);
/// Bytes between allocation samples by default (`alloc`).
pub const DEFAULT_ALLOC_INTERVAL: u32 = 512 * 1024;
/// Bytes between native allocation samples by default (`nativemem`):
/// async-profiler's default interval, as a mean.
pub const DEFAULT_NATIVEMEM_INTERVAL: u32 = 512 * 1024;
/// `nativemem=` below this is accepted with a warning: each sample walks
/// the allocating thread's stack inside its `malloc`.
const COSTLY_NATIVEMEM_INTERVAL: u32 = 4 * 1024;
/// `alloc=` below this is refused: nearly every small object would be
/// sampled, each with a JVMTI stack walk on the allocating thread.
pub const MIN_ALLOC_INTERVAL: u32 = 1024;
/// `alloc=` below this is accepted with a warning (async-profiler's
/// default is 512k; JFR throttles its allocation samples to a few hundred
/// a second).
const COSTLY_ALLOC_INTERVAL: u32 = 64 * 1024;

/// Where an interval option is accepted (`floor` to `ceiling`), and below
/// what it is accepted with a warning about its cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// What the interval paces, for messages ("CPU sampling").
    pub what: &'static str,
    pub floor: Duration,
    pub costly_below: Duration,
    pub ceiling: Duration,
}

/// Intervals beyond a minute sample (or report) almost nothing: surely a
/// typo (`interval=10000` meant as milliseconds is 10 us, the other way
/// round `10000s`).
pub const MAX_INTERVAL: Duration = Duration::from_secs(60);

/// `cpu`, `interval`: every sample interrupts the running thread and walks
/// its stack (a few to tens of microseconds), so at 100 us a thread spends
/// several percent of its CPU in the profiler, and below it the handler
/// would take over (`interval=1ns` livelocked the JVM: every thread always
/// in the handler). async-profiler's and JFR's practice is 10-20 ms; 1 ms
/// is already fine-grained.
pub const CPU_LIMITS: Limits = Limits {
    what: "CPU sampling",
    floor: Duration::from_micros(100),
    costly_below: Duration::from_millis(1),
    ceiling: MAX_INTERVAL,
};

/// `wall`: one sampler thread signals `walltpt` threads per tick; 100 us
/// is async-profiler's hard limit for its wall-clock thread ("smaller
/// intervals are practically unusable"), and ticks it cannot keep are
/// skipped (`wall_ticks_skipped`). Its default is 50 ms, as ours.
pub const WALL_LIMITS: Limits = Limits {
    what: "wall-clock sampling",
    floor: Duration::from_micros(100),
    costly_below: Duration::from_millis(1),
    ceiling: MAX_INTERVAL,
};

/// `lock`: every contended monitor entry raises JVMTI events whatever the
/// interval; a sampled wait is also recorded with a JVMTI stack walk, on
/// the thread that waited. A wait is sampled with a probability of its
/// length over the interval (always from the interval on), so 1 us
/// samples nearly every contention; the JDK's own threshold is 10-20 ms.
pub const LOCK_LIMITS: Limits = Limits {
    what: "lock wait sampling",
    floor: Duration::from_micros(1),
    costly_below: Duration::from_micros(10),
    ceiling: MAX_INTERVAL,
};

/// `lockthreshold`: waits shorter than this are never recorded (none by
/// default); up to a minute, as intervals.
pub const LOCK_THRESHOLD_LIMITS: Limits =
    Limits { what: "lock waits recorded", floor: Duration::ZERO, costly_below: Duration::ZERO, ceiling: MAX_INTERVAL };

/// Event bytes after which a chunk is finished by default (`chunksize`).
pub const DEFAULT_CHUNK_SIZE: u64 = 8 << 20;
/// `chunksize` from 64 KiB (a chunk repeats its metadata and constant
/// pools: smaller ones are mostly overhead) to 1 GiB (held in memory
/// until finished).
const CHUNK_SIZE_RANGE: (u64, u64) = (64 << 10, 1 << 30);
/// `chunktime` from a second to a day.
const CHUNK_TIME_RANGE: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(86_400));
/// `loop` from a second (`%t` names files by the second) to 30 days.
const LOOP_RANGE: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(30 * 86_400));
/// What a session keeps on disk when no `maxfiles`, `maxsize` or `maxage`
/// is given (a looping session's files; a single session file, cut from
/// its oldest chunks): the JDK's default repository bound is 250 MB.
pub const DEFAULT_MAX_SIZE: u64 = 256 << 20;

/// Which of a looping session's files are kept: each bound removes the
/// oldest files past it (never the one being written).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retention {
    pub max_files: Option<u32>,
    pub max_size: Option<u64>,
    pub max_age: Option<Duration>,
}

/// How a session records for a long time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Continuous {
    /// Each period's recording goes to a file of its own, named by
    /// expanding `file=` again (`loop=`).
    pub period: Option<Duration>,
    /// Event bytes after which a chunk is finished (`chunksize=`).
    pub chunk_size: u64,
    /// Time after which a chunk is finished (`chunktime=`).
    pub chunk_time: Option<Duration>,
    pub retention: Retention,
    /// The session stops by itself after this long (`timeout=`).
    pub timeout: Option<Duration>,
}

impl Default for Continuous {
    fn default() -> Self {
        Self {
            period: None,
            chunk_size: DEFAULT_CHUNK_SIZE,
            chunk_time: None,
            retention: Retention::default(),
            timeout: None,
        }
    }
}

/// A parsed option string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub action: Option<Action>,
    /// CPU sampling, with its engine and period.
    pub cpu: Option<(CpuEngineKind, Duration)>,
    /// Wall-clock sampling period.
    pub wall: Option<Duration>,
    /// Heap allocation sampling: mean bytes between samples (`alloc=`).
    pub alloc: Option<u32>,
    /// Sampled objects still alive are written at each dump (`live`, with
    /// `alloc`).
    pub live: bool,
    /// Native allocation sampling: mean bytes between samples
    /// (`nativemem=`).
    pub nativemem: Option<u32>,
    /// Frees of sampled native allocations are not recorded (`nofree`).
    pub nofree: bool,
    /// Where periods are shipped (`pyroscope=`, `datadog=`, ...).
    pub export: export::ExportOptions,
    /// Lock waits are sampled every this much time waited (`lock=`).
    pub lock: Option<Duration>,
    /// Lock waits shorter than this are never recorded (`lockthreshold=`).
    pub lock_threshold: Duration,
    /// Virtual threads' parks on `java.util.concurrent` locks are timed
    /// (`lockvirtual`; JDK 21+; `None`: the default, yes).
    pub lock_virtual: Option<bool>,
    /// Threads signalled per wall-clock interval (`walltpt=`).
    pub wall_threads_per_tick: u32,
    /// Idle threads' wall-clock samples are folded instead of signalled
    /// (`wallbatch`, on by default; see `storage::idle`).
    pub wall_batch: bool,
    /// Output path template (see [`expand_path`]).
    pub file: Option<String>,
    /// Recording for a long time: periods, chunks, retention, timeout.
    pub continuous: Continuous,
    /// How stacks are walked (`cstack=`, `javawalk=`; the HotSpot walker
    /// by default).
    pub cstack: StackPlan,
    pub jstackdepth: u32,
    pub remote_symbolication: bool,
    /// With the HotSpot walker, also walk every sample with
    /// AsyncGetCallTrace and count agreement (`verifywalk`).
    pub verify_walk: bool,
    /// Context attribute names (`attributes=a;b`), in slot order.
    pub attributes: Vec<String>,
    /// The event names and frame encoding of recordings (`jfrdialect=`).
    pub dialect: Dialect,
    /// Sample only threads added to the filter (`filter`).
    pub filter: bool,
    /// The overhead governor's ceiling, percent of the application's CPU (`overhead=`;
    /// 0 turns it off).
    pub overhead: u32,
    pub log_file: Option<String>,
    pub log_level: LogLevel,
    /// This command's answer (its message or its error) goes to this file,
    /// not to the JVM's stdout and stderr (`reply=`; `jprofile` reads it).
    pub reply: Option<String>,
    /// Accepted settings that cost a lot, to be logged at `start`.
    pub warnings: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            action: None,
            cpu: None,
            wall: None,
            alloc: None,
            live: false,
            nativemem: None,
            nofree: false,
            export: Default::default(),
            lock: None,
            lock_threshold: Duration::ZERO,
            lock_virtual: None,
            wall_threads_per_tick: DEFAULT_WALL_THREADS_PER_TICK,
            wall_batch: true,
            file: None,
            continuous: Continuous::default(),
            cstack: StackPlan::default(),
            jstackdepth: DEFAULT_JSTACKDEPTH,
            remote_symbolication: false,
            verify_walk: false,
            attributes: Vec::new(),
            dialect: Dialect::default(),
            filter: false,
            overhead: DEFAULT_OVERHEAD_PERCENT,
            log_file: None,
            log_level: LogLevel::Warn,
            reply: None,
            warnings: Vec::new(),
        }
    }
}

/// An option that could not be accepted: which one, what was given, and
/// what would have been accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionError {
    pub option: String,
    pub message: String,
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.option, self.message)
    }
}

impl std::error::Error for OptionError {}

fn error(option: &str, message: impl Into<String>) -> OptionError {
    OptionError { option: echo(option), message: message.into() }
}

/// The `reply=` file of an option string, found even when the string is
/// refused, so that the refusal reaches whoever asked for the reply.
pub fn reply_path(input: &str) -> Option<&str> {
    input.split(',').find_map(|item| item.strip_prefix("reply=")).filter(|path| !path.is_empty())
}

/// Every option key [`parse`] accepts, in the order the unknown-option
/// message lists them. A key not here is refused before the parser's
/// `match` sees it, so a key added to the `match` must be added here too
/// (and to `docs/options.md`, which a test compares with this list).
pub const KEYS: &[&str] = &[
    "start",
    "stop",
    "dump",
    "status",
    "version",
    "event",
    "cpu",
    "wall",
    "alloc",
    "live",
    "nativemem",
    "nofree",
    "lock",
    "lockthreshold",
    "lockvirtual",
    "walltpt",
    "wallbatch",
    "interval",
    "file",
    "loop",
    "chunksize",
    "chunktime",
    "maxfiles",
    "maxsize",
    "maxage",
    "timeout",
    "jfr",
    "cstack",
    "javawalk",
    "jstackdepth",
    "remotesym",
    "verifywalk",
    "attributes",
    "jfrdialect",
    "filter",
    "overhead",
    "log",
    "loglevel",
    "reply",
    "pyroscope",
    "datadog",
    "otlp",
    "service",
    "tags",
    "credentials",
];

fn unknown_option(key: &str) -> OptionError {
    error(key, format!("unknown option (accepted: {})", KEYS.join(", ")))
}

/// Parses a comma-separated option string. An empty string is valid (the
/// agent is loaded and waits for commands). Every option is given at most
/// once (repeating it with the same value changes nothing; with another
/// value, or with an option it contradicts, is an error naming both), and
/// no item is empty. Three steps: each item read ([`item`]) and applied by
/// its key ([`apply`]) in turn, so the first bad item is the one reported;
/// then what options decide together ([`resolve`]).
pub fn parse(input: &str) -> Result<Options, OptionError> {
    let mut options = Options::default();
    if input.is_empty() {
        return Ok(options);
    }
    let mut given: Vec<Item<'_>> = Vec::new();
    let mut pending = Pending::default();
    for (position, text) in input.split(',').enumerate() {
        let Some(item) = item(input, position, text, &given)? else { continue };
        apply(item.key, item.value, &mut options, &mut pending)?;
        given.push(item);
    }
    resolve(options, pending, &given)
}

/// One `key[=value]` item of an option string, as given.
struct Item<'a> {
    key: &'a str,
    value: Option<&'a str>,
    text: &'a str,
}

/// Item `position` of `input`, `text`: its key and value, if its key is
/// known and not `given` before (`None`: given before exactly so).
fn item<'a>(input: &str, position: usize, text: &'a str, given: &[Item<'_>]) -> Result<Option<Item<'a>>, OptionError> {
    if text.is_empty() {
        return Err(error(
            input,
            format!("item {} is empty (options are separated by single commas, with none at either end)", position + 1),
        ));
    }
    let (key, value) = match text.split_once('=') {
        Some((k, v)) => (k, Some(v)),
        None => (text, None),
    };
    if key.is_empty() {
        return Err(error(text, "has no option name before '='"));
    }
    if let Some(earlier) = given.iter().find(|item| item.key == key) {
        if earlier.text == text {
            return Ok(None);
        }
        return Err(error(
            key,
            format!("given twice, as '{}' and '{}' (give it once)", echo(earlier.text), echo(text)),
        ));
    }
    if !KEYS.contains(&key) {
        return Err(unknown_option(key));
    }
    Ok(Some(Item { key, value, text }))
}

/// What items set that only their combination decides ([`resolve`]).
#[derive(Default)]
struct Pending<'a> {
    event: Option<&'a str>,
    interval: Option<Duration>,
    cpu_interval: Option<Duration>,
    cpu_requested: bool,
    wall_interval_given: bool,
    java_walk: Option<JavaSource>,
}

/// Applies one item: the table of keys, each with its value's reader.
fn apply<'a>(
    key: &str,
    value: Option<&'a str>,
    options: &mut Options,
    pending: &mut Pending<'a>,
) -> Result<(), OptionError> {
    // Every key of this match (and of `parse_continuous`'s and the
    // exporters') is in KEYS.
    match key {
        "start" | "stop" | "dump" | "status" | "version" => {
            no_value(key, value)?;
            let action = match key {
                "start" => Action::Start,
                "stop" => Action::Stop,
                "dump" => Action::Dump,
                "status" => Action::Status,
                _ => Action::Version,
            };
            if let Some(previous) = options.action.filter(|&a| a != action) {
                return Err(error(
                    key,
                    format!("conflicts with action '{}': give one action per command", action_name(previous)),
                ));
            }
            options.action = Some(action);
        }
        "event" => {
            let value = required(key, value)?;
            match value {
                "cpu" | "itimer" | "ctimer" | "wall" => pending.event = Some(value),
                other => {
                    return Err(error(
                        key,
                        format!("unknown event '{}' (accepted: cpu, itimer, ctimer, wall)", echo(other)),
                    ))
                }
            }
        }
        "cpu" => {
            pending.cpu_requested = true;
            if let Some(v) = value {
                pending.cpu_interval = Some(parse_interval(key, v)?);
            }
        }
        "wall" => {
            pending.wall_interval_given = value.is_some();
            let period = match value {
                Some(v) => parse_interval(key, v)?,
                None => DEFAULT_WALL_INTERVAL,
            };
            options.wall = Some(period);
        }
        "walltpt" => {
            let accepted = format!("accepted: 1 to {MAX_WALL_THREADS_PER_TICK}");
            options.wall_threads_per_tick =
                parse_count(key, required(key, value)?, 1..=MAX_WALL_THREADS_PER_TICK, &accepted)?;
        }
        "interval" => pending.interval = Some(parse_interval(key, required(key, value)?)?),
        "file" => options.file = Some(required(key, value)?.to_owned()),
        "jfr" => no_value(key, value)?,
        "cstack" => {
            let text = required(key, value)?;
            options.cstack = StackPlan::parse(text).ok_or_else(|| {
                error(key, format!("unknown mode '{}' (accepted: {})", echo(text), StackPlan::accepted()))
            })?;
        }
        "javawalk" => {
            let text = required(key, value)?;
            pending.java_walk = Some(StackPlan::java_walk(text).ok_or_else(|| {
                error(key, format!("unknown walker '{}' (accepted: {})", echo(text), StackPlan::java_walks_accepted()))
            })?);
        }
        "jstackdepth" => {
            let accepted = format!("accepted: 1 to {MAX_JSTACKDEPTH}");
            let depth = parse_count(key, required(key, value)?, 1..=MAX_JSTACKDEPTH, &accepted)?;
            if depth > COSTLY_JSTACKDEPTH {
                options.warnings.push(format!(
                    "jstackdepth={depth}: every sample of a deep stack walks and stores up to {depth} frames; \
                     {DEFAULT_JSTACKDEPTH} (the default) is usually enough"
                ));
            }
            options.jstackdepth = depth;
        }
        "alloc" => {
            let bytes = value.map_or(Ok(DEFAULT_ALLOC_INTERVAL), |v| parse_bytes(key, v))?;
            if bytes < MIN_ALLOC_INTERVAL {
                return Err(error(
                    key,
                    format!("{bytes} bytes is below the floor of 1k (accepted: 1k to 2g, e.g. 512k)"),
                ));
            }
            if bytes < COSTLY_ALLOC_INTERVAL {
                options.warnings.push(format!(
                    "alloc={bytes}: a sample (with a stack walk) every {bytes} bytes allocated costs noticeable \
                     time on allocating threads; 64k or more is recommended"
                ));
            }
            options.alloc = Some(bytes);
        }
        "live" => options.live = parse_bool(key, value)?,
        "nativemem" => {
            let bytes = value.map_or(Ok(DEFAULT_NATIVEMEM_INTERVAL), |v| parse_bytes(key, v))?;
            if bytes < COSTLY_NATIVEMEM_INTERVAL {
                options.warnings.push(format!(
                    "nativemem={bytes}: a sample (with a stack walk inside malloc) every {bytes} bytes \
                     allocated costs noticeable time on allocating threads; 4k or more is recommended"
                ));
            }
            options.nativemem = Some(bytes);
        }
        "nofree" => options.nofree = parse_bool(key, value)?,
        "wallbatch" => options.wall_batch = parse_bool(key, value)?,
        "lock" => {
            let interval = value.map_or(Ok(DEFAULT_LOCK_INTERVAL), |v| parse_interval(key, v))?;
            options.lock = Some(limit(key, interval, &LOCK_LIMITS, &mut options.warnings)?);
        }
        "lockthreshold" => {
            let v = required(key, value)?;
            // Zero in any unit: no threshold (`parse_interval` wants more).
            let threshold = if ["", "ns", "us", "ms", "s"].iter().any(|unit| v.strip_suffix(unit) == Some("0")) {
                Duration::ZERO
            } else {
                limit(key, parse_interval(key, v)?, &LOCK_THRESHOLD_LIMITS, &mut options.warnings)?
            };
            // Waits are recorded in whole microseconds: a threshold
            // between two is raised to the next, so none is written
            // below it (checked first, so an error shows the value given).
            options.lock_threshold = Duration::from_micros(threshold.as_nanos().div_ceil(1_000) as u64);
        }
        "lockvirtual" => options.lock_virtual = Some(parse_bool(key, value)?),
        "remotesym" => options.remote_symbolication = parse_bool(key, value)?,
        "filter" => options.filter = parse_bool(key, value)?,
        "verifywalk" => options.verify_walk = parse_bool(key, value)?,
        "attributes" => options.attributes = parse_attributes(key, required(key, value)?)?,
        "jfrdialect" => {
            let text = required(key, value)?;
            options.dialect = Dialect::from_name(text)
                .ok_or_else(|| error(key, format!("unknown dialect '{}' (accepted: jdk, datadog)", echo(text))))?;
        }
        "overhead" => {
            let v = required(key, value)?;
            let accepted = format!("accepted: 0 (off) to {MAX_OVERHEAD_PERCENT}, percent of the application's CPU");
            let percent = v.strip_suffix('%').unwrap_or(v);
            options.overhead = parse_count(key, percent, 0..=MAX_OVERHEAD_PERCENT, &accepted)?;
        }
        "log" => options.log_file = Some(required(key, value)?.to_owned()),
        "reply" => options.reply = Some(required(key, value)?.to_owned()),
        "loglevel" => options.log_level = parse_log_level(key, required(key, value)?)?,
        other => {
            if !parse_continuous(other, value, &mut options.continuous)?
                && !crate::args::export::parse(other, value, &mut options.export)?
            {
                return Err(unknown_option(other));
            }
        }
    }
    Ok(())
}

/// What options decide together: the events and their intervals, the
/// options that apply only with another, warnings about cost.
fn resolve(mut options: Options, pending: Pending<'_>, given: &[Item<'_>]) -> Result<Options, OptionError> {
    let Pending { event, interval, cpu_interval, cpu_requested, wall_interval_given, java_walk } = pending;
    let item = |key: &str| given.iter().find(|item| item.key == key).map_or("", |item| item.text);
    let contradiction = |key: &str, other: &str, why: &str| {
        error(key, format!("'{}' contradicts '{}': {why}", echo(item(key)), echo(item(other))))
    };
    // `interval` applies to the event chosen with `event=`, CPU by default.
    let wall_event = event == Some("wall");
    if wall_event {
        if cpu_requested {
            return Err(contradiction("cpu", "event", "event=wall is wall-clock sampling only (use wall with cpu)"));
        }
        if let (Some(i), true) = (interval, wall_interval_given) {
            if options.wall != Some(i) {
                return Err(contradiction("interval", "wall", "both set the wall-clock interval"));
            }
        }
        let (key, period) = match interval {
            Some(i) => ("interval", i),
            None => ("wall", options.wall.unwrap_or(DEFAULT_WALL_INTERVAL)),
        };
        options.wall = Some(limit(key, period, &WALL_LIMITS, &mut options.warnings)?);
    } else if let Some(period) = options.wall {
        options.wall = Some(limit("wall", period, &WALL_LIMITS, &mut options.warnings)?);
    }
    let cpu_event = match event {
        Some("itimer") => Some(CpuEngineKind::Itimer),
        Some("ctimer") => Some(CpuEngineKind::Ctimer),
        Some("cpu") => Some(CpuEngineKind::PerfCpuClock),
        _ => None,
    };
    let other_event =
        options.wall.is_some() || options.alloc.is_some() || options.lock.is_some() || options.nativemem.is_some();
    let cpu_on = cpu_event.is_some() || cpu_requested || (options.action == Some(Action::Start) && !other_event);
    if let (Some(i), Some(c), false) = (interval, cpu_interval, wall_event) {
        if i != c {
            return Err(contradiction("interval", "cpu", "both set the CPU sampling interval"));
        }
    }
    if interval.is_some() && !wall_event && !cpu_on && other_event {
        let selected: Vec<&str> = [
            ("wall", options.wall.is_some()),
            ("alloc", options.alloc.is_some()),
            ("lock", options.lock.is_some()),
            ("nativemem", options.nativemem.is_some()),
        ]
        .iter()
        .filter_map(|&(name, on)| on.then_some(name))
        .collect();
        return Err(error(
            "interval",
            format!(
                "'{}' sets the interval of CPU sampling (or of event=), which is not selected (selected: {}); \
                 give cpu=INTERVAL to sample CPU too",
                echo(item("interval")),
                selected.join(", ")
            ),
        ));
    }
    if cpu_on {
        let (key, period) = match (cpu_interval, interval.filter(|_| !wall_event)) {
            (Some(c), _) => ("cpu", c),
            (None, Some(i)) => ("interval", i),
            (None, None) => ("cpu", DEFAULT_CPU_INTERVAL),
        };
        let period = limit(key, period, &CPU_LIMITS, &mut options.warnings)?;
        options.cpu = Some((cpu_event.unwrap_or(CpuEngineKind::PerfCpuClock), period));
    }
    if let Some(java) = java_walk {
        options.cstack = options.cstack.with_java(java).map_err(|why| error("javawalk", why))?;
    }
    if options.live && options.alloc.is_none() {
        return Err(error("live", "tracks the objects allocation sampling samples: add alloc[=BYTES]"));
    }
    if options.nofree && options.nativemem.is_none() {
        return Err(error("nofree", "applies to native memory profiling: add nativemem[=BYTES]"));
    }
    for key in ["lockthreshold", "lockvirtual"] {
        if !item(key).is_empty() && options.lock.is_none() {
            return Err(error(key, "applies to lock profiling: add lock[=INTERVAL]"));
        }
    }
    if let Some(wall) = options.wall {
        let per_second = u64::from(options.wall_threads_per_tick) * 1_000_000_000 / (wall.as_nanos() as u64).max(1);
        if per_second > COSTLY_WALL_SIGNALS_PER_SECOND {
            options.warnings.push(format!(
                "wall={} with walltpt={} asks for up to {per_second} signals a second; ticks the sampler thread \
                 cannot keep are skipped (counted as wall_ticks_skipped)",
                spell(wall),
                options.wall_threads_per_tick
            ));
        }
    }
    check_continuous(&mut options, item("loop"), item("file"))?;
    check_export_dialect(&mut options, item("jfrdialect"))?;
    Ok(options)
}

/// `datadog=` ships the Datadog profiler's events, `pyroscope=` the JDK's
/// (which Pyroscope parses), and a session writes one dialect: without
/// `jfrdialect=`, the exporter's is chosen.
fn check_export_dialect(options: &mut Options, dialect_item: &str) -> Result<(), OptionError> {
    let (datadog, pyroscope) = (options.export.datadog.is_some(), options.export.pyroscope.is_some());
    if datadog && pyroscope {
        return Err(error(
            "datadog",
            "ships jfrdialect=datadog and pyroscope= the jdk dialect, and a session writes one: ship to one of them",
        ));
    }
    if dialect_item.is_empty() {
        if datadog {
            options.dialect = Dialect::Datadog;
        }
        return Ok(());
    }
    match (datadog, pyroscope, options.dialect) {
        (true, _, Dialect::Jdk) => {
            Err(error("datadog", "ships the Datadog profiler's events: jfrdialect=jdk contradicts it"))
        }
        (_, true, Dialect::Datadog) => {
            Err(error("pyroscope", "reads the JDK's events: jfrdialect=datadog contradicts it"))
        }
        _ => Ok(()),
    }
}

/// Parses the options of [`Continuous`]; false for any other option.
fn parse_continuous(key: &str, value: Option<&str>, continuous: &mut Continuous) -> Result<bool, OptionError> {
    let within = |value: Duration, (floor, ceiling): (Duration, Duration)| {
        if value < floor || value > ceiling {
            Err(error(
                key,
                format!("{} is out of range (accepted: {} to {})", spell(value), spell(floor), spell(ceiling)),
            ))
        } else {
            Ok(value)
        }
    };
    match key {
        "loop" => continuous.period = Some(within(parse_time(key, required(key, value)?)?, LOOP_RANGE)?),
        "chunktime" => continuous.chunk_time = Some(within(parse_time(key, required(key, value)?)?, CHUNK_TIME_RANGE)?),
        "timeout" => continuous.timeout = Some(within(parse_time(key, required(key, value)?)?, LOOP_RANGE)?),
        "maxage" => continuous.retention.max_age = Some(parse_time(key, required(key, value)?)?),
        "chunksize" => {
            let bytes = parse_size(key, required(key, value)?)?;
            let (floor, ceiling) = CHUNK_SIZE_RANGE;
            if bytes < floor || bytes > ceiling {
                return Err(error(key, format!("{bytes} bytes is out of range (accepted: 64k to 1g)")));
            }
            continuous.chunk_size = bytes;
        }
        "maxsize" => continuous.retention.max_size = Some(parse_size(key, required(key, value)?)?),
        "maxfiles" => {
            let v = required(key, value)?;
            let accepted = "accepted: a positive number of files";
            let files: u32 =
                v.parse().map_err(|_| error(key, format!("'{}' is not a number ({accepted})", echo(v))))?;
            if files == 0 {
                return Err(error(key, format!("0 keeps no file ({accepted})")));
            }
            continuous.retention.max_files = Some(files);
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// `loop` needs a `file=` whose expansion changes from period to period;
/// `maxfiles` and `maxage` apply to a looping session's files, `maxsize`
/// also to a single session file; without any bound a session keeps
/// [`DEFAULT_MAX_SIZE`] on disk.
fn check_continuous(options: &mut Options, loop_item: &str, file_item: &str) -> Result<(), OptionError> {
    let continuous = &mut options.continuous;
    let retention = &mut continuous.retention;
    if retention.max_files.is_none() && retention.max_size.is_none() && retention.max_age.is_none() {
        retention.max_size = Some(DEFAULT_MAX_SIZE);
    }
    if continuous.period.is_none() {
        let per_file = [("maxfiles", retention.max_files.is_some()), ("maxage", retention.max_age.is_some())];
        if let Some((key, _)) = per_file.iter().find(|(_, given)| *given) {
            return Err(error(key, "applies to the files of a looping session: add loop=DURATION"));
        }
        return Ok(());
    }
    let Some(template) = options.file.as_deref() else {
        if options.export.any() {
            // Periods shipped, none kept on disk.
            return Ok(());
        }
        return Err(error("loop", "needs file=PATTERN, expanded for each period (e.g. file=profile-%t.jfr)"));
    };
    if let (Some(age), Some(period)) = (retention.max_age, continuous.period) {
        if age < period {
            return Err(error(
                "maxage",
                format!("{} is shorter than loop={}: every file would go as it is finished", spell(age), spell(period)),
            ));
        }
    }
    if !varies_by_period(template) {
        return Err(error(
            "loop",
            format!(
                "'{}' with '{}' names every period's file the same: add %t (start time) or %n (sequence number)",
                echo(loop_item),
                echo(file_item)
            ),
        ));
    }
    Ok(())
}

fn action_name(action: Action) -> &'static str {
    match action {
        Action::Start => "start",
        Action::Stop => "stop",
        Action::Dump => "dump",
        Action::Status => "status",
        Action::Version => "version",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn start_defaults_to_perf_cpu_at_ten_milliseconds() {
        let o = parse("start,file=out.jfr").unwrap();
        assert_eq!(o.action, Some(Action::Start));
        assert_eq!(o.cpu, Some((CpuEngineKind::PerfCpuClock, ms(10))));
        assert_eq!(o.file.as_deref(), Some("out.jfr"));
        assert_eq!(o.jstackdepth, 2048);
        assert!(!o.remote_symbolication);
        assert_eq!(o.cstack, StackPlan::default());
    }

    #[test]
    fn looping_needs_a_file_pattern_that_changes_and_keeps_a_default_bound() {
        let o = parse("start,loop=10m,file=p-%t.jfr").unwrap();
        assert_eq!(o.continuous.period, Some(Duration::from_secs(600)));
        assert_eq!(o.continuous.retention.max_size, Some(DEFAULT_MAX_SIZE), "no session fills a disk");
        let o = parse("start,file=one.jfr").unwrap();
        assert_eq!(o.continuous.retention.max_size, Some(DEFAULT_MAX_SIZE), "nor one file");
        assert_eq!(parse("start,file=one.jfr,maxsize=1m").unwrap().continuous.retention.max_size, Some(1 << 20));
        let o = parse("start,loop=1h,file=p-%n{24}.jfr,maxfiles=24,chunksize=1m,chunktime=30s,timeout=7d").unwrap();
        let c = &o.continuous;
        assert_eq!(
            (c.period, c.retention.max_files, c.retention.max_size),
            (Some(Duration::from_secs(3600)), Some(24), None)
        );
        assert_eq!((c.chunk_size, c.chunk_time), (1 << 20, Some(Duration::from_secs(30))));
        assert_eq!(c.timeout, Some(Duration::from_secs(7 * 86_400)));
        let e = err("start,loop=1m,file=same.jfr");
        assert_eq!(e.option, "loop");
        assert!(e.message.contains("same.jfr") && e.message.contains("%t"), "{e}");
        assert_eq!(err("start,loop=1m,file=p-%%t.jfr").option, "loop", "an escaped %t names nothing");
        assert_eq!(err("start,loop=1m,file=p-%n{1}.jfr").option, "loop", "one number for every period");
        assert!(parse("start,loop=1m,file=p-%n{2}-%%.jfr").is_ok());
        assert_eq!(err("start,loop=1h,maxage=30m,file=%t").option, "maxage");
        assert_eq!(err("start,timeout=500ms").option, "timeout");
        assert_eq!(err("start,loop=1m").option, "loop");
        assert_eq!(err("start,maxfiles=3,file=a.jfr").option, "maxfiles");
        assert_eq!(err("start,maxage=1h,file=a.jfr").option, "maxage");
        assert_eq!(err("start,loop=500ms,file=%t").option, "loop");
        assert_eq!(err("start,chunksize=1k").option, "chunksize");
        assert_eq!(err("start,chunktime=2d").option, "chunktime");
        assert_eq!(err("start,loop=1m,file=%t,maxfiles=0").option, "maxfiles");
        assert_eq!(err("start,timeout=5x").option, "timeout");
        assert!(parse("start,maxsize=10g,loop=1d,file=%t").is_ok());
    }

    #[test]
    fn empty_string_only_loads() {
        assert_eq!(parse("").unwrap(), Options::default());
    }

    #[test]
    fn interval_units() {
        assert_eq!(parse_interval("interval", "100").unwrap(), Duration::from_nanos(100));
        assert_eq!(parse_interval("interval", "7ns").unwrap(), Duration::from_nanos(7));
        assert_eq!(parse_interval("interval", "250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_interval("interval", "10ms").unwrap(), ms(10));
        assert_eq!(parse_interval("interval", "2s").unwrap(), Duration::from_secs(2));
    }

    #[test]
    fn cpu_and_event_forms() {
        assert_eq!(parse("start,cpu=1ms").unwrap().cpu, Some((CpuEngineKind::PerfCpuClock, ms(1))));
        assert_eq!(parse("start,cpu").unwrap().cpu, Some((CpuEngineKind::PerfCpuClock, ms(10))));
        assert_eq!(parse("start,event=itimer,interval=5ms").unwrap().cpu, Some((CpuEngineKind::Itimer, ms(5))));
        assert_eq!(parse("start,event=ctimer").unwrap().cpu, Some((CpuEngineKind::Ctimer, ms(10))));
        assert_eq!(parse("start,interval=1000000").unwrap().cpu, Some((CpuEngineKind::PerfCpuClock, ms(1))));
    }

    #[test]
    fn wall_forms() {
        let o = parse("start,wall").unwrap();
        assert_eq!(o.wall, Some(ms(50)));
        assert_eq!(o.cpu, None);
        assert_eq!(parse("start,wall=5ms").unwrap().wall, Some(ms(5)));
        assert_eq!(parse("start,wall").unwrap().wall_threads_per_tick, 16);
        assert_eq!(parse("start,wall,walltpt=4").unwrap().wall_threads_per_tick, 4);
        assert_eq!(err("walltpt=0").option, "walltpt");
        assert!(err("walltpt=many").message.contains("1 to 1024"));
        let o = parse("start,event=wall,interval=20ms").unwrap();
        assert_eq!((o.wall, o.cpu), (Some(ms(20)), None));
        let o = parse("start,cpu=1ms,wall=2ms").unwrap();
        assert_eq!((o.cpu, o.wall), (Some((CpuEngineKind::PerfCpuClock, ms(1))), Some(ms(2))));
    }

    #[test]
    fn every_boolean_spelling() {
        for t in ["y", "yes", "t", "true", "1", "YES", "True"] {
            assert!(parse(&format!("remotesym={t}")).unwrap().remote_symbolication, "{t}");
        }
        for f in ["n", "no", "f", "false", "0", "NO", "False"] {
            assert!(!parse(&format!("remotesym={f}")).unwrap().remote_symbolication, "{f}");
        }
        assert!(parse("remotesym").unwrap().remote_symbolication);
    }

    #[test]
    fn attributes_and_filter() {
        let o = parse("start,attributes=http.route;customer,filter").unwrap();
        assert_eq!(o.attributes, vec!["http.route".to_owned(), "customer".to_owned()]);
        assert!(o.filter);
        assert!(!parse("filter=false").unwrap().filter);
    }

    #[test]
    fn cstack_modes() {
        for text in ["fp", "dwarf", "sframe", "vm", "vmx", "no"] {
            assert_eq!(parse(&format!("cstack={text}")).unwrap().cstack.spelling(), text);
        }
        // javawalk applies wherever it is given, and only where cstack
        // does not name the walker itself.
        for text in ["javawalk=asgct,cstack=fp", "cstack=fp,javawalk=asgct"] {
            let plan = parse(text).unwrap().cstack;
            assert_eq!((plan.spelling(), plan.java_spelling()), ("fp", "asgct"), "{text}");
        }
        assert_eq!(parse("cstack=vm,javawalk=hotspot").unwrap().cstack.spelling(), "vm");
        let e = err("cstack=vm,javawalk=asgct");
        assert_eq!(e.option, "javawalk");
        assert!(e.message.contains("cstack=fp, dwarf, sframe or no"), "{e}");
        let e = err("javawalk=jvmti");
        assert!(e.message.contains("'jvmti'") && e.message.contains("hotspot, asgct"), "{e}");
    }

    #[test]
    fn other_options() {
        let o = parse("start,jfr,jstackdepth=4096,log=/tmp/p.log,loglevel=debug").unwrap();
        assert_eq!(o.jstackdepth, 4096);
        assert_eq!(o.log_file.as_deref(), Some("/tmp/p.log"));
        assert_eq!(o.log_level, LogLevel::Debug);
        for action in
            [("stop", Action::Stop), ("dump", Action::Dump), ("status", Action::Status), ("version", Action::Version)]
        {
            assert_eq!(parse(action.0).unwrap().action, Some(action.1));
        }
    }

    #[test]
    fn the_reply_file_is_found_even_in_a_refused_option_string() {
        assert_eq!(parse("status,reply=/tmp/r").unwrap().reply.as_deref(), Some("/tmp/r"));
        assert_eq!(reply_path("start,interval=fast,reply=/tmp/r"), Some("/tmp/r"));
        assert_eq!(reply_path("start,reply="), None);
        assert_eq!(err("status,reply").option, "reply");
    }

    fn err(input: &str) -> OptionError {
        parse(input).expect_err(input)
    }

    #[test]
    fn alloc_takes_a_byte_interval() {
        assert_eq!(parse("start,alloc").unwrap().alloc, Some(DEFAULT_ALLOC_INTERVAL));
        assert_eq!(parse("start,alloc=64k").unwrap().alloc, Some(64 * 1024));
        assert_eq!(parse("start,alloc=2M").unwrap().alloc, Some(2 << 20));
        assert_eq!(parse("start,alloc=1024").unwrap().alloc, Some(1024));
        // Allocation sampling alone does not imply CPU sampling.
        assert_eq!(parse("start,alloc").unwrap().cpu, None);
        assert!(parse("start,alloc,cpu").unwrap().cpu.is_some());
        assert!(parse("start,alloc,live").unwrap().live);
        assert!(!parse("start,alloc,live=false").unwrap().live);
        let e = err("start,live");
        assert_eq!(e.option, "live");
        assert!(e.message.contains("alloc"), "{}", e.message);
        for bad in ["alloc=0", "alloc=-1", "alloc=1x", "alloc=", "alloc=2g", "alloc=k", "alloc=1000"] {
            let e = err(bad);
            assert_eq!(e.option, "alloc", "{bad}");
            assert!(e.message.contains("512k"), "{bad}: {e}");
        }
    }

    #[test]
    fn lock_takes_a_sampling_interval_and_a_threshold() {
        assert_eq!(parse("start,lock").unwrap().lock, Some(DEFAULT_LOCK_INTERVAL));
        assert_eq!(parse("start,lock").unwrap().lock_threshold, Duration::ZERO);
        assert_eq!(parse("start,lock=100us").unwrap().lock, Some(Duration::from_micros(100)));
        assert!(err("start,lock=999ns").message.contains("999ns is below"), "{}", err("start,lock=999ns").message);
        assert_eq!(parse("start,lock").unwrap().cpu, None);
        for bad in ["lock=abc", "lock=0", "lock=1x", "lock=", "lock=61s"] {
            assert_eq!(err(bad).option, "lock", "{bad}");
        }
        let o = parse("start,lock,lockthreshold=10500ns").unwrap();
        assert_eq!(o.lock_threshold, Duration::from_micros(11), "whole microseconds");
        for zero in ["0", "0ns", "0us", "0ms", "0s"] {
            assert_eq!(parse(&format!("start,lock,lockthreshold={zero}")).unwrap().lock_threshold, Duration::ZERO);
        }
        for bad in ["lock,lockthreshold=abc", "lock,lockthreshold", "lock,lockthreshold=2min", "lockthreshold=1ms"] {
            assert_eq!(err(bad).option, "lockthreshold", "{bad}");
        }
        assert_eq!(parse("start,lock").unwrap().lock_virtual, None, "decided by the JDK");
        assert_eq!(parse("start,lock,lockvirtual=false").unwrap().lock_virtual, Some(false));
        assert_eq!(parse("start,lock,lockvirtual").unwrap().lock_virtual, Some(true));
        for bad in ["lock,lockvirtual=maybe", "lockvirtual"] {
            assert_eq!(err(bad).option, "lockvirtual", "{bad}");
        }
    }

    #[test]
    fn the_dialect_is_jdk_unless_chosen() {
        assert_eq!(parse("start").unwrap().dialect, Dialect::Jdk);
        assert_eq!(parse("start,jfrdialect=datadog").unwrap().dialect, Dialect::Datadog);
        assert_eq!(parse("start,jfrdialect=jdk").unwrap().dialect, Dialect::Jdk);
    }

    #[test]
    fn bad_options_name_the_option_and_what_is_accepted() {
        let e = err("start,bogus=1");
        assert_eq!(e.option, "bogus");
        assert!(e.message.contains("unknown option") && e.message.contains("interval"), "{e}");

        let e = err("interval=abc");
        assert_eq!(e.option, "interval");
        assert!(e.message.contains("not a number") && e.message.contains("ms"), "{e}");

        let e = err("interval=10xs");
        assert!(e.message.contains("unknown unit 'xs'"), "{e}");

        let e = err("remotesym=maybe");
        assert_eq!(e.option, "remotesym");
        assert!(e.message.contains("yes") && e.message.contains("false"), "{e}");

        let e = err("file=");
        assert_eq!((e.option.as_str(), e.message.as_str()), ("file", "requires a value"));

        let e = err("event=alloc");
        assert!(e.message.contains("cpu, itimer, ctimer, wall"), "{e}");

        assert_eq!(err("jstackdepth=0").option, "jstackdepth");
        assert_eq!(err("jstackdepth=-5").option, "jstackdepth");
        assert_eq!(err("interval=0").option, "interval");
        assert_eq!(err("interval=99999999999999999999").option, "interval");
        assert_eq!(err("cpu=1h").option, "cpu");
        assert_eq!(err("cstack=lbr").option, "cstack");
        assert_eq!(err("loglevel=loud").option, "loglevel");
        let e = err("jfrdialect=jfr");
        assert_eq!(e.option, "jfrdialect");
        assert!(e.message.contains("'jfr'") && e.message.contains("jdk, datadog"), "{e}");
        assert_eq!(err("jfrdialect=").option, "jfrdialect");
        assert_eq!(err("start=now").option, "start");
        assert_eq!(err("start,stop").option, "stop");
        assert_eq!(err("attributes=a;;b").option, "attributes");
        assert_eq!(err("attributes=a;a").option, "attributes");
        assert_eq!(err("attributes=a;b;c;d;e;f;g;h;i").option, "attributes");
        assert_eq!(err("filter=sometimes").option, "filter");
        assert_eq!(err("verifywalk=perhaps").option, "verifywalk");
        assert!(parse("cstack=vm,verifywalk").unwrap().verify_walk);
    }

    #[test]
    fn intervals_have_floors_and_ceilings_named_in_the_error() {
        let cases = [
            ("start,interval=1ns", "interval", "100us"),
            ("start,interval=99us", "interval", "100us"),
            ("start,cpu=50us", "cpu", "100us"),
            ("start,event=itimer,interval=10us", "interval", "100us"),
            ("start,cpu=120s", "cpu", "60s"),
            ("start,wall=1ns", "wall", "100us"),
            ("start,wall=5us", "wall", "100us"),
            ("start,event=wall,interval=1us", "interval", "100us"),
            ("start,wall=61s", "wall", "60s"),
            ("start,lock=999ns", "lock", "1us"),
            ("start,lock=3600s", "lock", "60s"),
        ];
        for (input, option, limit) in cases {
            let e = err(input);
            assert_eq!(e.option, option, "{input}: {e}");
            assert!(e.message.contains(limit) && e.message.contains("accepted"), "{input}: {e}");
        }
        let e = err("start,alloc=512");
        assert!(e.option == "alloc" && e.message.contains("floor of 1k"), "{e}");
        assert!(err("start,walltpt=1025").message.contains("1 to 1024"));
        assert!(err("start,jstackdepth=65537").message.contains("1 to 65536"));
        // The floors themselves are accepted.
        assert_eq!(
            parse("start,cpu=100us").unwrap().cpu,
            Some((CpuEngineKind::PerfCpuClock, Duration::from_micros(100)))
        );
        assert_eq!(parse("start,wall=100us").unwrap().wall, Some(Duration::from_micros(100)));
        assert_eq!(parse("start,lock=10us").unwrap().lock, Some(Duration::from_micros(10)));
        assert_eq!(parse("start,alloc=1k").unwrap().alloc, Some(1024));
        assert_eq!(parse("start,cpu=60s").unwrap().cpu, Some((CpuEngineKind::PerfCpuClock, Duration::from_secs(60))));
    }

    #[test]
    fn costly_settings_are_accepted_with_a_warning() {
        assert!(parse("start,file=x.jfr").unwrap().warnings.is_empty(), "the defaults cost nothing to warn about");
        assert!(parse("start,cpu=1ms,wall=1ms,alloc=64k,lock=1ms,jstackdepth=8192").unwrap().warnings.is_empty());
        let cases = [
            ("start,cpu=500us", "cpu=500us"),
            ("start,interval=200us", "interval=200us"),
            ("start,wall=500us", "wall=500us"),
            ("start,wall=5ms,walltpt=1024", "204800 signals a second"),
            ("start,alloc=4k", "alloc=4096"),
            ("start,lock=2us", "lock=2us"),
            ("start,jstackdepth=10000", "jstackdepth=10000"),
        ];
        for (input, needle) in cases {
            let warnings = parse(input).unwrap().warnings;
            assert!(warnings.iter().any(|w| w.contains(needle)), "{input}: {warnings:?}");
        }
    }

    #[test]
    fn an_option_given_twice_with_another_value_is_an_error_naming_both() {
        for (input, option, first, second) in [
            ("start,event=cpu,event=wall", "event", "event=cpu", "event=wall"),
            ("start,cpu=1ms,cpu=2ms", "cpu", "cpu=1ms", "cpu=2ms"),
            ("start,file=a.jfr,file=b.jfr", "file", "file=a.jfr", "file=b.jfr"),
            ("start,wall,wall=5ms", "wall", "wall", "wall=5ms"),
            ("start,filter,filter=false", "filter", "filter", "filter=false"),
            ("start,attributes=a,attributes=b", "attributes", "attributes=a", "attributes=b"),
        ] {
            let e = err(input);
            assert_eq!(e.option, option, "{input}");
            assert!(e.message.contains(first) && e.message.contains(second), "{input}: {e}");
        }
        // The same item twice says nothing new.
        let o = parse("start,start,cpu=1ms,cpu=1ms,filter,filter").unwrap();
        assert_eq!(
            (o.action, o.cpu, o.filter),
            (Some(Action::Start), Some((CpuEngineKind::PerfCpuClock, ms(1))), true)
        );
    }

    #[test]
    fn contradicting_options_are_an_error_naming_both() {
        for (input, option, other) in [
            ("start,event=wall,cpu", "cpu", "event=wall"),
            ("start,event=wall,cpu=1ms", "cpu=1ms", "event=wall"),
            ("start,interval=1ms,cpu=2ms", "interval=1ms", "cpu=2ms"),
            ("start,event=ctimer,interval=1ms,cpu=2ms", "interval=1ms", "cpu=2ms"),
            ("start,event=wall,interval=10ms,wall=20ms", "interval=10ms", "wall=20ms"),
        ] {
            let e = err(input);
            assert!(e.message.contains(option) && e.message.contains(other), "{input}: {e}");
        }
        // An interval no selected event uses.
        for input in ["start,wall=5ms,interval=1ms", "start,alloc,interval=1ms", "start,lock,interval=1ms"] {
            let e = err(input);
            assert_eq!(e.option, "interval", "{input}");
            assert!(e.message.contains("cpu=INTERVAL"), "{input}: {e}");
        }
        // The documented combinations still work.
        let o = parse("start,event=cpu,interval=1ms,wall=5ms").unwrap();
        assert_eq!((o.cpu, o.wall), (Some((CpuEngineKind::PerfCpuClock, ms(1))), Some(ms(5))));
        let o = parse("start,interval=2ms,cpu=2ms").unwrap();
        assert_eq!(o.cpu, Some((CpuEngineKind::PerfCpuClock, ms(2))));
        let o = parse("start,event=ctimer,cpu=2ms,wall").unwrap();
        assert_eq!((o.cpu, o.wall), (Some((CpuEngineKind::Ctimer, ms(2))), Some(ms(50))));
        let o = parse("start,event=wall,wall,interval=20ms").unwrap();
        assert_eq!((o.cpu, o.wall), (None, Some(ms(20))));
        let o = parse("start,event=wall,wall=20ms,interval=20ms").unwrap();
        assert_eq!(o.wall, Some(ms(20)));
        let o = parse("start,cpu=1ms,wall=5ms,alloc,lock").unwrap();
        assert!(o.cpu.is_some() && o.wall.is_some() && o.alloc.is_some() && o.lock.is_some());
    }

    #[test]
    fn empty_items_are_an_error() {
        for input in ["start,,", "start,", ",start", "start,,cpu", ","] {
            let e = err(input);
            assert!(e.message.contains("empty"), "{input}: {e}");
        }
        assert_eq!(err("=5").option, "=5");
    }

    #[test]
    fn echoed_values_are_cut() {
        let long = "x".repeat(100_000);
        for input in [
            format!("start,interval={long}"),
            format!("start,{long}"),
            format!("start,file=a,file={long}"),
            format!("start,cstack={long}"),
            format!("{long},,"),
        ] {
            let e = err(&input);
            let text = e.to_string();
            assert!(text.len() < 1000, "{} bytes: {}", text.len(), &text[..300]);
            assert!(text.contains(" bytes in all)"), "{text}");
        }
        assert_eq!(echo("short"), "short");
        let cut = echo(&"é".repeat(300));
        assert!(cut.starts_with(&"é".repeat(200)) && cut.ends_with("… (600 bytes in all)"), "{cut}");
    }

    #[test]
    fn overhead_is_a_percentage_of_the_applications_cpu() {
        assert_eq!(parse("start").unwrap().overhead, DEFAULT_OVERHEAD_PERCENT);
        assert_eq!(parse("start,overhead=2").unwrap().overhead, 2);
        assert_eq!(parse("start,overhead=15%").unwrap().overhead, 15);
        assert_eq!(parse("start,overhead=0").unwrap().overhead, 0);
        for bad in ["overhead=", "overhead=lots", "overhead=1001", "overhead=-1"] {
            assert_eq!(err(bad).option, "overhead", "{bad}");
        }
    }

    #[test]
    fn path_expansion() {
        let at = |pid, unix_seconds, sequence| Naming { pid, unix_seconds, sequence };
        assert_eq!(expand_path("/tmp/p-%p.jfr", &at(42, 0, 0)), "/tmp/p-42.jfr");
        assert_eq!(expand_path("%t.jfr", &at(1, 1_700_000_000, 0)), "20231114-221320.jfr");
        assert_eq!(expand_path("100%%-%x", &at(1, 0, 0)), "100%-%x");
        assert_eq!(expand_path("%t", &at(1, 951_782_400, 0)), "20000229-000000");
        assert_eq!(expand_path("p-%n.jfr", &at(1, 0, 12)), "p-12.jfr");
        assert_eq!(expand_path("p-%n{5}.jfr", &at(1, 0, 12)), "p-2.jfr");
        assert_eq!(expand_path("p-%n{x}-%n{0}", &at(1, 0, 3)), "p-3{x}-3{0}", "no modulus: the number alone");
        assert_eq!(expand_path("%{PATH}", &at(1, 0, 0)), std::env::var("PATH").unwrap());
        assert_eq!(expand_path("a%{PROFILER_NO_SUCH_VAR}b-%{open", &at(1, 0, 0)), "ab-%{open");
        assert_eq!(expand_path("%", &at(1, 0, 0)), "%");
        for path in ["/tmp/a.jfr", "/tmp/100%-%p%%t.jfr", "%n{3}%{HOME}"] {
            assert_eq!(expand_path(&escape_path(path), &at(7, 0, 9)), path);
        }
    }

    #[test]
    fn every_key_in_keys_reaches_the_parser() {
        for key in KEYS {
            for input in [key.to_string(), format!("{key}=1")] {
                if let Err(e) = parse(&input) {
                    assert!(!e.message.starts_with("unknown option"), "{input}: {e}");
                }
            }
        }
        let mut sorted = KEYS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), KEYS.len(), "a key listed twice");
    }

    #[test]
    fn keys_not_in_keys_are_refused_naming_every_key() {
        for key in ["bogus", "Start", "intervals", "cpu ", "event.cpu", "maxfile"] {
            let e = err(&format!("start,{key}=1"));
            assert_eq!(e.option, key);
            assert!(e.message.starts_with("unknown option"), "{e}");
            for known in KEYS {
                assert!(e.message.contains(known), "{known} missing from: {e}");
            }
        }
    }

    /// The option names in the first column of `docs/options.md`'s table.
    fn documented_keys() -> Vec<&'static str> {
        let doc = include_str!("../../../docs/options.md");
        let table = doc
            .lines()
            .skip_while(|line| !line.starts_with("| option |"))
            .skip(2)
            .take_while(|line| line.starts_with('|'));
        let mut keys = Vec::new();
        for row in table {
            let first = row.split('|').nth(1).unwrap_or("");
            keys.extend(first.split('`').skip(1).step_by(2));
        }
        keys
    }

    #[test]
    fn the_option_reference_lists_every_key_and_no_other() {
        let documented = documented_keys();
        assert!(!documented.is_empty(), "docs/options.md has no table starting with '| option |'");
        for key in KEYS {
            assert!(documented.contains(key), "`{key}` is not in docs/options.md's table");
        }
        for key in &documented {
            assert!(KEYS.contains(key), "docs/options.md's table lists `{key}`, which the parser does not accept");
        }
    }
}
