//! The Markdown summary for terminals and commit messages.

use super::fidelity::fidelity_markdown;
use super::judge;
use super::tables::{any_excluded, num, row_cell, tables, variant_order};
use super::verdict::verdict_markdown;
use crate::runner::records::{RunData, RunHeader};
use std::fmt::Write;

pub(super) fn params_line(h: &RunHeader) -> String {
    h.params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")
}

/// Markdown summary for terminals and commit messages.
pub fn markdown(data: &RunData) -> String {
    let h = data.header();
    let mut o = String::new();
    let _ = writeln!(o, "## {} (`{}`)\n", h.title, h.scenario);
    let _ = writeln!(
        o,
        "{} repeat(s){}, seed {}, kernel {}, {} CPUs{}\n",
        h.repeats,
        if h.quick { " (quick)" } else { "" },
        h.seed,
        h.kernel,
        h.cpus,
        if data.complete() { "" } else { " — **INCOMPLETE RUN**" }
    );
    let _ = writeln!(o, "Parameters: {}\n", params_line(h));
    o.push_str(&fidelity_markdown(data));
    let verdicts = verdict_markdown(&judge::judge(data));
    if !verdicts.is_empty() {
        let _ = writeln!(o, "{verdicts}");
    }
    o.push_str(&super::meaning::meaning_markdown(data));
    let tabs = tables(data);
    if !tabs.is_empty() {
        let variants = variant_order(data);
        let has_pub = !h.published.is_empty();
        let _ = write!(o, "| variant |");
        for t in &tabs {
            let _ = write!(
                o,
                " {}{} |",
                t.metric,
                if t.unit.is_empty() { String::new() } else { format!(" [{}]", t.unit) }
            );
        }
        let _ = writeln!(o);
        let _ = writeln!(o, "|---|{}", "---|".repeat(tabs.len()));
        for (i, v) in variants.iter().enumerate() {
            let _ = write!(o, "| {v} |");
            for t in &tabs {
                let r = &t.rows[i];
                let p = match (has_pub, r.published) {
                    (true, Some(p)) => format!(" · paper {}", num(p)),
                    _ => String::new(),
                };
                let _ = write!(o, " {}{p} |", row_cell(r));
            }
            let _ = writeln!(o);
        }
        let _ = writeln!(
            o,
            "\nCells: median (min–max) over repeats{}.",
            if any_excluded(&tabs) { " the fidelity monitor judged faithful" } else { "" }
        );
    }
    for n in &h.notes {
        let _ = writeln!(o, "\n> {n}");
    }
    for (v, n) in &data.notes {
        let _ = writeln!(o, "\n- {}{n}", v.as_ref().map(|v| format!("[{v}] ")).unwrap_or_default());
    }
    let terms = super::meaning::terms_markdown(&o);
    o.push_str(&terms);
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata;

    /// Golden: the Markdown summary of the fixed record set, byte for byte.
    #[test]
    fn markdown_golden() {
        let got = markdown(&testdata::run());
        let want = include_str!("../../tests/golden/summary.md");
        assert_eq!(got, want, "\n--- got ---\n{got}");
    }
}
