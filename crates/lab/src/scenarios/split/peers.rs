//! The peer programs: looking them up (naming the install script when one
//! is missing), running each as a [`Daemon`] in its namespace with its CPU
//! time read from /proc, and reading curl's measurement.

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

use super::chain::Kind;

/// A daemon in a namespace, stopped (TERM, then KILL) and reaped on drop.
pub(super) struct Daemon {
    pub(super) what: String,
    pub(super) node: String,
    pub(super) child: Child,
    pub(super) log: PathBuf,
}

impl Daemon {
    pub(super) fn stop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // Not reaped yet (try_wait saw it running), so its pid is still its own.
            let _ = tcpaccel_sys::process::signal(self.child.id(), tcpaccel_sys::process::Signal::Term);
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(3) {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
    /// CPU seconds (user + system) of the daemon and its direct children
    /// (Dante's I/O processes) so far, from /proc. Assumes USER_HZ = 100, the
    /// value every Linux architecture exports to user space.
    pub(super) fn cpu_s(&self) -> f64 {
        let pid = self.child.id();
        let mut ticks = proc_ticks(pid).map(|t| t.ticks()).unwrap_or(0);
        if let Ok(dir) = std::fs::read_dir("/proc") {
            for e in dir.flatten() {
                let Some(other) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                    continue;
                };
                if let Some(t) = proc_ticks(other) {
                    if t.ppid == pid {
                        ticks += t.ticks();
                    }
                }
            }
        }
        ticks as f64 / tcpaccel_sys::procstat::USER_HZ as f64
    }
    pub(super) fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join(" | ")
    }
    /// Fails if the daemon has exited.
    pub(super) fn check(&mut self) -> Result<()> {
        if let Ok(Some(st)) = self.child.try_wait() {
            bail!("{} exited ({st}): {}", self.what, self.log_tail());
        }
        Ok(())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// CPU time and parent of `pid` (`None` once it is gone).
fn proc_ticks(pid: u32) -> Option<tcpaccel_sys::procstat::TaskStat> {
    tcpaccel_sys::procstat::read_task(&pid.to_string()).ok()
}

/// The external programs the variants need (none for raw tcpaccel chains),
/// found with `lookup`; a missing one names the install script.
pub(super) fn find_peers(
    kinds: &[Kind],
    raw: bool,
    lookup: impl Fn(&str) -> Option<PathBuf>,
) -> Result<BTreeMap<&'static str, PathBuf>> {
    let mut need = Vec::new();
    if !raw {
        need.push(("curl", "the HTTP client"));
        need.push(("nginx", "the HTTP server"));
    }
    if kinds.contains(&Kind::Dante) {
        need.push(("danted", "relays=dante"));
    }
    if kinds.contains(&Kind::Squid) {
        need.push(("squid", "relays=squid"));
    }
    let mut bins = BTreeMap::new();
    for (b, why) in need {
        let path = lookup(b).with_context(|| {
            format!(
                "{b} not found (needed for {why}); install the peers with scripts/install-split-peers.sh, \
                 or leave that relay kind out (--set relays=tcpaccel --set uneven_relays=tcpaccel)"
            )
        })?;
        bins.insert(b, path);
    }
    Ok(bins)
}

pub(super) fn tcpaccel_bin() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("TCPACCEL_BIN") {
        return Ok(PathBuf::from(p));
    }
    std::env::current_exe().context("locating the tcpaccel executable (set TCPACCEL_BIN)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_peers_name_the_install_script_and_tcpaccel_needs_none_of_them() {
        let none = |_: &str| None;
        let e = find_peers(&[Kind::Direct, Kind::Dante], false, none).unwrap_err().to_string();
        assert!(e.contains("scripts/install-split-peers.sh") && e.contains("curl"), "{e}");
        let only_http = |b: &str| (b == "curl" || b == "nginx").then(|| PathBuf::from(format!("/x/{b}")));
        let e = find_peers(&[Kind::Tcpaccel, Kind::Squid], false, only_http).unwrap_err().to_string();
        assert!(e.contains("squid not found (needed for relays=squid)"), "{e}");
        let ok = find_peers(&[Kind::Direct, Kind::Tcpaccel], false, only_http).unwrap();
        assert_eq!(ok.keys().copied().collect::<Vec<_>>(), vec!["curl", "nginx"]);
        assert!(find_peers(&[Kind::Direct, Kind::Tcpaccel], true, none).unwrap().is_empty());
    }
}
