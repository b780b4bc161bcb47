//! Metric tables: each metric's spread over repeats per variant, beside the
//! published figure, and the number format the tables and plots share.
//! Runs the fidelity monitor marked unfaithful are left out of the spread
//! and counted instead ([`Row::excluded`]).

use super::fidelity::{cell_text, counted};
use crate::runner::records::RunData;
use tcpaccel_core::stats::Spread;

/// One row of a metric table: a variant's spread over repeats and the published figure.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Row {
    pub variant: String,
    /// Over the counted (not unfaithful) runs.
    pub spread: Option<Spread>,
    pub published: Option<f64>,
    /// Unfaithful runs that had a value and were left out.
    pub excluded: usize,
}

impl Row {
    /// Every run with a value was unfaithful: no median to show.
    pub fn all_unfaithful(&self) -> bool {
        self.spread.is_none() && self.excluded > 0
    }
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
                    let (mut vals, mut excluded) = (Vec::new(), 0);
                    for s in data.summaries.iter().filter(|s| &s.variant == v) {
                        match s.metrics.get(&metric).copied().filter(|x| x.is_finite()) {
                            Some(x) if counted(data, v, s.repeat) => vals.push(x),
                            Some(_) => excluded += 1,
                            None => {}
                        }
                    }
                    let published =
                        h.published.iter().find(|p| &p.variant == v && p.metric == metric).map(|p| p.value);
                    Row { variant: v.clone(), spread: Spread::of(&vals), published, excluded }
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
pub(super) fn variant_order(data: &RunData) -> Vec<String> {
    let mut v: Vec<String> = data.header().variants.clone();
    for s in &data.summaries {
        if !v.contains(&s.variant) {
            v.push(s.variant.clone());
        }
    }
    v
}

pub(super) fn num(x: f64) -> String {
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

/// A row's cell: [`cell`] over the counted runs, with the unfaithful runs
/// left out said ([`cell_text`]).
pub fn row_cell(r: &Row) -> String {
    cell_text(r.spread.as_ref().map(|_| cell(&r.spread)), r.excluded).unwrap_or_else(|| "—".into())
}

/// Whether any row of any table left an unfaithful run out.
pub fn any_excluded(tables: &[Table]) -> bool {
    tables.iter().any(|t| t.rows.iter().any(|r| r.excluded > 0))
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
        assert_eq!((row_cell(none), none.excluded), ("200 (190–230)".into(), 0));
    }

    /// The fixture's goodput over repeats 0, 1, 2: none 230, 190, 200 and
    /// static 455, 450, 460.
    #[test]
    fn unfaithful_runs_leave_the_median_and_are_counted() {
        let mut d = testdata::run();
        // none: the 230 run unfaithful; static: every run unfaithful.
        d.fidelity = vec![
            testdata::fidelity("none", 0, false),
            testdata::fidelity("none", 1, true),
            testdata::fidelity("none", 2, true),
        ];
        d.fidelity.extend((0..3).map(|r| testdata::fidelity("static", r, false)));
        let t = tables(&d);
        let g = t.iter().find(|t| t.metric == "goodput").unwrap();
        let none = &g.rows[0];
        let s = none.spread.unwrap();
        assert_eq!((s.median, s.min, s.max, s.n, none.excluded), (195.0, 190.0, 200.0, 2, 1));
        assert_eq!(row_cell(none), "195 (190–200) [1 unfaithful excluded]");
        assert!(!none.all_unfaithful());
        let st = &g.rows[1];
        assert_eq!((st.spread, st.excluded), (None, 3));
        assert!(st.all_unfaithful());
        assert_eq!(row_cell(st), "all runs unfaithful");
        assert!(any_excluded(&t));
        // Without verdicts (older records) every run counts.
        d.fidelity.clear();
        let t = tables(&d);
        assert!(!any_excluded(&t));
        assert_eq!(t[0].rows[1].spread.unwrap().n, 3);
    }
}
