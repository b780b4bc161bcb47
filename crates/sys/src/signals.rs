//! Process-wide SIGINT/SIGTERM handling: one thread, foreground subscribers,
//! and clean-up hooks that run before the process exits on a signal.
//!
//! [`install`] starts one thread that waits for SIGINT and SIGTERM through
//! `signal-hook` (no code runs in the signal handler itself). On a signal it
//! hands the first one to every live [`subscribe`]r, so a foreground program
//! can stop in order (and print its summary); with no subscriber, or on a
//! second signal, it runs every hook registered with [`on_exit`] (libraries
//! register what must not outlive the process, like the lab's network
//! namespaces) and exits with 128 + the signal number (130, 143). Other
//! threads are not stopped on that path: they end with the process.
//!
//! What it does not do: decide what a program does on its first signal
//! (that is the subscriber's), or handle other signals (SIGHUP reloads and
//! SIGUSR1 dumps belong to the services that offer them).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Mutex, MutexGuard, OnceLock};

use signal_hook::consts::{SIGINT, SIGTERM};

use crate::error::{Error, Result};

static SUBSCRIBERS: Mutex<Vec<Sender<i32>>> = Mutex::new(Vec::new());
static EXIT_HOOKS: Mutex<Vec<fn()>> = Mutex::new(Vec::new());
static SIGNALS_SEEN: AtomicUsize = AtomicUsize::new(0);
static INSTALLED: OnceLock<std::result::Result<(), String>> = OnceLock::new();

/// Locks, ignoring poisoning: the exit path must still work after a panic elsewhere.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Installs the handler thread once per process; later calls return the first result.
pub fn install() -> Result<()> {
    INSTALLED
        .get_or_init(|| {
            let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
                .map_err(|e| format!("cannot register SIGINT/SIGTERM handlers: {e}"))?;
            std::thread::Builder::new()
                .name("tcpaccel-signals".into())
                .spawn(move || {
                    for sig in signals.forever() {
                        on_signal(sig);
                    }
                })
                .map(|_| ())
                .map_err(|e| format!("cannot start the signal thread: {e}"))
        })
        .clone()
        .map_err(|msg| Error::Other { op: "install SIGINT/SIGTERM handling".into(), msg })
}

/// Asks for the next SIGINT/SIGTERM instead of the immediate clean-up and
/// exit: while the returned receiver lives, the first signal is sent to it
/// (as its number) and the caller is expected to clean up and return. A
/// second signal still runs the hooks and exits.
pub fn subscribe() -> Result<Receiver<i32>> {
    install()?;
    let (tx, rx) = channel();
    lock(&SUBSCRIBERS).push(tx);
    Ok(rx)
}

/// Registers `hook` to run on the exit path (once, however often it is
/// registered). Hooks run in registration order on the signal thread.
pub fn on_exit(hook: fn()) {
    let mut hooks = lock(&EXIT_HOOKS);
    if !hooks.contains(&hook) {
        hooks.push(hook);
    }
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
    tracing::warn!(sig, "exiting on signal");
    let hooks: Vec<fn()> = lock(&EXIT_HOOKS).clone();
    for hook in hooks {
        hook();
    }
    std::process::exit(128 + sig);
}
