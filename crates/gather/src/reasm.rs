//! In-order reassembly of one client's chunks arriving over several data
//! streams, with bounded reorder memory.
//!
//! Chunks at the next expected offset go straight to the sink, followed by
//! any buffered chunks they make contiguous. A chunk ahead of a gap is
//! buffered only while the buffered bytes stay within `limit`; otherwise
//! [`Offer::Full`] hands it back and the caller stops reading that stream
//! (TCP flow control then holds the sender) until the gap fills. This cannot
//! deadlock: each stream carries increasing offsets, so the chunk that fills
//! the gap is at the head of some other stream and is always accepted.
//!
//! What it is not: no I/O of its own (the sink is a callback), no timing.

use std::collections::BTreeMap;

/// What happened to an offered chunk.
#[derive(Debug, PartialEq, Eq)]
pub enum Offer {
    /// Written, with this many bytes in total delivered to the sink by the call.
    Delivered(u64),
    /// Held until the gap before it fills.
    Buffered,
    /// Reorder memory is full; the chunk is handed back to offer again later.
    Full(Vec<u8>),
}

/// Data that contradicts what already arrived.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReasmError {
    #[error("chunk at {offset}+{len} overlaps data already received (next expected {next})")]
    Overlap { offset: u64, len: u64, next: u64 },
    #[error("empty chunk at {0}")]
    Empty(u64),
    #[error("chunk at {offset}+{len} lies beyond the announced end {end}")]
    BeyondEnd { offset: u64, len: u64, end: u64 },
    #[error("announced end {end} is before data already received up to {have}")]
    EndTooEarly { end: u64, have: u64 },
    #[error("sink: {0}")]
    Sink(String),
}

#[derive(Debug)]
pub struct Reassembly {
    next: u64,
    pending: BTreeMap<u64, Vec<u8>>,
    pending_bytes: u64,
    limit: u64,
    end: Option<u64>,
}

impl Reassembly {
    /// `limit`: most bytes held out of order.
    pub fn new(limit: u64) -> Reassembly {
        Reassembly { next: 0, pending: BTreeMap::new(), pending_bytes: 0, limit, end: None }
    }

    /// Bytes delivered in order so far.
    pub fn delivered(&self) -> u64 {
        self.next
    }

    pub fn pending_bytes(&self) -> u64 {
        self.pending_bytes
    }

    pub fn end(&self) -> Option<u64> {
        self.end
    }

    /// The explicit end of data has been announced and everything up to it delivered.
    pub fn complete(&self) -> bool {
        self.end == Some(self.next)
    }

    /// Announces the total length of the data.
    pub fn set_end(&mut self, end: u64) -> Result<(), ReasmError> {
        let have = self.pending.iter().next_back().map(|(o, d)| o + d.len() as u64).unwrap_or(self.next);
        if end < have.max(self.next) {
            return Err(ReasmError::EndTooEarly { end, have: have.max(self.next) });
        }
        self.end = Some(end);
        Ok(())
    }

    /// Offers the chunk at `offset`; `sink` receives contiguous data in order.
    pub fn offer(
        &mut self,
        offset: u64,
        data: Vec<u8>,
        sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> Result<Offer, ReasmError> {
        let len = data.len() as u64;
        if len == 0 {
            return Err(ReasmError::Empty(offset));
        }
        let stop = offset.checked_add(len).ok_or(ReasmError::Overlap { offset, len, next: self.next })?;
        if let Some(end) = self.end {
            if stop > end {
                return Err(ReasmError::BeyondEnd { offset, len, end });
            }
        }
        if offset < self.next {
            return Err(ReasmError::Overlap { offset, len, next: self.next });
        }
        // Neighbours in the buffer must not overlap either.
        if let Some((&o, d)) = self.pending.range(..=offset).next_back() {
            if o + d.len() as u64 > offset {
                return Err(ReasmError::Overlap { offset, len, next: self.next });
            }
        }
        if let Some((&o, _)) = self.pending.range(offset..).next() {
            if o < stop {
                return Err(ReasmError::Overlap { offset, len, next: self.next });
            }
        }
        if offset > self.next {
            if self.pending_bytes + len > self.limit {
                return Ok(Offer::Full(data));
            }
            self.pending_bytes += len;
            self.pending.insert(offset, data);
            return Ok(Offer::Buffered);
        }
        sink(&data).map_err(|e| ReasmError::Sink(e.to_string()))?;
        self.next = stop;
        let mut written = len;
        while let Some(d) = self.pending.remove(&self.next) {
            let n = d.len() as u64;
            self.pending_bytes -= n;
            sink(&d).map_err(|e| ReasmError::Sink(e.to_string()))?;
            self.next += n;
            written += n;
        }
        Ok(Offer::Delivered(written))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn in_order_out_of_order_and_full() {
        let mut out = Vec::new();
        let mut sink = |d: &[u8]| {
            out.extend_from_slice(d);
            Ok(())
        };
        let mut r = Reassembly::new(4);
        assert_eq!(r.offer(3, b"de".to_vec(), &mut sink), Ok(Offer::Buffered));
        assert_eq!(r.offer(5, b"fgh".to_vec(), &mut sink), Ok(Offer::Full(b"fgh".to_vec())));
        assert_eq!(r.offer(0, b"abc".to_vec(), &mut sink), Ok(Offer::Delivered(5)));
        assert_eq!(r.pending_bytes(), 0);
        assert_eq!(r.offer(5, b"fgh".to_vec(), &mut sink), Ok(Offer::Delivered(3)));
        assert!(matches!(r.offer(7, b"x".to_vec(), &mut sink), Err(ReasmError::Overlap { .. })));
        r.set_end(10).unwrap();
        assert!(!r.complete());
        assert!(matches!(r.offer(9, b"yz".to_vec(), &mut sink), Err(ReasmError::BeyondEnd { .. })));
        assert_eq!(r.offer(8, b"ij".to_vec(), &mut sink), Ok(Offer::Delivered(2)));
        assert!(r.complete());
        assert!(matches!(r.set_end(5), Err(ReasmError::EndTooEarly { .. })));
        assert_eq!(out, b"abcdefghij");
    }

    #[test]
    fn overlaps_with_buffered_chunks_are_refused() {
        let mut sink = |_: &[u8]| Ok(());
        let mut r = Reassembly::new(100);
        r.offer(10, vec![1; 10], &mut sink).unwrap();
        assert!(r.offer(15, vec![1; 2], &mut sink).is_err());
        assert!(r.offer(5, vec![1; 6], &mut sink).is_err());
        assert!(r.offer(u64::MAX, vec![1; 2], &mut sink).is_err());
        assert_eq!(r.offer(0, vec![], &mut sink), Err(ReasmError::Empty(0)));
    }

    proptest! {
        /// Any interleaving of per-stream ordered chunks reassembles the
        /// original, and the buffer never holds more than the limit.
        #[test]
        fn any_interleaving_reassembles(sizes in proptest::collection::vec(1usize..50, 1..40),
                                        streams in 1usize..5, order in proptest::collection::vec(0usize..5, 200)) {
            let total: usize = sizes.iter().sum();
            let data: Vec<u8> = (0..total).map(|i| (i * 7 % 251) as u8).collect();
            // Round-robin chunks over streams, as a shared cursor would.
            let mut queues: Vec<std::collections::VecDeque<(u64, Vec<u8>)>> = vec![Default::default(); streams];
            let mut off = 0;
            for (i, s) in sizes.iter().enumerate() {
                queues[i % streams].push_back((off as u64, data[off..off + s].to_vec()));
                off += s;
            }
            let mut out = Vec::new();
            let mut r = Reassembly::new(60);
            let mut held: Vec<Option<(u64, Vec<u8>)>> = vec![None; streams];
            let mut k = 0;
            while queues.iter().any(|q| !q.is_empty()) || held.iter().any(|h| h.is_some()) {
                let s = (order[k % order.len()] + k / order.len()) % streams;
                k += 1;
                let item = held[s].take().or_else(|| queues[s].pop_front());
                let Some((o, d)) = item else { continue };
                let mut sink = |b: &[u8]| { out.extend_from_slice(b); Ok(()) };
                if let Offer::Full(d) = r.offer(o, d, &mut sink).unwrap() {
                    held[s] = Some((o, d));
                }
                prop_assert!(r.pending_bytes() <= 60);
                prop_assert!(k < 100_000, "stuck");
            }
            prop_assert_eq!(out, data);
        }
    }
}
