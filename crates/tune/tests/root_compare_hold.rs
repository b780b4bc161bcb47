//! The `dynamic-hold` variant end to end on loopback (root: BPF, cgroups):
//! its transfer runs with this process in the cgroup pacer's cgroup, the
//! program paces the transfer's connection, and afterwards the process is
//! back in its own cgroup, the program detached and the cgroup gone.
//!
//! The target is 127.0.0.52, an address of its own, so that the rule
//! (`127.0.0.52/32=dynamic`) paces nothing of other tests on this host.

use std::time::Duration;

use tcpaccel_core::compare::Variant;
use tcpaccel_traffic::{spawn_recv, RecvConfig};
use tcpaccel_tune::compare::{run, Event, Plan};

#[test]
fn root_dynamic_hold_runs_under_the_pacer_and_is_detached_after() {
    tcpaccel_sys::testing::require_root();
    let home = tcpaccel_pacer::join::own_cgroup().expect("this process's cgroup");
    let r = spawn_recv(RecvConfig::new("127.0.0.52:0".parse().unwrap())).unwrap();
    let plan = Plan {
        variants: vec![Variant::Unpaced, Variant::DynamicHold],
        repeats: 1,
        probe: Duration::from_millis(500),
        trial: Some(Duration::from_secs(1)),
        max_time: Duration::from_secs(20),
        max_bytes: 200_000_000_000,
        handshakes: 3,
        ..Plan::new(r.local_addr())
    };
    let ours = format!("compare-{}", std::process::id());
    let mut seen_inside = None;
    let out = run(&plan, |e| match e {
        Event::Trial(t) => {
            if t.trial.variant == Variant::DynamicHold {
                // Reported after the guard has gone: the process is home.
                seen_inside = Some(tcpaccel_pacer::join::own_cgroup().unwrap());
            }
        }
        Event::Skipped(s) => panic!("{} left out: {}", s.variant.name(), s.why),
        Event::Path(_) => {}
    })
    .expect("a comparison on loopback");
    let held: Vec<_> = out.trials.iter().filter(|t| t.trial.variant == Variant::DynamicHold).collect();
    assert_eq!(held.len(), 1, "{:?}", out.trials.iter().map(|t| t.trial.variant).collect::<Vec<_>>());
    assert!(held[0].paced_connections.unwrap() >= 1, "{:?}", held[0].paced_connections);
    assert!(held[0].bytes > 0);
    let unpaced = out.trials.iter().find(|t| t.trial.variant == Variant::Unpaced).unwrap();
    assert_eq!(unpaced.paced_connections, None);
    // Detached after: home again, no attachment or cgroup of ours left.
    assert_eq!(seen_inside.as_ref(), Some(&home));
    assert_eq!(tcpaccel_pacer::join::own_cgroup().unwrap(), home);
    let st = tcpaccel_pacer::status().expect("pacer status");
    assert!(
        !st.iter().any(|a| {
            let d = format!("{a:?}");
            d.contains(&ours) || d.contains("127.0.0.52")
        }),
        "an attachment of {ours} is left: {st:?}"
    );
    let dir = tcpaccel_pacer::cgroup2_mount().unwrap().join("tcpaccel").join(&ours);
    assert!(!dir.exists(), "{} is left", dir.display());
    assert!(out.recommendation.is_some());
}
