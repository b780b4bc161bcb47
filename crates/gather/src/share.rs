//! Thin adapter from the server's clients to seed 003 §3.1's allocation
//! ([`tcpaccel_core::alloc`]): one demand per client (its target and RTT), and
//! the client's bytes split evenly over its data streams as per-stream
//! window clamps.
//!
//! Why per client and not per stream: the target is the client's, and the
//! stream-count search (§3.2) adds streams to reach it; if every stream got
//! its own `W = T_t · RTT` the window (and thus the share of the bottleneck)
//! would grow with the stream count, so a low-priority client could take a
//! high-priority one's share just by opening streams. Pure; no I/O.
//!
//! No headroom is added to eq. (1)'s `W = T_t · RTT` (seed 003 §3.1). Measured
//! with Reno senders in `lab run gather` (10 Mbit/s, 120 ms): most clamps
//! carried 96–99% of clamp ÷ RTT, but for some sizes (10,000 B and 12,430 B)
//! the sender left the last partial segment unused (exactly 6 and 8 segments
//! of 1448 B in flight, 85% and 93%). Rounding every clamp down to whole
//! segments and handing the freed bytes to higher priorities was tried: the
//! remaining gap of about 0.4 KB per client stayed, and at 60 KB the low
//! class fell from 0.49 to 0.45 Mbit/s while high rose from 0.76 to 0.80,
//! breaking §4's "low holds its target" — so the shares stay the paper's.

use crate::config::MIN_STREAM_WINDOW;
use std::time::Duration;
use tcpaccel_core::alloc::{allocate, AllocError, Demand, Plan};
use tcpaccel_core::units::Rate;

/// One client's input to the allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientNeed {
    pub session: u64,
    pub priority: u32,
    pub target: Rate,
    pub rtt: Duration,
    /// Data streams attached now (0 counts as 1: the share is still reserved).
    pub streams: u32,
}

/// One client's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientShare {
    pub session: u64,
    /// Bytes of the pool (seed 003 §3.1).
    pub bytes: u64,
    /// The window clamp for each of its streams: `bytes / streams`, but never
    /// below [`MIN_STREAM_WINDOW`] (the configuration guarantees the pool
    /// holds that much for every stream allowed).
    pub per_stream: u32,
}

/// Runs the allocation over the pool and splits each client's share over its streams.
pub fn share_pool(clients: &[ClientNeed], pool: u64) -> Result<(Plan, Vec<ClientShare>), AllocError> {
    let demands: Vec<Demand> = clients
        .iter()
        .map(|c| Demand { id: c.session, priority: c.priority, target: c.target, rtt: c.rtt })
        .collect();
    let plan = allocate(&demands, pool)?;
    let shares = clients
        .iter()
        .zip(&plan.shares)
        .map(|(c, s)| {
            let per = (s.bytes / u64::from(c.streams.max(1))).max(MIN_STREAM_WINDOW);
            ClientShare { session: c.session, bytes: s.bytes, per_stream: per.min(i32::MAX as u64) as u32 }
        })
        .collect();
    Ok((plan, shares))
}

/// The comparison baseline of seed 003's evaluation ("equality"): the pool
/// split evenly over clients, ignoring targets and priorities.
pub fn equal_split(clients: &[ClientNeed], pool: u64) -> Vec<ClientShare> {
    let each = pool.checked_div(clients.len() as u64).unwrap_or(0);
    clients
        .iter()
        .map(|c| {
            let per = (each / u64::from(c.streams.max(1))).max(MIN_STREAM_WINDOW);
            ClientShare { session: c.session, bytes: each, per_stream: per.min(i32::MAX as u64) as u32 }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpaccel_core::alloc::Rule;

    fn need(session: u64, priority: u32, kbps: u64, streams: u32) -> ClientNeed {
        ClientNeed { session, priority, target: Rate::kbps(kbps), rtt: Duration::from_millis(120), streams }
    }

    #[test]
    fn model1_shares_split_over_streams() {
        // seed 003 Model 1 at 60 KB (shortage): high 12.5 KB, low 7.5 KB each.
        let c = vec![need(1, 2, 1000, 1), need(2, 2, 1000, 2), need(3, 2, 1000, 1)]
            .into_iter()
            .chain((4..7).map(|i| need(i, 1, 500, 1)))
            .collect::<Vec<_>>();
        let (plan, s) = share_pool(&c, 60_000).unwrap();
        assert_eq!(plan.rule, Rule::LoweredTargets);
        assert_eq!(s[0].bytes, 12_500);
        assert_eq!(s[0].per_stream, 12_500);
        // Two streams share one client's window; more streams do not mean more window.
        assert_eq!(s[1].bytes, 12_500);
        assert_eq!(s[1].per_stream, 6_250);
        assert_eq!(s[3].per_stream, 7_500);
    }

    #[test]
    fn equal_split_ignores_targets() {
        let s = equal_split(&[need(1, 2, 1000, 1), need(2, 1, 500, 2)], 60_000);
        assert_eq!((s[0].bytes, s[0].per_stream), (30_000, 30_000));
        assert_eq!((s[1].bytes, s[1].per_stream), (30_000, 15_000));
        assert!(equal_split(&[], 10).is_empty());
    }

    #[test]
    fn per_stream_floor() {
        let (_, s) = share_pool(&[need(1, 1, 1000, 8)], 16_000).unwrap();
        assert_eq!(s[0].bytes, 16_000);
        assert_eq!(s[0].per_stream, MIN_STREAM_WINDOW as u32);
    }
}
