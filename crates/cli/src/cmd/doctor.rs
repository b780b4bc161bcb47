//! `tcpaccel doctor`: what limits TCP on this host for a given path, by how
//! much, and the exact commands that fix it; `--apply` makes the automatic
//! fixes (saving the old values), `--revert` puts them back.
//!
//! The judgement is `tcpaccel_tune::judge` (pure); this file only reads
//! flags, collects facts, prints and maps failures to exit codes. Exit 0
//! only for a healthy verdict (every finding checked, none at warn or
//! worse); exit 1 when a finding is at warn or worse or when facts could not
//! be read (verdict "unknown"); after `--apply` judged on the new state. A
//! namespace that is missing (2) or cannot be entered without privilege (3)
//! fails before any report is printed.

use std::net::ToSocketAddrs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use tcpaccel_core::units::Rate;
use tcpaccel_tune::apply::{self, ApplyError, Saved};
use tcpaccel_tune::collect::{self, CollectError, Probe};
use tcpaccel_tune::facts::{Fact, Facts, PathSpec};
use tcpaccel_tune::judge::{self, Finding};
use tcpaccel_tune::report;

use crate::cmd::values;
use crate::exit::{self, Fail, Verdict};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Bottleneck rate of the path, e.g. 1Gbit, 500mbit.
    // Hyphen values reach our parser, which names a negative value, instead
    // of clap reporting it as an unknown flag.
    #[arg(long, allow_hyphen_values = true, value_parser = values::rate)]
    rate: Option<Rate>,
    /// Round-trip time of the path, e.g. 100ms (measured with --target if omitted).
    #[arg(long, allow_hyphen_values = true, value_parser = values::duration)]
    rtt: Option<Duration>,
    /// HOST:PORT: measure the RTT by TCP handshakes (median) and read the
    /// limit counters of live connections to it.
    #[arg(long)]
    target: Option<String>,
    /// Also measure goodput by sending to a `tcpaccel recv` at --target for
    /// this long (e.g. 3s), and read that transfer's limit counters.
    #[arg(long, requires = "target", allow_hyphen_values = true, value_parser = values::duration)]
    bandwidth: Option<Duration>,
    /// Number of handshakes for the --target RTT.
    #[arg(long, default_value_t = 5)]
    handshakes: usize,
    /// Examine (and fix) this network namespace instead of the current one.
    #[arg(long, conflicts_with = "node")]
    netns: Option<String>,
    #[command(flatten)]
    node: crate::cmd::trace::NodeArgs,
    /// JSON Lines on stdout (records typed facts / finding / summary / applied).
    #[arg(long)]
    json: bool,
    /// Apply the automatic fixes (sysctls, txqueuelen); needs root.
    #[arg(long)]
    apply: bool,
    /// Where --apply saves the old values (default: ./tcpaccel-doctor-saved-<time>.json).
    #[arg(long, requires = "apply")]
    save: Option<PathBuf>,
    /// Restore the values saved by an earlier --apply, exactly; needs root.
    /// Refuses (changing nothing) when a value was changed since --apply.
    #[arg(long, conflicts_with_all = ["apply", "rate", "rtt", "target", "netns", "node"])]
    revert: Option<PathBuf>,
    /// With --revert: restore even values that were changed since --apply.
    #[arg(long, requires = "revert")]
    force: bool,
}

fn apply_err(e: ApplyError) -> anyhow::Error {
    match e {
        ApplyError::Privilege { .. } => anyhow::Error::new(Fail::Privilege(e.to_string())),
        ApplyError::NoNamespace(_) | ApplyError::BadSaved(_) => exit::usage(e.to_string()),
        e => anyhow::Error::new(e),
    }
}

/// Namespace problems: missing is a usage error (2), no right to enter it
/// is missing privilege (3), anything else a runtime failure (5).
fn collect_err(e: CollectError) -> anyhow::Error {
    match e {
        CollectError::NoNamespace(_) => exit::usage(e.to_string()),
        CollectError::Privilege { .. } => anyhow::Error::new(Fail::Privilege(e.to_string())),
        e => anyhow::Error::new(e),
    }
}

fn emit(json: bool, facts: &Facts, findings: &[Finding], phase: &str) {
    if json {
        for v in report::json_lines(facts, findings, phase) {
            println!("{v}");
        }
    } else {
        print!("{}", report::text(facts, findings));
    }
}

fn revert(file: &Path, force: bool, json: bool) -> anyhow::Result<Verdict> {
    exit::require_root("doctor --revert")?;
    // A missing or unreadable state file is a bad argument, not a failure
    // of the host: exit 2, naming the file.
    let text = std::fs::read_to_string(file).map_err(|e| {
        exit::usage(format!("--revert {}: cannot read the saved-state file: {e}", file.display()))
    })?;
    let saved: Saved = serde_json::from_str(&text).map_err(|e| {
        exit::usage(format!("--revert {}: not a doctor saved-state file: {e}", file.display()))
    })?;
    // A second --revert: nothing left to do, and nothing wrong.
    if apply::restored(&saved).map_err(apply_err)? {
        if json {
            println!(
                "{}",
                serde_json::json!({ "type": "reverted", "file": file, "netns": saved.netns, "restored": [], "already_restored": true })
            );
        } else {
            println!(
                "already restored: every value saved in {} holds its old value again (namespace {}); nothing to do",
                file.display(),
                saved.netns.as_deref().unwrap_or("(this one)")
            );
        }
        return Ok(Verdict::Ok);
    }
    // Someone (or something) may have changed a value since --apply:
    // restoring would silently undo their change. Refuse unless forced.
    let changed = apply::changed_since(&saved).map_err(apply_err)?;
    if !changed.is_empty() {
        for c in &changed {
            eprintln!("tcpaccel: warning: {c}");
        }
        if !force {
            return Err(exit::usage(format!(
                "{} value(s) changed since --apply ({}); nothing restored. Rerun with --force to restore the saved values anyway",
                changed.len(),
                file.display()
            )));
        }
    }
    let restored = apply::revert(&saved).map_err(apply_err)?;
    if json {
        println!(
            "{}",
            serde_json::json!({ "type": "reverted", "file": file, "netns": saved.netns, "restored": restored })
        );
    } else {
        println!(
            "restored {} value(s) in namespace {} from {}:",
            restored.len(),
            saved.netns.as_deref().unwrap_or("(this one)"),
            file.display()
        );
        for r in restored {
            println!("  {r}");
        }
    }
    Ok(Verdict::Ok)
}

fn default_save_path() -> PathBuf {
    let secs =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    PathBuf::from(format!("tcpaccel-doctor-saved-{secs}.json"))
}

pub(crate) fn run(mut args: Args) -> anyhow::Result<Verdict> {
    args.netns = args.node.netns(args.netns.take())?;
    if let Some(file) = &args.revert {
        return revert(file, args.force, args.json);
    }
    // Privilege first: --apply must fail before it reads or changes anything.
    if args.apply {
        exit::require_root("doctor --apply")?;
    }
    let (rate, rtt) = (args.rate, args.rtt);
    if let Some(ns) = &args.netns {
        // Before anything else: no report of a namespace that is not there.
        if !tcpaccel_sys::netns::exists(ns) {
            return Err(exit::usage(format!(
                "--netns {ns:?}: network namespace not found (looked in /run/netns)"
            )));
        }
    }
    if rtt == Some(Duration::ZERO) {
        return Err(exit::usage("--rtt must be above zero"));
    }
    let mut target_problem = None;
    let target = match args.target.as_deref() {
        None => None,
        Some(t) => {
            if !t.contains(':') {
                return Err(exit::usage(format!("--target {t:?}: expected HOST:PORT")));
            }
            match t.to_socket_addrs().map(|mut a| a.next()) {
                Ok(Some(a)) => Some(a),
                Ok(None) => {
                    target_problem = Some(format!("{t} resolves to no address"));
                    None
                }
                Err(e) => {
                    target_problem = Some(format!("cannot resolve {t}: {e}"));
                    None
                }
            }
        }
    };
    let path = PathSpec { rate, rtt, rtt_source: rtt.map(|_| "given".to_string()), egress_dev: None };
    let bandwidth = args.bandwidth;
    let probe =
        Probe { target, handshakes: args.handshakes.max(1), timeout: Duration::from_secs(2), bandwidth };
    let netns = args.netns.as_deref();

    // Prepare the save file before anything changes, so a bad path fails early.
    let save_path = args.apply.then(|| args.save.clone().unwrap_or_else(default_save_path));
    if let Some(p) = &save_path {
        if p.exists() {
            return Err(exit::usage(format!("{} exists; refusing to overwrite saved state", p.display())));
        }
        std::fs::write(p, b"").with_context(|| format!("creating {}", p.display()))?;
    }
    let cleanup = |p: &Option<PathBuf>| {
        if let Some(p) = p {
            let _ = std::fs::remove_file(p);
        }
    };

    let mut facts = match collect::collect(netns, path.clone(), &probe) {
        Ok(f) => f,
        Err(e) => {
            cleanup(&save_path);
            return Err(collect_err(e));
        }
    };
    if let Some(p) = target_problem {
        facts.target = Some(Fact::Unknown(p));
    }
    let findings = judge::judge(&facts);
    emit(args.json, &facts, &findings, "before");
    if !args.apply {
        return Ok(if judge::healthy(&findings) { Verdict::Ok } else { Verdict::Negative });
    }

    let plan = apply::plan(&findings);
    let save_path = save_path.unwrap_or_else(default_save_path);
    if plan.is_empty() {
        cleanup(&Some(save_path));
        if args.json {
            println!("{}", serde_json::json!({ "type": "applied", "changes": 0 }));
        } else {
            println!("nothing to apply automatically");
        }
        return Ok(if judge::healthy(&findings) { Verdict::Ok } else { Verdict::Negative });
    }
    let saved = match apply::apply(netns, &plan) {
        Ok(s) => s,
        Err(e) => {
            cleanup(&Some(save_path));
            return Err(apply_err(e));
        }
    };
    let body = serde_json::to_string_pretty(&saved).context("encoding saved state")?;
    if let Err(e) = std::fs::write(&save_path, body) {
        // Without the saved state nobody could revert: undo now.
        let undo = apply::revert(&saved);
        return Err(anyhow::Error::new(e).context(format!(
            "writing {} (changes undone: {})",
            save_path.display(),
            undo.is_ok()
        )));
    }
    let changes = saved.sysctls.len() + saved.txqueuelen.len();
    if args.json {
        println!(
            "{}",
            serde_json::json!({ "type": "applied", "changes": changes, "file": save_path, "saved": saved })
        );
    } else {
        println!("applied {changes} change(s):");
        for s in &saved.sysctls {
            println!("  {} = {}   (was {})", s.key, s.new, s.old);
        }
        for q in &saved.txqueuelen {
            println!("  {} txqueuelen {}   (was {})", q.dev, q.new, q.old);
        }
        println!(
            "saved the old values to {}; undo with: tcpaccel doctor --revert {}",
            save_path.display(),
            save_path.display()
        );
        println!();
    }
    // Judged again on the same path; with --bandwidth the transfer is
    // measured again, so before and after sit side by side.
    let after_probe = if probe.bandwidth.is_some() { probe.clone() } else { Probe { target: None, ..probe } };
    let after = collect::collect(netns, facts.path.clone(), &after_probe).map_err(collect_err)?;
    let after_findings = judge::judge(&after);
    emit(args.json, &after, &after_findings, "after");
    Ok(if judge::healthy(&after_findings) { Verdict::Ok } else { Verdict::Negative })
}
