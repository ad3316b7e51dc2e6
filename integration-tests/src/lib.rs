//! Support for tests that run real JVMs with the agent: locating the agent
//! and the JDK, running Java with a timeout, and reading recordings back
//! through the JDK's own parser ([`readers`]: and through every other
//! reader, to compare what they read).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
pub use test_skip::{skip, InCi};

pub mod otlp;
pub mod readers;

/// The compiled Java fixtures and tools.
pub fn classes_dir() -> &'static Path {
    Path::new(env!("FIXTURE_CLASSES"))
}

/// A JNI fixture library built by the test build (`libchain_fp.so`, ...).
pub fn native_fixture(name: &str) -> PathBuf {
    let path = Path::new(env!("FIXTURE_NATIVE")).join(name);
    assert!(path.exists(), "{} was not built (integration-tests/build.rs)", path.display());
    path
}

/// The chain fixture built with SFrame and without frame pointers, if the
/// assembler could emit SFrame; otherwise the calling test is skipped
/// ([`skip`]; under CI it fails).
pub fn sframe_fixture() -> Option<PathBuf> {
    let path = Path::new(env!("FIXTURE_NATIVE")).join("libchain_sframe.so");
    if !path.exists() {
        skip(
            "libchain_sframe.so was not built: the assembler cannot emit SFrame (`as --gsframe`, binutils 2.40+)",
            InCi::Required,
        );
        return None;
    }
    Some(path)
}

pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The agent under test: `$PROFILER_LIB`, or the workspace's release build.
pub fn agent_library() -> PathBuf {
    release_build(Some("PROFILER_LIB"), "libprofiler.so")
}

/// The `symbolize` under test: `$SYMBOLIZE`, or the workspace's release build.
pub fn symbolize_binary() -> PathBuf {
    release_build(Some("SYMBOLIZE"), "symbolize")
}

/// The `jprofile` launcher under test, the workspace's release build.
pub fn jprofile_binary() -> PathBuf {
    release_build(None, "jprofile")
}

/// `$<variable>` when given and set, or `name` in the workspace's
/// release build; it must exist.
fn release_build(variable: Option<&str>, name: &str) -> PathBuf {
    let path = variable
        .and_then(std::env::var_os)
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/release").join(name));
    assert!(path.exists(), "{} is missing: run `cargo build --release` first", path.display());
    path
}

/// Java source of a fixture, for looking up marked lines.
pub fn fixture_source(class: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("java/fixtures").join(format!("{class}.java"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The 1-based line carrying `// LINE <marker>` in a fixture's source.
pub fn marked_line(class: &str, marker: &str) -> i32 {
    let needle = format!("// LINE {marker}");
    let source = fixture_source(class);
    let index =
        source.lines().position(|l| l.trim_end().ends_with(&needle)).unwrap_or_else(|| panic!("{needle} in {class}"));
    index as i32 + 1
}

/// Names the home of the runtime under test (its `bin/java`, `bin/jfr`,
/// `bin/jcmd`), e.g. a JDK 11 or 21 runtime; fixtures are still compiled by
/// `JAVA_HOME`'s (or the `PATH`'s) `javac`, for Java 11.
pub const TEST_JAVA_HOME: &str = "PROFILER_TEST_JAVA_HOME";

/// The home of the JVM under test: `$PROFILER_TEST_JAVA_HOME`, else
/// `$JAVA_HOME`; `None` means the tools on the `PATH`.
pub fn test_java_home() -> Option<PathBuf> {
    std::env::var_os(TEST_JAVA_HOME).or_else(|| std::env::var_os("JAVA_HOME")).map(PathBuf::from)
}

/// A tool (`java`, `jfr`, `jcmd`) of the JVM under test.
pub fn jdk_tool(name: &str) -> PathBuf {
    match test_java_home() {
        Some(home) => home.join("bin").join(name),
        None => PathBuf::from(name),
    }
}

/// A tool of the JDK that builds the fixtures (`jar`, like `javac`):
/// `$JAVA_HOME`'s, or the one on the `PATH`, whatever JVM is under test.
pub fn build_jdk_tool(name: &str) -> PathBuf {
    match std::env::var_os("JAVA_HOME") {
        Some(home) => PathBuf::from(home).join("bin").join(name),
        None => PathBuf::from(name),
    }
}

/// A fresh directory for one test's files.
pub fn scratch_dir(test: &str) -> PathBuf {
    let dir = workspace_root().join("target/it-scratch").join(format!("{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A path for the file `name` in a fresh directory for `test`'s files
/// ([`scratch_dir`]).
pub fn scratch_file(test: &str, name: &str) -> PathBuf {
    scratch_dir(test).join(name)
}

/// `jcmd <pid> args...`.
pub fn jcmd(pid: u32, args: &[&str]) -> Output {
    Command::new(jdk_tool("jcmd")).arg(pid.to_string()).args(args).output().expect("run jcmd")
}

/// Loads the agent into a running JVM with `options`.
pub fn attach_agent(pid: u32, options: &str) -> Output {
    let agent = agent_library();
    jcmd(pid, &["JVMTI.agent_load", agent.to_str().unwrap(), &format!("\"{options}\"")])
}

/// [`attach_agent`], asserting that `jcmd` reports success (showing what
/// it printed otherwise).
pub fn assert_attached(pid: u32, options: &str) -> Output {
    let result = attach_agent(pid, options);
    assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stdout));
    result
}

/// A child process that is killed if the test ends before it does.
pub struct ChildGuard {
    child: Option<Child>,
    /// The child's stdout and stderr once a wait for a line took them:
    /// lines read so far, and the rest as a reader thread sends them.
    streams: [Option<(String, mpsc::Receiver<String>)>; 2],
}

/// One of a child's output streams.
#[derive(Clone, Copy, Debug)]
pub enum Stream {
    Stdout = 0,
    Stderr = 1,
}

impl ChildGuard {
    pub fn spawn(command: &mut Command) -> Self {
        let child = command.spawn().unwrap_or_else(|e| panic!("spawn {command:?}: {e}"));
        Self { child: Some(child), streams: [None, None] }
    }

    pub fn id(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Writes `text` to the child's stdin (spawned with `Stdio::piped()`).
    pub fn send(&mut self, text: &str) {
        use std::io::Write;
        let stdin = self.child.as_mut().unwrap().stdin.as_mut().expect("child spawned with a piped stdin");
        stdin.write_all(text.as_bytes()).and_then(|()| stdin.flush()).expect("write to the child's stdin");
    }

    /// Lets a fixture started with [`gated_java_command`] begin its work.
    pub fn go(&mut self) {
        self.send("go\n");
    }

    /// Reads the child's stdout up to a line equal to `line` (a fixture's
    /// readiness signal), for at most a minute; the lines read stay part of
    /// the output [`ChildGuard::wait`] returns.
    pub fn wait_for_line(&mut self, line: &str) {
        self.wait_for(Stream::Stdout, |text| text == line);
    }

    /// Reads `stream` up to a line `wanted` accepts (at most a minute) and
    /// returns it; the lines read stay part of the output.
    pub fn wait_for(&mut self, stream: Stream, wanted: impl Fn(&str) -> bool) -> String {
        let child = self.child.as_mut().unwrap();
        let (read, lines) = self.streams[stream as usize].get_or_insert_with(|| {
            let pipe: Box<dyn std::io::Read + Send> = match stream {
                Stream::Stdout => Box::new(child.stdout.take().expect("child spawned with a piped stdout")),
                Stream::Stderr => Box::new(child.stderr.take().expect("child spawned with a piped stderr")),
            };
            let (send, receive) = mpsc::channel();
            std::thread::spawn(move || {
                for text in BufReader::new(pipe).lines().map_while(Result::ok) {
                    if send.send(text).is_err() {
                        break;
                    }
                }
            });
            (String::new(), receive)
        });
        loop {
            let text = lines
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|e| panic!("no awaited line on the child's {stream:?} ({e}); it printed:\n{read}"));
            read.push_str(&text);
            read.push('\n');
            if wanted(&text) {
                return text;
            }
        }
    }

    /// Waits for the process; kills it and panics after `timeout`.
    pub fn wait(mut self, timeout: Duration) -> Output {
        let deadline = Instant::now() + timeout;
        let mut child = self.child.take().unwrap();
        // The test has nothing more to say: a gated fixture's end.
        drop(child.stdin.take());
        let mut output = loop {
            if child.try_wait().expect("wait for child").is_some() {
                break child.wait_with_output().expect("collect output");
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let output = child.wait_with_output().expect("collect output");
                panic!(
                    "process timed out after {timeout:?}\nstdout: {}\nstderr: {}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        for (stream, taken) in self.streams.iter_mut().enumerate() {
            if let Some((mut read, lines)) = taken.take() {
                // The reader thread ends at the end of the output, now the child has exited.
                for text in lines {
                    read.push_str(&text);
                    read.push('\n');
                }
                *(if stream == 0 { &mut output.stdout } else { &mut output.stderr }) = read.into_bytes();
            }
        }
        output
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `java [-agentpath:agent=options] [jvm_args] -cp fixtures main args`.
pub fn java_command(agent_options: Option<&str>, jvm_args: &[&str], main: &str, args: &[&str]) -> Command {
    java_command_on(&jdk_tool("java"), agent_options, jvm_args, &[], main, args)
}

/// [`java_command`] for a fixture that starts its timed work only when told
/// to ([`ChildGuard::go`]; `FixtureSupport.awaitGo` in the fixture), so a
/// test can attach or send signals first, however slowly `jcmd` answers.
pub fn gated_java_command(agent_options: Option<&str>, main: &str, args: &[&str]) -> Command {
    let mut command = java_command(agent_options, &["-Dfixture.gate=true"], main, args);
    command.stdin(Stdio::piped());
    command
}

/// Spawns `main` with [`gated_java_command`] and waits for the fixture's
/// `READY`: it is up, and begins its timed work at [`ChildGuard::go`].
pub fn ready_java(agent_options: Option<&str>, main: &str, args: &[&str]) -> ChildGuard {
    let mut run = ChildGuard::spawn(&mut gated_java_command(agent_options, main, args));
    run.wait_for_line("READY");
    run
}

/// The `java` launchers of the JDKs on this machine: the default one
/// ([`jdk_tool`]) first, then every other JDK under `/usr/lib/jvm`, one
/// per installation (symlinked aliases are skipped). With
/// `$PROFILER_TEST_JAVA_HOME` set, only that runtime's.
pub fn installed_javas() -> Vec<PathBuf> {
    let default = jdk_tool("java");
    if std::env::var_os(TEST_JAVA_HOME).is_some() {
        return vec![default];
    }
    let resolve = |p: &Path| {
        if p.is_absolute() {
            std::fs::canonicalize(p).ok()
        } else {
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                .find_map(|dir| std::fs::canonicalize(dir.join(p)).ok())
        }
    };
    let mut seen: Vec<PathBuf> = resolve(&default).into_iter().collect();
    let mut javas = vec![default];
    let mut others: Vec<PathBuf> = std::fs::read_dir("/usr/lib/jvm")
        .map(|dir| dir.filter_map(|e| e.ok()).map(|e| e.path().join("bin/java")).collect())
        .unwrap_or_default();
    others.sort();
    for java in others {
        if let Some(real) = resolve(&java).filter(|r| !seen.contains(r)) {
            seen.push(real);
            javas.push(java);
        }
    }
    javas
}

/// As [`java_command`], with a given `java` launcher and `before` ahead of
/// the fixtures on the class path.
pub fn java_command_on(
    java: &Path,
    agent_options: Option<&str>,
    jvm_args: &[&str],
    before: &[&Path],
    main: &str,
    args: &[&str],
) -> Command {
    let mut command = Command::new(java);
    if let Some(options) = agent_options {
        command.arg(format!("-agentpath:{}={options}", agent_library().display()));
    }
    let classpath = std::env::join_paths(before.iter().copied().chain([classes_dir()])).expect("class path");
    command.args(jvm_args).arg("-cp").arg(classpath).arg(main).args(args);
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    command
}

/// Runs a fixture to completion and returns its output (any exit status).
pub fn run_java(agent_options: Option<&str>, main: &str, args: &[&str], timeout: Duration) -> Output {
    ChildGuard::spawn(&mut java_command(agent_options, &[], main, args)).wait(timeout)
}

/// Runs a fixture to completion with the agent started as
/// `start,<options>,file=<recording>`, and asserts that it succeeded.
pub fn run_recorded(options: &str, recording: &Path, main: &str, args: &[&str], timeout: Duration) -> Output {
    let output = run_java(Some(&format!("start,{options},file={}", recording.display())), main, args, timeout);
    assert_success(&output);
    output
}

/// Runs a gated fixture to completion with the agent loaded through jcmd
/// once it is up, as `start,<options>,file=` a file for `test`, asserts
/// that both succeeded, and reads the recording.
pub fn attached_recording(test: &str, options: &str, main: &str, args: &[&str]) -> Recording {
    let file = scratch_file(test, "attached.jfr");
    let mut run = ready_java(None, main, args);
    assert_attached(run.id(), &format!("start,{options},file={}", file.display()));
    run.go();
    assert_success(&run.wait(Duration::from_secs(60)));
    read_recording(&file)
}

/// With `verifywalk`: at least 95% of the samples both the HotSpot walker
/// and AsyncGetCallTrace walked agree, and the HotSpot walker succeeded at
/// least as often, give or take one sample in a thousand (at least one):
/// about once in fifty wall-clock runs one sample of a thread inside the
/// VM found no Java frames where AsyncGetCallTrace did (not yet explained).
pub fn assert_walks_agree(label: &str, recording: &Recording) {
    let compared = recording.counter("walk_verify_compared");
    let agreed = recording.counter("walk_verify_agreed");
    let vm = recording.counter("walk_verify_vm_succeeded");
    let asgct = recording.counter("walk_verify_asgct_succeeded");
    println!("{label}: {agreed}/{compared} agree; vm walked {vm}, AsyncGetCallTrace {asgct}");
    assert!(compared >= 500, "{label}: only {compared} samples compared");
    assert!(agreed * 100 >= compared * 95, "{label}: {agreed} of {compared} agree");
    let allowed_misses = (asgct / 1000).max(1);
    assert!(vm + allowed_misses >= asgct, "{label}: vm walked {vm} samples, AsyncGetCallTrace {asgct}");
}

/// The number after `KEY ` on a line of a fixture's summary output
/// (`DUMPS 1260`); panics with the whole output if it is missing.
pub fn summary_value(out: &str, key: &str) -> u64 {
    out.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no number for {key} in:\n{out}"))
}

/// The CPU time a fixture measured for one of its threads, from its
/// `cpu <thread> <ns>` line (CpuShares); panics with the output if missing.
pub fn measured_cpu_ns(output: &Output, thread: &str) -> f64 {
    let text = stdout(output);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("cpu {thread} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no cpu line for {thread} in {text}"))
}

/// The lines of a fixture's output that start with `ERROR`.
pub fn error_lines(out: &str) -> Vec<&str> {
    out.lines().filter(|l| l.starts_with("ERROR")).collect()
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts a run succeeded, showing its output otherwise.
pub fn assert_success(output: &Output) {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status,
        stdout(output),
        stderr(output)
    );
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub frame_type: String,
    pub class: String,
    pub method: String,
    pub descriptor: String,
    pub line: i32,
    pub bci: i32,
    /// The method is hidden (`RecordedMethod.isHidden`: `jfr print` leaves it out).
    pub hidden: bool,
}

#[derive(Clone, Debug)]
pub struct Event {
    pub kind: String,
    pub start_epoch_ns: i64,
    pub thread: String,
    pub tid: i64,
    pub state: String,
    pub weight: i64,
    pub truncated: bool,
    /// The event's other fields (span ids, context attributes, endpoint, ...), as text.
    pub fields: HashMap<String, String>,
    /// Innermost first.
    pub frames: Vec<Frame>,
}

impl Event {
    /// The frames of the thread's own code, innermost first: the kernel
    /// frames on top of a CPU sample taken in the kernel (a system call,
    /// an interrupt) left out.
    pub fn user_frames(&self) -> &[Frame] {
        let kernel = self.frames.iter().take_while(|f| f.frame_type == "Kernel").count();
        &self.frames[kernel..]
    }

    /// The innermost frame of the thread's own code ([`Self::user_frames`]).
    pub fn top(&self) -> Option<&Frame> {
        self.user_frames().first()
    }

    /// A trace-context field of a sample (span ids, attributes), `None`
    /// when the sample has no such context (zero or null; the JDK dialect
    /// writes context only for samples that have some).
    pub fn context(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str).filter(|v| *v != "0" && *v != "null")
    }

    /// A field printed as text (`"null"` for a null value); panics naming the event if absent.
    pub fn field(&self, name: &str) -> &str {
        self.fields.get(name).unwrap_or_else(|| panic!("{} has no field {name}: {:?}", self.kind, self.fields))
    }
}

/// The event names of the two recording dialects (`jfrdialect=`, see
/// FORMAT.md): tests that look for samples accept both, so they hold
/// whichever the agent writes by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// `jfrdialect=jdk` (the default): the JDK's and async-profiler's events.
    Jdk,
    /// `jfrdialect=datadog`: the Datadog profiler's events.
    Datadog,
}

impl Dialect {
    pub const ALL: [Dialect; 2] = [Dialect::Jdk, Dialect::Datadog];

    /// The option's value (`jfrdialect=<this>`).
    pub fn option(self) -> &'static str {
        match self {
            Dialect::Jdk => "jdk",
            Dialect::Datadog => "datadog",
        }
    }

    /// The event of one CPU sample.
    pub fn cpu_sample(self) -> &'static str {
        match self {
            Dialect::Jdk => "jdk.ExecutionSample",
            Dialect::Datadog => "datadog.ExecutionSample",
        }
    }

    /// The event of one wall-clock sample.
    pub fn wall_sample(self) -> &'static str {
        match self {
            Dialect::Jdk => "profiler.WallClockSample",
            Dialect::Datadog => "datadog.MethodSample",
        }
    }

    /// The event of one `JavaProfiler.recordTraceRoot` call.
    pub fn endpoint(self) -> &'static str {
        match self {
            Dialect::Jdk => "jvmprofiler.Endpoint",
            Dialect::Datadog => "datadog.Endpoint",
        }
    }

    /// The event of one of the agent's counters.
    pub fn counter(self) -> &'static str {
        match self {
            Dialect::Jdk => "jvmprofiler.Counter",
            Dialect::Datadog => "datadog.ProfilerCounter",
        }
    }
}

/// A CPU sample event of either dialect.
pub fn is_cpu_sample(kind: &str) -> bool {
    Dialect::ALL.iter().any(|d| d.cpu_sample() == kind)
}

/// A wall-clock sample event of either dialect.
pub fn is_wall_sample(kind: &str) -> bool {
    Dialect::ALL.iter().any(|d| d.wall_sample() == kind)
}

/// A recording as read by `jdk.jfr.consumer.RecordingFile`.
#[derive(Clone, Debug, Default)]
pub struct Recording {
    pub events: Vec<Event>,
    pub counters: HashMap<String, i64>,
    pub settings: HashMap<String, String>,
}

impl Recording {
    /// The CPU samples (of either dialect).
    pub fn samples(&self) -> impl Iterator<Item = &Event> {
        self.events.iter().filter(|e| is_cpu_sample(&e.kind))
    }

    /// The wall-clock samples (of either dialect).
    pub fn wall_samples(&self) -> impl Iterator<Item = &Event> {
        self.events.iter().filter(|e| is_wall_sample(&e.kind))
    }

    /// The endpoint events (of either dialect).
    pub fn endpoints(&self) -> impl Iterator<Item = &Event> {
        self.events.iter().filter(|e| Dialect::ALL.iter().any(|d| d.endpoint() == e.kind))
    }

    pub fn counter(&self, name: &str) -> i64 {
        *self.counters.get(name).unwrap_or_else(|| panic!("counter {name} missing: {:?}", self.counters))
    }
}

/// Reads a recording with the JDK's parser of the JVM under test (fails
/// the test if the JDK cannot parse it).
pub fn read_recording(path: &Path) -> Recording {
    read_recordings_on(&jdk_tool("java"), &[path]).pop().expect("one recording")
}

/// Reads recordings with the JDK's parser of the given `java` launcher,
/// all in one JVM (fails the test if the JDK cannot parse one).
pub fn read_recordings_on(java: &Path, paths: &[&Path]) -> Vec<Recording> {
    let output =
        Command::new(java).arg("-cp").arg(classes_dir()).arg("JfrDump").args(paths).output().expect("run JfrDump");
    assert!(
        output.status.success(),
        "jdk.jfr.consumer ({}) could not read {paths:?}: {}",
        java.display(),
        stderr(&output)
    );
    let recordings = parse_dump(&stdout(&output));
    assert_eq!(recordings.len(), paths.len(), "JfrDump read every file");
    recordings
}

/// JfrDump's output: one recording per FILE line.
fn parse_dump(text: &str) -> Vec<Recording> {
    let mut recordings: Vec<Recording> = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        if fields[0] == "FILE" {
            recordings.push(Recording::default());
            continue;
        }
        let recording = recordings.last_mut().expect("FILE before the events");
        match fields[0] {
            "EVENT" => recording.events.push(Event {
                kind: fields[1].to_owned(),
                start_epoch_ns: fields[2].parse().unwrap(),
                thread: fields[3].to_owned(),
                tid: fields[4].parse().unwrap(),
                state: fields[5].to_owned(),
                weight: fields[6].parse().unwrap(),
                truncated: fields[7] == "true",
                fields: HashMap::new(),
                frames: Vec::new(),
            }),
            "FRAME" => recording.events.last_mut().expect("frame after event").frames.push(Frame {
                frame_type: fields[1].to_owned(),
                class: fields[2].to_owned(),
                method: fields[3].to_owned(),
                descriptor: fields[4].to_owned(),
                line: fields[5].parse().unwrap(),
                bci: fields[6].parse().unwrap(),
                hidden: fields[7] == "true",
            }),
            "FIELD" => {
                let event = recording.events.last_mut().expect("field after event");
                event.fields.insert(fields[1].to_owned(), fields.get(2).copied().unwrap_or_default().to_owned());
            }
            "COUNTER" => {
                recording.counters.insert(fields[1].to_owned(), fields[2].parse().unwrap());
            }
            "SETTING" => {
                recording.settings.insert(fields[1].to_owned(), fields[2].to_owned());
            }
            other => panic!("unexpected dump line kind {other:?}"),
        }
    }
    recordings
}

/// The JDK's `jfr` tool summarises the file without error.
pub fn assert_jfr_tool_accepts(path: &Path) {
    let output = Command::new(jdk_tool("jfr")).arg("summary").arg(path).output().expect("run jfr");
    assert!(output.status.success(), "jfr summary {}: {}", path.display(), stderr(&output));
}
