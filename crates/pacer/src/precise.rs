//! `--precise` of `pace`, `run --pace` and `send --pace`: paced frames leave
//! one by one (or in pairs and threes at high rates) instead of in the ~1 ms
//! GSO bunches Linux TCP builds, the nearest this kernel comes to
//! [PSPacer]'s per-frame gap packets.
//!
//! Linux offers no per-socket or per-route limit on the segments of one
//! GSO packet, only the device's `gso_max_segs` (the research is in
//! `tcpaccel_core::precise`). So `--precise` caps `gso_max_segs` of the
//! devices the paced destinations leave by, while the command runs, and
//! puts the old values back when it ends ([`Precise`] drops its
//! [`GsoSegsCap`]s). It touches every socket on those devices that connects
//! meanwhile, paced or not (an unpaced bulk sender then costs more CPU per
//! byte); sockets connected before keep their burst size.
//!
//! How many segments: [`segs_for`], the most whose back-to-back frames keep
//! every arrival gap within [`BUDGET_NS`] of the ideal gap at the pacing's
//! on-wire rate (`tcpaccel_core::precise::burst_segs`): 3 at 500 Mbit/s,
//! 1 at 100 Mbit/s; 1 when the pacing has no rate (`dynamic` without a
//! ceiling).

use std::net::IpAddr;

use tcpaccel_core::pace_spec::PaceSpec;
use tcpaccel_core::pacing::{Framing, Layer};
use tcpaccel_core::precise::burst_segs;
use tcpaccel_core::units::Rate;
use tcpaccel_sys::link::{self, GsoSegsCap};

use crate::PacerError;

/// The largest |arrival gap − ideal gap| `--precise` allows: issue 27's
/// 60 µs, ~2.5 frame times at 500 Mbit/s.
pub const BUDGET_NS: u64 = 60_000;

/// Segments per GSO packet for a pacing whose on-wire rate is at most
/// `rate` (1500-byte MTU frames, 1538 bytes on the wire).
pub fn segs_for(rate: Option<Rate>) -> u32 {
    let frame = u64::from(Framing::ETHERNET_1500_TS.bytes(Layer::Wire));
    rate.map_or(1, |r| burst_segs(r, frame, BUDGET_NS))
}

/// Segments per GSO packet that keep every paced pacing of `specs` within
/// [`BUDGET_NS`] (the fewest any of them needs; `ceiling` over all), or
/// `None` when none of them paces.
pub fn segs_for_specs(specs: impl IntoIterator<Item = PaceSpec>, ceiling: Option<Rate>) -> Option<u32> {
    specs
        .into_iter()
        .filter(|s| *s != PaceSpec::None)
        .map(|s| {
            let rate = match (s.ceiling(), ceiling) {
                (Some(a), Some(b)) => Some(if a.bits_per_sec() <= b.bits_per_sec() { a } else { b }),
                (a, b) => a.or(b),
            };
            segs_for(rate)
        })
        .min()
}

/// The GSO caps of one `--precise` run; dropping it removes them.
#[derive(Debug)]
pub struct Precise {
    caps: Vec<GsoSegsCap>,
}

impl Precise {
    /// Caps `gso_max_segs` at `segs` on the devices the routes to `dests`
    /// leave by (each device once), in this thread's namespace.
    pub fn for_destinations(dests: &[IpAddr], segs: u32) -> Result<Precise, PacerError> {
        let mut devices: Vec<u32> = Vec::new();
        for d in dests {
            let oif = link::route_oif(*d)?;
            if !devices.contains(&oif) {
                devices.push(oif);
            }
        }
        Precise::for_devices(&devices, segs)
    }

    /// Caps `gso_max_segs` at `segs` on devices `indexes`.
    pub fn for_devices(indexes: &[u32], segs: u32) -> Result<Precise, PacerError> {
        let mut caps = Vec::new();
        for i in indexes {
            // On an error the caps applied so far drop here, restored.
            caps.push(GsoSegsCap::apply(*i, segs)?);
        }
        Ok(Precise { caps })
    }

    /// What was capped: (device index, value before, value now).
    pub fn caps(&self) -> Vec<(u32, u32, u32)> {
        self.caps.iter().map(|c| (c.index, c.before, c.now)).collect()
    }

    /// One line for stderr: which devices, from what to what.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .caps
            .iter()
            .map(|c| {
                let name = link::ifname(c.index).unwrap_or_else(|| format!("device {}", c.index));
                format!("{name} gso_max_segs {} (was {})", c.now, c.before)
            })
            .collect();
        format!("precise spacing: {} until exit", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_follow_the_rate() {
        assert_eq!(segs_for(Some(Rate::mbps(500))), 3);
        assert_eq!(segs_for(Some(Rate::mbps(300))), 2);
        assert_eq!(segs_for(Some(Rate::mbps(100))), 1);
        assert_eq!(segs_for(Some(Rate::gbps(1))), 5);
        assert_eq!(segs_for(None), 1);
    }

    #[test]
    fn the_slowest_paced_rule_decides() {
        let p = |t: &str| PaceSpec::parse(t).unwrap();
        assert_eq!(segs_for_specs([p("static:500mbit"), p("none")], None), Some(3));
        assert_eq!(segs_for_specs([p("static:500mbit"), p("static:100mbit")], None), Some(1));
        // A ceiling lowers a rate, and gives `dynamic` one.
        assert_eq!(segs_for_specs([p("static:1gbit")], Some(Rate::mbps(500))), Some(3));
        assert_eq!(segs_for_specs([p("dynamic")], Some(Rate::mbps(300))), Some(2));
        assert_eq!(segs_for_specs([p("dynamic")], None), Some(1));
        assert_eq!(segs_for_specs([p("dynamic:1gbit")], None), Some(5));
        assert_eq!(segs_for_specs([p("none")], None), None);
    }
}
