//! One backend's delivery: its thread, its bounded queue, and the retry
//! policy.

use super::{Backend, Period, Request};
use crate::log;
use sampler::counters::{self, Counter};
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Periods a backend's queue holds; a newer one pushes out the oldest.
const QUEUE_PERIODS: usize = 4;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The whole request, connecting included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Attempts per period (the first and its retries).
const MAX_ATTEMPTS: u32 = 6;
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A `Retry-After` longer than this is cut to it.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

#[derive(Default)]
struct State {
    periods: VecDeque<Arc<Period>>,
    /// No more periods come: deliver what is queued by this deadline
    /// (None: however long it takes), then end.
    closed: Option<Option<Instant>>,
    /// The thread has ended.
    done: bool,
}

#[derive(Default)]
struct Queue {
    state: Mutex<State>,
    wake: Condvar,
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub struct Lane {
    name: &'static str,
    queue: Arc<Queue>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Lane {
    /// A lane dropped unfinished (a session that failed to start) ends its
    /// thread: nothing is queued yet.
    fn drop(&mut self) {
        let mut state = self.queue.lock();
        if state.closed.is_none() {
            state.closed = Some(Some(Instant::now()));
        }
        self.queue.wake.notify_all();
    }
}

impl Lane {
    pub fn start(backend: Box<dyn Backend>) -> Result<Lane, String> {
        let name = backend.name();
        let queue = Arc::new(Queue::default());
        let shared = Arc::clone(&queue);
        let thread = std::thread::Builder::new()
            .name(format!("profiler-{name}"))
            .spawn(move || {
                deliver(&*backend, &shared);
                shared.lock().done = true;
                shared.wake.notify_all();
            })
            .map_err(|e| format!("{name}: cannot start the delivery thread: {e}"))?;
        Ok(Lane { name, queue, thread: Some(thread) })
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Queues `period`, dropping the oldest queued one if full (counted).
    pub fn push(&self, period: Arc<Period>) {
        let mut state = self.queue.lock();
        if state.periods.len() == QUEUE_PERIODS {
            state.periods.pop_front();
            counters::increment(Counter::ExportDropped);
            log::warn!("{}: a period was dropped undelivered: {QUEUE_PERIODS} newer ones are queued", self.name);
        }
        state.periods.push_back(period);
        self.queue.wake.notify_all();
    }

    /// No more periods: what is queued is delivered by `deadline`, or
    /// dropped.
    pub fn close(&self, deadline: Option<Instant>) {
        self.queue.lock().closed = Some(deadline);
        self.queue.wake.notify_all();
    }

    /// Waits until the thread has delivered everything and ended, or
    /// `deadline`; whether it ended (if not, it is left to finish alone).
    pub fn join_until(mut self, deadline: Instant) -> bool {
        let mut state = self.queue.lock();
        while !state.done {
            let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) else {
                return false;
            };
            state = self.queue.wake.wait_timeout(state, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        drop(state);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        true
    }
}

/// What an attempt came to.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Sent,
    /// Worth another attempt, after at least the delay the server asked.
    Retry(Option<Duration>, String),
    Failed(String),
    /// Not delivered by the session's end.
    GivenUp(String),
}

/// The outcome of an HTTP status `code` with its `Retry-After` header, by
/// `backend`'s rules. A redirect is a failure: the agent follows none (a
/// POST redirected is not delivered).
fn outcome_of(backend: &dyn Backend, code: u16, retry_after: Option<&str>) -> Outcome {
    match code {
        200..=299 => Outcome::Sent,
        429 => {
            let asked = retry_after.and_then(|v| v.trim().parse::<u64>().ok()).map(Duration::from_secs);
            Outcome::Retry(asked.map(|d| d.min(MAX_RETRY_AFTER)), "429 Too Many Requests".into())
        }
        300..=399 => Outcome::Failed(format!("HTTP {code}: redirected (give the URL it redirects to)")),
        _ if backend.retries(code) => Outcome::Retry(None, format!("HTTP {code}")),
        _ => Outcome::Failed(format!("HTTP {code}: the backend refuses the upload")),
    }
}

/// The wait before attempt `attempt` + 1: exponential from
/// [`FIRST_BACKOFF`] to [`MAX_BACKOFF`], at least what the server asked,
/// and ±25% of jitter (`draw`: uniform over all `u64`s) so that a fleet's
/// retries spread out.
fn backoff(attempt: u32, asked: Option<Duration>, draw: u64) -> Duration {
    let exponential = FIRST_BACKOFF.saturating_mul(1 << attempt.min(10)).min(MAX_BACKOFF);
    let jitter = 0.75 + 0.5 * (draw >> 11) as f64 / (1u64 << 53) as f64;
    exponential.mul_f64(jitter).max(asked.unwrap_or_default())
}

/// One attempt, in at most `timeout`. Only a request that never reached
/// the backend (no name, no connection) is worth repeating on a transport
/// error: one that timed out or broke after sending may have been taken.
fn send(agent: &ureq::Agent, backend: &dyn Backend, request: &Request, timeout: Duration) -> Outcome {
    let mut call = agent.post(&request.url).timeout(timeout);
    for (name, value) in &request.headers {
        call = call.set(name, value);
    }
    match call.send_bytes(&request.body) {
        Ok(response) => outcome_of(backend, response.status(), None),
        Err(ureq::Error::Status(code, response)) => outcome_of(backend, code, response.header("Retry-After")),
        Err(ureq::Error::Transport(e)) => match e.kind() {
            ureq::ErrorKind::Dns | ureq::ErrorKind::ConnectionFailed | ureq::ErrorKind::ProxyConnect => {
                Outcome::Retry(None, e.to_string())
            }
            _ => Outcome::Failed(e.to_string()),
        },
    }
}

/// Waits `pause`, or less when the queue is closed meanwhile with a
/// deadline sooner.
fn wait(queue: &Queue, pause: Duration) {
    let until = Instant::now() + pause;
    let mut state = queue.lock();
    loop {
        let end = state.closed.flatten().map_or(until, |deadline| deadline.min(until));
        let Some(left) = end.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) else { return };
        state = queue.wake.wait_timeout(state, left).unwrap_or_else(|p| p.into_inner()).0;
    }
}

/// Delivers the queue's periods until it is closed and empty.
fn deliver(backend: &dyn Backend, queue: &Queue) {
    let name = backend.name();
    let agent = ureq::AgentBuilder::new().timeout_connect(CONNECT_TIMEOUT).redirects(0).build();
    // A spell of failures is logged once, and its end once.
    let mut failing = false;
    loop {
        let period = {
            let mut state = queue.lock();
            loop {
                if let Some(period) = state.periods.pop_front() {
                    break period;
                }
                if state.closed.is_some() {
                    return;
                }
                state = queue.wake.wait(state).unwrap_or_else(|p| p.into_inner());
            }
        };
        let request = match backend.request(&period) {
            Ok(request) => request,
            Err(e) => {
                counters::increment(Counter::ExportFailures);
                log::warn!("{name}: cannot encode a period: {e}");
                continue;
            }
        };
        for attempt in 0..MAX_ATTEMPTS {
            let started = Instant::now();
            // At the session's end, no attempt outlasts its deadline.
            let deadline = queue.lock().closed.flatten();
            let left = deadline.map_or(REQUEST_TIMEOUT, |d| d.saturating_duration_since(started).min(REQUEST_TIMEOUT));
            let outcome = if left.is_zero() {
                Outcome::GivenUp("no time was left to send it".into())
            } else {
                send(&agent, backend, &request, left)
            };
            let ended = deadline.is_some_and(|d| Instant::now() >= d);
            let outcome = match outcome {
                Outcome::Retry(_, why) | Outcome::Failed(why) if ended => Outcome::GivenUp(why),
                outcome => outcome,
            };
            match outcome {
                Outcome::Sent => {
                    counters::increment(Counter::ExportUploads);
                    counters::add(Counter::ExportBytes, request.body.len() as u64);
                    counters::add(Counter::ExportNanos, started.elapsed().as_nanos() as u64);
                    if std::mem::take(&mut failing) {
                        log::info!("{name}: {} takes uploads again", request.url);
                    }
                    break;
                }
                Outcome::Retry(asked, why) if attempt + 1 < MAX_ATTEMPTS => {
                    counters::increment(Counter::ExportRetries);
                    if !std::mem::replace(&mut failing, true) {
                        log::warn!("{name}: {} did not take an upload ({why}); retrying", request.url);
                    }
                    wait(queue, backoff(attempt, asked, sampler::random::next_u64()));
                }
                Outcome::GivenUp(why) => {
                    counters::increment(Counter::ExportFailures);
                    log::warn!("{name}: a period was given up at the session's end ({why})");
                    break;
                }
                Outcome::Retry(_, why) | Outcome::Failed(why) => {
                    counters::increment(Counter::ExportFailures);
                    if !std::mem::replace(&mut failing, true) || attempt > 0 {
                        log::warn!("{name}: a period was not delivered to {} ({why})", request.url);
                    }
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_and_429_are_retried_other_refusals_not() {
        struct Any5xx;
        impl Backend for Any5xx {
            fn name(&self) -> &'static str {
                "test"
            }
            fn request(&self, _: &Period) -> Result<Request, String> {
                Err("none".into())
            }
        }
        let b = &Any5xx;
        assert_eq!(outcome_of(b, 200, None), Outcome::Sent);
        assert_eq!(outcome_of(b, 204, None), Outcome::Sent);
        assert!(matches!(outcome_of(b, 503, None), Outcome::Retry(None, _)));
        assert!(matches!(outcome_of(b, 429, Some("7")), Outcome::Retry(Some(d), _) if d == Duration::from_secs(7)));
        assert!(matches!(outcome_of(b, 429, Some("3600")), Outcome::Retry(Some(d), _) if d == MAX_RETRY_AFTER));
        assert!(matches!(outcome_of(b, 429, Some("Wed, 21 Oct 2015 07:28:00 GMT")), Outcome::Retry(None, _)));
        for code in [301, 302, 307, 308, 400, 401, 403, 404, 413] {
            assert!(matches!(outcome_of(b, code, None), Outcome::Failed(_)), "{code}");
        }
    }

    #[test]
    fn backoff_doubles_to_its_ceiling_with_jitter_and_honours_the_server() {
        let middle = 1u64 << 63;
        assert_eq!(backoff(0, None, middle), FIRST_BACKOFF);
        assert_eq!(backoff(3, None, middle), FIRST_BACKOFF * 8);
        assert_eq!(backoff(20, None, middle), MAX_BACKOFF);
        assert!(
            backoff(1, None, 0) >= Duration::from_millis(1500)
                && backoff(1, None, u64::MAX) <= Duration::from_millis(2500)
        );
        assert_eq!(backoff(0, Some(Duration::from_secs(9)), middle), Duration::from_secs(9));
    }
}
