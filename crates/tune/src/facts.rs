//! The facts the doctor judges: host and namespace settings, interfaces,
//! routes, MPTCP state, the path, and live connections — plain data.
//!
//! What it is: serializable types, so a report can carry exactly what was
//! seen and tests can build synthetic hosts. Every fact that the host might
//! refuse to tell us is a [`Fact`], which is either known or unknown with the
//! reason. What it is not: no reading of the system (see [`crate::collect`])
//! and no judgement (see [`crate::judge`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tcpaccel_core::units::Rate;

/// A value read from the host, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fact<T> {
    Known(T),
    Unknown(String),
}

impl<T> Fact<T> {
    pub fn known(&self) -> Option<&T> {
        match self {
            Fact::Known(v) => Some(v),
            Fact::Unknown(_) => None,
        }
    }
    pub fn as_result(&self) -> Result<&T, &str> {
        match self {
            Fact::Known(v) => Ok(v),
            Fact::Unknown(r) => Err(r.as_str()),
        }
    }
}

/// The sysctls the doctor reads, by their dotted names.
pub const SYSCTLS: &[&str] = &[
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.netdev_max_backlog",
    "net.core.default_qdisc",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_mem",
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_available_congestion_control",
    "net.ipv4.tcp_slow_start_after_idle",
    "net.ipv4.tcp_no_metrics_save",
    "net.ipv4.tcp_window_scaling",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_mtu_probing",
    "net.ipv4.tcp_rto_min_us",
    "net.mptcp.enabled",
    "net.mptcp.path_manager",
];

/// Offload switches of one interface (ethtool legacy get-commands).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offloads {
    pub tso: bool,
    pub gso: bool,
    pub gro: bool,
    pub tx_checksum: bool,
}

/// One network interface as `ip -d link` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    pub name: String,
    pub mtu: u32,
    pub txqueuelen: u32,
    /// Root qdisc kind (`noqueue`, `pfifo_fast`, `fq`, ...).
    pub qdisc: String,
    pub up: bool,
    pub loopback: bool,
    pub offloads: Fact<Offloads>,
    /// Link speed in Mbit/s as the driver reports it (`None`: the driver
    /// does not know, as virtio and many virtual devices, or unreadable).
    #[serde(default)]
    pub speed_mbps: Option<u64>,
}

/// One route, with the metrics the doctor cares about.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    /// Destination as `ip route` prints it (`default`, `10.0.0.0/24`).
    pub dst: String,
    /// Route type when not `unicast` (`local` for the host's own addresses,
    /// which live in table `local`).
    #[serde(default)]
    pub kind: Option<String>,
    /// `proto`, `scope` and `src` as `ip route` prints them: an
    /// `ip route change` must restate them or they are reset.
    #[serde(default)]
    pub protocol: Option<String>,
    #[serde(default)]
    pub scope: Option<String>,
    #[serde(default)]
    pub prefsrc: Option<String>,
    pub dev: Option<String>,
    pub gateway: Option<String>,
    /// `rto_min` route metric in milliseconds, when set.
    pub rto_min_ms: Option<u64>,
    /// `initcwnd` route metric in segments, when set.
    pub initcwnd: Option<u64>,
    /// `initrwnd` route metric in segments, when set.
    pub initrwnd: Option<u64>,
}

/// The path being tuned for: rate and RTT, each given or measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PathSpec {
    /// Bottleneck rate the transfers should reach.
    pub rate: Option<Rate>,
    /// Round-trip time of the path.
    #[serde(with = "opt_duration_ns", rename = "rtt_ns")]
    pub rtt: Option<Duration>,
    /// Where the RTT came from ("given", "handshakes to HOST:PORT").
    pub rtt_source: Option<String>,
    /// Egress interface towards the target, when known.
    pub egress_dev: Option<String>,
}

impl PathSpec {
    /// Bandwidth-delay product in bytes, when both rate and RTT are known.
    pub fn bdp(&self) -> Option<u64> {
        Some(tcpaccel_core::units::bdp_bytes(self.rate?, self.rtt?))
    }
}

/// A live TCP connection's limit counters (tcp_info via sock_diag).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveConn {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub congestion: Option<String>,
    pub cwnd: u32,
    pub mss: u32,
    pub srtt_us: u32,
    pub snd_wnd: Option<u32>,
    pub delivery_rate_bps: Option<u64>,
    /// Microseconds the connection had data to send.
    pub busy_us: Option<u64>,
    /// Microseconds of it stalled by the receiver's window.
    pub rwnd_limited_us: Option<u64>,
    /// Microseconds of it stalled by our send buffer.
    pub sndbuf_limited_us: Option<u64>,
    pub total_retrans: u32,
}

/// A short bulk transfer to a `tcpaccel recv` at the target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub goodput: Rate,
    pub duration_s: f64,
    pub retransmits: Option<u64>,
}

/// Everything the doctor saw.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Facts {
    /// Namespace the facts come from (`None`: the doctor's own).
    pub netns: Option<String>,
    /// Raw sysctl values (whitespace collapsed), by dotted name.
    pub sysctls: BTreeMap<String, Fact<String>>,
    /// Sysctls that are readable but not writable here (in a non-initial
    /// namespace `net.core.rmem_max`/`wmem_max` are read-only mirrors of the
    /// host's global values).
    #[serde(default)]
    pub readonly: Vec<String>,
    pub interfaces: Option<Fact<Vec<Interface>>>,
    pub routes: Option<Fact<Vec<Route>>>,
    /// The route the kernel uses for the target (`ip route get fibmatch`),
    /// when a target was given.
    #[serde(default)]
    pub target_route: Option<Fact<Route>>,
    pub path: PathSpec,
    /// Target reachability, when a target was given (`Unknown` = unreachable).
    pub target: Option<Fact<String>>,
    /// Bandwidth measured against a `tcpaccel recv` at the target, if asked.
    #[serde(default)]
    pub measured: Option<Fact<Measured>>,
    pub live: Vec<LiveConn>,
    /// Qdisc kinds the doctor may advise (`fq`), and whether this kernel
    /// has them (built in or loadable), tried in a throwaway namespace.
    #[serde(default)]
    pub qdiscs: BTreeMap<String, Fact<bool>>,
    /// Congestion-control modules the doctor may advise loading
    /// (`tcp_cubic`), and whether `modprobe` could find them.
    #[serde(default)]
    pub modules: BTreeMap<String, Fact<bool>>,
    /// Sysctls that do not exist in this (non-initial) namespace: the
    /// values shown are the host's, settable only there.
    #[serde(default)]
    pub host_only: Vec<String>,
}

impl Facts {
    /// The raw value of a sysctl; unknown if it was not read at all.
    pub fn sysctl(&self, key: &str) -> Fact<String> {
        self.sysctls.get(key).cloned().unwrap_or_else(|| Fact::Unknown("not read".into()))
    }
    /// A sysctl holding one integer.
    pub fn sysctl_u64(&self, key: &str) -> Fact<u64> {
        match self.sysctl(key) {
            Fact::Known(s) => match s.trim().parse() {
                Ok(v) => Fact::Known(v),
                Err(_) => Fact::Unknown(format!("{key} = {s:?} is not an integer")),
            },
            Fact::Unknown(r) => Fact::Unknown(r),
        }
    }
    /// A sysctl holding three integers (`tcp_rmem`, `tcp_wmem`).
    pub fn sysctl_triple(&self, key: &str) -> Fact<[u64; 3]> {
        match self.sysctl(key) {
            Fact::Known(s) => {
                let v: Vec<u64> = s.split_whitespace().filter_map(|x| x.parse().ok()).collect();
                match v.as_slice() {
                    [a, b, c] if s.split_whitespace().count() == 3 => Fact::Known([*a, *b, *c]),
                    _ => Fact::Unknown(format!("{key} = {s:?} is not three integers")),
                }
            }
            Fact::Unknown(r) => Fact::Unknown(r),
        }
    }
}

/// Serde for `Option<Duration>` as integer nanoseconds.
mod opt_duration_ns {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(super) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&(d.as_nanos() as u64)),
            None => s.serialize_none(),
        }
    }
    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_nanos))
    }
}
