//! Statistics used by the lab and the reports: percentiles, medians of repeats,
//! min/max whiskers, CDF points, a least-squares line, the KS distance and a
//! paired bootstrap interval.
//!
//! Percentiles use linear interpolation between closest ranks (the "R-7"
//! definition, numpy's default), so they are exact on small known inputs.

use crate::rng::Rng;
use serde::{Deserialize, Serialize};

/// Percentile `p` in [0, 100] of `values` (any order). `None` when empty or p out of range.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() || !(0.0..=100.0).contains(&p) || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    Some(percentile_sorted(&v, p))
}

/// As [`percentile`] on already sorted, non-empty input.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    if n == 1 {
        return sorted[0];
    }
    let h = (n - 1) as f64 * p / 100.0;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

pub fn median(values: &[f64]) -> Option<f64> {
    percentile(values, 50.0)
}

pub fn mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        None
    } else {
        Some(values.iter().sum::<f64>() / values.len() as f64)
    }
}

/// Two-sample Kolmogorov–Smirnov distance: the largest gap between the
/// empirical CDFs of `a` and `b` (0: the same sorted values in the same
/// proportions; 1: every value of one below every value of the other). Tied
/// values step both CDFs at once. `None` when either side is empty or holds
/// a NaN.
pub fn ks_distance(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.is_empty() || b.is_empty() || a.iter().chain(b).any(|v| v.is_nan()) {
        return None;
    }
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (mut i, mut j, mut d) = (0usize, 0usize, 0f64);
    while i < a.len() || j < b.len() {
        // The next value on either side; both CDFs take every copy of it.
        let x = match (a.get(i), b.get(j)) {
            (Some(&x), Some(&y)) => x.min(y),
            (Some(&x), None) | (None, Some(&x)) => x,
            (None, None) => unreachable!("the loop condition"),
        };
        while a.get(i).is_some_and(|&v| v <= x) {
            i += 1;
        }
        while b.get(j).is_some_and(|&v| v <= x) {
            j += 1;
        }
        d = d.max((i as f64 / na - j as f64 / nb).abs());
    }
    Some(d)
}

/// A flow's value in each of two runs (`None`: it has none on that side,
/// e.g. it did not finish there).
pub type Pair = (Option<f64>, Option<f64>);

/// Moving-block bootstrap interval of `stat(b) ÷ stat(a) − 1` for two runs
/// of the same items (flows), paired by index and in the order they came,
/// over one or more such pairs of runs pooled (`runs`: one slice of pairs
/// per pair of runs, e.g. per seed). Each resample draws as many pairs of
/// runs as there are, with replacement (a single one is not drawn: it is
/// all there is), and strings together, for each drawn run, blocks of
/// `block` consecutive pairs starting anywhere until it holds at least that
/// run's pairs; then it takes `stat` over each side's values that are
/// present (`None`: the item has no value on that side, e.g. an unfinished
/// flow). Pairing keeps what the two sides share (the same flow is long in
/// both) out of the interval; blocks keep neighbours together, whose fates
/// are not independent (flows of one congestion episode); drawing whole
/// runs puts in what no resampling of one run's flows can: a run's own
/// drift (all its flows a little slower than the same flows in another run
/// of the same workload). `block` 1 is the plain bootstrap; `block` ≥ a
/// run's pairs gives back those pairs. Returns the central `level` (0 <
/// level < 1) of the resampled ratios; `None` when there are no pairs or no
/// resamples, or when fewer than half of the resamples give a finite ratio.
pub fn paired_ratio_interval(
    runs: &[&[Pair]],
    block: usize,
    stat: impl Fn(&[f64]) -> Option<f64>,
    resamples: usize,
    level: f64,
    rng: &mut Rng,
) -> Option<(f64, f64)> {
    let total: usize = runs.iter().map(|r| r.len()).sum();
    if total == 0 || resamples == 0 || !(level > 0.0 && level < 1.0) {
        return None;
    }
    // A hint only: a resample holds about `total` pairs.
    let cap = total + block.min(total);
    let (mut a, mut b) = (Vec::with_capacity(cap), Vec::with_capacity(cap));
    let mut ratios = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        a.clear();
        b.clear();
        for _ in 0..runs.len() {
            let run = match runs {
                [only] => only,
                _ => runs[rng.below(runs.len() as u64) as usize],
            };
            if run.is_empty() {
                continue;
            }
            let block = block.clamp(1, run.len());
            let starts = (run.len() - block + 1) as u64;
            for _ in 0..run.len().div_ceil(block) {
                let from = rng.below(starts) as usize;
                for &(x, y) in &run[from..from + block] {
                    a.extend(x);
                    b.extend(y);
                }
            }
        }
        if let (Some(sa), Some(sb)) = (stat(&a), stat(&b)) {
            let r = sb / sa - 1.0;
            if r.is_finite() {
                ratios.push(r);
            }
        }
    }
    if ratios.len() * 2 < resamples {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - level) / 2.0 * 100.0;
    Some((percentile_sorted(&ratios, tail), percentile_sorted(&ratios, 100.0 - tail)))
}

/// Median with min and max over repeats: what the bar plots' whiskers show.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
}

impl Spread {
    pub fn of(values: &[f64]) -> Option<Spread> {
        let median = median(values)?;
        Some(Spread {
            n: values.len(),
            median,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            mean: mean(values)?,
        })
    }
}

/// Empirical CDF as (value, fraction ≤ value) points, one per sample, sorted.
pub fn ecdf(values: &[f64]) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len() as f64;
    v.iter().enumerate().map(|(i, x)| (*x, (i + 1) as f64 / n)).collect()
}

/// Least-squares line y = a + b·x. `None` with fewer than two distinct x.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Line {
    pub intercept: f64,
    pub slope: f64,
    pub r2: f64,
}

pub fn linear_fit(points: &[(f64, f64)]) -> Option<Line> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let syy: f64 = points.iter().map(|p| (p.1 - my).powi(2)).sum();
    let sse: f64 = points.iter().map(|p| (p.1 - intercept - slope * p.0).powi(2)).sum();
    let r2 = if syy == 0.0 { 1.0 } else { 1.0 - sse / syy };
    Some(Line { intercept, slope, r2 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ks_distance_is_the_largest_gap_between_the_two_step_functions() {
        assert_eq!(ks_distance(&[3.0, 1.0, 2.0], &[1.0, 2.0, 3.0]), Some(0.0));
        assert_eq!(ks_distance(&[1.0, 2.0], &[3.0, 4.0, 5.0]), Some(1.0));
        // After 2: a at 2/4, b at 0; after 4: a at 1, b at 2/4.
        assert_eq!(ks_distance(&[1.0, 2.0, 3.0, 4.0], &[3.0, 4.0, 5.0, 6.0]), Some(0.5));
        // Ties step both sides at once: after 1, a is at 1 and b at 1/2 (a
        // merge that took a's two 1s before b's would see a gap of 1).
        assert_eq!(ks_distance(&[1.0, 1.0], &[1.0, 2.0]), Some(0.5));
        assert_eq!(ks_distance(&[5.0; 3], &[5.0; 7]), Some(0.0));
        // Unequal sizes: a = {1}, b = {1, 2, 3, 4}: after 1, 1 against 1/4.
        assert_eq!(ks_distance(&[1.0], &[1.0, 2.0, 3.0, 4.0]), Some(0.75));
        assert_eq!(ks_distance(&[], &[1.0]), None);
        assert_eq!(ks_distance(&[1.0], &[f64::NAN]), None);
    }

    #[test]
    fn paired_ratio_interval_follows_the_pairs() {
        let p99 = |v: &[f64]| percentile(v, 99.0);
        let base: Vec<f64> = (1..=500).map(|i| f64::from(i % 97) + 1.0).collect();
        // Every flow exactly 10% slower on the other side: every resample's
        // ratio is 1.1, whichever flows it drew.
        let slower: Vec<_> = base.iter().map(|&x| (Some(x), Some(x * 1.1))).collect();
        let (lo, hi) = paired_ratio_interval(&[&slower], 1, p99, 200, 0.95, &mut Rng::seeded(1)).unwrap();
        assert!((lo - 0.1).abs() < 1e-12 && (hi - 0.1).abs() < 1e-12, "{lo} {hi}");
        let same: Vec<_> = base.iter().map(|&x| (Some(x), Some(x))).collect();
        assert_eq!(
            paired_ratio_interval(&[&same], 1, mean, 200, 0.95, &mut Rng::seeded(1)),
            Some((0.0, 0.0))
        );
        // Independent noise on each side: the interval holds the observed
        // ratio, the same seed gives the same interval, and 100× the pairs
        // give a much narrower one (~10× in theory).
        let mut r = Rng::seeded(7);
        let mut noisy = |n: usize| -> Vec<(Option<f64>, Option<f64>)> {
            (0..n).map(|_| (Some(r.exp(5.0)), Some(r.exp(5.0)))).collect()
        };
        let (few, many) = (noisy(200), noisy(20_000));
        let ci = |p: &[(Option<f64>, Option<f64>)], seed| {
            paired_ratio_interval(&[p], 1, mean, 400, 0.95, &mut Rng::seeded(seed))
        };
        let (lo, hi) = ci(&few, 3).unwrap();
        let a: Vec<f64> = few.iter().filter_map(|p| p.0).collect();
        let b: Vec<f64> = few.iter().filter_map(|p| p.1).collect();
        let observed = mean(&b).unwrap() / mean(&a).unwrap() - 1.0;
        assert!(lo < observed && observed < hi, "{lo} {observed} {hi}");
        assert_eq!(ci(&few, 3), Some((lo, hi)));
        let (mlo, mhi) = ci(&many, 3).unwrap();
        assert!((hi - lo) > 4.0 * (mhi - mlo) && mlo < 0.0 && mhi > 0.0, "{lo} {hi} / {mlo} {mhi}");
        // Blocks: one block as long as the pairs gives the pairs back, so
        // the interval is the observed ratio; neighbours that move together
        // (runs of fifty flows 20% slower or faster on the other side) widen
        // the interval drawn in blocks of fifty beyond the plain bootstrap's.
        let (lo, hi) =
            paired_ratio_interval(&[&few], few.len(), mean, 50, 0.95, &mut Rng::seeded(1)).unwrap();
        assert!((lo - observed).abs() < 1e-12 && (hi - observed).abs() < 1e-12, "{lo} {observed} {hi}");
        let episodes: Vec<_> = (0..2000)
            .map(|i| {
                let x = 1.0 + f64::from(i % 7);
                (Some(x), Some(x * if (i / 50) % 2 == 0 { 1.2 } else { 0.8 }))
            })
            .collect();
        let width = |block| {
            let (lo, hi) =
                paired_ratio_interval(&[&episodes], block, mean, 400, 0.95, &mut Rng::seeded(5)).unwrap();
            hi - lo
        };
        assert!(width(50) > 2.0 * width(1), "{} {}", width(50), width(1));
        // A side without any value, no pairs, a level of 1: no interval.
        let mut empty = same.clone();
        empty.iter_mut().for_each(|p| p.1 = None);
        assert_eq!(paired_ratio_interval(&[&empty], 1, mean, 100, 0.95, &mut Rng::seeded(1)), None);
        assert_eq!(paired_ratio_interval(&[], 1, mean, 100, 0.95, &mut Rng::seeded(1)), None);
        assert_eq!(paired_ratio_interval(&[&same], 1, mean, 100, 1.0, &mut Rng::seeded(1)), None);
    }

    #[test]
    fn paired_ratio_interval_draws_whole_runs_when_pooled() {
        let mean_of = |v: &[f64]| mean(v);
        let base: Vec<f64> = (0..1000).map(|i| 1.0 + f64::from(i % 13)).collect();
        let scaled = |k: f64| -> Vec<Pair> { base.iter().map(|&x| (Some(x), Some(x * k))).collect() };
        let one = scaled(1.05);
        // Two runs, one 10% slower on the other side throughout, the other
        // 10% faster: the flows of the two pooled say −0.0%, and blocks of
        // the pooled flows see little else; drawing the runs draws each one
        // twice in a quarter of the resamples, so the interval reaches ±10%.
        let (up, down) = (scaled(1.1), scaled(0.9));
        let pooled: Vec<Pair> = up.iter().chain(&down).copied().collect();
        let (plo, phi) =
            paired_ratio_interval(&[&pooled], 32, mean_of, 400, 0.95, &mut Rng::seeded(2)).unwrap();
        assert!(plo > -0.05 && phi < 0.05, "{plo} {phi}");
        let (lo, hi) =
            paired_ratio_interval(&[&up, &down], 32, mean_of, 400, 0.95, &mut Rng::seeded(2)).unwrap();
        assert!((lo + 0.1).abs() < 1e-9 && (hi - 0.1).abs() < 1e-9, "{lo} {hi}");
        // Runs that agree (both 5% slower) leave the interval a point.
        let (lo, hi) =
            paired_ratio_interval(&[&one, &one], 32, mean_of, 100, 0.95, &mut Rng::seeded(3)).unwrap();
        assert!((lo - 0.05).abs() < 1e-9 && (hi - 0.05).abs() < 1e-9, "{lo} {hi}");
        // An empty run among others is drawn as nothing; no pairs at all: none.
        let empty: Vec<Pair> = Vec::new();
        assert!(paired_ratio_interval(&[&one, &empty], 32, mean_of, 100, 0.95, &mut Rng::seeded(3)).is_some());
        assert_eq!(
            paired_ratio_interval(&[&empty, &empty], 32, mean_of, 100, 0.95, &mut Rng::seeded(3)),
            None
        );
        assert_eq!(paired_ratio_interval(&[], 32, mean_of, 100, 0.95, &mut Rng::seeded(3)), None);
        // A block longer than any run is each run whole (no overflow).
        let (lo, hi) =
            paired_ratio_interval(&[&one], usize::MAX, mean_of, 10, 0.95, &mut Rng::seeded(3)).unwrap();
        assert!((lo - 0.05).abs() < 1e-9 && (hi - 0.05).abs() < 1e-9, "{lo} {hi}");
    }

    #[test]
    fn percentiles_exact() {
        let v = [3.0, 1.0, 4.0, 1.0, 5.0];
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&v, 100.0), Some(5.0));
        assert_eq!(median(&v), Some(3.0));
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 50.0), Some(2.5));
        assert_eq!(percentile(&[10.0, 20.0], 99.0), Some(19.9));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[1.0], 101.0), None);
    }

    #[test]
    fn spread_and_cdf() {
        let s = Spread::of(&[2.0, 8.0, 5.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.mean, s.n), (5.0, 2.0, 8.0, 5.0, 3));
        assert_eq!(ecdf(&[3.0, 1.0]), vec![(1.0, 0.5), (3.0, 1.0)]);
    }

    #[test]
    fn line_fit() {
        // T_n = T (0.3 + 0.7 n) with T = 10: points exactly on the line.
        let pts: Vec<(f64, f64)> = (1..=5).map(|n| (n as f64, 10.0 * (0.3 + 0.7 * n as f64))).collect();
        let l = linear_fit(&pts).unwrap();
        assert!(
            (l.intercept - 3.0).abs() < 1e-9 && (l.slope - 7.0).abs() < 1e-9 && (l.r2 - 1.0).abs() < 1e-12
        );
        assert!(linear_fit(&[(1.0, 1.0), (1.0, 2.0)]).is_none());
    }
}
