//! `lanes-buildup` ([Lanes] Fig. 6.5–6.6): 64 KB short flows to the
//! front-ends while 1..N hosts send long flows to the back-ends; short-flow
//! FCT against the number of long senders.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use tcpaccel_core::scale::Dilation;

use super::{
    check_variants, estimate_scaled, lanes_specs, non_empty, prepare_bed, put, record_outcome, run_policy,
    sample, scaled_params, Bed, Common, Drain, Experiment, Groups, ScaledParams, ScenarioParams, Warmup,
    POLICIES,
};
use crate::engines::workloads::{self as workload, Hosts};
use crate::runner::claims::{Claim, Goal, Measure, GOAL_BENCH};
use crate::runner::records::MetricSpec;
use crate::runner::scenario::{ParamSpec, Params, RunConfig, RunCtx, Scenario, Testbed};

pub struct LanesBuildup;

scaled_params! {
    /// `lanes-buildup`'s own parameters (beside [`Common`], [`Drain`] and [`Warmup`]).
    pub(super) struct BuildupParams {
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        short_gap: Duration [Time] = "200ms"
            => "mean gap between the 64 KB flows to each front-end host, Poisson (the thesis: 200 ms)",
        senders: Vec<u32> [Count] = "1,2,4,6" => "long-flow sender counts to run",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        duration: Duration [Time] = "10s" => "arrivals window per sender count",
    }
}

/// Every parameter of `lanes-buildup`, as resolved (experiment units).
struct Read {
    common: Common,
    own: BuildupParams,
    drain: Drain,
    warmup: Warmup,
}

impl LanesBuildup {
    /// The parameters as resolved, the variants and sender counts checked.
    fn read(p: &Params) -> Result<Read> {
        let mut g = Groups::new(p);
        let r = Read { common: g.take()?, own: g.take()?, drain: g.take()?, warmup: g.take()? };
        g.finish()?;
        check_variants(&r.common, &POLICIES)?;
        non_empty("senders", &r.own.senders)?;
        Ok(r)
    }
}

impl Scenario for LanesBuildup {
    fn name(&self) -> &'static str {
        "lanes-buildup"
    }
    fn title(&self) -> &'static str {
        "Lanes queue buildup: 64 KB short flows vs 1..N long senders ([Lanes] Fig. 6.5–6.6)"
    }
    fn description(&self) -> &'static str {
        "Eight hosts (2 back-end, 6 front-end) on two fabrics: 64 KB flows to the front-ends, Poisson with a \
         mean gap of `short_gap` (200 ms), while 1..N front-end hosts each send one long flow to a back-end \
         (from the start; the short flows begin after `warmup`). Average and 95th-percentile short-flow FCT \
         against the number of long senders."
    }
    fn params(&self) -> Vec<ParamSpec> {
        lanes_specs(&[Common::specs(), BuildupParams::specs(), Drain::specs(), Warmup::specs()], &[])
    }
    fn check_params(&self, p: &Params) -> Result<()> {
        Self::read(p).map(drop)
    }
    fn quick(&self) -> Vec<(&'static str, &'static str)> {
        vec![("senders", "1,4"), ("duration", "3s"), ("variants", "mptcp,link-cost")]
    }
    fn default_repeats(&self) -> u32 {
        1
    }
    fn variants(&self, p: &Params) -> Result<Vec<String>> {
        Ok(Self::read(p)?.common.variants)
    }
    fn point_label(&self) -> Option<&'static str> {
        Some("senders")
    }
    fn names(&self) -> Vec<(&'static str, &'static str)> {
        [
            super::NAMES,
            &[
                ("p95_growth_x", "Short-flow p95 growth (most ÷ fewest long senders)"),
                ("short_avg_vs_senders_ms", "Short-flow FCT mean against long senders"),
                ("short_p95_vs_senders_ms", "Short-flow FCT p95 against long senders"),
            ],
        ]
        .concat()
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        vec![MetricSpec::new(
            "p95_growth_x",
            "×",
            false,
            "short-flow p95 FCT at the most long senders ÷ at the fewest (flat = 1)",
        )]
    }
    fn claims(&self) -> &'static [Claim] {
        CLAIMS
    }
    fn dilation(&self, p: &Params) -> Result<Option<crate::runner::records::Scaled>> {
        super::scaled(p)
    }
    fn estimate(&self, p: &Params, d: Dilation) -> Result<Duration> {
        let r = Self::read(p)?;
        let n = r.own.senders.len() as u32;
        Ok(estimate_scaled(
            d,
            (r.warmup.warmup + r.own.duration + r.drain.drain + Duration::from_secs(1)) * n,
        ))
    }
    fn prepare(&self, p: &Params, config: &RunConfig, _dir: &Path) -> Result<Box<dyn Testbed>> {
        let r = Self::read(p)?;
        let d = config.dilation;
        let run =
            BuildupRun { own: r.own.dilated(d)?, drain: r.drain.dilated(d)?, warmup: r.warmup.dilated(d)? };
        prepare_bed(&r.common, d, run)
    }
}

/// The experiment, with its own parameters dilated.
struct BuildupRun {
    own: BuildupParams,
    drain: Drain,
    warmup: Warmup,
}

impl Experiment for BuildupRun {
    /// 64 KB short flows to front-ends while 1..N hosts send long flows to back-ends.
    fn run(&self, bed: &Bed, ctx: &mut RunCtx<'_>) -> Result<()> {
        let (duration, drain, warmup) = (self.own.duration, self.drain.drain, self.warmup.warmup);
        let gap = self.own.short_gap;
        let senders = &self.own.senders;
        let d = bed.d;
        let hosts = Hosts::quarter_back(bed.fab.spec.hosts);
        let variant = ctx.variant.clone();
        let dir = ctx.dir.to_path_buf();
        let origin = tcpaccel_core::Instant::ZERO;
        let mut p95s = Vec::new();
        for &n in senders {
            let wl = workload::queue_buildup(ctx.seed ^ u64::from(n), origin, &hosts, n, 1 << 40, gap)
                .context("the queue-buildup workload")?;
            let flows = workload::hold_short(wl.until(origin + duration), warmup);
            let spec = bed.run_spec(
                ctx,
                &dir,
                &variant,
                warmup + duration + drain,
                format!("{variant}-s{n}-r{}", ctx.repeat),
            )?;
            let o = run_policy(&bed.fab, &flows, &spec)?;
            let last = Some(&n) == senders.last();
            let s = record_outcome(ctx, d, &o, &format!("@{n}"), last)?;
            sample(ctx, "short_avg_vs_senders_ms", f64::from(n), d.ms_to_experiment(s.avg))?;
            sample(ctx, "short_p95_vs_senders_ms", f64::from(n), d.ms_to_experiment(s.p95))?;
            p95s.push(s.p95);
            if crate::runner::scenario::interrupted() {
                break;
            }
        }
        if let (Some(first), Some(last)) = (p95s.first(), p95s.last()) {
            put(ctx, "p95_growth_x".into(), last / first);
        }
        Ok(())
    }
}

/// What this scenario claims: published figures and goals, judged by the report against a run's summaries.
pub(crate) const CLAIMS: &[Claim] = &[
    Claim {
        text: "Deadline lanes keep the short-flow p95 growth below pure MPTCP's (ratio of growths)",
        measure: Measure::Ratio { num: ("deadline", "p95_growth_x"), den: ("mptcp", "p95_growth_x") },
        goal: Goal::AtMost(1.0),
        goal_source: GOAL_BENCH,
        published: None,
        when: &[],
    },
    Claim {
        text: "Link-cost lanes keep the short-flow p95 growth below pure MPTCP's (ratio of growths)",
        measure: Measure::Ratio { num: ("link-cost", "p95_growth_x"), den: ("mptcp", "p95_growth_x") },
        goal: Goal::AtMost(1.0),
        goal_source: GOAL_BENCH,
        published: None,
        when: &[],
    },
];
