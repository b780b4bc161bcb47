//! The doctor's judgement: a pure function from [`Facts`] to [`Finding`]s.
//!
//! What it is: one check per setting, each producing exactly one finding
//! (ok, info, warn, critical, or unknown when the fact could not be read),
//! with what the setting limits, by how much on this path, and the exact
//! command that fixes it. The sizing rules come from [HPC-TCP] (socket
//! buffers of at least 2× the bandwidth-delay product, no slow start after
//! idle for intermittent senders, no route metric cache for reproducible
//! runs, a lower minimum RTO in low-RTT clusters); the interface queue is
//! sized from the link's own speed; where ESnet fasterdata's general-host
//! values ([`crate::fasterdata`]) differ from the single-stream rule, the
//! finding says so.
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
/// The default `txqueuelen` of Ethernet devices.
const TXQUEUE_DEFAULT: u64 = 1_000;
/// Interface queue ceiling: fasterdata's value for 10G and faster NICs
/// ([`crate::fasterdata::TXQUEUELEN_10G`]).
const TXQUEUE_CEILING: u64 = crate::fasterdata::TXQUEUELEN_10G;
/// How long a full interface queue takes to drain at line rate, which is
/// what sizes it: the Ethernet default of 1000 packets of 1500 B is 12 ms at
/// 1 Gbit/s, and fasterdata's 10000 for 10G NICs is the same 12 ms. Longer
/// only adds delay under load; the path's BDP does not matter here, since
/// the bottleneck's queue is elsewhere unless this link is the bottleneck.
const TXQUEUE_DRAIN: Duration = Duration::from_millis(12);
/// `tcp_mem` counts pages; 4 KiB on x86-64 and the usual arm64 kernels.
const PAGE: u64 = 4096;
/// Segment size assumed when converting windows to packets (1500-byte MTU).
const MSS: u64 = 1448;
/// Linux's initial congestion window in segments (RFC 6928, `TCP_INIT_CWND`).
const INITIAL_WINDOW: u64 = 10;

/// Buffer size the path needs: 2× BDP ([HPC-TCP]: "socket buffers at least
/// bandwidth × RTT; 2× BDP recommended"), rounded up to a MiB and kept
/// within what an int sysctl accepts.
pub fn buffer_need(bdp: u64) -> u64 {
    (2 * bdp).div_ceil(MIB).saturating_mul(MIB).clamp(MIB, SYSCTL_INT_MAX)
}

/// The receive window the kernel offers from a receive buffer of `buffer`
/// bytes: about half. Linux ≥ 6.6 advertises `space × scaling_ratio / 256`
/// (include/net/tcp.h `__tcp_win_from_space`, `TCP_RMEM_TO_WIN_SCALE` 8),
/// with `scaling_ratio` starting at `TCP_DEFAULT_SCALING_RATIO` = 128, i.e.
/// 50% ("Assume a 50% default for skb->len/skb->truesize ratio"), and then
/// following skb->len / skb->truesize of the segments received
/// (`tcp_measure_rcv_mss`, net/ipv4/tcp_input.c); the rest pays for
/// sk_buff overhead. Before 6.6 `tcp_adv_win_scale` = 1 gave the same half.
/// This is why the 2× BDP rule exists: a buffer of 2× BDP gives a window of
/// one BDP. The measured ratio depends on the driver's receive buffers:
/// on this project's 6.18 kernel a 4 MB tcp_rmem gave rcv_ssthresh 3.75 MB
/// over a veth pair (ratio 0.89) and 4.13 MB on loopback (0.98), while NIC
/// drivers that back each 1500-byte frame with 2-4 KB stay near or below
/// half. Half is the planning figure the kernel itself starts from; a
/// buffer below one BDP cannot fit at any ratio.
pub fn receive_window(buffer: u64) -> u64 {
    buffer / 2
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
            "{r} × {} ({}) → BDP {}; buffers should hold ≥ {} (2× BDP, [HPC-TCP])",
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
    // namespace, or one the namespace does not have at all) cannot be
    // applied here: it becomes advice for the host, without the namespace
    // prefix (the key may not even exist inside).
    let global = |key: &str| facts.readonly.iter().chain(&facts.host_only).any(|k| k == key);
    let note = |key: &str| {
        if facts.host_only.iter().any(|k| k == key) {
            "host-global, absent in this namespace"
        } else {
            "host-global, read-only in this namespace"
        }
    };
    for f in &mut out {
        let mut host_only = !f.fixes.is_empty();
        let mut where_ = "";
        for fix in &mut f.fixes {
            match fix {
                Fix::Sysctl { key, value } if global(key) => {
                    let v = if value.contains(' ') { format!("\"{value}\"") } else { value.clone() };
                    where_ = note(key);
                    *fix =
                        Fix::Advice { command: format!("sysctl -w {key}={v}  # {where_}: run on the host") };
                }
                Fix::Advice { command } if advised_key(command).is_some_and(global) => {
                    let key = advised_key(command).unwrap_or_default();
                    where_ = note(key);
                    *command = format!("{command}  # {where_}: run on the host");
                }
                _ => host_only = false,
            }
        }
        // Nothing in this namespace can change it: inform, do not fail the verdict.
        if host_only && f.severity > Severity::Info {
            f.severity = Severity::Info;
            f.summary.push_str(&format!(" ({where_}: settable only on the host)"));
        }
    }
    out
}

/// The key of an advised `sysctl -w KEY=VALUE` command.
fn advised_key(command: &str) -> Option<&str> {
    command.strip_prefix("sysctl -w ")?.split('=').next()
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
    out.push(buffer(
        "tcp_rmem",
        "net.ipv4.tcp_rmem",
        "receive window (autotuning ceiling)",
        Side::Receive,
        facts,
    ));
    out.push(buffer_max("rmem_max", "net.core.rmem_max", "SO_RCVBUF", facts));
    out.push(buffer("tcp_wmem", "net.ipv4.tcp_wmem", "send window (unacknowledged data)", Side::Send, facts));
    out.push(buffer_max("wmem_max", "net.core.wmem_max", "SO_SNDBUF", facts));
    out.push(tcp_mem(facts));
    out.push(congestion_control(facts));
    out.push(slow_start_after_idle(facts));
    out.push(switch_on(
        facts,
        "tcp_no_metrics_save",
        "net.ipv4.tcp_no_metrics_save",
        Severity::Info,
        "reproducibility",
        "the kernel caches ssthresh/RTT per destination, so a connection after a lossy one starts in congestion avoidance; runs are not reproducible ([HPC-TCP])",
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

/// The overall verdict of a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Every finding was checked and is ok (or only informative).
    Healthy,
    /// Nothing is known to be wrong, but some facts could not be read, so
    /// health cannot be claimed.
    Unknown,
    /// At least one finding is at warn or worse.
    Unhealthy,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Healthy => "healthy",
            Verdict::Unknown => "unknown (some facts could not be read)",
            Verdict::Unhealthy => "unhealthy",
        }
    }
}

/// The verdict: unhealthy when anything is at warn or worse, unknown when
/// anything could not be checked, healthy only when every finding was
/// checked and none is at warn or worse.
pub fn verdict(findings: &[Finding]) -> Verdict {
    if findings.iter().any(|f| f.severity >= Severity::Warn) {
        Verdict::Unhealthy
    } else if findings.iter().any(|f| f.severity == Severity::Unknown) {
        Verdict::Unknown
    } else {
        Verdict::Healthy
    }
}

/// True only for [`Verdict::Healthy`].
pub fn healthy(findings: &[Finding]) -> bool {
    verdict(findings) == Verdict::Healthy
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
                        "measured {} over {:.1} s{retr} (give --rate to judge it against the path; `tcpaccel compare --target HOST:PORT` tries pacing, BBR and buffer fixes on it)",
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

/// Which buffer a check is about: the receive buffer offers only about half
/// of itself as window ([`receive_window`]); the send buffer holds the
/// unacknowledged data itself (the kernel budgets it at twice the
/// congestion window's memory, `tcp_sndbuf_expand` in net/ipv4/tcp_input.c,
/// hence 2× BDP there too, but in flight it can use nearly all of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Receive,
    Send,
}

impl Side {
    fn window(self, buffer: u64) -> u64 {
        match self {
            Side::Receive => receive_window(buffer),
            Side::Send => buffer,
        }
    }
    fn how(self) -> &'static str {
        match self {
            Side::Receive => {
                "the kernel offers about half of it as receive window (skb overhead, at its default ratio)"
            }
            Side::Send => "it holds the unacknowledged data",
        }
    }
}

/// Parallel streams that fill a path of `bdp` bytes with `window` each.
fn streams_to_fill(bdp: u64, window: u64) -> u64 {
    bdp.div_ceil(window.max(1))
}

/// Autotuning ceilings (`tcp_rmem`/`tcp_wmem` max field) against 2× BDP.
fn buffer(id: &str, key: &str, limits: &str, side: Side, facts: &Facts) -> Finding {
    let v = match facts.sysctl_triple(key) {
        Fact::Known(v) => v,
        Fact::Unknown(why) => return unknown(id, key, &why, limits),
    };
    let max = v[2];
    let window = side.window(max);
    let path = &facts.path;
    let (Some(bdp), Some(rtt), Some(rate)) = (path.bdp(), path.rtt, path.rate) else {
        let mut f =
            Finding::new(id, Severity::Info, format!("{id} max {} (path unknown: not judged)", Bytes(max)))
                .limits(limits);
        if let Some(rtt) = path.rtt {
            if let Some(cap) = window_cap(window, rtt) {
                f.summary = format!(
                    "{id} max {} → window ≤ {} → at most {cap} at {}",
                    Bytes(max),
                    Bytes(window),
                    format_duration(rtt)
                );
                f = f.capped(cap, None);
            }
        }
        return f;
    };
    if max >= 2 * bdp {
        return Finding::new(
            id,
            Severity::Ok,
            format!("{id} max {} ≥ {} (2× BDP)", Bytes(max), Bytes(2 * bdp)),
        )
        .limits(limits);
    }
    let need = buffer_need(bdp);
    let cap = window_cap(window, rtt).unwrap_or(Rate(0));
    let share = pct(cap.0 as f64 / rate.0.max(1) as f64);
    let single = format!("{} {} {}", v[0], v[1], need);
    let fd = crate::fasterdata::buffers(rate, rtt);
    if let Some(fd) = fd.filter(|fd| max >= fd.autotune_max) {
        // A deliberate general-host value, not a mistake: say what it means
        // for one stream and how many fill the path, and leave the choice.
        return Finding::new(
            id,
            Severity::Info,
            format!(
                "{id} max {} meets fasterdata's general-host value ({} for {}), sized for parallel streams and bounded memory; \
                 one stream needs 2× BDP = {} here ({}): with this value one stream gets at most {cap} ({share}), \
                 {} parallel streams fill the path",
                Bytes(max),
                Bytes(fd.autotune_max),
                fd.class,
                Bytes(2 * bdp),
                side.how(),
                streams_to_fill(bdp, window)
            ),
        )
        .limits(limits)
        .capped(cap, Some(rate))
        .fix(Fix::Advice { command: format!("sysctl -w {key}=\"{single}\"  # for single-stream transfers") });
    }
    // Below one BDP no overhead ratio can make it fit; between one and two
    // BDPs it fits only if the kernel measures a better ratio than its
    // default (receive) or nothing queues behind the window (send).
    let sev = if max < bdp { Severity::Critical } else { Severity::Warn };
    let mut summary = format!(
        "{id} max {}: {} → window ≤ {} → at most {cap} at {}, {share} of {rate}",
        Bytes(max),
        side.how(),
        Bytes(window),
        format_duration(rtt),
    );
    if sev == Severity::Warn {
        summary.push_str(&match side {
            Side::Receive => format!(
                " (one BDP fits only if the connection's measured skb->len/truesize ratio reaches {}; the kernel starts from 50%)",
                pct(bdp as f64 / max as f64)
            ),
            Side::Send => {
                " (the window fits one BDP, but no data can be queued behind it while it is in flight, hence 2× BDP)"
                    .to_string()
            }
        });
    }
    if let Some(fd) = fd {
        summary.push_str(&format!(
            "; also below fasterdata's general-host value ({} for {})",
            Bytes(fd.autotune_max),
            fd.class
        ));
    }
    Finding::new(id, sev, summary)
        .limits(limits)
        .capped(cap, Some(rate))
        .fix(Fix::Sysctl { key: key.into(), value: single })
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
    // The kernel doubles an SO_RCVBUF/SO_SNDBUF request (sock_setsockopt,
    // net/core/sock.c) for overhead, and a receive buffer offers about half
    // as window (see `receive_window`): a request of `max` yields a window
    // of about `max`.
    let cap = window_cap(max, rtt).unwrap_or(Rate(0));
    let fd = facts.path.rate.and_then(|r| crate::fasterdata::buffers(r, rtt));
    if let Some(fd) = fd.filter(|fd| max >= fd.core_max) {
        return Finding::new(
            id,
            Severity::Info,
            format!(
                "{id} {} meets fasterdata's general-host value ({} for {}); an application that sets {opt} for one stream on this path needs {} (2× BDP): with this value it gets at most {cap} at {}",
                Bytes(max),
                Bytes(fd.core_max),
                fd.class,
                Bytes(need),
                format_duration(rtt)
            ),
        )
        .limits(&limits)
        .capped(cap, facts.path.rate)
        .fix(Fix::Advice { command: format!("sysctl -w {key}={need}  # for single-stream transfers") });
    }
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

/// `tcp_mem` (pages, for all TCP sockets together: below `low` no
/// pressure, above `pressure` the kernel trims every socket's buffers, at
/// `high` it refuses memory) against one socket at its buffer maxima. If
/// one stream's buffers alone cross the pressure mark, the autotuning
/// maxima above are never reached.
fn tcp_mem(facts: &Facts) -> Finding {
    let key = "net.ipv4.tcp_mem";
    let id = "tcp_mem";
    let limits = "memory of all TCP sockets";
    let v = match facts.sysctl_triple(key) {
        Fact::Known(v) => v,
        Fact::Unknown(why) => return unknown(id, key, &why, limits),
    };
    // Per-socket maxima: the recommended ones when the path is known,
    // otherwise the configured autotuning maxima.
    let (per_socket, what) = match facts.path.bdp() {
        Some(bdp) => {
            (2 * buffer_need(bdp), "the recommended tcp_rmem + tcp_wmem maxima (2× BDP each)".to_string())
        }
        None => match (facts.sysctl_triple("net.ipv4.tcp_rmem"), facts.sysctl_triple("net.ipv4.tcp_wmem")) {
            (Fact::Known(r), Fact::Known(w)) => (r[2] + w[2], "the tcp_rmem + tcp_wmem maxima".to_string()),
            _ => {
                return Finding::new(
                    id,
                    Severity::Info,
                    format!("tcp_mem {} {} {} pages (buffer maxima unknown: not judged)", v[0], v[1], v[2]),
                )
                .limits(limits)
            }
        },
    };
    let (pressure, high) = (v[1].saturating_mul(PAGE), v[2].saturating_mul(PAGE));
    let pages = per_socket.div_ceil(PAGE);
    let fix = Fix::Sysctl {
        key: key.into(),
        value: format!("{} {} {}", v[0], v[1].max(pages), v[2].max(2 * pages)),
    };
    let base = format!(
        "tcp_mem {} {} {} pages: memory pressure above {}, hard limit {}; one socket at {what} uses {}",
        v[0],
        v[1],
        v[2],
        Bytes(pressure),
        Bytes(high),
        Bytes(per_socket)
    );
    if high < per_socket {
        Finding::new(id, Severity::Warn, format!("{base}: a single stream cannot reach its buffer maxima"))
            .limits(limits)
            .fix(fix)
    } else if pressure < per_socket {
        Finding::new(
            id,
            Severity::Warn,
            format!("{base}: one stream alone crosses the pressure mark, where the kernel trims buffers below their maxima"),
        )
        .limits(limits)
        .fix(fix)
    } else {
        Finding::new(
            id,
            Severity::Ok,
            format!("{base}: room for {} such sockets before memory pressure", pressure / per_socket.max(1)),
        )
        .limits(limits)
    }
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
    // A module is advised only where modprobe can find it.
    let loadable = ["tcp_cubic", "tcp_bbr"]
        .into_iter()
        .find(|m| !matches!(facts.modules.get(*m), Some(Fact::Known(false))));
    match (better, loadable) {
        (Some(c), _) => f.fix(Fix::Sysctl { key: key.into(), value: c.into() }),
        (None, Some(m)) => f.fix(Fix::Advice { command: format!("modprobe {m}") }),
        (None, None) => {
            f.summary.push_str(&format!(
                "; no better algorithm is available (available: {avail_s}) and this kernel has no tcp_cubic or tcp_bbr module to load: use a kernel with CONFIG_TCP_CONG_CUBIC"
            ));
            f
        }
    }
}

fn slow_start_after_idle(facts: &Facts) -> Finding {
    let key = "net.ipv4.tcp_slow_start_after_idle";
    let id = "tcp_slow_start_after_idle";
    let limits = "intermittent senders";
    match facts.sysctl_u64(key) {
        Fact::Unknown(why) => unknown(id, key, &why, limits),
        Fact::Known(0) => Finding::new(id, Severity::Ok, "no slow start after idle").limits(limits),
        Fact::Known(_) => {
            let mut s = "after an idle period longer than the RTO, the window restarts from the initial window ([HPC-TCP]: 10 MB bursts every 2 s never reach the link rate)".to_string();
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
    match facts.path.rate.and_then(crate::fasterdata::backlog) {
        Some((want, class)) if v < want => Finding::new(
            id,
            Severity::Info,
            format!("netdev_max_backlog {v}: above 1 Gbit/s receive bursts can overflow the per-CPU backlog (fasterdata for {class}: {want})"),
        )
        .limits(limits)
        .fix(Fix::Sysctl { key: key.into(), value: want.to_string() }),
        _ => Finding::new(id, Severity::Ok, format!("netdev_max_backlog {v}")).limits(limits),
    }
}

fn default_qdisc(facts: &Facts) -> Finding {
    let key = "net.core.default_qdisc";
    let id = "default_qdisc";
    let limits = "pacing";
    let fq = facts.qdiscs.get("fq").cloned().unwrap_or_else(|| Fact::Unknown("not tried".into()));
    match (facts.sysctl(key), fq) {
        (Fact::Unknown(why), _) => unknown(id, key, &why, limits),
        (Fact::Known(q), _) if q == "fq" => {
            Finding::new(id, Severity::Ok, "default qdisc fq (pacing in the qdisc)").limits(limits)
        }
        // Advising fq where the kernel has none would only fail.
        (Fact::Known(q), Fact::Known(false)) => Finding::new(
            id,
            Severity::Ok,
            format!("default qdisc {q}: this kernel has no fq qdisc (neither built in nor loadable), so TCP paces itself with a timer (Linux ≥ 4.13); nothing to change"),
        )
        .limits(limits),
        (Fact::Known(q), Fact::Known(true)) => Finding::new(
            id,
            Severity::Info,
            format!("default qdisc {q}: TCP paces itself with a timer (Linux ≥ 4.13); fasterdata prefers fq, which this kernel has"),
        )
        .limits(limits)
        .fix(Fix::Advice { command: "sysctl -w net.core.default_qdisc=fq".into() }),
        (Fact::Known(q), Fact::Unknown(why)) => Finding::new(
            id,
            Severity::Info,
            format!("default qdisc {q}: TCP paces itself with a timer (Linux ≥ 4.13); fasterdata prefers fq, but whether this kernel has it is unknown ({why})"),
        )
        .limits(limits)
        .fix(Fix::Advice { command: "sysctl -w net.core.default_qdisc=fq  # only if `tc qdisc add dev lo root fq` works in a test namespace".into() }),
    }
}

/// The route the path takes: with a target, the one the kernel's lookup
/// for it matched (and none if that lookup failed: advising another route
/// would change traffic the target never uses); without one, the egress
/// device's route, else the default route.
fn path_route<'a>(facts: &'a Facts, routes: &'a [Route]) -> Option<&'a Route> {
    if let Some(t) = &facts.target_route {
        return t.known();
    }
    let dev = facts.path.egress_dev.as_deref();
    routes
        .iter()
        .find(|r| dev.is_some() && r.dev.as_deref() == dev && r.dst != "default")
        .or_else(|| routes.iter().find(|r| r.dst == "default"))
        .or_else(|| routes.first())
}

/// `ip route change` for `r` with one metric set. It replaces the whole
/// entry, so the type, table, protocol, scope and source are restated.
fn route_change(r: &Route, metric: &str) -> String {
    let mut cmd = String::from("ip route change ");
    if let Some(k) = &r.kind {
        cmd.push_str(k);
        cmd.push(' ');
    }
    cmd.push_str(&r.dst);
    if let Some(g) = &r.gateway {
        cmd.push_str(&format!(" via {g}"));
    }
    if let Some(d) = &r.dev {
        cmd.push_str(&format!(" dev {d}"));
    }
    // Local and broadcast routes live in table `local`.
    if matches!(r.kind.as_deref(), Some("local") | Some("broadcast")) {
        cmd.push_str(" table local");
    }
    for (word, v) in [("proto", &r.protocol), ("scope", &r.scope), ("src", &r.prefsrc)] {
        if let Some(v) = v {
            cmd.push_str(&format!(" {word} {v}"));
        }
    }
    cmd.push(' ');
    cmd.push_str(metric);
    cmd
}

/// Names a route for findings (`route default`, `local route 127.0.0.1`).
fn route_name(r: &Route) -> String {
    match &r.kind {
        Some(k) => format!("{k} route {}", r.dst),
        None => format!("route {}", r.dst),
    }
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
            format!("{} rto_min", route.map(route_name).unwrap_or_else(|| "route".into())),
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
            "minimum RTO {} ({source}) is {ratio:.0}× the {} RTT: a lost last packet of a message waits ≥ {} ([HPC-TCP], all-to-all MPI); {} is enough here",
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
        f = f.fix(Fix::Advice { command: route_change(r, &format!("rto_min {}ms", want.as_millis())) });
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
    let Some(egress) = egress_dev(facts) else {
        return vec![Finding::new(
            "interfaces",
            Severity::Info,
            "no egress interface known (no --target and no default route): queue lengths and offloads not judged",
        )];
    };
    // Only the interface the path leaves by: other interfaces carry other
    // traffic, and changing their queues would not help this path.
    let found: Vec<Finding> =
        list.iter().filter(|i| i.name == egress).flat_map(|i| interface(facts, i)).collect();
    if found.is_empty() {
        return vec![Finding::new(
            "interfaces",
            Severity::Unknown,
            format!(
                "egress interface {egress} not among the interfaces read; its queue and offloads not judged"
            ),
        )];
    }
    found
}

/// The interface the path leaves by: the target's route's, else the
/// default route's.
fn egress_dev(facts: &Facts) -> Option<String> {
    if let Some(d) = &facts.path.egress_dev {
        return Some(d.clone());
    }
    if let Some(t) = &facts.target_route {
        return t.known().and_then(|r| r.dev.clone());
    }
    match &facts.routes {
        Some(Fact::Known(routes)) => routes.iter().find(|r| r.dst == "default").and_then(|r| r.dev.clone()),
        _ => None,
    }
}

/// How long `packets` of `mtu` bytes take to leave at `rate`.
fn drain_time(packets: u64, mtu: u32, rate: Rate) -> Duration {
    let bits = packets as u128 * u128::from(mtu) * 8;
    Duration::from_nanos((bits * 1_000_000_000 / u128::from(rate.0.max(1))).min(u64::MAX as u128) as u64)
}

/// Interface queue for a link at `rate`: [`TXQUEUE_DRAIN`] of full-size
/// packets, within the Ethernet default and fasterdata's 10G value.
pub fn txqueuelen_need(rate: Rate, mtu: u32) -> u64 {
    let pkts = (u128::from(rate.0) * TXQUEUE_DRAIN.as_nanos())
        .div_ceil(u128::from(mtu.max(576)) * 8 * 1_000_000_000);
    (pkts.min(u64::MAX as u128) as u64).clamp(TXQUEUE_DEFAULT, TXQUEUE_CEILING)
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
    } else {
        let speed = match (i.speed_mbps, facts.path.rate) {
            (Some(m), _) => Some((Rate(m.saturating_mul(1_000_000)), "link speed")),
            (None, Some(r)) => Some((r, "path rate; link speed unknown")),
            (None, None) => None,
        };
        let q = u64::from(i.txqueuelen);
        match speed {
            None => out.push(
                Finding::new(
                    &id,
                    Severity::Info,
                    format!("{}: txqueuelen {q} (link speed and path rate unknown: not judged)", i.name),
                )
                .limits(limits),
            ),
            Some((rate, source)) => {
                let need = txqueuelen_need(rate, i.mtu);
                let held = format_duration(drain_time(q, i.mtu, rate));
                let want = format_duration(drain_time(need, i.mtu, rate));
                if q < need {
                    out.push(
                        Finding::new(
                            &id,
                            Severity::Warn,
                            format!(
                                "{}: txqueuelen {q} packets drain in {held} at {rate} ({source}); a line-rate burst overflows the {} queue and TCP takes the drops as congestion; {need} packets = {want}",
                                i.name, i.qdisc
                            ),
                        )
                        .limits(limits)
                        .fix(Fix::Txqueuelen { dev: i.name.clone(), value: need as u32 }),
                    );
                } else if q > 4 * need {
                    out.push(
                        Finding::new(
                            &id,
                            Severity::Info,
                            format!(
                                "{}: txqueuelen {q} packets hold {held} at {rate} ({source}): a full queue adds that much delay; {need} packets ({want}) absorb bursts",
                                i.name
                            ),
                        )
                        .limits("queueing delay")
                        .fix(Fix::Advice { command: format!("ip link set dev {} txqueuelen {need}", i.name) }),
                    );
                } else {
                    out.push(
                        Finding::new(
                            &id,
                            Severity::Ok,
                            format!("{}: txqueuelen {q} packets = {held} at {rate} ({source})", i.name),
                        )
                        .limits(limits),
                    );
                }
            }
        }
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
                    format!("{}: MTU {} at {r}: jumbo frames cut per-packet cost ([HPC-TCP]: 949 → 991 Mbit/s on GbE) if every hop supports them", i.name, i.mtu),
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
    let name = route_name(r);
    Some(match r.initcwnd {
        Some(w) if w < 10 => Finding::new(
            id,
            Severity::Warn,
            format!("{name} sets initcwnd {w} (< the default 10): short transfers need extra round trips"),
        )
        .limits("short transfers"),
        Some(w) => Finding::new(id, Severity::Ok, format!("{name} initcwnd {w}")),
        None => Finding::new(id, Severity::Ok, format!("{name} initcwnd default (10)")),
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
            // A host with 24 GB of RAM.
            ("net.ipv4.tcp_mem", "287898 383867 575796"),
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
                speed_mbps: None,
            }])),
            routes: Some(Fact::Known(vec![Route {
                dst: "default".into(),
                dev: Some("eth0".into()),
                gateway: Some("10.0.0.1".into()),
                ..Default::default()
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
        // Half of 6 291 456 B is window: 3 145 728 B per 100 ms = 252 Mbit/s.
        assert_eq!(rmem.cap, Some(Rate(251_658_240)));
        assert!((rmem.share.unwrap() - 0.252).abs() < 0.001);
        assert!(rmem.summary.contains("25%"), "{}", rmem.summary);
        // 2 × 12.5 MB = 25 MB, rounded up to whole MiB: 24 MiB = 25 165 824.
        assert_eq!(sysctl_fix(rmem), Some(("net.ipv4.tcp_rmem", "4096 131072 25165824")));
        let rmax = find(&fs, "rmem_max");
        assert_eq!(rmax.severity, Severity::Warn);
        assert_eq!(sysctl_fix(rmax), Some(("net.core.rmem_max", "25165824")));
        assert_eq!(find(&fs, "tcp_wmem").severity, Severity::Critical);
        assert_eq!(find(&fs, "tcp_slow_start_after_idle").severity, Severity::Warn);
        // 1000 packets drain in 12 ms at 1 Gbit/s: the default is right.
        assert_eq!(find(&fs, "txqueuelen:eth0").severity, Severity::Ok);
        assert!(!healthy(&fs));
        assert_eq!(verdict(&fs), Verdict::Unhealthy);
    }

    #[test]
    fn buffers_between_one_and_two_bdp() {
        let mut f = defaults();
        f.path = path(Rate::mbps(500), 100.0); // BDP 6.25 MB
        f.sysctls.insert("net.ipv4.tcp_rmem".into(), Fact::Known("4096 131072 8000000".into()));
        f.sysctls.insert("net.ipv4.tcp_wmem".into(), Fact::Known("4096 16384 8000000".into()));
        let fs = judge(&f);
        // Receive: a 4 MB window at the default ratio (64%). Send: it holds
        // the BDP, with no room to queue behind it. Both warn; below one BDP
        // both are critical.
        let r = find(&fs, "tcp_rmem");
        assert_eq!(r.severity, Severity::Warn);
        assert!(r.summary.contains("64% of 500Mbit/s"), "{}", r.summary);
        assert_eq!(find(&fs, "tcp_wmem").severity, Severity::Warn);
        f.sysctls.insert("net.ipv4.tcp_rmem".into(), Fact::Known("4096 131072 6000000".into()));
        assert_eq!(find(&judge(&f), "tcp_rmem").severity, Severity::Critical);
    }

    /// Issue 14 item 10: the receive window is about half the buffer, so a
    /// 16 MB tcp_rmem at 1 Gbit/s × 100 ms (BDP 12.5 MB) caps at 67%, not 134%.
    #[test]
    fn receive_window_is_half_the_buffer() {
        let mut f = defaults();
        f.path = path(Rate::gbps(1), 100.0);
        f.sysctls.insert("net.ipv4.tcp_rmem".into(), Fact::Known("4096 131072 16777216".into()));
        let fs = judge(&f);
        let r = find(&fs, "tcp_rmem");
        assert_eq!(r.cap, Some(Rate(671_088_640)));
        assert!((r.share.unwrap() - 0.671).abs() < 0.001, "{:?}", r.share);
        assert!(r.summary.contains("67%") && !r.summary.contains("134%"), "{}", r.summary);
        // It holds one BDP only if the measured ratio reaches 12.5 / 16.8 = 75%.
        assert!(r.summary.contains("reaches 75%"), "{}", r.summary);
        assert_eq!(r.severity, Severity::Warn);
        assert_eq!(sysctl_fix(r), Some(("net.ipv4.tcp_rmem", "4096 131072 25165824")));
        // Exactly 2× BDP is enough: the window then holds one BDP.
        f.sysctls.insert("net.ipv4.tcp_rmem".into(), Fact::Known("4096 131072 25000000".into()));
        assert_eq!(find(&judge(&f), "tcp_rmem").severity, Severity::Ok);
        assert_eq!(receive_window(25_000_000), 12_500_000);
    }

    /// Issue 14 item 9: facts that could not be read never make a healthy verdict.
    #[test]
    fn unknown_facts_are_not_healthy() {
        let ok = |id: &str, sev| Finding::new(id, sev, "x");
        let fine = vec![ok("a", Severity::Ok), ok("b", Severity::Info)];
        assert_eq!(verdict(&fine), Verdict::Healthy);
        assert!(healthy(&fine));
        let mut some_unknown = fine.clone();
        some_unknown.push(ok("c", Severity::Unknown));
        assert_eq!(verdict(&some_unknown), Verdict::Unknown);
        assert!(!healthy(&some_unknown));
        some_unknown.push(ok("d", Severity::Warn));
        assert_eq!(verdict(&some_unknown), Verdict::Unhealthy);
        // A host whose every sysctl was unreadable is not healthy.
        let mut f = Facts::default();
        for k in crate::facts::SYSCTLS {
            f.sysctls.insert(k.to_string(), Fact::Unknown("permission denied".into()));
        }
        f.interfaces = Some(Fact::Unknown("permission denied".into()));
        f.routes = Some(Fact::Unknown("permission denied".into()));
        let fs = judge(&f);
        assert!(fs.iter().all(|x| x.severity < Severity::Warn));
        assert_eq!(verdict(&fs), Verdict::Unknown);
    }

    fn with_nic(f: &mut Facts, speed_mbps: Option<u64>, txqueuelen: u32) {
        if let Some(Fact::Known(ifs)) = f.interfaces.as_mut() {
            ifs[0].speed_mbps = speed_mbps;
            ifs[0].txqueuelen = txqueuelen;
        }
    }

    /// Issue 14 item 11: the interface queue is sized from the link's speed
    /// (12 ms of line rate), not from the path's BDP.
    #[test]
    fn txqueuelen_follows_the_link_speed() {
        let mut f = defaults();
        f.path = path(Rate::gbps(1), 100.0);
        // 1 Gbit/s NIC: the default 1000 packets is right, even on a 100 ms path.
        with_nic(&mut f, Some(1000), 1000);
        let t = find(&judge(&f), "txqueuelen:eth0").clone();
        assert_eq!(t.severity, Severity::Ok, "{}", t.summary);
        assert!(t.fixes.is_empty());
        // The old fix, 8928 packets on a 1 Gbit/s NIC, is 107 ms of queue: said so.
        with_nic(&mut f, Some(1000), 8928);
        let t = find(&judge(&f), "txqueuelen:eth0").clone();
        assert_eq!(t.severity, Severity::Info);
        assert!(t.summary.contains("107.136ms"), "{}", t.summary);
        assert!(!t.fixes[0].automatic());
        // 10 Gbit/s NIC with the default: 10000, and no BDP packet count in the text.
        f.path = path(Rate::gbps(10), 100.0);
        with_nic(&mut f, Some(10_000), 1000);
        let t = find(&judge(&f), "txqueuelen:eth0").clone();
        assert_eq!(t.severity, Severity::Warn);
        assert_eq!(t.fixes, vec![Fix::Txqueuelen { dev: "eth0".into(), value: 10_000 }]);
        assert!(t.summary.contains("1.2ms") && t.summary.contains("12ms"), "{}", t.summary);
        assert!(!t.summary.contains("89285") && !t.summary.contains("BDP"), "{}", t.summary);
        // Unknown link speed: sized for the path rate, and said so.
        with_nic(&mut f, None, 1000);
        let t = find(&judge(&f), "txqueuelen:eth0").clone();
        assert!(t.summary.contains("link speed unknown"), "{}", t.summary);
        assert_eq!(txqueuelen_need(Rate::mbps(100), 1500), 1000);
        assert_eq!(txqueuelen_need(Rate::gbps(100), 1500), 10_000);
    }

    /// Issue 14 item 11: only the interface the path leaves by is judged and fixed.
    #[test]
    fn only_the_egress_interface_is_judged() {
        let mut f = defaults();
        f.path = path(Rate::gbps(10), 100.0);
        if let Some(Fact::Known(ifs)) = f.interfaces.as_mut() {
            let mut other = ifs[0].clone();
            other.name = "eth1".into();
            ifs.push(other);
        }
        // No target: the default route's device (eth0).
        let fs = judge(&f);
        assert!(fs.iter().any(|x| x.id == "txqueuelen:eth0"));
        assert!(!fs.iter().any(|x| x.id.ends_with(":eth1")), "{fs:#?}");
        // With a target routed through eth1, only eth1.
        f.target_route = Some(Fact::Known(Route {
            dst: "10.9.0.0/24".into(),
            dev: Some("eth1".into()),
            ..Default::default()
        }));
        let fs = judge(&f);
        assert!(fs.iter().any(|x| x.id == "txqueuelen:eth1"));
        assert!(!fs.iter().any(|x| x.id.ends_with(":eth0")), "{fs:#?}");
        let plan = crate::apply::plan(&fs);
        assert_eq!(plan.txqueuelen, vec![("eth1".to_string(), 10_000)]);
        // No route at all: nothing is changed.
        f.target_route = None;
        f.routes = Some(Fact::Known(Vec::new()));
        let fs = judge(&f);
        assert_eq!(find(&fs, "interfaces").severity, Severity::Info);
        assert!(crate::apply::plan(&fs).txqueuelen.is_empty());
    }

    /// Issue 14 item 11: fasterdata's backlog is 30000 for 10G hosts, 250000 above.
    #[test]
    fn backlog_follows_fasterdata_per_host_class() {
        let mut f = defaults();
        f.path = path(Rate::gbps(10), 10.0);
        let b = find(&judge(&f), "netdev_max_backlog").clone();
        assert_eq!(sysctl_fix(&b), Some(("net.core.netdev_max_backlog", "30000")));
        assert!(b.summary.contains("30000") && !b.summary.contains("250000"), "{}", b.summary);
        f.path = path(Rate::gbps(40), 10.0);
        let b = find(&judge(&f), "netdev_max_backlog").clone();
        assert_eq!(sysctl_fix(&b), Some(("net.core.netdev_max_backlog", "250000")));
    }

    /// Issue 14 item 12: fasterdata's 32 MB at 10G ≤ 100 ms is a general-host
    /// value for parallel streams, not a critical mistake.
    #[test]
    fn fasterdata_general_host_values_are_explained_not_condemned() {
        let mut f = defaults();
        f.path = path(Rate::gbps(10), 100.0); // BDP 125 MB
        f.sysctls.insert("net.ipv4.tcp_rmem".into(), Fact::Known("4096 87380 33554432".into()));
        f.sysctls.insert("net.ipv4.tcp_wmem".into(), Fact::Known("4096 65536 33554432".into()));
        f.sysctls.insert("net.core.rmem_max".into(), Fact::Known("67108864".into()));
        let fs = judge(&f);
        for id in ["tcp_rmem", "tcp_wmem", "rmem_max"] {
            let r = find(&fs, id);
            assert_eq!(r.severity, Severity::Info, "{id}: {}", r.summary);
            assert!(r.summary.contains("fasterdata"), "{}", r.summary);
            assert!(r.fixes.iter().all(|x| !x.automatic()), "{id}: --apply must not override it");
        }
        let r = find(&fs, "tcp_rmem");
        // 16 MB of window per stream on a 125 MB path: 8 streams.
        assert!(r.summary.contains("8 parallel streams"), "{}", r.summary);
        assert!(find(&fs, "tcp_wmem").summary.contains("4 parallel streams"));
        // Below fasterdata's value too: still critical, and the finding says both.
        f.sysctls.insert("net.ipv4.tcp_rmem".into(), Fact::Known("4096 87380 6291456".into()));
        let r = find(&judge(&f), "tcp_rmem").clone();
        assert_eq!(r.severity, Severity::Critical);
        assert!(r.summary.contains("below fasterdata's general-host value (32MiB"), "{}", r.summary);
    }

    /// Issue 14 item 12: tcp_mem against one socket at its recommended maxima.
    #[test]
    fn tcp_mem_against_per_socket_maxima() {
        let mut f = defaults();
        f.path = path(Rate::gbps(1), 100.0); // per socket: 2 × 24 MiB
        assert_eq!(find(&judge(&f), "tcp_mem").severity, Severity::Ok);
        // Pressure at 40 MB: one stream at its maxima (50 MB) crosses it.
        f.sysctls.insert("net.ipv4.tcp_mem".into(), Fact::Known("5000 10000 20000".into()));
        let m = find(&judge(&f), "tcp_mem").clone();
        assert_eq!(m.severity, Severity::Warn);
        assert!(m.summary.contains("pressure mark"), "{}", m.summary);
        // 48 MiB = 12288 pages: pressure raised to that, hard limit to twice.
        assert_eq!(sysctl_fix(&m), Some(("net.ipv4.tcp_mem", "5000 12288 24576")));
        f.sysctls.insert("net.ipv4.tcp_mem".into(), Fact::Known("1000 2000 3000".into()));
        let m = find(&judge(&f), "tcp_mem").clone();
        assert!(m.summary.contains("cannot reach its buffer maxima"), "{}", m.summary);
        f.sysctls.insert("net.ipv4.tcp_mem".into(), Fact::Unknown("no such file".into()));
        assert_eq!(find(&judge(&f), "tcp_mem").severity, Severity::Unknown);
    }

    /// Issue 14 item 13: with a target, only the route the target uses is advised.
    #[test]
    fn rto_min_advice_names_the_targets_route() {
        let mut f = defaults();
        f.path = path(Rate::gbps(10), 0.05);
        f.path.egress_dev = Some("lo".into());
        f.target_route = Some(Fact::Known(Route {
            dst: "127.0.0.1".into(),
            kind: Some("local".into()),
            dev: Some("lo".into()),
            protocol: Some("kernel".into()),
            scope: Some("host".into()),
            prefsrc: Some("127.0.0.1".into()),
            ..Default::default()
        }));
        let fs = judge(&f);
        let r = find(&fs, "rto_min");
        let advice: Vec<String> =
            r.fixes.iter().filter(|x| !x.automatic()).map(|x| x.command(None)).collect();
        assert_eq!(
            advice,
            vec!["ip route change local 127.0.0.1 dev lo table local proto kernel scope host src 127.0.0.1 rto_min 5ms"]
        );
        assert!(
            fs.iter().all(|x| x.fixes.iter().all(|c| !c.command(None).contains("route change default"))),
            "{fs:#?}"
        );
        // The target's route could not be looked up: no route is advised at all.
        f.target_route = Some(Fact::Unknown("no route".into()));
        let r = find(&judge(&f), "rto_min").clone();
        assert!(r.fixes.iter().all(|x| x.automatic()), "{:?}", r.fixes);
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
            ("net.core.netdev_max_backlog", "1000", &dc, "netdev_max_backlog", Severity::Info, Some("30000")),
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

    /// Issue 26 item 13: fq is advised only where the kernel has it, and
    /// the finding says so when it has none.
    #[test]
    fn fq_is_advised_only_where_the_kernel_has_it() {
        let mut f = defaults();
        f.qdiscs.insert("fq".into(), Fact::Known(false));
        let q = find(&judge(&f), "default_qdisc").clone();
        assert!(q.fixes.is_empty(), "{:?}", q.fixes);
        assert_eq!(q.severity, Severity::Ok);
        assert!(q.summary.contains("no fq qdisc"), "{}", q.summary);
        f.qdiscs.insert("fq".into(), Fact::Known(true));
        let q = find(&judge(&f), "default_qdisc").clone();
        assert!(
            matches!(&q.fixes[..], [Fix::Advice { command }] if command == "sysctl -w net.core.default_qdisc=fq")
        );
        f.qdiscs.clear();
        let q = find(&judge(&f), "default_qdisc").clone();
        assert!(q.summary.contains("unknown"), "{}", q.summary);
    }

    #[test]
    fn a_module_is_advised_only_where_modprobe_can_find_it() {
        let mut f = defaults();
        f.path = path(Rate::gbps(1), 100.0);
        f.sysctls.insert("net.ipv4.tcp_congestion_control".into(), Fact::Known("reno".into()));
        f.sysctls.insert("net.ipv4.tcp_available_congestion_control".into(), Fact::Known("reno".into()));
        f.modules.insert("tcp_cubic".into(), Fact::Known(false));
        f.modules.insert("tcp_bbr".into(), Fact::Known(true));
        let c = find(&judge(&f), "congestion_control").clone();
        assert!(
            matches!(&c.fixes[..], [Fix::Advice { command }] if command == "modprobe tcp_bbr"),
            "{:?}",
            c.fixes
        );
        f.modules.insert("tcp_bbr".into(), Fact::Known(false));
        let c = find(&judge(&f), "congestion_control").clone();
        assert!(c.fixes.is_empty(), "{:?}", c.fixes);
        assert!(c.summary.contains("no tcp_cubic or tcp_bbr module"), "{}", c.summary);
    }

    /// Issue 28: in a namespace, advice about a key the namespace does not
    /// have is for the host, not wrapped in `ip netns exec`.
    #[test]
    fn advice_on_a_key_absent_in_the_namespace_is_for_the_host() {
        let mut f = defaults();
        f.netns = Some("ns1".into());
        f.qdiscs.insert("fq".into(), Fact::Known(true));
        f.host_only = vec!["net.core.default_qdisc".into(), "net.core.netdev_max_backlog".into()];
        let q = find(&judge(&f), "default_qdisc").clone();
        let cmd = q.fixes[0].command(Some("ns1"));
        assert!(cmd.starts_with("sysctl -w net.core.default_qdisc=fq"), "{cmd}");
        assert!(cmd.contains("absent in this namespace"), "{cmd}");
        // A read-only mirror (rmem_max) is named as such.
        f.path = path(Rate::gbps(1), 100.0);
        f.readonly = vec!["net.core.rmem_max".into()];
        let r = find(&judge(&f), "rmem_max").clone();
        assert!(r.fixes[0].command(Some("ns1")).contains("read-only in this namespace"), "{:?}", r.fixes);
        assert!(r.summary.contains("read-only in this namespace"), "{}", r.summary);
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
