//! sock_diag / inet_diag over `NETLINK_SOCK_DIAG`: dumps of TCP sockets (IPv4
//! and IPv6) with their attributes — `tcp_info`, congestion control name, ULP
//! info (MPTCP subflows) — in one netlink dump per call.
//!
//! What it is: the request encoder, a defensive parser of the kernel's answer
//! (every length checked; malformed input is an error, never a panic) and a
//! small socket wrapper that reuses its receive buffer so that a 100 Hz
//! sampler does one dump per tick. What it is not: it does not decode
//! `struct tcp_info` itself ([`crate::tcpinfo`] does, by length), and it does
//! not decide which sockets matter (callers filter; an optional in-kernel
//! bytecode filter on one port only trims the dump).
//!
//! Layouts follow `include/uapi/linux/inet_diag.h`, `sock_diag.h` and
//! `netlink.h`; the bytecode semantics follow `net/ipv4/inet_diag.c`
//! (`inet_diag_bc_run`, `inet_diag_bc_audit`).
//!
//! A diag socket answers for the network namespace it was created in, so a
//! caller that wants another namespace opens the socket inside it (for
//! example within `netns::run_in`) and may then use it from any thread.

use crate::netlink::{align4, c_string, u16_ne, u32_ne, Attrs};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::{Error, Result};

// include/uapi/linux/netlink.h
const NLMSG_HDRLEN: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP_INTR: u16 = 0x10;
const NLM_F_DUMP: u16 = 0x100 | 0x200; // NLM_F_ROOT | NLM_F_MATCH

// include/uapi/linux/sock_diag.h
const SOCK_DIAG_BY_FAMILY: u16 = 20;
// include/uapi/linux/inet_diag.h: the older request type, still served by
// `inet_diag_rcv_msg_compat`; it dumps with AF_UNSPEC, i.e. both families
// in one walk of the established hash table.
const TCPDIAG_GETSOCK: u16 = 18;
/// `sizeof(struct inet_diag_req)` (the compat request).
const REQ_COMPAT_LEN: usize = 4 + SOCKID_LEN + 8;

/// `sizeof(struct inet_diag_sockid)`.
const SOCKID_LEN: usize = 48;
/// `sizeof(struct inet_diag_req_v2)`.
const REQ_V2_LEN: usize = 8 + SOCKID_LEN;
/// `sizeof(struct inet_diag_msg)`.
const DIAG_MSG_LEN: usize = 4 + SOCKID_LEN + 20;

/// `INET_DIAG_REQ_BYTECODE`, the request attribute carrying a filter program.
const INET_DIAG_REQ_BYTECODE: u16 = 1;
// enum in inet_diag.h: INET_DIAG_BC_NOP = 0, _JMP = 1, _S_EQ = 11, _D_EQ = 12.
const BC_NOP: u8 = 0;
const BC_JMP: u8 = 1;
const BC_S_EQ: u8 = 11;
const BC_D_EQ: u8 = 12;

/// Answer attribute types (`enum { INET_DIAG_NONE, INET_DIAG_MEMINFO, ... }`).
pub mod attr {
    pub const MEMINFO: u16 = 1;
    /// `struct tcp_info`, of whatever length this kernel has.
    pub const INFO: u16 = 2;
    pub const VEGASINFO: u16 = 3;
    /// Congestion control name, NUL-terminated.
    pub const CONG: u16 = 4;
    pub const TOS: u16 = 5;
    pub const TCLASS: u16 = 6;
    pub const SKMEMINFO: u16 = 7;
    pub const SHUTDOWN: u16 = 8;
    pub const DCTCPINFO: u16 = 9;
    pub const PROTOCOL: u16 = 10;
    pub const SKV6ONLY: u16 = 11;
    pub const MARK: u16 = 15;
    pub const BBRINFO: u16 = 16;
    /// Nested: `INET_DIAG_ULP_INFO_NAME` (1, string) and, for MPTCP
    /// subflows, `INET_DIAG_ULP_INFO_MPTCP` (3, nested subflow info).
    pub const ULP_INFO: u16 = 19;
    pub const CGROUP_ID: u16 = 21;
    pub const SOCKOPT: u16 = 22;
}

/// Extension request bits: attribute `t` is asked for with `1 << (t - 1)`.
pub mod ext {
    pub const MEMINFO: u8 = 1 << (super::attr::MEMINFO - 1);
    pub const INFO: u8 = 1 << (super::attr::INFO - 1);
    pub const VEGASINFO: u8 = 1 << (super::attr::VEGASINFO - 1);
    pub const CONG: u8 = 1 << (super::attr::CONG - 1);
    pub const TOS: u8 = 1 << (super::attr::TOS - 1);
    pub const TCLASS: u8 = 1 << (super::attr::TCLASS - 1);
    pub const SKMEMINFO: u8 = 1 << (super::attr::SKMEMINFO - 1);
    pub const SHUTDOWN: u8 = 1 << (super::attr::SHUTDOWN - 1);
}

/// TCP states as the kernel numbers them (`include/net/tcp_states.h`).
pub mod state {
    pub const ESTABLISHED: u8 = 1;
    pub const SYN_SENT: u8 = 2;
    pub const SYN_RECV: u8 = 3;
    pub const FIN_WAIT1: u8 = 4;
    pub const FIN_WAIT2: u8 = 5;
    pub const TIME_WAIT: u8 = 6;
    pub const CLOSE: u8 = 7;
    pub const CLOSE_WAIT: u8 = 8;
    pub const LAST_ACK: u8 = 9;
    pub const LISTEN: u8 = 10;
    pub const CLOSING: u8 = 11;
    pub const NEW_SYN_RECV: u8 = 12;

    /// Bit mask selecting one state in a request.
    pub const fn bit(s: u8) -> u32 {
        1 << s
    }
    /// Every state.
    pub const ALL: u32 = 0xffff_ffff;
    /// States of a connection that carries (or carried) data and has a
    /// `tcp_info`: everything but LISTEN, TIME_WAIT, SYN_RECV/NEW_SYN_RECV
    /// (request socks) and CLOSE.
    pub const CONNECTED: u32 = bit(ESTABLISHED)
        | bit(SYN_SENT)
        | bit(FIN_WAIT1)
        | bit(FIN_WAIT2)
        | bit(CLOSE_WAIT)
        | bit(LAST_ACK)
        | bit(CLOSING);

    /// The kernel's name of a state, as `ss` prints it.
    pub fn name(s: u8) -> &'static str {
        match s {
            ESTABLISHED => "ESTAB",
            SYN_SENT => "SYN-SENT",
            SYN_RECV => "SYN-RECV",
            FIN_WAIT1 => "FIN-WAIT-1",
            FIN_WAIT2 => "FIN-WAIT-2",
            TIME_WAIT => "TIME-WAIT",
            CLOSE => "UNCONN",
            CLOSE_WAIT => "CLOSE-WAIT",
            LAST_ACK => "LAST-ACK",
            LISTEN => "LISTEN",
            CLOSING => "CLOSING",
            NEW_SYN_RECV => "NEW-SYN-RECV",
            _ => "UNKNOWN",
        }
    }
}

/// Address family selector of a dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
    /// Both families in one dump (the compat `TCPDIAG_GETSOCK` request):
    /// the kernel walks its socket hash once instead of once per family,
    /// which is most of a dump's cost on a host with a large hash.
    Any,
}

impl Family {
    fn raw(self) -> u8 {
        match self {
            Family::V4 => libc::AF_INET as u8,
            Family::V6 => libc::AF_INET6 as u8,
            Family::Any => libc::AF_UNSPEC as u8,
        }
    }
}

/// What to dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpRequest {
    /// Bit mask of [`state`]s (`state::bit(..)`).
    pub states: u32,
    /// Bit mask of [`ext`] attributes to include.
    pub ext: u8,
    /// Kernel-side filter: only sockets with this port (on the side chosen
    /// by `port_side`). `None` dumps all.
    pub port: Option<u16>,
    /// Which port `port` is compared with.
    pub port_side: PortSide,
    /// Which families (one dump each).
    pub families: Vec<Family>,
}

impl Default for DumpRequest {
    /// Connected TCP sockets of both families (one dump), with `tcp_info`
    /// and the congestion control name.
    fn default() -> Self {
        DumpRequest {
            states: state::CONNECTED,
            ext: ext::INFO | ext::CONG,
            port: None,
            port_side: PortSide::Either,
            families: vec![Family::Any],
        }
    }
}

/// Which end's port a [`DumpRequest::port`] filter compares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PortSide {
    /// Local or remote port.
    #[default]
    Either,
    /// Local (source) port only.
    Local,
    /// Remote (destination) port only: e.g. the client sockets of a server,
    /// without the server's accepted sockets on the same host.
    Remote,
}

/// One raw netlink attribute of an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    pub kind: u16,
    pub data: Vec<u8>,
}

/// One socket of a dump (`struct inet_diag_msg` plus its attributes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiagSocket {
    /// `AF_INET` or `AF_INET6`.
    pub family: u8,
    /// TCP state, see [`state`].
    pub state: u8,
    pub timer: u8,
    pub retrans: u8,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub if_index: u32,
    /// The kernel's socket cookie (stable identity while the socket lives).
    pub cookie: u64,
    pub expires_ms: u32,
    /// Receive queue bytes (unread) or, for LISTEN, the accept backlog.
    pub rqueue: u32,
    /// Send queue bytes (unacked) or, for LISTEN, the backlog limit.
    pub wqueue: u32,
    pub uid: u32,
    /// Inode of the socket, as `/proc/PID/fd/*` links show `socket:[inode]`.
    pub inode: u32,
    /// Every attribute the kernel sent, in order.
    pub attrs: Vec<Attr>,
}

impl DiagSocket {
    /// The payload of the first attribute of type `kind`.
    pub fn attr(&self, kind: u16) -> Option<&[u8]> {
        self.attrs.iter().find(|a| a.kind == kind).map(|a| a.data.as_slice())
    }
    /// Raw `struct tcp_info` bytes (`INET_DIAG_INFO`), of the kernel's length.
    pub fn tcp_info_raw(&self) -> Option<&[u8]> {
        self.attr(attr::INFO)
    }
    /// The decoded `tcp_info` (by length, see [`crate::tcpinfo`]); `None` when
    /// the attribute is missing or shorter than the base structure.
    pub fn tcp_info(&self) -> Option<crate::tcpinfo::TcpInfo> {
        self.tcp_info_raw().and_then(|b| crate::tcpinfo::TcpInfo::parse(b).ok())
    }
    /// Congestion control name (`INET_DIAG_CONG`).
    pub fn congestion(&self) -> Option<String> {
        self.attr(attr::CONG).map(c_string)
    }
    /// ULP name (`INET_DIAG_ULP_INFO` / `INET_DIAG_ULP_INFO_NAME`), e.g. "mptcp"
    /// for an MPTCP subflow.
    pub fn ulp_name(&self) -> Option<String> {
        let nested = self.attr(attr::ULP_INFO)?;
        let mut name = None;
        for a in attrs(nested) {
            match a {
                Ok((1, data)) => {
                    name = Some(c_string(data));
                    break;
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        name
    }
    /// The raw nested payload of the ULP's own info (`INET_DIAG_ULP_INFO_MPTCP`
    /// = 3 for MPTCP subflows: tokens, ids, flags), for callers that decode it.
    pub fn ulp_info_raw(&self, nested_kind: u16) -> Option<&[u8]> {
        let nested = self.attr(attr::ULP_INFO)?;
        attrs(nested).filter_map(|a| a.ok()).find(|(k, _)| *k == nested_kind).map(|(_, d)| d)
    }
}

/// Why a netlink answer could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("netlink message header truncated at byte {at} of {len}")]
    TruncatedHeader { at: usize, len: usize },
    #[error("netlink message at byte {at} claims length {claimed}, {left} bytes left")]
    BadLength { at: usize, claimed: usize, left: usize },
    #[error("inet_diag_msg too short: {len} bytes, need {DIAG_MSG_LEN}")]
    ShortDiagMsg { len: usize },
    #[error("netlink attribute malformed at byte {at}")]
    BadAttr { at: usize },
    #[error("unexpected netlink message type {kind}")]
    UnexpectedType { kind: u16 },
    #[error("kernel error {errno} in the dump")]
    Kernel { errno: i32 },
    #[error("unknown address family {family}")]
    BadFamily { family: u8 },
}

/// Where a dump is after one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// More datagrams follow.
    More,
    /// `NLMSG_DONE` seen; `interrupted` when the kernel flagged the dump as
    /// inconsistent (sockets changed during it; the result is still usable).
    Done { interrupted: bool },
}

fn u16_be(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2).map(|s| u16::from_be_bytes([s[0], s[1]]))
}

/// The shared attribute walker, with this module's error type.
fn attrs(buf: &[u8]) -> impl Iterator<Item = std::result::Result<(u16, &[u8]), ParseError>> {
    Attrs::new(buf).map(|r| r.map_err(|at| ParseError::BadAttr { at }))
}

fn sockaddr(family: u8, id: &[u8], port_at: usize, addr_at: usize) -> Option<SocketAddr> {
    let port = u16_be(id, port_at)?;
    let a = id.get(addr_at..addr_at + 16)?;
    let ip = if family == libc::AF_INET as u8 {
        IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))
    } else {
        let mut o = [0u8; 16];
        o.copy_from_slice(a);
        IpAddr::V6(Ipv6Addr::from(o))
    };
    Some(SocketAddr::new(ip, port))
}

/// Decodes one `inet_diag_msg` payload (after the netlink header).
pub fn parse_diag_msg(p: &[u8]) -> std::result::Result<DiagSocket, ParseError> {
    if p.len() < DIAG_MSG_LEN {
        return Err(ParseError::ShortDiagMsg { len: p.len() });
    }
    let family = p[0];
    if family != libc::AF_INET as u8 && family != libc::AF_INET6 as u8 {
        return Err(ParseError::BadFamily { family });
    }
    let id = &p[4..4 + SOCKID_LEN];
    // inet_diag_sockid: sport be16 @0, dport be16 @2, src[16] @4, dst[16] @20,
    // if u32 @36, cookie u32[2] @40.
    let short = ParseError::ShortDiagMsg { len: p.len() };
    let src = sockaddr(family, id, 0, 4).ok_or(short.clone())?;
    let dst = sockaddr(family, id, 2, 20).ok_or(short.clone())?;
    let if_index = u32_ne(id, 36).ok_or(short.clone())?;
    let c0 = u32_ne(id, 40).ok_or(short.clone())? as u64;
    let c1 = u32_ne(id, 44).ok_or(short.clone())? as u64;
    let tail = 4 + SOCKID_LEN;
    let field = |i: usize| u32_ne(p, tail + 4 * i).ok_or(short.clone());
    let mut s = DiagSocket {
        family,
        state: p[1],
        timer: p[2],
        retrans: p[3],
        src,
        dst,
        if_index,
        cookie: c0 | (c1 << 32),
        expires_ms: field(0)?,
        rqueue: field(1)?,
        wqueue: field(2)?,
        uid: field(3)?,
        inode: field(4)?,
        attrs: Vec::new(),
    };
    for a in attrs(&p[DIAG_MSG_LEN..]) {
        let (kind, data) = a.map_err(|e| match e {
            ParseError::BadAttr { at } => ParseError::BadAttr { at: at + DIAG_MSG_LEN },
            e => e,
        })?;
        s.attrs.push(Attr { kind, data: data.to_vec() });
    }
    Ok(s)
}

/// Decodes one datagram of a dump answer, appending sockets to `out`.
/// Messages whose sequence number is not `seq` (stale answers) are skipped.
pub fn parse_datagram(
    buf: &[u8],
    seq: u32,
    out: &mut Vec<DiagSocket>,
) -> std::result::Result<Progress, ParseError> {
    let mut at = 0;
    let mut interrupted = false;
    while at < buf.len() {
        let left = buf.len() - at;
        if left < NLMSG_HDRLEN {
            return Err(ParseError::TruncatedHeader { at, len: buf.len() });
        }
        let trunc = ParseError::TruncatedHeader { at, len: buf.len() };
        let len = u32_ne(buf, at).ok_or(trunc.clone())? as usize;
        let kind = u16_ne(buf, at + 4).ok_or(trunc.clone())?;
        let flags = u16_ne(buf, at + 6).ok_or(trunc.clone())?;
        let mseq = u32_ne(buf, at + 8).ok_or(trunc)?;
        if len < NLMSG_HDRLEN || len > left {
            return Err(ParseError::BadLength { at, claimed: len, left });
        }
        let payload = &buf[at + NLMSG_HDRLEN..at + len];
        interrupted |= flags & NLM_F_DUMP_INTR != 0;
        at += align4(len).min(left);
        if mseq != seq {
            continue;
        }
        match kind {
            NLMSG_DONE => return Ok(Progress::Done { interrupted }),
            NLMSG_ERROR => {
                let e = payload
                    .get(0..4)
                    .map(|s| i32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
                    .unwrap_or(-libc::EPROTO);
                if e == 0 {
                    // An ACK, not an error; dumps end with DONE.
                    continue;
                }
                return Err(ParseError::Kernel { errno: -e });
            }
            SOCK_DIAG_BY_FAMILY | TCPDIAG_GETSOCK => out.push(parse_diag_msg(payload)?),
            other => return Err(ParseError::UnexpectedType { kind: other }),
        }
    }
    Ok(Progress::More)
}

/// Calls `f(type, seq, payload)` for each netlink message of a datagram,
/// with the same length checks as [`parse_datagram`].
fn for_each_message(
    buf: &[u8],
    mut f: impl FnMut(u16, u32, &[u8]) -> std::result::Result<(), ParseError>,
) -> std::result::Result<(), ParseError> {
    let mut at = 0;
    while at < buf.len() {
        let left = buf.len() - at;
        let trunc = ParseError::TruncatedHeader { at, len: buf.len() };
        if left < NLMSG_HDRLEN {
            return Err(trunc);
        }
        let len = u32_ne(buf, at).ok_or(trunc.clone())? as usize;
        let kind = u16_ne(buf, at + 4).ok_or(trunc.clone())?;
        let seq = u32_ne(buf, at + 8).ok_or(trunc)?;
        if len < NLMSG_HDRLEN || len > left {
            return Err(ParseError::BadLength { at, claimed: len, left });
        }
        f(kind, seq, &buf[at + NLMSG_HDRLEN..at + len])?;
        at += align4(len).min(left);
    }
    Ok(())
}

/// The in-kernel filter "source port == P or destination port == P".
///
/// `inet_diag_bc_run` follows `yes`/`no` jumps: landing exactly on the end
/// accepts, one op past it rejects. `inet_diag_bc_audit` also insists that
/// every `no` target lies on the chain of `yes` jumps, hence the JMP op
/// between the two tests (JMP always takes `no`), as `ss` builds an OR.
fn port_bytecode(port: u16, side: PortSide) -> Vec<u8> {
    let op = |code: u8, yes: u8, no: u16| {
        let mut v = vec![code, yes];
        v.extend_from_slice(&no.to_ne_bytes());
        v
    };
    let mut bc = Vec::with_capacity(20);
    match side {
        PortSide::Either => {
            bc.extend(op(BC_S_EQ, 8, 12)); // @0: sport == P → JMP @8; else → @12
            bc.extend(op(BC_NOP, 0, port)); // @4: carrier of P
            bc.extend(op(BC_JMP, 4, 12)); // @8: → @20, the end: accept
            bc.extend(op(BC_D_EQ, 8, 12)); // @12: dport == P → @20 accept; else → @24 reject
            bc.extend(op(BC_NOP, 0, port)); // @16: carrier of P
        }
        PortSide::Local | PortSide::Remote => {
            let code = if side == PortSide::Local { BC_S_EQ } else { BC_D_EQ };
            bc.extend(op(code, 8, 12)); // @0: match → @8, the end: accept; else → @12 reject
            bc.extend(op(BC_NOP, 0, port)); // @4: carrier of P
        }
    }
    bc
}

/// Encodes one dump request for TCP: `SOCK_DIAG_BY_FAMILY` with
/// `inet_diag_req_v2` for one family, or `TCPDIAG_GETSOCK` with the compat
/// `inet_diag_req` for [`Family::Any`].
pub fn encode_request(family: Family, req: &DumpRequest, seq: u32) -> Vec<u8> {
    let bc = req.port.map(|p| port_bytecode(p, req.port_side));
    let attr_len = bc.as_ref().map(|b| align4(4 + b.len())).unwrap_or(0);
    let (kind, body) = if family == Family::Any {
        (TCPDIAG_GETSOCK, REQ_COMPAT_LEN)
    } else {
        (SOCK_DIAG_BY_FAMILY, REQ_V2_LEN)
    };
    let total = NLMSG_HDRLEN + body + attr_len;
    let mut m = Vec::with_capacity(total);
    m.extend_from_slice(&(total as u32).to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes()); // pid: kernel fills in
    if family == Family::Any {
        // inet_diag_req: family, src_len, dst_len, ext, id, states, dbs.
        m.extend_from_slice(&[family.raw(), 0, 0, req.ext]);
        m.extend_from_slice(&[0u8; SOCKID_LEN]);
        m.extend_from_slice(&req.states.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
    } else {
        m.push(family.raw());
        m.push(libc::IPPROTO_TCP as u8);
        m.push(req.ext);
        m.push(0);
        m.extend_from_slice(&req.states.to_ne_bytes());
        m.extend_from_slice(&[0u8; SOCKID_LEN]); // wildcard id
    }
    if let Some(bc) = bc {
        m.extend_from_slice(&((4 + bc.len()) as u16).to_ne_bytes());
        m.extend_from_slice(&INET_DIAG_REQ_BYTECODE.to_ne_bytes());
        m.extend_from_slice(&bc);
        m.resize(total, 0);
    }
    m
}

/// Encodes the `inet_diag_sockid` that names socket `s` exactly: ports,
/// addresses, interface and cookie, as the dump reported them.
fn encode_sockid(s: &DiagSocket, m: &mut Vec<u8>) {
    m.extend_from_slice(&s.src.port().to_be_bytes());
    m.extend_from_slice(&s.dst.port().to_be_bytes());
    for a in [s.src.ip(), s.dst.ip()] {
        let mut b = [0u8; 16];
        match a {
            IpAddr::V4(v4) => b[..4].copy_from_slice(&v4.octets()),
            IpAddr::V6(v6) => b = v6.octets(),
        }
        m.extend_from_slice(&b);
    }
    m.extend_from_slice(&s.if_index.to_ne_bytes());
    m.extend_from_slice(&(s.cookie as u32).to_ne_bytes());
    m.extend_from_slice(&((s.cookie >> 32) as u32).to_ne_bytes());
}

/// Encodes one exact (non-dump) request for socket `s` (as a dump returned it).
pub fn encode_exact(s: &DiagSocket, ext: u8, seq: u32) -> Vec<u8> {
    let total = NLMSG_HDRLEN + REQ_V2_LEN;
    let mut m = Vec::with_capacity(total);
    m.extend_from_slice(&(total as u32).to_ne_bytes());
    m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.push(s.family);
    m.push(libc::IPPROTO_TCP as u8);
    m.push(ext);
    m.push(0);
    m.extend_from_slice(&state::ALL.to_ne_bytes());
    encode_sockid(s, &mut m);
    m
}

/// Requests per datagram in [`DiagSocketConn::query_into`]: their answers
/// (~1–2 KB of receive buffer each) must fit the default socket buffer.
const QUERY_BATCH: usize = 32;

/// A `NETLINK_SOCK_DIAG` socket bound to the namespace it was opened in.
pub struct DiagSocketConn {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
}

/// Receive buffer: the kernel caps dump datagrams near 32 KiB
/// (`netlink_dump`, `max_recvmsg_len`); twice that leaves room.
const RECV_BUF: usize = 64 * 1024;

impl DiagSocketConn {
    /// Opens a diag socket in the calling thread's network namespace.
    pub fn open() -> Result<Self> {
        // SAFETY: plain socket(2); the result is checked and owned at once.
        let fd = unsafe {
            libc::socket(libc::AF_NETLINK, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, libc::NETLINK_SOCK_DIAG)
        };
        if fd < 0 {
            return Err(Error::last("socket(AF_NETLINK, NETLINK_SOCK_DIAG)"));
        }
        // SAFETY: fd is fresh, valid and owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // A dump that never ends (should not happen) must not hang a sampler.
        let tv = libc::timeval { tv_sec: 2, tv_usec: 0 };
        // SAFETY: tv is a valid timeval that outlives the call; the length
        // passed is its size.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(Error::last("setsockopt(SO_RCVTIMEO) on sock_diag socket"));
        }
        Ok(DiagSocketConn { fd, seq: 0, buf: vec![0; RECV_BUF] })
    }

    fn send(&self, msg: &[u8]) -> Result<()> {
        // SAFETY: an all-zero sockaddr_nl is valid (pid 0 = the kernel).
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: msg and sa are valid for the lengths given for the whole call.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                msg.as_ptr().cast(),
                msg.len(),
                0,
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(Error::last("sendto(sock_diag dump request)"));
        }
        Ok(())
    }

    fn recv(&mut self) -> Result<usize> {
        loop {
            // SAFETY: buf is valid for writes of its full length.
            let n = unsafe {
                libc::recv(self.fd.as_raw_fd(), self.buf.as_mut_ptr().cast(), self.buf.len(), libc::MSG_TRUNC)
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return Err(Error::os("recv(sock_diag dump)", e));
            }
            let n = n as usize;
            if n > self.buf.len() {
                return Err(Error::Other {
                    op: "recv(sock_diag dump)".into(),
                    msg: format!("datagram of {n} bytes exceeds the {} byte buffer", self.buf.len()),
                });
            }
            return Ok(n);
        }
    }

    /// Runs the dump(s) of `req` and appends every socket to `out` (cleared
    /// first). Returns whether any family's dump was flagged inconsistent.
    pub fn dump_into(&mut self, req: &DumpRequest, out: &mut Vec<DiagSocket>) -> Result<bool> {
        out.clear();
        let mut interrupted = false;
        for &family in &req.families {
            self.seq = self.seq.wrapping_add(1);
            let seq = self.seq;
            self.send(&encode_request(family, req, seq))?;
            loop {
                let n = self.recv()?;
                match parse_datagram(&self.buf[..n], seq, out) {
                    Ok(Progress::More) => {}
                    Ok(Progress::Done { interrupted: i }) => {
                        interrupted |= i;
                        break;
                    }
                    // An IPv6 dump on a kernel without IPv6 answers ENOENT or
                    // EAFNOSUPPORT: that family simply has no sockets.
                    Err(ParseError::Kernel { errno })
                        if family == Family::V6 && (errno == libc::ENOENT || errno == libc::EAFNOSUPPORT) =>
                    {
                        break
                    }
                    Err(ParseError::Kernel { errno }) => {
                        return Err(Error::os("sock_diag dump", std::io::Error::from_raw_os_error(errno)))
                    }
                    Err(e) => return Err(Error::Other { op: "sock_diag dump".into(), msg: e.to_string() }),
                }
            }
        }
        Ok(interrupted)
    }

    /// Asks for each socket of `known` by its exact identity (port pair,
    /// addresses, interface, cookie), many requests per datagram, and
    /// appends the answers to `out` (cleared first). Sockets that have gone
    /// are left out and counted in the return value.
    ///
    /// Why: a dump walks the kernel's whole established hash (262 144
    /// buckets on a host with a few GB of RAM) whatever it matches; exact
    /// lookups cost per socket only, so re-sampling sockets already found
    /// by a dump is cheaper when the hash is large.
    pub fn query_into(&mut self, known: &[DiagSocket], ext: u8, out: &mut Vec<DiagSocket>) -> Result<usize> {
        out.clear();
        let mut gone = 0;
        for chunk in known.chunks(QUERY_BATCH) {
            let first = self.seq.wrapping_add(1);
            let mut msg = Vec::with_capacity(chunk.len() * (NLMSG_HDRLEN + REQ_V2_LEN));
            for s in chunk {
                self.seq = self.seq.wrapping_add(1);
                msg.extend(encode_exact(s, ext, self.seq));
            }
            self.send(&msg)?;
            let mut answered = 0;
            while answered < chunk.len() {
                let n = self.recv()?;
                let mut got = Vec::new();
                for_each_message(&self.buf[..n], |kind, seq, payload| {
                    // Only answers to this batch count; stale ones are dropped.
                    if seq.wrapping_sub(first) as usize >= chunk.len() {
                        return Ok(());
                    }
                    answered += 1;
                    match kind {
                        SOCK_DIAG_BY_FAMILY => got.push(parse_diag_msg(payload)?),
                        NLMSG_ERROR => gone += 1,
                        other => return Err(ParseError::UnexpectedType { kind: other }),
                    }
                    Ok(())
                })
                .map_err(|e| Error::Other { op: "sock_diag query".into(), msg: e.to_string() })?;
                out.append(&mut got);
            }
        }
        Ok(gone)
    }

    /// Convenience: one dump, returned as a fresh vector.
    pub fn dump(&mut self, req: &DumpRequest) -> Result<Vec<DiagSocket>> {
        let mut v = Vec::new();
        self.dump_into(req, &mut v)?;
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NLM_F_MULTI: u16 = 0x2;

    fn nlmsg(kind: u16, flags: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let len = NLMSG_HDRLEN + payload.len();
        let mut m = Vec::new();
        m.extend_from_slice(&(len as u32).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&flags.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(payload);
        m.resize(align4(m.len()), 0);
        m
    }

    fn rtattr(kind: u16, data: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&((4 + data.len()) as u16).to_ne_bytes());
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(data);
        a.resize(align4(a.len()), 0);
        a
    }

    fn diag_msg_v4(sport: u16, dport: u16, inode: u32, attrs: &[u8]) -> Vec<u8> {
        let mut p = vec![libc::AF_INET as u8, state::ESTABLISHED, 0, 0];
        p.extend_from_slice(&sport.to_be_bytes());
        p.extend_from_slice(&dport.to_be_bytes());
        let mut src = [0u8; 16];
        src[..4].copy_from_slice(&[127, 0, 0, 1]);
        let mut dst = [0u8; 16];
        dst[..4].copy_from_slice(&[10, 1, 2, 3]);
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(&7u32.to_ne_bytes()); // if
        p.extend_from_slice(&0x1111u32.to_ne_bytes());
        p.extend_from_slice(&0x2u32.to_ne_bytes());
        for v in [0u32, 5, 6, 1000, inode] {
            p.extend_from_slice(&v.to_ne_bytes());
        }
        p.extend_from_slice(attrs);
        p
    }

    #[test]
    fn request_layout() {
        let r =
            encode_request(Family::V4, &DumpRequest { families: vec![Family::V4], ..Default::default() }, 9);
        assert_eq!(r.len(), NLMSG_HDRLEN + REQ_V2_LEN);
        assert_eq!(u32_ne(&r, 0), Some(r.len() as u32));
        assert_eq!(u16_ne(&r, 4), Some(SOCK_DIAG_BY_FAMILY));
        assert_eq!(u32_ne(&r, 8), Some(9));
        assert_eq!(r[16], libc::AF_INET as u8);
        assert_eq!(r[17], libc::IPPROTO_TCP as u8);
        assert_eq!(r[18], ext::INFO | ext::CONG);
        let with_port =
            encode_request(Family::V6, &DumpRequest { port: Some(5201), ..Default::default() }, 1);
        assert_eq!(with_port.len(), NLMSG_HDRLEN + REQ_V2_LEN + 4 + 20);
        assert_eq!(u16_ne(&with_port, NLMSG_HDRLEN + REQ_V2_LEN + 2), Some(INET_DIAG_REQ_BYTECODE));
        let any = encode_request(Family::Any, &DumpRequest::default(), 2);
        assert_eq!(any.len(), NLMSG_HDRLEN + 60);
        assert_eq!(u16_ne(&any, 4), Some(TCPDIAG_GETSOCK));
        assert_eq!((any[16], any[19]), (libc::AF_UNSPEC as u8, ext::INFO | ext::CONG));
        assert_eq!(u32_ne(&any, 16 + 52), Some(state::CONNECTED));
    }

    #[test]
    fn parses_a_socket_with_attributes() {
        let mut attrs = rtattr(attr::CONG, b"cubic\0");
        attrs.extend(rtattr(attr::INFO, &[1u8; 232]));
        let ulp = rtattr(1, b"mptcp\0");
        attrs.extend(rtattr(attr::ULP_INFO | 0x8000, &ulp));
        let mut dg = nlmsg(SOCK_DIAG_BY_FAMILY, NLM_F_MULTI, 4, &diag_msg_v4(40000, 5201, 77, &attrs));
        dg.extend(nlmsg(NLMSG_DONE, NLM_F_MULTI, 4, &0i32.to_ne_bytes()));
        let mut out = Vec::new();
        assert_eq!(parse_datagram(&dg, 4, &mut out), Ok(Progress::Done { interrupted: false }));
        assert_eq!(out.len(), 1);
        let s = &out[0];
        assert_eq!(s.src, "127.0.0.1:40000".parse().unwrap());
        assert_eq!(s.dst, "10.1.2.3:5201".parse().unwrap());
        assert_eq!((s.rqueue, s.wqueue, s.uid, s.inode), (5, 6, 1000, 77));
        assert_eq!(s.cookie, 0x2_0000_1111);
        assert_eq!(s.if_index, 7);
        assert_eq!(s.congestion().as_deref(), Some("cubic"));
        assert_eq!(s.tcp_info_raw().map(|b| b.len()), Some(232));
        assert_eq!(s.ulp_name().as_deref(), Some("mptcp"));
    }

    #[test]
    fn skips_other_sequences_and_reports_errors() {
        let mut dg = nlmsg(SOCK_DIAG_BY_FAMILY, 0, 3, &diag_msg_v4(1, 2, 3, &[]));
        dg.extend(nlmsg(NLMSG_ERROR, 0, 5, &(-libc::EPERM).to_ne_bytes()));
        let mut out = Vec::new();
        assert_eq!(parse_datagram(&dg, 5, &mut out), Err(ParseError::Kernel { errno: libc::EPERM }));
        assert!(out.is_empty());
    }

    #[test]
    fn truncated_and_odd_messages_never_panic() {
        let mut attrs = rtattr(attr::CONG, b"bbr\0");
        attrs.extend(rtattr(attr::INFO, &[9u8; 100]));
        let mut good = nlmsg(SOCK_DIAG_BY_FAMILY, NLM_F_MULTI, 1, &diag_msg_v4(1, 2, 3, &attrs));
        good.extend(nlmsg(NLMSG_DONE, NLM_F_MULTI, 1, &[0; 4]));
        // Every prefix of a valid datagram.
        for cut in 0..good.len() {
            let mut out = Vec::new();
            let _ = parse_datagram(&good[..cut], 1, &mut out);
        }
        // Every single-byte corruption, with a few values.
        let mut rng = tcpaccel_rng(12345);
        for i in 0..good.len() {
            for v in [0u8, 1, 3, 0x7f, 0xff] {
                let mut b = good.clone();
                b[i] = v;
                let mut out = Vec::new();
                let _ = parse_datagram(&b, 1, &mut out);
            }
        }
        // Random garbage.
        for _ in 0..2000 {
            let len = (rng() % 300) as usize;
            let b: Vec<u8> = (0..len).map(|_| rng() as u8).collect();
            let mut out = Vec::new();
            let _ = parse_datagram(&b, 0, &mut out);
        }
        // Specific odd cases come back as errors.
        let mut out = Vec::new();
        assert!(matches!(parse_datagram(&[0u8; 10], 1, &mut out), Err(ParseError::TruncatedHeader { .. })));
        let short = nlmsg(SOCK_DIAG_BY_FAMILY, 0, 1, &[2u8; 20]);
        assert!(matches!(parse_datagram(&short, 1, &mut out), Err(ParseError::ShortDiagMsg { .. })));
        let mut huge = good.clone();
        huge[0..4].copy_from_slice(&10_000u32.to_ne_bytes());
        assert!(matches!(parse_datagram(&huge, 1, &mut out), Err(ParseError::BadLength { .. })));
        let bad_attr = nlmsg(SOCK_DIAG_BY_FAMILY, 0, 1, &diag_msg_v4(1, 2, 3, &[200, 0, 2, 0, 1, 1]));
        assert!(matches!(parse_datagram(&bad_attr, 1, &mut out), Err(ParseError::BadAttr { .. })));
    }

    #[test]
    fn exact_queries_find_known_sockets_and_count_gone_ones() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let port = l.local_addr().expect("local addr").port();
        let mut keep = Vec::new();
        for _ in 0..40 {
            let c = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
            let (s, _) = l.accept().expect("accept");
            keep.push((c, s));
        }
        let mut d = DiagSocketConn::open().expect("open sock_diag");
        let req = DumpRequest { port: Some(port), port_side: PortSide::Remote, ..Default::default() };
        let known = d.dump(&req).expect("dump");
        assert_eq!(known.len(), 40);
        let mut out = Vec::new();
        assert_eq!(d.query_into(&known, ext::INFO | ext::CONG, &mut out).expect("query"), 0);
        assert_eq!(out.len(), 40, "two datagrams of requests, every socket answered");
        let mut a: Vec<_> = known.iter().map(|s| (s.src, s.dst, s.inode)).collect();
        let mut b: Vec<_> = out.iter().map(|s| (s.src, s.dst, s.inode)).collect();
        a.sort();
        b.sort();
        assert_eq!(a, b);
        assert!(out.iter().all(|s| s.tcp_info().is_some() && s.congestion().is_some()));
        // Close one connection completely: its client socket is gone (or in
        // TIME_WAIT, answered without tcp_info).
        let gone_src = known[0].src;
        keep.retain(|(c, _)| c.local_addr().ok() != Some(gone_src));
        std::thread::sleep(std::time::Duration::from_millis(50));
        let n_gone = d.query_into(&known, ext::INFO, &mut out).expect("query");
        let alive = out.iter().filter(|s| s.tcp_info().is_some() && s.state != state::TIME_WAIT).count();
        assert_eq!(alive, 39, "gone={n_gone}");
        assert_eq!(n_gone + out.len(), 40);
    }

    /// A tiny xorshift for the fuzz loop (the sys crate does not depend on core).
    fn tcpaccel_rng(seed: u64) -> impl FnMut() -> u64 {
        let mut x = seed;
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    #[test]
    fn live_dump_sees_a_loopback_connection() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let port = l.local_addr().expect("local addr").port();
        let c = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect loopback");
        let (_s, _) = l.accept().expect("accept");
        let mut d = DiagSocketConn::open().expect("open sock_diag");
        let v4v6 = vec![Family::V4, Family::V6];
        for req in [
            DumpRequest::default(),
            DumpRequest { port: Some(port), ..Default::default() },
            DumpRequest { families: v4v6.clone(), ..Default::default() },
            DumpRequest { port: Some(port), families: v4v6, ..Default::default() },
        ] {
            let socks = d.dump(&req).unwrap_or_else(|e| panic!("dump {req:?}: {e}"));
            let mine: Vec<_> =
                socks.iter().filter(|s| s.src.port() == port || s.dst.port() == port).collect();
            assert_eq!(mine.len(), 2, "client and server side of the connection");
            assert!(mine.iter().all(|s| s.state == state::ESTABLISHED));
            assert!(mine.iter().all(|s| s.tcp_info_raw().map(|b| b.len() >= 104).unwrap_or(false)));
            assert!(mine.iter().any(|s| s.src == c.local_addr().unwrap()));
            assert!(mine.iter().all(|s| s.tcp_info().map(|t| t.snd_cwnd > 0).unwrap_or(false)));
            if req.port.is_some() {
                assert_eq!(socks.len(), 2, "bytecode filter leaves only this connection");
            }
        }
        for (side, want) in
            [(PortSide::Remote, c.local_addr().unwrap()), (PortSide::Local, _s.local_addr().unwrap())]
        {
            let req = DumpRequest { port: Some(port), port_side: side, ..Default::default() };
            let socks = d.dump(&req).expect("dump");
            assert_eq!(socks.len(), 1, "{side:?}: {socks:?}");
            assert_eq!(socks[0].src, want, "{side:?}");
        }
    }
}
