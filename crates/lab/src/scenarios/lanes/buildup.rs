//! `lanes-buildup` ([Lanes] Fig. 6.5–6.6): 64 KB short flows to the
//! front-ends while 1..N hosts send long flows to the back-ends; short-flow
//! FCT against the number of long senders. Two workloads (`workload`):
//!
//! - `poisson`, the lab's earlier one: 64 KB flows to each front-end host,
//!   Poisson with a mean gap of `short_gap`, from random other hosts; long
//!   flows from the start, one per front-end sender (at most the 6
//!   front-end hosts of 8).
//! - `rounds`, the thesis's as the author's incast script runs it
//!   ([`tcpaccel_core::workload::rounds::BuildupRounds`], whose table gives
//!   every choice of the generator with its source): one 64 KiB flow to
//!   every front-end host every 200 ms, 13 rounds, fixed pairs; 1–10
//!   unbounded long flows to the back-end hosts from 500 ms after the
//!   first round; the run ends when the short flows have (`duration`,
//!   `warmup` and `short_gap` do not apply).
//!
//! The scenario-level choices of `rounds`, with their source — the keys a
//! `--set` did not give take these ([`Scenario::implied`]):
//!
//! | choice | value | source |
//! |---|---|---|
//! | hosts | 8 (2 back-end, 6 front-end), leaf–spine, two fabrics | text (8 hosts); the incast script runs 36 nodes on two router pairs (`nNodes=18`, `nRtrs=2`) |
//! | senders | 1–10 (`senders=1,…,10`) | text (Fig. 6.5–6.6); `repeat_incast.sh` (`s_nodes` 1–10) |
//! | link rate | 100 Mbit/s | incast script (`DataRate 100Mbps` on every link) |
//! | initial window, CC, rto_min, initial RTO, delayed ACKs | 12, NewReno, 200 ms, 1 s, on | as `lanes-websearch`'s `rounds` ([`super::realistic`]) |
//! | FCT by capture, application writes | `capture=on`, `writes=bulksend` | incast script (`EnablePcapAll`; `BulkSendHelper` on the Linux stack, `SendSize` 512) |
//!
//! Not modelled: the script's 25 µs per switch-to-switch link (plain veth
//! here).
//!
//! `layout` places the flows (`rounds` only):
//!
//! - `text`: the text's 8 hosts, the front-end hosts sending both the short
//!   flows and the long flows (a front-end host runs two above 6 senders);
//!   which hosts send is inferred (8 hosts have no spare ones).
//! - `script`, a sensitivity variant: the incast script's roles — every
//!   flow from its own sender host, all senders on one side of one shared
//!   link per path, all receivers on the other (the script's dumbbell: 18
//!   nodes on each of two router pairs, one 100 Mbit/s middle link per
//!   path, short senders 2k + 1 → receivers 2k, long senders 17, 19, … →
//!   nodes 0 and 2). Here: a leaf–spine with two leaves and one spine,
//!   leaf 0's hosts sending (6 short senders, then the long senders),
//!   leaf 1's receiving (the 2 long-flow destinations, then the 6
//!   short-flow receivers), so leaf 0's uplink is the middle link (plus one
//!   more hop at the same rate, which adds no queue). Implies `hosts=24
//!   hosts_per_leaf=16 spines=1` unless set. The script's 100-packet router
//!   queues stay the text's 128 KB.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tcpaccel_core::scale::Dilation;

use super::{
    check_variants, estimate_scaled, lanes_specs, non_empty, prepare_bed, put, record_outcome, run_policy,
    sample, scaled_params, Bed, Common, Drain, Experiment, Groups, ScaledParams, ScenarioParams, Warmup,
    POLICIES,
};
use crate::engines::flows::RunEnd;
use crate::engines::workloads::{self as workload, Hosts};
use crate::runner::claims::{Claim, Goal, Measure, GOAL_BENCH};
use crate::runner::records::MetricSpec;
use crate::runner::scenario::{ParamSpec, Params, RunConfig, RunCtx, Scenario, Testbed};
use crate::testbeds::fabric::Shape;
use tcpaccel_core::workload::rounds::{BuildupRounds, BuildupSenders, BUILDUP_ROUNDS, ROUND_PERIOD};
use tcpaccel_core::workload::Flow;

pub struct LanesBuildup;

/// The two workloads of `workload`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum BuildupWorkload {
    Poisson,
    Rounds,
}

crate::runner::typed::dilate_choice!(BuildupWorkload);

/// The two host layouts of `layout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum BuildupLayout {
    Text,
    Script,
}

crate::runner::typed::dilate_choice!(BuildupLayout);

/// What `layout=script` implies for the keys no `--set` gave: two leaves,
/// 16 senders under one (6 short, 10 long), 8 receivers under the other.
const SCRIPT_LAYOUT: [(&str, &str); 3] = [("hosts", "24"), ("hosts_per_leaf", "16"), ("spines", "1")];

/// Short-flow pairs and long-flow destinations of the buildup (text and
/// incast script alike).
const SHORT_PAIRS: u32 = 6;
const LONG_DESTINATIONS: u32 = 2;

/// What `workload=rounds` implies beside the thesis's operating point for
/// the keys no `--set` gave (the module's table).
const ROUNDS_POINT: [(&str, &str); 1] = [("senders", "1,2,3,4,5,6,7,8,9,10")];

/// Bytes of a long flow: more than any run sends (the incast script's are
/// unbounded).
const LONG_BYTES: u64 = 1 << 40;

scaled_params! {
    /// `lanes-buildup`'s own parameters (beside [`Common`], [`Drain`] and [`Warmup`]).
    pub(super) struct BuildupParams {
        workload: BuildupWorkload [Choice] = "poisson"
            => "rounds: the thesis's as its author's incast script runs it (a 64 KiB flow to every front-end host every 200 ms, fixed pairs; unbounded long flows from 500 ms after the first round; implies senders=1..10 initcwnd=12 capture=on writes=bulksend unless set); poisson: Poisson short flows with a mean gap of short_gap, long flows from the start",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        short_gap: Duration [Time] = "200ms"
            => "mean gap between the 64 KB flows to each front-end host, Poisson (the thesis: 200 ms)",
        senders: Vec<u32> [Count] = "1,2,4,6" => "long-flow sender counts to run",
        layout: BuildupLayout [Choice] = "text"
            => "rounds: which hosts send. text: the text's 8 hosts, front-end hosts sending both short and long flows; script: the incast script's, every flow from its own sender host, senders under one leaf and receivers under the other of a one-spine leaf-spine (implies hosts=24 hosts_per_leaf=16 spines=1 unless set)",
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
        if r.own.layout == BuildupLayout::Script {
            let most = r.own.senders.iter().copied().max().unwrap_or(0);
            script_hosts(&r.common, most)?;
            if r.own.workload != BuildupWorkload::Rounds {
                bail!("layout=script places the rounds' flows: it needs workload=rounds");
            }
        }
        Ok(r)
    }
}

/// The buildup's host roles under `layout=script` on the fabric `c`
/// describes, for up to `most` long senders, or why the fabric cannot hold
/// them.
fn script_hosts(c: &Common, most: u32) -> Result<BuildupRounds> {
    if c.topology != Shape::LeafSpine || c.spines != 1 {
        bail!("layout=script needs topology=leaf-spine with spines=1 (one shared link per path, as the script's middle link)");
    }
    let (left, right) = (c.hosts_per_leaf.min(c.hosts), c.hosts.saturating_sub(c.hosts_per_leaf));
    if right > c.hosts_per_leaf {
        bail!(
            "layout=script needs two leaves: hosts ({}) at most 2 × hosts_per_leaf ({})",
            c.hosts,
            c.hosts_per_leaf
        );
    }
    if left < SHORT_PAIRS + most || right < SHORT_PAIRS + LONG_DESTINATIONS {
        bail!(
            "layout=script needs {} sender hosts under leaf 0 ({SHORT_PAIRS} short + {most} long senders) and {} receivers under leaf 1; hosts={} hosts_per_leaf={} give {left} and {right}",
            SHORT_PAIRS + most,
            SHORT_PAIRS + LONG_DESTINATIONS,
            c.hosts,
            c.hosts_per_leaf
        );
    }
    let r = c.hosts_per_leaf;
    Ok(BuildupRounds {
        long_senders: 0,
        long_bytes: LONG_BYTES,
        front: (r + LONG_DESTINATIONS..r + LONG_DESTINATIONS + SHORT_PAIRS).collect(),
        back: (r..r + LONG_DESTINATIONS).collect(),
        senders: BuildupSenders::Separate {
            short: (0..SHORT_PAIRS).collect(),
            long: (SHORT_PAIRS..left).collect(),
        },
    })
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
    fn implied(
        &self,
        resolved: &std::collections::BTreeMap<String, String>,
    ) -> Vec<(&'static str, &'static str)> {
        let mut v = super::implied_by_rounds(resolved, &ROUNDS_POINT);
        if resolved.get("layout").map(|l| l.trim()) == Some("script") {
            v.extend(SCRIPT_LAYOUT);
        }
        v
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
        let arrivals = match r.own.workload {
            BuildupWorkload::Rounds => rounds_span(),
            BuildupWorkload::Poisson => r.warmup.warmup + r.own.duration,
        };
        Ok(estimate_scaled(d, (arrivals + r.drain.drain + Duration::from_secs(1)) * n))
    }
    fn prepare(&self, p: &Params, config: &RunConfig, _dir: &Path) -> Result<Box<dyn Testbed>> {
        let r = Self::read(p)?;
        let d = config.dilation;
        let most = r.own.senders.iter().copied().max().unwrap_or(0);
        let roles = match r.own.layout {
            BuildupLayout::Script => script_hosts(&r.common, most)?,
            BuildupLayout::Text => {
                let hosts = Hosts::quarter_back(r.common.hosts);
                BuildupRounds {
                    long_senders: 0,
                    long_bytes: LONG_BYTES,
                    front: hosts.front,
                    back: hosts.back,
                    senders: BuildupSenders::FrontEnd,
                }
            }
        };
        let run = BuildupRun {
            own: r.own.dilated(d)?,
            drain: r.drain.dilated(d)?,
            warmup: r.warmup.dilated(d)?,
            roles,
        };
        prepare_bed(&r.common, d, run)
    }
}

/// The experiment, with its own parameters dilated.
struct BuildupRun {
    own: BuildupParams,
    drain: Drain,
    warmup: Warmup,
    /// The rounds' host roles (`long_senders` set per count).
    roles: BuildupRounds,
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
        let rounds = self.own.workload == BuildupWorkload::Rounds;
        for &n in senders {
            let tag = format!("{variant}-s{n}-r{}", ctx.repeat);
            let (flows, spec) = if rounds {
                let flows = rounds_flows(&self.roles, n, d)?;
                // The long flows never end: the run ends with the short ones.
                let limit = bed.wall(rounds_span()) + drain;
                let spec = bed.run_spec(ctx, &dir, &variant, limit, tag)?;
                (
                    flows,
                    super::RunSpec {
                        end: RunEnd::ClassEnded(tcpaccel_core::workload::FlowClass::Short),
                        ..spec
                    },
                )
            } else {
                let wl = workload::queue_buildup(ctx.seed ^ u64::from(n), origin, &hosts, n, LONG_BYTES, gap)
                    .context("the queue-buildup workload")?;
                let flows = workload::hold_short(wl.until(origin + duration), warmup);
                (flows, bed.run_spec(ctx, &dir, &variant, warmup + duration + drain, tag)?)
            };
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

/// The span of the rounds' arrivals (experiment units): the last round's
/// start plus 100 ms, when the incast script stops (6.0 s after rounds
/// from 3.5 s to 5.9 s).
fn rounds_span() -> Duration {
    ROUND_PERIOD * (BUILDUP_ROUNDS - 1) + Duration::from_millis(100)
}

/// The incast script's flows with `senders` long senders on `roles`'
/// hosts, their start times stretched by D like every other time.
fn rounds_flows(roles: &BuildupRounds, senders: u32, d: Dilation) -> Result<Vec<Flow>> {
    let spec = BuildupRounds { long_senders: senders, ..roles.clone() };
    let origin = tcpaccel_core::Instant::ZERO;
    let mut flows = spec.flows(origin).context("the thesis's buildup rounds")?;
    for f in &mut flows {
        f.start = origin + (f.start - origin) * d.get();
    }
    Ok(flows)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::scenario::resolve_params;

    #[test]
    fn rounds_implies_the_thesis_operating_point_and_one_to_ten_senders_unless_set() {
        let sets = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let p = resolve_params(&LanesBuildup, false, &sets(&[("workload", "rounds"), ("capture", "off")]))
            .unwrap();
        assert_eq!(p.str("senders").unwrap(), "1,2,3,4,5,6,7,8,9,10");
        for (k, v) in [("initcwnd", "12"), ("writes", "bulksend"), ("rate", "100mbit"), ("cc", "reno")] {
            assert_eq!(p.str(k).unwrap(), v, "{k}");
        }
        assert_eq!(p.str("capture").unwrap(), "off", "a --set wins over the mode's default");
        let p = resolve_params(&LanesBuildup, false, &[]).unwrap();
        assert_eq!((p.str("workload").unwrap(), p.str("senders").unwrap()), ("poisson", "1,2,4,6"));
    }

    fn sets(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_script_layout_puts_every_sender_under_one_leaf_and_every_receiver_under_the_other() {
        let p = resolve_params(&LanesBuildup, false, &sets(&[("workload", "rounds"), ("layout", "script")]))
            .unwrap();
        for (k, v) in
            [("hosts", "24"), ("hosts_per_leaf", "16"), ("spines", "1"), ("senders", "1,2,3,4,5,6,7,8,9,10")]
        {
            assert_eq!(p.str(k).unwrap(), v, "{k}");
        }
        let r = LanesBuildup::read(&p).unwrap();
        let roles = script_hosts(&r.common, 10).unwrap();
        let flows = rounds_flows(&roles, 10, Dilation::ONE).unwrap();
        let leaf = |h: u32| h / 16;
        for f in &flows {
            assert_eq!((leaf(f.src), leaf(f.dst)), (0, 1), "flow {} crosses leaf 0's uplink", f.id);
        }
        let long_src: Vec<u32> = flows
            .iter()
            .filter(|f| f.class == tcpaccel_core::workload::FlowClass::Long)
            .map(|f| f.src)
            .collect();
        let short_src: std::collections::BTreeSet<u32> = flows
            .iter()
            .filter(|f| f.class == tcpaccel_core::workload::FlowClass::Short)
            .map(|f| f.src)
            .collect();
        assert_eq!(long_src, (6..16).collect::<Vec<_>>());
        assert_eq!(short_src, (0..6).collect());
    }

    #[test]
    fn the_script_layout_refuses_a_fabric_that_cannot_hold_it_with_the_reason() {
        let err = |extra: &[(&str, &str)]| {
            let mut v = sets(&[("workload", "rounds"), ("layout", "script")]);
            v.extend(sets(extra));
            // The parameters are checked as they resolve.
            format!("{:#}", resolve_params(&LanesBuildup, false, &v).unwrap_err())
        };
        assert!(err(&[("spines", "2")]).contains("spines=1"));
        assert!(err(&[("topology", "fattree"), ("hosts", "16")]).contains("topology=leaf-spine"));
        assert!(err(&[("hosts", "40")]).contains("two leaves"));
        let few = err(&[("hosts_per_leaf", "12"), ("hosts", "24")]);
        assert!(few.contains("16 sender hosts under leaf 0") && few.contains("give 12 and 12"), "{few}");
        assert!(err(&[("hosts", "20")]).contains("give 16 and 4"));
        let poisson = resolve_params(&LanesBuildup, false, &sets(&[("layout", "script")])).unwrap_err();
        assert!(format!("{poisson:#}").contains("needs workload=rounds"));
    }

    #[test]
    fn the_rounds_flows_take_the_fabric_hosts_and_stretch_by_d() {
        let hosts = Hosts::quarter_back(8);
        let roles = BuildupRounds {
            long_senders: 0,
            long_bytes: LONG_BYTES,
            front: hosts.front,
            back: hosts.back,
            senders: BuildupSenders::FrontEnd,
        };
        let one = rounds_flows(&roles, 10, Dilation::ONE).unwrap();
        assert_eq!(one.len(), 13 * 6 + 10);
        assert!(one
            .iter()
            .filter(|f| f.class == tcpaccel_core::workload::FlowClass::Long)
            .all(|f| f.dst < 2));
        let four = rounds_flows(&roles, 10, Dilation::new(4).unwrap()).unwrap();
        let z = tcpaccel_core::Instant::ZERO;
        for (a, b) in one.iter().zip(&four) {
            assert_eq!((a.id, a.src, a.dst, a.bytes), (b.id, b.src, b.dst, b.bytes));
            assert_eq!(b.start - z, (a.start - z) * 4);
        }
    }
}
