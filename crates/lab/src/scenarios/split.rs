//! `lab run split`: [SplitTCP]'s split-TCP relay chains. A client and an HTTP
//! server (nginx) are joined by a chain of emulated links whose RTTs add up
//! to 50 ms; relays on the hosts at the joints split the one TCP connection
//! into one connection per segment. Relays are tcpaccel (`tcpaccel relay`,
//! chained SOCKS5 with `--next`), Dante (`danted`, chained with `route`
//! statements) and Squid (HTTP proxies chained with `cache_peer … parent` and
//! `never_direct`, no caching); the client is curl, as in the paper.
//!
//! Variants: `direct` (one segment, no relay), `KIND/N` (N segments of equal
//! RTT, N−1 relays) and `KIND/A-B` (two segments of A and B ms RTT). Kind
//! `tcpaccel-early` is tcpaccel with `--early-reply` (the first relay
//! answers CONNECT before the chain is up), shown beside the exact
//! `tcpaccel`, whose SOCKS replies are the chain's own. Every
//! process that opens TCP sockets (curl, nginx, the relays) runs under
//! `tcpaccel run --cc cubic`, the per-socket CUBIC of the paper (namespaces
//! inherit the host's bbr); the buffers are the paper's CentOS 6 autotuning
//! with a 4 MB maximum, or this kernel's defaults (`buffers=kernel`).
//!
//! After each repeat the scenario writes, per relay kind, the fit
//! T_n = T·(a + b·n) over the medians so far and the per-relay overhead as
//! notes. It does not install its peers: `scripts/install-split-peers.sh`
//! does, and the scenario refuses to start (naming that script) when a peer
//! it needs is missing. With `transport=raw` the file is replaced by a
//! traffic-tool transfer of the same size through `tcpaccel relay --forward`
//! chains (tcpaccel and direct only: Dante and Squid have no plain forward).

use crate::runner::claims::{Claim, Figure, Goal, Measure, GOAL_BENCH, GOAL_DIRECTION};
use crate::runner::records::{MetricSpec, Published};
use crate::runner::scenario::{ParamSpec, Params, RunCtx, Scenario, Testbed};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use tcpaccel_core::rng::Rng;
use tcpaccel_core::stats::{linear_fit, median};
use tcpaccel_core::units::{parse_duration, QueueLimit};
use tcpaccel_net::{Cidr, EndSpec, LinkSpec, Network, Topology, TopologyBuilder};
use tcpaccel_traffic::{run_send, spawn_recv, RecvConfig, SendConfig, Volume};

pub struct Split;

const SOCKS_PORT: u16 = 1080;
const SQUID_PORT: u16 = 3128;
const HTTP_PORT: u16 = 8080;
const RAW_PORT: u16 = 5201;
/// The paper's guests ran CentOS 6.4: autotuning on, 4 MB maximum buffers.
const CENTOS6_RMEM: &str = "4096 87380";
const CENTOS6_WMEM: &str = "4096 16384";
const SOURCE: &str = "[SplitTCP], tables 4-8";

/// Who relays at the joints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Direct,
    Tcpaccel,
    /// tcpaccel relays with `--early-reply`.
    TcpaccelEarly,
    Dante,
    Squid,
}

impl Kind {
    pub fn parse(s: &str) -> Result<Kind> {
        match s {
            "direct" => Ok(Kind::Direct),
            "tcpaccel" => Ok(Kind::Tcpaccel),
            "tcpaccel-early" => Ok(Kind::TcpaccelEarly),
            "dante" => Ok(Kind::Dante),
            "squid" => Ok(Kind::Squid),
            _ => bail!("unknown relay kind {s:?}; valid: tcpaccel, tcpaccel-early, dante, squid"),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Kind::Direct => "direct",
            Kind::Tcpaccel => "tcpaccel",
            Kind::TcpaccelEarly => "tcpaccel-early",
            Kind::Dante => "dante",
            Kind::Squid => "squid",
        }
    }
}

/// One variant: relay kind and the RTT of each segment, client side first.
#[derive(Debug, Clone, PartialEq)]
pub struct Chain {
    pub kind: Kind,
    pub rtts: Vec<Duration>,
    /// Whether the split was asked for as uneven (`A-B`) rather than `N` equal segments.
    pub uneven: bool,
}

impl Chain {
    /// Parses a variant name against the total RTT.
    pub fn parse(name: &str, total: Duration) -> Result<Chain> {
        if name == "direct" {
            return Ok(Chain { kind: Kind::Direct, rtts: vec![total], uneven: false });
        }
        let (kind, split) =
            name.split_once('/').with_context(|| format!("variant {name:?}: expected KIND/N"))?;
        let kind = Kind::parse(kind)?;
        if kind == Kind::Direct {
            bail!("variant {name:?}: direct has no segments to give");
        }
        if let Some((a, b)) = split.split_once('-') {
            let ms = |v: &str| -> Result<Duration> {
                let x: f64 =
                    v.trim().parse().with_context(|| format!("variant {name:?}: {v:?} is not ms"))?;
                if !(x > 0.0 && x < 10_000.0) {
                    bail!("variant {name:?}: segment RTT {x} ms out of range");
                }
                Ok(Duration::from_secs_f64(x / 1e3))
            };
            return Ok(Chain { kind, rtts: vec![ms(a)?, ms(b)?], uneven: true });
        }
        let n: u32 =
            split.parse().with_context(|| format!("variant {name:?}: {split:?} is not a segment count"))?;
        if !(2..=8).contains(&n) {
            bail!("variant {name:?}: segments must be 2..=8 (1 is `direct`)");
        }
        Ok(Chain { kind, rtts: vec![total / n; n as usize], uneven: false })
    }

    pub fn segments(&self) -> usize {
        self.rtts.len()
    }

    /// Node names: `c`, relays `p1..`, `s`.
    pub fn nodes(&self) -> Vec<String> {
        let n = self.segments();
        let mut v = vec!["c".to_string()];
        v.extend((1..n).map(|i| format!("p{i}")));
        v.push("s".into());
        v
    }

    /// Segment `i` (1-based) is 10.50.i.0/24: its client-side end is .1, its server-side end .2.
    pub fn left_of_segment(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 50, i as u8, 1)
    }
    pub fn right_of_segment(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 50, i as u8, 2)
    }

    /// The chain as a topology: no routes (each node only talks to its neighbours),
    /// one emulated link per segment with delay RTT/2 each way and no rate limit.
    pub fn topology(&self) -> Result<Topology> {
        let nodes = self.nodes();
        let mut t = TopologyBuilder::new("lab-split");
        for n in &nodes {
            t.host(n);
        }
        for (i, rtt) in self.rtts.iter().enumerate() {
            let seg = i + 1;
            let end = |node: &str, addr: Ipv4Addr, ifname: &str| {
                EndSpec::new(node).addr(Cidr::new(addr, 24)).ifname(ifname)
            };
            t.link(
                LinkSpec::emulated(
                    end(&nodes[i], Self::left_of_segment(seg), "right"),
                    end(&nodes[i + 1], Self::right_of_segment(seg), "left"),
                )
                .name(format!("seg{seg}"))
                .delay(*rtt / 2)
                .buffer(QueueLimit::Bytes(16_000_000)),
            );
        }
        t.build().context("building the split chain topology")
    }
}

/// The server's URL for the payload.
fn url(chain: &Chain) -> String {
    format!("http://{}:{HTTP_PORT}/payload.bin", Chain::right_of_segment(chain.segments()))
}

/// How a tcpaccel relay names the next relay: `tcpaccel+socks5://` tells it
/// the hop is a tcpaccel relay, so the handshake to it is sent in one piece.
pub fn next_hop(scheme: &str, addr: Ipv4Addr) -> String {
    format!("{scheme}://{addr}:{SOCKS_PORT}")
}

/// `tcpaccel relay` arguments (after the program) for SOCKS relay `i`
/// (1-based) of a tcpaccel chain: its next relay named with `scheme`, and
/// `--early-reply` on the client's relay only of a `tcpaccel-early` chain
/// (the others keep their exact replies; the first learns a failure from
/// them).
pub fn socks_relay_args(chain: &Chain, i: usize, scheme: &str, log: Option<&str>) -> Vec<String> {
    let me = Chain::right_of_segment(i);
    let mut a: Vec<String> = vec![
        "relay".into(),
        "--listen".into(),
        format!("{me}:{SOCKS_PORT}"),
        "--allow".into(),
        "10.50.0.0/16".into(),
        "--cc".into(),
        "cubic".into(),
    ];
    if i + 1 < chain.segments() {
        a.push("--next".into());
        a.push(next_hop(scheme, Chain::right_of_segment(i + 1)));
    }
    if chain.kind == Kind::TcpaccelEarly && i == 1 {
        a.push("--early-reply".into());
    }
    if let Some(f) = log {
        a.push("--log".into());
        a.push(f.into());
    }
    a
}

/// Dante's configuration for relay `i` (1-based) of an `n`-segment chain.
pub fn dante_conf(i: usize, n: usize) -> String {
    let mut c = format!(
        "logoutput: stderr\n\
         internal: {} port = {SOCKS_PORT}\n\
         external: {}\n\
         clientmethod: none\n\
         socksmethod: none\n\
         user.privileged: root\n\
         user.unprivileged: nobody\n\
         client pass {{ from: 10.50.0.0/16 to: 0.0.0.0/0 }}\n\
         socks pass {{ from: 10.50.0.0/16 to: 10.50.0.0/16 command: connect }}\n",
        Chain::right_of_segment(i),
        Chain::left_of_segment(i + 1),
    );
    if i + 1 < n {
        c += &format!(
            "route {{ from: 0.0.0.0/0 to: 0.0.0.0/0 via: {} port = {SOCKS_PORT}\n  \
             proxyprotocol: socks_v5\n  command: connect\n  protocol: tcp\n  method: none\n}}\n",
            Chain::right_of_segment(i + 1)
        );
    }
    c
}

/// Squid's configuration for relay `i` of an `n`-segment chain, its files in `dir`.
pub fn squid_conf(i: usize, n: usize, dir: &Path) -> String {
    let d = dir.display();
    let mut c = format!(
        "http_port {}:{SQUID_PORT}\n\
         visible_hostname tcpaccel-split-p{i}\n\
         via off\nforwarded_for delete\n\
         acl lab src 10.50.0.0/16\nhttp_access allow lab\nhttp_access deny all\n\
         cache deny all\ncache_mem 0 MB\n\
         access_log none\ncache_store_log none\ncache_log {d}/cache.log\n\
         pid_filename {d}/squid.pid\ncoredump_dir {d}\n\
         shutdown_lifetime 0 seconds\n",
        Chain::right_of_segment(i)
    );
    if i + 1 < n {
        c += &format!(
            "cache_peer {} parent {SQUID_PORT} 0 no-query default\nnever_direct allow all\n",
            Chain::right_of_segment(i + 1)
        );
    }
    c
}

/// nginx serving `root` on the server's address, one process in the foreground.
pub fn nginx_conf(addr: Ipv4Addr, root: &Path, dir: &Path) -> String {
    let (r, d) = (root.display(), dir.display());
    format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\nuser root;\n\
         pid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n  access_log off;\n  sendfile on;\n  tcp_nopush on;\n\
         \x20 default_type application/octet-stream;\n\
         \x20 client_body_temp_path {d}/body;\n\
         \x20 server {{ listen {addr}:{HTTP_PORT}; root {r}; }}\n}}\n"
    )
}

/// curl's `-w` output: bytes downloaded, seconds total, seconds to the first
/// byte (connection setup through the whole chain and the request).
pub fn parse_curl(out: &str) -> Result<(u64, f64, f64)> {
    let mut it = out.split_whitespace();
    let size = it.next().and_then(|v| v.parse::<f64>().ok()).context("curl printed no size")?;
    let secs = it.next().and_then(|v| v.parse::<f64>().ok()).context("curl printed no time")?;
    let first = it.next().and_then(|v| v.parse::<f64>().ok()).context("curl printed no first-byte time")?;
    if secs <= 0.0 || size < 0.0 || !(0.0..=secs).contains(&first) {
        bail!("curl printed size {size} in {secs} s, first byte at {first} s");
    }
    Ok((size as u64, secs, first))
}

/// The fit T_n = T·(a + b·n) of (segments, MB/s) points, T the 1-segment value:
/// (a, b, r²). [SplitTCP] eq. (8) (the paper's fit of table 6, a = 0.3, b = 0.7);
/// with eq. (6) T_n = n·T − f·(n−1), rewritten as eq. (9)-(10), the per-relay
/// overhead is f/T = 1 − b.
pub fn fit(points: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    let t = points.iter().find(|p| p.0 == 1.0)?.1;
    if t <= 0.0 {
        return None;
    }
    let line = linear_fit(points)?;
    Some((line.intercept / t, line.slope / t, line.r2))
}

/// A daemon in a namespace, stopped (TERM, then KILL) and reaped on drop.
struct Daemon {
    what: String,
    node: String,
    child: Child,
    log: PathBuf,
}

impl Daemon {
    fn stop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // Not reaped yet (try_wait saw it running), so its pid is still its own.
            let _ = tcpaccel_sys::process::signal(self.child.id(), tcpaccel_sys::process::Signal::Term);
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(3) {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
    /// CPU seconds (user + system) of the daemon and its direct children
    /// (Dante's I/O processes) so far, from /proc. Assumes USER_HZ = 100, the
    /// value every Linux architecture exports to user space.
    fn cpu_s(&self) -> f64 {
        let pid = self.child.id();
        let mut ticks = proc_ticks(pid).map(|(t, _)| t).unwrap_or(0);
        if let Ok(dir) = std::fs::read_dir("/proc") {
            for e in dir.flatten() {
                let Some(other) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                    continue;
                };
                if let Some((t, ppid)) = proc_ticks(other) {
                    if ppid == pid {
                        ticks += t;
                    }
                }
            }
        }
        ticks as f64 / 100.0
    }
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join(" | ")
    }
    /// Fails if the daemon has exited.
    fn check(&mut self) -> Result<()> {
        if let Ok(Some(st)) = self.child.try_wait() {
            bail!("{} exited ({st}): {}", self.what, self.log_tail());
        }
        Ok(())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// utime + stime (clock ticks) and the parent pid of `pid`, from /proc/PID/stat.
fn proc_ticks(pid: u32) -> Option<(u64, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// Parses /proc/PID/stat: the command name may hold spaces and parentheses,
/// so fields are counted after the last `)`.
pub fn parse_stat(text: &str) -> Option<(u64, u32)> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(3) ppid(4) … utime(14) stime(15), here 0-based from field 3.
    let ppid = f.get(1)?.parse().ok()?;
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some((utime + stime, ppid))
}

fn find_bin(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/usr/bin", "/sbin", "/bin"])
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file());
    found
}

/// The external programs the variants need (none for raw tcpaccel chains),
/// found with `lookup`; a missing one names the install script.
fn find_peers(
    kinds: &[Kind],
    raw: bool,
    lookup: impl Fn(&str) -> Option<PathBuf>,
) -> Result<BTreeMap<&'static str, PathBuf>> {
    let mut need = Vec::new();
    if !raw {
        need.push(("curl", "the HTTP client"));
        need.push(("nginx", "the HTTP server"));
    }
    if kinds.contains(&Kind::Dante) {
        need.push(("danted", "relays=dante"));
    }
    if kinds.contains(&Kind::Squid) {
        need.push(("squid", "relays=squid"));
    }
    let mut bins = BTreeMap::new();
    for (b, why) in need {
        let path = lookup(b).with_context(|| {
            format!(
                "{b} not found (needed for {why}); install the peers with scripts/install-split-peers.sh, \
                 or leave that relay kind out (--set relays=tcpaccel --set uneven_relays=tcpaccel)"
            )
        })?;
        bins.insert(b, path);
    }
    Ok(bins)
}

impl SplitBed {
    fn bin(&self, name: &str) -> Result<&PathBuf> {
        self.bins.get(name).with_context(|| format!("{name} was not looked up at setup"))
    }
}

fn tcpaccel_bin() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("TCPACCEL_BIN") {
        return Ok(PathBuf::from(p));
    }
    std::env::current_exe().context("locating the tcpaccel executable (set TCPACCEL_BIN)")
}

impl Scenario for Split {
    fn name(&self) -> &'static str {
        "split"
    }
    fn title(&self) -> &'static str {
        "Split-TCP relay chains: tcpaccel, Dante and Squid ([SplitTCP])"
    }
    fn description(&self) -> &'static str {
        "A 50 ms RTT path cut into 1..5 segments of equal RTT (and 2-segment uneven splits) by relays at the \
         joints; curl downloads a random file from nginx directly, through a chain of tcpaccel SOCKS5 relays, \
         through chained Dante servers, or through Squid parents. CUBIC everywhere, CentOS 6-like 4 MB buffers."
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec::new(
                "relays",
                "tcpaccel,tcpaccel-early,dante,squid",
                "relay kinds for the equal splits (tcpaccel-early: tcpaccel with --early-reply)",
            ),
            ParamSpec::new("segments", "2,3,4,5", "segment counts of the equal splits (1 is `direct`)"),
            ParamSpec::new(
                "uneven",
                "40-10,30-20,25-25,20-30,10-40",
                "2-segment splits, RTT ms client side-server side",
            ),
            ParamSpec::new(
                "uneven_relays",
                "tcpaccel,dante",
                "relay kinds for the uneven splits (empty: none)",
            ),
            ParamSpec::new("rtt", "50ms", "total RTT of the path"),
            ParamSpec::new("size", "100MB", "size of the random file downloaded"),
            ParamSpec::new(
                "buffers",
                "centos6",
                "centos6 (tcp_rmem/tcp_wmem max = buf_max) or kernel (this kernel's defaults)",
            ),
            ParamSpec::new("buf_max", "4MB", "tcp_rmem/tcp_wmem maximum with buffers=centos6"),
            ParamSpec::new(
                "transport",
                "http",
                "http (nginx + curl) or raw (traffic tool; tcpaccel relays only)",
            ),
            ParamSpec::new(
                "tcpaccel_next",
                "tcpaccel+socks5",
                "scheme tcpaccel relays name their next relay with: tcpaccel+socks5 (pipelined handshake) \
                 or socks5 (step by step, as toward any SOCKS5 server)",
            ),
            ParamSpec::new(
                "relay_log",
                "",
                "--log filter for the tcpaccel relays (e.g. tcpaccel_relay=debug: per-session set-up times); \
                 their logs are kept as OUT/relay-logs/VARIANT-rREPEAT-NODE.log. Empty: not kept",
            ),
        ]
    }
    fn quick(&self) -> Vec<(&'static str, &'static str)> {
        // A small window keeps the short run window-limited (the paper's regime)
        // instead of CPU-bound on a small machine; see BENCHMARKS.md.
        vec![("size", "10MB"), ("buf_max", "256KB"), ("uneven", "40-10,25-25,10-40")]
    }
    fn default_repeats(&self) -> u32 {
        3
    }
    fn variants(&self, p: &Params) -> Result<Vec<String>> {
        let total = parse_duration(p.str("rtt")?).context("parameter rtt")?;
        let mut v = vec!["direct".to_string()];
        for k in p.list("relays")? {
            Kind::parse(&k)?;
            for n in p.list("segments")? {
                v.push(format!("{k}/{n}"));
            }
        }
        for k in p.list("uneven_relays")? {
            Kind::parse(&k)?;
            for s in p.list("uneven")? {
                v.push(format!("{k}/{s}"));
            }
        }
        v.dedup();
        let raw = match p.str("transport")? {
            "http" => false,
            "raw" => true,
            other => bail!("transport={other:?}: expected http or raw"),
        };
        for name in &v {
            let c = Chain::parse(name, total)?;
            if raw && matches!(c.kind, Kind::Dante | Kind::Squid | Kind::TcpaccelEarly) {
                bail!("transport=raw runs tcpaccel --forward chains only; {name} needs transport=http");
            }
        }
        Ok(v)
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        vec![
            MetricSpec {
                name: "throughput_MBps".into(),
                unit: "MB/s".into(),
                higher_is_better: true,
                description: "file size / curl's total time (MB = 10^6 bytes)".into(),
            },
            MetricSpec {
                name: "relay_cpu_s_per_GB".into(),
                unit: "s/GB".into(),
                higher_is_better: false,
                description: "CPU seconds of all relays together per GB moved (none for direct)".into(),
            },
            MetricSpec {
                name: "first_byte_s".into(),
                unit: "s".into(),
                higher_is_better: false,
                description: "curl's time to the first byte: setup through the chain (HTTP only)".into(),
            },
            MetricSpec {
                name: "seconds".into(),
                unit: "s".into(),
                higher_is_better: false,
                description: "curl's total time for the file".into(),
            },
        ]
    }
    fn published(&self) -> Vec<Published> {
        let mut v = Vec::new();
        let mut put = |variant: String, value: f64, what: &str| {
            v.push(Published {
                variant,
                metric: "throughput_MBps".into(),
                value,
                source: format!("{SOURCE} ({what})"),
            })
        };
        put("direct".into(), 11.0, "HTTP direct, Apache + curl");
        let dante = [17.4, 29.6, 37.4, 46.1];
        let squid = [20.8, 28.4, 34.0, 34.6];
        for (i, (d, s)) in dante.iter().zip(squid.iter()).enumerate() {
            put(format!("dante/{}", i + 2), *d, "Dante HTTP");
            put(format!("squid/{}", i + 2), *s, "Squid HTTP");
        }
        for (split, x) in
            [("40-10", 12.4), ("30-20", 16.3), ("25-25", 17.7), ("20-30", 16.4), ("10-40", 12.8)]
        {
            put(format!("dante/{split}"), x, "Dante FTP, uneven 2 segments");
        }
        v
    }
    fn notes(&self, p: &Params) -> Vec<String> {
        let buffers = p.str("buffers").unwrap_or("centos6");
        vec![
            format!(
                "Endpoints and relays run under `tcpaccel run --cc cubic`; buffers: {buffers} (centos6 = tcp_rmem \
                 {CENTOS6_RMEM} MAX, tcp_wmem {CENTOS6_WMEM} MAX with MAX = buf_max). Links are delay-only \
                 emulated links (userspace emulator, no rate limit): on a small VM the emulators, relays and \
                 endpoints share the same cores, which caps the absolute figures."
            ),
            "The paper's 1-segment figure is `direct`; its uneven splits were measured with FTP, here with HTTP."
                .into(),
            "Plot `throughput_vs_segments_MBps`: x is the segment count (not time), repeat 0, one line per relay \
             kind (drawn under the kind's longest-chain variant)."
                .into(),
        ]
    }
    fn claims(&self) -> &'static [Claim] {
        CLAIMS
    }
    fn estimate(&self, p: &Params) -> Duration {
        let mb = p.bytes("size").map(|b| b.0 as f64 / 1e6).unwrap_or(100.0);
        Duration::from_secs_f64(2.0 + mb / 15.0)
    }
    fn prepare(&self, p: &Params, dir: &Path) -> Result<Box<dyn Testbed>> {
        let total = parse_duration(p.str("rtt")?).context("parameter rtt")?;
        let size = p.bytes("size")?;
        if size.0 == 0 || size.0 > 10_000_000_000 {
            bail!("size={size}: must be between 1 B and 10 GB");
        }
        let buffers = match p.str("buffers")? {
            "centos6" => {
                let max = p.bytes("buf_max")?.0;
                vec![
                    ("net.ipv4.tcp_rmem".to_string(), format!("{CENTOS6_RMEM} {max}")),
                    ("net.ipv4.tcp_wmem".to_string(), format!("{CENTOS6_WMEM} {max}")),
                ]
            }
            "kernel" => Vec::new(),
            other => bail!("buffers={other:?}: expected centos6 or kernel"),
        };
        let mut kinds: Vec<Kind> = Vec::new();
        for v in self.variants(p)? {
            kinds.push(Chain::parse(&v, total)?.kind);
        }
        let raw = p.str("transport")? == "raw";
        let next_scheme = match p.str("tcpaccel_next")? {
            s @ ("tcpaccel+socks5" | "socks5") => s.to_string(),
            other => bail!("tcpaccel_next={other:?}: expected tcpaccel+socks5 or socks5"),
        };
        let bins = find_peers(&kinds, raw, find_bin)?;
        let tcpaccel = tcpaccel_bin()?;
        let work = std::env::temp_dir().join(format!("tcpaccel-split-{}", std::process::id()));
        let www = work.join("www");
        std::fs::create_dir_all(&www).with_context(|| format!("creating {}", www.display()))?;
        let work = WorkDir(work);
        write_payload(&www.join("payload.bin"), size.0, 0x5eed_0002)?;
        Ok(Box::new(SplitBed {
            total,
            size: size.0,
            buffers,
            tcpaccel,
            bins,
            work,
            results: BTreeMap::new(),
            order: self.variants(p)?,
            raw,
            next_scheme,
            relay_log: Some(p.str("relay_log")?.trim().to_string()).filter(|f| !f.is_empty()),
            out: dir.to_path_buf(),
        }))
    }
}

/// Removes the work directory (payload, configurations, logs) when the testbed goes.
struct WorkDir(PathBuf);

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A file of seeded random bytes (incompressible, reproducible).
fn write_payload(path: &Path, size: u64, seed: u64) -> Result<()> {
    let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    let mut rng = Rng::seeded(seed);
    let mut left = size;
    let mut block = vec![0u8; 1 << 16];
    while left > 0 {
        for c in block.chunks_mut(8) {
            let x = rng.next_u64().to_le_bytes();
            c.copy_from_slice(&x[..c.len()]);
        }
        let n = left.min(block.len() as u64) as usize;
        w.write_all(&block[..n]).with_context(|| format!("writing {}", path.display()))?;
        left -= n as u64;
    }
    w.flush().with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

struct SplitBed {
    total: Duration,
    size: u64,
    buffers: Vec<(String, String)>,
    tcpaccel: PathBuf,
    /// The peers found at setup, by program name.
    bins: BTreeMap<&'static str, PathBuf>,
    work: WorkDir,
    /// MB/s per variant, every repeat so far.
    results: BTreeMap<String, Vec<f64>>,
    order: Vec<String>,
    /// Traffic tool through `--forward` chains instead of HTTP.
    raw: bool,
    /// `tcpaccel+socks5` or `socks5`: how tcpaccel relays name their next one.
    next_scheme: String,
    /// `--log` filter of the tcpaccel relays, whose logs are then kept.
    relay_log: Option<String>,
    /// The run's output directory.
    out: PathBuf,
}

/// Waits until `addr` accepts a connection from inside `node`.
fn wait_listening(net: &Network, node: &str, addr: SocketAddr, d: &mut Daemon) -> Result<()> {
    let t0 = Instant::now();
    loop {
        let ok =
            net.run_in(node, move || TcpStream::connect_timeout(&addr, Duration::from_millis(300)).is_ok())?;
        if ok {
            return Ok(());
        }
        d.check()?;
        if t0.elapsed() > Duration::from_secs(10) {
            bail!("{} does not listen on {addr} after 10 s: {}", d.what, d.log_tail());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl SplitBed {
    fn dir(&self, name: &str) -> Result<PathBuf> {
        let d = self.work.0.join(name);
        std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
        // Squid drops root for its cache_effective_user and must still write its log here.
        let _ = std::process::Command::new("chmod").args(["0777", &d.to_string_lossy()]).status();
        Ok(d)
    }

    /// Spawns `argv` under `tcpaccel run --cc cubic` in `node`, output to `dir/log`.
    fn spawn(&self, net: &Network, node: &str, what: &str, dir: &Path, argv: &[String]) -> Result<Daemon> {
        let log = dir.join("log");
        let out = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone().context("duplicating a log file handle")?;
        let mut full: Vec<String> = vec![
            self.tcpaccel.to_string_lossy().into(),
            "run".into(),
            "--cc".into(),
            "cubic".into(),
            "--".into(),
        ];
        full.extend(argv.iter().cloned());
        let child = net
            .exec(node, &full)?
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("starting {what} in {node}"))?;
        Ok(Daemon { what: format!("{what} in {node}"), node: node.to_string(), child, log })
    }

    /// Starts the relay at joint `i` (node p{i}).
    fn relay(&self, net: &Network, chain: &Chain, i: usize) -> Result<Daemon> {
        let n = chain.segments();
        let node = format!("p{i}");
        let dir = self.dir(&format!("{}-{node}", chain.kind.name()))?;
        let me = Chain::right_of_segment(i);
        let (what, argv, port) = match chain.kind {
            Kind::Direct => bail!("direct has no relays"),
            Kind::Tcpaccel if self.raw => {
                let next = Chain::right_of_segment(i + 1);
                let a: Vec<String> = vec![
                    self.tcpaccel.to_string_lossy().into(),
                    "relay".into(),
                    "--forward".into(),
                    format!("{me}:{RAW_PORT}={next}:{RAW_PORT}"),
                    "--allow".into(),
                    "10.50.0.0/16".into(),
                    "--cc".into(),
                    "cubic".into(),
                ];
                ("tcpaccel relay --forward", a, RAW_PORT)
            }
            Kind::Tcpaccel | Kind::TcpaccelEarly => {
                let mut a = vec![self.tcpaccel.to_string_lossy().into_owned()];
                a.extend(socks_relay_args(chain, i, &self.next_scheme, self.relay_log.as_deref()));
                ("tcpaccel relay", a, SOCKS_PORT)
            }
            Kind::Dante => {
                let conf = dir.join("danted.conf");
                std::fs::write(&conf, dante_conf(i, n))
                    .with_context(|| format!("writing {}", conf.display()))?;
                let bin = self.bin("danted")?;
                let a = vec![
                    bin.to_string_lossy().into(),
                    "-f".into(),
                    conf.to_string_lossy().into(),
                    "-p".into(),
                    dir.join("danted.pid").to_string_lossy().into(),
                ];
                ("danted", a, SOCKS_PORT)
            }
            Kind::Squid => {
                let conf = dir.join("squid.conf");
                std::fs::write(&conf, squid_conf(i, n, &dir))
                    .with_context(|| format!("writing {}", conf.display()))?;
                let bin = self.bin("squid")?;
                let a = vec![
                    bin.to_string_lossy().into(),
                    "-N".into(),
                    "-f".into(),
                    conf.to_string_lossy().into(),
                ];
                ("squid", a, SQUID_PORT)
            }
        };
        let mut d = self.spawn(net, &node, what, &dir, &argv)?;
        wait_listening(net, &node, SocketAddr::new(IpAddr::V4(me), port), &mut d)?;
        Ok(d)
    }

    /// The traffic tool from `c` to the server through the forward chain: MB/s.
    fn raw_transfer(&self, net: &Network, seed: u64) -> Result<f64> {
        let first = SocketAddr::new(IpAddr::V4(Chain::right_of_segment(1)), RAW_PORT);
        let mut scfg = SendConfig::new(first);
        scfg.volume = Volume::Bytes(self.size);
        scfg.cc = Some("cubic".into());
        scfg.seed = seed;
        scfg.stop = Some(crate::runner::scenario::stop_flag());
        let sum = net.run_in("c", move || run_send(scfg, |_| {}))?.context("sending from c")?;
        if sum.bytes < self.size || sum.stopped_early {
            bail!("the transfer moved {} of {} bytes", sum.bytes, self.size);
        }
        if sum.checksum_ok == Some(false) {
            bail!("checksums differ between the ends");
        }
        Ok(sum.bytes as f64 / 1e6 / sum.duration_s)
    }

    /// MB/s and seconds to the first byte.
    fn download(&self, net: &Network, chain: &Chain) -> Result<(f64, f64)> {
        let mut argv: Vec<String> = vec![
            self.tcpaccel.to_string_lossy().into(),
            "run".into(),
            "--cc".into(),
            "cubic".into(),
            "--".into(),
            self.bin("curl")?.to_string_lossy().into(),
            "-sS".into(),
            "--fail".into(),
            "--max-time".into(),
            "600".into(),
            "-o".into(),
            "/dev/null".into(),
            "-w".into(),
            "%{size_download} %{time_total} %{time_starttransfer}".into(),
        ];
        let first = Chain::right_of_segment(1);
        match chain.kind {
            Kind::Direct => argv.push("--noproxy".into()),
            Kind::Tcpaccel | Kind::TcpaccelEarly | Kind::Dante => argv.push("--socks5-hostname".into()),
            Kind::Squid => argv.push("--proxy".into()),
        }
        argv.push(match chain.kind {
            Kind::Direct => "*".into(),
            Kind::Tcpaccel | Kind::TcpaccelEarly | Kind::Dante => format!("{first}:{SOCKS_PORT}"),
            Kind::Squid => format!("http://{first}:{SQUID_PORT}"),
        });
        argv.push(url(chain));
        let out = net.exec("c", &argv)?.stdin(Stdio::null()).output().context("running curl in c")?;
        if !out.status.success() {
            bail!("curl failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
        }
        let (got, secs, first) = parse_curl(&String::from_utf8_lossy(&out.stdout))?;
        if got != self.size {
            bail!("curl received {got} bytes of {}", self.size);
        }
        // [SplitTCP] eq. (7): T_n = size / s, in MB/s.
        Ok((got as f64 / 1e6 / secs, first))
    }

    /// After the last variant of a repeat: the fit per kind over the medians so far.
    fn fit_notes(&self, ctx: &mut RunCtx<'_>) -> Result<()> {
        let med = |v: &str| self.results.get(v).and_then(|x| median(x));
        let Some(direct) = med("direct") else { return Ok(()) };
        let mut kinds: Vec<Kind> = Vec::new();
        for v in &self.order {
            if let Ok(c) = Chain::parse(v, self.total) {
                if c.kind != Kind::Direct && !c.uneven && !kinds.contains(&c.kind) {
                    kinds.push(c.kind);
                }
            }
        }
        for k in kinds {
            let mut pts = vec![(1.0, direct)];
            for v in &self.order {
                if let (Ok(c), Some(m)) = (Chain::parse(v, self.total), med(v)) {
                    if c.kind == k && !c.uneven {
                        pts.push((c.segments() as f64, m));
                    }
                }
            }
            if let Some((a, b, r2)) = fit(&pts) {
                let last = pts.iter().map(|p| p.0).fold(1.0, f64::max);
                let at_last = pts.iter().find(|p| p.0 == last).map(|p| p.1 / direct).unwrap_or(f64::NAN);
                ctx.note(format!(
                    "fit after repeat {} (medians): {} T_n = T·({a:.2} + {b:.2}·n), T = {direct:.1} MB/s, r² = \
                     {r2:.2}; per-relay overhead f/T = 1 − b = {:.0}% (paper: 30%, T·(0.3 + 0.7n)); {last} \
                     segments = {at_last:.2}× direct",
                    ctx.repeat,
                    k.name(),
                    (1.0 - b) * 100.0
                ))?;
            }
        }
        Ok(())
    }

    /// Repeat 0's throughput against segment count, one line per kind (see `notes`).
    fn plot_line(&self, ctx: &mut RunCtx<'_>, chain: &Chain) -> Result<()> {
        if ctx.repeat != 0 || chain.uneven {
            return Ok(());
        }
        let last_of_kind = self
            .order
            .iter()
            .filter_map(|v| Chain::parse(v, self.total).ok().map(|c| (v, c)))
            .filter(|(_, c)| c.kind == chain.kind && !c.uneven)
            .map(|(v, _)| v.clone())
            .next_back();
        if last_of_kind.as_deref() != Some(ctx.variant.as_str()) {
            return Ok(());
        }
        let mut pts = Vec::new();
        if let Some(d) = self.results.get("direct").and_then(|x| x.first()) {
            pts.push((1.0, *d));
        }
        for v in &self.order {
            if let (Ok(c), Some(x)) =
                (Chain::parse(v, self.total), self.results.get(v).and_then(|x| x.first()))
            {
                if c.kind == chain.kind && !c.uneven {
                    pts.push((c.segments() as f64, *x));
                }
            }
        }
        for (n, x) in pts {
            ctx.sample("throughput_vs_segments_MBps", n, x)?;
        }
        Ok(())
    }
}

impl Testbed for SplitBed {
    fn run_one(&mut self, ctx: &mut RunCtx<'_>) -> Result<()> {
        let chain = Chain::parse(&ctx.variant, self.total)?;
        let net = Network::up(&chain.topology()?).context("building the split chain")?;
        // Declared after `net`, so dropped before it (also on an error or a panic): a
        // namespace with a live daemon in it would outlive the teardown.
        let mut daemons: Vec<Daemon> = Vec::new();
        let net = &net;
        let mut ctl = crate::testbeds::dumbbell::baseline_sysctls();
        ctl.extend(self.buffers.iter().cloned());
        for node in chain.nodes() {
            crate::testbeds::dumbbell::sysctls(net, &node, &ctl)?;
        }
        let server = Chain::right_of_segment(chain.segments());
        if self.raw {
            let mut rcfg = RecvConfig::new(SocketAddr::new(IpAddr::V4(server), RAW_PORT));
            rcfg.cc = Some("cubic".into());
            let recv = net.run_in("s", move || spawn_recv(rcfg))?.context("starting the receiver in s")?;
            for i in (1..chain.segments()).rev() {
                let d = self.relay(net, &chain, i)?;
                daemons.push(d);
            }
            let r = self.raw_transfer(net, ctx.seed);
            if !daemons.is_empty() {
                let cpu: f64 = daemons.iter().map(Daemon::cpu_s).sum();
                ctx.metric("relay_cpu_s_per_GB", cpu / (self.size as f64 / 1e9));
            }
            drop(recv.stop());
            for d in daemons.iter_mut().rev() {
                d.stop();
            }
            self.keep_logs(ctx, &chain, &daemons)?;
            let mbps = r?;
            return self.record(ctx, &chain, mbps);
        }
        let sdir = self.dir("nginx")?;
        let conf = sdir.join("nginx.conf");
        std::fs::write(&conf, nginx_conf(server, &self.work.0.join("www"), &sdir))
            .with_context(|| format!("writing {}", conf.display()))?;
        let argv = vec![
            self.bin("nginx")?.to_string_lossy().into_owned(),
            "-c".into(),
            conf.to_string_lossy().into_owned(),
            "-p".into(),
            sdir.to_string_lossy().into_owned(),
        ];
        let mut nginx = self.spawn(net, "s", "nginx", &sdir, &argv)?;
        wait_listening(net, "s", SocketAddr::new(IpAddr::V4(server), HTTP_PORT), &mut nginx)?;
        daemons.push(nginx);
        // Server side first, so each relay's next hop is up when it starts.
        for i in (1..chain.segments()).rev() {
            let d = self.relay(net, &chain, i)?;
            daemons.push(d);
        }
        let mbps = self.download(net, &chain);
        let mbps = match mbps {
            Ok((x, first)) => {
                ctx.metric("first_byte_s", first);
                x
            }
            Err(e) => {
                let logs: Vec<String> =
                    daemons.iter().map(|d| format!("{}: {}", d.what, d.log_tail())).collect();
                return Err(e.context(format!("daemon logs: {}", logs.join("; "))));
            }
        };
        // daemons[0] is nginx, the rest are relays.
        if daemons.len() > 1 {
            let cpu: f64 = daemons.iter().skip(1).map(Daemon::cpu_s).sum();
            ctx.metric("relay_cpu_s_per_GB", cpu / (self.size as f64 / 1e9));
        }
        for d in daemons.iter_mut().rev() {
            d.stop();
        }
        self.keep_logs(ctx, &chain, &daemons)?;
        self.record(ctx, &chain, mbps)
    }
}

impl SplitBed {
    /// With `relay_log`, copies the tcpaccel relays' logs of this run to
    /// OUT/relay-logs/VARIANT-rREPEAT-NODE.log (`/` in the variant as `_`).
    fn keep_logs(&self, ctx: &RunCtx<'_>, chain: &Chain, daemons: &[Daemon]) -> Result<()> {
        if self.relay_log.is_none() || !matches!(chain.kind, Kind::Tcpaccel | Kind::TcpaccelEarly) {
            return Ok(());
        }
        let dir = self.out.join("relay-logs");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        for d in daemons.iter().filter(|d| d.node.starts_with('p')) {
            let name = format!("{}-r{}-{}.log", ctx.variant.replace('/', "_"), ctx.repeat, d.node);
            std::fs::copy(&d.log, dir.join(&name)).with_context(|| format!("keeping {}", d.log.display()))?;
        }
        Ok(())
    }

    fn record(&mut self, ctx: &mut RunCtx<'_>, chain: &Chain, mbps: f64) -> Result<()> {
        ctx.metric("throughput_MBps", mbps);
        ctx.metric("seconds", self.size as f64 / 1e6 / mbps);
        self.results.entry(ctx.variant.clone()).or_default().push(mbps);
        self.plot_line(ctx, chain)?;
        if self.order.last() == Some(&ctx.variant) {
            self.fit_notes(ctx)?;
        }
        Ok(())
    }
}

/// What this scenario claims: published figures and goals, judged by the report against a run's summaries.
pub(crate) const CLAIMS: &[Claim] = &[
    Claim {
        text: "5 segments through tcpaccel relays give 4.5× direct throughput",
        measure: Measure::Ratio {
            num: ("tcpaccel/5", "throughput_MBps"),
            den: ("direct", "throughput_MBps"),
        },
        goal: Goal::AtLeast(4.5),
        goal_source: GOAL_BENCH,
        published: Some(Figure { value: 46.1 / 11.0, source: "[SplitTCP]: Dante HTTP 46.1 / 11.0 MB/s" }),
        when: &[],
    },
    Claim {
        text: "tcpaccel relays at least match Dante at 5 segments",
        measure: Measure::Ratio {
            num: ("tcpaccel/5", "throughput_MBps"),
            den: ("dante/5", "throughput_MBps"),
        },
        goal: Goal::AtLeast(1.0),
        goal_source: GOAL_BENCH,
        published: None,
        when: &[],
    },
    Claim {
        text: "An equal split beats a 40/10 split (tcpaccel, 2 segments)",
        measure: Measure::Ratio {
            num: ("tcpaccel/25-25", "throughput_MBps"),
            den: ("tcpaccel/40-10", "throughput_MBps"),
        },
        goal: Goal::Above(1.0),
        goal_source: GOAL_DIRECTION,
        published: Some(Figure { value: 17.7 / 12.4, source: "[SplitTCP]: Dante FTP 17.7 / 12.4 MB/s" }),
        when: &[],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    const RTT: Duration = Duration::from_millis(50);

    #[test]
    fn variants_parse_into_chains() {
        let c = Chain::parse("tcpaccel/5", RTT).unwrap();
        assert_eq!(c.rtts, vec![Duration::from_millis(10); 5]);
        assert_eq!(c.nodes(), vec!["c", "p1", "p2", "p3", "p4", "s"]);
        let u = Chain::parse("dante/40-10", RTT).unwrap();
        assert_eq!(u.rtts, vec![Duration::from_millis(40), Duration::from_millis(10)]);
        assert!(u.uneven);
        assert_eq!(Chain::parse("direct", RTT).unwrap().segments(), 1);
        for bad in ["tcpaccel/1", "tcpaccel/x", "haproxy/2", "dante", "dante/0-50", "direct/2"] {
            assert!(Chain::parse(bad, RTT).is_err(), "{bad}");
        }
    }

    #[test]
    fn topology_has_one_delay_link_per_segment() {
        let t = Chain::parse("squid/3", RTT).unwrap().topology().unwrap();
        assert_eq!(t.nodes.len(), 4);
        assert_eq!(t.links.len(), 3);
    }

    #[test]
    fn configs_chain_to_the_next_relay_except_the_last() {
        let d = dante_conf(1, 3);
        assert!(d.contains("internal: 10.50.1.2 port = 1080") && d.contains("external: 10.50.2.1"), "{d}");
        assert!(d.contains("via: 10.50.2.2 port = 1080") && d.contains("proxyprotocol: socks_v5"), "{d}");
        assert!(!dante_conf(2, 3).contains("route"));
        let s = squid_conf(1, 3, Path::new("/x"));
        assert!(s.contains("cache_peer 10.50.2.2 parent 3128 0 no-query default"), "{s}");
        assert!(s.contains("never_direct allow all") && s.contains("cache deny all"), "{s}");
        assert!(!squid_conf(2, 3, Path::new("/x")).contains("cache_peer"));
        // Distinct hostnames: Squid would take its own name coming back as a forwarding loop.
        assert_ne!(squid_conf(1, 3, Path::new("/x")), squid_conf(2, 3, Path::new("/x")));
    }

    #[test]
    fn tcpaccel_relays_mark_their_next_relay_as_ours() {
        let a = Chain::right_of_segment(2);
        // The relay's `Hop::parse` reads this scheme as "pipeline".
        assert_eq!(next_hop("tcpaccel+socks5", a), format!("tcpaccel+socks5://{a}:{SOCKS_PORT}"));
        assert_eq!(next_hop("socks5", a), format!("socks5://{a}:{SOCKS_PORT}"));
    }

    #[test]
    fn only_the_first_relay_of_an_early_chain_replies_early() {
        let early = Chain::parse("tcpaccel-early/3", RTT).unwrap();
        assert_eq!(early.kind, Kind::TcpaccelEarly);
        let a1 = socks_relay_args(&early, 1, "tcpaccel+socks5", None);
        assert!(a1.contains(&"--early-reply".to_string()), "{a1:?}");
        assert!(a1.contains(&next_hop("tcpaccel+socks5", Chain::right_of_segment(2))), "{a1:?}");
        let a2 = socks_relay_args(&early, 2, "tcpaccel+socks5", Some("tcpaccel_relay=debug"));
        assert!(!a2.contains(&"--early-reply".to_string()) && !a2.contains(&"--next".to_string()), "{a2:?}");
        assert_eq!(a2[a2.len() - 2..], ["--log".to_string(), "tcpaccel_relay=debug".to_string()]);
        let exact = Chain::parse("tcpaccel/3", RTT).unwrap();
        assert!(!socks_relay_args(&exact, 1, "tcpaccel+socks5", None).contains(&"--early-reply".to_string()));
        // Early replies need SOCKS: the raw transport refuses the kind.
        let raw = [
            ("transport".to_string(), "raw".to_string()),
            ("relays".to_string(), "tcpaccel-early".to_string()),
            ("uneven_relays".to_string(), String::new()),
        ];
        let p = crate::runner::scenario::resolve_params(&Split, false, &raw).unwrap();
        assert!(Split.variants(&p).is_err());
    }

    #[test]
    fn fit_recovers_the_papers_model() {
        // T_n = 10·(0.3 + 0.7 n): a = 0.3, b = 0.7, overhead 30%.
        let pts: Vec<(f64, f64)> = (1..=5).map(|n| (n as f64, 10.0 * (0.3 + 0.7 * n as f64))).collect();
        let (a, b, r2) = fit(&pts).unwrap();
        assert!((a - 0.3).abs() < 1e-9 && (b - 0.7).abs() < 1e-9 && (r2 - 1.0).abs() < 1e-9);
        assert!(fit(&[(2.0, 5.0), (3.0, 6.0)]).is_none(), "no 1-segment point, no T");
    }

    #[test]
    fn proc_stat_parses_names_with_spaces() {
        let line = "4242 (my (odd) name) S 17 4242 4242 0 -1 4194560 300 0 0 0 250 50 0 0 20 0 3 0 100 0 0";
        assert_eq!(parse_stat(line), Some((300, 17)));
        assert_eq!(parse_stat("garbage"), None);
        let own = proc_ticks(std::process::id()).expect("our own /proc/PID/stat");
        assert!(own.1 > 0);
    }

    #[test]
    fn missing_peers_name_the_install_script_and_tcpaccel_needs_none_of_them() {
        let none = |_: &str| None;
        let e = find_peers(&[Kind::Direct, Kind::Dante], false, none).unwrap_err().to_string();
        assert!(e.contains("scripts/install-split-peers.sh") && e.contains("curl"), "{e}");
        let only_http = |b: &str| (b == "curl" || b == "nginx").then(|| PathBuf::from(format!("/x/{b}")));
        let e = find_peers(&[Kind::Tcpaccel, Kind::Squid], false, only_http).unwrap_err().to_string();
        assert!(e.contains("squid not found (needed for relays=squid)"), "{e}");
        let ok = find_peers(&[Kind::Direct, Kind::Tcpaccel], false, only_http).unwrap();
        assert_eq!(ok.keys().copied().collect::<Vec<_>>(), vec!["curl", "nginx"]);
        assert!(find_peers(&[Kind::Direct, Kind::Tcpaccel], true, none).unwrap().is_empty());
    }

    #[test]
    fn curl_output_parses_and_rejects_garbage() {
        assert_eq!(parse_curl("100000000 9.5 0.25").unwrap(), (100_000_000, 9.5, 0.25));
        assert!(parse_curl("").is_err());
        assert!(parse_curl("100 9.5").is_err(), "no first-byte time");
        assert!(parse_curl("100 1.0 2.0").is_err(), "first byte after the end");
        assert!(parse_curl("12 0 0").is_err());
        assert!(parse_curl("abc def").is_err());
    }

    #[test]
    fn published_and_variants_line_up() {
        let p = crate::runner::scenario::resolve_params(&Split, false, &[]).unwrap();
        let v = Split.variants(&p).unwrap();
        assert_eq!(v.len(), 1 + 4 * 4 + 2 * 5);
        assert!(v.contains(&"tcpaccel-early/5".to_string()) && v.contains(&"tcpaccel/5".to_string()));
        for pubd in Split.published() {
            assert!(v.contains(&pubd.variant), "{}", pubd.variant);
        }
        let raw = [("transport".to_string(), "raw".to_string())];
        let e = Split
            .variants(&crate::runner::scenario::resolve_params(&Split, false, &raw).unwrap())
            .unwrap_err();
        assert!(e.to_string().contains("tcpaccel --forward chains only"), "{e}");
        let ok = [
            ("transport".to_string(), "raw".to_string()),
            ("relays".to_string(), "tcpaccel".to_string()),
            ("uneven_relays".to_string(), "tcpaccel".to_string()),
        ];
        assert_eq!(
            Split
                .variants(&crate::runner::scenario::resolve_params(&Split, false, &ok).unwrap())
                .unwrap()
                .len(),
            10
        );
    }

    #[test]
    fn payload_is_seeded() {
        let dir = std::env::temp_dir().join(format!("tcpaccel-split-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a"), dir.join("b"));
        write_payload(&a, 100_003, 7).unwrap();
        write_payload(&b, 100_003, 7).unwrap();
        let (x, y) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(x.len(), 100_003);
        assert_eq!(x, y);
        assert!(x.iter().filter(|&&c| c == 0).count() < 2_000, "random, not zeros");
    }
}

#[cfg(test)]
mod topology_tests {
    use super::*;
    use tcpaccel_net::LinkKind;

    #[test]
    fn each_segment_delays_half_its_rtt_exactly() {
        // 50 ms / 3 is no whole number of microseconds; the delays are not
        // rounded (they were while the topology went through TOML text).
        let c = Chain::parse("dante/3", Duration::from_millis(50)).unwrap();
        let t = c.topology().unwrap();
        assert_eq!(t.links.len(), 3);
        for (l, rtt) in t.links.iter().zip(&c.rtts) {
            let LinkKind::Emulated { a_to_b, b_to_a } = l.kind else { panic!("{} is not emulated", l.name) };
            assert_eq!(a_to_b.delay, *rtt / 2);
            assert_eq!(b_to_a.delay, *rtt / 2);
            assert_eq!(a_to_b.rate, None, "no rate limit");
        }
        assert_eq!(t.links[0].b.addr.unwrap().addr, IpAddr::V4(Chain::right_of_segment(1)));
    }
}
