//! Root test: a chain h1 — r1 — h2 of plain veth links with a tbf-shaped hop,
//! routes, sysctls and IPv6, built and torn down. Fails loudly without root.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use tcpaccel_net::{clean, Network, Topology};

const CHAIN: &str = r#"
[[host]]
name = "h1"
route = [{ to = "default", via = "10.1.1.2" }, { to = "fd00:2::/64", via = "fd00:1::2" }]
sysctl = { "net.ipv4.tcp_congestion_control" = "reno", "net.ipv4.tcp_ecn" = 1 }

[[router]]
name = "r1"

[[host]]
name = "h2"
route = [{ to = "10.1.1.0/24", via = "10.1.2.1" }, { to = "fd00:1::/64", via = "fd00:2::1" }]

[[link]]
name = "left"
offloads = false
a = { node = "h1", addr = "10.1.1.1/24", addr6 = "fd00:1::1/64" }
b = { node = "r1", addr = "10.1.1.2/24", addr6 = "fd00:1::2/64", ifname = "left" }

[[link]]
name = "right"
a = { node = "r1", addr = "10.1.2.1/24", addr6 = "fd00:2::1/64", ifname = "right" }
b = { node = "h2", addr = "10.1.2.2/24", addr6 = "fd00:2::2/64" }
rate = "20mbit"
buffer = "64KB"
mtu = 1400
txqueuelen = 500
"#;

fn output(net: &Network, node: &str, argv: &[&str]) -> String {
    let out = net.exec(node, argv).unwrap().output().expect("spawn ip netns exec");
    assert!(out.status.success(), "{argv:?} in {node}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A TCP handshake from `from` to a listener in `to` at `addr` (no ping here).
fn reach(net: &Network, from: &str, to: &str, addr: SocketAddr) {
    let l = net.run_in(to, move || TcpListener::bind(addr)).unwrap().expect("bind");
    let c = net.run_in(from, move || TcpStream::connect_timeout(&addr, Duration::from_secs(5))).unwrap();
    c.unwrap_or_else(|e| panic!("{from} -> {to} {addr}: {e}"));
    drop(l);
}

#[test]
fn root_chain_of_veths_routes_shapes_and_tears_down() {
    tcpaccel_sys::testing::require_root();
    let topo = Topology::from_toml_str(CHAIN).expect("valid topology");
    let net = Network::up(&topo).expect("network up");
    let run = net.run_id().to_string();
    let prefix = format!("tcpaccel-{run}-");
    assert_eq!(run.len(), 6);
    assert_eq!(
        clean::namespaces_with_prefix(&prefix).unwrap(),
        vec![format!("{prefix}h1"), format!("{prefix}h2"), format!("{prefix}r1")]
    );

    // Sysctls: per namespace, not global.
    assert_eq!(output(&net, "h1", &["cat", "/proc/sys/net/ipv4/tcp_congestion_control"]).trim(), "reno");
    assert_eq!(output(&net, "r1", &["cat", "/proc/sys/net/ipv4/ip_forward"]).trim(), "1");
    assert_eq!(output(&net, "h2", &["cat", "/proc/sys/net/ipv4/ip_forward"]).trim(), "0");
    assert_eq!(net.sysctl("h1", "net.ipv4.tcp_ecn").unwrap(), "1");
    net.set_sysctl("h2", "net.ipv4.tcp_ecn", "2").unwrap();
    assert_eq!(net.sysctl("h2", "net.ipv4.tcp_ecn").unwrap(), "2");
    assert_eq!(net.sysctl("h1", "net.ipv4.tcp_ecn").unwrap(), "1", "sysctls are per namespace");
    assert!(net
        .set_sysctl("h2", "net.ipv4.no_such", "1")
        .unwrap_err()
        .to_string()
        .contains("no such sysctl"));
    // Qdiscs on the shaped hop, in each direction's egress.
    let q = output(&net, "r1", &["tc", "qdisc", "show", "dev", "right"]);
    assert!(q.contains("tbf") && q.contains("20Mbit") && q.contains("bfifo") && q.contains("64000b"), "{q}");
    let q = output(&net, "h2", &["tc", "qdisc", "show", "dev", "eth0"]);
    assert!(q.contains("tbf"), "{q}");
    let off = |node: &str, ifname: &'static str| {
        net.run_in(node, move || tcpaccel_sys::ethtool::offloads(ifname)).unwrap().expect("offloads")
    };
    assert!(off("h1", "eth0").all_off() && off("r1", "left").all_off(), "offloads = false on link left");
    assert!(!off("r1", "right").all_off(), "link right keeps the veth default offloads");
    let l = output(&net, "h2", &["ip", "link", "show", "eth0"]);
    assert!(l.contains("mtu 1400") && l.contains("qlen 500"), "{l}");

    // Routed reachability, IPv4 and IPv6, across the router.
    reach(&net, "h1", "h2", "[fd00:2::2]:5202".parse().unwrap());
    reach(&net, "h2", "h1", "10.1.1.1:5203".parse().unwrap());

    // A TCP transfer through the 20 Mbit/s hop takes at least its serialization time.
    let server_addr: SocketAddr = "10.1.2.2:5201".parse().unwrap();
    let listener = net.run_in("h2", move || TcpListener::bind(server_addr)).unwrap().expect("bind in h2");
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        let mut buf = vec![0u8; 65536];
        let mut total = 0usize;
        loop {
            match s.read(&mut buf) {
                Ok(0) => break total,
                Ok(n) => total += n,
                Err(e) => panic!("read: {e}"),
            }
        }
    });
    let bytes = 2_000_000usize;
    let client = net
        .run_in("h1", move || TcpStream::connect_timeout(&server_addr, Duration::from_secs(5)))
        .unwrap()
        .expect("connect from h1");
    let t0 = Instant::now();
    let mut c = client;
    c.write_all(&vec![7u8; bytes]).expect("send");
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let got = server.join().unwrap();
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(got, bytes);
    let mbit = bytes as f64 * 8.0 / secs / 1e6;
    // 20 Mbit/s on the wire: payload goodput can only be lower (wide margin up).
    assert!(mbit < 21.0, "goodput {mbit:.1} Mbit/s through a 20 Mbit/s tbf");
    eprintln!("chain: {mbit:.1} Mbit/s through the 20 Mbit/s hop");

    // gso_max_segs is set on h1's end of "left" only, and read back there.
    let gso = |node: &str, dev: &str| {
        let dev = dev.to_string();
        net.run_in(node, move || {
            tcpaccel_sys::link::ifindex(&dev).and_then(tcpaccel_sys::link::link_gso).expect("link gso")
        })
        .unwrap()
        .gso_max_segs
    };
    let before = gso("r1", "left");
    net.set_gso_max_segs("h1", "left", 1).expect("gso_max_segs");
    assert_eq!(gso("h1", &net.end("h1", "left").unwrap().ifname), 1);
    assert_eq!(gso("r1", "left"), before, "the peer end keeps its limit");
    assert!(before > 1, "a veth allows more than one segment: {before}");

    // The accessors agree with the file.
    assert_eq!(net.end("r1", "right").unwrap().ifname, "right");
    assert_eq!(net.addr("h2").unwrap().to_string(), "10.1.2.2");
    assert_eq!(net.addr6("h1").unwrap().to_string(), "fd00:1::1");
    assert!(net.ns("nope").is_err());

    let report = net.teardown();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(clean::namespaces_with_prefix(&prefix).unwrap().is_empty());
}

#[test]
fn root_failure_midway_removes_what_was_built() {
    tcpaccel_sys::testing::require_root();
    // A sysctl that does not exist fails after the namespaces and links exist.
    let topo = Topology::from_toml_str(
        r#"
        [[host]]
        name = "x1"
        sysctl = { "net.ipv4.no_such_knob" = 1 }
        [[host]]
        name = "x2"
        [[link]]
        a = { node = "x1", addr = "10.9.0.1/30" }
        b = { node = "x2", addr = "10.9.0.2/30" }
        "#,
    )
    .unwrap();
    let before = clean::namespaces_with_prefix("tcpaccel-").unwrap();
    let err = Network::up(&topo).expect_err("unknown sysctl must fail");
    let msg = err.to_string();
    assert!(msg.contains("net.ipv4.no_such_knob"), "{msg}");
    let after = clean::namespaces_with_prefix("tcpaccel-").unwrap();
    let leaked: Vec<_> =
        after.iter().filter(|n| !before.contains(n) && (n.ends_with("-x1") || n.ends_with("-x2"))).collect();
    assert!(leaked.is_empty(), "left behind: {leaked:?}");
}
