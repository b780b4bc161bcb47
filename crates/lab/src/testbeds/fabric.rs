//! The datacenter of the lanes scenarios ([Lanes] §6): hosts with one
//! interface per fabric, each fabric a leaf–spine of router namespaces whose
//! every link direction is a tbf rate limit (its bucket in bytes, two
//! frames by default) over a drop-tail bfifo. Fabric 0
//! carries the Short-flow Lane (SL), fabrics 1.. the Long-flow Lanes (LL).
//!
//! What it is: a generator of a [`Topology`] (built with the `net` crate's
//! builder, so it gets the checks a topology file gets) plus the routing a
//! topology cannot express (policy rules by source address) and the MPTCP
//! settings each variant needs. What it is not: a FatTree. The thesis
//! used a k = 4 dual-homed FatTree at 1 Gbit/s; here each fabric is a
//! two-tier leaf–spine (one leaf per `hosts_per_leaf` hosts, `spines` spines,
//! the spine of a destination chosen by the destination host, a static
//! stand-in for ECMP), at a rate two cores can forward.
//!
//! Addresses: host `h` has `10.(10+f).h.2/24` on fabric `f`, its leaf side
//! `10.(10+f).h.1`. Leaf `l`–spine `s` of fabric `f` is `10.(100+f).(8l+s).1`
//! (leaf) / `.2` (spine). Every fabric routes every host address (of every
//! fabric) through itself, and a host sends
//! - to an address of fabric `f ≥ 1` out of its fabric-`f` interface (main
//!   table), and everything else out of fabric 0;
//! - from its fabric-`f` address out of its fabric-`f` interface (rule
//!   `from ADDR lookup 100+f`), whatever the destination.
//!
//! So a subflow between two SL addresses stays in fabric 0, and any subflow
//! with an LL address at either end (also the in-kernel path manager's
//! "LL address → peer's SL address" subflow of the pure-MPTCP baseline)
//! stays in that LL fabric in both directions: SL and LL never share a
//! queue. Reverse-path filtering is off, since a host may receive on its LL
//! interface a packet addressed to its SL address.

use std::net::Ipv4Addr;
use std::time::Duration;

use crate::engines::flows::HostAddrs;
use crate::testbeds::fattree;
use crate::testbeds::rto_init::InitialRto;
use anyhow::{bail, Context, Result};
use tcpaccel_core::units::{Bytes, QueueLimit, Rate};
use tcpaccel_core::workload::HostId;
use tcpaccel_net::{Cidr, EndSpec, LinkSpec, Network, NodeSpec, RouteTo, Topology, TopologyBuilder};
use tcpaccel_sys::route::{Route4, TABLE_MAIN};

/// The topology of each fabric; a parameter by its name ([`Shape::NAMES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "String")]
pub enum Shape {
    /// Two tiers: `hosts_per_leaf` hosts per leaf, `spines` spines, the
    /// spine of a destination fixed by the destination host.
    LeafSpine,
    /// The thesis's k = 4 FatTree with ECMP ([`crate::testbeds::fattree`]);
    /// `hosts_per_leaf` and `spines` do not apply.
    FatTree,
}

impl TryFrom<String> for Shape {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<Shape, String> {
        Shape::parse(&s).map_err(|_| format!("expected one of: {}", Shape::NAMES.join(", ")))
    }
}

impl Shape {
    pub const NAMES: [&'static str; 2] = ["leaf-spine", "fattree"];

    pub fn parse(s: &str) -> Result<Shape> {
        match s.trim() {
            "leaf-spine" => Ok(Shape::LeafSpine),
            "fattree" => Ok(Shape::FatTree),
            other => bail!("unknown topology {other:?}; valid: {}", Shape::NAMES.join(", ")),
        }
    }
}

/// Shape of the datacenter.
#[derive(Debug, Clone)]
pub struct FabricSpec {
    pub shape: Shape,
    pub hosts: u32,
    /// Fabrics (lanes): 1 SL + (fabrics − 1) LL; at least 2.
    pub fabrics: u32,
    pub hosts_per_leaf: u32,
    pub spines: u32,
    /// Every link, both directions.
    pub rate: Rate,
    /// Drop-tail queue of every link direction (the thesis: 128 KB).
    pub buffer: Bytes,
    /// Token bucket of every link direction's rate (at least one frame).
    /// In bytes, so that it is the same at every time dilation D; two full
    /// frames ([`TWO_FRAMES`]) is the least that leaves the shaper a
    /// frame's time of slack when its timer fires late.
    pub bucket: Bytes,
}

/// Two full 1500-byte frames on the wire (Ethernet header included).
pub const TWO_FRAMES: Bytes = Bytes(2 * (1500 + 14));

impl FabricSpec {
    fn check(&self) -> Result<()> {
        if self.fabrics < 2 || self.fabrics > 4 {
            bail!("fabrics must be 2..=4 (1 SL + 1..3 LL), got {}", self.fabrics);
        }
        if self.hosts < 2 || self.hosts > 64 {
            bail!("hosts must be 2..=64, got {}", self.hosts);
        }
        if self.hosts_per_leaf == 0 || self.spines == 0 || self.spines > 8 {
            bail!(
                "hosts_per_leaf must be at least 1 and spines 1..=8 (got {} and {})",
                self.hosts_per_leaf,
                self.spines
            );
        }
        if self.bucket.0 < TWO_FRAMES.0 / 2 {
            bail!(
                "bucket {} B is below one full frame ({} B): the shapers would drop every full-size packet",
                self.bucket.0,
                TWO_FRAMES.0 / 2
            );
        }
        if self.shape == Shape::FatTree && self.hosts > fattree::MAX_HOSTS {
            bail!("a k = 4 FatTree holds at most {} hosts, got {}", fattree::MAX_HOSTS, self.hosts);
        }
        if self.leaves() > 31 {
            bail!("{} leaves per fabric is too many (at most 31)", self.leaves());
        }
        if self.rate.bits_per_sec() == 0 {
            bail!("the fabric needs a link rate above zero");
        }
        Ok(())
    }

    pub fn leaves(&self) -> u32 {
        self.hosts.div_ceil(self.hosts_per_leaf)
    }

    fn leaf_of(&self, h: u32) -> u32 {
        h / self.hosts_per_leaf
    }

    /// The spine a destination host is reached through (static ECMP stand-in).
    fn spine_for(&self, h: u32) -> u32 {
        h % self.spines
    }

    pub fn host_name(h: u32) -> String {
        format!("h{h}")
    }

    /// Host `h`'s address on fabric `f`.
    pub fn host_addr(h: u32, f: u32) -> Ipv4Addr {
        Ipv4Addr::new(10, (10 + f) as u8, h as u8, 2)
    }

    fn host_gw(h: u32, f: u32) -> Ipv4Addr {
        Ipv4Addr::new(10, (10 + f) as u8, h as u8, 1)
    }

    fn uplink(f: u32, l: u32, s: u32, spine_side: bool) -> Ipv4Addr {
        Ipv4Addr::new(10, (100 + f) as u8, (8 * l + s) as u8, if spine_side { 2 } else { 1 })
    }

    /// The routes host `h` sends by, as rtnetlink routes: in the main table
    /// the default via its SL gateway and each LL fabric's /16 via that
    /// fabric's gateway; in table 100+f the default via fabric f's gateway
    /// (the source rules of [`Fabric::up`] lead there).
    pub fn host_routes(h: u32, fabrics: u32, m: RouteMetrics) -> Vec<Route4> {
        let route = |table, dst, prefix, f| Route4 {
            table,
            dst,
            prefix,
            via: vec![Self::host_gw(h, f)],
            rto_min: m.rto_min,
            quickack: m.quickack,
            initcwnd: m.initcwnd,
        };
        let mut v = vec![route(TABLE_MAIN, Ipv4Addr::UNSPECIFIED, 0, 0)];
        for f in 1..fabrics {
            v.push(route(TABLE_MAIN, Ipv4Addr::new(10, (10 + f) as u8, 0, 0), 16, f));
            v.push(route(100 + f, Ipv4Addr::UNSPECIFIED, 0, f));
        }
        v
    }

    /// Host-leaf and leaf-spine links.
    pub fn links(&self) -> u32 {
        match self.shape {
            Shape::LeafSpine => self.fabrics * (self.hosts + self.leaves() * self.spines),
            Shape::FatTree => self.fabrics * fattree::links(self.hosts),
        }
    }

    /// Router namespaces of all fabrics.
    pub fn routers(&self) -> u32 {
        match self.shape {
            Shape::LeafSpine => self.fabrics * (self.leaves() + self.spines),
            Shape::FatTree => self.fabrics * fattree::switches(),
        }
    }

    /// The datacenter as a topology: hosts first, then each fabric's leaves
    /// and spines, then each fabric's host and uplink links.
    pub fn topology(&self) -> Result<Topology> {
        self.check()?;
        let mut t = TopologyBuilder::new("lanes-fabric");
        for h in 0..self.hosts {
            let host = t.host(Self::host_name(h));
            host.route_via(RouteTo::Default, Self::host_gw(h, 0));
            for f in 1..self.fabrics {
                host.route_via(RouteTo::Net(Cidr::new([10, (10 + f) as u8, 0, 0], 16)), Self::host_gw(h, f));
            }
            no_rp_filter(host);
        }
        if self.shape == Shape::FatTree {
            self.fattree(&mut t);
            return t.build().context("the generated FatTree topology");
        }
        for f in 0..self.fabrics {
            for l in 0..self.leaves() {
                let leaf = t.router(format!("f{f}l{l}"));
                for h in 0..self.hosts {
                    for x in 0..self.fabrics {
                        if self.leaf_of(h) != l {
                            leaf.route_via(subnet(h, x), Self::uplink(f, l, self.spine_for(h), true));
                        } else if x != f {
                            leaf.route_via(subnet(h, x), Self::host_addr(h, f));
                        }
                    }
                }
                no_rp_filter(leaf);
            }
            for s in 0..self.spines {
                let spine = t.router(format!("f{f}s{s}"));
                for h in 0..self.hosts {
                    for x in 0..self.fabrics {
                        spine.route_via(subnet(h, x), Self::uplink(f, self.leaf_of(h), s, false));
                    }
                }
                no_rp_filter(spine);
            }
        }
        for f in 0..self.fabrics {
            for h in 0..self.hosts {
                t.link(
                    self.shaped(
                        LinkSpec::veth(
                            end(Self::host_name(h), Self::host_addr(h, f), format!("f{f}")),
                            end(format!("f{f}l{}", self.leaf_of(h)), Self::host_gw(h, f), format!("h{h}")),
                        )
                        .name(format!("h{h}-f{f}")),
                    ),
                );
            }
            for l in 0..self.leaves() {
                for s in 0..self.spines {
                    t.link(
                        self.shaped(
                            LinkSpec::veth(
                                end(format!("f{f}l{l}"), Self::uplink(f, l, s, false), format!("s{s}")),
                                end(format!("f{f}s{s}"), Self::uplink(f, l, s, true), format!("l{l}")),
                            )
                            .name(format!("f{f}l{l}-s{s}")),
                        ),
                    );
                }
            }
        }
        t.build().context("the generated fabric topology")
    }

    fn shaped(&self, l: LinkSpec) -> LinkSpec {
        l.rate(self.rate).buffer(QueueLimit::Bytes(self.buffer.0)).burst(self.bucket.0).offloads(false)
    }

    /// The FatTree's switches, their routes down the tree, and its links
    /// ([`fattree`]); the ECMP routes up the tree come after the build.
    fn fattree(&self, t: &mut TopologyBuilder) {
        use fattree::{
            agg_core_addr, agg_name, agg_of_core, core_name, edge_agg_addr, edge_name, edge_of, pod_of,
        };
        let hosts_of = |p: u32| (0..self.hosts).filter(move |&h| pod_of(h) == p);
        // A distinct, fixed hash seed per switch (fabric, tier, pod, index):
        // runs repeat their paths.
        let seed = |f: u32, tier: u32, p: u32, i: u32| {
            0x9E37_79B9u32.wrapping_mul(1 + (f << 12 | tier << 8 | p << 4 | i))
        };
        let half = fattree::K / 2;
        for f in 0..self.fabrics {
            for p in 0..fattree::K {
                for e in 0..half {
                    let edge = t.router(edge_name(f, p, e));
                    for h in hosts_of(p).filter(|&h| edge_of(h) == e) {
                        for x in (0..self.fabrics).filter(|&x| x != f) {
                            edge.route_via(subnet(h, x), Self::host_addr(h, f));
                        }
                    }
                    ecmp_router(edge, seed(f, 0, p, e));
                }
                for a in 0..half {
                    let agg = t.router(agg_name(f, p, a));
                    for h in hosts_of(p) {
                        for x in 0..self.fabrics {
                            agg.route_via(subnet(h, x), edge_agg_addr(f, p, edge_of(h), a, false));
                        }
                    }
                    ecmp_router(agg, seed(f, 1, p, a));
                }
            }
            for c in 0..fattree::CORES {
                let (a, j) = agg_of_core(c);
                let core = t.router(core_name(f, c));
                for h in 0..self.hosts {
                    for x in 0..self.fabrics {
                        core.route_via(subnet(h, x), agg_core_addr(f, pod_of(h), a, j, false));
                    }
                }
                ecmp_router(core, seed(f, 2, 0, c));
            }
        }
        for f in 0..self.fabrics {
            for h in 0..self.hosts {
                t.link(
                    self.shaped(
                        LinkSpec::veth(
                            end(Self::host_name(h), Self::host_addr(h, f), format!("f{f}")),
                            end(edge_name(f, pod_of(h), edge_of(h)), Self::host_gw(h, f), format!("h{h}")),
                        )
                        .name(format!("h{h}-f{f}")),
                    ),
                );
            }
            for p in 0..fattree::K {
                for e in 0..half {
                    for a in 0..half {
                        t.link(
                            self.shaped(
                                LinkSpec::veth(
                                    end(
                                        edge_name(f, p, e),
                                        edge_agg_addr(f, p, e, a, false),
                                        format!("a{a}"),
                                    ),
                                    end(agg_name(f, p, a), edge_agg_addr(f, p, e, a, true), format!("e{e}")),
                                )
                                .name(format!("{}-a{a}", edge_name(f, p, e))),
                            ),
                        );
                    }
                }
                for a in 0..half {
                    for j in 0..half {
                        let c = half * a + j;
                        t.link(
                            self.shaped(
                                LinkSpec::veth(
                                    end(agg_name(f, p, a), agg_core_addr(f, p, a, j, false), format!("c{c}")),
                                    end(core_name(f, c), agg_core_addr(f, p, a, j, true), format!("p{p}")),
                                )
                                .name(format!("{}-c{c}", agg_name(f, p, a))),
                            ),
                        );
                    }
                }
            }
        }
    }

    /// Every host's lanes, for the flow engine and the daemon configs.
    pub fn host_addrs(&self, net: &Network) -> Result<Vec<HostAddrs>> {
        (0..self.hosts)
            .map(|h| {
                Ok(HostAddrs {
                    id: h as HostId,
                    ns: net.ns(&Self::host_name(h))?,
                    sl: Self::host_addr(h, 0),
                    ll: (1..self.fabrics).map(|f| Self::host_addr(h, f)).collect(),
                })
            })
            .collect()
    }
}

/// Host `h`'s subnet on fabric `x`.
fn subnet(h: u32, x: u32) -> RouteTo {
    RouteTo::Net(Cidr::new([10, (10 + x) as u8, h as u8, 0], 24))
}

fn end(node: String, addr: Ipv4Addr, ifname: String) -> EndSpec {
    EndSpec::new(node).addr(Cidr::new(addr, 24)).ifname(ifname)
}

/// A FatTree switch: no reverse-path filter, and multipath routes hashed
/// by the L4 5-tuple with the switch's own `seed`, so flows, not hosts,
/// spread over the paths, and each switch's choice is independent of the
/// one before it.
///
/// Not `fib_multipath_hash_policy = 1`: for a forwarded packet that
/// policy returns the hash the sending socket put on the skb
/// (`skb->l4_hash`, the socket's txhash), which veth carries through every
/// namespace. All switches then hash alike — an aggregation switch picked
/// its core by the same bit the edge switch picked it by, and 64 flows
/// between two pods used exactly 2 of the 4 core paths (cores 0 and 3,
/// measured) — and a flow changes path whenever TCP rethinks its txhash
/// after a timeout. Policy 3 hashes the fields given (0x37: source and
/// destination address and port, protocol) with the namespace's seed.
fn ecmp_router(node: &mut NodeSpec, seed: u32) {
    no_rp_filter(node);
    node.sysctl("net.ipv4.fib_multipath_hash_policy", 3);
    node.sysctl("net.ipv4.fib_multipath_hash_fields", "0x0037");
    node.sysctl("net.ipv4.fib_multipath_hash_seed", seed);
}

/// Multipath traffic leaves by one fabric and returns by another: no
/// reverse-path filter may drop it.
fn no_rp_filter(node: &mut NodeSpec) {
    node.sysctl("net.ipv4.conf.all.rp_filter", 0).sysctl("net.ipv4.conf.default.rp_filter", 0);
}

/// Runs `ip -n NS -batch -` with `lines`, naming the namespace on failure.
pub fn ip_batch(ns: &str, lines: &[String]) -> Result<()> {
    let input = lines.iter().map(|l| format!("{l}\n")).collect::<String>();
    tcpaccel_sys::command::run_with_input("ip", &["-n", ns, "-batch", "-"], Some(&input))
        .with_context(|| format!("ip -batch in {ns} on {lines:?}"))?;
    Ok(())
}

/// What [`Fabric::set_route_metrics`] puts on the hosts' routes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteMetrics {
    /// Locked minimum RTO (the kernel's own is 200 ms).
    pub rto_min: Option<Duration>,
    /// No delayed ACKs: every segment acknowledged at once.
    pub quickack: bool,
    /// TCP's initial window in segments (the kernel's: 10).
    pub initcwnd: Option<u32>,
}

/// The built datacenter; dropping it tears every namespace down.
pub struct Fabric {
    pub spec: FabricSpec,
    pub net: Network,
    pub hosts: Vec<HostAddrs>,
    /// The hosts' initial RTO program, once [`Fabric::set_rto_init`] ran.
    rto_init: Option<InitialRto>,
}

/// How the hosts' MPTCP is set up for a variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MptcpMode {
    /// In-kernel path manager, one `subflow` endpoint per LL address (the
    /// pure-MPTCP baseline; full mesh off).
    Kernel,
    /// Userspace path manager (a lanes daemon per host opens the LL subflows).
    Userspace,
    /// In-kernel path manager without endpoints (single-path TCP baselines).
    Plain,
}

impl Fabric {
    pub fn up(spec: FabricSpec) -> Result<Fabric> {
        let topo = spec.topology()?;
        let net = Network::up(&topo).context("building the dual-fabric datacenter")?;
        for h in 0..spec.hosts {
            let ns = net.ns(&FabricSpec::host_name(h))?;
            let mut lines = Vec::new();
            for f in 1..spec.fabrics {
                let table = 100 + f;
                lines.push(format!("rule add from {} lookup {table}", FabricSpec::host_addr(h, f)));
                lines.push(format!("route add default via {} table {table}", FabricSpec::host_gw(h, f)));
            }
            ip_batch(&ns, &lines).with_context(|| format!("source routing on host h{h}"))?;
        }
        // rp_filter is max(all, interface): interfaces made before the
        // default changed keep theirs, so clear every one.
        for name in net.topology().nodes.iter().map(|n| n.name.clone()).collect::<Vec<_>>() {
            for (_, end) in net.topology().ends_of(&name) {
                net.set_sysctl(&name, &format!("net.ipv4.conf.{}.rp_filter", end.ifname), "0")?;
            }
        }
        if spec.shape == Shape::FatTree {
            for (node, route) in fattree::ecmp_routes(spec.fabrics) {
                let ns = net.ns(&node)?;
                let what = format!("ECMP on {node}");
                tcpaccel_sys::netns::run_in(&ns, move || tcpaccel_sys::route::replace(&route))
                    .with_context(|| format!("entering {ns}"))?
                    .context(what)?;
            }
        }
        let hosts = spec.host_addrs(&net)?;
        Ok(Fabric { spec, net, hosts, rto_init: None })
    }

    /// Sets every host's path manager, limits and endpoints for `mode`.
    pub fn set_mptcp(&self, mode: MptcpMode) -> Result<()> {
        let lls = self.spec.fabrics - 1;
        for h in 0..self.spec.hosts {
            let name = FabricSpec::host_name(h);
            let pm = if mode == MptcpMode::Userspace { "userspace" } else { "kernel" };
            self.net.set_sysctl(&name, "net.mptcp.path_manager", pm).with_context(|| {
                format!("setting net.mptcp.path_manager={pm} on {name} (does the kernel offer it?)")
            })?;
            let ns = self.net.ns(&name)?;
            let mut lines = vec!["mptcp endpoint flush".to_string()];
            lines.push(format!("mptcp limits set subflows {} add_addr_accepted {}", lls.max(2), lls.max(2)));
            if mode == MptcpMode::Kernel {
                for f in 1..self.spec.fabrics {
                    lines
                        .push(format!("mptcp endpoint add {} dev f{f} subflow", FabricSpec::host_addr(h, f)));
                }
            }
            ip_batch(&ns, &lines).with_context(|| format!("MPTCP settings on {name}"))?;
        }
        Ok(())
    }

    /// Puts `m` on every route a host sends by (main table: the default via
    /// SL and each LL's /16; each source table's default), through
    /// rtnetlink in the host's namespace. The kernel honours a route's
    /// `rto_min` only above its own 200 ms minimum (`tcp_rto_min()`).
    pub fn set_route_metrics(&self, m: RouteMetrics) -> Result<()> {
        for h in 0..self.spec.hosts {
            let ns = self.net.ns(&FabricSpec::host_name(h))?;
            let routes = FabricSpec::host_routes(h, self.spec.fabrics, m);
            tcpaccel_sys::netns::run_in(&ns, move || -> Result<()> {
                for r in &routes {
                    tcpaccel_sys::route::replace(r)?;
                }
                Ok(())
            })
            .with_context(|| format!("entering {ns}"))?
            .with_context(|| format!("{m:?} on the routes of h{h}"))?;
        }
        Ok(())
    }

    /// Sets the sysctl `key` to `value` on every host (the lanes
    /// scenarios' `tlp=off`: `net.ipv4.tcp_early_retrans` 0).
    pub fn set_host_sysctl(&self, key: &str, value: &str) -> Result<()> {
        for h in 0..self.spec.hosts {
            self.net.set_sysctl(&FabricSpec::host_name(h), key, value)?;
        }
        Ok(())
    }

    /// Gives every host's TCP connections the initial RTO `rto` (the
    /// kernel's is 1 s; see [`crate::testbeds::rto_init`]) until the fabric
    /// is dropped. Returns the value the sockets get (whole ticks).
    pub fn set_rto_init(&mut self, rto: Duration) -> Result<Duration> {
        let mut cookies = Vec::new();
        for h in 0..self.spec.hosts {
            let name = FabricSpec::host_name(h);
            let cookie = self.net.run_in(&name, tcpaccel_sys::bpf::current_netns_cookie)?;
            cookies.push(cookie.with_context(|| format!("the network namespace cookie of {name}"))?);
        }
        // The previous program detaches first: two attached would both
        // answer, and the kernel keeps the last reply.
        self.rto_init = None;
        let prog = InitialRto::attach(&cookies, rto)?;
        let got = prog.rto;
        self.rto_init = Some(prog);
        Ok(got)
    }

    /// Bytes sent so far out of every host's interface on each fabric
    /// (index = fabric), summed over hosts.
    pub fn tx_bytes_per_fabric(&self) -> Result<Vec<u64>> {
        let mut per = vec![0u64; self.spec.fabrics as usize];
        for h in 0..self.spec.hosts {
            let ns = self.net.ns(&FabricSpec::host_name(h))?;
            for (f, v) in per.iter_mut().enumerate() {
                *v += iface_tx_bytes(&ns, &format!("f{f}"))?;
            }
        }
        Ok(per)
    }
}

/// tx_bytes of `ifname` in namespace `ns`. Read from
/// `/proc/thread-self/net/dev` on a thread inside the namespace: /sys shows
/// the namespace sysfs was mounted in, not the reading thread's.
pub fn iface_tx_bytes(ns: &str, ifname: &str) -> Result<u64> {
    iface_counter(ns, ifname, 8)
}

/// The tx byte counter of `ifname` in the text of `/proc/net/dev`.
pub fn dev_tx_bytes(text: &str, ifname: &str) -> Option<u64> {
    dev_counter(text, ifname, 8)
}

/// Column `n` of `ifname`'s row in a /proc/net/dev text: rx bytes (0),
/// packets (1), errs drop fifo frame compressed multicast, then tx bytes (8),
/// packets (9), ...
pub fn dev_counter(text: &str, ifname: &str, n: usize) -> Option<u64> {
    text.lines().find_map(|l| {
        let (name, rest) = l.split_once(':')?;
        if name.trim() != ifname {
            return None;
        }
        rest.split_whitespace().nth(n)?.parse().ok()
    })
}

/// Column `n` (see [`dev_counter`]) of `ifname` in namespace `ns`.
pub fn iface_counter(ns: &str, ifname: &str, n: usize) -> Result<u64> {
    let text = tcpaccel_sys::netns::run_in(ns, || std::fs::read_to_string("/proc/thread-self/net/dev"))
        .with_context(|| format!("entering {ns}"))?
        .with_context(|| format!("reading /proc/thread-self/net/dev in {ns}"))?;
    dev_counter(&text, ifname, n).with_context(|| format!("no interface {ifname} in {ns}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(hosts: u32, fabrics: u32) -> FabricSpec {
        FabricSpec {
            shape: Shape::LeafSpine,
            hosts,
            fabrics,
            hosts_per_leaf: 4,
            spines: 2,
            rate: Rate(100_000_000),
            buffer: Bytes(128 * 1024),
            bucket: TWO_FRAMES,
        }
    }

    #[test]
    fn generated_topology_parses_with_every_node_and_link() {
        let s = spec(8, 2);
        let topo = s.topology().unwrap();
        // 8 hosts + per fabric 2 leaves and 2 spines.
        assert_eq!(topo.nodes.len(), 8 + 2 * (2 + 2));
        assert_eq!(topo.links.len() as u32, s.links());
        assert_eq!(s.links(), 2 * (8 + 2 * 2));
        for l in &topo.links {
            assert!(!l.offloads, "{} keeps offloads", l.name);
        }
    }

    #[test]
    fn every_router_knows_every_host_address_of_every_fabric() {
        let s = spec(8, 3);
        let topo = s.topology().unwrap();
        for n in topo.nodes.iter().filter(|n| n.name.starts_with('f')) {
            for h in 0..8 {
                for x in 0..3 {
                    let a = FabricSpec::host_addr(h, x);
                    let covered = n.routes.iter().any(|r| r.to.contains(a.into()))
                        || topo
                            .ends_of(&n.name)
                            .any(|(_, e)| e.addr.as_ref().is_some_and(|c| c.contains(a.into())));
                    assert!(covered, "{} has no route to {a}", n.name);
                }
            }
        }
    }

    #[test]
    fn the_fattree_has_the_thesis_switches_and_routes_down_every_pod() {
        let s = FabricSpec { shape: Shape::FatTree, ..spec(16, 2) };
        let topo = s.topology().unwrap();
        assert_eq!(topo.nodes.len(), 16 + 2 * 20);
        assert_eq!(topo.links.len(), 2 * 48);
        assert_eq!((s.links(), s.routers()), (96, 40));
        let covers = |node: &str, a: Ipv4Addr| {
            let n = topo.node(node).unwrap();
            n.routes.iter().any(|r| r.to.contains(a.into()))
                || topo.ends_of(node).any(|(_, e)| e.addr.as_ref().is_some_and(|c| c.contains(a.into())))
        };
        for f in 0..2 {
            for h in 0..16 {
                for x in 0..2 {
                    let a = FabricSpec::host_addr(h, x);
                    for c in 0..4 {
                        assert!(covers(&fattree::core_name(f, c), a), "core {c} of fabric {f}: {a}");
                    }
                    for g in 0..2 {
                        assert!(covers(&fattree::agg_name(f, fattree::pod_of(h), g), a), "agg of h{h}: {a}");
                    }
                    let edge = fattree::edge_name(f, fattree::pod_of(h), fattree::edge_of(h));
                    assert!(covers(&edge, a), "{edge}: {a}");
                }
            }
            for n in topo.nodes.iter().filter(|n| n.name.starts_with(&format!("f{f}"))) {
                assert!(
                    n.sysctls.iter().any(|(k, v)| k == "net.ipv4.fib_multipath_hash_policy" && v == "3"),
                    "{} hashes by L4",
                    n.name
                );
            }
        }
        let e = FabricSpec { shape: Shape::FatTree, ..spec(17, 2) }.topology().unwrap_err().to_string();
        assert!(e.contains("at most 16"), "{e}");
        assert!(Shape::parse("fat-tree").unwrap_err().to_string().contains("leaf-spine, fattree"));
    }

    #[test]
    fn tx_bytes_come_from_the_ninth_counter() {
        let text = "Inter-|   Receive    |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes\n\
                    lo: 10 1 0 0 0 0 0 0 10 1 0 0 0 0 0 0\n    f1: 500 5 0 0 0 0 0 0 7777 9 0 0 0 0 0 0\n";
        assert_eq!(dev_tx_bytes(text, "f1"), Some(7777));
        assert_eq!(dev_tx_bytes(text, "lo"), Some(10));
        assert_eq!(dev_tx_bytes(text, "f2"), None);
    }

    #[test]
    fn bad_shapes_are_refused_with_the_number() {
        let e = spec(8, 1).topology().unwrap_err().to_string();
        assert!(e.contains("got 1"), "{e}");
        let e = spec(1, 2).topology().unwrap_err().to_string();
        assert!(e.contains("got 1"), "{e}");
        let mut s = spec(8, 2);
        s.rate = Rate(0);
        assert!(s.topology().is_err());
        let e = FabricSpec { bucket: Bytes(1024), ..spec(8, 2) }.topology().unwrap_err().to_string();
        assert!(e.contains("bucket 1024 B is below one full frame (1514 B)"), "{e}");
        assert!(FabricSpec { bucket: Bytes(1514), ..spec(8, 2) }.topology().is_ok());
    }
}
