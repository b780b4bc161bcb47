//! Fuzz target: sock_diag answers (`diag::parse_datagram`, `parse_diag_msg`
//! with `inet_diag_msg` and its attributes, the `INET_DIAG_INFO` tcp_info
//! and the MPTCP subflow info of `INET_DIAG_ULP_INFO`) over arbitrary
//! datagrams; the sequence number asked for is the first message's, so
//! that the fuzzer reaches the decoding.
//!
//! Checked beyond never panicking:
//! - errors name offsets inside the input (datagram-level ones in the
//!   datagram, `parse_diag_msg`'s in the payload): a payload shorter than
//!   `inet_diag_msg` is exactly `Truncated { need: 72 }`, another family
//!   exactly `BadFamily { at: 0 }`;
//! - a decoded socket keeps every attribute, in order and with its payload's
//!   offset, as the one walker reads them; `unknown_attrs` counts exactly
//!   those of types not named in `diag::attr::KNOWN`;
//! - `tcp_info` is there exactly when `INET_DIAG_INFO` is, with the
//!   attribute's length; one shorter than the 104-byte base is an error at
//!   its payload;
//! - round trip: the exact query for a decoded socket carries the input's
//!   `inet_diag_sockid` (ports, interface, cookie, the address bytes that
//!   the family uses);
//! - the MPTCP subflow decoder's `skipped` counts exactly the unknown
//!   attributes and those read of the wrong size; its error is the walk's;
//! - the ULP accessors' errors (a malformed nested attribute) name an
//!   offset inside the `INET_DIAG_ULP_INFO` attribute's payload.
//!
//! Run it with `fuzz/run.sh sys/diag` (see there).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpaccel_sys::diag::{self, encode_exact, parse_datagram, parse_diag_msg, parse_mptcp_subflow};
use tcpaccel_sys::netlink::{attrs, messages, Header, ParseError, Skipped, NLMSG_HDRLEN};

const DIAG_MSG_LEN: usize = 72;

/// The subflow decoder against an independent count over the same walk.
fn check_subflow(n: &[u8]) {
    let walked: Vec<_> = attrs(n, "INET_DIAG_ULP_INFO_MPTCP").collect();
    match parse_mptcp_subflow(n) {
        Ok(sf) => {
            let mut want = Skipped::default();
            let (mut token_loc, mut flags) = (0, 0);
            for a in &walked {
                let (kind, d) = a.clone().expect("the decoder accepted a broken walk");
                let size = match kind {
                    1 | 2 | 8 => 4,
                    9 | 10 => 1,
                    3..=7 | 11 | 12 => continue,
                    _ => {
                        want.unknown += 1;
                        continue;
                    }
                };
                let ok = d.len() == size;
                if !ok {
                    want.odd_size += 1;
                }
                let v = if ok && size == 4 { u32::from_ne_bytes(d.try_into().unwrap()) } else { 0 };
                match kind {
                    2 => token_loc = v,
                    8 => flags = v,
                    _ => {}
                }
            }
            assert_eq!(sf.skipped, want);
            assert_eq!((sf.token_loc, sf.flags), (token_loc, flags));
        }
        Err(e) => {
            let first = walked.into_iter().find_map(Result::err);
            assert_eq!(Some(e), first, "the decoder's error is not the walk's");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let seq = Header::parse(data, 0).map(|h| h.seq).unwrap_or(0);
    let mut out = Vec::new();
    if let Err(e) = parse_datagram(data, seq, &mut out) {
        assert!(e.offset().is_none_or(|o| o <= data.len()), "{e:?}");
    }
    for m in messages(data) {
        let Ok(m) = m else { break };
        let p = m.payload;
        check_subflow(p);
        match parse_diag_msg(p) {
            Err(e) => match e {
                ParseError::Truncated { at: 0, need: DIAG_MSG_LEN, have, .. } => {
                    assert!(have == p.len() && have < DIAG_MSG_LEN)
                }
                ParseError::BadFamily { at: 0, family } => {
                    assert_eq!(family, u16::from(p[0]));
                    assert!(p[0] != libc_af::INET && p[0] != libc_af::INET6);
                }
                ParseError::AttrTruncated { at, .. } | ParseError::AttrBadLength { at, .. } => {
                    assert!((DIAG_MSG_LEN..p.len()).contains(&at), "{e:?}")
                }
                ParseError::Truncated { what: "tcp_info", at, need: 104, have } => {
                    assert!(have < 104 && (DIAG_MSG_LEN + 4..=p.len()).contains(&at), "{e:?}")
                }
                other => panic!("parse_diag_msg gave {other:?}"),
            },
            Ok(s) => {
                assert!(p.len() >= DIAG_MSG_LEN);
                assert_eq!((s.family, s.state, s.timer, s.retrans), (p[0], p[1], p[2], p[3]));
                let walked: Vec<_> = attrs(&p[DIAG_MSG_LEN..], "x")
                    .at_offset(DIAG_MSG_LEN)
                    .with_offsets()
                    .map(|a| a.unwrap())
                    .collect();
                let kept: Vec<_> = s.attrs.iter().map(|a| (a.at, a.kind, a.data.as_slice())).collect();
                assert_eq!(kept, walked);
                let unknown = walked.iter().filter(|(_, k, _)| !diag::attr::KNOWN.contains(k)).count();
                assert_eq!(s.unknown_attrs(), unknown);
                match (s.tcp_info_raw(), s.tcp_info()) {
                    (Some(raw), Some(t)) => assert!(raw.len() >= 104 && t.len == raw.len()),
                    (Some(raw), None) => panic!("a parsed socket's tcp_info of {} bytes", raw.len()),
                    (None, t) => assert!(t.is_none()),
                }
                let q = encode_exact(&s, 0, 1);
                let (id, qid) = (&p[4..52], &q[NLMSG_HDRLEN + 8..]);
                assert_eq!(qid.len(), 48);
                assert_eq!(qid[..4], id[..4], "ports");
                assert_eq!(qid[36..], id[36..], "interface and cookie");
                if s.family == libc_af::INET6 {
                    assert_eq!(qid, id);
                } else {
                    assert_eq!((&qid[4..8], &qid[20..24]), (&id[4..8], &id[20..24]), "addresses");
                }
                let ulp = s.attrs.iter().find(|a| a.kind == diag::attr::ULP_INFO);
                let inside_ulp = |e: &ParseError| {
                    let u = ulp.expect("a ULP error without INET_DIAG_ULP_INFO");
                    let o = e.offset().expect("a ULP error names its offset");
                    assert!((u.at..u.at + u.data.len()).contains(&o), "{e:?} outside {}..", u.at);
                };
                match s.ulp_info_raw(3) {
                    Ok(Some(n)) => check_subflow(n),
                    Ok(None) => {}
                    Err(e) => inside_ulp(&e),
                }
                for e in [s.ulp_name().err(), s.mptcp_subflow().err()].into_iter().flatten() {
                    inside_ulp(&e);
                }
            }
        }
    }
});

/// `AF_INET`, `AF_INET6` (the fuzz crate does not depend on libc).
mod libc_af {
    pub const INET: u8 = 2;
    pub const INET6: u8 = 10;
}
