//! What the gather server reports: the per-client status (periodic JSON
//! Lines with `type = "status"`, and the `gather status` view) and the other
//! events a run produces (joins, ends, refused connections, allocation plans).
//!
//! Plain serde types; no I/O. Rates are bit/s, windows bytes, RTTs µs.

use serde::{Deserialize, Serialize};

/// One client's view at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientStatus {
    /// Seconds since the server started.
    pub t: f64,
    pub id: String,
    pub session: crate::session::SessionId,
    pub class: String,
    pub priority: u32,
    pub target_bps: u64,
    /// Bytes delivered in order per second over the last interval, in bit/s.
    pub goodput_bps: u64,
    /// Data streams attached now.
    pub streams: u32,
    /// Streams the server asked for ([GatherQoS] §3.2).
    pub streams_wanted: u32,
    /// Bytes of the pool allocated to the client ([GatherQoS] §3.1).
    pub allocation: u64,
    /// Sum of the window clamps the kernel reports for its streams.
    pub window_clamp: u64,
    /// RTT used for the allocation, µs.
    pub rtt_us: u64,
    /// Bytes delivered in order so far.
    pub received: u64,
    /// Bytes the client last reported handed to its streams (`progress`).
    pub sent: u64,
    /// The source had idle time in the last interval (no tuning then).
    pub app_limited: bool,
}

/// Everything a server run reports, as JSON Lines with a `type` field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    Status(ClientStatus),
    /// The allocation was recomputed (join, leave, RTT or target change).
    Allocation {
        t: f64,
        rule: String,
        pool: u64,
        needed: u64,
        needed_lowered: u64,
        clients: usize,
    },
    ClientJoin {
        t: f64,
        id: String,
        session: crate::session::SessionId,
        class: String,
        target_bps: u64,
        peer: String,
    },
    /// A client left. `complete` is false when it went away before its end of
    /// data was reached; its file then keeps the `.incomplete` suffix.
    ClientEnd {
        t: f64,
        id: String,
        session: crate::session::SessionId,
        bytes: u64,
        complete: bool,
        sha256: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
        reason: String,
    },
    /// A connection closed because of what its peer sent; others continue.
    ConnectionError {
        t: f64,
        peer: String,
        stage: String,
        error: String,
    },
}
