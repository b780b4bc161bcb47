//! Small fixed record sets for the report's tests (the golden fixture, a pacing run).

use crate::runner::records::*;
use std::collections::BTreeMap;

/// A time dilation D set by the lanes scenarios' `scale` parameter.
pub(crate) fn scaled(d: u32) -> crate::runner::records::Scaled {
    crate::runner::records::Scaled {
        param: "scale".into(),
        d: tcpaccel_core::scale::Dilation::new(d).unwrap(),
    }
}

pub(crate) fn header() -> RunHeader {
    RunHeader {
        version: RECORDS_VERSION,
        scenario: "fixture".into(),
        title: "Fixture run".into(),
        description: "A fixed record set.".into(),
        params: BTreeMap::from([("rate".into(), "500mbit".into()), ("rtt".into(), "100ms".into())]),
        variants: vec!["none".into(), "static".into()],
        repeats: 3,
        quick: false,
        seed: 42,
        kernel: "6.18.0".into(),
        cpus: 2,
        tool_version: "0.1.0".into(),
        started: 1_700_000_000.0,
        shard: None,
        metrics: vec![
            MetricSpec {
                name: "goodput".into(),
                unit: "Mbit/s".into(),
                higher_is_better: true,
                description: "receiver goodput".into(),
            },
            MetricSpec {
                name: "drops".into(),
                unit: "pkts".into(),
                higher_is_better: false,
                description: String::new(),
            },
        ],
        published: vec![
            Published {
                variant: "none".into(),
                metric: "goodput".into(),
                value: 200.0,
                source: "[PSPacer], table 1".into(),
            },
            Published {
                variant: "static".into(),
                metric: "goodput".into(),
                value: 433.0,
                source: "[PSPacer], table 1".into(),
            },
        ],
        notes: vec!["Scaled nothing.".into()],
        scaled: None,
    }
}

pub(crate) fn run() -> RunData {
    let mut d = RunData::default();
    d.push(Record::Run(header()));
    // Named as the dumbbell names its keys (the fixture is a dumbbell run).
    d.names = crate::testbeds::dumbbell::metric::NAMES.to_vec();
    let vals = [
        ("none", [230.0, 190.0, 200.0], [1400.0, 1500.0, 1455.0]),
        ("static", [455.0, 450.0, 460.0], [0.0, 0.0, 2.0]),
    ];
    for r in 0..3u32 {
        for (v, g, dr) in &vals {
            d.push(Record::Summary(Summary {
                variant: v.to_string(),
                repeat: r,
                metrics: BTreeMap::from([
                    ("goodput".into(), g[r as usize]),
                    ("drops".into(), dr[r as usize]),
                ]),
                started: 0.0,
                ended: 1.0,
            }));
        }
    }
    for i in 0..10 {
        for (v, _, _) in &vals {
            d.push(Record::Sample(Sample {
                variant: v.to_string(),
                repeat: 0,
                series: "goodput_mbps".into(),
                t: i as f64 * 0.1,
                value: i as f64 * 40.0,
            }));
        }
    }
    for i in 0..5u64 {
        d.push(Record::Flow(FlowRecord {
            variant: "none".into(),
            repeat: 0,
            id: i,
            class: "short".into(),
            bytes: 65536,
            start: i as f64,
            fct_ms: 1.0 + i as f64,
            completed: true,
            exp_start: None,
            exp_fct_ms: None,
            lane_bytes: Default::default(),
            retrans_bytes: None,
            capture: None,
        }));
    }
    d.push(Record::Note { variant: Some("none".into()), text: "first loss at 1.2 s".into() });
    d.push(Record::End(End { complete: true, ended: 1_700_000_100.0, reason: "all repeats done".into() }));
    d
}

/// A pacing run shaped like BENCHMARKS.md's full-scale table.
pub(crate) fn pacing_run() -> RunData {
    use crate::runner::records::{Published, Record, Sample, Summary};
    let mut h = header();
    h.scenario = "pacing".into();
    h.params = BTreeMap::from([("rate".into(), "500mbit".into()), ("buffer".into(), "1MB".into())]);
    h.variants = vec!["none".into(), "dynamic".into(), "static".into()];
    h.metrics = crate::scenarios::find("pacing").unwrap().metrics();
    h.published = vec![Published {
        variant: "static".into(),
        metric: "goodput_mbps".into(),
        value: 433.0,
        source: "[PSPacer]".into(),
    }];
    let mut d = RunData::default();
    d.push(Record::Run(h));
    for (v, g, dr) in [("none", 222.0, 2222.0), ("dynamic", 437.0, 883.0), ("static", 464.0, 0.0)] {
        d.push(Record::Summary(Summary {
            variant: v.into(),
            repeat: 0,
            metrics: BTreeMap::from([("goodput_mbps".into(), g), ("drops".into(), dr)]),
            started: 0.0,
            ended: 1.0,
        }));
        for i in 0..5 {
            d.push(Record::Sample(Sample {
                variant: v.into(),
                repeat: 0,
                series: "goodput_mbps".into(),
                t: f64::from(i),
                value: g,
            }));
        }
    }
    crate::scenarios::with_claims(d)
}

/// A fidelity verdict for `variant`'s `repeat`, with "host saturated" as
/// the reason when not faithful and no measurements.
pub(crate) fn fidelity(variant: &str, repeat: u32, faithful: bool) -> FidelityRecord {
    FidelityRecord {
        variant: variant.into(),
        repeat,
        faithful,
        reason: if faithful { String::new() } else { "host saturated".into() },
        windows: 10,
        saturated_windows: 0,
        min_idle_pct: None,
        max_softirq_pct: None,
        cpu_stall_pct: None,
        limit_idle_pct: 5.0,
        limit_softirq_pct: 90.0,
        limit_saturated_pct: 10.0,
        flow_start_late_p99_ms: None,
        limit_flow_start_late_ms: 2.0,
        emu_late_p99_ms: None,
        limit_emu_late_ms: 1.0,
        emu_away_ms: None,
        limit_emu_away_ms: 10.0,
        deciding_busy_pct: None,
        suggested_scale: None,
        queues: None,
    }
}

/// Claims on [`run`]'s figures: one met, one missed, one the run cannot judge.
const FIXTURE_CLAIMS: &[crate::runner::claims::Claim] = {
    use crate::runner::claims::{Claim, Figure, Goal, Measure};
    &[
        Claim {
            text: "Static leaves at most one drop",
            measure: Measure::Median { variant: "static", metric: "drops" },
            goal: Goal::AtMost(1.0),
            goal_source: "the fixture's goal",
            published: Some(Figure { value: 0.0, source: "[PSPacer]" }),
            when: &[],
        },
        Claim {
            text: "Static more than doubles goodput",
            measure: Measure::Ratio { num: ("static", "goodput"), den: ("none", "goodput") },
            goal: Goal::AtLeast(2.5),
            goal_source: "the fixture's goal",
            published: Some(Figure { value: 433.0 / 200.0, source: "[PSPacer] 433 / 200" }),
            when: &[],
        },
        Claim {
            text: "BBR has goodput",
            measure: Measure::Median { variant: "bbr", metric: "goodput" },
            goal: Goal::Above(0.0),
            goal_source: "the fixture's goal",
            published: None,
            when: &[],
        },
    ]
};

/// [`run`] with its first repeat of `none` unfaithful, judged against
/// three claims, as `lab results --summarize` makes it.
pub(crate) fn results_summary() -> crate::report::results::ResultSummary {
    let mut d = run();
    d.fidelity = vec![fidelity("none", 0, false), fidelity("none", 1, true), fidelity("none", 2, true)];
    d.claims = FIXTURE_CLAIMS.to_vec();
    crate::report::results::summarize(&d, "lab run fixture --repeat 3 --seed 42".into()).unwrap()
}
