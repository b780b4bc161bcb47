//! The lanes daemons of a run: one `tcpaccel_lanes` daemon thread per host
//! of the datacenter, its configuration, and what the lab reads back from
//! them (summaries, CPU, switch decisions).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tcpaccel_core::lanes::Policy;
use tcpaccel_core::units::Bytes;
use tcpaccel_lanes::config::{BackupsAt, ConfigFile, SignalSource};
use tcpaccel_lanes::probe::thread_cpu_s;
use tcpaccel_lanes::record::{DecisionAction, Record};

use super::knobs::Listen;
use crate::testbeds::fabric::{Fabric, FabricSpec};

/// The switching policy a daemon runs, typed as the daemon's own
/// configuration takes it.
#[derive(Debug, Clone)]
pub struct PolicyParams {
    pub kind: Policy,
    pub t_deadline: Duration,
    pub alpha: f64,
    pub gamma: f64,
    pub nu_unit: Duration,
    pub sample_interval: Duration,
    /// `[signals] source`.
    pub signals: SignalSource,
    /// `[signals] backups`.
    pub backups: BackupsAt,
    /// Switch after this many bytes too (`size_threshold` in the config).
    pub size_threshold: Option<Bytes>,
    /// Serve the daemons' metrics here while they run.
    pub metrics: Option<std::net::SocketAddr>,
}

impl PolicyParams {
    /// The daemon policy of a variant from the shared parameters `p`
    /// (dilated): `size-link-cost` is the link-cost policy plus the size
    /// threshold.
    pub(super) fn from(p: &super::Common, variant: &str) -> Result<PolicyParams> {
        let (kind, size) = match variant {
            "deadline" => (Policy::Deadline, false),
            "link-cost" => (Policy::LinkCost, false),
            "size" => (Policy::Size, true),
            "size-link-cost" => (Policy::LinkCost, true),
            other => bail!("{other:?} is not a lanes policy; valid: {}", super::LANES_POLICIES.join(", ")),
        };
        Ok(PolicyParams {
            metrics: match p.metrics {
                Listen::Off => None,
                Listen::At(a) => Some(a),
            },
            size_threshold: if size { Some(p.size_threshold) } else { None },
            kind,
            t_deadline: p.t_deadline,
            alpha: p.alpha,
            gamma: p.gamma,
            nu_unit: p.nu_unit,
            sample_interval: p.sample_interval,
            signals: p.signals,
            backups: p.backups,
        })
    }
}

/// The lanes daemon configuration of host `h`: every other host is a peer,
/// SL pair on fabric 0, one LL pair per other fabric.
fn daemon_config(spec: &FabricSpec, h: u32, policy: &PolicyParams) -> ConfigFile {
    let mut f = ConfigFile::default();
    f.policy.kind = policy.kind;
    f.policy.t_deadline = policy.t_deadline;
    f.policy.alpha = policy.alpha;
    f.policy.gamma = policy.gamma;
    f.policy.nu_unit = policy.nu_unit;
    f.policy.size_threshold = policy.size_threshold;
    f.signals.source = policy.signals;
    f.signals.backups = policy.backups;
    f.probe.sample_interval = policy.sample_interval;
    let pair = |a: u32, b: u32, fabric: u32| {
        (FabricSpec::host_addr(a, fabric).into(), FabricSpec::host_addr(b, fabric).into())
    };
    for peer in (0..spec.hosts).filter(|&p| p != h) {
        f.peer(format!("h{peer}"), pair(h, peer, 0), (1..spec.fabrics).map(|fabric| pair(h, peer, fabric)));
    }
    f
}

/// A daemon thread's summary and the CPU time it used (s).
type DaemonRun = (tcpaccel_lanes::Summary, f64);

/// Lanes daemons running in every host, each writing JSON Lines to a file.
pub(super) struct Daemons {
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
    pub(super) fn start(fab: &Fabric, policy: &PolicyParams, dir: &Path, tag: &str) -> Result<Daemons> {
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
        let bpf_stats = match policy.signals {
            SignalSource::Diag => None,
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
            let cfg = daemon_config(&fab.spec, h, policy)
                .build()
                .with_context(|| format!("the lanes config of h{h}"))?;
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
    pub(super) fn stop(self) -> Result<DaemonReport> {
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
pub(super) struct DaemonReport {
    pub(super) connections: u64,
    pub(super) failed_commands: u64,
    pub(super) switch_ages_ms: Vec<f64>,
    /// CPU time (user + system) of each daemon's thread over the run, s.
    pub(super) cpu_s: Vec<f64>,
    /// Of each daemon's probe thread, s.
    pub(super) probe_cpu_s: Vec<f64>,
    /// Of each daemon's thread until it was ready (program loaded), s.
    pub(super) start_cpu_s: Vec<f64>,
    /// "bpf" or "diag": what the daemons ran on.
    pub(super) signals: &'static str,
    /// The daemons' BPF programs' run time, all hosts, s; and their signals.
    pub(super) bpf_run_s: f64,
    pub(super) bpf_signals: u64,
    /// Switches on BPF signals: ms from the program's decision to the
    /// path-manager commands' completion.
    pub(super) signal_ms: Vec<f64>,
    /// Their decisions' kernel times (CLOCK_MONOTONIC, ns).
    pub(super) signal_ktime_ns: Vec<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemon_config_pairs_each_peer_once_per_lane() {
        let spec = FabricSpec {
            shape: crate::testbeds::fabric::Shape::LeafSpine,
            hosts: 4,
            fabrics: 3,
            hosts_per_leaf: 2,
            spines: 1,
            rate: tcpaccel_core::units::Rate(100_000_000),
            buffer: Bytes(131072),
            bucket: crate::testbeds::fabric::TWO_FRAMES,
        };
        let policy = PolicyParams {
            kind: Policy::LinkCost,
            t_deadline: Duration::from_millis(300),
            alpha: 2.0,
            gamma: 0.5,
            nu_unit: Duration::from_micros(10),
            sample_interval: Duration::from_millis(50),
            signals: SignalSource::Bpf,
            backups: BackupsAt::Established,
            size_threshold: None,
            metrics: None,
        };
        let cfg = daemon_config(&spec, 1, &policy).build().unwrap();
        assert_eq!(cfg.peers.len(), 3);
        assert!(cfg.peers.iter().all(|p| p.sl.len() == 1 && p.ll.len() == 2));
        assert_eq!(cfg.sl_lanes, vec![std::net::IpAddr::from(FabricSpec::host_addr(1, 0))]);
        assert_eq!(cfg.ll_lanes.len(), 2);
        assert_eq!((cfg.switch.alpha, cfg.switch.gamma), (2.0, 0.5));
        assert_eq!(cfg.probe.sample_interval, Duration::from_millis(50));
        assert_eq!(cfg.switch.nu_unit, Duration::from_micros(10));
        assert_eq!(cfg.switch.size_threshold, None);
        let sized = PolicyParams { size_threshold: Some(Bytes(100_000)), ..policy };
        let cfg = daemon_config(&spec, 1, &sized).build().unwrap();
        assert_eq!((cfg.switch.policy, cfg.switch.size_threshold), (Policy::LinkCost, Some(100_000)));
        assert_eq!(cfg.signals.source, SignalSource::Bpf);
        assert_eq!(cfg.signals.backups, BackupsAt::Established);
        let diag = PolicyParams { signals: SignalSource::Diag, ..sized };
        let cfg = daemon_config(&spec, 1, &diag).build().unwrap();
        assert_eq!(cfg.signals.source, SignalSource::Diag);
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
}
