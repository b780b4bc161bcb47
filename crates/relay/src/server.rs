//! The relay service: listeners, SOCKS5 negotiation with clients, the upstream
//! connection (direct or through a chain of SOCKS5 hops, each terminating
//! TCP), per-hop socket tuning, and the hand-over to the data path.
//!
//! Slots: `max_conns` connections are held at once (more wait in the listen
//! backlog, the system's maximum by default); of those, SOCKS handshakes are
//! admitted through a `tcpaccel_core::admit::Gate`, which closes the least
//! advanced handshake of the heaviest source when its budget is spent, so idle handshakes cannot
//! hold every slot. A client that sends nothing is closed after
//! `first_byte_timeout`.
//!
//! A success reply is sent only after the whole upstream path is connected,
//! unless `early_reply` is on (below). Failures are answered with the
//! matching RFC 1928 code and counted. This module does not parse bytes
//! itself (see `socks`) nor move payload (see `pump`).
//!
//! Chain set-up (issue 29) costs as few round trips as the hops allow:
//! - The server reads the handshake through one buffer and never drops what
//!   follows a message, so a client may send greeting, credentials, CONNECT
//!   and its first data at once; bytes after the request go upstream as soon
//!   as the path is up.
//! - Toward a hop named `tcpaccel+socks5://` (a tcpaccel relay, so the above
//!   holds), the greeting, credentials and CONNECT go in one write, and for a
//!   run of such hops the messages of all of them; a hop named `socks5://`
//!   (Dante, any other server) gets the step-by-step handshake. The relay
//!   does not guess: the marker in the configuration decides.
//! - Warm connections to the first hop, connected and greeted ahead (see
//!   `pool`), save its TCP handshake and greeting; each is used by one
//!   session only.
//! - TCP_NODELAY on both sides: a handshake message never waits behind a
//!   delayed ACK of the one before it.
//! - When the chain ends in our relays, what the client sends after its
//!   request goes right behind the pipelined requests instead of after the
//!   replies; each of our relays holds it until its own path is up, so the
//!   replies the client sees do not change.
//! - `early_reply` (opt-in): with every hop ours and a warm connection at
//!   hand, the client is answered success as soon as its request passes
//!   this relay's rules, which saves it the wait for the whole chain's
//!   reply (one round trip of the path). The price: a chain that then fails
//!   can only reset the client's connection; the code it would have been
//!   answered is logged and counted (`early_reply_failures`).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{oneshot, Semaphore};
use tracing::Instrument;

use crate::config::{Config, Hop, Mode, Tuning};
use crate::connlog::Record;
use crate::pool::Pool;
use crate::pump::{self, Outcome, PumpOptions, Side};
use crate::socks::{self, Parse, Reply, Target, WireError};
use crate::stats::{ErrorKind, Snapshot, Stats};
use tcpaccel_core::admit::{Gate, Grouping, Limits, Ticket};

/// Errors starting the relay.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("bind {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("listen on {addr} (backlog {backlog}): {source}")]
    Listen { addr: SocketAddr, backlog: u32, source: io::Error },
    #[error("tokio runtime: {0}")]
    Runtime(io::Error),
    #[error(transparent)]
    Metrics(#[from] tcpaccel_metrics::MetricsError),
}

/// A bound relay, ready to serve.
pub struct Relay {
    listeners: Vec<(TcpListener, Mode)>,
    shared: Arc<Shared>,
}

struct Shared {
    /// Replaced whole by a reload; each connection keeps the one it
    /// started with, so a reload never disturbs established connections.
    cfg: std::sync::RwLock<Arc<Config>>,
    stats: Arc<Stats>,
    limit: Arc<Semaphore>,
    handshakes: std::sync::Mutex<Handshakes>,
    /// The gate's and the pool's clock starts here.
    epoch: std::time::Instant,
    /// Warm connections to the first next hop.
    pool: std::sync::Mutex<Pool<TcpStream, Hop>>,
    /// Per-connection records, rate-limited.
    log: crate::connlog::ConnLog,
}

/// Applies reloaded configurations to a running relay.
#[derive(Clone)]
pub struct Reloader(Arc<Shared>);

impl Reloader {
    /// Takes what can change while connections live (access rules, users,
    /// next hops, upstream tuning, timeouts) from `new` for connections
    /// accepted from now on; established ones keep the settings they
    /// started with. Returns the settings that differ but need a restart
    /// (listeners, limits, data path), which keep their old values.
    pub fn reload(&self, new: Config) -> Vec<&'static str> {
        let mut guard = self.0.cfg.write().unwrap_or_else(|p| p.into_inner());
        let (merged, fixed) = guard.reloaded(new);
        *guard = Arc::new(merged);
        fixed
    }
}

/// The handshake budget: one unit per connection, IPv4 addresses and IPv6
/// /64s as sources, a source's share soft for `handshake_stall`.
fn handshake_gate(cfg: &Config) -> Gate {
    let limits = Limits {
        capacity: cfg.max_handshakes as u64,
        per_source: cfg.per_source_handshakes as u64,
        grace: cfg.handshake_grace,
        burst: cfg.handshake_stall,
    };
    Gate::new(limits, Grouping::ADDRESS)
}

/// The handshake budget and how to tell each handshake it was displaced.
struct Handshakes {
    gate: Gate,
    evict: std::collections::HashMap<Ticket, oneshot::Sender<()>>,
}

impl Shared {
    fn config(&self) -> Arc<Config> {
        self.cfg.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn pool(&self) -> std::sync::MutexGuard<'_, Pool<TcpStream, Hop>> {
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn handshakes(&self) -> std::sync::MutexGuard<'_, Handshakes> {
        // Nothing panics while holding the lock; survive it anyway.
        self.handshakes.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The kernel's cap on listen backlogs in this network namespace, for the log.
fn somaxconn() -> Option<u32> {
    tcpaccel_sys::sysctl::read("net.core.somaxconn").ok()?.parse().ok()
}

/// A listening socket with `backlog`. Asking for more than
/// net.core.somaxconn is not an error: listen(2) silently caps the value
/// (net/socket.c, `__sys_listen`), so the default `u32::MAX` means "the
/// system's maximum" without reading it, and follows the namespace we run in.
fn listen(addr: SocketAddr, backlog: u32) -> Result<TcpListener, RelayError> {
    let bind = |source| RelayError::Bind { addr, source };
    let sock = if addr.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }.map_err(bind)?;
    // As std's and tokio's bind do: a restarted relay can bind at once.
    sock.set_reuseaddr(true).map_err(bind)?;
    sock.bind(addr).map_err(bind)?;
    sock.listen(backlog).map_err(|source| RelayError::Listen { addr, backlog, source })
}

impl Relay {
    /// Binds every listener of `cfg`.
    pub async fn bind(cfg: Config) -> Result<Relay, RelayError> {
        let mut listeners = Vec::new();
        for l in &cfg.listeners {
            let tl = listen(l.addr, cfg.backlog)?;
            let backlog = somaxconn().map_or(cfg.backlog, |m| m.min(cfg.backlog));
            tracing::info!(addr = %tl.local_addr().map(|a| a.to_string()).unwrap_or_default(), mode = %l.mode, backlog, "listening");
            listeners.push((tl, l.mode.clone()));
        }
        let limit = Arc::new(Semaphore::new(cfg.max_conns));
        let handshakes =
            std::sync::Mutex::new(Handshakes { gate: handshake_gate(&cfg), evict: Default::default() });
        let stats = Arc::new(Stats::default());
        Ok(Relay {
            listeners,
            shared: Arc::new(Shared {
                cfg: std::sync::RwLock::new(Arc::new(cfg)),
                stats,
                limit,
                handshakes,
                epoch: std::time::Instant::now(),
                pool: std::sync::Mutex::new(Pool::new()),
                log: Default::default(),
            }),
        })
    }

    /// The bound addresses, in the order of `Config::listeners`.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners.iter().filter_map(|(l, _)| l.local_addr().ok()).collect()
    }

    pub fn stats(&self) -> Arc<Stats> {
        self.shared.stats.clone()
    }

    /// A handle that applies a configuration read again (SIGHUP).
    pub fn reloader(&self) -> Reloader {
        Reloader(self.shared.clone())
    }

    /// Serves until `shutdown` completes; returns the final counters.
    /// Connections still open at that moment are dropped with the runtime's
    /// tasks only if the caller drops the runtime; here they are left running.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Snapshot {
        let mut tasks = tokio::task::JoinSet::new();
        for (l, mode) in self.listeners {
            tasks.spawn(accept_loop(l, mode, self.shared.clone()));
        }
        let now = self.shared.epoch.elapsed();
        self.shared.pool().started(now);
        tasks.spawn(keep_pool(self.shared.clone()));
        tasks.spawn(log_ticks(self.shared.clone()));
        shutdown.await;
        tasks.abort_all();
        self.shared.log.tick(self.shared.config().json_logs, true);
        self.shared.stats.snapshot()
    }
}

fn is_fd_exhaustion(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::ENOBUFS) | Some(libc::ENOMEM)
    )
}

async fn accept_loop(listener: TcpListener, mode: Mode, shared: Arc<Shared>) {
    let mut backoff = Duration::from_millis(10);
    loop {
        // Waiting for a permit before accepting leaves extra clients in the
        // kernel's backlog instead of accepting and dropping them.
        let Ok(permit) = shared.limit.clone().acquire_owned().await else { return };
        match listener.accept().await {
            Ok((stream, peer)) => {
                backoff = Duration::from_millis(10);
                // Admitted here, in accept order, not in the spawned task.
                let handshake = (mode == Mode::Socks).then(|| HandshakeSlot::enter(shared.clone(), peer));
                let shared = shared.clone();
                let mode = mode.clone();
                let span = tracing::info_span!("relay_conn", %peer);
                tokio::spawn(
                    async move {
                        handle(stream, peer, mode, &shared, handshake).await;
                        drop(permit);
                    }
                    .instrument(span),
                );
            }
            Err(e) if is_fd_exhaustion(&e) => {
                // The pending connection stays in the backlog and the listener
                // stays readable: sleep instead of spinning on it.
                shared.stats.error(ErrorKind::AcceptExhausted);
                if tracing::enabled!(tracing::Level::WARN) {
                    let backoff = tcpaccel_core::units::format_duration(backoff);
                    let json = shared.config().json_logs;
                    shared
                        .log
                        .line(&shared.stats, json, || tracing::warn!("accept: {e}; backing off {backoff}"));
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
            Err(e) => {
                tracing::debug!("accept: {e}");
            }
        }
    }
}

/// Why a connection ended before the data path, and what to answer.
#[derive(Debug)]
struct Refusal {
    kind: ErrorKind,
    reply: Option<Reply>,
    msg: String,
}

fn refuse(kind: ErrorKind, reply: Option<Reply>, msg: impl Into<String>) -> Refusal {
    Refusal { kind, reply, msg: msg.into() }
}

struct ConnGuard<'a>(&'a Stats);

impl Drop for ConnGuard<'_> {
    fn drop(&mut self) {
        self.0.connections_active.fetch_sub(1, Relaxed);
    }
}

async fn handle(
    mut client: TcpStream,
    peer: SocketAddr,
    mode: Mode,
    shared: &Arc<Shared>,
    handshake: Option<(HandshakeSlot, oneshot::Receiver<()>)>,
) {
    nodelay(&client);
    let stats = &shared.stats;
    stats.connections_total.fetch_add(1, Relaxed);
    stats.connections_active.fetch_add(1, Relaxed);
    let _guard = ConnGuard(stats);
    let started = std::time::Instant::now();
    let cfg = &*shared.config();
    let negotiated = match &mode {
        Mode::Forward(t) => Ok((t.clone(), Vec::new())),
        Mode::Socks => match handshake {
            Some((slot, evicted)) => {
                let r = socks_handshake(&mut client, cfg, evicted, &|| slot.progress()).await;
                drop(slot);
                r
            }
            None => Err(refuse(ErrorKind::Io, None, "SOCKS connection without a handshake slot")),
        },
    };
    let socks = mode == Mode::Socks;
    let (target, early) = match negotiated {
        Ok(x) => x,
        Err(r) => return finish_refused(&mut client, peer, None, r, socks, shared).await,
    };
    let requested = started.elapsed();
    let replied = AtomicBool::new(false);
    let mut cx = Setup { client: &mut client, ahead: early, socks, replied: &replied, pooled: false, stats };
    let opened =
        tokio::time::timeout(cfg.connect_timeout, open_upstream(&target, cfg, shared, &mut cx)).await;
    let (ahead, pooled) = (std::mem::take(&mut cx.ahead), cx.pooled);
    let replied = replied.load(Relaxed);
    let upstream = match opened {
        Ok(Ok(s)) => s,
        Ok(Err(r)) if replied => return finish_after_early_reply(client, peer, &target, r, shared),
        Ok(Err(r)) => return finish_refused(&mut client, peer, Some(&target), r, socks, shared).await,
        Err(_) => {
            let r = refuse(ErrorKind::ConnectFailed, Some(Reply::TtlExpired), "upstream connect timeout");
            if replied {
                return finish_after_early_reply(client, peer, &target, r, shared);
            }
            return finish_refused(&mut client, peer, Some(&target), r, socks, shared).await;
        }
    };
    let up_at = started.elapsed();
    if socks && !replied {
        let reply = socks::encode_reply(Reply::Succeeded, upstream.local_addr().ok());
        if let Err(e) = client.write_all(&reply).await {
            stats.error(ErrorKind::Io);
            tracing::debug!(%peer, "writing success reply: {e}");
            return;
        }
    }
    // Phase times for the first-byte budget (issue 29); one line per session
    // at debug level, off by default; under the records' flood budget.
    if tracing::enabled!(tracing::Level::DEBUG) {
        shared.log.line(stats, cfg.json_logs, || {
            tracing::debug!(
                %peer,
                pooled,
                early_reply = replied,
                ahead_bytes = ahead.len(),
                request_ms = ms(requested),
                upstream_ms = ms(up_at),
                replied_ms = ms(started.elapsed()),
                "set up"
            )
        });
    }
    stats.bytes_up.fetch_add(ahead.len() as u64, Relaxed);
    let opts = PumpOptions {
        splice: cfg.splice,
        pipe_size: cfg.pipe_size,
        buffer_size: cfg.buffer_size,
        idle_timeout: cfg.idle_timeout,
    };
    let (outcome, moved) = pump::relay(&client, &upstream, opts, stats).await;
    let outcome_name = match &outcome {
        Outcome::Closed => "closed".to_string(),
        Outcome::Idle => {
            stats.error(ErrorKind::IdleTimeout);
            "idle_timeout".to_string()
        }
        Outcome::Failed(side, e) => {
            stats.error(if is_reset(e) { ErrorKind::Reset } else { ErrorKind::Io });
            // Propagate the failure as a reset to the other side.
            let other = match side.other() {
                Side::Client => &client,
                Side::Upstream => &upstream,
            };
            if let Err(le) = tcpaccel_sys::sockopt::set_linger_zero(other) {
                tracing::debug!("SO_LINGER 0: {le}");
            }
            let side = match side {
                Side::Client => "client",
                Side::Upstream => "upstream",
            };
            format!("{side} failed: {e}")
        }
    };
    let (up, down) = (moved.up + ahead.len() as u64, moved.down);
    let record = Record { peer, target: Some(&target), outcome: &outcome_name, up, down, started };
    shared.log.record(stats, cfg.json_logs, record);
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A chain that failed after the client was told it succeeded
/// (`early_reply`): the only honest signal left is a reset. Logs the code
/// the client would have been answered and counts it.
fn finish_after_early_reply(
    client: TcpStream,
    peer: SocketAddr,
    target: &Target,
    r: Refusal,
    shared: &Shared,
) {
    shared.stats.error(r.kind);
    let reply = r.reply.unwrap_or(Reply::GeneralFailure);
    shared.stats.early_reply_failed(reply.code());
    let outcome = format!("failed after early reply, client reset: {} (would have answered: {reply})", r.msg);
    let record = Record {
        peer,
        target: Some(target),
        outcome: &outcome,
        up: 0,
        down: 0,
        started: std::time::Instant::now(),
    };
    shared.log.record(&shared.stats, shared.config().json_logs, record);
    // SO_LINGER 0: close sends RST, not FIN, so the client cannot take
    // the end for a complete (empty) response.
    if let Err(e) = tcpaccel_sys::sockopt::set_linger_zero(&client) {
        tracing::debug!("SO_LINGER 0: {e}");
    }
    drop(client);
}

fn is_reset(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionAborted
    )
}

async fn finish_refused(
    client: &mut TcpStream,
    peer: SocketAddr,
    target: Option<&Target>,
    r: Refusal,
    socks: bool,
    shared: &Shared,
) {
    shared.stats.error(r.kind);
    let outcome = match r.reply {
        Some(reply) if socks => format!("refused: {} (answered: {reply})", r.msg),
        _ => format!("refused: {}", r.msg),
    };
    let record =
        Record { peer, target, outcome: &outcome, up: 0, down: 0, started: std::time::Instant::now() };
    shared.log.record(&shared.stats, shared.config().json_logs, record);
    if let (true, Some(reply)) = (socks, r.reply) {
        let _ = client.write_all(&socks::encode_reply(reply, None)).await;
    }
    let _ = client.shutdown().await;
}

/// A connection's place in the handshake budget, held from accept until its
/// SOCKS negotiation ends in any way.
struct HandshakeSlot {
    shared: Arc<Shared>,
    ticket: Ticket,
}

impl HandshakeSlot {
    /// Takes a place, displacing the oldest handshake of a full budget (or of
    /// `peer`'s full share); the receiver fires if this one is displaced later.
    /// Called in the accept loop, so age is accept order.
    fn enter(shared: Arc<Shared>, peer: SocketAddr) -> (HandshakeSlot, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        let ticket = {
            let mut h = shared.handshakes();
            let now = tcpaccel_core::Instant::from_nanos(shared.epoch.elapsed().as_nanos() as u64);
            let a = h.gate.admit_one(peer.ip(), now);
            h.evict.insert(a.ticket, tx);
            for old in a.evict.iter().filter_map(|t| h.evict.remove(t)) {
                let _ = old.send(());
            }
            a.ticket
        };
        shared.stats.handshakes_active.fetch_add(1, Relaxed);
        (HandshakeSlot { shared, ticket }, rx)
    }

    /// The handshake received another SOCKS message: it is advancing, and
    /// silent ones are displaced before it.
    fn progress(&self) {
        self.shared.handshakes().gate.progress(self.ticket);
    }
}

impl Drop for HandshakeSlot {
    fn drop(&mut self) {
        let mut h = self.shared.handshakes();
        h.gate.leave(self.ticket);
        h.evict.remove(&self.ticket);
        self.shared.stats.handshakes_active.fetch_sub(1, Relaxed);
    }
}

/// The SOCKS negotiation under its limits: the first byte within
/// `first_byte_timeout`, all of it within `handshake_timeout`, and ended at
/// once if a newer handshake displaces this one.
async fn socks_handshake(
    client: &mut TcpStream,
    cfg: &Config,
    evicted: oneshot::Receiver<()>,
    progress: &(dyn Fn() + Sync),
) -> Result<(Target, Vec<u8>), Refusal> {
    let deadline = tokio::time::Instant::now() + cfg.handshake_timeout;
    let work = async {
        // peek, not readable(): a fresh socket may report readiness before
        // any byte has arrived; peek waits for one (or end of file).
        let mut one = [0u8; 1];
        let fb = tokio::time::timeout(cfg.first_byte_timeout, client.peek(&mut one)).await;
        match fb {
            // Health checks and port scans connect and close: not a bad request.
            Ok(Ok(0)) => {
                return Err(refuse(ErrorKind::ClosedBeforeRequest, None, "closed before sending anything"))
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) if is_reset(&e) => {
                return Err(refuse(ErrorKind::ClosedBeforeRequest, None, "reset before sending anything"))
            }
            Ok(Err(e)) => {
                return Err(refuse(ErrorKind::Io, None, format!("waiting for the first byte: {e}")))
            }
            // Equal limits: the whole handshake timed out.
            Err(_) if cfg.first_byte_timeout >= cfg.handshake_timeout => {
                return Err(refuse(ErrorKind::HandshakeTimeout, None, "handshake timeout"))
            }
            Err(_) => {
                return Err(refuse(
                    ErrorKind::FirstByteTimeout,
                    None,
                    format!(
                        "nothing received within {}",
                        tcpaccel_core::units::format_duration(cfg.first_byte_timeout)
                    ),
                ))
            }
        }
        match tokio::time::timeout_at(deadline, negotiate(client, cfg, progress)).await {
            Ok(r) => r,
            Err(_) => Err(refuse(ErrorKind::HandshakeTimeout, None, "handshake timeout")),
        }
    };
    // Only a send means "displaced"; the sender is dropped unsent when this
    // handshake leaves the gate itself, which is after this select.
    let displaced = async {
        if evicted.await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        r = work => r,
        _ = displaced => Err(refuse(
            ErrorKind::HandshakeEvicted,
            None,
            "displaced by a newer handshake: handshake budget (or this source's share) spent",
        )),
    }
}

/// Largest handshake we buffer: greeting (257) + auth (513) + request (262).
const MAX_HANDSHAKE: usize = 1100;

/// Reads more bytes into `buf`; a closed or overlong handshake is a refusal.
async fn read_more(s: &mut TcpStream, buf: &mut Vec<u8>) -> Result<(), Refusal> {
    let mut tmp = [0u8; 512];
    let room = MAX_HANDSHAKE.saturating_sub(buf.len()).min(tmp.len());
    if room == 0 {
        return Err(refuse(ErrorKind::BadRequest, None, "handshake too long"));
    }
    match s.read(&mut tmp[..room]).await {
        Ok(0) => Err(refuse(ErrorKind::BadRequest, None, "client closed during handshake")),
        Ok(n) => {
            buf.extend_from_slice(&tmp[..n]);
            Ok(())
        }
        Err(e) => Err(refuse(ErrorKind::Io, None, format!("read during handshake: {e}"))),
    }
}

/// Reads until `parse` completes, removing the parsed bytes from `buf`.
async fn read_msg<T>(
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
    parse: impl Fn(&[u8]) -> Result<Parse<T>, WireError>,
) -> Result<Result<T, WireError>, Refusal> {
    loop {
        match parse(buf) {
            Ok(Parse::Done(v, n)) => {
                buf.drain(..n);
                return Ok(Ok(v));
            }
            Ok(Parse::Incomplete) => read_more(s, buf).await?,
            Err(e) => return Ok(Err(e)),
        }
    }
}

/// Constant-time comparison, so a wrong password's timing says nothing.
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// SOCKS5 negotiation with a client: returns the requested target and any
/// bytes the client already sent after its request.
async fn negotiate(
    s: &mut TcpStream,
    cfg: &Config,
    progress: &(dyn Fn() + Sync),
) -> Result<(Target, Vec<u8>), Refusal> {
    let io_err = |e: io::Error| refuse(ErrorKind::Io, None, format!("write during handshake: {e}"));
    let mut buf = Vec::with_capacity(64);
    let methods = match read_msg(s, &mut buf, socks::parse_greeting).await? {
        Ok(m) => {
            progress();
            m
        }
        Err(e) => {
            let _ = s.write_all(&[socks::VERSION, socks::METHOD_UNACCEPTABLE]).await;
            return Err(refuse(ErrorKind::BadRequest, None, format!("greeting: {e}")));
        }
    };
    let want = if cfg.users.is_empty() { socks::METHOD_NONE } else { socks::METHOD_USERPASS };
    if !methods.contains(&want) {
        s.write_all(&[socks::VERSION, socks::METHOD_UNACCEPTABLE]).await.map_err(io_err)?;
        let kind = if want == socks::METHOD_USERPASS { ErrorKind::AuthFailed } else { ErrorKind::BadRequest };
        let offered: Vec<String> = methods.iter().map(|m| format!("{m:#04x}")).collect();
        return Err(refuse(kind, None, format!("no acceptable method among {}", offered.join(", "))));
    }
    s.write_all(&[socks::VERSION, want]).await.map_err(io_err)?;
    if want == socks::METHOD_USERPASS {
        let ok = match read_msg(s, &mut buf, socks::parse_userpass).await? {
            Ok((u, p)) => {
                progress();
                cfg.users.iter().any(|(cu, cp)| ct_eq(cu.as_bytes(), &u) & ct_eq(cp.as_bytes(), &p))
            }
            Err(_) => false,
        };
        s.write_all(&[socks::AUTH_VERSION, if ok { 0 } else { 1 }]).await.map_err(io_err)?;
        if !ok {
            return Err(refuse(ErrorKind::AuthFailed, None, "authentication failed"));
        }
    }
    let req = match read_msg(s, &mut buf, socks::parse_request).await? {
        Ok(r) => r,
        Err(e) => return Err(refuse(ErrorKind::BadRequest, Some(e.reply()), format!("request: {e}"))),
    };
    if req.command != socks::CMD_CONNECT {
        return Err(refuse(
            ErrorKind::UnsupportedCommand,
            Some(Reply::CommandNotSupported),
            format!("command {} not supported (only CONNECT)", req.command),
        ));
    }
    Ok((req.target, buf))
}

/// A name that must not be looked up: not a syntactically valid host name, or
/// in the `.invalid` domain, which RFC 6761 §6.4 reserves as never resolving.
fn never_resolves(name: &str) -> bool {
    let n = name.trim_end_matches('.').to_ascii_lowercase();
    let valid_label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    n.is_empty()
        || n.len() > 253
        || !n.split('.').all(valid_label)
        || n == "invalid"
        || n.ends_with(".invalid")
}

async fn resolve(target: &Target) -> Result<Vec<SocketAddr>, Refusal> {
    match target {
        Target::Ip(a) => Ok(vec![*a]),
        Target::Domain(name, port) => {
            if never_resolves(name) {
                return Err(refuse(
                    ErrorKind::ResolveFailed,
                    Some(Reply::HostUnreachable),
                    format!("{name:?} does not resolve"),
                ));
            }
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), *port))
                .await
                .map_err(|e| {
                    refuse(
                        ErrorKind::ResolveFailed,
                        Some(Reply::HostUnreachable),
                        format!("resolve {name}: {e}"),
                    )
                })?
                .collect();
            if addrs.is_empty() {
                return Err(refuse(
                    ErrorKind::ResolveFailed,
                    Some(Reply::HostUnreachable),
                    format!("{name}: no address"),
                ));
            }
            Ok(addrs)
        }
    }
}

fn tune(sock: &TcpSocket, t: &Tuning) -> io::Result<()> {
    use tcpaccel_sys::sockopt;
    let e = |e: tcpaccel_sys::Error| io::Error::other(e.to_string());
    if let Some(b) = t.sndbuf {
        sockopt::set_send_buffer(sock, b).map_err(e)?;
    }
    if let Some(b) = t.rcvbuf {
        sockopt::set_recv_buffer(sock, b).map_err(e)?;
    }
    if let Some(cc) = &t.cc {
        sockopt::set_congestion(sock, cc).map_err(e)?;
    }
    if let Some(r) = t.pace {
        // static:RATE counts the wire, as every --pace does; the socket takes payload bytes/s.
        let cap = tcpaccel_core::pacing::Framing::ETHERNET_1500_TS.payload_bytes_per_sec(r).max(1);
        sockopt::set_max_pacing_rate(sock, cap).map_err(e)?;
    }
    if let Some(b) = t.notsent_lowat {
        sockopt::set_notsent_lowat(sock, b).map_err(e)?;
    }
    Ok(())
}

/// Connects a tuned socket to the first address of `addrs` that answers.
async fn connect_tuned(addrs: &[SocketAddr], t: &Tuning, what: &str) -> Result<TcpStream, Refusal> {
    let mut last = None;
    for a in addrs {
        let sock = match if a.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() } {
            Ok(s) => s,
            Err(e) => {
                last = Some(e);
                continue;
            }
        };
        // Buffers must be set before connect to influence the window scale.
        if let Err(e) = tune(&sock, t) {
            return Err(refuse(
                ErrorKind::Io,
                Some(Reply::GeneralFailure),
                format!("tuning socket to {a}: {e}"),
            ));
        }
        match sock.connect(*a).await {
            Ok(s) => return Ok(s),
            Err(e) => {
                tracing::debug!("connect {what} {a}: {e}");
                last = Some(e);
            }
        }
    }
    let e = last.unwrap_or_else(|| io::Error::from(io::ErrorKind::AddrNotAvailable));
    Err(refuse(ErrorKind::ConnectFailed, Some(Reply::from_io(&e)), format!("connect {what}: {e}")))
}

/// Client bytes read ahead of the chain's replies, at most: they are kept
/// to be sent again over a fresh connection if a warm one turns out dead,
/// and a client must not fill the relay's memory before its path is up.
const AHEAD_MAX: usize = 64 * 1024;

/// One session's side of the upstream set-up: its client, and the client
/// bytes that follow its request.
struct Setup<'a> {
    client: &'a mut TcpStream,
    /// Client bytes after its request (read with it, or while the chain's
    /// replies were awaited), all sent upstream once the path is up.
    ahead: Vec<u8>,
    /// A SOCKS client (it gets a reply), not a fixed forward.
    socks: bool,
    /// Set once the client has been answered success early.
    replied: &'a AtomicBool,
    /// The path went over a warm connection.
    pooled: bool,
    stats: &'a Stats,
}

impl Setup<'_> {
    /// Answers the client success now (`early_reply`), bound to `bound`.
    async fn reply_early(&mut self, bound: Option<SocketAddr>) -> Result<(), HopError> {
        let reply = socks::encode_reply(Reply::Succeeded, bound);
        self.client
            .write_all(&reply)
            .await
            .map_err(|e| HopError::Client(format!("writing early reply: {e}")))?;
        self.replied.store(true, Relaxed);
        self.stats.early_replies.fetch_add(1, Relaxed);
        Ok(())
    }
}

/// Opens the upstream side: checks access rules, then connects directly or
/// through the configured chain. On success every byte of `cx.ahead` has
/// been sent upstream.
async fn open_upstream(
    target: &Target,
    cfg: &Config,
    shared: &Arc<Shared>,
    cx: &mut Setup<'_>,
) -> Result<TcpStream, Refusal> {
    // Domain targets are resolved here when we connect directly, or when access
    // rules must see an address; through a chain the name travels on unresolved.
    let direct = cfg.next.is_empty();
    let resolved = if direct || !cfg.acl.rules.is_empty() {
        let addrs = resolve(target).await?;
        let allowed: Vec<SocketAddr> =
            addrs.into_iter().filter(|a| cfg.acl.permits(a.ip(), a.port())).collect();
        if allowed.is_empty() {
            return Err(refuse(
                ErrorKind::NotAllowed,
                Some(Reply::NotAllowed),
                format!("{target} denied by access rules"),
            ));
        }
        allowed
    } else {
        Vec::new()
    };
    if direct {
        let mut s = connect_tuned(&resolved, &cfg.tuning, "target").await?;
        nodelay(&s);
        if !cx.ahead.is_empty() {
            s.write_all(&cx.ahead).await.map_err(|e| {
                refuse(ErrorKind::Io, Some(Reply::GeneralFailure), format!("forwarding early data: {e}"))
            })?;
        }
        return Ok(s);
    }
    let via_ip = resolved.first().copied().filter(|_| matches!(target, Target::Ip(_)));
    // Each hop is asked to connect to the next one, the last to the target.
    let dests: Vec<Target> = (0..cfg.next.len())
        .map(|i| match cfg.next.get(i + 1) {
            Some(n) => n.addr.clone(),
            None => via_ip.map(Target::Ip).unwrap_or_else(|| target.clone()),
        })
        .collect();
    let first = &cfg.next[0];
    // Early only where the whole chain takes its requests in one write and
    // holds the data behind them (our relays), and only over a warm
    // connection: the request has passed this relay's rules, and the
    // connection is as good as a fresh one would be.
    let early = cfg.early_reply && cx.socks && cfg.next.iter().all(|h| h.pipeline);
    // Refills start after this session's handshake, not during it: on a busy
    // machine they would compete with it for the hops' CPU.
    if let Some(mut s) = take_warm(shared, cfg, first) {
        cx.pooled = true;
        let r = chain_handshake(&mut s, &cfg.next, &dests, true, cx, early).await;
        refill_pool(shared, cfg);
        match r {
            Ok(()) => return Ok(s),
            // The warm connection failed before its hop answered (closed by
            // the hop meanwhile, say): the request was not acted on, so a
            // fresh connection gets the answer the client needs (and the
            // client's bytes read so far, sent again).
            Err((0, HopError::Other(msg))) => {
                cx.pooled = false;
                tracing::debug!("warm connection to {} failed ({msg}); connecting afresh", first.addr)
            }
            Err((i, e)) => return Err(hop_refusal(&cfg.next[i], &dests[i], e)),
        }
    }
    let mut s = connect_hop(first, &cfg.tuning).await?;
    let r = chain_handshake(&mut s, &cfg.next, &dests, false, cx, false).await;
    if r.is_ok() && cfg.pool_size > 0 {
        shared.pool().got_through(first);
    }
    refill_pool(shared, cfg);
    match r {
        Ok(()) => Ok(s),
        Err((i, e)) => Err(hop_refusal(&cfg.next[i], &dests[i], e)),
    }
}

/// Connects to `hop` (the first of the chain) with the upstream tuning.
async fn connect_hop(hop: &Hop, t: &Tuning) -> Result<TcpStream, Refusal> {
    let addrs = resolve(&hop.addr).await.map_err(|r| {
        refuse(ErrorKind::ChainFailed, Some(Reply::HostUnreachable), format!("first hop: {}", r.msg))
    })?;
    let s = connect_tuned(&addrs, t, "first hop").await.map_err(|mut r| {
        r.kind = ErrorKind::ChainFailed;
        r.msg = format!("{} ({})", r.msg, hop.addr);
        r
    })?;
    nodelay(&s);
    Ok(s)
}

/// Handshake messages are small and each waits for an answer: send them at
/// once instead of behind a delayed ACK (Nagle). Relayed data is forwarded
/// as it arrives, so it stays on for the data path too.
fn nodelay(s: &TcpStream) {
    if let Err(e) = s.set_nodelay(true) {
        tracing::debug!("TCP_NODELAY: {e}");
    }
}

fn hop_refusal(hop: &Hop, dest: &Target, e: HopError) -> Refusal {
    match e {
        HopError::Client(msg) => {
            refuse(ErrorKind::Io, None, format!("client, while setting up {dest} via {}: {msg}", hop.addr))
        }
        HopError::Refused(reply) => {
            refuse(ErrorKind::ChainFailed, Some(reply), format!("hop {} refused {dest}: {reply}", hop.addr))
        }
        HopError::Other(msg) => {
            refuse(ErrorKind::ChainFailed, Some(Reply::GeneralFailure), format!("hop {}: {msg}", hop.addr))
        }
    }
}

/// A warm connection to `first` from the pool, if one is idle and alive.
fn take_warm(shared: &Shared, cfg: &Config, first: &Hop) -> Option<TcpStream> {
    if cfg.pool_size == 0 {
        return None;
    }
    loop {
        let (s, expired) = shared.pool().take(first, shared.epoch.elapsed(), cfg.pool_idle);
        drop(expired);
        let s = s?;
        // A greeted connection has nothing to read until we send a request;
        // anything readable (end of file, an error) means the hop gave up on it.
        let mut one = [0u8; 1];
        match s.try_read(&mut one) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Some(s),
            _ => tracing::debug!("dropping a warm connection to {} the hop has closed", first.addr),
        }
    }
}

/// Opens warm connections to the first hop until the pool holds its cap.
fn refill_pool(shared: &Arc<Shared>, cfg: &Config) {
    let Some(first) = cfg.next.first() else { return };
    if cfg.pool_size == 0 {
        return;
    }
    let (n, old) = shared.pool().wanted(first, shared.epoch.elapsed(), cfg.pool_size, cfg.pool_idle);
    drop(old);
    for _ in 0..n {
        let shared = shared.clone();
        let hop = first.clone();
        let (tuning, timeout, cap) = (cfg.tuning.clone(), cfg.connect_timeout, cfg.pool_size);
        tokio::spawn(async move {
            let opened = tokio::time::timeout(timeout, async {
                let mut s = connect_hop(&hop, &tuning).await.map_err(|r| r.msg)?;
                greet(&mut s, &hop).await.map_err(|e| match e {
                    HopError::Refused(r) => format!("{r}"),
                    HopError::Other(m) | HopError::Client(m) => m,
                })?;
                Ok::<_, String>(s)
            })
            .await
            .unwrap_or_else(|_| Err("timed out".into()));
            match opened {
                Ok(s) => {
                    let back = shared.pool().put(&hop, s, shared.epoch.elapsed(), cap);
                    drop(back);
                }
                Err(msg) => {
                    shared.pool().failed(&hop);
                    tracing::debug!("warm connection to {}: {msg}", hop.addr);
                }
            }
        });
    }
}

/// Closes expired warm connections and replaces those about to expire
/// while the pool is in use (see `pool`).
/// Says the count of records left out under a flood once it is due, also
/// when no record follows (`connlog`).
async fn log_ticks(shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        shared.log.tick(shared.config().json_logs, false);
    }
}

async fn keep_pool(shared: Arc<Shared>) {
    loop {
        let cfg = shared.config();
        if !cfg.next.is_empty() && cfg.pool_size > 0 {
            let expired = shared.pool().expire(shared.epoch.elapsed(), cfg.pool_idle);
            drop(expired);
            refill_pool(&shared, &cfg);
        }
        tokio::time::sleep(crate::pool::check_interval(cfg.pool_idle)).await;
    }
}

enum HopError {
    /// The hop answered with this failure code.
    Refused(Reply),
    /// The hop failed otherwise (closed, reset, broke the protocol).
    Other(String),
    /// Our client failed meanwhile (read or write).
    Client(String),
}

fn io_other(e: io::Error) -> HopError {
    HopError::Other(e.to_string())
}

/// The method we ask of `hop`, and the greeting (with the RFC 1929 request
/// when the hop wants credentials) that asks for it.
fn greeting(hop: &Hop) -> Result<(u8, Vec<u8>), HopError> {
    let method = if hop.auth.is_some() { socks::METHOD_USERPASS } else { socks::METHOD_NONE };
    let mut out = vec![socks::VERSION, 1, method];
    if let Some((u, p)) = &hop.auth {
        let msg = socks::encode_userpass(u.as_bytes(), p.as_bytes())
            .ok_or_else(|| HopError::Other("credentials too long".into()))?;
        out.extend_from_slice(&msg);
    }
    Ok((method, out))
}

/// Reads the hop's method choice, which must be `method`.
async fn read_method<R: AsyncRead + Unpin>(s: &mut R, method: u8) -> Result<(), HopError> {
    let mut two = [0u8; 2];
    s.read_exact(&mut two).await.map_err(io_other)?;
    match socks::parse_pair(&two, socks::VERSION) {
        Ok(Parse::Done(m, _)) if m == method => Ok(()),
        Ok(_) => Err(HopError::Other(format!("hop chose method {:#04x}", two[1]))),
        Err(e) => Err(HopError::Other(e.to_string())),
    }
}

/// Reads the RFC 1929 status, which must be success.
async fn read_auth_status<R: AsyncRead + Unpin>(s: &mut R) -> Result<(), HopError> {
    let mut two = [0u8; 2];
    s.read_exact(&mut two).await.map_err(io_other)?;
    if two != [socks::AUTH_VERSION, 0] {
        return Err(HopError::Other("hop rejected our credentials".into()));
    }
    Ok(())
}

/// Reads the answers to `greeting`: the method choice, then the auth status.
async fn read_greeting_answers<R: AsyncRead + Unpin>(
    s: &mut R,
    hop: &Hop,
    method: u8,
) -> Result<(), HopError> {
    read_method(s, method).await?;
    if hop.auth.is_some() {
        read_auth_status(s).await?;
    }
    Ok(())
}

/// Greets `hop` (and authenticates): together for a tcpaccel hop, step by
/// step for any other.
async fn greet(s: &mut TcpStream, hop: &Hop) -> Result<(), HopError> {
    let (method, msg) = greeting(hop)?;
    if hop.pipeline || hop.auth.is_none() {
        s.write_all(&msg).await.map_err(io_other)?;
        return read_greeting_answers(s, hop, method).await;
    }
    // The greeting (3 bytes) first, the credentials once the hop chose them.
    s.write_all(&msg[..3]).await.map_err(io_other)?;
    read_method(s, method).await?;
    s.write_all(&msg[3..]).await.map_err(io_other)?;
    read_auth_status(s).await
}

/// Reads exactly one CONNECT reply, never payload that follows it.
async fn read_connect_reply<R: AsyncRead + Unpin>(s: &mut R) -> Result<(), HopError> {
    // VER REP RSV ATYP and the first address byte tell the reply's length.
    let mut head = vec![0u8; 5];
    s.read_exact(&mut head).await.map_err(io_other)?;
    let rest = match head[3] {
        1 => 4 + 2 - 1,
        4 => 16 + 2 - 1,
        3 => head[4] as usize + 2,
        t => return Err(HopError::Other(format!("reply address type {t:#04x}"))),
    };
    let mut tail = vec![0u8; rest];
    s.read_exact(&mut tail).await.map_err(io_other)?;
    head.extend_from_slice(&tail);
    match socks::parse_reply(&head) {
        Ok(Parse::Done((Reply::Succeeded, _), _)) => Ok(()),
        Ok(Parse::Done((r, _), _)) => Err(HopError::Refused(r)),
        Ok(Parse::Incomplete) => Err(HopError::Other("truncated reply".into())),
        Err(e) => Err(HopError::Other(e.to_string())),
    }
}

/// SOCKS5 client side through `hops` over `s` (connected to `hops[0]`,
/// already greeted if `greeted`), asking hop `i` to connect to `dests[i]`.
/// A run of tcpaccel hops gets all its messages in one write (each of our
/// relays forwards what follows its request to its next hop once that is
/// up), then the answers are read in order; any other hop is negotiated
/// step by step. When the chain ends in a run of our hops, the client's
/// bytes (`cx.ahead`, and what it sends while the answers are awaited) go
/// right behind the requests, so they travel with them instead of a round
/// trip later; toward a hop that is not ours they wait for its reply. With
/// `early` (the chain is one such run), the client is answered success as
/// soon as the requests are written. On failure, returns the index of the
/// hop that failed.
async fn chain_handshake(
    s: &mut TcpStream,
    hops: &[Hop],
    dests: &[Target],
    greeted: bool,
    cx: &mut Setup<'_>,
    early: bool,
) -> Result<(), (usize, HopError)> {
    let encode = |i: usize| socks::encode_connect(&dests[i]).map_err(|e| (i, HopError::Other(e.to_string())));
    let mut i = 0;
    while i < hops.len() {
        let fresh = !(greeted && i == 0);
        if !hops[i].pipeline {
            if fresh {
                greet(s, &hops[i]).await.map_err(|e| (i, e))?;
            }
            s.write_all(&encode(i)?).await.map_err(|e| (i, io_other(e)))?;
            read_connect_reply(s).await.map_err(|e| (i, e))?;
            i += 1;
            continue;
        }
        let end = hops[i..].iter().position(|h| !h.pipeline).map_or(hops.len(), |n| i + n);
        let mut out = Vec::new();
        let mut run = Vec::new();
        for (k, hop) in hops.iter().enumerate().take(end).skip(i) {
            if k > i || fresh {
                let (m, g) = greeting(hop).map_err(|e| (k, e))?;
                out.extend_from_slice(&g);
                run.push((k, Some(m)));
            } else {
                run.push((k, None));
            }
            out.extend_from_slice(&encode(k)?);
        }
        if end < hops.len() {
            s.write_all(&out).await.map_err(|e| (i, io_other(e)))?;
            for &(k, m) in &run {
                read_answers(s, &hops[k], m).await.map_err(|e| (k, e))?;
            }
            i = end;
            continue;
        }
        out.extend_from_slice(&cx.ahead);
        s.write_all(&out).await.map_err(|e| (i, io_other(e)))?;
        if early {
            cx.reply_early(s.local_addr().ok()).await.map_err(|e| (i, e))?;
        }
        return answers_and_ahead(s, hops, &run, cx).await;
    }
    // The last hop is not ours: the client's bytes go once it has answered.
    if !cx.ahead.is_empty() {
        s.write_all(&cx.ahead).await.map_err(|e| (hops.len() - 1, io_other(e)))?;
    }
    Ok(())
}

/// Reads a hop's answers: to the greeting (when it was sent, `method`) and
/// to the CONNECT.
async fn read_answers<R: AsyncRead + Unpin>(
    s: &mut R,
    hop: &Hop,
    method: Option<u8>,
) -> Result<(), HopError> {
    if let Some(m) = method {
        read_greeting_answers(s, hop, m).await?;
    }
    read_connect_reply(s).await
}

/// Reads the answers of the hops in `run` (index, method asked if greeted)
/// from `s` while sending on whatever the client sends meanwhile (up to
/// [`AHEAD_MAX`], kept in `cx.ahead`). Returns once every answer is read
/// and every byte taken from the client is written.
async fn answers_and_ahead(
    s: &mut TcpStream,
    hops: &[Hop],
    run: &[(usize, Option<u8>)],
    cx: &mut Setup<'_>,
) -> Result<(), (usize, HopError)> {
    let first = run.first().map_or(0, |r| r.0);
    let (mut up_r, mut up_w) = s.split();
    let (mut cl_r, _) = cx.client.split();
    let ahead = &mut cx.ahead;
    let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
    let answers = async move {
        let mut r = Ok(());
        for &(k, m) in run {
            if let Err(e) = read_answers(&mut up_r, &hops[k], m).await {
                r = Err((k, e));
                break;
            }
        }
        // Tells the forwarding to stop once its write in hand is done.
        drop(stop_tx);
        r
    };
    let forward = async move {
        let mut buf = vec![0u8; 16 * 1024];
        let mut upstream_ok = true;
        while upstream_ok {
            let room = AHEAD_MAX.saturating_sub(ahead.len()).min(buf.len());
            if room == 0 {
                break;
            }
            // A read is cancel-safe: stopping here loses nothing.
            let n = tokio::select! {
                biased;
                _ = &mut stop_rx => return Ok(()),
                r = cl_r.read(&mut buf[..room]) => r?,
            };
            if n == 0 {
                // The client half-closed: the data path passes that on.
                break;
            }
            // Kept before it is written: if the connection fails, all of it
            // goes again over a fresh one.
            ahead.extend_from_slice(&buf[..n]);
            // A failed write means the hop is gone; its answer says so.
            upstream_ok = up_w.write_all(&buf[..n]).await.is_ok();
        }
        let _ = stop_rx.await;
        Ok::<(), io::Error>(())
    };
    let (answered, forwarded) = tokio::join!(answers, forward);
    answered?;
    forwarded.map_err(|e| (first, HopError::Client(format!("reading while the chain was set up: {e}"))))
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_never_resolve() {
        assert!(never_resolves("nothing.invalid"));
        assert!(never_resolves("INVALID."));
        assert!(never_resolves("bad name"));
        assert!(never_resolves("a..b"));
        assert!(never_resolves(""));
        assert!(!never_resolves("localhost"));
        assert!(!never_resolves("my-host.example.com."));
    }

    #[test]
    fn constant_time_compare() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"ab"));
    }
}
