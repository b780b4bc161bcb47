//! Root tests of `tcpaccel net` through the binary, as a user drives it from
//! several terminals: `net down` stops what runs inside the network with
//! SIGTERM first (a service prints its summary and exits 0), a second
//! `net up` of one file is refused with the running one's id, and `send --to`
//! takes the network's host names.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

mod common;
use common::bin;

/// Two hosts on a veth pair: quick to build, no emulator.
const PAIR: &str = r#"
[[host]]
name = "h1"
[[host]]
name = "h2"
[[link]]
a = { node = "h1", addr = "10.0.0.1/24" }
b = { node = "h2", addr = "10.0.0.2/24" }
"#;

/// A topology file of this test alone (a second `net up` of a file is
/// refused, so no two tests may share one).
fn topology_file(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tcpaccel-root-net-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("pair.toml");
    std::fs::write(&f, PAIR).unwrap();
    f
}

/// Lines of a child's stdout, as they come.
fn lines(out: ChildStdout) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// Reads lines until one contains `text`; returns it and the lines before it.
fn wait_for(rx: &Receiver<String>, text: &str, what: &str) -> (String, Vec<String>) {
    let mut seen = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(l) if l.contains(text) => return (l, seen),
            Ok(l) => seen.push(l),
            Err(_) => panic!("{what}: no line with {text:?} within 60 s; got {seen:?}"),
        }
    }
}

/// A `net up` in the background; takes its network down if the test fails.
struct Up {
    child: Child,
    out: Receiver<String>,
    run: String,
}

impl Up {
    fn start(file: &std::path::Path, extra: &[&str]) -> Up {
        tcpaccel_sys::testing::require_root();
        let mut child = Command::new(bin())
            .args(["net", "up"])
            .arg(file)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start net up");
        let out = lines(child.stdout.take().unwrap());
        let (first, _) = wait_for(&out, " up from ", "net up");
        let run = first.split_whitespace().nth(1).expect("run ID").to_string();
        Up { child, out, run }
    }

    fn down(&self) -> std::process::Output {
        Command::new(bin()).args(["net", "down", "--run", &self.run]).output().expect("net down")
    }

    /// The rest of `net up`'s output once it has exited, and its exit code.
    fn finish(&mut self) -> (Option<i32>, String) {
        let status = self.child.wait().expect("wait for net up");
        let rest: Vec<String> = self.out.iter().collect();
        (status.code(), rest.join("\n"))
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.down();
            let _ = self.child.wait();
        }
    }
}

fn net_exec(run: &str, host: &str, cmd: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(["net", "exec", "--run", run, host, "--"]).args(cmd);
    c
}

#[test]
fn root_net_down_stops_services_with_sigterm_first() {
    let file = topology_file("down");
    let mut up = Up::start(&file, &[]);
    let tcpaccel = bin();
    let mut recv = net_exec(&up.run, "h2", &[tcpaccel, "recv", "--listen", "10.0.0.2:5201"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start recv");
    let recv_out = lines(recv.stdout.take().unwrap());
    wait_for(&recv_out, "listening on", "recv");
    // One that ignores SIGTERM (so does the sleep it starts): killed after the grace.
    let mut stubborn = net_exec(&up.run, "h1", &["sh", "-c", "trap '' TERM; sleep 60"]).spawn().unwrap();

    // A host name of the network as --to, resolved inside h1.
    let send = net_exec(
        &up.run,
        "h1",
        &[tcpaccel, "send", "--to", "h2:5201", "--bytes", "1MB", "--interval", "off"],
    )
    .output()
    .expect("send");
    let text = String::from_utf8_lossy(&send.stdout);
    assert!(send.status.success(), "send --to h2:5201: {text}{}", String::from_utf8_lossy(&send.stderr));
    assert!(text.contains("sent to 10.0.0.2:5201"), "{text}");

    let down = up.down();
    assert!(down.status.success(), "net down: {}", String::from_utf8_lossy(&down.stderr));
    let status = recv.wait().unwrap();
    let recv_text: Vec<String> = recv_out.iter().collect();
    assert_eq!(status.code(), Some(0), "recv after net down: {status}; output {recv_text:?}");
    assert!(recv_text.iter().any(|l| l.starts_with("summary: 1 connections")), "{recv_text:?}");
    assert!(!stubborn.wait().unwrap().success(), "the stubborn process was killed");

    let (code, text) = up.finish();
    assert_eq!(code, Some(0), "net up after net down: {text}");
    let h1 = format!("tcpaccel-{}-h1", up.run);
    let h2 = format!("tcpaccel-{}-h2", up.run);
    assert!(
        text.lines()
            .any(|l| l.contains("(tcpaccel) in ") && l.contains(&h2) && l.ends_with("stopped by SIGTERM")),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.contains("(sh) in ")
            && l.contains(&h1)
            && l.contains("killed: still running 3s after SIGTERM")),
        "{text}"
    );
}

#[test]
fn root_second_net_up_of_a_file_is_refused_naming_the_run() {
    let file = topology_file("again");
    let up = Up::start(&file, &["--for", "60s"]);
    // The same file by another path: still the same file.
    let dir = file.parent().unwrap();
    let other = dir.join("..").join(dir.file_name().unwrap()).join("pair.toml");
    let again = Command::new(bin()).args(["net", "up"]).arg(&other).args(["--for", "1s"]).output().unwrap();
    let err = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(2), "second net up: {err}");
    assert!(err.contains(&format!("already up as run {}", up.run)) && err.contains("--again"), "{err}");
    let listed = Command::new(bin()).args(["net", "list", "--json"]).output().unwrap();
    let runs = String::from_utf8_lossy(&listed.stdout);
    let from_file = runs
        .lines()
        .filter(|l| {
            l.contains(&*file.file_name().unwrap().to_string_lossy())
                && l.contains(&dir.display().to_string())
        })
        .count();
    assert_eq!(from_file, 1, "one run of the file: {runs}");

    // --again builds the second copy (held for 1 s, then torn down).
    let second = Command::new(bin())
        .args(["net", "up"])
        .arg(&other)
        .args(["--for", "1s", "--again"])
        .output()
        .unwrap();
    assert!(second.status.success(), "net up --again: {}", String::from_utf8_lossy(&second.stderr));
    let out = String::from_utf8_lossy(&second.stdout);
    assert!(out.contains(" up from ") && !out.contains(&format!("run {} up", up.run)), "{out}");
    drop(up);
}
