//! `lab idle`: [HPC-TCP]'s intermittent sender — 10 MB every 2 s over
//! 500 Mbit/s / 100 ms — and what slow start after idle costs each burst.
//!
//! Variants: `defaults` (Linux restarts slow start after an idle longer
//! than the RTO), `no-ssai` (`net.ipv4.tcp_slow_start_after_idle=0` in the
//! sender's namespace: the window survives the pause, and the whole window
//! leaves as one burst), `no-ssai-resume` (that plus `--resume-pacing`: the
//! resumed window is paced at the last delivery rate, [HPC-TCP]),
//! `no-ssai-bpf` (that plus the cgroup pacer's per-ACK dynamic pacing: the
//! cap the last ACK before the pause set, cwnd·mss/RTT by [PSPacer] eq. 1,
//! spreads the resumed window over one RTT, with no userspace timer). Each burst
//! is a flow record (completion time from the receiver's cumulative ACK, see
//! `tcpaccel_traffic::burst`), so the report draws their CDF.
//!
//! What it is not: one connection per run, built fresh per run (no state
//! leaks between variants); no application think time beyond the schedule.

use crate::engines::cgroup_pacer::BpfPacing;
use crate::runner::claims::{Claim, Figure, Goal, Measure, GOAL_BENCH, GOAL_DIRECTION};
use crate::runner::records::MetricSpec;
use crate::runner::scenario::{ParamSpec, Params, RunConfig, RunCtx, Scenario, Testbed};
use crate::runner::typed::{choices, scenario_params, ScenarioParams};
use crate::testbeds::dumbbell::{baseline_sysctls, sockbuf_sysctls, sysctls, Path2, DATA_PORT, DEFAULT_CC};
use anyhow::{bail, Context, Result};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;
use tcpaccel_core::scale::Dilation;
use tcpaccel_core::units::{Bytes, Rate};
use tcpaccel_net::Network;
use tcpaccel_traffic::{run_bursts, spawn_recv, BurstRecord, Bursts, RecvConfig, SendConfig, Volume};

pub struct Idle;

const VARIANTS: [&str; 4] = ["defaults", "no-ssai", "no-ssai-resume", "no-ssai-bpf"];

scenario_params! {
    /// The idle scenario's parameters, read from the resolved map ([`Params::typed`]).
    pub struct IdleParams {
        rate: Rate = "500mbit" => "bottleneck rate (on the wire)",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        rtt: Duration = "100ms" => "round-trip propagation delay",
        buffer: Bytes = "1MB" => "drop-tail buffer at the bottleneck",
        sockbuf: Bytes = "12.5MB" => "socket buffer maximum (tcp_rmem/tcp_wmem) on both hosts",
        burst: Bytes = "10MB" => "bytes per burst",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        every: Duration = "2s" => "period between burst starts",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        duration: Duration = "20s" => "length of each run",
        variants: Vec<String> = VARIANTS.join(",") => "which variants to run",
        cc: String = DEFAULT_CC
            => "sender's congestion control, set per socket (a namespace inherits the host's default). Linux \
                skips the restart after idle for a module with its own cong_control, such as bbr",
    }
}

impl IdleParams {
    /// The parameters with their variants checked.
    fn read(p: &Params) -> Result<IdleParams> {
        let q: IdleParams = p.typed()?;
        choices("variants", &q.variants, &VARIANTS)?;
        Ok(q)
    }
}

/// The names of this scenario's metrics, for its records, claims and
/// tests to name them by.
pub mod metric {
    pub use crate::testbeds::dumbbell::metric::RETRANSMITS;
    pub const BURST_P50_MS: &str = "burst_p50_ms";
    pub const BURST_P90_MS: &str = "burst_p90_ms";
    pub const FIRST_BURST_MS: &str = "first_burst_ms";

    /// The human names of the keys this scenario records (metrics and
    /// series), as its tables and plots title them.
    pub const NAMES: &[(&str, &str)] = &[
        (BURST_P50_MS, "Burst completion after idle, median"),
        (BURST_P90_MS, "Burst completion after idle, p90"),
        (FIRST_BURST_MS, "First burst completion"),
        ("burst_ms", "Burst completion"),
        ("cwnd_at_start", "Congestion window at burst start"),
        ("cwnd_1ms", "Congestion window 1 ms into a burst"),
        ("resume_rate_mbps", "Resume pacing rate"),
    ];
}

impl Scenario for Idle {
    fn name(&self) -> &'static str {
        "idle"
    }
    fn title(&self) -> &'static str {
        "[HPC-TCP]: bursts after idle — slow start after idle vs kept window vs resume pacing"
    }
    fn description(&self) -> &'static str {
        "A sender that writes 10 MB every 2 s over a 500 Mbit/s, 100 ms path: per-burst completion \
         time with Linux defaults, with tcp_slow_start_after_idle=0, and with that plus pacing of \
         the resumed burst at the last delivery rate."
    }
    fn params(&self) -> Vec<ParamSpec> {
        IdleParams::specs()
    }
    fn check_params(&self, p: &Params) -> Result<()> {
        IdleParams::read(p).map(drop)
    }
    fn quick(&self) -> Vec<(&'static str, &'static str)> {
        // A fifth of the rate, burst, buffers: same burst time and BDP ratios.
        vec![
            ("rate", "100mbit"),
            ("buffer", "200KB"),
            ("sockbuf", "2.5MB"),
            ("burst", "2MB"),
            ("duration", "8s"),
        ]
    }
    fn default_repeats(&self) -> u32 {
        1
    }
    fn variants(&self, p: &Params) -> Result<Vec<String>> {
        Ok(IdleParams::read(p)?.variants)
    }
    fn paper_scale(&self) -> &'static [(&'static str, &'static str)] {
        &[("rate", "500mbit"), ("burst", "10MB")]
    }
    fn names(&self) -> Vec<(&'static str, &'static str)> {
        [crate::testbeds::dumbbell::metric::NAMES, metric::NAMES].concat()
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        let ms = |name: &str, description: &str| MetricSpec {
            name: name.into(),
            unit: "ms".into(),
            higher_is_better: false,
            description: description.into(),
        };
        vec![
            ms(
                metric::BURST_P50_MS,
                "median completion time of the bursts after the first (resumed after idle)",
            ),
            ms(metric::BURST_P90_MS, "90th percentile of the same"),
            ms(
                metric::FIRST_BURST_MS,
                "completion time of the first burst (a fresh connection's slow start)",
            ),
            MetricSpec {
                name: metric::RETRANSMITS.into(),
                unit: "segments".into(),
                higher_is_better: false,
                description: "sender's TCP retransmissions over the run".into(),
            },
        ]
    }
    fn notes(&self, p: &Params) -> Result<Vec<String>> {
        let q = IdleParams::read(p)?;
        let (b, r) = (q.burst, q.rate);
        let ideal = if r.bits_per_sec() > 0 { b.0 as f64 * 8.0 / r.bits_per_sec() as f64 * 1e3 } else { 0.0 };
        Ok(vec![
            format!(
                "Ideal completion of one burst at this rate: {ideal:.0} ms of transmission (the published \
                 160 ms is 10 MB at 500 Mbit/s); measured times run from the scheduled start to the ACK of \
                 the last byte, so they also contain one RTT, and the verdict holds them against \
                 transmission + RTT."
            ),
            "tcp_slow_start_after_idle is a per-namespace sysctl; there is no per-socket equivalent.".into(),
            "Bursts after the first are the ones that resume after idle; the first is a fresh slow start in \
             every variant and is reported apart (first_burst_ms)."
                .into(),
        ])
    }
    fn claims(&self) -> &'static [Claim] {
        CLAIMS
    }
    fn estimate(&self, p: &Params, _d: Dilation) -> Result<Duration> {
        Ok(IdleParams::read(p)?.duration + Duration::from_secs(4))
    }
    fn prepare(&self, p: &Params, _config: &RunConfig, _dir: &Path) -> Result<Box<dyn Testbed>> {
        let q = IdleParams::read(p)?;
        Ok(Box::new(IdleBed {
            path: Path2 { rate: q.rate, rtt: q.rtt, buffer: q.buffer },
            sockbuf: q.sockbuf,
            burst: q.burst,
            every: q.every,
            duration: q.duration,
            cc: q.cc,
        }))
    }
}

struct IdleBed {
    path: Path2,
    sockbuf: Bytes,
    burst: Bytes,
    every: Duration,
    duration: Duration,
    cc: String,
}

impl Testbed for IdleBed {
    fn run_one(&mut self, ctx: &mut RunCtx<'_>) -> Result<()> {
        let (ssai, resume) = match ctx.variant.as_str() {
            "defaults" => ("1", false),
            "no-ssai" | "no-ssai-bpf" => ("0", false),
            "no-ssai-resume" => ("0", true),
            v => bail!("unknown variant {v}"),
        };
        let bpf = match ctx.variant.as_str() {
            "no-ssai-bpf" => Some(BpfPacing::join("dynamic", false)?),
            _ => None,
        };
        let net = Network::up(&self.path.topology()?).context("building the dumbbell")?;
        let mut s_ctl = baseline_sysctls();
        s_ctl.extend(sockbuf_sysctls(self.sockbuf));
        s_ctl.push(("net.ipv4.tcp_slow_start_after_idle".into(), ssai.into()));
        let mut r_ctl = baseline_sysctls();
        r_ctl.extend(sockbuf_sysctls(self.sockbuf));
        sysctls(&net, "h1", &s_ctl)?;
        sysctls(&net, "h2", &r_ctl)?;
        let listen = SocketAddr::new(net.addr("h2")?, DATA_PORT);
        let recv = net
            .run_in("h2", move || spawn_recv(RecvConfig::new(listen)))?
            .context("starting the receiver in h2")?;
        let mut cfg = SendConfig::new(listen);
        cfg.volume = Volume::Duration(self.duration);
        cfg.interval = None;
        cfg.cc = Some(self.cc.clone());
        cfg.seed = ctx.seed;
        cfg.stop = Some(crate::runner::scenario::stop_flag());
        let b = Bursts { bytes: self.burst.0, every: self.every, resume_pacing: resume };
        let (tx, rx) = std::sync::mpsc::channel::<BurstRecord>();
        let summary = net
            .run_in("h1", move || {
                run_bursts(&cfg, b, |r| {
                    let _ = tx.send(r.clone());
                })
            })?
            .context("sending bursts from h1")?;
        let _ = recv.stop();
        ctx.emulator_timing(crate::testbeds::emulator_timing(&net.teardown().emulators));
        if let Some(b) = bpf {
            b.leave()?;
        }
        let records: Vec<BurstRecord> = rx.try_iter().collect();
        for r in &records {
            // An incomplete burst is recorded as such, with the time it had.
            let fct = r.completion_ms.unwrap_or((self.duration.as_secs_f64() - r.start_s).max(0.0) * 1e3);
            ctx.flow(u64::from(r.index), "burst", r.bytes, r.start_s, fct, r.completion_ms.is_some())?;
            ctx.sample("burst_ms", r.start_s, fct)?;
            ctx.sample("cwnd_at_start", r.start_s, f64::from(r.cwnd_at_start))?;
            if let Some(c) = r.cwnd_1ms {
                ctx.sample("cwnd_1ms", r.start_s, f64::from(c))?;
            }
            if let Some(p) = r.resume {
                ctx.sample("resume_rate_mbps", r.start_s, p.rate.as_mbps())?;
            }
        }
        if let Some(c) = records.iter().find(|r| r.index == 0).and_then(|r| r.completion_ms) {
            ctx.metric(metric::FIRST_BURST_MS, c);
        }
        ctx.metric(metric::RETRANSMITS, f64::from(summary.retransmits));
        let r = resumed(&records, self.every);
        if r.late > 0 || r.incomplete > 0 {
            ctx.note(format!(
                "{} burst(s) started late, right after one that overran its {} ms period (no idle before \
                 them: left out), {} did not complete before the run ended (heavy losses in the first \
                 burst's slow start, or a machine too busy to carry the rate: see the fidelity records)",
                r.late,
                self.every.as_millis(),
                r.incomplete
            ))?;
        }
        // Without a resumed burst the run still counts what it measured; the
        // claims on the resumed bursts read "unknown", naming the metric.
        if !r.ms.is_empty() {
            let mut later = r.ms;
            later.sort_by(f64::total_cmp);
            ctx.metric(metric::BURST_P50_MS, tcpaccel_core::stats::percentile_sorted(&later, 50.0));
            ctx.metric(metric::BURST_P90_MS, tcpaccel_core::stats::percentile_sorted(&later, 90.0));
        }
        Ok(())
    }
}

/// The bursts that resumed after idle, out of a run's records.
#[derive(Debug, PartialEq)]
struct Resumed {
    /// Completion times (ms) of the bursts after the first that completed
    /// and had an idle period before them.
    ms: Vec<f64>,
    /// Bursts after one that overran its period (or never completed): the
    /// sender starts them at once, so no idle precedes them.
    late: usize,
    /// Bursts after the first that did not complete before the run ended.
    incomplete: usize,
}

fn resumed(records: &[BurstRecord], every: Duration) -> Resumed {
    let every_ms = every.as_secs_f64() * 1e3;
    let mut out = Resumed { ms: Vec::new(), late: 0, incomplete: 0 };
    for w in records.windows(2) {
        let (prev, r) = (&w[0], &w[1]);
        match (prev.completion_ms.is_some_and(|p| p < every_ms), r.completion_ms) {
            (_, None) => out.incomplete += 1,
            (false, Some(_)) => out.late += 1,
            (true, Some(c)) => out.ms.push(c),
        }
    }
    out
}

/// What this scenario claims: published figures and goals, judged by the report against a run's summaries.
pub(crate) const CLAIMS: &[Claim] = &[
    // The measured time runs from the burst's scheduled start to the ACK of
    // its last byte, so the ideal it is held against is the sending time
    // plus one RTT (issue 48: against the sending time alone, 332 ms read as
    // 2.1× where it is 1.28×).
    Claim {
        text: "Resumed bursts with resume pacing (no-ssai-resume) finish within 1.5× of the ideal: sending time + one RTT",
        measure: Measure::OverIdealBurst { variant: "no-ssai-resume", metric: metric::BURST_P50_MS },
        goal: Goal::AtMost(1.5),
        goal_source: GOAL_BENCH,
        published: Some(Figure {
            value: 1.0,
            source: "[HPC-TCP]: ideal 160 ms per 10 MB burst at 500 Mbit/s, + 100 ms RTT",
        }),
        when: &[],
    },
    Claim {
        text: "Resumed bursts with the cgroup pacer (no-ssai-bpf) finish within 1.5× of the ideal: sending time + one RTT",
        measure: Measure::OverIdealBurst { variant: "no-ssai-bpf", metric: metric::BURST_P50_MS },
        goal: Goal::AtMost(1.5),
        goal_source: GOAL_BENCH,
        published: Some(Figure {
            value: 1.0,
            source: "[HPC-TCP]: ideal 160 ms per 10 MB burst at 500 Mbit/s, + 100 ms RTT",
        }),
        when: &[],
    },
    Claim {
        text: "Kept window + resume pacing beats the restart after idle (defaults ÷ no-ssai-resume)",
        measure: Measure::Ratio {
            num: ("defaults", metric::BURST_P50_MS),
            den: ("no-ssai-resume", metric::BURST_P50_MS),
        },
        goal: Goal::Above(1.0),
        goal_source: GOAL_DIRECTION,
        published: None,
        when: &[],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    fn burst(index: u32, completion_ms: Option<f64>) -> BurstRecord {
        BurstRecord {
            kind: "burst",
            index,
            start_s: f64::from(index) * 2.0,
            bytes: 10_000_000,
            completion_ms,
            cwnd_at_start: 10,
            cwnd_1ms: None,
            idle_ms: 0,
            resume: None,
            retransmits: 0,
        }
    }

    /// The bursts after the first count when an idle period came before
    /// them; one right after a burst that overran its period, or that never
    /// completed, does not; a run with none left still has its other figures.
    #[test]
    fn resumed_bursts_are_those_after_an_idle_period() {
        let every = Duration::from_secs(2);
        let ok = [burst(0, Some(1150.0)), burst(1, Some(340.0)), burst(2, Some(350.0))];
        assert_eq!(resumed(&ok, every), Resumed { ms: vec![340.0, 350.0], late: 0, incomplete: 0 });
        // A first burst of 13 s on a busy machine: the next starts at once.
        let slow = [burst(0, Some(13_000.0)), burst(1, Some(900.0)), burst(2, Some(400.0)), burst(3, None)];
        assert_eq!(resumed(&slow, every), Resumed { ms: vec![400.0], late: 1, incomplete: 1 });
        // The first burst never completed: nothing resumed, nothing to judge.
        let none = [burst(0, None)];
        assert_eq!(resumed(&none, every), Resumed { ms: vec![], late: 0, incomplete: 0 });
        let after_cut = [burst(0, None), burst(1, Some(500.0))];
        assert_eq!(resumed(&after_cut, every), Resumed { ms: vec![], late: 1, incomplete: 0 });
    }
}
