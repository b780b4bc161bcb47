//! Measurement for the link model, in the spirit of the GtrcNET-1 of [PSPacer]:
//! bandwidth at fine time resolution without disturbing the traffic.
//!
//! - [`Meter`]: per-bin (500 µs by default) bytes and frames arrived, departed
//!   (finished serialization) and dropped, and the queue occupancy (maximum
//!   during the bin and value at its end). Bins are aligned to multiples of the
//!   bin width since the clock's epoch, so two meters on one clock line up.
//!   Bins with no event and an empty queue are not emitted; a reader fills the
//!   gaps from the bin start times.
//! - [`Histogram`]: a log-linear histogram of durations (inter-departure gaps,
//!   lateness), bounded memory, relative error ≤ 1/32.
//! - [`GapRecord`]: a seeded reservoir sample of inter-arrival gaps with the
//!   frame's on-wire size, from which the deviation from the ideal gap
//!   (on-wire size / rate) is computed: how precisely a sender paces.
//!
//! The meter only records what it is told, at the times it is told; it reads
//! no clock. Events must be recorded in non-decreasing time order.

use serde::{Deserialize, Serialize};
use std::time::Duration;

use crate::rng::Rng;
use crate::stats;
use crate::time::Instant;
use crate::units::Rate;

/// Default bin width: 500 µs, the GtrcNET-1 resolution used in [PSPacer].
pub const DEFAULT_BIN: Duration = Duration::from_micros(500);

/// One closed meter bin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Bin {
    /// Start of the bin, ns since the clock's epoch.
    pub start_ns: u64,
    /// Bin width in ns.
    pub width_ns: u64,
    pub arrived_frames: u64,
    pub arrived_bytes: u64,
    pub departed_frames: u64,
    pub departed_bytes: u64,
    pub dropped_frames: u64,
    pub dropped_bytes: u64,
    /// Largest queue (bytes) seen during the bin, including at its start.
    pub queue_max_bytes: u64,
    /// Queue (bytes) at the end of the bin.
    pub queue_end_bytes: u64,
    /// Queue (frames) at the end of the bin.
    pub queue_end_frames: u64,
}

impl Bin {
    /// Departure rate over the bin in bit/s (frame bytes, no wire overhead).
    pub fn departed_bps(&self) -> u64 {
        if self.width_ns == 0 {
            return 0;
        }
        ((self.departed_bytes as u128 * 8 * 1_000_000_000) / self.width_ns as u128) as u64
    }

    fn is_idle(&self) -> bool {
        self.arrived_frames == 0
            && self.departed_frames == 0
            && self.dropped_frames == 0
            && self.queue_max_bytes == 0
            && self.queue_end_bytes == 0
    }
}

/// Per-bin counters; see the module docs.
#[derive(Debug, Clone)]
pub struct Meter {
    width: u64,
    cur: Bin,
    /// Queue state carried across bins.
    q_bytes: u64,
    q_frames: u64,
    closed: Vec<Bin>,
    max_pending: usize,
    /// Bins discarded because nobody drained them (bounded memory).
    overflowed: u64,
}

impl Meter {
    /// A meter with bins of `width` (at least 1 µs). At most `max_pending`
    /// closed bins are kept until [`Meter::drain`]; older ones beyond that are
    /// counted in [`Meter::overflowed`] and dropped.
    pub fn new(width: Duration, max_pending: usize) -> Meter {
        let width = (width.as_nanos() as u64).max(1_000);
        Meter {
            width,
            cur: Bin { start_ns: 0, width_ns: width, ..Bin::default() },
            q_bytes: 0,
            q_frames: 0,
            closed: Vec::with_capacity(max_pending.min(4096)),
            max_pending: max_pending.max(1),
            overflowed: 0,
        }
    }

    pub fn width(&self) -> Duration {
        Duration::from_nanos(self.width)
    }

    /// Closes every bin that ends at or before `now`.
    pub fn advance(&mut self, now: Instant) {
        let t = now.as_nanos();
        if t < self.cur.start_ns + self.width {
            return;
        }
        self.cur.queue_end_bytes = self.q_bytes;
        self.cur.queue_end_frames = self.q_frames;
        let done = self.cur;
        self.push(done);
        // Jump over idle bins in one step; with a non-empty queue each bin
        // carries state, so emit them (bounded by max_pending).
        let next_start = t - t % self.width;
        if self.q_bytes > 0 {
            let mut s = done.start_ns + self.width;
            while s < next_start {
                let b = Bin {
                    start_ns: s,
                    width_ns: self.width,
                    queue_max_bytes: self.q_bytes,
                    queue_end_bytes: self.q_bytes,
                    queue_end_frames: self.q_frames,
                    ..Bin::default()
                };
                self.push(b);
                s += self.width;
            }
        }
        self.cur = Bin {
            start_ns: next_start,
            width_ns: self.width,
            queue_max_bytes: self.q_bytes,
            ..Bin::default()
        };
    }

    fn push(&mut self, b: Bin) {
        if b.is_idle() {
            return;
        }
        if self.closed.len() >= self.max_pending {
            self.overflowed += 1;
            return;
        }
        self.closed.push(b);
    }

    /// A frame of `bytes` arrived and was queued.
    pub fn arrived(&mut self, at: Instant, bytes: u64) {
        self.advance(at);
        self.cur.arrived_frames += 1;
        self.cur.arrived_bytes += bytes;
        self.q_bytes += bytes;
        self.q_frames += 1;
        self.cur.queue_max_bytes = self.cur.queue_max_bytes.max(self.q_bytes);
    }

    /// A frame of `bytes` arrived and was dropped (it never entered the queue).
    pub fn dropped(&mut self, at: Instant, bytes: u64) {
        self.advance(at);
        self.cur.arrived_frames += 1;
        self.cur.arrived_bytes += bytes;
        self.cur.dropped_frames += 1;
        self.cur.dropped_bytes += bytes;
    }

    /// A queued frame of `bytes` finished serialization and left the queue.
    pub fn departed(&mut self, at: Instant, bytes: u64) {
        self.advance(at);
        self.cur.departed_frames += 1;
        self.cur.departed_bytes += bytes;
        self.q_bytes = self.q_bytes.saturating_sub(bytes);
        self.q_frames = self.q_frames.saturating_sub(1);
    }

    /// Takes the closed bins, oldest first.
    pub fn drain(&mut self) -> std::vec::Drain<'_, Bin> {
        self.closed.drain(..)
    }

    /// Moves the closed bins into `out` (reusing its allocation).
    pub fn drain_into(&mut self, out: &mut Vec<Bin>) {
        out.append(&mut self.closed);
    }

    /// The open bin, as it would be if closed now (for a final flush).
    pub fn current(&self) -> Bin {
        let mut b = self.cur;
        b.queue_end_bytes = self.q_bytes;
        b.queue_end_frames = self.q_frames;
        b
    }

    /// Closed bins discarded because they were not drained in time.
    pub fn overflowed(&self) -> u64 {
        self.overflowed
    }
}

/// Sub-buckets per power of two: relative bucket width 1/32.
const SUB_BITS: u32 = 5;
const SUB: usize = 1 << SUB_BITS;
/// Values up to 2^40 ns (≈ 18 min) get their own bucket; larger ones share the last.
const MAX_EXP: usize = 40;

/// A log-linear histogram of nanosecond values (HDR-histogram style, fixed
/// 1/32 relative precision, ~1300 buckets, no allocation after creation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    counts: Vec<u64>,
    n: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram { counts: vec![0; (MAX_EXP + 1) * SUB], n: 0, sum: 0, min: u64::MAX, max: 0 }
    }

    fn index(v: u64) -> usize {
        if v < SUB as u64 {
            return v as usize;
        }
        let exp = 63 - v.leading_zeros() as usize; // >= SUB_BITS
        let shift = exp - SUB_BITS as usize;
        let sub = ((v >> shift) as usize) & (SUB - 1);
        let i = (exp - SUB_BITS as usize + 1) * SUB + sub;
        i.min((MAX_EXP + 1) * SUB - 1)
    }

    /// The smallest value that falls in bucket `i`.
    fn lower(i: usize) -> u64 {
        if i < SUB {
            return i as u64;
        }
        let exp = i / SUB - 1 + SUB_BITS as usize;
        let sub = (i % SUB) as u64;
        (1u64 << exp) | (sub << (exp - SUB_BITS as usize))
    }

    fn upper(i: usize) -> u64 {
        if i + 1 >= (MAX_EXP + 1) * SUB {
            return u64::MAX;
        }
        Histogram::lower(i + 1) - 1
    }

    pub fn record(&mut self, v: u64) {
        self.counts[Histogram::index(v)] += 1;
        self.n += 1;
        self.sum += v as u128;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    pub fn record_duration(&mut self, d: Duration) {
        self.record(d.as_nanos().min(u64::MAX as u128) as u64);
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    pub fn min(&self) -> Option<u64> {
        (self.n > 0).then_some(self.min)
    }

    pub fn max(&self) -> Option<u64> {
        (self.n > 0).then_some(self.max)
    }

    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum as f64 / self.n as f64)
    }

    /// The value at percentile `p` in [0, 100] (nearest rank): the midpoint of
    /// the bucket holding that rank, clamped to the observed min and max (so
    /// exact for values below 32, within 1/32 above, and exact at 0 and 100).
    pub fn percentile(&self, p: f64) -> Option<u64> {
        if self.n == 0 || !(0.0..=100.0).contains(&p) {
            return None;
        }
        let rank = ((p / 100.0) * self.n as f64).ceil().max(1.0) as u64;
        // The extreme ranks are known exactly.
        if rank >= self.n {
            return Some(self.max);
        }
        if rank == 1 {
            return Some(self.min);
        }
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = (Histogram::lower(i), Histogram::upper(i).min(self.max));
                let mid = lo + hi.saturating_sub(lo) / 2;
                return Some(mid.clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    /// Non-empty buckets as (lower bound ns, upper bound ns, count).
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| (Histogram::lower(i), Histogram::upper(i), c))
    }

    /// Adds another histogram's counts into this one.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.n += other.n;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Count, min, p50, p99, max and mean in one serializable value.
    pub fn summary(&self) -> HistSummary {
        HistSummary {
            count: self.n,
            min_ns: self.min(),
            p50_ns: self.percentile(50.0),
            p99_ns: self.percentile(99.0),
            max_ns: self.max(),
            mean_ns: self.mean(),
        }
    }
}

/// A compact view of a [`Histogram`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HistSummary {
    pub count: u64,
    pub min_ns: Option<u64>,
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub max_ns: Option<u64>,
    pub mean_ns: Option<f64>,
}

/// One recorded inter-arrival gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gap {
    /// Time since the previous arrival, ns.
    pub gap_ns: u64,
    /// On-wire size of the frame that ended the gap (frame + overhead), bytes.
    pub wire_bytes: u64,
}

impl Gap {
    /// Signed deviation from the ideal gap `wire_bytes / rate`, in ns.
    pub fn deviation_ns(&self, rate: Rate) -> i64 {
        let ideal = rate.time_for(self.wire_bytes).as_nanos() as i64;
        self.gap_ns as i64 - ideal
    }
}

/// Pacing precision of an arrival process against a reference rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GapDeviation {
    /// Gaps in the sample.
    pub samples: usize,
    /// Median of |gap − ideal| in ns.
    pub abs_p50_ns: f64,
    /// 99th percentile of |gap − ideal| in ns.
    pub abs_p99_ns: f64,
    /// Median of the signed deviation (negative: frames come too close).
    pub signed_p50_ns: f64,
}

/// A uniform sample (reservoir, Vitter's algorithm R) of inter-arrival gaps,
/// bounded to `capacity` entries whatever the run length.
#[derive(Debug, Clone)]
pub struct GapRecord {
    last: Option<Instant>,
    seen: u64,
    sample: Vec<Gap>,
    capacity: usize,
    rng: Rng,
}

impl GapRecord {
    pub fn new(capacity: usize, seed: u64) -> GapRecord {
        GapRecord {
            last: None,
            seen: 0,
            sample: Vec::with_capacity(capacity.min(1 << 16)),
            capacity: capacity.max(1),
            rng: Rng::seeded(seed),
        }
    }

    /// Records an arrival at `at` of a frame occupying `wire_bytes` on the wire.
    pub fn arrival(&mut self, at: Instant, wire_bytes: u64) {
        let Some(prev) = self.last.replace(at) else { return };
        let g = Gap { gap_ns: at.saturating_since(prev).as_nanos() as u64, wire_bytes };
        self.seen += 1;
        if self.sample.len() < self.capacity {
            self.sample.push(g);
        } else {
            let j = self.rng.below(self.seen);
            if (j as usize) < self.capacity {
                self.sample[j as usize] = g;
            }
        }
    }

    /// Gaps seen in total (the sample holds at most `capacity` of them).
    pub fn seen(&self) -> u64 {
        self.seen
    }

    pub fn sample(&self) -> &[Gap] {
        &self.sample
    }

    /// Deviation of the sampled gaps from the ideal gap at `rate`; `None`
    /// when nothing was sampled.
    pub fn deviation(&self, rate: Rate) -> Option<GapDeviation> {
        if self.sample.is_empty() {
            return None;
        }
        let signed: Vec<f64> = self.sample.iter().map(|g| g.deviation_ns(rate) as f64).collect();
        let abs: Vec<f64> = signed.iter().map(|d| d.abs()).collect();
        Some(GapDeviation {
            samples: signed.len(),
            abs_p50_ns: stats::percentile(&abs, 50.0)?,
            abs_p99_ns: stats::percentile(&abs, 99.0)?,
            signed_p50_ns: stats::percentile(&signed, 50.0)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(u: u64) -> Instant {
        Instant::from_micros(u)
    }

    #[test]
    fn bins_count_arrivals_departures_drops_and_queue() {
        let mut m = Meter::new(DEFAULT_BIN, 100);
        m.arrived(us(100), 1000);
        m.arrived(us(200), 500);
        m.dropped(us(300), 1500);
        m.departed(us(499), 1000);
        m.departed(us(700), 500);
        m.advance(us(1000));
        let bins: Vec<Bin> = m.drain().collect();
        assert_eq!(bins.len(), 2);
        let b0 = bins[0];
        assert_eq!((b0.start_ns, b0.width_ns), (0, 500_000));
        assert_eq!((b0.arrived_frames, b0.arrived_bytes), (3, 3000));
        assert_eq!((b0.dropped_frames, b0.dropped_bytes), (1, 1500));
        assert_eq!((b0.departed_frames, b0.departed_bytes), (1, 1000));
        assert_eq!((b0.queue_max_bytes, b0.queue_end_bytes, b0.queue_end_frames), (1500, 500, 1));
        assert_eq!(b0.departed_bps(), 16_000_000);
        let b1 = bins[1];
        assert_eq!(b1.start_ns, 500_000);
        assert_eq!((b1.departed_bytes, b1.queue_max_bytes, b1.queue_end_bytes), (500, 500, 0));
    }

    #[test]
    fn idle_bins_are_skipped_but_busy_queue_bins_are_not() {
        let mut m = Meter::new(DEFAULT_BIN, 100);
        m.arrived(us(10), 100);
        m.departed(us(20), 100);
        m.advance(us(10_000));
        assert_eq!(m.drain().count(), 1);
        // A frame that sits in the queue for 3 bins shows in each.
        m.arrived(us(10_100), 100);
        m.departed(us(11_600), 100);
        m.advance(us(12_000));
        let starts: Vec<u64> = m.drain().map(|b| b.start_ns / 1000).collect();
        assert_eq!(starts, vec![10_000, 10_500, 11_000, 11_500]);
    }

    #[test]
    fn pending_bins_are_bounded() {
        let mut m = Meter::new(Duration::from_micros(10), 3);
        for i in 0..10 {
            m.arrived(us(i * 10), 1);
            m.departed(us(i * 10 + 1), 1);
        }
        m.advance(us(1000));
        assert_eq!(m.drain().count(), 3);
        assert_eq!(m.overflowed(), 7);
    }

    #[test]
    fn histogram_buckets_and_percentiles() {
        let mut h = Histogram::new();
        for v in 0..32 {
            h.record(v);
        }
        assert_eq!(h.percentile(50.0), Some(15));
        assert_eq!(h.min(), Some(0));
        assert_eq!(h.max(), Some(31));
        for v in [1000u64, 123_040, 5_000_000_000] {
            let i = Histogram::index(v);
            assert!(Histogram::lower(i) <= v && v <= Histogram::upper(i), "{v}");
            let w = Histogram::upper(i) - Histogram::lower(i) + 1;
            assert!(w as f64 <= v as f64 / 32.0 + 1.0, "{v} bucket width {w}");
        }
        let mut g = Histogram::new();
        for _ in 0..99 {
            g.record(123_040);
        }
        g.record(1_000_000);
        let p50 = g.percentile(50.0).unwrap();
        assert!((p50 as f64 - 123_040.0).abs() <= 123_040.0 / 32.0, "{p50}");
        assert_eq!(g.percentile(100.0), Some(1_000_000));
        assert_eq!(g.summary().count, 100);
        let total: u64 = g.buckets().map(|b| b.2).sum();
        assert_eq!(total, 100);
    }

    #[test]
    fn bucket_bounds_are_contiguous() {
        for i in 0..(MAX_EXP + 1) * SUB - 1 {
            assert_eq!(Histogram::upper(i) + 1, Histogram::lower(i + 1), "bucket {i}");
            assert_eq!(Histogram::index(Histogram::lower(i)), i);
        }
    }

    #[test]
    fn gap_deviation_of_a_perfect_pacer_is_zero() {
        // 1538 wire bytes at 100 Mbit/s: ideal gap 123.04 us.
        let mut g = GapRecord::new(1000, 1);
        for i in 0..100 {
            g.arrival(Instant::from_nanos(i * 123_040), 1538);
        }
        let d = g.deviation(Rate::mbps(100)).unwrap();
        assert_eq!(d.samples, 99);
        assert_eq!((d.abs_p50_ns, d.abs_p99_ns, d.signed_p50_ns), (0.0, 0.0, 0.0));
        // A pacer 10 us late on every frame.
        let mut g = GapRecord::new(1000, 1);
        for i in 0..100 {
            g.arrival(Instant::from_nanos(i * 133_040), 1538);
        }
        let d = g.deviation(Rate::mbps(100)).unwrap();
        assert_eq!((d.abs_p50_ns, d.signed_p50_ns), (10_000.0, 10_000.0));
    }

    #[test]
    fn gap_reservoir_is_bounded() {
        let mut g = GapRecord::new(50, 7);
        for i in 0..10_000 {
            g.arrival(Instant::from_nanos(i * 1000), 100);
        }
        assert_eq!(g.sample().len(), 50);
        assert_eq!(g.seen(), 9_999);
    }
}
