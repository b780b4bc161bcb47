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
use crate::runner::records::CapturedTimes;
use anyhow::{bail, Context, Result};
use tcpaccel_core::stats::percentile_sorted;
use tcpaccel_core::workload::{Flow, FlowClass};

use crate::runner::scenario::{stop_flag, FlowCounters, Params, RunCtx, Testbed};
use crate::testbeds::fabric::{Fabric, FabricSpec, MptcpMode, RouteMetrics, Shape};
use crate::testbeds::rto_init::KERNEL_RTO_INIT;
use tcpaccel_core::scale::{Dilation, Rule};

mod basic;
mod buildup;
mod daemons;
mod knobs;
mod params;
mod realistic;

use knobs::{estimate_scaled, scaled, Knobs, Param, SCALE_KEY};

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

/// Short-flow FCT statistics of flows in (0, 100 KB], in ms: `avg`, `p95`
/// and `p99` over the completed flows; `avg_all` and `p99_all` over all of
/// them, an unfinished flow counted with the time it had when the run
/// ended — a lower bound on what it would have taken, so these are lower
/// bounds too, and equal the others when every flow completed.
#[derive(Debug, Clone, Copy)]
struct ShortStats {
    n: usize,
    incomplete: usize,
    avg: f64,
    p95: f64,
    p99: f64,
    avg_all: f64,
    p99_all: f64,
}

/// A flow's completion time in seconds, or for an unfinished flow the time
/// it had from its scheduled start until the run ended at `ended_s`.
fn time_had_s(r: &FlowResult, ended_s: f64) -> f64 {
    r.fct_s.unwrap_or((ended_s - r.start_s).max(0.0))
}

/// Mean and the 95th and 99th percentiles of `ms` (sorted in place); NaN
/// for an empty set.
fn avg_p95_p99(ms: &mut [f64]) -> (f64, f64, f64) {
    if ms.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    ms.sort_by(f64::total_cmp);
    let avg = ms.iter().sum::<f64>() / ms.len() as f64;
    (avg, percentile_sorted(ms, 95.0), percentile_sorted(ms, 99.0))
}

fn short_stats(o: &Outcome) -> ShortStats {
    let short: Vec<&FlowResult> = o.results.iter().filter(|r| r.bytes <= SHORT_MAX).collect();
    let mut done: Vec<f64> = short.iter().filter_map(|r| r.fct_s).map(|s| s * 1e3).collect();
    let ended_s = o.ended.as_secs_f64();
    let mut all: Vec<f64> = short.iter().map(|r| time_had_s(r, ended_s) * 1e3).collect();
    let n = done.len();
    let (avg, p95, p99) = avg_p95_p99(&mut done);
    let (avg_all, _, p99_all) = avg_p95_p99(&mut all);
    ShortStats { n, incomplete: short.len() - n, avg, p95, p99, avg_all, p99_all }
}

/// Where the bytes went, per class of completed flow: the SL's share (%) of
/// the bytes the flows' lanes carried (`FlowResult::lane_bytes`), for short
/// flows, short flows at or above the short p99 (`tail_ms`, wall), medium
/// and long flows. A class without measured bytes is left out.
fn sl_byte_shares(o: &Outcome, tail_ms: f64) -> Vec<(&'static str, f64)> {
    let share = |keep: &dyn Fn(&FlowResult) -> bool| {
        let (mut sl, mut all) = (0u64, 0u64);
        for r in o.results.iter().filter(|r| r.fct_s.is_some() && keep(r)) {
            sl += r.lane_bytes.get("sl").copied().unwrap_or(0);
            all += r.lane_bytes.values().sum::<u64>();
        }
        (all > 0).then(|| sl as f64 * 100.0 / all as f64)
    };
    let short = |r: &FlowResult| r.bytes <= SHORT_MAX;
    let tail = |r: &FlowResult| short(r) && r.fct_s.is_some_and(|f| f * 1e3 >= tail_ms);
    let long = |r: &FlowResult| !short(r) && r.class == FlowClass::Long;
    let medium = |r: &FlowResult| !short(r) && r.class != FlowClass::Long;
    [
        ("short_sl_bytes_pct", share(&short)),
        ("tail_short_sl_bytes_pct", share(&tail)),
        ("medium_sl_bytes_pct", share(&medium)),
        ("long_sl_bytes_pct", share(&long)),
    ]
    .into_iter()
    .filter_map(|(n, v)| v.map(|v| (n, v)))
    .collect()
}

/// Flow by flow, what larger flows put on SL while a short flow ran: each
/// completed flow above 100 KB has its SL bytes spread evenly over its life,
/// and a short flow sees the sum over its own life, as a rate (Mbit/s, wall
/// time). Returns the median of that over the short flows at or above the
/// short p99 FCT, and over the middle tenth (p45–p55); `None` without short
/// flows or without per-lane bytes.
fn sl_contention(results: &[FlowResult]) -> Option<(f64, f64)> {
    let done = |r: &&FlowResult| r.fct_s.is_some_and(|f| f > 0.0) && !r.lane_bytes.is_empty();
    let large: Vec<(f64, f64, f64)> = results
        .iter()
        .filter(done)
        .filter(|r| r.bytes > SHORT_MAX)
        .map(|r| {
            let f = r.fct_s.unwrap_or(0.0);
            (r.start_s, r.start_s + f, r.lane_bytes.get("sl").copied().unwrap_or(0) as f64 * 8.0 / f)
        })
        .collect();
    let mut short: Vec<(f64, f64)> = results
        .iter()
        .filter(done)
        .filter(|r| r.bytes <= SHORT_MAX)
        .map(|r| (r.start_s, r.fct_s.unwrap_or(0.0)))
        .collect();
    if short.is_empty() {
        return None;
    }
    short.sort_by(|a, b| a.1.total_cmp(&b.1));
    let seen = |&(start, fct): &(f64, f64)| {
        let end = start + fct;
        let bits: f64 = large.iter().map(|&(a, b, rate)| rate * (end.min(b) - start.max(a)).max(0.0)).sum();
        bits / fct / 1e6
    };
    let fcts: Vec<f64> = short.iter().map(|x| x.1).collect();
    let p99 = percentile_sorted(&fcts, 99.0);
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            f64::NAN
        } else {
            percentile_sorted(&v, 50.0)
        }
    };
    let tail = median(short.iter().filter(|x| x.1 >= p99).map(seen).collect());
    let n = short.len();
    let mid = median(short[n * 45 / 100..(n * 55 / 100).max(n * 45 / 100 + 1)].iter().map(seen).collect());
    Some((tail, mid))
}

/// Goodput of long-class flows at their receivers: bytes received over the
/// run's wall time, per back-end host, in Mbit/s, and how many long-class
/// flows the run had. Every long flow counts, finished or not: one the
/// sinks never heard of counts with 0 bytes. `None` for the goodput when
/// the run had no long flow (the thesis's workload at ⌊Load × back-end
/// hosts⌋ = 0 senders): no long flow is not 0 Mbit/s.
fn long_goodput(o: &Outcome, backends: usize) -> (usize, Option<f64>) {
    let long: Vec<&FlowResult> = o.results.iter().filter(|r| r.class == FlowClass::Long).collect();
    if long.is_empty() {
        return (0, None);
    }
    let bytes: u64 = long.iter().map(|r| o.received.get(&r.id).map_or(0, |x| x.bytes)).sum();
    let mbps = bytes as f64 * 8.0 / o.wall.as_secs_f64().max(1e-9) / 1e6 / backends.max(1) as f64;
    (long.len(), Some(mbps))
}

/// Sets a time metric given in wall ms: `name` in experiment units (÷ D),
/// and when D > 1 also `name` with `_wall` before its `@point` in wall ms.
fn put_ms(ctx: &mut RunCtx<'_>, d: Dilation, name: &str, suffix: &str, wall_ms: f64) {
    put(ctx, format!("{name}{suffix}"), d.ms_to_experiment(wall_ms));
    if d != Dilation::ONE {
        put(ctx, format!("{name}_wall{suffix}"), wall_ms);
    }
}

/// Writes flow records and the common metrics of one outcome; FCTs in
/// experiment units (÷ D), flow records in both.
fn record_outcome(
    ctx: &mut RunCtx<'_>,
    d: Dilation,
    o: &Outcome,
    suffix: &str,
    flows_too: bool,
) -> Result<ShortStats> {
    let ended_s = o.ended.as_secs_f64();
    for late in o.results.iter().filter_map(|r| r.start_late_s) {
        ctx.flow_started_late(late);
    }
    if flows_too {
        for r in &o.results {
            // The point (`@0.5`, `@6`) is part of the class: flows are
            // recorded at one point only, and the CDF titles should say which.
            let class = if r.bytes <= SHORT_MAX {
                format!("short (≤100 KB) {suffix}")
            } else if r.class == FlowClass::Long {
                format!("long {suffix}")
            } else {
                format!("medium {suffix}")
            };
            // An incomplete flow is recorded as such, with the time it had.
            let fct_ms = time_had_s(r, ended_s) * 1e3;
            let capture = o.captured.get(&r.id).map(|c| CapturedTimes {
                to_last_data_ack_ms: c.to_last_data_ack.map(|t| t.as_secs_f64() * 1e3),
                to_fin_ack_ms: c.to_fin_ack.map(|t| t.as_secs_f64() * 1e3),
            });
            let counted =
                FlowCounters { lane_bytes: r.lane_bytes.clone(), retrans_bytes: r.retrans_bytes, capture };
            ctx.flow_counted(r.id, class.trim_end(), r.bytes, r.start_s, fct_ms, r.fct_s.is_some(), counted)?;
        }
    }
    let s = short_stats(o);
    for (name, share) in sl_byte_shares(o, s.p99) {
        put(ctx, format!("{name}{suffix}"), share);
    }
    if let Some((tail, mid)) = sl_contention(&o.results) {
        put(ctx, format!("sl_large_mbps_tail_short{suffix}"), d.rate_to_experiment(tail));
        put(ctx, format!("sl_large_mbps_mid_short{suffix}"), d.rate_to_experiment(mid));
    }
    let unread = o.results.iter().filter(|r| r.fct_s.is_some() && r.lane_bytes.is_empty()).count();
    if unread > 0 {
        put(ctx, format!("flows_without_lane_bytes{suffix}"), unread as f64);
    }
    put(ctx, format!("short_flows{suffix}"), s.n as f64);
    put_ms(ctx, d, "short_avg_ms", suffix, s.avg);
    put_ms(ctx, d, "short_p95_ms", suffix, s.p95);
    put_ms(ctx, d, "short_p99_ms", suffix, s.p99);
    put(ctx, format!("short_incomplete{suffix}"), s.incomplete as f64);
    if !o.captured.is_empty() {
        let short_ms = |end: fn(&CapturedFct) -> Option<Duration>| -> Vec<f64> {
            o.results
                .iter()
                .filter(|r| r.bytes <= SHORT_MAX && r.fct_s.is_some())
                .filter_map(|r| o.captured.get(&r.id).and_then(end))
                .map(|t| t.as_secs_f64() * 1e3)
                .collect()
        };
        for (name, end) in [
            ("syn_data_ack", (|c: &CapturedFct| c.to_last_data_ack) as fn(&CapturedFct) -> Option<Duration>),
            ("syn_fin_ack", |c: &CapturedFct| c.to_fin_ack),
        ] {
            let mut v = short_ms(end);
            put(ctx, format!("short_timed_{name}{suffix}"), v.len() as f64);
            let (avg, _, p99) = avg_p95_p99(&mut v);
            put_ms(ctx, d, &format!("short_avg_ms_{name}"), suffix, avg);
            put_ms(ctx, d, &format!("short_p99_ms_{name}"), suffix, p99);
        }
    }
    put_ms(ctx, d, "short_avg_ms_all", suffix, s.avg_all);
    put_ms(ctx, d, "short_p99_ms_all", suffix, s.p99_all);
    let total: u64 = o.tx_per_fabric.iter().sum();
    if total > 0 {
        put(ctx, format!("sl_share_pct{suffix}"), o.tx_per_fabric[0] as f64 * 100.0 / total as f64);
    }
    if let Some(d) = &o.daemons {
        put(ctx, format!("switches{suffix}"), d.switch_ages_ms.len() as f64);
        put(ctx, format!("failed_pm_commands{suffix}"), d.failed_commands as f64);
        // Each daemon's own thread only: the BPF program's per-segment work
        // is charged to the threads and softirqs that receive the segments.
        let wall = o.wall.as_secs_f64().max(1e-9);
        if let Some(max) = d.cpu_s.iter().copied().reduce(f64::max) {
            let mean = d.cpu_s.iter().sum::<f64>() / d.cpu_s.len() as f64;
            put(ctx, format!("daemon_cpu_pct_mean{suffix}"), mean * 100.0 / wall);
            put(ctx, format!("daemon_cpu_pct_max{suffix}"), max * 100.0 / wall);
            let hosts = d.cpu_s.len() as f64;
            let probes = d.probe_cpu_s.iter().sum::<f64>() / hosts;
            put(ctx, format!("daemon_probe_cpu_pct_mean{suffix}"), probes * 100.0 / wall);
            let start = d.start_cpu_s.iter().sum::<f64>() / hosts;
            put(ctx, format!("daemon_start_cpu_ms_mean{suffix}"), start * 1e3);
        }
        put(ctx, format!("{DAEMONS_ON_BPF_METRIC}{suffix}"), if d.signals == "bpf" { 1.0 } else { 0.0 });
        if d.signals == "bpf" {
            let hosts = d.cpu_s.len().max(1) as f64;
            put(ctx, format!("bpf_prog_cpu_pct_mean{suffix}"), d.bpf_run_s * 100.0 / wall / hosts);
            put(ctx, format!("bpf_signals{suffix}"), d.bpf_signals as f64);
            let mut v = d.signal_ms.clone();
            v.sort_by(f64::total_cmp);
            if !v.is_empty() {
                put(ctx, format!("signal_to_switch_ms_p50{suffix}"), percentile_sorted(&v, 50.0));
                put(ctx, format!("signal_to_switch_ms_p99{suffix}"), percentile_sorted(&v, 99.0));
            }
        }
    }
    let cut = o.results.iter().filter(|r| r.error.as_ref().is_some_and(|e| e.is_time_limit())).count();
    put(ctx, format!("cut_by_limit{suffix}"), cut as f64);
    // Flows the time limit cut are counted above, not as failures.
    let errors: Vec<&crate::engines::flows::FlowFailure> =
        o.results.iter().filter_map(|r| r.error.as_ref()).filter(|e| !e.is_time_limit()).collect();
    if !errors.is_empty() {
        ctx.note(format!("{} flow(s) failed{suffix}; first: {}", errors.len(), errors[0]))?;
    }
    Ok(s)
}

/// Sets a metric when it has a value (no short flow completed: left out, not NaN).
fn put(ctx: &mut RunCtx<'_>, name: String, v: f64) {
    if v.is_finite() {
        ctx.metric(&name, v);
    }
}

/// Writes a sample when it has a value.
fn sample(ctx: &mut RunCtx<'_>, series: &str, x: f64, v: f64) -> Result<()> {
    if v.is_finite() {
        ctx.sample(series, x, v)?;
    }
    Ok(())
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
    fn sl_contention_is_what_large_flows_put_on_sl_during_each_short_flow() {
        let r = |id: u64, bytes: u64, start_s: f64, fct: f64, sl: u64| FlowResult {
            id,
            class: FlowClass::Short,
            src: 0,
            dst: 1,
            bytes,
            start_s,
            start_late_s: Some(0.0),
            fct_s: Some(fct),
            lane: "mptcp".into(),
            winner: None,
            lane_bytes: [("sl".to_string(), sl), ("ll0".to_string(), bytes + 16 - sl)].into(),
            retrans_bytes: Some(0),
            conns: Vec::new(),
            error: None,
        };
        // A: 1 MB on SL over 0–1 s (8 Mbit/s); B: 1 MB all on LL over 2–3 s.
        let mut v = vec![r(1, 1_000_000, 0.0, 1.0, 1_000_000), r(2, 1_000_000, 2.0, 1.0, 0)];
        // 99 short flows of 10 ms inside B's life, one of 100 ms inside A's,
        // whose first half overlaps A only.
        v.extend((0..99).map(|i| r(10 + i, 10_000, 2.0 + i as f64 * 0.005, 0.010, 10_016)));
        v.push(r(200, 10_000, 0.95, 0.100, 10_016));
        let (tail, mid) = sl_contention(&v).unwrap();
        assert!((tail - 4.0).abs() < 1e-9, "half of its life at 8 Mbit/s: {tail}");
        assert_eq!(mid, 0.0);
        // Without short flows, or without per-lane bytes: nothing to say.
        assert_eq!(sl_contention(&v[..2]), None);
        let bare: Vec<FlowResult> =
            v.iter().cloned().map(|x| FlowResult { lane_bytes: BTreeMap::new(), ..x }).collect();
        assert_eq!(sl_contention(&bare), None);
    }

    #[test]
    fn short_stats_count_unfinished_flows_with_the_time_they_had_beside_the_completed() {
        let r = |id: u64, bytes: u64, start_s: f64, fct_s: Option<f64>| FlowResult {
            id,
            class: if bytes > SHORT_MAX { FlowClass::Long } else { FlowClass::Short },
            src: 0,
            dst: 1,
            bytes,
            start_s,
            start_late_s: Some(0.0),
            fct_s,
            lane: "mptcp".into(),
            winner: None,
            lane_bytes: BTreeMap::new(),
            retrans_bytes: None,
            conns: Vec::new(),
            error: None,
        };
        // 98 short flows of 10 ms; two started at 0.5 s and unfinished when
        // the run ended at 2 s (1.5 s each); a long flow, unfinished, apart.
        let mut results: Vec<FlowResult> =
            (0..98).map(|i| r(i, 10_000, 0.01 * i as f64, Some(0.010))).collect();
        results.push(r(100, 50_000, 0.5, None));
        results.push(r(101, 50_000, 0.5, None));
        results.push(r(102, 800_000_000, 0.0, None));
        let o = Outcome {
            results,
            received: BTreeMap::new(),
            daemons: None,
            tx_per_fabric: vec![],
            wall: Duration::from_secs(2),
            ended: Duration::from_secs(2),
            captured: BTreeMap::new(),
        };
        let s = short_stats(&o);
        assert_eq!((s.n, s.incomplete), (98, 2));
        assert!((s.avg - 10.0).abs() < 1e-9 && (s.p99 - 10.0).abs() < 1e-9, "{s:?}");
        assert!((s.avg_all - (98.0 * 10.0 + 2.0 * 1500.0) / 100.0).abs() < 1e-9, "{s:?}");
        assert!((s.p99_all - 1500.0).abs() < 1e-9, "{s:?}");
        // With every flow complete both views agree.
        let done = Outcome { results: o.results[..98].to_vec(), ..o };
        let s = short_stats(&done);
        assert_eq!((s.avg_all, s.p99_all, s.incomplete), (s.avg, s.p99, 0));
    }

    #[test]
    fn long_goodput_counts_every_long_flow_and_is_absent_without_one() {
        let t0 = Instant::now();
        let r = |id: u64, class: FlowClass, bytes: u64, fct_s: Option<f64>| FlowResult {
            id,
            class,
            src: 0,
            dst: 1,
            bytes,
            start_s: 0.0,
            start_late_s: Some(0.0),
            fct_s,
            lane: "mptcp".into(),
            winner: None,
            lane_bytes: BTreeMap::new(),
            retrans_bytes: None,
            conns: Vec::new(),
            error: None,
        };
        let got = |bytes: u64| Received { bytes, first: t0, last: t0, connections: 1, completed: 0 };
        // One finished long flow (10 MB), one cut off by the end of the run
        // after 5 MB, one the sinks never heard of, and a short flow that
        // does not count: 15 MB over 2 s and 4 back-end hosts is 15 Mbit/s.
        let o = Outcome {
            results: vec![
                r(1, FlowClass::Long, 10_000_000, Some(1.0)),
                r(2, FlowClass::Long, 20_000_000, None),
                r(3, FlowClass::Long, 20_000_000, None),
                r(4, FlowClass::Short, 50_000, Some(0.01)),
            ],
            received: [(1, got(10_000_000)), (2, got(5_000_000)), (4, got(50_000))].into(),
            daemons: None,
            tx_per_fabric: vec![],
            wall: Duration::from_secs(2),
            ended: Duration::from_secs(2),
            captured: BTreeMap::new(),
        };
        let (n, mbps) = long_goodput(&o, 4);
        assert_eq!(n, 3);
        assert!((mbps.unwrap() - 15.0).abs() < 1e-9, "{mbps:?}");
        // Long flows that delivered nothing: 0 Mbit/s, stated.
        let stalled = Outcome { received: BTreeMap::new(), ..o };
        assert_eq!(long_goodput(&stalled, 4), (3, Some(0.0)));
        // No long flow at all (⌊0.2 × 4⌋ = 0 senders): no goodput, not 0.
        let none = Outcome { results: stalled.results[3..].to_vec(), ..stalled };
        assert_eq!(long_goodput(&none, 4), (0, None));
    }

    #[test]
    fn unknown_variants_are_refused_with_the_valid_ones() {
        let e = mode_of("ecmp").unwrap_err().to_string();
        assert!(e.contains("ecmp") && e.contains("link-cost"), "{e}");
    }
}
