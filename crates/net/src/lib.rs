//! tcpaccel-net: the topology builder of the lab. A TOML file, or code through
//! a [`TopologyBuilder`], describes hosts, routers and links ([`spec`]); [`Network::up`] builds it out of network
//! namespaces, veth pairs, tbf/fifo qdiscs, routes, sysctls and userspace
//! emulators, and dropping the [`Network`] removes all of it, also on panic
//! and on SIGINT/SIGTERM (it hooks [`live::teardown_all`] into
//! `tcpaccel_sys::signals`). [`clean_leftovers`] removes what a
//! crashed run left behind; [`state`] lets other processes find a live run.
//!
//! It does not generate traffic or measure anything: the traffic tool and the
//! emulator's meter do that inside the namespaces this crate builds.
#![forbid(unsafe_code)]

pub mod addr;
pub mod clean;
mod emulator;
pub mod error;
pub mod live;
pub mod network;
pub mod spec;
pub mod state;

pub use addr::Cidr;
pub use clean::clean_leftovers;
pub use emulator::{EmuHandle, EmuSummary, MeterOptions};
pub use error::{Error, Result};
pub use network::{Network, Teardown};
pub use spec::{
    DirSpec, Direction, End, EndSpec, Link, LinkKind, LinkSpec, LinkType, Node, NodeSpec, Role, Route,
    RouteSpec, RouteTo, Shaping, SpecError, Topology, TopologyBuilder,
};
