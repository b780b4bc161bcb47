//! What `tcpaccel pace` is told: a default pacing, per-destination rules
//! (`CIDR[:PORT]=PACE`) and a ceiling, parsed once into a [`PaceConfig`].
//!
//! PACE is the one pacing grammar ([`PaceSpec`], in core) with its on-wire
//! meaning: `none`, `static:RATE`, `dynamic`, `dynamic:CEILING`.
//! `dynamic=kernel` and `dynamic=loop` name the traffic tool's own two
//! implementations and are refused here: the cgroup pacer's `dynamic` is its
//! own, per ACK, in the BPF program.

use std::net::{IpAddr, Ipv6Addr};

use serde::Serialize;
use tcpaccel_core::pace_spec::PaceSpec;
use tcpaccel_core::units::Rate;

use crate::abi::{DstKey, RuleAbi, MAX_RULES, RULE_DYNAMIC, RULE_HOLD, RULE_NONE, RULE_STATIC};

/// A rule, pacing or destination that cannot be used; the message quotes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("rule {text:?}: expected DEST=PACE, DEST being CIDR or CIDR:PORT (IPv6 as [CIDR]:PORT), e.g. 10.0.0.0/8:5201=static:100mbit")]
    Form { text: String },
    #[error("rule {text:?}: {what} {value:?}: {reason}")]
    Dest { text: String, what: &'static str, value: String, reason: String },
    #[error("{text:?}: {reason}")]
    Pace { text: String, reason: String },
    #[error("rule {text:?}: the same destination as rule {other:?}")]
    Duplicate { text: String, other: String },
    #[error("{count} rules: at most {max}")]
    TooMany { count: usize, max: u32 },
}

/// Where a rule applies: an address prefix and, optionally, one remote port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Dest {
    pub addr: IpAddr,
    pub prefix: u8,
    pub port: Option<u16>,
}

impl Dest {
    /// The LPM key: port (0 = any) then the address, IPv4 mapped into IPv6.
    pub fn key(&self) -> DstKey {
        let (addr, bits) = match self.addr {
            IpAddr::V4(a) => (a.to_ipv6_mapped(), 96 + u32::from(self.prefix)),
            IpAddr::V6(a) => (a, u32::from(self.prefix)),
        };
        DstKey { prefixlen: 16 + bits, port: self.port.unwrap_or(0), addr: addr.octets() }
    }

    /// The destination an LPM key stands for.
    pub fn from_key(k: &DstKey) -> Dest {
        let a = Ipv6Addr::from(k.addr);
        let bits = k.prefixlen.saturating_sub(16);
        let port = (k.port != 0).then_some(k.port);
        match a.to_ipv4_mapped() {
            Some(v4) if bits >= 96 => Dest { addr: IpAddr::V4(v4), prefix: (bits - 96) as u8, port },
            _ => Dest { addr: IpAddr::V6(a), prefix: bits.min(128) as u8, port },
        }
    }
}

impl std::fmt::Display for Dest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.addr, self.port) {
            (IpAddr::V6(a), Some(p)) => write!(f, "[{a}/{}]:{p}", self.prefix),
            (a, Some(p)) => write!(f, "{a}/{}:{p}", self.prefix),
            (a, None) => write!(f, "{a}/{}", self.prefix),
        }
    }
}

/// How connections matching a rule are paced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum RulePace {
    /// Left alone.
    None,
    /// A fixed on-wire rate.
    Static { wire_bps: u64 },
    /// [PSPacer] eq. (1) per ACK, under an optional on-wire ceiling.
    Dynamic { ceiling_bps: Option<u64> },
}

impl RulePace {
    /// The rule for a parsed pacing; a named `dynamic=kernel|loop` is refused.
    pub fn from_spec(p: PaceSpec) -> Result<RulePace, RuleError> {
        Ok(match p {
            PaceSpec::None => RulePace::None,
            PaceSpec::Static(r) => RulePace::Static { wire_bps: r.bits_per_sec() },
            PaceSpec::Dynamic { mode: Some(m), .. } => {
                return Err(RuleError::Pace {
                    text: p.to_string(),
                    reason: format!(
                        "dynamic={} is the traffic tool's userspace pacing; the cgroup pacer's dynamic runs per ACK in the kernel: write dynamic or dynamic:CEILING",
                        m.name()
                    ),
                })
            }
            PaceSpec::Dynamic { mode: None, ceiling } => {
                RulePace::Dynamic { ceiling_bps: ceiling.map(Rate::bits_per_sec) }
            }
        })
    }

    /// The pacing in the grammar's terms.
    pub fn spec(self) -> PaceSpec {
        match self {
            RulePace::None => PaceSpec::None,
            RulePace::Static { wire_bps } => PaceSpec::Static(Rate(wire_bps)),
            RulePace::Dynamic { ceiling_bps } => {
                PaceSpec::Dynamic { mode: None, ceiling: ceiling_bps.map(Rate) }
            }
        }
    }

    /// Under a global ceiling: a static rate above it is lowered, a dynamic
    /// ceiling is the lower of the two.
    pub fn capped(self, ceiling: Option<Rate>) -> RulePace {
        let Some(c) = ceiling else { return self };
        match self {
            RulePace::None => RulePace::None,
            RulePace::Static { wire_bps } => RulePace::Static { wire_bps: wire_bps.min(c.0) },
            RulePace::Dynamic { ceiling_bps } => {
                RulePace::Dynamic { ceiling_bps: Some(ceiling_bps.map_or(c.0, |x| x.min(c.0))) }
            }
        }
    }

    pub fn abi(self) -> RuleAbi {
        match self {
            RulePace::None => RuleAbi { kind: RULE_NONE, ..RuleAbi::default() },
            RulePace::Static { wire_bps } => RuleAbi { kind: RULE_STATIC, flags: 0, wire_bps },
            RulePace::Dynamic { ceiling_bps } => {
                RuleAbi { kind: RULE_DYNAMIC, flags: 0, wire_bps: ceiling_bps.unwrap_or(0) }
            }
        }
    }

    pub fn from_abi(r: RuleAbi) -> RulePace {
        match r.kind {
            RULE_STATIC => RulePace::Static { wire_bps: r.wire_bps },
            RULE_DYNAMIC => RulePace::Dynamic { ceiling_bps: (r.wire_bps != 0).then_some(r.wire_bps) },
            _ => RulePace::None,
        }
    }
}

/// The grammar's form, which [`parse_pace`] reads back unchanged.
impl std::fmt::Display for RulePace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.spec().fmt(f)
    }
}

/// One per-destination rule as given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DstRule {
    pub text: String,
    pub dest: Dest,
    pub pace: RulePace,
}

/// Parses one `PACE` (the default pacing, or a rule's right-hand side).
pub fn parse_pace(text: &str) -> Result<RulePace, RuleError> {
    let p = PaceSpec::parse(text)
        .map_err(|e| RuleError::Pace { text: text.to_string(), reason: e.to_string() })?;
    RulePace::from_spec(p).map_err(|e| match e {
        RuleError::Pace { reason, .. } => RuleError::Pace { text: text.to_string(), reason },
        other => other,
    })
}

fn parse_dest(text: &str, d: &str) -> Result<Dest, RuleError> {
    let err = |what, value: &str, reason: String| RuleError::Dest {
        text: text.to_string(),
        what,
        value: value.to_string(),
        reason,
    };
    let (cidr, port) = if let Some(rest) = d.strip_prefix('[') {
        let (inner, tail) = rest.split_once(']').ok_or_else(|| RuleError::Form { text: text.to_string() })?;
        let port = match tail {
            "" => None,
            t => Some(t.strip_prefix(':').ok_or_else(|| RuleError::Form { text: text.to_string() })?),
        };
        (inner, port)
    } else if d.matches(':').count() == 1 {
        let (a, p) = d.split_once(':').unwrap_or((d, ""));
        (a, Some(p))
    } else {
        (d, None)
    };
    let port = port
        .map(|p| match p.parse::<u16>() {
            Ok(0) | Err(_) => Err(err("port", p, "expected 1-65535".into())),
            Ok(n) => Ok(n),
        })
        .transpose()?;
    let (a, len) = match cidr.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (cidr, None),
    };
    let addr: IpAddr = a.parse().map_err(|_| err("address", a, "not an IPv4 or IPv6 address".into()))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = match len {
        None => max,
        Some(l) => match l.parse::<u8>() {
            Ok(n) if n <= max => n,
            _ => return Err(err("prefix length", l, format!("expected 0-{max}"))),
        },
    };
    let addr = mask(addr, prefix);
    Ok(Dest { addr, prefix, port })
}

fn mask(addr: IpAddr, prefix: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let m = if prefix == 0 { 0 } else { u32::MAX << (32 - u32::from(prefix)) };
            IpAddr::V4((u32::from(a) & m).into())
        }
        IpAddr::V6(a) => {
            let m = if prefix == 0 { 0 } else { u128::MAX << (128 - u32::from(prefix)) };
            IpAddr::V6((u128::from(a) & m).into())
        }
    }
}

/// Parses one `DEST=PACE` rule.
pub fn parse_rule(text: &str) -> Result<DstRule, RuleError> {
    let t = text.trim();
    let (d, p) = t.split_once('=').ok_or_else(|| RuleError::Form { text: text.to_string() })?;
    let dest = parse_dest(text, d.trim())?;
    let pace = parse_pace(p.trim()).map_err(|e| match e {
        RuleError::Pace { reason, .. } => RuleError::Pace { text: text.to_string(), reason },
        other => other,
    })?;
    Ok(DstRule { text: t.to_string(), dest, pace })
}

impl std::str::FromStr for DstRule {
    type Err = RuleError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_rule(s)
    }
}

/// Everything one attachment applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PaceConfig {
    /// For connections no rule matches.
    pub default: RulePace,
    pub rules: Vec<DstRule>,
    /// On-wire ceiling over every rule.
    pub ceiling: Option<u64>,
    /// Dynamic rules also guard small buffers against overshoot: a
    /// bottleneck estimate from the ACK trains of slow start's unpaced
    /// first windows, growth fast below half of it and slow above, and a
    /// hold just below the delivery rate while the RTT shows a queue; the
    /// estimate is shared among the rule's sockets past their probe, and a
    /// growing cap grows by at least 8 segments per srtt (`hold_cap` in
    /// the BPF source, `tcpaccel_core::pacing::BpfHold`; issues 17 and 27).
    pub hold: bool,
}

impl PaceConfig {
    /// Validates a default pacing, rules and a ceiling in one step.
    pub fn parse(default: &str, rules: &[String], ceiling: Option<Rate>) -> Result<PaceConfig, RuleError> {
        let default = PaceSpec::parse(default)
            .map_err(|e| RuleError::Pace { text: default.to_string(), reason: e.to_string() })?;
        let rules = rules.iter().map(|r| parse_rule(r)).collect::<Result<Vec<_>, _>>()?;
        PaceConfig::new(default, rules, ceiling)
    }

    /// The configuration of already parsed parts: refuses a named
    /// `dynamic=MODE` default, two rules for one destination, and more rules
    /// than the BPF map holds.
    pub fn new(
        default: PaceSpec,
        rules: Vec<DstRule>,
        ceiling: Option<Rate>,
    ) -> Result<PaceConfig, RuleError> {
        let default = RulePace::from_spec(default)?;
        let mut parsed: Vec<DstRule> = Vec::new();
        for rule in rules {
            if let Some(o) = parsed.iter().find(|o| o.dest.key() == rule.dest.key()) {
                return Err(RuleError::Duplicate { text: rule.text, other: o.text.clone() });
            }
            parsed.push(rule);
        }
        if parsed.len() >= MAX_RULES as usize {
            return Err(RuleError::TooMany { count: parsed.len(), max: MAX_RULES - 1 });
        }
        Ok(PaceConfig { default, rules: parsed, ceiling: ceiling.map(Rate::bits_per_sec), hold: false })
    }

    /// The `pace_rules` array (index 0: the default) and the `pace_dst`
    /// trie entries pointing into it, ceiling applied.
    pub fn tables(&self) -> (Vec<RuleAbi>, Vec<(DstKey, u32)>) {
        let c = self.ceiling.map(Rate);
        let abi = |p: RulePace| {
            let mut a = p.capped(c).abi();
            if self.hold && a.kind == RULE_DYNAMIC {
                a.flags |= RULE_HOLD;
            }
            a
        };
        let mut rules = vec![abi(self.default)];
        let mut dst = Vec::new();
        for (i, r) in self.rules.iter().enumerate() {
            rules.push(abi(r.pace));
            dst.push((r.dest.key(), i as u32 + 1));
        }
        (rules, dst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_to_lpm_keys() {
        let r = parse_rule("10.1.2.3/8:5201=static:100mbit").unwrap();
        assert_eq!(r.dest, Dest { addr: "10.0.0.0".parse().unwrap(), prefix: 8, port: Some(5201) });
        assert_eq!(r.pace, RulePace::Static { wire_bps: 100_000_000 });
        let k = r.dest.key();
        assert_eq!(k.prefixlen, 16 + 96 + 8);
        assert_eq!(k.port, 5201);
        assert_eq!(&k.addr[10..13], &[0xff, 0xff, 10]);
        assert_eq!(Dest::from_key(&k), r.dest);
        assert_eq!(r.dest.to_string(), "10.0.0.0/8:5201");

        let r = parse_rule("[2001:db8::1/32]:443=dynamic:1gbit").unwrap();
        assert_eq!(r.dest.prefix, 32);
        assert_eq!(r.dest.port, Some(443));
        assert_eq!(r.pace, RulePace::Dynamic { ceiling_bps: Some(1_000_000_000) });
        assert_eq!(Dest::from_key(&r.dest.key()), r.dest);
        let r = parse_rule("fd00::/8=dynamic").unwrap();
        assert_eq!((r.dest.port, r.dest.key().prefixlen), (None, 24));
        let r = parse_rule(" 127.0.0.1 = none ").unwrap();
        assert_eq!((r.dest.prefix, r.pace), (32, RulePace::None));
    }

    #[test]
    fn bad_rules_name_the_offending_text() {
        let cases = [
            ("10.0.0.0/8", "\"10.0.0.0/8\": expected DEST=PACE"),
            ("10.0.0.0/33=static:1mbit", "prefix length \"33\": expected 0-32"),
            ("10.0.0/8=static:1mbit", "address \"10.0.0\""),
            ("10.0.0.0/8:0=static:1mbit", "port \"0\""),
            ("10.0.0.0/8:http=static:1mbit", "port \"http\""),
            ("10.0.0.0/8=static:fast", "\"10.0.0.0/8=static:fast\""),
            ("10.0.0.0/8=turbo", "expected none, static:RATE"),
            ("10.0.0.0/8=dynamic=loop", "dynamic=loop is the traffic tool's"),
            ("[::1/129]:80=dynamic", "prefix length \"129\""),
        ];
        for (text, want) in cases {
            let e = parse_rule(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
        let e =
            PaceConfig::parse("none", &["10.0.0.9/8=static:1mbit".into(), "10.2.0.0/8=dynamic".into()], None)
                .unwrap_err()
                .to_string();
        assert!(
            e.contains("\"10.2.0.0/8=dynamic\": the same destination as rule \"10.0.0.9/8=static:1mbit\""),
            "{e}"
        );
        let e = PaceConfig::parse("dynamic=kernel", &[], None).unwrap_err().to_string();
        assert!(e.contains("dynamic=kernel"), "{e}");
    }

    #[test]
    fn defaults_and_rules_take_the_one_grammar() {
        use tcpaccel_core::pace_spec::{Takes, FRONT_END_CASES};
        for (text, takes) in FRONT_END_CASES {
            let rule = format!("10.0.0.0/8={text}");
            for r in [parse_pace(text).map(|_| ()), parse_rule(&rule).map(|_| ())] {
                match r {
                    Ok(()) => assert_eq!(*takes, Takes::All, "{text}"),
                    Err(e) => {
                        assert_ne!(*takes, Takes::All, "{text}: {e}");
                        assert!(e.to_string().contains(text.trim()), "{text}: {e}");
                    }
                }
            }
        }
    }

    #[test]
    fn rule_paces_print_the_grammar_back() {
        for text in ["none", "static:100Mbit/s", "static:123.456789Mbit/s", "dynamic", "dynamic:1Gbit/s"] {
            let p = parse_pace(text).unwrap();
            assert_eq!(p.to_string(), text);
            assert_eq!(RulePace::from_abi(p.abi()), p, "{text}");
        }
        let r: DstRule = "10.0.0.0/8=static:1mbit".parse().unwrap();
        assert_eq!(r.pace, RulePace::Static { wire_bps: 1_000_000 });
        // Parsed parts give the configuration the text gives.
        let rules = vec![r.clone()];
        let a = PaceConfig::new(PaceSpec::parse("dynamic:50mbit").unwrap(), rules, None).unwrap();
        let b = PaceConfig::parse("dynamic:50mbit", &["10.0.0.0/8=static:1mbit".into()], None).unwrap();
        assert_eq!(a, b);
        let e = PaceConfig::new(PaceSpec::parse("dynamic=loop").unwrap(), vec![], None).unwrap_err();
        assert!(e.to_string().contains("dynamic=loop is the traffic tool's"), "{e}");
    }

    #[test]
    fn tables_put_the_default_first_and_apply_the_ceiling() {
        let cfg = PaceConfig::parse(
            "static:500mbit",
            &["10.0.0.0/8=dynamic".into(), "10.0.0.0/8:80=static:50mbit".into(), "::/0=dynamic:2gbit".into()],
            Some(Rate::mbps(300)),
        )
        .unwrap();
        let (rules, dst) = cfg.tables();
        assert_eq!(
            rules,
            vec![
                RuleAbi { kind: RULE_STATIC, flags: 0, wire_bps: 300_000_000 },
                RuleAbi { kind: RULE_DYNAMIC, flags: 0, wire_bps: 300_000_000 },
                RuleAbi { kind: RULE_STATIC, flags: 0, wire_bps: 50_000_000 },
                RuleAbi { kind: RULE_DYNAMIC, flags: 0, wire_bps: 300_000_000 },
            ]
        );
        // Hold marks the dynamic rules only.
        let held = PaceConfig { hold: true, ..cfg.clone() }.tables().0;
        assert_eq!(held.iter().map(|r| r.flags).collect::<Vec<_>>(), vec![0, RULE_HOLD, 0, RULE_HOLD]);
        assert_eq!(dst.iter().map(|d| d.1).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(RulePace::from_abi(rules[1]).to_string(), "dynamic:300Mbit/s");
    }
}
