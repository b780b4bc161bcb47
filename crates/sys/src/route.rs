//! rtnetlink IPv4 routes: add or replace one route, with one gateway or
//! several (ECMP, `RTA_MULTIPATH`) and the `rto_min`, `quickack` and
//! `initcwnd` metrics, in the calling thread's network namespace.
//!
//! What it is: the encoder of `RTM_NEWROUTE` (pure, tested to the byte) and
//! one request/ack exchange over [`crate::netlink::NlSocket`]. What it is
//! not: no route dumps, no IPv6, no other metrics; `crates/net` still builds
//! its plain routes with `ip` (this module is for what those cannot say).
//!
//! Layouts follow `include/uapi/linux/rtnetlink.h` (`struct rtmsg`,
//! `struct rtnexthop`, `RTAX_*`). The kernel honours a route's `rto_min`
//! only when it is locked (`tcp_rto_min()` reads `dst_metric_locked`), so
//! the encoder locks it as `ip route … rto_min` does; the value is in ms.

use std::net::Ipv4Addr;
use std::time::Duration;

use crate::netlink::{self, AttrBuf, NLM_F_ACK, NLM_F_REQUEST};
use crate::{Error, Result};

pub const RTM_NEWROUTE: u16 = 24;
/// Flags of a NEW request (they share bits with the dump flags).
pub const NLM_F_REPLACE: u16 = 0x100;
pub const NLM_F_CREATE: u16 = 0x400;

pub(crate) const RTA_DST: u16 = 1;
const RTA_GATEWAY: u16 = 5;
const RTA_METRICS: u16 = 8;
const RTA_MULTIPATH: u16 = 9;
const RTA_TABLE: u16 = 15;
const RTAX_LOCK: u16 = 1;
const RTAX_RTO_MIN: u16 = 13;
const RTAX_QUICKACK: u16 = 15;
const RTAX_INITCWND: u16 = 11;

const RTPROT_STATIC: u8 = 4;
const RT_SCOPE_UNIVERSE: u8 = 0;
const RTN_UNICAST: u8 = 1;
/// `RT_TABLE_MAIN`.
pub const TABLE_MAIN: u32 = 254;

/// How long the kernel may take to answer.
const TIMEOUT: Duration = Duration::from_secs(2);

/// One IPv4 route to `dst/prefix` in `table`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route4 {
    pub table: u32,
    pub dst: Ipv4Addr,
    pub prefix: u8,
    /// One gateway, or several of equal weight (one ECMP route; the kernel
    /// hashes flows over them as `net.ipv4.fib_multipath_hash_policy` says).
    pub via: Vec<Ipv4Addr>,
    /// Locked minimum RTO of TCP connections over this route (whole ms).
    pub rto_min: Option<Duration>,
    /// TCP connections over this route acknowledge every segment at once,
    /// never by the delayed-ACK timer (`ip route … quickack 1`;
    /// `tcp_in_quickack_mode` reads it, no lock needed).
    pub quickack: bool,
    /// TCP's initial congestion window in segments for connections over
    /// this route (`ip route … initcwnd N`; `tcp_init_cwnd` reads it, no
    /// lock needed); `None`: the kernel's 10.
    pub initcwnd: Option<u32>,
}

impl Route4 {
    fn describe(&self) -> String {
        let via: Vec<String> = self.via.iter().map(|v| v.to_string()).collect();
        let mut s = format!("route {}/{} via {} table {}", self.dst, self.prefix, via.join(","), self.table);
        if let Some(r) = self.rto_min {
            s.push_str(&format!(" rto_min {}ms", r.as_millis()));
        }
        if self.quickack {
            s.push_str(" quickack 1");
        }
        if let Some(w) = self.initcwnd {
            s.push_str(&format!(" initcwnd {w}"));
        }
        s
    }

    /// The `RTM_NEWROUTE` message (create or replace) with sequence `seq`.
    pub fn encode(&self, seq: u32) -> std::result::Result<Vec<u8>, String> {
        if self.prefix > 32 {
            return Err(format!("prefix length {} is over 32", self.prefix));
        }
        if self.via.is_empty() {
            return Err("a route needs at least one gateway".into());
        }
        let rtmsg = [
            libc::AF_INET as u8,
            self.prefix,
            0,
            0,
            // Tables above 255 live only in RTA_TABLE; RT_TABLE_COMPAT (252) marks that.
            if self.table < 256 { self.table as u8 } else { 252 },
            RTPROT_STATIC,
            RT_SCOPE_UNIVERSE,
            RTN_UNICAST,
            0,
            0,
            0,
            0,
        ];
        let mut a = AttrBuf::default();
        a.put_u32(RTA_TABLE, self.table);
        if self.prefix > 0 {
            a.put(RTA_DST, &self.dst.octets());
        }
        if let [one] = self.via.as_slice() {
            a.put(RTA_GATEWAY, &one.octets());
        } else {
            let mut hops = Vec::new();
            for v in &self.via {
                let mut gw = AttrBuf::default();
                gw.put(RTA_GATEWAY, &v.octets());
                let gw = gw.into_bytes();
                // struct rtnexthop: len, flags, hops (weight − 1), ifindex
                // (0: the kernel finds the interface of the gateway).
                hops.extend_from_slice(&((8 + gw.len()) as u16).to_ne_bytes());
                hops.extend_from_slice(&[0, 0]);
                hops.extend_from_slice(&0i32.to_ne_bytes());
                hops.extend_from_slice(&gw);
            }
            a.put(RTA_MULTIPATH, &hops);
        }
        let mut m = AttrBuf::default();
        if let Some(r) = self.rto_min {
            let ms = u32::try_from(r.as_millis()).map_err(|_| format!("rto_min {r:?} is out of range"))?;
            if ms == 0 {
                return Err("rto_min of 0 ms".into());
            }
            m.put_u32(RTAX_LOCK, 1 << RTAX_RTO_MIN);
            m.put_u32(RTAX_RTO_MIN, ms);
        }
        if self.quickack {
            m.put_u32(RTAX_QUICKACK, 1);
        }
        if let Some(w) = self.initcwnd {
            if w == 0 {
                return Err("initcwnd of 0 segments".into());
            }
            m.put_u32(RTAX_INITCWND, w);
        }
        if !m.as_bytes().is_empty() {
            // Unflagged, as iproute2 sends it (the kernel accepts both).
            a.put(RTA_METRICS, m.as_bytes());
        }
        let flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
        Ok(netlink::message(RTM_NEWROUTE, flags, seq, &[&rtmsg, a.as_bytes()]))
    }
}

/// Adds or replaces `route` in the calling thread's network namespace.
pub fn replace(route: &Route4) -> Result<()> {
    let op = route.describe();
    let seq = 1;
    let msg = route.encode(seq).map_err(|msg| Error::Other { op: op.clone(), msg })?;
    netlink::route_request(&msg, seq, None, &op, TIMEOUT).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u16s(v: u16) -> [u8; 2] {
        v.to_ne_bytes()
    }
    fn u32s(v: u32) -> [u8; 4] {
        v.to_ne_bytes()
    }

    #[test]
    fn a_gateway_route_with_rto_min_encodes_to_exact_bytes() {
        let r = Route4 {
            table: 101,
            dst: Ipv4Addr::new(10, 11, 0, 0),
            prefix: 16,
            via: vec![Ipv4Addr::new(10, 11, 3, 1)],
            rto_min: Some(Duration::from_millis(800)),
            quickack: false,
            initcwnd: None,
        };
        let m = r.encode(7).unwrap();
        let mut want = Vec::new();
        // nlmsghdr: 16 + rtmsg 12 + table 8 + dst 8 + gateway 8 + metrics (4 + 8 + 8) = 72.
        want.extend(u32s(72));
        want.extend(u16s(RTM_NEWROUTE));
        want.extend(u16s(NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE));
        want.extend(u32s(7));
        want.extend(u32s(0));
        want.extend([2, 16, 0, 0, 101, 4, 0, 1, 0, 0, 0, 0]);
        want.extend(u16s(8));
        want.extend(u16s(RTA_TABLE));
        want.extend(u32s(101));
        want.extend(u16s(8));
        want.extend(u16s(RTA_DST));
        want.extend([10, 11, 0, 0]);
        want.extend(u16s(8));
        want.extend(u16s(RTA_GATEWAY));
        want.extend([10, 11, 3, 1]);
        want.extend(u16s(20));
        want.extend(u16s(RTA_METRICS));
        want.extend(u16s(8));
        want.extend(u16s(RTAX_LOCK));
        want.extend(u32s(1 << 13));
        want.extend(u16s(8));
        want.extend(u16s(RTAX_RTO_MIN));
        want.extend(u32s(800));
        assert_eq!(m, want);
    }

    #[test]
    fn quickack_is_one_more_metric_beside_rto_min_or_alone() {
        let mut r = Route4 {
            table: TABLE_MAIN,
            dst: Ipv4Addr::UNSPECIFIED,
            prefix: 0,
            via: vec![Ipv4Addr::new(10, 0, 0, 1)],
            rto_min: Some(Duration::from_millis(800)),
            quickack: true,
            initcwnd: None,
        };
        let metrics = |r: &Route4| -> Vec<u8> {
            let m = r.encode(1).unwrap();
            let got: Vec<(u16, Vec<u8>)> =
                netlink::attrs(&m[28..], "route").map(|a| a.map(|(k, d)| (k, d.to_vec())).unwrap()).collect();
            got.into_iter().find(|(k, _)| *k == RTA_METRICS).map(|(_, d)| d).unwrap_or_default()
        };
        let mut want = Vec::new();
        for (k, v) in [(RTAX_LOCK, 1 << 13), (RTAX_RTO_MIN, 800), (RTAX_QUICKACK, 1)] {
            want.extend(u16s(8));
            want.extend(u16s(k));
            want.extend(u32s(v));
        }
        assert_eq!(metrics(&r), want);
        r.rto_min = None;
        assert_eq!(metrics(&r), want[16..].to_vec());
        assert!(r.describe().ends_with("quickack 1"), "{}", r.describe());
        r.quickack = false;
        assert_eq!(metrics(&r), Vec::<u8>::new(), "no metrics, no RTA_METRICS");
        r.initcwnd = Some(12);
        let mut want = Vec::new();
        want.extend(u16s(8));
        want.extend(u16s(11)); // RTAX_INITCWND (16 would be RTAX_CC_ALGO)
        want.extend(u32s(12));
        assert_eq!(metrics(&r), want, "initcwnd alone, unlocked as ip route sends it");
        assert!(r.describe().ends_with("initcwnd 12"), "{}", r.describe());
    }

    #[test]
    fn a_multipath_default_route_carries_one_nexthop_per_gateway() {
        let r = Route4 {
            table: TABLE_MAIN,
            dst: Ipv4Addr::UNSPECIFIED,
            prefix: 0,
            via: vec![Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 1, 1)],
            rto_min: None,
            quickack: false,
            initcwnd: None,
        };
        let m = r.encode(1).unwrap();
        // header, rtmsg, table, then RTA_MULTIPATH: 4 + 2 × (8 + 8).
        assert_eq!(m.len(), 16 + 12 + 8 + 36);
        let attrs = &m[28..];
        let got: Vec<(u16, Vec<u8>)> =
            netlink::attrs(attrs, "route").map(|a| a.map(|(k, d)| (k, d.to_vec())).unwrap()).collect();
        assert_eq!(got[0], (RTA_TABLE, u32s(254).to_vec()));
        assert_eq!(got[1].0, RTA_MULTIPATH);
        let hops = &got[1].1;
        assert_eq!(hops.len(), 32);
        for (i, gw) in [[10, 0, 0, 1], [10, 0, 1, 1]].iter().enumerate() {
            let h = &hops[16 * i..16 * (i + 1)];
            assert_eq!(&h[0..2], &u16s(16), "rtnh_len");
            assert_eq!(&h[2..8], &[0, 0, 0, 0, 0, 0], "flags, weight 1, any interface");
            assert_eq!((&h[8..10], &h[10..12]), (&u16s(8)[..], &u16s(RTA_GATEWAY)[..]));
            assert_eq!(&h[12..16], gw);
        }
    }

    #[test]
    fn impossible_routes_are_refused_before_the_kernel() {
        let mut r = Route4 {
            table: TABLE_MAIN,
            dst: Ipv4Addr::UNSPECIFIED,
            prefix: 33,
            via: vec![Ipv4Addr::LOCALHOST],
            rto_min: None,
            quickack: false,
            initcwnd: None,
        };
        assert!(r.encode(1).unwrap_err().contains("33"));
        r.prefix = 0;
        r.via.clear();
        assert!(r.encode(1).unwrap_err().contains("gateway"));
        r.via.push(Ipv4Addr::LOCALHOST);
        r.rto_min = Some(Duration::from_micros(10));
        assert!(r.encode(1).unwrap_err().contains("0 ms"));
        r.rto_min = None;
        r.initcwnd = Some(0);
        assert!(r.encode(1).unwrap_err().contains("initcwnd of 0"));
    }
}
