//! tcpaccel-traffic: the traffic tool (`send` / `recv`) with TCP_INFO reports.
//!
//! What it is: a blocking library the CLI and the lab call. [`run_send`]
//! drives parallel streams to a receiver and reports per interval;
//! [`spawn_recv`] serves many senders at once. Both create their sockets on
//! the calling thread, so a lab thread that entered a network namespace
//! gets sockets in that namespace. The connection header and receipt are
//! documented in [`proto`]; what `--pace static:RATE` means is documented
//! in [`pace`]; the burst mode and resume pacing in [`burst`].
//!
//! What it is not: no async runtime (plain threads, one per stream or
//! connection), no topology set-up, no output formatting beyond the report
//! types' text lines.
#![forbid(unsafe_code)]

use std::net::SocketAddr;

pub mod burst;
pub mod iperf3;
pub mod iperf3_client;
pub mod pace;
pub mod proto;
pub mod pump;
pub mod recv;
pub mod report;
pub mod send;

pub use burst::{run_bursts, BurstRecord, BurstSummary, Bursts};
pub use iperf3_client::run_iperf3_upload;
pub use pace::{DynamicMode, Framing, Pace, PaceControl, PaceError};
pub use recv::{spawn_recv, ConnReport, ConnStatus, Event, RecvConfig, RecvHandle, RecvSummary};
pub use report::{IntervalReport, Report, StreamSample};
pub use send::{run_send, SendConfig, SendSummary, StreamSummary, Volume};

/// Errors of the traffic tool, each naming the peer or setting involved.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A socket option or socket call failed (names the option).
    #[error(transparent)]
    Sys(#[from] tcpaccel_sys::Error),
    /// Display names the operation and address; the OS error is the
    /// `source` (printed by `{:#}` chains).
    #[error("{op} ({addr})")]
    Io { op: String, addr: SocketAddr, source: std::io::Error },
    /// The peer spoke, but not our protocol.
    #[error("{peer}: {msg}")]
    Protocol { peer: SocketAddr, msg: String },
    /// The receiver refused our header.
    #[error("{peer} refused the request: {why}")]
    Rejected { peer: SocketAddr, why: proto::Reject },
    /// An invalid setting (a usage error).
    #[error("{0}")]
    Config(String),
}

impl Error {
    pub(crate) fn io(op: impl Into<String>, addr: SocketAddr, source: std::io::Error) -> Error {
        Error::Io { op: op.into(), addr, source }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// A TCP (or MPTCP) socket for `addr`'s family with the buffer requests and
/// congestion control both ends take from their configuration; the sender
/// connects it, the receiver listens on it (accepted sockets inherit them).
pub(crate) fn socket(
    addr: &SocketAddr,
    mptcp: bool,
    sndbuf: Option<u64>,
    rcvbuf: Option<u64>,
    cc: Option<&str>,
) -> Result<std::os::fd::OwnedFd> {
    use tcpaccel_sys::sockopt::{self, Family};
    let family = Family::of(addr);
    let fd = if mptcp { sockopt::mptcp_socket(family)? } else { sockopt::tcp_socket(family)? };
    if let Some(b) = sndbuf {
        sockopt::set_send_buffer(&fd, b)?;
    }
    if let Some(b) = rcvbuf {
        sockopt::set_recv_buffer(&fd, b)?;
    }
    if let Some(cc) = cc {
        sockopt::set_congestion(&fd, cc)?;
    }
    Ok(fd)
}
