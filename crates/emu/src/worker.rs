//! The hot path: one thread per direction, reading frames from one packet
//! socket, running them through the pure [`Link`] model and sending them out
//! of the other socket when the model says they are due.
//!
//! Per loop: receive what is waiting (`recvmmsg` batches, bounded so sending
//! is never starved), send everything due (`sendmmsg` batches), then wait.
//! Timing rests on three facts of the platform (BENCHMARKS.md, "The link
//! emulator", has the figures `tcpaccel lab emu-bench` measured):
//! - a frame's arrival time is the kernel's receive timestamp, so however
//!   late the thread reads it, its delay and queueing start when it arrived;
//!   while delay + backlog leave room, arrivals are read in batches without
//!   waking the thread for each;
//! - ppoll/nanosleep wake up late, more so on a VM, so an idle link
//!   sleeps until [`WAKE_MARGIN`] before a deadline and spins the rest, within
//!   a CPU budget ([`SPIN_SHARE`]);
//! - arming a timer costs a VM exit, so a busy link sends the frames due
//!   within [`EARLY_BUSY`] together and sleeps at least twice that: each frame
//!   leaves about that early or late and the mean rate stays exact (the
//!   model, not the send times, decides departures).
//!
//! Nothing here allocates per frame or logs per frame.

use std::sync::atomic::Ordering;
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tcpaccel_core::link::{Delivery, DropReason, Link, Verdict};
use tcpaccel_core::meter::{Bin, GapRecord, Histogram};
use tcpaccel_core::Instant;
use tcpaccel_sys::packet::{PacketSocket, RecvBatch};

use crate::config::{LinkConfig, Scheduling};
use crate::frame;
use crate::ring::FrameRing;
use crate::summary::{DirectionSummary, Drops, TransferWindow};
use crate::Shared;

/// Frames due within this window are sent at once instead of sleeping or
/// spinning for them: a thread that never sleeps is throttled by the
/// kernel's RT limit (50 ms per second) and burns a core the TCP endpoints
/// need.
pub(crate) const EARLY: Duration = Duration::from_micros(20);
/// ppoll wakes up late on a VM (here p50 25 µs, p99 ~150 µs with RT
/// priority and 1 ns timer slack), so the sleep ends this much before a
/// deadline and the rest is spun ...
const WAKE_MARGIN: Duration = Duration::from_micros(100);
/// ... as long as spinning took at most this share of the last window; past
/// it (a busy link) frames go out up to [`EARLY_BUSY`] ahead instead, so a
/// wake-up sends a few frames at once: arming the ppoll timer costs a VM
/// exit (half the thread's time at 1 Gbit/s when it woke for every frame).
const EARLY_BUSY: Duration = Duration::from_micros(60);
const SPIN_SHARE: f64 = 0.1;
const SPIN_WINDOW: Duration = Duration::from_millis(10);
/// Arrivals are read lazily only when they cannot be due for at least this long ...
const LAZY_RX_MIN_SLACK: Duration = Duration::from_micros(800);
/// ... and at least this often.
const LAZY_RX_MAX: Duration = Duration::from_millis(1);
/// Receive timestamps older than this are not trusted.
const MAX_STAMP_AGE: Duration = Duration::from_millis(100);
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
    /// Inter-arrival gaps of accepted-for-checking frames (a bounded sample).
    pub gaps: GapRecord,
    /// Frames timed by their kernel receive stamp (the rest by the read).
    pub stamped: u64,
    pub tx_errors: u64,
    pub kernel_drops: u64,
    pub meter_lost: u64,
    /// Where traffic flowed, for the rates over the transfer window.
    pub window: TransferWindow,
    pub error: Option<String>,
    pub scheduling: Scheduling,
    /// The latest time handed to the model (its clock never goes back).
    pub model_now: Instant,
    /// Time spent spinning since `spin_window_start`.
    pub spun: Duration,
    /// How long the thread took to come back beyond the sleeps it asked for.
    pub away: Away,
    pub spin_window_start: Instant,
}

/// The longest the thread took from one round to the next beyond the
/// sleep it asked for: a round's own work (well under a millisecond) and
/// any time the host did not run it. A preempted vCPU stops the packet
/// path too, and the frames sent meanwhile come in as one burst, which no
/// receive stamp spreads again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Away {
    last: Option<Instant>,
    asked: Duration,
    pub(crate) max: Duration,
}

impl Away {
    /// A round starts at `now`.
    pub(crate) fn step(&mut self, now: Instant) {
        if let Some(last) = self.last {
            let over = (now - last).saturating_sub(self.asked);
            self.max = self.max.max(over);
        }
        self.last = Some(now);
        self.asked = Duration::ZERO;
    }

    /// The round is about to sleep up to `d`.
    pub(crate) fn asked(&mut self, d: Duration) {
        self.asked += d;
    }
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

/// Arrival time of a frame on the model's clock (`now` is this thread's
/// clock, `real_now` CLOCK_REALTIME read just after it): the kernel's receive
/// timestamp `ts` when there is a believable one (so the time the thread took
/// to wake up is not added to the frame's delay), never before the model's
/// clock `model_now` and never after `now`.
pub(crate) fn arrival_time(
    now: Instant,
    real_now: Option<Duration>,
    ts: Option<Duration>,
    model_now: Instant,
) -> Instant {
    let t = match (real_now, ts) {
        (Some(real), Some(ts)) if stamp_usable(real, ts) => {
            Instant(now.0.saturating_sub((real - ts).as_nanos() as u64))
        }
        _ => now,
    };
    t.max(model_now).min(now)
}

/// Whether a kernel receive stamp `ts` can time an arrival read at `real`
/// (both CLOCK_REALTIME). A stamp from the future, or older than any wait of
/// ours, is not a receive time (e.g. a sender's CLOCK_MONOTONIC departure
/// time kept across the veth): such frames are timed by the read.
fn stamp_usable(real: Duration, ts: Duration) -> bool {
    ts <= real && real - ts <= MAX_STAMP_AGE
}

/// CPU time (user + system) of the calling thread from /proc, in seconds
/// (USER_HZ ticks, 10 ms resolution).
fn thread_cpu_seconds() -> Option<f64> {
    tcpaccel_sys::procstat::read_task("thread-self").ok().map(|t| t.cpu_seconds())
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
    pub(super) const ENXIO: i32 = 6;
    pub(super) const EBADF: i32 = 9;
    pub(super) const ENODEV: i32 = 19;
}

impl Worker {
    fn now(&self) -> Instant {
        Instant(self.epoch.elapsed().as_nanos() as u64)
    }

    pub(crate) fn run(mut self, slots: &Mutex<DirectionSummary>) {
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

    /// One round: receive (first, so arrivals keep their kernel timestamps
    /// ahead of the model's clock), send what is due, then wait for the next
    /// due frame or an arrival: sleep, and spin the last [`WAKE_MARGIN`]
    /// while the spin budget lasts.
    fn step(&mut self) -> Result<(), String> {
        self.away.step(self.now());
        self.receive()?;
        let now = self.now();
        if now - self.spin_window_start >= SPIN_WINDOW {
            self.spin_window_start = now;
            self.spun = Duration::ZERO;
        }
        let may_spin = self.spun.as_secs_f64() < SPIN_SHARE * SPIN_WINDOW.as_secs_f64();
        let early = if may_spin { EARLY } else { EARLY_BUSY };
        self.deliver(early)?;
        let now = self.now();
        let next = self.link.poll_timeout();
        let mut wait = match next {
            Some(t) if t <= now + early => return Ok(()),
            Some(t) if may_spin && t <= now + WAKE_MARGIN => {
                while self.now() < t {
                    std::hint::spin_loop();
                }
                self.spun += self.now() - now;
                return Ok(());
            }
            Some(t) if may_spin => (t - now - WAKE_MARGIN).min(IDLE),
            // Busy: never sleep less than twice the early window, so one
            // wake-up serves a group of frames (each within ±EARLY_BUSY of its
            // time) instead of paying a timer re-arm per frame.
            Some(t) => (t - now - early).clamp(2 * EARLY_BUSY, IDLE),
            None => IDLE,
        };
        // While frames are in flight and delay plus backlog leave room,
        // arrivals need not wake the thread: their kernel timestamps keep
        // their times, so they are read in batches at least every `lazy`.
        // Waking for every arrival costs a timer re-arm (a VM exit) per frame.
        let lazy = self.lazy_rx(now);
        match lazy {
            Some(l) if next.is_some() => {
                wait = wait.min(l);
                self.away.asked(wait);
                std::thread::sleep(wait);
            }
            _ => {
                self.away.asked(wait);
                self.rx
                    .wait_readable(Some(wait))
                    .map_err(|e| format!("waiting on {}: {e}", self.rx.ifname()))?;
            }
        }
        Ok(())
    }

    /// How long arrivals may wait unread, if at all: a frame arriving now
    /// cannot be due before the backlog has drained plus the delay.
    fn lazy_rx(&self, now: Instant) -> Option<Duration> {
        let slack = self.cfg.delay + (self.link.busy_until() - now);
        (slack >= LAZY_RX_MIN_SLACK).then(|| (slack / 4).min(LAZY_RX_MAX))
    }

    fn arrival(&self, now: Instant, real_now: Option<Duration>, ts: Option<Duration>) -> Instant {
        arrival_time(now, real_now, ts, self.model_now)
    }

    fn receive(&mut self) -> Result<(), String> {
        let max_frame = self.cfg.max_frame;
        for _ in 0..RX_ROUNDS {
            let n = self.rx.recv_batch(&mut self.batch).map_err(|e| format!("receiving: {e}"))?;
            if n == 0 {
                break;
            }
            let now = self.now();
            let real_now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok();
            for i in 0..n {
                let Some(f) = self.batch.frame(i) else { continue };
                let at = self.arrival(now, real_now, f.timestamp);
                self.stamped += u64::from(
                    matches!((real_now, f.timestamp), (Some(real), Some(ts)) if stamp_usable(real, ts)),
                );
                self.model_now = at;
                let Worker { batch: _, link, ring, gaps, .. } = self;
                if let Err(reason) = frame::check(f.data, f.len, max_frame) {
                    link.reject(at, f.len, reason);
                    continue;
                }
                gaps.arrival(at, link.wire_bytes(f.len));
                if !ring.fits(f.len) {
                    link.reject(at, f.len, DropReason::Overflow);
                    continue;
                }
                if let Verdict::Queued { id, .. } = link.enqueue(at, f.len) {
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

    fn deliver(&mut self, early: Duration) -> Result<(), String> {
        let mut due =
            [Delivery { id: 0, len: 0, departs_at: Instant::ZERO, delivers_at: Instant::ZERO }; TX_BATCH];
        loop {
            let now = self.now();
            self.model_now = self.model_now.max(now);
            let mut k = 0;
            while k < TX_BATCH {
                match self.link.poll_deliver_early(now, early) {
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
                self.window.delivered(t, wire, u64::from(d.len));
            }
            if k < TX_BATCH {
                return Ok(());
            }
        }
    }

    fn publish(&mut self, now: Instant, slot: &Mutex<DirectionSummary>, last: bool) {
        // Read what arrived first: advancing the model's clock past unread
        // arrivals would push their times later.
        if let Err(e) = self.receive() {
            self.error.get_or_insert(e);
        }
        let now = now.max(self.now());
        if let Ok((_, drops)) = self.rx.take_stats() {
            self.kernel_drops += drops;
        }
        self.model_now = self.model_now.max(now);
        self.link.advance(self.model_now);
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
        let window = self.window.rates();
        let mut s = crate::lock(slot);
        s.arrived_frames = c.arrived_frames;
        s.arrived_bytes = c.arrived_bytes;
        s.delivered_frames = c.delivered_frames;
        s.delivered_bytes = c.delivered_bytes;
        s.drops = Drops::from_counters(&c, self.tx_errors, self.kernel_drops);
        s.in_flight_frames = self.link.in_system();
        s.max_queue_bytes = c.max_queue_bytes;
        s.max_queue_frames = c.max_queue_frames;
        s.window_s = window.seconds;
        s.achieved_wire_bps = window.wire_bps;
        s.window_bps = window.frame_bps;
        s.mean_bps = ((c.delivered_bytes as u128 * 8 * 1_000_000_000) / elapsed as u128) as u64;
        s.lateness = self.lateness.summary();
        s.meter_bins_lost = self.meter_lost + self.link.meter().overflowed();
        s.arrival_gaps = self.gaps.seen();
        s.stamped_arrivals = self.stamped;
        s.away_max_ns = self.away.max.as_nanos() as u64;
        if last {
            // Sorting the sample costs milliseconds: once, at the end.
            s.arrival_gap_deviation = self.cfg.rate.and_then(|r| self.gaps.deviation(r));
        }
        s.error = self.error.clone();
        if let Some(cpu) = thread_cpu_seconds() {
            s.cpu_s = cpu;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn away_is_the_longest_round_beyond_its_asked_sleep() {
        let ms = |m: u64| Instant(m * 1_000_000);
        let mut a = Away::default();
        a.step(ms(0));
        a.asked(Duration::from_millis(5));
        // Woke 0.2 ms late: 0.2 ms away.
        a.step(Instant(5_200_000));
        assert_eq!(a.max, Duration::from_micros(200));
        // A round of 1 ms work with no sleep, then a 60 ms stall in a
        // 1 ms sleep: 60 ms.
        a.step(Instant(6_200_000));
        a.asked(Duration::from_millis(1));
        a.step(Instant(67_200_000));
        assert_eq!(a.max, Duration::from_millis(60));
        // An early return from a long sleep counts nothing.
        a.asked(Duration::from_millis(5));
        a.step(ms(68));
        assert_eq!(a.max, Duration::from_millis(60));
    }

    #[test]
    fn arrival_uses_believable_stamps_within_the_model_clock() {
        let now = Instant::from_millis(100);
        let real = Some(Duration::from_secs(1_700_000_000));
        let ago = |us: u64| Some(Duration::from_secs(1_700_000_000) - Duration::from_micros(us));
        // 300 us ago on the realtime clock: 300 us ago on ours.
        assert_eq!(arrival_time(now, real, ago(300), Instant::ZERO), Instant::from_micros(99_700));
        // Never before the model's clock.
        assert_eq!(
            arrival_time(now, real, ago(300), Instant::from_micros(99_900)),
            Instant::from_micros(99_900)
        );
        // No stamp, a stamp from the future, or a monotonic-looking one: now.
        assert_eq!(arrival_time(now, real, None, Instant::ZERO), now);
        assert_eq!(arrival_time(now, real, Some(Duration::from_secs(1_700_000_001)), Instant::ZERO), now);
        assert_eq!(arrival_time(now, real, Some(Duration::from_secs(5000)), Instant::ZERO), now);
        assert_eq!(arrival_time(now, None, ago(300), Instant::ZERO), now);
    }
}
