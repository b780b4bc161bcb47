//! The doctor's judgement: a pure function from [`Facts`] to [`Finding`]s.
//!
//! What it is: one check per setting, each producing exactly one finding
//! (ok, info, warn, critical, or unknown when the fact could not be read),
//! with what the setting limits, by how much on this path, and the exact
//! command that fixes it. The sizing rules come from seed 004 (socket
//! buffers of at least 2× the bandwidth-delay product, a longer interface
//! queue on high-BDP paths, no slow start after idle for intermittent
//! senders, no route metric cache for reproducible runs, a lower minimum RTO
//! in low-RTT clusters) with ESnet fasterdata's host values as floors.
//!
//! What it is not: no I/O, no clock; it never reads the host. Collecting facts is
//! [`crate::collect`], applying fixes is [`crate::apply`].

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tcpaccel_core::units::{format_duration, Bytes, Rate};

use crate::facts::{Fact, Facts, Interface, LiveConn, Route};

/// How bad a finding is. Ordered: `Ok < Info < Unknown < Warn < Critical`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Ok,
    Info,
    /// The fact could not be read, so the check could not be made.
    Unknown,
    Warn,
    Critical,
}

impl Severity {
    pub fn label(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Info => "info",
            Severity::Unknown => "unknown",
            Severity::Warn => "WARN",
            Severity::Critical => "CRITICAL",
        }
    }
}

/// One fix. `Sysctl` and `Txqueuelen` are applied by `doctor --apply`;
/// `Advice` is a command the doctor prints but does not run (route changes,
/// qdisc changes that depend on modules, jumbo frames that need the path).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fix {
    Sysctl { key: String, value: String },
    Txqueuelen { dev: String, value: u32 },
    Advice { command: String },
}

impl Fix {
    /// The shell command that performs this fix (in `netns` if given).
    pub fn command(&self, netns: Option<&str>) -> String {
        match self {
            Fix::Sysctl { key, value } => {
                let v =
                    if value.contains(char::is_whitespace) { format!("\"{value}\"") } else { value.clone() };
                match netns {
                    Some(ns) => format!("ip netns exec {ns} sysctl -w {key}={v}"),
                    None => format!("sysctl -w {key}={v}"),
                }
            }
            Fix::Txqueuelen { dev, value } => match netns {
                Some(ns) => format!("ip -n {ns} link set dev {dev} txqueuelen {value}"),
                None => format!("ip link set dev {dev} txqueuelen {value}"),
            },
            Fix::Advice { command } => match netns {
                Some(ns) if command.starts_with("ip ") => format!("ip -n {ns} {}", &command[3..]),
                Some(ns) if command.starts_with("sysctl ") && !command.contains("host-global") => {
                    format!("ip netns exec {ns} {command}")
                }
                _ => command.clone(),
            },
        }
    }
    /// True for fixes `--apply` performs.
    pub fn automatic(&self) -> bool {
        !matches!(self, Fix::Advice { .. })
    }
}

/// One judged setting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable identifier of the check (`tcp_rmem`, `txqueuelen:eth0`, ...).
    pub id: String,
    pub severity: Severity,
    /// What was seen and what it means on this path.
    pub summary: String,
    /// What the setting limits (`receive window`, `loss recovery`, ...).
    pub limits: Option<String>,
    /// The throughput ceiling it imposes on this path, when computable.
    pub cap: Option<Rate>,
    /// `cap` as a fraction of the path's rate.
    pub share: Option<f64>,
    pub fixes: Vec<Fix>,
}

impl Finding {
    fn new(id: impl Into<String>, severity: Severity, summary: impl Into<String>) -> Self {
        Finding {
            id: id.into(),
            severity,
            summary: summary.into(),
            limits: None,
            cap: None,
            share: None,
            fixes: Vec::new(),
        }
    }
    fn limits(mut self, l: &str) -> Self {
        self.limits = Some(l.to_string());
        self
    }
    fn fix(mut self, f: Fix) -> Self {
        self.fixes.push(f);
        self
    }
    fn capped(mut self, cap: Rate, rate: Option<Rate>) -> Self {
        self.cap = Some(cap);
        self.share = rate.filter(|r| r.0 > 0).map(|r| cap.0 as f64 / r.0 as f64);
        self
    }
}

/// Linux's fixed floor of the retransmission timeout (`TCP_RTO_MIN`, 200 ms,
/// include/net/tcp.h) when neither a route metric nor `tcp_rto_min_us` lowers it.
pub const KERNEL_RTO_MIN: Duration = Duration::from_millis(200);
/// Largest value an int sysctl (`tcp_rmem` fields, `rmem_max`) accepts.
const SYSCTL_INT_MAX: u64 = i32::MAX as u64;
/// Buffers are rounded up to whole MiB so the commands read well.
const MIB: u64 = 1 << 20;
/// ESnet fasterdata floor for `netdev_max_backlog` on fast hosts.
const FASTERDATA_BACKLOG: u64 = 250_000;
/// Interface queue (packets) used in seed 000's and seed 004's long fat
/// network runs; beyond it a longer queue only adds delay.
const TXQUEUE_CEILING: u64 = 10_000;
/// The default `txqueuelen` of Ethernet devices.
const TXQUEUE_DEFAULT: u64 = 1_000;
/// Segment size assumed when converting windows to packets (1500-byte MTU).
const MSS: u64 = 1448;
/// Linux's initial congestion window in segments (RFC 6928, `TCP_INIT_CWND`).
const INITIAL_WINDOW: u64 = 10;

/// Buffer size the path needs: 2× BDP (seed 004: "socket buffers at least
/// bandwidth × RTT; 2× BDP recommended"), rounded up to a MiB and kept
/// within what an int sysctl accepts.
pub fn buffer_need(bdp: u64) -> u64 {
    (2 * bdp).div_ceil(MIB).saturating_mul(MIB).clamp(MIB, SYSCTL_INT_MAX)
}

/// The highest rate a window of `window` bytes allows at RTT `rtt`
/// (one window per round trip).
pub fn window_cap(window: u64, rtt: Duration) -> Option<Rate> {
    let ns = rtt.as_nanos();
    (ns > 0).then(|| Rate(((window as u128 * 8 * 1_000_000_000) / ns) as u64))
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// The path in words, for report headers.
pub fn describe_path(facts: &Facts) -> String {
    let p = &facts.path;
    match (p.rate, p.rtt, p.bdp()) {
        (Some(r), Some(t), Some(bdp)) => format!(
            "{r} × {} ({}) → BDP {}; buffers should hold ≥ {} (2× BDP, seed 004)",
            format_duration(t),
            p.rtt_source.as_deref().unwrap_or("given"),
            Bytes(bdp),
            Bytes(buffer_need(bdp))
        ),
        (None, Some(t), _) => format!(
            "RTT {} ({}), rate unknown: give --rate to size buffers",
            format_duration(t),
            p.rtt_source.as_deref().unwrap_or("given")
        ),
        (Some(r), None, _) => format!("{r}, RTT unknown: give --rtt or --target to size buffers"),
        _ => "path unknown: give --rate and --rtt (or --target) to judge buffers against the BDP".into(),
    }
}

/// Judges every fact. Pure: same facts, same findings, in a fixed order.
pub fn judge(facts: &Facts) -> Vec<Finding> {
    let mut out = checks(facts);
    // A setting that is read-only here (a host-global value seen from a
    // namespace) cannot be applied here: it becomes advice for the host.
    for f in &mut out {
        let mut host_only = !f.fixes.is_empty();
        for fix in &mut f.fixes {
            match fix {
                Fix::Sysctl { key, value } if facts.readonly.iter().any(|k| k == key) => {
                    let v = if value.contains(' ') { format!("\"{value}\"") } else { value.clone() };
                    *fix = Fix::Advice {
                        command: format!("sysctl -w {key}={v}  # host-global: run in the initial namespace"),
                    };
                }
                _ => host_only = false,
            }
        }
        // Nothing in this namespace can change it: inform, do not fail the verdict.
        if host_only && f.severity > Severity::Info {
            f.severity = Severity::Info;
            f.summary.push_str(" (host-global: not settable from this namespace)");
        }
    }
    out
}

fn checks(facts: &Facts) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(Fact::Unknown(why)) = &facts.target {
        out.push(
            Finding::new("target", Severity::Unknown, format!("target not measured: {why}"))
                .limits("path measurement"),
        );
    }
    if let Some(m) = &facts.measured {
        out.push(measured(m, facts));
    }
    out.push(window_scaling(facts));
    out.push(buffer("tcp_rmem", "net.ipv4.tcp_rmem", "receive window (autotuning ceiling)", facts));
    out.push(buffer_max("rmem_max", "net.core.rmem_max", "SO_RCVBUF", facts));
    out.push(buffer("tcp_wmem", "net.ipv4.tcp_wmem", "send window (unacknowledged data)", facts));
    out.push(buffer_max("wmem_max", "net.core.wmem_max", "SO_SNDBUF", facts));
    out.push(congestion_control(facts));
    out.push(slow_start_after_idle(facts));
    out.push(switch_on(
        facts,
        "tcp_no_metrics_save",
        "net.ipv4.tcp_no_metrics_save",
        Severity::Info,
        "reproducibility",
        "the kernel caches ssthresh/RTT per destination, so a connection after a lossy one starts in congestion avoidance; runs are not reproducible (seed 004)",
    ));
    out.push(switch_off_bad(
        facts,
        "tcp_sack",
        "net.ipv4.tcp_sack",
        Severity::Warn,
        "loss recovery",
        "without SACK, recovering several losses in one window costs about one RTT per loss",
    ));
    out.push(switch_off_bad(
        facts,
        "tcp_timestamps",
        "net.ipv4.tcp_timestamps",
        Severity::Info,
        "RTT sampling and PAWS",
        "without timestamps RTT is sampled once per window and sequence wrap protection (PAWS) is off, which matters above ~1 Gbit/s",
    ));
    out.push(switch_on(
        facts,
        "tcp_mtu_probing",
        "net.ipv4.tcp_mtu_probing",
        Severity::Info,
        "PMTU black holes",
        "a path that drops ICMP 'fragmentation needed' stalls large segments; fasterdata sets 1",
    ));
    out.push(backlog(facts));
    out.push(default_qdisc(facts));
    out.push(rto_min(facts));
    out.extend(interfaces(facts));
    out.extend(route_initcwnd(facts));
    out.push(mptcp(facts));
    out.extend(facts.live.iter().map(|c| live(c, facts)));
    out
}

/// The overall verdict: true when nothing is at warn or worse.
pub fn healthy(findings: &[Finding]) -> bool {
    findings.iter().all(|f| f.severity < Severity::Warn)
}

/// Share of the path rate below which a measured transfer is a warning.
const GOOD_SHARE: f64 = 0.9;

fn measured(m: &Fact<crate::facts::Measured>, facts: &Facts) -> Finding {
    match m {
        Fact::Unknown(why) => {
            Finding::new("throughput", Severity::Unknown, format!("bandwidth not measured: {why}"))
        }
        Fact::Known(m) => {
            let retr = m.retransmits.map(|r| format!(", {r} retransmissions")).unwrap_or_default();
            match facts.path.rate {
                Some(rate) => {
                    let share = m.goodput.0 as f64 / rate.0.max(1) as f64;
                    let sev = if share < GOOD_SHARE { Severity::Warn } else { Severity::Ok };
                    let mut f = Finding::new(
                        "throughput",
                        sev,
                        format!(
                            "measured {} over {:.1} s{retr}: {} of {rate}",
                            m.goodput,
                            m.duration_s,
                            pct(share)
                        ),
                    )
                    .limits("this path now");
                    f.share = Some(share);
                    f
                }
                None => Finding::new(
                    "throughput",
                    Severity::Info,
                    format!(
                        "measured {} over {:.1} s{retr} (give --rate to compare)",
                        m.goodput, m.duration_s
                    ),
                ),
            }
        }
    }
}

fn unknown(id: &str, key: &str, why: &str, limits: &str) -> Finding {
    Finding::new(id, Severity::Unknown, format!("{key} unreadable ({why}); cannot judge the {limits}"))
        .limits(limits)
}

fn window_scaling(facts: &Facts) -> Finding {
    let key = "net.ipv4.tcp_window_scaling";
    match facts.sysctl_u64(key) {
        Fact::Unknown(why) => unknown("tcp_window_scaling", key, &why, "window size"),
        Fact::Known(0) => {
            let mut f = Finding::new(
                "tcp_window_scaling",
                Severity::Critical,
                "window scaling is off: windows stop at 64 KB".to_string(),
            )
            .limits("window size");
            if let Some(cap) = facts.path.rtt.and_then(|t| window_cap(65_535, t)) {
                f.summary = format!(
                    "window scaling is off: windows stop at 64 KB → at most {cap} at {}",
                    format_duration(facts.path.rtt.unwrap_or_default())
                );
                f = f.capped(cap, facts.path.rate);
            }
            f.fix(Fix::Sysctl { key: key.into(), value: "1".into() })
        }
        Fact::Known(_) => Finding::new("tcp_window_scaling", Severity::Ok, "window scaling on"),
    }
}

/// Autotuning ceilings (`tcp_rmem`/`tcp_wmem` max field) against 2× BDP.
fn buffer(id: &str, key: &str, limits: &str, facts: &Facts) -> Finding {
    let v = match facts.sysctl_triple(key) {
        Fact::Known(v) => v,
        Fact::Unknown(why) => return unknown(id, key, &why, limits),
    };
    let max = v[2];
    let path = &facts.path;
    let (Some(bdp), Some(rtt)) = (path.bdp(), path.rtt) else {
        let mut f =
            Finding::new(id, Severity::Info, format!("{id} max {} (path unknown: not judged)", Bytes(max)))
                .limits(limits);
        if let Some(rtt) = path.rtt {
            if let Some(cap) = window_cap(max, rtt) {
                f.summary = format!("{id} max {} → at most {cap} at {}", Bytes(max), format_duration(rtt));
                f = f.capped(cap, None);
            }
        }
        return f;
    };
    let need = buffer_need(bdp);
    if max >= need {
        return Finding::new(id, Severity::Ok, format!("{id} max {} ≥ {} (2× BDP)", Bytes(max), Bytes(need)))
            .limits(limits);
    }
    let cap = window_cap(max, rtt).unwrap_or(Rate(0));
    let sev = if max < bdp { Severity::Critical } else { Severity::Warn };
    let mut summary = format!(
        "{id} max {} caps the window at {} → at most {cap} at {}",
        Bytes(max),
        Bytes(max),
        format_duration(rtt)
    );
    if let Some(rate) = path.rate {
        summary.push_str(&format!(", {} of {rate}", pct(cap.0 as f64 / rate.0.max(1) as f64)));
    }
    if sev == Severity::Warn {
        summary.push_str(
            " (it fits one BDP, but the kernel keeps part of the buffer for overhead, hence 2× BDP)",
        );
    }
    Finding::new(id, sev, summary)
        .limits(limits)
        .capped(cap, path.rate)
        .fix(Fix::Sysctl { key: key.into(), value: format!("{} {} {}", v[0], v[1], need) })
}

/// `rmem_max`/`wmem_max`: caps only applications that set SO_RCVBUF/SO_SNDBUF.
fn buffer_max(id: &str, key: &str, opt: &str, facts: &Facts) -> Finding {
    let limits = format!("buffers of applications that set {opt}");
    let max = match facts.sysctl_u64(key) {
        Fact::Known(v) => v,
        Fact::Unknown(why) => return unknown(id, key, &why, &limits),
    };
    let (Some(bdp), Some(rtt)) = (facts.path.bdp(), facts.path.rtt) else {
        return Finding::new(id, Severity::Info, format!("{id} {} (path unknown: not judged)", Bytes(max)))
            .limits(&limits);
    };
    let need = buffer_need(bdp);
    if max >= need {
        return Finding::new(id, Severity::Ok, format!("{id} {} ≥ {} (2× BDP)", Bytes(max), Bytes(need)))
            .limits(&limits);
    }
    let cap = window_cap(max, rtt).unwrap_or(Rate(0));
    Finding::new(
        id,
        Severity::Warn,
        format!(
            "{id} {}: an application that sets {opt} (iperf -w, the tutorial's setsockopt) gets at most {cap} at {}; autotuned sockets are not affected",
            Bytes(max),
            format_duration(rtt)
        ),
    )
    .limits(&limits)
    .capped(cap, facts.path.rate)
    .fix(Fix::Sysctl { key: key.into(), value: need.to_string() })
}

fn congestion_control(facts: &Facts) -> Finding {
    let key = "net.ipv4.tcp_congestion_control";
    let cc = match facts.sysctl(key) {
        Fact::Known(v) => v,
        Fact::Unknown(why) => return unknown("congestion_control", key, &why, "growth of the window"),
    };
    let avail: Vec<String> = facts
        .sysctl("net.ipv4.tcp_available_congestion_control")
        .known()
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    let avail_s = if avail.is_empty() { "unknown".to_string() } else { avail.join(" ") };
    if cc != "reno" {
        return Finding::new(
            "congestion_control",
            Severity::Ok,
            format!("congestion control {cc} (available: {avail_s})"),
        )
        .limits("growth of the window");
    }
    let (Some(bdp), Some(rtt)) = (facts.path.bdp(), facts.path.rtt) else {
        return Finding::new(
            "congestion_control",
            Severity::Info,
            format!("congestion control reno (available: {avail_s}); slow on high-BDP paths"),
        )
        .limits("growth of the window");
    };
    let w = bdp / MSS;
    if w < 100 {
        return Finding::new(
            "congestion_control",
            Severity::Ok,
            format!("congestion control reno; fine for a {w}-segment window"),
        )
        .limits("growth of the window");
    }
    // Reno halves the window on a loss and grows by one segment per RTT, so
    // it needs W/2 round trips to refill a W-segment pipe.
    let recover = rtt.saturating_mul((w / 2).min(u32::MAX as u64) as u32);
    let mut f = Finding::new(
        "congestion_control",
        Severity::Warn,
        format!(
            "congestion control reno: after one loss at a {w}-segment window it needs {} round trips = {} to refill the pipe",
            w / 2,
            format_duration(recover)
        ),
    )
    .limits("recovery after loss");
    let better = ["cubic", "bbr"].into_iter().find(|c| avail.iter().any(|a| a == c));
    f = match better {
        Some(c) => f.fix(Fix::Sysctl { key: key.into(), value: c.into() }),
        None => f.fix(Fix::Advice { command: "modprobe tcp_cubic".into() }),
    };
    f
}

fn slow_start_after_idle(facts: &Facts) -> Finding {
    let key = "net.ipv4.tcp_slow_start_after_idle";
    let id = "tcp_slow_start_after_idle";
    let limits = "intermittent senders";
    match facts.sysctl_u64(key) {
        Fact::Unknown(why) => unknown(id, key, &why, limits),
        Fact::Known(0) => Finding::new(id, Severity::Ok, "no slow start after idle").limits(limits),
        Fact::Known(_) => {
            let mut s = "after an idle period longer than the RTO, the window restarts from the initial window (seed 004: 10 MB bursts every 2 s never reach the link rate)".to_string();
            if let (Some(bdp), Some(rtt)) = (facts.path.bdp(), facts.path.rtt) {
                // Slow start doubles per RTT from the initial ~10 segments.
                let w = bdp / MSS;
                if w <= INITIAL_WINDOW {
                    return Finding::new(
                        id,
                        Severity::Info,
                        format!("slow start after idle is on, but this path's BDP ({w} segments) fits the initial window: no cost here"),
                    )
                    .limits(limits)
                    .fix(Fix::Sysctl { key: key.into(), value: "0".into() });
                }
                let rtts = (w as f64 / INITIAL_WINDOW as f64).log2().ceil() as u32;
                s = format!(
                    "{s}; on this path each burst spends ~{rtts} RTTs = {} regrowing to the BDP",
                    format_duration(rtt.saturating_mul(rtts))
                );
            }
            Finding::new(id, Severity::Warn, s)
                .limits(limits)
                .fix(Fix::Sysctl { key: key.into(), value: "0".into() })
        }
    }
}

/// A boolean sysctl that should be 1.
fn switch_on(facts: &Facts, id: &str, key: &str, sev: Severity, limits: &str, why_bad: &str) -> Finding {
    match facts.sysctl_u64(key) {
        Fact::Unknown(why) => unknown(id, key, &why, limits),
        Fact::Known(0) => Finding::new(id, sev, format!("{id} = 0: {why_bad}"))
            .limits(limits)
            .fix(Fix::Sysctl { key: key.into(), value: "1".into() }),
        Fact::Known(v) => Finding::new(id, Severity::Ok, format!("{id} = {v}")).limits(limits),
    }
}

/// A boolean sysctl that is bad when 0 (same shape as [`switch_on`]).
fn switch_off_bad(facts: &Facts, id: &str, key: &str, sev: Severity, limits: &str, why: &str) -> Finding {
    switch_on(facts, id, key, sev, limits, why)
}

fn backlog(facts: &Facts) -> Finding {
    let key = "net.core.netdev_max_backlog";
    let id = "netdev_max_backlog";
    let limits = "receive bursts per CPU";
    let v = match facts.sysctl_u64(key) {
        Fact::Known(v) => v,
        Fact::Unknown(why) => return unknown(id, key, &why, limits),
    };
    match facts.path.rate {
        Some(r) if r > Rate::gbps(1) && v < 30_000 => Finding::new(
            id,
            Severity::Info,
            format!("netdev_max_backlog {v}: above 1 Gbit/s receive bursts can overflow the per-CPU backlog (fasterdata: {FASTERDATA_BACKLOG})"),
        )
        .limits(limits)
        .fix(Fix::Sysctl { key: key.into(), value: FASTERDATA_BACKLOG.to_string() }),
        _ => Finding::new(id, Severity::Ok, format!("netdev_max_backlog {v}")).limits(limits),
    }
}

fn default_qdisc(facts: &Facts) -> Finding {
    let key = "net.core.default_qdisc";
    let id = "default_qdisc";
    let limits = "pacing";
    match facts.sysctl(key) {
        Fact::Unknown(why) => unknown(id, key, &why, limits),
        Fact::Known(q) if q == "fq" => Finding::new(id, Severity::Ok, "default qdisc fq (pacing in the qdisc)"),
        Fact::Known(q) => Finding::new(
            id,
            Severity::Info,
            format!("default qdisc {q}: TCP paces itself with a timer (Linux ≥ 4.13); fasterdata prefers fq where the module exists"),
        )
        .limits(limits)
        .fix(Fix::Advice { command: "sysctl -w net.core.default_qdisc=fq".into() }),
    }
}

/// The route most relevant to the path: the egress device's, else default.
fn path_route<'a>(facts: &Facts, routes: &'a [Route]) -> Option<&'a Route> {
    let dev = facts.path.egress_dev.as_deref();
    routes
        .iter()
        .find(|r| dev.is_some() && r.dev.as_deref() == dev && r.dst != "default")
        .or_else(|| routes.iter().find(|r| r.dst == "default"))
        .or_else(|| routes.first())
}

/// Recommended RTO floor: ten RTTs, within [5 ms, 200 ms]. Not lower: the
/// receiver may hold an ACK for up to 40 ms (delayed ACK), and a floor far
/// below that fires spurious retransmissions of lone segments.
pub fn recommended_rto_min(rtt: Duration) -> Duration {
    let ms = (rtt.as_micros() * 10).div_ceil(1000) as u64;
    Duration::from_millis(ms.clamp(5, 200))
}

fn rto_min(facts: &Facts) -> Finding {
    let id = "rto_min";
    let limits = "tail-loss recovery in low-RTT clusters";
    let Some(rtt) = facts.path.rtt else {
        return Finding::new(id, Severity::Info, "RTT unknown: minimum RTO not judged").limits(limits);
    };
    let routes = facts.routes.as_ref().and_then(|r| r.known()).map(|v| v.as_slice()).unwrap_or(&[]);
    let route = path_route(facts, routes);
    let sysctl_us = facts.sysctl_u64("net.ipv4.tcp_rto_min_us");
    let (floor, source) = match (route.and_then(|r| r.rto_min_ms), sysctl_us.known()) {
        (Some(ms), _) => (
            Duration::from_millis(ms),
            format!("route {} rto_min", route.map(|r| r.dst.as_str()).unwrap_or("?")),
        ),
        (None, Some(us)) => (Duration::from_micros(*us), "net.ipv4.tcp_rto_min_us".to_string()),
        (None, None) if matches!(facts.routes, Some(Fact::Known(_))) => {
            (KERNEL_RTO_MIN, "kernel default".to_string())
        }
        (None, None) => (KERNEL_RTO_MIN, "assumed kernel default: routes and sysctl unreadable".to_string()),
    };
    let ratio = floor.as_secs_f64() / rtt.as_secs_f64().max(1e-6);
    let want = recommended_rto_min(rtt);
    if floor <= want || ratio <= 20.0 {
        return Finding::new(
            id,
            Severity::Ok,
            format!("minimum RTO {} ({source}) = {ratio:.0}× the RTT", format_duration(floor)),
        )
        .limits(limits);
    }
    let mut f = Finding::new(
        id,
        Severity::Warn,
        format!(
            "minimum RTO {} ({source}) is {ratio:.0}× the {} RTT: a lost last packet of a message waits ≥ {} (seed 004, all-to-all MPI); {} is enough here",
            format_duration(floor),
            format_duration(rtt),
            format_duration(floor),
            format_duration(want)
        ),
    )
    .limits(limits);
    if sysctl_us.known().is_some() {
        f = f.fix(Fix::Sysctl {
            key: "net.ipv4.tcp_rto_min_us".into(),
            value: (want.as_micros() as u64).to_string(),
        });
    }
    if let Some(r) = route {
        let mut cmd = format!("ip route change {}", r.dst);
        if let Some(g) = &r.gateway {
            cmd.push_str(&format!(" via {g}"));
        }
        if let Some(d) = &r.dev {
            cmd.push_str(&format!(" dev {d}"));
        }
        cmd.push_str(&format!(" rto_min {}ms", want.as_millis()));
        f = f.fix(Fix::Advice { command: cmd });
    }
    f
}

fn interfaces(facts: &Facts) -> Vec<Finding> {
    let list = match &facts.interfaces {
        None => return Vec::new(),
        Some(Fact::Unknown(why)) => {
            return vec![Finding::new(
                "interfaces",
                Severity::Unknown,
                format!("interfaces unreadable ({why}); queue lengths and offloads not judged"),
            )]
        }
        Some(Fact::Known(l)) => l,
    };
    let egress = facts.path.egress_dev.as_deref();
    list.iter()
        .filter(|i| match egress {
            Some(e) => i.name == e,
            None => i.up && !i.loopback,
        })
        .flat_map(|i| interface(facts, i))
        .collect()
}

fn interface(facts: &Facts, i: &Interface) -> Vec<Finding> {
    let mut out = Vec::new();
    let id = format!("txqueuelen:{}", i.name);
    let limits = "interface queue (drops count as congestion)";
    if i.qdisc == "noqueue" {
        out.push(
            Finding::new(&id, Severity::Ok, format!("{}: no qdisc (noqueue), txqueuelen unused", i.name))
                .limits(limits),
        );
    } else if let Some(bdp) = facts.path.bdp() {
        // A slow-start burst can put up to a window of packets in the queue at
        // line rate; seed 004 counts those tail drops as congestion.
        let pkts = bdp / u64::from(i.mtu.max(576));
        let need = pkts.clamp(TXQUEUE_DEFAULT, TXQUEUE_CEILING);
        if u64::from(i.txqueuelen) < need {
            out.push(
                Finding::new(
                    &id,
                    Severity::Warn,
                    format!(
                        "{}: txqueuelen {} packets, the BDP is {pkts} packets; bursts overflow the {} queue and TCP backs off (seed 004)",
                        i.name, i.txqueuelen, i.qdisc
                    ),
                )
                .limits(limits)
                .fix(Fix::Txqueuelen { dev: i.name.clone(), value: need as u32 }),
            );
        } else {
            out.push(
                Finding::new(&id, Severity::Ok, format!("{}: txqueuelen {} ≥ {need}", i.name, i.txqueuelen))
                    .limits(limits),
            );
        }
    } else {
        out.push(
            Finding::new(
                &id,
                Severity::Info,
                format!("{}: txqueuelen {} (path unknown)", i.name, i.txqueuelen),
            )
            .limits(limits),
        );
    }
    let oid = format!("offloads:{}", i.name);
    let olimits = "CPU cost per byte";
    match &i.offloads {
        Fact::Unknown(why) => out.push(
            Finding::new(&oid, Severity::Unknown, format!("{}: offloads unreadable ({why})", i.name))
                .limits(olimits),
        ),
        Fact::Known(o) => {
            let fast = facts.path.rate.map(|r| r >= Rate::gbps(1)).unwrap_or(false);
            if fast && !(o.tso || o.gso) {
                out.push(
                    Finding::new(
                        &oid,
                        Severity::Info,
                        format!(
                            "{}: TSO and GSO off: every MTU-sized packet crosses the stack alone (~{} packets/s per Gbit/s); fine for emulated links, costly on real ones",
                            i.name,
                            1_000_000_000 / 8 / u64::from(i.mtu.max(576))
                        ),
                    )
                    .limits(olimits),
                );
            } else {
                out.push(
                    Finding::new(
                        &oid,
                        Severity::Ok,
                        format!(
                            "{}: tso {} gso {} gro {} tx-csum {}",
                            i.name,
                            onoff(o.tso),
                            onoff(o.gso),
                            onoff(o.gro),
                            onoff(o.tx_checksum)
                        ),
                    )
                    .limits(olimits),
                );
            }
        }
    }
    if let Some(r) = facts.path.rate {
        if r >= Rate::gbps(10) && i.mtu <= 1500 && !i.loopback {
            out.push(
                Finding::new(
                    format!("mtu:{}", i.name),
                    Severity::Info,
                    format!("{}: MTU {} at {r}: jumbo frames cut per-packet cost (seed 004: 949 → 991 Mbit/s on GbE) if every hop supports them", i.name, i.mtu),
                )
                .limits("per-packet overhead")
                .fix(Fix::Advice { command: format!("ip link set dev {} mtu 9000", i.name) }),
            );
        }
    }
    out
}

fn onoff(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

fn route_initcwnd(facts: &Facts) -> Option<Finding> {
    let routes = facts.routes.as_ref()?;
    let routes = match routes {
        Fact::Unknown(why) => {
            return Some(Finding::new(
                "routes",
                Severity::Unknown,
                format!("routes unreadable ({why}); rto_min/initcwnd metrics not judged"),
            ))
        }
        Fact::Known(r) => r,
    };
    let r = path_route(facts, routes)?;
    let id = format!("initcwnd:{}", r.dst);
    Some(match r.initcwnd {
        Some(w) if w < 10 => Finding::new(
            id,
            Severity::Warn,
            format!(
                "route {} sets initcwnd {w} (< the default 10): short transfers need extra round trips",
                r.dst
            ),
        )
        .limits("short transfers"),
        Some(w) => Finding::new(id, Severity::Ok, format!("route {} initcwnd {w}", r.dst)),
        None => Finding::new(id, Severity::Ok, format!("route {} initcwnd default (10)", r.dst)),
    })
}

fn mptcp(facts: &Facts) -> Finding {
    let en = facts.sysctl_u64("net.mptcp.enabled");
    let pm = facts.sysctl("net.mptcp.path_manager");
    match (en, pm) {
        (Fact::Known(e), pm) => Finding::new(
            "mptcp",
            Severity::Info,
            format!(
                "MPTCP {} (path manager {})",
                if e != 0 { "enabled" } else { "disabled" },
                pm.known().map(String::as_str).unwrap_or("unknown")
            ),
        ),
        (Fact::Unknown(why), _) => {
            Finding::new("mptcp", Severity::Info, format!("MPTCP not available ({why})"))
        }
    }
}

/// What limits a live connection now, from its tcp_info limit counters.
fn live(c: &LiveConn, facts: &Facts) -> Finding {
    let id = format!("live:{}->{}", c.src, c.dst);
    let rate = if c.srtt_us > 0 {
        Some(Rate((u64::from(c.cwnd) * u64::from(c.mss) * 8 * 1_000_000) / u64::from(c.srtt_us)))
    } else {
        None
    };
    let base = format!(
        "{} → {}: cwnd {} × {} B, srtt {} µs{}{}",
        c.src,
        c.dst,
        c.cwnd,
        c.mss,
        c.srtt_us,
        rate.map(|r| format!(" (≈ {r})")).unwrap_or_default(),
        c.congestion.as_ref().map(|cc| format!(", {cc}")).unwrap_or_default()
    );
    let (Some(busy), Some(rwnd), Some(sndbuf)) = (c.busy_us, c.rwnd_limited_us, c.sndbuf_limited_us) else {
        return Finding::new(
            id,
            Severity::Unknown,
            format!("{base}; this kernel does not report limit counters"),
        )
        .limits("this connection");
    };
    if busy == 0 {
        return Finding::new(id, Severity::Info, format!("{base}; has not sent data (busy time 0)"))
            .limits("this connection");
    }
    let fr = rwnd as f64 / busy as f64;
    let fs = sndbuf as f64 / busy as f64;
    let mut f = if fr >= 0.1 && fr >= fs {
        Finding::new(
            &id,
            Severity::Warn,
            format!("{base}; limited by the receiver's window {} of its busy time: raise the receiver's tcp_rmem (or its SO_RCVBUF, if the application sets one)", pct(fr)),
        )
        .limits("receive window of the peer")
    } else if fs >= 0.1 {
        let mut f = Finding::new(
            &id,
            Severity::Warn,
            format!("{base}; limited by its send buffer {} of its busy time: raise tcp_wmem here", pct(fs)),
        )
        .limits("send buffer");
        if let (Fact::Known(v), Some(bdp)) = (facts.sysctl_triple("net.ipv4.tcp_wmem"), facts.path.bdp()) {
            let need = buffer_need(bdp).max(v[2]);
            if need > v[2] {
                f = f.fix(Fix::Sysctl {
                    key: "net.ipv4.tcp_wmem".into(),
                    value: format!("{} {} {need}", v[0], v[1]),
                });
            }
        }
        f
    } else {
        Finding::new(
            &id,
            Severity::Ok,
            format!(
                "{base}; window-limited {} / buffer-limited {} of busy time: limited by the network (cwnd) or the application",
                pct(fr),
                pct(fs)
            ),
        )
        .limits("this connection")
    };
    if let (Some(r), Some(target)) = (rate, facts.path.rate) {
        f.share = Some(r.0 as f64 / target.0.max(1) as f64);
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{Offloads, PathSpec};
    use std::collections::BTreeMap;

    /// A host with Linux 6.x defaults, in its own namespace.
    fn defaults() -> Facts {
        let mut s = BTreeMap::new();
        for (k, v) in [
            ("net.core.rmem_max", "212992"),
            ("net.core.wmem_max", "212992"),
            ("net.core.netdev_max_backlog", "1000"),
            ("net.core.default_qdisc", "fq_codel"),
            ("net.ipv4.tcp_rmem", "4096 131072 6291456"),
            ("net.ipv4.tcp_wmem", "4096 16384 4194304"),
            ("net.ipv4.tcp_congestion_control", "cubic"),
            ("net.ipv4.tcp_available_congestion_control", "reno cubic bbr"),
            ("net.ipv4.tcp_slow_start_after_idle", "1"),
            ("net.ipv4.tcp_no_metrics_save", "0"),
            ("net.ipv4.tcp_window_scaling", "1"),
            ("net.ipv4.tcp_sack", "1"),
            ("net.ipv4.tcp_timestamps", "1"),
            ("net.ipv4.tcp_mtu_probing", "0"),
            ("net.ipv4.tcp_rto_min_us", "200000"),
            ("net.mptcp.enabled", "1"),
            ("net.mptcp.path_manager", "kernel"),
        ] {
            s.insert(k.to_string(), Fact::Known(v.to_string()));
        }
        Facts {
            sysctls: s,
            interfaces: Some(Fact::Known(vec![Interface {
                name: "eth0".into(),
                mtu: 1500,
                txqueuelen: 1000,
                qdisc: "pfifo_fast".into(),
                up: true,
                loopback: false,
                offloads: Fact::Known(Offloads { tso: true, gso: true, gro: true, tx_checksum: true }),
            }])),
            routes: Some(Fact::Known(vec![Route {
                dst: "default".into(),
                dev: Some("eth0".into()),
                gateway: Some("10.0.0.1".into()),
                rto_min_ms: None,
                initcwnd: None,
                initrwnd: None,
            }])),
            ..Default::default()
        }
    }

    fn path(rate: Rate, rtt_ms: f64) -> PathSpec {
        PathSpec {
            rate: Some(rate),
            rtt: Some(Duration::from_secs_f64(rtt_ms / 1000.0)),
            rtt_source: Some("given".into()),
            egress_dev: None,
        }
    }

    fn find<'a>(fs: &'a [Finding], id: &str) -> &'a Finding {
        fs.iter().find(|f| f.id == id).unwrap_or_else(|| panic!("no finding {id} in {fs:#?}"))
    }

    fn sysctl_fix(f: &Finding) -> Option<(&str, &str)> {
        f.fixes.iter().find_map(|x| match x {
            Fix::Sysctl { key, value } => Some((key.as_str(), value.as_str())),
            _ => None,
        })
    }

    #[test]
    fn bdp_above_rmem_max_is_critical_with_the_cap_and_the_fix() {
        // The tutorial's path: 1 Gbit/s, 100 ms → BDP 12.5 MB; tcp_rmem max 6 MB.
        let mut f = defaults();
        f.path = path(Rate::gbps(1), 100.0);
        let fs = judge(&f);
        let rmem = find(&fs, "tcp_rmem");
        assert_eq!(rmem.severity, Severity::Critical);
        // 6 291 456 B per 100 ms = 503 Mbit/s.
        assert_eq!(rmem.cap, Some(Rate(503_316_480)));
        assert!((rmem.share.unwrap() - 0.503).abs() < 0.001);
        assert!(rmem.summary.contains("50%"), "{}", rmem.summary);
        // 2 × 12.5 MB = 25 MB, rounded up to whole MiB: 24 MiB = 25 165 824.
        assert_eq!(sysctl_fix(rmem), Some(("net.ipv4.tcp_rmem", "4096 131072 25165824")));
        let rmax = find(&fs, "rmem_max");
        assert_eq!(rmax.severity, Severity::Warn);
        assert_eq!(sysctl_fix(rmax), Some(("net.core.rmem_max", "25165824")));
        assert_eq!(find(&fs, "tcp_wmem").severity, Severity::Critical);
        assert_eq!(find(&fs, "tcp_slow_start_after_idle").severity, Severity::Warn);
        assert_eq!(find(&fs, "txqueuelen:eth0").severity, Severity::Warn);
        assert!(!healthy(&fs));
    }

    #[test]
    fn buffers_between_one_and_two_bdp_warn() {
        let mut f = defaults();
        f.path = path(Rate::mbps(500), 100.0); // BDP 6.25 MB
        f.sysctls.insert("net.ipv4.tcp_rmem".into(), Fact::Known("4096 131072 8000000".into()));
        assert_eq!(find(&judge(&f), "tcp_rmem").severity, Severity::Warn);
    }

    #[test]
    fn a_tuned_host_on_a_modest_path_is_healthy() {
        let mut f = defaults();
        f.path = path(Rate::mbps(100), 10.0); // BDP 125 KB → need 1 MiB
        for (k, v) in [
            ("net.ipv4.tcp_slow_start_after_idle", "0"),
            ("net.ipv4.tcp_no_metrics_save", "1"),
            ("net.core.rmem_max", "4194304"),
            ("net.core.wmem_max", "4194304"),
        ] {
            f.sysctls.insert(k.into(), Fact::Known(v.into()));
        }
        let fs = judge(&f);
        assert!(
            healthy(&fs),
            "{:#?}",
            fs.iter().filter(|f| f.severity >= Severity::Warn).collect::<Vec<_>>()
        );
        assert_eq!(find(&fs, "tcp_rmem").severity, Severity::Ok);
        assert_eq!(find(&fs, "rto_min").severity, Severity::Ok);
    }

    #[test]
    fn unreadable_facts_are_unknown_not_a_crash() {
        let mut f = defaults();
        f.path = path(Rate::gbps(1), 100.0);
        f.sysctls.insert("net.ipv4.tcp_rmem".into(), Fact::Unknown("permission denied".into()));
        f.sysctls.insert("net.ipv4.tcp_wmem".into(), Fact::Known("garbage".into()));
        f.sysctls.remove("net.core.rmem_max");
        f.interfaces = Some(Fact::Unknown("ip not found".into()));
        f.routes = Some(Fact::Unknown("ip not found".into()));
        f.target = Some(Fact::Unknown("connect 10.0.0.9:5201: connection refused".into()));
        f.measured = Some(Fact::Unknown("target unreachable".into()));
        let fs = judge(&f);
        let rmem = find(&fs, "tcp_rmem");
        assert_eq!(rmem.severity, Severity::Unknown);
        assert!(rmem.summary.contains("permission denied"));
        assert!(rmem.fixes.is_empty());
        assert_eq!(find(&fs, "tcp_wmem").severity, Severity::Unknown);
        assert_eq!(find(&fs, "rmem_max").severity, Severity::Unknown);
        assert_eq!(find(&fs, "interfaces").severity, Severity::Unknown);
        assert_eq!(find(&fs, "routes").severity, Severity::Unknown);
        assert!(find(&fs, "target").summary.contains("refused"));
        assert_eq!(find(&fs, "throughput").severity, Severity::Unknown);
        // The rest of the report still judges.
        assert_eq!(find(&fs, "tcp_slow_start_after_idle").severity, Severity::Warn);
        // A completely empty host does not panic either.
        let empty = judge(&Facts { path: path(Rate::gbps(1), 1.0), ..Default::default() });
        assert!(empty.iter().any(|f| f.severity == Severity::Unknown));
    }

    #[test]
    fn no_path_means_no_buffer_verdict() {
        let fs = judge(&defaults());
        assert_eq!(find(&fs, "tcp_rmem").severity, Severity::Info);
        assert!(find(&fs, "tcp_rmem").fixes.is_empty());
        assert_eq!(find(&fs, "rto_min").severity, Severity::Info);
    }

    /// (sysctl, value, path, finding id, expected severity, expected fix value)
    type Case<'a> = (&'a str, &'a str, &'a PathSpec, &'a str, Severity, Option<&'a str>);

    #[test]
    fn table_of_single_settings() {
        // (sysctl, value, path, finding id, expected severity, expected fix value)
        let g1 = path(Rate::gbps(1), 100.0);
        let dc = path(Rate::gbps(10), 0.1);
        let tiny = path(Rate::mbps(10), 1.0); // BDP 1250 B, under one initial window
        let cases: &[Case] = &[
            ("net.ipv4.tcp_window_scaling", "0", &g1, "tcp_window_scaling", Severity::Critical, Some("1")),
            ("net.ipv4.tcp_window_scaling", "1", &g1, "tcp_window_scaling", Severity::Ok, None),
            ("net.ipv4.tcp_sack", "0", &g1, "tcp_sack", Severity::Warn, Some("1")),
            ("net.ipv4.tcp_timestamps", "0", &g1, "tcp_timestamps", Severity::Info, Some("1")),
            ("net.ipv4.tcp_no_metrics_save", "0", &g1, "tcp_no_metrics_save", Severity::Info, Some("1")),
            ("net.ipv4.tcp_no_metrics_save", "1", &g1, "tcp_no_metrics_save", Severity::Ok, None),
            ("net.ipv4.tcp_mtu_probing", "0", &g1, "tcp_mtu_probing", Severity::Info, Some("1")),
            ("net.ipv4.tcp_slow_start_after_idle", "0", &g1, "tcp_slow_start_after_idle", Severity::Ok, None),
            (
                "net.ipv4.tcp_slow_start_after_idle",
                "1",
                &dc,
                "tcp_slow_start_after_idle",
                Severity::Warn,
                Some("0"),
            ),
            (
                "net.ipv4.tcp_slow_start_after_idle",
                "1",
                &tiny,
                "tcp_slow_start_after_idle",
                Severity::Info,
                Some("0"),
            ),
            (
                "net.ipv4.tcp_congestion_control",
                "reno",
                &g1,
                "congestion_control",
                Severity::Warn,
                Some("cubic"),
            ),
            ("net.ipv4.tcp_congestion_control", "bbr", &g1, "congestion_control", Severity::Ok, None),
            (
                "net.core.netdev_max_backlog",
                "1000",
                &dc,
                "netdev_max_backlog",
                Severity::Info,
                Some("250000"),
            ),
            ("net.core.netdev_max_backlog", "1000", &g1, "netdev_max_backlog", Severity::Ok, None),
            ("net.ipv4.tcp_rto_min_us", "200000", &dc, "rto_min", Severity::Warn, Some("5000")),
            ("net.ipv4.tcp_rto_min_us", "5000", &dc, "rto_min", Severity::Ok, None),
            ("net.ipv4.tcp_rto_min_us", "200000", &g1, "rto_min", Severity::Ok, None),
        ];
        for (key, value, p, id, sev, fix) in cases {
            let mut f = defaults();
            f.path = (*p).clone();
            f.sysctls.insert(key.to_string(), Fact::Known(value.to_string()));
            let fs = judge(&f);
            let got = find(&fs, id);
            assert_eq!(got.severity, *sev, "{key}={value}: {}", got.summary);
            assert_eq!(sysctl_fix(got).map(|(_, v)| v), *fix, "{key}={value}");
        }
    }

    #[test]
    fn read_only_sysctls_become_host_advice() {
        let mut f = defaults();
        f.path = path(Rate::gbps(1), 100.0);
        f.readonly = vec!["net.core.rmem_max".into()];
        let fs = judge(&f);
        let r = find(&fs, "rmem_max");
        assert_eq!(sysctl_fix(r), None);
        assert_eq!(r.severity, Severity::Info, "nothing here can fix it");
        assert!(
            matches!(&r.fixes[0], Fix::Advice { command } if command.starts_with("sysctl -w net.core.rmem_max=25165824"))
        );
        assert!(
            r.fixes[0].command(Some("ns")).starts_with("sysctl -w"),
            "host-global advice is not wrapped in the namespace"
        );
        assert!(sysctl_fix(find(&fs, "tcp_rmem")).is_some());
    }

    #[test]
    fn measured_throughput_against_the_path_rate() {
        let mut f = defaults();
        f.path = path(Rate::gbps(1), 100.0);
        let m = |mbps| {
            Some(Fact::Known(crate::facts::Measured {
                goodput: Rate::mbps(mbps),
                duration_s: 3.0,
                retransmits: Some(0),
            }))
        };
        f.measured = m(240);
        let t = find(&judge(&f), "throughput").clone();
        assert_eq!(t.severity, Severity::Warn);
        assert!(t.summary.contains("24% of 1Gbit/s"), "{}", t.summary);
        f.measured = m(940);
        assert_eq!(find(&judge(&f), "throughput").severity, Severity::Ok);
    }

    #[test]
    fn window_scaling_off_caps_at_64k_per_rtt() {
        let mut f = defaults();
        f.path = path(Rate::gbps(1), 100.0);
        f.sysctls.insert("net.ipv4.tcp_window_scaling".into(), Fact::Known("0".into()));
        let w = find(&judge(&f), "tcp_window_scaling").clone();
        assert_eq!(w.cap, Some(Rate(5_242_800)));
    }

    #[test]
    fn reno_recovery_time_is_quantified() {
        let mut f = defaults();
        f.path = path(Rate::gbps(1), 100.0);
        f.sysctls.insert("net.ipv4.tcp_congestion_control".into(), Fact::Known("reno".into()));
        let r = find(&judge(&f), "congestion_control").clone();
        // 12.5 MB / 1448 = 8632 segments → 4316 RTTs of 100 ms.
        assert!(r.summary.contains("4316 round trips"), "{}", r.summary);
        assert!(r.summary.contains("431.6s"), "{}", r.summary);
    }

    #[test]
    fn rto_min_from_a_route_metric_wins_and_advice_names_the_route() {
        let mut f = defaults();
        f.path = path(Rate::gbps(10), 0.2);
        f.sysctls.remove("net.ipv4.tcp_rto_min_us");
        let fs = judge(&f);
        let r = find(&fs, "rto_min");
        assert_eq!(r.severity, Severity::Warn);
        assert_eq!(
            r.fixes,
            vec![Fix::Advice { command: "ip route change default via 10.0.0.1 dev eth0 rto_min 5ms".into() }]
        );
        let mut g = f.clone();
        if let Some(Fact::Known(routes)) = g.routes.as_mut() {
            routes[0].rto_min_ms = Some(5);
        }
        assert_eq!(find(&judge(&g), "rto_min").severity, Severity::Ok);
    }

    #[test]
    fn noqueue_interfaces_need_no_txqueuelen_and_unknown_offloads_say_so() {
        let mut f = defaults();
        f.path = path(Rate::gbps(1), 100.0);
        if let Some(Fact::Known(ifs)) = f.interfaces.as_mut() {
            ifs[0].qdisc = "noqueue".into();
            ifs[0].offloads = Fact::Unknown("ioctl failed".into());
        }
        let fs = judge(&f);
        assert_eq!(find(&fs, "txqueuelen:eth0").severity, Severity::Ok);
        assert_eq!(find(&fs, "offloads:eth0").severity, Severity::Unknown);
    }

    #[test]
    fn live_connection_limits() {
        let mut f = defaults();
        f.path = path(Rate::gbps(1), 100.0);
        let conn = |busy, rwnd, sndbuf| LiveConn {
            src: "10.0.0.2:40000".parse().unwrap(),
            dst: "10.0.0.9:5201".parse().unwrap(),
            congestion: Some("cubic".into()),
            cwnd: 4000,
            mss: 1448,
            srtt_us: 100_000,
            snd_wnd: None,
            delivery_rate_bps: None,
            busy_us: busy,
            rwnd_limited_us: rwnd,
            sndbuf_limited_us: sndbuf,
            total_retrans: 0,
        };
        f.live = vec![
            conn(Some(1_000_000), Some(800_000), Some(0)),
            conn(Some(1_000_000), Some(0), Some(500_000)),
            conn(Some(1_000_000), Some(10_000), Some(10_000)),
            conn(None, None, None),
        ];
        let fs: Vec<_> = judge(&f).into_iter().filter(|x| x.id.starts_with("live:")).collect();
        assert_eq!(fs.len(), 4);
        assert_eq!(fs[0].severity, Severity::Warn);
        assert!(fs[0].summary.contains("receiver's window 80%"), "{}", fs[0].summary);
        assert_eq!(fs[1].severity, Severity::Warn);
        assert_eq!(sysctl_fix(&fs[1]).map(|x| x.0), Some("net.ipv4.tcp_wmem"));
        assert_eq!(fs[2].severity, Severity::Ok);
        assert_eq!(fs[3].severity, Severity::Unknown);
        // 4000 × 1448 B per 100 ms = 463 Mbit/s = 46% of 1 Gbit/s.
        assert!((fs[2].share.unwrap() - 0.463).abs() < 0.001);
    }

    #[test]
    fn fix_commands_are_exact() {
        let s = Fix::Sysctl { key: "net.ipv4.tcp_rmem".into(), value: "4096 131072 26214400".into() };
        assert_eq!(s.command(None), "sysctl -w net.ipv4.tcp_rmem=\"4096 131072 26214400\"");
        assert_eq!(
            s.command(Some("lab")),
            "ip netns exec lab sysctl -w net.ipv4.tcp_rmem=\"4096 131072 26214400\""
        );
        let t = Fix::Txqueuelen { dev: "veth0".into(), value: 10000 };
        assert_eq!(t.command(Some("lab")), "ip -n lab link set dev veth0 txqueuelen 10000");
        let a = Fix::Advice { command: "ip route change default dev eth0 rto_min 5ms".into() };
        assert_eq!(a.command(Some("x")), "ip -n x route change default dev eth0 rto_min 5ms");
    }

    #[test]
    fn findings_round_trip_through_json() {
        let mut f = defaults();
        f.path = path(Rate::gbps(1), 100.0);
        let fs = judge(&f);
        let s = serde_json::to_string(&fs).unwrap();
        let back: Vec<Finding> = serde_json::from_str(&s).unwrap();
        assert_eq!(back, fs);
        let facts_back: Facts = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
        assert_eq!(facts_back, f);
    }
}
