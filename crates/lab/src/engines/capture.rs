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

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tcpaccel_core::flowtime::{Connections, FlowTimes, LinkType};
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

/// Captures on every interface of several hosts, drained by one thread
/// while the flows run (so the sockets' buffers never fill).
pub struct HostCaptures {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<tcpaccel_sys::Result<Vec<Vec<Capture>>>>,
}

/// How often the drain thread reads the sockets.
const DRAIN_EVERY: Duration = Duration::from_millis(5);

impl HostCaptures {
    /// Opens a capture on each of `ifnames` of each host (`(namespace,
    /// ifnames)`, host index = position) and starts draining them.
    pub fn start(hosts: &[(String, Vec<String>)]) -> anyhow::Result<HostCaptures> {
        let mut all = Vec::with_capacity(hosts.len());
        for (ns, ifnames) in hosts {
            let mut caps = Vec::with_capacity(ifnames.len());
            for ifname in ifnames {
                let name = ifname.clone();
                let c = tcpaccel_sys::netns::run_in(ns, move || Capture::open(&name))
                    .with_context(|| format!("entering {ns}"))?
                    .with_context(|| format!("opening a capture on {ifname} in {ns}"))?;
                caps.push(c);
            }
            all.push(caps);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("capture".into())
            .spawn(move || -> tcpaccel_sys::Result<Vec<Vec<Capture>>> {
                loop {
                    let last = flag.load(Ordering::Relaxed);
                    for c in all.iter_mut().flatten() {
                        c.drain(Duration::ZERO)?;
                    }
                    if last {
                        return Ok(all);
                    }
                    std::thread::sleep(DRAIN_EVERY);
                }
            })
            .context("starting the capture thread")?;
        Ok(HostCaptures { stop, thread })
    }

    /// Reads what is left and returns every host's captures.
    pub fn finish(self) -> anyhow::Result<Captured> {
        self.stop.store(true, Ordering::Relaxed);
        let per_host = match self.thread.join() {
            Ok(r) => r.context("draining the captures")?,
            Err(_) => anyhow::bail!("the capture thread panicked"),
        };
        Ok(Captured { per_host })
    }
}

/// Every host's captures once the run is over.
pub struct Captured {
    per_host: Vec<Vec<Capture>>,
}

impl Captured {
    /// What host `host`'s interfaces show of the connection `sender` →
    /// `receiver` (the first interface that saw its SYN).
    pub fn times(&self, host: usize, sender: SocketAddr, receiver: SocketAddr) -> Option<FlowTimes> {
        self.per_host.get(host)?.iter().find_map(|c| c.connections().get(sender, receiver).copied())
    }

    /// Frames no capture could read, and the first reason.
    pub fn unreadable(&self) -> (u64, Option<&str>) {
        let caps = self.per_host.iter().flatten();
        let n = caps.clone().map(|c| c.unreadable + c.untimed).sum();
        (n, caps.filter_map(|c| c.first_error.as_deref()).next())
    }
}

/// A flow's completion times as the sender's capture shows them, over all
/// its TCP connections (an MPTCP flow's subflows): from the first SYN to
/// the last connection's ACK of its last data byte, and to the last ACK of
/// a FIN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapturedFct {
    pub to_last_data_ack: Option<Duration>,
    pub to_fin_ack: Option<Duration>,
}

/// Combines the capture times of one flow's connections; `None` without
/// any. A connection that carried data and whose last byte's ACK was not
/// seen leaves `to_last_data_ack` unknown; one whose FIN's ACK was not
/// seen leaves `to_fin_ack` unknown (a time that misses a part would be a
/// false, shorter one).
pub fn flow_fct(times: &[FlowTimes]) -> Option<CapturedFct> {
    let syn = times.iter().map(|t| t.syn).min()?;
    let mut data = times.iter().filter(|t| t.data_bytes > 0).peekable();
    let to_last_data_ack = if data.peek().is_none() {
        None
    } else {
        data.map(|t| t.last_data_acked).collect::<Option<Vec<_>>>().and_then(|v| v.into_iter().max())
    }
    .map(|t| t - syn);
    let to_fin_ack = times
        .iter()
        .map(|t| t.fin_acked)
        .collect::<Option<Vec<_>>>()
        .and_then(|v| v.into_iter().max())
        .map(|t| t - syn);
    Some(CapturedFct { to_last_data_ack, to_fin_ack })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(syn_us: u64, data: u64, last_us: Option<u64>, fin_us: Option<u64>) -> FlowTimes {
        FlowTimes {
            syn: Instant::from_nanos(syn_us * 1000),
            last_data_acked: last_us.map(|u| Instant::from_nanos(u * 1000)),
            fin_acked: fin_us.map(|u| Instant::from_nanos(u * 1000)),
            data_bytes: data,
            retransmitted: 0,
            reset: false,
        }
    }

    #[test]
    fn a_flow_ends_when_its_last_connection_does_from_its_first_syn() {
        // An MPTCP flow: the initial subflow from 100 µs, a join from 900 µs.
        let f =
            flow_fct(&[t(100, 30_000, Some(4_100), Some(4_300)), t(900, 20_000, Some(5_100), Some(6_100))])
                .unwrap();
        assert_eq!(f.to_last_data_ack, Some(Duration::from_micros(5_000)));
        assert_eq!(f.to_fin_ack, Some(Duration::from_micros(6_000)));
        // A subflow that carried nothing does not hold the data end back.
        let f = flow_fct(&[t(0, 10_000, Some(2_000), Some(2_500)), t(500, 0, None, Some(3_000))]).unwrap();
        assert_eq!(f.to_last_data_ack, Some(Duration::from_micros(2_000)));
        assert_eq!(f.to_fin_ack, Some(Duration::from_micros(3_000)));
    }

    #[test]
    fn a_missing_ack_leaves_that_end_unknown_not_shorter() {
        let f = flow_fct(&[t(0, 10_000, Some(2_000), None), t(500, 5_000, None, Some(3_000))]).unwrap();
        assert_eq!(f, CapturedFct { to_last_data_ack: None, to_fin_ack: None });
        let f = flow_fct(&[t(0, 0, None, Some(1_000))]).unwrap();
        assert_eq!(f.to_last_data_ack, None, "no data, no data end");
        assert_eq!(flow_fct(&[]), None);
    }
}
