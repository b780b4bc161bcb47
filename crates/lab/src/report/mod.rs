//! Renders a run directory's records into tables, SVG plots, a self-contained
//! HTML page and a Markdown summary. Depends on the records alone and on the
//! claims of the run's scenario ([`RunData::claims`](crate::runner::records::RunData::claims),
//! set by whoever knows the scenario), judged afresh at every rendering.
//!
//! The parts: [`tables`] (metric tables and the number format), [`verdict`]
//! (the block that opens the page: one line per claim, measured against the
//! published figure and the goal), [`markdown`] (the terminal summary),
//! [`plots`] (SVG charts), [`fidelity`] (the dilation D and the runs the
//! host could not keep up with), [`html`] (the page), [`judge`] (each
//! claim measured against a run: met, missed or unknown) and [`meaning`] (what the
//! result means for the reader: the commands behind a gain, the terms used). [`compare`] sets runs of
//! the same workloads side by side (`lab compare`: the cross-scale check). [`results`] summarizes a run
//! for the committed results page and renders it; [`page`] keeps BENCHMARKS.md's generated blocks
//! (`lab results`).
//! This file only wires them and writes a report directory.

pub mod compare;
pub mod fidelity;
pub mod html;
pub mod judge;
pub mod markdown;
pub mod meaning;
pub mod page;
pub mod plots;
pub mod results;
pub mod tables;
pub mod verdict;

pub use self::html::html;
pub use self::markdown::markdown;
pub use self::plots::plots;
pub use self::tables::{cell, tables, Row, Table};
pub use self::verdict::verdict_html;

use crate::runner::records::RunData;
use std::path::Path;

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
}
