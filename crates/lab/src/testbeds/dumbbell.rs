//! The testbed most scenarios share: two hosts joined by one emulated
//! bottleneck ([PSPacer]'s GtrcNET-1 setup in software), one bulk transfer per
//! run, built fresh for every run so no queue, route-metric or socket state
//! leaks from one variant into the next.
//!
//! A run records the sender's TCP_INFO intervals (goodput, cwnd, srtt), the
//! emulator's drops, and from its 500 µs meter both a 100 ms bandwidth series
//! and a 500 µs zoom around the first drop (the paper's Fig. 2 and Fig. 3).

use crate::runner::records::MetricSpec;
use crate::runner::scenario::RunCtx;
use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;
use tcpaccel_core::meter::GapDeviation;
use tcpaccel_core::units::{Bytes, QueueLimit, Rate};
use tcpaccel_net::{Cidr, EndSpec, LinkSpec, MeterOptions, Network, Topology, TopologyBuilder};
use tcpaccel_traffic::{run_send, spawn_recv, Pace, RecvConfig, Report, SendConfig, Volume};

pub const DATA_PORT: u16 = 5201;

/// The congestion control of every variant that does not name one. Set per
/// socket: a new namespace inherits the host's default (bbr on this machine),
/// and outside the initial namespace only `tcp_allowed_congestion_control`
/// may become a namespace default, so CUBIC can only be had per socket.
/// CUBIC stands in for the papers' BIC (not in this kernel).
pub const DEFAULT_CC: &str = "cubic";

/// The emulated path.
#[derive(Debug, Clone)]
pub struct Path2 {
    pub rate: Rate,
    pub rtt: Duration,
    pub buffer: Bytes,
}

impl Path2 {
    /// The topology: h1 (10.9.0.1) == emulator == h2 (10.9.0.2), delay RTT/2 each way.
    pub fn topology(&self) -> Result<Topology> {
        let mut t = TopologyBuilder::new("lab-dumbbell");
        t.host("h1");
        t.host("h2");
        t.link(
            LinkSpec::emulated(end_v4("h1", [10, 9, 0, 1], 24), end_v4("h2", [10, 9, 0, 2], 24))
                .name("wan")
                .rate(self.rate)
                .delay(self.rtt / 2)
                .buffer(QueueLimit::Bytes(self.buffer.0)),
        );
        t.build().context("building the dumbbell topology")
    }
}

/// tcp_rmem / tcp_wmem maxima at `sockbuf`: the autotuning limits, which
/// are per-namespace (net.core.*mem_max are global and only bound explicit
/// SO_SNDBUF/SO_RCVBUF requests, which these runs do not make).
pub fn sockbuf_sysctls(sockbuf: Bytes) -> Vec<(String, String)> {
    let b = sockbuf.0;
    vec![
        ("net.ipv4.tcp_rmem".into(), format!("4096 131072 {b}")),
        ("net.ipv4.tcp_wmem".into(), format!("4096 16384 {b}")),
    ]
}

/// A link end in `node` with the IPv4 address `addr/prefix`.
pub(crate) fn end_v4(node: &str, addr: [u8; 4], prefix: u8) -> EndSpec {
    EndSpec::new(node).addr(Cidr::new(addr, prefix))
}

/// What a variant changes on the end hosts.
#[derive(Debug, Clone, Default)]
pub struct HostSetup {
    /// sysctls in the sender's namespace (key, value).
    pub sender_sysctls: Vec<(String, String)>,
    /// sysctls in the receiver's namespace.
    pub receiver_sysctls: Vec<(String, String)>,
    pub cc: Option<String>,
    pub pace: Option<Pace>,
    pub sndbuf: Option<u64>,
    pub rcvbuf: Option<u64>,
    /// `gso_max_segs` of the sender's interface. Linux TCP builds GSO packets
    /// even when the device segments in software, sized to about 1 ms of the
    /// pacing rate (at least 2 segments), and paces per packet: the segments
    /// of one leave back to back. 1 makes every segment a paced packet.
    pub sender_gso_max_segs: Option<u32>,
}

/// What a bulk run measured.
#[derive(Debug, Clone)]
pub struct BulkResult {
    pub goodput_mbps: f64,
    pub retransmits: f64,
    pub drops: u64,
    pub first_drop_s: Option<f64>,
    pub meter_rel: String,
    /// The emulator's per-frame gap check of h1's frames at the bottleneck
    /// (its final summary: a sample of every inter-arrival gap against the
    /// ideal gap at the path's rate).
    pub frame_gaps: Option<GapDeviation>,
}

/// Sets `key=value` sysctls inside `node`'s namespace.
pub fn sysctls(net: &Network, node: &str, kv: &[(String, String)]) -> Result<()> {
    for (k, v) in kv {
        net.set_sysctl(node, k, v).with_context(|| format!("sysctl {k}={v} in {node}"))?;
    }
    Ok(())
}

/// The reproducibility baseline of [PSPacer]/[HPC-TCP]: no cached route metrics.
pub fn baseline_sysctls() -> Vec<(String, String)> {
    vec![("net.ipv4.tcp_no_metrics_save".into(), "1".into())]
}

/// Builds the path, runs one transfer of `duration` with `setup`, records samples, tears down.
pub fn bulk(ctx: &mut RunCtx<'_>, path: &Path2, setup: &HostSetup, duration: Duration) -> Result<BulkResult> {
    let meter_rel = format!("meter/{}-r{}", ctx.variant, ctx.repeat);
    let meter_dir = ctx.dir.join(&meter_rel);
    std::fs::create_dir_all(&meter_dir).with_context(|| format!("creating {}", meter_dir.display()))?;
    let topo = path.topology()?;
    let net =
        Network::up_with(&topo, &MeterOptions { dir: Some(meter_dir.clone()), jsonl: false, bin: None })
            .context("building the dumbbell")?;
    let mut s_ctl = baseline_sysctls();
    s_ctl.extend(setup.sender_sysctls.iter().cloned());
    let mut r_ctl = baseline_sysctls();
    r_ctl.extend(setup.receiver_sysctls.iter().cloned());
    sysctls(&net, "h1", &s_ctl)?;
    sysctls(&net, "h2", &r_ctl)?;
    if let Some(segs) = setup.sender_gso_max_segs {
        net.set_gso_max_segs("h1", "wan", segs).context("one segment per GSO packet on h1")?;
    }

    let listen = SocketAddr::new(net.addr("h2")?, DATA_PORT);
    let mut rcfg = RecvConfig::new(listen);
    rcfg.rcvbuf = setup.rcvbuf;
    let recv = net.run_in("h2", move || spawn_recv(rcfg))?.context("starting the receiver in h2")?;

    let mut scfg = SendConfig::new(listen);
    scfg.volume = Volume::Duration(duration);
    scfg.cc = Some(setup.cc.clone().unwrap_or_else(|| DEFAULT_CC.to_string()));
    scfg.sndbuf = setup.sndbuf;
    scfg.rcvbuf = setup.rcvbuf;
    if let Some(p) = setup.pace {
        scfg.pace = p;
    }
    scfg.interval = Some(Duration::from_millis(100));
    scfg.seed = ctx.seed;
    scfg.stop = Some(crate::runner::scenario::stop_flag());
    let (tx, rx) = std::sync::mpsc::channel::<Report>();
    let summary = net
        .run_in("h1", move || {
            run_send(scfg, move |r| {
                let _ = tx.send(r.clone());
            })
        })?
        .context("sending from h1")?;
    let _ = recv.stop();
    for Report::Interval(iv) in rx.try_iter() {
        ctx.sample(metric::GOODPUT_MBPS, iv.end_s, iv.goodput_bps as f64 / 1e6)?;
        if let Some(s) = iv.streams.first() {
            if let Some(c) = s.cwnd {
                ctx.sample("cwnd_pkts", iv.end_s, c as f64)?;
            }
            if let Some(r) = s.srtt_us {
                ctx.sample("srtt_ms", iv.end_s, r as f64 / 1000.0)?;
            }
        }
    }
    // The final summary (taken as the emulator stops) carries the gap sample's verdict.
    let td = net.teardown();
    ctx.emulator_timing(crate::testbeds::emulator_timing(&td.emulators));
    let emu = td
        .emulators
        .into_iter()
        .find_map(|(name, s)| (name == "wan").then_some(s))
        .context("the dumbbell has no emulator on wan")?;
    let drops = emu.a_to_b.drops.queue + emu.a_to_b.drops.loss;
    let meter_file = meter_dir.join("wan.csv");
    let first_drop_s = meter_series(ctx, &meter_file)?;
    ctx.attach("meter_csv", &format!("{meter_rel}/wan.csv"))?;
    let r = BulkResult {
        goodput_mbps: summary.goodput_bps as f64 / 1e6,
        retransmits: summary.retransmits.unwrap_or(0) as f64,
        drops,
        first_drop_s,
        meter_rel,
        frame_gaps: emu.a_to_b.arrival_gap_deviation,
    };
    ctx.metric(metric::GOODPUT_MBPS, r.goodput_mbps);
    ctx.metric(metric::DROPS, r.drops as f64);
    ctx.metric(metric::RETRANSMITS, r.retransmits);
    Ok(r)
}

/// What [`bulk`] records per run — goodput, drops at the bottleneck,
/// retransmits: the columns of [PSPacer]'s table.
/// The names of [`standard_metrics`], for the scenarios' claims, published
/// figures and tests to name them by.
pub mod metric {
    pub const GOODPUT_MBPS: &str = "goodput_mbps";
    pub const DROPS: &str = "drops";
    pub const RETRANSMITS: &str = "retransmits";

    /// The human names of the keys this scenario records (metrics and
    /// series), as its tables and plots title them.
    pub const NAMES: &[(&str, &str)] = &[
        (GOODPUT_MBPS, "Goodput"),
        (DROPS, "Drops at the bottleneck"),
        (RETRANSMITS, "TCP retransmissions"),
        ("cwnd_pkts", "Congestion window"),
        ("srtt_ms", "Smoothed RTT"),
        ("emu_mbps", "Rate at the bottleneck (100 ms bins)"),
        ("zoom500us_mbps", "Rate at the bottleneck around the first drop (500 µs bins)"),
    ];
}

pub fn standard_metrics() -> Vec<MetricSpec> {
    vec![
        MetricSpec {
            name: metric::GOODPUT_MBPS.into(),
            unit: "Mbit/s".into(),
            higher_is_better: true,
            description: "application bytes delivered over the transfer".into(),
        },
        MetricSpec {
            name: metric::DROPS.into(),
            unit: "packets".into(),
            higher_is_better: false,
            description: "frames dropped at the emulated bottleneck (queue overflow and loss)".into(),
        },
        MetricSpec {
            name: metric::RETRANSMITS.into(),
            unit: "segments".into(),
            higher_is_better: false,
            description: "sender's TCP retransmissions (TCP_INFO)".into(),
        },
    ]
}

/// From the emulator's meter CSV (h1→h2 direction): bandwidth per 100 ms
/// (`emu_mbps`), and the 500 µs bins from 0.2 s before to 0.3 s after the first
/// drop (`zoom500us_mbps`, time relative to the drop). Returns the first drop's time.
pub fn meter_series(ctx: &mut RunCtx<'_>, file: &Path) -> Result<Option<f64>> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading meter {}", file.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let col =
        |name: &str| header.iter().position(|h| *h == name).with_context(|| format!("meter column {name}"));
    let (c_dir, c_t, c_w, c_dep, c_drop) =
        (col("dir")?, col("start_s")?, col("width_s")?, col("departed_bytes")?, col("dropped_frames")?);
    let mut bins: Vec<(f64, f64, f64, f64)> = Vec::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        if f.get(c_dir) != Some(&"a_to_b") {
            continue;
        }
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        bins.push((num(c_t), num(c_w), num(c_dep), num(c_drop)));
    }
    if bins.is_empty() {
        return Ok(None);
    }
    let t0 = bins[0].0;
    let mut acc = 0.0;
    let mut slot = 0u64;
    for (t, _w, dep, _) in &bins {
        let s = ((t - t0) / 0.1).floor() as u64;
        if s != slot {
            ctx.sample("emu_mbps", (slot + 1) as f64 * 0.1, acc * 8.0 / 0.1 / 1e6)?;
            acc = 0.0;
            slot = s;
        }
        acc += dep;
    }
    let first = bins.iter().find(|b| b.3 > 0.0).map(|b| b.0 - t0);
    if let Some(fd) = first {
        for (t, w, dep, _) in bins.iter().filter(|b| (b.0 - t0) >= fd - 0.2 && (b.0 - t0) <= fd + 0.3) {
            if *w > 0.0 {
                ctx.sample("zoom500us_mbps", t - t0 - fd, dep * 8.0 / w / 1e6)?;
            }
        }
    }
    Ok(first)
}
