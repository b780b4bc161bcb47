//! Root test of the lanes datacenter (crates/lab/src/testbeds/fabric.rs):
//! built for real, SL and LL traffic must stay in their own fabric — also
//! the pure-MPTCP baseline's "LL address → peer's SL address" pairs.
//!
//! Checks are byte counters of the hosts' interfaces with wide margins.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use tcpaccel_core::units::{Bytes, Rate};
use tcpaccel_lab::testbeds::fabric::{iface_tx_bytes, Fabric, FabricSpec, MptcpMode, Shape, TWO_FRAMES};

const MB: usize = 1 << 20;

fn fabric() -> Fabric {
    fabric_with(TWO_FRAMES)
}

fn fabric_with(bucket: Bytes) -> Fabric {
    tcpaccel_sys::testing::require_root();
    Fabric::up(FabricSpec {
        shape: Shape::LeafSpine,
        hosts: 4,
        fabrics: 2,
        hosts_per_leaf: 2,
        spines: 2,
        rate: Rate(200_000_000),
        buffer: Bytes(128 * 1024),
        bucket,
    })
    .expect("building the fabric")
}

/// Sends `n` bytes from `from` (bound to `src`) to a listener on `dst` in `to`.
fn transfer(
    fab: &Fabric,
    from: usize,
    src: std::net::Ipv4Addr,
    to: usize,
    dst: std::net::Ipv4Addr,
    n: usize,
) {
    let listen = SocketAddr::new(dst.into(), 7999);
    let l = tcpaccel_sys::netns::run_in(&fab.hosts[to].ns, move || TcpListener::bind(listen))
        .unwrap()
        .expect("listening");
    let reader = std::thread::spawn(move || {
        let (mut s, _) = l.accept().expect("accept");
        let mut buf = vec![0u8; 64 * 1024];
        let mut got = 0;
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) => panic!("reading: {e}"),
            }
        }
        got
    });
    let s = tcpaccel_sys::netns::run_in(&fab.hosts[from].ns, move || -> std::io::Result<TcpStream> {
        // std has no bind-before-connect; use the sys crate's socket calls.
        let local = SocketAddr::new(src.into(), 0);
        let fd = tcpaccel_sys::sockopt::tcp_socket(tcpaccel_sys::sockopt::Family::V4)
            .map_err(std::io::Error::other)?;
        tcpaccel_sys::sockopt::bind(&fd, &local).map_err(std::io::Error::other)?;
        tcpaccel_sys::sockopt::connect(&fd, &listen).map_err(std::io::Error::other)?;
        Ok(TcpStream::from(fd))
    })
    .unwrap()
    .expect("connecting");
    let mut s = s;
    s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(&vec![7u8; n]).expect("writing");
    drop(s);
    assert_eq!(reader.join().unwrap(), n);
}

fn tx(fab: &Fabric, h: usize, f: u32) -> u64 {
    iface_tx_bytes(&fab.hosts[h].ns, &format!("f{f}")).expect("reading counters")
}

#[test]
fn root_each_lane_pair_stays_in_its_fabric_both_ways() {
    let fab = fabric();
    fab.set_mptcp(MptcpMode::Plain).expect("mptcp settings");
    let (a, b) = (0usize, 3usize); // different leaves
    let cases = [
        ("SL->SL", fab.hosts[a].sl, fab.hosts[b].sl, 0u32),
        ("LL->LL", fab.hosts[a].ll[0], fab.hosts[b].ll[0], 1),
        ("LL->SL", fab.hosts[a].ll[0], fab.hosts[b].sl, 1),
    ];
    for (what, src, dst, fabric) in cases {
        let before: Vec<(u64, u64)> = [a, b].iter().map(|&h| (tx(&fab, h, 0), tx(&fab, h, 1))).collect();
        transfer(&fab, a, src, b, dst, 4 * MB);
        let after: Vec<(u64, u64)> = [a, b].iter().map(|&h| (tx(&fab, h, 0), tx(&fab, h, 1))).collect();
        let d = |i: usize, f: u32| {
            let (x, y) = (before[i], after[i]);
            if f == 0 {
                y.0 - x.0
            } else {
                y.1 - x.1
            }
        };
        let other = 1 - fabric;
        assert!(
            d(0, fabric) >= 4 * MB as u64,
            "{what}: sender sent only {} B on fabric {fabric}",
            d(0, fabric)
        );
        assert!(d(0, other) < 200_000, "{what}: sender leaked {} B onto fabric {other}", d(0, other));
        // The receiver's ACKs come back on the same fabric.
        assert!(
            d(1, fabric) > 20_000,
            "{what}: receiver's ACKs did not use fabric {fabric} ({} B)",
            d(1, fabric)
        );
        assert!(d(1, other) < 50_000, "{what}: receiver's ACKs leaked {} B onto fabric {other}", d(1, other));
    }
}

#[test]
fn root_mptcp_modes_set_the_path_manager_and_endpoints() {
    let fab = fabric();
    fab.set_mptcp(MptcpMode::Kernel).unwrap();
    let ep = fab.net.exec("h1", &["ip", "mptcp", "endpoint", "show"]).unwrap().output().unwrap();
    let text = String::from_utf8_lossy(&ep.stdout);
    assert!(text.contains(&fab.hosts[1].ll[0].to_string()) && text.contains("subflow"), "{text}");
    fab.set_mptcp(MptcpMode::Userspace).unwrap();
    assert_eq!(fab.net.sysctl("h1", "net.mptcp.path_manager").unwrap(), "userspace");
    let ep = fab.net.exec("h1", &["ip", "mptcp", "endpoint", "show"]).unwrap().output().unwrap();
    assert!(String::from_utf8_lossy(&ep.stdout).trim().is_empty(), "endpoints left after flush");
}

/// The tbf buckets (bytes, as tc reads them back) of every shaped port in `node`.
fn buckets(fab: &Fabric, node: &str) -> Vec<u64> {
    let out = fab.net.exec(node, &["tc", "-j", "qdisc", "show"]).unwrap().output().unwrap();
    assert!(out.status.success(), "tc in {node}: {}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("tc -j output");
    v.as_array()
        .expect("a list of qdiscs")
        .iter()
        .filter(|q| q["kind"] == "tbf")
        .map(|q| q["options"]["burst"].as_u64().expect("a tbf's burst"))
        .collect()
}

#[test]
fn root_every_port_has_the_declared_bucket_not_one_ms_of_its_rate() {
    // 8 KiB: neither two frames nor 1 ms of 200 Mbit/s (25 kB), the old rule.
    let fab = fabric_with(Bytes(8192));
    for node in ["h1", "f0l0", "f1s1"] {
        let b = buckets(&fab, node);
        assert!(!b.is_empty(), "no tbf in {node}");
        // tc converts the bucket to a time at the rate and back: within 1%.
        for x in &b {
            assert!((8110..=8192).contains(x), "{node}: bucket {x} B, declared 8192 B ({b:?})");
        }
    }
}
