//! `lab compare`: the same workloads run twice — at two time dilations D
//! (the scale model's fidelity check) or twice at one D (the noise floor
//! beside it) — compared per variant on one class of flows: the mean and
//! 99th percentile of the completed flows' FCTs in experiment units, and
//! the Kolmogorov–Smirnov distance of their two distributions. Each pair
//! of runs gives a row per repeat, and every variant gets a row pooled
//! over all of them (a p99 over three times the flows). Beside each
//! difference, a 95% bootstrap interval over the flows, paired by id and
//! drawn in blocks of neighbours: how far the difference could move with
//! another draw of flows like these, so a missed goal can be told from
//! that noise. A whole run's own drift (one run of a workload a little
//! slower than another of the same) is not in one run's interval; the
//! pooled row's interval draws the pairs of runs as well (with
//! replacement, then blocks within each), so it is. A second run at the
//! same D, compared the same way, shows that drift beside.
//!
//! A pair must carry the same workload: the same scenario, seed and
//! parameters (only `scale` and `variants` may differ) and, per variant
//! and repeat, the same flow ids with the same sizes. Anything else is
//! refused with the difference named.

use super::tables::num;
use crate::runner::records::{FlowRecord, RunData};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use tcpaccel_core::rng::Rng;
use tcpaccel_core::stats::{ks_distance, mean, paired_ratio_interval, percentile, Pair};

/// Resamples behind each interval, its level, and the seed of its draws
/// (fixed: the same records give the same table).
const RESAMPLES: usize = 1000;
const LEVEL: f64 = 0.95;
const BOOTSTRAP_SEED: u64 = 1;
/// Flows per block, in the order they started: neighbours share a
/// congestion episode, so they are drawn together.
const BLOCK: usize = 32;

/// What is compared and the goal it is held to.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// Flows whose class starts with this (`short` for the lanes
    /// scenarios' "short (≤100 KB) @0.5").
    pub class_prefix: String,
    /// The goal: the mean and the p99 within ± this many percent …
    pub tolerance_pct: f64,
    /// … and a KS distance of at most this.
    pub max_ks: f64,
    /// The summary metric (before its `@point`) that says whether a run's
    /// lanes daemons took their signals from the BPF program (1) or polled
    /// (0): the lanes scenarios' `DAEMONS_ON_BPF_METRIC`. `None`: not
    /// checked.
    pub signal_metric: Option<String>,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions { class_prefix: "short".into(), tolerance_pct: 5.0, max_ks: 0.05, signal_metric: None }
    }
}

/// Why two sets of runs cannot be compared.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum CompareError {
    #[error("no base run given")]
    Empty,
    #[error("tolerance {0}%: give a percentage of 0 or more")]
    Tolerance(f64),
    #[error("KS limit {0}: give a distance from 0 to 1")]
    MaxKs(f64),
    #[error("{base} base run(s) against {other} other run(s): give one run to compare with each base run, in the same order")]
    Count { base: usize, other: usize },
    #[error("pair {pair}: scenario {base} against {other}")]
    Scenario { pair: usize, base: String, other: String },
    #[error("pair {pair}: seed {base} against {other} (a workload is replayed by its seed)")]
    Seed { pair: usize, base: u64, other: u64 },
    #[error(
        "pair {pair}: parameter {key} is {base} in the base run and {other} in the other (only the time dilation D and variants may differ)"
    )]
    Param { pair: usize, key: String, base: String, other: String },
    #[error("pair {pair}, {variant} repeat {repeat}: the workloads differ: {detail}")]
    Workload { pair: usize, variant: String, repeat: u32, detail: String },
    #[error("no variant has a completed flow of a class starting with {prefix:?} in both runs of a pair")]
    NoFlows { prefix: String },
}

/// One side of a row: its completed flows' FCT statistics (experiment ms).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    pub completed: usize,
    pub incomplete: usize,
    /// Flows that retransmitted (completed or not; flows recorded without
    /// the counter are not counted): shows where the loss recovery differs
    /// between scales (the timers D cannot scale).
    pub retransmitted: usize,
    pub mean_ms: f64,
    pub p99_ms: f64,
}

/// One variant on one pair of runs and repeat, or pooled over all of them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareRow {
    pub variant: String,
    /// "seed 1", "seed 1 repeat 2", or "pooled (3 runs)".
    pub runs: String,
    pub base: Side,
    pub other: Side,
    /// other ÷ base − 1, in percent.
    pub mean_diff_pct: f64,
    pub p99_diff_pct: f64,
    /// 95% bootstrap intervals of the two differences, in percent (`None`
    /// when too few flows completed on a side); a pooled row's draws the
    /// pairs of runs too.
    pub mean_diff_ci_pct: Option<(f64, f64)>,
    pub p99_diff_ci_pct: Option<(f64, f64)>,
    pub ks: f64,
    /// The base's flows at or above its p99 (its tail), and how many of
    /// them are in the other's tail too: whether the same flows make the
    /// tail on both sides, beside how long the tail is.
    pub tail: usize,
    pub tail_shared: usize,
    /// Which parts of the goal this row misses (empty: met).
    pub missed: Vec<String>,
    /// Whether the fidelity monitor judged every run in the row faithful
    /// (runs recorded before the monitor count as faithful).
    pub faithful: bool,
}

/// The whole comparison, as `lab compare` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub scenario: String,
    pub class_prefix: String,
    pub base_scales: Vec<u32>,
    pub other_scales: Vec<u32>,
    pub tolerance_pct: f64,
    pub max_ks: f64,
    pub rows: Vec<CompareRow>,
    /// Variant × repeat units left out, with why (no completed flow on a
    /// side, or recorded on one side only).
    pub skipped: Vec<String>,
    /// Units compared although they did not run alike: the lanes daemons
    /// took their signals by another path on each side (the BPF program's
    /// path needs a D it can scale exactly; otherwise they poll sock_diag).
    pub unlike: Vec<String>,
}

/// The flows of one variant × repeat in one run: id → record.
fn flows_of<'a>(d: &'a RunData, variant: &str, repeat: u32, prefix: &str) -> BTreeMap<u64, &'a FlowRecord> {
    d.flows
        .iter()
        .filter(|f| f.variant == variant && f.repeat == repeat && f.class.starts_with(prefix))
        .map(|f| (f.id, f))
        .collect()
}

/// The first difference between two workloads, or `None` when they hold
/// the same flow ids with the same sizes.
fn workload_difference(a: &BTreeMap<u64, &FlowRecord>, b: &BTreeMap<u64, &FlowRecord>) -> Option<String> {
    if let Some(id) = a.keys().find(|id| !b.contains_key(id)) {
        return Some(format!("flow {id} is only in the base run ({} against {} flows)", a.len(), b.len()));
    }
    if let Some(id) = b.keys().find(|id| !a.contains_key(id)) {
        return Some(format!("flow {id} is only in the other run ({} against {} flows)", a.len(), b.len()));
    }
    a.iter().find(|(id, f)| b[id].bytes != f.bytes).map(|(id, f)| {
        format!("flow {id} has {} bytes in the base run and {} in the other", f.bytes, b[id].bytes)
    })
}

/// The flows that retransmitted, on each side.
fn retransmitted(a: &BTreeMap<u64, &FlowRecord>, b: &BTreeMap<u64, &FlowRecord>) -> (usize, usize) {
    let count = |m: &BTreeMap<u64, &FlowRecord>| {
        m.values().filter(|f| f.retrans_bytes.is_some_and(|r| r > 0)).count()
    };
    (count(a), count(b))
}

/// A flow's FCT in experiment ms on each side (`None`: not completed
/// there), paired by flow id (both maps hold the same ids), in the order
/// the flows started.
fn pairs(a: &BTreeMap<u64, &FlowRecord>, b: &BTreeMap<u64, &FlowRecord>) -> Vec<Pair> {
    let fct = |f: &FlowRecord| f.completed.then(|| f.exp_fct_ms.unwrap_or(f.fct_ms));
    let mut by_start: Vec<(f64, Pair)> = a
        .iter()
        .map(|(id, f)| (f.exp_start.unwrap_or(f.start), (fct(f), b.get(id).and_then(|g| fct(g)))))
        .collect();
    by_start.sort_by(|x, y| x.0.total_cmp(&y.0));
    by_start.into_iter().map(|(_, p)| p).collect()
}

fn side(fct: &[f64], incomplete: usize, retransmitted: usize) -> Side {
    Side {
        completed: fct.len(),
        incomplete,
        retransmitted,
        mean_ms: mean(fct).unwrap_or(f64::NAN),
        p99_ms: percentile(fct, 99.0).unwrap_or(f64::NAN),
    }
}

/// A row over `units` (one slice of pairs per pair of runs; several on a
/// pooled row, whose interval then draws the runs too).
fn row(
    variant: &str,
    runs: String,
    units: &[&[Pair]],
    retx: (usize, usize),
    faithful: bool,
    o: &CompareOptions,
) -> CompareRow {
    let n: usize = units.iter().map(|u| u.len()).sum();
    let a: Vec<f64> = units.iter().flat_map(|u| u.iter().filter_map(|x| x.0)).collect();
    let b: Vec<f64> = units.iter().flat_map(|u| u.iter().filter_map(|x| x.1)).collect();
    let (base, other) = (side(&a, n - a.len(), retx.0), side(&b, n - b.len(), retx.1));
    let pct = |x: f64, y: f64| (y / x - 1.0) * 100.0;
    let mean_diff_pct = pct(base.mean_ms, other.mean_ms);
    let p99_diff_pct = pct(base.p99_ms, other.p99_ms);
    let interval = |stat: fn(&[f64]) -> Option<f64>| {
        paired_ratio_interval(units, BLOCK, stat, RESAMPLES, LEVEL, &mut Rng::seeded(BOOTSTRAP_SEED))
            .map(|(lo, hi)| (lo * 100.0, hi * 100.0))
    };
    let mean_diff_ci_pct = interval(mean);
    let p99_diff_ci_pct = interval(|v: &[f64]| percentile(v, 99.0));
    let ks = ks_distance(&a, &b).unwrap_or(f64::NAN);
    let in_tail = |x: Option<f64>, p99: f64| x.is_some_and(|x| x >= p99);
    let tails = units
        .iter()
        .flat_map(|u| u.iter())
        .map(|&(x, y)| (in_tail(x, base.p99_ms), in_tail(y, other.p99_ms)));
    let (tail, tail_shared) =
        tails.fold((0, 0), |(t, s), (a, b)| (t + usize::from(a), s + usize::from(a && b)));
    // NaN is at most nothing: a figure that could not be taken misses.
    let at_most = |x: f64, limit: f64| x <= limit;
    let missed: Vec<String> = [
        ("mean", at_most(mean_diff_pct.abs(), o.tolerance_pct)),
        ("p99", at_most(p99_diff_pct.abs(), o.tolerance_pct)),
        ("KS", at_most(ks, o.max_ks)),
    ]
    .into_iter()
    .filter(|(_, ok)| !ok)
    .map(|(what, _)| what.to_string())
    .collect();
    CompareRow {
        variant: variant.into(),
        runs,
        base,
        other,
        mean_diff_pct,
        p99_diff_pct,
        mean_diff_ci_pct,
        p99_diff_ci_pct,
        ks,
        tail,
        tail_shared,
        missed,
        faithful,
    }
}

/// How `variant`'s lanes daemons took their signals in `repeat` (the
/// [`CompareOptions::signal_metric`] figure of its summary), if it ran daemons.
fn signal_path(d: &RunData, metric: Option<&str>, variant: &str, repeat: u32) -> Option<&'static str> {
    let metric = metric?;
    let s = d.summaries.iter().find(|s| s.variant == variant && s.repeat == repeat)?;
    let (_, &on_bpf) = s.metrics.iter().find(|(k, _)| k.starts_with(metric))?;
    Some(if on_bpf > 0.0 { "the BPF program" } else { "sock_diag polling" })
}

/// The repeats a run recorded flows for, per variant.
fn repeats_of(d: &RunData, variant: &str) -> BTreeSet<u32> {
    d.flows.iter().filter(|f| f.variant == variant).map(|f| f.repeat).collect()
}

fn check_pair(pair: usize, a: &RunData, b: &RunData) -> Result<(), CompareError> {
    let (ha, hb) = (a.header(), b.header());
    if ha.scenario != hb.scenario {
        return Err(CompareError::Scenario { pair, base: ha.scenario.clone(), other: hb.scenario.clone() });
    }
    if ha.seed != hb.seed {
        return Err(CompareError::Seed { pair, base: ha.seed, other: hb.seed });
    }
    let keys: BTreeSet<&String> = ha.params.keys().chain(hb.params.keys()).collect();
    // The parameter that set D may differ; records say which it is.
    let scale_key = ha.scaled.as_ref().or(hb.scaled.as_ref()).map(|s| s.param.as_str());
    for key in keys.into_iter().filter(|k| Some(k.as_str()) != scale_key && *k != "variants") {
        let (x, y) = (ha.params.get(key), hb.params.get(key));
        if x != y {
            let show = |v: Option<&String>| v.map_or("unset".to_string(), |v| format!("{v:?}"));
            return Err(CompareError::Param { pair, key: key.clone(), base: show(x), other: show(y) });
        }
    }
    Ok(())
}

/// Compares `base[i]` with `other[i]` for every i.
pub fn compare(base: &[RunData], other: &[RunData], o: &CompareOptions) -> Result<Comparison, CompareError> {
    if o.tolerance_pct.is_nan() || o.tolerance_pct < 0.0 || o.tolerance_pct.is_infinite() {
        return Err(CompareError::Tolerance(o.tolerance_pct));
    }
    if o.max_ks.is_nan() || !(0.0..=1.0).contains(&o.max_ks) {
        return Err(CompareError::MaxKs(o.max_ks));
    }
    if base.is_empty() {
        return Err(CompareError::Empty);
    }
    if base.len() != other.len() {
        return Err(CompareError::Count { base: base.len(), other: other.len() });
    }
    for (i, (a, b)) in base.iter().zip(other).enumerate() {
        check_pair(i + 1, a, b)?;
    }
    let variants: Vec<&String> = base[0]
        .header()
        .variants
        .iter()
        .filter(|v| other.iter().all(|d| d.header().variants.contains(v)))
        .collect();
    let (mut rows, mut skipped, mut unlike) = (Vec::new(), Vec::new(), Vec::new());
    for v in variants {
        // One entry per pair of runs (and repeat) in the pool.
        let (mut pool, mut pool_retx, mut all_faithful) = (Vec::new(), (0, 0), true);
        for (i, (a, b)) in base.iter().zip(other).enumerate() {
            let (ra, rb) = (repeats_of(a, v), repeats_of(b, v));
            for r in ra.symmetric_difference(&rb) {
                let side = if ra.contains(r) { "base" } else { "other" };
                skipped.push(format!("{v}, pair {} repeat {r}: recorded in the {side} run only", i + 1));
            }
            let repeats: Vec<u32> = ra.intersection(&rb).copied().collect();
            for &r in &repeats {
                let (fa, fb) = (flows_of(a, v, r, &o.class_prefix), flows_of(b, v, r, &o.class_prefix));
                if let Some(detail) = workload_difference(&fa, &fb) {
                    return Err(CompareError::Workload {
                        pair: i + 1,
                        variant: v.clone(),
                        repeat: r,
                        detail,
                    });
                }
                let (p, retx) = (pairs(&fa, &fb), retransmitted(&fa, &fb));
                let seed = a.header().seed;
                let runs = if repeats.len() > 1 {
                    format!("seed {seed} repeat {r}")
                } else {
                    format!("seed {seed}")
                };
                if !p.iter().any(|x| x.0.is_some()) || !p.iter().any(|x| x.1.is_some()) {
                    skipped.push(format!(
                        "{v}, {runs}: no completed flow of class {:?}* on one side",
                        o.class_prefix
                    ));
                    continue;
                }
                let m = o.signal_metric.as_deref();
                let (sa, sb) = (signal_path(a, m, v, r), signal_path(b, m, v, r));
                if sa != sb {
                    let said = |p: Option<&'static str>| p.unwrap_or("none recorded");
                    unlike.push(format!(
                        "{v}, {runs}: the daemons' signals came from {} in the base run and from {} in the other",
                        said(sa),
                        said(sb)
                    ));
                }
                let faithful = a.faithful(v, r) != Some(false) && b.faithful(v, r) != Some(false);
                rows.push(row(v, runs, &[&p], retx, faithful, o));
                all_faithful &= faithful;
                pool.push(p);
                pool_retx = (pool_retx.0 + retx.0, pool_retx.1 + retx.1);
            }
        }
        if pool.len() > 1 {
            let runs = format!("pooled ({} runs)", pool.len());
            let units: Vec<&[Pair]> = pool.iter().map(Vec::as_slice).collect();
            rows.push(row(v, runs, &units, pool_retx, all_faithful, o));
        }
    }
    if rows.is_empty() {
        return Err(CompareError::NoFlows { prefix: o.class_prefix.clone() });
    }
    let scales = |s: &[RunData]| -> Vec<u32> { s.iter().map(|d| d.header().dilation().get()).collect() };
    Ok(Comparison {
        scenario: base[0].header().scenario.clone(),
        class_prefix: o.class_prefix.clone(),
        base_scales: scales(base),
        other_scales: scales(other),
        tolerance_pct: o.tolerance_pct,
        max_ks: o.max_ks,
        rows,
        skipped,
        unlike,
    })
}

/// "D = 16" when every run has the same D, else the list.
fn scales_text(s: &[u32]) -> String {
    let set: BTreeSet<&u32> = s.iter().collect();
    let list: Vec<String> = set.iter().map(|d| d.to_string()).collect();
    format!("D = {}", list.join(", "))
}

fn signed_pct(x: f64) -> String {
    if x.is_nan() {
        "—".into()
    } else {
        format!("{x:+.1}%")
    }
}

/// "+1.4% [−3.0, +6.1]": a difference and its interval.
fn diff_with_interval(x: f64, ci: Option<(f64, f64)>) -> String {
    match ci {
        Some((lo, hi)) => format!("{} [{lo:+.1}, {hi:+.1}]", signed_pct(x)),
        None => signed_pct(x),
    }
}

impl Comparison {
    /// The table `lab compare` prints.
    pub fn markdown(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "{}: the completed flows of the classes starting with {:?}, FCT in experiment units; base {} against {}; \
             Δ = other ÷ base − 1 [95% bootstrap interval: {} resamples of the flows paired by id, in blocks of {} in start order; \
             on a pooled row each resample first draws the pairs of runs, with replacement, so a run's own drift is in it]. \
             Retransmitted: flows that retransmitted (base / other). Tail shared: of the base's flows at or above its p99, those at or above the other's too. Goal: mean and p99 within ±{}%, KS ≤ {}.\n",
            self.scenario,
            self.class_prefix,
            scales_text(&self.base_scales),
            scales_text(&self.other_scales),
            RESAMPLES,
            BLOCK,
            self.tolerance_pct,
            self.max_ks
        );
        t.push_str(
            "| variant | runs | flows (base / other) | mean ms | Δ mean | p99 ms | Δ p99 | KS | retransmitted | tail shared | goal |\n",
        );
        t.push_str("|---|---|---|---|---|---|---|---|---|---|---|\n");
        for r in &self.rows {
            let flows = |s: &Side| {
                if s.incomplete > 0 {
                    format!("{} (+{} unfinished)", s.completed, s.incomplete)
                } else {
                    s.completed.to_string()
                }
            };
            let mut goal = if r.missed.is_empty() {
                "met".to_string()
            } else {
                format!("missed: {}", r.missed.join(", "))
            };
            if !r.faithful {
                goal.push_str(" (a run unfaithful)");
            }
            let _ = writeln!(
                t,
                "| {} | {} | {} / {} | {} / {} | {} | {} / {} | {} | {:.3} | {} / {} | {} of {} | {} |",
                r.variant,
                r.runs,
                flows(&r.base),
                flows(&r.other),
                num(r.base.mean_ms),
                num(r.other.mean_ms),
                diff_with_interval(r.mean_diff_pct, r.mean_diff_ci_pct),
                num(r.base.p99_ms),
                num(r.other.p99_ms),
                diff_with_interval(r.p99_diff_pct, r.p99_diff_ci_pct),
                r.ks,
                r.base.retransmitted,
                r.other.retransmitted,
                r.tail_shared,
                r.tail,
                goal
            );
        }
        for s in &self.skipped {
            let _ = writeln!(t, "\nLeft out: {s}.");
        }
        for s in &self.unlike {
            let _ = writeln!(t, "\nNot run alike: {s}.");
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::records::Record;
    use crate::testdata;

    /// A run of `variants` with seed `seed` at D = `scale` whose variant ×
    /// repeat r has short flows 0..fct.len() of 1000 + id bytes taking
    /// fct[id] ms (negative: unfinished), and one long flow.
    fn run(seed: u64, scale: u32, flows: &[(&str, u32, Vec<f64>)]) -> RunData {
        let mut h = testdata::header();
        h.scenario = "lanes-websearch".into();
        h.seed = seed;
        h.params.insert("scale".into(), scale.to_string());
        h.scaled = Some(testdata::scaled(scale));
        h.variants = vec!["mptcp".into(), "repflow".into()];
        let mut d = RunData::default();
        d.push(Record::Run(h));
        for (variant, repeat, fct) in flows {
            for (id, &ms) in fct.iter().enumerate() {
                d.push(Record::Flow(FlowRecord {
                    variant: variant.to_string(),
                    repeat: *repeat,
                    id: id as u64,
                    class: "short (≤100 KB) @0.5".into(),
                    bytes: 1000 + id as u64,
                    start: 0.0,
                    fct_ms: ms.abs() * scale as f64,
                    completed: ms >= 0.0,
                    exp_start: Some(0.0),
                    exp_fct_ms: Some(ms.abs()),
                    lane_bytes: BTreeMap::new(),
                    retrans_bytes: None,
                    capture: None,
                }));
            }
            d.push(Record::Flow(FlowRecord {
                variant: variant.to_string(),
                repeat: *repeat,
                id: 999,
                class: "long @0.5".into(),
                bytes: 10_000_000,
                start: 0.0,
                fct_ms: 5.0,
                completed: true,
                exp_start: None,
                exp_fct_ms: None,
                lane_bytes: BTreeMap::new(),
                retrans_bytes: None,
                capture: None,
            }));
        }
        d
    }

    fn hundred(ms: f64) -> Vec<f64> {
        vec![ms; 100]
    }

    #[test]
    fn pairs_compare_experiment_units_per_seed_and_pooled() {
        // Seed 1: identical in experiment units. Seed 2: the other run is
        // 10% slower in every flow.
        let base = [run(1, 16, &[("mptcp", 0, hundred(2.0))]), run(2, 16, &[("mptcp", 0, hundred(4.0))])];
        let other = [run(1, 64, &[("mptcp", 0, hundred(2.0))]), run(2, 64, &[("mptcp", 0, hundred(4.4))])];
        let c = compare(&base, &other, &CompareOptions::default()).unwrap();
        assert_eq!((c.base_scales.clone(), c.other_scales.clone()), (vec![16, 16], vec![64, 64]));
        let runs: Vec<&str> = c.rows.iter().map(|r| r.runs.as_str()).collect();
        assert_eq!(runs, ["seed 1", "seed 2", "pooled (2 runs)"]);
        let (same, slower, pooled) = (&c.rows[0], &c.rows[1], &c.rows[2]);
        assert_eq!((same.mean_diff_pct, same.p99_diff_pct, same.ks), (0.0, 0.0, 0.0));
        assert!(same.missed.is_empty() && same.faithful);
        assert!((slower.mean_diff_pct - 10.0).abs() < 1e-9 && (slower.p99_diff_pct - 10.0).abs() < 1e-9);
        assert_eq!(slower.ks, 1.0);
        assert_eq!(slower.missed, ["mean", "p99", "KS"]);
        // Pooled: means 3.0 against 3.2; the p99 of 200 flows is the top
        // value on both sides; half the flows moved.
        assert_eq!((pooled.base.completed, pooled.other.completed), (200, 200));
        assert!((pooled.mean_diff_pct - 20.0 / 3.0).abs() < 1e-9, "{pooled:?}");
        assert!((pooled.p99_diff_pct - 10.0).abs() < 1e-9 && pooled.ks == 0.5);
        // The long flow is another class: not counted anywhere.
        let text = c.markdown();
        assert!(text.contains("base D = 16 against D = 64"), "{text}");
        // Every flow 10% slower: every resample says so, the interval is a point.
        assert!(text.contains("| mptcp | seed 2 | 100 / 100 | 4 / 4.40 | +10.0% [+10.0, +10.0] |"), "{text}");
        assert_eq!(same.p99_diff_ci_pct, Some((0.0, 0.0)));
        // Pooled: the runs are drawn too; a quarter of the resamples hold
        // seed 1 twice (+0%), a quarter seed 2 twice (+10%).
        let (lo, hi) = pooled.mean_diff_ci_pct.unwrap();
        assert!(lo.abs() < 1e-9 && (hi - 10.0).abs() < 1e-9, "{pooled:?}");
        assert!(text.contains("missed: mean, p99, KS"), "{text}");
    }

    #[test]
    fn unfinished_flows_are_counted_beside_and_unfaithful_runs_are_said() {
        let mut fct = hundred(2.0);
        fct[7] = -300.0;
        let base = [run(1, 16, &[("mptcp", 0, hundred(2.0)), ("repflow", 0, hundred(1.0))])];
        let mut other = [run(1, 64, &[("mptcp", 0, fct), ("repflow", 0, hundred(1.0))])];
        other[0].push(Record::Fidelity(testdata::fidelity("repflow", 0, false)));
        // Two flows retransmitted in the other run, one of them unfinished.
        other[0].flows[7].retrans_bytes = Some(1448);
        other[0].flows[8].retrans_bytes = Some(2896);
        other[0].flows[9].retrans_bytes = Some(0);
        let c = compare(&base, &other, &CompareOptions::default()).unwrap();
        assert_eq!(c.rows.len(), 2, "one pair: no pooled row");
        assert_eq!((c.rows[0].other.completed, c.rows[0].other.incomplete), (99, 1));
        assert_eq!((c.rows[0].base.retransmitted, c.rows[0].other.retransmitted), (0, 2));
        assert_eq!(c.rows[0].ks, 0.0);
        assert!(c.rows[0].faithful && !c.rows[1].faithful);
        let text = c.markdown();
        assert!(text.contains("100 / 99 (+1 unfinished)"), "{text}");
        assert!(text.contains("| 0.000 | 0 / 2 | 99 of 100 | met |"), "{text}");
        // A repeat one side lacks is said, not compared.
        let more = [run(1, 64, &[("mptcp", 0, hundred(2.0)), ("mptcp", 1, hundred(2.0))])];
        let c = compare(&base, &more, &CompareOptions::default()).unwrap();
        assert_eq!(
            c.skipped,
            [
                "mptcp, pair 1 repeat 1: recorded in the other run only",
                "repflow, pair 1 repeat 0: recorded in the base run only"
            ]
        );
        assert!(c.markdown().contains("Left out: mptcp, pair 1 repeat 1: recorded in the other run only."));
        assert!(text.contains("met (a run unfaithful)"), "{text}");
    }

    #[test]
    fn the_tail_shared_counts_the_same_flows_at_or_above_both_p99s() {
        // 200 flows of 1..200 ms: the p99 is 198.01, the tail flows 198 and
        // 199 (ids). The other run swaps the two slowest with the two
        // fastest: the same p99, a tail of other flows.
        let base_fct: Vec<f64> = (1..=200).map(f64::from).collect();
        let mut swapped = base_fct.clone();
        swapped.swap(0, 199);
        swapped.swap(1, 198);
        let o = CompareOptions::default();
        let base = [run(1, 16, &[("mptcp", 0, base_fct.clone())])];
        let c = compare(&base, &[run(1, 64, &[("mptcp", 0, swapped)])], &o).unwrap();
        assert_eq!((c.rows[0].tail, c.rows[0].tail_shared, c.rows[0].p99_diff_pct), (2, 0, 0.0));
        assert!(c.markdown().contains("| 0 / 0 | 0 of 2 | met |"), "{}", c.markdown());
        let c = compare(&base, &[run(1, 64, &[("mptcp", 0, base_fct)])], &o).unwrap();
        assert_eq!((c.rows[0].tail, c.rows[0].tail_shared), (2, 2));
    }

    #[test]
    fn runs_whose_daemons_took_signals_by_another_path_are_said() {
        use crate::runner::records::Summary;
        let summary = |variant: &str, on_bpf: f64| {
            let metrics = [("daemons_on_bpf @0.5".to_string(), on_bpf)].into_iter().collect();
            Record::Summary(Summary { variant: variant.into(), repeat: 0, metrics, started: 0.0, ended: 1.0 })
        };
        let flows = [("mptcp", 0, hundred(2.0)), ("repflow", 0, hundred(1.0))];
        let (mut base, mut other) = ([run(1, 16, &flows)], [run(1, 48, &flows)]);
        base[0].push(summary("mptcp", 1.0));
        other[0].push(summary("mptcp", 0.0));
        base[0].push(summary("repflow", 1.0));
        other[0].push(summary("repflow", 1.0));
        let o = CompareOptions { signal_metric: Some("daemons_on_bpf".into()), ..CompareOptions::default() };
        assert!(
            compare(&base, &other, &CompareOptions::default()).unwrap().unlike.is_empty(),
            "not asked, not checked"
        );
        let c = compare(&base, &other, &o).unwrap();
        assert_eq!(
            c.unlike,
            ["mptcp, seed 1: the daemons' signals came from the BPF program in the base run and from sock_diag polling in the other"]
        );
        assert!(c.markdown().contains("Not run alike: mptcp, seed 1: the daemons'"), "{}", c.markdown());
        // Without daemons on either side (no figure), nothing to say.
        let c = compare(&[run(1, 16, &flows)], &[run(1, 48, &flows)], &o).unwrap();
        assert!(c.unlike.is_empty());
    }

    #[test]
    fn different_workloads_are_refused_with_the_difference() {
        let o = CompareOptions::default();
        let a = run(1, 16, &[("mptcp", 0, hundred(2.0))]);
        let err = |b: RunData| compare(std::slice::from_ref(&a), &[b], &o).unwrap_err();
        assert_eq!(err(run(2, 64, &[])), CompareError::Seed { pair: 1, base: 1, other: 2 });
        let mut b = run(1, 64, &[("mptcp", 0, hundred(2.0))]);
        b.header.as_mut().unwrap().params.insert("rate".into(), "1gbit".into());
        let e = err(b).to_string();
        assert!(e.contains("parameter rate") && e.contains("\"500mbit\"") && e.contains("\"1gbit\""), "{e}");
        let e = err(run(1, 64, &[("mptcp", 0, vec![2.0; 99])])).to_string();
        assert!(e.contains("mptcp repeat 0") && e.contains("flow 99 is only in the base run"), "{e}");
        let mut b = run(1, 64, &[("mptcp", 0, hundred(2.0))]);
        b.flows[3].bytes += 1;
        assert!(err(b).to_string().contains("flow 3 has 1003 bytes in the base run and 1004"));
        assert_eq!(compare(&[], &[], &o).unwrap_err(), CompareError::Empty);
        let bad = CompareOptions { tolerance_pct: -1.0, ..o.clone() };
        assert_eq!(compare(&[], &[], &bad).unwrap_err(), CompareError::Tolerance(-1.0));
        let bad = CompareOptions { max_ks: 1.5, ..o.clone() };
        assert_eq!(compare(&[], &[], &bad).unwrap_err(), CompareError::MaxKs(1.5));
        assert_eq!(
            compare(std::slice::from_ref(&a), &[], &o).unwrap_err(),
            CompareError::Count { base: 1, other: 0 }
        );
        let none = CompareOptions { class_prefix: "medium".into(), ..o.clone() };
        let b = run(1, 64, &[("mptcp", 0, hundred(2.0))]);
        assert_eq!(
            compare(std::slice::from_ref(&a), &[b], &none).unwrap_err(),
            CompareError::NoFlows { prefix: "medium".into() }
        );
    }
}
