//! The datacenter-lanes scenarios ([Lanes] §6–7) on the dual-fabric
//! datacenter of [`crate::testbeds::fabric`]: `lanes-basic`, `lanes-buildup`,
//! `lanes-websearch`, `lanes-datamining` and `lanes-params`.
//!
//! Variants (the same workload, seeded, replayed for each):
//! - `mptcp`: pure MPTCP, in-kernel path manager, one `subflow` endpoint
//!   per LL address, default scheduler (the thesis's baseline);
//! - `single`: plain TCP on one lane per flow, drawn at random (ECMP-like);
//! - `repflow`: RepFlow — flows under 100 KB sent on SL and LL at once,
//!   the first copy to finish counts; others as `single`;
//! - `deadline` / `link-cost`: MPTCP from the SL address with a
//!   `tcpaccel lanes` daemon (userspace path manager) in every host.
//!
//! Flows come from `tcpaccel_core::workload` and run through
//! `crate::engines::flows` (FCT from the scheduled start to the receiver's
//! answer). What it is not: ns-3 at 1 Gbit/s with NewReno and initial window
//! 12; the links run at `rate` (default 100 Mbit/s) with 128 KB drop-tail
//! queues, so a full queue holds 10× more time than in the thesis (the same
//! bytes and packets), and every run is a few seconds, not 100 repeats.
//!
//! Scale (`--set scale=D`, issue 25): every parameter declares how it
//! follows D ([`knobs`]): rates ÷ D, times × D (also the experiments' own
//! drain, fill and timeouts, TCP's `rto_min` on the host routes where
//! the kernel honours it, and TCP's initial RTO through a BPF program,
//! [`crate::testbeds::rto_init`]), γ ÷ D, bytes (also the shapers' bucket),
//! counts and loads unchanged.
//! The experiment is then the same in packets, windows and RTTs at 1/D of
//! the CPU per second; metrics are in experiment units (times ÷ D, rates ×
//! D), with `_wall` twins in wall time when D > 1. What D cannot scale: the
//! delayed-ACK timer (40 ms ATO) and TLP's +8 ms / +200 ms (both can be
//! turned off: `delayed_ack=off`, `tlp=off`), RACK's reordering timer in
//! 4 ms ticks (it cannot: Linux 6.17 removed the duplicate-ACK recovery
//! that `net.ipv4.tcp_recovery=0` used to select), the daemons' and the
//! kernel's own latencies. Measured (BENCHMARKS.md): the mean FCT agrees
//! within 5% between D = 16 and 64, but a smaller D is slower, by 4–24%
//! between D and 4D below 16, in congestion episodes; neither those
//! timers, the shapers' timer slack nor CPU contention account for it.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::engines::capture::{flow_fct, CapturedFct, HostCaptures};
use crate::engines::flows::{
    run_flows, Close, FlowResult, Received, RunEnd, RunOptions, Sinks, Transport, Writes,
};
use anyhow::{bail, Context, Result};
use tcpaccel_core::workload::Flow;

use crate::runner::scenario::{stop_flag, RunCtx, Testbed};
use crate::testbeds::fabric::{Fabric, FabricSpec, MptcpMode, RouteMetrics};
use crate::testbeds::rto_init::KERNEL_RTO_INIT;
use tcpaccel_core::scale::Dilation;

mod basic;
mod buildup;
mod daemons;
mod knobs;
mod outcome;
mod params;
mod realistic;

use crate::runner::typed::{scaled_params, Groups, ScaledParams, ScenarioParams};
use knobs::{
    check_variants, estimate_scaled, lanes_specs, non_empty, scaled, Common, Drain, Warmup, WriteSize,
};
use outcome::{long_goodput, put, record_outcome, sample, NAMES};

/// The summary metric (before its `@point`) that says whether a run's lanes
/// daemons took their signals from the BPF program (1) or polled sock_diag
/// (0); `lab compare` checks both sides alike through
/// `CompareOptions::signal_metric`.
pub const DAEMONS_ON_BPF_METRIC: &str = "daemons_on_bpf";

pub use basic::LanesBasic;
pub use buildup::LanesBuildup;
pub use daemons::PolicyParams;
pub use params::LanesParams;
pub use realistic::LanesRealistic;

use daemons::{DaemonReport, Daemons};

const FLOW_PORT: u16 = 7400;
/// ns-3 BulkSend's `SendSize` default: the write size of `writes=bulksend`.
const BULKSEND_WRITE: usize = 512;
/// Flows up to this size are the short flows the thesis measures ((0, 100 KB]).
const SHORT_MAX: u64 = 100 * 1000;
/// RepFlow replicates flows below this (anchors.md, Workloads).
const REPFLOW_THRESHOLD: u64 = 100 * 1000;
/// The variants a lanes scenario runs by default: the thesis's seven
/// (`size-link-cost` is this project's, beside them).
const DEFAULT_POLICIES: [&str; 7] =
    ["mptcp", "single", "repflow", "deadline", "link-cost", "size", "size-link-cost"];

/// Every variant a lanes scenario knows: the defaults, then this project's
/// own, run only when named: `sized` (short flows on SL, larger ones on LL
/// only; the sender knows sizes, as RepFlow's does) and `sized-rep` (the
/// same with each short flow also sent on LL0, first copy wins).
const POLICIES: [&str; 9] =
    ["mptcp", "single", "repflow", "deadline", "link-cost", "size", "size-link-cost", "sized", "sized-rep"];

/// The lanes policies (the variants that run a daemon): `size` switches a
/// connection after `size_threshold` bytes, `size-link-cost` on whichever of
/// the threshold and the link cost comes first (beyond the thesis).
const LANES_POLICIES: [&str; 4] = ["deadline", "link-cost", "size", "size-link-cost"];

fn fabric_spec(p: &Common) -> FabricSpec {
    FabricSpec {
        shape: p.topology,
        hosts: p.hosts,
        fabrics: p.fabrics,
        hosts_per_leaf: p.hosts_per_leaf,
        spines: p.spines,
        rate: p.rate,
        buffer: p.buffer,
        bucket: p.bucket,
    }
}

/// What one workload under one policy produced.
struct Outcome {
    results: Vec<FlowResult>,
    received: BTreeMap<u64, Received>,
    daemons: Option<DaemonReport>,
    /// Bytes the hosts sent per fabric during the run.
    tx_per_fabric: Vec<u64>,
    wall: Duration,
    /// When the run's flows stopped, from its origin: the time limit, or
    /// earlier when [`RunSpec::end`] ended it before (what an incomplete
    /// flow had).
    ended: Duration,
    /// Per flow id, its times as the sender's capture showed them
    /// ([`RunSpec::capture`]); empty without a capture.
    captured: BTreeMap<u64, CapturedFct>,
}

/// Options of one workload run.
struct RunSpec<'a> {
    variant: &'a str,
    policy: Option<PolicyParams>,
    cc: String,
    seed: u64,
    limit: Duration,
    /// When the run ends before `limit`.
    end: RunEnd,
    /// Capture every host's interfaces and time each flow from the capture
    /// (senders close with a FIN).
    capture: bool,
    writes: Writes,
    dir: &'a Path,
    tag: String,
}

/// The thesis's operating point that `workload=rounds` implies in every
/// lanes scenario that has it, for the keys no `--set` gave (text §6.1
/// and the author's scripts; each scenario's module table gives the
/// sources).
const THESIS_POINT: [(&str, &str); 4] =
    [("rate", "100mbit"), ("initcwnd", "12"), ("capture", "on"), ("writes", "bulksend")];

/// What a resolved `workload` implies ([`Scenario::implied`]): with
/// `rounds`, the thesis's operating point and the scenario's `own` keys.
///
/// [`Scenario::implied`]: crate::runner::scenario::Scenario::implied
fn implied_by_rounds(
    resolved: &BTreeMap<String, String>,
    own: &[(&'static str, &'static str)],
) -> Vec<(&'static str, &'static str)> {
    match resolved.get("workload").map(|w| w.trim()) {
        Some("rounds") => THESIS_POINT.iter().chain(own).copied().collect(),
        _ => Vec::new(),
    }
}

fn mode_of(variant: &str) -> Result<MptcpMode> {
    Ok(match variant {
        "mptcp" => MptcpMode::Kernel,
        v if LANES_POLICIES.contains(&v) => MptcpMode::Userspace,
        "single" | "repflow" | "sized" | "sized-rep" => MptcpMode::Plain,
        v => bail!("unknown variant {v:?}; valid: {}", POLICIES.join(", ")),
    })
}

/// Runs `flows` on the fabric under one policy.
fn run_policy(fab: &Fabric, flows: &[Flow], run: &RunSpec<'_>) -> Result<Outcome> {
    let mode = mode_of(run.variant)?;
    fab.set_mptcp(mode)?;
    let sinks = Sinks::start(&fab.hosts, FLOW_PORT).context("starting the flow sinks")?;
    let daemons = match mode {
        MptcpMode::Userspace => {
            let policy = run.policy.clone().context("a lanes variant without policy parameters")?;
            Some(Daemons::start(fab, &policy, run.dir, &run.tag)?)
        }
        _ => None,
    };
    let transport = match run.variant {
        "single" => Transport::SinglePath { seed: run.seed },
        "repflow" => Transport::RepFlow { threshold: REPFLOW_THRESHOLD, seed: run.seed },
        // The same size knowledge as RepFlow's, used to keep SL clean.
        v @ ("sized" | "sized-rep") => {
            Transport::Sized { threshold: REPFLOW_THRESHOLD, replicate: v == "sized-rep", seed: run.seed }
        }
        _ => Transport::Mptcp,
    };
    let opts = RunOptions {
        transport,
        port: FLOW_PORT,
        cc: run.cc.clone(),
        limit: run.limit,
        max_in_flight: 1024,
        end: run.end,
        close: if run.capture { Close::Fin } else { Close::Reset },
        writes: run.writes,
    };
    let captures = if run.capture {
        let ifaces: Vec<(String, Vec<String>)> = fab
            .hosts
            .iter()
            .map(|h| (h.ns.clone(), (0..fab.spec.fabrics).map(|f| format!("f{f}")).collect()))
            .collect();
        Some(HostCaptures::start(&ifaces)?)
    } else {
        None
    };
    let tx0 = fab.tx_bytes_per_fabric()?;
    let t0 = Instant::now();
    let results = run_flows(flows, tcpaccel_core::Instant::ZERO, &fab.hosts, &opts, &stop_flag());
    let wall = t0.elapsed();
    let captured = match captures {
        Some(c) => {
            // The last subflows' FINs follow their flows' ends by an RTT or so.
            std::thread::sleep(Duration::from_millis(50));
            let c = c.finish()?;
            if let (n @ 1.., first) = c.unreadable() {
                tracing::warn!(frames = n, first = ?first, "capture frames unreadable or untimed");
            }
            match &results {
                Ok(rs) => rs
                    .iter()
                    .filter_map(|r| {
                        let times: Vec<_> =
                            r.conns.iter().filter_map(|&(l, p)| c.times(r.src as usize, l, p)).collect();
                        flow_fct(&times).map(|f| (r.id, f))
                    })
                    .collect(),
                Err(_) => BTreeMap::new(),
            }
        }
        None => BTreeMap::new(),
    };
    let tx1 = fab.tx_bytes_per_fabric()?;
    let daemons = match daemons {
        Some(d) => Some(d.stop()?),
        None => None,
    };
    let received = sinks.stop();
    let results = results.context("running the flows")?;
    let tx_per_fabric = tx1.iter().zip(&tx0).map(|(a, b)| a.saturating_sub(*b)).collect();
    // An early end (`run.end`) cut the flows still running at `wall`.
    Ok(Outcome { results, received, daemons, tx_per_fabric, wall, ended: run.limit.min(wall), captured })
}

/// The testbed: the datacenter stays up across variants and repeats; each
/// experiment ([`Experiment`]) runs its variants on it.
struct LanesBed<E> {
    bed: Bed,
    experiment: E,
}

/// What one lanes experiment does with one variant × repeat on the datacenter.
trait Experiment {
    fn run(&self, bed: &Bed, ctx: &mut RunCtx<'_>) -> Result<()>;
}

/// The datacenter and the run's shared parameters, as an experiment sees
/// them: dilated (wall units), and D.
struct Bed {
    fab: Fabric,
    params: Common,
    d: Dilation,
}

impl Bed {
    fn run_spec<'a>(
        &self,
        ctx: &RunCtx<'a>,
        dir: &'a Path,
        variant: &'a str,
        limit: Duration,
        tag: String,
    ) -> Result<RunSpec<'a>> {
        let policy = match variant {
            v if LANES_POLICIES.contains(&v) => Some(PolicyParams::from(&self.params, v)?),
            _ => None,
        };
        Ok(RunSpec {
            variant,
            policy,
            cc: self.params.cc.clone(),
            seed: ctx.seed,
            limit,
            end: RunEnd::AllFlows,
            capture: self.params.capture,
            writes: match self.params.writes {
                WriteSize::Bulksend => Writes::Small { size: BULKSEND_WRITE },
                WriteSize::Bulk => Writes::Bulk,
            },
            dir,
            tag,
        })
    }

    /// A constant time of the experiment (in experiment units) in wall time.
    fn wall(&self, t: Duration) -> Duration {
        t * self.d.get()
    }
}

impl<E: Experiment> Testbed for LanesBed<E> {
    fn run_one(&mut self, ctx: &mut RunCtx<'_>) -> Result<()> {
        self.experiment.run(&self.bed, ctx)
    }

    /// Every node of the datacenter: the switches' ports and the hosts'
    /// uplinks are all tbf over bfifo.
    fn watched_namespaces(&self) -> Vec<String> {
        self.bed.fab.net.namespaces()
    }
}

/// The kernel's own minimum RTO (`TCP_RTO_MIN`): a route's `rto_min` below
/// or at it changes nothing.
const KERNEL_RTO_MIN: Duration = Duration::from_millis(200);

/// Brings the datacenter up for `experiment`, with the shared parameters
/// `common` as resolved (experiment units; dilated here by D). With D > 1
/// the scaled `rto_min` goes on every host route and the scaled initial RTO
/// on every host.
fn prepare_bed<E: Experiment + 'static>(
    common: &Common,
    d: Dilation,
    experiment: E,
) -> Result<Box<dyn Testbed>> {
    let k = common.dilated(d)?;
    let spec = fabric_spec(&k);
    let metrics = RouteMetrics {
        rto_min: Some(k.rto_min).filter(|&r| r > KERNEL_RTO_MIN),
        quickack: !k.delayed_ack,
        initcwnd: match k.initcwnd {
            0 => bail!("initcwnd: at least 1 segment"),
            10 => None,
            n => Some(n),
        },
    };
    let (tlp, rto_init) = (k.tlp, k.rto_init);
    let mut fab = Fabric::up(spec)?;
    if metrics != RouteMetrics::default() {
        fab.set_route_metrics(metrics).context("setting rto_min and quickack on the host routes")?;
    }
    if !tlp {
        fab.set_host_sysctl("net.ipv4.tcp_early_retrans", "0")
            .context("turning tail loss probes off on the hosts")?;
    }
    if rto_init != KERNEL_RTO_INIT {
        fab.set_rto_init(rto_init).context("setting the scaled initial RTO on the hosts")?;
    }
    Ok(Box::new(LanesBed { bed: Bed { fab, params: k, d }, experiment }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::workloads::Mix;
    use crate::runner::scenario::{resolve_params, Params, Scenario};
    use knobs::SCALE_KEY;
    use tcpaccel_core::scale::{check_rules, Quantity, Rule};
    use tcpaccel_core::units::{Bytes, Rate};

    /// A struct's fields as resolved and at D: (key, rule, declared, dilated).
    type View = Vec<(&'static str, Rule, Vec<Quantity>, Vec<Quantity>)>;

    fn view<G: ScaledParams>(p: &Params, d: Dilation) -> View {
        let g: G = Groups::new(p).take().unwrap();
        let w = g.dilated(d).unwrap();
        G::rules()
            .into_iter()
            .zip(g.quantities())
            .zip(w.quantities())
            .map(|(((k, r), (_, a)), (_, b))| (k, r, a, b))
            .collect()
    }

    /// Every lanes scenario with the structs it reads.
    #[allow(clippy::type_complexity)]
    fn declared() -> Vec<(Box<dyn Scenario>, Vec<fn(&Params, Dilation) -> View>)> {
        let realistic = |mix| -> (Box<dyn Scenario>, Vec<fn(&Params, Dilation) -> View>) {
            let mut v: Vec<fn(&Params, Dilation) -> View> = vec![
                view::<Common>,
                view::<realistic::RealisticParams>,
                view::<Drain>,
                view::<realistic::FanIn>,
            ];
            if mix == Mix::DataMining {
                v.push(view::<Warmup>);
            }
            (Box::new(LanesRealistic(mix)), v)
        };
        vec![
            (Box::new(LanesBasic), vec![view::<Common>, view::<basic::BasicParams>]),
            (
                Box::new(LanesBuildup),
                vec![view::<Common>, view::<buildup::BuildupParams>, view::<Drain>, view::<Warmup>],
            ),
            realistic(Mix::WebSearch),
            realistic(Mix::DataMining),
            (Box::new(LanesParams), vec![view::<Common>, view::<params::SweepParams>]),
        ]
    }

    #[test]
    fn every_parameter_of_every_lanes_scenario_follows_its_rule() {
        for (s, views) in declared() {
            let p = resolve_params(s.as_ref(), false, &[]).unwrap();
            let keys: Vec<&str> = s.params().iter().map(|p| p.key).collect();
            let all: Vec<(&str, Rule)> =
                views.iter().flat_map(|v| v(&p, Dilation::ONE)).map(|(k, r, _, _)| (k, r)).collect();
            check_rules(keys.iter().copied(), &all).unwrap_or_else(|e| panic!("{}: {e}", s.name()));
            assert_eq!(all.len(), keys.len(), "{}", s.name());
            for d in [1u32, 2, 4, 10] {
                for (key, rule, base, got) in views.iter().flat_map(|v| v(&p, Dilation::new(d).unwrap())) {
                    let what = format!("{} {key} at D={d}", s.name());
                    assert_eq!(base.len(), got.len(), "{what}");
                    assert!(!base.is_empty(), "{what}");
                    for (a, b) in base.iter().zip(&got) {
                        match (rule, a, b) {
                            (Rule::Time, Quantity::Time(a), Quantity::Time(b)) => {
                                assert_eq!(*b, *a * d, "{what}")
                            }
                            (Rule::Rate, Quantity::Rate(a), Quantity::Rate(b)) => {
                                assert_eq!(b.0 * u64::from(d), a.0, "{what}")
                            }
                            (Rule::PerTime, Quantity::Number(a), Quantity::Number(b)) => {
                                assert_eq!(*b * f64::from(d), *a, "{what}")
                            }
                            (r, a, b) => {
                                assert!(!r.scales(), "{what}: {r:?} left unchecked");
                                assert_eq!(a, b, "{what}: bytes, counts, loads and choices do not scale");
                            }
                        }
                    }
                }
            }
        }
    }

    /// D is read from `scale` by the shared struct, the one reader of it;
    /// zero or text is refused naming the key and the accepted form.
    #[test]
    fn scale_zero_or_text_is_refused_naming_the_key() {
        for (v, want) in [
            ("0", "parameter scale=\"0\": the scale factor D must be at least 1, got 0"),
            ("x", "parameter scale=\"x\": expected a whole number"),
        ] {
            let e = resolve_params(&LanesBasic, false, &[(SCALE_KEY.into(), v.into())]).unwrap_err();
            assert_eq!(format!("{e:#}"), want);
        }
        let p = resolve_params(&LanesBasic, false, &[(SCALE_KEY.into(), "3".into())]).unwrap();
        assert_eq!(LanesBasic.dilation(&p).unwrap().unwrap().d.get(), 3);
    }

    /// End to end at D = 2 on the FatTree: the run records D, flows in both
    /// units, a fidelity verdict per variant, and metrics in experiment units
    /// with their wall twins.
    #[test]
    fn root_a_dilated_web_search_on_the_fattree_records_both_units() {
        let d = crate::runner::scenario::run_short(
            &LanesRealistic(Mix::WebSearch),
            &[
                ("scale", "2"),
                ("topology", "fattree"),
                ("hosts", "8"),
                ("rate", "100mbit"),
                ("loads", "0.2"),
                ("duration", "1s"),
                ("variants", "mptcp,size-link-cost"),
            ],
        );
        assert_eq!(d.header().dilation().get(), 2);
        assert!(!d.flows.is_empty());
        // Through JSON: equal to the last bit or so.
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() <= 1e-9 * b.abs().max(1.0));
        for f in &d.flows {
            assert!(close(f.exp_fct_ms, f.fct_ms / 2.0), "flow {}: {:?} vs {}", f.id, f.exp_fct_ms, f.fct_ms);
            assert!(close(f.exp_start, f.start / 2.0), "flow {}: {:?} vs {}", f.id, f.exp_start, f.start);
        }
        assert_eq!(d.fidelity.len(), 2, "one verdict per variant");
        for s in &d.summaries {
            let (exp, wall) = (s.metrics["short_avg_ms@0.2"], s.metrics["short_avg_ms_wall@0.2"]);
            assert!(close(Some(exp * 2.0), wall), "{}: {exp} vs {wall}", s.variant);
            assert!(
                s.metrics.contains_key("short_sl_bytes_pct@0.2"),
                "{}: {:?}",
                s.variant,
                s.metrics.keys()
            );
        }
        // Every completed flow says which lanes carried it: SL or LL 0 (no
        // stranger address), at least its payload and header in all.
        for f in d.flows.iter().filter(|f| f.completed) {
            let total: u64 = f.lane_bytes.values().sum();
            assert!(
                total >= f.bytes + 16,
                "{} flow {}: {:?} for {} B",
                f.variant,
                f.id,
                f.lane_bytes,
                f.bytes
            );
            assert!(
                f.lane_bytes.keys().all(|l| l == "sl" || l == "ll0"),
                "{} flow {}: {:?}",
                f.variant,
                f.id,
                f.lane_bytes
            );
        }
        // The size policy moves what passed its threshold (100 KB) to LL.
        let moved: u64 = d
            .flows
            .iter()
            .filter(|f| f.completed && f.variant == "size-link-cost" && f.bytes > 200_000)
            .map(|f| f.lane_bytes.get("ll0").copied().unwrap_or(0))
            .sum();
        assert!(moved > 0, "no byte of a large flow went on LL under size-link-cost");
    }

    /// A short leaf–spine run: its fidelity record carries the fabric's
    /// qdisc counters, the ports that carried the flows sent packets, and
    /// the counts hold together (a port cannot be active without sending).
    #[test]
    fn root_a_leaf_spine_run_records_its_fabric_queues() {
        let d = crate::runner::scenario::run_short(
            &LanesRealistic(Mix::WebSearch),
            &[
                ("hosts", "4"),
                ("rate", "100mbit"),
                ("loads", "0.5"),
                ("duration", "1s"),
                ("variants", "mptcp"),
            ],
        );
        assert_eq!(d.fidelity.len(), 1);
        let q = d.fidelity[0].queues.as_ref().expect("the monitor watched the fabric");
        assert_eq!(q.error, None, "{q:?}");
        // 4 hosts, 2 fabrics, 1 leaf and 2 spines each: 2 × (4 + 2) links,
        // a tbf at each end of each.
        assert_eq!(q.ports, 2 * 2 * (4 + 2), "{q:?}");
        assert!(q.active_ports >= 4 && q.active_ports <= q.ports, "{q:?}");
        let flow_bytes: u64 = d.flows.iter().filter(|f| f.completed).map(|f| f.bytes).sum();
        assert!(flow_bytes > 0);
        // Every completed byte crossed at least two shaped ports (the
        // sender's uplink and the leaf's port down to the receiver).
        assert!(q.sent_bytes >= 2 * flow_bytes, "{} sent for {flow_bytes} of flows: {q:?}", q.sent_bytes);
        assert!(q.sent_packets > 0 && q.samples >= 2, "{q:?}");
        assert!(q.peak_port_backlog_bytes <= q.peak_total_backlog_bytes, "{q:?}");
    }

    #[test]
    fn web_search_at_d4_is_the_issues_run_b() {
        let s = LanesRealistic(Mix::WebSearch);
        let mut sets: Vec<(String, String)> =
            [("rate", "100mbit"), ("t_deadline", "300ms"), ("nu_unit", "10us")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        sets.push((SCALE_KEY.into(), "4".into()));
        sets.push(("duration".into(), "5s".into()));
        let p = resolve_params(&s, false, &sets).unwrap();
        let d = s.dilation(&p).unwrap().expect("a lanes scenario is dilated").d;
        assert_eq!(d.get(), 4);
        let k = Groups::new(&p).take::<Common>().unwrap().dilated(d).unwrap();
        assert_eq!(k.rate, Rate::mbps(25));
        assert_eq!(k.bucket, crate::testbeds::fabric::TWO_FRAMES, "bytes: unchanged by D");
        assert_eq!(k.t_deadline, Duration::from_millis(1200));
        assert_eq!(k.nu_unit, Duration::from_micros(40));
        assert_eq!(k.sample_interval, Duration::from_millis(200));
        assert_eq!(k.rto_min, Duration::from_millis(800));
        assert_eq!(k.rto_init, Duration::from_secs(4));
        assert_eq!(k.gamma, 0.25);
        assert_eq!(k.buffer, Bytes(128 * 1000));
        assert_eq!(k.size_threshold, Bytes(100 * 1000));
        let own = Groups::new(&p).take::<realistic::RealisticParams>().unwrap().dilated(d).unwrap();
        assert_eq!(own.duration, Duration::from_secs(20));
        assert_eq!(own.loads, vec![0.2, 0.5, 0.8]);
        let policy = PolicyParams::from(&k, "size-link-cost").unwrap();
        assert_eq!(
            (policy.t_deadline, policy.nu_unit, policy.sample_interval, policy.gamma, policy.alpha),
            (Duration::from_millis(1200), Duration::from_micros(40), Duration::from_millis(200), 0.25, 1.0)
        );
        assert_eq!(fabric_spec(&k).rate, Rate::mbps(25));
    }

    #[test]
    fn unknown_variants_are_refused_with_the_valid_ones() {
        let e = mode_of("ecmp").unwrap_err().to_string();
        assert!(e.contains("ecmp") && e.contains("link-cost"), "{e}");
    }
}
