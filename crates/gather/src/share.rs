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
    /// Largest segment received on its streams (TCP_INFO `rcv_mss`); 0 when
    /// unknown, which leaves its clamps unquantised.
    pub mss: u32,
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

/// Runs the allocation over the pool, splits each client's share over its
/// streams, and spends the pool in whole segments ([`whole_segments`]).
pub fn share_pool(clients: &[ClientNeed], pool: u64) -> Result<(Plan, Vec<ClientShare>), AllocError> {
    let demands: Vec<Demand> = clients
        .iter()
        .map(|c| Demand { id: c.session, priority: c.priority, target: c.target, rtt: c.rtt })
        .collect();
    let plan = allocate(&demands, pool)?;
    let mut shares: Vec<ClientShare> = clients
        .iter()
        .zip(&plan.shares)
        .map(|(c, s)| {
            let per = (s.bytes / u64::from(c.streams.max(1))).max(MIN_STREAM_WINDOW);
            ClientShare { session: c.session, bytes: s.bytes, per_stream: per.min(i32::MAX as u64) as u32 }
        })
        .collect();
    whole_segments(clients, &mut shares, pool);
    Ok((plan, shares))
}

/// Turns seed 003 §3.1's byte shares (eq. (1) counts payload bytes) into
/// windows the sender can fill. A Linux sender holding more than a segment of
/// data sends only when a whole segment fits in the offered window
/// (`tcp_snd_wnd_test`), so a clamp of `k·mss + r` often carries only
/// `k·mss`: measured in `lab run gather` at 60 KB with Reno, clamps of
/// 12,430 B and 10,000 B delivered exactly 8 and 6 segments per RTT (93% and
/// 87%), while 7,570 B happened to deliver all of it. The remainder `r` of
/// each stream is therefore taken back (clamps become whole segments, and
/// what is allocated is what is used), and the pool bytes freed this way go
/// back as one more segment per stream, to the highest priority first (the
/// order §3.1 hands out leftovers), then to whoever lost the largest
/// remainder. Every clamp stays within one segment of its paper share, and
/// the clamps never sum to more than the pool. Streams whose share is too
/// small to round down without falling below [`MIN_STREAM_WINDOW`], and
/// clients whose segment size is not known yet, keep their byte share.
pub fn whole_segments(clients: &[ClientNeed], shares: &mut [ClientShare], pool: u64) {
    let streams = |c: &ClientNeed| u64::from(c.streams.max(1));
    // (index, remainder taken back per stream)
    let mut cut = Vec::new();
    for (i, (c, s)) in clients.iter().zip(shares.iter_mut()).enumerate() {
        let (mss, per) = (u64::from(c.mss), u64::from(s.per_stream));
        if mss == 0 {
            continue;
        }
        let whole = per / mss * mss;
        if whole < MIN_STREAM_WINDOW || whole == per {
            continue;
        }
        s.per_stream = whole as u32;
        cut.push((i, per - whole));
    }
    let used: u64 =
        clients.iter().zip(shares.iter()).map(|(c, s)| streams(c) * u64::from(s.per_stream)).sum();
    let mut left = pool.saturating_sub(used);
    cut.sort_by(|a, b| {
        let (ca, cb) = (&clients[a.0], &clients[b.0]);
        cb.priority.cmp(&ca.priority).then(b.1.cmp(&a.1)).then(ca.session.cmp(&cb.session))
    });
    for (i, _) in cut {
        let c = &clients[i];
        let cost = streams(c) * u64::from(c.mss);
        if cost <= left {
            left -= cost;
            shares[i].per_stream += c.mss;
        }
    }
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
        ClientNeed {
            session,
            priority,
            target: Rate::kbps(kbps),
            rtt: Duration::from_millis(120),
            streams,
            mss: 0,
        }
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
    fn model1_at_60kb_in_whole_segments() {
        // The paper's shares at 121 ms: high 12,430 B (8.58 segments), low
        // 7,570 B (5.23). Taken back: 3 x 846 + 3 x 330 = 3,528 B, which buys
        // two more segments: the two first high clients get them.
        let mut c: Vec<ClientNeed> =
            (1..4).map(|i| need(i, 2, 1000, 1)).chain((4..7).map(|i| need(i, 1, 500, 1))).collect();
        for n in &mut c {
            n.rtt = Duration::from_millis(121);
            n.mss = 1448;
        }
        let (plan, s) = share_pool(&c, 60_000).unwrap();
        assert_eq!(plan.rule, Rule::LoweredTargets);
        let per: Vec<u32> = s.iter().map(|s| s.per_stream).collect();
        assert_eq!(per, [9 * 1448, 9 * 1448, 8 * 1448, 5 * 1448, 5 * 1448, 5 * 1448]);
        let used: u64 = per.iter().map(|&p| u64::from(p)).sum();
        assert!(used <= 60_000, "{used}");
        // The paper's shares themselves are reported unchanged.
        assert_eq!(s[0].bytes, plan.shares[0].bytes);
        for (p, sh) in per.iter().zip(&plan.shares) {
            assert!((i64::from(*p) - sh.bytes as i64).abs() < 1448, "{p} vs {}", sh.bytes);
        }
    }

    #[test]
    fn whole_segments_cost_every_stream_and_spare_small_or_unknown() {
        // Two streams: one more segment costs two; unknown mss is left alone.
        let mut c = vec![need(1, 2, 1000, 2), need(2, 1, 500, 1)];
        c[0].mss = 1000;
        let mut s = vec![
            ClientShare { session: 1, bytes: 11_000, per_stream: 5_500 },
            ClientShare { session: 2, bytes: 7_777, per_stream: 7_777 },
        ];
        whole_segments(&c, &mut s, 19_777);
        // 2 x 500 taken back plus 1,000 unallocated: one segment more for each of its two streams.
        assert_eq!(s[0].per_stream, 6_000);
        assert_eq!(s[1].per_stream, 7_777);
        // A share that would fall below the minimum window keeps its bytes.
        let mut c = vec![need(1, 1, 16, 1)];
        c[0].mss = 1448;
        let mut s = vec![ClientShare { session: 1, bytes: 4_200, per_stream: 4_200 }];
        whole_segments(&c, &mut s, 4_200);
        assert_eq!(s[0].per_stream, 4_200);
        // Freed enough for one segment: the higher priority gets it.
        let mut c = vec![need(1, 2, 1000, 1), need(2, 1, 500, 1)];
        c[0].mss = 1448;
        c[1].mss = 1448;
        let mut s = vec![
            ClientShare { session: 1, bytes: 10_000, per_stream: 10_000 },
            ClientShare { session: 2, bytes: 5_000, per_stream: 5_000 },
        ];
        whole_segments(&c, &mut s, 15_000);
        assert_eq!((s[0].per_stream, s[1].per_stream), (7 * 1448, 3 * 1448));
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
