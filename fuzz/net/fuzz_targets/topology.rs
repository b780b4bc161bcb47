//! Fuzz target: the lab's topology file (`Topology::from_toml_str`, what
//! `tcpaccel net up FILE` and `lab` scenarios read) over arbitrary text.
//!
//! Checked beyond never panicking: a topology that is accepted holds what
//! `Network::up` relies on: names 1..=NAME_MAX, unique, link and node names
//! apart; each link joins two different nodes that exist; interface names
//! valid for Linux (1..=IFNAME_MAX of `[A-Za-z0-9._-]`) and unique per node;
//! no address on two ends; MTUs in 68..=65535; no offloads on emulated
//! links; a route's `dev` an interface of its node. It also serializes to
//! JSON (the run state and reports record it).
//!
//! Run it with `fuzz/run.sh` (see there), or alone from the repository root:
//! cargo +nightly fuzz run --fuzz-dir fuzz/net topology
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::HashSet;
use tcpaccel_net::spec::{IFNAME_MAX, NAME_MAX};
use tcpaccel_net::{LinkKind, Topology};

fn name_ok(n: &str) -> bool {
    !n.is_empty() && n.len() <= NAME_MAX
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(topo) = Topology::from_toml_str(text) else { return };
    assert!(!topo.nodes.is_empty());
    let mut nodes = HashSet::new();
    for n in &topo.nodes {
        assert!(name_ok(&n.name), "node name {:?}", n.name);
        assert!(nodes.insert(n.name.as_str()), "node {:?} twice", n.name);
    }
    let mut links = HashSet::new();
    let mut ifnames = HashSet::new();
    let mut addrs = HashSet::new();
    for l in &topo.links {
        assert!(name_ok(&l.name), "link name {:?}", l.name);
        assert!(links.insert(l.name.as_str()) && !nodes.contains(l.name.as_str()), "link {:?}", l.name);
        assert_ne!(l.a.node, l.b.node, "link {:?} to itself", l.name);
        for e in [&l.a, &l.b] {
            assert!(nodes.contains(e.node.as_str()), "link {:?}: unknown node {:?}", l.name, e.node);
            let ifname_ok = !e.ifname.is_empty()
                && e.ifname.len() <= IFNAME_MAX
                && e.ifname.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
            assert!(ifname_ok, "link {:?}: interface name {:?}", l.name, e.ifname);
            assert!(ifnames.insert((e.node.as_str(), e.ifname.as_str())), "{:?} twice", e.ifname);
            for c in e.addr.iter().chain(e.addr6.iter()) {
                assert!(addrs.insert(c.addr), "address {} twice", c.addr);
            }
        }
        if let Some(m) = l.mtu {
            assert!((68..=65535).contains(&m), "mtu {m}");
        }
        if matches!(l.kind, LinkKind::Emulated { .. }) {
            assert!(!l.offloads, "link {:?}: offloads on an emulated link", l.name);
        }
    }
    for n in &topo.nodes {
        for r in &n.routes {
            if let Some(d) = &r.dev {
                assert!(
                    ifnames.contains(&(n.name.as_str(), d.as_str())),
                    "route dev {d:?} not in {:?}",
                    n.name
                );
            }
        }
    }
    serde_json::to_string(&topo).expect("a topology serializes");
});
