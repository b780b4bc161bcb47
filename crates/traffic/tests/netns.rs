//! Root test: the receiver and the sender create their sockets on the
//! calling thread, so a thread that entered a network namespace gets sockets
//! inside it (what the lab relies on). CI runs as root; without root this
//! test fails loudly rather than skipping.

use std::process::Command;
use std::time::Duration;

use tcpaccel_traffic::{run_send, spawn_recv, RecvConfig, SendConfig, Volume};

/// A namespace named `tcpaccel-traffic-<pid>`, deleted on drop (also when
/// the test panics).
struct Netns(String);

impl Netns {
    fn create() -> Netns {
        let name = format!("tcpaccel-traffic-{}", std::process::id());
        let ok = |args: &[&str]| {
            let out = Command::new("ip").args(args).output().expect("run ip(8)");
            assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        ok(&["netns", "add", &name]);
        let ns = Netns(name);
        ok(&["-n", &ns.0, "link", "set", "lo", "up"]);
        ns
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn sockets_live_in_the_callers_namespace() {
    assert!(
        tcpaccel_sys::privilege::is_root(),
        "this test needs root (network namespaces); CI runs it as root"
    );
    let ns = Netns::create();
    let handle =
        tcpaccel_sys::netns::run_in(&ns.0, || spawn_recv(RecvConfig::new("127.0.0.1:0".parse().unwrap())))
            .expect("enter namespace")
            .expect("receiver inside the namespace");
    let addr = handle.local_addr();

    // From the root namespace the port is not our receiver.
    let mut outside = SendConfig::new(addr);
    outside.volume = Volume::Bytes(1000);
    outside.interval = None;
    outside.connect_timeout = Duration::from_secs(2);
    outside.receipt_timeout = Duration::from_secs(2);
    assert!(run_send(outside, |_| {}).is_err(), "reached a receiver that lives in another namespace");

    // From inside, the transfer completes exactly.
    let n = 2_000_000 + 5;
    let summary = tcpaccel_sys::netns::run_in(&ns.0, move || {
        let mut cfg = SendConfig::new(addr);
        cfg.volume = Volume::Bytes(n);
        cfg.parallel = 2;
        cfg.checksum = true;
        cfg.interval = Some(Duration::from_millis(100));
        run_send(cfg, |_| {})
    })
    .expect("enter namespace")
    .expect("send inside the namespace");
    assert_eq!(summary.bytes, n);
    assert_eq!(summary.checksum_ok, Some(true));
    let rs = handle.stop();
    assert_eq!(rs.ok, 2);
    assert_eq!(rs.bytes, n);
    drop(ns);
}
