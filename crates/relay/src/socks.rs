//! SOCKS5 wire format (RFC 1928) and username/password sub-negotiation
//! (RFC 1929) as pure functions over bytes, so they can be property-tested and
//! fuzzed.
//!
//! Every parser takes the bytes received so far and answers `Incomplete`
//! (read more), `Done(value, consumed)` or an error saying which reply the
//! server should send. Nothing here does I/O, resolves names or panics on any
//! input.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

pub const VERSION: u8 = 5;
pub const AUTH_VERSION: u8 = 1;

pub const METHOD_NONE: u8 = 0x00;
pub const METHOD_USERPASS: u8 = 0x02;
pub const METHOD_UNACCEPTABLE: u8 = 0xff;

pub const CMD_CONNECT: u8 = 1;
pub const CMD_BIND: u8 = 2;
pub const CMD_UDP_ASSOCIATE: u8 = 3;

const ATYP_V4: u8 = 1;
const ATYP_DOMAIN: u8 = 3;
const ATYP_V6: u8 = 4;

/// Reply codes of RFC 1928 §6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[repr(u8)]
pub enum Reply {
    Succeeded = 0,
    GeneralFailure = 1,
    NotAllowed = 2,
    NetworkUnreachable = 3,
    HostUnreachable = 4,
    ConnectionRefused = 5,
    TtlExpired = 6,
    CommandNotSupported = 7,
    AddressTypeNotSupported = 8,
}

impl Reply {
    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(c: u8) -> Option<Reply> {
        Some(match c {
            0 => Reply::Succeeded,
            1 => Reply::GeneralFailure,
            2 => Reply::NotAllowed,
            3 => Reply::NetworkUnreachable,
            4 => Reply::HostUnreachable,
            5 => Reply::ConnectionRefused,
            6 => Reply::TtlExpired,
            7 => Reply::CommandNotSupported,
            8 => Reply::AddressTypeNotSupported,
            _ => return None,
        })
    }

    /// The reply for a failed `connect` (or a chain hop failing with `e`).
    pub fn from_io(e: &std::io::Error) -> Reply {
        use std::io::ErrorKind as K;
        match e.kind() {
            K::ConnectionRefused => Reply::ConnectionRefused,
            K::TimedOut => Reply::TtlExpired,
            K::PermissionDenied => Reply::NotAllowed,
            K::NetworkUnreachable => Reply::NetworkUnreachable,
            K::HostUnreachable | K::AddrNotAvailable => Reply::HostUnreachable,
            _ => match e.raw_os_error() {
                Some(libc::ENETUNREACH) => Reply::NetworkUnreachable,
                Some(libc::EHOSTUNREACH) => Reply::HostUnreachable,
                _ => Reply::GeneralFailure,
            },
        }
    }
}

/// The RFC 1928 §6 wording, with the code, for messages.
impl std::fmt::Display for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = match self {
            Reply::Succeeded => "succeeded",
            Reply::GeneralFailure => "general SOCKS server failure",
            Reply::NotAllowed => "connection not allowed by ruleset",
            Reply::NetworkUnreachable => "network unreachable",
            Reply::HostUnreachable => "host unreachable",
            Reply::ConnectionRefused => "connection refused",
            Reply::TtlExpired => "TTL expired",
            Reply::CommandNotSupported => "command not supported",
            Reply::AddressTypeNotSupported => "address type not supported",
        };
        write!(f, "{text} (reply {})", self.code())
    }
}

/// A destination as the client named it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    Ip(SocketAddr),
    /// Domain name (1..=255 bytes, not necessarily valid UTF-8 on the wire; we
    /// keep only UTF-8 names) and port.
    Domain(String, u16),
}

impl Target {
    pub fn port(&self) -> u16 {
        match self {
            Target::Ip(a) => a.port(),
            Target::Domain(_, p) => *p,
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Ip(a) => write!(f, "{a}"),
            Target::Domain(h, p) => write!(f, "{h}:{p}"),
        }
    }
}

/// Outcome of parsing a prefix of the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parse<T> {
    /// More bytes are needed.
    Incomplete,
    /// Parsed, using this many bytes.
    Done(T, usize),
}

/// Why a message is rejected, and what to answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("not SOCKS version 5 (first byte {0:#04x})")]
    Version(u8),
    #[error("greeting offers no methods")]
    NoMethods,
    #[error("reserved byte is {0:#04x}, not 0")]
    Reserved(u8),
    #[error("unknown address type {0:#04x}")]
    AddressType(u8),
    #[error("empty or non-UTF-8 domain name")]
    BadDomain,
    #[error("auth sub-negotiation version {0:#04x}, not 1")]
    AuthVersion(u8),
    #[error("unknown reply code {0:#04x}")]
    ReplyCode(u8),
}

impl WireError {
    /// The reply a server sends for a bad request (greeting errors have none).
    pub fn reply(&self) -> Reply {
        match self {
            WireError::AddressType(_) => Reply::AddressTypeNotSupported,
            _ => Reply::GeneralFailure,
        }
    }
}

/// Client greeting: `VER NMETHODS METHODS...`. Returns the offered methods.
pub fn parse_greeting(b: &[u8]) -> Result<Parse<Vec<u8>>, WireError> {
    let Some(&ver) = b.first() else { return Ok(Parse::Incomplete) };
    if ver != VERSION {
        return Err(WireError::Version(ver));
    }
    let Some(&n) = b.get(1) else { return Ok(Parse::Incomplete) };
    if n == 0 {
        return Err(WireError::NoMethods);
    }
    let end = 2 + n as usize;
    match b.get(2..end) {
        Some(m) => Ok(Parse::Done(m.to_vec(), end)),
        None => Ok(Parse::Incomplete),
    }
}

/// Username and password bytes of an RFC 1929 request.
pub type Credentials = (Vec<u8>, Vec<u8>);

/// RFC 1929 request: `VER ULEN UNAME PLEN PASSWD`.
pub fn parse_userpass(b: &[u8]) -> Result<Parse<Credentials>, WireError> {
    let Some(&ver) = b.first() else { return Ok(Parse::Incomplete) };
    if ver != AUTH_VERSION {
        return Err(WireError::AuthVersion(ver));
    }
    let Some(&ulen) = b.get(1) else { return Ok(Parse::Incomplete) };
    let u_end = 2 + ulen as usize;
    let Some(user) = b.get(2..u_end) else { return Ok(Parse::Incomplete) };
    let Some(&plen) = b.get(u_end) else { return Ok(Parse::Incomplete) };
    let p_end = u_end + 1 + plen as usize;
    let Some(pass) = b.get(u_end + 1..p_end) else { return Ok(Parse::Incomplete) };
    Ok(Parse::Done((user.to_vec(), pass.to_vec()), p_end))
}

/// Parses `ATYP ADDR PORT` starting at `b[0]`; returns the target and its length.
fn parse_addr(b: &[u8]) -> Result<Parse<Target>, WireError> {
    let Some(&atyp) = b.first() else { return Ok(Parse::Incomplete) };
    let port_at = |at: usize| -> Option<u16> { b.get(at..at + 2).map(|p| u16::from_be_bytes([p[0], p[1]])) };
    match atyp {
        ATYP_V4 => {
            let Some(a) = b.get(1..5) else { return Ok(Parse::Incomplete) };
            let Some(port) = port_at(5) else { return Ok(Parse::Incomplete) };
            let ip = Ipv4Addr::new(a[0], a[1], a[2], a[3]);
            Ok(Parse::Done(Target::Ip(SocketAddr::new(IpAddr::V4(ip), port)), 7))
        }
        ATYP_V6 => {
            let Some(a) = b.get(1..17) else { return Ok(Parse::Incomplete) };
            let Some(port) = port_at(17) else { return Ok(Parse::Incomplete) };
            let mut o = [0u8; 16];
            o.copy_from_slice(a);
            Ok(Parse::Done(Target::Ip(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(o)), port)), 19))
        }
        ATYP_DOMAIN => {
            let Some(&len) = b.get(1) else { return Ok(Parse::Incomplete) };
            let end = 2 + len as usize;
            let Some(name) = b.get(2..end) else { return Ok(Parse::Incomplete) };
            let Some(port) = port_at(end) else { return Ok(Parse::Incomplete) };
            let name = std::str::from_utf8(name).map_err(|_| WireError::BadDomain)?;
            if name.is_empty() {
                return Err(WireError::BadDomain);
            }
            Ok(Parse::Done(Target::Domain(name.to_string(), port), end + 2))
        }
        other => Err(WireError::AddressType(other)),
    }
}

/// A client request: `VER CMD RSV ATYP DST.ADDR DST.PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub command: u8,
    pub target: Target,
}

/// Parses a request. An unknown command is returned as is (the server answers
/// 7), so that the reply can be sent after the whole request was read.
pub fn parse_request(b: &[u8]) -> Result<Parse<Request>, WireError> {
    let Some(&ver) = b.first() else { return Ok(Parse::Incomplete) };
    if ver != VERSION {
        return Err(WireError::Version(ver));
    }
    let Some(&command) = b.get(1) else { return Ok(Parse::Incomplete) };
    let Some(&rsv) = b.get(2) else { return Ok(Parse::Incomplete) };
    if rsv != 0 {
        return Err(WireError::Reserved(rsv));
    }
    match parse_addr(&b[3..])? {
        Parse::Incomplete => Ok(Parse::Incomplete),
        Parse::Done(target, n) => Ok(Parse::Done(Request { command, target }, 3 + n)),
    }
}

/// A server reply: `VER REP RSV ATYP BND.ADDR BND.PORT` (what a chain hop reads).
pub fn parse_reply(b: &[u8]) -> Result<Parse<(Reply, Target)>, WireError> {
    let Some(&ver) = b.first() else { return Ok(Parse::Incomplete) };
    if ver != VERSION {
        return Err(WireError::Version(ver));
    }
    let Some(&rep) = b.get(1) else { return Ok(Parse::Incomplete) };
    let reply = Reply::from_code(rep).ok_or(WireError::ReplyCode(rep))?;
    if b.len() < 3 {
        return Ok(Parse::Incomplete);
    }
    match parse_addr(&b[3..])? {
        Parse::Incomplete => Ok(Parse::Incomplete),
        Parse::Done(t, n) => Ok(Parse::Done((reply, t), 3 + n)),
    }
}

/// Two-byte answers: method selection `VER METHOD` or auth status `1 STATUS`.
pub fn parse_pair(b: &[u8], version: u8) -> Result<Parse<u8>, WireError> {
    match b.get(..2) {
        None => Ok(Parse::Incomplete),
        Some([v, _]) if *v != version => {
            Err(if version == VERSION { WireError::Version(*v) } else { WireError::AuthVersion(*v) })
        }
        Some(p) => Ok(Parse::Done(p[1], 2)),
    }
}

fn push_addr(out: &mut Vec<u8>, t: &Target) -> Result<(), WireError> {
    match t {
        Target::Ip(SocketAddr::V4(a)) => {
            out.push(ATYP_V4);
            out.extend_from_slice(&a.ip().octets());
            out.extend_from_slice(&a.port().to_be_bytes());
        }
        Target::Ip(SocketAddr::V6(a)) => {
            out.push(ATYP_V6);
            out.extend_from_slice(&a.ip().octets());
            out.extend_from_slice(&a.port().to_be_bytes());
        }
        Target::Domain(h, p) => {
            let len = u8::try_from(h.len()).map_err(|_| WireError::BadDomain)?;
            if len == 0 {
                return Err(WireError::BadDomain);
            }
            out.push(ATYP_DOMAIN);
            out.push(len);
            out.extend_from_slice(h.as_bytes());
            out.extend_from_slice(&p.to_be_bytes());
        }
    }
    Ok(())
}

/// Encodes a reply with a bound address (all zeros IPv4 when unknown).
pub fn encode_reply(reply: Reply, bound: Option<SocketAddr>) -> Vec<u8> {
    let mut out = vec![VERSION, reply.code(), 0];
    let bound = bound.unwrap_or_else(|| SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0));
    // An IP target always encodes.
    let _ = push_addr(&mut out, &Target::Ip(bound));
    out
}

/// Encodes a CONNECT request (what a chain hop sends).
pub fn encode_connect(t: &Target) -> Result<Vec<u8>, WireError> {
    let mut out = vec![VERSION, CMD_CONNECT, 0];
    push_addr(&mut out, t)?;
    Ok(out)
}

/// Encodes an RFC 1929 request; `None` if a field is longer than 255 bytes.
pub fn encode_userpass(user: &[u8], pass: &[u8]) -> Option<Vec<u8>> {
    let ul = u8::try_from(user.len()).ok()?;
    let pl = u8::try_from(pass.len()).ok()?;
    let mut out = vec![AUTH_VERSION, ul];
    out.extend_from_slice(user);
    out.push(pl);
    out.extend_from_slice(pass);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn greeting_is_parsed_incrementally() {
        let g = [5, 2, 0, 2, 0xaa];
        assert_eq!(parse_greeting(&g[..0]), Ok(Parse::Incomplete));
        assert_eq!(parse_greeting(&g[..3]), Ok(Parse::Incomplete));
        assert_eq!(parse_greeting(&g), Ok(Parse::Done(vec![0, 2], 4)));
        assert_eq!(parse_greeting(&[4, 1, 0]), Err(WireError::Version(4)));
        assert_eq!(parse_greeting(&[5, 0]), Err(WireError::NoMethods));
    }

    #[test]
    fn requests_of_all_address_types() {
        let v4 = [5, 1, 0, 1, 127, 0, 0, 1, 0x1f, 0x90];
        assert_eq!(
            parse_request(&v4),
            Ok(Parse::Done(
                Request { command: 1, target: Target::Ip("127.0.0.1:8080".parse().unwrap()) },
                10
            ))
        );
        let mut v6 = vec![5, 1, 0, 4];
        v6.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
        v6.extend_from_slice(&[0, 80]);
        assert!(
            matches!(parse_request(&v6), Ok(Parse::Done(Request { target: Target::Ip(a), .. }, 22)) if a.port() == 80)
        );
        let mut d = vec![5, 3, 0, 3, 9];
        d.extend_from_slice(b"localhost");
        d.extend_from_slice(&[1, 0]);
        assert_eq!(
            parse_request(&d),
            Ok(Parse::Done(Request { command: 3, target: Target::Domain("localhost".into(), 256) }, d.len()))
        );
        assert_eq!(parse_request(&d[..d.len() - 1]), Ok(Parse::Incomplete));
        assert_eq!(parse_request(&[5, 1, 0, 9]), Err(WireError::AddressType(9)));
        assert_eq!(WireError::AddressType(9).reply(), Reply::AddressTypeNotSupported);
        assert_eq!(parse_request(&[5, 1, 0, 3, 0, 0, 80]), Err(WireError::BadDomain));
    }

    #[test]
    fn encode_then_parse_round_trips() {
        for t in [
            Target::Ip("10.1.2.3:443".parse().unwrap()),
            Target::Ip("[2001:db8::1]:22".parse().unwrap()),
            Target::Domain("example.test".into(), 8443),
        ] {
            let req = encode_connect(&t).unwrap();
            assert_eq!(
                parse_request(&req),
                Ok(Parse::Done(Request { command: 1, target: t.clone() }, req.len()))
            );
        }
        let r = encode_reply(Reply::ConnectionRefused, None);
        assert_eq!(
            parse_reply(&r),
            Ok(Parse::Done((Reply::ConnectionRefused, Target::Ip("0.0.0.0:0".parse().unwrap())), 10))
        );
        let up = encode_userpass(b"alice", b"s3cret").unwrap();
        assert_eq!(parse_userpass(&up), Ok(Parse::Done((b"alice".to_vec(), b"s3cret".to_vec()), up.len())));
        assert_eq!(encode_userpass(&[b'x'; 256], b""), None);
        assert!(encode_connect(&Target::Domain("x".repeat(256), 1)).is_err());
    }

    proptest! {
        #[test]
        fn parsers_never_panic_and_never_overrun(b in proptest::collection::vec(any::<u8>(), 0..600)) {
            for r in [parse_greeting(&b).map(|p| match p { Parse::Done(_, n) => n, _ => 0 }),
                      parse_userpass(&b).map(|p| match p { Parse::Done(_, n) => n, _ => 0 }),
                      parse_request(&b).map(|p| match p { Parse::Done(_, n) => n, _ => 0 }),
                      parse_reply(&b).map(|p| match p { Parse::Done(_, n) => n, _ => 0 }),
                      parse_pair(&b, VERSION).map(|p| match p { Parse::Done(_, n) => n, _ => 0 })].into_iter().flatten() {
                prop_assert!(r <= b.len());
            }
        }

        #[test]
        fn a_prefix_of_a_valid_request_is_incomplete(host in "[a-z]{1,40}", port in any::<u16>(), cut in 0usize..50) {
            let req = encode_connect(&Target::Domain(host, port)).unwrap();
            let cut = cut.min(req.len() - 1);
            prop_assert_eq!(parse_request(&req[..cut]), Ok(Parse::Incomplete));
        }
    }
}
