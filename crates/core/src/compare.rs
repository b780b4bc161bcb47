//! Path comparison, the pure part: the bottleneck estimator over a short
//! unpaced transfer, the per-trial measures (RTT inflation, time to 95%),
//! and the rule that ranks the variants tried on a path and recommends one.
//!
//! What it is: arithmetic on samples the shell passes in with their time
//! (`now` in, no clock read). What it is not: no sockets, no transfers,
//! no commands; the runner (`tcpaccel_traffic::compare`) measures and the
//! CLI turns the recommended [`Variant`] into the command that applies it.
//!
//! ## Bottleneck estimate (BBR's `max_bw`)
//! BBR (Cardwell et al., "BBR: Congestion-Based Congestion Control", ACM
//! Queue 14(5), 2016; Linux `net/ipv4/tcp_bbr.c`, `bbr_update_bw`) takes
//! the bottleneck bandwidth as the windowed maximum of delivery-rate
//! samples over the last 10 round trips, and lets an application-limited
//! sample in only when it raises the maximum (such a sample can only
//! underestimate). Here one sample is one round: the bytes the receiver
//! got (`tcpi_delivered` × MSS: SACKed data counts when it arrives, so
//! the cumulative ACK's jump after a repaired loss does not make a spike)
//! over the time since the round began, a round being at least the path's
//! minimum RTT. A round is application-limited when any TCP_INFO reading
//! in it had `tcpi_delivery_rate_app_limited` set.
//!
//! ## The recommendation
//! Per variant, the medians of its repeats; its noise is half the range of
//! its repeats' goodputs. A variant ties with the fastest when its median
//! goodput is below the fastest's by no more than the larger of the two
//! noises plus [`NOISE_FLOOR`] of the fastest's median. Among the fastest
//! and those tied with it, the simplest fix wins ([`Variant`]'s order:
//! nothing, buffers, BBR, static pacing, the hold).

use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::stats::{median, Spread};
use crate::units::Rate;
use crate::Instant;

/// Rounds in BBR's bandwidth filter window (`bbr_bw_rtts` in tcp_bbr.c).
pub const BW_WINDOW_ROUNDS: u64 = 10;

/// Always allowed as noise between two variants, as a fraction of the
/// fastest's median goodput: transfers of a few seconds on a shared path
/// differ by this much between repeats of the same variant (the lab's
/// `pacing --quick` repeats of one variant span 1–3%).
pub const NOISE_FLOOR: f64 = 0.03;

/// What "reached" means in time to 95%.
pub const T95_FRACTION: f64 = 0.95;

/// One TCP_INFO reading of the measuring transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliverySample {
    /// Bytes delivered to the receiver so far (`tcpi_delivered` × MSS).
    pub delivered_bytes: u64,
    /// `tcpi_delivery_rate_app_limited` of this reading.
    pub app_limited: bool,
}

/// BBR-style windowed maximum of per-round delivery rates (module docs).
#[derive(Debug, Clone)]
pub struct BottleneckEstimator {
    min_rtt: Duration,
    window_rounds: u64,
    /// Start of the current round: time and delivered bytes.
    round_start: Option<(Instant, u64)>,
    round_app_limited: bool,
    round: u64,
    /// (round, rate) of the rounds kept in the window.
    samples: VecDeque<(u64, Rate)>,
}

impl BottleneckEstimator {
    /// `min_rtt` is the shortest a round may be (the path's minimum RTT,
    /// measured before the transfer); zero is taken as 1 ms.
    pub fn new(min_rtt: Duration, window_rounds: u64) -> BottleneckEstimator {
        BottleneckEstimator {
            min_rtt: min_rtt.max(Duration::from_millis(1)),
            window_rounds: window_rounds.max(1),
            round_start: None,
            round_app_limited: false,
            round: 0,
            samples: VecDeque::new(),
        }
    }

    /// Takes one reading; closes the round when it has lasted `min_rtt`.
    pub fn on_sample(&mut self, now: Instant, s: DeliverySample) {
        let Some((start, start_bytes)) = self.round_start else {
            self.round_start = Some((now, s.delivered_bytes));
            self.round_app_limited = s.app_limited;
            return;
        };
        self.round_app_limited |= s.app_limited;
        let dt = now.saturating_since(start);
        if dt < self.min_rtt {
            return;
        }
        let rate = Rate::from_bytes_over(s.delivered_bytes.saturating_sub(start_bytes), dt);
        let max = self.estimate();
        // tcp_bbr.c: "it may be app-limited, but if it's larger than our
        // current max, then it's a good estimate" (an underestimate at worst).
        // Like the kernel's minmax filter, old rounds leave the window only
        // when a new sample enters it: app-limited stretches keep the estimate.
        if !self.round_app_limited || max.is_none_or(|m| rate > m) {
            self.samples.push_back((self.round, rate));
            let oldest = (self.round + 1).saturating_sub(self.window_rounds);
            while self.samples.front().is_some_and(|&(r, _)| r < oldest) {
                self.samples.pop_front();
            }
        }
        self.round += 1;
        self.round_start = Some((now, s.delivered_bytes));
        // The reading that closes a round opens the next one, flag included.
        self.round_app_limited = s.app_limited;
    }

    /// The maximum over the window; `None` before the first round closed.
    pub fn estimate(&self) -> Option<Rate> {
        self.samples.iter().map(|&(_, r)| r).max()
    }

    /// Rounds closed so far.
    pub fn rounds(&self) -> u64 {
        self.round
    }
}

/// Mean queueing a transfer added: the median smoothed RTT over its
/// readings divided by the path's minimum RTT (1.0: no queue). `None`
/// without readings or with a zero minimum.
pub fn rtt_inflation(srtts: &[Duration], min_rtt: Duration) -> Option<f64> {
    if min_rtt.is_zero() {
        return None;
    }
    let v: Vec<f64> = srtts.iter().map(|d| d.as_nanos() as f64).collect();
    Some(median(&v)? / min_rtt.as_nanos() as f64)
}

/// Time to 95%: the end of the first interval whose goodput reached
/// [`T95_FRACTION`] of `target`, counted from the transfer's start.
/// `intervals` are (start, end, bytes delivered in it), in order.
pub fn time_to_95(intervals: &[(Duration, Duration, u64)], target: Rate) -> Option<Duration> {
    let want = target.bits_per_sec() as f64 * T95_FRACTION;
    intervals.iter().find_map(|&(start, end, bytes)| {
        let r = Rate::from_bytes_over(bytes, end.saturating_sub(start));
        (end > start && r.bits_per_sec() as f64 >= want).then_some(end)
    })
}

/// Goodput over the second half of a transfer: the intervals (start, end,
/// bytes, in order) that begin at or after half of the last one's end. A
/// transfer of a few seconds on a long path spends its first second in
/// slow start; this is the rate it settles at, comparable with the lab's
/// long transfers. `None` without such intervals.
pub fn steady_goodput(intervals: &[(Duration, Duration, u64)]) -> Option<Rate> {
    let end = intervals.last()?.1;
    let half = end / 2;
    let tail: Vec<_> = intervals.iter().filter(|iv| iv.0 >= half).collect();
    let start = tail.first()?.0;
    let bytes = tail.iter().map(|iv| iv.2).sum();
    (end > start).then(|| Rate::from_bytes_over(bytes, end - start))
}

/// The variants a comparison tries, in the order of simplicity that breaks
/// ties: changing nothing, then buffer sysctls, then the congestion control
/// sysctl, then tcpaccel's static pacing, then its cgroup hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// The host's congestion control and buffers as they are.
    Unpaced,
    /// The doctor's buffer sizes for the path's BDP, on the test socket.
    BufferFix,
    /// BBR on the test socket.
    Bbr,
    /// `SO_MAX_PACING_RATE` at a fraction of the bottleneck estimate.
    StaticPacing,
    /// The cgroup pacer's dynamic hold.
    DynamicHold,
}

impl Variant {
    pub const ALL: [Variant; 5] =
        [Variant::Unpaced, Variant::BufferFix, Variant::Bbr, Variant::StaticPacing, Variant::DynamicHold];

    pub fn name(self) -> &'static str {
        match self {
            Variant::Unpaced => "unpaced",
            Variant::BufferFix => "buffer-fix",
            Variant::Bbr => "bbr",
            Variant::StaticPacing => "static-pacing",
            Variant::DynamicHold => "dynamic-hold",
        }
    }

    /// Parses [`Variant::name`].
    pub fn parse(s: &str) -> Option<Variant> {
        Variant::ALL.into_iter().find(|v| v.name() == s)
    }
}

/// One transfer of one variant.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    pub variant: Variant,
    pub goodput: Rate,
    pub retransmits: u64,
    /// [`rtt_inflation`]; `None` when the RTT could not be read.
    pub rtt_inflation: Option<f64>,
    /// [`time_to_95`]; `None`: never reached.
    #[serde(with = "crate::units::serde_duration::option")]
    pub t95: Option<Duration>,
    /// [`steady_goodput`]: the second half's rate, what a long transfer
    /// would see; `None` without readings.
    pub steady: Option<Rate>,
}

/// A variant over its repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub variant: Variant,
    /// Goodput in bit/s: median, min, max over the repeats.
    pub goodput_bps: Spread,
    /// Half the range of the repeats' goodputs, bit/s (0 with one repeat).
    pub noise_bps: f64,
    pub retransmits: f64,
    pub rtt_inflation: Option<f64>,
    /// Median over the repeats that reached 95%; `None` when fewer than
    /// half of them did.
    pub t95_s: Option<f64>,
    /// Median [`Trial::steady`], bit/s.
    pub steady_bps: Option<f64>,
}

/// Medians per variant, in [`Variant`] order; variants without trials are left out.
pub fn summarize(trials: &[Trial]) -> Vec<Row> {
    let mut rows = Vec::new();
    for v in Variant::ALL {
        let mine: Vec<&Trial> = trials.iter().filter(|t| t.variant == v).collect();
        let g: Vec<f64> = mine.iter().map(|t| t.goodput.bits_per_sec() as f64).collect();
        let Some(goodput_bps) = Spread::of(&g) else { continue };
        let r: Vec<f64> = mine.iter().map(|t| t.retransmits as f64).collect();
        let infl: Vec<f64> = mine.iter().filter_map(|t| t.rtt_inflation).collect();
        let t95: Vec<f64> = mine.iter().filter_map(|t| t.t95.map(|d| d.as_secs_f64())).collect();
        rows.push(Row {
            variant: v,
            noise_bps: (goodput_bps.max - goodput_bps.min) / 2.0,
            goodput_bps,
            retransmits: median(&r).unwrap_or(0.0),
            rtt_inflation: median(&infl),
            t95_s: if t95.len() * 2 >= mine.len() { median(&t95) } else { None },
            steady_bps: median(&mine.iter().filter_map(|t| t.steady.map(|r| r.0 as f64)).collect::<Vec<_>>()),
        });
    }
    rows
}

/// Why the recommended variant was chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reason {
    /// It was the fastest by more than noise over the runner-up `over`.
    Fastest { over: Option<Variant>, by: f64 },
    /// These variants' goodputs were within noise of the fastest; this is
    /// the simplest of them.
    SimplestWithinNoise { tied: Vec<Variant> },
}

/// The rule's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    pub variant: Variant,
    pub reason: Reason,
    /// The rows best first: the recommended one, then by median goodput.
    pub ranking: Vec<Variant>,
    /// Median goodput of the recommended variant ÷ the unpaced one's − 1;
    /// `None` without an unpaced row.
    pub gain_vs_unpaced: Option<f64>,
    /// The same with the steady (second-half) goodputs.
    pub steady_gain_vs_unpaced: Option<f64>,
}

/// Whether `b` ties with the fastest `best` (module docs).
fn tied(best: &Row, b: &Row) -> bool {
    let margin = best.noise_bps.max(b.noise_bps) + NOISE_FLOOR * best.goodput_bps.median;
    best.goodput_bps.median - b.goodput_bps.median <= margin
}

/// Ranks `rows` and recommends one (module docs); `None` without rows.
pub fn recommend(rows: &[Row]) -> Option<Recommendation> {
    let mut by_goodput: Vec<&Row> = rows.iter().collect();
    by_goodput.sort_by(|a, b| {
        b.goodput_bps.median.total_cmp(&a.goodput_bps.median).then(a.variant.cmp(&b.variant))
    });
    let best = *by_goodput.first()?;
    let tied_rows: Vec<&Row> = by_goodput.iter().copied().filter(|r| tied(best, r)).collect();
    let chosen = tied_rows.iter().min_by_key(|r| r.variant).copied().unwrap_or(best);
    let reason = if tied_rows.len() > 1 {
        let mut tied: Vec<Variant> = tied_rows.iter().map(|r| r.variant).collect();
        tied.sort();
        Reason::SimplestWithinNoise { tied }
    } else {
        let next = by_goodput.get(1);
        Reason::Fastest {
            over: next.map(|r| r.variant),
            by: next.map_or(0.0, |r| best.goodput_bps.median / r.goodput_bps.median.max(1.0) - 1.0),
        }
    };
    let mut ranking = vec![chosen.variant];
    ranking.extend(by_goodput.iter().map(|r| r.variant).filter(|&v| v != chosen.variant));
    let gain_vs_unpaced = rows
        .iter()
        .find(|r| r.variant == Variant::Unpaced)
        .filter(|u| u.goodput_bps.median > 0.0)
        .map(|u| chosen.goodput_bps.median / u.goodput_bps.median - 1.0);
    let steady_gain_vs_unpaced = rows
        .iter()
        .find(|r| r.variant == Variant::Unpaced)
        .and_then(|u| u.steady_bps)
        .filter(|&u| u > 0.0)
        .and_then(|u| Some(chosen.steady_bps? / u - 1.0));
    Some(Recommendation { variant: chosen.variant, reason, ranking, gain_vs_unpaced, steady_gain_vs_unpaced })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    /// Readings every 10 ms of a flow delivering `rate_of(t_ms)` bit/s.
    fn feed(e: &mut BottleneckEstimator, until_ms: u64, rate_of: impl Fn(u64) -> (u64, bool)) {
        let mut delivered = 0u64;
        for t in (0..=until_ms).step_by(10) {
            let (bps, app_limited) = rate_of(t);
            e.on_sample(ms(t), DeliverySample { delivered_bytes: delivered, app_limited });
            delivered += bps / 8 / 100; // 10 ms worth
        }
    }

    #[test]
    fn steady_flow_is_estimated_exactly() {
        let mut e = BottleneckEstimator::new(Duration::from_millis(100), BW_WINDOW_ROUNDS);
        feed(&mut e, 1000, |_| (400_000_000, false));
        assert_eq!(e.rounds(), 10);
        assert_eq!(e.estimate(), Some(Rate::mbps(400)));
    }

    #[test]
    fn no_estimate_before_a_round_closes() {
        let mut e = BottleneckEstimator::new(Duration::from_millis(100), BW_WINDOW_ROUNDS);
        feed(&mut e, 90, |_| (400_000_000, false));
        assert_eq!(e.estimate(), None);
    }

    #[test]
    fn slow_start_then_saturation_takes_the_max_not_the_mean() {
        // Slow start doubles per 100 ms round from 25 Mbit/s; the bottleneck
        // caps delivery at 470 Mbit/s after that.
        let mut e = BottleneckEstimator::new(Duration::from_millis(100), BW_WINDOW_ROUNDS);
        feed(&mut e, 1500, |t| ((25_000_000u64 << (t / 100)).min(470_000_000), false));
        assert_eq!(e.estimate(), Some(Rate::mbps(470)));
    }

    #[test]
    fn app_limited_rounds_count_only_when_they_raise_the_max() {
        // 300 Mbit/s measured; then an app-limited stretch at 100 (ignored),
        // then an app-limited burst at 350 (a better estimate: taken).
        let mut e = BottleneckEstimator::new(Duration::from_millis(100), 100);
        feed(&mut e, 2000, |t| match t {
            0..=490 => (300_000_000, false),
            500..=990 => (100_000_000, true),
            1000..=1490 => (350_000_000, true),
            _ => (200_000_000, false),
        });
        assert_eq!(e.estimate(), Some(Rate::mbps(350)));

        // Unflagged, the slow stretch is a real sample: with a window of
        // 5 rounds covering only it, the estimate drops to it.
        let mut e = BottleneckEstimator::new(Duration::from_millis(100), 5);
        feed(&mut e, 1000, |t| if t < 500 { (300_000_000, false) } else { (100_000_000, false) });
        assert_eq!(e.estimate(), Some(Rate::mbps(100)));
        // Flagged app-limited, it is ignored, and the old max stays (as in
        // the kernel's minmax filter, nothing ages out without a newer sample).
        let mut e = BottleneckEstimator::new(Duration::from_millis(100), 5);
        feed(&mut e, 1000, |t| if t < 500 { (300_000_000, false) } else { (100_000_000, true) });
        assert_eq!(e.estimate(), Some(Rate::mbps(300)), "an app-limited round never lowers the estimate");
    }

    #[test]
    fn the_window_forgets_old_rounds() {
        // 500 for 3 rounds, then 200 for 12: with a 10-round window the
        // early max has left it.
        let mut e = BottleneckEstimator::new(Duration::from_millis(100), BW_WINDOW_ROUNDS);
        feed(&mut e, 1500, |t| if t < 300 { (500_000_000, false) } else { (200_000_000, false) });
        assert_eq!(e.estimate(), Some(Rate::mbps(200)));
    }

    #[test]
    fn rounds_last_at_least_min_rtt_even_with_sparse_readings() {
        // Readings at 0, 150, 300 ms: two rounds of 150 ms each.
        let mut e = BottleneckEstimator::new(Duration::from_millis(100), BW_WINDOW_ROUNDS);
        let per_150ms = 100_000_000 / 8 * 150 / 1000; // 100 Mbit/s
        for (i, t) in [0u64, 150, 300].into_iter().enumerate() {
            e.on_sample(ms(t), DeliverySample { delivered_bytes: per_150ms * i as u64, app_limited: false });
        }
        assert_eq!(e.rounds(), 2);
        assert_eq!(e.estimate(), Some(Rate::mbps(100)));
    }

    #[test]
    fn inflation_and_t95() {
        let srtts = [120, 150, 200].map(Duration::from_millis);
        assert_eq!(rtt_inflation(&srtts, Duration::from_millis(100)), Some(1.5));
        assert_eq!(rtt_inflation(&[], Duration::from_millis(100)), None);
        assert_eq!(rtt_inflation(&srtts, Duration::ZERO), None);
        // 100 ms intervals at 100 Mbit/s target: 50, 94, 95 Mbit/s.
        let iv = |i: u64, mbit: u64| {
            (Duration::from_millis(100 * i), Duration::from_millis(100 * (i + 1)), mbit * 1_000_000 / 8 / 10)
        };
        let ivs = [iv(0, 50), iv(1, 94), iv(2, 95), iv(3, 100)];
        assert_eq!(time_to_95(&ivs, Rate::mbps(100)), Some(Duration::from_millis(300)));
        assert_eq!(time_to_95(&ivs[..2], Rate::mbps(100)), None);
        // Second half of 0.4 s: the intervals from 0.2 s, 95 and 100 Mbit/s.
        assert_eq!(steady_goodput(&ivs), Some(Rate::bps(97_500_000)));
        assert_eq!(steady_goodput(&[]), None);
    }

    fn trial(v: Variant, mbit: u64, retr: u64) -> Trial {
        Trial {
            variant: v,
            goodput: Rate::mbps(mbit),
            retransmits: retr,
            rtt_inflation: Some(1.1),
            t95: Some(Duration::from_secs(2)),
            steady: Some(Rate::mbps(mbit + 10)),
        }
    }

    #[test]
    fn summary_takes_medians_and_half_range_noise() {
        let t = [
            trial(Variant::Unpaced, 300, 10),
            trial(Variant::Unpaced, 320, 30),
            trial(Variant::Unpaced, 340, 20),
            Trial { t95: None, ..trial(Variant::Bbr, 380, 5) },
        ];
        let rows = summarize(&t);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].variant, Variant::Unpaced);
        assert_eq!(rows[0].goodput_bps.median, 320e6);
        assert_eq!(rows[0].noise_bps, 20e6);
        assert_eq!(rows[0].retransmits, 20.0);
        assert_eq!(rows[0].t95_s, Some(2.0));
        assert_eq!(rows[1].noise_bps, 0.0);
        assert_eq!(rows[1].t95_s, None, "its only repeat never reached 95%");
    }

    /// (a) Seed 000's shallow buffer (the lab's hold5 figures, repeats as
    /// trials): static pacing is the fastest, the hold is within noise of it,
    /// and static is the simpler of the two.
    #[test]
    fn case_a_shallow_buffer_pacing_wins() {
        use Variant::*;
        let t = [
            trial(Unpaced, 320, 3540),
            trial(Unpaced, 320, 3671),
            trial(Unpaced, 319, 3684),
            trial(BufferFix, 318, 3600),
            trial(BufferFix, 321, 3500),
            trial(Bbr, 387, 37456),
            trial(Bbr, 385, 36077),
            trial(StaticPacing, 463, 0),
            trial(StaticPacing, 464, 0),
            trial(DynamicHold, 460, 0),
            trial(DynamicHold, 453, 0),
        ];
        let r = recommend(&summarize(&t)).unwrap();
        assert_eq!(r.variant, StaticPacing);
        assert_eq!(r.reason, Reason::SimplestWithinNoise { tied: vec![StaticPacing, DynamicHold] });
        assert_eq!(r.ranking, vec![StaticPacing, DynamicHold, Bbr, Unpaced, BufferFix]);
        let gain = r.gain_vs_unpaced.unwrap();
        assert!((gain - (463.5 / 320.0 - 1.0)).abs() < 1e-12, "{gain}");
        let steady = r.steady_gain_vs_unpaced.unwrap();
        assert!((steady - (473.5 / 330.0 - 1.0)).abs() < 1e-12, "{steady}");
    }

    /// The hold is recommended when it beats static pacing by more than
    /// noise (a path where a fixed rate below the bottleneck loses to a
    /// rate that follows it), and it comes last in simplicity when tied.
    #[test]
    fn the_hold_wins_only_by_more_than_noise() {
        use Variant::*;
        let t = [
            trial(Unpaced, 300, 3000),
            trial(StaticPacing, 400, 0),
            trial(StaticPacing, 402, 0),
            trial(DynamicHold, 455, 0),
            trial(DynamicHold, 457, 0),
        ];
        let r = recommend(&summarize(&t)).unwrap();
        assert_eq!(r.variant, DynamicHold);
        assert_eq!(r.reason, Reason::Fastest { over: Some(StaticPacing), by: 456.0 / 401.0 - 1.0 });
        assert_eq!(r.ranking, vec![DynamicHold, StaticPacing, Unpaced]);
        assert!((r.gain_vs_unpaced.unwrap() - (456.0 / 300.0 - 1.0)).abs() < 1e-12);
        // Within 3% of static pacing: static, the simpler, is recommended.
        let tied = [trial(StaticPacing, 450, 0), trial(DynamicHold, 456, 0)];
        let r = recommend(&summarize(&tied)).unwrap();
        assert_eq!(r.variant, StaticPacing);
        assert_eq!(r.ranking, vec![StaticPacing, DynamicHold]);
    }

    /// Without the hold, static pacing wins outright: "fastest", and by how much.
    #[test]
    fn a_clear_winner_is_fastest() {
        use Variant::*;
        let t = [trial(Unpaced, 320, 3000), trial(Bbr, 400, 30000), trial(StaticPacing, 460, 0)];
        let r = recommend(&summarize(&t)).unwrap();
        assert_eq!(r.variant, StaticPacing);
        assert_eq!(r.reason, Reason::Fastest { over: Some(Bbr), by: 460.0 / 400.0 - 1.0 });
    }

    /// (b) A deep buffer (2×BDP): everything fills the pipe; pacing's
    /// slightly higher median is within noise, so nothing is to be changed,
    /// and unpaced is ranked first, not below pacing.
    #[test]
    fn case_b_deep_buffer_unpaced_is_not_ranked_below_pacing() {
        use Variant::*;
        let t = [
            trial(Unpaced, 455, 40),
            trial(Unpaced, 462, 35),
            trial(Bbr, 458, 900),
            trial(Bbr, 460, 800),
            trial(StaticPacing, 464, 0),
            trial(StaticPacing, 463, 0),
            trial(DynamicHold, 461, 0),
            trial(DynamicHold, 459, 0),
        ];
        let r = recommend(&summarize(&t)).unwrap();
        assert_eq!(r.variant, Unpaced);
        assert_eq!(r.ranking[0], Unpaced);
        assert!(matches!(r.reason, Reason::SimplestWithinNoise { ref tied } if tied.len() == 4));
        // BBR ties too and comes before pacing in simplicity; without
        // unpaced it is the answer.
        let no_unpaced: Vec<Trial> = t.iter().copied().filter(|t| t.variant != Unpaced).collect();
        assert_eq!(recommend(&summarize(&no_unpaced)).unwrap().variant, Bbr);
    }

    /// (c) 1 Gbit/s, 100 ms with default buffers (seed 004: 254 vs 901
    /// Mbit/s): every variant without the buffer fix is window-limited.
    #[test]
    fn case_c_default_buffers_buffer_fix_first() {
        use Variant::*;
        let t = [
            trial(Unpaced, 254, 0),
            trial(Unpaced, 250, 0),
            trial(BufferFix, 901, 12),
            trial(BufferFix, 880, 30),
            trial(Bbr, 256, 0),
            trial(StaticPacing, 252, 0),
            trial(DynamicHold, 251, 0),
        ];
        let r = recommend(&summarize(&t)).unwrap();
        assert_eq!(r.variant, BufferFix);
        assert!(matches!(r.reason, Reason::Fastest { over: Some(Bbr), .. }));
        assert!((r.gain_vs_unpaced.unwrap() - (890.5 / 252.0 - 1.0)).abs() < 1e-12);
    }

    /// Noise decides: a 6% lead is a win when the repeats agree, a tie when
    /// they spread by more than that.
    #[test]
    fn noise_band_decides_ties() {
        use Variant::*;
        let quiet = [trial(Unpaced, 100, 0), trial(Unpaced, 100, 0), trial(Bbr, 106, 0), trial(Bbr, 106, 0)];
        assert_eq!(recommend(&summarize(&quiet)).unwrap().variant, Bbr);
        let noisy = [trial(Unpaced, 94, 0), trial(Unpaced, 106, 0), trial(Bbr, 106, 0), trial(Bbr, 106, 0)];
        assert_eq!(recommend(&summarize(&noisy)).unwrap().variant, Unpaced);
        assert_eq!(recommend(&[]), None);
    }

    #[test]
    fn variant_names_round_trip() {
        for v in Variant::ALL {
            assert_eq!(Variant::parse(v.name()), Some(v));
        }
        assert_eq!(Variant::parse("fast"), None);
    }
}
