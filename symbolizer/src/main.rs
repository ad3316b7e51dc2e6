//! `symbolize`: resolves remote native frames and converts recordings.
//!
//! ```text
//! symbolize <command> <recording.jfr | DIR>... [options]
//!
//! commands:  collapsed | flamegraph | pprof | jfr | report
//! inputs:    one recording, or several (a directory stands for its *.jfr files): merged into one
//!            profile, or one output per recording with --output-dir; either way every debug file is
//!            found, fetched and parsed once, and each library's addresses are resolved on all cores
//! options:   -o, --output PATH        where to write (default: stdout; required for pprof and jfr)
//!            --output-dir DIR         one output per recording: DIR/<name>.collapsed, .html, .pb.gz,
//!                                     .symbolized.jfr or .txt (the only way jfr takes several)
//!            --event KIND             cpu (default), wall, alloc or lock: the events a profile shows
//!            --debug-dir DIR          a tree with .build-id/ab/cdef….debug files (repeatable)
//!            --binary PATH            a library or executable, found by its build-id: its DWARF (itself
//!                                     or via .gnu_debuglink), else its symbol table (repeatable)
//!            --debuginfod URL         a debuginfod server (repeatable; DEBUGINFOD_URLS is used too)
//!            --debuginfod-cache DIR   the client cache (default: the debuginfod client's)
//!            --no-debuginfod          do not contact servers
//!            --threads                thread name as the root frame (collapsed, flamegraph)
//!            --title TITLE            flame graph title
//!            --partial                a damaged recording's complete chunks are enough (exit 0, not 3)
//!            --from TIME, --to TIME   only the samples taken from TIME (inclusive) to TIME (exclusive):
//!                                     2026-12-06T14:00[:SS] in UTC, or seconds since 1970; the
//!                                     recordings of a window merge in the order of their start
//!
//! exit status: 0 written; 1 error, nothing written (not a recording, no chunk readable, no events
//!              of the kind, bad arguments); 3 written from the complete chunks of a damaged
//!              recording (some chunks cut short or unreadable), or from the readable recordings
//!              of several (the others reported and left out), unless --partial; also when, with
//!              --output-dir, some recordings gave no output (no events of the kind, unwritable)
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use symbolizer::debuginfo::Locator;
use symbolizer::debuginfod::{default_cache, urls_from_env, Debuginfod};
use symbolizer::events::EventKind;
use symbolizer::recording::Recording;
use symbolizer::resolve::{Resolver, Tier};
use symbolizer::{collapsed, flamegraph, jfr_out, pprof, profile, recording};

const USAGE: &str = "usage: symbolize <collapsed|flamegraph|pprof|jfr|report> <recording.jfr|DIR>... \
[-o OUTPUT | --output-dir DIR] [--event cpu|wall|alloc|live|lock] [--debug-dir DIR]... [--binary PATH]... \
[--debuginfod URL]... [--debuginfod-cache DIR] [--no-debuginfod] [--threads] [--title TITLE] [--partial] \
[--from TIME] [--to TIME]";

/// The exit status of a run that wrote its output from a damaged
/// recording's complete chunks (without `--partial`).
const EXIT_DAMAGED: u8 = 3;

#[derive(Default)]
struct Args {
    command: String,
    inputs: Vec<PathBuf>,
    output: Option<PathBuf>,
    output_dir: Option<PathBuf>,
    /// `None`: not given (the default, CPU).
    event: Option<EventKind>,
    debug_dirs: Vec<PathBuf>,
    binaries: Vec<PathBuf>,
    servers: Vec<String>,
    cache: Option<PathBuf>,
    no_debuginfod: bool,
    by_thread: bool,
    title: Option<String>,
    partial: bool,
    /// `--from`, `--to`: unix nanoseconds.
    window: (Option<i64>, Option<i64>),
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let mut parsed = Args { command: args.next().ok_or(USAGE)?, ..Args::default() };
    let value = |args: &mut dyn Iterator<Item = String>, flag: &str| args.next().ok_or(format!("{flag} needs a value"));
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-o" | "--output" => parsed.output = Some(value(&mut args, &arg)?.into()),
            "--output-dir" => parsed.output_dir = Some(value(&mut args, &arg)?.into()),
            "--event" => {
                let kind = value(&mut args, &arg)?;
                let accepted = EventKind::accepted();
                let kind = EventKind::from_name(&kind)
                    .ok_or(format!("--event {kind}: unknown event kind; accepted: {accepted}"))?;
                parsed.event = Some(kind);
            }
            "--debug-dir" => parsed.debug_dirs.push(value(&mut args, &arg)?.into()),
            "--binary" => parsed.binaries.push(value(&mut args, &arg)?.into()),
            "--debuginfod" => parsed.servers.push(value(&mut args, &arg)?),
            "--debuginfod-cache" => parsed.cache = Some(value(&mut args, &arg)?.into()),
            "--no-debuginfod" => parsed.no_debuginfod = true,
            "--threads" => parsed.by_thread = true,
            "--title" => parsed.title = Some(value(&mut args, &arg)?),
            "--partial" => parsed.partial = true,
            "--from" => parsed.window.0 = Some(parse_time(&arg, &value(&mut args, &arg)?)?),
            "--to" => parsed.window.1 = Some(parse_time(&arg, &value(&mut args, &arg)?)?),
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other if other.starts_with('-') => return Err(format!("unknown option {other}\n{USAGE}")),
            other => parsed.inputs.push(PathBuf::from(other)),
        }
    }
    if parsed.inputs.is_empty() {
        return Err(USAGE.to_owned());
    }
    if let (Some(from), Some(to)) = parsed.window {
        if from >= to {
            return Err("--from must come before --to".to_owned());
        }
    }
    Ok(parsed)
}

/// A time as `--from` and `--to` take it, in unix nanoseconds:
/// `YYYY-MM-DDTHH:MM[:SS]` (or with a space for `T`, an optional `Z`) in
/// UTC, or whole seconds since 1970.
fn parse_time(flag: &str, text: &str) -> Result<i64, String> {
    let bad = || format!("{flag} {text}: not a time (accepted: 2026-12-06T14:00[:SS] in UTC, or seconds since 1970)");
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        let seconds: i64 = text.parse().map_err(|_| bad())?;
        return seconds.checked_mul(1_000_000_000).ok_or_else(bad);
    }
    let text = text.strip_suffix('Z').unwrap_or(text);
    let (date, time) = text.split_once(['T', ' ']).ok_or_else(bad)?;
    let numbers = |part: &str, sep: char| -> Option<Vec<i64>> { part.split(sep).map(|n| n.parse().ok()).collect() };
    let (date, time) = (numbers(date, '-').ok_or_else(bad)?, numbers(time, ':').ok_or_else(bad)?);
    let ([year, month, day], [hour, minute, second @ ..]) = (date.as_slice(), time.as_slice()) else {
        return Err(bad());
    };
    let second = match second {
        [] => 0,
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
    seconds.checked_mul(1_000_000_000).ok_or_else(bad)
}

fn resolver(args: &Args) -> Resolver {
    let debuginfod = (!args.no_debuginfod).then(|| {
        let mut urls = args.servers.clone();
        urls.extend(urls_from_env());
        Debuginfod::new(urls, args.cache.clone().unwrap_or_else(default_cache))
    });
    let (locator, problems) = Locator::new(&args.debug_dirs, &args.binaries, debuginfod);
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
fn read_all(args: &Args, inputs: &[PathBuf]) -> Result<(Vec<(String, Recording)>, Finish), String> {
    let mut finish = Finish::Success;
    let mut recordings = Vec::new();
    for input in inputs {
        let outcome = match recording::read(input) {
            Ok(outcome) => outcome,
            Err(e) if inputs.len() > 1 => {
                eprintln!("warning: {e}; left out");
                finish = Finish::Damaged;
                continue;
            }
            Err(e) => return Err(e.to_string()),
        };
        if outcome.undefined > 0 {
            eprintln!(
                "warning: {}: {} references to constants that no chunk defines, read as null (as the JDK's parser reads them)",
                input.display(),
                outcome.undefined
            );
        }
        for damage in &outcome.damage {
            let after = if damage.last { "; nothing after it can be read" } else { "; left out" };
            eprintln!("warning: {}: {damage}{after}", input.display());
        }
        if !outcome.damage.is_empty() {
            eprintln!(
                "warning: {} is damaged: the output holds the {} of its chunks that are complete",
                input.display(),
                outcome.recording.chunks.len(),
            );
            finish = Finish::Damaged;
        }
        let mut read = outcome.recording;
        if args.window != (None, None) && read.keep_window(args.window) == 0 {
            continue;
        }
        recordings.push((input.display().to_string(), read));
    }
    if recordings.is_empty() {
        let within = if args.window == (None, None) { "" } else { " with samples between --from and --to" };
        return Err(format!("no recording{within} could be read"));
    }
    if let (Finish::Damaged, false) = (&finish, args.partial) {
        eprintln!("exit status {EXIT_DAMAGED}: written from what could be read (--partial accepts this with status 0)");
    }
    Ok((recordings, if args.partial { Finish::Success } else { finish }))
}

/// The file `--output-dir` gets for the recording `input`.
fn output_in(dir: &Path, input: &str, command: &str) -> PathBuf {
    let name = Path::new(input).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = name.strip_suffix(".jfr").unwrap_or(&name);
    let extension = match command {
        "collapsed" => "collapsed",
        "flamegraph" => "html",
        "pprof" => "pb.gz",
        "jfr" => "symbolized.jfr",
        _ => "txt",
    };
    dir.join(format!("{stem}.{extension}"))
}

fn run() -> Result<Finish, String> {
    let args = parse_args()?;
    if !["collapsed", "flamegraph", "pprof", "jfr", "report"].contains(&args.command.as_str()) {
        return Err(format!("unknown command {}\n{USAGE}", args.command));
    }
    if args.output.is_some() && args.output_dir.is_some() {
        return Err("-o and --output-dir: give one (one output, or one per recording)".to_owned());
    }
    let binary = ["pprof", "jfr"].contains(&args.command.as_str());
    if binary && args.output.is_none() && args.output_dir.is_none() {
        return Err(format!("{} writes a binary file: give -o PATH", args.command));
    }
    if args.command == "jfr" && args.event.is_some() {
        return Err("--event does not apply to jfr: the copy keeps every event".to_owned());
    }
    let inputs = expand_inputs(&args.inputs)?;
    if args.command == "jfr" && inputs.len() > 1 && args.output_dir.is_none() {
        return Err("jfr copies each recording on its own: give --output-dir DIR for several".to_owned());
    }
    let (recordings, mut finish) = read_all(&args, &inputs)?;
    if let Some(dir) = &args.output_dir {
        let mut outputs: HashMap<PathBuf, &str> = HashMap::new();
        for (name, _) in &recordings {
            if let Some(other) = outputs.insert(output_in(dir, name, &args.command), name) {
                return Err(format!("--output-dir: {other} and {name} would both be written to the same file"));
            }
        }
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let mut resolver = resolver(&args);
    // Every recording's remote frames at once: each debug file found,
    // fetched and parsed once, each library's addresses on all cores.
    resolver.prepare(recordings.iter().map(|(_, r)| r));
    match &args.output_dir {
        Some(dir) => {
            let mut failed = 0;
            for (name, recording) in &recordings {
                let output = output_in(dir, name, &args.command);
                if let Err(e) = produce(&args, name, recording, &mut resolver, Some(&output)) {
                    eprintln!("error: {e}; no output for it");
                    failed += 1;
                }
            }
            if failed == recordings.len() {
                return Err("no recording gave an output".to_owned());
            }
            if failed > 0 {
                eprintln!("exit status {EXIT_DAMAGED}: {failed} of {} recordings gave no output", recordings.len());
                finish = Finish::Damaged;
            }
        }
        None => {
            let name = match recordings.as_slice() {
                [(name, _)] => name.clone(),
                _ => format!("{} recordings", recordings.len()),
            };
            let mut recordings = recordings;
            // In time order (a `%n` pattern's names sort 10 before 2).
            recordings.sort_by_key(|(_, r)| r.start_nanos());
            let merged = Recording::merge(recordings.into_iter().map(|(_, r)| r));
            produce(&args, &name, &merged, &mut resolver, args.output.as_deref())?;
        }
    }
    Ok(finish)
}

/// Writes `args.command`'s output for `recording` (named `name`) to
/// `output` (stdout: `None`).
fn produce(
    args: &Args,
    name: &str,
    recording: &Recording,
    resolver: &mut Resolver,
    output: Option<&Path>,
) -> Result<(), String> {
    if args.command == "jfr" {
        let jfr_out::Rewritten { bytes, tiers, skipped } = jfr_out::rewrite_counting(recording, Some(resolver));
        write(output, &bytes)?;
        if !skipped.is_empty() {
            let kinds: Vec<String> = skipped.iter().map(|(kind, n)| format!("{n} {kind}")).collect();
            eprintln!(
                "warning: {name}: not copied: {} sample events (the copy carries this profiler's CPU and wall-clock samples)",
                kinds.join(", ")
            );
        }
        let total: u64 = tiers.values().sum();
        if total > 0 {
            let counts: Vec<String> =
                Tier::ALL.iter().map(|t| format!("{} {}", tiers.get(t).copied().unwrap_or(0), t.describe())).collect();
            eprintln!("{total} remote frames: {}", counts.join(", "));
            for problem in resolver.problems() {
                eprintln!("  {problem}");
            }
        }
        return Ok(());
    }
    let kind = args.event.unwrap_or_default();
    if !recording.kinds().contains_key(&kind) {
        return Err(no_events(name, recording, kind));
    }
    let (profile, report) = profile::build(recording, kind, Some(resolver));
    let bytes = match args.command.as_str() {
        "collapsed" => collapsed::collapse(&profile, args.by_thread).into_bytes(),
        "flamegraph" => {
            let title = args.title.clone().unwrap_or_else(|| format!("Flame graph of {name}: {}", kind.describe()));
            flamegraph::render(&profile, &title, args.by_thread).into_bytes()
        }
        "pprof" => pprof::encode(&pprof::to_pprof(&profile, profile.period)),
        _ => report.to_string().into_bytes(),
    };
    write(output, &bytes)?;
    if args.command != "report" && (report.remote_frames > 0 || !report.categories.is_empty()) {
        eprint!("{report}");
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(Finish::Success) => ExitCode::SUCCESS,
        Ok(Finish::Damaged) => ExitCode::from(EXIT_DAMAGED),
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_time;

    #[test]
    fn times_are_utc_dates_or_unix_seconds() {
        let at = |text| parse_time("--from", text);
        assert_eq!(at("2023-11-14T22:13:20"), Ok(1_700_000_000_000_000_000));
        assert_eq!(at("2023-11-14 22:13:20Z"), Ok(1_700_000_000_000_000_000));
        assert_eq!(at("1700000000"), Ok(1_700_000_000_000_000_000));
        assert_eq!(at("2000-02-29T00:00"), Ok(951_782_400_000_000_000));
        assert_eq!(at("1969-12-31T23:59:59"), Ok(-1_000_000_000));
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
        ] {
            let e = at(bad).expect_err(bad);
            assert!(e.starts_with("--from") && e.contains("accepted"), "{e}");
        }
    }
}
