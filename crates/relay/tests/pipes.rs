//! Out of descriptors for pipes: a splice relay whose pipe creation fails
//! copies instead, still byte-exact, and the counters say it copied (issue 14
//! item 8: they used to report the configured path).
//!
//! The relay runs in a child process (this test binary re-executed under
//! `prlimit --nofile`, running this same test with `CHILD_ENV` set) that fills its descriptor table so that exactly the
//! client's and the upstream socket still fit, and no pipe does.

use std::io::{Read, Write};
use std::net::Shutdown;

use tcpaccel_relay::{Config, Settings};

mod common;
use common::{
    connect_req, echo_server, is_child, serve_until_stdin_closes_with, socks_connect, spawn_limited_child,
    stop_child,
};

const CHILD_ENV: &str = "TCPACCEL_RELAY_PIPES_CHILD";

/// The relay of the child process (under the low descriptor limit).
fn relay_without_pipes_child() {
    let raw = Settings { listen: Some("127.0.0.1:0".parse().unwrap()), ..Default::default() };
    let cfg = Config::from_settings(&raw).expect("config");
    assert!(cfg.splice, "splice is the default path");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    // Once bound, take every free descriptor, then give back two: one for the
    // accepted client, one for the upstream socket. Each pipe needs two more.
    serve_until_stdin_closes_with(cfg, rt, || {
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
        hogs
    });
}

#[test]
fn counters_report_copy_when_pipes_cannot_be_made() {
    if is_child(CHILD_ENV) {
        return relay_without_pipes_child();
    }
    let (child, mut lines, addr) =
        spawn_limited_child(64, "counters_report_copy_when_pipes_cannot_be_made", CHILD_ENV);
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
    let stats = stop_child(child, &mut lines);
    assert_eq!(stats["connections_total"], 1, "{stats}");
    assert_eq!(stats["spliced"], 0, "no pipe could be made, so nothing was spliced: {stats}");
    assert_eq!(stats["copied"], 1, "{stats}");
    assert_eq!(stats["pipe_failures"], 1, "{stats}");
}
