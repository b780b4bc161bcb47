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

use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use tcpaccel_sys::diag::{DiagSocketConn, DumpRequest};

use crate::facts::{Fact, Facts, Interface, LiveConn, Measured, Offloads, PathSpec, Route, SYSCTLS};

/// Errors that stop collecting altogether.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("network namespace {0:?} not found (looked in /run/netns)")]
    NoNamespace(String),
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

/// Path of a sysctl under `/proc/sys`, refusing anything but `[a-z0-9_.-]`
/// so a tampered saved-state file cannot point elsewhere.
pub fn sysctl_path(key: &str) -> Option<String> {
    let ok = !key.is_empty()
        && !key.starts_with('.')
        && !key.contains("..")
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.' || c == '-');
    ok.then(|| format!("/proc/sys/{}", key.replace('.', "/")))
}

/// Reads one sysctl in the calling thread's namespace, whitespace collapsed.
pub fn read_sysctl(key: &str) -> Fact<String> {
    let Some(path) = sysctl_path(key) else {
        return Fact::Unknown(format!("invalid sysctl name {key:?}"));
    };
    match std::fs::read_to_string(&path) {
        Ok(s) => Fact::Known(s.split_whitespace().collect::<Vec<_>>().join(" ")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Fact::Unknown(format!(
            "{path} does not exist here (not in this kernel, or a host-only setting seen from a namespace)"
        )),
        Err(e) => Fact::Unknown(format!("{path}: {e}")),
    }
}

/// True when the sysctl's mode allows writing (root may still lack
/// CAP_NET_ADMIN; that is found out when applying).
fn writable(key: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    sysctl_path(key)
        .and_then(|p| std::fs::metadata(p).ok())
        .map(|m| m.permissions().mode() & 0o222 != 0)
        .unwrap_or(false)
}

fn ip_json(args: &[&str]) -> Result<serde_json::Value, String> {
    let out = Command::new("ip")
        .arg("-j")
        .args(args)
        .output()
        .map_err(|e| format!("running `ip -j {}`: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "`ip -j {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("`ip -j {}` printed unexpected JSON: {e}", args.join(" ")))
}

/// Parses `ip -j -d link show` output. Entries without a name are skipped.
pub fn parse_links(v: &serde_json::Value) -> Vec<(String, u32, u32, String, bool, bool)> {
    let mut out = Vec::new();
    for l in v.as_array().map(|a| a.as_slice()).unwrap_or(&[]) {
        let Some(name) = l.get("ifname").and_then(|x| x.as_str()) else { continue };
        let flags: Vec<&str> = l
            .get("flags")
            .and_then(|f| f.as_array())
            .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
            .unwrap_or_default();
        let num = |k: &str| l.get(k).and_then(|x| x.as_u64()).unwrap_or(0).min(u32::MAX as u64) as u32;
        out.push((
            name.to_string(),
            num("mtu"),
            num("txqlen"),
            l.get("qdisc").and_then(|x| x.as_str()).unwrap_or("unknown").to_string(),
            flags.contains(&"UP"),
            flags.contains(&"LOOPBACK"),
        ));
    }
    out
}

/// Parses `ip -j route show` output (metrics as iproute2 prints them:
/// `rto_min` in milliseconds, windows in segments).
pub fn parse_routes(v: &serde_json::Value) -> Vec<Route> {
    let mut out = Vec::new();
    for r in v.as_array().map(|a| a.as_slice()).unwrap_or(&[]) {
        let Some(dst) = r.get("dst").and_then(|x| x.as_str()) else { continue };
        let metric = |k: &str| {
            r.get("metrics")
                .and_then(|m| m.as_array())
                .and_then(|a| a.iter().find_map(|m| m.get(k).and_then(|x| x.as_u64())))
        };
        out.push(Route {
            dst: dst.to_string(),
            dev: r.get("dev").and_then(|x| x.as_str()).map(str::to_string),
            gateway: r.get("gateway").and_then(|x| x.as_str()).map(str::to_string),
            rto_min_ms: metric("rto_min"),
            initcwnd: metric("initcwnd"),
            initrwnd: metric("initrwnd"),
        });
    }
    out
}

fn interfaces() -> Fact<Vec<Interface>> {
    match ip_json(&["-d", "link", "show"]) {
        Err(e) => Fact::Unknown(e),
        Ok(v) => Fact::Known(
            parse_links(&v)
                .into_iter()
                .map(|(name, mtu, txqueuelen, qdisc, up, loopback)| {
                    let offloads = match tcpaccel_sys::ethtool::offloads(&name) {
                        Ok(o) => Fact::Known(Offloads {
                            tso: o.tso,
                            gso: o.gso,
                            gro: o.gro,
                            tx_checksum: o.tx_checksum,
                        }),
                        Err(e) => Fact::Unknown(e.to_string()),
                    };
                    Interface { name, mtu, txqueuelen, qdisc, up, loopback, offloads }
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

/// Median TCP handshake time to `target` over `n` attempts.
pub fn handshake_rtt(target: SocketAddr, n: usize, timeout: Duration) -> Result<Duration, String> {
    let mut times = Vec::with_capacity(n);
    let mut last_err = None;
    for _ in 0..n.max(1) {
        let t0 = Instant::now();
        match TcpStream::connect_timeout(&target, timeout) {
            Ok(s) => {
                times.push(t0.elapsed().as_secs_f64());
                drop(s);
            }
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

/// Collects everything in the calling thread's namespace.
pub fn collect_here(path: PathSpec, probe: &Probe) -> Facts {
    let mut facts = Facts { path, ..Default::default() };
    for key in SYSCTLS {
        let v = read_sysctl(key);
        if matches!(v, Fact::Known(_)) && !writable(key) {
            facts.readonly.push(key.to_string());
        }
        facts.sysctls.insert(key.to_string(), v);
    }
    facts.interfaces = Some(interfaces());
    facts.routes = Some(routes());
    if let Some(target) = probe.target {
        if facts.path.egress_dev.is_none() {
            facts.path.egress_dev = egress_dev(target);
        }
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

/// Collects in namespace `netns` (or here when `None`).
pub fn collect(netns: Option<&str>, path: PathSpec, probe: &Probe) -> Result<Facts, CollectError> {
    let Some(ns) = netns else { return Ok(collect_here(path, probe)) };
    if !tcpaccel_sys::netns::exists(ns) {
        return Err(CollectError::NoNamespace(ns.to_string()));
    }
    let probe = probe.clone();
    let mut facts =
        tcpaccel_sys::netns::run_in(ns, move || collect_here(path, &probe)).map_err(|e| match e {
            tcpaccel_sys::Error::NoNamespace { name } => CollectError::NoNamespace(name),
            e => CollectError::Enter { ns: ns.to_string(), source: e },
        })?;
    facts.netns = Some(ns.to_string());
    Ok(facts)
}

/// Facts for a namespace that could not be read: every fact unknown with
/// the same reason, so the report still prints what was asked.
pub fn unreadable(netns: Option<&str>, path: PathSpec, why: &str) -> Facts {
    let mut facts = Facts { netns: netns.map(str::to_string), path, ..Default::default() };
    for key in SYSCTLS {
        facts.sysctls.insert(key.to_string(), Fact::Unknown(why.to_string()));
    }
    facts.interfaces = Some(Fact::Unknown(why.to_string()));
    facts.routes = Some(Fact::Unknown(why.to_string()));
    facts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysctl_paths_stay_under_proc_sys() {
        assert_eq!(sysctl_path("net.ipv4.tcp_rmem").as_deref(), Some("/proc/sys/net/ipv4/tcp_rmem"));
        for bad in ["", "../etc/passwd", "net..x", ".net", "net/ipv4", "NET.x", "net.ipv4.tcp rmem"] {
            assert_eq!(sysctl_path(bad), None, "{bad:?}");
        }
        assert!(matches!(read_sysctl("net/../../etc"), Fact::Unknown(_)));
        assert!(
            matches!(read_sysctl("net.ipv4.no_such_sysctl_here"), Fact::Unknown(r) if r.contains("does not exist here"))
        );
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
        assert_eq!(l[1], ("veth0".into(), 1500, 500, "pfifo_fast".into(), true, false));
        assert!(l[0].5);
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
