//! Errors of the topology builder, each naming the command, namespace, node or
//! link involved. Spec errors have their own type ([`crate::SpecError`]).

use crate::spec::SpecError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// A helper program (`ip`, `tc`, `kill`) failed or could not be started.
    #[error(transparent)]
    Command(#[from] tcpaccel_sys::command::CommandError),
    /// A call into the syscall layer (setns, ethtool) failed.
    #[error("{op}: {source}")]
    Sys { op: String, source: tcpaccel_sys::Error },
    #[error("link {link:?}: cannot start the emulator: {msg}")]
    Emulator { link: String, msg: String },
    #[error("no node {0:?} in this network")]
    UnknownNode(String),
    #[error("no link {0:?} in this network")]
    UnknownLink(String),
    #[error("{op}: {source}")]
    Io { op: String, source: std::io::Error },
    #[error(transparent)]
    Sysctl(#[from] tcpaccel_sys::sysctl::SysctlError),
    /// A run's state file is missing, ambiguous or unreadable.
    #[error("{0}")]
    State(String),
}

impl Error {
    pub(crate) fn sys(op: impl Into<String>, source: tcpaccel_sys::Error) -> Error {
        Error::Sys { op: op.into(), source }
    }
    pub(crate) fn io(op: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io { op: op.into(), source }
    }
    /// True when the cause is missing privilege (not root / no CAP_NET_ADMIN).
    pub fn is_privilege(&self) -> bool {
        match self {
            Error::Sys { source, .. } => source.is_privilege(),
            Error::Command(e) => e.is_privilege(),
            Error::Sysctl(e) => matches!(e, tcpaccel_sys::sysctl::SysctlError::Privilege { .. }),
            Error::Io { source, .. } => source.kind() == std::io::ErrorKind::PermissionDenied,
            _ => false,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
