//! `jprofile`: starts, queries and stops the profiler in a running JVM
//! (`jprofile --help`). It attaches by HotSpot's own protocol (no JDK
//! needed), into containers too, and prints the agent's answer.

mod attach;
mod inroot;
mod jvms;
mod library;
mod reply;

use clap::{Parser, ValueEnum};
use jvms::Jvm;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const AFTER_HELP: &str = "\
Examples:
  jprofile list
  jprofile 4242 -d 30 -f /tmp/cpu.jfr        profile 30 s, then write the recording
  jprofile MyApp start -e cpu,alloc -i 1ms    start (a JVM named by its main class)
  jprofile 4242 status
  jprofile 4242 stop
  jprofile 4242 start -- loop=1h,maxfiles=24,file=/var/log/p-%t.jfr

Exit status: 0 the agent carried the command out; 1 it refused it (its message is printed), \
the JVM could not be attached, or bad arguments.";

/// Starts, queries and stops the profiler in a running JVM, and prints the
/// agent's answer. TARGET is a pid, or the main class (full or simple
/// name), jar or module of one running JVM; `jprofile list` shows them.
#[derive(Parser)]
#[command(name = "jprofile", version, after_help = AFTER_HELP)]
struct Cli {
    /// A pid, a main class, jar or module; or `list`
    #[arg(value_name = "TARGET|list")]
    target: String,
    /// What to do [default: collect: start, wait --duration, stop]
    #[arg(value_enum)]
    action: Option<Action>,
    /// Events, comma-separated: cpu (or the engine: ctimer, itimer), wall, alloc, lock [default: cpu]
    #[arg(short, long, value_name = "EVENTS", value_delimiter = ',')]
    event: Vec<Event>,
    /// The CPU engine's interval (the wall clock's when it is the only event): 10ms, 500us
    #[arg(short, long, value_name = "INTERVAL")]
    interval: Option<String>,
    /// The wall clock's interval
    #[arg(long, value_name = "INTERVAL")]
    wall: Option<String>,
    /// Bytes allocated between allocation samples: 512k
    #[arg(long, value_name = "BYTES")]
    alloc: Option<String>,
    /// Time waited between lock samples: 10us
    #[arg(long, value_name = "INTERVAL")]
    lock: Option<String>,
    /// collect: how long to profile; start: stop by itself after this long (the agent's `timeout=`)
    #[arg(short, long, value_name = "SECONDS")]
    duration: Option<u64>,
    /// The recording (relative paths are this directory's when the JVM shares our file system)
    #[arg(short, long, value_name = "PATH")]
    file: Option<String>,
    /// Continuous recording: a new file every DURATION (the agent's `loop=`)
    #[arg(long = "loop", value_name = "DURATION")]
    loop_period: Option<String>,
    /// The agent library, used even if the JVM has another loaded [default: libprofiler.so beside
    /// jprofile, or the one the JVM has loaded]
    #[arg(long, value_name = "PATH")]
    lib: Option<PathBuf>,
    /// More agent options, as -agentpath takes them (docs/options.md)
    #[arg(last = true, value_name = "AGENT OPTIONS")]
    agent_options: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Action {
    Start,
    Stop,
    Dump,
    Status,
    Version,
    /// Start, wait --duration (60 s) or Ctrl-C, stop
    Collect,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Event {
    Cpu,
    Ctimer,
    Itimer,
    Wall,
    Alloc,
    Lock,
}

/// collect's duration when none is given (async-profiler's too).
const DEFAULT_DURATION: u64 = 60;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { ExitCode::FAILURE } else { ExitCode::SUCCESS };
        }
    };
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("jprofile: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> Result<(), String> {
    if cli.target == "list" && cli.action.is_none() {
        for jvm in jvms::list() {
            println!("{} {}", jvm.pid, jvm.main);
        }
        return Ok(());
    }
    let jvm = jvms::find(&cli.target)?;
    // Read while we are still ourselves (the JVM's user may not read it).
    let agent = library::Agent::find(cli.lib.as_deref())?;
    act_as_owner(&jvm)?;
    let library = library::for_jvm(&jvm, &agent)?;
    let action = cli.action.unwrap_or(Action::Collect);
    let file = recording_path(cli, &jvm, action)?;
    match action {
        Action::Collect => {
            command(&jvm, &library, &start_options(cli, file.as_deref(), false)?)?;
            let seconds = cli.duration.unwrap_or(DEFAULT_DURATION);
            eprintln!("Profiling for {seconds} seconds (Ctrl-C stops early)");
            wait(&jvm, Duration::from_secs(seconds))?;
            // The session's own file: `file=` again would expand `%t` anew.
            let answer = command(&jvm, &library, "stop")?;
            show_host_path(&jvm, &answer);
            Ok(())
        }
        Action::Start => command(&jvm, &library, &start_options(cli, file.as_deref(), true)?).map(drop),
        Action::Stop | Action::Dump => {
            let name = if action == Action::Stop { "stop" } else { "dump" };
            let answer = command(&jvm, &library, &file_option(name, file.as_deref()))?;
            show_host_path(&jvm, &answer);
            Ok(())
        }
        Action::Status => command(&jvm, &library, "status").map(drop),
        Action::Version => command(&jvm, &library, "version").map(drop),
    }
}

/// Runs one agent command in the JVM and prints its answer: on stdout when
/// it was carried out, else as the error.
fn command(jvm: &Jvm, library: &str, options: &str) -> Result<String, String> {
    let reply = reply::File::create(jvm)?;
    let loaded = attach::load(jvm, library, &format!("{options},reply={}", reply.jvm_path()))
        .map_err(|e| format!("cannot attach to JVM {}: {e}", jvm.pid))?;
    let answer = reply.read();
    if loaded.agent_status != 0 {
        let answer = answer.trim().trim_start_matches("[profiler] ERROR: ");
        let answer = if answer.is_empty() { "(no message; see the JVM's output)" } else { answer };
        return Err(format!("the agent refused '{options}': {answer}"));
    }
    print!("{answer}");
    Ok(answer)
}

/// The `file=` a command passes: `-f` made absolute when the JVM shares our
/// file system; for collect without `-f`, a new file named by pid and time
/// (here, or in the JVM's /tmp when it has its own mounts).
fn recording_path(cli: &Cli, jvm: &Jvm, action: Action) -> Result<Option<String>, String> {
    let shared = jvm.shares_our_mounts();
    let path = match (&cli.file, action) {
        (Some(file), _) if shared && !file.starts_with('/') => {
            let here = std::env::current_dir().map_err(|e| format!("this directory: {e}"))?;
            Some(here.join(file).to_string_lossy().into_owned())
        }
        (Some(file), _) => Some(file.clone()),
        (None, Action::Collect) if shared => {
            let here = std::env::current_dir().map_err(|e| format!("this directory: {e}"))?;
            Some(here.join("jprofile-%p-%t.jfr").to_string_lossy().into_owned())
        }
        (None, Action::Collect) => Some("/tmp/jprofile-%p-%t.jfr".to_owned()),
        (None, _) => None,
    };
    if let Some(path) = &path {
        if path.contains(',') {
            return Err(format!("-f {path}: the agent's option string cannot carry a path with a comma"));
        }
    }
    Ok(path)
}

fn file_option(action: &str, file: Option<&str>) -> String {
    match file {
        Some(file) => format!("{action},file={file}"),
        None => action.to_owned(),
    }
}

/// `start` and the options the flags stand for, then the agent options
/// given after `--`.
fn start_options(cli: &Cli, file: Option<&str>, with_timeout: bool) -> Result<String, String> {
    let mut options = vec!["start".to_owned()];
    let given_event = cli.agent_options.iter().flat_map(|o| o.split(',')).any(|item| {
        let key = item.split('=').next().unwrap_or(item);
        ["event", "cpu", "wall", "alloc", "lock", "interval"].contains(&key)
    });
    let events = if cli.event.is_empty() && !given_event { vec![Event::Cpu] } else { cli.event.clone() };
    let only_wall = events == [Event::Wall];
    let with_value = |key: &str, value: Option<&String>| match value {
        Some(value) => format!("{key}={value}"),
        None => key.to_owned(),
    };
    for event in &events {
        options.push(match event {
            Event::Cpu | Event::Ctimer | Event::Itimer => {
                let engine = match event {
                    Event::Ctimer => "ctimer",
                    Event::Itimer => "itimer",
                    _ => "cpu",
                };
                match &cli.interval {
                    Some(interval) => format!("event={engine},interval={interval}"),
                    None => format!("event={engine}"),
                }
            }
            Event::Wall => with_value("wall", cli.wall.as_ref().or(cli.interval.as_ref().filter(|_| only_wall))),
            Event::Alloc => with_value("alloc", cli.alloc.as_ref()),
            Event::Lock => with_value("lock", cli.lock.as_ref()),
        });
    }
    if let Some(file) = file {
        options.push(format!("file={file}"));
    }
    if let Some(period) = &cli.loop_period {
        options.push(format!("loop={period}"));
    }
    if let (true, Some(seconds)) = (with_timeout, cli.duration) {
        options.push(format!("timeout={seconds}s"));
    }
    options.extend(cli.agent_options.iter().cloned());
    let options = options.join(",");
    if options.contains("reply=") {
        return Err("reply= is jprofile's own (it reads the agent's answer there)".to_owned());
    }
    Ok(options)
}

/// When the JVM has its own mounts, where a file the agent names is on
/// this host.
fn show_host_path(jvm: &Jvm, answer: &str) {
    if jvm.shares_our_mounts() {
        return;
    }
    if let Some(path) = answer.lines().find_map(|line| line.split_once("written to ").map(|(_, p)| p.trim())) {
        println!("(on this host: {})", jvm.host_path(path).display());
    }
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// Waits `duration`, or until Ctrl-C; an error if the JVM exits meanwhile.
fn wait(jvm: &Jvm, duration: Duration) -> Result<(), String> {
    // SAFETY: installs a handler that only stores to an atomic; the
    // sigaction struct is zeroed and then filled as sigaction(2) expects.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_interrupt as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
    }
    let end = Instant::now() + duration;
    while Instant::now() < end && !INTERRUPTED.load(Ordering::Relaxed) {
        if !jvm.is_alive() {
            return Err(format!("JVM {} exited while it was profiled", jvm.pid));
        }
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(100)));
    }
    Ok(())
}

/// Takes the JVM's user and group as our effective ones, when we are root
/// and they differ: the files we leave for it (the attach trigger, the
/// reply, a copy of the agent) are then its own, and HotSpot accepts the
/// connection from its own user. Anyone else must be the JVM's user.
fn act_as_owner(jvm: &Jvm) -> Result<(), String> {
    // SAFETY: geteuid/getegid take no arguments and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if uid == jvm.uid && gid == jvm.gid {
        return Ok(());
    }
    if uid != 0 {
        return Err(format!(
            "JVM {} runs as user {}, jprofile as {uid}: HotSpot accepts attach only from its own user (or root)",
            jvm.pid, jvm.uid
        ));
    }
    // SAFETY: setgroups/setegid/seteuid with plain ids and a one-element
    // array; the groups first, while we are still root and may change them
    // (root's supplementary groups must not stay with the JVM's user).
    let changed =
        unsafe { libc::setgroups(1, &jvm.gid) == 0 && libc::setegid(jvm.gid) == 0 && libc::seteuid(jvm.uid) == 0 };
    if !changed {
        return Err(format!("taking the JVM's user {}: {}", jvm.uid, std::io::Error::last_os_error()));
    }
    Ok(())
}
