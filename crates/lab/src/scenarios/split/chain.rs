//! The relay chain of one variant: its segments and topology ([`Chain`]),
//! and what each peer is told to join it (tcpaccel's arguments, Dante's,
//! Squid's and nginx's configuration files).

use anyhow::{bail, Context, Result};
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;
use tcpaccel_core::units::QueueLimit;
use tcpaccel_net::{Cidr, EndSpec, LinkSpec, Topology, TopologyBuilder};

use super::{HTTP_PORT, SOCKS_PORT, SQUID_PORT};

/// Who relays at the joints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Direct,
    Tcpaccel,
    /// tcpaccel relays with `--early-reply`.
    TcpaccelEarly,
    Dante,
    Squid,
}

impl Kind {
    pub fn parse(s: &str) -> Result<Kind> {
        match s {
            "direct" => Ok(Kind::Direct),
            "tcpaccel" => Ok(Kind::Tcpaccel),
            "tcpaccel-early" => Ok(Kind::TcpaccelEarly),
            "dante" => Ok(Kind::Dante),
            "squid" => Ok(Kind::Squid),
            _ => bail!("unknown relay kind {s:?}; valid: tcpaccel, tcpaccel-early, dante, squid"),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Kind::Direct => "direct",
            Kind::Tcpaccel => "tcpaccel",
            Kind::TcpaccelEarly => "tcpaccel-early",
            Kind::Dante => "dante",
            Kind::Squid => "squid",
        }
    }
}

/// One variant: relay kind and the RTT of each segment, client side first.
#[derive(Debug, Clone, PartialEq)]
pub struct Chain {
    pub kind: Kind,
    pub rtts: Vec<Duration>,
    /// Whether the split was asked for as uneven (`A-B`) rather than `N` equal segments.
    pub uneven: bool,
}

impl Chain {
    /// Parses a variant name against the total RTT.
    pub fn parse(name: &str, total: Duration) -> Result<Chain> {
        if name == "direct" {
            return Ok(Chain { kind: Kind::Direct, rtts: vec![total], uneven: false });
        }
        let (kind, split) =
            name.split_once('/').with_context(|| format!("variant {name:?}: expected KIND/N"))?;
        let kind = Kind::parse(kind)?;
        if kind == Kind::Direct {
            bail!("variant {name:?}: direct has no segments to give");
        }
        if let Some((a, b)) = split.split_once('-') {
            let ms = |v: &str| -> Result<Duration> {
                let x: f64 =
                    v.trim().parse().with_context(|| format!("variant {name:?}: {v:?} is not ms"))?;
                if !(x > 0.0 && x < 10_000.0) {
                    bail!("variant {name:?}: segment RTT {x} ms out of range");
                }
                Ok(Duration::from_secs_f64(x / 1e3))
            };
            return Ok(Chain { kind, rtts: vec![ms(a)?, ms(b)?], uneven: true });
        }
        let n: u32 =
            split.parse().with_context(|| format!("variant {name:?}: {split:?} is not a segment count"))?;
        if !(2..=8).contains(&n) {
            bail!("variant {name:?}: segments must be 2..=8 (1 is `direct`)");
        }
        Ok(Chain { kind, rtts: vec![total / n; n as usize], uneven: false })
    }

    pub fn segments(&self) -> usize {
        self.rtts.len()
    }

    /// Node names: `c`, relays `p1..`, `s`.
    pub fn nodes(&self) -> Vec<String> {
        let n = self.segments();
        let mut v = vec!["c".to_string()];
        v.extend((1..n).map(|i| format!("p{i}")));
        v.push("s".into());
        v
    }

    /// Segment `i` (1-based) is 10.50.i.0/24: its client-side end is .1, its server-side end .2.
    pub fn left_of_segment(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 50, i as u8, 1)
    }
    pub fn right_of_segment(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 50, i as u8, 2)
    }

    /// The chain as a topology: no routes (each node only talks to its neighbours),
    /// one emulated link per segment with delay RTT/2 each way and no rate limit.
    pub fn topology(&self) -> Result<Topology> {
        let nodes = self.nodes();
        let mut t = TopologyBuilder::new("lab-split");
        for n in &nodes {
            t.host(n);
        }
        for (i, rtt) in self.rtts.iter().enumerate() {
            let seg = i + 1;
            let end = |node: &str, addr: Ipv4Addr, ifname: &str| {
                EndSpec::new(node).addr(Cidr::new(addr, 24)).ifname(ifname)
            };
            t.link(
                LinkSpec::emulated(
                    end(&nodes[i], Self::left_of_segment(seg), "right"),
                    end(&nodes[i + 1], Self::right_of_segment(seg), "left"),
                )
                .name(format!("seg{seg}"))
                .delay(*rtt / 2)
                .buffer(QueueLimit::Bytes(16_000_000)),
            );
        }
        t.build().context("building the split chain topology")
    }
}

/// The server's URL for the payload.
pub(super) fn url(chain: &Chain) -> String {
    format!("http://{}:{HTTP_PORT}/payload.bin", Chain::right_of_segment(chain.segments()))
}

/// How a tcpaccel relay names the next relay: `tcpaccel+socks5://` tells it
/// the hop is a tcpaccel relay, so the handshake to it is sent in one piece.
pub fn next_hop(scheme: &str, addr: Ipv4Addr) -> String {
    format!("{scheme}://{addr}:{SOCKS_PORT}")
}

/// `tcpaccel relay` arguments (after the program) for SOCKS relay `i`
/// (1-based) of a tcpaccel chain: its next relay named with `scheme`, and
/// `--early-reply` on the client's relay only of a `tcpaccel-early` chain
/// (the others keep their exact replies; the first learns a failure from
/// them).
pub fn socks_relay_args(chain: &Chain, i: usize, scheme: &str, log: Option<&str>) -> Vec<String> {
    let me = Chain::right_of_segment(i);
    let mut a: Vec<String> = vec![
        "relay".into(),
        "--listen".into(),
        format!("{me}:{SOCKS_PORT}"),
        "--allow".into(),
        "10.50.0.0/16".into(),
        "--cc".into(),
        "cubic".into(),
    ];
    if i + 1 < chain.segments() {
        a.push("--next".into());
        a.push(next_hop(scheme, Chain::right_of_segment(i + 1)));
    }
    if chain.kind == Kind::TcpaccelEarly && i == 1 {
        a.push("--early-reply".into());
    }
    if let Some(f) = log {
        a.push("--log".into());
        a.push(f.into());
    }
    a
}

/// Dante's configuration for relay `i` (1-based) of an `n`-segment chain.
pub fn dante_conf(i: usize, n: usize) -> String {
    let mut c = format!(
        "logoutput: stderr\n\
         internal: {} port = {SOCKS_PORT}\n\
         external: {}\n\
         clientmethod: none\n\
         socksmethod: none\n\
         user.privileged: root\n\
         user.unprivileged: nobody\n\
         client pass {{ from: 10.50.0.0/16 to: 0.0.0.0/0 }}\n\
         socks pass {{ from: 10.50.0.0/16 to: 10.50.0.0/16 command: connect }}\n",
        Chain::right_of_segment(i),
        Chain::left_of_segment(i + 1),
    );
    if i + 1 < n {
        c += &format!(
            "route {{ from: 0.0.0.0/0 to: 0.0.0.0/0 via: {} port = {SOCKS_PORT}\n  \
             proxyprotocol: socks_v5\n  command: connect\n  protocol: tcp\n  method: none\n}}\n",
            Chain::right_of_segment(i + 1)
        );
    }
    c
}

/// Squid's configuration for relay `i` of an `n`-segment chain, its files in `dir`.
pub fn squid_conf(i: usize, n: usize, dir: &Path) -> String {
    let d = dir.display();
    let mut c = format!(
        "http_port {}:{SQUID_PORT}\n\
         visible_hostname tcpaccel-split-p{i}\n\
         via off\nforwarded_for delete\n\
         acl lab src 10.50.0.0/16\nhttp_access allow lab\nhttp_access deny all\n\
         cache deny all\ncache_mem 0 MB\n\
         access_log none\ncache_store_log none\ncache_log {d}/cache.log\n\
         pid_filename {d}/squid.pid\ncoredump_dir {d}\n\
         shutdown_lifetime 0 seconds\n",
        Chain::right_of_segment(i)
    );
    if i + 1 < n {
        c += &format!(
            "cache_peer {} parent {SQUID_PORT} 0 no-query default\nnever_direct allow all\n",
            Chain::right_of_segment(i + 1)
        );
    }
    c
}

/// nginx serving `root` on the server's address, one process in the foreground.
pub fn nginx_conf(addr: Ipv4Addr, root: &Path, dir: &Path) -> anyhow::Result<String> {
    crate::testbeds::nginx::conf(addr.into(), HTTP_PORT, root, dir)
}

#[cfg(test)]
mod tests {
    use super::super::Split;
    use super::*;

    const RTT: Duration = Duration::from_millis(50);

    #[test]
    fn variants_parse_into_chains() {
        let c = Chain::parse("tcpaccel/5", RTT).unwrap();
        assert_eq!(c.rtts, vec![Duration::from_millis(10); 5]);
        assert_eq!(c.nodes(), vec!["c", "p1", "p2", "p3", "p4", "s"]);
        let u = Chain::parse("dante/40-10", RTT).unwrap();
        assert_eq!(u.rtts, vec![Duration::from_millis(40), Duration::from_millis(10)]);
        assert!(u.uneven);
        assert_eq!(Chain::parse("direct", RTT).unwrap().segments(), 1);
        for bad in ["tcpaccel/1", "tcpaccel/x", "haproxy/2", "dante", "dante/0-50", "direct/2"] {
            assert!(Chain::parse(bad, RTT).is_err(), "{bad}");
        }
    }

    #[test]
    fn topology_has_one_delay_link_per_segment() {
        let t = Chain::parse("squid/3", RTT).unwrap().topology().unwrap();
        assert_eq!(t.nodes.len(), 4);
        assert_eq!(t.links.len(), 3);
    }

    #[test]
    fn configs_chain_to_the_next_relay_except_the_last() {
        let d = dante_conf(1, 3);
        assert!(d.contains("internal: 10.50.1.2 port = 1080") && d.contains("external: 10.50.2.1"), "{d}");
        assert!(d.contains("via: 10.50.2.2 port = 1080") && d.contains("proxyprotocol: socks_v5"), "{d}");
        assert!(!dante_conf(2, 3).contains("route"));
        let s = squid_conf(1, 3, Path::new("/x"));
        assert!(s.contains("cache_peer 10.50.2.2 parent 3128 0 no-query default"), "{s}");
        assert!(s.contains("never_direct allow all") && s.contains("cache deny all"), "{s}");
        assert!(!squid_conf(2, 3, Path::new("/x")).contains("cache_peer"));
        // Distinct hostnames: Squid would take its own name coming back as a forwarding loop.
        assert_ne!(squid_conf(1, 3, Path::new("/x")), squid_conf(2, 3, Path::new("/x")));
    }

    #[test]
    fn tcpaccel_relays_mark_their_next_relay_as_ours() {
        let a = Chain::right_of_segment(2);
        // The relay's `Hop::parse` reads this scheme as "pipeline".
        assert_eq!(next_hop("tcpaccel+socks5", a), format!("tcpaccel+socks5://{a}:{SOCKS_PORT}"));
        assert_eq!(next_hop("socks5", a), format!("socks5://{a}:{SOCKS_PORT}"));
    }

    #[test]
    fn only_the_first_relay_of_an_early_chain_replies_early() {
        let early = Chain::parse("tcpaccel-early/3", RTT).unwrap();
        assert_eq!(early.kind, Kind::TcpaccelEarly);
        let a1 = socks_relay_args(&early, 1, "tcpaccel+socks5", None);
        assert!(a1.contains(&"--early-reply".to_string()), "{a1:?}");
        assert!(a1.contains(&next_hop("tcpaccel+socks5", Chain::right_of_segment(2))), "{a1:?}");
        let a2 = socks_relay_args(&early, 2, "tcpaccel+socks5", Some("tcpaccel_relay=debug"));
        assert!(!a2.contains(&"--early-reply".to_string()) && !a2.contains(&"--next".to_string()), "{a2:?}");
        assert_eq!(a2[a2.len() - 2..], ["--log".to_string(), "tcpaccel_relay=debug".to_string()]);
        let exact = Chain::parse("tcpaccel/3", RTT).unwrap();
        assert!(!socks_relay_args(&exact, 1, "tcpaccel+socks5", None).contains(&"--early-reply".to_string()));
        // Early replies need SOCKS: the raw transport refuses the kind.
        let raw = [
            ("transport".to_string(), "raw".to_string()),
            ("relays".to_string(), "tcpaccel-early".to_string()),
            ("uneven_relays".to_string(), String::new()),
        ];
        // Refused when the parameters are resolved, before anything runs.
        let e = crate::runner::scenario::resolve_params(&Split, false, &raw).unwrap_err().to_string();
        assert!(e.contains("tcpaccel-early/2 needs transport=http"), "{e}");
    }
}

#[cfg(test)]
mod topology_tests {
    use super::*;
    use std::net::IpAddr;
    use tcpaccel_net::LinkKind;

    #[test]
    fn each_segment_delays_half_its_rtt_exactly() {
        // 50 ms / 3 is no whole number of microseconds; the delays are not
        // rounded (they were while the topology went through TOML text).
        let c = Chain::parse("dante/3", Duration::from_millis(50)).unwrap();
        let t = c.topology().unwrap();
        assert_eq!(t.links.len(), 3);
        for (l, rtt) in t.links.iter().zip(&c.rtts) {
            let LinkKind::Emulated { a_to_b, b_to_a } = l.kind else { panic!("{} is not emulated", l.name) };
            assert_eq!(a_to_b.delay, *rtt / 2);
            assert_eq!(b_to_a.delay, *rtt / 2);
            assert_eq!(a_to_b.rate, None, "no rate limit");
        }
        assert_eq!(t.links[0].b.addr.unwrap().addr, IpAddr::V4(Chain::right_of_segment(1)));
    }
}
