//! Fuzz target: the MPTCP path manager's generic netlink answers and events
//! (`mptcp::parse_event_datagram`, `parse_event`, `parse_endpoint`,
//! `parse_limits`, `parse_family`), each run on every message payload of the
//! input and on the input itself.
//!
//! Checked beyond never panicking:
//! - errors name offsets inside what was decoded;
//! - an event's `skipped` counts exactly the attributes of unknown types and
//!   those of a known type with another size than the kernel's (table below);
//! - round trip through the encoders: a decoded endpoint with an address,
//!   sent back as ADD_ADDR, decodes to itself (nothing skipped); decoded
//!   limits sent back as SET_LIMITS decode to themselves; the unknown count
//!   of a GET_LIMITS answer is exactly its attributes of other types.
//!
//! Run it with `fuzz/run.sh sys/mptcp` (see there).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpaccel_sys::mptcp::{
    attr, parse_endpoint, parse_event, parse_event_datagram, parse_family, parse_limits, Endpoint, EventKind,
    Incoming, PmAddr, Request,
};
use tcpaccel_sys::netlink::{attrs, messages, Header, Skipped, GENL_HDRLEN, NLMSG_HDRLEN};

/// The size of each event attribute (`MPTCP_ATTR_*` 1..=18), as the kernel puts it.
const EVENT_SIZES: [usize; 18] = [4, 2, 1, 1, 4, 16, 4, 16, 2, 2, 1, 1, 2, 4, 4, 4, 4, 1];

fn within(e: &tcpaccel_sys::netlink::ParseError, len: usize) {
    assert!(e.offset().is_none_or(|o| o <= len), "{e:?} beyond {len} bytes");
}

fn check(p: &[u8]) {
    let body = p.get(GENL_HDRLEN..);
    match parse_event(p) {
        Ok(ev) => {
            assert_eq!(ev.kind, EventKind::from_raw(p[0]));
            let mut want = Skipped::default();
            for a in attrs(body.unwrap(), "event") {
                let (kind, d) = a.expect("the decoder accepted a broken walk");
                match EVENT_SIZES.get(usize::from(kind).wrapping_sub(1)) {
                    Some(&size) if d.len() != size => want.odd_size += 1,
                    Some(_) => {}
                    None => want.unknown += 1,
                }
            }
            assert_eq!(ev.skipped, want);
        }
        Err(e) => within(&e, p.len()),
    }
    match parse_endpoint(p) {
        Ok(ep) => {
            if let Some(ip) = ep.ip {
                let back =
                    PmAddr { ip, id: ep.id, port: ep.port, flags: Some(ep.flags), if_index: ep.if_index };
                let msg = Request::add_addr(&back).encode(0x1c, 1);
                let again = parse_endpoint(&msg[NLMSG_HDRLEN..]);
                assert_eq!(again, Ok(Endpoint { skipped: Skipped::default(), ..ep }));
            }
        }
        Err(e) => within(&e, p.len()),
    }
    match parse_limits(p) {
        Ok((l, sk)) => {
            let others = attrs(body.unwrap(), "limits")
                .map(|a| a.unwrap().0)
                .filter(|k| *k != attr::SUBFLOWS && *k != attr::RCV_ADD_ADDRS)
                .count();
            assert_eq!(sk.unknown as usize, others);
            let msg = Request::set_limits(l).encode(0x1c, 1);
            assert_eq!(parse_limits(&msg[NLMSG_HDRLEN..]), Ok((l, Skipped::default())));
        }
        Err(e) => within(&e, p.len()),
    }
    match parse_family(p) {
        Ok(f) => assert!(f.groups.len() <= p.len() / 8),
        Err(e) => within(&e, p.len()),
    }
}

fuzz_target!(|data: &[u8]| {
    let family = Header::parse(data, 0).map(|h| h.kind).unwrap_or(0x1c);
    for i in parse_event_datagram(data, family) {
        if let Incoming::Malformed(e) = i {
            within(&e, data.len());
        }
    }
    check(data);
    for m in messages(data) {
        let Ok(m) = m else { break };
        check(m.payload);
    }
});
