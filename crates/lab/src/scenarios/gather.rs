//! `lab run gather`: [GatherQoS]'s gathering server with priority QoS. A star:
//! the server `srv` sits behind one emulated shared link (rate, RTT, drop-tail
//! buffer) to the router `hub`; high- and low-priority clients hang off the
//! hub on plain veth links and send backlogged for the whole run. The server
//! (`tcpaccel_gather`) runs in-process in `srv`'s namespace and reports each
//! client's goodput every interval; those reports are the samples.
//!
//! Variants: `equal` (the pool split evenly, the paper's baseline), `buffer`
//! ([GatherQoS] §3.1 allocation only) and `buffer+streams` (§3.1 plus the §3.2
//! stream-count search). `share` picks who holds a demand on the pool (see
//! `tcpaccel_gather::share`): per client, streams only split the client's
//! window; per connection, each stream brings its own window, so
//! `buffer+streams` can enlarge a client's share (with one stream per client,
//! as in `equal` and `buffer`, the two agree). `model=2` adds interfering bulk TCP transfers
//! (`interferers` parallel flows, the paper's three interference terminals)
//! from an extra host `x` to `srv` over the shared link during the middle
//! third of the run (the paper's Model 2 interferes for 100–500 s).
//!
//! The shared link's rate decides whether Model 2 shows the paper's effect.
//! [GatherQoS] §4 explains it by the link: with interference "each connection's
//! effective bandwidth becomes small", so a window sized for the target is not
//! enough and more connections win more of the link. The default 7 Mbit/s is
//! just above what the 100 KB pool's windows carry at 120 ms (6.6 Mbit/s), so
//! without interference the pool, not the link, limits (Model 1 unchanged);
//! with three Reno interferers the high class misses its target unless it
//! opens streams. At 10 Mbit/s the interferers leave the gather flows enough
//! link that the high window alone still carries the target (BENCHMARKS.md,
//! "Gathering server QoS", has the figures at 7 and at 10 Mbit/s).
//!
//! What it is not: not ns-2. The clients use TCP Reno as in the paper (param
//! `cc`, set per socket: a namespace inherits the host's default, bbr here),
//! and so do the interferers; the shapes are scaled to what a 2-core VM sustains.

use crate::runner::claims::{Claim, Figure, Goal, Measure, GOAL_BENCH, GOAL_DIRECTION};
use crate::runner::records::{MetricSpec, Published};
use crate::runner::scenario::{
    interrupted, stop_flag, ParamSpec, Params, RunConfig, RunCtx, Scenario, Testbed,
};
use crate::runner::typed::{scenario_params, ScenarioParams};
use crate::testbeds::dumbbell::end_v4;
use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};
use tcpaccel_core::scale::Dilation;
use tcpaccel_core::units::{format_duration, Bytes, QueueLimit, Rate};
use tcpaccel_gather::{
    parse_class, Event, Limit, Policy, SendOptions, SendReport, Server, ServerConfig, Sharing, SinkSpec,
    Source,
};
use tcpaccel_net::{LinkSpec, Network, RouteTo, Topology, TopologyBuilder};
use tcpaccel_traffic::{run_send, spawn_recv, RecvConfig, SendConfig, Volume};

pub struct Gather;

const GATHER_PORT: u16 = 7300;
const BULK_PORT: u16 = 7301;
/// A client's mean goodput counts as meeting its target within this fraction.
const MET_MARGIN: f64 = 0.05;

scenario_params! {
    /// The gather scenario's parameters, read from the resolved map ([`Params::typed`]).
    pub struct GatherParams {
        clients: usize = "3" => "clients per class (high and low), 1 to 8",
        high: Rate = "1mbit" => "target of the high-priority class",
        low: Rate = "500kbit" => "target of the low-priority class",
        pool: Bytes = "100KB" => "the server's receive-buffer pool (the paper: 100 KB, then 60 KB)",
        model: u8 = "1" => "1: clients only; 2: plus interfering bulk traffic in the middle third",
        rate: Rate = "7mbit"
            => "shared link rate (server side): just above what the 100 KB pool's windows carry at 120 ms \
                (6.6 Mbit/s), so Model 1 stays pool-limited and Model 2's interferers shrink every connection's \
                share of the link below the high target ([GatherQoS] §4); at 10mbit they do not",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        rtt: Duration = "120ms" => "round-trip delay of the shared link",
        buffer: Bytes = "60KB" => "drop-tail buffer of the shared link (about 40 packets)",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        duration: Duration = "45s" => "how long every client sends",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        warmup: Duration = "5s" => "start of each client's transfer left out of the metrics",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        interval: Duration = "1s" => "the server's measurement and tuning interval (at least 100ms)",
        max_streams: u32 = "4" => "streams per client at most (buffer+streams), 1 to 64",
        cc: String = "reno"
            => "congestion control of every sender (clients and interferers), set per socket ([GatherQoS] §4 \
                Table 1: TCP Reno)",
        interferers: u16 = "3" => "model=2: parallel bulk flows from x (the paper's interference terminals 0, 1, 2)",
        #[serde(deserialize_with = "sharing")]
        share: Sharing = "client"
            => "who holds a demand on the pool (gather serve --share): client (one window per client, split \
                over its streams) or connection (one window per data stream: streams enlarge a client's share)",
    }
}

/// `share`: `client` or `connection` ([`Sharing::parse`]).
fn sharing<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Sharing, D::Error> {
    let s: String = serde::Deserialize::deserialize(d)?;
    Sharing::parse(s.trim()).ok_or_else(|| serde::de::Error::custom("expected client or connection"))
}

impl GatherParams {
    /// The parameters with their ranges checked.
    fn read(p: &Params) -> Result<GatherParams> {
        let q: GatherParams = p.typed()?;
        let range = |key: &str, v: u64, lo: u64, hi: u64| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(anyhow::anyhow!("parameter {key}=\"{v}\": expected a whole number from {lo} to {hi}"))
            }
        };
        range("clients", q.clients as u64, 1, 8)?;
        range("model", q.model.into(), 1, 2)?;
        range("interferers", q.interferers.into(), 1, 16)?;
        range("max_streams", q.max_streams.into(), 1, 64)?;
        if q.warmup + Duration::from_secs(1) >= q.duration {
            bail!(
                "warmup={} leaves nothing of duration={} (it needs at least 1 s more)",
                format_duration(q.warmup),
                format_duration(q.duration)
            );
        }
        if q.interval < Duration::from_millis(100) {
            bail!("parameter interval=\"{}\": expected at least 100ms", format_duration(q.interval));
        }
        Ok(q)
    }
}

/// The names of this scenario's metrics, for its records, claims and
/// tests to name them by.
pub mod metric {
    pub const STREAMS_MAX: &str = "streams_max";
    pub const CONVERGE_S: &str = "converge_s";
    pub const SETTLE_S: &str = "settle_s";

    /// The names of one priority class's metrics (and its series).
    #[derive(Debug, Clone, Copy)]
    pub struct Class {
        /// `high` or `low`.
        pub name: &'static str,
        /// The class's per-interval mean goodput: a series, and the key of the published target.
        pub mbps: &'static str,
        pub mean_mbps: &'static str,
        pub min_mbps: &'static str,
        pub below_frac: &'static str,
        pub met: &'static str,
        pub mid_mbps: &'static str,
        pub mid_min_mbps: &'static str,
        pub mid_met: &'static str,
    }

    pub const HIGH: Class = Class {
        name: "high",
        mbps: "high_mbps",
        mean_mbps: "high_mean_mbps",
        min_mbps: "high_min_mbps",
        below_frac: "high_below_frac",
        met: "high_met",
        mid_mbps: "high_mid_mbps",
        mid_min_mbps: "high_mid_min_mbps",
        mid_met: "high_mid_met",
    };
    pub const LOW: Class = Class {
        name: "low",
        mbps: "low_mbps",
        mean_mbps: "low_mean_mbps",
        min_mbps: "low_min_mbps",
        below_frac: "low_below_frac",
        met: "low_met",
        mid_mbps: "low_mid_mbps",
        mid_min_mbps: "low_mid_min_mbps",
        mid_met: "low_mid_met",
    };

    /// The human names of the keys this scenario records (metrics and
    /// series), as its tables and plots title them.
    pub const NAMES: &[(&str, &str)] = &[
        (HIGH.mbps, "High-priority goodput"),
        (HIGH.mean_mbps, "High priority: mean goodput"),
        (HIGH.min_mbps, "High priority: worst client's goodput"),
        (HIGH.below_frac, "High priority: intervals below target"),
        (HIGH.met, "High priority: target met"),
        (HIGH.mid_mbps, "High priority: goodput in the middle third"),
        (HIGH.mid_min_mbps, "High priority: worst client in the middle third"),
        (HIGH.mid_met, "High priority: target met in the middle third"),
        (LOW.mbps, "Low-priority goodput"),
        (LOW.mean_mbps, "Low priority: mean goodput"),
        (LOW.min_mbps, "Low priority: worst client's goodput"),
        (LOW.below_frac, "Low priority: intervals below target"),
        (LOW.met, "Low priority: target met"),
        (LOW.mid_mbps, "Low priority: goodput in the middle third"),
        (LOW.mid_min_mbps, "Low priority: worst client in the middle third"),
        (LOW.mid_met, "Low priority: target met in the middle third"),
        (STREAMS_MAX, "Most streams of a client"),
        (CONVERGE_S, "Stream-count search time"),
        (SETTLE_S, "Stream-count settle time"),
    ];
}

impl Scenario for Gather {
    fn name(&self) -> &'static str {
        "gather"
    }
    fn title(&self) -> &'static str {
        "Gathering server QoS: buffer allocation and stream tuning ([GatherQoS])"
    }
    fn description(&self) -> &'static str {
        "High- and low-priority clients send backlogged to one gathering server behind a shared emulated link. \
         The server splits its receive-buffer pool evenly (equal), by [GatherQoS]'s allocation (buffer), or by the \
         allocation plus the parallel-stream search (buffer+streams). Per-client goodput over time against the \
         class targets; model=2 adds interfering bulk flows on the shared link for the middle third."
    }
    fn params(&self) -> Vec<ParamSpec> {
        GatherParams::specs()
    }
    fn check_params(&self, p: &Params) -> Result<()> {
        GatherParams::read(p).map(drop)
    }
    fn quick(&self) -> Vec<(&'static str, &'static str)> {
        vec![("clients", "2"), ("duration", "10s"), ("warmup", "3s"), ("interval", "500ms")]
    }
    fn default_repeats(&self) -> u32 {
        1
    }
    fn variants(&self, _p: &Params) -> Result<Vec<String>> {
        Ok(vec!["equal".into(), "buffer".into(), "buffer+streams".into()])
    }
    fn names(&self) -> Vec<(&'static str, &'static str)> {
        metric::NAMES.to_vec()
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        let mut m = Vec::new();
        for k in [metric::HIGH, metric::LOW] {
            let c = k.name;
            m.push(MetricSpec::new(
                k.mean_mbps,
                "Mbit/s",
                true,
                &format!("mean goodput of a {c}-priority client after warm-up"),
            ));
            m.push(MetricSpec::new(
                k.min_mbps,
                "Mbit/s",
                true,
                &format!("mean goodput of the worst {c}-priority client"),
            ));
            m.push(MetricSpec::new(
                k.below_frac,
                "fraction",
                false,
                &format!("fraction of {c}-priority client intervals below the target"),
            ));
            m.push(MetricSpec::new(
                k.met,
                "0/1",
                true,
                &format!("1 when every {c}-priority client's mean is within 5% of its target or above"),
            ));
            m.push(MetricSpec::new(
                k.mid_mbps,
                "Mbit/s",
                true,
                &format!("mean {c}-priority goodput in the middle third (interference with model=2)"),
            ));
            m.push(MetricSpec::new(
                k.mid_min_mbps,
                "Mbit/s",
                true,
                &format!("middle-third mean of the worst {c}-priority client"),
            ));
            m.push(MetricSpec::new(
                k.mid_met,
                "0/1",
                true,
                &format!("1 when every {c}-priority client's middle-third mean is within 5% of its target or above"),
            ));
        }
        m.push(MetricSpec::new(metric::STREAMS_MAX, "streams", false, "most streams any client had"));
        m.push(MetricSpec::new(
            metric::CONVERGE_S,
            "s",
            false,
            "stream-count search time ([GatherQoS] §3.2): per client and phase (start, and with model=2 the \
             interference's start and end), from the interval that started the search to the last stream-count \
             change in that phase; the largest (0 when the count never moved; resolution one interval)",
        ));
        m.push(MetricSpec::new(
            metric::SETTLE_S,
            "s",
            false,
            "per client and phase, time from the phase start to the last stream-count change in it (includes \
             the time before the client missed its target); the largest",
        ));
        m
    }
    fn published(&self) -> Vec<Published> {
        vec![
            Published {
                variant: "*".into(),
                metric: metric::HIGH.mbps.into(),
                value: 1.0,
                source: "[GatherQoS] §4: high-priority target".into(),
            },
            Published {
                variant: "*".into(),
                metric: metric::LOW.mbps.into(),
                value: 0.5,
                source: "[GatherQoS] §4: low-priority target".into(),
            },
        ]
    }
    fn notes(&self, p: &Params) -> Result<Vec<String>> {
        let mut n = vec![
            "The paper (ns-2, Reno, 40-packet buffers): equal splitting misses the high-priority target at \
             times; the proposal meets both targets at 100 KB; at 60 KB it keeps low at 0.5 Mbit/s and high as \
             close to 1.0 as the pool allows. Reference lines on high_mbps/low_mbps are the targets at their \
             defaults."
                .into(),
        ];
        let q = GatherParams::read(p)?;
        if q.model == 2 {
            n.push(
                "Model 2: with interference, buffer tuning alone misses the high target in the paper; \
                 adding stream tuning meets it."
                    .into(),
            );
        }
        if q.share == Sharing::PerConnection {
            n.push(
                "share=connection: every data stream is a demand on the pool with its client's target \
                 (W = T_t·RTT each), so in buffer+streams a client that gets more streams gets a larger window \
                 and the others' shares shrink ([GatherQoS] §3.1 'per connection' read literally)."
                    .into(),
            );
        }
        Ok(n)
    }
    fn claims(&self) -> &'static [Claim] {
        CLAIMS
    }
    fn estimate(&self, p: &Params, _d: Dilation) -> Result<Duration> {
        Ok(GatherParams::read(p)?.duration + Duration::from_secs(4))
    }
    fn prepare(&self, p: &Params, _config: &RunConfig, _dir: &Path) -> Result<Box<dyn Testbed>> {
        let q = GatherParams::read(p)?;
        Ok(Box::new(GatherBed {
            clients: q.clients,
            high: q.high,
            low: q.low,
            pool: q.pool,
            model: q.model.into(),
            rate: q.rate,
            rtt: q.rtt,
            buffer: q.buffer,
            duration: q.duration,
            warmup: q.warmup,
            interval: q.interval,
            max_streams: q.max_streams,
            cc: q.cc,
            interferers: q.interferers,
            sharing: q.share,
        }))
    }
}

struct GatherBed {
    clients: usize,
    high: Rate,
    low: Rate,
    pool: Bytes,
    model: u64,
    rate: Rate,
    rtt: Duration,
    buffer: Bytes,
    duration: Duration,
    warmup: Duration,
    interval: Duration,
    max_streams: u32,
    /// Congestion control of every sender socket.
    cc: String,
    /// Model 2: parallel bulk flows of the interferer.
    interferers: u16,
    /// Per-client or per-connection demands on the pool.
    sharing: Sharing,
}

/// Client node names and classes: `high1..`, then `low1..`.
fn client_list(n: usize) -> Vec<(String, &'static str)> {
    let mut v: Vec<(String, &'static str)> = (1..=n).map(|i| (format!("high{i}"), "high")).collect();
    v.extend((1..=n).map(|i| (format!("low{i}"), "low")));
    v
}

/// The star: `srv` == emulated shared link == `hub`, and every client (and
/// the interferer `x`) on its own veth to `hub`.
fn topology(bed: &GatherBed) -> Result<Topology> {
    let mut t = TopologyBuilder::new("lab-gather");
    t.host("srv").route_via(RouteTo::Default, Ipv4Addr::new(10, 31, 0, 2));
    let mut nodes: Vec<String> = client_list(bed.clients).into_iter().map(|(n, _)| n).collect();
    nodes.push("x".into());
    for (i, n) in nodes.iter().enumerate() {
        t.host(n).route_via(RouteTo::Default, Ipv4Addr::new(10, 31, i as u8 + 1, 1));
    }
    t.router("hub");
    t.link(
        LinkSpec::emulated(
            end_v4("srv", [10, 31, 0, 1], 24),
            end_v4("hub", [10, 31, 0, 2], 24).ifname("shared"),
        )
        .name("shared")
        .rate(bed.rate)
        .delay(bed.rtt / 2)
        .buffer(QueueLimit::Bytes(bed.buffer.0)),
    );
    for (i, n) in nodes.iter().enumerate() {
        let net = i as u8 + 1;
        t.link(
            LinkSpec::veth(
                end_v4("hub", [10, 31, net, 1], 24).ifname(format!("p{net}")),
                end_v4(n, [10, 31, net, 2], 24),
            )
            .name(format!("a-{n}")),
        );
    }
    t.build().context("building the gathering star")
}

/// One status report of one client, in seconds since the clients started.
#[derive(Debug, Clone)]
struct Point {
    t: f64,
    mbps: f64,
    streams: u32,
    alloc_kb: f64,
    clamp_kb: f64,
    rtt_ms: f64,
}

/// Per-client series and summaries of one run.
struct Outcome {
    /// Client id → its points in time order.
    points: BTreeMap<String, Vec<Point>>,
    /// Client id → server time of its join (seconds since clients started).
    joined: HashMap<String, f64>,
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

impl GatherBed {
    fn server_config(&self, variant: &str) -> Result<ServerConfig> {
        let classes = vec![
            parse_class(&format!("high={}bit,2", self.high.bits_per_sec()))?,
            parse_class(&format!("low={}bit,1", self.low.bits_per_sec()))?,
        ];
        let per_client = if variant == "buffer+streams" { self.max_streams } else { 1 };
        let mut cfg = ServerConfig::new(classes, self.pool.0, None, per_client, self.interval)
            .context("gather server configuration")?;
        cfg.sharing = self.sharing;
        match variant {
            "equal" => {
                cfg.policy = Policy::Equal;
                cfg.tune_streams = false;
            }
            "buffer" => {
                cfg.policy = Policy::Seed003;
                cfg.tune_streams = false;
            }
            "buffer+streams" => {
                cfg.policy = Policy::Seed003;
                cfg.tune_streams = true;
            }
            v => bail!("unknown variant {v:?}"),
        }
        Ok(cfg)
    }

    /// Builds the star, runs server, clients and (model 2) the interferer; returns what the server saw.
    fn run_network(&self, ctx: &mut RunCtx<'_>) -> Result<Outcome> {
        let cfg = self.server_config(&ctx.variant)?;
        let net = Network::up(&topology(self)?)?;
        let list = client_list(self.clients);
        for n in list.iter().map(|(n, _)| n.as_str()).chain(["srv", "x"]) {
            crate::testbeds::dumbbell::sysctls(&net, n, &crate::testbeds::dumbbell::baseline_sysctls())?;
        }
        let srv_ip = net.addr("srv")?;
        let listen = SocketAddr::new(srv_ip, GATHER_PORT);

        // The server: its own thread in srv's namespace, stopped by a oneshot.
        let (ev_tx, mut ev_rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (bound_tx, bound_rx) = std::sync::mpsc::channel::<Result<SocketAddr, String>>();
        let srv_ns = net.ns("srv")?;
        let server = std::thread::spawn(move || -> Result<()> {
            tcpaccel_sys::netns::enter(&srv_ns).context("entering the server's namespace")?;
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("server runtime")?;
            rt.block_on(async move {
                let s = match Server::bind(cfg, listen, SinkSpec::Discard, Some(ev_tx)).await {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = bound_tx.send(Err(e.to_string()));
                        return Err(anyhow::Error::new(e).context("binding the gather server"));
                    }
                };
                let _ = bound_tx.send(s.local_addr().map_err(|e| e.to_string()));
                tokio::select! {
                    r = s.run() => r.context("gather server"),
                    _ = stop_rx => Ok(()),
                }
            })
        });
        let stop_tx = std::cell::Cell::new(Some(stop_tx));
        let stop_server = move |server: std::thread::JoinHandle<Result<()>>| -> Result<()> {
            if let Some(tx) = stop_tx.take() {
                let _ = tx.send(());
            }
            match server.join() {
                Ok(r) => r,
                Err(_) => bail!("the gather server thread panicked"),
            }
        };
        let addr = match bound_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => {
                let _ = stop_server(server);
                bail!("gather server did not start: {e}");
            }
            Err(_) => {
                let _ = stop_server(server);
                bail!("gather server did not report its address within 10 s");
            }
        };
        let t_bound = Instant::now();

        // Model 2's interferer: a bulk receiver in srv, the sender starts a third in.
        let bulk_recv = if self.model == 2 {
            let rcfg = RecvConfig::new(SocketAddr::new(srv_ip, BULK_PORT));
            Some(net.run_in("srv", move || spawn_recv(rcfg))?.context("starting the bulk receiver in srv")?)
        } else {
            None
        };

        let t_clients = Instant::now();
        let clients_offset = t_clients.duration_since(t_bound).as_secs_f64();
        let mut threads = Vec::new();
        for (i, (id, class)) in list.iter().enumerate() {
            let ns = net.ns(id)?;
            let opts = SendOptions {
                server: addr,
                id: id.clone(),
                class: (*class).to_string(),
                target: None,
                cc: Some(self.cc.clone()),
                timeout: tcpaccel_gather::client::DEFAULT_TIMEOUT,
                source: Source::Synthetic {
                    rate: None,
                    limit: Limit::Duration(self.duration),
                    seed: ctx.seed ^ (i as u64 + 1),
                },
            };
            let id = id.clone();
            threads.push(std::thread::spawn(move || -> Result<SendReport> {
                let r = tcpaccel_sys::netns::run_in(&ns, move || tcpaccel_gather::blocking::send(opts))
                    .with_context(|| format!("entering {id}'s namespace"))?;
                r.with_context(|| format!("client {id}"))
            }));
        }
        let interferer = if self.model == 2 {
            let ns = net.ns("x")?;
            let third = self.duration / 3;
            let mut scfg = SendConfig::new(SocketAddr::new(srv_ip, BULK_PORT));
            scfg.volume = Volume::Duration(third);
            scfg.cc = Some(self.cc.clone());
            scfg.parallel = self.interferers;
            scfg.seed = ctx.seed;
            scfg.stop = Some(stop_flag());
            Some(std::thread::spawn(move || -> Result<f64> {
                let deadline = Instant::now() + third;
                while Instant::now() < deadline {
                    if interrupted() {
                        return Ok(0.0);
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                let s = tcpaccel_sys::netns::run_in(&ns, move || run_send(scfg, |_| {}))
                    .context("entering x's namespace")?
                    .context("interfering bulk transfer from x")?;
                Ok(s.goodput_bps as f64 / 1e6)
            }))
        } else {
            None
        };

        // A client that never finishes (a lost connection, a namespace gone)
        // must not hang the lab: past the transfer plus a grace period the
        // server stops, which closes every connection and ends the clients.
        let deadline = t_clients + self.duration + Duration::from_secs(30);
        while threads.iter().any(|t| !t.is_finished()) && Instant::now() < deadline && !interrupted() {
            std::thread::sleep(Duration::from_millis(200));
        }
        let hung = threads.iter().filter(|t| !t.is_finished()).count();
        let mut failures = Vec::new();
        let mut server = Some(server);
        let mut served = Ok(());
        if hung > 0 {
            failures
                .push(format!("{hung} client(s) still running 30 s after their transfer; server stopped"));
            if let Some(s) = server.take() {
                served = stop_server(s);
            }
        }
        let mut reports = Vec::new();
        for t in threads {
            match t.join() {
                Ok(Ok(r)) => reports.push(r),
                Ok(Err(e)) => failures.push(format!("{e:#}")),
                Err(_) => failures.push("a client thread panicked".into()),
            }
        }
        if let Some(h) = interferer {
            match h.join() {
                Ok(Ok(mbps)) => {
                    ctx.note(format!("interfering bulk flow: {mbps:.2} Mbit/s over its third"))?
                }
                Ok(Err(e)) => failures.push(format!("{e:#}")),
                Err(_) => failures.push("the interferer thread panicked".into()),
            }
        }
        if let Some(r) = bulk_recv {
            let _ = r.stop();
        }
        if let Some(s) = server.take() {
            served = stop_server(s);
        }
        ctx.emulator_timing(crate::testbeds::emulator_timing(&net.teardown().emulators));
        served?;
        if !failures.is_empty() {
            bail!("{}", failures.join("; "));
        }
        for r in &reports {
            if !r.complete {
                ctx.note(format!("client {} did not complete ({} B)", r.id, r.bytes))?;
            }
        }

        let mut points: BTreeMap<String, Vec<Point>> = BTreeMap::new();
        let mut joined = HashMap::new();
        while let Ok(e) = ev_rx.try_recv() {
            match e {
                Event::Status(s) => points.entry(s.id.clone()).or_default().push(Point {
                    t: s.t - clients_offset,
                    mbps: s.goodput_bps as f64 / 1e6,
                    streams: s.streams,
                    alloc_kb: s.allocation as f64 / 1e3,
                    clamp_kb: s.window_clamp as f64 / 1e3,
                    rtt_ms: s.rtt_us as f64 / 1e3,
                }),
                Event::ClientJoin { t, id, .. } => {
                    joined.entry(id).or_insert(t - clients_offset);
                }
                _ => {}
            }
        }
        Ok(Outcome { points, joined })
    }
}

impl Testbed for GatherBed {
    fn run_one(&mut self, ctx: &mut RunCtx<'_>) -> Result<()> {
        let out = self.run_network(ctx)?;
        let dur = self.duration.as_secs_f64();
        let warm = self.warmup.as_secs_f64();
        let (mid0, mid1) = (dur / 3.0, 2.0 * dur / 3.0);
        let step = self.interval.as_secs_f64();
        let mut streams_max = 0u32;
        let phases: Vec<f64> =
            if self.model == 2 { vec![0.0, mid0, mid1, f64::INFINITY] } else { vec![0.0, f64::INFINITY] };
        // Only while the client transfers: its streams close at its end.
        let (mut converge, mut settle) = (0.0f64, 0.0f64);
        for (id, pts) in &out.points {
            let end = out.joined.get(id).copied().unwrap_or(0.0) + dur - step;
            let live: Vec<Point> = pts.iter().filter(|p| p.t <= end).cloned().collect();
            let (c, s) = convergence(&live, &phases, step);
            converge = converge.max(c);
            settle = settle.max(s);
        }
        ctx.metric(metric::CONVERGE_S, converge);
        ctx.metric(metric::SETTLE_S, settle);
        for (k, target) in [(metric::HIGH, self.high), (metric::LOW, self.low)] {
            let class = k.name;
            let target = target.bits_per_sec() as f64 / 1e6;
            let ids: Vec<String> =
                client_list(self.clients).into_iter().filter(|(_, c)| *c == class).map(|(n, _)| n).collect();
            // Per-interval class mean (bucketed by interval), and per-client samples.
            let mut buckets: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
            let mut client_means = Vec::new();
            let (mut below, mut counted) = (0usize, 0usize);
            let mut all = Vec::new();
            let mut mid = Vec::new();
            let mut mid_means = Vec::new();
            for id in &ids {
                let pts = out.points.get(id).map(Vec::as_slice).unwrap_or(&[]);
                if pts.is_empty() {
                    bail!("no status from client {id}: it never reached the server");
                }
                let start = out.joined.get(id).copied().unwrap_or(0.0);
                let mut mine = Vec::new();
                let mut mine_mid = Vec::new();
                for p in pts {
                    ctx.sample(&format!("{id}_mbps"), p.t, p.mbps)?;
                    ctx.sample(&format!("{id}_alloc_kB"), p.t, p.alloc_kb)?;
                    ctx.sample(&format!("{id}_clamp_kB"), p.t, p.clamp_kb)?;
                    ctx.sample(&format!("{id}_rtt_ms"), p.t, p.rtt_ms)?;
                    ctx.sample(&format!("{id}_streams"), p.t, f64::from(p.streams))?;
                    buckets.entry((p.t / step).round() as i64).or_default().push(p.mbps);
                    streams_max = streams_max.max(p.streams);
                    // Steady part: after warm-up, before the last interval of the transfer.
                    if p.t >= start + warm && p.t <= start + dur - step {
                        mine.push(p.mbps);
                        counted += 1;
                        if p.mbps < target {
                            below += 1;
                        }
                        if p.t >= mid0 && p.t <= mid1 {
                            mine_mid.push(p.mbps);
                        }
                    }
                }
                all.extend_from_slice(&mine);
                client_means.push(mean(&mine));
                mid.extend_from_slice(&mine_mid);
                mid_means.push(mean(&mine_mid));
            }
            for (b, v) in &buckets {
                ctx.sample(k.mbps, *b as f64 * step, mean(v))?;
            }
            let worst = client_means.iter().copied().fold(f64::INFINITY, f64::min);
            let met = client_means.iter().all(|m| *m >= target * (1.0 - MET_MARGIN));
            ctx.metric(k.mean_mbps, mean(&all));
            ctx.metric(k.min_mbps, worst);
            ctx.metric(k.below_frac, if counted == 0 { f64::NAN } else { below as f64 / counted as f64 });
            ctx.metric(k.met, if met { 1.0 } else { 0.0 });
            ctx.metric(k.mid_mbps, mean(&mid));
            ctx.metric(k.mid_min_mbps, mid_means.iter().copied().fold(f64::INFINITY, f64::min));
            let mid_met = mid_means.iter().all(|m| *m >= target * (1.0 - MET_MARGIN));
            ctx.metric(k.mid_met, if mid_met { 1.0 } else { 0.0 });
        }
        ctx.metric(metric::STREAMS_MAX, f64::from(streams_max));
        Ok(())
    }
}

/// Stream-count search times of one client, the largest over the phases
/// (`phases` holds the boundaries in order, the last past the end of the
/// run; a change is a point whose count differs from the point before):
/// - search: from the interval that started the search (one `step` before
///   its first change in the phase) to its last change in the phase;
/// - settle: from the phase start to that last change (adds the time the
///   client still met its target before it started searching).
///
/// Both are 0 when the count never moves.
fn convergence(points: &[Point], phases: &[f64], step: f64) -> (f64, f64) {
    let (mut search, mut settle) = (0.0f64, 0.0f64);
    for p in phases.windows(2) {
        let changes: Vec<f64> = points
            .windows(2)
            .filter(|w| w[1].streams != w[0].streams && w[1].t >= p[0] && w[1].t < p[1])
            .map(|w| w[1].t)
            .collect();
        if let (Some(first), Some(last)) = (changes.first(), changes.last()) {
            search = search.max(last - first + step);
            settle = settle.max(last - p[0]);
        }
    }
    (search, settle)
}

/// What this scenario claims: published figures and goals, judged by the report against a run's summaries.
pub(crate) const CLAIMS: &[Claim] = &[
    Claim {
        text: "Buffer allocation meets the high-priority target (every client)",
        measure: Measure::Median { variant: "buffer", metric: metric::HIGH.met },
        goal: Goal::AtLeast(1.0),
        goal_source: GOAL_DIRECTION,
        published: Some(Figure { value: 1.0, source: "[GatherQoS] §4: met with margin at 100 KB" }),
        when: &[("model", "1"), ("pool", "100KB")],
    },
    Claim {
        text: "Buffer allocation meets the low-priority target (every client)",
        measure: Measure::Median { variant: "buffer", metric: metric::LOW.met },
        goal: Goal::AtLeast(1.0),
        goal_source: GOAL_DIRECTION,
        published: Some(Figure { value: 1.0, source: "[GatherQoS] §4: met with margin at 100 KB" }),
        when: &[("model", "1"), ("pool", "100KB")],
    },
    Claim {
        text: "With interference, buffer + stream tuning meets the high target (middle third)",
        measure: Measure::Median { variant: "buffer+streams", metric: metric::HIGH.mid_met },
        goal: Goal::AtLeast(1.0),
        goal_source: GOAL_DIRECTION,
        published: Some(Figure { value: 1.0, source: "[GatherQoS] §4: met with connection-count tuning" }),
        when: &[("model", "2")],
    },
    Claim {
        text: "With interference, buffer allocation alone misses the high target (middle third)",
        measure: Measure::Median { variant: "buffer", metric: metric::HIGH.mid_met },
        goal: Goal::AtMost(0.0),
        goal_source: GOAL_DIRECTION,
        published: Some(Figure { value: 0.0, source: "[GatherQoS] §4: missed by buffer tuning alone" }),
        when: &[("model", "2")],
    },
    Claim {
        text: "The stream-count search ends within 10 s (the longest over clients and phases)",
        measure: Measure::Median { variant: "buffer+streams", metric: metric::CONVERGE_S },
        goal: Goal::AtMost(10.0),
        goal_source: GOAL_BENCH,
        published: None,
        when: &[("model", "2")],
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::scenario::resolve_params;

    #[test]
    fn convergence_is_measured_per_phase() {
        let pt =
            |t: f64, streams: u32| Point { t, mbps: 1.0, streams, alloc_kb: 0.0, clamp_kb: 0.0, rtt_ms: 0.0 };
        let flat: Vec<Point> = (0..10).map(|i| pt(f64::from(i), 1)).collect();
        assert_eq!(convergence(&flat, &[0.0, f64::INFINITY], 1.0), (0.0, 0.0));
        // 1 -> 2 at 2 s, 2 -> 3 at 4 s; then in the second phase (from 15 s) 3 -> 4 at 21 s.
        let mut v: Vec<Point> = (0..30).map(|i| pt(f64::from(i), 1)).collect();
        for p in &mut v {
            p.streams = match p.t as u32 {
                0..=1 => 1,
                2..=3 => 2,
                4..=20 => 3,
                _ => 4,
            };
        }
        // One phase: search from 1 s (the interval before the change at 2 s) to 21 s.
        assert_eq!(convergence(&v, &[0.0, f64::INFINITY], 1.0), (20.0, 21.0));
        // Phases [0, 15) and [15, ..): searches of 3 s and 1 s; settled 4 s and 6 s after their starts.
        assert_eq!(convergence(&v, &[0.0, 15.0, f64::INFINITY], 1.0), (3.0, 6.0));
        assert_eq!(convergence(&v, &[0.0, 20.0, 25.0, f64::INFINITY], 1.0), (3.0, 4.0));
    }

    fn bed(quick: bool) -> Box<dyn Testbed> {
        let p = resolve_params(&Gather, quick, &[]).unwrap();
        Gather.prepare(&p, &RunConfig::unscaled(), Path::new("/nonexistent")).unwrap()
    }

    #[test]
    fn topology_is_a_star_with_one_emulated_shared_link() {
        let p: GatherParams = resolve_params(&Gather, false, &[]).unwrap().typed().unwrap();
        let g = GatherBed {
            clients: 3,
            high: p.high,
            low: p.low,
            pool: p.pool,
            model: 1,
            rate: p.rate,
            rtt: p.rtt,
            buffer: p.buffer,
            duration: Duration::from_secs(45),
            warmup: Duration::from_secs(5),
            interval: Duration::from_secs(1),
            max_streams: 4,
            cc: "reno".into(),
            interferers: 3,
            sharing: Sharing::PerClient,
        };
        let t = topology(&g).unwrap();
        // hub, srv, 6 clients and x.
        assert_eq!(t.nodes.len(), 9);
        let cfg = g.server_config("equal").unwrap();
        assert_eq!(cfg.policy, Policy::Equal);
        assert!(!cfg.tune_streams);
        let cfg = g.server_config("buffer+streams").unwrap();
        assert!(cfg.tune_streams && cfg.max_streams_per_client == 4);
        assert_eq!(cfg.pool, 100_000);
        assert!(g.server_config("fast").is_err());
        assert_eq!(g.server_config("buffer").unwrap().sharing, Sharing::PerClient);
        let g = GatherBed { sharing: Sharing::PerConnection, ..g };
        assert_eq!(g.server_config("buffer+streams").unwrap().sharing, Sharing::PerConnection);
    }

    #[test]
    fn parameters_are_checked() {
        let _ = bed(true);
        for (k, v, why) in [
            ("clients", "0", "parameter clients=\"0\": expected a whole number from 1 to 8"),
            ("model", "3", "parameter model=\"3\": expected a whole number from 1 to 2"),
            ("warmup", "50s", "warmup=50s leaves nothing of duration=45s"),
            ("interval", "10ms", "parameter interval=\"10ms\": expected at least 100ms"),
            ("share", "stream", "parameter share=\"stream\": expected client or connection"),
        ] {
            // Refused when resolved, before anything runs.
            let e = resolve_params(&Gather, false, &[(k.into(), v.into())]).expect_err(k).to_string();
            assert!(e.starts_with(why), "{k}={v}: {e}");
        }
    }

    #[test]
    fn client_names_fit_and_are_unique() {
        let l = client_list(8);
        assert_eq!(l.len(), 16);
        assert_eq!(l[0], ("high1".to_string(), "high"));
        assert_eq!(l[8], ("low1".to_string(), "low"));
    }

    /// Root test: a short run of all three variants (1 + 1 clients, 8 s).
    /// [GatherQoS]'s allocation gives high about twice low's window at 100 KB
    /// (§3.1, surplus split by target), so high must clearly lead in `buffer`.
    #[test]
    fn root_short_run_orders_classes_by_allocation() {
        let d = crate::runner::scenario::run_short(
            &Gather,
            &[("clients", "1"), ("duration", "8s"), ("warmup", "2s")],
        );
        let buffer = d.summaries.iter().find(|s| s.variant == "buffer").expect("buffer summary");
        let (high, low) = (buffer.metrics[metric::HIGH.mean_mbps], buffer.metrics[metric::LOW.mean_mbps]);
        assert!(low > 0.4 && high > 1.3 * low, "buffer: high {high} low {low}");
        assert!(d.samples.iter().any(|s| s.series == metric::HIGH.mbps), "class series recorded");
    }
}
