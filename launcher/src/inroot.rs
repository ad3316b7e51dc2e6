//! Files in a JVM's directories, reached as the JVM itself reaches them:
//! a directory is opened by openat2(2) with `RESOLVE_IN_ROOT` from a
//! descriptor of `/proc/<pid>/root` (or is the JVM's working directory),
//! and every file in it by name only, never following a symlink. A link
//! planted in a container (its `/tmp` pointing at `/etc`, an
//! `.attach_pid` pointing at `/etc/shadow`) so stays inside the container
//! and cannot lead jprofile, perhaps root, to the host's files.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;

/// An open directory of the JVM's.
pub struct Dir {
    fd: OwnedFd,
}

fn c_string(text: &str) -> io::Result<CString> {
    CString::new(text).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))
}

fn check(result: libc::c_int) -> io::Result<libc::c_int> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

impl Dir {
    /// `path` (absolute, as the JVM names it) under the JVM's root.
    pub fn in_root(pid: u32, path: &str) -> io::Result<Self> {
        let root = Self::open_path(&format!("/proc/{pid}/root"))?;
        let relative = c_string(path.trim_start_matches('/'))?;
        let relative = if relative.as_bytes().is_empty() { c_string(".")? } else { relative };
        // SAFETY: `open_how` is plain data; zeroed, then the fields set.
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64;
        how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
        // SAFETY: openat2 with a live directory descriptor, a NUL-terminated
        // path and an `open_how` of the size passed.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                root.fd.as_raw_fd(),
                relative.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        Self::owned(check(fd as libc::c_int)?)
    }

    /// The JVM's working directory.
    pub fn cwd(pid: u32) -> io::Result<Self> {
        Self::open_path(&format!("/proc/{pid}/cwd"))
    }

    fn open_path(path: &str) -> io::Result<Self> {
        let path = c_string(path)?;
        // SAFETY: open(2) with a NUL-terminated path.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        Self::owned(check(fd)?)
    }

    fn owned(fd: libc::c_int) -> io::Result<Self> {
        // SAFETY: a descriptor just opened, owned by nobody else.
        Ok(Self { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    pub fn try_clone(&self) -> io::Result<Dir> {
        Ok(Self { fd: self.fd.try_clone()? })
    }

    /// A path naming `name` in this directory through our descriptor
    /// (for connect(2), which takes no directory descriptor).
    pub fn path_of(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}/{name}", self.fd.as_raw_fd()))
    }

    fn openat(&self, name: &str, flags: libc::c_int, mode: libc::mode_t) -> io::Result<File> {
        let name = c_string(name)?;
        let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: openat(2) with a live directory descriptor and a
        // NUL-terminated name.
        let fd = check(unsafe { libc::openat(self.fd.as_raw_fd(), name.as_ptr(), flags, mode as libc::c_uint) })?;
        // SAFETY: a descriptor just opened, owned by nobody else.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// A new file (never an existing one, nor a link).
    pub fn create_new(&self, name: &str, mode: libc::mode_t) -> io::Result<File> {
        self.openat(name, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, mode)
    }

    /// A file's bytes (not through a link).
    pub fn read(&self, name: &str) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.openat(name, libc::O_RDONLY, 0)?.read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    /// A subdirectory (not a link).
    pub fn subdir(&self, name: &str) -> io::Result<Dir> {
        let name = c_string(name)?;
        let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: as in `openat`.
        Self::owned(check(unsafe { libc::openat(self.fd.as_raw_fd(), name.as_ptr(), flags) })?)
    }

    pub fn mkdir(&self, name: &str, mode: libc::mode_t) -> io::Result<()> {
        let name = c_string(name)?;
        // SAFETY: mkdirat(2) with a live directory descriptor and a name.
        check(unsafe { libc::mkdirat(self.fd.as_raw_fd(), name.as_ptr(), mode) }).map(drop)
    }

    /// The file `name` itself (a link is not followed).
    pub fn stat(&self, name: &str) -> io::Result<libc::stat> {
        let name = c_string(name)?;
        // SAFETY: `stat` is plain data, filled by fstatat(2).
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstatat(2) with a live directory descriptor, a name and
        // an out struct.
        check(unsafe { libc::fstatat(self.fd.as_raw_fd(), name.as_ptr(), &mut stat, libc::AT_SYMLINK_NOFOLLOW) })?;
        Ok(stat)
    }

    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (from, to) = (c_string(from)?, c_string(to)?);
        let fd = self.fd.as_raw_fd();
        // SAFETY: renameat(2) within one live directory, NUL-terminated names.
        check(unsafe { libc::renameat(fd, from.as_ptr(), fd, to.as_ptr()) }).map(drop)
    }

    pub fn remove(&self, name: &str) -> io::Result<()> {
        let name = c_string(name)?;
        // SAFETY: unlinkat(2) with a live directory descriptor and a name.
        check(unsafe { libc::unlinkat(self.fd.as_raw_fd(), name.as_ptr(), 0) }).map(drop)
    }
}
