//! The receiver (`tcpaccel recv`): accepts many senders at once, counts (and
//! optionally hashes) each connection's bytes, answers with a receipt, and
//! in reverse mode becomes the data sender.
//!
//! What it is: [`spawn_recv`] creates the listening socket on the calling
//! thread (so it lives in that thread's network namespace), then serves it
//! from plain threads: one accept thread, one thread per connection.
//! Accepted sockets belong to the listener's namespace whichever thread
//! touches them. What it is not: no async runtime, no rate limiting of
//! clients beyond the handshake timeout.

use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;
use sha2::{Digest, Sha256};
use tcpaccel_core::units::Rate;
use tcpaccel_sys::sockopt;
use tcpaccel_sys::tcpinfo;
use tracing::{debug, warn};

use crate::pace::{framing_from_tcp_info, Framing, Pace};
use crate::proto::{Amount, Header, Mode, Receipt, Reject, HEADER_LEN};
use crate::pump::{self, Until};
use crate::{Error, Result};

/// Receiver settings; build with [`RecvConfig::new`].
#[derive(Debug, Clone, Serialize)]
pub struct RecvConfig {
    pub listen: SocketAddr,
    /// Hash every connection's data, whether or not the sender asks.
    pub checksum: bool,
    pub mptcp: bool,
    /// Buffer requests applied to the listener (inherited by accepted sockets).
    pub sndbuf: Option<u64>,
    pub rcvbuf: Option<u64>,
    /// Default congestion control of accepted sockets (reverse mode may override).
    pub cc: Option<String>,
    /// Stop after the first complete session (all its streams finished).
    pub once: bool,
    /// Pacing when we send (reverse mode) and the sender did not ask for a
    /// rate itself; the on-wire rate is split over the session's streams.
    pub pace: Pace,
    /// How long a client may take to send its header.
    #[serde(serialize_with = "crate::report::secs")]
    pub handshake_timeout: Duration,
    /// A connection without any data for this long is dropped.
    #[serde(serialize_with = "crate::report::secs")]
    pub idle_timeout: Duration,
    /// Seed of the payload pattern in reverse mode.
    pub seed: u64,
}

impl RecvConfig {
    pub fn new(listen: SocketAddr) -> RecvConfig {
        RecvConfig {
            listen,
            checksum: false,
            mptcp: false,
            sndbuf: None,
            rcvbuf: None,
            cc: None,
            once: false,
            pace: Pace::None,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            seed: 1,
        }
    }
}

/// How a connection ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "status", content = "reason")]
pub enum ConnStatus {
    Ok,
    Rejected(Reject),
    Error(String),
    /// Closed cleanly without sending a single byte: a reachability or
    /// RTT probe (`tcpaccel doctor --target` times TCP handshakes and
    /// closes), a health check or a port scan. Not a failed transfer.
    Empty,
}

/// One finished connection; serialized with `"type": "connection"`.
#[derive(Debug, Clone, Serialize)]
pub struct ConnReport {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub peer: SocketAddr,
    #[serde(flatten)]
    pub status: ConnStatus,
    pub mode: Option<Mode>,
    pub session: Option<u64>,
    pub stream: Option<u16>,
    pub streams: Option<u16>,
    /// Received (upload) or sent (reverse) data bytes, header excluded.
    pub bytes: u64,
    /// From the end of the header to the last byte.
    pub duration_s: f64,
    pub goodput_bps: u64,
    pub sha256: Option<String>,
    /// Reverse mode: our socket's retransmitted segments.
    pub retransmits: Option<u32>,
}

/// Everything the receiver saw; serialized with `"type": "summary"`.
#[derive(Debug, Clone, Serialize)]
pub struct RecvSummary {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub listen: SocketAddr,
    pub connections: usize,
    pub ok: usize,
    pub rejected: usize,
    pub errors: usize,
    /// Connections closed without sending anything ([`ConnStatus::Empty`]).
    pub empty: usize,
    pub bytes: u64,
    /// Sessions (one `send` run each) whose streams all finished well.
    pub sessions_complete: usize,
    pub conns: Vec<ConnReport>,
}

/// What [`RecvHandle::next_event`] returns.
#[derive(Debug)]
pub enum Event {
    Conn(ConnReport),
    Timeout,
    /// The receiver stopped (after `once`, or after [`RecvHandle::stop`]).
    Closed,
}

/// A running receiver.
pub struct RecvHandle {
    local: SocketAddr,
    stop: Arc<AtomicBool>,
    events: mpsc::Receiver<ConnReport>,
    accept: Option<JoinHandle<Vec<ConnReport>>>,
    listen: SocketAddr,
}

impl RecvHandle {
    /// The bound address (with the port the kernel chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Waits up to `timeout` for the next finished connection.
    pub fn next_event(&self, timeout: Duration) -> Event {
        match self.events.recv_timeout(timeout) {
            Ok(c) => Event::Conn(c),
            Err(mpsc::RecvTimeoutError::Timeout) => Event::Timeout,
            Err(mpsc::RecvTimeoutError::Disconnected) => Event::Closed,
        }
    }

    /// True once the receiver stopped on its own (`once`).
    pub fn is_finished(&self) -> bool {
        self.accept.as_ref().is_none_or(|h| h.is_finished())
    }

    /// Stops accepting, ends running connections, and returns the summary.
    pub fn stop(mut self) -> RecvSummary {
        self.stop.store(true, Ordering::Relaxed);
        let conns = self.accept.take().and_then(|h| h.join().ok()).unwrap_or_default();
        summarize(self.listen, conns)
    }
}

impl Drop for RecvHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

fn summarize(listen: SocketAddr, conns: Vec<ConnReport>) -> RecvSummary {
    let count = |f: fn(&ConnStatus) -> bool| conns.iter().filter(|c| f(&c.status)).count();
    let mut sessions: HashMap<u64, (u16, u16)> = HashMap::new();
    for c in conns.iter().filter(|c| c.status == ConnStatus::Ok) {
        if let (Some(s), Some(n)) = (c.session, c.streams) {
            sessions.entry(s).or_insert((n, 0)).1 += 1;
        }
    }
    RecvSummary {
        kind: "summary",
        listen,
        connections: conns.len(),
        ok: count(|s| matches!(s, ConnStatus::Ok)),
        rejected: count(|s| matches!(s, ConnStatus::Rejected(_))),
        errors: count(|s| matches!(s, ConnStatus::Error(_))),
        empty: count(|s| matches!(s, ConnStatus::Empty)),
        bytes: conns.iter().map(|c| c.bytes).sum(),
        sessions_complete: sessions.values().filter(|(n, done)| done >= n).count(),
        conns,
    }
}

/// Binds and starts serving; returns at once. The listening socket is
/// created on the calling thread.
pub fn spawn_recv(cfg: RecvConfig) -> Result<RecvHandle> {
    let fd = crate::socket(&cfg.listen, cfg.mptcp, cfg.sndbuf, cfg.rcvbuf, cfg.cc.as_deref())?;
    sockopt::set_reuseaddr(&fd, true)?;
    sockopt::bind(&fd, &cfg.listen)?;
    sockopt::listen(&fd, 1024)?;
    let listener = TcpListener::from(fd);
    let local = listener.local_addr().map_err(|e| Error::io("getsockname", cfg.listen, e))?;
    listener.set_nonblocking(true).map_err(|e| Error::io("set listener non-blocking", local, e))?;
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let stop2 = Arc::clone(&stop);
    let listen = cfg.listen;
    let accept = std::thread::Builder::new()
        .name("recv-accept".into())
        .spawn(move || accept_loop(listener, cfg, stop2, tx))
        .map_err(|e| Error::io("spawn accept thread", local, e))?;
    Ok(RecvHandle { local, stop, events: rx, accept: Some(accept), listen })
}

fn accept_loop(
    listener: TcpListener,
    cfg: RecvConfig,
    stop: Arc<AtomicBool>,
    events: mpsc::Sender<ConnReport>,
) -> Vec<ConnReport> {
    let cfg = Arc::new(cfg);
    let done: Arc<Mutex<Vec<ConnReport>>> = Arc::default();
    let mut workers: Vec<JoinHandle<()>> = Vec::new();
    let (fin_tx, fin_rx) = mpsc::channel::<ConnReport>();
    let mut sessions: HashMap<u64, (u16, u16)> = HashMap::new();
    loop {
        // Forward finished connections; `once` stops after a full session.
        while let Ok(c) = fin_rx.try_recv() {
            if let (ConnStatus::Ok, Some(s), Some(n)) = (&c.status, c.session, c.streams) {
                let e = sessions.entry(s).or_insert((n, 0));
                e.1 += 1;
                if cfg.once && e.1 >= e.0 {
                    stop.store(true, Ordering::Relaxed);
                }
            }
            if let Ok(mut d) = done.lock() {
                d.push(c.clone());
            }
            let _ = events.send(c);
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        workers.retain(|h| !h.is_finished());
        match listener.accept() {
            Ok((sock, peer)) => {
                debug!(%peer, "accepted");
                let (cfg, stop, fin) = (Arc::clone(&cfg), Arc::clone(&stop), fin_tx.clone());
                let spawned = std::thread::Builder::new().name(format!("recv-{peer}")).spawn(move || {
                    let report = serve(sock, peer, &cfg, &stop);
                    let _ = fin.send(report);
                });
                match spawned {
                    Ok(h) => workers.push(h),
                    Err(e) => warn!(%peer, "cannot spawn a connection thread: {e}"),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                warn!("accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    drop(listener);
    for h in workers {
        let _ = h.join();
    }
    drop(fin_tx);
    while let Ok(c) = fin_rx.recv() {
        if let Ok(mut d) = done.lock() {
            d.push(c.clone());
        }
        let _ = events.send(c);
    }
    let conns = done.lock().map(|mut d| std::mem::take(&mut *d)).unwrap_or_default();
    conns
}

struct Served {
    bytes: u64,
    start: Instant,
    end: Instant,
    sha: Option<[u8; 32]>,
    retransmits: Option<u32>,
}

fn serve(sock: TcpStream, peer: SocketAddr, cfg: &RecvConfig, stop: &AtomicBool) -> ConnReport {
    let mut rep = ConnReport {
        kind: "connection",
        peer,
        status: ConnStatus::Ok,
        mode: None,
        session: None,
        stream: None,
        streams: None,
        bytes: 0,
        duration_s: 0.0,
        goodput_bps: 0,
        sha256: None,
        retransmits: None,
    };
    if let Err(e) = sock.set_nonblocking(false) {
        rep.status = ConnStatus::Error(format!("set blocking: {e}"));
        return rep;
    }
    let raw = match pump::read_msg::<HEADER_LEN>(&sock, cfg.handshake_timeout, stop) {
        Ok(Some(b)) => b,
        Ok(None) => {
            // A clean close before the first byte; a close part-way through
            // the header is still an error (read_msg reports it as one).
            rep.status = ConnStatus::Empty;
            return rep;
        }
        Err(e) => {
            rep.status = ConnStatus::Error(format!("reading header: {e}"));
            return rep;
        }
    };
    let header = match Header::decode(&raw) {
        Ok(h) => h,
        Err(why) => {
            warn!(%peer, "refused connection: {why}");
            refuse(&sock, why, stop);
            rep.status = ConnStatus::Rejected(why);
            return rep;
        }
    };
    rep.mode = Some(header.mode);
    rep.session = Some(header.session);
    rep.stream = Some(header.stream);
    rep.streams = Some(header.streams);
    let served = match header.mode {
        Mode::Upload => serve_upload(&sock, &header, cfg, stop),
        Mode::Reverse => serve_reverse(&sock, &header, cfg, stop),
    };
    match served {
        Ok(s) => {
            let dur = s.end.duration_since(s.start);
            rep.bytes = s.bytes;
            rep.duration_s = dur.as_secs_f64();
            rep.goodput_bps = Rate::from_bytes_over(s.bytes, dur).bits_per_sec();
            rep.sha256 = s.sha.as_ref().map(pump::hex32);
            rep.retransmits = s.retransmits;
        }
        Err((bytes, e)) => {
            rep.bytes = bytes;
            rep.status = ConnStatus::Error(e);
        }
    }
    rep
}

/// Answers a bad header, then lets the client close first so that our
/// close does not turn into a reset that could discard the answer.
fn refuse(sock: &TcpStream, why: Reject, stop: &AtomicBool) {
    if pump::write_msg(sock, &Receipt::rejected(why).encode(), Duration::from_secs(2)).is_ok() {
        let _ = sock.shutdown(Shutdown::Write);
        let sink = AtomicU64::new(0);
        let _ = pump::read_data(sock, Some(1 << 20), &sink, None, Duration::from_secs(1), stop);
    }
}

type ServeResult = std::result::Result<Served, (u64, String)>;

fn serve_upload(sock: &TcpStream, h: &Header, cfg: &RecvConfig, stop: &AtomicBool) -> ServeResult {
    let start = Instant::now();
    let counter = AtomicU64::new(0);
    let mut hasher = (cfg.checksum || h.checksum).then(Sha256::new);
    // Read to EOF even with an announced count, so that a sender sending
    // more or less than it announced shows up in the receipt.
    let (bytes, _) = pump::read_data(sock, None, &counter, hasher.as_mut(), cfg.idle_timeout, stop)
        .map_err(|e| (counter.load(Ordering::Relaxed), format!("receiving: {e}")))?;
    let end = Instant::now();
    let sha: Option<[u8; 32]> = hasher.map(|h| h.finalize().into());
    if let Amount::Bytes(n) = h.amount {
        if n != bytes {
            warn!(peer = ?sock.peer_addr().ok(), announced = n, received = bytes, "byte count differs from header");
        }
    }
    pump::write_msg(sock, &Receipt::ok(bytes, sha).encode(), Duration::from_secs(10))
        .map_err(|e| (bytes, format!("sending receipt: {e}")))?;
    let _ = sock.shutdown(Shutdown::Write);
    Ok(Served { bytes, start, end, sha, retransmits: None })
}

fn serve_reverse(sock: &TcpStream, h: &Header, cfg: &RecvConfig, stop: &AtomicBool) -> ServeResult {
    if let Some(cc) = &h.cc {
        if let Err(e) = sockopt::set_congestion(sock, cc) {
            let _ = pump::write_msg(
                sock,
                &Receipt::rejected(Reject::BadRequest).encode(),
                Duration::from_secs(2),
            );
            return Err((0, format!("{e}")));
        }
    }
    // The sender's requested cap wins; otherwise our own --pace, converted
    // with this socket's framing.
    let cap = if h.pace_bytes_per_sec > 0 {
        Some(h.pace_bytes_per_sec)
    } else {
        let framing = match (tcpinfo::tcp_info(sock), sock.peer_addr()) {
            (Ok(i), Ok(peer)) => framing_from_tcp_info(&i, peer.is_ipv6()),
            _ => Framing::ETHERNET_1500_TS,
        };
        cfg.pace.controller(h.streams).and_then(|mut c| c.initial(framing))
    };
    if let Some(rate) = cap {
        sockopt::set_max_pacing_rate(sock, rate).map_err(|e| (0, e.to_string()))?;
    }
    pump::write_msg(sock, &Receipt::ok(0, None).encode(), Duration::from_secs(10))
        .map_err(|e| (0, format!("answering: {e}")))?;
    let start = Instant::now();
    let until = match h.amount {
        Amount::Bytes(n) => Until::Bytes(n),
        Amount::Millis(ms) => {
            pump::limit_unsent(sock, cap);
            Until::Deadline(start + Duration::from_millis(ms))
        }
    };
    let counter = AtomicU64::new(0);
    let buf = pump::pattern(cfg.seed ^ h.session, u64::from(h.stream));
    let mut hasher = (cfg.checksum || h.checksum).then(Sha256::new);
    let sent = pump::write_data(sock, &buf, until, &counter, hasher.as_mut(), None, stop)
        .map_err(|e| (counter.load(Ordering::Relaxed), format!("sending: {e}")))?;
    let sha: Option<[u8; 32]> = hasher.map(|h| h.finalize().into());
    if matches!(h.amount, Amount::Bytes(_)) {
        pump::write_msg(sock, &Receipt::ok(sent, sha).encode(), Duration::from_secs(10))
            .map_err(|e| (sent, format!("sending trailer: {e}")))?;
    }
    let _ = sock.shutdown(Shutdown::Write);
    // Wait for the client's FIN: the transfer is complete when it has read
    // everything, and closing first could reset unread data.
    let sink = AtomicU64::new(0);
    let _ = pump::read_data(sock, Some(1 << 20), &sink, None, cfg.idle_timeout, stop);
    let end = Instant::now();
    let retransmits = tcpinfo::tcp_info(sock).ok().map(|i| i.total_retrans);
    Ok(Served { bytes: sent, start, end, sha, retransmits })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn wait_for(h: &RecvHandle, n: usize) -> Vec<ConnReport> {
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while got.len() < n && Instant::now() < deadline {
            if let Event::Conn(c) = h.next_event(Duration::from_millis(200)) {
                got.push(c);
            }
        }
        got
    }

    /// Issue 14 item 15: a connection closed before its first byte (the
    /// doctor's handshake probe) is empty, not an error; one closed part-way
    /// through its header still is an error.
    #[test]
    fn a_probe_is_empty_and_a_cut_header_an_error() {
        let h = spawn_recv(RecvConfig::new("127.0.0.1:0".parse().unwrap())).expect("start recv");
        let addr = h.local_addr();
        drop(TcpStream::connect(addr).expect("probe"));
        let got = wait_for(&h, 1);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].status, ConnStatus::Empty);
        let mut cut = TcpStream::connect(addr).expect("connect");
        cut.write_all(&[1, 2, 3]).expect("write");
        drop(cut);
        let got = wait_for(&h, 1);
        assert!(matches!(&got[0].status, ConnStatus::Error(e) if e.contains("header")), "{got:?}");
        let s = h.stop();
        assert_eq!((s.connections, s.empty, s.errors), (2, 1, 1), "{s:?}");
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["conns"][0]["status"], "empty");
    }
}
