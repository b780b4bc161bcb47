//! `tcpaccel gather` as a user runs it (issue 28): `status --json` answers
//! with JSON even with no clients, `send` reports the streams it used, and
//! `serve` says where it listens and outlives a stray SIGHUP.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

mod common;
use common::{bin, Reaper};

/// Starts `gather serve` on a free loopback port; the process and its address.
fn serve() -> (Reaper, String) {
    let mut srv = Reaper(
        Command::new(bin())
            .args([
                "gather",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--buffer-pool",
                "1MB",
                "--class",
                "a=20mbit",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn gather serve"),
    );
    let mut err = BufReader::new(srv.0.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        assert!(err.read_line(&mut line).unwrap() > 0, "no start line; got:\n{seen}");
        if let Some(rest) = line.split("listening on ").nth(1) {
            let addr = rest.split_whitespace().next().unwrap().to_string();
            // Keep draining stderr so the server never blocks on it.
            std::thread::spawn(move || for _ in err.lines() {});
            return (srv, addr);
        }
        seen.push_str(&line);
    }
}

#[test]
fn status_json_with_no_clients_is_valid_json() {
    let (_srv, addr) = serve();
    let out = Command::new(bin()).args(["gather", "status", "--server", &addr, "--json"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text:?}"));
    assert_eq!(v["type"], "status_reply");
    assert_eq!(v["clients"], serde_json::json!([]));
}

/// A short transfer's only stream may finish before the client's loop looks
/// at its stream count again: it reported "up to 0 streams".
#[test]
fn send_reports_the_streams_it_used() {
    let (_srv, addr) = serve();
    for _ in 0..3 {
        let out = Command::new(bin())
            .args(["gather", "send", "--server", &addr, "--class", "a", "--bytes", "1KB", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(v["report"]["max_streams"].as_u64().unwrap() >= 1, "{v}");
        assert_eq!(v["report"]["complete"], true);
    }
    let out = Command::new(bin())
        .args(["gather", "send", "--server", &addr, "--class", "nope", "--bytes", "1KB"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // The code by its wire name, not a Rust Debug form such as (UnknownClass).
    assert!(err.contains("(unknown_class)") && !err.contains("UnknownClass"), "{err}");
}

/// `gather serve` reloads nothing; a SIGHUP (sent to every service by a
/// careless `pkill -HUP`, or a closed terminal) is said and ignored, and the
/// server still answers and stops with 0 on SIGTERM. Before, SIGHUP's
/// default action ended it (exit 129).
#[test]
fn serve_outlives_a_sighup_and_stops_cleanly_on_sigterm() {
    let (mut srv, addr) = serve();
    let pid = srv.0.id().to_string();
    assert!(Command::new("kill").args(["-HUP", &pid]).status().unwrap().success());
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(srv.0.try_wait().unwrap().is_none(), "gather serve ended on SIGHUP");
    let out = Command::new(bin()).args(["gather", "status", "--server", &addr, "--json"]).output().unwrap();
    assert!(out.status.success(), "no answer after SIGHUP: {out:?}");
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    assert_eq!(srv.0.wait().unwrap().code(), Some(0));
}
