//! The verdict block: one line per claim of the scenario, measured against
//! the published figure and the goal (met, missed, or unknown when the run
//! lacks what the claim needs), as Markdown and as HTML.

use super::judge::{self, Judged, Verdict};
use crate::runner::records::RunData;
use std::fmt::Write;
use tcpaccel_plot::escape;

/// Markdown lines of the verdict block (empty when the scenario has no claims).
pub(super) fn verdict_markdown(judged: &[Judged]) -> String {
    let mut o = String::new();
    if judged.is_empty() {
        return o;
    }
    let _ = writeln!(o, "| verdict | claim | judges | measured | published | goal |");
    let _ = writeln!(o, "|---|---|---|---|---|---|");
    for j in judged {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} ({}) |",
            verdict_word(&j.verdict),
            j.claim.text,
            judges(j),
            measured_text(&j.verdict),
            j.claim
                .published
                .map(|p| format!("{} ({})", judge::fmt(p.value), p.source))
                .unwrap_or_else(|| "—".into()),
            j.claim.goal.text(),
            j.claim.goal_source,
        );
    }
    o
}

/// The variants a verdict judges ("dynamic ÷ none" for a ratio): the
/// line names them, whatever the claim's words say.
fn judges(j: &Judged) -> String {
    j.claim.measure.variants().join(" ÷ ")
}

fn verdict_word(v: &Verdict) -> &'static str {
    match v {
        Verdict::Met { .. } => "**met**",
        Verdict::Missed { .. } => "**MISSED**",
        Verdict::Unknown { .. } => "unknown",
    }
}

pub(super) fn measured_text(v: &Verdict) -> String {
    match v {
        Verdict::Met { measured, detail } | Verdict::Missed { measured, detail } if detail.is_empty() => {
            judge::fmt_measured(*measured)
        }
        Verdict::Met { measured, detail } | Verdict::Missed { measured, detail } => {
            format!("{} ({detail})", judge::fmt_measured(*measured))
        }
        Verdict::Unknown { why } => format!("— ({why})"),
    }
}

/// The verdict block at the top of the page: one row per claim, coloured by verdict.
pub fn verdict_html(data: &RunData) -> String {
    let judged = judge::judge(data);
    let h = data.header();
    let mut o = String::from("<section class=\"verdict\" id=\"verdict\"><h2>Verdict</h2>");
    if judged.is_empty() {
        let _ = write!(
            o,
            "<p>No published figure or goal is recorded for scenario <code>{}</code>; the tables below are the result.</p></section>",
            escape(&h.scenario)
        );
        return o;
    }
    let (met, missed) = judged.iter().fold((0, 0), |(a, b), j| match j.verdict {
        Verdict::Met { .. } => (a + 1, b),
        Verdict::Missed { .. } => (a, b + 1),
        Verdict::Unknown { .. } => (a, b),
    });
    let unknown = judged.len() - met - missed;
    let _ = write!(
        o,
        "<p class=\"tally\">{met} met, {missed} missed{} of {} claim(s). Measured: medians over this run's faithful repeats{}; \
         ratios and shares make runs at other scales comparable with the paper.</p>",
        if unknown > 0 { format!(", {unknown} unknown") } else { String::new() },
        judged.len(),
        if h.quick { " (a --quick run: scaled-down parameters)" } else { "" }
    );
    let _ = write!(
        o,
        "<table class=\"claims\"><tr><th></th><th>claim</th><th>judges</th><th>measured</th><th>published</th><th>goal</th></tr>"
    );
    for j in &judged {
        let (class, word) = match j.verdict {
            Verdict::Met { .. } => ("met", "✔ met"),
            Verdict::Missed { .. } => ("missed", "✘ missed"),
            Verdict::Unknown { .. } => ("unknown", "? unknown"),
        };
        let published = j
            .claim
            .published
            .map(|p| format!("{} <span class=\"src\">{}</span>", judge::fmt(p.value), escape(p.source)))
            .unwrap_or_else(|| "—".into());
        let _ = write!(
            o,
            "<tr class=\"{class}\"><td class=\"badge\">{word}</td><td>{}</td><td>{}</td><td>{}</td><td>{published}</td><td>{} <span class=\"src\">{}</span></td></tr>",
            escape(j.claim.text),
            escape(&judges(j)),
            escape(&measured_text(&j.verdict)),
            escape(&j.claim.goal.text()),
            escape(j.claim.goal_source)
        );
    }
    o.push_str("</table></section>");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::{self, pacing_run};

    #[test]
    fn unknown_claims_and_scenarios_without_claims() {
        let mut d = pacing_run();
        d.summaries.retain(|s| s.variant != "dynamic");
        let block = verdict_html(&d);
        // dynamic's two, dynamic-bpf-hold's two and static-precise's two.
        assert_eq!(block.matches("<tr class=\"unknown\">").count(), 6, "{block}");
        assert!(block.contains("no drops for variant dynamic"), "{block}");
        assert!(block.contains("no drops for variant dynamic-bpf-hold"), "{block}");
        // Each line names the variants it judges.
        assert!(block.contains("<td>dynamic-bpf-hold ÷ none</td>"), "{block}");
        assert!(verdict_markdown(&judge::judge(&d)).contains("| static |"));
        // The fixture scenario has no claims: the block says so instead of judging.
        let block = verdict_html(&testdata::run());
        assert!(block.contains("No published figure or goal") && !block.contains("<tr"), "{block}");
    }
}
