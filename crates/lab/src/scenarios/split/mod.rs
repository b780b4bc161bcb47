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

mod chain;
mod peers;

use crate::testbeds::{find_bin, parse_curl, ScratchDir};
use chain::url;
pub use chain::{dante_conf, next_hop, nginx_conf, socks_relay_args, squid_conf, Chain, Kind};
use peers::{find_peers, tcpaccel_bin, Daemon};

use crate::runner::claims::{Claim, Figure, Goal, Measure, GOAL_BENCH, GOAL_DIRECTION};
use crate::runner::records::{MetricSpec, Published};
use crate::runner::scenario::{ParamSpec, Params, RunConfig, RunCtx, Scenario, Testbed};
use crate::runner::typed::{scenario_params, ScenarioParams};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tcpaccel_core::rng::Rng;
use tcpaccel_core::scale::Dilation;
use tcpaccel_core::stats::{linear_fit, median};
use tcpaccel_core::units::Bytes;
use tcpaccel_net::Network;
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

impl SplitBed {
    fn bin(&self, name: &str) -> Result<&PathBuf> {
        self.bins.get(name).with_context(|| format!("{name} was not looked up at setup"))
    }
}

scenario_params! {
    /// The split scenario's parameters, read from the resolved map ([`Params::typed`]).
    pub struct SplitParams {
        relays: Vec<String> = "tcpaccel,tcpaccel-early,dante,squid"
            => "relay kinds for the equal splits (tcpaccel-early: tcpaccel with --early-reply)",
        segments: Vec<u32> = "2,3,4,5" => "segment counts of the equal splits (1 is `direct`)",
        uneven: Vec<String> = "40-10,30-20,25-25,20-30,10-40"
            => "2-segment splits, RTT ms client side-server side",
        uneven_relays: Vec<String> = "tcpaccel,dante" => "relay kinds for the uneven splits (empty: none)",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        rtt: Duration = "50ms" => "total RTT of the path",
        size: Bytes = "100MB" => "size of the random file downloaded (1 B to 10 GB)",
        buffers: Buffers = "centos6"
            => "centos6 (tcp_rmem/tcp_wmem max = buf_max) or kernel (this kernel's defaults)",
        buf_max: Bytes = "4MB" => "tcp_rmem/tcp_wmem maximum with buffers=centos6",
        transport: Transport = "http" => "http (nginx + curl) or raw (traffic tool; tcpaccel relays only)",
        tcpaccel_next: NextScheme = "tcpaccel+socks5"
            => "scheme tcpaccel relays name their next relay with: tcpaccel+socks5 (pipelined handshake) \
                or socks5 (step by step, as toward any SOCKS5 server)",
        relay_log: String = ""
            => "--log filter for the tcpaccel relays (e.g. tcpaccel_relay=debug: per-session set-up times); \
                their logs are kept as OUT/relay-logs/VARIANT-rREPEAT-NODE.log. Empty: not kept",
    }
}

/// `buffers`: the end hosts' and relays' socket buffer limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Buffers {
    /// tcp_rmem/tcp_wmem as CentOS 6 had them, with `buf_max` as maximum.
    Centos6,
    /// This kernel's defaults.
    Kernel,
}

/// `transport`: what carries the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// nginx and curl.
    Http,
    /// The traffic tool through `tcpaccel relay --forward` chains.
    Raw,
}

/// `tcpaccel_next`: the scheme a tcpaccel relay names its next relay with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
pub enum NextScheme {
    /// Pipelined handshake.
    #[serde(rename = "tcpaccel+socks5")]
    TcpaccelSocks5,
    /// Step by step, as toward any SOCKS5 server.
    #[serde(rename = "socks5")]
    Socks5,
}

impl NextScheme {
    fn as_str(self) -> &'static str {
        match self {
            NextScheme::TcpaccelSocks5 => "tcpaccel+socks5",
            NextScheme::Socks5 => "socks5",
        }
    }
}

impl SplitParams {
    /// The parameters with the relay kinds and the file size checked.
    fn read(p: &Params) -> Result<SplitParams> {
        let q: SplitParams = p.typed()?;
        for (key, kinds) in [("relays", &q.relays), ("uneven_relays", &q.uneven_relays)] {
            for k in kinds {
                Kind::parse(k).with_context(|| {
                    format!(
                        "parameter {key}={:?}: expected a comma-separated list of relay kinds",
                        kinds.join(",")
                    )
                })?;
            }
        }
        if q.size.0 == 0 || q.size.0 > 10_000_000_000 {
            bail!("parameter size=\"{}\": expected a size from 1 B to 10 GB", q.size);
        }
        Ok(q)
    }

    /// The variants: `direct`, each equal split, each uneven split; a split
    /// that does not parse is refused naming its parameter.
    fn variants(&self) -> Result<Vec<String>> {
        let mut v = vec!["direct".to_string()];
        let mut add = |name: String, key: &str, values: String, form: &str| -> Result<()> {
            let c = Chain::parse(&name, self.rtt)
                .with_context(|| format!("parameter {key}={values:?}: expected {form}"))?;
            if self.transport == Transport::Raw
                && matches!(c.kind, Kind::Dante | Kind::Squid | Kind::TcpaccelEarly)
            {
                bail!("transport=raw runs tcpaccel --forward chains only; {name} needs transport=http");
            }
            if !v.contains(&name) {
                v.push(name);
            }
            Ok(())
        };
        let segments = self.segments.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        for k in &self.relays {
            for n in &self.segments {
                add(format!("{k}/{n}"), "segments", segments.clone(), "segment counts from 2 to 8")?;
            }
        }
        for k in &self.uneven_relays {
            for s in &self.uneven {
                let form = "2-segment splits CLIENT_MS-SERVER_MS, e.g. 40-10";
                add(format!("{k}/{s}"), "uneven", self.uneven.join(","), form)?;
            }
        }
        Ok(v)
    }
}

/// The names of this scenario's metrics, for its records, claims and
/// tests to name them by.
pub mod metric {
    pub const THROUGHPUT_MBPS: &str = "throughput_MBps";
    pub const RELAY_CPU_S_PER_GB: &str = "relay_cpu_s_per_GB";
    pub const FIRST_BYTE_S: &str = "first_byte_s";
    pub const SECONDS: &str = "seconds";

    /// The human names of the keys this scenario records (metrics and
    /// series), as its tables and plots title them.
    pub const NAMES: &[(&str, &str)] = &[
        (THROUGHPUT_MBPS, "Throughput"),
        (RELAY_CPU_S_PER_GB, "Relay CPU per GB"),
        (FIRST_BYTE_S, "Time to first byte"),
        (SECONDS, "Transfer time"),
        ("throughput_vs_segments_MBps", "Throughput against segment count"),
    ];
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
        SplitParams::specs()
    }
    fn check_params(&self, p: &Params) -> Result<()> {
        SplitParams::read(p)?.variants().map(drop)
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
        SplitParams::read(p)?.variants()
    }
    fn paper_scale(&self) -> &'static [(&'static str, &'static str)] {
        &[("buf_max", "4MB"), ("size", "100MB")]
    }
    fn names(&self) -> Vec<(&'static str, &'static str)> {
        metric::NAMES.to_vec()
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        vec![
            MetricSpec {
                name: metric::THROUGHPUT_MBPS.into(),
                unit: "MB/s".into(),
                higher_is_better: true,
                description: "file size / curl's total time (MB = 10^6 bytes)".into(),
            },
            MetricSpec {
                name: metric::RELAY_CPU_S_PER_GB.into(),
                unit: "s/GB".into(),
                higher_is_better: false,
                description: "CPU seconds of all relays together per GB moved (none for direct)".into(),
            },
            MetricSpec {
                name: metric::FIRST_BYTE_S.into(),
                unit: "s".into(),
                higher_is_better: false,
                description: "curl's time to the first byte: setup through the chain (HTTP only)".into(),
            },
            MetricSpec {
                name: metric::SECONDS.into(),
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
                metric: metric::THROUGHPUT_MBPS.into(),
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
    fn notes(&self, p: &Params) -> Result<Vec<String>> {
        let buffers = match SplitParams::read(p)?.buffers {
            Buffers::Centos6 => "centos6",
            Buffers::Kernel => "kernel",
        };
        Ok(vec![
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
        ])
    }
    fn claims(&self) -> &'static [Claim] {
        CLAIMS
    }
    fn estimate(&self, p: &Params, _d: Dilation) -> Result<Duration> {
        let mb = SplitParams::read(p)?.size.0 as f64 / 1e6;
        Ok(Duration::from_secs_f64(2.0 + mb / 15.0))
    }
    fn prepare(&self, p: &Params, _config: &RunConfig, dir: &Path) -> Result<Box<dyn Testbed>> {
        let q = SplitParams::read(p)?;
        let (total, size) = (q.rtt, q.size);
        let buffers = match q.buffers {
            Buffers::Centos6 => vec![
                ("net.ipv4.tcp_rmem".to_string(), format!("{CENTOS6_RMEM} {}", q.buf_max.0)),
                ("net.ipv4.tcp_wmem".to_string(), format!("{CENTOS6_WMEM} {}", q.buf_max.0)),
            ],
            Buffers::Kernel => Vec::new(),
        };
        let order = q.variants()?;
        let mut kinds: Vec<Kind> = Vec::new();
        for v in &order {
            kinds.push(Chain::parse(v, total)?.kind);
        }
        let raw = q.transport == Transport::Raw;
        let next_scheme = q.tcpaccel_next.as_str().to_string();
        let bins = find_peers(&kinds, raw, find_bin)?;
        let tcpaccel = tcpaccel_bin()?;
        let work = ScratchDir::new(&std::env::temp_dir(), "tcpaccel-split")?;
        let www = work.path().join("www");
        std::fs::create_dir_all(&www).with_context(|| format!("creating {}", www.display()))?;
        write_payload(&www.join("payload.bin"), size.0, 0x5eed_0002)?;
        Ok(Box::new(SplitBed {
            total,
            size: size.0,
            buffers,
            tcpaccel,
            bins,
            work,
            results: BTreeMap::new(),
            order,
            raw,
            next_scheme,
            relay_log: Some(q.relay_log.trim().to_string()).filter(|f| !f.is_empty()),
            out: dir.to_path_buf(),
        }))
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
    work: ScratchDir,
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
        let d = self.work.path().join(name);
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
        let network = Network::up(&chain.topology()?).context("building the split chain")?;
        // Declared after `network`, so dropped before it (also on an error or a panic): a
        // namespace with a live daemon in it would outlive the teardown.
        let mut daemons: Vec<Daemon> = Vec::new();
        let net = &network;
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
                ctx.metric(metric::RELAY_CPU_S_PER_GB, cpu / (self.size as f64 / 1e9));
            }
            drop(recv.stop());
            for d in daemons.iter_mut().rev() {
                d.stop();
            }
            self.keep_logs(ctx, &chain, &daemons)?;
            drop(daemons);
            ctx.emulator_timing(crate::testbeds::emulator_timing(&network.teardown().emulators));
            let mbps = r?;
            return self.record(ctx, &chain, mbps);
        }
        let sdir = self.dir("nginx")?;
        let conf = sdir.join("nginx.conf");
        std::fs::write(&conf, nginx_conf(server, &self.work.path().join("www"), &sdir)?)
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
                ctx.metric(metric::FIRST_BYTE_S, first);
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
            ctx.metric(metric::RELAY_CPU_S_PER_GB, cpu / (self.size as f64 / 1e9));
        }
        for d in daemons.iter_mut().rev() {
            d.stop();
        }
        self.keep_logs(ctx, &chain, &daemons)?;
        drop(daemons);
        ctx.emulator_timing(crate::testbeds::emulator_timing(&network.teardown().emulators));
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
        ctx.metric(metric::THROUGHPUT_MBPS, mbps);
        ctx.metric(metric::SECONDS, self.size as f64 / 1e6 / mbps);
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
            num: ("tcpaccel/5", metric::THROUGHPUT_MBPS),
            den: ("direct", metric::THROUGHPUT_MBPS),
        },
        goal: Goal::AtLeast(4.5),
        goal_source: GOAL_BENCH,
        published: Some(Figure { value: 46.1 / 11.0, source: "[SplitTCP]: Dante HTTP 46.1 / 11.0 MB/s" }),
        when: &[],
    },
    Claim {
        text: "tcpaccel relays at least match Dante at 5 segments",
        measure: Measure::Ratio {
            num: ("tcpaccel/5", metric::THROUGHPUT_MBPS),
            den: ("dante/5", metric::THROUGHPUT_MBPS),
        },
        goal: Goal::AtLeast(1.0),
        goal_source: GOAL_BENCH,
        published: None,
        when: &[],
    },
    Claim {
        text: "tcpaccel relays at least match Squid at 5 segments",
        measure: Measure::Ratio {
            num: ("tcpaccel/5", metric::THROUGHPUT_MBPS),
            den: ("squid/5", metric::THROUGHPUT_MBPS),
        },
        goal: Goal::AtLeast(1.0),
        goal_source: GOAL_BENCH,
        published: None,
        when: &[],
    },
    Claim {
        text: "With --early-reply the first byte through 5 relays comes no later than through Squid's",
        measure: Measure::Ratio {
            num: ("tcpaccel-early/5", metric::FIRST_BYTE_S),
            den: ("squid/5", metric::FIRST_BYTE_S),
        },
        goal: Goal::AtMost(1.0),
        goal_source: GOAL_BENCH,
        published: None,
        when: &[],
    },
    Claim {
        text: "An equal split beats a 40/10 split (tcpaccel, 2 segments)",
        measure: Measure::Ratio {
            num: ("tcpaccel/25-25", metric::THROUGHPUT_MBPS),
            den: ("tcpaccel/40-10", metric::THROUGHPUT_MBPS),
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

    #[test]
    fn fit_recovers_the_papers_model() {
        // T_n = 10·(0.3 + 0.7 n): a = 0.3, b = 0.7, overhead 30%.
        let pts: Vec<(f64, f64)> = (1..=5).map(|n| (n as f64, 10.0 * (0.3 + 0.7 * n as f64))).collect();
        let (a, b, r2) = fit(&pts).unwrap();
        assert!((a - 0.3).abs() < 1e-9 && (b - 0.7).abs() < 1e-9 && (r2 - 1.0).abs() < 1e-9);
        assert!(fit(&[(2.0, 5.0), (3.0, 6.0)]).is_none(), "no 1-segment point, no T");
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
        let e = crate::runner::scenario::resolve_params(&Split, false, &raw).unwrap_err();
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
