//! cgroup v2: find its mount, name a cgroup by path or id, create a
//! throwaway one and move processes in (used by the pacer and the lanes
//! daemon to attach their BPF programs).
//!
//! The cgroup2 hierarchy is found in the mount table, never assumed at
//! `/sys/fs/cgroup`: on hosts that still mount the v1 controllers it is the
//! `unified` mount beside them (`/sys/fs/cgroup/unified`).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Why a cgroup could not be found or used. (The OS error is named `err`,
/// not `source`, so that a chain printer shows its text once.)
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("no cgroup2 hierarchy is mounted (looked for type cgroup2 in /proc/self/mounts)")]
    NoCgroup2,
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

/// This host's cgroup2 mount point.
pub fn cgroup2_mount() -> Result<PathBuf, CgroupError> {
    let mounts = fs::read_to_string("/proc/self/mounts")
        .map_err(|e| CgroupError::Io { op: "read /proc/self/mounts".into(), err: e })?;
    cgroup2_mount_in(&mounts).ok_or(CgroupError::NoCgroup2)
}

/// A cgroup v2 directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    pub path: PathBuf,
    /// The kernel's cgroup id: the directory's inode number.
    pub id: u64,
}

impl Cgroup {
    /// A cgroup by path: absolute, or relative to the cgroup2 mount.
    pub fn open(path: &Path) -> Result<Cgroup, CgroupError> {
        let mount = cgroup2_mount()?;
        let full = if path.is_absolute() { path.to_path_buf() } else { mount.join(path) };
        let full = fs::canonicalize(&full)
            .map_err(|e| CgroupError::NoCgroup { path: full.clone(), reason: e.to_string() })?;
        if !full.starts_with(&mount) || !full.join("cgroup.procs").exists() {
            return Err(CgroupError::NoCgroup {
                path: full,
                reason: format!("not a cgroup of the cgroup2 mount at {}", mount.display()),
            });
        }
        let id = fs::metadata(&full)
            .map_err(|e| CgroupError::NoCgroup { path: full.clone(), reason: e.to_string() })?
            .ino();
        Ok(Cgroup { path: full, id })
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
            tracing::warn!("could not remove cgroup {}: {e}", self.cgroup.path.display());
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
