//! Out of file descriptors: the relay must back off instead of spinning on a
//! listener that stays readable, and serve again once descriptors are free.
//!
//! The relay runs in a child process (this test binary re-executed under
//! `prlimit --nofile`, running this same test with `CHILD_ENV` set, which
//! then serves instead of testing) so the low limit touches nothing else.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use tcpaccel_relay::{Config, Settings};

mod common;
use common::{
    connect_req, echo_server, is_child, serve_until_stdin_closes, socks_connect, spawn_limited_child,
    stop_child,
};

const CHILD_ENV: &str = "TCPACCEL_RELAY_EMFILE_CHILD";

/// The relay of the child process (under the low descriptor limit).
fn relay_child() {
    let raw = Settings {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        handshake_timeout: Some(Duration::from_secs(60)),
        ..Default::default()
    };
    let cfg = Config::from_settings(&raw).expect("config");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    serve_until_stdin_closes(cfg, rt);
}

fn cpu_of(pid: u32) -> Duration {
    let mut ns = 0u64;
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).expect("task dir").flatten() {
        if let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) {
            ns += s.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    Duration::from_nanos(ns)
}

#[test]
fn accept_backs_off_when_out_of_descriptors() {
    if is_child(CHILD_ENV) {
        return relay_child();
    }
    let (child, mut lines, addr) =
        spawn_limited_child(40, "accept_backs_off_when_out_of_descriptors", CHILD_ENV);
    let pid = child.id();
    // Silent clients each hold a descriptor in the relay (handshake timeout 60 s),
    // far more than the limit allows: accept starts failing with EMFILE.
    let hogs: Vec<TcpStream> = (0..60).map(|_| TcpStream::connect(addr).expect("backlog accepts")).collect();
    std::thread::sleep(Duration::from_millis(300));
    let c0 = cpu_of(pid);
    std::thread::sleep(Duration::from_secs(1));
    let burned = cpu_of(pid) - c0;
    // A busy accept loop burns about a full second here; backing off burns nearly nothing.
    assert!(
        burned < Duration::from_millis(400),
        "relay used {burned:?} of CPU in 1 s while out of descriptors"
    );
    drop(hogs);
    // Descriptors are free again: a normal SOCKS connection is served.
    let echo = echo_server();
    let (mut s, code) = socks_connect(addr, &connect_req(echo));
    assert_eq!(code, 0, "served after descriptors were freed");
    s.write_all(b"back").expect("write");
    let mut b = [0u8; 4];
    s.read_exact(&mut b).expect("echo");
    assert_eq!(&b, b"back");
    drop(s);
    let stats = stop_child(child, &mut lines);
    let exhausted = stats["errors"]["accept_fd_exhausted"].as_u64().unwrap_or(0);
    assert!(exhausted >= 1, "the test never ran the relay out of descriptors: {stats}");
    // Backoff doubles from 10 ms to 1 s: a handful of failed accepts, not thousands.
    assert!(exhausted < 100, "accept retried {exhausted} times: {stats}");
}
