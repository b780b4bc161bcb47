//! `lab run tuning`: [HPC-TCP]'s long-fat-network lesson (1 Gbit/s, 100 ms:
//! 240 Mbit/s with default settings, 940 Mbit/s tuned). Kernel defaults
//! against the settings `tcpaccel doctor` applies for this path, one bulk
//! transfer each; the doctor's findings go into the report.
//!
//! The doctor examines a freshly built copy of the testbed (the same
//! per-namespace defaults every run starts from) and its automatic fixes
//! (`apply::plan`) become the sysctls of the `doctor` variant. Host-global
//! settings (net.core.*mem_max) cannot differ per namespace and are reported
//! as advice only; per-namespace autotuning limits (tcp_rmem/tcp_wmem) do not
//! need them.

use crate::runner::claims::{Claim, Figure, Goal, Measure, GOAL_BENCH, GOAL_DIRECTION};
use crate::runner::records::{MetricSpec, Published};
use crate::runner::scenario::{ParamSpec, Params, RunConfig, RunCtx, Scenario, Testbed};
use crate::runner::typed::{scenario_params, ScenarioParams};
use crate::testbeds::dumbbell::{bulk, metric, standard_metrics, HostSetup, Path2};
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::time::Duration;
use tcpaccel_core::scale::Dilation;
use tcpaccel_core::units::{Bytes, Rate};
use tcpaccel_net::Network;
use tcpaccel_tune::collect::Probe;
use tcpaccel_tune::facts::PathSpec;

pub struct Tuning;

const VARIANTS: [&str; 2] = ["defaults", "doctor"];

scenario_params! {
    /// The tuning scenario's parameters, read from the resolved map ([`Params::typed`]).
    pub struct TuningParams {
        rate: Rate = "1gbit" => "bottleneck rate (on the wire)",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        rtt: Duration = "100ms" => "round-trip propagation delay",
        buffer: Bytes = "12.5MB" => "drop-tail buffer at the bottleneck (one BDP)",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        duration: Duration = "30s" => "length of each transfer",
    }
}

impl Scenario for Tuning {
    fn name(&self) -> &'static str {
        "tuning"
    }
    fn title(&self) -> &'static str {
        "Host tuning on a long fat network ([HPC-TCP]): defaults vs doctor-applied"
    }
    fn description(&self) -> &'static str {
        "One CUBIC bulk transfer over an emulated 1 Gbit/s, 100 ms path with kernel defaults, and with the \
         sysctls `tcpaccel doctor --apply` chooses for that path in both end hosts' namespaces."
    }
    fn params(&self) -> Vec<ParamSpec> {
        TuningParams::specs()
    }
    fn check_params(&self, p: &Params) -> Result<()> {
        p.typed::<TuningParams>().map(drop).map_err(Into::into)
    }
    fn quick(&self) -> Vec<(&'static str, &'static str)> {
        vec![("duration", "6s"), ("rate", "200mbit"), ("buffer", "2.5MB")]
    }
    fn variants(&self, _p: &Params) -> Result<Vec<String>> {
        Ok(VARIANTS.iter().map(|s| s.to_string()).collect())
    }
    fn paper_scale(&self) -> &'static [(&'static str, &'static str)] {
        &[("rate", "1gbit")]
    }
    fn names(&self) -> Vec<(&'static str, &'static str)> {
        [crate::testbeds::dumbbell::metric::NAMES, &[("share_of_limit", "Share of the path's goodput limit")]]
            .concat()
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        standard_metrics()
    }
    fn published(&self) -> Vec<Published> {
        let src = "[HPC-TCP] (1 Gbit/s, 100 ms)";
        vec![
            Published {
                variant: "defaults".into(),
                metric: metric::GOODPUT_MBPS.into(),
                value: 240.0,
                source: src.into(),
            },
            Published {
                variant: "doctor".into(),
                metric: metric::GOODPUT_MBPS.into(),
                value: 940.0,
                source: src.into(),
            },
        ]
    }
    fn notes(&self, p: &Params) -> Result<Vec<String>> {
        let mut n = vec![
            "The tutorial's figures come from real 1 GbE hosts in 2009 with that era's defaults (64 KB–4 MB \
                          buffers); this kernel's defaults are larger, so the gap to close is smaller."
                .to_string(),
        ];
        if p.typed::<TuningParams>()?.rate.bits_per_sec() > 500_000_000 {
            n.push(
                "At 1 Gbit/s the emulator, sender and receiver share two cores; see BENCHMARKS.md for what the \
                 emulator sustains here."
                    .into(),
            );
        }
        Ok(n)
    }
    fn default_repeats(&self) -> u32 {
        3
    }
    fn claims(&self) -> &'static [Claim] {
        CLAIMS
    }
    fn estimate(&self, p: &Params, _d: Dilation) -> Result<Duration> {
        Ok(p.typed::<TuningParams>()?.duration + Duration::from_secs(3))
    }
    fn prepare(&self, p: &Params, _config: &RunConfig, _dir: &Path) -> Result<Box<dyn Testbed>> {
        let q: TuningParams = p.typed()?;
        let path = Path2 { rate: q.rate, rtt: q.rtt, buffer: q.buffer };
        let (sender, receiver, findings) = doctor_plan(&path)?;
        Ok(Box::new(TuningBed { path, duration: q.duration, sender, receiver, findings, noted: false }))
    }
}

type Sysctls = Vec<(String, String)>;

/// Runs the doctor in both hosts of a fresh testbed; returns each host's sysctl
/// fixes and the findings as text.
fn doctor_plan(path: &Path2) -> Result<(Sysctls, Sysctls, Vec<String>)> {
    let net = Network::up(&path.topology()?).context("building a testbed for the doctor")?;
    let spec = PathSpec {
        rate: Some(path.rate),
        rtt: Some(path.rtt),
        rtt_source: Some("given".into()),
        egress_dev: None,
    };
    let probe = Probe { target: None, handshakes: 0, timeout: Duration::from_secs(1), bandwidth: None };
    let mut plans = Vec::new();
    let mut text = Vec::new();
    for host in ["h1", "h2"] {
        let ns = net.ns(host)?;
        let (_facts, findings) = tcpaccel_tune::examine(Some(&ns), spec.clone(), &probe)
            .with_context(|| format!("doctor in {host}"))?;
        for f in &findings {
            text.push(format!("doctor on {host}: [{:?}] {}", f.severity, f.summary));
        }
        let plan = tcpaccel_tune::apply::plan(&findings);
        plans.push(plan.sysctls);
    }
    drop(net.teardown());
    let receiver = plans.pop().unwrap_or_default();
    let sender = plans.pop().unwrap_or_default();
    Ok((sender, receiver, text))
}

struct TuningBed {
    path: Path2,
    duration: Duration,
    sender: Sysctls,
    receiver: Sysctls,
    findings: Vec<String>,
    noted: bool,
}

impl Testbed for TuningBed {
    fn run_one(&mut self, ctx: &mut RunCtx<'_>) -> Result<()> {
        let setup = match ctx.variant.as_str() {
            "defaults" => HostSetup::default(),
            "doctor" => {
                if !self.noted {
                    for f in &self.findings {
                        ctx.note(f.clone())?;
                    }
                    let applied: Vec<String> = self.sender.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    ctx.note(format!("applied in the sender: {}", applied.join(", ")))?;
                    self.noted = true;
                }
                HostSetup {
                    sender_sysctls: self.sender.clone(),
                    receiver_sysctls: self.receiver.clone(),
                    ..HostSetup::default()
                }
            }
            v => bail!("unknown variant {v}"),
        };
        let r = bulk(ctx, &self.path, &setup, self.duration)?;
        ctx.metric(SHARE_OF_LIMIT, r.goodput_mbps / goodput_limit_mbps(&self.path));
        Ok(())
    }
}

/// The doctor variant's goodput ÷ [`goodput_limit_mbps`], a metric of
/// this scenario beside the dumbbell's.
const SHARE_OF_LIMIT: &str = "share_of_limit";

/// Goodput a full pipe gives: 1448 payload bytes per 1538 on the wire.
pub fn goodput_limit_mbps(p: &Path2) -> f64 {
    p.rate.bits_per_sec() as f64 * 1448.0 / 1538.0 / 1e6
}

/// What this scenario claims: published figures and goals, judged by the report against a run's summaries.
pub(crate) const CLAIMS: &[Claim] = &[
    Claim {
        text: "Doctor-applied settings reach 90% of the path's goodput limit",
        measure: Measure::Median { variant: "doctor", metric: SHARE_OF_LIMIT },
        goal: Goal::AtLeast(0.90),
        goal_source: GOAL_BENCH,
        // 940 Mbit/s of 1000 × 1448/1538 = 941.5.
        published: Some(Figure { value: 940.0 / 941.5, source: "[HPC-TCP]: tuned 940 of 941.5 Mbit/s" }),
        when: &[],
    },
    Claim {
        text: "Doctor-applied settings beat the kernel defaults' goodput (doctor ÷ defaults)",
        measure: Measure::Ratio {
            num: ("doctor", metric::GOODPUT_MBPS),
            den: ("defaults", metric::GOODPUT_MBPS),
        },
        goal: Goal::Above(1.0),
        goal_source: GOAL_DIRECTION,
        published: Some(Figure { value: 940.0 / 240.0, source: "[HPC-TCP]: 940 / 240 Mbit/s" }),
        when: &[],
    },
];
