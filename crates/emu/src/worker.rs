//! The hot path: one thread per direction, reading frames from one packet
//! socket, running them through the pure [`Link`] model and sending them out
//! of the other socket when the model says they are due.
//!
//! Per loop: send everything due (in `sendmmsg` batches), receive what is
//! waiting (in `recvmmsg` batches, bounded so sending is never starved), then
//! sleep until the next due frame or the next arrival with `ppoll` on the
//! receive socket. The sleep ends [`SPIN`] early and the rest is spun, so a
//! frame leaves within a few µs of its time without burning a core when idle.
//! Nothing here allocates per frame or logs per frame.

use std::sync::atomic::Ordering;
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tcpaccel_core::link::{Delivery, DropReason, Link, Verdict};
use tcpaccel_core::meter::{Bin, Histogram};
use tcpaccel_core::Instant;
use tcpaccel_sys::packet::{PacketSocket, RecvBatch};

use crate::config::{LinkConfig, Scheduling};
use crate::frame;
use crate::ring::FrameRing;
use crate::summary::{DirectionSummary, Drops};
use crate::Shared;

/// The last stretch before a deadline is spun instead of slept: ppoll wakes
/// up some µs late even with a 1 ns timer slack.
pub(crate) const SPIN: Duration = Duration::from_micros(20);
/// Longest sleep, so a stop request is seen promptly.
const IDLE: Duration = Duration::from_millis(5);
/// How often counters and meter bins are published.
const PUBLISH: Duration = Duration::from_millis(20);
/// Receive batches per loop before sending again.
const RX_ROUNDS: usize = 8;
/// Frames per send batch.
const TX_BATCH: usize = 64;

/// Closed meter bins of one direction, for the writer thread.
pub(crate) struct MeterMsg {
    pub dir: usize,
    pub bins: Vec<Bin>,
}

pub(crate) struct Worker {
    pub dir: usize,
    pub rx: Arc<PacketSocket>,
    pub tx: Arc<PacketSocket>,
    pub cfg: LinkConfig,
    pub link: Link,
    pub ring: FrameRing,
    pub batch: RecvBatch,
    pub epoch: std::time::Instant,
    pub shared: Arc<Shared>,
    pub meter_tx: Option<SyncSender<MeterMsg>>,
    pub bins: Vec<Bin>,
    pub lateness: Histogram,
    pub tx_errors: u64,
    pub kernel_drops: u64,
    pub meter_lost: u64,
    pub first_send: Option<Instant>,
    pub last_send: Option<Instant>,
    /// On-wire bytes delivered after the first send (for the achieved rate).
    pub wire_after_first: u64,
    pub error: Option<String>,
    pub scheduling: Scheduling,
}

/// Applies `want` to the calling thread as far as privileges allow; returns
/// what took effect.
fn apply_scheduling(want: Scheduling) -> Scheduling {
    use tcpaccel_sys::packet::{set_realtime, set_thread_nice};
    if want == Scheduling::Realtime {
        match set_realtime(10) {
            Ok(()) => return Scheduling::Realtime,
            Err(e) => tracing::info!("no real-time priority for the emulator ({e}); trying nice -10"),
        }
    }
    if want != Scheduling::Normal {
        match set_thread_nice(-10) {
            Ok(()) => return Scheduling::Nice,
            Err(e) => tracing::info!("emulator thread keeps its priority: {e}"),
        }
    }
    Scheduling::Normal
}

/// CPU time (user + system) of the calling thread from /proc, in seconds
/// (USER_HZ ticks, 10 ms resolution).
fn thread_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the whole line (proc(5)).
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

fn errno(e: &tcpaccel_sys::Error) -> Option<i32> {
    match e {
        tcpaccel_sys::Error::Io { source, .. }
        | tcpaccel_sys::Error::Privilege { source, .. }
        | tcpaccel_sys::Error::Unsupported { source, .. } => source.raw_os_error(),
        _ => None,
    }
}

/// Errors after which the interface is gone or down for good.
fn fatal(e: &tcpaccel_sys::Error) -> bool {
    matches!(errno(e), Some(libc_codes::ENXIO) | Some(libc_codes::ENODEV) | Some(libc_codes::EBADF))
        || matches!(e, tcpaccel_sys::Error::Other { .. })
}

/// The few errno values we branch on (this crate has no libc dependency).
mod libc_codes {
    pub const ENXIO: i32 = 6;
    pub const EBADF: i32 = 9;
    pub const ENODEV: i32 = 19;
}

impl Worker {
    fn now(&self) -> Instant {
        Instant(self.epoch.elapsed().as_nanos() as u64)
    }

    pub fn run(mut self, slots: &Mutex<DirectionSummary>) {
        if let Err(e) = tcpaccel_sys::packet::set_timer_slack(1) {
            tracing::debug!("timer slack unchanged: {e}");
        }
        let applied = apply_scheduling(self.scheduling);
        crate::lock(slots).scheduling = applied;
        let mut next_publish = self.now() + PUBLISH;
        while !self.shared.stop.load(Ordering::Relaxed) {
            if let Err(e) = self.step() {
                self.error = Some(e);
                break;
            }
            let now = self.now();
            if now >= next_publish {
                self.publish(now, slots, false);
                next_publish = now + PUBLISH;
            }
        }
        let now = self.now();
        self.publish(now, slots, true);
    }

    /// One round: send due frames, receive, sleep.
    fn step(&mut self) -> Result<(), String> {
        self.deliver()?;
        self.receive()?;
        self.deliver()?;
        let now = self.now();
        match self.link.poll_timeout() {
            Some(t) if t <= now => Ok(()),
            Some(t) => {
                let wait = t - now;
                if wait > SPIN {
                    self.rx
                        .wait_readable(Some((wait - SPIN).min(IDLE)))
                        .map_err(|e| format!("waiting on {}: {e}", self.rx.ifname()))?;
                } else {
                    while self.now() < t {
                        std::hint::spin_loop();
                    }
                }
                Ok(())
            }
            None => {
                self.rx
                    .wait_readable(Some(IDLE))
                    .map_err(|e| format!("waiting on {}: {e}", self.rx.ifname()))?;
                Ok(())
            }
        }
    }

    fn receive(&mut self) -> Result<(), String> {
        let max_frame = self.cfg.max_frame;
        for _ in 0..RX_ROUNDS {
            let n = self.rx.recv_batch(&mut self.batch).map_err(|e| format!("receiving: {e}"))?;
            if n == 0 {
                break;
            }
            let now = self.now();
            let Worker { batch, link, ring, .. } = self;
            for f in batch.frames() {
                if let Err(reason) = frame::check(f.data, f.len, max_frame) {
                    link.reject(now, f.len, reason);
                    continue;
                }
                if !ring.fits(f.len) {
                    link.reject(now, f.len, DropReason::Overflow);
                    continue;
                }
                if let Verdict::Queued { id, .. } = link.enqueue(now, f.len) {
                    let stored = ring.push(id, f.data);
                    debug_assert!(stored, "ring had room for {} bytes", f.len);
                }
            }
            if n < self.batch.capacity() {
                break;
            }
        }
        Ok(())
    }

    fn deliver(&mut self) -> Result<(), String> {
        let mut due =
            [Delivery { id: 0, len: 0, departs_at: Instant::ZERO, delivers_at: Instant::ZERO }; TX_BATCH];
        loop {
            let now = self.now();
            let mut k = 0;
            while k < TX_BATCH {
                match self.link.poll_deliver(now) {
                    Some(d) => {
                        due[k] = d;
                        k += 1;
                    }
                    None => break,
                }
            }
            if k == 0 {
                return Ok(());
            }
            // Lateness is taken when the batch is handed to the kernel: the
            // send itself runs the receiving host's stack (veth delivers in
            // the sender's softirq), which is the far end's time, not ours.
            let t = self.now();
            // Frames the ring lacks (never expected) are skipped, not sent wrong.
            let mut sent_frames = 0usize;
            {
                let mut slices: [&[u8]; TX_BATCH] = [&[]; TX_BATCH];
                let mut m = 0;
                for (i, d) in due[..k].iter().enumerate() {
                    match self.ring.get(i) {
                        Some((id, data)) if id == d.id => {
                            slices[m] = data;
                            m += 1;
                        }
                        _ => self.tx_errors += 1,
                    }
                }
                let mut stalls = 0;
                while sent_frames < m {
                    match self.tx.send_batch(&slices[sent_frames..m]) {
                        Ok(0) => {
                            stalls += 1;
                            if stalls > 100 {
                                self.tx_errors += (m - sent_frames) as u64;
                                break;
                            }
                            let _ = self.tx.wait_writable(Some(Duration::from_millis(1)));
                        }
                        Ok(n) => sent_frames += n,
                        Err(e) => {
                            if fatal(&e) {
                                return Err(format!("sending: {e}"));
                            }
                            // The first frame of the batch was refused (e.g. larger
                            // than the far interface's MTU): count it and go on.
                            self.tx_errors += 1;
                            sent_frames += 1;
                        }
                    }
                }
            }
            for d in &due[..k] {
                if self.ring.front().is_some_and(|(id, _)| id == d.id) {
                    self.ring.pop();
                }
                self.lateness.record_duration(t - d.delivers_at);
                let wire = self.link.wire_bytes(d.len as usize);
                if self.first_send.is_none() {
                    self.first_send = Some(t);
                } else {
                    self.wire_after_first += wire;
                }
            }
            self.last_send = Some(t);
            if k < TX_BATCH {
                return Ok(());
            }
        }
    }

    fn publish(&mut self, now: Instant, slot: &Mutex<DirectionSummary>, last: bool) {
        if let Ok((_, drops)) = self.rx.take_stats() {
            self.kernel_drops += drops;
        }
        self.link.advance(now);
        self.link.meter().drain_into(&mut self.bins);
        if last {
            let cur = self.link.meter().current();
            if cur.arrived_frames + cur.departed_frames + cur.dropped_frames > 0 || cur.queue_end_bytes > 0 {
                self.bins.push(cur);
            }
        }
        if !self.bins.is_empty() {
            match &self.meter_tx {
                Some(tx) => {
                    let bins = std::mem::replace(&mut self.bins, Vec::with_capacity(64));
                    let n = bins.len() as u64;
                    if tx.try_send(MeterMsg { dir: self.dir, bins }).is_err() {
                        self.meter_lost += n;
                    }
                }
                None => self.bins.clear(),
            }
        }
        let c = *self.link.counters();
        let elapsed = now.as_nanos().max(1);
        let achieved = match (self.first_send, self.last_send) {
            (Some(a), Some(b)) if b > a => {
                ((self.wire_after_first as u128 * 8 * 1_000_000_000) / (b - a).as_nanos()) as u64
            }
            _ => 0,
        };
        let mut s = crate::lock(slot);
        s.arrived_frames = c.arrived_frames;
        s.arrived_bytes = c.arrived_bytes;
        s.delivered_frames = c.delivered_frames;
        s.delivered_bytes = c.delivered_bytes;
        s.drops = Drops::from_counters(&c, self.tx_errors, self.kernel_drops);
        s.in_flight_frames = self.link.in_system();
        s.max_queue_bytes = c.max_queue_bytes;
        s.max_queue_frames = c.max_queue_frames;
        s.achieved_wire_bps = achieved;
        s.mean_bps = ((c.delivered_bytes as u128 * 8 * 1_000_000_000) / elapsed as u128) as u64;
        s.lateness = self.lateness.summary();
        s.meter_bins_lost = self.meter_lost + self.link.meter().overflowed();
        s.error = self.error.clone();
        if let Some(cpu) = thread_cpu_seconds() {
            s.cpu_s = cpu;
        }
    }
}
