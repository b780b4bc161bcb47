//! The topology file: TOML read into raw serde structs, then turned in one
//! step into a validated, typed [`Topology`] ("parse, don't validate"). Every
//! error names the host, link or route and the offending value. Values are
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
//!   per-direction settings `rate`, `buffer` (both kinds), `delay`, `jitter`,
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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize, Serializer};
use tcpaccel_core::loss::LossSpec;
use tcpaccel_core::units::{parse_duration, ParseError, QueueLimit, Rate};

use crate::addr::Cidr;

/// Longest interface name Linux accepts (IFNAMSIZ 16 with the NUL).
pub const IFNAME_MAX: usize = 15;
/// Longest node or link name; namespace names are `tcpaccel-RUNID-NAME`.
pub const NAME_MAX: usize = 32;

/// A topology file that could not be read or is not valid.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("cannot read topology file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("topology file is not valid TOML for a topology: {0}")]
    Toml(String),
    /// A value that `tcpaccel_core::units` refused.
    #[error("{context}: {source}")]
    Value { context: String, source: ParseError },
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
}

impl Shaping {
    pub fn is_none(&self) -> bool {
        self.rate.is_none() && self.buffer.is_none()
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
    /// Reads and validates a topology file.
    pub fn load(path: impl AsRef<Path>) -> Result<Topology, SpecError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|source| SpecError::Read { path: path.display().to_string(), source })?;
        Topology::from_toml_str(&text)
    }

    /// Parses and validates topology TOML.
    pub fn from_toml_str(text: &str) -> Result<Topology, SpecError> {
        let raw: RawTopology = toml::from_str(text).map_err(|e| SpecError::Toml(e.to_string()))?;
        raw.validate()
    }

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
// Raw serde structs, as written in the file.

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTopology {
    name: Option<String>,
    #[serde(default, rename = "host")]
    hosts: Vec<RawNode>,
    #[serde(default, rename = "router")]
    routers: Vec<RawNode>,
    #[serde(default, rename = "link")]
    links: Vec<RawLink>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: String,
    #[serde(default)]
    sysctl: BTreeMap<String, toml::Value>,
    #[serde(default)]
    route: Vec<RawRoute>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    to: String,
    via: Option<String>,
    dev: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnd {
    node: String,
    addr: Option<String>,
    addr6: Option<String>,
    ifname: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum RawKind {
    #[default]
    Veth,
    Emulated,
}

/// Per-direction settings; the link's own fields are the defaults for both.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDir {
    rate: Option<String>,
    delay: Option<String>,
    jitter: Option<String>,
    buffer: Option<String>,
    loss: Option<toml::Value>,
    seed: Option<u64>,
    overhead: Option<u32>,
}

impl RawDir {
    /// `self` with unset fields taken from `base`.
    fn over(&self, base: &RawDir) -> RawDir {
        RawDir {
            rate: self.rate.clone().or_else(|| base.rate.clone()),
            delay: self.delay.clone().or_else(|| base.delay.clone()),
            jitter: self.jitter.clone().or_else(|| base.jitter.clone()),
            buffer: self.buffer.clone().or_else(|| base.buffer.clone()),
            loss: self.loss.clone().or_else(|| base.loss.clone()),
            seed: self.seed.or(base.seed),
            overhead: self.overhead.or(base.overhead),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    name: Option<String>,
    #[serde(default)]
    kind: RawKind,
    a: RawEnd,
    b: RawEnd,
    mtu: Option<u32>,
    txqueuelen: Option<u32>,
    offloads: Option<bool>,
    rate: Option<String>,
    delay: Option<String>,
    jitter: Option<String>,
    buffer: Option<String>,
    loss: Option<toml::Value>,
    seed: Option<u64>,
    overhead: Option<u32>,
    a_to_b: Option<RawDir>,
    b_to_a: Option<RawDir>,
}

// ---------------------------------------------------------------------------
// Validation.

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

fn value<T>(context: &str, r: Result<T, ParseError>) -> Result<T, SpecError> {
    r.map_err(|source| SpecError::Value { context: context.to_string(), source })
}

/// A loss value: a number is a Bernoulli probability (0.01 = 1%); a string is
/// any form `LossSpec::parse` accepts ("1%", "ge:p=1%,r=25%").
fn parse_loss(context: &str, v: &toml::Value) -> Result<LossSpec, SpecError> {
    let p = match v {
        toml::Value::String(s) => return value(context, LossSpec::parse(s)),
        toml::Value::Float(f) => *f,
        toml::Value::Integer(i) => *i as f64,
        other => {
            return Err(invalid(
                context,
                format!(
                "loss {other} must be a probability (0.01) or a string such as \"1%\" or \"ge:p=1%,r=25%\""
            ),
            ))
        }
    };
    if !p.is_finite() || !(0.0..=1.0).contains(&p) {
        return Err(invalid(context, format!("loss {v} is not a probability between 0 and 1")));
    }
    Ok(if p == 0.0 { LossSpec::None } else { LossSpec::Bernoulli { p } })
}

fn parse_dir(context: &str, d: &RawDir, default_seed: u64) -> Result<Direction, SpecError> {
    let dur = |field: &Option<String>| -> Result<Duration, SpecError> {
        match field {
            Some(s) => value(context, parse_duration(s)),
            None => Ok(Duration::ZERO),
        }
    };
    Ok(Direction {
        rate: d.rate.as_deref().map(|s| value(context, Rate::parse(s))).transpose()?,
        delay: dur(&d.delay)?,
        jitter: dur(&d.jitter)?,
        buffer: d.buffer.as_deref().map(|s| value(context, QueueLimit::parse(s))).transpose()?,
        loss: d.loss.as_ref().map(|v| parse_loss(context, v)).transpose()?.unwrap_or(LossSpec::None),
        seed: d.seed.unwrap_or(default_seed),
        overhead: d.overhead,
    })
}

fn parse_shaping(context: &str, d: &RawDir) -> Result<Shaping, SpecError> {
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
    let shaping = Shaping {
        rate: d.rate.as_deref().map(|s| value(context, Rate::parse(s))).transpose()?,
        buffer: d.buffer.as_deref().map(|s| value(context, QueueLimit::parse(s))).transpose()?,
    };
    if let Some(QueueLimit::Packets(0) | QueueLimit::Bytes(0)) = shaping.buffer {
        return Err(invalid(context, "buffer must not be zero"));
    }
    Ok(shaping)
}

fn parse_addr(context: &str, field: &str, s: &str, want_v4: bool) -> Result<Cidr, SpecError> {
    let c = Cidr::parse(s).map_err(|m| invalid(context, format!("{field}: {m}")))?;
    if c.is_v4() != want_v4 {
        let (fam, other) = if want_v4 { ("IPv4", "addr6") } else { ("IPv6", "addr") };
        return Err(invalid(context, format!("{field} {s:?} is not an {fam} address (use {other} for it)")));
    }
    c.check_host().map_err(|m| invalid(context, format!("{field}: {m}")))?;
    Ok(c)
}

impl RawTopology {
    fn validate(self) -> Result<Topology, SpecError> {
        // Nodes.
        let mut nodes: Vec<(Node, Vec<RawRoute>)> = Vec::new();
        let mut seen = HashSet::new();
        let all = self
            .hosts
            .into_iter()
            .map(|n| (Role::Host, n))
            .chain(self.routers.into_iter().map(|n| (Role::Router, n)));
        for (role, raw) in all {
            let what = if role == Role::Host { "host" } else { "router" };
            let ctx = format!("{what} {:?}", raw.name);
            check_name(&ctx, &raw.name)?;
            if !seen.insert(raw.name.clone()) {
                return Err(invalid(ctx, "defined twice (host and router names share one namespace)"));
            }
            let mut sysctls = Vec::new();
            for (k, v) in &raw.sysctl {
                let sctx = format!("{ctx}: sysctl {k:?}");
                let key_ok = !k.is_empty()
                    && !k.starts_with('.')
                    && !k.contains("..")
                    && k.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
                if !key_ok {
                    return Err(invalid(sctx, "not a sysctl name like net.ipv4.tcp_ecn"));
                }
                let v = match v {
                    toml::Value::String(s) if !s.contains('\n') => s.clone(),
                    toml::Value::Integer(i) => i.to_string(),
                    toml::Value::Boolean(b) => u8::from(*b).to_string(),
                    other => {
                        return Err(invalid(
                            sctx,
                            format!("value {other} must be a string, integer or boolean"),
                        ))
                    }
                };
                sysctls.push((k.clone(), v));
            }
            nodes.push((Node { name: raw.name, role, sysctls, routes: Vec::new() }, raw.route));
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
        for (i, raw) in self.links.into_iter().enumerate() {
            let name = match &raw.name {
                Some(n) => n.clone(),
                None => {
                    let base = format!("{}-{}", raw.a.node, raw.b.node);
                    let mut n = base.clone();
                    let mut k = 2;
                    while link_names.contains(&n) {
                        n = format!("{base}-{k}");
                        k += 1;
                    }
                    n
                }
            };
            let ctx = format!("link {name:?}");
            check_name(&ctx, &name)?;
            if !link_names.insert(name.clone()) {
                return Err(invalid(ctx, "defined twice"));
            }
            if seen.contains(&name) {
                return Err(invalid(ctx, "has the name of a node; link and node names must differ"));
            }
            if raw.a.node == raw.b.node {
                return Err(invalid(ctx, format!("connects node {:?} to itself", raw.a.node)));
            }
            let mut ends = Vec::new();
            for (side, e) in [("a", &raw.a), ("b", &raw.b)] {
                let ectx = format!("{ctx} end {side} ({:?})", e.node);
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
                let addr = e.addr.as_deref().map(|s| parse_addr(&ectx, "addr", s, true)).transpose()?;
                let addr6 = e.addr6.as_deref().map(|s| parse_addr(&ectx, "addr6", s, false)).transpose()?;
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
            if let Some(m) = raw.mtu {
                if !(68..=65535).contains(&m) {
                    return Err(invalid(&ctx, format!("mtu {m} is outside 68..=65535")));
                }
            }
            let base = RawDir {
                rate: raw.rate.clone(),
                delay: raw.delay.clone(),
                jitter: raw.jitter.clone(),
                buffer: raw.buffer.clone(),
                loss: raw.loss.clone(),
                seed: raw.seed,
                overhead: raw.overhead,
            };
            let ab = raw.a_to_b.clone().unwrap_or_default().over(&base);
            let ba = raw.b_to_a.clone().unwrap_or_default().over(&base);
            // The link's own values first, so an error in them names the link
            // rather than the direction that inherited it.
            match raw.kind {
                RawKind::Veth => parse_shaping(&ctx, &base).map(|_| ())?,
                RawKind::Emulated => parse_dir(&ctx, &base, 0).map(|_| ())?,
            }
            let kind = match raw.kind {
                RawKind::Veth => LinkKind::Veth {
                    a_to_b: parse_shaping(&format!("{ctx} a_to_b"), &ab)?,
                    b_to_a: parse_shaping(&format!("{ctx} b_to_a"), &ba)?,
                },
                RawKind::Emulated => {
                    // Distinct default seeds per link and direction, fixed by
                    // position in the file so a run replays without naming seeds.
                    let seed = 2 * i as u64 + 1;
                    LinkKind::Emulated {
                        a_to_b: parse_dir(&format!("{ctx} a_to_b"), &ab, seed)?,
                        b_to_a: parse_dir(&format!("{ctx} b_to_a"), &ba, seed + 1)?,
                    }
                }
            };
            if raw.kind == RawKind::Emulated && raw.offloads == Some(true) {
                return Err(invalid(
                    &ctx,
                    "offloads = true is not possible on an emulated link: the emulator needs wire-sized frames",
                ));
            }
            let offloads = raw.kind == RawKind::Veth && raw.offloads.unwrap_or(true);
            links.push(Link { name, a, b, kind, mtu: raw.mtu, txqueuelen: raw.txqueuelen, offloads });
        }

        // Routes, now that every node's interfaces and subnets are known.
        let mut out = Vec::new();
        for (mut node, raw_routes) in nodes {
            let ctx = format!("{} {:?}", if node.role == Role::Host { "host" } else { "router" }, node.name);
            let my_ends: Vec<&End> =
                links.iter().flat_map(|l| [&l.a, &l.b]).filter(|e| e.node == node.name).collect();
            for r in raw_routes {
                let rctx = format!("{ctx}: route to {:?}", r.to);
                let via = r
                    .via
                    .as_deref()
                    .map(|v| {
                        v.trim()
                            .parse::<IpAddr>()
                            .map_err(|_| invalid(&rctx, format!("via {v:?} is not an IP address")))
                    })
                    .transpose()?;
                let to = if r.to.trim() == "default" {
                    let v6 = matches!(via, Some(IpAddr::V6(_)));
                    Cidr::parse(if v6 { "::/0" } else { "0.0.0.0/0" }).map_err(|m| invalid(&rctx, m))?
                } else {
                    let c = Cidr::parse(&r.to).map_err(|m| invalid(&rctx, m))?;
                    if !c.is_network() {
                        return Err(invalid(
                            &rctx,
                            format!("{c} has host bits set; did you mean {}/{}?", c.network(), c.prefix),
                        ));
                    }
                    c
                };
                if let Some(v) = via {
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
                if via.is_none() && r.dev.is_none() {
                    return Err(invalid(&rctx, "needs via (a gateway) or dev (an interface), or both"));
                }
                node.routes.push(Route { to, via, dev: r.dev });
            }
            out.push(node);
        }
        Ok(Topology { name: self.name, nodes: out, links })
    }
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

    const DUMBBELL: &str = r#"
        name = "test"
        [[host]]
        name = "h1"
        sysctl = { "net.ipv4.tcp_congestion_control" = "cubic", "net.ipv4.tcp_ecn" = 1 }
        [[host]]
        name = "h2"
        [[link]]
        kind = "emulated"
        a = { node = "h1", addr = "10.0.0.1/24", addr6 = "fd00::1/64" }
        b = { node = "h2", addr = "10.0.0.2/24", addr6 = "fd00::2/64" }
        rate = "50mbit"
        delay = "20ms"
        buffer = "500KB"
        loss = "1%"
        b_to_a = { rate = "10mbit", loss = 0 }
    "#;

    fn err_of(toml: &str) -> String {
        match Topology::from_toml_str(toml) {
            Ok(t) => panic!("expected an error, got {t:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn dumbbell_parses_with_per_direction_overrides() {
        let t = Topology::from_toml_str(DUMBBELL).unwrap();
        assert_eq!(t.nodes.len(), 2);
        assert_eq!(
            t.nodes[0].sysctls,
            vec![
                ("net.ipv4.tcp_congestion_control".to_string(), "cubic".to_string()),
                ("net.ipv4.tcp_ecn".to_string(), "1".to_string())
            ]
        );
        let l = &t.links[0];
        assert_eq!(l.name, "h1-h2");
        assert_eq!(l.a.ifname, "eth0");
        assert_eq!(l.b.ifname, "eth0");
        assert_eq!(l.a.addr, Some(Cidr::parse("10.0.0.1/24").unwrap()));
        let LinkKind::Emulated { a_to_b, b_to_a } = l.kind else { panic!("not emulated") };
        assert_eq!(a_to_b.rate, Some(Rate::mbps(50)));
        assert_eq!(b_to_a.rate, Some(Rate::mbps(10)));
        assert_eq!(a_to_b.delay, Duration::from_millis(20));
        assert_eq!(b_to_a.delay, Duration::from_millis(20));
        assert_eq!(a_to_b.buffer, Some(QueueLimit::Bytes(500_000)));
        assert_eq!(a_to_b.loss, LossSpec::Bernoulli { p: 0.01 });
        assert_eq!(b_to_a.loss, LossSpec::None);
        assert_ne!(a_to_b.seed, b_to_a.seed);
        // Serializes for state files and --json.
        let j = serde_json::to_value(&t).unwrap();
        assert_eq!(j["links"][0]["kind"], "emulated");
        assert_eq!(j["links"][0]["a"]["addr"], "10.0.0.1/24");
        assert_eq!(j["links"][0]["a_to_b"]["delay"], "20ms");
    }

    #[test]
    fn ifnames_count_per_node_and_names_default_uniquely() {
        let t = Topology::from_toml_str(
            r#"
            [[host]]
            name = "h1"
            [[host]]
            name = "h2"
            [[link]]
            a = { node = "h1" }
            b = { node = "h2" }
            [[link]]
            a = { node = "h1" }
            b = { node = "h2", ifname = "second" }
            "#,
        )
        .unwrap();
        assert_eq!(t.links[0].name, "h1-h2");
        assert_eq!(t.links[1].name, "h1-h2-2");
        assert_eq!(t.links[1].a.ifname, "eth1");
        assert_eq!(t.links[1].b.ifname, "second");
        assert_eq!(t.ends_of("h1").count(), 2);
        assert!(matches!(t.links[0].kind, LinkKind::Veth { .. }));
        assert!(t.links[0].offloads);
    }

    #[test]
    fn routes_resolve_against_connected_subnets() {
        let t = Topology::from_toml_str(
            r#"
            [[host]]
            name = "h1"
            route = [{ to = "default", via = "10.0.1.2" }, { to = "fd00:2::/64", via = "fd00:1::2" }]
            [[router]]
            name = "r1"
            [[link]]
            a = { node = "h1", addr = "10.0.1.1/24", addr6 = "fd00:1::1/64" }
            b = { node = "r1", addr = "10.0.1.2/24", addr6 = "fd00:1::2/64" }
            rate = "10mbit"
            buffer = "100p"
            "#,
        )
        .unwrap();
        let h1 = t.node("h1").unwrap();
        assert_eq!(h1.routes[0].dest(), "default");
        assert!(h1.routes[0].to.is_v4());
        assert_eq!(h1.routes[1].dest(), "fd00:2::/64");
        assert_eq!(t.node("r1").unwrap().role, Role::Router);
        let LinkKind::Veth { a_to_b, .. } = t.links[0].kind else { panic!() };
        assert_eq!(a_to_b, Shaping { rate: Some(Rate::mbps(10)), buffer: Some(QueueLimit::Packets(100)) });
    }

    const TWO_HOSTS: &str = "[[host]]\nname = \"h1\"\n[[host]]\nname = \"h2\"\n";

    fn with_link(link: &str) -> String {
        format!("{TWO_HOSTS}[[link]]\n{link}\n")
    }

    #[test]
    fn errors_name_the_offender() {
        let cases: &[(&str, &[&str])] = &[
            (
                r#"a = { node = "h1" }
                   b = { node = "h9" }"#,
                &["h9", "unknown node", "link \"h1-h9\""],
            ),
            (
                r#"a = { node = "h1", addr = "10.0.0.1/24" }
                   b = { node = "h2", addr = "10.0.0.1/24" }"#,
                &["duplicate address 10.0.0.1"],
            ),
            (
                r#"a = { node = "h1", addr = "10.0.0.300/24" }
                   b = { node = "h2" }"#,
                &["10.0.0.300", "end a"],
            ),
            (
                r#"a = { node = "h1", addr = "10.0.0.1" }
                   b = { node = "h2" }"#,
                &["no prefix length"],
            ),
            (
                r#"a = { node = "h1", addr = "fd00::1/64" }
                   b = { node = "h2" }"#,
                &["not an IPv4", "addr6"],
            ),
            (
                r#"a = { node = "h1", addr = "10.0.0.1/24" }
                   b = { node = "h2", addr = "10.0.1.1/24" }"#,
                &["not in one subnet"],
            ),
            (
                r#"name = "wan"
                   a = { node = "h1" }
                   b = { node = "h2" }
                   rate = "100 furlongs""#,
                &["link \"wan\": cannot parse rate", "100 furlongs", "accepted forms"],
            ),
            (
                r#"a = { node = "h1" }
                   b = { node = "h2" }
                   b_to_a = { rate = "fast" }"#,
                &["link \"h1-h2\" b_to_a", "\"fast\""],
            ),
            (
                r#"kind = "emulated"
                   a = { node = "h1" }
                   b = { node = "h2" }
                   delay = "20""#,
                &["\"20\"", "missing unit"],
            ),
            (
                r#"a = { node = "h1" }
                   b = { node = "h2" }
                   delay = "20ms""#,
                &["delay needs kind = \"emulated\""],
            ),
            (
                r#"kind = "emulated"
                   a = { node = "h1" }
                   b = { node = "h2" }
                   loss = 1.5"#,
                &["loss", "probability"],
            ),
            (
                r#"a = { node = "h1", ifname = "a-very-long-ifname" }
                   b = { node = "h2" }"#,
                &["a-very-long-ifname", "15"],
            ),
            (
                r#"a = { node = "h1" }
                   b = { node = "h1" }"#,
                &["itself"],
            ),
            (
                r#"kind = "emulated"
                   a = { node = "h1" }
                   b = { node = "h2" }
                   offloads = true"#,
                &["offloads = true", "emulated"],
            ),
            (
                r#"kind = "wormhole"
                   a = { node = "h1" }
                   b = { node = "h2" }"#,
                &["wormhole"],
            ),
            (
                r#"a = { node = "h1" }
                   b = { node = "h2" }
                   colour = "blue""#,
                &["colour"],
            ),
        ];
        for (link, needles) in cases {
            let msg = err_of(&with_link(link));
            for n in *needles {
                assert!(msg.contains(n), "error {msg:?} should mention {n:?}");
            }
        }
    }

    #[test]
    fn node_and_route_errors() {
        assert!(err_of("").contains("no [[host]]"));
        assert!(err_of("[[host]]\nname = \"h1\"\n[[router]]\nname = \"h1\"\n").contains("defined twice"));
        assert!(err_of("[[host]]\nname = \"h 1\"\n").contains("\"h 1\""));
        let route = |r: &str| {
            err_of(&format!(
                "[[host]]\nname = \"h1\"\nroute = [{r}]\n[[host]]\nname = \"h2\"\n[[link]]\n\
                 a = {{ node = \"h1\", addr = \"10.0.0.1/24\" }}\nb = {{ node = \"h2\", addr = \"10.0.0.2/24\" }}\n"
            ))
        };
        let m = route(r#"{ to = "default", via = "10.9.9.9" }"#);
        assert!(m.contains("host \"h1\"") && m.contains("10.9.9.9") && m.contains("not in a subnet"), "{m}");
        assert!(route(r#"{ to = "10.1.0.1/16", via = "10.0.0.2" }"#).contains("did you mean 10.1.0.0/16"));
        assert!(route(r#"{ to = "10.1.0.0/16" }"#).contains("needs via"));
        assert!(route(r#"{ to = "10.1.0.0/16", dev = "eth7" }"#).contains("eth7"));
        assert!(route(r#"{ to = "10.1.0.0/16", via = "fd00::1" }"#).contains("same family"));
        assert!(err_of("[[host]]\nname = \"h1\"\nsysctl = { \"../etc\" = 1 }\n").contains("../etc"));
    }

    #[test]
    fn gilbert_elliott_loss() {
        let t = Topology::from_toml_str(&with_link(
            r#"kind = "emulated"
               a = { node = "h1" }
               b = { node = "h2" }
               loss = "ge:p=1%,r=25%"
               b_to_a = { loss = 0.5 }"#,
        ))
        .unwrap();
        let LinkKind::Emulated { a_to_b, b_to_a } = t.links[0].kind else { panic!() };
        assert_eq!(a_to_b.loss, LossSpec::GilbertElliott { p: 0.01, r: 0.25, h: 1.0, k: 0.0 });
        assert_eq!(b_to_a.loss, LossSpec::Bernoulli { p: 0.5 });
        let m = err_of(&with_link(
            r#"kind = "emulated"
               a = { node = "h1" }
               b = { node = "h2" }
               loss = "ge:p=1%""#,
        ));
        assert!(m.contains("ge:p=1%") && m.contains("accepted forms"), "{m}");
    }
}
