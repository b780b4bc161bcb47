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

use crate::netlink::{
    self, c_string, emit_message, u32_ne, Answer, AttrBuf, NlSocket, NLMSG_ERROR, NLMSG_HDRLEN, NLM_F_DUMP,
    NLM_F_DUMP_INTR, NLM_F_REQUEST,
};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use crate::{Error, Result};

/// Why an answer could not be decoded (the netlink layer's error).
pub use crate::netlink::ParseError;

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
    /// The types named here; others are counted by
    /// [`DiagSocket::unknown_attrs`](super::DiagSocket::unknown_attrs).
    pub const KNOWN: &[u16] = &[
        MEMINFO, INFO, VEGASINFO, CONG, TOS, TCLASS, SKMEMINFO, SHUTDOWN, DCTCPINFO, PROTOCOL, SKV6ONLY,
        MARK, BBRINFO, ULP_INFO, CGROUP_ID, SOCKOPT,
    ];
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
    /// Where the payload starts in the `inet_diag_msg` (counted like
    /// [`parse_diag_msg`]'s error offsets, so that errors of a nested walk
    /// inside it name bytes of the message).
    pub at: usize,
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
    /// How many of [`attrs`](DiagSocket::attrs) are of a type this module
    /// does not name (kept, but nothing here reads them).
    pub fn unknown_attrs(&self) -> usize {
        self.attrs.iter().filter(|a| !attr::KNOWN.contains(&a.kind)).count()
    }
    /// The payload of the first attribute of type `kind`.
    pub fn attr(&self, kind: u16) -> Option<&[u8]> {
        self.attrs.iter().find(|a| a.kind == kind).map(|a| a.data.as_slice())
    }
    /// Raw `struct tcp_info` bytes (`INET_DIAG_INFO`), of the kernel's length.
    pub fn tcp_info_raw(&self) -> Option<&[u8]> {
        self.attr(attr::INFO)
    }
    /// The decoded `tcp_info` (by length, see [`crate::tcpinfo`]); `None` when
    /// the attribute is missing. [`parse_diag_msg`] refuses a message whose
    /// `tcp_info` is shorter than the base structure, so a parsed socket's
    /// attribute always decodes.
    pub fn tcp_info(&self) -> Option<crate::tcpinfo::TcpInfo> {
        self.tcp_info_raw().and_then(|b| crate::tcpinfo::TcpInfo::parse(b).ok())
    }
    /// Congestion control name (`INET_DIAG_CONG`).
    pub fn congestion(&self) -> Option<String> {
        self.attr(attr::CONG).map(c_string)
    }
    /// The first attribute of type `kind` with its payload's offset.
    fn attr_at(&self, kind: u16) -> Option<(usize, &[u8])> {
        self.attrs.iter().find(|a| a.kind == kind).map(|a| (a.at, a.data.as_slice()))
    }
    /// The first attribute of type `nested_kind` inside `INET_DIAG_ULP_INFO`,
    /// with its payload's offset in the `inet_diag_msg`. `Ok(None)` when
    /// either is absent; a malformed nested attribute met before it is the
    /// error, at its offset in the `inet_diag_msg`.
    fn ulp_attr(&self, nested_kind: u16) -> std::result::Result<Option<(usize, &[u8])>, ParseError> {
        let Some((at, nested)) = self.attr_at(attr::ULP_INFO) else { return Ok(None) };
        for a in netlink::attrs(nested, "INET_DIAG_ULP_INFO").at_offset(at).with_offsets() {
            let (at, kind, data) = a?;
            if kind == nested_kind {
                return Ok(Some((at, data)));
            }
        }
        Ok(None)
    }
    /// ULP name (`INET_DIAG_ULP_INFO` / `INET_DIAG_ULP_INFO_NAME`), e.g. "mptcp"
    /// for an MPTCP subflow; `Ok(None)` for a socket without a ULP. Error
    /// offsets count from the start of the `inet_diag_msg` (see
    /// [`ParseError::shifted`] to place them in the datagram).
    pub fn ulp_name(&self) -> std::result::Result<Option<String>, ParseError> {
        Ok(self.ulp_attr(ULP_INFO_NAME)?.map(|(_, d)| c_string(d)))
    }
    /// The raw nested payload of the ULP's own info (`INET_DIAG_ULP_INFO_MPTCP`
    /// = 3 for MPTCP subflows: tokens, ids, flags), for callers that decode it.
    /// Errors as [`ulp_name`](DiagSocket::ulp_name)'s.
    pub fn ulp_info_raw(&self, nested_kind: u16) -> std::result::Result<Option<&[u8]>, ParseError> {
        Ok(self.ulp_attr(nested_kind)?.map(|(_, d)| d))
    }
}

/// What sock_diag says of an MPTCP subflow (`INET_DIAG_ULP_INFO_MPTCP`,
/// `MPTCP_SUBFLOW_ATTR_*` in include/uapi/linux/mptcp.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MptcpSubflow {
    /// The connection's local token: the one path-manager commands take.
    pub token_loc: u32,
    pub token_rem: u32,
    /// `MPTCP_SUBFLOW_FLAG_*` (see [`subflow_flags`]).
    pub flags: u32,
    pub id_loc: u8,
    pub id_rem: u8,
    /// Attributes passed over: unknown types, and known ones of an odd size
    /// (whose field then stays 0).
    pub skipped: netlink::Skipped,
}

/// `MPTCP_SUBFLOW_FLAG_*` bits of [`MptcpSubflow::flags`].
pub mod subflow_flags {
    /// The peer's MP_CAPABLE was received (`mp_capable`): set on the
    /// initial subflow at both ends, the only sign of it on the accepting end.
    pub const MCAP_REM: u32 = 1 << 0;
    /// This end sent MP_CAPABLE (`request_mptcp` in net/mptcp/diag.c): the
    /// initial subflow on the side that connected only; the accepting
    /// side's initial subflow lacks it (see the captured dump's test).
    pub const MCAP_LOC: u32 = 1 << 1;
    /// The peer's MP_JOIN was received: a join subflow, at either end.
    pub const JOIN_REM: u32 = 1 << 2;
    pub const JOIN_LOC: u32 = 1 << 3;
    pub const BKUP_REM: u32 = 1 << 4;
    /// This host marked the subflow backup (SET_FLAGS / MP_PRIO).
    pub const BKUP_LOC: u32 = 1 << 5;
    pub const FULLY_ESTABLISHED: u32 = 1 << 6;
}

impl MptcpSubflow {
    pub fn backup_local(&self) -> bool {
        self.flags & subflow_flags::BKUP_LOC != 0
    }
    /// The connection's initial (MP_CAPABLE) subflow, at either end: this
    /// end sent MP_CAPABLE ([`subflow_flags::MCAP_LOC`], the connecting end,
    /// also when the peer fell back) or received it
    /// ([`subflow_flags::MCAP_REM`], the only flag of it on the accepting end).
    /// A join (MP_JOIN) subflow has neither.
    pub fn initial(&self) -> bool {
        self.flags & (subflow_flags::MCAP_LOC | subflow_flags::MCAP_REM) != 0
    }
    /// The initial subflow of a connection this end accepted: MP_CAPABLE
    /// received, never sent (the kernel's own flags; no listener needs to be
    /// open any more to tell).
    pub fn accepted(&self) -> bool {
        self.initial() && self.flags & subflow_flags::MCAP_LOC == 0
    }
}

/// `INET_DIAG_ULP_INFO_NAME`, nested in `INET_DIAG_ULP_INFO`.
const ULP_INFO_NAME: u16 = 1;
/// `INET_DIAG_ULP_INFO_MPTCP`, nested in `INET_DIAG_ULP_INFO`.
const ULP_INFO_MPTCP: u16 = 3;

/// Decodes the MPTCP subflow attributes (offsets in errors count from the
/// start of `nested`); unknown ones, and the ones read here of another size
/// than theirs, are skipped and counted in [`MptcpSubflow::skipped`]; a
/// malformed one is an error naming where it was.
pub fn parse_mptcp_subflow(nested: &[u8]) -> std::result::Result<MptcpSubflow, ParseError> {
    let mut sf = MptcpSubflow::default();
    let mut sk = netlink::Skipped::default();
    for a in netlink::attrs(nested, "INET_DIAG_ULP_INFO_MPTCP") {
        let (kind, data) = a?;
        match kind {
            // MPTCP_SUBFLOW_ATTR_*: the u32s and u8s read here.
            1 => sf.token_rem = sk.sized::<4>(data).map_or(0, u32::from_ne_bytes),
            2 => sf.token_loc = sk.sized::<4>(data).map_or(0, u32::from_ne_bytes),
            8 => sf.flags = sk.sized::<4>(data).map_or(0, u32::from_ne_bytes),
            9 => sf.id_rem = sk.sized::<1>(data).map_or(0, |b| b[0]),
            10 => sf.id_loc = sk.sized::<1>(data).map_or(0, |b| b[0]),
            // RELWRITE_SEQ, MAP_SEQ, MAP_SFSEQ, SSN_OFFSET, MAP_DATALEN
            // (u32s and a u64) and PAD: known, not needed.
            3..=7 | 11 | 12 => {}
            _ => sk.unknown(),
        }
    }
    sf.skipped = sk;
    Ok(sf)
}

impl DiagSocket {
    /// The MPTCP subflow info of this socket, when it is a subflow and the
    /// dump asked for `INET_DIAG_INFO` (the kernel adds ULP info with it);
    /// `Ok(None)` for any other socket. A malformed nested attribute, at
    /// either level, is an error at its offset in the `inet_diag_msg`.
    pub fn mptcp_subflow(&self) -> std::result::Result<Option<MptcpSubflow>, ParseError> {
        if self.ulp_name()?.as_deref() != Some("mptcp") {
            return Ok(None);
        }
        let Some((at, nested)) = self.ulp_attr(ULP_INFO_MPTCP)? else { return Ok(None) };
        parse_mptcp_subflow(nested).map(Some).map_err(|e| e.shifted(at))
    }
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

/// Decodes one `inet_diag_msg` payload (after the netlink header); offsets
/// in errors count from the start of `p`.
pub fn parse_diag_msg(p: &[u8]) -> std::result::Result<DiagSocket, ParseError> {
    let short = ParseError::Truncated { what: "inet_diag_msg", at: 0, need: DIAG_MSG_LEN, have: p.len() };
    if p.len() < DIAG_MSG_LEN {
        return Err(short);
    }
    let family = p[0];
    if family != libc::AF_INET as u8 && family != libc::AF_INET6 as u8 {
        return Err(ParseError::BadFamily { at: 0, family: family.into() });
    }
    let id = &p[4..4 + SOCKID_LEN];
    // inet_diag_sockid: sport be16 @0, dport be16 @2, src[16] @4, dst[16] @20,
    // if u32 @36, cookie u32[2] @40.
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
    for a in netlink::attrs(&p[DIAG_MSG_LEN..], "inet_diag_msg").at_offset(DIAG_MSG_LEN).with_offsets() {
        let (at, kind, data) = a?;
        // A `tcp_info` shorter than its base is a malformed message, as a
        // bad attribute length is, rather than a socket without one.
        if kind == attr::INFO && data.len() < crate::tcpinfo::BASE_LEN {
            let need = crate::tcpinfo::BASE_LEN;
            return Err(ParseError::Truncated { what: "tcp_info", at, need, have: data.len() });
        }
        s.attrs.push(Attr { kind, at, data: data.to_vec() });
    }
    Ok(s)
}

/// Decodes one datagram of a dump answer, appending sockets to `out`.
/// Messages whose sequence number is not `seq` (stale answers) are skipped.
/// Offsets in errors count from the start of the datagram.
pub fn parse_datagram(
    buf: &[u8],
    seq: u32,
    out: &mut Vec<DiagSocket>,
) -> std::result::Result<Progress, ParseError> {
    let mut interrupted = false;
    for m in netlink::messages(buf) {
        let m = m?;
        interrupted |= m.header.flags & NLM_F_DUMP_INTR != 0;
        if m.header.seq != seq {
            continue;
        }
        match m.answer()? {
            Answer::Done => return Ok(Progress::Done { interrupted }),
            // An ACK, not an error; dumps end with DONE.
            Answer::Ack => {}
            Answer::Error(e) => return Err(ParseError::Kernel { errno: e.errno }),
            Answer::Data(p) if matches!(m.header.kind, SOCK_DIAG_BY_FAMILY | TCPDIAG_GETSOCK) => {
                out.push(parse_diag_msg(p).map_err(|e| e.shifted(m.payload_at()))?)
            }
            Answer::Data(_) => return Err(ParseError::UnexpectedType { at: m.at, kind: m.header.kind }),
        }
    }
    Ok(Progress::More)
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
    let mut body = Vec::with_capacity(REQ_COMPAT_LEN.max(REQ_V2_LEN));
    let kind = if family == Family::Any {
        // inet_diag_req: family, src_len, dst_len, ext, id, states, dbs.
        body.extend_from_slice(&[family.raw(), 0, 0, req.ext]);
        body.extend_from_slice(&[0u8; SOCKID_LEN]);
        body.extend_from_slice(&req.states.to_ne_bytes());
        body.extend_from_slice(&0u32.to_ne_bytes());
        TCPDIAG_GETSOCK
    } else {
        // inet_diag_req_v2: family, protocol, ext, pad, states, id.
        body.extend_from_slice(&[family.raw(), libc::IPPROTO_TCP as u8, req.ext, 0]);
        body.extend_from_slice(&req.states.to_ne_bytes());
        body.extend_from_slice(&[0u8; SOCKID_LEN]); // wildcard id
        SOCK_DIAG_BY_FAMILY
    };
    let mut filter = AttrBuf::default();
    if let Some(p) = req.port {
        filter.put(INET_DIAG_REQ_BYTECODE, &port_bytecode(p, req.port_side));
    }
    netlink::message(kind, NLM_F_REQUEST | NLM_F_DUMP, seq, &[&body, filter.as_bytes()])
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
    let mut m = Vec::with_capacity(NLMSG_HDRLEN + REQ_V2_LEN);
    emit_exact(&mut m, s, ext, seq);
    m
}

/// Appends [`encode_exact`]'s message to a batch.
fn emit_exact(out: &mut Vec<u8>, s: &DiagSocket, ext: u8, seq: u32) {
    let mut body = Vec::with_capacity(REQ_V2_LEN);
    body.extend_from_slice(&[s.family, libc::IPPROTO_TCP as u8, ext, 0]);
    body.extend_from_slice(&state::ALL.to_ne_bytes());
    encode_sockid(s, &mut body);
    emit_message(out, SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, seq, &[&body]);
}

/// Takes in one datagram of answers to the exact queries numbered `first`
/// to `first + n - 1`: the sockets go to `out`. Returns how many queries it
/// answered and how many of those answers say the socket is gone (an
/// NLMSG_ERROR, ENOENT). Answers with other numbers are stale (to a batch
/// that timed out) and dropped.
fn absorb_answers(
    datagram: &[u8],
    first: u32,
    n: usize,
    out: &mut Vec<DiagSocket>,
) -> std::result::Result<(usize, usize), ParseError> {
    let (mut answered, mut gone) = (0, 0);
    for m in netlink::messages(datagram) {
        let m = m?;
        if m.header.seq.wrapping_sub(first) as usize >= n {
            continue;
        }
        answered += 1;
        match m.header.kind {
            SOCK_DIAG_BY_FAMILY => {
                out.push(parse_diag_msg(m.payload).map_err(|e| e.shifted(m.payload_at()))?)
            }
            NLMSG_ERROR => gone += 1,
            kind => return Err(ParseError::UnexpectedType { at: m.at, kind }),
        }
    }
    Ok((answered, gone))
}

/// Requests per datagram in [`DiagSocketConn::query_into`]: their answers
/// (~1–2 KB of receive buffer each) must fit the default socket buffer.
const QUERY_BATCH: usize = 32;

/// A dump that never ends (should not happen) must not hang a sampler.
const RECV_TIMEOUT: Duration = Duration::from_secs(2);

/// A `NETLINK_SOCK_DIAG` socket bound to the namespace it was opened in.
pub struct DiagSocketConn {
    sock: NlSocket,
    seq: u32,
}

impl DiagSocketConn {
    /// Opens a diag socket in the calling thread's network namespace.
    pub fn open() -> Result<Self> {
        let sock = NlSocket::open(libc::NETLINK_SOCK_DIAG, "NETLINK_SOCK_DIAG")?;
        sock.set_recv_timeout(RECV_TIMEOUT)?;
        Ok(DiagSocketConn { sock, seq: 0 })
    }

    fn send(&self, msg: &[u8]) -> Result<()> {
        self.sock.send(msg, "sock_diag request")
    }

    fn recv(&mut self, op: &str) -> Result<&[u8]> {
        self.sock.recv(0, op)?.ok_or_else(|| Error::Other {
            op: format!("recv({op})"),
            msg: format!("no answer from the kernel within {} s", RECV_TIMEOUT.as_secs()),
        })
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
                match parse_datagram(self.recv("sock_diag dump")?, seq, out) {
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
                emit_exact(&mut msg, s, ext, self.seq);
            }
            self.send(&msg)?;
            let mut answered = 0;
            while answered < chunk.len() {
                let dg = self.recv("sock_diag query")?;
                let (a, g) = absorb_answers(dg, first, chunk.len(), out)
                    .map_err(|e| Error::Other { op: "sock_diag query".into(), msg: e.to_string() })?;
                answered += a;
                gone += g;
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

    use crate::netlink::{message, u16_ne, NLMSG_DONE, NLM_F_MULTI};

    fn nlmsg(kind: u16, flags: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        message(kind, flags, seq, &[payload])
    }

    fn rtattr(kind: u16, data: &[u8]) -> Vec<u8> {
        let mut a = AttrBuf::default();
        a.put(kind, data);
        a.into_bytes()
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
    fn mptcp_subflow_info_is_decoded_from_the_ulp_attributes() {
        let mut sf = AttrBuf::default();
        sf.put_u32(1, 0xaaaa_0001); // TOKEN_REM
        sf.put_u32(2, 0x1234_5678); // TOKEN_LOC
        sf.put_u32(3, 77); // RELWRITE_SEQ: skipped
        sf.put_u32(8, subflow_flags::MCAP_LOC | subflow_flags::BKUP_LOC);
        sf.put_u8(9, 2);
        sf.put_u8(10, 1);
        let mut ulp = AttrBuf::default();
        ulp.put_str(1, "mptcp");
        ulp.put_nested(ULP_INFO_MPTCP, sf);
        let mut a = AttrBuf::default();
        a.put_nested(attr::ULP_INFO, ulp);
        let msg = diag_msg_v4(40000, 5201, 9, &a.into_bytes());
        let sock = parse_diag_msg(&msg).unwrap();
        let got = sock.mptcp_subflow().unwrap().expect("an MPTCP subflow");
        assert_eq!(
            got,
            MptcpSubflow {
                token_loc: 0x1234_5678,
                token_rem: 0xaaaa_0001,
                flags: subflow_flags::MCAP_LOC | subflow_flags::BKUP_LOC,
                id_loc: 1,
                id_rem: 2,
                skipped: netlink::Skipped { unknown: 0, odd_size: 0 },
            }
        );
        assert!(got.initial() && got.backup_local() && !got.accepted());
        // Which end and which subflow, from the MP_CAPABLE and MP_JOIN bits:
        // connected here and answered, connected here
        // and fallen back, accepted here, a join at either end.
        let end = |flags| {
            let sf = MptcpSubflow { flags, ..MptcpSubflow::default() };
            (sf.initial(), sf.accepted())
        };
        use subflow_flags::{JOIN_LOC, JOIN_REM, MCAP_LOC, MCAP_REM};
        assert_eq!(end(MCAP_LOC | MCAP_REM), (true, false));
        assert_eq!(end(MCAP_LOC), (true, false));
        assert_eq!(end(MCAP_REM), (true, true));
        assert_eq!(end(JOIN_LOC | JOIN_REM), (false, false));
        assert_eq!(end(JOIN_REM), (false, false));
        // A plain TCP socket has none; a truncated attribute is an error.
        assert_eq!(parse_diag_msg(&diag_msg_v4(1, 2, 3, &[])).unwrap().mptcp_subflow(), Ok(None));
        assert_eq!(
            parse_mptcp_subflow(&[8, 0, 2, 0, 1, 2]),
            Err(ParseError::AttrBadLength { within: "INET_DIAG_ULP_INFO_MPTCP", at: 0, len: 8, left: 6 })
        );
        // An unknown type and a known one of the wrong size: skipped, counted.
        let mut odd = AttrBuf::default();
        odd.put_u32(2, 9);
        odd.put_u16(1, 7); // TOKEN_REM is a u32
        odd.put_u32(77, 1);
        odd.put_u32(3, 1); // RELWRITE_SEQ: known, not read
        let got = parse_mptcp_subflow(odd.as_bytes()).unwrap();
        assert_eq!((got.token_loc, got.token_rem), (9, 0));
        assert_eq!(got.skipped, netlink::Skipped { unknown: 1, odd_size: 1 });
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

    /// The whole request, byte for byte: header, `inet_diag_req_v2`, and the
    /// bytecode attribute of a remote-port filter.
    #[test]
    fn request_with_port_filter_exact_bytes() {
        const { assert!(cfg!(target_endian = "little"), "the expected bytes below are little-endian") };
        let req = DumpRequest {
            port: Some(5201),
            port_side: PortSide::Remote,
            families: vec![Family::V4],
            ..Default::default()
        };
        let got = encode_request(Family::V4, &req, 9);
        let mut want = vec![84, 0, 0, 0, 20, 0, 0x01, 0x03, 9, 0, 0, 0, 0, 0, 0, 0];
        want.extend_from_slice(&[2, 6, ext::INFO | ext::CONG, 0]);
        want.extend_from_slice(&state::CONNECTED.to_le_bytes());
        want.extend_from_slice(&[0; SOCKID_LEN]);
        want.extend_from_slice(&[12, 0, 1, 0]); // INET_DIAG_REQ_BYTECODE, 8 bytes of program
        want.extend_from_slice(&[BC_D_EQ, 8, 12, 0, BC_NOP, 0, 0x51, 0x14]); // dport == 0x1451
        assert_eq!(got, want);
    }

    /// An exact query names the socket with the very `inet_diag_sockid`
    /// bytes the dump reported it by.
    #[test]
    fn exact_query_echoes_the_reported_sockid() {
        for v6 in [false, true] {
            let mut msg = diag_msg_v4(40000, 5201, 77, &[]);
            if v6 {
                msg[0] = libc::AF_INET6 as u8;
                msg[8..24].copy_from_slice(&"fd00::1".parse::<Ipv6Addr>().unwrap().octets());
            }
            let s = parse_diag_msg(&msg).unwrap();
            let q = encode_exact(&s, ext::INFO, 3);
            assert_eq!(q.len(), NLMSG_HDRLEN + REQ_V2_LEN);
            assert_eq!(&q[..16], &message(SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 3, &[&[0; REQ_V2_LEN]])[..16]);
            assert_eq!(q[16..20], [msg[0], libc::IPPROTO_TCP as u8, ext::INFO, 0]);
            assert_eq!(u32_ne(&q, 20), Some(state::ALL));
            assert_eq!(&q[24..], &msg[4..4 + SOCKID_LEN], "v6={v6}");
        }
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
        assert_eq!(s.ulp_name(), Ok(Some("mptcp".to_string())));
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
        attrs.extend(rtattr(attr::INFO, &[9u8; 104]));
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
        assert_eq!(
            parse_datagram(&[0u8; 10], 1, &mut out),
            Err(ParseError::Truncated { what: "netlink message header", at: 0, need: 16, have: 10 })
        );
        let short = nlmsg(SOCK_DIAG_BY_FAMILY, 0, 1, &[2u8; 20]);
        let want = ParseError::Truncated { what: "inet_diag_msg", at: 16, need: DIAG_MSG_LEN, have: 20 };
        assert_eq!(parse_datagram(&short, 1, &mut out), Err(want.clone()));
        assert_eq!(want.to_string(), "inet_diag_msg truncated at byte 16: needs 72 bytes, 20 left");
        let mut huge = good.clone();
        huge[0..4].copy_from_slice(&10_000u32.to_ne_bytes());
        let left = good.len();
        assert_eq!(
            parse_datagram(&huge, 1, &mut out),
            Err(ParseError::BadLength { what: "netlink message", at: 0, len: 10_000, left })
        );
        let bad_attr = nlmsg(SOCK_DIAG_BY_FAMILY, 0, 1, &diag_msg_v4(1, 2, 3, &[200, 0, 2, 0, 1, 1]));
        // Offsets count in the datagram: header, inet_diag_msg, the attribute.
        let want =
            ParseError::AttrBadLength { within: "inet_diag_msg", at: 16 + DIAG_MSG_LEN, len: 200, left: 6 };
        assert_eq!(parse_datagram(&bad_attr, 1, &mut out), Err(want));
        // A tcp_info shorter than its 104-byte base (it used to read as "no
        // tcp_info"): at its payload, after the CONG attribute's 8 bytes.
        let mut short_info = rtattr(attr::CONG, b"bbr\0");
        short_info.extend(rtattr(attr::INFO, &[9u8; 100]));
        let dg = nlmsg(SOCK_DIAG_BY_FAMILY, 0, 1, &diag_msg_v4(1, 2, 3, &short_info));
        let want =
            ParseError::Truncated { what: "tcp_info", at: 16 + DIAG_MSG_LEN + 8 + 4, need: 104, have: 100 };
        assert_eq!(parse_datagram(&dg, 1, &mut out), Err(want));
        let mut bad_family = diag_msg_v4(1, 2, 3, &[]);
        bad_family[0] = 99;
        let dg = nlmsg(SOCK_DIAG_BY_FAMILY, 0, 1, &bad_family);
        assert_eq!(parse_datagram(&dg, 1, &mut out), Err(ParseError::BadFamily { at: 16, family: 99 }));
        let odd = nlmsg(0x77, 0, 1, &[]);
        assert_eq!(parse_datagram(&odd, 1, &mut out), Err(ParseError::UnexpectedType { at: 0, kind: 0x77 }));
        assert!(out.is_empty());
    }

    #[test]
    fn exact_answers_count_gone_sockets_and_drop_stale_ones() {
        // Queries 0xffff_fffe, 0xffff_ffff and 0 (the numbers wrap): one
        // answer each for the first and last, a stale answer (seq 7), then
        // the middle query's "no such socket".
        let first = 0xffff_fffe;
        let mut dg = nlmsg(SOCK_DIAG_BY_FAMILY, 0, first, &diag_msg_v4(1, 2, 11, &[]));
        dg.extend(nlmsg(SOCK_DIAG_BY_FAMILY, 0, 7, &diag_msg_v4(1, 2, 99, &[])));
        dg.extend(nlmsg(SOCK_DIAG_BY_FAMILY, 0, 0, &diag_msg_v4(1, 2, 13, &[])));
        let mut out = Vec::new();
        assert_eq!(absorb_answers(&dg, first, 3, &mut out), Ok((2, 0)));
        let gone = nlmsg(NLMSG_ERROR, 0, first.wrapping_add(1), &(-libc::ENOENT).to_ne_bytes());
        assert_eq!(absorb_answers(&gone, first, 3, &mut out), Ok((1, 1)));
        assert_eq!(out.iter().map(|s| s.inode).collect::<Vec<_>>(), vec![11, 13]);
        let odd = nlmsg(NLMSG_DONE, 0, first, &[0; 4]);
        assert_eq!(
            absorb_answers(&odd, first, 3, &mut out),
            Err(ParseError::UnexpectedType { at: 0, kind: NLMSG_DONE })
        );
        let short = nlmsg(SOCK_DIAG_BY_FAMILY, 0, first, &[2; 8]);
        let want = ParseError::Truncated { what: "inet_diag_msg", at: 16, need: DIAG_MSG_LEN, have: 8 };
        assert_eq!(absorb_answers(&short, first, 3, &mut out), Err(want));
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

    const CAPTURED: &[u8] = include_bytes!("../testdata/diag_loopback.bin");

    /// The real sock_diag dump of one loopback connection 127.0.0.1:40000 →
    /// 127.0.0.1:5201 (crates/sys/testdata/README.md says how it was taken).
    #[test]
    fn captured_dump_of_a_loopback_connection_decodes_to_known_values() {
        let seq = netlink::messages(CAPTURED).next().unwrap().unwrap().header.seq;
        let mut out = Vec::new();
        assert_eq!(parse_datagram(CAPTURED, seq, &mut out), Ok(Progress::Done { interrupted: false }));
        let ends: Vec<_> = out.iter().map(|s| (s.src, s.dst)).collect();
        let (c, s): (SocketAddr, SocketAddr) =
            ("127.0.0.1:40000".parse().unwrap(), "127.0.0.1:5201".parse().unwrap());
        assert_eq!(ends, vec![(c, s), (s, c)]);
        for sock in &out {
            assert_eq!(
                (sock.family, sock.state, sock.if_index),
                (libc::AF_INET as u8, state::ESTABLISHED, 0)
            );
            assert_eq!(sock.congestion().as_deref(), Some("bbr"));
            let info = sock.tcp_info().expect("INET_DIAG_INFO");
            assert_eq!((info.len, info.state_name()), (280, "ESTABLISHED"));
            assert_eq!(sock.unknown_attrs(), 0);
            assert_eq!((sock.ulp_name(), sock.mptcp_subflow()), (Ok(None), Ok(None)));
        }
        // The exact query for a dumped socket names it with the very sockid bytes.
        let first = netlink::messages(CAPTURED).next().unwrap().unwrap();
        assert_eq!(
            &encode_exact(&out[0], ext::INFO, 1)[NLMSG_HDRLEN + 8..],
            &first.payload[4..4 + SOCKID_LEN]
        );
    }

    /// The captured dump with an attribute of a type no kernel sends yet
    /// appended to its first socket: kept, counted, nothing else changes.
    #[test]
    fn an_unknown_attribute_in_a_real_dump_is_counted() {
        let msgs: Vec<_> = netlink::messages(CAPTURED).map(|m| m.unwrap()).collect();
        let mut payload = msgs[0].payload.to_vec();
        payload.extend(rtattr(200, &[1, 2, 3]));
        let mut dg = nlmsg(msgs[0].header.kind, msgs[0].header.flags, msgs[0].header.seq, &payload);
        dg.extend_from_slice(&CAPTURED[msgs[1].at..]);
        let mut out = Vec::new();
        assert_eq!(
            parse_datagram(&dg, msgs[0].header.seq, &mut out),
            Ok(Progress::Done { interrupted: false })
        );
        assert_eq!(out.iter().map(DiagSocket::unknown_attrs).collect::<Vec<_>>(), vec![1, 0]);
        assert_eq!(out[0].attr(200), Some(&[1u8, 2, 3][..]));
        assert_eq!(out[0].tcp_info().map(|t| t.state), Some(state::ESTABLISHED));
        // Its length field past its padded end: an exact error at its offset.
        let at = 16 + msgs[0].payload.len();
        dg[at..at + 2].copy_from_slice(&9u16.to_ne_bytes());
        assert_eq!(
            parse_datagram(&dg, msgs[0].header.seq, &mut Vec::new()),
            Err(ParseError::AttrBadLength { within: "inet_diag_msg", at, len: 9, left: 8 })
        );
    }

    const CAPTURED_MPTCP: &[u8] = include_bytes!("../testdata/diag_mptcp.bin");

    /// The offset (in the `inet_diag_msg`) of the header of the first
    /// attribute of type `kind` among the attributes at `at..` of `p`.
    fn attr_header_at(p: &[u8], at: usize, kind: u16) -> usize {
        let end = at + usize::from(netlink::u16_ne(p, at - 4).unwrap()) - 4;
        netlink::attrs(&p[at..end], "test")
            .at_offset(at)
            .with_offsets()
            .map(|a| a.unwrap())
            .find(|&(_, k, _)| k == kind)
            .map(|(payload_at, _, _)| payload_at - 4)
            .unwrap()
    }

    /// The real dump of one MPTCP connection 127.0.0.1:40001 →
    /// 127.0.0.1:5202 (its two subflows, crates/sys/testdata/README.md) is
    /// decoded; with one nested attribute's length corrupted, at either
    /// level, the dump still parses (the top-level attributes are sound)
    /// but the accessors answer the typed error at the corrupted bytes,
    /// where they used to answer `None`.
    #[test]
    fn captured_mptcp_dump_decodes_and_a_corrupted_nested_attribute_is_an_error_at_its_offset() {
        let first = netlink::messages(CAPTURED_MPTCP).next().unwrap().unwrap();
        let (seq, payload_at) = (first.header.seq, first.payload_at());
        let mut out = Vec::new();
        assert_eq!(parse_datagram(CAPTURED_MPTCP, seq, &mut out), Ok(Progress::Done { interrupted: false }));
        let (c, s): (SocketAddr, SocketAddr) =
            ("127.0.0.1:40001".parse().unwrap(), "127.0.0.1:5202".parse().unwrap());
        let mut ends: Vec<_> = out.iter().map(|x| (x.src, x.dst)).collect();
        let mut want = vec![(c, s), (s, c)];
        ends.sort();
        want.sort();
        assert_eq!(ends, want);
        let mut tokens = Vec::new();
        for sock in &out {
            assert_eq!(sock.ulp_name(), Ok(Some("mptcp".to_string())));
            let sf = sock.mptcp_subflow().unwrap().expect("an MPTCP subflow");
            assert_ne!(sf.token_loc, 0);
            assert!(sf.skipped.is_empty(), "{:?}", sf.skipped);
            // Both ends' subflow is the initial one; the kernel flags
            // MCAP_LOC (`request_mptcp`) on the side that connected only:
            // 0xc3 there, 0xc1 (MCAP_REM, fully established, connected) on
            // the accepting side.
            assert!(sf.initial(), "{sock:?} {:#x}", sf.flags);
            assert_eq!(sf.accepted(), sock.src == s, "{sock:?} {:#x}", sf.flags);
            assert_eq!(sf.flags & subflow_flags::MCAP_LOC != 0, sock.src == c, "{sock:?}");
            tokens.push(sf.token_loc);
        }
        assert_ne!(tokens[0], tokens[1], "each end has its own local token");

        // The first socket's nested attributes, located in its message.
        let p = first.payload;
        let ulp_at = out[0].attrs.iter().find(|a| a.kind == attr::ULP_INFO).unwrap().at;
        let name_at = attr_header_at(p, ulp_at, ULP_INFO_NAME);
        let sf_at = attr_header_at(p, ulp_at, ULP_INFO_MPTCP);
        let flags_at = attr_header_at(p, sf_at + 4, 8); // MPTCP_SUBFLOW_ATTR_FLAGS
        let corrupt = |at: usize, len: u16| {
            let mut dg = CAPTURED_MPTCP.to_vec();
            dg[payload_at + at..payload_at + at + 2].copy_from_slice(&len.to_ne_bytes());
            let mut out = Vec::new();
            assert_eq!(parse_datagram(&dg, seq, &mut out), Ok(Progress::Done { interrupted: false }));
            out.swap_remove(0)
        };

        // Level 1: the name's length runs past INET_DIAG_ULP_INFO.
        let sock = corrupt(name_at, 200);
        let left = ulp_at + out[0].attr(attr::ULP_INFO).unwrap().len() - name_at;
        let want = ParseError::AttrBadLength { within: "INET_DIAG_ULP_INFO", at: name_at, len: 200, left };
        assert_eq!(sock.ulp_name(), Err(want.clone()));
        assert_eq!(sock.ulp_info_raw(ULP_INFO_MPTCP), Err(want.clone()));
        assert_eq!(sock.mptcp_subflow(), Err(want.clone()));
        assert_eq!(
            want.shifted(payload_at).offset(),
            Some(payload_at + name_at),
            "the datagram byte corrupted"
        );

        // Level 2: the flags' length below the attribute header's own.
        let sock = corrupt(flags_at, 2);
        assert_eq!(sock.ulp_name(), Ok(Some("mptcp".to_string())));
        let left = sf_at + usize::from(netlink::u16_ne(p, sf_at).unwrap()) - flags_at;
        let want =
            ParseError::AttrBadLength { within: "INET_DIAG_ULP_INFO_MPTCP", at: flags_at, len: 2, left };
        assert_eq!(sock.mptcp_subflow(), Err(want));
    }
}
