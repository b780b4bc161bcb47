//! `tcpaccel send` / `tcpaccel recv` end to end on loopback: JSON Lines that
//! decode, exact byte counts with matching checksums, and the exit codes
//! of bad input. No root needed.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

mod common;
use common::{bin, Reaper};

fn json_lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

/// Starts `recv --json` with `extra` on an ephemeral port; returns it, its
/// output after the `listening` line, and its address.
fn start_recv(extra: &[&str]) -> (Reaper, BufReader<std::process::ChildStdout>, String) {
    let mut child = Command::new(bin())
        .args(["recv", "--listen", "127.0.0.1:0", "--json"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn tcpaccel recv");
    let stdout = child.stdout.take().expect("recv stdout");
    let mut reader = BufReader::new(stdout);
    let mut first = String::new();
    reader.read_line(&mut first).expect("listening line");
    let v: Value = serde_json::from_str(&first).expect("listening line is JSON");
    assert_eq!(v["type"], "listening");
    let addr = v["listen"].as_str().expect("listen address").to_string();
    (Reaper(child), reader, addr)
}

fn send(args: &[&str]) -> Output {
    Command::new(bin()).arg("send").args(args).output().expect("run tcpaccel send")
}

#[test]
fn json_transfer_counts_exactly_and_checksums_match() {
    let (mut recv, mut reader, addr) = start_recv(&["--once"]);
    let out =
        send(&["--to", &addr, "--bytes", "3MB", "-P", "2", "--checksum", "--json", "--interval", "50ms"]);
    assert!(out.status.success(), "send failed: {}", String::from_utf8_lossy(&out.stderr));
    let lines = json_lines(&out.stdout);
    let summary = lines.last().expect("a summary line");
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["bytes"], 3_000_000);
    assert_eq!(summary["checksum_ok"], true);
    assert_eq!(summary["streams"].as_array().map(Vec::len), Some(2));
    for l in &lines[..lines.len() - 1] {
        assert_eq!(l["type"], "interval", "{l}");
        assert!(l["goodput_bps"].is_u64());
    }
    // The receiver exits by itself after the one complete run (--once).
    let status = recv.0.wait().expect("recv exits");
    assert!(status.success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut reader, &mut rest).unwrap();
    let rlines = json_lines(rest.as_bytes());
    let conns: Vec<&Value> = rlines.iter().filter(|l| l["type"] == "connection").collect();
    assert_eq!(conns.len(), 2, "{rest}");
    assert!(conns.iter().all(|c| c["status"] == "ok" && c["sha256"].is_string()));
    let rsum = rlines.last().unwrap();
    assert_eq!(rsum["type"], "summary");
    assert_eq!(rsum["bytes"], 3_000_000);
    assert_eq!(rsum["sessions_complete"], 1);
}

#[test]
fn send_to_takes_a_host_name() {
    let (mut recv, _reader, addr) = start_recv(&["--once"]);
    let port = addr.rsplit_once(':').unwrap().1;
    let out = send(&["--to", &format!("localhost:{port}"), "--bytes", "100KB", "--interval", "off"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(&format!("sent to 127.0.0.1:{port} 97.66 KiB")), "{text}");
    assert!(recv.0.wait().unwrap().success());
}

#[test]
fn text_reverse_run_prints_a_summary() {
    let (mut recv, _reader, addr) = start_recv(&["--once"]);
    let out = send(&["--to", &addr, "--bytes", "1MiB", "--reverse", "--checksum", "--interval", "off"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("received from"), "{text}");
    assert!(text.contains("checksums match"), "{text}");
    assert!(recv.0.wait().unwrap().success());
}

#[test]
fn bad_input_is_a_usage_error() {
    for (args, needle) in [
        (vec![], "--to"),
        (vec!["--to", "localhost"], "HOST:PORT"),
        (vec!["--to", "no-such-host.invalid:5201"], "the resolver does not know it"),
        (vec!["--to", "127.0.0.1:9", "--pace", "static:0"], "rate"),
        (vec!["--to", "127.0.0.1:9", "--pace", "static:-20mbit"], "negative"),
        (vec!["--to", "127.0.0.1:9", "--pace", "static:fast"], "rate"),
        (vec!["--to", "127.0.0.1:9", "--pace", "dynamic=fast"], "dynamic"),
        (vec!["--to", "127.0.0.1:9", "--pace", "dynamic:0"], "rate"),
        (vec!["--to", "127.0.0.1:9", "--burst", "0"], "above zero"),
        (vec!["--to", "127.0.0.1:9", "--burst", "1MB", "--every", "0s"], "above zero"),
        (vec!["--to", "127.0.0.1:9", "--burst", "1MB", "-P", "2"], "one plain TCP upload"),
        (vec!["--to", "127.0.0.1:9", "--duration", "soon"], "duration"),
        (vec!["--to", "127.0.0.1:9", "--bytes", "0"], "above zero"),
        (vec!["--to", "127.0.0.1:9", "-P", "0"], "parallel"),
        (vec!["--to", "127.0.0.1:9", "--interval", "1ms"], "interval"),
    ] {
        let out = send(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn unreachable_receiver_and_unknown_cc_have_their_codes() {
    // A port with no listener: a runtime (network) failure.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    drop(l);
    let out = send(&["--to", &addr, "--bytes", "1000"]);
    assert_eq!(out.status.code(), Some(5), "{}", String::from_utf8_lossy(&out.stderr));
    let out = send(&["--to", &addr, "--cc", "no-such-cc"]);
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn recv_prints_its_summary_on_sigint() {
    // Without --once: it serves until the signal.
    let (mut recv, mut reader, addr) = start_recv(&[]);
    let out = send(&["--to", &addr, "--bytes", "100000", "--interval", "off"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let kill = Command::new("kill").args(["-INT", &recv.0.id().to_string()]).status().expect("kill(1)");
    assert!(kill.success());
    let status = recv.0.wait().expect("recv exits on SIGINT");
    assert_eq!(status.code(), Some(0));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut reader, &mut rest).unwrap();
    let lines = json_lines(rest.as_bytes());
    let summary = lines.last().expect("a summary after SIGINT");
    assert_eq!(summary["type"], "summary", "{rest}");
    assert_eq!(summary["bytes"], 100_000);
}

#[test]
fn send_stops_in_order_on_sigint() {
    let (_recv, _reader, addr) = start_recv(&["--once"]);
    let child = Command::new(bin())
        .args([
            "send",
            "--to",
            &addr,
            "--duration",
            "30s",
            "--pace",
            "static:50mbit",
            "--json",
            "--interval",
            "100ms",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tcpaccel send");
    let mut send = Reaper(child);
    let stdout = send.0.stdout.take().unwrap();
    let mut reader = BufReader::new(stdout);
    let mut first = String::new();
    reader.read_line(&mut first).expect("a first interval");
    assert_eq!(serde_json::from_str::<Value>(&first).unwrap()["type"], "interval");
    let t = std::time::Instant::now();
    assert!(Command::new("kill").args(["-INT", &send.0.id().to_string()]).status().unwrap().success());
    let status = send.0.wait().expect("send exits");
    assert!(t.elapsed() < std::time::Duration::from_secs(10), "took {:?}", t.elapsed());
    assert_eq!(status.code(), Some(130));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut reader, &mut rest).unwrap();
    let summary = json_lines(rest.as_bytes()).pop().expect("a summary");
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["stopped_early"], true);
    assert!(summary["bytes"].as_u64().unwrap() > 0);
}

#[test]
fn burst_mode_reports_each_burst_and_the_receiver_counts_them_all() {
    let (mut recv, _reader, addr) = start_recv(&["--once"]);
    let out = send(&[
        "--to",
        &addr,
        "--burst",
        "2MB",
        "--every",
        "200ms",
        "--duration",
        "1s",
        "--resume-pacing",
        "--pace",
        "dynamic",
        "--json",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let bursts: Vec<&serde_json::Value> = lines.iter().filter(|v| v["type"] == "burst").collect();
    assert!((4..=5).contains(&bursts.len()), "{text}");
    for b in &bursts {
        let c = b["completion_ms"].as_f64().expect("every burst completes on loopback");
        assert!(c > 0.0 && c < 200.0, "{text}");
    }
    let summary = lines.last().unwrap();
    assert_eq!(summary["type"], "burst_summary");
    assert_eq!(summary["bytes"].as_u64(), Some(2_000_000 * bursts.len() as u64), "{text}");
    assert!(recv.0.wait().unwrap().success());
}
