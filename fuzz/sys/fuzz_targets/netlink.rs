//! Fuzz target: the netlink codec of `tcpaccel-sys` (`netlink::messages`,
//! `Msg::answer` with `nlmsgerr` and its extended-ack TLVs, the attribute
//! walker `netlink::attrs` that every family's decoder uses) over arbitrary
//! datagrams.
//!
//! Checked beyond never panicking:
//! - each message starts where the previous one's padded length ends, lies
//!   inside the input, and its payload is the input's bytes at
//!   `at + 16 .. at + len`;
//! - round trip: the decoded header re-encodes to the input's 16 bytes, and
//!   each attribute (type with its flag bits, payload) re-encoded with
//!   `AttrBuf` gives the input's bytes of that attribute;
//! - every error names the offset where the walk stopped, with the byte
//!   counts that make it an error (fewer than a header left, or a length
//!   below the header's or past the end), and ends the walk;
//! - the walk is tried at every family-header size the crate decodes
//!   (0, genl 4, ifaddrmsg 8, rtmsg 12, ifinfomsg/nlmsghdr 16, inet_diag_msg 72).
//!
//! Run it with `fuzz/run.sh sys/netlink` (see there).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpaccel_sys::netlink::{
    align4, attrs, messages, u16_ne, Answer, AttrBuf, ParseError, NLMSG_ERROR, NLMSG_HDRLEN,
};

/// The offset of `inner` in `outer`, asserting that it lies inside it.
fn offset_in(outer: &[u8], inner: &[u8]) -> usize {
    let (o, i) = (outer.as_ptr() as usize, inner.as_ptr() as usize);
    assert!(i >= o && i + inner.len() <= o + outer.len(), "a slice outside the input");
    i - o
}

/// Walks the attributes of `input[base..end]`.
fn check_attrs(input: &[u8], base: usize, end: usize) {
    let buf = &input[base..end];
    let mut next = base;
    let mut failed = false;
    for a in attrs(buf, "fuzz").at_offset(base).with_offsets() {
        assert!(!failed, "the walk went on after an error");
        match a {
            Ok((at, kind, data)) => {
                assert_eq!(at, next + 4, "attribute payload offset");
                assert_eq!(offset_in(input, data), at, "the payload is the input's bytes");
                let len = usize::from(u16_ne(input, next).unwrap());
                let raw_kind = u16_ne(input, next + 2).unwrap();
                assert_eq!(len, data.len() + 4);
                assert_eq!(kind, raw_kind & 0x3fff);
                // Round trip: the same type bits and payload encode to the input's bytes.
                let mut again = AttrBuf::default();
                again.put(raw_kind, data);
                assert_eq!(&again.as_bytes()[..len], &input[next..next + len]);
                let walked: Vec<_> = attrs(again.as_bytes(), "again").collect();
                assert_eq!(walked, vec![Ok((kind, data))]);
                next = (next + align4(len)).min(end);
            }
            Err(e) => {
                failed = true;
                match e {
                    ParseError::AttrTruncated { at, have, .. } => {
                        assert_eq!((at, at + have), (next, end));
                        assert!(have < 4);
                    }
                    ParseError::AttrBadLength { at, len, left, .. } => {
                        assert_eq!((at, at + left), (next, end));
                        assert!(len < 4 || len > left, "length {len} with {left} left is not an error");
                    }
                    other => panic!("the attribute walk gave {other:?}"),
                }
            }
        }
    }
    if !failed {
        assert_eq!(next, end, "the walk stopped early");
    }
}

fuzz_target!(|data: &[u8]| {
    let mut next = 0;
    let mut failed = false;
    for m in messages(data) {
        assert!(!failed, "the walk went on after an error");
        match m {
            Ok(m) => {
                assert_eq!(m.at, next, "message offset");
                let len = m.header.len as usize;
                assert!(len >= NLMSG_HDRLEN && m.at + len <= data.len());
                assert_eq!(offset_in(data, m.payload), m.payload_at());
                assert_eq!(m.payload.len(), len - NLMSG_HDRLEN);
                let mut h = Vec::new();
                m.header.emit(&mut h);
                assert_eq!(&h[..], &data[m.at..m.at + NLMSG_HDRLEN], "the header re-encodes exactly");
                match m.answer() {
                    Ok(Answer::Data(p)) => assert_eq!(p, m.payload),
                    Ok(Answer::Error(e)) => assert_ne!(e.errno, 0),
                    Ok(Answer::Ack | Answer::Done) => {}
                    Err(e) => {
                        assert_eq!(m.header.kind, NLMSG_ERROR, "{e:?}");
                        assert_eq!(
                            e,
                            ParseError::Truncated {
                                what: "nlmsgerr",
                                at: m.payload_at(),
                                need: 4,
                                have: m.payload.len()
                            }
                        );
                    }
                }
                for skip in [0, 4, 8, 12, 16, 72] {
                    if m.payload.len() >= skip {
                        check_attrs(data, m.payload_at() + skip, m.at + len);
                    }
                }
                next = (m.at + align4(len)).min(data.len());
            }
            Err(e) => {
                failed = true;
                match e {
                    ParseError::Truncated { at, need, have, .. } => {
                        assert_eq!((at, at + have, need), (next, data.len(), NLMSG_HDRLEN));
                        assert!(have < need);
                    }
                    ParseError::BadLength { at, len, left, .. } => {
                        assert_eq!((at, at + left), (next, data.len()));
                        assert!(len < NLMSG_HDRLEN || len > left);
                    }
                    other => panic!("the message walk gave {other:?}"),
                }
            }
        }
    }
    if !failed {
        assert_eq!(next, data.len(), "the walk stopped early");
    }
});
