//! This process inside a throwaway cgroup with the pacer attached, for a
//! while: what a tool that sends from its own threads needs to run one
//! transfer under the cgroup pacer (`tcpaccel compare`'s `dynamic-hold`
//! variant; the lab's `*-bpf` variants do the same in
//! `engines/cgroup_pacer.rs`).
//!
//! A socket belongs to the cgroup of the process that created it, so the
//! sockets this process opens while joined are the program's; cgroup v2
//! places processes, not threads, so every thread of the process moves.
//! [`Joined`] is a guard: [`Joined::leave`] or its drop (also on a panic)
//! moves the process back to the cgroup it came from, detaches the program
//! (releasing the sockets it paced, see [`crate::attach`]) and removes the
//! cgroup. Only SIGKILL leaves the cgroup and pins behind (`tcpaccel pace
//! detach --all`).

use std::path::Path;

use crate::attach::{attach, Attachment, Released};
use crate::cgroup::{Cgroup, TempCgroup};
use crate::error::PacerError;
use crate::rules::PaceConfig;

/// The cgroup2 path in `/proc/self/cgroup`'s text (its `0::PATH` line),
/// relative to the hierarchy's root; `None` without such a line.
pub fn own_cgroup_in(text: &str) -> Option<&str> {
    text.lines().find_map(|l| l.strip_prefix("0::")).map(|p| p.trim().trim_start_matches('/'))
}

/// The cgroup this process is in now.
pub fn own_cgroup() -> Result<Cgroup, PacerError> {
    let text = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| PacerError::Io { op: "read /proc/self/cgroup".into(), source: e })?;
    let rel = own_cgroup_in(&text).ok_or_else(|| PacerError::NoCgroup {
        path: "/proc/self/cgroup".into(),
        reason: "this process has no cgroup2 membership (no 0:: line)".into(),
    })?;
    Ok(Cgroup::open(Path::new(rel))?)
}

/// This process in a cgroup with the pacer attached (module docs).
/// Fields drop in order: the attachment (detach) before the cgroup.
#[derive(Debug)]
pub struct Joined {
    home: Cgroup,
    home_again: bool,
    att: Option<Attachment>,
    cg: Option<TempCgroup>,
}

impl Joined {
    /// Creates `<cgroup2>/tcpaccel/NAME`, attaches the pacer with `cfg` to
    /// it and moves this process in.
    pub fn join(name: &str, cfg: &PaceConfig) -> Result<Joined, PacerError> {
        let home = own_cgroup()?;
        let cg = TempCgroup::create(name)?;
        let att = attach(&cg.cgroup, cfg)?;
        cg.cgroup.add_pid(std::process::id())?;
        Ok(Joined { home, home_again: false, att: Some(att), cg: Some(cg) })
    }

    /// The cgroup joined.
    pub fn cgroup(&self) -> Option<&Cgroup> {
        self.cg.as_ref().map(|c| &c.cgroup)
    }

    /// The cgroup this process came from and goes back to.
    pub fn home(&self) -> &Cgroup {
        &self.home
    }

    /// Connections the program paced so far.
    pub fn paced_conns(&self) -> Result<u64, PacerError> {
        self.att.as_ref().map_or(Ok(0), Attachment::paced_conns)
    }

    /// Moves back home, detaches and removes the cgroup; what the detach released.
    pub fn leave(mut self) -> Result<Released, PacerError> {
        self.go_home()?;
        let r = self.att.take().map(Attachment::detach).transpose()?;
        self.cg.take();
        Ok(r.unwrap_or_default())
    }

    fn go_home(&mut self) -> Result<(), PacerError> {
        if !self.home_again {
            self.home.add_pid(std::process::id())?;
            self.home_again = true;
        }
        Ok(())
    }
}

impl Drop for Joined {
    fn drop(&mut self) {
        if let Err(e) = self.go_home() {
            tracing::warn!("moving back into cgroup {}: {e}", self.home.shown().display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_cgroup_is_the_v2_line() {
        let text = "12:cpu,cpuacct:/x\n0::/user.slice/session-1.scope\n";
        assert_eq!(own_cgroup_in(text), Some("user.slice/session-1.scope"));
        assert_eq!(own_cgroup_in("0::/\n"), Some(""));
        assert_eq!(own_cgroup_in("1:name=systemd:/a\n"), None);
    }
}
