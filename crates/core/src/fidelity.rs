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
//!
//! Also here: [`queues`], the sum of the fabric's qdisc counters over a run
//! (sent, drops, overlimits, sampled backlog), recorded beside the verdict
//! but not judged. A tbf's overlimits grow whenever its link is busy — the
//! experiment's normal, not a fault — and Mininet-HiFi's link invariant (a
//! backlogged port departs packets at its rate) needs per-packet dequeue
//! times, which 100 ms counter samples cannot give; no threshold on them is
//! calibrated against FCT error yet. And [`suggest_scale`], the next D to
//! try after an unfaithful run.

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
    /// The run is unfaithful when an emulator thread was away (took from
    /// one round to the next longer than the sleep it asked for) longer
    /// than this, even once.
    pub max_emu_away: Duration,
    /// The run is unfaithful when its flows' p99 start lateness (experiment
    /// units) exceeds this.
    pub max_flow_start_lateness: Duration,
}

/// Lateness a run measured of itself; `None` where it has no such part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lateness {
    /// The userspace emulator's p99 lateness (wall time).
    pub emulator_p99: Option<Duration>,
    /// The longest an emulator thread was away (wall time).
    pub emulator_away: Option<Duration>,
    /// p99 of how long after its scheduled start each flow started
    /// (experiment units: wall ÷ D).
    pub flow_start_p99: Option<Duration>,
}

/// [`Limits::max_emu_away`], ms: one p99 wake-up of a VM is about 0.15 ms;
/// in 10 ms a sender at 500 Mbit/s (the lab's fastest emulated path) puts
/// 625 KB on the wire, which arrive at the emulator together once it runs
/// again, as no sender would send them: in a pacing-apps run a 60 ms stall
/// of both directions burst 2 MB into seed 000's 1 MB buffer and dropped
/// 1373 packets of a paced sender (issue 47).
pub const EMU_AWAY_MS: u64 = 10;

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
            max_emu_away: Duration::from_millis(EMU_AWAY_MS),
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
    /// The machine-wide busy share (1 − idle) and the busiest core's
    /// softirq share of the window the verdict hinges on: with `n` windows
    /// the judge lets `k = ⌊max_saturated_share × n⌋` be saturated, so the
    /// run passes the CPU rule only if its (n − k)-th least loaded window
    /// does not; these are that window's figures (each ranked on its own).
    /// NaN without a window. [`suggest_scale`] works from them.
    pub deciding_busy: f64,
    pub deciding_softirq: f64,
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
    let mut busy_of = Vec::new();
    let mut softirq_of = Vec::new();
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
        busy_of.push(1.0 - share);
        softirq_of.push(worst_softirq);
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
    if let Some(a) = lateness.emulator_away {
        if a > limits.max_emu_away {
            reasons.push(format!(
                "emulator thread away {a:?} at once, over {:?} (the frames sent meanwhile came in as one burst)",
                limits.max_emu_away
            ));
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
    // The (n − k)-th smallest of each, k the saturated windows allowed.
    let deciding = |mut v: Vec<f64>| -> f64 {
        if v.is_empty() {
            return f64::NAN;
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let allowed = (limits.max_saturated_share * v.len() as f64).floor() as usize;
        v[v.len().saturating_sub(allowed + 1)]
    };
    Verdict {
        faithful: reasons.is_empty(),
        reason: reasons.join("; "),
        windows,
        saturated,
        min_idle: if windows == 0 { f64::NAN } else { min_idle },
        max_softirq: if windows == 0 { f64::NAN } else { max_softirq },
        deciding_busy: deciding(busy_of),
        deciding_softirq: deciding(softirq_of),
    }
}

/// The share of the machine (busy) and of one core (softirq) that
/// [`suggest_scale`] aims the deciding window at.
pub const SUGGEST_TARGET: f64 = 0.5;

/// The smallest time dilation D' worth trying after a run at `d` was judged
/// unfaithful (`None` for a faithful run, or one without CPU windows: the
/// monitor saw nothing to scale from).
///
/// The rule: in a scale model every rate is divided by D and bytes stay,
/// so the packets, timer events and softirq work per wall second — the CPU
/// the experiment needs — go as 1/D (DieCast's premise; issue 25). The
/// deciding window's busy share `b` and softirq share `s` (see
/// [`Verdict::deciding_busy`]) would be `b·D/D'` and `s·D/D'` at D'. A
/// reading is capped at the machine: a window at 100 % says the demand was
/// at least the machine, not how much more. So the suggestion aims the
/// deciding window at half ([`SUGGEST_TARGET`]) the machine and half a
/// core of softirq, which fits a demand up to twice what was seen, and
/// takes at least one doubling (the run at D failed, whatever the cause):
///
/// `D' = next power of two ≥ D × max(2, b / ½, s / ½)`.
///
/// Powers of two keep the ladder short (1, 2, 4, 8, …) and every rung's
/// times exact multiples of the one below. Start lateness does not enter
/// the number: it grows with CPU queueing far faster than linearly, so no
/// factor follows from it; a run late but not saturated gets the one
/// doubling. If D' is still unfaithful, its own verdict suggests the next.
pub fn suggest_scale(d: u32, v: &Verdict) -> Option<u32> {
    if v.faithful || v.windows == 0 || !v.deciding_busy.is_finite() || !v.deciding_softirq.is_finite() {
        return None;
    }
    let f = 2f64.max(v.deciding_busy / SUGGEST_TARGET).max(v.deciding_softirq / SUGGEST_TARGET);
    // The float product of exact ratios may land a hair above a whole number.
    let want = (f64::from(d.max(1)) * f - 1e-9).ceil();
    if want >= f64::from(1u32 << 31) {
        return None;
    }
    Some((want as u32).next_power_of_two())
}

/// One fabric port's queue counters at one moment (a root qdisc's: sent
/// bytes and packets, drops and overlimits since it was made, and the bytes
/// it holds now).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortCounters {
    pub bytes: u64,
    pub packets: u64,
    pub drops: u64,
    pub overlimits: u64,
    pub backlog: u64,
}

/// What a run's queue samples add up to. Counts are over the run (last
/// sample − first, per port); backlogs are what the samples saw, so a
/// queue that filled and drained between two samples is missed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Queues {
    /// Ports seen, and of them those that sent a packet during the run.
    pub ports: usize,
    pub active_ports: usize,
    pub bytes: u64,
    pub packets: u64,
    pub drops: u64,
    pub overlimits: u64,
    pub samples: usize,
    /// The most bytes one port held in any sample, and all ports together.
    pub peak_port_backlog: u64,
    pub peak_total_backlog: u64,
    /// All ports' backlog together, averaged over the samples.
    pub mean_total_backlog: f64,
    /// The port (index) that dropped most, and how many; `None` without drops.
    pub most_drops: Option<(usize, u64)>,
}

/// Sums a run's queue samples: `samples[t][i]` is port `i` at sample `t`,
/// `None` where the port was not seen (it appears or vanishes mid-run; its
/// counts run from its first to its last sample). Counters that went
/// backwards (a qdisc replaced) count as zero, not as a wrap.
pub fn queues(samples: &[Vec<Option<PortCounters>>]) -> Queues {
    let ports = samples.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut q = Queues { ports, samples: samples.len(), ..Queues::default() };
    let mut backlog_sum = 0u128;
    for s in samples {
        let mut total = 0u64;
        for p in s.iter().flatten() {
            total = total.saturating_add(p.backlog);
            q.peak_port_backlog = q.peak_port_backlog.max(p.backlog);
        }
        q.peak_total_backlog = q.peak_total_backlog.max(total);
        backlog_sum += u128::from(total);
    }
    if !samples.is_empty() {
        q.mean_total_backlog = backlog_sum as f64 / samples.len() as f64;
    }
    for i in 0..ports {
        let mut seen = samples.iter().filter_map(|s| s.get(i).copied().flatten());
        let Some(first) = seen.next() else { continue };
        let last = seen.next_back().unwrap_or(first);
        let packets = last.packets.saturating_sub(first.packets);
        let drops = last.drops.saturating_sub(first.drops);
        q.bytes += last.bytes.saturating_sub(first.bytes);
        q.packets += packets;
        q.drops += drops;
        q.overlimits += last.overlimits.saturating_sub(first.overlimits);
        if packets > 0 {
            q.active_ports += 1;
        }
        if drops > 0 && q.most_drops.is_none_or(|(_, d)| drops > d) {
            q.most_drops = Some((i, drops));
        }
    }
    q
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
    fn one_long_emulator_stall_makes_a_run_unfaithful() {
        let light = run(&[(10, 1); 5]);
        let away = |d| Lateness {
            emulator_p99: Some(Duration::from_micros(120)),
            emulator_away: Some(d),
            ..Lateness::default()
        };
        let v = judge(&light, away(Duration::from_millis(60)), &Limits::default());
        assert!(!v.faithful && v.reason.contains("away 60ms at once, over 10ms"), "{}", v.reason);
        assert!(judge(&light, away(Duration::from_millis(10)), &Limits::default()).faithful);
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

    #[test]
    fn the_deciding_window_is_the_one_the_tolerance_cannot_absorb() {
        // 20 windows, 2 may be saturated: the 18th least busy decides.
        let mut w: Vec<(u64, u64)> = (0..20).map(|i| (10 + 4 * i, 1)).collect();
        w.reverse(); // order does not matter
        let v = judge(&run(&w), Lateness::default(), &Limits::default());
        // busy 10, 14, ..., 86: the 18th is 10 + 4 × 17 = 78 %.
        assert_eq!(v.deciding_busy, 0.78);
        assert_eq!(v.deciding_softirq, 0.01);
        // 5 windows: none may be saturated, the busiest decides.
        let v = judge(
            &run(&[(10, 0), (50, 0), (30, 0), (20, 0), (40, 0)]),
            Lateness::default(),
            &Limits::default(),
        );
        assert_eq!(v.deciding_busy, 0.5);
        assert!(judge(&run(&[]), Lateness::default(), &Limits::default()).deciding_busy.is_nan());
    }

    fn verdict(faithful: bool, busy: f64, softirq: f64) -> Verdict {
        Verdict {
            faithful,
            reason: String::new(),
            windows: 10,
            saturated: 0,
            min_idle: 1.0 - busy,
            max_softirq: softirq,
            deciding_busy: busy,
            deciding_softirq: softirq,
        }
    }

    #[test]
    fn the_suggested_scale_doubles_at_least_and_fits_half_the_machine() {
        // Saturated at D = 1: demand at least the machine, aim at half: 2.
        assert_eq!(suggest_scale(1, &verdict(false, 1.0, 0.3)), Some(2));
        // Late but not saturated: one doubling.
        assert_eq!(suggest_scale(4, &verdict(false, 0.6, 0.2)), Some(8));
        // A core 95 % in softirq at D = 2: 2 × 1.9 = 3.8 → 4.
        assert_eq!(suggest_scale(2, &verdict(false, 0.7, 0.95)), Some(4));
        // D not a power of two: 3 × 2 = 6 → 8.
        assert_eq!(suggest_scale(3, &verdict(false, 1.0, 0.1)), Some(8));
        // Nothing to suggest for a faithful run or one without windows.
        assert_eq!(suggest_scale(1, &verdict(true, 1.0, 1.0)), None);
        let none = judge(&run(&[]), Lateness::default(), &Limits::default());
        assert_eq!(suggest_scale(1, &Verdict { faithful: false, ..none }), None);
        // A judged overloaded run: both cores at 98 % → 2 × 0.98 / 0.5 = 3.92 → 4.
        let v = judge(&run(&[(98, 10); 10]), Lateness::default(), &Limits::default());
        assert!(!v.faithful);
        assert_eq!(suggest_scale(2, &v), Some(4));
    }

    fn port(bytes: u64, packets: u64, drops: u64, overlimits: u64, backlog: u64) -> Option<PortCounters> {
        Some(PortCounters { bytes, packets, drops, overlimits, backlog })
    }

    #[test]
    fn queues_count_over_the_run_and_see_the_backlog_sampled() {
        let samples = vec![
            vec![port(1000, 10, 5, 100, 0), port(0, 0, 0, 0, 0), None],
            vec![port(9000, 90, 7, 180, 4000), port(0, 0, 0, 0, 0), port(500, 5, 0, 1, 1500)],
            vec![port(20000, 200, 9, 300, 1000), port(0, 0, 0, 0, 0), port(800, 8, 3, 2, 0)],
        ];
        let q = queues(&samples);
        assert_eq!(
            q,
            Queues {
                ports: 3,
                active_ports: 2,
                bytes: 19000 + 300,
                packets: 190 + 3,
                drops: 4 + 3,
                overlimits: 200 + 1,
                samples: 3,
                peak_port_backlog: 4000,
                peak_total_backlog: 5500,
                mean_total_backlog: (0.0 + 5500.0 + 1000.0) / 3.0,
                most_drops: Some((0, 4)),
            }
        );
        // A qdisc replaced mid-run (counters restart): no wrap-around.
        let q = queues(&[vec![port(5000, 50, 9, 9, 0)], vec![port(100, 1, 0, 0, 0)]]);
        assert_eq!((q.bytes, q.packets, q.drops, q.active_ports, q.most_drops), (0, 0, 0, 0, None));
        assert_eq!(queues(&[]), Queues::default());
    }
}
