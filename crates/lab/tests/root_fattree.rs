//! Root tests of the k = 4 dual-homed FatTree (crates/lab/src/testbeds/
//! fattree.rs) and of the scaled `rto_min` on the hosts' routes: built for
//! real, every host pair reaches each other on both fabrics, flows between
//! two pods spread over the core paths by L4 hash, nothing is left after.
//!
//! Checks are handshakes, interface byte counters and tcp_info, with wide
//! margins; rates are modest (the machine has two cores).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use tcpaccel_core::units::{Bytes, Rate};
use tcpaccel_lab::testbeds::fabric::{iface_tx_bytes, Fabric, FabricSpec, RouteMetrics, Shape};
use tcpaccel_lab::testbeds::fattree;

fn up(shape: Shape, hosts: u32) -> Fabric {
    tcpaccel_sys::testing::require_root();
    Fabric::up(FabricSpec {
        shape,
        hosts,
        fabrics: 2,
        hosts_per_leaf: 2,
        spines: 2,
        rate: Rate::mbps(200),
        buffer: Bytes(128 * 1024),
        bucket: tcpaccel_lab::testbeds::fabric::TWO_FRAMES,
    })
    .expect("building the fabric")
}

/// A connected stream from `src` (in host `from`) to a listener on `dst`.
fn connect(fab: &Fabric, from: usize, src: Ipv4Addr, dst: SocketAddr) -> TcpStream {
    tcpaccel_sys::netns::run_in(&fab.hosts[from].ns, move || -> std::io::Result<TcpStream> {
        let fd = tcpaccel_sys::sockopt::tcp_socket(tcpaccel_sys::sockopt::Family::V4)
            .map_err(std::io::Error::other)?;
        tcpaccel_sys::sockopt::bind(&fd, &SocketAddr::new(src.into(), 0)).map_err(std::io::Error::other)?;
        tcpaccel_sys::sockopt::connect(&fd, &dst).map_err(std::io::Error::other)?;
        Ok(TcpStream::from(fd))
    })
    .expect("entering the namespace")
    .unwrap_or_else(|e| panic!("connecting {src} → {dst}: {e}"))
}

fn listen(fab: &Fabric, on: usize, addr: SocketAddr) -> TcpListener {
    tcpaccel_sys::netns::run_in(&fab.hosts[on].ns, move || TcpListener::bind(addr))
        .expect("entering the namespace")
        .unwrap_or_else(|e| panic!("listening on {addr}: {e}"))
}

/// Every ordered host pair on every fabric: one TCP handshake from the
/// source's address on that fabric to a closed port of the destination's
/// (the RST answers as well as a SYN-ACK: the path works both ways).
fn assert_all_pairs_reach(fab: &Fabric) {
    let n = fab.spec.hosts;
    let mut failed = Vec::new();
    for f in 0..fab.spec.fabrics {
        for a in 0..n {
            let src = FabricSpec::host_addr(a, f);
            let dsts: Vec<SocketAddr> = (0..n)
                .filter(|&b| b != a)
                .map(|b| SocketAddr::new(FabricSpec::host_addr(b, f).into(), 9))
                .collect();
            let bad = tcpaccel_sys::netns::run_in(&fab.hosts[a as usize].ns, move || {
                dsts.into_iter()
                    .filter_map(|d| {
                        tcpaccel_sys::probe::handshake(Some(src.into()), d, Duration::from_secs(2))
                            .err()
                            .map(|e| format!("{src} → {d}: {e}"))
                    })
                    .collect::<Vec<_>>()
            })
            .expect("entering the namespace");
            failed.extend(bad);
        }
    }
    assert!(failed.is_empty(), "{} pair(s) unreachable: {:?}", failed.len(), &failed[..failed.len().min(5)]);
}

/// Bytes each core switch of fabric 0 sent towards pod `p`.
fn core_tx_towards(fab: &Fabric, p: u32) -> Vec<u64> {
    (0..fattree::CORES)
        .map(|c| {
            let ns = fab.net.ns(&fattree::core_name(0, c)).expect("core namespace");
            iface_tx_bytes(&ns, &format!("p{p}")).expect("core counters")
        })
        .collect()
}

/// 64 connections h0 (pod 0) → h4 (pod 1) on SL, 64 KB each: ECMP by L4
/// hash must spread them over at least 3 of the 4 core switches (all 64 on
/// 2 or fewer cores has probability below 1e-8 with a fair hash).
fn assert_flows_spread_over_cores(fab: &Fabric) {
    const FLOWS: usize = 64;
    const EACH: usize = 64 * 1024;
    let dst = SocketAddr::new(FabricSpec::host_addr(4, 0).into(), 7998);
    let l = listen(fab, 4, dst);
    let reader = std::thread::spawn(move || {
        let mut total = 0;
        for _ in 0..FLOWS {
            let (mut s, _) = l.accept().expect("accept");
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(k) => total += k,
                    Err(e) => panic!("reading: {e}"),
                }
            }
        }
        total
    });
    let before = core_tx_towards(fab, 1);
    for _ in 0..FLOWS {
        let mut s = connect(fab, 0, FabricSpec::host_addr(0, 0), dst);
        s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(&vec![1u8; EACH]).expect("writing");
    }
    assert_eq!(reader.join().unwrap(), FLOWS * EACH);
    let after = core_tx_towards(fab, 1);
    let per_core: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    // A core that carried one flow sent at least its 64 KB.
    let used = per_core.iter().filter(|&&b| b >= EACH as u64).count();
    eprintln!("bytes per core towards pod 1: {per_core:?}");
    assert!(used >= 3, "64 flows used {used} of 4 core paths; bytes per core towards pod 1: {per_core:?}");
    let total: u64 = per_core.iter().sum();
    assert!(total >= (FLOWS * EACH) as u64, "the cores carried {total} bytes of {}", FLOWS * EACH);
}

/// With the scaled rto_min on the routes, a connection's RTO (what `ss`
/// shows as rto) is at least that, from the SL and the LL address both.
fn assert_rto_min(fab: &Fabric, rto_min: Duration) {
    fab.set_route_metrics(RouteMetrics { rto_min: Some(rto_min), quickack: false, initcwnd: None })
        .expect("setting rto_min on the host routes");
    let last = fab.spec.hosts - 1;
    for f in 0..fab.spec.fabrics {
        let dst = SocketAddr::new(FabricSpec::host_addr(last, f).into(), 7997);
        let l = listen(fab, last as usize, dst);
        let s = connect(fab, 0, FabricSpec::host_addr(0, f), dst);
        let (_peer, _) = l.accept().expect("accept");
        let info = tcpaccel_sys::tcpinfo::tcp_info(&s).expect("tcp_info");
        let rto = Duration::from_micros(u64::from(info.rto));
        assert!(
            rto >= rto_min && rto < rto_min + Duration::from_millis(100),
            "fabric {f}: rto {rto:?} with rto_min {rto_min:?} on the route"
        );
    }
}

#[test]
fn root_fattree_reaches_every_pair_spreads_flows_by_hash_and_leaves_nothing() {
    let fab = up(Shape::FatTree, 16);
    let namespaces = fab.net.namespaces();
    assert_eq!(namespaces.len(), 16 + 2 * 20, "16 hosts and 2 × 20 switches");
    assert_all_pairs_reach(&fab);
    assert_flows_spread_over_cores(&fab);
    assert_rto_min(&fab, Duration::from_millis(800));
    drop(fab);
    let left: Vec<&String> = namespaces.iter().filter(|n| tcpaccel_sys::netns::exists(n)).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn root_scaled_rto_min_is_on_the_leaf_spine_host_routes() {
    let fab = up(Shape::LeafSpine, 2);
    assert_rto_min(&fab, Duration::from_millis(1200));
    // Delayed ACKs and tail loss probes off (D cannot scale their timers),
    // and the thesis's initial window of 12 segments.
    let m = RouteMetrics { rto_min: Some(Duration::from_millis(1200)), quickack: true, initcwnd: Some(12) };
    fab.set_route_metrics(m).unwrap();
    fab.set_host_sysctl("net.ipv4.tcp_early_retrans", "0").unwrap();
    for h in 0..2 {
        let name = FabricSpec::host_name(h);
        let out = fab.net.exec(&name, &["ip", "route", "show", "table", "all"]).unwrap().output().unwrap();
        let routes = String::from_utf8_lossy(&out.stdout);
        let quick = routes.lines().filter(|l| l.contains(" via ") && l.contains("quickack 1")).count();
        assert_eq!(quick, 3, "{name}: default, the LL /16 and table 101's default, all quickack:\n{routes}");
        let iw = routes.lines().filter(|l| l.contains(" via ") && l.contains("initcwnd 12")).count();
        assert_eq!(iw, 3, "{name}: the same three routes with initcwnd 12:\n{routes}");
        assert_eq!(fab.net.sysctl(&name, "net.ipv4.tcp_early_retrans").unwrap(), "0", "{name}");
    }
}

/// The RTO a connecting socket of `node` starts with: a SYN to an on-link
/// address nobody answers waits for ARP, so `tcp_info` shows the initial
/// RTO untouched (the blocking connect gives up after 50 ms; the handshake
/// goes on in the background until the socket is dropped).
fn syn_rto(fab: &Fabric, node: &str, dst: Ipv4Addr) -> Duration {
    let rto = fab
        .net
        .run_in(node, move || -> Result<u32, String> {
            use tcpaccel_sys::sockopt;
            let fd = TcpStream::from(sockopt::tcp_socket(sockopt::Family::V4).map_err(|e| e.to_string())?);
            fd.set_write_timeout(Some(Duration::from_millis(50))).map_err(|e| e.to_string())?;
            match sockopt::connect(&fd, &SocketAddr::new(dst.into(), 9)) {
                Ok(()) => return Err(format!("{dst} answered")),
                Err(e) if e.to_string().contains("in progress") => {}
                Err(e) => return Err(e.to_string()),
            }
            let info = tcpaccel_sys::tcpinfo::tcp_info(&fd).map_err(|e| e.to_string())?;
            Ok(info.rto)
        })
        .expect("entering the namespace")
        .unwrap_or_else(|e| panic!("{node}: connecting to {dst}: {e}"));
    Duration::from_micros(u64::from(rto))
}

#[test]
fn root_scaled_initial_rto_is_on_the_hosts_sockets_only() {
    let mut fab = up(Shape::LeafSpine, 2);
    let nobody = Ipv4Addr::new(10, 10, 0, 77);
    assert_eq!(syn_rto(&fab, "h0", nobody), Duration::from_secs(1), "the kernel's initial RTO before");
    let rto = fab.set_rto_init(Duration::from_secs(4)).expect("setting the initial RTO");
    assert_eq!(rto, Duration::from_secs(4));
    assert_eq!(syn_rto(&fab, "h0", nobody), rto, "a host's SYN");
    assert_eq!(syn_rto(&fab, "h1", Ipv4Addr::new(10, 11, 1, 77)), rto, "the other host, from its LL address");
    // The program answers for the run's hosts only: the leaf's namespace
    // (and every other socket on the machine) keeps 1 s.
    assert_eq!(syn_rto(&fab, "f0l0", nobody), Duration::from_secs(1), "a switch's SYN");
    // Set again (a second variant on the same fabric), the old program goes.
    let tick = tcpaccel_sys::sockopt::jiffy().unwrap();
    let rto = fab.set_rto_init(Duration::from_secs(2) + tick / 4).expect("setting it again");
    assert_eq!(rto, Duration::from_secs(2) + tick, "whole ticks, rounded up");
    assert_eq!(syn_rto(&fab, "h0", nobody), rto);
}
