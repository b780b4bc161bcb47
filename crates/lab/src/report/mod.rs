//! Renders a run directory's records into tables, SVG plots, a self-contained
//! HTML page and a Markdown summary. Depends on the records alone (and on the
//! claims in [`published`], judged afresh at every rendering).
//!
//! The page opens with a verdict block: one line per claim of the scenario,
//! measured against the published figure and the goal, green when the goal
//! is met, red when missed, grey when the run lacks what the claim needs.

pub mod published;

use self::published::{human_name, Judged, Verdict};
use crate::runner::records::{RunData, RunHeader};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;
use tcpaccel_core::stats::Spread;
use tcpaccel_plot::{bar_chart, cdf_chart, escape, line_chart, Bar, Chart, Series};

/// Markdown lines of the verdict block (empty when the scenario has no claims).
fn verdict_markdown(judged: &[Judged]) -> String {
    let mut o = String::new();
    if judged.is_empty() {
        return o;
    }
    let _ = writeln!(o, "| verdict | claim | measured | published | goal |");
    let _ = writeln!(o, "|---|---|---|---|---|");
    for j in judged {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} ({}) |",
            verdict_word(&j.verdict),
            j.claim.text,
            measured_text(&j.verdict),
            j.claim
                .published
                .map(|p| format!("{} ({})", published::fmt(p.value), p.source))
                .unwrap_or_else(|| "—".into()),
            j.claim.goal.text(),
            j.claim.goal_source,
        );
    }
    o
}

fn verdict_word(v: &Verdict) -> &'static str {
    match v {
        Verdict::Met { .. } => "**met**",
        Verdict::Missed { .. } => "**MISSED**",
        Verdict::Unknown { .. } => "unknown",
    }
}

fn measured_text(v: &Verdict) -> String {
    match v {
        Verdict::Met { measured, detail } | Verdict::Missed { measured, detail } if detail.is_empty() => {
            published::fmt_measured(*measured)
        }
        Verdict::Met { measured, detail } | Verdict::Missed { measured, detail } => {
            format!("{} ({detail})", published::fmt_measured(*measured))
        }
        Verdict::Unknown { why } => format!("— ({why})"),
    }
}

/// The verdict block at the top of the page: one row per claim, coloured by verdict.
pub fn verdict_html(data: &RunData) -> String {
    let judged = published::judge(data);
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
        "<p class=\"tally\">{met} met, {missed} missed{} of {} claim(s). Measured: medians over this run's repeats{}; \
         ratios and shares make runs at other scales comparable with the paper.</p>",
        if unknown > 0 { format!(", {unknown} unknown") } else { String::new() },
        judged.len(),
        if h.quick { " (a --quick run: scaled-down parameters)" } else { "" }
    );
    let _ = write!(
        o,
        "<table class=\"claims\"><tr><th></th><th>claim</th><th>measured</th><th>published</th><th>goal</th></tr>"
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
            .map(|p| format!("{} <span class=\"src\">{}</span>", published::fmt(p.value), escape(p.source)))
            .unwrap_or_else(|| "—".into());
        let _ = write!(
            o,
            "<tr class=\"{class}\"><td class=\"badge\">{word}</td><td>{}</td><td>{}</td><td>{published}</td><td>{} <span class=\"src\">{}</span></td></tr>",
            escape(j.claim.text),
            escape(&measured_text(&j.verdict)),
            escape(&j.claim.goal.text()),
            escape(j.claim.goal_source)
        );
    }
    o.push_str("</table></section>");
    o
}

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
    let verdicts = verdict_markdown(&published::judge(data));
    if !verdicts.is_empty() {
        let _ = writeln!(o, "{verdicts}");
    }
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
    let same_scale = published::paper_scale(&h.scenario, &h.params).is_ok();
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
                    reference: false,
                });
            }
            if let Some(p) = r.published.filter(|_| same_scale) {
                bars.push(Bar {
                    group: r.variant.clone(),
                    label: "published".into(),
                    value: p,
                    range: None,
                    reference: true,
                });
            }
        }
        if !bars.is_empty() {
            let name = human_name(&h.scenario, &t.metric);
            let title = if t.unit.is_empty() { name } else { format!("{name} [{}]", t.unit) };
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
        let title = human_name(&h.scenario, series);
        let mut c = Chart::new(title.clone(), series_x_label(series), series_unit(series));
        for v in &order {
            if let Some(pts) = per_variant.get(v.as_str()) {
                let mut pts = pts.clone();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                c.series.push(Series { name: v.clone(), points: pts, step: false });
            }
        }
        if same_scale {
            c = with_published(c, h, series);
        }
        if is_dense(&c) {
            out.extend(panels(&c, &order).into_iter().map(|(v, svg)| {
                (format!("ts-{}-{}", slug(series), slug(&v)), format!("{title} — {v}"), svg)
            }));
        } else {
            out.push((format!("ts-{}", slug(series)), title, line_chart(&c)));
        }
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

/// Several series with more points than half the plot's pixel columns (the
/// 500 µs zoom: ~1000 bins per variant swinging between 0 and the line rate)
/// cover each other whatever their colour and dash: they get a panel each.
fn is_dense(c: &Chart) -> bool {
    let columns = c.width - 90.0;
    c.series.len() > 1 && c.series.iter().any(|s| s.points.len() as f64 > columns / 2.0)
}

/// One chart per series, stacked: same axes ranges, each series in the
/// colour and dash it has in the other plots (its index among the variants).
fn panels(c: &Chart, order: &[String]) -> Vec<(String, String)> {
    let pts = || c.series.iter().flat_map(|s| s.points.iter()).filter(|p| p.0.is_finite() && p.1.is_finite());
    let (x0, x1) = pts().fold((f64::INFINITY, f64::NEG_INFINITY), |a, p| (a.0.min(p.0), a.1.max(p.0)));
    let y1 = pts().map(|p| p.1).chain(c.hlines.iter().map(|h| h.y)).fold(0.0f64, f64::max);
    c.series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut p = Chart::new(format!("{} — {}", c.title, s.name), c.x_label.clone(), c.y_label.clone())
                .size(c.width, 200.0);
            p.series.push(s.clone());
            p.x_range = Some((x0, x1));
            p.y_range = Some((0.0, y1 * 1.05));
            p.style_offset = order.iter().position(|v| *v == s.name).unwrap_or(i);
            p.hlines =
                c.hlines.iter().filter(|h| h.series.is_none() || h.series == Some(i)).cloned().collect();
            for h in p.hlines.iter_mut() {
                h.series = h.series.map(|_| 0);
            }
            (s.name.clone(), line_chart(&p))
        })
        .collect()
}

/// Draws the published figures that belong to a chart of `series`:
/// - a figure for every variant (`*`) of the same key: a grey reference line;
/// - a figure for one variant of the same key (a time series of the metric,
///   e.g. goodput): a line in that variant's colour and dash;
/// - on `NAME_vs_X_UNIT` charts, a figure of metric `NAME_UNIT` for variant
///   `KIND/N` (N a number): a hollow marker at x = N in the colour of the
///   line drawn for `KIND/…`.
fn with_published(mut c: Chart, h: &RunHeader, series: &str) -> Chart {
    let index_of = |c: &Chart, v: &str| c.series.iter().position(|s| s.name == v);
    for p in h.published.iter().filter(|p| p.metric == series) {
        if p.variant == "*" {
            c = c.hline(format!("published {} ({})", num(p.value), p.source), p.value);
        } else if let Some(i) = index_of(&c, &p.variant) {
            c = c.hline_for(i, format!("published {} {}", p.variant, num(p.value)), p.value);
        }
    }
    if let Some((name, rest)) = series.split_once("_vs_") {
        let unit = rest.rsplit('_').next().unwrap_or("");
        let metric = format!("{name}_{unit}");
        for p in h.published.iter().filter(|p| p.metric == metric) {
            let Some((kind, n)) = p.variant.split_once('/') else { continue };
            let Ok(x) = n.parse::<f64>() else { continue };
            let prefix = format!("{kind}/");
            let i = c.series.iter().position(|s| s.name.starts_with(&prefix));
            let label = format!("published ({kind})");
            c = c.marker(i, label, x, p.value);
        }
    }
    c
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
.claims td,.claims th{{text-align:left}}.claims .badge{{font-weight:bold;white-space:nowrap}}\
tr.met td{{background:#e6f4ea}}tr.met .badge{{color:#137333}}\
tr.missed td{{background:#fce8e6}}tr.missed .badge{{color:#a50e0e}}\
tr.unknown td{{background:#f1f3f4;color:#555}}.src{{color:#666;font-size:.85em}}.key{{color:#666;font-size:.85em}}\
</style></head><body>",
        t = escape(&h.title)
    );
    let _ = write!(o, "<h1>{}</h1>", escape(&h.title));
    if !data.complete() {
        let reason = data.end.as_ref().map(|e| e.reason.clone()).unwrap_or_else(|| "no end record".into());
        let _ = write!(o, "<p class=\"warn\">Incomplete run: {}</p>", escape(&reason));
    }
    o.push_str(&verdict_html(data));
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
        let _ = write!(o, "<h2>Results</h2><p>Median (min–max) over repeats; published figures beside.</p>");
        for t in &tabs {
            let _ = write!(
                o,
                "<h3>{} {}</h3><p>{} <span class=\"key\">(<code>{}</code>)</span></p><table><tr><th>variant</th><th>measured</th><th>published</th></tr>",
                escape(&human_name(&h.scenario, &t.metric)),
                if t.unit.is_empty() { String::new() } else { format!("[{}]", escape(&t.unit)) },
                escape(&t.description),
                escape(&t.metric)
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
        if let Err(differ) = published::paper_scale(&h.scenario, &h.params) {
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

/// Writes `index.html`, `summary.md` and each plot as `plots/NAME.svg` into
/// `dir`, and removes SVGs in `plots/` this rendering did not write (a plot
/// renamed or split into panels since the last `lab report` of that directory).
pub fn write_report(data: &RunData, dir: &Path) -> std::io::Result<()> {
    let plot_dir = dir.join("plots");
    std::fs::create_dir_all(&plot_dir)?;
    std::fs::write(dir.join("index.html"), html(data))?;
    std::fs::write(dir.join("summary.md"), markdown(data))?;
    let mut written = Vec::new();
    for (stem, _, svg) in plots(data) {
        let name = format!("{stem}.svg");
        std::fs::write(plot_dir.join(&name), svg)?;
        written.push(std::ffi::OsString::from(name));
    }
    for entry in std::fs::read_dir(&plot_dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if Path::new(&name).extension().is_some_and(|e| e == "svg") && !written.contains(&name) {
            std::fs::remove_file(entry.path())?;
        }
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
        let want = include_str!("../../tests/golden/summary.md");
        assert_eq!(got, want, "\n--- got ---\n{got}");
    }

    #[test]
    fn series_axes_follow_the_name() {
        assert_eq!(series_x_label("goodput_mbps"), "time [s]");
        assert_eq!(series_x_label("throughput_vs_segments_MBps"), "segments");
        assert_eq!(series_unit("throughput_vs_segments_MBps"), "MB/s");
        assert_eq!(series_unit("srtt_ms"), "ms");
    }

    /// A pacing run shaped like BENCHMARKS.md's full-scale table.
    fn pacing_run() -> RunData {
        use crate::runner::records::{Published, Record, Sample, Summary};
        let mut h = testdata::header();
        h.scenario = "pacing".into();
        h.params = BTreeMap::from([("rate".into(), "500mbit".into()), ("buffer".into(), "1MB".into())]);
        h.variants = vec!["none".into(), "dynamic".into(), "static".into()];
        h.metrics = crate::scenarios::find("pacing").unwrap().metrics();
        h.published = vec![Published {
            variant: "static".into(),
            metric: "goodput_mbps".into(),
            value: 433.0,
            source: "[PSPacer]".into(),
        }];
        let mut d = RunData::default();
        d.push(Record::Run(h));
        for (v, g, dr) in [("none", 222.0, 2222.0), ("dynamic", 437.0, 883.0), ("static", 464.0, 0.0)] {
            d.push(Record::Summary(Summary {
                variant: v.into(),
                repeat: 0,
                metrics: BTreeMap::from([("goodput_mbps".into(), g), ("drops".into(), dr)]),
                started: 0.0,
                ended: 1.0,
            }));
            for i in 0..5 {
                d.push(Record::Sample(Sample {
                    variant: v.into(),
                    repeat: 0,
                    series: "goodput_mbps".into(),
                    t: f64::from(i),
                    value: g,
                }));
            }
        }
        d
    }

    #[test]
    fn html_opens_with_the_verdict_block() {
        let page = html(&pacing_run());
        let block = page.split("<section class=\"verdict\"").nth(1).expect("a verdict block");
        let block = block.split("</section>").next().unwrap();
        // static drops 0 (met), static 464 of 470.7 (met), dynamic ÷ none drops 0.397 (missed),
        // dynamic ÷ none goodput 1.97 (met); the cgroup pacer's two claims
        // have no dynamic-bpf-hold in this run (unknown).
        assert_eq!(block.matches("<tr class=\"met\">").count(), 3, "{block}");
        assert_eq!(block.matches("<tr class=\"missed\">").count(), 1, "{block}");
        assert_eq!(block.matches("<tr class=\"unknown\">").count(), 2, "{block}");
        assert!(block.contains("3 met, 1 missed, 2 unknown of 6 claim(s)"), "{block}");
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
    fn unknown_claims_and_scenarios_without_claims() {
        let mut d = pacing_run();
        d.summaries.retain(|s| s.variant != "dynamic");
        let block = verdict_html(&d);
        assert_eq!(block.matches("<tr class=\"unknown\">").count(), 4, "{block}");
        assert!(block.contains("no drops for variant dynamic"), "{block}");
        assert!(block.contains("no drops for variant dynamic-bpf-hold"), "{block}");
        // The fixture scenario has no claims: the block says so instead of judging.
        let block = verdict_html(&testdata::run());
        assert!(block.contains("No published figure or goal") && !block.contains("<tr"), "{block}");
    }

    #[test]
    fn published_figures_drawn_in_the_time_series() {
        let d = pacing_run();
        let ts = plots(&d).into_iter().find(|p| p.0 == "ts-goodput-mbps").unwrap().2;
        // One reference line in the colour of `static` (the third series), labelled published.
        let (color, _) = tcpaccel_plot::style(2);
        let line = ts.split("<line class=\"hline\"").nth(1).unwrap().split("/>").next().unwrap();
        assert!(line.contains(color), "{line}");
        assert!(ts.contains(">published static 433</text>"), "{ts}");
        assert!(ts.contains(">Goodput</text>"), "the title is the human name");
        let bars = plots(&d).into_iter().find(|p| p.0 == "bar-goodput-mbps").unwrap().2;
        assert!(bars.contains(">Goodput [Mbit/s]</text>"));
        assert!(bars.contains("data-label=\"published\""));
        // A run at a fifth of the paper's rate: the paper's 433 Mbit/s would only squash the axis.
        let mut d = d;
        if let Some(h) = d.header.as_mut() {
            h.params.insert("rate".into(), "100mbit".into());
        }
        let ts = plots(&d).into_iter().find(|p| p.0 == "ts-goodput-mbps").unwrap().2;
        assert!(!ts.contains("class=\"hline\""), "{ts}");
        let bars = plots(&d).into_iter().find(|p| p.0 == "bar-goodput-mbps").unwrap().2;
        assert!(!bars.contains("data-label=\"published\""));
        assert!(html(&d).contains("rate=100mbit (paper: 500mbit)"));
    }

    #[test]
    fn rewriting_a_report_drops_stale_plots() {
        let dir = std::env::temp_dir().join(format!("tcpaccel-report-stale-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("plots")).unwrap();
        std::fs::write(dir.join("plots/ts-old-name.svg"), "<svg/>").unwrap();
        std::fs::write(dir.join("plots/notes.txt"), "mine").unwrap();
        write_report(&testdata::run(), &dir).unwrap();
        assert!(!dir.join("plots/ts-old-name.svg").exists(), "a stale plot survived");
        assert!(dir.join("plots/notes.txt").exists(), "only SVGs are the report's");
        assert!(dir.join("plots/ts-goodput-mbps.svg").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dense_overlapping_series_get_a_panel_each() {
        use crate::runner::records::{Record, Sample};
        let mut d = testdata::run();
        // Two variants of 1000 points each, swinging like the 500 µs zoom.
        for v in ["none", "static"] {
            for i in 0..1000 {
                d.push(Record::Sample(Sample {
                    variant: v.into(),
                    repeat: 0,
                    series: "zoom500us_mbps".into(),
                    t: f64::from(i) * 0.0005,
                    value: if i % 2 == 0 { 0.0 } else { 100.0 },
                }));
            }
        }
        let p = plots(&d);
        assert!(!p.iter().any(|p| p.0 == "ts-zoom500us-mbps"), "one overlaid chart");
        let none = p.iter().find(|p| p.0 == "ts-zoom500us-mbps-none").expect("a panel for none");
        let stat = p.iter().find(|p| p.0 == "ts-zoom500us-mbps-static").expect("a panel for static");
        assert_eq!(none.2.matches("class=\"series\"").count(), 1);
        // `static` keeps its own style (variant index 1) in its panel.
        let (color, dash) = tcpaccel_plot::style(1);
        assert!(stat.2.contains(color) && stat.2.contains(dash), "{}", stat.2);
        assert!(stat.1.ends_with("— static"));
        // The sparse series stays one chart.
        assert!(p.iter().any(|p| p.0 == "ts-goodput-mbps"));
    }

    #[test]
    fn published_markers_on_x_series() {
        use crate::runner::records::{Published, Record, Sample};
        let mut h = testdata::header();
        h.scenario = "split".into();
        h.params = BTreeMap::from([("buf_max".into(), "4MB".into()), ("size".into(), "100MB".into())]);
        h.variants = vec!["direct".into(), "dante/3".into()];
        h.published = vec![
            Published {
                variant: "dante/2".into(),
                metric: "throughput_MBps".into(),
                value: 17.4,
                source: "s".into(),
            },
            Published {
                variant: "dante/3".into(),
                metric: "throughput_MBps".into(),
                value: 29.6,
                source: "s".into(),
            },
            Published {
                variant: "direct".into(),
                metric: "throughput_MBps".into(),
                value: 11.0,
                source: "s".into(),
            },
        ];
        let mut d = RunData::default();
        d.push(Record::Run(h));
        for (x, y) in [(1.0, 3.0), (2.0, 6.0), (3.0, 8.8)] {
            d.push(Record::Sample(Sample {
                variant: "dante/3".into(),
                repeat: 0,
                series: "throughput_vs_segments_MBps".into(),
                t: x,
                value: y,
            }));
        }
        let svg = plots(&d).into_iter().find(|p| p.0.starts_with("ts-throughput")).unwrap().2;
        assert_eq!(svg.matches("class=\"marker\"").count(), 2, "{svg}");
        assert!(svg.contains(">published (dante)</text>"));
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
    }
}
