//! Per-frame spacing with the kernel's own pacing: how many segments Linux
//! TCP puts in one GSO packet, and how few a pacer must allow for frames to
//! arrive spaced like [PSPacer]'s gap packets left them.
//!
//! Linux TCP paces per *packet* (one skb, `tcp_wstamp_ns` advanced by its
//! length at the pacing rate), and a packet holds several segments that
//! leave back to back at the link's speed. How many is decided per socket
//! on every transmit by `tcp_tso_segs()` in `net/ipv4/tcp_output.c`
//! (checked against Linux 6.18), twinned exactly by [`kernel_tso_segs`]:
//!
//! ```text
//! bytes = sk_pacing_rate >> sk_pacing_shift             (shift 10: ~1 ms of data)
//! r     = min_rtt_us >> sysctl_tcp_tso_rtt_log           (log 9)
//! if r < 32: bytes += sk_gso_max_size >> r               (extra for RTTs under ~16 ms)
//! bytes = min(bytes, sk_gso_max_size)
//! segs  = max(bytes / mss, min_tso)                      (min_tso: the CC's min_tso_segs, else sysctl tcp_min_tso_segs, 2)
//! segs  = min(segs, sk_gso_max_segs)
//! ```
//!
//! What can lower the burst, and where (the research of issue 27):
//! - per socket: nothing a pacer can use. `sk_pacing_shift` has no socket
//!   option (only Wi-Fi drivers change it), BPF `bpf_setsockopt` offers no
//!   GSO option, a BPF congestion control may write `sk_pacing_rate` and
//!   `sk_pacing_status` but neither the shift nor `sk_gso_max_segs`, and
//!   `min_tso_segs` / `tcp_min_tso_segs` only raise the floor. The one
//!   per-socket switch, `sk_gso_disabled`, is set by TCP-MD5/TCP-AO, which
//!   need the peer's key.
//! - per route: nothing. `sk_setup_caps()` (`net/core/sock.c`) copies
//!   `gso_max_segs` and `gso_max_size` from the route's *device*; route
//!   metrics carry no GSO limit (only an xfrm route's header drops GSO).
//! - per device: `gso_max_segs` (`IFLA_GSO_MAX_SEGS`) caps `segs`, and
//!   `gso_max_size` caps `bytes`. Both are read when a socket's route is set
//!   (connect, or a route change), so a cap applies to sockets connected
//!   after it.
//! - `net.ipv4.tcp_tso_rtt_log` only *adds* bytes, and only when `min_rtt`
//!   is below `32 << log` µs (16.4 ms at the default 9); on seed 000's 100 ms
//!   path the term is zero, and a segment cap bounds it anyway.
//!
//! [`burst_segs`] picks the cap from the spacing a user asks for: a GSO
//! packet of `n` segments arrives as `n − 1` gaps of about zero and one gap
//! of `n` ideal gaps, so every gap deviates from the ideal by up to
//! `(n − 1)` frame times.
//!
//! This module does no syscalls; the shell (`tcpaccel_pacer::precise`) sets
//! the device's cap and restores it.

use crate::pacing::ideal_gap_ns;
use crate::units::Rate;

/// Linux's `GSO_MAX_SEGS`, the default `gso_max_segs` of a device.
pub const GSO_MAX_SEGS: u32 = 65_535;
/// The default `sk_pacing_shift` (`sk_pacing_shift_init`: 10, ~1 ms).
pub const PACING_SHIFT: u32 = 10;
/// The default `net.ipv4.tcp_tso_rtt_log`.
pub const TSO_RTT_LOG: u32 = 9;
/// The default `net.ipv4.tcp_min_tso_segs`.
pub const MIN_TSO_SEGS: u32 = 2;

/// The inputs of `tcp_tso_segs()` for one socket (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TsoInputs {
    /// `sk_pacing_rate`, payload bytes per second (`~0` when unpaced).
    pub pacing_rate: u64,
    pub pacing_shift: u32,
    /// Current MSS (`mss_now`).
    pub mss: u32,
    /// The congestion control's `min_tso_segs()`, else the sysctl.
    pub min_tso: u32,
    /// `sk_gso_max_size`: the device's `gso_max_size` less `MAX_TCP_HEADER + 1`.
    pub gso_max_size: u32,
    /// `sk_gso_max_segs`: the device's `gso_max_segs` (at least 1).
    pub gso_max_segs: u32,
    /// `tcp_min_rtt()`, µs.
    pub min_rtt_us: u32,
    /// `net.ipv4.tcp_tso_rtt_log`.
    pub tso_rtt_log: u32,
}

/// Segments per GSO packet, as `tcp_tso_segs()` computes them (module docs).
pub fn kernel_tso_segs(i: TsoInputs) -> u32 {
    let mut bytes = i.pacing_rate.checked_shr(i.pacing_shift).unwrap_or(0);
    let r = i.min_rtt_us.checked_shr(i.tso_rtt_log).unwrap_or(0);
    if r < 32 {
        bytes = bytes.saturating_add(u64::from(i.gso_max_size >> r));
    }
    bytes = bytes.min(u64::from(i.gso_max_size));
    let segs = (bytes / u64::from(i.mss.max(1))).max(u64::from(i.min_tso)) as u32;
    segs.min(i.gso_max_segs.max(1))
}

/// The most segments per GSO packet whose back-to-back frames keep every
/// arrival gap within `budget_ns` of the ideal gap at `rate` (on the wire,
/// `frame_wire` bytes a frame): `1 + ⌊budget / ideal gap⌋`, at least 1.
/// A zero rate (no pacing) allows any burst: [`GSO_MAX_SEGS`].
pub fn burst_segs(rate: Rate, frame_wire: u64, budget_ns: u64) -> u32 {
    if rate.bits_per_sec() == 0 {
        return GSO_MAX_SEGS;
    }
    let gap = ideal_gap_ns(frame_wire, rate);
    if gap <= 0.0 {
        return GSO_MAX_SEGS;
    }
    let extra = (budget_ns as f64 / gap).floor();
    (1.0 + extra).min(f64::from(GSO_MAX_SEGS)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed000(pacing_rate: u64) -> TsoInputs {
        TsoInputs {
            pacing_rate,
            pacing_shift: PACING_SHIFT,
            mss: 1448,
            min_tso: MIN_TSO_SEGS,
            // veth's default 65536 less MAX_TCP_HEADER + 1 (320 + 1 on x86-64).
            gso_max_size: 65_536 - 321,
            gso_max_segs: GSO_MAX_SEGS,
            min_rtt_us: 100_000,
            tso_rtt_log: TSO_RTT_LOG,
        }
    }

    #[test]
    fn the_kernel_bunches_a_millisecond_of_the_pacing_rate() {
        // 500 Mbit/s on the wire is 470.7 Mbit/s of payload, 58_843_953
        // bytes/s; >> 10 is 57_464 bytes, 39 segments of 1448.
        assert_eq!(kernel_tso_segs(seed000(58_843_953)), 39);
        // 100 Mbit/s on the wire: 11_768_790 B/s >> 10 = 11_492 B: 7 segments.
        assert_eq!(kernel_tso_segs(seed000(11_768_790)), 7);
        // Slow rates still get min_tso_segs, and a CC's larger floor wins.
        assert_eq!(kernel_tso_segs(seed000(100_000)), 2);
        assert_eq!(kernel_tso_segs(TsoInputs { min_tso: 4, ..seed000(100_000) }), 4);
        // Unpaced: ~0 >> 10 is huge, capped by gso_max_size: 44 segments.
        assert_eq!(kernel_tso_segs(seed000(u64::MAX)), (65_536 - 321) / 1448);
    }

    #[test]
    fn only_the_device_caps_lower_it() {
        let s = seed000(58_843_953);
        assert_eq!(kernel_tso_segs(TsoInputs { gso_max_segs: 1, ..s }), 1);
        assert_eq!(kernel_tso_segs(TsoInputs { gso_max_segs: 3, ..s }), 3);
        // gso_max_size of 4 segments' worth: 4 (and min_tso 2 still holds).
        assert_eq!(kernel_tso_segs(TsoInputs { gso_max_size: 4 * 1448, ..s }), 4);
        assert_eq!(kernel_tso_segs(TsoInputs { gso_max_size: 1448, ..s }), 2);
        // A gso_max_segs of 0 is read as 1 (sk_setup_caps' max(.., 1)).
        assert_eq!(kernel_tso_segs(TsoInputs { gso_max_segs: 0, ..s }), 1);
    }

    #[test]
    fn tso_rtt_log_only_adds_below_sixteen_milliseconds() {
        let s = seed000(58_843_953);
        // 100 ms >> 9 = 195: no extra; with log 12, 100_000 >> 12 = 24 < 32:
        // 65_215 >> 24 = 0 bytes extra, still 39.
        assert_eq!(kernel_tso_segs(TsoInputs { tso_rtt_log: 12, ..s }), 39);
        // 1 ms RTT: 1000 >> 9 = 1, so half of gso_max_size is added: capped at 45.
        assert_eq!(kernel_tso_segs(TsoInputs { min_rtt_us: 1000, ..s }), 45);
        // 10 ms: 10_000 >> 9 = 19, 65_215 >> 19 = 0: nothing.
        assert_eq!(kernel_tso_segs(TsoInputs { min_rtt_us: 10_000, ..s }), 39);
        // 100 µs on a slow socket: 100 >> 9 = 0, the whole gso_max_size is added.
        assert_eq!(kernel_tso_segs(TsoInputs { min_rtt_us: 100, ..seed000(100_000) }), 45);
    }

    #[test]
    fn the_burst_cap_follows_the_spacing_budget() {
        // 1538 wire bytes at 500 Mbit/s: 24.608 µs per frame.
        let r = Rate::mbps(500);
        assert_eq!(burst_segs(r, 1538, 0), 1);
        assert_eq!(burst_segs(r, 1538, 24_607), 1);
        assert_eq!(burst_segs(r, 1538, 24_608), 2);
        assert_eq!(burst_segs(r, 1538, 60_000), 3);
        // 100 Mbit/s: 123.04 µs per frame, 60 µs allows no second frame.
        assert_eq!(burst_segs(Rate::mbps(100), 1538, 60_000), 1);
        // 10 Gbit/s: 1.23 µs per frame, 60 µs allows 49.
        assert_eq!(burst_segs(Rate::gbps(10), 1538, 60_000), 49);
        assert_eq!(burst_segs(Rate::bps(0), 1538, 60_000), GSO_MAX_SEGS);
    }
}
