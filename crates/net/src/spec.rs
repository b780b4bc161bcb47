//! A topology: hosts, routers and links. Both ways of describing one end in
//! a [`TopologyBuilder`] of typed values, and [`TopologyBuilder::build`]
//! checks it into a validated [`Topology`] ("parse, don't validate"): code
//! (the lab's scenarios) fills the builder directly, and a topology file is
//! read into it by [`file`] ([`Topology::from_toml_str`], [`Topology::load`]).
//! The same checks, with the same errors, apply to both; every error names
//! the host, link or route and the offending value. Values in a file are
//! parsed only with `tcpaccel_core::units`.
//!
//! This module does not touch the system; [`crate::Network::up`] builds what
//! a `Topology` describes.
//!
//! Fields:
//! - `[[host]]` / `[[router]]`: `name` (letters, digits, `-`, `_`; at most 32),
//!   `sysctl` (table of name = string/integer/boolean, written in the node's
//!   namespace), `route` (list of `{ to = "CIDR" | "default", via = "IP",
//!   dev = "IFNAME" }`; a gateway must lie in a subnet of the node). Routers
//!   get IP forwarding (v4, and v6 if they have IPv6 addresses).
//! - `[[link]]`: `a`, `b` (`{ node, addr = "IPv4/PREFIX", addr6 =
//!   "IPv6/PREFIX", ifname }`; ifname defaults to `eth0`, `eth1`, ... per
//!   node), `kind` (`veth` | `emulated`), `name`, `mtu`, `txqueuelen`,
//!   `offloads` (veth only: `false` switches TSO/GSO/GRO/tx-checksum off on
//!   both ends, for per-packet pacing; emulated links always have them off), and the
//!   per-direction settings `rate`, `buffer` (both kinds), `burst` (veth:
//!   the rate's token bucket in bytes; default 1 ms of the rate, at least two
//!   full frames), `delay`, `jitter`,
//!   `loss` (a probability, or a string as `LossSpec::parse` takes it:
//!   `"1%"`, `"ge:p=1%,r=25%"`), `seed`, `overhead` (emulated only), given
//!   for both directions on the link and overridden in `a_to_b` / `b_to_a`.
//!
//! Note: outside the initial namespace, `net.ipv4.tcp_congestion_control`
//! only accepts algorithms listed in the initial namespace's
//! `net.ipv4.tcp_allowed_congestion_control`; a new namespace starts with the
//! initial namespace's default.
//!
//! ```toml
//! [[host]]
//! name = "h1"
//! route = [{ to = "default", via = "10.0.0.2" }]
//! sysctl = { "net.ipv4.tcp_ecn" = 1 }
//!
//! [[router]]
//! name = "r1"
//!
//! [[link]]
//! name = "bottleneck"          # optional, default "A-B"
//! kind = "emulated"            # or "veth" (the default)
//! a = { node = "h1", addr = "10.0.0.1/24" }
//! b = { node = "r1", addr = "10.0.0.2/24", ifname = "left" }
//! rate = "100mbit"             # both directions ...
//! delay = "20ms"
//! buffer = "1MB"
//! b_to_a = { rate = "10mbit" } # ... unless a direction overrides
//! ```

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::time::Duration;

use serde::{Serialize, Serializer};
use tcpaccel_core::loss::LossSpec;
use tcpaccel_core::units::{QueueLimit, Rate};

use crate::addr::Cidr;

mod file;

/// Longest interface name Linux accepts (IFNAMSIZ 16 with the NUL).
pub const IFNAME_MAX: usize = 15;
/// Longest node or link name; namespace names are `tcpaccel-RUNID-NAME`.
pub const NAME_MAX: usize = 32;

/// A topology file that could not be read or is not valid.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("cannot read topology file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    /// The file is not TOML, has a key a topology does not know, or a value
    /// that does not parse (serde's message: line, column, key and problem).
    #[error("topology file is not valid TOML for a topology: {0}")]
    Toml(String),
    /// Any other invalid item, with where it is.
    #[error("{context}: {msg}")]
    Invalid { context: String, msg: String },
}

fn invalid(context: impl Into<String>, msg: impl Into<String>) -> SpecError {
    SpecError::Invalid { context: context.into(), msg: msg.into() }
}

// ---------------------------------------------------------------------------
// The typed, validated topology.

/// What a node is for: a host, or a router with IP forwarding on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Host,
    Router,
}

/// A host or router: one network namespace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Node {
    pub name: String,
    pub role: Role,
    /// Sysctls to set in the node's namespace, in file order (`net.ipv4.tcp_ecn`, `1`).
    pub sysctls: Vec<(String, String)>,
    pub routes: Vec<Route>,
}

/// A static route in one node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Route {
    /// Destination; prefix 0 is the default route of its family.
    #[serde(serialize_with = "ser_display")]
    pub to: Cidr,
    pub via: Option<IpAddr>,
    /// Output interface (an `ifname` of this node).
    pub dev: Option<String>,
}

impl Route {
    /// The destination as `ip route` takes it.
    pub fn dest(&self) -> String {
        if self.to.prefix == 0 {
            "default".to_string()
        } else {
            self.to.to_string()
        }
    }
}

/// One end of a link: an interface in a node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct End {
    pub node: String,
    pub ifname: String,
    #[serde(serialize_with = "ser_opt_display")]
    pub addr: Option<Cidr>,
    #[serde(serialize_with = "ser_opt_display")]
    pub addr6: Option<Cidr>,
}

/// Shaping of one direction of a plain veth link: tbf rate and a drop-tail
/// child queue (bfifo for bytes, pfifo for packets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Shaping {
    pub rate: Option<Rate>,
    pub buffer: Option<QueueLimit>,
    /// The tbf's bucket in bytes (only with a rate); `None` is 1 ms of the
    /// rate, at least two full frames.
    pub burst: Option<u64>,
}

impl Shaping {
    pub fn is_none(&self) -> bool {
        self.rate.is_none() && self.buffer.is_none() && self.burst.is_none()
    }
}

/// One direction of an emulated link.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Direction {
    /// Bottleneck rate on the wire; `None` is unlimited.
    pub rate: Option<Rate>,
    /// Constant one-way propagation delay.
    #[serde(serialize_with = "ser_duration")]
    pub delay: Duration,
    /// Extra random delay on top, never reordering (the emulator's rule).
    #[serde(serialize_with = "ser_duration")]
    pub jitter: Duration,
    /// Drop-tail buffer; `None` leaves the emulator's default.
    pub buffer: Option<QueueLimit>,
    pub loss: LossSpec,
    /// Seed of this direction's loss and jitter; recorded so a run can be replayed.
    pub seed: u64,
    /// Bytes added to each frame on the wire (preamble, IFG, FCS); `None` is the emulator's default (24).
    pub overhead: Option<u32>,
}

/// What carries a link.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum LinkKind {
    /// A veth pair between the two nodes, optionally shaped on each egress.
    Veth { a_to_b: Shaping, b_to_a: Shaping },
    /// A veth pair from each node into an emulator namespace that runs the
    /// userspace emulator between them.
    Emulated { a_to_b: Direction, b_to_a: Direction },
}

/// A link between two nodes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    pub name: String,
    pub a: End,
    pub b: End,
    #[serde(flatten)]
    pub kind: LinkKind,
    pub mtu: Option<u32>,
    pub txqueuelen: Option<u32>,
    /// Segmentation/checksum offloads left on (plain veth default); always
    /// false on emulated links.
    pub offloads: bool,
}

impl Link {
    pub fn is_emulated(&self) -> bool {
        matches!(self.kind, LinkKind::Emulated { .. })
    }
    /// The end of this link in `node`, if the link touches it (the `a` end first).
    pub fn end_in(&self, node: &str) -> Option<&End> {
        if self.a.node == node {
            Some(&self.a)
        } else if self.b.node == node {
            Some(&self.b)
        } else {
            None
        }
    }
}

/// A validated topology: every name resolves, every value parsed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Topology {
    pub name: Option<String>,
    pub nodes: Vec<Node>,
    pub links: Vec<Link>,
}

impl Topology {
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name == name)
    }

    pub fn link(&self, name: &str) -> Option<&Link> {
        self.links.iter().find(|l| l.name == name)
    }

    /// The link ends that live in `node`, with their links.
    pub fn ends_of<'a>(&'a self, node: &'a str) -> impl Iterator<Item = (&'a Link, &'a End)> + 'a {
        self.links
            .iter()
            .flat_map(move |l| [&l.a, &l.b].into_iter().filter(move |e| e.node == node).map(move |e| (l, e)))
    }
}

// ---------------------------------------------------------------------------
// What a topology is built from: typed values, not yet checked against each
// other. The topology file is read into these ([`file`]), and code builds
// them directly; [`TopologyBuilder::build`] is the one validator for both.

/// The destination of a route before validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteTo {
    /// The default route of the gateway's family (IPv4 without a gateway).
    Default,
    /// A network; host bits must be zero.
    Net(Cidr),
}

impl std::fmt::Display for RouteTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RouteTo::Default => f.write_str("default"),
            RouteTo::Net(c) => c.fmt(f),
        }
    }
}

/// A static route as written: a gateway, an output interface, or both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteSpec {
    pub to: RouteTo,
    pub via: Option<IpAddr>,
    pub dev: Option<String>,
}

/// A host or router as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    pub name: String,
    pub role: Role,
    /// Sysctl name and value, set in this order.
    pub sysctls: Vec<(String, String)>,
    pub routes: Vec<RouteSpec>,
}

impl NodeSpec {
    pub fn sysctl(&mut self, key: impl Into<String>, value: impl ToString) -> &mut Self {
        self.sysctls.push((key.into(), value.to_string()));
        self
    }

    /// A route through gateway `via`.
    pub fn route_via(&mut self, to: RouteTo, via: impl Into<IpAddr>) -> &mut Self {
        self.routes.push(RouteSpec { to, via: Some(via.into()), dev: None });
        self
    }
}

/// One end of a link as written; `ifname` defaults to `ethN`, N counting
/// this node's ends in link order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndSpec {
    pub node: String,
    pub ifname: Option<String>,
    pub addr: Option<Cidr>,
    pub addr6: Option<Cidr>,
}

impl EndSpec {
    pub fn new(node: impl Into<String>) -> EndSpec {
        EndSpec { node: node.into(), ifname: None, addr: None, addr6: None }
    }
    pub fn addr(mut self, addr: Cidr) -> EndSpec {
        self.addr = Some(addr);
        self
    }
    pub fn addr6(mut self, addr6: Cidr) -> EndSpec {
        self.addr6 = Some(addr6);
        self
    }
    pub fn ifname(mut self, ifname: impl Into<String>) -> EndSpec {
        self.ifname = Some(ifname.into());
        self
    }
}

/// Settings of one direction of a link, or of both (a link's own values);
/// `None` is "not given". Which fields a link may have depends on its kind.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DirSpec {
    pub rate: Option<Rate>,
    pub delay: Option<Duration>,
    pub jitter: Option<Duration>,
    pub buffer: Option<QueueLimit>,
    /// A veth link's tbf bucket, bytes.
    pub burst: Option<u64>,
    pub loss: Option<LossSpec>,
    pub seed: Option<u64>,
    pub overhead: Option<u32>,
}

impl DirSpec {
    /// `self` with unset fields taken from `base`.
    fn over(&self, base: &DirSpec) -> DirSpec {
        DirSpec {
            rate: self.rate.or(base.rate),
            delay: self.delay.or(base.delay),
            jitter: self.jitter.or(base.jitter),
            buffer: self.buffer.or(base.buffer),
            burst: self.burst.or(base.burst),
            loss: self.loss.or(base.loss),
            seed: self.seed.or(base.seed),
            overhead: self.overhead.or(base.overhead),
        }
    }
}

/// What carries a link, before its settings are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LinkType {
    #[default]
    Veth,
    Emulated,
}

/// A link as written. `both` applies to each direction unless `a_to_b` or
/// `b_to_a` sets the field.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkSpec {
    /// `None` is `A-B`, or `A-B-2`, ... when taken.
    pub name: Option<String>,
    pub kind: LinkType,
    pub a: EndSpec,
    pub b: EndSpec,
    pub mtu: Option<u32>,
    pub txqueuelen: Option<u32>,
    /// `None` is on for veth, off for emulated links.
    pub offloads: Option<bool>,
    pub both: DirSpec,
    pub a_to_b: DirSpec,
    pub b_to_a: DirSpec,
}

impl LinkSpec {
    pub fn new(kind: LinkType, a: EndSpec, b: EndSpec) -> LinkSpec {
        LinkSpec {
            name: None,
            kind,
            a,
            b,
            mtu: None,
            txqueuelen: None,
            offloads: None,
            both: DirSpec::default(),
            a_to_b: DirSpec::default(),
            b_to_a: DirSpec::default(),
        }
    }
    pub fn veth(a: EndSpec, b: EndSpec) -> LinkSpec {
        LinkSpec::new(LinkType::Veth, a, b)
    }
    pub fn emulated(a: EndSpec, b: EndSpec) -> LinkSpec {
        LinkSpec::new(LinkType::Emulated, a, b)
    }
    pub fn name(mut self, name: impl Into<String>) -> LinkSpec {
        self.name = Some(name.into());
        self
    }
    pub fn offloads(mut self, on: bool) -> LinkSpec {
        self.offloads = Some(on);
        self
    }
    /// Rate of both directions.
    pub fn rate(mut self, rate: Rate) -> LinkSpec {
        self.both.rate = Some(rate);
        self
    }
    /// One-way delay of both directions.
    pub fn delay(mut self, delay: Duration) -> LinkSpec {
        self.both.delay = Some(delay);
        self
    }
    /// Drop-tail buffer of both directions.
    pub fn buffer(mut self, buffer: QueueLimit) -> LinkSpec {
        self.both.buffer = Some(buffer);
        self
    }
    /// Token bucket of both directions' rate (veth links), bytes.
    pub fn burst(mut self, bytes: u64) -> LinkSpec {
        self.both.burst = Some(bytes);
        self
    }
}

/// A topology under construction; [`TopologyBuilder::build`] checks it
/// (the same checks, and errors, as a topology file gets).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TopologyBuilder {
    pub name: Option<String>,
    /// In the order they were added (a topology file lists hosts first).
    pub nodes: Vec<NodeSpec>,
    pub links: Vec<LinkSpec>,
}

impl TopologyBuilder {
    pub fn new(name: impl Into<String>) -> TopologyBuilder {
        TopologyBuilder { name: Some(name.into()), ..TopologyBuilder::default() }
    }

    pub fn node(&mut self, role: Role, name: impl Into<String>) -> &mut NodeSpec {
        self.nodes.push(NodeSpec { name: name.into(), role, sysctls: Vec::new(), routes: Vec::new() });
        self.nodes.last_mut().expect("just pushed")
    }

    pub fn host(&mut self, name: impl Into<String>) -> &mut NodeSpec {
        self.node(Role::Host, name)
    }

    pub fn router(&mut self, name: impl Into<String>) -> &mut NodeSpec {
        self.node(Role::Router, name)
    }

    pub fn link(&mut self, link: LinkSpec) -> &mut Self {
        self.links.push(link);
        self
    }
}

/// The name of a link that has none: `A-B`, or `A-B-2`, ... if that is taken.
fn default_link_name(a: &str, b: &str, taken: &HashSet<String>) -> String {
    let base = format!("{a}-{b}");
    let mut n = base.clone();
    let mut k = 2;
    while taken.contains(&n) {
        n = format!("{base}-{k}");
        k += 1;
    }
    n
}

/// The link's name: its own, or the default one given the names so far.
fn link_name(l: &LinkSpec, taken: &HashSet<String>) -> String {
    l.name.clone().unwrap_or_else(|| default_link_name(&l.a.node, &l.b.node, taken))
}

// ---------------------------------------------------------------------------
// Validation: the one place a topology is checked.

fn check_name(context: &str, name: &str) -> Result<(), SpecError> {
    if name.is_empty() || name.len() > NAME_MAX {
        return Err(invalid(context, format!("name {name:?} must have 1 to {NAME_MAX} characters")));
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(invalid(context, format!("name {name:?} may only use letters, digits, '-' and '_'")));
    }
    Ok(())
}

fn check_ifname(context: &str, name: &str) -> Result<(), SpecError> {
    if name.is_empty() || name.len() > IFNAME_MAX {
        return Err(invalid(
            context,
            format!("interface name {name:?} must have 1 to {IFNAME_MAX} characters (Linux IFNAMSIZ)"),
        ));
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.') {
        return Err(invalid(
            context,
            format!("interface name {name:?} may only use letters, digits, '-', '_' and '.'"),
        ));
    }
    if name == "lo" {
        return Err(invalid(context, "interface name \"lo\" is the loopback device"));
    }
    Ok(())
}

fn check_sysctl(context: &str, key: &str, value: &str) -> Result<(), SpecError> {
    let sctx = format!("{context}: sysctl {key:?}");
    let key_ok = !key.is_empty()
        && !key.starts_with('.')
        && !key.contains("..")
        && key.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if !key_ok {
        return Err(invalid(sctx, "not a sysctl name like net.ipv4.tcp_ecn"));
    }
    if value.contains('\n') {
        return Err(invalid(sctx, format!("value {value:?} must be one line")));
    }
    Ok(())
}

/// A probability in [0, 1].
fn is_probability(p: f64) -> bool {
    p.is_finite() && (0.0..=1.0).contains(&p)
}

/// A loss model with its parameters in range; Bernoulli with p = 0 is no loss.
fn check_loss(context: &str, loss: LossSpec) -> Result<LossSpec, SpecError> {
    match loss {
        LossSpec::None => Ok(LossSpec::None),
        LossSpec::Bernoulli { p } if !is_probability(p) => {
            Err(invalid(context, format!("loss {p} is not a probability between 0 and 1")))
        }
        LossSpec::Bernoulli { p: 0.0 } => Ok(LossSpec::None),
        LossSpec::GilbertElliott { p, r, h, k }
            if ![p, r, h, k].into_iter().all(is_probability) || p + r == 0.0 =>
        {
            Err(invalid(
                context,
                format!("loss {loss}: p, r, h and k must be probabilities between 0 and 1, and p and r not both 0"),
            ))
        }
        other => Ok(other),
    }
}

fn check_dir(context: &str, d: &DirSpec, default_seed: u64) -> Result<Direction, SpecError> {
    if d.burst.is_some() {
        return Err(invalid(
            context,
            "burst is the bucket of a plain veth link's tbf; an emulated link serializes frame by frame and has none",
        ));
    }
    Ok(Direction {
        rate: d.rate,
        delay: d.delay.unwrap_or(Duration::ZERO),
        jitter: d.jitter.unwrap_or(Duration::ZERO),
        buffer: d.buffer,
        loss: check_loss(context, d.loss.unwrap_or_default())?,
        seed: d.seed.unwrap_or(default_seed),
        overhead: d.overhead,
    })
}

fn check_shaping(context: &str, d: &DirSpec, mtu: u32) -> Result<Shaping, SpecError> {
    let netem_only = [
        ("delay", d.delay.is_some()),
        ("jitter", d.jitter.is_some()),
        ("loss", d.loss.is_some()),
        ("seed", d.seed.is_some()),
        ("overhead", d.overhead.is_some()),
    ];
    if let Some((field, _)) = netem_only.iter().find(|(_, set)| *set) {
        return Err(invalid(
            context,
            format!(
                "{field} needs kind = \"emulated\": a plain veth link can only be shaped (rate, buffer), \
                 this kernel has no netem"
            ),
        ));
    }
    if let Some(QueueLimit::Packets(0) | QueueLimit::Bytes(0)) = d.buffer {
        return Err(invalid(context, "buffer must not be zero"));
    }
    if let Some(b) = d.burst {
        if d.rate.is_none() {
            return Err(invalid(
                context,
                format!("burst {b} B needs a rate: it is the bucket of the rate's tbf"),
            ));
        }
        let frame = u64::from(mtu) + 14;
        if b < frame {
            return Err(invalid(
                context,
                format!("burst {b} B is below one full frame (MTU {mtu} + 14 = {frame} B): tbf would drop every full-size packet"),
            ));
        }
    }
    Ok(Shaping { rate: d.rate, buffer: d.buffer, burst: d.burst })
}

/// An interface address: the right family, a valid prefix, a host address.
fn check_addr(context: &str, field: &str, c: Cidr, want_v4: bool) -> Result<Cidr, SpecError> {
    if c.is_v4() != want_v4 {
        let (fam, other) = if want_v4 { ("IPv4", "addr6") } else { ("IPv6", "addr") };
        return Err(invalid(
            context,
            format!("{field} \"{c}\" is not an {fam} address (use {other} for it)"),
        ));
    }
    c.check_prefix().map_err(|m| invalid(context, format!("{field}: {m}")))?;
    c.check_host().map_err(|m| invalid(context, format!("{field}: {m}")))?;
    Ok(c)
}

impl TopologyBuilder {
    /// Checks every name, address, route and setting, and resolves the
    /// defaults (link names, interface names, seeds). Errors name the host,
    /// link or route and the offending value.
    pub fn build(self) -> Result<Topology, SpecError> {
        // Nodes.
        let mut nodes: Vec<(Node, Vec<RouteSpec>)> = Vec::new();
        let mut seen = HashSet::new();
        for n in self.nodes {
            let ctx = node_context(n.role, &n.name);
            check_name(&ctx, &n.name)?;
            if !seen.insert(n.name.clone()) {
                return Err(invalid(ctx, "defined twice (host and router names share one namespace)"));
            }
            for (k, v) in &n.sysctls {
                check_sysctl(&ctx, k, v)?;
            }
            nodes.push((
                Node { name: n.name, role: n.role, sysctls: n.sysctls, routes: Vec::new() },
                n.routes,
            ));
        }
        if nodes.is_empty() {
            return Err(invalid("topology", "has no [[host]] or [[router]]"));
        }

        // Links.
        let mut links = Vec::new();
        let mut link_names = HashSet::new();
        let mut ifnames: HashMap<String, HashSet<String>> = HashMap::new();
        let mut if_count: HashMap<String, usize> = HashMap::new();
        let mut addrs: HashMap<IpAddr, String> = HashMap::new();
        for (i, l) in self.links.into_iter().enumerate() {
            let name = link_name(&l, &link_names);
            let ctx = format!("link {name:?}");
            check_name(&ctx, &name)?;
            if !link_names.insert(name.clone()) {
                return Err(invalid(ctx, "defined twice"));
            }
            if seen.contains(&name) {
                return Err(invalid(ctx, "has the name of a node; link and node names must differ"));
            }
            if l.a.node == l.b.node {
                return Err(invalid(ctx, format!("connects node {:?} to itself", l.a.node)));
            }
            let mut ends = Vec::new();
            for (side, e) in [("a", &l.a), ("b", &l.b)] {
                let ectx = end_context(&name, side, &e.node);
                if !seen.contains(&e.node) {
                    return Err(invalid(
                        ectx,
                        format!("unknown node {:?} (not a [[host]] or [[router]])", e.node),
                    ));
                }
                let count = if_count.entry(e.node.clone()).or_insert(0);
                let ifname = e.ifname.clone().unwrap_or_else(|| format!("eth{count}"));
                *count += 1;
                check_ifname(&ectx, &ifname)?;
                if !ifnames.entry(e.node.clone()).or_default().insert(ifname.clone()) {
                    return Err(invalid(
                        ectx,
                        format!("interface name {ifname:?} is used twice in this node"),
                    ));
                }
                let addr = e.addr.map(|c| check_addr(&ectx, "addr", c, true)).transpose()?;
                let addr6 = e.addr6.map(|c| check_addr(&ectx, "addr6", c, false)).transpose()?;
                for c in addr.iter().chain(addr6.iter()) {
                    if let Some(prev) = addrs.insert(c.addr, ectx.clone()) {
                        return Err(invalid(ectx, format!("duplicate address {}: also on {prev}", c.addr)));
                    }
                }
                ends.push(End { node: e.node.clone(), ifname, addr, addr6 });
            }
            let b = ends.pop().ok_or_else(|| invalid(&ctx, "missing end b"))?;
            let a = ends.pop().ok_or_else(|| invalid(&ctx, "missing end a"))?;
            for (x, y) in [(a.addr, b.addr), (a.addr6, b.addr6)] {
                if let (Some(x), Some(y)) = (x, y) {
                    if !x.contains(y.addr) || !y.contains(x.addr) {
                        return Err(invalid(&ctx, format!("ends {x} and {y} are not in one subnet")));
                    }
                }
            }
            if let Some(m) = l.mtu {
                if !(68..=65535).contains(&m) {
                    return Err(invalid(&ctx, format!("mtu {m} is outside 68..=65535")));
                }
            }
            let ab = l.a_to_b.over(&l.both);
            let ba = l.b_to_a.over(&l.both);
            // The link's own values first, so an error in them names the link
            // rather than the direction that inherited it.
            let kind = match l.kind {
                LinkType::Veth => {
                    let mtu = l.mtu.unwrap_or(1500);
                    check_shaping(&ctx, &l.both, mtu)?;
                    LinkKind::Veth {
                        a_to_b: check_shaping(&format!("{ctx} a_to_b"), &ab, mtu)?,
                        b_to_a: check_shaping(&format!("{ctx} b_to_a"), &ba, mtu)?,
                    }
                }
                LinkType::Emulated => {
                    check_dir(&ctx, &l.both, 0)?;
                    // Distinct default seeds per link and direction, fixed by
                    // position in the file so a run replays without naming seeds.
                    let seed = 2 * i as u64 + 1;
                    LinkKind::Emulated {
                        a_to_b: check_dir(&format!("{ctx} a_to_b"), &ab, seed)?,
                        b_to_a: check_dir(&format!("{ctx} b_to_a"), &ba, seed + 1)?,
                    }
                }
            };
            if l.kind == LinkType::Emulated && l.offloads == Some(true) {
                return Err(invalid(
                    &ctx,
                    "offloads = true is not possible on an emulated link: the emulator needs wire-sized frames",
                ));
            }
            let offloads = l.kind == LinkType::Veth && l.offloads.unwrap_or(true);
            links.push(Link { name, a, b, kind, mtu: l.mtu, txqueuelen: l.txqueuelen, offloads });
        }

        // Routes, now that every node's interfaces and subnets are known.
        let mut out = Vec::new();
        for (mut node, routes) in nodes {
            let ctx = node_context(node.role, &node.name);
            let my_ends: Vec<&End> =
                links.iter().flat_map(|l| [&l.a, &l.b]).filter(|e| e.node == node.name).collect();
            for r in routes {
                let rctx = route_context(&ctx, &r.to.to_string());
                let to = match r.to {
                    RouteTo::Default => {
                        let v6 = matches!(r.via, Some(IpAddr::V6(_)));
                        let any = if v6 { IpAddr::from([0u16; 8]) } else { IpAddr::from([0u8; 4]) };
                        Cidr::new(any, 0)
                    }
                    RouteTo::Net(c) => {
                        c.check_prefix().map_err(|m| invalid(&rctx, m))?;
                        if !c.is_network() {
                            return Err(invalid(
                                &rctx,
                                format!("{c} has host bits set; did you mean {}/{}?", c.network(), c.prefix),
                            ));
                        }
                        c
                    }
                };
                if let Some(v) = r.via {
                    if v.is_ipv4() != to.is_v4() {
                        return Err(invalid(&rctx, format!("via {v} is not of the same family as {}", r.to)));
                    }
                    let connected = my_ends
                        .iter()
                        .flat_map(|e| e.addr.iter().chain(e.addr6.iter()))
                        .any(|c| c.contains(v) && c.addr != v);
                    if !connected {
                        return Err(invalid(
                            &rctx,
                            format!("gateway {v} is not in a subnet of any interface of {:?}", node.name),
                        ));
                    }
                }
                if let Some(d) = &r.dev {
                    if !my_ends.iter().any(|e| &e.ifname == d) {
                        return Err(invalid(
                            &rctx,
                            format!("dev {d:?} is not an interface of {:?}", node.name),
                        ));
                    }
                }
                if r.via.is_none() && r.dev.is_none() {
                    return Err(invalid(&rctx, "needs via (a gateway) or dev (an interface), or both"));
                }
                node.routes.push(Route { to, via: r.via, dev: r.dev });
            }
            out.push(node);
        }
        Ok(Topology { name: self.name, nodes: out, links })
    }
}

/// How errors name a node: `host "h1"`.
fn node_context(role: Role, name: &str) -> String {
    format!("{} {name:?}", if role == Role::Host { "host" } else { "router" })
}

/// How errors name a link end: `link "wan" end a ("h1")`.
fn end_context(link: &str, side: &str, node: &str) -> String {
    format!("link {link:?} end {side} ({node:?})")
}

/// How errors name a route: `host "h1": route to "default"`.
fn route_context(node_context: &str, to: &str) -> String {
    format!("{node_context}: route to {to:?}")
}

fn ser_display<S: Serializer, T: std::fmt::Display>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

fn ser_opt_display<S: Serializer, T: std::fmt::Display>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.collect_str(v),
        None => s.serialize_none(),
    }
}

fn ser_duration<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&tcpaccel_core::units::format_duration(*d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn v4(a: [u8; 4], prefix: u8) -> Cidr {
        Cidr::new(Ipv4Addr::from(a), prefix)
    }

    /// h1 and h2, and one link made by `link` from their two ends.
    fn two_hosts(link: impl FnOnce(EndSpec, EndSpec) -> LinkSpec) -> TopologyBuilder {
        let mut b = TopologyBuilder::default();
        b.host("h1");
        b.host("h2");
        b.link(link(EndSpec::new("h1"), EndSpec::new("h2")));
        b
    }

    fn err_of(b: TopologyBuilder) -> String {
        match b.build() {
            Ok(t) => panic!("expected an error, got {t:?}"),
            Err(e) => e.to_string(),
        }
    }

    fn file_err(toml: &str) -> String {
        match Topology::from_toml_str(toml) {
            Ok(t) => panic!("expected an error, got {t:?}"),
            Err(e) => e.to_string(),
        }
    }

    const TWO_HOSTS: &str = "[[host]]\nname = \"h1\"\n[[host]]\nname = \"h2\"\n";

    #[test]
    fn builder_refuses_what_the_file_refuses_with_the_same_message() {
        let emulated = |a, b| LinkSpec::emulated(a, b);
        let cases: Vec<(TopologyBuilder, &str)> = vec![
            (
                two_hosts(|a, _| LinkSpec::veth(a, EndSpec::new("h9"))),
                "[[link]]\na = { node = \"h1\" }\nb = { node = \"h9\" }",
            ),
            (
                two_hosts(|a, b| LinkSpec::veth(a.addr(v4([10, 0, 0, 1], 24)), b.addr(v4([10, 0, 0, 1], 24)))),
                "[[link]]\na = { node = \"h1\", addr = \"10.0.0.1/24\" }\nb = { node = \"h2\", addr = \"10.0.0.1/24\" }",
            ),
            (
                two_hosts(|a, b| LinkSpec::veth(a.addr("fd00::1".parse::<IpAddr>().map(|ip| Cidr::new(ip, 64)).unwrap()), b)),
                "[[link]]\na = { node = \"h1\", addr = \"fd00::1/64\" }\nb = { node = \"h2\" }",
            ),
            (
                two_hosts(|a, b| LinkSpec::veth(a.addr(v4([10, 0, 0, 255], 24)), b)),
                "[[link]]\na = { node = \"h1\", addr = \"10.0.0.255/24\" }\nb = { node = \"h2\" }",
            ),
            (
                two_hosts(|a, b| LinkSpec::veth(a.addr(v4([10, 0, 0, 1], 24)), b.addr(v4([10, 0, 1, 1], 24)))),
                "[[link]]\na = { node = \"h1\", addr = \"10.0.0.1/24\" }\nb = { node = \"h2\", addr = \"10.0.1.1/24\" }",
            ),
            (
                two_hosts(|a, b| LinkSpec::veth(a, b).delay(Duration::from_millis(20))),
                "[[link]]\na = { node = \"h1\" }\nb = { node = \"h2\" }\ndelay = \"20ms\"",
            ),
            (
                two_hosts(|a, b| {
                    let mut l = LinkSpec::veth(a, b);
                    l.b_to_a.buffer = Some(QueueLimit::Packets(0));
                    l
                }),
                "[[link]]\na = { node = \"h1\" }\nb = { node = \"h2\" }\nb_to_a = { buffer = \"0p\" }",
            ),
            (
                two_hosts(|a, b| {
                    let mut l = emulated(a, b);
                    l.both.loss = Some(LossSpec::Bernoulli { p: 1.5 });
                    l
                }),
                "[[link]]\nkind = \"emulated\"\na = { node = \"h1\" }\nb = { node = \"h2\" }\nloss = 1.5",
            ),
            (
                two_hosts(|a, b| LinkSpec::veth(a.ifname("a-very-long-ifname"), b)),
                "[[link]]\na = { node = \"h1\", ifname = \"a-very-long-ifname\" }\nb = { node = \"h2\" }",
            ),
            (
                two_hosts(|a, _| LinkSpec::veth(a, EndSpec::new("h1"))),
                "[[link]]\na = { node = \"h1\" }\nb = { node = \"h1\" }",
            ),
            (
                two_hosts(|a, b| emulated(a, b).offloads(true)),
                "[[link]]\nkind = \"emulated\"\na = { node = \"h1\" }\nb = { node = \"h2\" }\noffloads = true",
            ),
            (
                two_hosts(|a, b| LinkSpec::veth(a, b).name("h1")),
                "[[link]]\nname = \"h1\"\na = { node = \"h1\" }\nb = { node = \"h2\" }",
            ),
            (
                {
                    let mut b = two_hosts(LinkSpec::veth);
                    b.link(LinkSpec::veth(EndSpec::new("h1"), EndSpec::new("h2")).name("h1-h2"));
                    b
                },
                "[[link]]\na = { node = \"h1\" }\nb = { node = \"h2\" }\n\
                 [[link]]\nname = \"h1-h2\"\na = { node = \"h1\" }\nb = { node = \"h2\" }",
            ),
        ];
        for (builder, link) in cases {
            let file = format!("{TWO_HOSTS}{link}\n");
            assert_eq!(err_of(builder), file_err(&file), "for the file\n{file}");
        }
    }

    #[test]
    fn builder_refuses_bad_nodes_and_routes_like_the_file() {
        let routed = |route: RouteSpec| {
            let mut b = TopologyBuilder::default();
            b.host("h1").routes.push(route);
            b.host("h2");
            b.link(LinkSpec::veth(
                EndSpec::new("h1").addr(v4([10, 0, 0, 1], 24)),
                EndSpec::new("h2").addr(v4([10, 0, 0, 2], 24)),
            ));
            b
        };
        let route_file = |r: &str| {
            format!(
                "[[host]]\nname = \"h1\"\nroute = [{r}]\n[[host]]\nname = \"h2\"\n[[link]]\n\
                 a = {{ node = \"h1\", addr = \"10.0.0.1/24\" }}\nb = {{ node = \"h2\", addr = \"10.0.0.2/24\" }}\n"
            )
        };
        let gw = |a: [u8; 4]| Some(IpAddr::from(a));
        let cases: Vec<(RouteSpec, &str)> = vec![
            (
                RouteSpec { to: RouteTo::Default, via: gw([10, 9, 9, 9]), dev: None },
                r#"{ to = "default", via = "10.9.9.9" }"#,
            ),
            (
                RouteSpec { to: RouteTo::Net(v4([10, 1, 0, 1], 16)), via: gw([10, 0, 0, 2]), dev: None },
                r#"{ to = "10.1.0.1/16", via = "10.0.0.2" }"#,
            ),
            (
                RouteSpec { to: RouteTo::Net(v4([10, 1, 0, 0], 16)), via: None, dev: None },
                r#"{ to = "10.1.0.0/16" }"#,
            ),
            (
                RouteSpec { to: RouteTo::Net(v4([10, 1, 0, 0], 16)), via: None, dev: Some("eth7".into()) },
                r#"{ to = "10.1.0.0/16", dev = "eth7" }"#,
            ),
            (
                RouteSpec {
                    to: RouteTo::Net(v4([10, 1, 0, 0], 16)),
                    via: Some("fd00::1".parse().unwrap()),
                    dev: None,
                },
                r#"{ to = "10.1.0.0/16", via = "fd00::1" }"#,
            ),
        ];
        for (route, text) in cases {
            assert_eq!(err_of(routed(route)), file_err(&route_file(text)), "for the route {text}");
        }

        assert_eq!(err_of(TopologyBuilder::default()), file_err(""));
        let mut twice = TopologyBuilder::default();
        twice.host("h1");
        twice.router("h1");
        assert_eq!(err_of(twice), file_err("[[host]]\nname = \"h1\"\n[[router]]\nname = \"h1\"\n"));
        let mut spaced = TopologyBuilder::default();
        spaced.host("h 1");
        assert_eq!(err_of(spaced), file_err("[[host]]\nname = \"h 1\"\n"));
        let mut sysctl = TopologyBuilder::default();
        sysctl.host("h1").sysctl("../etc", 1);
        assert_eq!(err_of(sysctl), file_err("[[host]]\nname = \"h1\"\nsysctl = { \"../etc\" = 1 }\n"));
    }

    #[test]
    fn typed_values_a_file_cannot_hold_are_refused_too() {
        // A prefix longer than the family has bits (Cidr::parse refuses it in a file).
        let m = err_of(two_hosts(|a, b| LinkSpec::veth(a.addr(v4([10, 0, 0, 1], 40)), b)));
        assert_eq!(m, "link \"h1-h2\" end a (\"h1\"): addr: prefix /40 of 10.0.0.1/40 is longer than /32");
        let mut r = TopologyBuilder::default();
        r.host("h1").route_via(RouteTo::Net(v4([10, 1, 0, 0], 33)), Ipv4Addr::new(10, 0, 0, 2));
        r.host("h2");
        r.link(LinkSpec::veth(
            EndSpec::new("h1").addr(v4([10, 0, 0, 1], 24)),
            EndSpec::new("h2").addr(v4([10, 0, 0, 2], 24)),
        ));
        assert!(err_of(r).contains("prefix /33"));
        // Gilbert-Elliott parameters out of range, and a sysctl value of two lines.
        let m = err_of(two_hosts(|a, b| {
            let mut l = LinkSpec::emulated(a, b);
            l.a_to_b.loss = Some(LossSpec::GilbertElliott { p: 0.01, r: 1.5, h: 1.0, k: 0.0 });
            l
        }));
        assert!(m.starts_with("link \"h1-h2\" a_to_b: loss ") && m.contains("between 0 and 1"), "{m}");
        let mut s = TopologyBuilder::default();
        s.host("h1").sysctl("net.ipv4.tcp_ecn", "1\n2");
        assert!(err_of(s).contains("one line"));
    }
}
