//! Errors of the syscall layer, each naming what it was acting on.
//!
//! The OS error is part of the message and is *not* also returned by
//! `source()`: a chain printer (`{:#}` of anyhow, or any walk over
//! `source()`) would otherwise print the errno text twice. Code that needs
//! the `io::Error` matches the variant's `source` field.

use std::fmt;
use std::io;

#[derive(Debug)]
pub enum Error {
    /// The operation needs root or CAP_NET_ADMIN / CAP_NET_RAW.
    Privilege {
        op: String,
        source: io::Error,
    },
    /// The kernel lacks a feature (module, sysctl, option).
    Unsupported {
        op: String,
        source: io::Error,
    },
    NoInterface {
        name: String,
    },
    NoNamespace {
        name: String,
    },
    Io {
        op: String,
        source: io::Error,
    },
    Other {
        op: String,
        msg: String,
    },
}

// Written by hand rather than with thiserror, which would make every field
// named `source` the error's source (see the module docs).
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Privilege { op, source } => {
                write!(f, "{op}: permission denied (needs root or CAP_NET_ADMIN/CAP_NET_RAW): {source}")
            }
            Error::Unsupported { op, source } => write!(f, "{op}: not supported by this kernel: {source}"),
            Error::NoInterface { name } => write!(f, "interface {name:?} not found"),
            Error::NoNamespace { name } => {
                write!(f, "network namespace {name:?} not found (looked in /run/netns)")
            }
            Error::Io { op, source } => write!(f, "{op}: {source}"),
            Error::Other { op, msg } => write!(f, "{op}: {msg}"),
        }
    }
}

/// No `source()`: the OS error is already in the message.
impl std::error::Error for Error {}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The errno text once in a chain (`{:#}`), and still there alone (`{}`).
    #[test]
    fn errno_text_is_printed_exactly_once() {
        for (errno, want) in [
            (libc::EPERM, "permission denied"),
            (libc::ENOPROTOOPT, "not supported"),
            (libc::ECONNREFUSED, "connect 10.0.0.1:80"),
        ] {
            let text = io::Error::from_raw_os_error(errno).to_string();
            let e = Error::os("connect 10.0.0.1:80", io::Error::from_raw_os_error(errno));
            let alone = format!("{e}");
            assert!(alone.contains(&text) && alone.contains(want), "{alone}");
            let chain = format!("{:#}", anyhow::Error::from(e));
            assert_eq!(chain.matches(&text).count(), 1, "{chain}");
            let wrapped = anyhow::Error::from(Error::os("op", io::Error::from_raw_os_error(errno)))
                .context("outer step");
            let chain = format!("{wrapped:#}");
            assert_eq!(chain.matches(&text).count(), 1, "{chain}");
            assert!(chain.starts_with("outer step: op: "), "{chain}");
        }
        assert!(std::error::Error::source(&Error::os("x", io::Error::from_raw_os_error(libc::EIO))).is_none());
    }
}
