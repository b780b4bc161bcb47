//! What a report says about how a run was taken: the time dilation D of a
//! scale-model run (figures are in experiment units) and the variant ×
//! repeat runs the fidelity monitor marked unfaithful, with its reason,
//! the fabric's queue counters and the D it suggests trying next. Runs
//! recorded without either say nothing here.
//!
//! Also which runs count: an unfaithful run measured the machine, so the
//! tables, bars, CDFs and verdicts leave it out ([`counted`]) and say how
//! many they left out ([`cell_text`]).

use crate::runner::records::{FidelityRecord, RunData};
use std::fmt::Write;
use tcpaccel_plot::escape;

/// One sentence naming D, or `None` for an undilated run.
pub fn scale_line(data: &RunData) -> Option<String> {
    let d = data.header().dilation().get();
    (d > 1).then(|| {
        format!(
            "Scale D = {d}: rates were divided by {d} and times multiplied by {d}; every time and rate in the \
             tables is in experiment units (wall time ÷ {d}); metrics ending in `_wall@x` are wall-clock twins."
        )
    })
}

/// Whether `variant`'s `repeat` counts in medians: everything but a run the
/// monitor marked unfaithful (runs recorded before the monitor count).
pub fn counted(data: &RunData, variant: &str, repeat: u32) -> bool {
    data.faithful(variant, repeat) != Some(false)
}

/// A table cell from the median text of the counted runs (`None`: none
/// had a value) and how many unfaithful runs were left out: the median as
/// it is, the median and the count excluded, or "all runs unfaithful"
/// where nothing is left to take a median of. `None` where there is no
/// figure at all.
pub fn cell_text(median: Option<String>, excluded: usize) -> Option<String> {
    match (median, excluded) {
        (Some(m), 0) => Some(m),
        (Some(m), n) => Some(format!("{m} [{n} unfaithful excluded]")),
        (None, 0) => None,
        (None, _) => Some(ALL_UNFAITHFUL.into()),
    }
}

/// The cell of a metric whose every run was unfaithful.
pub const ALL_UNFAITHFUL: &str = "all runs unfaithful";

/// The largest D any unfaithful run suggests, with the D it ran at.
pub fn suggested_scale(data: &RunData) -> Option<(u32, u32)> {
    let d = data.header().dilation().get();
    data.fidelity.iter().filter_map(|f| f.suggested_scale).max().map(|s| (d, s))
}

fn suggestion_line(data: &RunData) -> Option<String> {
    suggested_scale(data).map(|(d, s)| {
        format!(
            "Suggested scale: D = {s} (this run: D = {d}; from the busiest CPU windows of its unfaithful runs, \
             scaled as 1/D and aimed at half the machine): `--set scale={s}`."
        )
    })
}

fn queues_text(f: &FidelityRecord) -> String {
    match &f.queues {
        None => "—".into(),
        Some(q) => {
            let mut t = format!(
                "{} of {} ports sent {} pkts; {} drops, {} overlimits; backlog peak {} B/port, mean {:.0} B total",
                q.active_ports,
                q.ports,
                q.sent_packets,
                q.drops,
                q.overlimits,
                q.peak_port_backlog_bytes,
                q.mean_total_backlog_bytes
            );
            if let Some(e) = &q.error {
                t.push_str(&format!(" (unread: {e})"));
            }
            t
        }
    }
}

/// The runs the monitor marked unfaithful, in record order.
pub fn unfaithful(data: &RunData) -> Vec<&FidelityRecord> {
    data.fidelity.iter().filter(|f| !f.faithful).collect()
}

fn pct(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.0}%")).unwrap_or_else(|| "—".into())
}

/// The HTML part: D, then (when the monitor ran) one row per run, the
/// unfaithful ones greyed with their reason.
pub fn fidelity_html(data: &RunData) -> String {
    let mut o = String::new();
    if let Some(line) = scale_line(data) {
        let _ = write!(o, "<p class=\"scale\"><strong>{}</strong></p>", escape(&line));
    }
    if data.fidelity.is_empty() {
        return o;
    }
    let bad = unfaithful(data).len();
    let _ = write!(
        o,
        "<h2>Fidelity</h2><p>{bad} of {} run(s) marked unfaithful (the host could not keep up); their rows are \
         greyed here and the tables, plots and verdicts above leave them out.</p>{}<table><tr><th>variant</th>\
         <th>repeat</th><th>faithful</th><th>saturated windows</th><th>min idle</th><th>max softirq</th>\
         <th>CPU stall</th><th>emulator p99 late</th><th>emulator away</th><th>flow start p99 late</th><th>fabric queues</th><th>reason</th></tr>",
        data.fidelity.len(),
        suggestion_line(data).map(|l| format!("<p><strong>{}</strong></p>", escape(&l))).unwrap_or_default()
    );
    for f in &data.fidelity {
        let _ = write!(
            o,
            "<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{} of {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            if f.faithful { "" } else { " class=\"unfaithful\"" },
            escape(&f.variant),
            f.repeat,
            if f.faithful { "yes" } else { "no" },
            f.saturated_windows,
            f.windows,
            pct(f.min_idle_pct),
            pct(f.max_softirq_pct),
            pct(f.cpu_stall_pct),
            f.emu_late_p99_ms.map(|v| format!("{v:.2} ms")).unwrap_or_else(|| "—".into()),
            f.emu_away_ms.map(|v| format!("{v:.1} ms")).unwrap_or_else(|| "—".into()),
            f.flow_start_late_p99_ms.map(|v| format!("{v:.1} ms")).unwrap_or_else(|| "—".into()),
            escape(&queues_text(f)),
            escape(&f.reason)
        );
    }
    o.push_str("</table>");
    o.push_str(&columns_html(data.fidelity[0].clone()));
    o
}

/// What each column of the fidelity table means, with the thresholds the
/// verdict used (recorded with each run; the first run's are shown).
fn columns_html(f: FidelityRecord) -> String {
    let defs = [
        (
            "saturated windows",
            format!(
                "of the 100 ms windows the monitor sampled the whole host's CPU in, those in which the host was \
                 saturated: idle below {:.0}% over all cores, or one core over {:.0}% in softirq (packet \
                 processing, where the emulated links' work runs). More than {:.0}% saturated windows make a run \
                 unfaithful.",
                f.limit_idle_pct, f.limit_softirq_pct, f.limit_saturated_pct
            ),
        ),
        ("min idle", "the lowest idle share of the whole host in any window (niced work, such as builds \
          started with nice, counts as idle: it yields to the run).".to_string()),
        ("max softirq", "the highest softirq share of one core in any window.".to_string()),
        (
            "CPU stall",
            "the share of the run's wall time in which some task waited for a CPU (the kernel's pressure \
             stall information, /proc/pressure/cpu `some`); recorded, not judged."
                .to_string(),
        ),
        (
            "emulator p99 late",
            format!(
                "for runs through the userspace link emulator: the 99th percentile of how late it sent frames \
                 against its model's delivery time (wall time, the worse direction); above {:.1} ms the run is \
                 unfaithful.",
                f.limit_emu_late_ms
            ),
        ),
        (
            "emulator away",
            format!(
                "for runs through the userspace link emulator: the longest one of its threads took to come back \
                 for its next round beyond the sleep it asked for (wall time; its own work is well under a \
                 millisecond, so this is a host stall). Frames sent meanwhile reach it together, as one \
                 burst no sender made; above {:.1} ms the run is unfaithful.",
                f.limit_emu_away_ms
            ),
        ),
        (
            "flow start p99 late",
            format!(
                "for runs of many flows: the 99th percentile of how late each flow started against its schedule \
                 (experiment units); above {:.1} ms the run is unfaithful.",
                f.limit_flow_start_late_ms
            ),
        ),
        (
            "fabric queues",
            "for fabrics of shaped switch ports: their qdisc counters over the run (packets sent, drops, \
             overlimits, the sampled backlog); recorded, not judged."
                .to_string(),
        ),
    ];
    let mut o = String::from("<dl class=\"key\">");
    for (term, def) in defs {
        let _ = write!(o, "<dt>{}</dt><dd>{}</dd>", escape(term), escape(&def));
    }
    o.push_str("</dl>");
    o
}

/// The Markdown part: D, and a line per unfaithful run.
pub fn fidelity_markdown(data: &RunData) -> String {
    let mut o = String::new();
    if let Some(line) = scale_line(data) {
        let _ = writeln!(o, "**{line}**\n");
    }
    let bad = unfaithful(data);
    if !bad.is_empty() {
        let _ = writeln!(
            o,
            "Unfaithful runs ({} of {}), left out of the tables and verdicts:",
            bad.len(),
            data.fidelity.len()
        );
        for f in bad {
            let _ = writeln!(o, "- {} repeat {}: {}", f.variant, f.repeat, f.reason);
        }
        let _ = writeln!(o);
    }
    if let Some(line) = suggestion_line(data) {
        let _ = writeln!(o, "{line}\n");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::records::QueueRecord;
    use crate::testdata;

    fn record(variant: &str, repeat: u32, faithful: bool, reason: &str) -> FidelityRecord {
        FidelityRecord {
            variant: variant.into(),
            repeat,
            faithful,
            reason: reason.into(),
            windows: 20,
            saturated_windows: if faithful { 0 } else { 9 },
            min_idle_pct: Some(if faithful { 40.0 } else { 1.0 }),
            max_softirq_pct: Some(12.0),
            cpu_stall_pct: None,
            limit_idle_pct: 5.0,
            limit_softirq_pct: 90.0,
            limit_saturated_pct: 10.0,
            flow_start_late_p99_ms: Some(if faithful { 1.0 } else { 7.5 }),
            limit_flow_start_late_ms: 2.0,
            emu_late_p99_ms: None,
            limit_emu_late_ms: 1.0,
            emu_away_ms: None,
            limit_emu_away_ms: 10.0,
            deciding_busy_pct: Some(if faithful { 60.0 } else { 99.0 }),
            suggested_scale: None,
            queues: None,
        }
    }

    #[test]
    fn an_undilated_run_without_monitor_says_nothing() {
        let data = testdata::run();
        assert_eq!(fidelity_html(&data), "");
        assert_eq!(fidelity_markdown(&data), "");
    }

    #[test]
    fn d_is_named_and_an_unfaithful_run_is_greyed_with_its_reason() {
        let mut data = testdata::run();
        data.header.as_mut().unwrap().scaled = Some(testdata::scaled(4));
        data.fidelity.push(record("a", 0, true, ""));
        data.fidelity.push(record("a", 1, false, "9 of 20 windows saturated"));
        let h = fidelity_html(&data);
        assert!(h.contains("Scale D = 4"), "{h}");
        assert!(h.contains("1 of 2 run(s) marked unfaithful"), "{h}");
        assert_eq!(h.matches("class=\"unfaithful\"").count(), 1, "{h}");
        assert!(h.contains("9 of 20 windows saturated"), "{h}");
        assert!(h.contains("<td>7.5 ms</td>"), "{h}");
        // Issue 51 item 8: every figure column is defined below the table,
        // with the thresholds the verdict used.
        for col in [
            "saturated windows",
            "min idle",
            "max softirq",
            "CPU stall",
            "flow start p99 late",
            "fabric queues",
        ] {
            assert!(h.contains(&format!("<th>{col}</th>")), "no column {col}: {h}");
            assert!(h.contains(&format!("<dt>{col}</dt>")), "column {col} undefined: {h}");
        }
        assert!(h.contains("idle below 5% over all cores") && h.contains("above 2.0 ms"), "{h}");
        let m = fidelity_markdown(&data);
        assert!(m.contains("Scale D = 4"), "{m}");
        assert!(m.contains("- a repeat 1: 9 of 20 windows saturated"), "{m}");
        assert!(!m.contains("a repeat 0"), "{m}");
    }

    #[test]
    fn cells_say_what_was_left_out() {
        assert_eq!(cell_text(Some("12 (10–14)".into()), 0).as_deref(), Some("12 (10–14)"));
        assert_eq!(cell_text(Some("12".into()), 2).as_deref(), Some("12 [2 unfaithful excluded]"));
        assert_eq!(cell_text(None, 3).as_deref(), Some(ALL_UNFAITHFUL));
        assert_eq!(cell_text(None, 0), None);
    }

    #[test]
    fn a_variant_whose_runs_were_all_unfaithful_is_greyed_not_numbered() {
        let mut data = testdata::run();
        for r in 0..3 {
            data.fidelity.push(record("static", r, false, "host saturated"));
            data.fidelity.push(record("none", r, r != 0, if r == 0 { "flows started late" } else { "" }));
        }
        let page = crate::report::html(&data);
        // goodput and drops of static: both cells greyed, no number.
        assert_eq!(page.matches("<td class=\"unfaithful\">all runs unfaithful</td>").count(), 2, "{page}");
        assert!(!page.contains("455 (450–460)"), "{page}");
        // none without its repeat 0 (goodput 230, drops 1400): 190 and 200 left.
        assert!(page.contains("195 (190–200) [1 unfaithful excluded]"), "{page}");
        assert!(page.contains("1478 (1455–1500) [1 unfaithful excluded]"), "{page}");
        let md = crate::report::markdown(&data);
        assert!(md.contains("| static | all runs unfaithful · paper 433 | all runs unfaithful |"), "{md}");
        assert!(md.contains("over repeats the fidelity monitor judged faithful"), "{md}");
        assert!(md.contains("Unfaithful runs (4 of 6), left out of the tables and verdicts:"), "{md}");
    }

    #[test]
    fn verdicts_leave_unfaithful_runs_out() {
        // The pacing fixture: one repeat per variant; static drops 0 is met.
        let mut data = testdata::pacing_run();
        let before = crate::report::judge::judge(&data);
        assert!(before.iter().any(|j| j.claim.text.contains("no drops") && j.verdict.word() == "met"));
        data.fidelity.push(record("static", 0, false, "host saturated"));
        let after = crate::report::judge::judge(&data);
        let static_claims: Vec<_> = after
            .iter()
            .filter(|j| {
                matches!(j.claim.measure, crate::runner::claims::Measure::Median { variant: "static", .. })
            })
            .collect();
        assert!(!static_claims.is_empty());
        for j in static_claims {
            let crate::report::judge::Verdict::Unknown { why } = &j.verdict else { panic!("{j:?}") };
            assert!(why.contains("every run of variant static") && why.contains("unfaithful"), "{why}");
        }
    }

    #[test]
    fn the_suggested_scale_and_the_queues_are_shown() {
        let mut data = testdata::run();
        data.header.as_mut().unwrap().scaled = Some(testdata::scaled(2));
        let mut a = record("none", 0, false, "host saturated");
        a.suggested_scale = Some(4);
        let mut b = record("none", 1, false, "flows started late");
        b.suggested_scale = Some(8);
        b.queues = Some(QueueRecord {
            ports: 24,
            active_ports: 20,
            sent_bytes: 1_000_000,
            sent_packets: 900,
            drops: 7,
            overlimits: 300,
            samples: 31,
            sweep_ms_mean: 0.5,
            peak_port_backlog_bytes: 100_000,
            peak_total_backlog_bytes: 150_000,
            mean_total_backlog_bytes: 30_000.4,
            most_drops_port: Some("ns/f0".into()),
            most_drops: 5,
            error: None,
        });
        data.fidelity = vec![a, b, record("none", 2, true, "")];
        assert_eq!(suggested_scale(&data), Some((2, 8)));
        let md = fidelity_markdown(&data);
        assert!(
            md.contains("Suggested scale: D = 8 (this run: D = 2;") && md.contains("`--set scale=8`"),
            "{md}"
        );
        let h = fidelity_html(&data);
        assert!(
            h.contains("20 of 24 ports sent 900 pkts; 7 drops, 300 overlimits; backlog peak 100000 B/port, mean 30000 B total"),
            "{h}"
        );
        assert!(h.contains("Suggested scale: D = 8"), "{h}");
        // No unfaithful run, no suggestion.
        data.fidelity.truncate(0);
        assert_eq!(suggested_scale(&data), None);
        assert!(!fidelity_markdown(&data).contains("Suggested"));
    }
}
