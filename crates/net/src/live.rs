//! The process-wide registry of live networks, so that the exit path of a
//! SIGINT/SIGTERM (`tcpaccel_sys::signals`) can delete their namespaces.
//! [`crate::Network::up`] registers each network and hooks
//! [`teardown_all`] into that exit path; the signal handling itself is not
//! this crate's.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// What must go when a network goes: shared between a [`crate::Network`] and the registry.
#[derive(Debug, Default)]
pub(crate) struct Live {
    pub namespaces: Vec<String>,
    pub state_file: Option<PathBuf>,
}

pub(crate) type LiveRef = Arc<Mutex<Live>>;

static REGISTRY: Mutex<BTreeMap<u64, LiveRef>> = Mutex::new(BTreeMap::new());
static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

/// Locks, ignoring poisoning: teardown must still work after a panic elsewhere.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn register(live: LiveRef) -> u64 {
    let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
    lock(&REGISTRY).insert(key, live);
    key
}

pub(crate) fn unregister(key: u64) {
    lock(&REGISTRY).remove(&key);
}

/// Number of networks of this process that are up (or being built).
pub fn live_networks() -> usize {
    lock(&REGISTRY).len()
}

/// Deletes the namespaces and state files of every registered network (the
/// exit path of a signal; a [`crate::Network`] going out of scope tears
/// itself down). Processes inside are killed at once, without the SIGTERM
/// grace of a normal teardown: this path runs on a second Ctrl-C, or when no
/// one asked for the signal, and the process exits right after.
pub fn teardown_all() {
    let lives: Vec<LiveRef> = lock(&REGISTRY).values().cloned().collect();
    if !lives.is_empty() {
        tracing::warn!("tearing down all networks on signal");
    }
    for live in lives {
        let mut l = lock(&live);
        for ns in std::mem::take(&mut l.namespaces) {
            if let Err(e) = crate::clean::delete_namespace(&ns) {
                eprintln!("tcpaccel: cannot delete namespace {ns}: {e}");
            }
        }
        if let Some(path) = l.state_file.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}
