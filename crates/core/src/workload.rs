//! Seeded, replayable datacenter workloads ([Lanes] ch. 6): flow sizes,
//! Poisson arrivals, and the front-end / back-end host mixes of the thesis.
//!
//! - [`SizeDist`]: fixed sizes, Pareto by shape and mean (scale
//!   `x_m = m·(a−1)/a`), and empirical CDFs with linear interpolation inside
//!   each segment: the DCTCP web-search CDF and the VL2 data-mining CDF
//!   (packets of 1460 B).
//! - [`load_to_rate`]: Poisson rate for a target load, `λ = ρ·C / mean`.
//! - [`Workload`]: an iterator of [`Flow`]s in start order, merged from
//!   [`Stream`]s; the same seed gives the same flows, so every lab run can be
//!   replayed from its recorded seed.
//!
//! It opens no sockets and reads no clock: flow start times are [`Instant`]s
//! from a caller-given origin; the lab turns flows into transfers. The
//! thesis' experiments built from these parts (host mixes, queue buildup)
//! are the lab's (`tcpaccel_lab::engines::workloads`).

pub mod rounds;

use crate::rng::Rng;
use crate::time::Instant;
use crate::units::Rate;
use serde::Serialize;
use std::collections::VecDeque;

/// A host of the lab topology, by index.
pub type HostId = u32;

/// Bad workload parameters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WorkloadError {
    #[error("Pareto shape must be above 1 for a finite mean (got {0})")]
    ParetoShape(f64),
    #[error("mean flow size must be positive and finite (got {0})")]
    Mean(f64),
    #[error("empirical CDF: {0}")]
    Cdf(String),
    #[error("load must be in (0, 1] and the link rate above zero (load {load}, link {link})")]
    Load { load: f64, link: Rate },
    #[error("stream {stream:?}: {reason}")]
    Stream { stream: String, reason: String },
}

/// An empirical flow-size CDF: points (size in bytes, cumulative probability),
/// sampled by inverting it with linear interpolation inside each segment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EmpiricalCdf {
    points: Vec<(f64, f64)>,
}

impl EmpiricalCdf {
    /// Sizes and probabilities must not decrease; probabilities lie in [0, 1]
    /// and the last is 1. A first probability above 0 is a mass at the first size.
    pub fn new(points: Vec<(f64, f64)>) -> Result<Self, WorkloadError> {
        let bad = |m: &str| Err(WorkloadError::Cdf(m.to_string()));
        if points.is_empty() {
            return bad("no points");
        }
        for w in points.windows(2) {
            if w[1].0 < w[0].0 || w[1].1 < w[0].1 {
                return bad("sizes and probabilities must not decrease");
            }
        }
        if points.iter().any(|&(x, p)| !x.is_finite() || x < 0.0 || !(0.0..=1.0).contains(&p)) {
            return bad("sizes must be finite and non-negative, probabilities in [0, 1]");
        }
        if points.last().map(|p| p.1) != Some(1.0) {
            return bad("the last cumulative probability must be 1");
        }
        Ok(EmpiricalCdf { points })
    }

    /// Scales every size (e.g. packets to bytes).
    fn scaled(points: &[(f64, f64)], k: f64) -> Vec<(f64, f64)> {
        points.iter().map(|&(x, p)| (x * k, p)).collect()
    }

    /// DCTCP web search (bytes : cumulative %), as given in anchors.md.
    pub fn dctcp_websearch() -> Self {
        const PTS: [(f64, f64); 12] = [
            (0.0, 0.0),
            (10e3, 0.15),
            (20e3, 0.20),
            (30e3, 0.30),
            (50e3, 0.40),
            (80e3, 0.53),
            (200e3, 0.60),
            (1e6, 0.70),
            (2e6, 0.80),
            (5e6, 0.90),
            (1e7, 0.97),
            (3e7, 1.0),
        ];
        EmpiricalCdf { points: PTS.to_vec() }
    }

    /// VL2 data mining, in packets of 1460 B (as given in anchors.md), in bytes.
    pub fn vl2_datamining() -> Self {
        const PKTS: [(f64, f64); 9] = [
            (1.0, 0.0),
            (1.0, 0.5),
            (2.0, 0.6),
            (3.0, 0.7),
            (7.0, 0.8),
            (267.0, 0.9),
            (2107.0, 0.95),
            (66667.0, 0.99),
            (666667.0, 1.0),
        ];
        EmpiricalCdf { points: Self::scaled(&PKTS, 1460.0) }
    }

    pub fn points(&self) -> &[(f64, f64)] {
        &self.points
    }

    pub fn min(&self) -> f64 {
        self.points[0].0
    }

    pub fn max(&self) -> f64 {
        self.points[self.points.len() - 1].0
    }

    /// Inverse CDF at `u` in [0, 1].
    pub fn quantile(&self, u: f64) -> f64 {
        let pts = &self.points;
        if u <= pts[0].1 {
            return pts[0].0;
        }
        for w in pts.windows(2) {
            let ((x0, p0), (x1, p1)) = (w[0], w[1]);
            if u <= p1 && p1 > p0 {
                return x0 + (u - p0) / (p1 - p0) * (x1 - x0);
            }
        }
        self.max()
    }

    /// P(size ≤ x).
    pub fn cdf(&self, x: f64) -> f64 {
        let pts = &self.points;
        if x < pts[0].0 {
            return 0.0;
        }
        let mut c = pts[0].1;
        for w in pts.windows(2) {
            let ((x0, p0), (x1, p1)) = (w[0], w[1]);
            if x >= x1 {
                c = p1;
            } else if x >= x0 && x1 > x0 {
                return p0 + (x - x0) / (x1 - x0) * (p1 - p0);
            }
        }
        c
    }

    /// Mean of the interpolated distribution: the first point's mass plus,
    /// per segment, its probability times its midpoint.
    pub fn mean(&self) -> f64 {
        let pts = &self.points;
        let mut m = pts[0].1 * pts[0].0;
        for w in pts.windows(2) {
            m += (w[1].1 - w[0].1) * (w[0].0 + w[1].0) / 2.0;
        }
        m
    }
}

/// A flow-size distribution, in bytes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum SizeDist {
    Fixed {
        bytes: u64,
    },
    /// Pareto with shape `a` and scale `x_m`; see [`SizeDist::pareto`].
    Pareto {
        shape: f64,
        scale: f64,
    },
    Empirical {
        cdf: EmpiricalCdf,
    },
}

impl SizeDist {
    /// Pareto with shape `a` > 1 and the given mean: `x_m = mean·(a−1)/a`
    /// ([Lanes] Table 6.1 gives shape and mean).
    pub fn pareto(shape: f64, mean: f64) -> Result<Self, WorkloadError> {
        if !(shape > 1.0 && shape.is_finite()) {
            return Err(WorkloadError::ParetoShape(shape));
        }
        if !(mean > 0.0 && mean.is_finite()) {
            return Err(WorkloadError::Mean(mean));
        }
        Ok(SizeDist::Pareto { shape, scale: mean * (shape - 1.0) / shape })
    }

    pub fn fixed(bytes: u64) -> Self {
        SizeDist::Fixed { bytes }
    }

    /// Expected size in bytes (before rounding to whole bytes).
    pub fn mean(&self) -> f64 {
        match self {
            SizeDist::Fixed { bytes } => *bytes as f64,
            SizeDist::Pareto { shape, scale } => scale * shape / (shape - 1.0),
            SizeDist::Empirical { cdf } => cdf.mean(),
        }
    }

    /// One size, rounded to whole bytes, at least 1.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let x = match self {
            SizeDist::Fixed { bytes } => return (*bytes).max(1),
            // Inverse transform: x_m / U^(1/a) with U in (0, 1].
            SizeDist::Pareto { shape, scale } => scale / (1.0 - rng.next_f64()).powf(1.0 / shape),
            SizeDist::Empirical { cdf } => cdf.quantile(rng.next_f64()),
        };
        if x.is_finite() {
            (x.round() as u64).max(1)
        } else {
            u64::MAX
        }
    }
}

/// Poisson arrival rate (per second) that offers `load` of a link of rate
/// `link` with flows of `mean_bytes`: `λ = ρ·C / (8·mean)`.
pub fn load_to_rate(load: f64, link: Rate, mean_bytes: f64) -> Result<f64, WorkloadError> {
    if !(load > 0.0 && load <= 1.0) || link.0 == 0 {
        return Err(WorkloadError::Load { load, link });
    }
    if !(mean_bytes > 0.0 && mean_bytes.is_finite()) {
        return Err(WorkloadError::Mean(mean_bytes));
    }
    Ok(load * link.0 as f64 / (8.0 * mean_bytes))
}

/// Short flows go to front-end hosts, long ones to back-end hosts ([Lanes] §6.3–6.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowClass {
    Short,
    Long,
}

/// One transfer to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Flow {
    pub id: u64,
    pub start: Instant,
    pub src: HostId,
    pub dst: HostId,
    pub bytes: u64,
    pub class: FlowClass,
}

/// When a stream's jobs arrive.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Arrivals {
    /// Poisson, `per_dst` jobs per second to each destination.
    Poisson { per_dst: f64 },
    /// One job per destination at the workload's origin (a transfer that runs
    /// for the whole experiment).
    AtStart,
}

/// One kind of traffic: jobs to `dsts`, each from random `srcs`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stream {
    pub name: String,
    pub class: FlowClass,
    pub sizes: SizeDist,
    pub arrivals: Arrivals,
    pub dsts: Vec<HostId>,
    pub srcs: Vec<HostId>,
    /// Each job is split into this many flows of equal size from distinct
    /// senders ([Lanes] data mining: 800 MB / n from n nodes); 1 otherwise.
    pub fan_in: u32,
}

struct StreamState {
    spec: Stream,
    rng: Rng,
    /// Seconds from the origin of the next job, or None when exhausted.
    next_at: Option<f64>,
    /// AtStart: the next destination index.
    once: usize,
}

impl StreamState {
    fn advance(&mut self) {
        match self.spec.arrivals {
            Arrivals::Poisson { per_dst } => {
                let total = per_dst * self.spec.dsts.len() as f64;
                let t = self.next_at.unwrap_or(0.0);
                self.next_at = Some(t + self.rng.exp(1.0 / total));
            }
            Arrivals::AtStart => {
                self.once += 1;
                self.next_at = (self.once < self.spec.dsts.len()).then_some(0.0);
            }
        }
    }
}

/// Flows of several streams merged in start order (ties: stream order).
pub struct Workload {
    origin: Instant,
    streams: Vec<StreamState>,
    pending: VecDeque<Flow>,
    next_id: u64,
}

impl Workload {
    /// Validates the streams and seeds one RNG per stream from `seed`.
    pub fn new(seed: u64, origin: Instant, streams: Vec<Stream>) -> Result<Self, WorkloadError> {
        let mut states = Vec::with_capacity(streams.len());
        for (i, spec) in streams.into_iter().enumerate() {
            let fail =
                |reason: &str| WorkloadError::Stream { stream: spec.name.clone(), reason: reason.into() };
            if spec.dsts.is_empty() {
                return Err(fail("no destinations"));
            }
            if spec.fan_in == 0 {
                return Err(fail("fan_in must be at least 1"));
            }
            for &d in &spec.dsts {
                let n = spec.srcs.iter().filter(|&&s| s != d).count();
                if n < spec.fan_in as usize {
                    return Err(fail(&format!(
                        "destination {d} has {n} possible senders, fewer than fan_in {}",
                        spec.fan_in
                    )));
                }
            }
            if let Arrivals::Poisson { per_dst } = spec.arrivals {
                if !(per_dst > 0.0 && per_dst.is_finite()) {
                    return Err(fail("Poisson rate must be positive"));
                }
            }
            let mut st = StreamState { spec, rng: Rng::fork(seed, i as u64), next_at: None, once: 0 };
            match st.spec.arrivals {
                Arrivals::Poisson { .. } => st.advance(),
                Arrivals::AtStart => st.next_at = Some(0.0),
            }
            states.push(st);
        }
        Ok(Workload { origin, streams: states, pending: VecDeque::new(), next_id: 0 })
    }

    /// All flows that start before `until`.
    pub fn until(self, until: Instant) -> Vec<Flow> {
        self.take_while(|f| f.start < until).collect()
    }

    fn emit_job(&mut self, si: usize) {
        let origin = self.origin;
        let st = &mut self.streams[si];
        let t = st.next_at.unwrap_or(0.0);
        let dst = match st.spec.arrivals {
            Arrivals::AtStart => st.spec.dsts[st.once],
            Arrivals::Poisson { .. } => st.spec.dsts[st.rng.below(st.spec.dsts.len() as u64) as usize],
        };
        let bytes = st.spec.sizes.sample(&mut st.rng);
        let n = st.spec.fan_in as u64;
        let mut cands: Vec<HostId> = st.spec.srcs.iter().copied().filter(|&s| s != dst).collect();
        let start = origin + std::time::Duration::from_nanos((t * 1e9).round() as u64);
        for k in 0..n {
            // Distinct senders: draw without replacement.
            let j = st.rng.below(cands.len() as u64) as usize;
            let src = cands.swap_remove(j);
            let part = bytes / n + u64::from(k < bytes % n);
            self.pending.push_back(Flow {
                id: self.next_id,
                start,
                src,
                dst,
                bytes: part.max(1),
                class: st.spec.class,
            });
            self.next_id += 1;
        }
        st.advance();
    }
}

impl Iterator for Workload {
    type Item = Flow;

    fn next(&mut self) -> Option<Flow> {
        if let Some(f) = self.pending.pop_front() {
            return Some(f);
        }
        let si = self
            .streams
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.next_at.map(|t| (i, t)))
            .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))?
            .0;
        self.emit_job(si);
        self.pending.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use proptest::prelude::*;

    fn mean_of(d: &SizeDist, seed: u64, n: usize) -> f64 {
        let mut r = Rng::seeded(seed);
        (0..n).map(|_| d.sample(&mut r) as f64).sum::<f64>() / n as f64
    }

    #[test]
    fn pareto_scale_from_mean() {
        let SizeDist::Pareto { scale, .. } = SizeDist::pareto(1.5, 50e3).unwrap() else { panic!() };
        assert!((scale - 50e3 / 3.0).abs() < 1e-9);
        let SizeDist::Pareto { scale, .. } = SizeDist::pareto(1.2, 10e6).unwrap() else { panic!() };
        assert!((scale - 10e6 / 6.0).abs() < 1e-6);
        assert!(SizeDist::pareto(1.0, 1.0).is_err());
        assert!(SizeDist::pareto(2.0, 0.0).is_err());
    }

    #[test]
    fn pareto_samples_match_mean_and_median() {
        // Finite variance (a = 3): the sample mean is close for large n.
        let d = SizeDist::pareto(3.0, 30e3).unwrap();
        let m = mean_of(&d, 1, 400_000);
        assert!((m / 30e3 - 1.0).abs() < 0.02, "{m}");
        // a = 1.5 has infinite variance; its median x_m·2^(1/a) is stable.
        let d = SizeDist::pareto(1.5, 50e3).unwrap();
        let mut r = Rng::seeded(2);
        let mut v: Vec<u64> = (0..200_001).map(|_| d.sample(&mut r)).collect();
        v.sort_unstable();
        let median = v[100_000] as f64;
        let want = 50e3 / 3.0 * 2f64.powf(1.0 / 1.5);
        assert!((median / want - 1.0).abs() < 0.02, "{median} vs {want}");
        assert!(v[0] as f64 >= 50e3 / 3.0 - 1.0);
    }

    #[test]
    fn websearch_cdf_mean_and_endpoints() {
        let c = EmpiricalCdf::dctcp_websearch();
        // Σ Δp · midpoint, by hand: 750 + 750 + 2500 + 4000 + 8450 + 9800
        // + 60000 + 150000 + 350000 + 525000 + 600000 = 1 711 250 bytes.
        assert!((c.mean() - 1_711_250.0).abs() < 1e-3, "{}", c.mean());
        let d = SizeDist::Empirical { cdf: c.clone() };
        let m = mean_of(&d, 3, 400_000);
        assert!((m / c.mean() - 1.0).abs() < 0.03, "{m}");
        assert_eq!(c.quantile(0.0), 0.0);
        assert_eq!(c.quantile(1.0), 3e7);
        assert_eq!(c.quantile(0.15), 10e3);
        // Halfway in the 10–20 KB segment.
        assert!((c.quantile(0.175) - 15e3).abs() < 1e-6);
        assert!((c.cdf(15e3) - 0.175).abs() < 1e-12);
        assert_eq!(c.cdf(4e7), 1.0);
        let mut r = Rng::seeded(4);
        assert!((0..100_000).map(|_| d.sample(&mut r)).all(|b| (1..=30_000_000).contains(&b)));
    }

    #[test]
    fn vl2_cdf_has_half_its_flows_at_one_packet() {
        let c = EmpiricalCdf::vl2_datamining();
        assert_eq!(c.min(), 1460.0);
        assert_eq!(c.max(), 666_667.0 * 1460.0);
        assert_eq!(c.quantile(0.3), 1460.0);
        assert!((c.quantile(0.55) - 1.5 * 1460.0).abs() < 1e-6);
        let d = SizeDist::Empirical { cdf: c };
        let mut r = Rng::seeded(5);
        let n = 200_000;
        let one = (0..n).filter(|_| d.sample(&mut r) == 1460).count() as f64 / n as f64;
        assert!((one - 0.5).abs() < 0.01, "{one}");
    }

    #[test]
    fn bad_cdfs_are_refused() {
        assert!(EmpiricalCdf::new(vec![]).is_err());
        assert!(EmpiricalCdf::new(vec![(1.0, 0.0), (2.0, 0.9)]).is_err());
        assert!(EmpiricalCdf::new(vec![(2.0, 0.0), (1.0, 1.0)]).is_err());
        assert!(EmpiricalCdf::new(vec![(1.0, 0.5), (2.0, 0.4), (3.0, 1.0)]).is_err());
        let c = EmpiricalCdf::new(vec![(100.0, 0.25), (200.0, 1.0)]).unwrap();
        // A mass at the first size.
        assert_eq!(c.quantile(0.2), 100.0);
        assert_eq!(c.mean(), 0.25 * 100.0 + 0.75 * 150.0);
    }

    #[test]
    fn load_to_rate_is_exact() {
        // 0.5 of 100 Mbit/s with 50 KB flows: 5e7 / 4e5 = 125 flows/s.
        assert_eq!(load_to_rate(0.5, Rate::mbps(100), 50e3).unwrap(), 125.0);
        assert_eq!(load_to_rate(0.8, Rate::gbps(1), 10e6).unwrap(), 10.0);
        assert!(load_to_rate(0.0, Rate::mbps(100), 1.0).is_err());
        assert!(load_to_rate(1.5, Rate::mbps(100), 1.0).is_err());
        assert!(load_to_rate(0.5, Rate(0), 1.0).is_err());
    }

    #[test]
    fn streams_are_validated() {
        let s = Stream {
            name: "x".into(),
            class: FlowClass::Short,
            sizes: SizeDist::fixed(1),
            arrivals: Arrivals::Poisson { per_dst: 1.0 },
            dsts: vec![1],
            srcs: vec![1],
            fan_in: 1,
        };
        let e = Workload::new(0, Instant::ZERO, vec![s.clone()]).err().unwrap();
        assert!(e.to_string().contains("destination 1 has 0 possible senders"), "{e}");
        let bad_rate = Stream { srcs: vec![2], arrivals: Arrivals::Poisson { per_dst: 0.0 }, ..s.clone() };
        assert!(Workload::new(0, Instant::ZERO, vec![bad_rate]).is_err());
        let no_dst = Stream { dsts: vec![], ..s };
        assert!(Workload::new(0, Instant::ZERO, vec![no_dst]).is_err());
    }

    proptest! {
        #[test]
        fn cdf_quantile_inverts_cdf(u in 0.0f64..1.0) {
            let c = EmpiricalCdf::dctcp_websearch();
            let x = c.quantile(u);
            prop_assert!((c.cdf(x) - u).abs() < 1e-9);
            prop_assert!(x >= c.min() && x <= c.max());
        }

        #[test]
        fn poisson_starts_never_decrease(seed in any::<u64>()) {
            let short = Stream {
                name: "short".into(),
                class: FlowClass::Short,
                sizes: SizeDist::fixed(1000),
                arrivals: Arrivals::Poisson { per_dst: 5.0 },
                dsts: (2..8).collect(),
                srcs: (0..8).collect(),
                fan_in: 1,
            };
            let long = Stream { name: "long".into(), class: FlowClass::Long, arrivals: Arrivals::AtStart, dsts: vec![0, 1], ..short.clone() };
            let flows = Workload::new(seed, Instant::ZERO, vec![short, long]).unwrap().until(Instant::from_millis(2000));
            prop_assert!(flows.windows(2).all(|w| w[0].start <= w[1].start));
        }
    }
}
