//! Helpers shared by the relay's integration tests.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use std::sync::Arc;

use tcpaccel_relay::{Config, Relay, Settings, Stats};

/// A loopback echo server on its own threads, one per connection, that
/// half-closes after the client does; its address.
pub(crate) fn echo_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind echo");
    let addr = l.local_addr().expect("addr");
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut b = [0u8; 4096];
                while let Ok(n) = s.read(&mut b) {
                    if n == 0 || s.write_all(&b[..n]).is_err() {
                        break;
                    }
                }
                let _ = s.shutdown(Shutdown::Write);
            });
        }
    });
    addr
}

/// SOCKS5 handshake by hand (no authentication, then `request`); returns
/// the stream and the reply code.
pub(crate) fn socks_connect(relay: SocketAddr, request: &[u8]) -> (TcpStream, u8) {
    let mut s = TcpStream::connect(relay).expect("connect relay");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    s.write_all(&[5, 1, 0]).expect("greeting");
    let mut m = [0u8; 2];
    s.read_exact(&mut m).expect("method reply");
    assert_eq!(m, [5, 0]);
    s.write_all(request).expect("request");
    let mut head = [0u8; 10];
    s.read_exact(&mut head).expect("reply");
    assert_eq!(head[0], 5);
    assert_eq!(head[3], 1, "replies carry an IPv4 bound address");
    (s, head[1])
}

/// A SOCKS5 CONNECT request for an IPv4 `addr`.
pub(crate) fn connect_req(addr: SocketAddr) -> Vec<u8> {
    let SocketAddr::V4(a) = addr else { panic!("v4 only here") };
    let mut r = vec![5, 1, 0, 1];
    r.extend_from_slice(&a.ip().octets());
    r.extend_from_slice(&a.port().to_be_bytes());
    r
}

/// The body of a relay child process: serves `cfg` on `rt`, prints
/// `ADDR <addr>` once listening, runs until its stdin closes, then prints
/// `STATS <json>` (the parent reads both lines).
pub(crate) fn serve_until_stdin_closes(cfg: Config, rt: tokio::runtime::Runtime) {
    serve_until_stdin_closes_with(cfg, rt, || ());
}

/// [`serve_until_stdin_closes`], with `prepare` run after the bind and
/// before `ADDR` is printed (so the parent connects only after it); what it
/// returns is held until the relay stops.
pub(crate) fn serve_until_stdin_closes_with<G>(
    cfg: Config,
    rt: tokio::runtime::Runtime,
    prepare: impl FnOnce() -> G,
) {
    rt.block_on(async {
        let relay = Relay::bind(cfg).await.expect("bind");
        let addr = relay.local_addrs()[0];
        let stats = relay.stats();
        let stdin_closed = tokio::task::spawn_blocking(|| {
            let mut s = String::new();
            let _ = std::io::stdin().read_to_string(&mut s);
        });
        tokio::task::yield_now().await;
        let held = prepare();
        println!("ADDR {addr}");
        relay
            .run(async {
                let _ = stdin_closed.await;
            })
            .await;
        drop(held);
        println!("STATS {}", serde_json::to_string(&stats.snapshot()).expect("json"));
    });
}

/// True in the child process that [`spawn_limited_child`] starts (its `env`
/// is set): the parent test then plays the relay instead of testing it.
/// There is no helper test of its own, so nothing passes without asserting.
pub(crate) fn is_child(env: &str) -> bool {
    std::env::var_os(env).is_some()
}

/// Closes the child's stdin (the relay stops), reads its `STATS` line and
/// waits for it; the counters.
pub(crate) fn stop_child(
    mut child: std::process::Child,
    lines: &mut std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
) -> serde_json::Value {
    drop(child.stdin.take());
    let stats = loop {
        let line = lines.next().expect("child exited before printing its counters").expect("read");
        if let Some((_, j)) = line.split_once("STATS ") {
            break serde_json::from_str::<serde_json::Value>(j).expect("counters json");
        }
    };
    let _ = child.wait();
    stats
}

/// Runs this test binary again, only test `test` (the caller itself), as a
/// child relay under `prlimit --nofile=N:N` with `env` set (the test sees
/// [`is_child`] and serves), and waits for the `ADDR` line it prints; the
/// child, its remaining stdout lines and the relay's address. Closing the
/// child's stdin stops it.
pub(crate) fn spawn_limited_child(
    nofile: u32,
    test: &str,
    env: &str,
) -> (std::process::Child, std::io::Lines<std::io::BufReader<std::process::ChildStdout>>, SocketAddr) {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let exe = std::env::current_exe().expect("test exe");
    let mut child = Command::new("prlimit")
        .arg(format!("--nofile={nofile}:{nofile}"))
        .arg(&exe)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(env, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn `prlimit` (util-linux) to run the relay with a low descriptor limit");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let addr: SocketAddr = loop {
        let line = lines.next().expect("child exited before printing its address").expect("read");
        // libtest prints "test <test> ... " on the same line.
        if let Some((_, a)) = line.split_once("ADDR ") {
            break a.trim().parse().expect("address");
        }
    };
    (child, lines, addr)
}

/// A relay serving on its own runtime for one test, on a loopback port.
pub(crate) struct TestRelay {
    pub _rt: tokio::runtime::Runtime,
    pub addr: SocketAddr,
    pub stats: Arc<Stats>,
}

/// `raw` as a config, listening on a free loopback port unless it names one.
pub(crate) fn config(raw: Settings) -> Config {
    let raw = Settings { listen: raw.listen.or(Some("127.0.0.1:0".parse().unwrap())), ..raw };
    Config::from_settings(&raw).expect("config")
}

/// Binds `cfg` and serves it until the test ends.
pub(crate) fn start_cfg(cfg: Config) -> TestRelay {
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let relay = rt.block_on(Relay::bind(cfg)).expect("bind relay");
    let addr = *relay.local_addrs().last().expect("a listener");
    let stats = relay.stats();
    rt.spawn(relay.run(std::future::pending()));
    TestRelay { _rt: rt, addr, stats }
}

/// [`start_cfg`] of [`config`]`(raw)`.
pub(crate) fn start(raw: Settings) -> TestRelay {
    start_cfg(config(raw))
}
