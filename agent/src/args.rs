//! The agent option string (`-agentpath:libprofiler.so=<options>`, the
//! `jcmd ... JVMTI.agent_load` argument, or `JavaProfiler.execute`) parsed
//! into a typed configuration. Pure: no side effects, no global state.

use crate::stack_plan::StackPlan;
use jfr_writer::Dialect;
use std::fmt;
use std::time::Duration;

/// What a command asks the profiler to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Start,
    Stop,
    Dump,
    Status,
    Version,
}

/// The CPU sampling engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuEngineKind {
    /// perf_events `cpu-clock` per thread, falling back to `ctimer`, then `itimer`.
    PerfCpuClock,
    /// `timer_create` on each thread's CPU clock, falling back to `itimer`.
    Ctimer,
    /// `setitimer(ITIMER_PROF)`: process-wide CPU time.
    Itimer,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
    None,
}

pub const DEFAULT_CPU_INTERVAL: Duration = Duration::from_millis(10);
pub const DEFAULT_WALL_INTERVAL: Duration = Duration::from_millis(50);
/// Threads signalled per wall-clock interval by default (`walltpt=`).
pub const DEFAULT_WALL_THREADS_PER_TICK: u32 = 16;
const MAX_WALL_THREADS_PER_TICK: u32 = 1024;
pub const DEFAULT_JSTACKDEPTH: u32 = 2048;
pub const MAX_JSTACKDEPTH: u32 = 65_536;
/// At most this many context attributes (`attributes=`).
pub const MAX_ATTRIBUTES: usize = 8;
/// Contended lock waits recorded from this long by default (`lock`): the
/// JDK's own profiling threshold.
pub const DEFAULT_LOCK_THRESHOLD: Duration = Duration::from_millis(10);
/// Bytes between allocation samples by default (`alloc`).
pub const DEFAULT_ALLOC_INTERVAL: u32 = 512 * 1024;

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
    /// Contended monitor waits at least this long are recorded (`lock=`).
    pub lock: Option<Duration>,
    /// Threads signalled per wall-clock interval (`walltpt=`).
    pub wall_threads_per_tick: u32,
    /// Output path template (`%p` = pid, `%t` = timestamp).
    pub file: Option<String>,
    /// How stacks are walked (`cstack=`; frame pointers by default).
    pub cstack: StackPlan,
    pub jstackdepth: u32,
    pub remote_symbolication: bool,
    /// With `cstack=vm`/`vmx`, also walk every sample with
    /// AsyncGetCallTrace and count agreement (`verifywalk`).
    pub verify_walk: bool,
    /// Context attribute names (`attributes=a;b`), in slot order.
    pub attributes: Vec<String>,
    /// The event names and frame encoding of recordings (`jfrdialect=`).
    pub dialect: Dialect,
    /// Sample only threads added to the filter (`filter`).
    pub filter: bool,
    pub log_file: Option<String>,
    pub log_level: LogLevel,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            action: None,
            cpu: None,
            wall: None,
            alloc: None,
            live: false,
            lock: None,
            wall_threads_per_tick: DEFAULT_WALL_THREADS_PER_TICK,
            file: None,
            cstack: StackPlan::default(),
            jstackdepth: DEFAULT_JSTACKDEPTH,
            remote_symbolication: false,
            verify_walk: false,
            attributes: Vec::new(),
            dialect: Dialect::default(),
            filter: false,
            log_file: None,
            log_level: LogLevel::Warn,
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
    OptionError { option: option.to_owned(), message: message.into() }
}

const OPTION_NAMES: &str =
    "start, stop, dump, status, version, event, cpu, wall, alloc, live, lock, walltpt, interval, file, jfr, \
     cstack, jstackdepth, remotesym, verifywalk, attributes, jfrdialect, filter, log, loglevel";

/// Parses a comma-separated option string. An empty string is valid (the
/// agent is loaded and waits for commands).
pub fn parse(input: &str) -> Result<Options, OptionError> {
    let mut options = Options::default();
    let mut event: Option<&str> = None;
    let mut interval: Option<Duration> = None;
    let mut cpu_interval: Option<Duration> = None;
    let mut cpu_requested = false;

    for item in input.split(',').filter(|item| !item.is_empty()) {
        let (key, value) = match item.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (item, None),
        };
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
                    "cpu" | "itimer" | "ctimer" | "wall" => event = Some(value),
                    other => {
                        return Err(error(
                            key,
                            format!("unknown event '{other}' (accepted: cpu, itimer, ctimer, wall)"),
                        ))
                    }
                }
            }
            "cpu" => {
                cpu_requested = true;
                if let Some(v) = value {
                    cpu_interval = Some(parse_interval(key, v)?);
                }
            }
            "wall" => {
                let period = match value {
                    Some(v) => parse_interval(key, v)?,
                    None => DEFAULT_WALL_INTERVAL,
                };
                options.wall = Some(period);
            }
            "walltpt" => {
                let v = required(key, value)?;
                let accepted = format!("accepted: 1 to {MAX_WALL_THREADS_PER_TICK}");
                let count: u32 = v.parse().map_err(|_| error(key, format!("'{v}' is not a number ({accepted})")))?;
                if count == 0 || count > MAX_WALL_THREADS_PER_TICK {
                    return Err(error(key, format!("{count} is out of range ({accepted})")));
                }
                options.wall_threads_per_tick = count;
            }
            "interval" => interval = Some(parse_interval(key, required(key, value)?)?),
            "file" => options.file = Some(required(key, value)?.to_owned()),
            "jfr" => no_value(key, value)?,
            "cstack" => {
                let text = required(key, value)?;
                options.cstack = StackPlan::parse(text).ok_or_else(|| {
                    error(key, format!("unknown mode '{text}' (accepted: {})", StackPlan::accepted()))
                })?;
            }
            "jstackdepth" => {
                let v = required(key, value)?;
                let depth: u32 = v
                    .parse()
                    .map_err(|_| error(key, format!("'{v}' is not a number (accepted: 1 to {MAX_JSTACKDEPTH})")))?;
                if depth == 0 || depth > MAX_JSTACKDEPTH {
                    return Err(error(key, format!("{depth} is out of range (accepted: 1 to {MAX_JSTACKDEPTH})")));
                }
                options.jstackdepth = depth;
            }
            "alloc" => options.alloc = Some(value.map_or(Ok(DEFAULT_ALLOC_INTERVAL), |v| parse_bytes(key, v))?),
            "live" => options.live = parse_bool(key, value)?,
            "lock" => options.lock = Some(value.map_or(Ok(DEFAULT_LOCK_THRESHOLD), |v| parse_interval(key, v))?),
            "remotesym" => options.remote_symbolication = parse_bool(key, value)?,
            "filter" => options.filter = parse_bool(key, value)?,
            "verifywalk" => options.verify_walk = parse_bool(key, value)?,
            "attributes" => options.attributes = parse_attributes(key, required(key, value)?)?,
            "jfrdialect" => {
                let text = required(key, value)?;
                options.dialect = Dialect::from_name(text)
                    .ok_or_else(|| error(key, format!("unknown dialect '{text}' (accepted: jdk, datadog)")))?;
            }
            "log" => options.log_file = Some(required(key, value)?.to_owned()),
            "loglevel" => options.log_level = parse_log_level(key, required(key, value)?)?,
            other => return Err(error(other, format!("unknown option (accepted: {OPTION_NAMES})"))),
        }
    }

    // `interval` applies to the event chosen with `event=`, CPU by default.
    let wall_event = event == Some("wall");
    if wall_event {
        options.wall = Some(interval.or(options.wall).unwrap_or(DEFAULT_WALL_INTERVAL));
    }
    let cpu_event = match event {
        Some("itimer") => Some(CpuEngineKind::Itimer),
        Some("ctimer") => Some(CpuEngineKind::Ctimer),
        Some("cpu") => Some(CpuEngineKind::PerfCpuClock),
        _ => None,
    };
    if cpu_event.is_some() || cpu_requested {
        let period = cpu_interval.or(if wall_event { None } else { interval }).unwrap_or(DEFAULT_CPU_INTERVAL);
        options.cpu = Some((cpu_event.unwrap_or(CpuEngineKind::PerfCpuClock), period));
    }
    if options.live && options.alloc.is_none() {
        return Err(error("live", "tracks the objects allocation sampling samples: add alloc[=BYTES]"));
    }
    let other_event = options.wall.is_some() || options.alloc.is_some() || options.lock.is_some();
    if options.action == Some(Action::Start) && options.cpu.is_none() && !other_event {
        options.cpu = Some((CpuEngineKind::PerfCpuClock, interval.unwrap_or(DEFAULT_CPU_INTERVAL)));
    }
    Ok(options)
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

fn required<'a>(key: &str, value: Option<&'a str>) -> Result<&'a str, OptionError> {
    match value {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(error(key, "requires a value")),
    }
}

fn no_value(key: &str, value: Option<&str>) -> Result<(), OptionError> {
    match value {
        None => Ok(()),
        Some(v) => Err(error(key, format!("takes no value (got '{v}')"))),
    }
}

/// `remotesym`, `remotesym=true`, ...: bare means true.
pub fn parse_bool(key: &str, value: Option<&str>) -> Result<bool, OptionError> {
    match value {
        None => Ok(true),
        Some(v) => match v.to_ascii_lowercase().as_str() {
            "y" | "yes" | "t" | "true" | "1" => Ok(true),
            "n" | "no" | "f" | "false" | "0" => Ok(false),
            _ => Err(error(key, format!("'{v}' is not a boolean (accepted: y, yes, t, true, 1, n, no, f, false, 0)"))),
        },
    }
}

/// A duration: nanoseconds by default, or with an `ns`, `us`, `ms` or `s`
/// suffix. Zero is refused.
pub fn parse_interval(key: &str, value: &str) -> Result<Duration, OptionError> {
    let accepted = "accepted: a positive number with optional unit ns, us, ms or s, e.g. 10ms";
    let digits_end = value.find(|c: char| !c.is_ascii_digit()).unwrap_or(value.len());
    let (digits, unit) = value.split_at(digits_end);
    if digits.is_empty() {
        return Err(error(key, format!("'{value}' is not a number ({accepted})")));
    }
    let number: u64 = digits.parse().map_err(|_| error(key, format!("'{value}' is too large ({accepted})")))?;
    let nanos_per_unit: u64 = match unit {
        "" | "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        other => return Err(error(key, format!("unknown unit '{other}' in '{value}' ({accepted})"))),
    };
    let nanos =
        number.checked_mul(nanos_per_unit).ok_or_else(|| error(key, format!("'{value}' is too large ({accepted})")))?;
    if nanos == 0 {
        return Err(error(key, format!("'{value}' must be greater than zero ({accepted})")));
    }
    Ok(Duration::from_nanos(nanos))
}

/// A byte count with optional unit `k` (KiB), `m` (MiB) or `g` (GiB):
/// positive and below 2 GiB (JVMTI takes a `jint`).
pub fn parse_bytes(key: &str, value: &str) -> Result<u32, OptionError> {
    let accepted = "accepted: a positive byte count below 2g with optional unit k, m or g, e.g. 512k";
    let digits_end = value.find(|c: char| !c.is_ascii_digit()).unwrap_or(value.len());
    let (digits, unit) = value.split_at(digits_end);
    if digits.is_empty() {
        return Err(error(key, format!("'{value}' is not a number ({accepted})")));
    }
    let number: u64 = digits.parse().map_err(|_| error(key, format!("'{value}' is too large ({accepted})")))?;
    let unit_bytes: u64 = match unit.to_ascii_lowercase().as_str() {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        _ => return Err(error(key, format!("unknown unit '{unit}' in '{value}' ({accepted})"))),
    };
    let bytes = number.checked_mul(unit_bytes).filter(|&b| b <= i32::MAX as u64);
    match bytes {
        Some(0) => Err(error(key, format!("'{value}' must be greater than zero ({accepted})"))),
        Some(b) => Ok(b as u32),
        None => Err(error(key, format!("'{value}' is too large ({accepted})"))),
    }
}

/// `name1;name2`: distinct, non-empty names, at most [`MAX_ATTRIBUTES`].
fn parse_attributes(key: &str, value: &str) -> Result<Vec<String>, OptionError> {
    let names: Vec<String> = value.split(';').map(str::to_owned).collect();
    if names.iter().any(String::is_empty) {
        return Err(error(
            key,
            format!("'{value}' has an empty name (accepted: name1;name2;... up to {MAX_ATTRIBUTES})"),
        ));
    }
    if names.len() > MAX_ATTRIBUTES {
        return Err(error(key, format!("{} names given (accepted: up to {MAX_ATTRIBUTES})", names.len())));
    }
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    if sorted.len() != names.len() {
        return Err(error(key, format!("'{value}' names an attribute twice")));
    }
    Ok(names)
}

fn parse_log_level(key: &str, value: &str) -> Result<LogLevel, OptionError> {
    Ok(match value.to_ascii_uppercase().as_str() {
        "TRACE" => LogLevel::Trace,
        "DEBUG" => LogLevel::Debug,
        "INFO" => LogLevel::Info,
        "WARN" => LogLevel::Warn,
        "ERROR" => LogLevel::Error,
        "NONE" => LogLevel::None,
        _ => {
            return Err(error(
                key,
                format!("unknown level '{value}' (accepted: TRACE, DEBUG, INFO, WARN, ERROR, NONE)"),
            ))
        }
    })
}

/// Expands `%p` (process id), `%t` (UTC timestamp `YYYYMMDD-hhmmss`) and
/// `%%` in an output path template. Other `%` sequences stay as written.
pub fn expand_path(template: &str, pid: u32, unix_seconds: u64) -> String {
    let mut out = String::with_capacity(template.len() + 16);
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some('p') => {
                chars.next();
                out.push_str(&pid.to_string());
            }
            Some('t') => {
                chars.next();
                out.push_str(&format_timestamp(unix_seconds));
            }
            Some('%') => {
                chars.next();
                out.push('%');
            }
            _ => out.push('%'),
        }
    }
    out
}

/// `YYYYMMDD-hhmmss` in UTC (days-to-civil conversion, proleptic Gregorian).
fn format_timestamp(unix_seconds: u64) -> String {
    let days = (unix_seconds / 86_400) as i64;
    let secs = unix_seconds % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}{month:02}{day:02}-{:02}{:02}{:02}", secs / 3600, secs / 60 % 60, secs % 60)
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

    fn err(input: &str) -> OptionError {
        parse(input).expect_err(input)
    }

    #[test]
    fn alloc_takes_a_byte_interval() {
        assert_eq!(parse("start,alloc").unwrap().alloc, Some(DEFAULT_ALLOC_INTERVAL));
        assert_eq!(parse("start,alloc=64k").unwrap().alloc, Some(64 * 1024));
        assert_eq!(parse("start,alloc=2M").unwrap().alloc, Some(2 << 20));
        assert_eq!(parse("start,alloc=1000").unwrap().alloc, Some(1000));
        // Allocation sampling alone does not imply CPU sampling.
        assert_eq!(parse("start,alloc").unwrap().cpu, None);
        assert!(parse("start,alloc,cpu").unwrap().cpu.is_some());
        assert!(parse("start,alloc,live").unwrap().live);
        assert!(!parse("start,alloc,live=false").unwrap().live);
        let e = err("start,live");
        assert_eq!(e.option, "live");
        assert!(e.message.contains("alloc"), "{}", e.message);
        for bad in ["alloc=0", "alloc=-1", "alloc=1x", "alloc=", "alloc=2g", "alloc=k"] {
            let e = err(bad);
            assert_eq!(e.option, "alloc", "{bad}");
            assert!(e.message.contains("512k"), "{bad}: {e}");
        }
    }

    #[test]
    fn lock_takes_a_threshold() {
        assert_eq!(parse("start,lock").unwrap().lock, Some(DEFAULT_LOCK_THRESHOLD));
        assert_eq!(parse("start,lock=100us").unwrap().lock, Some(Duration::from_micros(100)));
        assert_eq!(parse("start,lock").unwrap().cpu, None);
        for bad in ["lock=abc", "lock=0", "lock=1x", "lock="] {
            assert_eq!(err(bad).option, "lock", "{bad}");
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
    fn path_expansion() {
        assert_eq!(expand_path("/tmp/p-%p.jfr", 42, 0), "/tmp/p-42.jfr");
        assert_eq!(expand_path("%t.jfr", 1, 1_700_000_000), "20231114-221320.jfr");
        assert_eq!(expand_path("100%%-%x", 1, 0), "100%-%x");
        assert_eq!(expand_path("%t", 1, 951_782_400), "20000229-000000");
    }
}
