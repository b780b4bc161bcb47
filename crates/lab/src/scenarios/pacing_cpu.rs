//! `lab pacing-cpu`: what the cgroup pacer's per-ACK program costs at
//! 1 Gbit/s on a veth pair (issue 17). Every variant sends at the same rate,
//! so the only difference is the program:
//! - `none`: the traffic tool sets SO_MAX_PACING_RATE itself (the kernel's
//!   pacing, no program);
//! - `none-precise`: the same with `--precise`'s cap on the sender's veth
//!   (`gso_max_segs`, `precise_segs` of them per GSO packet; issue 27): what
//!   spacing frames costs in timer wake-ups and per-packet stack work;
//! - `static-bpf`: the cgroup pacer sets the same cap once per connection
//!   and is then called on every RTT sample only to check for a detach;
//! - `dynamic-bpf`: [PSPacer] eq. (1) recomputed on each ACK's progress (seen
//!   as the socket sends its next segment), capped at the
//!   same rate (`dynamic:RATE`);
//! - `dynamic-bpf-hold`: the same with the delivery-rate hold.
//!
//! Two measures: the kernel's own accounting of the program (BPF run-time
//! statistics, switched on for the run: calls, ns per call, and the share of
//! one core that makes), and the whole machine's busy CPU time over the
//! transfer from /proc/stat (user + system + irq + softirq of every core,
//! as % of one core; the sender's softirq work lands on whichever thread
//! runs it, so no per-process figure would hold it all). With offloads off
//! (the default) every segment is a packet and the ACK rate is the highest
//! a 1500-byte MTU gives: the program's worst case.

use crate::engines::cgroup_pacer::BpfPacing;
use crate::runner::records::MetricSpec;
use crate::runner::scenario::{ParamSpec, Params, RunConfig, RunCtx, Scenario, Testbed};
use crate::runner::typed::{choices, scenario_params, AutoCount, ScenarioParams};
use crate::testbeds::dumbbell::end_v4;
use crate::testbeds::dumbbell::{baseline_sysctls, standard_metrics, sysctls, DATA_PORT, DEFAULT_CC};
use anyhow::{bail, Context, Result};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};
use tcpaccel_core::scale::Dilation;
use tcpaccel_core::units::Rate;
use tcpaccel_net::{LinkSpec, Network, Topology, TopologyBuilder};
use tcpaccel_traffic::{run_send, spawn_recv, Pace, RecvConfig, SendConfig, Volume};

pub struct PacingCpu;

const VARIANTS: [&str; 5] = ["none", "none-precise", "static-bpf", "dynamic-bpf", "dynamic-bpf-hold"];

scenario_params! {
    /// The pacing-cpu scenario's parameters, read from the resolved map ([`Params::typed`]).
    pub struct PacingCpuParams {
        rate: Rate = "1gbit" => "the pacing rate of every variant (on the wire)",
        offloads: bool = "false" => "TSO/GSO/GRO on the veth pair (false: one packet per segment)",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        duration: Duration = "10s" => "length of each transfer",
        variants: Vec<String> = VARIANTS.join(",") => "which variants to run",
        precise_segs: AutoCount = "auto"
            => "segments per GSO packet of none-precise (auto: what --precise picks for the rate)",
    }
}

impl PacingCpuParams {
    /// The parameters with their variants checked and a rate above zero.
    fn read(p: &Params) -> Result<PacingCpuParams> {
        let q: PacingCpuParams = p.typed()?;
        choices("variants", &q.variants, &VARIANTS)?;
        if q.rate.bits_per_sec() == 0 {
            bail!("parameter rate={:?}: expected a rate above zero", q.rate.to_string());
        }
        Ok(q)
    }
}

/// The names of this scenario's metrics, for its records, claims and
/// tests to name them by.
pub mod metric {
    pub use crate::testbeds::dumbbell::metric::*;
    pub const CPU_BUSY_PCT: &str = "cpu_busy_pct";
    pub const PROC_CPU_PCT: &str = "proc_cpu_pct";
    pub const PROC_CPU_PCT_PER_GBIT: &str = "proc_cpu_pct_per_gbit";
    pub const ACKS_PER_S: &str = "acks_per_s";
    pub const PROG_CALLS_PER_S: &str = "prog_calls_per_s";
    pub const PROG_NS_PER_CALL: &str = "prog_ns_per_call";
    pub const PROG_CPU_PCT: &str = "prog_cpu_pct";

    /// The human names of the keys this scenario records (metrics and
    /// series), as its tables and plots title them.
    pub const NAMES: &[(&str, &str)] = &[
        (CPU_BUSY_PCT, "Busy CPU of the machine"),
        (PROC_CPU_PCT, "CPU of the lab process"),
        (PROC_CPU_PCT_PER_GBIT, "CPU of the lab process per Gbit/s"),
        (ACKS_PER_S, "ACKs received per second"),
        (PROG_CALLS_PER_S, "Pacer program calls per second"),
        (PROG_NS_PER_CALL, "Pacer program time per call"),
        (PROG_CPU_PCT, "Pacer program CPU"),
    ];
}

impl Scenario for PacingCpu {
    fn name(&self) -> &'static str {
        "pacing-cpu"
    }
    fn title(&self) -> &'static str {
        "The cgroup pacer's CPU cost at 1 Gbit/s on veth"
    }
    fn description(&self) -> &'static str {
        "One paced upload per variant over a veth pair, all at the same rate: kernel pacing set by the \
         sender itself, and the cgroup pacer's BPF program static and per-ACK dynamic. Reports the \
         program's calls and run time (BPF statistics) and the machine's busy CPU."
    }
    fn params(&self) -> Vec<ParamSpec> {
        PacingCpuParams::specs()
    }
    fn check_params(&self, p: &Params) -> Result<()> {
        PacingCpuParams::read(p).map(drop)
    }
    fn quick(&self) -> Vec<(&'static str, &'static str)> {
        vec![("duration", "3s"), ("rate", "200mbit")]
    }
    fn default_repeats(&self) -> u32 {
        3
    }
    fn variants(&self, p: &Params) -> Result<Vec<String>> {
        Ok(PacingCpuParams::read(p)?.variants)
    }
    fn names(&self) -> Vec<(&'static str, &'static str)> {
        [crate::testbeds::dumbbell::metric::NAMES, metric::NAMES].concat()
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        let mut m = standard_metrics();
        let spec = MetricSpec::lower_is_better;
        m.push(spec(
            metric::CPU_BUSY_PCT,
            "% of a core",
            "busy CPU time of the whole machine over the transfer",
        ));
        m.push(spec(
            metric::PROC_CPU_PCT,
            "% of a core",
            "CPU time of the lab process (its sender and receiver threads, with the kernel work charged to them)",
        ));
        m.push(spec(metric::PROC_CPU_PCT_PER_GBIT, "% of a core", "proc_cpu_pct per Gbit/s of goodput"));
        m.push(spec(metric::ACKS_PER_S, "1/s", "packets the sender received per second (its ACKs)"));
        m.push(spec(
            metric::PROG_CALLS_PER_S,
            "1/s",
            "calls of the pacer's program per second (BPF statistics)",
        ));
        m.push(spec(metric::PROG_NS_PER_CALL, "ns", "mean run time of one call of the pacer's program"));
        m.push(spec(metric::PROG_CPU_PCT, "% of a core", "the pacer's program's run time over the transfer"));
        m
    }
    fn notes(&self, _p: &Params) -> Result<Vec<String>> {
        Ok(vec![
            "Every variant is paced at the same on-wire rate; `none` by the sender's own SO_MAX_PACING_RATE \
             (no program), the others by the cgroup pacer."
                .into(),
            "cpu_busy_pct is the whole 2-core machine (sender, receiver and their softirq work) as % of one \
             core; prog_* come from the kernel's BPF run-time statistics, on for the run only."
                .into(),
        ])
    }
    fn estimate(&self, p: &Params, _d: Dilation) -> Result<Duration> {
        Ok(PacingCpuParams::read(p)?.duration + Duration::from_secs(3))
    }
    fn prepare(&self, p: &Params, _config: &RunConfig, _dir: &Path) -> Result<Box<dyn Testbed>> {
        let q = PacingCpuParams::read(p)?;
        Ok(Box::new(CpuBed {
            rate: q.rate,
            offloads: q.offloads,
            duration: q.duration,
            precise_segs: q.precise_segs.or(|| tcpaccel_pacer::precise::segs_for(Some(q.rate))),
        }))
    }
}

struct CpuBed {
    rate: Rate,
    offloads: bool,
    duration: Duration,
    precise_segs: u32,
}

impl CpuBed {
    fn topology(&self) -> Result<Topology> {
        let mut t = TopologyBuilder::new("lab-veth");
        t.host("h1");
        t.host("h2");
        t.link(
            LinkSpec::veth(end_v4("h1", [10, 9, 0, 1], 24), end_v4("h2", [10, 9, 0, 2], 24))
                .name("v")
                .offloads(self.offloads),
        );
        t.build().context("building the veth topology")
    }
}

/// Busy and total ticks of all CPUs together (idle and iowait are not busy).
fn read_cpu() -> Result<(u64, u64)> {
    let cores = tcpaccel_sys::procstat::read().context("reading /proc/stat")?;
    let total: u64 = cores.iter().map(|c| c.total()).sum();
    let idle: u64 = cores.iter().map(|c| c.idle + c.iowait).sum();
    Ok((total - idle, total))
}

/// utime + stime (ticks) of this process.
fn read_proc_ticks() -> Result<u64> {
    Ok(tcpaccel_sys::procstat::read_task("self").context("reading /proc/self/stat")?.ticks())
}

impl Testbed for CpuBed {
    fn run_one(&mut self, ctx: &mut RunCtx<'_>) -> Result<()> {
        let net = Network::up(&self.topology()?).context("building the veth pair")?;
        for h in ["h1", "h2"] {
            sysctls(&net, h, &baseline_sysctls())?;
        }
        let listen = SocketAddr::new(net.addr("h2")?, DATA_PORT);
        let recv =
            net.run_in("h2", move || spawn_recv(RecvConfig::new(listen)))?.context("receiver in h2")?;
        let wire = self.rate;
        if ctx.variant == "none-precise" {
            net.set_gso_max_segs("h1", "v", self.precise_segs).context("the --precise cap on h1's veth")?;
            ctx.note(format!("none-precise: {} segments per GSO packet on h1's veth", self.precise_segs))?;
        }
        let bpf = match ctx.variant.as_str() {
            "none" | "none-precise" => None,
            "static-bpf" => Some(BpfPacing::join(&format!("static:{wire}"), false)?),
            "dynamic-bpf" => Some(BpfPacing::join(&format!("dynamic:{wire}"), false)?),
            "dynamic-bpf-hold" => Some(BpfPacing::join(&format!("dynamic:{wire}"), true)?),
            v => bail!("unknown variant {v}"),
        };
        let _stats = tcpaccel_sys::bpf::enable_stats().context("turning on BPF run-time statistics")?;
        let mut scfg = SendConfig::new(listen);
        scfg.volume = Volume::Duration(self.duration);
        scfg.cc = Some(DEFAULT_CC.to_string());
        if bpf.is_none() {
            scfg.pace = Pace::Static(wire);
        }
        scfg.seed = ctx.seed;
        scfg.stop = Some(crate::runner::scenario::stop_flag());
        let h1 = net.ns("h1")?;
        let ifname = net.end("h1", "v")?.ifname.clone();
        let rx0 = crate::testbeds::fabric::iface_counter(&h1, &ifname, 1)?;
        let p0 = bpf.as_ref().map(|b| b.prog_stats()).transpose()?;
        let (busy0, total0) = read_cpu()?;
        let ticks0 = read_proc_ticks()?;
        let t0 = Instant::now();
        let sent = net.run_in("h1", move || run_send(scfg, |_| {}))?;
        let elapsed = t0.elapsed().as_secs_f64();
        let (busy1, total1) = read_cpu()?;
        let ticks1 = read_proc_ticks()?;
        let p1 = bpf.as_ref().map(|b| b.prog_stats()).transpose()?;
        let rx1 = crate::testbeds::fabric::iface_counter(&h1, &ifname, 1)?;
        ctx.metric(metric::ACKS_PER_S, (rx1 - rx0) as f64 / elapsed);
        if let Some(b) = bpf {
            b.leave()?;
        }
        let summary = sent.context("the upload from h1")?;
        let _ = recv.stop();
        drop(net.teardown());
        ctx.metric(metric::GOODPUT_MBPS, summary.goodput_bps as f64 / 1e6);
        ctx.metric(metric::RETRANSMITS, summary.retransmits.unwrap_or(0) as f64);
        // Jiffies of all CPUs: busy / total × number of CPUs = cores busy.
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let busy = (busy1 - busy0) as f64 / (total1 - total0).max(1) as f64 * cpus;
        ctx.metric(metric::CPU_BUSY_PCT, busy * 100.0);
        let proc_pct = (ticks1 - ticks0) as f64 / tcpaccel_sys::procstat::USER_HZ as f64 / elapsed * 100.0;
        ctx.metric(metric::PROC_CPU_PCT, proc_pct);
        if summary.goodput_bps > 0 {
            ctx.metric(metric::PROC_CPU_PCT_PER_GBIT, proc_pct / (summary.goodput_bps as f64 / 1e9));
        }
        if let (Some(a), Some(b)) = (p0, p1) {
            let calls = b.run_cnt - a.run_cnt;
            let ns = b.run_time_ns - a.run_time_ns;
            ctx.metric(metric::PROG_CALLS_PER_S, calls as f64 / elapsed);
            ctx.metric(metric::PROG_NS_PER_CALL, if calls > 0 { ns as f64 / calls as f64 } else { 0.0 });
            ctx.metric(metric::PROG_CPU_PCT, ns as f64 / (elapsed * 1e9) * 100.0);
        }
        Ok(())
    }
}
