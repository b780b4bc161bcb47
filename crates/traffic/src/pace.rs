//! Pacing choices of the traffic tool and the honest conversion of an
//! on-wire rate into the kernel's pacing cap.
//!
//! What it is: the `--pace` value (`none`, `static:RATE`; `dynamic` is
//! reserved and refused until its control loop exists), the framing
//! arithmetic, and the [`PaceControl`] extension point the sender calls
//! with TCP_INFO samples. What it is not: no sockets; the sender applies
//! the rates this module computes.
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
//! goodput and fills exactly 500 Mbit/s of wire, like seed 000's PSPS case.
//! With several parallel streams the rate is the aggregate, split evenly.

use std::time::Duration;

use serde::Serialize;
use tcpaccel_core::units::Rate;
use tcpaccel_core::Instant;
use tcpaccel_sys::tcpinfo::TcpInfo;

/// Ethernet header (14) + FCS (4) + preamble and SFD (8) + inter-frame gap
/// (12): bytes a frame occupies on the wire beyond its IP packet.
pub const ETHERNET_WIRE_OVERHEAD: u32 = 38;

/// How TCP payload maps onto wire bytes: per segment, `payload` bytes of
/// data cost `payload + overhead` bytes on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Framing {
    pub payload: u32,
    pub overhead: u32,
}

impl Framing {
    /// A 1500-byte Ethernet MTU with TCP timestamps: 1448 of 1538 bytes.
    pub const ETHERNET_1500_TS: Framing = Framing { payload: 1448, overhead: 90 };

    /// Framing of one segment: `payload` bytes (the socket's current MSS,
    /// `tcpi_snd_mss`, which already excludes TCP options and which on
    /// loopback the kernel may hold at half the peer's window) behind IP and
    /// TCP headers (40 bytes for IPv4, 60 for IPv6) and 12 bytes of
    /// timestamp option when negotiated. (`tcpi_advmss` is no help: the
    /// active opener subtracts the timestamp option from it, the passive one
    /// does not.) A zero payload falls back to [`Framing::ETHERNET_1500_TS`].
    pub fn for_segment(payload: u32, ipv6: bool, timestamps: bool) -> Framing {
        if payload == 0 {
            return Framing::ETHERNET_1500_TS;
        }
        let headers = if ipv6 { 60 } else { 40 } + if timestamps { 12 } else { 0 };
        Framing { payload, overhead: headers + ETHERNET_WIRE_OVERHEAD }
    }

    /// [`Framing::for_segment`] with the fields of a TCP_INFO sample.
    pub fn from_tcp_info(i: &TcpInfo, ipv6: bool) -> Framing {
        // TCPI_OPT_TIMESTAMPS = 1 (linux/tcp.h)
        Framing::for_segment(i.snd_mss, ipv6, i.options & 1 != 0)
    }

    /// Payload bytes per second that fill `wire` exactly (the pacing cap).
    pub fn payload_bytes_per_sec(self, wire: Rate) -> u64 {
        let frame = u128::from(self.payload) + u128::from(self.overhead);
        if frame == 0 {
            return 0;
        }
        (u128::from(wire.bits_per_sec()) * u128::from(self.payload) / (8 * frame)) as u64
    }

    /// The goodput that `wire` allows with this framing.
    pub fn goodput(self, wire: Rate) -> Rate {
        Rate(self.payload_bytes_per_sec(wire) * 8)
    }
}

/// The `--pace` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "wire_rate_bps")]
pub enum Pace {
    /// No cap; the kernel's own pacing decides (none without fq unless the
    /// CC asks for it, as BBR does).
    None,
    /// A fixed on-wire rate for the whole transfer (see the module docs).
    Static(Rate),
}

/// `--pace` could not be parsed or is not available.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PaceError {
    #[error("--pace {0:?}: expected none, static:RATE (e.g. static:500mbit) or dynamic")]
    Form(String),
    #[error("--pace {value:?}: {reason}")]
    Rate { value: String, reason: String },
    #[error(
        "--pace dynamic is not available yet: its TCP_INFO control loop \
         (target = cwnd x mss / RTT, seed 000 eq. 1) is planned work; use static:RATE"
    )]
    DynamicNotYet,
}

impl Pace {
    /// Parses `none`, `static:RATE`; `dynamic` is refused for now with
    /// [`PaceError::DynamicNotYet`]. RATE uses `core::units::Rate`, which
    /// refuses zero, negative and unparseable values.
    pub fn parse(s: &str) -> Result<Pace, PaceError> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("none") {
            return Ok(Pace::None);
        }
        if s.eq_ignore_ascii_case("dynamic") || s.to_ascii_lowercase().starts_with("dynamic:") {
            return Err(PaceError::DynamicNotYet);
        }
        let Some(rate) = s.strip_prefix("static:") else {
            return Err(PaceError::Form(s.to_string()));
        };
        Rate::parse(rate)
            .map(Pace::Static)
            .map_err(|e| PaceError::Rate { value: s.to_string(), reason: e.to_string() })
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
        }
    }
}

impl std::fmt::Display for Pace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pace::None => write!(f, "none"),
            Pace::Static(r) => write!(f, "static:{r}"),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_hundred_mbit_wire_is_470_goodput() {
        let f = Framing::ETHERNET_1500_TS;
        // 62.5 MB/s × 1448/1538 = 58_842_652.8 bytes/s of payload
        assert_eq!(f.payload_bytes_per_sec(Rate::mbps(500)), 58_842_652);
        let g = f.goodput(Rate::mbps(500)).as_mbps();
        assert!((g - 470.74).abs() < 0.01, "{g}");
    }

    #[test]
    fn framing_for_segment() {
        assert_eq!(Framing::for_segment(1448, false, true), Framing::ETHERNET_1500_TS);
        // Without timestamps: 1460 of 1538.
        assert_eq!(Framing::for_segment(1460, false, false), Framing { payload: 1460, overhead: 78 });
        // IPv6: 60 bytes of IP + TCP headers; 1428 + 110 = 1538.
        assert_eq!(Framing::for_segment(1428, true, true), Framing { payload: 1428, overhead: 110 });
        // Loopback, MSS held at half the window: still 90 bytes per segment.
        assert_eq!(Framing::for_segment(32741, false, true), Framing { payload: 32741, overhead: 90 });
        assert_eq!(Framing::for_segment(0, false, true), Framing::ETHERNET_1500_TS);
    }

    #[test]
    fn parse_pace() {
        assert_eq!(Pace::parse("none"), Ok(Pace::None));
        assert_eq!(Pace::parse("static:500mbit"), Ok(Pace::Static(Rate::mbps(500))));
        assert_eq!(Pace::parse("dynamic"), Err(PaceError::DynamicNotYet));
        assert!(matches!(Pace::parse("static:0"), Err(PaceError::Rate { .. })));
        assert!(matches!(Pace::parse("static:-5mbit"), Err(PaceError::Rate { .. })));
        assert!(matches!(Pace::parse("static:fast"), Err(PaceError::Rate { .. })));
        assert!(matches!(Pace::parse("500mbit"), Err(PaceError::Form(_))));
        assert!(Pace::parse("dynamic").unwrap_err().to_string().contains("not available yet"));
    }

    #[test]
    fn static_rate_is_split_across_streams() {
        let mut c = Pace::Static(Rate::mbps(400)).controller(4).unwrap();
        let per = c.initial(Framing::ETHERNET_1500_TS).unwrap();
        assert_eq!(per, Framing::ETHERNET_1500_TS.payload_bytes_per_sec(Rate::mbps(100)));
        assert!(Pace::None.controller(1).is_none());
    }
}
