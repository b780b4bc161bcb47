//! Deleting namespaces (and the processes still inside them), and finding and
//! removing whatever an earlier run left behind (`tcpaccel lab clean`).
//!
//! Deleting a namespace with `ip netns del` only removes its name; the kernel
//! frees it (and the veth ends in it) once no process or socket holds it, so
//! the processes started inside it are stopped first: SIGTERM, so that a
//! service started with `net exec` prints its summary as on Ctrl-C, then
//! SIGKILL for whatever is still running [`STOP_GRACE`] later
//! ([`stop_processes`]). Our own threads that entered it are not processes
//! and are left alone.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::state::{self, alive, RunState};
use tcpaccel_sys::process::{Pidfd, Signal};

/// Prefix of every namespace tcpaccel creates.
pub const NS_PREFIX: &str = "tcpaccel-";

/// How long the processes inside a network have, all together, between the
/// SIGTERM of a teardown and the SIGKILL: long enough for a service to print
/// its summary and close its sockets (`recv` and `lanes` take well under a
/// second), short enough that `net down` (which waits 10 s for the owner)
/// still finishes in order.
pub const STOP_GRACE: Duration = Duration::from_secs(3);

/// A process that a teardown stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stopped {
    pub pid: u32,
    /// Its command name (`/proc/PID/comm`), "?" when it could not be read.
    pub name: String,
    /// The namespace it ran in.
    pub ns: String,
    /// True when it was still running `grace` after SIGTERM and got SIGKILL.
    pub killed: bool,
    /// The time it had between SIGTERM and SIGKILL.
    #[serde(rename = "grace_s", serialize_with = "grace_s")]
    pub grace: Duration,
}

fn grace_s<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Names under `/run/netns` that start with `prefix`, sorted.
pub fn namespaces_with_prefix(prefix: &str) -> Result<Vec<String>> {
    let dir = Path::new(tcpaccel_sys::netns::NETNS_RUN_DIR);
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(format!("list {}", dir.display()), e)),
    };
    let mut out: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(prefix))
        .collect();
    out.sort();
    Ok(out)
}

/// Pids of the processes whose network namespace is `ns` (`ip netns pids`).
pub fn pids_in(ns: &str) -> Result<Vec<u32>> {
    Ok(tcpaccel_sys::netns::pids(ns)?)
}

/// Sends `sig` to a process (kill(2), through `tcpaccel_sys::process`). A
/// process that has already ended is not an error: ending it was the point.
pub(crate) fn signal(pid: u32, sig: Signal) -> Result<()> {
    tcpaccel_sys::process::signal(pid, sig)
        .map_err(|e| Error::sys(format!("{} to process {pid}", sig.name()), e))?;
    Ok(())
}

/// Stops every process inside `namespaces` (never this process): SIGTERM to
/// all of them at once, up to `grace` for them to exit, then SIGKILL for
/// those still running. Each process is held through a pidfd, so a pid
/// reused meanwhile is never signalled. Returns what was stopped and how;
/// problems (a namespace whose processes cannot be listed) are logged, as
/// [`delete_namespace`] still kills whatever is left.
pub fn stop_processes(namespaces: &[String], grace: Duration) -> Vec<Stopped> {
    let me = std::process::id();
    let mut held: Vec<(Pidfd, Stopped)> = Vec::new();
    for ns in namespaces.iter().filter(|ns| tcpaccel_sys::netns::exists(ns)) {
        let pids = match pids_in(ns) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(ns, "cannot list processes in namespace: {e}");
                continue;
            }
        };
        for pid in pids.into_iter().filter(|&p| p != me) {
            let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|c| c.trim().to_string())
                .unwrap_or_else(|_| "?".into());
            match Pidfd::open(pid) {
                Ok(Some(fd)) => match fd.signal(Signal::Term) {
                    Ok(true) => held.push((fd, Stopped { pid, name, ns: ns.clone(), killed: false, grace })),
                    Ok(false) => {}
                    Err(e) => tracing::warn!(ns, pid, "cannot send SIGTERM: {e}"),
                },
                Ok(None) => {}
                Err(e) => tracing::warn!(ns, pid, "cannot open the process: {e}"),
            }
        }
    }
    let deadline = Instant::now() + grace;
    for (fd, st) in &mut held {
        let left = deadline.saturating_duration_since(Instant::now());
        if matches!(fd.wait_exit(left), Ok(true)) {
            continue;
        }
        tracing::debug!(ns = st.ns, pid = st.pid, "still running {grace:?} after SIGTERM; killing");
        match fd.signal(Signal::Kill) {
            Ok(sent) => st.killed = sent,
            Err(e) => tracing::warn!(ns = st.ns, pid = st.pid, "cannot kill process in namespace: {e}"),
        }
    }
    held.into_iter().map(|(_, st)| st).collect()
}

impl Stopped {
    /// One line: which process, where, and whether SIGTERM was enough.
    pub fn describe(&self) -> String {
        let how = if self.killed {
            format!(
                "killed: still running {} after SIGTERM",
                tcpaccel_core::units::format_duration(self.grace)
            )
        } else {
            "stopped by SIGTERM".to_string()
        };
        format!("process {} ({}) in {}: {how}", self.pid, self.name, self.ns)
    }
}

/// Kills every process inside `ns` (never this process), then deletes the
/// namespace name (`tcpaccel_sys::netns::delete`, also what the tests'
/// namespaces use). A namespace already gone is not an error. Callers that
/// can wait give the processes their SIGTERM first ([`stop_processes`]).
pub fn delete_namespace(ns: &str) -> Result<()> {
    Ok(tcpaccel_sys::netns::delete(ns)?)
}

/// Stops one recorded run: SIGTERM to its owner, which tears its network
/// down itself (stopping the processes inside it as [`stop_processes`] does,
/// and printing its summaries); after `wait`, or at once if the owner is
/// gone, stops the processes left in the run's namespaces the same way,
/// deletes the namespaces and the state file. Returns one line per thing done.
pub fn stop_run(run: &RunState, wait: Duration) -> Result<Vec<String>> {
    let mut done = Vec::new();
    let me = std::process::id();
    if run.pid != me && run.owner_alive() {
        signal(run.pid, Signal::Term)?;
        done.push(format!("sent SIGTERM to process {} (owner of run {})", run.pid, run.run_id));
        let deadline = Instant::now() + wait;
        while alive(run.pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if alive(run.pid) {
            done.push(format!("process {} still running after {:?}; deleting its namespaces", run.pid, wait));
        }
    }
    for st in stop_processes(&run.namespaces(), STOP_GRACE) {
        done.push(st.describe());
    }
    for ns in run.namespaces() {
        if tcpaccel_sys::netns::exists(&ns) {
            delete_namespace(&ns)?;
            done.push(format!("namespace {ns}"));
        }
    }
    if let Some(path) = state::remove(&run.run_id)? {
        done.push(format!("state file {}", path.display()));
    }
    Ok(done)
}

/// Removes every namespace named `tcpaccel-*`, stops the `tcpaccel net up`
/// processes that own a recorded run, and removes their state files. Returns
/// one line per thing removed. Other tcpaccel runs on this machine (tests,
/// another terminal) lose their networks too: this is the "clean up
/// everything" button.
pub fn clean_leftovers() -> Result<Vec<String>> {
    clean_prefix(NS_PREFIX)
}

/// [`clean_leftovers`] restricted to namespaces starting with `prefix` (which
/// must itself start with `tcpaccel-`) and the runs whose namespaces all do.
pub fn clean_prefix(prefix: &str) -> Result<Vec<String>> {
    if !prefix.starts_with(NS_PREFIX) {
        return Err(Error::State(format!("refusing to clean namespaces {prefix:?}*: not tcpaccel's")));
    }
    let mut removed = Vec::new();
    let me = std::process::id();
    let mut waiting = Vec::new();
    for run in state::list()? {
        let ours = !run.namespaces().is_empty() && run.namespaces().iter().all(|n| n.starts_with(prefix));
        if !ours {
            continue;
        }
        if run.pid != me && run.owner_alive() {
            match signal(run.pid, Signal::Term) {
                Ok(()) => {
                    removed.push(format!("process {} (owner of run {})", run.pid, run.run_id));
                    waiting.push(run.pid);
                }
                Err(e) => tracing::warn!(pid = run.pid, "cannot signal the owner of run {}: {e}", run.run_id),
            }
        }
        if let Some(path) = state::remove(&run.run_id)? {
            removed.push(format!("state file {}", path.display()));
        }
    }
    // Give owners a moment to tear down their own networks (and print their
    // summaries); whatever remains is deleted below anyway.
    let deadline = Instant::now() + Duration::from_secs(3);
    while waiting.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for ns in namespaces_with_prefix(prefix)? {
        delete_namespace(&ns)?;
        removed.push(format!("namespace {ns}"));
    }
    Ok(removed)
}
