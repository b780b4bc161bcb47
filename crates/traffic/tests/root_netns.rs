//! Root test: the receiver and the sender create their sockets on the
//! calling thread, so a thread that entered a network namespace gets sockets
//! inside it (what the lab relies on). CI runs as root; without root this
//! test fails loudly rather than skipping. The namespaces are
//! `tcpaccel_sys::testing::TestNetns`, deleted on drop (also on panic).

use std::time::Duration;

use tcpaccel_sys::testing::TestNetns;
use tcpaccel_traffic::{run_send, spawn_recv, RecvConfig, SendConfig, Volume};

#[test]
fn root_sockets_live_in_the_callers_namespace() {
    tcpaccel_sys::testing::require_root();
    let t = TestNetns::one("traffic");
    let ns = t.name().to_string();
    let handle =
        tcpaccel_sys::netns::run_in(&ns, || spawn_recv(RecvConfig::new("127.0.0.1:0".parse().unwrap())))
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
    let summary = tcpaccel_sys::netns::run_in(&ns, move || {
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
    drop(t);
}

/// Two namespaces joined by a veth pair with a 1500-byte MTU: the sender
/// detects Ethernet framing (1448 of 1538 bytes) from TCP_INFO, and static
/// pacing at 20 Mbit/s on the wire gives 20 × 1448/1538 = 18.83 Mbit/s of
/// goodput in the steady state.
#[test]
fn root_static_pacing_over_a_1500_mtu_veth_uses_ethernet_framing() {
    tcpaccel_sys::testing::require_root();
    let t = TestNetns::new("traffic", &["a", "b"]);
    let (a, b) = (t.ns("a").to_string(), t.ns("b").to_string());
    let (va, vb) = ("tcpva", "tcpvb");
    t.veth((&a, va), (&b, vb));
    t.ip(&a, &["link", "set", va, "mtu", "1500"]);
    t.ip(&b, &["link", "set", vb, "mtu", "1500"]);
    t.addr(&a, va, "10.250.0.1/24");
    t.addr(&b, vb, "10.250.0.2/24");
    let handle =
        tcpaccel_sys::netns::run_in(&b, || spawn_recv(RecvConfig::new("10.250.0.2:0".parse().unwrap())))
            .expect("enter namespace")
            .expect("receiver");
    let addr = handle.local_addr();
    let wire = tcpaccel_core::units::Rate::mbps(20);
    let (summary, reports) = tcpaccel_sys::netns::run_in(&a, move || {
        let mut cfg = SendConfig::new(addr);
        cfg.volume = Volume::Duration(Duration::from_millis(2500));
        cfg.pace = tcpaccel_traffic::Pace::Static(wire);
        cfg.interval = Some(Duration::from_millis(250));
        let mut reports = Vec::new();
        let s = run_send(cfg, |r| reports.push(r.clone()));
        (s, reports)
    })
    .expect("enter namespace");
    let summary = summary.expect("paced send over veth");
    let st = &summary.streams[0];
    assert_eq!(st.framing, tcpaccel_traffic::Framing::ETHERNET_1500_TS);
    let target = st.framing.goodput(wire).bits_per_sec() as f64;
    let (mut bytes, mut secs) = (0u64, 0.0f64);
    for tcpaccel_traffic::Report::Interval(i) in &reports {
        if i.start_s >= 0.24 && i.end_s <= 2.5 && i.end_s - i.start_s >= 0.1 {
            bytes += i.bytes;
            secs += i.end_s - i.start_s;
        }
    }
    assert!(secs >= 1.0, "steady state of only {secs} s");
    let ratio = bytes as f64 * 8.0 / secs / target;
    eprintln!("veth steady goodput ratio {ratio:.4} of {target} bit/s");
    assert!((0.9..=1.1).contains(&ratio), "steady goodput ratio {ratio:.3} of {target}");
    handle.stop();
    drop(t);
}
