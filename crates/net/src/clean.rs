//! Deleting namespaces (and the processes still inside them), and finding and
//! removing whatever an earlier run left behind (`tcpaccel lab clean`).
//!
//! Deleting a namespace with `ip netns del` only removes its name; the kernel
//! frees it (and the veth ends in it) once no process or socket holds it, so
//! the processes started inside it are killed first. Our own threads that
//! entered it are not processes and are left alone.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::state::{self, alive, RunState};
use tcpaccel_sys::command;
use tcpaccel_sys::process::Signal;

/// Prefix of every namespace tcpaccel creates.
pub const NS_PREFIX: &str = "tcpaccel-";

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
    let out = command::ip(&["netns", "pids", ns])?;
    Ok(out.split_whitespace().filter_map(|p| p.parse().ok()).collect())
}

/// Sends `sig` to a process (kill(2), through `tcpaccel_sys::process`). A
/// process that has already ended is not an error: ending it was the point.
pub(crate) fn signal(pid: u32, sig: Signal) -> Result<()> {
    tcpaccel_sys::process::signal(pid, sig)
        .map_err(|e| Error::sys(format!("{} to process {pid}", sig.name()), e))?;
    Ok(())
}

/// Kills every process inside `ns` (never this process), then deletes the
/// namespace name. A namespace already gone is not an error.
pub fn delete_namespace(ns: &str) -> Result<()> {
    if !tcpaccel_sys::netns::exists(ns) {
        return Ok(());
    }
    let me = std::process::id();
    match pids_in(ns) {
        Ok(pids) => {
            for pid in pids.into_iter().filter(|&p| p != me) {
                tracing::debug!(ns, pid, "killing process left in namespace");
                if let Err(e) = signal(pid, Signal::Kill) {
                    tracing::warn!(ns, pid, "cannot kill process in namespace: {e}");
                }
            }
        }
        Err(e) => tracing::warn!(ns, "cannot list processes in namespace: {e}"),
    }
    match command::ip(&["netns", "del", ns]) {
        Ok(_) => Ok(()),
        Err(_) if !tcpaccel_sys::netns::exists(ns) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Stops one recorded run: SIGTERM to its owner, which tears its network
/// down itself (and prints its summaries); after `wait`, or at once if the
/// owner is gone, deletes whatever of the run's namespaces remain and its
/// state file. Returns one line per thing done.
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
