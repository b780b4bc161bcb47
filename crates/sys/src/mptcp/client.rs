//! The sockets of the path-manager interface: [`PmClient`] sends commands
//! and waits for their answers, [`EventListener`] joins the events group.
//! Both are [`NlSocket`]s of `NETLINK_GENERIC`; the bytes are the codec's.

use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;

use super::codec::{
    absorb, get_family_request, parse_endpoint, parse_event_datagram, parse_family, parse_limits, Incoming,
    Refused, Request, GENL_ID_CTRL,
};
use super::types::{Endpoint, FamilyInfo, Limits, PmAddr, PmError, PmResult, EVENTS_GROUP, FAMILY_NAME};
use crate::netlink::{NlSocket, ParseError};
use crate::{sockopt, Error};

/// How long a command waits for the kernel's answer.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// A generic netlink socket with extended acks and the command timeout.
fn open_socket() -> Result<NlSocket, Error> {
    let sock = NlSocket::open(libc::NETLINK_GENERIC, "NETLINK_GENERIC")?;
    sock.request_extended_acks();
    sock.set_recv_timeout(COMMAND_TIMEOUT)?;
    Ok(sock)
}

/// [`open_socket`], with `mptcp_pm` resolved on it.
fn open_resolved() -> PmResult<(NlSocket, FamilyInfo)> {
    let mut sock = open_socket()?;
    let family = resolve_on(&mut sock, FAMILY_NAME)?;
    Ok((sock, family))
}

/// Runs one request/answer exchange on `sock`: returns the genl payloads of
/// the answer messages (for GET requests and dumps), after the ACK or DONE.
fn transact(sock: &mut NlSocket, msg: &[u8], seq: u32, reply_type: u16, op: &str) -> PmResult<Vec<Vec<u8>>> {
    sock.send(msg, op)?;
    let mut out = Vec::new();
    loop {
        let Some(datagram) = sock.recv(0, op)? else {
            return Err(PmError::Timeout { cmd: op.into(), secs: COMMAND_TIMEOUT.as_secs() });
        };
        match absorb(datagram, seq, reply_type, &mut out) {
            Ok(true) => return Ok(out),
            Ok(false) => {}
            Err(Refused::Kernel(e)) => return Err(PmError::kernel(op, e)),
            Err(Refused::Malformed(err)) => return Err(PmError::Malformed { cmd: op.into(), err }),
        }
    }
}

/// Looks up a generic netlink family (id, version, multicast groups) by
/// name through `nlctrl`, in the calling thread's network namespace.
pub fn resolve_family(name: &str) -> PmResult<FamilyInfo> {
    resolve_on(&mut open_socket()?, name)
}

fn resolve_on(sock: &mut NlSocket, name: &str) -> PmResult<FamilyInfo> {
    let seq = 1;
    let op = format!("nlctrl GETFAMILY {name}");
    match transact(sock, &get_family_request(name, seq), seq, GENL_ID_CTRL, &op) {
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
    sock: NlSocket,
    family: FamilyInfo,
    seq: u32,
}

impl PmClient {
    /// Opens a generic netlink socket in the calling thread's namespace and
    /// resolves `mptcp_pm` ([`PmError::NoFamily`] without MPTCP).
    pub fn open() -> PmResult<PmClient> {
        let (sock, family) = open_resolved()?;
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
        parse_limits(first)
            .map(|(l, _)| l)
            .map_err(|err| PmError::Malformed { cmd: "GET_LIMITS".into(), err })
    }
}

/// A socket subscribed to the `mptcp_pm_events` group of the namespace it
/// was opened in. Joining needs CAP_NET_ADMIN.
pub struct EventListener {
    sock: NlSocket,
    family: FamilyInfo,
}

impl EventListener {
    /// Resolves the family and joins its events group.
    pub fn open() -> PmResult<EventListener> {
        let (sock, family) = open_resolved()?;
        let group = family
            .group(EVENTS_GROUP)
            .ok_or(PmError::NoGroup { family: FAMILY_NAME.into(), group: EVENTS_GROUP.into() })?;
        sock.join_group(group, "join mptcp_pm_events (NETLINK_ADD_MEMBERSHIP)")?;
        // A larger buffer rides out bursts of connections; capped by
        // net.core.rmem_max, so failure to get it all is not an error.
        let _ = sockopt::set_recv_buffer(&sock, 1 << 20);
        Ok(EventListener { sock, family })
    }

    pub fn family(&self) -> &FamilyInfo {
        &self.family
    }

    /// Waits up to `timeout` (forever with `None`) for one datagram and
    /// decodes it. An empty vector means the wait timed out, or a signal
    /// interrupted it (the caller gets to look at its flags).
    pub fn recv(&mut self, timeout: Option<Duration>) -> PmResult<Vec<Incoming>> {
        const OP: &str = "mptcp_pm events";
        if !self.sock.wait_readable(timeout, OP)? {
            return Ok(Vec::new());
        }
        match self.sock.recv(libc::MSG_DONTWAIT, OP) {
            Ok(Some(datagram)) => Ok(parse_event_datagram(datagram, self.family.id)),
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
        self.sock.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::super::flags;
    use super::*;

    /// Root: the family resolves in this namespace, and a command with a
    /// token no connection has fails naming the command and the kernel's
    /// reason.
    #[test]
    fn root_bad_token_names_the_command() {
        crate::testing::require_root();
        let mut pm = PmClient::open().expect("mptcp_pm must be registered (MPTCP on)");
        assert!(pm.family().group(EVENTS_GROUP).is_some(), "{:?}", pm.family());
        assert_eq!(resolve_family(FAMILY_NAME).expect("resolve").id, pm.family().id);
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

    /// A family that does not exist is named as such, not as a bare ENOENT.
    #[test]
    fn unknown_family_is_named() {
        let err = resolve_family("tcpaccel_nope").expect_err("no such family");
        assert!(matches!(&err, PmError::NoFamily { name } if name == "tcpaccel_nope"), "{err}");
        assert!(err.is_unsupported());
    }
}
