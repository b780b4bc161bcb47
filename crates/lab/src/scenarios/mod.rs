//! The registry of lab scenarios: one experiment per file, or per folder
//! when one file would pass 1000 lines (`split/`; the lanes experiments in
//! `lanes/`, with the daemons they share), each registered in [`all`].
//! Topologies and helpers they share are in [`crate::testbeds`] and
//! [`crate::engines`]; no scenario imports another's file (the test below).

use crate::runner::scenario::Scenario;

pub mod demo;
pub mod gather;
pub mod idle;
pub mod lanes;
pub mod pacing;
pub mod pacing_apps;
pub mod pacing_cpu;
pub mod pacing_mptcp;
pub mod pacing_web;
pub mod rto;
pub mod split;
pub mod tuning;

/// Every scenario, in the order `lab list` shows them.
pub fn all() -> Vec<Box<dyn Scenario>> {
    vec![
        Box::new(demo::Demo),
        Box::new(tuning::Tuning),
        Box::new(rto::Rto),
        Box::new(split::Split),
        Box::new(pacing::Pacing),
        Box::new(pacing_mptcp::PacingMptcp),
        Box::new(pacing_cpu::PacingCpu),
        Box::new(pacing_web::PacingWeb),
        Box::new(pacing_apps::PacingApps),
        Box::new(idle::Idle),
        Box::new(gather::Gather),
        Box::new(lanes::LanesBasic),
        Box::new(lanes::LanesBuildup),
        Box::new(lanes::LanesRealistic(crate::engines::workloads::Mix::WebSearch)),
        Box::new(lanes::LanesRealistic(crate::engines::workloads::Mix::DataMining)),
        Box::new(lanes::LanesParams),
    ]
}

/// `data` with today's claims of its scenario (none for a scenario this
/// build does not know), for rendering a run read from its directory.
pub fn with_claims(mut data: crate::runner::records::RunData) -> crate::runner::records::RunData {
    let s = all().into_iter().find(|s| s.name() == data.header().scenario);
    data.claims = s.as_ref().map_or(&[][..], |s| s.claims()).to_vec();
    data.names = s.as_ref().map(|s| s.names()).unwrap_or_default();
    data.point_label = s.as_ref().and_then(|s| s.point_label());
    data.paper_scale = s.map_or(&[][..], |s| s.paper_scale());
    data
}

/// The committed results summaries of `dir` (`results/`), each with its
/// scenario's human names of the metrics, for rendering.
pub fn read_results(
    dir: &std::path::Path,
) -> Result<
    std::collections::BTreeMap<String, crate::report::results::ResultSummary>,
    crate::report::results::ResultsError,
> {
    let mut all = crate::report::results::read_dir(dir)?;
    for s in all.values_mut() {
        if let Ok(sc) = find(&s.scenario) {
            (s.names, s.point_label) = (sc.names(), sc.point_label());
        }
    }
    Ok(all)
}

/// The results-page summary of a run read from its directory
/// (`lab results --summarize`): judged against today's claims of its
/// scenario, with the `lab run` command that reproduces it against the
/// scenario's defaults.
pub fn summarize(
    data: crate::runner::records::RunData,
) -> anyhow::Result<crate::report::results::ResultSummary> {
    let data = with_claims(data);
    let h = data.header();
    let s = find(&h.scenario)?;
    let defaults = crate::runner::scenario::resolve_params(s.as_ref(), h.quick, &[])?;
    let command = crate::report::results::command_line(h, &defaults.0);
    Ok(crate::report::results::summarize(&data, command)?)
}

/// Looks a scenario up by name; the error lists the valid names.
pub fn find(name: &str) -> anyhow::Result<Box<dyn Scenario>> {
    let all = all();
    let names: Vec<&str> = all.iter().map(|s| s.name()).collect();
    let list = names.join(", ");
    all.into_iter()
        .find(|s| s.name() == name)
        .ok_or_else(|| anyhow::anyhow!("unknown scenario {name:?}; valid scenarios: {list}"))
}

#[cfg(test)]
mod claims_tests {
    use super::*;
    use crate::runner::records::{Record, RunData};

    /// The committed results page's summaries hold the claims their
    /// scenarios make today, with today's goals: a claim changed since the
    /// run was summarized needs the run again (`lab results --summarize`).
    #[test]
    fn committed_results_hold_todays_claims() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../results");
        let results = crate::report::results::read_dir(&dir).unwrap();
        assert!(results.contains_key("demo"), "results/ holds the demo's summary");
        for (name, r) in &results {
            let s = find(&r.scenario).unwrap();
            let today = crate::report::judge::claims_for(s.claims(), &r.params);
            let texts = |v: Vec<(String, String)>| v.into_iter().collect::<Vec<_>>();
            assert_eq!(
                texts(r.claims.iter().map(|c| (c.text.clone(), c.goal.clone())).collect()),
                texts(today.iter().map(|c| (c.text.to_string(), c.goal.text())).collect()),
                "results/{name}.json was judged by other claims than {name} makes today; run `{}` again and \
                 summarize it (`lab results --summarize`)",
                r.command
            );
        }
    }

    /// Each scenario names each key it records once (its own names after
    /// those of the testbed it shares), and a run read back carries them.
    #[test]
    fn every_scenario_names_each_key_once() {
        for s in all() {
            let names = s.names();
            assert!(!names.is_empty(), "{} names none of its keys", s.name());
            let mut keys: Vec<&str> = names.iter().map(|(k, _)| *k).collect();
            keys.sort_unstable();
            let n = keys.len();
            keys.dedup();
            assert_eq!(keys.len(), n, "{}: a key named twice in {names:?}", s.name());
            let mut h = crate::testdata::header();
            h.scenario = s.name().into();
            let mut d = RunData::default();
            d.push(Record::Run(h));
            assert_eq!(with_claims(d).names, names, "{}", s.name());
        }
    }

    /// A run read back from its directory (`lab report`, `lab merge`) is
    /// judged by its scenario's own claims, and every scenario that shows
    /// a paper's figure in its tables states what it claims about it.
    #[test]
    fn claims_are_found_for_every_scenario_that_reports_a_verdict() {
        let mut with_verdict = Vec::new();
        for s in all() {
            let mut h = crate::testdata::header();
            h.scenario = s.name().into();
            let mut d = RunData::default();
            d.push(Record::Run(h));
            let d = with_claims(d);
            assert_eq!(d.claims, s.claims(), "{}: the claims a read-back run is judged by", s.name());
            if !s.published().is_empty() {
                assert!(!s.claims().is_empty(), "{} shows published figures but claims nothing", s.name());
            }
            if !s.claims().is_empty() {
                with_verdict.push(s.name());
            }
        }
        for name in [
            "demo",
            "tuning",
            "rto",
            "split",
            "pacing",
            "pacing-web",
            "pacing-apps",
            "idle",
            "gather",
            "lanes-websearch",
        ] {
            assert!(with_verdict.contains(&name), "{name} reports a verdict: {with_verdict:?}");
        }
        let mut h = crate::testdata::header();
        h.scenario = "no-such-scenario".into();
        let mut d = RunData::default();
        d.push(Record::Run(h));
        assert!(with_claims(d).claims.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// The scenario modules `mod.rs` declares (`pub mod NAME;`).
    fn scenario_modules(dir: &Path) -> Vec<String> {
        let text = std::fs::read_to_string(dir.join("mod.rs")).unwrap();
        text.lines()
            .filter_map(|l| l.trim().strip_prefix("pub mod ")?.strip_suffix(';'))
            .map(str::to_string)
            .collect()
    }

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                rust_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    /// The module names a path that starts right after `prefix` reaches:
    /// `a` in `prefix a::…`, `a` and `b` in `prefix {a, b::…}`.
    fn named_after(text: &str, prefix: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = text;
        while let Some(i) = rest.find(prefix) {
            rest = &rest[i + prefix.len()..];
            let ident =
                |s: &str| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
            if let Some(group) = rest.strip_prefix('{') {
                let inner = &group[..group.find('}').unwrap_or(group.len())];
                out.extend(inner.split(',').map(|part| ident(part.trim())).filter(|n| !n.is_empty()));
            } else {
                out.push(ident(rest));
            }
        }
        out
    }

    /// Which other scenario's file `text` (a file of scenario `own`, at the
    /// top of `scenarios/` when `top`) names.
    fn foreign(text: &str, own: &str, top: bool, modules: &[String]) -> Vec<String> {
        let mut bad: Vec<String> = named_after(text, "crate::scenarios::")
            .into_iter()
            .filter(|m| m != own && modules.contains(m))
            .collect();
        // At the top, `super` is the registry: its other modules are other
        // scenarios. One folder down (lanes/), `super` is the scenario's own
        // folder and `super::super` the registry.
        let registry = if top { "super::" } else { "super::super::" };
        bad.extend(named_after(text, registry).into_iter().filter(|m| m != own && modules.contains(m)));
        bad
    }

    /// No source file of the lab passes 1000 lines (a file that grows
    /// past it becomes a folder, as `split/` and `lanes/` did).
    #[test]
    fn no_lab_source_file_is_over_1000_lines() {
        const MAX: usize = 1000;
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        rust_files(&root.join("src"), &mut files);
        rust_files(&root.join("tests"), &mut files);
        assert!(files.len() > 50, "found only {} files under {}", files.len(), root.display());
        let long: Vec<String> = files
            .iter()
            .filter_map(|f| {
                let n = std::fs::read_to_string(f).unwrap().lines().count();
                (n > MAX).then(|| format!("{} ({n} lines)", f.strip_prefix(root).unwrap_or(f).display()))
            })
            .collect();
        assert!(long.is_empty(), "lab source files over {MAX} lines; split them: {long:?}");
    }

    #[test]
    fn the_lint_sees_each_way_of_naming_another_scenario() {
        let m: Vec<String> = ["demo", "pacing", "lanes"].map(String::from).to_vec();
        assert_eq!(foreign("use super::pacing::BpfPacing;", "idle", true, &m), ["pacing"]);
        assert_eq!(foreign("use super::{demo::x, pacing};", "idle", true, &m), ["demo", "pacing"]);
        assert_eq!(foreign("let b = crate::scenarios::demo::f();", "idle", true, &m), ["demo"]);
        assert_eq!(foreign("use super::super::pacing::X;", "lanes", false, &m), ["pacing"]);
        assert!(foreign("use super::knobs::Param;\nuse super::*;", "lanes", false, &m).is_empty());
        assert!(foreign("use crate::testbeds::dumbbell::bulk;", "idle", true, &m).is_empty());
    }

    /// What `lab list --json` prints as each scenario's parameters (the
    /// `params` array, `Scenario::params` serialized as the CLI does) is
    /// what the scenario reads: every default given back as `--set`
    /// resolves into the scenario's struct (unknown or missing keys would
    /// not), and the variants, the estimate and the notes succeed on it.
    #[test]
    fn every_scenarios_params_round_trip_through_lab_list_json() {
        use crate::runner::scenario::{resolve_params, RunConfig};
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Listed {
            key: String,
            default: String,
            doc: String,
        }
        let mut typed_names = Vec::new();
        for s in super::all() {
            let json = serde_json::to_string(&s.params()).unwrap();
            let listed: Vec<Listed> = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{json}: {e}"));
            assert!(!listed.is_empty(), "{}", s.name());
            for l in &listed {
                assert!(!l.doc.trim().is_empty(), "{}: {} has no doc", s.name(), l.key);
            }
            let sets: Vec<(String, String)> =
                listed.iter().map(|l| (l.key.clone(), l.default.clone())).collect();
            let p =
                resolve_params(s.as_ref(), false, &sets).unwrap_or_else(|e| panic!("{}: {e:#}", s.name()));
            assert_eq!(p, resolve_params(s.as_ref(), false, &[]).unwrap(), "{}", s.name());
            // --quick's values are read by the same struct.
            resolve_params(s.as_ref(), true, &[]).unwrap_or_else(|e| panic!("{} --quick: {e:#}", s.name()));
            let c = RunConfig::new(s.as_ref(), &p, false, None, 1)
                .unwrap_or_else(|e| panic!("{}: {e:#}", s.name()));
            let v = s.variants(&p).unwrap_or_else(|e| panic!("{} variants: {e:#}", s.name()));
            assert!(!v.is_empty(), "{}", s.name());
            s.estimate(&p, c.dilation).unwrap_or_else(|e| panic!("{} estimate: {e:#}", s.name()));
            s.notes(&p).unwrap_or_else(|e| panic!("{} notes: {e:#}", s.name()));
            typed_names.push(s.name());
            // A key the struct does not have is refused by it, not only by the listed keys.
            let mut extra = p.clone();
            extra.0.insert("colour".into(), "red".into());
            let e = s.check_params(&extra).expect_err(s.name()).to_string();
            assert!(e.contains("unknown field `colour`"), "{}: {e}", s.name());
        }
        for name in [
            "demo",
            "tuning",
            "rto",
            "split",
            "pacing",
            "pacing-mptcp",
            "pacing-cpu",
            "pacing-apps",
            "pacing-web",
            "idle",
            "gather",
            "lanes-basic",
            "lanes-buildup",
            "lanes-websearch",
            "lanes-datamining",
            "lanes-params",
        ] {
            assert!(typed_names.contains(&name), "{name} reads a typed struct: {typed_names:?}");
        }
        // The demo's listed defaults are its struct's.
        let p = resolve_params(&super::demo::Demo, false, &[]).unwrap();
        let q: super::demo::DemoParams = p.typed().unwrap();
        assert_eq!(q.rate, tcpaccel_core::units::Rate::mbps(300));
        assert_eq!(q.variants.len(), 4);
    }

    /// Every parameter of a typed scenario given a value of no form it
    /// takes is refused when the parameters are resolved (before anything
    /// runs), and the error names the key, the value and what it accepts.
    #[test]
    fn a_bad_value_is_refused_naming_the_key_and_the_accepted_form() {
        use crate::runner::scenario::resolve_params;
        // Free text, where any value is one: congestion control names and a log filter.
        const TEXT: [(&str, &str); 8] = [
            ("idle", "cc"),
            ("gather", "cc"),
            ("split", "relay_log"),
            ("lanes-basic", "cc"),
            ("lanes-buildup", "cc"),
            ("lanes-websearch", "cc"),
            ("lanes-datamining", "cc"),
            ("lanes-params", "cc"),
        ];
        let bad = "%bad%";
        let mut refused = 0;
        for s in super::all() {
            for spec in s.params() {
                match resolve_params(s.as_ref(), false, &[(spec.key.to_string(), bad.to_string())]) {
                    Ok(_) => {
                        assert!(
                            TEXT.contains(&(s.name(), spec.key)),
                            "{}: {}={bad} accepted",
                            s.name(),
                            spec.key
                        )
                    }
                    Err(e) => {
                        let e = format!("{e:#}");
                        let head = format!("parameter {}={bad:?}: ", spec.key);
                        assert!(e.starts_with(&head), "{}: {e}", s.name());
                        assert!(
                            e.contains("expected") || e.contains("accepted forms"),
                            "{}: no accepted form in {e}",
                            s.name()
                        );
                        refused += 1;
                    }
                }
            }
        }
        assert!(refused > 50, "{refused}");
        // The words for each kind of field.
        let e = |s: &dyn crate::runner::scenario::Scenario, k: &str, v: &str| {
            format!("{:#}", resolve_params(s, false, &[(k.into(), v.into())]).unwrap_err())
        };
        assert_eq!(
            e(&super::rto::Rto, "iterations", "many"),
            "parameter iterations=\"many\": expected a whole number"
        );
        let sizes = e(&super::rto::Rto, "sizes", "2KB,lots");
        assert!(sizes.starts_with("parameter sizes=\"2KB,lots\": cannot parse size \"lots\""), "{sizes}");
        assert!(sizes.contains("accepted forms: "), "{sizes}");
        let v = e(&super::pacing::Pacing, "variants", "static,psp");
        assert!(v.ends_with("unknown entry \"psp\"; expected a comma-separated list of: none, dynamic, dynamic-kernel, dynamic-loop, dynamic-bpf, dynamic-bpf-hold, static, static-1seg, static-precise, static-bpf, static-bpf-precise, bbr"), "{v}");
        let b = e(&super::split::Split, "buffers", "huge");
        assert_eq!(b, "parameter buffers=\"huge\": unknown variant `huge`, expected `centos6` or `kernel`");
        let segs = e(&super::pacing_cpu::PacingCpu, "precise_segs", "0");
        assert_eq!(segs, "parameter precise_segs=\"0\": expected auto or a whole number of at least 1");
        let off = e(&super::pacing_cpu::PacingCpu, "offloads", "maybe");
        assert!(off.starts_with("parameter offloads=\"maybe\": expected a boolean"), "{off}");
        let d = e(&super::demo::Demo, "duration", "long");
        assert!(d.starts_with("parameter duration=\"long\": ") && d.contains("accepted forms"), "{d}");
    }

    /// Scenarios share code through `engines/` and `testbeds/`, never
    /// through each other's files (the crate's doc says so; this holds it).
    #[test]
    fn no_scenario_imports_another_scenarios_file() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/scenarios");
        let modules = scenario_modules(&dir);
        assert!(modules.len() >= 10, "too few scenario modules read from mod.rs: {modules:?}");
        let mut files = Vec::new();
        rust_files(&dir, &mut files);
        let mut bad = Vec::new();
        for f in files {
            let rel = f.strip_prefix(&dir).unwrap();
            if rel == Path::new("mod.rs") {
                continue;
            }
            let top = rel.components().count() == 1;
            let own = rel.components().next().unwrap().as_os_str().to_string_lossy();
            let own = own.trim_end_matches(".rs");
            let text = std::fs::read_to_string(&f).unwrap();
            for m in foreign(&text, own, top, &modules) {
                bad.push(format!("{} imports scenario {m}", rel.display()));
            }
        }
        assert!(bad.is_empty(), "move what is shared into engines/ or testbeds/:\n{}", bad.join("\n"));
    }
}
