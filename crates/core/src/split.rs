//! Split-TCP placement planner: which relays to chain, in which order, and the
//! throughput to expect ([SplitTCP], Masuya et al.).
//!
//! The model is the paper's: one TCP connection reaches `T = rwin / RTT`
//! (eq. 1); splitting it at relays into segments makes the segment with the
//! largest RTT the bottleneck, and every relay costs a fixed share of `T`
//! (eq. 2, 3, 10). So the planner maximises `RTT_direct / RTT_max - c·(n-1)`
//! over the ordered choices of relays, where `c` is the per-relay overhead as
//! a fraction of `T` (0.3 fitted in the paper for Dante; ours is configurable).
//! The best placement equalises segment RTTs (eq. 5).
//!
//! This module is pure: it takes RTTs (given or measured elsewhere) and
//! returns a decision. It does not probe, resolve names or start relays.

use std::time::Duration;

/// Errors in the planner's inputs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("RTT of {what} must be positive and finite, got {value:?}")]
    BadRtt { what: String, value: Duration },
    #[error("candidate {name:?} is {rtt:?} from the client, not inside the {total:?} path")]
    OffPath { name: String, rtt: Duration, total: Duration },
    #[error("duplicate candidate name {0:?}")]
    Duplicate(String),
    #[error("per-relay overhead must be in [0, 1), got {0}")]
    BadOverhead(f64),
    #[error("RTT matrix must be square over client, candidates and server ({expected} x {expected}), got {got} rows")]
    BadMatrix { expected: usize, got: usize },
    #[error(
        "search too large: {candidates} candidates with up to {max_relays} relays; lower the relay limit"
    )]
    TooLarge { candidates: usize, max_relays: usize },
}

/// RTTs between the client (node 0), the candidate relays (nodes 1..=m) and
/// the server (node m+1).
#[derive(Debug, Clone, PartialEq)]
pub struct PathModel {
    names: Vec<String>,
    /// Seconds; symmetric is not required (row = from, column = to).
    rtt: Vec<Vec<f64>>,
}

fn check_rtt(what: &str, d: Duration) -> Result<f64, PlanError> {
    let s = d.as_secs_f64();
    if s > 0.0 && s.is_finite() {
        Ok(s)
    } else {
        Err(PlanError::BadRtt { what: what.to_string(), value: d })
    }
}

fn check_names<'a>(names: impl Iterator<Item = &'a str>) -> Result<(), PlanError> {
    let mut seen = std::collections::BTreeSet::new();
    for n in names {
        if !seen.insert(n) {
            return Err(PlanError::Duplicate(n.to_string()));
        }
    }
    Ok(())
}

impl PathModel {
    /// Candidates that lie on the client–server path, each given by its RTT
    /// from the client; the RTT between two points on the path is the
    /// difference of their positions, and the path's RTT is the sum of its
    /// segments (eq. 4).
    pub fn on_path(total: Duration, candidates: &[(String, Duration)]) -> Result<PathModel, PlanError> {
        let total_s = check_rtt("the client-server path", total)?;
        check_names(candidates.iter().map(|(n, _)| n.as_str()))?;
        let mut pos = vec![0.0];
        for (name, rtt) in candidates {
            let p = check_rtt(name, *rtt)?;
            if p >= total_s {
                return Err(PlanError::OffPath { name: name.clone(), rtt: *rtt, total });
            }
            pos.push(p);
        }
        pos.push(total_s);
        let rtt = pos.iter().map(|a| pos.iter().map(|b| (a - b).abs()).collect()).collect();
        Ok(PathModel { names: candidates.iter().map(|(n, _)| n.clone()).collect(), rtt })
    }

    /// Measured pairwise RTTs: `rtt[i][j]` over nodes client, candidates in
    /// `names` order, server. The diagonal is ignored.
    pub fn from_matrix(names: Vec<String>, rtt: &[Vec<Duration>]) -> Result<PathModel, PlanError> {
        check_names(names.iter().map(|n| n.as_str()))?;
        let n = names.len() + 2;
        if rtt.len() != n || rtt.iter().any(|row| row.len() != n) {
            return Err(PlanError::BadMatrix { expected: n, got: rtt.len() });
        }
        let mut m = vec![vec![0.0; n]; n];
        for i in 0..n {
            for j in 0..n {
                if i != j {
                    m[i][j] = check_rtt(&format!("link {i}->{j}"), rtt[i][j])?;
                }
            }
        }
        Ok(PathModel { names, rtt: m })
    }

    /// Candidate names, in input order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    fn direct(&self) -> f64 {
        self.rtt[0][self.names.len() + 1]
    }

    /// Segment RTTs (seconds) of the chain client → relays (candidate
    /// indices) → server.
    fn segments(&self, relays: &[usize]) -> Vec<f64> {
        let server = self.names.len() + 1;
        let mut out = Vec::with_capacity(relays.len() + 1);
        let mut at = 0;
        for &r in relays {
            out.push(self.rtt[at][r + 1]);
            at = r + 1;
        }
        out.push(self.rtt[at][server]);
        out
    }
}

/// Predicted throughput of a chain relative to the direct path (`T_n / T`).
///
/// [SplitTCP] eq. (1)–(3) and (10): `T_n = rwin/RTT_max − c·T·(n−1)` with
/// `T = rwin/RTT_direct`, so `T_n/T = RTT_direct/RTT_max − c·(n−1)`.
/// An empty `segments` is treated as the direct path.
pub fn predict_ratio(direct: Duration, segments: &[Duration], overhead: f64) -> f64 {
    let d = direct.as_secs_f64();
    let max = segments.iter().map(|s| s.as_secs_f64()).fold(0.0, f64::max);
    if segments.is_empty() || max <= 0.0 {
        return 1.0;
    }
    ratio(d, max, segments.len(), overhead)
}

fn ratio(direct: f64, rtt_max: f64, n_segments: usize, overhead: f64) -> f64 {
    // [SplitTCP] eq. (2) with f(n-1) = c·T·(n-1), eq. (10)
    direct / rtt_max - overhead * (n_segments.saturating_sub(1)) as f64
}

/// The ideal of `n` equal segments: `T_n / T = n − c·(n−1)`.
///
/// [SplitTCP] eq. (5)–(6); with c = 0.3 it is the paper's fit `0.3 + 0.7·n` (eq. 8).
pub fn equal_split_ratio(n_segments: usize, overhead: f64) -> f64 {
    let n = n_segments.max(1) as f64;
    n - overhead * (n - 1.0)
}

/// Where `n` equal segments would put the relays on a path of RTT `total`:
/// at `k·total/n` from the client, k = 1..n-1 ([SplitTCP] eq. 5).
pub fn ideal_positions(total: Duration, n_segments: usize) -> Vec<Duration> {
    let n = n_segments.max(1) as u32;
    (1..n).map(|k| total * k / n).collect()
}

/// Planner settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanParams {
    /// At most this many relays in the chain.
    pub max_relays: usize,
    /// Per-relay cost as a fraction of the direct throughput ([SplitTCP]: 0.3).
    pub overhead: f64,
}

impl Default for PlanParams {
    fn default() -> Self {
        PlanParams { max_relays: 4, overhead: 0.3 }
    }
}

/// One evaluated chain.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Chain {
    /// Candidate indices, client side first.
    pub relays: Vec<usize>,
    /// Their names, client side first.
    pub names: Vec<String>,
    /// Segment RTTs, client side first.
    pub segments: Vec<Duration>,
    /// Predicted `T_n / T` (1.0 = as fast as the direct path).
    pub ratio: f64,
    /// What `segments.len()` equal segments would give (eq. 6), for comparison.
    pub ideal_ratio: f64,
}

/// The planner's answer: the best chain and, for each relay count, the best
/// chain with exactly that many relays.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Plan {
    pub direct_rtt: Duration,
    pub overhead: f64,
    pub best: Chain,
    /// Index k holds the best chain with k relays (k = 0 is the direct path),
    /// for the counts that were reachable.
    pub by_count: Vec<Chain>,
}

/// Upper bound on chains evaluated, so a careless input cannot hang the CLI.
const MAX_EVALUATED: u64 = 5_000_000;

/// Chooses relays and their order to maximise predicted throughput.
///
/// Exhaustive over ordered choices, pruned by the bound that adding relays
/// never lowers the largest segment seen so far and always adds overhead.
/// Ties go to fewer relays, then to the lower total RTT.
pub fn plan(model: &PathModel, params: PlanParams) -> Result<Plan, PlanError> {
    if !(0.0..1.0).contains(&params.overhead) || !params.overhead.is_finite() {
        return Err(PlanError::BadOverhead(params.overhead));
    }
    let m = model.names.len();
    let max_relays = params.max_relays.min(m);
    let mut count: u64 = 1;
    let mut term: u64 = 1;
    for k in 0..max_relays {
        term = term.saturating_mul((m - k) as u64);
        count = count.saturating_add(term);
    }
    if count > MAX_EVALUATED {
        return Err(PlanError::TooLarge { candidates: m, max_relays });
    }
    let mut search = Search {
        model,
        overhead: params.overhead,
        max_relays,
        by_count: vec![None; max_relays + 1],
        used: vec![false; m],
        path: Vec::new(),
    };
    search.dfs(0, 0.0);
    let by_count: Vec<Chain> = search.by_count.into_iter().flatten().collect();
    let mut best = by_count[0].clone();
    for c in &by_count[1..] {
        if better(c, &best) {
            best = c.clone();
        }
    }
    Ok(Plan {
        direct_rtt: Duration::from_secs_f64(model.direct()),
        overhead: params.overhead,
        best,
        by_count,
    })
}

const EPS: f64 = 1e-9;

fn total(c: &Chain) -> Duration {
    c.segments.iter().sum()
}

/// Strictly better: higher ratio; on a tie fewer relays; then lower total RTT.
fn better(a: &Chain, b: &Chain) -> bool {
    if a.ratio > b.ratio + EPS {
        return true;
    }
    if a.ratio < b.ratio - EPS {
        return false;
    }
    (a.relays.len(), total(a)) < (b.relays.len(), total(b))
}

struct Search<'a> {
    model: &'a PathModel,
    overhead: f64,
    max_relays: usize,
    by_count: Vec<Option<Chain>>,
    used: Vec<bool>,
    path: Vec<usize>,
}

impl Search<'_> {
    fn dfs(&mut self, at: usize, max_so_far: f64) {
        let k = self.path.len();
        let server = self.model.names.len() + 1;
        let last = self.model.rtt[at][server];
        let rtt_max = max_so_far.max(last);
        let chain = self.chain(rtt_max);
        match &self.by_count[k] {
            Some(b) if !better(&chain, b) => {}
            _ => self.by_count[k] = Some(chain),
        }
        if k == self.max_relays {
            return;
        }
        for r in 0..self.model.names.len() {
            if self.used[r] {
                continue;
            }
            let seg = self.model.rtt[at][r + 1];
            let bound_max = max_so_far.max(seg);
            // Prune: any extension has RTT_max >= bound_max and >= k+1 relays.
            let bound = ratio(self.model.direct(), bound_max, k + 2, self.overhead);
            // Only prune when every longer count already has a better chain, so
            // `by_count` stays exact.
            let beaten = (k + 1..=self.max_relays)
                .all(|c| matches!(&self.by_count[c], Some(b) if b.ratio > bound + EPS));
            if beaten {
                continue;
            }
            self.used[r] = true;
            self.path.push(r);
            self.dfs(r + 1, bound_max);
            self.path.pop();
            self.used[r] = false;
        }
    }

    fn chain(&self, rtt_max: f64) -> Chain {
        let segs = self.model.segments(&self.path);
        let n = segs.len();
        Chain {
            relays: self.path.clone(),
            names: self.path.iter().map(|&r| self.model.names[r].clone()).collect(),
            segments: segs.iter().map(|&s| Duration::from_secs_f64(s)).collect(),
            ratio: ratio(self.model.direct(), rtt_max, n, self.overhead),
            ideal_ratio: equal_split_ratio(n, self.overhead),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn cands(list: &[(&str, u64)]) -> Vec<(String, Duration)> {
        list.iter().map(|(n, r)| (n.to_string(), ms(*r))).collect()
    }

    #[test]
    fn equal_split_prediction_is_n_t_minus_overhead() {
        // [SplitTCP] eq. (6) and the fit eq. (8): 0.3 + 0.7 n with c = 0.3.
        for n in 1..=5 {
            let want = 0.3 + 0.7 * n as f64;
            assert!((equal_split_ratio(n, 0.3) - want).abs() < 1e-12, "n={n}");
            let segs = vec![ms(50) / n as u32; n];
            assert!((predict_ratio(ms(50), &segs, 0.3) - want).abs() < 1e-6, "n={n}");
        }
        assert!((equal_split_ratio(4, 0.0) - 4.0).abs() < 1e-12);
    }

    #[test]
    fn uneven_two_segment_splits_rank_as_in_table_4() {
        // Table 4 (Dante FTP, MB/s): 40/10 12.4, 30/20 16.3, 25/25 17.7, 20/30 16.4, 10/40 12.8.
        let splits = [(40, 10), (30, 20), (25, 25), (20, 30), (10, 40)];
        let pred: Vec<f64> =
            splits.iter().map(|&(a, b)| predict_ratio(ms(50), &[ms(a), ms(b)], 0.3)).collect();
        let best = pred.iter().cloned().fold(f64::MIN, f64::max);
        assert_eq!(pred[2], best, "25/25 must be best: {pred:?}");
        assert!(pred[1] < pred[2] && pred[3] < pred[2]);
        assert!(pred[0] < pred[1] && pred[4] < pred[3]);
        // The model is symmetric in the order of segments.
        assert!((pred[0] - pred[4]).abs() < 1e-12 && (pred[1] - pred[3]).abs() < 1e-12);
        // 25/25 predicts 2 - 0.3 = 1.7x, the paper measured 17.7/10.4 = 1.70x.
        assert!((pred[2] - 1.7).abs() < 1e-9);
    }

    #[test]
    fn planner_picks_the_candidate_nearest_the_middle_for_one_relay() {
        let model = PathModel::on_path(ms(50), &cands(&[("a", 10), ("b", 24), ("c", 40)])).unwrap();
        let p = plan(&model, PlanParams { max_relays: 1, overhead: 0.3 }).unwrap();
        assert_eq!(p.best.names, vec!["b"]);
        assert_eq!(p.best.segments, vec![ms(24), ms(26)]);
        assert_eq!(p.by_count.len(), 2);
        assert_eq!(p.by_count[0].ratio, 1.0);
    }

    #[test]
    fn planner_chooses_equal_thirds_in_path_order() {
        // Candidates given out of order; the chain must follow the path.
        let model = PathModel::on_path(ms(60), &cands(&[("p40", 40), ("p10", 10), ("p20", 20), ("p30", 30)]))
            .unwrap();
        let p = plan(&model, PlanParams { max_relays: 2, overhead: 0.1 }).unwrap();
        assert_eq!(p.best.names, vec!["p20", "p40"]);
        assert!((p.best.ratio - equal_split_ratio(3, 0.1)).abs() < 1e-9);
    }

    #[test]
    fn the_example_of_the_cli_help_uses_all_three() {
        let model = PathModel::on_path(ms(50), &cands(&[("p1", 12), ("p2", 25), ("p3", 37)])).unwrap();
        let p = plan(&model, PlanParams { max_relays: 4, overhead: 0.3 }).unwrap();
        assert_eq!(p.best.names, vec!["p1", "p2", "p3"]);
        // Segments 12, 13, 12, 13 ms: ratio = 50/13 - 0.9.
        assert!((p.best.ratio - (50.0 / 13.0 - 0.9)).abs() < 1e-9);
    }

    #[test]
    fn a_costly_relay_is_not_worth_it() {
        // With overhead 0.95 a second segment gains 2 - 0.95 = 1.05 only at an equal
        // split; at 40/10 it loses (1.25 - 0.95 = 0.3 < 1).
        let model = PathModel::on_path(ms(50), &cands(&[("x", 40)])).unwrap();
        let p = plan(&model, PlanParams { max_relays: 3, overhead: 0.95 }).unwrap();
        assert!(p.best.relays.is_empty());
        assert_eq!(p.best.ratio, 1.0);
    }

    #[test]
    fn matrix_with_a_detour_is_handled() {
        // Client 0, relays a (1), b (2), server 3. Going via b is a detour.
        let r = |v: [u64; 4]| v.iter().map(|&x| ms(x)).collect::<Vec<_>>();
        let m = vec![r([0, 20, 45, 40]), r([20, 0, 30, 20]), r([45, 30, 0, 40]), r([40, 20, 40, 0])];
        let model = PathModel::from_matrix(vec!["a".into(), "b".into()], &m).unwrap();
        let p = plan(&model, PlanParams { max_relays: 2, overhead: 0.3 }).unwrap();
        assert_eq!(p.best.names, vec!["a"]);
        assert!((p.best.ratio - (40.0 / 20.0 - 0.3)).abs() < 1e-9);
    }

    #[test]
    fn bad_inputs_are_errors() {
        assert!(matches!(PathModel::on_path(ms(50), &cands(&[("x", 50)])), Err(PlanError::OffPath { .. })));
        assert!(matches!(PathModel::on_path(ms(0), &[]), Err(PlanError::BadRtt { .. })));
        assert!(matches!(
            PathModel::on_path(ms(50), &cands(&[("x", 5), ("x", 6)])),
            Err(PlanError::Duplicate(_))
        ));
        let model = PathModel::on_path(ms(50), &[]).unwrap();
        assert!(matches!(
            plan(&model, PlanParams { max_relays: 1, overhead: 1.5 }),
            Err(PlanError::BadOverhead(_))
        ));
        assert!(matches!(
            PathModel::from_matrix(vec!["a".into()], &vec![vec![ms(1); 3]; 2]),
            Err(PlanError::BadMatrix { .. })
        ));
    }

    #[test]
    fn ideal_positions_split_evenly() {
        assert_eq!(ideal_positions(ms(50), 5), vec![ms(10), ms(20), ms(30), ms(40)]);
        assert!(ideal_positions(ms(50), 1).is_empty());
    }

    proptest::proptest! {
        #[test]
        fn the_plan_never_loses_to_the_direct_path_or_to_its_own_alternatives(
            pos in proptest::collection::vec(1u64..100, 0..6),
            overhead in 0.0f64..0.99,
            max_relays in 0usize..5,
        ) {
            let list: Vec<(String, Duration)> = pos.iter().enumerate().map(|(i, p)| (format!("c{i}"), ms(*p))).collect();
            let model = PathModel::on_path(ms(100), &list).unwrap();
            let p = plan(&model, PlanParams { max_relays, overhead }).unwrap();
            proptest::prop_assert!(p.best.ratio >= 1.0 - 1e-9);
            proptest::prop_assert!(p.best.relays.len() <= max_relays);
            for c in &p.by_count {
                proptest::prop_assert!(c.ratio <= p.best.ratio + 1e-9);
                proptest::prop_assert!(c.ratio <= c.ideal_ratio + 1e-9, "no split beats the equal split (eq. 5)");
                let total: Duration = c.segments.iter().sum();
                proptest::prop_assert!(total >= ms(100) - Duration::from_micros(1));
            }
        }
    }

    #[test]
    fn pruned_search_matches_brute_force() {
        // Compare with a plain enumeration on pseudo-random positions.
        let mut rng = crate::rng::Rng::seeded(7);
        for _ in 0..30 {
            let m = 1 + (rng.next_u64() % 6) as usize;
            let list: Vec<(String, Duration)> =
                (0..m).map(|i| (format!("c{i}"), ms(1 + rng.next_u64() % 99))).collect();
            let model = PathModel::on_path(ms(100), &list).unwrap();
            let params = PlanParams { max_relays: 3, overhead: 0.2 };
            let got = plan(&model, params).unwrap();
            let mut best = 1.0f64;
            let mut stack: Vec<Vec<usize>> = vec![vec![]];
            while let Some(p) = stack.pop() {
                let segs: Vec<Duration> =
                    model.segments(&p).into_iter().map(Duration::from_secs_f64).collect();
                best = best.max(predict_ratio(ms(100), &segs, 0.2));
                if p.len() < 3 {
                    for r in 0..m {
                        if !p.contains(&r) {
                            let mut q = p.clone();
                            q.push(r);
                            stack.push(q);
                        }
                    }
                }
            }
            assert!((got.best.ratio - best).abs() < 1e-6, "{} vs {}", got.best.ratio, best);
        }
    }
}
