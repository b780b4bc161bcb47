//! `lab run rto`: [HPC-TCP]'s all-to-all case. N hosts hang off one switch
//! whose egress ports are rate-limited with a small drop-tail buffer (tbf +
//! bfifo); every iteration each host sends one message of the same size to
//! every other host at once (MPI_Alltoall's traffic shape), and the iteration
//! ends when the last message has arrived. When the incast overflows a port
//! and a message's last segments are lost, only a retransmission timeout
//! recovers them: at least `rto_min` (200 ms by default) even though the RTT
//! is well under a millisecond. The `low-rto` variants lower `rto_min` on the
//! hosts' routes (`ip route change … rto_min`), as the tutorial does.
//!
//! Variants are (RTO setting) × (message size); per iteration a flow record
//! holds its time, so the report shows CDFs; timeouts are the hosts' TcpExt
//! `TCPTimeouts` counters, summed, before and after.

use crate::runner::claims::{Claim, Goal, Measure, GOAL_DIRECTION};
use crate::runner::records::{MetricSpec, Published};
use crate::runner::scenario::{interrupted, ParamSpec, Params, RunConfig, RunCtx, Scenario, Testbed};
use crate::runner::typed::{scenario_params, ScenarioParams};
use crate::testbeds::dumbbell::end_v4;
use anyhow::{bail, Context, Result};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use tcpaccel_core::scale::Dilation;
use tcpaccel_core::stats::{mean, percentile};
use tcpaccel_core::units::{format_duration, Bytes, QueueLimit, Rate};
use tcpaccel_net::{LinkSpec, Network, RouteTo, Topology, TopologyBuilder};

pub struct Rto;

const PORT: u16 = 6100;

scenario_params! {
    /// The rto scenario's parameters, read from the resolved map ([`Params::typed`]).
    pub struct RtoParams {
        hosts: usize = "8" => "number of hosts (2 to 64)",
        rate: Rate = "100mbit" => "switch egress rate per port",
        buffer: Bytes = "32KB" => "switch egress drop-tail buffer per port",
        sizes: Vec<Bytes> = "2KB,64KB,1MB" => "message sizes (small, medium, large)",
        iterations: u32 = "40" => "all-to-all exchanges per run",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        low_rto: Duration = "10ms" => "rto_min of the low-rto variants",
    }
}

impl RtoParams {
    /// The parameters with the number of hosts checked.
    fn read(p: &Params) -> Result<RtoParams> {
        let q: RtoParams = p.typed()?;
        if !(2..=64).contains(&q.hosts) {
            bail!("parameter hosts=\"{}\": expected a number of hosts from 2 to 64", q.hosts);
        }
        if q.sizes.is_empty() {
            bail!("parameter sizes=\"\": expected at least one message size");
        }
        Ok(q)
    }
}

/// The names of this scenario's metrics, for its records, claims and
/// tests to name them by.
pub mod metric {
    pub const ITER_MEAN_MS: &str = "iter_mean_ms";
    pub const ITER_P99_MS: &str = "iter_p99_ms";
    pub const TIMEOUTS: &str = "timeouts";

    /// The human names of the keys this scenario records (metrics and
    /// series), as its tables and plots title them.
    pub const NAMES: &[(&str, &str)] = &[
        (ITER_MEAN_MS, "All-to-all iteration, mean"),
        (ITER_P99_MS, "All-to-all iteration, p99"),
        (TIMEOUTS, "Retransmission timeouts"),
    ];
}

impl Scenario for Rto {
    fn name(&self) -> &'static str {
        "rto"
    }
    fn title(&self) -> &'static str {
        "All-to-all exchanges and the minimum RTO ([HPC-TCP])"
    }
    fn description(&self) -> &'static str {
        "N hosts around one switch with small rate-limited egress buffers; each iteration every host sends a \
         message to every other host at once. Time per iteration and retransmission timeouts, with the default \
         minimum RTO and with rto_min lowered on the routes."
    }
    fn params(&self) -> Vec<ParamSpec> {
        RtoParams::specs()
    }
    fn check_params(&self, p: &Params) -> Result<()> {
        RtoParams::read(p).map(drop)
    }
    fn quick(&self) -> Vec<(&'static str, &'static str)> {
        vec![("iterations", "8"), ("hosts", "4"), ("sizes", "2KB,64KB")]
    }
    fn default_repeats(&self) -> u32 {
        3
    }
    fn variants(&self, p: &Params) -> Result<Vec<String>> {
        let mut v = Vec::new();
        for s in RtoParams::read(p)?.sizes {
            v.push(format!("default-rto/{s}"));
            v.push(format!("low-rto/{s}"));
        }
        Ok(v)
    }
    fn names(&self) -> Vec<(&'static str, &'static str)> {
        metric::NAMES.to_vec()
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        vec![
            MetricSpec {
                name: metric::ITER_MEAN_MS.into(),
                unit: "ms".into(),
                higher_is_better: false,
                description: "mean time of one all-to-all iteration".into(),
            },
            MetricSpec {
                name: metric::ITER_P99_MS.into(),
                unit: "ms".into(),
                higher_is_better: false,
                description: "99th percentile iteration time".into(),
            },
            MetricSpec {
                name: metric::TIMEOUTS.into(),
                unit: "RTOs".into(),
                higher_is_better: false,
                description: "TCPTimeouts summed over all hosts during the run".into(),
            },
        ]
    }
    fn published(&self) -> Vec<Published> {
        Vec::new()
    }
    fn notes(&self, _p: &Params) -> Result<Vec<String>> {
        Ok(vec!["The tutorial reports no table for this case, only that a shorter minimum RTO helps medium message \
              sizes; the qualitative comparison is the point."
            .into()])
    }
    fn claims(&self) -> &'static [Claim] {
        CLAIMS
    }
    fn estimate(&self, p: &Params, _d: Dilation) -> Result<Duration> {
        Ok(Duration::from_millis(300) * RtoParams::read(p)?.iterations + Duration::from_secs(4))
    }
    fn prepare(&self, p: &Params, _config: &RunConfig, _dir: &Path) -> Result<Box<dyn Testbed>> {
        let q = RtoParams::read(p)?;
        Ok(Box::new(RtoBed {
            hosts: q.hosts,
            rate: q.rate,
            buffer: q.buffer,
            iterations: q.iterations as usize,
            low_rto: q.low_rto,
        }))
    }
}

struct RtoBed {
    hosts: usize,
    rate: Rate,
    buffer: Bytes,
    iterations: usize,
    low_rto: Duration,
}

fn host_addr(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 8, i as u8, 2))
}

/// The star: switch `sw` with one port per host, shaped towards the host only.
fn topology(hosts: usize, rate: Rate, buffer: Bytes) -> Result<Topology> {
    let mut t = TopologyBuilder::new("lab-alltoall");
    for i in 1..=hosts {
        t.host(format!("h{i}")).route_via(RouteTo::Default, Ipv4Addr::new(10, 8, i as u8, 1));
    }
    t.router("sw");
    for i in 1..=hosts {
        let mut port = LinkSpec::veth(
            end_v4("sw", [10, 8, i as u8, 1], 24).ifname(format!("p{i}")),
            end_v4(&format!("h{i}"), [10, 8, i as u8, 2], 24),
        )
        .name(format!("p{i}"));
        port.a_to_b.rate = Some(rate);
        port.a_to_b.buffer = Some(QueueLimit::Bytes(buffer.0));
        t.link(port);
    }
    t.build().context("building the all-to-all star")
}

/// TCPTimeouts of one namespace (TcpExt in /proc/net/netstat).
fn timeouts(net: &Network, host: &str) -> Result<u64> {
    let out = net.exec(host, &["cat", "/proc/net/netstat"])?.output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("TcpExt:")).collect();
    if lines.len() < 2 {
        bail!("no TcpExt counters in {host}");
    }
    let names: Vec<&str> = lines[0].split_whitespace().collect();
    let vals: Vec<&str> = lines[1].split_whitespace().collect();
    let i = names.iter().position(|n| *n == "TCPTimeouts").context("TCPTimeouts counter missing")?;
    Ok(vals.get(i).and_then(|v| v.parse().ok()).unwrap_or(0))
}

impl Testbed for RtoBed {
    fn run_one(&mut self, ctx: &mut RunCtx<'_>) -> Result<()> {
        let (rto, size) = ctx.variant.split_once('/').context("variant is RTO/SIZE")?;
        let size = Bytes::parse(size)?.0 as usize;
        let net = Network::up(&topology(self.hosts, self.rate, self.buffer)?)?;
        let names: Vec<String> = (1..=self.hosts).map(|i| format!("h{i}")).collect();
        for (i, h) in names.iter().enumerate() {
            crate::testbeds::dumbbell::sysctls(&net, h, &crate::testbeds::dumbbell::baseline_sysctls())?;
            if rto == "low-rto" {
                let via = format!("10.8.{}.1", i + 1);
                let rto_min = format_duration(self.low_rto);
                let out = net
                    .exec(h, &["ip", "route", "change", "default", "via", &via, "rto_min", &rto_min])?
                    .output()?;
                if !out.status.success() {
                    bail!("setting rto_min in {h}: {}", String::from_utf8_lossy(&out.stderr).trim());
                }
            }
        }
        let before: u64 = names.iter().map(|h| timeouts(&net, h)).sum::<Result<u64>>()?;

        // One connection per ordered pair (i → j), set up inside the namespaces.
        let mut listeners = Vec::new();
        for (j, h) in names.iter().enumerate() {
            let addr = SocketAddr::new(host_addr(j + 1), PORT);
            listeners.push(net.run_in(h, move || TcpListener::bind(addr))??);
        }
        let mut pairs: Vec<(TcpStream, TcpStream)> = Vec::new();
        for (i, h) in names.iter().enumerate() {
            for (j, l) in listeners.iter().enumerate() {
                if i == j {
                    continue;
                }
                let to = SocketAddr::new(host_addr(j + 1), PORT);
                let out =
                    net.run_in(h, move || TcpStream::connect_timeout(&to, Duration::from_secs(5)))??;
                let (inc, _) = l.accept()?;
                // CUBIC per socket, as in the dumbbell testbed (the namespace default is the host's).
                tcpaccel_sys::sockopt::set_congestion(&out, crate::testbeds::dumbbell::DEFAULT_CC)?;
                for s in [&out, &inc] {
                    s.set_nodelay(true)?;
                    s.set_read_timeout(Some(Duration::from_secs(20)))?;
                }
                pairs.push((out, inc));
            }
        }
        let n = pairs.len();
        let start = Arc::new(Barrier::new(n + 1));
        let done = Arc::new(Barrier::new(n + 1));
        let failed = Arc::new(AtomicBool::new(false));
        let iters = self.iterations;
        let mut threads = Vec::new();
        for (mut out, mut inc) in pairs {
            let (s1, f1) = (start.clone(), failed.clone());
            threads.push(std::thread::spawn(move || {
                let msg = vec![0x5au8; size];
                for _ in 0..iters {
                    s1.wait();
                    if !f1.load(Ordering::Relaxed) && out.write_all(&msg).is_err() {
                        f1.store(true, Ordering::Relaxed);
                    }
                }
            }));
            let (d1, f2) = (done.clone(), failed.clone());
            threads.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; size];
                for _ in 0..iters {
                    if !f2.load(Ordering::Relaxed) && inc.read_exact(&mut buf).is_err() {
                        f2.store(true, Ordering::Relaxed);
                    }
                    d1.wait();
                }
            }));
        }
        let mut times = Vec::with_capacity(iters);
        let class = format!("{size}B");
        for it in 0..iters {
            if interrupted() {
                failed.store(true, Ordering::Relaxed);
            }
            start.wait();
            let t0 = Instant::now();
            done.wait();
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            let ok = !failed.load(Ordering::Relaxed);
            ctx.flow(it as u64, &class, (size * n) as u64, it as f64, ms, ok)?;
            if ok {
                times.push(ms);
            }
        }
        for t in threads {
            let _ = t.join();
        }
        if failed.load(Ordering::Relaxed) {
            bail!("an exchange failed (a connection broke or timed out)");
        }
        let after: u64 = names.iter().map(|h| timeouts(&net, h)).sum::<Result<u64>>()?;
        drop(net.teardown());
        ctx.metric(metric::ITER_MEAN_MS, mean(&times).unwrap_or(f64::NAN));
        ctx.metric(metric::ITER_P99_MS, percentile(&times, 99.0).unwrap_or(f64::NAN));
        ctx.metric(metric::TIMEOUTS, after.saturating_sub(before) as f64);
        Ok(())
    }
}

/// What this scenario claims: published figures and goals, judged by the report against a run's summaries.
pub(crate) const CLAIMS: &[Claim] = &[Claim {
    text: "A 10 ms rto_min speeds up 64 KB all-to-all iterations (default ÷ low mean time)",
    measure: Measure::Ratio {
        num: ("default-rto/64KB", metric::ITER_MEAN_MS),
        den: ("low-rto/64KB", metric::ITER_MEAN_MS),
    },
    goal: Goal::Above(1.0),
    goal_source: GOAL_DIRECTION,
    published: None,
    when: &[],
}];

#[cfg(test)]
mod topology_tests {
    use super::*;
    use tcpaccel_net::LinkKind;

    #[test]
    fn the_switch_shapes_towards_each_host_only() {
        let t = topology(4, Rate::mbps(100), Bytes(32_000)).unwrap();
        assert_eq!(t.links.len(), 4);
        for (i, l) in t.links.iter().enumerate() {
            let LinkKind::Veth { a_to_b, b_to_a } = l.kind else { panic!("{} is not veth", l.name) };
            assert_eq!(l.a.node, "sw");
            assert_eq!(a_to_b.rate, Some(Rate::mbps(100)));
            assert!(b_to_a.is_none(), "host to switch is not shaped");
            let host = t.node(&format!("h{}", i + 1)).unwrap();
            assert_eq!(host.routes[0].via, Some(IpAddr::V4(Ipv4Addr::new(10, 8, i as u8 + 1, 1))));
        }
    }
}
