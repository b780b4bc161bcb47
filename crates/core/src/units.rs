//! Unit types parsed once at the edge: [`Rate`] (bit/s), [`Bytes`], durations,
//! and a queue limit in bytes or packets.
//!
//! Conventions, chosen so that a number means one thing everywhere in tcpaccel:
//! - Rates count **bits per second**. `500mbit`, `500Mbit/s`, `500mbps` and
//!   `500M` are all 500 000 000 bit/s (unlike `tc`, where `bps` means bytes).
//!   Bytes per second are written with a capital `B`: `60MB/s`.
//! - Sizes use decimal prefixes for `K/KB/M/MB/G/GB` (1 MB = 1 000 000 bytes,
//!   as in the seed papers' "1 MB buffer") and binary ones for `KiB/MiB/GiB`.
//!   They print in the shortest exact form, decimal on a tie, so a size
//!   shows as it was written (`256KB`, not the equal `250KiB`).
//! - Durations take `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`; a bare number is refused
//!   because nobody agrees on its unit.
//!
//! Parsing never panics; errors name the value and the accepted forms.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// A value that could not be parsed, with the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot parse {what} {value:?}: {reason}; accepted forms: {forms}")]
pub struct ParseError {
    pub what: &'static str,
    pub value: String,
    pub reason: String,
    pub forms: &'static str,
}

const RATE_FORMS: &str =
    "NUMBER[k|M|G|T][bit|bit/s|bps] for bits per second (e.g. 500mbit, 1Gbit/s, 20M), or NUMBER[k|M|G]B/s for bytes per second (e.g. 60MB/s)";
const SIZE_FORMS: &str =
    "NUMBER[B|K|KB|M|MB|G|GB] (decimal) or NUMBER[KiB|MiB|GiB] (binary), e.g. 1MB, 12.5MB, 64KiB, 1500";
const DUR_FORMS: &str = "NUMBER(ns|us|ms|s|m|h), e.g. 100ms, 1.5s, 500us";
const LIMIT_FORMS: &str = "a size (e.g. 1MB, 128KB) or a packet count (e.g. 100p, 100pkt)";

fn err(what: &'static str, value: &str, reason: impl Into<String>, forms: &'static str) -> ParseError {
    ParseError { what, value: value.to_string(), reason: reason.into(), forms }
}

/// Splits "12.5MB/s" into (12.5, "MB/s"). The number must be finite and not negative.
fn split_number<'a>(
    s: &'a str,
    what: &'static str,
    forms: &'static str,
) -> Result<(f64, &'a str), ParseError> {
    let t = s.trim();
    let end = t
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.' || *c == '-' || *c == '+'))
        .map(|(i, _)| i)
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(end);
    if num.is_empty() {
        return Err(err(what, s, "no number", forms));
    }
    let v: f64 = num.parse().map_err(|_| err(what, s, format!("{num:?} is not a number"), forms))?;
    if !v.is_finite() {
        return Err(err(what, s, "not a finite number", forms));
    }
    if v < 0.0 {
        return Err(err(what, s, "negative", forms));
    }
    Ok((v, unit.trim()))
}

/// A rate in bits per second. Deserializes from a number (bit/s) or a string
/// in the grammar of [`Rate::parse`] ("500mbit"); serializes as the number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Rate(pub u64);

impl Rate {
    pub const fn bps(b: u64) -> Self {
        Rate(b)
    }
    pub const fn kbps(k: u64) -> Self {
        Rate(k * 1_000)
    }
    pub const fn mbps(m: u64) -> Self {
        Rate(m * 1_000_000)
    }
    pub const fn gbps(g: u64) -> Self {
        Rate(g * 1_000_000_000)
    }
    pub fn bits_per_sec(self) -> u64 {
        self.0
    }
    /// Whole bytes per second, rounded down (what `SO_MAX_PACING_RATE`
    /// takes); exact for a rate made by [`Rate::from_bytes_per_sec`].
    pub const fn bytes_per_sec(self) -> u64 {
        self.0 / 8
    }
    /// A rate given in bytes per second (saturating at `u64::MAX` bit/s).
    pub const fn from_bytes_per_sec(b: u64) -> Rate {
        Rate(b.saturating_mul(8))
    }
    pub fn as_mbps(self) -> f64 {
        self.0 as f64 / 1e6
    }
    /// Rate from bytes moved over an interval; zero interval gives zero.
    pub fn from_bytes_over(bytes: u64, dur: Duration) -> Rate {
        let ns = dur.as_nanos();
        if ns == 0 {
            return Rate(0);
        }
        Rate(((bytes as u128 * 8 * 1_000_000_000) / ns) as u64)
    }
    /// Time to serialize `bytes` at this rate, rounded up to the nanosecond.
    /// A zero rate means "unlimited" and takes no time.
    pub fn time_for(self, bytes: u64) -> Duration {
        if self.0 == 0 {
            return Duration::ZERO;
        }
        let bits = bytes as u128 * 8 * 1_000_000_000;
        Duration::from_nanos(bits.div_ceil(self.0 as u128) as u64)
    }

    /// Parses the forms in the module docs. Zero is refused here; callers that
    /// accept "unlimited" say so with their own keyword.
    pub fn parse(s: &str) -> Result<Rate, ParseError> {
        let (v, unit) = split_number(s, "rate", RATE_FORMS)?;
        if unit.is_empty() {
            // Like a duration: a bare number could be bits or bytes per second.
            return Err(err("rate", s, "missing unit", RATE_FORMS));
        }
        let (mult, rest) = prefix(unit);
        let per_bit = match rest {
            "" | "bit" | "bit/s" | "bits" | "bits/s" | "bps" | "b/s" | "b" => 1.0,
            "B/s" | "Bps" | "byte/s" | "bytes/s" => 8.0,
            _ => return Err(err("rate", s, format!("unknown unit {unit:?}"), RATE_FORMS)),
        };
        let bits = v * mult * per_bit;
        if bits < 1.0 {
            return Err(err("rate", s, "must be at least 1 bit/s", RATE_FORMS));
        }
        if bits > MAX_SIZE {
            return Err(err("rate", s, "too large", RATE_FORMS));
        }
        Ok(Rate(bits.round() as u64))
    }
}

/// Splits an SI/IEC prefix off a unit, case-insensitive for k/m/g/t.
/// "Mbit" -> (1e6, "bit"); "MiB" -> (2^20, "B"); "MB/s" -> (1e6, "B/s").
fn prefix(unit: &str) -> (f64, &str) {
    let mut chars = unit.chars();
    let Some(c) = chars.next() else { return (1.0, unit) };
    let base = match c.to_ascii_lowercase() {
        'k' => 1e3,
        'm' => 1e6,
        'g' => 1e9,
        't' => 1e12,
        _ => return (1.0, unit),
    };
    let rest = &unit[1..];
    if let Some(r) = rest.strip_prefix('i') {
        let bin = match c.to_ascii_lowercase() {
            'k' => 1024.0,
            'm' => 1048576.0,
            'g' => 1073741824.0,
            _ => 1099511627776.0,
        };
        return (bin, r);
    }
    (base, rest)
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0 as f64;
        // Rounded to three decimals it must still parse: near the largest
        // rate `parse` takes, rounding up would pass it.
        if (b / 1e9 * 1e3).round() / 1e3 * 1e9 > MAX_SIZE {
            write!(f, "{}bit/s", self.0)
        } else if b >= 1e9 {
            write!(f, "{}Gbit/s", trim_float(b / 1e9))
        } else if b >= 1e6 {
            write!(f, "{}Mbit/s", trim_float(b / 1e6))
        } else if b >= 1e3 {
            write!(f, "{}kbit/s", trim_float(b / 1e3))
        } else {
            write!(f, "{}bit/s", self.0)
        }
    }
}

/// [`Rate`] written so that [`Rate::parse`] reads back the same number
/// (`Rate`'s own `Display` rounds to three decimals, for people).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExactRate(pub Rate);

impl Rate {
    /// This rate in the largest unit that still writes it exactly:
    /// `500Mbit/s`, `123.456789Mbit/s`, `7bit/s`. Exact through
    /// [`Rate::parse`] up to 2^50 bit/s (parsing goes through an f64).
    pub fn exact(self) -> ExactRate {
        ExactRate(self)
    }
}

impl fmt::Display for ExactRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0 .0;
        for (unit, digits, name) in
            [(1_000_000_000, 9, "Gbit/s"), (1_000_000, 6, "Mbit/s"), (1_000, 3, "kbit/s")]
        {
            if b >= unit {
                let frac = format!("{:0digits$}", b % unit);
                let frac = frac.trim_end_matches('0');
                return match frac {
                    "" => write!(f, "{}{name}", b / unit),
                    _ => write!(f, "{}.{frac}{name}", b / unit),
                };
            }
        }
        write!(f, "{b}bit/s")
    }
}

impl std::str::FromStr for Rate {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Rate::parse(s)
    }
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// A size in bytes. Deserializes from a number (bytes) or a string in the
/// grammar of [`Bytes::parse`] ("1MB", "64KiB"); serializes as the number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Default)]
pub struct Bytes(pub u64);

impl Bytes {
    pub fn get(self) -> u64 {
        self.0
    }
    pub fn parse(s: &str) -> Result<Bytes, ParseError> {
        let (v, unit) = split_number(s, "size", SIZE_FORMS)?;
        let (mult, rest) = prefix(unit);
        match rest {
            "" | "B" | "b" | "byte" | "bytes" => {}
            _ => return Err(err("size", s, format!("unknown unit {unit:?}"), SIZE_FORMS)),
        }
        let n = v * mult;
        if n > MAX_SIZE {
            return Err(err("size", s, "too large", SIZE_FORMS));
        }
        if n.fract() != 0.0 && mult == 1.0 {
            return Err(err("size", s, "a byte count must be whole", SIZE_FORMS));
        }
        Ok(Bytes(n.round() as u64))
    }
}

/// Sizes print in binary units when the value is a whole number of its
/// largest binary unit up to three decimals (4 MiB = `4MiB`, 1.5 KiB =
/// `1.5KiB`: buffers the kernel sizes in powers of two), in decimal units
/// otherwise (`1MB`, `12.5MB`); both forms parse back.
/// The shortest exact form, so a size prints as it was written: decimal
/// (`KB`, `MB`, `GB`) or binary (`KiB`, `MiB`, ...), at the largest unit
/// that fits, whichever needs fewer decimals (at most 3), decimal on a tie.
/// `256KB` stays `256KB` although it is exactly `250KiB` too (decimal is the
/// papers' and the files' usual form), `4MiB` stays `4MiB`, `1.5KiB` stays
/// `1.5KiB`. A size neither writes exactly is decimal, rounded to 3 decimals.
/// The largest size [`Bytes::parse`] and rate [`Rate::parse`] take.
const MAX_SIZE: f64 = u64::MAX as f64 / 2.0;

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const DECIMAL: [(u64, &str); 3] = [(1_000_000_000, "GB"), (1_000_000, "MB"), (1_000, "KB")];
        const BINARY: [(u64, &str); 4] =
            [(1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
        let b = self.0;
        // (decimals needed, unit, name) at the largest unit of `units` that fits.
        let exact = |units: &[(u64, &'static str)]| {
            let &(unit, name) = units.iter().find(|(unit, _)| b >= *unit)?;
            (0..=3u32)
                .find(|&d| (u128::from(b) * 10u128.pow(d)) % u128::from(unit) == 0)
                .map(|d| (d, unit, name))
        };
        let (_, unit, name) = match (exact(&DECIMAL), exact(&BINARY)) {
            (Some(d), Some(bin)) if bin.0 < d.0 => bin,
            (Some(d), _) => d,
            (None, Some(bin)) => bin,
            (None, None) => match DECIMAL.iter().find(|(unit, _)| b >= *unit) {
                // Rounded to three decimals it must still parse: near the
                // largest size `parse` takes, rounding up would pass it.
                Some(&(unit, name))
                    if (b as f64 / unit as f64 * 1e3).round() / 1e3 * unit as f64 <= MAX_SIZE =>
                {
                    (3, unit, name)
                }
                _ => return write!(f, "{b}B"),
            },
        };
        write!(f, "{}{name}", trim_float(b as f64 / unit as f64))
    }
}

impl std::str::FromStr for Bytes {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Bytes::parse(s)
    }
}

/// Parses a duration such as `100ms`, `1.5s`, `500us`.
pub fn parse_duration(s: &str) -> Result<Duration, ParseError> {
    let (v, unit) = split_number(s, "duration", DUR_FORMS)?;
    let ns_per = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" | "sec" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        "" => return Err(err("duration", s, "missing unit", DUR_FORMS)),
        _ => return Err(err("duration", s, format!("unknown unit {unit:?}"), DUR_FORMS)),
    };
    let ns = v * ns_per;
    if ns > u64::MAX as f64 / 2.0 {
        return Err(err("duration", s, "too large", DUR_FORMS));
    }
    Ok(Duration::from_nanos(ns.round() as u64))
}

/// Formats a duration compactly (`1.5s`, `100ms`, `250us`), parseable by [`parse_duration`].
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns >= 1e9 {
        format!("{}s", trim_float(ns / 1e9))
    } else if ns >= 1e6 {
        format!("{}ms", trim_float(ns / 1e6))
    } else if ns >= 1e3 {
        format!("{}us", trim_float(ns / 1e3))
    } else {
        format!("{}ns", d.as_nanos())
    }
}

/// A drop-tail queue limit: in bytes (a router buffer) or in packets (a NIC ring).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueLimit {
    Bytes(u64),
    Packets(u64),
}

impl QueueLimit {
    pub fn parse(s: &str) -> Result<QueueLimit, ParseError> {
        let t = s.trim();
        for suf in ["pkts", "pkt", "packets", "p"] {
            if let Some(n) = t.strip_suffix(suf) {
                let n: u64 = n
                    .trim()
                    .parse()
                    .map_err(|_| err("queue limit", s, "packet count is not a whole number", LIMIT_FORMS))?;
                return Ok(QueueLimit::Packets(n));
            }
        }
        Bytes::parse(t)
            .map(|b| QueueLimit::Bytes(b.0))
            .map_err(|e| err("queue limit", s, e.reason, LIMIT_FORMS))
    }
}

impl fmt::Display for QueueLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueLimit::Bytes(b) => write!(f, "{}", Bytes(*b)),
            QueueLimit::Packets(p) => write!(f, "{p}pkt"),
        }
    }
}

impl std::str::FromStr for QueueLimit {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        QueueLimit::parse(s)
    }
}

/// Serializes a [`Rate`] as whole bytes per second, for JSON fields that
/// have always carried bytes/s.
pub fn serialize_bytes_per_sec<S: serde::Serializer>(r: &Rate, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(r.bytes_per_sec())
}

/// The one visitor behind every unit deserializer in this module: a string
/// in the unit's grammar (the same `parse` as the command line, so a file and
/// a flag take one grammar), or a bare whole number when the unit has a
/// number form. What differs between the entry points below is only policy:
/// which unit may be a bare number (bit/s for a [`Rate`] read back from JSON,
/// bytes for a [`Bytes`]; never a rate or duration in a configuration file)
/// and the words of "expected ...".
struct UnitVisitor<T> {
    /// The kind of value, for "a {what} cannot be negative".
    what: &'static str,
    expecting: &'static str,
    parse: fn(&str) -> Result<T, ParseError>,
    /// How a bare whole number is read; `None`: refused, the unit is required.
    number: Option<fn(u64) -> T>,
}

impl<T> serde::de::Visitor<'_> for UnitVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
        (self.parse)(v).map_err(E::custom)
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<T, E> {
        match self.number {
            Some(from) => Ok(from(v)),
            None => Err(E::invalid_type(serde::de::Unexpected::Unsigned(v), &self)),
        }
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<T, E> {
        match (u64::try_from(v), self.number) {
            (Ok(u), _) => self.visit_u64(u),
            (Err(_), Some(_)) => Err(E::custom(format!("a {} cannot be negative", self.what))),
            (Err(_), None) => Err(E::invalid_type(serde::de::Unexpected::Signed(v), &self)),
        }
    }
}

/// Serde for unit values as people write them in configuration files: a
/// rate or a duration as text with its unit (`"500mbit"`, `"2m"`), a size as
/// text (`"4MiB"`) or a whole number of bytes. For `Option` fields:
/// `#[serde(default, deserialize_with = "units::text::rate")]`.
pub mod text {
    use super::{Bytes, Rate, UnitVisitor};
    use serde::de::Deserializer;
    use std::time::Duration;

    /// An optional [`Rate`] written as text (`"500mbit"`).
    pub fn rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Rate>, D::Error> {
        d.deserialize_any(UnitVisitor {
            what: "rate",
            expecting: "a rate with its unit, e.g. \"500mbit\"",
            parse: Rate::parse,
            number: None,
        })
        .map(Some)
    }

    /// An optional [`Bytes`] written as text (`"4MiB"`) or a whole number of bytes.
    pub fn bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Bytes>, D::Error> {
        d.deserialize_any(UnitVisitor {
            what: "size",
            expecting: "a size, e.g. \"4MiB\" or 65536",
            parse: Bytes::parse,
            number: Some(Bytes),
        })
        .map(Some)
    }

    /// An optional duration written as text with its unit (`"300ms"`, `"2m"`).
    pub fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        d.deserialize_any(super::serde_duration::visitor()).map(Some)
    }
}

/// A number or a string in a unit grammar, so a file says "500mbit" or
/// 500000000 and means one thing; a number is what [`Rate`] and [`Bytes`]
/// serialize to, so JSON records read back.
impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Rate, D::Error> {
        d.deserialize_any(UnitVisitor {
            what: "rate",
            expecting: "a rate as a whole number or a string with its unit",
            parse: Rate::parse,
            number: Some(Rate),
        })
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        d.deserialize_any(UnitVisitor {
            what: "size",
            expecting: "a size as a whole number or a string with its unit",
            parse: Bytes::parse,
            number: Some(Bytes),
        })
    }
}

/// Serde for a [`Duration`] written as text in the grammar of
/// [`parse_duration`] ("300ms"), for `#[serde(with = "...")]`; `option` is
/// the same for an `Option<Duration>`. A bare number is refused: its unit
/// would be a guess.
pub mod serde_duration {
    use super::{format_duration, parse_duration, UnitVisitor};
    use serde::{Deserializer, Serializer};
    use std::time::Duration;

    pub(super) fn visitor() -> UnitVisitor<Duration> {
        UnitVisitor {
            what: "duration",
            expecting: "a duration with its unit, e.g. \"300ms\"",
            parse: parse_duration,
            number: None,
        }
    }

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_duration(*d))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_any(visitor())
    }

    pub mod option {
        use serde::{Deserialize, Deserializer, Serializer};
        use std::time::Duration;

        pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => super::serialize(d, s),
                None => s.serialize_none(),
            }
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            #[derive(Deserialize)]
            struct Text(#[serde(with = "super")] Duration);
            Ok(Option::<Text>::deserialize(d)?.map(|t| t.0))
        }
    }
}

/// Bandwidth-delay product in bytes.
pub fn bdp_bytes(rate: Rate, rtt: Duration) -> u64 {
    ((rate.0 as u128 * rtt.as_nanos()) / 8 / 1_000_000_000) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_values_take_the_flag_grammar() {
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct F {
            #[serde(deserialize_with = "text::rate")]
            pace: Option<Rate>,
            #[serde(deserialize_with = "text::bytes")]
            buf: Option<Bytes>,
            #[serde(deserialize_with = "text::duration")]
            wait: Option<Duration>,
        }
        let f: F = serde_json::from_str(r#"{"pace": "500mbit", "buf": "4MiB", "wait": "2m"}"#).unwrap();
        assert_eq!(
            (f.pace, f.buf, f.wait),
            (Some(Rate(500_000_000)), Some(Bytes(4 << 20)), Some(Duration::from_secs(120)))
        );
        let f: F = serde_json::from_str(r#"{"buf": 65536}"#).unwrap();
        assert_eq!((f.pace, f.buf, f.wait), (None, Some(Bytes(65536)), None));
        for bad in [r#"{"wait": "10"}"#, r#"{"wait": 10}"#, r#"{"pace": "fast"}"#, r#"{"buf": -1}"#] {
            let e = serde_json::from_str::<F>(bad).err().expect(bad).to_string();
            assert!(!e.is_empty(), "{bad}");
        }
        let e = serde_json::from_str::<F>(r#"{"pace": "fast"}"#).err().unwrap().to_string();
        assert!(e.contains("\"fast\"") && e.contains("accepted forms"), "{e}");
    }

    #[test]
    fn rates_sizes_and_durations_deserialize_from_text_or_numbers() {
        let r: Rate = serde_json::from_str("\"500mbit\"").unwrap();
        assert_eq!(r, Rate(500_000_000));
        assert_eq!(serde_json::from_str::<Rate>("1000").unwrap(), Rate(1000));
        assert_eq!(serde_json::to_string(&r).unwrap(), "500000000", "serialized as before: the number");
        assert_eq!(serde_json::from_str::<Bytes>("\"64KiB\"").unwrap(), Bytes(65_536));
        assert_eq!(serde_json::from_str::<Bytes>("131072").unwrap(), Bytes(131_072));
        let e = serde_json::from_str::<Bytes>("\"lots\"").unwrap_err().to_string();
        assert!(e.contains("lots"), "{e}");
        assert!(serde_json::from_str::<Rate>("-1").unwrap_err().to_string().contains("negative"));
        #[derive(Deserialize, Serialize, PartialEq, Debug)]
        struct T {
            #[serde(with = "serde_duration")]
            d: Duration,
            #[serde(default, with = "serde_duration::option")]
            o: Option<Duration>,
        }
        let t: T = serde_json::from_str(r#"{"d": "300ms", "o": "10us"}"#).unwrap();
        assert_eq!(t, T { d: Duration::from_millis(300), o: Some(Duration::from_micros(10)) });
        assert_eq!(serde_json::from_str::<T>(r#"{"d": "1s"}"#).unwrap().o, None);
        assert_eq!(serde_json::to_string(&t).unwrap(), r#"{"d":"300ms","o":"10us"}"#);
        let e = serde_json::from_str::<T>(r#"{"d": "300"}"#).unwrap_err().to_string();
        assert!(e.contains("missing unit"), "{e}");
        // One visitor, two policies: a bare number is a rate in bit/s where
        // JSON carries one, but a file's duration or rate needs its unit, and
        // all say what they expected in the same words.
        let e = serde_json::from_str::<T>(r#"{"d": 300}"#).unwrap_err().to_string();
        assert!(e.contains("expected a duration with its unit"), "{e}");
        #[derive(Deserialize, Debug)]
        struct F {
            #[serde(default, deserialize_with = "text::rate")]
            r: Option<Rate>,
            #[serde(default, deserialize_with = "text::duration")]
            d: Option<Duration>,
        }
        let f: F = serde_json::from_str(r#"{"r": "1gbit", "d": "2s"}"#).unwrap();
        assert_eq!((f.r, f.d), (Some(Rate(1_000_000_000)), Some(Duration::from_secs(2))));
        let e = serde_json::from_str::<F>(r#"{"r": 500}"#).unwrap_err().to_string();
        assert!(e.contains("expected a rate with its unit"), "{e}");
        let e = serde_json::from_str::<F>(r#"{"d": -3}"#).unwrap_err().to_string();
        assert!(e.contains("expected a duration with its unit"), "{e}");
    }

    #[test]
    fn rates_in_bits() {
        assert_eq!(Rate::parse("500mbit").unwrap(), Rate(500_000_000));
        assert_eq!(Rate::parse("500Mbit/s").unwrap(), Rate(500_000_000));
        assert_eq!(Rate::parse("1gbit").unwrap(), Rate(1_000_000_000));
        assert_eq!(Rate::parse("1Gbps").unwrap(), Rate(1_000_000_000));
        assert_eq!(Rate::parse("20M").unwrap(), Rate(20_000_000));
        assert_eq!(Rate::parse("2.5kbit").unwrap(), Rate(2_500));
        assert_eq!(Rate::parse("60MB/s").unwrap(), Rate(480_000_000));
        assert_eq!(Rate::parse("1000bit").unwrap(), Rate(1000));
        let e = Rate::parse("100").unwrap_err().to_string();
        assert!(e.contains("missing unit") && e.contains("500mbit"), "{e}");
        assert_eq!(Rate::parse("20M").unwrap(), Rate::mbps(20), "a prefix alone is a unit");
    }

    #[test]
    fn bad_rates_name_value_and_forms() {
        for bad in ["", "fast", "0", "-5mbit", "10 furlongs", "0.1bit", "nanmbit"] {
            let e = Rate::parse(bad).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains(&format!("{bad:?}")), "{msg}");
            assert!(msg.contains("accepted forms"), "{msg}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(Bytes::parse("1MB").unwrap(), Bytes(1_000_000));
        assert_eq!(Bytes::parse("12.5MB").unwrap(), Bytes(12_500_000));
        assert_eq!(Bytes::parse("64KiB").unwrap(), Bytes(65_536));
        assert_eq!(Bytes::parse("1500").unwrap(), Bytes(1500));
        assert_eq!(Bytes::parse("128K").unwrap(), Bytes(128_000));
        assert!(Bytes::parse("1.5").is_err());
        assert!(Bytes::parse("3 parsecs").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("100ms").unwrap(), Duration::from_millis(100));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("500us").unwrap(), Duration::from_micros(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("100").unwrap_err().to_string().contains("missing unit"));
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(
            parse_duration(&format_duration(Duration::from_micros(250))).unwrap(),
            Duration::from_micros(250)
        );
    }

    #[test]
    fn queue_limits() {
        assert_eq!(QueueLimit::parse("1MB").unwrap(), QueueLimit::Bytes(1_000_000));
        assert_eq!(QueueLimit::parse("100p").unwrap(), QueueLimit::Packets(100));
        assert_eq!(QueueLimit::parse("40pkt").unwrap(), QueueLimit::Packets(40));
        assert!(QueueLimit::parse("xp").is_err());
    }

    #[test]
    fn serialization_time_is_exact() {
        // 1538 bytes on the wire at 100 Mbit/s = 123.04 us.
        assert_eq!(Rate::mbps(100).time_for(1538), Duration::from_nanos(123_040));
        assert_eq!(Rate(0).time_for(1538), Duration::ZERO);
        assert_eq!(Rate::from_bytes_over(1_250_000, Duration::from_millis(100)), Rate::mbps(100));
        assert_eq!(bdp_bytes(Rate::mbps(500), Duration::from_millis(100)), 6_250_000);
    }

    #[test]
    fn exact_display_is_exact() {
        assert_eq!(Rate::mbps(500).exact().to_string(), "500Mbit/s");
        assert_eq!(Rate(123_456_789).exact().to_string(), "123.456789Mbit/s");
        assert_eq!(Rate(1_000_000_007).exact().to_string(), "1.000000007Gbit/s");
        assert_eq!(Rate(2_500).exact().to_string(), "2.5kbit/s");
        assert_eq!(Rate(999).exact().to_string(), "999bit/s");
        for r in [1, 999, 1_001, 123_456_789, 10_000_000_001, 1 << 50] {
            assert_eq!(Rate::parse(&Rate(r).exact().to_string()), Ok(Rate(r)), "{r}");
        }
    }

    #[test]
    fn sizes_print_in_their_shortest_exact_form_decimal_on_a_tie() {
        // Exact both ways: decimal, as the papers and the files write them
        // (256KB once printed as 250KiB).
        assert_eq!(Bytes(256_000).to_string(), "256KB");
        assert_eq!(Bytes(128_000).to_string(), "128KB");
        assert_eq!(Bytes(64_000).to_string(), "64KB", "not 62.5KiB");
        assert_eq!(Bytes(3_750_000).to_string(), "3.75MB");
        assert_eq!(Bytes(500_000).to_string(), "500KB");
        // Binary when that is shorter.
        assert_eq!(Bytes(1_024_000).to_string(), "1000KiB", "not 1.024MB");
        assert_eq!(Bytes(262_144).to_string(), "256KiB");
        // Neither exact: decimal, rounded.
        assert_eq!(Bytes(1_234_567).to_string(), "1.235MB");
        assert_eq!(Bytes(1000).to_string(), "1KB");
        assert_eq!(Bytes(1023).to_string(), "1.023KB");
        assert_eq!(Bytes(4 << 20).to_string(), "4MiB");
        assert_eq!(Bytes(6 << 20).to_string(), "6MiB");
        assert_eq!(Bytes(1536).to_string(), "1.5KiB");
        assert_eq!(Bytes(64 << 10).to_string(), "64KiB");
        assert_eq!(Bytes(1_000_000).to_string(), "1MB");
        assert_eq!(Bytes(12_500_000).to_string(), "12.5MB");
        assert_eq!(Bytes(16_000_000).to_string(), "16MB");
        assert_eq!(Bytes(33_554_432).to_string(), "32MiB");
        assert_eq!(Bytes(1500).to_string(), "1.5KB");
        assert_eq!(Bytes(512).to_string(), "512B");
        for b in [4u64 << 20, 1536, 1_000_000, 12_500_000, 33_554_432, 1500, 512] {
            assert_eq!(Bytes::parse(&Bytes(b).to_string()), Ok(Bytes(b)), "{b}");
        }
    }

    #[test]
    fn display_round_trips() {
        for r in [Rate::mbps(500), Rate::gbps(1), Rate::kbps(64)] {
            assert_eq!(Rate::parse(&r.to_string()).unwrap(), r);
        }
    }

    #[test]
    fn a_size_near_the_largest_prints_in_a_form_that_parses() {
        // Found by fuzzing: 9223372036.855GB, rounded up, was too large to parse.
        let b = Bytes(9_223_372_036_854_773_760);
        assert_eq!(b.to_string(), "9223372036854773760B");
        assert_eq!(Bytes::parse(&b.to_string()).unwrap(), b);
        assert_eq!(Bytes(1_234_567).to_string(), "1.235MB", "ordinary sizes keep their three decimals");
    }

    #[test]
    fn a_rate_near_the_largest_prints_in_a_form_that_parses() {
        // Found by fuzzing, as for sizes.
        let r = Rate(9_223_372_036_854_775_806);
        assert_eq!(Rate::parse(&r.to_string()).unwrap().0 as f64, r.0 as f64);
        assert_eq!(Rate::mbps(500).to_string(), "500Mbit/s");
    }
}
