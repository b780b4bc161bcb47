//! Exit codes, owned by `main` (ripgrep's habit): every subcommand returns an
//! `anyhow::Result<Verdict>` and main maps it to a documented code.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | ok |
//! | 1 | completed, negative verdict (e.g. a check failed, a target missed) |
//! | 2 | usage or configuration error (bad value, unknown name, bad file) |
//! | 3 | missing privilege (needs root / CAP_NET_ADMIN) |
//! | 4 | missing kernel feature (module, sysctl, qdisc, MPTCP path manager) |
//! | 5 | runtime failure (I/O, network, peer) |
//! | 130 | interrupted: SIGINT/SIGTERM ended a job before it finished (`send`, `lab run`) |
//!
//! Long-running services (`emu`, `relay`, `net up`, `lanes`, `gather serve`,
//! `trace`, `recv`) run until they are stopped: for them SIGINT or SIGTERM
//! is the normal stop, not an interruption. The first signal makes them
//! clean up, print their summary and exit with their usual code (0, or 1
//! where a service judges, as `trace` with no matching socket); a second
//! signal during the clean-up exits at once with 128 + the signal (130,
//! 143). Jobs that end by themselves (`send`, `lab run`) exit 130 when a
//! signal cuts them short, after writing what they have.

use std::process::ExitCode;

use anyhow::Context;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What a subcommand concluded when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Ok,
    Negative,
}

/// Errors that carry their own exit code; attach them with `anyhow::Error::from`.
#[derive(Debug)]
pub(crate) enum Fail {
    Usage(String),
    Privilege(String),
    Feature(String),
    /// Stopped by SIGINT/SIGTERM after cleaning up.
    Interrupted,
}

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fail::Usage(m) => write!(f, "{m}"),
            Fail::Privilege(m) => {
                write!(f, "{m} (run as root, or with CAP_NET_ADMIN, CAP_NET_RAW and CAP_SYS_ADMIN)")
            }
            Fail::Feature(m) => write!(f, "{m}"),
            Fail::Interrupted => {
                write!(f, "interrupted; records so far were kept and the run is marked incomplete")
            }
        }
    }
}

pub(crate) fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Fail::Usage(msg.into()))
}

/// Maps a result to the exit code table above, printing the error chain on stderr.
pub(crate) fn code(result: anyhow::Result<Verdict>) -> ExitCode {
    match result {
        Ok(Verdict::Ok) => ExitCode::SUCCESS,
        Ok(Verdict::Negative) => ExitCode::from(1),
        Err(e) => {
            eprintln!("tcpaccel: error: {e:#}");
            ExitCode::from(classify(&e))
        }
    }
}

fn classify(e: &anyhow::Error) -> u8 {
    for cause in e.chain() {
        if let Some(f) = cause.downcast_ref::<Fail>() {
            return match f {
                Fail::Usage(_) => 2,
                Fail::Privilege(_) => 3,
                Fail::Feature(_) => 4,
                Fail::Interrupted => 130,
            };
        }
        if cause.downcast_ref::<tcpaccel_core::units::ParseError>().is_some() {
            return 2;
        }
        if let Some(s) = cause.downcast_ref::<tcpaccel_sys::Error>() {
            match s {
                tcpaccel_sys::Error::Privilege { .. } => return 3,
                tcpaccel_sys::Error::Unsupported { .. } => return 4,
                tcpaccel_sys::Error::NoInterface { .. } | tcpaccel_sys::Error::NoNamespace { .. } => {
                    return 2
                }
                _ => {}
            }
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::PermissionDenied {
                return 3;
            }
        }
    }
    5
}

/// Fails with exit code 3 unless running as root; `what` says what needs it.
pub(crate) fn require_root(what: &str) -> anyhow::Result<()> {
    if tcpaccel_sys::privilege::is_root() {
        Ok(())
    } else {
        Err(anyhow::Error::new(Fail::Privilege(format!("{what} needs root"))))
    }
}

impl std::error::Error for Fail {}

/// For a long-running service: a flag the first SIGINT or SIGTERM sets
/// (the service then stops normally, see the module docs); a second signal
/// exits at once with 128 + the signal.
pub(crate) fn stop_on_signal() -> anyhow::Result<Arc<AtomicBool>> {
    let signals = tcpaccel_sys::signals::subscribe().context("installing SIGINT/SIGTERM handling")?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    std::thread::Builder::new()
        .name("stop-on-signal".into())
        .spawn(move || {
            if let Ok(sig) = signals.recv() {
                tracing::info!(sig, "stopping on signal");
                flag.store(true, Ordering::Relaxed);
            }
        })
        .context("starting the signal thread")?;
    Ok(stop)
}

/// The message std's `print!` family panics with when stdout is a closed pipe.
fn broken_pipe_message(msg: &str) -> bool {
    msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe")
}

/// True for the payload of a `println!` that hit a closed pipe.
pub(crate) fn is_broken_pipe_panic(payload: &(dyn std::any::Any + Send)) -> bool {
    let msg = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("");
    broken_pipe_message(msg)
}

/// Installs a panic hook that stays silent for broken-pipe prints on the
/// main thread (main catches those) and reports every other panic as before.
pub(crate) fn quiet_broken_pipe_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let main = std::thread::current().name() == Some("main");
        if !(main && is_broken_pipe_panic(info.payload())) {
            default(info);
        }
    }));
}

#[cfg(test)]
mod broken_pipe_tests {
    use super::*;

    #[test]
    fn only_stdout_broken_pipes_are_quiet() {
        let p: Box<dyn std::any::Any + Send> =
            Box::new(String::from("failed printing to stdout: Broken pipe (os error 32)"));
        assert!(is_broken_pipe_panic(p.as_ref()));
        let p: Box<dyn std::any::Any + Send> = Box::new("index out of bounds");
        assert!(!is_broken_pipe_panic(p.as_ref()));
        let p: Box<dyn std::any::Any + Send> = Box::new(42u32);
        assert!(!is_broken_pipe_panic(p.as_ref()));
    }
}
