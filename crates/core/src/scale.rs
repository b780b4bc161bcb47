//! Time dilation for scale-model experiments: a scale factor D and the rule
//! by which each parameter of a scenario follows it.
//!
//! A network divided by D in every rate and multiplied by D in every time
//! constant, with bytes unchanged, is the same experiment in packets,
//! windows and round trips, and costs 1/D of the CPU per second of wall
//! time (time-dilated emulation, as DieCast; issue 25). Times measured in it
//! are reported also in experiment units, divided by D.
//!
//! What it is: the factor ([`Dilation`]), the rules ([`Rule`]), typed
//! quantities ([`Quantity`]) and [`Quantity::dilate`], which applies a rule
//! exactly, plus a check that a scenario's declared keys and its rules are
//! one set ([`check_rules`]). What it is not: it parses nothing
//! (quantities arrive typed from `units`) and knows no scenario.

use std::time::Duration;

use crate::units::{Bytes, Rate};

/// The scale factor D ≥ 1: rates ÷ D, times × D. In records a plain
/// number; zero is refused when read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "u32", into = "u32")]
pub struct Dilation(u32);

impl TryFrom<u32> for Dilation {
    type Error = ScaleError;
    fn try_from(d: u32) -> Result<Dilation, ScaleError> {
        Dilation::new(d)
    }
}

impl From<Dilation> for u32 {
    fn from(d: Dilation) -> u32 {
        d.0
    }
}

impl Dilation {
    /// No dilation: the experiment in its own units.
    pub const ONE: Dilation = Dilation(1);

    /// D; zero is refused (it would make every rate infinite).
    pub fn new(d: u32) -> Result<Dilation, ScaleError> {
        if d == 0 {
            return Err(ScaleError::Zero);
        }
        Ok(Dilation(d))
    }

    pub fn get(self) -> u32 {
        self.0
    }

    /// A wall-clock duration of the dilated run in experiment units (÷ D).
    pub fn to_experiment(self, wall: Duration) -> Duration {
        wall / self.0
    }

    /// Milliseconds (or any time as a plain number) of the dilated run in
    /// experiment units.
    pub fn ms_to_experiment(self, wall_ms: f64) -> f64 {
        wall_ms / f64::from(self.0)
    }

    /// A rate measured in the dilated run in experiment units (× D).
    pub fn rate_to_experiment(self, wall_mbps: f64) -> f64 {
        wall_mbps * f64::from(self.0)
    }
}

impl Default for Dilation {
    fn default() -> Self {
        Dilation::ONE
    }
}

impl std::fmt::Display for Dilation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// How a parameter follows D. Every parameter of a dilated scenario
/// declares one; there is no default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// A time constant (delay, deadline, interval, duration, timeout): × D.
    Time,
    /// A rate (link rate): ÷ D.
    Rate,
    /// A coefficient per unit of time (e.g. γ of [Lanes] eq. 5.7, which
    /// weighs `t − t_deadline` counted in ms, with δ = 1): ÷ D, so that the
    /// term it weighs keeps its value in experiment units.
    PerTime,
    /// Bytes (flow sizes, buffers, thresholds): unchanged.
    Bytes,
    /// A count (hosts, fabrics, flows, repeats): unchanged.
    Count,
    /// A dimensionless number (a weight of two terms that both scale alike,
    /// e.g. α of eq. 5.7 with ν counted in a dilated unit): unchanged.
    Unitless,
    /// An offered load, a fraction of a link: unchanged; the arrival rate
    /// follows it because the link rate is divided by D.
    Load,
    /// A choice or name (variants, congestion control, addresses): unchanged.
    Choice,
    /// D itself.
    Factor,
}

impl Rule {
    pub fn name(self) -> &'static str {
        match self {
            Rule::Time => "time ×D",
            Rule::Rate => "rate ÷D",
            Rule::PerTime => "per time ÷D",
            Rule::Bytes => "bytes",
            Rule::Count => "count",
            Rule::Unitless => "unitless",
            Rule::Load => "load",
            Rule::Choice => "choice",
            Rule::Factor => "scale factor",
        }
    }

    /// Whether D changes a value under this rule.
    pub fn scales(self) -> bool {
        matches!(self, Rule::Time | Rule::Rate | Rule::PerTime)
    }
}

/// A typed parameter value.
#[derive(Debug, Clone, PartialEq)]
pub enum Quantity {
    Time(Duration),
    Rate(Rate),
    Bytes(Bytes),
    Count(u64),
    Number(f64),
    Text(String),
}

impl Quantity {
    fn kind(&self) -> &'static str {
        match self {
            Quantity::Time(_) => "a time",
            Quantity::Rate(_) => "a rate",
            Quantity::Bytes(_) => "a byte count",
            Quantity::Count(_) => "a count",
            Quantity::Number(_) => "a number",
            Quantity::Text(_) => "text",
        }
    }

    /// This value in the dilated run under `rule`. A value whose type the
    /// rule does not fit (a rate declared as a time) is an error naming both.
    pub fn dilate(&self, rule: Rule, d: Dilation) -> Result<Quantity, ScaleError> {
        let k = d.0;
        let mismatch = || ScaleError::Mismatch { rule: rule.name(), kind: self.kind() };
        Ok(match (rule, self) {
            (Rule::Time, Quantity::Time(t)) => {
                Quantity::Time(t.checked_mul(k).ok_or(ScaleError::Overflow { what: "time" })?)
            }
            (Rule::Rate, Quantity::Rate(r)) => {
                // Exact when D divides the rate; otherwise rounded to the
                // nearest bit/s (a rate below D bit/s would become zero).
                let q = (r.0 + u64::from(k) / 2) / u64::from(k);
                if q == 0 {
                    return Err(ScaleError::Overflow { what: "rate (below D bit/s)" });
                }
                Quantity::Rate(Rate(q))
            }
            (Rule::PerTime, Quantity::Number(x)) => Quantity::Number(x / f64::from(k)),
            (Rule::Bytes, Quantity::Bytes(_))
            | (Rule::Count, Quantity::Count(_))
            | (Rule::Unitless, Quantity::Number(_))
            | (Rule::Load, Quantity::Number(_))
            | (Rule::Choice, _)
            | (Rule::Factor, Quantity::Count(_)) => self.clone(),
            // Lists of counts, numbers or loads stay text: none of them scale.
            (Rule::Count | Rule::Unitless | Rule::Load, Quantity::Text(_)) => self.clone(),
            _ => return Err(mismatch()),
        })
    }
}

/// Checks that `declared` (a scenario's parameter keys) and `rules` (its
/// scaling rules) are one set: every parameter has exactly one rule, and
/// no rule names an undeclared key.
pub fn check_rules<'a>(
    declared: impl IntoIterator<Item = &'a str>,
    rules: &[(&'a str, Rule)],
) -> Result<(), ScaleError> {
    let declared: Vec<&str> = declared.into_iter().collect();
    for k in &declared {
        match rules.iter().filter(|(r, _)| r == k).count() {
            0 => return Err(ScaleError::NoRule { key: k.to_string() }),
            1 => {}
            _ => return Err(ScaleError::TwoRules { key: k.to_string() }),
        }
    }
    if let Some((k, _)) = rules.iter().find(|(r, _)| !declared.contains(r)) {
        return Err(ScaleError::Undeclared { key: k.to_string() });
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScaleError {
    #[error("the scale factor D must be at least 1, got 0")]
    Zero,
    #[error("a {rule} rule does not fit {kind}")]
    Mismatch { rule: &'static str, kind: &'static str },
    #[error("{what} out of range after scaling")]
    Overflow { what: &'static str },
    #[error("parameter {key:?} declares no scaling rule")]
    NoRule { key: String },
    #[error("parameter {key:?} declares two scaling rules")]
    TwoRules { key: String },
    #[error("a scaling rule names {key:?}, which is not a parameter")]
    Undeclared { key: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Quantity {
        Quantity::Time(Duration::from_millis(v))
    }
    fn us(v: u64) -> Quantity {
        Quantity::Time(Duration::from_micros(v))
    }

    #[test]
    fn every_rule_scales_exactly() {
        let d4 = Dilation::new(4).unwrap();
        let table: Vec<(Rule, Quantity, Quantity)> = vec![
            // The run B: 300 ms → 1200 ms, 10 µs → 40 µs, 50 → 200 ms, 5 → 20 s.
            (Rule::Time, ms(300), ms(1200)),
            (Rule::Time, us(10), us(40)),
            (Rule::Time, ms(50), ms(200)),
            (Rule::Time, ms(5000), ms(20_000)),
            (Rule::Time, us(25), us(100)),
            (Rule::Rate, Quantity::Rate(Rate::mbps(100)), Quantity::Rate(Rate::mbps(25))),
            (Rule::Rate, Quantity::Rate(Rate::gbps(1)), Quantity::Rate(Rate::mbps(250))),
            (Rule::PerTime, Quantity::Number(1.0), Quantity::Number(0.25)),
            (Rule::Bytes, Quantity::Bytes(Bytes(128 * 1024)), Quantity::Bytes(Bytes(128 * 1024))),
            (Rule::Count, Quantity::Count(16), Quantity::Count(16)),
            (Rule::Unitless, Quantity::Number(2.5), Quantity::Number(2.5)),
            (Rule::Load, Quantity::Number(0.5), Quantity::Number(0.5)),
            (Rule::Choice, Quantity::Text("reno".into()), Quantity::Text("reno".into())),
            (Rule::Factor, Quantity::Count(4), Quantity::Count(4)),
        ];
        for (rule, from, to) in table {
            assert_eq!(from.dilate(rule, d4).unwrap(), to, "{rule:?} of {from:?}");
            assert_eq!(from.dilate(rule, Dilation::ONE).unwrap(), from, "D = 1 changes nothing");
            assert_eq!(rule.scales(), from != to, "{rule:?}");
        }
    }

    #[test]
    fn a_rate_that_d_does_not_divide_rounds_to_the_nearest_bit() {
        let d3 = Dilation::new(3).unwrap();
        assert_eq!(Quantity::Rate(Rate(100)).dilate(Rule::Rate, d3).unwrap(), Quantity::Rate(Rate(33)));
        assert_eq!(Quantity::Rate(Rate(101)).dilate(Rule::Rate, d3).unwrap(), Quantity::Rate(Rate(34)));
        assert!(Quantity::Rate(Rate(1)).dilate(Rule::Rate, d3).is_err());
    }

    #[test]
    fn a_rule_that_does_not_fit_the_value_is_refused() {
        let d = Dilation::new(2).unwrap();
        let e = Quantity::Rate(Rate::mbps(1)).dilate(Rule::Time, d).unwrap_err();
        assert_eq!(e, ScaleError::Mismatch { rule: "time ×D", kind: "a rate" });
        assert!(ms(1).dilate(Rule::Bytes, d).is_err());
        assert!(Quantity::Number(1.0).dilate(Rule::Rate, d).is_err());
        assert!(Dilation::new(0).is_err());
    }

    #[test]
    fn declared_keys_and_rules_must_be_one_set() {
        let rules = [("rate", Rule::Rate), ("delay", Rule::Time)];
        assert_eq!(check_rules(["rate", "delay"], &rules), Ok(()));
        assert_eq!(
            check_rules(["rate", "delay", "buffer"], &rules),
            Err(ScaleError::NoRule { key: "buffer".into() })
        );
        assert_eq!(check_rules(["rate"], &rules), Err(ScaleError::Undeclared { key: "delay".into() }));
        let twice = [("rate", Rule::Rate), ("rate", Rule::Count)];
        assert_eq!(check_rules(["rate"], &twice), Err(ScaleError::TwoRules { key: "rate".into() }));
    }

    #[test]
    fn experiment_units_divide_times_and_multiply_rates() {
        let d = Dilation::new(4).unwrap();
        assert_eq!(d.to_experiment(Duration::from_millis(80)), Duration::from_millis(20));
        assert_eq!(d.ms_to_experiment(34.4), 8.6);
        assert_eq!(d.rate_to_experiment(25.0), 100.0);
    }
}
