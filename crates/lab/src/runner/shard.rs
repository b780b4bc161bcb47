//! Deterministic slices of a scenario's runs (`lab run --shard I/N`).
//!
//! A scenario's runs are its variants × repeats in the runner's interleaved
//! order (repeat 0: A B C, repeat 1: A B C, …); each run's seed depends on
//! the scenario seed and its repeat only, so a run gives the same workload
//! whichever process runs it. Shard `I/N` runs the runs at positions `k` of
//! that order with `k mod N = I`: every run in exactly one shard, and the
//! variants of a repeat spread over the shards (a shard of a long figure
//! gets its share of every variant, so the shards take about as long).
//! Loads and other points inside one run stay in that run.
//!
//! Pure: no clock, no I/O; [`crate::runner::merge`] joins the shards' records.

use serde::{Deserialize, Serialize};

/// The `I`-th of `N` slices, `0 ≤ I < N` (0-based like a Slurm array task
/// id or a Kubernetes Indexed Job's `JOB_COMPLETION_INDEX`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    #[error(
        "--shard {0:?}: expected I/N with 0 ≤ I < N, e.g. 0/4 … 3/4 (I is 0-based, like SLURM_ARRAY_TASK_ID)"
    )]
    Form(String),
}

impl Shard {
    /// The whole run as one shard.
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    /// Parses `I/N`.
    pub fn parse(s: &str) -> Result<Shard, ShardError> {
        let bad = || ShardError::Form(s.to_string());
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// Whether the run at `position` of [`plan`]'s order is this shard's.
    pub fn owns(&self, position: usize) -> bool {
        position % self.count as usize == self.index as usize
    }

    /// This shard's runs of `plan`, in the plan's order.
    pub fn select<'a>(&self, plan: &'a [RunId]) -> Vec<&'a RunId> {
        plan.iter().enumerate().filter(|(k, _)| self.owns(*k)).map(|(_, r)| r).collect()
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// One run: one repeat of one variant.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunId {
    pub repeat: u32,
    pub variant: String,
}

/// Every run of a scenario in the runner's order: repeats outermost,
/// variants interleaved within a repeat (A B C A B C …).
pub fn plan(variants: &[String], repeats: u32) -> Vec<RunId> {
    (0..repeats)
        .flat_map(|repeat| variants.iter().map(move |v| RunId { repeat, variant: v.clone() }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn parse_refuses_what_is_not_i_of_n() {
        assert_eq!(Shard::parse("2/4"), Ok(Shard { index: 2, count: 4 }));
        assert_eq!(Shard::parse(" 0 / 1 "), Ok(Shard::ALL));
        for bad in ["4/4", "1/0", "0/0", "1", "a/2", "-1/2", "1/2/3", ""] {
            let e = Shard::parse(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")) && e.contains("0-based"), "{bad}: {e}");
        }
        assert_eq!(Shard { index: 3, count: 8 }.to_string(), "3/8");
    }

    #[test]
    fn plan_is_the_runners_interleaved_order() {
        let v: Vec<String> = ["a", "b", "c"].map(String::from).into();
        let all = plan(&v, 2);
        let p: Vec<(u32, &str)> = all.iter().map(|r| (r.repeat, r.variant.as_str())).collect();
        assert_eq!(p, [(0, "a"), (0, "b"), (0, "c"), (1, "a"), (1, "b"), (1, "c")]);
        let s = Shard { index: 1, count: 4 };
        let mine: Vec<(u32, &str)> = s.select(&all).iter().map(|r| (r.repeat, r.variant.as_str())).collect();
        assert_eq!(mine, [(0, "b"), (1, "c")]);
    }

    /// For many plan shapes and shard counts: every run in exactly one
    /// shard, none missing, shards' sizes within one of each other, and a
    /// shard's runs in the plan's order.
    #[test]
    fn shards_partition_the_runs_exactly() {
        for nv in 1..=7usize {
            let variants: Vec<String> = (0..nv).map(|i| format!("v{i}")).collect();
            for repeats in 1..=5u32 {
                let all = plan(&variants, repeats);
                assert_eq!(all.len(), nv * repeats as usize);
                assert_eq!(all.iter().collect::<BTreeSet<_>>().len(), all.len(), "plan has no duplicates");
                for n in 1..=all.len() as u32 + 3 {
                    let mut seen: Vec<&RunId> = Vec::new();
                    let mut sizes = Vec::new();
                    for i in 0..n {
                        let mine = Shard { index: i, count: n }.select(&all);
                        let pos: Vec<usize> =
                            mine.iter().map(|r| all.iter().position(|x| x == *r).unwrap()).collect();
                        assert!(pos.windows(2).all(|w| w[0] < w[1]), "shard {i}/{n} keeps the order");
                        sizes.push(mine.len());
                        seen.extend(mine);
                    }
                    assert_eq!(seen.len(), all.len(), "{nv}×{repeats} in {n}: no run twice, none missing");
                    let set: BTreeSet<&RunId> = seen.into_iter().collect();
                    assert_eq!(set, all.iter().collect::<BTreeSet<_>>());
                    let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                    assert!(hi - lo <= 1, "{nv}×{repeats} in {n}: sizes {sizes:?}");
                }
            }
        }
    }
}
