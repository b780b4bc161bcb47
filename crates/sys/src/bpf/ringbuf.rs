//! The consumer of a `BPF_MAP_TYPE_RINGBUF` map (mmap of the ring).

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use super::obj::map_type;
use super::sys::bad;
use super::Map;
use crate::error::{Error, Result};

// Ring buffer layout (kernel/bpf/ringbuf.c, tools/lib/bpf/ringbuf.c): the
// map fd is mmap()ed as one writable consumer page, then (read-only) one
// producer page followed by the data area mapped twice in a row, so that a
// record that wraps around the end reads as one contiguous slice.
const RINGBUF_BUSY: u32 = 1 << 31;
const RINGBUF_DISCARD: u32 = 1 << 30;
const RINGBUF_HDR: usize = 8;

/// A mapping that is unmapped on drop.
#[derive(Debug)]
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(fd: &OwnedFd, len: usize, prot: libc::c_int, offset: libc::off_t, what: &str) -> Result<Mapping> {
        // SAFETY: a fresh shared mapping of a BPF ring buffer map fd; the
        // kernel checks the length, protection and offset against the map.
        let p =
            unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd.as_raw_fd(), offset) };
        if p == libc::MAP_FAILED {
            return Err(Error::last(format!("mmap the {what} of a BPF ring buffer")));
        }
        Ok(Mapping { ptr: p.cast(), len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned; nothing borrows
        // the mapping past its owner (RingBuf hands out copies only).
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// A consumer of a `BPF_MAP_TYPE_RINGBUF` map: records the program
/// submitted, read in order, each copied out once, and the consumer
/// position advanced after each. Readiness: [`RingBuf::wait`] (poll(2) on
/// the map fd, which the kernel wakes on submit).
#[derive(Debug)]
pub struct RingBuf {
    fd: OwnedFd,
    consumer: Mapping,
    producer: Mapping,
    mask: u64,
    page: usize,
}

// SAFETY: the mappings are plain shared memory owned by this value; the
// positions are read and written with atomic operations only.
unsafe impl Send for RingBuf {}

impl RingBuf {
    /// Maps the ring buffer `map` (its fd is duplicated and kept).
    pub fn new(map: &Map) -> Result<RingBuf> {
        if map.def.map_type != map_type::RINGBUF {
            return Err(bad("BPF ring buffer", format!("map {} is not a ring buffer", map.name)));
        }
        let size = map.def.max_entries as usize;
        // SAFETY: sysconf takes no pointers.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        if !size.is_power_of_two() || size & (page - 1) != 0 {
            return Err(bad("BPF ring buffer", format!("size {size} is not a power-of-two number of pages")));
        }
        let fd = map.fd.try_clone().map_err(|e| Error::os("dup a BPF ring buffer fd", e))?;
        let consumer = Mapping::new(&fd, page, libc::PROT_READ | libc::PROT_WRITE, 0, "consumer page")?;
        let producer = Mapping::new(&fd, page + 2 * size, libc::PROT_READ, page as libc::off_t, "data")?;
        Ok(RingBuf { fd, consumer, producer, mask: size as u64 - 1, page })
    }

    fn consumer_pos(&self) -> &std::sync::atomic::AtomicU64 {
        // SAFETY: the consumer page starts with the 8-byte, 8-aligned
        // consumer position (page aligned); the mapping lives as long as self.
        unsafe { &*(self.consumer.ptr as *const std::sync::atomic::AtomicU64) }
    }

    fn producer_pos(&self) -> &std::sync::atomic::AtomicU64 {
        // SAFETY: as above, for the producer position at the start of the
        // producer page.
        unsafe { &*(self.producer.ptr as *const std::sync::atomic::AtomicU64) }
    }

    /// Calls `f` with every record available now (data only, without the
    /// header; discarded records are skipped). Returns how many were read.
    pub fn consume(&mut self, mut f: impl FnMut(&[u8])) -> usize {
        use std::sync::atomic::{AtomicU32, Ordering};
        let mut n = 0;
        let mut cons = self.consumer_pos().load(Ordering::Acquire);
        loop {
            let prod = self.producer_pos().load(Ordering::Acquire);
            if cons >= prod {
                break;
            }
            let off = self.page + (cons & self.mask) as usize;
            // SAFETY: off is inside the first copy of the data area, and a
            // record header is 8-aligned; the kernel writes the length word
            // with release semantics when it submits or discards.
            let hdr = unsafe { &*(self.producer.ptr.add(off) as *const AtomicU32) }.load(Ordering::Acquire);
            if hdr & RINGBUF_BUSY != 0 {
                break; // reserved, not yet submitted
            }
            let len = (hdr & !(RINGBUF_BUSY | RINGBUF_DISCARD)) as usize;
            if hdr & RINGBUF_DISCARD == 0 {
                let start = off + RINGBUF_HDR;
                if start + len <= self.producer.len {
                    // SAFETY: the record (at most the ring's size) lies in the
                    // double mapping right after its header; checked above.
                    let data = unsafe { std::slice::from_raw_parts(self.producer.ptr.add(start), len) };
                    f(data);
                    n += 1;
                }
            }
            cons += ((len + RINGBUF_HDR + 7) & !7) as u64;
            self.consumer_pos().store(cons, Ordering::Release);
        }
        n
    }

    /// Waits up to `timeout` for the ring buffer to have data (poll(2)).
    /// True when it does.
    pub fn wait(&self, timeout: std::time::Duration) -> Result<bool> {
        let [r] = crate::io::poll([(self.fd.as_fd(), crate::io::READABLE)], Some(timeout))
            .map_err(|e| Error::os("poll a BPF ring buffer", e))?;
        Ok(r != 0)
    }
}

impl RingBuf {
    /// Waits up to `timeout` for the ring buffer or `other` to be readable
    /// (one poll(2) on both): (ring ready, other ready).
    pub fn wait_with(
        &self,
        other: std::os::fd::BorrowedFd<'_>,
        timeout: std::time::Duration,
    ) -> Result<(bool, bool)> {
        let [ring, o] = crate::io::poll(
            [(self.fd.as_fd(), crate::io::READABLE), (other, crate::io::READABLE)],
            Some(timeout),
        )
        .map_err(|e| Error::os("poll a BPF ring buffer and a socket", e))?;
        Ok((ring != 0, o != 0))
    }
}

impl AsFd for RingBuf {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
