//! `tcpaccel lab`: list, run and report scenarios; the demo; cleanup of leftovers.

use crate::exit::{self, Verdict};
use anyhow::Context;
use clap::Subcommand;
use std::path::PathBuf;
use std::time::Duration;
use tcpaccel_lab::runner::records::read_run;
use tcpaccel_lab::runner::scenario::{self, RunOptions};
use tcpaccel_lab::runner::shard::Shard;
use tcpaccel_lab::{report, scenarios};

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    cmd: LabCmd,
}

#[derive(Subcommand)]
enum LabCmd {
    /// List the scenarios with their parameters and defaults.
    List {
        /// Machine output (JSON Lines).
        #[arg(long)]
        json: bool,
    },
    /// Run a scenario: variants interleaved, repeats, records and a report in --out.
    Run {
        /// Scenario name (see `lab list`).
        name: String,
        /// Short durations for a quick look (and tests).
        #[arg(long)]
        quick: bool,
        /// Repeats per variant (default: the scenario's; 1 with --quick).
        #[arg(long = "repeat")]
        repeat: Option<u32>,
        /// Output directory (default: ./lab-results/NAME-UNIXTIME).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Override a parameter: --set key=value (repeatable).
        #[arg(long = "set", value_parser = scenario::parse_set)]
        sets: Vec<(String, String)>,
        /// Seed of the run's randomness (recorded; same seed replays the workload).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print the summary as JSON instead of Markdown; no progress bar.
        #[arg(long)]
        json: bool,
        /// Run only the I-th of N slices of the runs (variants × repeats, I from 0), e.g. one task of a
        /// Slurm array or a Kubernetes Indexed Job; `lab merge` joins the N directories.
        #[arg(long, value_name = "I/N", value_parser = |s: &str| Shard::parse(s).map_err(|e| e.to_string()))]
        shard: Option<Shard>,
    },
    /// Join the directories of `lab run --shard I/N` (all N) into one run: the records, fidelity and report an
    /// unsharded run of the same seed writes (only timings differ).
    Merge {
        /// The shards' run directories, in any order.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Directory of the merged run.
        #[arg(long)]
        out: PathBuf,
        /// Print the summary as JSON instead of Markdown.
        #[arg(long)]
        json: bool,
    },
    /// Re-render a run directory's report from its records alone.
    Report {
        /// A run directory written by `lab run` (holds records.jsonl).
        dir: PathBuf,
        /// Print the summary as JSON instead of Markdown.
        #[arg(long)]
        json: bool,
    },
    /// The results page: summarize a run for `results/NAME.json`, print what the committed summaries
    /// render, or check / rewrite the generated blocks of a page (`<!-- results:begin NAME -->` …
    /// `<!-- results:end NAME -->`, e.g. in BENCHMARKS.md). NAME is the scenario, or SCENARIO.LABEL
    /// for another run of it.
    Results {
        /// Print the summary of this run directory as JSON (redirect it to results/NAME.json).
        #[arg(long, value_name = "RUN_DIR", conflicts_with_all = ["check", "write", "scenarios"])]
        summarize: Option<PathBuf>,
        /// With --summarize: keep only these metric columns (the claims are judged from the whole run).
        #[arg(long, value_name = "A,B", value_delimiter = ',', requires = "summarize")]
        metrics: Vec<String>,
        /// Exit 1 naming each generated block of PAGE that differs from what the summaries render.
        #[arg(long, value_name = "PAGE", conflicts_with_all = ["write", "scenarios"])]
        check: Option<PathBuf>,
        /// Rewrite the generated blocks of PAGE from the summaries.
        #[arg(long, value_name = "PAGE", conflicts_with = "scenarios")]
        write: Option<PathBuf>,
        /// Directory of the summaries.
        #[arg(long, default_value = "results")]
        dir: PathBuf,
        /// Summaries whose blocks to print, by NAME (default: every summary in --dir).
        scenarios: Vec<String>,
    },
    /// Compare runs of the same workloads (e.g. at time dilation D and 4D, `--set scale=D`, or twice at
    /// one D): per variant, the mean and p99 flow completion time (FCT) of one flow class and the
    /// Kolmogorov–Smirnov (KS) distance between the runs' FCT distributions, per pair of runs and pooled.
    Compare {
        /// Run directories of the base side (one per seed).
        #[arg(long, num_args = 1.., required = true)]
        base: Vec<PathBuf>,
        /// Run directories compared with them, in the same order (same scenario, seed and parameters
        /// but `scale` and `variants`).
        #[arg(long, num_args = 1.., required = true)]
        against: Vec<PathBuf>,
        /// Flow class compared: the classes starting with this.
        #[arg(long, default_value = "short")]
        class: String,
        /// Goal: mean and p99 within ± this many percent.
        #[arg(long, default_value_t = 5.0)]
        tolerance_pct: f64,
        /// Goal: KS distance at most this.
        #[arg(long, default_value_t = 0.05)]
        max_ks: f64,
        /// One JSON object instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// The tour of tcpaccel on an emulated long fat path (about two minutes); writes ./tcpaccel-report/.
    Demo {
        /// Output directory.
        #[arg(long, default_value = "tcpaccel-report")]
        out: PathBuf,
        /// A shorter tour (for tests).
        #[arg(long)]
        quick: bool,
        /// Print the summary as JSON instead of Markdown; no progress bar.
        #[arg(long)]
        json: bool,
    },
    /// Remove leftover tcpaccel namespaces and emulators from interrupted runs, and their scratch directories.
    Clean {
        /// One JSON object ({"type":"clean","removed":[...]}) instead of a line per item.
        #[arg(long)]
        json: bool,
    },
    /// Benchmark the emulator: raw veth vs through the emulator, rate accuracy, one-way delay error.
    EmuBench {
        /// Length of each measurement.
        #[arg(long, default_value = "10s", value_parser = tcpaccel_core::units::parse_duration)]
        duration: std::time::Duration,
        /// Rates whose accuracy is measured (comma-separated).
        #[arg(long, default_value = "100mbit,1gbit", value_delimiter = ',')]
        rates: Vec<tcpaccel_core::units::Rate>,
        /// One JSON object instead of the table.
        #[arg(long)]
        json: bool,
    },
}

/// Expected wall time of a whole run with the default parameters (or the
/// `--quick` ones): the scenario's own per-run estimate times variants and
/// repeats.
fn expected_time(s: &dyn tcpaccel_lab::runner::scenario::Scenario, quick: bool) -> Option<Duration> {
    let p = scenario::resolve_params(s, quick, &[]).ok()?;
    let variants = u32::try_from(s.variants(&p).ok()?.len()).ok()?;
    let c = scenario::RunConfig::new(s, &p, quick, None, 1).ok()?;
    Some(s.estimate(&p, c.dilation).ok()? * variants.max(1) * c.repeats)
}

/// `2m30s`, `45s`: a run time for a table.
fn short_duration(d: Duration) -> String {
    let s = d.as_secs().max(1);
    match (s / 60, s % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s:02}s"),
    }
}

/// What `--quick` changes, before the run starts (on stderr).
fn print_quick_changes(s: &dyn tcpaccel_lab::runner::scenario::Scenario, repeat: Option<u32>) {
    let defaults: std::collections::BTreeMap<&str, String> =
        s.params().into_iter().map(|p| (p.key, p.default)).collect();
    let mut changes: Vec<String> = s
        .quick()
        .into_iter()
        .map(|(k, v)| format!("{k} {} -> {v}", defaults.get(k).map_or("-", String::as_str)))
        .collect();
    if repeat.is_none() && s.default_repeats() != 1 {
        changes.push(format!("repeats {} -> 1", s.default_repeats()));
    }
    if changes.is_empty() {
        eprintln!("--quick: no parameter of {} changes", s.name());
    } else {
        eprintln!("--quick changes: {}", changes.join(", "));
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<Verdict> {
    match args.cmd {
        LabCmd::List { json } => {
            let mut text = String::new();
            for s in scenarios::all() {
                if json {
                    // Each {key, default, doc} as the scenario declares it (its params struct).
                    let params = s.params();
                    let secs = |q| expected_time(s.as_ref(), q).map(|d| d.as_secs());
                    let v = serde_json::json!({"type": "scenario", "name": s.name(), "title": s.title(), "description": s.description(), "params": params, "expected_s": secs(false), "expected_quick_s": secs(true)});
                    text.push_str(&format!("{v}\n"));
                } else {
                    if text.is_empty() {
                        text.push_str(&format!(
                            "{:<18} {:>9} {:>9}  {}\n    {:<22} {:<12} {}\n",
                            "scenario", "run time", "--quick", "title", "parameter", "default", "meaning"
                        ));
                    }
                    let t = |q| expected_time(s.as_ref(), q).map_or("?".to_string(), short_duration);
                    text.push_str(&format!(
                        "{:<18} {:>9} {:>9}  {}\n",
                        s.name(),
                        t(false),
                        t(true),
                        s.title()
                    ));
                    for p in s.params() {
                        text.push_str(&format!("    {:<22} {:<12} {}\n", p.key, p.default, p.doc));
                    }
                }
            }
            if !json {
                text.push_str(
                    "\nSL: short-flow lane, LL: long-flow lane, D: time dilation (`scale`), FCT: flow completion \
                     time; these and the reports' other terms: docs/glossary.md\n",
                );
            }
            // A reader that stops early (`| head`) is not an error.
            match std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing the list"),
                _ => Ok(Verdict::Ok),
            }
        }
        LabCmd::Run { name, quick, repeat, out, sets, seed, json, shard } => {
            let s = scenarios::find(&name).map_err(|e| exit::usage(e.to_string()))?;
            let params = scenario::resolve_params(s.as_ref(), quick, &sets)
                .map_err(|e| exit::usage(format!("{e:#}")))?;
            if quick && !json {
                print_quick_changes(s.as_ref(), repeat);
            }
            exit::require_root(&format!("lab run {name} (network namespaces)"))?;
            install_interrupt();
            let out = out.unwrap_or_else(|| {
                PathBuf::from(format!(
                    "lab-results/{name}-{}",
                    tcpaccel_lab::runner::records::unix_now() as u64
                ))
            });
            let shard = shard.unwrap_or(Shard::ALL);
            let opts = RunOptions { quick, repeats: repeat, out: out.clone(), seed, json, shard };
            let data = scenario::run(s.as_ref(), &params, &opts)?;
            report::write_report(&data, &out)
                .with_context(|| format!("writing report into {}", out.display()))?;
            print_summary(&data, json)?;
            if !json {
                println!("\nrecords and report: {}/ (index.html, summary.md)", out.display());
            }
            verdict(&data)
        }
        LabCmd::Merge { dirs, out, json } => {
            // Judged by its scenario's claims and named by its names, as a
            // run read back by `lab report` is.
            let data = scenarios::with_claims(
                tcpaccel_lab::runner::merge::merge_dirs(&dirs, &out)
                    .map_err(|e| exit::usage(e.to_string()))?,
            );
            report::write_report(&data, &out)
                .with_context(|| format!("writing report into {}", out.display()))?;
            print_summary(&data, json)?;
            if !json {
                println!(
                    "\nmerged {} shards: {}/ (records.jsonl, index.html, summary.md)",
                    dirs.len(),
                    out.display()
                );
            }
            Ok(if data.complete() { Verdict::Ok } else { Verdict::Negative })
        }
        LabCmd::Report { dir, json } => {
            let data = scenarios::with_claims(read_run(&dir).map_err(|e| exit::usage(e.to_string()))?);
            report::write_report(&data, &dir)
                .with_context(|| format!("writing report into {}", dir.display()))?;
            print_summary(&data, json)?;
            if !json {
                println!("\nreport written: {}/index.html, {}/summary.md", dir.display(), dir.display());
            }
            Ok(Verdict::Ok)
        }
        LabCmd::Results { summarize, metrics, check, write, dir, scenarios } => {
            results(summarize, &metrics, check, write, &dir, &scenarios)
        }
        LabCmd::Compare { base, against, class, tolerance_pct, max_ks, json } => {
            let read = |dirs: &[PathBuf]| -> anyhow::Result<Vec<_>> {
                dirs.iter().map(|d| read_run(d).map_err(|e| exit::usage(e.to_string()))).collect()
            };
            let opts = report::compare::CompareOptions {
                class_prefix: class,
                tolerance_pct,
                max_ks,
                signal_metric: Some(tcpaccel_lab::scenarios::lanes::DAEMONS_ON_BPF_METRIC.into()),
            };
            let c = report::compare::compare(&read(&base)?, &read(&against)?, &opts)
                .map_err(|e| exit::usage(e.to_string()))?;
            if json {
                println!("{}", serde_json::to_string(&c)?);
            } else {
                print!("{}", c.markdown());
            }
            Ok(Verdict::Ok)
        }
        LabCmd::Demo { out, quick, json } => {
            exit::require_root("lab demo (network namespaces)")?;
            install_interrupt();
            let s = scenarios::find("demo")?;
            if quick && !json {
                print_quick_changes(s.as_ref(), Some(1));
            }
            let opts =
                RunOptions { quick, repeats: Some(1), out: out.clone(), seed: 1, json, shard: Shard::ALL };
            let params = scenario::resolve_params(s.as_ref(), quick, &[])?;
            let data = scenario::run(s.as_ref(), &params, &opts)?;
            report::write_report(&data, &out)
                .with_context(|| format!("writing report into {}", out.display()))?;
            print_summary(&data, json)?;
            if !json {
                println!("\nreport: {}/index.html", out.display());
            }
            verdict(&data)
        }
        LabCmd::EmuBench { duration, rates, json } => {
            exit::require_root("lab emu-bench (network namespaces, AF_PACKET)")?;
            let opts = tcpaccel_lab::emu_bench::BenchOptions {
                duration,
                rates,
                ..tcpaccel_lab::emu_bench::BenchOptions::default()
            };
            let report = tcpaccel_lab::emu_bench::run(&opts)?;
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{}", report.to_table());
            }
            Ok(Verdict::Ok)
        }
        LabCmd::Clean { json } => {
            exit::require_root("lab clean")?;
            let mut removed = tcpaccel_net::clean_leftovers()?;
            let parents = tcpaccel_lab::testbeds::scratch_parents();
            for dir in tcpaccel_lab::testbeds::clean_scratch(&parents)? {
                removed.push(format!("scratch directory {}", dir.display()));
            }
            if json {
                println!("{}", serde_json::json!({"type": "clean", "removed": removed}));
                return Ok(Verdict::Ok);
            }
            if removed.is_empty() {
                println!("nothing to clean");
            }
            for r in removed {
                println!("removed {r}");
            }
            Ok(Verdict::Ok)
        }
    }
}

/// `lab results`: the files are read here, the rest is `report::results` and `report::page`.
fn results(
    summarize: Option<PathBuf>,
    metrics: &[String],
    check: Option<PathBuf>,
    write: Option<PathBuf>,
    dir: &std::path::Path,
    names: &[String],
) -> anyhow::Result<Verdict> {
    use report::{page, results};
    if let Some(run) = summarize {
        let data = read_run(&run).map_err(|e| exit::usage(e.to_string()))?;
        let mut s =
            scenarios::summarize(data).map_err(|e| exit::usage(format!("{}: {e:#}", run.display())))?;
        if !metrics.is_empty() {
            s = results::keep_metrics(s, metrics)
                .map_err(|e| exit::usage(format!("{}: {e}", run.display())))?;
        }
        print!("{}", results::to_json(&s));
        return Ok(Verdict::Ok);
    }
    let all = scenarios::read_results(dir).map_err(|e| exit::usage(e.to_string()))?;
    let read_page =
        |p: &PathBuf| std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()));
    let page_err = |p: &PathBuf, e: page::PageError| exit::usage(format!("{}: {e}", p.display()));
    if let Some(p) = check {
        let text = read_page(&p)?;
        let stale = page::check(&text, &all).map_err(|e| page_err(&p, e))?;
        let unshown = page::unshown(&text, &all).map_err(|e| page_err(&p, e))?;
        for s in &stale {
            eprintln!("{}: {s}", p.display());
        }
        for u in &unshown {
            eprintln!("{}: no block shows {}/{u}.json", p.display(), dir.display());
        }
        if stale.is_empty() && unshown.is_empty() {
            println!("{}: every generated block matches {}/", p.display(), dir.display());
            return Ok(Verdict::Ok);
        }
        eprintln!("(`tcpaccel lab results --write {}` rewrites the blocks)", p.display());
        return Ok(Verdict::Negative);
    }
    if let Some(p) = write {
        let text = read_page(&p)?;
        let new = page::rewrite(&text, &all).map_err(|e| page_err(&p, e))?;
        let changed = page::check(&text, &all).map_err(|e| page_err(&p, e))?.len();
        if new != text {
            std::fs::write(&p, new).with_context(|| format!("writing {}", p.display()))?;
        }
        println!("{}: {changed} block(s) rewritten", p.display());
        return Ok(Verdict::Ok);
    }
    let chosen: Vec<(&String, &results::ResultSummary)> = if names.is_empty() {
        all.iter().collect()
    } else {
        names
            .iter()
            .map(|n| {
                all.get_key_value(n).ok_or_else(|| {
                    let have = all.keys().cloned().collect::<Vec<_>>().join(", ");
                    exit::usage(format!("no {}/{n}.json (summaries: {have})", dir.display()))
                })
            })
            .collect::<Result<_, _>>()?
    };
    for (name, s) in chosen {
        let body = results::render(s, &results::View::default()).map_err(|e| exit::usage(e.to_string()))?;
        println!("<!-- results:begin {name} -->\n{body}<!-- results:end {name} -->\n");
    }
    Ok(Verdict::Ok)
}

fn print_summary(data: &tcpaccel_lab::runner::records::RunData, json: bool) -> anyhow::Result<()> {
    if json {
        for t in report::tables(data) {
            let v = serde_json::json!({"type": "table", "complete": data.complete(), "table": t});
            println!("{v}");
        }
    } else {
        print!("{}", report::markdown(data));
    }
    Ok(())
}

fn verdict(data: &tcpaccel_lab::runner::records::RunData) -> anyhow::Result<Verdict> {
    if scenario::interrupted() {
        return Err(anyhow::Error::new(exit::Fail::Interrupted));
    }
    Ok(if data.complete() { Verdict::Ok } else { Verdict::Negative })
}

/// First Ctrl-C / SIGTERM: the current transfer ends early, the runner writes an
/// incomplete end record and the report, and the networks' Drop guards tear
/// down. A second signal makes the topology crate tear down and exit at once.
fn install_interrupt() {
    let Ok(rx) = tcpaccel_sys::signals::subscribe() else {
        return; // the topology crate's own handler still cleans up and exits
    };
    std::thread::spawn(move || {
        if let Ok(sig) = rx.recv() {
            eprintln!("\ntcpaccel: signal {sig}: stopping after the current transfer ends early; Ctrl-C again to abort");
            scenario::interrupt();
            // Keep the receiver alive so the next signal is the hard exit path.
            let _ = rx.recv();
        }
    });
}
