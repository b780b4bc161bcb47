//! Random loss models for the link model: none, Bernoulli (independent), and
//! the two-state Gilbert–Elliott model for bursty loss. Every model draws from
//! an explicitly seeded [`Rng`], so a loss pattern replays exactly.
//!
//! Gilbert–Elliott (Gilbert 1960, Elliott 1963; parameters as in Haßlinger and
//! Hohlfeld, "The Gilbert-Elliott Model for Packet Loss in Real Time Services
//! on the Internet", MMB 2008): a Markov chain with a Good and a Bad state.
//! Before each frame the chain moves Good→Bad with probability `p` and
//! Bad→Good with probability `r`; then the frame is lost with probability `k`
//! in Good and `h` in Bad.
//!
//! **Note on `h` and `k`:** here they are the *loss* probabilities per state,
//! as Linux netem's third and fourth `gemodel` arguments, whereas the paper
//! uses `h` and `k` for the probabilities of *no* loss. Defaults: `h = 1`
//! (every frame in Bad is lost), `k = 0` (no loss in Good): the simple Gilbert
//! model. The stationary loss rate is `(p·h + r·k) / (p + r)`.
//!
//! This module only decides "lost or not"; it does not know about frames,
//! queues or time.

use serde::{Deserialize, Serialize};

use crate::rng::Rng;
use crate::units::ParseError;

/// The accepted forms of a loss specification, for error messages and docs.
pub const LOSS_FORMS: &str = "none | 0 | PERCENT% (e.g. 0.1%) | bernoulli:P (e.g. bernoulli:0.001 or \
     bernoulli:0.1%) | ge:p=P,r=R[,h=H][,k=K] (Gilbert-Elliott; p = P(Good->Bad), r = P(Bad->Good), \
     h = loss probability in Bad (default 1), k = loss probability in Good (default 0); \
     probabilities as fractions or percentages)";

/// A loss model's parameters (what a config file or flag describes).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum LossSpec {
    /// No random loss.
    #[default]
    None,
    /// Each frame is lost independently with probability `p`.
    Bernoulli { p: f64 },
    /// Two-state bursty loss; see the module docs for the meaning of h and k.
    GilbertElliott { p: f64, r: f64, h: f64, k: f64 },
}

fn perr(value: &str, reason: impl Into<String>) -> ParseError {
    ParseError { what: "loss", value: value.to_string(), reason: reason.into(), forms: LOSS_FORMS }
}

/// Parses a probability: a fraction in [0, 1] or a percentage ending in `%`.
fn probability(whole: &str, s: &str) -> Result<f64, ParseError> {
    let t = s.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 0.01),
        None => (t, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| perr(whole, format!("{s:?} is not a probability")))?;
    let v = v * scale;
    if !v.is_finite() || !(0.0..=1.0).contains(&v) {
        return Err(perr(whole, format!("probability {s:?} is outside [0, 1] (or [0%, 100%])")));
    }
    Ok(v)
}

impl LossSpec {
    /// Parses the forms listed in [`LOSS_FORMS`]. Errors name the value and
    /// the accepted forms.
    pub fn parse(s: &str) -> Result<LossSpec, ParseError> {
        let t = s.trim();
        if t.is_empty() {
            return Err(perr(s, "empty"));
        }
        if t.eq_ignore_ascii_case("none") || t == "0" || t == "0%" {
            return Ok(LossSpec::None);
        }
        if let Some(rest) = t.strip_prefix("bernoulli:") {
            return Ok(LossSpec::bernoulli(probability(s, rest)?));
        }
        if let Some(rest) = t.strip_prefix("ge:").or_else(|| t.strip_prefix("gilbert-elliott:")) {
            let (mut p, mut r, mut h, mut k) = (None, None, 1.0, 0.0);
            for part in rest.split(',') {
                let Some((key, val)) = part.split_once('=') else {
                    return Err(perr(s, format!("{part:?} is not KEY=VALUE")));
                };
                let v = probability(s, val)?;
                match key.trim() {
                    "p" => p = Some(v),
                    "r" => r = Some(v),
                    "h" => h = v,
                    "k" => k = v,
                    other => return Err(perr(s, format!("unknown Gilbert-Elliott parameter {other:?}"))),
                }
            }
            let (Some(p), Some(r)) = (p, r) else {
                return Err(perr(s, "Gilbert-Elliott needs both p and r"));
            };
            if p + r == 0.0 {
                return Err(perr(s, "p and r cannot both be 0"));
            }
            return Ok(LossSpec::GilbertElliott { p, r, h, k });
        }
        if t.ends_with('%') {
            return Ok(LossSpec::bernoulli(probability(s, t)?));
        }
        Err(perr(s, "unrecognised form"))
    }

    fn bernoulli(p: f64) -> LossSpec {
        if p == 0.0 {
            LossSpec::None
        } else {
            LossSpec::Bernoulli { p }
        }
    }

    /// The long-run fraction of frames lost.
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossSpec::None => 0.0,
            LossSpec::Bernoulli { p } => p,
            LossSpec::GilbertElliott { p, r, h, k } => (p * h + r * k) / (p + r),
        }
    }
}

impl std::fmt::Display for LossSpec {
    /// Formats in a form [`LossSpec::parse`] accepts.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            LossSpec::None => write!(f, "none"),
            LossSpec::Bernoulli { p } => write!(f, "bernoulli:{p}"),
            LossSpec::GilbertElliott { p, r, h, k } => write!(f, "ge:p={p},r={r},h={h},k={k}"),
        }
    }
}

impl std::str::FromStr for LossSpec {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LossSpec::parse(s)
    }
}

/// A running loss model: the parameters, the chain state and its RNG.
#[derive(Debug, Clone)]
pub struct Loss {
    spec: LossSpec,
    bad: bool,
    rng: Rng,
}

impl Loss {
    /// A model that starts in the Good state and draws from `Rng::seeded(seed)`.
    pub fn new(spec: LossSpec, seed: u64) -> Loss {
        Loss { spec, bad: false, rng: Rng::seeded(seed) }
    }

    pub fn spec(&self) -> LossSpec {
        self.spec
    }

    /// True when the Gilbert–Elliott chain is in its Bad state.
    pub fn in_bad_state(&self) -> bool {
        self.bad
    }

    /// Decides the fate of the next frame: true means lost.
    pub fn lose(&mut self) -> bool {
        match self.spec {
            LossSpec::None => false,
            LossSpec::Bernoulli { p } => self.rng.chance(p),
            LossSpec::GilbertElliott { p, r, h, k } => {
                let flip = if self.bad { r } else { p };
                if self.rng.chance(flip) {
                    self.bad = !self.bad;
                }
                self.rng.chance(if self.bad { h } else { k })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_documented_forms() {
        assert_eq!(LossSpec::parse("none").unwrap(), LossSpec::None);
        assert_eq!(LossSpec::parse("0").unwrap(), LossSpec::None);
        assert_eq!(LossSpec::parse("0.1%").unwrap(), LossSpec::Bernoulli { p: 0.001 });
        assert_eq!(LossSpec::parse("bernoulli:0.001").unwrap(), LossSpec::Bernoulli { p: 0.001 });
        assert_eq!(LossSpec::parse("bernoulli:1%").unwrap(), LossSpec::Bernoulli { p: 0.01 });
        assert_eq!(
            LossSpec::parse("ge:p=0.01,r=0.3,h=0.5,k=0").unwrap(),
            LossSpec::GilbertElliott { p: 0.01, r: 0.3, h: 0.5, k: 0.0 }
        );
        assert_eq!(
            LossSpec::parse("ge:p=1%,r=30%").unwrap(),
            LossSpec::GilbertElliott { p: 0.01, r: 0.3, h: 1.0, k: 0.0 }
        );
    }

    #[test]
    fn display_round_trips() {
        for s in ["none", "bernoulli:0.001", "ge:p=0.01,r=0.3,h=0.5,k=0"] {
            let spec = LossSpec::parse(s).unwrap();
            assert_eq!(LossSpec::parse(&spec.to_string()).unwrap(), spec);
        }
    }

    #[test]
    fn refuses_bad_forms_naming_value_and_forms() {
        for bad in [
            "",
            "lots",
            "0.1",
            "150%",
            "bernoulli:2",
            "bernoulli:x",
            "ge:p=0.1",
            "ge:p=0.1,r=0.2,z=1",
            "ge:p=0,r=0",
            "ge:p",
            "-1%",
        ] {
            let e = LossSpec::parse(bad).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains(&format!("{bad:?}")), "{msg}");
            assert!(msg.contains("accepted forms") && msg.contains("bernoulli:"), "{msg}");
        }
    }

    #[test]
    fn none_never_loses_and_certain_always_does() {
        let mut l = Loss::new(LossSpec::None, 1);
        assert!((0..1000).all(|_| !l.lose()));
        let mut l = Loss::new(LossSpec::Bernoulli { p: 1.0 }, 1);
        assert!((0..1000).all(|_| l.lose()));
    }

    #[test]
    fn same_seed_same_pattern() {
        let spec = LossSpec::parse("ge:p=0.05,r=0.2,h=0.7,k=0.01").unwrap();
        let run = |seed| {
            let mut l = Loss::new(spec, seed);
            (0..500).map(|_| l.lose()).collect::<Vec<_>>()
        };
        assert_eq!(run(9), run(9));
        assert_ne!(run(9), run(10));
    }

    #[test]
    fn long_run_rates_match_the_formulas() {
        let n = 400_000;
        let mut b = Loss::new(LossSpec::Bernoulli { p: 0.02 }, 3);
        let lost = (0..n).filter(|_| b.lose()).count() as f64 / n as f64;
        assert!((lost - 0.02).abs() < 0.002, "{lost}");

        let spec = LossSpec::GilbertElliott { p: 0.01, r: 0.3, h: 0.5, k: 0.0 };
        let mut g = Loss::new(spec, 4);
        let mut lost = 0usize;
        let mut bursts = 0usize;
        let mut prev = false;
        for _ in 0..n {
            let x = g.lose();
            lost += x as usize;
            bursts += (x && !prev) as usize;
            prev = x;
        }
        let rate = lost as f64 / n as f64;
        let expect = spec.mean_loss();
        assert!((expect - 0.5 * 0.01 / 0.31).abs() < 1e-12);
        assert!((rate - expect).abs() < 0.15 * expect, "{rate} vs {expect}");
        // Bursty: mean run of consecutive losses longer than Bernoulli's 1/(1-p).
        let mean_burst = lost as f64 / bursts as f64;
        assert!(mean_burst > 1.2, "{mean_burst}");
    }
}
