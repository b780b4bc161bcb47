//! Fuzz target: a gather data connection as the server reads it
//! (`docs/gather-protocol.md`): an 8-byte preface, the 36-byte attach
//! record, then 32-byte frame headers each followed by its chunk, the
//! chunks going into the in-order reassembly (`reasm`) a client's streams
//! share.
//!
//! Two bytes ahead of the connection's bytes choose the server's settings:
//! the negotiated chunk size (1 KiB..=4 MiB) and the reorder budget
//! (0..=4080 B, so that the fuzzer's small inputs reach it). An end-of-stream
//! frame is followed here by 8 bytes standing for the control connection's
//! `end.total` (u64 BE), and frames continue after it as if from another
//! stream of the client.
//!
//! Checked beyond never panicking:
//! - a header that decodes has a length within the negotiated chunk size,
//!   and the buffer the server allocates for the chunk is made here too, so
//!   with `-rss_limit_mb=256` (fuzz/run.sh) a decoder that let a larger
//!   length through fails as an out-of-memory;
//! - preface, attach record and headers that decode encode back to the
//!   same bytes;
//! - the reassembly: what reaches the sink is exactly the accepted chunks in
//!   offset order; it never accepts a chunk overlapping one it has, nor one
//!   past the announced end; the next expected chunk is always accepted
//!   (the no-deadlock argument of its docs); out-of-order bytes held stay
//!   within the budget; `complete()` is the announced end reached.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpaccel_gather::proto::{
    self, FrameHeader, FrameType, SessionId, ATTACH_LEN, FRAME_HEADER_LEN, MAX_CHUNK, PREFACE_LEN, VERSION,
};
use tcpaccel_gather::reasm::{Offer, ReasmError, Reassembly};

struct Model {
    /// Accepted chunks (delivered or held), by offset.
    accepted: Vec<(u64, Vec<u8>)>,
    end: Option<u64>,
}

impl Model {
    fn overlaps(&self, offset: u64, stop: u64) -> bool {
        self.accepted.iter().any(|(o, d)| *o < stop && offset < o + d.len() as u64)
    }
    fn max_stop(&self) -> u64 {
        self.accepted.iter().map(|(o, d)| o + d.len() as u64).max().unwrap_or(0)
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&[chunk_exp, budget], rest)) = data.split_first_chunk::<2>() else { return };
    let max_chunk = (1024u32 << (chunk_exp % 13)).min(MAX_CHUNK);
    let limit = u64::from(budget) * 16;

    let Some((preface, rest)) = rest.split_first_chunk::<PREFACE_LEN>() else { return };
    if let Ok(kind) = proto::decode_preface(preface) {
        assert_eq!(&proto::encode_preface(VERSION, kind), preface);
    }
    let Some((attach, mut rest)) = rest.split_first_chunk::<ATTACH_LEN>() else { return };
    let (session, stream) = match proto::decode_attach(attach) {
        Ok((session, token, stream)) => {
            assert_eq!(&proto::encode_attach(&session, &token, stream), attach);
            (session, stream)
        }
        Err(_) => {
            let mut s = [0u8; 16];
            s.copy_from_slice(&attach[..16]);
            (SessionId(s), u16::from_be_bytes([attach[32], attach[33]]))
        }
    };
    let tag = session.tag();

    let mut reasm = Reassembly::new(limit);
    let mut out: Vec<u8> = Vec::new();
    let mut model = Model { accepted: Vec::new(), end: None };
    while let Some((hb, tail)) = rest.split_first_chunk::<FRAME_HEADER_LEN>() {
        rest = tail;
        let Ok(h) = FrameHeader::decode(hb, tag, stream, max_chunk) else { return };
        assert!(h.length <= max_chunk, "{h:?} passed a chunk size of {max_chunk}");
        assert_eq!(&h.encode(), hb);
        if h.kind == FrameType::EndOfStream {
            let Some((total, tail)) = rest.split_first_chunk::<8>() else { return };
            rest = tail;
            let total = u64::from_be_bytes(*total);
            let floor = model.max_stop().max(reasm.delivered());
            match reasm.set_end(total) {
                Ok(()) => {
                    assert!(total >= floor, "end {total} accepted below data up to {floor}");
                    model.end = Some(total);
                }
                Err(_) => assert!(total < floor, "end {total} refused above data up to {floor}"),
            }
            assert_eq!(reasm.end(), model.end);
            continue;
        }
        // The server allocates the whole chunk, then reads it.
        let mut chunk = vec![0u8; h.length as usize];
        let n = chunk.len();
        if rest.len() < n {
            return;
        }
        chunk.copy_from_slice(&rest[..n]);
        rest = &rest[n..];
        if h.verify(&chunk).is_err() {
            assert!(h.flags & proto::FLAG_CHECKSUM != 0, "only a chunk with a CRC can fail it");
            return;
        }

        let offset = h.offset;
        let len = chunk.len() as u64;
        let before = reasm.delivered();
        let stop = offset.checked_add(len);
        let fits_end = match (model.end, stop) {
            (Some(e), Some(s)) => s <= e,
            (_, None) => false,
            (None, Some(_)) => true,
        };
        let clash = match stop {
            Some(s) => offset < before || model.overlaps(offset, s),
            None => true,
        };
        let mut sink = |b: &[u8]| {
            out.extend_from_slice(b);
            Ok(())
        };
        let res = reasm.offer(offset, chunk.clone(), &mut sink);
        match &res {
            Ok(Offer::Delivered(n)) => {
                assert!(len > 0 && !clash && fits_end, "accepted chunk at {offset}+{len}: {res:?}");
                assert_eq!(offset, before);
                assert!(*n >= len);
                model.accepted.push((offset, chunk));
            }
            Ok(Offer::Buffered) => {
                assert!(len > 0 && !clash && fits_end, "held chunk at {offset}+{len}: {res:?}");
                assert!(offset > before);
                model.accepted.push((offset, chunk));
            }
            Ok(Offer::Full(back)) => {
                assert_eq!(*back, chunk);
                assert!(offset > before, "the next expected chunk refused as over budget");
            }
            #[allow(unreachable_patterns)] // an outcome added later is not judged here
            Ok(_) => {}
            Err(ReasmError::Sink(e)) => panic!("the sink cannot fail here: {e}"),
            Err(_) => {
                let next_expected = len > 0 && offset == before && !clash && fits_end;
                assert!(!next_expected, "the next expected chunk at {offset}+{len} refused: {res:?}");
            }
        }
        assert_eq!(out.len() as u64, reasm.delivered());
        assert!(reasm.pending_bytes() <= limit, "{} B held over a budget of {limit}", reasm.pending_bytes());
        if let Some(e) = model.end {
            assert!(reasm.delivered() <= e);
        }
        assert_eq!(reasm.complete(), model.end == Some(reasm.delivered()));
    }
    // What reached the sink is the accepted chunks, in offset order.
    let delivered = reasm.delivered();
    let mut held = 0;
    for (o, d) in &model.accepted {
        let stop = o + d.len() as u64;
        if stop <= delivered {
            assert_eq!(&out[*o as usize..stop as usize], &d[..], "chunk at {o} delivered altered");
        } else {
            assert!(*o > delivered, "chunk at {o} delivered in part only");
            held += d.len() as u64;
        }
    }
    assert_eq!(held, reasm.pending_bytes());
});
