//! `lab pacing`: [PSPacer]'s experiment (PSPacer on a 500 Mbit/s, 100 ms path
//! with a 1 MB drop-tail buffer) on the emulated dumbbell. One bulk transfer
//! per variant: unpaced CUBIC, dynamic pacing ([PSPacer] eq. 1) by our
//! TCP_INFO loop and by the kernel's own pacing with its ratios at 100%,
//! static pacing at the bottleneck rate, the same with one segment per GSO
//! packet on the sender's interface (`static-1seg`), and BBR.
//!
//! Why `static-1seg`: Linux TCP always builds GSO packets (segmented in
//! software when the device cannot; since 4.17, commit 0a6b2a1dc2a2 "tcp:
//! switch to GSO being always on") of about 1 ms of the pacing rate, at
//! least two segments, and paces per packet, so a paced sender emits its
//! segments in back-to-back bunches every ~1 ms. `gso_max_segs 1` on the
//! sender's interface makes each segment a packet of its own: the kernel
//! then spaces single frames, the nearest this kernel (no fq) comes to
//! PSPacer's frame-level gaps ([PSPacer]).
//!
//! `static-bpf` and `dynamic-bpf` pace the same CUBIC sender through the
//! cgroup pacer (`tcpaccel pace`, a BPF sock_ops program) instead of the
//! traffic tool's own socket option: static at the same on-wire rate
//! (converted with the socket's MSS), dynamic with [PSPacer] eq. 1 on every
//! ACK instead of every 5 ms; `dynamic-bpf-hold` adds the pacer's `--hold`
//! (delivery-rate hold while a queue shows, gentler slow start). See [`BpfPacing`] for how the sender gets into
//! a paced cgroup.
//!
//! Records per run: goodput, bottleneck drops (all and after the first 2 s),
//! the Fig. 2 series (100 ms bandwidth, cwnd) and the Fig. 3 zoom (500 µs bins
//! around the first drop) through `dumbbell::bulk`; for `dynamic-bpf-hold`
//! the hold's own state every 100 ms, per socket ([`record_hold`]:
//! `hold_cap_mbps/s1`, the estimate, delivery, queue, slow start, …); and
//! the pacing precision:
//! p50/p99 of how far the bottleneck's arrival gaps deviate from the ideal
//! gap (on-wire frame size / rate), two ways:
//! - `frame_gap_dev_*`: frame by frame, from the emulator's sample of every
//!   inter-arrival gap (kernel receive timestamps; `tcpaccel_emu`'s
//!   `arrival_gap_deviation`). This sees single-frame jitter and back-to-back
//!   pairs (a delayed ACK releasing two segments reads as one gap of ~0 and
//!   one of ~2× ideal: both deviate by the ideal gap).
//! - `gap_dev_*`: from the 500 µs meter bins, the mean arrival gap of each bin
//!   (width / frames) against the ideal gap of that bin's mean frame, weighted
//!   by frames: bursts at the bin scale and above, not jitter between frames.

use crate::engines::cgroup_pacer::{record_hold, BpfPacing};
use crate::runner::claims::{Claim, Figure, Goal, Measure, GOAL_BENCH, SEED000};
use crate::runner::records::{MetricSpec, Published};
use crate::runner::scenario::{ParamSpec, Params, RunConfig, RunCtx, Scenario, Testbed};
use crate::runner::typed::{choices, scenario_params, AutoCount, ScenarioParams};
use crate::testbeds::dumbbell::{bulk, sockbuf_sysctls, standard_metrics, HostSetup, Path2};
use crate::testbeds::meter::{parse_bins, MeterBin};
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::time::Duration;
use tcpaccel_core::scale::Dilation;
use tcpaccel_core::units::{bdp_bytes, Bytes, Rate};
use tcpaccel_traffic::{DynamicMode, Pace};

pub struct Pacing;

const VARIANTS: [&str; 12] = [
    "none",
    "dynamic",
    "dynamic-kernel",
    "dynamic-loop",
    "dynamic-bpf",
    "dynamic-bpf-hold",
    "static",
    "static-1seg",
    "static-precise",
    "static-bpf",
    "static-bpf-precise",
    "bbr",
];
/// What runs unless `variants` says otherwise: every variant but
/// `dynamic-loop`, the explicit name of the TCP_INFO loop that `dynamic`
/// runs by default.
fn default_variants() -> String {
    VARIANTS.iter().filter(|v| **v != "dynamic-loop").copied().collect::<Vec<_>>().join(",")
}
scenario_params! {
    /// The pacing scenario's parameters, read from the resolved map ([`Params::typed`]).
    pub struct PacingParams {
        rate: Rate = "500mbit" => "bottleneck rate (on the wire)",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        rtt: Duration = "100ms" => "round-trip propagation delay",
        buffer: Bytes = "1MB" => "drop-tail buffer at the bottleneck",
        sockbuf: Bytes = "12.5MB" => "socket buffer maximum (tcp_rmem/tcp_wmem) on both hosts",
        static_rate: StaticRate = "bottleneck" => "rate of the static variant (on the wire)",
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        duration: Duration = "60s" => "length of each transfer",
        variants: Vec<String> = default_variants() => "which variants to run",
        precise_segs: AutoCount = "auto"
            => "segments per GSO packet of the *-precise variants (auto: the most that keep gaps within 60 µs)",
    }
}

impl PacingParams {
    /// The parameters with their variants checked.
    fn read(p: &Params) -> Result<PacingParams> {
        let q: PacingParams = p.typed()?;
        choices("variants", &q.variants, &VARIANTS)?;
        Ok(q)
    }
    fn static_rate(&self) -> Rate {
        match self.static_rate {
            StaticRate::Bottleneck => self.rate,
            StaticRate::Rate(r) => r,
        }
    }
    /// `auto`: [`tcpaccel_core::precise::burst_segs`] at the static rate
    /// with [`PRECISE_BUDGET_NS`].
    fn precise_segs(&self) -> u32 {
        self.precise_segs
            .or(|| tcpaccel_core::precise::burst_segs(self.static_rate(), 1538, PRECISE_BUDGET_NS))
    }
}

/// `static_rate`: `bottleneck` (the path's rate) or a rate.
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize)]
#[serde(try_from = "String")]
pub enum StaticRate {
    Bottleneck,
    Rate(Rate),
}

impl TryFrom<String> for StaticRate {
    type Error = String;
    fn try_from(s: String) -> Result<StaticRate, String> {
        match s.trim() {
            "bottleneck" => Ok(StaticRate::Bottleneck),
            r => Rate::parse(r)
                .map(StaticRate::Rate)
                .map_err(|e| format!("expected bottleneck or a rate: {e}")),
        }
    }
}

/// The names of this scenario's own metrics (beside the dumbbell's
/// [`standard_metrics`]), for its claims and tests to name them by.
pub mod metric {
    pub use crate::testbeds::dumbbell::metric::*;
    pub const DROPS_AFTER_2S: &str = "drops_after_2s";
    pub const GAP_DEV_P50_US: &str = "gap_dev_p50_us";
    pub const GAP_DEV_P99_US: &str = "gap_dev_p99_us";
    pub const FRAME_GAP_DEV_P50_US: &str = "frame_gap_dev_p50_us";
    pub const FRAME_GAP_DEV_P99_US: &str = "frame_gap_dev_p99_us";
    pub const STEADY_RATE_FRAC: &str = "steady_rate_frac";
    pub const STEADY_WIRE_MBPS: &str = "steady_wire_mbps";
    pub const RAMP_95_S: &str = "ramp_95_s";

    /// The human names of the keys this scenario records (metrics and
    /// series), as its tables and plots title them.
    pub const NAMES: &[(&str, &str)] = &[
        (DROPS_AFTER_2S, "Drops after the first 2 s"),
        (GAP_DEV_P50_US, "Gap deviation, median (500 µs bins)"),
        (GAP_DEV_P99_US, "Gap deviation, p99 (500 µs bins)"),
        (FRAME_GAP_DEV_P50_US, "Frame gap deviation, median"),
        (FRAME_GAP_DEV_P99_US, "Frame gap deviation, p99"),
        (STEADY_RATE_FRAC, "On-wire rate after the ramp ÷ set rate"),
        (STEADY_WIRE_MBPS, "On-wire rate after the ramp"),
        (RAMP_95_S, "Time to 95% of the set rate"),
    ];
}

/// The spacing `--precise` keeps by default: every arrival gap within 60 µs
/// of the ideal (issue 27's target, ~2.5 frame times at 500 Mbit/s).
pub const PRECISE_BUDGET_NS: u64 = 60_000;
/// Width of the windows the ramp and the steady rate are read over.
const RATE_WINDOW_S: f64 = 0.1;
/// After the ramp reaches 95%, this much more is left out of the steady
/// rate (CUBIC's and the pacer's settling).
const SETTLE_S: f64 = 1.0;
/// Ethernet preamble + SFD (8), FCS (4), inter-frame gap (12): wire bytes a
/// frame costs beyond what the meter counts (header + payload).
const WIRE_EXTRA: f64 = 24.0;
/// Drops after this time count as "after the first RTTs" (slow start at
/// 500 Mbit/s and 100 ms ends within ~1 s).
const LATE_S: f64 = 2.0;

impl Scenario for Pacing {
    fn name(&self) -> &'static str {
        "pacing"
    }
    fn title(&self) -> &'static str {
        "[PSPacer]: pacing on a long fat path with a small drop-tail buffer"
    }
    fn description(&self) -> &'static str {
        "One bulk transfer per variant over a 500 Mbit/s, 100 ms bottleneck with a 1 MB drop-tail \
         buffer and 12.5 MB socket buffers: unpaced CUBIC, dynamic pacing (cwnd·mss/RTT) by TCP_INFO \
         loop and by kernel pacing at ratio 100, static pacing at the bottleneck rate, BBR."
    }
    fn params(&self) -> Vec<ParamSpec> {
        PacingParams::specs()
    }
    fn check_params(&self, p: &Params) -> Result<()> {
        PacingParams::read(p).map(drop)
    }
    fn quick(&self) -> Vec<(&'static str, &'static str)> {
        // A fifth of the rate with buffer and socket buffers scaled alike:
        // the same BDP-to-buffer ratios as the full run.
        vec![("duration", "8s"), ("rate", "100mbit"), ("buffer", "200KB"), ("sockbuf", "2.5MB")]
    }
    fn default_repeats(&self) -> u32 {
        1
    }
    fn variants(&self, p: &Params) -> Result<Vec<String>> {
        Ok(PacingParams::read(p)?.variants)
    }
    fn paper_scale(&self) -> &'static [(&'static str, &'static str)] {
        &[("rate", "500mbit"), ("buffer", "1MB")]
    }
    fn names(&self) -> Vec<(&'static str, &'static str)> {
        [crate::testbeds::dumbbell::metric::NAMES, metric::NAMES].concat()
    }
    fn metrics(&self) -> Vec<MetricSpec> {
        let mut m = standard_metrics();
        let spec = MetricSpec::lower_is_better;
        m.push(spec(
            metric::DROPS_AFTER_2S,
            "packets",
            "bottleneck drops after the first 2 s (after slow start)",
        ));
        m.push(spec(
            metric::GAP_DEV_P50_US,
            "µs",
            "median |arrival gap − ideal gap| at the bottleneck (500 µs bin means, per frame)",
        ));
        m.push(spec(metric::GAP_DEV_P99_US, "µs", "99th percentile of the same deviation"));
        m.push(spec(
            metric::FRAME_GAP_DEV_P50_US,
            "µs",
            "median |arrival gap − ideal gap| at the bottleneck, frame by frame (the emulator's gap sample)",
        ));
        m.push(spec(metric::FRAME_GAP_DEV_P99_US, "µs", "99th percentile of the same per-frame deviation"));
        m.push(spec(
            metric::STEADY_RATE_FRAC,
            "×",
            "on-wire arrival rate at the bottleneck after the ramp (from 2 s if it never reaches 95%; meter bins) / the set rate (1 is exact)",
        ));
        m.push(MetricSpec::new(metric::STEADY_WIRE_MBPS, "Mbit/s", true, "the same on-wire rate in Mbit/s"));
        m.push(spec(
            metric::RAMP_95_S,
            "s",
            "time from the first frame until a 100 ms window reaches 95% of the set rate",
        ));
        m
    }
    fn published(&self) -> Vec<Published> {
        let src = "[PSPacer], table (GtrcNET-1, 500 Mbit/s, 100 ms, 1 MB)";
        let row = |variant: &str, metric: &str, value: f64| Published {
            variant: variant.into(),
            metric: metric.into(),
            value,
            source: src.into(),
        };
        vec![
            row("none", metric::GOODPUT_MBPS, 200.0),
            row("none", metric::DROPS, 1455.0),
            row("dynamic", metric::GOODPUT_MBPS, 315.0),
            row("dynamic", metric::DROPS, 285.0),
            row("static", metric::GOODPUT_MBPS, 433.0),
            row("static", metric::DROPS, 0.0),
        ]
    }
    fn notes(&self, p: &Params) -> Result<Vec<String>> {
        let q = PacingParams::read(p)?;
        let (rate, rtt, buffer) = (q.rate, q.rtt, q.buffer);
        let bdp = bdp_bytes(rate, rtt);
        let mut n = vec![
            format!(
                "Path: {rate}, RTT {}, drop-tail {buffer} = {:.2} of the BDP ({bdp} bytes); [PSPacer] had 1 MB \
                 = 0.16 BDP at 500 Mbit/s and 100 ms. Scaled runs keep that ratio.",
                tcpaccel_core::units::format_duration(rtt),
                buffer.0 as f64 / bdp.max(1) as f64
            ),
            "Variants map to the paper's rows: none = noPSP (CUBIC here; BIC is not in this kernel), dynamic \
             = PSPD (eq. 1, cwnd·mss/RTT; our default is the TCP_INFO loop), static = PSPS."
                .into(),
            "dynamic-kernel sets net.ipv4.tcp_pacing_ss_ratio=100 and tcp_pacing_ca_ratio=100 in the \
             sender's namespace and only marks the socket as paced."
                .into(),
            "Pacing precision, two ways: frame_gap_dev_* from the emulator's sample of every inter-arrival \
             gap at the bottleneck (each against its frame's ideal gap at the bottleneck rate), gap_dev_* \
             from the 500 µs meter bins (mean gap per bin against the ideal gap of the bin's mean frame)."
                .into(),
            "Route metrics caching is off in every variant (tcp_no_metrics_save=1).".into(),
        ];
        let s = q.static_rate();
        if rate.bits_per_sec() > 0 && s.bits_per_sec() > rate.bits_per_sec() {
            n.push(format!(
                "WARNING: static_rate {s} is above the bottleneck rate {rate}: static pacing will overrun \
                 the bottleneck queue (not capped silently)."
            ));
        }
        Ok(n)
    }
    fn claims(&self) -> &'static [Claim] {
        CLAIMS
    }
    fn estimate(&self, p: &Params, _d: Dilation) -> Result<Duration> {
        Ok(PacingParams::read(p)?.duration + Duration::from_secs(4))
    }
    fn prepare(&self, p: &Params, _config: &RunConfig, _dir: &Path) -> Result<Box<dyn Testbed>> {
        let q = PacingParams::read(p)?;
        Ok(Box::new(PacingBed {
            path: Path2 { rate: q.rate, rtt: q.rtt, buffer: q.buffer },
            sockbuf: q.sockbuf,
            static_rate: q.static_rate(),
            duration: q.duration,
            precise_segs: q.precise_segs(),
        }))
    }
}

struct PacingBed {
    path: Path2,
    sockbuf: Bytes,
    static_rate: Rate,
    duration: Duration,
    precise_segs: u32,
}

impl PacingBed {
    fn setup(&self, variant: &str) -> Result<HostSetup> {
        let bufs = sockbuf_sysctls(self.sockbuf);
        let mut s =
            HostSetup { sender_sysctls: bufs.clone(), receiver_sysctls: bufs, ..HostSetup::default() };
        match variant {
            "none" => {}
            "dynamic" => {
                s.pace = Some(Pace::parse("dynamic").context("the default dynamic pacing")?);
                if let Some(Pace::Dynamic { mode: DynamicMode::Kernel, .. }) = s.pace {
                    s.sender_sysctls.extend(kernel_ratio_sysctls());
                }
            }
            "dynamic-kernel" => {
                s.pace = Some(Pace::Dynamic { mode: DynamicMode::Kernel, ceiling: None });
                s.sender_sysctls.extend(kernel_ratio_sysctls());
            }
            "dynamic-loop" => s.pace = Some(Pace::Dynamic { mode: DynamicMode::Loop, ceiling: None }),
            "static" => s.pace = Some(Pace::Static(self.static_rate)),
            "static-1seg" => {
                s.pace = Some(Pace::Static(self.static_rate));
                s.sender_gso_max_segs = Some(1);
            }
            "static-precise" => {
                s.pace = Some(Pace::Static(self.static_rate));
                s.sender_gso_max_segs = Some(self.precise_segs);
            }
            "static-bpf-precise" => s.sender_gso_max_segs = Some(self.precise_segs),
            "bbr" => s.cc = Some("bbr".into()),
            // Paced by the cgroup pacer around the run (run_one), not by the sender.
            "static-bpf" | "dynamic-bpf" | "dynamic-bpf-hold" => {}
            v => bail!("unknown variant {v}"),
        }
        Ok(s)
    }
}

fn kernel_ratio_sysctls() -> Vec<(String, String)> {
    vec![
        ("net.ipv4.tcp_pacing_ss_ratio".into(), "100".into()),
        ("net.ipv4.tcp_pacing_ca_ratio".into(), "100".into()),
    ]
}

impl Testbed for PacingBed {
    fn run_one(&mut self, ctx: &mut RunCtx<'_>) -> Result<()> {
        let setup = self.setup(&ctx.variant.clone())?;
        if ctx.variant.starts_with("static")
            && self.static_rate.bits_per_sec() > self.path.rate.bits_per_sec()
        {
            ctx.note(format!(
                "static rate {} is above the bottleneck rate {}: expect queue overflow at the bottleneck",
                self.static_rate, self.path.rate
            ))?;
        }
        let bpf = match ctx.variant.as_str() {
            "static-bpf" | "static-bpf-precise" => {
                Some(BpfPacing::join(&format!("static:{}", self.static_rate), false)?)
            }
            "dynamic-bpf" => Some(BpfPacing::join("dynamic", false)?),
            "dynamic-bpf-hold" => Some(BpfPacing::join("dynamic", true)?),
            _ => None,
        };
        let trace = match (&bpf, ctx.variant.as_str()) {
            (Some(b), "dynamic-bpf-hold") => Some(b.trace()?),
            _ => None,
        };
        let r = bulk(ctx, &self.path, &setup, self.duration);
        if let Some(t) = trace {
            record_hold(ctx, &t.finish()?)?;
        }
        if let Some(b) = bpf {
            let released = b.leave()?;
            ctx.note(format!("cgroup pacer detached: {} paced sockets were still open", released.tracked))?;
        }
        let r = r?;
        let file = ctx.dir.join(&r.meter_rel).join("wan.csv");
        let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        let bins = parse_bins(&text)?;
        let t0 = bins.first().map_or(0.0, |b| b.start_s);
        let late: u64 = bins.iter().filter(|b| b.start_s - t0 >= LATE_S).map(|b| b.dropped_frames).sum();
        ctx.metric(metric::DROPS_AFTER_2S, late as f64);
        if let Some((p50, p99)) = gap_deviation(&bins, self.path.rate) {
            ctx.metric(metric::GAP_DEV_P50_US, p50 / 1e3);
            ctx.metric(metric::GAP_DEV_P99_US, p99 / 1e3);
        }
        if let Some(g) = r.frame_gaps {
            ctx.metric(metric::FRAME_GAP_DEV_P50_US, g.abs_p50_ns / 1e3);
            ctx.metric(metric::FRAME_GAP_DEV_P99_US, g.abs_p99_ns / 1e3);
        }
        let set = if ctx.variant.starts_with("static") { self.static_rate } else { self.path.rate };
        let acc = steady_state(&bins, set);
        if let Some(ramp) = acc.ramp_95_s {
            ctx.metric(metric::RAMP_95_S, ramp);
        }
        if let Some(w) = acc.steady_wire_bps {
            ctx.metric(metric::STEADY_WIRE_MBPS, w / 1e6);
            ctx.metric(metric::STEADY_RATE_FRAC, w / set.bits_per_sec() as f64);
        }
        if ctx.variant.ends_with("precise") {
            ctx.note(format!(
                "{}: {} segments per GSO packet on h1's interface",
                ctx.variant, self.precise_segs
            ))?;
        }
        Ok(())
    }
}

/// The ramp and the steady on-wire rate of one run (see [`steady_state`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SteadyState {
    /// From the first bin with arrivals to the end of the first
    /// [`RATE_WINDOW_S`] window at ≥ 95% of the set rate.
    pub ramp_95_s: Option<f64>,
    /// Mean on-wire rate (frame bytes + [`WIRE_EXTRA`] per frame) from
    /// [`SETTLE_S`] after the ramp (from [`LATE_S`] if it never reached
    /// 95%) to the last whole window before the data ends.
    pub steady_wire_bps: Option<f64>,
}

/// A bin whose mean frame is at least this carries data (not only ACKs,
/// SYN or FIN).
const DATA_FRAME_BYTES: u64 = 1000;

/// Reads the ramp and the steady-state rate from the 500 µs meter bins:
/// bins are summed into [`RATE_WINDOW_S`] windows from the first arrival,
/// up to the last whole window before the last data frame.
pub fn steady_state(bins: &[MeterBin], set: Rate) -> SteadyState {
    let Some(first) = bins.iter().find(|b| b.arrived_frames > 0) else {
        return SteadyState::default();
    };
    let t0 = first.start_s;
    let mut windows: Vec<f64> = Vec::new();
    for b in bins.iter().filter(|b| b.start_s >= t0) {
        let w = ((b.start_s - t0) / RATE_WINDOW_S + 1e-9).floor() as usize;
        if windows.len() <= w {
            windows.resize(w + 1, 0.0);
        }
        windows[w] += (b.arrived_bytes as f64 + WIRE_EXTRA * b.arrived_frames as f64) * 8.0;
    }
    // Only whole windows before the last data frame's bin ends: the FIN
    // and ACKs after it, and the window the transfer ends in, are no rate.
    let data_end = bins
        .iter()
        .filter(|b| b.arrived_frames > 0 && b.arrived_bytes / b.arrived_frames >= DATA_FRAME_BYTES)
        .map(|b| b.start_s + b.width_s)
        .fold(t0, f64::max);
    windows.truncate(((data_end - t0) / RATE_WINDOW_S + 1e-9).floor().max(0.0) as usize);
    let target = set.bits_per_sec() as f64;
    let rates: Vec<f64> = windows.iter().map(|bits| bits / RATE_WINDOW_S).collect();
    let ramp_w = rates.iter().position(|r| *r >= 0.95 * target);
    let from = match ramp_w {
        Some(w) => w + 1 + (SETTLE_S / RATE_WINDOW_S).round() as usize,
        None => (LATE_S / RATE_WINDOW_S).round() as usize,
    };
    let steady = rates.get(from..).filter(|s| !s.is_empty()).map(|s| s.iter().sum::<f64>() / s.len() as f64);
    SteadyState { ramp_95_s: ramp_w.map(|w| (w + 1) as f64 * RATE_WINDOW_S), steady_wire_bps: steady }
}

/// Frames per precision window: a mean over fewer would be dominated by
/// the ±1 frame a bin boundary cuts (at 100 Mbit/s a 500 µs bin holds ~4).
const WINDOW_FRAMES: f64 = 20.0;

/// p50 and p99 (ns) of |mean arrival gap − ideal gap| over windows of
/// whole meter bins spanning at least [`WINDOW_FRAMES`] ideal full-size
/// (1538-byte) gaps, each window weighted by its frames; windows with fewer
/// than two frames are left out. The ideal gap is the on-wire size of the
/// window's mean frame at `rate` (core `ideal_gap_ns`).
pub fn gap_deviation(bins: &[MeterBin], rate: Rate) -> Option<(f64, f64)> {
    let bin_s = bins.iter().map(|b| b.width_s).find(|w| *w > 0.0)?;
    let per = (WINDOW_FRAMES * tcpaccel_core::pacing::ideal_gap_ns(1538, rate) / 1e9 / bin_s).ceil().max(1.0);
    let window_s = per * bin_s;
    let t0 = bins.first()?.start_s;
    let mut windows: std::collections::BTreeMap<u64, (u64, u64)> = std::collections::BTreeMap::new();
    for b in bins {
        let w = ((b.start_s - t0) / window_s + 1e-9).floor().max(0.0) as u64;
        let e = windows.entry(w).or_default();
        e.0 += b.arrived_frames;
        e.1 += b.arrived_bytes;
    }
    let mut devs: Vec<(f64, u64)> = windows
        .values()
        .filter(|(frames, _)| *frames >= 2)
        .map(|&(frames, bytes)| {
            let n = frames as f64;
            let gap = window_s * 1e9 / n;
            let wire = (bytes as f64 / n + WIRE_EXTRA).round() as u64;
            let ideal = tcpaccel_core::pacing::ideal_gap_ns(wire, rate);
            ((gap - ideal).abs(), frames)
        })
        .collect();
    if devs.is_empty() {
        return None;
    }
    devs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: u64 = devs.iter().map(|d| d.1).sum();
    let at = |q: f64| {
        let want = (q * total as f64).ceil().max(1.0) as u64;
        let mut acc = 0;
        for (d, w) in &devs {
            acc += w;
            if acc >= want {
                return *d;
            }
        }
        devs.last().map_or(0.0, |d| d.0)
    };
    Some((at(0.5), at(0.99)))
}

/// What this scenario claims: published figures and goals, judged by the report against a run's summaries.
pub(crate) const CLAIMS: &[Claim] = &[
    Claim {
        text: "Static pacing leaves no drops at the bottleneck",
        measure: Measure::Median { variant: "static", metric: metric::DROPS },
        goal: Goal::AtMost(0.0),
        goal_source: GOAL_BENCH,
        published: Some(Figure { value: 0.0, source: SEED000 }),
        when: &[],
    },
    Claim {
        text: "Static pacing reaches 450 of 470.7 Mbit/s (share of the goodput limit)",
        measure: Measure::ShareOfLimit { variant: "static", metric: metric::GOODPUT_MBPS },
        goal: Goal::AtLeast(450.0 / 470.7),
        goal_source: GOAL_BENCH,
        published: Some(Figure { value: 433.0 / 470.7, source: "[PSPacer]: PSPS 433 of 470.7 Mbit/s" }),
        when: &[],
    },
    Claim {
        text: "Dynamic pacing cuts drops to a fifth of unpaced (dynamic ÷ none)",
        measure: Measure::Ratio { num: ("dynamic", metric::DROPS), den: ("none", metric::DROPS) },
        goal: Goal::AtMost(0.2),
        goal_source: GOAL_BENCH,
        published: Some(Figure { value: 285.0 / 1455.0, source: "[PSPacer]: PSPD 285 / noPSP 1455 drops" }),
        when: &[],
    },
    Claim {
        text: "Dynamic pacing keeps at least unpaced goodput (dynamic ÷ none)",
        measure: Measure::Ratio {
            num: ("dynamic", metric::GOODPUT_MBPS),
            den: ("none", metric::GOODPUT_MBPS),
        },
        goal: Goal::AtLeast(1.0),
        goal_source: GOAL_BENCH,
        published: Some(Figure { value: 315.0 / 200.0, source: "[PSPacer]: PSPD 315 / noPSP 200 Mbit/s" }),
        when: &[],
    },
    // The cgroup pacer's targets (issue 17): the hold against unpaced CUBIC
    // and against static pacing, in the same run.
    Claim {
        text: "The cgroup pacer's hold cuts drops to a tenth of unpaced (dynamic-bpf-hold ÷ none)",
        measure: Measure::Ratio { num: ("dynamic-bpf-hold", metric::DROPS), den: ("none", metric::DROPS) },
        // Issue 47's target, as BENCHMARKS.md states it.
        goal: Goal::AtMost(0.1),
        goal_source: GOAL_BENCH,
        published: Some(Figure { value: 285.0 / 1455.0, source: "[PSPacer]: PSPD 285 / noPSP 1455 drops" }),
        when: &[],
    },
    Claim {
        text: "The cgroup pacer's hold keeps 95% of static pacing's goodput (dynamic-bpf-hold ÷ static-bpf)",
        measure: Measure::Ratio {
            num: ("dynamic-bpf-hold", metric::GOODPUT_MBPS),
            den: ("static-bpf", metric::GOODPUT_MBPS),
        },
        goal: Goal::AtLeast(0.95),
        goal_source: GOAL_BENCH,
        published: Some(Figure { value: 315.0 / 433.0, source: "[PSPacer]: PSPD 315 / PSPS 433 Mbit/s" }),
        when: &[],
    },
    // `--precise` (issue 27): frame-level spacing at most of the rate.
    Claim {
        text: "--precise spaces frames within 60 µs of the ideal gap (p99 deviation, static-precise)",
        measure: Measure::Median { variant: "static-precise", metric: metric::FRAME_GAP_DEV_P99_US },
        goal: Goal::AtMost(PRECISE_BUDGET_NS as f64 / 1e3),
        goal_source: GOAL_BENCH,
        published: None,
        when: &[],
    },
    Claim {
        text: "--precise keeps 95% of the set rate after the ramp (static-precise)",
        measure: Measure::Median { variant: "static-precise", metric: metric::STEADY_RATE_FRAC },
        goal: Goal::AtLeast(0.95),
        goal_source: GOAL_BENCH,
        published: None,
        when: &[],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    fn bin(frames: u64, bytes_per_frame: u64) -> MeterBin {
        MeterBin {
            start_s: 0.0,
            width_s: 0.0005,
            arrived_frames: frames,
            arrived_bytes: frames * bytes_per_frame,
            dropped_frames: 0,
        }
    }

    #[test]
    fn paced_bins_have_no_deviation_and_bursts_do() {
        // 1514-byte frames + 24 = 1538 wire bytes; at 500 Mbit/s one every
        // 24.6 µs, so a window is one 500 µs bin (>= 20 gaps). 20 frames in
        // it: 25 µs apart, 0.39 µs off the ideal.
        let rate = Rate::mbps(500);
        let at = |i: usize, frames: u64| MeterBin { start_s: i as f64 * 0.0005, ..bin(frames, 1514) };
        let paced: Vec<MeterBin> = (0..10).map(|i| at(i, 20)).collect();
        let (p50, p99) = gap_deviation(&paced, rate).unwrap();
        assert!(p50 < 1_000.0 && p99 < 1_000.0, "{p50} {p99}");
        // A burst of 200 frames in one bin: 2.5 µs apart, 22 µs too close.
        let mut bins: Vec<MeterBin> = (0..9).map(|i| at(i, 20)).collect();
        bins.push(at(9, 200));
        let (p50, p99) = gap_deviation(&bins, rate).unwrap();
        assert!(p50 > 20_000.0 && p99 > 20_000.0, "the burst's 200 frames outweigh 180 paced ones: {p50}");
        bins.extend((10..40).map(|i| at(i, 20)));
        let (p50, p99) = gap_deviation(&bins, rate).unwrap();
        assert!(p50 < 1_000.0 && p99 > 20_000.0, "{p50} {p99}");
        // At 100 Mbit/s a window is five bins: 4, 5, 4, 4, 4 frames are 21
        // frames in 2.5 ms (119 µs apart), not 4 vs 5 per bin (25 µs apart).
        let slow: Vec<MeterBin> = [4, 5, 4, 4, 4].iter().enumerate().map(|(i, f)| at(i, *f)).collect();
        let (p50, _) = gap_deviation(&slow, Rate::mbps(100)).unwrap();
        assert!(p50 < 5_000.0, "{p50}");
        assert_eq!(gap_deviation(&[at(0, 1), at(1, 0)], rate), None);
    }

    #[test]
    fn steady_state_separates_the_ramp_from_the_steady_rate() {
        // 500 µs bins of 1514-byte frames (1538 on the wire): 0.3 s of
        // nothing-then-half rate, then 3 s at 20 frames a bin = 492.16
        // Mbit/s on the wire, then an unfinished last window and silence.
        let bin = |i: usize, frames: u64| MeterBin {
            start_s: 1.0 + i as f64 * 0.0005,
            width_s: 0.0005,
            arrived_frames: frames,
            arrived_bytes: frames * 1514,
            dropped_frames: 0,
        };
        let mut bins: Vec<MeterBin> = (0..200).map(|i| bin(i, 0)).collect();
        bins.extend((200..800).map(|i| bin(i, 10)));
        bins.extend((800..6800).map(|i| bin(i, 20)));
        bins.extend((6800..6850).map(|i| bin(i, 3)));
        bins.extend((6850..6950).map(|i| bin(i, 0)));
        // A FIN of 66 bytes after the data: not part of any rate.
        bins.push(MeterBin { arrived_bytes: 66, ..bin(6950, 1) });
        bins.extend((6951..7000).map(|i| bin(i, 0)));
        let s = steady_state(&bins, Rate::mbps(500));
        // The first frame is at bin 200 (0.1 s); half rate for 0.3 s, then
        // the first full window ends 0.4 s after the first frame.
        assert!((s.ramp_95_s.unwrap() - 0.4).abs() < 1e-9, "{s:?}");
        let want = 20.0 * 1538.0 * 8.0 / 0.0005;
        assert!((s.steady_wire_bps.unwrap() - want).abs() < 1e-3, "{s:?} vs {want}");
        // 492.16 / 500: 1.6% short, the 1% target would fail.
        assert!((s.steady_wire_bps.unwrap() / 500e6 - 0.98432).abs() < 1e-9);
        // Never reaching 95% of 600 Mbit/s: no ramp, and the steady rate
        // is read from 2 s on.
        let short = steady_state(&bins, Rate::mbps(600));
        assert_eq!(short.ramp_95_s, None);
        assert!((short.steady_wire_bps.unwrap() - want).abs() < 1e-3, "{short:?}");
        assert_eq!(steady_state(&[], Rate::mbps(500)), SteadyState::default());
    }

    #[test]
    fn variants_map_to_host_setups() {
        let bed = PacingBed {
            path: Path2 { rate: Rate::mbps(500), rtt: Duration::from_millis(100), buffer: Bytes(1_000_000) },
            sockbuf: Bytes(12_500_000),
            static_rate: Rate::mbps(500),
            duration: Duration::from_secs(1),
            precise_segs: 3,
        };
        let k = bed.setup("dynamic-kernel").unwrap();
        assert!(k.sender_sysctls.iter().any(|(k, v)| k == "net.ipv4.tcp_pacing_ca_ratio" && v == "100"));
        assert!(!k.receiver_sysctls.iter().any(|(k, _)| k.contains("pacing")));
        assert_eq!(bed.setup("static").unwrap().pace, Some(Pace::Static(Rate::mbps(500))));
        assert_eq!(bed.setup("static").unwrap().sender_gso_max_segs, None);
        let fine = bed.setup("static-1seg").unwrap();
        assert_eq!((fine.pace, fine.sender_gso_max_segs), (Some(Pace::Static(Rate::mbps(500))), Some(1)));
        let precise = bed.setup("static-precise").unwrap();
        assert_eq!(
            (precise.pace, precise.sender_gso_max_segs),
            (Some(Pace::Static(Rate::mbps(500))), Some(3))
        );
        let bpf_precise = bed.setup("static-bpf-precise").unwrap();
        assert_eq!((bpf_precise.pace, bpf_precise.sender_gso_max_segs), (None, Some(3)));
        assert_eq!(bed.setup("bbr").unwrap().cc.as_deref(), Some("bbr"));
        assert_eq!(bed.setup("dynamic").unwrap().pace, Some(Pace::parse("dynamic").unwrap()));
        // The BPF variants leave the sender's socket alone: the cgroup paces it.
        let b = bed.setup("static-bpf").unwrap();
        assert_eq!((b.pace, b.cc), (None, None));
        assert!(bed.setup("psp").is_err());
    }

    /// Root test: static pacing leaves frames in back-to-back bunches (one
    /// GSO packet each); one segment per packet spaces them. Measured frame
    /// by frame by the emulator: at 100 Mbit/s the median deviation was
    /// 123 µs against 6 µs (an ideal gap of 123 µs), so a factor of 3 is a
    /// wide margin; both must keep most of the rate.
    #[test]
    fn root_one_segment_per_packet_spaces_paced_frames() {
        let d = crate::runner::scenario::run_short(
            &Pacing,
            &[
                ("variants", "static,static-1seg"),
                ("rate", "50mbit"),
                ("rtt", "20ms"),
                ("buffer", "100KB"),
                ("duration", "3s"),
            ],
        );
        let m = |v: &str, k: &str| {
            let s = d.summaries.iter().find(|s| s.variant == v).unwrap_or_else(|| panic!("{v} summary"));
            *s.metrics.get(k).unwrap_or_else(|| panic!("{v}: no {k} in {:?}", s.metrics))
        };
        let (bunched, spaced) =
            (m("static", metric::FRAME_GAP_DEV_P50_US), m("static-1seg", metric::FRAME_GAP_DEV_P50_US));
        eprintln!(
            "frame gap deviation p50: static {bunched:.1} us, static-1seg {spaced:.1} us; goodput {:.1} / {:.1} Mbit/s",
            m("static", metric::GOODPUT_MBPS),
            m("static-1seg", metric::GOODPUT_MBPS)
        );
        assert!(spaced * 3.0 < bunched, "static {bunched} us vs static-1seg {spaced} us");
        // 50 Mbit/s on the wire is 47 Mbit/s of goodput; 3 s include slow start.
        for v in ["static", "static-1seg"] {
            assert!(m(v, metric::GOODPUT_MBPS) > 25.0, "{v}: goodput {}", m(v, metric::GOODPUT_MBPS));
        }
        // Each run's fidelity record judges the emulator it ran through.
        for f in &d.fidelity {
            let late = f.emu_late_p99_ms.unwrap_or_else(|| panic!("{}: no emulator lateness", f.variant));
            eprintln!("{}: emulator p99 lateness {late:.3} ms", f.variant);
            assert!(late.is_finite() && late >= 0.0, "{f:?}");
        }
    }
}
