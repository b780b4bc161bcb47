//! The process-wide registry of live networks and the SIGINT/SIGTERM handler
//! that tears them down.
//!
//! [`install`] (called by [`crate::Network::up`]) starts one thread that
//! waits for SIGINT and SIGTERM through `signal-hook` (no code runs in the
//! signal handler itself). On a signal it deletes the namespaces of every
//! live network and exits with 128 + the signal number (130, 143), unless a
//! foreground program has [`subscribe`]d: then the first signal is handed to
//! it so it can tear down gracefully (and print summaries); a second signal
//! exits anyway. Emulator threads are not stopped on the exit path: they end
//! with the process.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use signal_hook::consts::{SIGINT, SIGTERM};

use crate::error::{Error, Result};

/// What must go when a network goes: shared between a [`crate::Network`] and the registry.
#[derive(Debug, Default)]
pub(crate) struct Live {
    pub namespaces: Vec<String>,
    pub state_file: Option<PathBuf>,
}

pub(crate) type LiveRef = Arc<Mutex<Live>>;

static REGISTRY: Mutex<BTreeMap<u64, LiveRef>> = Mutex::new(BTreeMap::new());
static NEXT_KEY: AtomicU64 = AtomicU64::new(1);
static SUBSCRIBERS: Mutex<Vec<Sender<i32>>> = Mutex::new(Vec::new());
static SIGNALS_SEEN: AtomicUsize = AtomicUsize::new(0);
static INSTALLED: OnceLock<std::result::Result<(), String>> = OnceLock::new();

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

/// Installs the handler thread once per process; later calls return the first result.
pub fn install() -> Result<()> {
    INSTALLED
        .get_or_init(|| {
            let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
                .map_err(|e| format!("cannot register SIGINT/SIGTERM handlers: {e}"))?;
            std::thread::Builder::new()
                .name("tcpaccel-net-signals".into())
                .spawn(move || {
                    for sig in signals.forever() {
                        on_signal(sig);
                    }
                })
                .map(|_| ())
                .map_err(|e| format!("cannot start the signal thread: {e}"))
        })
        .clone()
        .map_err(|e| Error::io("install signal handlers", std::io::Error::other(e)))
}

/// Asks for the next SIGINT/SIGTERM instead of the immediate teardown and
/// exit: while the returned receiver lives, the first signal is sent to it
/// (as its number) and the caller is expected to tear down and return. A
/// second signal still tears everything down and exits.
pub fn subscribe() -> Result<Receiver<i32>> {
    install()?;
    let (tx, rx) = channel();
    lock(&SUBSCRIBERS).push(tx);
    Ok(rx)
}

fn on_signal(sig: i32) {
    let seen = SIGNALS_SEEN.fetch_add(1, Ordering::SeqCst);
    if seen == 0 {
        let mut subs = lock(&SUBSCRIBERS);
        subs.retain(|tx| tx.send(sig).is_ok());
        if !subs.is_empty() {
            tracing::info!(sig, "signal handed to the foreground program");
            return;
        }
    }
    tracing::warn!(sig, "tearing down all networks on signal");
    teardown_all();
    std::process::exit(128 + sig);
}

/// Deletes the namespaces and state files of every registered network.
pub(crate) fn teardown_all() {
    let lives: Vec<LiveRef> = lock(&REGISTRY).values().cloned().collect();
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
