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

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tcpaccel_core::rng::Rng;
use tcpaccel_core::time::Instant as CoreInstant;
use tcpaccel_core::workload::{Flow, FlowClass, HostId};
use tcpaccel_sys::netns;
use tcpaccel_sys::sockopt::{self, Family};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::runtime::Runtime;
use tokio::sync::{oneshot, watch, Semaphore};

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
}

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

/// One MPTCP listener per namespace on 0.0.0.0:port (an MPTCP listener accepts
/// plain TCP too), counting what each flow id delivers. Runs on its own
/// 2-worker tokio runtime; create and stop it from synchronous code. A new
/// `Sinks` per run starts with empty counts (the listeners set SO_REUSEADDR,
/// so the same port can be reused at once).
pub struct Sinks {
    rt: Option<Runtime>,
    counts: Counts,
}

type Counts = Arc<Mutex<BTreeMap<u64, Received>>>;

fn lock(c: &Counts) -> std::sync::MutexGuard<'_, BTreeMap<u64, Received>> {
    // The map stays consistent whatever a panicking holder did mid-update.
    c.lock().unwrap_or_else(|p| p.into_inner())
}

fn runtime(what: &str) -> Result<Runtime, FlowError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(what)
        .enable_all()
        .build()
        .map_err(|source| FlowError::Runtime { what: format!("tokio runtime for {what}"), source })
}

impl Sinks {
    /// Opens the listeners (one per distinct namespace of `hosts`) and starts
    /// accepting. Fails when a namespace is missing, MPTCP is off, or the port
    /// is taken.
    pub fn start(hosts: &[HostAddrs], port: u16) -> Result<Sinks, FlowError> {
        if port == 0 {
            return Err(FlowError::Option("sink port must not be 0".into()));
        }
        let mut namespaces = BTreeSet::new();
        for h in hosts {
            if h.ns.is_empty() {
                return Err(FlowError::EmptyNamespace { host: h.id });
            }
            namespaces.insert(h.ns.clone());
        }
        let rt = runtime("flow-sinks")?;
        let counts: Counts = Arc::new(Mutex::new(BTreeMap::new()));
        for ns in namespaces {
            let fd = netns::run_in(&ns, move || -> tcpaccel_sys::Result<OwnedFd> {
                let fd = sockopt::mptcp_socket(Family::V4)?;
                sockopt::set_reuseaddr(&fd, true)?;
                sockopt::bind(&fd, &SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)))?;
                sockopt::listen(&fd, 4096)?;
                Ok(fd)
            })
            .map_err(|source| FlowError::Namespace { ns: ns.clone(), source })?
            .map_err(|source| FlowError::Listen { ns: ns.clone(), port, source })?;
            let std = std::net::TcpListener::from(fd);
            let io = |source| FlowError::Runtime { what: format!("sink listener in {ns:?}"), source };
            std.set_nonblocking(true).map_err(io)?;
            let listener = {
                let _in_rt = rt.enter();
                tokio::net::TcpListener::from_std(std).map_err(io)?
            };
            rt.spawn(accept_loop(listener, counts.clone(), ns));
        }
        Ok(Sinks { rt: Some(rt), counts })
    }

    /// Bytes received per flow id so far (also for flows cut off by the time
    /// limit), with first/last byte times.
    pub fn received(&self) -> BTreeMap<u64, Received> {
        lock(&self.counts).clone()
    }

    /// Closes the listeners and every open connection; returns the final counts.
    pub fn stop(mut self) -> BTreeMap<u64, Received> {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_millis(500));
        }
        lock(&self.counts).clone()
    }
}

impl Drop for Sinks {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

async fn accept_loop(listener: tokio::net::TcpListener, counts: Counts, ns: String) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let counts = counts.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve(stream, &counts).await {
                        tracing::debug!(%peer, error = %e, "sink connection ended early");
                    }
                });
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(ns = %ns, error = %e, "sink accept failed");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// Reads one header and exactly the announced length, counting as it goes,
/// then answers [`ANSWER`]. Never reads past the announced length.
async fn serve(mut s: TcpStream, counts: &Counts) -> Result<(), String> {
    let mut h = [0u8; HEADER_LEN];
    s.read_exact(&mut h).await.map_err(|e| format!("reading the header: {e}"))?;
    let (id, len) = decode_header(&h);
    let now = std::time::Instant::now();
    {
        let mut map = lock(counts);
        let r = map.entry(id).or_insert(Received {
            bytes: 0,
            first: now,
            last: now,
            connections: 0,
            completed: 0,
        });
        r.connections = r.connections.saturating_add(1);
    }
    let mut buf = vec![0u8; CHUNK];
    let mut left = len;
    while left > 0 {
        let want = left.min(CHUNK as u64) as usize;
        let n = s
            .read(&mut buf[..want])
            .await
            .map_err(|e| format!("flow {id}: {e} after {} of {len} bytes", len - left))?;
        if n == 0 {
            return Err(format!("flow {id}: end of stream after {} of {len} bytes", len - left));
        }
        left -= n as u64;
        if let Some(r) = lock(counts).get_mut(&id) {
            r.bytes = r.bytes.saturating_add(n as u64);
            r.last = std::time::Instant::now();
        }
    }
    s.write_all(&[ANSWER]).await.map_err(|e| format!("flow {id}: answering: {e}"))?;
    if let Some(r) = lock(counts).get_mut(&id) {
        r.completed = r.completed.saturating_add(1);
    }
    Ok(())
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

/// Longer limits act as this one, so that origin + limit is representable.
const MAX_LIMIT: Duration = Duration::from_secs(365 * 24 * 3600);
/// How often `run_flows` looks at its `stop` flag.
const STOP_POLL: Duration = Duration::from_millis(20);
/// Read and write size of the data path.
const CHUNK: usize = 64 * 1024;
/// The payload: zeros, written from one shared buffer.
static ZEROS: [u8; CHUNK] = [0; CHUNK];

struct Ctx {
    cc: String,
    port: u16,
    origin: std::time::Instant,
    limit: Duration,
    in_flight: Semaphore,
}

/// Creates the sockets of one flow (one per path) in its source namespace.
///
/// The calling runtime thread enters the namespace and leaves it again
/// before returning (a socket keeps the namespace it was created in; nothing
/// awaits in between). Making a flow's sockets together lets RepFlow's two
/// copies send their SYNs back to back: a 30 KB copy on an idle lane can
/// finish in under a millisecond.
fn make_sockets(paths: &[Path]) -> Result<Vec<OwnedFd>, String> {
    let mut out = Vec::with_capacity(paths.len());
    for p in paths {
        let _in_ns = netns::enter_scoped(&p.src_ns).map_err(|e| format!("{} {}: {e}", p.lane, p.src))?;
        let fd = if p.mptcp { sockopt::mptcp_socket(Family::V4) } else { sockopt::tcp_socket(Family::V4) };
        out.push(fd.map_err(|e| format!("{} {}: {e}", p.lane, p.src))?);
    }
    Ok(out)
}

impl Planned {
    /// The result of this flow before anything happened.
    fn result(&self) -> FlowResult {
        let f = &self.flow;
        FlowResult {
            id: f.id,
            class: f.class,
            src: f.src,
            dst: f.dst,
            bytes: f.bytes,
            start_s: self.at.as_secs_f64(),
            start_late_s: None,
            fct_s: None,
            lane: self.lane.clone(),
            winner: None,
            lane_bytes: BTreeMap::new(),
            retrans_bytes: None,
            error: None,
        }
    }
}

/// How far a flow got (its furthest copy, for RepFlow), to say where the time
/// limit cut it.
#[derive(Default)]
struct Progress {
    phase: AtomicU8,
    written: AtomicU64,
}

impl Progress {
    const CONNECTING: u8 = 1;
    const WRITING: u8 = 2;
    const ANSWER: u8 = 3;

    fn reached(&self, phase: u8, written: u64) {
        self.phase.fetch_max(phase, Ordering::Relaxed);
        self.written.fetch_max(written, Ordering::Relaxed);
    }

    fn cut_at(&self, bytes: u64) -> CutAt {
        match self.phase.load(Ordering::Relaxed) {
            0 => CutAt::WaitingForSlot,
            Self::CONNECTING => CutAt::Connecting,
            Self::WRITING => CutAt::Writing { written: self.written.load(Ordering::Relaxed), of: bytes },
            _ => CutAt::AwaitingAnswer,
        }
    }
}

/// Resolves once `stop` was seen set; never if the watch is gone.
async fn stopped(rx: &mut watch::Receiver<bool>) {
    if rx.wait_for(|s| *s).await.is_err() {
        std::future::pending::<()>().await;
    }
}

async fn run_one(
    ctx: Arc<Ctx>,
    p: Planned,
    woken: oneshot::Receiver<()>,
    mut stop: watch::Receiver<bool>,
    mut cut: watch::Receiver<bool>,
) -> FlowResult {
    let mut r = p.result();
    if p.at >= ctx.limit {
        r.error = Some(FlowFailure::TimeLimit(CutAt::ScheduledAfterLimit));
        return r;
    }
    // `at` < `limit`, and `limit` is capped so that both sums fit.
    let start = ctx.origin + p.at;
    let deadline = tokio::time::Instant::from_std(ctx.origin + ctx.limit);
    let progress = Progress::default();
    // The starter thread wakes the flow at `start`; it ends without a
    // wake-up only when the run is over.
    tokio::select! {
        w = woken => if w.is_err() {
            r.error = Some(FlowFailure::Interrupted);
            return r;
        },
        _ = stopped(&mut stop) => {
            r.error = Some(FlowFailure::Interrupted);
            return r;
        }
        _ = stopped(&mut cut) => {
            r.error = Some(FlowFailure::TimeLimit(CutAt::ScheduledAfterLimit));
            return r;
        }
    }
    r.start_late_s = Some(std::time::Instant::now().saturating_duration_since(start).as_secs_f64());
    let work = async {
        let _permit = ctx.in_flight.acquire().await.map_err(|_| "in-flight limiter closed".to_string())?;
        carry(&ctx, &p, &progress).await
    };
    tokio::select! {
        out = tokio::time::timeout_at(deadline, work) => match out {
            Ok(Ok((done, winner))) => {
                r.fct_s = Some(done.at.saturating_duration_since(start).as_secs_f64());
                r.winner = winner;
                r.lane_bytes = done.lane_bytes;
                r.retrans_bytes = done.retrans_bytes;
            }
            Ok(Err(e)) => r.error = Some(FlowFailure::Io(e)),
            Err(_) => r.error = Some(FlowFailure::TimeLimit(progress.cut_at(p.flow.bytes))),
        },
        _ = stopped(&mut stop) => r.error = Some(FlowFailure::Interrupted),
        _ = stopped(&mut cut) => r.error = Some(FlowFailure::TimeLimit(progress.cut_at(p.flow.bytes))),
    }
    tracing::debug!(id = r.id, lane = %r.lane, fct_s = ?r.fct_s, error = ?r.error, "flow done");
    r
}

/// A connection that delivered its flow: when the answer arrived, what
/// each lane carried and what was sent again (see [`FlowResult::lane_bytes`]).
struct Delivered {
    at: std::time::Instant,
    lane_bytes: BTreeMap<String, u64>,
    retrans_bytes: Option<u64>,
}

/// Carries one flow on its path, or races its two copies (RepFlow): the first
/// copy answered wins and the other is dropped, which resets it.
async fn carry(ctx: &Ctx, p: &Planned, progress: &Progress) -> Result<(Delivered, Option<String>), String> {
    let f = &p.flow;
    progress.reached(Progress::CONNECTING, 0);
    let mut fds = make_sockets(&p.paths)?.into_iter();
    match (p.paths.as_slice(), fds.next(), fds.next()) {
        ([one], Some(fd), None) => transfer(ctx, one, fd, f.id, f.bytes, progress).await.map(|d| (d, None)),
        ([a, b], Some(fa), Some(fb)) => {
            let ta = transfer(ctx, a, fa, f.id, f.bytes, progress);
            let tb = transfer(ctx, b, fb, f.id, f.bytes, progress);
            tokio::pin!(ta, tb);
            let (mut ea, mut eb): (Option<String>, Option<String>) = (None, None);
            loop {
                tokio::select! {
                    r = &mut ta, if ea.is_none() => match r {
                        Ok(t) => return Ok((t, Some(a.lane.clone()))),
                        Err(e) => ea = Some(e),
                    },
                    r = &mut tb, if eb.is_none() => match r {
                        Ok(t) => return Ok((t, Some(b.lane.clone()))),
                        Err(e) => eb = Some(e),
                    },
                    else => {}
                }
                if let (Some(x), Some(y)) = (&ea, &eb) {
                    return Err(format!("both copies failed: {x}; {y}"));
                }
            }
        }
        (other, ..) => Err(format!("internal: {} paths planned", other.len())),
    }
}

/// One connection on a socket made in the source namespace: options, bind,
/// connect, header and payload, then the sink's answer. Returns when the
/// answer arrived, with the bytes each lane carried. Dropping the future
/// resets the connection (SO_LINGER 0).
async fn transfer(
    ctx: &Ctx,
    path: &Path,
    fd: OwnedFd,
    id: u64,
    bytes: u64,
    progress: &Progress,
) -> Result<Delivered, String> {
    let dst = SocketAddr::from((path.dst, ctx.port));
    let what = format!("{} {} -> {dst}", path.lane, path.src);
    sockopt::set_congestion(&fd, &ctx.cc).map_err(|e| format!("{what}: {e}"))?;
    sockopt::set_nodelay(&fd, true).map_err(|e| format!("{what}: {e}"))?;
    // A cut or losing copy must stop using the link at once, and a finished
    // sender needs no TIME_WAIT: close with RST.
    if let Err(e) = sockopt::set_linger_zero(&fd) {
        tracing::debug!(%what, error = %e, "SO_LINGER 0 refused");
    }
    let std = std::net::TcpStream::from(fd);
    std.set_nonblocking(true).map_err(|e| format!("{what}: O_NONBLOCK: {e}"))?;
    let sock = TcpSocket::from_std_stream(std);
    sock.bind(SocketAddr::from((path.src, 0))).map_err(|e| format!("{what}: bind: {e}"))?;
    let mut s = sock.connect(dst).await.map_err(|e| format!("{what}: connect: {e}"))?;
    progress.reached(Progress::WRITING, 0);
    let first = bytes.min((CHUNK - HEADER_LEN) as u64) as usize;
    let mut head = Vec::with_capacity(HEADER_LEN + first);
    head.extend_from_slice(&encode_header(id, bytes));
    head.resize(HEADER_LEN + first, 0);
    s.write_all(&head).await.map_err(|e| format!("{what}: write: {e}"))?;
    let mut left = bytes - first as u64;
    progress.reached(Progress::WRITING, first as u64);
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        s.write_all(&ZEROS[..n])
            .await
            .map_err(|e| format!("{what}: write: {e} with {left} of {bytes} bytes unsent"))?;
        left -= n as u64;
        progress.reached(Progress::WRITING, bytes - left);
    }
    progress.reached(Progress::ANSWER, bytes);
    let mut answer = [0u8; 1];
    s.read_exact(&mut answer).await.map_err(|e| format!("{what}: waiting for the answer: {e}"))?;
    if answer[0] != ANSWER {
        return Err(format!("{what}: sink answered {:#04x}, not {ANSWER:#04x}", answer[0]));
    }
    let at = std::time::Instant::now();
    let (lane_bytes, retrans_bytes) = match sent_by_local_address(&s, path.mptcp) {
        Ok(sent) => {
            let once: Vec<_> = sent.iter().map(|c| (c.local, c.sent_once)).collect();
            (bytes_per_lane(&once, &path.src_lanes), sent.iter().map(|c| c.retrans).sum())
        }
        Err(e) => {
            tracing::warn!(%what, error = %e, "per-lane byte counters unreadable; the flow has none");
            (BTreeMap::new(), None)
        }
    };
    Ok(Delivered { at, lane_bytes, retrans_bytes })
}

/// One connection's (or MPTCP subflow's) send counters.
struct Sent {
    local: std::net::IpAddr,
    /// Payload bytes sent once each (`tcpi_bytes_sent` less `tcpi_bytes_retrans`).
    sent_once: u64,
    /// `tcpi_bytes_retrans` (`None`: the kernel's TCP_INFO is too short).
    retrans: Option<u64>,
}

/// The payload bytes each connection sent, by local address: one entry per
/// MPTCP subflow, or the plain socket's own. Sent, not acknowledged: when
/// the answer arrives on one subflow, another's last ACKs may still be on
/// their way (a delayed ACK holds one for up to 40 ms).
fn sent_by_local_address(s: &TcpStream, mptcp: bool) -> Result<Vec<Sent>, String> {
    let sent = |local: std::net::IpAddr, i: &tcpaccel_sys::tcpinfo::TcpInfo| {
        let once = i.bytes_sent.unwrap_or(0).saturating_sub(i.bytes_retrans.unwrap_or(0));
        Sent { local, sent_once: once, retrans: i.bytes_retrans }
    };
    if mptcp {
        match tcpaccel_sys::tcpinfo::mptcp_subflows(s) {
            Ok(subs) => return Ok(subs.iter().map(|f| sent(f.local.ip(), &f.info)).collect()),
            // A connection that fell back to plain TCP (its SYN went
            // without MP_CAPABLE after net.mptcp.syn_retrans_before_tcp_fallback
            // retransmissions, or the peer did not answer it) passes
            // socket options to its one subflow, which has no SOL_MPTCP
            // options: EOPNOTSUPP. TCP_INFO then reads that subflow.
            Err(tcpaccel_sys::Error::Unsupported { .. }) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    let info = tcpaccel_sys::tcpinfo::tcp_info(s).map_err(|e| e.to_string())?;
    let local = s.local_addr().map_err(|e| format!("getsockname: {e}"))?;
    Ok(vec![sent(local.ip(), &info)])
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
    /// The source host's lane addresses and names, to say which lane a
    /// subflow's bytes went on.
    pub src_lanes: Vec<(Ipv4Addr, String)>,
}

/// The lanes of a host by address: SL, then LL 0, 1, ...
fn lanes_of(h: &HostAddrs) -> Vec<(Ipv4Addr, String)> {
    std::iter::once(h.sl).chain(h.ll.iter().copied()).enumerate().map(|(k, a)| (a, lane_name(k))).collect()
}

/// Sums bytes per lane name. A local address that is none of
/// the host's lanes is kept under its own text, not dropped.
fn bytes_per_lane(sent: &[(std::net::IpAddr, u64)], lanes: &[(Ipv4Addr, String)]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (ip, n) in sent {
        let name = lanes.iter().find(|(a, _)| std::net::IpAddr::V4(*a) == *ip).map(|(_, l)| l.clone());
        *out.entry(name.unwrap_or_else(|| ip.to_string())).or_insert(0) += n;
    }
    out
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
                src_lanes: lanes_of(src),
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
            Transport::Sized { threshold, replicate, seed } => {
                need_ll("Sized")?;
                if f.bytes >= threshold {
                    let lls = src.ll.len().min(dst.ll.len());
                    let p = path(1 + pick_lane(seed, f.id, lls), false);
                    (p.lane.clone(), vec![p])
                } else if replicate {
                    ("both".to_string(), vec![path(0, false), path(1, false)])
                } else {
                    ("sl".to_string(), vec![path(0, false)])
                }
            }
        };
        out.push(Planned { flow: *f, at, lane, paths });
    }
    out.sort_by_key(|p| (p.at, p.flow.id));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lane_bytes_are_summed_by_the_hosts_lane_names_and_strangers_kept() {
        let h = HostAddrs {
            id: 1,
            ns: "h1".into(),
            sl: Ipv4Addr::new(10, 0, 0, 1),
            ll: vec![Ipv4Addr::new(10, 1, 0, 1), Ipv4Addr::new(10, 2, 0, 1)],
        };
        let lanes = lanes_of(&h);
        assert_eq!(lanes.iter().map(|(_, l)| l.as_str()).collect::<Vec<_>>(), ["sl", "ll0", "ll1"]);
        let ip = |a: [u8; 4]| std::net::IpAddr::V4(Ipv4Addr::from(a));
        let acked = [
            (ip([10, 0, 0, 1]), 1_000),
            (ip([10, 2, 0, 1]), 70_000),
            (ip([10, 0, 0, 1]), 500),
            (ip([10, 9, 9, 9]), 3),
        ];
        let m = bytes_per_lane(&acked, &lanes);
        let want: BTreeMap<String, u64> = [("sl", 1_500), ("ll1", 70_000), ("10.9.9.9", 3)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(m, want);
    }

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

    fn host(id: HostId, lls: u8) -> HostAddrs {
        HostAddrs {
            id,
            ns: format!("ns{id}"),
            sl: Ipv4Addr::new(10, 0, 0, id as u8),
            ll: (0..lls).map(|k| Ipv4Addr::new(10, 1 + k, 0, id as u8)).collect(),
        }
    }

    fn flow(id: u64, start_ms: u64, src: HostId, dst: HostId, bytes: u64) -> Flow {
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

    fn opts(transport: Transport) -> RunOptions {
        RunOptions {
            transport,
            port: 5000,
            cc: "reno".into(),
            limit: Duration::from_secs(5),
            max_in_flight: 8,
            end: RunEnd::AllFlows,
        }
    }

    #[test]
    fn a_class_end_waits_for_that_class_only() {
        assert!(RunEnd::AllFlows.waits_for(FlowClass::Short) && RunEnd::AllFlows.waits_for(FlowClass::Long));
        let short = RunEnd::ClassEnded(FlowClass::Short);
        assert!(short.waits_for(FlowClass::Short) && !short.waits_for(FlowClass::Long));
    }

    #[test]
    fn header_round_trips_big_endian() {
        for (id, len) in [(0, 0), (1, 2), (u64::MAX, 7), (0x0102_0304_0506_0708, u64::MAX)] {
            assert_eq!(decode_header(&encode_header(id, len)), (id, len));
        }
        let h = encode_header(1, 0x0203);
        assert_eq!(h, [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 2, 3]);
    }

    #[test]
    fn lane_pick_depends_on_seed_and_id_only() {
        let a: Vec<usize> = (0..200).map(|id| pick_lane(9, id, 3)).collect();
        let b: Vec<usize> = (0..200).rev().map(|id| pick_lane(9, id, 3)).rev().collect();
        assert_eq!(a, b, "order does not matter");
        let c: Vec<usize> = (0..200).map(|id| pick_lane(10, id, 3)).collect();
        assert_ne!(a, c, "another seed, another pick");
        for k in 0..3 {
            let n = a.iter().filter(|&&x| x == k).count();
            assert!((30..110).contains(&n), "lane {k} picked {n} times of 200");
        }
        assert!(a.iter().all(|&k| k < 3));
        assert_eq!(pick_lane(9, 5, 1), 0);
        assert_eq!(pick_lane(9, 5, 0), 0);
        assert_eq!((lane_name(0), lane_name(1), lane_name(2)), ("sl".into(), "ll0".into(), "ll1".into()));
    }

    #[test]
    fn plan_orders_by_start_then_id_and_offsets_from_the_workload_origin() {
        let hosts = [host(1, 1), host(2, 1)];
        let flows =
            [flow(5, 300, 1, 2, 10), flow(3, 200, 2, 1, 10), flow(4, 200, 1, 2, 10), flow(1, 100, 1, 2, 10)];
        let p = plan(&flows, CoreInstant::from_millis(100), &hosts, &opts(Transport::Mptcp)).unwrap();
        let order: Vec<(u64, u64)> = p.iter().map(|x| (x.flow.id, x.at.as_millis() as u64)).collect();
        assert_eq!(order, [(1, 0), (3, 100), (4, 100), (5, 200)]);
        let three = &p[1].paths[0];
        assert_eq!((three.src, three.dst, three.mptcp), (hosts[1].sl, hosts[0].sl, true));
        assert_eq!(
            (three.src_ns.as_str(), three.dst_ns.as_str(), p[1].lane.as_str()),
            ("ns2", "ns1", "mptcp")
        );
    }

    #[test]
    fn single_path_uses_the_same_lane_index_at_both_ends() {
        // Host 1 has two LL lanes, host 2 one: only SL and LL0 are common.
        let hosts = [host(1, 2), host(2, 1)];
        let flows: Vec<Flow> = (0..60).map(|i| flow(i, 0, 1, 2, 10)).collect();
        let p = plan(&flows, CoreInstant::ZERO, &hosts, &opts(Transport::SinglePath { seed: 4 })).unwrap();
        let mut seen = BTreeSet::new();
        for x in &p {
            let path = &x.paths[0];
            assert!(!path.mptcp);
            assert_eq!(x.lane, path.lane);
            let k = match path.lane.as_str() {
                "sl" => 0,
                "ll0" => 1,
                other => panic!("lane {other} is not common to both hosts"),
            };
            assert_eq!(k, pick_lane(4, x.flow.id, 2));
            let at = |h: &HostAddrs| if k == 0 { h.sl } else { h.ll[0] };
            assert_eq!((path.src, path.dst), (at(&hosts[0]), at(&hosts[1])));
            seen.insert(k);
        }
        assert_eq!(seen.len(), 2, "both lanes picked over 60 flows");
    }

    #[test]
    fn repflow_replicates_below_the_threshold_only() {
        let hosts = [host(1, 1), host(2, 1)];
        let flows = [flow(1, 0, 1, 2, 99_999), flow(2, 0, 1, 2, 100_000)];
        let p = plan(
            &flows,
            CoreInstant::ZERO,
            &hosts,
            &opts(Transport::RepFlow { threshold: 100_000, seed: 1 }),
        )
        .unwrap();
        assert_eq!(p[0].lane, "both");
        let lanes: Vec<&str> = p[0].paths.iter().map(|x| x.lane.as_str()).collect();
        assert_eq!(lanes, ["sl", "ll0"]);
        assert_eq!(p[1].paths.len(), 1);
        assert_eq!(p[1].lane, lane_name(pick_lane(1, 2, 2)));
    }

    #[test]
    fn sized_keeps_large_flows_off_sl_and_short_ones_on_it() {
        let hosts = [host(1, 3), host(2, 3)];
        let flows: Vec<Flow> =
            (0..60).map(|i| flow(i, 0, 1, 2, if i % 2 == 0 { 99_999 } else { 100_000 })).collect();
        for replicate in [false, true] {
            let t = Transport::Sized { threshold: 100_000, replicate, seed: 3 };
            let p = plan(&flows, CoreInstant::ZERO, &hosts, &opts(t)).unwrap();
            let mut lls = BTreeSet::new();
            for x in &p {
                let lanes: Vec<&str> = x.paths.iter().map(|y| y.lane.as_str()).collect();
                if x.flow.bytes < 100_000 {
                    let want: &[&str] = if replicate { &["sl", "ll0"] } else { &["sl"] };
                    assert_eq!(lanes, want, "{x:?}");
                    assert_eq!(x.lane, if replicate { "both" } else { "sl" });
                } else {
                    assert_eq!(lanes.len(), 1, "{x:?}");
                    assert_ne!(lanes[0], "sl", "a large flow on SL: {x:?}");
                    assert_eq!(x.lane, lane_name(1 + pick_lane(3, x.flow.id, 3)));
                    assert!(x.paths.iter().all(|y| !y.mptcp));
                    lls.insert(lanes[0].to_string());
                }
            }
            assert_eq!(lls.len(), 3, "30 large flows spread over the 3 LL lanes: {lls:?}");
        }
        let no_ll = [host(1, 0), host(2, 0)];
        let t = Transport::Sized { threshold: 10, replicate: false, seed: 1 };
        assert!(matches!(
            plan(&flows[..1], CoreInstant::ZERO, &no_ll, &opts(t)),
            Err(FlowError::NoLongLane { .. })
        ));
    }

    #[test]
    fn bad_input_is_refused_with_the_culprit_named() {
        let hosts = [host(1, 1), host(2, 1)];
        let sp = opts(Transport::SinglePath { seed: 1 });
        let z = CoreInstant::ZERO;
        let err = |flows: &[Flow], hosts: &[HostAddrs], o: &RunOptions| plan(flows, z, hosts, o).unwrap_err();

        let e = err(&[flow(1, 0, 1, 2, 1), flow(1, 5, 2, 1, 1)], &hosts, &sp);
        assert!(matches!(e, FlowError::DuplicateFlow(1)), "{e}");
        let e = err(&[flow(7, 0, 1, 9, 1)], &hosts, &sp);
        assert!(matches!(e, FlowError::UnknownHost { flow: 7, host: 9 }), "{e}");
        let e = err(&[flow(7, 0, 2, 2, 1)], &hosts, &sp);
        assert!(matches!(e, FlowError::SelfFlow { flow: 7, host: 2 }), "{e}");
        let e = err(&[flow(1, 0, 1, 2, 1)], &[host(1, 1), host(1, 1)], &sp);
        assert!(matches!(e, FlowError::DuplicateHost(1)), "{e}");
        let mut nameless = host(2, 1);
        nameless.ns.clear();
        let e = err(&[flow(1, 0, 1, 2, 1)], &[host(1, 1), nameless], &sp);
        assert!(matches!(e, FlowError::EmptyNamespace { host: 2 }), "{e}");
        let e = plan(&[flow(3, 5, 1, 2, 1)], CoreInstant::from_millis(6), &hosts, &sp).unwrap_err();
        assert!(matches!(e, FlowError::BeforeOrigin { flow: 3 }), "{e}");

        // No LL lane: refused for single-path and RepFlow, fine for MPTCP.
        let no_ll = [host(1, 0), host(2, 1)];
        let e = err(&[flow(4, 0, 2, 1, 1)], &no_ll, &sp);
        assert!(matches!(e, FlowError::NoLongLane { host: 1, flow: 4, .. }), "{e}");
        assert!(e.to_string().contains("SinglePath"), "{e}");
        let rep = opts(Transport::RepFlow { threshold: 10, seed: 1 });
        assert!(matches!(err(&[flow(4, 0, 2, 1, 1)], &no_ll, &rep), FlowError::NoLongLane { .. }));
        assert!(plan(&[flow(4, 0, 2, 1, 1)], z, &no_ll, &opts(Transport::Mptcp)).is_ok());

        for bad in [
            RunOptions { max_in_flight: 0, ..sp.clone() },
            RunOptions { port: 0, ..sp.clone() },
            RunOptions { cc: String::new(), ..sp.clone() },
            RunOptions { limit: Duration::ZERO, ..sp.clone() },
        ] {
            assert!(matches!(err(&[flow(1, 0, 1, 2, 1)], &hosts, &bad), FlowError::Option(_)), "{bad:?}");
        }
    }

    #[test]
    fn an_empty_flow_list_runs_without_touching_namespaces() {
        let stop = AtomicBool::new(false);
        let r = run_flows(&[], CoreInstant::ZERO, &[host(1, 1)], &opts(Transport::Mptcp), &stop).unwrap();
        assert!(r.is_empty());
    }
}
