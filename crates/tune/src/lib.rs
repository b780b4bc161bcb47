//! tcpaccel-tune: the tuning doctor and the connection tracer.
//!
//! The doctor gathers facts about a host or namespace ([`gather`]), judges
//! them with a pure function ([`judge`]) against the path's bandwidth-delay
//! product, and can apply and revert the automatic fixes ([`apply`]). The
//! tracer ([`trace`]) samples `tcp_info` of matching sockets through
//! sock_diag on an absolute tick schedule.
//!
//! Not here: command-line parsing and exit codes (the `tcpaccel` binary),
//! netlink encoding and `unsafe` (`tcpaccel-sys`).
#![forbid(unsafe_code)]

pub mod apply;
pub mod facts;
pub mod gather;
pub mod judge;
pub mod report;
pub mod trace;
