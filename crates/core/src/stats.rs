//! Statistics used by the lab and the reports: percentiles, medians of repeats,
//! min/max whiskers, CDF points and a least-squares line.
//!
//! Percentiles use linear interpolation between closest ranks (the "R-7"
//! definition, numpy's default), so they are exact on small known inputs.

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
