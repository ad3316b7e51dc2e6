//! The progress bar on stderr (recordings read, debug files fetched,
//! addresses resolved, the profile built), for runs that take more than a
//! second: hidden until then, and always when stderr is not a terminal
//! (indicatif's stderr target hides itself there). It never writes to
//! stdout, and what else goes to stderr while it is shown goes through
//! [`Progress::note`].

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;
use symbolizer::resolve::Step;

/// How long a run goes without a bar.
const QUIET: Duration = Duration::from_secs(1);

pub struct Progress {
    bar: ProgressBar,
    /// Tells the thread that shows the bar after [`QUIET`] that the run is over.
    done: Option<(Sender<()>, JoinHandle<()>)>,
}

impl Progress {
    /// A hidden bar, shown on stderr once the run has taken [`QUIET`].
    pub fn start() -> Self {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        let (done, over) = channel();
        let shown = bar.clone();
        let thread = std::thread::spawn(move || {
            if let Err(RecvTimeoutError::Timeout) = over.recv_timeout(QUIET) {
                shown.set_draw_target(ProgressDrawTarget::stderr());
                shown.enable_steady_tick(Duration::from_millis(100));
            }
        });
        Self { bar, done: Some((done, thread)) }
    }

    /// A new phase: `what` it does, and the `length` it counts to (or a
    /// spinner, without one).
    pub fn phase(&self, what: &str, length: Option<u64>) {
        let template = match length {
            Some(_) => "{spinner} {msg} [{bar:30}] {human_pos}/{human_len} ({elapsed})",
            None => "{spinner} {msg} ({elapsed})",
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            self.bar.set_style(style.progress_chars("=> "));
        }
        self.bar.set_length(length.unwrap_or(0));
        self.bar.set_position(0);
        self.bar.set_message(what.to_owned());
    }

    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
    }

    /// What the resolver says of its progress.
    pub fn step(&self, step: Step) {
        match step {
            Step::Fetching { libraries } if libraries > 0 => {
                self.phase(&format!("finding the debug files of {libraries} libraries"), None);
            }
            Step::Resolving { addresses } if addresses > 0 => {
                self.phase("resolving remote frames", Some(addresses as u64));
            }
            Step::Fetching { .. } | Step::Resolving { .. } => {}
            Step::Resolved { addresses } => self.inc(addresses as u64),
        }
    }

    /// Prints a line on stderr, around the bar.
    pub fn note(&self, line: impl std::fmt::Display) {
        self.bar.suspend(|| eprintln!("{line}"));
    }

    /// Removes the bar (before the run's last words on stderr).
    pub fn finish(&mut self) {
        if let Some((done, thread)) = self.done.take() {
            let _ = done.send(());
            let _ = thread.join();
            self.bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
