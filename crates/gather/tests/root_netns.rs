//! Root test: class ordering of goodput under a shared bottleneck.
//!
//! Three namespaces `tcpaccel-gathertest-<random>-{c,r,s}`: clients, a
//! router and the server, joined by veth pairs; the router's egress towards
//! the server is a 6 Mbit/s `tbf` with a queue large enough to hold every
//! window, so each client's throughput is its window over the shared RTT:
//! the share of the pool decides the order. Without the clamps all
//! three would split the link about equally. Fails loudly when it cannot set
//! up (not root, no `ip`/`tc`); a Drop guard deletes the namespaces even when
//! the test panics.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;
use tcpaccel_gather::{parse_class, Limit, SendOptions, SendReport, Server, ServerConfig, SinkSpec, Source};
use tcpaccel_sys::testing::TestNetns;

fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap_or_else(|e| panic!("run {args:?}: {e}"));
    assert!(out.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn root_class_ordering_holds_under_a_shared_bottleneck() {
    tcpaccel_sys::testing::require_root();
    let guard = TestNetns::new("gathertest", &["s", "r", "c"]);
    let (ns_s, ns_r, ns_c) =
        (guard.ns("s").to_string(), guard.ns("r").to_string(), guard.ns("c").to_string());
    // client (10.97.1.2) -- (10.97.1.1) router (10.97.0.2) -- (10.97.0.1) server
    let (vc, vrc, vrs, vs) = ("gc", "gx", "gy", "gs");
    guard.veth((&ns_c, vc), (&ns_r, vrc));
    guard.veth((&ns_s, vs), (&ns_r, vrs));
    for (n, dev, addr) in [
        (&ns_c, vc, "10.97.1.2/24"),
        (&ns_r, vrc, "10.97.1.1/24"),
        (&ns_r, vrs, "10.97.0.2/24"),
        (&ns_s, vs, "10.97.0.1/24"),
    ] {
        guard.addr(n, dev, addr);
    }
    sh(&["ip", "-n", &ns_c, "route", "add", "default", "via", "10.97.1.1"]);
    sh(&["ip", "-n", &ns_s, "route", "add", "default", "via", "10.97.0.2"]);
    sh(&["ip", "netns", "exec", &ns_r, "sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    // The shared bottleneck, on the router's egress towards the server:
    // 6 Mbit/s, queue 150 KB (more than the pool, so the windows, not drops,
    // divide the link). Full windows queue 48 KB, an RTT of about 64 ms: the
    // targets then need 32 + 8 + 8 KB, the pool just covers them
    // ([GatherQoS] §3.1 rule 1); rule 3, which would equalise everyone,
    // starts only past 128 ms. A slow link also keeps the test's CPU
    // (synthetic data, SHA-256 on both sides) far below what 2 busy cores
    // give, so the senders stay backlogged.
    //
    // Not on the clients' own egress: there the queue would be the senders'
    // local qdisc, where TCP small queues hold each socket to about two TSO
    // packets, and a socket whose handshake already waited behind the queue
    // has a large minimum RTT, hence small TSO packets (tcp_tso_autosize):
    // it stays at about 7 KB queued whatever its window. The high client
    // then got 1.5-1.7 Mbit/s against the lows' 2.1-2.3 when its data
    // stream happened to connect after the lows had filled the queue (rare
    // when it starts first; every time when it starts 1 s after them). The
    // router's IP input orphans the packets, so its queue is the network's,
    // as a real bottleneck is, and only the windows divide it.
    sh(&[
        "ip", "netns", "exec", &ns_r, "tc", "qdisc", "add", "dev", vrs, "root", "tbf", "rate", "6mbit",
        "burst", "8kb", "limit", "150kb",
    ]);

    // Server in its namespace: pool 48 KB; targets 4 and 1 Mbit/s.
    let classes = vec![parse_class("high=4mbit,2").unwrap(), parse_class("low=1mbit,1").unwrap()];
    let mut cfg = ServerConfig::new(classes, 48_000, None, 2, Duration::from_millis(500)).unwrap();
    // The ordering comes from the buffer allocation (§3.1), which this test
    // checks; stream tuning stays off. With it on (2026-11-22, 4 runs each):
    // bbr clients passed 4/4 but twice at only 1.5-1.6x; Reno clients failed
    // 2/4 (high 2.2-2.3 vs low 1.6-1.7 Mbit/s). In the failures the high
    // client held a 32 KB clamp but had only about 10 KB in flight while the
    // tbf queue was full (RTT 37 ms), so the limit was its sender or cwnd
    // after the stream changes, not the allocation. That was with the tbf
    // on the clients' egress: streams opened after the queue had filled
    // meet the small-queue limit described there. Not re-measured since
    // the bottleneck moved to the router.
    cfg.tune_streams = false;
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

    // Three clients in their namespace, each backlogged for 9 s, with
    // Reno set per socket ([GatherQoS]'s TCP; the namespace would inherit the
    // host's default, bbr here). A loss-based sender fills its clamp, so the
    // windows divide the link as this test assumes; bbr sizes its own cwnd
    // from its bandwidth and min-RTT model and leaves a large clamp unused:
    // in a CI run high-1 held a 32 KB clamp with about 5.6 KB in flight at
    // 27 ms and got 1.67 Mbit/s against low's 2.32 (its 8 KB clamp full).
    // Reno, 9 runs on 2026-11-24 (3 of them with three busy loops on the two
    // cores): high 3.4-4.0 Mbit/s, lows 0.78-1.24, at least 2.9x.
    let reports: Vec<SendReport> = tcpaccel_sys::netns::run_in(&ns_c, move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let mk = |id: &str, class: &str| SendOptions {
                server: addr,
                id: id.into(),
                class: class.into(),
                target: None,
                cc: Some("reno".into()),
                timeout: tcpaccel_gather::client::DEFAULT_TIMEOUT,
                source: Source::Synthetic {
                    rate: None,
                    limit: Limit::Duration(Duration::from_secs(9)),
                    seed: 5,
                },
            };
            // The high client joins last, 1 s after the lows, when their
            // data already fills the queue: its handshake sees the queue's
            // delay. That order made the bottleneck on the clients' own
            // egress fail every time (see the tbf above); it must not matter.
            let l1 = tokio::spawn(tcpaccel_gather::send(mk("low-1", "low")));
            let l2 = tokio::spawn(tcpaccel_gather::send(mk("low-2", "low")));
            tokio::time::sleep(Duration::from_secs(1)).await;
            let h = tokio::spawn(tcpaccel_gather::send(mk("high-1", "high")));
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

    // In-order bytes per client between 3 s and 8 s (server clock): the
    // steady state, after the start-up (windows advertised before the first
    // clamp, slow start, losses, the high client's join at 1 s) and before
    // the first client ends.
    let mut at3 = std::collections::HashMap::new();
    let mut at8 = std::collections::HashMap::new();
    while let Ok(e) = ev_rx.try_recv() {
        if let tcpaccel_gather::Event::Status(s) = &e {
            eprintln!(
                "{:5.1}s {:7} alloc {:6} clamp {:6} rtt {:6} us goodput {:8} streams {}",
                s.t, s.id, s.allocation, s.window_clamp, s.rtt_us, s.goodput_bps, s.streams
            );
            if s.t >= 3.0 {
                at3.entry(s.id.clone()).or_insert((s.t, s.received));
            }
            if s.t <= 8.0 {
                at8.insert(s.id.clone(), (s.t, s.received));
            }
        }
    }
    for r in &reports {
        assert!(r.complete, "every byte once, in order: {r:?}");
    }
    let rate = |id: &str| {
        let (t0, b0) = at3[id];
        let (t1, b1) = at8[id];
        assert!(t1 - t0 >= 4.0, "status too sparse for {id}: {t0} .. {t1}");
        (b1 - b0) as f64 * 8.0 / (t1 - t0)
    };
    let (h, l1, l2) = (rate("high-1"), rate("low-1"), rate("low-2"));
    eprintln!("steady goodput, bit/s: high {h:.0}, low {l1:.0}, low {l2:.0}");
    // Allocation gives high about 4x a low client's window (equal split: 1x);
    // ask for 1.5x only.
    assert!(h >= 1.5 * l1 && h >= 1.5 * l2, "class ordering violated: high {h:.0}, low {l1:.0}, {l2:.0}");
    // And the link was actually used (6 Mbit/s).
    assert!(h + l1 + l2 > 3e6, "too little throughput: {h:.0} + {l1:.0} + {l2:.0}");
}
