//! The workloads of the lanes experiments ([Lanes] ch. 6), built from the
//! core's seeded generator ([`tcpaccel_core::workload`]): the front-end /
//! back-end host split, the queue-buildup scenario and the two realistic
//! mixes. Pure and seeded like the generator: the same seed gives the same
//! flows; the lab's flow engine ([`crate::engines::flows`]) turns them into transfers.

use std::time::Duration;

use serde::Serialize;
use tcpaccel_core::units::Rate;
use tcpaccel_core::workload::{
    load_to_rate, Arrivals, Flow, FlowClass, HostId, SizeDist, Stream, Workload, WorkloadError,
};
use tcpaccel_core::Instant;

/// The thesis' two realistic mixes ([Lanes] Table 6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mix {
    /// Front-end Pareto(a = 1.5, mean 50 KB); back-end Pareto(a = 1.2, mean 10 MB).
    WebSearch,
    /// Front-end Pareto(a = 1.5, mean 10 KB); back-end 800 MB from n senders.
    DataMining,
}

/// The hosts of a lanes experiment ([Lanes]: 25 % back-end, 75 % front-end).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hosts {
    pub front: Vec<HostId>,
    pub back: Vec<HostId>,
}

impl Hosts {
    /// Hosts 0..n, the first quarter back-end (2 of 8, 4 of 16 as in the thesis).
    pub fn quarter_back(n: u32) -> Hosts {
        let b = n / 4;
        Hosts { back: (0..b).collect(), front: (b..n).collect() }
    }
    /// The first host under each leaf of `per_leaf` hosts back-end, the
    /// rest front-end: the author's web-search and data-mining scripts put
    /// one back-end node under each edge router (`l_makelist2`: nodes 0, 8,
    /// 16, 24, 1, 9, 17, 25 of 32, four nodes per edge router).
    pub fn one_per_leaf(n: u32, per_leaf: u32) -> Hosts {
        let per_leaf = per_leaf.max(1);
        let (back, front) = (0..n).partition(|h| h % per_leaf == 0);
        Hosts { back, front }
    }
    pub fn all(&self) -> Vec<HostId> {
        let mut v = self.back.clone();
        v.extend(&self.front);
        v
    }
}

/// Queue-buildup scenario ([Lanes] §6.3): every front-end host receives
/// 64 KB short flows (64 KiB, as the thesis' simulation code counts KB),
/// Poisson with a mean gap of `mean_gap` per host (the thesis: 200 ms; a
/// time, so a scale model stretches it by D), from random other hosts;
/// `long_senders` hosts each run one long transfer of `long_bytes` to a
/// back-end host.
pub fn queue_buildup(
    seed: u64,
    origin: Instant,
    hosts: &Hosts,
    long_senders: u32,
    long_bytes: u64,
    mean_gap: Duration,
) -> Result<Workload, WorkloadError> {
    if mean_gap.is_zero() {
        return Err(WorkloadError::Stream {
            stream: "short".into(),
            reason: "a mean gap of 0 between short flows asks for infinitely many".into(),
        });
    }
    let all = hosts.all();
    let short = Stream {
        name: "short".into(),
        class: FlowClass::Short,
        sizes: SizeDist::fixed(64 * 1024),
        arrivals: Arrivals::Poisson { per_dst: 1.0 / mean_gap.as_secs_f64() },
        dsts: hosts.front.clone(),
        srcs: all.clone(),
        fan_in: 1,
    };
    let mut streams = vec![short];
    if long_senders > 0 {
        // One long flow per sender, spread over the back-end hosts.
        let senders: Vec<HostId> = hosts.front.iter().copied().take(long_senders as usize).collect();
        if senders.len() < long_senders as usize {
            return Err(WorkloadError::Stream {
                stream: "long".into(),
                reason: format!("{long_senders} senders asked, {} front-end hosts exist", senders.len()),
            });
        }
        for (i, &s) in senders.iter().enumerate() {
            let dst = hosts.back[i % hosts.back.len().max(1)];
            streams.push(Stream {
                name: format!("long-{i}"),
                class: FlowClass::Long,
                sizes: SizeDist::fixed(long_bytes),
                arrivals: Arrivals::AtStart,
                dsts: vec![dst],
                srcs: vec![s],
                fan_in: 1,
            });
        }
    }
    Workload::new(seed, origin, streams)
}

/// Realistic scenario ([Lanes] §6.4): front-end and back-end traffic of a
/// [`Mix`] at `load` of each destination's link of rate `link`.
///
/// The thesis defines its "Load" as the fraction of nodes that communicate
/// with each target and gives no arrival rate; here load is the offered load
/// on each destination's access link (λ = ρ·C/mean per destination, the usual
/// definition of the DCTCP and pFabric workloads), which the lab can state
/// and reproduce. Data-mining back-end jobs (800 MB from `fan_in` senders) run
/// from the start, as the thesis' continuous back-end transfers.
pub fn realistic(
    seed: u64,
    origin: Instant,
    hosts: &Hosts,
    mix: Mix,
    load: f64,
    link: Rate,
    fan_in: u32,
) -> Result<Workload, WorkloadError> {
    let all = hosts.all();
    let (fe, be) = match mix {
        Mix::WebSearch => (SizeDist::pareto(1.5, 50e3)?, SizeDist::pareto(1.2, 10e6)?),
        Mix::DataMining => (SizeDist::pareto(1.5, 10e3)?, SizeDist::fixed(800_000_000)),
    };
    let fe_rate = load_to_rate(load, link, fe.mean())?;
    let front = Stream {
        name: "front-end".into(),
        class: FlowClass::Short,
        sizes: fe,
        arrivals: Arrivals::Poisson { per_dst: fe_rate },
        dsts: hosts.front.clone(),
        srcs: all.clone(),
        fan_in: 1,
    };
    let back = match mix {
        Mix::WebSearch => Stream {
            name: "back-end".into(),
            class: FlowClass::Long,
            arrivals: Arrivals::Poisson { per_dst: load_to_rate(load, link, be.mean())? },
            sizes: be,
            dsts: hosts.back.clone(),
            srcs: all,
            fan_in: 1,
        },
        Mix::DataMining => Stream {
            name: "back-end".into(),
            class: FlowClass::Long,
            sizes: be,
            arrivals: Arrivals::AtStart,
            dsts: hosts.back.clone(),
            srcs: all,
            fan_in: fan_in.max(1),
        },
    };
    Workload::new(seed, origin, vec![front, back])
}

/// Holds every short-class flow back by `warmup`; long-class flows keep
/// their start. For data mining, whose back-end jobs start at the origin,
/// the jobs then run `warmup` before the first front-end flow arrives, so a
/// policy that moves them only after a while (the deadline, after
/// `t_deadline`) is measured in the steady state of the thesis's
/// continuous back-end transfers rather than in its first moments. Flows
/// stay in start order (stable: ties keep their order); ids are kept.
pub fn hold_short(mut flows: Vec<Flow>, warmup: Duration) -> Vec<Flow> {
    for f in flows.iter_mut().filter(|f| f.class == FlowClass::Short) {
        f.start += warmup;
    }
    flows.sort_by_key(|f| f.start);
    flows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_flows() {
        let hosts = Hosts::quarter_back(16);
        let mk = |seed| {
            realistic(seed, Instant::ZERO, &hosts, Mix::WebSearch, 0.5, Rate::mbps(100), 1)
                .unwrap()
                .until(Instant::from_millis(5_000))
        };
        let a = mk(7);
        assert_eq!(a, mk(7));
        assert_ne!(a, mk(8));
        assert!(!a.is_empty());
    }

    #[test]
    fn realistic_websearch_rates_classes_and_hosts() {
        let hosts = Hosts::quarter_back(16);
        assert_eq!((hosts.back.len(), hosts.front.len()), (4, 12));
        let secs = 200;
        let flows = realistic(11, Instant::from_millis(10), &hosts, Mix::WebSearch, 0.5, Rate::mbps(100), 1)
            .unwrap()
            .until(Instant::from_millis(10 + secs * 1000));
        let mut last = Instant::ZERO;
        for (i, f) in flows.iter().enumerate() {
            assert_eq!(f.id, i as u64);
            assert!(f.start >= last && f.start >= Instant::from_millis(10));
            last = f.start;
            assert_ne!(f.src, f.dst);
            match f.class {
                FlowClass::Short => assert!(hosts.front.contains(&f.dst)),
                FlowClass::Long => assert!(hosts.back.contains(&f.dst)),
            }
        }
        // Front-end: 125 flows/s per host x 12 hosts; back-end 0.625/s x 4.
        let short = flows.iter().filter(|f| f.class == FlowClass::Short).count() as f64;
        let want = 125.0 * 12.0 * secs as f64;
        assert!((short / want - 1.0).abs() < 0.02, "{short} vs {want}");
        let long = flows.iter().filter(|f| f.class == FlowClass::Long).count() as f64;
        let want = 0.625 * 4.0 * secs as f64;
        assert!((long / want - 1.0).abs() < 0.1, "{long} vs {want}");
    }

    #[test]
    fn datamining_backend_fans_in_from_distinct_senders() {
        let hosts = Hosts::quarter_back(16);
        let flows = realistic(3, Instant::ZERO, &hosts, Mix::DataMining, 0.3, Rate::mbps(100), 5)
            .unwrap()
            .until(Instant::from_millis(1000));
        let back: Vec<&Flow> = flows.iter().filter(|f| f.class == FlowClass::Long).collect();
        assert_eq!(back.len(), 4 * 5);
        for &dst in &hosts.back {
            let parts: Vec<&&Flow> = back.iter().filter(|f| f.dst == dst).collect();
            assert_eq!(parts.len(), 5);
            assert_eq!(parts.iter().map(|f| f.bytes).sum::<u64>(), 800_000_000);
            let mut srcs: Vec<HostId> = parts.iter().map(|f| f.src).collect();
            srcs.sort_unstable();
            srcs.dedup();
            assert_eq!(srcs.len(), 5);
            assert!(parts.iter().all(|f| f.start == Instant::ZERO && f.src != dst));
        }
    }

    #[test]
    fn hold_short_delays_front_end_flows_only() {
        let hosts = Hosts::quarter_back(16);
        let flows = realistic(3, Instant::ZERO, &hosts, Mix::DataMining, 0.3, Rate::mbps(100), 2)
            .unwrap()
            .until(Instant::from_millis(200));
        let warm = Duration::from_millis(350);
        let held = hold_short(flows.clone(), warm);
        assert_eq!(held.len(), flows.len());
        for (a, b) in flows.iter().zip(&held) {
            assert_eq!(a.id, b.id);
            match a.class {
                FlowClass::Long => assert_eq!(b.start, Instant::ZERO),
                FlowClass::Short => {
                    assert_eq!(b.start, a.start + warm);
                    assert!(b.start >= Instant::from_millis(350));
                }
            }
        }
        assert!(held.windows(2).all(|w| w[0].start <= w[1].start));
        assert!(held.iter().any(|f| f.class == FlowClass::Short));
        // A long flow that arrives later stays where it was: order by start.
        let ws = realistic(5, Instant::ZERO, &hosts, Mix::WebSearch, 0.5, Rate::mbps(100), 1)
            .unwrap()
            .until(Instant::from_millis(4000));
        let late_long =
            ws.iter().find(|f| f.class == FlowClass::Long && f.start > Instant::from_millis(10)).unwrap();
        let held = hold_short(ws.clone(), warm);
        assert!(held.windows(2).all(|w| w[0].start <= w[1].start));
        assert_eq!(held.iter().find(|f| f.id == late_long.id).unwrap().start, late_long.start);
    }

    #[test]
    fn queue_buildup_shape() {
        let hosts = Hosts::quarter_back(8);
        let flows = queue_buildup(1, Instant::ZERO, &hosts, 3, 1_000_000_000, Duration::from_millis(200))
            .unwrap()
            .until(Instant::from_millis(100_000));
        let long: Vec<&Flow> = flows.iter().filter(|f| f.class == FlowClass::Long).collect();
        assert_eq!(long.len(), 3);
        assert!(long.iter().all(|f| hosts.back.contains(&f.dst) && f.bytes == 1_000_000_000));
        let short: Vec<&Flow> = flows.iter().filter(|f| f.class == FlowClass::Short).collect();
        assert!(short.iter().all(|f| f.bytes == 65_536 && hosts.front.contains(&f.dst)));
        // 6 front-end hosts, one flow per 200 ms each, over 100 s.
        let want = 6.0 * 5.0 * 100.0;
        assert!((short.len() as f64 / want - 1.0).abs() < 0.05, "{}", short.len());
        assert!(queue_buildup(1, Instant::ZERO, &hosts, 7, 1, Duration::from_millis(200)).is_err());
        assert!(queue_buildup(1, Instant::ZERO, &hosts, 1, 1, Duration::ZERO).is_err());
    }

    /// At D = 16 the gap is 3.2 s of wall time: over 16 × 100 s as many
    /// short flows arrive as over 100 s at D = 1, not 16 times as many.
    #[test]
    fn queue_buildup_gap_stretches_with_the_scale() {
        let hosts = Hosts::quarter_back(8);
        let count = |gap_ms: u64, window_ms: u64| {
            queue_buildup(2, Instant::ZERO, &hosts, 1, 1, Duration::from_millis(gap_ms))
                .unwrap()
                .until(Instant::from_millis(window_ms))
                .iter()
                .filter(|f| f.class == FlowClass::Short)
                .count() as f64
        };
        let (d1, d16) = (count(200, 100_000), count(3_200, 1_600_000));
        assert!((d16 / d1 - 1.0).abs() < 0.1, "{d1} at D=1, {d16} at D=16");
        assert!((d16 / 3000.0 - 1.0).abs() < 0.05, "{d16}");
    }

    #[test]
    fn one_back_end_host_under_each_leaf_as_the_scripts_place_them() {
        let h = Hosts::one_per_leaf(32, 4);
        assert_eq!(h.back, vec![0, 4, 8, 12, 16, 20, 24, 28]);
        assert_eq!(h.front.len(), 24);
        assert!(h.front.iter().all(|f| f % 4 != 0));
        let mut all = h.all();
        all.sort_unstable();
        assert_eq!(all, (0..32).collect::<Vec<_>>());
        assert_eq!(Hosts::one_per_leaf(10, 4).back, vec![0, 4, 8], "a short last leaf has one too");
    }
}
