//! rtnetlink for per-frame pacing: which device a destination leaves by
//! (`RTM_GETROUTE`), a device's GSO limits (`RTM_GETLINK`), and setting its
//! `gso_max_segs` (`RTM_NEWLINK` on an existing link, what
//! `ip link set dev X gso_max_segs N` does), plus [`GsoSegsCap`], a guard
//! that sets the cap and puts the old value back on drop.
//!
//! Why a device and not a socket or route: see `tcpaccel_core::precise`.
//! Each call answers for the network namespace of the calling thread.
//!
//! What it is not: no general link or route management (the topology crate
//! does that with its own tools); only the three messages above.
//! Layouts: `struct ifinfomsg` and `struct rtmsg` from
//! `include/uapi/linux/rtnetlink.h`, attributes from `if_link.h`.

use std::net::IpAddr;
use std::time::Duration;

use crate::netlink::{self, AttrBuf, NLM_F_ACK, NLM_F_REQUEST};
use crate::route::{RTA_DST, RTM_NEWROUTE};
use crate::{Error, Result};

const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_GETROUTE: u16 = 26;
/// `IFLA_GSO_MAX_SEGS`, `IFLA_GSO_MAX_SIZE` (`enum` in `if_link.h`).
pub const IFLA_GSO_MAX_SEGS: u16 = 40;
pub const IFLA_GSO_MAX_SIZE: u16 = 41;
const RTA_OIF: u16 = 4;
/// `sizeof(struct ifinfomsg)`, `sizeof(struct rtmsg)`.
const IFINFOMSG_LEN: usize = 16;
const RTMSG_LEN: usize = 12;

/// A device's GSO limits as the kernel reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkGso {
    pub gso_max_segs: u32,
    pub gso_max_size: u32,
}

/// `struct ifinfomsg` for device `index`, family AF_UNSPEC, no flag change.
fn ifinfomsg(index: u32) -> [u8; IFINFOMSG_LEN] {
    let mut m = [0u8; IFINFOMSG_LEN];
    m[4..8].copy_from_slice(&(index as i32).to_ne_bytes());
    m
}

/// The `RTM_GETLINK` request for device `index`.
pub fn encode_getlink(index: u32, seq: u32) -> Vec<u8> {
    netlink::message(RTM_GETLINK, NLM_F_REQUEST, seq, &[&ifinfomsg(index)])
}

/// The `RTM_NEWLINK` request that sets `gso_max_segs` of device `index`.
pub fn encode_set_gso_max_segs(index: u32, segs: u32, seq: u32) -> Vec<u8> {
    let mut a = AttrBuf::default();
    a.put_u32(IFLA_GSO_MAX_SEGS, segs);
    netlink::message(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK, seq, &[&ifinfomsg(index), a.as_bytes()])
}

/// The `RTM_GETROUTE` request for the route to `dst`.
pub fn encode_getroute(dst: IpAddr, seq: u32) -> Vec<u8> {
    let (family, bits, addr): (u8, u8, Vec<u8>) = match dst {
        IpAddr::V4(a) => (libc::AF_INET as u8, 32, a.octets().to_vec()),
        IpAddr::V6(a) => (libc::AF_INET6 as u8, 128, a.octets().to_vec()),
    };
    let mut rt = [0u8; RTMSG_LEN];
    rt[0] = family;
    rt[1] = bits;
    let mut a = AttrBuf::default();
    a.put(RTA_DST, &addr);
    netlink::message(RTM_GETROUTE, NLM_F_REQUEST, seq, &[&rt, a.as_bytes()])
}

/// The GSO limits in an `RTM_NEWLINK` answer's payload.
pub fn parse_link_gso(payload: &[u8]) -> std::result::Result<LinkGso, netlink::ParseError> {
    let (mut segs, mut size) = (None, None);
    for a in netlink::attrs_after(payload, "ifinfomsg", IFINFOMSG_LEN)? {
        let (kind, d) = a?;
        match kind {
            IFLA_GSO_MAX_SEGS => segs = netlink::fixed::<4>(d).map(u32::from_ne_bytes),
            IFLA_GSO_MAX_SIZE => size = netlink::fixed::<4>(d).map(u32::from_ne_bytes),
            _ => {}
        }
    }
    match (segs, size) {
        (Some(gso_max_segs), Some(gso_max_size)) => Ok(LinkGso { gso_max_segs, gso_max_size }),
        _ => Err(netlink::ParseError::Missing { what: "IFLA_GSO_MAX_SEGS and IFLA_GSO_MAX_SIZE" }),
    }
}

/// `IFLA_MTU`, `IFLA_IFNAME` (`if_link.h`).
const IFLA_MTU: u16 = 4;
const IFLA_IFNAME: u16 = 3;

/// What an `RTM_NEWLINK` message says of a device, as far as read here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkInfo {
    /// `ifi_index`.
    pub index: u32,
    /// `ifi_flags` (`IFF_UP`, `IFF_LOOPBACK`, ...).
    pub flags: u32,
    pub name: Option<String>,
    pub mtu: Option<u32>,
}

/// Decodes an `RTM_NEWLINK` payload (`struct ifinfomsg` and attributes, of
/// which `IFLA_IFNAME` and `IFLA_MTU` are read; the many others a link dump
/// carries are passed over). Offsets in errors count from the payload.
pub fn parse_link(payload: &[u8]) -> std::result::Result<LinkInfo, netlink::ParseError> {
    let attrs = netlink::attrs_after(payload, "ifinfomsg", IFINFOMSG_LEN)?;
    // In bounds: attrs_after checked the 16 bytes.
    let word = |at| netlink::u32_ne(payload, at).unwrap_or(0);
    let mut l = LinkInfo { index: word(4), flags: word(8), name: None, mtu: None };
    for a in attrs {
        let (kind, d) = a?;
        match kind {
            IFLA_IFNAME => l.name = Some(netlink::c_string(d)),
            IFLA_MTU => l.mtu = netlink::fixed::<4>(d).map(u32::from_ne_bytes),
            _ => {}
        }
    }
    Ok(l)
}

/// The output device in an `RTM_NEWROUTE` answer's payload.
pub fn parse_route_oif(payload: &[u8]) -> std::result::Result<Option<u32>, netlink::ParseError> {
    for a in netlink::attrs_after(payload, "rtmsg", RTMSG_LEN)? {
        let (kind, d) = a?;
        if kind == RTA_OIF {
            return Ok(netlink::fixed::<4>(d).map(u32::from_ne_bytes));
        }
    }
    Ok(None)
}

/// Sends `req` and returns the payload of the answer of kind `want`, or
/// `None` for a plain ack.
fn exchange(req: &[u8], seq: u32, want: u16, op: &str) -> Result<Option<Vec<u8>>> {
    netlink::route_request(req, seq, Some(want), op, Duration::from_secs(5))
}

/// The index of device `name` in this thread's namespace.
pub fn ifindex(name: &str) -> Result<u32> {
    let c = std::ffi::CString::new(name).map_err(|_| Error::NoInterface { name: name.into() })?;
    // SAFETY: c is a valid NUL-terminated string for the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENODEV) | Some(libc::ENXIO) | None | Some(0) => {
                Error::NoInterface { name: name.into() }
            }
            _ => Error::os(format!("if_nametoindex({name})"), e),
        });
    }
    Ok(i)
}

/// The name of device `index` in this thread's namespace, if it exists.
pub fn ifname(index: u32) -> Option<String> {
    let mut buf = [0u8; libc::IF_NAMESIZE];
    // SAFETY: buf holds IF_NAMESIZE bytes, what if_indextoname writes at most.
    let p = unsafe { libc::if_indextoname(index, buf.as_mut_ptr().cast()) };
    if p.is_null() {
        return None;
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    Some(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// The name of the device that holds address `addr` in this thread's
/// namespace (getifaddrs(3)), `None` when no device has it.
pub fn interface_of(addr: IpAddr) -> Result<Option<String>> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head into `list`, freed below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(Error::last("getifaddrs"));
    }
    let mut found = None;
    let mut p = list;
    while !p.is_null() && found.is_none() {
        // SAFETY: p is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*p };
        p = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_addr points to a sockaddr whose family says its size;
        // only AF_INET and AF_INET6 are read, as their own structs.
        let here = unsafe {
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    Some(IpAddr::from(u32::from_be(sin.sin_addr.s_addr).to_be_bytes()))
                }
                libc::AF_INET6 => {
                    let sin6 = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                    Some(IpAddr::from(sin6.sin6_addr.s6_addr))
                }
                _ => None,
            }
        };
        if here == Some(addr) {
            // SAFETY: ifa_name is a NUL-terminated string owned by the list.
            let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
            found = Some(name.to_string_lossy().into_owned());
        }
    }
    // SAFETY: list came from getifaddrs and is freed once; no reference into
    // it outlives this call (the name was copied).
    unsafe { libc::freeifaddrs(list) };
    Ok(found)
}

/// The GSO limits of device `index`.
pub fn link_gso(index: u32) -> Result<LinkGso> {
    let op = format!("RTM_GETLINK of device {index}");
    let p = exchange(&encode_getlink(index, 1), 1, RTM_NEWLINK, &op)?
        .ok_or_else(|| Error::Other { op: op.clone(), msg: "the kernel acked without the link".into() })?;
    parse_link_gso(&p).map_err(|e| Error::Other { op, msg: e.to_string() })
}

/// Brings device `index` up (`IFF_UP`), as `ip link set dev X up`.
pub fn set_up(index: u32) -> Result<()> {
    let mut m = ifinfomsg(index);
    let up = (libc::IFF_UP as u32).to_ne_bytes();
    m[8..12].copy_from_slice(&up);
    m[12..16].copy_from_slice(&up);
    let op = format!("setting device {index} up");
    exchange(&netlink::message(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK, 4, &[&m]), 4, RTM_NEWLINK, &op)
        .map(|_| ())
}

/// Sets `gso_max_segs` of device `index` (needs CAP_NET_ADMIN; at most the
/// device's `tso_max_segs`, else EINVAL).
pub fn set_gso_max_segs(index: u32, segs: u32) -> Result<()> {
    let op = format!("setting gso_max_segs {segs} on device {index}");
    exchange(&encode_set_gso_max_segs(index, segs, 2), 2, RTM_NEWLINK, &op).map(|_| ())
}

/// The output device of the route to `dst`.
pub fn route_oif(dst: IpAddr) -> Result<u32> {
    let op = format!("RTM_GETROUTE to {dst}");
    let p = exchange(&encode_getroute(dst, 3), 3, RTM_NEWROUTE, &op)?
        .ok_or_else(|| Error::Other { op: op.clone(), msg: "the kernel acked without a route".into() })?;
    parse_route_oif(&p)
        .map_err(|e| Error::Other { op: op.clone(), msg: e.to_string() })?
        .ok_or_else(|| Error::Other { op, msg: "the route has no output device".into() })
}

/// `gso_max_segs` of one device set to a cap while this lives; the value
/// found before is put back on drop (if it was changed). Sockets take the
/// device's value when their route is set, so the cap reaches sockets that
/// connect while it holds. Two guards on one device must drop in reverse
/// order of creation, or the older value wins.
#[derive(Debug)]
pub struct GsoSegsCap {
    pub index: u32,
    pub before: u32,
    pub now: u32,
}

impl GsoSegsCap {
    /// Caps device `index` at `segs` (never raises it: a lower value already
    /// there stays).
    pub fn apply(index: u32, segs: u32) -> Result<GsoSegsCap> {
        let before = link_gso(index)?.gso_max_segs;
        let now = segs.max(1).min(before);
        if now != before {
            set_gso_max_segs(index, now)?;
        }
        Ok(GsoSegsCap { index, before, now })
    }
}

impl Drop for GsoSegsCap {
    fn drop(&mut self) {
        if self.now != self.before {
            if let Err(e) = set_gso_max_segs(self.index, self.before) {
                tracing::warn!("putting gso_max_segs {} back on device {}: {e}", self.before, self.index);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_on_lo_and_a_documentation_address_on_no_device() {
        assert_eq!(interface_of("127.0.0.1".parse().unwrap()).unwrap().as_deref(), Some("lo"));
        // 192.0.2.0/24 (TEST-NET-1) is never assigned on a test host.
        assert_eq!(interface_of("192.0.2.77".parse().unwrap()).unwrap(), None);
    }

    #[test]
    fn requests_encode_to_exact_bytes() {
        let m = encode_set_gso_max_segs(7, 3, 9);
        // nlmsghdr (16) + ifinfomsg (16) + one u32 attribute (8).
        assert_eq!(m.len(), 40);
        assert_eq!(u32::from_ne_bytes(m[0..4].try_into().unwrap()), 40);
        assert_eq!(u16::from_ne_bytes(m[4..6].try_into().unwrap()), RTM_NEWLINK);
        assert_eq!(u16::from_ne_bytes(m[6..8].try_into().unwrap()), NLM_F_REQUEST | NLM_F_ACK);
        assert_eq!(i32::from_ne_bytes(m[20..24].try_into().unwrap()), 7);
        assert_eq!(u16::from_ne_bytes(m[32..34].try_into().unwrap()), 8);
        assert_eq!(u16::from_ne_bytes(m[34..36].try_into().unwrap()), IFLA_GSO_MAX_SEGS);
        assert_eq!(u32::from_ne_bytes(m[36..40].try_into().unwrap()), 3);
        let r = encode_getroute("10.1.2.3".parse().unwrap(), 1);
        assert_eq!(r.len(), 16 + 12 + 8);
        assert_eq!((r[16], r[17]), (libc::AF_INET as u8, 32));
        assert_eq!(&r[32..36], &[10, 1, 2, 3]);
    }

    /// IP packets this thread's namespace sent (`Ip: OutRequests` of
    /// /proc/thread-self/net/snmp): one per skb, so one per GSO packet.
    fn ip_out_requests() -> u64 {
        let t = std::fs::read_to_string("/proc/thread-self/net/snmp").unwrap();
        let mut ip = t.lines().filter(|l| l.starts_with("Ip:"));
        let (names, values) = (ip.next().unwrap(), ip.next().unwrap());
        let i = names.split_whitespace().position(|n| n == "OutRequests").unwrap();
        values.split_whitespace().nth(i).unwrap().parse().unwrap()
    }

    /// 4 MB over loopback; (segments the sender sent, IP packets the
    /// namespace sent meanwhile, the ACKs included).
    fn transfer() -> (u64, u64) {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = l.local_addr().unwrap();
        let reader = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = vec![0u8; 1 << 16];
            while s.read(&mut buf).unwrap() > 0 {}
        });
        let before = ip_out_requests();
        let mut c = std::net::TcpStream::connect(at).unwrap();
        let chunk = vec![7u8; 1 << 16];
        for _ in 0..64 {
            c.write_all(&chunk).unwrap();
        }
        let segs = crate::tcpinfo::tcp_info(&c).unwrap().segs_out.unwrap();
        drop(c);
        reader.join().unwrap();
        (u64::from(segs), ip_out_requests() - before)
    }

    /// The cap applied and removed on loopback, checked by the kernel: the
    /// link's own gso_max_segs, and how many IP packets a TCP transfer
    /// takes (one per segment while capped, far fewer than segments
    /// without). Fails on a kernel that ignores IFLA_GSO_MAX_SEGS.
    #[test]
    fn root_gso_cap_applies_and_is_removed_on_loopback() {
        crate::testing::require_root();
        crate::netns::run_in_fresh(|| {
            let lo = ifindex("lo").unwrap();
            set_up(lo).unwrap();
            // Ethernet-sized segments (loopback's 64 KiB MTU makes every
            // segment a GSO packet's worth on its own).
            let mut mtu = AttrBuf::default();
            mtu.put_u32(libc::IFLA_MTU, 1500);
            let req = netlink::message(
                RTM_NEWLINK,
                NLM_F_REQUEST | NLM_F_ACK,
                5,
                &[&ifinfomsg(lo), mtu.as_bytes()],
            );
            exchange(&req, 5, RTM_NEWLINK, "lo mtu 1500").unwrap();
            let original = link_gso(lo).unwrap().gso_max_segs;
            assert!(original > 1, "loopback starts with gso_max_segs {original}");
            let (segs, packets) = transfer();
            assert!(packets * 2 < segs, "uncapped: {packets} IP packets for {segs} segments");
            {
                let cap = GsoSegsCap::apply(lo, 1).unwrap();
                assert_eq!((cap.before, cap.now), (original, 1));
                assert_eq!(link_gso(lo).unwrap().gso_max_segs, 1);
                let (segs, packets) = transfer();
                assert!(packets >= segs, "capped at 1: {packets} IP packets for {segs} segments");
            }
            assert_eq!(link_gso(lo).unwrap().gso_max_segs, original, "the cap was not removed");
            let (segs, packets) = transfer();
            assert!(packets * 2 < segs, "after removal: {packets} IP packets for {segs} segments");
            assert_eq!(route_oif("127.0.0.1".parse().unwrap()).unwrap(), lo);
            assert_eq!(ifname(lo).as_deref(), Some("lo"));
            assert!(matches!(ifindex("no-such-dev0"), Err(Error::NoInterface { .. })));
        })
        .unwrap();
    }

    #[test]
    fn answers_decode_and_short_ones_are_errors() {
        let mut p = ifinfomsg(2).to_vec();
        let mut a = AttrBuf::default();
        a.put_u32(IFLA_GSO_MAX_SIZE, 65_536);
        a.put_u32(IFLA_GSO_MAX_SEGS, 1);
        p.extend_from_slice(a.as_bytes());
        assert_eq!(parse_link_gso(&p).unwrap(), LinkGso { gso_max_segs: 1, gso_max_size: 65_536 });
        assert!(parse_link_gso(&p[..10]).is_err());
        assert!(parse_link_gso(&ifinfomsg(2)).is_err(), "no GSO attributes");
        let mut r = vec![0u8; RTMSG_LEN];
        let mut a = AttrBuf::default();
        a.put_u32(RTA_OIF, 5);
        r.extend_from_slice(a.as_bytes());
        assert_eq!(parse_route_oif(&r).unwrap(), Some(5));
        assert_eq!(parse_route_oif(&[0u8; RTMSG_LEN]).unwrap(), None);
        assert!(parse_route_oif(&[0u8; 4]).is_err());
    }

    /// The real RTM_GETLINK and RTM_GETROUTE dumps of a fresh namespace
    /// (crates/sys/testdata/README.md): lo, index 1, and every local route on it.
    #[test]
    fn captured_link_and_route_dumps_decode_to_lo() {
        let links: Vec<_> = netlink::messages(include_bytes!("../testdata/rtnl_getlink.bin"))
            .map(|m| m.unwrap())
            .filter(|m| m.header.kind == RTM_NEWLINK)
            .collect();
        assert_eq!(links.len(), 1);
        let lo = parse_link(links[0].payload).unwrap();
        assert_eq!((lo.index, lo.name.as_deref(), lo.mtu), (1, Some("lo"), Some(65_536)));
        assert_eq!(
            lo.flags & (libc::IFF_UP | libc::IFF_LOOPBACK) as u32,
            (libc::IFF_UP | libc::IFF_LOOPBACK) as u32
        );
        let oifs: Vec<_> = netlink::messages(include_bytes!("../testdata/rtnl_getroute.bin"))
            .map(|m| m.unwrap())
            .filter(|m| m.header.kind == RTM_NEWROUTE)
            .map(|m| parse_route_oif(m.payload).unwrap())
            .collect();
        assert_eq!(oifs, vec![Some(1); 4]);
        assert_eq!(
            parse_link(&links[0].payload[..15]),
            Err(netlink::ParseError::Truncated { what: "ifinfomsg", at: 0, need: 16, have: 15 })
        );
    }
}
