//! `tcpaccel lab emu-bench`: what the emulator costs and how exact it is,
//! measured side by side in one run on this machine.
//!
//! Two hosts `h1` and `h2`, built with `tcpaccel_net`'s [`TopologyBuilder`]
//! afresh for each measurement and joined by the link it needs: directly by a
//! veth pair (`h1r`–`h2r`, the raw path) or by an emulated link
//! (`h1e`–emulator–`h2e`, the emulator in its own namespace, started by the
//! network with the measurement's rate and delay), offloads off on every
//! interface. Measured:
//! 1. raw veth vs emulator at unlimited rate: one TCP stream's goodput, and
//!    the packet rate of 1514-byte frames blasted from a packet socket in h1
//!    (counted on h2's interface, so only frames that made it count);
//! 2. rate accuracy at each configured rate (100 Mbit/s and 1 Gbit/s by
//!    default): frames offered at 1.25 × the rate, delivered rate counted on
//!    the wire (frame + 24 bytes) from h2's interface counters over the run,
//!    against the configured rate;
//! 3. one-way delay error through a 10 ms link: timestamped probe frames from
//!    h1 to h2 at 1 kHz; error = measured one-way delay − configured delay,
//!    from the send time (CLOCK_REALTIME just before `send`) to the kernel's
//!    receive timestamp at h2 (same clock, same host).
//!
//! Needs root. The namespaces are the network's (`tcpaccel-RUNID-*`, found by
//! `tcpaccel lab clean`), deleted when it drops, also on error or panic; an
//! emulator runs only during its own measurement and its summary comes from
//! the network's teardown. This module does not print;
//! [`BenchReport::to_table`] renders the result.

use serde::Serialize;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tcpaccel_core::stats;
use tcpaccel_core::units::{format_duration, Rate};
use tcpaccel_emu::Summary;
use tcpaccel_net::{Cidr, EndSpec, LinkSpec, MeterOptions, Network, SpecError, TopologyBuilder};
use tcpaccel_sys::netns;
use tcpaccel_sys::packet::{Options, PacketSocket, RecvBatch};

/// What to measure and for how long.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Length of each measurement (the rate accuracy asks for 10 s).
    pub duration: Duration,
    /// Rates whose accuracy is measured.
    pub rates: Vec<Rate>,
    /// One-way delay of the delay-accuracy link.
    pub delay: Duration,
    /// Probe frames per second for the delay measurement.
    pub probe_hz: u32,
    /// Offered load of the rate-accuracy runs, as a multiple of the rate.
    pub overload: f64,
    /// Which parts to run (all by default).
    pub paths: bool,
    pub rate_runs: bool,
    pub delay_run: bool,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            duration: Duration::from_secs(10),
            rates: vec![Rate::mbps(100), Rate::gbps(1)],
            delay: Duration::from_millis(10),
            probe_hz: 1000,
            overload: 1.1,
            paths: true,
            rate_runs: true,
            delay_run: true,
        }
    }
}

/// Throughput of one path.
#[derive(Debug, Clone, Serialize)]
pub struct PathFigures {
    /// One TCP stream's goodput, bit/s.
    pub tcp_goodput_bps: u64,
    /// 1514-byte frames per second delivered to h2.
    pub pps_1514: u64,
    /// The same as bit/s of frame bytes.
    pub frame_bps_1514: u64,
    /// Emulator CPU time over the two measurements, as a fraction of one CPU
    /// (both directions' threads; includes the receiving stack's softirq work
    /// that veth runs in the sender's context). None for the raw path.
    pub emu_cpu: Option<f64>,
}

/// Rate accuracy at one configured rate.
#[derive(Debug, Clone, Serialize)]
pub struct RateAccuracy {
    pub rate_bps: u64,
    /// Delivered on-wire rate counted at h2 (frame + 24 bytes), bit/s.
    pub measured_wire_bps: u64,
    /// (measured − configured) / configured, percent.
    pub error_pct: f64,
    /// What the emulator itself reports (first to last send).
    pub emu_reported_wire_bps: u64,
    /// Frames dropped by the emulator's buffer (offered load is 1.25 × rate).
    pub queue_drops: u64,
    /// Emulator CPU as a fraction of one CPU.
    pub emu_cpu: f64,
    /// Frames the kernel dropped before the emulator read them.
    pub kernel_drops: u64,
    /// Frames dropped for lack of room in the emulator's frame store.
    pub overflow_drops: u64,
    /// Emulator's send lateness against the model, p99, ns.
    pub lateness_p99_ns: Option<u64>,
}

/// One-way delay error through the delay link.
#[derive(Debug, Clone, Serialize)]
pub struct DelayAccuracy {
    pub delay_ns: u64,
    pub sent: u64,
    pub received: u64,
    pub p50_error_ns: f64,
    pub p99_error_ns: f64,
    pub max_error_ns: f64,
    pub min_error_ns: f64,
    /// The emulator's own send lateness against the model (p50, p99), ns:
    /// the part of the error after the frame was read.
    pub emu_lateness_p50_ns: Option<u64>,
    pub emu_lateness_p99_ns: Option<u64>,
}

/// The whole benchmark, for `--json` one object with `"type": "emu_bench"`.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub kernel: String,
    pub cpus: usize,
    pub duration_s: f64,
    pub raw_veth: PathFigures,
    pub emulator_unlimited: PathFigures,
    pub rate_accuracy: Vec<RateAccuracy>,
    pub delay: DelayAccuracy,
}

impl BenchReport {
    /// A plain-text table of the figures.
    pub fn to_table(&self) -> String {
        let mut s = format!(
            "emu-bench on kernel {} with {} CPUs, {} per measurement\n\n",
            self.kernel,
            self.cpus,
            format_duration(Duration::from_secs_f64(self.duration_s))
        );
        s += "path                    TCP goodput    1514-B frames/s   frame rate     emu CPU\n";
        for (name, p) in [("raw veth", &self.raw_veth), ("emulator (unlimited)", &self.emulator_unlimited)] {
            s += &format!(
                "{:<22}  {:>12}   {:>15}   {:>12}   {}\n",
                name,
                Rate(p.tcp_goodput_bps).to_string(),
                p.pps_1514,
                Rate(p.frame_bps_1514).to_string(),
                p.emu_cpu.map_or("-".to_string(), |c| format!("{:.0}%", c * 100.0))
            );
        }
        s += "\nrate          measured (wire)   error     emulator says    queue drops   kernel drops  late p99   emu CPU\n";
        for r in &self.rate_accuracy {
            s += &format!(
                "{:<12}  {:>15}   {:>+6.3}%   {:>13}   {:>11}   {:>12}  {:>8}   {:.0}%\n",
                Rate(r.rate_bps).to_string(),
                Rate(r.measured_wire_bps).to_string(),
                r.error_pct,
                Rate(r.emu_reported_wire_bps).to_string(),
                r.queue_drops,
                r.kernel_drops,
                r.lateness_p99_ns.map_or("-".into(), |ns| format!("{:.1}us", ns as f64 / 1e3)),
                r.emu_cpu * 100.0
            );
        }
        let d = &self.delay;
        let us = |ns: f64| format!("{:.1}us", ns / 1e3);
        s += &format!(
            "\none-way delay {}: {} probes, {} received; error p50 {} p99 {} min {} max {} (emulator's own lateness p50 {} p99 {})\n",
            format_duration(Duration::from_nanos(d.delay_ns)),
            d.sent,
            d.received,
            us(d.p50_error_ns),
            us(d.p99_error_ns),
            us(d.min_error_ns),
            us(d.max_error_ns),
            d.emu_lateness_p50_ns.map_or("-".into(), |v| us(v as f64)),
            d.emu_lateness_p99_ns.map_or("-".into(), |v| us(v as f64))
        );
        s
    }
}

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("emu-bench needs root (network namespaces, packet sockets)")]
    NotRoot,
    #[error("emu-bench topology: {0}")]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Net(#[from] tcpaccel_net::Error),
    #[error("{op}: {source}")]
    Sys { op: String, source: tcpaccel_sys::Error },
    #[error("{0}")]
    Other(String),
}

type Result<T> = std::result::Result<T, BenchError>;

fn sys<T>(op: &str, r: std::result::Result<T, tcpaccel_sys::Error>) -> Result<T> {
    r.map_err(|source| BenchError::Sys { op: op.to_string(), source })
}

/// The two hosts' addresses on the emulated link and on the raw veth pair.
const EMU_NET: ([u8; 4], [u8; 4]) = ([10, 213, 0, 1], [10, 213, 0, 2]);
const RAW_NET: ([u8; 4], [u8; 4]) = ([10, 213, 1, 1], [10, 213, 1, 2]);
/// The emulated link's name (and its emulator's, in the teardown report).
const EMU_LINK: &str = "emu";

/// The link a measurement runs over.
#[derive(Debug, Clone, Copy)]
enum Path {
    /// `h1r - h2r`: a veth pair, offloads off.
    Raw,
    /// `h1e - [emulator] - h2e` at `rate` (`None`: unlimited) with one-way `delay`.
    Emulated { rate: Option<Rate>, delay: Duration },
}

/// One measurement's network: `h1` and `h2` joined by its [`Path`]. Dropping
/// it (also on error or panic) stops the emulator and deletes the namespaces.
struct Lab {
    net: Network,
    /// The namespaces of `h1` and `h2`.
    h1: String,
    h2: String,
}

fn end(node: &str, ifname: &str, addr: [u8; 4]) -> EndSpec {
    EndSpec::new(node).ifname(ifname).addr(Cidr::new(addr, 24))
}

impl Lab {
    fn build(path: Path) -> Result<Lab> {
        let mut t = TopologyBuilder::new("emu-bench");
        t.host("h1");
        t.host("h2");
        let link = match path {
            Path::Raw => LinkSpec::veth(end("h1", "h1r", RAW_NET.0), end("h2", "h2r", RAW_NET.1))
                .name("raw")
                .offloads(false),
            Path::Emulated { rate, delay } => {
                let mut l = LinkSpec::emulated(end("h1", "h1e", EMU_NET.0), end("h2", "h2e", EMU_NET.1))
                    .name(EMU_LINK);
                if let Some(r) = rate {
                    l = l.rate(r);
                }
                if !delay.is_zero() {
                    l = l.delay(delay);
                }
                l
            }
        };
        t.link(link);
        let topo = t.build()?;
        // For looking into a run: EMU_BENCH_METER=DIR writes DIR/emu.csv.
        let meter = MeterOptions {
            dir: std::env::var_os("EMU_BENCH_METER").map(Into::into),
            ..MeterOptions::default()
        };
        let net = Network::up_with(&topo, &meter)?;
        Ok(Lab { h1: net.ns("h1")?, h2: net.ns("h2")?, net })
    }

    /// Tears the network down and returns its emulator's summary.
    fn finish(self) -> Result<Summary> {
        let mut t = self.net.teardown();
        if let Some(e) = t.errors.first() {
            return Err(BenchError::Other(format!("emu-bench teardown: {e}")));
        }
        match t.emulators.iter().position(|(l, _)| l == EMU_LINK) {
            Some(i) => Ok(t.emulators.swap_remove(i).1),
            None => Err(BenchError::Other("emu-bench: the network had no emulator to report".into())),
        }
    }

    /// The MAC of `dev` in `ns`, as the kernel reports it to a packet socket bound there.
    fn mac(&self, ns: &str, dev: &str) -> Result<[u8; 6]> {
        let d = dev.to_string();
        let opts = Options { promiscuous: false, ..Options::default() };
        let mac = netns::run_in(ns, move || PacketSocket::open(&d, &opts).and_then(|s| s.hwaddr()));
        sys(&format!("MAC of {dev}"), sys("enter namespace", mac)?)
    }

    /// (rx packets, rx bytes) of `dev` in `ns`, and when they were read:
    /// /proc/thread-self/net/dev from a thread inside the namespace, stamped
    /// right after the read (an `ip` process would add ms of jitter on a busy
    /// machine).
    fn rx(&self, ns: &str, dev: &str) -> Result<(u64, u64, Instant)> {
        let d = dev.to_string();
        let read = netns::run_in(ns, move || {
            let text = std::fs::read_to_string("/proc/thread-self/net/dev");
            (text, Instant::now())
        });
        let (text, at) = sys("enter namespace", read)?;
        let text = text.map_err(|e| BenchError::Other(format!("read /proc/thread-self/net/dev: {e}")))?;
        for line in text.lines() {
            let Some((name, rest)) = line.split_once(':') else { continue };
            if name.trim() != d {
                continue;
            }
            let f: Vec<u64> = rest.split_whitespace().filter_map(|x| x.parse().ok()).collect();
            if f.len() >= 2 {
                return Ok((f[1], f[0], at));
            }
        }
        Err(BenchError::Other(format!("no counters for {dev} in namespace {ns}")))
    }
}

fn frame(dst: [u8; 6], src: [u8; 6], ethertype: u16, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(60)];
    f[0..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&ethertype.to_be_bytes());
    f
}

/// Local experimental EtherTypes (IEEE 802): no protocol handler takes them,
/// so the hosts' stacks count and drop them.
const ETH_BLAST: u16 = 0x88b5;
const ETH_PROBE: u16 = 0x88b6;

/// Sends `frame` out of `dev` in `ns` for `dur`, at most `pps` frames per
/// second (`None`: as fast as possible). Returns frames handed to the kernel.
fn blast(ns: &str, dev: &str, frame: Vec<u8>, dur: Duration, pps: Option<u64>) -> Result<u64> {
    let opts = Options { promiscuous: false, ..Options::default() };
    let d = dev.to_string();
    let sock = sys("enter namespace", netns::run_in(ns, move || PacketSocket::open(&d, &opts)))?;
    let sock = sys("open blast socket", sock)?;
    // A paced load generator that other work on the machine can starve turns
    // into bursts and pauses, and a paused sender lets the queue run dry: the
    // link is then idle, not slow. Real-time priority below the emulator's
    // keeps the offered load steady.
    if pps.is_some() {
        let _ = tcpaccel_sys::packet::set_realtime(5);
        let _ = tcpaccel_sys::packet::set_timer_slack(1);
    }
    let start = Instant::now();
    let mut sent = 0u64;
    let slices: Vec<&[u8]> = vec![&frame[..]; 64];
    while start.elapsed() < dur {
        let want = match pps {
            None => 64,
            Some(r) => {
                let due = (start.elapsed().as_nanos() * r as u128 / 1_000_000_000) as u64;
                if due <= sent {
                    std::thread::sleep(Duration::from_micros(200));
                    continue;
                }
                (due - sent).min(64) as usize
            }
        };
        match sock.send_batch(&slices[..want]) {
            Ok(0) => {
                let _ = sock.wait_writable(Some(Duration::from_millis(1)));
            }
            Ok(n) => sent += n as u64,
            Err(e) => return Err(BenchError::Sys { op: format!("blast on {dev}"), source: e }),
        }
    }
    Ok(sent)
}

/// Packet rate and frame bit rate of 1514-byte frames from `tx_dev` in h1 to
/// `rx_dev` in h2, counted at h2 over the middle of the run.
fn packet_rate(lab: &Lab, tx_dev: &str, rx_dev: &str, dur: Duration) -> Result<(u64, u64)> {
    let dst = lab.mac(&lab.h2, rx_dev)?;
    let src = lab.mac(&lab.h1, tx_dev)?;
    let f = frame(dst, src, ETH_BLAST, 1514);
    let (h1, dev) = (lab.h1.clone(), tx_dev.to_string());
    let total = dur + Duration::from_secs(1);
    let sender = std::thread::spawn(move || blast(&h1, &dev, f, total, None));
    std::thread::sleep(Duration::from_millis(500));
    let (p0, b0, t0) = lab.rx(&lab.h2, rx_dev)?;
    std::thread::sleep(dur);
    let (p1, b1, t1) = lab.rx(&lab.h2, rx_dev)?;
    sender.join().map_err(|_| BenchError::Other("blast thread panicked".into()))??;
    let secs = (t1 - t0).as_secs_f64();
    Ok((((p1 - p0) as f64 / secs) as u64, ((b1 - b0) as f64 * 8.0 / secs) as u64))
}

/// One TCP stream h1 → h2 for `dur`; goodput measured at the receiver.
fn tcp_goodput(lab: &Lab, to: [u8; 4], dur: Duration) -> Result<u64> {
    use std::io::{Read, Write};
    let addr = SocketAddr::from((to, 5201));
    let listener = sys("enter namespace", netns::run_in(&lab.h2, move || TcpListener::bind(addr)))?
        .map_err(|e| BenchError::Other(format!("bind {addr}: {e}")))?;
    let server = std::thread::spawn(move || -> std::io::Result<(u64, Duration)> {
        let (mut c, _) = listener.accept()?;
        c.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut buf = vec![0u8; 1 << 18];
        let mut n = 0u64;
        let mut first: Option<Instant> = None;
        let mut last = Instant::now();
        loop {
            match c.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => {
                    first.get_or_insert_with(Instant::now);
                    n += k as u64;
                    last = Instant::now();
                }
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    break
                }
                Err(e) => return Err(e),
            }
        }
        Ok((n, first.map_or(Duration::ZERO, |f| last - f)))
    });
    let mut s = sys(
        "enter namespace",
        netns::run_in(&lab.h1, move || TcpStream::connect_timeout(&addr, Duration::from_secs(5))),
    )?
    .map_err(|e| BenchError::Other(format!("connect {addr}: {e}")))?;
    s.set_write_timeout(Some(Duration::from_secs(5))).ok();
    let chunk = vec![0u8; 1 << 18];
    let start = Instant::now();
    while start.elapsed() < dur {
        if let Err(e) = s.write_all(&chunk) {
            return Err(BenchError::Other(format!("TCP write to {addr}: {e}")));
        }
    }
    drop(s);
    let (n, span) = server
        .join()
        .map_err(|_| BenchError::Other("TCP receiver panicked".into()))?
        .map_err(|e| BenchError::Other(format!("TCP receive: {e}")))?;
    Ok(if span.is_zero() { 0 } else { (n as f64 * 8.0 / span.as_secs_f64()) as u64 })
}

fn cpu_fraction(s: &Summary, dur: Duration) -> f64 {
    (s.a_to_b.cpu_s + s.b_to_a.cpu_s) / dur.as_secs_f64().max(1e-9)
}

fn rate_accuracy(rate: Rate, overload: f64, dur: Duration) -> Result<RateAccuracy> {
    let lab = Lab::build(Path::Emulated { rate: Some(rate), delay: Duration::ZERO })?;
    let dst = lab.mac(&lab.h2, "h2e")?;
    let src = lab.mac(&lab.h1, "h1e")?;
    let f = frame(dst, src, ETH_BLAST, 1514);
    let wire_pps = rate.bits_per_sec() as f64 / ((1514 + 24) * 8) as f64;
    let offered = (wire_pps * overload.max(1.0)) as u64;
    let (h1, total) = (lab.h1.clone(), dur + Duration::from_secs(2));
    let sender = std::thread::spawn(move || blast(&h1, "h1e", f, total, Some(offered)));
    // Let the queue fill and settle before counting.
    std::thread::sleep(Duration::from_millis(1000));
    let (p0, b0, t0) = lab.rx(&lab.h2, "h2e")?;
    std::thread::sleep(dur);
    let (p1, b1, t1) = lab.rx(&lab.h2, "h2e")?;
    sender.join().map_err(|_| BenchError::Other("blast thread panicked".into()))??;
    let summary = lab.finish()?;
    let wire_bits = ((b1 - b0) + 24 * (p1 - p0)) as f64 * 8.0;
    let measured = wire_bits / (t1 - t0).as_secs_f64();
    let r = rate.bits_per_sec() as f64;
    Ok(RateAccuracy {
        rate_bps: rate.bits_per_sec(),
        measured_wire_bps: measured as u64,
        error_pct: 100.0 * (measured - r) / r,
        emu_reported_wire_bps: summary.a_to_b.achieved_wire_bps,
        queue_drops: summary.a_to_b.drops.queue,
        emu_cpu: cpu_fraction(&summary, total),
        kernel_drops: summary.a_to_b.drops.kernel,
        overflow_drops: summary.a_to_b.drops.overflow,
        lateness_p99_ns: summary.a_to_b.lateness.p99_ns,
    })
}

/// CLOCK_REALTIME in ns: the clock of the kernel's receive timestamps.
fn realtime_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

fn delay_accuracy(delay: Duration, hz: u32, dur: Duration) -> Result<DelayAccuracy> {
    let lab = Lab::build(Path::Emulated { rate: None, delay })?;
    let dst = lab.mac(&lab.h2, "h2e")?;
    let src = lab.mac(&lab.h1, "h1e")?;
    let stop = Arc::new(AtomicBool::new(false));

    let opts = Options { promiscuous: false, ..Options::default() };
    let rx_sock = sys("enter namespace", netns::run_in(&lab.h2, move || PacketSocket::open("h2e", &opts)))?;
    let rx_sock = sys("open probe receiver", rx_sock)?;
    let stop_rx = stop.clone();
    let receiver = std::thread::spawn(move || -> Vec<f64> {
        let _ = tcpaccel_sys::packet::set_realtime(20);
        let _ = tcpaccel_sys::packet::set_timer_slack(1);
        let mut batch = RecvBatch::new(16, 128);
        let mut delays = Vec::new();
        while !stop_rx.load(Ordering::Relaxed) {
            if !matches!(rx_sock.wait_readable(Some(Duration::from_millis(10))), Ok(true)) {
                continue;
            }
            let now = realtime_ns();
            if rx_sock.recv_batch(&mut batch).is_err() {
                break;
            }
            for f in batch.frames() {
                if f.data.len() >= 30 && f.data[12..14] == ETH_PROBE.to_be_bytes() {
                    let mut ts = [0u8; 8];
                    ts.copy_from_slice(&f.data[22..30]);
                    // The kernel's receive stamp: when the frame reached h2,
                    // not when this thread woke up to read it.
                    let rx = f.timestamp.map_or(now, |t| t.as_nanos() as u64);
                    delays.push(rx as f64 - u64::from_be_bytes(ts) as f64);
                }
            }
        }
        delays
    });

    let opts = Options { promiscuous: false, ..Options::default() };
    let tx_sock = sys("enter namespace", netns::run_in(&lab.h1, move || PacketSocket::open("h1e", &opts)))?;
    let tx_sock = sys("open probe sender", tx_sock)?;
    let _ = tcpaccel_sys::packet::set_timer_slack(1);
    let mut f = frame(dst, src, ETH_PROBE, 64);
    let interval = Duration::from_secs_f64(1.0 / hz.max(1) as f64);
    let n = (dur.as_secs_f64() * hz as f64) as u64;
    let mut sent = 0u64;
    let start = Instant::now();
    for i in 0..n {
        let at = start + interval * i as u32;
        if let Some(w) = at.checked_duration_since(Instant::now()) {
            std::thread::sleep(w);
        }
        f[14..22].copy_from_slice(&i.to_be_bytes());
        f[22..30].copy_from_slice(&realtime_ns().to_be_bytes());
        if matches!(tx_sock.send(&f), Ok(true)) {
            sent += 1;
        }
    }
    std::thread::sleep(delay + Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let delays = receiver.join().map_err(|_| BenchError::Other("probe receiver panicked".into()))?;
    drop(tx_sock);
    let summary = lab.finish()?;
    let d = delay.as_nanos() as f64;
    let err: Vec<f64> = delays.iter().map(|x| x - d).collect();
    let pct = |p| stats::percentile(&err, p).unwrap_or(f64::NAN);
    Ok(DelayAccuracy {
        delay_ns: delay.as_nanos() as u64,
        sent,
        received: err.len() as u64,
        p50_error_ns: pct(50.0),
        p99_error_ns: pct(99.0),
        max_error_ns: pct(100.0),
        min_error_ns: pct(0.0),
        emu_lateness_p50_ns: summary.a_to_b.lateness.p50_ns,
        emu_lateness_p99_ns: summary.a_to_b.lateness.p99_ns,
    })
}

/// Runs the whole benchmark; see the module docs.
pub fn run(opts: &BenchOptions) -> Result<BenchReport> {
    if !tcpaccel_sys::privilege::is_root() {
        return Err(BenchError::NotRoot);
    }
    let dur = opts.duration.max(Duration::from_millis(500));
    let none = PathFigures { tcp_goodput_bps: 0, pps_1514: 0, frame_bps_1514: 0, emu_cpu: None };
    let (mut raw, mut unlimited) = (none.clone(), none.clone());
    if opts.paths {
        tracing::info!("emu-bench: raw veth");
        let lab = Lab::build(Path::Raw)?;
        raw.tcp_goodput_bps = tcp_goodput(&lab, RAW_NET.1, dur)?;
        (raw.pps_1514, raw.frame_bps_1514) = packet_rate(&lab, "h1r", "h2r", dur)?;
        drop(lab);

        tracing::info!("emu-bench: emulator at unlimited rate");
        let lab = Lab::build(Path::Emulated { rate: None, delay: Duration::ZERO })?;
        unlimited.tcp_goodput_bps = tcp_goodput(&lab, EMU_NET.1, dur)?;
        (unlimited.pps_1514, unlimited.frame_bps_1514) = packet_rate(&lab, "h1e", "h2e", dur)?;
        let s = lab.finish()?;
        unlimited.emu_cpu = Some(cpu_fraction(&s, 2 * dur + Duration::from_secs(1)));
    }
    let mut rates = Vec::new();
    if opts.rate_runs {
        for &r in &opts.rates {
            tracing::info!(rate = %r, "emu-bench: rate accuracy");
            rates.push(rate_accuracy(r, opts.overload, dur)?);
        }
    }
    let delay = if opts.delay_run {
        tracing::info!("emu-bench: delay accuracy");
        delay_accuracy(opts.delay, opts.probe_hz, dur)?
    } else {
        DelayAccuracy {
            delay_ns: 0,
            sent: 0,
            received: 0,
            p50_error_ns: f64::NAN,
            p99_error_ns: f64::NAN,
            max_error_ns: f64::NAN,
            min_error_ns: f64::NAN,
            emu_lateness_p50_ns: None,
            emu_lateness_p99_ns: None,
        }
    };

    Ok(BenchReport {
        kind: "emu_bench",
        kernel: crate::runner::records::kernel_release(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        duration_s: dur.as_secs_f64(),
        raw_veth: raw,
        emulator_unlimited: unlimited,
        rate_accuracy: rates,
        delay,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_renders() {
        let p = PathFigures {
            tcp_goodput_bps: 2_000_000_000,
            pps_1514: 300_000,
            frame_bps_1514: 3_600_000_000,
            emu_cpu: None,
        };
        let r = BenchReport {
            kind: "emu_bench",
            kernel: "6.x".into(),
            cpus: 2,
            duration_s: 3.0,
            raw_veth: p.clone(),
            emulator_unlimited: PathFigures { emu_cpu: Some(0.9), ..p },
            rate_accuracy: vec![RateAccuracy {
                rate_bps: 100_000_000,
                measured_wire_bps: 99_900_000,
                error_pct: -0.1,
                emu_reported_wire_bps: 99_950_000,
                queue_drops: 10,
                emu_cpu: 0.2,
                kernel_drops: 0,
                overflow_drops: 0,
                lateness_p99_ns: Some(20_000),
            }],
            delay: DelayAccuracy {
                delay_ns: 10_000_000,
                sent: 3000,
                received: 3000,
                p50_error_ns: 12_000.0,
                p99_error_ns: 40_000.0,
                max_error_ns: 90_000.0,
                min_error_ns: 5_000.0,
                emu_lateness_p50_ns: Some(2_000),
                emu_lateness_p99_ns: Some(9_000),
            },
        };
        let t = r.to_table();
        assert!(t.contains("raw veth") && t.contains("-0.100%") && t.contains("p99 40.0us"), "{t}");
        assert_eq!(serde_json::to_value(&r).unwrap()["type"], "emu_bench");
    }

    /// Root: a short run of the whole benchmark (1 s per measurement, one
    /// modest rate) that checks what any working emulator must give, with
    /// wide margins: traffic passes both paths, the delivered rate is near
    /// the configured one, probes arrive and none arrives before its
    /// configured delay. The figures themselves are `tcpaccel lab
    /// emu-bench`'s (a benchmark, run under the bench lock).
    #[test]
    fn root_emu_bench_short_run_passes_traffic_at_about_the_rate_and_delay() {
        tcpaccel_sys::testing::require_root();
        let o = BenchOptions {
            duration: Duration::from_secs(1),
            rates: vec![Rate::mbps(50)],
            delay: Duration::from_millis(10),
            ..BenchOptions::default()
        };
        let r = run(&o).expect("bench");
        let table = r.to_table();
        for p in [&r.raw_veth, &r.emulator_unlimited] {
            assert!(p.tcp_goodput_bps > 1_000_000 && p.pps_1514 > 0, "{table}");
        }
        assert!(r.emulator_unlimited.emu_cpu.is_some(), "{table}");
        let acc = &r.rate_accuracy[0];
        assert!(
            acc.error_pct.abs() < 20.0,
            "delivered {} bit/s at 50 Mbit/s\n{table}",
            acc.measured_wire_bps
        );
        let d = &r.delay;
        assert!(d.sent > 0 && d.received * 10 >= d.sent * 9, "{} of {} probes\n{table}", d.received, d.sent);
        // Never early (1 ms for the clocks' granularity), and the median not
        // late by more than the 10 ms delay itself.
        assert!(d.min_error_ns > -1e6 && d.p50_error_ns < 10e6, "{table}");
    }
}
