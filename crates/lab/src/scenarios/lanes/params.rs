//! `lanes-params` ([Lanes] Fig. 7.1–7.2): the link-cost policy's switch
//! time against α and γ while a competing single-path flow keeps SL's
//! queues full.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tcpaccel_core::scale::Dilation;
use tcpaccel_core::stats::percentile_sorted;
use tcpaccel_core::workload::{Flow, FlowClass};

use super::{
    check_variants, estimate_scaled, lanes_specs, non_empty, prepare_bed, run_policy, scaled_params, Bed,
    Common, Experiment, Groups, PolicyParams, RunSpec, ScaledParams, ScenarioParams, FLOW_PORT,
};
use crate::engines::flows::RunEnd;
use crate::runner::claims::{Claim, Goal, Measure, GOAL_DIRECTION};
use crate::runner::records::MetricSpec;
use crate::runner::scenario::{ParamSpec, Params, RunConfig, RunCtx, Scenario, Testbed};
use crate::testbeds::fabric::{Fabric, FabricSpec};

pub struct LanesParams;

scaled_params! {
    /// `lanes-params`' own parameters (beside [`Common`]).
    pub(super) struct SweepParams {
        alphas: Vec<f64> [Unitless] = "0.25,1,4,16" => "α values (variant alpha)",
        gammas: Vec<f64> [PerTime] = "0.25,1,4,16" => "γ values (variant gamma), divided by scale as gamma is",
        flows: u32 [Count] = "3" => "long flows per value, 2 s apart",
    }
}

/// The variants: which parameter to sweep.
const SWEEPS: [&str; 2] = ["alpha", "gamma"];

impl LanesParams {
    /// The shared and own parameters, as resolved, the variants and lists checked.
    fn read(p: &Params) -> Result<(Common, SweepParams)> {
        let mut g = Groups::new(p);
        let (c, own) = (g.take::<Common>()?, g.take::<SweepParams>()?);
        g.finish()?;
        check_variants(&c, &SWEEPS)?;
        non_empty("alphas", &own.alphas)?;
        non_empty("gammas", &own.gammas)?;
        Ok((c, own))
    }
}

impl Scenario for LanesParams {
    fn name(&self) -> &'static str {
        "lanes-params"
    }
    fn title(&self) -> &'static str {
        "Lanes link-cost parameters: switch time against α and γ ([Lanes] Fig. 7.1–7.2)"
    }
    fn description(&self) -> &'static str {
        "Long flows h0 → h1 under the link-cost policy while a single-path flow h2 → h1 keeps SL's queues \
         full. Variant alpha sweeps α (weight of the queueing delay), variant gamma sweeps γ (weight of the \
         deadline term). Median connection age at the switch per value."
    }
    fn params(&self) -> Vec<ParamSpec> {
        lanes_specs(
            &[Common::specs(), SweepParams::specs()],
            &[
                ("variants", "alpha,gamma", Some("which parameter to sweep")),
                ("hosts", "4", None),
                (
                    "hosts_per_leaf",
                    "2",
                    Some("hosts under one leaf router (h0, h2 share a leaf; h1 is remote)"),
                ),
            ],
        )
    }
    fn check_params(&self, p: &Params) -> Result<()> {
        Self::read(p).map(drop)
    }
    fn quick(&self) -> Vec<(&'static str, &'static str)> {
        vec![("alphas", "0.5,4"), ("gammas", "0.5,4"), ("flows", "1")]
    }
    fn default_repeats(&self) -> u32 {
        1
    }
    fn variants(&self, p: &Params) -> Result<Vec<String>> {
        Ok(Self::read(p)?.0.variants)
    }
    fn names(&self) -> Vec<(&'static str, &'static str)> {
        super::NAMES.to_vec()
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        Vec::new()
    }
    fn notes(&self, _p: &Params) -> Result<Vec<String>> {
        Ok(vec![
            "Eq. 5.7 with ν in ms (core::lanes) switches once α·(ν_SL − ν_LL) exceeds γ·(t_deadline − t): at \
             about t_deadline − α·Δν/γ. A 128 KB queue at 100 Mbit/s holds 10.5 ms per hop, so α and γ move the \
             switch by tens of ms at their defaults and only large α/γ ratios pull it far before the deadline."
                .into(),
        ])
    }
    fn claims(&self) -> &'static [Claim] {
        CLAIMS
    }
    fn dilation(&self, p: &Params) -> Result<Option<crate::runner::records::Scaled>> {
        super::scaled(p)
    }
    fn estimate(&self, p: &Params, d: Dilation) -> Result<Duration> {
        let own = Self::read(p)?.1;
        let (n, f) = (own.alphas.len() as u32, own.flows);
        Ok(estimate_scaled(d, Duration::from_millis(u64::from(500 + 2000 * f + 1500)) * n))
    }
    fn prepare(&self, p: &Params, config: &RunConfig, _dir: &Path) -> Result<Box<dyn Testbed>> {
        let (c, own) = Self::read(p)?;
        prepare_bed(&c, config.dilation, SweepRun(own.dilated(config.dilation)?))
    }
}

/// The experiment, with its own parameters dilated.
struct SweepRun(SweepParams);

impl Experiment for SweepRun {
    /// Switch time of a long flow against α or γ, SL congested by a
    /// competing flow. With ν in ms, eq. 5.7 switches once
    /// α·(ν_SL − ν_LL) > γ·(t_deadline − t), i.e. at about
    /// t_deadline − α·Δν/γ: a larger α switches earlier, a larger γ later.
    fn run(&self, bed: &Bed, ctx: &mut RunCtx<'_>) -> Result<()> {
        let (key, values): (&str, Vec<f64>) = match ctx.variant.as_str() {
            "alpha" => ("alpha", self.0.alphas.clone()),
            "gamma" => ("gamma", self.0.gammas.clone()),
            v => bail!("unknown variant {v:?}; valid: {}", SWEEPS.join(", ")),
        };
        let flows_per = self.0.flows;
        let d = bed.d;
        let dir = ctx.dir.to_path_buf();
        let mut all = Vec::new();
        for &v in &values {
            let mut policy = PolicyParams::from(&bed.params, "link-cost")?;
            if key == "alpha" {
                policy.alpha = v;
            } else {
                policy.gamma = v;
            }
            // h0 → h1 long flows one after another, each cut after 2 s, while
            // a single-path flow h2 → h1 on SL keeps the SL queues full.
            let window = bed.wall(Duration::from_secs(2));
            let bg = Background::start(
                &bed.fab,
                2,
                1,
                window * flows_per + bed.wall(Duration::from_secs(10)),
                bed.wall(Duration::from_millis(300)),
            )?;
            let flow = Flow {
                id: 0,
                start: tcpaccel_core::Instant::ZERO,
                src: 0,
                dst: 1,
                bytes: 1 << 40,
                class: FlowClass::Long,
            };
            let mut ages = Vec::new();
            for i in 0..flows_per {
                let spec = RunSpec {
                    variant: "link-cost",
                    policy: Some(policy.clone()),
                    cc: bed.params.cc.clone(),
                    seed: ctx.seed,
                    limit: window,
                    end: RunEnd::AllFlows,
                    capture: false,
                    writes: crate::engines::flows::Writes::Bulk,
                    dir: &dir,
                    tag: format!("{key}{v}-f{i}-r{}", ctx.repeat),
                };
                let o = run_policy(&bed.fab, &[flow], &spec)?;
                let wall_ages = o.daemons.map(|d| d.switch_ages_ms).unwrap_or_default();
                ages.extend(wall_ages.into_iter().map(|a| d.ms_to_experiment(a)));
            }
            bg.stop()?;
            if ages.is_empty() {
                ctx.note(format!("{key}={v}: no switch decision"))?;
                continue;
            }
            let mut a = ages.clone();
            a.sort_by(f64::total_cmp);
            let med = percentile_sorted(&a, 50.0);
            // γ as given (experiment units), not as the daemon ran it.
            let shown = if key == "gamma" { v * f64::from(d.get()) } else { v };
            ctx.sample(&format!("switch_vs_{key}_ms"), shown, med)?;
            ctx.metric(&format!("switch_ms@{key}={shown}"), med);
            all.push(med);
        }
        if all.is_empty() {
            bail!("no switch happened at any {key} value");
        }
        Ok(())
    }
}

/// A single-path TCP bulk transfer on SL from `src` to `dst` (competing traffic).
struct Background {
    stop: Arc<AtomicBool>,
    sender: JoinHandle<Result<()>>,
    recv: tcpaccel_traffic::RecvHandle,
}

impl Background {
    fn start(fab: &Fabric, src: u32, dst: u32, limit: Duration, fill: Duration) -> Result<Background> {
        let dst_addr = std::net::SocketAddr::new(FabricSpec::host_addr(dst, 0).into(), FLOW_PORT + 1);
        let src_addr = std::net::SocketAddr::new(FabricSpec::host_addr(src, 0).into(), 0);
        let recv = tcpaccel_sys::netns::run_in(&fab.hosts[dst as usize].ns, move || {
            tcpaccel_traffic::spawn_recv(tcpaccel_traffic::RecvConfig::new(dst_addr))
        })?
        .context("starting the background receiver")?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut cfg = tcpaccel_traffic::SendConfig::new(dst_addr);
        cfg.volume = tcpaccel_traffic::Volume::Duration(limit + fill);
        cfg.interval = None;
        cfg.bind = Some(src_addr);
        cfg.cc = Some("reno".into());
        cfg.stop = Some(stop.clone());
        let ns = fab.hosts[src as usize].ns.clone();
        let sender = std::thread::spawn(move || -> Result<()> {
            tcpaccel_sys::netns::enter(&ns)?;
            tcpaccel_traffic::run_send(cfg, |_| {}).map(|_| ()).map_err(Into::into)
        });
        // Let it fill the queue before the measured flows start.
        std::thread::sleep(fill);
        Ok(Background { stop, sender, recv })
    }

    fn stop(self) -> Result<()> {
        self.stop.store(true, Ordering::SeqCst);
        let r = self.sender.join();
        let _ = self.recv.stop();
        match r {
            Ok(r) => r.context("the background flow"),
            Err(_) => bail!("the background sender panicked"),
        }
    }
}

/// What this scenario claims: published figures and goals, judged by the report against a run's summaries.
pub(crate) const CLAIMS: &[Claim] = &[
    Claim {
        text: "A larger α switches earlier (switch age at the largest α ÷ at the smallest)",
        measure: Measure::PointSpan { variant: "alpha", base: "switch_ms", label: "alpha" },
        goal: Goal::Below(1.0),
        goal_source: GOAL_DIRECTION,
        published: None,
        when: &[],
    },
    Claim {
        text: "A larger γ switches later (switch age at the largest γ ÷ at the smallest)",
        measure: Measure::PointSpan { variant: "gamma", base: "switch_ms", label: "gamma" },
        goal: Goal::Above(1.0),
        goal_source: GOAL_DIRECTION,
        published: None,
        when: &[],
    },
];
