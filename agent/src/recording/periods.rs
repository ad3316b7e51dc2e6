//! The periods of a looping session (`loop=`, or the exporters' period):
//! when the current one ends, and the file the next one is written to
//! (`file=` expanded again with the next sequence number and the time it
//! starts), if each period has a file of its own.

use crate::args::{self, Naming};
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub struct Periods {
    /// `file=`, when each period has a file of its own.
    template: Option<String>,
    length: Duration,
    /// The current period's number (the first, written at start, is 0).
    sequence: u64,
    started: Instant,
}

impl Periods {
    /// Periods of `length`, the first starting now.
    pub fn new(template: Option<String>, length: Duration) -> Self {
        Self { template, length, sequence: 0, started: Instant::now() }
    }

    /// Starts the first period now.
    pub fn restart(&mut self) {
        self.started = Instant::now();
    }

    pub fn due(&self) -> bool {
        self.started.elapsed() >= self.length
    }

    /// Starts the next period: its file's path, if it has one. A period that ended on
    /// time starts the next where it ended (the ticks that notice it
    /// cause no drift); one ended early, or more than a period late, now.
    pub fn start_next(&mut self) -> Option<PathBuf> {
        self.sequence += 1;
        let now = Instant::now();
        let next = self.started + self.length;
        self.started = if next <= now && now - next < self.length { next } else { now };
        self.template.as_deref().map(|template| path(template, self.sequence))
    }
}

/// `template` expanded for the period numbered `sequence`, starting now.
pub fn path(template: &str, sequence: u64) -> PathBuf {
    let unix_seconds =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    PathBuf::from(args::expand_path(template, &Naming { pid: std::process::id(), unix_seconds, sequence }))
}
