//! Exporters on a real JVM (`pyroscope=`, `datadog=`): a loopback HTTP
//! receiver in the test takes the uploads as the backends would, and the
//! tests check what arrives: every period once, each recording complete
//! and readable alone (by `jdk.jfr.consumer`, and by async-profiler's
//! converter for Pyroscope's), labels, tags and credentials where the
//! backend reads them, samples that follow the threads' CPU time; retries
//! of a backend that fails at first; and backends that cannot be reached,
//! never answer or refuse, which must not hold the JVM's exit.

use flate2::read::GzDecoder;
use integration_tests::otlp::{decode_otlp, python_ready};
use integration_tests::readers::{self, converter_collapsed_as, converter_jar};
use integration_tests::*;
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

// ---------------------------------------------------------------- the receiver

/// What the receiver does with a request, by its number (0-based, over
/// all connections, in the order the requests were read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    /// An empty response with this status.
    Status(u16),
    /// Nothing: the connection is held open, unanswered, until the client
    /// closes it.
    Never,
}

/// One request as the receiver read it.
#[derive(Debug)]
struct Received {
    method: String,
    /// Path and query, as sent.
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Whether the body came chunked.
    chunked: bool,
    answer: Answer,
}

/// One part of a `multipart/form-data` body.
#[derive(Debug)]
struct Part {
    name: String,
    filename: Option<String>,
    content_type: Option<String>,
    data: Vec<u8>,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        let mut values = self.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name));
        let value = values.next().map(|(_, v)| v.as_str());
        assert!(values.next().is_none(), "{name} sent twice: {:?}", self.headers);
        value
    }

    fn path(&self) -> &str {
        self.target.split('?').next().unwrap()
    }

    /// The query's parameters, decoded.
    fn query(&self) -> Vec<(String, String)> {
        let Some((_, query)) = self.target.split_once('?') else { return Vec::new() };
        query
            .split('&')
            .map(|pair| {
                let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
                (percent_decode(name), percent_decode(value))
            })
            .collect()
    }

    /// A query parameter given exactly once.
    fn param(&self, name: &str) -> String {
        let query = self.query();
        let values: Vec<&String> = query.iter().filter(|(n, _)| n == name).map(|(_, v)| v).collect();
        assert_eq!(values.len(), 1, "{name} in {}", self.target);
        values[0].clone()
    }

    /// A query parameter that is a number.
    fn number(&self, name: &str) -> u64 {
        let value = self.param(name);
        value.parse().unwrap_or_else(|_| panic!("{name}={value} is not a number in {}", self.target))
    }

    /// The body's parts, by the boundary its `Content-Type` names.
    fn parts(&self) -> Vec<Part> {
        let content_type = self.header("Content-Type").expect("a Content-Type");
        let boundary = content_type
            .strip_prefix("multipart/form-data;")
            .and_then(|rest| rest.trim().strip_prefix("boundary="))
            .unwrap_or_else(|| panic!("not multipart/form-data with a boundary: {content_type}"))
            .trim_matches('"');
        multipart_parts(&self.body, boundary)
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3).expect("two hex digits after %")).unwrap();
            out.push(u8::from_str_radix(hex, 16).unwrap_or_else(|_| panic!("%{hex} in {text}")));
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).expect("UTF-8 once decoded")
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|at| at + from)
}

/// The parts of a multipart body (RFC 2046): `--boundary` CRLF, headers,
/// CRLF, data, then CRLF `--boundary` again, `--` after the last.
fn multipart_parts(body: &[u8], boundary: &str) -> Vec<Part> {
    let opening = format!("--{boundary}\r\n");
    assert!(body.starts_with(opening.as_bytes()), "the body does not open with {opening:?}");
    let delimiter = format!("\r\n--{boundary}");
    let mut parts = Vec::new();
    let mut at = opening.len();
    loop {
        let headers_end = find(body, b"\r\n\r\n", at).expect("a part's headers end");
        let headers = std::str::from_utf8(&body[at..headers_end]).expect("part headers in UTF-8");
        let data_end = find(body, delimiter.as_bytes(), headers_end + 4).expect("a part ends at the boundary");
        let mut part = Part {
            name: String::new(),
            filename: None,
            content_type: None,
            data: body[headers_end + 4..data_end].to_vec(),
        };
        for line in headers.split("\r\n") {
            let (name, value) = line.split_once(':').unwrap_or_else(|| panic!("part header {line:?}"));
            if name.eq_ignore_ascii_case("Content-Disposition") {
                for param in value.split(';').map(str::trim) {
                    let quoted = |key: &str| param.strip_prefix(key).map(|v| v.trim_matches('"').to_owned());
                    if let Some(v) = quoted("name=") {
                        part.name = v;
                    } else if let Some(v) = quoted("filename=") {
                        part.filename = Some(v);
                    }
                }
            } else if name.eq_ignore_ascii_case("Content-Type") {
                part.content_type = Some(value.trim().to_owned());
            }
        }
        parts.push(part);
        at = data_end + delimiter.len();
        match &body[at..] {
            rest if rest.starts_with(b"--") => {
                assert!(matches!(&rest[2..], b"" | b"\r\n"), "bytes after the closing boundary");
                return parts;
            }
            rest if rest.starts_with(b"\r\n") => at += 2,
            _ => panic!("a boundary followed by neither CRLF nor --"),
        }
    }
}

/// An HTTP/1.1 receiver on a loopback port: a thread per connection,
/// requests answered as a script says, each request sent to the test
/// before it is answered.
struct Receiver {
    port: u16,
    requests: mpsc::Receiver<Received>,
}

impl Receiver {
    fn start(script: impl Fn(usize) -> Answer + Send + Sync + 'static) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = listener.local_addr().unwrap().port();
        let (send, requests) = mpsc::channel();
        let script: Arc<dyn Fn(usize) -> Answer + Send + Sync> = Arc::new(script);
        let numbers = Arc::new(AtomicUsize::new(0));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (send, script, numbers) = (send.clone(), Arc::clone(&script), Arc::clone(&numbers));
                std::thread::spawn(move || serve(stream, script.as_ref(), &numbers, &send));
            }
        });
        Receiver { port, requests }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The requests read so far (after the JVM's exit: every request it
    /// made that was answered, and any it was still waiting on).
    fn received(&self) -> Vec<Received> {
        self.requests.try_iter().collect()
    }
}

/// Serves one connection's requests (HTTP/1.1 keeps it open between them).
fn serve(
    stream: TcpStream,
    script: &(dyn Fn(usize) -> Answer + Send + Sync),
    numbers: &AtomicUsize,
    send: &mpsc::Sender<Received>,
) {
    // A bound on a connection the client left open: the test is over by then.
    let _ = stream.set_read_timeout(Some(Duration::from_secs(120)));
    let mut writer = stream.try_clone().expect("clone the connection");
    let mut reader = BufReader::new(stream);
    loop {
        let Some(mut request) = read_request(&mut reader, &mut writer) else { return };
        request.answer = script(numbers.fetch_add(1, Ordering::SeqCst));
        let answer = request.answer;
        if send.send(request).is_err() {
            return;
        }
        match answer {
            Answer::Status(code) => {
                let reason = match code {
                    200 => "OK",
                    400 => "Bad Request",
                    503 => "Service Unavailable",
                    _ => "Whatever",
                };
                let response = format!("HTTP/1.1 {code} {reason}\r\nContent-Length: 0\r\n\r\n");
                if writer.write_all(response.as_bytes()).and_then(|()| writer.flush()).is_err() {
                    return;
                }
            }
            Answer::Never => {
                // Holds the connection until the client closes it.
                let _ = std::io::copy(&mut reader, &mut std::io::sink());
                return;
            }
        }
    }
}

/// Reads one request; `None` at the end of the connection (or a request
/// cut short: the client gave up on it).
fn read_request(reader: &mut BufReader<TcpStream>, writer: &mut TcpStream) -> Option<Received> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut words = line.split_whitespace();
    let (method, target, version) = (words.next()?.to_owned(), words.next()?.to_owned(), words.next()?.to_owned());
    assert!(version.starts_with("HTTP/1."), "request line {line:?}");
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap_or_else(|| panic!("header line {line:?}"));
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    let header = |name: &str| headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
    if header("Expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")) {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").ok()?;
    }
    let chunked = header("Transfer-Encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            if reader.read_line(&mut size).ok()? == 0 {
                return None;
            }
            let hex = size.split(';').next().unwrap().trim();
            let size = usize::from_str_radix(hex, 16).unwrap_or_else(|_| panic!("chunk size {hex:?}"));
            if size == 0 {
                // Trailers, up to an empty line.
                loop {
                    let mut trailer = String::new();
                    if reader.read_line(&mut trailer).ok()? == 0 || trailer.trim_end().is_empty() {
                        break;
                    }
                }
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            reader.read_exact(&mut body[start..]).ok()?;
            let mut crlf = [0u8; 2];
            reader.read_exact(&mut crlf).ok()?;
            assert_eq!(&crlf, b"\r\n", "a chunk ends with CRLF");
        }
    } else if let Some(length) = header("Content-Length") {
        let length: usize = length.parse().unwrap_or_else(|_| panic!("Content-Length {length:?}"));
        body.resize(length, 0);
        reader.read_exact(&mut body).ok()?;
    }
    Some(Received { method, target, headers, body, chunked, answer: Answer::Never })
}

// ---------------------------------------------------------------- runs and readings

const TENANT: &str = "tenant-4711";
const TOKEN: &str = "psx-secret-token-0815";
const DD_KEY: &str = "dd-secret-key-4242";

/// Seconds since the epoch, with the fraction.
fn unix_now() -> f64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs_f64()
}

/// One JVM run: its output, pid, and when it ran (unix seconds).
struct Run {
    output: Output,
    pid: u32,
    started: f64,
    ended: f64,
}

/// `CpuShares seconds` under `options`, with `env` added to the JVM's
/// environment (and the exporters' credentials of the test's own
/// environment taken out).
fn run_fixture(options: &str, seconds: &str, env: &[(&str, &str)]) -> Run {
    let mut command = java_command(Some(options), &[], "CpuShares", &[seconds]);
    for name in [
        "PYROSCOPE_TENANT_ID",
        "PYROSCOPE_AUTH_TOKEN",
        "PYROSCOPE_BASIC_AUTH_USER",
        "PYROSCOPE_BASIC_AUTH_PASSWORD",
        "DD_API_KEY",
    ] {
        command.env_remove(name);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    let started = unix_now();
    let child = ChildGuard::spawn(&mut command);
    let pid = child.id();
    let output = child.wait(Duration::from_secs(90));
    Run { output, pid, started, ended: unix_now() }
}

/// The `java.version` of the JVM under test.
fn java_version() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| {
        let output = std::process::Command::new(jdk_tool("java"))
            .args(["-XshowSettings:properties", "-version"])
            .output()
            .expect("run java -XshowSettings:properties");
        let text = stderr(&output);
        text.lines()
            .find_map(|l| l.trim().strip_prefix("java.version = "))
            .unwrap_or_else(|| panic!("no java.version in {text}"))
            .trim()
            .to_owned()
    })
}

fn gunzip(what: &str, data: &[u8]) -> Vec<u8> {
    assert!(data.starts_with(&[0x1f, 0x8b]), "{what} is not gzipped: it starts {:02x?}", &data[..data.len().min(8)]);
    let mut out = Vec::new();
    GzDecoder::new(data).read_to_end(&mut out).unwrap_or_else(|e| panic!("gunzip {what}: {e}"));
    assert!(out.starts_with(b"FLR\0"), "{what} is not a JFR recording: it starts {:02x?}", &out[..out.len().min(8)]);
    out
}

/// Writes the uploads' recordings to `dir` and reads them all with
/// `jdk.jfr.consumer` (one JVM): each must read alone.
fn read_uploaded(dir: &Path, jfrs: &[Vec<u8>]) -> (Vec<PathBuf>, Vec<Recording>) {
    let paths: Vec<PathBuf> = jfrs
        .iter()
        .enumerate()
        .map(|(i, jfr)| {
            let path = dir.join(format!("upload-{i}.jfr"));
            std::fs::write(&path, jfr).unwrap();
            path
        })
        .collect();
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let recordings = read_recordings_on(&jdk_tool("java"), &refs);
    (paths, recordings)
}

/// No sample is in two recordings, and together they hold every sample
/// the session took (the last one's `samples` counter, a snapshot at the
/// end of the session's last chunk): no period lost, none repeated.
/// Returns how many there are.
fn assert_every_sample_once(label: &str, recordings: &[Recording]) -> i64 {
    let mut seen = HashSet::new();
    let mut written = 0;
    for recording in recordings {
        for sample in recording.samples() {
            assert!(seen.insert((sample.tid, sample.start_epoch_ns)), "{label}: a sample in two uploads: {sample:?}");
            written += 1;
        }
    }
    let taken = recordings.last().expect("a recording").counter("samples");
    println!("{label}: {written} samples arrived, {taken} taken");
    assert_eq!(written, taken, "{label}: every sample taken arrived, once");
    written
}

/// The heavy and light threads' samples against their measured CPU time:
/// at least 70% of the samples a 1 ms interval takes of that time, and
/// heavyWork's share of them within 5 points of heavy's share of the CPU
/// (about 70%: CpuShares).
fn assert_samples_follow_cpu(label: &str, recordings: &[Recording], output: &Output) {
    let (heavy_ns, light_ns) = (measured_cpu_ns(output, "heavy"), measured_cpu_ns(output, "light"));
    let workers: Vec<&Event> =
        recordings.iter().flat_map(|r| r.samples()).filter(|e| e.thread == "heavy" || e.thread == "light").collect();
    let expected = (heavy_ns + light_ns) / 1e6;
    let in_heavy = workers.iter().filter(|e| e.top().is_some_and(|f| f.method == "heavyWork")).count();
    let in_light = workers.iter().filter(|e| e.top().is_some_and(|f| f.method == "lightWork")).count();
    let share = in_heavy as f64 / workers.len().max(1) as f64;
    let truth = heavy_ns / (heavy_ns + light_ns);
    println!(
        "{label}: {} worker samples for {expected:.0} ms of their CPU ({:.1}%); heavyWork {in_heavy}, lightWork {in_light}: \
         {:.1}% in heavyWork, heavy has {:.1}% of the CPU",
        workers.len(),
        100.0 * workers.len() as f64 / expected,
        share * 100.0,
        truth * 100.0
    );
    assert!(workers.len() as f64 >= 0.7 * expected, "{label}: {} samples for {expected:.0} expected", workers.len());
    assert!(
        (share - truth).abs() <= 0.05,
        "{label}: {:.1}% of samples in heavyWork, {:.1}% of CPU in heavy",
        share * 100.0,
        truth * 100.0
    );
}

/// Periods chain: each starts where the one before ended. Times are unix
/// seconds (`from`, `until`), and a period within one second is sent as
/// lasting to the next (`until` = `from` + 1), so the next may start a
/// second before the `until` sent.
fn assert_periods_chain(label: &str, periods: &[(u64, u64)], run: &Run) {
    for (i, &(from, until)) in periods.iter().enumerate() {
        assert!(from < until, "{label}: period {i} from {from} until {until}");
        assert!(
            from as f64 >= run.started.floor() - 1.0,
            "{label}: period {i} from {from}, the JVM started at {:.1}",
            run.started
        );
        assert!(
            until as f64 <= run.ended.ceil() + 1.0,
            "{label}: period {i} until {until}, the JVM ended at {:.1}",
            run.ended
        );
    }
    for (i, pair) in periods.windows(2).enumerate() {
        let ((_, until), (next, _)) = (pair[0], pair[1]);
        assert!(
            next <= until && next + 1 >= until,
            "{label}: period {i} ends at {until} and the next starts at {next}: {periods:?}"
        );
    }
}

/// The samples of each upload that lie outside the period it declares
/// (`[from_ns, until_ns)`): a backend files a sample by the period it came
/// in, so the period sent must be the one its recording covers.
fn samples_outside(label: &str, recordings: &[Recording], windows: &[(i64, i64)]) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, (recording, &(from, until))) in recordings.iter().zip(windows).enumerate() {
        let times: Vec<i64> = recording.samples().map(|s| s.start_epoch_ns).collect();
        let (Some(&first), Some(&last)) = (times.iter().min(), times.iter().max()) else { continue };
        // A sample taken as its chunk was finished is drained into the
        // next one, with its own time: at most a drain tick early.
        let outside = times.iter().filter(|&&t| !(from - STRAGGLER_NS..until).contains(&t)).count();
        println!(
            "{label}: upload {i} declares {:.3} to {:.3}; its samples {:.3} to {:.3}; {outside} of {} outside",
            from as f64 / 1e9,
            until as f64 / 1e9,
            first as f64 / 1e9,
            last as f64 / 1e9,
            times.len()
        );
        if outside > 0 {
            problems.push(format!(
                "upload {i}: {outside} of {} samples outside the period it declares ({:.3} to {:.3}): the first at \
                 {:.3}, the last at {:.3}",
                times.len(),
                from as f64 / 1e9,
                until as f64 / 1e9,
                first as f64 / 1e9,
                last as f64 / 1e9
            ));
        }
    }
    problems
}

/// How long before its period a sample may be (the writer drains every
/// 100 ms).
const STRAGGLER_NS: i64 = 100_000_000;

/// The fixture's stdout is its own: the two CPU lines and nothing else.
fn assert_output_unaffected(label: &str, output: &Output) {
    assert_success(output);
    let text = stdout(output);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.len() == 2 && lines[0].starts_with("cpu heavy ") && lines[1].starts_with("cpu light "),
        "{label}: stdout is not the fixture's own:\n{text}"
    );
}

// ---------------------------------------------------------------- the tests

/// `pyroscope=` with `loop=3s` over 10 s of CpuShares at 1 ms: at least 3
/// uploads to `/ingest`, each a gzipped complete JFR that the JDK and
/// async-profiler's converter read, labelled with the service, `tags=`
/// and the runtime, sampleRate 1000; tenant and token as headers, never
/// in the URL; together every sample, following the threads' CPU time.
#[test]
fn pyroscope_receives_every_period_with_labels() {
    let Some(jar) = converter_jar() else { return };
    let clock = Instant::now();
    let receiver = Receiver::start(|_| Answer::Status(200));
    let dir = scratch_dir("export_pyroscope");
    let options = format!(
        "start,cpu=1ms,overhead=0,loop=3s,pyroscope={},service=checkout,tags=env:test;team:perf",
        receiver.url()
    );
    let env = [("PYROSCOPE_TENANT_ID", TENANT), ("PYROSCOPE_AUTH_TOKEN", TOKEN)];
    let run = run_fixture(&options, "10", &env);
    assert_output_unaffected("pyroscope", &run.output);
    let uploads = receiver.received();
    println!("pyroscope: {} uploads in {:.1} s of JVM", uploads.len(), run.ended - run.started);
    assert!(uploads.len() >= 3, "{} uploads", uploads.len());

    let name =
        format!("checkout{{env=test,process.runtime.name=java,process.runtime.version={},team=perf}}", java_version());
    // The runtime's version is checked last, so that a wrong one leaves
    // the rest checked and measured.
    let mut names = HashSet::new();
    let mut jfrs = Vec::new();
    let mut periods = Vec::new();
    for (i, upload) in uploads.iter().enumerate() {
        let label = format!("upload {i} ({})", upload.target);
        assert_eq!(upload.method, "POST", "{label}");
        assert_eq!(upload.path(), "/ingest", "{label}");
        names.insert(upload.param("name"));
        assert_eq!(upload.param("format"), "jfr", "{label}");
        assert_eq!(upload.param("units"), "samples", "{label}");
        assert_eq!(upload.param("aggregationType"), "sum", "{label}");
        assert_eq!(upload.param("spyName"), "javaspy", "{label}");
        assert_eq!(upload.number("sampleRate"), 1000, "{label}");
        periods.push((upload.number("from"), upload.number("until")));
        assert_eq!(upload.header("X-Scope-OrgID"), Some(TENANT), "{label}: {:?}", upload.headers);
        assert_eq!(upload.header("Authorization"), Some(format!("Bearer {TOKEN}").as_str()), "{label}");
        assert!(!upload.target.contains(TENANT) && !upload.target.contains(TOKEN), "{label}: credentials in the URL");
        let parts = upload.parts();
        assert_eq!(parts.len(), 1, "{label}: parts {:?}", parts.iter().map(|p| &p.name).collect::<Vec<_>>());
        assert_eq!((parts[0].name.as_str(), parts[0].filename.as_deref()), ("jfr", Some("jfr")), "{label}");
        jfrs.push(gunzip(&label, &parts[0].data));
    }
    println!(
        "pyroscope: periods {periods:?}; bodies chunked: {:?}",
        uploads.iter().map(|u| u.chunked).collect::<Vec<_>>()
    );
    assert_periods_chain("pyroscope", &periods, &run);

    let (paths, recordings) = read_uploaded(&dir, &jfrs);
    // Whole seconds: from the second the period starts in to the end of
    // the one it ends in.
    let windows: Vec<(i64, i64)> = periods
        .iter()
        .map(|&(from, until)| (from as i64 * 1_000_000_000, (until as i64 + 1) * 1_000_000_000))
        .collect();
    let outside = samples_outside("pyroscope", &recordings, &windows);
    for (path, recording) in paths.iter().zip(&recordings) {
        let theirs: i64 = converter_collapsed_as(&jar, path, &["--cpu"]).values().sum();
        let ours = recording.samples().count() as i64;
        println!(
            "pyroscope: {}: {} bytes, {ours} samples, the converter read {theirs}",
            path.display(),
            std::fs::metadata(path).unwrap().len()
        );
        assert_eq!(theirs, ours, "{}: the converter's samples", path.display());
        assert!(
            recording.samples().all(|s| s.kind == "jdk.ExecutionSample"),
            "{}: Pyroscope reads the JDK's events",
            path.display()
        );
    }
    assert_every_sample_once("pyroscope", &recordings);
    assert_samples_follow_cpu("pyroscope", &recordings, &run.output);
    let last = recordings.last().unwrap();
    println!(
        "pyroscope: counters uploads {} retries {} failures {} dropped {} bytes {}; test took {:.1} s",
        last.counter("export_uploads"),
        last.counter("export_retries"),
        last.counter("export_failures"),
        last.counter("export_dropped"),
        last.counter("export_bytes"),
        clock.elapsed().as_secs_f64()
    );
    assert!(last.counter("export_uploads") >= uploads.len() as i64 - 1, "the uploads before the last are counted");
    assert_eq!(last.counter("export_failures") + last.counter("export_dropped") + last.counter("export_retries"), 0);
    let mut problems = outside;
    if names != HashSet::from([name.clone()]) {
        problems.push(format!("the application name is {names:?}, not {name:?} (java.version)"));
    }
    assert!(problems.is_empty(), "pyroscope: {problems:#?}");
}

/// An ISO-8601 UTC time to the millisecond (`2026-12-06T14:00:00.123Z`)
/// in unix milliseconds.
fn iso8601_ms(text: &str) -> i64 {
    let bytes = text.as_bytes();
    let shape = bytes.len() == 24
        && bytes.iter().enumerate().all(|(i, &b)| match i {
            4 | 7 => b == b'-',
            10 => b == b'T',
            13 | 16 => b == b':',
            19 => b == b'.',
            23 => b == b'Z',
            _ => b.is_ascii_digit(),
        });
    assert!(shape, "{text:?} is not YYYY-MM-DDTHH:MM:SS.mmmZ");
    let n = |range: std::ops::Range<usize>| text[range].parse::<i64>().unwrap();
    let (year, month, day) = (n(0..4), n(5..7), n(8..10));
    assert!(
        (1..=12).contains(&month) && (1..=31).contains(&day) && n(11..13) < 24 && n(14..16) < 60 && n(17..19) < 61,
        "{text}"
    );
    // Days from the civil date (Howard Hinnant's days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    ((days * 24 + n(11..13)) * 60 + n(14..16)) * 60_000 + n(17..19) * 1000 + n(20..23)
}

/// `datadog=` with `loop=3s` over 10 s: at least 3 uploads to
/// `/profiling/v1/input`, each with an `event.json` that names its
/// attachment, period and tags (the service, `tags=`, the language, the
/// JVM's pid) and a gzipped recording in the Datadog dialect that the JDK
/// reads; `DD_API_KEY` as `DD-API-KEY`; every sample once.
#[test]
fn datadog_receives_event_json_and_a_datadog_recording() {
    let clock = Instant::now();
    let receiver = Receiver::start(|_| Answer::Status(200));
    let dir = scratch_dir("export_datadog");
    let options =
        format!("start,cpu=1ms,overhead=0,loop=3s,datadog={},service=checkout,tags=env:test;team:perf", receiver.url());
    let run = run_fixture(&options, "10", &[("DD_API_KEY", DD_KEY)]);
    assert_output_unaffected("datadog", &run.output);
    let uploads = receiver.received();
    println!("datadog: {} uploads in {:.1} s of JVM", uploads.len(), run.ended - run.started);
    assert!(uploads.len() >= 3, "{} uploads", uploads.len());

    let mut jfrs = Vec::new();
    let mut spans = Vec::new();
    // The runtime's version is checked last, so that a wrong one leaves
    // the rest checked and measured.
    let mut runtimes = HashSet::new();
    for (i, upload) in uploads.iter().enumerate() {
        let label = format!("upload {i}");
        assert_eq!((upload.method.as_str(), upload.target.as_str()), ("POST", "/profiling/v1/input"), "{label}");
        assert_eq!(upload.header("DD-API-KEY"), Some(DD_KEY), "{label}: {:?}", upload.headers);
        let parts = upload.parts();
        let names: Vec<(&str, Option<&str>, Option<&str>)> =
            parts.iter().map(|p| (p.name.as_str(), p.filename.as_deref(), p.content_type.as_deref())).collect();
        assert_eq!(
            names,
            [
                ("event", Some("event.json"), Some("application/json")),
                ("main", Some("main.jfr"), Some("application/octet-stream"))
            ],
            "{label}: the parts"
        );
        let text = std::str::from_utf8(&parts[0].data).expect("event.json in UTF-8");
        let event: serde_json::Value =
            serde_json::from_str(text).unwrap_or_else(|e| panic!("{label}: event.json {text}: {e}"));
        assert_eq!(event["family"], "java", "{label}: {text}");
        assert_eq!(event["version"], "4", "{label}: {text}");
        assert_eq!(event["attachments"], serde_json::json!(["main.jfr"]), "{label}: {text}");
        let (start, end) = (event["start"].as_str().expect("start"), event["end"].as_str().expect("end"));
        let (start_ms, end_ms) = (iso8601_ms(start), iso8601_ms(end));
        assert!(start_ms < end_ms, "{label}: {start} to {end}");
        assert!(
            start_ms as f64 >= (run.started - 1.0) * 1000.0 && end_ms as f64 <= (run.ended + 1.0) * 1000.0,
            "{label}: {start} to {end}, the JVM ran from {:.3} to {:.3}",
            run.started,
            run.ended
        );
        spans.push((start.to_owned(), end.to_owned()));
        let tags: Vec<&str> = event["tags_profiler"].as_str().expect("tags_profiler").split(',').collect();
        let pid = format!("process_id:{}", run.pid);
        runtimes.extend(tags.iter().filter(|t| t.starts_with("runtime_version:")).map(|t| t.to_string()));
        for wanted in ["service:checkout", "env:test", "team:perf", "language:jvm", &pid, "snapshot:periodic"] {
            assert!(tags.contains(&wanted), "{label}: no {wanted} in {tags:?}");
        }
        assert!(
            tags.iter().any(|t| t.strip_prefix("host:").is_some_and(|h| !h.is_empty())),
            "{label}: no host in {tags:?}"
        );
        jfrs.push(gunzip(&label, &parts[1].data));
    }
    println!("datadog: periods {spans:?}");
    for pair in spans.windows(2) {
        assert_eq!(pair[0].1, pair[1].0, "each period starts where the one before ended: {spans:?}");
    }

    let (_, recordings) = read_uploaded(&dir, &jfrs);
    // Milliseconds, cut: the end's millisecond is in.
    let windows: Vec<(i64, i64)> =
        spans.iter().map(|(start, end)| (iso8601_ms(start) * 1_000_000, (iso8601_ms(end) + 1) * 1_000_000)).collect();
    let outside = samples_outside("datadog", &recordings, &windows);
    for (i, recording) in recordings.iter().enumerate() {
        let kinds: HashSet<&str> = recording.events.iter().map(|e| e.kind.as_str()).collect();
        println!("datadog: upload {i}: {} samples; events {kinds:?}", recording.samples().count());
        assert!(
            !kinds.contains("jdk.ExecutionSample"),
            "upload {i}: the JDK's samples in a Datadog recording: {kinds:?}"
        );
    }
    let written = assert_every_sample_once("datadog", &recordings);
    assert!(written > 0);
    assert!(recordings.iter().flat_map(|r| r.samples()).all(|s| s.kind == "datadog.ExecutionSample"));
    assert_samples_follow_cpu("datadog", &recordings, &run.output);
    println!("datadog: test took {:.1} s", clock.elapsed().as_secs_f64());
    let runtime = format!("runtime_version:{}", java_version());
    let mut problems = outside;
    if runtimes != HashSet::from([runtime.clone()]) {
        problems.push(format!("the tags say {runtimes:?}, not {runtime} (java.version)"));
    }
    assert!(problems.is_empty(), "datadog: {problems:#?}");
}

/// A backend that answers 503 twice, then 200: the first period is sent
/// again (after backoff) until taken, then every period is taken exactly
/// once; `export_retries` counts the two retries.
#[test]
fn a_backend_that_fails_at_first_gets_every_period_once() {
    let clock = Instant::now();
    let receiver = Receiver::start(|n| Answer::Status(if n < 2 { 503 } else { 200 }));
    let dir = scratch_dir("export_retries");
    let options = format!("start,cpu=1ms,overhead=0,loop=2s,pyroscope={},service=checkout", receiver.url());
    let run = run_fixture(&options, "6", &[]);
    assert_output_unaffected("retries", &run.output);
    let requests = receiver.received();
    let froms: Vec<(u64, Answer)> = requests.iter().map(|r| (r.number("from"), r.answer)).collect();
    println!("retries: {} requests (from, answer): {froms:?}", requests.len());
    assert!(requests.len() >= 5, "two refused and at least 3 periods: {froms:?}");
    assert_eq!(froms[0].0, froms[1].0, "the refused period is sent again: {froms:?}");
    assert_eq!(froms[1].0, froms[2].0, "the refused period is sent until taken: {froms:?}");
    assert!(
        requests[0].body == requests[1].body && requests[1].body == requests[2].body,
        "a retry sends the same body"
    );
    let accepted: Vec<&Received> = requests.iter().filter(|r| r.answer == Answer::Status(200)).collect();
    assert_eq!(accepted.len(), requests.len() - 2);
    let periods: Vec<(u64, u64)> = accepted.iter().map(|r| (r.number("from"), r.number("until"))).collect();
    let distinct: HashSet<u64> = periods.iter().map(|p| p.0).collect();
    assert_eq!(distinct.len(), periods.len(), "a period taken twice: {periods:?}");
    assert_periods_chain("retries", &periods, &run);

    let jfrs: Vec<Vec<u8>> =
        accepted.iter().enumerate().map(|(i, r)| gunzip(&format!("upload {i}"), &r.parts()[0].data)).collect();
    let (_, recordings) = read_uploaded(&dir, &jfrs);
    assert_every_sample_once("retries", &recordings);
    let last = recordings.last().unwrap();
    let (uploads, retries, failures, dropped) = (
        last.counter("export_uploads"),
        last.counter("export_retries"),
        last.counter("export_failures"),
        last.counter("export_dropped"),
    );
    println!(
        "retries: {} periods taken; counters uploads {uploads} retries {retries} failures {failures} dropped {dropped}; test took {:.1} s",
        accepted.len(),
        clock.elapsed().as_secs_f64()
    );
    assert!(retries >= 2, "export_retries {retries}");
    assert_eq!((failures, dropped), (0, 0), "export_failures, export_dropped");
}

/// The session files of a run with `file=<dir>/p-%n.jfr`, in order.
fn session_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let n = p.file_name()?.to_str()?.strip_prefix("p-")?.strip_suffix(".jfr")?.parse().ok()?;
            Some((n, p))
        })
        .collect();
    files.sort();
    files.into_iter().map(|(_, p)| p).collect()
}

/// The JVM's exit is never held by a backend for more than the stated 5 s:
/// not by a port nobody listens on (refused, retried with backoff), nor
/// by one that takes the request and never answers (the request timeout is
/// 30 s), nor by one that refuses with 400 (never retried: each period
/// arrives once). The fixture's output and exit status are its own; the
/// local files (`file=`) are complete.
#[test]
fn unreachable_slow_or_refusing_backends_never_hold_the_jvm() {
    const SECONDS: &str = "3";
    /// The fixture's 3 s, the stated 5 s, and the JVM's start and exit.
    const BOUND: Duration = Duration::from_secs(15);
    let clock = Instant::now();
    let dead_port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let silent = Receiver::start(|_| Answer::Never);
    let refusing = Receiver::start(|_| Answer::Status(400));
    let cases = [
        ("unreachable", format!("http://127.0.0.1:{dead_port}"), None),
        ("silent", silent.url(), Some(scratch_dir("export_silent"))),
        ("refusing", refusing.url(), Some(scratch_dir("export_refusing"))),
    ];
    // The three at once: each is mostly waiting.
    let runs: Vec<(Run, Duration)> = std::thread::scope(|scope| {
        let handles: Vec<_> = cases
            .iter()
            .map(|(_, url, dir)| {
                scope.spawn(move || {
                    let file = dir.as_ref().map(|d| format!(",file={}/p-%n.jfr", d.display())).unwrap_or_default();
                    let options = format!("start,cpu=1ms,loop=1s,pyroscope={url},service=checkout{file}");
                    let began = Instant::now();
                    let run = run_fixture(&options, SECONDS, &[]);
                    (run, began.elapsed())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a run's thread")).collect()
    });
    let mut failed = Vec::new();
    let mut refusing_files = Vec::new();
    for ((label, _, dir), (run, took)) in cases.iter().zip(&runs) {
        let warnings: Vec<&str> =
            std::str::from_utf8(&run.output.stderr).unwrap_or("").lines().filter(|l| l.contains("WARN")).collect();
        println!(
            "{label}: the JVM ran {:.1} s (bound {} s); its warnings: {warnings:#?}",
            took.as_secs_f64(),
            BOUND.as_secs()
        );
        if *took > BOUND {
            failed.push(format!("{label}: the JVM took {:.1} s", took.as_secs_f64()));
        }
        assert_output_unaffected(label, &run.output);
        if let Some(dir) = dir {
            let files = session_files(dir);
            assert!(files.len() >= 3, "{label}: files {files:?}");
            let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
            let recordings = read_recordings_on(&jdk_tool("java"), &refs);
            let written = assert_every_sample_once(label, &recordings);
            assert!(written > 0, "{label}: no samples in the files");
            let last = recordings.last().unwrap();
            println!(
                "{label}: {} files; counters uploads {} retries {} failures {} dropped {}",
                files.len(),
                last.counter("export_uploads"),
                last.counter("export_retries"),
                last.counter("export_failures"),
                last.counter("export_dropped")
            );
            assert_eq!(last.counter("export_uploads"), 0, "{label}: nothing was taken");
            if *label == "refusing" {
                refusing_files = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
                assert_eq!(last.counter("export_retries"), 0, "{label}: a 400 is not retried");
            }
        }
    }
    let stderr_of = |i: usize| stderr(&runs[i].0.output);
    for (i, label) in [(0, "unreachable"), (1, "silent")] {
        assert!(
            stderr_of(i).contains("given up"),
            "{label}: no line says the last periods were given up:\n{}",
            stderr_of(i)
        );
    }

    let silent_requests = silent.received();
    println!("silent: {} requests held unanswered", silent_requests.len());
    assert!(!silent_requests.is_empty(), "silent: no request arrived, so none was held");

    let requests = refusing.received();
    let periods: Vec<(u64, u64)> = requests.iter().map(|r| (r.number("from"), r.number("until"))).collect();
    println!("refusing: {} requests: {periods:?}", requests.len());
    assert!(periods.len() >= 3, "refusing: {periods:?}");
    assert_periods_chain("refusing", &periods, &runs[2].0);
    // A period is its recording: each request's is one of the files (a
    // period with a file of its own is shipped as written), none twice.
    let sent: Vec<Vec<u8>> = requests
        .iter()
        .enumerate()
        .map(|(i, r)| gunzip(&format!("refusing: request {i}"), &r.parts()[0].data))
        .collect();
    let matched: Vec<Option<usize>> = sent.iter().map(|jfr| refusing_files.iter().position(|f| f == jfr)).collect();
    println!("refusing: the requests' recordings are the files {matched:?} of {}", refusing_files.len());
    let distinct: HashSet<&Vec<u8>> = sent.iter().collect();
    assert_eq!(distinct.len(), sent.len(), "refusing: a period sent twice (a 400 retried): {periods:?}");
    assert_eq!(sent.len(), refusing_files.len(), "refusing: one request per period (file)");
    assert!(matched.iter().all(Option::is_some), "refusing: a request's recording is no file's: {matched:?}");
    println!("never held: test took {:.1} s", clock.elapsed().as_secs_f64());
    assert!(failed.is_empty(), "the JVM's exit was held: {failed:?}");
}

/// The receiver itself, without a JVM: a chunked body (as an HTTP client
/// may send one) is read whole, its multipart parts split by the boundary,
/// the query decoded, and requests on one connection answered in turn.
#[test]
fn the_receiver_reads_chunked_and_multipart_bodies() {
    let receiver = Receiver::start(|n| Answer::Status(if n == 0 { 503 } else { 200 }));
    let body: &[u8] =
        b"--xyz\r\nContent-Disposition: form-data; name=\"jfr\"; filename=\"jfr\"\r\n\r\nFLR\0\r\n--xyz\r\n\
          Content-Disposition: form-data; name=\"event\"; filename=\"event.json\"\r\nContent-Type: application/json\r\n\
          \r\n{}\r\n--xyz--\r\n";
    let mut stream = TcpStream::connect(("127.0.0.1", receiver.port)).unwrap();
    for _ in 0..2 {
        let head = "POST /ingest?name=a%7Bb%3Dc%7D&from=1 HTTP/1.1\r\nHost: x\r\n\
                    Content-Type: multipart/form-data; boundary=xyz\r\nTransfer-Encoding: chunked\r\n\r\n";
        stream.write_all(head.as_bytes()).unwrap();
        for piece in body.chunks(37) {
            stream.write_all(format!("{:x}\r\n", piece.len()).as_bytes()).unwrap();
            stream.write_all(piece).unwrap();
            stream.write_all(b"\r\n").unwrap();
        }
        stream.write_all(b"0\r\n\r\n").unwrap();
    }
    let mut answers = String::new();
    let mut reader = BufReader::new(stream);
    for _ in 0..2 {
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        answers.push_str(status.trim_end());
        answers.push('|');
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap() > 0 && line != "\r\n" {
            line.clear();
        }
    }
    assert_eq!(answers, "HTTP/1.1 503 Service Unavailable|HTTP/1.1 200 OK|");
    let requests = receiver.received();
    assert_eq!(requests.len(), 2);
    let request = &requests[1];
    assert!(request.chunked);
    assert_eq!(request.body, body);
    assert_eq!((request.path(), request.param("name").as_str(), request.number("from")), ("/ingest", "a{b=c}", 1));
    let parts = request.parts();
    assert_eq!(parts.len(), 2);
    assert_eq!(
        (parts[0].name.as_str(), parts[0].filename.as_deref(), parts[0].content_type.as_deref()),
        ("jfr", Some("jfr"), None)
    );
    assert_eq!(parts[0].data, b"FLR\0");
    let event = (parts[1].name.as_str(), parts[1].filename.as_deref(), parts[1].content_type.as_deref());
    assert_eq!(event, ("event", Some("event.json"), Some("application/json")));
    assert_eq!(parts[1].data, b"{}");
}

/// An upload to `otlp=`: its request, the protobuf gunzipped to `file`,
/// and the summary OpenTelemetry's own definitions decode from it.
fn decoded_otlp(upload: &Received, file: &Path) -> serde_json::Value {
    assert_eq!(upload.method, "POST");
    assert_eq!(upload.path(), "/v1development/profiles");
    assert_eq!(upload.header("Content-Type"), Some("application/x-protobuf"));
    assert_eq!(upload.header("Content-Encoding"), Some("gzip"));
    let mut protobuf = Vec::new();
    GzDecoder::new(upload.body.as_slice()).read_to_end(&mut protobuf).expect("a gzipped body");
    std::fs::write(file, &protobuf).unwrap();
    decode_otlp(file)
}

/// The total of the stacks of `profile` (a decoded summary's) that pass
/// through `frame`.
fn through(profile: &serde_json::Value, frame: &str) -> i64 {
    let stacks = profile["stacks"].as_object().expect("stacks");
    stacks.iter().filter(|(stack, _)| stack.contains(frame)).map(|(_, v)| v.as_i64().unwrap()).sum()
}

/// `otlp=` every 3 s of the 70/30 fixture: each period an
/// `ExportProfilesServiceRequest` that opentelemetry-proto decodes, the
/// service and labels as resource attributes, and together the CPU
/// samples the threads' CPU time calls for, split as their CPU is.
#[test]
fn otlp_receives_profiles_opentelemetrys_definitions_decode() {
    if !python_ready() {
        return;
    }
    let receiver = Receiver::start(|_| Answer::Status(200));
    let dir = scratch_dir("export_otlp");
    let options = format!("start,cpu=1ms,overhead=0,loop=3s,otlp={},service=checkout,tags=env:test", receiver.url());
    let headers = [("OTEL_EXPORTER_OTLP_HEADERS", "X-Scope-OrgID=tenant-9,Authorization=Bearer otlp-token")];
    let run = run_fixture(&options, "10", &headers);
    assert_output_unaffected("otlp", &run.output);
    let uploads = receiver.received();
    println!("otlp: {} uploads in {:.1} s of JVM", uploads.len(), run.ended - run.started);
    assert!(uploads.len() >= 3, "{} uploads", uploads.len());
    let (mut heavy, mut light) = (0, 0);
    for (i, upload) in uploads.iter().enumerate() {
        assert_eq!(upload.header("X-Scope-OrgID"), Some("tenant-9"));
        assert_eq!(upload.header("Authorization"), Some("Bearer otlp-token"));
        let summary = decoded_otlp(upload, &dir.join(format!("upload-{i}.pb")));
        let resource = &summary["resource"];
        assert_eq!(resource["service.name"], "checkout", "{resource}");
        assert_eq!(resource["env"], "test", "{resource}");
        assert_eq!(resource["process.runtime.name"], "java", "{resource}");
        assert_eq!(resource["process.pid"], run.pid.to_string(), "{resource}");
        let profiles = summary["profiles"].as_array().expect("profiles");
        let cpu = profiles.iter().find(|p| p["sample_type"][0] == "samples").expect("a CPU profile");
        assert_eq!(cpu["sample_type"][1], "count", "{cpu}");
        heavy += through(cpu, "heavyWork");
        light += through(cpu, "lightWork");
    }
    let (heavy_ns, light_ns) = (measured_cpu_ns(&run.output, "heavy"), measured_cpu_ns(&run.output, "light"));
    let expected = (heavy_ns + light_ns) / 1e6;
    let share = heavy as f64 / (heavy + light).max(1) as f64;
    let truth = heavy_ns / (heavy_ns + light_ns);
    println!(
        "otlp: {} worker samples for {expected:.0} ms of CPU; {:.1}% in heavyWork, heavy has {:.1}% of the CPU",
        heavy + light,
        share * 100.0,
        truth * 100.0
    );
    assert!((heavy + light) as f64 >= 0.7 * expected, "{} samples for {expected:.0} expected", heavy + light);
    assert!(
        (share - truth).abs() <= 0.05,
        "{:.1}% in heavyWork, {:.1}% of the CPU in heavy",
        share * 100.0,
        truth * 100.0
    );
}

/// `otlp=` with `remotesym=true`: the JNI library's frames arrive
/// unresolved, as locations of a mapping carrying the library's GNU
/// build-id, for the backend to symbolize; one period (the default 60 s
/// outlasts the run), shipped at exit, holding the samples the local file
/// holds.
#[test]
fn otlp_remote_frames_carry_their_librarys_build_id() {
    if !python_ready() {
        return;
    }
    let receiver = Receiver::start(|_| Answer::Status(200));
    let dir = scratch_dir("export_otlp_remote");
    let library = native_fixture("libremote.so");
    let file = dir.join("remote.jfr");
    let options = format!(
        "start,interval=1ms,overhead=0,cstack=fp,remotesym=true,otlp={},file={}",
        receiver.url(),
        file.display()
    );
    let output =
        run_java(Some(&options), "RemoteChain", &[library.to_str().unwrap(), "2", "chain"], Duration::from_secs(60));
    assert_success(&output);
    let uploads = receiver.received();
    assert_eq!(uploads.len(), 1, "one period, shipped at exit");
    let summary = decoded_otlp(&uploads[0], &dir.join("upload.pb"));
    let notes = stdout(&std::process::Command::new("readelf").arg("-n").arg(&library).output().expect("run readelf"));
    let build_id = notes.lines().find_map(|l| l.trim().strip_prefix("Build ID: ")).expect("a GNU build-id").trim();
    let mappings = summary["mappings"].as_array().expect("mappings");
    let remote = mappings.iter().find(|m| m["filename"] == "libremote.so").unwrap_or_else(|| panic!("{mappings:#?}"));
    assert_eq!(remote["build_id"], build_id, "{remote}");
    assert_eq!(remote["with_lines"], 0, "unresolved: {remote}");
    let cpu = summary["profiles"].as_array().unwrap().iter().find(|p| p["sample_type"][0] == "samples").expect("CPU");
    let local = readers::symbolize_collapsed(&file, &["--event", "cpu"]);
    let local_total: i64 = local.values().sum();
    println!(
        "otlp remote: libremote.so {build_id}, {} addresses; {} samples shipped, {local_total} in the file",
        remote["addresses"].as_array().map_or(0, Vec::len),
        cpu["total"]
    );
    assert_eq!(cpu["total"].as_i64(), Some(local_total), "the period shipped holds the file's samples");
}
