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

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::engines::flows::{run_flows, FlowResult, Received, RunOptions, Sinks, Transport};
use crate::engines::workloads::{self as workload, Hosts, Mix};
use anyhow::{bail, Context, Result};
use tcpaccel_core::stats::percentile_sorted;
use tcpaccel_core::workload::{Flow, FlowClass};
use tcpaccel_lanes::record::{DecisionAction, Record};

use crate::runner::records::MetricSpec;
use crate::runner::scenario::{stop_flag, ParamSpec, Params, RunCtx, Scenario, Testbed};
use crate::testbeds::fabric::{Fabric, FabricSpec, MptcpMode};

const FLOW_PORT: u16 = 7400;
/// Flows up to this size are the short flows the thesis measures ((0, 100 KB]).
const SHORT_MAX: u64 = 100 * 1000;
/// RepFlow replicates flows below this (anchors.md, Workloads).
const REPFLOW_THRESHOLD: u64 = 100 * 1000;
/// Time after the last arrival for flows to finish before they are cut.
const DRAIN: Duration = Duration::from_secs(4);

const POLICIES: [&str; 7] = ["mptcp", "single", "repflow", "deadline", "link-cost", "size", "size-link-cost"];

/// The lanes policies (the variants that run a daemon): `size` switches a
/// connection after `size_threshold` bytes, `size-link-cost` on whichever of
/// the threshold and the link cost comes first (beyond the thesis).
const LANES_POLICIES: [&str; 4] = ["deadline", "link-cost", "size", "size-link-cost"];

/// The parameters every lanes scenario shares.
fn common_params(fabrics: &str, hosts: &str, rate: &str) -> Vec<ParamSpec> {
    vec![
        ParamSpec::new(
            "variants",
            POLICIES.join(","),
            "policies to compare (mptcp, single, repflow, deadline, link-cost)",
        ),
        ParamSpec::new("hosts", hosts, "hosts in the datacenter (a quarter are back-end hosts)"),
        ParamSpec::new("fabrics", fabrics, "fabrics = lanes: 1 SL + the rest LL"),
        ParamSpec::new("hosts_per_leaf", "4", "hosts under one leaf router"),
        ParamSpec::new("spines", "2", "spine routers per fabric"),
        ParamSpec::new("rate", rate, "rate of every link (the thesis: 1 Gbit/s; scaled for 2 cores)"),
        ParamSpec::new("buffer", "128KB", "drop-tail queue of every link direction (the thesis: 128 KB)"),
        ParamSpec::new("cc", "reno", "congestion control of every flow (the thesis: NewReno)"),
        ParamSpec::new("t_deadline", "300ms", "lanes: switch deadline ([Lanes]: 300 ms)"),
        ParamSpec::new("alpha", "1", "lanes link-cost: α of eq. 5.7"),
        ParamSpec::new("gamma", "1", "lanes link-cost: γ of eq. 5.7"),
        ParamSpec::new(
            "nu_unit",
            "1ms",
            "lanes link-cost: the unit ν is counted in (1ms: queueing weighs little against the deadline term; \
             1us at the thesis's 1 Gbit/s, 10us at 100 Mbit/s: a congested SL is left at once)",
        ),
        ParamSpec::new(
            "metrics",
            "off",
            "serve every daemon's Prometheus metrics (label host) on this address while it runs, e.g. 9464",
        ),
        ParamSpec::new(
            "size_threshold",
            "100KB",
            "lanes size, size-link-cost: bytes after which a connection moves to LL (the short-flow class ends at \
             100 KB)",
        ),
        ParamSpec::new(
            "signals",
            "auto",
            "lanes: where each daemon's signals come from: bpf (per-ACK costs in a BPF program, an event only \
             when a connection's decision changes), diag (sock_diag every sample_interval), auto (bpf where the \
             policy and kernel allow, else diag with a warning)",
        ),
        ParamSpec::new(
            "backups",
            "prepare",
            "lanes, BPF signals: when a connection's backup LL subflows open: prepare (at the program's signal, \
             half the size threshold or of t_deadline) or established (every connection, at once)",
        ),
        ParamSpec::new(
            "sample_interval",
            "20ms",
            "lanes: how often each daemon reads sock_diag (every dump walks the TCP hash of all namespaces; the \
             3/4-1/4 cost smoothing then lags a rising cost by about 3 intervals)",
        ),
    ]
}

fn fabric_spec(p: &Params) -> Result<FabricSpec> {
    Ok(FabricSpec {
        hosts: p.u64("hosts")? as u32,
        fabrics: p.u64("fabrics")? as u32,
        hosts_per_leaf: p.u64("hosts_per_leaf")? as u32,
        spines: p.u64("spines")? as u32,
        rate: p.rate("rate")?,
        buffer: p.bytes("buffer")?,
    })
}

/// The switching policy a daemon runs.
#[derive(Debug, Clone)]
pub struct PolicyParams {
    pub kind: String,
    pub t_deadline: Duration,
    pub alpha: f64,
    pub gamma: f64,
    pub nu_unit: Duration,
    pub sample_interval: Duration,
    /// `[signals] source`: "auto", "bpf" or "diag".
    pub signals: String,
    /// `[signals] backups`: "prepare" or "established".
    pub backups: String,
    /// Switch after this many bytes too (`size_threshold` in the config).
    pub size_threshold: Option<u64>,
    /// Serve the daemons' metrics here while they run.
    pub metrics: Option<std::net::SocketAddr>,
}

impl PolicyParams {
    /// The daemon policy of a variant: `size-link-cost` is the link-cost
    /// policy plus the size threshold.
    fn from(p: &Params, variant: &str) -> Result<PolicyParams> {
        let (kind, size) = match variant {
            "size" => ("size", true),
            "size-link-cost" => ("link-cost", true),
            other => (other, false),
        };
        let metrics = match p.str("metrics")? {
            "off" | "" => None,
            a => Some(tcpaccel_metrics::parse_listen(a)?),
        };
        Ok(PolicyParams {
            metrics,
            size_threshold: if size { Some(p.bytes("size_threshold")?.0) } else { None },
            kind: kind.into(),
            t_deadline: p.duration("t_deadline")?,
            alpha: p.f64("alpha")?,
            gamma: p.f64("gamma")?,
            nu_unit: p.duration("nu_unit")?,
            sample_interval: p.duration("sample_interval")?,
            signals: match p.choice("signals", &["auto", "bpf", "diag"])?.as_slice() {
                [one] => one.clone(),
                _ => bail!("signals: exactly one of auto, bpf, diag"),
            },
            backups: match p.choice("backups", &["prepare", "established"])?.as_slice() {
                [one] => one.clone(),
                _ => bail!("backups: exactly one of prepare, established"),
            },
        })
    }
}

/// The lanes daemon configuration of host `h`: every other host is a peer,
/// SL pair on fabric 0, one LL pair per other fabric.
pub fn daemon_config(spec: &FabricSpec, h: u32, policy: &PolicyParams) -> String {
    let mut t = format!(
        "[policy]\nkind = \"{}\"\nt_deadline = \"{}us\"\nalpha = {:?}\ngamma = {:?}\nnu_unit = \"{}ns\"\n\n\
         [signals]\nsource = \"{}\"\nbackups = \"{}\"\n\n[probe]\nport = 9\nsample_interval = \"{}us\"\n\n",
        policy.kind,
        policy.t_deadline.as_micros(),
        policy.alpha,
        policy.gamma,
        policy.nu_unit.as_nanos(),
        policy.signals,
        policy.backups,
        policy.sample_interval.as_micros()
    );
    if let Some(b) = policy.size_threshold {
        t = t.replacen("\n\n[signals]", &format!("\nsize_threshold = \"{b}B\"\n\n[signals]"), 1);
    }
    for peer in (0..spec.hosts).filter(|&p| p != h) {
        t.push_str(&format!(
            "[[peer]]\nname = \"h{peer}\"\nsl = [{{ local = \"{}\", remote = \"{}\" }}]\nll = [",
            FabricSpec::host_addr(h, 0),
            FabricSpec::host_addr(peer, 0)
        ));
        for f in 1..spec.fabrics {
            let sep = if f == 1 { "" } else { ", " };
            t.push_str(&format!(
                "{sep}{{ local = \"{}\", remote = \"{}\" }}",
                FabricSpec::host_addr(h, f),
                FabricSpec::host_addr(peer, f)
            ));
        }
        t.push_str("]\n\n");
    }
    t
}

/// A daemon thread's summary and the CPU time it used (s).
type DaemonRun = (tcpaccel_lanes::Summary, f64);

/// Lanes daemons running in every host, each writing JSON Lines to a file.
struct Daemons {
    /// The metrics endpoint, while the daemons run.
    _endpoint: Option<tcpaccel_metrics::Endpoint>,
    stop: Arc<AtomicBool>,
    handles: Vec<(String, JoinHandle<Result<DaemonRun>>)>,
    /// BPF run-time statistics on while the daemons run (their programs'
    /// CPU is reported beside the daemons' own).
    _bpf_stats: Option<tcpaccel_sys::bpf::StatsGuard>,
    files: Vec<PathBuf>,
}

impl Daemons {
    fn start(fab: &Fabric, policy: &PolicyParams, dir: &Path, tag: &str) -> Result<Daemons> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut reg = tcpaccel_metrics::Registry::default();
        let mut metrics = Vec::new();
        for h in 0..fab.spec.hosts {
            let sub = reg.sub_registry_with_label(("host".into(), format!("h{h}").into()));
            metrics.push(Arc::new(tcpaccel_lanes::metrics::LanesMetrics::register(sub)));
        }
        let endpoint = match policy.metrics {
            Some(at) => Some(
                tcpaccel_metrics::Endpoint::serve(at, Arc::new(reg))
                    .context("the lanes daemons' metrics endpoint")?,
            ),
            None => None,
        };
        let bpf_stats = match policy.signals.as_str() {
            "diag" => None,
            _ => tcpaccel_sys::bpf::enable_stats()
                .map_err(|e| tracing::warn!("BPF run-time statistics unavailable: {e}"))
                .ok(),
        };
        let mut d = Daemons {
            _endpoint: endpoint,
            stop: stop.clone(),
            handles: Vec::new(),
            files: Vec::new(),
            _bpf_stats: bpf_stats,
        };
        for h in 0..fab.spec.hosts {
            let m = policy.metrics.map(|_| metrics[h as usize].clone());
            let text = daemon_config(&fab.spec, h, policy);
            let cfg = tcpaccel_lanes::Config::parse(&text, &format!("lanes config of h{h}"))
                .with_context(|| format!("the generated lanes config of h{h}"))?;
            let ns = fab.hosts[h as usize].ns.clone();
            let file = dir.join(format!("lanes-{tag}-h{h}.jsonl"));
            let mut out =
                std::fs::File::create(&file).with_context(|| format!("creating {}", file.display()))?;
            let stop = stop.clone();
            let ns_thread = ns.clone();
            let handle = std::thread::Builder::new()
                .name(format!("lanes-h{h}"))
                .spawn(move || -> Result<DaemonRun> {
                    tcpaccel_sys::netns::enter(&ns_thread)
                        .with_context(|| format!("entering {ns_thread}"))?;
                    let opts = tcpaccel_lanes::Options {
                        netns: Some(ns_thread.clone()),
                        format: tcpaccel_lanes::Format::Json,
                        duration: None,
                        reload: None,
                        metrics: m,
                    };
                    let cpu0 = thread_cpu_s();
                    let summary = tcpaccel_lanes::run(cfg, &opts, &mut out, &stop)?;
                    Ok((summary, thread_cpu_s() - cpu0))
                })
                .context("starting a lanes daemon thread")?;
            d.handles.push((ns, handle));
            d.files.push(file);
        }
        // Each daemon writes its `ready` line once it listens for events.
        let deadline = Instant::now() + Duration::from_secs(5);
        for (i, f) in d.files.iter().enumerate() {
            loop {
                if std::fs::read_to_string(f).map(|s| s.contains("\"ready\"")).unwrap_or(false) {
                    break;
                }
                if d.handles[i].1.is_finished() || Instant::now() > deadline {
                    d.stop.store(true, Ordering::SeqCst);
                    let (ns, h) = d.handles.swap_remove(i);
                    let why = match h.join() {
                        Ok(Err(e)) => format!("{e:#}"),
                        Ok(Ok(_)) => "it stopped at once".into(),
                        Err(_) => "it panicked".into(),
                    };
                    bail!("the lanes daemon in {ns} did not become ready: {why}");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(d)
    }

    /// Stops every daemon; returns the switch decisions' connection ages (ms).
    fn stop(self) -> Result<DaemonReport> {
        self.stop.store(true, Ordering::SeqCst);
        let mut rep = DaemonReport::default();
        for (ns, h) in self.handles {
            match h.join() {
                Ok(Ok((s, cpu))) => {
                    rep.connections += s.connections;
                    rep.failed_commands += s.failed_commands;
                    rep.cpu_s.push(cpu);
                    rep.probe_cpu_s.push(s.probe_cpu_s);
                    rep.start_cpu_s.push(s.start_cpu_s);
                    rep.signals = s.signals;
                    if let Some(b) = s.bpf_stats {
                        rep.bpf_run_s += b.run_ns as f64 / 1e9;
                        rep.bpf_signals += b.events;
                    }
                }
                Ok(Err(e)) => bail!("the lanes daemon in {ns} failed: {e:#}"),
                Err(_) => bail!("the lanes daemon in {ns} panicked"),
            }
        }
        for f in &self.files {
            let file = std::fs::File::open(f).with_context(|| format!("reading {}", f.display()))?;
            for line in BufReader::new(file).lines() {
                let line = line?;
                if let Ok(Record::Decision(d)) = serde_json::from_str::<Record>(&line) {
                    // A refused attempt that is retried is not a switch.
                    if d.action == DecisionAction::Switch && d.ok {
                        rep.switch_ages_ms.push(d.age_ms);
                        rep.signal_ms.extend(d.signal_ms);
                        rep.signal_ktime_ns.extend(d.signal_ktime_ns);
                    }
                }
            }
        }
        Ok(rep)
    }
}

#[derive(Debug, Default)]
struct DaemonReport {
    connections: u64,
    failed_commands: u64,
    switch_ages_ms: Vec<f64>,
    /// CPU time (user + system) of each daemon's thread over the run, s.
    cpu_s: Vec<f64>,
    /// Of each daemon's probe thread, s.
    probe_cpu_s: Vec<f64>,
    /// Of each daemon's thread until it was ready (program loaded), s.
    start_cpu_s: Vec<f64>,
    /// "bpf" or "diag": what the daemons ran on.
    signals: &'static str,
    /// The daemons' BPF programs' run time, all hosts, s; and their signals.
    bpf_run_s: f64,
    bpf_signals: u64,
    /// Switches on BPF signals: ms from the program's decision to the
    /// path-manager commands' completion.
    signal_ms: Vec<f64>,
    /// Their decisions' kernel times (CLOCK_MONOTONIC, ns).
    signal_ktime_ns: Vec<u64>,
}

use tcpaccel_lanes::probe::thread_cpu_s;

/// What one workload under one policy produced.
struct Outcome {
    results: Vec<FlowResult>,
    received: BTreeMap<u64, Received>,
    daemons: Option<DaemonReport>,
    /// Bytes the hosts sent per fabric during the run.
    tx_per_fabric: Vec<u64>,
    wall: Duration,
    limit: Duration,
}

/// Options of one workload run.
struct RunSpec<'a> {
    variant: &'a str,
    policy: Option<PolicyParams>,
    cc: String,
    seed: u64,
    limit: Duration,
    dir: &'a Path,
    tag: String,
}

fn mode_of(variant: &str) -> Result<MptcpMode> {
    Ok(match variant {
        "mptcp" => MptcpMode::Kernel,
        v if LANES_POLICIES.contains(&v) => MptcpMode::Userspace,
        "single" | "repflow" => MptcpMode::Plain,
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
        _ => Transport::Mptcp,
    };
    let opts =
        RunOptions { transport, port: FLOW_PORT, cc: run.cc.clone(), limit: run.limit, max_in_flight: 1024 };
    let tx0 = fab.tx_bytes_per_fabric()?;
    let t0 = Instant::now();
    let results = run_flows(flows, tcpaccel_core::Instant::ZERO, &fab.hosts, &opts, &stop_flag());
    let wall = t0.elapsed();
    let tx1 = fab.tx_bytes_per_fabric()?;
    let daemons = match daemons {
        Some(d) => Some(d.stop()?),
        None => None,
    };
    let received = sinks.stop();
    let results = results.context("running the flows")?;
    let tx_per_fabric = tx1.iter().zip(&tx0).map(|(a, b)| a.saturating_sub(*b)).collect();
    Ok(Outcome { results, received, daemons, tx_per_fabric, wall, limit: run.limit })
}

/// Short-flow FCT statistics of completed flows in (0, 100 KB], in ms.
#[derive(Debug, Clone, Copy)]
struct ShortStats {
    n: usize,
    incomplete: usize,
    avg: f64,
    p95: f64,
    p99: f64,
}

fn short_stats(o: &Outcome) -> ShortStats {
    let short: Vec<&FlowResult> = o.results.iter().filter(|r| r.bytes <= SHORT_MAX).collect();
    let mut fct: Vec<f64> = short.iter().filter_map(|r| r.fct_s).map(|s| s * 1e3).collect();
    fct.sort_by(f64::total_cmp);
    let n = fct.len();
    let avg = if n == 0 { f64::NAN } else { fct.iter().sum::<f64>() / n as f64 };
    let pct = |p| if n == 0 { f64::NAN } else { percentile_sorted(&fct, p) };
    ShortStats { n, incomplete: short.len() - n, avg, p95: pct(95.0), p99: pct(99.0) }
}

/// Goodput of long-class flows at their receivers: bytes received over the
/// run's wall time, per back-end host, in Mbit/s.
fn long_mbps(o: &Outcome, backends: usize) -> f64 {
    let bytes: u64 = o
        .results
        .iter()
        .filter(|r| r.class == FlowClass::Long)
        .filter_map(|r| o.received.get(&r.id))
        .map(|r| r.bytes)
        .sum();
    bytes as f64 * 8.0 / o.wall.as_secs_f64().max(1e-9) / 1e6 / backends.max(1) as f64
}

/// Writes flow records and the common metrics of one outcome.
fn record_outcome(ctx: &mut RunCtx<'_>, o: &Outcome, suffix: &str, flows_too: bool) -> Result<ShortStats> {
    let limit_s = o.limit.as_secs_f64();
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
            let fct_ms = r.fct_s.unwrap_or((limit_s - r.start_s).max(0.0)) * 1e3;
            ctx.flow(r.id, class.trim_end(), r.bytes, r.start_s, fct_ms, r.fct_s.is_some())?;
        }
    }
    let s = short_stats(o);
    put(ctx, format!("short_flows{suffix}"), s.n as f64);
    put(ctx, format!("short_avg_ms{suffix}"), s.avg);
    put(ctx, format!("short_p95_ms{suffix}"), s.p95);
    put(ctx, format!("short_p99_ms{suffix}"), s.p99);
    put(ctx, format!("short_incomplete{suffix}"), s.incomplete as f64);
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
        put(ctx, format!("daemons_on_bpf{suffix}"), if d.signals == "bpf" { 1.0 } else { 0.0 });
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

/// A testbed: the datacenter stays up across variants and repeats.
struct LanesBed {
    fab: Fabric,
    kind: Kind,
    params: Params,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Basic,
    Buildup,
    Realistic(Mix),
    Params,
}

impl LanesBed {
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
            cc: self.params.str("cc")?.to_string(),
            seed: ctx.seed,
            limit,
            dir,
            tag,
        })
    }
}

impl Testbed for LanesBed {
    fn run_one(&mut self, ctx: &mut RunCtx<'_>) -> Result<()> {
        match self.kind {
            Kind::Basic => self.basic(ctx),
            Kind::Buildup => self.buildup(ctx),
            Kind::Realistic(mix) => self.realistic(ctx, mix),
            Kind::Params => self.sweep(ctx),
        }
    }
}

impl LanesBed {
    /// One long transfer h0 → h1; throughput per lane over time.
    fn basic(&mut self, ctx: &mut RunCtx<'_>) -> Result<()> {
        let duration = self.params.duration("duration")?;
        let flows = vec![Flow {
            id: 0,
            start: tcpaccel_core::Instant::ZERO,
            src: 0,
            dst: 1,
            bytes: 1 << 40,
            class: FlowClass::Long,
        }];
        let variant = ctx.variant.clone();
        let dir = ctx.dir.to_path_buf();
        let tag = format!("{variant}-r{}", ctx.repeat);
        let spec = self.run_spec(ctx, &dir, &variant, duration, tag)?;
        let ns = self.fab.hosts[0].ns.clone();
        let fabrics = self.fab.spec.fabrics as usize;
        let lanes = spec.policy.is_some();
        // A daemon's switch is timed against the counters: sample fast then.
        let every = if lanes { Duration::from_micros(100) } else { Duration::from_millis(100) };
        if lanes {
            let rtt = ll_rtt_ms(&ns, fabrics)?;
            put(ctx, "ll_rtt_ms".into(), rtt);
        }
        let sampler = TxSampler::start(&ns, fabrics, every)?;
        let o = run_policy(&self.fab, &flows, &spec)?;
        let points = sampler.stop()?;
        if let Some(k) = o.daemons.as_ref().and_then(|d| d.signal_ktime_ns.first()) {
            if let Some((ms, res_ms)) = switch_latency_ms(&points, *k) {
                put(ctx, "switch_latency_ms".into(), ms);
                put(ctx, "switch_latency_resolution_ms".into(), res_ms);
            }
        }
        let step = (Duration::from_millis(100).as_nanos() / every.as_nanos()).max(1) as usize;
        let coarse: Vec<&TxPoint> = points.iter().step_by(step).collect();
        for w in coarse.windows(2) {
            let (t0, _, a) = w[0];
            let (t1, _, b) = w[1];
            let dt = t1 - t0;
            let mut total = 0.0;
            for f in 0..fabrics {
                let mbps = b[f].saturating_sub(a[f]) as f64 * 8.0 / dt / 1e6;
                total += mbps;
                let lane = if f == 0 { "sl".to_string() } else { format!("ll{f}") };
                ctx.sample(&format!("{lane}_mbps"), *t1, mbps)?;
            }
            ctx.sample("total_mbps", *t1, total)?;
        }
        let bytes = o.received.get(&0).map(|r| r.bytes).unwrap_or(0);
        ctx.metric("goodput_mbps", bytes as f64 * 8.0 / o.wall.as_secs_f64() / 1e6);
        let total: u64 = o.tx_per_fabric.iter().sum();
        if total > 0 {
            ctx.metric("sl_share_pct", o.tx_per_fabric[0] as f64 * 100.0 / total as f64);
        }
        if let Some(d) = &o.daemons {
            if let Some(a) = d.switch_ages_ms.first() {
                ctx.metric("switch_ms", *a);
            }
        }
        Ok(())
    }

    /// 64 KB short flows to front-ends while 1..N hosts send long flows to back-ends.
    fn buildup(&mut self, ctx: &mut RunCtx<'_>) -> Result<()> {
        let duration = self.params.duration("duration")?;
        let senders: Vec<u32> = parse_list(&self.params, "senders")?;
        let hosts = Hosts::quarter_back(self.fab.spec.hosts);
        let variant = ctx.variant.clone();
        let dir = ctx.dir.to_path_buf();
        let origin = tcpaccel_core::Instant::ZERO;
        let mut p95s = Vec::new();
        for &n in &senders {
            let wl = workload::queue_buildup(ctx.seed ^ u64::from(n), origin, &hosts, n, 1 << 40)
                .context("the queue-buildup workload")?;
            let flows = wl.until(origin + duration);
            let spec = self.run_spec(
                ctx,
                &dir,
                &variant,
                duration + DRAIN,
                format!("{variant}-s{n}-r{}", ctx.repeat),
            )?;
            let o = run_policy(&self.fab, &flows, &spec)?;
            let last = Some(&n) == senders.last();
            let s = record_outcome(ctx, &o, &format!("@{n}"), last)?;
            sample(ctx, "short_avg_vs_senders_ms", f64::from(n), s.avg)?;
            sample(ctx, "short_p95_vs_senders_ms", f64::from(n), s.p95)?;
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

    /// Web search / data mining mixes at several loads.
    fn realistic(&mut self, ctx: &mut RunCtx<'_>, mix: Mix) -> Result<()> {
        let duration = self.params.duration("duration")?;
        let loads: Vec<f64> = parse_list(&self.params, "loads")?;
        let fan_in = self.params.u64("fan_in")? as u32;
        let hosts = Hosts::quarter_back(self.fab.spec.hosts);
        let variant = ctx.variant.clone();
        let dir = ctx.dir.to_path_buf();
        let origin = tcpaccel_core::Instant::ZERO;
        let rate = self.fab.spec.rate;
        let record_flows_at = if loads.contains(&0.5) { 0.5 } else { *loads.last().unwrap_or(&0.5) };
        for &load in &loads {
            let wl = workload::realistic(ctx.seed, origin, &hosts, mix, load, rate, fan_in)
                .context("the realistic workload")?;
            let flows = wl.until(origin + duration);
            let tag = format!("{variant}-l{load}-r{}", ctx.repeat);
            let spec = self.run_spec(ctx, &dir, &variant, duration + DRAIN, tag)?;
            let o = run_policy(&self.fab, &flows, &spec)?;
            let s = record_outcome(ctx, &o, &format!("@{load}"), load == record_flows_at)?;
            let l = long_mbps(&o, hosts.back.len());
            put(ctx, format!("long_mbps@{load}"), l);
            sample(ctx, "short_avg_vs_load_ms", load, s.avg)?;
            sample(ctx, "short_p99_vs_load_ms", load, s.p99)?;
            sample(ctx, "long_vs_load_mbps", load, l)?;
            if crate::runner::scenario::interrupted() {
                break;
            }
        }
        Ok(())
    }

    /// Switch time of a long flow against α or γ, SL congested by a
    /// competing flow. With ν in ms, eq. 5.7 switches once
    /// α·(ν_SL − ν_LL) > γ·(t_deadline − t), i.e. at about
    /// t_deadline − α·Δν/γ: a larger α switches earlier, a larger γ later.
    fn sweep(&mut self, ctx: &mut RunCtx<'_>) -> Result<()> {
        let (key, values): (&str, Vec<f64>) = match ctx.variant.as_str() {
            "alpha" => ("alpha", parse_list(&self.params, "alphas")?),
            "gamma" => ("gamma", parse_list(&self.params, "gammas")?),
            v => bail!("unknown variant {v:?}; valid: alpha, gamma"),
        };
        let flows_per = self.params.u64("flows")?;
        let dir = ctx.dir.to_path_buf();
        let mut all = Vec::new();
        for &v in &values {
            let mut policy = PolicyParams::from(&self.params, "link-cost")?;
            if key == "alpha" {
                policy.alpha = v;
            } else {
                policy.gamma = v;
            }
            // h0 → h1 long flows one after another, each cut after 2 s, while
            // a single-path flow h2 → h1 on SL keeps the SL queues full.
            let window = Duration::from_secs(2);
            let bg = Background::start(&self.fab, 2, 1, window * flows_per as u32 + Duration::from_secs(10))?;
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
                    cc: self.params.str("cc")?.to_string(),
                    seed: ctx.seed,
                    limit: window,
                    dir: &dir,
                    tag: format!("{key}{v}-f{i}-r{}", ctx.repeat),
                };
                let o = run_policy(&self.fab, &[flow], &spec)?;
                ages.extend(o.daemons.map(|d| d.switch_ages_ms).unwrap_or_default());
            }
            bg.stop()?;
            if ages.is_empty() {
                ctx.note(format!("{key}={v}: no switch decision"))?;
                continue;
            }
            let mut a = ages.clone();
            a.sort_by(f64::total_cmp);
            let med = percentile_sorted(&a, 50.0);
            ctx.sample(&format!("switch_vs_{key}_ms"), v, med)?;
            ctx.metric(&format!("switch_ms@{key}={v}"), med);
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
    fn start(fab: &Fabric, src: u32, dst: u32, limit: Duration) -> Result<Background> {
        let dst_addr = std::net::SocketAddr::new(FabricSpec::host_addr(dst, 0).into(), FLOW_PORT + 1);
        let src_addr = std::net::SocketAddr::new(FabricSpec::host_addr(src, 0).into(), 0);
        let recv = tcpaccel_sys::netns::run_in(&fab.hosts[dst as usize].ns, move || {
            tcpaccel_traffic::spawn_recv(tcpaccel_traffic::RecvConfig::new(dst_addr))
        })?
        .context("starting the background receiver")?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut cfg = tcpaccel_traffic::SendConfig::new(dst_addr);
        cfg.volume = tcpaccel_traffic::Volume::Duration(limit + Duration::from_secs(1));
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
        std::thread::sleep(Duration::from_millis(300));
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

/// Per-fabric tx byte counters read at a time: s since the sampler started,
/// and CLOCK_MONOTONIC ns (the clock of the BPF program's decisions).
type TxPoint = (f64, u64, Vec<u64>);
type TxPoints = Vec<TxPoint>;

/// LL data beyond this many bytes after the threshold was crossed counts as
/// "LL carrying the data": three full frames, more than the MP_PRIO and
/// ACK packets a switch itself puts on LL.
const LL_DATA_BYTES: u64 = 3 * 1514;

/// Switch latency from interface counters ([issue 13]): from the program's
/// decision at `crossed_ns` (`signal_ktime_ns`: the program runs at every
/// segment with the socket one ACK behind, so it decides at the segment
/// after the ACK that crossed the size threshold, or at the first segment
/// past the deadline) to the first counter reading in which the
/// LL interfaces (fabrics 1..) sent [`LL_DATA_BYTES`] more than at the last
/// reading before the decision. Returns (latency, the reading interval
/// around it), both in ms; `None` if LL never carried that much after.
fn switch_latency_ms(points: &[TxPoint], crossed_ns: u64) -> Option<(f64, f64)> {
    let ll = |v: &[u64]| v.iter().skip(1).sum::<u64>();
    let before = points.iter().rev().find(|(_, ns, _)| *ns <= crossed_ns)?;
    let base = ll(&before.2);
    let i = points.iter().position(|(_, ns, v)| *ns > crossed_ns && ll(v) >= base + LL_DATA_BYTES)?;
    let (_, at, _) = &points[i];
    let prev = points.get(i.wrapping_sub(1)).map(|p| p.1).unwrap_or(*at);
    Some(((at - crossed_ns) as f64 / 1e6, (at - prev) as f64 / 1e6))
}

/// The round trip of h0's first LL pair (h0 → h1 on fabric 1), idle:
/// the fastest of five TCP handshakes (a closed port's RST answers too).
fn ll_rtt_ms(ns: &str, fabrics: usize) -> Result<f64> {
    if fabrics < 2 {
        return Ok(f64::NAN);
    }
    let local = std::net::IpAddr::from(FabricSpec::host_addr(0, 1));
    let remote = std::net::SocketAddr::new(FabricSpec::host_addr(1, 1).into(), 9);
    let rtts = tcpaccel_sys::netns::run_in(ns, move || {
        (0..5)
            .filter_map(|_| tcpaccel_sys::probe::handshake(Some(local), remote, Duration::from_secs(1)).ok())
            .map(|h| h.rtt.as_secs_f64() * 1e3)
            .fold(f64::NAN, f64::min)
    })?;
    Ok(rtts)
}

/// Polls one host's per-fabric tx counters from a thread inside its namespace.
struct TxSampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Result<TxPoints>>,
}

impl TxSampler {
    fn start(ns: &str, fabrics: usize, every: Duration) -> Result<TxSampler> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let ns = ns.to_string();
        let handle = std::thread::spawn(move || -> Result<TxPoints> {
            tcpaccel_sys::netns::enter(&ns)?;
            let t0 = Instant::now();
            let mut out = Vec::new();
            while !s.load(Ordering::SeqCst) {
                let text = std::fs::read_to_string("/proc/thread-self/net/dev")?;
                let v = (0..fabrics)
                    .map(|f| crate::testbeds::fabric::dev_tx_bytes(&text, &format!("f{f}")).unwrap_or(0))
                    .collect();
                out.push((t0.elapsed().as_secs_f64(), tcpaccel_sys::bpf::monotonic_ns(), v));
                std::thread::sleep(every);
            }
            Ok(out)
        });
        Ok(TxSampler { stop, handle })
    }

    fn stop(self) -> Result<TxPoints> {
        self.stop.store(true, Ordering::SeqCst);
        match self.handle.join() {
            Ok(r) => r,
            Err(_) => bail!("the counter sampler panicked"),
        }
    }
}

fn parse_list<T: std::str::FromStr>(p: &Params, key: &str) -> Result<Vec<T>> {
    let items = p.list(key)?;
    let mut out = Vec::new();
    for i in &items {
        out.push(i.parse::<T>().map_err(|_| anyhow::anyhow!("{key}: {i:?} is not a number"))?);
    }
    if out.is_empty() {
        bail!("{key}: give at least one value");
    }
    Ok(out)
}

fn prepare_bed(p: &Params, kind: Kind) -> Result<Box<dyn Testbed>> {
    let spec = fabric_spec(p)?;
    for v in p.list("variants")? {
        if kind != Kind::Params {
            mode_of(&v)?;
        }
    }
    let fab = Fabric::up(spec)?;
    Ok(Box::new(LanesBed { fab, kind, params: p.clone() }))
}

// ---------------------------------------------------------------------------
// The scenarios.

pub struct LanesBasic;
pub struct LanesBuildup;
pub struct LanesRealistic(pub Mix);
pub struct LanesParams;

impl Scenario for LanesBasic {
    fn name(&self) -> &'static str {
        "lanes-basic"
    }
    fn title(&self) -> &'static str {
        "Lanes basic: one long transfer over 1 SL + 2 LL ([Lanes] Fig. 6.1–6.3)"
    }
    fn description(&self) -> &'static str {
        "One host pair with three equal paths (a three-fabric datacenter): a long transfer from h0 to h1 under \
         each policy; per-lane throughput over time from h0's interface counters."
    }
    fn params(&self) -> Vec<ParamSpec> {
        let mut v = common_params("3", "2", "100mbit");
        v[0] = ParamSpec::new("variants", "mptcp,repflow,deadline,link-cost", "policies to compare");
        v.push(ParamSpec::new("duration", "3s", "length of the transfer"));
        v
    }
    fn quick(&self) -> Vec<(&'static str, &'static str)> {
        vec![("duration", "2s"), ("rate", "50mbit")]
    }
    fn default_repeats(&self) -> u32 {
        1
    }
    fn variants(&self, p: &Params) -> Result<Vec<String>> {
        p.choice("variants", &POLICIES)
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        vec![
            MetricSpec::new("goodput_mbps", "Mbit/s", true, "the transfer's goodput at the receiver"),
            MetricSpec::new("sl_share_pct", "%", false, "share of h0's sent bytes that went out on SL"),
            MetricSpec::new("switch_ms", "ms", false, "connection age at the switch to LL"),
            MetricSpec::new(
                "switch_latency_ms",
                "ms",
                false,
                "BPF signals: from the program's decision (the segment after the ACK that crossed the threshold, \
                 or the first past the deadline) to LL carrying data, from h0's interface counters read every ~0.1 \
                 ms (issue 13: ≤ 2 RTT + 1 ms)",
            ),
            MetricSpec::new("ll_rtt_ms", "ms", false, "h0 → h1 round trip on the first LL, idle (fastest of 5 handshakes)"),
        ]
    }
    fn notes(&self, _p: &Params) -> Vec<String> {
        vec![
            "The thesis shows pure MPTCP using all three paths, RepFlow one path, and the lane policies moving the \
             flow from SL to the two LLs after t_deadline (deadline) or once LL is cheaper (link-cost)."
                .into(),
            "With signals=diag the daemon smooths costs per sock_diag reading (every sample_interval), not per \
             ACK as the thesis's kernel code: the 3/4-1/4 average lags a cost that grows 1 per ms by 3 readings, \
             so on lanes without queueing link-cost switches about 3 × sample_interval after t_deadline. With \
             signals=bpf (or auto where BPF works) the program smooths per ACK, as the thesis did."
                .into(),
        ]
    }
    fn estimate(&self, p: &Params) -> Duration {
        p.duration("duration").unwrap_or(Duration::from_secs(3)) + Duration::from_secs(3)
    }
    fn prepare(&self, p: &Params, _dir: &Path) -> Result<Box<dyn Testbed>> {
        prepare_bed(p, Kind::Basic)
    }
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
         200 ms mean gap, while 1..N front-end hosts each send one long flow to a back-end. Average and \
         95th-percentile short-flow FCT against the number of long senders."
    }
    fn params(&self) -> Vec<ParamSpec> {
        let mut v = common_params("2", "8", "100mbit");
        v.push(ParamSpec::new("senders", "1,2,4,6", "long-flow sender counts to run"));
        v.push(ParamSpec::new("duration", "10s", "arrivals window per sender count"));
        v
    }
    fn quick(&self) -> Vec<(&'static str, &'static str)> {
        vec![("senders", "1,4"), ("duration", "3s"), ("variants", "mptcp,link-cost")]
    }
    fn default_repeats(&self) -> u32 {
        1
    }
    fn variants(&self, p: &Params) -> Result<Vec<String>> {
        p.choice("variants", &POLICIES)
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        vec![MetricSpec::new(
            "p95_growth_x",
            "×",
            false,
            "short-flow p95 FCT at the most long senders ÷ at the fewest (flat = 1)",
        )]
    }
    fn estimate(&self, p: &Params) -> Duration {
        let n = p.list("senders").map(|l| l.len()).unwrap_or(4) as u32;
        (p.duration("duration").unwrap_or(Duration::from_secs(10)) + DRAIN + Duration::from_secs(1)) * n
    }
    fn prepare(&self, p: &Params, _dir: &Path) -> Result<Box<dyn Testbed>> {
        prepare_bed(p, Kind::Buildup)
    }
}

fn realistic_params(fan_in: &str, rate: &str) -> Vec<ParamSpec> {
    let mut v = common_params("2", "8", rate);
    v.push(ParamSpec::new("loads", "0.2,0.5,0.8", "offered load per destination link"));
    v.push(ParamSpec::new("duration", "10s", "arrivals window per load"));
    v.push(ParamSpec::new("fan_in", fan_in, "data mining: senders a back-end job is split over"));
    // Thousands of short connections: eight daemons dumping sock_diag every
    // 20 ms took a core on their own.
    for p in v.iter_mut().filter(|p| p.key == "sample_interval") {
        p.default = "50ms".into();
    }
    v
}

fn realistic_metrics() -> Vec<MetricSpec> {
    vec![
        MetricSpec::new("short_p99_ms@0.5", "ms", false, "99th-percentile FCT of flows ≤ 100 KB at load 0.5"),
        MetricSpec::new("short_avg_ms@0.5", "ms", false, "mean FCT of flows ≤ 100 KB at load 0.5"),
        MetricSpec::new("long_mbps@0.5", "Mbit/s", true, "long-flow goodput per back-end host at load 0.5"),
    ]
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
                 jobs of 800 MB split over fan_in senders run from the start. Short-flow mean and p99 FCT, \
                 long-flow goodput."
            }
        }
    }
    fn params(&self) -> Vec<ParamSpec> {
        match self.0 {
            Mix::WebSearch => realistic_params("1", "50mbit"),
            Mix::DataMining => realistic_params("2", "20mbit"),
        }
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
    fn estimate(&self, p: &Params) -> Duration {
        let n = p.list("loads").map(|l| l.len()).unwrap_or(3) as u32;
        (p.duration("duration").unwrap_or(Duration::from_secs(10)) + DRAIN + Duration::from_secs(1)) * n
    }
    fn prepare(&self, p: &Params, _dir: &Path) -> Result<Box<dyn Testbed>> {
        prepare_bed(p, Kind::Realistic(self.0))
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
        let mut v = common_params("2", "4", "100mbit");
        v[0] = ParamSpec::new("variants", "alpha,gamma", "which parameter to sweep");
        v[3] = ParamSpec::new(
            "hosts_per_leaf",
            "2",
            "hosts under one leaf router (h0, h2 share a leaf; h1 is remote)",
        );
        v.push(ParamSpec::new("alphas", "0.25,1,4,16", "α values (variant alpha)"));
        v.push(ParamSpec::new("gammas", "0.25,1,4,16", "γ values (variant gamma)"));
        v.push(ParamSpec::new("flows", "3", "long flows per value, 2 s apart"));
        v
    }
    fn quick(&self) -> Vec<(&'static str, &'static str)> {
        vec![("alphas", "0.5,4"), ("gammas", "0.5,4"), ("flows", "1")]
    }
    fn default_repeats(&self) -> u32 {
        1
    }
    fn variants(&self, p: &Params) -> Result<Vec<String>> {
        p.choice("variants", &["alpha", "gamma"])
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        Vec::new()
    }
    fn notes(&self, _p: &Params) -> Vec<String> {
        vec![
            "Eq. 5.7 with ν in ms (core::lanes) switches once α·(ν_SL − ν_LL) exceeds γ·(t_deadline − t): at \
             about t_deadline − α·Δν/γ. A 128 KB queue at 100 Mbit/s holds 10.5 ms per hop, so α and γ move the \
             switch by tens of ms at their defaults and only large α/γ ratios pull it far before the deadline."
                .into(),
        ]
    }
    fn estimate(&self, p: &Params) -> Duration {
        let n = p.list("alphas").map(|l| l.len()).unwrap_or(5) as u32;
        let f = p.u64("flows").unwrap_or(3) as u32;
        Duration::from_millis(u64::from(500 + 2000 * f + 1500)) * n
    }
    fn prepare(&self, p: &Params, _dir: &Path) -> Result<Box<dyn Testbed>> {
        prepare_bed(p, Kind::Params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemon_config_pairs_each_peer_once_per_lane() {
        let spec = FabricSpec {
            hosts: 4,
            fabrics: 3,
            hosts_per_leaf: 2,
            spines: 1,
            rate: tcpaccel_core::units::Rate(100_000_000),
            buffer: tcpaccel_core::units::Bytes(131072),
        };
        let policy = PolicyParams {
            kind: "link-cost".into(),
            t_deadline: Duration::from_millis(300),
            alpha: 2.0,
            gamma: 0.5,
            nu_unit: Duration::from_micros(10),
            sample_interval: Duration::from_millis(50),
            signals: "bpf".into(),
            backups: "established".into(),
            size_threshold: None,
            metrics: None,
        };
        let text = daemon_config(&spec, 1, &policy);
        let cfg = tcpaccel_lanes::Config::parse(&text, "test").unwrap();
        assert_eq!(cfg.peers.len(), 3);
        assert!(cfg.peers.iter().all(|p| p.sl.len() == 1 && p.ll.len() == 2));
        assert_eq!(cfg.sl_lanes, vec![std::net::IpAddr::from(FabricSpec::host_addr(1, 0))]);
        assert_eq!(cfg.ll_lanes.len(), 2);
        assert!(text.contains("alpha = 2.0") && text.contains("gamma = 0.5"), "{text}");
        assert_eq!(cfg.probe.sample_interval, Duration::from_millis(50));
        assert_eq!(cfg.switch.nu_unit, Duration::from_micros(10));
        assert_eq!(cfg.switch.size_threshold, None);
        let sized = PolicyParams { size_threshold: Some(100_000), ..policy };
        let cfg = tcpaccel_lanes::Config::parse(&daemon_config(&spec, 1, &sized), "test").unwrap();
        assert_eq!(
            (cfg.switch.policy, cfg.switch.size_threshold),
            (tcpaccel_core::lanes::Policy::LinkCost, Some(100_000))
        );
        assert_eq!(cfg.signals.source, tcpaccel_lanes::config::SignalSource::Bpf);
        assert_eq!(cfg.signals.backups, tcpaccel_lanes::config::BackupsAt::Established);
        let diag = PolicyParams { signals: "diag".into(), ..sized };
        let cfg = tcpaccel_lanes::Config::parse(&daemon_config(&spec, 1, &diag), "test").unwrap();
        assert_eq!(cfg.signals.source, tcpaccel_lanes::config::SignalSource::Diag);
    }

    #[test]
    fn switch_latency_counts_from_the_decision_to_three_frames_on_ll() {
        // (s, monotonic ns, per-fabric tx bytes): SL then LL.
        let p = |ns: u64, sl: u64, ll: u64| (0.0, ns, vec![sl, ll, 0]);
        let points = vec![
            p(1_000_000, 100_000, 500),
            p(2_000_000, 200_000, 600), // the last reading before the decision
            p(3_000_000, 300_000, 700), // the switch's own small packets
            p(4_000_000, 310_000, 600 + LL_DATA_BYTES - 1),
            p(4_500_000, 310_000, 600 + LL_DATA_BYTES),
            p(5_000_000, 310_000, 90_000),
        ];
        assert_eq!(switch_latency_ms(&points, 2_500_000), Some((2.0, 0.5)));
        assert_eq!(switch_latency_ms(&points, 500_000), None, "no reading before the decision");
        assert_eq!(switch_latency_ms(&points[..4], 2_500_000), None, "LL never carried data");
    }

    #[test]
    fn thread_cpu_time_grows_with_work() {
        // Busy until the thread has 50 ms of CPU (any machine load gives
        // that within 10 s); the reading must grow, and never beyond the
        // wall time spent (this thread's time, not the process's).
        let a = thread_cpu_s();
        let t = Instant::now();
        let mut x = 0u64;
        let mut b = a;
        while b - a < 0.05 && t.elapsed() < Duration::from_secs(10) {
            for _ in 0..100_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            b = thread_cpu_s();
        }
        std::hint::black_box(x);
        let wall = t.elapsed().as_secs_f64();
        assert!(a.is_finite() && b - a >= 0.05, "busy {wall} s counted {} s", b - a);
        assert!(b - a <= wall + 0.02, "{} s of CPU in {wall} s of wall time", b - a);
    }

    #[test]
    fn unknown_variants_are_refused_with_the_valid_ones() {
        let e = mode_of("ecmp").unwrap_err().to_string();
        assert!(e.contains("ecmp") && e.contains("link-cost"), "{e}");
    }
}
