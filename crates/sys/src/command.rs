//! The one runner of helper programs (`ip`, `tc`, `kill`): the exit status is
//! checked, and a failure carries the whole command line and its stderr.
//!
//! Routes, addresses, qdiscs and namespaces are configured through iproute2
//! rather than raw rtnetlink (as Mininet does): its messages are the ones an
//! operator can retype. Nothing here knows about topologies; callers build
//! the argument lists and parse the output (`ip -j` prints JSON).

use std::io::Write;
use std::process::{Command, Stdio};

/// A helper program that could not be run or did not exit 0.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The program ran and failed.
    #[error("`{cmd}` failed ({status}): {stderr}")]
    Failed { cmd: String, status: String, stderr: String },
    /// The program could not be started at all (not installed, ...).
    #[error("cannot run `{cmd}`: {source}")]
    Spawn { cmd: String, source: std::io::Error },
}

impl CommandError {
    /// True when the program said it lacks privilege (EPERM/EACCES text), or
    /// could not be started for lack of permission.
    pub fn is_privilege(&self) -> bool {
        match self {
            CommandError::Failed { stderr, .. } => {
                stderr.contains("Operation not permitted") || stderr.contains("Permission denied")
            }
            CommandError::Spawn { source, .. } => source.kind() == std::io::ErrorKind::PermissionDenied,
        }
    }

    /// The command line that failed.
    pub fn cmd(&self) -> &str {
        match self {
            CommandError::Failed { cmd, .. } | CommandError::Spawn { cmd, .. } => cmd,
        }
    }
}

/// Runs `program args..` with no input, returning its stdout.
pub fn run(program: &str, args: &[&str]) -> Result<String, CommandError> {
    run_with_input(program, args, None)
}

/// Runs `program args..`, writing `input` to its stdin (for `ip -batch -`),
/// and returns its stdout.
pub fn run_with_input(program: &str, args: &[&str], input: Option<&str>) -> Result<String, CommandError> {
    let cmd = std::iter::once(program).chain(args.iter().copied()).collect::<Vec<_>>().join(" ");
    tracing::debug!(%cmd, "run");
    let spawn_err = |source| CommandError::Spawn { cmd: cmd.clone(), source };
    let mut child = Command::new(program)
        .args(args)
        .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_err)?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        // A program that exits early closes its stdin; its status and stderr
        // say why, so a write error here is not the one to report.
        let _ = stdin.write_all(text.as_bytes());
    }
    let out = child.wait_with_output().map_err(spawn_err)?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(CommandError::Failed { cmd, status: out.status.to_string(), stderr });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ip ARGS..`
pub fn ip(args: &[&str]) -> Result<String, CommandError> {
    run("ip", args)
}

/// `tc ARGS..`
pub fn tc(args: &[&str]) -> Result<String, CommandError> {
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
        assert!(!e.is_privilege());
        let e = run("tcpaccel-no-such-program", &[]).unwrap_err();
        assert!(matches!(e, CommandError::Spawn { .. }), "{e}");
        assert_eq!(e.cmd(), "tcpaccel-no-such-program");
        assert_eq!(run("sh", &["-c", "echo hi"]).unwrap(), "hi\n");
        let e =
            run("sh", &["-c", "echo 'RTNETLINK answers: Operation not permitted' >&2; exit 2"]).unwrap_err();
        assert!(e.is_privilege(), "{e}");
    }

    #[test]
    fn input_reaches_stdin() {
        assert_eq!(run_with_input("cat", &[], Some("a\nb\n")).unwrap(), "a\nb\n");
        // A program that does not read its input still reports its own failure.
        let e = run_with_input("sh", &["-c", "exit 4"], Some(&"x".repeat(1 << 20))).unwrap_err();
        assert!(e.to_string().contains('4'), "{e}");
    }
}
