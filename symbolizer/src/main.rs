//! `symbolize`: resolves remote native frames and converts recordings
//! (`symbolize --help`, and `symbolize <command> --help`, for every option).

use clap::{Args as ClapArgs, CommandFactory, Parser, Subcommand};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use symbolizer::debuginfo::Locator;
use symbolizer::debuginfod::{default_cache, urls_from_env, Debuginfod};
use symbolizer::events::EventKind;
use symbolizer::otlp::OtlpOptions;
use symbolizer::recording::Recording;
use symbolizer::resolve::{Resolver, Tier};
use symbolizer::{collapsed, flamegraph, jfr_out, leaks, otlp, pprof, profile, recording, timeline};

mod progress;
use progress::Progress;

/// The exit status of a run that wrote its output from a damaged
/// recording's complete chunks (without `--partial`).
const EXIT_DAMAGED: u8 = 3;

const EXIT_STATUS: &str = "\
Exit status: 0 written; 1 error, nothing written (not a recording, no chunk readable, no events of \
the kind, bad arguments); 3 written from the complete chunks of a damaged recording (some chunks \
cut short or unreadable), or from the readable recordings of several (the others reported and left \
out), unless --partial; also when, with --output-dir, some recordings gave no output.";

/// Resolves remote native frames (by build-id: local debug files,
/// debuginfod) and converts JFR recordings into flame graphs (differential
/// ones too), timelines, collapsed stacks, pprof profiles or resolved JFR.
#[derive(Parser)]
#[command(name = "symbolize", version, after_help = EXIT_STATUS)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Collapsed stacks: a `root;…;leaf count` line per stack (FlameGraph's and async-profiler's format)
    Collapsed(Stacks),
    /// An HTML flame graph (icicle view and search in the page)
    Flamegraph {
        #[command(flatten)]
        stacks: Stacks,
        /// The page's title (the event kind is added to it)
        #[arg(long, value_name = "TITLE")]
        title: Option<String>,
    },
    /// A differential flame graph: AFTER's and BEFORE's call trees as one, each frame as wide as the
    /// mean of its shares of the two profiles and coloured by how its share changed (red: grew,
    /// blue: shrank); --from/--to apply to both
    Diff {
        /// The profile before: a recording, or a directory standing for its *.jfr files (merged)
        #[arg(value_name = "BEFORE")]
        before: PathBuf,
        /// The profile after (the same forms)
        #[arg(value_name = "AFTER")]
        after: PathBuf,
        #[command(flatten)]
        options: Options,
        #[command(flatten)]
        event: EventArg,
        /// Each thread's name as a root frame
        #[arg(long)]
        threads: bool,
        /// The page's title (the event kind is added to it)
        #[arg(long, value_name = "TITLE")]
        title: Option<String>,
    },
    /// An HTML timeline (heatmap): time in buckets across, a row for each method most often on top
    /// of the stack with its share of each bucket, a row of all samples; choosing columns in the
    /// page shows the --from/--to options that cut the recording to them
    Timeline {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        event: EventArg,
        /// How many methods get a row: those with the most self weight (innermost frame)
        #[arg(long, value_name = "N", default_value_t = 15)]
        rows: usize,
        /// Each bucket's length: 250ms, 1s, 500us, 2m… [default: a round length giving about 150 buckets]
        #[arg(long, value_name = "DURATION", value_parser = duration_arg)]
        bucket: Option<i64>,
        /// The page's title (the event kind is added to it)
        #[arg(long, value_name = "TITLE")]
        title: Option<String>,
    },
    /// A pprof profile (gzipped protobuf), for `go tool pprof` and the backends that read it; needs -o or --output-dir
    Pprof {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        event: EventArg,
    },
    /// OpenTelemetry profiles (an OTLP ExportProfilesServiceRequest, protobuf, proto v1.10.0): a
    /// profile per event kind, for Pyroscope or the OpenTelemetry Collector; needs -o or --output-dir
    Otlp {
        #[command(flatten)]
        common: Common,
        /// The one kind of events sent: cpu, wall, alloc, live, lock or nativemem [default: every kind
        /// the recordings have, a profile each]
        #[arg(long, value_name = "KIND", value_parser = event_kind)]
        event: Option<EventKind>,
        /// The resource's service.name [default: the class whose main method the stacks start in,
        /// else java]
        #[arg(long, value_name = "NAME")]
        service: Option<String>,
        /// A resource attribute (repeatable), e.g. deployment.environment.name=prod; it replaces
        /// what --service or an earlier one set for its key
        #[arg(long = "attribute", value_name = "KEY=VALUE", value_parser = attribute_arg)]
        attributes: Vec<(String, String)>,
        /// Resolve nothing: remote native frames stay their library's build-id mapping and link-time
        /// address, for the backend to symbolize (as the agent sends them)
        #[arg(long)]
        no_resolve: bool,
    },
    /// A copy of the recording with every remote frame resolved, for any JFR reader; needs -o, or --output-dir for several
    Jfr {
        #[command(flatten)]
        common: Common,
    },
    /// What the recording holds and how its remote frames resolved (tiers, problems)
    Report {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        event: EventArg,
    },
    /// Prints a shell completion script for symbolize
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
}

/// What every converting command but `diff` takes.
#[derive(ClapArgs)]
struct Common {
    /// Recordings, or directories standing for their *.jfr files: merged into one profile (in the
    /// order of their start), or one output each with --output-dir. Every debug file is found,
    /// fetched and parsed once for all
    #[arg(required = true, value_name = "RECORDING.jfr|DIR")]
    inputs: Vec<PathBuf>,
    /// One output per recording: DIR/<name>.collapsed, .html, .timeline.html, .pb.gz, .otlp.pb,
    /// .symbolized.jfr or .txt
    #[arg(long, value_name = "DIR", conflicts_with = "output")]
    output_dir: Option<PathBuf>,
    #[command(flatten)]
    options: Options,
}

/// What every converting command takes.
#[derive(ClapArgs)]
struct Options {
    /// Where to write [default: stdout]
    #[arg(short, long, value_name = "PATH")]
    output: Option<PathBuf>,
    /// A tree with .build-id/ab/cdef….debug files (repeatable)
    #[arg(long = "debug-dir", value_name = "DIR")]
    debug_dirs: Vec<PathBuf>,
    /// A library or executable, found by its build-id: its DWARF (itself or through
    /// .gnu_debuglink), else its symbol table (repeatable)
    #[arg(long = "binary", value_name = "PATH")]
    binaries: Vec<PathBuf>,
    /// A debuginfod server (repeatable; DEBUGINFOD_URLS is used too)
    #[arg(long = "debuginfod", value_name = "URL")]
    servers: Vec<String>,
    /// The debuginfod client cache [default: the debuginfod client's]
    #[arg(long = "debuginfod-cache", value_name = "DIR")]
    cache: Option<PathBuf>,
    /// Contact no debuginfod server
    #[arg(long)]
    no_debuginfod: bool,
    /// A damaged recording's complete chunks are enough: exit status 0, not 3
    #[arg(long)]
    partial: bool,
    /// Only the samples taken from TIME on: 2026-12-06T14:00[:SS[.fff]] in UTC, or seconds since 1970
    /// (fractions too: 1764000000.25)
    #[arg(long, value_name = "TIME", value_parser = time_arg("--from"))]
    from: Option<i64>,
    /// Only the samples taken before TIME (same forms as --from)
    #[arg(long, value_name = "TIME", value_parser = time_arg("--to"))]
    to: Option<i64>,
}

#[derive(ClapArgs)]
struct EventArg {
    /// The events the profile shows: cpu, wall, alloc, live, lock or nativemem (native allocations)
    /// [default: the recording's one kind, or cpu when it has several]
    #[arg(long, value_name = "KIND", value_parser = event_kind)]
    event: Option<EventKind>,
    /// Only the native allocations never freed (--event nativemem, which it implies): matched to
    /// frees by address in time order over all chunks (a later allocation at an address replaces
    /// the earlier one), as async-profiler's converter's --leak
    #[arg(long)]
    leak: bool,
    /// With --leak, leaves out the allocations of this last part of the recording's span (its first
    /// to its last native allocation or free), too young to call leaks: a ratio or a percentage, in
    /// [0, 1]: 0.1, 10%, 0 (none left out) [default: 0.1]
    #[arg(long, value_name = "RATIO", value_parser = tail_arg, requires = "leak")]
    tail: Option<f64>,
}

/// `--tail` when not given: the converter's.
const DEFAULT_TAIL: f64 = 0.1;

/// What the commands that print stacks take.
#[derive(ClapArgs)]
struct Stacks {
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    event: EventArg,
    /// Each thread's name as a root frame
    #[arg(long)]
    threads: bool,
}

fn event_kind(name: &str) -> Result<EventKind, String> {
    EventKind::from_name(name).ok_or_else(|| format!("unknown event kind; accepted: {}", EventKind::accepted()))
}

/// A resource attribute as `--attribute` takes it: `KEY=VALUE`, a key
/// that is not empty.
fn attribute_arg(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("--attribute {text}: not KEY=VALUE")),
    }
}

fn time_arg(flag: &'static str) -> impl Fn(&str) -> Result<i64, String> + Clone {
    move |text| parse_time(flag, text)
}

fn duration_arg(text: &str) -> Result<i64, String> {
    parse_duration(text)
}

fn tail_arg(text: &str) -> Result<f64, String> {
    parse_tail(text)
}

/// A converting command's arguments, whatever the command.
struct Args {
    command: &'static str,
    /// The recordings (for `diff`: BEFORE and AFTER).
    inputs: Vec<PathBuf>,
    output_dir: Option<PathBuf>,
    common: Options,
    event: Option<EventKind>,
    /// `--leak`: the tail of the recording's span whose allocations are left out.
    leak: Option<f64>,
    by_thread: bool,
    title: Option<String>,
    /// `--from`, `--to`: unix nanoseconds.
    window: (Option<i64>, Option<i64>),
    /// `timeline`: its rows, and its bucket length (nanoseconds).
    rows: usize,
    bucket: Option<i64>,
    /// `otlp`: the resource's attributes, and whether remote frames are
    /// left unresolved.
    otlp: OtlpOptions,
    no_resolve: bool,
}

/// The converting command's arguments; `None` when nothing is left to do
/// (help, version, completions). Bad arguments: clap's message is printed
/// here, and the error is empty.
fn parse_args() -> Result<Option<Args>, String> {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { Err(String::new()) } else { Ok(None) };
        }
    };
    let (mut rows, mut bucket) = (0, None);
    let (mut otlp, mut no_resolve, mut otlp_event) = (OtlpOptions::default(), false, None);
    let (command, common, event, threads, title) = match cli.command {
        Command::Collapsed(Stacks { common, event, threads }) => ("collapsed", common, Some(event), threads, None),
        Command::Flamegraph { stacks: Stacks { common, event, threads }, title } => {
            ("flamegraph", common, Some(event), threads, title)
        }
        Command::Diff { before, after, options, event, threads, title } => {
            let common = Common { inputs: vec![before, after], output_dir: None, options };
            ("diff", common, Some(event), threads, title)
        }
        Command::Timeline { common, event, rows: wanted, bucket: length, title } => {
            (rows, bucket) = (wanted, length);
            ("timeline", common, Some(event), false, title)
        }
        Command::Pprof { common, event } => ("pprof", common, Some(event), false, None),
        Command::Otlp { common, event, service, attributes, no_resolve: off } => {
            (otlp, no_resolve, otlp_event) = (OtlpOptions { service, attributes, event }, off, event);
            ("otlp", common, None, false, None)
        }
        Command::Jfr { common } => ("jfr", common, None, false, None),
        Command::Report { common, event } => ("report", common, Some(event), false, None),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "symbolize", &mut std::io::stdout());
            return Ok(None);
        }
    };
    let Common { inputs, output_dir, options } = common;
    let window = (options.from, options.to);
    if let (Some(from), Some(to)) = window {
        if from >= to {
            return Err("--from must come before --to".to_owned());
        }
    }
    let (event, leak) = match event {
        Some(EventArg { event, leak: true, tail }) => (Some(leak_event(event)?), Some(tail.unwrap_or(DEFAULT_TAIL))),
        Some(EventArg { event, .. }) => (event, None),
        None => (otlp_event, None),
    };
    let by_thread = threads;
    Ok(Some(Args {
        command,
        inputs,
        output_dir,
        common: options,
        event,
        leak,
        by_thread,
        title,
        window,
        rows,
        bucket,
        otlp,
        no_resolve,
    }))
}

/// The events `--leak` shows: native allocations, with `--event` or without.
fn leak_event(event: Option<EventKind>) -> Result<EventKind, String> {
    match event {
        None | Some(EventKind::NativeMem) => Ok(EventKind::NativeMem),
        Some(other) => Err(format!(
            "--leak keeps the native allocations never freed: it takes --event {}, not --event {other}",
            EventKind::NativeMem
        )),
    }
}

/// A ratio as `--tail` takes it: `0.1` or `10%`, in [0, 1].
fn parse_tail(text: &str) -> Result<f64, String> {
    let bad = || format!("--tail {text}: not a ratio in [0, 1] (accepted: 0.1, 10%)");
    let ratio = match text.strip_suffix('%') {
        Some(percent) => percent.parse::<f64>().map_err(|_| bad())? / 100.0,
        None => text.parse::<f64>().map_err(|_| bad())?,
    };
    // NaN is in no range.
    if !(0.0..=1.0).contains(&ratio) {
        return Err(bad());
    }
    Ok(ratio)
}

/// A bucket length as `--bucket` takes it, in nanoseconds: a number
/// (fractions too) and its unit, ns, us, ms, s, m or h.
fn parse_duration(text: &str) -> Result<i64, String> {
    let bad = || format!("--bucket {text}: not a duration (accepted: 250ms, 1s, 1.5s, 500us, 2m, 1h)");
    let digits = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
    let (number, unit) = text.split_at(digits);
    let nanos_per: f64 = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" => 60e9,
        "h" => 3600e9,
        _ => return Err(bad()),
    };
    let number: f64 = number.parse().map_err(|_| bad())?;
    let nanos = (number * nanos_per).round();
    if !(1.0..=1e18).contains(&nanos) {
        return Err(bad());
    }
    Ok(nanos as i64)
}

/// A time as `--from` and `--to` take it, in unix nanoseconds:
/// `YYYY-MM-DDTHH:MM[:SS]` (or with a space for `T`, an optional `Z`) in
/// UTC, or whole seconds since 1970.
fn parse_time(flag: &str, text: &str) -> Result<i64, String> {
    let bad =
        || format!("{flag} {text}: not a time (accepted: 2026-12-06T14:00[:SS[.fff]] in UTC, or seconds since 1970)");
    let whole = text.strip_suffix('Z').unwrap_or(text);
    // A fraction of a second: up to nine digits after the seconds.
    let (whole, fraction) = match whole.rsplit_once('.') {
        Some((whole, digits)) => {
            if digits.is_empty() || digits.len() > 9 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            (whole, Some(format!("{digits:0<9}").parse::<i64>().map_err(|_| bad())?))
        }
        None => (whole, None),
    };
    let with_fraction = |nanos: i64| nanos.checked_add(fraction.unwrap_or(0)).ok_or_else(bad);
    if !whole.is_empty() && !text.ends_with('Z') && whole.bytes().all(|b| b.is_ascii_digit()) {
        let seconds: i64 = whole.parse().map_err(|_| bad())?;
        return with_fraction(seconds.checked_mul(1_000_000_000).ok_or_else(bad)?);
    }
    let text = whole;
    let (date, time) = text.split_once(['T', ' ']).ok_or_else(bad)?;
    let numbers = |part: &str, sep: char| -> Option<Vec<i64>> { part.split(sep).map(|n| n.parse().ok()).collect() };
    let (date, time) = (numbers(date, '-').ok_or_else(bad)?, numbers(time, ':').ok_or_else(bad)?);
    let ([year, month, day], [hour, minute, second @ ..]) = (date.as_slice(), time.as_slice()) else {
        return Err(bad());
    };
    let second = match second {
        [] if fraction.is_none() => 0,
        [s] => *s,
        _ => return Err(bad()),
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in_month = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    let valid = (1..=12).contains(month) && (1..=days_in_month).contains(day) && *hour < 24 && *minute < 60;
    if !valid || second >= 60 || [*year, *hour, *minute, second].iter().any(|&n| n < 0) {
        return Err(bad());
    }
    // Days since 1970-01-01 of a proleptic Gregorian date.
    let (y, m) = if *month <= 2 { (year - 1, month + 9) } else { (*year, month - 3) };
    let era = y.div_euclid(400);
    let day_of_era =
        y.rem_euclid(400) * 365 + y.rem_euclid(400) / 4 - y.rem_euclid(400) / 100 + (153 * m + 2) / 5 + day - 1;
    let days = era * 146_097 + day_of_era - 719_468;
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second;
    with_fraction(seconds.checked_mul(1_000_000_000).ok_or_else(bad)?)
}

fn resolver(args: &Args) -> Resolver {
    let common = &args.common;
    let debuginfod = (!common.no_debuginfod).then(|| {
        let mut urls = common.servers.clone();
        urls.extend(urls_from_env());
        Debuginfod::new(urls, common.cache.clone().unwrap_or_else(default_cache))
    });
    let (locator, problems) = Locator::new(&common.debug_dirs, &common.binaries, debuginfod);
    for problem in problems {
        eprintln!("warning: {problem}");
    }
    Resolver::new(locator)
}

/// Writes the output whole or not at all: into a temporary file beside
/// it, renamed into place once complete.
fn write(output: Option<&Path>, bytes: &[u8]) -> Result<(), String> {
    match output {
        Some(path) => {
            let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
            let temp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
            let written = std::fs::write(&temp, bytes).and_then(|()| std::fs::rename(&temp, path));
            written.map_err(|e| {
                let _ = std::fs::remove_file(&temp);
                format!("cannot write {}: {e}", path.display())
            })
        }
        None => {
            use std::io::Write;
            std::io::stdout().write_all(bytes).map_err(|e| format!("cannot write to stdout: {e}"))
        }
    }
}

/// The error for a recording without events of the chosen kind, naming
/// the kinds it has.
fn no_events(name: &str, recording: &Recording, kind: EventKind) -> String {
    let kinds = recording.kinds();
    let has = if kinds.is_empty() {
        format!("it has no sample events of any kind ({})", EventKind::accepted())
    } else {
        let listed: Vec<String> = kinds.iter().map(|(k, (events, _))| format!("{k} ({events} events)")).collect();
        format!("it has {}; choose one with --event", listed.join(", "))
    };
    let types: Vec<&str> = kind.event_types().collect();
    format!("{name} has no {kind} events ({}): {has}", types.join(", "))
}

/// How a run that wrote its output ends.
enum Finish {
    Success,
    /// Written from the complete chunks of a damaged recording, or from
    /// the readable recordings of several, without `--partial`; or, with
    /// `--output-dir`, some recordings gave no output: exit status
    /// [`EXIT_DAMAGED`].
    Damaged,
}

/// The recordings `inputs` name: files as given, directories as their
/// `*.jfr` files in name order.
fn expand_inputs(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for input in inputs {
        if !input.is_dir() {
            files.push(input.clone());
            continue;
        }
        let entries = std::fs::read_dir(input).map_err(|e| format!("cannot list {}: {e}", input.display()))?;
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "jfr"))
            .collect();
        if found.is_empty() {
            return Err(format!("{} holds no .jfr file", input.display()));
        }
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

/// Reads every recording; with several, one that cannot be read is
/// reported and left out (the run then ends as damaged).
/// What [`read_all`] read: the recordings, how the run ends, and the kinds
/// of sample events they hold (before any `--from`/`--to` window).
struct Read {
    recordings: Vec<(String, Recording)>,
    finish: Finish,
    kinds: std::collections::BTreeSet<EventKind>,
}

fn read_all(args: &Args, inputs: &[PathBuf], progress: &Progress) -> Result<Read, String> {
    let mut kinds = std::collections::BTreeSet::new();
    let mut finish = Finish::Success;
    let mut recordings = Vec::new();
    progress.phase("reading recordings", Some(inputs.len() as u64));
    for input in inputs {
        let read = recording::read(input);
        progress.inc(1);
        let outcome = match read {
            Ok(outcome) => outcome,
            Err(e) if inputs.len() > 1 => {
                progress.note(format!("warning: {e}; left out"));
                finish = Finish::Damaged;
                continue;
            }
            Err(e) => return Err(e.to_string()),
        };
        if outcome.undefined > 0 {
            progress.note(format!(
                "warning: {}: {} references to constants that no chunk defines, read as null (as the JDK's parser reads them)",
                input.display(),
                outcome.undefined
            ));
        }
        for damage in &outcome.damage {
            let after = if damage.last { "; nothing after it can be read" } else { "; left out" };
            progress.note(format!("warning: {}: {damage}{after}", input.display()));
        }
        if !outcome.damage.is_empty() {
            progress.note(format!(
                "warning: {} is damaged: the output holds the {} of its chunks that are complete",
                input.display(),
                outcome.recording.chunks.len(),
            ));
            finish = Finish::Damaged;
        }
        let mut read = outcome.recording;
        kinds.extend(read.kinds().into_keys());
        if args.window != (None, None) && read.keep_window(args.window) == 0 {
            continue;
        }
        recordings.push((input.display().to_string(), read));
    }
    if recordings.is_empty() {
        let within = if args.window == (None, None) { "" } else { " with samples between --from and --to" };
        return Err(format!("no recording{within} could be read"));
    }
    if let (Finish::Damaged, false) = (&finish, args.common.partial) {
        progress.note(format!(
            "exit status {EXIT_DAMAGED}: written from what could be read (--partial accepts this with status 0)"
        ));
    }
    let finish = if args.common.partial { Finish::Success } else { finish };
    Ok(Read { recordings, finish, kinds })
}

/// The file `--output-dir` gets for the recording `input`.
fn output_in(dir: &Path, input: &str, command: &str) -> PathBuf {
    let name = Path::new(input).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = name.strip_suffix(".jfr").unwrap_or(&name);
    let extension = match command {
        "collapsed" => "collapsed",
        "flamegraph" => "html",
        "timeline" => "timeline.html",
        "pprof" => "pb.gz",
        "otlp" => "otlp.pb",
        "jfr" => "symbolized.jfr",
        _ => "txt",
    };
    dir.join(format!("{stem}.{extension}"))
}

fn run() -> Result<Finish, String> {
    let Some(mut args) = parse_args()? else { return Ok(Finish::Success) };
    let mut progress = Progress::start();
    let finish = match args.command {
        "diff" => diff(&mut args, &progress),
        _ => convert(&mut args, &progress),
    };
    progress.finish();
    finish
}

/// Decides the kind of events shown, when `--event` did not, once for
/// every input and window: the recordings' one kind of samples, else CPU.
fn decide_event(args: &mut Args, kinds: &std::collections::BTreeSet<EventKind>, progress: &Progress) {
    // `jfr` copies every kind; `otlp` sends each as a profile.
    if args.event.is_some() || ["jfr", "otlp"].contains(&args.command) {
        return;
    }
    let kind = match kinds.iter().collect::<Vec<_>>().as_slice() {
        [only] => **only,
        _ => EventKind::default(),
    };
    if kind != EventKind::default() {
        progress
            .note(format!("note: showing {} (the recordings' only kind of samples; --event chooses)", kind.describe()));
    }
    args.event = Some(kind);
}

/// Every command but `diff`.
fn convert(args: &mut Args, progress: &Progress) -> Result<Finish, String> {
    let binary = ["pprof", "otlp", "jfr"].contains(&args.command);
    if binary && args.common.output.is_none() && args.output_dir.is_none() {
        return Err(format!("{} writes a binary file: give -o PATH", args.command));
    }
    let inputs = expand_inputs(&args.inputs)?;
    if args.command == "jfr" && inputs.len() > 1 && args.output_dir.is_none() {
        return Err("jfr copies each recording on its own: give --output-dir DIR for several".to_owned());
    }
    let Read { mut recordings, mut finish, kinds } = read_all(args, &inputs, progress)?;
    decide_event(args, &kinds, progress);
    if let Some(dir) = &args.output_dir {
        let mut outputs: HashMap<PathBuf, &str> = HashMap::new();
        for (name, _) in &recordings {
            if let Some(other) = outputs.insert(output_in(dir, name, args.command), name) {
                return Err(format!("--output-dir: {other} and {name} would both be written to the same file"));
            }
        }
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let mut resolver = resolver(args);
    // Every recording's remote frames at once: each debug file found,
    // fetched and parsed once, each library's addresses on all cores.
    if !args.no_resolve {
        resolver.prepare_reporting(recordings.iter().map(|(_, r)| r), &mut |step| progress.step(step));
    }
    match &args.output_dir {
        Some(dir) => {
            let mut failed = 0;
            for (name, recording) in &mut recordings {
                let output = output_in(dir, name, args.command);
                if let Err(e) = produce(args, name, recording, &mut resolver, Some(&output), progress) {
                    progress.note(format!("error: {e}; no output for it"));
                    failed += 1;
                }
            }
            if failed == recordings.len() {
                return Err("no recording gave an output".to_owned());
            }
            if failed > 0 {
                progress.note(format!(
                    "exit status {EXIT_DAMAGED}: {failed} of {} recordings gave no output",
                    recordings.len()
                ));
                finish = Finish::Damaged;
            }
        }
        None => {
            let name = match recordings.as_slice() {
                [(name, _)] => name.clone(),
                _ => format!("{} recordings", recordings.len()),
            };
            let mut merged = merge(recordings);
            produce(args, &name, &mut merged, &mut resolver, args.common.output.as_deref(), progress)?;
        }
    }
    Ok(finish)
}

/// Recordings as one, in time order (a `%n` pattern's names sort 10
/// before 2).
fn merge(mut recordings: Vec<(String, Recording)>) -> Recording {
    recordings.sort_by_key(|(_, r)| r.start_nanos());
    Recording::merge(recordings.into_iter().map(|(_, r)| r))
}

/// `diff`: BEFORE's and AFTER's profiles (each side's recordings merged,
/// the window applied to both) as one differential flame graph.
fn diff(args: &mut Args, progress: &Progress) -> Result<Finish, String> {
    let mut finish = Finish::Success;
    let mut kinds = std::collections::BTreeSet::new();
    let mut sides = Vec::new();
    for input in args.inputs.clone() {
        let side = || format!("{}: ", input.display());
        let files = expand_inputs(std::slice::from_ref(&input)).map_err(|e| side() + &e)?;
        let read = read_all(args, &files, progress).map_err(|e| side() + &e)?;
        if let Finish::Damaged = read.finish {
            finish = Finish::Damaged;
        }
        kinds.extend(read.kinds);
        sides.push(read.recordings);
    }
    decide_event(args, &kinds, progress);
    let mut resolver = resolver(args);
    resolver.prepare_reporting(sides.iter().flatten().map(|(_, r)| r), &mut |step| progress.step(step));
    let kind = args.event.unwrap_or_default();
    let names: Vec<String> = args.inputs.iter().map(|p| p.display().to_string()).collect();
    progress.phase("building the profiles", None);
    let mut profiles = Vec::new();
    for (recordings, name) in sides.into_iter().zip(&names) {
        let mut recording = merge(recordings);
        if !recording.kinds().contains_key(&kind) {
            return Err(no_events(name, &recording, kind));
        }
        keep_leaks(args, name, &mut recording, progress);
        profiles.push(profile::build(&recording, kind, Some(&mut resolver)));
    }
    let (after, after_report) = profiles.pop().expect("two sides");
    let (before, before_report) = profiles.pop().expect("two sides");
    let title = match &args.title {
        Some(title) => format!("{title}: {}", shown(args)),
        None => format!("Differential flame graph of {} → {}: {}", names[0], names[1], shown(args)),
    };
    let page = flamegraph::render_diff(&before, &after, [&names[0], &names[1]], &title, args.by_thread);
    write(args.common.output.as_deref(), page.as_bytes())?;
    for (name, report) in names.iter().zip([before_report, after_report]) {
        if report.remote_frames > 0 || !report.categories.is_empty() {
            progress.note(format!("{name}:\n{}", report.to_string().trim_end()));
        }
    }
    Ok(finish)
}

/// Writes `args.command`'s output for `recording` (named `name`) to
/// `output` (stdout: `None`).
fn produce(
    args: &Args,
    name: &str,
    recording: &mut Recording,
    resolver: &mut Resolver,
    output: Option<&Path>,
    progress: &Progress,
) -> Result<(), String> {
    if args.command == "jfr" {
        let jfr_out::Rewritten { bytes, tiers, skipped, skipped_frees } =
            jfr_out::rewrite_counting(recording, Some(resolver));
        write(output, &bytes)?;
        let mut not_copied: Vec<String> = skipped.iter().map(|(kind, n)| format!("{n} {kind} sample events")).collect();
        if skipped_frees > 0 {
            not_copied.push(format!("{skipped_frees} frees of native allocations"));
        }
        if !not_copied.is_empty() {
            progress.note(format!(
                "warning: {name}: not copied: {} (the copy carries this profiler's CPU, wall-clock and native memory events)",
                not_copied.join(", ")
            ));
        }
        let total: u64 = tiers.values().sum();
        if total > 0 {
            let counts: Vec<String> =
                Tier::ALL.iter().map(|t| format!("{} {}", tiers.get(t).copied().unwrap_or(0), t.describe())).collect();
            progress.note(format!("{total} remote frames: {}", counts.join(", ")));
            for problem in resolver.problems() {
                progress.note(format!("  {problem}"));
            }
        }
        return Ok(());
    }
    if args.command == "otlp" {
        return produce_otlp(args, name, recording, resolver, output, progress);
    }
    let kind = args.event.unwrap_or_default();
    if !recording.kinds().contains_key(&kind) {
        return Err(no_events(name, recording, kind));
    }
    keep_leaks(args, name, recording, progress);
    progress.phase("building the profile", None);
    let (profile, report, times) = match args.command {
        "timeline" => profile::build_timed(recording, kind, Some(resolver)),
        _ => {
            let (profile, report) = profile::build(recording, kind, Some(resolver));
            (profile, report, Vec::new())
        }
    };
    let bytes = match args.command {
        "collapsed" => collapsed::collapse(&profile, args.by_thread).into_bytes(),
        "flamegraph" => {
            let title =
                format!("{}: {}", args.title.as_deref().unwrap_or(&format!("Flame graph of {name}")), shown(args));
            flamegraph::render(&profile, &title, args.by_thread).into_bytes()
        }
        "timeline" => {
            let title = format!("{}: {}", args.title.as_deref().unwrap_or(&format!("Timeline of {name}")), shown(args));
            let timeline = timeline::build(&profile, &times, args.rows, args.bucket)?;
            timeline::render(&timeline, &title, profile.kind.unit().name(), name).into_bytes()
        }
        "pprof" => pprof::encode(&pprof::to_pprof(&profile, profile.period)),
        _ => report.to_string().into_bytes(),
    };
    write(output, &bytes)?;
    if args.command != "report" && (report.remote_frames > 0 || !report.categories.is_empty()) {
        progress.note(report.to_string().trim_end());
    }
    Ok(())
}

/// `otlp`: a profile for each kind of events (or `--event`'s), remote
/// frames resolved unless `--no-resolve`.
fn produce_otlp(
    args: &Args,
    name: &str,
    recording: &Recording,
    resolver: &mut Resolver,
    output: Option<&Path>,
    progress: &Progress,
) -> Result<(), String> {
    let kinds = recording.kinds();
    match args.event {
        Some(kind) if !kinds.contains_key(&kind) => return Err(no_events(name, recording, kind)),
        None if kinds.is_empty() => {
            return Err(format!("{name} has no sample events of any kind ({})", EventKind::accepted()));
        }
        _ => {}
    }
    progress.phase("building the profiles", None);
    let resolver = (!args.no_resolve).then_some(resolver);
    let (request, reports) = otlp::build_request(recording, &args.otlp, resolver);
    write(output, &prost::Message::encode_to_vec(&request))?;
    for report in reports {
        if !args.no_resolve && (report.remote_frames > 0 || !report.categories.is_empty()) {
            progress.note(format!("{}:\n{}", report.kind.describe(), report.to_string().trim_end()));
        }
    }
    Ok(())
}

/// What the profile shows, for titles.
fn shown(args: &Args) -> &'static str {
    match (args.leak, args.event.unwrap_or_default()) {
        (Some(_), _) => "native allocated bytes never freed",
        (None, kind) => kind.describe(),
    }
}

/// With `--leak`, keeps of `recording`'s native allocations those never
/// freed, and says how many.
fn keep_leaks(args: &Args, name: &str, recording: &mut Recording, progress: &Progress) {
    let Some(tail) = args.leak else { return };
    let found = leaks::keep_leaks(recording, tail);
    let made =
        if tail > 0.0 { format!(" made before the last {:.1}% of the span", tail * 100.0) } else { String::new() };
    progress.note(format!(
        "{name}: of {} native allocations, {}{made} were never freed ({} frees)",
        found.allocations, found.kept, found.frees,
    ));
    if found.frees == 0 {
        progress.note(format!(
            "warning: {name} records no frees (the Datadog dialect has none): none of its allocations is seen freed"
        ));
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(Finish::Success) => ExitCode::SUCCESS,
        Ok(Finish::Damaged) => ExitCode::from(EXIT_DAMAGED),
        Err(message) => {
            if !message.is_empty() {
                eprintln!("{message}");
            }
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{attribute_arg, leak_event, parse_duration, parse_tail, parse_time, Cli, EventKind};
    use clap::{CommandFactory, Parser};

    #[test]
    fn every_command_and_option_is_documented() {
        let cli = Cli::command();
        cli.clone().debug_assert();
        assert!(cli.get_version().is_some());
        for command in cli.get_subcommands() {
            assert!(command.get_about().is_some(), "{}", command.get_name());
            for arg in command.get_arguments() {
                assert!(arg.get_help().is_some(), "{} {}", command.get_name(), arg.get_id());
            }
        }
    }

    #[test]
    fn times_are_utc_dates_or_unix_seconds() {
        let at = |text| parse_time("--from", text);
        assert_eq!(at("2023-11-14T22:13:20"), Ok(1_700_000_000_000_000_000));
        assert_eq!(at("2023-11-14 22:13:20Z"), Ok(1_700_000_000_000_000_000));
        assert_eq!(at("1700000000"), Ok(1_700_000_000_000_000_000));
        assert_eq!(at("2000-02-29T00:00"), Ok(951_782_400_000_000_000));
        assert_eq!(at("1969-12-31T23:59:59"), Ok(-1_000_000_000));
        // Fractions of a second, as the timeline prints them.
        assert_eq!(at("2023-11-14T22:13:20.25"), Ok(1_700_000_000_250_000_000));
        assert_eq!(at("2023-11-14T22:13:20.000000001Z"), Ok(1_700_000_000_000_000_001));
        assert_eq!(at("1700000000.037"), Ok(1_700_000_000_037_000_000));
        for bad in [
            "",
            "yesterday",
            "2023-13-01T00:00",
            "2023-02-29T00:00",
            "2023-11-31T00:00",
            "2023-11-14",
            "2023-11-14T25:00",
            "2023-11-14T10:00:00:00",
            "99999-01-01T00:00",
            "99999999999",
            "1700000000Z",
            "1700000000.",
            "1700000000.1234567890",
            "1700000000.-1",
            "2023-11-14T22:13.5",
            "2023-11-14T22:13:20.x",
        ] {
            assert_rejected(at(bad), bad, "--from", "accepted");
        }
    }

    /// `parsed` (of `text`) is an error that names `option` and says `says`.
    fn assert_rejected<T: std::fmt::Debug>(parsed: Result<T, String>, text: &str, option: &str, says: &str) {
        let e = parsed.expect_err(text);
        assert!(e.starts_with(option) && e.contains(says), "{e}");
    }

    #[test]
    fn bucket_lengths_take_a_unit() {
        for (text, ns) in [
            ("250ms", 250_000_000),
            ("1.5s", 1_500_000_000),
            ("500us", 500_000),
            ("2m", 120_000_000_000),
            ("1h", 3_600_000_000_000),
            ("10ns", 10),
        ] {
            assert_eq!(parse_duration(text), Ok(ns), "{text}");
        }
        for bad in ["", "1", "s", "0s", "0.1ns", "1d", "1..5s", "-1s", "1e3s"] {
            assert_rejected(parse_duration(bad), bad, "--bucket", "accepted");
        }
    }

    #[test]
    fn tails_are_ratios_or_percentages_within_one() {
        for (text, ratio) in [("0.1", 0.1), ("10%", 0.1), ("0", 0.0), ("1", 1.0), ("100%", 1.0), ("2.5%", 0.025)] {
            assert_eq!(parse_tail(text), Ok(ratio), "{text}");
        }
        for bad in ["", "%", "1.5", "150%", "-0.1", "-5%", "ten", "NaN", "inf", "0.1 %", "10%%"] {
            assert_rejected(parse_tail(bad), bad, "--tail", "[0, 1]");
        }
    }

    /// `--leak` shows native allocations: it implies `--event nativemem`
    /// and refuses another kind; `--tail` needs `--leak`.
    #[test]
    fn leak_takes_native_allocations_and_tail_takes_leak() {
        assert_eq!(leak_event(None), Ok(EventKind::NativeMem));
        assert_eq!(leak_event(Some(EventKind::NativeMem)), Ok(EventKind::NativeMem));
        let e = leak_event(Some(EventKind::Alloc)).unwrap_err();
        assert!(e.contains("--event nativemem, not --event alloc"), "{e}");
        let parse = |args: &[&str]| Cli::try_parse_from([&["symbolize", "collapsed", "x.jfr"], args].concat());
        assert!(parse(&["--leak", "--tail", "5%"]).is_ok());
        assert!(parse(&["--event", "nativemem", "--leak"]).is_ok());
        let e = parse(&["--tail", "5%"]).err().expect("--tail without --leak");
        assert_eq!(e.kind(), clap::error::ErrorKind::MissingRequiredArgument, "{e}");
        let e = parse(&["--leak", "--tail", "1.5"]).err().expect("a tail over 1");
        assert!(e.to_string().contains("not a ratio in [0, 1]"), "{e}");
    }

    /// `otlp` takes resource attributes as KEY=VALUE (the value may hold
    /// `=` or be empty) and sends every kind unless --event names one.
    #[test]
    fn otlp_takes_attributes_as_key_value_pairs() {
        let pair = |k: &str, v: &str| Ok((k.to_owned(), v.to_owned()));
        assert_eq!(attribute_arg("deployment.environment.name=prod"), pair("deployment.environment.name", "prod"));
        assert_eq!(attribute_arg("k=a=b"), pair("k", "a=b"));
        assert_eq!(attribute_arg("k="), pair("k", ""));
        for bad in ["", "k", "=v"] {
            assert!(attribute_arg(bad).expect_err(bad).contains("KEY=VALUE"));
        }
        let parse = |args: &[&str]| Cli::try_parse_from([&["symbolize", "otlp", "x.jfr", "-o", "x.pb"], args].concat());
        assert!(parse(&["--attribute", "a=1", "--attribute", "b=2", "--service", "s", "--no-resolve"]).is_ok());
        assert!(parse(&["--event", "wall"]).is_ok());
        assert!(parse(&["--event", "heap"]).is_err());
        assert!(parse(&["--attribute", "novalue"]).is_err());
    }
}
