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

use crate::runner::scenario::{stop_flag, Params, RunCtx, Testbed};
use crate::testbeds::fabric::{Fabric, FabricSpec, MptcpMode, RouteMetrics, Shape};
use crate::testbeds::rto_init::KERNEL_RTO_INIT;
use tcpaccel_core::scale::{Dilation, Rule};

mod basic;
mod buildup;
mod daemons;
mod knobs;
mod outcome;
mod params;
mod realistic;

use knobs::{estimate_scaled, scaled, Knobs, Param, SCALE_KEY};
use outcome::{long_mbps, put, record_outcome, sample};

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
/// `drain` (default 4 s, experiment units; × D in wall time): how long flows may still run after the
/// arrivals window before the rest are cut (counted in `cut_by_limit`). A
/// time, so it scales; a figure at a large D shortens it rather than wait
/// D × 4 s for the heavy tail of the long flows.
fn drain_param() -> Param {
    Param::new(
        "drain",
        "4s",
        Rule::Time,
        "how long flows may still run after the arrivals window; the rest are cut (cut_by_limit)",
    )
}

/// `warmup` (default 0 s): how long the long flows run before the first
/// short flow arrives. 0 starts both together, as the thesis's buildup
/// does (its lanes delay short flows only while a new long flow is still
/// on SL); at least `t_deadline` measures the steady state after the
/// deadline policies have moved the long flows, as the thesis's continuous
/// data-mining jobs are met.
fn warmup_param() -> Param {
    Param::new(
        "warmup",
        "0s",
        Rule::Time,
        "how long the long flows run before the first short flow arrives (0: both start together; at least \
         t_deadline: the deadline policies are measured after their switch, in steady state)",
    )
}

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

/// The parameters every lanes scenario shares, each with its scaling rule.
fn common_params(fabrics: &str, hosts: &str, rate: &str) -> Vec<Param> {
    vec![
        Param::new(
            "variants",
            DEFAULT_POLICIES.join(","),
            Rule::Choice,
            "policies to compare (mptcp, single, repflow, deadline, link-cost, size, size-link-cost; also sized, sized-rep)",
        ),
        Param::new("hosts", hosts, Rule::Count, "hosts in the datacenter (a quarter are back-end hosts)"),
        Param::new("fabrics", fabrics, Rule::Count, "fabrics = lanes: 1 SL + the rest LL"),
        Param::new(
            "topology",
            "leaf-spine",
            Rule::Choice,
            "each fabric's shape: leaf-spine (hosts_per_leaf, spines; the spine fixed per destination) or fattree \
             (the thesis's k = 4 FatTree, up to 16 hosts, ECMP by L4 hash on every switch)",
        ),
        Param::new("hosts_per_leaf", "4", Rule::Count, "leaf-spine: hosts under one leaf router"),
        Param::new("spines", "2", Rule::Count, "leaf-spine: spine routers per fabric"),
        Param::new(
            "rate",
            rate,
            Rule::Rate,
            "rate of every link in experiment units, divided by scale (the thesis: 1 Gbit/s)",
        ),
        Param::new(
            "buffer",
            "128KB",
            Rule::Bytes,
            "drop-tail queue of every link direction (the thesis: 128 KB); bytes do not scale",
        ),
        Param::new(
            "bucket",
            "3028B",
            Rule::Bytes,
            "token bucket of every link direction's shaper (tbf burst; default two full frames, the least that \
             leaves the shaper a frame's time of slack when its timer fires late); bytes, so the same at every D, \
             where a bucket of 1 ms of the rate would shrink with D",
        ),
        Param::new("cc", "reno", Rule::Choice, "congestion control of every flow (the thesis: NewReno)"),
        Param::new("t_deadline", "300ms", Rule::Time, "lanes: switch deadline ([Lanes]: 300 ms)"),
        Param::new("alpha", "1", Rule::Unitless, "lanes link-cost: α of eq. 5.7"),
        Param::new(
            "gamma",
            "1",
            Rule::PerTime,
            "lanes link-cost: γ of eq. 5.7, per ms of t − t_deadline (divided by scale, so that the deadline \
             term keeps its weight in experiment units)",
        ),
        Param::new(
            "nu_unit",
            "1ms",
            Rule::Time,
            "lanes link-cost: the unit ν is counted in (1ms: queueing weighs little against the deadline term; \
             1us at the thesis's 1 Gbit/s, 10us at 100 Mbit/s: a congested SL is left at once)",
        ),
        Param::new(
            "metrics",
            "off",
            Rule::Choice,
            "serve every daemon's Prometheus metrics (label host) on this address while it runs, e.g. 9464",
        ),
        Param::new(
            "size_threshold",
            "100KB",
            Rule::Bytes,
            "lanes size, size-link-cost: bytes after which a connection moves to LL (the short-flow class ends at \
             100 KB)",
        ),
        Param::new(
            "signals",
            "auto",
            Rule::Choice,
            "lanes: where each daemon's signals come from: bpf (per-ACK costs in a BPF program, an event only \
             when a connection's decision changes), diag (sock_diag every sample_interval), auto (bpf where the \
             policy and kernel allow, else diag with a warning)",
        ),
        Param::new(
            "backups",
            "prepare",
            Rule::Choice,
            "lanes, BPF signals: when a connection's backup LL subflows open: prepare (at the program's signal, \
             half the size threshold or of t_deadline) or established (every connection, at once)",
        ),
        Param::new(
            "sample_interval",
            "20ms",
            Rule::Time,
            "lanes: how often each daemon reads sock_diag (every dump walks the TCP hash of all namespaces; the \
             3/4-1/4 cost smoothing then lags a rising cost by about 3 intervals)",
        ),
        Param::new(
            SCALE_KEY,
            "1",
            Rule::Factor,
            "time dilation D (issue 25): every rate divided by D, every time (delays, deadlines, ν unit, \
             intervals, durations, timeouts, rto_min, rto_init) multiplied by D, bytes and counts unchanged; FCTs are \
             recorded in wall time and in experiment units (÷ D)",
        ),
        Param::new(
            "rto_min",
            "200ms",
            Rule::Time,
            "TCP's minimum RTO on every host route, in experiment units (Linux: 200 ms); set on the routes when \
             the scaled value exceeds the kernel's 200 ms (the kernel honours a route's rto_min only above it)",
        ),
        Param::new(
            "rto_init",
            "1s",
            Rule::Time,
            "TCP's initial RTO (SYN, SYN-ACK, data before the first RTT sample) on every host, in experiment \
             units (Linux: 1 s, no sysctl or route knob); any other scaled value is set by a BPF sock_ops program \
             for the hosts' namespaces (BPF_SOCK_OPS_TIMEOUT_INIT, whole 4 ms ticks at HZ 250, at most 120 s)",
        ),
        Param::new(
            "delayed_ack",
            "on",
            Rule::Choice,
            "on: the hosts' TCP delays ACKs as Linux does (timer at least 40 ms, which D cannot scale); off: \
             every segment acknowledged at once (quickack on the host routes), the same at every D",
        ),
        Param::new(
            "initcwnd",
            "10",
            Rule::Count,
            "TCP's initial window in segments on every host route (Linux: 10; the thesis: 12, §6.1); set with \
             the route's initcwnd metric when not 10",
        ),
        Param::new(
            "writes",
            "bulk",
            Rule::Choice,
            "how senders write: bulk (64 KiB writes, TCP_NODELAY) or bulksend (512-byte writes with Nagle on, as \
             ns-3's BulkSend application on DCE's Linux stack: its SendSize default, no TCP_NODELAY)",
        ),
        Param::new(
            "capture",
            "off",
            Rule::Choice,
            "on: capture every host's interfaces during each run and record, per flow, the time from its first \
             SYN to the ACK of its last data byte and to the ACK of its FIN as the sender's capture shows them \
             (senders then close with a FIN after the data, as ns-3's BulkSend does, instead of a reset)",
        ),
        Param::new(
            "tlp",
            "on",
            Rule::Choice,
            "on: tail loss probes as Linux sends them (2 RTTs plus 8 ms, or plus 200 ms with one segment out, \
             which D cannot scale); off: net.ipv4.tcp_early_retrans=0 on the hosts, a tail loss waits for the \
             scaled RTO",
        ),
    ]
}

fn fabric_spec(p: &Knobs) -> Result<FabricSpec> {
    Ok(FabricSpec {
        shape: Shape::parse(p.text("topology")?)?,
        hosts: p.count("hosts")? as u32,
        fabrics: p.count("fabrics")? as u32,
        hosts_per_leaf: p.count("hosts_per_leaf")? as u32,
        spines: p.count("spines")? as u32,
        rate: p.rate("rate")?,
        buffer: p.bytes("buffer")?,
        bucket: p.bytes("bucket")?,
    })
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

/// The datacenter and the run's parameters, as an experiment sees them.
struct Bed {
    fab: Fabric,
    params: Knobs,
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
            cc: self.params.text("cc")?.to_string(),
            seed: ctx.seed,
            limit,
            end: RunEnd::AllFlows,
            capture: on_off(&self.params, "capture")?,
            writes: match self.params.choice("writes", &["bulk", "bulksend"])?.as_slice() {
                [w] if w == "bulksend" => Writes::Small { size: BULKSEND_WRITE },
                [_] => Writes::Bulk,
                _ => bail!("writes: exactly one of bulk, bulksend"),
            },
            dir,
            tag,
        })
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

/// Brings the datacenter up for `experiment`; `policies` says whether the
/// variants are policies (checked before anything is built) or something
/// else the experiment checks itself. With D > 1 the scaled `rto_min` goes
/// on every host route and the scaled initial RTO on every host.
fn prepare_bed<E: Experiment + 'static>(
    p: &Params,
    d: Dilation,
    declared: &[Param],
    experiment: E,
    policies: bool,
) -> Result<Box<dyn Testbed>> {
    let k = Knobs::new(p, declared, d)?;
    let spec = fabric_spec(&k)?;
    if policies {
        for v in k.choice("variants", &POLICIES)? {
            mode_of(&v)?;
        }
    }
    let metrics = RouteMetrics {
        rto_min: Some(k.time("rto_min")?).filter(|&r| r > KERNEL_RTO_MIN),
        quickack: !on_off(&k, "delayed_ack")?,
        initcwnd: match k.count("initcwnd")? {
            0 => bail!("initcwnd: at least 1 segment"),
            10 => None,
            n => Some(u32::try_from(n).context("initcwnd")?),
        },
    };
    let tlp = on_off(&k, "tlp")?;
    let rto_init = k.time("rto_init")?;
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
    Ok(Box::new(LanesBed { bed: Bed { fab, params: k }, experiment }))
}

/// An on/off parameter.
fn on_off(k: &Knobs, key: &str) -> Result<bool> {
    match k.choice(key, &["on", "off"])?.as_slice() {
        [v] => Ok(v == "on"),
        _ => bail!("{key}: exactly one of on, off"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::workloads::Mix;
    use crate::runner::scenario::{resolve_params, Scenario};
    use tcpaccel_core::scale::{check_rules, Quantity};
    use tcpaccel_core::units::{Bytes, Rate};

    /// Every lanes scenario with its declarations.
    fn declared() -> Vec<(Box<dyn Scenario>, Vec<Param>)> {
        vec![
            (Box::new(LanesBasic), LanesBasic.declared()),
            (Box::new(LanesBuildup), LanesBuildup.declared()),
            (Box::new(LanesRealistic(Mix::WebSearch)), LanesRealistic(Mix::WebSearch).declared()),
            (Box::new(LanesRealistic(Mix::DataMining)), LanesRealistic(Mix::DataMining).declared()),
            (Box::new(LanesParams), LanesParams.declared()),
        ]
    }

    fn knobs_at(s: &dyn Scenario, decl: &[Param], d: u32) -> Knobs {
        let p = resolve_params(s, false, &[(SCALE_KEY.to_string(), d.to_string())]).unwrap();
        Knobs::new(&p, decl, Dilation::new(d).unwrap()).unwrap()
    }

    #[test]
    fn every_parameter_of_every_lanes_scenario_follows_its_rule() {
        for (s, decl) in declared() {
            let rules: Vec<(&str, Rule)> = decl.iter().map(|p| (p.spec.key, p.rule)).collect();
            let keys: Vec<&str> = s.params().iter().map(|p| p.key).collect();
            check_rules(keys.iter().copied(), &rules).unwrap_or_else(|e| panic!("{}: {e}", s.name()));
            let one = knobs_at(s.as_ref(), &decl, 1);
            for d in [1u32, 2, 4, 10] {
                let k = knobs_at(s.as_ref(), &decl, d);
                assert_eq!(k.keys().count(), keys.len());
                for (key, rule) in &rules {
                    let base = one.declared(key).unwrap();
                    let got = k.dilated(key).unwrap();
                    let what = format!("{} {key} at D={d}", s.name());
                    match (rule, &base, &got) {
                        (Rule::Time, Quantity::Time(a), Quantity::Time(b)) => {
                            assert_eq!(*b, *a * d, "{what}");
                            assert_eq!(k.time(key).unwrap(), *b, "{what}: the getter");
                        }
                        (Rule::Rate, Quantity::Rate(a), Quantity::Rate(b)) => {
                            assert_eq!(b.0 * u64::from(d), a.0, "{what}");
                            assert_eq!(k.rate(key).unwrap(), *b, "{what}: the getter");
                        }
                        (Rule::PerTime, Quantity::Number(a), Quantity::Number(b)) => {
                            assert_eq!(*b * f64::from(d), *a, "{what}")
                        }
                        (Rule::PerTime, Quantity::Text(_), _) => {
                            let a = one.per_time_list(key).unwrap();
                            let b = k.per_time_list(key).unwrap();
                            let back: Vec<f64> = b.iter().map(|x| x * f64::from(d)).collect();
                            assert_eq!(back, a, "{what}");
                        }
                        (Rule::Factor, _, Quantity::Count(x)) => assert_eq!(*x, u64::from(d), "{what}"),
                        (r, a, b) => {
                            assert!(!r.scales(), "{what}: {r:?} left unchecked");
                            assert_eq!(a, b, "{what}: bytes, counts, loads and choices do not scale");
                        }
                    }
                }
            }
        }
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
        let k = Knobs::new(&p, &s.declared(), d).unwrap();
        assert_eq!(k.rate("rate").unwrap(), Rate::mbps(25));
        assert_eq!(k.bytes("bucket").unwrap(), crate::testbeds::fabric::TWO_FRAMES, "bytes: unchanged by D");
        assert_eq!(k.time("t_deadline").unwrap(), Duration::from_millis(1200));
        assert_eq!(k.time("nu_unit").unwrap(), Duration::from_micros(40));
        assert_eq!(k.time("sample_interval").unwrap(), Duration::from_millis(200));
        assert_eq!(k.time("duration").unwrap(), Duration::from_secs(20));
        assert_eq!(k.time("rto_min").unwrap(), Duration::from_millis(800));
        assert_eq!(k.time("rto_init").unwrap(), Duration::from_secs(4));
        assert_eq!(k.per_time("gamma").unwrap(), 0.25);
        assert_eq!(k.bytes("buffer").unwrap(), Bytes(128 * 1000));
        assert_eq!(k.bytes("size_threshold").unwrap(), Bytes(100 * 1000));
        assert_eq!(k.numbers::<f64>("loads").unwrap(), vec![0.2, 0.5, 0.8]);
        assert_eq!(k.wall(Duration::from_secs(4)), Duration::from_secs(16));
        let policy = PolicyParams::from(&k, "size-link-cost").unwrap();
        assert_eq!(
            (policy.t_deadline, policy.nu_unit, policy.sample_interval, policy.gamma, policy.alpha),
            (Duration::from_millis(1200), Duration::from_micros(40), Duration::from_millis(200), 0.25, 1.0)
        );
        assert_eq!(fabric_spec(&k).unwrap().rate, Rate::mbps(25));
    }

    #[test]
    fn unknown_variants_are_refused_with_the_valid_ones() {
        let e = mode_of("ecmp").unwrap_err().to_string();
        assert!(e.contains("ecmp") && e.contains("link-cost"), "{e}");
    }
}
