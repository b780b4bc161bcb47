//! Running `ip` and `tc` (as Mininet does): the exit status is checked and a
//! failure carries the whole command line and its stderr. Nothing here knows
//! about topologies.

use std::process::{Command, Stdio};

use crate::error::{Error, Result};

/// Runs `program args..`, returning its stdout; fails with the command line
/// and stderr unless it exits 0.
pub(crate) fn run(program: &str, args: &[&str]) -> Result<String> {
    let cmd = std::iter::once(program).chain(args.iter().copied()).collect::<Vec<_>>().join(" ");
    tracing::debug!(%cmd, "run");
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| Error::Spawn { cmd: cmd.clone(), source })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(Error::Command { cmd, status: out.status.to_string(), stderr });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ip ARGS..`
pub(crate) fn ip(args: &[&str]) -> Result<String> {
    run("ip", args)
}

/// `tc ARGS..`
pub(crate) fn tc(args: &[&str]) -> Result<String> {
    run("tc", args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_names_command_and_stderr() {
        let e = run("sh", &["-c", "echo oops >&2; exit 3"]).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("sh -c") && m.contains("oops") && m.contains('3'), "{m}");
        let e = run("tcpaccel-no-such-program", &[]).unwrap_err();
        assert!(matches!(e, Error::Spawn { .. }), "{e}");
        assert_eq!(run("sh", &["-c", "echo hi"]).unwrap(), "hi\n");
    }
}
