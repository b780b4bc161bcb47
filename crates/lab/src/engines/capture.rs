//! A packet capture at a sender's interface, read into flow completion times
//! the way a pcap shows them (`tcpaccel_core::flowtime`): a thin shell that
//! opens an AF_PACKET socket (both directions, kernel timestamps), hands
//! every frame to the pure follower, and counts what it could not read.
//!
//! Open it in the sender's namespace before the flows start and [`drain`]
//! it while they run (or once after, if the socket buffer holds them all:
//! 32 MiB of 256-byte slots is ~100,000 frames).
//!
//! [`drain`]: Capture::drain

use std::time::Duration;
use tcpaccel_core::flowtime::{Connections, LinkType};
use tcpaccel_core::Instant;
use tcpaccel_sys::packet::{Options, PacketSocket, RecvBatch};

/// Bytes kept of each frame: Ethernet, VLAN, IPv6 with extension headers and
/// a TCP header with options fit; payload lengths come from the IP header.
const SNAP: usize = 256;

/// What a capture has seen so far.
pub struct Capture {
    sock: PacketSocket,
    batch: RecvBatch,
    conns: Connections,
    /// Frames that were not a readable TCP segment (each error's text is
    /// kept for the first one, so a systematic problem is named).
    pub unreadable: u64,
    pub first_error: Option<String>,
    /// Frames without a kernel timestamp (not fed: their time is unknown).
    pub untimed: u64,
}

impl Capture {
    /// Opens the capture on `ifname` in the calling thread's namespace (use
    /// `tcpaccel_sys::netns::run_in` for another one). Needs CAP_NET_RAW.
    pub fn open(ifname: &str) -> tcpaccel_sys::Result<Capture> {
        let opts = Options { promiscuous: false, qdisc_bypass: false, outgoing: true, ..Options::default() };
        let sock = PacketSocket::open(ifname, &opts)?;
        Ok(Capture {
            sock,
            batch: RecvBatch::new(64, SNAP),
            conns: Connections::new(),
            unreadable: 0,
            first_error: None,
            untimed: 0,
        })
    }

    /// Reads every frame waiting, waiting up to `wait` for the first one;
    /// returns how many frames were read.
    pub fn drain(&mut self, wait: Duration) -> tcpaccel_sys::Result<usize> {
        let mut total = 0;
        if !self.sock.wait_readable(Some(wait))? {
            return Ok(0);
        }
        loop {
            let n = self.sock.recv_batch(&mut self.batch)?;
            if n == 0 {
                return Ok(total);
            }
            total += n;
            for f in self.batch.frames() {
                let Some(ts) = f.timestamp else {
                    self.untimed += 1;
                    continue;
                };
                let at = Instant::from_nanos(ts.as_nanos() as u64);
                if let Err(e) = self.conns.on_frame(at, f.data, LinkType::Ethernet) {
                    self.unreadable += 1;
                    self.first_error.get_or_insert_with(|| e.to_string());
                }
            }
        }
    }

    /// The connections followed so far.
    pub fn connections(&self) -> &Connections {
        &self.conns
    }
}
