//! `lab pacing-web`: web-like traffic on seed 000's path (issue 27 item 3):
//! does a pacer slow the transfers that never fill the pipe? Flows of
//! 100 KB to 10 MB (log-uniform within each decade: half below 1 MB) arrive
//! as a Poisson process at `load` of the bottleneck, h1 → h2 over the
//! emulated 500 Mbit/s, 100 ms, 1 MB drop-tail path ([PSPacer]'s), each on
//! its own TCP connection. Variants: unpaced CUBIC, CUBIC under the cgroup
//! pacer's `dynamic --hold` (the lab process in a paced cgroup, as `lab
//! pacing`'s `dynamic-bpf-hold`), and BBR.
//!
//! Records: one flow record per flow (id, bytes, scheduled start, FCT,
//! completed), and per run the short-flow (≤ 1 MB) FCT mean, p50, p95 and
//! p99, the count of short flows not completed, and the bottleneck's drops.
//! The workload is the seed's: every variant replays the same flows.
//! Under `hold` the run also records the hold's state per paced socket
//! every 100 ms (`hold_*` series, one per socket in the order first seen:
//! [`record_hold`]).

use crate::engines::cgroup_pacer::{record_hold, BpfPacing};
use crate::engines::flows::{run_flows, HostAddrs, RunEnd, RunOptions, Sinks, Transport};
use crate::runner::claims::{Claim, Goal, Measure, GOAL_BENCH};
use crate::runner::records::MetricSpec;
use crate::runner::scenario::{
    stop_flag, FlowCounters, ParamSpec, Params, RunConfig, RunCtx, Scenario, Testbed,
};
use crate::runner::typed::{choices, scenario_params, ScenarioParams};
use crate::testbeds::dumbbell::{baseline_sysctls, sockbuf_sysctls, sysctls, Path2, DATA_PORT};
use anyhow::{bail, Context, Result};
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;
use tcpaccel_core::scale::Dilation;
use tcpaccel_core::stats::percentile_sorted;
use tcpaccel_core::units::{Bytes, Rate};
use tcpaccel_core::workload::{load_to_rate, Arrivals, EmpiricalCdf, FlowClass, SizeDist, Stream, Workload};
use tcpaccel_net::Network;

pub struct PacingWeb;

const VARIANTS: [&str; 3] = ["cubic", "hold", "bbr"];
/// Flows up to this size are "short" (they mostly end in slow start).
pub const SHORT_MAX: u64 = 1_000_000;

scenario_params! {
    /// The pacing-web scenario's parameters, read from the resolved map ([`Params::typed`]).
    pub struct WebParams {
        rate: Rate = "500mbit" => "bottleneck rate (on the wire)",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        rtt: Duration = "100ms" => "round-trip propagation delay",
        buffer: Bytes = "1MB" => "drop-tail buffer at the bottleneck",
        sockbuf: Bytes = "12.5MB" => "socket buffer maximum (tcp_rmem/tcp_wmem) on both hosts",
        load: f64 = "0.5" => "offered load as a fraction of the bottleneck rate",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        duration: Duration = "20s" => "how long flows keep arriving",
        variants: Vec<String> = VARIANTS.join(",") => "which variants to run",
    }
}

impl WebParams {
    /// The parameters with their variants and load checked.
    fn read(p: &Params) -> Result<WebParams> {
        let q: WebParams = p.typed()?;
        choices("variants", &q.variants, &VARIANTS)?;
        if !(q.load > 0.0 && q.load <= 1.0) {
            bail!("parameter load={}: must be in (0, 1]", q.load);
        }
        Ok(q)
    }
}

/// The names of this scenario's metrics, for its records and tests to
/// name them by.
pub mod metric {
    pub use crate::testbeds::dumbbell::metric::DROPS;
    pub const SHORT_FLOWS: &str = "short_flows";
    pub const SHORT_AVG_MS: &str = "short_avg_ms";
    pub const SHORT_P50_MS: &str = "short_p50_ms";
    pub const SHORT_P95_MS: &str = "short_p95_ms";
    pub const SHORT_P99_MS: &str = "short_p99_ms";
    pub const SHORT_INCOMPLETE: &str = "short_incomplete";
    pub const LONG_FLOWS: &str = "long_flows";
    pub const LONG_AVG_MS: &str = "long_avg_ms";
    pub const LONG_P50_MS: &str = "long_p50_ms";
    pub const LONG_INCOMPLETE: &str = "long_incomplete";

    /// The human names of the keys this scenario records (metrics and
    /// series), as its tables and plots title them.
    pub const NAMES: &[(&str, &str)] = &[
        (SHORT_FLOWS, "Short flows"),
        (SHORT_AVG_MS, "Short-flow FCT, mean"),
        (SHORT_P50_MS, "Short-flow FCT, median"),
        (SHORT_P95_MS, "Short-flow FCT, p95"),
        (SHORT_P99_MS, "Short-flow FCT, p99"),
        (SHORT_INCOMPLETE, "Short flows not completed"),
        (LONG_FLOWS, "Long flows"),
        (LONG_AVG_MS, "Long-flow FCT, mean"),
        (LONG_P50_MS, "Long-flow FCT, median"),
        (LONG_INCOMPLETE, "Long flows not completed"),
    ];
}

/// 100 KB – 10 MB, half below 1 MB, linear inside each decade.
pub fn web_sizes() -> Result<SizeDist> {
    let cdf = EmpiricalCdf::new(vec![(100e3, 0.0), (1e6, 0.5), (10e6, 1.0)])?;
    Ok(SizeDist::Empirical { cdf })
}

impl Scenario for PacingWeb {
    fn name(&self) -> &'static str {
        "pacing-web"
    }
    fn title(&self) -> &'static str {
        "Web-like flows on [PSPacer]'s path: does pacing slow short transfers?"
    }
    fn description(&self) -> &'static str {
        "Flows of 100 KB-10 MB arrive as a Poisson process at half the bottleneck's capacity over a \
         500 Mbit/s, 100 ms path with a 1 MB drop-tail buffer: unpaced CUBIC, CUBIC under the cgroup \
         pacer's dynamic --hold, and BBR. Reports short-flow FCT and drops; one record per flow."
    }
    fn params(&self) -> Vec<ParamSpec> {
        WebParams::specs()
    }
    fn check_params(&self, p: &Params) -> Result<()> {
        WebParams::read(p).map(drop)
    }
    fn quick(&self) -> Vec<(&'static str, &'static str)> {
        vec![("duration", "4s"), ("rate", "100mbit"), ("buffer", "200KB"), ("sockbuf", "2.5MB")]
    }
    fn default_repeats(&self) -> u32 {
        1
    }
    fn variants(&self, p: &Params) -> Result<Vec<String>> {
        Ok(WebParams::read(p)?.variants)
    }
    fn names(&self) -> Vec<(&'static str, &'static str)> {
        [crate::testbeds::dumbbell::metric::NAMES, metric::NAMES].concat()
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        let spec = MetricSpec::lower_is_better;
        vec![
            MetricSpec::new(metric::SHORT_FLOWS, "flows", true, "completed flows of at most 1 MB"),
            spec(metric::SHORT_AVG_MS, "ms", "mean FCT of the completed flows of at most 1 MB"),
            spec(metric::SHORT_P50_MS, "ms", "median FCT of the same"),
            spec(metric::SHORT_P95_MS, "ms", "95th percentile of the same"),
            spec(metric::SHORT_P99_MS, "ms", "99th percentile of the same"),
            spec(metric::SHORT_INCOMPLETE, "flows", "flows of at most 1 MB that did not complete"),
            MetricSpec::new(metric::LONG_FLOWS, "flows", true, "completed flows above 1 MB"),
            spec(metric::LONG_AVG_MS, "ms", "mean FCT of the completed flows above 1 MB"),
            spec(metric::LONG_P50_MS, "ms", "median FCT of the same"),
            spec(metric::LONG_INCOMPLETE, "flows", "flows above 1 MB that did not complete"),
            spec(metric::DROPS, "packets", "frames dropped at the bottleneck"),
        ]
    }
    fn claims(&self) -> &'static [Claim] {
        CLAIMS
    }
    fn notes(&self, _p: &Params) -> Result<Vec<String>> {
        Ok(vec![
            "Sizes: 100 KB to 10 MB, half below 1 MB (linear inside each decade); Poisson arrivals at \
             `load` of the bottleneck rate; every variant replays the seed's same flows."
                .into(),
            "FCT counts from a flow's scheduled start to the receiver's answer after its last byte.".into(),
        ])
    }
    fn estimate(&self, p: &Params, _d: Dilation) -> Result<Duration> {
        Ok(WebParams::read(p)?.duration + Duration::from_secs(15))
    }
    fn prepare(&self, p: &Params, _config: &RunConfig, _dir: &Path) -> Result<Box<dyn Testbed>> {
        let q = WebParams::read(p)?;
        Ok(Box::new(WebBed {
            path: Path2 { rate: q.rate, rtt: q.rtt, buffer: q.buffer },
            sockbuf: q.sockbuf,
            load: q.load,
            duration: q.duration,
        }))
    }
}

struct WebBed {
    path: Path2,
    sockbuf: Bytes,
    load: f64,
    duration: Duration,
}

/// The workload: Poisson flows h1 (host 0) → h2 (host 1) at `load` of `rate`.
pub fn web_flows(
    seed: u64,
    rate: Rate,
    load: f64,
    duration: Duration,
) -> Result<Vec<tcpaccel_core::workload::Flow>> {
    let sizes = web_sizes()?;
    let per_dst = load_to_rate(load, rate, sizes.mean())?;
    let stream = Stream {
        name: "web".into(),
        class: FlowClass::Short,
        sizes,
        arrivals: Arrivals::Poisson { per_dst },
        dsts: vec![1],
        srcs: vec![0],
        fan_in: 1,
    };
    let origin = tcpaccel_core::Instant::ZERO;
    let w = Workload::new(seed, origin, vec![stream])?;
    Ok(w.until(origin + duration))
}

fn v4(a: IpAddr) -> Result<std::net::Ipv4Addr> {
    match a {
        IpAddr::V4(a) => Ok(a),
        IpAddr::V6(a) => bail!("the dumbbell gave an IPv6 address {a}"),
    }
}

impl Testbed for WebBed {
    fn run_one(&mut self, ctx: &mut RunCtx<'_>) -> Result<()> {
        let cc = match ctx.variant.as_str() {
            "cubic" | "hold" => "cubic",
            "bbr" => "bbr",
            v => bail!("unknown variant {v}"),
        };
        let flows = web_flows(ctx.seed, self.path.rate, self.load, self.duration)?;
        let net = Network::up(&self.path.topology()?).context("building the dumbbell")?;
        let mut ctl = baseline_sysctls();
        ctl.extend(sockbuf_sysctls(self.sockbuf));
        sysctls(&net, "h1", &ctl)?;
        sysctls(&net, "h2", &ctl)?;
        let host = |id: u32, node: &str| -> Result<HostAddrs> {
            let a = v4(net.addr(node)?)?;
            Ok(HostAddrs { id, ns: net.ns(node)?, sl: a, ll: vec![a] })
        };
        let hosts = vec![host(0, "h1")?, host(1, "h2")?];
        let sinks = Sinks::start(&hosts, DATA_PORT).context("starting the flow sink in h2")?;
        let bpf = match ctx.variant.as_str() {
            "hold" => Some(BpfPacing::join("dynamic", true)?),
            _ => None,
        };
        let opts = RunOptions {
            // One path: both "lanes" are h1's one address.
            transport: Transport::SinglePath { seed: ctx.seed },
            port: DATA_PORT,
            cc: cc.into(),
            limit: self.duration + Duration::from_secs(30),
            max_in_flight: 1024,
            end: RunEnd::AllFlows,
            close: crate::engines::flows::Close::Reset,
            writes: crate::engines::flows::Writes::Bulk,
        };
        let trace = bpf.as_ref().map(BpfPacing::trace).transpose()?;
        let results = run_flows(&flows, tcpaccel_core::Instant::ZERO, &hosts, &opts, &stop_flag());
        if let Some(t) = trace {
            record_hold(ctx, &t.finish()?)?;
        }
        if let Some(b) = bpf {
            b.leave()?;
        }
        let _received = sinks.stop();
        let td = net.teardown();
        ctx.emulator_timing(crate::testbeds::emulator_timing(&td.emulators));
        let results = results.context("running the flows")?;
        let drops = td
            .emulators
            .iter()
            .find(|(n, _)| n == "wan")
            .map(|(_, s)| s.a_to_b.drops.queue + s.a_to_b.drops.loss)
            .context("the dumbbell has no emulator on wan")?;
        ctx.metric(metric::DROPS, drops as f64);
        let limit_s = opts.limit.as_secs_f64();
        // Completed FCTs (ms) and unfinished flows, short and long.
        let (mut short, mut long): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
        let (mut incomplete, mut long_incomplete) = (0, 0);
        for r in &results {
            if let Some(late) = r.start_late_s {
                ctx.flow_started_late(late);
            }
            let class = if r.bytes <= SHORT_MAX { "short" } else { "long" };
            // An incomplete flow is recorded as such, with the time it had.
            let fct_ms = r.fct_s.unwrap_or((limit_s - r.start_s).max(0.0)) * 1e3;
            let counted = FlowCounters { retrans_bytes: r.retrans_bytes, ..Default::default() };
            ctx.flow_counted(r.id, class, r.bytes, r.start_s, fct_ms, r.fct_s.is_some(), counted)?;
            let (done, unfinished) = if r.bytes <= SHORT_MAX {
                (&mut short, &mut incomplete)
            } else {
                (&mut long, &mut long_incomplete)
            };
            match r.fct_s {
                Some(s) => done.push(s * 1e3),
                None => *unfinished += 1,
            }
        }
        short.sort_by(f64::total_cmp);
        ctx.metric(metric::SHORT_FLOWS, short.len() as f64);
        ctx.metric(metric::SHORT_INCOMPLETE, incomplete as f64);
        if !short.is_empty() {
            ctx.metric(metric::SHORT_AVG_MS, short.iter().sum::<f64>() / short.len() as f64);
            let pcts =
                [(metric::SHORT_P50_MS, 50.0), (metric::SHORT_P95_MS, 95.0), (metric::SHORT_P99_MS, 99.0)];
            for (k, p) in pcts {
                ctx.metric(k, percentile_sorted(&short, p));
            }
        }
        long.sort_by(f64::total_cmp);
        ctx.metric(metric::LONG_FLOWS, long.len() as f64);
        ctx.metric(metric::LONG_INCOMPLETE, long_incomplete as f64);
        if !long.is_empty() {
            ctx.metric(metric::LONG_AVG_MS, long.iter().sum::<f64>() / long.len() as f64);
            ctx.metric(metric::LONG_P50_MS, percentile_sorted(&long, 50.0));
        }
        Ok(())
    }
}

/// What this scenario claims: the goals of the hold on web-like traffic
/// (issue 47 item 4), each the hold against unpaced CUBIC on the same
/// flows.
pub(crate) const CLAIMS: &[Claim] = &[
    Claim {
        text: "The hold's short-flow median FCT is no worse than CUBIC's",
        measure: Measure::Ratio { num: ("hold", metric::SHORT_P50_MS), den: ("cubic", metric::SHORT_P50_MS) },
        goal: Goal::AtMost(1.0),
        goal_source: GOAL_BENCH,
        published: None,
        when: &[],
    },
    Claim {
        text: "The hold's short-flow p99 FCT is no worse than CUBIC's",
        measure: Measure::Ratio { num: ("hold", metric::SHORT_P99_MS), den: ("cubic", metric::SHORT_P99_MS) },
        goal: Goal::AtMost(1.0),
        goal_source: GOAL_BENCH,
        published: None,
        when: &[],
    },
    Claim {
        text: "The hold cuts drops at the bottleneck to a fifth of CUBIC's",
        measure: Measure::Ratio { num: ("hold", metric::DROPS), den: ("cubic", metric::DROPS) },
        goal: Goal::AtMost(0.2),
        goal_source: GOAL_BENCH,
        published: None,
        when: &[],
    },
    Claim {
        text: "The hold's long-flow median FCT is within 1.1× CUBIC's",
        measure: Measure::Ratio { num: ("hold", metric::LONG_P50_MS), den: ("cubic", metric::LONG_P50_MS) },
        goal: Goal::AtMost(1.1),
        goal_source: GOAL_BENCH,
        published: None,
        when: &[],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workload_is_web_sized_and_offers_the_load() {
        let d = Duration::from_secs(200);
        let f = web_flows(1, Rate::mbps(500), 0.5, d).unwrap();
        assert!(f.iter().all(|x| (100_000..=10_000_000).contains(&x.bytes) && x.src == 0 && x.dst == 1));
        let short = f.iter().filter(|x| x.bytes <= SHORT_MAX).count() as f64;
        assert!((short / f.len() as f64 - 0.5).abs() < 0.1, "{short} of {}", f.len());
        // Offered: bytes over the time ≈ half of 500 Mbit/s.
        let bits: f64 = f.iter().map(|x| x.bytes as f64 * 8.0).sum();
        let load = bits / d.as_secs_f64() / 500e6;
        assert!((0.4..0.6).contains(&load), "load {load}");
        // The seed replays the same flows.
        assert_eq!(f, web_flows(1, Rate::mbps(500), 0.5, d).unwrap());
        assert_ne!(f, web_flows(2, Rate::mbps(500), 0.5, d).unwrap());
    }

    /// Root test: one record per flow of the workload, each with its bytes
    /// and an FCT of at least one RTT; the short-flow metrics agree with
    /// them. Modest: the --quick 100 Mbit/s and 4 s of arrivals, 20 ms
    /// RTT, unpaced only.
    #[test]
    fn root_every_flow_gets_a_record_with_fct_and_bytes() {
        let sets = [("variants", "cubic"), ("rtt", "20ms")];
        let d = crate::runner::scenario::run_short(&PacingWeb, &sets);
        let want = web_flows(1, Rate::mbps(100), 0.5, Duration::from_secs(4)).unwrap();
        assert!(!want.is_empty());
        let mut got = d.flows.clone();
        got.sort_by_key(|r| r.id);
        assert_eq!(got.len(), want.len(), "one record per flow");
        for (r, f) in got.iter().zip(&want) {
            assert_eq!((r.id, r.bytes), (f.id, f.bytes));
            assert!(r.completed && r.fct_ms >= 20.0, "{r:?}");
            // What the sender sent again, read from its TCP.
            assert!(r.retrans_bytes.is_some_and(|b| b < f.bytes), "{r:?}");
            assert_eq!(r.class, if f.bytes <= SHORT_MAX { "short" } else { "long" });
        }
        let s = &d.summaries[0].metrics;
        let short = want.iter().filter(|f| f.bytes <= SHORT_MAX).count() as f64;
        assert_eq!(s.get(metric::SHORT_FLOWS), Some(&short));
        // The long flows' median is that of their records.
        let mut long: Vec<f64> = got.iter().filter(|r| r.class == "long").map(|r| r.fct_ms).collect();
        assert_eq!(s.get(metric::LONG_FLOWS), Some(&(long.len() as f64)));
        if !long.is_empty() {
            long.sort_by(f64::total_cmp);
            let p50 = percentile_sorted(&long, 50.0);
            assert!(s.get(metric::LONG_P50_MS).is_some_and(|m| (m - p50).abs() < 1e-6), "{s:?} vs {p50}");
        }
    }

    #[test]
    fn bad_load_is_refused_when_resolved() {
        let set = |v: &str| {
            crate::runner::scenario::resolve_params(&PacingWeb, false, &[("load".into(), v.into())])
        };
        let e = format!("{:#}", set("1.5").unwrap_err());
        assert!(e.contains("load=1.5"), "{e}");
        assert!(set("0").is_err());
        assert!(set("half").is_err());
        assert!(set("0.25").is_ok());
    }
}
