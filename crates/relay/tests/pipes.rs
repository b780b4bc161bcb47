//! Out of descriptors for pipes: a splice relay whose pipe creation fails
//! copies instead, still byte-exact, and the counters say it copied (issue 14
//! item 8: they used to report the configured path).
//!
//! The relay runs in a child process (this test binary re-executed under
//! `prlimit --nofile`) that fills its descriptor table so that exactly the
//! client's and the upstream socket still fit, and no pipe does.

use std::io::{Read, Write};
use std::net::Shutdown;

use tcpaccel_relay::{Config, RawConfig, Relay};

mod common;
use common::{connect_req, echo_server, socks_connect, spawn_limited_child};

const CHILD_ENV: &str = "TCPACCEL_RELAY_PIPES_CHILD";

#[test]
#[ignore = "helper process of counters_report_copy_when_pipes_cannot_be_made"]
fn relay_without_pipes_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        eprintln!("relay_without_pipes_child is a helper process; run counters_report_copy_when_pipes_cannot_be_made");
        return;
    }
    let raw = RawConfig { listen: Some("127.0.0.1:0".into()), ..Default::default() };
    let cfg = Config::from_raw(&raw).expect("config");
    assert!(cfg.splice, "splice is the default path");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let relay = Relay::bind(cfg).await.expect("bind");
        let addr = relay.local_addrs()[0];
        let stats = relay.stats();
        let stdin_closed = tokio::task::spawn_blocking(|| {
            let mut s = String::new();
            let _ = std::io::stdin().read_to_string(&mut s);
        });
        tokio::task::yield_now().await;
        // Take every free descriptor, then give back two: one for the accepted
        // client, one for the upstream socket. Each pipe needs two more.
        let mut hogs = Vec::new();
        loop {
            match std::fs::File::open("/dev/null") {
                Ok(f) => hogs.push(f),
                Err(e) if e.raw_os_error() == Some(libc::EMFILE) => break,
                Err(e) => panic!("open /dev/null: {e}"),
            }
        }
        assert!(hogs.len() > 2, "the descriptor limit left no room at all");
        hogs.truncate(hogs.len() - 2);
        println!("ADDR {addr}");
        relay
            .run(async {
                let _ = stdin_closed.await;
            })
            .await;
        drop(hogs);
        println!("STATS {}", serde_json::to_string(&stats.snapshot()).expect("json"));
    });
}

#[test]
fn counters_report_copy_when_pipes_cannot_be_made() {
    let (mut child, mut lines, addr) = spawn_limited_child(64, "relay_without_pipes_child", CHILD_ENV);
    let echo = echo_server();
    let (mut s, code) = socks_connect(addr, &connect_req(echo));
    assert_eq!(code, 0, "the upstream socket fits in the limit");
    let msg: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let mut w = s.try_clone().expect("clone");
    let m2 = msg.clone();
    let writer = std::thread::spawn(move || {
        w.write_all(&m2).expect("send");
        w.shutdown(Shutdown::Write).expect("shutdown");
    });
    let mut got = Vec::new();
    s.read_to_end(&mut got).expect("echo back");
    writer.join().expect("writer");
    assert!(got == msg, "copy fallback is not byte-exact ({} of {} bytes)", got.len(), msg.len());
    drop(s);
    drop(child.stdin.take());
    let stats = loop {
        let line = lines.next().expect("child exited before printing its counters").expect("read");
        if let Some((_, j)) = line.split_once("STATS ") {
            break serde_json::from_str::<serde_json::Value>(j).expect("counters json");
        }
    };
    let _ = child.wait();
    assert_eq!(stats["connections_total"], 1, "{stats}");
    assert_eq!(stats["spliced"], 0, "no pipe could be made, so nothing was spliced: {stats}");
    assert_eq!(stats["copied"], 1, "{stats}");
    assert_eq!(stats["pipe_failures"], 1, "{stats}");
}
