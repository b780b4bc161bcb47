//! The self-contained HTML page: the verdict block, parameters, tables beside
//! published figures, and every plot inline.

use super::fidelity::fidelity_html;
use super::judge::{self, human_name};
use super::meaning::{meaning_html, terms_html};
use super::plots::plots;
use super::tables::{any_excluded, num, row_cell, tables};
use super::verdict::verdict_html;
use crate::runner::records::RunData;
use std::fmt::Write;
use tcpaccel_plot::escape;

/// A self-contained HTML page: parameters, tables beside published figures, all plots inline.
pub fn html(data: &RunData) -> String {
    let h = data.header();
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>\
body{{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}}\
table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}\
th{{background:#f4f4f4}}td:first-child,th:first-child{{text-align:left}}.pub{{color:#666}}\
.warn{{background:#fee;border:1px solid #c00;padding:.5em}}figure{{margin:1em 0}}code{{background:#f4f4f4}}\
.verdict{{border:1px solid #bbb;padding:0 1em .5em;margin:1em 0;background:#fafafa}}\
.meaning{{border:1px solid #9ab;padding:0 1em .5em;margin:1em 0;background:#f5f9fc}}.meaning td,.meaning th{{text-align:left;vertical-align:top}}\
pre{{margin:.3em 0;white-space:pre-wrap}}dt{{font-weight:bold}}dd{{margin:0 0 .4em 1.5em}}\
.claims td,.claims th{{text-align:left}}.claims .badge{{font-weight:bold;white-space:nowrap}}\
tr.met td{{background:#e6f4ea}}tr.met .badge{{color:#137333}}\
tr.missed td{{background:#fce8e6}}tr.missed .badge{{color:#a50e0e}}\
tr.unknown td{{background:#f1f3f4;color:#555}}tr.unfaithful td,td.unfaithful{{background:#eee;color:#888}}.scale{{background:#eef;padding:.5em}}.src{{color:#666;font-size:.85em}}.key{{color:#666;font-size:.85em}}\
</style></head><body>",
        t = escape(&h.title)
    );
    let _ = write!(o, "<h1>{}</h1>", escape(&h.title));
    if !data.complete() {
        let reason = data.end.as_ref().map(|e| e.reason.clone()).unwrap_or_else(|| "no end record".into());
        let _ = write!(o, "<p class=\"warn\">Incomplete run: {}</p>", escape(&reason));
    }
    o.push_str(&verdict_html(data));
    o.push_str(&meaning_html(data));
    // The terms the page uses are defined here, near the top, once the
    // whole page is written (see the end).
    let terms_at = o.len();
    o.push_str(&fidelity_html(data));
    let _ = write!(o, "<p>{}</p>", escape(&h.description));
    let _ = write!(
        o,
        "<p>Scenario <code>{}</code>, {} repeat(s){}, seed {}, kernel {}, {} CPUs, tcpaccel {}.</p>",
        escape(&h.scenario),
        h.repeats,
        if h.quick { " (quick)" } else { "" },
        h.seed,
        escape(&h.kernel),
        h.cpus,
        escape(&h.tool_version)
    );
    let _ = write!(o, "<h2>Parameters</h2><table><tr><th>key</th><th>value</th></tr>");
    for (k, v) in &h.params {
        let _ = write!(o, "<tr><td>{}</td><td>{}</td></tr>", escape(k), escape(v));
    }
    let _ = write!(o, "</table>");
    for n in &h.notes {
        let _ = write!(o, "<p>{}</p>", escape(n));
    }
    let tabs = tables(data);
    if !tabs.is_empty() {
        let _ = write!(
            o,
            "<h2>Results</h2><p>Median (min–max) over repeats{}; published figures beside.</p>",
            if any_excluded(&tabs) { " the fidelity monitor judged faithful (see Fidelity)" } else { "" }
        );
        for t in &tabs {
            let _ = write!(
                o,
                "<h3>{} {}</h3><p>{} <span class=\"key\">(<code>{}</code>)</span></p><table><tr><th>variant</th><th>measured</th><th>published</th></tr>",
                escape(&human_name(&data.names, data.point_label, &t.metric)),
                if t.unit.is_empty() { String::new() } else { format!("[{}]", escape(&t.unit)) },
                escape(&t.description),
                escape(&t.metric)
            );
            for r in &t.rows {
                let _ = write!(
                    o,
                    "<tr><td>{}</td><td{}>{}</td><td class=\"pub\">{}</td></tr>",
                    escape(&r.variant),
                    if r.all_unfaithful() { " class=\"unfaithful\"" } else { "" },
                    escape(&row_cell(r)),
                    r.published.map(num).unwrap_or_else(|| "—".into())
                );
            }
            let _ = write!(o, "</table>");
        }
        let sources: Vec<&str> = {
            let mut s: Vec<&str> = h.published.iter().map(|p| p.source.as_str()).collect();
            s.sort_unstable();
            s.dedup();
            s
        };
        if !sources.is_empty() {
            let _ = write!(o, "<p class=\"pub\">Published figures: {}.</p>", escape(&sources.join("; ")));
        }
        if let Err(differ) = judge::paper_scale(data.paper_scale, &h.params) {
            let _ = write!(
                o,
                "<p class=\"pub\">This run is at another scale than the published figures ({}): the tables show the \
                 paper's absolute figures for reference, the plots leave them out, and the verdict compares \
                 scale-free ratios.</p>",
                escape(&differ)
            );
        }
    }
    let plots = plots(data);
    if !plots.is_empty() {
        let _ = write!(o, "<h2>Plots</h2>");
        // The SVG carries its title; the caption says how to read the chart
        // (a caption repeating the title printed every name twice).
        for (stem, _, svg) in &plots {
            let _ = write!(
                o,
                "<figure>{svg}<figcaption class=\"key\">{}</figcaption></figure>",
                caption(stem, svg.contains("series-marker"))
            );
        }
    }
    if !data.notes.is_empty() {
        let _ = write!(o, "<h2>Notes</h2><ul>");
        for (v, n) in &data.notes {
            let _ = write!(
                o,
                "<li>{}{}</li>",
                v.as_ref().map(|v| format!("[{}] ", escape(v))).unwrap_or_default(),
                escape(n)
            );
        }
        let _ = write!(o, "</ul>");
    }
    let terms = terms_html(&o);
    o.insert_str(terms_at, &terms);
    o.push_str("</body></html>\n");
    o
}

/// How to read a plot, by the kind its file stem starts with, and whether
/// its lines carry markers (several series on one chart).
fn caption(stem: &str, marked: bool) -> String {
    let markers = if marked {
        " Where lines coincide, the markers (a shape per variant, as in the legend) show the one underneath; \
         jagged lines are drawn under smooth ones."
    } else {
        ""
    };
    match stem.split('-').next() {
        Some("bar") => {
            "Filled bars: the median over the repeats counted (whiskers: min–max); hollow dashed bars: \
                        the published figure, where the run is at the paper's scale."
                .to_string()
        }
        Some("ts") => format!("The first repeat of each variant.{markers}"),
        Some("cdf") => format!("The completed flows of the runs counted; x on a log scale.{markers}"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata;
    use crate::testdata::pacing_run;

    #[test]
    fn html_opens_with_the_verdict_block() {
        let page = html(&pacing_run());
        let block = page.split("<section class=\"verdict\"").nth(1).expect("a verdict block");
        let block = block.split("</section>").next().unwrap();
        // static drops 0 (met), static 464 of 470.7 (met), dynamic ÷ none drops 0.397 (missed),
        // dynamic ÷ none goodput 1.97 (met); the cgroup pacer's two claims
        // and --precise's two have no dynamic-bpf-hold or static-precise in
        // this run (unknown).
        assert_eq!(block.matches("<tr class=\"met\">").count(), 3, "{block}");
        assert_eq!(block.matches("<tr class=\"missed\">").count(), 1, "{block}");
        assert_eq!(block.matches("<tr class=\"unknown\">").count(), 4, "{block}");
        assert!(block.contains("3 met, 1 missed, 4 unknown of 8 claim(s)"), "{block}");
        assert!(block.contains("0.397 (883 / 2222)") && block.contains("≤ 0.2"), "{block}");
        // At the top: before the parameters and the results.
        let at = |s: &str| page.find(s).unwrap();
        assert!(at("class=\"verdict\"") < at("<h2>Parameters</h2>"));
        assert!(at("class=\"verdict\"") < at("<h2>Results</h2>"));
        // Human names in headings and plot titles, the key beside.
        assert!(page.contains("<h3>Drops at the bottleneck [packets]</h3>"), "{page}");
        assert!(page.contains("<code>drops</code>"));
        assert!(!page.contains("<h3>goodput_mbps"));
    }

    #[test]
    fn html_holds_every_plot_inline() {
        let d = testdata::run();
        let page = html(&d);
        let n_plots = plots(&d).len();
        // 2 metrics → 2 bars; 1 series → 1 time series; 1 flow class → 1 CDF.
        assert_eq!(n_plots, 4);
        assert_eq!(page.matches("<svg").count(), n_plots);
        assert!(page.contains("[PSPacer], table 1"));
        assert!(page.contains("data-name=\"static\""));
        assert!(!page.contains("Incomplete run"));
        // Issue 51 item 8: no caption repeats its chart's title, and no two
        // charts share a title (the bars and the time series of goodput).
        let all = plots(&d);
        for (_, title, _) in &all {
            assert!(!page.contains(&format!(">{title}</figcaption>")), "caption repeats {title:?}");
            assert_eq!(all.iter().filter(|p| &p.1 == title).count(), 1, "two charts titled {title:?}");
        }
        assert!(page.contains(" per variant</text>") && page.contains(" over time</text>"), "{page}");
    }
}
