//! Errors of the syscall layer, each naming what it was acting on.

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The operation needs root or CAP_NET_ADMIN / CAP_NET_RAW.
    #[error("{op}: permission denied (needs root or CAP_NET_ADMIN/CAP_NET_RAW): {source}")]
    Privilege { op: String, source: io::Error },
    /// The kernel lacks a feature (module, sysctl, option).
    #[error("{op}: not supported by this kernel: {source}")]
    Unsupported { op: String, source: io::Error },
    #[error("interface {name:?} not found")]
    NoInterface { name: String },
    #[error("network namespace {name:?} not found (looked in /run/netns)")]
    NoNamespace { name: String },
    #[error("{op}: {source}")]
    Io { op: String, source: io::Error },
    #[error("{op}: {msg}")]
    Other { op: String, msg: String },
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Classifies an OS error for operation `op`.
    pub fn os(op: impl Into<String>, source: io::Error) -> Error {
        let op = op.into();
        match source.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => Error::Privilege { op, source },
            Some(libc::ENOPROTOOPT)
            | Some(libc::EOPNOTSUPP)
            | Some(libc::EAFNOSUPPORT)
            | Some(libc::EPROTONOSUPPORT) => Error::Unsupported { op, source },
            _ => Error::Io { op, source },
        }
    }
    /// The last OS error (errno) for operation `op`.
    pub fn last(op: impl Into<String>) -> Error {
        Error::os(op, io::Error::last_os_error())
    }
    pub fn is_privilege(&self) -> bool {
        matches!(self, Error::Privilege { .. })
    }
}
