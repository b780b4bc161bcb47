//! The frame store of one direction: a byte ring of fixed capacity holding the
//! frames the link model has accepted and not yet delivered, in arrival order.
//!
//! Frames leave in the order they came (the model never reorders), so a FIFO
//! byte ring suffices: frames are stored back to back, a frame that does not
//! fit before the end of the buffer starts again at offset 0, and memory stays
//! exactly `capacity` bytes plus the index, allocated once. Small frames (TCP
//! ACKs) thus cost their size, not a full MTU slot.

use std::collections::VecDeque;

#[derive(Debug, Clone, Copy)]
struct Entry {
    id: u64,
    off: usize,
    len: usize,
}

/// A FIFO of frames in one contiguous buffer.
#[derive(Debug)]
pub struct FrameRing {
    buf: Vec<u8>,
    entries: VecDeque<Entry>,
    bytes: usize,
}

impl FrameRing {
    /// A ring of `capacity` bytes; `frames_hint` sizes the index up front.
    pub fn new(capacity: usize, frames_hint: usize) -> FrameRing {
        FrameRing { buf: vec![0; capacity.max(1)], entries: VecDeque::with_capacity(frames_hint), bytes: 0 }
    }

    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes of frames held (not counting space lost at the wrap).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Where a frame of `len` bytes would go, if it fits.
    fn place(&self, len: usize) -> Option<usize> {
        let cap = self.buf.len();
        let (Some(head), Some(back)) = (self.entries.front(), self.entries.back()) else {
            return (len <= cap).then_some(0);
        };
        let head = head.off;
        let tail = back.off + back.len;
        if tail > head {
            // Used region [head, tail): free at [tail, cap) then [0, head).
            if tail + len <= cap {
                Some(tail)
            } else if len <= head {
                Some(0)
            } else {
                None
            }
        } else {
            // Wrapped: used [head, cap) and [0, tail); free [tail, head).
            (tail + len <= head).then_some(tail)
        }
    }

    /// True when a frame of `len` bytes fits now.
    pub fn fits(&self, len: usize) -> bool {
        len > 0 && self.place(len).is_some()
    }

    /// Appends frame `id`. Ids must increase. Returns false (storing nothing)
    /// when there is no room or the frame is empty.
    pub fn push(&mut self, id: u64, data: &[u8]) -> bool {
        if data.is_empty() {
            return false;
        }
        debug_assert!(self.entries.back().is_none_or(|e| e.id < id));
        let Some(off) = self.place(data.len()) else { return false };
        self.buf[off..off + data.len()].copy_from_slice(data);
        self.entries.push_back(Entry { id, off, len: data.len() });
        self.bytes += data.len();
        true
    }

    /// The oldest frame: its id and bytes.
    pub fn front(&self) -> Option<(u64, &[u8])> {
        self.get(0)
    }

    /// The `i`-th oldest frame.
    pub fn get(&self, i: usize) -> Option<(u64, &[u8])> {
        let e = self.entries.get(i)?;
        Some((e.id, &self.buf[e.off..e.off + e.len]))
    }

    /// Drops the oldest frame.
    pub fn pop(&mut self) -> Option<u64> {
        let e = self.entries.pop_front()?;
        self.bytes -= e.len;
        Some(e.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fifo_with_wraparound() {
        let mut r = FrameRing::new(10, 4);
        assert!(r.push(1, &[1; 4]));
        assert!(r.push(2, &[2; 4]));
        assert!(!r.push(3, &[3; 4]), "only 2 bytes left at the end, none at the start");
        assert_eq!(r.pop(), Some(1));
        // 2 bytes at the end are too few: wraps to offset 0.
        assert!(r.push(3, &[3; 4]));
        assert_eq!(r.front(), Some((2, &[2u8; 4][..])));
        assert!(!r.fits(1), "wrapped: free [4, 4) is empty");
        assert_eq!(r.pop(), Some(2));
        assert_eq!(r.front(), Some((3, &[3u8; 4][..])));
        assert!(r.push(4, &[4; 6]));
        assert_eq!((r.len(), r.bytes()), (2, 10));
        assert_eq!(r.get(1), Some((4, &[4u8; 6][..])));
        assert!(!r.push(5, &[5; 1]));
        r.pop();
        r.pop();
        assert!(r.is_empty());
        assert!(r.push(6, &[6; 10]));
        assert!(!r.push(7, &[]));
    }

    proptest! {
        /// Against a plain VecDeque of byte vectors: same frames in the same order,
        /// never more bytes than the capacity.
        #[test]
        fn behaves_like_a_fifo(cap in 1usize..300, ops in prop::collection::vec((any::<bool>(), 1usize..80, any::<u8>()), 1..300)) {
            let mut r = FrameRing::new(cap, 8);
            let mut model: VecDeque<(u64, Vec<u8>)> = VecDeque::new();
            let mut id = 0u64;
            for (push, len, fill) in ops {
                if push {
                    let data = vec![fill; len];
                    if r.push(id, &data) {
                        model.push_back((id, data));
                    } else {
                        // Refused only when it really cannot fit contiguously.
                        let held: usize = model.iter().map(|m| m.1.len()).sum();
                        prop_assert!(held + len > cap || !model.is_empty());
                    }
                    id += 1;
                } else {
                    prop_assert_eq!(r.pop(), model.pop_front().map(|m| m.0));
                }
                prop_assert!(r.bytes() <= cap);
                prop_assert_eq!(r.len(), model.len());
                if let (Some(a), Some(b)) = (r.front(), model.front()) {
                    prop_assert_eq!(a.0, b.0);
                    prop_assert_eq!(a.1, &b.1[..]);
                }
            }
            for (i, m) in model.iter().enumerate() {
                let (gid, gdata) = r.get(i).unwrap();
                prop_assert_eq!(gid, m.0);
                prop_assert_eq!(gdata, &m.1[..]);
            }
        }
    }
}
