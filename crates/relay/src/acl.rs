//! Destination access rules: `CIDR[:PORTS]`, allow or deny, first match wins;
//! when any allow rule exists, a destination that matches no rule is denied.
//!
//! Rules see resolved IP addresses only; the server resolves a domain target
//! before checking it. This module does no I/O.

use std::net::IpAddr;

/// Error in a rule's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad access rule {rule:?}: {reason} (forms: 10.0.0.0/8, 10.0.0.0/8:443, 127.0.0.1:8000-8999, [::1]/128:80, ::/0, any:22)")]
pub struct RuleError {
    pub rule: String,
    pub reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Allow,
    Deny,
}

/// One rule: a network, an inclusive port range, an action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub action: Action,
    /// `None` matches any address of either family.
    pub net: Option<(IpAddr, u8)>,
    pub ports: (u16, u16),
    pub text: String,
}

fn err(rule: &str, reason: impl Into<String>) -> RuleError {
    RuleError { rule: rule.to_string(), reason: reason.into() }
}

fn parse_ports(rule: &str, s: &str) -> Result<(u16, u16), RuleError> {
    let p = |x: &str| x.trim().parse::<u16>().map_err(|_| err(rule, format!("bad port {x:?}")));
    let (lo, hi) = match s.split_once('-') {
        Some((a, b)) => (p(a)?, p(b)?),
        None => {
            let v = p(s)?;
            (v, v)
        }
    };
    if lo > hi {
        return Err(err(rule, "port range is reversed"));
    }
    Ok((lo, hi))
}

impl Rule {
    pub fn parse(action: Action, text: &str) -> Result<Rule, RuleError> {
        let t = text.trim();
        // Split off the ports: after a '/' prefix length, after ']' or after the
        // only ':' of an IPv4 address.
        let (addr_part, ports) = if let Some(rest) = t.strip_prefix('[') {
            let (inside, after) = rest.split_once(']').ok_or_else(|| err(text, "missing ']'"))?;
            let (plen, ports) = match after.split_once(':') {
                Some((pl, p)) => (pl, Some(p)),
                None => (after, None),
            };
            (format!("{inside}{plen}"), ports)
        } else if let Some((net, tail)) = t.split_once('/') {
            match tail.split_once(':') {
                Some((pl, p)) => (format!("{net}/{pl}"), Some(p)),
                None => (t.to_string(), None),
            }
        } else if t.matches(':').count() == 1 {
            let (a, p) = t.split_once(':').ok_or_else(|| err(text, "bad address"))?;
            (a.to_string(), Some(p))
        } else {
            (t.to_string(), None)
        };
        let ports = match ports {
            Some(p) => parse_ports(text, p)?,
            None => (0, u16::MAX),
        };
        let net = if addr_part == "any" || addr_part == "*" {
            None
        } else {
            let (ip_s, len_s) = match addr_part.split_once('/') {
                Some((a, l)) => (a, Some(l)),
                None => (addr_part.as_str(), None),
            };
            let ip: IpAddr = ip_s.parse().map_err(|_| err(text, format!("bad address {ip_s:?}")))?;
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let len = match len_s {
                Some(l) => l
                    .parse::<u8>()
                    .ok()
                    .filter(|&l| l <= max)
                    .ok_or_else(|| err(text, "bad prefix length"))?,
                None => max,
            };
            Some((ip, len))
        };
        Ok(Rule { action, net, ports, text: t.to_string() })
    }

    pub fn matches(&self, ip: IpAddr, port: u16) -> bool {
        if port < self.ports.0 || port > self.ports.1 {
            return false;
        }
        let Some((net, len)) = self.net else { return true };
        let ip = match (net, ip) {
            (IpAddr::V4(_), IpAddr::V6(v6)) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            _ => ip,
        };
        match (net, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => prefix_eq(&n.octets(), &a.octets(), len),
            (IpAddr::V6(n), IpAddr::V6(a)) => prefix_eq(&n.octets(), &a.octets(), len),
            _ => false,
        }
    }
}

fn prefix_eq(a: &[u8], b: &[u8], len: u8) -> bool {
    let full = (len / 8) as usize;
    if a[..full] != b[..full] {
        return false;
    }
    let rem = len % 8;
    if rem == 0 {
        return true;
    }
    let mask = 0xffu8 << (8 - rem);
    (a[full] & mask) == (b[full] & mask)
}

/// Ordered rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Acl {
    pub rules: Vec<Rule>,
}

impl Acl {
    pub fn has_allow(&self) -> bool {
        self.rules.iter().any(|r| r.action == Action::Allow)
    }

    /// First matching rule decides; no match is allowed only if there is no allow rule.
    pub fn permits(&self, ip: IpAddr, port: u16) -> bool {
        match self.rules.iter().find(|r| r.matches(ip, port)) {
            Some(r) => r.action == Action::Allow,
            None => !self.has_allow(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn rule_forms_parse() {
        let r = Rule::parse(Action::Allow, "10.0.0.0/8:443").unwrap();
        assert_eq!(r.net, Some((ip("10.0.0.0"), 8)));
        assert_eq!(r.ports, (443, 443));
        let r = Rule::parse(Action::Allow, "127.0.0.1:8000-8999").unwrap();
        assert_eq!(r.net, Some((ip("127.0.0.1"), 32)));
        assert_eq!(r.ports, (8000, 8999));
        let r = Rule::parse(Action::Deny, "[::1]/128:80").unwrap();
        assert_eq!(r.net, Some((ip("::1"), 128)));
        assert_eq!(r.ports, (80, 80));
        let r = Rule::parse(Action::Deny, "fd00::/8").unwrap();
        assert_eq!(r.ports, (0, 65535));
        assert_eq!(Rule::parse(Action::Deny, "any:22").unwrap().net, None);
        for bad in ["10.0.0.0/33", "10.0.0.1:99999", "nonsense", "1.2.3.4:9-1", "[::1"] {
            assert!(Rule::parse(Action::Allow, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn first_match_wins_and_default_deny_with_allows() {
        let acl = Acl {
            rules: vec![
                Rule::parse(Action::Deny, "127.0.0.1:25").unwrap(),
                Rule::parse(Action::Allow, "127.0.0.0/8").unwrap(),
            ],
        };
        assert!(!acl.permits(ip("127.0.0.1"), 25));
        assert!(acl.permits(ip("127.0.0.1"), 80));
        assert!(acl.permits(ip("::ffff:127.0.0.2"), 80));
        assert!(!acl.permits(ip("10.0.0.1"), 80));
        let deny_only = Acl { rules: vec![Rule::parse(Action::Deny, "10.0.0.0/8").unwrap()] };
        assert!(deny_only.permits(ip("192.168.1.1"), 80));
        assert!(!deny_only.permits(ip("10.9.9.9"), 80));
        assert!(Acl::default().permits(ip("192.0.2.1"), 1));
    }

    proptest::proptest! {
        #[test]
        fn any_rule_text_parses_or_errs_and_matching_never_panics(
            text in "[0-9a-f:./\\[\\]*-]{0,40}|any(:[0-9-]{0,12})?",
            v4 in proptest::prelude::any::<u32>(),
            port in proptest::prelude::any::<u16>(),
        ) {
            if let Ok(r) = Rule::parse(Action::Allow, &text) {
                let _ = r.matches(IpAddr::from(v4.to_be_bytes()), port);
                let _ = r.matches(IpAddr::from([0u8; 16]), port);
            }
        }
    }

    #[test]
    fn odd_prefix_lengths() {
        let r = Rule::parse(Action::Allow, "192.168.0.0/23").unwrap();
        assert!(r.matches(ip("192.168.1.200"), 1));
        assert!(!r.matches(ip("192.168.2.1"), 1));
    }
}
