//! Errors of the cgroup pacer, each naming what it acted on. The CLI maps
//! them to exit codes with [`PacerError::class`].

use std::path::PathBuf;

use crate::rules::RuleError;

#[derive(Debug, thiserror::Error)]
pub enum PacerError {
    #[error(transparent)]
    Rule(#[from] RuleError),
    #[error("no cgroup2 hierarchy is mounted here (no type cgroup2 in /proc/self/mounts), and mounting it privately failed: {why}")]
    NoCgroup2 { why: String },
    #[error("cgroup {path}: {reason}")]
    NoCgroup { path: PathBuf, reason: String },
    #[error("cgroup {path} already has tcpaccel pacing attached (pins in {pins}); `tcpaccel pace detach --cgroup {path}` first")]
    AlreadyAttached { path: PathBuf, pins: PathBuf },
    #[error("no tcpaccel pacing attached to cgroup {0}")]
    NotAttached(PathBuf),
    #[error("{op}: {source}")]
    Io { op: String, source: std::io::Error },
    /// The program's object does not parse (a bug of the build, not of
    /// the machine).
    #[error("the pacer's BPF object: {0}")]
    Object(#[from] tcpaccel_sys::bpf::ObjError),
    #[error(transparent)]
    Sys(#[from] tcpaccel_sys::Error),
}

/// What kind of failure, for the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Usage,
    Privilege,
    Feature,
    Runtime,
}

impl PacerError {
    pub fn class(&self) -> Class {
        match self {
            PacerError::Rule(_)
            | PacerError::NoCgroup { .. }
            | PacerError::AlreadyAttached { .. }
            | PacerError::NotAttached(_) => Class::Usage,
            PacerError::NoCgroup2 { .. } => Class::Feature,
            PacerError::Io { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied => {
                Class::Privilege
            }
            PacerError::Io { .. } | PacerError::Object(_) => Class::Runtime,
            PacerError::Sys(e) if e.is_privilege() => Class::Privilege,
            PacerError::Sys(tcpaccel_sys::Error::Unsupported { .. }) => Class::Feature,
            PacerError::Sys(_) => Class::Runtime,
        }
    }
}
