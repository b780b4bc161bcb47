//! Blocking data movers shared by the sender and the receiver: write a
//! seeded pattern for a byte count or until a deadline, read and count
//! (optionally hashing) until EOF or a byte count, read fixed-size messages
//! with a deadline.
//!
//! What it is not: no protocol decisions (see `proto`), no reports. Sockets
//! carry short `SO_SNDTIMEO`/`SO_RCVTIMEO` timeouts so these loops notice a
//! deadline or an abort flag even while the peer is slow.

use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tcpaccel_core::rng::Rng;

/// Size of one write: large enough for few syscalls at multi-Gbit/s.
pub const CHUNK: usize = 128 * 1024;
/// Poll period of blocked reads/writes for deadlines and aborts.
pub const POLL: Duration = Duration::from_millis(100);

/// What bounds a transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    Bytes(u64),
    Deadline(Instant),
}

/// A payload buffer filled from a seeded RNG (not compressible, replayable).
pub fn pattern(seed: u64, stream: u64) -> Vec<u8> {
    let mut rng = Rng::fork(seed, stream);
    let mut v = Vec::with_capacity(CHUNK);
    while v.len() < CHUNK {
        v.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    v
}

fn transient(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted)
}

/// Writes `buf` repeatedly until `until`, or until `finish` is set (an
/// early but orderly end), or fails on `abort`; counts into `counter` and
/// hashes what was actually written. Returns the bytes written.
pub fn write_data(
    mut s: &TcpStream,
    buf: &[u8],
    until: Until,
    counter: &AtomicU64,
    mut hasher: Option<&mut Sha256>,
    finish: Option<&AtomicBool>,
    abort: &AtomicBool,
) -> io::Result<u64> {
    s.set_write_timeout(Some(POLL))?;
    let mut sent = 0u64;
    loop {
        if abort.load(Ordering::Relaxed) {
            return Err(io::Error::new(ErrorKind::Interrupted, "aborted"));
        }
        if finish.is_some_and(|f| f.load(Ordering::Relaxed)) {
            break;
        }
        let n = match until {
            Until::Bytes(total) => {
                let left = total - sent;
                if left == 0 {
                    break;
                }
                (buf.len() as u64).min(left) as usize
            }
            Until::Deadline(d) => {
                if Instant::now() >= d {
                    break;
                }
                buf.len()
            }
        };
        match s.write(&buf[..n]) {
            Ok(0) => return Err(io::Error::new(ErrorKind::WriteZero, "peer stopped reading")),
            Ok(k) => {
                sent += k as u64;
                counter.fetch_add(k as u64, Ordering::Relaxed);
                if let Some(h) = hasher.as_deref_mut() {
                    h.update(&buf[..k]);
                }
            }
            Err(e) if transient(&e) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}

/// Why a read loop stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadEnd {
    Eof,
    Count,
}

/// Reads until EOF, or until exactly `limit` bytes when given; counts into
/// `counter`, hashes, fails after `idle` without any byte or on `abort`.
pub fn read_data(
    mut s: &TcpStream,
    limit: Option<u64>,
    counter: &AtomicU64,
    mut hasher: Option<&mut Sha256>,
    idle: Duration,
    abort: &AtomicBool,
) -> io::Result<(u64, ReadEnd)> {
    s.set_read_timeout(Some(POLL))?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut got = 0u64;
    let mut last = Instant::now();
    loop {
        if abort.load(Ordering::Relaxed) {
            return Err(io::Error::new(ErrorKind::Interrupted, "aborted"));
        }
        let want = match limit {
            Some(l) if got >= l => return Ok((got, ReadEnd::Count)),
            Some(l) => (l - got).min(buf.len() as u64) as usize,
            None => buf.len(),
        };
        match s.read(&mut buf[..want]) {
            Ok(0) => return Ok((got, ReadEnd::Eof)),
            Ok(k) => {
                got += k as u64;
                last = Instant::now();
                counter.fetch_add(k as u64, Ordering::Relaxed);
                if let Some(h) = hasher.as_deref_mut() {
                    h.update(&buf[..k]);
                }
            }
            Err(e) if transient(&e) => {
                if last.elapsed() > idle {
                    return Err(io::Error::new(ErrorKind::TimedOut, format!("no data for {idle:?}")));
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// Reads exactly `N` bytes within `timeout`. `Ok(None)` if the peer closed
/// before sending anything; a partial message is an error.
pub fn read_msg<const N: usize>(
    mut s: &TcpStream,
    timeout: Duration,
    abort: &AtomicBool,
) -> io::Result<Option<[u8; N]>> {
    s.set_read_timeout(Some(POLL))?;
    let deadline = Instant::now() + timeout;
    let mut b = [0u8; N];
    let mut got = 0;
    while got < N {
        if abort.load(Ordering::Relaxed) {
            return Err(io::Error::new(ErrorKind::Interrupted, "aborted"));
        }
        match s.read(&mut b[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => {
                return Err(io::Error::new(
                    ErrorKind::UnexpectedEof,
                    format!("peer closed after {got} of {N} bytes"),
                ))
            }
            Ok(k) => got += k,
            Err(e) if transient(&e) => {
                if Instant::now() >= deadline {
                    return Err(io::Error::new(
                        ErrorKind::TimedOut,
                        format!("no complete message in {timeout:?}"),
                    ));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Some(b))
}

/// Writes a whole message despite the short write timeout.
pub fn write_msg(mut s: &TcpStream, msg: &[u8], timeout: Duration) -> io::Result<()> {
    s.set_write_timeout(Some(POLL))?;
    let deadline = Instant::now() + timeout;
    let mut off = 0;
    while off < msg.len() {
        match s.write(&msg[off..]) {
            Ok(0) => return Err(io::Error::new(ErrorKind::WriteZero, "peer stopped reading")),
            Ok(k) => off += k,
            Err(e) if transient(&e) => {
                if Instant::now() >= deadline {
                    return Err(io::Error::new(ErrorKind::TimedOut, "message not written in time"));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// For timed sends: bounds the data queued in the socket but not yet sent
/// (`TCP_NOTSENT_LOWAT`), so a run stops close to its duration instead of
/// draining a send buffer that may hold seconds of paced data. About 50 ms
/// of the pacing cap (64 KiB .. 1 MiB), 1 MiB when not paced. Failure (e.g.
/// an MPTCP socket without the option) only costs precision.
pub fn limit_unsent(s: &TcpStream, pacing_cap: Option<u64>) {
    let lowat = match pacing_cap {
        Some(r) => (r / 20).clamp(64 * 1024, 1024 * 1024),
        None => 1024 * 1024,
    };
    if let Err(e) = tcpaccel_sys::sockopt::set_notsent_lowat(s, lowat as u32) {
        tracing::debug!("TCP_NOTSENT_LOWAT not set: {e}");
    }
}

/// Hex of a digest.
pub fn hex32(h: &[u8; 32]) -> String {
    hex::encode(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_is_seeded() {
        assert_eq!(pattern(1, 0), pattern(1, 0));
        assert_ne!(pattern(1, 0), pattern(1, 1));
        assert_eq!(pattern(7, 3).len(), CHUNK);
    }
}
