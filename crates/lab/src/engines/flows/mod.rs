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
//! Flows are woken at their scheduled start by one starter thread that
//! sleeps on the kernel's high-resolution timers: tokio's timers fire on a
//! 1 ms wheel and round up, which started flows up to ~2 ms late (p99
//! 1.95–2.0 ms on an idle machine), a delay that counts in every FCT and
//! that a time-dilated run divides by D while the network's times are not.
//!
//! Sockets keep the namespace they were created in: the runtime thread that
//! starts a flow enters the source namespace just for the `socket(2)` calls
//! and leaves it again; everything else (options, bind, connect, I/O) runs
//! on a 2-worker tokio runtime.
//!
//! Transports: [`Transport::Mptcp`] (SL to SL; subflows are the path
//! manager's business, set up by the caller), [`Transport::SinglePath`]
//! (plain TCP on one lane per flow, picked by a seeded RNG: ECMP-like) and
//! [`Transport::RepFlow`] (short flows sent twice, on SL and LL0 at once;
//! anchors.md "Workloads", Xu & Li 2014) and [`Transport::Sized`] (short
//! flows on SL, optionally also on LL0; larger ones on LL only).
//!
//! What it is not: no topology set-up (namespaces, addresses, MPTCP
//! endpoints and the lanes daemon are the caller's), no statistics over the
//! results (that is `tcpaccel_core::stats`), no workload generation
//! (`tcpaccel_core::workload`).

mod plan;
mod sink;
mod transfer;

pub use plan::{decode_header, encode_header, lane_name, pick_lane};
pub use sink::Sinks;

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tcpaccel_core::time::Instant as CoreInstant;
use tcpaccel_core::workload::{Flow, FlowClass, HostId};
use tcpaccel_sys::netns;
use tokio::runtime::Runtime;
use tokio::sync::{oneshot, watch, Semaphore};

use plan::plan;
use transfer::run_one;

/// The byte a sink answers once it has counted a whole flow.
pub const ANSWER: u8 = 0xA5;
/// Length of the per-connection header: flow id and length, big-endian u64s.
pub const HEADER_LEN: usize = 16;
/// Why a flow did not complete. Records keep its text (`Display`), e.g.
/// "time limit (connecting)", "time limit (12070800 of 50000000 bytes
/// written)", "interrupted", or the I/O error naming the addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlowFailure {
    /// [`RunOptions::limit`] cut the flow, or it was scheduled after it.
    TimeLimit(CutAt),
    /// `stop` was set before the flow completed (or started).
    Interrupted,
    /// A connection or I/O error, naming the lane and addresses.
    Io(String),
    /// The flow's task itself failed (a panic in the engine).
    Internal(String),
}

/// Where the time limit found a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutAt {
    ScheduledAfterLimit,
    WaitingForSlot,
    Connecting,
    Writing { written: u64, of: u64 },
    AwaitingAnswer,
}

impl FlowFailure {
    pub fn is_time_limit(&self) -> bool {
        matches!(self, FlowFailure::TimeLimit(_))
    }
}

impl std::fmt::Display for FlowFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FlowFailure::TimeLimit(at) => {
                f.write_str("time limit (")?;
                match at {
                    CutAt::ScheduledAfterLimit => f.write_str("scheduled after it")?,
                    CutAt::WaitingForSlot => f.write_str("waiting for an in-flight slot")?,
                    CutAt::Connecting => f.write_str("connecting")?,
                    CutAt::Writing { written, of } => write!(f, "{written} of {of} bytes written")?,
                    CutAt::AwaitingAnswer => f.write_str("all written, no answer yet")?,
                }
                f.write_str(")")
            }
            FlowFailure::Interrupted => f.write_str("interrupted"),
            FlowFailure::Io(e) => f.write_str(e),
            FlowFailure::Internal(e) => write!(f, "internal: {e}"),
        }
    }
}

fn failure_text<S: serde::Serializer>(v: &Option<FlowFailure>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(e) => s.collect_str(e),
        None => s.serialize_none(),
    }
}

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
    /// Lanes by known size (this project's policy, not the thesis's; it
    /// assumes what RepFlow assumes, that the sender knows which flows are
    /// short): flows of fewer than `threshold` bytes on SL, as plain TCP;
    /// larger flows never touch SL, plain TCP on an LL lane picked by
    /// `seed` (among LL lanes only). With `replicate`, a short flow is also
    /// sent on LL0 at once and the first copy's answer ends it, as in
    /// RepFlow: the SL copy runs on a lane that carries no large flow.
    Sized { threshold: u64, replicate: bool, seed: u64 },
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
    /// reported incomplete with [`FlowFailure::TimeLimit`].
    /// Limits beyond a year act as a year.
    pub limit: Duration,
    /// At most this many flows (RepFlow: flows, not copies) connect or send
    /// at once; the others wait, and the wait counts in their FCT.
    pub max_in_flight: usize,
    /// When the run ends before `limit`.
    pub end: RunEnd,
    /// How a delivered flow's connection ends.
    pub close: Close,
    /// How the sender writes.
    pub writes: Writes,
}

/// How a sender hands its bytes to TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Writes {
    /// Writes of up to 64 KiB with `TCP_NODELAY`: the engine's default.
    Bulk,
    /// Writes of `size` bytes with Nagle's algorithm on, as ns-3's
    /// BulkSend application does on a Linux socket in DCE (`SendSize`
    /// default 512, no `TCP_NODELAY`): a tail shorter than a segment waits
    /// for the ACK of what is in flight. Long flows write 64 KiB with
    /// Nagle on: the same segments but the first (see `transfer`).
    Small { size: usize },
}

/// How a sender ends a connection that delivered its flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Close {
    /// Reset it once the answer arrived (no FIN, no TIME_WAIT): the
    /// engine's default, which keeps thousands of short connections cheap.
    Reset,
    /// Shut the sending side down right after the last byte (a FIN behind
    /// the data, as ns-3's BulkSend closes at MaxBytes), and after the
    /// answer wait up to [`FIN_WAIT`] for the sink's own close before a
    /// graceful close, so that a capture sees every FIN and its ACK (MPTCP:
    /// the subflows' FINs follow both DATA_FINs). The FCT still ends at the
    /// answer.
    Fin,
}

/// How long a [`Close::Fin`] sender waits for the sink's close after the answer.
pub const FIN_WAIT: Duration = Duration::from_millis(500);

/// When [`run_flows`] ends before its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunEnd {
    /// Once every flow ended.
    AllFlows,
    /// Once every flow of this class ended: the flows of the other classes
    /// still running are then cut as by the time limit (and recorded so,
    /// with how far they got). For background transfers that outlast any
    /// useful limit, e.g. data mining's 800 MB jobs under the front-end
    /// flows: waiting for them would add wall time and nothing measured.
    ClassEnded(FlowClass),
}

impl RunEnd {
    /// Whether the run waits for flows of `class` before it ends.
    fn waits_for(self, class: FlowClass) -> bool {
        match self {
            RunEnd::AllFlows => true,
            RunEnd::ClassEnded(c) => c == class,
        }
    }
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
    /// How long after its scheduled start the flow's task woke to open its
    /// sockets (wall seconds; `None`: it never started). Beyond the timer
    /// wheel's millisecond, the runtime could not get a CPU in time.
    pub start_late_s: Option<f64>,
    /// Flow completion time in seconds; `None` = did not complete.
    pub fct_s: Option<f64>,
    /// "sl" | "ll0" | "ll1" | ... | "mptcp" | "both" (RepFlow copies).
    pub lane: String,
    /// RepFlow: the lane of the copy that won.
    pub winner: Option<String>,
    /// Payload bytes each lane carried for this flow, each byte once per
    /// connection, read from the sender's TCP when the sink's answer arrived
    /// (`tcpi_bytes_sent − tcpi_bytes_retrans` per subflow for MPTCP,
    /// attributed by the subflow's local address; the socket's own for plain
    /// TCP; RepFlow: the winning copy's only, the loser is reset uncounted).
    /// Includes the 16-byte header, and for MPTCP data the scheduler sent
    /// again on a second subflow. Empty when the flow did not complete or
    /// the counters could not be read (logged).
    pub lane_bytes: BTreeMap<String, u64>,
    /// Payload bytes the sender sent again (`tcpi_bytes_retrans`, every
    /// subflow; RepFlow: the winning copy's), read with `lane_bytes`;
    /// `None` when those are empty or the kernel does not count it.
    pub retrans_bytes: Option<u64>,
    /// The delivering connection's TCP connections as (local, remote): the
    /// plain socket's own, or every MPTCP subflow's (RepFlow: the winning
    /// copy's), read when the answer arrived; empty when unreadable or not
    /// delivered. A capture at the sender finds the flow's packets by them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conns: Vec<(std::net::SocketAddr, std::net::SocketAddr)>,
    /// Why the flow did not complete (recorded as its text).
    #[serde(serialize_with = "failure_text")]
    pub error: Option<FlowFailure>,
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

fn runtime(what: &str) -> Result<Runtime, FlowError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(what)
        .enable_all()
        .build()
        .map_err(|source| FlowError::Runtime { what: format!("tokio runtime for {what}"), source })
}

/// Runs every flow: at `origin + (flow.start - workload_origin)`, where the
/// origin is the time of the call, a connection from src to dst carries the
/// header and `bytes`; see the module doc. Returns one result per flow, in id
/// order. Setting `stop` ends early: results so far, the others incomplete
/// with [`FlowFailure::Interrupted`].
///
/// Blocks until every flow ended (or every flow of the class
/// [`RunOptions::end`] names), at most about `limit` after the origin. It
/// runs its own tokio runtime, so call it from synchronous code (not from a
/// runtime's thread). Bad input (see [`FlowError`]) is refused before any
/// socket is opened; a failing connection or write is that flow's `error`.
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
    let plan = plan(flows, workload_origin, hosts, opts)?;
    if plan.is_empty() {
        return Ok(Vec::new());
    }
    let namespaces: BTreeSet<String> =
        plan.iter().flat_map(|p| p.paths.iter().map(|x| x.src_ns.clone())).collect();
    // Refuse a missing namespace (or missing privilege) before any flow.
    for ns in &namespaces {
        netns::enter_scoped(ns).map_err(|source| FlowError::Namespace { ns: ns.clone(), source })?;
    }
    let rt = runtime("flows")?;
    let ctx = Arc::new(Ctx {
        cc: opts.cc.clone(),
        close: opts.close,
        writes: opts.writes,
        port: opts.port,
        origin,
        limit: opts.limit.min(MAX_LIMIT),
        in_flight: Semaphore::new(opts.max_in_flight.min(Semaphore::MAX_PERMITS)),
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    // Set when the flows the run waits for have all ended: cuts the others.
    let (cut_tx, cut_rx) = watch::channel(false);
    let mut wakes = Vec::with_capacity(plan.len());
    let mut starts = Vec::with_capacity(plan.len());
    for p in &plan {
        let (tx, rx) = oneshot::channel();
        // Flows past the limit never start (run_one says so); no wake-up.
        if p.at < ctx.limit {
            wakes.push((origin + p.at, tx));
        }
        starts.push(rx);
    }
    let starter_done = Arc::new(AtomicBool::new(false));
    let starter = {
        let done = starter_done.clone();
        std::thread::Builder::new()
            .name("flow-starter".into())
            .spawn(move || wake_on_schedule(wakes, &done))
            .map_err(|source| FlowError::Runtime { what: "flow starter thread".into(), source })?
    };
    let end = opts.end;
    let mut results = rt.block_on(async {
        let (mut waited, mut others) = (Vec::new(), Vec::new());
        for (p, start) in plan.into_iter().zip(starts) {
            let template = p.result();
            let task = tokio::spawn(run_one(ctx.clone(), p, start, stop_rx.clone(), cut_rx.clone()));
            if end.waits_for(template.class) { &mut waited } else { &mut others }.push((template, task));
        }
        let joined = async move {
            let mut out = Vec::with_capacity(waited.len() + others.len());
            join_into(&mut out, waited).await;
            let _ = cut_tx.send(true);
            join_into(&mut out, others).await;
            out
        };
        tokio::pin!(joined);
        let mut tick = tokio::time::interval(STOP_POLL);
        loop {
            tokio::select! {
                out = &mut joined => break out,
                _ = tick.tick() => {
                    if stop.load(Ordering::Relaxed) {
                        let _ = stop_tx.send(true);
                    }
                }
            }
        }
    });
    starter_done.store(true, Ordering::Relaxed);
    let _ = starter.join();
    rt.shutdown_timeout(Duration::from_secs(1));
    results.sort_by_key(|r| r.id);
    Ok(results)
}

/// Awaits each flow task in turn and appends its result; a task that failed
/// leaves its template with the failure.
async fn join_into(out: &mut Vec<FlowResult>, tasks: Vec<(FlowResult, tokio::task::JoinHandle<FlowResult>)>) {
    for (mut template, h) in tasks {
        match h.await {
            Ok(r) => out.push(r),
            Err(e) => {
                template.error = Some(FlowFailure::Internal(format!("flow task failed: {e}")));
                out.push(template);
            }
        }
    }
}

/// Sends each wake-up at its instant (`wakes` in start order), sleeping
/// with the kernel's timers in slices of at most [`STOP_POLL`] so that
/// `done` ends it; a wake-up whose task is gone is skipped.
fn wake_on_schedule(wakes: Vec<(std::time::Instant, oneshot::Sender<()>)>, done: &AtomicBool) {
    if let Err(e) = tcpaccel_sys::packet::set_realtime(STARTER_PRIORITY) {
        tracing::info!("flow starter keeps its priority ({e}): flows may start late on a busy host");
    }
    for (at, tx) in wakes {
        loop {
            if done.load(Ordering::Relaxed) {
                return;
            }
            let now = std::time::Instant::now();
            if now >= at {
                break;
            }
            std::thread::sleep((at - now).min(STOP_POLL));
        }
        let _ = tx.send(());
    }
}

/// The starter thread's real-time FIFO priority (the emulator's): it
/// sleeps to each flow's start and only sends a wake-up, and at the
/// scheduler's normal priority it woke up to 16 ms late beside ten long
/// flows at 50 Mbit/s (HZ 250: a busy CPU's next tick), which the fidelity
/// monitor saw as flows started late.
const STARTER_PRIORITY: i32 = 10;

/// Longer limits act as this one, so that origin + limit is representable.
const MAX_LIMIT: Duration = Duration::from_secs(365 * 24 * 3600);
/// How often `run_flows` looks at its `stop` flag.
const STOP_POLL: Duration = Duration::from_millis(20);
/// Read and write size of the data path.
const CHUNK: usize = 64 * 1024;
struct Ctx {
    cc: String,
    close: Close,
    writes: Writes,
    port: u16,
    origin: std::time::Instant,
    limit: Duration,
    in_flight: Semaphore,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_starter_wakes_each_flow_in_order_never_early() {
        let t0 = std::time::Instant::now() + Duration::from_millis(20);
        let mut wakes = Vec::new();
        let mut rxs = Vec::new();
        for i in 0..5u64 {
            let (tx, rx) = oneshot::channel();
            wakes.push((t0 + Duration::from_millis(7 * i), tx));
            rxs.push((t0 + Duration::from_millis(7 * i), rx));
        }
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let th = std::thread::spawn(move || wake_on_schedule(wakes, &d));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut woke = Vec::new();
        for (at, rx) in rxs {
            rt.block_on(rx).expect("woken, not dropped");
            let now = std::time::Instant::now();
            assert!(now >= at, "woken early");
            woke.push(now - at);
        }
        th.join().unwrap();
        // A loaded test machine may be late; the order and "never early"
        // are exact, the bound is a generous margin.
        assert!(woke.iter().all(|l| *l < Duration::from_millis(200)), "{woke:?}");
    }

    #[test]
    fn the_starter_ends_when_the_run_is_done_without_waking_the_rest() {
        let (tx, rx) = oneshot::channel();
        let wakes = vec![(std::time::Instant::now() + Duration::from_secs(60), tx)];
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let th = std::thread::spawn(move || wake_on_schedule(wakes, &d));
        std::thread::sleep(Duration::from_millis(30));
        let t = std::time::Instant::now();
        done.store(true, Ordering::Relaxed);
        th.join().unwrap();
        assert!(t.elapsed() < Duration::from_secs(2), "the starter outlived the run");
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        assert!(rt.block_on(rx).is_err(), "a flow past the end is not woken");
    }

    pub(super) fn host(id: HostId, lls: u8) -> HostAddrs {
        HostAddrs {
            id,
            ns: format!("ns{id}"),
            sl: Ipv4Addr::new(10, 0, 0, id as u8),
            ll: (0..lls).map(|k| Ipv4Addr::new(10, 1 + k, 0, id as u8)).collect(),
        }
    }

    pub(super) fn flow(id: u64, start_ms: u64, src: HostId, dst: HostId, bytes: u64) -> Flow {
        Flow { id, start: CoreInstant::from_millis(start_ms), src, dst, bytes, class: FlowClass::Short }
    }

    #[test]
    fn failures_keep_their_record_text_and_only_cuts_are_time_limits() {
        let cases = [
            (FlowFailure::TimeLimit(CutAt::ScheduledAfterLimit), "time limit (scheduled after it)"),
            (FlowFailure::TimeLimit(CutAt::WaitingForSlot), "time limit (waiting for an in-flight slot)"),
            (FlowFailure::TimeLimit(CutAt::Connecting), "time limit (connecting)"),
            (
                FlowFailure::TimeLimit(CutAt::Writing { written: 7, of: 9 }),
                "time limit (7 of 9 bytes written)",
            ),
            (FlowFailure::TimeLimit(CutAt::AwaitingAnswer), "time limit (all written, no answer yet)"),
            (FlowFailure::Interrupted, "interrupted"),
            (FlowFailure::Io("sl 10.0.0.1: connect: refused".into()), "sl 10.0.0.1: connect: refused"),
            (FlowFailure::Internal("flow task failed: x".into()), "internal: flow task failed: x"),
        ];
        for (f, text) in cases {
            assert_eq!(f.to_string(), text);
            assert_eq!(f.is_time_limit(), text.starts_with("time limit"), "{f:?}");
        }
    }

    pub(super) fn opts(transport: Transport) -> RunOptions {
        RunOptions {
            transport,
            port: 5000,
            cc: "reno".into(),
            limit: Duration::from_secs(5),
            max_in_flight: 8,
            end: RunEnd::AllFlows,
            close: Close::Reset,
            writes: Writes::Bulk,
        }
    }

    #[test]
    fn a_class_end_waits_for_that_class_only() {
        assert!(RunEnd::AllFlows.waits_for(FlowClass::Short) && RunEnd::AllFlows.waits_for(FlowClass::Long));
        let short = RunEnd::ClassEnded(FlowClass::Short);
        assert!(short.waits_for(FlowClass::Short) && !short.waits_for(FlowClass::Long));
    }

    #[test]
    fn an_empty_flow_list_runs_without_touching_namespaces() {
        let stop = AtomicBool::new(false);
        let r = run_flows(&[], CoreInstant::ZERO, &[host(1, 1)], &opts(Transport::Mptcp), &stop).unwrap();
        assert!(r.is_empty());
    }
}
