//! The sender (`tcpaccel send`): parallel streams to a `recv`, per-interval
//! TCP_INFO reports, a summary whose completion time ends when the receiver
//! has every byte.
//!
//! What it is: a blocking function, [`run_send`], that creates all its
//! sockets on the calling thread (so a lab thread that entered a network
//! namespace sends from inside it) and then moves them to one plain thread
//! per stream; the calling thread samples TCP_INFO and calls `on_report`.
//! What it is not: no async runtime, no retries, no pacing policy beyond
//! what [`PaceControl`](crate::pace::PaceControl) returns.

use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use serde::Serialize;
use sha2::{Digest, Sha256};
use tcpaccel_sys::sockopt;
use tcpaccel_sys::tcpinfo::{self, TcpInfo};
use tracing::{debug, warn};

use crate::pace::{framing_from_tcp_info, Framing, Pace, PaceControl};
use crate::proto::{Amount, Header, Mode, Receipt, HEADER_LEN, RECEIPT_LEN};
use crate::pump::{self, Until};
use crate::report::{secs, IntervalReport, Report, StreamSample};
use crate::{Error, Result};

/// How much a `send` run transfers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Volume {
    /// Send for this long (each stream).
    Duration(#[serde(serialize_with = "secs")] Duration),
    /// Send this many bytes in total, split evenly over the streams.
    Bytes(u64),
}

/// Everything `run_send` needs; build with [`SendConfig::new`] and adjust.
#[derive(Debug, Clone, Serialize)]
pub struct SendConfig {
    pub to: SocketAddr,
    pub volume: Volume,
    pub parallel: u16,
    /// Congestion control for our sockets (and the server's in reverse mode).
    pub cc: Option<String>,
    /// `SO_SNDBUF` / `SO_RCVBUF` requests in bytes, set before connecting.
    pub sndbuf: Option<u64>,
    pub rcvbuf: Option<u64>,
    /// Set `sndbuf`/`rcvbuf` with `SO_SNDBUFFORCE`/`SO_RCVBUFFORCE`, past
    /// `net.core.wmem_max`/`rmem_max` (needs CAP_NET_ADMIN): a buffer
    /// sized for the path on this socket alone, whatever the host's maxima.
    pub force_buffers: bool,
    pub mptcp: bool,
    /// Local address to bind (port 0 for any port).
    pub bind: Option<SocketAddr>,
    pub pace: Pace,
    /// Framing for the on-wire rate conversion; `None`: from each socket's
    /// path MTU and MSS after connecting.
    pub framing: Option<Framing>,
    /// Reporting interval; `None`: no interval reports.
    #[serde(serialize_with = "crate::report::opt_secs")]
    pub interval: Option<Duration>,
    /// The server sends, we receive.
    pub reverse: bool,
    /// Hash the data on both ends and compare.
    pub checksum: bool,
    #[serde(serialize_with = "secs")]
    pub connect_timeout: Duration,
    /// How long to wait for the receiver's receipt (or data in reverse mode).
    #[serde(serialize_with = "secs")]
    pub receipt_timeout: Duration,
    /// Seed of the payload pattern.
    pub seed: u64,
    /// Set it to end the run early: uploads stop writing and still collect
    /// their receipts (an orderly, shorter run); a reverse run is aborted.
    #[serde(skip)]
    pub stop: Option<Arc<AtomicBool>>,
}

impl SendConfig {
    /// One stream, 10 s, no options, reports every second.
    pub fn new(to: SocketAddr) -> SendConfig {
        SendConfig {
            to,
            volume: Volume::Duration(Duration::from_secs(10)),
            parallel: 1,
            cc: None,
            sndbuf: None,
            rcvbuf: None,
            force_buffers: false,
            mptcp: false,
            bind: None,
            pace: Pace::None,
            framing: None,
            interval: Some(Duration::from_secs(1)),
            reverse: false,
            checksum: false,
            connect_timeout: Duration::from_secs(10),
            receipt_timeout: Duration::from_secs(30),
            seed: 1,
            stop: None,
        }
    }
}

/// One stream's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct StreamSummary {
    pub stream: u16,
    pub local: Option<SocketAddr>,
    /// Bytes that crossed the connection: the receiver's count in upload
    /// mode, ours in reverse mode.
    pub bytes: u64,
    /// Bytes our application wrote (upload) or read (reverse).
    pub app_bytes: u64,
    /// From the start of the run to the receipt (upload) or the last byte (reverse).
    pub duration_s: f64,
    pub goodput_bps: u64,
    pub retransmits: Option<u32>,
    pub cc: Option<String>,
    /// `SO_MAX_PACING_RATE` this run set on the socket (`--pace`), bytes/s
    /// of payload.
    pub pacing_cap_bytes_per_sec: Option<u64>,
    /// The pacing cap the kernel held on the socket at the end, read back
    /// from it (MPTCP: the highest of its subflows): also a cap set from
    /// outside this run, by the cgroup pacer or a preloaded shim. `None`:
    /// unlimited.
    #[serde(rename = "pacing_cap_applied_bytes_per_sec")]
    pub applied_pacing_cap_bytes_per_sec: Option<u64>,
    #[serde(serialize_with = "crate::pace::serialize_framing")]
    pub framing: Framing,
    pub sha256: Option<String>,
    pub peer_sha256: Option<String>,
}

/// The whole run's outcome; serialized with `"type": "summary"`.
#[derive(Debug, Clone, Serialize)]
pub struct SendSummary {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub to: SocketAddr,
    pub mode: Mode,
    pub pace: Pace,
    pub session: u64,
    pub seed: u64,
    pub bytes: u64,
    pub duration_s: f64,
    pub goodput_bps: u64,
    pub retransmits: Option<u64>,
    /// `Some(true)` when every stream's checksums matched on both ends.
    pub checksum_ok: Option<bool>,
    /// The run was ended early through [`SendConfig::stop`].
    pub stopped_early: bool,
    pub streams: Vec<StreamSummary>,
}

struct Stream {
    idx: u16,
    sock: Arc<TcpStream>,
    header: Header,
    until_bytes: Option<u64>,
    framing: Framing,
    pacer: Option<Box<dyn PaceControl>>,
    pacing_cap: Option<u64>,
    /// MPTCP: the data sequence number at connect time.
    mptcp_base: Option<u64>,
    counter: Arc<AtomicU64>,
}

struct Outcome {
    bytes: u64,
    app_bytes: u64,
    end: Instant,
    sha256: Option<[u8; 32]>,
    peer_sha256: Option<[u8; 32]>,
}

pub(crate) fn session_id(seed: u64) -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let t =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let mut rng = tcpaccel_core::rng::Rng::fork(
        seed ^ (t as u64) ^ u64::from(std::process::id()).rotate_left(32),
        COUNTER.fetch_add(1, Ordering::Relaxed),
    );
    rng.next_u64()
}

pub(crate) fn connect(cfg: &SendConfig) -> Result<TcpStream> {
    let fd = crate::socket(&cfg.to, cfg.mptcp, cfg.sndbuf, cfg.rcvbuf, cfg.cc.as_deref())?;
    if cfg.force_buffers {
        if let Some(b) = cfg.sndbuf {
            sockopt::force_send_buffer(&fd, b)?;
        }
        if let Some(b) = cfg.rcvbuf {
            sockopt::force_recv_buffer(&fd, b)?;
        }
    }
    if let Some(b) = &cfg.bind {
        sockopt::bind(&fd, b)?;
    }
    let s = TcpStream::from(fd);
    // SO_SNDTIMEO bounds a blocking connect on Linux.
    s.set_write_timeout(Some(cfg.connect_timeout))
        .map_err(|e| Error::io("set connect timeout", cfg.to, e))?;
    sockopt::connect(&s, &cfg.to)?;
    Ok(s)
}

/// Runs a transfer; blocks until it is complete. `on_report` is called on
/// the calling thread for each interval. Sockets are created here, on the
/// calling thread.
///
/// Three parts: [`open_streams`] connects and configures every socket,
/// [`sample_loop`] waits for the streams while it samples them (pacing
/// updates and interval reports), [`summarize`] turns the outcomes into
/// the summary.
pub fn run_send(cfg: SendConfig, mut on_report: impl FnMut(&Report)) -> Result<SendSummary> {
    validate(&cfg)?;
    let session = session_id(cfg.seed);
    let mut streams = open_streams(&cfg, session)?;
    let stop = cfg.stop.clone().unwrap_or_default();
    let t0 = Instant::now();
    let running = start_streams(&cfg, &streams, t0, &stop)?;
    let outcomes = sample_loop(&cfg, &mut streams, running, t0, &stop, &mut on_report);
    summarize(&cfg, &streams, outcomes, session, t0, stop.load(Ordering::Relaxed))
}

/// Refuses settings no run can have, in the library's own words (the CLI
/// names its flags before calling).
fn validate(cfg: &SendConfig) -> Result<()> {
    if cfg.parallel == 0 {
        return Err(Error::Config("the number of parallel streams must be at least 1".into()));
    }
    if let Volume::Duration(d) = cfg.volume {
        if d.is_zero() {
            return Err(Error::Config("the send duration must be above zero".into()));
        }
    }
    if cfg.interval.is_some_and(|i| i < Duration::from_millis(10)) {
        return Err(Error::Config("the report interval must be at least 10ms".into()));
    }
    if cfg.reverse && cfg.checksum && matches!(cfg.volume, Volume::Duration(_)) {
        return Err(Error::Config(
            "a checksum of a download needs a byte count (a timed download has no trailer)".into(),
        ));
    }
    Ok(())
}

/// Connects every stream and sets its pacing cap and header.
fn open_streams(cfg: &SendConfig, session: u64) -> Result<Vec<Stream>> {
    let mode = if cfg.reverse { Mode::Reverse } else { Mode::Upload };
    let n = u64::from(cfg.parallel);
    let mut streams = Vec::with_capacity(cfg.parallel.into());
    for idx in 0..cfg.parallel {
        let sock = connect(cfg)?;
        let info = tcpinfo::tcp_info(&sock).ok();
        let framing = cfg.framing.unwrap_or_else(|| match &info {
            Some(i) => framing_from_tcp_info(i, cfg.to.is_ipv6()),
            None => Framing::ETHERNET_1500_TS,
        });
        let mut pacer = cfg.pace.controller(cfg.parallel);
        let pacing_cap = pacer.as_mut().and_then(|p| p.initial(framing));
        if let (Some(rate), false) = (pacing_cap, cfg.reverse) {
            sockopt::set_max_pacing_rate(&sock, rate).map_err(|e| match e {
                // Linux takes no SO_MAX_PACING_RATE on the MPTCP socket itself.
                tcpaccel_sys::Error::Unsupported { source, .. } if cfg.mptcp => {
                    Error::Sys(tcpaccel_sys::Error::Unsupported {
                        op:
                            "pacing an MPTCP connection: SO_MAX_PACING_RATE is not available on MPTCP sockets"
                                .into(),
                        source,
                    })
                }
                other => Error::Sys(other),
            })?;
        }
        if let (Volume::Duration(_), false) = (cfg.volume, cfg.reverse) {
            crate::pump::limit_unsent(&sock, pacing_cap);
        }
        let (amount, until_bytes) = match cfg.volume {
            Volume::Bytes(total) => {
                let share = total / n + u64::from(u64::from(idx) < total % n);
                (Amount::Bytes(share), Some(share))
            }
            Volume::Duration(d) => (Amount::Millis(d.as_millis().min(u128::from(u64::MAX)) as u64), None),
        };
        let header = Header {
            mode,
            amount,
            checksum: cfg.checksum,
            stream: idx,
            streams: cfg.parallel,
            session,
            pace_bytes_per_sec: if cfg.reverse { pacing_cap.unwrap_or(0) } else { 0 },
            cc: if cfg.reverse { cfg.cc.clone() } else { None },
        };
        // MPTCP counts acknowledged data at the connection level, over all
        // subflows; remember where its data sequence starts.
        let mptcp_base = if cfg.mptcp { tcpinfo::mptcp_info(&sock).ok().map(|m| m.snd_una) } else { None };
        debug!(stream = idx, local = ?sock.local_addr().ok(), ?framing, ?pacing_cap, "connected");
        streams.push(Stream {
            idx,
            sock: Arc::new(sock),
            header,
            until_bytes,
            framing,
            pacer,
            pacing_cap,
            mptcp_base,
            counter: Arc::new(AtomicU64::new(0)),
        });
    }
    Ok(streams)
}

/// The streams' threads at work.
struct Running {
    handles: Vec<std::thread::JoinHandle<()>>,
    done: mpsc::Receiver<(u16, Result<Outcome>)>,
    abort: Arc<AtomicBool>,
}

/// Starts one thread per stream.
fn start_streams(
    cfg: &SendConfig,
    streams: &[Stream],
    t0: Instant,
    stop: &Arc<AtomicBool>,
) -> Result<Running> {
    let abort = Arc::new(AtomicBool::new(false));
    let deadline = match cfg.volume {
        Volume::Duration(d) => Some(t0 + d),
        Volume::Bytes(_) => None,
    };
    let (done_tx, done) = mpsc::channel::<(u16, Result<Outcome>)>();
    let mut handles = Vec::new();
    for st in streams {
        let sock = Arc::clone(&st.sock);
        let counter = Arc::clone(&st.counter);
        let abort_all = Arc::clone(&abort);
        let stop = Arc::clone(stop);
        let header = st.header.clone();
        let until = match (st.until_bytes, deadline) {
            (Some(b), _) => Until::Bytes(b),
            (None, Some(d)) => Until::Deadline(d),
            (None, None) => Until::Bytes(0),
        };
        let (seed, idx, to, timeout, checksum) =
            (cfg.seed, st.idx, cfg.to, cfg.receipt_timeout, cfg.checksum);
        let tx = done_tx.clone();
        let h = std::thread::Builder::new()
            .name(format!("send-{idx}"))
            .spawn(move || {
                let abort = abort_all;
                let r = if header.mode == Mode::Upload {
                    upload(
                        &sock,
                        &header,
                        until,
                        seed,
                        &counter,
                        Flags { stop: &stop, abort: &abort },
                        timeout,
                    )
                } else {
                    download(&sock, &header, timeout, checksum, &counter, &abort)
                }
                .map_err(|e| match e {
                    Error::Io { op, source, .. } => {
                        Error::Io { op: format!("stream {idx}: {op}"), addr: to, source }
                    }
                    other => other,
                });
                if r.is_err() {
                    abort.store(true, Ordering::Relaxed);
                }
                let _ = tx.send((idx, r));
            })
            .map_err(|e| {
                // Stop the streams already running before giving up.
                abort.store(true, Ordering::Relaxed);
                Error::io("spawn sender thread", cfg.to, e)
            })?;
        handles.push(h);
    }
    Ok(Running { handles, done, abort })
}

/// Waits for every stream while it samples them: pacing updates at the
/// controllers' period, an interval report every `cfg.interval`, and a
/// last partial interval so the reports add up to the whole run.
fn sample_loop(
    cfg: &SendConfig,
    streams: &mut [Stream],
    running: Running,
    t0: Instant,
    stop: &AtomicBool,
    on_report: &mut impl FnMut(&Report),
) -> Vec<Option<Result<Outcome>>> {
    let Running { handles, done, abort } = running;
    let mut outcomes: Vec<Option<Result<Outcome>>> = (0..cfg.parallel).map(|_| None).collect();
    let mut remaining = streams.len();
    let mut prev: Vec<Prev> = streams.iter().map(|_| Prev::default()).collect();
    let mut last_tick = t0;
    let tick = {
        let ctl = streams.iter().filter_map(|s| s.pacer.as_ref().and_then(|p| p.period())).min();
        match (cfg.interval, ctl) {
            (Some(i), Some(c)) => Some(i.min(c)),
            (i, c) => i.or(c),
        }
    };
    let mut next_tick = tick.map(|t| t0 + t);
    let mut next_report = cfg.interval.map(|i| t0 + i);
    while remaining > 0 {
        let mut wait = next_tick
            .map(|t| t.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_secs(3600));
        if cfg.stop.is_some() {
            // Notice a stop request promptly; a download can only be cut.
            wait = wait.min(pump::POLL);
            if cfg.reverse && stop.load(Ordering::Relaxed) {
                abort.store(true, Ordering::Relaxed);
            }
        }
        match done.recv_timeout(wait) {
            Ok((idx, r)) => {
                outcomes[usize::from(idx)] = Some(r);
                remaining -= 1;
                continue;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        let now = Instant::now();
        if next_tick.is_none_or(|t| now < t) {
            continue;
        }
        if let Some(t) = tick {
            next_tick = Some(now.max(next_tick.unwrap_or(now)) + t);
        }
        let samples: Vec<Sample> = streams.iter().map(Sample::take).collect();
        let core_now = tcpaccel_core::Instant::from_nanos(now.duration_since(t0).as_nanos() as u64);
        for (st, sample) in streams.iter_mut().zip(&samples) {
            if let (Some(p), Some(i), false) = (st.pacer.as_mut(), &sample.info, cfg.reverse) {
                if let Some(rate) = p.on_sample(core_now, i, st.framing) {
                    if let Err(e) = sockopt::set_max_pacing_rate(&*st.sock, rate) {
                        warn!(stream = st.idx, "pacing update failed: {e}");
                    } else {
                        st.pacing_cap = Some(rate);
                    }
                }
            }
        }
        if next_report.is_some_and(|r| now + Duration::from_millis(1) >= r) {
            let rep = interval_report(streams, &samples, &mut prev, t0, last_tick, now, cfg.reverse);
            on_report(&Report::Interval(rep));
            last_tick = now;
            next_report = cfg.interval.map(|i| now + i);
        }
    }
    for h in handles {
        let _ = h.join();
    }
    let end = Instant::now();
    if cfg.interval.is_some() && end.duration_since(last_tick) >= Duration::from_millis(5) {
        let samples: Vec<Sample> = streams.iter().map(Sample::take).collect();
        let rep = interval_report(streams, &samples, &mut prev, t0, last_tick, end, cfg.reverse);
        on_report(&Report::Interval(rep));
    }
    outcomes
}

/// The summary of a finished run: one entry per stream, then the sums.
fn summarize(
    cfg: &SendConfig,
    streams: &[Stream],
    outcomes: Vec<Option<Result<Outcome>>>,
    session: u64,
    t0: Instant,
    stopped_early: bool,
) -> Result<SendSummary> {
    let mut summaries = Vec::with_capacity(streams.len());
    let mut checksum_ok = cfg.checksum.then_some(true);
    for (st, out) in streams.iter().zip(outcomes) {
        let out = match out {
            Some(Ok(o)) => o,
            Some(Err(e)) => return Err(e),
            None => return Err(Error::Protocol { peer: cfg.to, msg: format!("stream {} vanished", st.idx) }),
        };
        if cfg.checksum && (out.sha256.is_none() || out.sha256 != out.peer_sha256) {
            checksum_ok = Some(false);
        }
        let sample = Sample::take(st);
        let dur = out.end.duration_since(t0);
        summaries.push(StreamSummary {
            stream: st.idx,
            local: st.sock.local_addr().ok(),
            bytes: out.bytes,
            app_bytes: out.app_bytes,
            duration_s: dur.as_secs_f64(),
            goodput_bps: tcpaccel_core::units::Rate::from_bytes_over(out.bytes, dur).bits_per_sec(),
            retransmits: sample.retransmits,
            cc: sockopt::get_congestion(&*st.sock).ok(),
            pacing_cap_bytes_per_sec: st.pacing_cap,
            applied_pacing_cap_bytes_per_sec: sample.applied_cap,
            framing: st.framing,
            sha256: out.sha256.as_ref().map(pump::hex32),
            peer_sha256: out.peer_sha256.as_ref().map(pump::hex32),
        });
    }
    let bytes = summaries.iter().map(|s| s.bytes).sum();
    let dur = summaries.iter().map(|s| s.duration_s).fold(0.0, f64::max);
    let retransmits = if cfg.reverse {
        None
    } else {
        summaries.iter().map(|s| s.retransmits.map(u64::from)).sum::<Option<u64>>()
    };
    Ok(SendSummary {
        kind: "summary",
        to: cfg.to,
        mode: if cfg.reverse { Mode::Reverse } else { Mode::Upload },
        pace: cfg.pace,
        session,
        seed: cfg.seed,
        bytes,
        duration_s: dur,
        goodput_bps: if dur > 0.0 { (bytes as f64 * 8.0 / dur) as u64 } else { 0 },
        retransmits,
        checksum_ok,
        stopped_early,
        streams: summaries,
    })
}

/// One reading of a stream's socket. A plain TCP socket answers TCP_INFO
/// for itself; an MPTCP socket's TCP_INFO describes its first subflow only
/// (which carries nothing once a lane switch made it a backup), so its
/// acknowledged bytes come from the connection-level data sequence and its
/// retransmits from all subflows together, while the per-connection fields
/// (cwnd, RTT, pacing) are the subflow that sent most recently.
struct Sample {
    info: Option<TcpInfo>,
    /// Payload and header bytes the receiver acknowledged so far.
    acked: Option<u64>,
    /// Segments retransmitted so far (all subflows).
    retransmits: Option<u32>,
    /// The pacing cap the kernel applies to the socket, whoever set it
    /// (`send --pace`, the cgroup pacer, a preloaded shim), bytes/s.
    applied_cap: Option<u64>,
}

impl Sample {
    fn take(st: &Stream) -> Sample {
        let sock = &*st.sock;
        let subflows = match st.mptcp_base {
            Some(_) => tcpinfo::mptcp_subflows_tcp_info(sock).ok().filter(|v| !v.is_empty()),
            None => None,
        };
        if let (Some(base), Some(subs)) = (st.mptcp_base, subflows) {
            let acked = tcpinfo::mptcp_info(sock).ok().map(|m| m.snd_una.wrapping_sub(base));
            let retransmits = Some(subs.iter().map(|i| i.total_retrans).sum());
            let applied_cap = subs
                .iter()
                .filter_map(|i| i.max_pacing_rate)
                .filter(|&r| r != sockopt::PACING_UNLIMITED)
                .max();
            let info = subs.into_iter().min_by_key(|i| i.last_data_sent);
            return Sample { info, acked, retransmits, applied_cap };
        }
        let info = tcpinfo::tcp_info(sock).ok();
        let applied_cap = sockopt::get_max_pacing_rate(sock)
            .ok()
            .or_else(|| info.as_ref().and_then(|i| i.max_pacing_rate))
            .filter(|&r| r != sockopt::PACING_UNLIMITED);
        // TCP counts the SYN as one acknowledged byte.
        let acked = info.as_ref().and_then(|i| i.bytes_acked).map(|a| a.saturating_sub(1));
        Sample { retransmits: info.as_ref().map(|i| i.total_retrans), info, acked, applied_cap }
    }
}

#[derive(Default)]
struct Prev {
    retrans: Option<u32>,
    reported: u64,
}

fn interval_report(
    streams: &[Stream],
    samples: &[Sample],
    prev: &mut [Prev],
    t0: Instant,
    from: Instant,
    to: Instant,
    reverse: bool,
) -> IntervalReport {
    let dt = to.duration_since(from);
    let mut out = Vec::with_capacity(streams.len());
    for ((st, sample), p) in streams.iter().zip(samples).zip(prev.iter_mut()) {
        let app = st.counter.load(Ordering::Relaxed);
        // Upload: bytes the receiver acknowledged (what left our buffer is
        // not yet goodput), less our header; the FIN is acknowledged like a
        // byte, so never more than was written. Reverse: what we read.
        let upto = match (reverse, sample.acked) {
            (false, Some(a)) => a.saturating_sub(HEADER_LEN as u64).min(app),
            _ => app,
        };
        let bytes = upto.saturating_sub(p.reported);
        let retrans = sample.retransmits;
        let d_retrans = match (retrans, p.retrans) {
            (Some(r), Some(pr)) => Some(r.saturating_sub(pr)),
            (Some(r), None) => Some(r),
            _ => None,
        };
        *p = Prev { retrans: retrans.or(p.retrans), reported: p.reported + bytes };
        out.push(StreamSample::new(st.idx, bytes, dt, d_retrans, sample.info.as_ref()));
    }
    IntervalReport::new(from.duration_since(t0), to.duration_since(t0), out)
}

/// A stream's two flags: `stop` ends it in order, `abort` cuts it.
#[derive(Clone, Copy)]
struct Flags<'a> {
    stop: &'a AtomicBool,
    abort: &'a AtomicBool,
}

/// Waits (up to `timeout`) for the receiver's receipt, `what` in errors
/// ("the receipt", "the server's answer", ...), and decodes it; a refusal
/// is [`Error::Rejected`]. The one reading of a receipt for every sender.
pub(crate) fn read_receipt(
    sock: &TcpStream,
    peer: SocketAddr,
    timeout: Duration,
    abort: &AtomicBool,
    what: &str,
) -> Result<Receipt> {
    let msg = pump::read_msg::<RECEIPT_LEN>(sock, timeout, abort)
        .map_err(|e| Error::io(format!("wait for {what}"), peer, e))?
        .ok_or_else(|| Error::Protocol { peer, msg: format!("closed without {what}") })?;
    let r = Receipt::decode(&msg).map_err(|e| Error::Protocol { peer, msg: e.to_string() })?;
    match r.status {
        Err(why) => Err(Error::Rejected { peer, why }),
        Ok(()) => Ok(r),
    }
}

fn upload(
    sock: &TcpStream,
    header: &Header,
    until: Until,
    seed: u64,
    counter: &AtomicU64,
    flags: Flags<'_>,
    receipt_timeout: Duration,
) -> Result<Outcome> {
    let Flags { stop, abort } = flags;
    let peer = sock.peer_addr().map_err(|e| Error::Sys(tcpaccel_sys::Error::os("getpeername", e)))?;
    let io = |op: &'static str| move |e| Error::io(op, peer, e);
    pump::write_msg(sock, &header.encode(), receipt_timeout).map_err(io("send header"))?;
    let buf = pump::pattern(seed, u64::from(header.stream));
    let mut hasher = header.checksum.then(Sha256::new);
    let written = pump::write_data(sock, &buf, until, counter, hasher.as_mut(), Some(stop), abort);
    let receipt = |e| -> Error {
        // A refused header closes the connection: explain with the receipt.
        match pump::read_msg::<RECEIPT_LEN>(sock, Duration::from_secs(1), abort) {
            Ok(Some(b)) => match Receipt::decode(&b) {
                Ok(Receipt { status: Err(why), .. }) => Error::Rejected { peer, why },
                _ => Error::io("send data", peer, e),
            },
            _ => Error::io("send data", peer, e),
        }
    };
    let written = written.map_err(receipt)?;
    sock.shutdown(Shutdown::Write).map_err(io("shutdown(write)"))?;
    let r = read_receipt(sock, peer, receipt_timeout, abort, "the receipt")?;
    let end = Instant::now();
    if r.bytes != written {
        warn!(%peer, stream = header.stream, written, received = r.bytes, "receiver counted a different byte total");
    }
    Ok(Outcome {
        bytes: r.bytes,
        app_bytes: written,
        end,
        sha256: hasher.map(|h| h.finalize().into()),
        peer_sha256: r.sha256,
    })
}

fn download(
    sock: &TcpStream,
    header: &Header,
    timeout: Duration,
    checksum: bool,
    counter: &AtomicU64,
    abort: &AtomicBool,
) -> Result<Outcome> {
    let peer = sock.peer_addr().map_err(|e| Error::Sys(tcpaccel_sys::Error::os("getpeername", e)))?;
    let io = |op: &'static str| move |e| Error::io(op, peer, e);
    let header_bytes: [u8; HEADER_LEN] = header.encode();
    pump::write_msg(sock, &header_bytes, timeout).map_err(io("send header"))?;
    read_receipt(sock, peer, timeout, abort, "the server's answer")?;
    let mut hasher = checksum.then(Sha256::new);
    let limit = match header.amount {
        Amount::Bytes(n) => Some(n),
        Amount::Millis(_) => None,
    };
    let (got, _) =
        pump::read_data(sock, limit, counter, hasher.as_mut(), timeout, abort).map_err(io("receive data"))?;
    let end = Instant::now();
    let mut peer_sha256 = None;
    if let Some(n) = limit {
        if got != n {
            return Err(Error::Protocol { peer, msg: format!("server sent {got} of {n} bytes") });
        }
        peer_sha256 = read_receipt(sock, peer, timeout, abort, "the trailing receipt")?.sha256;
    }
    // Our FIN tells the server we have everything.
    let _ = sock.shutdown(Shutdown::Write);
    Ok(Outcome { bytes: got, app_bytes: got, end, sha256: hasher.map(|h| h.finalize().into()), peer_sha256 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn stream_on(sock: TcpStream) -> Stream {
        Stream {
            idx: 0,
            sock: Arc::new(sock),
            header: Header {
                mode: Mode::Upload,
                amount: Amount::Bytes(0),
                checksum: false,
                stream: 0,
                streams: 1,
                session: 0,
                pace_bytes_per_sec: 0,
                cc: None,
            },
            until_bytes: None,
            framing: Framing::ETHERNET_1500_TS,
            pacer: None,
            pacing_cap: None,
            mptcp_base: None,
            counter: Arc::new(AtomicU64::new(0)),
        }
    }

    #[test]
    fn a_cap_set_from_outside_is_read_back_from_the_socket() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let _peer = l.accept().unwrap();
        let st = stream_on(c);
        assert_eq!(Sample::take(&st).applied_cap, None, "no cap yet");
        // What the cgroup pacer's BPF program or the shim would do.
        sockopt::set_max_pacing_rate(&*st.sock, 1_250_000).unwrap();
        assert_eq!(Sample::take(&st).applied_cap, Some(1_250_000));
        assert_eq!(st.pacing_cap, None, "send itself set nothing");
    }

    #[test]
    fn library_errors_name_no_cli_flags() {
        let mut cfg = SendConfig::new("127.0.0.1:9".parse().unwrap());
        cfg.parallel = 0;
        let e = validate(&cfg).unwrap_err().to_string();
        assert!(!e.contains("--"), "{e}");
        let mut cfg = SendConfig::new("127.0.0.1:9".parse().unwrap());
        cfg.interval = Some(Duration::from_millis(1));
        let e = validate(&cfg).unwrap_err().to_string();
        assert!(!e.contains("--") && e.contains("10ms"), "{e}");
    }

    /// The one receipt reader: an accepted receipt comes back, a refusal is
    /// `Rejected`, a peer that closes first or sends a non-receipt is a
    /// protocol error naming what was awaited.
    #[test]
    fn a_receipt_is_read_checked_and_named_in_errors() {
        use crate::proto::Reject;
        use std::io::Write;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = l.local_addr().unwrap();
        let abort = AtomicBool::new(false);
        let answer = |bytes: &[u8]| {
            let c = TcpStream::connect(peer).unwrap();
            let (mut s, _) = l.accept().unwrap();
            s.write_all(bytes).unwrap();
            drop(s);
            read_receipt(&c, peer, Duration::from_secs(5), &abort, "the receipt")
        };
        let ok = answer(&Receipt::ok(42, None).encode()).unwrap();
        assert_eq!((ok.status, ok.bytes), (Ok(()), 42));
        match answer(&Receipt::rejected(Reject::BadRequest).encode()) {
            Err(Error::Rejected { why: Reject::BadRequest, .. }) => {}
            other => panic!("{other:?}"),
        }
        match answer(&[]) {
            Err(Error::Protocol { msg, .. }) => assert_eq!(msg, "closed without the receipt"),
            other => panic!("{other:?}"),
        }
        match answer(&[0xEE; RECEIPT_LEN]) {
            Err(Error::Protocol { msg, .. }) => assert!(msg.contains("bad receipt"), "{msg}"),
            other => panic!("{other:?}"),
        }
    }
}
