//! What the emulator reports: per direction, frames and bytes in and out,
//! drops by reason, the largest queue, the achieved rate and how late frames
//! left compared with the model's schedule.

use serde::Serialize;

use tcpaccel_core::link::{Counters, DropReason};
use tcpaccel_core::meter::{GapDeviation, HistSummary};
use tcpaccel_core::units::{format_duration, Bytes, Rate};
use tcpaccel_core::Instant;

use crate::config::{LinkConfig, Scheduling};

/// Frames dropped, by reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Drops {
    /// Drop-tail buffer full.
    pub queue: u64,
    /// Random loss model.
    pub loss: u64,
    /// Shorter than an Ethernet header.
    pub runt: u64,
    /// Longer than `max_frame` (are offloads on?).
    pub oversize: u64,
    /// Inconsistent Ethernet header.
    pub malformed: u64,
    /// No room in the emulator's frame store.
    pub overflow: u64,
    /// Accepted but the send on the far interface failed.
    pub tx_error: u64,
    /// Dropped by the kernel before the emulator read them (receive buffer full).
    pub kernel: u64,
}

impl Drops {
    pub fn total(&self) -> u64 {
        self.queue
            + self.loss
            + self.runt
            + self.oversize
            + self.malformed
            + self.overflow
            + self.tx_error
            + self.kernel
    }

    pub(crate) fn from_counters(c: &Counters, tx_error: u64, kernel: u64) -> Drops {
        Drops {
            queue: c.dropped(DropReason::Queue),
            loss: c.dropped(DropReason::Loss),
            runt: c.dropped(DropReason::Runt),
            oversize: c.dropped(DropReason::Oversize),
            malformed: c.dropped(DropReason::Malformed),
            overflow: c.dropped(DropReason::Overflow),
            tx_error,
            kernel,
        }
    }
}

/// One direction's report.
#[derive(Debug, Clone, Serialize)]
pub struct DirectionSummary {
    /// Interface frames are read from.
    pub from: String,
    /// Interface frames are sent out of.
    pub to: String,
    pub config: LinkConfig,
    pub arrived_frames: u64,
    pub arrived_bytes: u64,
    pub delivered_frames: u64,
    pub delivered_bytes: u64,
    pub drops: Drops,
    /// Accepted frames not yet delivered (queued or propagating) at this moment.
    pub in_flight_frames: u64,
    pub max_queue_bytes: u64,
    pub max_queue_frames: u64,
    /// The transfer window, seconds: the time from the first to the last
    /// frame of each transfer, summed ([`TransferWindow`]: a pause over
    /// [`IDLE_GAP`] ends a transfer; transfers under 1/[`MIN_SHARE`] of the
    /// bytes are left out). The two rates below are over it, not over the
    /// time the emulator was up: an idle network before, between and after
    /// transfers does not dilute them.
    pub window_s: f64,
    /// Rate of delivered frames counted on the wire (frame + overhead) over
    /// the transfer window, bit/s; equals the link rate when saturated.
    pub achieved_wire_bps: u64,
    /// Rate of delivered frame bytes (without the overhead) over the transfer window, bit/s.
    pub window_bps: u64,
    /// Delivered frame bytes over the whole time the emulator ran, idle time
    /// included, bit/s (JSON only: the text gives the window's rates).
    pub mean_bps: u64,
    /// How late frames were sent compared with the model's delivery time.
    pub lateness: HistSummary,
    /// Meter bins lost because the writer fell behind.
    pub meter_bins_lost: u64,
    /// Frames read (all, rejected ones too) whose arrival time is the
    /// kernel's receive stamp; the others are timed by the read, which may
    /// come up to 1 ms after the arrival while the delay leaves room.
    pub stamped_arrivals: u64,
    /// The longest time (ns) the thread took from one round to the next
    /// beyond the sleep it asked for (its work, and any time it was not
    /// run): a host stall, whose arrivals come in as one burst.
    pub away_max_ns: u64,
    /// Inter-arrival gaps of the frames this direction read, seen in total.
    pub arrival_gaps: u64,
    /// How far a uniform sample of those gaps (at most
    /// [`GAP_SAMPLE`](crate::GAP_SAMPLE)) lies from the ideal gap of each
    /// frame at the link's rate (on-wire size ÷ rate): a sender's pacing
    /// precision, frame by frame. Only in the final summary (taken when the
    /// emulator stops) and only for a rate-limited direction.
    pub arrival_gap_deviation: Option<GapDeviation>,
    /// CPU time this direction's thread used, seconds.
    pub cpu_s: f64,
    /// The CPU scheduling the thread got.
    pub scheduling: Scheduling,
    /// Set when this direction's thread stopped on an error.
    pub error: Option<String>,
}

impl DirectionSummary {
    pub(crate) fn new(from: &str, to: &str, config: &LinkConfig) -> DirectionSummary {
        DirectionSummary {
            from: from.to_string(),
            to: to.to_string(),
            config: config.clone(),
            arrived_frames: 0,
            arrived_bytes: 0,
            delivered_frames: 0,
            delivered_bytes: 0,
            drops: Drops::default(),
            in_flight_frames: 0,
            max_queue_bytes: 0,
            max_queue_frames: 0,
            window_s: 0.0,
            achieved_wire_bps: 0,
            window_bps: 0,
            mean_bps: 0,
            lateness: tcpaccel_core::meter::Histogram::new().summary(),
            meter_bins_lost: 0,
            stamped_arrivals: 0,
            away_max_ns: 0,
            arrival_gaps: 0,
            arrival_gap_deviation: None,
            cpu_s: 0.0,
            scheduling: Scheduling::Normal,
            error: None,
        }
    }
}

/// A pause in deliveries longer than this ends a transfer: the idle time
/// after it is not part of the transfer window. Longer than the gaps of a
/// live flow (an ACK clock, a paced 1 Mbit/s stream's 12 ms, an RTO).
pub const IDLE_GAP: std::time::Duration = std::time::Duration::from_secs(1);

/// Transfers that carried less than 1/`MIN_SHARE` of a direction's bytes are
/// left out of its window: the neighbour discovery and multicast reports a
/// fresh namespace sends for a second or two (a few hundred bytes, frames
/// 0.2–0.7 s apart) would otherwise add their time to a 2 s transfer.
pub const MIN_SHARE: u64 = 100;

/// One transfer: deliveries no more than [`IDLE_GAP`] apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Transfer {
    first: Instant,
    last: Instant,
    /// Bytes after the first frame (n frames span the time with n − 1).
    wire_after_first: u64,
    frames_after_first: u64,
    /// Every frame byte, for the share.
    bytes: u64,
}

/// Where a direction's traffic flowed, so the rates are taken over the time
/// data moved, not over the time the emulator was up: the durations of the
/// transfers that carried at least 1/[`MIN_SHARE`] of the bytes, summed. A
/// transfer below that share now stays below it (the total only grows), so
/// it is dropped at once and at most `MIN_SHARE` ended ones are kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransferWindow {
    current: Option<Transfer>,
    ended: Vec<Transfer>,
    total: u64,
}

/// The transfer window's length and the rates over it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub seconds: f64,
    pub wire_bps: u64,
    pub frame_bps: u64,
}

impl TransferWindow {
    /// A frame of `frame` bytes (`wire` on the wire) delivered at `at`.
    pub fn delivered(&mut self, at: Instant, wire: u64, frame: u64) {
        self.total += frame;
        match &mut self.current {
            Some(t) if at.saturating_since(t.last) <= IDLE_GAP => {
                t.last = at;
                t.wire_after_first += wire;
                t.frames_after_first += frame;
                t.bytes += frame;
            }
            current => {
                let start = Transfer {
                    first: at,
                    last: at,
                    wire_after_first: 0,
                    frames_after_first: 0,
                    bytes: frame,
                };
                if let Some(t) = current.replace(start) {
                    self.ended.push(t);
                }
                let total = self.total;
                self.ended.retain(|t| t.bytes.saturating_mul(MIN_SHARE) >= total);
            }
        }
    }

    /// The window so far.
    pub fn rates(&self) -> Window {
        let (mut span, mut wire, mut frames) = (std::time::Duration::ZERO, 0u64, 0u64);
        for t in self.ended.iter().chain(self.current.iter()) {
            if t.bytes.saturating_mul(MIN_SHARE) >= self.total {
                span += t.last.saturating_since(t.first);
                wire += t.wire_after_first;
                frames += t.frames_after_first;
            }
        }
        let ns = span.as_nanos();
        let rate =
            |bytes: u64| (u128::from(bytes) * 8 * 1_000_000_000).checked_div(ns).map_or(0, |r| r as u64);
        Window { seconds: ns as f64 / 1e9, wire_bps: rate(wire), frame_bps: rate(frames) }
    }
}

/// The emulator's report, for `--json` a single object with `"type": "emu_summary"`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Seconds since the emulator started.
    pub elapsed_s: f64,
    pub a_to_b: DirectionSummary,
    pub b_to_a: DirectionSummary,
    /// Set when writing the meter output failed.
    pub meter_error: Option<String>,
}

impl Summary {
    /// A few human-readable lines.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "emulator summary after {:.3} s up (rates over each direction's transfer window: the time frames flowed, pauses over {} and transfers under {}% of the bytes left out)\n",
            self.elapsed_s,
            format_duration(IDLE_GAP),
            100 / MIN_SHARE
        );
        for (name, d) in [("a->b", &self.a_to_b), ("b->a", &self.b_to_a)] {
            let rate = d.config.rate.map_or("unlimited".to_string(), |r| r.to_string());
            s += &format!(
                "  {name} {} -> {}  [rate {rate}, delay {}, jitter {}, buffer {}, loss {}, seed {}]\n",
                d.from,
                d.to,
                format_duration(d.config.delay),
                format_duration(d.config.jitter),
                d.config.buffer,
                d.config.loss,
                d.config.seed
            );
            s += &format!(
                "    frames in {} ({}), delivered {} ({}), in flight {}\n",
                d.arrived_frames,
                Bytes(d.arrived_bytes),
                d.delivered_frames,
                Bytes(d.delivered_bytes),
                d.in_flight_frames
            );
            let x = &d.drops;
            s += &format!(
                "    drops {}: queue {}, loss {}, runt {}, oversize {}, malformed {}, overflow {}, tx error {}, kernel {}\n",
                x.total(),
                x.queue,
                x.loss,
                x.runt,
                x.oversize,
                x.malformed,
                x.overflow,
                x.tx_error,
                x.kernel
            );
            let late = |v: Option<u64>| {
                v.map_or("-".into(), |ns| format_duration(std::time::Duration::from_nanos(ns)))
            };
            s += &format!(
                "    transfer window {:.3} s: {} on the wire (frames + {} B overhead each), {} of frames\n",
                d.window_s,
                Rate(d.achieved_wire_bps),
                d.config.overhead,
                Rate(d.window_bps),
            );
            s += &format!(
                "    max queue {} / {} frames, lateness against the model's delivery time p50 {} p99 {} max {}, longest away {}, cpu {:.2} s\n",
                Bytes(d.max_queue_bytes),
                d.max_queue_frames,
                late(d.lateness.p50_ns),
                late(d.lateness.p99_ns),
                late(d.lateness.max_ns),
                late(Some(d.away_max_ns)),
                d.cpu_s
            );
            if let Some(g) = &d.arrival_gap_deviation {
                let us = |ns: f64| ns / 1e3;
                s += &format!(
                    "    arrival gaps against the rate's ideal (the sender's pacing, frame by frame: each gap between two \
                     arriving frames minus the time the rate needs for the second; 0 = exactly at the rate, negative = \
                     closer): |deviation| p50 {:.1} us, p99 {:.1} us, signed p50 {:.1} us ({} of {} gaps sampled; {} of {} \
                     frames timed by kernel stamp)\n",
                    us(g.abs_p50_ns),
                    us(g.abs_p99_ns),
                    us(g.signed_p50_ns),
                    g.samples,
                    d.arrival_gaps,
                    d.stamped_arrivals,
                    d.arrived_frames
                );
            }
            if d.scheduling != Scheduling::Realtime {
                s += &format!("    scheduling: {:?} (no real-time priority)\n", d.scheduling);
            }
            if let Some(e) = &d.error {
                s += &format!("    stopped on error: {e}\n");
            }
        }
        if let Some(e) = &self.meter_error {
            s += &format!("  meter output failed: {e}\n");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rates_are_over_the_transfer_window() {
        let at = |ms: u64| Instant::ZERO + Duration::from_millis(ms);
        let mut w = TransferWindow::default();
        assert_eq!(w.rates(), Window { seconds: 0.0, wire_bps: 0, frame_bps: 0 });
        // A fresh namespace's chatter: 5 frames 300 ms apart (one transfer of 1.2 s).
        for i in 0..5 {
            w.delivered(at(300 * i), 110, 86);
        }
        assert_eq!(w.rates(), Window { seconds: 1.2, wire_bps: 2_933, frame_bps: 2_293 }, "alone it counts");
        // 1001 frames of 1514 B (1538 B on the wire) every 2 ms from 5 s: the
        // last 1000 span 2 s; the chatter, 430 of 1.5 MB, is left out.
        for i in 0..=1000 {
            w.delivered(at(5000 + 2 * i), 1538, 1514);
        }
        assert_eq!(w.rates(), Window { seconds: 2.0, wire_bps: 6_152_000, frame_bps: 6_056_000 });
        // 10 s idle, then a second transfer of 1 s at the same rate: 3 s in all.
        for i in 0..=500 {
            w.delivered(at(17_000 + 2 * i), 1538, 1514);
        }
        assert_eq!(w.rates(), Window { seconds: 3.0, wire_bps: 6_152_000, frame_bps: 6_056_000 });
        // A pause of exactly IDLE_GAP still belongs to the transfer.
        w.delivered(at(19_000), 1538, 1514);
        assert_eq!(w.rates().seconds, 4.0);
        assert!(
            w.ended.len() <= MIN_SHARE as usize && w.ended.len() == 1,
            "the chatter is dropped: {:?}",
            w.ended
        );
    }

    #[test]
    fn the_text_gives_the_window_rates_and_says_what_the_gaps_mean() {
        let cfg = LinkConfig { rate: Some(Rate::mbps(10)), ..LinkConfig::default() };
        let mut d = DirectionSummary::new("emu-a", "emu-b", &cfg);
        d.window_s = 2.0;
        d.achieved_wire_bps = 6_152_000;
        d.window_bps = 6_056_000;
        // Over 60 s of uptime the same bytes would read as ~0.2 Mbit/s.
        d.mean_bps = 201_866;
        d.arrival_gap_deviation = Some(GapDeviation {
            samples: 1000,
            abs_p50_ns: 1500.0,
            abs_p99_ns: 20_000.0,
            signed_p50_ns: -200.0,
        });
        let s = Summary {
            kind: "emu_summary",
            elapsed_s: 60.0,
            a_to_b: d.clone(),
            b_to_a: DirectionSummary::new("emu-b", "emu-a", &cfg),
            meter_error: None,
        };
        let t = s.to_text();
        assert!(
            t.contains("after 60.000 s up")
                && t.contains("pauses over 1s and transfers under 1% of the bytes left out"),
            "{t}"
        );
        assert!(t.contains("transfer window 2.000 s: 6.152Mbit/s on the wire (frames + 24 B overhead each), 6.056Mbit/s of frames"), "{t}");
        assert!(!t.contains("201.866kbit/s") && !t.contains("mean"), "no rate over the uptime: {t}");
        assert!(
            t.contains("arrival gaps against the rate's ideal (the sender's pacing, frame by frame"),
            "{t}"
        );
        assert!(t.contains("|deviation| p50 1.5 us, p99 20.0 us, signed p50 -0.2 us (1000 of 0 gaps"), "{t}");
    }
}
