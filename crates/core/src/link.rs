//! One direction of an emulated link, as a pure model on a manual clock.
//!
//! A frame that arrives at `now` goes through, in order:
//! 1. **loss**: the [`Loss`] model may drop it (it then uses no capacity, as
//!    with netem's loss before its queue);
//! 2. **drop-tail buffer**: it is dropped if the backlog plus the frame would
//!    exceed the [`QueueLimit`]. The backlog is every accepted frame that has
//!    not finished serialization, including the one on the wire, counted in
//!    frame bytes (as a router buffer counts packet bytes);
//! 3. **serialization** at the link rate, counted on the wire: frame bytes plus
//!    `overhead` (24 bytes by default: preamble + SFD 8, inter-frame gap 12,
//!    FCS 4; IEEE 802.3 clause 4). A 1514-byte frame thus occupies 1538 bytes,
//!    123.04 µs at 100 Mbit/s. The serialization clock keeps the fraction of a
//!    nanosecond between frames, so long runs do not drift from the rate;
//! 4. **propagation**: a constant delay plus, optionally, a jitter drawn
//!    uniformly from [0, jitter]. The propagation delay is a floor, and a frame
//!    is never delivered before the one ahead of it (no reordering: a frame
//!    whose jitter would overtake waits for its predecessor).
//!
//! The model sees only lengths and assigns each accepted frame a sequential
//! id; the shell keeps the bytes (in a ring indexed by id) and asks
//! [`Link::poll_deliver`] which frame to send when, and
//! [`Link::poll_timeout`] when to wake up next (the quinn/smoltcp style).
//! Frames the shell rejects before the model (malformed, runt, oversize, no
//! room in its ring) are reported with [`Link::reject`] so that counters and
//! the meter see them.
//!
//! Invariants (property-tested): arrived = delivered + dropped + in the
//! system; the backlog never exceeds the limit; departure and delivery times
//! never decrease.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::Duration;

use crate::loss::{Loss, LossSpec};
use crate::meter::{GapRecord, Histogram, Meter, DEFAULT_BIN};
use crate::rng::Rng;
use crate::time::Instant;
use crate::units::{QueueLimit, Rate};

/// Preamble + SFD (8) + inter-frame gap (12) + FCS (4): what an Ethernet frame
/// as a packet socket sees it (no FCS) costs in addition on the wire.
pub const DEFAULT_OVERHEAD: u32 = 24;

/// Parameters of one direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkParams {
    /// Bottleneck rate on the wire; `None` is unlimited (no serialization time).
    pub rate: Option<Rate>,
    /// Bytes added to each frame for the serialization time.
    pub overhead: u32,
    /// Drop-tail buffer.
    pub limit: QueueLimit,
    /// Constant propagation delay.
    pub delay: Duration,
    /// Maximum extra delay, uniform in [0, jitter]; never reorders.
    pub jitter: Duration,
    pub loss: LossSpec,
    /// Seed of the loss, jitter and sampling streams.
    pub seed: u64,
    /// Meter bin width.
    pub meter_bin: Duration,
    /// Closed meter bins kept until drained.
    pub meter_pending: usize,
    /// Inter-arrival gaps kept in the reservoir sample.
    pub gap_sample: usize,
}

impl Default for LinkParams {
    fn default() -> Self {
        LinkParams {
            rate: None,
            overhead: DEFAULT_OVERHEAD,
            limit: QueueLimit::Bytes(1_000_000),
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            loss: LossSpec::None,
            seed: 1,
            meter_bin: DEFAULT_BIN,
            meter_pending: 1 << 16,
            gap_sample: 1 << 16,
        }
    }
}

/// Why a frame was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// The drop-tail buffer was full.
    Queue,
    /// The random loss model chose it.
    Loss,
    /// Shorter than an Ethernet header (14 bytes).
    Runt,
    /// Longer than the largest frame the shell accepts (or truncated).
    Oversize,
    /// Header inconsistent (e.g. an 802.3 length field beyond the frame).
    Malformed,
    /// The shell had no room to hold the frame's bytes.
    Overflow,
}

impl DropReason {
    pub const ALL: [DropReason; 6] = [
        DropReason::Queue,
        DropReason::Loss,
        DropReason::Runt,
        DropReason::Oversize,
        DropReason::Malformed,
        DropReason::Overflow,
    ];

    fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            DropReason::Queue => "queue",
            DropReason::Loss => "loss",
            DropReason::Runt => "runt",
            DropReason::Oversize => "oversize",
            DropReason::Malformed => "malformed",
            DropReason::Overflow => "overflow",
        }
    }
}

/// What happened to an arriving frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Accepted: it finishes serialization at `departs_at` and must be
    /// delivered (sent on) at `delivers_at`.
    Queued {
        id: u64,
        departs_at: Instant,
        delivers_at: Instant,
    },
    Dropped(DropReason),
}

/// A frame due for delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    pub id: u64,
    pub len: u32,
    pub departs_at: Instant,
    pub delivers_at: Instant,
}

/// Frame and byte counts of one direction since creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Counters {
    pub arrived_frames: u64,
    pub arrived_bytes: u64,
    pub departed_frames: u64,
    pub departed_bytes: u64,
    pub delivered_frames: u64,
    pub delivered_bytes: u64,
    /// Drops by reason, indexed like [`DropReason::ALL`].
    pub dropped_frames: [u64; 6],
    pub dropped_bytes: [u64; 6],
    pub max_queue_bytes: u64,
    pub max_queue_frames: u64,
    /// Time of the first arrival and the last delivery, if any.
    pub first_arrival: Option<Instant>,
    pub last_delivery: Option<Instant>,
}

impl Counters {
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped_frames[reason.index()]
    }
    pub fn total_dropped_frames(&self) -> u64 {
        self.dropped_frames.iter().sum()
    }
    pub fn total_dropped_bytes(&self) -> u64 {
        self.dropped_bytes.iter().sum()
    }
}

#[derive(Debug, Clone, Copy)]
struct Queued {
    departs_at: Instant,
    len: u32,
}

/// One direction of a link; see the module docs.
#[derive(Debug, Clone)]
pub struct Link {
    p: LinkParams,
    loss: Loss,
    jitter_rng: Rng,
    /// When the serializer finishes the last accepted frame ...
    busy_until: Instant,
    /// ... plus this many (bit·ns/s) units, i.e. a fraction of a ns × rate.
    busy_frac: u128,
    /// Accepted frames not yet fully serialized (the backlog), oldest first.
    queue: VecDeque<Queued>,
    queue_bytes: u64,
    /// Accepted frames not yet delivered (includes the queue), oldest first.
    pending: VecDeque<Delivery>,
    next_id: u64,
    last_delivers_at: Instant,
    last_departure: Option<Instant>,
    counters: Counters,
    meter: Meter,
    departure_gaps: Histogram,
    arrival_gaps: GapRecord,
}

impl Link {
    pub fn new(p: LinkParams) -> Link {
        let meter = Meter::new(p.meter_bin, p.meter_pending);
        Link {
            loss: Loss::new(p.loss, Rng::fork(p.seed, 1).next_u64()),
            jitter_rng: Rng::fork(p.seed, 2),
            arrival_gaps: GapRecord::new(p.gap_sample, Rng::fork(p.seed, 3).next_u64()),
            busy_until: Instant::ZERO,
            busy_frac: 0,
            queue: VecDeque::new(),
            queue_bytes: 0,
            pending: VecDeque::new(),
            next_id: 0,
            last_delivers_at: Instant::ZERO,
            last_departure: None,
            counters: Counters::default(),
            meter,
            departure_gaps: Histogram::new(),
            p,
        }
    }

    pub fn params(&self) -> &LinkParams {
        &self.p
    }

    /// On-wire size of a frame of `len` bytes.
    pub fn wire_bytes(&self, len: usize) -> u64 {
        len as u64 + self.p.overhead as u64
    }

    /// Serialization time of a frame of `len` bytes (zero when unlimited).
    pub fn serialization_time(&self, len: usize) -> Duration {
        match self.p.rate {
            Some(r) => r.time_for(self.wire_bytes(len)),
            None => Duration::ZERO,
        }
    }

    /// Processes every departure (end of serialization) at or before `now`:
    /// the backlog shrinks, the meter and gap histogram record it. Every
    /// other call does this first; the shell may call it to close meter bins.
    pub fn advance(&mut self, now: Instant) {
        while let Some(q) = self.queue.front().copied() {
            if q.departs_at > now {
                break;
            }
            self.queue.pop_front();
            self.queue_bytes -= q.len as u64;
            self.counters.departed_frames += 1;
            self.counters.departed_bytes += q.len as u64;
            if let Some(prev) = self.last_departure.replace(q.departs_at) {
                self.departure_gaps.record_duration(q.departs_at - prev);
            }
            self.meter.departed(q.departs_at, q.len as u64);
        }
        self.meter.advance(now);
    }

    fn drop_frame(&mut self, now: Instant, len: usize, reason: DropReason) -> Verdict {
        self.counters.dropped_frames[reason.index()] += 1;
        self.counters.dropped_bytes[reason.index()] += len as u64;
        self.meter.dropped(now, len as u64);
        Verdict::Dropped(reason)
    }

    fn note_arrival(&mut self, now: Instant, len: usize) {
        self.counters.arrived_frames += 1;
        self.counters.arrived_bytes += len as u64;
        self.counters.first_arrival.get_or_insert(now);
        let wire = self.wire_bytes(len);
        self.arrival_gaps.arrival(now, wire);
    }

    /// Counts a frame the shell dropped before offering it to the model.
    /// `now` must not be earlier than in previous calls.
    pub fn reject(&mut self, now: Instant, len: usize, reason: DropReason) {
        self.advance(now);
        self.note_arrival(now, len);
        self.drop_frame(now, len, reason);
    }

    /// Offers a frame of `len` bytes arriving at `now` (not earlier than in
    /// previous calls).
    pub fn enqueue(&mut self, now: Instant, len: usize) -> Verdict {
        self.advance(now);
        self.note_arrival(now, len);
        if self.loss.lose() {
            return self.drop_frame(now, len, DropReason::Loss);
        }
        let fits = match self.p.limit {
            QueueLimit::Bytes(b) => self.queue_bytes + len as u64 <= b,
            QueueLimit::Packets(n) => (self.queue.len() as u64) < n,
        };
        if !fits {
            return self.drop_frame(now, len, DropReason::Queue);
        }

        // Serialization clock: starts when both the frame and the wire are there.
        let departs_at = match self.p.rate {
            None => now,
            Some(rate) => {
                let rate = rate.bits_per_sec().max(1) as u128;
                if now > self.busy_until {
                    self.busy_until = now;
                    self.busy_frac = 0;
                }
                // Exact: time = wire bits / rate, carried as ns plus a remainder.
                let total = self.wire_bytes(len) as u128 * 8 * 1_000_000_000 + self.busy_frac;
                self.busy_until += Duration::from_nanos((total / rate) as u64);
                self.busy_frac = total % rate;
                self.busy_until
            }
        };
        let jitter = if self.p.jitter.is_zero() {
            Duration::ZERO
        } else {
            Duration::from_nanos(self.jitter_rng.below(self.p.jitter.as_nanos() as u64 + 1))
        };
        let delivers_at = (departs_at + self.p.delay + jitter).max(self.last_delivers_at);
        self.last_delivers_at = delivers_at;

        let id = self.next_id;
        self.next_id += 1;
        self.queue.push_back(Queued { departs_at, len: len as u32 });
        self.queue_bytes += len as u64;
        self.pending.push_back(Delivery { id, len: len as u32, departs_at, delivers_at });
        self.counters.max_queue_bytes = self.counters.max_queue_bytes.max(self.queue_bytes);
        self.counters.max_queue_frames = self.counters.max_queue_frames.max(self.queue.len() as u64);
        self.meter.arrived(now, len as u64);
        // An unlimited link serializes instantly: account the departure now.
        if departs_at <= now {
            self.advance(now);
        }
        Verdict::Queued { id, departs_at, delivers_at }
    }

    /// The next frame due at or before `now`, oldest first. The shell sends
    /// it and calls again until `None`.
    pub fn poll_deliver(&mut self, now: Instant) -> Option<Delivery> {
        self.poll_deliver_early(now, Duration::ZERO)
    }

    /// As [`Link::poll_deliver`], but also hands out a frame due within
    /// `early` after `now`, for a shell whose timer wakes up coarsely: sending
    /// a frame a few µs early beats burning a core to wait for it. The model's
    /// clock still only advances to `now` (so the backlog stays exact); such a
    /// frame may count as delivered before it counts as departed.
    pub fn poll_deliver_early(&mut self, now: Instant, early: Duration) -> Option<Delivery> {
        let d = *self.pending.front()?;
        if d.delivers_at > now + early {
            return None;
        }
        self.advance(now);
        self.pending.pop_front();
        self.counters.delivered_frames += 1;
        self.counters.delivered_bytes += d.len as u64;
        self.counters.last_delivery = Some(d.delivers_at);
        Some(d)
    }

    /// When the next delivery is due, if any frame is in the system.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.pending.front().map(|d| d.delivers_at)
    }

    /// Backlog (not yet serialized) as of the last call: (bytes, frames).
    pub fn backlog(&self) -> (u64, u64) {
        (self.queue_bytes, self.queue.len() as u64)
    }

    /// When the serializer will have finished every accepted frame (a frame
    /// arriving now cannot depart before it). In the past when idle.
    pub fn busy_until(&self) -> Instant {
        self.busy_until
    }

    /// Frames accepted but not yet delivered (queued or propagating).
    pub fn in_system(&self) -> u64 {
        self.pending.len() as u64
    }

    /// The id the next accepted frame will get; ids of frames in the system
    /// are the `in_system()` ids just below it.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    pub fn meter(&mut self) -> &mut Meter {
        &mut self.meter
    }

    /// Gaps between consecutive ends of serialization.
    pub fn departure_gaps(&self) -> &Histogram {
        &self.departure_gaps
    }

    /// Sampled inter-arrival gaps with on-wire sizes (pacing precision).
    pub fn arrival_gaps(&self) -> &GapRecord {
        &self.arrival_gaps
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn link(rate_mbps: u64, limit: QueueLimit, delay_ms: u64) -> Link {
        Link::new(LinkParams {
            rate: Some(Rate::mbps(rate_mbps)),
            limit,
            delay: Duration::from_millis(delay_ms),
            ..LinkParams::default()
        })
    }

    fn queued(v: Verdict) -> (u64, Instant, Instant) {
        match v {
            Verdict::Queued { id, departs_at, delivers_at } => (id, departs_at, delivers_at),
            other => panic!("expected Queued, got {other:?}"),
        }
    }

    #[test]
    fn full_frame_at_100mbit_takes_123_04_us() {
        let mut l = link(100, QueueLimit::Bytes(1_000_000), 0);
        assert_eq!(l.wire_bytes(1514), 1538);
        assert_eq!(l.serialization_time(1514), Duration::from_nanos(123_040));
        let (id, dep, del) = queued(l.enqueue(Instant::ZERO, 1514));
        assert_eq!((id, dep, del), (0, Instant::from_nanos(123_040), Instant::from_nanos(123_040)));
        // Back to back: the second waits for the first.
        let (_, dep2, _) = queued(l.enqueue(Instant::from_nanos(1), 1514));
        assert_eq!(dep2, Instant::from_nanos(246_080));
        // After an idle period the clock restarts at the arrival.
        let (_, dep3, _) = queued(l.enqueue(Instant::from_millis(10), 1514));
        assert_eq!(dep3, Instant::from_millis(10) + Duration::from_nanos(123_040));
    }

    #[test]
    fn overhead_is_configurable() {
        let mut l =
            Link::new(LinkParams { rate: Some(Rate::mbps(100)), overhead: 0, ..LinkParams::default() });
        let (_, dep, _) = queued(l.enqueue(Instant::ZERO, 1514));
        assert_eq!(dep, Instant::from_nanos(121_120));
    }

    #[test]
    fn fractional_nanoseconds_do_not_drift() {
        // 1538 bytes at 3 Mbit/s = 4101333.33.. ns; after 3 frames exactly 12304000 ns.
        let mut l = link(3, QueueLimit::Packets(10), 0);
        let deps: Vec<Instant> = (0..3).map(|_| queued(l.enqueue(Instant::ZERO, 1514)).1).collect();
        assert_eq!(deps, vec![Instant(4_101_333), Instant(8_202_666), Instant(12_304_000)]);
    }

    #[test]
    fn burst_larger_than_buffer_drops_exactly_the_excess() {
        // Buffer of 10 full frames; a burst of 25 at one instant.
        let mut l = link(100, QueueLimit::Bytes(10 * 1514), 20);
        let verdicts: Vec<Verdict> = (0..25).map(|_| l.enqueue(Instant::ZERO, 1514)).collect();
        let n_queued = verdicts.iter().filter(|v| matches!(v, Verdict::Queued { .. })).count();
        assert_eq!(n_queued, 10);
        assert_eq!(l.counters().dropped(DropReason::Queue), 15);
        assert!(verdicts[..10].iter().all(|v| matches!(v, Verdict::Queued { .. })));
        // In packets.
        let mut l = link(100, QueueLimit::Packets(7), 20);
        for _ in 0..20 {
            l.enqueue(Instant::ZERO, 100);
        }
        assert_eq!(l.counters().dropped(DropReason::Queue), 13);
        assert_eq!(l.backlog(), (700, 7));
    }

    #[test]
    fn queue_drains_at_the_rate_and_frees_room() {
        let mut l = link(100, QueueLimit::Packets(2), 0);
        assert!(matches!(l.enqueue(Instant::ZERO, 1514), Verdict::Queued { .. }));
        assert!(matches!(l.enqueue(Instant::ZERO, 1514), Verdict::Queued { .. }));
        assert_eq!(l.enqueue(Instant::ZERO, 1514), Verdict::Dropped(DropReason::Queue));
        // At 123.04 us the first has left the wire: room for one.
        let (_, dep, _) = queued(l.enqueue(Instant::from_nanos(123_040), 1514));
        assert_eq!(dep, Instant::from_nanos(3 * 123_040));
        assert_eq!(l.enqueue(Instant::from_nanos(123_041), 1514), Verdict::Dropped(DropReason::Queue));
    }

    #[test]
    fn delay_and_delivery_order() {
        let mut l = link(100, QueueLimit::Bytes(1_000_000), 20);
        let (_, dep, del) = queued(l.enqueue(Instant::ZERO, 1514));
        assert_eq!(del, dep + Duration::from_millis(20));
        assert_eq!(l.poll_timeout(), Some(del));
        assert_eq!(l.poll_deliver(Instant::from_millis(20)), None);
        let d = l.poll_deliver(del).unwrap();
        assert_eq!((d.id, d.len, d.delivers_at), (0, 1514, del));
        assert_eq!(l.poll_timeout(), None);
        assert_eq!(l.counters().delivered_frames, 1);
    }

    #[test]
    fn early_delivery_window() {
        let mut l = link(100, QueueLimit::Bytes(1_000_000), 1);
        let (_, dep, del) = queued(l.enqueue(Instant::ZERO, 1514));
        let before = del - Duration::from_micros(20);
        assert_eq!(l.poll_deliver_early(before - Duration::from_nanos(1), Duration::from_micros(20)), None);
        let d = l.poll_deliver_early(before, Duration::from_micros(20)).unwrap();
        assert_eq!(d.delivers_at, del);
        assert!(dep < before);
        assert_eq!(l.in_system(), 0);
    }

    #[test]
    fn unlimited_rate_only_delays() {
        let mut l = Link::new(LinkParams { delay: Duration::from_millis(5), ..LinkParams::default() });
        let (_, dep, del) = queued(l.enqueue(Instant::from_millis(1), 1514));
        assert_eq!((dep, del), (Instant::from_millis(1), Instant::from_millis(6)));
        assert_eq!(l.backlog(), (0, 0));
        assert_eq!(l.counters().departed_frames, 1);
    }

    #[test]
    fn jitter_stays_in_range_and_never_reorders() {
        let mut l = Link::new(LinkParams {
            rate: Some(Rate::gbps(1)),
            delay: Duration::from_millis(10),
            jitter: Duration::from_millis(2),
            seed: 5,
            ..LinkParams::default()
        });
        let mut last = Instant::ZERO;
        let mut spread = (u64::MAX, 0u64);
        for i in 0..2000u64 {
            let now = Instant::from_micros(i * 50);
            let (_, dep, del) = queued(l.enqueue(now, 1514));
            assert!(del >= last);
            assert!(del >= dep + Duration::from_millis(10));
            let extra = (del - dep).as_nanos() as u64 - 10_000_000;
            spread = (spread.0.min(extra), spread.1.max(extra));
            last = del;
        }
        assert!(spread.1 <= 2_000_000 + 50_000, "{spread:?}");
        assert!(spread.1 > 1_500_000, "jitter used its range: {spread:?}");
    }

    #[test]
    fn loss_is_counted_and_reproducible() {
        let p = LinkParams { loss: LossSpec::Bernoulli { p: 0.1 }, seed: 11, ..LinkParams::default() };
        let run = || {
            let mut l = Link::new(p.clone());
            (0..1000u64)
                .map(|i| matches!(l.enqueue(Instant::from_micros(i * 200), 1000), Verdict::Dropped(_)))
                .collect::<Vec<_>>()
        };
        let a = run();
        assert_eq!(a, run());
        let lost = a.iter().filter(|x| **x).count();
        assert!((60..140).contains(&lost), "{lost}");
    }

    #[test]
    fn rejects_are_counted_and_metered() {
        let mut l = link(100, QueueLimit::Packets(10), 0);
        l.reject(Instant::ZERO, 10, DropReason::Runt);
        l.reject(Instant::ZERO, 9000, DropReason::Oversize);
        assert_eq!(l.counters().arrived_frames, 2);
        assert_eq!(l.counters().dropped(DropReason::Runt), 1);
        assert_eq!(l.counters().dropped(DropReason::Oversize), 1);
        l.advance(Instant::from_millis(1));
        let b: Vec<_> = l.meter().drain().collect();
        assert_eq!((b[0].dropped_frames, b[0].dropped_bytes), (2, 9010));
    }

    #[test]
    fn meter_sees_the_rate_limit() {
        // Saturate 100 Mbit/s with full frames for 10 ms; each full 500 us bin
        // departs 500 / 123.04 ≈ 4.06 frames.
        let mut l = link(100, QueueLimit::Bytes(1_000_000), 0);
        for i in 0..200u64 {
            l.enqueue(Instant::from_micros(i * 50), 1514);
        }
        l.advance(Instant::from_millis(10));
        let bins: Vec<_> = l.meter().drain().collect();
        assert_eq!(bins.len(), 20);
        for b in &bins[1..] {
            assert!((4..=5).contains(&b.departed_frames), "{b:?}");
        }
        let total: u64 = bins.iter().map(|b| b.departed_frames).sum();
        // 10 ms / 123.04 us = 81.27 frames departed.
        assert_eq!(total, 81);
        assert_eq!(
            l.departure_gaps().percentile(50.0).map(|v| v.abs_diff(123_040) < 123_040 / 32),
            Some(true)
        );
    }

    /// One step of a random scenario.
    #[derive(Debug, Clone)]
    enum Op {
        Arrive { dt_ns: u64, len: usize },
        Deliver { dt_ns: u64 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u64..200_000, 14usize..1515).prop_map(|(dt_ns, len)| Op::Arrive { dt_ns, len }),
            1 => (0u64..2_000_000).prop_map(|dt_ns| Op::Deliver { dt_ns }),
        ]
    }

    fn params() -> impl Strategy<Value = LinkParams> {
        (
            prop::option::of(1_000_000u64..2_000_000_000),
            prop_oneof![(1u64..50_000).prop_map(QueueLimit::Bytes), (1u64..50).prop_map(QueueLimit::Packets)],
            0u64..5_000_000,
            0u64..2_000_000,
            prop_oneof![
                Just(LossSpec::None),
                (0.0f64..0.5).prop_map(|p| LossSpec::Bernoulli { p }),
                (0.01f64..0.5, 0.01f64..0.9).prop_map(|(p, r)| LossSpec::GilbertElliott {
                    p,
                    r,
                    h: 0.8,
                    k: 0.01
                })
            ],
            any::<u64>(),
        )
            .prop_map(|(rate, limit, delay, jitter, loss, seed)| LinkParams {
                rate: rate.map(Rate),
                limit,
                delay: Duration::from_nanos(delay),
                jitter: Duration::from_nanos(jitter),
                loss,
                seed,
                ..LinkParams::default()
            })
    }

    proptest! {
        #[test]
        fn invariants_hold(p in params(), ops in prop::collection::vec(op(), 1..400)) {
            let mut l = Link::new(p.clone());
            let mut now = Instant::ZERO;
            let mut last_dep = Instant::ZERO;
            let mut last_del = Instant::ZERO;
            let mut next_expected_id = 0u64;
            for o in ops {
                match o {
                    Op::Arrive { dt_ns, len } => {
                        now += Duration::from_nanos(dt_ns);
                        if let Verdict::Queued { departs_at, delivers_at, .. } = l.enqueue(now, len) {
                            prop_assert!(departs_at >= last_dep);
                            prop_assert!(delivers_at >= last_del);
                            prop_assert!(departs_at >= now);
                            prop_assert!(delivers_at >= departs_at + p.delay);
                            last_dep = departs_at;
                            last_del = delivers_at;
                        }
                    }
                    Op::Deliver { dt_ns } => {
                        now += Duration::from_nanos(dt_ns);
                        while let Some(d) = l.poll_deliver(now) {
                            prop_assert_eq!(d.id, next_expected_id);
                            prop_assert!(d.delivers_at <= now);
                            next_expected_id += 1;
                        }
                    }
                }
                let (qb, qf) = l.backlog();
                match p.limit {
                    QueueLimit::Bytes(b) => prop_assert!(qb <= b),
                    QueueLimit::Packets(n) => prop_assert!(qf <= n),
                }
                let c = *l.counters();
                prop_assert_eq!(c.arrived_frames, c.delivered_frames + c.total_dropped_frames() + l.in_system());
                prop_assert!(c.departed_frames >= c.delivered_frames);
            }
            // Drain everything: the system empties and the identity still holds.
            let mut t = now + Duration::from_secs(10);
            while let Some(d) = l.poll_deliver(t) {
                prop_assert_eq!(d.id, next_expected_id);
                next_expected_id += 1;
                t = t.max(d.delivers_at);
            }
            l.advance(t);
            let c = *l.counters();
            prop_assert_eq!(l.in_system(), 0);
            prop_assert_eq!(l.backlog(), (0, 0));
            prop_assert_eq!(c.arrived_frames, c.delivered_frames + c.total_dropped_frames());
            prop_assert_eq!(c.arrived_bytes, c.delivered_bytes + c.total_dropped_bytes());
            prop_assert_eq!(c.departed_frames, c.delivered_frames);
            // The meter saw the same totals.
            let bins: Vec<_> = l.meter().drain().collect();
            let cur = l.meter().current();
            let arrived: u64 = bins.iter().map(|b| b.arrived_frames).sum::<u64>() + cur.arrived_frames;
            let dropped: u64 = bins.iter().map(|b| b.dropped_frames).sum::<u64>() + cur.dropped_frames;
            let departed: u64 = bins.iter().map(|b| b.departed_bytes).sum::<u64>() + cur.departed_bytes;
            prop_assert_eq!(arrived, c.arrived_frames);
            prop_assert_eq!(dropped, c.total_dropped_frames());
            prop_assert_eq!(departed, c.departed_bytes);
            for b in &bins {
                match p.limit {
                    QueueLimit::Bytes(lim) => prop_assert!(b.queue_max_bytes <= lim),
                    QueueLimit::Packets(n) => prop_assert!(b.queue_end_frames <= n),
                }
            }
        }
    }
}
