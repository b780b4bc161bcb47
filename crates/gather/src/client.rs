//! The gather client: says hello on a control connection, opens as many data
//! streams as the server asks, stripes its source over them in chunks pulled
//! from one shared cursor (GridFTP MODE E style), reports progress each
//! interval, announces the end of data and waits for the server's receipt.
//! Also the one-shot status query.
//!
//! It never waits forever: the server sends `received` every interval, and
//! the client gives up when the server is silent for [`SendOptions::timeout`],
//! or when, after `end`, the confirmed byte count stops moving that long.
//!
//! What it is not: it does not decide stream counts or windows (the server
//! does), and it does not retry a lost stream: a stream that fails fails the
//! transfer, because its chunk would otherwise be missing.

use crate::proto::{self, Control, ErrorCode, FrameHeader, Kind, SessionId, Token};
use crate::status::ClientStatus;
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tcpaccel_core::rng::Rng;
use tcpaccel_core::units::Rate;
use tcpaccel_sys::sockopt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{watch, Mutex};
use tokio::task::JoinSet;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of [`SendOptions::timeout`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Client failures.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connect to {addr}")]
    Connect {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("server refused ({code}): {message}")]
    Refused { code: ErrorCode, message: String, server_version: Option<u16> },
    #[error("protocol: {0}")]
    Protocol(String),
    #[error("timed out: {0}")]
    Timeout(String),
    #[error("congestion control {name:?} for the data streams")]
    Congestion {
        name: String,
        #[source]
        source: tcpaccel_sys::Error,
    },
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ClientError {
    let what = what.into();
    move |source| ClientError::Io { what, source }
}

/// When a synthetic source stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Bytes(u64),
    Duration(Duration),
}

/// What the client sends.
#[derive(Debug, Clone)]
pub enum Source {
    File(PathBuf),
    Stdin,
    /// Seeded pseudo-random bytes, at `rate` (unpaced when absent), until `limit`.
    Synthetic {
        rate: Option<Rate>,
        limit: Limit,
        seed: u64,
    },
}

#[derive(Debug, Clone)]
pub struct SendOptions {
    pub server: SocketAddr,
    pub id: String,
    pub class: String,
    /// A lower target than the class's (the server keeps the smaller).
    pub target: Option<Rate>,
    pub source: Source,
    /// Congestion control of every connection (`TCP_CONGESTION`, set before
    /// connecting), e.g. "reno"; `None` keeps the system default.
    pub cc: Option<String>,
    /// Give up when the server sends nothing for this long, or when after
    /// the end of data its confirmed byte count does not move for this long
    /// ([`DEFAULT_TIMEOUT`] is a sensible value).
    pub timeout: Duration,
}

/// The result of a transfer.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SendReport {
    pub id: String,
    pub session: SessionId,
    pub bytes: u64,
    pub sha256: String,
    pub server_sha256: String,
    /// The server confirmed every byte, and the digests agree.
    pub complete: bool,
    pub seconds: f64,
    pub goodput_bps: u64,
    pub max_streams: u32,
    pub stream_changes: u32,
}

enum Reader {
    File(tokio::fs::File),
    Stdin(tokio::io::Stdin),
    Synthetic { rng: Rng, rate: Option<Rate>, limit: Limit },
}

/// The shared cursor: chunks come out in offset order, hashed as they go.
struct Cursor {
    reader: Reader,
    offset: u64,
    hasher: Sha256,
    start: tokio::time::Instant,
    exhausted: bool,
    /// Mirrors `exhausted` for readers that must not wait for the lock.
    done: Arc<AtomicBool>,
    /// Time spent waiting for the pacing of a synthetic source, ns.
    idle_ns: Arc<AtomicU64>,
}

async fn fill<R: AsyncRead + Unpin>(r: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        let k = r.read(&mut buf[n..]).await?;
        if k == 0 {
            break;
        }
        n += k;
    }
    Ok(n)
}

impl Cursor {
    async fn next(&mut self, chunk: usize) -> Result<Option<(u64, Vec<u8>)>, ClientError> {
        if self.exhausted {
            return Ok(None);
        }
        let mut buf = vec![0u8; chunk];
        let n = match &mut self.reader {
            Reader::File(f) => fill(f, &mut buf).await.map_err(io_err("read source file"))?,
            Reader::Stdin(s) => fill(s, &mut buf).await.map_err(io_err("read stdin"))?,
            Reader::Synthetic { rng, rate, limit } => {
                let n = match *limit {
                    Limit::Bytes(total) => (total - self.offset).min(chunk as u64) as usize,
                    Limit::Duration(d) => {
                        if self.start.elapsed() >= d {
                            0
                        } else {
                            chunk
                        }
                    }
                };
                if n > 0 {
                    if let Some(r) = rate {
                        // Release the chunk when the bytes before it have had their time.
                        let due = self.start + r.time_for(self.offset);
                        let now = tokio::time::Instant::now();
                        if due > now {
                            self.idle_ns.fetch_add((due - now).as_nanos() as u64, Ordering::Relaxed);
                            tokio::time::sleep_until(due).await;
                        }
                    }
                    for w in buf[..n].chunks_mut(8) {
                        let v = rng.next_u64().to_le_bytes();
                        w.copy_from_slice(&v[..w.len()]);
                    }
                }
                n
            }
        };
        if n == 0 {
            self.exhausted = true;
            self.done.store(true, Ordering::Relaxed);
            return Ok(None);
        }
        buf.truncate(n);
        self.hasher.update(&buf);
        let off = self.offset;
        self.offset += n as u64;
        Ok(Some((off, buf)))
    }
}

async fn connect(addr: SocketAddr, kind: Kind, cc: Option<&str>) -> Result<TcpStream, ClientError> {
    let sock = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4(),
        SocketAddr::V6(_) => TcpSocket::new_v6(),
    }
    .map_err(|source| ClientError::Connect { addr, source })?;
    if let Some(name) = cc {
        sockopt::set_congestion(&sock, name)
            .map_err(|source| ClientError::Congestion { name: name.to_string(), source })?;
    }
    let s = tokio::time::timeout(CONNECT_TIMEOUT, sock.connect(addr))
        .await
        .map_err(|_| ClientError::Connect { addr, source: std::io::ErrorKind::TimedOut.into() })?
        .map_err(|source| ClientError::Connect { addr, source })?;
    let _ = s.set_nodelay(true);
    let mut s = s;
    s.write_all(&proto::encode_preface(proto::VERSION, kind)).await.map_err(io_err("send preface"))?;
    Ok(s)
}

async fn read_msg<R: AsyncRead + Unpin>(r: &mut R) -> Result<Option<Control>, ClientError> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(ClientError::Io { what: "read control".into(), source: e }),
    }
    let n = proto::control_len(len).map_err(|e| ClientError::Protocol(e.to_string()))?;
    let mut body = vec![0u8; n];
    r.read_exact(&mut body).await.map_err(io_err("read control"))?;
    proto::decode_control(&body).map(Some).map_err(|e| ClientError::Protocol(e.to_string()))
}

fn refused(m: Control) -> ClientError {
    match m {
        Control::Error { code, message, server_version } => {
            ClientError::Refused { code, message, server_version }
        }
        other => ClientError::Protocol(format!("unexpected message {other:?}")),
    }
}

/// Asks a running server for its per-client view.
pub async fn query_status(server: SocketAddr) -> Result<Vec<ClientStatus>, ClientError> {
    let mut s = connect(server, Kind::Status, None).await?;
    match read_msg(&mut s).await? {
        Some(Control::StatusReply { clients }) => Ok(clients),
        Some(m) => Err(refused(m)),
        None => Err(ClientError::Protocol("server closed without a status reply".into())),
    }
}

struct StreamCtx {
    server: SocketAddr,
    cc: Option<String>,
    session: SessionId,
    token: Token,
    chunk: usize,
    checksum: bool,
    cursor: Arc<Mutex<Cursor>>,
    want: watch::Receiver<u32>,
    /// Streams running and not leaving; a stream leaves when this exceeds `want`.
    active: Arc<AtomicU32>,
    sent: Arc<AtomicU64>,
}

async fn stream_task(ctx: Arc<StreamCtx>, index: u16) -> Result<(), ClientError> {
    let mut s = connect(ctx.server, Kind::Data, ctx.cc.as_deref()).await?;
    s.write_all(&proto::encode_attach(&ctx.session, &ctx.token, index))
        .await
        .map_err(io_err("send attach"))?;
    let mut counted = true;
    let result = stream_loop(&ctx, &mut s, index, &mut counted).await;
    if counted {
        ctx.active.fetch_sub(1, Ordering::Relaxed);
    }
    result?;
    s.write_all(&FrameHeader::end(ctx.session.tag(), index).encode())
        .await
        .map_err(io_err("end of stream"))?;
    s.shutdown().await.map_err(io_err("shutdown stream"))?;
    Ok(())
}

async fn stream_loop(
    ctx: &StreamCtx,
    s: &mut TcpStream,
    index: u16,
    counted: &mut bool,
) -> Result<(), ClientError> {
    loop {
        // More streams than wanted: this one leaves (one at a time, by CAS).
        let a = ctx.active.load(Ordering::Relaxed);
        if a > *ctx.want.borrow() {
            if ctx.active.compare_exchange(a, a - 1, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                *counted = false;
                return Ok(());
            }
            continue;
        }
        let item = ctx.cursor.lock().await.next(ctx.chunk).await?;
        let Some((off, data)) = item else { return Ok(()) };
        let h = FrameHeader::chunk(ctx.session.tag(), index, off, &data, ctx.checksum);
        s.write_all(&h.encode()).await.map_err(io_err(format!("stream {index}: write")))?;
        s.write_all(&data).await.map_err(io_err(format!("stream {index}: write")))?;
        ctx.sent.fetch_add(data.len() as u64, Ordering::Relaxed);
    }
}

/// Sends the whole source and waits for the server's receipt.
pub async fn send(opts: SendOptions) -> Result<SendReport, ClientError> {
    let started = tokio::time::Instant::now();
    let timeout = opts.timeout;
    let reader = match &opts.source {
        Source::File(p) => {
            Reader::File(tokio::fs::File::open(p).await.map_err(io_err(format!("open {}", p.display())))?)
        }
        Source::Stdin => Reader::Stdin(tokio::io::stdin()),
        Source::Synthetic { rate, limit, seed } => {
            Reader::Synthetic { rng: Rng::seeded(*seed), rate: *rate, limit: *limit }
        }
    };
    let mut ctl = connect(opts.server, Kind::Control, opts.cc.as_deref()).await?;
    let hello = Control::Hello {
        client_id: opts.id.clone(),
        class: opts.class.clone(),
        target_bps: opts.target.map(|r| r.0),
    };
    ctl.write_all(&proto::encode_control(&hello)).await.map_err(io_err("send hello"))?;
    let welcome = tokio::time::timeout(timeout, read_msg(&mut ctl)).await.map_err(|_| {
        ClientError::Timeout(format!(
            "no answer to hello within {}",
            tcpaccel_core::units::format_duration(timeout)
        ))
    })?;
    let (session, token, streams, chunk, checksum, interval_ms) = match welcome? {
        Some(Control::Welcome { session, token, streams, chunk_size, checksum, interval_ms, .. }) => {
            if chunk_size == 0 || chunk_size > proto::MAX_CHUNK {
                return Err(ClientError::Protocol(format!("server asked for chunks of {chunk_size} bytes")));
            }
            (session, token, streams.max(1), chunk_size as usize, checksum, interval_ms.max(10))
        }
        Some(m) => return Err(refused(m)),
        None => return Err(ClientError::Protocol("server closed before welcome".into())),
    };
    tracing::info!(%session, streams, chunk, "gather: welcomed");
    // The heartbeat comes once per interval: never expect it more often.
    let timeout = timeout.max(Duration::from_millis(interval_ms) * 3);
    let idle_ns = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    // A paced source sends chunks of at most ~50 ms of its rate, so that a
    // slow client's goodput is smooth at the server's interval.
    let chunk = match &opts.source {
        Source::Synthetic { rate: Some(r), .. } => ((r.bytes_per_sec() / 20) as usize).clamp(1024, chunk),
        _ => chunk,
    };
    let cursor = Arc::new(Mutex::new(Cursor {
        reader,
        offset: 0,
        hasher: Sha256::new(),
        start: tokio::time::Instant::now(),
        exhausted: false,
        done: done.clone(),
        idle_ns: idle_ns.clone(),
    }));
    let (want_tx, want_rx) = watch::channel(streams);
    let sent = Arc::new(AtomicU64::new(0));
    let ctx = Arc::new(StreamCtx {
        server: opts.server,
        cc: opts.cc.clone(),
        session,
        token,
        chunk,
        checksum,
        cursor: cursor.clone(),
        want: want_rx,
        active: Arc::new(AtomicU32::new(0)),
        sent: sent.clone(),
    });
    let (mut rd, mut wr) = ctl.into_split();
    // Control messages are read by their own task: a read cut short by the
    // other branches of the loop's select would lose bytes of a message.
    let (msg_tx, mut msg_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut reader_task = JoinSet::new();
    reader_task.spawn(async move {
        loop {
            let m = read_msg(&mut rd).await;
            let last = !matches!(m, Ok(Some(_)));
            if msg_tx.send(m).is_err() || last {
                break;
            }
        }
    });
    let mut tasks: JoinSet<(u16, Result<(), ClientError>)> = JoinSet::new();
    // Each new stream gets a fresh index, so a stream that is still closing
    // never collides with its replacement at the server.
    let mut next_index: u16 = 0;
    let mut max_streams = 0u32;
    let mut changes = 0u32;
    let interval = Duration::from_millis(interval_ms);
    let mut progress = tokio::time::interval(interval);
    progress.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_progress = tokio::time::Instant::now();
    let mut ended: Option<tokio::time::Instant> = None;
    let mut last_heard = tokio::time::Instant::now();
    let (mut confirmed, mut confirmed_at) = (0u64, tokio::time::Instant::now());
    let fmt = tcpaccel_core::units::format_duration;
    let (sha, total) = loop {
        // Open any stream the server wants and we do not run yet.
        let want = *want_tx.borrow();
        while !done.load(Ordering::Relaxed) && ctx.active.load(Ordering::Relaxed) < want {
            ctx.active.fetch_add(1, Ordering::Relaxed);
            let (c, i) = (ctx.clone(), next_index);
            next_index = next_index.wrapping_add(1);
            tasks.spawn(async move { (i, stream_task(c, i).await) });
        }
        max_streams = max_streams.max(ctx.active.load(Ordering::Relaxed));
        if tasks.is_empty() && ended.is_none() && done.load(Ordering::Relaxed) {
            let c = cursor.lock().await;
            let total = c.offset;
            let sha = hex::encode(c.hasher.clone().finalize());
            drop(c);
            let end = Control::End { total, sha256: sha };
            wr.write_all(&proto::encode_control(&end)).await.map_err(io_err("send end"))?;
            ended = Some(tokio::time::Instant::now());
            tracing::info!(total, "gather: end of data sent");
        }
        // The server sends `received` every interval: silence means it is
        // gone; after our end, a count that stops moving means the transfer
        // is stuck (its data will not arrive).
        let silent_by = last_heard + timeout;
        let stalled_by = ended.map(|e| e.max(confirmed_at) + timeout);
        let deadline = stalled_by.map_or(silent_by, |s| s.min(silent_by));
        tokio::select! {
            m = msg_rx.recv() => {
                last_heard = tokio::time::Instant::now();
                match m {
                    Some(Ok(Some(Control::SetStreams { streams }))) => {
                        changes += 1;
                        let _ = want_tx.send(streams.max(1));
                    }
                    Some(Ok(Some(Control::Received { bytes }))) => {
                        if bytes > confirmed {
                            (confirmed, confirmed_at) = (bytes, last_heard);
                        }
                    }
                    Some(Ok(Some(Control::Done { total, sha256, complete }))) => {
                        if ended.is_none() {
                            return Err(ClientError::Protocol("done before end of data".into()));
                        }
                        let c = cursor.lock().await;
                        let ours = hex::encode(c.hasher.clone().finalize());
                        let ok = complete && total == c.offset && sha256 == ours;
                        drop(c);
                        break ((ours, sha256, ok), total);
                    }
                    Some(Ok(Some(m))) => return Err(refused(m)),
                    Some(Err(e)) => return Err(e),
                    Some(Ok(None)) | None => {
                        return Err(ClientError::Protocol("server closed the control connection".into()))
                    }
                }
            },
            Some(j) = tasks.join_next(), if !tasks.is_empty() => match j {
                Ok((_, Ok(()))) => {}
                Ok((i, Err(e))) => {
                    let mut m = format!("data stream {i} failed: {e}");
                    let mut cause = std::error::Error::source(&e);
                    while let Some(c) = cause {
                        m.push_str(&format!(": {c}"));
                        cause = c.source();
                    }
                    return Err(ClientError::Protocol(m));
                }
                Err(e) => return Err(ClientError::Protocol(format!("data stream task: {e}"))),
            },
            _ = progress.tick() => {
                let el = last_progress.elapsed();
                last_progress = tokio::time::Instant::now();
                let idle = Duration::from_nanos(idle_ns.swap(0, Ordering::Relaxed));
                // Idle for over a fifth of the interval: the source, not the
                // network, set the pace; the server must not add streams for it.
                let app_limited = idle * 5 > el;
                let p = Control::Progress { sent: sent.load(Ordering::Relaxed), app_limited };
                wr.write_all(&proto::encode_control(&p)).await.map_err(io_err("send progress"))?;
            }
            _ = tokio::time::sleep_until(deadline) => {
                let total = cursor.lock().await.offset;
                return Err(ClientError::Timeout(if deadline == silent_by {
                    format!("the server sent nothing for {}", fmt(timeout))
                } else {
                    format!(
                        "the server confirmed {confirmed} of {total} bytes and no more for {} after the end of data",
                        fmt(timeout)
                    )
                }));
            }
        }
    };
    let _ = wr.shutdown().await;
    let secs = started.elapsed().as_secs_f64();
    let ((ours, theirs, complete), total) = (sha, total);
    Ok(SendReport {
        id: opts.id,
        session,
        bytes: total,
        sha256: ours,
        server_sha256: theirs,
        complete,
        seconds: secs,
        goodput_bps: if secs > 0.0 { (total as f64 * 8.0 / secs) as u64 } else { 0 },
        max_streams,
        stream_changes: changes,
    })
}
