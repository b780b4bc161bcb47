//! Pacing arithmetic: what rate to pace at, and how that rate looks on the wire.
//!
//! - [`Framing`] converts a rate between layers (TCP payload, IP, the L2 frame a
//!   qdisc sees, and the Ethernet wire with preamble, FCS and inter-frame gap).
//!   A 500 Mbit/s bottleneck counted on the wire carries 500 × 1448/1538 ≈ 470.7
//!   Mbit/s of goodput with TCP timestamps; PSPacer counted L2 frames, so its
//!   "500 Mbit" target gave ~478 Mbit/s of payload. It also gives the
//!   `SO_MAX_PACING_RATE` cap (payload bytes/s) for an on-wire rate.
//! - [`gap_plan`] sizes PSPacer's gap packets ([PSPacer] §2.3, eq. 2–5), and
//!   [`ideal_gap_ns`] gives the ideal spacing of frames at a rate, which the
//!   emulator uses to judge pacing precision.
//! - [`DynamicPacer`] is the dynamic rule of [PSPacer] eq. (1),
//!   `rate = cwnd · mss / RTT`, fed with TCP_INFO-like samples, with the RTT
//!   corrected for the sender's own queueing as PSPacer's estimator did.
//! - [`resume_after_idle`] is [HPC-TCP]'s "pace when sending resumes" rule.
//!
//! This module does not touch sockets, timers or clocks: shells read TCP_INFO,
//! pass `now` and set `SO_MAX_PACING_RATE` (bytes per second) themselves.
//!
//! Rates are [`Rate`]s, bit/s, and say in their docs what they count
//! (payload, or the wire); the payload rates are whole bytes per second
//! ([`Rate::from_bytes_per_sec`]), since that is what the socket option
//! takes. Two places keep raw `u64` bytes/s on purpose: the value handed to
//! the socket ([`Framing::payload_bytes_per_sec`]) and the `bpf_*` twins of
//! the BPF program, which mirror its C arithmetic line by line.

use crate::time::Instant;
use crate::units::Rate;
use serde::Serialize;
use std::time::Duration;

/// Ethernet II header (dst, src, ethertype), counted in what a qdisc sees.
pub const ETH_HEADER: u32 = 14;
/// Frame check sequence, added by the NIC.
pub const ETH_FCS: u32 = 4;
/// Preamble and start-of-frame delimiter.
pub const ETH_PREAMBLE: u32 = 8;
/// Minimum inter-frame gap.
pub const ETH_IFG: u32 = 12;
/// Per-frame wire time that carries no frame bytes: IFG + preamble + FCS
/// ([PSPacer] §2.3, "hw_gap", 24 bytes on Ethernet).
pub const HW_GAP: u32 = ETH_IFG + ETH_PREAMBLE + ETH_FCS;

/// Bad pacing input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PacingError {
    #[error("pacing rate must be above zero")]
    ZeroRate,
    #[error("target rate {target} is above the link's maximum rate {max}")]
    TargetAboveMax { target: Rate, max: Rate },
    #[error("packet size and MTU must be above zero (packet {pkt_size} B, MTU {mtu} B)")]
    ZeroSize { pkt_size: u32, mtu: u32 },
}

/// Where a rate is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// TCP payload (goodput): MSS bytes per full packet.
    Payload,
    /// IP packets: MTU bytes per full packet.
    Ip,
    /// L2 frames as a Linux qdisc counts them (`skb->len`): MTU + Ethernet header.
    L2,
    /// Wire occupancy: L2 + FCS + preamble + IFG (what a link of that speed carries).
    Wire,
}

/// Header sizes of a full-size TCP segment over Ethernet: the one framing
/// calculator of the workspace (the traffic tool's pacing cap uses it too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Framing {
    /// IP packet of a full segment: the path MTU, or on loopback whatever
    /// the MSS plus headers comes to.
    pub mtu: u32,
    /// 20 for IPv4, 40 for IPv6.
    pub ip_header: u32,
    /// TCP header including options (20, or 32 with timestamps).
    pub tcp_header: u32,
}

impl Framing {
    /// A 1500-byte Ethernet MTU, IPv4, timestamps on: 1448 payload bytes of
    /// 1538 on the wire; Linux's default path.
    pub const ETHERNET_1500_TS: Framing = Framing::ethernet(1500, true);

    /// IPv4 over Ethernet; `timestamps` adds the 12-byte TCP timestamp option
    /// that Linux negotiates by default.
    pub const fn ethernet(mtu: u32, timestamps: bool) -> Framing {
        Framing { mtu, ip_header: 20, tcp_header: if timestamps { 32 } else { 20 } }
    }

    /// Framing of a segment that carries `payload` bytes (a socket's current
    /// MSS, `tcpi_snd_mss`, which already excludes TCP options and which on
    /// loopback the kernel may hold at half the peer's window) behind IPv4 or
    /// IPv6 and TCP headers, with the timestamp option when negotiated.
    /// (`tcpi_advmss` is no help: the active opener subtracts the timestamp
    /// option from it, the passive one does not.) A zero payload falls back
    /// to [`Framing::ETHERNET_1500_TS`].
    pub const fn for_segment(payload: u32, ipv6: bool, timestamps: bool) -> Framing {
        if payload == 0 {
            return Framing::ETHERNET_1500_TS;
        }
        let ip_header = if ipv6 { 40 } else { 20 };
        let tcp_header = if timestamps { 32 } else { 20 };
        Framing { mtu: payload.saturating_add(ip_header + tcp_header), ip_header, tcp_header }
    }

    /// Payload bytes per full packet.
    pub fn mss(&self) -> u32 {
        self.mtu.saturating_sub(self.ip_header + self.tcp_header)
    }

    /// Bytes one full-size packet counts for at `layer`.
    pub fn bytes(&self, layer: Layer) -> u32 {
        match layer {
            Layer::Payload => self.mss(),
            Layer::Ip => self.mtu,
            Layer::L2 => self.mtu.saturating_add(ETH_HEADER),
            Layer::Wire => self.mtu.saturating_add(ETH_HEADER + HW_GAP),
        }
    }

    /// Converts a rate of full-size packets from one layer to another, rounded
    /// to the nearest bit/s. Smaller packets carry relatively more overhead, so
    /// for them the payload share is lower than this.
    pub fn convert(&self, rate: Rate, from: Layer, to: Layer) -> Rate {
        let num = self.bytes(to) as u128;
        let den = self.bytes(from) as u128;
        if den == 0 {
            return Rate(0);
        }
        Rate(((rate.0 as u128 * num + den / 2) / den) as u64)
    }

    /// Wire bytes of a full packet beyond its payload: IP and TCP headers,
    /// Ethernet header, FCS, preamble and inter-frame gap (90 by default).
    pub fn overhead(&self) -> u32 {
        self.bytes(Layer::Wire).saturating_sub(self.mss())
    }

    /// Payload bytes per second of full packets that fill `wire` exactly,
    /// rounded down to a whole byte: the `SO_MAX_PACING_RATE` cap for an
    /// on-wire rate (Linux's internal pacing counts payload only).
    pub fn payload_bytes_per_sec(&self, wire: Rate) -> u64 {
        let frame = u128::from(self.bytes(Layer::Wire));
        if frame == 0 {
            return 0;
        }
        (u128::from(wire.0) * u128::from(self.mss()) / (8 * frame)) as u64
    }

    /// The goodput a pacing cap of [`Framing::payload_bytes_per_sec`] gives:
    /// whole bytes per second, so up to 8 bit/s below [`Framing::goodput_of_wire`].
    pub fn goodput(&self, wire: Rate) -> Rate {
        Rate(self.payload_bytes_per_sec(wire) * 8)
    }

    /// Goodput carried by a link of `wire` rate (e.g. 500 Mbit/s → 470.7 Mbit/s).
    pub fn goodput_of_wire(&self, wire: Rate) -> Rate {
        self.convert(wire, Layer::Wire, Layer::Payload)
    }

    /// Wire rate needed for `goodput` of payload.
    pub fn wire_of_goodput(&self, goodput: Rate) -> Rate {
        self.convert(goodput, Layer::Payload, Layer::Wire)
    }
}

/// Ideal spacing between the starts of consecutive frames of `wire_bytes`
/// (frame + FCS + preamble + IFG) at `rate`, in nanoseconds (not rounded).
/// Zero rate means unlimited and gives zero.
pub fn ideal_gap_ns(wire_bytes: u64, rate: Rate) -> f64 {
    if rate.0 == 0 {
        return 0.0;
    }
    wire_bytes as f64 * 8.0 * 1e9 / rate.0 as f64
}

/// PSPacer's gap sizing for one real packet ([PSPacer] §2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GapPlan {
    /// Inter-packet gap in byte times at `max_rate` (eq. 3).
    pub ipg: u64,
    /// Total bytes of gap frames to send after the real packet (eq. 4).
    pub gap_bytes: u64,
    /// Real packet plus gap frames (eq. 5); `n_pkts - 1` gap frames of at most MTU.
    pub n_pkts: u32,
}

/// Sizes the gap frames that make one real packet of `pkt_size` bytes leave at
/// `target` on a link of `max_rate` ([PSPacer] §2.3).
///
/// `pkt_size` is the frame as the qdisc counts it (no FCS, preamble or IFG);
/// each frame, real or gap, also costs [`HW_GAP`] bytes of wire time.
/// Eq. (4) and (5) define `gappkt_size` and `#pkts` through each other; the
/// plan takes the smallest `n_pkts` that satisfies both, so every gap frame
/// fits in one MTU. A target so close to `max_rate` that the gap is shorter
/// than the hardware gap gives no gap frame (the link cannot go slower by
/// less than one hw_gap per packet; PSPacer's byte clock carries the
/// remainder to later packets, which the caller may do with `ipg`).
pub fn gap_plan(pkt_size: u32, target: Rate, max_rate: Rate, mtu: u32) -> Result<GapPlan, PacingError> {
    if target.0 == 0 || max_rate.0 == 0 {
        return Err(PacingError::ZeroRate);
    }
    if target > max_rate {
        return Err(PacingError::TargetAboveMax { target, max: max_rate });
    }
    if pkt_size == 0 || mtu == 0 {
        return Err(PacingError::ZeroSize { pkt_size, mtu });
    }
    // [PSPacer] eq. (3): ipg = (max_rate / target_rate - 1) * pkt_size,
    // computed as pkt_size * (max - target) / target, rounded to a byte.
    let diff = (max_rate.0 - target.0) as u128;
    let t = target.0 as u128;
    let ipg = ((pkt_size as u128 * diff + t / 2) / t) as u64;
    // [PSPacer] eq. (4): gappkt_size = ipg - hw_gap * #pkts
    let gap_for = |n: u64| ipg.saturating_sub(HW_GAP as u64 * n);
    // [PSPacer] eq. (5): #pkts = ceil(gappkt_size / MTU) + 1. The smallest n
    // with ceil(gap_for(n) / MTU) + 1 <= n is, in closed form, the smaller of
    // the n where the gap vanishes (ipg <= hw_gap * n) and the n where it
    // fits in n - 1 frames (ipg + MTU <= n * (MTU + hw_gap)); a loop would
    // take ipg / MTU steps at very low targets.
    let (hw, m) = (HW_GAP as u64, mtu as u64);
    let n = ipg.div_ceil(hw).min((ipg + m).div_ceil(m + hw)).max(1);
    let gap_bytes = gap_for(n);
    let n_pkts = if gap_bytes == 0 { 1 } else { n };
    Ok(GapPlan { ipg, gap_bytes, n_pkts: n_pkts.min(u32::MAX as u64) as u32 })
}

/// What a pacing controller is told per connection, in TCP_INFO terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TcpSample {
    /// Congestion window in packets (`tcpi_snd_cwnd`).
    pub cwnd: u32,
    /// Sender MSS in bytes (`tcpi_snd_mss`).
    pub mss: u32,
    /// Smoothed RTT (`tcpi_rtt`).
    pub srtt: Duration,
    /// Minimum RTT seen (`tcpi_min_rtt`); zero if unknown.
    pub min_rtt: Duration,
    /// Instantaneous queueing delay inside the sender (e.g. qdisc backlog ÷
    /// rate, or unsent bytes ÷ pacing rate); zero if not measured.
    pub local_queue: Duration,
}

/// [`DynamicConfig::floor`]'s default: 12 500 bytes/s (100 kbit/s) of payload.
pub const DEFAULT_FLOOR: Rate = Rate::from_bytes_per_sec(12_500);

/// Tuning of [`DynamicPacer`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DynamicConfig {
    /// Multiplier on eq. (1). 1.0 is PSPacer's rule; the kernel's own pacing
    /// uses 2.0 in slow start and 1.2 after it.
    pub gain: f64,
    /// Never pace below this payload rate, so a tiny early cwnd cannot stall a flow.
    pub floor: Rate,
    /// Never pace above this payload rate: the static cap, if any.
    pub ceiling: Option<Rate>,
    /// Weight of a new local-queueing sample in the EWMA, as a power of two:
    /// 4 means 1/16, PSPacer's weight.
    pub queue_weight_shift: u32,
}

impl Default for DynamicConfig {
    fn default() -> Self {
        DynamicConfig { gain: 1.0, floor: DEFAULT_FLOOR, ceiling: None, queue_weight_shift: 4 }
    }
}

/// Which bound set the rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PaceLimit {
    /// [PSPacer] eq. (1) itself.
    Window,
    Floor,
    Ceiling,
    /// No usable RTT yet: the ceiling (or no limit) applies.
    NoRtt,
}

/// One output of [`DynamicPacer::on_sample`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PaceDecision {
    /// Payload rate to set (whole bytes/s); `None` means "do not limit".
    pub rate: Option<Rate>,
    /// RTT used in eq. (1): srtt minus the smoothed local queueing, not below min_rtt.
    pub rtt_used: Duration,
    /// Smoothed local queueing delay.
    pub queue_estimate: Duration,
    pub limit: PaceLimit,
}

/// [PSPacer] eq. (1) as a controller: `target_rate = cwnd × pkt_size / RTT`.
///
/// The RTT seen by TCP includes the time packets wait in the sender's own
/// queue, which pacing itself creates; using it as is would make the rate
/// shrink as the pacer queues. PSPacer subtracted its smoothed local queueing
/// time (weight 1/16) from srtt; this does the same, and never lets the
/// corrected RTT fall below the path's minimum RTT.
#[derive(Debug, Clone)]
pub struct DynamicPacer {
    cfg: DynamicConfig,
    /// Smoothed local queueing delay in ns (None until the first sample).
    queue_ns: Option<u64>,
    last_sample: Option<Instant>,
}

impl DynamicPacer {
    pub fn new(cfg: DynamicConfig) -> Self {
        DynamicPacer { cfg, queue_ns: None, last_sample: None }
    }

    pub fn config(&self) -> &DynamicConfig {
        &self.cfg
    }

    /// When the last sample arrived (for idle detection by the shell).
    pub fn last_sample(&self) -> Option<Instant> {
        self.last_sample
    }

    /// Feeds one sample taken at `now` and returns the rate to set.
    pub fn on_sample(&mut self, now: Instant, s: &TcpSample) -> PaceDecision {
        self.last_sample = Some(now);
        let sample = s.local_queue.as_nanos().min(u64::MAX as u128) as u64;
        let q = match self.queue_ns {
            None => sample,
            Some(old) => {
                // EWMA with weight 2^-shift, in signed arithmetic so it can fall.
                let shift = self.cfg.queue_weight_shift.min(32);
                let delta = sample as i128 - old as i128;
                (old as i128 + (delta >> shift)).max(0) as u64
            }
        };
        self.queue_ns = Some(q);
        let queue_estimate = Duration::from_nanos(q);
        let rtt_used = s.srtt.saturating_sub(queue_estimate).max(s.min_rtt);
        if rtt_used.is_zero() || s.cwnd == 0 || s.mss == 0 {
            let rate = self.cfg.ceiling;
            return PaceDecision { rate, rtt_used, queue_estimate, limit: PaceLimit::NoRtt };
        }
        let rate = window_rate(s.cwnd, s.mss, rtt_used, self.cfg.gain);
        let (rate, limit) = self.clamp(rate);
        PaceDecision { rate: Some(rate), rtt_used, queue_estimate, limit }
    }

    fn clamp(&self, rate: Rate) -> (Rate, PaceLimit) {
        if let Some(c) = self.cfg.ceiling {
            if rate > c {
                return (c, PaceLimit::Ceiling);
            }
        }
        if rate < self.cfg.floor {
            // A ceiling below the floor is the user's explicit cap: it wins.
            let floor = self.cfg.ceiling.map_or(self.cfg.floor, |c| self.cfg.floor.min(c));
            return (floor, PaceLimit::Floor);
        }
        (rate, PaceLimit::Window)
    }
}

/// `gain · cwnd · mss / rtt` of payload, in whole bytes per second rounded
/// down ([PSPacer] eq. (1)); a zero RTT gives the largest rate.
pub fn window_rate(cwnd: u32, mss: u32, rtt: Duration, gain: f64) -> Rate {
    let ns = rtt.as_nanos();
    if ns == 0 {
        return Rate(u64::MAX);
    }
    let base = cwnd as u128 * mss as u128 * 1_000_000_000 / ns;
    let base = base.min(u64::MAX as u128) as u64;
    let bytes = if gain == 1.0 { base } else { (base as f64 * gain.max(0.0)).min(u64::MAX as f64) as u64 };
    Rate::from_bytes_per_sec(bytes)
}

/// State of a connection that is about to send again after a pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct IdleState {
    /// Time since the connection last sent.
    pub idle: Duration,
    /// Its retransmission timeout; Linux restarts slow start only after an
    /// idle period longer than this (RFC 2861 as applied by Linux).
    pub rto: Duration,
    pub srtt: Duration,
    /// Window kept across the idle period (tcp_slow_start_after_idle=0), packets.
    pub cwnd: u32,
    pub mss: u32,
    /// Payload delivery rate measured before the pause (`tcpi_delivery_rate`); 0 if unknown.
    pub last_delivery_rate: Rate,
}

/// How to pace a resumed burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ResumePlan {
    /// Payload rate to set while the burst starts (in JSON: bytes/s, as always).
    #[serde(serialize_with = "crate::units::serialize_bytes_per_sec")]
    pub rate: Rate,
    /// How long to hold it: the time to send one window at `rate`. After that
    /// every packet in flight was paced and returning ACKs clock the rest.
    pub hold: Duration,
}

/// [HPC-TCP] ("通信再開時ペーシング"): when a connection resumes after an idle
/// period with its old window kept, send that window at the last measured
/// delivery rate instead of as one burst (no ACK clock is running to spread
/// it). Falls back to `cwnd · mss / srtt` ([PSPacer] eq. (1)) when no delivery
/// rate is known. Returns `None` when the pause was shorter than the RTO
/// (ACKs still clock the sender) or there is nothing to compute with.
pub fn resume_after_idle(s: &IdleState, ceiling: Option<Rate>) -> Option<ResumePlan> {
    if s.idle <= s.rto || s.cwnd == 0 || s.mss == 0 {
        return None;
    }
    let mut rate = if s.last_delivery_rate.0 > 0 {
        s.last_delivery_rate
    } else if !s.srtt.is_zero() {
        window_rate(s.cwnd, s.mss, s.srtt, 1.0)
    } else {
        return None;
    };
    if let Some(c) = ceiling {
        rate = rate.min(c);
    }
    if rate.0 == 0 {
        return None;
    }
    let window_bits = s.cwnd as u128 * s.mss as u128 * 8;
    let hold_ns = (window_bits * 1_000_000_000).div_ceil(rate.0 as u128);
    Some(ResumePlan { rate, hold: Duration::from_nanos(hold_ns.min(u64::MAX as u128) as u64) })
}

/// The largest cap the cgroup pacer's BPF program sets: `bpf_setsockopt`
/// takes SO_MAX_PACING_RATE as a 4-byte int there, and `~0U` means "unlimited".
pub const BPF_RATE_MAX: u64 = 0xFFFF_FFFE;

/// Pure twin of `payload_rate` in `crates/pacer/bpf/pace.bpf.c`: payload
/// bytes/s of full segments of `mss` that fill `wire` on Ethernet, assuming
/// TCP timestamps (Linux's default; the sock_ops context cannot tell). This is
/// exactly `Framing::for_segment(mss, ipv6, true).payload_bytes_per_sec(wire)`
/// (tested below), computed the way the program can: in u64, which holds
/// `wire · mss` for any wire rate below 2^47 bit/s.
pub fn bpf_payload_rate(wire: Rate, mss: u32, ipv6: bool) -> u64 {
    bpf_payload_rate_opts(wire, mss, ipv6, 0)
}

/// TCP option bytes an MPTCP subflow's data segment carries beyond the
/// timestamps (`MPTCP_DSS_BYTES` in pace.bpf.c): a DSS option with a 64-bit
/// data ACK and a 64-bit mapping, 4 + 8 + 14, padded to 28 (RFC 8684
/// §3.3). The MSS the program reads does not count them.
pub const MPTCP_DSS_BYTES: u32 = 28;

/// Pure twin of `payload_rate` with its `opts` argument: segments that
/// carry `opts` option bytes beyond the timestamps hold that much less
/// payload in a frame of the same size (what an MPTCP subflow sends).
pub fn bpf_payload_rate_opts(wire: Rate, mss: u32, ipv6: bool, opts: u32) -> u64 {
    let mss = if mss == 0 { 1448 } else { mss as u64 };
    let frame = mss + if ipv6 { 40 } else { 20 } + 32 + 38;
    let payload = mss.saturating_sub(opts as u64).max(1);
    wire.0.wrapping_mul(payload) / (8 * frame)
}

/// One RTT sample as the BPF program reads it from `struct bpf_sock_ops`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BpfAck {
    pub snd_cwnd: u32,
    pub mss_cache: u32,
    /// `srtt_us`: the kernel keeps it scaled by 8.
    pub srtt_us_x8: u32,
    /// `rtt_min`, microseconds.
    pub rtt_min_us: u32,
}

/// Pure twin of `dynamic_rate` in `pace.bpf.c`, run where the program sees
/// an ACK's progress (see [`BpfHold`] for which callbacks those are): [PSPacer] eq. (1), `cwnd · mss / RTT`, with the RTT
/// corrected as [`DynamicPacer`] does (srtt minus the smoothed local
/// queueing, never below min_rtt). The local queueing is zero here: with the
/// kernel's internal pacing a segment waits in the socket before it is sent
/// and the RTT is measured from transmission (see the traffic tool's
/// `loop_sample`), so the correction reduces to `max(srtt, min_rtt)`. Floor
/// and ceiling as [`DynamicConfig::default`]'s floor and the rule's
/// ceiling (`0` = none, payload bytes/s). Then capped at [`BPF_RATE_MAX`].
pub fn bpf_dynamic_rate(a: BpfAck, ceiling: u64) -> u64 {
    const FLOOR: u64 = DEFAULT_FLOOR.bytes_per_sec();
    let srtt = a.srtt_us_x8 >> 3;
    let rtt = srtt.max(a.rtt_min_us) as u64;
    let rate = if rtt == 0 || a.snd_cwnd == 0 || a.mss_cache == 0 {
        if ceiling > 0 {
            ceiling
        } else {
            BPF_RATE_MAX
        }
    } else {
        let r = a.snd_cwnd as u64 * a.mss_cache as u64 * 1_000_000 / rtt;
        if ceiling > 0 && r > ceiling {
            ceiling
        } else if r < FLOOR {
            if ceiling > 0 && ceiling < FLOOR {
                ceiling
            } else {
                FLOOR
            }
        } else {
            r
        }
    };
    rate.min(BPF_RATE_MAX)
}

/// The least queueing delay (µs, srtt − min_rtt) at which [`BpfHold`]
/// acts (`HOLD_MIN_QUEUE_US` in pace.bpf.c): on a path of microseconds the
/// host's scheduling moves srtt by more than a fraction of min_rtt, no
/// queue that slowing down would drain.
pub const BPF_HOLD_MIN_QUEUE_US: u64 = 1000;
/// Slow start stays unpaced below this cwnd (packets), so that its windows
/// leave as bursts and come back as ACK trains (`HOLD_LOW_WINDOW`), or
/// below 1/[`BPF_HOLD_PROBE_BDP_DIV`] of the estimated BDP if more.
pub const BPF_HOLD_LOW_WINDOW: u32 = 64;
/// The probe goes on up to 1/this of the bottleneck-delay product
/// (estimate × min_rtt, in segments): unpaced slow start queues about
/// half a window at the bottleneck (two segments sent per segment
/// delivered), a 32nd of the BDP here, well inside [PSPacer]'s 0.16,
/// and a transfer that ends below it is never paced at all
/// (`HOLD_PROBE_BDP_DIV`).
pub const BPF_HOLD_PROBE_BDP_DIV: u64 = 16;
/// ACKs further apart than this (µs, or min_rtt/8 if less) end a train.
pub const BPF_HOLD_TRAIN_GAP_US: u64 = 2000;
/// A train counts once it acks this many segments.
pub const BPF_HOLD_TRAIN_MIN_SEGS: u64 = 8;
/// An estimate from a train of fewer segments is unsure
/// (`HOLD_SURE_TRAIN_SEGS`): a socket the kernel paces has no unpaced burst
/// but its initial window (9–10 segments here), whose ACKs the host
/// batches; such trains gave 1.04–2.04 times the bottleneck (issue 47),
/// while an unpaced slow start's last probe window gave 80 segments and
/// more, within 4%.
pub const BPF_HOLD_SURE_TRAIN_SEGS: u64 = 16;
/// ln(5/4), ln(17/16), ln(11/10), ln(33/32), ln(9/8), times 1024:
/// growth of the cap per srtt.
const HOLD_LN_SS: u64 = 228;
const HOLD_LN_NEAR_BTL: u64 = 62;
const HOLD_LN_NEAR: u64 = 98;
const HOLD_LN_CA: u64 = 32;
const HOLD_LN_EIGHTH: u64 = 120;
/// Queue thresholds, as divisors of min_rtt: first sign, hold in slow
/// start, hold after it.
const HOLD_WARN_DIV: u64 = 400;
const HOLD_SS_DIV: u64 = 64;
const HOLD_CA_DIV: u64 = 32;
const HOLD_FULL_WINDOWS: u32 = 2;
/// A queue past min_rtt/this is the cap's doing whatever the delivery rate
/// of the window before (host noise seen moved srtt by up to 3.1 ms).
const HOLD_DEEP_DIV: u64 = 32;
/// Near the bottleneck the cap grows only while it is less than
/// 1/HOLD_LEAD above the last window's delivery rate: once the bottleneck
/// is full the delivery rate stops following the cap, and so does the
/// cap. The delivery rate lags the cap by about an RTT, so this also
/// makes the growth there about 1/32 per srtt, whatever the step.
const HOLD_LEAD: u64 = 32;
/// Where a window's delivery rate passed the estimate by a sixteenth (the
/// estimate was low), the cap grows by an eighth per srtt while it is less
/// than 1/HOLD_LOW_LEAD above the delivery rate (issue 47). A lead of 1/4
/// let the cap pass the bottleneck by a quarter before the queue showed
/// (the twin's sweep of low estimates dropped up to 1.9 MB in the 1 MB
/// buffer; the lab's kernel-paced programs, with estimates made low on
/// purpose, 434-485 packets).
const HOLD_LOW_LEAD: u64 = 8;
/// A cap that grows grows by at least this many segments per srtt, and may
/// lead the delivery rate by that much more than 1/[`HOLD_LEAD`]: besides
/// its growth by a fraction (which keeps the ratio between two held flows,
/// so a flow that starts small stays small beside big ones), a step of
/// fixed size lets a small flow catch up — additive increase, with the
/// queue's cut to 31/32 of delivery as the multiplicative decrease (Chiu
/// and Jain's condition for flows sharing a bottleneck to converge to
/// fair shares). In the web-like mix, flows that lost in their first
/// windows were held below 1 Mbit/s for seconds.
const HOLD_AI_SEGS: u64 = 8;
/// What [`BpfHold::on_ack`] returns while slow start is still unpaced: the
/// kernel's "no cap" (`RATE_UNPACED`), which unlike any other value leaves
/// its internal pacing off.
pub const BPF_RATE_UNPACED: u64 = u32::MAX as u64;

/// What [`BpfHold::on_ack`] reads of one ACK (the `bpf_sock_ops` fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldAck {
    /// `bpf_ktime_get_ns()`.
    pub now_ns: u64,
    pub bytes_acked: u64,
    /// The kernel's `srtt_us`: microseconds × 8.
    pub srtt_us_x8: u32,
    pub rtt_min_us: u32,
    pub snd_cwnd: u32,
    pub snd_ssthresh: u32,
    pub mss_cache: u32,
    /// This socket and the rule's other open sockets past their probe
    /// (the program's `held` count in the rule's stats, plus one while this
    /// one is still probing); at least 1.
    pub flows: u64,
    /// The caps of the rule's other open sockets past their probe, summed
    /// (the program's `held_cap` in the rule's stats less this socket's
    /// part); 0 when there are none.
    pub others_cap: u64,
    /// `snd_nxt`: the sequence number of the next byte to send (wraps).
    pub snd_nxt: u32,
}

/// Pure twin of `hold_cap` in `pace.bpf.c` (the cgroup pacer's `--hold`,
/// issue 17 item 5): per-socket state and the cap on eq. (1)'s rate, in the
/// program's integer arithmetic, on every ACK the program sees. Keep the
/// two in step. The program runs for every segment the socket sends
/// (`BPF_SOCK_OPS_HDR_OPT_LEN_CB`) and acts on those that see new bytes
/// acked: an ACK-clocked sender sends on each ACK, so its trains are made
/// of the ACKs themselves at their arrival; a kernel-paced one is seen at
/// its pacing times. Besides, once per round trip (`BPF_SOCK_OPS_RTT_CB`)
/// and on the ACKs the kernel's slow path handles
/// (`BPF_SOCK_OPS_PARSE_HDR_OPT_CB`, the only view of a segment where the
/// kernel skips the segment-sent callback: options that leave no room). Growth is by the
/// time since the last ACK seen, so how many it sees does not set it.
///
/// - Probe: below [`BPF_HOLD_LOW_WINDOW`] in slow start the socket stays
///   unpaced and the ACK trains of its bursts give a bottleneck estimate
///   (the train with the most bytes: bytes acked from its first ACK to its
///   last over the time between them; packet-train dispersion), the train
///   the probe ends in included; only a train that came back faster than
///   `ss_rate` counts (a socket the kernel paces itself sends its windows
///   spread, and their trains measure that pace: `end_train`).
/// - Slow start, paced: eq. (1) with twice the cwnd (`ss_rate`: the
///   kernel's slow-start pacing ratio, `tcp_pacing_ss_ratio` 200%) while
///   the RTT shows no queue, eq. (1) once it does. Below half the
///   estimate the cap is `ss_rate` itself, queue or not; above, a cap
///   grown in time per srtt while it binds: 9/8 up to 7/8 of the
///   estimate, 1/16 above and only while the cap is less than 1/32 above
///   the last window's delivery rate (in effect 1/32 per srtt: the
///   delivery rate lags the cap by an RTT); without an estimate 5/4,
///   11/10 once srtt − min_rtt exceeds min_rtt/400.
/// - A queue (srtt − min_rtt above min_rtt/64 in slow start, min_rtt/32
///   after, and above [`BPF_HOLD_MIN_QUEUE_US`], with a delivery rate of at
///   least half the cap; not in slow start below half the estimate in the
///   two srtt after the probe, where it is the probe's bursts draining):
///   the cap falls to 31/32 of the delivery rate, and an estimate below
///   the delivery rate (the bottleneck's, with a queue standing) rises to
///   it once the cut stood an srtt (see Undo).
/// - Unsure estimate (issue 47): one from a train of fewer than
///   [`BPF_HOLD_SURE_TRAIN_SEGS`] segments (a kernel-paced socket's
///   initial window, which came back at 1.04–2.04 times the bottleneck)
///   grows by 1/16 per srtt instead of 1/8 above 5/8 of it, so that up to
///   1.5 times the bottleneck the cap does not pass it by an eighth in
///   the srtt before the queue shows.
/// - Low estimate (issue 47): a window that delivered 1/16 more than the
///   estimate says it was low (a kernel-paced socket such as BBR's has no
///   unpaced burst but its 9-segment initial window, whose train came
///   back at 67–333 Mbit/s on a 470 Mbit/s path). Then, in or after slow
///   start, the cap grows by 1/8 per srtt while less than 1/8 above the
///   delivery rate, instead of the 1/32 of the rules near the estimate
///   and after slow start, under which BBR (its startup ends once its
///   rate stops growing by 1/4 per round) crept up for seconds.
/// - A queue is the cap's doing (and cut) only where the delivery rate
///   fell 1/64 short of the cap its bytes were sent under (`sent_cap`,
///   the cap at the start of the window before the one measured), or
///   where it is deeper than min_rtt/32 and the last window's delivery
///   rate did not grow by 1/8: on a loaded host srtt rose by
///   1.6–3.1 ms with no queue at the bottleneck, and a delivery rate
///   compared with the cap of now lags a cap that grows (issue 47).
///   Another queue stops the cap's growth, no more; and so does one
///   under a cap below half the share, which it cannot have made.
/// - Undo: a cut is undone (the cap before it restored) if an ACK within
///   an srtt of it shows no queue: the ACKs of that round trip left
///   before the cut, so a queue the cap made shows in all of them, while
///   a stall of the host or path raises srtt for some (issue 47: under
///   the VM's preemption cuts came window after window).
/// - Full pipe: two windows ending with a queue the cap made (or one
///   draining below a cap already cut) and no 1/8 growth of the
///   delivery rate; from then on (and after slow start above 7/8 of the
///   share: below it, after slow start ended on a rise of delay before
///   the pipe was found full, the bands of slow start) growth is 33/32 per
///   srtt, and only while the cap is less than 1/32 above the delivery
///   rate: a cap that grew on unbounded while the bottleneck was already
///   full put a whole srtt's growth into the queue before it showed.
/// - With several of the rule's sockets past their probe, each takes as
///   its share in the two rules above (half the share, 7/8 of it) the
///   estimate ÷ their number (`HoldAck::flows`), or what the others' caps
///   leave of the estimate (`HoldAck::others_cap`) if that is more: each
///   estimate is the whole bottleneck, and flows that ramp together each
///   took half of it; but flows held at 1/N each left a web-like mix's
///   path half empty. In slow start the band of 9/8 per srtt runs on past
///   7/8 of the share to 7/8 of the estimate itself while no queue shows:
///   the trains of new flows among others' traffic gave estimates of
///   50–180 Mbit/s on 470, shares of a few Mbit/s, and long flows grew by
///   8 segments per srtt for seconds on a half-empty path (issue 47). A
///   queue stops it; what flows growing together overshoot is at most an
///   eighth of the path's rate for an srtt.
/// - Fill (issue 47): where the lead and the cuts compare the delivery
///   rate with a cap, the cap is weighed by the share of what the caps
///   returned allowed that the socket sent in the last window (bytes
///   from `snd_nxt`, 1/1024ths; taken as whole where it sent less than
///   half, limited by its application or window, or some of the window
///   was unpaced): the kernel's pacing of a cap of 36 Mbit/s sent 78-81%
///   of it, and the cap, leading a delivery rate it could not come within
///   1/32 of, froze at half of the estimate for 20 s. A sender that fills
///   its cap is weighed at 1024/1024: the law as before. Only until the
///   pipe is found full: past that the cap sits at the bottleneck, and
///   BBR, which paces itself below the cap in parts of its cycle, let a
///   weighed cap grow past the path. Nor where the estimate is unsure (a
///   socket the kernel paces itself): BBR, its startup ended at the path's
///   rate under a cap above it, sent 0.78-0.93 of the cap, and the weighed
///   cap reached 1.3 times the path, where each of BBR's probes overflowed
///   the buffer (nginx, 1686 packets in one repeat of three).
/// - Wherever the cap grows, it grows by at least `HOLD_AI_SEGS` (8)
///   segments per srtt, and its lead over the delivery rate is that much
///   larger: additive increase, so a flow held small beside big ones
///   catches up.
///
/// Why: on [PSPacer]'s path the buffer is 0.16 of the BDP; doubling per
/// RTT overfills it by half a BDP in the RTT a queue takes to show, and
/// growing by an eighth all the way takes seconds (BENCHMARKS.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BpfHold {
    pub win_start_ns: u64,
    pub win_acked: u64,
    /// Payload bytes/s acked over the last window of one srtt; 0 until measured.
    pub dlv_rate: u64,
    /// The cap (payload bytes/s; 0 until slow start is paced) and when it last grew.
    pub cap: u64,
    pub cap_ns: u64,
    pub full_dlv: u64,
    pub full_cnt: u32,
    pub full: bool,
    pub train_ns: u64,
    pub train_acked: u64,
    pub last_ns: u64,
    pub last_acked: u64,
    /// Bottleneck estimate (payload bytes/s; 0 = none) and its train's bytes.
    pub btl_rate: u64,
    pub btl_bytes: u64,
    /// The cap when the current delivery window started, when the last
    /// one (the window `dlv_rate` is of) started, and when the one before
    /// that started: the cap the last window's bytes were sent under (they
    /// left an srtt before they were acked), the least of it while the cap
    /// grew. 0 until known.
    pub win_cap: u64,
    pub last_cap: u64,
    /// The cap before the last cut, while that cut may be undone (0: none),
    /// and when the cut was made.
    pub undo_cap: u64,
    pub undo_ns: u64,
    pub sent_cap: u64,
    /// `snd_nxt` when the current delivery window started, and the share
    /// of what its caps allowed that the socket sent in the last window
    /// (1/1024ths; 0 until known; 1024 where it sent less than half of
    /// it, a socket limited by its application or window, or some time of
    /// the window was unpaced, or where the estimate is unsure).
    pub win_nxt: u32,
    pub fill: u32,
    /// Bytes the caps returned allowed since the window started
    /// (u64::MAX: some of it unpaced), the last cap returned and when.
    pub allow: u64,
    pub out_rate: u64,
    pub out_ns: u64,
}

impl BpfHold {
    /// The train since `train_ns` ends: it is the estimate if it acked at
    /// least [`BPF_HOLD_TRAIN_MIN_SEGS`], more bytes than the best so far,
    /// and came back faster than `ss_rate`.
    ///
    /// Why faster than `ss_rate` (eq. (1) with twice the window: what the
    /// kernel paces slow start at when it paces the socket itself,
    /// `tcp_pacing_ss_ratio` 200%): a cap of "unlimited" does not turn the
    /// kernel's own pacing off once something turned it on — a congestion
    /// control that paces (BBR, the host's default here) when the socket
    /// was established, even if the program then switched to CUBIC
    /// (`iperf3 -C cubic` does, after connecting), an earlier
    /// `SO_MAX_PACING_RATE`, an fq qdisc. Such a socket's windows leave
    /// spread over the round trip, two segments at a time, and come back
    /// at the rate they were sent, not dispersed by the bottleneck; that
    /// rate, at most the `ss_rate` of the window they left in, is no
    /// estimate (it was 15 Mbit/s on a 500 Mbit/s path, and the hold then
    /// crept up from there for seconds). An unpaced burst comes back at
    /// the bottleneck's rate, which while the probe lasts (cwnd below a
    /// sixteenth of the BDP) is eight times `ss_rate` and more.
    fn end_train(&mut self, mss: u32, ss_rate: u64) {
        let bytes = self.last_acked.wrapping_sub(self.train_acked);
        let dur = self.last_ns.wrapping_sub(self.train_ns);
        if self.last_ns != 0
            && dur != 0
            && bytes >= BPF_HOLD_TRAIN_MIN_SEGS * mss as u64
            && bytes > self.btl_bytes
        {
            let rate = bytes.wrapping_mul(1_000_000_000) / dur;
            if rate > ss_rate {
                self.btl_rate = rate;
                self.btl_bytes = bytes;
            }
        }
    }

    /// The cwnd (segments) up to which slow start stays unpaced:
    /// [`BPF_HOLD_LOW_WINDOW`], or 1/[`BPF_HOLD_PROBE_BDP_DIV`] of the
    /// estimate × min_rtt if more.
    pub fn probe_window(&self, min_rtt_us: u64, mss: u32) -> u64 {
        let bdp = if mss == 0 { 0 } else { self.btl_rate * min_rtt_us / 1_000_000 / mss as u64 };
        (bdp / BPF_HOLD_PROBE_BDP_DIV).max(BPF_HOLD_LOW_WINDOW as u64)
    }

    fn train(&mut self, now: u64, acked: u64, mss: u32, min_rtt: u64, ss_rate: u64) {
        let gap_us = if min_rtt != 0 && min_rtt / 8 < BPF_HOLD_TRAIN_GAP_US {
            min_rtt / 8
        } else {
            BPF_HOLD_TRAIN_GAP_US
        };
        if self.last_ns != 0 && now.wrapping_sub(self.last_ns) <= gap_us * 1000 {
            self.last_ns = now;
            self.last_acked = acked;
            return;
        }
        self.end_train(mss, ss_rate);
        self.train_ns = now;
        self.train_acked = acked;
        self.last_ns = now;
        self.last_acked = acked;
    }

    /// The cap for this ACK given eq. (1)'s `rate` (payload bytes/s) and
    /// `ss_rate`, eq. (1) with twice the cwnd (both under the rule's
    /// ceiling), or [`BPF_RATE_UNPACED`] during the probe.
    ///
    /// Slow start is paced at `ss_rate` while the RTT shows no queue (the
    /// hold's slow-start threshold: min_rtt/64 and 1 ms), at `rate` once it
    /// does. Eq. (1) as such sends one window
    /// per RTT, and a window that grows by one segment per segment acked
    /// then grows by about 1.76 per RTT instead of 2 (fluid model: the
    /// rate r = cwnd/RTT grows as r'(t) = r(t − RTT)/RTT, so r ∝ e^(a·t)
    /// with a·RTT·e^(a·RTT) = 1, a·RTT = 0.567); a transfer that ends in
    /// slow start would end later than unpaced. With twice the window the pacing rate stays ahead of
    /// slow start's doubling (a·RTT·e^(a·RTT) = 2: 2.35 per RTT), as the
    /// kernel's own 200% does.
    pub fn on_ack(&mut self, rate: u64, ss_rate: u64, a: HoldAck) -> u64 {
        if self.out_ns != 0 && self.allow != u64::MAX {
            let dt = a.now_ns.wrapping_sub(self.out_ns).min(1_000_000_000);
            self.allow = if self.out_rate == BPF_RATE_UNPACED {
                u64::MAX
            } else {
                self.allow.wrapping_add(self.out_rate.wrapping_mul(dt) / 1_000_000_000)
            };
        }
        let out = self.on_ack_inner(rate, ss_rate, a);
        self.out_rate = out;
        self.out_ns = a.now_ns;
        out
    }

    fn on_ack_inner(&mut self, rate: u64, ss_rate: u64, a: HoldAck) -> u64 {
        let now = a.now_ns;
        let srtt = (a.srtt_us_x8 >> 3) as u64;
        let min_rtt = a.rtt_min_us as u64;
        let mut new_win = false;
        if self.win_start_ns == 0 {
            self.win_start_ns = now;
            self.win_acked = a.bytes_acked;
            self.win_nxt = a.snd_nxt;
        } else if srtt != 0 && now.wrapping_sub(self.win_start_ns) >= srtt * 1000 {
            let dt = now.wrapping_sub(self.win_start_ns);
            self.dlv_rate = a.bytes_acked.wrapping_sub(self.win_acked).wrapping_mul(1_000_000_000) / dt;
            // What the socket sent in the window that ends here against
            // what its caps allowed in it (`allow`, summed in `on_ack`).
            // Not weighed where the estimate is unsure (a train of fewer
            // than `BPF_HOLD_SURE_TRAIN_SEGS`: a socket the kernel paces
            // itself, whose one unpaced burst was its initial window). BBR
            // paces itself at its own bandwidth estimate, under a cap that
            // does not bind, and weighed by the share of the cap it sent
            // (0.78-0.93) the cap grew to 1.3 times the path before the
            // pipe was found full; BBR's next probe (5/4 of its rate for a
            // round) overflowed the 1 MB buffer (issue 47: nginx, 1686
            // packets in one of three repeats). The weighing is for a
            // sender that falls short of a cap that binds (`send`'s
            // unpaced slow start, from a sure estimate).
            let sent = a.snd_nxt.wrapping_sub(self.win_nxt) as u64;
            let allowed = self.allow;
            let unsure = self.btl_bytes < BPF_HOLD_SURE_TRAIN_SEGS * a.mss_cache as u64;
            self.fill = if allowed == u64::MAX || allowed == 0 || sent * 2 < allowed || unsure {
                1024
            } else {
                (sent * 1024 / allowed).min(1024) as u32
            };
            self.allow = 0;
            self.win_nxt = a.snd_nxt;
            self.win_start_ns = now;
            self.win_acked = a.bytes_acked;
            self.sent_cap = self.last_cap;
            self.last_cap = self.win_cap;
            self.win_cap = self.cap;
            new_win = true;
            // The full-pipe test's growth: a window that grew by 1/8.
            if self.cap != 0 && !self.full && self.dlv_rate * 8 >= self.full_dlv * 9 {
                self.full_dlv = self.dlv_rate;
                self.full_cnt = 0;
            }
        }
        let fast = a.snd_cwnd < a.snd_ssthresh && !self.full;
        if self.cap == 0 {
            self.train(now, a.bytes_acked, a.mss_cache, min_rtt, ss_rate);
            if fast && (a.snd_cwnd as u64) < self.probe_window(min_rtt, a.mss_cache) {
                return BPF_RATE_UNPACED;
            }
            // The probe ends with this ACK: the train it is in counts too
            // (the longest of the probe, the last window's first part).
            self.end_train(a.mss_cache, ss_rate);
        }
        if srtt == 0 || min_rtt == 0 {
            return if fast { ss_rate } else { rate };
        }
        let queue = srtt.saturating_sub(min_rtt);
        // Slow start at twice eq. (1) while the RTT shows no queue the hold
        // would act on; into a queue, eq. (1).
        let ss_queue = queue > BPF_HOLD_MIN_QUEUE_US && queue * HOLD_SS_DIV > min_rtt;
        // Below half the estimate in slow start the cap follows slow
        // start's own rate (up to half the estimate), which can queue
        // nothing the estimate does not already allow; and for two srtt
        // after the probe's last ACK a queue is its bursts still draining,
        // not the cap's doing. A queue after that is someone else's.
        // The rule's held sockets are taken to share one bottleneck (as RFC
        // 3124's congestion manager shares one per destination): each
        // estimate is the whole bottleneck, and flows that ramp together
        // would each take half of it.
        // ... or what the others' caps leave of the estimate, if more: a
        // held socket does not send above its cap, and in the web-like mix
        // a score of held flows that each took 1/N of the estimate ran at
        // 10-30 Mbit/s on a half-empty 500 Mbit/s path (issue 47).
        let share = (self.btl_rate / a.flows.max(1)).max(self.btl_rate.saturating_sub(a.others_cap));
        let probing = fast && share != 0 && self.cap < share / 2;
        let draining = probing && now.wrapping_sub(self.last_ns) < srtt * 2000;
        let rate = if fast && (draining || !ss_queue) { ss_rate } else { rate };
        let div = if fast { HOLD_SS_DIV } else { HOLD_CA_DIV };
        // A delivery rate under half the cap says the socket was limited by
        // something else (its window, the receiver, the application): then
        // a queue is no sign that its own rate is too high.
        // And a delivery rate that kept up with the cap (within 1/64) says
        // the cap is not what queued: a queue the cap made holds the
        // delivery at the bottleneck's rate, below the cap. Under a loaded
        // host, srtt rose by 3–5 ms with the bottleneck's queue under
        // 130 KB, and each such cut held an HTTP download lower. Such a
        // queue (and one that drains below a cap already cut) stops the
        // cap's growth, not more.
        // Never below half the share (where the probe's draining is too):
        // a cap that low makes no queue at a bottleneck the estimate is
        // within twice of (an unsure estimate was up to 2.04 times it), so
        // a queue there is host noise or another's traffic, and cuts on it
        // ratcheted iperf3 down to 10 of 100 Mbit/s and HTTP to 65 of 470
        // while the emulated path's delay jittered by 15-70 ms (issue 47);
        // there the cap grows back to half the share instead.
        let below = share != 0 && self.cap * 2 < share;
        let queue_seen =
            !below && self.dlv_rate * 2 >= self.cap && queue > BPF_HOLD_MIN_QUEUE_US && queue * div > min_rtt;
        // The cap a window's bytes were sent under is the cap at the
        // start of the window before it (the least of it while the cap
        // grew): a delivery rate that kept up with that (within 1/64) says
        // the cap did not make the queue, while one compared with the cap
        // of now lags a cap growing by an eighth per srtt by far more than
        // 1/64. A queue past min_rtt/32 (3.1 ms at 100 ms: the threshold
        // after slow start, so there the rule is as before; host noise
        // moved srtt by 1.6-3.1 ms) is taken as the cap's doing against
        // the cap of now: with a cap grown by an eighth per srtt the cut
        // must not wait a window there (the twin's fluid model queued
        // past the 1 MB buffer with min_rtt/24 here).
        // A shortfall of more than an eighth is the sender's own, not the
        // bottleneck's: BBR paces at 3/4 of its rate for a round in eight
        // (probe-down), and with noise in srtt each such round cut the
        // cap to 31/32 of it (HTTP, 4.2 s in: 221 → 151 Mbit/s).
        // The caps as the socket uses them: a sender that fills 80% of its
        // cap delivers 20% below it with no queue anywhere.
        // Until the pipe is found full: after that the cap is at the
        // bottleneck, and a sender below it (BBR pacing itself, `fill`
        // 0.67-0.83) let it grow 6-8% past the path (HTTP, full scale).
        // (Nor where the estimate is unsure: `fill` is 1024 there.)
        let fill = if self.fill == 0 || self.full { 1024 } else { self.fill as u64 };
        let capf = self.cap * fill / 1024;
        let sent = self.sent_cap.min(self.cap) * fill / 1024;
        let short = self.sent_cap != 0 && self.dlv_rate * 64 < sent * 63 && self.dlv_rate * 8 >= sent * 7;
        // ... and only where the last window's delivery rate did not grow
        // by 1/8 (one that grows with the cap says the cap did not queue
        // it): host noise past min_rtt/32 came too (HTTP under a load of 5).
        // Once the pipe was found full (growth 1/32 per srtt: the cap is
        // not an eighth above the bottleneck) a delivery rate more than an
        // eighth below the cap is the sender's own too: BBR's rate moved
        // by 384-498 Mbit/s between windows, and each cut to 31/32 of a
        // low one ratcheted HTTP down from 450 to 250 Mbit/s in 3 s.
        // (Not full: `dlv_rate == full_dlv` is a window that grew by 1/8.)
        let deep = queue * HOLD_DEEP_DIV > min_rtt
            && self.dlv_rate * 64 < capf * 63
            && if self.full { self.dlv_rate * 8 >= capf * 7 } else { self.dlv_rate != self.full_dlv };
        let queued = queue_seen && (short || deep);
        if probing && !queued {
            let follow = rate.min(share / 2);
            if follow > self.cap {
                self.cap = follow;
                self.cap_ns = now;
            }
        }
        if self.cap == 0 {
            self.cap = rate;
            self.cap_ns = now;
            return rate;
        }
        // A window that did not grow by 1/8 and ends with a queue the cap
        // made, or one still draining below a cap already cut (the delivery
        // rate above the cap), not host noise under a cap the delivery
        // kept up with, counts towards a full pipe.
        if new_win
            && !self.full
            && self.dlv_rate != self.full_dlv
            && (queued || (queue_seen && self.dlv_rate > self.cap))
        {
            self.full_cnt += 1;
            if self.full_cnt >= HOLD_FULL_WINDOWS {
                self.full = true;
            }
        }
        if queued {
            // Never 0: a cap of 0 is the probe's state.
            let hold = (self.dlv_rate * 31 / 32).max(1);
            if hold < self.cap && self.undo_cap == 0 {
                self.undo_cap = self.cap;
                self.undo_ns = now;
            }
            self.cap = self.cap.min(hold);
        } else if rate >= self.cap && !probing && !queue_seen {
            let dt_us = (now.wrapping_sub(self.cap_ns) / 1000).min(srtt);
            // (growth per srtt, lead over delivery: 0 for none)
            let low = if self.btl_rate == 0 {
                // No estimate (no train of 8 segments came back faster than
                // slow start's pace: an HTTP server's socket under BBR)
                // after slow start, until the pipe is found full: the cap
                // crept from 11 Mbit/s by 8 segments per srtt under the
                // 1/32 of the rule after slow start (issue 47).
                !fast && !self.full
            } else {
                self.dlv_rate * 16 > self.btl_rate * 17
            };
            let (ln, lead) = if below || low {
                // Delivered an eighth more than the estimate over an srtt,
                // which no bottleneck at the estimate allows: the estimate
                // was low (a kernel-paced socket's one train, its initial
                // window's, can be). Or below half the share (after slow
                // start), where a queue is not the cap's: back to half at
                // an eighth per srtt, through a queue too, at most an eighth
                // above delivery (at most the bottleneck's rate, for an
                // estimate within twice of it).
                (HOLD_LN_EIGHTH, HOLD_LOW_LEAD)
            } else if !fast && (self.full || self.cap * 8 >= share * 7) {
                // After slow start, near the share or once the pipe was
                // found full. (Below 7/8 of the share, before the hold
                // found the pipe full, the bands of slow start apply: CUBIC's
                // HyStart ends slow start on a rise of delay, which the
                // probe's bursts and host noise make, and at 1/32 per srtt
                // from there an HTTP download took 3.4 s to its rate.)
                (HOLD_LN_CA, HOLD_LEAD)
            } else if self.btl_rate != 0 {
                if self.cap * 8 < self.btl_rate * 7 {
                    // An estimate from a train shorter than
                    // `BPF_HOLD_SURE_TRAIN_SEGS` (a kernel-paced socket's
                    // initial window) may be up to twice the bottleneck:
                    // above 5/8 of it, 1/16 per srtt.
                    let unsure = self.btl_bytes < BPF_HOLD_SURE_TRAIN_SEGS * a.mss_cache as u64;
                    if unsure && self.cap * 8 >= self.btl_rate * 5 {
                        (HOLD_LN_NEAR_BTL, 0)
                    } else {
                        (HOLD_LN_EIGHTH, 0)
                    }
                } else {
                    (HOLD_LN_NEAR_BTL, HOLD_LEAD)
                }
            } else if queue * HOLD_WARN_DIV > min_rtt {
                (HOLD_LN_NEAR, 0)
            } else {
                (HOLD_LN_SS, 0)
            };
            let ai = a.mss_cache as u64 * HOLD_AI_SEGS * 1_000_000 / srtt;
            if lead == 0 || self.dlv_rate == 0 || capf * lead < self.dlv_rate * (lead + 1) + ai * lead {
                self.cap += (self.cap * ln / 1024).max(ai) * dt_us / srtt;
            }
        }
        // A cut is undone if an ACK within an srtt of it shows no queue
        // (as TCP undoes a spurious retransmission timeout, RFC 3522): the
        // ACKs of the next round trip left before the cut, so a queue the
        // cap made is in every one of them, while a stall of the host or
        // the path (the ACKs of its time come in together, late) raises
        // srtt for some ACKs and is gone by the next. Under preemption of
        // the VM (the emulator's thread away 10-70 ms at once) such cuts to
        // 31/32 of the delivery rate came window after window and took an
        // HTTP download's cap from 428 to 240 Mbit/s in 2.5 s (issue 47).
        if self.undo_cap != 0 {
            if now.wrapping_sub(self.undo_ns) >= srtt * 1000 {
                self.undo_cap = 0;
                // The cut stands, and so does the queue: the delivery rate
                // is the bottleneck's, and an estimate below it was low.
                // (Not at the cut: a stall's cut raised a low estimate to
                // the delivery of the moment, 126 -> 190 -> 252 Mbit/s on
                // a 470 Mbit/s path, and above the delivery rate the cap
                // grew no more than by 1/16 per srtt: nginx at 290.)
                if self.btl_rate != 0 && self.dlv_rate > self.btl_rate {
                    self.btl_rate = self.dlv_rate;
                }
            } else if queue <= BPF_HOLD_MIN_QUEUE_US || queue * div <= min_rtt {
                self.cap = self.cap.max(self.undo_cap);
                self.undo_cap = 0;
            }
        }
        self.cap_ns = now;
        rate.min(self.cap)
    }
}

/// The cap the BPF program sets for a rule: `static` converts the on-wire
/// rate with the socket's MSS (never 0: 1 byte/s); `dynamic` runs
/// [`bpf_dynamic_rate`] under the converted ceiling, if any.
pub fn bpf_rule_rate(static_wire: Option<Rate>, dynamic_ceiling: Option<Rate>, a: BpfAck, ipv6: bool) -> u64 {
    match static_wire {
        Some(w) => bpf_payload_rate(w, a.mss_cache, ipv6).clamp(1, BPF_RATE_MAX),
        None => {
            let c = dynamic_ceiling.map_or(0, |c| bpf_payload_rate(c, a.mss_cache, ipv6).max(1));
            bpf_dynamic_rate(a, c)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A payload rate in bytes/s, as the socket option takes it.
    fn by(b: u64) -> Rate {
        Rate::from_bytes_per_sec(b)
    }

    #[test]
    fn layers_of_a_default_linux_packet() {
        let f = Framing::ETHERNET_1500_TS;
        assert_eq!(f.mss(), 1448);
        assert_eq!(f.bytes(Layer::Ip), 1500);
        assert_eq!(f.bytes(Layer::L2), 1514);
        assert_eq!(f.bytes(Layer::Wire), 1538);
        assert_eq!(Framing::ethernet(9000, false).mss(), 8960);
    }

    #[test]
    fn framing_of_a_segment() {
        let f = |p, v6, ts| {
            let f = Framing::for_segment(p, v6, ts);
            (f.mss(), f.overhead())
        };
        assert_eq!(Framing::for_segment(1448, false, true), Framing::ETHERNET_1500_TS);
        assert_eq!(Framing::ETHERNET_1500_TS.overhead(), 90);
        // Without timestamps: 1460 of 1538.
        assert_eq!(f(1460, false, false), (1460, 78));
        // IPv6: 60 bytes of IP + TCP headers; 1428 + 110 = 1538.
        assert_eq!(f(1428, true, true), (1428, 110));
        // Loopback, MSS held at half the window: still 90 bytes per segment.
        assert_eq!(f(32741, false, true), (32741, 90));
        assert_eq!(Framing::for_segment(0, false, true), Framing::ETHERNET_1500_TS);
        // Nonsense from the kernel saturates instead of overflowing.
        assert_eq!(f(u32::MAX, true, true).0, u32::MAX - 72);
        assert_eq!(
            Framing::for_segment(u32::MAX, true, true).payload_bytes_per_sec(Rate::gbps(1)),
            124_999_997
        );
    }

    #[test]
    fn pacing_cap_of_an_on_wire_rate() {
        let f = Framing::ETHERNET_1500_TS;
        // 62.5 MB/s × 1448/1538 = 58_842_652.8 bytes/s, rounded down.
        assert_eq!(f.payload_bytes_per_sec(Rate::mbps(500)), 58_842_652);
        assert_eq!(f.goodput(Rate::mbps(500)), Rate(470_741_216));
        // Whole bytes: at most 7 bit/s under the exact conversion.
        for wire in [7, 1_000, 123_456_789, 500_000_000, 10_000_000_000] {
            let exact = f.goodput_of_wire(Rate(wire)).0;
            assert!(f.goodput(Rate(wire)).0 <= exact && exact - f.goodput(Rate(wire)).0 <= 8, "{wire}");
        }
        assert_eq!(Framing { mtu: 0, ip_header: 0, tcp_header: 0 }.payload_bytes_per_sec(Rate::mbps(1)), 0);
    }

    #[test]
    fn wire_to_goodput_is_exact() {
        let f = Framing::ETHERNET_1500_TS;
        // 500e6 * 1448 / 1538 = 470 741 222.37
        assert_eq!(f.goodput_of_wire(Rate::mbps(500)), Rate(470_741_222));
        // PSPacer counted L2 frames: 500e6 * 1448 / 1514 = 478 203 434.6
        assert_eq!(f.convert(Rate::mbps(500), Layer::L2, Layer::Payload), Rate(478_203_435));
        // Round trip within one bit/s.
        let back = f.wire_of_goodput(f.goodput_of_wire(Rate::mbps(500)));
        assert!(back.0.abs_diff(500_000_000) <= 1, "{back:?}");
        assert_eq!(f.convert(Rate::mbps(20), Layer::Ip, Layer::Ip), Rate::mbps(20));
    }

    #[test]
    fn ideal_gap_of_full_frames() {
        // 1538 wire bytes at 500 Mbit/s = 24.608 us; at 100 Mbit/s = 123.04 us.
        assert!((ideal_gap_ns(1538, Rate::mbps(500)) - 24_608.0).abs() < 1e-6);
        assert!((ideal_gap_ns(1538, Rate::mbps(100)) - 123_040.0).abs() < 1e-6);
        assert_eq!(ideal_gap_ns(1538, Rate(0)), 0.0);
    }

    #[test]
    fn gap_plan_half_rate() {
        // 1 Gbit/s link, 500 Mbit/s target, 1514-byte frames: ipg equals the
        // packet; one gap frame of 1514 - 2*24 bytes.
        let p = gap_plan(1514, Rate::mbps(500), Rate::gbps(1), 1500).unwrap();
        assert_eq!(p, GapPlan { ipg: 1514, gap_bytes: 1466, n_pkts: 2 });
    }

    #[test]
    fn gap_plan_tenth_rate_needs_several_gap_frames() {
        // ipg = 9 * 1514 = 13626; n=10 gives 13626-240 = 13386 bytes in 9 frames
        // (<= 1500 each), and n=9 would need 10 frames.
        let p = gap_plan(1514, Rate::mbps(100), Rate::gbps(1), 1500).unwrap();
        assert_eq!(p, GapPlan { ipg: 13_626, gap_bytes: 13_386, n_pkts: 10 });
        // Wire time per period equals the packet's time at the target rate.
        let wire = 1514 + p.gap_bytes + HW_GAP as u64 * p.n_pkts as u64;
        assert_eq!(wire * 100, 1514 * 1000);
    }

    #[test]
    fn gap_plan_edges() {
        let p = gap_plan(1514, Rate::gbps(1), Rate::gbps(1), 1500).unwrap();
        assert_eq!(p, GapPlan { ipg: 0, gap_bytes: 0, n_pkts: 1 });
        // Gap smaller than the hardware gap: no gap frame.
        let p = gap_plan(1514, Rate(990_000_000), Rate::gbps(1), 1500).unwrap();
        assert_eq!((p.ipg, p.gap_bytes, p.n_pkts), (15, 0, 1));
        assert_eq!(
            gap_plan(1514, Rate::gbps(2), Rate::gbps(1), 1500),
            Err(PacingError::TargetAboveMax { target: Rate::gbps(2), max: Rate::gbps(1) })
        );
        assert_eq!(gap_plan(1514, Rate(0), Rate::gbps(1), 1500), Err(PacingError::ZeroRate));
        // 1 kbit/s on a 10 Gbit/s link: ~10 million gap frames, computed at once.
        let p = gap_plan(1514, Rate::kbps(1), Rate::gbps(10), 1500).unwrap();
        assert_eq!(p.ipg, 15_139_998_486);
        assert_eq!(p.gap_bytes + HW_GAP as u64 * p.n_pkts as u64, p.ipg);
        assert!(p.gap_bytes <= (p.n_pkts as u64 - 1) * 1500);
        assert!(gap_plan(0, Rate::mbps(1), Rate::gbps(1), 1500).is_err());
    }

    fn sample(cwnd: u32, srtt_ms: u64, q_ms: u64) -> TcpSample {
        TcpSample {
            cwnd,
            mss: 1448,
            srtt: Duration::from_millis(srtt_ms),
            min_rtt: Duration::from_millis(50),
            local_queue: Duration::from_millis(q_ms),
        }
    }

    #[test]
    fn dynamic_rule_eq1_exact() {
        let mut p = DynamicPacer::new(DynamicConfig::default());
        let d = p.on_sample(Instant::ZERO, &sample(100, 100, 0));
        // 100 * 1448 B / 0.1 s
        assert_eq!(d.rate, Some(by(1_448_000)));
        assert_eq!(d.limit, PaceLimit::Window);
        assert_eq!(d.rtt_used, Duration::from_millis(100));
    }

    #[test]
    fn local_queueing_is_subtracted_and_smoothed_by_sixteenths() {
        let mut p = DynamicPacer::new(DynamicConfig::default());
        // First sample initialises the estimate: 16 ms -> RTT 84 ms.
        let d = p.on_sample(Instant::ZERO, &sample(100, 100, 16));
        assert_eq!(d.queue_estimate, Duration::from_millis(16));
        assert_eq!(d.rate, Some(by(144_800 * 1000 / 84))); // 1 723 809
                                                           // Queue empties: estimate moves 1/16 of the way, 16 -> 15 ms.
        let d = p.on_sample(Instant::from_millis(10), &sample(100, 100, 0));
        assert_eq!(d.queue_estimate, Duration::from_millis(15));
        assert_eq!(d.rtt_used, Duration::from_millis(85));
        assert_eq!(d.rate, Some(by(144_800 * 1000 / 85))); // 1 703 529
        assert_eq!(p.last_sample(), Some(Instant::from_millis(10)));
    }

    #[test]
    fn corrected_rtt_never_below_min_rtt() {
        let mut p = DynamicPacer::new(DynamicConfig::default());
        let d = p.on_sample(Instant::ZERO, &sample(10, 60, 40));
        assert_eq!(d.rtt_used, Duration::from_millis(50));
        assert_eq!(d.rate, Some(by(289_600)));
    }

    #[test]
    fn clamps_and_missing_rtt() {
        let cfg =
            DynamicConfig { ceiling: Some(by(1_000_000)), floor: by(50_000), ..DynamicConfig::default() };
        let mut p = DynamicPacer::new(cfg);
        let d = p.on_sample(Instant::ZERO, &sample(100, 100, 0));
        assert_eq!((d.rate, d.limit), (Some(by(1_000_000)), PaceLimit::Ceiling));
        let d = p.on_sample(Instant::ZERO, &sample(1, 100, 0));
        assert_eq!((d.rate, d.limit), (Some(by(50_000)), PaceLimit::Floor));
        let mut none = DynamicPacer::new(DynamicConfig::default());
        let s = TcpSample { srtt: Duration::ZERO, min_rtt: Duration::ZERO, ..sample(10, 0, 0) };
        let d = none.on_sample(Instant::ZERO, &s);
        assert_eq!((d.rate, d.limit), (None, PaceLimit::NoRtt));
        // A cap below the floor is respected.
        let cfg = DynamicConfig { ceiling: Some(by(10_000)), floor: by(50_000), ..DynamicConfig::default() };
        let d = DynamicPacer::new(cfg).on_sample(Instant::ZERO, &sample(1, 100, 0));
        assert_eq!(d.rate, Some(by(10_000)));
    }

    #[test]
    fn gain_scales_like_the_kernel_ratios() {
        assert_eq!(window_rate(100, 1448, Duration::from_millis(100), 2.0), by(2_896_000));
        assert_eq!(window_rate(100, 1448, Duration::from_millis(100), 1.2), by(1_737_600));
    }

    #[test]
    fn resume_paces_the_kept_window_at_the_delivery_rate() {
        // [HPC-TCP]: 500 Mbit/s, 100 ms RTT, 2 s pauses.
        let s = IdleState {
            idle: Duration::from_millis(1840),
            rto: Duration::from_millis(300),
            srtt: Duration::from_millis(100),
            cwnd: 1000,
            mss: 1000,
            last_delivery_rate: by(10_000_000),
        };
        let plan = resume_after_idle(&s, None).unwrap();
        assert_eq!(plan, ResumePlan { rate: by(10_000_000), hold: Duration::from_millis(100) });
        // Capped by the static ceiling: the window takes longer.
        let plan = resume_after_idle(&s, Some(by(5_000_000))).unwrap();
        assert_eq!(plan.hold, Duration::from_millis(200));
        // No delivery rate: cwnd * mss / srtt.
        let plan = resume_after_idle(&IdleState { last_delivery_rate: Rate(0), ..s }, None).unwrap();
        assert_eq!(plan.rate, by(10_000_000));
        // In JSON, bytes/s as before rates were typed.
        assert_eq!(serde_json::to_value(plan).unwrap()["rate"], 10_000_000);
        // Short pause: the ACK clock still runs, nothing to do.
        assert_eq!(resume_after_idle(&IdleState { idle: Duration::from_millis(200), ..s }, None), None);
    }

    #[test]
    fn bpf_payload_rate_is_the_framing_cap() {
        assert_eq!(bpf_payload_rate(Rate::mbps(500), 1448, false), 58_842_652);
        assert_eq!(bpf_payload_rate(Rate::mbps(500), 0, false), 58_842_652);
        assert_eq!(bpf_payload_rate(Rate::gbps(1), 1428, true), 116_059_817);
        // Loopback's large MSS: almost the whole wire rate.
        assert_eq!(bpf_payload_rate(Rate::mbps(30), 65483, false), 3_744_853);
        for mss in [1, 536, 1448, 1460, 8948, 32741, 65483] {
            for wire in [7, 1_000_000, 123_456_789, 500_000_000, 40_000_000_000] {
                for v6 in [false, true] {
                    let f = Framing::for_segment(mss, v6, true);
                    assert_eq!(bpf_payload_rate(Rate(wire), mss, v6), f.payload_bytes_per_sec(Rate(wire)));
                }
            }
        }
    }

    #[test]
    fn a_subflows_dss_option_comes_out_of_the_payload() {
        // 1448 − 28 = 1420 payload bytes in the same 1538-byte frame:
        // 40e6 · 1420 / (8 · 1538) = 4_616_384.9.
        assert_eq!(bpf_payload_rate_opts(Rate::mbps(40), 1448, false, MPTCP_DSS_BYTES), 4_616_384);
        assert_eq!(
            bpf_payload_rate_opts(Rate::mbps(40), 1448, false, 0),
            bpf_payload_rate(Rate::mbps(40), 1448, false)
        );
        // The frame a subflow sends at that payload rate fills the wire rate:
        // 4_616_384 / 1420 frames/s · 1538 · 8 bit = 39.99999 Mbit/s.
        let wire: f64 = 4_616_384.0 / 1420.0 * 1538.0 * 8.0;
        assert!((wire - 40e6).abs() < 20.0, "{wire}");
        // Options larger than the MSS leave one byte, never zero or a wrap.
        assert_eq!(bpf_payload_rate_opts(Rate::mbps(8), 20, false, 28), 8_000_000 / (8 * 110));
    }

    #[test]
    fn bpf_dynamic_rate_exact() {
        let a = BpfAck { snd_cwnd: 100, mss_cache: 1448, srtt_us_x8: 800_000, rtt_min_us: 50_000 };
        // 100 * 1448 B / 0.1 s
        assert_eq!(bpf_dynamic_rate(a, 0), 1_448_000);
        assert_eq!(bpf_dynamic_rate(a, 1_000_000), 1_000_000);
        // srtt below min_rtt (a fresh sample after a queue drained): min_rtt wins.
        let fast = BpfAck { srtt_us_x8: 8 * 40_000, ..a };
        assert_eq!(bpf_dynamic_rate(fast, 0), 2_896_000);
        // Floor, and a ceiling below the floor.
        let tiny = BpfAck { snd_cwnd: 1, srtt_us_x8: 8 * 1_000_000, ..a };
        assert_eq!(bpf_dynamic_rate(tiny, 0), 12_500);
        assert_eq!(bpf_dynamic_rate(tiny, 10_000), 10_000);
        // No RTT yet: the ceiling, or "paced but uncapped".
        let none = BpfAck { srtt_us_x8: 0, rtt_min_us: 0, ..a };
        assert_eq!(bpf_dynamic_rate(none, 0), BPF_RATE_MAX);
        assert_eq!(bpf_dynamic_rate(none, 5), 5);
        // Too fast for the 4-byte option.
        let huge = BpfAck { snd_cwnd: 100_000, mss_cache: 65483, srtt_us_x8: 8 * 10, rtt_min_us: 5 };
        assert_eq!(bpf_dynamic_rate(huge, 0), BPF_RATE_MAX);
        // Rules: static converts with the socket's MSS; dynamic caps at the converted ceiling.
        assert_eq!(bpf_rule_rate(Some(Rate::mbps(500)), None, a, false), 58_842_652);
        assert_eq!(bpf_rule_rate(Some(Rate(7)), None, a, false), 1);
        assert_eq!(bpf_rule_rate(None, Some(Rate::mbps(8)), a, false), 941_482);
        assert_eq!(bpf_rule_rate(None, None, a, false), 1_448_000);
    }

    /// The bytes of a train long enough for a sure estimate.
    const SURE: u64 = 1448 * BPF_HOLD_SURE_TRAIN_SEGS;

    /// One ACK for the hold tests: 100 ms min RTT, 1448-byte MSS, cwnd 100
    /// of an infinite ssthresh unless changed.
    fn hack(now_us: u64, acked: u64, srtt_us: u32) -> HoldAck {
        HoldAck {
            now_ns: now_us * 1000,
            bytes_acked: acked,
            srtt_us_x8: srtt_us * 8,
            rtt_min_us: 100_000,
            snd_cwnd: 100,
            snd_ssthresh: u32::MAX,
            mss_cache: 1448,
            flows: 1,
            others_cap: 0,
            snd_nxt: 0,
        }
    }

    /// A hold past its probe with a cap (the cap its last windows were
    /// sent under too), an estimate of 10 MB/s from a long train (sure),
    /// and its cap and delivery window last touched 1 ms in.
    fn held(cap: u64) -> BpfHold {
        BpfHold {
            cap,
            win_cap: cap,
            last_cap: cap,
            sent_cap: cap,
            cap_ns: 1_000_000,
            win_start_ns: 1_000_000,
            btl_rate: 10_000_000,
            btl_bytes: SURE,
            ..BpfHold::default()
        }
    }

    #[test]
    fn hold_probes_the_bottleneck_with_the_ack_trains_of_unpaced_slow_start() {
        let mut h = BpfHold::default();
        let probe = |t_us: u64, acked: u64| HoldAck { snd_cwnd: 20, ..hack(t_us, acked, 100_000) };
        // A train of 10 ACKs 24 µs apart (one 1448-byte segment each: 482.7
        // Mbit/s of payload), unpaced throughout.
        for i in 0..10u64 {
            assert_eq!(h.on_ack(1_000_000, 2_000_000, probe(1_000 + 24 * i, 1448 * i)), BPF_RATE_UNPACED);
        }
        assert_eq!(h.btl_rate, 0, "a train counts only once it has ended");
        // 100 ms later the next round's first ACK ends it: 9 segments in
        // 216 µs.
        h.on_ack(1_000_000, 2_000_000, probe(101_000, 1448 * 10));
        assert_eq!((h.btl_rate, h.btl_bytes), (1448 * 9 * 1_000_000 / 216, 1448 * 9));
        // A shorter train (7 segments) does not count, nor does a faster
        // train with fewer bytes than the best.
        for i in 1..8u64 {
            h.on_ack(1_000_000, 2_000_000, probe(101_000 + 10 * i, 1448 * (10 + i)));
        }
        h.on_ack(1_000_000, 2_000_000, probe(201_000, 1448 * 30));
        assert_eq!(h.btl_bytes, 1448 * 9);
        // At cwnd 64, or here a sixteenth of the estimated BDP (60.3 MB/s
        // × 100 ms: 4166 segments, 260), pacing starts, still in slow start:
        // at eq. (1) with twice the window, and the cap starts there.
        let at = |cwnd: u32| HoldAck { snd_cwnd: cwnd, ..hack(201_100, 1448 * 31, 100_000) };
        assert_eq!(h.on_ack(800_000, 1_600_000, at(259)), BPF_RATE_UNPACED);
        assert_eq!(h.on_ack(800_000, 1_600_000, at(260)), 1_600_000);
        assert_eq!(h.cap, 1_600_000);
    }

    /// Issue 27 item 3: a short transfer whose slow start never reaches
    /// [`BPF_HOLD_LOW_WINDOW`] is never paced by the hold (every ACK says
    /// "unpaced", whatever eq. (1) asks), so the hold cannot slow it; only
    /// leaving slow start (a loss: cwnd ≥ ssthresh) ends the probe, and the
    /// cap then starts at eq. (1)'s rate.
    #[test]
    fn hold_never_paces_a_slow_start_below_the_probe_window() {
        let mut h = BpfHold::default();
        // Rounds of 10, 20 and 40 segments, 100 ms apart, ACKs 30 µs apart:
        // 70 segments (101 KB), the whole of a 100 KB flow.
        let mut acked = 0u64;
        for (round, cwnd) in [10u32, 20, 40].iter().enumerate() {
            for i in 0..u64::from(*cwnd) {
                acked += 1448;
                let t = 100_000 * (round as u64 + 1) + 30 * i;
                // cwnd grows by one per two ACKs (delayed ACKs): 59 at most.
                let a = HoldAck { snd_cwnd: cwnd + i as u32 / 2, ..hack(t, acked, 100_000) };
                assert_eq!(h.on_ack(1_000_000, 2_000_000, a), BPF_RATE_UNPACED, "round {round} ack {i}");
            }
        }
        assert_eq!(h.cap, 0, "never paced");
        // The rounds' trains were measured all the same; the last one is
        // still open (the next ACK would end it), so the 20-segment round
        // (19 segments in 570 µs) is the estimate.
        assert_eq!((h.btl_bytes, h.btl_rate), (1448 * 19, 1448 * 19 * 1_000_000 / 570));
        // A loss at cwnd 60: ssthresh 42, slow start is over and the probe
        // ends below the window all the same; the cap starts at eq. (1).
        // The ACK ends the last round's train (39 segments in 1170 µs),
        // the longest: it is the estimate now.
        let after = HoldAck { snd_cwnd: 42, snd_ssthresh: 42, ..hack(400_000, acked + 1448, 100_000) };
        assert_eq!(h.on_ack(600_000, 1_200_000, after), 600_000);
        assert_eq!((h.cap, h.btl_bytes, h.btl_rate), (600_000, 1448 * 39, 1448 * 39 * 1_000_000 / 1170));
    }

    /// On a long fat path the probe goes on to a sixteenth of the
    /// estimated BDP: at 62.5 MB/s and 100 ms, 4316 segments of 1448 B, so
    /// slow start stays unpaced up to cwnd 269 and a transfer of up to
    /// about 450 KB (cwnd 10 + 20 + … + 160) never meets the pacer;
    /// without an estimate, or on a short path, 64.
    #[test]
    fn hold_probes_to_a_sixteenth_of_the_estimated_bdp() {
        let h = BpfHold { btl_rate: 62_500_000, ..BpfHold::default() };
        assert_eq!(h.probe_window(100_000, 1448), 269);
        assert_eq!(h.probe_window(1_000, 1448), 64);
        assert_eq!(h.probe_window(100_000, 0), 64);
        assert_eq!(BpfHold::default().probe_window(100_000, 1448), 64);
        let ack = |cwnd: u32| HoldAck { snd_cwnd: cwnd, ..hack(150_000, 0, 100_000) };
        let mut p = h;
        assert_eq!(p.on_ack(1_000_000, 2_000_000, ack(268)), BPF_RATE_UNPACED);
        assert_eq!(p.cap, 0);
        let mut p = h;
        assert_eq!(p.on_ack(1_000_000, 2_000_000, ack(269)), 2_000_000);
        assert_eq!(p.cap, 2_000_000);
    }

    /// The window in which cwnd reaches [`BPF_HOLD_LOW_WINDOW`] is the
    /// probe's longest train; the part of it acked before pacing starts
    /// counts (a probe whose earlier trains all fell short, or were split
    /// by a pause of the host, still ends with an estimate).
    #[test]
    fn hold_counts_the_train_it_is_in_when_the_probe_ends() {
        let mut h = BpfHold::default();
        // A first window whose ACKs are too far apart to be a train (3 ms).
        let mut acked = 0u64;
        for i in 0..10u64 {
            acked += 1448;
            let a = HoldAck { snd_cwnd: 10 + i as u32, ..hack(100_000 + 3_000 * i, acked, 100_000) };
            assert_eq!(h.on_ack(1_000_000, 2_000_000, a), BPF_RATE_UNPACED);
        }
        assert_eq!(h.btl_rate, 0);
        // The next window, ACKs 25 µs apart: cwnd reaches 64 at its 45th
        // ACK, which starts pacing. 44 segments were acked in 44 × 25 µs
        // before it (each call sees the count before its own ACK).
        let mut paced = None;
        for i in 0..45u64 {
            let a = HoldAck { snd_cwnd: 20 + i as u32, ..hack(200_000 + 25 * i, acked, 100_000) };
            acked += 1448;
            let r = h.on_ack(1_000_000, 2_000_000, a);
            if r != BPF_RATE_UNPACED {
                paced = Some((i, r));
            }
        }
        assert_eq!(paced, Some((44, 2_000_000)));
        assert_eq!((h.btl_bytes, h.btl_rate), (1448 * 44, 1448 * 44 * 1_000_000 / (44 * 25)));
    }

    /// Four of the rule's sockets past their probe: each follows slow start to half of
    /// a quarter of the estimate (not half of all of it: four flows that
    /// ramped together took twice the bottleneck); above that it grows in
    /// time, by an eighth per srtt up to 7/8 of the estimate (the queue the
    /// four make stops it), 1/16 above.
    #[test]
    fn hold_shares_the_estimate_among_the_rules_held_sockets() {
        // The three others at 3 MB/s each leave less than a quarter.
        let four = |t_us: u64| HoldAck { flows: 4, others_cap: 9_000_000, ..hack(t_us, 0, 100_000) };
        // Alone: up to 5 MB/s; one of four: up to 1.25 MB/s.
        let mut h = held(1_000_000);
        assert_eq!(h.on_ack(4_000_000, 8_000_000, hack(51_000, 0, 100_000)), 5_000_000);
        let mut h = held(1_000_000);
        assert_eq!(h.on_ack(4_000_000, 8_000_000, four(51_000)), 1_250_000);
        // Above half its share it grows in time: 9/8 per srtt below 7/8 of
        // the estimate (8.75 MB/s), past the share (2.5 MB/s) ...
        let mut h = held(2_000_000);
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, four(101_000)), 2_000_000 + 2_000_000 * 120 / 1024);
        let mut h = held(8_700_000);
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, four(101_000)), 8_700_000 + 8_700_000 * 120 / 1024);
        // ... and 1/16 above, within 1/32 of its delivery.
        let mut h = BpfHold { dlv_rate: 8_800_000, ..held(8_800_000) };
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, four(101_000)), 8_800_000 + 8_800_000 * 62 / 1024);
        // When the others close, the whole estimate is its again: slow
        // start's own rate up to half of it.
        let mut h = held(2_200_000);
        assert_eq!(h.on_ack(8_000_000, 16_000_000, hack(102_000, 0, 100_000)), 5_000_000);
    }

    /// After slow start, a queue with a shortfall cuts a cap above half the
    /// share (10 MB/s alone) to 31/32 of delivery, and not a cap below it:
    /// that cap cannot have made the queue (host noise, another's
    /// traffic), and repeated cuts ratcheted it down. There it grows back
    /// towards half the share instead.
    #[test]
    fn hold_never_cuts_below_half_its_share() {
        let ca = HoldAck { snd_ssthresh: 50, ..hack(51_000, 0, 110_000) };
        let mut h = BpfHold { dlv_rate: 5_800_000, ..held(6_000_000) };
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, ca), 5_800_000 * 31 / 32);
        // Below half the share it is not cut but grows, through that
        // queue, by an eighth per srtt (50 of the 110 ms srtt here) ...
        let mut h = BpfHold { dlv_rate: 3_800_000, ..held(4_000_000) };
        let grown = 4_000_000 + 4_000_000 * 120 / 1024 * 50_000 / 110_000;
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, ca), grown, "cut or held below half the share");
        // ... while within an eighth (and 8 segments per srtt) of delivery.
        let mut h = BpfHold { dlv_rate: 3_400_000, ..held(4_000_000) };
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, ca), 4_000_000);
    }

    /// After slow start (CUBIC's HyStart ends it on a rise of delay) and
    /// before the hold found the pipe full, a cap between half and 7/8 of
    /// the share grows by an eighth per srtt, as in slow start; near the
    /// share, or once the pipe was found full, by 1/32.
    #[test]
    fn hold_grows_by_an_eighth_after_slow_start_until_near_the_share() {
        let ca = HoldAck { snd_ssthresh: 50, ..hack(101_000, 0, 100_000) };
        let mut h = held(6_000_000);
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, ca), 6_000_000 + 6_000_000 * 120 / 1024);
        let mut h = BpfHold { full: true, ..held(6_000_000) };
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, ca), 6_000_000 + 6_000_000 * 32 / 1024);
        let mut h = held(9_000_000);
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, ca), 9_000_000 + 9_000_000 * 32 / 1024);
    }

    /// Four held sockets whose caps leave more of the estimate than a
    /// quarter: the share is what they leave (here 6 of 10 MB/s), so slow
    /// start follows to 3 MB/s, not to 1.25; caps summing to more than the
    /// quarter leaves keep the quarter.
    #[test]
    fn hold_takes_what_the_other_held_sockets_caps_leave_of_the_estimate() {
        let four = |others_cap: u64| HoldAck { flows: 4, others_cap, ..hack(51_000, 0, 100_000) };
        let mut h = held(1_000_000);
        assert_eq!(h.on_ack(4_000_000, 8_000_000, four(4_000_000)), 3_000_000);
        let mut h = held(1_000_000);
        assert_eq!(h.on_ack(4_000_000, 8_000_000, four(9_000_000)), 1_250_000);
        // Others' caps above the estimate (theirs may be higher): a quarter.
        let mut h = held(1_000_000);
        assert_eq!(h.on_ack(4_000_000, 8_000_000, four(30_000_000)), 1_250_000);
        // Past 7/8 of what they leave (5.25 of 6 MB/s) slow start's band
        // goes on while no queue shows, to 7/8 of the estimate.
        let near = HoldAck { flows: 4, others_cap: 4_000_000, ..hack(101_000, 0, 100_000) };
        let mut h = held(5_300_000);
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, near), 5_300_000 + 5_300_000 * 120 / 1024);
        // A queue stops it (the others' traffic and its own fill the path).
        let queued = HoldAck { srtt_us_x8: 8 * 102_000, ..near };
        let mut h = BpfHold { dlv_rate: 5_250_000, ..held(5_300_000) };
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, queued), 5_300_000);
    }

    #[test]
    fn hold_follows_slow_start_to_half_the_estimate_an_eighth_to_seven_eighths_a_sixteenth_above() {
        // Below half the estimate the cap is slow start's own rate
        // (`ss_rate`), however far that is above it, up to half the
        // estimate; no growth in time on top of it.
        let mut h = held(1_000_000);
        assert_eq!(h.on_ack(1_000_000, 3_000_000, hack(51_000, 0, 100_000)), 3_000_000);
        assert_eq!((h.cap, h.cap_ns), (3_000_000, 51_000_000));
        assert_eq!(h.on_ack(1_000_000, 2_000_000, hack(101_000, 0, 100_000)), 2_000_000);
        assert_eq!(h.cap, 3_000_000);
        assert_eq!(h.on_ack(4_000_000, 8_000_000, hack(151_000, 0, 100_000)), 5_000_000);
        assert_eq!(h.cap, 5_000_000);
        // At half the estimate, rounded down, the next band takes over
        // (an odd estimate once left the cap there for good): + 9/8 per
        // srtt over the 50 µs since.
        let mut h = BpfHold { btl_rate: 10_000_001, ..held(1_000_000) };
        assert_eq!(h.on_ack(4_000_000, 8_000_000, hack(151_000, 0, 100_000)), 5_000_000);
        assert_eq!(
            h.on_ack(4_000_000, 8_000_000, hack(151_050, 0, 100_000)),
            5_000_000 + 585_937 * 50 / 100_000
        );
        // From half the estimate to 7/8 of it: ln(9/8) = 120/1024 per srtt.
        let mut h = held(6_000_000);
        assert_eq!(
            h.on_ack(u64::MAX, u64::MAX, hack(101_000, 0, 100_000)),
            6_000_000 + 6_000_000 * 120 / 1024
        );
        // Above 7/8 (8.75 MB/s): ln(17/16) = 62/1024 per srtt.
        let mut h = held(9_000_000);
        assert_eq!(
            h.on_ack(u64::MAX, u64::MAX, hack(101_000, 0, 100_000)),
            9_000_000 + 9_000_000 * 62 / 1024
        );
        // A gap of several srtt grows by one srtt's worth, no more; eq. (1)
        // under the cap neither grows nor is capped.
        let mut h2 = h;
        assert_eq!(h2.on_ack(u64::MAX, u64::MAX, hack(1_101_000, 0, 100_000)), h.cap + h.cap * 62 / 1024);
        assert_eq!(h.on_ack(5_000, 10_000, hack(1_101_000, 0, 100_000)), 10_000);
        assert_eq!(h.cap, 9_544_921);
    }

    /// Near the estimate and after slow start the cap grows only while it
    /// is less than 1/32 above the last window's delivery rate: a full
    /// bottleneck stops the delivery rate, and the cap stops with it
    /// instead of putting another srtt of growth into the queue.
    #[test]
    fn hold_grows_no_further_than_a_lead_over_the_delivery_rate() {
        let held = |cap: u64, dlv_rate: u64, full: bool| BpfHold {
            cap,
            cap_ns: 1_000_000,
            win_start_ns: 1_000_000,
            btl_rate: 10_000_000,
            btl_bytes: SURE,
            dlv_rate,
            full,
            ..BpfHold::default()
        };
        let ack = hack(51_000, 0, 100_000);
        // The lead is 1/32 of delivery plus 8 segments per srtt (1448 B,
        // 100 ms: 115,840 B/s). Slow start above 7/8 of the estimate:
        // 9.0 MB/s against 8.62 MB/s delivered is under the lead (8.62 ×
        // 33/32 + 0.11584 = 9.0053): grows by 62/1024 per srtt; against 8.61
        // (8.9950) it stays.
        let mut h = held(9_000_000, 8_620_000, false);
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, ack), 9_000_000 + 9_000_000 * 62 / 1024 * 50 / 100);
        let mut h = held(9_000_000, 8_610_000, false);
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, ack), 9_000_000);
        // Below 7/8 the lead does not apply (9/8 per srtt), nor does it
        // before a delivery rate was measured.
        let mut h = held(6_000_000, 1_000_000, false);
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, ack), 6_000_000 + 6_000_000 * 120 / 1024 * 50 / 100);
        let mut h = held(9_000_000, 0, false);
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, ack), 9_000_000 + 9_000_000 * 62 / 1024 * 50 / 100);
        // After slow start: 6.4 against 6.09 (6.09 × 33/32 + 0.11584 =
        // 6.3961) stays; against 6.1 (6.4064) grows by 32/1024 per srtt.
        let mut h = held(6_400_000, 6_090_000, true);
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, ack), 6_400_000);
        let mut h = held(6_400_000, 6_100_000, true);
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, ack), 6_400_000 + 6_400_000 * 32 / 1024 * 50 / 100);
    }

    /// A flow held small (a loss in its first windows left it without an
    /// estimate and with a cwnd of 7) grows by 8 segments per srtt, not by
    /// 1/32 of itself: at 1/32 a cap of 100 kB/s gains 3 kB/s per srtt and
    /// a 450 kB transfer took 4.3 s in the web-like mix; AI reaches the
    /// same cap in one srtt. Above 3.7 MB/s (8 segments = 1/32 of the cap)
    /// the fraction is the larger step, as before.
    #[test]
    fn hold_grows_a_small_cap_by_segments_not_by_a_fraction() {
        // The delivery window started 60 ms in, so none ends at 101 ms.
        let ca = |cap: u64, dlv_rate: u64| BpfHold {
            cap,
            cap_ns: 1_000_000,
            win_start_ns: 60_000_000,
            dlv_rate,
            full: true,
            ..BpfHold::default()
        };
        let ack = |t_us: u64| HoldAck { snd_ssthresh: 7, snd_cwnd: 7, ..hack(t_us, 0, 100_000) };
        // One srtt of ACKs (dt capped at srtt): +115,840 B/s, eight segments
        // per 100 ms; the old step was 100,000 × 32/1024 = 3,125.
        let mut h = ca(100_000, 100_000);
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, ack(101_000)), 215_840);
        // Half an srtt: half the step.
        let mut h = ca(100_000, 100_000);
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, ack(51_000)), 157_920);
        // The lead lets it run ahead of the delivery rate by the step: a cap
        // of 200 kB/s over 100 kB/s delivered (3,125 + 115,840 above 1/32)
        // grows; at 220 kB/s it waits for delivery.
        let mut h = ca(200_000, 100_000);
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, ack(101_000)), 315_840);
        let mut h = ca(220_000, 100_000);
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, ack(101_000)), 220_000);
        // A big cap: 1/32 of 8 MB/s (250,000) is the larger step.
        let mut h = ca(8_000_000, 8_000_000);
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, ack(101_000)), 8_250_000);
    }

    /// Right after the probe, slow start's unpaced bursts are still in the
    /// bottleneck's queue: below half the estimate and for two srtt that
    /// queue does not hold the cap (it did, to 31/32 of a delivery rate
    /// measured while the windows were still tiny, and slow start stalled)
    /// nor bring slow start down to eq. (1) (1.76 instead of 2 per RTT);
    /// above half, or later (other traffic's queue), it does both.
    #[test]
    fn hold_ignores_the_probes_queue_below_half_the_estimate() {
        let held = |cap: u64| BpfHold { dlv_rate: 1_000_000, ..held(cap) };
        // 2.1 ms of queue (> min_rtt/64) at a cap of 1.9 MB/s, 51 ms after
        // the probe's last ACK: slow start's 2.4 MB/s, not eq. (1)'s 1.2,
        // and no hold.
        let mut h = held(1_900_000);
        assert_eq!(h.on_ack(1_200_000, 2_400_000, hack(51_000, 0, 102_100)), 2_400_000);
        // The same queue 300 ms after it (two srtt are 204.2 ms) is not the
        // probe's: eq. (1), but no cut below half the estimate (the queue
        // is not this cap's doing: hold_never_cuts_below_half_its_share).
        let mut h = held(1_900_000);
        assert_eq!(h.on_ack(1_200_000, 2_400_000, hack(300_000, 538_200, 102_100)), 1_200_000);
        assert_eq!(h.cap, 1_900_000);
        // The same queue at 5.1 MB/s (above half; 4.6 MB/s delivered): 31/32
        // of delivery, and eq. (1).
        let mut h = BpfHold { dlv_rate: 4_600_000, ..held(5_100_000) };
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, hack(51_000, 0, 102_100)), 4_456_250);
        let mut h = BpfHold { dlv_rate: 4_600_000, ..held(5_100_000) };
        assert_eq!(h.on_ack(1_200_000, 2_400_000, hack(51_000, 0, 102_100)), 1_200_000);
        // Without an estimate there is no "below half": it holds.
        let mut h = BpfHold { btl_rate: 0, dlv_rate: 1_800_000, ..held(1_900_000) };
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, hack(51_000, 0, 102_100)), 1_743_750);
    }

    #[test]
    fn hold_without_an_estimate_grows_a_quarter_and_a_tenth_near_a_queue() {
        let mut h =
            BpfHold { cap: 1_000_000, cap_ns: 1_000_000, win_start_ns: 1_000_000, ..BpfHold::default() };
        assert_eq!(h.on_ack(u64::MAX, u64::MAX, hack(101_000, 0, 100_000)), 1_222_656);
        // 300 µs of queue (> 100 ms/400) but no hold: + 98/1024 per srtt.
        assert_eq!(
            h.on_ack(u64::MAX, u64::MAX, hack(201_000, 0, 100_300)),
            1_222_656 + 1_222_656 * 98 / 1024 * 100_000 / 100_300
        );
    }

    #[test]
    fn hold_holds_a_queue_at_31_32_of_delivery_and_finds_the_pipe_full() {
        let mut h = BpfHold {
            cap: 90_000,
            win_cap: 90_000,
            last_cap: 70_000,
            sent_cap: 70_000,
            cap_ns: 1_000_000,
            win_start_ns: 1_000_000,
            win_acked: 0,
            dlv_rate: 64_000,
            full_dlv: 64_000,
            ..BpfHold::default()
        };
        // 1.5 ms of queue on a 100 ms path: below min_rtt/64 (1.5625 ms): no hold.
        assert_eq!(h.on_ack(80_000, 160_000, hack(1_000, 0, 101_500)), 90_000);
        assert_eq!(h.cap, 90_000);
        // 2 ms: the cap falls to 31/32 of the delivery rate.
        assert_eq!(h.on_ack(80_000, 160_000, hack(1_000, 0, 102_000)), 62_000);
        // A window ends (6 400 bytes in 102 ms: no 1/8 growth) with the
        // queue still there: one; the second such window finds it full.
        h.on_ack(80_000, 160_000, hack(103_000, 6_400, 102_000));
        assert_eq!((h.full_cnt, h.full, h.dlv_rate), (1, false, 62_745));
        h.on_ack(80_000, 160_000, hack(205_000, 12_800, 102_000));
        assert_eq!((h.full_cnt, h.full), (2, true));
        // Full: 3 ms (< min_rtt/32 = 3.125 ms) is no queue, and the cap
        // grows by ln(33/32) = 32/1024 per srtt or by 8 segments, whichever
        // is more: at this small cap the segments (1448 × 8 per 103 ms).
        let cap = h.cap;
        let ai = 1448 * 8 * 1_000_000 / 103_000;
        assert!(ai > cap * 32 / 1024);
        assert_eq!(
            h.on_ack(u64::MAX, u64::MAX, hack(308_000, 12_800, 103_000)),
            cap + ai * 103_000 / 103_000
        );
    }

    /// Completion time (ns) of `segs` segments of slow start (cwnd 10,
    /// one ACK per segment, no loss) over a path of `rtt_us` propagation
    /// and a `btl_ns`-per-segment bottleneck, the sender paced at what
    /// `rates` returns for each ACK (eq. (1) and twice it as the twin's
    /// inputs): `None` for unpaced. RTT samples are each segment's own.
    fn slow_start_fct(
        segs: u64,
        rtt_us: u64,
        btl_ns: u64,
        rates: Option<&mut dyn FnMut(u64, u64, HoldAck) -> u64>,
    ) -> u64 {
        slow_start_run(segs, rtt_us, btl_ns, false, rates)
    }

    /// [`slow_start_fct`], and with `kernel_paced` the kernel paces the
    /// socket itself whatever the cap (as once a pacing congestion control
    /// or an earlier cap turned its pacing on): at most twice eq. (1)
    /// (`tcp_pacing_ss_ratio` 200%), under the hold's cap if it sets one.
    fn slow_start_run(
        segs: u64,
        rtt_us: u64,
        btl_ns: u64,
        kernel_paced: bool,
        mut rates: Option<&mut dyn FnMut(u64, u64, HoldAck) -> u64>,
    ) -> u64 {
        let (mss, rtt_ns) = (1448u64, rtt_us * 1000);
        let mut flight = std::collections::VecDeque::new(); // (sent, acked at)
        let (mut t, mut next_send, mut link_free) = (0u64, 0u64, 0u64);
        let (mut sent, mut acked, mut cwnd, mut gap_ns) = (0u64, 0u64, 10u64, 0u64);
        let mut min_rtt = u64::MAX;
        while acked < segs {
            let send_at =
                if sent < segs && (flight.len() as u64) < cwnd { t.max(next_send) } else { u64::MAX };
            let ack_at = flight.front().map_or(u64::MAX, |&(_, at)| at);
            if send_at <= ack_at {
                t = send_at;
                link_free = link_free.max(t) + btl_ns;
                flight.push_back((t, link_free + rtt_ns));
                sent += 1;
                next_send = t + gap_ns;
            } else {
                let (at_send, at) = flight.pop_front().unwrap();
                t = at;
                acked += 1;
                cwnd += 1;
                let sample_us = (at - at_send) / 1000;
                min_rtt = min_rtt.min(sample_us);
                if let Some(f) = rates.as_mut() {
                    let eq1 = cwnd * mss * 1_000_000 / sample_us;
                    let a = HoldAck {
                        now_ns: t,
                        bytes_acked: acked * mss,
                        srtt_us_x8: sample_us as u32 * 8,
                        rtt_min_us: min_rtt as u32,
                        snd_cwnd: cwnd as u32,
                        snd_ssthresh: u32::MAX,
                        mss_cache: mss as u32,
                        flows: 1,
                        others_cap: 0,
                        snd_nxt: (sent * mss) as u32,
                    };
                    let r = f(eq1, 2 * eq1, a);
                    let r = if kernel_paced { r.min(2 * eq1) } else { r };
                    gap_ns = if r == BPF_RATE_UNPACED { 0 } else { mss * 1_000_000_000 / r };
                }
            }
        }
        t
    }

    /// Issue 27 item 3: the hold must not slow a transfer that ends in slow
    /// start. On [PSPacer]'s path (100 ms, 500 Mbit/s: 24.6 µs per
    /// segment) a 650 KB transfer (450 segments) ends exactly as unpaced:
    /// the probe (to a sixteenth of the estimated BDP, cwnd 253 here)
    /// covers all but its last ACKs. A 1 MB one (700 segments) ends within
    /// 1% of unpaced slow start, a 3 MB one (2100) within 4%; fed eq. (1)
    /// as its slow-start rate too (what the hold once did), the 3 MB one
    /// ends half an RTT later.
    #[test]
    fn hold_does_not_slow_a_transfer_that_ends_in_slow_start() {
        let fct = |segs: u64| {
            let unpaced = slow_start_fct(segs, 100_000, 24_608, None);
            let mut h = BpfHold::default();
            let held = slow_start_fct(segs, 100_000, 24_608, Some(&mut |r, ss, a| h.on_ack(r, ss, a)));
            let mut old = BpfHold::default();
            let eq1_only = slow_start_fct(segs, 100_000, 24_608, Some(&mut |r, _, a| old.on_ack(r, r, a)));
            assert!(h.cap > 0 && old.cap > 0, "{segs}: both were paced after the probe");
            (unpaced, held, eq1_only)
        };
        let (unpaced, held, _) = fct(450);
        assert_eq!(held, unpaced);
        let (unpaced, held, _) = fct(700);
        assert!(held * 100 <= unpaced * 101, "held {held} ns against unpaced {unpaced} ns");
        let (unpaced, held, eq1_only) = fct(2100);
        assert!(held * 100 <= unpaced * 104, "held {held} ns against unpaced {unpaced} ns");
        assert!(eq1_only >= unpaced + 40_000_000, "eq. (1) alone {eq1_only} ns against unpaced {unpaced} ns");
    }

    /// Issue 47: `iperf3 -C cubic` under the hold on [PSPacer]'s path
    /// (500 Mbit/s, 100 ms) started at 10 Mbit/s and crept up for seconds.
    /// Its socket was established under the host's default BBR, which
    /// turned the kernel's own pacing on; switched to CUBIC it stays paced
    /// at twice eq. (1), so "unpaced" slow start sent each window spread
    /// over the round trip, and the probe's trains came back at that rate
    /// (about 15 Mbit/s at cwnd 64), which it took for the bottleneck: the
    /// train with the most bytes won. Fed those trains (here the initial
    /// window still leaves as one burst, as on the wire; the kernel's pacing
    /// starts with the first ACK), the hold takes its estimate only from a
    /// train that came back faster than the kernel's slow-start pace: the
    /// initial window's, the bottleneck within 3%, as the same slow start
    /// left unpaced finds it; its cap reaches 95% of the bottleneck within
    /// 2 s of the first ACK unpaced, 2.1 s kernel-paced (an estimate from
    /// the initial window alone is unsure and approached more slowly).
    /// (Before the fix: an estimate of 1.0 MB/s, and 95% not reached in
    /// the 60 000 segments.)
    #[test]
    fn hold_estimates_the_bottleneck_under_the_kernels_own_pacing() {
        let btl = 1448 * 1_000_000_000 / 24_608; // 58.84 MB/s of payload
        let run = |kernel_paced: bool| {
            let mut h = BpfHold::default();
            let mut first_ns = 0u64;
            let mut reached_ns = None;
            let mut at_probe_end = None;
            slow_start_run(
                60_000,
                100_000,
                24_608,
                kernel_paced,
                Some(&mut |r, ss, a| {
                    let out = h.on_ack(r, ss, a);
                    if first_ns == 0 {
                        first_ns = a.now_ns;
                    }
                    if h.cap != 0 && at_probe_end.is_none() {
                        at_probe_end = Some(h.btl_rate);
                    }
                    if reached_ns.is_none() && h.cap * 100 >= btl * 95 {
                        reached_ns = Some(a.now_ns - first_ns);
                    }
                    out
                }),
            );
            (at_probe_end.expect("the probe ended"), reached_ns)
        };
        for kernel_paced in [true, false] {
            let (estimate, reached) = run(kernel_paced);
            assert!(
                estimate.abs_diff(btl) * 100 <= btl * 3,
                "kernel_paced {kernel_paced}: estimate {estimate} of {btl}"
            );
            let reached = reached.expect("the cap reached 95% of the bottleneck");
            // The kernel-paced estimate is the initial window's alone
            // (unsure: 1/16 per srtt above 5/8 of it), so a little later.
            let within = if kernel_paced { 2_100_000_000 } else { 2_000_000_000 };
            assert!(reached <= within, "kernel_paced {kernel_paced}: 95% after {reached} ns");
        }
    }

    /// The fluid bottleneck of the writers below: `btl` payload bytes/s,
    /// a `buffer`-byte drop-tail queue and 100 ms of propagation, stepped a
    /// millisecond at a time. Slot `t % 100` holds what millisecond `t`
    /// delivered in all and the queue delay (µs) its bytes met, read a
    /// round trip later as that millisecond's ACKs.
    struct FluidPath {
        btl: u64,
        buffer: u64,
        queue: u64,
        total: u64,
        dropped: u64,
        delivered: Vec<u64>,
        qdelay: Vec<u64>,
    }

    impl FluidPath {
        const RTT_MS: usize = 100;

        fn new(btl: u64, buffer: u64) -> FluidPath {
            let (delivered, qdelay) = (vec![0; Self::RTT_MS], vec![0; Self::RTT_MS]);
            FluidPath { btl, buffer, queue: 0, total: 0, dropped: 0, delivered, qdelay }
        }

        /// Millisecond `t`'s ACKs: (bytes acked, queue delay µs).
        fn acks(&self, t: u64) -> (u64, u64) {
            let k = t as usize % Self::RTT_MS;
            (self.delivered[k], self.qdelay[k])
        }

        /// `arrived` bytes reach the bottleneck in millisecond `t`.
        fn step(&mut self, t: u64, arrived: u64) {
            let backlog = self.queue + arrived;
            let out = backlog.min(self.btl / 1000);
            self.queue = backlog - out;
            if self.queue > self.buffer {
                self.dropped += self.queue - self.buffer;
                self.queue = self.buffer;
            }
            self.total += out;
            let k = t as usize % Self::RTT_MS;
            self.delivered[k] = self.total;
            self.qdelay[k] = self.queue * 1_000_000 / self.btl;
        }
    }

    /// A sender that paces itself at the cap the hold sets (as BBR does
    /// while the cap binds: its startup and its probing phase pace at 2.89
    /// and 1.25 times its delivery rate) over a fluid bottleneck of `btl`
    /// payload bytes/s, 100 ms of propagation and a `buffer`-byte drop-tail
    /// queue, from the end of a probe that left `estimate`; ACKs every
    /// millisecond, each srtt sample the propagation plus the queue its
    /// bytes met. `ssthresh_at_ms`: when the sender's slow start ends
    /// (BBR sets ssthresh to its BDP estimate when its startup ends).
    /// Returns (the time the cap first reached 95% of `btl`, bytes dropped,
    /// the estimate at the end).
    fn paced_writer_run(
        btl: u64,
        buffer: u64,
        estimate: u64,
        ssthresh_at_ms: u64,
        ms: u64,
    ) -> (Option<u64>, u64, u64) {
        paced_writer_noisy(btl, buffer, estimate, ssthresh_at_ms, ms, &|_| 0)
    }

    /// [`paced_writer_run`] on a loaded host: `noise_us(t)` is added to
    /// the srtt sample of millisecond `t` with no queue behind it (the
    /// host's scheduling of the sender, the receiver and the userspace
    /// emulator; srtt rose by 1.6–3.1 ms with the bottleneck's queue under
    /// 130 KB in the HTTP download's traces).
    fn paced_writer_noisy(
        btl: u64,
        buffer: u64,
        estimate: u64,
        ssthresh_at_ms: u64,
        ms: u64,
        noise_us: &dyn Fn(u64) -> u64,
    ) -> (Option<u64>, u64, u64) {
        let h = BpfHold { btl_rate: estimate, btl_bytes: 9 * 1448, ..BpfHold::default() };
        paced_writer_from(h, btl, buffer, ssthresh_at_ms, ms, noise_us)
    }

    /// [`paced_writer_noisy`] from the hold's state `h` at the end of the probe.
    fn paced_writer_from(
        h: BpfHold,
        btl: u64,
        buffer: u64,
        ssthresh_at_ms: u64,
        ms: u64,
        noise_us: &dyn Fn(u64) -> u64,
    ) -> (Option<u64>, u64, u64) {
        let (reached, dropped, h, _) =
            paced_writer_stalled(h, btl, buffer, ssthresh_at_ms, ms, noise_us, &|_| false, 100);
        (reached, dropped, h.btl_rate)
    }

    /// [`paced_writer_from`] with the ACK clock stopped in the milliseconds
    /// `stalled(t)` says (a host that did not run the emulator or the
    /// sender: the ACKs of that time come in at its end, together), and a
    /// sender that sends `fill_pct`% of its cap (the kernel's pacing of a
    /// low cap, issue 47: 78-81% at 36 Mbit/s). Also returns the hold's
    /// state at the end and the cap at each millisecond.
    #[allow(clippy::too_many_arguments)]
    fn paced_writer_stalled(
        mut h: BpfHold,
        btl: u64,
        buffer: u64,
        ssthresh_at_ms: u64,
        ms: u64,
        noise_us: &dyn Fn(u64) -> u64,
        stalled: &dyn Fn(u64) -> bool,
        fill_pct: u64,
    ) -> (Option<u64>, u64, BpfHold, Vec<u64>) {
        let mut sent_total = 0u64;
        let mut caps = Vec::with_capacity(ms as usize);
        let mut path = FluidPath::new(btl, buffer);
        let mut rate = 0u64;
        let mut reached = None;
        for t in 0..ms {
            // This millisecond's ACKs: what was delivered one RTT ago.
            let (acked, qdelay) = path.acks(t);
            let a = HoldAck {
                now_ns: (t + 1) * 1_000_000,
                bytes_acked: acked,
                srtt_us_x8: (100_000 + qdelay + noise_us(t)) as u32 * 8,
                rtt_min_us: 100_000,
                snd_cwnd: 20_000,
                snd_ssthresh: if t < ssthresh_at_ms { u32::MAX } else { 500 },
                mss_cache: 1448,
                flows: 1,
                others_cap: 0,
                snd_nxt: sent_total as u32,
            };
            // Eq. (1) with a window far above the path's: the cap binds.
            let eq1 = 20_000 * 1448 * 10;
            if !stalled(t) {
                let r = h.on_ack(eq1, 2 * eq1, a);
                if r != BPF_RATE_UNPACED {
                    rate = r;
                }
            }
            caps.push(h.cap);
            if reached.is_none() && h.cap * 100 >= btl * 95 {
                reached = Some(t);
            }
            // The bottleneck over this millisecond.
            let arrived = rate * fill_pct / 100 / 1000;
            sent_total += arrived;
            path.step(t, arrived);
        }
        (reached, path.dropped, h, caps)
    }

    /// A sender that paces itself as BBR does (nginx and python's
    /// http.server under the host's default, issue 47), over a
    /// [`FluidPath`], from the hold's state `h` at
    /// the end of the probe. Per round (100 ms) the delivery rate of the
    /// round is a bandwidth sample, `bw` the most of the last ten; startup
    /// paces at 2.885 × bw until three rounds in a row grow bw by less than
    /// a quarter (slow start ends then: BBR sets ssthresh), a round of drain
    /// at bw / 2.885, then the probing cycle of eight rounds at 5/4, 3/4
    /// and six times 1 × bw, from its third. It sends the less of its pace
    /// and the cap the hold returned. Returns (bytes dropped, the hold at
    /// the end, the cap at each millisecond).
    fn bbr_writer(mut h: BpfHold, btl: u64, buffer: u64, ms: u64) -> (u64, BpfHold, Vec<u64>) {
        const CYCLE: [u64; 8] = [5, 3, 4, 4, 4, 4, 4, 4]; // gains, quarters
        let mut path = FluidPath::new(btl, buffer);
        let mut sent_total = 0u64;
        let mut caps = Vec::with_capacity(ms as usize);
        let first_bw = 64 * 1448 * 10;
        let (mut samples, mut bw, mut full_bw, mut flat) = ([0u64; 10], first_bw, 0u64, 0u32);
        let (mut startup, mut drain, mut phase, mut round_acked) = (true, false, 2usize, 0u64);
        for t in 0..ms {
            let (acked, qdelay) = path.acks(t);
            if t > 0 && t % 100 == 0 {
                samples[(t / 100) as usize % 10] = (acked - round_acked) * 10;
                round_acked = acked;
                bw = samples.iter().copied().max().unwrap_or(0).max(first_bw);
                if startup {
                    if bw * 4 >= full_bw * 5 {
                        (full_bw, flat) = (bw, 0);
                    } else {
                        flat += 1;
                        (startup, drain) = (flat < 3, flat >= 3);
                    }
                } else if drain {
                    drain = false;
                } else {
                    phase = (phase + 1) % CYCLE.len();
                }
            }
            let a = HoldAck {
                now_ns: (t + 1) * 1_000_000,
                bytes_acked: acked,
                srtt_us_x8: (100_000 + qdelay) as u32 * 8,
                rtt_min_us: 100_000,
                snd_cwnd: 20_000,
                snd_ssthresh: if startup { u32::MAX } else { 500 },
                mss_cache: 1448,
                flows: 1,
                others_cap: 0,
                snd_nxt: sent_total as u32,
            };
            let eq1 = 20_000 * 1448 * 10;
            let cap = h.on_ack(eq1, 2 * eq1, a);
            caps.push(h.cap);
            let pace = match (startup, drain) {
                (true, _) => bw * 2885 / 1000,
                (_, true) => bw * 1000 / 2885,
                _ => bw * CYCLE[phase] / 4,
            };
            let arrived = pace.min(cap) / 1000;
            sent_total += arrived;
            path.step(t, arrived);
        }
        (path.dropped, h, caps)
    }

    /// Issue 47: nginx under the hold (full scale, one repeat of three)
    /// dropped 1686 packets: its BBR ended its startup at the path's rate
    /// under a cap above it (an unsure estimate of 581 Mbit/s on 470), then
    /// paced itself at 0.78-0.93 of the cap, and the cap, weighed by that
    /// share, grew to 1.3 times the path; each of BBR's probes (5/4 of its
    /// rate for a round in eight) overflowed the 1 MB buffer. An unsure
    /// estimate (a socket the kernel paces itself) now leaves the cap
    /// unweighed. Fed to a BBR-like sender ([`bbr_writer`]) from unsure
    /// estimates of 0.8 to 1.24 times the bottleneck, the cap stays under
    /// 1.13 times the bottleneck from 3 s on and drops 182 KB in one case
    /// (1.24 times; the others nothing), where the weighed cap reached
    /// 1.23-1.89 times the bottleneck in 6 of these 8 cases and dropped
    /// 0.18-1.7 MB in 7.
    /// (The model's BBR follows a cap that grows only in its probing
    /// rounds, so from the low estimates it reaches 95% late: 5.2-6.1 s.)
    #[test]
    fn hold_keeps_a_sender_that_paces_itself_below_the_path() {
        let btl = 1448 * 1_000_000_000 / 24_608; // 58.84 MB/s of payload
        let mut dropping = Vec::new();
        for pct in [80u64, 90, 97, 100, 105, 110, 118, 124] {
            let h = BpfHold { btl_rate: btl * pct / 100, btl_bytes: 9 * 1448, ..BpfHold::default() };
            let (dropped, _, caps) = bbr_writer(h, btl, 1_000_000, 8_000);
            let most = caps[3_000..].iter().copied().max().unwrap_or(0);
            assert!(most * 100 <= btl * 113, "{pct}%: cap {most} of {btl} after 3 s");
            let reached = caps.iter().position(|&c| c * 100 >= btl * 95);
            assert!(reached.is_some_and(|t| t <= 6_500), "{pct}%: 95% at {reached:?} ms");
            if dropped > 0 {
                dropping.push((pct, dropped));
            }
        }
        assert!(dropping.len() <= 1 && dropping.iter().all(|&(_, d)| d <= 200_000), "{dropping:?}");
    }

    /// Issue 47: `tcpaccel send` under the hold (full scale, repeat 0)
    /// delivered 78-81% of a cap of 31-36 Mbit/s for 20 s, on a 470 Mbit/s
    /// path: every growth rule near the estimate leads the delivery rate
    /// by at most 1/32 or 1/8, which a sender that sends 80-95% of its cap
    /// never comes within, queue or not, so the cap froze at 7/8 of its
    /// estimate (13%, 43% and 87% of the path from estimates of 72, 232
    /// and 470). The law now weighs its cap by the share of it the socket
    /// sent (`fill`: bytes sent, from `snd_nxt`, over the bytes the caps
    /// it returned allowed in the window). Such senders reach 95% of the
    /// bottleneck in 1.4-5.9 s (slow start ending at 0.8 s or never), and
    /// one case of 18 drops 176 KB (a sender that fills its cap, from the
    /// estimate of 72: 92 KB); a sender that fills its cap is measured at
    /// 1024/1024 and runs as before (every other test here).
    #[test]
    fn hold_grows_a_sender_that_sends_less_than_its_cap() {
        let btl = 1448 * 1_000_000_000 / 24_608; // 58.84 MB/s of payload
        let mut worst = 0;
        for fill_pct in [80u64, 90, 95] {
            for est in [72u64, 232, 470] {
                for ssthresh_at_ms in [800u64, 100_000] {
                    let h = BpfHold { btl_rate: btl * est / 470, btl_bytes: 38 * 1448, ..BpfHold::default() };
                    let (_, dropped, h, caps) = paced_writer_stalled(
                        h,
                        btl,
                        1_000_000,
                        ssthresh_at_ms,
                        8_000,
                        &|_| 0,
                        &|_| false,
                        fill_pct,
                    );
                    let case =
                        format!("{fill_pct}% of the cap, estimate {est}, ssthresh at {ssthresh_at_ms} ms");
                    let sends = |c: u64| c * fill_pct / 100;
                    let reached = caps.iter().position(|&c| sends(c) * 100 >= btl * 95);
                    assert!(reached.is_some_and(|t| t <= 6_500), "{case}: 95% at {reached:?} ms");
                    let fill = h.fill as u64 * 100;
                    assert!(fill.abs_diff(fill_pct * 1024) <= 1024, "{case}: fill {} of 1024", h.fill);
                    worst = worst.max(dropped);
                }
            }
        }
        assert!(worst <= 200_000, "dropped {worst} bytes");
    }

    /// Issue 47 item 1: a socket the kernel paces itself (BBR, the host's
    /// default, under python's http.server) has no unpaced burst but its
    /// 9-segment initial window, and that train's estimate came back at
    /// 67 Mbit/s on seed 000's 470 Mbit/s of payload (one run's trace;
    /// 302 and 333 in others). The hold took it for the bottleneck and
    /// crept up for seconds (http at 96 Mbit/s against static's 430); now a
    /// window that delivers 1/16 more than the estimate says it was low,
    /// and the cap grows by 1/8 per srtt while less than 1/8 above the
    /// delivery rate.
    ///
    /// Fed estimates from 1/10 of the bottleneck to 19/20 of it (both with
    /// the sender's slow start ending at 0.8 s and never), the cap reaches
    /// 95% of the bottleneck in every case (within 6 s from 1/10, within
    /// 3 s from 7/10), the estimate ends at the bottleneck, and no case
    /// drops more than 300 KB in the 1 MB buffer (most drop nothing). With
    /// a lead of 1/4 (the rule before) the same sweep reached 95% up to
    /// 1.5 s sooner but dropped in 23 of its 36 cases, up to 1.9 MB: the
    /// lead's overshoot past the bottleneck, as the lab saw when the
    /// estimates were made low on purpose (nc and python's downloads then
    /// dropped 434 and 485 packets, issue 47).
    #[test]
    fn hold_recovers_from_a_low_estimate_of_a_socket_that_paces_itself() {
        let btl = 1448 * 1_000_000_000 / 24_608; // 58.84 MB/s of payload
        let (mut dropping, mut worst) = (0, 0);
        for pct in (10..=95).step_by(5) {
            for ssthresh_at_ms in [800, 100_000] {
                let estimate = btl * pct / 100;
                let (reached, dropped, end) =
                    paced_writer_run(btl, 1_000_000, estimate, ssthresh_at_ms, 7_000);
                let reached = reached.unwrap_or_else(|| panic!("{pct}%: 95% not reached in 7 s"));
                let within = if pct >= 70 { 3_000 } else { 6_000 };
                assert!(reached <= within, "{pct}% ({ssthresh_at_ms}): 95% after {reached} ms");
                assert!(end.abs_diff(btl) * 100 <= btl * 5, "{pct}% ended at {end} of {btl}");
                dropping += usize::from(dropped > 0);
                worst = worst.max(dropped);
            }
        }
        assert!(worst <= 300_000 && dropping <= 6, "{dropping} cases dropped, the worst {worst} bytes");
        // A right estimate is left as it was, and nothing is dropped.
        let (reached, dropped, end) = paced_writer_run(btl, 1_000_000, btl, 800, 6_000);
        assert!(reached.is_some_and(|r| r <= 1_500) && dropped == 0, "{reached:?} {dropped}");
        assert_eq!(end, btl);
    }

    /// Issue 47: the initial window's train of a kernel-paced socket came
    /// back at 1.04-2.04 times the bottleneck (host-batched ACK times), and
    /// the cap, grown by 1/8 per srtt up to 7/8 of such an estimate, passed
    /// the bottleneck by 1/8 an srtt before the queue showed: 42-1059
    /// packets dropped per run. An estimate from fewer than
    /// `BPF_HOLD_SURE_TRAIN_SEGS` segments grows by 1/16 above 5/8 of it.
    /// Fed estimates from 0.96 to 1.5 times the bottleneck, nothing is
    /// dropped and 95% is reached within 1.7 s; the same estimates taken as
    /// sure (from a long train) drop up to 1.2 MB from 1.35 times on.
    #[test]
    fn hold_grows_slowly_near_an_unsure_high_estimate() {
        let btl = 1448 * 1_000_000_000 / 24_608;
        let run = |pct: u64, btl_bytes: u64| {
            let h = BpfHold { btl_rate: btl * pct / 100, btl_bytes, ..BpfHold::default() };
            paced_writer_from(h, btl, 1_000_000, 800, 6_000, &|_| 0)
        };
        for pct in (96..=150).step_by(3) {
            let (reached, dropped, _) = run(pct, 9 * 1448);
            assert_eq!(dropped, 0, "{pct}%");
            assert!(reached.is_some_and(|r| r <= 1_700), "{pct}%: {reached:?}");
        }
        let sure_drops: Vec<u64> = (135..=150).step_by(3).map(|pct| run(pct, SURE).1).collect();
        assert!(sure_drops.iter().all(|&d| d > 0), "{sure_drops:?}");
    }

    /// Issue 47 item 1, the HTTP download (python's http.server under the
    /// host's BBR, which paces itself at the cap while the cap binds) on a
    /// loaded host: srtt rose by 1.6–3.1 ms for tens of milliseconds at a
    /// time with no queue at the bottleneck. The delivery rate of a window
    /// lags a cap that grows by an eighth per srtt by more than 1/64, so
    /// each such rise passed for a queue the cap made: the cap was cut to
    /// 31/32 of the delivery rate again and again, two of them without
    /// growth set the pipe full, and the cap crept from there (the runs
    /// held at 132–186 Mbit/s of 470). Fed that pattern (3 ms for 40 ms
    /// every 200 ms: above the slow-start threshold of min_rtt/64, and
    /// 3.5 ms every other time: above the one after it, min_rtt/32), the
    /// hold compares the delivery rate with the cap its bytes were sent
    /// under (the cap at the start of the window before), and reaches 95%
    /// of the bottleneck within 3 s from the estimates the runs had, with
    /// nothing dropped (2.5 s before the low estimate's lead fell from 1/4
    /// to 1/8 and the initial window's estimate became unsure, which cost
    /// 0.26 s here and removed the drops the sweeps above show).
    #[test]
    fn hold_grows_through_host_noise_of_a_socket_that_paces_itself() {
        let btl = 1448 * 1_000_000_000 / 24_608; // 58.84 MB/s of payload
        let noise = |t: u64| match t % 400 {
            100..=139 => 2_000,
            300..=339 => 3_000,
            _ => 0,
        };
        for (estimate, ssthresh_at_ms) in [(btl * 333 / 470, 1_300), (btl, 1_300), (btl * 323 / 470, 100_000)]
        {
            let (reached, dropped, _) =
                paced_writer_noisy(btl, 1_000_000, estimate, ssthresh_at_ms, 6_000, &noise);
            assert!(reached.is_some_and(|r| r <= 3_000), "estimate {estimate}: 95% after {reached:?} ms");
            assert_eq!(dropped, 0, "estimate {estimate}");
        }
    }

    /// Issue 47: under preemption of the VM (the emulator's thread away
    /// 10-70 ms at once) an HTTP download's cap, at 428 Mbit/s of 470, was
    /// cut to 31/32 of its delivery window after window, down to 240 in
    /// 2.5 s with nothing dropped: each stall held the ACKs back (a window
    /// short of the cap its bytes were sent under) and came back as srtt
    /// past min_rtt/32 for some ACKs. Fed stalls of 5-30 ms every 50-200 ms
    /// (no ACK in the stall; its ACKs come in at its end, their srtt the
    /// stall's length above min_rtt, falling by 1 ms per ms), from an
    /// estimate of the bottleneck and of 4/5 of it, the cap reaches 95%
    /// within 4 s and never falls below 4/5 after, nothing dropped (from
    /// 3 s on it averages 98-99% of the bottleneck, its least 83-95%).
    /// Without the undo it averaged 46-89% (58% with stalls of 20 ms every
    /// 130 ms). A queue the cap made is never
    /// undone: with no noise, from estimates of 1/10 to 3/2 of the
    /// bottleneck, the cap never rises by more than growth does.
    #[test]
    fn hold_undoes_a_cut_that_the_next_acks_show_no_queue_for() {
        // Exact: 2 ms of queue in slow start cuts to 31/32 of delivery; an
        // ACK 1 ms later with 1 ms restores the cap; a cut whose srtt
        // passed with the queue in every ACK stays, and raises a lower
        // estimate to the delivery rate.
        let cut = BpfHold {
            last_cap: 70_000,
            sent_cap: 70_000,
            dlv_rate: 64_000,
            full_dlv: 64_000,
            btl_rate: 60_000,
            ..held(90_000)
        };
        let mut h = cut;
        assert_eq!(h.on_ack(80_000, 160_000, hack(1_000, 0, 102_000)), 62_000);
        assert_eq!((h.undo_cap, h.undo_ns), (90_000, 1_000_000));
        // (The larger of the cap before the cut and the one grown since.)
        assert_eq!(h.on_ack(80_000, 160_000, hack(2_000, 0, 101_000)), 90_000);
        // ... and the estimate stays: the delivery rate of a stall's
        // window is no bottleneck's.
        assert_eq!((h.undo_cap, h.btl_rate), (0, 60_000));
        let ai = 1448 * 8 * 1_000_000 / 101_000;
        let mut h = cut;
        h.on_ack(80_000, 160_000, hack(1_000, 0, 102_000));
        h.on_ack(80_000, 160_000, hack(60_000, 0, 102_500));
        // (A window ends here: 6 656 bytes in 104 ms, the delivery rate kept.)
        h.on_ack(80_000, 160_000, hack(105_000, 6_656, 102_500));
        assert_eq!((h.cap, h.undo_cap), (62_000, 0));
        // A queue that stood: the delivery rate is the bottleneck's.
        assert_eq!(h.btl_rate, 64_000);
        // Then no queue: growth from the cut, not the cap before it.
        assert_eq!(h.on_ack(80_000, 160_000, hack(106_000, 6_656, 101_000)), 62_000 + ai * 1_000 / 101_000);

        let btl = 1448 * 1_000_000_000 / 24_608;
        for (len, every) in [(5u64, 50u64), (10, 100), (20, 130), (30, 200)] {
            let stalled = move |t: u64| t % every < len;
            let noise = move |t: u64| match t % every {
                p if p >= len && p < 2 * len => (2 * len - p) * 1_000,
                _ => 0,
            };
            for pct in [100, 80] {
                let h = BpfHold { btl_rate: btl * pct / 100, btl_bytes: SURE, ..BpfHold::default() };
                let (reached, dropped, _, caps) =
                    paced_writer_stalled(h, btl, 1_000_000, 800, 8_000, &noise, &stalled, 100);
                let case = format!("stalls of {len} ms every {every}, estimate {pct}%");
                assert_eq!(dropped, 0, "{case}");
                let reached = reached.unwrap_or_else(|| panic!("{case}: 95% not reached"));
                assert!(reached <= 4_000, "{case}: 95% after {reached} ms");
                let low = caps[reached as usize..].iter().min().unwrap();
                assert!(low * 5 >= btl * 4, "{case}: the cap fell to {low} of {btl}");
            }
        }
        for pct in (10..=150).step_by(5) {
            let h = BpfHold { btl_rate: btl * pct / 100, btl_bytes: SURE, ..BpfHold::default() };
            let (_, _, _, caps) =
                paced_writer_stalled(h, btl, 1_000_000, 800, 7_000, &|_| 0, &|_| false, 100);
            for (t, w) in caps.windows(2).enumerate() {
                assert!(
                    w[0] == 0 || w[1] * 100 <= w[0] * 101,
                    "{pct}%: the cap rose from {} to {} at {t} ms",
                    w[0],
                    w[1]
                );
            }
        }
    }

    /// Issue 47: an HTTP server's socket under BBR (paced by the kernel
    /// from its first window) sent no train of 8 segments faster than
    /// slow start's pace, so the hold had no estimate, and after slow
    /// start its cap crept from 11 Mbit/s by 8 segments per srtt (the
    /// 1/32 of the rule after slow start is less at that rate). With no
    /// estimate, after slow start and until the pipe is found full, the
    /// cap grows as from a low estimate: by 1/8 per srtt while less than
    /// 1/8 above the delivery rate. From 11 Mbit/s on [PSPacer]'s path
    /// it reaches 95% of the bottleneck in 6.1 s with nothing dropped;
    /// under the rule after slow start it was at 18% after 8 s.
    #[test]
    fn hold_without_an_estimate_after_slow_start_grows_as_from_a_low_one() {
        let btl = 1448 * 1_000_000_000 / 24_608;
        let cap = 11_000_000 / 8;
        let h =
            BpfHold { cap, win_cap: cap, last_cap: cap, sent_cap: cap, dlv_rate: cap, ..BpfHold::default() };
        let (reached, dropped, end, caps) =
            paced_writer_stalled(h, btl, 1_000_000, 0, 8_000, &|_| 0, &|_| false, 100);
        assert_eq!((dropped, end.btl_rate), (0, 0), "no estimate is made here");
        assert!(reached.is_some_and(|r| r <= 6_500), "{reached:?}");
        assert!(caps[7_999] * 20 >= btl * 19);
    }

    #[test]
    fn hold_ignores_noise_a_limited_socket_and_a_microsecond_path() {
        // A window of no growth with the queue gone in between: the count
        // resets once the delivery rate grows by 1/8 again.
        let mut h = BpfHold {
            cap: 100_000,
            cap_ns: 1_000_000,
            win_start_ns: 1_000_000,
            dlv_rate: 64_000,
            full_dlv: 64_000,
            full_cnt: 1,
            ..BpfHold::default()
        };
        h.on_ack(u64::MAX, u64::MAX, hack(101_000, 7_300, 100_000));
        assert_eq!((h.full_cnt, h.full_dlv), (0, 73_000));
        // Delivery under half the cap: the socket was limited elsewhere, a
        // queue is no reason to hold.
        let mut h = BpfHold {
            cap: 200_000,
            cap_ns: 1_000_000,
            win_start_ns: 1_000_000,
            dlv_rate: 64_000,
            ..BpfHold::default()
        };
        // Slow start into 10 ms of queue: eq. (1), not twice it.
        assert_eq!(h.on_ack(150_000, 180_000, hack(1_000, 0, 110_000)), 150_000);
        // A path of microseconds: 300 µs of noise on a 20 µs min_rtt is no
        // queue (under 1 ms); 1.2 ms is.
        let micro = |srtt_us: u32| HoldAck { rtt_min_us: 20, snd_ssthresh: 10, ..hack(1_000, 0, srtt_us) };
        let mut h = BpfHold {
            cap: 4_000,
            cap_ns: 1_000_000,
            win_start_ns: 1_000_000,
            dlv_rate: 3_900,
            ..BpfHold::default()
        };
        assert_eq!(h.on_ack(3_000, 6_000, micro(320)), 3_000);
        assert_eq!(h.on_ack(9_000, 18_000, micro(1_220)), 3_778);
        // The same queue with a delivery rate that kept up with the cap
        // (within 1/64): the bottleneck did not make it, no cut.
        let mut h = BpfHold { dlv_rate: 3_950, ..h };
        h.cap = 4_000;
        assert_eq!(h.on_ack(9_000, 18_000, micro(1_220)), 4_000);
    }

    proptest! {
        /// The per-ACK twin is the same decision as the TCP_INFO controller
        /// fed with no local queueing (the claim in bpf_dynamic_rate's docs).
        #[test]
        fn bpf_dynamic_rate_matches_dynamic_pacer(cwnd in 1u32..100_000, mss in 1u32..65_536,
                                                  srtt_us in 1u32..2_000_000, min_us in 0u32..2_000_000,
                                                  ceil in prop::option::of(12_500u64..4_000_000_000)) {
            let a = BpfAck { snd_cwnd: cwnd, mss_cache: mss, srtt_us_x8: srtt_us * 8, rtt_min_us: min_us };
            let cfg = DynamicConfig { ceiling: ceil.map(by), ..DynamicConfig::default() };
            let s = TcpSample { cwnd, mss, srtt: Duration::from_micros(srtt_us as u64),
                min_rtt: Duration::from_micros(min_us as u64), local_queue: Duration::ZERO };
            let d = DynamicPacer::new(cfg).on_sample(Instant::ZERO, &s);
            prop_assert_eq!(bpf_dynamic_rate(a, ceil.unwrap_or(0)), d.rate.unwrap().bytes_per_sec().min(BPF_RATE_MAX));
        }
    }

    proptest! {
        #[test]
        fn gap_plan_invariants(pkt in 64u32..9000, target_kbps in 1u64..10_000_000, mtu in 576u32..9000) {
            let max = Rate::gbps(10);
            let target = Rate::kbps(target_kbps);
            let p = gap_plan(pkt, target, max, mtu).unwrap();
            // Every gap frame fits in an MTU.
            prop_assert!(p.gap_bytes <= (p.n_pkts as u64 - 1) * mtu as u64);
            // Wire time per period never undercuts the target spacing by more
            // than rounding, and is exact when a gap frame is sent.
            if p.gap_bytes > 0 {
                prop_assert_eq!(p.gap_bytes + HW_GAP as u64 * p.n_pkts as u64, p.ipg);
            }
            // The fixed point is the smallest one.
            if p.n_pkts > 1 {
                let n = p.n_pkts as u64 - 1;
                let g = p.ipg.saturating_sub(HW_GAP as u64 * n);
                prop_assert!(g.div_ceil(mtu as u64) + 1 > n);
            }
        }

        #[test]
        fn dynamic_rate_respects_clamps(cwnd in 1u32..100_000, srtt_us in 1u64..2_000_000, q_us in 0u64..2_000_000,
                                        floor in 0u64..1_000_000, ceil in 1_000_000u64..10_000_000_000) {
            let cfg = DynamicConfig { floor: by(floor), ceiling: Some(by(ceil)), ..DynamicConfig::default() };
            let mut p = DynamicPacer::new(cfg);
            let s = TcpSample { cwnd, mss: 1448, srtt: Duration::from_micros(srtt_us),
                min_rtt: Duration::from_micros(srtt_us / 2), local_queue: Duration::from_micros(q_us) };
            let d = p.on_sample(Instant::ZERO, &s);
            let r = d.rate.unwrap().bytes_per_sec();
            prop_assert!(r >= floor && r <= ceil);
            prop_assert!(d.rtt_used >= s.min_rtt);
        }
    }
}
