//! The one pacing grammar of tcpaccel: `--pace` of `send`/`recv`, `run` and
//! `pace`, a `pace --rule`'s right-hand side, and the `TCPACCEL_PACE`
//! variable `run` hands to the LD_PRELOAD shim, all parsed here into one
//! [`PaceSpec`].
//!
//! ```text
//! none
//! static:RATE                     a fixed rate
//! dynamic[:CEILING]               cwnd·mss/RTT ([PSPacer] eq. 1), the tool's own implementation
//! dynamic=kernel|loop[:CEILING]   the traffic tool's two userspace implementations, by name
//! ```
//!
//! RATE and CEILING are [`Rate`]s (`500mbit`, `1Gbit/s`, `60MB/s`) counted
//! **on the wire** of the bottleneck: every Ethernet frame with preamble, FCS
//! and inter-frame gap, as [PSPacer] and the emulator count it. Each tool
//! converts them into the payload bytes/s Linux's `SO_MAX_PACING_RATE`
//! takes with [`crate::pacing::Framing`] (`static:500mbit` paces payload at
//! 500 × 1448/1538 Mbit/s on a 1500-byte MTU).
//!
//! What `dynamic` without a name means is the front end's business: the
//! traffic tool's default loop, the cgroup pacer's per-ACK BPF program, the
//! shim's TCP_INFO loop. Those that have no `kernel`/`loop` choice refuse
//! the named forms ([`PaceSpec::mode`] says whether one was named).
//!
//! [`PaceSpec`]'s `Display` writes the grammar back exactly (rates with
//! [`Rate::exact`]), so a parsed value can be passed on as text, as `run`
//! does to the shim, and read back unchanged.

use crate::units::Rate;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The forms a pacing can take, for error messages.
pub const FORMS: &str = "none, static:RATE, dynamic, dynamic:CEILING or dynamic=kernel|loop[:CEILING] \
     (RATE and CEILING on the wire, e.g. static:500mbit)";

/// Which userspace implementation of `dynamic` the traffic tool runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DynamicMode {
    /// Linux's internal pacing; the namespace's pacing ratios must be 100.
    Kernel,
    /// A TCP_INFO control loop with [`crate::pacing::DynamicPacer`].
    Loop,
}

impl DynamicMode {
    /// The name in the grammar (`dynamic=NAME`).
    pub fn name(self) -> &'static str {
        match self {
            DynamicMode::Kernel => "kernel",
            DynamicMode::Loop => "loop",
        }
    }
}

/// One parsed pacing (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PaceSpec {
    /// Leave the socket alone.
    None,
    /// A fixed on-wire rate.
    Static(Rate),
    /// [PSPacer] eq. (1), `cwnd·mss/RTT`, never above the on-wire `ceiling`.
    /// `mode` is `Some` only when the text named one (`dynamic=loop`).
    Dynamic { mode: Option<DynamicMode>, ceiling: Option<Rate> },
}

/// A pacing that does not parse; the message quotes the whole text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PaceSpecError {
    #[error("pacing {text:?}: expected {FORMS}")]
    Form { text: String },
    /// A `dynamic` form where only a fixed rate can be held ([`PaceSpec::parse_fixed`]).
    #[error(
        "pacing {text:?}: only none or static:RATE here (a fixed rate on the wire, e.g. static:500mbit)"
    )]
    NotFixed { text: String },
    #[error("pacing {text:?}: {source}")]
    Rate {
        text: String,
        #[source]
        source: crate::units::ParseError,
    },
}

impl PaceSpec {
    /// Parses the grammar of the module docs. Surrounding white space is
    /// ignored, as are the case of `none` and of a mode's name.
    pub fn parse(text: &str) -> Result<PaceSpec, PaceSpecError> {
        let s = text.trim();
        let form = || PaceSpecError::Form { text: s.to_string() };
        let rate =
            |r: &str| Rate::parse(r).map_err(|source| PaceSpecError::Rate { text: s.to_string(), source });
        if s.eq_ignore_ascii_case("none") {
            return Ok(PaceSpec::None);
        }
        if let Some(r) = s.strip_prefix("static:") {
            return rate(r).map(PaceSpec::Static);
        }
        let rest = s.strip_prefix("dynamic").ok_or_else(form)?;
        let (mode, ceiling) = if let Some(named) = rest.strip_prefix('=') {
            let (name, tail) = named.split_once(':').map_or((named, None), |(a, b)| (a, Some(b)));
            let mode = match name.to_ascii_lowercase().as_str() {
                "kernel" => DynamicMode::Kernel,
                "loop" => DynamicMode::Loop,
                _ => return Err(form()),
            };
            (Some(mode), tail)
        } else if rest.is_empty() {
            (None, None)
        } else {
            (None, Some(rest.strip_prefix(':').ok_or_else(form)?))
        };
        let ceiling = ceiling.map(rate).transpose()?;
        Ok(PaceSpec::Dynamic { mode, ceiling })
    }

    /// The grammar as a front end that holds one fixed cap per socket takes
    /// it (the relay's upstream sockets): `none` (`Ok(None)`) or
    /// `static:RATE`; the `dynamic` forms are refused, naming the text.
    pub fn parse_fixed(text: &str) -> Result<Option<Rate>, PaceSpecError> {
        match PaceSpec::parse(text)? {
            PaceSpec::None => Ok(None),
            PaceSpec::Static(r) => Ok(Some(r)),
            PaceSpec::Dynamic { .. } => Err(PaceSpecError::NotFixed { text: text.trim().to_string() }),
        }
    }

    /// The on-wire rate this pacing never exceeds, if any.
    pub fn ceiling(self) -> Option<Rate> {
        match self {
            PaceSpec::None => None,
            PaceSpec::Static(r) => Some(r),
            PaceSpec::Dynamic { ceiling, .. } => ceiling,
        }
    }

    /// The `dynamic=NAME` the text named, if any.
    pub fn mode(self) -> Option<DynamicMode> {
        match self {
            PaceSpec::Dynamic { mode, .. } => mode,
            _ => None,
        }
    }
}

impl std::str::FromStr for PaceSpec {
    type Err = PaceSpecError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PaceSpec::parse(s)
    }
}

impl fmt::Display for PaceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PaceSpec::None => write!(f, "none"),
            PaceSpec::Static(r) => write!(f, "static:{}", r.exact()),
            PaceSpec::Dynamic { mode, ceiling } => {
                write!(f, "dynamic")?;
                if let Some(m) = mode {
                    write!(f, "={}", m.name())?;
                }
                match ceiling {
                    Some(c) => write!(f, ":{}", c.exact()),
                    None => Ok(()),
                }
            }
        }
    }
}

/// Which front ends take a text of [`FRONT_END_CASES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    /// Every one: `send`/`recv --pace`, `run --pace`, `pace --pace` and
    /// `--rule`, and the shim's `TCPACCEL_PACE`; `relay --pace` (a fixed
    /// cap per socket, [`PaceSpec::parse_fixed`]) only its `none` and
    /// `static:RATE` ones.
    All,
    /// The grammar's `dynamic=kernel|loop`: only the traffic tool, which has
    /// both; the others refuse it, naming the text.
    Traffic,
    /// Nobody: not the grammar.
    None,
}

/// Texts that every front end's tests run through it, so that the tools
/// cannot drift apart again (each once had a parser of its own).
pub const FRONT_END_CASES: &[(&str, Takes)] = &[
    ("none", Takes::All),
    ("static:20mbit", Takes::All),
    ("static:20Mbit/s", Takes::All),
    ("static:2.5MB/s", Takes::All),
    ("static:123456789bit", Takes::All),
    ("static:123456789", Takes::None),
    ("dynamic", Takes::All),
    ("dynamic:1gbit", Takes::All),
    (" dynamic:400mbit ", Takes::All),
    ("dynamic=kernel", Takes::Traffic),
    ("dynamic=loop:100mbit", Takes::Traffic),
    ("turbo", Takes::None),
    ("500mbit", Takes::None),
    ("static:", Takes::None),
    ("static:0", Takes::None),
    ("static:-1mbit", Takes::None),
    ("static:fast", Takes::None),
    ("dynamic:0", Takes::None),
    ("dynamicx", Takes::None),
    ("dynamic=fast", Takes::None),
];

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn dynamic(mode: Option<DynamicMode>, ceiling: Option<Rate>) -> PaceSpec {
        PaceSpec::Dynamic { mode, ceiling }
    }

    #[test]
    fn every_form_parses() {
        let cases = [
            ("none", PaceSpec::None),
            (" NONE ", PaceSpec::None),
            ("static:500mbit", PaceSpec::Static(Rate::mbps(500))),
            ("static:60MB/s", PaceSpec::Static(Rate::mbps(480))),
            ("dynamic", dynamic(None, None)),
            ("dynamic:400mbit", dynamic(None, Some(Rate::mbps(400)))),
            ("dynamic=kernel", dynamic(Some(DynamicMode::Kernel), None)),
            ("dynamic=LOOP:1gbit", dynamic(Some(DynamicMode::Loop), Some(Rate::gbps(1)))),
        ];
        for (text, want) in cases {
            assert_eq!(PaceSpec::parse(text), Ok(want), "{text}");
            assert_eq!(text.parse::<PaceSpec>(), Ok(want), "{text}");
        }
        assert_eq!(PaceSpec::Static(Rate::mbps(5)).ceiling(), Some(Rate::mbps(5)));
        assert_eq!(dynamic(Some(DynamicMode::Loop), None).mode(), Some(DynamicMode::Loop));
        assert_eq!(PaceSpec::None.ceiling(), None);
    }

    #[test]
    fn a_fixed_pacing_is_none_or_static() {
        assert_eq!(PaceSpec::parse_fixed(" none "), Ok(None));
        assert_eq!(PaceSpec::parse_fixed("static:500mbit"), Ok(Some(Rate::mbps(500))));
        for text in ["dynamic", "dynamic:1gbit", "dynamic=kernel"] {
            let e = PaceSpec::parse_fixed(text).unwrap_err().to_string();
            assert!(e.contains(&format!("{text:?}")) && e.contains("only none or static:RATE"), "{e}");
        }
        assert!(PaceSpec::parse_fixed("500mbit").unwrap_err().to_string().contains("static:RATE"));
    }

    #[test]
    fn bad_forms_name_the_whole_text() {
        for bad in ["", "500mbit", "turbo", "dynamicx", "dynamic=fast", "dynamic=", "static", "Static:1mbit"]
        {
            let e = PaceSpec::parse(bad).unwrap_err();
            assert_eq!(e, PaceSpecError::Form { text: bad.to_string() }, "{bad}");
            let msg = e.to_string();
            assert!(msg.contains(&format!("{bad:?}")) && msg.contains("static:RATE"), "{msg}");
        }
        for bad in
            ["static:0", "static:", "static:fast", "static:-5mbit", "dynamic:0", "dynamic=loop:1 furlong"]
        {
            let e = PaceSpec::parse(bad).unwrap_err();
            assert!(matches!(e, PaceSpecError::Rate { .. }), "{bad}: {e:?}");
            let msg = e.to_string();
            assert!(msg.contains(&format!("{bad:?}")) && msg.contains("accepted forms"), "{msg}");
        }
    }

    #[test]
    fn display_writes_the_grammar_back() {
        assert_eq!(PaceSpec::Static(Rate::mbps(20)).to_string(), "static:20Mbit/s");
        assert_eq!(PaceSpec::Static(Rate(123_456_789)).to_string(), "static:123.456789Mbit/s");
        assert_eq!(dynamic(None, None).to_string(), "dynamic");
        assert_eq!(dynamic(None, Some(Rate::gbps(1))).to_string(), "dynamic:1Gbit/s");
        assert_eq!(dynamic(Some(DynamicMode::Kernel), Some(Rate(7))).to_string(), "dynamic=kernel:7bit/s");
    }

    #[test]
    fn the_front_end_table_is_the_grammar() {
        for (text, takes) in FRONT_END_CASES {
            let p = PaceSpec::parse(text);
            assert_eq!(p.is_ok(), *takes != Takes::None, "{text}: {p:?}");
            assert_eq!(p.is_ok_and(|p| p.mode().is_some()), *takes == Takes::Traffic, "{text}");
        }
    }

    fn spec() -> impl Strategy<Value = PaceSpec> {
        // Up to 2^50 bit/s: Rate::parse goes through an f64, exact to well below 2^53.
        let rate = (1u64..=1 << 50).prop_map(Rate);
        let mode = prop::option::of(prop_oneof![Just(DynamicMode::Kernel), Just(DynamicMode::Loop)]);
        prop_oneof![
            Just(PaceSpec::None),
            rate.clone().prop_map(PaceSpec::Static),
            (mode, prop::option::of(rate)).prop_map(|(mode, ceiling)| PaceSpec::Dynamic { mode, ceiling }),
        ]
    }

    proptest! {
        #[test]
        fn display_round_trips(p in spec()) {
            prop_assert_eq!(PaceSpec::parse(&p.to_string()), Ok(p));
        }
    }
}
