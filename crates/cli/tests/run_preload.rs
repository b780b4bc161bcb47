//! `tcpaccel run` end to end: curl fetches from a local server that trickles
//! its response, and while curl is connected we read curl's socket through
//! sock_diag (as `tcpaccel trace` does) to see the congestion control and
//! pacing cap the shim applied. Loopback only; no root needed.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tcpaccel_sys::diag::{DiagSocketConn, DumpRequest};

mod common;
use common::bin;

/// Serves one HTTP response slowly (about 1.5 s) so the client stays connected.
/// Gives up after 10 s without a client, so a failing client cannot hang the test.
fn trickle_server() -> (u16, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = l.local_addr().unwrap().port();
    l.set_nonblocking(true).unwrap();
    let h = std::thread::spawn(move || {
        let give_up = Instant::now() + Duration::from_secs(10);
        let mut s = loop {
            match l.accept() {
                Ok((s, _)) => break s,
                Err(_) if Instant::now() < give_up => std::thread::sleep(Duration::from_millis(10)),
                Err(_) => return,
            }
        };
        s.set_nonblocking(false).unwrap();
        let mut req = [0u8; 1024];
        let _ = s.read(&mut req);
        let body = vec![b'x'; 30 * 1000];
        let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
        for chunk in body.chunks(1000) {
            if s.write_all(chunk).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    (port, h)
}

/// curl's socket: the connected one whose destination port is the server's.
fn client_socket(port: u16) -> Option<tcpaccel_sys::diag::DiagSocket> {
    let mut conn = DiagSocketConn::open().ok()?;
    let req = DumpRequest { port: Some(port), ..DumpRequest::default() };
    conn.dump(&req).ok()?.into_iter().find(|s| s.dst.port() == port)
}

#[test]
fn curl_socket_gets_rate_and_cc() {
    if Command::new("curl").arg("--version").output().is_err() {
        panic!("curl is required for this test (installed by .ci/run)");
    }
    let (port, server) = trickle_server();
    let log = std::env::temp_dir().join(format!("tcpaccel-preload-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let child = Command::new(bin())
        .args(["run", "--pace-via", "preload", "--pace", "static:20mbit", "--cc", "reno", "--shim-log"])
        .arg(&log)
        .args(["--", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}"])
        .arg(format!("http://127.0.0.1:{port}/"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn tcpaccel run");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut seen = None;
    while Instant::now() < deadline {
        if let Some(s) = client_socket(port) {
            seen = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "curl under tcpaccel run failed: {out:?}");
    server.join().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "200");
    let s = seen.expect("curl's socket never showed up in sock_diag");
    assert_eq!(s.congestion().as_deref(), Some("reno"));
    let info = s.tcp_info().expect("tcp_info in the dump");
    // static:20mbit on the wire = 2_500_000 B/s × 1448/1538 of payload.
    assert_eq!(info.max_pacing_rate, Some(2_353_706));
    let log = std::fs::read_to_string(&log).expect("shim log");
    assert!(
        log.contains("connect") && log.contains("cc=reno") && log.contains("pacing_bytes_per_s=2353706"),
        "{log}"
    );
    assert!(!log.contains("failed"), "{log}");
}

#[test]
fn non_tcp_and_failures_pass_through() {
    // A UDP-only program (python sending a datagram) and an unknown-CC-free
    // run must behave exactly as without the shim.
    let out = Command::new(bin())
        .args(["run", "--pace", "dynamic", "--", "python3", "-c"])
        .arg("import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(('127.0.0.1', 9)); s.send(b'x'); print('ok')")
        .output()
        .expect("spawn");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
    // The program's own exit code comes through.
    let out = Command::new(bin()).args(["run", "--", "sh", "-c", "exit 7"]).output().unwrap();
    assert_eq!(out.status.code(), Some(7));
}

#[test]
fn bad_options_are_refused() {
    let out = Command::new(bin()).args(["run", "--pace", "static:0", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("static:0"));
    let out = Command::new(bin()).args(["run", "--cc", "nosuchcc", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("available"));
}
