//! Path comparison, the runner: measures a path to a `tcpaccel recv` or an
//! `iperf3 -s` ([`Receiver`]), then
//! tries each variant in short interleaved transfers and hands the trials to
//! the pure rule ([`tcpaccel_core::compare`]).
//!
//! Order of work: the RTT by TCP handshakes (not to iperf3); the
//! bottleneck by one short unpaced transfer (BBR where the host has it) whose TCP_INFO readings feed
//! [`BottleneckEstimator`] once its `tcpi_min_rtt` gives the minimum RTT; then `repeats` rounds, each running every
//! variant once (the start rotates per round, so no variant always follows
//! the same one). Each transfer's settings touch only its own socket:
//! `TCP_CONGESTION` for BBR, `SO_MAX_PACING_RATE` (the traffic tool's
//! `static:RATE`, on the wire) for static pacing, `SO_SNDBUFFORCE` at the
//! doctor's buffer size ([`crate::judge::buffer_need`]) for the buffer fix.
//! The dynamic hold is the cgroup pacer's (`tcpaccel pace run --pace
//! dynamic --hold`): for its transfer this process joins a throwaway cgroup
//! whose program paces only connections to the target (`DST/32=dynamic`,
//! hold on), and leaves it, detached, when the transfer ends
//! ([`tcpaccel_pacer::Joined`]; root only, left out with the reason
//! otherwise).
//!
//! Between transfers the kernel's TCP metrics for the target are deleted
//! ([`tcpaccel_sys::tcp_metrics::forget`]), so that no transfer starts
//! from the ssthresh and cwnd the previous one left (a host with
//! `tcp_no_metrics_save=0`, the default, keeps them per destination).
//!
//! Bounded: no transfer starts that would end past `max_time` or send past
//! `max_bytes` (at the estimated rate); `stop` ends the current transfer
//! early and no other starts. Everything goes to `to` and nowhere else.
//!
//! Not here: flags, output, the command that applies a fix (the CLI).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tcpaccel_core::compare::{
    self, BottleneckEstimator, DeliverySample, Recommendation, Row, Trial, Variant,
};
use tcpaccel_core::pacing::Framing;
use tcpaccel_core::units::{bdp_bytes, Rate};
use tcpaccel_traffic::{Pace, Report, SendConfig, Volume};

/// The measuring transfer's send buffer: a path of up to 2.6 Gbit/s at
/// 100 ms (the kernel doubles the request for its bookkeeping).
const PROBE_SNDBUF: u64 = 32 << 20;

/// A short transfer shorter than this says little: the budget is spent.
const MIN_TRIAL: Duration = Duration::from_millis(800);
/// Slack per transfer for connecting, the last bytes' acknowledgement and
/// the receiver's receipt, in RTTs: on seed 000's 100 ms path a transfer
/// took 1.0 s beyond its length (9 transfers of 5.0 s in 54.3 s), and with
/// 4 RTTs the last transfer of the last round did not fit the budget.
const OVERHEAD_RTTS: u32 = 8;
/// Windows of time to 95% are at least this long (the lab's `pacing`
/// scenario uses 100 ms windows for its ramp).
const T95_WINDOW: Duration = Duration::from_millis(100);

/// What listens at the far end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Receiver {
    /// `tcpaccel recv`.
    Tcpaccel,
    /// `iperf3 -s`, spoken to through its control protocol.
    Iperf3,
}

impl Receiver {
    fn send(
        self,
        cfg: SendConfig,
        on_report: impl FnMut(&Report),
    ) -> Result<tcpaccel_traffic::SendSummary, tcpaccel_traffic::Error> {
        match self {
            Receiver::Tcpaccel => tcpaccel_traffic::run_send(cfg, on_report),
            Receiver::Iperf3 => tcpaccel_traffic::run_iperf3_upload(cfg, on_report),
        }
    }
}

/// What to run; [`Plan::new`] has the defaults.
#[derive(Debug, Clone)]
pub struct Plan {
    pub to: SocketAddr,
    pub receiver: Receiver,
    pub variants: Vec<Variant>,
    pub repeats: u32,
    /// The measuring transfer.
    pub probe: Duration,
    /// Each variant's transfer; `None`: the budget shared out evenly.
    pub trial: Option<Duration>,
    pub max_time: Duration,
    pub max_bytes: u64,
    /// Static pacing's on-wire rate as a fraction of the on-wire estimate.
    pub pace_fraction: f64,
    pub handshakes: usize,
    /// Set to stop (Ctrl-C): the current transfer ends early, none follows.
    pub stop: Arc<AtomicBool>,
    /// Delete the kernel's cached TCP metrics for the target before each
    /// transfer (module docs).
    pub forget_metrics: bool,
    /// The congestion control of every variant but `bbr` (`TCP_CONGESTION`
    /// on the socket), and of the probe where BBR cannot be had; `None`:
    /// the host's default. A
    /// namespace's default is its host's, and only an allowed one may be
    /// set there: this is how a comparison runs CUBIC on a host whose
    /// default is BBR, as the lab's scenarios do.
    pub cc: Option<String>,
}

impl Plan {
    pub fn new(to: SocketAddr) -> Plan {
        Plan {
            to,
            receiver: Receiver::Tcpaccel,
            variants: Variant::ALL.to_vec(),
            repeats: 2,
            probe: Duration::from_secs(2),
            trial: None,
            max_time: Duration::from_secs(30),
            max_bytes: 2_000_000_000,
            pace_fraction: 0.95,
            handshakes: 5,
            stop: Arc::new(AtomicBool::new(false)),
            forget_metrics: true,
            cc: None,
        }
    }
}

/// Failures that end a comparison before it has anything to report.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("measuring the RTT to {to}: {msg}")]
    Rtt { to: SocketAddr, msg: String },
    #[error("the measuring transfer to {to}")]
    Probe { to: SocketAddr, source: tcpaccel_traffic::Error },
    #[error("the measuring transfer to {to} gave no delivery-rate round (RTT {rtt:?}); give a longer probe")]
    NoEstimate { to: SocketAddr, rtt: Duration },
    #[error("{0}")]
    Budget(String),
}

/// The path as measured before the trials.
#[derive(Debug, Clone, Serialize)]
pub struct PathEstimate {
    /// Median TCP handshake time (`None` for an iperf3 server, which is
    /// not probed with bare handshakes).
    pub handshake_rtt_us: Option<u64>,
    /// The smaller of the handshake RTT and the probe's `tcpi_min_rtt`.
    pub min_rtt_us: u64,
    /// BBR-style estimate, payload bit/s (what a transfer can deliver).
    pub bottleneck_payload_bps: u64,
    /// The same on the wire (every Ethernet frame's bytes, as `--pace`
    /// and the emulator count a rate).
    pub bottleneck_wire_bps: u64,
    pub rounds: u64,
    /// The probe's SO_SNDBUF (forced); `None`: the host's buffers (no
    /// CAP_NET_ADMIN), and a small `wmem` maximum can hide the path's rate.
    pub probe_sndbuf: Option<u64>,
    /// Time the probe was limited by the receiver's window
    /// (`tcpi_rwnd_limited`), s: when it is a large part of the probe, the
    /// estimate is what this receiver takes, not the path's bottleneck.
    pub probe_receiver_limited_s: Option<f64>,
    pub probe_goodput_bps: u64,
    pub probe_retransmits: Option<u64>,
    /// The probe's congestion control (read back): bbr where the host has it.
    pub probe_cc: Option<String>,
    /// MSS and per-segment overhead of the probe's socket.
    pub mss: u32,
    pub overhead: u32,
}

/// How one variant was set on its socket.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// Static pacing: the on-wire rate (`static:RATE`).
    pub pace_wire_bps: Option<u64>,
    /// Buffer fix: SO_SNDBUF requested, bytes.
    pub sndbuf: Option<u64>,
    pub cc: Option<String>,
}

/// One transfer.
#[derive(Debug, Clone, Serialize)]
pub struct TrialRecord {
    pub repeat: u32,
    pub trial: Trial,
    pub bytes: u64,
    pub duration_s: f64,
    pub stopped_early: bool,
    /// The dynamic hold: connections the cgroup pacer paced in this
    /// transfer (the data connection; iperf3's control connection too).
    pub paced_connections: Option<u64>,
    /// The congestion control the socket had (read back from it).
    pub cc: Option<String>,
    /// (end of window s, goodput bit/s, srtt ms) for the plots.
    pub series: Vec<(f64, u64, Option<f64>)>,
}

/// A variant that could not run (BBR not available, no privilege for the
/// buffer fix); the comparison goes on without it.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub variant: Variant,
    pub why: String,
}

/// Everything a comparison found.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub to: SocketAddr,
    pub receiver: Receiver,
    pub path: PathEstimate,
    pub settings: Vec<(Variant, Settings)>,
    pub trials: Vec<TrialRecord>,
    pub skipped: Vec<Skipped>,
    pub rows: Vec<Row>,
    pub recommendation: Option<Recommendation>,
    /// Why it ended before every planned transfer ran.
    pub cut_short: Option<String>,
    pub elapsed_s: f64,
    pub bytes_sent: u64,
    /// Entries of the kernel's TCP metrics cache for the target deleted
    /// before a transfer (one per transfer at most).
    pub metrics_cleared: u32,
    /// Why the cache could not be cleared (no CAP_NET_ADMIN), if so.
    pub metrics_not_cleared: Option<String>,
}

/// Progress, as it happens.
#[derive(Debug)]
pub enum Event<'a> {
    Path(&'a PathEstimate),
    Trial(&'a TrialRecord),
    Skipped(&'a Skipped),
}

/// What a transfer's readings add up to.
#[derive(Default)]
struct Readings {
    /// (start, end, bytes) per report interval.
    intervals: Vec<(Duration, Duration, u64)>,
    srtts: Vec<Duration>,
    min_rtt: Option<Duration>,
    /// The delivery readings, for the bottleneck estimate once the
    /// minimum RTT is known.
    delivery: Vec<(tcpaccel_core::Instant, DeliverySample)>,
    /// `tcpi_rwnd_limited` of the last reading, µs.
    rwnd_limited_us: Option<u64>,
}

impl Readings {
    fn take(&mut self, r: &Report) {
        let Report::Interval(iv) = r;
        let (s, e) = (Duration::from_secs_f64(iv.start_s), Duration::from_secs_f64(iv.end_s));
        self.intervals.push((s, e, iv.bytes));
        let Some(st) = iv.streams.first() else { return };
        if let Some(us) = st.srtt_us {
            self.srtts.push(Duration::from_micros(u64::from(us)));
        }
        if let Some(info) = &st.info {
            if let Some(m) = info.min_rtt.filter(|&m| m > 0) {
                let m = Duration::from_micros(u64::from(m));
                self.min_rtt = Some(self.min_rtt.map_or(m, |x| x.min(m)));
            }
            self.rwnd_limited_us = info.rwnd_limited.or(self.rwnd_limited_us);
            if let Some(d) = info.delivered {
                let now = tcpaccel_core::Instant::from_nanos(e.as_nanos() as u64);
                self.delivery.push((
                    now,
                    DeliverySample {
                        delivered_bytes: u64::from(d) * u64::from(info.snd_mss),
                        app_limited: info.delivery_rate_app_limited,
                    },
                ));
            }
        }
    }

    /// The intervals merged into windows of at least [`T95_WINDOW`].
    fn windows(&self) -> Vec<(Duration, Duration, u64)> {
        let mut out: Vec<(Duration, Duration, u64)> = Vec::new();
        let mut cur: Option<(Duration, Duration, u64)> = None;
        for &(s, e, b) in &self.intervals {
            let (cs, _, cb) = cur.unwrap_or((s, e, 0));
            let w = (cs, e, cb + b);
            if e.saturating_sub(cs) >= T95_WINDOW {
                out.push(w);
                cur = None;
            } else {
                cur = Some(w);
            }
        }
        out
    }
}

/// Deletes the kernel's cached metrics for the target before a transfer
/// (module docs); counts what it deleted, keeps the first failure.
#[derive(Default)]
struct MetricsCache {
    cleared: u32,
    failed: Option<String>,
}

impl MetricsCache {
    fn forget(&mut self, plan: &Plan) {
        if !plan.forget_metrics || self.failed.is_some() {
            return;
        }
        match tcpaccel_sys::tcp_metrics::forget(plan.to.ip()) {
            Ok(found) => self.cleared += u32::from(found),
            Err(e) => self.failed = Some(e.to_string()),
        }
    }
}

/// The cgroup pacer's dynamic hold for connections to `to` only, this
/// process in its cgroup until the guard goes (module docs).
fn join_hold(to: std::net::IpAddr) -> Result<tcpaccel_pacer::Joined, tcpaccel_pacer::PacerError> {
    let rule = match to {
        std::net::IpAddr::V4(a) => format!("{a}/32=dynamic"),
        std::net::IpAddr::V6(a) => format!("[{a}/128]=dynamic"),
    };
    let cfg = tcpaccel_pacer::PaceConfig {
        hold: true,
        ..tcpaccel_pacer::PaceConfig::parse("none", &[rule], None)?
    };
    tcpaccel_pacer::Joined::join(&format!("compare-{}", std::process::id()), &cfg)
}

fn report_interval(rtt: Duration) -> Duration {
    (rtt / 4).clamp(Duration::from_millis(10), Duration::from_millis(50))
}

/// Runs the comparison (module docs). `on_event` sees each step as it ends.
pub fn run(plan: &Plan, mut on_event: impl FnMut(Event)) -> Result<Outcome, CompareError> {
    let t0 = Instant::now();
    // An iperf3 server takes every connection for a test of its own and is
    // busy while it gives up on it: no handshakes there; the probe's
    // `tcpi_min_rtt` is the RTT.
    let handshake = match plan.receiver {
        Receiver::Tcpaccel => Some(
            crate::collect::handshake_rtt(plan.to, plan.handshakes, Duration::from_secs(3))
                .map_err(|msg| CompareError::Rtt { to: plan.to, msg })?,
        ),
        Receiver::Iperf3 => None,
    };
    let rtt0 = handshake.unwrap_or(Duration::from_secs(1));
    let mut bytes_sent = 0u64;
    let mut metrics = MetricsCache::default();
    metrics.forget(plan);

    // The measuring transfer: unpaced, the host's congestion control, and a
    // send buffer large enough that the host's default buffers do not hide
    // the path's rate (a window of 4 MB over 100 ms looks like a 320 Mbit/s
    // bottleneck). Forcing it past wmem_max needs CAP_NET_ADMIN; without it
    // the probe runs with the host's buffers and says so.
    let mut probe_readings = Readings::default();
    let probe_stop = Arc::new(AtomicBool::new(false));
    let cfg = SendConfig {
        volume: Volume::Duration(plan.probe),
        interval: Some(handshake.map_or(Duration::from_millis(10), report_interval)),
        connect_timeout: Duration::from_secs(5),
        receipt_timeout: Duration::from_secs(10) + rtt0 * 10,
        stop: Some(Arc::clone(&probe_stop)),
        sndbuf: Some(PROBE_SNDBUF),
        force_buffers: true,
        cc: plan.cc.clone(),
        ..SendConfig::new(plan.to)
    };
    // The probe may have a quarter of the byte budget; Ctrl-C ends it too.
    let probe_cap = plan.max_bytes / 4;
    let mut probe_acked = 0u64;
    let mut on_probe = |r: &Report| {
        let Report::Interval(iv) = r;
        probe_acked += iv.bytes;
        if probe_acked >= probe_cap || plan.stop.load(Ordering::Relaxed) {
            probe_stop.store(true, Ordering::Relaxed);
        }
        probe_readings.take(r)
    };
    // BBR where the host has it: its startup finds the bottleneck rate
    // without needing a loss-free slow start, which a loss-based congestion
    // control does not get through a shallow buffer (CUBIC on seed 000's
    // path delivered at most 320 of 500 Mbit/s in a 2 s probe). Then the
    // comparison's own congestion control; then the host's buffers.
    let tries = [(Some("bbr".to_string()), true), (plan.cc.clone(), true), (plan.cc.clone(), false)];
    let mut probed = Err(tcpaccel_traffic::Error::Sys(tcpaccel_sys::Error::Other {
        op: "the measuring transfer".into(),
        msg: "not tried".into(),
    }));
    for (cc, force) in tries {
        let c = SendConfig { cc, sndbuf: force.then_some(PROBE_SNDBUF), force_buffers: force, ..cfg.clone() };
        probed = plan.receiver.send(c, &mut on_probe).map(|p| (p, force.then_some(PROBE_SNDBUF)));
        // A setting this host refuses: the next try; anything else ends it.
        if !matches!(probed, Err(tcpaccel_traffic::Error::Sys(_))) {
            break;
        }
    }
    let (probe, probe_sndbuf) = probed.map_err(|source| CompareError::Probe { to: plan.to, source })?;
    bytes_sent += probe.bytes;
    let min_rtt = match (probe_readings.min_rtt, handshake) {
        (Some(m), Some(h)) => m.min(h),
        (m, h) => m.or(h).ok_or(CompareError::NoEstimate { to: plan.to, rtt: Duration::ZERO })?,
    };
    let mut est = BottleneckEstimator::new(min_rtt, compare::BW_WINDOW_ROUNDS);
    for &(t, d) in &probe_readings.delivery {
        est.on_sample(t, d);
    }
    let payload = est.estimate().ok_or(CompareError::NoEstimate { to: plan.to, rtt: min_rtt })?;
    let interval = report_interval(min_rtt);
    let framing = probe.streams.first().map(|s| s.framing).unwrap_or(Framing::ETHERNET_1500_TS);
    let wire = framing.wire_of_goodput(payload);
    let path = PathEstimate {
        handshake_rtt_us: handshake.map(|h| h.as_micros() as u64),
        min_rtt_us: min_rtt.as_micros() as u64,
        bottleneck_payload_bps: payload.bits_per_sec(),
        bottleneck_wire_bps: wire.bits_per_sec(),
        rounds: est.rounds(),
        probe_sndbuf,
        probe_receiver_limited_s: probe_readings.rwnd_limited_us.map(|us| us as f64 / 1e6),
        probe_goodput_bps: probe.goodput_bps,
        probe_retransmits: probe.retransmits,
        probe_cc: probe.streams.first().and_then(|s| s.cc.clone()),
        mss: framing.mss(),
        overhead: framing.overhead(),
    };
    on_event(Event::Path(&path));

    let pace_wire = Rate((wire.bits_per_sec() as f64 * plan.pace_fraction) as u64);
    let sndbuf = crate::judge::buffer_need(bdp_bytes(wire, min_rtt));
    let cc = plan.cc.clone();
    let settings_of = |v: Variant| match v {
        Variant::Unpaced | Variant::DynamicHold => {
            Settings { pace_wire_bps: None, sndbuf: None, cc: cc.clone() }
        }
        Variant::BufferFix => Settings { pace_wire_bps: None, sndbuf: Some(sndbuf), cc: cc.clone() },
        Variant::Bbr => Settings { pace_wire_bps: None, sndbuf: None, cc: Some("bbr".into()) },
        Variant::StaticPacing => {
            Settings { pace_wire_bps: Some(pace_wire.bits_per_sec()), sndbuf: None, cc: cc.clone() }
        }
    };
    let mut variants: Vec<Variant> = plan.variants.clone();
    let mut skipped = Vec::new();
    // The hold needs the cgroup pacer (root, cgroup2, BPF): without it the
    // variant is left out before the budget is shared.
    if let Some(i) = variants.iter().position(|&v| v == Variant::DynamicHold) {
        if let Err(e) = tcpaccel_pacer::probe() {
            variants.remove(i);
            let s = Skipped {
                variant: Variant::DynamicHold,
                why: format!("the cgroup pacer is not usable here: {e}"),
            };
            on_event(Event::Skipped(&s));
            skipped.push(s);
        }
    }

    // The budget shared out: what is left after the probe, per transfer.
    // An iperf3 server also takes a moment between two tests.
    let between = match plan.receiver {
        Receiver::Tcpaccel => Duration::from_millis(200),
        Receiver::Iperf3 => Duration::from_millis(800),
    };
    let overhead = min_rtt * OVERHEAD_RTTS + between;
    let planned = (variants.len() as u32 * plan.repeats.max(1)).max(1);
    let trial = plan.trial.unwrap_or_else(|| {
        let left = plan.max_time.saturating_sub(t0.elapsed());
        (left / planned).saturating_sub(overhead)
    });
    if let Some(t) = plan.trial.filter(|&t| t < MIN_TRIAL) {
        return Err(CompareError::Budget(format!(
            "a transfer of {t:?} says too little; give at least {MIN_TRIAL:?}"
        )));
    }
    if trial < MIN_TRIAL {
        return Err(CompareError::Budget(format!(
            "{:?} left for {planned} transfers is under {MIN_TRIAL:?} each; raise the time limit or lower the repeats",
            plan.max_time.saturating_sub(t0.elapsed())
        )));
    }

    let mut trials = Vec::new();
    let mut cut_short = None;
    'rounds: for repeat in 0..plan.repeats.max(1) {
        let n = variants.len();
        for k in 0..n {
            let v = variants[(k + repeat as usize) % n];
            if skipped.iter().any(|s: &Skipped| s.variant == v) {
                continue;
            }
            if plan.stop.load(Ordering::Relaxed) {
                cut_short = Some("stopped (interrupt)".to_string());
                break 'rounds;
            }
            if t0.elapsed() + trial + overhead > plan.max_time {
                cut_short =
                    Some(format!("the time limit ({:?}) left no room for another transfer", plan.max_time));
                break 'rounds;
            }
            let expect = (payload.bytes_per_sec() as f64 * trial.as_secs_f64()) as u64;
            if bytes_sent + expect > plan.max_bytes {
                cut_short = Some(format!(
                    "the byte limit ({} bytes) left no room for another transfer",
                    plan.max_bytes
                ));
                break 'rounds;
            }
            let s = settings_of(v);
            let mut cfg = SendConfig {
                volume: Volume::Duration(trial),
                interval: Some(interval),
                connect_timeout: Duration::from_secs(5),
                receipt_timeout: Duration::from_secs(10) + min_rtt * 10,
                stop: Some(Arc::clone(&plan.stop)),
                cc: s.cc.clone(),
                sndbuf: s.sndbuf,
                force_buffers: s.sndbuf.is_some(),
                framing: Some(framing),
                ..SendConfig::new(plan.to)
            };
            if let Some(w) = s.pace_wire_bps {
                cfg.pace = Pace::Static(Rate(w));
            }
            metrics.forget(plan);
            let hold = match v {
                Variant::DynamicHold => match join_hold(plan.to.ip()) {
                    Ok(j) => Some(j),
                    Err(e) => {
                        let s = Skipped { variant: v, why: format!("joining the cgroup pacer's hold: {e}") };
                        on_event(Event::Skipped(&s));
                        skipped.push(s);
                        continue;
                    }
                },
                _ => None,
            };
            let mut rd = Readings::default();
            let sent = plan.receiver.send(cfg, |r| rd.take(r));
            // Out of the cgroup and detached before anything else runs.
            let paced_connections = match hold {
                Some(j) => {
                    let n = j.paced_conns().unwrap_or(0);
                    if let Err(e) = j.leave() {
                        cut_short = Some(format!("leaving the cgroup pacer's hold: {e}"));
                        break 'rounds;
                    }
                    Some(n)
                }
                None => None,
            };
            if let (Some(0), Ok(sum)) = (paced_connections, &sent) {
                bytes_sent += sum.bytes;
                let s = Skipped {
                    variant: v,
                    why:
                        "the cgroup pacer paced no connection of the transfer: it did not run under the hold"
                            .into(),
                };
                on_event(Event::Skipped(&s));
                skipped.push(s);
                continue;
            }
            let sum = match sent {
                Ok(sum) => sum,
                // A setting this host refuses (no BBR module, no
                // CAP_NET_ADMIN): leave the variant out, say why.
                Err(tcpaccel_traffic::Error::Sys(e)) => {
                    let s = Skipped { variant: v, why: e.to_string() };
                    on_event(Event::Skipped(&s));
                    skipped.push(s);
                    continue;
                }
                Err(e) => {
                    cut_short = Some(format!("{} transfer failed: {e}", v.name()));
                    break 'rounds;
                }
            };
            bytes_sent += sum.bytes;
            let target = match s.pace_wire_bps {
                Some(w) => framing.goodput_of_wire(Rate(w)),
                None => payload,
            };
            let windows = rd.windows();
            let rec = TrialRecord {
                repeat,
                trial: Trial {
                    variant: v,
                    goodput: Rate(sum.goodput_bps),
                    retransmits: sum.retransmits.unwrap_or(0),
                    rtt_inflation: compare::rtt_inflation(&rd.srtts, min_rtt),
                    t95: compare::time_to_95(&windows, target),
                    steady: compare::steady_goodput(&rd.intervals),
                },
                bytes: sum.bytes,
                duration_s: sum.duration_s,
                stopped_early: sum.stopped_early,
                paced_connections,
                cc: sum.streams.first().and_then(|s| s.cc.clone()),
                series: series(&rd),
            };
            on_event(Event::Trial(&rec));
            let stopped = rec.stopped_early;
            // A transfer cut by Ctrl-C is not a fair sample: shown, not judged.
            trials.push(rec);
            if stopped {
                cut_short = Some("stopped (interrupt)".to_string());
                break 'rounds;
            }
        }
    }
    let judged: Vec<Trial> = trials.iter().filter(|t| !t.stopped_early).map(|t| t.trial).collect();
    let rows = compare::summarize(&judged);
    let recommendation = compare::recommend(&rows);
    let settings = variants.iter().map(|&v| (v, settings_of(v))).collect();
    Ok(Outcome {
        to: plan.to,
        receiver: plan.receiver,
        path,
        settings,
        trials,
        skipped,
        rows,
        recommendation,
        cut_short,
        elapsed_s: t0.elapsed().as_secs_f64(),
        bytes_sent,
        metrics_cleared: metrics.cleared,
        metrics_not_cleared: metrics.failed,
    })
}

/// Per-window goodput and the last srtt in it, for the plots.
fn series(rd: &Readings) -> Vec<(f64, u64, Option<f64>)> {
    let per = rd.srtts.len() == rd.intervals.len();
    let mut out = Vec::new();
    let mut i = 0;
    for &(s, e, b) in &rd.windows() {
        while i < rd.intervals.len() && rd.intervals[i].1 <= e {
            i += 1;
        }
        let srtt = if per && i > 0 { Some(rd.srtts[i - 1].as_secs_f64() * 1e3) } else { None };
        out.push((e.as_secs_f64(), Rate::from_bytes_over(b, e.saturating_sub(s)).bits_per_sec(), srtt));
    }
    out
}

/// A self-contained HTML page of an outcome: the table, the
/// recommendation with `commands`, a bar chart of the goodputs (median,
/// min–max) and each variant's first transfer over time.
pub fn html(out: &Outcome, reason: &str, commands: &[String]) -> String {
    use tcpaccel_plot::{bar_chart, escape, line_chart, Bar, Chart};
    let mut bars = Vec::new();
    for r in &out.rows {
        bars.push(Bar {
            group: r.variant.name().into(),
            label: "whole transfer".into(),
            value: r.goodput_bps.median / 1e6,
            range: Some((r.goodput_bps.min / 1e6, r.goodput_bps.max / 1e6)),
            reference: false,
        });
        if let Some(s) = r.steady_bps {
            bars.push(Bar {
                group: r.variant.name().into(),
                label: "second half".into(),
                value: s / 1e6,
                range: None,
                reference: false,
            });
        }
    }
    let mut chart = Chart::new("Goodput over time (each variant's first transfer)", "s", "Mbit/s");
    for v in Variant::ALL {
        if let Some(t) = out.trials.iter().find(|t| t.trial.variant == v) {
            chart = chart.line(v.name(), t.series.iter().map(|&(x, g, _)| (x, g as f64 / 1e6)).collect());
        }
    }
    chart = chart.hline("bottleneck (payload)", out.path.bottleneck_payload_bps as f64 / 1e6);
    let mut rows = String::new();
    for r in &out.rows {
        rows.push_str(&format!(
            "<tr><td>{}</td><td>{:.1}</td><td>{:.1}–{:.1}</td><td>{}</td><td>{:.0}</td><td>{}</td><td>{}</td></tr>\n",
            r.variant.name(),
            r.goodput_bps.median / 1e6,
            r.goodput_bps.min / 1e6,
            r.goodput_bps.max / 1e6,
            r.steady_bps.map_or("-".into(), |s| format!("{:.1}", s / 1e6)),
            r.retransmits,
            r.rtt_inflation.map_or("-".into(), |x| format!("{x:.2}")),
            r.t95_s.map_or("never".into(), |x| format!("{x:.2} s")),
        ));
    }
    let rec = match &out.recommendation {
        Some(r) => format!(
            "<p><b>Recommended: {}</b> — {}</p>\n<pre>{}</pre>",
            r.variant.name(),
            escape(reason),
            escape(&commands.join("\n"))
        ),
        None => "<p>No recommendation: no transfer was judged.</p>".into(),
    };
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>tcpaccel compare: {to}</title>\n\
         <style>body{{font-family:sans-serif;max-width:60em;margin:auto}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}</style></head><body>\n\
         <h1>Path comparison to {to} ({recv:?})</h1>\n\
         <p>min RTT {rtt:.2} ms; bottleneck {wire:.1} Mbit/s on the wire ({payload:.1} Mbit/s of payload, {rounds} rounds); {n} transfers, {secs:.1} s{cut}</p>\n\
         {rec}\n<table><tr><th>variant</th><th>Mbit/s</th><th>min–max</th><th>second half</th><th>retrans</th><th>RTT×</th><th>t95</th></tr>\n{rows}</table>\n\
         {bars}\n{lines}\n</body></html>\n",
        to = out.to,
        recv = out.receiver,
        rtt = out.path.min_rtt_us as f64 / 1e3,
        wire = out.path.bottleneck_wire_bps as f64 / 1e6,
        payload = out.path.bottleneck_payload_bps as f64 / 1e6,
        rounds = out.path.rounds,
        n = out.trials.len(),
        secs = out.elapsed_s,
        cut = out.cut_short.as_ref().map_or(String::new(), |c| format!("; cut short: {}", escape(c))),
        bars = bar_chart("Goodput per variant (median, min–max over repeats)", "Mbit/s", &bars),
        lines = line_chart(&chart),
    )
}
