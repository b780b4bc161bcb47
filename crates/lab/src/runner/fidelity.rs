//! The per-run fidelity monitor: a thread that samples every core's CPU
//! times (`/proc/stat`, the whole host's) while one variant × repeat runs,
//! and the verdict of `tcpaccel_core::fidelity` on them, written as a
//! `fidelity` record beside the run's summary.
//!
//! Besides the CPU times it judges the lateness the run measured of itself
//! (the flow engine's start lateness, which the runner collects through
//! `RunCtx::flow_started_late`). What it does not do: it does not read the
//! emulator's lateness (the lanes fabrics carry no emulator; a testbed with
//! one can pass its p99 to [`Monitor::stop`]) nor the qdiscs' counters.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tcpaccel_core::fidelity::{judge, CoreTimes, Lateness, Limits, Verdict};
use tcpaccel_sys::procstat::{self, CpuStat};

use crate::runner::records::FidelityRecord;

/// How often the cores are sampled: ten windows a second.
pub const INTERVAL: Duration = Duration::from_millis(100);

/// What counts as CPU the run could have had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spare {
    /// Idle, iowait and niced user time: lab runs are not niced (the house
    /// rule for timing runs), so niced work — other builds on a shared
    /// machine — yields to them; counting it as busy would mark every run
    /// unfaithful while anyone compiles. Softirq time still counts as busy:
    /// anyone's packet processing does not yield.
    IdleAndNiced,
    /// Idle and iowait only (for a run that is itself niced).
    Idle,
}

fn core_times(v: &[CpuStat], spare: Spare) -> Vec<CoreTimes> {
    let niced = |c: &CpuStat| if spare == Spare::IdleAndNiced { c.nice } else { 0 };
    v.iter()
        .map(|c| CoreTimes { idle: c.idle + c.iowait + niced(c), softirq: c.softirq, total: c.total() })
        .collect()
}

/// What the sampling thread collected: per-core times per sample, and the
/// CPU pressure (PSI `some` total, µs) at the first and last sample with the
/// wall time between them.
struct Collected {
    cores: Vec<Vec<CoreTimes>>,
    stall: Option<(u64, u64, Duration)>,
}

/// A running monitor; [`Monitor::stop`] ends it and judges.
pub struct Monitor {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Result<Collected, String>>>,
}

impl Monitor {
    pub fn start(interval: Duration, spare: Spare) -> Monitor {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::Builder::new()
            .name("fidelity".into())
            .spawn(move || {
                let mut out = Vec::new();
                let t0 = std::time::Instant::now();
                let stall0 = procstat::cpu_stall_us().map_err(|e| e.to_string())?;
                loop {
                    let v = procstat::read().map_err(|e| e.to_string())?;
                    out.push(core_times(&v, spare));
                    if s.load(Ordering::Relaxed) {
                        let stall1 = procstat::cpu_stall_us().map_err(|e| e.to_string())?;
                        let stall = stall0.zip(stall1).map(|(a, b)| (a, b, t0.elapsed()));
                        return Ok(Collected { cores: out, stall });
                    }
                    // Sleep in slices so that stop answers within 10 ms.
                    let mut slept = Duration::ZERO;
                    while slept < interval && !s.load(Ordering::Relaxed) {
                        let step = (interval - slept).min(Duration::from_millis(10));
                        std::thread::sleep(step);
                        slept += step;
                    }
                }
            })
            .ok();
        Monitor { stop, handle }
    }

    /// Stops sampling and judges the run with the lateness it measured of
    /// itself. The verdict comes with the share of the run's wall time in
    /// which some task waited for a CPU (PSI), where the kernel reports it.
    pub fn stop(mut self, lateness: Lateness) -> Observed {
        let limits = Limits::default();
        self.stop.store(true, Ordering::Relaxed);
        let c = match self.handle.take().map(|h| h.join()) {
            Some(Ok(Ok(c))) => c,
            Some(Ok(Err(e))) => {
                return Observed::unjudged(
                    format!("the monitor could not read the CPU times: {e}"),
                    limits,
                    lateness,
                )
            }
            Some(Err(_)) => {
                return Observed::unjudged("the monitor thread panicked".into(), limits, lateness)
            }
            None => return Observed::unjudged("the monitor thread could not start".into(), limits, lateness),
        };
        let stall_share = c.stall.and_then(|(a, b, wall)| {
            let us = wall.as_micros() as f64;
            (us > 0.0).then(|| b.saturating_sub(a) as f64 / us)
        });
        Observed { verdict: judge(&c.cores, lateness, &limits), limits, stall_share, lateness }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What a monitor saw and concluded.
#[derive(Debug, Clone)]
pub struct Observed {
    pub verdict: Verdict,
    pub limits: Limits,
    /// Share of wall time in which some task on the host waited for a CPU
    /// (PSI `some`). Recorded, not judged: on a shared machine it counts the
    /// niced builds waiting behind the run as well, and no threshold is
    /// calibrated against FCT noise yet.
    pub stall_share: Option<f64>,
    /// What the run measured of itself and the verdict weighed.
    pub lateness: Lateness,
}

impl Observed {
    /// A run the monitor could not watch is not claimed faithful.
    fn unjudged(reason: String, limits: Limits, lateness: Lateness) -> Observed {
        let verdict = Verdict {
            faithful: false,
            reason,
            windows: 0,
            saturated: 0,
            min_idle: f64::NAN,
            max_softirq: f64::NAN,
        };
        Observed { verdict, limits, stall_share: None, lateness }
    }
}

/// The record of one variant × repeat.
pub fn record(variant: &str, repeat: u32, o: &Observed) -> FidelityRecord {
    let (v, limits) = (&o.verdict, &o.limits);
    let pct = |x: f64| if x.is_finite() { Some(x * 100.0) } else { None };
    FidelityRecord {
        cpu_stall_pct: o.stall_share.and_then(pct),
        variant: variant.into(),
        repeat,
        faithful: v.faithful,
        reason: v.reason.clone(),
        windows: v.windows,
        saturated_windows: v.saturated,
        min_idle_pct: pct(v.min_idle),
        max_softirq_pct: pct(v.max_softirq),
        limit_idle_pct: limits.min_idle * 100.0,
        limit_softirq_pct: limits.max_softirq * 100.0,
        limit_saturated_pct: limits.max_saturated_share * 100.0,
        flow_start_late_p99_ms: o.lateness.flow_start_p99.map(|d| d.as_secs_f64() * 1e3),
        limit_flow_start_late_ms: limits.max_flow_start_lateness.as_secs_f64() * 1e3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_busy_threads_per_core_make_the_run_unfaithful() {
        // Light: the monitor alone for 0.5 s. Other helpers' builds share
        // this machine, so only the overloaded case is asserted strictly.
        // Tests run niced (house rule): their spinners are niced work too.
        let m = Monitor::start(Duration::from_millis(50), Spare::Idle);
        std::thread::sleep(Duration::from_millis(500));
        let light = m.stop(Lateness::default()).verdict;
        assert!(light.windows >= 5, "{light:?}");

        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
        let stop = Arc::new(AtomicBool::new(false));
        let spinners: Vec<_> = (0..2 * cores)
            .map(|_| {
                let s = stop.clone();
                std::thread::spawn(move || {
                    while !s.load(Ordering::Relaxed) {
                        std::hint::black_box(0u64);
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        let m = Monitor::start(Duration::from_millis(50), Spare::Idle);
        std::thread::sleep(Duration::from_millis(700));
        let observed = m.stop(Lateness::default());
        let heavy = observed.verdict.clone();
        stop.store(true, Ordering::Relaxed);
        for s in spinners {
            s.join().unwrap();
        }
        assert!(!heavy.faithful, "{heavy:?}");
        assert!(heavy.reason.contains("saturated"), "{}", heavy.reason);
        let r = record("v", 1, &observed);
        assert!(!r.faithful && r.min_idle_pct.is_some_and(|p| p < 5.0), "{r:?}");
        if std::path::Path::new("/proc/pressure/cpu").exists() {
            // Two spinners per core: some task always waits.
            assert!(r.cpu_stall_pct.is_some_and(|p| p > 50.0), "{r:?}");
        }
    }
}
