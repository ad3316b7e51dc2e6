//! `symbolize`: converts recordings into formats people use.
//!
//! ```text
//! symbolize collapsed  <recording.jfr> [-o out.txt]  [--threads]
//! symbolize flamegraph <recording.jfr> [-o out.html] [--threads] [--title T]
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use symbolizer::{collapsed, flamegraph, jfr};

const USAGE: &str = "usage: symbolize <collapsed|flamegraph> <recording.jfr> [-o OUTPUT] [--threads] [--title TITLE]";

struct Args {
    command: String,
    input: PathBuf,
    output: Option<PathBuf>,
    by_thread: bool,
    title: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let command = args.next().ok_or(USAGE)?;
    let mut input = None;
    let mut parsed = Args { command, input: PathBuf::new(), output: None, by_thread: false, title: None };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-o" | "--output" => parsed.output = Some(args.next().ok_or("-o needs a path")?.into()),
            "--threads" => parsed.by_thread = true,
            "--title" => parsed.title = Some(args.next().ok_or("--title needs a value")?),
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other if other.starts_with('-') => return Err(format!("unknown option {other}\n{USAGE}")),
            other => input = Some(PathBuf::from(other)),
        }
    }
    parsed.input = input.ok_or(USAGE)?;
    Ok(parsed)
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    let outcome = jfr::read(&args.input).map_err(|e| e.to_string())?;
    if let Some(error) = &outcome.error {
        eprintln!("warning: {error}; continuing with the {} samples read before it", outcome.profile.samples.len());
    }
    let text = match args.command.as_str() {
        "collapsed" => collapsed::collapse(&outcome.profile, args.by_thread),
        "flamegraph" => {
            let title = args.title.clone().unwrap_or_else(|| format!("Flame graph of {}", args.input.display()));
            flamegraph::render(&outcome.profile, &title, args.by_thread)
        }
        other => return Err(format!("unknown command {other}\n{USAGE}")),
    };
    match &args.output {
        Some(path) => std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?,
        None => print!("{text}"),
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
