//! `jprofile`, the attach launcher, against real JVMs: from an environment
//! with no JDK (no `PATH` at all), beside us and in a namespace of its own.

use integration_tests::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// `jprofile args...` with an empty environment: nothing of a JDK to lean on.
fn jprofile(args: &[&str]) -> Output {
    Command::new(jprofile_binary())
        .args(args)
        .env_clear()
        .env("PATH", "/nonexistent")
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run jprofile")
}

fn assert_answer(output: &Output, contains: &str) -> String {
    let (out, err) = (stdout(output), stderr(output));
    assert!(output.status.success(), "jprofile failed ({:?}): {out}{err}", output.status);
    assert!(out.contains(contains), "'{contains}' not in the answer: {out}{err}");
    out
}

#[test]
fn start_status_dump_and_stop_print_the_agents_answers() {
    let file = scratch_file("jprofile_session", "session.jfr");
    // The only test here to run DeepStack: the name finds one JVM.
    let mut run = ready_java(None, "DeepStack", &["20", "1"]);
    let pid = run.id().to_string();

    let list = assert_answer(&jprofile(&["list"]), &pid);
    assert!(list.lines().any(|line| line == format!("{pid} DeepStack")), "{list}");

    let file_text = file.to_str().unwrap();
    assert_answer(&jprofile(&["DeepStack", "start", "-e", "cpu", "-i", "1ms", "-f", file_text]), "Profiling started");
    let status = assert_answer(&jprofile(&[&pid, "status"]), "Profiling is running");
    assert!(status.contains("cpu 1ms") && status.contains(file_text), "{status}");
    run.go();
    assert_answer(&jprofile(&[&pid, "dump"]), &format!("Recording written to {file_text}"));
    assert_answer(&jprofile(&[&pid, "stop"]), &format!("recording written to {file_text}"));
    assert_answer(&jprofile(&[&pid, "status"]), "Profiler is not active");
    assert_answer(&jprofile(&[&pid, "version"]), "profiler ");
    assert_success(&run.wait(Duration::from_secs(60)));
    read_recording(&file);
}

#[test]
fn a_refused_option_exits_non_zero_with_the_agents_message() {
    let mut run = ready_java(None, "CpuShares", &["1"]);
    let output = jprofile(&[&run.id().to_string(), "start", "-i", "fast"]);
    assert_eq!(output.status.code(), Some(1), "{}{}", stdout(&output), stderr(&output));
    assert!(stderr(&output).contains("interval: 'fast' is not a number"), "{}", stderr(&output));
    assert!(stdout(&output).is_empty(), "{}", stdout(&output));
    run.go();
    let output = run.wait(Duration::from_secs(60));
    assert_success(&output);
    assert!(!stderr(&output).contains("fast"), "the answer went to jprofile, not the JVM: {}", stderr(&output));
}

/// A process that maps libjvm.so but has not installed HotSpot's signal
/// handlers (a JVM still starting; here Python holding the library) would
/// die of the attach handshake's SIGQUIT: refused, and it lives on.
#[test]
fn a_process_that_does_not_catch_sigquit_is_not_signalled() {
    let mut jvm = ready_java(None, "CpuShares", &["1"]);
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", jvm.id())).unwrap();
    let libjvm = maps.lines().find_map(|l| l.split_whitespace().nth(5).filter(|p| p.ends_with("/libjvm.so"))).unwrap();
    let script = format!("import ctypes, sys; ctypes.CDLL('{libjvm}'); print('READY', flush=True); sys.stdin.read()");
    let mut holder = ChildGuard::spawn(
        Command::new("python3")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    holder.wait_for_line("READY");
    let output = jprofile(&[&holder.id().to_string(), "status"]);
    assert_eq!(output.status.code(), Some(1), "{}{}", stdout(&output), stderr(&output));
    assert!(stderr(&output).contains("does not handle SIGQUIT"), "{}", stderr(&output));
    assert_success(&holder.wait(Duration::from_secs(30)));
    jvm.go();
    assert_success(&jvm.wait(Duration::from_secs(60)));
}

#[test]
fn a_timed_collection_writes_a_recording() {
    let file = scratch_file("jprofile_collect", "timed.jfr");
    let mut run = ready_java(None, "CpuShares", &["5"]);
    run.go();
    let output = jprofile(&[&run.id().to_string(), "-d", "2", "-f", file.to_str().unwrap()]);
    assert_answer(&output, &format!("recording written to {}", file.display()));
    assert_success(&run.wait(Duration::from_secs(60)));
    let heavy = read_recording(&file).samples().filter(|e| e.thread == "heavy").count();
    assert!(heavy > 50, "2 s of a busy thread at 10 ms: {heavy} samples");
}

/// Lock profiling of virtual threads started by attach, with its
/// defaults (`LockSupport` rewritten at run time): the `ReentrantLock`
/// waits of the virtual threads are recorded with their own stacks.
#[test]
fn virtual_threads_lock_waits_are_recorded_after_an_attach() {
    let file = scratch_file("jprofile_virtual_locks", "virtual-locks.jfr");
    let mut run =
        ChildGuard::spawn(&mut gated_java_command(None, "LockShares", &["2", "300000", "1000000", "virtual"]));
    let first = run.wait_for(Stream::Stdout, |line| line == "READY" || line == "NO_VIRTUAL_THREADS");
    if first == "NO_VIRTUAL_THREADS" {
        skip("this JDK has no virtual threads", InCi::Optional);
        return;
    }
    let pid = run.id().to_string();
    let file_text = file.to_str().unwrap();
    assert_answer(&jprofile(&[&pid, "start", "-e", "lock", "-f", file_text]), "Profiling started");
    run.go();
    let output = run.wait(Duration::from_secs(60));
    assert_success(&output);
    let parks: Vec<Event> = read_recording(&file)
        .events
        .into_iter()
        .filter(|e| e.kind == "jdk.ThreadPark" && e.frames.iter().any(|f| f.method == "waitForLock"))
        .collect();
    assert!(parks.len() >= 20, "only {} virtual threads' lock waits after an attach", parks.len());
    for park in &parks {
        assert!(
            park.frames.iter().any(|f| f.class == "java.lang.VirtualThread" && f.method == "run"),
            "{:?}",
            park.frames
        );
    }
}

/// A JVM in its own pid and mount namespaces with a private /tmp, as in a
/// container: attached from here, the agent copied into its /tmp (our copy
/// lives in a /tmp it cannot see), the recording reached through /proc.
#[test]
fn a_jvm_in_its_own_namespaces_is_profiled_from_the_host() {
    // SAFETY: geteuid takes no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        skip("making pid and mount namespaces (unshare) needs root", InCi::Required);
        return;
    }
    let hidden = tempdir_on_host_tmp();
    let library = hidden.join("libprofiler.so");
    std::fs::copy(agent_library(), &library).unwrap();

    let java = gated_java_command(None, "CpuShares", &["5"]);
    let mut command = Command::new("unshare");
    command
        .args([
            "--fork",
            "--pid",
            "--mount",
            "--mount-proc",
            "sh",
            "-c",
            "mount -t tmpfs tmpfs /tmp && exec \"$0\" \"$@\"",
        ])
        .arg(java.get_program())
        .args(java.get_args())
        .envs(java.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut run = ChildGuard::spawn(&mut command);
    run.wait_for_line("READY");
    let pid = child_of(run.id());
    assert_eq!(ns_pid(pid), 1, "the JVM is pid 1 of its namespace");
    assert!(!Path::new(&format!("/proc/{pid}/root{}", library.display())).exists(), "the JVM cannot see our copy");
    run.go();

    let pid_text = pid.to_string();
    let lib_text = library.to_str().unwrap();
    let output = jprofile(&[&pid_text, "-d", "2", "-e", "cpu", "-i", "1ms", "--lib", lib_text]);
    let answer = assert_answer(&output, "recording written to /tmp/jprofile-1-");
    let host_path = answer
        .lines()
        .find_map(|line| line.strip_prefix("(on this host: ")?.strip_suffix(')'))
        .unwrap_or_else(|| panic!("no host path in {answer}"));
    let copy = scratch_file("jprofile_namespaces", "in-namespace.jfr");
    std::fs::copy(host_path, &copy).unwrap();
    assert!(Path::new(&format!("/proc/{pid}/root/tmp/jprofile-0/libprofiler.so")).exists(), "the agent was copied");
    assert_answer(&jprofile(&[&pid_text, "status", "--lib", lib_text]), "Profiler is not active");
    assert_success(&run.wait(Duration::from_secs(60)));
    let _ = std::fs::remove_dir_all(&hidden);

    let heavy = read_recording(&copy).samples().filter(|e| e.thread == "heavy").count();
    assert!(heavy > 500, "2 s of a busy thread at 1 ms: {heavy} samples");
}

/// A directory in the host's /tmp (which the namespaced JVM's private
/// /tmp hides).
fn tempdir_on_host_tmp() -> PathBuf {
    let dir = PathBuf::from(format!("/tmp/jprofile-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The one child of `pid` (unshare's forked child, which became `java`).
fn child_of(pid: u32) -> u32 {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap();
    children.split_whitespace().next().and_then(|c| c.parse().ok()).expect("unshare's child")
}

fn ns_pid(pid: u32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:")).unwrap();
    line.split_whitespace().last().unwrap().parse().unwrap()
}
