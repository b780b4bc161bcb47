//! The data path between two connected sockets: splice(2) through one pipe
//! per direction, or a user-space copy through one buffer per direction.
//!
//! Driven by readiness on the tokio reactor. Each direction alternates: fill
//! the (empty) pipe from the source, then drain it completely into the
//! destination. Because the source is only read into an *empty* pipe,
//! `EAGAIN` there always means "no data", and `EAGAIN` on the drain always
//! means "destination full" — the two meanings of splice's `EAGAIN` never mix.
//!
//! Half-close: end of file from one side becomes `shutdown(SHUT_WR)` toward
//! the other once the pipe is drained, and the other direction keeps going.
//! A reset on either side ends both directions and is reported so the caller
//! can reset the other side (SO_LINGER 0). The idle timer is fed by traffic in
//! both directions. Memory per connection is bounded by two pipes or two
//! buffers. This module does not accept, connect or negotiate.

use std::io;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use tcpaccel_sys::splice::{self, Pipe};
use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::stats::Stats;

/// Which socket of the pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Client,
    Upstream,
}

impl Side {
    pub fn other(self) -> Side {
        match self {
            Side::Client => Side::Upstream,
            Side::Upstream => Side::Client,
        }
    }
}

/// How the relayed connection ended.
#[derive(Debug)]
pub enum Outcome {
    /// Both directions reached end of file and were shut down in turn.
    Closed,
    /// No byte moved in either direction for the idle timeout.
    Idle,
    /// This side failed (reset, or another socket error); the other side
    /// should be reset too.
    Failed(Side, io::Error),
}

/// Data path settings.
#[derive(Debug, Clone, Copy)]
pub struct PumpOptions {
    pub splice: bool,
    pub pipe_size: usize,
    pub buffer_size: usize,
    pub idle_timeout: Duration,
}

/// Bytes moved by one relayed connection, and whether both directions
/// actually spliced (false if either copied, configured or as a fallback).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Moved {
    pub up: u64,
    pub down: u64,
    pub spliced: bool,
}

struct Shared<'a> {
    start: Instant,
    /// Nanoseconds after `start` of the last byte moved in either direction.
    last: AtomicU64,
    /// The connection is counted in `stats.spliced` (else in `stats.copied`).
    spliced: AtomicBool,
    stats: &'a Stats,
}

impl Shared<'_> {
    fn touch(&self) {
        self.last.store(self.start.elapsed().as_nanos() as u64, Relaxed);
    }

    /// A direction copies after all: move the connection to the copied count.
    fn demote(&self) {
        if self.spliced.swap(false, Relaxed) {
            self.stats.spliced.fetch_sub(1, Relaxed);
            self.stats.copied.fetch_add(1, Relaxed);
        }
    }
}

struct Dir<'a> {
    from: &'a TcpStream,
    to: &'a TcpStream,
    from_side: Side,
    moved: AtomicU64,
    counter: &'a AtomicU64,
}

fn failed(side: Side) -> impl Fn(io::Error) -> (Side, io::Error) {
    move |e| (side, e)
}

fn would_block() -> io::Error {
    io::Error::from(io::ErrorKind::WouldBlock)
}

impl Dir<'_> {
    fn add(&self, n: usize, shared: &Shared<'_>) {
        self.moved.fetch_add(n as u64, Relaxed);
        self.counter.fetch_add(n as u64, Relaxed);
        shared.touch();
    }

    /// Source EOF: pass it on as FIN.
    fn finish(&self) -> Result<(), (Side, io::Error)> {
        splice::shutdown_write(self.to.as_fd()).map_err(failed(self.from_side.other()))
    }

    async fn run_splice(
        &self,
        pipe: &Pipe,
        opts: &PumpOptions,
        shared: &Shared<'_>,
    ) -> Result<(), (Side, io::Error)> {
        let cap = pipe.capacity();
        let to_side = self.from_side.other();
        loop {
            let n = loop {
                self.from.readable().await.map_err(failed(self.from_side))?;
                match self.from.try_io(Interest::READABLE, || {
                    pipe.fill_from(self.from.as_fd(), cap)?.ok_or_else(would_block)
                }) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) if splice::is_unsupported(&e) && self.moved.load(Relaxed) == 0 => {
                        tracing::debug!("splice not supported here ({e}); copying instead");
                        shared.demote();
                        return self.run_copy(opts, shared).await;
                    }
                    Err(e) => return Err((self.from_side, e)),
                }
            };
            if n == 0 {
                return self.finish();
            }
            let mut pending = n;
            while pending > 0 {
                self.to.writable().await.map_err(failed(to_side))?;
                match self.to.try_io(Interest::WRITABLE, || {
                    pipe.drain_to(self.to.as_fd(), pending)?.ok_or_else(would_block)
                }) {
                    Ok(0) => return Err((to_side, io::Error::from(io::ErrorKind::WriteZero))),
                    Ok(m) => {
                        pending -= m;
                        self.add(m, shared);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Err((to_side, e)),
                }
            }
        }
    }

    async fn run_copy(&self, opts: &PumpOptions, shared: &Shared<'_>) -> Result<(), (Side, io::Error)> {
        let mut buf = vec![0u8; opts.buffer_size];
        let to_side = self.from_side.other();
        loop {
            let n = loop {
                self.from.readable().await.map_err(failed(self.from_side))?;
                match self.from.try_read(&mut buf) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err((self.from_side, e)),
                }
            };
            if n == 0 {
                return self.finish();
            }
            let mut off = 0;
            while off < n {
                self.to.writable().await.map_err(failed(to_side))?;
                match self.to.try_write(&buf[off..n]) {
                    Ok(0) => return Err((to_side, io::Error::from(io::ErrorKind::WriteZero))),
                    Ok(m) => {
                        off += m;
                        self.add(m, shared);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err((to_side, e)),
                }
            }
        }
    }

    async fn run(
        &self,
        pipe: Option<&Pipe>,
        opts: &PumpOptions,
        shared: &Shared<'_>,
    ) -> Result<(), (Side, io::Error)> {
        match pipe {
            Some(pipe) => self.run_splice(pipe, opts, shared).await,
            None => self.run_copy(opts, shared).await,
        }
    }
}

/// A pipe per direction (up, down) if splice is configured and both can be
/// made. Out of descriptors or pipe quota, the connection copies instead.
fn pipes_for(opts: &PumpOptions, stats: &Stats) -> Option<(Pipe, Pipe)> {
    if !opts.splice {
        return None;
    }
    match Pipe::new(opts.pipe_size).and_then(|up| Ok((up, Pipe::new(opts.pipe_size)?))) {
        Ok(pair) => Some(pair),
        Err(e) => {
            stats.pipe_failures.fetch_add(1, Relaxed);
            tracing::debug!("no pipe ({e}); copying instead");
            None
        }
    }
}

/// Relays between `client` and `upstream` until both directions end, either
/// side fails, or the connection is idle for `opts.idle_timeout`.
///
/// Counts the connection in `stats.spliced` or `stats.copied` by the path
/// its data takes, as soon as that is known (both pipes made, or not), so a
/// snapshot taken during a long transfer already shows it.
pub async fn relay(
    client: &TcpStream,
    upstream: &TcpStream,
    opts: PumpOptions,
    stats: &Stats,
) -> (Outcome, Moved) {
    let pipes = pipes_for(&opts, stats);
    let spliced = pipes.is_some();
    if spliced {
        stats.spliced.fetch_add(1, Relaxed);
    } else {
        stats.copied.fetch_add(1, Relaxed);
    }
    let shared =
        Shared { start: Instant::now(), last: AtomicU64::new(0), spliced: AtomicBool::new(spliced), stats };
    let up = Dir {
        from: client,
        to: upstream,
        from_side: Side::Client,
        moved: AtomicU64::new(0),
        counter: &stats.bytes_up,
    };
    let down = Dir {
        from: upstream,
        to: client,
        from_side: Side::Upstream,
        moved: AtomicU64::new(0),
        counter: &stats.bytes_down,
    };
    let idle = async {
        loop {
            let last = Duration::from_nanos(shared.last.load(Relaxed));
            let deadline = shared.start + last + opts.idle_timeout;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    };
    let (up_pipe, down_pipe) = match pipes {
        Some((u, d)) => (Some(u), Some(d)),
        None => (None, None),
    };
    let both = async {
        tokio::try_join!(
            up.run(up_pipe.as_ref(), &opts, &shared),
            down.run(down_pipe.as_ref(), &opts, &shared)
        )
    };
    let outcome = tokio::select! {
        r = both => match r {
            Ok(_) => Outcome::Closed,
            Err((side, e)) => Outcome::Failed(side, e),
        },
        _ = idle => Outcome::Idle,
    };
    let spliced = shared.spliced.load(Relaxed);
    (outcome, Moved { up: up.moved.load(Relaxed), down: down.moved.load(Relaxed), spliced })
}
