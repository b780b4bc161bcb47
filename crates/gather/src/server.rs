//! The gathering server: accepts control, data and status connections on one
//! port, reassembles every client's data in order into its sink, applies the
//! [GatherQoS] §3.1 buffer allocation live with `TCP_WINDOW_CLAMP`, runs the
//! §3.2 stream-count search per client, and reports status.
//!
//! Integrity and abuse (docs/gather-protocol.md §4-5): a data stream proves
//! its session with the secret token of the welcome; it may only use an
//! index below the number of streams the server has granted; any stream
//! that fails after it was accepted fails the whole transfer at once, with an
//! `error` on the control connection naming the stream and offset; the
//! client's SHA-256 in `end` is checked against what was written.
//!
//! What it is not: the algorithms themselves (they are pure, in
//! `tcpaccel_core::alloc` / `aimd`), nor an encrypted or authenticated
//! service (anyone who can connect may start a session).
//!
//! ## Why TCP_WINDOW_CLAMP and not SO_RCVBUF
//! The window scale is fixed in the SYN/SYN-ACK exchange from the receive
//! buffer the socket has at that moment, and setting `SO_RCVBUF` locks the
//! buffer (no autotuning). Shrinking or growing `SO_RCVBUF` on an established
//! connection therefore cannot re-negotiate the scale: a share that grows past
//! what the handshake's scale can express is unreachable, and a locked small
//! buffer cannot be grown by the kernel either. So the listener gets one
//! large `SO_RCVBUF` before `listen` (accepted sockets inherit it, and the
//! handshake negotiates a scale big enough for the largest share), and each
//! connection's share is applied and re-applied live with `TCP_WINDOW_CLAMP`,
//! which caps the advertised window without touching the scale.

use crate::config::{ServerConfig, Sharing};
use crate::proto::{self, Control, ErrorCode, FrameHeader, FrameType, Kind, ProtoError, SessionId, Token};
use crate::qos::{stream_limits, ClientQos, Division, Observed, QosSettings};
use crate::reasm::{Offer, Reassembly};
use crate::share::ClientNeed;
use crate::status::{ClientStatus, Event};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tcpaccel_core::admit::{Gate, Limits, Ticket, TooLarge};
use tcpaccel_core::units::Rate;
use tcpaccel_core::Instant;
use tcpaccel_sys::sockopt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch, Notify};

/// How long a peer has to send its preface, hello or attach record.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A client whose control connection is silent this many intervals (it
/// should send `progress` every interval), and at least
/// [`CONTROL_IDLE_MIN`], has gone away: its transfer fails.
pub const CONTROL_IDLE_INTERVALS: u32 = 10;
pub const CONTROL_IDLE_MIN: Duration = Duration::from_secs(30);
/// How often a data stream re-reads its TCP_INFO for the RTT.
const RTT_SAMPLE_EVERY: Duration = Duration::from_millis(200);
/// Longest file name (Linux NAME_MAX): a client's stem plus `.incomplete` must fit.
const MAX_FILE_NAME: usize = 255;
/// Bounds of the listener's receive buffer (see the module docs).
const LISTEN_RCVBUF_MIN: u64 = 256 * 1024;
const LISTEN_RCVBUF_MAX: u64 = 256 << 20;

/// Errors that stop the server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("listen on {addr}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: tcpaccel_sys::Error,
    },
    #[error("{what} {path}")]
    Sink {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Where each client's data goes.
#[derive(Debug, Clone)]
pub enum SinkSpec {
    Discard,
    /// A file per client: `<dir>/<id>.partial` while receiving, renamed to
    /// `<id>.data` when complete or `<id>.incomplete` when the client vanished.
    Dir(PathBuf),
}

/// A bound server, ready to [`run`](Server::run).
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
}

struct Shared {
    cfg: ServerConfig,
    sink: SinkSpec,
    epoch: std::time::Instant,
    events: Option<mpsc::UnboundedSender<Event>>,
    state: Mutex<State>,
    /// Join, leave and stream changes ask for a recomputation.
    realloc: Notify,
    /// Connections before their hello or attach record, one unit each.
    slots: Mutex<Gated>,
    /// Bytes of incomplete control messages, reserved when a message's
    /// length prefix arrives and given back when it has been read (or the
    /// connection dropped): one budget for the whole server (issue 26 item
    /// 1), shared fairly between sources (issue 50 item 1).
    memory: Mutex<Gated>,
    /// The largest segment (MSS) seen on any data stream, bytes; 0 before the first.
    segment: AtomicU64,
}

#[derive(Default)]
struct State {
    clients: HashMap<SessionId, Arc<Client>>,
    /// Join order; orders clients in the allocation and its demand ids.
    next_seq: u64,
    last_status: Vec<ClientStatus>,
    /// (rule, clients) of the last allocation event, to report changes only.
    last_alloc: Option<(String, usize)>,
}

struct Client {
    session: SessionId,
    /// The secret a data stream must present (never shown).
    token: Token,
    seq: u64,
    id: String,
    /// The file name stem of its sink (injective in `id`, see [`file_stem`]).
    stem: String,
    class: String,
    priority: u32,
    target: Rate,
    peer: SocketAddr,
    ctl: mpsc::UnboundedSender<Control>,
    inner: Mutex<ClientInner>,
    /// Woken when the in-order point advances or the client goes away.
    advanced: Notify,
    closed: watch::Sender<bool>,
    sent: AtomicU64,
    /// Chunk bytes read from its data streams (in or out of order), counted
    /// as they arrive so the goodput is not quantised to whole chunks.
    arrived: AtomicU64,
    /// Largest chunk this client may send (chosen for its target).
    chunk: u32,
    app_limited: AtomicBool,
    /// No chunk byte has arrived yet: the session waits in its own small
    /// room (per source and in all) and holds no stream budget or pool share.
    waiting: AtomicBool,
}

struct ClientInner {
    reasm: Reassembly,
    sink: Option<BufWriter<File>>,
    path: Option<PathBuf>,
    hasher: Sha256,
    /// The client's digest from `end`, checked at completion.
    claimed_sha256: Option<String>,
    finished: bool,
    streams: HashMap<u16, Arc<StreamSlot>>,
    /// Stream indices below this have been granted: the welcome's count plus
    /// every increase `set_streams` announced. A client that opens streams
    /// only when told holds at most this many indices.
    granted: u32,
    /// Indices already attached once (never reused).
    used: HashSet<u16>,
    /// The stream search, goodput and warm-up ([`crate::qos`]).
    qos: ClientQos,
    wanted: u32,
    allocation: u64,
    rtt: Duration,
    /// The control connection's outgoing queue, taken by its writer.
    ctl_rx: Option<mpsc::UnboundedReceiver<Control>>,
    joined: Instant,
    /// `arrived` at the last measuring tick that saw it move, and when.
    arrived_seen: u64,
    arrived_at: Instant,
}

struct StreamSlot {
    clamp: watch::Sender<u32>,
    /// What the kernel reports after the last set.
    clamp_actual: AtomicU32,
    rtt_us: AtomicU64,
    /// The segment size of this stream (`tcpi_advmss`, the most the peer may send).
    mss: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind; keep serving.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn now(&self) -> Instant {
        Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    fn t(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }

    fn emit(&self, e: Event) {
        if let Some(tx) = &self.events {
            let _ = tx.send(e);
        }
    }

    fn conn_error(&self, peer: SocketAddr, stage: &str, error: impl std::fmt::Display) {
        tcpaccel_metrics::flood_event!(crate::floodlog::CONN_LOG, tracing::Level::WARN, %peer, stage, %error, "gather: closing connection");
        self.emit(Event::ConnectionError {
            t: self.t(),
            peer: peer.to_string(),
            stage: stage.to_string(),
            error: error.to_string(),
        });
    }
}

impl Server {
    /// Binds the listener with a large receive buffer before `listen`, so the
    /// handshake of every accepted connection negotiates a window scale that
    /// can express the whole pool (module docs).
    pub async fn bind(
        cfg: ServerConfig,
        addr: SocketAddr,
        sink: SinkSpec,
        events: Option<mpsc::UnboundedSender<Event>>,
    ) -> Result<Server, ServerError> {
        let listen_err = |source| ServerError::Listen { addr, source };
        let fd = sockopt::tcp_socket(sockopt::Family::of(&addr)).map_err(listen_err)?;
        sockopt::set_reuseaddr(&fd, true).map_err(listen_err)?;
        let rcvbuf = cfg.pool.clamp(LISTEN_RCVBUF_MIN, LISTEN_RCVBUF_MAX);
        // SO_RCVBUFFORCE passes net.core.rmem_max when we may; otherwise the
        // capped request still negotiates window scaling.
        if sockopt::force_recv_buffer(&fd, rcvbuf).is_err() {
            sockopt::set_recv_buffer(&fd, rcvbuf).map_err(listen_err)?;
        }
        sockopt::bind(&fd, &addr).map_err(listen_err)?;
        sockopt::listen(&fd, 4096).map_err(listen_err)?;
        let std_listener = std::net::TcpListener::from(fd);
        std_listener.set_nonblocking(true)?;
        let listener = TcpListener::from_std(std_listener)?;
        if let SinkSpec::Dir(d) = &sink {
            std::fs::create_dir_all(d).map_err(|source| ServerError::Sink {
                what: "create directory",
                path: d.clone(),
                source,
            })?;
        }
        // A source's handshakes may exceed its share for a burst; its
        // messages may not (it displaces its own oldest instead).
        let slots = Gated::new(
            Limits {
                capacity: u64::from(cfg.max_handshakes),
                per_source: u64::from(cfg.max_handshakes_per_source),
                grace: cfg.handshake_grace,
                burst: crate::config::HANDSHAKE_BURST,
            },
            cfg.sources,
        );
        let memory = Gated::new(
            Limits {
                capacity: cfg.control_memory,
                per_source: cfg.control_memory_per_source(),
                grace: cfg.handshake_grace,
                burst: Duration::ZERO,
            },
            cfg.sources,
        );
        let shared = Arc::new(Shared {
            cfg,
            sink,
            epoch: std::time::Instant::now(),
            events,
            state: Mutex::new(State::default()),
            realloc: Notify::new(),
            slots: Mutex::new(slots),
            memory: Mutex::new(memory),
            segment: AtomicU64::new(0),
        });
        Ok(Server { listener, shared })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the task is dropped.
    pub async fn run(self) -> Result<(), ServerError> {
        let ticker = tokio::spawn(ticker(self.shared.clone()));
        let res = loop {
            match self.listener.accept().await {
                Ok((stream, peer)) => {
                    let shared = self.shared.clone();
                    tokio::spawn(async move { connection(shared, stream, peer).await });
                }
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "gather: accept failed");
                    if is_fatal_accept(&e) {
                        break Err(ServerError::Io(e));
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        ticker.abort();
        res
    }
}

fn is_fatal_accept(e: &std::io::Error) -> bool {
    // EBADF or EINVAL: the listener itself is gone.
    matches!(e.raw_os_error(), Some(9) | Some(22))
}

async fn connection(shared: Arc<Shared>, mut stream: TcpStream, peer: SocketAddr) {
    let mut slot = Gated::enter_one(&shared.slots, peer, shared.now());
    let mut pre = [0u8; proto::PREFACE_LEN];
    match slot.unless_displaced(tokio::time::timeout(HANDSHAKE_TIMEOUT, stream.read_exact(&mut pre))).await {
        Some(Ok(Ok(_))) => {}
        Some(Ok(Err(e))) => return shared.conn_error(peer, "preface", e),
        Some(Err(_)) => return shared.conn_error(peer, "preface", "timed out"),
        None => return shared.conn_error(peer, "preface", displaced_slot(&shared)),
    }
    slot.progress();
    let kind = match proto::decode_preface(&pre) {
        Ok(k) => k,
        Err(e) => {
            // Told in the framing every version keeps (docs/gather-protocol.md
            // §1); a stranger (bad magic) gets nothing.
            let code = match e {
                ProtoError::Version { .. } => Some(ErrorCode::Version),
                ProtoError::BadMagic(_) => None,
                _ => Some(ErrorCode::Malformed),
            };
            if let Some(code) = code {
                let msg =
                    Control::Error { code, message: e.to_string(), server_version: Some(proto::VERSION) };
                let _ = stream.write_all(&proto::encode_control(&msg)).await;
                let _ = stream.shutdown().await;
            }
            return shared.conn_error(peer, "preface", e);
        }
    };
    let _ = stream.set_nodelay(true);
    match kind {
        Kind::Control => control(shared.clone(), stream, peer, slot).await,
        Kind::Data => data(shared.clone(), stream, peer, slot).await,
        Kind::Status => {
            drop(slot);
            let clients = lock(&shared.state).last_status.clone();
            let _ = stream.write_all(&proto::encode_control(&Control::StatusReply { clients })).await;
            let _ = stream.shutdown().await;
        }
    }
}

/// One of the server's fair gates (`tcpaccel_core::admit`) and how to tell
/// each holder that a newcomer displaced it.
struct Gated {
    gate: Gate,
    evict: HashMap<Ticket, oneshot::Sender<()>>,
}

impl Gated {
    fn new(limits: Limits, sources: tcpaccel_core::admit::Grouping) -> Gated {
        Gated { gate: Gate::new(limits, sources), evict: HashMap::new() }
    }

    /// A place of `cost` units for `peer`, displacing what the gate says.
    fn enter(m: &Mutex<Gated>, peer: SocketAddr, cost: u64, now: Instant) -> Result<Held<'_>, TooLarge> {
        let mut g = lock(m);
        let a = g.gate.admit(peer.ip(), cost, now)?;
        Ok(g.place(m, a))
    }

    /// A place of one unit (a connection), which always fits.
    fn enter_one(m: &Mutex<Gated>, peer: SocketAddr, now: Instant) -> Held<'_> {
        let mut g = lock(m);
        let a = g.gate.admit_one(peer.ip(), now);
        g.place(m, a)
    }

    fn place<'a>(&mut self, m: &'a Mutex<Gated>, a: tcpaccel_core::admit::Admission) -> Held<'a> {
        for t in &a.evict {
            if let Some(tx) = self.evict.remove(t) {
                let _ = tx.send(());
            }
        }
        let (tx, rx) = oneshot::channel();
        self.evict.insert(a.ticket, tx);
        Held { gated: m, ticket: a.ticket, evicted: rx, displaced: false }
    }
}

/// A place in a [`Gated`], given back when dropped.
struct Held<'a> {
    gated: &'a Mutex<Gated>,
    ticket: Ticket,
    evicted: oneshot::Receiver<()>,
    displaced: bool,
}

impl Held<'_> {
    /// The holder advanced a step (its preface arrived): it outlives silent ones.
    fn progress(&self) {
        lock(self.gated).gate.progress(self.ticket);
    }

    /// `work`, unless a newcomer displaces this place first (`None`).
    async fn unless_displaced<F: std::future::Future>(&mut self, work: F) -> Option<F::Output> {
        if self.displaced {
            return None;
        }
        tokio::select! {
            r = work => Some(r),
            Ok(()) = &mut self.evicted => {
                self.displaced = true;
                None
            }
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut g = lock(self.gated);
        g.gate.leave(self.ticket);
        g.evict.remove(&self.ticket);
    }
}

/// Why a connection before its hello or attach record was closed.
fn displaced_slot(shared: &Shared) -> String {
    format!(
        "displaced by a newer connection: the server's {} places for connections before hello are taken, and this source holds the most (or more than {})",
        shared.cfg.max_handshakes, shared.cfg.max_handshakes_per_source
    )
}

/// Why reading a control message failed: the code to tell the peer and the detail.
type ReadFail = (ErrorCode, String);

/// Reads one control message of at most `max` bytes, its body counted
/// against the server-wide budget of incomplete messages, fairly shared
/// between sources: a newcomer that does not fit displaces the oldest
/// messages of the source holding the most (`capacity`). `Ok(None)`: the
/// peer closed between messages.
async fn read_control<R: AsyncReadExt + Unpin>(
    shared: &Shared,
    r: &mut R,
    peer: SocketAddr,
    max: u32,
) -> Result<Option<Control>, ReadFail> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err((ErrorCode::StreamLost, e.to_string())),
    }
    let n = proto::control_len_max(len, max).map_err(|e| (ErrorCode::Malformed, e.to_string()))?;
    let (cap, share) = (shared.cfg.control_memory, shared.cfg.control_memory_per_source());
    let mut held = Gated::enter(&shared.memory, peer, n as u64, shared.now()).map_err(|e| {
        let m = format!("control message of {n} bytes refused: {e} of the server's memory for incomplete control messages ({cap} B, {share} B per source)");
        (ErrorCode::Capacity, m)
    })?;
    let mut body = vec![0u8; n];
    match held.unless_displaced(r.read_exact(&mut body)).await {
        Some(Ok(_)) => {}
        Some(Err(e)) => return Err((ErrorCode::StreamLost, e.to_string())),
        None => {
            let m = format!(
                "control message of {n} bytes displaced before it was complete: the server's memory for incomplete control messages ({cap} B, {share} B per source {}) is full and this source holds the most of it",
                shared.cfg.sources.key(peer.ip())
            );
            return Err((ErrorCode::Capacity, m));
        }
    }
    drop(held);
    proto::decode_control(&body).map(Some).map_err(|e| (ErrorCode::Malformed, e.to_string()))
}

/// The file name stem of a client id: bytes in `[A-Za-z0-9._-]` stay, every
/// other byte of the id's UTF-8 (including `%` itself) becomes `%XX` with
/// uppercase hex. Escaping instead of replacing keeps the mapping injective
/// ("x y" is `x%20y`, "x_y" stays `x_y`). A leading dot is escaped too, so
/// no stem contains `/`, is `.` or `..`, or names a hidden file.
pub fn file_stem(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for (i, b) in id.bytes().enumerate() {
        let keep = b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && i > 0);
        if keep {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

async fn refuse(shared: &Shared, stream: &mut TcpStream, peer: SocketAddr, code: ErrorCode, message: String) {
    let msg = Control::Error { code, message: message.clone(), server_version: None };
    // Recorded before the client is told, so a refusal it has seen is never
    // missing from the events, even when the server stops right after.
    shared.conn_error(peer, "hello", &message);
    let _ = stream.write_all(&proto::encode_control(&msg)).await;
    let _ = stream.shutdown().await;
}

/// A control connection: the hello and admission ([`admit`]), then the
/// message loop ([`control_loop`]) until the transfer ends, then the close.
async fn control(shared: Arc<Shared>, mut stream: TcpStream, peer: SocketAddr, mut slot: Held<'_>) {
    // A deadline for the whole hello, not an idle timeout (§6).
    let hello = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        read_control(&shared, &mut stream, peer, proto::MAX_HELLO_LEN),
    );
    let hello = match slot.unless_displaced(hello).await {
        Some(Ok(Ok(Some(h)))) => h,
        Some(Ok(Ok(None))) => return shared.conn_error(peer, "hello", "closed before hello"),
        Some(Ok(Err((ErrorCode::StreamLost, e)))) => return shared.conn_error(peer, "hello", e),
        Some(Ok(Err((code, e)))) => return refuse(&shared, &mut stream, peer, code, e).await,
        Some(Err(_)) => return shared.conn_error(peer, "hello", "no complete hello within 10 s"),
        None => return shared.conn_error(peer, "hello", displaced_slot(&shared)),
    };
    drop(slot);
    let (client, welcome) = match admit(&shared, hello, peer) {
        Ok(v) => v,
        Err((code, m)) => return refuse(&shared, &mut stream, peer, code, m).await,
    };
    let Some(mut ctl_rx) = lock(&client.inner).ctl_rx.take() else { return };
    let (mut rd, mut wr) = stream.into_split();
    let writer = tokio::spawn(async move {
        if wr.write_all(&proto::encode_control(&welcome)).await.is_err() {
            return;
        }
        while let Some(m) = ctl_rx.recv().await {
            let last = matches!(m, Control::Done { .. } | Control::Error { .. });
            if wr.write_all(&proto::encode_control(&m)).await.is_err() || last {
                break;
            }
        }
        let _ = wr.shutdown().await;
    });
    let reason = control_loop(&shared, &client, &mut rd, peer).await;
    if lock(&client.inner).finished {
        // Done or an error is on its way: give the client time to read it
        // and close (or go silent) before the connection is dropped.
        let _ = tokio::time::timeout(HANDSHAKE_TIMEOUT, read_until_closed(&mut rd)).await;
    }
    abandon(&shared, &client, &reason);
    // Let the writer flush an error or Done, then stop it.
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
}

/// Checks a hello and registers its client: the welcome to send, or the
/// refusal (code and message). May evict the oldest session still waiting
/// for its first data when the waiting room is full.
fn admit(shared: &Arc<Shared>, hello: Control, peer: SocketAddr) -> Result<(Arc<Client>, Control), ReadFail> {
    let Control::Hello { client_id, class, target_bps } = hello else {
        return Err((ErrorCode::Malformed, format!("expected hello, got {}", hello.type_name())));
    };
    if client_id.is_empty() || client_id.len() > 200 {
        return Err((
            ErrorCode::Malformed,
            format!("client id must be 1..=200 bytes (got {})", client_id.len()),
        ));
    }
    let cls = shared.cfg.class(&class).map_err(|e| (ErrorCode::UnknownClass, e.to_string()))?.clone();
    let target = match target_bps {
        Some(0) => return Err((ErrorCode::Malformed, "target 0 bit/s".to_string())),
        Some(t) => Rate(t).min(cls.target),
        None => cls.target,
    };
    let stem = file_stem(&client_id);
    if matches!(shared.sink, SinkSpec::Dir(_)) && stem.len() + ".incomplete".len() > MAX_FILE_NAME {
        let m = format!(
            "client id {client_id:?} escapes to a file name of {} bytes, above the {MAX_FILE_NAME} a file system allows (each byte outside [A-Za-z0-9._-] takes three)",
            stem.len() + ".incomplete".len()
        );
        return Err((ErrorCode::Malformed, m));
    }
    let (session, token) = match (SessionId::random(), Token::random()) {
        (Ok(s), Ok(t)) => (s, t),
        (Err(e), _) | (_, Err(e)) => {
            return Err((
                ErrorCode::Internal,
                format!("no session id: the system's random source failed: {e}"),
            ))
        }
    };
    let (client, evicted) = register(shared, &client_id, &stem, &cls, target, session, token, peer)?;
    if let Some(old) = evicted {
        let m = format!(
            "evicted: no data yet, and the server's {} places for sessions without data are taken by newer ones",
            shared.cfg.max_waiting
        );
        fail_transfer(shared, &old, ErrorCode::Stalled, &m);
    }
    let welcome = Control::Welcome {
        session: client.session,
        token: client.token,
        streams: lock(&client.inner).wanted,
        chunk_size: client.chunk,
        checksum: shared.cfg.checksum,
        interval_ms: shared.cfg.interval.as_millis() as u64,
        target_bps: target.0,
        priority: client.priority,
    };
    tcpaccel_metrics::flood_event!(crate::floodlog::CONN_LOG, tracing::Level::INFO, id = %client.id, session = %client.session, class = %client.class, %peer, "gather: client joined");
    shared.emit(Event::ClientJoin {
        t: shared.t(),
        id: client.id.clone(),
        session: client.session,
        class: client.class.clone(),
        target_bps: target.0,
        peer: peer.to_string(),
    });
    shared.realloc.notify_one();
    Ok((client, welcome))
}

/// Admission under the state lock (docs/gather-protocol.md §3): duplicates,
/// the stream budget (held by clients that have sent data), two segments per
/// stream, and the waiting room of sessions without data (per source and in
/// all). Returns the new client and the waiting session it evicted, if any.
#[allow(clippy::too_many_arguments)]
fn register(
    shared: &Arc<Shared>,
    client_id: &str,
    stem: &str,
    cls: &crate::config::Class,
    target: Rate,
    session: SessionId,
    token: Token,
    peer: SocketAddr,
) -> Result<(Arc<Client>, Option<Arc<Client>>), ReadFail> {
    let cfg = &shared.cfg;
    let mut st = lock(&shared.state);
    if st.clients.values().any(|c| c.id == client_id) {
        return Err((ErrorCode::Duplicate, format!("client id {client_id:?} is already connected")));
    }
    // Stems are injective in the id, so this is the check above once
    // more; it guards the one property that matters (two live clients
    // never share a file) even if the escaping ever changes.
    if let Some(other) = st.clients.values().find(|c| c.stem == stem) {
        let m =
            format!("client id {client_id:?} would write the same file as connected client {:?}", other.id);
        return Err((ErrorCode::Duplicate, m));
    }
    if st.clients.contains_key(&session) {
        // 2^-128 per pair; refuse rather than mix two clients.
        return Err((ErrorCode::Internal, "session id collision; retry".to_string()));
    }
    let active = st.clients.values().filter(|c| !c.waiting.load(Ordering::Relaxed)).count() as u64;
    if active >= u64::from(cfg.max_streams) {
        let m = format!(
            "{active} clients that are sending data already hold one stream each of the server's budget of {}",
            cfg.max_streams
        );
        return Err((ErrorCode::Capacity, m));
    }
    let segment = shared.segment.load(Ordering::Relaxed);
    let floor = crate::qos::two_segments(segment);
    if segment > 0 && (active + 1) * floor > cfg.pool {
        let m = format!(
            "the server's pool of {} B holds two segments of {segment} B for {} stream(s), and {active} client(s) are sending",
            cfg.pool,
            cfg.pool / floor
        );
        return Err((ErrorCode::Capacity, m));
    }
    let mut waiting: Vec<&Arc<Client>> =
        st.clients.values().filter(|c| c.waiting.load(Ordering::Relaxed)).collect();
    let source = cfg.sources.key(peer.ip());
    let from_peer = waiting.iter().filter(|c| cfg.sources.key(c.peer.ip()) == source).count() as u64;
    if from_peer >= u64::from(cfg.max_waiting_per_source) {
        let m = format!(
            "{from_peer} sessions from {source} have sent no data yet (the server allows {} per source); send data on them or close them",
            cfg.max_waiting_per_source
        );
        return Err((ErrorCode::Capacity, m));
    }
    let evicted = if waiting.len() as u64 >= u64::from(cfg.max_waiting) {
        waiting.sort_by_key(|c| c.seq);
        waiting.first().map(|c| (*c).clone())
    } else {
        None
    };
    if let Some(old) = &evicted {
        // Out of the waiting count now; failed after the lock is released.
        old.waiting.store(false, Ordering::Relaxed);
        st.clients.remove(&old.session);
    }
    st.next_seq += 1;
    let seq = st.next_seq;
    let (sink, path) = match &shared.sink {
        SinkSpec::Discard => (None, None),
        SinkSpec::Dir(d) => {
            let p = d.join(format!("{stem}.partial"));
            match File::create(&p) {
                Ok(f) => (Some(BufWriter::with_capacity(64 * 1024, f)), Some(p)),
                Err(e) => return Err((ErrorCode::Internal, format!("cannot create {}: {e}", p.display()))),
            }
        }
    };
    let now = shared.now();
    let qos = ClientQos::new(&qos_settings(cfg), target, now);
    let chunk = chunk_for(target, cfg.interval, cfg.chunk_size);
    let wanted = qos.initial_streams();
    let (ctl_tx, ctl_rx) = mpsc::unbounded_channel();
    let client = Arc::new(Client {
        session,
        token,
        seq,
        id: client_id.to_string(),
        stem: stem.to_string(),
        class: cls.name.clone(),
        priority: cls.priority,
        target,
        peer,
        ctl: ctl_tx,
        inner: Mutex::new(ClientInner {
            reasm: Reassembly::new(reorder_limit(chunk, cfg.max_streams_per_client)),
            sink,
            path,
            hasher: Sha256::new(),
            claimed_sha256: None,
            finished: false,
            streams: HashMap::new(),
            qos,
            wanted,
            granted: wanted,
            used: HashSet::new(),
            allocation: 0,
            rtt: Duration::ZERO,
            ctl_rx: Some(ctl_rx),
            joined: now,
            arrived_seen: 0,
            arrived_at: now,
        }),
        advanced: Notify::new(),
        closed: watch::channel(false).0,
        sent: AtomicU64::new(0),
        arrived: AtomicU64::new(0),
        chunk,
        app_limited: AtomicBool::new(false),
        waiting: AtomicBool::new(true),
    });
    st.clients.insert(session, client.clone());
    Ok((client, evicted))
}

/// Reads the client's control messages until the transfer ends; returns
/// why it ended (empty when a data stream or the completion ended it).
async fn control_loop(
    shared: &Arc<Shared>,
    client: &Arc<Client>,
    rd: &mut tokio::net::tcp::OwnedReadHalf,
    peer: SocketAddr,
) -> String {
    let idle = (shared.cfg.interval * CONTROL_IDLE_INTERVALS).max(CONTROL_IDLE_MIN);
    let mut closed = client.closed.subscribe();
    loop {
        let msg = tokio::select! {
            m = tokio::time::timeout(idle, read_control(shared, rd, peer, proto::MAX_CLIENT_MSG_LEN)) => m,
            // A data stream failed the transfer (or it completed): stop reading.
            _ = closed.wait_for(|c| *c) => return String::new(),
        };
        let msg = match msg {
            Ok(m) => m,
            Err(_) => {
                let m = format!("control connection silent for {} s", idle.as_secs());
                fail_transfer(shared, client, ErrorCode::StreamLost, &m);
                return m;
            }
        };
        let outcome = match msg {
            Ok(Some(m)) => on_control(shared, client, m),
            Ok(None) => Err((None, "control connection closed before the end of data".to_string())),
            Err((ErrorCode::StreamLost, e)) => {
                Err((Some(ErrorCode::StreamLost), format!("control connection: {e}")))
            }
            Err((code, e)) => Err((Some(code), e)),
        };
        if let Err((code, m)) = outcome {
            if let Some(code) = code {
                shared.conn_error(peer, "control", &m);
                fail_transfer(shared, client, code, &m);
            }
            return m;
        }
    }
}

/// One message from a client after its hello. `Err((code, why))` ends the
/// transfer: with a code the server tells the client; without one (the
/// client's own `error`, or a close) it just ends.
fn on_control(
    shared: &Arc<Shared>,
    client: &Arc<Client>,
    msg: Control,
) -> Result<(), (Option<ErrorCode>, String)> {
    match msg {
        Control::Progress { sent, app_limited } => {
            client.sent.store(sent, Ordering::Relaxed);
            client.app_limited.store(app_limited, Ordering::Relaxed);
            Ok(())
        }
        Control::End { total, sha256 } => {
            proto::check_sha256(&sha256).map_err(|e| (Some(ErrorCode::Malformed), format!("end: {e}")))?;
            {
                let mut g = lock(&client.inner);
                if g.reasm.end().is_some() {
                    return Err((Some(ErrorCode::Malformed), "a second end: end is sent once".to_string()));
                }
                g.reasm
                    .set_end(total)
                    .map_err(|e| (Some(ErrorCode::Malformed), format!("bad end of data: {e}")))?;
                g.claimed_sha256 = Some(sha256);
            }
            finish_if_complete(shared, client);
            Ok(())
        }
        Control::Error { code, message, .. } => {
            // The client gives up: no answer, the transfer ends incomplete.
            Err((None, format!("the client reported an error ({code}): {message}")))
        }
        other => Err((
            Some(ErrorCode::Malformed),
            format!("unexpected control message {} from a client", other.type_name()),
        )),
    }
}

/// Reads and drops whatever the client still sends until it closes.
async fn read_until_closed<R: AsyncReadExt + Unpin>(r: &mut R) {
    let mut buf = [0u8; 4096];
    while matches!(r.read(&mut buf).await, Ok(n) if n > 0) {}
}

/// Ends a transfer that cannot complete: tells the client why on its control
/// connection (the message names the stream and offset where there is one),
/// marks its data incomplete and closes its streams. No-op once finished.
fn fail_transfer(shared: &Shared, client: &Arc<Client>, code: ErrorCode, message: &str) {
    end_incomplete(shared, client, message, Some(code));
}

/// The chunk size a client is told to use: about an eighth of what its
/// target moves in one interval, between 4 KiB (or the maximum, if smaller)
/// and the configured maximum,
/// so that a slow client delivers several chunks per measurement interval.
fn chunk_for(target: Rate, interval: Duration, max: u32) -> u32 {
    let per_interval = Rate::bytes_per_sec(target) as u128 * interval.as_millis() / 1000;
    let max = u128::from(max.max(1));
    (per_interval / 8).clamp(4096.min(max), max) as u32
}

/// Out-of-order bytes a client may hold: a few chunks per stream.
fn reorder_limit(chunk: u32, streams: u32) -> u64 {
    u64::from(chunk) * u64::from(streams.max(1)) * 4
}

/// Marks a client that left before its end of data incomplete and frees its share.
fn abandon(shared: &Shared, client: &Arc<Client>, reason: &str) {
    end_incomplete(shared, client, reason, None);
}

/// Marks the client's data incomplete (`.incomplete`), frees its share and
/// closes its streams; with `tell`, first sends the client an `error` of
/// that code (under the lock, so two failing streams send one error).
fn end_incomplete(shared: &Shared, client: &Arc<Client>, reason: &str, tell: Option<ErrorCode>) {
    let (bytes, sha, path) = {
        let mut g = lock(&client.inner);
        if g.finished {
            drop(g);
            remove(shared, client);
            return;
        }
        g.finished = true;
        if let Some(code) = tell {
            let _ =
                client.ctl.send(Control::Error { code, message: reason.to_string(), server_version: None });
        }
        let bytes = g.reasm.delivered();
        let sha = hex::encode(g.hasher.clone().finalize());
        let mut path = None;
        if let Some(mut w) = g.sink.take() {
            let _ = w.flush();
        }
        if let Some(p) = g.path.take() {
            let dest = p.with_extension("incomplete");
            match std::fs::rename(&p, &dest) {
                Ok(()) => path = Some(dest.display().to_string()),
                Err(e) => {
                    tcpaccel_metrics::flood_event!(crate::floodlog::CONN_LOG, tracing::Level::WARN, path = %p.display(), error = %e, "gather: cannot mark incomplete")
                }
            }
        }
        (bytes, sha, path)
    };
    tcpaccel_metrics::flood_event!(crate::floodlog::CONN_LOG, tracing::Level::WARN, id = %client.id, bytes, reason, "gather: client left before its end of data");
    shared.emit(Event::ClientEnd {
        t: shared.t(),
        id: client.id.clone(),
        session: client.session,
        bytes,
        complete: false,
        sha256: sha,
        path,
        reason: reason.to_string(),
    });
    remove(shared, client);
}

fn remove(shared: &Shared, client: &Arc<Client>) {
    let _ = client.closed.send(true);
    client.advanced.notify_waiters();
    lock(&shared.state).clients.remove(&client.session);
    shared.realloc.notify_one();
}

/// When everything up to the announced end arrived: check the client's
/// digest, flush, rename, tell the client.
fn finish_if_complete(shared: &Shared, client: &Arc<Client>) {
    let done = {
        let mut g = lock(&client.inner);
        if g.finished || !g.reasm.complete() {
            return;
        }
        let total = g.reasm.delivered();
        let sha = hex::encode(g.hasher.clone().finalize());
        if let Some(claimed) = g.claimed_sha256.as_deref().filter(|c| *c != sha) {
            let m = format!(
                "sha256 mismatch over {total} bytes: the client's end says {claimed}, the server wrote {sha}"
            );
            drop(g);
            tcpaccel_metrics::flood_event!(crate::floodlog::CONN_LOG, tracing::Level::WARN, id = %client.id, "gather: {m}");
            return fail_transfer(shared, client, ErrorCode::Mismatch, &m);
        }
        g.finished = true;
        let mut ok = true;
        if let Some(mut w) = g.sink.take() {
            if let Err(e) = w.flush() {
                tcpaccel_metrics::flood_event!(crate::floodlog::CONN_LOG, tracing::Level::ERROR, id = %client.id, error = %e, "gather: sink flush failed");
                ok = false;
            }
        }
        let mut path = None;
        if let Some(p) = g.path.take() {
            let dest = p.with_extension(if ok { "data" } else { "incomplete" });
            match std::fs::rename(&p, &dest) {
                Ok(()) => path = Some(dest.display().to_string()),
                Err(e) => {
                    tcpaccel_metrics::flood_event!(crate::floodlog::CONN_LOG, tracing::Level::ERROR, path = %p.display(), error = %e, "gather: rename failed");
                    ok = false;
                }
            }
        }
        (total, sha, ok, path)
    };
    let (total, sha, ok, path) = done;
    tcpaccel_metrics::flood_event!(crate::floodlog::CONN_LOG, tracing::Level::INFO, id = %client.id, total, complete = ok, "gather: client data complete");
    let _ = client.ctl.send(Control::Done { total, sha256: sha.clone(), complete: ok });
    shared.emit(Event::ClientEnd {
        t: shared.t(),
        id: client.id.clone(),
        session: client.session,
        bytes: total,
        complete: ok,
        sha256: sha,
        path,
        reason: "end of data".into(),
    });
    remove(shared, client);
}

async fn data(shared: Arc<Shared>, mut stream: TcpStream, peer: SocketAddr, mut slot: Held<'_>) {
    let mut att = [0u8; proto::ATTACH_LEN];
    match slot.unless_displaced(tokio::time::timeout(HANDSHAKE_TIMEOUT, stream.read_exact(&mut att))).await {
        Some(Ok(Ok(_))) => {}
        Some(Ok(Err(e))) => return shared.conn_error(peer, "attach", e),
        Some(Err(_)) => return shared.conn_error(peer, "attach", "timed out"),
        None => return shared.conn_error(peer, "attach", displaced_slot(&shared)),
    }
    drop(slot);
    let (session, token, index) = match proto::decode_attach(&att) {
        Ok(v) => v,
        Err(e) => {
            // A nonzero reserved field from the session's owner fails its
            // transfer (its data would be missing); from a stranger, nothing.
            let (session, token) = proto::attach_owner(&att);
            let owner =
                lock(&shared.state).clients.get(&session).filter(|c| token.matches(&c.token)).cloned();
            shared.conn_error(peer, "attach", &e);
            if let Some(c) = owner {
                fail_transfer(&shared, &c, ErrorCode::Malformed, &format!("attach record: {e}"));
            }
            return;
        }
    };
    let Some(client) = lock(&shared.state).clients.get(&session).cloned() else {
        return shared.conn_error(peer, "attach", format!("unknown session {session}"));
    };
    if !token.matches(&client.token) {
        // Not the session's owner: refused alone; the owner's transfer is
        // not disturbed (anyone may learn a session id from `gather status`).
        return shared.conn_error(peer, "attach", format!("wrong token for session {session}"));
    }
    // From here on the stream is the client's own. A refused stream would
    // lose the chunks its sender writes before noticing, so the transfer
    // fails, with the reason on the control connection.
    let refuse_stream = |code: ErrorCode, m: String| {
        shared.conn_error(peer, "attach", &m);
        fail_transfer(&shared, &client, code, &m);
    };
    let (slot, mut clamp_rx) = {
        let mut g = lock(&client.inner);
        if g.finished {
            drop(g);
            return shared.conn_error(peer, "attach", format!("session {session} has ended"));
        }
        if g.used.contains(&index) {
            drop(g);
            let m = format!("data stream {index}: index already used in this session");
            return refuse_stream(ErrorCode::Malformed, m);
        }
        // Only indices the server granted (welcome + set_streams increases):
        // a client may not take stream budget or, with `--share connection`,
        // pool share by opening streams it was not told to open.
        if u32::from(index) >= g.granted {
            let granted = g.granted;
            drop(g);
            let allowed = match granted {
                0 => "none".to_string(),
                1 => "index 0".to_string(),
                n => format!("indices 0 to {}", n - 1),
            };
            let m = format!(
                "data stream {index}: beyond the {granted} stream(s) granted so far (allowed: {allowed}); open streams only when told"
            );
            return refuse_stream(ErrorCode::Capacity, m);
        }
        // Until the reallocation this triggers: per client the share is split
        // over one more stream; per connection the new stream brings its own
        // demand, so it starts at what each existing stream has.
        let n = match shared.cfg.sharing {
            Sharing::PerClient => g.streams.len() as u64 + 1,
            Sharing::PerConnection => (g.streams.len() as u64).max(1),
        };
        let initial = (g.allocation / n).max(crate::config::MIN_STREAM_WINDOW).min(i32::MAX as u64) as u32;
        let (tx, rx) = watch::channel(initial);
        let slot = Arc::new(StreamSlot {
            clamp: tx,
            clamp_actual: AtomicU32::new(0),
            rtt_us: AtomicU64::new(0),
            mss: AtomicU64::new(0),
        });
        g.used.insert(index);
        g.streams.insert(index, slot.clone());
        (slot, rx)
    };
    shared.realloc.notify_one();
    apply_clamp(&stream, &slot, *clamp_rx.borrow_and_update(), peer);
    sample_rtt(&stream, &slot);
    let mut closed = client.closed.subscribe();
    let mut pos = StreamPos::default();
    let result = tokio::select! {
        r = data_loop(&shared, &client, &mut stream, &slot, &mut clamp_rx, index, &mut pos) => r,
        _ = closed.wait_for(|c| *c) => Ok(()),
    };
    if let Err((code, e)) = result {
        let m = format!("data stream {index} failed {}: {e}", pos.describe());
        shared.conn_error(peer, "data", &m);
        fail_transfer(&shared, &client, code, &m);
    }
    lock(&client.inner).streams.remove(&index);
    shared.realloc.notify_one();
}

/// Where a data stream was when it failed, for the error message.
#[derive(Default)]
struct StreamPos {
    /// The chunk being read or offered: (offset, length).
    chunk: Option<(u64, u32)>,
    /// End of the last chunk this stream delivered or buffered.
    after: Option<u64>,
}

impl StreamPos {
    fn describe(&self) -> String {
        match (self.chunk, self.after) {
            (Some((o, l)), _) => format!("at offset {o} (chunk of {l} bytes)"),
            (None, Some(a)) => format!("after offset {a} (between chunks)"),
            (None, None) => "at offset 0 (before its first chunk)".to_string(),
        }
    }
}

fn apply_clamp(stream: &TcpStream, slot: &StreamSlot, bytes: u32, peer: SocketAddr) {
    if let Err(e) = sockopt::set_window_clamp(stream, bytes) {
        tcpaccel_metrics::flood_event!(crate::floodlog::CONN_LOG, tracing::Level::WARN, %peer, error = %e, "gather: TCP_WINDOW_CLAMP failed");
    }
    if let Ok(v) = sockopt::get_window_clamp(stream) {
        slot.clamp_actual.store(v, Ordering::Relaxed);
    }
}

/// Reads the stream's RTT ([`receiver_rtt_us`]) and segment size from TCP_INFO.
fn sample_rtt(stream: &TcpStream, slot: &StreamSlot) {
    if let Ok(ti) = tcpaccel_sys::tcpinfo::tcp_info(stream) {
        slot.rtt_us.store(receiver_rtt_us(ti.rcv_rtt, ti.rtt), Ordering::Relaxed);
        // The largest segment the peer may send us (what it sends when it has data).
        slot.mss.store(u64::from(ti.advmss.max(ti.rcv_mss)), Ordering::Relaxed);
    }
}

/// How far above the handshake's RTT the receive-side estimate is believed.
const RCV_RTT_MAX_FACTOR: u64 = 8;
/// ... and never capped below this (the handshake's sample on loopback is
/// tens of microseconds).
const RCV_RTT_CAP_FLOOR_US: u64 = 1_000;

/// The receiver's RTT estimate, µs, from `tcpi_rcv_rtt` and `tcpi_rtt`.
/// Data flows only towards us, so `tcpi_rtt` is the handshake's sample: the
/// path's RTT without queueing. `tcpi_rcv_rtt` is measured as the time one
/// window of data takes to arrive, which for a sender that pauses (paced,
/// app-limited, or waiting on its other streams) is its pause, not the
/// path: on loopback it read 1001151 us (issue 28). So the receive-side
/// value is used (it sees queueing) but at most [`RCV_RTT_MAX_FACTOR`] times
/// the handshake's and at least [`RCV_RTT_CAP_FLOOR_US`]; without it, the
/// handshake's.
pub fn receiver_rtt_us(rcv_rtt: u32, srtt: u32) -> u64 {
    let (rcv, srtt) = (u64::from(rcv_rtt), u64::from(srtt));
    match (rcv, srtt) {
        (0, s) => s,
        (r, 0) => r,
        (r, s) => r.min((s * RCV_RTT_MAX_FACTOR).max(RCV_RTT_CAP_FLOOR_US)),
    }
}

/// Why a data stream failed: the code for the client's `error`, and the detail.
type StreamFail = (ErrorCode, String);

async fn data_loop(
    shared: &Shared,
    client: &Arc<Client>,
    stream: &mut TcpStream,
    slot: &StreamSlot,
    clamp_rx: &mut watch::Receiver<u32>,
    index: u16,
    pos: &mut StreamPos,
) -> Result<(), StreamFail> {
    let lost = |e: String| (ErrorCode::StreamLost, e);
    let malformed = |e: String| (ErrorCode::Malformed, e);
    let peer = stream.peer_addr().map_err(|e| lost(e.to_string()))?;
    let mut last_sample = std::time::Instant::now();
    loop {
        pos.chunk = None;
        let mut hb = [0u8; proto::FRAME_HEADER_LEN];
        match stream.read_exact(&mut hb).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(lost("closed without an end-of-stream frame".into()))
            }
            Err(e) => return Err(lost(e.to_string())),
        }
        let h = FrameHeader::decode(&hb, client.session.tag(), index, client.chunk)
            .map_err(|e| malformed(e.to_string()))?;
        if h.kind == FrameType::EndOfStream {
            return Ok(());
        }
        pos.chunk = Some((h.offset, h.length));
        if shared.cfg.checksum && h.flags & proto::FLAG_CHECKSUM == 0 {
            return Err((
                ErrorCode::Mismatch,
                "the chunk has no CRC-32 although the server asked for checksums (welcome checksum: true)"
                    .into(),
            ));
        }
        let mut data = vec![0u8; h.length as usize];
        let mut got = 0;
        while got < data.len() {
            let n = stream.read(&mut data[got..]).await.map_err(|e| lost(e.to_string()))?;
            if n == 0 {
                return Err(lost(format!("closed after {got} of the chunk's {} bytes", h.length)));
            }
            got += n;
            client.arrived.fetch_add(n as u64, Ordering::Relaxed);
            if client.waiting.swap(false, Ordering::Relaxed) {
                // First data: the session leaves the waiting room and joins
                // the stream budget and the pool.
                sample_rtt(stream, slot);
                shared.realloc.notify_one();
            }
        }
        h.verify(&data).map_err(|e| (ErrorCode::Mismatch, e.to_string()))?;
        loop {
            let notified = client.advanced.notified();
            let res = {
                let mut g = lock(&client.inner);
                if g.finished {
                    // Completed or failed meanwhile; the stream just stops.
                    return Ok(());
                }
                let ClientInner { reasm, sink, hasher, .. } = &mut *g;
                let mut write = |b: &[u8]| {
                    hasher.update(b);
                    match sink {
                        Some(w) => w.write_all(b),
                        None => Ok(()),
                    }
                };
                reasm.offer(h.offset, data, &mut write)
            };
            match res {
                Ok(Offer::Full(d)) => {
                    data = d;
                    notified.await;
                    if *client.closed.borrow() {
                        return Ok(());
                    }
                }
                Ok(Offer::Delivered(_)) => {
                    client.advanced.notify_waiters();
                    finish_if_complete(shared, client);
                    break;
                }
                Ok(Offer::Buffered) => break,
                Err(e @ crate::reasm::ReasmError::Sink(_)) => {
                    return Err((ErrorCode::Internal, e.to_string()))
                }
                Err(e) => return Err(malformed(e.to_string())),
            }
        }
        pos.after = Some(h.offset + u64::from(h.length));
        if clamp_rx.has_changed().unwrap_or(false) {
            let v = *clamp_rx.borrow_and_update();
            apply_clamp(stream, slot, v, peer);
        }
        if last_sample.elapsed() >= RTT_SAMPLE_EVERY {
            last_sample = std::time::Instant::now();
            sample_rtt(stream, slot);
            // Receive autotuning (tcp_rcv_space_adjust) raises window_clamp
            // whenever it grows the buffer, silently undoing ours: re-assert it.
            let want = *clamp_rx.borrow();
            if sockopt::get_window_clamp(&*stream).map_or(true, |v| v != want) {
                apply_clamp(stream, slot, want, peer);
            }
        }
    }
}

/// Asks the client for `n` streams; an increase grants the new indices.
fn set_wanted(c: &Client, g: &mut ClientInner, n: u32) {
    if n > g.wanted {
        g.granted = g.granted.saturating_add(n - g.wanted);
    }
    g.wanted = n;
    let _ = c.ctl.send(Control::SetStreams { streams: n });
}

/// The settings [`crate::qos`] decides with.
fn qos_settings(cfg: &ServerConfig) -> QosSettings {
    QosSettings {
        interval: cfg.interval,
        sharing: cfg.sharing,
        tune_streams: cfg.tune_streams,
        max_streams_per_client: cfg.max_streams_per_client,
        max_streams: cfg.max_streams,
    }
}

/// Records the largest segment seen; the first time it shows that the pool
/// cannot give every stream of the budget two segments, says so once (new
/// clients are then refused `capacity` beyond what fits, see [`register`]).
fn note_segment(shared: &Shared, segment: u64) {
    let before = shared.segment.fetch_max(segment, Ordering::Relaxed);
    if segment <= before {
        return;
    }
    let floor = crate::qos::two_segments(segment);
    let fits = shared.cfg.pool / floor;
    let max = u64::from(shared.cfg.max_streams);
    if fits < max && crate::qos::two_segments(before) * max <= shared.cfg.pool {
        tracing::warn!(
            segment,
            pool = shared.cfg.pool,
            fits,
            max_streams = shared.cfg.max_streams,
            "gather: the pool holds two segments per stream for only {fits} of the {} streams of the budget; further clients are refused",
            shared.cfg.max_streams
        );
    }
}

/// Fails transfers from which no data arrived for the data-stall timeout,
/// and sessions that sent none within the no-data timeout, with `stalled`
/// (docs/gather-protocol.md §6); their shares go back to the others.
fn check_stalls(shared: &Shared, clients: &[Arc<Client>], now: Instant) {
    let cfg = &shared.cfg;
    let fmt = tcpaccel_core::units::format_duration;
    let mut stalled = Vec::new();
    for c in clients {
        let mut g = lock(&c.inner);
        if g.finished {
            continue;
        }
        let arrived = c.arrived.load(Ordering::Relaxed);
        if arrived != g.arrived_seen {
            g.arrived_seen = arrived;
            g.arrived_at = now;
            continue;
        }
        if c.waiting.load(Ordering::Relaxed) {
            if now.saturating_since(g.joined) >= cfg.no_data_timeout {
                let m = format!(
                    "no data within {} of the welcome (the server's no-data timeout)",
                    fmt(cfg.no_data_timeout)
                );
                stalled.push((c.clone(), m));
            }
        } else if now.saturating_since(g.arrived_at) >= cfg.stall_timeout {
            let end = match g.reasm.end() {
                Some(e) => format!(" of the {e} its end announced"),
                None => String::new(),
            };
            let m = format!(
                "no data arrived for {} (the server's data-stall timeout); {} bytes received in order{end}",
                fmt(cfg.stall_timeout),
                g.reasm.delivered()
            );
            stalled.push((c.clone(), m));
        }
    }
    for (c, m) in stalled {
        shared.conn_error(c.peer, "data", &m);
        fail_transfer(shared, &c, ErrorCode::Stalled, &m);
    }
}

/// Every interval: measure goodput, run the stream search, recompute the
/// allocation, publish status. Join/leave/stream changes recompute the
/// allocation without measuring.
async fn ticker(shared: Arc<Shared>) {
    let mut iv = tokio::time::interval(shared.cfg.interval);
    iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    iv.tick().await;
    loop {
        let measure = tokio::select! {
            _ = iv.tick() => true,
            _ = shared.realloc.notified() => false,
        };
        tick(&shared, measure);
    }
}

fn tick(shared: &Shared, measure: bool) {
    // The count of lines left out under a flood, once due.
    tcpaccel_metrics::flood_tick!(crate::floodlog::CONN_LOG);
    let now = shared.now();
    let t = shared.t();
    let mut everyone: Vec<Arc<Client>> = lock(&shared.state).clients.values().cloned().collect();
    everyone.sort_by_key(|c| c.seq);
    if measure {
        check_stalls(shared, &everyone, now);
        // Those it failed (and any that completed) have left.
        everyone.retain(|c| !lock(&c.inner).finished);
    }
    // Sessions still waiting for their first data hold no stream budget and
    // no pool share (docs/gather-protocol.md §3); status shows them.
    let clients: Vec<Arc<Client>> =
        everyone.iter().filter(|c| !c.waiting.load(Ordering::Relaxed)).cloned().collect();

    // The decisions are crate::qos's; this reads the counters and acts.
    let settings = qos_settings(&shared.cfg);
    let prios: Vec<(u64, u32)> = clients.iter().map(|c| (c.seq, c.priority)).collect();
    let limits = stream_limits(&prios, &settings);

    let mut needs = Vec::with_capacity(clients.len());
    for (c, &limit) in clients.iter().zip(&limits) {
        let mut g = lock(&c.inner);
        let rtt_us = g.streams.values().map(|s| s.rtt_us.load(Ordering::Relaxed)).max().unwrap_or(0);
        g.rtt = Duration::from_micros(rtt_us);
        let segment = g.streams.values().map(|s| s.mss.load(Ordering::Relaxed)).max().unwrap_or(0);
        note_segment(shared, segment);
        let observed = Observed {
            arrived: c.arrived.load(Ordering::Relaxed),
            attached: g.streams.len() as u32,
            wanted: g.wanted,
            allocation: g.allocation,
            rtt: g.rtt,
            app_limited: c.app_limited.load(Ordering::Relaxed),
            finished: g.finished,
            segment,
        };
        let step = g.qos.on_tick(&settings, now, measure, limit, &observed);
        if let Some(n) = step.set_streams {
            tracing::debug!(id = %c.id, from = g.wanted, to = n, "gather: streams");
            set_wanted(c, &mut g, n);
        }
        needs.push(ClientNeed {
            session: c.seq,
            priority: c.priority,
            target: c.target,
            rtt: g.rtt,
            streams: step.demand_streams,
        });
    }

    match crate::qos::divide_pool(shared.cfg.policy, &needs, shared.cfg.pool, shared.cfg.sharing) {
        Ok(Division { rule, needed, needed_lowered, shares }) => {
            for (c, s) in clients.iter().zip(&shares) {
                let mut g = lock(&c.inner);
                g.allocation = s.bytes;
                let per_stream = crate::qos::stream_clamp(s, g.streams.len() as u32, g.wanted);
                for slot in g.streams.values() {
                    slot.clamp.send_if_modified(|v| {
                        let changed = *v != per_stream;
                        *v = per_stream;
                        changed
                    });
                }
            }
            let key = Some((rule.clone(), clients.len()));
            let changed = {
                let mut st = lock(&shared.state);
                let c = st.last_alloc != key;
                st.last_alloc = key;
                c
            };
            if changed && !clients.is_empty() {
                shared.emit(Event::Allocation {
                    t,
                    rule,
                    pool: shared.cfg.pool,
                    needed,
                    needed_lowered,
                    clients: clients.len(),
                });
            }
        }
        Err(e) => tracing::error!(error = %e, "gather: allocation failed"),
    }

    if measure {
        let mut all = Vec::with_capacity(everyone.len());
        for c in &everyone {
            let g = lock(&c.inner);
            // The heartbeat the client's timeout watches (docs/gather-protocol.md §2).
            if !g.finished {
                let _ = c.ctl.send(Control::Received { bytes: g.reasm.delivered() });
            }
            all.push(ClientStatus {
                t,
                id: c.id.clone(),
                session: c.session,
                class: c.class.clone(),
                priority: c.priority,
                target_bps: c.target.0,
                goodput_bps: g.qos.goodput().0,
                streams: g.streams.len() as u32,
                streams_wanted: g.wanted,
                allocation: g.allocation,
                window_clamp: g
                    .streams
                    .values()
                    .map(|s| u64::from(s.clamp_actual.load(Ordering::Relaxed)))
                    .sum(),
                rtt_us: g.rtt.as_micros() as u64,
                received: g.reasm.delivered(),
                sent: c.sent.load(Ordering::Relaxed),
                app_limited: c.app_limited.load(Ordering::Relaxed),
            });
        }
        // Stored before emitting, so a reader of the events never sees an
        // older view from `gather status` than the one it was just told.
        lock(&shared.state).last_status = all.clone();
        for s in all {
            shared.emit(Event::Status(s));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_stems_are_injective_and_safe() {
        assert_eq!(file_stem("x y"), "x%20y");
        assert_eq!(file_stem("x_y"), "x_y");
        assert_eq!(file_stem("x%20y"), "x%2520y");
        assert_eq!(file_stem("a/../b"), "a%2F..%2Fb");
        assert_eq!(file_stem(".."), "%2E.");
        assert_eq!(file_stem(".hidden"), "%2Ehidden");
        assert_eq!(file_stem("é"), "%C3%A9");
        // Pairs the old replacement mapped to one name stay apart, and no
        // stem is a path or a dot name.
        let ids = ["x y", "x_y", "x%20y", "x/y", "x\\y", "x.y", ".xy", "é", "%C3%A9", "_", "%5F", "a", "A"];
        let stems: std::collections::HashSet<String> = ids.iter().map(|i| file_stem(i)).collect();
        assert_eq!(stems.len(), ids.len(), "{stems:?}");
        for s in &stems {
            assert!(!s.contains('/') && !s.starts_with('.'), "{s}");
        }
    }

    /// Issue 28: on loopback the receive-side estimate of a pausing sender
    /// read 1001151 us and the pool was sized from it; the handshake's RTT
    /// bounds it now. Queueing above the handshake's RTT still shows.
    #[test]
    fn receiver_rtt_is_bounded_by_the_handshake() {
        assert_eq!(receiver_rtt_us(1_001_151, 45), 1_000);
        assert_eq!(receiver_rtt_us(1_001_151, 20_000), 160_000);
        assert_eq!(receiver_rtt_us(35_000, 20_000), 35_000);
        assert_eq!(receiver_rtt_us(0, 20_000), 20_000);
        assert_eq!(receiver_rtt_us(700, 0), 700);
    }

    #[test]
    fn chunk_follows_the_target() {
        let s = Duration::from_secs(1);
        assert_eq!(chunk_for(Rate::mbps(1), s, 65_536), 15_625);
        assert_eq!(chunk_for(Rate::kbps(16), s, 65_536), 4096);
        assert_eq!(chunk_for(Rate::gbps(10), s, 65_536), 65_536);
        assert_eq!(chunk_for(Rate::kbps(16), s, 1024), 1024);
    }
}
