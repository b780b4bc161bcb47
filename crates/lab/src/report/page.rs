//! The generated blocks of a Markdown page (BENCHMARKS.md): each block
//! between `<!-- results:begin NAME [metrics=A,…] [variants=V,…] [claims=N,…|none] -->`
//! and `<!-- results:end NAME -->` is what `results/NAME.json` renders
//! ([`super::results::render`]): the metric columns, the variant rows and
//! the claims (by their 1-based place in the summary) it names, all of
//! each kind it does not name.
//! NAME is a scenario, or `SCENARIO.LABEL` for another run of it. The
//! prose around the blocks is the page's own.
//! [`check`] names the blocks that differ from their summaries (CI), and
//! [`rewrite`] puts the rendered text in.
//!
//! Not here: reading files (the caller passes the page's text and the
//! summaries).

use super::results::{render, ResultSummary, UnknownMetric, View};
use std::collections::BTreeMap;
use std::ops::Range;

const BEGIN: &str = "<!-- results:begin ";
const END: &str = "<!-- results:end ";
const CLOSE: &str = "-->";

/// One generated block of a page.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// The summary it shows (`results/NAME.json`).
    pub scenario: String,
    pub view: View,
    /// 1-based line of the begin marker.
    pub line: usize,
    /// Byte range of the text between the markers' lines.
    body: Range<usize>,
}

impl std::fmt::Display for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "block {} (line {})", self.scenario, self.line)
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PageError {
    #[error("line {line}: {text:?} is not a results marker: want `<!-- results:begin NAME [metrics=A,B] [variants=V,W] [claims=1,3|none] -->` or `<!-- results:end NAME -->`")]
    Marker { line: usize, text: String },
    #[error("line {line}: block {scenario} is not closed by `<!-- results:end {scenario} -->`")]
    Unclosed { line: usize, scenario: String },
    #[error("line {line}: `results:end {found}` closes no open block{}", .open.as_ref().map(|o| format!(" (open: {o})")).unwrap_or_default())]
    StrayEnd { line: usize, found: String, open: Option<String> },
    #[error("line {line}: block {scenario}: there is no results/{scenario}.json")]
    NoResults { line: usize, scenario: String },
    #[error("line {line}: block {scenario}: {source}")]
    Metric { line: usize, scenario: String, source: UnknownMetric },
}

/// Every block of `page`, in order.
pub fn blocks(page: &str) -> Result<Vec<Block>, PageError> {
    let mut out = Vec::new();
    // The open block: its scenario, view, line and where its body starts.
    let mut open: Option<(String, View, usize, usize)> = None;
    let mut offset = 0;
    for (i, raw) in page.split_inclusive('\n').enumerate() {
        let line = i + 1;
        let text = raw.trim();
        let start = offset;
        offset += raw.len();
        let marker =
            |prefix: &str| text.strip_prefix(prefix).and_then(|r| r.strip_suffix(CLOSE)).map(str::trim);
        if let Some(spec) = marker(BEGIN) {
            if let Some((scenario, _, at, _)) = &open {
                return Err(PageError::Unclosed { line: *at, scenario: scenario.clone() });
            }
            let (scenario, view) =
                parse_spec(spec).ok_or_else(|| PageError::Marker { line, text: text.into() })?;
            open = Some((scenario, view, line, offset));
        } else if let Some(found) = marker(END) {
            match open.take() {
                Some((scenario, view, at, body)) if scenario == found => {
                    out.push(Block { scenario, view, line: at, body: body..start })
                }
                other => {
                    return Err(PageError::StrayEnd {
                        line,
                        found: found.into(),
                        open: other.map(|(s, _, at, _)| format!("{s} at line {at}")),
                    })
                }
            }
        } else if text.starts_with("<!-- results:") {
            return Err(PageError::Marker { line, text: text.into() });
        }
    }
    match open {
        Some((scenario, _, line, _)) => Err(PageError::Unclosed { line, scenario }),
        None => Ok(out),
    }
}

/// `demo`, `demo metrics=goodput_mbps,drops`, `gather.model1 claims=2,1`
/// or `demo claims=none`; each option at most once.
fn parse_spec(spec: &str) -> Option<(String, View)> {
    let mut words = spec.split_whitespace();
    let scenario = words.next()?.to_string();
    let mut view = View::default();
    for w in words {
        if let Some(list) = w.strip_prefix("metrics=") {
            if view.metrics.is_some() || list.is_empty() {
                return None;
            }
            view.metrics = Some(list.split(',').map(|m| m.trim().to_string()).collect());
        } else if let Some(list) = w.strip_prefix("variants=") {
            if view.variants.is_some() || list.is_empty() {
                return None;
            }
            view.variants = Some(list.split(',').map(|v| v.trim().to_string()).collect());
        } else if let Some(list) = w.strip_prefix("claims=") {
            if view.claims.is_some() {
                return None;
            }
            view.claims = Some(if list == "none" {
                Vec::new()
            } else {
                list.split(',').map(|n| n.parse::<usize>().ok().filter(|&n| n > 0)).collect::<Option<_>>()?
            });
        } else {
            return None;
        }
    }
    Some((scenario, view))
}

/// What a block's body must be: the summary's rendering (an HTML comment
/// ends its own Markdown block, so no blank line is needed around it).
fn body(b: &Block, results: &BTreeMap<String, ResultSummary>) -> Result<String, PageError> {
    let s = results
        .get(&b.scenario)
        .ok_or_else(|| PageError::NoResults { line: b.line, scenario: b.scenario.clone() })?;
    let text = render(s, &b.view).map_err(|source| PageError::Metric {
        line: b.line,
        scenario: b.scenario.clone(),
        source,
    })?;
    Ok(text)
}

/// Shown for the side of a difference whose block has ended.
const BLOCK_ENDS: &str = "(the block ends here)";

/// A block whose text differs from what its summary renders.
#[derive(Debug, Clone, PartialEq)]
pub struct Stale {
    pub block: String,
    /// 1-based line of the page where the first difference is, and the
    /// line there and the one the summary renders ([`BLOCK_ENDS`] past the end).
    pub line: usize,
    pub page: String,
    pub rendered: String,
}

impl std::fmt::Display for Stale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} differs from its results at line {}:\n  page:     {}\n  rendered: {}",
            self.block, self.line, self.page, self.rendered
        )
    }
}

/// The blocks of `page` that differ from what `results` render.
pub fn check(page: &str, results: &BTreeMap<String, ResultSummary>) -> Result<Vec<Stale>, PageError> {
    let mut stale = Vec::new();
    for b in blocks(page)? {
        let want = body(&b, results)?;
        let have = &page[b.body.clone()];
        if have != want {
            let (mut h, mut w) = (have.lines(), want.lines());
            let mut n = b.line + 1;
            loop {
                match (h.next(), w.next()) {
                    (Some(x), Some(y)) if x == y => n += 1,
                    (x, y) => {
                        stale.push(Stale {
                            block: b.to_string(),
                            line: n,
                            page: x.unwrap_or(BLOCK_ENDS).into(),
                            rendered: y.unwrap_or(BLOCK_ENDS).into(),
                        });
                        break;
                    }
                }
            }
        }
    }
    Ok(stale)
}

/// `page` with every block's body rendered from `results`.
pub fn rewrite(page: &str, results: &BTreeMap<String, ResultSummary>) -> Result<String, PageError> {
    let mut out = String::with_capacity(page.len());
    let mut at = 0;
    for b in blocks(page)? {
        out.push_str(&page[at..b.body.start]);
        out.push_str(&body(&b, results)?);
        at = b.body.end;
    }
    out.push_str(&page[at..]);
    Ok(out)
}

/// Scenarios of `results` that no block of `page` shows.
pub fn unshown(page: &str, results: &BTreeMap<String, ResultSummary>) -> Result<Vec<String>, PageError> {
    let shown: Vec<String> = blocks(page)?.into_iter().map(|b| b.scenario).collect();
    Ok(results.keys().filter(|k| !shown.contains(k)).cloned().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::results_summary as fixture;
    use std::path::Path;

    fn results() -> BTreeMap<String, ResultSummary> {
        BTreeMap::from([("fixture".to_string(), fixture())])
    }

    const PAGE: &str = "# Page\n\nProse before.\n\n<!-- results:begin fixture metrics=goodput -->\nold\n<!-- results:end fixture -->\n\nProse after.\n";

    #[test]
    fn write_then_check_and_a_changed_figure_is_named() {
        let r = results();
        let stale = check(PAGE, &r).unwrap();
        assert_eq!(stale.len(), 1);
        assert_eq!((stale[0].block.as_str(), stale[0].line), ("block fixture (line 5)", 6));
        let page = rewrite(PAGE, &r).unwrap();
        assert!(page.starts_with(
            "# Page\n\nProse before.\n\n<!-- results:begin fixture metrics=goodput -->\n`$B lab run fixture"
        ));
        assert!(page.ends_with("|\n<!-- results:end fixture -->\n\nProse after.\n"), "{page}");
        // An empty block: the first rendered line is missing.
        let empty = "<!-- results:begin fixture -->\n<!-- results:end fixture -->\n";
        let stale = check(empty, &r).unwrap();
        assert_eq!((stale[0].line, stale[0].page.as_str()), (2, BLOCK_ENDS));
        assert!(stale[0].rendered.starts_with("`$B lab run fixture"), "{stale:?}");
        assert_eq!(check(&page, &r).unwrap(), vec![]);
        assert_eq!(rewrite(&page, &r).unwrap(), page, "rewriting is idempotent");
        // A figure edited by hand on the page.
        let edited = page.replace("| static | 455 (450–460)", "| static | 456 (450–460)");
        assert_ne!(edited, page);
        let stale = check(&edited, &r).unwrap();
        assert_eq!(stale.len(), 1, "{stale:?}");
        assert!(stale[0].page.contains("456") && stale[0].rendered.contains("455"), "{}", stale[0]);
        assert_eq!(edited.lines().nth(stale[0].line - 1), Some(stale[0].page.as_str()));
        // A figure changed in the summary.
        let mut r2 = results();
        let cell = r2.get_mut("fixture").unwrap().variants[1].cells.get_mut("goodput").unwrap();
        cell.spread.as_mut().unwrap().median = 459.0;
        let stale = check(&page, &r2).unwrap();
        assert!(stale.len() == 1 && stale[0].rendered.contains("459"), "{stale:?}");
    }

    #[test]
    fn bad_markers_and_missing_results_are_named() {
        let r = results();
        let err = |page: &str| check(page, &r).unwrap_err();
        assert_eq!(
            err("<!-- results:begin fixture -->\n"),
            PageError::Unclosed { line: 1, scenario: "fixture".into() }
        );
        assert!(matches!(
            err("<!-- results:begin fixture -->\n<!-- results:end other -->\n"),
            PageError::StrayEnd { line: 2, .. }
        ));
        assert!(matches!(
            err("<!-- results:begin fixture colour=red -->\n"),
            PageError::Marker { line: 1, .. }
        ));
        assert!(matches!(err("<!-- results:bgin fixture -->\n"), PageError::Marker { line: 1, .. }));
        assert_eq!(
            err("x\n<!-- results:begin nothing -->\n<!-- results:end nothing -->\n"),
            PageError::NoResults { line: 2, scenario: "nothing".into() }
        );
        let e = err("<!-- results:begin fixture metrics=goodput,nope -->\n<!-- results:end fixture -->\n");
        assert!(e.to_string().contains("block fixture: the fixture run has no metric \"nope\""), "{e}");
        for bad in ["claims=", "claims=0", "claims=a", "claims=1 claims=2", "claims=1,,2"] {
            let page = format!("<!-- results:begin fixture {bad} -->\n<!-- results:end fixture -->\n");
            assert!(matches!(err(&page), PageError::Marker { line: 1, .. }), "{bad}");
        }
        let e = err("<!-- results:begin fixture claims=9 -->\n<!-- results:end fixture -->\n");
        assert!(e.to_string().contains("block fixture: the fixture run has 3 claim(s), no claim 9"), "{e}");
        let b =
            blocks("<!-- results:begin fixture metrics=drops claims=2,1 -->\n<!-- results:end fixture -->\n");
        assert_eq!(
            b.unwrap()[0].view,
            View { metrics: Some(vec!["drops".into()]), claims: Some(vec![2, 1]), variants: None }
        );
        let b = blocks("<!-- results:begin fixture variants=static,none -->\n<!-- results:end fixture -->\n");
        assert_eq!(b.unwrap()[0].view.variants, Some(vec!["static".to_string(), "none".to_string()]));
        assert!(matches!(
            err("<!-- results:begin fixture variants= -->\n<!-- results:end fixture -->\n"),
            PageError::Marker { line: 1, .. }
        ));
        assert_eq!(unshown("no blocks\n", &r).unwrap(), ["fixture"]);
    }

    /// The committed page shows what the committed summaries render, and
    /// every summary has a block (`lab results --check BENCHMARKS.md`).
    #[test]
    fn the_committed_page_matches_the_committed_results() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let page = std::fs::read_to_string(root.join("BENCHMARKS.md")).unwrap();
        let results = crate::scenarios::read_results(&root.join("results")).unwrap();
        let stale = check(&page, &results).unwrap();
        assert!(
            stale.is_empty(),
            "{}\n(run `tcpaccel lab results --write BENCHMARKS.md`)",
            stale.iter().map(|s| s.to_string()).collect::<Vec<_>>().join("\n")
        );
        assert_eq!(unshown(&page, &results).unwrap(), Vec::<String>::new());
        // A results page, not a notebook (issue 48): short, and no figure
        // whose run lives in a temporary directory.
        let lines = page.lines().count();
        assert!(
            lines <= 600,
            "BENCHMARKS.md has {lines} lines; the page keeps to 600 (investigations go to docs/notes/)"
        );
        let tmp: Vec<&str> = page.lines().filter(|l| l.contains("/tmp")).collect();
        assert!(tmp.is_empty(), "BENCHMARKS.md names /tmp paths: {tmp:?}");
    }
}
