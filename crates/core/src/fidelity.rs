//! Whether an emulated run was faithful: a host that ran out of CPU while
//! the experiment ran delayed packets the model says nothing about, so the
//! run measured the machine, not the network (the per-run check of
//! Mininet-HiFi; issue 25).
//!
//! What it is: a pure judgement over what a monitor sampled — per-core
//! cumulative CPU times at successive moments (`/proc/stat`), and where a
//! userspace emulator carried links, its lateness. What it is not: it reads
//! nothing and knows no scenario; the thresholds are [`Limits`], recorded
//! with the verdict.
//!
//! A window (two successive samples) is *saturated* when the machine's idle
//! share over all cores is below [`Limits::min_idle`] (every core busy), or
//! one core spent more than [`Limits::max_softirq`] of it in softirq (packet
//! processing queued behind itself: the veth and qdisc work of the
//! namespaces runs there). A run is unfaithful when more than
//! [`Limits::max_saturated_share`] of its windows were saturated, the
//! emulator's p99 lateness exceeds [`Limits::max_emu_lateness`], or its
//! flows started late: p99 of (actual − scheduled start), in experiment
//! units, over [`Limits::max_flow_start_lateness`]. CPU shares sampled every
//! 100 ms miss a host that is busy in short bursts; a flow engine that
//! cannot wake its tasks on time shows it directly.

use std::time::Duration;

/// One core's cumulative times (any unit, e.g. jiffies), as `/proc/stat`
/// gives them: spare time (idle, and whatever the caller counts as
/// yielding to the run), softirq, and the total of all columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CoreTimes {
    pub idle: u64,
    pub softirq: u64,
    pub total: u64,
}

/// The thresholds of a verdict.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// A window whose machine-wide idle share is below this is saturated.
    pub min_idle: f64,
    /// A window in which one core's softirq share exceeds this is saturated.
    pub max_softirq: f64,
    /// The run is unfaithful above this share of saturated windows.
    pub max_saturated_share: f64,
    /// The run is unfaithful when the emulator's p99 lateness exceeds this.
    pub max_emu_lateness: Duration,
    /// The run is unfaithful when its flows' p99 start lateness (experiment
    /// units) exceeds this.
    pub max_flow_start_lateness: Duration,
}

/// Lateness a run measured of itself; `None` where it has no such part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lateness {
    /// The userspace emulator's p99 lateness (wall time).
    pub emulator_p99: Option<Duration>,
    /// p99 of how long after its scheduled start each flow started
    /// (experiment units: wall ÷ D).
    pub flow_start_p99: Option<Duration>,
}

impl Default for Limits {
    /// 5 % idle leaves a 2-core host about 100 ms of spare CPU per second;
    /// below it the forwarding softirqs and the senders queue behind each
    /// other. 10 % of the windows lets a start-up burst pass. A core 90 % in
    /// softirq has no room left for the packets' own processing. 1 ms of p99
    /// lateness is several packet times at the lab's rates. The flow
    /// engine's timers fire on a 1 ms wheel, so a start up to 1 ms late is
    /// its normal; 2 ms means tasks waited for a CPU.
    fn default() -> Self {
        Limits {
            min_idle: 0.05,
            max_softirq: 0.90,
            max_saturated_share: 0.10,
            max_emu_lateness: Duration::from_millis(1),
            max_flow_start_lateness: Duration::from_millis(2),
        }
    }
}

/// What a run's samples say.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub faithful: bool,
    /// Why not (empty when faithful).
    pub reason: String,
    /// Windows judged, and of them saturated.
    pub windows: usize,
    pub saturated: usize,
    /// The lowest machine-wide idle share of any window.
    pub min_idle: f64,
    /// The highest softirq share of any core in any window.
    pub max_softirq: f64,
}

/// Judges a run from `samples` (each: every core's cumulative times, in the
/// same core order) and the lateness it measured of itself. Fewer than two
/// samples give no window (`windows` = 0), which alone is no verdict
/// against the run.
pub fn judge(samples: &[Vec<CoreTimes>], lateness: Lateness, limits: &Limits) -> Verdict {
    let mut windows = 0;
    let mut saturated = 0;
    let mut min_idle = 1.0f64;
    let mut max_softirq = 0.0f64;
    for w in samples.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let mut idle = 0u64;
        let mut total = 0u64;
        let mut worst_softirq = 0.0f64;
        for (x, y) in a.iter().zip(b) {
            // Counters only grow; a core that went offline reads as idle.
            let t = y.total.saturating_sub(x.total);
            let i = y.idle.saturating_sub(x.idle).min(t);
            let s = y.softirq.saturating_sub(x.softirq).min(t);
            idle += i;
            total += t;
            if t > 0 {
                worst_softirq = worst_softirq.max(s as f64 / t as f64);
            }
        }
        if total == 0 {
            continue;
        }
        windows += 1;
        let share = idle as f64 / total as f64;
        min_idle = min_idle.min(share);
        max_softirq = max_softirq.max(worst_softirq);
        if share < limits.min_idle || worst_softirq > limits.max_softirq {
            saturated += 1;
        }
    }
    let mut reasons = Vec::new();
    if windows > 0 && saturated as f64 > limits.max_saturated_share * windows as f64 {
        reasons.push(format!(
            "host saturated in {saturated} of {windows} windows (idle below {:.0} % or a core over {:.0} % \
             softirq; least idle {:.1} %, most softirq {:.1} %)",
            limits.min_idle * 100.0,
            limits.max_softirq * 100.0,
            min_idle * 100.0,
            max_softirq * 100.0
        ));
    }
    if let Some(l) = lateness.emulator_p99 {
        if l > limits.max_emu_lateness {
            reasons.push(format!("emulator p99 lateness {l:?} over {:?}", limits.max_emu_lateness));
        }
    }
    if let Some(l) = lateness.flow_start_p99 {
        if l > limits.max_flow_start_lateness {
            reasons.push(format!(
                "flows started late: p99 {l:?} after their schedule, over {:?}",
                limits.max_flow_start_lateness
            ));
        }
    }
    Verdict {
        faithful: reasons.is_empty(),
        reason: reasons.join("; "),
        windows,
        saturated,
        min_idle: if windows == 0 { f64::NAN } else { min_idle },
        max_softirq: if windows == 0 { f64::NAN } else { max_softirq },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A two-core sample sequence: each window adds `busy` of 100 ticks
    /// per core (the rest idle), `soft` of the busy ones in softirq.
    fn run(windows: &[(u64, u64)]) -> Vec<Vec<CoreTimes>> {
        let mut c = [CoreTimes::default(); 2];
        let mut out = vec![c.to_vec()];
        for &(busy, soft) in windows {
            for core in &mut c {
                core.total += 100;
                core.idle += 100 - busy;
                core.softirq += soft;
            }
            out.push(c.to_vec());
        }
        out
    }

    #[test]
    fn a_light_run_is_faithful() {
        let v = judge(&run(&[(30, 5); 20]), Lateness::default(), &Limits::default());
        assert!(v.faithful, "{v:?}");
        assert_eq!((v.windows, v.saturated), (20, 0));
        assert_eq!(v.min_idle, 0.7);
        assert_eq!(v.max_softirq, 0.05);
        assert_eq!(v.reason, "");
    }

    #[test]
    fn an_overloaded_run_is_unfaithful_with_the_reason() {
        // 17 of 20 windows with both cores at 98 %.
        let mut w = vec![(30, 5); 3];
        w.extend([(98, 40); 17]);
        let v = judge(&run(&w), Lateness::default(), &Limits::default());
        assert!(!v.faithful);
        assert_eq!((v.windows, v.saturated), (20, 17));
        assert!(
            v.reason.contains("17 of 20 windows") && v.reason.contains("least idle 2.0 %"),
            "{}",
            v.reason
        );
    }

    #[test]
    fn a_short_burst_is_tolerated_but_a_softirq_bound_core_is_not() {
        // 2 saturated windows of 20: 10 %, not above the limit.
        let mut w = vec![(30, 5); 18];
        w.extend([(99, 10); 2]);
        assert!(judge(&run(&w), Lateness::default(), &Limits::default()).faithful);
        // One core in softirq 95 % of 5 windows, the machine 50 % idle.
        let mut s = run(&[(0, 0); 20]);
        for (i, sample) in s.iter_mut().enumerate().skip(1) {
            let k = i.min(5) as u64;
            sample[0] = CoreTimes { idle: 100 * i as u64 - 95 * k, softirq: 95 * k, total: 100 * i as u64 };
        }
        let v = judge(&s, Lateness::default(), &Limits::default());
        assert_eq!(v.saturated, 5);
        assert!(!v.faithful && v.reason.contains("most softirq 95.0 %"), "{v:?}");
    }

    #[test]
    fn emulator_lateness_alone_makes_a_run_unfaithful() {
        let light = run(&[(10, 1); 5]);
        let emu = |d| Lateness { emulator_p99: Some(d), ..Lateness::default() };
        let v = judge(&light, emu(Duration::from_millis(3)), &Limits::default());
        assert!(!v.faithful && v.reason.contains("lateness 3ms"), "{}", v.reason);
        assert!(judge(&light, emu(Duration::from_micros(200)), &Limits::default()).faithful);
    }

    #[test]
    fn flows_starting_late_make_a_run_unfaithful_though_the_cores_look_idle() {
        let light = run(&[(10, 1); 5]);
        let late = |d| Lateness { flow_start_p99: Some(d), ..Lateness::default() };
        let v = judge(&light, late(Duration::from_micros(2500)), &Limits::default());
        assert!(!v.faithful, "{v:?}");
        assert_eq!(v.reason, "flows started late: p99 2.5ms after their schedule, over 2ms");
        // The limit itself passes; the timer wheel's millisecond too.
        assert!(judge(&light, late(Duration::from_millis(2)), &Limits::default()).faithful);
        assert!(judge(&light, late(Duration::from_millis(1)), &Limits::default()).faithful);
    }

    #[test]
    fn no_window_no_verdict_against_the_run() {
        let v = judge(&run(&[]), Lateness::default(), &Limits::default());
        assert!(v.faithful && v.windows == 0 && v.min_idle.is_nan());
        // Counters that went backwards (a core unplugged) are ignored, not a panic.
        let back = vec![vec![CoreTimes { idle: 50, softirq: 5, total: 100 }], vec![CoreTimes::default()]];
        assert_eq!(judge(&back, Lateness::default(), &Limits::default()).windows, 0);
    }
}
