//! tcpaccel-lanes: the datacenter lanes daemon of [Lanes] on stock Linux
//! MPTCP, through the userspace path manager.
//!
//! Every MPTCP connection a host opens from a Short-flow Lane (SL) address
//! gets one backup subflow per Long-flow Lane (LL) pair of its peer; when the
//! policy judges the flow long (deadline, or the eq. 5.7 link cost of
//! `tcpaccel_core::lanes`), LL subflows are made active and the SL subflow
//! backup, so short flows keep SL's queues short.
//!
//! Modules: [`config`] (the TOML file, validated), [`env`] (namespace
//! checks), [`tracker`] (pure bookkeeping and decisions; the notes on what
//! upstream MPTCP cannot do that the thesis did are there), [`probe`]
//! (handshake probes), [`bpf`] (the per-ACK signal program: load, attach,
//! ring buffer), [`daemon`] (the I/O loop), [`record`] (output lines),
//! [`metrics`] (the `--metrics` counters), [`floodlog`] (its log lines
//! under a flood). The lab's flow engine that drives
//! workloads through lanes is `tcpaccel_lab::engines::flows`.
//! What it is not: the path-manager netlink encoding (that is
//! `tcpaccel_sys::mptcp`) or the switching formulas (`tcpaccel_core::lanes`).
#![forbid(unsafe_code)]

pub mod bpf;
pub mod config;
pub mod daemon;
pub mod env;
pub mod floodlog;
pub mod metrics;
pub mod probe;
pub mod record;
pub mod tracker;

pub use config::{Config, ConfigError};
pub use daemon::{run, DaemonError, Format, Options, Reload};
pub use record::Summary;
