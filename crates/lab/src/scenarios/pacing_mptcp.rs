//! `lab pacing-mptcp`: the cgroup pacer on one MPTCP connection over two
//! emulated paths. MPTCP sockets refuse SO_MAX_PACING_RATE, so neither the
//! traffic tool's `--pace` nor the preload shim can pace them; the cgroup
//! pacer's sock_ops program runs for every subflow the kernel opens and caps
//! each one (issue 17). This scenario shows whether each subflow gets the
//! rate it was given, path by path.
//!
//! Topology: h1 and h2 joined by two emulated links, `p0` (10.9.0.0/24) and
//! `p1` (10.9.1.0/24), each with its own rate, delay and drop-tail buffer.
//! h1 connects to h2's `p0` address; the in-kernel path manager on h1 has a
//! `subflow` endpoint on its `p1` address, and a policy rule sends what
//! leaves from that address out of `p1` (to h2's `p0` address, which h2
//! accepts on either interface: reverse-path filtering is off on both
//! hosts), so the two subflows never share a path.
//!
//! Variants: `none` (unpaced MPTCP: each subflow fills its path),
//! `static-bpf` (one rule, `static:PACE`, applied to every subflow) and
//! `dynamic-bpf` ([PSPacer] eq. 1 per subflow, recomputed on each ACK's
//! progress the program sees) and
//! `dynamic-bpf-hold` (the same with the pacer's `--hold`, per subflow).
//! The paced rate is measured where it counts, on the wire of each path:
//! what arrived at each emulator's queue from h1 (frame bytes plus the
//! 24 bytes of preamble, FCS and gap per frame) over the steady part of the
//! run (from `warmup` to the end less half a second), against the rule's
//! on-wire rate.

use crate::engines::cgroup_pacer::BpfPacing;
use crate::runner::records::MetricSpec;
use crate::runner::scenario::{ParamSpec, Params, RunConfig, RunCtx, Scenario, Testbed};
use crate::runner::typed::{choices, scenario_params, ScenarioParams};
use crate::testbeds::dumbbell::end_v4;
use crate::testbeds::dumbbell::{baseline_sysctls, standard_metrics, sysctls, DATA_PORT, DEFAULT_CC};
use crate::testbeds::fabric::ip_batch;
use crate::testbeds::meter::{parse_bins, MeterBin};
use anyhow::{bail, Context, Result};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;
use tcpaccel_core::scale::Dilation;
use tcpaccel_core::units::{format_duration, Bytes, QueueLimit, Rate};
use tcpaccel_net::{LinkSpec, MeterOptions, Network, Topology, TopologyBuilder};
use tcpaccel_traffic::{run_send, spawn_recv, RecvConfig, SendConfig, Volume};

pub struct PacingMptcp;

const VARIANTS: [&str; 4] = ["none", "static-bpf", "dynamic-bpf", "dynamic-bpf-hold"];
const DEFAULT_VARIANTS: [&str; 2] = ["none", "static-bpf"];
/// The two paths, by link name.
const PATHS: [&str; 2] = ["p0", "p1"];
/// Ethernet preamble + SFD (8), FCS (4), inter-frame gap (12): wire bytes a
/// frame costs beyond what the meter counts (header + payload).
const WIRE_EXTRA: u64 = 24;

scenario_params! {
    /// The pacing-mptcp scenario's parameters, read from the resolved map ([`Params::typed`]).
    pub struct PacingMptcpParams {
        rate: Rate = "100mbit" => "rate of each path (on the wire)",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        rtt: Duration = "20ms" => "round-trip propagation delay of each path",
        buffer: Bytes = "250KB" => "drop-tail buffer of each path",
        pace: Rate = "40mbit" => "static rate per subflow (on the wire) of static-bpf",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        duration: Duration = "10s" => "length of each transfer",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        warmup: Duration = "2s" => "start of the window the per-path rates are measured over",
        variants: Vec<String> = DEFAULT_VARIANTS.join(",") => "which variants to run",
    }
}

impl PacingMptcpParams {
    /// The parameters with their variants checked, a pace above zero and
    /// a measuring window after the warmup.
    fn read(p: &Params) -> Result<PacingMptcpParams> {
        let q: PacingMptcpParams = p.typed()?;
        choices("variants", &q.variants, &VARIANTS)?;
        if q.pace.bits_per_sec() == 0 {
            bail!("parameter pace={:?}: expected a rate above zero", q.pace.to_string());
        }
        if q.warmup + Duration::from_secs(1) >= q.duration {
            bail!(
                "warmup {} leaves no measuring window in a {} run (it needs at least 1 s more)",
                format_duration(q.warmup),
                format_duration(q.duration)
            );
        }
        Ok(q)
    }
}

/// The names of this scenario's metrics, for its records, claims and
/// tests to name them by.
pub mod metric {
    pub use crate::testbeds::dumbbell::metric::*;
    pub const PATHS_USED: &str = "paths_used";
    /// Path `p`'s on-wire rate (`p0_wire_mbps`).
    pub fn wire_mbps(p: &str) -> String {
        format!("{p}_wire_mbps")
    }
    /// Path `p`'s rate off the rule's (`p0_pace_err_pct`).
    pub fn pace_err_pct(p: &str) -> String {
        format!("{p}_pace_err_pct")
    }

    /// The human names of the keys this scenario records (metrics and
    /// series), as its tables and plots title them.
    pub const NAMES: &[(&str, &str)] = &[
        ("p0_wire_mbps", "On-wire rate on path p0"),
        ("p1_wire_mbps", "On-wire rate on path p1"),
        ("p0_pace_err_pct", "Path p0's rate off the set rate"),
        ("p1_pace_err_pct", "Path p1's rate off the set rate"),
        (PATHS_USED, "Paths carrying data"),
    ];
}

impl Scenario for PacingMptcp {
    fn name(&self) -> &'static str {
        "pacing-mptcp"
    }
    fn title(&self) -> &'static str {
        "The cgroup pacer on MPTCP: every subflow paced, path by path"
    }
    fn description(&self) -> &'static str {
        "One MPTCP upload over two emulated paths (one subflow each), unpaced and paced by the cgroup \
         pacer (BPF sock_ops) at a fixed on-wire rate per subflow; the rate each path carried from the \
         sender is measured at its emulator against the rate set."
    }
    fn params(&self) -> Vec<ParamSpec> {
        PacingMptcpParams::specs()
    }
    fn check_params(&self, p: &Params) -> Result<()> {
        PacingMptcpParams::read(p).map(drop)
    }
    fn quick(&self) -> Vec<(&'static str, &'static str)> {
        vec![("duration", "5s")]
    }
    fn default_repeats(&self) -> u32 {
        1
    }
    fn variants(&self, p: &Params) -> Result<Vec<String>> {
        Ok(PacingMptcpParams::read(p)?.variants)
    }
    fn names(&self) -> Vec<(&'static str, &'static str)> {
        [crate::testbeds::dumbbell::metric::NAMES, metric::NAMES].concat()
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        let mut m = standard_metrics();
        for p in PATHS {
            m.push(MetricSpec::new(
                &metric::wire_mbps(p),
                "Mbit/s",
                true,
                &format!("on-wire rate the sender put on path {p} over the measuring window"),
            ));
            m.push(MetricSpec::new(
                &metric::pace_err_pct(p),
                "%",
                false,
                &format!("static-bpf: |path {p}'s on-wire rate − the rule's rate| ÷ the rule's rate"),
            ));
        }
        m.push(MetricSpec::new(
            metric::PATHS_USED,
            "paths",
            true,
            "paths that carried more than 1 Mbit/s from the sender",
        ));
        m
    }
    fn notes(&self, p: &Params) -> Result<Vec<String>> {
        let mut n = vec![
            "MPTCP with the in-kernel path manager: one subflow per path (h1's p1 address is a `subflow` \
             endpoint, routed out of p1 by a policy rule)."
                .into(),
            "Per-path rates are the frames that arrived at each path's emulator from h1 (before its queue), \
             with 24 bytes per frame for preamble, FCS and gap: the sender's pacing, not the path's."
                .into(),
        ];
        let q = PacingMptcpParams::read(p)?;
        let (pace, rate) = (q.pace, q.rate);
        if pace.bits_per_sec() >= rate.bits_per_sec() {
            n.push(format!(
                "WARNING: pace {pace} is not below the path rate {rate}: the paths, not the pacer, set the rates"
            ));
        }
        Ok(n)
    }
    fn estimate(&self, p: &Params, _d: Dilation) -> Result<Duration> {
        Ok(PacingMptcpParams::read(p)?.duration + Duration::from_secs(4))
    }
    fn prepare(&self, p: &Params, _config: &RunConfig, _dir: &Path) -> Result<Box<dyn Testbed>> {
        let q = PacingMptcpParams::read(p)?;
        Ok(Box::new(MptcpBed {
            rate: q.rate,
            rtt: q.rtt,
            buffer: q.buffer,
            pace: q.pace,
            duration: q.duration,
            warmup: q.warmup,
        }))
    }
}

struct MptcpBed {
    rate: Rate,
    rtt: Duration,
    buffer: Bytes,
    pace: Rate,
    duration: Duration,
    warmup: Duration,
}

impl MptcpBed {
    fn topology(&self) -> Result<Topology> {
        let mut t = TopologyBuilder::new("lab-mptcp2");
        t.host("h1");
        t.host("h2");
        for (i, p) in PATHS.iter().enumerate() {
            let i = i as u8;
            t.link(
                LinkSpec::emulated(
                    end_v4("h1", [10, 9, i, 1], 24).ifname(*p),
                    end_v4("h2", [10, 9, i, 2], 24).ifname(*p),
                )
                .name(*p)
                .rate(self.rate)
                .delay(self.rtt / 2)
                .buffer(QueueLimit::Bytes(self.buffer.0)),
            );
        }
        t.build().context("building the two-path topology")
    }

    /// MPTCP on both hosts: the in-kernel path manager, one extra subflow
    /// from h1's p1 address, routed out of p1.
    fn set_mptcp(&self, net: &Network) -> Result<()> {
        let off = |k: &str| (k.to_string(), "0".to_string());
        for h in ["h1", "h2"] {
            let mut kv = baseline_sysctls();
            kv.push(("net.mptcp.enabled".into(), "1".into()));
            kv.push(("net.mptcp.path_manager".into(), "kernel".into()));
            kv.extend(["net.ipv4.conf.all.rp_filter", "net.ipv4.conf.default.rp_filter"].map(off));
            kv.extend(PATHS.map(|p| off(&format!("net.ipv4.conf.{p}.rp_filter"))));
            sysctls(net, h, &kv)?;
        }
        let h1 = [
            "mptcp endpoint flush".to_string(),
            "mptcp limits set subflows 2 add_addr_accepted 0".to_string(),
            "mptcp endpoint add 10.9.1.1 dev p1 subflow".to_string(),
            "rule add from 10.9.1.1 lookup 101".to_string(),
            "route add 10.9.0.0/24 dev p1 table 101".to_string(),
        ];
        ip_batch(&net.ns("h1")?, &h1).context("MPTCP endpoint and policy route on h1")?;
        let h2 =
            ["mptcp endpoint flush".to_string(), "mptcp limits set subflows 2 add_addr_accepted 0".into()];
        ip_batch(&net.ns("h2")?, &h2).context("MPTCP limits on h2")?;
        Ok(())
    }
}

impl Testbed for MptcpBed {
    fn run_one(&mut self, ctx: &mut RunCtx<'_>) -> Result<()> {
        let meter_rel = format!("meter/{}-r{}", ctx.variant, ctx.repeat);
        let meter_dir = ctx.dir.join(&meter_rel);
        std::fs::create_dir_all(&meter_dir).with_context(|| format!("creating {}", meter_dir.display()))?;
        let topo = self.topology()?;
        let net =
            Network::up_with(&topo, &MeterOptions { dir: Some(meter_dir.clone()), jsonl: false, bin: None })
                .context("building the two-path topology")?;
        self.set_mptcp(&net)?;

        let listen = SocketAddr::new(net.addr("h2")?, DATA_PORT);
        let mut rcfg = RecvConfig::new(listen);
        rcfg.mptcp = true;
        let recv =
            net.run_in("h2", move || spawn_recv(rcfg))?.context("starting the MPTCP receiver in h2")?;

        let bpf = match ctx.variant.as_str() {
            "none" => None,
            "static-bpf" => Some(BpfPacing::join(&format!("static:{}", self.pace), false)?),
            "dynamic-bpf" => Some(BpfPacing::join("dynamic", false)?),
            "dynamic-bpf-hold" => Some(BpfPacing::join("dynamic", true)?),
            v => bail!("unknown variant {v}"),
        };
        let mut scfg = SendConfig::new(listen);
        scfg.volume = Volume::Duration(self.duration);
        scfg.cc = Some(DEFAULT_CC.to_string());
        scfg.mptcp = true;
        scfg.seed = ctx.seed;
        scfg.stop = Some(crate::runner::scenario::stop_flag());
        let sent = net.run_in("h1", move || run_send(scfg, |_| {}))?;
        if let Some(b) = bpf {
            let released = b.leave()?;
            ctx.note(format!(
                "cgroup pacer detached: {} paced sockets still open, {} released through a file descriptor, \
                 {} by the program itself, {} not reached",
                released.tracked, released.released, released.by_program, released.unreachable
            ))?;
        }
        let summary = sent.context("the MPTCP upload from h1")?;
        let _ = recv.stop();
        let td = net.teardown();
        ctx.emulator_timing(crate::testbeds::emulator_timing(&td.emulators));
        let mut drops = 0;
        for (name, s) in &td.emulators {
            if PATHS.contains(&name.as_str()) {
                drops += s.a_to_b.drops.queue + s.a_to_b.drops.loss;
            }
        }
        ctx.metric(metric::GOODPUT_MBPS, summary.goodput_bps as f64 / 1e6);
        ctx.metric(metric::DROPS, drops as f64);
        ctx.metric(metric::RETRANSMITS, summary.retransmits.unwrap_or(0) as f64);
        let mut used = 0;
        for p in PATHS {
            let rel = format!("{meter_rel}/{p}.csv");
            let file = ctx.dir.join(&rel);
            let text =
                std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            let bins = parse_bins(&text)?;
            let end = self.duration.as_secs_f64() - 0.5;
            let mbps = wire_mbps(&bins, self.warmup.as_secs_f64(), end)
                .with_context(|| format!("path {p} has no meter bins from the sender"))?;
            ctx.metric(&metric::wire_mbps(p), mbps);
            if mbps > 1.0 {
                used += 1;
            }
            if ctx.variant == "static-bpf" {
                let set = self.pace.bits_per_sec() as f64 / 1e6;
                ctx.metric(&metric::pace_err_pct(p), (mbps - set).abs() / set * 100.0);
            }
            ctx.attach("meter_csv", &rel)?;
        }
        ctx.metric(metric::PATHS_USED, used as f64);
        Ok(())
    }
}

/// On-wire Mbit/s that arrived in the bins from `from_s` to `to_s` after
/// the first bin: frame bytes plus [`WIRE_EXTRA`] per frame. `None` without
/// bins or with an empty window.
pub fn wire_mbps(bins: &[MeterBin], from_s: f64, to_s: f64) -> Option<f64> {
    let t0 = bins.first()?.start_s;
    let inside: Vec<&MeterBin> =
        bins.iter().filter(|b| b.start_s - t0 >= from_s && b.start_s + b.width_s - t0 <= to_s).collect();
    let first = inside.first()?;
    let last = inside.last()?;
    let span = last.start_s + last.width_s - first.start_s;
    if span <= 0.0 {
        return None;
    }
    let bytes: u64 = inside.iter().map(|b| b.arrived_bytes + WIRE_EXTRA * b.arrived_frames).sum();
    Some(bytes as f64 * 8.0 / span / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bins(n: usize, frames: u64, frame_bytes: u64) -> Vec<MeterBin> {
        (0..n)
            .map(|i| MeterBin {
                start_s: 10.0 + i as f64 * 0.0005,
                width_s: 0.0005,
                arrived_frames: frames,
                arrived_bytes: frames * frame_bytes,
                dropped_frames: 0,
            })
            .collect()
    }

    #[test]
    fn wire_rate_counts_the_frames_overhead_over_the_window() {
        // 2 frames of 1514 bytes per 500 µs: (1514 + 24)·2·8 / 0.0005 = 49.216 Mbit/s.
        let b = bins(10_000, 2, 1514);
        let r = wire_mbps(&b, 1.0, 4.0).unwrap();
        assert!((r - 49.216).abs() < 1e-6, "{r}");
        // The window starts at the first bin, not at zero.
        let mut b2 = bins(10_000, 2, 1514);
        for x in b2.iter_mut().take(2000) {
            x.arrived_frames = 100;
            x.arrived_bytes = 151_400;
        }
        let r2 = wire_mbps(&b2, 1.0, 4.0).unwrap();
        assert!((r2 - 49.216).abs() < 1e-6, "the first second (a burst) is outside the window: {r2}");
        assert!(wire_mbps(&b2, 0.0, 4.0).unwrap() > 60.0);
        assert_eq!(wire_mbps(&b, 6.0, 7.0), None, "the bins end at 5 s");
        assert_eq!(wire_mbps(&[], 0.0, 1.0), None);
    }

    #[test]
    fn topology_has_two_emulated_paths_between_the_hosts() {
        let bed = MptcpBed {
            rate: Rate::mbps(100),
            rtt: Duration::from_millis(20),
            buffer: Bytes(250_000),
            pace: Rate::mbps(40),
            duration: Duration::from_secs(10),
            warmup: Duration::from_secs(2),
        };
        let t = bed.topology().unwrap();
        for (i, p) in PATHS.iter().enumerate() {
            let l = t.link(p).unwrap_or_else(|| panic!("no link {p}"));
            assert!(l.is_emulated());
            assert_eq!(l.end_in("h1").unwrap().addr.unwrap().to_string(), format!("10.9.{i}.1/24"));
            assert_eq!(l.end_in("h2").unwrap().ifname, *p);
        }
    }

    #[test]
    fn a_warmup_that_leaves_no_window_is_refused() {
        let e = crate::runner::scenario::resolve_params(
            &PacingMptcp,
            false,
            &[("duration".into(), "3s".into()), ("warmup".into(), "2s".into())],
        )
        .expect_err("refused when the parameters are resolved, before anything runs");
        assert!(e.to_string().contains("warmup 2s leaves no measuring window"), "{e}");
    }
}
