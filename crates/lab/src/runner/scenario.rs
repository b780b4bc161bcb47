//! The scenario model and the runner that executes it.
//!
//! A [`Scenario`] declares its parameters (with defaults and `--quick`
//! overrides), variants, metrics and published reference figures, and knows
//! how to [`prepare`](Scenario::prepare) a testbed. The runner validates
//! `--set key=value` against the declared keys, then runs the variants
//! interleaved (A B C A B C …) so machine drift hits all alike, writing every
//! record as it goes. It renders nothing: its caller (the CLI) renders the
//! report from the records afterwards ([`crate::report::write_report`]).

use crate::runner::progress::Progress;
use crate::runner::records::*;
use crate::runner::shard::{self, Shard};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tcpaccel_core::scale::Dilation;
use tcpaccel_core::units::{parse_duration, Bytes, Rate};

/// The process-wide stop flag: set on SIGINT/SIGTERM; transfers end early
/// (the traffic tool's `SendConfig::stop`) and the runner stops between runs.
pub fn stop_flag() -> Arc<AtomicBool> {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    FLAG.get_or_init(|| Arc::new(AtomicBool::new(false))).clone()
}

pub fn interrupted() -> bool {
    stop_flag().load(Ordering::Relaxed)
}

pub fn interrupt() {
    stop_flag().store(true, Ordering::Relaxed);
}

/// A declared parameter; serialized, what `lab list --json` prints of it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ParamSpec {
    pub key: &'static str,
    pub default: String,
    pub doc: &'static str,
}

impl ParamSpec {
    pub fn new(key: &'static str, default: impl Into<String>, doc: &'static str) -> Self {
        ParamSpec { key, default: default.into(), doc }
    }
}

/// Validated parameter values with typed getters whose errors name the key and value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Params(pub BTreeMap<String, String>);

impl Params {
    pub fn str(&self, key: &str) -> Result<&str> {
        self.0
            .get(key)
            .map(|s| s.as_str())
            .with_context(|| format!("scenario parameter {key:?} is not declared"))
    }
    pub fn rate(&self, key: &str) -> Result<Rate> {
        let v = self.str(key)?;
        Rate::parse(v).with_context(|| format!("parameter {key}"))
    }
    pub fn bytes(&self, key: &str) -> Result<Bytes> {
        let v = self.str(key)?;
        Bytes::parse(v).with_context(|| format!("parameter {key}"))
    }
    pub fn duration(&self, key: &str) -> Result<Duration> {
        let v = self.str(key)?;
        parse_duration(v).with_context(|| format!("parameter {key}"))
    }
    pub fn u64(&self, key: &str) -> Result<u64> {
        let v = self.str(key)?;
        v.trim().parse().with_context(|| format!("parameter {key}={v:?} is not a whole number"))
    }
    pub fn f64(&self, key: &str) -> Result<f64> {
        let v = self.str(key)?;
        v.trim().parse().with_context(|| format!("parameter {key}={v:?} is not a number"))
    }
    pub fn bool(&self, key: &str) -> Result<bool> {
        match self.str(key)?.trim() {
            "1" | "true" | "yes" | "on" => Ok(true),
            "0" | "false" | "no" | "off" => Ok(false),
            v => bail!("parameter {key}={v:?} is not a boolean (true/false)"),
        }
    }
    /// A comma-separated list.
    pub fn list(&self, key: &str) -> Result<Vec<String>> {
        Ok(self.str(key)?.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect())
    }

    /// A comma-separated choice among `valid`; an unknown entry is refused listing the valid ones.
    pub fn choice(&self, key: &str, valid: &[&str]) -> Result<Vec<String>> {
        let v = self.list(key)?;
        if let Some(bad) = v.iter().find(|x| !valid.contains(&x.as_str())) {
            bail!("{key}: unknown entry {bad:?}; valid: {}", valid.join(", "));
        }
        Ok(v)
    }
}

/// A reproducible experiment.
pub trait Scenario: Send + Sync {
    fn name(&self) -> &'static str;
    fn title(&self) -> &'static str;
    fn description(&self) -> &'static str;
    /// The declared parameters: for a scenario with a typed struct, its
    /// [`ScenarioParams::specs`](crate::runner::typed::ScenarioParams::specs).
    fn params(&self) -> Vec<ParamSpec>;
    /// Reads resolved parameters into the scenario's typed struct (and
    /// checks its choices), so [`resolve_params`] refuses a bad value before
    /// anything runs, naming the key and the accepted form. Scenarios that
    /// still read the string map keep this default.
    fn check_params(&self, _params: &Params) -> Result<()> {
        Ok(())
    }
    /// Values that replace defaults under `--quick` (short runs for tests and CI).
    fn quick(&self) -> Vec<(&'static str, &'static str)> {
        Vec::new()
    }
    /// Defaults that the values resolved so far imply (a mode's operating
    /// point, e.g. `workload=rounds` of the lanes scenarios): they replace
    /// the declared defaults of keys no `--set` gave.
    fn implied(&self, _resolved: &BTreeMap<String, String>) -> Vec<(&'static str, &'static str)> {
        Vec::new()
    }
    fn variants(&self, params: &Params) -> Result<Vec<String>>;
    fn metrics(&self) -> Vec<MetricSpec>;
    fn published(&self) -> Vec<Published> {
        Vec::new()
    }
    /// What the scenario claims: the report judges a run against these
    /// (the one home of a claim's figure, goal and rule).
    fn claims(&self) -> &'static [crate::runner::claims::Claim] {
        &[]
    }
    /// The human names of the metric and series keys this scenario records
    /// (key before any `@point`, name), as its tables and plots title them;
    /// the one home of a name is the scenario (or shared testbed) that
    /// records the key.
    fn names(&self) -> Vec<(&'static str, &'static str)> {
        Vec::new()
    }
    /// What a bare point of a metric (`short_p99_ms@0.5`) counts, as the
    /// tables name it ("load 0.5"); `None`: "at 0.5".
    fn point_label(&self) -> Option<&'static str> {
        None
    }
    /// The parameters the scenario's published figures were measured at,
    /// where the lab can run at another scale: a run with other values
    /// shows the paper's absolute figures in its tables but not in its
    /// plots (they would set the axis); its scale-free claims still apply.
    fn paper_scale(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }
    fn notes(&self, _params: &Params) -> Result<Vec<String>> {
        Ok(Vec::new())
    }
    fn default_repeats(&self) -> u32 {
        3
    }
    /// The run's time dilation, read from its parameters once when the run
    /// starts (into [`RunConfig::dilation`]): `None` for a scenario that is
    /// not time-dilated.
    fn dilation(&self, _params: &Params) -> Result<Option<Scaled>> {
        Ok(None)
    }
    /// Rough wall time of one run of one variant at D = `d`, for the
    /// progress bar (and `lab list`); an unreadable parameter is an error.
    fn estimate(&self, params: &Params, d: Dilation) -> Result<Duration>;
    /// Builds the testbed (`config`: what the runner settled, D among it);
    /// dropping the result tears it down.
    fn prepare(&self, params: &Params, config: &RunConfig, dir: &Path) -> Result<Box<dyn Testbed>>;
}

/// A prepared testbed that runs one variant once.
pub trait Testbed {
    fn run_one(&mut self, ctx: &mut RunCtx<'_>) -> Result<()>;
    /// Network namespaces whose shaped ports' qdisc counters the fidelity
    /// monitor records for each run (none by default).
    fn watched_namespaces(&self) -> Vec<String> {
        Vec::new()
    }
}

/// p99 of the flows' start lateness in experiment units (wall ÷ D); `None`
/// for a run that started no flows through the engine.
fn flow_start_p99(late_s: &[f64], d: Dilation) -> Option<std::time::Duration> {
    let p99 = tcpaccel_core::stats::percentile(late_s, 99.0)?;
    Some(d.to_experiment(std::time::Duration::from_secs_f64(p99.max(0.0))))
}

/// What the runner settles once, before the first run, from the command
/// line and the scenario's parameters: every run reads it from here.
#[derive(Debug, Clone, PartialEq)]
pub struct RunConfig {
    /// D (1 when not dilated) and, when dilated, the parameter that set it.
    pub dilation: Dilation,
    pub scaled: Option<Scaled>,
    /// The scenario seed; each repeat's is [`RunConfig::seed_of`].
    pub seed: u64,
    pub repeats: u32,
    pub quick: bool,
}

impl RunConfig {
    /// Resolves repeats (`--repeat`, else 1 for `--quick`, else the
    /// scenario's default) and D (the scenario's [`Scenario::dilation`]).
    pub fn new(
        s: &dyn Scenario,
        params: &Params,
        quick: bool,
        repeats: Option<u32>,
        seed: u64,
    ) -> Result<RunConfig> {
        let repeats = repeats.unwrap_or(if quick { 1 } else { s.default_repeats() });
        if repeats == 0 {
            bail!("--repeat must be at least 1");
        }
        let scaled = s.dilation(params)?;
        let dilation = scaled.as_ref().map_or(Dilation::ONE, |x| x.d);
        Ok(RunConfig { dilation, scaled, seed, repeats, quick })
    }

    /// D = 1, seed 1, one repeat: for tests that prepare a testbed alone.
    #[cfg(test)]
    pub(crate) fn unscaled() -> RunConfig {
        RunConfig { dilation: Dilation::ONE, scaled: None, seed: 1, repeats: 1, quick: true }
    }

    /// The seed of `repeat`: the scenario seed mixed with the repeat (the
    /// same for every variant of a repeat).
    pub fn seed_of(&self, repeat: u32) -> u64 {
        self.seed ^ (repeat as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

/// What the sender's TCP counted for one flow ([`FlowRecord::lane_bytes`],
/// [`FlowRecord::retrans_bytes`]), for [`RunCtx::flow_counted`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlowCounters {
    pub lane_bytes: BTreeMap<String, u64>,
    pub retrans_bytes: Option<u64>,
    pub capture: Option<CapturedTimes>,
}

/// What a run of one variant writes through.
pub struct RunCtx<'a> {
    pub variant: String,
    pub repeat: u32,
    /// Seed of this run: the scenario seed mixed with the repeat (same for every variant of a repeat).
    pub seed: u64,
    pub params: &'a Params,
    pub config: &'a RunConfig,
    pub dir: &'a Path,
    writer: &'a mut RecordWriter,
    started: f64,
    summary: BTreeMap<String, f64>,
    /// How late each flow started (wall seconds), for the fidelity verdict.
    start_late_s: Vec<f64>,
    /// The worst p99 send lateness of the emulators this run stopped
    /// (wall), and the longest any of their threads was away.
    emulator: crate::testbeds::EmuTiming,
}

impl RunCtx<'_> {
    /// Notes how long after its scheduled start a flow started (wall
    /// seconds); the run's p99, in experiment units, goes into its fidelity
    /// verdict.
    pub fn flow_started_late(&mut self, late_s: f64) {
        self.start_late_s.push(late_s);
    }

    /// Notes the timing of an emulator that ran for this run only (built
    /// and stopped inside it, so its whole life is the run's:
    /// [`crate::testbeds::emulator_timing`]); the run's fidelity verdict
    /// judges the worst noted.
    pub fn emulator_timing(&mut self, t: crate::testbeds::EmuTiming) {
        let worst = |a: Option<Duration>, b: Option<Duration>| a.max(b);
        self.emulator = crate::testbeds::EmuTiming {
            p99: worst(self.emulator.p99, t.p99),
            away: worst(self.emulator.away, t.away),
        };
    }

    pub fn sample(&mut self, series: &str, t: f64, value: f64) -> Result<()> {
        let r = Record::Sample(Sample {
            variant: self.variant.clone(),
            repeat: self.repeat,
            series: series.into(),
            t,
            value,
        });
        Ok(self.writer.write(&r)?)
    }
    pub fn flow(
        &mut self,
        id: u64,
        class: &str,
        bytes: u64,
        start: f64,
        fct_ms: f64,
        completed: bool,
    ) -> Result<()> {
        self.flow_counted(id, class, bytes, start, fct_ms, completed, FlowCounters::default())
    }
    /// [`RunCtx::flow`] with what the sender's TCP counted for the flow.
    #[allow(clippy::too_many_arguments)]
    pub fn flow_counted(
        &mut self,
        id: u64,
        class: &str,
        bytes: u64,
        start: f64,
        fct_ms: f64,
        completed: bool,
        counted: FlowCounters,
    ) -> Result<()> {
        // Times also in experiment units when the run is dilated.
        let d = self.config.dilation;
        let exp = |t: f64| (d != tcpaccel_core::scale::Dilation::ONE).then(|| d.ms_to_experiment(t));
        let r = Record::Flow(FlowRecord {
            variant: self.variant.clone(),
            repeat: self.repeat,
            id,
            class: class.into(),
            bytes,
            start,
            fct_ms,
            completed,
            exp_start: exp(start),
            exp_fct_ms: exp(fct_ms),
            lane_bytes: counted.lane_bytes,
            retrans_bytes: counted.retrans_bytes,
            capture: counted.capture,
        });
        Ok(self.writer.write(&r)?)
    }
    /// Sets a summary metric of this run (written when the run ends).
    pub fn metric(&mut self, name: &str, value: f64) {
        self.summary.insert(name.into(), value);
    }
    pub fn note(&mut self, text: impl Into<String>) -> Result<()> {
        Ok(self.writer.write(&Record::Note { variant: Some(self.variant.clone()), text: text.into() })?)
    }
    /// Records a side file already written into the run directory.
    pub fn attach(&mut self, kind: &str, rel_path: &str) -> Result<()> {
        let r = Record::Attachment(Attachment {
            variant: self.variant.clone(),
            repeat: self.repeat,
            kind: kind.into(),
            path: rel_path.into(),
        });
        Ok(self.writer.write(&r)?)
    }
}

/// How to run a scenario.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub quick: bool,
    pub repeats: Option<u32>,
    pub out: PathBuf,
    pub seed: u64,
    /// Machine output: no progress bar.
    pub json: bool,
    /// The slice of the runs to run (`--shard I/N`; [`Shard::ALL`] for all).
    pub shard: Shard,
}

/// Resolves defaults, `--quick` overrides and `--set` values; unknown keys
/// are refused listing the valid ones, bad values by the scenario's
/// [`Scenario::check_params`].
pub fn resolve_params(s: &dyn Scenario, quick: bool, sets: &[(String, String)]) -> Result<Params> {
    let specs = s.params();
    let mut p: BTreeMap<String, String> =
        specs.iter().map(|x| (x.key.to_string(), x.default.clone())).collect();
    if quick {
        for (k, v) in s.quick() {
            p.insert(k.into(), v.into());
        }
    }
    for (k, v) in sets {
        if !p.contains_key(k) {
            let valid: Vec<String> =
                specs.iter().map(|x| format!("{} (default {}): {}", x.key, x.default, x.doc)).collect();
            bail!("unknown parameter {k:?} for scenario {}; valid keys:\n  {}", s.name(), valid.join("\n  "));
        }
        p.insert(k.clone(), v.clone());
    }
    for (k, v) in s.implied(&p) {
        if !sets.iter().any(|(set, _)| set == k) {
            p.insert(k.into(), v.into());
        }
    }
    let p = Params(p);
    s.check_params(&p)?;
    Ok(p)
}

/// Parses `key=value`.
pub fn parse_set(s: &str) -> Result<(String, String)> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => bail!("--set {s:?}: expected key=value"),
    }
}

/// Runs a scenario with `params` as [`resolve_params`] gave them (the
/// caller resolves them once, and can refuse bad `--set` values before
/// anything starts): header, interleaved repeats, end record. Returns the
/// records; the caller renders the report ([`crate::report::write_report`]),
/// so the runner does not depend on the report, which reads its records.
pub fn run(s: &dyn Scenario, params: &Params, opts: &RunOptions) -> Result<RunData> {
    let variants = s.variants(params)?;
    if variants.is_empty() {
        bail!("scenario {} has no variants with these parameters", s.name());
    }
    let config = RunConfig::new(s, params, opts.quick, opts.repeats, opts.seed)?;
    let repeats = config.repeats;
    let mut writer =
        RecordWriter::create(&opts.out).with_context(|| format!("creating {}", opts.out.display()))?;
    let header = RunHeader {
        version: RECORDS_VERSION,
        scenario: s.name().into(),
        title: s.title().into(),
        description: s.description().into(),
        params: params.0.clone(),
        variants: variants.clone(),
        repeats,
        quick: config.quick,
        seed: config.seed,
        kernel: kernel_release(),
        cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        started: unix_now(),
        metrics: s.metrics(),
        published: s.published(),
        notes: s.notes(params)?,
        shard: (opts.shard != Shard::ALL).then_some(opts.shard),
        scaled: config.scaled.clone(),
    };
    writer.write(&Record::Run(header))?;
    // This shard's runs: positions of the plan (repeats × interleaved variants) it owns.
    let total = opts.shard.select(&shard::plan(&variants, repeats)).len();
    let mut position = 0usize;
    let mut progress = Progress::new(total, s.estimate(params, config.dilation)?, !opts.json);
    let mut end = End { complete: true, ended: 0.0, reason: "all repeats done".into() };
    let mut failures = 0usize;
    match s.prepare(params, &config, &opts.out) {
        Err(e) => {
            end = End { complete: false, ended: unix_now(), reason: format!("setup failed: {e:#}") };
            writer.write(&Record::End(end))?;
            return Err(e.context(format!("preparing scenario {}", s.name())));
        }
        Ok(mut bed) => {
            'outer: for repeat in 0..repeats {
                for v in &variants {
                    position += 1;
                    if !opts.shard.owns(position - 1) {
                        continue;
                    }
                    if interrupted() {
                        end = End { complete: false, ended: 0.0, reason: "interrupted".into() };
                        break 'outer;
                    }
                    progress.start(v, repeat);
                    let started = unix_now();
                    let mut ctx = RunCtx {
                        variant: v.clone(),
                        repeat,
                        seed: config.seed_of(repeat),
                        params,
                        config: &config,
                        dir: &opts.out,
                        writer: &mut writer,
                        started,
                        summary: BTreeMap::new(),
                        start_late_s: Vec::new(),
                        emulator: Default::default(),
                    };
                    let monitor = crate::runner::fidelity::Monitor::start(
                        crate::runner::fidelity::INTERVAL,
                        crate::runner::fidelity::Spare::IdleAndNiced,
                        bed.watched_namespaces(),
                    );
                    let mut result = bed.run_one(&mut ctx);
                    let lateness = tcpaccel_core::fidelity::Lateness {
                        emulator_p99: ctx.emulator.p99,
                        emulator_away: ctx.emulator.away,
                        flow_start_p99: flow_start_p99(&ctx.start_late_s, config.dilation),
                    };
                    let observed = monitor.stop(lateness);
                    let scale = config.scaled.as_ref().map(|x| x.d.get());
                    let fidelity = crate::runner::fidelity::record(v, repeat, &observed, scale);
                    if !fidelity.faithful {
                        let suggest = match (&config.scaled, fidelity.suggested_scale) {
                            (Some(x), Some(s)) => {
                                format!(" — try --set {}={s} (this run: {})", x.param, x.d.get())
                            }
                            _ => String::new(),
                        };
                        progress.message(&format!(
                            "{v} repeat {repeat} unfaithful: {}{suggest}",
                            fidelity.reason
                        ));
                    }
                    ctx.writer.write(&Record::Fidelity(fidelity))?;
                    if result.is_ok() && interrupted() {
                        result = Err(anyhow::anyhow!("stopped early by a signal"));
                    }
                    let summary = std::mem::take(&mut ctx.summary);
                    let started = ctx.started;
                    match result {
                        Ok(()) => writer.write(&Record::Summary(Summary {
                            variant: v.clone(),
                            repeat,
                            metrics: summary,
                            started,
                            ended: unix_now(),
                        }))?,
                        Err(e) => {
                            failures += 1;
                            tracing::warn!("{} / {v} / repeat {repeat}: {e:#}", s.name());
                            progress.message(&format!("{v} repeat {repeat} failed: {e:#}"));
                            writer.write(&Record::Note {
                                variant: Some(v.clone()),
                                text: format!("repeat {repeat} failed: {e:#}"),
                            })?;
                            end = End {
                                complete: false,
                                ended: 0.0,
                                reason: format!("{failures} run(s) failed"),
                            };
                        }
                    }
                    progress.done();
                }
            }
        }
    }
    progress.finish();
    end.ended = unix_now();
    writer.write(&Record::End(end))?;
    let mut data = read_run(&opts.out)?;
    data.claims = s.claims().to_vec();
    data.names = s.names();
    data.point_label = s.point_label();
    data.paper_scale = s.paper_scale();
    Ok(data)
}

/// For root tests of scenarios: one quick repeat with `sets`, records in a
/// temporary directory (removed after), every variant required to complete.
#[cfg(test)]
pub(crate) fn run_short(s: &dyn Scenario, sets: &[(&str, &str)]) -> RunData {
    tcpaccel_sys::testing::require_root();
    // One directory per call: tests of one scenario run in parallel threads
    // of one process, and each removes its directory when done.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out = std::env::temp_dir().join(format!("tcpaccel-lab-{}-test-{}-{n}", s.name(), std::process::id()));
    let opts = RunOptions {
        quick: true,
        repeats: Some(1),
        out: out.clone(),
        seed: 1,
        json: true,
        shard: Shard::ALL,
    };
    let sets: Vec<(String, String)> = sets.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let params = resolve_params(s, true, &sets).unwrap_or_else(|e| panic!("{} parameters: {e:#}", s.name()));
    let d = run(s, &params, &opts).unwrap_or_else(|e| panic!("{} run: {e:#}", s.name()));
    let _ = std::fs::remove_dir_all(&out);
    assert!(d.complete(), "every variant of {} must complete: {:?}", s.name(), d.notes);
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Toy;
    struct ToyBed(u32);
    impl Testbed for ToyBed {
        fn run_one(&mut self, ctx: &mut RunCtx<'_>) -> Result<()> {
            self.0 += 1;
            let x = ctx.params.f64("x")?;
            if ctx.variant == "bad" && ctx.repeat == 1 {
                bail!("boom");
            }
            ctx.sample("order", 0.0, self.0 as f64)?;
            ctx.metric("x", x + ctx.repeat as f64);
            if ctx.variant == "a" {
                // Two emulators of this run: the worse p99 and the longer
                // time away are judged.
                use crate::testbeds::EmuTiming;
                let ms = |m: u64| Some(Duration::from_millis(m));
                ctx.emulator_timing(EmuTiming { p99: Some(Duration::from_micros(500)), away: ms(40) });
                ctx.emulator_timing(EmuTiming { p99: ms(3), away: ms(2) });
                ctx.emulator_timing(EmuTiming::default());
            }
            Ok(())
        }
    }
    impl Scenario for Toy {
        fn name(&self) -> &'static str {
            "toy"
        }
        fn title(&self) -> &'static str {
            "Toy"
        }
        fn description(&self) -> &'static str {
            "a toy"
        }
        fn params(&self) -> Vec<ParamSpec> {
            vec![ParamSpec::new("x", "1", "a number"), ParamSpec::new("variants", "a,b", "which")]
        }
        fn quick(&self) -> Vec<(&'static str, &'static str)> {
            vec![("x", "10")]
        }
        fn variants(&self, p: &Params) -> Result<Vec<String>> {
            p.list("variants")
        }
        fn metrics(&self) -> Vec<MetricSpec> {
            vec![]
        }
        fn estimate(&self, _: &Params, _: Dilation) -> Result<Duration> {
            Ok(Duration::from_millis(1))
        }
        fn prepare(&self, _: &Params, _: &RunConfig, _: &Path) -> Result<Box<dyn Testbed>> {
            Ok(Box::new(ToyBed(0)))
        }
    }

    fn tmp(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("tcpaccel-lab-{name}-{}", std::process::id()))
    }

    #[test]
    fn unknown_set_key_lists_valid_ones() {
        let e = resolve_params(&Toy, false, &[("y".into(), "1".into())]).unwrap_err().to_string();
        assert!(
            e.contains("unknown parameter \"y\"") && e.contains("x (default 1)") && e.contains("variants"),
            "{e}"
        );
        let p = resolve_params(&Toy, true, &[]).unwrap();
        assert_eq!(p.str("x").unwrap(), "10");
        assert!(parse_set("novalue").is_err());
        let p = Params([("v".to_string(), "a, c".to_string())].into_iter().collect());
        assert!(p.choice("v", &["a", "b"]).unwrap_err().to_string().contains("\"c\"; valid: a, b"));
        assert_eq!(p.choice("v", &["a", "c"]).unwrap(), vec!["a", "c"]);
    }

    #[test]
    fn variants_interleave_and_failures_mark_incomplete() {
        let out = tmp("interleave");
        let opts = RunOptions {
            quick: false,
            repeats: Some(2),
            out: out.clone(),
            seed: 1,
            json: true,
            shard: Shard::ALL,
        };
        let params = resolve_params(&Toy, false, &[("variants".into(), "a,bad".into())]).unwrap();
        let d = run(&Toy, &params, &opts).unwrap();
        let order: Vec<(String, u32)> = d.samples.iter().map(|s| (s.variant.clone(), s.repeat)).collect();
        assert_eq!(order, vec![("a".into(), 0), ("bad".into(), 0), ("a".into(), 1)]);
        assert_eq!(d.summaries.len(), 3);
        // Every run that ran has a fidelity verdict, the failed one too.
        assert_eq!(d.fidelity.len(), 4);
        // The emulator lateness a run noted is its record's and is judged;
        // a run without an emulator has none.
        for f in &d.fidelity {
            if f.variant == "a" {
                assert_eq!((f.emu_late_p99_ms, f.emu_away_ms), (Some(3.0), Some(40.0)), "{f:?}");
                assert!(!f.faithful && f.reason.contains("emulator p99 lateness 3ms over 1ms"), "{f:?}");
                assert!(f.reason.contains("emulator thread away 40ms at once, over 10ms"), "{f:?}");
            } else {
                assert_eq!((f.emu_late_p99_ms, f.emu_away_ms), (None, None), "{f:?}");
            }
            assert_eq!((f.limit_emu_late_ms, f.limit_emu_away_ms), (1.0, 10.0));
        }
        assert!(!d.complete());
        assert!(d.notes.iter().any(|n| n.1.contains("boom")));
        // The runner writes records only; the report is its caller's (the CLI's).
        assert!(out.join(RECORDS_FILE).exists() && !out.join("index.html").exists());
        // Rendering depends on records only: a copy renders the same tables.
        let copy = tmp("interleave-copy");
        std::fs::create_dir_all(&copy).unwrap();
        std::fs::copy(out.join(RECORDS_FILE), copy.join(RECORDS_FILE)).unwrap();
        let d2 = read_run(&copy).unwrap();
        assert_eq!(crate::report::markdown(&d), crate::report::markdown(&d2));
        std::fs::remove_dir_all(&out).unwrap();
        std::fs::remove_dir_all(&copy).unwrap();
    }
}
