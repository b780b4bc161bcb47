//! cgroup v2: find its mount, name a cgroup by path or id, create a
//! throwaway one and move processes in (used by the pacer and the lanes
//! daemon to attach their BPF programs).
//!
//! The cgroup2 hierarchy is found in the mount table, never assumed at
//! `/sys/fs/cgroup`: on hosts that still mount the v1 controllers it is the
//! `unified` mount beside them (`/sys/fs/cgroup/unified`).
//!
//! When this mount namespace shows no cgroup2 mount although the kernel has
//! the hierarchy — `ip netns exec` (and so `tcpaccel net exec`) runs its
//! command in a new mount namespace with a fresh /sys, which hides the
//! host's — the hierarchy is mounted privately: `fsopen`/`fsmount` give a
//! mount that is attached nowhere, seen by no one else and gone when this
//! process exits, reached through its descriptor (`/proc/self/fd/N`). It
//! is the same single cgroup2 hierarchy, so cgroups created there are the
//! host's cgroups. [`Cgroup::shown`] names them by their path in the
//! hierarchy (`/tcpaccel/run-42`, as `/proc/PID/cgroup` does), and
//! [`Cgroup::open`] accepts that form, or a host path under
//! `/sys/fs/cgroup`, back.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Why a cgroup could not be found or used. (The OS error is named `err`,
/// not `source`, so that a chain printer shows its text once.)
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("no cgroup2 hierarchy is mounted here (no type cgroup2 in /proc/self/mounts), and mounting it privately failed: {why}")]
    NoCgroup2 { why: String },
    #[error("cgroup {path}: {reason}")]
    NoCgroup { path: PathBuf, reason: String },
    #[error("{op}: {err}")]
    Io { op: String, err: std::io::Error },
}

/// The first cgroup2 mount point in `mounts` (the text of /proc/self/mounts).
pub fn cgroup2_mount_in(mounts: &str) -> Option<PathBuf> {
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 2 && f[2] == "cgroup2").then(|| PathBuf::from(unescape(f[1])))
    })
}

/// Octal escapes of the mount table (`\040` for a space).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where this process reaches the cgroup2 hierarchy: its mount point in
/// this mount namespace, or else a private mount (see the module docs).
pub fn cgroup2_mount() -> Result<PathBuf, CgroupError> {
    let mounts = fs::read_to_string("/proc/self/mounts")
        .map_err(|e| CgroupError::Io { op: "read /proc/self/mounts".into(), err: e })?;
    match cgroup2_mount_in(&mounts) {
        Some(p) => Ok(p),
        None => private_mount().map(Path::to_path_buf).map_err(|why| CgroupError::NoCgroup2 { why }),
    }
}

static PRIVATE: std::sync::OnceLock<Result<(OwnedFd, PathBuf), String>> = std::sync::OnceLock::new();

/// The private mount of the hierarchy, made once per process and kept
/// (its descriptor) until the process exits.
fn private_mount() -> Result<&'static Path, String> {
    match PRIVATE.get_or_init(fsmount_cgroup2) {
        Ok((_, p)) => Ok(p.as_path()),
        Err(why) => Err(why.clone()),
    }
}

/// True when this process reaches the hierarchy through its own private
/// mount (this mount namespace shows none: `ip netns exec`, `net exec`).
pub fn hierarchy_is_private() -> bool {
    matches!(PRIVATE.get(), Some(Ok(_)))
}

/// True when `path` is reached through the private mount.
fn is_private(path: &Path) -> bool {
    path.starts_with("/proc/self/fd")
}

/// A detached mount of cgroup2 (fsopen, fsconfig CREATE, fsmount: Linux
/// 5.2, CAP_SYS_ADMIN), reached as `/proc/self/fd/N`.
fn fsmount_cgroup2() -> Result<(OwnedFd, PathBuf), String> {
    const FSOPEN_CLOEXEC: libc::c_uint = 1;
    const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
    const FSMOUNT_CLOEXEC: libc::c_uint = 1;
    let name = c"cgroup2";
    // SAFETY: fsopen reads the NUL-terminated name, which outlives the call.
    let fs = unsafe { libc::syscall(libc::SYS_fsopen, name.as_ptr(), FSOPEN_CLOEXEC) };
    if fs < 0 {
        return Err(format!("fsopen(cgroup2): {}", std::io::Error::last_os_error()));
    }
    // SAFETY: a fresh descriptor from the kernel, owned from here on.
    let fs = unsafe { OwnedFd::from_raw_fd(fs as libc::c_int) };
    // SAFETY: FSCONFIG_CMD_CREATE takes no key, value or aux (null, null, 0).
    let r = unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0 as libc::c_int,
        )
    };
    if r < 0 {
        return Err(format!("fsconfig(cgroup2, create): {}", std::io::Error::last_os_error()));
    }
    // SAFETY: fsmount takes the filesystem context fd and two flag words.
    let m = unsafe { libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), FSMOUNT_CLOEXEC, 0 as libc::c_uint) };
    if m < 0 {
        return Err(format!("fsmount(cgroup2): {}", std::io::Error::last_os_error()));
    }
    // SAFETY: a fresh descriptor from the kernel, owned from here on.
    let m = unsafe { OwnedFd::from_raw_fd(m as libc::c_int) };
    let path = PathBuf::from(format!("/proc/self/fd/{}", m.as_raw_fd()));
    tracing::debug!("no cgroup2 mount in this mount namespace; mounted it privately at {}", path.display());
    Ok((m, path))
}

/// `path` without `.` components, `None` if it has a `..` (a private mount's
/// paths cannot be canonicalized: the kernel names the mount `/`).
fn lexical(path: &Path) -> Option<PathBuf> {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => return None,
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    Some(out)
}

/// A cgroup v2 directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    pub path: PathBuf,
    /// The kernel's cgroup id: the directory's inode number.
    pub id: u64,
}

impl Cgroup {
    /// A cgroup by path: absolute, or relative to the cgroup2 mount. Where
    /// the hierarchy is mounted privately (see the module docs) an absolute
    /// path is its path in the hierarchy (`/tcpaccel/x`, as [`Cgroup::shown`]
    /// prints it) or a host path under `/sys/fs/cgroup[/unified]`.
    pub fn open(path: &Path) -> Result<Cgroup, CgroupError> {
        let mount = cgroup2_mount()?;
        let full = if is_private(&mount) {
            let rel = |p: &Path| mount.join(p.strip_prefix("/").unwrap_or(p));
            let candidates: Vec<PathBuf> = if path.starts_with(&mount) || !path.is_absolute() {
                vec![if path.is_absolute() { path.to_path_buf() } else { mount.join(path) }]
            } else {
                std::iter::once(rel(path))
                    .chain(
                        ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
                            .iter()
                            .filter_map(|pre| path.strip_prefix(pre).ok().map(rel)),
                    )
                    .collect()
            };
            let first = candidates[0].clone();
            let found = candidates.into_iter().find(|c| c.join("cgroup.procs").exists()).unwrap_or(first);
            lexical(&found).ok_or_else(|| CgroupError::NoCgroup {
                path: path.to_path_buf(),
                reason:
                    "a path with `..` cannot be resolved where the cgroup2 hierarchy is mounted privately"
                        .into(),
            })?
        } else {
            let full = if path.is_absolute() { path.to_path_buf() } else { mount.join(path) };
            fs::canonicalize(&full)
                .map_err(|e| CgroupError::NoCgroup { path: full.clone(), reason: e.to_string() })?
        };
        if !full.starts_with(&mount) || !full.join("cgroup.procs").exists() {
            let reason = if is_private(&mount) {
                "no such cgroup in the cgroup2 hierarchy (mounted privately: this mount namespace shows none)"
                    .to_string()
            } else {
                format!("not a cgroup of the cgroup2 mount at {}", mount.display())
            };
            return Err(CgroupError::NoCgroup { path: Cgroup::shown_path(&full), reason });
        }
        let id = fs::metadata(&full)
            .map_err(|e| CgroupError::NoCgroup { path: full.clone(), reason: e.to_string() })?
            .ino();
        Ok(Cgroup { path: full, id })
    }

    /// The path to show a user: [`Cgroup::path`], or where the hierarchy
    /// is mounted privately its path in the hierarchy (`/tcpaccel/run-42`),
    /// which [`Cgroup::open`] accepts back.
    pub fn shown(&self) -> PathBuf {
        Cgroup::shown_path(&self.path)
    }

    fn shown_path(path: &Path) -> PathBuf {
        match PRIVATE.get() {
            Some(Ok((_, m))) if path.starts_with(m) => {
                Path::new("/").join(path.strip_prefix(m).unwrap_or(path))
            }
            _ => path.to_path_buf(),
        }
    }

    /// The directory, open for `BPF_LINK_CREATE`.
    pub fn dir(&self) -> Result<File, CgroupError> {
        File::open(&self.path)
            .map_err(|e| CgroupError::Io { op: format!("open cgroup {}", self.path.display()), err: e })
    }

    /// `cgroup.procs`, open for writing a pid into.
    pub fn procs(&self) -> Result<File, CgroupError> {
        let p = self.path.join("cgroup.procs");
        OpenOptions::new()
            .write(true)
            .open(&p)
            .map_err(|e| CgroupError::Io { op: format!("open {}", p.display()), err: e })
    }

    /// Moves process `pid` into the cgroup.
    pub fn add_pid(&self, pid: u32) -> Result<(), CgroupError> {
        self.procs()?.write_all(pid.to_string().as_bytes()).map_err(|e| CgroupError::Io {
            op: format!("move pid {pid} into {}", self.path.display()),
            err: e,
        })
    }

    /// The pids in the cgroup now.
    pub fn pids(&self) -> Vec<u32> {
        fs::read_to_string(self.path.join("cgroup.procs"))
            .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    /// Finds the cgroup with id `id` under the cgroup2 mount (a walk of the tree).
    pub fn by_id(id: u64) -> Option<Cgroup> {
        let mount = cgroup2_mount().ok()?;
        let mut stack = vec![mount];
        while let Some(dir) = stack.pop() {
            if fs::metadata(&dir).ok()?.ino() == id {
                return Some(Cgroup { path: dir, id });
            }
            if let Ok(rd) = fs::read_dir(&dir) {
                for e in rd.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        stack.push(e.path());
                    }
                }
            }
        }
        None
    }
}

/// A cgroup this process created (`<cgroup2>/tcpaccel/<name>`), removed on
/// drop once empty: the processes left in it are moved to the parent first.
#[derive(Debug)]
pub struct TempCgroup {
    pub cgroup: Cgroup,
}

impl TempCgroup {
    pub fn create(name: &str) -> Result<TempCgroup, CgroupError> {
        let parent = cgroup2_mount()?.join("tcpaccel");
        let path = parent.join(name);
        fs::create_dir_all(&path)
            .map_err(|e| CgroupError::Io { op: format!("create cgroup {}", path.display()), err: e })?;
        let cgroup = Cgroup::open(&path)?;
        Ok(TempCgroup { cgroup })
    }
}

impl Drop for TempCgroup {
    fn drop(&mut self) {
        let parent = self.cgroup.path.parent().map(Path::to_path_buf);
        for pid in self.cgroup.pids() {
            if let Some(p) = &parent {
                let _ = fs::write(p.join("cgroup.procs"), pid.to_string());
            }
        }
        if let Err(e) = fs::remove_dir(&self.cgroup.path) {
            tracing::warn!("could not remove cgroup {}: {e}", self.cgroup.shown().display());
        }
        if let Some(p) = parent {
            let _ = fs::remove_dir(p); // only if no other tcpaccel cgroup is left
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup2_is_found_beside_v1_controllers() {
        let mounts = "sysfs /sys sysfs rw 0 0\n\
            tmpfs /sys/fs/cgroup tmpfs ro 0 0\n\
            cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n\
            cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n";
        assert_eq!(cgroup2_mount_in(mounts), Some(PathBuf::from("/sys/fs/cgroup/unified")));
        assert_eq!(cgroup2_mount_in("cgroup2 /a\\040b cgroup2 rw 0 0\n"), Some(PathBuf::from("/a b")));
        assert_eq!(cgroup2_mount_in("cgroup /sys/fs/cgroup/cpu cgroup rw 0 0\n"), None);
    }
}
