//! The emulator's configuration: one [`LinkConfig`] per direction and an
//! [`EmuConfig`] naming the two interfaces.
//!
//! Both deserialize from TOML or JSON with human units, parsed once by
//! `tcpaccel_core::units` (so a topology file can embed a `LinkConfig`):
//!
//! ```toml
//! rate = "50mbit"      # or "unlimited" (the default)
//! delay = "20ms"
//! jitter = "0ms"       # extra uniform [0, jitter], never reorders
//! buffer = "1MB"       # drop-tail: bytes ("1MB", "64KiB") or packets ("100p")
//! loss = "0.1%"        # see tcpaccel_core::loss::LOSS_FORMS
//! seed = 1
//! overhead = 24        # bytes per frame on the wire (preamble+SFD 8, IFG 12, FCS 4)
//! max_frame = 1518     # longer frames are dropped as oversize
//! ```

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::path::PathBuf;
use std::time::Duration;

use tcpaccel_core::link::{LinkParams, DEFAULT_OVERHEAD};
use tcpaccel_core::loss::LossSpec;
use tcpaccel_core::meter::DEFAULT_BIN;
use tcpaccel_core::units::{format_duration, parse_duration, QueueLimit, Rate};

/// Default drop-tail buffer: 1 MB, the router buffer of the seed experiments.
pub const DEFAULT_BUFFER: QueueLimit = QueueLimit::Bytes(1_000_000);
/// Largest frame accepted by default: 1514 (MTU 1500 + Ethernet header) plus
/// one 802.1Q tag. Frames as a packet socket sees them carry no FCS.
pub const DEFAULT_MAX_FRAME: usize = 1518;

/// One direction of the emulated wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinkConfig {
    /// Bottleneck rate counted on the wire; `None` ("unlimited") adds no
    /// serialization time.
    #[serde(serialize_with = "ser_rate", deserialize_with = "de_rate")]
    pub rate: Option<Rate>,
    /// Bytes added to each frame for its time on the wire.
    pub overhead: u32,
    /// Drop-tail buffer in bytes or packets.
    #[serde(serialize_with = "ser_display", deserialize_with = "de_limit", alias = "limit")]
    pub buffer: QueueLimit,
    /// Constant one-way propagation delay.
    #[serde(serialize_with = "ser_duration", deserialize_with = "de_duration")]
    pub delay: Duration,
    /// Extra delay drawn uniformly from [0, jitter]; never reorders.
    #[serde(serialize_with = "ser_duration", deserialize_with = "de_duration")]
    pub jitter: Duration,
    /// Random loss.
    #[serde(serialize_with = "ser_display", deserialize_with = "de_loss")]
    pub loss: LossSpec,
    /// Seed of the loss and jitter draws; recorded in the summary.
    pub seed: u64,
    /// Frames longer than this (bytes, without FCS) are dropped as oversize.
    pub max_frame: usize,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            rate: None,
            overhead: DEFAULT_OVERHEAD,
            buffer: DEFAULT_BUFFER,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            loss: LossSpec::None,
            seed: 1,
            max_frame: DEFAULT_MAX_FRAME,
        }
    }
}

impl LinkConfig {
    /// The pure model's parameters for this direction.
    pub fn params(&self, meter_bin: Duration) -> LinkParams {
        LinkParams {
            rate: self.rate,
            overhead: self.overhead,
            limit: self.buffer,
            delay: self.delay,
            jitter: self.jitter,
            loss: self.loss,
            seed: self.seed,
            meter_bin,
            ..LinkParams::default()
        }
    }

    /// Checks values the types cannot: returns a message naming the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_frame < 14 {
            return Err(format!("max_frame {} is below the 14-byte Ethernet header", self.max_frame));
        }
        if self.max_frame > 65_535 {
            return Err(format!("max_frame {} is above 65535", self.max_frame));
        }
        match self.buffer {
            QueueLimit::Bytes(b) if b < self.max_frame as u64 => {
                return Err(format!(
                    "buffer {} cannot hold one frame of max_frame {} bytes",
                    self.buffer, self.max_frame
                ))
            }
            QueueLimit::Packets(0) => return Err("buffer of 0 packets drops everything".into()),
            _ => {}
        }
        Ok(())
    }

    /// Bytes the shell must be able to hold for this direction: the buffer
    /// plus what is in flight during delay + jitter at the rate, doubled for
    /// small-frame overhead, within [4 MB, 1 GB]. Unlimited rate: 64 MB.
    pub fn ring_bytes(&self) -> usize {
        const MIN: u64 = 4 << 20;
        const MAX: u64 = 1 << 30;
        let Some(rate) = self.rate else { return 64 << 20 };
        let queue = match self.buffer {
            QueueLimit::Bytes(b) => b,
            QueueLimit::Packets(n) => n.saturating_mul(self.max_frame as u64),
        };
        let flight = tcpaccel_core::units::bdp_bytes(rate, self.delay + self.jitter);
        (queue.saturating_add(flight).saturating_mul(2)).clamp(MIN, MAX) as usize
    }
}

/// Format of the meter output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MeterFormat {
    Csv,
    Jsonl,
}

impl MeterFormat {
    /// `.csv` is CSV; `.jsonl`, `.ndjson` and `.json` are JSON Lines.
    pub fn from_path(path: &std::path::Path) -> Option<MeterFormat> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "csv" => Some(MeterFormat::Csv),
            "jsonl" | "ndjson" | "json" => Some(MeterFormat::Jsonl),
            _ => None,
        }
    }
}

/// How the direction threads ask the kernel for CPU time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheduling {
    /// SCHED_FIFO priority 10 (falling back to nice -10, then to normal):
    /// busy endpoints on the same CPUs cannot delay the wire.
    #[default]
    Realtime,
    /// Nice -10.
    Nice,
    /// Whatever the process has.
    Normal,
}

/// The whole emulator: an L2 wire between interfaces `a` and `b`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmuConfig {
    /// Interface of side A (in the namespace of the thread that starts the emulator).
    pub a: String,
    /// Interface of side B.
    pub b: String,
    #[serde(default)]
    pub a_to_b: LinkConfig,
    #[serde(default)]
    pub b_to_a: LinkConfig,
    /// Meter bin width (default 500 µs).
    #[serde(default = "default_bin", serialize_with = "ser_duration", deserialize_with = "de_duration")]
    pub meter_bin: Duration,
    /// Where to write the meter's bins; `None` writes nothing.
    #[serde(default)]
    pub meter_out: Option<PathBuf>,
    /// Format of `meter_out`; `None` picks by extension (.csv, .jsonl).
    #[serde(default)]
    pub meter_format: Option<MeterFormat>,
    /// Frames per batched receive.
    #[serde(default = "default_batch")]
    pub batch: usize,
    /// CPU scheduling of the direction threads.
    #[serde(default)]
    pub scheduling: Scheduling,
}

fn default_bin() -> Duration {
    DEFAULT_BIN
}

fn default_batch() -> usize {
    tcpaccel_sys::packet::DEFAULT_BATCH
}

impl EmuConfig {
    /// Both directions alike.
    pub fn symmetric(a: impl Into<String>, b: impl Into<String>, link: LinkConfig) -> EmuConfig {
        EmuConfig {
            a: a.into(),
            b: b.into(),
            a_to_b: link.clone(),
            b_to_a: link,
            meter_bin: DEFAULT_BIN,
            meter_out: None,
            meter_format: None,
            batch: default_batch(),
            scheduling: Scheduling::default(),
        }
    }

    /// The meter format to use, if any output is configured.
    pub fn resolved_meter_format(&self) -> Result<Option<MeterFormat>, String> {
        let Some(path) = &self.meter_out else { return Ok(None) };
        match self.meter_format.or_else(|| MeterFormat::from_path(path)) {
            Some(f) => Ok(Some(f)),
            None => Err(format!(
                "meter output {}: cannot tell the format from the extension; use .csv or .jsonl",
                path.display()
            )),
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.a == self.b {
            return Err(format!("both sides are interface {:?}; a wire needs two", self.a));
        }
        for (name, l) in [("a_to_b", &self.a_to_b), ("b_to_a", &self.b_to_a)] {
            l.validate().map_err(|e| format!("{name}: {e}"))?;
        }
        if self.meter_bin < Duration::from_micros(1) {
            return Err(format!("meter bin {} is below 1us", format_duration(self.meter_bin)));
        }
        if self.batch == 0 || self.batch > 1024 {
            return Err(format!("batch {} is outside 1..=1024", self.batch));
        }
        self.resolved_meter_format()?;
        Ok(())
    }
}

// ---- serde helpers: human units in, the same forms out ----

fn ser_duration<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_duration(*d))
}

fn ser_display<T: std::fmt::Display, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

fn ser_rate<S: Serializer>(r: &Option<Rate>, s: S) -> Result<S::Ok, S::Error> {
    match r {
        Some(r) => s.collect_str(r),
        None => s.serialize_str("unlimited"),
    }
}

/// A string, or a bare number for fields where that is unambiguous.
#[derive(Deserialize)]
#[serde(untagged)]
enum StrOrNum {
    S(String),
    U(u64),
}

/// Parses a rate: "unlimited" / "none" or a [`Rate`] form; a bare integer is bit/s.
pub fn parse_rate_setting(s: &str) -> Result<Option<Rate>, tcpaccel_core::units::ParseError> {
    match s.trim() {
        "unlimited" | "none" | "inf" => Ok(None),
        t => Rate::parse(t).map(Some).map_err(|mut e| {
            e.forms =
                "unlimited, or NUMBER[k|M|G|T][bit|bit/s|bps] (e.g. 500mbit, 1Gbit/s), or NUMBER[k|M|G]B/s";
            e
        }),
    }
}

fn de_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Rate>, D::Error> {
    match StrOrNum::deserialize(d)? {
        StrOrNum::S(s) => parse_rate_setting(&s).map_err(serde::de::Error::custom),
        StrOrNum::U(0) => Ok(None),
        StrOrNum::U(n) => Ok(Some(Rate(n))),
    }
}

fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    parse_duration(&s).map_err(serde::de::Error::custom)
}

fn de_limit<'de, D: Deserializer<'de>>(d: D) -> Result<QueueLimit, D::Error> {
    match StrOrNum::deserialize(d)? {
        StrOrNum::S(s) => QueueLimit::parse(&s).map_err(serde::de::Error::custom),
        StrOrNum::U(n) => Ok(QueueLimit::Bytes(n)),
    }
}

fn de_loss<'de, D: Deserializer<'de>>(d: D) -> Result<LossSpec, D::Error> {
    let s = String::deserialize(d)?;
    LossSpec::parse(&s).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_config_from_json_with_units() {
        let j = r#"{"rate":"50mbit","delay":"20ms","buffer":"100p","loss":"ge:p=0.01,r=0.3","seed":7}"#;
        let c: LinkConfig = serde_json::from_str(j).unwrap();
        assert_eq!(c.rate, Some(Rate::mbps(50)));
        assert_eq!(c.delay, Duration::from_millis(20));
        assert_eq!(c.buffer, QueueLimit::Packets(100));
        assert_eq!(c.loss, LossSpec::GilbertElliott { p: 0.01, r: 0.3, h: 1.0, k: 0.0 });
        assert_eq!((c.seed, c.overhead, c.max_frame), (7, 24, 1518));
        // Round trip through the same human forms.
        let back: LinkConfig = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn unlimited_and_defaults() {
        let c: LinkConfig = serde_json::from_str(r#"{"rate":"unlimited"}"#).unwrap();
        assert_eq!(c, LinkConfig::default());
        assert_eq!(serde_json::to_value(&c).unwrap()["rate"], "unlimited");
    }

    #[test]
    fn bad_values_name_value_and_forms() {
        let e = serde_json::from_str::<LinkConfig>(r#"{"rate":"fast"}"#).unwrap_err().to_string();
        assert!(e.contains("\"fast\"") && e.contains("accepted forms") && e.contains("unlimited"), "{e}");
        let e = serde_json::from_str::<LinkConfig>(r#"{"loss":"0.1"}"#).unwrap_err().to_string();
        assert!(e.contains("\"0.1\"") && e.contains("bernoulli:"), "{e}");
        let e = serde_json::from_str::<LinkConfig>(r#"{"delay":"20"}"#).unwrap_err().to_string();
        assert!(e.contains("missing unit"), "{e}");
        let e = serde_json::from_str::<LinkConfig>(r#"{"bogus":1}"#).unwrap_err().to_string();
        assert!(e.contains("bogus"), "{e}");
    }

    #[test]
    fn emu_config_validation() {
        let mut c = EmuConfig::symmetric("a0", "b0", LinkConfig::default());
        assert!(c.validate().is_ok());
        c.meter_out = Some("m.txt".into());
        assert!(c.validate().unwrap_err().contains("m.txt"));
        c.meter_out = Some("m.csv".into());
        assert_eq!(c.resolved_meter_format(), Ok(Some(MeterFormat::Csv)));
        c.a_to_b.buffer = QueueLimit::Bytes(100);
        assert!(c.validate().unwrap_err().starts_with("a_to_b"));
        let same = EmuConfig::symmetric("x", "x", LinkConfig::default());
        assert!(same.validate().is_err());
    }

    #[test]
    fn ring_is_sized_from_buffer_and_bdp() {
        let c = LinkConfig {
            rate: Some(Rate::mbps(500)),
            delay: Duration::from_millis(50),
            buffer: QueueLimit::Bytes(1_000_000),
            ..LinkConfig::default()
        };
        // (1 MB + 3.125 MB) * 2
        assert_eq!(c.ring_bytes(), 8_250_000);
        assert_eq!(LinkConfig::default().ring_bytes(), 64 << 20);
    }
}
