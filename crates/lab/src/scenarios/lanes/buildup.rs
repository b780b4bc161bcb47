//! `lanes-buildup` ([Lanes] Fig. 6.5–6.6): 64 KB short flows to the
//! front-ends while 1..N hosts send long flows to the back-ends; short-flow
//! FCT against the number of long senders.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use tcpaccel_core::scale::Dilation;

use super::knobs::{specs, Param};
use super::{
    common_params, estimate_scaled, prepare_bed, put, record_outcome, run_policy, sample, Bed, Experiment,
};
use super::{drain_param, warmup_param, POLICIES};
use crate::engines::workloads::{self as workload, Hosts};
use crate::runner::claims::{Claim, Goal, Measure, GOAL_BENCH};
use crate::runner::records::MetricSpec;
use crate::runner::scenario::{ParamSpec, Params, RunConfig, RunCtx, Scenario, Testbed};
use tcpaccel_core::scale::Rule;

pub struct LanesBuildup;

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
        specs(&self.declared())
    }
    fn quick(&self) -> Vec<(&'static str, &'static str)> {
        vec![("senders", "1,4"), ("duration", "3s"), ("variants", "mptcp,link-cost")]
    }
    fn default_repeats(&self) -> u32 {
        1
    }
    fn variants(&self, p: &Params) -> Result<Vec<String>> {
        p.choice("variants", &POLICIES)
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
        let n = p.list("senders").map(|l| l.len())? as u32;
        Ok(estimate_scaled(
            d,
            (p.duration("warmup")? + p.duration("duration")? + p.duration("drain")? + Duration::from_secs(1))
                * n,
        ))
    }
    fn prepare(&self, p: &Params, config: &RunConfig, _dir: &Path) -> Result<Box<dyn Testbed>> {
        prepare_bed(p, config.dilation, &self.declared(), LanesBuildup, true)
    }
}

impl LanesBuildup {
    pub(super) fn declared(&self) -> Vec<Param> {
        let mut v = common_params("2", "8", "100mbit");
        v.push(Param::new(
            "short_gap",
            "200ms",
            Rule::Time,
            "mean gap between the 64 KB flows to each front-end host, Poisson (the thesis: 200 ms)",
        ));
        v.push(Param::new("senders", "1,2,4,6", Rule::Count, "long-flow sender counts to run"));
        v.push(Param::new("duration", "10s", Rule::Time, "arrivals window per sender count"));
        v.push(drain_param());
        v.push(warmup_param());
        v
    }
}

impl Experiment for LanesBuildup {
    /// 64 KB short flows to front-ends while 1..N hosts send long flows to back-ends.
    fn run(&self, bed: &Bed, ctx: &mut RunCtx<'_>) -> Result<()> {
        let duration = bed.params.time("duration")?;
        let drain = bed.params.time("drain")?;
        let warmup = bed.params.time("warmup")?;
        let gap = bed.params.time("short_gap")?;
        let senders: Vec<u32> = bed.params.numbers("senders")?;
        let d = bed.params.d();
        let hosts = Hosts::quarter_back(bed.fab.spec.hosts);
        let variant = ctx.variant.clone();
        let dir = ctx.dir.to_path_buf();
        let origin = tcpaccel_core::Instant::ZERO;
        let mut p95s = Vec::new();
        for &n in &senders {
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
