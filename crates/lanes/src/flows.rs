//! The flow engine of the datacenter-lanes lab: runs a list of
//! [`tcpaccel_core::workload::Flow`]s between hosts that live in network
//! namespaces, from one process, and records each flow's completion time
//! (FCT).
//!
//! Wire format of one transfer: the sender writes a 16-byte header (flow id,
//! length; both big-endian u64) and then `length` bytes of zeros; the sink
//! counts exactly `length` bytes and answers one byte ([`ANSWER`]). The FCT is
//! the time from the flow's *scheduled* start to the answer, so a late start
//! (the in-flight cap, a slow connect) counts against the flow.
//!
//! Sockets keep the namespace they were created in: each namespace gets one
//! small thread that entered it and only creates sockets; everything else
//! (options, bind, connect, I/O) runs on a 2-worker tokio runtime.
//!
//! Transports: [`Transport::Mptcp`] (SL to SL; subflows are the path
//! manager's business, set up by the caller), [`Transport::SinglePath`]
//! (plain TCP on one lane per flow, picked by a seeded RNG: ECMP-like) and
//! [`Transport::RepFlow`] (short flows sent twice, on SL and LL0 at once;
//! anchors.md "Workloads", Xu & Li 2014).
//!
//! What it is not: no topology set-up (namespaces, addresses, MPTCP
//! endpoints and the lanes daemon are the caller's), no statistics over the
//! results (that is `tcpaccel_core::stats`), no workload generation
//! (`tcpaccel_core::workload`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::Serialize;
use tcpaccel_core::rng::Rng;
use tcpaccel_core::time::Instant as CoreInstant;
use tcpaccel_core::workload::{Flow, FlowClass, HostId};

/// The byte a sink answers once it has counted a whole flow.
pub const ANSWER: u8 = 0xA5;
/// Length of the per-connection header: flow id and length, big-endian u64s.
pub const HEADER_LEN: usize = 16;
/// [`FlowResult::error`] of a flow cut (or never started) by [`RunOptions::limit`].
pub const ERR_TIME_LIMIT: &str = "time limit";
/// [`FlowResult::error`] of a flow cut (or never started) because `stop` was set.
pub const ERR_INTERRUPTED: &str = "interrupted";

/// One host of the lab: its namespace and its lane addresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostAddrs {
    pub id: HostId,
    pub ns: String,
    /// Short-flow Lane address.
    pub sl: Ipv4Addr,
    /// Long-flow Lane addresses (one or more; none is allowed only for [`Transport::Mptcp`]).
    pub ll: Vec<Ipv4Addr>,
}

/// How a flow travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Transport {
    /// MPTCP socket (IPPROTO_MPTCP) bound to the source's SL address,
    /// connecting to the destination's SL address. Used both for "pure
    /// MPTCP" (in-kernel PM with endpoints) and for the lanes policies (a
    /// lanes daemon in each source namespace): both are the caller's set-up.
    Mptcp,
    /// Plain TCP on one lane picked per flow by a seeded RNG (ECMP-like):
    /// lane k of {sl, ll...} at both ends. The pick depends only on the seed
    /// and the flow id (see [`pick_lane`]).
    SinglePath { seed: u64 },
    /// RepFlow (anchors.md "Workloads"): flows of fewer than `threshold` bytes
    /// are sent twice, over plain TCP on SL and on LL0 at once; the FCT is the
    /// first copy's and the slower copy is then aborted (RST). Larger flows:
    /// [`Transport::SinglePath`] with `seed`.
    RepFlow { threshold: u64, seed: u64 },
}

/// Bytes a sink received for one flow id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Payload bytes (header excluded) over all connections that carried this
    /// id: a RepFlow short flow counts both copies.
    pub bytes: u64,
    /// When the first header of this id arrived.
    pub first: std::time::Instant,
    /// When the last payload byte (or the header, if none yet) arrived.
    pub last: std::time::Instant,
    /// Connections that announced this id.
    pub connections: u32,
    /// Connections that delivered their whole length and got the answer.
    pub completed: u32,
}

/// Options of one [`run_flows`] call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunOptions {
    pub transport: Transport,
    /// The sinks' port (see [`Sinks::start`]).
    pub port: u16,
    /// Congestion control set on every sending socket with TCP_CONGESTION
    /// ("reno", "cubic", "bbr"); on MPTCP sockets it applies to the subflows.
    pub cc: String,
    /// Hard stop measured from the origin: unfinished flows are cut (RST) and
    /// reported incomplete with error [`ERR_TIME_LIMIT`].
    pub limit: Duration,
    /// At most this many flows (RepFlow: flows, not copies) connect or send
    /// at once; the others wait, and the wait counts in their FCT.
    pub max_in_flight: usize,
}

/// The outcome of one flow.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowResult {
    pub id: u64,
    pub class: FlowClass,
    pub src: HostId,
    pub dst: HostId,
    pub bytes: u64,
    /// Scheduled start, seconds from the origin.
    pub start_s: f64,
    /// Flow completion time in seconds; `None` = did not complete.
    pub fct_s: Option<f64>,
    /// "sl" | "ll0" | "ll1" | ... | "mptcp" | "both" (RepFlow copies).
    pub lane: String,
    /// RepFlow: the lane of the copy that won.
    pub winner: Option<String>,
    /// Why the flow did not complete: a connection or I/O error naming the
    /// addresses, [`ERR_TIME_LIMIT`] or [`ERR_INTERRUPTED`].
    pub error: Option<String>,
}

/// Input the engine refuses, and set-up failures.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    #[error("host id {0} appears more than once in the host list")]
    DuplicateHost(HostId),
    #[error("host {host}: empty namespace name")]
    EmptyNamespace { host: HostId },
    #[error("flow id {0} appears more than once")]
    DuplicateFlow(u64),
    #[error("flow {flow} names host {host}, which is not in the host list")]
    UnknownHost { flow: u64, host: HostId },
    #[error("flow {flow} goes from host {host} to itself")]
    SelfFlow { flow: u64, host: HostId },
    #[error("flow {flow} starts before the workload origin")]
    BeforeOrigin { flow: u64 },
    #[error("host {host} has no Long-flow Lane address, which {transport} needs (flow {flow})")]
    NoLongLane { host: HostId, flow: u64, transport: &'static str },
    #[error("bad option: {0}")]
    Option(String),
    #[error("namespace {ns:?}: {source}")]
    Namespace { ns: String, source: tcpaccel_sys::Error },
    #[error("sink in namespace {ns:?} on port {port}: {source}")]
    Listen { ns: String, port: u16, source: tcpaccel_sys::Error },
    #[error("{what}: {source}")]
    Runtime { what: String, source: std::io::Error },
}

/// One MPTCP listener per namespace on 0.0.0.0:port (an MPTCP listener accepts
/// plain TCP too), counting what each flow id delivers.
pub struct Sinks {
    _todo: (),
}

impl Sinks {
    /// Opens the listeners (one per distinct namespace of `hosts`) and starts
    /// accepting. Fails when a namespace is missing or the port is taken.
    pub fn start(hosts: &[HostAddrs], port: u16) -> Result<Sinks, FlowError> {
        let _ = (hosts, port);
        Err(FlowError::Option("Sinks::start: not implemented yet".into()))
    }

    /// Bytes received per flow id so far (also for flows cut off by the time
    /// limit), with first/last byte times.
    pub fn received(&self) -> BTreeMap<u64, Received> {
        BTreeMap::new()
    }

    /// Closes the listeners and every open connection; returns the final counts.
    pub fn stop(self) -> BTreeMap<u64, Received> {
        BTreeMap::new()
    }
}

/// Runs every flow: at `origin + (flow.start - workload_origin)`, where the
/// origin is the time of the call, a connection from src to dst carries the
/// header and `bytes`; see the module doc. Returns one result per flow, in id
/// order. Setting `stop` ends early: results so far, the others incomplete
/// with [`ERR_INTERRUPTED`].
pub fn run_flows(
    flows: &[Flow],
    workload_origin: CoreInstant,
    hosts: &[HostAddrs],
    opts: &RunOptions,
    stop: &AtomicBool,
) -> Result<Vec<FlowResult>, FlowError> {
    run_flows_at(flows, workload_origin, hosts, opts, stop, std::time::Instant::now())
}

/// [`run_flows`] with an explicit origin (e.g. one shared with other
/// recorders). An origin in the past makes the first flows late.
pub fn run_flows_at(
    flows: &[Flow],
    workload_origin: CoreInstant,
    hosts: &[HostAddrs],
    opts: &RunOptions,
    stop: &AtomicBool,
    origin: std::time::Instant,
) -> Result<Vec<FlowResult>, FlowError> {
    let _ = (stop, origin);
    let _plan = plan(flows, workload_origin, hosts, opts)?;
    Err(FlowError::Option("run_flows: not implemented yet".into()))
}

// ------------------------------------------------------------------ pure part

/// Encodes the per-connection header.
pub fn encode_header(id: u64, len: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&id.to_be_bytes());
    h[8..].copy_from_slice(&len.to_be_bytes());
    h
}

/// Decodes the per-connection header: (flow id, length).
pub fn decode_header(h: &[u8; HEADER_LEN]) -> (u64, u64) {
    let mut id = [0u8; 8];
    let mut len = [0u8; 8];
    id.copy_from_slice(&h[..8]);
    len.copy_from_slice(&h[8..]);
    (u64::from_be_bytes(id), u64::from_be_bytes(len))
}

/// The lane index (0 = SL, k = LL k−1) of a single-path flow among `lanes`
/// lanes: a function of the seed and the flow id only, so a replay picks the
/// same lanes whatever the order or subset of flows run.
pub fn pick_lane(seed: u64, flow_id: u64, lanes: usize) -> usize {
    if lanes <= 1 {
        return 0;
    }
    Rng::fork(seed, flow_id).below(lanes as u64) as usize
}

/// The name of lane index `k` (0 = "sl", k = "ll{k-1}").
pub fn lane_name(k: usize) -> String {
    match k {
        0 => "sl".to_string(),
        k => format!("ll{}", k - 1),
    }
}

/// One connection to make: the local and remote addresses and the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Path {
    pub lane: String,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub dst_ns: String,
    pub src_ns: String,
    pub mptcp: bool,
}

/// A validated flow with its schedule and its path(s).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Planned {
    pub flow: Flow,
    /// Offset of the scheduled start from the origin.
    pub at: Duration,
    /// "mptcp", "sl", "llN" or "both".
    pub lane: String,
    /// One path, or two for a replicated flow (SL first).
    pub paths: Vec<Path>,
}

/// Checks the input and turns each flow into its schedule and path(s), in
/// start order (ties by id). Pure: every refusal names the flow or host.
pub(crate) fn plan(
    flows: &[Flow],
    workload_origin: CoreInstant,
    hosts: &[HostAddrs],
    opts: &RunOptions,
) -> Result<Vec<Planned>, FlowError> {
    if opts.max_in_flight == 0 {
        return Err(FlowError::Option("max_in_flight must be at least 1".into()));
    }
    if opts.port == 0 {
        return Err(FlowError::Option("port must not be 0 (the sinks listen on a fixed port)".into()));
    }
    if opts.cc.is_empty() {
        return Err(FlowError::Option("cc (congestion control name) is empty".into()));
    }
    if opts.limit.is_zero() {
        return Err(FlowError::Option("limit must be above zero".into()));
    }
    let mut by_id: BTreeMap<HostId, &HostAddrs> = BTreeMap::new();
    for h in hosts {
        if h.ns.is_empty() {
            return Err(FlowError::EmptyNamespace { host: h.id });
        }
        if by_id.insert(h.id, h).is_some() {
            return Err(FlowError::DuplicateHost(h.id));
        }
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(flows.len());
    for f in flows {
        if !seen.insert(f.id) {
            return Err(FlowError::DuplicateFlow(f.id));
        }
        let src = *by_id.get(&f.src).ok_or(FlowError::UnknownHost { flow: f.id, host: f.src })?;
        let dst = *by_id.get(&f.dst).ok_or(FlowError::UnknownHost { flow: f.id, host: f.dst })?;
        if f.src == f.dst {
            return Err(FlowError::SelfFlow { flow: f.id, host: f.src });
        }
        if f.start < workload_origin {
            return Err(FlowError::BeforeOrigin { flow: f.id });
        }
        let at = f.start.saturating_since(workload_origin);
        let path = |k: usize, mptcp: bool| {
            let pick = |h: &HostAddrs| if k == 0 { h.sl } else { h.ll[k - 1] };
            Path {
                lane: if mptcp { "mptcp".to_string() } else { lane_name(k) },
                src: pick(src),
                dst: pick(dst),
                src_ns: src.ns.clone(),
                dst_ns: dst.ns.clone(),
                mptcp,
            }
        };
        let need_ll = |transport: &'static str| -> Result<(), FlowError> {
            for h in [src, dst] {
                if h.ll.is_empty() {
                    return Err(FlowError::NoLongLane { host: h.id, flow: f.id, transport });
                }
            }
            Ok(())
        };
        let single = |seed: u64| {
            let lanes = 1 + src.ll.len().min(dst.ll.len());
            path(pick_lane(seed, f.id, lanes), false)
        };
        let (lane, paths) = match opts.transport {
            Transport::Mptcp => ("mptcp".to_string(), vec![path(0, true)]),
            Transport::SinglePath { seed } => {
                need_ll("SinglePath")?;
                let p = single(seed);
                (p.lane.clone(), vec![p])
            }
            Transport::RepFlow { threshold, seed } => {
                need_ll("RepFlow")?;
                if f.bytes < threshold {
                    ("both".to_string(), vec![path(0, false), path(1, false)])
                } else {
                    let p = single(seed);
                    (p.lane.clone(), vec![p])
                }
            }
        };
        out.push(Planned { flow: *f, at, lane, paths });
    }
    out.sort_by_key(|p| (p.at, p.flow.id));
    Ok(out)
}
