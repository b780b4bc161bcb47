//! Applying the doctor's automatic fixes and reverting them exactly.
//!
//! What it is: a [`Plan`] built purely from findings (sysctls and interface
//! queue lengths), an [`apply`] that first reads every old value and opens
//! every sysctl for writing — so a missing privilege fails before anything
//! changes — then writes, rolling back what it wrote if a later write
//! fails; and a [`revert`] that restores a [`Saved`] state file value by
//! value. Both act in the calling thread's namespace or in a named one.
//!
//! What it is not: route changes, qdisc changes and MTU changes are advice
//! only (see [`crate::judge::Fix::Advice`]); they are never applied here.

use serde::{Deserialize, Serialize};

use tcpaccel_sys::sysctl::{self, SysctlError};

use crate::collect::read_sysctl;
use crate::facts::Fact;
use crate::judge::{Finding, Fix};

/// Format version of the saved-state file.
pub const SAVED_VERSION: u32 = 1;

/// The automatic changes to make, deduplicated (first fix of a key wins).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub sysctls: Vec<(String, String)>,
    pub txqueuelen: Vec<(String, u32)>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.sysctls.is_empty() && self.txqueuelen.is_empty()
    }
}

/// Collects the automatic fixes of `findings`.
pub fn plan(findings: &[Finding]) -> Plan {
    let mut p = Plan::default();
    for fix in findings.iter().flat_map(|f| f.fixes.iter()) {
        match fix {
            Fix::Sysctl { key, value } => {
                if !p.sysctls.iter().any(|(k, _)| k == key) {
                    p.sysctls.push((key.clone(), value.clone()));
                }
            }
            Fix::Txqueuelen { dev, value } => {
                if !p.txqueuelen.iter().any(|(d, _)| d == dev) {
                    p.txqueuelen.push((dev.clone(), *value));
                }
            }
            Fix::Advice { .. } => {}
        }
    }
    p
}

/// One changed sysctl: its value before and after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedSysctl {
    pub key: String,
    pub old: String,
    pub new: String,
}

/// One changed interface queue length.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedQueue {
    pub dev: String,
    pub old: u32,
    pub new: u32,
}

/// What `--apply` changed, enough to put it all back (`--revert`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Saved {
    pub version: u32,
    /// Namespace the changes were made in (`None`: the doctor's own).
    pub netns: Option<String>,
    pub sysctls: Vec<SavedSysctl>,
    pub txqueuelen: Vec<SavedQueue>,
}

/// Why applying or reverting failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("writing {what} needs root (CAP_NET_ADMIN in the namespace): {source}")]
    Privilege { what: String, source: std::io::Error },
    #[error("{what}: {msg}")]
    Failed { what: String, msg: String },
    #[error("network namespace {0:?} not found (looked in /run/netns)")]
    NoNamespace(String),
    #[error("saved state: {0}")]
    BadSaved(String),
}

fn sysctl_err(what: String, e: SysctlError) -> ApplyError {
    match e {
        SysctlError::Privilege { err, .. } => ApplyError::Privilege { what, source: err },
        e => ApplyError::Failed { what, msg: e.to_string() },
    }
}

fn open_sysctl(key: &str) -> Result<sysctl::Writer, ApplyError> {
    sysctl::open_write(key).map_err(|e| sysctl_err(key.to_string(), e))
}

fn write_open(f: sysctl::Writer, key: &str, value: &str) -> Result<(), ApplyError> {
    f.set(value).map_err(|e| sysctl_err(format!("{key}={value}"), e))
}

/// Writes one sysctl in the calling thread's namespace.
pub fn write_sysctl(key: &str, value: &str) -> Result<(), ApplyError> {
    let f = open_sysctl(key)?;
    write_open(f, key, value)
}

fn txqueuelen_of(dev: &str) -> Result<u32, ApplyError> {
    let v = crate::collect::ip_json(&["link", "show", "dev", dev])
        .map_err(|msg| ApplyError::Failed { what: format!("ip link show dev {dev}"), msg })?;
    v.get(0)
        .and_then(|l| l.get("txqlen"))
        .and_then(|q| q.as_u64())
        .map(|q| q.min(u32::MAX as u64) as u32)
        .ok_or_else(|| ApplyError::Failed {
            what: format!("txqueuelen of {dev}"),
            msg: "not reported".into(),
        })
}

fn set_txqueuelen(dev: &str, q: u32) -> Result<(), ApplyError> {
    let what = format!("ip link set dev {dev} txqueuelen {q}");
    match tcpaccel_sys::command::ip(&["link", "set", "dev", dev, "txqueuelen", &q.to_string()]) {
        Ok(_) => Ok(()),
        Err(e) if e.is_privilege() => {
            Err(ApplyError::Privilege { what, source: std::io::Error::from_raw_os_error(1 /* EPERM */) })
        }
        Err(e) => Err(ApplyError::Failed { what, msg: e.to_string() }),
    }
}

/// Applies `plan` in the calling thread's namespace.
pub fn apply_here(plan: &Plan) -> Result<Saved, ApplyError> {
    // 1. Read every old value; an unreadable one aborts before any change.
    let mut saved =
        Saved { version: SAVED_VERSION, netns: None, sysctls: Vec::new(), txqueuelen: Vec::new() };
    for (key, new) in &plan.sysctls {
        match read_sysctl(key) {
            Fact::Known(old) => saved.sysctls.push(SavedSysctl { key: key.clone(), old, new: new.clone() }),
            Fact::Unknown(why) => return Err(ApplyError::Failed { what: format!("read {key}"), msg: why }),
        }
    }
    for (dev, new) in &plan.txqueuelen {
        saved.txqueuelen.push(SavedQueue { dev: dev.clone(), old: txqueuelen_of(dev)?, new: *new });
    }
    // 2. Open every sysctl for writing: permission problems surface here.
    let files = plan.sysctls.iter().map(|(k, _)| open_sysctl(k)).collect::<Result<Vec<_>, _>>()?;
    // 3. Write; on failure, put back what was already written.
    let mut done = 0;
    for (f, s) in files.into_iter().zip(&saved.sysctls) {
        if let Err(e) = write_open(f, &s.key, &s.new) {
            rollback(&saved, done, 0);
            return Err(e);
        }
        done += 1;
    }
    for (i, q) in saved.txqueuelen.iter().enumerate() {
        if let Err(e) = set_txqueuelen(&q.dev, q.new) {
            rollback(&saved, done, i);
            return Err(e);
        }
    }
    Ok(saved)
}

fn rollback(saved: &Saved, sysctls: usize, queues: usize) {
    for s in saved.sysctls.iter().take(sysctls) {
        if let Err(e) = write_sysctl(&s.key, &s.old) {
            tracing::error!("rolling back {}: {e}", s.key);
        }
    }
    for q in saved.txqueuelen.iter().take(queues) {
        if let Err(e) = set_txqueuelen(&q.dev, q.old) {
            tracing::error!("rolling back txqueuelen of {}: {e}", q.dev);
        }
    }
}

/// Restores every saved value in the calling thread's namespace; returns
/// the values restored (all of them are tried even if one fails).
pub fn revert_here(saved: &Saved) -> Result<Vec<String>, ApplyError> {
    if saved.version != SAVED_VERSION {
        return Err(ApplyError::BadSaved(format!(
            "version {} (this tcpaccel writes {SAVED_VERSION})",
            saved.version
        )));
    }
    // Check every name and permission first, as apply does.
    let files = saved.sysctls.iter().map(|s| open_sysctl(&s.key)).collect::<Result<Vec<_>, _>>()?;
    let mut restored = Vec::new();
    let mut first_err = None;
    for (f, s) in files.into_iter().zip(&saved.sysctls) {
        match write_open(f, &s.key, &s.old) {
            Ok(()) => restored.push(format!("{} = {}", s.key, s.old)),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    for q in &saved.txqueuelen {
        match set_txqueuelen(&q.dev, q.old) {
            Ok(()) => restored.push(format!("{} txqueuelen = {}", q.dev, q.old)),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(restored),
    }
}

fn in_ns<R: Send + 'static>(
    netns: Option<&str>,
    f: impl FnOnce() -> Result<R, ApplyError> + Send + 'static,
) -> Result<R, ApplyError> {
    match netns {
        None => f(),
        Some(ns) => tcpaccel_sys::netns::run_in(ns, f).map_err(|e| match e {
            tcpaccel_sys::Error::NoNamespace { name } => ApplyError::NoNamespace(name),
            e => ApplyError::Failed { what: format!("entering namespace {ns:?}"), msg: e.to_string() },
        })?,
    }
}

/// Applies `plan` in `netns` (or here) and returns what to save.
pub fn apply(netns: Option<&str>, plan: &Plan) -> Result<Saved, ApplyError> {
    let p = plan.clone();
    let mut saved = in_ns(netns, move || apply_here(&p))?;
    saved.netns = netns.map(str::to_string);
    Ok(saved)
}

/// What changed since `saved` was applied, in the calling thread's
/// namespace: one line per value that no longer holds what `--apply` wrote
/// (restoring it would undo someone else's change).
pub fn changed_since_here(saved: &Saved) -> Result<Vec<String>, ApplyError> {
    let mut out = Vec::new();
    for s in &saved.sysctls {
        // Compare as the kernel prints it (whitespace collapsed, as read).
        let words = |v: &str| v.split_whitespace().collect::<Vec<_>>().join(" ");
        let new = words(&s.new);
        match read_sysctl(&s.key) {
            Fact::Known(now) if now == new => {}
            // Already back at the saved value: restoring undoes no one's change.
            Fact::Known(now) if now == words(&s.old) => {}
            Fact::Known(now) => out.push(format!(
                "{} is now {now:?}, not the {new:?} --apply set (saved old value {:?})",
                s.key, s.old
            )),
            Fact::Unknown(why) => {
                return Err(ApplyError::Failed { what: format!("read {}", s.key), msg: why });
            }
        }
    }
    for q in &saved.txqueuelen {
        let now = txqueuelen_of(&q.dev)?;
        if now != q.new && now != q.old {
            out.push(format!(
                "{} txqueuelen is now {now}, not the {} --apply set (saved old value {})",
                q.dev, q.new, q.old
            ));
        }
    }
    Ok(out)
}

/// True when every value of `saved` holds its old value again (an earlier
/// `--revert` ran), in the calling thread's namespace.
pub fn restored_here(saved: &Saved) -> Result<bool, ApplyError> {
    let words = |v: &str| v.split_whitespace().collect::<Vec<_>>().join(" ");
    for s in &saved.sysctls {
        match read_sysctl(&s.key) {
            Fact::Known(now) if now == words(&s.old) => {}
            Fact::Known(_) => return Ok(false),
            Fact::Unknown(why) => {
                return Err(ApplyError::Failed { what: format!("read {}", s.key), msg: why })
            }
        }
    }
    for q in &saved.txqueuelen {
        if txqueuelen_of(&q.dev)? != q.old {
            return Ok(false);
        }
    }
    Ok(true)
}

/// [`restored_here`] in the namespace `saved` was taken in.
pub fn restored(saved: &Saved) -> Result<bool, ApplyError> {
    let s = saved.clone();
    in_ns(saved.netns.as_deref(), move || restored_here(&s))
}

/// [`changed_since_here`] in the namespace `saved` was taken in.
pub fn changed_since(saved: &Saved) -> Result<Vec<String>, ApplyError> {
    let s = saved.clone();
    in_ns(saved.netns.as_deref(), move || changed_since_here(&s))
}

/// Restores `saved` in the namespace it was taken in.
pub fn revert(saved: &Saved) -> Result<Vec<String>, ApplyError> {
    let s = saved.clone();
    in_ns(saved.netns.as_deref(), move || revert_here(&s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::Severity;

    fn finding(fixes: Vec<Fix>) -> Finding {
        Finding {
            id: "x".into(),
            severity: Severity::Warn,
            summary: String::new(),
            limits: None,
            cap: None,
            share: None,
            fixes,
        }
    }

    #[test]
    fn plan_keeps_automatic_fixes_once() {
        let p = plan(&[
            finding(vec![
                Fix::Sysctl { key: "net.ipv4.tcp_wmem".into(), value: "1 2 3".into() },
                Fix::Advice { command: "ip route change default rto_min 5ms".into() },
            ]),
            finding(vec![
                Fix::Sysctl { key: "net.ipv4.tcp_wmem".into(), value: "1 2 4".into() },
                Fix::Txqueuelen { dev: "veth0".into(), value: 10000 },
            ]),
        ]);
        assert_eq!(p.sysctls, vec![("net.ipv4.tcp_wmem".to_string(), "1 2 3".to_string())]);
        assert_eq!(p.txqueuelen, vec![("veth0".to_string(), 10000)]);
        assert!(plan(&[finding(vec![Fix::Advice { command: "x".into() }])]).is_empty());
    }

    #[test]
    fn saved_state_round_trips_and_refuses_bad_names() {
        let s = Saved {
            version: SAVED_VERSION,
            netns: Some("tcpaccel-x".into()),
            sysctls: vec![SavedSysctl {
                key: "net.ipv4.tcp_rmem".into(),
                old: "4096 131072 6291456".into(),
                new: "4096 131072 25165824".into(),
            }],
            txqueuelen: vec![SavedQueue { dev: "veth0".into(), old: 1000, new: 10000 }],
        };
        let back: Saved = serde_json::from_str(&serde_json::to_string_pretty(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        let evil = Saved {
            version: SAVED_VERSION,
            netns: None,
            sysctls: vec![SavedSysctl { key: "../../etc/passwd".into(), old: "x".into(), new: "y".into() }],
            txqueuelen: vec![],
        };
        assert!(matches!(revert_here(&evil), Err(ApplyError::Failed { .. })));
        let future = Saved { version: 99, ..evil };
        assert!(matches!(revert_here(&future), Err(ApplyError::BadSaved(_))));
    }
}
