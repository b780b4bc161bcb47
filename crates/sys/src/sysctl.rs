//! Sysctls: the one reader and writer of `/proc/sys` in tcpaccel.
//!
//! `/proc/sys/net/...` answers for the network namespace of the *thread*
//! that opens the file, so [`read`] and [`write`] act in the calling
//! thread's namespace and [`read_in`] / [`write_in`] / [`exists_in`] in a
//! named one (on a short-lived thread, [`crate::netns::run_in`]). Keys are
//! written the `sysctl(8)` way (`net.ipv4.tcp_rmem`) and only
//! `[a-z0-9_-]` with single dots between them is accepted, so a key read
//! from a file cannot point outside `/proc/sys`.
//!
//! Errors name the key (and the namespace) and keep the OS error, so a
//! caller can tell a key this kernel or namespace does not have
//! ([`SysctlError::Missing`]) from a refused write
//! ([`SysctlError::Privilege`]).

use std::io;
use std::path::PathBuf;

/// Why a sysctl could not be read or written. (The OS error is named
/// `err`, not `source`, so that a chain printer shows its text once.)
#[derive(Debug, thiserror::Error)]
pub enum SysctlError {
    #[error("invalid sysctl name {key:?} (expected words of a-z, 0-9, '_' or '-' joined by single dots)")]
    InvalidKey { key: String },
    #[error("no such sysctl {key}{} (not in this kernel, or a host-only setting seen from a network namespace)", at(.ns))]
    Missing { key: String, ns: Option<String> },
    #[error("{op} sysctl {key}{}: permission denied (needs root, and outside the initial namespace some keys are read-only): {err}", at(.ns))]
    Privilege { op: &'static str, key: String, ns: Option<String>, err: io::Error },
    #[error("{op} sysctl {key}{}: {err}", at(.ns))]
    Io { op: &'static str, key: String, ns: Option<String>, err: io::Error },
    #[error("sysctl {key}: entering network namespace {ns:?}: {err}")]
    Namespace { key: String, ns: String, err: crate::Error },
}

fn at(ns: &Option<String>) -> String {
    ns.as_ref().map_or_else(String::new, |n| format!(" in network namespace {n}"))
}

impl SysctlError {
    /// The key does not exist here (a kernel without the feature, or a
    /// host-global key seen from a network namespace).
    pub fn is_missing(&self) -> bool {
        matches!(self, SysctlError::Missing { .. })
    }

    /// The OS error behind a failed read or write, if there is one.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            SysctlError::Privilege { err, .. } | SysctlError::Io { err, .. } => Some(err.kind()),
            _ => None,
        }
    }

    fn with_ns(self, name: &str) -> SysctlError {
        let ns = Some(name.to_string());
        match self {
            SysctlError::Missing { key, .. } => SysctlError::Missing { key, ns },
            SysctlError::Privilege { op, key, err, .. } => SysctlError::Privilege { op, key, ns, err },
            SysctlError::Io { op, key, err, .. } => SysctlError::Io { op, key, ns, err },
            e => e,
        }
    }
}

/// The file of sysctl `key` under `/proc/sys`, or [`SysctlError::InvalidKey`].
pub fn path(key: &str) -> Result<PathBuf, SysctlError> {
    let ok = !key.is_empty()
        && key.split('.').all(|w| {
            !w.is_empty()
                && w.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        });
    if !ok {
        return Err(SysctlError::InvalidKey { key: key.to_string() });
    }
    Ok(PathBuf::from(format!("/proc/sys/{}", key.replace('.', "/"))))
}

fn classify(op: &'static str, key: &str, err: io::Error) -> SysctlError {
    let key = key.to_string();
    match err.kind() {
        io::ErrorKind::NotFound => SysctlError::Missing { key, ns: None },
        io::ErrorKind::PermissionDenied => SysctlError::Privilege { op, key, ns: None, err },
        _ => SysctlError::Io { op, key, ns: None, err },
    }
}

/// The value of `key` in the calling thread's namespace, with surrounding
/// whitespace trimmed (multi-value keys keep their inner tabs/spaces).
pub fn read(key: &str) -> Result<String, SysctlError> {
    let p = path(key)?;
    std::fs::read_to_string(&p).map(|s| s.trim().to_string()).map_err(|e| classify("read", key, e))
}

/// [`read`], with `None` for a key that does not exist here.
pub fn read_opt(key: &str) -> Result<Option<String>, SysctlError> {
    match read(key) {
        Ok(v) => Ok(Some(v)),
        Err(SysctlError::Missing { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The whitespace-separated words of `key` (e.g. the algorithms of
/// `net.ipv4.tcp_available_congestion_control`).
pub fn read_words(key: &str) -> Result<Vec<String>, SysctlError> {
    Ok(read(key)?.split_whitespace().map(String::from).collect())
}

/// True when `key` exists in the calling thread's namespace.
pub fn exists(key: &str) -> bool {
    path(key).is_ok_and(|p| p.exists())
}

/// True when `key` exists here and its mode allows writing (root may still
/// lack CAP_NET_ADMIN; that is found out when writing).
pub fn writable(key: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path(key)
        .ok()
        .and_then(|p| std::fs::metadata(p).ok())
        .is_some_and(|m| m.permissions().mode() & 0o222 != 0)
}

/// A sysctl opened for writing: opening checks the name and the
/// permission, so a caller can open every key it will change before
/// changing any (the doctor's `--apply`).
#[derive(Debug)]
pub struct Writer {
    key: String,
    file: std::fs::File,
}

/// Opens `key` of the calling thread's namespace for writing.
pub fn open_write(key: &str) -> Result<Writer, SysctlError> {
    let p = path(key)?;
    let file = std::fs::OpenOptions::new().write(true).open(&p).map_err(|e| classify("write", key, e))?;
    Ok(Writer { key: key.to_string(), file })
}

impl Writer {
    /// Writes `value` (one write, as `sysctl -w` does; a newline is added).
    pub fn set(mut self, value: &str) -> Result<(), SysctlError> {
        use std::io::Write;
        self.file.write_all(format!("{value}\n").as_bytes()).map_err(|e| classify("write", &self.key, e))
    }
}

/// Sets `key` to `value` in the calling thread's namespace.
pub fn write(key: &str, value: &str) -> Result<(), SysctlError> {
    open_write(key)?.set(value)
}

fn in_ns<R: Send + 'static>(
    ns: &str,
    key: &str,
    f: impl FnOnce() -> Result<R, SysctlError> + Send + 'static,
) -> Result<R, SysctlError> {
    // Validate here so a bad key is not reported as a namespace problem.
    path(key)?;
    crate::netns::run_in(ns, f)
        .map_err(|err| SysctlError::Namespace { key: key.to_string(), ns: ns.to_string(), err })?
        .map_err(|e| e.with_ns(ns))
}

/// [`read`] inside network namespace `ns` (a name under /run/netns).
pub fn read_in(ns: &str, key: &str) -> Result<String, SysctlError> {
    let k = key.to_string();
    in_ns(ns, key, move || read(&k))
}

/// [`write`] inside network namespace `ns`.
pub fn write_in(ns: &str, key: &str, value: &str) -> Result<(), SysctlError> {
    let (k, v) = (key.to_string(), value.to_string());
    in_ns(ns, key, move || write(&k, &v))
}

/// [`exists`] inside network namespace `ns`.
pub fn exists_in(ns: &str, key: &str) -> Result<bool, SysctlError> {
    let k = key.to_string();
    in_ns(ns, key, move || Ok(exists(&k)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_stay_under_proc_sys() {
        assert_eq!(path("net.ipv4.tcp_rmem").unwrap(), PathBuf::from("/proc/sys/net/ipv4/tcp_rmem"));
        assert_eq!(
            path("net.ipv4.conf.veth-a.forwarding").unwrap().to_str(),
            Some("/proc/sys/net/ipv4/conf/veth-a/forwarding")
        );
        for bad in ["", ".", "net..ipv4", ".net", "net.", "net/../../etc", "../etc", "Net.ipv4", "a b"] {
            let e = path(bad).unwrap_err();
            assert!(matches!(&e, SysctlError::InvalidKey { key } if key == bad), "{bad:?}: {e}");
            assert!(matches!(read(bad), Err(SysctlError::InvalidKey { .. })));
            assert!(!exists(bad));
        }
    }

    #[test]
    fn a_missing_key_is_named_and_typed() {
        let e = read("net.ipv4.no_such_sysctl_here").unwrap_err();
        assert!(e.is_missing(), "{e}");
        assert!(e.to_string().contains("net.ipv4.no_such_sysctl_here"), "{e}");
        assert_eq!(read_opt("net.ipv4.no_such_sysctl_here").unwrap(), None);
        let e = write("net.ipv4.no_such_sysctl_here", "1").unwrap_err();
        assert!(e.is_missing(), "{e}");
    }

    #[test]
    fn reads_a_key_every_kernel_has() {
        let v = read("kernel.osrelease").unwrap();
        assert!(!v.is_empty() && !v.ends_with('\n'), "{v:?}");
        assert!(exists("kernel.osrelease"));
        assert!(!writable("kernel.osrelease"));
    }

    #[test]
    fn a_missing_namespace_is_named() {
        let e = read_in("tcpaccel-definitely-missing-ns", "net.core.somaxconn").unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, SysctlError::Namespace { .. }), "{text}");
        assert!(
            text.contains("net.core.somaxconn") && text.contains("tcpaccel-definitely-missing-ns"),
            "{text}"
        );
    }

    /// Root only: a value written in a fresh namespace is read back there
    /// and is not the host's; the error of a missing key names the namespace.
    #[test]
    fn root_read_and_write_in_a_namespace() {
        crate::testing::require_root();
        let t = crate::testing::TestNetns::one("sysctl");
        let ns = t.name();
        let host = read("net.ipv4.tcp_ecn").unwrap();
        let other = if host == "1" { "2" } else { "1" };
        write_in(ns, "net.ipv4.tcp_ecn", other).unwrap();
        assert_eq!(read_in(ns, "net.ipv4.tcp_ecn").unwrap(), other);
        assert_eq!(read("net.ipv4.tcp_ecn").unwrap(), host, "the host's value is untouched");
        assert!(exists_in(ns, "net.ipv4.tcp_ecn").unwrap());
        let e = read_in(ns, "net.ipv4.no_such_sysctl_here").unwrap_err();
        assert!(e.is_missing() && e.to_string().contains(ns), "{e}");
    }
}
