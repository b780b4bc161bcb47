//! SVG plots of a run: a bar chart per metric, time series (or series against
//! another axis), CDFs of flow classes, with the published figures drawn in
//! where the run is at the paper's scale.

use super::judge::{self, human_name};
use super::tables::{num, tables, variant_order};
use crate::runner::records::{RunData, RunHeader};
use std::collections::BTreeMap;
use tcpaccel_plot::{bar_chart, cdf_chart, line_chart, Bar, Chart, Series};

/// Points of one series per variant.
type PerVariant<'a> = BTreeMap<&'a str, Vec<(f64, f64)>>;

/// All plots of a run as (file stem, title, SVG).
pub fn plots(data: &RunData) -> Vec<(String, String, String)> {
    let h = data.header();
    let same_scale = judge::paper_scale(data.paper_scale, &h.params).is_ok();
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
            let name = human_name(&data.names, data.point_label, &t.metric);
            // "per variant": the time series of the same metric is a chart of
            // its own, titled "… over time", and the two must not read alike.
            let title = if t.unit.is_empty() {
                format!("{name} per variant")
            } else {
                format!("{name} [{}] per variant", t.unit)
            };
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
        let title = match series.contains("_vs_") {
            true => human_name(&data.names, data.point_label, series),
            false => format!("{} over time", human_name(&data.names, data.point_label, series)),
        };
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
                    .filter(|f| super::fidelity::counted(data, &f.variant, f.repeat))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::html::html;
    use crate::testdata;
    use crate::testdata::pacing_run;

    #[test]
    fn series_axes_follow_the_name() {
        assert_eq!(series_x_label("goodput_mbps"), "time [s]");
        assert_eq!(series_x_label("throughput_vs_segments_MBps"), "segments");
        assert_eq!(series_unit("throughput_vs_segments_MBps"), "MB/s");
        assert_eq!(series_unit("srtt_ms"), "ms");
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
        assert!(ts.contains(">Goodput over time</text>"), "the title is the human name");
        let bars = plots(&d).into_iter().find(|p| p.0 == "bar-goodput-mbps").unwrap().2;
        assert!(bars.contains(">Goodput [Mbit/s] per variant</text>"));
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
                metric: crate::scenarios::split::metric::THROUGHPUT_MBPS.into(),
                value: 17.4,
                source: "s".into(),
            },
            Published {
                variant: "dante/3".into(),
                metric: crate::scenarios::split::metric::THROUGHPUT_MBPS.into(),
                value: 29.6,
                source: "s".into(),
            },
            Published {
                variant: "direct".into(),
                metric: crate::scenarios::split::metric::THROUGHPUT_MBPS.into(),
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
}
