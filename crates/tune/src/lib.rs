//! tcpaccel-tune: the tuning doctor and the connection tracer.
//!
//! The doctor collects facts about a host or namespace ([`collect`]), judges
//! them with a pure function ([`judge`]) against the path's bandwidth-delay
//! product, and can apply and revert the automatic fixes ([`apply`]). The
//! tracer ([`trace`]) samples `tcp_info` of matching sockets through
//! sock_diag on an absolute tick schedule.
//!
//! Not here: command-line parsing and exit codes (the `tcpaccel` binary),
//! netlink encoding and `unsafe` (`tcpaccel-sys`).
#![forbid(unsafe_code)]

pub mod apply;
pub mod collect;
pub mod compare;
pub mod facts;
pub mod fasterdata;
pub mod judge;
pub mod remote;
pub mod report;
pub mod trace;

/// Collects and judges in one call: the facts of `netns` (or the calling
/// thread's namespace) for `path`, and the findings. The lab's `tuning`
/// scenario and the CLI use this; `apply::plan(&findings)` and
/// `apply::apply` then make the automatic fixes.
pub fn examine(
    netns: Option<&str>,
    path: facts::PathSpec,
    probe: &collect::Probe,
) -> Result<(facts::Facts, Vec<judge::Finding>), collect::CollectError> {
    let facts = collect::collect(netns, path, probe)?;
    let findings = judge::judge(&facts);
    Ok((facts, findings))
}
