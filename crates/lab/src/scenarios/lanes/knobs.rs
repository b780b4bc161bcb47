//! The lanes scenarios' parameters: typed structs declared with
//! [`scaled_params!`], each field with its default, its doc and the rule by
//! which it follows the scale factor D (`--set scale=D`, issue 25).
//!
//! Every lanes scenario reads [`Common`] and its own structs from the
//! resolved map ([`Groups`]), then scales them by D once
//! ([`ScaledParams::dilated`]): an experiment holds only the dilated
//! values, so a time cannot be read unscaled by mistake nor a count
//! scaled. Constants of the experiments that are times (drain, fill,
//! timeouts) go through [`super::Bed::wall`]. A scenario that differs from
//! the shared default of a key says so in [`lanes_specs`]'s list.

use std::time::Duration;

use tcpaccel_core::scale::Dilation;
use tcpaccel_core::units::{Bytes, Rate};
use tcpaccel_lanes::config::{BackupsAt, SignalSource};

use super::DEFAULT_POLICIES;
use crate::runner::scenario::{ParamSpec, Params};
use crate::runner::typed::{dilate_choice, scaled_params, Groups, TypedError};
use crate::testbeds::fabric::Shape;

/// The key of D.
pub(super) const SCALE_KEY: &str = "scale";

scaled_params! {
    /// The parameters every lanes scenario shares.
    pub(super) struct Common {
        variants: Vec<String> [Choice] = DEFAULT_POLICIES.join(",")
            => "policies to compare (mptcp, single, repflow, deadline, link-cost, size, size-link-cost; also sized, sized-rep)",
        hosts: u32 [Count] = "8" => "hosts in the datacenter (a quarter are back-end hosts)",
        fabrics: u32 [Count] = "2" => "fabrics = lanes: 1 SL + the rest LL",
        topology: Shape [Choice] = "leaf-spine"
            => "each fabric's shape: leaf-spine (hosts_per_leaf, spines; the spine fixed per destination) or fattree (the thesis's k = 4 FatTree, up to 16 hosts, ECMP by L4 hash on every switch)",
        hosts_per_leaf: u32 [Count] = "4" => "leaf-spine: hosts under one leaf router",
        spines: u32 [Count] = "2" => "leaf-spine: spine routers per fabric",
        rate: Rate [Rate] = "100mbit"
            => "rate of every link in experiment units, divided by scale (the thesis: 1 Gbit/s)",
        buffer: Bytes [Bytes] = "128KB"
            => "drop-tail queue of every link direction (the thesis: 128 KB); bytes do not scale",
        bucket: Bytes [Bytes] = "3028B"
            => "token bucket of every link direction's shaper (tbf burst; default two full frames, the least that leaves the shaper a frame's time of slack when its timer fires late); bytes, so the same at every D, where a bucket of 1 ms of the rate would shrink with D",
        cc: String [Choice] = "reno" => "congestion control of every flow (the thesis: NewReno)",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        t_deadline: Duration [Time] = "300ms" => "lanes: switch deadline ([Lanes]: 300 ms)",
        alpha: f64 [Unitless] = "1" => "lanes link-cost: α of eq. 5.7",
        gamma: f64 [PerTime] = "1"
            => "lanes link-cost: γ of eq. 5.7, per ms of t − t_deadline (divided by scale, so that the deadline term keeps its weight in experiment units)",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        nu_unit: Duration [Time] = "1ms"
            => "lanes link-cost: the unit ν is counted in (1ms: queueing weighs little against the deadline term; 1us at the thesis's 1 Gbit/s, 10us at 100 Mbit/s: a congested SL is left at once)",
        metrics: Listen [Choice] = "off"
            => "serve every daemon's Prometheus metrics (label host) on this address while it runs, e.g. 9464",
        size_threshold: Bytes [Bytes] = "100KB"
            => "lanes size, size-link-cost: bytes after which a connection moves to LL (the short-flow class ends at 100 KB)",
        signals: SignalSource [Choice] = "auto"
            => "lanes: where each daemon's signals come from: bpf (per-ACK costs in a BPF program, an event only when a connection's decision changes), diag (sock_diag every sample_interval), auto (bpf where the policy and kernel allow, else diag with a warning)",
        backups: BackupsAt [Choice] = "prepare"
            => "lanes, BPF signals: when a connection's backup LL subflows open: prepare (at the program's signal, half the size threshold or of t_deadline) or established (every connection, at once)",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        sample_interval: Duration [Time] = "20ms"
            => "lanes: how often each daemon reads sock_diag (every dump walks the TCP hash of all namespaces; the 3/4-1/4 cost smoothing then lags a rising cost by about 3 intervals)",
        scale: Dilation [Factor] = "1"
            => "time dilation D (issue 25): every rate divided by D, every time (delays, deadlines, ν unit, intervals, durations, timeouts, rto_min, rto_init) multiplied by D, bytes and counts unchanged; FCTs are recorded in wall time and in experiment units (÷ D)",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        rto_min: Duration [Time] = "200ms"
            => "TCP's minimum RTO on every host route, in experiment units (Linux: 200 ms); set on the routes when the scaled value exceeds the kernel's 200 ms (the kernel honours a route's rto_min only above it)",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        rto_init: Duration [Time] = "1s"
            => "TCP's initial RTO (SYN, SYN-ACK, data before the first RTT sample) on every host, in experiment units (Linux: 1 s, no sysctl or route knob); any other scaled value is set by a BPF sock_ops program for the hosts' namespaces (BPF_SOCK_OPS_TIMEOUT_INIT, whole 4 ms ticks at HZ 250, at most 120 s)",
        delayed_ack: bool [Choice] = "on"
            => "on: the hosts' TCP delays ACKs as Linux does (timer at least 40 ms, which D cannot scale); off: every segment acknowledged at once (quickack on the host routes), the same at every D",
        initcwnd: u32 [Count] = "10"
            => "TCP's initial window in segments on every host route (Linux: 10; the thesis: 12, §6.1); set with the route's initcwnd metric when not 10",
        writes: WriteSize [Choice] = "bulk"
            => "how senders write: bulk (64 KiB writes, TCP_NODELAY) or bulksend (512-byte writes with Nagle on, as ns-3's BulkSend application on DCE's Linux stack: its SendSize default, no TCP_NODELAY)",
        capture: bool [Choice] = "off"
            => "on: capture every host's interfaces during each run and record, per flow, the time from its first SYN to the ACK of its last data byte and to the ACK of its FIN as the sender's capture shows them (senders then close with a FIN after the data, as ns-3's BulkSend does, instead of a reset)",
        tlp: bool [Choice] = "on"
            => "on: tail loss probes as Linux sends them (2 RTTs plus 8 ms, or plus 200 ms with one segment out, which D cannot scale); off: net.ipv4.tcp_early_retrans=0 on the hosts, a tail loss waits for the scaled RTO",
    }
}

scaled_params! {
    /// `drain` (experiment units; × D in wall time): how long flows may
    /// still run after the arrivals window before the rest are cut (counted
    /// in `cut_by_limit`). A time, so it scales; a figure at a large D
    /// shortens it rather than wait D × 4 s for the heavy tail of the long
    /// flows.
    pub(super) struct Drain {
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        drain: Duration [Time] = "4s"
            => "how long flows may still run after the arrivals window; the rest are cut (cut_by_limit)",
    }
}

scaled_params! {
    /// `warmup`: how long the long flows run before the first short flow
    /// arrives. 0 starts both together, as the thesis's buildup does (its
    /// lanes delay short flows only while a new long flow is still on SL);
    /// at least `t_deadline` measures the steady state after the deadline
    /// policies have moved the long flows, as the thesis's continuous
    /// data-mining jobs are met.
    pub(super) struct Warmup {
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        warmup: Duration [Time] = "0s"
            => "how long the long flows run before the first short flow arrives (0: both start together; at least t_deadline: the deadline policies are measured after their switch, in steady state)",
    }
}

/// `metrics`: `off` (or empty), or the address to serve the daemons'
/// metrics on (a port alone is on localhost).
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize)]
#[serde(try_from = "String")]
pub(super) enum Listen {
    Off,
    At(std::net::SocketAddr),
}

impl TryFrom<String> for Listen {
    type Error = String;
    fn try_from(s: String) -> Result<Listen, String> {
        match s.trim() {
            "off" | "" => Ok(Listen::Off),
            a => tcpaccel_metrics::parse_listen(a)
                .map(Listen::At)
                .map_err(|e| format!("expected off, a port or an address to listen on: {e}")),
        }
    }
}

/// `writes`: how senders write.
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum WriteSize {
    Bulk,
    Bulksend,
}

dilate_choice!(Shape, Listen, WriteSize, SignalSource, BackupsAt);

/// A lanes scenario's specs: its structs' in the order read, with the
/// defaults (and docs) in which the scenario differs from the shared ones.
/// A key no struct declares is a bug, caught by every test that lists the
/// scenario's parameters.
pub(super) fn lanes_specs(
    groups: &[Vec<ParamSpec>],
    own: &[(&'static str, &str, Option<&'static str>)],
) -> Vec<ParamSpec> {
    let mut v: Vec<ParamSpec> = groups.concat();
    for &(key, default, doc) in own {
        let p = v.iter_mut().find(|p| p.key == key);
        let p = p.unwrap_or_else(|| panic!("a lanes scenario redeclares {key:?}, which no struct declares"));
        p.default = default.into();
        if let Some(doc) = doc {
            p.doc = doc;
        }
    }
    v
}

/// The scale factor of resolved lanes parameters: `scale` read by
/// [`Common`] (the one reader of it), for [`Scenario::dilation`](crate::runner::scenario::Scenario::dilation).
pub(super) fn scaled(p: &Params) -> anyhow::Result<Option<crate::runner::records::Scaled>> {
    let c: Common = Groups::new(p).take()?;
    Ok(Some(crate::runner::records::Scaled { param: SCALE_KEY.into(), d: c.scale }))
}

/// Checks the variants against `valid`.
pub(super) fn check_variants(c: &Common, valid: &[&str]) -> Result<(), TypedError> {
    crate::runner::typed::choices("variants", &c.variants, valid)
}

/// At least one entry in a list parameter.
pub(super) fn non_empty<T>(key: &str, v: &[T]) -> Result<(), TypedError> {
    if v.is_empty() {
        return Err(<TypedError as serde::de::Error>::custom(format!(
            "parameter {key}: expected at least one value"
        )));
    }
    Ok(())
}

/// A scenario's estimate for the progress bar: `per_run` (experiment
/// units) × D.
pub(super) fn estimate_scaled(d: Dilation, per_run: Duration) -> Duration {
    per_run * d.get()
}
