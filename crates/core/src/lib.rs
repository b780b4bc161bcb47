//! tcpaccel-core: the pure part of tcpaccel.
//!
//! Every algorithm here takes `now` and its inputs and returns decisions and
//! the next deadline. It does no syscalls, never reads the OS clock, never
//! sleeps or spawns, and uses only seeded randomness, so everything is tested
//! exactly on a manual clock. The shells (emulator threads, tokio services,
//! the lab) do the I/O.
#![forbid(unsafe_code)]

pub mod rng;
pub mod stats;
pub mod time;
pub mod units;

// Link emulation model (owned by the emulator work).
pub mod link;
pub mod loss;
pub mod meter;

// Mechanism algorithms (owned by the algorithms work).
pub mod admit;
pub mod aimd;
pub mod alloc;
pub mod compare;
pub mod fidelity;
pub mod flowtime;
pub mod lanes;
pub mod loglimit;
pub mod pace_spec;
pub mod pacing;
pub mod precise;
pub mod scale;
pub mod split;
pub mod workload;

pub use time::Instant;
pub use units::{Bytes, QueueLimit, Rate};
