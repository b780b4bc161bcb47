//! The shipped example topologies (`examples/topologies/*.toml`): every one
//! parses, and (root) every one builds and carries a TCP handshake from each
//! host to every other host, so their addresses and routes are right.

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use tcpaccel_net::{clean, Network, Role, Topology};

fn examples() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/topologies");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    out.sort();
    out
}

#[test]
fn every_example_parses() {
    let files = examples();
    let names: Vec<String> =
        files.iter().filter_map(|p| p.file_stem()).map(|s| s.to_string_lossy().into_owned()).collect();
    for want in ["dumbbell", "chain", "star"] {
        assert!(names.iter().any(|n| n == want), "missing example {want}.toml in {names:?}");
    }
    for f in &files {
        let t = Topology::load(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(t.nodes.iter().any(|n| n.role == Role::Host), "{} has no host", f.display());
    }
    let d = Topology::load(files.iter().find(|p| p.ends_with("dumbbell.toml")).unwrap()).unwrap();
    let j = serde_json::to_value(&d).unwrap();
    assert_eq!(j["links"][0]["a_to_b"]["rate"], 100_000_000);
    assert_eq!(j["links"][0]["a_to_b"]["delay"], "20ms");
}

#[test]
fn root_every_example_builds_and_routes() {
    tcpaccel_sys::testing::require_root();
    for f in examples() {
        let topo = Topology::load(&f).unwrap();
        let net = Network::up(&topo).unwrap_or_else(|e| panic!("{}: up: {e}", f.display()));
        let hosts: Vec<&str> =
            topo.nodes.iter().filter(|n| n.role == Role::Host).map(|n| n.name.as_str()).collect();
        let first = hosts[0];
        for (i, other) in hosts.iter().enumerate().skip(1) {
            let ip: IpAddr = net.addr(other).unwrap();
            let to = SocketAddr::new(ip, 6000 + i as u16);
            let l = net.run_in(other, move || TcpListener::bind(to)).unwrap().expect("bind");
            let c =
                net.run_in(first, move || TcpStream::connect_timeout(&to, Duration::from_secs(5))).unwrap();
            c.unwrap_or_else(|e| panic!("{}: {first} -> {other} ({to}): {e}", f.display()));
            drop(l);
        }
        let prefix = format!("tcpaccel-{}-", net.run_id());
        let report = net.teardown();
        assert!(report.errors.is_empty(), "{}: {:?}", f.display(), report.errors);
        assert!(clean::namespaces_with_prefix(&prefix).unwrap().is_empty());
    }
}
