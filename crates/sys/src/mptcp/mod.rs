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
//!
//! The module is split by what each part may do: `types` holds the values
//! (commands, events, addresses, errors), `codec` turns them into bytes and
//! back without a socket, `client` owns the sockets. What callers use is
//! re-exported here, under the paths they have always used.

mod client;
mod codec;
mod types;

/// The `nlctrl` family lookup, for the other generic netlink families (`tcp_metrics`).
pub(crate) use codec::{get_family_request, GENL_ID_CTRL};

/// Why a message could not be decoded (the netlink layer's error).
pub use crate::netlink::ParseError;
pub use client::{resolve_family, EventListener, PmClient};
pub use codec::{
    parse_endpoint, parse_event, parse_event_datagram, parse_family, parse_limits, Incoming, Request,
};
pub use types::{
    addr_attr, attr, event_attr, flags, Command, Endpoint, Event, EventKind, FamilyInfo, Limits, PmAddr,
    PmError, PmResult, EVENTS_GROUP, FAMILY_NAME, FAMILY_VERSION,
};
