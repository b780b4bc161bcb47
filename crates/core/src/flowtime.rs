//! Flow completion time as a packet capture at the sender shows it.
//!
//! [Lanes] §6 measures flow completion times in ns-3 DCE, whose experiments
//! capture every link (the author's scripts call `EnablePcapAll`); the lab's
//! own FCT runs from the scheduled start to the receiver's answer. To compare
//! like with like, this module reads captured frames and gives, per TCP
//! connection, the time of its first SYN and the times the sender saw
//!
//! - the cumulative ACK of its last data byte, and
//! - the ACK of its FIN,
//!
//! so FCT can be taken to either end. The first SYN counts, so a lost SYN's
//! initial RTO (1 s) is inside the FCT as a capture would show it.
//!
//! Pure: frames and their capture times in, times out. [`parse_frame`] reads
//! Ethernet (with VLAN tags) or raw IP frames, IPv4 or IPv6, and returns typed
//! errors carrying the offset where the frame stopped making sense;
//! [`Connections`] follows every connection seen, the side that sent the
//! first SYN being the sender. Sequence numbers wrap (RFC 9293 §3.4): every
//! comparison is relative to the sender's initial sequence number, so a
//! connection may carry up to 4 GiB.

use crate::time::Instant;
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// How the captured frames begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkType {
    /// An Ethernet header (AF_PACKET on veth and on lo).
    Ethernet,
    /// The IP header (a tun device, `SOCK_DGRAM` packet sockets).
    RawIp,
}

/// A frame that is not a readable TCP segment, and where it stops.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame truncated at byte {at}: {what} needs {need} bytes, {have} captured")]
    Truncated { at: usize, what: &'static str, need: usize, have: usize },
    #[error("bad {what} at byte {at}: {value}")]
    Bad { at: usize, what: &'static str, value: u32 },
}

/// The fields of a TCP segment that completion times need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub seq: u32,
    pub ack: u32,
    pub syn: bool,
    pub fin: bool,
    pub rst: bool,
    pub has_ack: bool,
    /// TCP payload bytes, from the IP header's length (not the captured
    /// length, so a short snap length loses nothing).
    pub payload: u32,
}

const TCP: u8 = 6;

fn need(b: &[u8], at: usize, len: usize, what: &'static str) -> Result<(), FrameError> {
    if b.len() < at + len {
        return Err(FrameError::Truncated { at, what, need: len, have: b.len().saturating_sub(at) });
    }
    Ok(())
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The TCP segment in a frame; `Ok(None)` for frames that carry something
/// else (ARP, UDP, ICMP, non-first IPv4 fragments, IPv6 fragments).
pub fn parse_frame(frame: &[u8], link: LinkType) -> Result<Option<Segment>, FrameError> {
    let mut at = 0;
    let mut ethertype = None;
    if link == LinkType::Ethernet {
        need(frame, 0, 14, "Ethernet header")?;
        let mut t = be16(frame, 12);
        at = 14;
        // 802.1Q / 802.1ad tags: 4 bytes each before the real type.
        while t == 0x8100 || t == 0x88a8 {
            need(frame, at, 4, "VLAN tag")?;
            t = be16(frame, at + 2);
            at += 4;
        }
        ethertype = Some(t);
    }
    need(frame, at, 1, "IP version")?;
    let version = frame[at] >> 4;
    match (ethertype, version) {
        (Some(0x0800) | None, 4) => parse_ipv4(frame, at),
        (Some(0x86dd) | None, 6) => parse_ipv6(frame, at),
        (None, v) => Err(FrameError::Bad { at, what: "IP version", value: u32::from(v) }),
        (Some(0x0800 | 0x86dd), v) => Err(FrameError::Bad { at, what: "IP version", value: u32::from(v) }),
        (Some(_), _) => Ok(None),
    }
}

fn parse_ipv4(b: &[u8], at: usize) -> Result<Option<Segment>, FrameError> {
    need(b, at, 20, "IPv4 header")?;
    let ihl = usize::from(b[at] & 0x0f) * 4;
    if ihl < 20 {
        return Err(FrameError::Bad { at, what: "IPv4 header length", value: ihl as u32 });
    }
    need(b, at, ihl, "IPv4 header with options")?;
    let total = usize::from(be16(b, at + 2));
    if total < ihl {
        return Err(FrameError::Bad { at: at + 2, what: "IPv4 total length", value: total as u32 });
    }
    if be16(b, at + 6) & 0x1fff != 0 || b[at + 9] != TCP {
        return Ok(None); // a later fragment, or not TCP
    }
    let src = IpAddr::V4(Ipv4Addr::new(b[at + 12], b[at + 13], b[at + 14], b[at + 15]));
    let dst = IpAddr::V4(Ipv4Addr::new(b[at + 16], b[at + 17], b[at + 18], b[at + 19]));
    parse_tcp(b, at + ihl, total - ihl, src, dst).map(Some)
}

fn parse_ipv6(b: &[u8], at: usize) -> Result<Option<Segment>, FrameError> {
    need(b, at, 40, "IPv6 header")?;
    let mut left = usize::from(be16(b, at + 4));
    let mut next = b[at + 6];
    let addr = |o: usize| {
        let mut a = [0u8; 16];
        a.copy_from_slice(&b[o..o + 16]);
        IpAddr::V6(Ipv6Addr::from(a))
    };
    let (src, dst) = (addr(at + 8), addr(at + 24));
    let mut h = at + 40;
    // Extension headers before TCP: hop-by-hop, routing, destination options.
    while matches!(next, 0 | 43 | 60) {
        need(b, h, 2, "IPv6 extension header")?;
        let len = (usize::from(b[h + 1]) + 1) * 8;
        if len > left {
            return Err(FrameError::Bad {
                at: h + 1,
                what: "IPv6 extension header length",
                value: len as u32,
            });
        }
        next = b[h];
        h += len;
        left -= len;
    }
    if next != TCP {
        return Ok(None); // fragments (44), UDP, ICMPv6, …
    }
    parse_tcp(b, h, left, src, dst).map(Some)
}

fn parse_tcp(
    b: &[u8],
    at: usize,
    ip_payload: usize,
    src: IpAddr,
    dst: IpAddr,
) -> Result<Segment, FrameError> {
    need(b, at, 20, "TCP header")?;
    let doff = usize::from(b[at + 12] >> 4) * 4;
    if doff < 20 || doff > ip_payload {
        return Err(FrameError::Bad { at: at + 12, what: "TCP data offset", value: doff as u32 });
    }
    let flags = b[at + 13];
    Ok(Segment {
        src: SocketAddr::new(src, be16(b, at)),
        dst: SocketAddr::new(dst, be16(b, at + 2)),
        seq: be32(b, at + 4),
        ack: be32(b, at + 8),
        fin: flags & 0x01 != 0,
        syn: flags & 0x02 != 0,
        rst: flags & 0x04 != 0,
        has_ack: flags & 0x10 != 0,
        payload: (ip_payload - doff) as u32,
    })
}

/// What a capture at the sender shows of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FlowTimes {
    /// The first SYN the sender sent.
    pub syn: Instant,
    /// The first cumulative ACK that covered the last data byte sent.
    pub last_data_acked: Option<Instant>,
    /// The first ACK of the sender's FIN.
    pub fin_acked: Option<Instant>,
    /// Data bytes the sender sent (highest sequence reached, retransmissions
    /// not counted twice).
    pub data_bytes: u64,
    /// Segments that repeated data already sent (the sender's retransmissions).
    pub retransmitted: u32,
    pub reset: bool,
}

impl FlowTimes {
    /// First SYN → ACK of the last data byte.
    pub fn fct_to_last_ack(&self) -> Option<std::time::Duration> {
        self.last_data_acked.map(|t| t - self.syn)
    }

    /// First SYN → ACK of the FIN.
    pub fn fct_to_fin_ack(&self) -> Option<std::time::Duration> {
        self.fin_acked.map(|t| t - self.syn)
    }
}

/// One connection, seen from its sender (the side of the first SYN).
#[derive(Debug, Clone)]
struct Conn {
    sender: SocketAddr,
    isn: u32,
    times: FlowTimes,
    /// Highest sequence offset sent (relative to the ISN; the SYN is 1).
    sent_end: u64,
    /// The FIN's offset, once sent.
    fin_at: Option<u64>,
    /// Highest cumulative ACK offset received.
    acked: u64,
}

impl Conn {
    fn rel(&self, seq: u32) -> u64 {
        u64::from(seq.wrapping_sub(self.isn))
    }

    fn on(&mut self, at: Instant, s: &Segment) {
        self.times.reset |= s.rst;
        if s.src == self.sender {
            let start = self.rel(s.seq) + u64::from(s.syn);
            let end = start + u64::from(s.payload);
            if s.payload > 0 && start < self.sent_end {
                self.times.retransmitted += 1;
            }
            // Only data moves the end (a pure ACK after the FIN carries the
            // FIN's sequence number + 1).
            if s.payload > 0 && end > self.sent_end {
                self.sent_end = end;
                // New data: the last byte is not acked yet.
                self.times.data_bytes = end - 1;
                self.times.last_data_acked = None;
            }
            if s.fin && self.fin_at.is_none() {
                self.fin_at = Some(end);
            }
            return;
        }
        if !s.has_ack {
            return;
        }
        let ack = self.rel(s.ack);
        // An ACK from before the ISN (a stale segment) is far "above" after
        // the wrap: only ACKs up to what was sent (+1 for a FIN) count.
        let limit = self.fin_at.map_or(self.sent_end, |f| f + 1);
        if ack > limit {
            return;
        }
        self.acked = self.acked.max(ack);
        if self.times.data_bytes > 0 && self.acked >= self.sent_end && self.times.last_data_acked.is_none() {
            self.times.last_data_acked = Some(at);
        }
        if let Some(f) = self.fin_at {
            if self.acked > f && self.times.fin_acked.is_none() {
                self.times.fin_acked = Some(at);
            }
        }
    }
}

/// Every connection of a capture, keyed by (sender, receiver).
#[derive(Debug, Default)]
pub struct Connections {
    conns: BTreeMap<(SocketAddr, SocketAddr), Conn>,
    /// Segments of connections whose first SYN was not captured.
    pub unknown: u64,
}

impl Connections {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one segment captured at `at` (captures are in time order).
    pub fn on_segment(&mut self, at: Instant, s: &Segment) {
        let fwd = (s.src, s.dst);
        let key = if self.conns.contains_key(&fwd) {
            Some(fwd)
        } else {
            Some((s.dst, s.src)).filter(|k| self.conns.contains_key(k))
        };
        match key {
            Some(k) => {
                let c = self.conns.get_mut(&k).expect("key found above");
                if s.syn && !s.has_ack && s.src == c.sender && s.seq != c.isn && c.times.fin_acked.is_some() {
                    // The same four-tuple reused for a new connection.
                    self.conns.insert(k, Self::open(at, s));
                } else {
                    c.on(at, s);
                }
            }
            None if s.syn && !s.has_ack => {
                self.conns.insert(fwd, Self::open(at, s));
            }
            None => self.unknown += 1,
        }
    }

    /// Parses and feeds one frame; frames that are not TCP are skipped.
    pub fn on_frame(&mut self, at: Instant, frame: &[u8], link: LinkType) -> Result<(), FrameError> {
        if let Some(s) = parse_frame(frame, link)? {
            self.on_segment(at, &s);
        }
        Ok(())
    }

    fn open(at: Instant, s: &Segment) -> Conn {
        let times = FlowTimes {
            syn: at,
            last_data_acked: None,
            fin_acked: None,
            data_bytes: 0,
            retransmitted: 0,
            reset: false,
        };
        Conn { sender: s.src, isn: s.seq, times, sent_end: 1 + u64::from(s.payload), fin_at: None, acked: 0 }
    }

    /// The connection from `sender` to `receiver`.
    pub fn get(&self, sender: SocketAddr, receiver: SocketAddr) -> Option<&FlowTimes> {
        self.conns.get(&(sender, receiver)).map(|c| &c.times)
    }

    /// Every connection: (sender, receiver, times), in address order.
    pub fn iter(&self) -> impl Iterator<Item = (SocketAddr, SocketAddr, &FlowTimes)> {
        self.conns.iter().map(|((s, r), c)| (*s, *r, &c.times))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const A: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 40000);
    const B: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 5201);

    /// An Ethernet + IPv4 + TCP frame, the way a capture on a veth holds it.
    fn v4_frame(src: SocketAddr, dst: SocketAddr, seq: u32, ack: u32, flags: u8, payload: usize) -> Vec<u8> {
        let (IpAddr::V4(s), IpAddr::V4(d)) = (src.ip(), dst.ip()) else { panic!("v4 only") };
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let total = 20 + 32 + payload; // TCP header with 12 bytes of options
        let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, TCP, 0, 0];
        ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        ip.extend_from_slice(&s.octets());
        ip.extend_from_slice(&d.octets());
        f.extend_from_slice(&ip);
        let mut tcp = vec![0u8; 32];
        tcp[0..2].copy_from_slice(&src.port().to_be_bytes());
        tcp[2..4].copy_from_slice(&dst.port().to_be_bytes());
        tcp[4..8].copy_from_slice(&seq.to_be_bytes());
        tcp[8..12].copy_from_slice(&ack.to_be_bytes());
        tcp[12] = 8 << 4;
        tcp[13] = flags;
        f.extend_from_slice(&tcp);
        f.extend(std::iter::repeat_n(0xab, payload));
        f
    }

    const SYN: u8 = 0x02;
    const ACK: u8 = 0x10;
    const FIN: u8 = 0x01;
    const PSH: u8 = 0x08;

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    /// A 3000-byte transfer: SYN lost and resent after 1 s, data in three
    /// segments (the second retransmitted), FIN acked 2 ms after the data.
    fn transfer(isn: u32) -> Vec<(Instant, Vec<u8>)> {
        let r = 7_000_000u32; // the receiver's ISN
        let s = |off: u32| isn.wrapping_add(off);
        vec![
            (ms(0), v4_frame(A, B, isn, 0, SYN, 0)),
            (ms(1000), v4_frame(A, B, isn, 0, SYN, 0)),
            (ms(1010), v4_frame(B, A, r, s(1), SYN | ACK, 0)),
            (ms(1010), v4_frame(A, B, s(1), r + 1, ACK, 0)),
            (ms(1011), v4_frame(A, B, s(1), r + 1, ACK | PSH, 1000)),
            (ms(1011), v4_frame(A, B, s(1001), r + 1, ACK | PSH, 1000)),
            (ms(1011), v4_frame(A, B, s(2001), r + 1, ACK | PSH, 1000)),
            (ms(1021), v4_frame(B, A, r + 1, s(1001), ACK, 0)),
            (ms(1021), v4_frame(B, A, r + 1, s(1001), ACK, 0)), // dup: 1001..2001 lost
            (ms(1030), v4_frame(A, B, s(1001), r + 1, ACK | PSH, 1000)),
            (ms(1040), v4_frame(B, A, r + 1, s(3001), ACK, 0)),
            (ms(1041), v4_frame(A, B, s(3001), r + 1, ACK | FIN, 0)),
            (ms(1042), v4_frame(B, A, r + 1, s(3002), ACK | FIN, 0)),
            (ms(1042), v4_frame(A, B, s(3002), r + 2, ACK, 0)),
        ]
    }

    fn run(frames: &[(Instant, Vec<u8>)]) -> Connections {
        let mut c = Connections::new();
        for (at, f) in frames {
            c.on_frame(*at, f, LinkType::Ethernet).unwrap();
        }
        c
    }

    #[test]
    fn times_from_the_first_syn_to_the_last_data_ack_and_the_fin_ack() {
        let c = run(&transfer(1_000));
        let t = c.get(A, B).expect("one connection, A the sender");
        assert_eq!(t.syn, ms(0), "the first SYN, not the retransmitted one");
        assert_eq!(t.last_data_acked, Some(ms(1040)));
        assert_eq!(t.fin_acked, Some(ms(1042)));
        assert_eq!(t.fct_to_last_ack(), Some(Duration::from_millis(1040)));
        assert_eq!(t.fct_to_fin_ack(), Some(Duration::from_millis(1042)));
        assert_eq!((t.data_bytes, t.retransmitted, t.reset), (3000, 1, false));
        assert!(c.get(B, A).is_none());
        assert_eq!(c.unknown, 0);
    }

    #[test]
    fn sequence_numbers_wrap_inside_a_connection() {
        let c = run(&transfer(u32::MAX - 1500));
        let t = c.get(A, B).unwrap();
        assert_eq!((t.last_data_acked, t.fin_acked, t.data_bytes), (Some(ms(1040)), Some(ms(1042)), 3000));
    }

    #[test]
    fn an_ack_before_the_fin_is_the_last_data_ack_when_the_fin_comes_later() {
        let isn = 50;
        let frames = vec![
            (ms(0), v4_frame(A, B, isn, 0, SYN, 0)),
            (ms(1), v4_frame(B, A, 9, isn + 1, SYN | ACK, 0)),
            (ms(2), v4_frame(A, B, isn + 1, 10, ACK | PSH, 500)),
            (ms(3), v4_frame(B, A, 10, isn + 501, ACK, 0)),
            (ms(40), v4_frame(A, B, isn + 501, 10, ACK | FIN, 0)),
            (ms(41), v4_frame(B, A, 10, isn + 502, ACK, 0)),
        ];
        let t = *run(&frames).get(A, B).unwrap();
        assert_eq!((t.last_data_acked, t.fin_acked), (Some(ms(3)), Some(ms(41))));
    }

    #[test]
    fn a_partial_ack_does_not_complete_and_new_data_reopens() {
        let isn = 0;
        let frames = vec![
            (ms(0), v4_frame(A, B, isn, 0, SYN, 0)),
            (ms(1), v4_frame(A, B, isn + 1, 1, ACK, 100)),
            (ms(2), v4_frame(B, A, 1, isn + 50, ACK, 0)),
            (ms(3), v4_frame(B, A, 1, isn + 101, ACK, 0)),
            (ms(4), v4_frame(A, B, isn + 101, 1, ACK, 100)),
            (ms(5), v4_frame(B, A, 1, isn + 201, ACK, 0)),
            // An ACK beyond anything sent is not believed.
            (ms(6), v4_frame(B, A, 1, isn + 9999, ACK, 0)),
        ];
        let t = *run(&frames).get(A, B).unwrap();
        assert_eq!((t.last_data_acked, t.fin_acked, t.data_bytes), (Some(ms(5)), None, 200));
    }

    #[test]
    fn segments_of_connections_without_a_syn_are_counted_apart_and_rst_is_kept() {
        let mut c = Connections::new();
        c.on_frame(ms(0), &v4_frame(A, B, 5, 1, ACK, 10), LinkType::Ethernet).unwrap();
        assert_eq!(c.unknown, 1);
        c.on_frame(ms(1), &v4_frame(A, B, 5, 0, SYN, 0), LinkType::Ethernet).unwrap();
        c.on_frame(ms(2), &v4_frame(B, A, 0, 6, 0x04 | ACK, 0), LinkType::Ethernet).unwrap();
        assert!(c.get(A, B).unwrap().reset);
    }

    #[test]
    fn ipv6_with_an_extension_header_and_raw_ip_parse() {
        let src: Ipv6Addr = "fd00::1".parse().unwrap();
        let dst: Ipv6Addr = "fd00::2".parse().unwrap();
        let mut f = vec![0x60, 0, 0, 0, 0, 0, 0 /* hop-by-hop */, 64];
        f[4..6].copy_from_slice(&(8u16 + 20 + 7).to_be_bytes());
        f.extend_from_slice(&src.octets());
        f.extend_from_slice(&dst.octets());
        f.extend_from_slice(&[TCP, 0, 0, 0, 0, 0, 0, 0]); // hop-by-hop, 8 bytes
        let mut tcp = vec![0u8; 20];
        tcp[0..2].copy_from_slice(&443u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&5000u16.to_be_bytes());
        tcp[4..8].copy_from_slice(&77u32.to_be_bytes());
        tcp[12] = 5 << 4;
        tcp[13] = ACK | FIN;
        f.extend_from_slice(&tcp);
        f.extend_from_slice(&[1; 7]);
        let s = parse_frame(&f, LinkType::RawIp).unwrap().unwrap();
        assert_eq!(
            (s.src, s.dst),
            (SocketAddr::new(IpAddr::V6(src), 443), SocketAddr::new(IpAddr::V6(dst), 5000))
        );
        assert_eq!((s.seq, s.fin, s.has_ack, s.syn, s.payload), (77, true, true, false, 7));
        // The same packet behind an Ethernet header with a VLAN tag.
        let mut e = vec![0u8; 12];
        e.extend_from_slice(&[0x81, 0x00, 0, 5, 0x86, 0xdd]);
        e.extend_from_slice(&f);
        assert_eq!(parse_frame(&e, LinkType::Ethernet).unwrap(), Some(s));
    }

    #[test]
    fn bad_frames_say_where_and_others_are_skipped() {
        let good = v4_frame(A, B, 1, 0, SYN, 0);
        assert_eq!(
            parse_frame(&good[..30], LinkType::Ethernet),
            Err(FrameError::Truncated { at: 14, what: "IPv4 header", need: 20, have: 16 })
        );
        assert_eq!(
            parse_frame(&good[..40], LinkType::Ethernet),
            Err(FrameError::Truncated { at: 34, what: "TCP header", need: 20, have: 6 })
        );
        let mut bad = good.clone();
        bad[14] = 0x43; // IHL 3 words
        assert_eq!(
            parse_frame(&bad, LinkType::Ethernet),
            Err(FrameError::Bad { at: 14, what: "IPv4 header length", value: 12 })
        );
        let mut bad = good.clone();
        bad[34 + 12] = 15 << 4; // data offset 60 > the 32 bytes of the segment
        assert_eq!(
            parse_frame(&bad, LinkType::Ethernet),
            Err(FrameError::Bad { at: 46, what: "TCP data offset", value: 60 })
        );
        let mut v = good.clone();
        v[14] = 0x65; // version 6 behind an IPv4 EtherType
        assert!(matches!(
            parse_frame(&v, LinkType::Ethernet),
            Err(FrameError::Bad { what: "IP version", value: 6, .. })
        ));
        let mut udp = good.clone();
        udp[14 + 9] = 17;
        assert_eq!(parse_frame(&udp, LinkType::Ethernet), Ok(None));
        let mut frag = good.clone();
        frag[14 + 7] = 1; // fragment offset 8
        assert_eq!(parse_frame(&frag, LinkType::Ethernet), Ok(None));
        let mut arp = good;
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(parse_frame(&arp, LinkType::Ethernet), Ok(None));
        // Snapped after the TCP header: the payload length still comes from IP.
        let full = v4_frame(A, B, 1, 0, ACK, 1400);
        assert_eq!(parse_frame(&full[..14 + 20 + 32], LinkType::Ethernet).unwrap().unwrap().payload, 1400);
    }
}
