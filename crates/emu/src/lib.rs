//! tcpaccel-emu: the userspace link emulator, an L2 wire between two
//! interfaces with a bottleneck rate, propagation delay, a drop-tail buffer and
//! random loss per direction, metered at 500 µs resolution.
//!
//! It plays the role of the GtrcNET-1 hardware testbed of [PSPacer] on a kernel
//! without netem: AF_PACKET sockets on both interfaces, one thread per
//! direction (no async runtime on the hot path), the pure
//! [`tcpaccel_core::link::Link`] model deciding every frame's fate and time.
//!
//! ```no_run
//! use tcpaccel_emu::{EmuConfig, Emulator, LinkConfig};
//! let link = LinkConfig { rate: Some("50mbit".parse()?), delay: std::time::Duration::from_millis(20), ..LinkConfig::default() };
//! let emu = Emulator::start(EmuConfig::symmetric("emu-a", "emu-b", link))?;
//! // ... traffic ...
//! let summary = emu.stop();
//! println!("{}", summary.to_text());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Precision: the model decides every departure exactly, so the mean rate is
//! exact; a frame leaves within some microseconds of its time (frames due
//! within that window go out together), plus the platform's scheduling
//! noise; the worker module explains the mechanics, and BENCHMARKS.md, "The
//! link emulator", has the figures `tcpaccel lab emu-bench` measured.
//! Arrival times are the kernel's receive timestamps. The threads ask for
//! SCHED_FIFO (see [`Scheduling`]).
//!
//! What it does not do: create interfaces or namespaces, switch offloads off
//! (the topology builder does both, with `tcpaccel_sys::ethtool`), or parse
//! anything above the Ethernet header. Offloads must be off on every
//! interface along an emulated path, or the emulator sees 64 KB super-frames
//! and drops them as oversize.
#![forbid(unsafe_code)]

pub mod config;
pub mod frame;
pub mod ring;
pub mod summary;
mod worker;

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use tcpaccel_core::link::Link;
use tcpaccel_core::meter::{Bin, GapRecord, Histogram};
use tcpaccel_core::Instant;
use tcpaccel_sys::packet::{Options, PacketSocket, RecvBatch};

pub use config::{EmuConfig, LinkConfig, MeterFormat, Scheduling};
pub use summary::{DirectionSummary, Drops, Summary};

/// Inter-arrival gaps each direction keeps as a uniform sample (16 bytes
/// each) for [`DirectionSummary::arrival_gap_deviation`].
pub const GAP_SAMPLE: usize = 16_384;

/// Errors starting the emulator, naming the interface or file involved.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    /// The configuration is inconsistent (the message names the field).
    #[error("emulator configuration: {0}")]
    Config(String),
    /// Opening the packet socket failed: missing interface, no privilege, ...
    #[error("emulator: cannot open a packet socket on {iface:?}")]
    Open {
        iface: String,
        #[source]
        source: tcpaccel_sys::Error,
    },
    #[error("emulator: meter output {path}: {source}")]
    MeterFile { path: PathBuf, source: std::io::Error },
    #[error("emulator: cannot start a thread: {0}")]
    Thread(std::io::Error),
}

impl EmuError {
    /// The syscall-layer error inside, if any (to classify privilege and
    /// missing-interface failures).
    pub fn sys(&self) -> Option<&tcpaccel_sys::Error> {
        match self {
            EmuError::Open { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// State shared between the handle and the threads.
pub(crate) struct Shared {
    stop: AtomicBool,
    dirs: [Mutex<DirectionSummary>; 2],
    meter_error: Mutex<Option<String>>,
}

/// The emulator's entry point; see [`Emulator::start`].
pub struct Emulator;

impl Emulator {
    /// Opens packet sockets on `cfg.a` and `cfg.b` in the namespace of the
    /// calling thread and starts one thread per direction (plus a meter
    /// writer if `meter_out` is set). The threads may run anywhere; the
    /// sockets stay in this namespace.
    pub fn start(cfg: EmuConfig) -> Result<EmuHandle, EmuError> {
        cfg.validate().map_err(EmuError::Config)?;
        let meter_format = cfg.resolved_meter_format().map_err(EmuError::Config)?;
        let opts = Options::default();
        let open = |iface: &str| {
            PacketSocket::open(iface, &opts)
                .map(Arc::new)
                .map_err(|source| EmuError::Open { iface: iface.to_string(), source })
        };
        let sock_a = open(&cfg.a)?;
        let sock_b = open(&cfg.b)?;

        let writer_input = match (&cfg.meter_out, meter_format) {
            (Some(path), Some(fmt)) => {
                let file = std::fs::File::create(path)
                    .map_err(|source| EmuError::MeterFile { path: path.clone(), source })?;
                Some((file, fmt))
            }
            _ => None,
        };

        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            dirs: [
                Mutex::new(DirectionSummary::new(&cfg.a, &cfg.b, &cfg.a_to_b)),
                Mutex::new(DirectionSummary::new(&cfg.b, &cfg.a, &cfg.b_to_a)),
            ],
            meter_error: Mutex::new(None),
        });
        let epoch = std::time::Instant::now();

        let (meter_tx, writer) = match writer_input {
            Some((file, fmt)) => {
                // 20 ms of bins per message per direction; 256 messages ≈ 2.5 s of slack.
                let (tx, rx) = std::sync::mpsc::sync_channel::<worker::MeterMsg>(256);
                let sh = shared.clone();
                let h = std::thread::Builder::new()
                    .name("emu-meter".into())
                    .spawn(move || write_meter(file, fmt, rx, &sh))
                    .map_err(EmuError::Thread)?;
                (Some(tx), Some(h))
            }
            None => (None, None),
        };

        let mut workers = Vec::with_capacity(2);
        for (dir, rx, tx, link) in
            [(0usize, &sock_a, &sock_b, &cfg.a_to_b), (1usize, &sock_b, &sock_a, &cfg.b_to_a)]
        {
            let ring_bytes = link.ring_bytes();
            let w = worker::Worker {
                dir,
                rx: rx.clone(),
                tx: tx.clone(),
                cfg: link.clone(),
                link: Link::new(link.params(cfg.meter_bin)),
                ring: FrameRing::new(ring_bytes, 1024),
                batch: RecvBatch::new(cfg.batch, link.max_frame + 1),
                epoch,
                shared: shared.clone(),
                meter_tx: meter_tx.clone(),
                bins: Vec::with_capacity(256),
                lateness: Histogram::new(),
                gaps: GapRecord::new(GAP_SAMPLE, link.seed ^ (0x6761_7073 + dir as u64)),
                stamped: 0,
                tx_errors: 0,
                kernel_drops: 0,
                meter_lost: 0,
                window: summary::TransferWindow::default(),
                error: None,
                scheduling: cfg.scheduling,
                model_now: Instant::ZERO,
                spun: std::time::Duration::ZERO,
                away: worker::Away::default(),
                spin_window_start: Instant::ZERO,
            };
            let sh = shared.clone();
            let name = if dir == 0 { "emu-a>b" } else { "emu-b>a" };
            let spawned = std::thread::Builder::new().name(name.into()).spawn(move || w.run(&sh.dirs[dir]));
            match spawned {
                Ok(h) => workers.push(h),
                Err(e) => {
                    shared.stop.store(true, Ordering::Relaxed);
                    for h in workers {
                        let _ = h.join();
                    }
                    return Err(EmuError::Thread(e));
                }
            }
        }
        drop(meter_tx);
        tracing::info!(a = %cfg.a, b = %cfg.b, "emulator started");
        Ok(EmuHandle { shared, workers, writer, epoch, stopped: false })
    }
}

use ring::FrameRing;

/// A running emulator. Stops (and joins its threads) on [`EmuHandle::stop`]
/// or on drop.
pub struct EmuHandle {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    writer: Option<JoinHandle<()>>,
    epoch: std::time::Instant,
    stopped: bool,
}

impl std::fmt::Debug for EmuHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmuHandle").field("stopped", &self.stopped).finish()
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl EmuHandle {
    /// Counters as of the threads' last publication (at most ~20 ms old).
    pub fn snapshot(&self) -> Summary {
        Summary {
            kind: "emu_summary",
            elapsed_s: self.epoch.elapsed().as_secs_f64(),
            a_to_b: lock(&self.shared.dirs[0]).clone(),
            b_to_a: lock(&self.shared.dirs[1]).clone(),
            meter_error: lock(&self.shared.meter_error).clone(),
        }
    }

    /// True while both direction threads are running (a thread ends early
    /// only on an error, which its summary names).
    pub fn is_running(&self) -> bool {
        !self.stopped && self.workers.iter().all(|h| !h.is_finished())
    }

    /// Stops the threads, flushes the meter output and returns the final summary.
    pub fn stop(mut self) -> Summary {
        self.shutdown();
        self.snapshot()
    }

    fn shutdown(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        self.shared.stop.store(true, Ordering::Relaxed);
        for h in self.workers.drain(..) {
            if h.join().is_err() {
                tracing::error!("an emulator thread panicked");
            }
        }
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

impl Drop for EmuHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

const CSV_HEADER: &str = "dir,start_s,width_s,arrived_frames,arrived_bytes,departed_frames,departed_bytes,\
dropped_frames,dropped_bytes,queue_max_bytes,queue_end_bytes,queue_end_frames,departed_mbps";

const DIR_NAMES: [&str; 2] = ["a_to_b", "b_to_a"];

/// One meter bin as a JSON Lines record.
#[derive(serde::Serialize)]
struct BinRecord<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    dir: &'static str,
    start_s: f64,
    width_s: f64,
    #[serde(flatten)]
    bin: &'a Bin,
    departed_mbps: f64,
}

fn write_bin(out: &mut impl Write, fmt: MeterFormat, dir: usize, b: &Bin) -> std::io::Result<()> {
    let start_s = b.start_ns as f64 / 1e9;
    let width_s = b.width_ns as f64 / 1e9;
    let mbps = b.departed_bps() as f64 / 1e6;
    match fmt {
        MeterFormat::Csv => writeln!(
            out,
            "{},{:.6},{:.6},{},{},{},{},{},{},{},{},{},{:.3}",
            DIR_NAMES[dir],
            start_s,
            width_s,
            b.arrived_frames,
            b.arrived_bytes,
            b.departed_frames,
            b.departed_bytes,
            b.dropped_frames,
            b.dropped_bytes,
            b.queue_max_bytes,
            b.queue_end_bytes,
            b.queue_end_frames,
            mbps
        ),
        MeterFormat::Jsonl => {
            let rec =
                BinRecord { kind: "bin", dir: DIR_NAMES[dir], start_s, width_s, bin: b, departed_mbps: mbps };
            serde_json::to_writer(&mut *out, &rec).map_err(std::io::Error::other)?;
            out.write_all(b"\n")
        }
    }
}

fn write_meter(file: std::fs::File, fmt: MeterFormat, rx: Receiver<worker::MeterMsg>, shared: &Shared) {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, file);
    let mut result = match fmt {
        MeterFormat::Csv => writeln!(out, "{CSV_HEADER}"),
        MeterFormat::Jsonl => Ok(()),
    };
    for msg in rx {
        if result.is_err() {
            continue; // keep draining so the workers never block
        }
        for b in &msg.bins {
            if let Err(e) = write_bin(&mut out, fmt, msg.dir, b) {
                result = Err(e);
                break;
            }
        }
    }
    if let Err(e) = result.and_then(|_| out.flush()) {
        *lock(&shared.meter_error) = Some(e.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_and_jsonl_lines() {
        let b = Bin {
            start_ns: 1_500_000,
            width_ns: 500_000,
            arrived_frames: 2,
            arrived_bytes: 3028,
            departed_frames: 1,
            departed_bytes: 1514,
            queue_max_bytes: 3028,
            queue_end_bytes: 1514,
            queue_end_frames: 1,
            ..Bin::default()
        };
        let mut v = Vec::new();
        write_bin(&mut v, MeterFormat::Csv, 0, &b).unwrap();
        let line = String::from_utf8(v).unwrap();
        assert_eq!(line, "a_to_b,0.001500,0.000500,2,3028,1,1514,0,0,3028,1514,1,24.224\n");
        assert_eq!(CSV_HEADER.split(',').count(), line.trim().split(',').count());
        let mut v = Vec::new();
        write_bin(&mut v, MeterFormat::Jsonl, 1, &b).unwrap();
        let j: serde_json::Value = serde_json::from_slice(&v).unwrap();
        assert_eq!(j["type"], "bin");
        assert_eq!(j["dir"], "b_to_a");
        assert_eq!(j["departed_bytes"], 1514);
        assert_eq!(j["start_ns"], 1_500_000);
    }

    #[test]
    fn start_refuses_bad_config_and_missing_interfaces() {
        let same = EmuConfig::symmetric("x0", "x0", LinkConfig::default());
        assert!(matches!(Emulator::start(same), Err(EmuError::Config(_))));
        let missing = EmuConfig::symmetric("tcpaccel-nx0", "tcpaccel-nx1", LinkConfig::default());
        match Emulator::start(missing) {
            Err(e @ EmuError::Open { .. }) => {
                let sys = e.sys().unwrap();
                assert!(
                    matches!(sys, tcpaccel_sys::Error::NoInterface { name } if name == "tcpaccel-nx0")
                        || sys.is_privilege(),
                    "{sys:?}"
                );
            }
            other => panic!("expected Open error, got {other:?}"),
        }
    }
}
