//! The lanes daemon alone, as a process the root tests can kill for real
//! (`tests/root_lanes.rs`): `lanes-test-daemon NETNS < config.toml` enters
//! the namespace and runs the daemon with JSON Lines on stdout until it is
//! killed, or until SIGTERM, which stops it as `tcpaccel lanes` stops (its
//! summary record last). Not for users: `tcpaccel lanes` is the daemon's command, with
//! flags, metrics, reload and exit codes.

use std::io::Read;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lanes-test-daemon: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<(), String> {
    let ns = std::env::args().nth(1).ok_or("usage: lanes-test-daemon NETNS < config.toml")?;
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text).map_err(|e| format!("reading the config from stdin: {e}"))?;
    let cfg = tcpaccel_lanes::Config::parse(&text, "stdin").map_err(|e| e.to_string())?;
    tcpaccel_sys::netns::enter(&ns).map_err(|e| format!("entering {ns}: {e}"))?;
    let opts = tcpaccel_lanes::Options {
        netns: Some(ns),
        format: tcpaccel_lanes::Format::Json,
        duration: None,
        reload: None,
        metrics: None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let signals = tcpaccel_sys::signals::subscribe().map_err(|e| e.to_string())?;
    let flag = Arc::clone(&stop);
    std::thread::spawn(move || {
        if signals.recv().is_ok() {
            flag.store(true, Ordering::Relaxed);
        }
    });
    tcpaccel_lanes::run(cfg, &opts, &mut std::io::stdout(), &stop).map_err(|e| e.to_string())?;
    Ok(())
}
