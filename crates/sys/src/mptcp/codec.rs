//! Bytes of the path-manager interface, without a socket: path-manager
//! requests, the `nlctrl` family lookup, the answers to both and the events.
//! Built on the netlink layer's header, message splitter and attribute
//! walker/builder; every parser returns a [`ParseError`] naming what was
//! short or broken and never panics.

use std::net::{IpAddr, SocketAddr};

use super::types::{
    addr_attr, attr, event_attr, Command, Endpoint, Event, EventKind, FamilyInfo, Limits, PmAddr,
    FAMILY_VERSION,
};
use crate::netlink::{
    self, c_string, genl_message, Answer, AttrBuf, GenlHeader, NlErr, ParseError, Skipped, GENL_HDRLEN,
    NLMSG_DONE, NLMSG_ERROR, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST,
};

// include/uapi/linux/genetlink.h: the controller family.
pub(crate) const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const CTRL_ATTR_VERSION: u16 = 3;
const CTRL_ATTR_MCAST_GROUPS: u16 = 7;
const CTRL_ATTR_MCAST_GRP_NAME: u16 = 1;
const CTRL_ATTR_MCAST_GRP_ID: u16 = 2;

// --------------------------------------------------------------- encoding

fn af_of(ip: &IpAddr) -> u16 {
    match ip {
        IpAddr::V4(_) => libc::AF_INET as u16,
        IpAddr::V6(_) => libc::AF_INET6 as u16,
    }
}

fn encode_addr(a: &PmAddr) -> AttrBuf {
    let mut n = AttrBuf::default();
    n.put_u16(addr_attr::FAMILY, af_of(&a.ip));
    if let Some(id) = a.id {
        n.put_u8(addr_attr::ID, id);
    }
    match a.ip {
        // nla_get_in_addr: the address bytes in network order.
        IpAddr::V4(v4) => n.put(addr_attr::ADDR4, &v4.octets()),
        IpAddr::V6(v6) => n.put(addr_attr::ADDR6, &v6.octets()),
    }
    if let Some(p) = a.port {
        // nla_get_u16: host order (unlike the events' SPORT/DPORT).
        n.put_u16(addr_attr::PORT, p);
    }
    if let Some(f) = a.flags {
        n.put_u32(addr_attr::FLAGS, f);
    }
    if let Some(i) = a.if_index {
        n.put(addr_attr::IF_IDX, &i.to_ne_bytes());
    }
    n
}

/// The attributes of a path-manager request, before the headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub cmd: Command,
    attrs: AttrBuf,
    dump: bool,
}

impl Request {
    fn new(cmd: Command, attrs: AttrBuf) -> Request {
        Request { cmd, attrs, dump: false }
    }
    /// SUBFLOW_CREATE: open a subflow of connection `token` from `local`
    /// (with a non-zero id; [`flags::BACKUP`](super::flags::BACKUP) opens it
    /// as backup) to `remote` (address and port).
    pub fn subflow_create(token: u32, local: &PmAddr, remote: &PmAddr) -> Request {
        let mut a = AttrBuf::default();
        a.put_u32(attr::TOKEN, token);
        a.put_nested(attr::ADDR, encode_addr(local));
        a.put_nested(attr::ADDR_REMOTE, encode_addr(remote));
        Request::new(Command::SubflowCreate, a)
    }
    /// SUBFLOW_DESTROY: close the subflow `local` → `remote` (both with ports).
    pub fn subflow_destroy(token: u32, local: SocketAddr, remote: SocketAddr) -> Request {
        let mut a = AttrBuf::default();
        a.put_u32(attr::TOKEN, token);
        a.put_nested(attr::ADDR, encode_addr(&PmAddr::sock(local)));
        a.put_nested(attr::ADDR_REMOTE, encode_addr(&PmAddr::sock(remote)));
        Request::new(Command::SubflowDestroy, a)
    }
    /// SET_FLAGS. With a token (userspace PM): `local` carries the new flags
    /// (only BACKUP matters) and `remote` is required; the kernel sends
    /// MP_PRIO on the matching subflows. Without a token: changes the flags
    /// of an in-kernel PM endpoint.
    pub fn set_flags(token: Option<u32>, local: &PmAddr, remote: Option<&PmAddr>) -> Request {
        let mut a = AttrBuf::default();
        if let Some(t) = token {
            a.put_u32(attr::TOKEN, t);
        }
        a.put_nested(attr::ADDR, encode_addr(local));
        if let Some(r) = remote {
            a.put_nested(attr::ADDR_REMOTE, encode_addr(r));
        }
        Request::new(Command::SetFlags, a)
    }
    /// ADD_ADDR: add an in-kernel PM endpoint.
    pub fn add_addr(endpoint: &PmAddr) -> Request {
        let mut a = AttrBuf::default();
        a.put_nested(attr::ADDR, encode_addr(endpoint));
        Request::new(Command::AddAddr, a)
    }
    /// GET_ADDR as a dump: every in-kernel PM endpoint, or with a token the
    /// local addresses a userspace-PM connection knows.
    pub fn dump_addrs(token: Option<u32>) -> Request {
        let mut a = AttrBuf::default();
        if let Some(t) = token {
            a.put_u32(attr::TOKEN, t);
        }
        Request { dump: true, ..Request::new(Command::GetAddr, a) }
    }
    /// SET_LIMITS of the in-kernel PM.
    pub fn set_limits(l: Limits) -> Request {
        let mut a = AttrBuf::default();
        a.put_u32(attr::RCV_ADD_ADDRS, l.add_addr_accepted);
        a.put_u32(attr::SUBFLOWS, l.subflows);
        Request::new(Command::SetLimits, a)
    }
    /// GET_LIMITS of the in-kernel PM.
    pub fn get_limits() -> Request {
        Request::new(Command::GetLimits, AttrBuf::default())
    }
    /// The whole message for family `family_id` with sequence number `seq`.
    pub fn encode(&self, family_id: u16, seq: u32) -> Vec<u8> {
        let flags = if self.dump { NLM_F_REQUEST | NLM_F_DUMP } else { NLM_F_REQUEST | NLM_F_ACK };
        let genl = GenlHeader { cmd: self.cmd as u8, version: FAMILY_VERSION };
        genl_message(family_id, flags, seq, genl, self.attrs.as_bytes())
    }
}

/// `nlctrl` CTRL_CMD_GETFAMILY for the family called `name`.
pub(crate) fn get_family_request(name: &str, seq: u32) -> Vec<u8> {
    let mut a = AttrBuf::default();
    a.put_str(CTRL_ATTR_FAMILY_NAME, name);
    let genl = GenlHeader { cmd: CTRL_CMD_GETFAMILY, version: 1 };
    genl_message(GENL_ID_CTRL, NLM_F_REQUEST | NLM_F_ACK, seq, genl, a.as_bytes())
}

// --------------------------------------------------------------- answers

/// Why an exchange ended without its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Refused {
    Malformed(ParseError),
    Kernel(NlErr),
}

/// Takes in one datagram of the answer to request `seq`: the payloads of
/// `reply_type` messages go to `out`; `Ok(true)` once the ACK (or a dump's
/// DONE) has come. Messages of other sequence numbers are stale answers to
/// earlier, timed-out requests and are skipped.
pub(super) fn absorb(
    datagram: &[u8],
    seq: u32,
    reply_type: u16,
    out: &mut Vec<Vec<u8>>,
) -> Result<bool, Refused> {
    for m in netlink::messages(datagram) {
        let m = m.map_err(Refused::Malformed)?;
        if m.header.seq != seq {
            continue;
        }
        match m.answer().map_err(Refused::Malformed)? {
            Answer::Ack | Answer::Done => return Ok(true),
            Answer::Error(e) => return Err(Refused::Kernel(e)),
            Answer::Data(p) if m.header.kind == reply_type => out.push(p.to_vec()),
            Answer::Data(_) => {
                return Err(Refused::Malformed(ParseError::UnexpectedType { at: m.at, kind: m.header.kind }))
            }
        }
    }
    Ok(false)
}

/// Decodes one event from a generic netlink payload (genl header first;
/// offsets in errors count from its start). Attributes of an unexpected
/// size are left out and unknown ones skipped, both counted in
/// [`Event::skipped`]; a broken attribute chain is an error.
pub fn parse_event(genl: &[u8]) -> Result<Event, ParseError> {
    let (hdr, body) = GenlHeader::parse(genl)?;
    let mut ev = Event::new(EventKind::from_raw(hdr.cmd));
    let mut sk = Skipped::default();
    for a in netlink::attrs(body, "mptcp_pm event").at_offset(GENL_HDRLEN) {
        let (kind, d) = a?;
        use event_attr as ea;
        match kind {
            ea::TOKEN => ev.token = sk.sized::<4>(d).map(u32::from_ne_bytes),
            ea::FAMILY => ev.family = sk.sized::<2>(d).map(u16::from_ne_bytes),
            ea::LOC_ID => ev.loc_id = sk.sized::<1>(d).map(|b| b[0]),
            ea::REM_ID => ev.rem_id = sk.sized::<1>(d).map(|b| b[0]),
            ea::SADDR4 => ev.saddr = sk.sized::<4>(d).map(|o| IpAddr::V4(o.into())),
            ea::SADDR6 => ev.saddr = sk.sized::<16>(d).map(|o| IpAddr::V6(o.into())),
            ea::DADDR4 => ev.daddr = sk.sized::<4>(d).map(|o| IpAddr::V4(o.into())),
            ea::DADDR6 => ev.daddr = sk.sized::<16>(d).map(|o| IpAddr::V6(o.into())),
            // nla_put_be16: network order, unlike the command's PORT.
            ea::SPORT => ev.sport = sk.sized::<2>(d).map(u16::from_be_bytes),
            ea::DPORT => ev.dport = sk.sized::<2>(d).map(u16::from_be_bytes),
            ea::BACKUP => ev.backup = sk.sized::<1>(d).map(|b| b[0] != 0),
            ea::ERROR => ev.error = sk.sized::<1>(d).map(|b| b[0]),
            ea::FLAGS => ev.flags = sk.sized::<2>(d).map(u16::from_ne_bytes),
            ea::TIMEOUT => ev.timeout = sk.sized::<4>(d).map(u32::from_ne_bytes),
            ea::IF_IDX => ev.if_index = sk.sized::<4>(d).map(i32::from_ne_bytes),
            ea::RESET_REASON => ev.reset_reason = sk.sized::<4>(d).map(u32::from_ne_bytes),
            ea::RESET_FLAGS => ev.reset_flags = sk.sized::<4>(d).map(u32::from_ne_bytes),
            ea::SERVER_SIDE => ev.server_side = sk.sized::<1>(d).map(|b| b[0] != 0),
            _ => sk.unknown(),
        }
    }
    ev.skipped = sk;
    Ok(ev)
}

/// What one read of the event socket produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    Event(Event),
    /// A message that could not be decoded (skipped).
    Malformed(ParseError),
    /// The socket's buffer overflowed: some events were lost.
    Overrun,
}

/// Decodes a datagram from the events group. A broken message header ends
/// the datagram (what follows cannot be found); a broken event is reported
/// and the next message is still read. Offsets in errors count from the
/// start of the datagram.
pub fn parse_event_datagram(buf: &[u8], family_id: u16) -> Vec<Incoming> {
    netlink::messages(buf)
        .filter_map(|m| {
            let m = match m {
                Ok(m) => m,
                Err(e) => return Some(Incoming::Malformed(e)),
            };
            match m.header.kind {
                k if k == family_id => Some(match parse_event(m.payload) {
                    Ok(ev) => Incoming::Event(ev),
                    Err(e) => Incoming::Malformed(e.shifted(m.payload_at())),
                }),
                NLMSG_DONE | NLMSG_ERROR => None,
                kind => Some(Incoming::Malformed(ParseError::UnexpectedType { at: m.at, kind })),
            }
        })
        .collect()
}

/// One endpoint of a GET_ADDR answer (genl header first; offsets in errors
/// count from its start). Unknown attributes, at the top and in the nested
/// address, and known ones of an odd size are counted in
/// [`Endpoint::skipped`].
pub fn parse_endpoint(genl: &[u8]) -> Result<Endpoint, ParseError> {
    let (_, body) = GenlHeader::parse(genl)?;
    let mut sk = Skipped::default();
    let mut found = None;
    // Offsets of the nested attributes: where their container's payload starts.
    for a in netlink::attrs(body, "GET_ADDR answer").at_offset(GENL_HDRLEN).with_offsets() {
        let (nested_at, kind, nested) = a?;
        if kind != attr::ADDR || found.is_some() {
            sk.unknown();
            continue;
        }
        let mut ep = Endpoint {
            ip: None,
            id: None,
            port: None,
            flags: 0,
            if_index: None,
            skipped: Skipped::default(),
        };
        for b in netlink::attrs(nested, "MPTCP_PM_ATTR_ADDR").at_offset(nested_at) {
            let (k, d) = b?;
            match k {
                addr_attr::FAMILY => {}
                addr_attr::ID => ep.id = sk.sized::<1>(d).map(|x| x[0]),
                addr_attr::ADDR4 => ep.ip = sk.sized::<4>(d).map(|o| IpAddr::V4(o.into())),
                addr_attr::ADDR6 => ep.ip = sk.sized::<16>(d).map(|o| IpAddr::V6(o.into())),
                addr_attr::PORT => ep.port = sk.sized::<2>(d).map(u16::from_ne_bytes),
                addr_attr::FLAGS => ep.flags = sk.sized::<4>(d).map_or(0, u32::from_ne_bytes),
                addr_attr::IF_IDX => ep.if_index = sk.sized::<4>(d).map(i32::from_ne_bytes),
                _ => sk.unknown(),
            }
        }
        found = Some(ep);
    }
    let mut ep = found.ok_or(ParseError::Missing { what: "MPTCP_PM_ATTR_ADDR" })?;
    ep.skipped = sk;
    Ok(ep)
}

/// A GET_LIMITS answer (genl header first; offsets in errors count from its
/// start), with what was skipped in it.
pub fn parse_limits(genl: &[u8]) -> Result<(Limits, Skipped), ParseError> {
    let (_, body) = GenlHeader::parse(genl)?;
    let (mut subflows, mut accepted) = (None, None);
    let mut sk = Skipped::default();
    for a in netlink::attrs(body, "GET_LIMITS answer").at_offset(GENL_HDRLEN) {
        let (k, d) = a?;
        match k {
            attr::SUBFLOWS => subflows = sk.sized::<4>(d).map(u32::from_ne_bytes),
            attr::RCV_ADD_ADDRS => accepted = sk.sized::<4>(d).map(u32::from_ne_bytes),
            _ => sk.unknown(),
        }
    }
    let limits = Limits {
        subflows: subflows.ok_or(ParseError::Missing { what: "MPTCP_PM_ATTR_SUBFLOWS" })?,
        add_addr_accepted: accepted.ok_or(ParseError::Missing { what: "MPTCP_PM_ATTR_RCV_ADD_ADDRS" })?,
    };
    Ok((limits, sk))
}

/// `CTRL_ATTR_*` of a NEWFAMILY answer that are known and not read:
/// HDRSIZE, MAXATTR, OPS, POLICY, OP_POLICY, OP.
const CTRL_ATTRS_UNREAD: [u16; 6] = [4, 5, 6, 8, 9, 10];

/// An `nlctrl` NEWFAMILY answer: id, name, version, multicast groups
/// (genl header first; offsets in errors count from its start).
pub fn parse_family(genl: &[u8]) -> Result<FamilyInfo, ParseError> {
    let (_, body) = GenlHeader::parse(genl)?;
    let mut info = FamilyInfo {
        name: String::new(),
        id: 0,
        version: 0,
        groups: Vec::new(),
        skipped: Skipped::default(),
    };
    let sk = &mut info.skipped;
    let mut have_id = false;
    for a in netlink::attrs(body, "nlctrl family").at_offset(GENL_HDRLEN).with_offsets() {
        let (at, k, d) = a?;
        match k {
            CTRL_ATTR_FAMILY_ID => {
                if let Some(v) = sk.sized::<2>(d) {
                    info.id = u16::from_ne_bytes(v);
                    have_id = true;
                }
            }
            CTRL_ATTR_FAMILY_NAME => info.name = c_string(d),
            CTRL_ATTR_VERSION => info.version = sk.sized::<4>(d).map_or(0, u32::from_ne_bytes),
            CTRL_ATTR_MCAST_GROUPS => {
                // An array: nested entries (index as type), each with a name and an id.
                for g in netlink::attrs(d, "CTRL_ATTR_MCAST_GROUPS").at_offset(at).with_offsets() {
                    let (entry_at, _, entry) = g?;
                    let (mut name, mut id) = (None, None);
                    for f in netlink::attrs(entry, "multicast group").at_offset(entry_at) {
                        let (fk, fd) = f?;
                        match fk {
                            CTRL_ATTR_MCAST_GRP_NAME => name = Some(c_string(fd)),
                            CTRL_ATTR_MCAST_GRP_ID => id = sk.sized::<4>(fd).map(u32::from_ne_bytes),
                            _ => sk.unknown(),
                        }
                    }
                    if let (Some(n), Some(i)) = (name, id) {
                        info.groups.push((n, i));
                    }
                }
            }
            k if CTRL_ATTRS_UNREAD.contains(&k) => {}
            _ => sk.unknown(),
        }
    }
    if !have_id {
        return Err(ParseError::Missing { what: "CTRL_ATTR_FAMILY_ID" });
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::super::types::{flags, PmError};
    use super::super::types::{Endpoint, Event};
    use super::*;
    use crate::netlink::{attrs, message, u16_ne, u32_ne, NLA_F_NESTED, NLMSG_HDRLEN};
    use crate::netlink::{NLMSGERR_ATTR_MSG, NLMSGERR_ATTR_OFFS, NLM_F_ACK_TLVS, NLM_F_CAPPED};
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn sub_established_payload() -> Vec<u8> {
        let mut a = AttrBuf::default();
        a.put_u32(event_attr::TOKEN, 0xdead_beef);
        a.put_u16(event_attr::FAMILY, libc::AF_INET as u16);
        a.put_u8(event_attr::LOC_ID, 3);
        a.put_u8(event_attr::REM_ID, 0);
        a.put(event_attr::SADDR4, &[10, 2, 0, 1]);
        a.put(event_attr::DADDR4, &[10, 2, 0, 2]);
        a.put(event_attr::SPORT, &40000u16.to_be_bytes());
        a.put(event_attr::DPORT, &5201u16.to_be_bytes());
        a.put_u8(event_attr::BACKUP, 1);
        a.put(event_attr::IF_IDX, &7i32.to_ne_bytes());
        a.put_u8(99, 0); // unknown attribute: ignored
        let mut g = vec![EventKind::SubEstablished.raw(), 1, 0, 0];
        g.extend(a.into_bytes());
        g
    }

    fn all(buf: &[u8]) -> Vec<(u16, &[u8])> {
        attrs(buf, "test").map(|a| a.unwrap()).collect()
    }

    #[test]
    fn decodes_a_subflow_event_with_big_endian_ports() {
        let dg = message(0x1a, 0, 0, &[&sub_established_payload()]);
        let got = parse_event_datagram(&dg, 0x1a);
        assert_eq!(got.len(), 1);
        let Incoming::Event(ev) = &got[0] else { panic!("{got:?}") };
        assert_eq!(ev.kind, EventKind::SubEstablished);
        assert_eq!(ev.token, Some(0xdead_beef));
        assert_eq!(ev.local(), Some("10.2.0.1:40000".parse().unwrap()));
        assert_eq!(ev.remote(), Some("10.2.0.2:5201".parse().unwrap()));
        assert_eq!(ev.backup, Some(true));
        assert_eq!(ev.loc_id, Some(3));
        assert_eq!(ev.if_index, Some(7));
        assert_eq!(ev.server_side, None);
    }

    #[test]
    fn odd_sizes_are_dropped_not_fatal() {
        let mut a = AttrBuf::default();
        a.put(event_attr::TOKEN, &[1, 2]); // wrong size
        a.put(event_attr::SADDR6, &[0; 16]);
        a.put(event_attr::SPORT, &[1, 2, 3]); // wrong size
        let mut g = vec![EventKind::Created.raw(), 1, 0, 0];
        g.extend(a.into_bytes());
        let ev = parse_event(&g).expect("parse");
        assert_eq!(ev.token, None);
        assert_eq!(ev.saddr, Some(IpAddr::V6(Ipv6Addr::UNSPECIFIED)));
        assert_eq!(ev.sport, None);
        assert_eq!(EventKind::from_raw(200), EventKind::Other(200));
    }

    #[test]
    fn garbage_never_panics_and_errors_say_where() {
        // Every truncation and a sweep of byte corruptions of valid input.
        let dg = message(0x1a, 0, 0, &[&sub_established_payload()]);
        for cut in 0..dg.len() {
            let _ = parse_event_datagram(&dg[..cut], 0x1a);
            let _ = parse_event(&dg[NLMSG_HDRLEN.min(cut)..cut]);
            let _ = parse_family(&dg[..cut]);
            let _ = parse_endpoint(&dg[..cut]);
            let _ = parse_limits(&dg[..cut]);
            let _ = absorb(&dg[..cut], 0, 0x1a, &mut Vec::new());
        }
        let mut x: u32 = 0x9e37_79b9;
        for _ in 0..4000 {
            let mut m = dg.clone();
            for _ in 0..3 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let i = x as usize % m.len();
                m[i] = (x >> 8) as u8;
            }
            let _ = parse_event_datagram(&m, 0x1a);
            let _ = absorb(&m, 0, 0x1a, &mut Vec::new());
        }
        assert_eq!(
            parse_event(&[1, 2]),
            Err(ParseError::Truncated { what: "generic netlink header", at: 0, need: GENL_HDRLEN, have: 2 })
        );
        assert_eq!(
            parse_event_datagram(&[0u8; 5], 0x1a),
            vec![Incoming::Malformed(ParseError::Truncated {
                what: "netlink message header",
                at: 0,
                need: NLMSG_HDRLEN,
                have: 5
            })]
        );
        // A chain broken after the first attribute (TOKEN, 8 bytes): the
        // offset counts from the genl header.
        let mut p = sub_established_payload();
        p[GENL_HDRLEN + 8] = 0xff;
        assert_eq!(
            parse_event(&p),
            Err(ParseError::AttrBadLength {
                within: "mptcp_pm event",
                at: GENL_HDRLEN + 8,
                len: 0xff,
                left: p.len() - GENL_HDRLEN - 8
            })
        );
        // A good event, a broken one, and one of a foreign type, in one datagram.
        let mut dg = message(0x1a, 0, 0, &[&sub_established_payload()]);
        let first_len = dg.len();
        netlink::emit_message(&mut dg, 0x1a, 0, 0, &[&p]);
        netlink::emit_message(&mut dg, 0x33, 0, 0, &[]);
        let got = parse_event_datagram(&dg, 0x1a);
        assert!(matches!(got[0], Incoming::Event(_)), "{got:?}");
        assert_eq!(
            got[1..],
            [
                // Offsets in the datagram: the second message's payload starts
                // after the first message and its own header.
                Incoming::Malformed(parse_event(&p).unwrap_err().shifted(first_len + NLMSG_HDRLEN)),
                Incoming::Malformed(ParseError::UnexpectedType { at: dg.len() - NLMSG_HDRLEN, kind: 0x33 })
            ]
        );
    }

    #[test]
    fn command_layout_and_byte_orders() {
        let local = PmAddr::ip("10.2.0.1".parse().unwrap()).with_id(5).with_flags(flags::BACKUP);
        let remote = PmAddr::sock("10.2.0.2:5201".parse().unwrap());
        let m = Request::subflow_create(0x0102_0304, &local, &remote).encode(0x1b, 42);
        assert_eq!(u32_ne(&m, 0), Some(m.len() as u32));
        assert_eq!(u16_ne(&m, 4), Some(0x1b));
        assert_eq!(u16_ne(&m, 6), Some(NLM_F_REQUEST | NLM_F_ACK));
        assert_eq!(u32_ne(&m, 8), Some(42));
        assert_eq!(m[16], Command::SubflowCreate as u8);
        assert_eq!(m[17], FAMILY_VERSION);
        let top_attrs = all(&m[20..]);
        assert_eq!(top_attrs.len(), 3);
        assert_eq!(top_attrs[0], (attr::TOKEN, &0x0102_0304u32.to_ne_bytes()[..]));
        assert_eq!(top_attrs[1].0, attr::ADDR);
        assert_eq!(top_attrs[2].0, attr::ADDR_REMOTE);
        let l = all(top_attrs[1].1);
        assert!(l.contains(&(addr_attr::FAMILY, &(libc::AF_INET as u16).to_ne_bytes()[..])));
        assert!(l.contains(&(addr_attr::ID, &[5u8][..])));
        assert!(l.contains(&(addr_attr::ADDR4, &[10u8, 2, 0, 1][..])));
        assert!(l.contains(&(addr_attr::FLAGS, &flags::BACKUP.to_ne_bytes()[..])));
        let r = all(top_attrs[2].1);
        // Commands take the port in host order.
        assert!(r.contains(&(addr_attr::PORT, &5201u16.to_ne_bytes()[..])));
        // The container attributes are flagged nested.
        assert_eq!(u16_ne(&m, 20 + 8 + 2).map(|t| t & NLA_F_NESTED), Some(NLA_F_NESTED));
        // IPv6: family AF_INET6 and the 16 address bytes in ADDR6.
        let v6 = Request::set_flags(
            Some(9),
            &PmAddr::sock("[fd00::1]:4000".parse().unwrap()).with_flags(0),
            Some(&PmAddr::sock("[fd00::2]:80".parse().unwrap())),
        )
        .encode(0x1b, 3);
        let top = all(&v6[20..]);
        assert_eq!(top.len(), 3);
        let l = all(top[1].1);
        assert!(l.contains(&(addr_attr::FAMILY, &(libc::AF_INET6 as u16).to_ne_bytes()[..])));
        let ip6: std::net::Ipv6Addr = "fd00::1".parse().unwrap();
        assert!(l.contains(&(addr_attr::ADDR6, &ip6.octets()[..])));
        assert!(l.contains(&(addr_attr::FLAGS, &0u32.to_ne_bytes()[..])));
        let d = Request::dump_addrs(None).encode(0x1b, 1);
        assert_eq!(u16_ne(&d, 6), Some(NLM_F_REQUEST | NLM_F_DUMP));
    }

    /// SUBFLOW_DESTROY, byte for byte.
    #[test]
    fn subflow_destroy_exact_bytes() {
        const { assert!(cfg!(target_endian = "little"), "the expected bytes below are little-endian") };
        let m =
            Request::subflow_destroy(7, "10.0.0.1:40000".parse().unwrap(), "10.0.0.2:80".parse().unwrap())
                .encode(0x1b, 5);
        let addr = |ip: [u8; 4], port: u16| {
            let mut v = vec![6, 0, 1, 0, 2, 0, 0, 0, 8, 0, 3, 0];
            v.extend_from_slice(&ip);
            v.extend_from_slice(&[6, 0, 5, 0]);
            v.extend_from_slice(&port.to_le_bytes());
            v.extend_from_slice(&[0, 0]);
            v
        };
        let (l, r) = (addr([10, 0, 0, 1], 40000), addr([10, 0, 0, 2], 80));
        let mut want = vec![0; 4];
        want.extend_from_slice(&[0x1b, 0, 0x05, 0, 5, 0, 0, 0, 0, 0, 0, 0]);
        want.extend_from_slice(&[11, 1, 0, 0]); // SUBFLOW_DESTROY, version 1
        want.extend_from_slice(&[8, 0, 4, 0, 7, 0, 0, 0]); // TOKEN
        want.extend_from_slice(&[(4 + l.len()) as u8, 0, 1, 0x80]);
        want.extend_from_slice(&l);
        want.extend_from_slice(&[(4 + r.len()) as u8, 0, 6, 0x80]);
        want.extend_from_slice(&r);
        let len = want.len() as u32;
        want[..4].copy_from_slice(&len.to_le_bytes());
        assert_eq!(m, want);
    }

    #[test]
    fn answers_collect_replies_until_the_ack_and_name_the_refusal() {
        // A GET answer, a stale message of another request, then the ACK.
        let mut dg = message(0x1b, 0, 4, &[&[6, 1, 0, 0]]);
        netlink::emit_message(&mut dg, 0x1b, 0, 3, &[&[9, 9, 9, 9]]);
        let mut out = Vec::new();
        assert_eq!(absorb(&dg, 4, 0x1b, &mut out), Ok(false));
        let ack = message(NLMSG_ERROR, 0, 4, &[&0i32.to_ne_bytes(), &[0; NLMSG_HDRLEN]]);
        assert_eq!(absorb(&ack, 4, 0x1b, &mut out), Ok(true));
        assert_eq!(out, vec![vec![6u8, 1, 0, 0]]);
        // A dump ends with DONE.
        assert_eq!(absorb(&message(NLMSG_DONE, 0, 4, &[&[0; 4]]), 4, 0x1b, &mut out), Ok(true));
        // A message of an unexpected type.
        assert_eq!(
            absorb(&message(0x99, 0, 4, &[]), 4, 0x1b, &mut out),
            Err(Refused::Malformed(ParseError::UnexpectedType { at: 0, kind: 0x99 }))
        );
        // A refusal with an extended ack, after a capped echo.
        let req = Request::subflow_create(
            1,
            &PmAddr::ip(Ipv4Addr::LOCALHOST.into()),
            &PmAddr::ip(Ipv4Addr::LOCALHOST.into()),
        )
        .encode(0x1b, 7);
        let mut tlv = AttrBuf::default();
        tlv.put_str(NLMSGERR_ATTR_MSG, "invalid token");
        tlv.put_u32(NLMSGERR_ATTR_OFFS, 20);
        let err = message(
            NLMSG_ERROR,
            NLM_F_ACK_TLVS | NLM_F_CAPPED,
            7,
            &[&(-libc::EINVAL).to_ne_bytes(), &req[..NLMSG_HDRLEN], tlv.as_bytes()],
        );
        let Err(Refused::Kernel(e)) = absorb(&err, 7, 0x1b, &mut out) else { panic!() };
        assert_eq!(
            (e.errno, e.message.as_deref(), e.offset),
            (libc::EINVAL, Some("invalid token"), Some(20))
        );
        // The error names the command and carries the message.
        let err = PmError::kernel(Command::SubflowCreate.name(), e);
        let s = err.to_string();
        assert!(s.contains("SUBFLOW_CREATE") && s.contains("invalid token"), "{s}");
        assert_eq!(err.errno(), Some(libc::EINVAL));
    }

    #[test]
    fn family_request_and_answer_with_groups() {
        let req = get_family_request("mptcp_pm", 1);
        assert_eq!(&req[16..20], &[CTRL_CMD_GETFAMILY, 1, 0, 0]);
        assert_eq!(all(&req[20..]), vec![(CTRL_ATTR_FAMILY_NAME, &b"mptcp_pm\0"[..])]);
        let mut a = AttrBuf::default();
        a.put_str(CTRL_ATTR_FAMILY_NAME, "mptcp_pm");
        a.put_u16(CTRL_ATTR_FAMILY_ID, 0x1b);
        a.put_u32(CTRL_ATTR_VERSION, 1);
        let mut g1 = AttrBuf::default();
        g1.put_str(CTRL_ATTR_MCAST_GRP_NAME, "mptcp_pm_cmds");
        g1.put_u32(CTRL_ATTR_MCAST_GRP_ID, 9);
        let mut g2 = AttrBuf::default();
        g2.put_str(CTRL_ATTR_MCAST_GRP_NAME, "mptcp_pm_events");
        g2.put_u32(CTRL_ATTR_MCAST_GRP_ID, 10);
        let mut arr = AttrBuf::default();
        arr.put_nested(1, g1);
        arr.put_nested(2, g2);
        a.put_nested(CTRL_ATTR_MCAST_GROUPS, arr);
        let mut genl = vec![1, 2, 0, 0];
        genl.extend(a.into_bytes());
        let f = parse_family(&genl).unwrap();
        assert_eq!(f.id, 0x1b);
        assert_eq!(f.name, "mptcp_pm");
        assert_eq!(f.group(super::super::EVENTS_GROUP), Some(10));
        assert_eq!(f.group("nope"), None);
        assert_eq!(parse_family(&[1, 2, 0, 0]), Err(ParseError::Missing { what: "CTRL_ATTR_FAMILY_ID" }));
        // A broken attribute two levels down is named at its offset in the payload:
        // genl header 4, FAMILY_ID 8, MCAST_GROUPS' header 4, the entry's header 4.
        let mut entry = AttrBuf::default();
        entry.put_u32(CTRL_ATTR_MCAST_GRP_ID, 9);
        let mut entry = entry.into_bytes();
        entry[0] = 9; // claims 9 bytes, 8 there
        let mut arr = AttrBuf::default();
        arr.put(1 | NLA_F_NESTED, &entry);
        let mut a = AttrBuf::default();
        a.put_u16(CTRL_ATTR_FAMILY_ID, 0x1b);
        a.put_nested(CTRL_ATTR_MCAST_GROUPS, arr);
        let mut genl = vec![1, 2, 0, 0];
        genl.extend(a.into_bytes());
        assert_eq!(
            parse_family(&genl),
            Err(ParseError::AttrBadLength { within: "multicast group", at: 20, len: 9, left: 8 })
        );
    }

    #[test]
    fn endpoint_and_limits_answers() {
        let mut ep = AttrBuf::default();
        ep.put_u8(addr_attr::ID, 3);
        ep.put(addr_attr::ADDR4, &[10, 0, 0, 1]);
        ep.put_u16(addr_attr::PORT, 80);
        ep.put_u32(addr_attr::FLAGS, flags::SIGNAL);
        let mut a = AttrBuf::default();
        a.put_nested(attr::ADDR, ep);
        let mut genl = vec![Command::GetAddr as u8, 1, 0, 0];
        genl.extend(a.into_bytes());
        assert_eq!(
            parse_endpoint(&genl),
            Ok(Endpoint {
                ip: Some(Ipv4Addr::new(10, 0, 0, 1).into()),
                id: Some(3),
                port: Some(80),
                flags: flags::SIGNAL,
                if_index: None,
                skipped: Skipped::default(),
            })
        );
        assert_eq!(parse_endpoint(&[3, 1, 0, 0]), Err(ParseError::Missing { what: "MPTCP_PM_ATTR_ADDR" }));
        let mut l = AttrBuf::default();
        l.put_u32(attr::SUBFLOWS, 4);
        let mut genl = vec![Command::GetLimits as u8, 1, 0, 0];
        genl.extend(l.as_bytes());
        assert_eq!(parse_limits(&genl), Err(ParseError::Missing { what: "MPTCP_PM_ATTR_RCV_ADD_ADDRS" }));
        let mut l2 = l.clone();
        l2.put_u32(attr::RCV_ADD_ADDRS, 2);
        let mut genl = vec![Command::GetLimits as u8, 1, 0, 0];
        genl.extend(l2.as_bytes());
        assert_eq!(
            parse_limits(&genl),
            Ok((Limits { subflows: 4, add_addr_accepted: 2 }, Skipped::default()))
        );
        // SET_LIMITS encodes what GET_LIMITS decodes.
        let set = Request::set_limits(Limits { subflows: 4, add_addr_accepted: 2 }).encode(0x1b, 1);
        assert_eq!(
            parse_limits(&set[NLMSG_HDRLEN..]).map(|(l, _)| l),
            Ok(Limits { subflows: 4, add_addr_accepted: 2 })
        );
    }

    /// Genl payloads of the messages of `kind` in a captured answer.
    fn captured(dump: &[u8], kind: u16) -> Vec<&[u8]> {
        netlink::messages(dump)
            .map(|m| m.unwrap())
            .filter(|m| m.header.kind == kind)
            .map(|m| m.payload)
            .collect()
    }

    /// Real answers of this kernel's path manager (crates/sys/testdata/README.md
    /// says how they were taken): the family, the endpoint, the limits.
    #[test]
    fn captured_answers_decode_to_known_values() {
        let fam = captured(include_bytes!("../../testdata/genl_family_mptcp_pm.bin"), GENL_ID_CTRL);
        let f = parse_family(fam[0]).unwrap();
        assert_eq!((f.name.as_str(), f.version, f.skipped), ("mptcp_pm", 1, Skipped::default()));
        assert!(f.group("mptcp_pm_events").is_some() && f.group("mptcp_pm_cmds").is_some(), "{f:?}");
        let ep = captured(include_bytes!("../../testdata/mptcp_get_addr.bin"), f.id);
        assert_eq!(ep.len(), 1);
        assert_eq!(
            parse_endpoint(ep[0]),
            Ok(Endpoint {
                ip: Some(Ipv4Addr::new(10, 9, 0, 1).into()),
                id: Some(5),
                port: Some(0),
                flags: flags::SIGNAL,
                if_index: None,
                skipped: Skipped::default(),
            })
        );
        let lim = captured(include_bytes!("../../testdata/mptcp_get_limits.bin"), f.id);
        assert_eq!(
            parse_limits(lim[0]),
            Ok((Limits { subflows: 3, add_addr_accepted: 2 }, Skipped::default()))
        );
    }

    /// The real events of one MPTCP connection 127.0.0.1:40001 → :5202
    /// opened and closed with an endpoint to announce.
    #[test]
    fn captured_events_decode_in_order() {
        const DUMP: &[u8] = include_bytes!("../../testdata/mptcp_events.bin");
        let id = netlink::messages(DUMP).next().unwrap().unwrap().header.kind;
        let evs: Vec<Event> = parse_event_datagram(DUMP, id)
            .into_iter()
            .map(|i| match i {
                Incoming::Event(e) => e,
                other => panic!("{other:?}"),
            })
            .collect();
        use EventKind::*;
        let kinds: Vec<_> = evs.iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [
                ListenerCreated,
                Created,
                Created,
                Established,
                Established,
                Announced,
                Announced,
                Closed,
                Closed,
                ListenerClosed
            ]
        );
        let client = evs.iter().find(|e| e.kind == Established && e.server_side.is_none()).unwrap();
        assert_eq!(client.local(), Some("127.0.0.1:40001".parse().unwrap()));
        assert_eq!(client.remote(), Some("127.0.0.1:5202".parse().unwrap()));
        assert!(evs.iter().all(|e| e.skipped.is_empty()));
        // The first event with an attribute of a type unknown here appended:
        // counted; with its TOKEN cut to 3 bytes: counted as odd, left out.
        let created = netlink::messages(DUMP).nth(1).unwrap().unwrap().payload.to_vec();
        let mut more = created.clone();
        let mut a = AttrBuf::default();
        a.put_u32(120, 1);
        more.extend_from_slice(a.as_bytes());
        let ev = parse_event(&more).unwrap();
        assert_eq!(ev.skipped, Skipped { unknown: 1, odd_size: 0 });
        assert_eq!(ev.token, evs[1].token);
        let tok = netlink::attrs(&created[GENL_HDRLEN..], "t").with_offsets().next().unwrap().unwrap();
        assert_eq!(tok.1, event_attr::TOKEN);
        let mut odd = created.clone();
        let at = GENL_HDRLEN + tok.0 - 4;
        odd[at..at + 2].copy_from_slice(&7u16.to_ne_bytes());
        let ev = parse_event(&odd).unwrap();
        assert_eq!((ev.token, ev.skipped), (None, Skipped { unknown: 0, odd_size: 1 }));
    }
}
