//! Root test: class ordering of goodput under a shared bottleneck.
//!
//! Two namespaces `tcpaccel-gathertest-<random>-{s,c}` joined by a veth pair;
//! the client side's egress is a 12 Mbit/s `tbf` with a queue large enough
//! to hold every window, so each client's throughput is its window over the
//! shared RTT: the share of the pool decides the order. Without the clamps all
//! three would split the link about equally. Fails loudly when it cannot set
//! up (not root, no `ip`/`tc`); a Drop guard deletes the namespaces even when
//! the test panics.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;
use tcpaccel_gather::{parse_class, Limit, SendOptions, SendReport, Server, ServerConfig, SinkSpec, Source};

fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap_or_else(|e| panic!("run {args:?}: {e}"));
    assert!(out.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// Deletes the namespaces it names when dropped (also on panic).
struct Namespaces(Vec<String>);
impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn random_tag() -> String {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    let mut r = tcpaccel_core::rng::Rng::seeded(t ^ u64::from(std::process::id()));
    format!("{:06x}", r.next_u64() & 0xff_ffff)
}

#[test]
fn class_ordering_holds_under_a_shared_bottleneck() {
    assert!(tcpaccel_sys::privilege::is_root(), "this test needs root (network namespaces, tc)");
    let tag = random_tag();
    let (ns_s, ns_c) = (format!("tcpaccel-gathertest-{tag}-s"), format!("tcpaccel-gathertest-{tag}-c"));
    sh(&["ip", "netns", "add", &ns_s]);
    let _guard_s = Namespaces(vec![ns_s.clone()]);
    sh(&["ip", "netns", "add", &ns_c]);
    let _guard = Namespaces(vec![ns_c.clone()]);
    let (vs, vc) = (format!("gs{tag}"), format!("gc{tag}"));
    sh(&["ip", "-n", &ns_s, "link", "add", &vs, "type", "veth", "peer", "name", &vc, "netns", &ns_c]);
    sh(&["ip", "-n", &ns_s, "addr", "add", "10.97.0.1/24", "dev", &vs]);
    sh(&["ip", "-n", &ns_c, "addr", "add", "10.97.0.2/24", "dev", &vc]);
    for (ns, dev) in [(&ns_s, &vs), (&ns_c, &vc)] {
        sh(&["ip", "-n", ns, "link", "set", dev, "up"]);
        sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
    }
    // The shared bottleneck: 12 Mbit/s, queue 150 KB (more than the pool, so
    // the windows, not drops, divide the link).
    sh(&[
        "ip", "netns", "exec", &ns_c, "tc", "qdisc", "add", "dev", &vc, "root", "tbf", "rate", "12mbit",
        "burst", "8kb", "limit", "150kb",
    ]);

    // Server in its namespace: pool 48 KB; targets 8 and 2 Mbit/s.
    let classes = vec![parse_class("high=8mbit,2").unwrap(), parse_class("low=2mbit,1").unwrap()];
    let cfg = ServerConfig::new(classes, 48_000, None, 2, Duration::from_millis(500)).unwrap();
    let (tx_addr, rx_addr) = std::sync::mpsc::channel::<SocketAddr>();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (ev_tx, mut ev_rx) = tokio::sync::mpsc::unbounded_channel();
    let ns = ns_s.clone();
    let server = std::thread::spawn(move || {
        tcpaccel_sys::netns::enter(&ns).expect("enter server namespace");
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let s = Server::bind(cfg, "10.97.0.1:0".parse().unwrap(), SinkSpec::Discard, Some(ev_tx))
                .await
                .unwrap();
            tx_addr.send(s.local_addr().unwrap()).unwrap();
            tokio::select! {
                r = s.run() => r.unwrap(),
                _ = stop_rx => {}
            }
        });
    });
    let addr = rx_addr.recv_timeout(Duration::from_secs(10)).expect("server did not start");

    // Three clients in the other namespace, all backlogged for 6 s.
    let reports: Vec<SendReport> = tcpaccel_sys::netns::run_in(&ns_c, move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let mk = |id: &str, class: &str| SendOptions {
                server: addr,
                id: id.into(),
                class: class.into(),
                target: None,
                source: Source::Synthetic {
                    rate: None,
                    limit: Limit::Duration(Duration::from_secs(6)),
                    seed: 5,
                },
            };
            let h = tokio::spawn(tcpaccel_gather::send(mk("high-1", "high")));
            let l1 = tokio::spawn(tcpaccel_gather::send(mk("low-1", "low")));
            let l2 = tokio::spawn(tcpaccel_gather::send(mk("low-2", "low")));
            let mut out = Vec::new();
            for j in [h, l1, l2] {
                out.push(tokio::time::timeout(Duration::from_secs(60), j).await.unwrap().unwrap().unwrap());
            }
            out
        })
    })
    .expect("enter client namespace");
    let _ = stop_tx.send(());
    server.join().unwrap();

    while let Ok(e) = ev_rx.try_recv() {
        if let tcpaccel_gather::Event::Status(s) = &e {
            if s.t > 2.0 && s.t < 3.0 {
                eprintln!("{}", serde_json::to_string(&e).unwrap());
            }
        }
    }
    for r in &reports {
        assert!(r.complete, "every byte once, in order: {r:?}");
    }
    let (h, l1, l2) = (reports[0].bytes, reports[1].bytes, reports[2].bytes);
    eprintln!("bytes in 6 s: high {h}, low {l1}, low {l2}");
    // Allocation gives high 4x a low client's window; ask for 1.5x only.
    assert!(h * 2 >= l1 * 3 && h * 2 >= l2 * 3, "class ordering violated: high {h}, low {l1}, {l2}");
    // And the link was actually used (12 Mbit/s for 6 s is 9 MB).
    assert!(h + l1 + l2 > 3_000_000, "too little data: {h} + {l1} + {l2}");
}
