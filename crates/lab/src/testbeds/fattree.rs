//! The thesis's fabric ([Lanes] §6): a k = 4 FatTree per fabric, every
//! host dual-homed (one interface per fabric), ECMP by L4 hash on every
//! switch. Per fabric: 4 pods of 2 edge and 2 aggregation switches, and 4
//! core switches; up to 16 hosts, 2 per edge switch. Chosen with
//! `topology = fattree` in the lanes scenarios; the leaf–spine of
//! [`crate::testbeds::fabric`] stays the default.
//!
//! What it is: the generator of the topology (the routes a plain route can
//! say: down the tree towards each host) and of the ECMP routes up the tree
//! (edge → its pod's 2 aggregation switches, aggregation → its 2 core
//! switches), which [`crate::testbeds::fabric::Fabric::up`] installs through
//! rtnetlink (`tcpaccel_sys::route`) after the namespaces exist. Every
//! router hashes flows by their 5-tuple with a seed of its own
//! (`fib_multipath_hash_policy = 3`; why not 1: `fabric::ecmp_router`), so
//! two flows between the same hosts may take different cores, and several
//! may collide on one: the thesis's motivating problem.
//!
//! Links: every link direction is a tbf at `rate` (bucket `bucket`) over a `buffer` drop-tail
//! bfifo (128 KB per port in the thesis), as in the leaf–spine. What it is
//! not: no per-switch delay. There is no netem here, and the userspace
//! emulator on each of the 96 links of two fabrics would need a core per
//! few links; the thesis's 25 µs per switch (×D when dilated) is left out.
//! At 1 Gbit/s a host-to-host path crosses at most 5 switches, 125 µs one
//! way, against 1.05 ms for one full 128 KB port queue; veth forwarding in
//! software adds some µs of its own per hop. Idle RTTs are therefore
//! shorter than the thesis's by up to 250 µs × D.
//!
//! Addresses, as the leaf–spine's where the two share a role: host `h` is
//! `10.(10+f).h.2/24` on fabric `f`, its edge side `.1`. Edge `e` –
//! aggregation `a` of pod `p` is `10.(100+f).(16+4p+2e+a).1` (edge) / `.2`
//! (aggregation); aggregation `a` of pod `p` – core `2a+j` is
//! `10.(100+f).(64+4p+2a+j).1` (aggregation) / `.2` (core).

use std::net::Ipv4Addr;

use tcpaccel_sys::route::{Route4, TABLE_MAIN};

/// k of the FatTree: pods, and ports per switch.
pub const K: u32 = 4;
/// Hosts a k = 4 FatTree holds: k³/4.
pub const MAX_HOSTS: u32 = K * K * K / 4;
/// Hosts per edge switch, edge and aggregation switches per pod: k/2.
const HALF: u32 = K / 2;
/// Core switches per fabric: (k/2)².
pub const CORES: u32 = HALF * HALF;

/// Pod of host `h`.
pub fn pod_of(h: u32) -> u32 {
    h / (HALF * HALF)
}

/// Edge switch (within its pod) of host `h`.
pub fn edge_of(h: u32) -> u32 {
    (h % (HALF * HALF)) / HALF
}

pub fn edge_name(f: u32, p: u32, e: u32) -> String {
    format!("f{f}p{p}e{e}")
}

pub fn agg_name(f: u32, p: u32, a: u32) -> String {
    format!("f{f}p{p}a{a}")
}

pub fn core_name(f: u32, c: u32) -> String {
    format!("f{f}c{c}")
}

/// The edge (`up = false`) or aggregation end of link edge `e` – agg `a` in pod `p`.
pub fn edge_agg_addr(f: u32, p: u32, e: u32, a: u32, agg_side: bool) -> Ipv4Addr {
    Ipv4Addr::new(10, (100 + f) as u8, (16 + 4 * p + 2 * e + a) as u8, if agg_side { 2 } else { 1 })
}

/// The aggregation or core end of link agg `a` of pod `p` – core `2a + j`.
pub fn agg_core_addr(f: u32, p: u32, a: u32, j: u32, core_side: bool) -> Ipv4Addr {
    Ipv4Addr::new(10, (100 + f) as u8, (64 + 4 * p + 2 * a + j) as u8, if core_side { 2 } else { 1 })
}

/// The aggregation switch (in every pod) that core `c` connects to, and
/// which of its two core links leads there.
pub fn agg_of_core(c: u32) -> (u32, u32) {
    (c / HALF, c % HALF)
}

/// Switches per fabric: k pods × k switches + (k/2)² cores.
pub fn switches() -> u32 {
    K * K + CORES
}

/// Links per fabric for `hosts` hosts: one per host, k/2 × k/2 edge–agg
/// per pod, k/2 × k/2 agg–core per pod.
pub fn links(hosts: u32) -> u32 {
    hosts + 2 * K * HALF * HALF
}

/// The ECMP routes up the tree, per router: every edge switch's default
/// over its pod's aggregation switches, every aggregation switch's default
/// over its core switches. `(router name, route)`.
pub fn ecmp_routes(fabrics: u32) -> Vec<(String, Route4)> {
    let default = |via: Vec<Ipv4Addr>| Route4 {
        table: TABLE_MAIN,
        dst: Ipv4Addr::UNSPECIFIED,
        prefix: 0,
        via,
        rto_min: None,
        quickack: false,
        initcwnd: None,
    };
    let mut out = Vec::new();
    for f in 0..fabrics {
        for p in 0..K {
            for e in 0..HALF {
                let via = (0..HALF).map(|a| edge_agg_addr(f, p, e, a, true)).collect();
                out.push((edge_name(f, p, e), default(via)));
            }
            for a in 0..HALF {
                let via = (0..HALF).map(|j| agg_core_addr(f, p, a, j, true)).collect();
                out.push((agg_name(f, p, a), default(via)));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_fill_edges_two_by_two_and_pods_four_by_four() {
        let placed: Vec<(u32, u32)> = (0..MAX_HOSTS).map(|h| (pod_of(h), edge_of(h))).collect();
        assert_eq!(&placed[..6], &[(0, 0), (0, 0), (0, 1), (0, 1), (1, 0), (1, 0)]);
        assert_eq!(placed[15], (3, 1));
        assert_eq!((MAX_HOSTS, CORES, switches(), links(16)), (16, 4, 20, 48));
        // Each core reaches every pod through one aggregation switch, and
        // each aggregation switch has two cores: the 4 core paths between pods.
        let mut cores_of_agg = [[false; 4]; 2];
        for c in 0..CORES {
            let (a, j) = agg_of_core(c);
            assert_eq!(2 * a + j, c);
            cores_of_agg[a as usize][c as usize] = true;
        }
        assert_eq!(cores_of_agg, [[true, true, false, false], [false, false, true, true]]);
    }

    #[test]
    fn every_edge_and_aggregation_switch_spreads_over_two_next_hops() {
        let r = ecmp_routes(2);
        assert_eq!(r.len(), 2 * K as usize * 4);
        for (node, route) in &r {
            assert_eq!(route.via.len(), 2, "{node}");
            assert_eq!((route.prefix, route.table), (0, TABLE_MAIN), "{node}");
        }
        let (_, e) = r.iter().find(|(n, _)| n == "f1p2e1").unwrap();
        assert_eq!(e.via, vec![Ipv4Addr::new(10, 101, 16 + 8 + 2, 2), Ipv4Addr::new(10, 101, 16 + 8 + 3, 2)]);
        let (_, a) = r.iter().find(|(n, _)| n == "f0p3a1").unwrap();
        assert_eq!(
            a.via,
            vec![Ipv4Addr::new(10, 100, 64 + 12 + 2, 2), Ipv4Addr::new(10, 100, 64 + 12 + 3, 2)]
        );
    }
}
