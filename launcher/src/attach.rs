//! HotSpot's dynamic attach protocol, spoken by us (no JDK needed): the
//! `.attach_pid<pid>` file and SIGQUIT that make the JVM open its
//! `.java_pid<pid>` socket, and the `load` command on it.
//!
//! Every path is reached through `/proc/<pid>/root` and `/proc/<pid>/cwd`,
//! so a JVM in another mount and pid namespace (a container) is attached
//! from the host as one beside us: files named by the pid the JVM sees, the
//! signal sent to the pid we see.

use crate::inroot::Dir;
use crate::jvms::Jvm;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
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
    let mut reply = Vec::new();
    socket.read_to_end(&mut reply).map_err(|e| format!("reading the JVM's answer: {e}"))?;
    parse_reply(&String::from_utf8_lossy(&reply))
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
    let tmp = Dir::in_root(jvm.pid, "/tmp").map_err(|e| format!("the JVM's /tmp: {e}"))?;
    let name = format!(".java_pid{}", jvm.ns_pid);
    let socket = tmp.path_of(&name);
    // Only a socket (a link planted there is not followed by connect).
    let is_socket = || tmp.stat(&name).is_ok_and(|s| s.st_mode & libc::S_IFMT == libc::S_IFSOCK);
    if is_socket() {
        if let Ok(stream) = UnixStream::connect(&socket) {
            return Ok(stream);
        }
    }
    if !jvm.handles_sigquit() {
        return Err("the JVM does not handle SIGQUIT (started with -Xrs, or still starting): asking it to open \
                    its attach socket would end it"
            .to_owned());
    }
    let trigger = Trigger::create(jvm, &tmp)?;
    // SAFETY: kill(2) with a pid and a signal number; no memory is passed.
    if unsafe { libc::kill(jvm.pid as libc::pid_t, libc::SIGQUIT) } != 0 {
        return Err(format!("signalling the JVM: {}", std::io::Error::last_os_error()));
    }
    let started = Instant::now();
    let mut pause = Duration::from_millis(10);
    loop {
        // The socket file appears before the JVM listens on it: connect, not exists.
        if is_socket() {
            if let Ok(stream) = UnixStream::connect(&socket) {
                drop(trigger);
                return Ok(stream);
            }
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
/// dropped if we made it (another attacher's stays). HotSpot looks for it
/// in its working directory, then in /tmp.
struct Trigger(Option<(Dir, String)>);

impl Trigger {
    fn create(jvm: &Jvm, tmp: &Dir) -> Result<Self, String> {
        let name = format!(".attach_pid{}", jvm.ns_pid);
        let cwd = Dir::cwd(jvm.pid);
        let mut errors = Vec::new();
        for (place, dir) in [("working directory", cwd.as_ref().ok()), ("/tmp", Some(tmp))] {
            let Some(dir) = dir else { continue };
            match dir.create_new(&name, 0o600) {
                Ok(_) => return Ok(Self(Some((dir.try_clone().map_err(|e| e.to_string())?, name)))),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(Self(None)),
                Err(e) => errors.push(format!("{place}: {e}")),
            }
        }
        Err(format!("cannot create the attach trigger file {name} ({})", errors.join("; ")))
    }
}

impl Drop for Trigger {
    fn drop(&mut self) {
        if let Some((dir, name)) = &self.0 {
            let _ = dir.remove(name);
        }
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
