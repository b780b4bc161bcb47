//! Run state files (`/run/tcpaccel/RUNID.json`): what a live network is called
//! on this machine, so `tcpaccel net exec/down/list` in another terminal can
//! find the namespaces and the owning process. Written by
//! [`crate::Network::persist`], removed at teardown. This module only reads
//! and writes the files; it does not build or delete anything.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Where state files live (tmpfs: gone after a reboot, like the namespaces).
pub const STATE_DIR: &str = "/run/tcpaccel";

/// One interface of a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IfaceState {
    pub link: String,
    pub ifname: String,
    pub addr: Option<String>,
    pub addr6: Option<String>,
}

/// One host or router.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeState {
    pub name: String,
    pub role: String,
    pub ns: String,
    pub interfaces: Vec<IfaceState>,
}

/// The emulator of one emulated link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmuState {
    pub link: String,
    pub ns: String,
}

/// What a state file holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    pub run_id: String,
    /// The process that owns the network (tears it down on SIGTERM).
    pub pid: u32,
    /// Seconds since the Unix epoch when the network came up.
    pub started_unix: u64,
    /// The topology file it was built from, if any, as the user wrote it.
    pub source: Option<String>,
    /// That file's absolute path, to recognise a second `net up` of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_file: Option<PathBuf>,
    pub nodes: Vec<NodeState>,
    pub emulators: Vec<EmuState>,
}

impl RunState {
    /// Every namespace of the run (nodes, then emulators).
    pub fn namespaces(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.ns.clone()).chain(self.emulators.iter().map(|e| e.ns.clone())).collect()
    }

    /// The namespace of node `name`.
    pub fn ns_of(&self, name: &str) -> Option<&str> {
        self.nodes.iter().find(|n| n.name == name).map(|n| n.ns.as_str())
    }

    /// The address that reaches node `name`: its first IPv4 address in link
    /// order (as [`crate::Network::addr`] picks it), else its first IPv6 one.
    pub fn addr_of(&self, name: &str) -> Option<std::net::IpAddr> {
        let node = self.nodes.iter().find(|n| n.name == name)?;
        let first = |v6: bool| {
            node.interfaces.iter().find_map(|i| {
                let a = if v6 { i.addr6.as_deref() } else { i.addr.as_deref() }?;
                crate::Cidr::parse(a).ok().map(|c| c.addr)
            })
        };
        first(false).or_else(|| first(true))
    }

    /// True while the owning process exists.
    pub fn owner_alive(&self) -> bool {
        alive(self.pid)
    }

    /// True when the owner is alive and every namespace still exists.
    pub fn is_live(&self) -> bool {
        self.owner_alive() && self.namespaces().iter().all(|n| tcpaccel_sys::netns::exists(n))
    }
}

/// True while the process runs: a zombie (exited, its parent has not
/// reaped it yet — a test harness or script that started `net up` in the
/// background) has stopped. Here, not in `clean`, so that clean uses state
/// and not the other way round.
pub(crate) fn alive(pid: u32) -> bool {
    tcpaccel_sys::procstat::running(pid)
}

/// Path of the state file of `run_id`.
pub fn path_of(run_id: &str) -> PathBuf {
    Path::new(STATE_DIR).join(format!("{run_id}.json"))
}

/// Writes `state` atomically (temporary file, then rename).
pub fn save(state: &RunState) -> Result<PathBuf> {
    std::fs::create_dir_all(STATE_DIR).map_err(|e| Error::io(format!("create {STATE_DIR}"), e))?;
    let path = path_of(&state.run_id);
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(state)
        .map_err(|e| Error::State(format!("cannot encode the state of run {}: {e}", state.run_id)))?;
    std::fs::write(&tmp, text).map_err(|e| Error::io(format!("write {}", tmp.display()), e))?;
    std::fs::rename(&tmp, &path).map_err(|e| Error::io(format!("rename to {}", path.display()), e))?;
    Ok(path)
}

/// Reads the state file of `run_id`.
pub fn load(run_id: &str) -> Result<RunState> {
    let path = path_of(run_id);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::State(format!("no run {run_id:?} (no {})", path.display()))
        } else {
            Error::io(format!("read {}", path.display()), e)
        }
    })?;
    serde_json::from_str(&text)
        .map_err(|e| Error::State(format!("{} is not a run state file: {e}", path.display())))
}

/// Every readable state file, oldest first. Unreadable ones are skipped with a warning.
pub fn list() -> Result<Vec<RunState>> {
    let entries = match std::fs::read_dir(STATE_DIR) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(format!("list {STATE_DIR}"), e)),
    };
    let mut out = Vec::new();
    for entry in entries.filter_map(|e| e.ok()) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(run_id) = name.strip_suffix(".json") else { continue };
        match load(run_id) {
            Ok(s) => out.push(s),
            Err(e) => tracing::warn!("skipping {name}: {e}"),
        }
    }
    out.sort_by(|a, b| (a.started_unix, &a.run_id).cmp(&(b.started_unix, &b.run_id)));
    Ok(out)
}

/// Removes the state file of `run_id`; returns its path if there was one.
pub fn remove(run_id: &str) -> Result<Option<PathBuf>> {
    let path = path_of(run_id);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(Some(path)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(format!("remove {}", path.display()), e)),
    }
}

/// The live runs built from topology file `file` (compared by absolute
/// path): a second `net up` of one file would make two networks with the
/// same names and addresses, and `net exec` could not tell them apart.
pub fn live_from_file(file: &Path) -> Result<Vec<RunState>> {
    let abs = std::fs::canonicalize(file).map_err(|e| Error::io(format!("resolve {}", file.display()), e))?;
    Ok(list()?
        .into_iter()
        .filter(|r| r.source_file.as_deref() == Some(abs.as_path()) && r.is_live())
        .collect())
}

/// The recorded run that namespace `ns` belongs to (a node's or an
/// emulator's), if any.
pub fn run_of_namespace(ns: &str) -> Result<Option<RunState>> {
    Ok(list()?.into_iter().find(|r| r.namespaces().iter().any(|n| n == ns)))
}

/// Picks one run: the given id, or the only recorded one. Errors say which
/// runs exist when the choice is ambiguous.
pub fn select(run_id: Option<&str>) -> Result<RunState> {
    if let Some(id) = run_id {
        return load(id);
    }
    let runs = list()?;
    match runs.len() {
        0 => {
            Err(Error::State("no tcpaccel network is up (start one with `tcpaccel net up FILE.toml`)".into()))
        }
        1 => Ok(runs.into_iter().next().ok_or_else(|| Error::State("no run".into()))?),
        _ => {
            let ids: Vec<_> = runs.iter().map(|r| r.run_id.as_str()).collect();
            Err(Error::State(format!(
                "several networks are up ({}); choose one with --run ID",
                ids.join(", ")
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_is_reached_at_its_first_ipv4_address_else_ipv6() {
        let iface = |link: &str, addr: Option<&str>, addr6: Option<&str>| IfaceState {
            link: link.into(),
            ifname: link.into(),
            addr: addr.map(String::from),
            addr6: addr6.map(String::from),
        };
        let node = |name: &str, interfaces| NodeState {
            name: name.into(),
            role: "host".into(),
            ns: name.into(),
            interfaces,
        };
        let run = RunState {
            run_id: "abcdef".into(),
            pid: 1,
            started_unix: 0,
            source: None,
            source_file: None,
            nodes: vec![
                node(
                    "h2",
                    vec![iface("v6", None, Some("fd00::2/64")), iface("sl", Some("10.10.0.2/24"), None)],
                ),
                node("h6", vec![iface("v6", None, Some("fd00::6/64"))]),
                node("bare", vec![]),
            ],
            emulators: vec![],
        };
        assert_eq!(run.addr_of("h2"), Some("10.10.0.2".parse().unwrap()));
        assert_eq!(run.addr_of("h6"), Some("fd00::6".parse().unwrap()));
        assert_eq!(run.addr_of("bare"), None);
        assert_eq!(run.addr_of("h9"), None);
        // A state file from before source_file existed still reads.
        let old = r#"{"run_id":"a","pid":1,"started_unix":0,"source":null,"nodes":[],"emulators":[]}"#;
        assert_eq!(serde_json::from_str::<RunState>(old).unwrap().source_file, None);
    }
}
