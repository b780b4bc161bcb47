//! tcpaccel-pacer: in-kernel pacing for every program of a cgroup.
//!
//! A cgroup BPF sock_ops program (`bpf/pace.bpf.c`, committed compiled as
//! `bpf/pace.bpf.o` and embedded here, so building needs no clang; CI
//! rebuilds it with `scripts/build-bpf.sh --check` and fails if the bytes
//! differ) caps SO_MAX_PACING_RATE of each TCP connection of the cgroup when
//! it is established — statically, or per ACK with [PSPacer] eq. (1) — by
//! destination rules. Programs need no cooperation: static binaries, Go
//! programs and MPTCP subflows are paced alike, which the LD_PRELOAD shim
//! cannot do.
//!
//! What it is: rule parsing ([`rules`]), the map layouts ([`abi`]), cgroup
//! v2 handling ([`cgroup`]) and attach/status/detach ([`attach`]). What it
//! is not: the arithmetic (its pure twin is in `tcpaccel_core::pacing`,
//! `bpf_*`, tested exactly there) and the syscalls (`tcpaccel_sys::bpf`).

pub mod abi;
pub mod attach;
pub mod cgroup;
pub mod error;
pub mod join;
pub mod metrics;
pub mod precise;
pub mod rules;

pub use attach::{
    attach, detach_pinned, pinned_ids, socket_states, status, AttachStatus, Attachment, Released, Traffic,
};
pub use cgroup::{cgroup2_mount, Cgroup, TempCgroup};
pub use error::{Class, PacerError};
pub use join::Joined;
pub use precise::Precise;
pub use rules::{PaceConfig, RulePace};

/// The compiled BPF object (`bpf/pace.bpf.o`).
pub const PACE_OBJECT: &[u8] = include_bytes!("../bpf/pace.bpf.o");

/// Whether this host can run the cgroup pacer: root, a cgroup2 mount and
/// the bpf(2) syscall. `Err` says which is missing.
pub fn available() -> Result<(), PacerError> {
    if !tcpaccel_sys::privilege::is_root() {
        return Err(PacerError::Io {
            op: "the cgroup pacer (BPF, cgroups)".into(),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        });
    }
    cgroup2_mount()?;
    Ok(())
}

/// [`available`], and the program loads (the kernel has BPF, sock_ops and
/// the helpers it calls): what `tcpaccel run` checks before it picks the
/// cgroup path. Loads and unloads; attaches nothing.
pub fn probe() -> Result<(), PacerError> {
    available()?;
    let obj = tcpaccel_sys::bpf::Object::parse(PACE_OBJECT)?;
    drop(obj.load()?);
    Ok(())
}
