//! A `tcpaccel recv` started on the far host over the system's OpenSSH
//! client, for `tcpaccel compare --remote ssh://[USER@]HOST[:PORT]`: no agent
//! of our own, only what `ssh` can already do there.
//!
//! The remote command runs `tcpaccel recv --json` in the background and then
//! reads its standard input until it ends; when we close our end (or die),
//! the remote shell kills the receiver. The receiver's `listening` line
//! gives the port it bound. `BatchMode=yes`: ssh never prompts, so a host
//! that wants a password fails at once, saying so, instead of hanging.
//!
//! The parsing and the command line are pure ([`SshTarget::parse`],
//! [`SshTarget::command`], [`listening_port`]); [`RemoteRecv`] is the shell.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Where and how to reach the far host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    pub user: Option<String>,
    pub host: String,
    /// sshd's port (ssh's own default when `None`).
    pub port: Option<u16>,
}

/// A bad `--remote` or a remote receiver that did not come up.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("--remote {given:?}: {why} (expected ssh://[USER@]HOST[:PORT])")]
    Url { given: String, why: &'static str },
    #[error("--remote-tcpaccel {0:?}: only letters, digits and / . _ - + are accepted in the remote path")]
    Path(String),
    #[error("starting ssh: {0}")]
    Spawn(std::io::Error),
    #[error("the remote `tcpaccel recv` did not say it was listening within {secs} s; ssh said: {stderr}")]
    NotReady { secs: u64, stderr: String },
}

impl SshTarget {
    /// `ssh://[USER@]HOST[:PORT]`, HOST a name, an IPv4 address or `[IPv6]`.
    pub fn parse(url: &str) -> Result<SshTarget, RemoteError> {
        let bad = |why| RemoteError::Url { given: url.to_string(), why };
        let rest = url.strip_prefix("ssh://").ok_or(bad("not an ssh:// address"))?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains('/') {
            return Err(bad("a path is not accepted (use --remote-tcpaccel for the program's path)"));
        }
        let (user, hostport) = match rest.rsplit_once('@') {
            Some((u, h)) if !u.is_empty() => (Some(u.to_string()), h),
            Some(_) => return Err(bad("empty user name before '@'")),
            None => (None, rest),
        };
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or(bad("'[' without ']'"))?;
            match after {
                "" => (h, None),
                p => (h, Some(p.strip_prefix(':').ok_or(bad("junk after ']'"))?)),
            }
        } else {
            match hostport.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        if host.starts_with('-') || host.chars().any(|c| c.is_whitespace()) {
            return Err(bad("not a host name"));
        }
        let port = match port {
            None => None,
            Some(p) => Some(p.parse::<u16>().ok().filter(|&p| p > 0).ok_or(bad("the port is not 1–65535"))?),
        };
        Ok(SshTarget { user, host: host.to_string(), port })
    }

    /// The `ssh` argument list (without `ssh` itself) that starts the
    /// receiver on `listen_port` (0: any free port) with `tcpaccel` at
    /// `program`, passing each of `options` as `-o OPTION`.
    pub fn command(
        &self,
        program: &str,
        listen_port: u16,
        options: &[String],
    ) -> Result<Vec<String>, RemoteError> {
        if program.is_empty() || !program.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c)) {
            return Err(RemoteError::Path(program.to_string()));
        }
        let mut args = vec!["-T".to_string(), "-o".into(), "BatchMode=yes".into()];
        for o in options {
            args.push("-o".into());
            args.push(o.clone());
        }
        if let Some(p) = self.port {
            args.push("-p".into());
            args.push(p.to_string());
        }
        args.push(match &self.user {
            Some(u) => format!("{u}@{}", self.host),
            None => self.host.clone(),
        });
        args.push("--".into());
        // One word for the remote shell: the receiver in the background, then
        // wait for our stdin to end, then stop it.
        args.push(format!(
            "sh -c '{program} recv --listen [::]:{listen_port} --json & p=$!; cat >/dev/null; kill $p 2>/dev/null; wait $p'"
        ));
        Ok(args)
    }
}

/// The port of a `tcpaccel recv --json` `listening` line, if it is one.
pub fn listening_port(line: &str) -> Option<u16> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    if v.get("type")?.as_str()? != "listening" {
        return None;
    }
    let listen: std::net::SocketAddr = v.get("listen")?.as_str()?.parse().ok()?;
    Some(listen.port())
}

/// A receiver running on the far host for as long as this value lives.
pub struct RemoteRecv {
    child: Child,
    stdin: Option<ChildStdin>,
    /// The port the remote receiver listens on.
    pub port: u16,
}

impl RemoteRecv {
    /// Starts the receiver (`ssh ARGS`) and waits up to `ready` for its
    /// `listening` line.
    pub fn start(args: &[String], ready: Duration) -> Result<RemoteRecv, RemoteError> {
        Self::start_with("ssh", args, ready)
    }

    fn start_with(program: &str, args: &[String], ready: Duration) -> Result<RemoteRecv, RemoteError> {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(RemoteError::Spawn)?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(p) = listening_port(&line) {
                    let _ = tx.send(p);
                }
                // Later lines (connections, summaries) are read and let go,
                // so the remote side never blocks on a full pipe.
            }
        });
        match rx.recv_timeout(ready) {
            Ok(port) => {
                // ssh's stderr (banners, warnings) is drained in the background.
                std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
                Ok(RemoteRecv { child, stdin, port })
            }
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let mut text = String::new();
                let _ = stderr.read_to_string(&mut text);
                let text = text.trim();
                Err(RemoteError::NotReady {
                    secs: ready.as_secs(),
                    stderr: if text.is_empty() { "nothing".into() } else { text.to_string() },
                })
            }
        }
    }

    /// Stops the remote receiver (closing its stdin) and waits for ssh to end.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        drop(self.stdin.take());
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RemoteRecv {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            self.shutdown();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_with_user_port_and_ipv6() {
        let t = |u: &str| SshTarget::parse(u).unwrap();
        assert_eq!(
            t("ssh://dc2.example.org"),
            SshTarget { user: None, host: "dc2.example.org".into(), port: None }
        );
        assert_eq!(
            t("ssh://ops@10.0.0.2:2222/"),
            SshTarget { user: Some("ops".into()), host: "10.0.0.2".into(), port: Some(2222) }
        );
        assert_eq!(
            t("ssh://me@[fd00::2]:22"),
            SshTarget { user: Some("me".into()), host: "fd00::2".into(), port: Some(22) }
        );
        assert_eq!(t("ssh://[fd00::2]").host, "fd00::2");
    }

    #[test]
    fn bad_addresses_say_what_is_wrong() {
        let e = |u: &str| SshTarget::parse(u).unwrap_err().to_string();
        assert!(e("dc2.example.org").contains("not an ssh:// address"));
        assert!(e("ssh://h:0").contains("not 1–65535"));
        assert!(e("ssh://h:ssh").contains("not 1–65535"));
        assert!(e("ssh://@h").contains("empty user"));
        assert!(e("ssh://").contains("no host"));
        assert!(e("ssh://-oProxyCommand=x").contains("not a host name"));
        assert!(e("ssh://h/usr/bin").contains("a path is not accepted"));
        assert!(e("ssh://[fd00::2").contains("without ']'"));
    }

    #[test]
    fn the_command_starts_recv_and_stops_it_when_stdin_ends() {
        let t = SshTarget::parse("ssh://ops@dc2:2222").unwrap();
        let a = t.command("/opt/tcpaccel/bin/tcpaccel", 0, &["IdentityFile=/k".into()]).unwrap();
        assert_eq!(
            a,
            [
                "-T",
                "-o",
                "BatchMode=yes",
                "-o",
                "IdentityFile=/k",
                "-p",
                "2222",
                "ops@dc2",
                "--",
                "sh -c '/opt/tcpaccel/bin/tcpaccel recv --listen [::]:0 --json & p=$!; cat >/dev/null; kill $p 2>/dev/null; wait $p'",
            ]
        );
        assert!(
            t.command("tcpaccel; rm -rf /", 0, &[]).is_err(),
            "nothing the remote shell would read as more"
        );
        assert!(t.command("", 0, &[]).is_err());
    }

    #[test]
    fn the_listening_line_gives_the_port() {
        assert_eq!(listening_port(r#"{"type":"listening","listen":"[::]:41234"}"#), Some(41234));
        assert_eq!(listening_port(r#"{"type":"listening","listen":"0.0.0.0:5201"}"#), Some(5201));
        assert_eq!(listening_port(r#"{"type":"connection","listen":"0.0.0.0:5201"}"#), None);
        assert_eq!(listening_port("listening on 0.0.0.0:5201"), None);
    }

    /// The shell against a stand-in for ssh: a script that runs the remote
    /// command locally, so the start, the port and the stop are real.
    #[test]
    fn a_stand_in_ssh_starts_and_stops_the_receiver() {
        let dir = std::env::temp_dir().join(format!("tcpaccel-remote-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fake = dir.join("tcpaccel");
        // A "tcpaccel" that prints the listening line and sleeps until killed.
        std::fs::write(
            &fake,
            "#!/bin/sh\necho '{\"type\":\"listening\",\"listen\":\"[::]:40404\"}'\nexec sleep 30\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Run the last argument (the remote command) with sh, as sshd would.
        let t = SshTarget::parse("ssh://localhost").unwrap();
        let args = t.command(fake.to_str().unwrap(), 0, &[]).unwrap();
        let remote = ["-c".to_string(), args.last().unwrap().clone()];
        let r = RemoteRecv::start_with("sh", &remote, Duration::from_secs(5)).expect("ready");
        assert_eq!(r.port, 40404);
        let started = std::time::Instant::now();
        r.stop();
        assert!(started.elapsed() < Duration::from_secs(3), "closing stdin stops it, not the 5 s fallback");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
