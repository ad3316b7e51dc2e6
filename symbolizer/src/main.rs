//! `symbolize`: resolves remote native frames and converts recordings.
//!
//! ```text
//! symbolize <command> <recording.jfr> [options]
//!
//! commands:  collapsed | flamegraph | pprof | jfr | report
//! options:   -o, --output PATH        where to write (default: stdout; required for pprof and jfr)
//!            --debug-dir DIR          a tree with .build-id/ab/cdef….debug files (repeatable)
//!            --binary PATH            a binary whose debug file (itself or via .gnu_debuglink) to use (repeatable)
//!            --debuginfod URL         a debuginfod server (repeatable; DEBUGINFOD_URLS is used too)
//!            --debuginfod-cache DIR   the client cache (default: the debuginfod client's)
//!            --no-debuginfod          do not contact servers
//!            --threads                thread name as the root frame (collapsed, flamegraph)
//!            --title TITLE            flame graph title
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use symbolizer::debuginfo::Locator;
use symbolizer::debuginfod::{default_cache, urls_from_env, Debuginfod};
use symbolizer::resolve::Resolver;
use symbolizer::{collapsed, flamegraph, jfr_out, pprof, profile, recording};

const USAGE: &str = "usage: symbolize <collapsed|flamegraph|pprof|jfr|report> <recording.jfr> [-o OUTPUT] \
[--debug-dir DIR]... [--binary PATH]... [--debuginfod URL]... [--debuginfod-cache DIR] [--no-debuginfod] \
[--threads] [--title TITLE]";

#[derive(Default)]
struct Args {
    command: String,
    input: PathBuf,
    output: Option<PathBuf>,
    debug_dirs: Vec<PathBuf>,
    binaries: Vec<PathBuf>,
    servers: Vec<String>,
    cache: Option<PathBuf>,
    no_debuginfod: bool,
    by_thread: bool,
    title: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let mut parsed = Args { command: args.next().ok_or(USAGE)?, ..Args::default() };
    let mut input = None;
    let value = |args: &mut dyn Iterator<Item = String>, flag: &str| args.next().ok_or(format!("{flag} needs a value"));
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-o" | "--output" => parsed.output = Some(value(&mut args, &arg)?.into()),
            "--debug-dir" => parsed.debug_dirs.push(value(&mut args, &arg)?.into()),
            "--binary" => parsed.binaries.push(value(&mut args, &arg)?.into()),
            "--debuginfod" => parsed.servers.push(value(&mut args, &arg)?),
            "--debuginfod-cache" => parsed.cache = Some(value(&mut args, &arg)?.into()),
            "--no-debuginfod" => parsed.no_debuginfod = true,
            "--threads" => parsed.by_thread = true,
            "--title" => parsed.title = Some(value(&mut args, &arg)?),
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other if other.starts_with('-') => return Err(format!("unknown option {other}\n{USAGE}")),
            other => input = Some(PathBuf::from(other)),
        }
    }
    parsed.input = input.ok_or(USAGE)?;
    Ok(parsed)
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

fn write(args: &Args, bytes: &[u8]) -> Result<(), String> {
    match &args.output {
        Some(path) => std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display())),
        None => {
            use std::io::Write;
            std::io::stdout().write_all(bytes).map_err(|e| format!("cannot write to stdout: {e}"))
        }
    }
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    if !["collapsed", "flamegraph", "pprof", "jfr", "report"].contains(&args.command.as_str()) {
        return Err(format!("unknown command {}\n{USAGE}", args.command));
    }
    if ["pprof", "jfr"].contains(&args.command.as_str()) && args.output.is_none() {
        return Err(format!("{} writes a binary file: give -o PATH", args.command));
    }
    let outcome = recording::read(&args.input).map_err(|e| e.to_string())?;
    if let Some(error) = &outcome.error {
        eprintln!("warning: {error}; continuing with the {} chunks read before it", outcome.recording.chunks.len());
    }
    let recording = outcome.recording;
    let mut resolver = resolver(&args);
    let (profile, report) = profile::build(&recording, Some(&mut resolver));
    let bytes = match args.command.as_str() {
        "collapsed" => collapsed::collapse(&profile, args.by_thread).into_bytes(),
        "flamegraph" => {
            let title = args.title.clone().unwrap_or_else(|| format!("Flame graph of {}", args.input.display()));
            flamegraph::render(&profile, &title, args.by_thread).into_bytes()
        }
        "pprof" => {
            let period = recording
                .chunks
                .first()
                .and_then(|c| c.settings.iter().find(|(k, _)| k == "interval"))
                .and_then(|(_, v)| v.trim_end_matches(" ns").parse().ok())
                .unwrap_or(0);
            pprof::encode(&pprof::to_pprof(&profile, period))
        }
        "jfr" => jfr_out::rewrite(&recording, Some(&mut resolver)),
        _ => report.to_string().into_bytes(),
    };
    write(&args, &bytes)?;
    if args.command != "report" && (report.remote_frames > 0 || !report.categories.is_empty()) {
        eprint!("{report}");
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}
