//! Relay counters: connections, bytes each direction, errors by kind. Shared
//! by all connection tasks as relaxed atomics and read as a JSON snapshot
//! (on SIGUSR1 and at exit). Counters only; no I/O here.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Kinds of failures counted separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    HandshakeTimeout,
    /// A SOCKS client sent nothing within the first-byte timeout.
    FirstByteTimeout,
    /// A handshake displaced by a newcomer when the handshake budget (or its
    /// source's share) was spent.
    HandshakeEvicted,
    /// A SOCKS client closed (or reset) before sending a byte: a health
    /// check or a port scan, not a bad request.
    ClosedBeforeRequest,
    BadRequest,
    UnsupportedCommand,
    AuthFailed,
    NotAllowed,
    ResolveFailed,
    ConnectFailed,
    ChainFailed,
    Reset,
    IdleTimeout,
    AcceptExhausted,
    Io,
}

const KINDS: usize = 15;

impl ErrorKind {
    fn index(self) -> usize {
        self as usize
    }
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::HandshakeTimeout => "handshake_timeout",
            ErrorKind::FirstByteTimeout => "first_byte_timeout",
            ErrorKind::HandshakeEvicted => "handshake_evicted",
            ErrorKind::ClosedBeforeRequest => "closed_before_request",
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::UnsupportedCommand => "unsupported_command",
            ErrorKind::AuthFailed => "auth_failed",
            ErrorKind::NotAllowed => "not_allowed",
            ErrorKind::ResolveFailed => "resolve_failed",
            ErrorKind::ConnectFailed => "connect_failed",
            ErrorKind::ChainFailed => "chain_failed",
            ErrorKind::Reset => "reset",
            ErrorKind::IdleTimeout => "idle_timeout",
            ErrorKind::AcceptExhausted => "accept_fd_exhausted",
            ErrorKind::Io => "io",
        }
    }
    const ALL: [ErrorKind; KINDS] = [
        ErrorKind::HandshakeTimeout,
        ErrorKind::FirstByteTimeout,
        ErrorKind::HandshakeEvicted,
        ErrorKind::ClosedBeforeRequest,
        ErrorKind::BadRequest,
        ErrorKind::UnsupportedCommand,
        ErrorKind::AuthFailed,
        ErrorKind::NotAllowed,
        ErrorKind::ResolveFailed,
        ErrorKind::ConnectFailed,
        ErrorKind::ChainFailed,
        ErrorKind::Reset,
        ErrorKind::IdleTimeout,
        ErrorKind::AcceptExhausted,
        ErrorKind::Io,
    ];
}

#[derive(Debug, Default)]
pub struct Stats {
    pub connections_total: AtomicU64,
    pub connections_active: AtomicU64,
    /// Connections still in the SOCKS handshake (part of `connections_active`).
    pub handshakes_active: AtomicU64,
    /// Client → upstream payload bytes.
    pub bytes_up: AtomicU64,
    /// Upstream → client payload bytes.
    pub bytes_down: AtomicU64,
    /// Connections relayed, counted when they end, by the path their data
    /// took: `spliced` if both directions spliced, `copied` if either copied
    /// (configured with `copy`, or the fallback when no pipe could be made).
    pub spliced: AtomicU64,
    pub copied: AtomicU64,
    /// Connections that wanted pipes for splice and could not get them (out
    /// of descriptors or pipe quota) and so copy; counted as it happens.
    pub pipe_failures: AtomicU64,
    /// Per-connection log records left out under a flood (see `connlog`).
    pub log_suppressed: AtomicU64,
    /// CONNECTs answered with success before the chain was up (`early_reply`).
    pub early_replies: AtomicU64,
    errors: [AtomicU64; KINDS],
    /// Chains that failed after an early reply, by the RFC 1928 code the
    /// client would have been answered (1-8; index 0 unused).
    early_reply_failures: [AtomicU64; 9],
}

/// The reply codes of [`Snapshot::early_reply_failures`], as its keys.
const FAILURE_CODES: [&str; 8] = ["1", "2", "3", "4", "5", "6", "7", "8"];

/// A point-in-time copy of [`Stats`], serialised as the counters JSON.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Snapshot {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub connections_total: u64,
    pub connections_active: u64,
    pub handshakes_active: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub spliced: u64,
    pub copied: u64,
    pub pipe_failures: u64,
    pub log_suppressed: u64,
    pub early_replies: u64,
    pub errors: std::collections::BTreeMap<&'static str, u64>,
    /// Chains failed after an early reply (the client got a reset), by the
    /// SOCKS reply code it would have been sent ("1".."8").
    pub early_reply_failures: std::collections::BTreeMap<&'static str, u64>,
}

impl Stats {
    pub fn error(&self, kind: ErrorKind) {
        self.errors[kind.index()].fetch_add(1, Relaxed);
    }

    pub fn errors_of(&self, kind: ErrorKind) -> u64 {
        self.errors[kind.index()].load(Relaxed)
    }

    /// A chain failed after its client was answered early; `code` is the
    /// RFC 1928 reply it would have had (0, success, is not a failure).
    pub fn early_reply_failed(&self, code: u8) {
        if let Some(c) = self.early_reply_failures.get(usize::from(code)).filter(|_| code > 0) {
            c.fetch_add(1, Relaxed);
        }
    }

    /// Chains failed after an early reply with `code` (1-8).
    pub fn early_reply_failures_of(&self, code: u8) -> u64 {
        self.early_reply_failures.get(usize::from(code)).map_or(0, |c| c.load(Relaxed))
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            kind: "relay_counters",
            connections_total: self.connections_total.load(Relaxed),
            connections_active: self.connections_active.load(Relaxed),
            handshakes_active: self.handshakes_active.load(Relaxed),
            bytes_up: self.bytes_up.load(Relaxed),
            bytes_down: self.bytes_down.load(Relaxed),
            spliced: self.spliced.load(Relaxed),
            copied: self.copied.load(Relaxed),
            pipe_failures: self.pipe_failures.load(Relaxed),
            log_suppressed: self.log_suppressed.load(Relaxed),
            early_replies: self.early_replies.load(Relaxed),
            errors: ErrorKind::ALL.iter().map(|k| (k.name(), self.errors_of(*k))).collect(),
            early_reply_failures: (1u8..)
                .zip(FAILURE_CODES)
                .map(|(c, name)| (name, self.early_reply_failures_of(c)))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_counts_errors_by_name() {
        let s = Stats::default();
        s.error(ErrorKind::AuthFailed);
        s.error(ErrorKind::AuthFailed);
        s.connections_total.fetch_add(3, Relaxed);
        let snap = s.snapshot();
        assert_eq!(snap.errors["auth_failed"], 2);
        assert_eq!(snap.errors["reset"], 0);
        assert_eq!(snap.errors.len(), KINDS);
        s.early_reply_failed(5);
        s.early_reply_failed(0);
        s.early_reply_failed(200);
        let snap = s.snapshot();
        assert_eq!(snap.early_reply_failures["5"], 1);
        assert_eq!(
            snap.early_reply_failures.values().sum::<u64>(),
            1,
            "0 and unknown codes are not failures"
        );
        let j = serde_json::to_value(&snap).unwrap();
        assert_eq!(j["type"], "relay_counters");
        assert_eq!(j["connections_total"], 3);
    }
}
