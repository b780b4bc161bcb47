//! What a report says about how a run was taken: the time dilation D of a
//! scale-model run (figures are in experiment units) and the variant ×
//! repeat runs the fidelity monitor marked unfaithful, with its reason.
//! Runs recorded without either say nothing here.

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
         greyed here and their figures are still in the tables above.</p><table><tr><th>variant</th>\
         <th>repeat</th><th>faithful</th><th>saturated windows</th><th>min idle</th><th>max softirq</th>\
         <th>CPU stall</th><th>flow start p99 late</th><th>reason</th></tr>",
        data.fidelity.len()
    );
    for f in &data.fidelity {
        let _ = write!(
            o,
            "<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{} of {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            if f.faithful { "" } else { " class=\"unfaithful\"" },
            escape(&f.variant),
            f.repeat,
            if f.faithful { "yes" } else { "no" },
            f.saturated_windows,
            f.windows,
            pct(f.min_idle_pct),
            pct(f.max_softirq_pct),
            pct(f.cpu_stall_pct),
            f.flow_start_late_p99_ms.map(|v| format!("{v:.1} ms")).unwrap_or_else(|| "—".into()),
            escape(&f.reason)
        );
    }
    o.push_str("</table>");
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
        let _ = writeln!(o, "Unfaithful runs ({} of {}):", bad.len(), data.fidelity.len());
        for f in bad {
            let _ = writeln!(o, "- {} repeat {}: {}", f.variant, f.repeat, f.reason);
        }
        let _ = writeln!(o);
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
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
        data.header.as_mut().unwrap().params.insert("scale".into(), "4".into());
        data.fidelity.push(record("a", 0, true, ""));
        data.fidelity.push(record("a", 1, false, "9 of 20 windows saturated"));
        let h = fidelity_html(&data);
        assert!(h.contains("Scale D = 4"), "{h}");
        assert!(h.contains("1 of 2 run(s) marked unfaithful"), "{h}");
        assert_eq!(h.matches("class=\"unfaithful\"").count(), 1, "{h}");
        assert!(h.contains("9 of 20 windows saturated"), "{h}");
        assert!(h.contains("<td>7.5 ms</td>"), "{h}");
        let m = fidelity_markdown(&data);
        assert!(m.contains("Scale D = 4"), "{m}");
        assert!(m.contains("- a repeat 1: 9 of 20 windows saturated"), "{m}");
        assert!(!m.contains("a repeat 0"), "{m}");
    }
}
