//! The pure part of the flow engine: the per-connection header, the
//! seeded lane pick, and [`plan`], which checks a run's input and turns
//! each flow into its schedule and path(s) before any socket is opened.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::Duration;

use tcpaccel_core::rng::Rng;
use tcpaccel_core::time::Instant as CoreInstant;
use tcpaccel_core::workload::{Flow, HostId};

use super::{FlowError, FlowResult, HostAddrs, RunOptions, Transport, HEADER_LEN};

/// Encodes the per-connection header.
pub fn encode_header(id: u64, len: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&id.to_be_bytes());
    h[8..].copy_from_slice(&len.to_be_bytes());
    h
}

/// Decodes the per-connection header: (flow id, length).
pub fn decode_header(h: &[u8; HEADER_LEN]) -> (u64, u64) {
    let mut id = [0u8; 8];
    let mut len = [0u8; 8];
    id.copy_from_slice(&h[..8]);
    len.copy_from_slice(&h[8..]);
    (u64::from_be_bytes(id), u64::from_be_bytes(len))
}

/// The lane index (0 = SL, k = LL k−1) of a single-path flow among `lanes`
/// lanes: a function of the seed and the flow id only, so a replay picks the
/// same lanes whatever the order or subset of flows run.
pub fn pick_lane(seed: u64, flow_id: u64, lanes: usize) -> usize {
    if lanes <= 1 {
        return 0;
    }
    Rng::fork(seed, flow_id).below(lanes as u64) as usize
}

/// The name of lane index `k` (0 = "sl", k = "ll{k-1}").
pub fn lane_name(k: usize) -> String {
    match k {
        0 => "sl".to_string(),
        k => format!("ll{}", k - 1),
    }
}

/// One connection to make: the local and remote addresses and the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Path {
    pub lane: String,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub dst_ns: String,
    pub src_ns: String,
    pub mptcp: bool,
    /// The source host's lane addresses and names, to say which lane a
    /// subflow's bytes went on.
    pub src_lanes: Vec<(Ipv4Addr, String)>,
}

/// The lanes of a host by address: SL, then LL 0, 1, ...
fn lanes_of(h: &HostAddrs) -> Vec<(Ipv4Addr, String)> {
    std::iter::once(h.sl).chain(h.ll.iter().copied()).enumerate().map(|(k, a)| (a, lane_name(k))).collect()
}

/// Sums bytes per lane name. A local address that is none of
/// the host's lanes is kept under its own text, not dropped.
pub(super) fn bytes_per_lane(
    sent: &[(std::net::IpAddr, u64)],
    lanes: &[(Ipv4Addr, String)],
) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (ip, n) in sent {
        let name = lanes.iter().find(|(a, _)| std::net::IpAddr::V4(*a) == *ip).map(|(_, l)| l.clone());
        *out.entry(name.unwrap_or_else(|| ip.to_string())).or_insert(0) += n;
    }
    out
}

/// A validated flow with its schedule and its path(s).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Planned {
    pub flow: Flow,
    /// Offset of the scheduled start from the origin.
    pub at: Duration,
    /// "mptcp", "sl", "llN" or "both".
    pub lane: String,
    /// One path, or two for a replicated flow (SL first).
    pub paths: Vec<Path>,
}

/// Checks the input and turns each flow into its schedule and path(s), in
/// start order (ties by id). Pure: every refusal names the flow or host.
pub(crate) fn plan(
    flows: &[Flow],
    workload_origin: CoreInstant,
    hosts: &[HostAddrs],
    opts: &RunOptions,
) -> Result<Vec<Planned>, FlowError> {
    if opts.max_in_flight == 0 {
        return Err(FlowError::Option("max_in_flight must be at least 1".into()));
    }
    if opts.port == 0 {
        return Err(FlowError::Option("port must not be 0 (the sinks listen on a fixed port)".into()));
    }
    if opts.cc.is_empty() {
        return Err(FlowError::Option("cc (congestion control name) is empty".into()));
    }
    if opts.limit.is_zero() {
        return Err(FlowError::Option("limit must be above zero".into()));
    }
    let mut by_id: BTreeMap<HostId, &HostAddrs> = BTreeMap::new();
    for h in hosts {
        if h.ns.is_empty() {
            return Err(FlowError::EmptyNamespace { host: h.id });
        }
        if by_id.insert(h.id, h).is_some() {
            return Err(FlowError::DuplicateHost(h.id));
        }
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(flows.len());
    for f in flows {
        if !seen.insert(f.id) {
            return Err(FlowError::DuplicateFlow(f.id));
        }
        let src = *by_id.get(&f.src).ok_or(FlowError::UnknownHost { flow: f.id, host: f.src })?;
        let dst = *by_id.get(&f.dst).ok_or(FlowError::UnknownHost { flow: f.id, host: f.dst })?;
        if f.src == f.dst {
            return Err(FlowError::SelfFlow { flow: f.id, host: f.src });
        }
        if f.start < workload_origin {
            return Err(FlowError::BeforeOrigin { flow: f.id });
        }
        let at = f.start.saturating_since(workload_origin);
        let path = |k: usize, mptcp: bool| {
            let pick = |h: &HostAddrs| if k == 0 { h.sl } else { h.ll[k - 1] };
            Path {
                lane: if mptcp { "mptcp".to_string() } else { lane_name(k) },
                src: pick(src),
                dst: pick(dst),
                src_ns: src.ns.clone(),
                dst_ns: dst.ns.clone(),
                mptcp,
                src_lanes: lanes_of(src),
            }
        };
        let need_ll = |transport: &'static str| -> Result<(), FlowError> {
            for h in [src, dst] {
                if h.ll.is_empty() {
                    return Err(FlowError::NoLongLane { host: h.id, flow: f.id, transport });
                }
            }
            Ok(())
        };
        let single = |seed: u64| {
            let lanes = 1 + src.ll.len().min(dst.ll.len());
            path(pick_lane(seed, f.id, lanes), false)
        };
        let (lane, paths) = match opts.transport {
            Transport::Mptcp => ("mptcp".to_string(), vec![path(0, true)]),
            Transport::SinglePath { seed } => {
                need_ll("SinglePath")?;
                let p = single(seed);
                (p.lane.clone(), vec![p])
            }
            Transport::RepFlow { threshold, seed } => {
                need_ll("RepFlow")?;
                if f.bytes < threshold {
                    ("both".to_string(), vec![path(0, false), path(1, false)])
                } else {
                    let p = single(seed);
                    (p.lane.clone(), vec![p])
                }
            }
            Transport::Sized { threshold, replicate, seed } => {
                need_ll("Sized")?;
                if f.bytes >= threshold {
                    let lls = src.ll.len().min(dst.ll.len());
                    let p = path(1 + pick_lane(seed, f.id, lls), false);
                    (p.lane.clone(), vec![p])
                } else if replicate {
                    ("both".to_string(), vec![path(0, false), path(1, false)])
                } else {
                    ("sl".to_string(), vec![path(0, false)])
                }
            }
        };
        out.push(Planned { flow: *f, at, lane, paths });
    }
    out.sort_by_key(|p| (p.at, p.flow.id));
    Ok(out)
}

impl Planned {
    /// The result of this flow before anything happened.
    pub(super) fn result(&self) -> FlowResult {
        let f = &self.flow;
        FlowResult {
            id: f.id,
            class: f.class,
            src: f.src,
            dst: f.dst,
            bytes: f.bytes,
            start_s: self.at.as_secs_f64(),
            start_late_s: None,
            fct_s: None,
            lane: self.lane.clone(),
            winner: None,
            lane_bytes: BTreeMap::new(),
            retrans_bytes: None,
            conns: Vec::new(),
            error: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{flow, host, opts};
    use super::*;

    #[test]
    fn lane_bytes_are_summed_by_the_hosts_lane_names_and_strangers_kept() {
        let h = HostAddrs {
            id: 1,
            ns: "h1".into(),
            sl: Ipv4Addr::new(10, 0, 0, 1),
            ll: vec![Ipv4Addr::new(10, 1, 0, 1), Ipv4Addr::new(10, 2, 0, 1)],
        };
        let lanes = lanes_of(&h);
        assert_eq!(lanes.iter().map(|(_, l)| l.as_str()).collect::<Vec<_>>(), ["sl", "ll0", "ll1"]);
        let ip = |a: [u8; 4]| std::net::IpAddr::V4(Ipv4Addr::from(a));
        let acked = [
            (ip([10, 0, 0, 1]), 1_000),
            (ip([10, 2, 0, 1]), 70_000),
            (ip([10, 0, 0, 1]), 500),
            (ip([10, 9, 9, 9]), 3),
        ];
        let m = bytes_per_lane(&acked, &lanes);
        let want: BTreeMap<String, u64> = [("sl", 1_500), ("ll1", 70_000), ("10.9.9.9", 3)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(m, want);
    }

    #[test]
    fn header_round_trips_big_endian() {
        for (id, len) in [(0, 0), (1, 2), (u64::MAX, 7), (0x0102_0304_0506_0708, u64::MAX)] {
            assert_eq!(decode_header(&encode_header(id, len)), (id, len));
        }
        let h = encode_header(1, 0x0203);
        assert_eq!(h, [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 2, 3]);
    }

    #[test]
    fn lane_pick_depends_on_seed_and_id_only() {
        let a: Vec<usize> = (0..200).map(|id| pick_lane(9, id, 3)).collect();
        let b: Vec<usize> = (0..200).rev().map(|id| pick_lane(9, id, 3)).rev().collect();
        assert_eq!(a, b, "order does not matter");
        let c: Vec<usize> = (0..200).map(|id| pick_lane(10, id, 3)).collect();
        assert_ne!(a, c, "another seed, another pick");
        for k in 0..3 {
            let n = a.iter().filter(|&&x| x == k).count();
            assert!((30..110).contains(&n), "lane {k} picked {n} times of 200");
        }
        assert!(a.iter().all(|&k| k < 3));
        assert_eq!(pick_lane(9, 5, 1), 0);
        assert_eq!(pick_lane(9, 5, 0), 0);
        assert_eq!((lane_name(0), lane_name(1), lane_name(2)), ("sl".into(), "ll0".into(), "ll1".into()));
    }

    #[test]
    fn plan_orders_by_start_then_id_and_offsets_from_the_workload_origin() {
        let hosts = [host(1, 1), host(2, 1)];
        let flows =
            [flow(5, 300, 1, 2, 10), flow(3, 200, 2, 1, 10), flow(4, 200, 1, 2, 10), flow(1, 100, 1, 2, 10)];
        let p = plan(&flows, CoreInstant::from_millis(100), &hosts, &opts(Transport::Mptcp)).unwrap();
        let order: Vec<(u64, u64)> = p.iter().map(|x| (x.flow.id, x.at.as_millis() as u64)).collect();
        assert_eq!(order, [(1, 0), (3, 100), (4, 100), (5, 200)]);
        let three = &p[1].paths[0];
        assert_eq!((three.src, three.dst, three.mptcp), (hosts[1].sl, hosts[0].sl, true));
        assert_eq!(
            (three.src_ns.as_str(), three.dst_ns.as_str(), p[1].lane.as_str()),
            ("ns2", "ns1", "mptcp")
        );
    }

    #[test]
    fn single_path_uses_the_same_lane_index_at_both_ends() {
        // Host 1 has two LL lanes, host 2 one: only SL and LL0 are common.
        let hosts = [host(1, 2), host(2, 1)];
        let flows: Vec<Flow> = (0..60).map(|i| flow(i, 0, 1, 2, 10)).collect();
        let p = plan(&flows, CoreInstant::ZERO, &hosts, &opts(Transport::SinglePath { seed: 4 })).unwrap();
        let mut seen = BTreeSet::new();
        for x in &p {
            let path = &x.paths[0];
            assert!(!path.mptcp);
            assert_eq!(x.lane, path.lane);
            let k = match path.lane.as_str() {
                "sl" => 0,
                "ll0" => 1,
                other => panic!("lane {other} is not common to both hosts"),
            };
            assert_eq!(k, pick_lane(4, x.flow.id, 2));
            let at = |h: &HostAddrs| if k == 0 { h.sl } else { h.ll[0] };
            assert_eq!((path.src, path.dst), (at(&hosts[0]), at(&hosts[1])));
            seen.insert(k);
        }
        assert_eq!(seen.len(), 2, "both lanes picked over 60 flows");
    }

    #[test]
    fn repflow_replicates_below_the_threshold_only() {
        let hosts = [host(1, 1), host(2, 1)];
        let flows = [flow(1, 0, 1, 2, 99_999), flow(2, 0, 1, 2, 100_000)];
        let p = plan(
            &flows,
            CoreInstant::ZERO,
            &hosts,
            &opts(Transport::RepFlow { threshold: 100_000, seed: 1 }),
        )
        .unwrap();
        assert_eq!(p[0].lane, "both");
        let lanes: Vec<&str> = p[0].paths.iter().map(|x| x.lane.as_str()).collect();
        assert_eq!(lanes, ["sl", "ll0"]);
        assert_eq!(p[1].paths.len(), 1);
        assert_eq!(p[1].lane, lane_name(pick_lane(1, 2, 2)));
    }

    #[test]
    fn sized_keeps_large_flows_off_sl_and_short_ones_on_it() {
        let hosts = [host(1, 3), host(2, 3)];
        let flows: Vec<Flow> =
            (0..60).map(|i| flow(i, 0, 1, 2, if i % 2 == 0 { 99_999 } else { 100_000 })).collect();
        for replicate in [false, true] {
            let t = Transport::Sized { threshold: 100_000, replicate, seed: 3 };
            let p = plan(&flows, CoreInstant::ZERO, &hosts, &opts(t)).unwrap();
            let mut lls = BTreeSet::new();
            for x in &p {
                let lanes: Vec<&str> = x.paths.iter().map(|y| y.lane.as_str()).collect();
                if x.flow.bytes < 100_000 {
                    let want: &[&str] = if replicate { &["sl", "ll0"] } else { &["sl"] };
                    assert_eq!(lanes, want, "{x:?}");
                    assert_eq!(x.lane, if replicate { "both" } else { "sl" });
                } else {
                    assert_eq!(lanes.len(), 1, "{x:?}");
                    assert_ne!(lanes[0], "sl", "a large flow on SL: {x:?}");
                    assert_eq!(x.lane, lane_name(1 + pick_lane(3, x.flow.id, 3)));
                    assert!(x.paths.iter().all(|y| !y.mptcp));
                    lls.insert(lanes[0].to_string());
                }
            }
            assert_eq!(lls.len(), 3, "30 large flows spread over the 3 LL lanes: {lls:?}");
        }
        let no_ll = [host(1, 0), host(2, 0)];
        let t = Transport::Sized { threshold: 10, replicate: false, seed: 1 };
        assert!(matches!(
            plan(&flows[..1], CoreInstant::ZERO, &no_ll, &opts(t)),
            Err(FlowError::NoLongLane { .. })
        ));
    }

    #[test]
    fn bad_input_is_refused_with_the_culprit_named() {
        let hosts = [host(1, 1), host(2, 1)];
        let sp = opts(Transport::SinglePath { seed: 1 });
        let z = CoreInstant::ZERO;
        let err = |flows: &[Flow], hosts: &[HostAddrs], o: &RunOptions| plan(flows, z, hosts, o).unwrap_err();

        let e = err(&[flow(1, 0, 1, 2, 1), flow(1, 5, 2, 1, 1)], &hosts, &sp);
        assert!(matches!(e, FlowError::DuplicateFlow(1)), "{e}");
        let e = err(&[flow(7, 0, 1, 9, 1)], &hosts, &sp);
        assert!(matches!(e, FlowError::UnknownHost { flow: 7, host: 9 }), "{e}");
        let e = err(&[flow(7, 0, 2, 2, 1)], &hosts, &sp);
        assert!(matches!(e, FlowError::SelfFlow { flow: 7, host: 2 }), "{e}");
        let e = err(&[flow(1, 0, 1, 2, 1)], &[host(1, 1), host(1, 1)], &sp);
        assert!(matches!(e, FlowError::DuplicateHost(1)), "{e}");
        let mut nameless = host(2, 1);
        nameless.ns.clear();
        let e = err(&[flow(1, 0, 1, 2, 1)], &[host(1, 1), nameless], &sp);
        assert!(matches!(e, FlowError::EmptyNamespace { host: 2 }), "{e}");
        let e = plan(&[flow(3, 5, 1, 2, 1)], CoreInstant::from_millis(6), &hosts, &sp).unwrap_err();
        assert!(matches!(e, FlowError::BeforeOrigin { flow: 3 }), "{e}");

        // No LL lane: refused for single-path and RepFlow, fine for MPTCP.
        let no_ll = [host(1, 0), host(2, 1)];
        let e = err(&[flow(4, 0, 2, 1, 1)], &no_ll, &sp);
        assert!(matches!(e, FlowError::NoLongLane { host: 1, flow: 4, .. }), "{e}");
        assert!(e.to_string().contains("SinglePath"), "{e}");
        let rep = opts(Transport::RepFlow { threshold: 10, seed: 1 });
        assert!(matches!(err(&[flow(4, 0, 2, 1, 1)], &no_ll, &rep), FlowError::NoLongLane { .. }));
        assert!(plan(&[flow(4, 0, 2, 1, 1)], z, &no_ll, &opts(Transport::Mptcp)).is_ok());

        for bad in [
            RunOptions { max_in_flight: 0, ..sp.clone() },
            RunOptions { port: 0, ..sp.clone() },
            RunOptions { cc: String::new(), ..sp.clone() },
            RunOptions { limit: Duration::ZERO, ..sp.clone() },
        ] {
            assert!(matches!(err(&[flow(1, 0, 1, 2, 1)], &hosts, &bad), FlowError::Option(_)), "{bad:?}");
        }
    }
}
