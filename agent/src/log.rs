//! The agent's log: a level and a sink (stderr or a file), set from the
//! `log=` and `loglevel=` options. NOT signal-safe: it formats and locks, so
//! it is never used on the sampling path (which counts instead).

use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;

/// How much the agent logs (`loglevel=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
    None,
}

/// Characters of a value (an option, a path) that messages repeat.
const ECHOED_CHARS: usize = 200;

/// `value` as a message repeats it: whole up to [`ECHOED_CHARS`]
/// characters, else cut there with an ellipsis and the total length, so a
/// 100 KB option or path does not flood the log.
pub fn echo(value: &str) -> String {
    match value.char_indices().nth(ECHOED_CHARS) {
        None => value.to_owned(),
        Some((cut, _)) => format!("{}… ({} bytes in all)", &value[..cut], value.len()),
    }
}

/// The log's level and its file (stderr when none). Process-wide: the
/// agent logs from its load to its unload, across sessions.
struct Log {
    level: AtomicU8,
    sink: Mutex<Option<File>>,
}

static LOG: Log = Log { level: AtomicU8::new(LogLevel::Warn as u8), sink: Mutex::new(None) };

/// Applies `log=` and `loglevel=`. A log file that cannot be opened is
/// reported on stderr and the log stays on stderr.
pub fn configure(level: LogLevel, path: Option<&str>) {
    LOG.level.store(level as u8, Ordering::Relaxed);
    let file = path.and_then(|p| match File::options().create(true).append(true).open(p) {
        Ok(f) => Some(f),
        Err(e) => {
            eprintln!("[profiler] WARN: cannot open log file {}: {e}; logging to stderr", echo(p));
            None
        }
    });
    if let Ok(mut sink) = LOG.sink.lock() {
        *sink = file;
    }
}

pub fn enabled(level: LogLevel) -> bool {
    level as u8 >= LOG.level.load(Ordering::Relaxed) && level != LogLevel::None
}

#[doc(hidden)]
pub fn write(level: LogLevel, args: std::fmt::Arguments<'_>) {
    let tag = match level {
        LogLevel::Trace => "TRACE",
        LogLevel::Debug => "DEBUG",
        LogLevel::Info => "INFO",
        LogLevel::Warn => "WARN",
        LogLevel::Error => "ERROR",
        LogLevel::None => return,
    };
    let line = format!("[profiler] {tag}: {args}\n");
    match LOG.sink.lock().as_deref_mut() {
        Ok(Some(file)) => {
            let _ = file.write_all(line.as_bytes());
        }
        _ => {
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }
}

macro_rules! log_at {
    ($level:expr, $($arg:tt)*) => {
        if $crate::log::enabled($level) {
            $crate::log::write($level, format_args!($($arg)*));
        }
    };
}

macro_rules! log_debug { ($($arg:tt)*) => { $crate::log::log_at!($crate::log::LogLevel::Debug, $($arg)*) }; }
macro_rules! log_info { ($($arg:tt)*) => { $crate::log::log_at!($crate::log::LogLevel::Info, $($arg)*) }; }
macro_rules! log_warn { ($($arg:tt)*) => { $crate::log::log_at!($crate::log::LogLevel::Warn, $($arg)*) }; }
macro_rules! log_error { ($($arg:tt)*) => { $crate::log::log_at!($crate::log::LogLevel::Error, $($arg)*) }; }

// Used as `log::warn!(...)` and so on.
pub(crate) use {log_at, log_debug as debug, log_error as error, log_info as info, log_warn as warn};
