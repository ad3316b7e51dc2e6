//! Shipping a session's periods to the backends fleets use (`pyroscope=`,
//! `datadog=`, `otlp=`): each finished period's recording goes, as each
//! backend wants it, to each backend from a thread of its own, through a
//! bounded queue (the oldest period dropped first), with timeouts on
//! connecting and on the whole request, and retries with exponential
//! backoff and jitter on connection errors, 429 (its `Retry-After`
//! honoured) and 5xx, never on other 4xx. A period is delivered at most
//! once per backend. Nothing here runs on the JVM's threads but `ship`
//! (a queue push) and `finish` (a bounded wait at the session's end).

mod datadog;
mod delivery;
mod otlp;
mod pyroscope;

pub use crate::args::export::ExportOptions;
use crate::log;
use delivery::Lane;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// The period shipped when `loop=` is not given: the Datadog profiler's
/// cadence (Pyroscope's agent uses 10 s: `loop=10s`).
pub const DEFAULT_PERIOD: Duration = Duration::from_secs(60);
/// How long the session's end waits for the last period to be delivered.
pub const FINISH_WAIT: Duration = Duration::from_secs(5);

/// One period's recording, and when it ran.
pub struct Period {
    pub jfr: Vec<u8>,
    pub start: SystemTime,
    pub end: SystemTime,
}

/// What every upload says of the process.
#[derive(Clone, Debug, Default)]
pub struct Identity {
    pub service: String,
    /// `tags=`.
    pub tags: Vec<(String, String)>,
    pub host: String,
    pub pid: u32,
    /// The JDK's `java.version`.
    pub runtime_version: String,
    /// For backends that weigh samples by a rate: the CPU interval in ns
    /// (else the wall-clock one), if either is sampled.
    pub interval_ns: Option<u64>,
}

/// The service a Java command line names: its main class, or its jar's
/// name (`sun.java.command`: `org.example.Main args`, `app.jar args`).
pub fn service_of(java_command: &str) -> Option<String> {
    let main = java_command.split_whitespace().next()?;
    let name = match main.strip_suffix(".jar") {
        Some(jar) => jar.rsplit('/').next().unwrap_or(jar),
        None => main,
    };
    let name: String = name.chars().filter(|c| !c.is_control() && !"{}=;,\"".contains(*c)).collect();
    (!name.is_empty()).then_some(name)
}

/// This host's name.
pub fn host_name() -> String {
    let mut name = [0u8; 256];
    // SAFETY: a buffer of the length given.
    let ok = unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) } == 0;
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    if ok {
        String::from_utf8_lossy(&name[..end]).into_owned()
    } else {
        String::new()
    }
}

/// One HTTP request.
pub struct Request {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// A backend: how a period becomes its request.
pub trait Backend: Send + Sync {
    fn name(&self) -> &'static str;
    fn request(&self, period: &Period) -> Result<Request, String>;
    /// Whether an answer `code` (not 2xx, 3xx or 429) is worth another
    /// attempt: a server error, by default.
    fn retries(&self, code: u16) -> bool {
        (500..=599).contains(&code)
    }
}

/// Credentials by name: the environment, then `credentials=FILE`'s
/// `NAME=value` lines.
pub struct Credentials(HashMap<String, String>);

impl Credentials {
    pub fn read(file: Option<&Path>) -> Result<Self, String> {
        let mut values = HashMap::new();
        if let Some(file) = file {
            let text = std::fs::read_to_string(file)
                .map_err(|e| format!("credentials: cannot read {}: {e}", file.display()))?;
            for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
                let (name, value) = line
                    .split_once('=')
                    .ok_or_else(|| format!("credentials: {}: a line is not NAME=value", file.display()))?;
                values.insert(name.trim().to_owned(), value.trim().to_owned());
            }
        }
        Ok(Self(values))
    }

    /// The credential `name`: the environment's, else the file's.
    pub fn get(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty()).or_else(|| self.0.get(name).cloned())
    }
}

/// A session's exporters, one delivery thread each.
pub struct Exporters {
    lanes: Vec<Lane>,
}

impl Exporters {
    /// Starts a delivery thread for each backend `options` name.
    pub fn start(options: &ExportOptions, identity: Identity) -> Result<Self, String> {
        let credentials = Credentials::read(options.credentials.as_deref())?;
        let identity = Arc::new(identity);
        let mut backends: Vec<Box<dyn Backend>> = Vec::new();
        if let Some(url) = &options.pyroscope {
            backends.push(Box::new(pyroscope::Pyroscope::new(url, Arc::clone(&identity), &credentials)));
        }
        if let Some(url) = &options.datadog {
            backends.push(Box::new(datadog::Datadog::new(url, Arc::clone(&identity), &credentials)));
        }
        if let Some(url) = &options.otlp {
            backends.push(Box::new(otlp::Otlp::new(url, Arc::clone(&identity), &credentials)));
        }
        let lanes = backends.into_iter().map(Lane::start).collect::<Result<Vec<_>, _>>()?;
        Ok(Self { lanes })
    }

    /// Queues `period` for every backend.
    pub fn ship(&self, period: Period) {
        let period = Arc::new(period);
        for lane in &self.lanes {
            lane.push(Arc::clone(&period));
        }
    }

    /// Delivers what is queued within `wait`, then gives up (logged).
    pub fn finish(self, wait: Duration) {
        let deadline = Instant::now() + wait;
        for lane in &self.lanes {
            lane.close(Some(deadline));
        }
        for lane in self.lanes {
            let name = lane.name();
            if !lane.join_until(deadline) {
                log::warn!("{name}: the last periods were not delivered within {} s; given up", wait.as_secs());
            }
        }
    }
}

/// One part of a `multipart/form-data` body.
pub struct Part<'a> {
    pub name: &'static str,
    pub filename: &'static str,
    pub content_type: Option<&'static str>,
    pub data: &'a [u8],
}

/// A `multipart/form-data` body of `parts`: its content type (with the
/// boundary) and its bytes. The boundary is one no part holds.
pub fn multipart(parts: &[Part<'_>]) -> (String, Vec<u8>) {
    let mut seed = sampler::random::next_u64();
    let boundary = loop {
        let candidate = format!("jvmprofiler-{seed:016x}");
        let holds = |data: &[u8]| data.windows(candidate.len()).any(|w| w == candidate.as_bytes());
        if !parts.iter().any(|p| holds(p.data)) {
            break candidate;
        }
        seed = seed.wrapping_add(1);
    };
    let mut body = Vec::with_capacity(parts.iter().map(|p| p.data.len() + 200).sum());
    for part in parts {
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        let disposition =
            format!("Content-Disposition: form-data; name=\"{}\"; filename=\"{}\"\r\n", part.name, part.filename);
        body.extend_from_slice(disposition.as_bytes());
        if let Some(content_type) = part.content_type {
            body.extend_from_slice(format!("Content-Type: {content_type}\r\n").as_bytes());
        }
        body.extend_from_slice(b"\r\n");
        body.extend_from_slice(part.data);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// `data` gzipped.
pub fn gzip(data: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(data).and_then(|_| encoder.finish()).map_err(|e| format!("gzip: {e}"))
}

pub fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `time` in ISO-8601, UTC, to the millisecond: `2026-12-06T14:00:00.123Z`.
pub fn iso8601(time: SystemTime) -> String {
    let since = time.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let seconds = since.as_secs() % 86_400;
    let (year, month, day) = sampler::clock::civil_from_days((since.as_secs() / 86_400) as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        seconds / 3600,
        seconds % 3600 / 60,
        seconds % 60,
        since.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_is_the_main_class_or_the_jar() {
        assert_eq!(
            service_of("org.apache.catalina.startup.Bootstrap start").as_deref(),
            Some("org.apache.catalina.startup.Bootstrap")
        );
        assert_eq!(service_of("/opt/app/orders-1.2.jar --port 8080").as_deref(), Some("orders-1.2"));
        assert_eq!(service_of("  ").as_deref(), None);
        assert!(!host_name().is_empty());
    }

    #[test]
    fn times_are_written_as_backends_read_them() {
        let at = |s: u64, ms: u64| SystemTime::UNIX_EPOCH + Duration::from_millis(s * 1000 + ms);
        assert_eq!(iso8601(at(0, 0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(at(951_782_400, 5)), "2000-02-29T00:00:00.005Z");
        assert_eq!(iso8601(at(1_796_565_600, 123)), "2026-12-06T14:00:00.123Z");
        assert_eq!(unix_seconds(at(1_796_565_600, 999)), 1_796_565_600);
    }

    #[test]
    fn multipart_parts_are_framed_by_a_boundary_none_holds() {
        let parts = [
            Part { name: "event", filename: "event.json", content_type: Some("application/json"), data: b"{}" },
            Part { name: "main", filename: "main.jfr", content_type: None, data: b"FLR\0" },
        ];
        let (content_type, body) = multipart(&parts);
        let boundary = content_type.strip_prefix("multipart/form-data; boundary=").unwrap();
        let text = String::from_utf8_lossy(&body);
        assert_eq!(text.matches(&format!("--{boundary}\r\n")).count(), 2);
        assert!(text.ends_with(&format!("--{boundary}--\r\n")));
        assert!(text.contains("name=\"main\"; filename=\"main.jfr\"\r\n\r\nFLR\0\r\n"));
        assert!(text.contains("Content-Type: application/json\r\n\r\n{}\r\n"));
    }
}
