//! Root test: `apply` then `revert` inside a throwaway namespace restores
//! every value exactly and never touches the host's settings.
//!
//! Needs root (CI runs as root); fails loudly if the namespace cannot be
//! set up. The namespace is deleted by a Drop guard, also on panic.

use std::process::Command;
use std::time::Duration;

use tcpaccel_core::units::Rate;
use tcpaccel_sys::testing::TestNetns;
use tcpaccel_tune::apply::{apply, plan, revert};
use tcpaccel_tune::collect::{collect, read_sysctl, Probe};
use tcpaccel_tune::facts::{Fact, PathSpec, SYSCTLS};
use tcpaccel_tune::judge::{judge, Severity};

/// The test's namespace (deleted on drop, also on panic).
fn make_ns() -> TestNetns {
    let t = TestNetns::one("doctortest");
    let ns = t.name();
    // A veth pair with a real qdisc, so txqueuelen matters and gets fixed.
    t.veth((ns, "tqa"), (ns, "tqb"));
    run(&["tc", "-n", ns, "qdisc", "add", "dev", "tqa", "root", "pfifo"]);
    // A second queued interface the path does not use: never changed.
    t.veth((ns, "tqc"), (ns, "tqd"));
    run(&["tc", "-n", ns, "qdisc", "add", "dev", "tqc", "root", "pfifo"]);
    t
}

fn run(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().expect("spawn");
    assert!(out.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
}

fn in_ns(ns: &str, f: impl FnOnce() -> Vec<Fact<String>> + Send + 'static) -> Vec<Fact<String>> {
    tcpaccel_sys::netns::run_in(ns, f).expect("enter test namespace")
}

fn snapshot() -> Vec<Fact<String>> {
    let mut v: Vec<_> = SYSCTLS.iter().map(|k| read_sysctl(k)).collect();
    for dev in ["tqa", "tqc"] {
        let out = Command::new("ip").args(["-j", "link", "show", "dev", dev]).output().expect("ip");
        v.push(Fact::Known(String::from_utf8_lossy(&out.stdout).into_owned()));
    }
    v
}

#[test]
fn root_apply_then_revert_restores_every_value_in_a_namespace() {
    tcpaccel_sys::testing::require_root();
    let ns = make_ns();
    let host_before: Vec<_> = SYSCTLS.iter().map(|k| read_sysctl(k)).collect();
    // Make the namespace clearly untuned.
    let name = ns.name().to_string();
    in_ns(&name, || {
        tcpaccel_tune::apply::write_sysctl("net.ipv4.tcp_rmem", "4096 131072 1000000").unwrap();
        tcpaccel_tune::apply::write_sysctl("net.ipv4.tcp_slow_start_after_idle", "1").unwrap();
        tcpaccel_tune::apply::write_sysctl("net.ipv4.tcp_no_metrics_save", "0").unwrap();
        Vec::new()
    });
    let before = in_ns(&name, snapshot);

    let path = PathSpec {
        rate: Some(Rate::gbps(1)),
        rtt: Some(Duration::from_millis(100)),
        rtt_source: Some("given".into()),
        egress_dev: Some("tqa".into()),
    };
    let facts = collect(Some(&name), path.clone(), &Probe::default()).expect("collect in namespace");
    assert!(facts.readonly.iter().any(|k| k == "net.core.rmem_max"), "rmem_max is read-only in a namespace");
    let findings = judge(&facts);
    let p = plan(&findings);
    let keys: Vec<&str> = p.sysctls.iter().map(|(k, _)| k.as_str()).collect();
    for k in [
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
        "net.ipv4.tcp_slow_start_after_idle",
        "net.ipv4.tcp_no_metrics_save",
    ] {
        assert!(keys.contains(&k), "plan lacks {k}: {p:?}");
    }
    assert!(!keys.contains(&"net.core.rmem_max"), "read-only sysctls are not planned");
    // Host-global sysctls absent from a namespace are read from the host
    // and advised there, not left unknown.
    assert!(matches!(facts.sysctl("net.core.netdev_max_backlog"), Fact::Known(_)));
    assert!(facts.readonly.iter().any(|k| k == "net.ipv4.tcp_mem"), "{:?}", facts.readonly);
    // The link speed is read from the namespace's own sysfs: veth says 10 Gbit/s.
    let ifs = facts.interfaces.as_ref().and_then(|i| i.known()).expect("interfaces");
    let tqa = ifs.iter().find(|i| i.name == "tqa").expect("tqa");
    assert_eq!(tqa.speed_mbps, Some(10_000));
    // The queue is sized from that speed (12 ms = 10000 packets at 10 Gbit/s),
    // and only on the egress interface.
    assert_eq!(p.txqueuelen, vec![("tqa".to_string(), 10_000)]);

    let saved = apply(Some(&name), &p).expect("apply");
    assert_eq!(saved.netns.as_deref(), Some(name.as_str()));
    let after = collect(Some(&name), path, &Probe::default()).expect("collect after");
    assert_eq!(after.sysctl("net.ipv4.tcp_rmem"), Fact::Known("4096 131072 25165824".into()));
    let judged = judge(&after);
    for id in ["tcp_rmem", "tcp_wmem", "tcp_slow_start_after_idle", "txqueuelen:tqa"] {
        let f = judged.iter().find(|f| f.id == id).expect(id);
        assert_eq!(f.severity, Severity::Ok, "{id} after apply: {}", f.summary);
    }
    let host_mid: Vec<_> = SYSCTLS.iter().map(|k| read_sysctl(k)).collect();
    assert_eq!(host_mid, host_before, "apply in a namespace must not touch the host");

    // The saved state goes through its JSON file form, as the CLI uses it.
    let json = serde_json::to_string(&saved).unwrap();
    let back = serde_json::from_str(&json).unwrap();
    let restored = revert(&back).expect("revert");
    assert_eq!(restored.len(), p.sysctls.len() + p.txqueuelen.len());
    let reverted = in_ns(&name, snapshot);
    assert_eq!(reverted, before, "revert restores every value exactly");
    let host_after: Vec<_> = SYSCTLS.iter().map(|k| read_sysctl(k)).collect();
    assert_eq!(host_after, host_before);
}

/// Issue 51 item 5: the doctor run *inside* a namespace (`ip netns exec`,
/// `tcpaccel net exec`: the calling thread in it, no --netns) reads the
/// host-global sysctls the namespace hides in the initial namespace, as
/// with --netns, instead of reporting them unknown.
#[test]
fn root_collect_from_inside_a_namespace_reads_the_host_global_sysctls() {
    tcpaccel_sys::testing::require_root();
    let ns = make_ns();
    let path = PathSpec {
        rate: Some(Rate::mbps(100)),
        rtt: Some(Duration::from_millis(40)),
        rtt_source: Some("given".into()),
        egress_dev: None,
    };
    let facts = tcpaccel_sys::netns::run_in(ns.name(), move || {
        // Hidden here, as a command under `ip netns exec` sees it.
        assert!(!tcpaccel_sys::sysctl::exists("net.core.netdev_max_backlog"));
        collect(None, path, &Probe::default()).expect("collect here")
    })
    .expect("enter test namespace");
    for key in ["net.core.netdev_max_backlog", "net.ipv4.tcp_mem", "net.core.default_qdisc"] {
        assert_eq!(facts.sysctl(key), read_sysctl(key), "{key} not read from the host");
        assert!(
            facts.host_only.iter().any(|k| k == key),
            "{key} not marked host-only: {:?}",
            facts.host_only
        );
        assert!(facts.readonly.iter().any(|k| k == key), "{key} planned as if writable here");
    }
    let unknown: Vec<_> =
        judge(&facts).into_iter().filter(|f| f.severity == Severity::Unknown).map(|f| f.id).collect();
    assert!(unknown.is_empty(), "unknown rows: {unknown:?}");
}
