//! The sending side of the flow engine: one flow's task ([`run_one`]) from
//! its wake-up to the sink's answer, with RepFlow's race of two copies and
//! the per-lane counters read from TCP_INFO.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use tcpaccel_core::workload::{Flow, FlowClass};
use tcpaccel_sys::netns;
use tcpaccel_sys::sockopt::{self, Family};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{oneshot, watch};

use super::plan::{bytes_per_lane, encode_header, Path, Planned};
use super::{Close, Ctx, CutAt, FlowFailure, FlowResult, Writes, ANSWER, CHUNK, FIN_WAIT, HEADER_LEN};

/// The payload: zeros, written from one shared buffer.
static ZEROS: [u8; CHUNK] = [0; CHUNK];

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

pub(super) async fn run_one(
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
                r.conns = done.conns;
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
    conns: Vec<(SocketAddr, SocketAddr)>,
}

/// Carries one flow on its path, or races its two copies (RepFlow): the first
/// copy answered wins and the other is dropped, which resets it.
async fn carry(ctx: &Ctx, p: &Planned, progress: &Progress) -> Result<(Delivered, Option<String>), String> {
    let f = &p.flow;
    progress.reached(Progress::CONNECTING, 0);
    let mut fds = make_sockets(&p.paths)?.into_iter();
    match (p.paths.as_slice(), fds.next(), fds.next()) {
        ([one], Some(fd), None) => transfer(ctx, one, fd, f, progress).await.map(|d| (d, None)),
        ([a, b], Some(fa), Some(fb)) => {
            let ta = transfer(ctx, a, fa, f, progress);
            let tb = transfer(ctx, b, fb, f, progress);
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
    f: &Flow,
    progress: &Progress,
) -> Result<Delivered, String> {
    let (id, bytes) = (f.id, f.bytes);
    let dst = SocketAddr::from((path.dst, ctx.port));
    let what = format!("{} {} -> {dst}", path.lane, path.src);
    sockopt::set_congestion(&fd, &ctx.cc).map_err(|e| format!("{what}: {e}"))?;
    let chunk = match ctx.writes {
        Writes::Bulk => CHUNK,
        // A long flow's send queue stays backlogged, and Nagle cuts a
        // backlogged queue into full segments whatever the write size: on
        // the wire only its first segment differs (inferred). Its 512-byte
        // writes (tens of thousands a second) only cost a CPU-bound host.
        Writes::Small { .. } if f.class == FlowClass::Long => CHUNK,
        Writes::Small { size } => size.clamp(HEADER_LEN + 1, CHUNK),
    };
    sockopt::set_nodelay(&fd, ctx.writes == Writes::Bulk).map_err(|e| format!("{what}: {e}"))?;
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
    let first = bytes.min((chunk - HEADER_LEN) as u64) as usize;
    let mut head = Vec::with_capacity(HEADER_LEN + first);
    head.extend_from_slice(&encode_header(id, bytes));
    head.resize(HEADER_LEN + first, 0);
    s.write_all(&head).await.map_err(|e| format!("{what}: write: {e}"))?;
    let mut left = bytes - first as u64;
    progress.reached(Progress::WRITING, first as u64);
    while left > 0 {
        let n = left.min(chunk as u64) as usize;
        s.write_all(&ZEROS[..n])
            .await
            .map_err(|e| format!("{what}: write: {e} with {left} of {bytes} bytes unsent"))?;
        left -= n as u64;
        progress.reached(Progress::WRITING, bytes - left);
    }
    if ctx.close == Close::Fin {
        s.shutdown().await.map_err(|e| format!("{what}: shutdown after the data: {e}"))?;
    }
    progress.reached(Progress::ANSWER, bytes);
    let mut answer = [0u8; 1];
    s.read_exact(&mut answer).await.map_err(|e| format!("{what}: waiting for the answer: {e}"))?;
    if answer[0] != ANSWER {
        return Err(format!("{what}: sink answered {:#04x}, not {ANSWER:#04x}", answer[0]));
    }
    let at = std::time::Instant::now();
    let (lane_bytes, retrans_bytes, conns) = match sent_by_local_address(&s, path.mptcp, dst) {
        Ok(sent) => {
            let once: Vec<_> = sent.iter().map(|c| (c.local.ip(), c.sent_once)).collect();
            let conns = sent.iter().map(|c| (c.local, c.remote)).collect();
            (bytes_per_lane(&once, &path.src_lanes), sent.iter().map(|c| c.retrans).sum(), conns)
        }
        Err(e) => {
            tracing::warn!(%what, error = %e, "per-lane byte counters unreadable; the flow has none");
            (BTreeMap::new(), None, Vec::new())
        }
    };
    if ctx.close == Close::Fin {
        // The sink closes after its answer: wait for that end of stream,
        // then close gracefully (FINs, not a reset). Bounded: a missing
        // close costs this flow nothing but the wait.
        let mut rest = [0u8; 64];
        let eof = async {
            while s.read(&mut rest).await.map_err(|e| e.to_string())? > 0 {}
            Ok::<(), String>(())
        };
        match tokio::time::timeout(FIN_WAIT, eof).await {
            Ok(Ok(())) => {
                if let Err(e) = sockopt::set_linger_off(&s) {
                    tracing::debug!(%what, error = %e, "SO_LINGER off refused; the close resets");
                }
            }
            Ok(Err(e)) => tracing::debug!(%what, error = %e, "after the answer"),
            Err(_) => tracing::debug!(%what, "the sink did not close within {FIN_WAIT:?}"),
        }
    }
    Ok(Delivered { at, lane_bytes, retrans_bytes, conns })
}

/// One connection's (or MPTCP subflow's) send counters.
struct Sent {
    local: SocketAddr,
    remote: SocketAddr,
    /// Payload bytes sent once each (`tcpi_bytes_sent` less `tcpi_bytes_retrans`).
    sent_once: u64,
    /// `tcpi_bytes_retrans` (`None`: the kernel's TCP_INFO is too short).
    retrans: Option<u64>,
}

/// The payload bytes each connection sent, by local address: one entry per
/// MPTCP subflow, or the plain socket's own. Sent, not acknowledged: when
/// the answer arrives on one subflow, another's last ACKs may still be on
/// their way (a delayed ACK holds one for up to 40 ms).
fn sent_by_local_address(s: &TcpStream, mptcp: bool, dst: SocketAddr) -> Result<Vec<Sent>, String> {
    let sent = |local: SocketAddr, remote: SocketAddr, i: &tcpaccel_sys::tcpinfo::TcpInfo| {
        let once = i.bytes_sent.unwrap_or(0).saturating_sub(i.bytes_retrans.unwrap_or(0));
        Sent { local, remote, sent_once: once, retrans: i.bytes_retrans }
    };
    if mptcp {
        match tcpaccel_sys::tcpinfo::mptcp_subflows(s) {
            Ok(subs) => return Ok(subs.iter().map(|f| sent(f.local, f.remote, &f.info)).collect()),
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
    // The address it connected to, not getpeername: a sink that closed
    // after its answer may have reset the socket already (a RepFlow copy
    // that lost), and getpeername then fails with ENOTCONN while TCP_INFO
    // still has the counters. Such copies lost their lane bytes: 70 / 219
    // / 354 of 81 / 244 / 388 flows in one web-search run.
    Ok(vec![sent(local, dst, &info)])
}
