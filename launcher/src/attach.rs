//! HotSpot's dynamic attach protocol, spoken by us (no JDK needed): the
//! `.attach_pid<pid>` file and SIGQUIT that make the JVM open its
//! `.java_pid<pid>` socket, and the `load` command on it.
//!
//! Every path is reached through `/proc/<pid>/root` and `/proc/<pid>/cwd`,
//! so a JVM in another mount and pid namespace (a container) is attached
//! from the host as one beside us: files named by the pid the JVM sees, the
//! signal sent to the pid we see.

use crate::jvms::Jvm;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

/// How long the JVM gets to open its attach socket after SIGQUIT.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a command may take in the JVM (a `stop` writes the recording).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(300);
/// HotSpot refuses an attach argument longer than this (`arg_length_max`).
const MAX_ARGUMENT: usize = 1024;

/// What the JVM answered to `load`.
#[derive(Debug, PartialEq, Eq)]
pub struct Loaded {
    /// `Agent_OnAttach`'s return value: 0 when the agent carried the command out.
    pub agent_status: i32,
}

/// Loads `library` (a path the JVM can open) into the JVM with `options`
/// (`Agent_OnAttach`'s argument); a library already loaded is called again.
pub fn load(jvm: &Jvm, library: &str, options: &str) -> Result<Loaded, String> {
    for (what, argument) in [("the library path", library), ("the option string", options)] {
        if argument.len() > MAX_ARGUMENT {
            return Err(format!("{what} is {} bytes; HotSpot's attach takes at most {MAX_ARGUMENT}", argument.len()));
        }
    }
    let mut socket = connect(jvm)?;
    socket.set_read_timeout(Some(COMMAND_TIMEOUT)).map_err(|e| format!("attach socket: {e}"))?;
    let mut request = Vec::new();
    for part in ["1", "load", library, "true", options] {
        request.extend_from_slice(part.as_bytes());
        request.push(0);
    }
    socket.write_all(&request).map_err(|e| format!("sending the load command: {e}"))?;
    let mut reply = String::new();
    socket.read_to_string(&mut reply).map_err(|e| format!("reading the JVM's answer: {e}"))?;
    parse_reply(&reply)
}

/// The JVM's answer to `load`: the attach status on the first line (0: the
/// command ran), then `Agent_OnAttach`'s result, as `N` (JDK 11 to 20) or
/// `return code: N` (21 on).
fn parse_reply(reply: &str) -> Result<Loaded, String> {
    let mut lines = reply.lines();
    let status = lines.next().unwrap_or("").trim();
    let rest: Vec<&str> = lines.collect();
    if status != "0" {
        let detail = rest.join(" ");
        return Err(format!("the JVM refused the load command (status {status}): {}", detail.trim()));
    }
    let code = rest.first().map(|line| line.trim().trim_start_matches("return code:").trim()).unwrap_or("");
    let agent_status =
        code.parse().map_err(|_| format!("the JVM's answer to load is not understood: {:?}", reply.trim()))?;
    Ok(Loaded { agent_status })
}

/// The JVM's attach socket, opened first if it is not listening.
fn connect(jvm: &Jvm) -> Result<UnixStream, String> {
    let socket = jvm.host_path(&format!("/tmp/.java_pid{}", jvm.ns_pid));
    if let Ok(stream) = UnixStream::connect(&socket) {
        return Ok(stream);
    }
    let trigger = Trigger::create(jvm)?;
    // SAFETY: kill(2) with a pid and a signal number; no memory is passed.
    if unsafe { libc::kill(jvm.pid as libc::pid_t, libc::SIGQUIT) } != 0 {
        return Err(format!("signalling the JVM: {}", std::io::Error::last_os_error()));
    }
    let started = Instant::now();
    let mut pause = Duration::from_millis(10);
    loop {
        // The socket file appears before the JVM listens on it: connect, not exists.
        if let Ok(stream) = UnixStream::connect(&socket) {
            drop(trigger);
            return Ok(stream);
        }
        if !jvm.is_alive() {
            return Err("the JVM exited while it was asked to attach".to_owned());
        }
        if started.elapsed() > OPEN_TIMEOUT {
            return Err(format!(
                "the JVM did not open its attach socket within {} s (started with -XX:+DisableAttachMechanism, \
                 or still starting?)",
                OPEN_TIMEOUT.as_secs()
            ));
        }
        thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

/// The `.attach_pid<pid>` file that tells the JVM's SIGQUIT handler to open
/// the attach socket (instead of printing a thread dump); removed when
/// dropped. HotSpot looks for it in its working directory, then in /tmp.
struct Trigger(PathBuf);

impl Trigger {
    fn create(jvm: &Jvm) -> Result<Self, String> {
        let name = format!(".attach_pid{}", jvm.ns_pid);
        let places =
            [PathBuf::from(format!("/proc/{}/cwd", jvm.pid)).join(&name), jvm.host_path(&format!("/tmp/{name}"))];
        let mut errors = Vec::new();
        for path in places {
            match File::create(&path) {
                Ok(_) => return Ok(Self(path)),
                Err(e) => errors.push(format!("{}: {e}", path.display())),
            }
        }
        Err(format!("cannot create the attach trigger file ({})", errors.join("; ")))
    }
}

impl Drop for Trigger {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_of_the_agents_result_are_read() {
        assert_eq!(parse_reply("0\n0\n"), Ok(Loaded { agent_status: 0 }));
        assert_eq!(parse_reply("0\nreturn code: -1\n"), Ok(Loaded { agent_status: -1 }));
        assert_eq!(parse_reply("0\nreturn code: 0\n"), Ok(Loaded { agent_status: 0 }));
    }

    #[test]
    fn a_refused_command_and_an_unknown_answer_are_errors() {
        let refused = parse_reply("-1\n/x/libprofiler.so was not loaded.\ndlopen failed\n").unwrap_err();
        assert!(refused.contains("status -1") && refused.contains("was not loaded"), "{refused}");
        assert!(parse_reply("0\nsomething else\n").unwrap_err().contains("not understood"));
        assert!(parse_reply("").is_err());
    }
}
