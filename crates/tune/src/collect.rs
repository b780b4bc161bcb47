//! Reading the facts the doctor judges, from the calling thread's network
//! namespace or from a named one.
//!
//! What it is: sysctls from `/proc/sys` (which answers for the namespace of
//! the thread that opens it), interfaces and routes from `ip -j` (run from
//! that thread, so it inherits the namespace), offloads through the ethtool
//! ioctl, RTT by timed TCP handshakes, and live connections' limit counters
//! through sock_diag. Anything unreadable becomes an unknown [`Fact`] with
//! the reason; collecting itself only fails when the namespace is missing.
//!
//! What it is not: no judgement ([`crate::judge`]) and no writes
//! ([`crate::apply`]). `/sys/class/net` is not used: it shows the
//! namespace sysfs was mounted in, not the thread's.

use std::net::SocketAddr;
use std::time::Duration;

use tcpaccel_sys::diag::{DiagSocketConn, DumpRequest};

use crate::facts::{Fact, Facts, Interface, LiveConn, Measured, Offloads, PathSpec, Route, SYSCTLS};

/// Errors that stop collecting altogether: the namespace cannot be read at
/// all, so there is nothing to judge.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("network namespace {0:?} not found (looked in /run/netns)")]
    NoNamespace(String),
    /// Entering another namespace needs CAP_SYS_ADMIN (setns).
    #[error("entering network namespace {ns:?} needs root (CAP_SYS_ADMIN): {source}")]
    Privilege { ns: String, source: tcpaccel_sys::Error },
    #[error("entering network namespace {ns:?}: {source}")]
    Enter { ns: String, source: tcpaccel_sys::Error },
}

/// What to measure beyond the host settings.
#[derive(Debug, Clone, Default)]
pub struct Probe {
    /// Target whose RTT is measured by TCP handshakes and whose live
    /// connections are inspected.
    pub target: Option<SocketAddr>,
    /// Number of handshakes (the median is kept).
    pub handshakes: usize,
    /// Per-handshake timeout.
    pub timeout: Duration,
    /// Also send to a `tcpaccel recv` at the target for this long, and read
    /// the limit counters of that transfer's connection while it runs.
    pub bandwidth: Option<Duration>,
}

/// Reads one sysctl in the calling thread's namespace, whitespace
/// collapsed (`tcpaccel_sys::sysctl`, which refuses names outside
/// `/proc/sys`, so a tampered saved-state file cannot point elsewhere).
pub fn read_sysctl(key: &str) -> Fact<String> {
    match tcpaccel_sys::sysctl::read(key) {
        Ok(s) => Fact::Known(s.split_whitespace().collect::<Vec<_>>().join(" ")),
        Err(e) => Fact::Unknown(e.to_string()),
    }
}

/// True when the sysctl's mode allows writing (root may still lack
/// CAP_NET_ADMIN; that is found out when applying).
fn writable(key: &str) -> bool {
    tcpaccel_sys::sysctl::writable(key)
}

/// Whether this kernel has qdisc `kind` (built in, or a module it can
/// load): `tc qdisc add dev lo root KIND` in a throwaway namespace.
pub fn qdisc_available(kind: &str) -> Fact<bool> {
    let k = kind.to_string();
    match tcpaccel_sys::netns::run_in_fresh(move || {
        tcpaccel_sys::command::tc(&["qdisc", "add", "dev", "lo", "root", &k])
    }) {
        Err(e) => Fact::Unknown(format!("cannot try qdisc {kind} in a throwaway namespace: {e}")),
        Ok(Ok(_)) => Fact::Known(true),
        Ok(Err(e)) if e.to_string().contains("kind is unknown") => Fact::Known(false),
        Ok(Err(e)) => Fact::Unknown(format!("trying qdisc {kind}: {e}")),
    }
}

/// Whether `modprobe NAME` could load module `name`: listed in
/// `/lib/modules/RELEASE/modules.dep` or `modules.builtin`.
pub fn module_available(name: &str) -> Fact<bool> {
    let release = match tcpaccel_sys::sysctl::read("kernel.osrelease") {
        Ok(r) => r,
        Err(e) => return Fact::Unknown(e.to_string()),
    };
    let dir = std::path::Path::new("/lib/modules").join(&release);
    if !dir.exists() {
        return Fact::Known(false);
    }
    let file = format!("/{name}.ko");
    for list in ["modules.dep", "modules.builtin"] {
        match std::fs::read_to_string(dir.join(list)) {
            Ok(text) => {
                if text.lines().any(|l| l.split(':').next().is_some_and(|m| m.contains(&file))) {
                    return Fact::Known(true);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Fact::Unknown(format!("{}: {e}", dir.join(list).display())),
        }
    }
    Fact::Known(false)
}

/// `ip -j ARGS..` parsed as JSON.
pub(crate) fn ip_json(args: &[&str]) -> Result<serde_json::Value, String> {
    let argv: Vec<&str> = std::iter::once("-j").chain(args.iter().copied()).collect();
    let out = tcpaccel_sys::command::ip(&argv).map_err(|e| e.to_string())?;
    serde_json::from_str(&out).map_err(|e| format!("`ip -j {}` printed unexpected JSON: {e}", args.join(" ")))
}

/// One link as `ip -j -d link show` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub ifindex: u64,
    pub name: String,
    pub mtu: u32,
    pub txqueuelen: u32,
    pub qdisc: String,
    pub up: bool,
    pub loopback: bool,
}

/// Parses `ip -j -d link show` output. Entries without a name are skipped.
pub fn parse_links(v: &serde_json::Value) -> Vec<Link> {
    let mut out = Vec::new();
    for l in v.as_array().map(|a| a.as_slice()).unwrap_or(&[]) {
        let Some(name) = l.get("ifname").and_then(|x| x.as_str()) else { continue };
        let flags: Vec<&str> = l
            .get("flags")
            .and_then(|f| f.as_array())
            .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
            .unwrap_or_default();
        let num = |k: &str| l.get(k).and_then(|x| x.as_u64()).unwrap_or(0).min(u32::MAX as u64) as u32;
        out.push(Link {
            ifindex: l.get("ifindex").and_then(|x| x.as_u64()).unwrap_or(0),
            name: name.to_string(),
            mtu: num("mtu"),
            txqueuelen: num("txqlen"),
            qdisc: l.get("qdisc").and_then(|x| x.as_str()).unwrap_or("unknown").to_string(),
            up: flags.contains(&"UP"),
            loopback: flags.contains(&"LOOPBACK"),
        });
    }
    out
}

/// Parses `ip -j [-d] route show` or `route get fibmatch` output (metrics as
/// iproute2 prints them: `rto_min` in milliseconds, windows in segments).
pub fn parse_routes(v: &serde_json::Value) -> Vec<Route> {
    let mut out = Vec::new();
    for r in v.as_array().map(|a| a.as_slice()).unwrap_or(&[]) {
        let Some(dst) = r.get("dst").and_then(|x| x.as_str()) else { continue };
        let metric = |k: &str| {
            r.get("metrics")
                .and_then(|m| m.as_array())
                .and_then(|a| a.iter().find_map(|m| m.get(k).and_then(|x| x.as_u64())))
        };
        let text = |k: &str| r.get(k).and_then(|x| x.as_str()).map(str::to_string);
        out.push(Route {
            dst: dst.to_string(),
            kind: text("type").filter(|t| t != "unicast"),
            protocol: text("protocol"),
            scope: text("scope"),
            prefsrc: text("prefsrc"),
            dev: text("dev"),
            gateway: text("gateway"),
            rto_min_ms: metric("rto_min"),
            initcwnd: metric("initcwnd"),
            initrwnd: metric("initrwnd"),
        });
    }
    out
}

/// Where an interface's link speed is read: sysfs shows the namespace it was
/// mounted for, so it answers only for the doctor's own namespace; for a
/// named one `ip netns exec` mounts a sysfs of that namespace.
#[derive(Debug, Clone, Copy)]
enum SpeedFrom<'a> {
    OwnSysfs,
    Netns(&'a str),
}

/// Parses `/sys/class/net/DEV/speed` (Mbit/s; `-1` or an error when the
/// driver does not know).
fn parse_speed(s: &str) -> Option<u64> {
    s.trim().parse::<i64>().ok().filter(|&v| v > 0).map(|v| v as u64)
}

/// Link speed of `link`, checked against its ifindex so a sysfs of another
/// namespace (an interface of the same name there) is never believed.
fn link_speed(link: &Link, from: SpeedFrom) -> Option<u64> {
    let dir = format!("/sys/class/net/{}", link.name);
    let (index, speed) = match from {
        SpeedFrom::OwnSysfs => (
            std::fs::read_to_string(format!("{dir}/ifindex")).ok()?,
            std::fs::read_to_string(format!("{dir}/speed")).ok()?,
        ),
        SpeedFrom::Netns(ns) => {
            let text = tcpaccel_sys::command::ip(&[
                "netns",
                "exec",
                ns,
                "cat",
                &format!("{dir}/ifindex"),
                &format!("{dir}/speed"),
            ])
            .ok()?;
            let mut lines = text.lines();
            (lines.next()?.to_string(), lines.next()?.to_string())
        }
    };
    (index.trim().parse::<u64>().ok()? == link.ifindex).then(|| parse_speed(&speed)).flatten()
}

fn interfaces(speed_from: SpeedFrom) -> Fact<Vec<Interface>> {
    match ip_json(&["-d", "link", "show"]) {
        Err(e) => Fact::Unknown(e),
        Ok(v) => Fact::Known(
            parse_links(&v)
                .into_iter()
                .map(|link| {
                    // Only links that carry traffic: sysfs reads (and a
                    // process per link in another namespace) cost little then.
                    let speed_mbps =
                        if link.up && !link.loopback { link_speed(&link, speed_from) } else { None };
                    let Link { name, mtu, txqueuelen, qdisc, up, loopback, .. } = link;
                    let offloads = match tcpaccel_sys::ethtool::offloads(&name) {
                        Ok(o) => Fact::Known(Offloads {
                            tso: o.tso,
                            gso: o.gso,
                            gro: o.gro,
                            tx_checksum: o.tx_checksum,
                        }),
                        Err(e) => Fact::Unknown(e.to_string()),
                    };
                    Interface { name, mtu, txqueuelen, qdisc, up, loopback, offloads, speed_mbps }
                })
                .collect(),
        ),
    }
}

fn routes() -> Fact<Vec<Route>> {
    match ip_json(&["route", "show"]) {
        Err(e) => Fact::Unknown(e),
        Ok(v) => Fact::Known(parse_routes(&v)),
    }
}

fn egress_dev(target: SocketAddr) -> Option<String> {
    let v = ip_json(&["route", "get", &target.ip().to_string()]).ok()?;
    v.as_array()?.first()?.get("dev")?.as_str().map(str::to_string)
}

/// The route entry the kernel's lookup for `target` matches (`fibmatch`
/// prints the entry, prefix and type, instead of the per-address result).
fn target_route(target: SocketAddr) -> Fact<Route> {
    match ip_json(&["-d", "route", "get", "fibmatch", &target.ip().to_string()]) {
        Err(e) => Fact::Unknown(e),
        Ok(v) => match parse_routes(&v).into_iter().next() {
            Some(r) => Fact::Known(r),
            None => Fact::Unknown(format!("no route to {}", target.ip())),
        },
    }
}

/// Median TCP handshake time to a listening `target` over `n` attempts (a
/// failed attempt is left out; all failing is an error naming the last cause).
pub fn handshake_rtt(target: SocketAddr, n: usize, timeout: Duration) -> Result<Duration, String> {
    let mut times = Vec::with_capacity(n);
    let mut last_err = None;
    for _ in 0..n.max(1) {
        match tcpaccel_sys::probe::handshake(None, target, timeout).and_then(|h| h.accepted()) {
            Ok(rtt) => times.push(rtt.as_secs_f64()),
            Err(e) => last_err = Some(e),
        }
    }
    match tcpaccel_core::stats::median(&times) {
        Some(m) => Ok(Duration::from_secs_f64(m)),
        None => Err(format!(
            "{target} unreachable: {}",
            last_err.map(|e| e.to_string()).unwrap_or_else(|| "no attempt".into())
        )),
    }
}

/// Live connections to `target` (by destination address) with their limit counters.
pub fn live_connections(target: SocketAddr) -> Result<Vec<LiveConn>, String> {
    let mut d = DiagSocketConn::open().map_err(|e| e.to_string())?;
    let req = DumpRequest {
        port: Some(target.port()),
        port_side: tcpaccel_sys::diag::PortSide::Remote,
        states: tcpaccel_sys::diag::state::bit(tcpaccel_sys::diag::state::ESTABLISHED),
        ..Default::default()
    };
    let socks = d.dump(&req).map_err(|e| e.to_string())?;
    Ok(socks
        .iter()
        .filter(|s| s.dst == target)
        .filter_map(|s| {
            let t = s.tcp_info()?;
            Some(LiveConn {
                src: s.src,
                dst: s.dst,
                congestion: s.congestion(),
                cwnd: t.snd_cwnd,
                mss: t.snd_mss,
                srtt_us: t.rtt,
                snd_wnd: t.snd_wnd,
                delivery_rate_bps: t.delivery_rate.map(|r| r.saturating_mul(8)),
                busy_us: t.busy_time,
                rwnd_limited_us: t.rwnd_limited,
                sndbuf_limited_us: t.sndbuf_limited,
                total_retrans: t.total_retrans,
            })
        })
        .collect())
}

/// Collects everything in the calling thread's namespace (which must be the
/// namespace whose sysfs is mounted: the process's own).
pub fn collect_here(path: PathSpec, probe: &Probe) -> Facts {
    collect_in(path, probe, SpeedFrom::OwnSysfs)
}

fn collect_in(path: PathSpec, probe: &Probe, speed_from: SpeedFrom) -> Facts {
    let mut facts = Facts { path, ..Default::default() };
    for key in SYSCTLS {
        let v = read_sysctl(key);
        if matches!(v, Fact::Known(_)) && !writable(key) {
            facts.readonly.push(key.to_string());
        }
        facts.sysctls.insert(key.to_string(), v);
    }
    facts.qdiscs.insert("fq".into(), qdisc_available("fq"));
    for m in ["tcp_cubic", "tcp_bbr"] {
        facts.modules.insert(m.into(), module_available(m));
    }
    facts.interfaces = Some(interfaces(speed_from));
    facts.routes = Some(routes());
    if let Some(target) = probe.target {
        if facts.path.egress_dev.is_none() {
            facts.path.egress_dev = egress_dev(target);
        }
        facts.target_route = Some(target_route(target));
        match handshake_rtt(target, probe.handshakes.max(1), probe.timeout) {
            Ok(rtt) => {
                facts.target = Some(Fact::Known(format!("{target} answered")));
                if facts.path.rtt.is_none() {
                    facts.path.rtt = Some(rtt);
                    facts.path.rtt_source =
                        Some(format!("median of {} TCP handshakes to {target}", probe.handshakes.max(1)));
                }
            }
            Err(e) => facts.target = Some(Fact::Unknown(e)),
        }
        let reachable = matches!(facts.target, Some(Fact::Known(_)));
        let transfer = match probe.bandwidth {
            Some(d) if reachable => Some(start_transfer(target, d)),
            Some(_) => {
                facts.measured = Some(Fact::Unknown("target unreachable".into()));
                None
            }
            None => None,
        };
        if let Some((d, _)) = &transfer {
            // Read the counters late in the transfer, when they say the most.
            std::thread::sleep(d.mul_f64(0.8));
        }
        match live_connections(target) {
            Ok(l) => facts.live = l,
            Err(e) => tracing::warn!("reading live connections to {target}: {e}"),
        }
        if let Some((_, handle)) = transfer {
            facts.measured = Some(match handle.join() {
                Ok(Ok(m)) => Fact::Known(m),
                Ok(Err(e)) => Fact::Unknown(e),
                Err(_) => Fact::Unknown("the measuring thread panicked".into()),
            });
        }
    }
    facts
}

type Transfer = (Duration, std::thread::JoinHandle<Result<Measured, String>>);

/// Starts a timed upload to a `tcpaccel recv` at `target` on a thread of
/// its own (created from this thread, so in the same namespace).
fn start_transfer(target: SocketAddr, d: Duration) -> Transfer {
    let handle = std::thread::spawn(move || {
        let cfg = tcpaccel_traffic::SendConfig {
            volume: tcpaccel_traffic::Volume::Duration(d),
            interval: None,
            connect_timeout: Duration::from_secs(2),
            receipt_timeout: Duration::from_secs(10),
            ..tcpaccel_traffic::SendConfig::new(target)
        };
        tcpaccel_traffic::run_send(cfg, |_| {})
            .map(|s| Measured {
                goodput: tcpaccel_core::units::Rate(s.goodput_bps),
                duration_s: s.duration_s,
                retransmits: s.retransmits,
            })
            .map_err(|e| format!("no bandwidth measurement (is `tcpaccel recv` listening at {target}?): {e}"))
    });
    (d, handle)
}

/// Collects in namespace `netns` (or here when `None`). Fails, rather than
/// returning a report of unknowns, when the namespace cannot be entered.
pub fn collect(netns: Option<&str>, path: PathSpec, probe: &Probe) -> Result<Facts, CollectError> {
    let Some(ns) = netns else {
        let mut facts = collect_here(path, probe);
        // Run inside a namespace (`ip netns exec`, `tcpaccel net exec`),
        // the host-global sysctls are hidden here; they apply all the same,
        // so they are read in the initial namespace, as with --netns. Where
        // that cannot be entered (no CAP_SYS_ADMIN) they stay unknown.
        let absent: Vec<&'static str> =
            SYSCTLS.iter().copied().filter(|k| !tcpaccel_sys::sysctl::exists(k)).collect();
        if !absent.is_empty() {
            let keys = absent.clone();
            if let Ok(read) = tcpaccel_sys::netns::run_in_initial(move || {
                keys.iter().map(|k| (*k, read_sysctl(k))).collect::<Vec<_>>()
            }) {
                add_host_only(&mut facts, read);
            }
        }
        return Ok(facts);
    };
    if !tcpaccel_sys::netns::exists(ns) {
        return Err(CollectError::NoNamespace(ns.to_string()));
    }
    let probe = probe.clone();
    let name = ns.to_string();
    let (mut facts, absent) = tcpaccel_sys::netns::run_in(ns, move || {
        let facts = collect_in(path, &probe, SpeedFrom::Netns(&name));
        // Sysctls that do not exist in a non-initial namespace are
        // host-global ones (netdev_max_backlog, tcp_mem).
        let absent: Vec<&'static str> =
            SYSCTLS.iter().copied().filter(|k| !tcpaccel_sys::sysctl::exists(k)).collect();
        (facts, absent)
    })
    .map_err(|e| match e {
        tcpaccel_sys::Error::NoNamespace { name } => CollectError::NoNamespace(name),
        e @ tcpaccel_sys::Error::Privilege { .. } => {
            CollectError::Privilege { ns: ns.to_string(), source: e }
        }
        e => CollectError::Enter { ns: ns.to_string(), source: e },
    })?;
    add_host_only(&mut facts, absent.into_iter().map(|k| (k, read_sysctl(k))).collect());
    facts.netns = Some(ns.to_string());
    Ok(facts)
}

/// Host-global sysctls absent from the judged namespace, with their values
/// read where they exist (the host). They apply to the namespace all the
/// same; they are marked read-only so the judge advises the host instead of
/// planning a change it cannot make in the namespace.
fn add_host_only(facts: &mut Facts, read: Vec<(&'static str, Fact<String>)>) {
    for (key, value) in read {
        facts.host_only.push(key.to_string());
        if let v @ Fact::Known(_) = value {
            facts.sysctls.insert(key.to_string(), v);
            if !facts.readonly.iter().any(|k| k == key) {
                facts.readonly.push(key.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;
    use std::time::Instant;

    #[test]
    fn sysctl_reads_stay_under_proc_sys() {
        for bad in ["", "../etc/passwd", "net..x", ".net", "net/ipv4", "NET.x", "net.ipv4.tcp rmem"] {
            assert!(
                matches!(read_sysctl(bad), Fact::Unknown(r) if r.contains("invalid sysctl name")),
                "{bad:?}"
            );
        }
        assert!(
            matches!(read_sysctl("net.ipv4.no_such_sysctl_here"), Fact::Unknown(r) if r.contains("no such sysctl"))
        );
    }

    /// Root only: the qdisc probe tells a kind the kernel has from one it
    /// does not, in a throwaway namespace.
    #[test]
    fn root_qdisc_probe_tells_kinds_apart() {
        tcpaccel_sys::testing::require_root();
        assert_eq!(qdisc_available("pfifo"), Fact::Known(true));
        assert_eq!(qdisc_available("nosuchqdisc"), Fact::Known(false));
    }

    #[test]
    fn parses_ip_json() {
        let links: serde_json::Value = serde_json::from_str(
            r#"[{"ifindex":1,"ifname":"lo","flags":["LOOPBACK","UP","LOWER_UP"],"mtu":65536,"qdisc":"noqueue","txqlen":1000},
                {"ifname":"veth0","flags":["BROADCAST","UP"],"mtu":1500,"qdisc":"pfifo_fast","txqlen":500},
                {"noname":true}]"#,
        )
        .unwrap();
        let l = parse_links(&links);
        assert_eq!(l.len(), 2);
        assert_eq!(
            l[1],
            Link {
                ifindex: 0,
                name: "veth0".into(),
                mtu: 1500,
                txqueuelen: 500,
                qdisc: "pfifo_fast".into(),
                up: true,
                loopback: false
            }
        );
        assert!(l[0].loopback);
        assert_eq!(l[0].ifindex, 1);
        let routes: serde_json::Value = serde_json::from_str(
            r#"[{"dst":"default","gateway":"192.0.2.1","dev":"eth0","flags":[]},
                {"dst":"10.9.0.0/24","dev":"lo","metrics":[{"initcwnd":20,"rto_min":20}]}]"#,
        )
        .unwrap();
        let r = parse_routes(&routes);
        assert_eq!(r[0].gateway.as_deref(), Some("192.0.2.1"));
        assert_eq!((r[1].rto_min_ms, r[1].initcwnd, r[1].initrwnd), (Some(20), Some(20), None));
        assert!(parse_routes(&serde_json::json!({"not": "a list"})).is_empty());
    }

    /// Issue 14 item 13: the target's own route, with type and attributes.
    #[test]
    fn target_route_is_the_matched_entry() {
        let v: serde_json::Value = serde_json::from_str(
            r#"[{"type":"local","dst":"127.0.0.1","dev":"lo","table":"main","protocol":"kernel","scope":"host","prefsrc":"127.0.0.1","flags":[]}]"#,
        )
        .unwrap();
        let r = &parse_routes(&v)[0];
        assert_eq!((r.kind.as_deref(), r.dev.as_deref()), (Some("local"), Some("lo")));
        assert_eq!((r.protocol.as_deref(), r.scope.as_deref()), (Some("kernel"), Some("host")));
        match target_route("127.0.0.1:9".parse().unwrap()) {
            Fact::Known(r) => {
                assert_eq!(r.kind.as_deref(), Some("local"), "{r:?}");
                assert_eq!(r.dev.as_deref(), Some("lo"));
            }
            other => panic!("loopback route: {other:?}"),
        }
        assert_eq!(parse_speed("10000\n"), Some(10_000));
        assert_eq!(parse_speed("-1\n"), None);
        assert_eq!(parse_speed("garbage"), None);
    }

    #[test]
    fn collects_this_host_without_failing() {
        let f = collect_here(PathSpec::default(), &Probe::default());
        assert!(matches!(f.sysctl("net.ipv4.tcp_rmem"), Fact::Known(_)));
        assert!(matches!(f.sysctl_triple("net.ipv4.tcp_rmem"), Fact::Known(_)));
        match f.interfaces {
            Some(Fact::Known(l)) => assert!(l.iter().any(|i| i.loopback)),
            other => panic!("interfaces: {other:?}"),
        }
    }

    #[test]
    fn unreachable_target_is_reported_and_the_rest_collected() {
        // A closed port on loopback refuses at once.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let probe = Probe {
            target: Some(addr),
            handshakes: 3,
            timeout: Duration::from_millis(500),
            bandwidth: Some(Duration::from_secs(1)),
        };
        let f = collect_here(PathSpec::default(), &probe);
        assert!(matches!(&f.target, Some(Fact::Unknown(r)) if r.contains("unreachable")), "{:?}", f.target);
        assert!(f.path.rtt.is_none());
        assert!(matches!(&f.measured, Some(Fact::Unknown(_))));
        assert!(matches!(f.sysctl("net.ipv4.tcp_sack"), Fact::Known(_)));
    }

    #[test]
    fn bandwidth_against_a_tcpaccel_recv_and_its_limits() {
        let recv =
            tcpaccel_traffic::spawn_recv(tcpaccel_traffic::RecvConfig::new("127.0.0.1:0".parse().unwrap()))
                .expect("start a tcpaccel recv");
        let probe = Probe {
            target: Some(recv.local_addr()),
            handshakes: 2,
            timeout: Duration::from_secs(1),
            bandwidth: Some(Duration::from_millis(500)),
        };
        let f = collect_here(PathSpec::default(), &probe);
        match &f.measured {
            Some(Fact::Known(m)) => assert!(m.goodput.0 > 1_000_000, "{m:?}"),
            other => panic!("measured: {other:?}"),
        }
        assert!(f.live.iter().any(|c| c.busy_us.unwrap_or(0) > 0), "{:?}", f.live);
        recv.stop();
    }

    /// Issue 14 item 15: the doctor's RTT probes against a `tcpaccel recv`
    /// are counted there as empty connections, not as errors.
    #[test]
    fn handshake_probes_are_not_errors_at_a_receiver() {
        let recv =
            tcpaccel_traffic::spawn_recv(tcpaccel_traffic::RecvConfig::new("127.0.0.1:0".parse().unwrap()))
                .expect("start a tcpaccel recv");
        handshake_rtt(recv.local_addr(), 3, Duration::from_secs(1)).expect("handshakes");
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = 0;
        while seen < 3 && Instant::now() < deadline {
            if let tcpaccel_traffic::Event::Conn(_) = recv.next_event(Duration::from_millis(200)) {
                seen += 1;
            }
        }
        let s = recv.stop();
        assert_eq!((s.connections, s.empty, s.errors), (3, 3, 0), "{:?}", s.conns);
    }

    #[test]
    fn handshake_rtt_and_live_connection_on_loopback() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let keep = TcpStream::connect(addr).unwrap();
        let (_srv, _) = l.accept().unwrap();
        let rtt = handshake_rtt(addr, 3, Duration::from_secs(1)).unwrap();
        assert!(rtt < Duration::from_millis(500), "{rtt:?}");
        let live = live_connections(addr).unwrap();
        // A probe's socket may still be closing when the dump runs: look for ours.
        let ours = keep.local_addr().unwrap();
        let c = live.iter().find(|c| c.src == ours).unwrap_or_else(|| panic!("{ours} not in {live:?}"));
        assert!(c.cwnd > 0);
    }

    #[test]
    fn missing_namespace_is_an_error_not_a_panic() {
        let e =
            collect(Some("tcpaccel-doctor-no-such-ns"), PathSpec::default(), &Probe::default()).unwrap_err();
        assert!(matches!(e, CollectError::NoNamespace(_)));
    }
}
