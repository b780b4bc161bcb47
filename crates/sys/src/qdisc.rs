//! rtnetlink queueing disciplines: every qdisc of a network namespace with
//! its counters (`RTM_GETQDISC` dump), for the lab's fidelity monitor — a
//! shaped port that drops, or whose tbf holds packets back, says where the
//! fabric's queues were while a run went on.
//!
//! What it is: the dump request and the decoder of its `RTM_NEWQDISC`
//! answers (pure, tested to the byte on a message captured from the
//! kernel), and [`QdiscSocket`], a `NETLINK_ROUTE` socket opened once in a
//! namespace (through [`crate::netns::run_in`]) and dumped as often as the
//! caller likes from any thread. What it is not: no qdisc changes (the
//! topology builder runs `tc`), no class or filter dumps, no per-kind
//! options (`TCA_OPTIONS`) or extended stats (`TCA_XSTATS`).
//!
//! Layouts follow `include/uapi/linux/rtnetlink.h` (`struct tcmsg`,
//! `TCA_*`) and `gen_stats.h` (`TCA_STATS_*`, `struct gnet_stats_basic`,
//! `struct gnet_stats_queue`). The counters come from `TCA_STATS2`; the
//! legacy `TCA_STATS` copy beside it is not read. A root qdisc's counters
//! cover its children's (a tbf counts its bfifo's backlog and drops, and its
//! own overlimits: the times it held a packet back for want of tokens).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::netlink::{self, NlSocket, ParseError, NLM_F_DUMP, NLM_F_REQUEST};
use crate::{Error, Result};

pub const RTM_NEWQDISC: u16 = 36;
pub const RTM_GETQDISC: u16 = 38;
/// `sizeof(struct tcmsg)`: family, 3 pad bytes, ifindex, handle, parent, info.
pub const TCMSG_LEN: usize = 20;
/// `TC_H_ROOT`: the parent of a device's root qdisc.
pub const TC_H_ROOT: u32 = 0xFFFF_FFFF;

const TCA_KIND: u16 = 1;
const TCA_STATS2: u16 = 7;
const TCA_STATS_BASIC: u16 = 1;
const TCA_STATS_QUEUE: u16 = 3;
/// The packet count when it no longer fits `gnet_stats_basic`'s u32.
const TCA_STATS_PKT64: u16 = 8;
/// `struct gnet_stats_basic`: u64 bytes, u32 packets (padded to 16).
const STATS_BASIC_LEN: usize = 12;
/// `struct gnet_stats_queue`: qlen, backlog, drops, requeues, overlimits.
const STATS_QUEUE_LEN: usize = 20;

/// How long the kernel may take to finish a dump.
const TIMEOUT: Duration = Duration::from_secs(2);

/// One qdisc and its counters, as a dump reports them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QdiscStats {
    pub ifindex: u32,
    /// `major:minor` as one number (`1:` is 0x0001_0000).
    pub handle: u32,
    /// [`TC_H_ROOT`] for a device's root qdisc.
    pub parent: u32,
    /// "tbf", "bfifo", "noqueue", ...
    pub kind: String,
    /// Sent since the qdisc was created.
    pub bytes: u64,
    pub packets: u64,
    /// Held now: packets and bytes.
    pub qlen: u32,
    pub backlog: u32,
    /// Since creation: dropped, requeued, and held back by the qdisc's
    /// own limit (a tbf out of tokens).
    pub drops: u32,
    pub requeues: u32,
    pub overlimits: u32,
}

impl QdiscStats {
    pub fn is_root(&self) -> bool {
        self.parent == TC_H_ROOT
    }
}

/// The request that dumps every qdisc of every device of the namespace.
pub fn encode_dump(seq: u32) -> Vec<u8> {
    netlink::message(RTM_GETQDISC, NLM_F_REQUEST | NLM_F_DUMP, seq, &[&[0u8; TCMSG_LEN]])
}

/// Decodes the payload of one `RTM_NEWQDISC` message.
pub fn parse_qdisc(payload: &[u8]) -> std::result::Result<QdiscStats, ParseError> {
    let attrs = netlink::attrs_after(payload, "tcmsg", TCMSG_LEN)?;
    // In bounds: attrs_after checked the header's length.
    let word = |at| netlink::u32_ne(payload, at).unwrap_or(0);
    let mut q = QdiscStats { ifindex: word(4), handle: word(8), parent: word(12), ..QdiscStats::default() };
    let (mut kind, mut basic, mut queue) = (false, false, false);
    let mut pkt64 = None;
    for a in attrs.with_offsets() {
        let (at, k, d) = a?;
        match k {
            TCA_KIND => {
                q.kind = netlink::c_string(d);
                kind = true;
            }
            TCA_STATS2 => {
                for s in netlink::attrs(d, "TCA_STATS2").at_offset(at).with_offsets() {
                    let (at, k, d) = s?;
                    match k {
                        TCA_STATS_BASIC => {
                            let b = d.get(..STATS_BASIC_LEN).ok_or(ParseError::Truncated {
                                what: "gnet_stats_basic",
                                at,
                                need: STATS_BASIC_LEN,
                                have: d.len(),
                            })?;
                            q.bytes = netlink::fixed::<8>(&b[..8]).map(u64::from_ne_bytes).unwrap_or(0);
                            q.packets = u64::from(netlink::u32_ne(b, 8).unwrap_or(0));
                            basic = true;
                        }
                        TCA_STATS_QUEUE => {
                            let b = d.get(..STATS_QUEUE_LEN).ok_or(ParseError::Truncated {
                                what: "gnet_stats_queue",
                                at,
                                need: STATS_QUEUE_LEN,
                                have: d.len(),
                            })?;
                            let f = |i: usize| netlink::u32_ne(b, 4 * i).unwrap_or(0);
                            (q.qlen, q.backlog, q.drops, q.requeues, q.overlimits) =
                                (f(0), f(1), f(2), f(3), f(4));
                            queue = true;
                        }
                        TCA_STATS_PKT64 => pkt64 = netlink::fixed::<8>(d).map(u64::from_ne_bytes),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(p) = pkt64 {
        q.packets = p;
    }
    match (kind, basic, queue) {
        (true, true, true) => Ok(q),
        (false, ..) => Err(ParseError::Missing { what: "TCA_KIND" }),
        (_, false, _) => Err(ParseError::Missing { what: "TCA_STATS2/TCA_STATS_BASIC" }),
        (_, _, false) => Err(ParseError::Missing { what: "TCA_STATS2/TCA_STATS_QUEUE" }),
    }
}

/// A `NETLINK_ROUTE` socket of one network namespace, for qdisc dumps, and
/// the names of the devices its first dump found.
pub struct QdiscSocket {
    sock: NlSocket,
    seq: u32,
    what: String,
    ifnames: BTreeMap<u32, String>,
}

impl QdiscSocket {
    /// Opens the socket in the calling thread's namespace; `what` names the
    /// namespace in errors.
    pub fn open_here(what: &str) -> Result<QdiscSocket> {
        let sock = NlSocket::open(libc::NETLINK_ROUTE, "NETLINK_ROUTE")?;
        sock.set_recv_timeout(TIMEOUT)?;
        sock.request_extended_acks();
        let mut s = QdiscSocket { sock, seq: 0, what: what.into(), ifnames: BTreeMap::new() };
        for q in s.dump()? {
            if let Some(n) = crate::link::ifname(q.ifindex) {
                s.ifnames.insert(q.ifindex, n);
            }
        }
        Ok(s)
    }

    /// Opens the socket in namespace `ns` (on a short-lived thread; the
    /// caller's thread stays where it is).
    pub fn open_in(ns: &str) -> Result<QdiscSocket> {
        let what = format!("namespace {ns}");
        crate::netns::run_in(ns, move || QdiscSocket::open_here(&what))?
    }

    /// The name of device `ifindex` when the socket was opened.
    pub fn ifname(&self, ifindex: u32) -> Option<&str> {
        self.ifnames.get(&ifindex).map(|s| s.as_str())
    }

    /// Every qdisc of the namespace, now. A dump the kernel flags as
    /// interrupted (a qdisc changed meanwhile) is still returned: each
    /// message's counters are consistent in themselves.
    pub fn dump(&mut self) -> Result<Vec<QdiscStats>> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let op = format!("RTM_GETQDISC dump in {}", self.what);
        let mut out = Vec::new();
        self.sock.exchange(&encode_dump(seq), seq, &op, |kind, p| {
            if kind == RTM_NEWQDISC {
                out.push(parse_qdisc(p).map_err(|e| Error::Other { op: op.clone(), msg: e.to_string() })?);
            }
            Ok(false)
        })?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// Captured on this project's test machine (Linux 6.18, x86-64) from a
    /// namespace whose `lo` had `tbf rate 8mbit burst 3000 limit 20000` at
    /// root over `bfifo limit 20000`, right after 40 UDP datagrams of 1000
    /// bytes: `tc -s` showed the tbf at 15 packets sent, 18 dropped, 17
    /// queued a moment later. The two qdisc messages and the dump's end.
    const CAPTURED_TBF: &str =
        "bc000000240002000700000058540000000000000100000000000100ffffffff0200000008000100\
        746266002c00020028000100000100000000000040420f00000000000000000000000000204e00001bb70000000000\
        0005000c00000000003000070014000100360c00000000000003000000000000001800030013000000564d00001200\
        000000000000270000002c000300360c000000000000030000001200000027000000000000000000000013000000564d\
        000000000000";
    const CAPTURED_BFIFO: &str =
        "9c00000024000200070000005854000000000000010000000000100001000100010000000a000100\
        626669666f00000008000200204e000005000c00000000003000070014000100360c000000000000030000000000\
        00001800030013000000564d00001200000000000000000000002c000300360c0000000000000300000012000000\
        00000000000000000000000013000000564d000000000000";
    const CAPTURED_DONE: &str = "1400000003000200070000005854000000000000";

    #[test]
    fn a_captured_dump_decodes_to_the_counters_tc_showed() {
        const { assert!(cfg!(target_endian = "little")) };
        let mut dgram = hex(CAPTURED_TBF);
        dgram.extend(hex(CAPTURED_BFIFO));
        dgram.extend(hex(CAPTURED_DONE));
        let msgs: Vec<_> = netlink::messages(&dgram).map(|m| m.unwrap()).collect();
        assert_eq!(msgs.len(), 3);
        assert_eq!((msgs[0].header.kind, msgs[0].header.seq), (RTM_NEWQDISC, 7));
        let tbf = parse_qdisc(msgs[0].payload).unwrap();
        assert_eq!(
            tbf,
            QdiscStats {
                ifindex: 1,
                handle: 0x0001_0000,
                parent: TC_H_ROOT,
                kind: "tbf".into(),
                bytes: 3126,
                packets: 3,
                qlen: 19,
                backlog: 19_798,
                drops: 18,
                requeues: 0,
                overlimits: 39,
            }
        );
        assert!(tbf.is_root());
        let bfifo = parse_qdisc(msgs[1].payload).unwrap();
        assert_eq!((bfifo.kind.as_str(), bfifo.handle, bfifo.parent), ("bfifo", 0x0010_0000, 0x0001_0001));
        // The child holds the same packets; the holding back is the tbf's.
        assert_eq!((bfifo.backlog, bfifo.drops, bfifo.overlimits), (19_798, 18, 0));
        assert!(!bfifo.is_root());
        assert_eq!(msgs[2].answer(), Ok(netlink::Answer::Done));
    }

    /// A message built field by field: the decoder reads each field from
    /// its own place (no two counters equal), a 64-bit packet count wins
    /// over the basic u32 one, and unknown attributes are skipped.
    #[test]
    fn a_constructed_message_decodes_every_field_and_pkt64() {
        let mut p = vec![0u8, 0, 0, 0];
        p.extend(7u32.to_ne_bytes());
        p.extend(0x0002_0000u32.to_ne_bytes());
        p.extend(TC_H_ROOT.to_ne_bytes());
        p.extend(1u32.to_ne_bytes());
        let mut stats = netlink::AttrBuf::default();
        let mut basic = (5_000_000_000u64).to_ne_bytes().to_vec();
        basic.extend(u32::MAX.to_ne_bytes());
        basic.extend([0; 4]);
        stats.put(TCA_STATS_BASIC, &basic);
        stats.put(2, &[0; 8]); // TCA_STATS_RATE_EST: skipped
        let queue: Vec<u8> = [11u32, 22, 33, 44, 55].iter().flat_map(|v| v.to_ne_bytes()).collect();
        stats.put(TCA_STATS_QUEUE, &queue);
        stats.put(TCA_STATS_PKT64, &(1u64 << 33).to_ne_bytes());
        let mut a = netlink::AttrBuf::default();
        a.put_str(TCA_KIND, "tbf");
        a.put(2, &[1, 2, 3, 4]); // TCA_OPTIONS: skipped
        a.put(TCA_STATS2, stats.as_bytes());
        p.extend(a.as_bytes());
        let q = parse_qdisc(&p).unwrap();
        assert_eq!(
            q,
            QdiscStats {
                ifindex: 7,
                handle: 0x0002_0000,
                parent: TC_H_ROOT,
                kind: "tbf".into(),
                bytes: 5_000_000_000,
                packets: 1 << 33,
                qlen: 11,
                backlog: 22,
                drops: 33,
                requeues: 44,
                overlimits: 55,
            }
        );
        // The request: header and an all-zero tcmsg (every device, every qdisc).
        let r = encode_dump(9);
        let mut want = 36u32.to_ne_bytes().to_vec();
        want.extend(RTM_GETQDISC.to_ne_bytes());
        want.extend((NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
        want.extend(9u32.to_ne_bytes());
        want.extend([0; 4 + TCMSG_LEN]);
        assert_eq!(r, want);
    }

    #[test]
    fn broken_messages_are_errors_naming_what_is_wrong() {
        let tbf = hex(CAPTURED_TBF);
        let payload = &tbf[netlink::NLMSG_HDRLEN..];
        assert_eq!(
            parse_qdisc(&payload[..10]),
            Err(ParseError::Truncated { what: "tcmsg", at: 0, need: 20, have: 10 })
        );
        // Without attributes: no kind.
        assert_eq!(parse_qdisc(&payload[..TCMSG_LEN]), Err(ParseError::Missing { what: "TCA_KIND" }));
        // Every cut: never a panic, and an error unless it falls where
        // TCA_STATS2 ends (byte 128; the legacy TCA_STATS after it is not
        // needed).
        for cut in TCMSG_LEN + 1..payload.len() {
            assert_eq!(parse_qdisc(&payload[..cut]).is_ok(), cut == 128, "cut at {cut}");
        }
        // A queue record too short for its five counters.
        let mut stats = netlink::AttrBuf::default();
        stats.put(TCA_STATS_BASIC, &[0; 16]);
        stats.put(TCA_STATS_QUEUE, &[0; 12]);
        let mut a = netlink::AttrBuf::default();
        a.put_str(TCA_KIND, "bfifo");
        a.put(TCA_STATS2, stats.as_bytes());
        let mut p = vec![0u8; TCMSG_LEN];
        p.extend(a.as_bytes());
        let e = parse_qdisc(&p).unwrap_err();
        // tcmsg (20), TCA_KIND "bfifo" (12), TCA_STATS2's header (4), BASIC (20), QUEUE's header (4).
        assert_eq!(e, ParseError::Truncated { what: "gnet_stats_queue", at: 60, need: 20, have: 12 });
        assert_eq!(e.to_string(), "gnet_stats_queue truncated at byte 60: needs 20 bytes, 12 left");
    }

    /// The dump against the kernel: a fresh namespace, a tbf over a bfifo
    /// on `lo` (through `tc` in a named namespace), a burst of UDP that
    /// the tbf must hold back and partly drop.
    #[test]
    fn root_a_dump_sees_the_shaper_hold_back_and_drop() {
        crate::testing::require_root();
        let t = crate::testing::TestNetns::one("qdisc-test");
        let ns = t.name().to_string();
        let tc = |args: &[&str]| {
            let mut a = vec!["-n", ns.as_str(), "qdisc", "add", "dev", "lo"];
            a.extend_from_slice(args);
            crate::command::run("tc", &a).unwrap();
        };
        tc(&["root", "handle", "1:", "tbf", "rate", "8mbit", "burst", "3000", "limit", "20000"]);
        tc(&["parent", "1:1", "handle", "10:", "bfifo", "limit", "20000"]);
        let mut s = QdiscSocket::open_in(&ns).unwrap();
        let before = s.dump().unwrap();
        let root = |v: &[QdiscStats]| v.iter().find(|q| q.is_root() && q.kind == "tbf").cloned().unwrap();
        assert_eq!(root(&before).packets, 0);
        assert_eq!(s.ifname(root(&before).ifindex), Some("lo"));
        crate::netns::run_in(&ns, || {
            let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let r = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            for _ in 0..40 {
                // ENOBUFS once the queue is full is the point.
                let _ = u.send_to(&[7u8; 1000], r.local_addr().unwrap());
            }
        })
        .unwrap();
        let after = root(&s.dump().unwrap());
        // 40 datagrams of 1028 bytes on the wire against a 3000-byte
        // bucket and a 20000-byte queue: some sent, some held, some dropped.
        assert!(after.packets >= 1 && after.bytes >= 1000, "{after:?}");
        assert!(after.drops >= 1, "{after:?}");
        assert!(after.overlimits >= 1, "{after:?}");
        // Every datagram is sent, held or dropped (the receiver's port
        // unreachables, once it closed, add a few of their own).
        assert!(after.packets + u64::from(after.qlen) + u64::from(after.drops) >= 40, "{after:?}");
    }
}
