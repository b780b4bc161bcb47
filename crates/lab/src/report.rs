//! Renders a run directory's records into tables, SVG plots, a self-contained
//! HTML page and a Markdown summary. Depends on the records alone.

use crate::records::{RunData, RunHeader};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;
use tcpaccel_core::stats::Spread;
use tcpaccel_plot::{bar_chart, cdf_chart, escape, line_chart, Bar, Chart, Series};

/// One row of a metric table: a variant's spread over repeats and the published figure.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Row {
    pub variant: String,
    pub spread: Option<Spread>,
    pub published: Option<f64>,
}

/// A metric's table across variants.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Table {
    pub metric: String,
    pub unit: String,
    pub description: String,
    pub rows: Vec<Row>,
}

/// Tables for every metric named in the header (and any extra one found in summaries).
pub fn tables(data: &RunData) -> Vec<Table> {
    let h = data.header();
    let mut names: Vec<(String, String, String)> =
        h.metrics.iter().map(|m| (m.name.clone(), m.unit.clone(), m.description.clone())).collect();
    let mut extra: Vec<String> = Vec::new();
    for s in &data.summaries {
        for k in s.metrics.keys() {
            if !names.iter().any(|n| &n.0 == k) && !extra.contains(k) {
                extra.push(k.clone());
            }
        }
    }
    // Per-point metrics (`name@4`, `name@alpha=16`) follow their base metric's
    // place among the declared ones, points in numeric order (4 before 16).
    let declared: Vec<String> = names.iter().map(|n| n.0.clone()).collect();
    extra.sort_by_key(|k| metric_order_key(k, &declared));
    names.extend(extra.into_iter().map(|k| (k, String::new(), String::new())));
    let variants = variant_order(data);
    names
        .into_iter()
        .map(|(metric, unit, description)| {
            let rows = variants
                .iter()
                .map(|v| {
                    let vals: Vec<f64> = data
                        .summaries
                        .iter()
                        .filter(|s| &s.variant == v)
                        .filter_map(|s| s.metrics.get(&metric).copied())
                        .filter(|x| x.is_finite())
                        .collect();
                    let published =
                        h.published.iter().find(|p| &p.variant == v && p.metric == metric).map(|p| p.value);
                    Row { variant: v.clone(), spread: Spread::of(&vals), published }
                })
                .collect();
            Table { metric, unit, description, rows }
        })
        .collect()
}

/// Sort key of an undeclared metric name: the declared base metric's index
/// (undeclared bases after all declared ones, by name), then the point label,
/// then the point's value numerically when it parses, else as text.
fn metric_order_key(name: &str, declared: &[String]) -> (usize, String, String, NumOrText) {
    let (base, point) = name.split_once('@').unwrap_or((name, ""));
    let index = declared.iter().position(|d| d == base).unwrap_or(declared.len());
    let (label, value) = point.rsplit_once('=').unwrap_or(("", point));
    let value = match value.parse::<f64>() {
        Ok(x) if x.is_finite() => NumOrText::Num(x),
        _ => NumOrText::Text(value.to_string()),
    };
    (index, base.to_string(), label.to_string(), value)
}

#[derive(Debug)]
enum NumOrText {
    Num(f64),
    Text(String),
}

impl PartialEq for NumOrText {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for NumOrText {}

impl PartialOrd for NumOrText {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for NumOrText {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        match (self, other) {
            (NumOrText::Num(a), NumOrText::Num(b)) => a.total_cmp(b),
            (NumOrText::Num(_), NumOrText::Text(_)) => std::cmp::Ordering::Less,
            (NumOrText::Text(_), NumOrText::Num(_)) => std::cmp::Ordering::Greater,
            (NumOrText::Text(a), NumOrText::Text(b)) => a.cmp(b),
        }
    }
}

/// Variants in header order, then any others seen in the records.
fn variant_order(data: &RunData) -> Vec<String> {
    let mut v: Vec<String> = data.header().variants.clone();
    for s in &data.summaries {
        if !v.contains(&s.variant) {
            v.push(s.variant.clone());
        }
    }
    v
}

fn num(x: f64) -> String {
    let a = x.abs();
    if (x.fract() == 0.0 && a < 1e15) || a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 0.1 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// The text of one table cell: "median (min–max)".
pub fn cell(s: &Option<Spread>) -> String {
    match s {
        None => "—".into(),
        Some(s) if s.n == 1 => num(s.median),
        Some(s) => format!("{} ({}–{})", num(s.median), num(s.min), num(s.max)),
    }
}

fn params_line(h: &RunHeader) -> String {
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
                let _ = write!(o, " {}{p} |", cell(&r.spread));
            }
            let _ = writeln!(o);
        }
        let _ = writeln!(o, "\nCells: median (min–max) over repeats.");
    }
    for n in &h.notes {
        let _ = writeln!(o, "\n> {n}");
    }
    for (v, n) in &data.notes {
        let _ = writeln!(o, "\n- {}{n}", v.as_ref().map(|v| format!("[{v}] ")).unwrap_or_default());
    }
    o
}

/// Points of one series per variant.
type PerVariant<'a> = BTreeMap<&'a str, Vec<(f64, f64)>>;

/// All plots of a run as (file stem, title, SVG).
pub fn plots(data: &RunData) -> Vec<(String, String, String)> {
    let h = data.header();
    let mut out = Vec::new();
    for t in tables(data) {
        let mut bars = Vec::new();
        for r in &t.rows {
            if let Some(s) = r.spread {
                bars.push(Bar {
                    group: r.variant.clone(),
                    label: "measured (median, min–max)".into(),
                    value: s.median,
                    range: Some((s.min, s.max)),
                });
            }
            if let Some(p) = r.published {
                bars.push(Bar { group: r.variant.clone(), label: "published".into(), value: p, range: None });
            }
        }
        if !bars.is_empty() {
            let title = format!("{} [{}]", t.metric, t.unit);
            out.push((format!("bar-{}", slug(&t.metric)), title.clone(), bar_chart(&title, &t.unit, &bars)));
        }
    }
    // Time series: one chart per series name; the first repeat of each variant.
    let mut by_series: BTreeMap<&str, PerVariant> = BTreeMap::new();
    for s in data.samples.iter().filter(|s| s.repeat == 0) {
        by_series.entry(&s.series).or_default().entry(&s.variant).or_default().push((s.t, s.value));
    }
    let order = variant_order(data);
    for (series, per_variant) in by_series {
        let mut c = Chart::new(series_title(series), series_x_label(series), series_unit(series));
        for v in &order {
            if let Some(pts) = per_variant.get(v.as_str()) {
                let mut pts = pts.clone();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                c.series.push(Series { name: v.clone(), points: pts, step: false });
            }
        }
        for p in h.published.iter().filter(|p| p.metric == series && p.variant == "*") {
            c = c.hline(format!("{} ({})", num(p.value), p.source), p.value);
        }
        out.push((format!("ts-{}", slug(series)), series_title(series), line_chart(&c)));
    }
    // CDFs of flow completion times per class.
    let mut classes: Vec<&str> = data.flows.iter().map(|f| f.class.as_str()).collect();
    classes.sort_unstable();
    classes.dedup();
    for class in classes {
        let samples: Vec<(String, Vec<f64>)> = order
            .iter()
            .map(|v| {
                let fcts = data
                    .flows
                    .iter()
                    .filter(|f| &f.variant == v && f.class == class && f.completed)
                    .map(|f| f.fct_ms)
                    .collect::<Vec<_>>();
                (v.clone(), fcts)
            })
            .filter(|(_, f)| !f.is_empty())
            .collect();
        if !samples.is_empty() {
            let title = format!("Flow completion time CDF — {class} flows");
            out.push((
                format!("cdf-{}", slug(class)),
                title.clone(),
                cdf_chart(&title, "FCT [ms]", &samples, true),
            ));
        }
    }
    out
}

fn slug(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect()
}

/// Series names carry their unit after the last underscore by convention (`goodput_mbps`).
fn series_unit(series: &str) -> String {
    match series.rsplit('_').next().unwrap_or("") {
        "mbps" => "Mbit/s".into(),
        "MBps" => "MB/s".into(),
        "ms" => "ms".into(),
        "us" => "µs".into(),
        "pkts" | "segs" => "packets".into(),
        "bytes" => "bytes".into(),
        "kb" => "KB".into(),
        other => other.into(),
    }
}

/// Time series by default; `NAME_vs_X_UNIT` plots against X (e.g. `throughput_vs_segments_MBps`).
fn series_x_label(series: &str) -> String {
    match series.split_once("_vs_") {
        Some((_, rest)) => rest.split('_').next().unwrap_or("x").to_string(),
        None => "time [s]".to_string(),
    }
}

fn series_title(series: &str) -> String {
    series.replace('_', " ")
}

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
</style></head><body>",
        t = escape(&h.title)
    );
    let _ = write!(o, "<h1>{}</h1><p>{}</p>", escape(&h.title), escape(&h.description));
    if !data.complete() {
        let reason = data.end.as_ref().map(|e| e.reason.clone()).unwrap_or_else(|| "no end record".into());
        let _ = write!(o, "<p class=\"warn\">Incomplete run: {}</p>", escape(&reason));
    }
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
        let _ = write!(o, "<h2>Results</h2><p>Median (min–max) over repeats; published figures beside.</p>");
        for t in &tabs {
            let _ = write!(
                o,
                "<h3>{} {}</h3><p>{}</p><table><tr><th>variant</th><th>measured</th><th>published</th></tr>",
                escape(&t.metric),
                if t.unit.is_empty() { String::new() } else { format!("[{}]", escape(&t.unit)) },
                escape(&t.description)
            );
            for r in &t.rows {
                let _ = write!(
                    o,
                    "<tr><td>{}</td><td>{}</td><td class=\"pub\">{}</td></tr>",
                    escape(&r.variant),
                    escape(&cell(&r.spread)),
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
    }
    let plots = plots(data);
    if !plots.is_empty() {
        let _ = write!(o, "<h2>Plots</h2>");
        for (_, title, svg) in &plots {
            let _ = write!(o, "<figure>{svg}<figcaption>{}</figcaption></figure>", escape(title));
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
    o.push_str("</body></html>\n");
    o
}

/// Writes `index.html`, `summary.md` and each plot as `plots/NAME.svg` into `dir`.
pub fn write_report(data: &RunData, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("plots"))?;
    std::fs::write(dir.join("index.html"), html(data))?;
    std::fs::write(dir.join("summary.md"), markdown(data))?;
    for (stem, _, svg) in plots(data) {
        std::fs::write(dir.join("plots").join(format!("{stem}.svg")), svg)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata;

    #[test]
    fn per_point_metrics_follow_their_base_in_numeric_order() {
        let declared = vec!["switch_ms".to_string(), "short_p95_ms".to_string()];
        let mut names = vec![
            "short_p95_ms@16",
            "switch_ms@gamma=4",
            "short_p95_ms@4",
            "zeta@1",
            "switch_ms@alpha=16",
            "switch_ms@alpha=4",
            "switch_ms@alpha=0.25",
            "short_p95_ms@x",
        ];
        names.sort_by_key(|k| metric_order_key(k, &declared));
        assert_eq!(
            names,
            [
                "switch_ms@alpha=0.25",
                "switch_ms@alpha=4",
                "switch_ms@alpha=16",
                "switch_ms@gamma=4",
                "short_p95_ms@4",
                "short_p95_ms@16",
                "short_p95_ms@x",
                "zeta@1",
            ]
        );
    }

    #[test]
    fn tables_have_median_min_max_and_published() {
        let d = testdata::run();
        let t = tables(&d);
        let g = t.iter().find(|t| t.metric == "goodput").unwrap();
        let none = &g.rows[0];
        assert_eq!(none.variant, "none");
        let s = none.spread.unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (200.0, 190.0, 230.0, 3));
        assert_eq!(none.published, Some(200.0));
        assert_eq!(cell(&none.spread), "200 (190–230)");
    }

    /// Golden: the Markdown summary of the fixed record set, byte for byte.
    #[test]
    fn markdown_golden() {
        let got = markdown(&testdata::run());
        let want = include_str!("../tests/golden/summary.md");
        assert_eq!(got, want, "\n--- got ---\n{got}");
    }

    #[test]
    fn series_axes_follow_the_name() {
        assert_eq!(series_x_label("goodput_mbps"), "time [s]");
        assert_eq!(series_x_label("throughput_vs_segments_MBps"), "segments");
        assert_eq!(series_unit("throughput_vs_segments_MBps"), "MB/s");
        assert_eq!(series_unit("srtt_ms"), "ms");
    }

    #[test]
    fn html_holds_every_plot_inline() {
        let d = testdata::run();
        let page = html(&d);
        let n_plots = plots(&d).len();
        // 2 metrics → 2 bars; 1 series → 1 time series; 1 flow class → 1 CDF.
        assert_eq!(n_plots, 4);
        assert_eq!(page.matches("<svg").count(), n_plots);
        assert!(page.contains("seed 000, table 1"));
        assert!(page.contains("data-name=\"static\""));
        assert!(!page.contains("Incomplete run"));
    }
}
