//! The topology file: TOML deserialized straight into typed values (rates,
//! durations, queue limits and loss in the `tcpaccel_core` grammars, addresses
//! as [`Cidr`]/[`IpAddr`], route destinations as [`RouteTo`]), then moved into
//! a [`TopologyBuilder`], which checks the whole topology exactly as it does
//! one built in code. A value that does not parse is serde's error: the TOML
//! line and column, the line itself, and what the value should look like; the
//! builder's errors name the host, link or route.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use serde::de::{self, Deserializer};
use serde::Deserialize;
use tcpaccel_core::loss::LossSpec;
use tcpaccel_core::units::{self, Bytes, QueueLimit, Rate};

use super::{
    invalid, node_context, DirSpec, EndSpec, LinkSpec, LinkType, NodeSpec, Role, RouteSpec, RouteTo,
    SpecError, Topology, TopologyBuilder,
};
use crate::addr::Cidr;

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
        raw.into_builder()?.build()
    }
}

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
    #[serde(deserialize_with = "route_to")]
    to: RouteTo,
    #[serde(default, deserialize_with = "ip")]
    via: Option<IpAddr>,
    dev: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnd {
    node: String,
    #[serde(default, deserialize_with = "cidr")]
    addr: Option<Cidr>,
    #[serde(default, deserialize_with = "cidr6")]
    addr6: Option<Cidr>,
    ifname: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum RawKind {
    #[default]
    Veth,
    Emulated,
}

/// Per-direction settings in `a_to_b` and `b_to_a`. At the top of a
/// `[[link]]` the same keys set both directions; they are spelled out there
/// in [`RawLink`] rather than taken in with serde's `flatten`, which loses
/// each key's position: a typo (`rat = "100mbit"`) or a bad value would be
/// reported at the `[[link]]` line instead of its own. Values deserialize
/// straight into their types with `core::units`' serde visitors, as the
/// lanes config does.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDir {
    #[serde(default, deserialize_with = "units::text::rate")]
    rate: Option<Rate>,
    #[serde(default, deserialize_with = "units::text::duration")]
    delay: Option<Duration>,
    #[serde(default, deserialize_with = "units::text::duration")]
    jitter: Option<Duration>,
    #[serde(default, deserialize_with = "buffer")]
    buffer: Option<QueueLimit>,
    #[serde(default, deserialize_with = "units::text::bytes")]
    burst: Option<Bytes>,
    #[serde(default, deserialize_with = "loss")]
    loss: Option<LossSpec>,
    seed: Option<u64>,
    overhead: Option<u32>,
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
    // The keys of RawDir, for both directions (see RawDir on why not flatten;
    // `RawLink::both` must name each, so the lists cannot drift apart).
    #[serde(default, deserialize_with = "units::text::rate")]
    rate: Option<Rate>,
    #[serde(default, deserialize_with = "units::text::duration")]
    delay: Option<Duration>,
    #[serde(default, deserialize_with = "units::text::duration")]
    jitter: Option<Duration>,
    #[serde(default, deserialize_with = "buffer")]
    buffer: Option<QueueLimit>,
    #[serde(default, deserialize_with = "units::text::bytes")]
    burst: Option<Bytes>,
    #[serde(default, deserialize_with = "loss")]
    loss: Option<LossSpec>,
    seed: Option<u64>,
    overhead: Option<u32>,
    a_to_b: Option<RawDir>,
    b_to_a: Option<RawDir>,
}

impl RawLink {
    /// The settings at the top of the link, for both directions.
    fn both(&self) -> RawDir {
        RawDir {
            rate: self.rate,
            delay: self.delay,
            jitter: self.jitter,
            buffer: self.buffer,
            burst: self.burst,
            loss: self.loss,
            seed: self.seed,
            overhead: self.overhead,
        }
    }
}

/// A string in the grammar of `parse` (whose error says what is wrong), or
/// serde's "invalid type" naming `expecting`: for the values that
/// `units::text` has no visitor for (queue limits, addresses, routes).
struct Text<T>(fn(&str) -> Result<T, String>, &'static str);

impl<T> de::Visitor<'_> for Text<T> {
    type Value = T;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.1)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        (self.0)(v).map_err(E::custom)
    }
}

fn buffer<'de, D: Deserializer<'de>>(d: D) -> Result<Option<QueueLimit>, D::Error> {
    let parse = |v: &str| QueueLimit::parse(v).map_err(|e| format!("buffer: {e}"));
    d.deserialize_str(Text(parse, "a queue limit, e.g. \"500KB\" or \"100p\"")).map(Some)
}

/// An interface address with its prefix (`"10.0.0.1/24"`).
fn cidr<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Cidr>, D::Error> {
    let parse = |v: &str| Cidr::parse(v).map_err(|e| format!("addr: {e}"));
    d.deserialize_str(Text(parse, "an address with its prefix length, e.g. \"10.0.0.1/24\"")).map(Some)
}

fn cidr6<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Cidr>, D::Error> {
    let parse = |v: &str| Cidr::parse(v).map_err(|e| format!("addr6: {e}"));
    d.deserialize_str(Text(parse, "an address with its prefix length, e.g. \"fd00::1/64\"")).map(Some)
}

/// A gateway address (`"10.0.1.2"`, `"fd00:1::2"`).
fn ip<'de, D: Deserializer<'de>>(d: D) -> Result<Option<IpAddr>, D::Error> {
    let parse = |v: &str| v.trim().parse::<IpAddr>().map_err(|_| format!("via {v:?} is not an IP address"));
    d.deserialize_str(Text(parse, "an IP address, e.g. \"10.0.1.2\"")).map(Some)
}

/// A route destination: `"default"` or a network with its prefix.
fn route_to<'de, D: Deserializer<'de>>(d: D) -> Result<RouteTo, D::Error> {
    let parse = |v: &str| match v.trim() {
        "default" => Ok(RouteTo::Default),
        _ => Cidr::parse(v).map(RouteTo::Net).map_err(|e| format!("route to: {e}")),
    };
    d.deserialize_str(Text(parse, "\"default\" or a network with its prefix, e.g. \"10.1.0.0/16\""))
}

/// A loss value: a number is a Bernoulli probability (0.01 = 1%; the builder
/// checks its range); a string is any form `LossSpec::parse` accepts ("1%",
/// "ge:p=1%,r=25%").
fn loss<'de, D: Deserializer<'de>>(d: D) -> Result<Option<LossSpec>, D::Error> {
    struct Loss;
    impl de::Visitor<'_> for Loss {
        type Value = LossSpec;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("loss as a probability (0.01) or a string such as \"1%\" or \"ge:p=1%,r=25%\"")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<LossSpec, E> {
            LossSpec::parse(v).map_err(|e| E::custom(format!("loss: {e}")))
        }
        fn visit_f64<E: de::Error>(self, p: f64) -> Result<LossSpec, E> {
            Ok(LossSpec::Bernoulli { p })
        }
        fn visit_i64<E: de::Error>(self, p: i64) -> Result<LossSpec, E> {
            Ok(LossSpec::Bernoulli { p: p as f64 })
        }
        fn visit_u64<E: de::Error>(self, p: u64) -> Result<LossSpec, E> {
            Ok(LossSpec::Bernoulli { p: p as f64 })
        }
    }
    d.deserialize_any(Loss).map(Some)
}

impl RawDir {
    fn spec(self) -> DirSpec {
        let RawDir { rate, delay, jitter, buffer, burst, loss, seed, overhead } = self;
        DirSpec { rate, delay, jitter, buffer, burst: burst.map(Bytes::get), loss, seed, overhead }
    }
}

impl RawNode {
    fn into_spec(self, role: Role) -> Result<NodeSpec, SpecError> {
        let ctx = node_context(role, &self.name);
        let mut sysctls = Vec::new();
        for (k, v) in self.sysctl {
            let v = match v {
                toml::Value::String(s) => s,
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => u8::from(b).to_string(),
                other => {
                    return Err(invalid(
                        format!("{ctx}: sysctl {k:?}"),
                        format!("value {other} must be a string, integer or boolean"),
                    ))
                }
            };
            sysctls.push((k, v));
        }
        let routes = self.route.into_iter().map(|r| RouteSpec { to: r.to, via: r.via, dev: r.dev }).collect();
        Ok(NodeSpec { name: self.name, role, sysctls, routes })
    }
}

impl RawTopology {
    /// Moves the typed values into a builder, which checks how they fit together.
    fn into_builder(self) -> Result<TopologyBuilder, SpecError> {
        let mut nodes = Vec::new();
        for n in self.hosts {
            nodes.push(n.into_spec(Role::Host)?);
        }
        for n in self.routers {
            nodes.push(n.into_spec(Role::Router)?);
        }
        let end = |e: RawEnd| EndSpec { node: e.node, ifname: e.ifname, addr: e.addr, addr6: e.addr6 };
        let links = self
            .links
            .into_iter()
            .map(|raw| {
                let kind = match raw.kind {
                    RawKind::Veth => LinkType::Veth,
                    RawKind::Emulated => LinkType::Emulated,
                };
                let both = raw.both().spec();
                let mut l = LinkSpec::new(kind, end(raw.a), end(raw.b));
                l.both = both;
                l.name = raw.name;
                l.mtu = raw.mtu;
                l.txqueuelen = raw.txqueuelen;
                l.offloads = raw.offloads;
                l.a_to_b = raw.a_to_b.unwrap_or_default().spec();
                l.b_to_a = raw.b_to_a.unwrap_or_default().spec();
                l
            })
            .collect();
        Ok(TopologyBuilder { name: self.name, nodes, links })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{LinkKind, Shaping};

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
    fn unknown_keys_of_a_link_are_reported_at_their_own_line() {
        // DUMBBELL's `delay` is on line 13; the typo goes on line 14, and the
        // message shows that line, not the `[[link]]` header's (line 8).
        for (line, key, column) in [
            ("rat = \"100mbit\"", "rat", 9),
            ("ratee = \"1mbit\"", "ratee", 9),
            ("a_to_b = { delai = \"1ms\" }", "delai", 20),
        ] {
            let text = DUMBBELL.replace("delay = \"20ms\"", &format!("delay = \"20ms\"\n        {line}"));
            let e = err_of(&text);
            assert!(e.contains(&format!("line 14, column {column}")), "{key}: {e}");
            assert!(e.contains(&format!("unknown field `{key}`")) && e.contains(line), "{key}: {e}");
            assert!(!e.contains("[[link]]"), "{key}: {e}");
        }
        // The fields of both directions still parse at the top of a link.
        let t = Topology::from_toml_str(DUMBBELL).unwrap();
        let LinkKind::Emulated { a_to_b, .. } = t.links[0].kind else { panic!("not emulated") };
        assert_eq!((a_to_b.rate, a_to_b.delay), (Some(Rate::mbps(50)), Duration::from_millis(20)));
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

    /// The file is read into the builder code uses: the same topology built
    /// in code equals it, defaults (link name, ifnames, seeds) included.
    #[test]
    fn the_dumbbell_built_in_code_equals_the_file() {
        let end = |node: &str, host: u8| {
            let v6: IpAddr = format!("fd00::{host}").parse().unwrap();
            EndSpec::new(node).addr(Cidr::new([10, 0, 0, host], 24)).addr6(Cidr::new(v6, 64))
        };
        let mut b = TopologyBuilder::new("test");
        b.host("h1").sysctl("net.ipv4.tcp_congestion_control", "cubic").sysctl("net.ipv4.tcp_ecn", 1);
        b.host("h2");
        let mut l = LinkSpec::emulated(end("h1", 1), end("h2", 2))
            .rate(Rate::mbps(50))
            .delay(Duration::from_millis(20))
            .buffer(QueueLimit::Bytes(500_000));
        l.both.loss = Some(LossSpec::Bernoulli { p: 0.01 });
        l.b_to_a.rate = Some(Rate::mbps(10));
        l.b_to_a.loss = Some(LossSpec::Bernoulli { p: 0.0 });
        b.link(l);
        assert_eq!(b.build().unwrap(), Topology::from_toml_str(DUMBBELL).unwrap());
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
        assert_eq!(
            a_to_b,
            Shaping { rate: Some(Rate::mbps(10)), buffer: Some(QueueLimit::Packets(100)), burst: None }
        );
    }

    #[test]
    fn a_veth_links_bucket_is_bytes_per_direction() {
        let t = Topology::from_toml_str(&with_link(
            r#"a = { node = "h1" }
               b = { node = "h2" }
               rate = "10mbit"
               burst = "3028B"
               b_to_a = { burst = "8KiB" }"#,
        ))
        .unwrap();
        let LinkKind::Veth { a_to_b, b_to_a } = t.links[0].kind else { panic!() };
        assert_eq!((a_to_b.burst, b_to_a.burst), (Some(3028), Some(8192)));
        assert_eq!(b_to_a.rate, Some(Rate::mbps(10)));
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
                &["10.0.0.300"],
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
                // At the top of a link too, the value's own line (9; the
                // `[[link]]` header is line 5).
                &["line 9, column 27", "rate = \"100 furlongs\"", "cannot parse rate", "accepted forms"],
            ),
            (
                r#"a = { node = "h1" }
                   b = { node = "h2" }
                   b_to_a = { rate = "fast" }"#,
                &["line 8, column 38", "b_to_a = { rate = \"fast\" }", "cannot parse rate \"fast\""],
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
                r#"a = { node = "h1" }
                   b = { node = "h2" }
                   rate = "10mbit"
                   burst = "1KiB""#,
                &["burst 1024 B", "below one full frame", "1514 B"],
            ),
            (
                r#"a = { node = "h1" }
                   b = { node = "h2" }
                   mtu = 9000
                   rate = "10mbit"
                   burst = "3028B""#,
                &["burst 3028 B", "MTU 9000", "9014 B"],
            ),
            (
                r#"a = { node = "h1" }
                   b = { node = "h2" }
                   burst = "4KiB""#,
                &["burst 4096 B needs a rate"],
            ),
            (
                r#"kind = "emulated"
                   a = { node = "h1" }
                   b = { node = "h2" }
                   rate = "10mbit"
                   burst = "4KiB""#,
                &["burst", "emulated link serializes frame by frame"],
            ),
            (
                r#"a = { node = "h1" }
                   b = { node = "h2" }
                   rate = "10mbit"
                   burst = "lots""#,
                &["line 9, column 28", "burst = \"lots\"", "cannot parse size \"lots\""],
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
        // Values that do not parse: serde's position, the key and the problem.
        let m = route(r#"{ to = "10.1.0.0/16", via = "gateway" }"#);
        assert!(m.contains("line 3") && m.contains("via \"gateway\" is not an IP address"), "{m}");
        let m = route(r#"{ to = "nowhere" }"#);
        assert!(m.contains("line 3") && m.contains("route to: ") && m.contains("\"nowhere\""), "{m}");
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
        let m = err_of(&with_link(
            r#"kind = "emulated"
               a = { node = "h1" }
               b = { node = "h2" }
               b_to_a = { loss = true }"#,
        ));
        assert!(m.contains("line 9") && m.contains("loss as a probability (0.01)"), "{m}");
    }
}
