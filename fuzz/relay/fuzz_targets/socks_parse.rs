//! Fuzz target: every SOCKS5 parser of the relay over arbitrary bytes. They
//! must never panic, never claim more bytes than given, and a parsed request
//! must encode back to bytes that parse to the same request.
//!
//! From the repository root:
//! cargo +nightly fuzz run --fuzz-dir fuzz/relay socks_parse -- -runs=300000
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpaccel_relay::socks::{self, Parse};

fn used<T>(r: Result<Parse<T>, socks::WireError>) -> usize {
    match r {
        Ok(Parse::Done(_, n)) => n,
        _ => 0,
    }
}

fuzz_target!(|data: &[u8]| {
    assert!(used(socks::parse_greeting(data)) <= data.len());
    assert!(used(socks::parse_userpass(data)) <= data.len());
    assert!(used(socks::parse_reply(data)) <= data.len());
    assert!(used(socks::parse_pair(data, socks::VERSION)) <= data.len());
    if let Ok(Parse::Done(req, n)) = socks::parse_request(data) {
        assert!(n <= data.len());
        let again = socks::encode_connect(&req.target).expect("a parsed target encodes");
        match socks::parse_request(&again) {
            Ok(Parse::Done(r2, m)) => {
                assert_eq!(r2.target, req.target);
                assert_eq!(m, again.len());
            }
            other => panic!("re-encoded request does not parse: {other:?}"),
        }
    }
});
