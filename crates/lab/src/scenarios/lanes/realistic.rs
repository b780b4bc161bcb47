//! `lanes-websearch` and `lanes-datamining` ([Lanes] Fig. 6.9–6.13): one
//! experiment, two mixes: Poisson arrivals at several loads, short-flow FCT
//! and long-flow goodput per load.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use tcpaccel_core::scale::Dilation;

use super::knobs::{specs, Param};
use super::{
    common_params, estimate_scaled, long_mbps, prepare_bed, put, record_outcome, run_policy, sample, Bed,
    RunSpec,
};
use super::{drain_param, warmup_param, Experiment, POLICIES};
use crate::engines::flows::RunEnd;
use crate::engines::workloads::{self as workload, Hosts, Mix};
use crate::runner::claims::{thesis_order, Claim, Goal, Measure, GOAL_BENCH, GOAL_DIRECTION, GOAL_OWN};
use crate::runner::records::MetricSpec;
use crate::runner::scenario::{ParamSpec, Params, RunConfig, RunCtx, Scenario, Testbed};
use tcpaccel_core::scale::Rule;
use tcpaccel_core::workload::FlowClass;

/// `lanes-websearch` (`Mix::WebSearch`) or `lanes-datamining`.
pub struct LanesRealistic(pub Mix);

fn realistic_params(fan_in: &str, rate: &str) -> Vec<Param> {
    let mut v = common_params("2", "8", rate);
    v.push(Param::new(
        "loads",
        "0.2,0.5,0.8",
        Rule::Load,
        "offered load per destination link (arrivals follow the scaled rate)",
    ));
    v.push(Param::new("duration", "10s", Rule::Time, "arrivals window per load"));
    v.push(drain_param());
    v.push(Param::new("fan_in", fan_in, Rule::Count, "data mining: senders a back-end job is split over"));
    // Thousands of short connections: eight daemons dumping sock_diag every
    // 20 ms took a core on their own.
    for p in v.iter_mut().filter(|p| p.spec.key == "sample_interval") {
        p.spec.default = "50ms".into();
    }
    v
}

/// The loads whose metrics are declared (the report's columns and the
/// thesis-ordering claims): [Lanes] Fig. 6.9–6.13 span 0.1–0.8; these
/// are the default `loads`. Other loads are recorded all the same.
const FIGURE_LOADS: [&str; 3] = ["0.2", "0.5", "0.8"];

fn realistic_metrics() -> Vec<MetricSpec> {
    let mut v = Vec::new();
    for load in FIGURE_LOADS {
        v.push(MetricSpec::new(
            &format!("short_p99_ms@{load}"),
            "ms",
            false,
            &format!(
                "99th-percentile FCT of flows ≤ 100 KB at load {load}, in experiment units (wall ÷ scale)"
            ),
        ));
        v.push(MetricSpec::new(
            &format!("short_avg_ms@{load}"),
            "ms",
            false,
            &format!("mean FCT of flows ≤ 100 KB at load {load}, in experiment units (wall ÷ scale)"),
        ));
        // Unfinished short flows at the time they had: under repeated RTOs
        // the completed-only tail above hides the slowest flows.
        v.push(MetricSpec::new(
            &format!("short_p99_ms_all@{load}"),
            "ms",
            false,
            &format!(
                "99th-percentile FCT of all flows ≤ 100 KB at load {load}, unfinished ones at the time they \
                 had when the run ended (a lower bound), in experiment units"
            ),
        ));
        v.push(MetricSpec::new(
            &format!("short_avg_ms_all@{load}"),
            "ms",
            false,
            &format!("mean FCT of the same at load {load} (a lower bound), in experiment units"),
        ));
        v.push(MetricSpec::new(
            &format!("long_mbps@{load}"),
            "Mbit/s",
            true,
            &format!(
                "long-flow goodput per back-end host at load {load}, in experiment units (wall × scale)"
            ),
        ));
        // [Lanes]' premise: short flows on a clean SL, long flows off it.
        // Measured per flow from the senders' subflows.
        v.push(MetricSpec::new(
            &format!("short_sl_bytes_pct@{load}"),
            "%",
            true,
            &format!("share of the bytes of flows ≤ 100 KB that went on SL at load {load}"),
        ));
        v.push(MetricSpec::new(
            &format!("long_sl_bytes_pct@{load}"),
            "%",
            false,
            &format!("share of the long flows' bytes that went on SL at load {load}"),
        ));
    }
    v
}

/// `lanes-websearch` and `lanes-datamining`: one scenario, two mixes.
impl Scenario for LanesRealistic {
    fn name(&self) -> &'static str {
        match self.0 {
            Mix::WebSearch => "lanes-websearch",
            Mix::DataMining => "lanes-datamining",
        }
    }
    fn title(&self) -> &'static str {
        match self.0 {
            Mix::WebSearch => "Lanes, web search mix at load 0.1–0.8 ([Lanes] Fig. 6.9–6.11)",
            Mix::DataMining => "Lanes, data mining mix at load 0.1–0.8 ([Lanes] Fig. 6.12–6.13)",
        }
    }
    fn description(&self) -> &'static str {
        match self.0 {
            Mix::WebSearch => {
                "Front-end flows Pareto(1.5, mean 50 KB) to the front-end hosts and back-end flows Pareto(1.2, \
                 mean 10 MB) to the back-end hosts, Poisson at each load (fraction of a destination link). \
                 Short-flow (≤ 100 KB) mean and p99 FCT, long-flow goodput."
            }
            Mix::DataMining => {
                "Front-end flows Pareto(1.5, mean 10 KB) to the front-end hosts, Poisson at each load; back-end \
                 jobs of 800 MB split over fan_in senders run from the start and are cut when the last \
                 front-end flow has ended (at most drain after the arrivals). Short-flow mean and p99 FCT, \
                 long-flow goodput over the run."
            }
        }
    }
    fn params(&self) -> Vec<ParamSpec> {
        specs(&self.declared())
    }
    fn quick(&self) -> Vec<(&'static str, &'static str)> {
        vec![("loads", "0.5"), ("duration", "3s"), ("variants", "mptcp,link-cost")]
    }
    fn default_repeats(&self) -> u32 {
        1
    }
    fn variants(&self, p: &Params) -> Result<Vec<String>> {
        p.choice("variants", &POLICIES)
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        realistic_metrics()
    }
    fn claims(&self) -> &'static [Claim] {
        match self.0 {
            Mix::WebSearch => WEBSEARCH_CLAIMS,
            Mix::DataMining => DATAMINING_CLAIMS,
        }
    }
    fn dilation(&self, p: &Params) -> Result<Option<crate::runner::records::Scaled>> {
        super::scaled(p)
    }
    fn estimate(&self, p: &Params, d: Dilation) -> Result<Duration> {
        // Only data mining declares a warmup (web search has none).
        let warmup = match self.0 {
            Mix::DataMining => p.duration("warmup")?,
            Mix::WebSearch => Duration::ZERO,
        };
        let n = p.list("loads").map(|l| l.len())? as u32;
        Ok(estimate_scaled(
            d,
            (warmup + p.duration("duration")? + p.duration("drain")? + Duration::from_secs(1)) * n,
        ))
    }
    fn prepare(&self, p: &Params, config: &RunConfig, _dir: &Path) -> Result<Box<dyn Testbed>> {
        prepare_bed(p, config.dilation, &self.declared(), LanesRealistic(self.0), true)
    }
}

impl LanesRealistic {
    pub(super) fn declared(&self) -> Vec<Param> {
        match self.0 {
            Mix::WebSearch => realistic_params("1", "50mbit"),
            Mix::DataMining => {
                let mut v = realistic_params("2", "20mbit");
                v.push(warmup_param());
                v
            }
        }
    }
}

impl Experiment for LanesRealistic {
    /// Web search / data mining mixes at several loads.
    fn run(&self, bed: &Bed, ctx: &mut RunCtx<'_>) -> Result<()> {
        let duration = bed.params.time("duration")?;
        let drain = bed.params.time("drain")?;
        let loads: Vec<f64> = bed.params.numbers("loads")?;
        let fan_in = bed.params.count("fan_in")? as u32;
        let warmup = match self.0 {
            Mix::DataMining => bed.params.time("warmup")?,
            Mix::WebSearch => Duration::ZERO,
        };
        // Web search's back-end flows end and are measured; data mining's
        // 800 MB jobs never end within a run, so the run ends with the
        // front-end flows instead of always waiting out the drain.
        let end = match self.0 {
            Mix::DataMining => RunEnd::ClassEnded(FlowClass::Short),
            Mix::WebSearch => RunEnd::AllFlows,
        };
        let d = bed.params.d();
        let hosts = Hosts::quarter_back(bed.fab.spec.hosts);
        let variant = ctx.variant.clone();
        let dir = ctx.dir.to_path_buf();
        let origin = tcpaccel_core::Instant::ZERO;
        let rate = bed.fab.spec.rate;
        let record_flows_at = if loads.contains(&0.5) { 0.5 } else { *loads.last().unwrap_or(&0.5) };
        for &load in &loads {
            let wl = workload::realistic(ctx.seed, origin, &hosts, self.0, load, rate, fan_in)
                .context("the realistic workload")?;
            let flows = workload::hold_short(wl.until(origin + duration), warmup);
            let tag = format!("{variant}-l{load}-r{}", ctx.repeat);
            let spec = RunSpec { end, ..bed.run_spec(ctx, &dir, &variant, warmup + duration + drain, tag)? };
            let o = run_policy(&bed.fab, &flows, &spec)?;
            let s = record_outcome(ctx, d, &o, &format!("@{load}"), load == record_flows_at)?;
            let l = d.rate_to_experiment(long_mbps(&o, hosts.back.len()));
            put(ctx, format!("long_mbps@{load}"), l);
            sample(ctx, "short_avg_vs_load_ms", load, d.ms_to_experiment(s.avg))?;
            sample(ctx, "short_p99_vs_load_ms", load, d.ms_to_experiment(s.p99))?;
            sample(ctx, "long_vs_load_mbps", load, l)?;
            if crate::runner::scenario::interrupted() {
                break;
            }
        }
        Ok(())
    }
}

/// What `lanes-websearch` claims: goals and [Lanes]' orderings, judged by the report against a run's summaries.
pub(crate) const WEBSEARCH_CLAIMS: &[Claim] = &[
    Claim {
                text: "Link-cost short-flow p99 FCT at load 0.5 is half of pure MPTCP's",
        measure: Measure::Ratio {
            num: ("link-cost", "short_p99_ms@0.5"),
            den: ("mptcp", "short_p99_ms@0.5"),
        },
        goal: Goal::AtMost(0.5),
        goal_source: GOAL_BENCH,
        published: None,
        when: &[],
    },
    Claim {
                text: "Link-cost short-flow p99 FCT at load 0.5 is no worse than RepFlow's",
        measure: Measure::Ratio {
            num: ("link-cost", "short_p99_ms@0.5"),
            den: ("repflow", "short_p99_ms@0.5"),
        },
        goal: Goal::AtMost(1.0),
        goal_source: GOAL_BENCH,
        published: None,
        when: &[],
    },
    Claim {
                text: "Link-cost long-flow goodput at load 0.5 keeps 0.9× pure MPTCP's",
        measure: Measure::Ratio { num: ("link-cost", "long_mbps@0.5"), den: ("mptcp", "long_mbps@0.5") },
        goal: Goal::AtLeast(0.9),
        goal_source: GOAL_BENCH,
        published: None,
        when: &[],
    },
    Claim {
                text: "sized-rep (large flows kept off SL by size, short flows copied on LL0) short-flow p99 FCT at load 0.5 is no worse than RepFlow's",
        measure: Measure::Ratio {
            num: ("sized-rep", "short_p99_ms@0.5"),
            den: ("repflow", "short_p99_ms@0.5"),
        },
        goal: Goal::AtMost(1.0),
        goal_source: GOAL_OWN,
        published: None,
        when: &[],
    },
    Claim {
                text: "sized-rep short-flow p99 FCT at load 0.5 is no worse than pure MPTCP's",
        measure: Measure::Ratio {
            num: ("sized-rep", "short_p99_ms@0.5"),
            den: ("mptcp", "short_p99_ms@0.5"),
        },
        goal: Goal::AtMost(1.0),
        goal_source: GOAL_OWN,
        published: None,
        when: &[],
    },
    thesis_order(
        "[Lanes] ordering at load 0.2: link-cost short-flow p99 FCT no worse than RepFlow's",
        "link-cost",
        "repflow",
        "short_p99_ms@0.2",
    ),
    thesis_order(
        "[Lanes] ordering at load 0.2: RepFlow short-flow p99 FCT no worse than pure MPTCP's",
        "repflow",
        "mptcp",
        "short_p99_ms@0.2",
    ),
    thesis_order(
        "[Lanes] ordering at load 0.2: link-cost short-flow mean FCT no worse than RepFlow's",
        "link-cost",
        "repflow",
        "short_avg_ms@0.2",
    ),
    thesis_order(
        "[Lanes] ordering at load 0.2: RepFlow short-flow mean FCT no worse than pure MPTCP's",
        "repflow",
        "mptcp",
        "short_avg_ms@0.2",
    ),
    thesis_order(
        "[Lanes] ordering at load 0.5: RepFlow short-flow p99 FCT no worse than pure MPTCP's",
        "repflow",
        "mptcp",
        "short_p99_ms@0.5",
    ),
    thesis_order(
        "[Lanes] ordering at load 0.5: link-cost short-flow mean FCT no worse than RepFlow's",
        "link-cost",
        "repflow",
        "short_avg_ms@0.5",
    ),
    thesis_order(
        "[Lanes] ordering at load 0.5: RepFlow short-flow mean FCT no worse than pure MPTCP's",
        "repflow",
        "mptcp",
        "short_avg_ms@0.5",
    ),
    thesis_order(
        "[Lanes] ordering at load 0.8: link-cost short-flow p99 FCT no worse than RepFlow's",
        "link-cost",
        "repflow",
        "short_p99_ms@0.8",
    ),
    thesis_order(
        "[Lanes] ordering at load 0.8: RepFlow short-flow p99 FCT no worse than pure MPTCP's",
        "repflow",
        "mptcp",
        "short_p99_ms@0.8",
    ),
    thesis_order(
        "[Lanes] ordering at load 0.8: link-cost short-flow mean FCT no worse than RepFlow's",
        "link-cost",
        "repflow",
        "short_avg_ms@0.8",
    ),
    thesis_order(
        "[Lanes] ordering at load 0.8: RepFlow short-flow mean FCT no worse than pure MPTCP's",
        "repflow",
        "mptcp",
        "short_avg_ms@0.8",
    ),
];

/// What `lanes-datamining` claims.
pub(crate) const DATAMINING_CLAIMS: &[Claim] = &[
    Claim {
        text: "Link-cost short-flow p99 FCT at load 0.5 is no worse than pure MPTCP's",
        measure: Measure::Ratio {
            num: ("link-cost", "short_p99_ms@0.5"),
            den: ("mptcp", "short_p99_ms@0.5"),
        },
        goal: Goal::AtMost(1.0),
        goal_source: GOAL_DIRECTION,
        published: None,
        when: &[],
    },
    thesis_order(
        "[Lanes] ordering at load 0.2: link-cost short-flow p99 FCT no worse than RepFlow's",
        "link-cost",
        "repflow",
        "short_p99_ms@0.2",
    ),
    thesis_order(
        "[Lanes] ordering at load 0.2: RepFlow short-flow p99 FCT no worse than pure MPTCP's",
        "repflow",
        "mptcp",
        "short_p99_ms@0.2",
    ),
    thesis_order(
        "[Lanes] ordering at load 0.2: link-cost short-flow mean FCT no worse than RepFlow's",
        "link-cost",
        "repflow",
        "short_avg_ms@0.2",
    ),
    thesis_order(
        "[Lanes] ordering at load 0.2: RepFlow short-flow mean FCT no worse than pure MPTCP's",
        "repflow",
        "mptcp",
        "short_avg_ms@0.2",
    ),
    thesis_order(
        "[Lanes] ordering at load 0.5: link-cost short-flow p99 FCT no worse than RepFlow's",
        "link-cost",
        "repflow",
        "short_p99_ms@0.5",
    ),
    thesis_order(
        "[Lanes] ordering at load 0.5: RepFlow short-flow p99 FCT no worse than pure MPTCP's",
        "repflow",
        "mptcp",
        "short_p99_ms@0.5",
    ),
    thesis_order(
        "[Lanes] ordering at load 0.5: link-cost short-flow mean FCT no worse than RepFlow's",
        "link-cost",
        "repflow",
        "short_avg_ms@0.5",
    ),
    thesis_order(
        "[Lanes] ordering at load 0.5: RepFlow short-flow mean FCT no worse than pure MPTCP's",
        "repflow",
        "mptcp",
        "short_avg_ms@0.5",
    ),
    thesis_order(
        "[Lanes] ordering at load 0.8: link-cost short-flow p99 FCT no worse than RepFlow's",
        "link-cost",
        "repflow",
        "short_p99_ms@0.8",
    ),
    thesis_order(
        "[Lanes] ordering at load 0.8: RepFlow short-flow p99 FCT no worse than pure MPTCP's",
        "repflow",
        "mptcp",
        "short_p99_ms@0.8",
    ),
    thesis_order(
        "[Lanes] ordering at load 0.8: link-cost short-flow mean FCT no worse than RepFlow's",
        "link-cost",
        "repflow",
        "short_avg_ms@0.8",
    ),
    thesis_order(
        "[Lanes] ordering at load 0.8: RepFlow short-flow mean FCT no worse than pure MPTCP's",
        "repflow",
        "mptcp",
        "short_avg_ms@0.8",
    ),
];
