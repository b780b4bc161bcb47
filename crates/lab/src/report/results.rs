//! The results page's data: a small summary of one run (`results/NAME.json`,
//! committed; NAME is the scenario, or `SCENARIO.LABEL` when the page shows
//! more than one run of it) and its Markdown, the blocks BENCHMARKS.md shows
//! ([`crate::report::page`] puts them between the page's markers).
//!
//! A summary holds what the page shows and nothing a reader would have to
//! recompute: the command that produced the run, its parameters, each
//! variant's spread of every metric over the repeats the fidelity monitor
//! counted, and each claim of the scenario judged against the run (measured
//! value, published figure, goal, verdict). It is made from a run directory's
//! records ([`summarize`]) and rendered without them ([`render`]), so the page
//! needs no run to be checked.
//!
//! Not here: judging (`super::judge`, done once when summarizing) and knowing
//! a scenario's defaults (the caller passes them to [`command_line`]).

use super::judge::{self, Verdict};
use super::tables::{row_cell, tables, Row};
use crate::runner::records::{RunData, RunHeader};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use tcpaccel_core::stats::Spread;

/// Bumped when a field changes meaning; readers refuse newer versions.
pub const RESULTS_VERSION: u32 = 1;

/// One run, summarized for the results page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultSummary {
    pub version: u32,
    pub scenario: String,
    pub title: String,
    /// The command that produced the run, after the binary
    /// (`lab run idle --repeat 2`); the page prints it as `$B …`.
    pub command: String,
    /// Every parameter of the run, defaults included.
    pub params: BTreeMap<String, String>,
    pub seed: u64,
    pub repeats: u32,
    pub quick: bool,
    pub kernel: String,
    pub cpus: usize,
    pub tool_version: String,
    /// Unix time the run started.
    pub started: f64,
    /// The metrics in the scenario's order (declared first, then any other
    /// the summaries hold).
    pub metrics: Vec<MetricColumn>,
    /// In the run's variant order.
    pub variants: Vec<VariantRow>,
    /// The scenario's claims shown for this run's parameters, judged.
    pub claims: Vec<ClaimResult>,
    /// The scenario's human names of its metrics (not in the file: set by
    /// whoever reads it and knows the scenario, as [`RunData::names`]).
    #[serde(skip)]
    pub names: Vec<(&'static str, &'static str)>,
    /// What a bare point counts in the scenario (set with the names).
    #[serde(skip)]
    pub point_label: Option<&'static str>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricColumn {
    pub name: String,
    pub unit: String,
}

/// One variant's cells, keyed by metric name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantRow {
    pub variant: String,
    pub cells: BTreeMap<String, Cell>,
}

/// A metric of one variant: the spread over the counted repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Absent when no counted repeat had a value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<Spread>,
    /// Repeats with a value the fidelity monitor marked unfaithful, left out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub excluded: usize,
    /// The paper's figure for this variant and metric, where the run has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<f64>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A claim judged against the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimResult {
    pub text: String,
    /// The variants the measure reads ("dynamic", "none" for a ratio).
    pub judges: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<PublishedFigure>,
    /// The goal as the report prints it ("≤ 1.5").
    pub goal: String,
    pub goal_source: String,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PublishedFigure {
    pub value: f64,
    pub source: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: not a results summary: {msg}")]
    Parse { path: PathBuf, msg: String },
    #[error("{path}: results version {found} is newer than this tcpaccel understands ({RESULTS_VERSION})")]
    Version { path: PathBuf, found: u32 },
    #[error("{path}: holds scenario {found:?}; a summary is named after its scenario ({found}.json or {found}.LABEL.json, LABEL of a-z, 0-9 and -)")]
    Name { path: PathBuf, found: String },
    #[error("the run is {0}: summarize a whole, complete run (`lab merge` joins shards)")]
    NotWhole(&'static str),
}

/// The command line that reproduces the run `h`: `lab run SCENARIO`, the
/// repeats, the seed when not the default 1, and a `--set` for every
/// parameter whose value differs from `defaults` (the scenario's defaults,
/// with its `--quick` values for a quick run).
pub fn command_line(h: &RunHeader, defaults: &BTreeMap<String, String>) -> String {
    let mut c = format!("lab run {}", h.scenario);
    if h.quick {
        c.push_str(" --quick");
    }
    let _ = write!(c, " --repeat {}", h.repeats);
    if h.seed != 1 {
        let _ = write!(c, " --seed {}", h.seed);
    }
    for (k, v) in &h.params {
        if defaults.get(k).map(|d| d.trim()) != Some(v.trim()) {
            let _ = write!(c, " --set {}", shell_word(&format!("{k}={v}")));
        }
    }
    c
}

/// `word` as one shell word: quoted when it holds anything but the
/// characters parameters use.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "=,._-/:@+%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The summary of a run whose claims are set ([`RunData::claims`]), with
/// the command that produced it ([`command_line`]).
pub fn summarize(data: &RunData, command: String) -> Result<ResultSummary, ResultsError> {
    let h = data.header();
    if h.shard.is_some() {
        return Err(ResultsError::NotWhole("one shard"));
    }
    if !data.complete() {
        return Err(ResultsError::NotWhole("incomplete"));
    }
    let tabs = tables(data);
    let metrics =
        tabs.iter().map(|t| MetricColumn { name: t.metric.clone(), unit: t.unit.clone() }).collect();
    let mut variants: Vec<VariantRow> = super::tables::variant_order(data)
        .into_iter()
        .map(|variant| VariantRow { variant, cells: BTreeMap::new() })
        .collect();
    for t in &tabs {
        for (row, r) in variants.iter_mut().zip(&t.rows) {
            // Only what was measured or published: a metric another variant has is no cell here.
            if r.spread.is_some() || r.excluded > 0 || r.published.is_some() {
                row.cells.insert(
                    t.metric.clone(),
                    Cell { spread: r.spread, excluded: r.excluded, published: r.published },
                );
            }
        }
    }
    let claims = judge::judge(data)
        .into_iter()
        .map(|j| ClaimResult {
            text: j.claim.text.to_string(),
            judges: j.claim.measure.variants().into_iter().map(String::from).collect(),
            published: j.claim.published.map(|p| PublishedFigure { value: p.value, source: p.source.into() }),
            goal: j.claim.goal.text(),
            goal_source: j.claim.goal_source.to_string(),
            verdict: j.verdict,
        })
        .collect();
    Ok(ResultSummary {
        version: RESULTS_VERSION,
        scenario: h.scenario.clone(),
        title: h.title.clone(),
        command,
        params: h.params.clone(),
        seed: h.seed,
        repeats: h.repeats,
        quick: h.quick,
        kernel: h.kernel.clone(),
        cpus: h.cpus,
        tool_version: h.tool_version.clone(),
        started: h.started,
        metrics,
        variants,
        claims,
        names: data.names.clone(),
        point_label: data.point_label,
    })
}

/// A summary as committed: pretty JSON, one trailing newline.
pub fn to_json(s: &ResultSummary) -> String {
    let mut text = serde_json::to_string_pretty(s).expect("a summary is plain data");
    text.push('\n');
    text
}

/// Whether `name` names a summary of `scenario`: the scenario itself or
/// `SCENARIO.LABEL`, the label of lower-case letters, digits and `-`.
pub fn names_summary_of(name: &str, scenario: &str) -> bool {
    match name.strip_prefix(scenario) {
        Some("") => true,
        Some(rest) => rest.strip_prefix('.').is_some_and(|label| {
            !label.is_empty()
                && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        }),
        None => false,
    }
}

/// Reads one summary file, refusing a newer version and a file not named
/// after its scenario ([`names_summary_of`]).
pub fn read_summary(path: &Path) -> Result<ResultSummary, ResultsError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| ResultsError::Io { path: path.into(), source })?;
    let s: ResultSummary = serde_json::from_str(&text)
        .map_err(|e| ResultsError::Parse { path: path.into(), msg: e.to_string() })?;
    if s.version > RESULTS_VERSION {
        return Err(ResultsError::Version { path: path.into(), found: s.version });
    }
    if !path.file_stem().and_then(|n| n.to_str()).is_some_and(|n| names_summary_of(n, &s.scenario)) {
        return Err(ResultsError::Name { path: path.into(), found: s.scenario });
    }
    Ok(s)
}

/// Every `*.json` summary in `dir`, by name (the file's stem).
pub fn read_dir(dir: &Path) -> Result<BTreeMap<String, ResultSummary>, ResultsError> {
    let io = |source| ResultsError::Io { path: dir.into(), source };
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.extension().is_some_and(|e| e == "json") {
            let s = read_summary(&path)?;
            let name = path.file_stem().and_then(|n| n.to_str()).unwrap_or_default().to_string();
            out.insert(name, s);
        }
    }
    Ok(out)
}

/// What a block shows of a summary.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct View {
    /// The main table's columns; `None`: every metric of the summary.
    pub metrics: Option<Vec<String>>,
    /// The claims shown, by their 1-based place in the summary; `None`:
    /// every claim, empty: none.
    pub claims: Option<Vec<usize>>,
    /// The main table's rows, in the summary's order; `None`: every variant.
    pub variants: Option<Vec<String>>,
}

/// What a block asks of a summary that it does not have.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UnknownMetric {
    #[error("the {scenario} run has no metric {metric:?} (it has: {have})")]
    Metric { scenario: String, metric: String, have: String },
    #[error("the {scenario} run has {have} claim(s), no claim {n}")]
    Claim { scenario: String, n: usize, have: usize },
    #[error("the {scenario} run has no variant {variant:?} (it has: {have})")]
    Variant { scenario: String, variant: String, have: String },
}

/// `s` keeping only the metric columns `keep` (in its own order), for a
/// summary that commits what its page shows; the claims, judged from the
/// whole run, stay. A name `s` does not have is an error.
pub fn keep_metrics(mut s: ResultSummary, keep: &[String]) -> Result<ResultSummary, UnknownMetric> {
    for k in keep {
        if !s.metrics.iter().any(|m| &m.name == k) {
            return Err(UnknownMetric::Metric {
                scenario: s.scenario.clone(),
                metric: k.clone(),
                have: s.metrics.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", "),
            });
        }
    }
    s.metrics.retain(|m| keep.contains(&m.name));
    for v in &mut s.variants {
        v.cells.retain(|name, _| keep.contains(name));
    }
    Ok(s)
}

/// The Markdown of one summary: the command and how the run was made, the main table (variants ×
/// metrics, "median (min–max)" over the counted repeats) and the claims
/// table (claim, variants judged, measured, published, goal, verdict).
pub fn render(s: &ResultSummary, view: &View) -> Result<String, UnknownMetric> {
    let columns: Vec<&MetricColumn> = match &view.metrics {
        None => s.metrics.iter().collect(),
        Some(names) => names
            .iter()
            .map(|n| {
                s.metrics.iter().find(|m| &m.name == n).ok_or_else(|| UnknownMetric::Metric {
                    scenario: s.scenario.clone(),
                    metric: n.clone(),
                    have: s.metrics.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", "),
                })
            })
            .collect::<Result<_, _>>()?,
    };
    if let Some(picked) = &view.variants {
        if let Some(v) = picked.iter().find(|v| !s.variants.iter().any(|r| &r.variant == *v)) {
            return Err(UnknownMetric::Variant {
                scenario: s.scenario.clone(),
                variant: v.clone(),
                have: s.variants.iter().map(|r| r.variant.as_str()).collect::<Vec<_>>().join(", "),
            });
        }
    }
    let rows: Vec<&VariantRow> =
        s.variants.iter().filter(|r| view.variants.as_ref().is_none_or(|p| p.contains(&r.variant))).collect();
    let claims: Vec<&ClaimResult> = match &view.claims {
        None => s.claims.iter().collect(),
        Some(picked) => picked
            .iter()
            .map(|&n| {
                n.checked_sub(1).and_then(|i| s.claims.get(i)).ok_or(UnknownMetric::Claim {
                    scenario: s.scenario.clone(),
                    n,
                    have: s.claims.len(),
                })
            })
            .collect::<Result<_, _>>()?,
    };
    let mut o = String::new();
    let n = s.repeats;
    let _ = writeln!(
        o,
        "`$B {}`: {n} repeat{}{}, seed {}, kernel {}, {} CPUs; cells: median (min–max) over the repeats{}.\n",
        s.command,
        if n == 1 { "" } else { "s" },
        if s.quick { " (--quick)" } else { "" },
        s.seed,
        s.kernel,
        s.cpus,
        if rows.iter().any(|v| v.cells.values().any(|c| c.excluded > 0)) {
            " the fidelity monitor judged faithful"
        } else {
            ""
        },
    );
    let _ = write!(o, "| variant |");
    for m in &columns {
        let name = judge::human_name(&s.names, s.point_label, &m.name);
        if m.unit.is_empty() {
            let _ = write!(o, " {name} |");
        } else {
            let _ = write!(o, " {name}, {} |", m.unit);
        }
    }
    let _ = writeln!(o, "\n|---|{}", "---|".repeat(columns.len()));
    for v in rows {
        let _ = write!(o, "| {} |", v.variant);
        for m in &columns {
            let text = match v.cells.get(&m.name) {
                None => "—".to_string(),
                Some(c) => {
                    let row = Row {
                        variant: v.variant.clone(),
                        spread: c.spread,
                        published: c.published,
                        excluded: c.excluded,
                    };
                    match c.published {
                        Some(p) => format!("{} · paper {}", row_cell(&row), super::tables::num(p)),
                        None => row_cell(&row),
                    }
                }
            };
            let _ = write!(o, " {text} |");
        }
        let _ = writeln!(o);
    }
    if !claims.is_empty() {
        let _ = writeln!(o, "\n| claim | judges | measured | published | goal | verdict |");
        let _ = writeln!(o, "|---|---|---|---|---|---|");
        for c in claims {
            let verdict = match c.verdict {
                Verdict::Met { .. } => "**met**",
                Verdict::Missed { .. } => "**not met**",
                Verdict::Unknown { .. } => "unknown",
            };
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} ({}) | {verdict} |",
                c.text,
                c.judges.join(" ÷ "),
                super::verdict::measured_text(&c.verdict),
                c.published.as_ref().map_or("—".into(), |p| format!(
                    "{} ({})",
                    judge::fmt(p.value),
                    p.source
                )),
                c.goal,
                c.goal_source,
            );
        }
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::records::{Record, RecordWriter};
    use crate::testdata;

    /// The pacing fixture with its scenario's claims, as a run directory on disk.
    fn fixture_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tcpaccel-results-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let d = testdata::pacing_run();
        let mut w = RecordWriter::create(&dir).unwrap();
        w.write(&Record::Run(d.header().clone())).unwrap();
        for s in &d.summaries {
            w.write(&Record::Summary(s.clone())).unwrap();
        }
        w.write(&Record::Fidelity(testdata::fidelity("none", 0, true))).unwrap();
        w.write(&Record::End(crate::runner::records::End {
            complete: true,
            ended: 2.0,
            reason: "all repeats done".into(),
        }))
        .unwrap();
        dir
    }

    fn fixture_summary() -> ResultSummary {
        let dir = fixture_dir("sum");
        let mut data = crate::runner::records::read_run(&dir).unwrap();
        data.claims = crate::scenarios::find("pacing").unwrap().claims().to_vec();
        let s = summarize(&data, "lab run pacing --repeat 1".into()).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        s
    }

    #[test]
    fn summarize_a_run_directory() {
        let s = fixture_summary();
        assert_eq!((s.scenario.as_str(), s.repeats, s.seed), ("pacing", 3, 42));
        assert_eq!(
            s.variants.iter().map(|v| v.variant.as_str()).collect::<Vec<_>>(),
            ["none", "dynamic", "static"]
        );
        let none = &s.variants[0].cells["drops"];
        assert_eq!(none.spread.map(|x| (x.median, x.n)), Some((2222.0, 1)));
        assert_eq!(s.variants[2].cells["goodput_mbps"].published, Some(433.0));
        assert!(!s.variants[0].cells.contains_key("steady_rate_frac"), "no value, no cell");
        let cut = s.claims.iter().find(|c| c.text.contains("cuts drops to a fifth")).unwrap();
        assert_eq!(cut.judges, ["dynamic", "none"]);
        match &cut.verdict {
            Verdict::Missed { measured, detail } => {
                assert!((measured - 883.0 / 2222.0).abs() < 1e-12);
                assert_eq!(detail, "883 / 2222");
            }
            v => panic!("{v:?}"),
        }
        // The file round-trips, verdicts tagged by word.
        let text = to_json(&s);
        assert!(text.contains("\"verdict\": \"missed\""), "{text}");
        assert_eq!(serde_json::from_str::<ResultSummary>(&text).unwrap(), s);
    }

    #[test]
    fn summarize_refuses_shards_and_incomplete_runs() {
        let mut d = testdata::pacing_run();
        d.end = None;
        assert!(summarize(&d, String::new()).unwrap_err().to_string().contains("incomplete"));
        d.end = Some(crate::runner::records::End { complete: true, ended: 0.0, reason: String::new() });
        d.header.as_mut().unwrap().shard = Some(crate::runner::shard::Shard::parse("0/2").unwrap());
        assert!(summarize(&d, String::new()).unwrap_err().to_string().contains("lab merge"));
    }

    #[test]
    fn the_command_names_what_differs_from_the_defaults() {
        let mut h = testdata::header();
        h.scenario = "idle".into();
        h.params = BTreeMap::from([
            ("rate".into(), "500mbit".into()),
            ("variants".into(), "defaults,no-ssai".into()),
            ("note".into(), "a b".into()),
        ]);
        h.repeats = 2;
        h.seed = 1;
        let defaults = BTreeMap::from([
            ("rate".to_string(), "500mbit".to_string()),
            ("variants".into(), "defaults,no-ssai,no-ssai-resume".into()),
        ]);
        assert_eq!(
            command_line(&h, &defaults),
            "lab run idle --repeat 2 --set 'note=a b' --set variants=defaults,no-ssai"
        );
        h.quick = true;
        h.seed = 7;
        h.params.retain(|k, _| k == "rate");
        assert_eq!(command_line(&h, &defaults), "lab run idle --quick --repeat 2 --seed 7");
    }

    /// Golden: the block of the fixture summary, byte for byte.
    #[test]
    fn render_golden() {
        let s = testdata::results_summary();
        let got = render(&s, &View::default()).unwrap();
        let want = "`$B lab run fixture --repeat 3 --seed 42`: 3 repeats, seed 42, kernel 6.18.0, 2 CPUs; cells: median (min–max) over the repeats the fidelity monitor judged faithful.

| variant | goodput, Mbit/s | Drops at the bottleneck, pkts |
|---|---|---|
| none | 195 (190–200) [1 unfaithful excluded] · paper 200 | 1478 (1455–1500) [1 unfaithful excluded] |
| static | 455 (450–460) · paper 433 | 0 (0–2) |

| claim | judges | measured | published | goal | verdict |
|---|---|---|---|---|---|
| Static leaves at most one drop | static | 0 | 0 ([PSPacer]) | ≤ 1 (the fixture's goal) | **met** |
| Static more than doubles goodput | static ÷ none | 2.33 (455 / 195) | 2.17 ([PSPacer] 433 / 200) | ≥ 2.5 (the fixture's goal) | **not met** |
| BBR has goodput | bbr | — (no goodput for variant bbr in this run) | — | > 0 (the fixture's goal) | unknown |
";
        assert_eq!(got, want, "\n--- got ---\n{got}");
        // A block may pick and order the columns; an unknown one is named.
        let got = render(&s, &View { metrics: Some(vec!["drops".into()]), ..View::default() }).unwrap();
        assert!(
            got.contains("| variant | Drops at the bottleneck, pkts |\n|---|---|\n| none | 1478"),
            "{got}"
        );
        let err = render(&s, &View { metrics: Some(vec!["nope".into()]), ..View::default() }).unwrap_err();
        assert_eq!(err.to_string(), "the fixture run has no metric \"nope\" (it has: goodput, drops)");
        // … and pick and order the claims, or show none.
        let got = render(&s, &View { claims: Some(vec![3, 1]), ..View::default() }).unwrap();
        let rows: Vec<&str> = got.lines().filter(|l| l.contains("(the fixture's goal)")).collect();
        assert_eq!(rows.len(), 2, "{got}");
        assert!(rows[0].starts_with("| BBR has goodput") && rows[1].starts_with("| Static leaves"), "{got}");
        let got = render(&s, &View { claims: Some(vec![]), ..View::default() }).unwrap();
        assert!(!got.contains("| claim |") && got.ends_with("| 0 (0–2) |\n"), "{got}");
        // … and pick rows, kept in the summary's order.
        let got = render(&s, &View { variants: Some(vec!["static".into()]), ..View::default() }).unwrap();
        assert!(got.contains("|---|---|---|\n| static | 455") && !got.contains("| none |"), "{got}");
        let err = render(&s, &View { variants: Some(vec!["bbr".into()]), ..View::default() }).unwrap_err();
        assert_eq!(err.to_string(), "the fixture run has no variant \"bbr\" (it has: none, static)");
        for n in [0, 4] {
            let err = render(&s, &View { claims: Some(vec![n]), ..View::default() }).unwrap_err();
            assert_eq!(err.to_string(), format!("the fixture run has 3 claim(s), no claim {n}"));
        }
    }

    #[test]
    fn a_summary_is_named_after_its_scenario_with_an_optional_label() {
        for (name, ok) in [
            ("gather", true),
            ("gather.model1", true),
            ("gather.m-2", true),
            ("gather.", false),
            ("gather.Model1", false),
            ("gather.a.b", false),
            ("gatherx", false),
            ("gathe", false),
            ("split", false),
        ] {
            assert_eq!(names_summary_of(name, "gather"), ok, "{name}");
        }
    }

    #[test]
    fn keeping_metrics_trims_the_cells_and_keeps_the_claims() {
        let s = testdata::results_summary();
        let t = keep_metrics(s.clone(), &["drops".into()]).unwrap();
        assert_eq!(t.metrics.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["drops"]);
        assert!(t.variants.iter().all(|v| v.cells.keys().eq(["drops"])), "{:?}", t.variants);
        assert_eq!(t.claims, s.claims);
        let err = keep_metrics(s, &["drops".into(), "nope".into()]).unwrap_err();
        assert!(err.to_string().contains("no metric \"nope\""), "{err}");
    }
}
