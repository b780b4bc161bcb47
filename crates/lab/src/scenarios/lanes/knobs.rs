//! The lanes scenarios' parameters with their scaling rules, and the typed
//! reading of them at a scale factor D (`--set scale=D`, issue 25).
//!
//! Every parameter is declared as a [`Param`], which cannot be built
//! without a [`Rule`]; [`Knobs`] reads a value through the getter of its
//! rule only (a time through [`Knobs::time`], which multiplies by D), so a
//! time cannot be read unscaled by mistake nor a count scaled. Constants of
//! the experiments that are times (drain, fill, timeouts) go through
//! [`Knobs::wall`].

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tcpaccel_core::scale::{Dilation, Quantity, Rule};
use tcpaccel_core::units::{Bytes, Rate};

use crate::runner::scenario::{ParamSpec, Params};

/// The key of D.
pub(super) const SCALE_KEY: &str = "scale";

/// A declared parameter: its spec (key, default, doc) and its scaling rule.
#[derive(Debug, Clone)]
pub(super) struct Param {
    pub(super) spec: ParamSpec,
    pub(super) rule: Rule,
}

impl Param {
    pub(super) fn new(key: &'static str, default: impl Into<String>, rule: Rule, doc: &'static str) -> Param {
        Param { spec: ParamSpec::new(key, default, doc), rule }
    }
}

/// The specs the runner validates `--set` against.
pub(super) fn specs(declared: &[Param]) -> Vec<ParamSpec> {
    declared.iter().map(|p| p.spec.clone()).collect()
}

/// Replaces the default and doc of `key` (a scenario's own), keeping its rule.
pub(super) fn redeclare(declared: &mut [Param], key: &'static str, default: &str, doc: &'static str) {
    for p in declared.iter_mut().filter(|p| p.spec.key == key) {
        p.spec = ParamSpec::new(key, default, doc);
    }
}

/// Parses D from the resolved parameters: the one reader of `scale` (the
/// runner gets D through [`super::scaled`] into its `RunConfig`).
pub(super) fn dilation(p: &Params) -> Result<Dilation> {
    let v = p.str(SCALE_KEY)?;
    let d: u32 =
        v.trim().parse().map_err(|_| anyhow::anyhow!("parameter {SCALE_KEY}={v:?} is not a whole number"))?;
    Dilation::new(d).map_err(|e| anyhow::anyhow!("parameter {SCALE_KEY}: {e}"))
}

/// A scenario's estimate for the progress bar: `per_run` (experiment
/// units) × D.
pub(super) fn estimate_scaled(d: Dilation, per_run: Duration) -> Duration {
    per_run * d.get()
}

/// The lanes scenarios' `Scenario::dilation`:
/// D from their `scale` knob.
pub(super) fn scaled(p: &Params) -> Result<Option<crate::runner::records::Scaled>> {
    Ok(Some(crate::runner::records::Scaled { param: SCALE_KEY.into(), d: dilation(p)? }))
}

/// Resolved parameters read at a scale factor.
#[derive(Debug, Clone)]
pub(super) struct Knobs {
    params: Params,
    d: Dilation,
    rules: BTreeMap<&'static str, Rule>,
}

impl Knobs {
    /// `params` as resolved by the runner, `declared` the scenario's
    /// declarations (a declared key without a value is refused here).
    /// `d`: D as the runner settled it ([`dilation`], once per run).
    pub(super) fn new(params: &Params, declared: &[Param], d: Dilation) -> Result<Knobs> {
        let rules = declared.iter().map(|p| (p.spec.key, p.rule)).collect();
        let k = Knobs { params: params.clone(), d, rules };
        for p in declared {
            k.params.str(p.spec.key)?;
        }
        Ok(k)
    }

    pub(super) fn d(&self) -> Dilation {
        self.d
    }

    fn rule(&self, key: &str, want: &[Rule]) -> Result<Rule> {
        let r = *self
            .rules
            .get(key)
            .with_context(|| format!("parameter {key:?} has no declared scaling rule"))?;
        if !want.contains(&r) {
            bail!("parameter {key:?} is declared as {}, read as {}", r.name(), want[0].name());
        }
        Ok(r)
    }

    /// A constant time of the experiment (in experiment units) in wall time.
    pub(super) fn wall(&self, t: Duration) -> Duration {
        t * self.d.get()
    }

    /// A time parameter in wall time (× D).
    pub(super) fn time(&self, key: &str) -> Result<Duration> {
        self.rule(key, &[Rule::Time])?;
        self.scaled(key, Quantity::Time(self.params.duration(key)?)).map(|q| match q {
            Quantity::Time(t) => t,
            _ => unreachable!("a time rule yields a time"),
        })
    }

    /// A rate parameter in wall units (÷ D).
    pub(super) fn rate(&self, key: &str) -> Result<Rate> {
        self.rule(key, &[Rule::Rate])?;
        self.scaled(key, Quantity::Rate(self.params.rate(key)?)).map(|q| match q {
            Quantity::Rate(r) => r,
            _ => unreachable!("a rate rule yields a rate"),
        })
    }

    /// A coefficient per unit of time (÷ D).
    pub(super) fn per_time(&self, key: &str) -> Result<f64> {
        self.rule(key, &[Rule::PerTime])?;
        self.scaled(key, Quantity::Number(self.params.f64(key)?)).map(|q| match q {
            Quantity::Number(x) => x,
            _ => unreachable!("a per-time rule yields a number"),
        })
    }

    pub(super) fn bytes(&self, key: &str) -> Result<Bytes> {
        self.rule(key, &[Rule::Bytes])?;
        self.params.bytes(key)
    }

    pub(super) fn count(&self, key: &str) -> Result<u64> {
        self.rule(key, &[Rule::Count])?;
        self.params.u64(key)
    }

    /// A dimensionless number or a load (unchanged by D).
    pub(super) fn number(&self, key: &str) -> Result<f64> {
        self.rule(key, &[Rule::Unitless, Rule::Load])?;
        self.params.f64(key)
    }

    /// A choice or name.
    pub(super) fn text(&self, key: &str) -> Result<&str> {
        self.rule(key, &[Rule::Choice])?;
        self.params.str(key)
    }

    /// A comma-separated list of choices.
    pub(super) fn choice(&self, key: &str, valid: &[&str]) -> Result<Vec<String>> {
        self.rule(key, &[Rule::Choice])?;
        self.params.choice(key, valid)
    }

    /// A comma-separated list of numbers that D leaves alone (counts,
    /// loads, dimensionless values), at least one.
    pub(super) fn numbers<T: std::str::FromStr>(&self, key: &str) -> Result<Vec<T>> {
        self.rule(key, &[Rule::Count, Rule::Unitless, Rule::Load])?;
        let items = self.params.list(key)?;
        let mut out = Vec::new();
        for i in &items {
            out.push(i.parse::<T>().map_err(|_| anyhow::anyhow!("{key}: {i:?} is not a number"))?);
        }
        if out.is_empty() {
            bail!("{key}: give at least one value");
        }
        Ok(out)
    }

    /// A comma-separated list of coefficients per unit of time, each ÷ D.
    pub(super) fn per_time_list(&self, key: &str) -> Result<Vec<f64>> {
        self.rule(key, &[Rule::PerTime])?;
        let mut out = Vec::new();
        for i in self.params.list(key)? {
            let x: f64 = i.parse().map_err(|_| anyhow::anyhow!("{key}: {i:?} is not a number"))?;
            match Quantity::Number(x).dilate(Rule::PerTime, self.d)? {
                Quantity::Number(y) => out.push(y),
                _ => unreachable!("a per-time rule yields a number"),
            }
        }
        if out.is_empty() {
            bail!("{key}: give at least one value");
        }
        Ok(out)
    }

    fn scaled(&self, key: &str, q: Quantity) -> Result<Quantity> {
        let r = self.rule(key, &[Rule::Time, Rule::Rate, Rule::PerTime])?;
        q.dilate(r, self.d).with_context(|| format!("scaling parameter {key} by D={}", self.d))
    }

    #[cfg(test)]
    /// The value of `key` as declared (unscaled), typed by its rule; lists
    /// stay text.
    pub(super) fn declared(&self, key: &str) -> Result<Quantity> {
        let r = *self
            .rules
            .get(key)
            .with_context(|| format!("parameter {key:?} has no declared scaling rule"))?;
        let list = self.params.str(key)?.contains(',');
        Ok(match r {
            Rule::Time => Quantity::Time(self.params.duration(key)?),
            Rule::Rate => Quantity::Rate(self.params.rate(key)?),
            Rule::Bytes => Quantity::Bytes(self.params.bytes(key)?),
            Rule::PerTime if !list => Quantity::Number(self.params.f64(key)?),
            Rule::Count | Rule::Factor if !list => Quantity::Count(self.params.u64(key)?),
            Rule::Unitless | Rule::Load if !list => Quantity::Number(self.params.f64(key)?),
            _ => Quantity::Text(self.params.str(key)?.to_string()),
        })
    }

    #[cfg(test)]
    /// The value of `key` in the dilated run, typed by its rule.
    pub(super) fn dilated(&self, key: &str) -> Result<Quantity> {
        let r = self.rules[key];
        match self.declared(key)? {
            Quantity::Text(_) if r == Rule::PerTime => {
                let v: Vec<String> = self.per_time_list(key)?.iter().map(|x| x.to_string()).collect();
                Ok(Quantity::Text(v.join(",")))
            }
            q => q.dilate(r, self.d).with_context(|| format!("scaling parameter {key}")),
        }
    }

    #[cfg(test)]
    /// Every declared key.
    pub(super) fn keys(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.rules.keys().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl() -> Vec<Param> {
        vec![
            Param::new(SCALE_KEY, "1", Rule::Factor, "D"),
            Param::new("delay", "25us", Rule::Time, "a delay"),
            Param::new("rate", "1gbit", Rule::Rate, "a rate"),
            Param::new("hosts", "16", Rule::Count, "hosts"),
        ]
    }

    fn knobs(d: &str) -> Knobs {
        let mut p: BTreeMap<String, String> =
            decl().iter().map(|p| (p.spec.key.to_string(), p.spec.default.clone())).collect();
        p.insert(SCALE_KEY.into(), d.into());
        let p = Params(p);
        Knobs::new(&p, &decl(), dilation(&p).unwrap()).unwrap()
    }

    #[test]
    fn a_value_is_read_only_through_the_getter_of_its_rule() {
        let k = knobs("4");
        assert_eq!(k.time("delay").unwrap(), Duration::from_micros(100));
        assert_eq!(k.rate("rate").unwrap(), Rate::mbps(250));
        assert_eq!(k.count("hosts").unwrap(), 16);
        let e = k.count("delay").unwrap_err().to_string();
        assert!(e.contains("declared as time ×D"), "{e}");
        assert!(k.time("rate").is_err() && k.rate("hosts").is_err());
        assert!(k.time("undeclared").unwrap_err().to_string().contains("no declared scaling rule"));
        assert_eq!(k.wall(Duration::from_secs(4)), Duration::from_secs(16));
    }

    #[test]
    fn scale_zero_or_text_is_refused() {
        let mut p: BTreeMap<String, String> =
            decl().iter().map(|p| (p.spec.key.to_string(), p.spec.default.clone())).collect();
        p.insert(SCALE_KEY.into(), "0".into());
        assert!(dilation(&Params(p.clone())).unwrap_err().to_string().contains("scale"));
        p.insert(SCALE_KEY.into(), "x".into());
        let e = dilation(&Params(p)).unwrap_err().to_string();
        assert!(e.contains("scale=\"x\" is not a whole number"), "{e}");
    }
}
