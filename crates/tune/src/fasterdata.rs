//! ESnet fasterdata's general host-tuning guidance, as data, so the doctor
//! can say where it agrees with its own single-stream rule and where not.
//!
//! What it is: the values fasterdata.es.net gives per host class (NIC speed
//! and the round-trip times the host is tuned for), as its "Linux host
//! tuning", "40G/100G tuning" and test-host pages state them and as its
//! author's `fasterdata-tuning` script (github bltierney/fasterdata-tuning,
//! `compute_default_sysctl_settings`) encodes them. Pure lookups; no
//! judgement (that is [`crate::judge`]).
//!
//! Why they differ from the doctor's 2× BDP rule: fasterdata sizes a host
//! for many paths and for parallel-stream tools (GridFTP, bbcp, iperf3 -P)
//! while bounding memory per socket; the doctor sizes for one stream on one
//! path. At 10 Gbit/s × 100 ms one stream needs ~250 MB of receive buffer,
//! fasterdata's general value is 32 MB per socket, filled by ~8 streams.

use std::time::Duration;

use tcpaccel_core::units::Rate;

const MIB: u64 = 1 << 20;

/// Fasterdata's buffer ceilings for one host class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buffers {
    /// Autotuning maximum (`tcp_rmem`/`tcp_wmem` third field), bytes.
    pub autotune_max: u64,
    /// `net.core.rmem_max`/`wmem_max` (what SO_RCVBUF/SO_SNDBUF may ask), bytes.
    pub core_max: u64,
    /// The host class in words, for findings.
    pub class: &'static str,
}

/// Fasterdata's buffer values for a host whose path runs at `rate` with
/// round-trip time `rtt`; `None` below 1 Gbit/s, where fasterdata warns its
/// settings can hurt ("hosts connected at 100 Mbps or less").
pub fn buffers(rate: Rate, rtt: Duration) -> Option<Buffers> {
    let ms = rtt.as_secs_f64() * 1000.0;
    let b = |tcp_mib: u64, core: u64, class| Buffers { autotune_max: tcp_mib * MIB, core_max: core, class };
    if rate < Rate::gbps(1) {
        None
    } else if rate <= Rate::gbps(10) && ms <= 100.0 {
        Some(b(32, 64 * MIB, "hosts up to 10G on paths up to 100 ms"))
    } else if rate <= Rate::gbps(10) || (rate <= Rate::gbps(40) && ms <= 50.0) {
        Some(b(128, 256 * MIB, "10G hosts on paths up to 200 ms, 40G hosts up to 50 ms"))
    } else if rate <= Rate::gbps(40) {
        Some(b(256, 512 * MIB, "40G hosts"))
    } else {
        // 2147483647 is the largest value the int sysctl takes.
        Some(b(1024, i32::MAX as u64, "100G hosts"))
    }
}

/// Fasterdata's `netdev_max_backlog` for a host at `rate`: 30000 on its
/// 10G host page, 250000 for 40G/100G hosts and test hosts. `None` at or
/// below 1 Gbit/s, where the kernel default (1000) is not a problem.
pub fn backlog(rate: Rate) -> Option<(u64, &'static str)> {
    if rate <= Rate::gbps(1) {
        None
    } else if rate <= Rate::gbps(10) {
        Some((30_000, "10G hosts"))
    } else {
        Some((250_000, "40G/100G hosts"))
    }
}

/// Fasterdata's interface queue (`txqueuelen`) for NICs of 10 Gbit/s and
/// more; slower NICs keep the Ethernet default of 1000.
pub const TXQUEUELEN_10G: u64 = 10_000;

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn host_classes() {
        assert_eq!(buffers(Rate::mbps(100), ms(10)), None);
        let g10 = buffers(Rate::gbps(10), ms(100)).unwrap();
        assert_eq!((g10.autotune_max, g10.core_max), (33_554_432, 67_108_864));
        assert_eq!(buffers(Rate::gbps(1), ms(50)).unwrap().autotune_max, 33_554_432);
        assert_eq!(buffers(Rate::gbps(10), ms(150)).unwrap().autotune_max, 134_217_728);
        assert_eq!(buffers(Rate::gbps(40), ms(20)).unwrap().autotune_max, 134_217_728);
        assert_eq!(buffers(Rate::gbps(40), ms(100)).unwrap().core_max, 536_870_912);
        assert_eq!(buffers(Rate::gbps(100), ms(100)).unwrap().core_max, 2_147_483_647);
        assert_eq!(backlog(Rate::gbps(1)), None);
        assert_eq!(backlog(Rate::gbps(10)).map(|b| b.0), Some(30_000));
        assert_eq!(backlog(Rate::gbps(40)).map(|b| b.0), Some(250_000));
    }
}
