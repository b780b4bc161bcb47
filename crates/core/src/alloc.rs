//! Server buffer-pool allocation among connections by priority and target
//! throughput ([GatherQoS] §3.1).
//!
//! Each connection needs the window that carries its target over its RTT,
//! `W[KB] = T_t[Mbps] · RTT[ms] / 8` ([GatherQoS] eq. (1)), i.e. its target's
//! bandwidth-delay product. [`allocate`] splits a pool of bytes:
//! 1. enough for everyone: each gets W, the surplus is split in proportion to
//!    the targets ([`Rule::Sufficient`] / [`Rule::Surplus`]);
//! 2. shortage: every target is lowered to the lowest priority's target, W is
//!    recomputed, and what is left goes to the highest priorities first
//!    ([`Rule::LoweredTargets`]);
//! 3. not even that fits: the pool is split in the ratio of those lowered
//!    targets ([`Rule::Proportional`]).
//!
//! It does not measure RTTs or apply windows (the gather server does, with
//! TCP_WINDOW_CLAMP); it is pure arithmetic on bytes.

use crate::units::{bdp_bytes, Rate};
use serde::Serialize;
use std::time::Duration;

/// One connection's claim on the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Demand {
    pub id: u64,
    /// Class priority: larger is more important.
    pub priority: u32,
    /// Target throughput of the connection.
    pub target: Rate,
    /// Measured RTT of the connection.
    pub rtt: Duration,
}

/// Which rule of [GatherQoS] §3.1 produced the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// The pool equals the sum of the windows the targets need.
    Sufficient,
    /// Every target's window fits; the rest is split in proportion to targets.
    Surplus,
    /// Targets lowered to the lowest priority's; leftovers to the highest priorities first.
    LoweredTargets,
    /// Even the lowered targets do not fit; split in their ratio.
    Proportional,
}

/// One connection's share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Share {
    pub id: u64,
    pub priority: u32,
    pub target: Rate,
    pub rtt: Duration,
    /// Window its own target needs (eq. (1)).
    pub need: u64,
    /// Bytes allocated.
    pub bytes: u64,
}

impl Share {
    /// Throughput this window allows at the connection's RTT (window / RTT).
    pub fn window_rate(&self) -> Rate {
        Rate::from_bytes_over(self.bytes, self.rtt)
    }
}

/// The result of [`allocate`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub rule: Rule,
    pub pool: u64,
    /// Sum of windows the targets need.
    pub needed: u64,
    /// Sum of windows when every target is lowered to the lowest priority's.
    pub needed_lowered: u64,
    /// Shares in the order of the input.
    pub shares: Vec<Share>,
    /// Bytes left over by rounding down (fewer than one per connection).
    pub unallocated: u64,
}

impl Plan {
    pub fn share(&self, id: u64) -> Option<&Share> {
        self.shares.iter().find(|s| s.id == id)
    }
}

/// Input that cannot be allocated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    #[error("connection id {0} appears twice")]
    DuplicateId(u64),
}

/// [GatherQoS] eq. (1): `W[KB] = T_t[Mbps] · RTT[ms] / 8`, in bytes (1 KB = 1000 B:
/// Mbit/s × ms / 8 = 1000 bytes exactly). Rounded down, as [`bdp_bytes`].
pub fn window_for(target: Rate, rtt: Duration) -> u64 {
    bdp_bytes(target, rtt)
}

/// The smallest pool for which every connection reaches at least the lowest
/// priority's target (below it, [`Rule::Proportional`] applies).
pub fn minimum_pool(demands: &[Demand]) -> u64 {
    let low = lowest_target(demands);
    demands.iter().map(|d| window_for(d.target.min(low), d.rtt)).sum()
}

/// The target of the lowest-priority class (the smallest target among the
/// connections of the lowest priority).
fn lowest_target(demands: &[Demand]) -> Rate {
    let Some(pmin) = demands.iter().map(|d| d.priority).min() else { return Rate(0) };
    demands.iter().filter(|d| d.priority == pmin).map(|d| d.target).min().unwrap_or(Rate(0))
}

/// `total · part / whole`, rounded down; zero when `whole` is zero.
fn portion(total: u64, part: u64, whole: u64) -> u64 {
    if whole == 0 {
        return 0;
    }
    (total as u128 * part as u128 / whole as u128) as u64
}

/// Splits `pool` bytes among `demands` by [GatherQoS] §3.1 (see the module docs).
///
/// Every proportional split rounds down, so the shares never exceed the pool
/// and each share never shrinks when the pool grows; `unallocated` holds the
/// few rounding bytes.
pub fn allocate(demands: &[Demand], pool: u64) -> Result<Plan, AllocError> {
    for (i, d) in demands.iter().enumerate() {
        if demands[..i].iter().any(|e| e.id == d.id) {
            return Err(AllocError::DuplicateId(d.id));
        }
    }
    let need: Vec<u64> = demands.iter().map(|d| window_for(d.target, d.rtt)).collect();
    let needed: u64 = need.iter().sum();
    let low = lowest_target(demands);
    // "Every target falls to the lowest priority's": a connection whose own
    // target is already lower keeps it (lowering never raises a target).
    let lowered: Vec<u64> = demands.iter().map(|d| window_for(d.target.min(low), d.rtt)).collect();
    let needed_lowered: u64 = lowered.iter().sum();

    let (rule, bytes): (Rule, Vec<u64>) = if needed <= pool {
        // Rule 1: everyone gets W; the surplus goes in proportion to targets.
        let surplus = pool - needed;
        let total_target: u64 = demands.iter().map(|d| d.target.0).sum();
        let bytes = if total_target == 0 {
            let n = demands.len() as u64;
            need.iter().map(|&w| w + surplus.checked_div(n).unwrap_or(0)).collect()
        } else {
            demands.iter().zip(&need).map(|(d, &w)| w + portion(surplus, d.target.0, total_target)).collect()
        };
        (if surplus == 0 { Rule::Sufficient } else { Rule::Surplus }, bytes)
    } else if needed_lowered <= pool {
        // Rule 2: lowered windows for all, leftovers by priority, highest first.
        let mut bytes = lowered.clone();
        let mut left = pool - needed_lowered;
        let mut prios: Vec<u32> = demands.iter().map(|d| d.priority).collect();
        prios.sort_unstable_by(|a, b| b.cmp(a));
        prios.dedup();
        for p in prios {
            if left == 0 {
                break;
            }
            let members: Vec<usize> = (0..demands.len()).filter(|&i| demands[i].priority == p).collect();
            let group_need: u64 = members.iter().map(|&i| need[i] - lowered[i]).sum();
            let give = left.min(group_need);
            // Within one priority, in proportion to what each still lacks.
            let mut given = 0;
            for &i in &members {
                let g = portion(give, need[i] - lowered[i], group_need);
                bytes[i] += g;
                given += g;
            }
            left -= given;
            if give < group_need {
                // This class could not be filled: lower classes get nothing more.
                break;
            }
        }
        (Rule::LoweredTargets, bytes)
    } else {
        // Rule 3: "当該目標スループット比で配分" — in the ratio of the lowered
        // targets, i.e. each connection gets the same fraction of its lowered
        // window, so all get the same throughput. (Splitting by the original
        // targets instead would make a high-priority share shrink when the pool
        // grows past the rule-2 threshold; the seed-digest's "split by target
        // ratio" is read this way.)
        let bytes = lowered.iter().map(|&w| portion(pool, w, needed_lowered)).collect();
        (Rule::Proportional, bytes)
    };

    let shares: Vec<Share> = demands
        .iter()
        .zip(need.iter().zip(&bytes))
        .map(|(d, (&need, &bytes))| Share {
            id: d.id,
            priority: d.priority,
            target: d.target,
            rtt: d.rtt,
            need,
            bytes,
        })
        .collect();
    let used: u64 = bytes.iter().sum();
    Ok(Plan { rule, pool, needed, needed_lowered, shares, unallocated: pool.saturating_sub(used) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HIGH: u32 = 2;
    const LOW: u32 = 1;

    /// [GatherQoS] Model 1: high-priority clients with 1.0 Mbit/s targets and
    /// low-priority ones with 0.5 Mbit/s. The topology figure is not in the
    /// text, so the number of clients and link delays are our assumption:
    /// three of each class (Model 2 draws six terminals) at 120 ms RTT, which
    /// makes the targets need 67.5 KB, between the paper's 60 KB (too small
    /// for the high class) and 100 KB (enough for both with margin).
    fn model1() -> Vec<Demand> {
        let rtt = Duration::from_millis(120);
        (0..6)
            .map(|i| {
                let high = i < 3;
                Demand {
                    id: i,
                    priority: if high { HIGH } else { LOW },
                    target: if high { Rate::kbps(1000) } else { Rate::kbps(500) },
                    rtt,
                }
            })
            .collect()
    }

    #[test]
    fn eq1_window_in_kilobytes() {
        // 1 Mbit/s * 120 ms / 8 = 15 KB; 0.5 Mbit/s -> 7.5 KB.
        assert_eq!(window_for(Rate::mbps(1), Duration::from_millis(120)), 15_000);
        assert_eq!(window_for(Rate::kbps(500), Duration::from_millis(120)), 7_500);
        assert_eq!(window_for(Rate::mbps(500), Duration::from_millis(100)), 6_250_000);
    }

    #[test]
    fn model1_sufficient() {
        let p = allocate(&model1(), 67_500).unwrap();
        assert_eq!(p.rule, Rule::Sufficient);
        let b: Vec<u64> = p.shares.iter().map(|s| s.bytes).collect();
        assert_eq!(b, vec![15_000, 15_000, 15_000, 7_500, 7_500, 7_500]);
        assert_eq!(p.unallocated, 0);
    }

    #[test]
    fn model1_surplus_at_100kb() {
        let p = allocate(&model1(), 100_000).unwrap();
        assert_eq!(p.rule, Rule::Surplus);
        assert_eq!(p.needed, 67_500);
        // Surplus 32 500 split 1.0 : 0.5 over targets summing to 4.5 Mbit/s.
        let b: Vec<u64> = p.shares.iter().map(|s| s.bytes).collect();
        assert_eq!(b, vec![22_222, 22_222, 22_222, 11_111, 11_111, 11_111]);
        assert_eq!(p.unallocated, 1);
        // Both classes above target: 22 222 B / 120 ms = 1.48 Mbit/s.
        assert!(p.shares.iter().all(|s| s.window_rate() >= s.target));
    }

    #[test]
    fn model1_shortage_at_60kb() {
        let p = allocate(&model1(), 60_000).unwrap();
        assert_eq!(p.rule, Rule::LoweredTargets);
        assert_eq!(p.needed_lowered, 45_000);
        // All at 7.5 KB (0.5 Mbit/s); the 15 KB left goes to the high class,
        // which lacks 22.5 KB in total: 5 KB each.
        let b: Vec<u64> = p.shares.iter().map(|s| s.bytes).collect();
        assert_eq!(b, vec![12_500, 12_500, 12_500, 7_500, 7_500, 7_500]);
        // Low class holds its target; high gets as close as the pool allows.
        assert_eq!(p.share(4).unwrap().window_rate(), Rate::kbps(500));
        assert_eq!(p.share(0).unwrap().window_rate(), Rate(833_333));
    }

    #[test]
    fn proportional_when_even_lowest_target_does_not_fit() {
        let mut d = model1();
        d[5].rtt = Duration::from_millis(240); // needs 15 KB at 0.5 Mbit/s
        let p = allocate(&d, 26_000).unwrap();
        assert_eq!(p.rule, Rule::Proportional);
        assert_eq!(p.needed_lowered, 52_500);
        // Everyone gets 26/52.5 of its lowered window: same throughput for all.
        let b: Vec<u64> = p.shares.iter().map(|s| s.bytes).collect();
        assert_eq!(b, vec![3_714, 3_714, 3_714, 3_714, 3_714, 7_428]);
        assert_eq!(minimum_pool(&d), 52_500);
    }

    #[test]
    fn leftovers_fill_highest_priority_before_the_next() {
        let rtt = Duration::from_millis(100);
        let d = vec![
            Demand { id: 1, priority: 3, target: Rate::mbps(2), rtt },
            Demand { id: 2, priority: 2, target: Rate::mbps(2), rtt },
            Demand { id: 3, priority: 1, target: Rate::mbps(1), rtt },
        ];
        // Needs 25 + 25 + 12.5 KB; lowered 12.5 each = 37.5 KB.
        let p = allocate(&d, 55_000).unwrap();
        assert_eq!(p.rule, Rule::LoweredTargets);
        let b: Vec<u64> = p.shares.iter().map(|s| s.bytes).collect();
        assert_eq!(b, vec![25_000, 17_500, 12_500]);
    }

    #[test]
    fn empty_and_duplicate() {
        let p = allocate(&[], 1000).unwrap();
        assert!(p.shares.is_empty());
        assert_eq!(p.unallocated, 1000);
        let d = model1();
        let dup = vec![d[0], d[0]];
        assert_eq!(allocate(&dup, 1000), Err(AllocError::DuplicateId(0)));
    }

    fn demands() -> impl Strategy<Value = Vec<Demand>> {
        proptest::collection::vec((1u32..4, 1u64..5_000, 1u64..400), 1..8).prop_map(|v| {
            v.into_iter()
                .enumerate()
                .map(|(i, (p, kbps, ms))| Demand {
                    id: i as u64,
                    priority: p,
                    target: Rate::kbps(kbps),
                    rtt: Duration::from_millis(ms),
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn never_over_pool_and_monotone(d in demands(), pool in 0u64..2_000_000, extra in 1u64..200_000) {
            let a = allocate(&d, pool).unwrap();
            let b = allocate(&d, pool + extra).unwrap();
            let sum_a: u64 = a.shares.iter().map(|s| s.bytes).sum();
            prop_assert!(sum_a <= pool);
            prop_assert_eq!(sum_a + a.unallocated, pool);
            prop_assert!(a.unallocated <= d.len() as u64 || a.shares.is_empty());
            for (x, y) in a.shares.iter().zip(&b.shares) {
                prop_assert!(y.bytes >= x.bytes, "share {} fell from {} to {} ({:?} -> {:?})",
                    x.id, x.bytes, y.bytes, a.rule, b.rule);
            }
            // Once the pool covers every target, every target is met.
            if pool >= a.needed {
                prop_assert!(a.shares.iter().all(|s| s.bytes >= s.need));
            }
            // Under shortage the lowest class still gets its (lowered) window.
            if pool >= a.needed_lowered {
                let low = lowest_target(&d);
                for (s, dd) in a.shares.iter().zip(&d) {
                    prop_assert!(s.bytes >= window_for(dd.target.min(low), dd.rtt));
                }
            }
        }
    }
}
