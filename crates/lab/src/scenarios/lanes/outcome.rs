//! What one workload run produced, read into the lanes scenarios' records:
//! short-flow FCT statistics, where the bytes went (SL shares, what large
//! flows put on SL while a short flow ran), long-flow goodput, and the
//! flow records and summary metrics of a run ([`record_outcome`]).

use std::time::Duration;

use anyhow::Result;
use tcpaccel_core::scale::Dilation;
use tcpaccel_core::stats::percentile_sorted;
use tcpaccel_core::workload::FlowClass;

use super::{Outcome, DAEMONS_ON_BPF_METRIC, SHORT_MAX};

/// The human names of the keys every lanes scenario records (what
/// [`record_outcome`] writes, and the switch age), as tables and plots
/// title them; each scenario adds its own.
pub(super) const NAMES: &[(&str, &str)] = &[
    ("sl_share_pct", "Bytes on the short-flow lane"),
    ("short_sl_bytes_pct", "Short flows: share of their bytes on SL"),
    ("tail_short_sl_bytes_pct", "Short flows at or above the p99: share of their bytes on SL"),
    ("medium_sl_bytes_pct", "Medium flows: share of their bytes on SL"),
    ("long_sl_bytes_pct", "Long flows: share of their bytes on SL"),
    ("sl_large_mbps_tail_short", "Flows above 100 KB on SL during a short flow at or above the p99 (median)"),
    ("sl_large_mbps_mid_short", "Flows above 100 KB on SL during a short flow of the middle tenth (median)"),
    ("switch_ms", "Connection age at the switch to LL"),
    ("switches", "Switches to LL"),
    ("failed_pm_commands", "Failed path-manager commands"),
    ("cut_by_limit", "Flows cut by the time limit"),
    ("short_flows", "Short flows"),
    ("short_avg_ms", "Short-flow FCT, mean"),
    ("short_p95_ms", "Short-flow FCT, p95"),
    ("short_p99_ms", "Short-flow FCT, p99"),
    ("short_incomplete", "Short flows not completed"),
    ("short_avg_ms_all", "Short-flow FCT, mean, unfinished flows at the time they had"),
    ("short_p99_ms_all", "Short-flow FCT, p99, unfinished flows at the time they had"),
];
use crate::engines::capture::CapturedFct;
use crate::engines::flows::FlowResult;
use crate::runner::records::CapturedTimes;
use crate::runner::scenario::{FlowCounters, RunCtx};

/// Short-flow FCT statistics of flows in (0, 100 KB], in ms: `avg`, `p95`
/// and `p99` over the completed flows; `avg_all` and `p99_all` over all of
/// them, an unfinished flow counted with the time it had when the run
/// ended — a lower bound on what it would have taken, so these are lower
/// bounds too, and equal the others when every flow completed.
#[derive(Debug, Clone, Copy)]
pub(super) struct ShortStats {
    pub(super) n: usize,
    pub(super) incomplete: usize,
    pub(super) avg: f64,
    pub(super) p95: f64,
    pub(super) p99: f64,
    pub(super) avg_all: f64,
    pub(super) p99_all: f64,
}

/// A flow's completion time in seconds, or for an unfinished flow the time
/// it had from its scheduled start until the run ended at `ended_s`.
fn time_had_s(r: &FlowResult, ended_s: f64) -> f64 {
    r.fct_s.unwrap_or((ended_s - r.start_s).max(0.0))
}

/// Mean and the 95th and 99th percentiles of `ms` (sorted in place); NaN
/// for an empty set.
fn avg_p95_p99(ms: &mut [f64]) -> (f64, f64, f64) {
    if ms.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    ms.sort_by(f64::total_cmp);
    let avg = ms.iter().sum::<f64>() / ms.len() as f64;
    (avg, percentile_sorted(ms, 95.0), percentile_sorted(ms, 99.0))
}

fn short_stats(o: &Outcome) -> ShortStats {
    let short: Vec<&FlowResult> = o.results.iter().filter(|r| r.bytes <= SHORT_MAX).collect();
    let mut done: Vec<f64> = short.iter().filter_map(|r| r.fct_s).map(|s| s * 1e3).collect();
    let ended_s = o.ended.as_secs_f64();
    let mut all: Vec<f64> = short.iter().map(|r| time_had_s(r, ended_s) * 1e3).collect();
    let n = done.len();
    let (avg, p95, p99) = avg_p95_p99(&mut done);
    let (avg_all, _, p99_all) = avg_p95_p99(&mut all);
    ShortStats { n, incomplete: short.len() - n, avg, p95, p99, avg_all, p99_all }
}

/// Where the bytes went, per class of completed flow: the SL's share (%) of
/// the bytes the flows' lanes carried (`FlowResult::lane_bytes`), for short
/// flows, short flows at or above the short p99 (`tail_ms`, wall), medium
/// and long flows. A class without measured bytes is left out.
fn sl_byte_shares(o: &Outcome, tail_ms: f64) -> Vec<(&'static str, f64)> {
    let share = |keep: &dyn Fn(&FlowResult) -> bool| {
        let (mut sl, mut all) = (0u64, 0u64);
        for r in o.results.iter().filter(|r| r.fct_s.is_some() && keep(r)) {
            sl += r.lane_bytes.get("sl").copied().unwrap_or(0);
            all += r.lane_bytes.values().sum::<u64>();
        }
        (all > 0).then(|| sl as f64 * 100.0 / all as f64)
    };
    let short = |r: &FlowResult| r.bytes <= SHORT_MAX;
    let tail = |r: &FlowResult| short(r) && r.fct_s.is_some_and(|f| f * 1e3 >= tail_ms);
    let long = |r: &FlowResult| !short(r) && r.class == FlowClass::Long;
    let medium = |r: &FlowResult| !short(r) && r.class != FlowClass::Long;
    [
        ("short_sl_bytes_pct", share(&short)),
        ("tail_short_sl_bytes_pct", share(&tail)),
        ("medium_sl_bytes_pct", share(&medium)),
        ("long_sl_bytes_pct", share(&long)),
    ]
    .into_iter()
    .filter_map(|(n, v)| v.map(|v| (n, v)))
    .collect()
}

/// Flow by flow, what larger flows put on SL while a short flow ran: each
/// completed flow above 100 KB has its SL bytes spread evenly over its life,
/// and a short flow sees the sum over its own life, as a rate (Mbit/s, wall
/// time). Returns the median of that over the short flows at or above the
/// short p99 FCT, and over the middle tenth (p45–p55); `None` without short
/// flows or without per-lane bytes.
fn sl_contention(results: &[FlowResult]) -> Option<(f64, f64)> {
    let done = |r: &&FlowResult| r.fct_s.is_some_and(|f| f > 0.0) && !r.lane_bytes.is_empty();
    let large: Vec<(f64, f64, f64)> = results
        .iter()
        .filter(done)
        .filter(|r| r.bytes > SHORT_MAX)
        .map(|r| {
            let f = r.fct_s.unwrap_or(0.0);
            (r.start_s, r.start_s + f, r.lane_bytes.get("sl").copied().unwrap_or(0) as f64 * 8.0 / f)
        })
        .collect();
    let mut short: Vec<(f64, f64)> = results
        .iter()
        .filter(done)
        .filter(|r| r.bytes <= SHORT_MAX)
        .map(|r| (r.start_s, r.fct_s.unwrap_or(0.0)))
        .collect();
    if short.is_empty() {
        return None;
    }
    short.sort_by(|a, b| a.1.total_cmp(&b.1));
    let seen = |&(start, fct): &(f64, f64)| {
        let end = start + fct;
        let bits: f64 = large.iter().map(|&(a, b, rate)| rate * (end.min(b) - start.max(a)).max(0.0)).sum();
        bits / fct / 1e6
    };
    let fcts: Vec<f64> = short.iter().map(|x| x.1).collect();
    let p99 = percentile_sorted(&fcts, 99.0);
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            f64::NAN
        } else {
            percentile_sorted(&v, 50.0)
        }
    };
    let tail = median(short.iter().filter(|x| x.1 >= p99).map(seen).collect());
    let n = short.len();
    let mid = median(short[n * 45 / 100..(n * 55 / 100).max(n * 45 / 100 + 1)].iter().map(seen).collect());
    Some((tail, mid))
}

/// Goodput of long-class flows at their receivers: bytes received over the
/// run's wall time, per back-end host, in Mbit/s, and how many long-class
/// flows the run had. Every long flow counts, finished or not: one the
/// sinks never heard of counts with 0 bytes. `None` for the goodput when
/// the run had no long flow (the thesis's workload at ⌊Load × back-end
/// hosts⌋ = 0 senders): no long flow is not 0 Mbit/s.
pub(super) fn long_goodput(o: &Outcome, backends: usize) -> (usize, Option<f64>) {
    let long: Vec<&FlowResult> = o.results.iter().filter(|r| r.class == FlowClass::Long).collect();
    if long.is_empty() {
        return (0, None);
    }
    let bytes: u64 = long.iter().map(|r| o.received.get(&r.id).map_or(0, |x| x.bytes)).sum();
    let mbps = bytes as f64 * 8.0 / o.wall.as_secs_f64().max(1e-9) / 1e6 / backends.max(1) as f64;
    (long.len(), Some(mbps))
}

/// Sets a time metric given in wall ms: `name` in experiment units (÷ D),
/// and when D > 1 also `name` with `_wall` before its `@point` in wall ms.
fn put_ms(ctx: &mut RunCtx<'_>, d: Dilation, name: &str, suffix: &str, wall_ms: f64) {
    put(ctx, format!("{name}{suffix}"), d.ms_to_experiment(wall_ms));
    if d != Dilation::ONE {
        put(ctx, format!("{name}_wall{suffix}"), wall_ms);
    }
}

/// Writes flow records and the common metrics of one outcome; FCTs in
/// experiment units (÷ D), flow records in both.
pub(super) fn record_outcome(
    ctx: &mut RunCtx<'_>,
    d: Dilation,
    o: &Outcome,
    suffix: &str,
    flows_too: bool,
) -> Result<ShortStats> {
    let ended_s = o.ended.as_secs_f64();
    for late in o.results.iter().filter_map(|r| r.start_late_s) {
        ctx.flow_started_late(late);
    }
    if flows_too {
        for r in &o.results {
            // The point (`@0.5`, `@6`) is part of the class: flows are
            // recorded at one point only, and the CDF titles should say which.
            let class = if r.bytes <= SHORT_MAX {
                format!("short (≤100 KB) {suffix}")
            } else if r.class == FlowClass::Long {
                format!("long {suffix}")
            } else {
                format!("medium {suffix}")
            };
            // An incomplete flow is recorded as such, with the time it had.
            let fct_ms = time_had_s(r, ended_s) * 1e3;
            let capture = o.captured.get(&r.id).map(|c| CapturedTimes {
                to_last_data_ack_ms: c.to_last_data_ack.map(|t| t.as_secs_f64() * 1e3),
                to_fin_ack_ms: c.to_fin_ack.map(|t| t.as_secs_f64() * 1e3),
            });
            let counted =
                FlowCounters { lane_bytes: r.lane_bytes.clone(), retrans_bytes: r.retrans_bytes, capture };
            ctx.flow_counted(r.id, class.trim_end(), r.bytes, r.start_s, fct_ms, r.fct_s.is_some(), counted)?;
        }
    }
    let s = short_stats(o);
    for (name, share) in sl_byte_shares(o, s.p99) {
        put(ctx, format!("{name}{suffix}"), share);
    }
    if let Some((tail, mid)) = sl_contention(&o.results) {
        put(ctx, format!("sl_large_mbps_tail_short{suffix}"), d.rate_to_experiment(tail));
        put(ctx, format!("sl_large_mbps_mid_short{suffix}"), d.rate_to_experiment(mid));
    }
    let unread = o.results.iter().filter(|r| r.fct_s.is_some() && r.lane_bytes.is_empty()).count();
    if unread > 0 {
        put(ctx, format!("flows_without_lane_bytes{suffix}"), unread as f64);
    }
    put(ctx, format!("short_flows{suffix}"), s.n as f64);
    put_ms(ctx, d, "short_avg_ms", suffix, s.avg);
    put_ms(ctx, d, "short_p95_ms", suffix, s.p95);
    put_ms(ctx, d, "short_p99_ms", suffix, s.p99);
    put(ctx, format!("short_incomplete{suffix}"), s.incomplete as f64);
    if !o.captured.is_empty() {
        let short_ms = |end: fn(&CapturedFct) -> Option<Duration>| -> Vec<f64> {
            o.results
                .iter()
                .filter(|r| r.bytes <= SHORT_MAX && r.fct_s.is_some())
                .filter_map(|r| o.captured.get(&r.id).and_then(end))
                .map(|t| t.as_secs_f64() * 1e3)
                .collect()
        };
        for (name, end) in [
            ("syn_data_ack", (|c: &CapturedFct| c.to_last_data_ack) as fn(&CapturedFct) -> Option<Duration>),
            ("syn_fin_ack", |c: &CapturedFct| c.to_fin_ack),
        ] {
            let mut v = short_ms(end);
            put(ctx, format!("short_timed_{name}{suffix}"), v.len() as f64);
            let (avg, _, p99) = avg_p95_p99(&mut v);
            put_ms(ctx, d, &format!("short_avg_ms_{name}"), suffix, avg);
            put_ms(ctx, d, &format!("short_p99_ms_{name}"), suffix, p99);
        }
    }
    put_ms(ctx, d, "short_avg_ms_all", suffix, s.avg_all);
    put_ms(ctx, d, "short_p99_ms_all", suffix, s.p99_all);
    let total: u64 = o.tx_per_fabric.iter().sum();
    if total > 0 {
        put(ctx, format!("sl_share_pct{suffix}"), o.tx_per_fabric[0] as f64 * 100.0 / total as f64);
    }
    if let Some(d) = &o.daemons {
        put(ctx, format!("switches{suffix}"), d.switch_ages_ms.len() as f64);
        put(ctx, format!("failed_pm_commands{suffix}"), d.failed_commands as f64);
        // Each daemon's own thread only: the BPF program's per-segment work
        // is charged to the threads and softirqs that receive the segments.
        let wall = o.wall.as_secs_f64().max(1e-9);
        if let Some(max) = d.cpu_s.iter().copied().reduce(f64::max) {
            let mean = d.cpu_s.iter().sum::<f64>() / d.cpu_s.len() as f64;
            put(ctx, format!("daemon_cpu_pct_mean{suffix}"), mean * 100.0 / wall);
            put(ctx, format!("daemon_cpu_pct_max{suffix}"), max * 100.0 / wall);
            let hosts = d.cpu_s.len() as f64;
            let probes = d.probe_cpu_s.iter().sum::<f64>() / hosts;
            put(ctx, format!("daemon_probe_cpu_pct_mean{suffix}"), probes * 100.0 / wall);
            let start = d.start_cpu_s.iter().sum::<f64>() / hosts;
            put(ctx, format!("daemon_start_cpu_ms_mean{suffix}"), start * 1e3);
        }
        put(ctx, format!("{DAEMONS_ON_BPF_METRIC}{suffix}"), if d.signals == "bpf" { 1.0 } else { 0.0 });
        if d.signals == "bpf" {
            let hosts = d.cpu_s.len().max(1) as f64;
            put(ctx, format!("bpf_prog_cpu_pct_mean{suffix}"), d.bpf_run_s * 100.0 / wall / hosts);
            put(ctx, format!("bpf_signals{suffix}"), d.bpf_signals as f64);
            let mut v = d.signal_ms.clone();
            v.sort_by(f64::total_cmp);
            if !v.is_empty() {
                put(ctx, format!("signal_to_switch_ms_p50{suffix}"), percentile_sorted(&v, 50.0));
                put(ctx, format!("signal_to_switch_ms_p99{suffix}"), percentile_sorted(&v, 99.0));
            }
        }
    }
    let cut = o.results.iter().filter(|r| r.error.as_ref().is_some_and(|e| e.is_time_limit())).count();
    put(ctx, format!("cut_by_limit{suffix}"), cut as f64);
    // Flows the time limit cut are counted above, not as failures.
    let errors: Vec<&crate::engines::flows::FlowFailure> =
        o.results.iter().filter_map(|r| r.error.as_ref()).filter(|e| !e.is_time_limit()).collect();
    if !errors.is_empty() {
        ctx.note(format!("{} flow(s) failed{suffix}; first: {}", errors.len(), errors[0]))?;
    }
    Ok(s)
}

/// Sets a metric when it has a value (no short flow completed: left out, not NaN).
pub(super) fn put(ctx: &mut RunCtx<'_>, name: String, v: f64) {
    if v.is_finite() {
        ctx.metric(&name, v);
    }
}

/// Writes a sample when it has a value.
pub(super) fn sample(ctx: &mut RunCtx<'_>, series: &str, x: f64, v: f64) -> Result<()> {
    if v.is_finite() {
        ctx.sample(series, x, v)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::flows::Received;
    use std::collections::BTreeMap;
    use std::time::{Duration, Instant};

    /// An MPTCP flow from host 0 to 1 that started on time at 0 s, without
    /// per-lane bytes.
    fn flow(id: u64, class: FlowClass, bytes: u64, fct_s: Option<f64>) -> FlowResult {
        FlowResult {
            id,
            class,
            src: 0,
            dst: 1,
            bytes,
            start_s: 0.0,
            start_late_s: Some(0.0),
            fct_s,
            lane: "mptcp".into(),
            winner: None,
            lane_bytes: BTreeMap::new(),
            retrans_bytes: None,
            conns: Vec::new(),
            error: None,
        }
    }
    #[test]
    fn sl_contention_is_what_large_flows_put_on_sl_during_each_short_flow() {
        let r = |id: u64, bytes: u64, start_s: f64, fct: f64, sl: u64| FlowResult {
            id,
            class: FlowClass::Short,
            src: 0,
            dst: 1,
            bytes,
            start_s,
            start_late_s: Some(0.0),
            fct_s: Some(fct),
            lane: "mptcp".into(),
            winner: None,
            lane_bytes: [("sl".to_string(), sl), ("ll0".to_string(), bytes + 16 - sl)].into(),
            retrans_bytes: Some(0),
            conns: Vec::new(),
            error: None,
        };
        // A: 1 MB on SL over 0–1 s (8 Mbit/s); B: 1 MB all on LL over 2–3 s.
        let mut v = vec![r(1, 1_000_000, 0.0, 1.0, 1_000_000), r(2, 1_000_000, 2.0, 1.0, 0)];
        // 99 short flows of 10 ms inside B's life, one of 100 ms inside A's,
        // whose first half overlaps A only.
        v.extend((0..99).map(|i| r(10 + i, 10_000, 2.0 + i as f64 * 0.005, 0.010, 10_016)));
        v.push(r(200, 10_000, 0.95, 0.100, 10_016));
        let (tail, mid) = sl_contention(&v).unwrap();
        assert!((tail - 4.0).abs() < 1e-9, "half of its life at 8 Mbit/s: {tail}");
        assert_eq!(mid, 0.0);
        // Without short flows, or without per-lane bytes: nothing to say.
        assert_eq!(sl_contention(&v[..2]), None);
        let bare: Vec<FlowResult> =
            v.iter().cloned().map(|x| FlowResult { lane_bytes: BTreeMap::new(), ..x }).collect();
        assert_eq!(sl_contention(&bare), None);
    }

    #[test]
    fn short_stats_count_unfinished_flows_with_the_time_they_had_beside_the_completed() {
        let r = |id: u64, bytes: u64, start_s: f64, fct_s: Option<f64>| {
            let class = if bytes > SHORT_MAX { FlowClass::Long } else { FlowClass::Short };
            FlowResult { start_s, ..flow(id, class, bytes, fct_s) }
        };
        // 98 short flows of 10 ms; two started at 0.5 s and unfinished when
        // the run ended at 2 s (1.5 s each); a long flow, unfinished, apart.
        let mut results: Vec<FlowResult> =
            (0..98).map(|i| r(i, 10_000, 0.01 * i as f64, Some(0.010))).collect();
        results.push(r(100, 50_000, 0.5, None));
        results.push(r(101, 50_000, 0.5, None));
        results.push(r(102, 800_000_000, 0.0, None));
        let o = Outcome {
            results,
            received: BTreeMap::new(),
            daemons: None,
            tx_per_fabric: vec![],
            wall: Duration::from_secs(2),
            ended: Duration::from_secs(2),
            captured: BTreeMap::new(),
        };
        let s = short_stats(&o);
        assert_eq!((s.n, s.incomplete), (98, 2));
        assert!((s.avg - 10.0).abs() < 1e-9 && (s.p99 - 10.0).abs() < 1e-9, "{s:?}");
        assert!((s.avg_all - (98.0 * 10.0 + 2.0 * 1500.0) / 100.0).abs() < 1e-9, "{s:?}");
        assert!((s.p99_all - 1500.0).abs() < 1e-9, "{s:?}");
        // With every flow complete both views agree.
        let done = Outcome { results: o.results[..98].to_vec(), ..o };
        let s = short_stats(&done);
        assert_eq!((s.avg_all, s.p99_all, s.incomplete), (s.avg, s.p99, 0));
    }

    #[test]
    fn long_goodput_counts_every_long_flow_and_is_absent_without_one() {
        let t0 = Instant::now();
        let r = flow;
        let got = |bytes: u64| Received { bytes, first: t0, last: t0, connections: 1, completed: 0 };
        // One finished long flow (10 MB), one cut off by the end of the run
        // after 5 MB, one the sinks never heard of, and a short flow that
        // does not count: 15 MB over 2 s and 4 back-end hosts is 15 Mbit/s.
        let o = Outcome {
            results: vec![
                r(1, FlowClass::Long, 10_000_000, Some(1.0)),
                r(2, FlowClass::Long, 20_000_000, None),
                r(3, FlowClass::Long, 20_000_000, None),
                r(4, FlowClass::Short, 50_000, Some(0.01)),
            ],
            received: [(1, got(10_000_000)), (2, got(5_000_000)), (4, got(50_000))].into(),
            daemons: None,
            tx_per_fabric: vec![],
            wall: Duration::from_secs(2),
            ended: Duration::from_secs(2),
            captured: BTreeMap::new(),
        };
        let (n, mbps) = long_goodput(&o, 4);
        assert_eq!(n, 3);
        assert!((mbps.unwrap() - 15.0).abs() < 1e-9, "{mbps:?}");
        // Long flows that delivered nothing: 0 Mbit/s, stated.
        let stalled = Outcome { received: BTreeMap::new(), ..o };
        assert_eq!(long_goodput(&stalled, 4), (3, Some(0.0)));
        // No long flow at all (⌊0.2 × 4⌋ = 0 senders): no goodput, not 0.
        let none = Outcome { results: stalled.results[3..].to_vec(), ..stalled };
        assert_eq!(long_goodput(&none, 4), (0, None));
    }
}
