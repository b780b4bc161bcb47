//! Search for the number of parallel TCP streams a client needs to reach its
//! target throughput ([GatherQoS] §3.2), as a pure state machine.
//!
//! [GatherQoS]'s algorithm, with `N0` initial streams, additive step α and
//! multiplicative factor β (0 < β < 1):
//! - (I) measure; target met → stop. (II) N ← N0. (III) N ← N + α.
//! - (IV) measure; target met → stop; throughput rose → (VI); fell → (V).
//!   With α = 1, throughput that was rising and now falls → stop at the
//!   previous N (N_b).
//! - (V) N ← N · β, then (VI).
//! - (VI) `α ← max(1, T_t / T_n · RTT · 10)` (eq. (2)),
//!   `β ← max(N_b / N_n, T_n / T_t)` (eq. (3)); back to (III).
//!
//! Readings of the original that the text leaves open, decided here:
//! - RTT in eq. (2) is in **seconds**. The paper only says "10 adjusts the
//!   RTT value"; with milliseconds, a 100 ms path at half its target would add
//!   2000 streams at once, with seconds it adds 2, which matches its aim
//!   ("larger α when far from the target or when RTT is large").
//! - N is an integer: the step is α rounded to the nearest whole stream, and
//!   "α = 1" means that step is 1. A throughput that did not rise by more than
//!   `tolerance` counts as not rising (a flat plateau also ends the search).
//! - β from eq. (3) can reach 1 or more when N_b > N_n; it is clamped to
//!   `[beta_min, beta_max]` to keep the paper's 0 < β < 1.
//! - After a stop, the search restarts from the current N (not N0) when the
//!   target is missed again or the throughput moves by more than
//!   `restart_tolerance`, so a running transfer is not cut to N0 streams.
//! - Bounds: N stays within `[min_streams, min(max_streams, limit)]`, where
//!   `limit` is the client's share of a global budget ([`divide_streams`]);
//!   a search that makes no progress or runs `max_rounds` stops at the best N
//!   it measured.
//!
//! It opens no connections and reads no clock: the gather server measures
//! goodput per interval and passes `now`; the decision says how many streams
//! the client should have.

use crate::time::Instant;
use crate::units::Rate;
use serde::Serialize;
use std::time::Duration;

/// Tuning of [`StreamTuner`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AimdConfig {
    /// N0, the initial number of streams ([GatherQoS] Table 1: 1).
    pub n0: u32,
    /// Initial additive step α.
    pub alpha0: f64,
    /// Initial multiplicative factor β.
    pub beta0: f64,
    /// The constant of eq. (2) (10 in the paper), applied to RTT in seconds.
    pub rtt_scale: f64,
    pub min_streams: u32,
    /// Per-client bound.
    pub max_streams: u32,
    /// Relative change of throughput below which it counts as "not risen".
    pub tolerance: f64,
    /// After a stop, a relative change of throughput that restarts the search.
    pub restart_tolerance: f64,
    /// Measurements this soon after a change are ignored (new streams ramp up).
    pub settle: Duration,
    pub beta_min: f64,
    pub beta_max: f64,
    /// Most search steps before settling on the best N measured.
    pub max_rounds: u32,
}

impl Default for AimdConfig {
    fn default() -> Self {
        AimdConfig {
            n0: 1,
            alpha0: 1.0,
            beta0: 0.5,
            rtt_scale: 10.0,
            min_streams: 1,
            max_streams: 32,
            tolerance: 0.02,
            restart_tolerance: 0.25,
            settle: Duration::ZERO,
            beta_min: 0.1,
            beta_max: 0.9,
            max_rounds: 40,
        }
    }
}

/// What the last interval did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Too soon after the last change; measurement ignored.
    Settling,
    /// Target met: stop (steps I / IV).
    TargetMet,
    /// Throughput rose (or first step): N ← N + α (steps VI, III).
    Increase,
    /// Throughput fell: N ← N · β + α (steps V, VI, III).
    Decrease,
    /// α = 1 and throughput turned down: stop at the previous N.
    Peak,
    /// Cannot add streams: at the per-client or global bound.
    Bound,
    /// No progress or too many rounds: stop at the best N measured.
    GaveUp,
    /// Stopped, and the measurement gives no reason to search again.
    Hold,
}

/// The answer to one interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Decision {
    /// Streams the client should have now.
    pub streams: u32,
    /// The search is stopped (it resumes by itself if conditions change).
    pub done: bool,
    pub step: Step,
    pub alpha: f64,
    pub beta: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Search,
    /// Stopped; the throughput at the stop decides when to search again.
    Stopped {
        met: bool,
        throughput: f64,
        at_bound: bool,
    },
}

/// Per-client stream-count search ([GatherQoS] §3.2).
#[derive(Debug, Clone)]
pub struct StreamTuner {
    cfg: AimdConfig,
    target: Rate,
    n: u32,
    alpha: f64,
    beta: f64,
    phase: Phase,
    /// (N_b, T_b): the previous measured count and its throughput.
    prev: Option<(u32, f64)>,
    was_rising: bool,
    best: Option<(u32, f64)>,
    rounds: u32,
    limit: u32,
    hold_until: Option<Instant>,
}

impl StreamTuner {
    pub fn new(cfg: AimdConfig, target: Rate) -> Self {
        let n = cfg.n0.clamp(cfg.min_streams.max(1), cfg.max_streams.max(1));
        StreamTuner {
            cfg,
            target,
            n,
            alpha: cfg.alpha0,
            beta: cfg.beta0,
            phase: Phase::Search,
            prev: None,
            was_rising: false,
            best: None,
            rounds: 0,
            limit: u32::MAX,
            hold_until: None,
        }
    }

    /// Current number of streams.
    pub fn streams(&self) -> u32 {
        self.n
    }

    pub fn target(&self) -> Rate {
        self.target
    }

    /// Changes the target; the search resumes from the current N.
    pub fn set_target(&mut self, target: Rate) {
        if target != self.target {
            self.target = target;
            self.restart();
        }
    }

    /// Sets this client's share of a global stream budget. Lowering it below
    /// the current count reduces the count at once; raising it resumes a search
    /// that had stopped at the bound.
    pub fn set_limit(&mut self, limit: u32) -> u32 {
        let old_cap = self.cap();
        self.limit = limit;
        if let Phase::Stopped { at_bound: true, .. } = self.phase {
            if self.cap() > old_cap {
                self.restart();
            }
        }
        self.n = self.n.min(self.cap());
        self.n
    }

    fn cap(&self) -> u32 {
        self.cfg.max_streams.min(self.limit).max(self.cfg.min_streams.max(1))
    }

    fn floor(&self) -> u32 {
        self.cfg.min_streams.max(1)
    }

    fn restart(&mut self) {
        self.phase = Phase::Search;
        self.prev = None;
        self.was_rising = false;
        self.best = None;
        self.rounds = 0;
    }

    fn decision(&self, step: Step) -> Decision {
        let done = matches!(self.phase, Phase::Stopped { .. });
        Decision { streams: self.n, done, step, alpha: self.alpha, beta: self.beta }
    }

    fn stop(&mut self, n: u32, met: bool, throughput: f64, step: Step) -> Decision {
        self.n = n.clamp(self.floor(), self.cap());
        self.phase = Phase::Stopped { met, throughput, at_bound: step == Step::Bound };
        self.decision(step)
    }

    /// The additive step: α rounded to whole streams, at least one.
    fn step_size(&self) -> u32 {
        let a = self.alpha.round();
        if a.is_finite() && a >= 1.0 {
            a.min(u32::MAX as f64) as u32
        } else {
            1
        }
    }

    /// One measurement interval: `goodput` is the client's total over all its
    /// streams while it had [`streams`](Self::streams) of them; `rtt` its RTT.
    pub fn on_interval(&mut self, now: Instant, goodput: Rate, rtt: Duration) -> Decision {
        if let Some(t) = self.hold_until {
            if now < t {
                return self.decision(Step::Settling);
            }
        }
        let t_n = goodput.0 as f64;
        let t_t = self.target.0 as f64;
        if let Phase::Stopped { met, throughput, .. } = self.phase {
            let moved = (t_n - throughput).abs() > throughput * self.cfg.restart_tolerance;
            let missed = t_n < t_t * (1.0 - self.cfg.tolerance);
            let again = if met { missed } else { moved && t_n < t_t };
            if !again {
                return self.decision(Step::Hold);
            }
            self.restart();
            // The search goes on from the current N, measured now.
        }
        let before = self.n;
        let d = self.search(t_n, t_t, rtt);
        if self.n != before {
            self.hold_until = Some(now + self.cfg.settle);
        }
        d
    }

    fn search(&mut self, t_n: f64, t_t: f64, rtt: Duration) -> Decision {
        let measured = self.n;
        if self.best.is_none_or(|(_, t)| t_n > t) {
            self.best = Some((measured, t_n));
        }
        // (I) / (IV): target met.
        if t_n >= t_t {
            return self.stop(measured, true, t_n, Step::TargetMet);
        }
        self.rounds += 1;
        if self.rounds > self.cfg.max_rounds {
            let (n, t) = self.best.unwrap_or((measured, t_n));
            return self.stop(n, false, t, Step::GaveUp);
        }
        let mut step = Step::Increase;
        let mut n = measured as f64;
        let mut rising = true;
        if let Some((n_b, t_b)) = self.prev {
            rising = t_n > t_b * (1.0 + self.cfg.tolerance);
            // (IV): with α = 1, a rise that turns down stops at N_b.
            if !rising && self.was_rising && self.step_size() == 1 {
                return self.stop(n_b, false, t_b, Step::Peak);
            }
            if !rising {
                // (V): N ← N · β, with the β of the previous (VI).
                n = (n * self.beta).floor();
                step = Step::Decrease;
            }
            // (VI): [GatherQoS] eq. (2) and (3).
            self.alpha = alpha_eq2(t_t, t_n, rtt, self.cfg.rtt_scale, self.cfg.max_streams);
            let beta = (n_b as f64 / measured as f64).max(if t_t > 0.0 { t_n / t_t } else { 0.0 });
            self.beta = beta.clamp(self.cfg.beta_min, self.cfg.beta_max);
        }
        // (II) was the construction with N0; (III): N ← N + α.
        n += self.step_size() as f64;
        let next = (n.min(u32::MAX as f64) as u32).clamp(self.floor(), self.cap());
        self.prev = Some((measured, t_n));
        self.was_rising = rising;
        if next == measured {
            // No move possible: at the bound when adding, otherwise stuck.
            if step == Step::Increase && measured >= self.cap() {
                return self.stop(measured, false, t_n, Step::Bound);
            }
            let (n, t) = self.best.unwrap_or((measured, t_n));
            return self.stop(n, false, t, Step::GaveUp);
        }
        self.n = next;
        self.decision(step)
    }
}

/// [GatherQoS] eq. (2): `α = max(1, T_t / T_n · RTT · 10)`, RTT in seconds (see
/// the module docs), capped at `max` so a near-zero T_n cannot ask for
/// unbounded streams.
pub fn alpha_eq2(target: f64, current: f64, rtt: Duration, scale: f64, max: u32) -> f64 {
    let raw = if current > 0.0 { target / current * rtt.as_secs_f64() * scale } else { f64::INFINITY };
    raw.clamp(1.0, (max as f64).max(1.0))
}

/// Splits a global stream budget among clients: each gets its minimum first,
/// then the rest goes to higher priorities first, each up to what it wants.
/// Input: (client id, priority — larger first, wanted streams). Output: limits
/// in input order. With a budget below the sum of minimums, minimums are still
/// granted (a client always keeps one stream) and the excess is reported by
/// the sum exceeding `total`.
pub fn divide_streams(requests: &[(u64, u32, u32)], min_each: u32, total: u32) -> Vec<(u64, u32)> {
    let mut out: Vec<(u64, u32)> = requests.iter().map(|&(id, _, want)| (id, want.min(min_each))).collect();
    let used: u32 = out.iter().map(|&(_, n)| n).sum();
    let mut left = total.saturating_sub(used);
    let mut order: Vec<usize> = (0..requests.len()).collect();
    // Stable: equal priorities keep input order.
    order.sort_by(|&a, &b| requests[b].1.cmp(&requests[a].1));
    for i in order {
        let want = requests[i].2;
        let add = want.saturating_sub(out[i].1).min(left);
        out[i].1 += add;
        left -= add;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MBIT: f64 = 1e6;

    /// Drives a tuner against a throughput model until it stops.
    fn run(tuner: &mut StreamTuner, rtt_ms: u64, model: impl Fn(u32) -> f64) -> (Vec<u32>, Decision) {
        let mut path = vec![tuner.streams()];
        for i in 0..100u64 {
            let t = model(tuner.streams()).max(0.0);
            let d = tuner.on_interval(
                Instant::from_millis(i * 1000),
                Rate(t as u64),
                Duration::from_millis(rtt_ms),
            );
            if d.done {
                return (path, d);
            }
            path.push(d.streams);
        }
        panic!("no convergence: {path:?}");
    }

    fn linear_cap(per: f64, cap: f64) -> impl Fn(u32) -> f64 {
        move |n| (n as f64 * per).min(cap)
    }

    #[test]
    fn eq2_alpha_uses_rtt_in_seconds() {
        // Half the target at 100 ms: 2 * 0.1 * 10 = 2 streams.
        assert_eq!(alpha_eq2(2.0, 1.0, Duration::from_millis(100), 10.0, 32), 2.0);
        // Close to the target on a short path: at least 1.
        assert_eq!(alpha_eq2(1.0, 0.9, Duration::from_millis(10), 10.0, 32), 1.0);
        // Nothing measured: capped.
        assert_eq!(alpha_eq2(1.0, 0.0, Duration::from_millis(10), 10.0, 32), 32.0);
    }

    #[test]
    fn target_met_at_once_stops_at_n0() {
        let mut t = StreamTuner::new(AimdConfig::default(), Rate::mbps(1));
        let d = t.on_interval(Instant::ZERO, Rate::mbps(2), Duration::from_millis(100));
        assert_eq!((d.streams, d.done, d.step), (1, true, Step::TargetMet));
    }

    #[test]
    fn reaches_a_reachable_target() {
        // 0.3 Mbit/s per stream, target 2 Mbit/s, RTT 100 ms:
        // N=1 (0.3) +α0 -> 2 (0.6): α = 2/0.6*1 = 3.3 -> 5 (1.5): α = 1.33 -> 6
        // (1.8): α = 1.1 -> 7 (2.1 >= 2): stop.
        let mut t = StreamTuner::new(AimdConfig::default(), Rate::mbps(2));
        let (path, d) = run(&mut t, 100, linear_cap(0.3 * MBIT, 100.0 * MBIT));
        assert_eq!(path, vec![1, 2, 5, 6, 7]);
        assert_eq!((d.streams, d.step), (7, Step::TargetMet));
    }

    #[test]
    fn stops_at_the_plateau_when_the_target_is_out_of_reach() {
        // Capacity 1.5 Mbit/s is reached at N=5; target 2 Mbit/s.
        let mut t = StreamTuner::new(AimdConfig::default(), Rate::mbps(2));
        let (path, d) = run(&mut t, 100, linear_cap(0.3 * MBIT, 1.5 * MBIT));
        assert_eq!(path, vec![1, 2, 5, 6]);
        assert_eq!((d.streams, d.step), (5, Step::Peak));
    }

    #[test]
    fn stops_before_the_drop_when_too_many_streams_hurt() {
        // Rises 0.3 per stream up to N=8 (2.4), then falls 0.15 per stream.
        let model = |n: u32| {
            let n = n as f64;
            if n <= 8.0 {
                0.3 * MBIT * n
            } else {
                (2.4 - 0.15 * (n - 8.0)) * MBIT
            }
        };
        let mut t = StreamTuner::new(AimdConfig::default(), Rate::mbps(3));
        let (path, d) = run(&mut t, 100, model);
        // 1, 2 (α=5) -> 7 (α=1.4) -> 8 (α=1.25) -> 9 falls: back to 8.
        assert_eq!(path, vec![1, 2, 7, 8, 9]);
        assert_eq!((d.streams, d.step), (8, Step::Peak));
    }

    #[test]
    fn multiplicative_decrease_after_an_overshoot() {
        // Long RTT makes a big step overshoot into the falling region.
        let model = |n: u32| {
            let n = n as f64;
            if n <= 6.0 {
                0.5 * MBIT * n
            } else {
                (3.0 - 0.2 * (n - 6.0)).max(0.2) * MBIT
            }
        };
        let cfg = AimdConfig { max_streams: 20, ..AimdConfig::default() };
        let mut t = StreamTuner::new(cfg, Rate::mbps(4));
        let rtt = Duration::from_millis(300);
        // N=1 (0.5): +1 -> 2 (1.0): α = 4*3 = 12, β = max(1/2, 1/4) = 0.5 -> 14.
        let d = t.on_interval(Instant::ZERO, Rate((model(1)) as u64), rtt);
        assert_eq!(d.streams, 2);
        let d = t.on_interval(Instant::ZERO, Rate((model(2)) as u64), rtt);
        assert_eq!((d.streams, d.step), (14, Step::Increase));
        assert_eq!(d.beta, 0.5);
        // N=14 gives 1.4 Mbit/s: rose vs 1.0, α = 4/1.4*3 = 8.57 -> 9: 23, capped at 20.
        let d = t.on_interval(Instant::ZERO, Rate((model(14)) as u64), rtt);
        assert_eq!((d.streams, d.step), (20, Step::Increase));
        // N=20 gives 0.4: fell. (V) 20 * β(= max(2/14, 1.4/4) = 0.35) = 7, then
        // (VI) α = 4/0.4*3 = 30, capped at 20 streams, and (III) 7 + 20 -> 20:
        // no move is possible.
        let d = t.on_interval(Instant::ZERO, Rate((model(20)) as u64), rtt);
        assert_eq!(d.step, Step::GaveUp);
        // Stuck at the bound: stops at the best N measured (14 gave 1.4 Mbit/s).
        assert_eq!((d.streams, d.done), (14, true));
    }

    #[test]
    fn decrease_then_recover() {
        // A shorter RTT keeps α small after the drop, so (V) then (III) lands
        // below the overshoot and the search goes on from there.
        let model = |n: u32| {
            let n = n as f64;
            if n <= 10.0 {
                0.2 * MBIT * n
            } else {
                (2.0 - 0.1 * (n - 10.0)) * MBIT
            }
        };
        let mut t = StreamTuner::new(AimdConfig::default(), Rate::mbps(3));
        let (path, d) = run(&mut t, 100, model);
        // 1 (0.2) -> 2 (0.4): α = 7.5 -> 10 (2.0): α = 1.5 -> 12 (1.8): fell,
        // (V) 12 * β(= max(2/10, 2/3)) = 8, α = 1.67 -> 10 (2.0): rose, α = 1.5
        // -> 12 (1.8): fell, β = 0.9 (clamped), 10 + 2 = 12 again: no progress,
        // so it stops at the best seen, N=10 at 2.0 Mbit/s.
        assert_eq!(&path[..5], &[1, 2, 10, 12, 10]);
        assert!(d.done);
        assert_eq!(d.streams, 10, "{path:?} {d:?}");
    }

    #[test]
    fn settle_time_ignores_early_measurements() {
        let cfg = AimdConfig { settle: Duration::from_secs(2), ..AimdConfig::default() };
        let mut t = StreamTuner::new(cfg, Rate::mbps(2));
        let rtt = Duration::from_millis(100);
        let d = t.on_interval(Instant::from_millis(0), Rate::kbps(300), rtt);
        assert_eq!(d.streams, 2);
        let d = t.on_interval(Instant::from_millis(1000), Rate::kbps(300), rtt);
        assert_eq!((d.streams, d.step), (2, Step::Settling));
        let d = t.on_interval(Instant::from_millis(2000), Rate::kbps(600), rtt);
        assert_eq!((d.streams, d.step), (5, Step::Increase));
    }

    #[test]
    fn restarts_when_interference_drops_throughput() {
        let mut t = StreamTuner::new(AimdConfig::default(), Rate::mbps(1));
        let rtt = Duration::from_millis(100);
        let d = t.on_interval(Instant::ZERO, Rate::kbps(1200), rtt);
        assert!(d.done);
        let d = t.on_interval(Instant::from_millis(1000), Rate::kbps(1100), rtt);
        assert_eq!((d.step, d.done), (Step::Hold, true));
        // Interference halves the throughput: search again from N=1.
        let d = t.on_interval(Instant::from_millis(2000), Rate::kbps(500), rtt);
        assert_eq!((d.streams, d.step, d.done), (2, Step::Increase, false));
        let d = t.on_interval(Instant::from_millis(3000), Rate::kbps(1000), rtt);
        assert_eq!((d.streams, d.step, d.done), (2, Step::TargetMet, true));
    }

    #[test]
    fn global_limit_bounds_the_search() {
        let mut t = StreamTuner::new(AimdConfig::default(), Rate::mbps(10));
        t.set_limit(3);
        let (path, d) = run(&mut t, 100, linear_cap(0.3 * MBIT, 100.0 * MBIT));
        assert!(path.iter().all(|&n| n <= 3), "{path:?}");
        assert_eq!((d.streams, d.step), (3, Step::Bound));
        // The same limit again changes nothing; a larger one resumes the search.
        let later = Instant::from_millis(1_000_000);
        t.set_limit(3);
        let d = t.on_interval(later, Rate::kbps(900), Duration::from_millis(100));
        assert_eq!((d.step, d.done), (Step::Hold, true));
        t.set_limit(6);
        let d = t.on_interval(later, Rate::kbps(900), Duration::from_millis(100));
        assert_eq!((d.streams, d.step, d.done), (6, Step::Increase, false));
        assert_eq!(t.set_limit(2), 2);
    }

    #[test]
    fn divide_streams_by_priority() {
        let req = [(1, 1, 10), (2, 3, 6), (3, 2, 4)];
        assert_eq!(divide_streams(&req, 1, 12), vec![(1, 2), (2, 6), (3, 4)]);
        assert_eq!(divide_streams(&req, 1, 5), vec![(1, 1), (2, 3), (3, 1)]);
        // Below the sum of minimums each still keeps one.
        assert_eq!(divide_streams(&req, 1, 2), vec![(1, 1), (2, 1), (3, 1)]);
    }

    proptest! {
        #[test]
        fn always_bounded_and_terminates(per in 0.05f64..2.0, cap in 0.5f64..50.0, drop in 0.0f64..0.5,
                                         target in 0.5f64..60.0, rtt_ms in 1u64..500, max in 1u32..64) {
            let cfg = AimdConfig { max_streams: max, ..AimdConfig::default() };
            let mut t = StreamTuner::new(cfg, Rate((target * MBIT) as u64));
            let peak_n = (cap / per).ceil();
            let model = move |n: u32| {
                let n = n as f64;
                let up = (n * per).min(cap);
                let down = if n > peak_n { (n - peak_n) * drop } else { 0.0 };
                ((up - down).max(0.01)) * MBIT
            };
            let mut stopped = false;
            for i in 0..(cfg.max_rounds as u64 + 5) {
                let n = t.streams();
                prop_assert!(n >= 1 && n <= max);
                let d = t.on_interval(Instant::from_millis(i), Rate(model(n) as u64), Duration::from_millis(rtt_ms));
                prop_assert!(d.streams >= 1 && d.streams <= max);
                if d.done { stopped = true; break; }
            }
            prop_assert!(stopped);
        }
    }
}
