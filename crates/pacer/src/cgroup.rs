//! cgroup v2 handling: moved to `tcpaccel_sys::cgroup` (the lanes daemon
//! attaches its program with it too); re-exported here, its errors mapped
//! onto the pacer's.

pub use tcpaccel_sys::cgroup::{cgroup2_mount, cgroup2_mount_in, Cgroup, CgroupError, TempCgroup};

use crate::error::PacerError;

impl From<CgroupError> for PacerError {
    fn from(e: CgroupError) -> Self {
        match e {
            CgroupError::NoCgroup2 { why } => PacerError::NoCgroup2 { why },
            CgroupError::NoCgroup { path, reason } => PacerError::NoCgroup { path, reason },
            CgroupError::Io { op, err } => PacerError::Io { op, source: err },
        }
    }
}
