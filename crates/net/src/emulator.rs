//! The bridge to `tcpaccel-emu`: turns an emulated link's two [`Direction`]s
//! into the emulator's configuration and starts it on a thread inside the
//! emulator namespace (the packet sockets stay in that namespace; the
//! emulator's own threads may run anywhere). Nothing else in this crate knows
//! the emulator's types.

use std::path::PathBuf;
use std::time::Duration;

use tcpaccel_emu::{EmuConfig, Emulator, LinkConfig, MeterFormat};

use crate::error::{Error, Result};
use crate::spec::{Direction, Link};

pub use tcpaccel_emu::{EmuHandle, Summary as EmuSummary};

/// Ethernet header plus one 802.1Q tag: the largest frame for an MTU is MTU + 18.
const L2_HEADER_MAX: usize = 18;

/// How the emulators of a network meter (the topology file says nothing about it).
#[derive(Debug, Clone, Default)]
pub struct MeterOptions {
    /// Write each emulated link's meter bins to `DIR/LINK.csv` (or `.jsonl`).
    pub dir: Option<PathBuf>,
    /// JSON Lines instead of CSV.
    pub jsonl: bool,
    /// Bin width; `None` is the emulator's default (500 µs).
    pub bin: Option<Duration>,
}

impl MeterOptions {
    /// The meter file of `link`, if metering to files.
    pub fn path_for(&self, link: &str) -> Option<PathBuf> {
        let ext = if self.jsonl { "jsonl" } else { "csv" };
        self.dir.as_ref().map(|d| d.join(format!("{link}.{ext}")))
    }
}

fn link_config(d: &Direction, mtu: Option<u32>) -> LinkConfig {
    let def = LinkConfig::default();
    LinkConfig {
        rate: d.rate,
        overhead: d.overhead.unwrap_or(def.overhead),
        buffer: d.buffer.unwrap_or(def.buffer),
        delay: d.delay,
        jitter: d.jitter,
        loss: d.loss,
        seed: d.seed,
        max_frame: mtu.map(|m| m as usize + L2_HEADER_MAX).unwrap_or(def.max_frame),
    }
}

/// The emulator configuration of `link` between `if_a` and `if_b`.
pub(crate) fn config(
    link: &Link,
    if_a: &str,
    if_b: &str,
    a_to_b: &Direction,
    b_to_a: &Direction,
    meter: &MeterOptions,
) -> EmuConfig {
    let mut cfg = EmuConfig::symmetric(if_a, if_b, link_config(a_to_b, link.mtu));
    cfg.b_to_a = link_config(b_to_a, link.mtu);
    if let Some(bin) = meter.bin {
        cfg.meter_bin = bin;
    }
    cfg.meter_out = meter.path_for(&link.name);
    cfg.meter_format =
        cfg.meter_out.as_ref().map(|_| if meter.jsonl { MeterFormat::Jsonl } else { MeterFormat::Csv });
    cfg
}

/// Starts the emulator described by `cfg` inside namespace `ns`.
pub(crate) fn start(ns: &str, link: &str, cfg: EmuConfig) -> Result<EmuHandle> {
    let started = tcpaccel_sys::netns::run_in(ns, move || Emulator::start(cfg))
        .map_err(|e| Error::sys(format!("enter emulator namespace {ns} of link {link}"), e))?;
    started.map_err(|e| match e {
        tcpaccel_emu::EmuError::Open { iface, source } => Error::sys(
            format!("link {link}: emulator cannot open a packet socket on {iface} in {ns}"),
            source,
        ),
        other => Error::Emulator { link: link.to_string(), msg: other.to_string() },
    })
}

/// Stops an emulator and returns its summary.
pub(crate) fn stop(h: EmuHandle) -> Result<EmuSummary> {
    Ok(h.stop())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{EndSpec, LinkKind, LinkSpec, TopologyBuilder};
    use tcpaccel_core::units::{QueueLimit, Rate};

    #[test]
    fn directions_map_onto_the_emulator_config() {
        let mut wan = LinkSpec::emulated(EndSpec::new("h1"), EndSpec::new("h2"))
            .name("wan")
            .rate(Rate::mbps(50))
            .delay(Duration::from_millis(20));
        wan.mtu = Some(9000);
        wan.b_to_a.buffer = Some(QueueLimit::Packets(100));
        wan.b_to_a.seed = Some(7);
        let mut b = TopologyBuilder::default();
        b.host("h1");
        b.host("h2");
        b.link(wan);
        let t = b.build().unwrap();
        let l = &t.links[0];
        let LinkKind::Emulated { a_to_b, b_to_a } = &l.kind else { panic!() };
        let meter = MeterOptions { dir: Some("/tmp/m".into()), jsonl: false, bin: None };
        let cfg = config(l, "emu-a", "emu-b", a_to_b, b_to_a, &meter);
        assert_eq!(cfg.a, "emu-a");
        assert_eq!(cfg.a_to_b.rate, Some(Rate::mbps(50)));
        assert_eq!(cfg.a_to_b.delay, Duration::from_millis(20));
        assert_eq!(cfg.a_to_b.buffer, LinkConfig::default().buffer);
        assert_eq!(cfg.b_to_a.buffer, QueueLimit::Packets(100));
        assert_eq!(cfg.b_to_a.seed, 7);
        assert_eq!(cfg.a_to_b.max_frame, 9018);
        assert_eq!(cfg.meter_out, Some(PathBuf::from("/tmp/m/wan.csv")));
        assert!(cfg.validate().is_ok(), "{:?}", cfg.validate());
    }
}
