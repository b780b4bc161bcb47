//! The values of the MPTCP path-manager interface: commands, attribute
//! numbers, events, addresses, limits, the resolved family, and the errors
//! of the whole module. No bytes and no sockets here (see `codec`, `client`).

use std::net::{IpAddr, SocketAddr};

use crate::netlink::{ParseError, Skipped};
use crate::Error;

/// Name of the MPTCP path-manager family (`MPTCP_PM_NAME`).
pub const FAMILY_NAME: &str = "mptcp_pm";
/// Name of the events multicast group (`MPTCP_PM_EV_GRP_NAME`).
pub const EVENTS_GROUP: &str = "mptcp_pm_events";
/// Version written in requests (`MPTCP_PM_VER`).
pub const FAMILY_VERSION: u8 = 1;

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
    /// Attributes passed over: unknown types, known ones of an odd size.
    pub skipped: Skipped,
}

impl Event {
    /// An event of `kind` with no fields yet (what a decoder fills in).
    pub fn new(kind: EventKind) -> Event {
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
            skipped: Skipped::default(),
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
    /// Attributes passed over: unknown types, known ones of an odd size.
    pub skipped: Skipped,
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
    /// Attributes passed over: unknown types, known ones of an odd size.
    pub skipped: Skipped,
}

impl FamilyInfo {
    pub fn group(&self, name: &str) -> Option<u32> {
        self.groups.iter().find(|(n, _)| n == name).map(|(_, id)| *id)
    }
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
    /// The kernel's refusal of command `cmd`, with what its ack said.
    pub(super) fn kernel(cmd: &str, e: crate::netlink::NlErr) -> PmError {
        PmError::Kernel { cmd: cmd.into(), errno: e.errno, message: e.message, missing_attr: e.missing_attr }
    }
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
