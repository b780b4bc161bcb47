//! `tcpaccel lab` from the outside: bad input, a quick real run in network
//! namespaces (root, as in CI), and re-rendering a copied run directory.

use std::process::Command;

mod common;
use common::bin;

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("tcpaccel-labcli-{name}-{}", std::process::id()))
}

/// `tcpaccel doctor --json | head -0`: a reader that closes its end early is
/// not an error — no panic message, exit 0 (it used to panic with 101).
#[test]
fn a_closed_stdout_ends_quietly() {
    for args in [&["doctor", "--json"][..], &["lab", "list"][..]] {
        let mut child = Command::new(bin())
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // the reader goes away before anything is written
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
}

#[test]
fn list_is_json_lines() {
    let out = Command::new(bin()).args(["lab", "list", "--json"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let names: Vec<String> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|v| {
            assert_eq!(v["type"], "scenario");
            v["name"].as_str().unwrap().to_string()
        })
        .collect();
    assert!(names.contains(&"demo".to_string()), "{names:?}");
}

#[test]
fn unknown_scenario_and_key_are_usage_errors_listing_valid_ones() {
    let out = Command::new(bin()).args(["lab", "run", "nosuch"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nosuch") && err.contains("demo"), "{err}");

    let out = Command::new(bin()).args(["lab", "run", "demo", "--set", "colour=blue"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("colour") && err.contains("rate (default"), "{err}");

    let out = Command::new(bin()).args(["lab", "report", "/nonexistent-tcpaccel-dir"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// A `--set` value of no form its parameter takes is a usage error naming
/// the key, the value and the accepted form, before anything runs (and
/// before the root check, so it holds for any user).
#[test]
fn a_bad_set_value_is_a_usage_error_naming_the_key_and_the_form() {
    for (name, set, want) in [
        ("pacing", "rate=fast", "parameter rate=\"fast\": cannot parse rate \"fast\""),
        (
            "split",
            "buffers=huge",
            "parameter buffers=\"huge\": unknown variant `huge`, expected `centos6` or `kernel`",
        ),
        ("rto", "iterations=many", "parameter iterations=\"many\": expected a whole number"),
    ] {
        let out = Command::new(bin()).args(["lab", "run", name, "--set", set]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name} {set}: {err}");
        assert!(err.contains(want), "{name} {set}: {err}");
    }
    let out = Command::new(bin()).args(["lab", "run", "pacing", "--set", "rate=fast"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("accepted forms: "));
}

/// A run directory holding a header (seed, D) and mptcp's short flows of
/// the given experiment-unit FCTs, written as `lab run` writes them.
fn compare_dir(name: &str, seed: u64, scale: u32, fct_ms: &[f64]) -> std::path::PathBuf {
    let dir = tmp(name);
    std::fs::create_dir_all(&dir).unwrap();
    let header = serde_json::json!({"type": "run", "version": 1, "scenario": "lanes-websearch", "title": "t",
        "description": "d", "params": {"scale": scale.to_string(), "loads": "0.5"}, "variants": ["mptcp"],
        "repeats": 1, "quick": false, "seed": seed, "kernel": "6.18", "cpus": 2, "tool_version": "0",
        "started": 0.0, "metrics": [], "published": []});
    let mut text = format!("{header}\n");
    for (id, ms) in fct_ms.iter().enumerate() {
        let flow = serde_json::json!({"type": "flow", "variant": "mptcp", "repeat": 0, "id": id,
            "class": "short (≤100 KB) @0.5", "bytes": 1000 + id, "start": 0.0, "fct_ms": ms * scale as f64,
            "completed": true, "exp_start": 0.0, "exp_fct_ms": ms});
        text.push_str(&format!("{flow}\n"));
    }
    std::fs::write(dir.join("records.jsonl"), text).unwrap();
    dir
}

/// `lab compare` on two hand-written run directories: the table, the JSON,
/// and a pair of different seeds refused with exit 2 naming both.
#[test]
fn compare_sets_two_scales_side_by_side_and_refuses_different_seeds() {
    let a = compare_dir("cmp-a", 1, 16, &[1.0, 2.0, 3.0, 4.0]);
    let b = compare_dir("cmp-b", 1, 64, &[1.0, 2.0, 3.0, 4.4]);
    let compare = |extra: &[&str], base: &std::path::Path, against: &std::path::Path| {
        Command::new(bin())
            .args(["lab", "compare"])
            .args(extra)
            .arg("--base")
            .arg(base)
            .arg("--against")
            .arg(against)
            .output()
            .unwrap()
    };
    let out = compare(&[], &a, &b);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("base D = 16 against D = 64"), "{text}");
    // The difference, then its bootstrap interval over the four flows.
    assert!(text.contains("| mptcp | seed 1 | 4 / 4 | 2.50 / 2.60 | +4.0% ["), "{text}");
    assert!(text.contains("missed: p99, KS"), "{text}");

    let out = compare(&["--json"], &a, &b);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["rows"][0]["ks"], 0.25);
    assert_eq!(v["other_scales"][0], 64);
    // Four flows, fewer than one bootstrap block: every resample is the
    // run itself, so the interval is the difference.
    let ci = &v["rows"][0]["mean_diff_ci_pct"];
    assert!(
        (ci[0].as_f64().unwrap() - 4.0).abs() < 1e-9 && (ci[1].as_f64().unwrap() - 4.0).abs() < 1e-9,
        "{ci}"
    );

    let c = compare_dir("cmp-c", 2, 64, &[1.0, 2.0, 3.0, 4.0]);
    let out = compare(&[], &a, &c);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("seed 1 against 2"), "{err}");
    for d in [a, b, c] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

/// One shard of a two-variant run as `lab run --shard I/2` writes it:
/// shard 0 ran variant a, shard 1 variant b.
fn shard_dir(i: u32) -> std::path::PathBuf {
    let dir = tmp(&format!("shard-{i}"));
    std::fs::create_dir_all(&dir).unwrap();
    let v = ["a", "b"][i as usize];
    let lines = [
        serde_json::json!({"type": "run", "version": 1, "scenario": "toy", "title": "t", "description": "d",
            "params": {}, "variants": ["a", "b"], "repeats": 1, "quick": false, "seed": 3, "kernel": "6.18",
            "cpus": 2, "tool_version": "0", "started": 10.0 + i as f64, "metrics": [], "published": [],
            "shard": {"index": i, "count": 2}}),
        serde_json::json!({"type": "flow", "variant": v, "repeat": 0, "id": 1, "class": "short", "bytes": 10,
            "start": 0.0, "fct_ms": 1.0, "completed": true}),
        serde_json::json!({"type": "summary", "variant": v, "repeat": 0, "metrics": {}, "started": 0.0,
            "ended": 1.0}),
        serde_json::json!({"type": "end", "complete": true, "ended": 20.0, "reason": "all repeats done"}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join("records.jsonl"), text).unwrap();
    dir
}

/// `lab merge` joins both shards into one complete run with its report; a
/// shard missing or a malformed `--shard` is a usage error that says which.
#[test]
fn merge_joins_shards_and_names_what_is_missing() {
    let (s0, s1, out) = (shard_dir(0), shard_dir(1), tmp("merged"));
    let merge = |dirs: &[&std::path::Path]| {
        Command::new(bin()).args(["lab", "merge", "--json", "--out"]).arg(&out).args(dirs).output().unwrap()
    };
    let o = merge(&[&s1, &s0]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let records = std::fs::read_to_string(out.join("records.jsonl")).unwrap();
    let variants: Vec<String> = records
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["type"] == "flow")
        .map(|v| v["variant"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(variants, ["a", "b"], "in the unsharded run's order");
    assert!(!records.lines().next().unwrap().contains("shard"), "the merged header is a whole run's");
    assert!(out.join("index.html").exists());

    let o = merge(&[&s1]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("missing [0]"), "{err}");

    let o = Command::new(bin()).args(["lab", "run", "demo", "--shard", "2/2"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("\"2/2\"") && err.contains("0 ≤ I < N"), "{err}");
    for d in [s0, s1, out] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

/// Root: a tiny real run (two variants, 2 s each) through the emulator yields a
/// complete record set, and its copy renders the same tables.
#[test]
fn root_quick_run_in_namespaces_gives_complete_records() {
    tcpaccel_sys::testing::require_root();
    let out_dir = tmp("quick");
    let _ = std::fs::remove_dir_all(&out_dir);
    let out = Command::new(bin())
        .args(["lab", "run", "demo", "--quick", "--json", "--set", "duration=2s", "--set"])
        .arg("variants=defaults,static-pacing")
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "lab run failed: {}", String::from_utf8_lossy(&out.stderr));
    let recs = std::fs::read_to_string(out_dir.join("records.jsonl")).unwrap();
    let types: Vec<String> = recs
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(types.first().map(String::as_str), Some("run"));
    assert_eq!(types.last().map(String::as_str), Some("end"));
    assert_eq!(types.iter().filter(|t| *t == "summary").count(), 2);
    assert!(types.iter().any(|t| t == "sample"));
    let end: serde_json::Value = serde_json::from_str(recs.lines().last().unwrap()).unwrap();
    assert_eq!(end["complete"], true);
    // Both variants moved data; the paced one cannot have overflowed a 1 MB buffer at 100 Mbit/s.
    for l in recs.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        if v["type"] == "summary" {
            assert!(v["metrics"]["goodput_mbps"].as_f64().unwrap() > 10.0, "{v}");
            if v["variant"] == "static-pacing" {
                assert_eq!(v["metrics"]["drops"].as_f64(), Some(0.0), "{v}");
            }
        }
    }
    assert!(out_dir.join("index.html").exists());
    let first = std::fs::read_to_string(out_dir.join("summary.md")).unwrap();

    // Rendering depends on the records alone.
    let copy = tmp("quick-copy");
    let _ = std::fs::remove_dir_all(&copy);
    std::fs::create_dir_all(&copy).unwrap();
    std::fs::copy(out_dir.join("records.jsonl"), copy.join("records.jsonl")).unwrap();
    let out = Command::new(bin()).args(["lab", "report"]).arg(&copy).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(copy.join("summary.md")).unwrap(), first);
    let page = std::fs::read_to_string(copy.join("index.html")).unwrap();
    assert!(page.matches("<svg").count() >= 5, "plots missing from the copied report");
    let _ = std::fs::remove_dir_all(&out_dir);
    let _ = std::fs::remove_dir_all(&copy);
}

/// The lanes datacenter end to end (fabric, flow engine, daemons): pure MPTCP
/// spreads one long transfer over the three fabrics; the deadline policy
/// starts it on SL and moves it to the two LLs after about t_deadline.
#[test]
fn root_lanes_basic_quick_run_moves_a_long_flow_off_sl() {
    tcpaccel_sys::testing::require_root();
    let out_dir = tmp("lanes");
    let _ = std::fs::remove_dir_all(&out_dir);
    let out = Command::new(bin())
        .args(["lab", "run", "lanes-basic", "--quick", "--json", "--set", "variants=mptcp,deadline", "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "lab run failed: {}", String::from_utf8_lossy(&out.stderr));
    let recs = std::fs::read_to_string(out_dir.join("records.jsonl")).unwrap();
    let mut seen = 0;
    for l in recs.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        if v["type"] != "summary" {
            continue;
        }
        seen += 1;
        let m = &v["metrics"];
        let sl = m["sl_share_pct"].as_f64().unwrap();
        let goodput = m["goodput_mbps"].as_f64().unwrap();
        // --quick links run at 50 Mbit/s.
        match v["variant"].as_str().unwrap() {
            "mptcp" => {
                assert!((15.0..=50.0).contains(&sl), "MPTCP should use every fabric: {v}");
                assert!(goodput > 60.0, "MPTCP over three 50 Mbit/s paths: {v}");
            }
            "deadline" => {
                let at = m["switch_ms"].as_f64().unwrap();
                assert!((250.0..2000.0).contains(&at), "switch at {at} ms for a 300 ms deadline: {v}");
                assert!(sl < 40.0, "after the switch most bytes should leave SL: {v}");
                assert!(goodput > 30.0, "{v}");
            }
            other => panic!("unexpected variant {other}"),
        }
    }
    assert_eq!(seen, 2);
    let _ = std::fs::remove_dir_all(&out_dir);
}

/// A complete demo run of two variants as `lab run demo --repeat 2 --set
/// duration=6s --set variants=defaults,static-pacing` writes it, figures made up.
fn demo_dir(name: &str) -> std::path::PathBuf {
    let dir = tmp(name);
    std::fs::create_dir_all(&dir).unwrap();
    let params = serde_json::json!({"rate": "300mbit", "rtt": "100ms", "buffer": "1MB", "duration": "6s",
        "variants": "defaults,static-pacing"});
    let mut lines = vec![serde_json::json!({"type": "run", "version": 1, "scenario": "demo", "title": "t",
        "description": "d", "params": params, "variants": ["defaults", "static-pacing"], "repeats": 2,
        "quick": false, "seed": 1, "kernel": "6.18", "cpus": 2, "tool_version": "0", "started": 0.0,
        "metrics": [{"name": "goodput_mbps", "unit": "Mbit/s", "higher_is_better": true, "description": ""},
                    {"name": "drops", "unit": "packets", "higher_is_better": false, "description": ""}],
        "published": []})];
    for (v, g, d) in
        [("defaults", [180.0, 190.0], [900.0, 1000.0]), ("static-pacing", [270.0, 274.0], [0.0, 0.0])]
    {
        for r in 0..2 {
            lines.push(serde_json::json!({"type": "summary", "variant": v, "repeat": r,
                "metrics": {"goodput_mbps": g[r], "drops": d[r]}, "started": 0.0, "ended": 1.0}));
        }
    }
    lines.push(
        serde_json::json!({"type": "end", "complete": true, "ended": 2.0, "reason": "all repeats done"}),
    );
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join("records.jsonl"), text).unwrap();
    dir
}

/// `lab results`: summarize a run directory, write a page's block from the
/// summary, check it (exit 0), then a figure changed by hand on the page
/// fails the check (exit 1) naming the block and the line.
#[test]
fn results_summarize_write_and_check_a_page() {
    let run = demo_dir("results-run");
    let out = Command::new(bin()).args(["lab", "results", "--summarize"]).arg(&run).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["command"], "lab run demo --repeat 2 --set duration=6s --set variants=defaults,static-pacing",
        "{v}"
    );
    assert_eq!(v["variants"][1]["cells"]["goodput_mbps"]["spread"]["median"], 272.0);
    let dir = tmp("results-dir");
    std::fs::create_dir_all(dir.join("results")).unwrap();
    std::fs::write(dir.join("results/demo.json"), &out.stdout).unwrap();
    let page = dir.join("PAGE.md");
    std::fs::write(
        &page,
        "# P\n\n<!-- results:begin demo metrics=goodput_mbps -->\n<!-- results:end demo -->\n",
    )
    .unwrap();
    let lab = |args: &[&str]| {
        Command::new(bin()).current_dir(&dir).arg("lab").arg("results").args(args).output().unwrap()
    };

    let out = lab(&["--check", "PAGE.md"]);
    assert_eq!(out.status.code(), Some(1), "an empty block is stale");
    let out = lab(&["--write", "PAGE.md"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&page).unwrap();
    assert!(text.contains("| static-pacing | 272 (270–274) |\n"), "{text}");
    // The demo's claims judged: no drops met; the ratio to bdp-buffers unknown (not run).
    assert!(text.contains("| static-pacing | 0 | 0 ([PSPacer]: PSPS 0 drops) |"), "{text}");
    assert!(text.contains("| — (no goodput_mbps for variant bdp-buffers in this run) |"), "{text}");
    let out = lab(&["--check", "PAGE.md"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    std::fs::write(&page, text.replace("272 (270–274)", "275 (270–274)")).unwrap();
    let out = lab(&["--check", "PAGE.md"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("PAGE.md: block demo (line 3) differs from its results at line"), "{err}");
    assert!(err.contains("275 (270–274)") && err.contains("272 (270–274)"), "{err}");

    // A block for a scenario without a summary is a usage error naming it.
    std::fs::write(&page, "<!-- results:begin idle -->\n<!-- results:end idle -->\n").unwrap();
    let out = lab(&["--check", "PAGE.md"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("line 1: block idle: there is no results/idle.json"), "{err}");
    for d in [run, dir] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

/// A second run of a scenario on one page: its summary, trimmed to the
/// metrics shown with `--metrics`, is `results/SCENARIO.LABEL.json`, and a
/// block shows it with the claims it picks; a file named after another
/// scenario is refused naming the rule.
#[test]
fn results_labelled_and_trimmed_summaries() {
    let run = demo_dir("results-label-run");
    let sum = |extra: &[&str]| {
        Command::new(bin()).args(["lab", "results", "--summarize"]).arg(&run).args(extra).output().unwrap()
    };
    let out = sum(&["--metrics", "goodput_mbps,nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no metric \"nope\""));
    let out = sum(&["--metrics", "goodput_mbps"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["metrics"].as_array().unwrap().len(), 1, "{v}");
    assert!(v["claims"].as_array().unwrap().len() >= 2, "claims stay: {v}");
    let dir = tmp("results-label-dir");
    std::fs::create_dir_all(dir.join("results")).unwrap();
    std::fs::write(dir.join("results/demo.short.json"), &out.stdout).unwrap();
    let page = dir.join("PAGE.md");
    std::fs::write(&page, "<!-- results:begin demo.short claims=none -->\n<!-- results:end demo.short -->\n")
        .unwrap();
    let lab = |args: &[&str]| {
        Command::new(bin()).current_dir(&dir).arg("lab").arg("results").args(args).output().unwrap()
    };
    let out = lab(&["--write", "PAGE.md"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&page).unwrap();
    assert!(text.contains("| static-pacing | 272 (270–274) |\n"), "{text}");
    assert!(!text.contains("| claim |"), "claims=none shows no claims: {text}");
    assert_eq!(lab(&["--check", "PAGE.md"]).status.code(), Some(0));
    let out = lab(&["demo.short"]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("<!-- results:begin demo.short -->"));

    std::fs::rename(dir.join("results/demo.short.json"), dir.join("results/idle.json")).unwrap();
    let out = lab(&["--check", "PAGE.md"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("holds scenario \"demo\"") && err.contains("demo.LABEL.json"), "{err}");
    for d in [run, dir] {
        std::fs::remove_dir_all(d).unwrap();
    }
}
