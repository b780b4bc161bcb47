//! `lab demo`: the tour on an emulated long fat path. Kernel defaults against
//! buffers sized to the bandwidth-delay product ([HPC-TCP]'s first lesson),
//! then the same with static pacing at the bottleneck rate ([PSPacer]'s PSPS)
//! and with BBR, side by side in one run.

use crate::runner::claims::{Claim, Figure, Goal, Measure, GOAL_BENCH, GOAL_DIRECTION};
use crate::runner::records::MetricSpec;
use crate::runner::scenario::{ParamSpec, Params, RunConfig, RunCtx, Scenario, Testbed};
use crate::runner::typed::{choices, scenario_params, ScenarioParams};
use crate::testbeds::dumbbell::{bulk, metric, standard_metrics, HostSetup, Path2};
use anyhow::{bail, Result};
use std::path::Path;
use std::time::Duration;
use tcpaccel_core::scale::Dilation;
use tcpaccel_core::units::{bdp_bytes, Bytes, Rate};
use tcpaccel_traffic::Pace;

pub struct Demo;

scenario_params! {
    /// The demo's parameters, read from the resolved map ([`Params::typed`]).
    pub struct DemoParams {
        rate: Rate = "300mbit" => "bottleneck rate (on the wire)",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        rtt: Duration = "100ms" => "round-trip propagation delay",
        buffer: Bytes = "1MB" => "drop-tail buffer at the bottleneck",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        duration: Duration = "25s" => "length of each transfer",
        variants: Vec<String> = VARIANTS.join(",") => "which variants to run",
    }
}

impl DemoParams {
    /// The parameters with their variants checked.
    fn read(p: &Params) -> Result<DemoParams> {
        let q: DemoParams = p.typed()?;
        choices("variants", &q.variants, &VARIANTS)?;
        Ok(q)
    }
    fn path(&self) -> Path2 {
        Path2 { rate: self.rate, rtt: self.rtt, buffer: self.buffer }
    }
}

const VARIANTS: [&str; 4] = ["defaults", "bdp-buffers", "static-pacing", "bbr"];

impl Scenario for Demo {
    fn name(&self) -> &'static str {
        "demo"
    }
    fn title(&self) -> &'static str {
        "tcpaccel tour: a long fat path, tuned and paced"
    }
    fn description(&self) -> &'static str {
        "One bulk CUBIC transfer per variant over an emulated bottleneck: kernel default buffers, \
         buffers sized to 2×BDP ([HPC-TCP]), plus static pacing at the bottleneck rate ([PSPacer]), \
         and BBR with the same buffers."
    }
    fn params(&self) -> Vec<ParamSpec> {
        DemoParams::specs()
    }
    fn check_params(&self, p: &Params) -> Result<()> {
        DemoParams::read(p).map(drop)
    }
    fn quick(&self) -> Vec<(&'static str, &'static str)> {
        vec![("duration", "6s"), ("rate", "100mbit")]
    }
    fn default_repeats(&self) -> u32 {
        1
    }
    fn variants(&self, p: &Params) -> Result<Vec<String>> {
        Ok(DemoParams::read(p)?.variants)
    }
    fn names(&self) -> Vec<(&'static str, &'static str)> {
        crate::testbeds::dumbbell::metric::NAMES.to_vec()
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        standard_metrics()
    }
    fn notes(&self, p: &Params) -> Result<Vec<String>> {
        let q = DemoParams::read(p)?;
        let bdp = bdp_bytes(q.rate, q.rtt);
        // New namespaces start from the host's values, so the host's
        // maxima are what the default variants run with.
        let max = |key: &str| {
            std::fs::read_to_string(format!("/proc/sys/net/ipv4/{key}"))
                .ok()
                .and_then(|v| v.split_whitespace().nth(2).and_then(|m| m.parse::<u64>().ok()))
        };
        let (wmem, rmem) = (max("tcp_wmem"), max("tcp_rmem"));
        let text = |m: Option<u64>| m.map_or_else(|| "unreadable".to_string(), |m| Bytes(m).to_string());
        Ok(vec![format!(
            "BDP of this path: {bdp} bytes ({}). 'bdp-buffers' raises tcp_rmem/tcp_wmem maxima to 2×BDP in both \
             namespaces; the other variants keep this host's values (tcp_wmem max {}, tcp_rmem max {}), which \
             cap the window when they are below the BDP. {} Route metrics caching is off in every variant \
             (tcp_no_metrics_save=1).",
            Bytes(bdp),
            text(wmem),
            text(rmem),
            buffers_verdict(bdp, wmem, rmem)
        )])
    }
    fn claims(&self) -> &'static [Claim] {
        CLAIMS
    }
    fn estimate(&self, p: &Params, _d: Dilation) -> Result<Duration> {
        Ok(DemoParams::read(p)?.duration + Duration::from_secs(3))
    }
    fn prepare(&self, p: &Params, _config: &RunConfig, _dir: &Path) -> Result<Box<dyn Testbed>> {
        let q = DemoParams::read(p)?;
        Ok(Box::new(DemoBed { path: q.path(), duration: q.duration }))
    }
}

/// What the host's buffer maxima mean for 'bdp-buffers' on a path of `bdp`
/// bytes: nothing to fix when both already exceed it.
fn buffers_verdict(bdp: u64, wmem: Option<u64>, rmem: Option<u64>) -> String {
    match (wmem, rmem) {
        (Some(w), Some(r)) if w >= bdp && r >= bdp => format!(
            "Here both maxima already exceed the BDP ({} and {} against {}), so the defaults' window is not \
             capped by buffers: expect 'bdp-buffers' to measure about like 'defaults' on this host.",
            Bytes(w),
            Bytes(r),
            Bytes(bdp)
        ),
        (Some(w), Some(r)) => {
            let (name, m) = if w <= r { ("tcp_wmem", w) } else { ("tcp_rmem", r) };
            format!(
                "Here the {name} maximum is below the BDP ({} against {}): expect the defaults to be capped by \
                 it and 'bdp-buffers' to gain.",
                Bytes(m),
                Bytes(bdp)
            )
        }
        _ => String::new(),
    }
}

/// tcp_rmem / tcp_wmem with a maximum of 2×BDP (the tutorial's advice), never below the defaults.
pub fn bdp_sysctls(path: &Path2) -> Vec<(String, String)> {
    let max = (2 * bdp_bytes(path.rate, path.rtt)).max(6 * 1024 * 1024);
    vec![
        ("net.ipv4.tcp_rmem".into(), format!("4096 131072 {max}")),
        ("net.ipv4.tcp_wmem".into(), format!("4096 16384 {max}")),
    ]
}

struct DemoBed {
    path: Path2,
    duration: Duration,
}

impl Testbed for DemoBed {
    fn run_one(&mut self, ctx: &mut RunCtx<'_>) -> Result<()> {
        let tuned = bdp_sysctls(&self.path);
        let setup = match ctx.variant.as_str() {
            "defaults" => HostSetup::default(),
            "bdp-buffers" => {
                HostSetup { sender_sysctls: tuned.clone(), receiver_sysctls: tuned, ..HostSetup::default() }
            }
            "static-pacing" => HostSetup {
                sender_sysctls: tuned.clone(),
                receiver_sysctls: tuned,
                pace: Some(Pace::Static(self.path.rate)),
                ..HostSetup::default()
            },
            "bbr" => HostSetup {
                sender_sysctls: tuned.clone(),
                receiver_sysctls: tuned,
                cc: Some("bbr".into()),
                ..HostSetup::default()
            },
            v => bail!("unknown variant {v}"),
        };
        bulk(ctx, &self.path, &setup, self.duration)?;
        Ok(())
    }
}

/// What this scenario claims: published figures and goals, judged by the report against a run's summaries.
pub(crate) const CLAIMS: &[Claim] = &[
    Claim {
        text: "Static pacing at the bottleneck rate leaves no drops at the bottleneck",
        measure: Measure::Median { variant: "static-pacing", metric: metric::DROPS },
        goal: Goal::AtMost(0.0),
        goal_source: GOAL_DIRECTION,
        published: Some(Figure { value: 0.0, source: "[PSPacer]: PSPS 0 drops" }),
        when: &[],
    },
    Claim {
        text: "Static pacing reaches 90% of the path's goodput limit",
        measure: Measure::ShareOfLimit { variant: "static-pacing", metric: metric::GOODPUT_MBPS },
        goal: Goal::AtLeast(0.90),
        goal_source: GOAL_BENCH,
        // 433 Mbit/s of a 500 × 1448/1538 = 470.7 Mbit/s limit.
        published: Some(Figure { value: 433.0 / 470.7, source: "[PSPacer]: PSPS 433 of 470.7 Mbit/s" }),
        when: &[],
    },
    // [PSPacer]'s noPSP is its path unpaced with the same socket buffers as
    // PSPS, so the ratio it is held against is static-pacing ÷ bdp-buffers
    // (pacing the one difference); against defaults the measured gain would
    // also count the buffers.
    Claim {
        text: "Static pacing beats the same buffers unpaced (static-pacing ÷ bdp-buffers)",
        measure: Measure::Ratio {
            num: ("static-pacing", metric::GOODPUT_MBPS),
            den: ("bdp-buffers", metric::GOODPUT_MBPS),
        },
        goal: Goal::Above(1.0),
        goal_source: GOAL_DIRECTION,
        // PSPS 433 / noPSP 200.
        published: Some(Figure { value: 433.0 / 200.0, source: "[PSPacer]: PSPS 433 / noPSP 200 Mbit/s" }),
        when: &[],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_note_says_whether_the_host_maxima_hold_the_bdp() {
        let bdp = 3_750_000;
        let v = buffers_verdict(bdp, Some(4 << 20), Some(32 << 20));
        assert!(v.contains("already exceed the BDP (4MiB and 32MiB against 3.75MB)"), "{v}");
        let v = buffers_verdict(bdp, Some(1 << 20), Some(32 << 20));
        assert!(v.contains("the tcp_wmem maximum is below the BDP (1MiB against 3.75MB)"), "{v}");
        assert_eq!(buffers_verdict(bdp, None, Some(1)), "");
    }
}
