//! Rendering the doctor's findings for people (text) and programs (JSON
//! Lines with a `type` field).
//!
//! What it is: pure formatting of [`Facts`] and [`Finding`]s. What it is
//! not: it does not judge or decide the exit code.

use serde::Serialize;

use crate::facts::Facts;
use crate::judge::{describe_path, Finding, Severity};

/// Counts by severity, for the summary line and the JSON summary record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub critical: usize,
    pub warn: usize,
    pub unknown: usize,
    pub info: usize,
    pub ok: usize,
}

impl Counts {
    pub fn of(findings: &[Finding]) -> Counts {
        let mut c = Counts::default();
        for f in findings {
            match f.severity {
                Severity::Critical => c.critical += 1,
                Severity::Warn => c.warn += 1,
                Severity::Unknown => c.unknown += 1,
                Severity::Info => c.info += 1,
                Severity::Ok => c.ok += 1,
            }
        }
        c
    }
}

/// The text report: header, path, then findings worst first (stable within
/// a severity), each with its limit, cap and fix commands.
pub fn text(facts: &Facts, findings: &[Finding]) -> String {
    let mut s = String::new();
    let ns = facts.netns.as_deref();
    s.push_str(&format!("tcpaccel doctor — namespace: {}\n", ns.unwrap_or("(this one)")));
    s.push_str(&format!("path: {}\n", describe_path(facts)));
    if let Some(dev) = &facts.path.egress_dev {
        s.push_str(&format!("egress interface: {dev}\n"));
    }
    let mut order: Vec<&Finding> = findings.iter().collect();
    order.sort_by_key(|f| std::cmp::Reverse(f.severity));
    for f in order {
        s.push_str(&format!("{:<9} {:<28} {}\n", f.severity.label(), f.id, f.summary));
        let mut extra = Vec::new();
        if let Some(l) = &f.limits {
            if f.severity >= Severity::Warn {
                extra.push(format!("limits: {l}"));
            }
        }
        if let (Some(cap), Some(share)) = (f.cap, f.share) {
            if f.severity >= Severity::Warn {
                extra.push(format!("ceiling: {cap} ({:.0}% of the path)", share * 100.0));
            }
        }
        if !extra.is_empty() {
            s.push_str(&format!("{:<9} {:<28} {}\n", "", "", extra.join("; ")));
        }
        for fix in &f.fixes {
            let tag = if fix.automatic() { "fix:" } else { "advice:" };
            s.push_str(&format!("{:<9} {:<28} {tag} {}\n", "", "", fix.command(ns)));
        }
    }
    let c = Counts::of(findings);
    s.push_str(&format!(
        "summary: {} critical, {} warn, {} unknown, {} info, {} ok — verdict: {}\n",
        c.critical,
        c.warn,
        c.unknown,
        c.info,
        c.ok,
        crate::judge::verdict(findings).label()
    ));
    s
}

/// JSON Lines: one `facts` record, one `finding` record per finding, and a
/// `summary` record.
pub fn json_lines(facts: &Facts, findings: &[Finding], phase: &str) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    out.push(serde_json::json!({ "type": "facts", "phase": phase, "facts": facts }));
    for f in findings {
        let mut v = serde_json::to_value(f).unwrap_or(serde_json::Value::Null);
        if let Some(o) = v.as_object_mut() {
            o.insert("type".into(), "finding".into());
            o.insert("phase".into(), phase.into());
            let cmds: Vec<String> = f.fixes.iter().map(|x| x.command(facts.netns.as_deref())).collect();
            o.insert("commands".into(), cmds.into());
        }
        out.push(v);
    }
    out.push(serde_json::json!({
        "type": "summary",
        "phase": phase,
        "healthy": crate::judge::healthy(findings),
        "verdict": crate::judge::verdict(findings),
        "counts": Counts::of(findings),
        "path": describe_path(facts),
    }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{Fact, PathSpec};
    use crate::judge::judge;
    use std::time::Duration;
    use tcpaccel_core::units::Rate;

    fn facts() -> Facts {
        let mut f = Facts {
            netns: Some("lab".into()),
            path: PathSpec {
                rate: Some(Rate::gbps(1)),
                rtt: Some(Duration::from_millis(100)),
                rtt_source: Some("given".into()),
                egress_dev: None,
            },
            ..Default::default()
        };
        f.sysctls.insert("net.ipv4.tcp_rmem".into(), Fact::Known("4096 131072 6291456".into()));
        f
    }

    #[test]
    fn text_puts_the_worst_first_with_commands() {
        let f = facts();
        let fs = judge(&f);
        let t = text(&f, &fs);
        let first = t.lines().nth(2).unwrap();
        assert!(first.starts_with("CRITICAL"), "{t}");
        assert!(
            t.contains("fix: ip netns exec lab sysctl -w net.ipv4.tcp_rmem=\"4096 131072 25165824\""),
            "{t}"
        );
        assert!(t.contains("ceiling: 251.658Mbit/s (25% of the path)"), "{t}");
        assert!(t.contains("verdict: unhealthy"), "{t}");
        assert!(t.contains("BDP 12.5MB"), "{t}");
    }

    /// Issue 14 item 9: a report of unreadable facts says "unknown", not healthy.
    #[test]
    fn unreadable_facts_report_unknown_not_healthy() {
        let mut f = Facts::default();
        for k in crate::facts::SYSCTLS {
            f.sysctls.insert(k.to_string(), Fact::Unknown("permission denied".into()));
        }
        let fs = judge(&f);
        let sum = json_lines(&f, &fs, "before").pop().unwrap();
        assert_eq!(sum["healthy"], false);
        assert_eq!(sum["verdict"], "unknown");
        assert!(text(&f, &fs).contains("verdict: unknown"));
    }

    #[test]
    fn json_lines_have_types() {
        let f = facts();
        let fs = judge(&f);
        let lines = json_lines(&f, &fs, "before");
        assert_eq!(lines[0]["type"], "facts");
        assert_eq!(lines.last().unwrap()["type"], "summary");
        assert_eq!(lines.last().unwrap()["healthy"], false);
        assert_eq!(lines.last().unwrap()["verdict"], "unhealthy");
        assert!(lines[1..lines.len() - 1].iter().all(|l| l["type"] == "finding"));
        let rmem = lines.iter().find(|l| l["id"] == "tcp_rmem").unwrap();
        assert_eq!(rmem["severity"], "critical");
        assert_eq!(
            rmem["commands"][0],
            "ip netns exec lab sysctl -w net.ipv4.tcp_rmem=\"4096 131072 25165824\""
        );
    }
}
