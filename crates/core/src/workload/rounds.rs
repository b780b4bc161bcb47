//! Seed 001's own load: Load as the share of nodes addressed, flows started
//! in rounds ([Lanes] §6.4, with the author's published simulation scripts
//! where the text is silent).
//!
//! [Lanes] §6.4 defines Load as the share of the nodes that communicate, for
//! the back end and the front end each, and varies it from 0.1 to 0.8; it is
//! not the utilisation of a link (that regime is [`super::load_to_rate`]'s).
//! The text does not say when flows start; the author's scripts for that
//! chapter (repository ShogoFujii/PS-MPTCP, directory
//! `arch/sim/test/buildtop/source/ns-3-dce/example/`, files
//! `dce-iperf-mptcp_fattree_web.cc` and `dce-iperf-mptcp_fattree_mining.cc`,
//! "the web script" and "the mining script" below) start them in rounds.
//! Every choice, with its source:
//!
//! | choice | value | source |
//! |---|---|---|
//! | Load | share of nodes addressed, per host class | text §6.4 |
//! | short flows per round | ⌊Load × front-end hosts⌋ | text §6.4; web script `main` (`s_num = 24*load/100`) |
//! | round period | 200 ms | web script `constant_pros(…, 20)` (interval 10 × 20 ms) |
//! | spacing inside a round | 1 ms, in source-host order | web script `socketTraffic2` (`start + 0.001*i`, a multimap keyed by source) |
//! | rounds | web 22, mining 47 | scripts' `main`: arrivals from 3.6 s to end − 2 s (end 10 s / 15 s) |
//! | short-flow pairs | uniform ordered pair of distinct front-end hosts | web script `s_makelist` (draws, rejects back-end hosts and src = dst) |
//! | web short sizes | Pareto(a = 1.5, mean 50 KiB), whole KiB (truncated) | text Table 6.1 (shape, mean); web script `pareto_make` (int KiB, × 1024) |
//! | mining short sizes | Pareto(a = 1.5, mean 10 KiB), whole KiB; sizes ≥ 100 KiB not started | text Table 6.1; mining script `socketTraffic2` (`box[…] < 100`) |
//! | long senders | ⌊Load × back-end hosts⌋, the first ones, each to one fixed back-end destination ≠ itself | text §6.4 (share of nodes); web script `l_makelist2`, mining script `l_makelist` |
//! | web long flows | one new Pareto(a = 1.2, mean 10,000 KiB) flow per sender every 1 s from the first round, open loop, senders 1 ms apart | text Table 6.1; web script `constant_pros(3600, …, 100)` + `socketTraffic2` |
//! | mining long flows | 800,000 KiB split over the senders, started once 400 ms after the first round, 1 ms apart | text Table 6.1 (800 MB over n senders); mining script `main` (`l_size = 800000`, KiB; start 4.0 s vs rounds from 3.6 s) |
//!
//! Where the two disagree the text rules: the scripts run 32 hosts (24
//! front-end, 8 back-end) and run the mining long flows without a size limit;
//! the text's fabric has 16 (12 front-end, 4 back-end) and 800 MB over n
//! senders. Host lists are the caller's, so the scripts' fabric is a
//! sensitivity variant, not another generator. Inferred: the scripts also
//! pick one of the destination's two addresses at random for pure MPTCP; here
//! the path is the variant's business, not the workload's.
//!
//! Pure: no clock, no sockets; flows start at offsets from a caller-given
//! origin, and the same seed gives the same flows.

use super::{Flow, FlowClass, HostId, WorkloadError};
use crate::rng::Rng;
use crate::time::Instant;
use serde::Serialize;
use std::time::Duration;

/// One KiB: the scripts size every flow in whole KiB (`box[…] * 1024`).
pub const KIB: u64 = 1024;
/// Time between two rounds of short flows (web script `constant_pros`).
pub const ROUND_PERIOD: Duration = Duration::from_millis(200);
/// Time between two flows of one round (web script `socketTraffic2`).
pub const SPACING: Duration = Duration::from_millis(1);
/// Time between two long flows of one web-search sender.
pub const WEB_LONG_PERIOD: Duration = Duration::from_secs(1);
/// When the mining long flows start, after the first round.
pub const MINING_LONG_DELAY: Duration = Duration::from_millis(400);

/// The two traffic mixes of [Lanes] Table 6.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mix {
    WebSearch,
    DataMining,
}

impl Mix {
    /// Rounds of short flows: arrivals from 3.6 s to the scripts' end − 2 s.
    pub fn rounds(self) -> u32 {
        match self {
            Mix::WebSearch => 22,  // 3.6 s .. 8.0 s
            Mix::DataMining => 47, // 3.6 s .. 13.0 s
        }
    }

    /// Mean short-flow size in KiB (Table 6.1).
    pub fn short_mean_kib(self) -> f64 {
        match self {
            Mix::WebSearch => 50.0,
            Mix::DataMining => 10.0,
        }
    }

    /// Short flows of this many KiB or more are not started (mining script).
    pub fn short_limit_kib(self) -> Option<u64> {
        match self {
            Mix::WebSearch => None,
            Mix::DataMining => Some(100),
        }
    }
}

/// The experiment's host classes and its Load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeShare {
    pub mix: Mix,
    /// Load in percent of the nodes, as the scripts take it (`-load=20` is
    /// Load 0.2); integer so that ⌊Load × hosts⌋ is exact.
    pub load_percent: u32,
    /// Front-end hosts: short flows run among them.
    pub front: Vec<HostId>,
    /// Back-end hosts: long flows run among them.
    pub back: Vec<HostId>,
}

/// What a [`NodeShare`] amounts to, before any flow is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub short_per_round: u32,
    pub rounds: u32,
    pub long_senders: u32,
    /// Long flows each sender starts (web: one a second over the rounds'
    /// span; mining: one).
    pub long_per_sender: u32,
}

impl NodeShare {
    fn error(&self, reason: impl Into<String>) -> WorkloadError {
        WorkloadError::Stream {
            stream: format!("{:?} at load {}%", self.mix, self.load_percent),
            reason: reason.into(),
        }
    }

    /// Counts per round and senders; errors name what is wrong.
    pub fn plan(&self) -> Result<Plan, WorkloadError> {
        if !(1..=100).contains(&self.load_percent) {
            return Err(self.error("load must be 1–100 percent of the nodes"));
        }
        if self.front.len() < 2 {
            return Err(self.error("short flows need at least two front-end hosts"));
        }
        if self.front.iter().any(|h| self.back.contains(h)) {
            return Err(self.error("a host is both front-end and back-end"));
        }
        let share = |n: usize| (n as u64 * u64::from(self.load_percent) / 100) as u32;
        let long_senders = share(self.back.len());
        if long_senders > 0 && self.back.len() < 2 {
            return Err(self.error("long flows need at least two back-end hosts"));
        }
        let rounds = self.mix.rounds();
        let long_per_sender = match self.mix {
            // Rounds span (rounds − 1) × 200 ms; a sender starts at 0, 1 s, …
            Mix::WebSearch => {
                let span = ROUND_PERIOD.as_millis() as u32 * (rounds - 1);
                span / WEB_LONG_PERIOD.as_millis() as u32 + 1
            }
            Mix::DataMining => 1,
        };
        Ok(Plan { short_per_round: share(self.front.len()), rounds, long_senders, long_per_sender })
    }

    /// Every flow, in start order (ties: short before long, then draw order),
    /// ids from 0. Short flows and long flows draw from independent streams
    /// of `seed`, so changing one class leaves the other's draws alone.
    pub fn flows(&self, seed: u64, origin: Instant) -> Result<Vec<Flow>, WorkloadError> {
        let plan = self.plan()?;
        let mut out: Vec<(Duration, u8, Flow)> = Vec::new();

        let mut rng = Rng::fork(seed, 0);
        for r in 0..plan.rounds {
            let at = ROUND_PERIOD * r;
            let mut pairs: Vec<(HostId, HostId, u64)> = (0..plan.short_per_round)
                .map(|_| {
                    let (src, dst) = distinct_pair(&mut rng, &self.front);
                    (src, dst, pareto_kib(&mut rng, 1.5, self.mix.short_mean_kib()))
                })
                .collect();
            // The scripts start a round's flows in source-host order.
            pairs.sort_by_key(|p| p.0);
            for (i, (src, dst, kib)) in pairs.into_iter().enumerate() {
                if self.mix.short_limit_kib().is_some_and(|limit| kib >= limit) {
                    continue; // not started, its 1 ms slot stays empty
                }
                let start = at + SPACING * i as u32;
                out.push((
                    start,
                    0,
                    Flow {
                        id: 0,
                        start: origin + start,
                        src,
                        dst,
                        bytes: kib * KIB,
                        class: FlowClass::Short,
                    },
                ));
            }
        }

        let mut rng = Rng::fork(seed, 1);
        let senders = &self.back[..plan.long_senders as usize];
        let dsts: Vec<HostId> = senders
            .iter()
            .map(|&s| {
                let others: Vec<HostId> = self.back.iter().copied().filter(|&h| h != s).collect();
                others[rng.below(others.len() as u64) as usize]
            })
            .collect();
        match self.mix {
            Mix::WebSearch => {
                for k in 0..plan.long_per_sender {
                    for (i, (&src, &dst)) in senders.iter().zip(&dsts).enumerate() {
                        let start = WEB_LONG_PERIOD * k + SPACING * i as u32;
                        let bytes = pareto_kib(&mut rng, 1.2, 10_000.0) * KIB;
                        out.push((
                            start,
                            1,
                            Flow { id: 0, start: origin + start, src, dst, bytes, class: FlowClass::Long },
                        ));
                    }
                }
            }
            Mix::DataMining => {
                let n = u64::from(plan.long_senders.max(1));
                for (i, (&src, &dst)) in senders.iter().zip(&dsts).enumerate() {
                    let start = MINING_LONG_DELAY + SPACING * i as u32;
                    let bytes = 800_000 / n * KIB;
                    out.push((
                        start,
                        1,
                        Flow { id: 0, start: origin + start, src, dst, bytes, class: FlowClass::Long },
                    ));
                }
            }
        }
        // Stable: equal (start, class) keep their draw order.
        out.sort_by_key(|(start, class, _)| (*start, *class));
        Ok(out
            .into_iter()
            .enumerate()
            .map(|(id, (_, _, mut f))| {
                f.id = id as u64;
                f
            })
            .collect())
    }
}

/// Fig. 6.5–6.6's queue buildup as the author's incast script runs it
/// (`dce-iperf-mptcp_incast.cc`, driven by `repeat_incast.sh` with
/// `s_nodes` 1–10; "the incast script" below). Every choice, with its
/// source:
///
/// | choice | value | source |
/// |---|---|---|
/// | short flows | one to every front-end host per round, all of a round at once | incast script `main` (`adrs_set3`: six fixed receivers) and `socketTraffic` (one start time for the set) |
/// | round period, rounds | 200 ms, 13 rounds | incast script `constant_pros(3500, 6000, 20)`: 3.5 s to 5.9 s |
/// | short sizes | 64 KiB | text §6.3 (64 KB; KiB as the scripts count KB); the script sends `70*1000 − 1502` = 68,498 B (`repeat_incast.sh` `size=70`) |
/// | short pairs | [`BuildupSenders::FrontEnd`]: front-end host i receives from front-end host i + 1 (mod n), fixed; [`BuildupSenders::Separate`]: from its own sender | inferred for `FrontEnd` (8 hosts have no spare hosts); `Separate`: incast script `main` (`adrs_set3`: node 2k + 1 → node 2k, k = 2…7, senders that send nothing else) |
/// | long senders | 1–10; `FrontEnd`: front-end host i mod n for sender i (a host runs two when senders exceed the front-end hosts); `Separate`: long sender i is its own host | text (1–10 senders, 8 hosts); which hosts: inferred for `FrontEnd`, incast script `main` for `Separate` (`adrs_set`: nodes 17, 19, … each one flow) |
/// | long destinations | the back-end hosts in turn (sender i to back-end host i mod m) | incast script `main` (`j%2`: 10.1.0.1 or 10.3.0.1, two destinations) |
/// | long flows | unbounded (the caller's size), started 500 ms after the first round | incast script (`socketTraffic(adrs_set, 0, 4.0, 6.0, …)`: `MaxBytes` 0, from 4.0 s) |
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BuildupRounds {
    pub long_senders: u32,
    /// Bytes of each long flow (the script's are unbounded: the caller
    /// gives more than the run can send).
    pub long_bytes: u64,
    /// The short flows' receivers.
    pub front: Vec<HostId>,
    /// The long flows' destinations.
    pub back: Vec<HostId>,
    pub senders: BuildupSenders,
}

/// Which hosts send the buildup's flows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildupSenders {
    /// The text's 8 hosts: the front-end hosts send both, short flows to
    /// their neighbour, long flows one per host in turn.
    FrontEnd,
    /// The incast script's: `short[i]` sends the short flows to `front[i]`,
    /// `long[i]` runs long flow i; hosts that do nothing else.
    Separate { short: Vec<HostId>, long: Vec<HostId> },
}

/// Rounds of the incast script: 3.5 s to 5.9 s, 200 ms apart.
pub const BUILDUP_ROUNDS: u32 = 13;
/// Bytes of a buildup short flow (text §6.3: 64 KB, in KiB).
pub const BUILDUP_SHORT_BYTES: u64 = 64 * KIB;
/// When the buildup's long flows start, after the first round.
pub const BUILDUP_LONG_DELAY: Duration = Duration::from_millis(500);

impl BuildupRounds {
    fn error(&self, reason: impl Into<String>) -> WorkloadError {
        WorkloadError::Stream {
            stream: format!("buildup with {} long senders", self.long_senders),
            reason: reason.into(),
        }
    }

    /// Every flow, in start order (short before long at one time), ids
    /// from 0. Nothing is drawn: the incast script's flows are fixed.
    pub fn flows(&self, origin: Instant) -> Result<Vec<Flow>, WorkloadError> {
        if self.front.len() < 2 {
            return Err(self.error("short flows need at least two front-end hosts"));
        }
        if self.long_senders > 0 && self.back.is_empty() {
            return Err(self.error("long flows need a back-end host"));
        }
        if self.front.iter().any(|h| self.back.contains(h)) {
            return Err(self.error("a host is both front-end and back-end"));
        }
        let n = self.front.len();
        let (short_src, long_src): (Vec<HostId>, Vec<HostId>) = match &self.senders {
            BuildupSenders::FrontEnd => (
                (0..n).map(|i| self.front[(i + 1) % n]).collect(),
                (0..self.long_senders as usize).map(|i| self.front[i % n]).collect(),
            ),
            BuildupSenders::Separate { short, long } => {
                if short.len() != n {
                    return Err(self.error(format!(
                        "{} short-flow senders for {n} front-end hosts: one each",
                        short.len()
                    )));
                }
                if long.len() < self.long_senders as usize {
                    return Err(self.error(format!("only {} long-sender hosts", long.len())));
                }
                let long = &long[..self.long_senders as usize];
                let mut all: Vec<HostId> = [&self.front, &self.back, short, long].concat();
                all.sort_unstable();
                if all.windows(2).any(|w| w[0] == w[1]) {
                    return Err(self.error("a host has two roles: separate senders send nothing else"));
                }
                (short.clone(), long.to_vec())
            }
        };
        let mut out: Vec<(Duration, u8, HostId, HostId, u64, FlowClass)> = Vec::new();
        for r in 0..BUILDUP_ROUNDS {
            for (&dst, &src) in self.front.iter().zip(&short_src) {
                out.push((ROUND_PERIOD * r, 0, src, dst, BUILDUP_SHORT_BYTES, FlowClass::Short));
            }
        }
        for (i, &src) in long_src.iter().enumerate() {
            let dst = self.back[i % self.back.len()];
            out.push((BUILDUP_LONG_DELAY, 1, src, dst, self.long_bytes, FlowClass::Long));
        }
        out.sort_by_key(|f| (f.0, f.1));
        Ok(out
            .into_iter()
            .enumerate()
            .map(|(id, (at, _, src, dst, bytes, class))| Flow {
                id: id as u64,
                start: origin + at,
                src,
                dst,
                bytes,
                class,
            })
            .collect())
    }
}

/// A uniform ordered pair of distinct hosts (the scripts draw both and reject
/// equal ones, which is the same distribution).
fn distinct_pair(rng: &mut Rng, hosts: &[HostId]) -> (HostId, HostId) {
    let n = hosts.len() as u64;
    let s = rng.below(n);
    let d = (s + 1 + rng.below(n - 1)) % n;
    (hosts[s as usize], hosts[d as usize])
}

/// A Pareto(`shape`, `mean_kib`) size truncated to whole KiB, as the
/// scripts' `pareto_make` does (`int` of `x_m / (1 − U)^(1/a)`, `x_m =
/// mean·(a−1)/a`; [Lanes] Table 6.1 gives shape and mean).
fn pareto_kib(rng: &mut Rng, shape: f64, mean_kib: f64) -> u64 {
    let scale = mean_kib * (shape - 1.0) / shape;
    let x = scale / (1.0 - rng.next_f64()).powf(1.0 / shape);
    if x.is_finite() {
        x as u64
    } else {
        u64::MAX / KIB
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The text's fabric: k = 4 DHFT, 16 hosts, 12 front-end and 4 back-end.
    fn text_fabric(mix: Mix, load_percent: u32) -> NodeShare {
        NodeShare { mix, load_percent, front: (0..12).collect(), back: (12..16).collect() }
    }

    #[test]
    fn counts_per_round_follow_the_share_of_nodes_at_every_load() {
        // ⌊Load × 12⌋ short flows a round, ⌊Load × 4⌋ long senders.
        let want =
            [(10, 1, 0), (20, 2, 0), (30, 3, 1), (40, 4, 1), (50, 6, 2), (60, 7, 2), (70, 8, 2), (80, 9, 3)];
        for (load, short, long) in want {
            let p = text_fabric(Mix::WebSearch, load).plan().unwrap();
            assert_eq!((p.short_per_round, p.long_senders), (short, long), "load {load}%");
            assert_eq!(p.rounds, 22);
            assert_eq!(p.long_per_sender, 5, "4.2 s of rounds: senders start at 0, 1, 2, 3, 4 s");
        }
        // The scripts' fabric: 24 front-end, 8 back-end (s_num = 24*load/100).
        let scripts = NodeShare {
            mix: Mix::DataMining,
            load_percent: 80,
            front: (0..24).collect(),
            back: (24..32).collect(),
        };
        let p = scripts.plan().unwrap();
        assert_eq!((p.short_per_round, p.long_senders, p.rounds, p.long_per_sender), (19, 6, 47, 1));
    }

    #[test]
    fn web_search_flows_start_in_rounds_one_ms_apart_among_the_right_hosts() {
        let spec = text_fabric(Mix::WebSearch, 50);
        let flows = spec.flows(7, Instant::ZERO).unwrap();
        let short: Vec<&Flow> = flows.iter().filter(|f| f.class == FlowClass::Short).collect();
        let long: Vec<&Flow> = flows.iter().filter(|f| f.class == FlowClass::Long).collect();
        assert_eq!(short.len(), 22 * 6);
        assert_eq!(long.len(), 2 * 5);
        for (i, f) in short.iter().enumerate() {
            let (round, slot) = (i / 6, i % 6);
            assert_eq!(
                f.start,
                Instant::ZERO + ROUND_PERIOD * round as u32 + SPACING * slot as u32,
                "flow {i}"
            );
            assert!(f.src < 12 && f.dst < 12 && f.src != f.dst, "short flows stay among front-end hosts");
            assert_eq!(f.bytes % KIB, 0, "whole KiB");
            assert!(f.bytes >= 16 * KIB, "Pareto(1.5, 50 KiB) starts at 16.67 KiB, truncated: {}", f.bytes);
        }
        for round in short.chunks(6) {
            assert!(round.windows(2).all(|w| w[0].src <= w[1].src), "a round starts in source order");
        }
        // Long: back-end to back-end, fixed pairs, one a second per sender.
        let pairs: BTreeSet<(HostId, HostId)> = long.iter().map(|f| (f.src, f.dst)).collect();
        assert_eq!(pairs.len(), 2);
        assert_eq!(
            pairs.iter().map(|p| p.0).collect::<Vec<_>>(),
            vec![12, 13],
            "the first back-end hosts send"
        );
        for f in &long {
            assert!(f.dst >= 12 && f.dst != f.src);
            assert_eq!(f.bytes % KIB, 0);
            let ms = (f.start - Instant::ZERO).as_millis();
            assert!(
                ms % 1000 == u128::from(f.src - 12),
                "sender i starts at k s + i ms, got {ms} ms for {}",
                f.src
            );
        }
        // Ids follow start order.
        assert!(flows.windows(2).all(|w| w[0].start <= w[1].start && w[0].id + 1 == w[1].id));
    }

    #[test]
    fn data_mining_skips_short_flows_of_100_kib_and_splits_800_000_kib_over_the_senders() {
        let spec = text_fabric(Mix::DataMining, 80);
        let flows = spec.flows(3, Instant::ZERO).unwrap();
        let short: Vec<&Flow> = flows.iter().filter(|f| f.class == FlowClass::Short).collect();
        assert!(short.iter().all(|f| f.bytes < 100 * KIB && f.bytes >= 3 * KIB && f.bytes % KIB == 0));
        // 47 rounds × 9 drawn; those of 100 KiB or more are not started and
        // their slots stay empty.
        assert!(short.len() <= 423 && short.len() > 400, "{} started", short.len());
        assert!(short.iter().all(|f| ((f.start - Instant::ZERO).as_millis() % 200) < 9));
        // Pareto(1.5): P(X ≥ 100 KiB) = (3.33/100)^1.5 ≈ 0.6%, so over 20
        // seeds some flows are left out (all 8,460 started: p ≈ 1e-22).
        let started: usize = (0..20)
            .map(|seed| {
                spec.flows(seed, Instant::ZERO)
                    .unwrap()
                    .iter()
                    .filter(|f| f.class == FlowClass::Short)
                    .count()
            })
            .sum();
        assert!(started < 20 * 423 && started > 20 * 423 * 98 / 100, "{started} of {}", 20 * 423);
        let long: Vec<&Flow> = flows.iter().filter(|f| f.class == FlowClass::Long).collect();
        assert_eq!(long.len(), 3);
        for (i, f) in long.iter().enumerate() {
            assert_eq!(f.bytes, 800_000 / 3 * KIB);
            assert_eq!(f.start, Instant::ZERO + MINING_LONG_DELAY + SPACING * i as u32);
            assert!(f.src >= 12 && f.dst >= 12 && f.src != f.dst);
        }
    }

    #[test]
    fn the_same_seed_replays_the_same_flows_and_classes_draw_apart() {
        let spec = text_fabric(Mix::WebSearch, 80);
        let a = spec.flows(11, Instant::ZERO).unwrap();
        assert_eq!(a, spec.flows(11, Instant::ZERO).unwrap());
        assert_ne!(a, spec.flows(12, Instant::ZERO).unwrap());
        // The short flows are the same whatever the back end does.
        let fewer_back = NodeShare { back: vec![12, 13], ..spec.clone() };
        let shorts = |v: Vec<Flow>| -> Vec<(Instant, HostId, HostId, u64)> {
            v.into_iter()
                .filter(|f| f.class == FlowClass::Short)
                .map(|f| (f.start, f.src, f.dst, f.bytes))
                .collect()
        };
        assert_eq!(shorts(a), shorts(fewer_back.flows(11, Instant::ZERO).unwrap()));
    }

    #[test]
    fn short_flow_pairs_are_uniform_over_ordered_front_end_pairs() {
        // 3 hosts: 6 ordered pairs, each about 1/6 of 60,000 draws.
        let mut rng = Rng::seeded(5);
        let mut n = std::collections::BTreeMap::new();
        for _ in 0..60_000 {
            *n.entry(distinct_pair(&mut rng, &[4, 5, 6])).or_insert(0u32) += 1;
        }
        assert_eq!(n.len(), 6);
        assert!(n.values().all(|&c| (9_500..10_500).contains(&c)), "{n:?}");
    }

    #[test]
    fn buildup_rounds_send_one_64_kib_flow_to_each_front_end_host_every_200_ms_beside_n_long_senders() {
        // The text's 8 hosts: 2 back-end, 6 front-end.
        let spec = |long_senders| BuildupRounds {
            long_senders,
            long_bytes: 1 << 40,
            front: (2..8).collect(),
            back: vec![0, 1],
            senders: BuildupSenders::FrontEnd,
        };
        let origin = Instant::ZERO + Duration::from_secs(1);
        for senders in 1..=10u32 {
            let flows = spec(senders).flows(origin).unwrap();
            let short: Vec<&Flow> = flows.iter().filter(|f| f.class == FlowClass::Short).collect();
            let long: Vec<&Flow> = flows.iter().filter(|f| f.class == FlowClass::Long).collect();
            assert_eq!((short.len(), long.len()), (13 * 6, senders as usize), "{senders} senders");
            for (r, round) in short.chunks(6).enumerate() {
                // Every front-end host receives one flow a round, from its
                // fixed neighbour, all at the round's start.
                let dsts: Vec<HostId> = round.iter().map(|f| f.dst).collect();
                assert_eq!(dsts, (2..8).collect::<Vec<_>>(), "round {r}");
                for f in round {
                    assert_eq!(f.start, origin + ROUND_PERIOD * r as u32);
                    assert_eq!(f.src, if f.dst == 7 { 2 } else { f.dst + 1 });
                    assert_eq!(f.bytes, 65_536);
                }
            }
            for (i, f) in long.iter().enumerate() {
                assert_eq!(f.start, origin + Duration::from_millis(500));
                assert_eq!((f.src, f.dst, f.bytes), (2 + (i as u32 % 6), i as u32 % 2, 1 << 40));
            }
            assert!(flows.windows(2).all(|w| w[0].start <= w[1].start && w[0].id + 1 == w[1].id));
            assert_eq!(flows, spec(senders).flows(origin).unwrap(), "nothing drawn: the same flows");
        }
        // Ten senders on six front-end hosts: four hosts run two.
        let ten = spec(10).flows(origin).unwrap();
        let on_host_2 = ten.iter().filter(|f| f.class == FlowClass::Long && f.src == 2).count();
        assert_eq!(on_host_2, 2);
        let no_back = BuildupRounds { back: vec![], ..spec(1) };
        assert!(no_back.flows(origin).unwrap_err().to_string().contains("back-end host"));
        let overlap = BuildupRounds { back: vec![0, 2], ..spec(1) };
        assert!(overlap.flows(origin).unwrap_err().to_string().contains("both"));
    }

    #[test]
    fn separate_buildup_senders_send_only_their_own_flows() {
        // The incast script's roles on two leaves: senders 0..16 (six short,
        // ten long), receivers 16..24 (two long destinations, six short).
        let spec = |long_senders| BuildupRounds {
            long_senders,
            long_bytes: 1 << 40,
            front: (18..24).collect(),
            back: vec![16, 17],
            senders: BuildupSenders::Separate { short: (0..6).collect(), long: (6..16).collect() },
        };
        let origin = Instant::ZERO;
        for senders in [1u32, 2, 7, 10] {
            let flows = spec(senders).flows(origin).unwrap();
            let (short, long): (Vec<&Flow>, Vec<&Flow>) =
                flows.iter().partition(|f| f.class == FlowClass::Short);
            assert_eq!((short.len(), long.len()), (13 * 6, senders as usize));
            for (r, round) in short.chunks(6).enumerate() {
                let pairs: Vec<(HostId, HostId)> = round.iter().map(|f| (f.src, f.dst)).collect();
                assert_eq!(pairs, (0..6).map(|i| (i, 18 + i)).collect::<Vec<_>>(), "round {r}");
                assert!(round
                    .iter()
                    .all(|f| f.start == origin + ROUND_PERIOD * r as u32 && f.bytes == 65_536));
            }
            let long: Vec<(HostId, HostId)> = long.iter().map(|f| (f.src, f.dst)).collect();
            assert_eq!(long, (0..senders).map(|i| (6 + i, 16 + i % 2)).collect::<Vec<_>>());
        }
        let err = |s: BuildupRounds| s.flows(origin).unwrap_err().to_string();
        assert!(err(spec(11)).contains("only 10 long-sender hosts"), "{}", err(spec(11)));
        let few = BuildupRounds {
            senders: BuildupSenders::Separate { short: (0..5).collect(), long: (6..16).collect() },
            ..spec(1)
        };
        assert!(err(few).contains("5 short-flow senders for 6 front-end hosts"));
        let shared = BuildupRounds {
            senders: BuildupSenders::Separate { short: (0..6).collect(), long: vec![5, 6] },
            ..spec(2)
        };
        assert!(err(shared).contains("two roles"));
        // A long-sender host beyond the count in use may be anything.
        let spare = BuildupRounds {
            senders: BuildupSenders::Separate { short: (0..6).collect(), long: vec![6, 18] },
            ..spec(1)
        };
        assert!(spare.flows(origin).is_ok());
    }

    #[test]
    fn bad_specs_are_refused_with_the_reason() {
        let mut s = text_fabric(Mix::WebSearch, 0);
        assert!(s.plan().unwrap_err().to_string().contains("1–100 percent"));
        s.load_percent = 50;
        s.back.push(3);
        assert!(s.plan().unwrap_err().to_string().contains("both front-end and back-end"));
        let one_back = NodeShare { back: vec![12], load_percent: 100, ..text_fabric(Mix::WebSearch, 100) };
        assert!(one_back.plan().unwrap_err().to_string().contains("two back-end hosts"));
        let one_front = NodeShare { front: vec![0], ..text_fabric(Mix::WebSearch, 50) };
        assert!(one_front.flows(1, Instant::ZERO).unwrap_err().to_string().contains("two front-end hosts"));
    }
}
