//! tcpaccel-gather: the gathering server with priority QoS and its client.
//!
//! [GatherQoS] (Sakajiri et al.) in a real server: each client's data streams
//! get a share of one receive-buffer pool by class priority and target
//! (§3.1, applied live with `TCP_WINDOW_CLAMP`), and each client's number of
//! parallel streams is searched with AIMD (§3.2). The algorithms are pure and
//! live in `tcpaccel_core::{alloc, aimd}`; this crate is the shell: protocol
//! ([`proto`], `docs/gather-protocol.md`), reassembly ([`reasm`]), server
//! ([`server`]) with its QoS tick's decisions apart ([`qos`], sans-IO), client
//! ([`client`]) and status records ([`status`]).
#![forbid(unsafe_code)]

pub mod blocking;
pub mod client;
pub mod config;
pub mod floodlog;
pub mod metrics;
pub mod proto;
pub mod qos;
pub mod reasm;
pub mod server;
pub mod session;
pub mod share;
pub mod status;
#[cfg(feature = "testing")]
pub mod testing;

pub use client::{query_status, send, Limit, SendOptions, SendReport, Source};
pub use config::{parse_class, Class, ConfigError, Policy, ServerConfig, Sharing};
pub use server::{Server, SinkSpec};
pub use status::{ClientStatus, Event};
