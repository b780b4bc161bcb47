//! Root test: the dumbbell h1 — emulated 50 Mbit/s, 20 ms each way — h2.
//! Checks what TCP sees through the emulator (handshake RTT, goodput of a 5 s
//! transfer against the link's goodput limit) and that teardown leaves no
//! namespace, emulator thread or process behind. One test function, so the
//! heavy part never runs beside itself on the 2-core machine.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use tcpaccel_net::{clean, Network, Topology};

const DUMBBELL: &str = r#"
[[host]]
name = "h1"
[[host]]
name = "h2"
[[link]]
name = "wan"
kind = "emulated"
a = { node = "h1", addr = "10.50.0.1/24" }
b = { node = "h2", addr = "10.50.0.2/24" }
rate = "50mbit"
delay = "20ms"
buffer = "375KB"
"#;

/// 50 Mbit/s on the wire carries 1448 payload bytes in a 1538-byte wire frame
/// (1500 MTU + 14 Ethernet + 24 preamble/IFG/FCS; 1448 = 1500 - 20 IP - 32 TCP
/// with timestamps).
const GOODPUT_LIMIT_BPS: f64 = 50e6 * 1448.0 / 1538.0;

/// Names of this process's threads (comm, truncated to 15 characters by the kernel).
fn thread_names() -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
        for t in dir.flatten() {
            if let Ok(c) = std::fs::read_to_string(t.path().join("comm")) {
                out.push(c.trim().to_string());
            }
        }
    }
    out
}

fn handshake_rtt(net: &Network, to: SocketAddr) -> Duration {
    net.run_in("h1", move || tcpaccel_sys::probe::handshake(None, to, Duration::from_secs(5))?.accepted())
        .expect("run in h1")
        .expect("connect h1 -> h2")
}

#[test]
fn root_dumbbell_rtt_goodput_and_clean_teardown() {
    tcpaccel_sys::testing::require_root();
    let topo = Topology::from_toml_str(DUMBBELL).expect("valid topology");
    let net = Network::up(&topo).expect("network up");
    let prefix = format!("tcpaccel-{}-", net.run_id());
    assert_eq!(clean::namespaces_with_prefix(&prefix).unwrap().len(), 3, "h1, h2 and the emulator");
    assert!(net.emulator("wan").is_some_and(|e| e.is_running()));
    // A thread takes its name once it first runs: on a busy machine, a moment after start.
    let t = Instant::now();
    while !thread_names().iter().any(|n| n.starts_with("emu-")) {
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", thread_names());
        std::thread::sleep(Duration::from_millis(20));
    }
    // Offloads off on all four interfaces of the emulated path.
    let ns_emu = net.emulator_ns("wan").expect("emulator namespace").to_string();
    for (ns, ifname) in [
        (net.ns("h1").unwrap(), "eth0"),
        (net.ns("h2").unwrap(), "eth0"),
        (ns_emu.clone(), tcpaccel_net::network::EMU_IF_A),
        (ns_emu, tcpaccel_net::network::EMU_IF_B),
    ] {
        let o = tcpaccel_sys::netns::run_in(&ns, move || tcpaccel_sys::ethtool::offloads(ifname))
            .expect("enter namespace")
            .expect("read offloads");
        assert!(o.all_off(), "offloads still on for {ifname} in {ns}: {o:?}");
    }

    // Handshake RTT: SYN and SYN-ACK each cross 20 ms. The first connect also
    // waits for ARP across the link, so take the best of a few.
    let h2: SocketAddr = "10.50.0.2:5001".parse().unwrap();
    let listener = net.run_in("h2", move || TcpListener::bind(h2)).unwrap().expect("bind in h2");
    let rtts: Vec<Duration> = (0..5).map(|_| handshake_rtt(&net, h2)).collect();
    let best = rtts.iter().min().copied().unwrap();
    eprintln!("handshake RTTs: {rtts:?}");
    assert!(
        best >= Duration::from_micros(39_900) && best <= Duration::from_millis(43),
        "handshake RTT {best:?} is not within a couple of ms of 40 ms ({rtts:?})"
    );

    // Goodput of a 5 s transfer h1 -> h2, counted by the receiver from accept to EOF.
    let data_addr: SocketAddr = "10.50.0.2:5002".parse().unwrap();
    let data_listener = net.run_in("h2", move || TcpListener::bind(data_addr)).unwrap().expect("bind");
    let receiver = std::thread::spawn(move || {
        let (mut s, _) = data_listener.accept().expect("accept");
        let t0 = Instant::now();
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0u64;
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => total += n as u64,
                Err(e) => panic!("receiver: {e}"),
            }
        }
        (total, t0.elapsed())
    });
    let mut sender = net
        .run_in("h1", move || TcpStream::connect_timeout(&data_addr, Duration::from_secs(5)))
        .unwrap()
        .expect("connect for the transfer");
    // Per socket: a namespace's default may only be an algorithm the initial
    // namespace allows, and this machine's default is bbr.
    tcpaccel_sys::sockopt::set_congestion(&sender, "cubic").expect("TCP_CONGESTION cubic");
    let chunk = vec![0x5au8; 1 << 16];
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        sender.write_all(&chunk).expect("send");
    }
    sender.shutdown(std::net::Shutdown::Write).expect("shutdown");
    let (bytes, took) = receiver.join().expect("receiver thread");
    drop(sender);
    let goodput = bytes as f64 * 8.0 / took.as_secs_f64();
    let ratio = goodput / GOODPUT_LIMIT_BPS;
    eprintln!(
        "goodput {:.2} Mbit/s over {:.2} s = {:.1}% of the {:.2} Mbit/s goodput limit",
        goodput / 1e6,
        took.as_secs_f64(),
        ratio * 100.0,
        GOODPUT_LIMIT_BPS / 1e6
    );
    let snap = net.emulator("wan").unwrap().snapshot();
    eprintln!("{}", snap.to_text());
    assert!((0.80..=1.0).contains(&ratio), "goodput {:.1}% of the limit, expected 80-100%", ratio * 100.0);
    assert!(
        snap.a_to_b.delivered_bytes >= bytes,
        "emulator delivered {} < {bytes}",
        snap.a_to_b.delivered_bytes
    );

    // A stray process inside a host (as `net exec` would leave) dies with the network.
    let mut stray = net.exec("h2", &["sleep", "60"]).unwrap().spawn().expect("spawn sleep in h2");
    drop(listener);
    let report = net.teardown();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.emulators.len(), 1);
    let (link, summary) = &report.emulators[0];
    assert_eq!(link, "wan");
    assert!(summary.a_to_b.delivered_bytes >= bytes);

    assert!(clean::namespaces_with_prefix(&prefix).unwrap().is_empty(), "namespaces left");
    let status = stray.wait().expect("wait for the stray process");
    assert!(!status.success(), "the stray process should have been killed, got {status}");
    let left: Vec<String> =
        thread_names().into_iter().filter(|n| n.starts_with("emu-") || n.starts_with("netns-")).collect();
    assert!(left.is_empty(), "threads left: {left:?}");
}
