//! `tcpaccel relay` as a service is run (issue 26 items 8-10, issue 28):
//! a start line, logs without terminal colours when stderr is not a
//! terminal, one record per connection, no Rust Debug forms, the open-file
//! limit raised, and the file's `log` key honoured. Loopback only.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{bin, echo_server as echo, free_port, Reaper};

/// One SOCKS5 CONNECT through `relay` to `target`, a byte echoed, closed;
/// returns the client's local address.
fn one_connection(relay: &str, target: SocketAddr) -> SocketAddr {
    let mut s = TcpStream::connect(relay).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&[5, 1, 0]).unwrap();
    let mut m = [0u8; 2];
    s.read_exact(&mut m).unwrap();
    let SocketAddr::V4(t) = target else { panic!("IPv4 only here") };
    let mut req = vec![5, 1, 0, 1];
    req.extend_from_slice(&t.ip().octets());
    req.extend_from_slice(&t.port().to_be_bytes());
    s.write_all(&req).unwrap();
    let mut rep = [0u8; 10];
    s.read_exact(&mut rep).unwrap();
    assert_eq!(rep[1], 0, "CONNECT refused");
    s.write_all(b"x").unwrap();
    let mut b = [0u8; 1];
    s.read_exact(&mut b).unwrap();
    s.local_addr().unwrap()
}

/// Starts the relay under `prlimit` (soft 1024, hard 4096) with its
/// stderr piped; waits for its start line and returns it.
fn start(args: &[&str]) -> (Reaper, BufReader<std::process::ChildStderr>, String) {
    let mut c = Command::new("prlimit");
    c.args(["--nofile=1024:4096", bin()]).args(args).stdout(Stdio::null()).stderr(Stdio::piped());
    let mut child = Reaper(c.spawn().expect("prlimit (util-linux) runs tcpaccel"));
    let mut err = BufReader::new(child.0.stderr.take().unwrap());
    let mut line = String::new();
    let t0 = Instant::now();
    loop {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "stderr ended before a start line");
        if line.contains("listening on") || line.contains("relay_listening") {
            return (child, err, line);
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "no start line");
    }
}

fn stop(mut r: Reaper, mut err: BufReader<std::process::ChildStderr>) -> String {
    let pid = r.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    assert_eq!(r.0.wait().unwrap().code(), Some(0), "{rest}");
    rest
}

/// The Debug forms a message must not carry (issue 28).
fn assert_no_debug_forms(text: &str) {
    for form in ["Some(", "None", "Socks)", "Forward(", "Port(", "Ip(", "Domain(", "\\\""] {
        assert!(!text.contains(form), "a Rust Debug form {form:?} in:\n{text}");
    }
}

#[test]
fn relay_says_where_it_listens_logs_plainly_once_per_connection_and_raises_its_fd_limit() {
    let target = echo();
    let listen = format!("127.0.0.1:{}", free_port());
    let metrics = free_port().to_string();
    let (relay, mut err, first) =
        start(&["--log", "info", "relay", "--listen", &listen, "--metrics", &metrics]);
    assert!(first.contains(&format!("listening on {listen} (SOCKS5)")), "{first}");
    // Raised to the hard limit given by prlimit.
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", relay.0.id())).unwrap();
    let nofile = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    assert!(nofile.split_whitespace().nth(3) == Some("4096"), "{nofile}");
    let mut metrics_line = String::new();
    err.read_line(&mut metrics_line).unwrap();
    assert!(
        metrics_line.contains(&format!("metrics on http://127.0.0.1:{metrics}/metrics")),
        "{metrics_line}"
    );
    let client = one_connection(&listen, target);
    // A health check: connect and close.
    drop(TcpStream::connect(&listen).unwrap());
    std::thread::sleep(Duration::from_millis(300));
    let rest = stop(relay, err);
    let all = format!("{first}{metrics_line}{rest}");
    assert!(!all.contains('\x1b'), "terminal colour codes on a pipe:\n{all}");
    let about_client = all.lines().filter(|l| l.contains(&client.to_string())).count();
    assert_eq!(about_client, 1, "one record for the connection:\n{all}");
    assert!(all.contains("closed before sending anything"), "{all}");
    assert_no_debug_forms(&all);
}

#[test]
fn relay_json_logs_write_one_json_record_per_connection_and_the_file_sets_the_log_filter() {
    let target = echo();
    let listen = format!("127.0.0.1:{}", free_port());
    let dir = std::env::temp_dir().join(format!("tcpaccel-relaylog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("relay.toml");
    std::fs::write(&file, format!("listen = \"{listen}\"\njson_logs = true\nlog = \"info\"\n")).unwrap();
    let (relay, err, first) = start(&["relay", "--config", file.to_str().unwrap()]);
    let j: serde_json::Value = serde_json::from_str(&first).expect("a JSON start line");
    assert_eq!(j["addr"], listen.as_str());
    let client = one_connection(&listen, target);
    std::thread::sleep(Duration::from_millis(300));
    let rest = stop(relay, err);
    let about: Vec<&str> = rest.lines().filter(|l| l.contains(&client.to_string())).collect();
    assert_eq!(about.len(), 1, "one record for the connection, as JSON:\n{rest}");
    let rec: serde_json::Value = serde_json::from_str(about[0]).expect("JSON");
    assert_eq!(rec["type"], "relay_connection");
    // `log = "info"` from the file is in force: the SIGTERM line is an info event.
    assert!(rest.contains("SIGTERM"), "the file's log filter was not applied:\n{rest}");
    std::fs::remove_dir_all(&dir).unwrap();
}
