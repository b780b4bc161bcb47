//! Burst mode (`tcpaccel send --burst 10MB --every 2s --duration 20s`): an
//! intermittent sender on one connection, with per-burst completion times
//! and optional pacing of each burst that resumes after idle ([HPC-TCP]).
//!
//! What it is: [`run_bursts`], a blocking function that connects like
//! [`run_send`](crate::run_send) (same header: an upload of `duration`),
//! hands each burst to a writer thread at `start + k·every`, and samples
//! TCP_INFO every millisecond on the calling thread.
//!
//! ## How completion is measured (no protocol change)
//! A burst is complete when the receiver has acknowledged its last byte:
//! `tcpi_bytes_acked ≥ 1 (SYN) + header + all bytes written so far`. The
//! receiver's cumulative ACK is its per-burst receipt; the run's usual
//! receipt (bytes counted by the receiver) closes the connection. The time is
//! from the burst's scheduled start to the first 1 ms sample that sees the
//! ACK, so it includes one RTT of ACK return and up to 1 ms of sampling.
//! A burst that has not completed when the next one is due delays it.
//!
//! ## `--resume-pacing`
//! Before a burst, [`tcpaccel_core::pacing::resume_after_idle`] decides from
//! TCP_INFO (time since the last send, RTO, srtt, cwnd, and the delivery
//! rate measured when the previous burst completed) whether the window would
//! leave as one burst; if so `SO_MAX_PACING_RATE` is set to that rate for
//! the plan's hold time, then the run's own cap comes back. This only matters
//! when the window survives the pause: Linux resets cwnd after an idle
//! longer than the RTO unless `net.ipv4.tcp_slow_start_after_idle=0`, a
//! **per-namespace sysctl with no per-socket equivalent** (no socket option
//! or TCP_INFO field changes it; the lab's `idle` scenario sets it).
//!
//! What it is not: one stream only; no checksum; no reverse mode.

use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tcpaccel_core::pacing::{resume_after_idle, IdleState, ResumePlan};
use tcpaccel_core::units::Rate;
use tcpaccel_sys::sockopt::{self, PACING_UNLIMITED};
use tcpaccel_sys::tcpinfo::{self, TcpInfo};
use tracing::{debug, warn};

use crate::pace::{framing_from_tcp_info, Framing};
use crate::proto::{Amount, Header, Mode, HEADER_LEN};
use crate::pump::{self, Until};
use crate::send::{connect, read_receipt, session_id, SendConfig, Volume};
use crate::{Error, Result};

/// The burst schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Bursts {
    /// Bytes per burst.
    pub bytes: u64,
    /// Period between burst starts.
    #[serde(serialize_with = "crate::report::secs")]
    pub every: Duration,
    /// Pace a burst that resumes after idle at the last delivery rate.
    pub resume_pacing: bool,
}

/// One burst's outcome; serialized with `"type": "burst"`.
#[derive(Debug, Clone, Serialize)]
pub struct BurstRecord {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub index: u32,
    /// Scheduled start, seconds since the connection was set up.
    pub start_s: f64,
    pub bytes: u64,
    /// Start to the ACK of the last byte, ms; `None` if the run ended first.
    pub completion_ms: Option<f64>,
    /// Congestion window when the burst started (packets), before the
    /// kernel's idle check (which runs when the first new segment is queued).
    #[serde(rename = "cwnd_at_start_segments")]
    pub cwnd_at_start: u32,
    /// Congestion window at the first sample, ~1 ms into the burst: after
    /// any restart of slow start (`tcp_slow_start_after_idle`).
    #[serde(rename = "cwnd_1ms_segments")]
    pub cwnd_1ms: Option<u32>,
    /// Time since the previous send when the burst started, ms.
    pub idle_ms: u32,
    /// The resume pacing applied, if any.
    pub resume: Option<ResumePlan>,
    /// Retransmissions during this burst.
    pub retransmits: u32,
}

/// The run's outcome; serialized with `"type": "burst_summary"`.
#[derive(Debug, Clone, Serialize)]
pub struct BurstSummary {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub bursts: Vec<BurstRecord>,
    /// Bytes the receiver counted (its receipt).
    pub bytes: u64,
    pub retransmits: u32,
    pub stopped_early: bool,
}

impl BurstSummary {
    /// Completion times of the completed bursts, ms, in order.
    pub fn completions_ms(&self) -> Vec<f64> {
        self.bursts.iter().filter_map(|b| b.completion_ms).collect()
    }
}

/// Bytes `tcpi_bytes_acked` shows once `data` bytes of payload are acknowledged.
pub fn acked_target(data: u64) -> u64 {
    1 + HEADER_LEN as u64 + data
}

/// The resume plan for a burst about to start, from a TCP_INFO sample and
/// the delivery rate (`tcpi_delivery_rate`, bytes/s) measured when the
/// previous burst completed; `ceiling` is the payload cap of `--pace`, bytes/s.
pub fn resume_plan(info: &TcpInfo, last_delivery_rate: u64, ceiling: Option<u64>) -> Option<ResumePlan> {
    let s = IdleState {
        idle: Duration::from_millis(u64::from(info.last_data_sent)),
        rto: Duration::from_micros(u64::from(info.rto)),
        srtt: info.srtt(),
        cwnd: info.snd_cwnd,
        mss: info.snd_mss,
        last_delivery_rate: Rate::from_bytes_per_sec(last_delivery_rate),
    };
    resume_after_idle(&s, ceiling.map(Rate::from_bytes_per_sec))
}

/// Runs the bursts over one connection; `cfg.volume` must be a duration
/// (the length of the whole run) and `cfg.parallel` 1. `on_burst` is called
/// as each burst completes (or is cut by the end of the run).
pub fn run_bursts(
    cfg: &SendConfig,
    b: Bursts,
    mut on_burst: impl FnMut(&BurstRecord),
) -> Result<BurstSummary> {
    let Volume::Duration(total) = cfg.volume else {
        return Err(Error::Config("a burst run is timed (a duration), not a byte count".into()));
    };
    if cfg.parallel != 1 || cfg.reverse || cfg.checksum || cfg.mptcp {
        return Err(Error::Config(
            "a burst run is one plain TCP upload: no parallel streams, reverse mode, checksum or MPTCP"
                .into(),
        ));
    }
    if b.bytes == 0 || b.every.is_zero() || total.is_zero() {
        return Err(Error::Config(
            "the burst size, the burst period and the run duration must be above zero".into(),
        ));
    }
    let sock = connect(cfg)?;
    let peer = cfg.to;
    let framing = match tcpinfo::tcp_info(&sock) {
        Ok(i) => cfg.framing.unwrap_or_else(|| framing_from_tcp_info(&i, peer.is_ipv6())),
        Err(_) => cfg.framing.unwrap_or(Framing::ETHERNET_1500_TS),
    };
    let mut pacer = cfg.pace.controller(1);
    let base_cap = pacer.as_mut().and_then(|p| p.initial(framing));
    if let Some(rate) = base_cap {
        sockopt::set_max_pacing_rate(&sock, rate)?;
    }
    let ceiling = cfg.pace.ceiling().map(|c| framing.payload_bytes_per_sec(c).max(1));
    let header = Header {
        mode: Mode::Upload,
        amount: Amount::Millis(total.as_millis().min(u128::from(u64::MAX)) as u64),
        checksum: false,
        stream: 0,
        streams: 1,
        session: session_id(cfg.seed),
        pace_bytes_per_sec: 0,
        cc: None,
    };
    pump::write_msg(&sock, &header.encode(), cfg.receipt_timeout)
        .map_err(|e| Error::io("send header", peer, e))?;

    let stop = cfg.stop.clone().unwrap_or_default();
    let abort = AtomicBool::new(false);
    let counter = AtomicU64::new(0);
    let buf = pump::pattern(cfg.seed, 0);
    let t0 = Instant::now();
    let end = t0 + total;
    let mut records = Vec::new();
    let written = std::thread::scope(|scope| -> Result<u64> {
        let (tx, rx) = mpsc::channel::<u64>();
        let (sock_w, abort_w, counter_w, buf_w) = (&sock, &abort, &counter, &buf);
        let writer = scope.spawn(move || -> std::io::Result<u64> {
            let mut sent = 0;
            for n in rx {
                sent += pump::write_data(sock_w, buf_w, Until::Bytes(n), counter_w, None, None, abort_w)?;
            }
            Ok(sent)
        });
        let r = drive(&sock, b, (t0, end), &stop, &tx, &mut pacer, (base_cap, ceiling), framing, |r| {
            on_burst(&r);
            records.push(r);
        });
        drop(tx);
        if r.is_err() {
            abort.store(true, Ordering::Relaxed);
        }
        let w = writer.join().map_err(|_| Error::Protocol { peer, msg: "burst writer panicked".into() })?;
        r?;
        w.map_err(|e| Error::io("send burst", peer, e))
    })?;
    sock.shutdown(Shutdown::Write).map_err(|e| Error::io("shutdown(write)", peer, e))?;
    let r = read_receipt(&sock, peer, cfg.receipt_timeout, &abort, "the receipt")?;
    if r.bytes != written {
        warn!(%peer, written, received = r.bytes, "receiver counted a different byte total");
    }
    let retransmits = tcpinfo::tcp_info(&sock).map(|i| i.total_retrans).unwrap_or(0);
    Ok(BurstSummary {
        kind: "burst_summary",
        bursts: records,
        bytes: r.bytes,
        retransmits,
        stopped_early: stop.load(Ordering::Relaxed),
    })
}

/// The schedule loop on the calling thread: start bursts, restore the cap
/// after a resume hold, detect completions, feed a dynamic controller.
#[allow(clippy::too_many_arguments)]
fn drive(
    sock: &TcpStream,
    b: Bursts,
    (t0, end): (Instant, Instant),
    stop: &AtomicBool,
    tx: &mpsc::Sender<u64>,
    pacer: &mut Option<Box<dyn crate::PaceControl>>,
    (base_cap, ceiling): (Option<u64>, Option<u64>),
    framing: Framing,
    mut done: impl FnMut(BurstRecord),
) -> Result<()> {
    const TICK: Duration = Duration::from_millis(1);
    let peer = cfg_peer(sock);
    let info = |s: &TcpStream| tcpinfo::tcp_info(s).map_err(Error::Sys);
    let mut cum = 0u64;
    let mut delivery_rate = 0u64;
    let mut index = 0u32;
    let mut next = t0;
    while next < end && !stop.load(Ordering::Relaxed) {
        wait_until(next, stop);
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let start = Instant::now();
        let i0 = info(sock)?;
        let plan = if b.resume_pacing { resume_plan(&i0, delivery_rate, ceiling) } else { None };
        let mut hold_until = None;
        if let Some(p) = plan {
            sockopt::set_max_pacing_rate(sock, p.rate.bytes_per_sec())?;
            hold_until = Some(start + p.hold);
            debug!(index, rate = p.rate.bytes_per_sec(), hold = ?p.hold, "resume pacing");
        }
        cum += b.bytes;
        tx.send(b.bytes).map_err(|_| Error::Protocol { peer, msg: "burst writer stopped".into() })?;
        let mut rec = BurstRecord {
            kind: "burst",
            index,
            start_s: next.duration_since(t0).as_secs_f64(),
            bytes: b.bytes,
            completion_ms: None,
            cwnd_at_start: i0.snd_cwnd,
            cwnd_1ms: None,
            idle_ms: i0.last_data_sent,
            resume: plan,
            retransmits: 0,
        };
        loop {
            std::thread::sleep(TICK);
            let now = Instant::now();
            let i = info(sock)?;
            rec.cwnd_1ms.get_or_insert(i.snd_cwnd);
            if hold_until.is_some_and(|h| now >= h) {
                hold_until = None;
                sockopt::set_max_pacing_rate(sock, base_cap.unwrap_or(PACING_UNLIMITED))?;
            }
            if let (None, Some(p)) = (hold_until, pacer.as_mut()) {
                let core_now = tcpaccel_core::Instant::from_nanos(now.duration_since(t0).as_nanos() as u64);
                if let Some(rate) = p.on_sample(core_now, &i, framing) {
                    sockopt::set_max_pacing_rate(sock, rate)?;
                }
            }
            if i.bytes_acked.is_some_and(|a| a >= acked_target(cum)) {
                rec.completion_ms = Some(now.duration_since(next).as_secs_f64() * 1e3);
                rec.retransmits = i.total_retrans.saturating_sub(i0.total_retrans);
                delivery_rate = i.delivery_rate.unwrap_or(0);
                break;
            }
            if i.bytes_acked.is_none() {
                return Err(Error::Protocol {
                    peer,
                    msg: "this kernel's TCP_INFO has no bytes_acked; burst completion cannot be seen".into(),
                });
            }
            if now >= end + Duration::from_secs(5) || stop.load(Ordering::Relaxed) {
                break;
            }
        }
        if hold_until.is_some() {
            sockopt::set_max_pacing_rate(sock, base_cap.unwrap_or(PACING_UNLIMITED))?;
        }
        done(rec);
        index += 1;
        next = (next + b.every).max(Instant::now());
    }
    Ok(())
}

fn cfg_peer(sock: &TcpStream) -> std::net::SocketAddr {
    sock.peer_addr().unwrap_or_else(|_| std::net::SocketAddr::from(([0, 0, 0, 0], 0)))
}

fn wait_until(t: Instant, stop: &AtomicBool) {
    loop {
        let now = Instant::now();
        if now >= t || stop.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep((t - now).min(Duration::from_millis(50)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_target_counts_syn_and_header() {
        assert_eq!(acked_target(0), 1 + HEADER_LEN as u64);
        assert_eq!(acked_target(10_000_000), 10_000_001 + HEADER_LEN as u64);
    }

    #[test]
    fn resume_plan_only_after_an_idle_longer_than_the_rto() {
        let mut i = TcpInfo {
            snd_cwnd: 1000,
            snd_mss: 1448,
            rtt: 100_000,
            rto: 300_000,
            last_data_sent: 1800,
            ..TcpInfo::default()
        };
        // 1.8 s idle > 300 ms RTO: pace at the last delivery rate ([HPC-TCP]).
        let p = resume_plan(&i, 50_000_000, None).expect("a plan after idle");
        assert_eq!(p.rate.bytes_per_sec(), 50_000_000);
        // One window (1000 × 1448 bytes) at 50 MB/s: 28.96 ms.
        assert_eq!(p.hold, Duration::from_micros(28_960));
        // The static ceiling wins over a higher delivery rate.
        assert_eq!(
            resume_plan(&i, 50_000_000, Some(10_000_000)).map(|p| p.rate.bytes_per_sec()),
            Some(10_000_000)
        );
        // Without a measured rate: cwnd·mss/srtt = 14.48 MB/s ([PSPacer] eq. 1).
        assert_eq!(resume_plan(&i, 0, None).map(|p| p.rate.bytes_per_sec()), Some(14_480_000));
        i.last_data_sent = 200;
        assert_eq!(resume_plan(&i, 50_000_000, None), None, "ACKs still clock the sender");
    }
}
