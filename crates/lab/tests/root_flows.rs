//! Root integration tests of the flow engine (`tcpaccel_lab::engines::flows`) in
//! namespaces made here.
//!
//! Topology (per test, names `tcpaccel-flowtest-<random>-{a,b}`, deleted by a
//! Drop guard even when the test panics): host 1 in namespace a and host 2 in
//! namespace b, joined by two veth pairs, SL 10.41.1.0/24 and LL
//! 10.41.2.0/24, every egress shaped by `tbf` at 50 Mbit/s; MPTCP with the
//! in-kernel path manager at its defaults. Sinks listen in both namespaces.
//!
//! Bytes per lane come from a's interface counters; checks are qualitative
//! with wide margins (which lane carried the bytes, complete or not), never
//! timings beyond "the run ended near its time limit".

// The namespace helpers of the lanes crate's tests (heavy, run, unique, tx_bytes).
#[path = "../../lanes/tests/common/mod.rs"]
mod common;
use common::{heavy, run, unique};

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tcpaccel_core::time::Instant as CoreInstant;
use tcpaccel_core::workload::{Flow, FlowClass};
use tcpaccel_lab::engines::flows::{
    run_flows, Close, CutAt, FlowError, FlowFailure, FlowResult, HostAddrs, RunEnd, RunOptions, Sinks,
    Transport, Writes,
};
use tcpaccel_sys::testing::TestNetns;

const PORT: u16 = 5301;

/// Two namespaces, deleted on drop (by `_ns`).
struct Lab {
    a: String,
    b: String,
    _ns: TestNetns,
}

impl Lab {
    fn new() -> Lab {
        tcpaccel_sys::testing::require_root();
        let ns = TestNetns::new("flowtest", &["a", "b"]);
        let (a, b) = (ns.ns("a"), ns.ns("b"));
        for (dev, net) in [("sl0", 1), ("ll0", 2)] {
            ns.veth((a, dev), (b, dev));
            ns.addr(a, dev, &format!("10.41.{net}.1/24"));
            ns.addr(b, dev, &format!("10.41.{net}.2/24"));
        }
        for n in [a, b] {
            for dev in ["sl0", "ll0"] {
                run(
                    "tc",
                    &[
                        "-n", n, "qdisc", "add", "dev", dev, "root", "tbf", "rate", "50mbit", "burst",
                        "32kb", "latency", "100ms",
                    ],
                );
            }
        }
        Lab { a: a.to_string(), b: b.to_string(), _ns: ns }
    }

    fn hosts(&self) -> Vec<HostAddrs> {
        vec![
            HostAddrs {
                id: 1,
                ns: self.a.clone(),
                sl: Ipv4Addr::new(10, 41, 1, 1),
                ll: vec![Ipv4Addr::new(10, 41, 2, 1)],
            },
            HostAddrs {
                id: 2,
                ns: self.b.clone(),
                sl: Ipv4Addr::new(10, 41, 1, 2),
                ll: vec![Ipv4Addr::new(10, 41, 2, 2)],
            },
        ]
    }

    fn tx_bytes(&self, dev: &str) -> u64 {
        common::tx_bytes(&self.a, dev)
    }

    /// (SL, LL) bytes sent by host 1 so far.
    fn lanes(&self) -> (u64, u64) {
        (self.tx_bytes("sl0"), self.tx_bytes("ll0"))
    }

    /// A `nstat`-style counter of namespace b (e.g. "MPTcpExtMPCapableSYNRX").
    fn b_counter(&self, name: &str) -> u64 {
        let text =
            tcpaccel_sys::netns::run_in(&self.b, || std::fs::read_to_string("/proc/thread-self/net/netstat"))
                .expect("enter b")
                .expect("read netstat");
        // Pairs of lines: "Prefix: names..." then "Prefix: values...".
        let lines: Vec<&str> = text.lines().collect();
        for pair in lines.chunks(2) {
            if let [names, values] = pair {
                let (prefix, names) = names.split_once(':').expect("netstat line");
                for (n, v) in names.split_whitespace().zip(values.split_whitespace().skip(1)) {
                    if format!("{prefix}{n}") == name {
                        return v.parse().expect("counter value");
                    }
                }
            }
        }
        panic!("no counter {name} in b's netstat");
    }
}

/// What each test starts with: the heavy-test guard, a lab, its hosts and
/// their sinks (bound in this order, so dropped sinks first, guard last).
fn setup() -> (std::sync::MutexGuard<'static, ()>, Lab, Vec<HostAddrs>, Sinks) {
    let g = heavy();
    let lab = Lab::new();
    let hosts = lab.hosts();
    let sinks = Sinks::start(&hosts, PORT).expect("sinks");
    (g, lab, hosts, sinks)
}

fn flow(id: u64, start_ms: u64, src: u32, dst: u32, bytes: u64) -> Flow {
    let class = if bytes < 100_000 { FlowClass::Short } else { FlowClass::Long };
    Flow { id, start: CoreInstant::from_millis(start_ms), src, dst, bytes, class }
}

fn opts(transport: Transport, limit_s: u64) -> RunOptions {
    RunOptions {
        transport,
        port: PORT,
        cc: "cubic".into(),
        limit: Duration::from_secs(limit_s),
        max_in_flight: 64,
        end: RunEnd::AllFlows,
        close: Close::Reset,
        writes: Writes::Bulk,
    }
}

fn go(flows: &[Flow], hosts: &[HostAddrs], o: &RunOptions) -> Vec<FlowResult> {
    run_flows(flows, CoreInstant::ZERO, hosts, o, &AtomicBool::new(false)).expect("run_flows")
}

#[test]
fn root_single_path_uses_both_lanes_and_completes_everything() {
    let (_g, lab, hosts, sinks) = setup();
    // 40 flows of 1 KB..2 MB, mostly 1 → 2, some 2 → 1, given in reverse id
    // order to check that results come back in id order.
    let sizes = [1_000u64, 8_000, 30_000, 120_000, 500_000, 2_000_000, 3_000, 64_000];
    let mut flows: Vec<Flow> = (0..40u64)
        .map(|i| {
            let (src, dst) = if i % 5 == 4 { (2, 1) } else { (1, 2) };
            flow(100 + i, i * 15, src, dst, sizes[i as usize % sizes.len()])
        })
        .collect();
    flows.reverse();
    let before = lab.lanes();
    let results = go(&flows, &hosts, &opts(Transport::SinglePath { seed: 7 }, 30));
    let after = lab.lanes();
    let received = sinks.stop();

    assert_eq!(results.len(), 40);
    let ids: Vec<u64> = results.iter().map(|r| r.id).collect();
    assert_eq!(ids, (100..140).collect::<Vec<_>>(), "results in id order");
    let mut per_lane: BTreeMap<String, u64> = BTreeMap::new();
    for r in &results {
        assert_eq!(r.error, None, "flow {}: {:?}", r.id, r);
        let fct = r.fct_s.unwrap_or_else(|| panic!("flow {} incomplete: {r:?}", r.id));
        assert!(fct > 0.0, "{r:?}");
        assert!(r.winner.is_none());
        assert!((r.start_s - (r.id - 100) as f64 * 0.015).abs() < 1e-9, "scheduled start {r:?}");
        // Woken on its schedule: the timer wheel's millisecond, with room for
        // a loaded test machine, but a start lateness is always recorded.
        let late = r.start_late_s.unwrap_or_else(|| panic!("flow {} has no start lateness: {r:?}", r.id));
        assert!((0.0..0.5).contains(&late), "{r:?}");
        let got = received.get(&r.id).unwrap_or_else(|| panic!("sink never saw flow {}", r.id));
        assert_eq!((got.bytes, got.connections, got.completed), (r.bytes, 1, 1), "flow {}", r.id);
        if r.src == 1 {
            *per_lane.entry(r.lane.clone()).or_default() += r.bytes;
        }
        // The socket's own count, under the lane it was planned on.
        assert_eq!(r.lane_bytes, [(r.lane.clone(), r.bytes + 16)].into(), "flow {}", r.id);
    }
    let small: Vec<f64> = results.iter().filter(|r| r.bytes <= 8_000).filter_map(|r| r.fct_s).collect();
    eprintln!(
        "FCT of flows <= 8 KB, ms: {:?}",
        small.iter().map(|f| (f * 1e4).round() / 10.0).collect::<Vec<_>>()
    );
    let (sl, ll) = (per_lane.get("sl").copied().unwrap_or(0), per_lane.get("ll0").copied().unwrap_or(0));
    assert!(sl > 0 && ll > 0, "both lanes used: {per_lane:?}");
    assert_eq!(per_lane.len(), 2, "{per_lane:?}");
    // The lane field is where the bytes went: host 1's counters carry the
    // payload of its flows on that lane plus headers (< 10% at 1448-byte
    // segments) and the ACKs of host 2's flows.
    let (dsl, dll) = (after.0 - before.0, after.1 - before.1);
    eprintln!("lanes by result: sl {sl} ll {ll}; counters: sl {dsl} ll {dll}");
    assert!(dsl >= sl && dsl < sl + sl / 5 + 200_000, "SL counter {dsl} vs {sl} payload");
    assert!(dll >= ll && dll < ll + ll / 5 + 200_000, "LL counter {dll} vs {ll} payload");

    // With the sinks gone, a connection is refused: an error result, no panic.
    let refused = go(&[flow(1, 0, 1, 2, 10_000)], &hosts, &opts(Transport::SinglePath { seed: 7 }, 5));
    match &refused[0].error {
        Some(FlowFailure::Io(e)) => {
            assert!(e.contains("connect") && refused[0].fct_s.is_none(), "{:?}", refused[0])
        }
        other => panic!("a refused connection is an I/O failure: {other:?}"),
    }
}

#[test]
fn root_repflow_replicates_short_flows_only() {
    let (_g, lab, hosts, sinks) = setup();
    let o = opts(Transport::RepFlow { threshold: 100_000, seed: 3 }, 10);
    // A 1 KB warm-up resolves both neighbours, so neither copy waits for ARP.
    let warm = go(&[flow(0, 0, 1, 2, 1_000)], &hosts, &o);
    assert!(warm[0].fct_s.is_some(), "{warm:?}");

    // 30 KB passes in one tbf burst in well under a millisecond: the loser
    // may be reset right after its handshake (measured over 11 runs: the
    // whole 30 KB on the losing lane 10 times, SYN + ACK + RST = 248 B once).
    // Both copies start; the winner's lane carries the whole flow.
    let before = lab.lanes();
    let short = go(&[flow(1, 0, 1, 2, 30_000)], &hosts, &o);
    let mid = lab.lanes();
    let long = go(&[flow(2, 0, 1, 2, 1_000_000)], &hosts, &o);
    let after = lab.lanes();

    let s = &short[0];
    assert_eq!((s.lane.as_str(), s.error.as_ref()), ("both", None), "{s:?}");
    assert!(s.fct_s.is_some(), "{s:?}");
    let winner = s.winner.as_deref().expect("a winner");
    assert!(winner == "sl" || winner == "ll0", "{s:?}");
    let (dsl, dll) = (mid.0 - before.0, mid.1 - before.1);
    eprintln!("30 KB RepFlow: winner {winner}, sl +{dsl} B, ll +{dll} B");
    let (won, lost) = if winner == "sl" { (dsl, dll) } else { (dll, dsl) };
    assert!(won >= 30_000, "winner's lane carried the whole flow: {won}");
    assert!(lost >= 60, "the other copy at least opened its connection (a SYN): {lost}");

    let l = &long[0];
    assert_eq!((l.error.as_ref(), l.winner.as_deref()), (None, None), "{l:?}");
    assert!(l.fct_s.is_some() && (l.lane == "sl" || l.lane == "ll0"), "{l:?}");
    let (dsl, dll) = (after.0 - mid.0, after.1 - mid.1);
    eprintln!("1 MB RepFlow: lane {}, sl +{dsl} B, ll +{dll} B", l.lane);
    let (used, other) = if l.lane == "sl" { (dsl, dll) } else { (dll, dsl) };
    assert!(used >= 1_000_000, "{used}");
    assert!(other < 20_000, "a long flow is not replicated: other lane +{other}");

    // Copies that both carry data, and a slower one that is cut: SL at
    // 10 Mbit/s, LL at 50 Mbit/s, a 300 KB flow under a 1 MB threshold. LL
    // needs ~50 ms, SL would need ~240 ms.
    run(
        "tc",
        &[
            "-n", &lab.a, "qdisc", "change", "dev", "sl0", "root", "tbf", "rate", "10mbit", "burst", "32kb",
            "latency", "100ms",
        ],
    );
    let o = opts(Transport::RepFlow { threshold: 1_000_000, seed: 3 }, 10);
    let t0 = lab.lanes();
    let both = go(&[flow(3, 0, 1, 2, 300_000)], &hosts, &o);
    let t1 = lab.lanes();
    std::thread::sleep(Duration::from_millis(200));
    let received = sinks.stop();
    let b = &both[0];
    let (dsl, dll) = (t1.0 - t0.0, t1.1 - t0.1);
    eprintln!("300 KB RepFlow, slow SL: {b:?}, sl +{dsl} B, ll +{dll} B, sink {:?}", received[&3]);
    assert_eq!(
        (b.lane.as_str(), b.winner.as_deref(), b.error.as_ref()),
        ("both", Some("ll0"), None),
        "{b:?}"
    );
    assert!(dll >= 300_000, "LL carried the winning copy: {dll}");
    assert!((20_000..250_000).contains(&dsl), "SL carried part of the losing copy, then it was reset: {dsl}");
    let r = &received[&3];
    assert_eq!((r.connections, r.completed), (2, 1), "{r:?}");
    assert!((320_000..550_000).contains(&r.bytes), "{r:?}");
    assert_eq!((received[&2].connections, received[&2].bytes), (1, 1_000_000));
}

#[test]
fn root_sized_keeps_large_flows_off_sl() {
    let (_g, lab, hosts, sinks) = setup();
    let o = opts(Transport::Sized { threshold: 100_000, replicate: false, seed: 3 }, 20);
    // Warm-up: both neighbours resolved on both lanes.
    let warm = go(&[flow(0, 0, 1, 2, 1_000), flow(1, 0, 1, 2, 200_000)], &hosts, &o);
    assert!(warm.iter().all(|r| r.fct_s.is_some()), "{warm:?}");
    let before = lab.lanes();
    let flows: Vec<Flow> =
        (2..12u64).map(|i| flow(i, i * 20, 1, 2, if i % 2 == 0 { 50_000 } else { 400_000 })).collect();
    let results = go(&flows, &hosts, &o);
    let after = lab.lanes();
    sinks.stop();
    for r in &results {
        assert_eq!(r.error, None, "{r:?}");
        let want = if r.bytes < 100_000 { "sl" } else { "ll0" };
        assert_eq!(r.lane, want, "{r:?}");
        assert_eq!(r.lane_bytes, [(want.to_string(), r.bytes + 16)].into(), "{r:?}");
    }
    // The interfaces agree: 5 × 400 KB on LL, 5 × 50 KB (and no more) on SL.
    let (dsl, dll) = (after.0 - before.0, after.1 - before.1);
    assert!((250_000..320_000).contains(&dsl), "SL carried the short flows only: {dsl}");
    assert!(dll >= 2_000_000, "LL carried the large flows: {dll}");
}

#[test]
fn root_mptcp_transport_completes_flows() {
    let (_g, lab, hosts, sinks) = setup();
    let syn_rx = lab.b_counter("MPTcpExtMPCapableSYNRX");
    // Six flows of 20 KB..520 KB and one of zero bytes (header only).
    let mut flows: Vec<Flow> = (0..6u64).map(|i| flow(i, i * 50, 1, 2, 20_000 + i * 100_000)).collect();
    flows.push(flow(6, 10, 2, 1, 0));
    let results = go(&flows, &hosts, &opts(Transport::Mptcp, 20));
    let received = sinks.stop();
    for r in &results {
        assert_eq!((r.lane.as_str(), r.error.as_ref()), ("mptcp", None), "{r:?}");
        assert!(r.fct_s.is_some_and(|f| f > 0.0), "{r:?}");
        assert_eq!((received[&r.id].bytes, received[&r.id].completed), (r.bytes, 1), "flow {}", r.id);
        // No path-manager endpoints: one subflow, on SL, which carried the
        // 16-byte header and the payload, all acknowledged by the answer.
        let want: BTreeMap<String, u64> = [("sl".to_string(), r.bytes + 16)].into();
        assert_eq!(r.lane_bytes, want, "flow {}", r.id);
    }
    let syn = lab.b_counter("MPTcpExtMPCapableSYNRX") - syn_rx;
    assert!(syn >= 6, "the sink saw MP_CAPABLE SYNs: {syn}");
}

#[test]
fn root_time_limit_cuts_and_stop_interrupts() {
    let (_g, _lab, hosts, sinks) = setup();

    // 50 MB at 50 Mbit/s needs 8 s: the 2 s limit cuts it. A flow scheduled
    // after the limit is never started.
    let t0 = Instant::now();
    let flows = [flow(1, 0, 1, 2, 50_000_000), flow(2, 2_500, 1, 2, 1_000)];
    let results = go(&flows, &hosts, &opts(Transport::SinglePath { seed: 1 }, 2));
    let took = t0.elapsed();
    std::thread::sleep(Duration::from_millis(200));
    let got = sinks.received();
    assert!(took >= Duration::from_millis(1_900) && took < Duration::from_secs(6), "run took {took:?}");
    for r in &results {
        assert!(r.fct_s.is_none(), "{r:?}");
        assert!(r.error.as_ref().is_some_and(FlowFailure::is_time_limit), "{r:?}");
    }
    eprintln!("cut: {:?} / {:?}", results[0].error, results[1].error);
    assert!(
        matches!(results[0].error, Some(FlowFailure::TimeLimit(CutAt::Writing { of: 50_000_000, .. }))),
        "{results:?}"
    );
    assert_eq!(results[1].error, Some(FlowFailure::TimeLimit(CutAt::ScheduledAfterLimit)));
    assert_eq!(results[1].start_late_s, None, "a flow never started has no start lateness");
    // Records keep the text.
    let rec = serde_json::to_value(&results[1]).unwrap();
    assert_eq!(rec["error"], "time limit (scheduled after it)");
    let cut = got.get(&1).expect("sink saw the cut flow");
    eprintln!("cut flow: sink got {} of 50000000 bytes in {took:?}", cut.bytes);
    assert!(cut.bytes > 0 && cut.bytes < 50_000_000 && cut.completed == 0, "{cut:?}");
    assert!(!got.contains_key(&2), "flow 2 never started");

    // `stop` set from another thread ends the run early.
    let stop = AtomicBool::new(false);
    let flows = [flow(3, 0, 1, 2, 50_000_000), flow(4, 5_000, 1, 2, 1_000)];
    let o = opts(Transport::SinglePath { seed: 1 }, 30);
    let t0 = Instant::now();
    let results = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(500));
            stop.store(true, Ordering::Relaxed);
        });
        run_flows(&flows, CoreInstant::ZERO, &hosts, &o, &stop).expect("run_flows")
    });
    assert!(t0.elapsed() < Duration::from_secs(4), "stop honoured: {:?}", t0.elapsed());
    for r in &results {
        assert_eq!((r.fct_s, r.error.as_ref()), (None, Some(&FlowFailure::Interrupted)), "{r:?}");
    }
    drop(sinks);
}

#[test]
fn root_run_ends_when_the_short_flows_have_ended() {
    let (_g, _lab, hosts, sinks) = setup();

    // A 500 MB background flow (80 s at 50 Mbit/s) under three short ones
    // that end within the first second; the limit is 30 s. Ending with the
    // short class cuts the long flow as the limit would, about when the last
    // short flow is answered, and records how far it got.
    let flows = [
        flow(1, 0, 1, 2, 500_000_000),
        flow(2, 100, 2, 1, 20_000),
        flow(3, 300, 2, 1, 50_000),
        flow(4, 600, 2, 1, 1_000),
    ];
    let o = RunOptions {
        end: RunEnd::ClassEnded(FlowClass::Short),
        ..opts(Transport::SinglePath { seed: 1 }, 30)
    };
    let t0 = Instant::now();
    let results = go(&flows, &hosts, &o);
    let took = t0.elapsed();
    std::thread::sleep(Duration::from_millis(200));
    let got = sinks.received();
    eprintln!("ended after {took:?}: {results:?}");
    assert!(took >= Duration::from_millis(600) && took < Duration::from_secs(5), "run took {took:?}");
    for r in &results[1..] {
        assert!(r.error.is_none() && r.fct_s.is_some(), "short flows complete: {r:?}");
    }
    assert!(
        matches!(results[0].error, Some(FlowFailure::TimeLimit(CutAt::Writing { of: 500_000_000, .. }))),
        "the background flow is cut while writing: {:?}",
        results[0]
    );
    let cut = got.get(&1).expect("sink saw the background flow");
    assert!(cut.bytes > 0 && cut.bytes < 500_000_000 && cut.completed == 0, "{cut:?}");

    // The same flows waiting for every flow run into the limit instead (a
    // short one here, so that the test stays short).
    let o = RunOptions { end: RunEnd::AllFlows, ..opts(Transport::SinglePath { seed: 1 }, 3) };
    let t0 = Instant::now();
    let results = go(&flows, &hosts, &o);
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(2_900), "waited for the long flow until the limit: {took:?}");
    assert!(results[0].error.as_ref().is_some_and(FlowFailure::is_time_limit), "{:?}", results[0]);
    drop(sinks);
}

#[test]
fn root_missing_namespace_and_bad_input_are_refused() {
    // No lab needed: the namespace does not exist.
    tcpaccel_sys::testing::require_root();
    let ghost = format!("tcpaccel-flowtest-{}-missing", unique());
    let hosts = vec![
        HostAddrs {
            id: 1,
            ns: ghost.clone(),
            sl: Ipv4Addr::new(10, 9, 1, 1),
            ll: vec![Ipv4Addr::new(10, 9, 2, 1)],
        },
        HostAddrs {
            id: 2,
            ns: ghost.clone(),
            sl: Ipv4Addr::new(10, 9, 1, 2),
            ll: vec![Ipv4Addr::new(10, 9, 2, 2)],
        },
    ];
    match Sinks::start(&hosts, PORT) {
        Err(FlowError::Namespace { ns, .. }) => assert_eq!(ns, ghost),
        Err(e) => panic!("expected a Namespace error, got {e}"),
        Ok(_) => panic!("sinks started in a missing namespace"),
    }
    let o = opts(Transport::SinglePath { seed: 1 }, 1);
    let stop = AtomicBool::new(false);
    match run_flows(&[flow(1, 0, 1, 2, 10)], CoreInstant::ZERO, &hosts, &o, &stop) {
        Err(FlowError::Namespace { ns, .. }) => assert_eq!(ns, ghost),
        other => panic!("expected a Namespace error, got {other:?}"),
    }
    // Input errors come before any namespace is touched.
    let e =
        run_flows(&[flow(1, 0, 1, 3, 10)], CoreInstant::ZERO, &hosts, &o, &stop).expect_err("unknown host");
    assert!(matches!(e, FlowError::UnknownHost { flow: 1, host: 3 }), "{e}");
    assert!(e.to_string().contains("host 3"), "{e}");
}

/// User + system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("read /proc/self/stat");
    // Fields after the ")" that ends the command name; utime and stime are
    // fields 14 and 15 of the whole line, in clock ticks (100 per second).
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime");
    ticks as f64 / 100.0
}

#[test]
fn root_hundreds_of_flows_in_flight() {
    let (_g, _lab, hosts, sinks) = setup();
    // 400 flows of 40 KB (16 MB), all scheduled within 200 ms, both
    // directions: hundreds are in flight at once behind 50 Mbit/s lanes.
    let flows: Vec<Flow> = (0..400u64)
        .map(|i| if i % 2 == 0 { flow(i, i / 2, 1, 2, 40_000) } else { flow(i, i / 2, 2, 1, 40_000) })
        .collect();
    let mut o = opts(Transport::RepFlow { threshold: 20_000, seed: 5 }, 30);
    o.max_in_flight = 1_000;
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let results = go(&flows, &hosts, &o);
    let (cpu, wall) = (cpu_seconds() - cpu0, t0.elapsed());
    let received = sinks.stop();
    let done = results.iter().filter(|r| r.fct_s.is_some()).count();
    let max_fct = results.iter().filter_map(|r| r.fct_s).fold(0.0, f64::max);
    eprintln!("400 flows: {done} complete in {wall:?}, max FCT {max_fct:.3} s, CPU {cpu:.2} s");
    for r in &results {
        assert_eq!(r.error, None, "{r:?}");
        assert_eq!(received[&r.id].bytes, 40_000, "flow {}", r.id);
    }
    assert_eq!(done, 400);
    // Idle waiting, not spinning: well under one core on average (measured
    // about 0.2 s of CPU for 0.75 s of wall time).
    assert!(cpu < wall.as_secs_f64() + 1.0, "CPU {cpu:.2} s over {wall:?}");
}
