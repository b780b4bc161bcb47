//! Loopback tests of the relay as a service: real sockets, real curl, real
//! relays chained on 127.0.0.1. No root needed; short runs only.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tcpaccel_relay::acl::{Action, Rule};
use tcpaccel_relay::config::Hop;
use tcpaccel_relay::stats::ErrorKind as Err;
use tcpaccel_relay::{Config, Relay, Settings};

mod common;
// Echo server: sends back everything, then closes after the client's FIN.
use common::{connect_req, echo_server, socks_connect, start, TestRelay};

fn next(r: &TestRelay) -> Hop {
    hop(&format!("socks5://{}", r.addr))
}

fn hop(url: &str) -> Hop {
    Hop::parse(url).expect("hop URL")
}

/// Deterministic pseudo-random bytes (xorshift64*).
fn body(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}

fn read_head(s: &mut TcpStream) -> Vec<u8> {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => break,
        }
    }
    head
}

/// A tiny HTTP/1.1 server answering every request with `data`.
fn http_server(data: Arc<Vec<u8>>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind http");
    let addr = l.local_addr().expect("addr");
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let data = data.clone();
            std::thread::spawn(move || {
                read_head(&mut s);
                let head =
                    format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", data.len());
                let _ = s.write_all(head.as_bytes());
                let _ = s.write_all(&data);
                let _ = s.shutdown(Shutdown::Write);
                let mut sink = Vec::new();
                let _ = s.read_to_end(&mut sink);
            });
        }
    });
    addr
}

fn sha(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

fn curl(proxy_flag: &str, relay: &TestRelay, url: &str) -> Vec<u8> {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "60", proxy_flag, &relay.addr.to_string(), url, "-o", "-"])
        .output()
        .expect("run curl (is curl installed?)");
    assert!(out.status.success(), "curl failed: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

fn domain_req(cmd: u8, name: &str, port: u16) -> Vec<u8> {
    let mut r = vec![5, cmd, 0, 3, name.len() as u8];
    r.extend_from_slice(name.as_bytes());
    r.extend_from_slice(&port.to_be_bytes());
    r
}

#[test]
fn curl_socks5_hostname_through_three_chained_relays() {
    let data = Arc::new(body(5 << 20, 1));
    let http = http_server(data.clone());
    // Each relay knows only its own next hop (Dante's `route` style).
    let r3 = start(Settings::default());
    let r2 = start(Settings { next: vec![next(&r3)], ..Default::default() });
    let r1 = start(Settings { next: vec![next(&r2)], ..Default::default() });
    let got = curl("--socks5-hostname", &r1, &format!("http://localhost:{}/file", http.port()));
    assert_eq!(got.len(), data.len());
    assert_eq!(sha(&got), sha(&data));
    // r2 and r3 also count the warm connections their previous relay opened.
    assert_eq!(r1.stats.snapshot().connections_total, 1);
    for r in [&r1, &r2, &r3] {
        let s = r.stats.snapshot();
        assert!(s.bytes_down >= data.len() as u64, "{s:?}");
    }
}

#[test]
fn curl_socks5_client_resolved_through_a_nested_chain() {
    let data = Arc::new(body(5 << 20, 2));
    let http = http_server(data.clone());
    // The first relay negotiates through both further hops itself.
    let r3 = start(Settings::default());
    let r2 = start(Settings::default());
    let r1 = start(Settings { next: vec![next(&r2), next(&r3)], copy: Some(true), ..Default::default() });
    let got = curl("--socks5", &r1, &format!("http://127.0.0.1:{}/", http.port()));
    assert_eq!(sha(&got), sha(&data));
    assert_eq!(r1.stats.snapshot().copied, 1);
    assert_eq!(r3.stats.snapshot().connections_total, 1);
}

#[test]
fn forward_mode_relays_without_socks() {
    let echo = echo_server();
    // Only a forward: no SOCKS listener is opened.
    let raw =
        Settings { forward: vec![format!("127.0.0.1:0={echo}").parse().unwrap()], ..Default::default() };
    let cfg = Config::from_settings(&raw).unwrap();
    assert_eq!(cfg.listeners.len(), 1);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let relay = rt.block_on(Relay::bind(cfg)).unwrap();
    let addr = relay.local_addrs()[0];
    rt.spawn(relay.run(std::future::pending()));
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let msg = body(300_000, 3);
    let w = {
        let mut s2 = s.try_clone().unwrap();
        let msg = msg.clone();
        std::thread::spawn(move || {
            s2.write_all(&msg).unwrap();
            s2.shutdown(Shutdown::Write).unwrap();
        })
    };
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    w.join().unwrap();
    assert_eq!(sha(&got), sha(&msg));
}

#[test]
fn half_close_keeps_the_other_direction_flowing() {
    // Server: read everything until FIN, then answer with a large response.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = l.local_addr().unwrap();
    let answer = body(2 << 20, 4);
    let a2 = answer.clone();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut req = Vec::new();
        s.read_to_end(&mut req).unwrap();
        s.write_all(&(req.len() as u64).to_be_bytes()).unwrap();
        s.write_all(&a2).unwrap();
    });
    let r = start(Settings::default());
    let (mut s, rep) = socks_connect(r.addr, &connect_req(server));
    assert_eq!(rep, 0);
    s.write_all(&body(100_000, 5)).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    assert_eq!(&got[..8], &100_000u64.to_be_bytes());
    assert_eq!(sha(&got[8..]), sha(&answer));
}

#[test]
fn upstream_reset_is_propagated_as_reset() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut b = [0u8; 5];
        s.read_exact(&mut b).unwrap();
        s.write_all(b"some data before the reset").unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // SO_LINGER 0 through std: set_linger is unstable, so drop via the sys crate.
        tcpaccel_sys::sockopt::set_linger_zero(&s).unwrap();
        drop(s);
    });
    let r = start(Settings::default());
    let (mut s, rep) = socks_connect(r.addr, &connect_req(server));
    assert_eq!(rep, 0);
    s.write_all(b"hello").unwrap();
    let mut got = Vec::new();
    let res = s.read_to_end(&mut got);
    let err = res.expect_err("a reset must not look like a clean end of file");
    assert_eq!(err.kind(), ErrorKind::ConnectionReset, "{err}");
    assert_eq!(r.stats.errors_of(Err::Reset), 1);
}

#[test]
fn client_reset_is_propagated_upstream() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = l.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut got = Vec::new();
        let r = s.read_to_end(&mut got).map_err(|e| e.kind());
        let _ = tx.send(r);
    });
    let r = start(Settings::default());
    let (mut s, rep) = socks_connect(r.addr, &connect_req(server));
    assert_eq!(rep, 0);
    s.write_all(b"abc").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    tcpaccel_sys::sockopt::set_linger_zero(&s).unwrap();
    drop(s);
    let res = rx.recv_timeout(Duration::from_secs(10)).expect("server saw the end");
    assert_eq!(res, Err(ErrorKind::ConnectionReset));
}

#[test]
fn handshake_timeout_closes_a_silent_client() {
    let r = start(Settings { handshake_timeout: Some(Duration::from_millis(300)), ..Default::default() });
    let mut s = TcpStream::connect(r.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let t0 = std::time::Instant::now();
    let mut b = [0u8; 16];
    let n = s.read(&mut b).expect("closed, not timed out on our side");
    assert_eq!(n, 0);
    assert!(t0.elapsed() >= Duration::from_millis(250));
    assert!(t0.elapsed() < Duration::from_secs(8));
    assert_eq!(r.stats.errors_of(Err::HandshakeTimeout), 1);
}

#[test]
fn access_rules_deny_with_reply_2() {
    let echo = echo_server();
    let r = start(Settings {
        deny: vec![Rule::parse(Action::Deny, &format!("127.0.0.1:{}", echo.port())).unwrap()],
        allow: vec![Rule::parse(Action::Allow, "127.0.0.0/8").unwrap()],
        ..Default::default()
    });
    let (_s, rep) = socks_connect(r.addr, &connect_req(echo));
    assert_eq!(rep, 2);
    // Same server by name: resolved, then denied.
    let (_s, rep) = socks_connect(r.addr, &domain_req(1, "localhost", echo.port()));
    assert_eq!(rep, 2);
    // Default deny once an allow exists: 10.0.0.1 matches nothing (no packet is sent).
    let (_s, rep) = socks_connect(r.addr, &connect_req("10.0.0.1:80".parse().unwrap()));
    assert_eq!(rep, 2);
    assert_eq!(r.stats.errors_of(Err::NotAllowed), 3);
}

#[test]
fn authentication_failure_and_success() {
    let r = start(Settings { auth: vec!["alice:wonder".parse().unwrap()], ..Default::default() });
    // Offering only "no auth" gets 0xFF.
    let mut s = TcpStream::connect(r.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&[5, 1, 0]).unwrap();
    let mut m = [0u8; 2];
    s.read_exact(&mut m).unwrap();
    assert_eq!(m, [5, 0xff]);
    let mut rest = Vec::new();
    assert_eq!(s.read_to_end(&mut rest).unwrap(), 0, "closed after 0xFF");
    // Wrong password: status failure, then close.
    let mut s = TcpStream::connect(r.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&[5, 2, 0, 2]).unwrap();
    s.read_exact(&mut m).unwrap();
    assert_eq!(m, [5, 2]);
    s.write_all(&[1, 5, b'a', b'l', b'i', b'c', b'e', 3, b'b', b'a', b'd']).unwrap();
    s.read_exact(&mut m).unwrap();
    assert_eq!(m[0], 1);
    assert_ne!(m[1], 0);
    let mut rest = Vec::new();
    assert_eq!(s.read_to_end(&mut rest).unwrap(), 0);
    assert_eq!(r.stats.errors_of(Err::AuthFailed), 2);
    // Right password through curl.
    let data = Arc::new(body(100_000, 6));
    let http = http_server(data.clone());
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "30", "--socks5-hostname", &r.addr.to_string()])
        .args(["--proxy-user", "alice:wonder", &format!("http://localhost:{}/", http.port())])
        .output()
        .expect("curl");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(sha(&out.stdout), sha(&data));
}

#[test]
fn bad_input_gets_the_right_reply_and_the_server_keeps_serving() {
    let echo = echo_server();
    let r = start(Settings::default());
    // BIND and UDP ASSOCIATE: 7.
    assert_eq!(socks_connect(r.addr, &domain_req(2, "localhost", 1)).1, 7);
    assert_eq!(socks_connect(r.addr, &domain_req(3, "localhost", 1)).1, 7);
    // Unknown address type: 8.
    assert_eq!(socks_connect(r.addr, &[5, 1, 0, 9, 1, 2, 3, 4, 0, 80]).1, 8);
    // A name that cannot resolve (RFC 6761 .invalid; no DNS query is sent): 4.
    assert_eq!(socks_connect(r.addr, &domain_req(1, "nothing.invalid", 80)).1, 4);
    // A refused port: 5.
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    assert_eq!(socks_connect(r.addr, &connect_req(closed)).1, 5);
    // Not SOCKS at all: closed without a reply that could be mistaken for one.
    let mut s = TcpStream::connect(r.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    assert!(got.is_empty() || got == [5, 0xff], "{got:?}");
    // Garbage after a valid greeting: general failure.
    let (_, rep) = socks_connect(r.addr, &[5, 1, 7, 1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(rep, 1);
    // Still serving, and early data sent with the request is relayed.
    let mut req = connect_req(echo);
    req.extend_from_slice(b"early");
    let (mut s, rep) = socks_connect(r.addr, &req);
    assert_eq!(rep, 0);
    let mut b = [0u8; 5];
    s.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"early");
    let snap = r.stats.snapshot();
    assert_eq!(snap.errors["unsupported_command"], 2);
    assert_eq!(snap.errors["resolve_failed"], 1);
    assert_eq!(snap.errors["connect_failed"], 1);
}

#[test]
fn two_hundred_concurrent_transfers_are_byte_exact() {
    let echo = echo_server();
    let r3 = start(Settings::default());
    let r1 = start(Settings { next: vec![next(&r3)], ..Default::default() });
    let relay = r1.addr;
    let handles: Vec<_> = (0..200u64)
        .map(|i| {
            std::thread::spawn(move || {
                let msg = body(64 * 1024 + (i as usize) * 97, 100 + i);
                let (s, rep) = socks_connect(relay, &connect_req(echo));
                assert_eq!(rep, 0);
                let mut w = s.try_clone().unwrap();
                let m2 = msg.clone();
                let writer = std::thread::spawn(move || {
                    w.write_all(&m2).unwrap();
                    w.shutdown(Shutdown::Write).unwrap();
                });
                let mut got = Vec::new();
                let mut s = s;
                s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
                s.read_to_end(&mut got).unwrap();
                writer.join().unwrap();
                got == msg
            })
        })
        .collect();
    let ok = handles.into_iter().map(|h| h.join().expect("client thread")).filter(|&b| b).count();
    assert_eq!(ok, 200);
    let s = r1.stats.snapshot();
    assert_eq!(s.connections_total, 200);
    assert_eq!(s.bytes_up, s.bytes_down);
}

#[test]
fn connection_limit_queues_extra_clients() {
    let echo = echo_server();
    let r = start(Settings { max_conns: Some(1), ..Default::default() });
    let (mut a, rep) = socks_connect(r.addr, &connect_req(echo));
    assert_eq!(rep, 0);
    // A second client is not served while the first holds the only slot.
    let mut b = TcpStream::connect(r.addr).unwrap();
    b.set_read_timeout(Some(Duration::from_millis(400))).unwrap();
    b.write_all(&[5, 1, 0]).unwrap();
    let mut m = [0u8; 2];
    let e = b.read_exact(&mut m).expect_err("must wait for a slot");
    assert!(matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut), "{e}");
    // Freeing the slot lets it in.
    a.shutdown(Shutdown::Write).unwrap();
    let mut sink = Vec::new();
    a.read_to_end(&mut sink).unwrap();
    drop(a);
    b.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    b.read_exact(&mut m).unwrap();
    assert_eq!(m, [5, 0]);
}

#[test]
fn idle_timeout_counts_both_directions() {
    // Traffic only from server to client keeps the connection alive.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        for _ in 0..8 {
            if s.write_all(b"tick").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(150));
        }
        // Then silence: the relay must close after its idle timeout.
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
    });
    let r = start(Settings { idle_timeout: Some(Duration::from_millis(600)), ..Default::default() });
    let (mut s, rep) = socks_connect(r.addr, &connect_req(server));
    assert_eq!(rep, 0);
    let mut got = Vec::new();
    s.read_to_end(&mut got).expect("closed by the idle timeout");
    assert_eq!(got, b"tick".repeat(8), "all ticks arrive although the client never sent a byte");
    assert_eq!(r.stats.errors_of(Err::IdleTimeout), 1);
}

#[test]
fn ipv6_targets_and_ipv6_listener() {
    // Echo on [::1], relay listening on [::1], CONNECT with an IPv6 address.
    let l = TcpListener::bind("[::1]:0").expect("IPv6 loopback must be available");
    let echo = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut b = [0u8; 4];
        s.read_exact(&mut b).unwrap();
        s.write_all(&b).unwrap();
    });
    let r = start(Settings { listen: Some("[::1]:0".parse().unwrap()), ..Default::default() });
    assert!(r.addr.is_ipv6());
    let SocketAddr::V6(a) = echo else { unreachable!() };
    let mut req = vec![5, 1, 0, 4];
    req.extend_from_slice(&a.ip().octets());
    req.extend_from_slice(&a.port().to_be_bytes());
    let mut s = TcpStream::connect(r.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&[5, 1, 0]).unwrap();
    let mut m = [0u8; 2];
    s.read_exact(&mut m).unwrap();
    s.write_all(&req).unwrap();
    // The bound address of an IPv6 upstream is IPv6: 4 + 16 + 2 bytes.
    let mut rep = [0u8; 22];
    s.read_exact(&mut rep).unwrap();
    assert_eq!((rep[1], rep[3]), (0, 4));
    s.write_all(b"ping").unwrap();
    let mut b = [0u8; 4];
    s.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"ping");
}

#[test]
fn a_hop_failure_is_reported_with_the_hop_reply_code() {
    let echo = echo_server();
    // The last hop denies everything on the echo port; the first only chains.
    let r2 = start(Settings {
        deny: vec![Rule::parse(Action::Deny, &format!("any:{}", echo.port())).unwrap()],
        ..Default::default()
    });
    let r1 = start(Settings { next: vec![next(&r2)], ..Default::default() });
    assert_eq!(socks_connect(r1.addr, &connect_req(echo)).1, 2);
    // Names travel unresolved through the chain; the last hop answers 4.
    assert_eq!(socks_connect(r1.addr, &domain_req(1, "nothing.invalid", 80)).1, 4);
    assert_eq!(r1.stats.errors_of(Err::ChainFailed), 2);
    assert_eq!(r2.stats.errors_of(Err::ResolveFailed), 1);
    // A dead first hop: refused (5), and the relay keeps serving.
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let r0 = start(Settings { next: vec![hop(&format!("socks5://{dead}"))], ..Default::default() });
    assert_eq!(socks_connect(r0.addr, &connect_req(echo)).1, 5);
    assert_eq!(socks_connect(r0.addr, &connect_req(echo)).1, 5);
}

#[test]
fn upstream_sockets_get_the_per_hop_tuning() {
    let echo = echo_server();
    let r = start(Settings {
        cc: Some("reno".into()),
        pace: Some(Some(tcpaccel_core::units::Rate(80_000_000))),
        notsent_lowat: Some(tcpaccel_core::units::Bytes(64_000)),
        ..Default::default()
    });
    let (mut s, rep) = socks_connect(r.addr, &connect_req(echo));
    assert_eq!(rep, 0);
    s.write_all(b"ping").unwrap();
    let mut b = [0u8; 4];
    s.read_exact(&mut b).unwrap();
    // The relay's upstream socket is the one connected to the echo port.
    let out = Command::new("ss")
        .args(["-tinH", "state", "established", &format!("( dport = :{} )", echo.port())])
        .output()
        .expect("run ss (iproute2)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("reno"), "congestion control not applied: {text}");
    // ss prints "pacing_rate CURRENT/MAX" in bit/s once a cap is set; the
    // cap is the payload of 80 Mbit/s on the wire, as static:80mbit paces.
    let wire = tcpaccel_core::units::Rate(80_000_000);
    let cap = tcpaccel_core::pacing::Framing::ETHERNET_1500_TS.payload_bytes_per_sec(wire) * 8;
    assert!(text.contains(&format!("/{cap}bps")), "pacing cap {cap} bit/s not applied: {text}");
}

#[test]
fn chain_hops_can_require_authentication() {
    let echo = echo_server();
    let r2 = start(Settings { auth: vec!["hop:pw".parse().unwrap()], ..Default::default() });
    let good =
        start(Settings { next: vec![hop(&format!("socks5://hop:pw@{}", r2.addr))], ..Default::default() });
    let (mut s, rep) = socks_connect(good.addr, &connect_req(echo));
    assert_eq!(rep, 0);
    s.write_all(b"auth").unwrap();
    let mut b = [0u8; 4];
    s.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"auth");
    let bad =
        start(Settings { next: vec![hop(&format!("socks5://hop:wrong@{}", r2.addr))], ..Default::default() });
    assert_eq!(socks_connect(bad.addr, &connect_req(echo)).1, 1);
    // The hop counts its failure after answering: wait for it. The bad
    // relay's warm connections (two) fail the same way, once: the pool does
    // not retry a hop that refused it.
    let t0 = std::time::Instant::now();
    while r2.stats.errors_of(Err::AuthFailed) == 0 && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(socks_connect(bad.addr, &connect_req(echo)).1, 1);
    std::thread::sleep(Duration::from_millis(200));
    let failed = r2.stats.errors_of(Err::AuthFailed);
    assert!((2..=4).contains(&failed), "{failed}");
}
