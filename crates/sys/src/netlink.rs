//! The one netlink layer of the crate, under sock_diag ([`crate::diag`]) and
//! the MPTCP path manager ([`crate::mptcp`]).
//!
//! What it is, in two halves that do not know of each other:
//! - the codec, pure functions over byte slices: the message header
//!   ([`Header`](crate::netlink::Header), `struct nlmsghdr`), the generic netlink header
//!   ([`GenlHeader`](crate::netlink::GenlHeader)), a datagram splitter ([`messages`](crate::netlink::messages)), the reading of
//!   acks, errors and extended-ack TLVs ([`Answer`](crate::netlink::Answer), [`NlErr`](crate::netlink::NlErr)), an attribute
//!   walker ([`attrs`](crate::netlink::attrs)) and builder ([`AttrBuf`](crate::netlink::AttrBuf)). Encoders append to a
//!   `Vec<u8>`; parsers check every length and return a [`ParseError`](crate::netlink::ParseError) that
//!   says what was short or broken and at which byte, never panic. Family
//!   decoders built on the walker count the attributes they pass over
//!   (unknown types, known ones of an odd size) in a [`Skipped`](crate::netlink::Skipped). The
//!   crate's fuzz targets (`fuzz/sys`) run all of them on arbitrary bytes.
//! - the socket ([`NlSocket`](crate::netlink::NlSocket)): open and bind, send and receive with EINTR
//!   retried by the crate's one EINTR policy ([`retry_eintr`](crate::io::retry_eintr)), receive timeouts, waiting for
//!   readability, multicast membership. It moves bytes and knows no message.
//!
//! What it is not: no family's messages (`inet_diag_msg`, `mptcp_pm`
//! commands: their modules), no request/answer policy (which kinds end an
//! exchange is each caller's business, decided on [`Answer`](crate::netlink::Answer)s).
//!
//! Layouts follow `include/uapi/linux/netlink.h` and `genetlink.h`. Netlink
//! is host-endian except where a family says otherwise.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

use crate::sockopt;
use crate::{Error, Result};

// ------------------------------------------------------------ constants

/// `sizeof(struct nlmsghdr)`.
pub const NLMSG_HDRLEN: usize = 16;
/// `sizeof(struct genlmsghdr)`.
pub const GENL_HDRLEN: usize = 4;

/// Message types every family shares.
pub const NLMSG_NOOP: u16 = 1;
pub const NLMSG_ERROR: u16 = 2;
pub const NLMSG_DONE: u16 = 3;
pub const NLMSG_OVERRUN: u16 = 4;

/// Header flags.
pub const NLM_F_REQUEST: u16 = 0x1;
pub const NLM_F_MULTI: u16 = 0x2;
pub const NLM_F_ACK: u16 = 0x4;
/// A dump whose set changed while it ran (the result is still usable).
pub const NLM_F_DUMP_INTR: u16 = 0x10;
/// `NLM_F_ROOT | NLM_F_MATCH`.
pub const NLM_F_DUMP: u16 = 0x100 | 0x200;
/// In an NLMSG_ERROR: the echoed request was cut to its header.
pub const NLM_F_CAPPED: u16 = 0x100;
/// In an NLMSG_ERROR: extended-ack TLVs follow.
pub const NLM_F_ACK_TLVS: u16 = 0x200;

/// `NLA_F_NESTED` and `NLA_F_NET_BYTEORDER` live in the top two bits of an
/// attribute's type; the rest is the type proper.
pub const NLA_F_NESTED: u16 = 0x8000;
pub const NLA_TYPE_MASK: u16 = 0x3fff;

/// `enum nlmsgerr_attrs`: the extended-ack TLVs.
pub const NLMSGERR_ATTR_MSG: u16 = 1;
pub const NLMSGERR_ATTR_OFFS: u16 = 2;
pub const NLMSGERR_ATTR_MISS_TYPE: u16 = 5;

/// Socket options at `SOL_NETLINK`.
pub const SOL_NETLINK: libc::c_int = 270;
pub const NETLINK_ADD_MEMBERSHIP: libc::c_int = 1;
pub const NETLINK_CAP_ACK: libc::c_int = 10;
pub const NETLINK_EXT_ACK: libc::c_int = 11;

// ---------------------------------------------------------- byte helpers

/// Netlink lengths are padded to 4 bytes (NLMSG_ALIGN / NLA_ALIGN).
pub const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

pub fn u16_ne(b: &[u8], at: usize) -> Option<u16> {
    fixed(b.get(at..at.checked_add(2)?)?).map(u16::from_ne_bytes)
}

pub fn u32_ne(b: &[u8], at: usize) -> Option<u32> {
    fixed(b.get(at..at.checked_add(4)?)?).map(u32::from_ne_bytes)
}

/// A fixed-size payload: `None` unless the length is exactly `N`.
pub fn fixed<const N: usize>(d: &[u8]) -> Option<[u8; N]> {
    <[u8; N]>::try_from(d).ok()
}

/// A NUL-terminated (or unterminated) C string attribute, lossily decoded.
pub fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

// ---------------------------------------------------------------- errors

/// Why kernel bytes could not be decoded; each variant says what was read
/// and where. Offsets (`at`) count bytes from the start of the input the
/// caller handed in: the datagram for message-level functions
/// ([`messages`], `diag::parse_datagram`), the payload for payload-level
/// ones (each says which).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A fixed-size structure (`nlmsghdr`, `genlmsghdr`, `nlmsgerr`,
    /// `inet_diag_msg`, `tcp_info`'s base) cut short.
    #[error("{what} truncated at byte {at}: needs {need} bytes, {have} left")]
    Truncated { what: &'static str, at: usize, need: usize, have: usize },
    /// A message whose length field is below its header's own size or runs
    /// past the end of the input.
    #[error("{what} at byte {at} claims length {len}, {left} bytes left")]
    BadLength { what: &'static str, at: usize, len: usize, left: usize },
    /// Fewer than the 4 bytes of an attribute header left at the end of
    /// the attributes of `within`.
    #[error("attribute of {within} truncated at byte {at}: needs 4 bytes, {have} left")]
    AttrTruncated { within: &'static str, at: usize, have: usize },
    /// An attribute whose length is below 4 or runs past its container.
    #[error("attribute of {within} at byte {at} claims length {len}, {left} bytes left")]
    AttrBadLength { within: &'static str, at: usize, len: usize, left: usize },
    #[error("unexpected netlink message type {kind} at byte {at}")]
    UnexpectedType { at: usize, kind: u16 },
    #[error("answer lacks attribute {what}")]
    Missing { what: &'static str },
    #[error("unknown address family {family} at byte {at}")]
    BadFamily { at: usize, family: u16 },
    /// The kernel answered a request with an error, inside a datagram that
    /// was otherwise well formed.
    #[error("kernel error {errno} ({}) in the answer", io::Error::from_raw_os_error(*errno))]
    Kernel { errno: i32 },
}

impl ParseError {
    /// The same error with its offset counted from `by` bytes earlier: a
    /// payload parser's error placed in the datagram that held the payload.
    pub fn shifted(self, by: usize) -> ParseError {
        use ParseError::*;
        match self {
            Truncated { what, at, need, have } => Truncated { what, at: at + by, need, have },
            BadLength { what, at, len, left } => BadLength { what, at: at + by, len, left },
            AttrTruncated { within, at, have } => AttrTruncated { within, at: at + by, have },
            AttrBadLength { within, at, len, left } => AttrBadLength { within, at: at + by, len, left },
            UnexpectedType { at, kind } => UnexpectedType { at: at + by, kind },
            BadFamily { at, family } => BadFamily { at: at + by, family },
            e @ (Missing { .. } | Kernel { .. }) => e,
        }
    }

    /// The offset the error names, if it names one.
    pub fn offset(&self) -> Option<usize> {
        use ParseError::*;
        match self {
            Truncated { at, .. }
            | BadLength { at, .. }
            | AttrTruncated { at, .. }
            | AttrBadLength { at, .. }
            | UnexpectedType { at, .. }
            | BadFamily { at, .. } => Some(*at),
            Missing { .. } | Kernel { .. } => None,
        }
    }
}

/// What a decoder passed over without failing: attributes of types it does
/// not know (a newer kernel's additions) and attributes of a known type
/// whose payload has another size than the one it reads. Neither ends the
/// decoding; both are counted so that a caller sees them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    pub unknown: u32,
    pub odd_size: u32,
}

impl Skipped {
    /// Counts one attribute of an unknown type.
    pub fn unknown(&mut self) {
        self.unknown = self.unknown.saturating_add(1);
    }
    /// A known attribute's payload as exactly `N` bytes; another size is
    /// counted and gives `None`.
    pub fn sized<const N: usize>(&mut self, d: &[u8]) -> Option<[u8; N]> {
        let v = fixed::<N>(d);
        if v.is_none() {
            self.odd_size = self.odd_size.saturating_add(1);
        }
        v
    }
    /// Nothing was skipped.
    pub fn is_empty(&self) -> bool {
        *self == Skipped::default()
    }
}

// ---------------------------------------------------------------- headers

/// `struct nlmsghdr`. `len` counts the header, the payload and its padding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub len: u32,
    pub kind: u16,
    pub flags: u16,
    pub seq: u32,
    /// Port id of the sender; 0 in requests (the kernel fills it in).
    pub pid: u32,
}

impl Header {
    /// Appends the 16 header bytes.
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.len.to_ne_bytes());
        out.extend_from_slice(&self.kind.to_ne_bytes());
        out.extend_from_slice(&self.flags.to_ne_bytes());
        out.extend_from_slice(&self.seq.to_ne_bytes());
        out.extend_from_slice(&self.pid.to_ne_bytes());
    }

    /// Reads the header at byte `at` of datagram `buf` and checks that the
    /// length it claims fits in what is left.
    pub fn parse(buf: &[u8], at: usize) -> std::result::Result<Header, ParseError> {
        let b = match buf.get(at..) {
            Some(b) if b.len() >= NLMSG_HDRLEN => b,
            b => {
                let have = b.map_or(0, <[u8]>::len);
                return Err(ParseError::Truncated {
                    what: "netlink message header",
                    at,
                    need: NLMSG_HDRLEN,
                    have,
                });
            }
        };
        // In bounds: `b` holds at least the 16 header bytes.
        let u32_at = |i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u16_at = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        let h = Header { len: u32_at(0), kind: u16_at(4), flags: u16_at(6), seq: u32_at(8), pid: u32_at(12) };
        let claimed = h.len as usize;
        if claimed < NLMSG_HDRLEN || claimed > b.len() {
            return Err(ParseError::BadLength { what: "netlink message", at, len: claimed, left: b.len() });
        }
        Ok(h)
    }
}

/// Appends one whole message: header (length computed), the body parts in
/// order, then padding to 4 bytes. Requests are built by appending, so a
/// batch of them is one `Vec` sent as one datagram.
pub fn emit_message(out: &mut Vec<u8>, kind: u16, flags: u16, seq: u32, body: &[&[u8]]) {
    let len = NLMSG_HDRLEN + body.iter().map(|b| b.len()).sum::<usize>();
    out.reserve(align4(len));
    let start = out.len();
    Header { len: len as u32, kind, flags, seq, pid: 0 }.emit(out);
    for b in body {
        out.extend_from_slice(b);
    }
    out.resize(start + align4(len), 0);
}

/// [`emit_message`] into a fresh vector.
pub fn message(kind: u16, flags: u16, seq: u32, body: &[&[u8]]) -> Vec<u8> {
    let mut m = Vec::new();
    emit_message(&mut m, kind, flags, seq, body);
    m
}

/// One generic netlink message: netlink header, genl header, attributes.
pub fn genl_message(family: u16, flags: u16, seq: u32, genl: GenlHeader, attrs: &[u8]) -> Vec<u8> {
    message(family, flags, seq, &[&genl.bytes(), attrs])
}

/// `struct genlmsghdr`: command, version, two reserved bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenlHeader {
    pub cmd: u8,
    pub version: u8,
}

impl GenlHeader {
    pub fn bytes(&self) -> [u8; GENL_HDRLEN] {
        [self.cmd, self.version, 0, 0]
    }

    /// Splits a generic netlink payload into its header and attributes.
    pub fn parse(genl: &[u8]) -> std::result::Result<(GenlHeader, &[u8]), ParseError> {
        match genl {
            [cmd, version, _, _, rest @ ..] => Ok((GenlHeader { cmd: *cmd, version: *version }, rest)),
            _ => Err(ParseError::Truncated {
                what: "generic netlink header",
                at: 0,
                need: GENL_HDRLEN,
                have: genl.len(),
            }),
        }
    }
}

// --------------------------------------------------------------- messages

/// One message of a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Msg<'a> {
    /// Where the message's header starts in its datagram; its payload
    /// starts `NLMSG_HDRLEN` bytes later.
    pub at: usize,
    pub header: Header,
    /// The bytes after the header, without the padding.
    pub payload: &'a [u8],
}

/// The messages of a datagram, in order; the first malformed header is
/// yielded as an error and ends the walk.
pub fn messages(buf: &[u8]) -> Messages<'_> {
    Messages { buf, at: 0, failed: false }
}

pub struct Messages<'a> {
    buf: &'a [u8],
    at: usize,
    failed: bool,
}

impl<'a> Iterator for Messages<'a> {
    type Item = std::result::Result<Msg<'a>, ParseError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.at >= self.buf.len() {
            return None;
        }
        let at = self.at;
        match Header::parse(self.buf, at) {
            Ok(header) => {
                let end = at + header.len as usize;
                // The last message may omit its padding.
                self.at = (at + align4(header.len as usize)).min(self.buf.len());
                Some(Ok(Msg { at, header, payload: &self.buf[at + NLMSG_HDRLEN..end] }))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// A decoded NLMSG_ERROR (or an error-carrying NLMSG_DONE): the errno as a
/// positive number and what the extended ack said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NlErr {
    pub errno: i32,
    /// `NLMSGERR_ATTR_MSG`, e.g. "invalid token".
    pub message: Option<String>,
    /// `NLMSGERR_ATTR_OFFS`: byte of the request the kernel objected to.
    pub offset: Option<u32>,
    /// `NLMSGERR_ATTR_MISS_TYPE`: the attribute the request lacked.
    pub missing_attr: Option<u32>,
}

/// What a message says about the request it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer<'a> {
    /// A family message (`Msg::header.kind` says which); its payload.
    Data(&'a [u8]),
    /// NLMSG_ERROR with error 0: the request succeeded.
    Ack,
    /// NLMSG_DONE without an error: a dump is complete.
    Done,
    /// NLMSG_ERROR with an error, or NLMSG_DONE carrying one.
    Error(NlErr),
}

impl<'a> Msg<'a> {
    /// Where the payload starts in the datagram.
    pub fn payload_at(&self) -> usize {
        self.at + NLMSG_HDRLEN
    }

    /// Classifies the message; a truncated error message is a [`ParseError`]
    /// (its offset counted in the datagram).
    pub fn answer(&self) -> std::result::Result<Answer<'a>, ParseError> {
        match self.header.kind {
            NLMSG_ERROR => {
                let e =
                    parse_nlerr(self.header.flags, self.payload).map_err(|e| e.shifted(self.payload_at()))?;
                Ok(if e.errno == 0 { Answer::Ack } else { Answer::Error(e) })
            }
            // A dump's end carries an int, non-zero when the dump failed
            // midway; old kernels may send it empty.
            NLMSG_DONE => match parse_nlerr(self.header.flags, self.payload) {
                Ok(e) if e.errno != 0 => Ok(Answer::Error(e)),
                _ => Ok(Answer::Done),
            },
            _ => Ok(Answer::Data(self.payload)),
        }
    }
}

/// Decodes `struct nlmsgerr` (or a DONE's int) and the extended-ack TLVs
/// after it: with `NLM_F_CAPPED` only the echoed request's header precedes
/// them, otherwise the whole echoed request.
pub fn parse_nlerr(flags: u16, p: &[u8]) -> std::result::Result<NlErr, ParseError> {
    let raw =
        u32_ne(p, 0).ok_or(ParseError::Truncated { what: "nlmsgerr", at: 0, need: 4, have: p.len() })? as i32;
    let mut e = NlErr { errno: raw.saturating_neg(), message: None, offset: None, missing_attr: None };
    if flags & NLM_F_ACK_TLVS == 0 {
        return Ok(e);
    }
    let echoed_len = u32_ne(p, 4).unwrap_or(0) as usize;
    let tlv_at =
        if flags & NLM_F_CAPPED == 0 { 4 + align4(echoed_len.max(NLMSG_HDRLEN)) } else { 4 + NLMSG_HDRLEN };
    let Some(tlvs) = p.get(tlv_at..) else {
        return Ok(e);
    };
    // The TLVs are a courtesy: a broken one ends them, the errno stands.
    for a in attrs(tlvs, "extended ack") {
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

// ------------------------------------------------------------- attributes

/// Iterates `struct nlattr`/`rtattr` records (len u16, type u16, payload,
/// padded to 4) of `buf`, the attributes of `within` (named in errors).
pub fn attrs<'a>(buf: &'a [u8], within: &'static str) -> Attrs<'a> {
    Attrs { buf, at: 0, base: 0, within, failed: false }
}

/// The attributes that follow a message's fixed header (`what`, `len`
/// bytes: `ifinfomsg`, `rtmsg`, `tcmsg`), walked with offsets counted from
/// the start of `payload` and named as the header's; a payload shorter than
/// the header is [`ParseError::Truncated`] at 0.
pub fn attrs_after<'a>(
    payload: &'a [u8],
    what: &'static str,
    len: usize,
) -> std::result::Result<Attrs<'a>, ParseError> {
    let tail =
        payload.get(len..).ok_or(ParseError::Truncated { what, at: 0, need: len, have: payload.len() })?;
    Ok(attrs(tail, what).at_offset(len))
}

/// Yields (type without flag bits, payload); the first malformed record is
/// yielded as [`ParseError::AttrTruncated`] or [`ParseError::AttrBadLength`]
/// and ends the walk. This is the crate's one attribute walker: every
/// family's decoder (sock_diag, MPTCP PM, rtnetlink) walks with it.
pub struct Attrs<'a> {
    buf: &'a [u8],
    at: usize,
    base: usize,
    within: &'static str,
    failed: bool,
}

impl<'a> Attrs<'a> {
    /// Errors count bytes from `base` (where `buf` starts in its message)
    /// rather than from the start of `buf`.
    pub fn at_offset(mut self, base: usize) -> Self {
        self.base = base;
        self
    }

    /// Where the next attribute starts, counted like the errors' offsets.
    pub fn offset(&self) -> usize {
        self.base + self.at
    }

    /// The same walk, each attribute with the offset of its payload (what a
    /// nested walk or a structure read inside it passes on, so that its
    /// errors name bytes of the whole input).
    pub fn with_offsets(self) -> AttrsAt<'a> {
        AttrsAt(self)
    }
}

/// [`Attrs::with_offsets`]: yields (payload offset, type, payload).
pub struct AttrsAt<'a>(Attrs<'a>);

impl<'a> Iterator for AttrsAt<'a> {
    type Item = std::result::Result<(usize, u16, &'a [u8]), ParseError>;
    fn next(&mut self) -> Option<Self::Item> {
        let at = self.0.offset() + 4;
        self.0.next().map(|r| r.map(|(kind, data)| (at, kind, data)))
    }
}

impl<'a> Iterator for Attrs<'a> {
    type Item = std::result::Result<(u16, &'a [u8]), ParseError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.at >= self.buf.len() {
            return None;
        }
        let at = self.at;
        let left = self.buf.len() - at;
        let (len, kind) = match (u16_ne(self.buf, at), u16_ne(self.buf, at + 2)) {
            (Some(l), Some(k)) => (l as usize, k),
            _ => {
                self.failed = true;
                return Some(Err(ParseError::AttrTruncated {
                    within: self.within,
                    at: self.base + at,
                    have: left,
                }));
            }
        };
        if len < 4 || len > left {
            self.failed = true;
            return Some(Err(ParseError::AttrBadLength {
                within: self.within,
                at: self.base + at,
                len,
                left,
            }));
        }
        let data = &self.buf[at + 4..at + len];
        // The last attribute may omit its padding.
        self.at = (at + align4(len)).min(self.buf.len());
        Some(Ok((kind & NLA_TYPE_MASK, data)))
    }
}

/// Builds a run of attributes, with nesting; each is padded to 4 bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttrBuf {
    b: Vec<u8>,
}

impl AttrBuf {
    /// One attribute. Its length field is 16 bits: payloads are at most
    /// 65 531 bytes (every caller's are far smaller: names, numbers,
    /// addresses, a filter program).
    pub fn put(&mut self, kind: u16, data: &[u8]) {
        let len = 4 + data.len();
        debug_assert!(len <= usize::from(u16::MAX), "netlink attribute {kind} of {len} bytes");
        self.b.extend_from_slice(&(len as u16).to_ne_bytes());
        self.b.extend_from_slice(&kind.to_ne_bytes());
        self.b.extend_from_slice(data);
        self.b.resize(align4(self.b.len()), 0);
    }
    pub fn put_u8(&mut self, kind: u16, v: u8) {
        self.put(kind, &[v]);
    }
    pub fn put_u16(&mut self, kind: u16, v: u16) {
        self.put(kind, &v.to_ne_bytes());
    }
    pub fn put_u32(&mut self, kind: u16, v: u32) {
        self.put(kind, &v.to_ne_bytes());
    }
    /// A string with its terminating NUL, as `NLA_NUL_STRING` wants.
    pub fn put_str(&mut self, kind: u16, s: &str) {
        let mut z = Vec::with_capacity(s.len() + 1);
        z.extend_from_slice(s.as_bytes());
        z.push(0);
        self.put(kind, &z);
    }
    /// `inner` as one attribute flagged `NLA_F_NESTED`.
    pub fn put_nested(&mut self, kind: u16, inner: AttrBuf) {
        self.put(kind | NLA_F_NESTED, &inner.b);
    }
    pub fn as_bytes(&self) -> &[u8] {
        &self.b
    }
    pub fn into_bytes(self) -> Vec<u8> {
        self.b
    }
}

// ----------------------------------------------------------------- socket

/// The crate's EINTR policy ([`crate::io`]): a netlink call interrupted by
/// a signal is run again.
pub use crate::io::retry_eintr;

/// `sockaddr_nl` with port id 0 and no groups: the kernel as a destination,
/// "pick one for me" as a bind address.
fn kernel_addr() -> libc::sockaddr_nl {
    // SAFETY: sockaddr_nl is plain old data; all-zero is a valid value.
    let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    sa
}

/// One request on a fresh `NETLINK_ROUTE` socket of the calling thread's
/// namespace, waiting at most `timeout` for the answer to `seq`: the payload
/// of the first message of kind `want` (`Some`), or `None` for a plain ack;
/// the kernel's errno with its extended-ack text as an error.
pub fn route_request(
    req: &[u8],
    seq: u32,
    want: Option<u16>,
    op: &str,
    timeout: Duration,
) -> Result<Option<Vec<u8>>> {
    let mut s = NlSocket::open(libc::NETLINK_ROUTE, "NETLINK_ROUTE")?;
    s.set_recv_timeout(timeout)?;
    s.request_extended_acks();
    let mut got = None;
    s.exchange(req, seq, op, |kind, p| {
        if Some(kind) == want {
            got = Some(p.to_vec());
        }
        Ok(got.is_some())
    })?;
    Ok(got)
}

/// Receive buffer: the kernel caps dump datagrams near 32 KiB
/// (`netlink_dump`, `max_recvmsg_len`); twice that leaves room.
const RECV_BUF: usize = 64 * 1024;

/// A netlink socket of one protocol (`NETLINK_SOCK_DIAG`,
/// `NETLINK_GENERIC`, ...), bound in the network namespace of the thread
/// that opened it; usable from any thread after that.
pub struct NlSocket {
    fd: OwnedFd,
    buf: Vec<u8>,
}

impl NlSocket {
    /// `socket(AF_NETLINK, SOCK_RAW, protocol)` and `bind` with port id 0
    /// (the kernel picks one). `what` names the protocol in errors.
    pub fn open(protocol: libc::c_int, what: &str) -> Result<NlSocket> {
        // SAFETY: plain socket(2); the result is checked and owned at once.
        let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, protocol) };
        if fd < 0 {
            return Err(Error::last(format!("socket(AF_NETLINK, {what})")));
        }
        // SAFETY: fd is fresh, valid and owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // Port id 0: the kernel picks one.
        let sa = kernel_addr();
        // SAFETY: sa is a valid sockaddr_nl for the length given.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(Error::last(format!("bind({what} netlink socket)")));
        }
        Ok(NlSocket { fd, buf: vec![0; RECV_BUF] })
    }

    /// Bounds each blocking [`NlSocket::recv`]: after `t` it returns `None`.
    pub fn set_recv_timeout(&self, t: Duration) -> Result<()> {
        sockopt::set_recv_timeout(&self.fd, t)
    }

    /// Asks for extended acks (the kernel's reason, e.g. "invalid token")
    /// and capped ones (errors echo only the request's header). Best effort:
    /// kernels without them still send plain errors.
    pub fn request_extended_acks(&self) {
        let _ = sockopt::set_int(&self.fd, SOL_NETLINK, NETLINK_EXT_ACK, 1, "setsockopt(NETLINK_EXT_ACK)");
        let _ = sockopt::set_int(&self.fd, SOL_NETLINK, NETLINK_CAP_ACK, 1, "setsockopt(NETLINK_CAP_ACK)");
    }

    /// Joins multicast group `group` (`NETLINK_ADD_MEMBERSHIP`); `op` names it.
    pub fn join_group(&self, group: u32, op: &str) -> Result<()> {
        let g = libc::c_int::try_from(group)
            .map_err(|_| Error::Other { op: op.into(), msg: format!("group id {group} out of range") })?;
        sockopt::set_int(&self.fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, g, op)
    }

    /// Sends one datagram (one or more messages) to the kernel.
    pub fn send(&self, msg: &[u8], op: &str) -> Result<()> {
        let sa = kernel_addr();
        retry_eintr(|| {
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
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        })
        .map_err(|e| Error::os(format!("sendto({op})"), e))
    }

    /// Receives one datagram; `Ok(None)` when the receive timeout passed
    /// (or, with `MSG_DONTWAIT` in `flags`, when nothing is queued).
    pub fn recv(&mut self, flags: libc::c_int, op: &str) -> Result<Option<&[u8]>> {
        let (fd, buf) = (self.fd.as_raw_fd(), &mut self.buf);
        let got = retry_eintr(|| {
            // SAFETY: buf is valid for writes of its full length.
            let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), flags | libc::MSG_TRUNC) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
        let n = match got {
            Ok(n) => n,
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => return Ok(None),
            Err(e) => return Err(Error::os(format!("recv({op})"), e)),
        };
        if n > self.buf.len() {
            return Err(Error::Other {
                op: format!("recv({op})"),
                msg: format!("datagram of {n} bytes exceeds the {} byte buffer", self.buf.len()),
            });
        }
        Ok(Some(&self.buf[..n]))
    }

    /// Sends `req` and reads the answers to `seq` (messages of other
    /// sequence numbers are skipped) until the kernel acknowledges it or
    /// ends the dump, handing each data message's kind and payload to
    /// `on_data`, which returns `true` to stop there. The kernel's errno,
    /// with its extended-ack text, is an error; so is no answer within the
    /// socket's receive timeout.
    pub fn exchange(
        &mut self,
        req: &[u8],
        seq: u32,
        op: &str,
        mut on_data: impl FnMut(u16, &[u8]) -> Result<bool>,
    ) -> Result<()> {
        self.send(req, op)?;
        let bad = |e: ParseError| Error::Other { op: op.into(), msg: e.to_string() };
        loop {
            let Some(dgram) = self.recv(0, op)? else {
                return Err(Error::Other {
                    op: op.into(),
                    msg: "no answer from the kernel within the receive timeout".into(),
                });
            };
            for m in messages(dgram) {
                let m = m.map_err(bad)?;
                if m.header.seq != seq {
                    continue;
                }
                match m.answer().map_err(bad)? {
                    Answer::Ack | Answer::Done => return Ok(()),
                    Answer::Error(e) => {
                        let why = e.message.map(|m| format!(" ({m})")).unwrap_or_default();
                        return Err(Error::os(format!("{op}{why}"), io::Error::from_raw_os_error(e.errno)));
                    }
                    Answer::Data(p) => {
                        if on_data(m.header.kind, p)? {
                            return Ok(());
                        }
                    }
                }
            }
        }
    }

    /// Waits up to `timeout` (forever with `None`) for a datagram. `false`
    /// when the time passed, or when a signal interrupted the wait: a
    /// caller that waits in a loop then gets to look at its flags.
    pub fn wait_readable(&self, timeout: Option<Duration>, op: &str) -> Result<bool> {
        let [r] = crate::io::poll([(self.fd.as_fd(), crate::io::READABLE)], timeout)
            .map_err(|e| Error::os(format!("poll({op})"), e))?;
        Ok(r != 0)
    }
}

impl AsFd for NlSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_encodes_to_exact_bytes_and_back() {
        let m = message(0x1b, NLM_F_REQUEST | NLM_F_ACK, 0x0102_0304, &[&[9, 8, 7], &[6, 5]]);
        let mut want = Vec::new();
        want.extend_from_slice(&21u32.to_ne_bytes()); // 16 + 5, before padding
        want.extend_from_slice(&0x1bu16.to_ne_bytes());
        want.extend_from_slice(&5u16.to_ne_bytes());
        want.extend_from_slice(&0x0102_0304u32.to_ne_bytes());
        want.extend_from_slice(&0u32.to_ne_bytes());
        want.extend_from_slice(&[9, 8, 7, 6, 5, 0, 0, 0]);
        assert_eq!(m, want);
        let h = Header::parse(&m, 0).unwrap();
        assert_eq!(h, Header { len: 21, kind: 0x1b, flags: 5, seq: 0x0102_0304, pid: 0 });
        let got: Vec<_> = messages(&m).collect();
        assert_eq!(got, vec![Ok(Msg { at: 0, header: h, payload: &[9, 8, 7, 6, 5][..] })]);
        // Appending batches: the second message starts at the padded end.
        let mut two = m.clone();
        emit_message(&mut two, NLMSG_DONE, 0, 7, &[&0i32.to_ne_bytes()]);
        assert_eq!(two.len(), 24 + 20);
        let kinds: Vec<_> = messages(&two).map(|m| m.unwrap().header.kind).collect();
        assert_eq!(kinds, vec![0x1b, NLMSG_DONE]);
        // The genl header.
        let g = GenlHeader { cmd: 10, version: 1 };
        assert_eq!(g.bytes(), [10, 1, 0, 0]);
        assert_eq!(GenlHeader::parse(&[10, 1, 0, 0, 42]), Ok((g, &[42u8][..])));
    }

    #[test]
    fn malformed_headers_name_what_is_wrong() {
        let m = message(NLMSG_DONE, 0, 1, &[&[0; 4]]);
        // Every prefix shorter than the header, and every cut of the payload.
        for cut in 1..m.len() {
            let got: Vec<_> = messages(&m[..cut]).collect();
            let want = if cut < NLMSG_HDRLEN {
                ParseError::Truncated { what: "netlink message header", at: 0, need: 16, have: cut }
            } else {
                ParseError::BadLength { what: "netlink message", at: 0, len: 20, left: cut }
            };
            assert_eq!(got, vec![Err(want.clone())], "cut {cut}");
        }
        assert_eq!(messages(&[]).count(), 0);
        // A length below the header's own is refused, not looped on.
        let mut zero = m.clone();
        zero[..4].copy_from_slice(&0u32.to_ne_bytes());
        assert_eq!(
            messages(&zero).collect::<Vec<_>>(),
            vec![Err(ParseError::BadLength { what: "netlink message", at: 0, len: 0, left: 20 })]
        );
        // A good message then garbage: the good one, then the error at its offset.
        let mut tail = m.clone();
        tail.extend_from_slice(&[1, 2, 3]);
        let got: Vec<_> = messages(&tail).collect();
        assert!(got[0].is_ok());
        let want = ParseError::Truncated { what: "netlink message header", at: 20, need: 16, have: 3 };
        assert_eq!(got[1], Err(want.clone()));
        assert_eq!(got.len(), 2);
        assert_eq!(want.to_string(), "netlink message header truncated at byte 20: needs 16 bytes, 3 left");
        assert_eq!(want.offset(), Some(20));
        assert_eq!(
            GenlHeader::parse(&[1, 2]).unwrap_err().to_string(),
            "generic netlink header truncated at byte 0: needs 4 bytes, 2 left"
        );
        // An oversized length in the second message names that message's offset.
        let mut two = m.clone();
        two.extend_from_slice(&m);
        two[20..24].copy_from_slice(&4096u32.to_ne_bytes());
        let got: Vec<_> = messages(&two).collect();
        assert_eq!(
            got[1],
            Err(ParseError::BadLength { what: "netlink message", at: 20, len: 4096, left: 20 })
        );
    }

    #[test]
    fn answers_ack_done_error_with_extended_ack() {
        let ack = message(NLMSG_ERROR, 0, 3, &[&0i32.to_ne_bytes(), &[0; 16]]);
        let m = messages(&ack).next().unwrap().unwrap();
        assert_eq!(m.answer(), Ok(Answer::Ack));
        let done = message(NLMSG_DONE, NLM_F_MULTI, 3, &[&0i32.to_ne_bytes()]);
        assert_eq!(messages(&done).next().unwrap().unwrap().answer(), Ok(Answer::Done));
        let empty_done = message(NLMSG_DONE, 0, 3, &[]);
        assert_eq!(messages(&empty_done).next().unwrap().unwrap().answer(), Ok(Answer::Done));
        let failed_done = message(NLMSG_DONE, 0, 3, &[&(-libc::EBUSY).to_ne_bytes()]);
        let Ok(Answer::Error(e)) = messages(&failed_done).next().unwrap().unwrap().answer() else { panic!() };
        assert_eq!(e.errno, libc::EBUSY);
        let data = message(0x1b, 0, 3, &[&[1, 2]]);
        assert_eq!(messages(&data).next().unwrap().unwrap().answer(), Ok(Answer::Data(&[1, 2][..])));
        // An error with TLVs after the capped echo.
        let request = message(0x1b, NLM_F_REQUEST, 7, &[&[0; 12]]);
        let mut tlv = AttrBuf::default();
        tlv.put_str(NLMSGERR_ATTR_MSG, "invalid token");
        tlv.put_u32(NLMSGERR_ATTR_OFFS, 20);
        tlv.put_u32(NLMSGERR_ATTR_MISS_TYPE, 4);
        let capped = message(
            NLMSG_ERROR,
            NLM_F_ACK_TLVS | NLM_F_CAPPED,
            7,
            &[&(-libc::EINVAL).to_ne_bytes(), &request[..NLMSG_HDRLEN], tlv.as_bytes()],
        );
        let want = NlErr {
            errno: libc::EINVAL,
            message: Some("invalid token".into()),
            offset: Some(20),
            missing_attr: Some(4),
        };
        let m = messages(&capped).next().unwrap().unwrap();
        assert_eq!(m.answer(), Ok(Answer::Error(want.clone())));
        // Not capped: the whole request is echoed before the TLVs.
        let full = message(
            NLMSG_ERROR,
            NLM_F_ACK_TLVS,
            7,
            &[&(-libc::EINVAL).to_ne_bytes(), &request, tlv.as_bytes()],
        );
        assert_eq!(messages(&full).next().unwrap().unwrap().answer(), Ok(Answer::Error(want)));
        // Without the TLV flag they are not looked for.
        assert_eq!(parse_nlerr(0, &capped[NLMSG_HDRLEN..]).unwrap().message, None);
        // A truncated error message is an error naming nlmsgerr.
        let short = message(NLMSG_ERROR, 0, 7, &[&[1, 2]]);
        assert_eq!(
            messages(&short).next().unwrap().unwrap().answer(),
            Err(ParseError::Truncated { what: "nlmsgerr", at: NLMSG_HDRLEN, need: 4, have: 2 })
        );
        // Every truncation of the TLV error: never a panic, the errno stands
        // once its 4 bytes are there.
        let p = &capped[NLMSG_HDRLEN..];
        for cut in 0..p.len() {
            match parse_nlerr(NLM_F_ACK_TLVS | NLM_F_CAPPED, &p[..cut]) {
                Ok(e) => assert_eq!(e.errno, libc::EINVAL),
                Err(e) => {
                    assert_eq!(e, ParseError::Truncated { what: "nlmsgerr", at: 0, need: 4, have: cut })
                }
            }
        }
    }

    #[test]
    fn attributes_build_and_walk_exactly() {
        let mut inner = AttrBuf::default();
        inner.put_u16(1, 0x0a0b);
        let mut a = AttrBuf::default();
        a.put(1, b"ab");
        a.put_u8(3, 0xff);
        a.put_nested(2, inner);
        a.put_str(4, "x");
        let mut want = vec![6, 0, 1, 0, b'a', b'b', 0, 0, 5, 0, 3, 0, 0xff, 0, 0, 0];
        want.extend_from_slice(&[12, 0, 2, 0x80, 6, 0, 1, 0]);
        want.extend_from_slice(&0x0a0bu16.to_ne_bytes());
        want.extend_from_slice(&[0, 0, 6, 0, 4, 0, b'x', 0, 0, 0]);
        // Expected bytes are little-endian in the literal; this test assumes it.
        const { assert!(cfg!(target_endian = "little")) };
        assert_eq!(a.as_bytes(), &want[..]);
        let got: Vec<_> = attrs(a.as_bytes(), "test").collect();
        assert_eq!(got.len(), 4);
        assert_eq!(got[0], Ok((1, &b"ab"[..])));
        assert_eq!(got[1], Ok((3, &[0xff][..])));
        // The nested flag is masked off the type.
        let Ok((2, nested)) = got[2] else { panic!("{got:?}") };
        assert_eq!(attrs(nested, "nested").collect::<Vec<_>>(), vec![Ok((1, &0x0a0bu16.to_ne_bytes()[..]))]);
        assert_eq!(got[3], Ok((4, &b"x\0"[..])));
    }

    #[test]
    fn broken_attributes_are_errors_at_their_offset() {
        // type 1 "ab" (len 6, padded to 8), nested flag on type 2 with 4 bytes, then a bad length.
        let mut b = vec![6, 0, 1, 0, b'a', b'b', 0, 0];
        b.extend_from_slice(&[8, 0, 2, 0x80, 1, 2, 3, 4]);
        b.extend_from_slice(&[99, 0, 3, 0]);
        let got: Vec<_> = attrs(&b, "inet_diag_msg").at_offset(72).collect();
        let bad = ParseError::AttrBadLength { within: "inet_diag_msg", at: 88, len: 99, left: 4 };
        assert_eq!(got, vec![Ok((1, &b"ab"[..])), Ok((2, &[1u8, 2, 3, 4][..])), Err(bad.clone())]);
        assert_eq!(bad.to_string(), "attribute of inet_diag_msg at byte 88 claims length 99, 4 bytes left");
        // Too short for a header, and a length below the header's own.
        assert_eq!(
            attrs(&[1, 0], "x").collect::<Vec<_>>(),
            vec![Err(ParseError::AttrTruncated { within: "x", at: 0, have: 2 })]
        );
        assert_eq!(
            attrs(&[2, 0, 1, 0], "x").collect::<Vec<_>>(),
            vec![Err(ParseError::AttrBadLength { within: "x", at: 0, len: 2, left: 4 })]
        );
        // Three stray bytes after a good attribute.
        assert_eq!(
            attrs(&[5, 0, 1, 0, 7, 0, 0, 0, 9, 9, 9], "x").at_offset(4).collect::<Vec<_>>(),
            vec![Ok((1, &[7u8][..])), Err(ParseError::AttrTruncated { within: "x", at: 12, have: 3 })]
        );
        // The last attribute may omit its padding.
        assert_eq!(attrs(&[5, 0, 1, 0, 7], "x").collect::<Vec<_>>(), vec![Ok((1, &[7u8][..]))]);
        // After a fixed header: a payload shorter than it, and an attribute
        // error placed in the payload, named as the header.
        assert_eq!(
            attrs_after(&[0; 3], "rtmsg", 12).err(),
            Some(ParseError::Truncated { what: "rtmsg", at: 0, need: 12, have: 3 })
        );
        let mut p = vec![0u8; 12];
        p.extend_from_slice(&[5, 0, 1, 0, 7, 0, 0, 0, 40, 0, 2, 0]);
        assert_eq!(
            attrs_after(&p, "rtmsg", 12).unwrap().collect::<Vec<_>>(),
            vec![
                Ok((1, &[7u8][..])),
                Err(ParseError::AttrBadLength { within: "rtmsg", at: 20, len: 40, left: 4 })
            ]
        );
        assert_eq!(c_string(b"eth0\0junk"), "eth0");
        assert_eq!(align4(5), 8);
        assert_eq!((u16_ne(&[1], 0), u32_ne(&[1, 2, 3, 4], 1), u32_ne(&[], usize::MAX)), (None, None, None));
    }

    extern "C" fn count_signal(_: libc::c_int) {
        SIGNALS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    static SIGNALS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    /// A receive interrupted by signals (installed without SA_RESTART, so
    /// the kernel does return EINTR) keeps waiting and ends in its timeout,
    /// not in an error.
    #[test]
    fn signals_do_not_fail_a_blocking_receive() {
        // SAFETY: a zeroed sigaction is valid; the handler is async-signal
        // safe (one atomic add). SIGURG is ignored by default, so a stray one
        // elsewhere in the test binary is harmless.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = count_signal as *const () as usize;
            assert_eq!(libc::sigaction(libc::SIGURG, &sa, std::ptr::null_mut()), 0);
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let mut s = NlSocket::open(libc::NETLINK_GENERIC, "NETLINK_GENERIC").expect("open");
            s.set_recv_timeout(Duration::from_millis(400)).expect("timeout");
            // SAFETY: pthread_self has no preconditions.
            tx.send(unsafe { libc::pthread_self() }).unwrap();
            let t0 = std::time::Instant::now();
            let got = s.recv(0, "test").map(|o| o.map(|b| b.len()));
            (got, t0.elapsed())
        });
        let thread = rx.recv().unwrap();
        let before = SIGNALS.load(std::sync::atomic::Ordering::SeqCst);
        for _ in 0..5 {
            std::thread::sleep(Duration::from_millis(40));
            // SAFETY: `thread` names a joinable thread not yet joined, so
            // the id stays valid even if the thread has returned.
            unsafe { libc::pthread_kill(thread, libc::SIGURG) };
        }
        let (got, took) = waiter.join().unwrap();
        assert!(matches!(got, Ok(None)), "{got:?}");
        assert!(took >= Duration::from_millis(400), "{took:?}");
        assert!(SIGNALS.load(std::sync::atomic::Ordering::SeqCst) >= before + 5);
    }

    /// Real dumps of this kernel (crates/sys/testdata/README.md says how
    /// they were taken): every message and attribute walks, and the
    /// headers re-encode to the very bytes the kernel sent.
    #[test]
    fn captured_rtnetlink_dumps_walk_and_reencode_exactly() {
        for (name, dump, kind, n) in [
            ("getlink", &include_bytes!("../testdata/rtnl_getlink.bin")[..], 16, 1),
            ("getaddr", &include_bytes!("../testdata/rtnl_getaddr.bin")[..], 20, 2),
            ("getroute", &include_bytes!("../testdata/rtnl_getroute.bin")[..], 24, 4),
        ] {
            let msgs: Vec<_> = messages(dump).map(|m| m.unwrap()).collect();
            assert_eq!(msgs.len(), n + 1, "{name}");
            assert!(msgs[..n].iter().all(|m| m.header.kind == kind), "{name}");
            assert_eq!(msgs[n].answer(), Ok(Answer::Done), "{name}");
            for m in &msgs {
                let mut again = Vec::new();
                m.header.emit(&mut again);
                again.extend_from_slice(m.payload);
                assert_eq!(&dump[m.at..m.at + m.header.len as usize], &again[..], "{name}");
            }
            // Past each family header (ifinfomsg 16, ifaddrmsg 8, rtmsg 12):
            // attributes to the end, none broken.
            let fam = match kind {
                16 => 16,
                20 => 8,
                _ => 12,
            };
            for m in &msgs[..n] {
                assert!(attrs(&m.payload[fam..], name).all(|a| a.is_ok()), "{name}");
            }
        }
        // The addresses: 127.0.0.1/8 labelled "lo" and ::1/128, both on ifindex 1.
        let addrs: Vec<_> =
            messages(include_bytes!("../testdata/rtnl_getaddr.bin")).map(|m| m.unwrap()).collect();
        let p = addrs[0].payload;
        assert_eq!((p[0], p[1], u32_ne(p, 4)), (libc::AF_INET as u8, 8, Some(1)));
        let a: Vec<_> = attrs(&p[8..], "ifaddrmsg").map(|a| a.unwrap()).collect();
        assert!(a.contains(&(1, &[127u8, 0, 0, 1][..])) && a.contains(&(3, &b"lo\0"[..])), "{a:?}");
        let p = addrs[1].payload;
        assert_eq!((p[0], p[1], u32_ne(p, 4)), (libc::AF_INET6 as u8, 128, Some(1)));
    }

    /// A captured datagram cut anywhere: the error names the cut exactly.
    #[test]
    fn captured_dump_cut_anywhere_names_the_cut() {
        let dump = include_bytes!("../testdata/rtnl_getaddr.bin");
        let first = Header::parse(dump, 0).unwrap().len as usize;
        for cut in 0..first {
            let got = messages(&dump[..cut]).next();
            let want = match cut {
                0 => None,
                c if c < NLMSG_HDRLEN => Some(Err(ParseError::Truncated {
                    what: "netlink message header",
                    at: 0,
                    need: 16,
                    have: c,
                })),
                c => Some(Err(ParseError::BadLength { what: "netlink message", at: 0, len: first, left: c })),
            };
            assert_eq!(got, want, "cut {cut}");
        }
    }
}
