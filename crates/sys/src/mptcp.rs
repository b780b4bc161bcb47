//! MPTCP path-manager generic netlink (`mptcp_pm`): commands of the userspace
//! path manager and the `mptcp_pm_events` multicast events.
//!
//! What it is: a small generic-netlink client written against
//! `include/uapi/linux/mptcp_pm.h` and `genetlink.h`: it resolves the family id
//! and the events group through the `nlctrl` family, encodes the path-manager
//! commands (SUBFLOW_CREATE, SUBFLOW_DESTROY, SET_FLAGS, ADD_ADDR, GET_ADDR,
//! SET_LIMITS, GET_LIMITS) and decodes events. Every failure names the command
//! that failed, the kernel's errno and, when the kernel sent one, its extended
//! ack message (e.g. "invalid token"). Parsing is defensive: every length is
//! checked, odd attributes are skipped, malformed messages become errors and
//! never panics.
//!
//! What it is not: no policy (which subflow to open, when to switch: that is
//! the lanes daemon), no per-subflow statistics (sock_diag, see
//! [`crate::diag`]).
//!
//! Byte order, which differs between commands and events: in commands the
//! address attribute `MPTCP_PM_ADDR_ATTR_PORT` is a host-order u16 and
//! `ADDR4` is the address in network order; in events `SPORT`/`DPORT` are
//! big-endian u16 and `SADDR4`/`DADDR4` network-order addresses.
//!
//! Netlink sockets answer for the network namespace they were opened in: open
//! them inside the namespace (e.g. in `netns::run_in` or after
//! `netns::enter`) and use them from any thread.

use crate::netlink::{align4, c_string, u16_ne, u32_ne, Attrs};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

use crate::Error;

/// Name of the MPTCP path-manager family (`MPTCP_PM_NAME`).
pub const FAMILY_NAME: &str = "mptcp_pm";
/// Name of the events multicast group (`MPTCP_PM_EV_GRP_NAME`).
pub const EVENTS_GROUP: &str = "mptcp_pm_events";
/// Version written in requests (`MPTCP_PM_VER`).
pub const FAMILY_VERSION: u8 = 1;

// include/uapi/linux/netlink.h
const NLMSG_HDRLEN: usize = 16;
const GENL_HDRLEN: usize = 4;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_DUMP: u16 = 0x100 | 0x200;
/// In an NLMSG_ERROR: the echoed request was cut to its header.
const NLM_F_CAPPED: u16 = 0x100;
/// In an NLMSG_ERROR: extended-ack TLVs follow.
const NLM_F_ACK_TLVS: u16 = 0x200;
const NLA_F_NESTED: u16 = 0x8000;
// enum nlmsgerr_attrs
const NLMSGERR_ATTR_MSG: u16 = 1;
const NLMSGERR_ATTR_OFFS: u16 = 2;
const NLMSGERR_ATTR_MISS_TYPE: u16 = 5;
// socket options at SOL_NETLINK
const SOL_NETLINK: libc::c_int = 270;
const NETLINK_ADD_MEMBERSHIP: libc::c_int = 1;
const NETLINK_CAP_ACK: libc::c_int = 10;
const NETLINK_EXT_ACK: libc::c_int = 11;

// include/uapi/linux/genetlink.h: the controller family.
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const CTRL_ATTR_VERSION: u16 = 3;
const CTRL_ATTR_MCAST_GROUPS: u16 = 7;
const CTRL_ATTR_MCAST_GRP_NAME: u16 = 1;
const CTRL_ATTR_MCAST_GRP_ID: u16 = 2;

/// Path-manager commands (`MPTCP_PM_CMD_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    AddAddr = 1,
    DelAddr = 2,
    GetAddr = 3,
    FlushAddrs = 4,
    SetLimits = 5,
    GetLimits = 6,
    SetFlags = 7,
    Announce = 8,
    Remove = 9,
    SubflowCreate = 10,
    SubflowDestroy = 11,
}

impl Command {
    /// The kernel's name, as errors print it.
    pub fn name(self) -> &'static str {
        match self {
            Command::AddAddr => "ADD_ADDR",
            Command::DelAddr => "DEL_ADDR",
            Command::GetAddr => "GET_ADDR",
            Command::FlushAddrs => "FLUSH_ADDRS",
            Command::SetLimits => "SET_LIMITS",
            Command::GetLimits => "GET_LIMITS",
            Command::SetFlags => "SET_FLAGS",
            Command::Announce => "ANNOUNCE",
            Command::Remove => "REMOVE",
            Command::SubflowCreate => "SUBFLOW_CREATE",
            Command::SubflowDestroy => "SUBFLOW_DESTROY",
        }
    }
}

impl std::fmt::Display for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Top-level command attributes (`MPTCP_PM_ATTR_*`).
pub mod attr {
    pub const ADDR: u16 = 1;
    pub const RCV_ADD_ADDRS: u16 = 2;
    pub const SUBFLOWS: u16 = 3;
    pub const TOKEN: u16 = 4;
    pub const LOC_ID: u16 = 5;
    pub const ADDR_REMOTE: u16 = 6;
}

/// Attributes of a nested address (`MPTCP_PM_ADDR_ATTR_*`).
pub mod addr_attr {
    pub const FAMILY: u16 = 1;
    pub const ID: u16 = 2;
    pub const ADDR4: u16 = 3;
    pub const ADDR6: u16 = 4;
    pub const PORT: u16 = 5;
    pub const FLAGS: u16 = 6;
    pub const IF_IDX: u16 = 7;
}

/// Endpoint / subflow flags (`MPTCP_PM_ADDR_FLAG_*`).
pub mod flags {
    pub const SIGNAL: u32 = 1;
    pub const SUBFLOW: u32 = 2;
    pub const BACKUP: u32 = 4;
    pub const FULLMESH: u32 = 8;
    pub const IMPLICIT: u32 = 16;
    pub const LAMINAR: u32 = 32;
}

/// Event attributes (`enum mptcp_event_attr`).
pub mod event_attr {
    pub const TOKEN: u16 = 1;
    pub const FAMILY: u16 = 2;
    pub const LOC_ID: u16 = 3;
    pub const REM_ID: u16 = 4;
    pub const SADDR4: u16 = 5;
    pub const SADDR6: u16 = 6;
    pub const DADDR4: u16 = 7;
    pub const DADDR6: u16 = 8;
    pub const SPORT: u16 = 9;
    pub const DPORT: u16 = 10;
    pub const BACKUP: u16 = 11;
    pub const ERROR: u16 = 12;
    pub const FLAGS: u16 = 13;
    pub const TIMEOUT: u16 = 14;
    pub const IF_IDX: u16 = 15;
    pub const RESET_REASON: u16 = 16;
    pub const RESET_FLAGS: u16 = 17;
    pub const SERVER_SIDE: u16 = 18;
}

/// Event types (`enum mptcp_event_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    Created,
    Established,
    Closed,
    Announced,
    Removed,
    SubEstablished,
    SubClosed,
    SubPriority,
    ListenerCreated,
    ListenerClosed,
    /// A type this code does not know (newer kernel).
    Other(u8),
}

impl EventKind {
    pub fn from_raw(v: u8) -> EventKind {
        match v {
            1 => EventKind::Created,
            2 => EventKind::Established,
            3 => EventKind::Closed,
            6 => EventKind::Announced,
            7 => EventKind::Removed,
            10 => EventKind::SubEstablished,
            11 => EventKind::SubClosed,
            13 => EventKind::SubPriority,
            15 => EventKind::ListenerCreated,
            16 => EventKind::ListenerClosed,
            other => EventKind::Other(other),
        }
    }
    pub fn raw(self) -> u8 {
        match self {
            EventKind::Created => 1,
            EventKind::Established => 2,
            EventKind::Closed => 3,
            EventKind::Announced => 6,
            EventKind::Removed => 7,
            EventKind::SubEstablished => 10,
            EventKind::SubClosed => 11,
            EventKind::SubPriority => 13,
            EventKind::ListenerCreated => 15,
            EventKind::ListenerClosed => 16,
            EventKind::Other(v) => v,
        }
    }
    /// Lower-case name, as the daemon logs it.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Created => "created",
            EventKind::Established => "established",
            EventKind::Closed => "closed",
            EventKind::Announced => "announced",
            EventKind::Removed => "removed",
            EventKind::SubEstablished => "sub_established",
            EventKind::SubClosed => "sub_closed",
            EventKind::SubPriority => "sub_priority",
            EventKind::ListenerCreated => "listener_created",
            EventKind::ListenerClosed => "listener_closed",
            EventKind::Other(_) => "other",
        }
    }
}

/// One path-manager event. Fields the kernel did not send (or sent with an
/// unexpected length) are `None`; ports are in host order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    pub token: Option<u32>,
    /// `AF_INET` or `AF_INET6`.
    pub family: Option<u16>,
    pub loc_id: Option<u8>,
    pub rem_id: Option<u8>,
    pub saddr: Option<IpAddr>,
    pub daddr: Option<IpAddr>,
    pub sport: Option<u16>,
    pub dport: Option<u16>,
    pub backup: Option<bool>,
    /// Copy of the subflow's `sk_err` on SUB_CLOSED.
    pub error: Option<u8>,
    pub flags: Option<u16>,
    pub timeout: Option<u32>,
    pub if_index: Option<i32>,
    pub reset_reason: Option<u32>,
    pub reset_flags: Option<u32>,
    pub server_side: Option<bool>,
}

impl Event {
    fn empty(kind: EventKind) -> Event {
        Event {
            kind,
            token: None,
            family: None,
            loc_id: None,
            rem_id: None,
            saddr: None,
            daddr: None,
            sport: None,
            dport: None,
            backup: None,
            error: None,
            flags: None,
            timeout: None,
            if_index: None,
            reset_reason: None,
            reset_flags: None,
            server_side: None,
        }
    }
    /// Source address and port, when both were sent.
    pub fn local(&self) -> Option<SocketAddr> {
        Some(SocketAddr::new(self.saddr?, self.sport?))
    }
    /// Destination address and port, when both were sent.
    pub fn remote(&self) -> Option<SocketAddr> {
        Some(SocketAddr::new(self.daddr?, self.dport?))
    }
}

/// An address as a path-manager command carries it (nested
/// `MPTCP_PM_ATTR_ADDR` / `MPTCP_PM_ATTR_ADDR_REMOTE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PmAddr {
    pub ip: IpAddr,
    /// Address id; the userspace PM wants a non-zero id for each local
    /// address of a new subflow and the same id every time for that address.
    pub id: Option<u8>,
    /// Host order. Optional for SET_FLAGS (narrows the match to one
    /// subflow), required for SUBFLOW_DESTROY and for the remote of
    /// SUBFLOW_CREATE.
    pub port: Option<u16>,
    /// [`flags`] bits.
    pub flags: Option<u32>,
    pub if_index: Option<i32>,
}

impl PmAddr {
    /// Just an address.
    pub fn ip(ip: IpAddr) -> PmAddr {
        PmAddr { ip, id: None, port: None, flags: None, if_index: None }
    }
    /// An address and port.
    pub fn sock(sa: SocketAddr) -> PmAddr {
        PmAddr { port: Some(sa.port()), ..PmAddr::ip(sa.ip()) }
    }
    pub fn with_id(mut self, id: u8) -> PmAddr {
        self.id = Some(id);
        self
    }
    pub fn with_port(mut self, port: u16) -> PmAddr {
        self.port = Some(port);
        self
    }
    pub fn with_flags(mut self, f: u32) -> PmAddr {
        self.flags = Some(f);
        self
    }
}

impl std::fmt::Display for PmAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.ip, self.port) {
            (IpAddr::V6(ip), Some(p)) => write!(f, "[{ip}]:{p}")?,
            (ip, Some(p)) => write!(f, "{ip}:{p}")?,
            (ip, None) => write!(f, "{ip}")?,
        }
        if let Some(id) = self.id {
            write!(f, " id {id}")?;
        }
        if let Some(fl) = self.flags {
            write!(f, " flags {fl:#x}")?;
        }
        Ok(())
    }
}

/// A path-manager endpoint as GET_ADDR reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub ip: Option<IpAddr>,
    pub id: Option<u8>,
    pub port: Option<u16>,
    pub flags: u32,
    pub if_index: Option<i32>,
}

/// Subflow limits of the in-kernel path manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub subflows: u32,
    pub add_addr_accepted: u32,
}

/// A resolved generic netlink family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyInfo {
    pub name: String,
    pub id: u16,
    pub version: u32,
    /// Multicast groups: name and id.
    pub groups: Vec<(String, u32)>,
}

impl FamilyInfo {
    pub fn group(&self, name: &str) -> Option<u32> {
        self.groups.iter().find(|(n, _)| n == name).map(|(_, id)| *id)
    }
}

/// Why a netlink message could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("netlink message header truncated at byte {at} of {len}")]
    TruncatedHeader { at: usize, len: usize },
    #[error("netlink message at byte {at} claims length {claimed}, {left} bytes left")]
    BadLength { at: usize, claimed: usize, left: usize },
    #[error("generic netlink header missing ({len} bytes of payload)")]
    ShortGenl { len: usize },
    #[error("netlink attribute malformed at byte {at}")]
    BadAttr { at: usize },
    #[error("netlink error message too short ({len} bytes)")]
    ShortError { len: usize },
    #[error("unexpected netlink message type {kind}")]
    UnexpectedType { kind: u16 },
    #[error("answer lacks attribute {what}")]
    Missing { what: &'static str },
}

/// Errors of this module: each names the command (or step) that failed.
#[derive(Debug, thiserror::Error)]
pub enum PmError {
    /// The kernel refused a command.
    #[error("mptcp_pm {cmd} failed: {}{}", errno_text(*.errno), ack_text(.message, .missing_attr))]
    Kernel { cmd: String, errno: i32, message: Option<String>, missing_attr: Option<u32> },
    /// The generic netlink family is not registered: no MPTCP in this kernel
    /// (or the module is not loaded).
    #[error("generic netlink family {name:?} not found (kernel without MPTCP support?)")]
    NoFamily { name: String },
    /// The family exists but lacks a multicast group we need.
    #[error("generic netlink family {family:?} has no multicast group {group:?}")]
    NoGroup { family: String, group: String },
    #[error("{cmd}: malformed answer from the kernel: {err}")]
    Malformed { cmd: String, err: ParseError },
    #[error("{cmd}: no answer from the kernel within {secs} s")]
    Timeout { cmd: String, secs: u64 },
    /// A socket-level failure (socket, bind, setsockopt, send, recv).
    #[error(transparent)]
    Sys(#[from] Error),
}

impl PmError {
    /// The kernel's errno for [`PmError::Kernel`].
    pub fn errno(&self) -> Option<i32> {
        match self {
            PmError::Kernel { errno, .. } => Some(*errno),
            _ => None,
        }
    }
    /// The extended ack message, if the kernel sent one.
    pub fn kernel_message(&self) -> Option<&str> {
        match self {
            PmError::Kernel { message, .. } => message.as_deref(),
            _ => None,
        }
    }
    /// True when the failure means "this kernel cannot do it" (no family,
    /// unsupported operation) rather than a bad request.
    pub fn is_unsupported(&self) -> bool {
        match self {
            PmError::NoFamily { .. } | PmError::NoGroup { .. } => true,
            PmError::Kernel { errno, .. } => *errno == libc::EOPNOTSUPP || *errno == libc::ENOSYS,
            PmError::Sys(e) => matches!(e, Error::Unsupported { .. }),
            _ => false,
        }
    }
}

fn errno_text(errno: i32) -> String {
    format!("{}", std::io::Error::from_raw_os_error(errno))
}

fn ack_text(msg: &Option<String>, missing: &Option<u32>) -> String {
    let mut s = String::new();
    if let Some(m) = msg {
        s.push_str(&format!(" (kernel: {m})"));
    }
    if let Some(a) = missing {
        s.push_str(&format!(" (missing attribute {a})"));
    }
    s
}

pub type PmResult<T> = std::result::Result<T, PmError>;

// ------------------------------------------------------------ byte helpers

/// Fixed-size attribute payloads: `None` when the length is not exactly `N`.
fn fixed<const N: usize>(d: &[u8]) -> Option<[u8; N]> {
    <[u8; N]>::try_from(d).ok()
}

/// The shared attribute walker, with this module's error type.
fn attrs(buf: &[u8]) -> impl Iterator<Item = std::result::Result<(u16, &[u8]), ParseError>> {
    Attrs::new(buf).map(|r| r.map_err(|at| ParseError::BadAttr { at }))
}

/// Builds attribute payloads, with nesting.
#[derive(Default)]
struct AttrBuf {
    b: Vec<u8>,
}

impl AttrBuf {
    fn put(&mut self, kind: u16, data: &[u8]) {
        let len = 4 + data.len();
        self.b.extend_from_slice(&(len as u16).to_ne_bytes());
        self.b.extend_from_slice(&kind.to_ne_bytes());
        self.b.extend_from_slice(data);
        self.b.resize(align4(self.b.len()), 0);
    }
    fn put_u8(&mut self, kind: u16, v: u8) {
        self.put(kind, &[v]);
    }
    fn put_u16(&mut self, kind: u16, v: u16) {
        self.put(kind, &v.to_ne_bytes());
    }
    fn put_u32(&mut self, kind: u16, v: u32) {
        self.put(kind, &v.to_ne_bytes());
    }
    fn put_nested(&mut self, kind: u16, inner: AttrBuf) {
        self.put(kind | NLA_F_NESTED, &inner.b);
    }
}

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

/// One generic netlink request: netlink header, genl header, attributes.
fn encode_genl(family: u16, flags: u16, seq: u32, cmd: u8, version: u8, attrs: &[u8]) -> Vec<u8> {
    let total = NLMSG_HDRLEN + GENL_HDRLEN + attrs.len();
    let mut m = Vec::with_capacity(total);
    m.extend_from_slice(&(total as u32).to_ne_bytes());
    m.extend_from_slice(&family.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.push(cmd);
    m.push(version);
    m.extend_from_slice(&0u16.to_ne_bytes());
    m.extend_from_slice(attrs);
    m
}

/// The attributes of a path-manager request, before the headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub cmd: Command,
    attrs: Vec<u8>,
    dump: bool,
}

impl Request {
    /// SUBFLOW_CREATE: open a subflow of connection `token` from `local`
    /// (with a non-zero id; [`flags::BACKUP`] opens it as backup) to
    /// `remote` (address and port).
    pub fn subflow_create(token: u32, local: &PmAddr, remote: &PmAddr) -> Request {
        let mut a = AttrBuf::default();
        a.put_u32(attr::TOKEN, token);
        a.put_nested(attr::ADDR, encode_addr(local));
        a.put_nested(attr::ADDR_REMOTE, encode_addr(remote));
        Request { cmd: Command::SubflowCreate, attrs: a.b, dump: false }
    }
    /// SUBFLOW_DESTROY: close the subflow `local` → `remote` (both with ports).
    pub fn subflow_destroy(token: u32, local: SocketAddr, remote: SocketAddr) -> Request {
        let mut a = AttrBuf::default();
        a.put_u32(attr::TOKEN, token);
        a.put_nested(attr::ADDR, encode_addr(&PmAddr::sock(local)));
        a.put_nested(attr::ADDR_REMOTE, encode_addr(&PmAddr::sock(remote)));
        Request { cmd: Command::SubflowDestroy, attrs: a.b, dump: false }
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
        Request { cmd: Command::SetFlags, attrs: a.b, dump: false }
    }
    /// ADD_ADDR: add an in-kernel PM endpoint.
    pub fn add_addr(endpoint: &PmAddr) -> Request {
        let mut a = AttrBuf::default();
        a.put_nested(attr::ADDR, encode_addr(endpoint));
        Request { cmd: Command::AddAddr, attrs: a.b, dump: false }
    }
    /// GET_ADDR as a dump: every in-kernel PM endpoint, or with a token the
    /// local addresses a userspace-PM connection knows.
    pub fn dump_addrs(token: Option<u32>) -> Request {
        let mut a = AttrBuf::default();
        if let Some(t) = token {
            a.put_u32(attr::TOKEN, t);
        }
        Request { cmd: Command::GetAddr, attrs: a.b, dump: true }
    }
    /// SET_LIMITS of the in-kernel PM.
    pub fn set_limits(l: Limits) -> Request {
        let mut a = AttrBuf::default();
        a.put_u32(attr::RCV_ADD_ADDRS, l.add_addr_accepted);
        a.put_u32(attr::SUBFLOWS, l.subflows);
        Request { cmd: Command::SetLimits, attrs: a.b, dump: false }
    }
    /// GET_LIMITS of the in-kernel PM.
    pub fn get_limits() -> Request {
        Request { cmd: Command::GetLimits, attrs: Vec::new(), dump: false }
    }
    /// The whole message for family `family_id` with sequence number `seq`.
    pub fn encode(&self, family_id: u16, seq: u32) -> Vec<u8> {
        let flags = if self.dump { NLM_F_REQUEST | NLM_F_DUMP } else { NLM_F_REQUEST | NLM_F_ACK };
        encode_genl(family_id, flags, seq, self.cmd as u8, FAMILY_VERSION, &self.attrs)
    }
}

// --------------------------------------------------------------- decoding

/// One netlink message of a datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Msg<'a> {
    kind: u16,
    flags: u16,
    seq: u32,
    payload: &'a [u8],
}

/// Splits a datagram into messages; stops at the first malformed header.
fn split_msgs(buf: &[u8]) -> std::result::Result<Vec<Msg<'_>>, ParseError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let left = buf.len() - at;
        let trunc = ParseError::TruncatedHeader { at, len: buf.len() };
        if left < NLMSG_HDRLEN {
            return Err(trunc);
        }
        let len = u32_ne(buf, at).ok_or(trunc.clone())? as usize;
        let kind = u16_ne(buf, at + 4).ok_or(trunc.clone())?;
        let flags = u16_ne(buf, at + 6).ok_or(trunc.clone())?;
        let seq = u32_ne(buf, at + 8).ok_or(trunc)?;
        if len < NLMSG_HDRLEN || len > left {
            return Err(ParseError::BadLength { at, claimed: len, left });
        }
        out.push(Msg { kind, flags, seq, payload: &buf[at + NLMSG_HDRLEN..at + len] });
        at += align4(len).min(left);
    }
    Ok(out)
}

/// A decoded NLMSG_ERROR: 0 is an ACK.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NlErr {
    errno: i32,
    message: Option<String>,
    offset: Option<u32>,
    missing_attr: Option<u32>,
}

/// Decodes `struct nlmsgerr` and the extended-ack TLVs after it.
fn parse_nlerr(flags: u16, p: &[u8]) -> std::result::Result<NlErr, ParseError> {
    let raw = u32_ne(p, 0).ok_or(ParseError::ShortError { len: p.len() })? as i32;
    let mut e = NlErr { errno: raw.saturating_neg(), message: None, offset: None, missing_attr: None };
    if flags & NLM_F_ACK_TLVS == 0 {
        return Ok(e);
    }
    // The echoed request header, and its payload unless capped.
    let echoed_len = u32_ne(p, 4).unwrap_or(0) as usize;
    let mut tlv_at = 4 + NLMSG_HDRLEN;
    if flags & NLM_F_CAPPED == 0 {
        tlv_at = 4 + align4(echoed_len.max(NLMSG_HDRLEN));
    }
    let Some(tlvs) = p.get(tlv_at..) else {
        return Ok(e);
    };
    for a in attrs(tlvs) {
        let Ok((kind, d)) = a else { break };
        match kind {
            NLMSGERR_ATTR_MSG => e.message = Some(c_string(d)),
            NLMSGERR_ATTR_OFFS => e.offset = fixed::<4>(d).map(u32::from_ne_bytes),
            NLMSGERR_ATTR_MISS_TYPE => e.missing_attr = fixed::<4>(d).map(u32::from_ne_bytes),
            _ => {}
        }
    }
    Ok(e)
}

fn ip4(d: &[u8]) -> Option<IpAddr> {
    fixed::<4>(d).map(|o| IpAddr::V4(Ipv4Addr::from(o)))
}
fn ip6(d: &[u8]) -> Option<IpAddr> {
    fixed::<16>(d).map(|o| IpAddr::V6(Ipv6Addr::from(o)))
}

/// Decodes one event from a generic netlink payload (genl header first).
/// Attributes of an unexpected size are left out; a broken attribute chain
/// is an error.
pub fn parse_event(genl: &[u8]) -> std::result::Result<Event, ParseError> {
    if genl.len() < GENL_HDRLEN {
        return Err(ParseError::ShortGenl { len: genl.len() });
    }
    let mut ev = Event::empty(EventKind::from_raw(genl[0]));
    for a in attrs(&genl[GENL_HDRLEN..]) {
        let (kind, d) = a.map_err(|e| match e {
            ParseError::BadAttr { at } => ParseError::BadAttr { at: at + GENL_HDRLEN },
            e => e,
        })?;
        use event_attr as ea;
        match kind {
            ea::TOKEN => ev.token = fixed::<4>(d).map(u32::from_ne_bytes),
            ea::FAMILY => ev.family = fixed::<2>(d).map(u16::from_ne_bytes),
            ea::LOC_ID => ev.loc_id = fixed::<1>(d).map(|b| b[0]),
            ea::REM_ID => ev.rem_id = fixed::<1>(d).map(|b| b[0]),
            ea::SADDR4 => ev.saddr = ip4(d),
            ea::SADDR6 => ev.saddr = ip6(d),
            ea::DADDR4 => ev.daddr = ip4(d),
            ea::DADDR6 => ev.daddr = ip6(d),
            // nla_put_be16: network order, unlike the command's PORT.
            ea::SPORT => ev.sport = fixed::<2>(d).map(u16::from_be_bytes),
            ea::DPORT => ev.dport = fixed::<2>(d).map(u16::from_be_bytes),
            ea::BACKUP => ev.backup = fixed::<1>(d).map(|b| b[0] != 0),
            ea::ERROR => ev.error = fixed::<1>(d).map(|b| b[0]),
            ea::FLAGS => ev.flags = fixed::<2>(d).map(u16::from_ne_bytes),
            ea::TIMEOUT => ev.timeout = fixed::<4>(d).map(u32::from_ne_bytes),
            ea::IF_IDX => ev.if_index = fixed::<4>(d).map(i32::from_ne_bytes),
            ea::RESET_REASON => ev.reset_reason = fixed::<4>(d).map(u32::from_ne_bytes),
            ea::RESET_FLAGS => ev.reset_flags = fixed::<4>(d).map(u32::from_ne_bytes),
            ea::SERVER_SIDE => ev.server_side = fixed::<1>(d).map(|b| b[0] != 0),
            _ => {}
        }
    }
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

/// Decodes a datagram from the events group.
pub fn parse_event_datagram(buf: &[u8], family_id: u16) -> Vec<Incoming> {
    let msgs = match split_msgs(buf) {
        Ok(m) => m,
        Err(e) => return vec![Incoming::Malformed(e)],
    };
    msgs.into_iter()
        .filter_map(|m| {
            if m.kind == family_id {
                Some(match parse_event(m.payload) {
                    Ok(ev) => Incoming::Event(ev),
                    Err(e) => Incoming::Malformed(e),
                })
            } else if m.kind == NLMSG_DONE || m.kind == NLMSG_ERROR {
                None
            } else {
                Some(Incoming::Malformed(ParseError::UnexpectedType { kind: m.kind }))
            }
        })
        .collect()
}

fn parse_endpoint(genl: &[u8]) -> std::result::Result<Endpoint, ParseError> {
    let body = genl.get(GENL_HDRLEN..).ok_or(ParseError::ShortGenl { len: genl.len() })?;
    for a in attrs(body) {
        let (kind, nested) = a?;
        if kind != attr::ADDR {
            continue;
        }
        let mut ep = Endpoint { ip: None, id: None, port: None, flags: 0, if_index: None };
        for b in attrs(nested) {
            let (k, d) = b?;
            match k {
                addr_attr::ID => ep.id = fixed::<1>(d).map(|x| x[0]),
                addr_attr::ADDR4 => ep.ip = ip4(d),
                addr_attr::ADDR6 => ep.ip = ip6(d),
                addr_attr::PORT => ep.port = fixed::<2>(d).map(u16::from_ne_bytes),
                addr_attr::FLAGS => ep.flags = fixed::<4>(d).map(u32::from_ne_bytes).unwrap_or(0),
                addr_attr::IF_IDX => ep.if_index = fixed::<4>(d).map(i32::from_ne_bytes),
                _ => {}
            }
        }
        return Ok(ep);
    }
    Err(ParseError::Missing { what: "MPTCP_PM_ATTR_ADDR" })
}

fn parse_limits(genl: &[u8]) -> std::result::Result<Limits, ParseError> {
    let body = genl.get(GENL_HDRLEN..).ok_or(ParseError::ShortGenl { len: genl.len() })?;
    let (mut subflows, mut accepted) = (None, None);
    for a in attrs(body) {
        let (k, d) = a?;
        match k {
            attr::SUBFLOWS => subflows = fixed::<4>(d).map(u32::from_ne_bytes),
            attr::RCV_ADD_ADDRS => accepted = fixed::<4>(d).map(u32::from_ne_bytes),
            _ => {}
        }
    }
    Ok(Limits {
        subflows: subflows.ok_or(ParseError::Missing { what: "MPTCP_PM_ATTR_SUBFLOWS" })?,
        add_addr_accepted: accepted.ok_or(ParseError::Missing { what: "MPTCP_PM_ATTR_RCV_ADD_ADDRS" })?,
    })
}

fn parse_family(genl: &[u8]) -> std::result::Result<FamilyInfo, ParseError> {
    let body = genl.get(GENL_HDRLEN..).ok_or(ParseError::ShortGenl { len: genl.len() })?;
    let mut info = FamilyInfo { name: String::new(), id: 0, version: 0, groups: Vec::new() };
    let mut have_id = false;
    for a in attrs(body) {
        let (k, d) = a?;
        match k {
            CTRL_ATTR_FAMILY_ID => {
                if let Some(v) = fixed::<2>(d) {
                    info.id = u16::from_ne_bytes(v);
                    have_id = true;
                }
            }
            CTRL_ATTR_FAMILY_NAME => info.name = c_string(d),
            CTRL_ATTR_VERSION => info.version = fixed::<4>(d).map(u32::from_ne_bytes).unwrap_or(0),
            CTRL_ATTR_MCAST_GROUPS => {
                // An array: nested entries (index as type), each with a name and an id.
                for g in attrs(d) {
                    let (_, entry) = g?;
                    let (mut name, mut id) = (None, None);
                    for f in attrs(entry) {
                        let (fk, fd) = f?;
                        match fk {
                            CTRL_ATTR_MCAST_GRP_NAME => name = Some(c_string(fd)),
                            CTRL_ATTR_MCAST_GRP_ID => id = fixed::<4>(fd).map(u32::from_ne_bytes),
                            _ => {}
                        }
                    }
                    if let (Some(n), Some(i)) = (name, id) {
                        info.groups.push((n, i));
                    }
                }
            }
            _ => {}
        }
    }
    if !have_id {
        return Err(ParseError::Missing { what: "CTRL_ATTR_FAMILY_ID" });
    }
    Ok(info)
}

// ---------------------------------------------------------------- sockets

/// Receive buffer: generic netlink answers and events are small, but dumps
/// come in datagrams up to ~32 KiB.
const RECV_BUF: usize = 64 * 1024;
/// How long a command waits for the kernel's answer.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// A `NETLINK_GENERIC` socket.
struct GenlSock {
    fd: OwnedFd,
    buf: Vec<u8>,
}

fn set_int_opt(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
    op: &str,
) -> Result<(), Error> {
    // SAFETY: `v` lives for the whole call and the length passed is its size;
    // the fd is open.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(Error::last(op));
    }
    Ok(())
}

impl GenlSock {
    fn open(rcv_timeout: Option<Duration>) -> Result<GenlSock, Error> {
        // SAFETY: plain socket(2); the result is checked and owned at once.
        let fd = unsafe {
            libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_GENERIC)
        };
        if fd < 0 {
            return Err(Error::last("socket(AF_NETLINK, NETLINK_GENERIC)"));
        }
        // SAFETY: fd is fresh, valid and owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // Extended acks carry the kernel's reason ("invalid token"); capped
        // acks keep error messages small. Both are best effort (old kernels).
        let _ = set_int_opt(&fd, SOL_NETLINK, NETLINK_EXT_ACK, 1, "setsockopt(NETLINK_EXT_ACK)");
        let _ = set_int_opt(&fd, SOL_NETLINK, NETLINK_CAP_ACK, 1, "setsockopt(NETLINK_CAP_ACK)");
        if let Some(t) = rcv_timeout {
            let tv = libc::timeval { tv_sec: t.as_secs() as libc::time_t, tv_usec: t.subsec_micros() as _ };
            // SAFETY: tv is a valid timeval that outlives the call; the length is its size.
            let rc = unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_RCVTIMEO,
                    (&tv as *const libc::timeval).cast(),
                    std::mem::size_of::<libc::timeval>() as libc::socklen_t,
                )
            };
            if rc != 0 {
                return Err(Error::last("setsockopt(SO_RCVTIMEO) on generic netlink socket"));
            }
        }
        // SAFETY: an all-zero sockaddr_nl is valid; pid 0 lets the kernel pick.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: sa is a valid sockaddr_nl for the length given.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(Error::last("bind(generic netlink socket)"));
        }
        Ok(GenlSock { fd, buf: vec![0; RECV_BUF] })
    }

    fn send(&self, msg: &[u8], op: &str) -> Result<(), Error> {
        // SAFETY: an all-zero sockaddr_nl is valid (pid 0 = the kernel).
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        loop {
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
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return Err(Error::os(format!("sendto({op})"), e));
            }
            return Ok(());
        }
    }

    /// One datagram into `self.buf`; `Ok(None)` on timeout (EAGAIN).
    fn recv(&mut self, flags: libc::c_int, op: &str) -> Result<Option<usize>, Error> {
        loop {
            // SAFETY: buf is valid for writes of its full length.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                    flags | libc::MSG_TRUNC,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EAGAIN) => return Ok(None),
                    _ => return Err(Error::os(format!("recv({op})"), e)),
                }
            }
            let n = n as usize;
            if n > self.buf.len() {
                return Err(Error::Other {
                    op: format!("recv({op})"),
                    msg: format!("datagram of {n} bytes exceeds the {} byte buffer", self.buf.len()),
                });
            }
            return Ok(Some(n));
        }
    }
}

/// Runs one request/answer exchange on `sock`: returns the genl payloads of
/// the answer messages (for GET requests and dumps), after the ACK or DONE.
fn transact(sock: &mut GenlSock, msg: &[u8], seq: u32, reply_type: u16, op: &str) -> PmResult<Vec<Vec<u8>>> {
    sock.send(msg, op)?;
    let mut out = Vec::new();
    loop {
        let n = match sock.recv(0, op)? {
            Some(n) => n,
            None => return Err(PmError::Timeout { cmd: op.into(), secs: COMMAND_TIMEOUT.as_secs() }),
        };
        let msgs = split_msgs(&sock.buf[..n]).map_err(|err| PmError::Malformed { cmd: op.into(), err })?;
        for m in msgs {
            if m.seq != seq {
                continue; // a stale answer to an earlier, timed-out request
            }
            match m.kind {
                NLMSG_ERROR => {
                    let e = parse_nlerr(m.flags, m.payload)
                        .map_err(|err| PmError::Malformed { cmd: op.into(), err })?;
                    if e.errno == 0 {
                        return Ok(out);
                    }
                    return Err(PmError::Kernel {
                        cmd: op.into(),
                        errno: e.errno,
                        message: e.message,
                        missing_attr: e.missing_attr,
                    });
                }
                NLMSG_DONE => {
                    // A dump's end; it may carry an error (with TLVs) too.
                    let e = parse_nlerr(m.flags, m.payload).unwrap_or(NlErr {
                        errno: 0,
                        message: None,
                        offset: None,
                        missing_attr: None,
                    });
                    if e.errno > 0 {
                        return Err(PmError::Kernel {
                            cmd: op.into(),
                            errno: e.errno,
                            message: e.message,
                            missing_attr: e.missing_attr,
                        });
                    }
                    return Ok(out);
                }
                k if k == reply_type => out.push(m.payload.to_vec()),
                k => {
                    return Err(PmError::Malformed {
                        cmd: op.into(),
                        err: ParseError::UnexpectedType { kind: k },
                    })
                }
            }
        }
    }
}

/// Looks up a generic netlink family (id, version, multicast groups) by
/// name through `nlctrl`, in the calling thread's network namespace.
pub fn resolve_family(name: &str) -> PmResult<FamilyInfo> {
    let mut sock = GenlSock::open(Some(COMMAND_TIMEOUT))?;
    resolve_on(&mut sock, name)
}

fn resolve_on(sock: &mut GenlSock, name: &str) -> PmResult<FamilyInfo> {
    let mut a = AttrBuf::default();
    let mut z = name.as_bytes().to_vec();
    z.push(0);
    a.put(CTRL_ATTR_FAMILY_NAME, &z);
    let seq = 1;
    let msg = encode_genl(GENL_ID_CTRL, NLM_F_REQUEST | NLM_F_ACK, seq, CTRL_CMD_GETFAMILY, 1, &a.b);
    let op = format!("nlctrl GETFAMILY {name}");
    match transact(sock, &msg, seq, GENL_ID_CTRL, &op) {
        Ok(answers) => {
            let first = answers
                .first()
                .ok_or(PmError::Malformed { cmd: op.clone(), err: ParseError::Missing { what: "family" } })?;
            parse_family(first).map_err(|err| PmError::Malformed { cmd: op, err })
        }
        Err(PmError::Kernel { errno, .. }) if errno == libc::ENOENT => {
            Err(PmError::NoFamily { name: name.to_string() })
        }
        Err(e) => Err(e),
    }
}

/// A client of the path-manager commands.
pub struct PmClient {
    sock: GenlSock,
    family: FamilyInfo,
    seq: u32,
}

impl PmClient {
    /// Opens a generic netlink socket in the calling thread's namespace and
    /// resolves `mptcp_pm` ([`PmError::NoFamily`] without MPTCP).
    pub fn open() -> PmResult<PmClient> {
        let mut sock = GenlSock::open(Some(COMMAND_TIMEOUT))?;
        let family = resolve_on(&mut sock, FAMILY_NAME)?;
        Ok(PmClient { sock, family, seq: 1 })
    }

    pub fn family(&self) -> &FamilyInfo {
        &self.family
    }

    /// Sends `req` and waits for the kernel's answer; returns the genl
    /// payloads of any answer messages. Errors name the command.
    pub fn execute(&mut self, req: &Request) -> PmResult<Vec<Vec<u8>>> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let msg = req.encode(self.family.id, seq);
        transact(&mut self.sock, &msg, seq, self.family.id, req.cmd.name())
    }

    /// SUBFLOW_CREATE (see [`Request::subflow_create`]).
    pub fn subflow_create(&mut self, token: u32, local: &PmAddr, remote: &PmAddr) -> PmResult<()> {
        self.execute(&Request::subflow_create(token, local, remote)).map(drop)
    }
    /// SUBFLOW_DESTROY (see [`Request::subflow_destroy`]).
    pub fn subflow_destroy(&mut self, token: u32, local: SocketAddr, remote: SocketAddr) -> PmResult<()> {
        self.execute(&Request::subflow_destroy(token, local, remote)).map(drop)
    }
    /// SET_FLAGS (see [`Request::set_flags`]).
    pub fn set_flags(&mut self, token: Option<u32>, local: &PmAddr, remote: Option<&PmAddr>) -> PmResult<()> {
        self.execute(&Request::set_flags(token, local, remote)).map(drop)
    }
    /// ADD_ADDR of an in-kernel PM endpoint.
    pub fn add_addr(&mut self, endpoint: &PmAddr) -> PmResult<()> {
        self.execute(&Request::add_addr(endpoint)).map(drop)
    }
    /// GET_ADDR dump: in-kernel PM endpoints (no token) or the local
    /// addresses of a userspace-PM connection (token).
    pub fn addrs(&mut self, token: Option<u32>) -> PmResult<Vec<Endpoint>> {
        let answers = self.execute(&Request::dump_addrs(token))?;
        answers
            .iter()
            .map(|a| parse_endpoint(a).map_err(|err| PmError::Malformed { cmd: "GET_ADDR".into(), err }))
            .collect()
    }
    /// SET_LIMITS of the in-kernel PM.
    pub fn set_limits(&mut self, l: Limits) -> PmResult<()> {
        self.execute(&Request::set_limits(l)).map(drop)
    }
    /// GET_LIMITS of the in-kernel PM.
    pub fn limits(&mut self) -> PmResult<Limits> {
        let answers = self.execute(&Request::get_limits())?;
        let first = answers.first().ok_or(PmError::Malformed {
            cmd: "GET_LIMITS".into(),
            err: ParseError::Missing { what: "limits" },
        })?;
        parse_limits(first).map_err(|err| PmError::Malformed { cmd: "GET_LIMITS".into(), err })
    }
}

/// A socket subscribed to the `mptcp_pm_events` group of the namespace it
/// was opened in. Joining needs CAP_NET_ADMIN.
pub struct EventListener {
    sock: GenlSock,
    family: FamilyInfo,
}

impl EventListener {
    /// Resolves the family and joins its events group.
    pub fn open() -> PmResult<EventListener> {
        let mut sock = GenlSock::open(Some(COMMAND_TIMEOUT))?;
        let family = resolve_on(&mut sock, FAMILY_NAME)?;
        let group = family
            .group(EVENTS_GROUP)
            .ok_or(PmError::NoGroup { family: FAMILY_NAME.into(), group: EVENTS_GROUP.into() })?;
        let g = libc::c_int::try_from(group).map_err(|_| PmError::NoGroup {
            family: FAMILY_NAME.into(),
            group: format!("{EVENTS_GROUP} (id {group} out of range)"),
        })?;
        set_int_opt(
            &sock.fd,
            SOL_NETLINK,
            NETLINK_ADD_MEMBERSHIP,
            g,
            "join mptcp_pm_events (NETLINK_ADD_MEMBERSHIP)",
        )?;
        // A larger buffer rides out bursts of connections; capped by
        // net.core.rmem_max, so failure to get it all is not an error.
        let _ = set_int_opt(&sock.fd, libc::SOL_SOCKET, libc::SO_RCVBUF, 1 << 20, "setsockopt(SO_RCVBUF)");
        Ok(EventListener { sock, family })
    }

    pub fn family(&self) -> &FamilyInfo {
        &self.family
    }

    /// Waits up to `timeout` (forever with `None`) for one datagram and
    /// decodes it. An empty vector means the wait timed out.
    pub fn recv(&mut self, timeout: Option<Duration>) -> PmResult<Vec<Incoming>> {
        let ms: libc::c_int = match timeout {
            None => -1,
            Some(t) => libc::c_int::try_from(t.as_millis()).unwrap_or(libc::c_int::MAX),
        };
        let mut pfd = libc::pollfd { fd: self.sock.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: pfd is one valid pollfd for the duration of the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                // A signal: let the caller look at its flags.
                return Ok(Vec::new());
            }
            return Err(Error::os("poll(mptcp_pm events)", e).into());
        }
        if rc == 0 {
            return Ok(Vec::new());
        }
        match self.sock.recv(libc::MSG_DONTWAIT, "mptcp_pm events") {
            Ok(Some(n)) => Ok(parse_event_datagram(&self.sock.buf[..n], self.family.id)),
            Ok(None) => Ok(Vec::new()),
            Err(Error::Io { source, .. }) if source.raw_os_error() == Some(libc::ENOBUFS) => {
                Ok(vec![Incoming::Overrun])
            }
            Err(e) => Err(e.into()),
        }
    }
}

impl AsFd for EventListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        g.extend(a.b);
        g
    }

    #[test]
    fn decodes_a_subflow_event_with_big_endian_ports() {
        let dg = nlmsg(0x1a, 0, 0, &sub_established_payload());
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
        g.extend(a.b);
        let ev = parse_event(&g).expect("parse");
        assert_eq!(ev.token, None);
        assert_eq!(ev.saddr, Some(IpAddr::V6(Ipv6Addr::UNSPECIFIED)));
        assert_eq!(ev.sport, None);
        assert_eq!(EventKind::from_raw(200), EventKind::Other(200));
    }

    #[test]
    fn garbage_never_panics() {
        // Every truncation and a sweep of byte corruptions of valid input.
        let dg = nlmsg(0x1a, 0, 0, &sub_established_payload());
        for cut in 0..dg.len() {
            let _ = parse_event_datagram(&dg[..cut], 0x1a);
            let _ = parse_event(&dg[NLMSG_HDRLEN.min(cut)..cut]);
            let _ = parse_nlerr(NLM_F_ACK_TLVS, &dg[..cut]);
            let _ = parse_family(&dg[..cut]);
            let _ = parse_endpoint(&dg[..cut]);
            let _ = parse_limits(&dg[..cut]);
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
            let _ = split_msgs(&m);
        }
        assert!(matches!(parse_event(&[1, 2]), Err(ParseError::ShortGenl { .. })));
        assert!(matches!(split_msgs(&[0u8; 5]), Err(ParseError::TruncatedHeader { .. })));
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
        let top_attrs: Vec<_> = super::attrs(&m[20..]).map(|a| a.unwrap()).collect();
        assert_eq!(top_attrs.len(), 3);
        assert_eq!(top_attrs[0], (attr::TOKEN, &0x0102_0304u32.to_ne_bytes()[..]));
        assert_eq!(top_attrs[1].0, attr::ADDR);
        assert_eq!(top_attrs[2].0, attr::ADDR_REMOTE);
        let l: Vec<_> = super::attrs(top_attrs[1].1).map(|a| a.unwrap()).collect();
        assert!(l.contains(&(addr_attr::FAMILY, &(libc::AF_INET as u16).to_ne_bytes()[..])));
        assert!(l.contains(&(addr_attr::ID, &[5u8][..])));
        assert!(l.contains(&(addr_attr::ADDR4, &[10u8, 2, 0, 1][..])));
        assert!(l.contains(&(addr_attr::FLAGS, &flags::BACKUP.to_ne_bytes()[..])));
        let r: Vec<_> = super::attrs(top_attrs[2].1).map(|a| a.unwrap()).collect();
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
        let top: Vec<_> = super::attrs(&v6[20..]).map(|a| a.unwrap()).collect();
        assert_eq!(top.len(), 3);
        let l: Vec<_> = super::attrs(top[1].1).map(|a| a.unwrap()).collect();
        assert!(l.contains(&(addr_attr::FAMILY, &(libc::AF_INET6 as u16).to_ne_bytes()[..])));
        let ip6: std::net::Ipv6Addr = "fd00::1".parse().unwrap();
        assert!(l.contains(&(addr_attr::ADDR6, &ip6.octets()[..])));
        assert!(l.contains(&(addr_attr::FLAGS, &0u32.to_ne_bytes()[..])));
        let d = Request::dump_addrs(None).encode(0x1b, 1);
        assert_eq!(u16_ne(&d, 6), Some(NLM_F_REQUEST | NLM_F_DUMP));
    }

    #[test]
    fn extended_ack_message_is_read_capped_or_not() {
        let mut tlv = AttrBuf::default();
        tlv.put(NLMSGERR_ATTR_MSG, b"invalid token\0");
        tlv.put_u32(NLMSGERR_ATTR_OFFS, 20);
        // Capped: error, echoed header, TLVs.
        let req = Request::subflow_create(
            1,
            &PmAddr::ip(Ipv4Addr::LOCALHOST.into()),
            &PmAddr::ip(Ipv4Addr::LOCALHOST.into()),
        )
        .encode(0x1b, 7);
        let mut p = (-libc::EINVAL).to_ne_bytes().to_vec();
        p.extend_from_slice(&req[..NLMSG_HDRLEN]);
        p.extend_from_slice(&tlv.b);
        let e = parse_nlerr(NLM_F_ACK_TLVS | NLM_F_CAPPED, &p).unwrap();
        assert_eq!(e.errno, libc::EINVAL);
        assert_eq!(e.message.as_deref(), Some("invalid token"));
        assert_eq!(e.offset, Some(20));
        // Not capped: the whole request is echoed before the TLVs.
        let mut p = (-libc::EINVAL).to_ne_bytes().to_vec();
        p.extend_from_slice(&req);
        p.extend_from_slice(&tlv.b);
        let e = parse_nlerr(NLM_F_ACK_TLVS, &p).unwrap();
        assert_eq!(e.message.as_deref(), Some("invalid token"));
        // The error names the command and carries the message.
        let err = PmError::Kernel {
            cmd: Command::SubflowCreate.name().into(),
            errno: e.errno,
            message: e.message,
            missing_attr: None,
        };
        let s = err.to_string();
        assert!(s.contains("SUBFLOW_CREATE") && s.contains("invalid token"), "{s}");
        assert_eq!(err.errno(), Some(libc::EINVAL));
    }

    #[test]
    fn family_answer_with_groups() {
        let mut a = AttrBuf::default();
        a.put(CTRL_ATTR_FAMILY_NAME, b"mptcp_pm\0");
        a.put_u16(CTRL_ATTR_FAMILY_ID, 0x1b);
        a.put_u32(CTRL_ATTR_VERSION, 1);
        let mut g1 = AttrBuf::default();
        g1.put(CTRL_ATTR_MCAST_GRP_NAME, b"mptcp_pm_cmds\0");
        g1.put_u32(CTRL_ATTR_MCAST_GRP_ID, 9);
        let mut g2 = AttrBuf::default();
        g2.put(CTRL_ATTR_MCAST_GRP_NAME, b"mptcp_pm_events\0");
        g2.put_u32(CTRL_ATTR_MCAST_GRP_ID, 10);
        let mut arr = AttrBuf::default();
        arr.put_nested(1, g1);
        arr.put_nested(2, g2);
        a.put_nested(CTRL_ATTR_MCAST_GROUPS, arr);
        let mut genl = vec![1, 2, 0, 0];
        genl.extend(a.b);
        let f = parse_family(&genl).unwrap();
        assert_eq!(f.id, 0x1b);
        assert_eq!(f.name, "mptcp_pm");
        assert_eq!(f.group(EVENTS_GROUP), Some(10));
        assert_eq!(f.group("nope"), None);
    }

    fn require_root() {
        assert!(crate::privilege::is_root(), "this test needs root (CI runs as root)");
    }

    /// Root: the family resolves in this namespace, and a command with a
    /// token no connection has fails naming the command and the kernel's
    /// reason.
    #[test]
    fn root_bad_token_names_the_command() {
        require_root();
        let mut pm = PmClient::open().expect("mptcp_pm must be registered (MPTCP on)");
        assert!(pm.family().group(EVENTS_GROUP).is_some(), "{:?}", pm.family());
        let local = PmAddr::ip("127.0.0.1".parse().unwrap()).with_id(1);
        let remote = PmAddr::sock("127.0.0.1:9".parse().unwrap());
        let err = pm.subflow_create(0x7fff_0001, &local, &remote).expect_err("bad token must fail");
        let s = err.to_string();
        assert!(s.contains("SUBFLOW_CREATE"), "{s}");
        assert_eq!(err.errno(), Some(libc::EINVAL), "{s}");
        assert!(err.kernel_message().is_some_and(|m| m.contains("token")), "{s}");
        let err = pm
            .set_flags(Some(0x7fff_0001), &local.with_flags(flags::BACKUP), Some(&remote))
            .expect_err("bad token must fail");
        assert!(err.to_string().contains("SET_FLAGS"), "{err}");
        // GET answers and dumps decode (read only: this namespace is shared).
        let limits = pm.limits().expect("GET_LIMITS");
        assert!(limits.subflows <= 8 && limits.add_addr_accepted <= 8, "{limits:?}");
        let endpoints = pm.addrs(None).expect("GET_ADDR dump");
        assert!(endpoints.iter().all(|e| e.ip.is_some()), "{endpoints:?}");
        // The events group can be joined.
        let mut ev = EventListener::open().expect("join mptcp_pm_events");
        let got = ev.recv(Some(Duration::from_millis(10))).expect("recv");
        assert!(got.iter().all(|i| !matches!(i, Incoming::Malformed(_))), "{got:?}");
    }
}
