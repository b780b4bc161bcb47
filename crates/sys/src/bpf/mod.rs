//! A minimal BPF loader: parse a compiled object, create its maps, load its
//! programs, attach them to a cgroup through a BPF link, pin and unpin, and
//! read and write maps by value.
//!
//! Why our own and not aya: aya 0.14 and later need Rust 1.87, above the
//! workspace's MSRV (1.85); aya 0.13.1 builds, but brings about twenty crates
//! for what is, here, a few hundred lines: tcpaccel's programs are built
//! without BTF (no `-g`, so the committed objects hold no build path; see
//! `scripts/build-bpf.sh`), use classic map definitions in a `maps` section
//! ([`MapDef`]) and no globals, subprograms or CO-RE relocations. What this
//! loader does not do, it refuses by name (a relocation it does not know, a
//! non-empty `.text`, an unknown program section).
//!
//! Generic on purpose: issue 13 (lanes) loads a second sock_ops program with
//! a ring buffer through the same [`Object`] → [`Loaded`] → [`Program::attach_cgroup`]
//! path, and reads its events with [`RingBuf`] (mmap of the ring).
//!
//! Map values cross the syscall boundary as bytes: a value type implements
//! [`Plain`] (a fixed size and an explicit little/native-endian layout written
//! in safe code), so no `unsafe impl` is needed outside this crate.
//!
//! Pinning policy: nothing is pinned unless the caller asks ([`Link::pin`],
//! [`Map::pin`]); a [`Link`] that is dropped unpinned detaches its program.
//! Callers that must outlive the process pin under [`BPFFS`] and remove the
//! pins themselves ([`unpin`]); this module never pins on its own.
//!
//! Two halves, as aya keeps aya-obj apart: [`obj`] is the object model, a
//! pure function of the ELF bytes (no syscall, no `unsafe`; typed
//! [`ObjError`]s carrying file offsets; fuzzed by `fuzz/bpf`), and the
//! syscall side (`sys.rs`: map creation, program load, links, pins, map
//! access; `ringbuf.rs`: the ring buffer) consumes what it parsed.

pub mod obj;
mod ringbuf;
mod sys;

pub use obj::{map_type, MapDef, MapSpec, ObjError, Object, ProgramSpec, Relocation};
pub use ringbuf::RingBuf;
pub use sys::*;

/// A value that crosses the BPF syscall boundary as plain bytes, laid out as
/// the C side declares it (native endianness, explicit padding).
pub trait Plain: Sized {
    /// Size in bytes, equal to the C `sizeof`.
    const SIZE: usize;
    /// Writes the value into `out` (exactly `SIZE` bytes).
    fn write(&self, out: &mut [u8]);
    /// Reads a value from `b` (exactly `SIZE` bytes).
    fn read(b: &[u8]) -> Self;
}

macro_rules! plain_int {
    ($($t:ty),*) => {$(
        impl Plain for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn write(&self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_ne_bytes());
            }
            fn read(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..std::mem::size_of::<$t>()]);
                <$t>::from_ne_bytes(a)
            }
        }
    )*};
}
plain_int!(u8, u16, u32, u64, i32, i64);

/// Reads a native-endian u32 at `off` of `b` (a helper for [`Plain`] impls).
pub fn ne_u32(b: &[u8], off: usize) -> u32 {
    u32::read(&b[off..off + 4])
}
/// Reads a native-endian u64 at `off` of `b`.
pub fn ne_u64(b: &[u8], off: usize) -> u64 {
    u64::read(&b[off..off + 8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_round_trips() {
        let mut b = [0u8; 8];
        0x0102_0304_0506_0708u64.write(&mut b);
        assert_eq!(u64::read(&b), 0x0102_0304_0506_0708);
        assert_eq!(ne_u32(&b, 0), u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    }
}
