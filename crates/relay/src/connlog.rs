//! The relay's per-connection records: one per connection that ends (relayed
//! or refused), as a log line (`info`) or, with `json_logs`, as one JSON
//! object on stderr instead — never both. Under a flood they pass through
//! the services' shared flood control (`tcpaccel_metrics::floodlog`, the
//! limiter is `tcpaccel_core::loglimit`): 20 at once, then 30 a minute, and
//! the number left out in one summary line at most every 10 s (a
//! `relay_records_suppressed` object with `json_logs`), counted in the
//! relay's `log_suppressed` counter. A log line is offered only when `info`
//! is enabled here, so at the default level (`warn`) nothing is written,
//! counted or summarized; JSON records are asked for by `json_logs` itself.
//! The relay's other per-connection lines (the accept loop's warning when
//! descriptors run out, the phase times of each session at `debug`) keep
//! to the same budget ([`ConnLog::line`]).

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use tcpaccel_core::loglimit::Suppressed;
use tcpaccel_metrics::floodlog::FloodLog;

use crate::socks::Target;
use crate::stats::Stats;

/// How a connection ended, for its record.
pub struct Record<'a> {
    pub peer: SocketAddr,
    pub target: Option<&'a Target>,
    /// `closed`, `idle_timeout`, `client failed: …`, or `refused: …`.
    pub outcome: &'a str,
    pub up: u64,
    pub down: u64,
    pub started: Instant,
}

/// The relay's record writer.
pub struct ConnLog {
    flood: FloodLog,
}

impl Default for ConnLog {
    fn default() -> ConnLog {
        ConnLog { flood: FloodLog::new("connection records", "tcpaccel_relay_log_suppressed_total") }
    }
}

impl ConnLog {
    /// Writes `r` (as JSON if `json`), unless the budget is spent.
    pub fn record(&self, stats: &Stats, json: bool, r: Record<'_>) {
        if !json && !tracing::enabled!(tracing::Level::INFO) {
            return;
        }
        let pass = self.flood.offer();
        if let Some(s) = pass.summary {
            self.summary(json, &s);
        }
        if !pass.write {
            stats.log_suppressed.fetch_add(1, Relaxed);
            return;
        }
        let target = r.target.map(|t| t.to_string());
        if json {
            let line = serde_json::json!({
                "type": "relay_connection",
                "peer": r.peer.to_string(),
                "target": target,
                "outcome": r.outcome,
                "bytes_up": r.up,
                "bytes_down": r.down,
                "duration_ms": r.started.elapsed().as_millis() as u64,
            });
            eprintln!("{line}");
            return;
        }
        let target = target.as_deref().unwrap_or("-");
        tracing::info!(peer = %r.peer, target, up_bytes = r.up, down_bytes = r.down, outcome = r.outcome, "connection done");
    }

    /// Another per-connection line (the accept loop's warning, the
    /// per-session phase times at `debug`) under the same budget: `write`
    /// runs if it passes. The caller checks first that its level is enabled.
    pub fn line(&self, stats: &Stats, json: bool, write: impl FnOnce()) {
        let pass = self.flood.offer();
        if let Some(s) = pass.summary {
            self.summary(json, &s);
        }
        if pass.write {
            write();
        } else {
            stats.log_suppressed.fetch_add(1, Relaxed);
        }
    }

    /// The summary of the records left out, once it is due (every second
    /// or so), or (`flush`, at exit) whatever is held back.
    pub fn tick(&self, json: bool, flush: bool) {
        let s = if flush { self.flood.flush() } else { self.flood.tick() };
        if let Some(s) = s {
            self.summary(json, &s);
        }
    }

    fn summary(&self, json: bool, s: &Suppressed) {
        if json {
            let line = serde_json::json!({
                "type": "relay_records_suppressed",
                "records": s.records,
                "seconds": (s.span().as_secs_f64() * 10.0).round() / 10.0,
            });
            eprintln!("{line}");
        } else {
            // A root event: not in the span of the connection that happened
            // to bring it.
            tracing::warn!(parent: None, suppressed = s.records, "{}", self.flood.describe(s));
        }
    }
}
