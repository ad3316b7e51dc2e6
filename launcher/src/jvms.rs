//! Running JVMs, as `/proc` shows them: which processes are JVMs, their
//! main class, and what attaching needs to know of one (its pid inside its
//! own pid namespace, its user, the root its paths are relative to).

use std::fs;
use std::path::{Path, PathBuf};

/// A JVM as the host sees it.
#[derive(Clone, Debug)]
pub struct Jvm {
    /// The pid in our pid namespace (signals go there).
    pub pid: u32,
    /// The pid the JVM sees as its own (its attach files are named by it).
    pub ns_pid: u32,
    /// Effective user and group.
    pub uid: u32,
    pub gid: u32,
    /// The main class, `-jar` file or module, else the command's name.
    pub main: String,
}

impl Jvm {
    /// `path` as the JVM names it (in its mount namespace), as we reach it:
    /// through `/proc/<pid>/root`, which crosses into a container's mounts.
    pub fn host_path(&self, path: &str) -> PathBuf {
        Path::new(&format!("/proc/{}/root", self.pid)).join(path.trim_start_matches('/'))
    }

    /// Whether the JVM shares our mount namespace (its paths are ours).
    pub fn shares_our_mounts(&self) -> bool {
        let ns = |pid: &str| fs::read_link(format!("/proc/{pid}/ns/mnt")).ok();
        matches!((ns("self"), ns(&self.pid.to_string())), (Some(a), Some(b)) if a == b)
    }

    /// The libraries the JVM has mapped (paths in its mount namespace).
    pub fn mapped_files(&self) -> Vec<String> {
        let maps = fs::read_to_string(format!("/proc/{}/maps", self.pid)).unwrap_or_default();
        let mut files: Vec<String> = maps
            .lines()
            .filter_map(|line| line.splitn(6, ' ').nth(5).map(str::trim))
            .filter(|path| path.starts_with('/') && !path.ends_with("(deleted)"))
            .map(str::to_owned)
            .collect();
        files.dedup();
        files
    }

    /// Whether the JVM catches SIGQUIT (`SigCgt`): one started with `-Xrs`,
    /// or not yet past installing its handlers, would be ended by it.
    pub fn handles_sigquit(&self) -> bool {
        let status = fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap_or_default();
        let caught = status.lines().find_map(|l| l.strip_prefix("SigCgt:")).map(str::trim).unwrap_or("0");
        u64::from_str_radix(caught, 16).is_ok_and(|mask| mask & (1 << (libc::SIGQUIT - 1)) != 0)
    }

    pub fn is_alive(&self) -> bool {
        Path::new(&format!("/proc/{}", self.pid)).exists()
    }
}

/// Reads one process; `None` when it is gone or not a JVM (no `libjvm.so`
/// mapped, as far as we may see).
pub fn inspect(pid: u32) -> Option<Jvm> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<Vec<u32>> {
        let line = status.lines().find_map(|l| l.strip_prefix(name))?;
        Some(line.split_whitespace().filter_map(|n| n.parse().ok()).collect())
    };
    let (uids, gids) = (field("Uid:")?, field("Gid:")?);
    let ns_pid = field("NSpid:").and_then(|p| p.last().copied()).unwrap_or(pid);
    let mut jvm = Jvm { pid, ns_pid, uid: *uids.get(1)?, gid: *gids.get(1)?, main: String::new() };
    if !jvm.mapped_files().iter().any(|path| path.ends_with("/libjvm.so")) {
        return None;
    }
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<String> =
        cmdline.split(|&b| b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    jvm.main = main_of(&args)
        .unwrap_or_else(|| fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim().to_owned());
    Some(jvm)
}

/// Every JVM we can see, by pid, ourselves excepted.
pub fn list() -> Vec<Jvm> {
    let mut pids: Vec<u32> = fs::read_dir("/proc")
        .map(|dir| dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    pids.sort_unstable();
    pids.into_iter().filter(|&pid| pid != std::process::id()).filter_map(inspect).collect()
}

/// The JVM a command names: a pid, or a main class (its simple or full
/// name), jar or module that exactly one running JVM has.
pub fn find(target: &str) -> Result<Jvm, String> {
    if let Ok(pid) = target.parse::<u32>() {
        return inspect(pid).ok_or_else(|| format!("process {pid} is not a JVM we can see (gone, or another user's)"));
    }
    let matches: Vec<Jvm> = list().into_iter().filter(|jvm| names(&jvm.main, target)).collect();
    match matches.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(format!("no running JVM's main class, jar or module is '{target}' (jprofile list shows them)")),
        many => {
            let pids: Vec<String> = many.iter().map(|jvm| format!("{} {}", jvm.pid, jvm.main)).collect();
            Err(format!("'{target}' names {} JVMs; give a pid: {}", many.len(), pids.join(", ")))
        }
    }
}

/// Whether a JVM's main (`org.example.Main`, `/opt/app.jar`,
/// `mod/org.example.Main`) is what `name` says: whole, by simple class
/// name, or by jar file name.
fn names(main: &str, name: &str) -> bool {
    let simple = main.rsplit(['.', '/']).next().unwrap_or(main);
    let file = main.rsplit('/').next().unwrap_or(main);
    main == name || file == name || (!main.ends_with(".jar") && simple == name)
}

/// Options of the `java` command that take the next argument as value.
const OPTIONS_WITH_VALUE: &[&str] = &[
    "-cp",
    "-classpath",
    "--class-path",
    "-p",
    "--module-path",
    "--upgrade-module-path",
    "--add-modules",
    "--add-opens",
    "--add-exports",
    "--add-reads",
    "--patch-module",
    "--limit-modules",
    "--enable-native-access",
];

/// The main class, jar or module of a `java` command line.
fn main_of(args: &[String]) -> Option<String> {
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "-jar" | "-m" | "--module" => return rest.next().cloned(),
            option if OPTIONS_WITH_VALUE.contains(&option) => {
                rest.next();
            }
            option if option.starts_with('-') || option.starts_with('@') => {}
            main => return Some(main.to_owned()),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn the_main_class_is_the_first_argument_that_is_no_option() {
        assert_eq!(main_of(&args("java -Xmx1g -cp a.jar:b org.example.Main x")).as_deref(), Some("org.example.Main"));
        assert_eq!(main_of(&args("java -Dx=1 -jar /opt/app.jar serve")).as_deref(), Some("/opt/app.jar"));
        assert_eq!(main_of(&args("java --module-path m -m app/org.App")).as_deref(), Some("app/org.App"));
        assert_eq!(main_of(&args("java @argfile -version")), None);
    }

    #[test]
    fn a_jvm_is_named_by_its_class_its_simple_name_or_its_jar() {
        assert!(names("org.example.Main", "org.example.Main"));
        assert!(names("org.example.Main", "Main"));
        assert!(names("/opt/app.jar", "app.jar"));
        assert!(names("app/org.App", "App"));
        assert!(!names("/opt/app.jar", "jar"));
        assert!(!names("org.example.Main", "example"));
    }
}
