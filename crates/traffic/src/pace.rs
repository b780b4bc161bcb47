//! Pacing choices of the traffic tool and the honest conversion of an
//! on-wire rate into the kernel's pacing cap.
//!
//! What it is: the `--pace` value as this tool runs it ([`Pace`]: the one
//! pacing grammar, [`tcpaccel_core::pace_spec`], with a plain `dynamic`
//! resolved to [`DEFAULT_DYNAMIC`]), the
//! TCP_INFO side of the framing arithmetic (the arithmetic itself is
//! [`tcpaccel_core::pacing::Framing`]), the [`PaceControl`] extension point the sender calls
//! with TCP_INFO samples, and the two dynamic policies ([`KernelPace`],
//! [`LoopPace`]). What it is not: no sockets; the sender applies the rates
//! this module computes, and namespace sysctls are the caller's business.
//!
//! ## `dynamic`: the PSPD rule, two ways ([PSPacer] eq. 1)
//! - `dynamic=kernel`: the socket is only *marked* as paced
//!   (`SO_MAX_PACING_RATE` set to the ceiling, or to just below "unlimited"),
//!   and Linux's internal pacing runs at `mss·max(cwnd, packets_out)/srtt`
//!   times `tcp_pacing_ss_ratio` / `tcp_pacing_ca_ratio`. Those ratios are
//!   **per-namespace sysctls** (defaults 200 and 120); only with both at 100
//!   is this eq. 1. A socket option cannot set them; the tool warns.
//! - `dynamic=loop`: a control loop reads TCP_INFO every
//!   [`LOOP_PERIOD`] and sets `SO_MAX_PACING_RATE` to
//!   `cwnd·mss/(srtt − local queueing)` through
//!   [`tcpaccel_core::pacing::DynamicPacer`] (PSPacer's estimator). The
//!   kernel keeps its own (higher, ratio-scaled) rate underneath; the cap
//!   is what makes the rate eq. 1.
//!
//! `dynamic` alone means [`DEFAULT_DYNAMIC`]; see its docs for why.
//!
//! ## What RATE means
//! `static:RATE` is a rate **on the wire of the bottleneck**, counted the
//! way PSPacer and the emulator count it: every Ethernet frame plus
//! preamble, start delimiter, FCS and inter-frame gap (anchors.md, Pacing;
//! issue 2's link model, 24 bytes per frame beyond the 14-byte header).
//! Linux's internal TCP pacing (used here: no fq qdisc) counts only TCP
//! payload bytes against `SO_MAX_PACING_RATE`, so the cap we set is
//!
//! `cap = RATE/8 × payload / (payload + overhead)`
//!
//! where `payload` is the segment's payload (the socket's MSS, 1448 bytes
//! with timestamps on a 1500-byte MTU) and `overhead` the per-segment bytes
//! beyond it: IP + TCP headers and options (40 + 12 = 52) plus Ethernet
//! header, FCS, preamble/SFD and IFG (14 + 4 + 8 + 12 = 38), 90 in all. So
//! `static:500mbit` paces payload at 500 × 1448/1538 = 470.7 Mbit/s of
//! goodput and fills exactly 500 Mbit/s of wire, like [PSPacer]'s PSPS case.
//! With several parallel streams the rate is the aggregate, split evenly.

use std::time::Duration;

use serde::Serialize;
use tcpaccel_core::pace_spec::{PaceSpec, PaceSpecError};
use tcpaccel_core::pacing::{DynamicConfig, DynamicPacer, PaceDecision, TcpSample};
use tcpaccel_core::units::Rate;
use tcpaccel_core::Instant;
use tcpaccel_sys::tcpinfo::TcpInfo;

/// The framing calculator is core's; re-exported here so that
/// `tcpaccel_traffic::Framing` and `pace::Framing` keep naming it.
pub use tcpaccel_core::pacing::Framing;

/// [`Framing::for_segment`] with the fields of a TCP_INFO sample: the
/// socket's MSS and whether timestamps were negotiated.
pub fn framing_from_tcp_info(i: &TcpInfo, ipv6: bool) -> Framing {
    // TCPI_OPT_TIMESTAMPS = 1 (linux/tcp.h)
    Framing::for_segment(i.snd_mss, ipv6, i.options & 1 != 0)
}

/// Serializes a [`Framing`] as `{"payload": MSS, "overhead": bytes}`, the
/// form the traffic tool's JSON summaries have always had.
pub fn serialize_framing<S: serde::Serializer>(f: &Framing, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct;
    let mut st = s.serialize_struct("Framing", 2)?;
    st.serialize_field("payload", &f.mss())?;
    st.serialize_field("overhead", &f.overhead())?;
    st.end()
}

/// How `--pace dynamic` computes its rate (module docs); the type is core's,
/// beside the grammar that names it.
pub use tcpaccel_core::pace_spec::DynamicMode;

/// What `--pace dynamic` means without `=kernel` / `=loop`.
///
/// The control loop. In the lab's `pacing` scenario (500 Mbit/s, 100 ms,
/// 1 MB drop-tail, 60 s; BENCHMARKS.md, "Pacing") the loop had 852–887
/// bottleneck drops in three runs and the kernel's ratio-100 pacing 795–2424,
/// at the same goodput (437–445 Mbit/s): the loop is as fast and steadier.
/// It also needs no namespace sysctl, so it works for a user who cannot
/// change `tcp_pacing_*_ratio`.
pub const DEFAULT_DYNAMIC: DynamicMode = DynamicMode::Loop;

/// How often [`LoopPace`] samples TCP_INFO.
pub const LOOP_PERIOD: Duration = Duration::from_millis(5);

/// The `--pace` option as the traffic tool runs it: a
/// [`PaceSpec`] (the one pacing grammar, parsed in core) with the mode of a
/// plain `dynamic` resolved to [`DEFAULT_DYNAMIC`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "wire_rate_bps")]
pub enum Pace {
    /// No cap; the kernel's own pacing decides (none without fq unless the
    /// CC asks for it, as BBR does).
    None,
    /// A fixed on-wire rate for the whole transfer (see the module docs).
    Static(Rate),
    /// [PSPacer] eq. (1), `cwnd·mss/RTT`, never above `ceiling` (on-wire).
    Dynamic { mode: DynamicMode, ceiling: Option<Rate> },
}

/// `--pace` could not be parsed: the grammar's own error.
pub type PaceError = PaceSpecError;

impl From<PaceSpec> for Pace {
    fn from(p: PaceSpec) -> Pace {
        match p {
            PaceSpec::None => Pace::None,
            PaceSpec::Static(r) => Pace::Static(r),
            PaceSpec::Dynamic { mode, ceiling } => {
                Pace::Dynamic { mode: mode.unwrap_or(DEFAULT_DYNAMIC), ceiling }
            }
        }
    }
}

impl From<Pace> for PaceSpec {
    fn from(p: Pace) -> PaceSpec {
        match p {
            Pace::None => PaceSpec::None,
            Pace::Static(r) => PaceSpec::Static(r),
            Pace::Dynamic { mode, ceiling } => PaceSpec::Dynamic { mode: Some(mode), ceiling },
        }
    }
}

impl Pace {
    /// Parses the pacing grammar ([`PaceSpec::parse`]) and resolves a plain
    /// `dynamic` to [`DEFAULT_DYNAMIC`].
    pub fn parse(s: &str) -> Result<Pace, PaceError> {
        PaceSpec::parse(s).map(Pace::from)
    }

    /// The on-wire rate this pacing never exceeds, if any.
    pub fn ceiling(self) -> Option<Rate> {
        PaceSpec::from(self).ceiling()
    }

    /// A controller for one of `streams` parallel streams, or `None` when
    /// the socket is left alone.
    pub fn controller(self, streams: u16) -> Option<Box<dyn PaceControl>> {
        match self {
            Pace::None => None,
            Pace::Static(wire) => {
                let share = Rate(wire.bits_per_sec() / u64::from(streams.max(1)));
                Some(Box::new(StaticPace { wire: share }))
            }
            Pace::Dynamic { mode, ceiling } => {
                let share = ceiling.map(|c| Rate(c.bits_per_sec() / u64::from(streams.max(1))));
                match mode {
                    DynamicMode::Kernel => Some(Box::new(KernelPace { ceiling: share })),
                    DynamicMode::Loop => Some(Box::new(LoopPace::new(share))),
                }
            }
        }
    }
}

/// The grammar's form, which [`Pace::parse`] reads back unchanged.
impl std::fmt::Display for Pace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        PaceSpec::from(*self).fmt(f)
    }
}

/// The extension point for pacing policies. The sender calls
/// [`PaceControl::initial`] once the socket is connected and then
/// [`PaceControl::on_sample`] with each TCP_INFO sample (at least every
/// reporting interval, and every [`PaceControl::period`] if it asks for
/// more); a returned value is written to `SO_MAX_PACING_RATE` (bytes/s of
/// payload). A dynamic controller (issue 4 item 2) plugs in here: add a
/// `Pace` variant, accept it in [`Pace::parse`] and return the controller
/// from [`Pace::controller`]. Controllers run on the sender's own sockets
/// (uploads); in reverse mode only the initial cap reaches the server.
pub trait PaceControl: Send {
    /// The cap to set at connection start, if any.
    fn initial(&mut self, framing: Framing) -> Option<u64>;
    /// A new cap after a sample, or `None` to keep the current one.
    fn on_sample(&mut self, now: Instant, info: &TcpInfo, framing: Framing) -> Option<u64>;
    /// How often the controller wants samples (`None`: reporting interval).
    fn period(&self) -> Option<Duration> {
        None
    }
}

/// Static pacing: one cap at the start, never changed.
#[derive(Debug, Clone, Copy)]
pub struct StaticPace {
    /// This stream's share of the on-wire rate.
    pub wire: Rate,
}

impl PaceControl for StaticPace {
    fn initial(&mut self, framing: Framing) -> Option<u64> {
        Some(framing.payload_bytes_per_sec(self.wire).max(1))
    }
    fn on_sample(&mut self, _now: Instant, _info: &TcpInfo, _framing: Framing) -> Option<u64> {
        None
    }
}

/// A cap just below [`tcpaccel_sys::sockopt::PACING_UNLIMITED`]: any value
/// but "unlimited" switches the kernel's internal pacing on for the socket,
/// and this one limits nothing.
pub const PACING_ON_UNCAPPED: u64 = tcpaccel_sys::sockopt::PACING_UNLIMITED - 1;

/// `dynamic=kernel`: marks the socket as paced once and lets Linux compute
/// the rate (eq. 1 only when the namespace's pacing ratios are 100).
#[derive(Debug, Clone, Copy)]
pub struct KernelPace {
    /// This stream's share of the on-wire ceiling, if any.
    pub ceiling: Option<Rate>,
}

impl PaceControl for KernelPace {
    fn initial(&mut self, framing: Framing) -> Option<u64> {
        Some(self.ceiling.map_or(PACING_ON_UNCAPPED, |c| framing.payload_bytes_per_sec(c).max(1)))
    }
    fn on_sample(&mut self, _now: Instant, _info: &TcpInfo, _framing: Framing) -> Option<u64> {
        None
    }
}

/// `dynamic=loop`: [PSPacer] eq. (1) from TCP_INFO every [`LOOP_PERIOD`].
#[derive(Debug, Clone)]
pub struct LoopPace {
    pacer: DynamicPacer,
    ceiling: Option<Rate>,
    /// The last cap written, to skip writes that change nothing.
    last: Option<u64>,
}

impl LoopPace {
    pub fn new(ceiling: Option<Rate>) -> LoopPace {
        LoopPace { pacer: DynamicPacer::new(DynamicConfig::default()), ceiling, last: None }
    }
}

/// The controller's input from one TCP_INFO sample.
///
/// Local queueing is zero: with internal TCP pacing (no fq) a held-back
/// segment waits in the socket *before* it is transmitted, and the RTT is
/// measured from transmission, so srtt contains none of the pacer's own
/// queueing (PSPacer, a qdisc, had to subtract it). The veth qdisc in front
/// of the emulator never builds a queue at these rates.
pub fn loop_sample(info: &TcpInfo) -> TcpSample {
    TcpSample {
        cwnd: info.snd_cwnd,
        mss: info.snd_mss,
        srtt: info.srtt(),
        min_rtt: Duration::from_micros(u64::from(info.min_rtt.unwrap_or(0))),
        local_queue: Duration::ZERO,
    }
}

/// Cap of [`LoopPace`] for one decision: the eq. (1) rate, limited by the
/// payload share of the on-wire ceiling; before any RTT is known the socket
/// is paced by the ceiling or not capped at all.
pub fn loop_cap(decision: &PaceDecision, ceiling: Option<Rate>, framing: Framing) -> u64 {
    let ceiling = ceiling.map(|c| framing.payload_bytes_per_sec(c).max(1));
    match (decision.rate.map(Rate::bytes_per_sec), ceiling) {
        (Some(r), Some(c)) => r.min(c),
        (Some(r), None) => r,
        (None, Some(c)) => c,
        (None, None) => PACING_ON_UNCAPPED,
    }
}

impl PaceControl for LoopPace {
    fn initial(&mut self, framing: Framing) -> Option<u64> {
        let cap = self.ceiling.map_or(PACING_ON_UNCAPPED, |c| framing.payload_bytes_per_sec(c).max(1));
        self.last = Some(cap);
        Some(cap)
    }
    fn on_sample(&mut self, now: Instant, info: &TcpInfo, framing: Framing) -> Option<u64> {
        let d = self.pacer.on_sample(now, &loop_sample(info));
        let cap = loop_cap(&d, self.ceiling, framing);
        if self.last == Some(cap) {
            return None;
        }
        self.last = Some(cap);
        Some(cap)
    }
    fn period(&self) -> Option<Duration> {
        Some(LOOP_PERIOD)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Numbers the pacing cap must keep: payload bytes/s floored, goodput
    /// is that ×8 (so 470_741_216, not the exact 470_741_222.4).
    #[test]
    fn pacing_cap_numbers_are_pinned() {
        let cases: [(u32, bool, bool, u64, u32, u64); 7] = [
            (1448, false, true, 500_000_000, 90, 58_842_652),
            (1460, false, false, 500_000_000, 78, 59_330_299),
            (1428, true, true, 1_000_000_000, 110, 116_059_817),
            (32741, false, true, 100_000_000, 90, 12_465_733),
            (1448, false, true, 7, 90, 0),
            (8948, false, true, 10_000_000_000, 90, 1_237_552_555),
            (1448, false, true, 123_456_789, 90, 14_529_049),
        ];
        for (payload, ipv6, ts, wire, overhead, cap) in cases {
            let f = Framing::for_segment(payload, ipv6, ts);
            assert_eq!((f.mss(), f.overhead()), (payload, overhead), "{f:?}");
            assert_eq!(f.payload_bytes_per_sec(Rate(wire)), cap, "{f:?} at {wire}");
            assert_eq!(f.goodput(Rate(wire)), Rate(cap * 8), "{f:?} at {wire}");
        }
        assert_eq!(Framing::ETHERNET_1500_TS.goodput(Rate::mbps(500)), Rate(470_741_216));
        let g = Framing::ETHERNET_1500_TS.goodput(Rate::mbps(500)).as_mbps();
        assert!((g - 470.74).abs() < 0.01, "{g}");
    }

    #[test]
    fn framing_from_tcp_info_and_its_json() {
        let i = |mss, options| TcpInfo { snd_mss: mss, options, ..TcpInfo::default() };
        assert_eq!(framing_from_tcp_info(&i(1448, 1), false), Framing::ETHERNET_1500_TS);
        assert_eq!(framing_from_tcp_info(&i(1460, 0), false).overhead(), 78);
        assert_eq!(framing_from_tcp_info(&i(1428, 1 | 4), true).overhead(), 110);
        assert_eq!(framing_from_tcp_info(&i(0, 1), true), Framing::ETHERNET_1500_TS);
        let mut out = Vec::new();
        serialize_framing(&Framing::ETHERNET_1500_TS, &mut serde_json::Serializer::new(&mut out)).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), r#"{"payload":1448,"overhead":90}"#);
    }

    #[test]
    fn parse_pace() {
        assert_eq!(Pace::parse("none"), Ok(Pace::None));
        assert_eq!(Pace::parse("static:500mbit"), Ok(Pace::Static(Rate::mbps(500))));
        assert_eq!(Pace::parse("dynamic"), Ok(Pace::Dynamic { mode: DEFAULT_DYNAMIC, ceiling: None }));
        assert_eq!(
            Pace::parse("dynamic:400mbit"),
            Ok(Pace::Dynamic { mode: DEFAULT_DYNAMIC, ceiling: Some(Rate::mbps(400)) })
        );
        assert_eq!(
            Pace::parse("dynamic=kernel"),
            Ok(Pace::Dynamic { mode: DynamicMode::Kernel, ceiling: None })
        );
        assert_eq!(
            Pace::parse("dynamic=loop:1gbit"),
            Ok(Pace::Dynamic { mode: DynamicMode::Loop, ceiling: Some(Rate::mbps(1000)) })
        );
        assert!(matches!(Pace::parse("dynamic=fast"), Err(PaceError::Form { .. })));
        assert!(matches!(Pace::parse("dynamicx"), Err(PaceError::Form { .. })));
        assert!(matches!(Pace::parse("dynamic:0"), Err(PaceError::Rate { .. })));
        assert!(matches!(Pace::parse("static:0"), Err(PaceError::Rate { .. })));
        assert!(matches!(Pace::parse("static:-5mbit"), Err(PaceError::Rate { .. })));
        assert!(matches!(Pace::parse("static:fast"), Err(PaceError::Rate { .. })));
        assert!(matches!(Pace::parse("500mbit"), Err(PaceError::Form { .. })));
        for v in ["none", "static:20mbit", "dynamic=kernel", "dynamic=loop:400mbit"] {
            assert_eq!(Pace::parse(&Pace::parse(v).unwrap().to_string()), Pace::parse(v), "{v}");
        }
    }

    #[test]
    fn takes_every_form_of_the_one_grammar() {
        use tcpaccel_core::pace_spec::{Takes, FRONT_END_CASES};
        for (text, takes) in FRONT_END_CASES {
            let p = Pace::parse(text);
            assert_eq!(p.is_ok(), *takes != Takes::None, "{text}: {p:?}");
            if let Err(e) = p {
                assert!(e.to_string().contains(&format!("{:?}", text.trim())), "{e}");
            }
        }
        // A plain dynamic is the default loop, and says so when printed.
        assert_eq!(Pace::parse("dynamic").unwrap().to_string(), "dynamic=loop");
    }

    #[test]
    fn static_rate_is_split_across_streams() {
        let mut c = Pace::Static(Rate::mbps(400)).controller(4).unwrap();
        let per = c.initial(Framing::ETHERNET_1500_TS).unwrap();
        assert_eq!(per, Framing::ETHERNET_1500_TS.payload_bytes_per_sec(Rate::mbps(100)));
        assert!(Pace::None.controller(1).is_none());
    }

    fn info(cwnd: u32, rtt_us: u32, min_rtt_us: u32) -> TcpInfo {
        TcpInfo {
            snd_cwnd: cwnd,
            snd_mss: 1448,
            rtt: rtt_us,
            min_rtt: Some(min_rtt_us),
            ..TcpInfo::default()
        }
    }

    #[test]
    fn loop_follows_eq1_and_skips_unchanged_caps() {
        let f = Framing::ETHERNET_1500_TS;
        let mut c = Pace::parse("dynamic=loop").unwrap().controller(1).unwrap();
        assert_eq!(c.period(), Some(LOOP_PERIOD));
        assert_eq!(c.initial(f), Some(PACING_ON_UNCAPPED));
        // 100 packets × 1448 bytes per 100 ms = 1_448_000 bytes/s ([PSPacer] eq. 1).
        let t = Instant::from_nanos(5_000_000);
        assert_eq!(c.on_sample(t, &info(100, 100_000, 100_000), f), Some(1_448_000));
        assert_eq!(c.on_sample(t, &info(100, 100_000, 100_000), f), None, "same cap written twice");
        // The window doubles: so does the rate.
        assert_eq!(c.on_sample(t, &info(200, 100_000, 100_000), f), Some(2_896_000));
        // srtt below min_rtt is impossible; min_rtt is the floor of the RTT used.
        assert_eq!(c.on_sample(t, &info(200, 50_000, 100_000), f), None);
    }

    #[test]
    fn loop_cap_respects_the_ceiling_and_unknown_rtt() {
        let f = Framing::ETHERNET_1500_TS;
        let mut c = Pace::parse("dynamic=loop:100mbit").unwrap().controller(2).unwrap();
        let half = f.payload_bytes_per_sec(Rate::mbps(50));
        assert_eq!(c.initial(f), Some(half));
        // A huge window is cut to this stream's share of the ceiling.
        let t = Instant::from_nanos(1);
        assert_eq!(c.on_sample(t, &info(10_000, 10_000, 10_000), f), None, "already at the ceiling");
        assert_eq!(c.on_sample(t, &info(10, 100_000, 100_000), f), Some(144_800));
        // No RTT yet: the ceiling, or pacing on without a cap.
        let d = DynamicPacer::new(DynamicConfig::default()).on_sample(t, &loop_sample(&info(10, 0, 0)));
        assert_eq!(loop_cap(&d, Some(Rate::mbps(50)), f), half);
        assert_eq!(loop_cap(&d, None, f), PACING_ON_UNCAPPED);
    }

    #[test]
    fn kernel_mode_only_switches_pacing_on() {
        let f = Framing::ETHERNET_1500_TS;
        let mut c = Pace::parse("dynamic=kernel").unwrap().controller(1).unwrap();
        assert_eq!(c.initial(f), Some(PACING_ON_UNCAPPED));
        assert_ne!(PACING_ON_UNCAPPED, tcpaccel_sys::sockopt::PACING_UNLIMITED);
        assert_eq!(c.on_sample(Instant::from_nanos(1), &info(100, 100_000, 100_000), f), None);
        assert_eq!(c.period(), None);
    }
}
