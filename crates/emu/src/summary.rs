//! What the emulator reports: per direction, frames and bytes in and out,
//! drops by reason, the largest queue, the achieved rate and how late frames
//! left compared with the model's schedule.

use serde::Serialize;

use tcpaccel_core::link::{Counters, DropReason};
use tcpaccel_core::meter::{GapDeviation, HistSummary};
use tcpaccel_core::units::{format_duration, Bytes, Rate};

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
    /// Rate of delivered frames counted on the wire (frame + overhead) between
    /// the first and the last send, bit/s; equals the link rate when saturated.
    pub achieved_wire_bps: u64,
    /// Delivered frame bytes over the whole run, bit/s.
    pub mean_bps: u64,
    /// How late frames were sent compared with the model's delivery time.
    pub lateness: HistSummary,
    /// Meter bins lost because the writer fell behind.
    pub meter_bins_lost: u64,
    /// Frames read (all, rejected ones too) whose arrival time is the
    /// kernel's receive stamp; the others are timed by the read, which may
    /// come up to 1 ms after the arrival while the delay leaves room.
    pub stamped_arrivals: u64,
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
            achieved_wire_bps: 0,
            mean_bps: 0,
            lateness: tcpaccel_core::meter::Histogram::new().summary(),
            meter_bins_lost: 0,
            stamped_arrivals: 0,
            arrival_gaps: 0,
            arrival_gap_deviation: None,
            cpu_s: 0.0,
            scheduling: Scheduling::Normal,
            error: None,
        }
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
        let mut s = format!("emulator summary after {:.3} s\n", self.elapsed_s);
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
                "    max queue {} / {} frames, achieved {} on the wire, mean {}, lateness p50 {} p99 {} max {}, cpu {:.2} s\n",
                Bytes(d.max_queue_bytes),
                d.max_queue_frames,
                Rate(d.achieved_wire_bps),
                Rate(d.mean_bps),
                late(d.lateness.p50_ns),
                late(d.lateness.p99_ns),
                late(d.lateness.max_ns),
                d.cpu_s
            );
            if let Some(g) = &d.arrival_gap_deviation {
                let us = |ns: f64| ns / 1e3;
                s += &format!(
                    "    arrival gaps against the rate's ideal: |deviation| p50 {:.1} us, p99 {:.1} us, signed p50 {:.1} us ({} of {} gaps sampled; {} of {} frames timed by kernel stamp)\n",
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
