//! Fuzz target: a gather control connection as the server reads it
//! (`docs/gather-protocol.md`): an 8-byte preface, then control messages,
//! each a u32 BE length and that many bytes of JSON.
//!
//! Checked beyond never panicking:
//! - a message's declared length is refused above `MAX_CONTROL_LEN` before
//!   anything is allocated for it; the buffer the server allocates for a
//!   message is made here too, so with `-rss_limit_mb=256` (fuzz/run.sh) a
//!   length check that let more through fails as an out-of-memory;
//! - a preface that decodes encodes back to the same 8 bytes;
//! - every message that decodes encodes (`encode_control`) to bytes that
//!   decode to the same message;
//! - client ids map to file name stems that stay inside the sink directory
//!   and stay distinct for distinct ids.
//!
//! The messages are read whatever the preface's verdict, so that the fuzzer
//! need not rediscover the preface before reaching them.
//!
//! Run it with `fuzz/run.sh` (see there), or alone from the repository root:
//! cargo +nightly fuzz run --fuzz-dir fuzz/gather gather_control
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpaccel_gather::proto::{self, Control, MAX_CONTROL_LEN, PREFACE_LEN, VERSION};
use tcpaccel_gather::server::file_stem;

/// The same message, with the status replies' seconds-since-start (an f64,
/// which JSON may carry in more digits than it holds) compared within
/// rounding.
fn same(a: &Control, b: &Control) -> bool {
    match (a, b) {
        (Control::StatusReply { clients: x }, Control::StatusReply { clients: y }) => {
            x.len() == y.len()
                && x.iter().zip(y).all(|(p, q)| {
                    let close = (p.t - q.t).abs() <= p.t.abs() * 1e-15;
                    let mut q = q.clone();
                    q.t = p.t;
                    close && *p == q
                })
        }
        _ => a == b,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((preface, mut rest)) = data.split_first_chunk::<PREFACE_LEN>() else { return };
    if let Ok(kind) = proto::decode_preface(preface) {
        assert_eq!(&proto::encode_preface(VERSION, kind), preface);
    }
    let mut stems: Vec<(String, String)> = Vec::new();
    while let Some((prefix, tail)) = rest.split_first_chunk::<4>() {
        let Ok(n) = proto::control_len(*prefix) else {
            assert!(u32::from_be_bytes(*prefix) > MAX_CONTROL_LEN);
            return;
        };
        assert!(n <= MAX_CONTROL_LEN as usize);
        // The server allocates the whole body, then reads it.
        let mut body = vec![0u8; n];
        if tail.len() < n {
            return;
        }
        body.copy_from_slice(&tail[..n]);
        rest = &tail[n..];
        let Ok(msg) = proto::decode_control(&body) else { return };
        let wire = proto::encode_control(&msg);
        let len = proto::control_len([wire[0], wire[1], wire[2], wire[3]]).expect("an encoded message fits");
        assert_eq!(len, wire.len() - 4);
        match proto::decode_control(&wire[4..]) {
            Ok(back) => assert!(same(&msg, &back), "{msg:?} encodes to a different {back:?}"),
            Err(e) => panic!("{msg:?} encodes to bytes that do not decode: {e}"),
        }
        match &msg {
            Control::Hello { client_id, .. } => {
                let stem = file_stem(client_id);
                assert!(!stem.contains('/') && !stem.starts_with('.') && !stem.contains('\0'), "{stem:?}");
                for (id, s) in &stems {
                    assert!(id == client_id || *s != stem, "ids {id:?} and {client_id:?} share {stem:?}");
                }
                stems.push((client_id.clone(), stem));
            }
            Control::End { sha256, .. } | Control::Done { sha256, .. } => {
                let _ = proto::check_sha256(sha256);
            }
            _ => {}
        }
    }
});
