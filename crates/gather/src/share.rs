//! Thin adapter from the server's clients to [GatherQoS] §3.1's allocation
//! ([`tcpaccel_core::alloc`]), in one of two readings ([`Sharing`]). Pure; no I/O.
//!
//! [GatherQoS] §3.1 gives "each connection" (各接続) the window of eq. (1),
//! `W = T_t · RTT`, and §3.2 adds parallel TCP connections per client. The
//! text does not say whether a client's parallel connections each count as a
//! connection of §3.1. Two readings, both implemented:
//! - **per client** ([`Sharing::PerClient`], the default): one demand per
//!   client (its target and RTT); its bytes are split evenly over its data
//!   streams as per-stream window clamps. Opening streams never enlarges a
//!   client's window, so a client cannot take pool from others by opening
//!   streams; streams then only help by recovering cwnd faster after losses
//!   (several small Reno windows instead of one) — the client's share of the
//!   bottleneck stays capped at its window ÷ RTT.
//! - **per connection** ([`Sharing::PerConnection`]): every data stream is a
//!   demand with its client's target, priority and RTT, so a client with N
//!   streams holds about N·W of the pool, and the allocation's surplus,
//!   shortage and fallback rules take that from the other clients. This is
//!   the reading under which §4's explanation works literally: with more TCP
//!   connections a client "gets more bandwidth than other traffic" (他の通信
//!   より多くの帯域を獲得できる) when interference shrinks each connection's
//!   effective bandwidth. The cost: whoever opens streams takes pool from the
//!   others. Here the stream count is the server's decision (§3.2's search,
//!   run only for a client that misses its target, bounded by
//!   `--max-streams-per-client` and a total `--max-streams` divided by
//!   priority), not the client's, so a client cannot grab pool by itself; but
//!   a low-priority client that once missed its target keeps its extra
//!   streams, and their windows, until the search restarts.
//!
//! Per connection, in `lab run gather --set model=2 --set share=...`, both
//! classes miss under interference and both search, the streams push the
//! pool into shortage, and §3.1's shortage rules then equalize the windows
//! per stream, so the high class's worst client did worse with streams than
//! with the buffer alone; per client, streams met the high target. Hence per
//! client stays the default (figures: BENCHMARKS.md, "At 10 Mbit/s, per
//! client vs per connection").
//!
//! No headroom is added to eq. (1)'s `W = T_t · RTT` ([GatherQoS] §3.1). With
//! Reno senders most clamps carry nearly clamp ÷ RTT, but for some sizes the
//! sender leaves the last partial segment unused. Rounding every clamp down
//! to whole segments and handing the freed bytes to higher priorities was
//! tried: the gap per client stayed, and the low class lost what the high
//! one gained, breaking §4's "low holds its target", so the shares stay the
//! paper's (figures: BENCHMARKS.md, "Gathering server QoS").

use crate::config::{Sharing, MIN_STREAM_WINDOW};
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

impl ClientNeed {
    fn demands(&self) -> u64 {
        u64::from(self.streams.max(1))
    }
}

/// One client's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientShare {
    pub session: u64,
    /// Bytes of the pool ([GatherQoS] §3.1): the client's share, or with
    /// [`Sharing::PerConnection`] the sum of its streams' shares.
    pub bytes: u64,
    /// The window clamp for each of its streams: per client `bytes / streams`,
    /// per connection the stream's own share; never below
    /// [`MIN_STREAM_WINDOW`] (the configuration guarantees the pool holds that
    /// much for every stream allowed).
    pub per_stream: u32,
}

fn clamp_of(bytes: u64) -> u32 {
    bytes.max(MIN_STREAM_WINDOW).min(i32::MAX as u64) as u32
}

/// Runs the allocation over the pool and turns it into per-stream clamps.
///
/// The returned [`Plan`] has one share per demand: per client, one per
/// client (ids are the sessions); per connection, one per stream (ids are
/// positions in the flattened list of streams, clients in input order).
pub fn share_pool(
    clients: &[ClientNeed],
    pool: u64,
    sharing: Sharing,
) -> Result<(Plan, Vec<ClientShare>), AllocError> {
    let demand = |c: &ClientNeed, id: u64| Demand { id, priority: c.priority, target: c.target, rtt: c.rtt };
    match sharing {
        Sharing::PerClient => {
            let demands: Vec<Demand> = clients.iter().map(|c| demand(c, c.session)).collect();
            let plan = allocate(&demands, pool)?;
            let shares = clients
                .iter()
                .zip(&plan.shares)
                .map(|(c, s)| ClientShare {
                    session: c.session,
                    bytes: s.bytes,
                    per_stream: clamp_of(s.bytes / c.demands()),
                })
                .collect();
            Ok((plan, shares))
        }
        Sharing::PerConnection => {
            let mut demands = Vec::new();
            for c in clients {
                for _ in 0..c.demands() {
                    demands.push(demand(c, demands.len() as u64));
                }
            }
            let plan = allocate(&demands, pool)?;
            let mut next = plan.shares.iter();
            let shares = clients
                .iter()
                .map(|c| {
                    let mine: Vec<u64> = next.by_ref().take(c.demands() as usize).map(|s| s.bytes).collect();
                    // A client's streams have equal demands and so equal shares.
                    let per = mine.iter().copied().min().unwrap_or(0);
                    ClientShare { session: c.session, bytes: mine.iter().sum(), per_stream: clamp_of(per) }
                })
                .collect();
            Ok((plan, shares))
        }
    }
}

/// The comparison baseline of [GatherQoS]'s evaluation ("equality"): the pool
/// split evenly, ignoring targets and priorities — over clients, or with
/// [`Sharing::PerConnection`] over all data streams.
pub fn equal_split(clients: &[ClientNeed], pool: u64, sharing: Sharing) -> Vec<ClientShare> {
    match sharing {
        Sharing::PerClient => {
            let each = pool.checked_div(clients.len() as u64).unwrap_or(0);
            clients
                .iter()
                .map(|c| ClientShare {
                    session: c.session,
                    bytes: each,
                    per_stream: clamp_of(each / c.demands()),
                })
                .collect()
        }
        Sharing::PerConnection => {
            let total: u64 = clients.iter().map(ClientNeed::demands).sum();
            let each = pool.checked_div(total).unwrap_or(0);
            clients
                .iter()
                .map(|c| ClientShare {
                    session: c.session,
                    bytes: each * c.demands(),
                    per_stream: clamp_of(each),
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpaccel_core::alloc::Rule;

    fn need(session: u64, priority: u32, kbps: u64, streams: u32) -> ClientNeed {
        ClientNeed { session, priority, target: Rate::kbps(kbps), rtt: Duration::from_millis(120), streams }
    }

    /// [GatherQoS] Model 1 (three high at 1.0 Mbit/s, three low at 0.5, 120 ms),
    /// the second high client holding `streams`.
    fn model1(streams: u32) -> Vec<ClientNeed> {
        vec![need(1, 2, 1000, 1), need(2, 2, 1000, streams), need(3, 2, 1000, 1)]
            .into_iter()
            .chain((4..7).map(|i| need(i, 1, 500, 1)))
            .collect()
    }

    fn split(s: &[ClientShare]) -> Vec<(u64, u32)> {
        s.iter().map(|c| (c.bytes, c.per_stream)).collect()
    }

    #[test]
    fn model1_shares_split_over_streams() {
        // Per client at 60 KB (shortage): high 12.5 KB, low 7.5 KB each.
        let (plan, s) = share_pool(&model1(2), 60_000, Sharing::PerClient).unwrap();
        assert_eq!(plan.rule, Rule::LoweredTargets);
        assert_eq!(s[0].bytes, 12_500);
        assert_eq!(s[0].per_stream, 12_500);
        // Two streams share one client's window; more streams do not mean more window.
        assert_eq!(s[1].bytes, 12_500);
        assert_eq!(s[1].per_stream, 6_250);
        assert_eq!(s[3].per_stream, 7_500);
        // At 100 KB (surplus 32.5 KB by target): high 15 + 7.222, low 7.5 + 3.611 KB.
        let (plan, s) = share_pool(&model1(2), 100_000, Sharing::PerClient).unwrap();
        assert_eq!(plan.rule, Rule::Surplus);
        assert_eq!(split(&s)[..2], [(22_222, 22_222), (22_222, 11_111)]);
        assert_eq!(split(&s)[3], (11_111, 11_111));
    }

    #[test]
    fn model1_per_connection_at_100kb() {
        // Seven demands: four high streams (15 KB each) and three low (7.5 KB):
        // 82.5 KB needed, the 17.5 KB surplus split by target (4 × 1.0 + 3 × 0.5
        // Mbit/s): + 3,181 B per high stream, + 1,590 B per low one.
        let (plan, s) = share_pool(&model1(2), 100_000, Sharing::PerConnection).unwrap();
        assert_eq!(plan.rule, Rule::Surplus);
        assert_eq!(plan.shares.len(), 7);
        assert_eq!(plan.needed, 82_500);
        assert_eq!(
            split(&s),
            [
                (18_181, 18_181),
                (36_362, 18_181),
                (18_181, 18_181),
                (9_090, 9_090),
                (9_090, 9_090),
                (9_090, 9_090)
            ]
        );
        assert_eq!(plan.unallocated, 6);
        // The two-stream client went from 22.2 to 36.4 KB; the others paid:
        // high 22.2 → 18.2 KB, low 11.1 → 9.1 KB.
        // With one stream each, both readings agree.
        let (_, a) = share_pool(&model1(1), 100_000, Sharing::PerConnection).unwrap();
        let (_, b) = share_pool(&model1(1), 100_000, Sharing::PerClient).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn model1_per_connection_at_60kb() {
        // 82.5 KB needed > 60 KB: every stream lowered to 7.5 KB (52.5 KB), the
        // 7.5 KB left go to the high streams (each lacks 7.5 KB: 1,875 B each).
        let (plan, s) = share_pool(&model1(2), 60_000, Sharing::PerConnection).unwrap();
        assert_eq!(plan.rule, Rule::LoweredTargets);
        assert_eq!(
            split(&s),
            [(9_375, 9_375), (18_750, 9_375), (9_375, 9_375), (7_500, 7_500), (7_500, 7_500), (7_500, 7_500)]
        );
        // Low keeps its target's window (§4: "holds 0.5 Mbit/s"); the other
        // high clients fall from 12.5 to 9.375 KB.
        // All three high with two streams: 112.5 KB needed; 67.5 KB lowered; the
        // 100 KB pool's 32.5 KB left over 6 high streams (5,416 B each).
        let c: Vec<ClientNeed> =
            (1..4).map(|i| need(i, 2, 1000, 2)).chain((4..7).map(|i| need(i, 1, 500, 1))).collect();
        let (plan, s) = share_pool(&c, 100_000, Sharing::PerConnection).unwrap();
        assert_eq!(plan.rule, Rule::LoweredTargets);
        assert_eq!(split(&s)[0], (25_832, 12_916));
        assert_eq!(split(&s)[3], (7_500, 7_500));
    }

    #[test]
    fn per_connection_zero_streams_count_as_one() {
        let (plan, s) =
            share_pool(&[need(1, 2, 1000, 0), need(2, 1, 500, 3)], 60_000, Sharing::PerConnection).unwrap();
        assert_eq!(plan.shares.len(), 4);
        // 15 + 3 × 7.5 = 37.5 KB needed; 22.5 KB surplus by target (1.0 : 0.5 × 3).
        assert_eq!(split(&s), [(24_000, 24_000), (36_000, 12_000)]);
    }

    #[test]
    fn equal_split_ignores_targets() {
        let c = [need(1, 2, 1000, 1), need(2, 1, 500, 2)];
        let s = equal_split(&c, 60_000, Sharing::PerClient);
        assert_eq!(split(&s), [(30_000, 30_000), (30_000, 15_000)]);
        let s = equal_split(&c, 60_000, Sharing::PerConnection);
        assert_eq!(split(&s), [(20_000, 20_000), (40_000, 20_000)]);
        assert!(equal_split(&[], 10, Sharing::PerClient).is_empty());
        assert!(equal_split(&[], 10, Sharing::PerConnection).is_empty());
    }

    #[test]
    fn per_stream_floor() {
        let (_, s) = share_pool(&[need(1, 1, 1000, 8)], 16_000, Sharing::PerClient).unwrap();
        assert_eq!(s[0].bytes, 16_000);
        assert_eq!(s[0].per_stream, MIN_STREAM_WINDOW as u32);
        let (_, s) = share_pool(&[need(1, 1, 1000, 8)], 16_000, Sharing::PerConnection).unwrap();
        assert_eq!(s[0].bytes, 16_000);
        assert_eq!(s[0].per_stream, MIN_STREAM_WINDOW as u32);
    }
}
