//! The cgroup pacer (`tcpaccel pace`, a BPF sock_ops program) around one
//! run's sender, for every scenario with a `*-bpf` variant: [`BpfPacing`]
//! moves the lab process into a paced cgroup for the run and back out, and
//! [`HoldTrace`] samples the hold's state from the pinned socket map while
//! the run goes on.

use anyhow::{Context, Result};
use std::time::Duration;

/// The lab process inside a cgroup with the cgroup pacer attached, for one
/// run: the transfer's sender runs on a thread of this process (in h1's
/// namespace), so its socket is created in the cgroup. One rule paces only
/// connections to the data port (`0.0.0.0/0:DATA_PORT`), so the
/// receiver's accepted socket (remote port ephemeral) is left alone. On
/// drop the process moves back to its own cgroup, the pacer detaches and
/// the cgroup is removed.
///
/// The whole process moves (cgroup v2 places processes, not threads), so
/// every connection this process opens to the data port meanwhile is paced
/// too: fine for `lab run`, which runs one transfer at a time, and the reason
/// no unit test runs these variants beside other scenarios' tests in one
/// test process (the pacer's own root tests cover the mechanism).
pub struct BpfPacing {
    home: std::path::PathBuf,
    att: Option<tcpaccel_pacer::Attachment>,
    cg: Option<tcpaccel_pacer::TempCgroup>,
}

impl BpfPacing {
    /// `hold`: the pacer's `--hold` (see `tcpaccel_pacer::PaceConfig::hold`).
    pub fn join(pace: &str, hold: bool) -> Result<BpfPacing> {
        tcpaccel_pacer::probe().context("the cgroup pacer (BPF) is not usable here")?;
        let mount = tcpaccel_pacer::cgroup2_mount()?;
        let own = std::fs::read_to_string("/proc/self/cgroup").context("reading /proc/self/cgroup")?;
        let rel = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .context("this process has no cgroup2 membership in /proc/self/cgroup")?;
        let home = mount.join(rel.trim_start_matches('/'));
        let rule = format!("0.0.0.0/0:{}={pace}", crate::testbeds::dumbbell::DATA_PORT);
        let cfg =
            tcpaccel_pacer::PaceConfig { hold, ..tcpaccel_pacer::PaceConfig::parse("none", &[rule], None)? };
        let cg = tcpaccel_pacer::TempCgroup::create(&format!("lab-{}", std::process::id()))?;
        let att = tcpaccel_pacer::attach(&cg.cgroup, &cfg)?;
        cg.cgroup.add_pid(std::process::id())?;
        Ok(BpfPacing { home, att: Some(att), cg: Some(cg) })
    }

    /// Starts sampling the paced sockets' state (see [`HoldTrace`]).
    pub fn trace(&self) -> Result<HoldTrace> {
        let a = self.att.as_ref().context("the pacer is already detached")?;
        Ok(HoldTrace::start(a.pins().to_path_buf()))
    }

    /// The kernel's run-time statistics of the pacer's program so far.
    pub fn prog_stats(&self) -> Result<tcpaccel_sys::bpf::ProgStats> {
        let a = self.att.as_ref().context("the pacer is already detached")?;
        Ok(a.prog_stats()?)
    }

    /// Moves back home and detaches; what the detach released.
    pub fn leave(mut self) -> Result<tcpaccel_pacer::Released> {
        self.go_home()?;
        let r = self.att.take().map(|a| a.detach()).transpose()?;
        Ok(r.unwrap_or_default())
    }

    fn go_home(&self) -> Result<()> {
        let procs = self.home.join("cgroup.procs");
        std::fs::write(&procs, std::process::id().to_string())
            .with_context(|| format!("moving back into {}", procs.display()))
    }
}

/// What the hold did, seen from outside: a thread reads an attachment's
/// pinned socket map every [`HOLD_TRACE_EVERY`] while a run goes on and
/// keeps every paced socket's state. Sockets are numbered from 1 in the
/// order first seen; time 0 is the first sample that found one (within one
/// sampling interval of its connection). The one sampler of the hold's
/// state: `pacing` (the lab's own sender, one paced socket),
/// `pacing-apps` (programs with a control connection beside the data, or
/// several) and `pacing-web` (a socket per flow) record what it returns.
pub struct HoldTrace {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Result<Vec<HoldSample>>>,
}

/// One sample of [`HoldTrace`]; rates in payload bytes/s (0: not yet).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HoldSample {
    pub t_s: f64,
    /// The socket, numbered from 1 in the order first seen.
    pub sock: usize,
    /// The cap set on the socket (SO_MAX_PACING_RATE); 0 while unpaced.
    pub rate: u64,
    pub cap: u64,
    pub btl_rate: u64,
    /// The bytes of the ACK train that gave `btl_rate`.
    pub btl_bytes: u64,
    pub dlv_rate: u64,
    pub full: bool,
    /// The share of its caps the socket sent in the last window (1/1024ths, 0 until known).
    pub fill: u32,
    /// The kernel's srtt and min_rtt (µs), cwnd and ssthresh (segments)
    /// at the last ACK the rule acted on.
    pub srtt_us: u32,
    pub min_rtt_us: u32,
    pub cwnd: u32,
    pub ssthresh: u32,
}

pub const HOLD_TRACE_EVERY: Duration = Duration::from_millis(100);

impl HoldTrace {
    /// Starts sampling the sockets of the attachment pinned at `pins`.
    pub fn start(pins: std::path::PathBuf) -> HoldTrace {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let start = std::time::Instant::now();
            let mut first: Option<f64> = None;
            let mut seen: Vec<u64> = Vec::new();
            let mut out = Vec::new();
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let states = tcpaccel_pacer::socket_states(&pins).context("reading the paced sockets")?;
                let now = start.elapsed().as_secs_f64();
                for (cookie, st) in states {
                    let t0 = *first.get_or_insert(now);
                    let sock = match seen.iter().position(|c| *c == cookie) {
                        Some(k) => k,
                        None => {
                            seen.push(cookie);
                            seen.len() - 1
                        }
                    } + 1;
                    let rate = u64::from(st.rate);
                    let h = st.hold;
                    out.push(HoldSample {
                        t_s: now - t0,
                        sock,
                        rate: if rate == tcpaccel_core::pacing::BPF_RATE_UNPACED { 0 } else { rate },
                        cap: h.cap,
                        btl_rate: h.btl_rate,
                        btl_bytes: h.btl_bytes,
                        dlv_rate: h.dlv_rate,
                        full: h.full,
                        fill: h.fill,
                        srtt_us: st.seen_srtt_us,
                        min_rtt_us: st.seen_min_rtt_us,
                        cwnd: st.seen_cwnd,
                        ssthresh: st.seen_ssthresh,
                    });
                }
                std::thread::sleep(HOLD_TRACE_EVERY);
            }
            Ok(out)
        });
        HoldTrace { stop, thread }
    }

    /// Stops sampling; the samples taken.
    pub fn finish(self) -> Result<Vec<HoldSample>> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().map_err(|_| anyhow::anyhow!("the hold's sampling thread panicked"))?
    }
}

/// Records a [`HoldTrace`]'s samples as a run's `hold_*` series,
/// one per socket (`hold_cap_mbps/s1`, …): `hold_rate_mbps` (the cap set
/// on the socket), `hold_cap_mbps`, `hold_btl_mbps` (the probe's
/// bottleneck estimate, 0 while none), `hold_btl_kb` (the bytes of the
/// ACK train it came from), `hold_dlv_mbps` (delivery per srtt),
/// `hold_full`, `hold_fill` (the share of its caps the socket sent in the
/// last window, 0 until known), and the kernel's state at the last ACK the rule acted on:
/// `hold_queue_ms` (srtt − min_rtt, what the rule calls a queue),
/// `hold_cwnd` (segments) and `hold_ss` (1 in slow start: cwnd below
/// ssthresh).
pub fn record_hold(ctx: &mut crate::runner::scenario::RunCtx<'_>, samples: &[HoldSample]) -> Result<()> {
    let mbps = |b: u64| b as f64 * 8.0 / 1e6;
    for s in samples {
        for (name, v) in [
            ("hold_rate_mbps", mbps(s.rate)),
            ("hold_cap_mbps", mbps(s.cap)),
            ("hold_btl_mbps", mbps(s.btl_rate)),
            ("hold_btl_kb", s.btl_bytes as f64 / 1e3),
            ("hold_dlv_mbps", mbps(s.dlv_rate)),
            ("hold_full", f64::from(u8::from(s.full))),
            ("hold_fill", f64::from(s.fill) / 1024.0),
            ("hold_queue_ms", f64::from(s.srtt_us.saturating_sub(s.min_rtt_us)) / 1e3),
            ("hold_cwnd", f64::from(s.cwnd)),
            ("hold_ss", f64::from(u8::from(s.cwnd < s.ssthresh))),
        ] {
            ctx.sample(&format!("{name}/s{}", s.sock), s.t_s, v)?;
        }
    }
    Ok(())
}

impl Drop for BpfPacing {
    fn drop(&mut self) {
        if self.att.is_some() {
            let _ = self.go_home();
        }
        drop(self.att.take());
        drop(self.cg.take());
    }
}
