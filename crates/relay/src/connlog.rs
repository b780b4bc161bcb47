//! The relay's per-connection records: one per connection that ends (relayed
//! or refused), as a log line (`info`) or, with `json_logs`, as one JSON
//! object on stderr instead — never both. Under a flood they are limited
//! to [`RATE`] a second (bursts of [`BURST`]); the number left out is said
//! in the next record that is written, and counted in the relay's
//! `log_suppressed` counter.
//!
//! [`Limiter`] is sans-IO (the caller passes `now`); [`ConnLog`] holds one
//! behind a mutex and writes.

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use crate::socks::Target;
use crate::stats::Stats;

/// Records written per second, sustained.
pub const RATE: u32 = 50;
/// Records written at once after a quiet spell.
pub const BURST: u32 = 200;

/// A token bucket over records.
#[derive(Debug)]
pub struct Limiter {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Duration,
    suppressed: u64,
}

impl Limiter {
    pub fn new(rate: u32, burst: u32) -> Limiter {
        let burst = f64::from(burst.max(1));
        Limiter { rate: f64::from(rate), burst, tokens: burst, last: Duration::ZERO, suppressed: 0 }
    }

    /// Whether a record at `now` (a monotonic clock, the same for every
    /// call) is written: `Some(n)` with the records suppressed since the
    /// last one written, or `None` if this one is suppressed.
    pub fn allow(&mut self, now: Duration) -> Option<u64> {
        let dt = now.saturating_sub(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + dt * self.rate).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Some(std::mem::take(&mut self.suppressed))
        } else {
            self.suppressed += 1;
            None
        }
    }
}

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
    limiter: std::sync::Mutex<Limiter>,
    epoch: Instant,
}

impl Default for ConnLog {
    fn default() -> ConnLog {
        ConnLog { limiter: std::sync::Mutex::new(Limiter::new(RATE, BURST)), epoch: Instant::now() }
    }
}

impl ConnLog {
    /// Writes `r` (as JSON if `json`), unless the rate is spent.
    pub fn record(&self, stats: &Stats, json: bool, r: Record<'_>) {
        let allowed = {
            let mut l = self.limiter.lock().unwrap_or_else(|p| p.into_inner());
            l.allow(self.epoch.elapsed())
        };
        let Some(suppressed) = allowed else {
            stats.log_suppressed.fetch_add(1, Relaxed);
            return;
        };
        let target = r.target.map(|t| t.to_string());
        if json {
            if suppressed > 0 {
                eprintln!(
                    "{}",
                    serde_json::json!({"type": "relay_records_suppressed", "records": suppressed})
                );
            }
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
        if suppressed > 0 {
            tracing::warn!(
                "{suppressed} connection records suppressed (more than {RATE} a second; counted in log_suppressed)"
            );
        }
        let target = target.as_deref().unwrap_or("-");
        tracing::info!(peer = %r.peer, target, up_bytes = r.up, down_bytes = r.down, outcome = r.outcome, "connection done");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn a_flood_is_cut_to_the_rate_and_the_next_record_counts_the_rest() {
        let mut l = Limiter::new(10, 5);
        // A burst of 5 passes, the next 95 in the same instant do not.
        let passed = (0..100).filter(|_| l.allow(ms(0)).is_some()).count();
        assert_eq!(passed, 5);
        // 1 s later: 10 tokens (capped at the burst of 5); the first says 95.
        assert_eq!(l.allow(ms(1000)), Some(95));
        assert_eq!(l.allow(ms(1000)), Some(0));
        // A steady 1000 a second for 10 s writes about 10 a second.
        let mut written = 0;
        let mut reported = 0;
        for i in 0..10_000u64 {
            if let Some(n) = l.allow(ms(2000 + i)) {
                written += 1;
                reported += n;
            }
        }
        assert!((100..=110).contains(&written), "{written}");
        assert!(reported + written >= 9_900, "every record is written or counted: {reported} + {written}");
    }
}
