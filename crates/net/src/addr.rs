//! An IP address with a prefix length (`10.0.0.1/24`, `fd00::1/64`), as link
//! ends carry them. Only parsing, containment and the network address; it is
//! not a general IP-math library.

use std::fmt;
use std::net::IpAddr;

/// An interface address with its prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Cidr {
    /// An address and prefix as given; [`Cidr::check_prefix`] (which a
    /// topology's validation runs) refuses a prefix too long for the family.
    pub fn new(addr: impl Into<IpAddr>, prefix: u8) -> Cidr {
        Cidr { addr: addr.into(), prefix }
    }

    /// Refuses a prefix longer than the address family has bits.
    pub fn check_prefix(&self) -> Result<(), String> {
        let max = max_prefix(self.addr);
        if self.prefix > max {
            return Err(format!("prefix /{} of {self} is longer than /{max}", self.prefix));
        }
        Ok(())
    }

    /// Parses `ADDR/PREFIX`; the prefix is required (a bare address is ambiguous
    /// about its subnet, and the subnet decides the connected route).
    pub fn parse(s: &str) -> Result<Cidr, String> {
        let t = s.trim();
        let Some((a, p)) = t.split_once('/') else {
            return Err(format!("{s:?} has no prefix length; write it as ADDR/PREFIX, e.g. 10.0.0.1/24"));
        };
        let addr: IpAddr = a.parse().map_err(|_| format!("{a:?} in {s:?} is not an IPv4 or IPv6 address"))?;
        let prefix: u8 = p.parse().map_err(|_| format!("prefix {p:?} in {s:?} is not a number"))?;
        let max = max_prefix(addr);
        if prefix > max {
            return Err(format!("prefix /{prefix} in {s:?} is longer than /{max}"));
        }
        Ok(Cidr { addr, prefix })
    }

    pub fn is_v4(&self) -> bool {
        self.addr.is_ipv4()
    }

    /// The address with the host bits cleared.
    pub fn network(&self) -> IpAddr {
        mask(self.addr, self.prefix)
    }

    /// True when `ip` lies in this subnet (same family, same network bits).
    pub fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.addr.is_ipv4() && mask(ip, self.prefix) == self.network()
    }

    /// True when the host bits are all zero (a route destination must be one).
    pub fn is_network(&self) -> bool {
        self.network() == self.addr
    }

    /// For an interface address: refuses the IPv4 network and broadcast
    /// addresses of subnets that have them (prefixes up to /30).
    pub fn check_host(&self) -> Result<(), String> {
        if let IpAddr::V4(v4) = self.addr {
            if self.prefix <= 30 {
                let bits = u32::from(v4);
                let host_mask = u32::MAX >> self.prefix;
                if bits & host_mask == 0 {
                    return Err(format!("{self} is the network address of its subnet, not a host address"));
                }
                if bits & host_mask == host_mask {
                    return Err(format!("{self} is the broadcast address of its subnet, not a host address"));
                }
            }
        }
        Ok(())
    }
}

fn max_prefix(addr: IpAddr) -> u8 {
    if addr.is_ipv4() {
        32
    } else {
        128
    }
}

fn mask(addr: IpAddr, prefix: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let m = if prefix == 0 { 0 } else { u32::MAX << (32 - u32::from(prefix.min(32))) };
            IpAddr::V4((u32::from(a) & m).into())
        }
        IpAddr::V6(a) => {
            let m = if prefix == 0 { 0 } else { u128::MAX << (128 - u32::from(prefix.min(128))) };
            IpAddr::V6((u128::from(a) & m).into())
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_contains() {
        let c = Cidr::parse("10.0.1.7/24").unwrap();
        assert_eq!(c.network(), "10.0.1.0".parse::<IpAddr>().unwrap());
        assert!(c.contains("10.0.1.200".parse().unwrap()));
        assert!(!c.contains("10.0.2.1".parse().unwrap()));
        assert!(!c.contains("fd00::1".parse().unwrap()));
        assert!(!c.is_network());
        assert!(Cidr::parse("10.0.1.0/24").unwrap().is_network());
        assert!(Cidr::parse("0.0.0.0/0").unwrap().contains("8.8.8.8".parse().unwrap()));
        let v6 = Cidr::parse("fd00:1::5/64").unwrap();
        assert!(v6.contains("fd00:1::9".parse().unwrap()));
        assert!(!v6.contains("fd00:2::9".parse().unwrap()));
        assert_eq!(v6.to_string(), "fd00:1::5/64");
    }

    #[test]
    fn refuses_bad_forms() {
        for bad in ["10.0.0.1", "10.0.0.1/33", "10.0.0/24", "fd00::1/129", "x/8", "10.0.0.1/-1", "10.0.0.1/a"]
        {
            let e = Cidr::parse(bad).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn host_checks() {
        assert!(Cidr::parse("10.0.0.0/24").unwrap().check_host().is_err());
        assert!(Cidr::parse("10.0.0.255/24").unwrap().check_host().is_err());
        assert!(Cidr::parse("10.0.0.1/24").unwrap().check_host().is_ok());
        // /31 point-to-point links use both addresses (RFC 3021).
        assert!(Cidr::parse("10.0.0.0/31").unwrap().check_host().is_ok());
    }
}
