//! Chain set-up (issue 29): pipelined handshakes between tcpaccel relays,
//! the step-by-step fallback toward hops that are not ours, warm
//! connections to the next hop, and the SOCKS reply codes of failed hops.
//! Loopback only, no root, short.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tcpaccel_relay::acl::{Action, Rule};
use tcpaccel_relay::config::Hop;
use tcpaccel_relay::stats::ErrorKind as Err;
use tcpaccel_relay::{Config, Settings};

mod common;
use common::{config, connect_req, echo_server, socks_connect, start, start_cfg, TestRelay};

/// A hop from its URL.
fn hop_url(url: &str) -> Hop {
    Hop::parse(url).expect("hop")
}

fn ours(r: &TestRelay) -> String {
    format!("tcpaccel+socks5://{}", r.addr)
}

fn stream(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    s
}

/// Reads one CONNECT reply (IPv4 bound address): code and bound address.
fn read_reply(s: &mut TcpStream) -> (u8, SocketAddr) {
    let mut r = [0u8; 10];
    s.read_exact(&mut r).expect("reply");
    assert_eq!((r[0], r[2], r[3]), (5, 0, 1), "{r:?}");
    let ip = std::net::Ipv4Addr::new(r[4], r[5], r[6], r[7]);
    (r[1], SocketAddr::from((ip, u16::from_be_bytes([r[8], r[9]]))))
}

fn echo_back(s: &mut TcpStream, msg: &[u8]) {
    s.write_all(msg).expect("write");
    let mut got = vec![0u8; msg.len()];
    s.read_exact(&mut got).expect("echo");
    assert_eq!(got, msg);
}

fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(t0.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_server_accepts_pipelined_and_step_by_step_handshakes() {
    let echo = echo_server();
    let r = start(Settings::default());
    // Greeting, CONNECT and the first data in one write.
    let mut s = stream(r.addr);
    let mut all = vec![5, 1, 0];
    all.extend_from_slice(&connect_req(echo));
    all.extend_from_slice(b"early data");
    s.write_all(&all).unwrap();
    let mut m = [0u8; 2];
    s.read_exact(&mut m).unwrap();
    assert_eq!(m, [5, 0]);
    assert_eq!(read_reply(&mut s).0, 0);
    let mut got = [0u8; 10];
    s.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"early data", "bytes after the request are forwarded, not dropped");
    echo_back(&mut s, b"and more");
    // Step by step, each message split over two writes.
    let mut s = stream(r.addr);
    for part in [&[5u8, 1][..], &[0]] {
        s.write_all(part).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    s.read_exact(&mut m).unwrap();
    assert_eq!(m, [5, 0]);
    let req = connect_req(echo);
    s.write_all(&req[..4]).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    s.write_all(&req[4..]).unwrap();
    assert_eq!(read_reply(&mut s).0, 0);
    echo_back(&mut s, b"step by step");
    // With authentication: greeting, credentials, CONNECT and data at once.
    let r = start(Settings { auth: vec!["alice:wonder".parse().unwrap()], ..Default::default() });
    let mut s = stream(r.addr);
    let mut all = vec![5, 1, 2, 1, 5];
    all.extend_from_slice(b"alice");
    all.push(6);
    all.extend_from_slice(b"wonder");
    all.extend_from_slice(&connect_req(echo));
    all.extend_from_slice(b"x");
    s.write_all(&all).unwrap();
    let mut four = [0u8; 4];
    s.read_exact(&mut four).unwrap();
    assert_eq!(four, [5, 2, 1, 0]);
    assert_eq!(read_reply(&mut s).0, 0);
    let mut x = [0u8; 1];
    s.read_exact(&mut x).unwrap();
    assert_eq!(&x, b"x");
}

/// What the strict hop saw on one connection.
#[derive(Debug, Default, Clone)]
struct Seen {
    /// Bytes that arrived before the hop had answered what came before them.
    early: bool,
    requests: usize,
}

/// A minimal SOCKS5 server that is not ours: no authentication, CONNECT to
/// IPv4 only, and strictly one message per turn — bytes that arrive before
/// it answered the previous message are a protocol violation (recorded, and
/// the connection closed, as a server reading with exact reads and a
/// timeout would lose them). Connected, it echoes instead of relaying.
fn strict_hop() -> (SocketAddr, Arc<Mutex<Vec<Seen>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let log: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let log2 = log.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let log = log2.clone();
            let i = {
                let mut l = log.lock().unwrap();
                l.push(Seen::default());
                l.len() - 1
            };
            std::thread::spawn(move || {
                let note = |f: &dyn Fn(&mut Seen)| f(&mut log.lock().unwrap()[i]);
                // Nothing more than `n` bytes may be waiting after a short
                // pause: None if the peer closed, Some(Err) if more came.
                let exact = |s: &mut TcpStream, n: usize| -> Option<Result<Vec<u8>, ()>> {
                    let mut b = vec![0u8; n];
                    s.read_exact(&mut b).ok()?;
                    std::thread::sleep(Duration::from_millis(30));
                    s.set_nonblocking(true).ok()?;
                    let mut extra = [0u8; 64];
                    let more = matches!(s.read(&mut extra), Ok(k) if k > 0);
                    s.set_nonblocking(false).ok()?;
                    Some(if more { Err(()) } else { Ok(b) })
                };
                let g = match exact(&mut s, 3) {
                    Some(Ok(g)) => g,
                    Some(Err(())) => return note(&|x| x.early = true),
                    None => return,
                };
                if g != [5, 1, 0] {
                    return;
                }
                let _ = s.write_all(&[5, 0]);
                let req = match exact(&mut s, 10) {
                    Some(Ok(r)) => r,
                    Some(Err(())) => return note(&|x| x.early = true),
                    None => return,
                };
                if req[..4] != [5, 1, 0, 1] {
                    return;
                }
                note(&|x| x.requests += 1);
                let _ = s.write_all(&[5, 0, 0, 1, 127, 0, 0, 1, 0, 0]);
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
    (addr, log)
}

#[test]
fn a_hop_that_is_not_ours_gets_the_step_by_step_handshake() {
    let (hop, seen) = strict_hop();
    let any = "127.0.0.1:9".parse().unwrap();
    // Plain socks5://: step by step, with or without a warm connection.
    let mut cold = config(Settings { next: vec![hop_url(&format!("socks5://{hop}"))], ..Default::default() });
    cold.pool_size = 0;
    let warm = config(Settings { next: vec![hop_url(&format!("socks5://{hop}"))], ..Default::default() });
    for (cfg, pooled) in [(cold, 0), (warm, 2)] {
        let before = seen.lock().unwrap().len();
        let r = start_cfg(cfg);
        // Let the pool fill (greeted after the hop's 30 ms pause).
        wait_for("warm connections", Duration::from_secs(5), || {
            seen.lock().unwrap().len() >= before + pooled
        });
        std::thread::sleep(Duration::from_millis(200));
        let (mut s, rep) = socks_connect(r.addr, &connect_req(any));
        assert_eq!(rep, 0);
        echo_back(&mut s, b"through a strict hop");
    }
    let log = seen.lock().unwrap().clone();
    assert!(log.iter().all(|x| !x.early), "{log:?}");
    assert!(log.iter().all(|x| x.requests <= 1), "{log:?}");
    assert_eq!(log.iter().map(|x| x.requests).sum::<usize>(), 2, "{log:?}");
    drop(log);
    // The same hop marked as ours gets everything at once (and fails here):
    // the marker, not luck, is what keeps the plain hops step by step.
    let mut cfg =
        config(Settings { next: vec![hop_url(&format!("tcpaccel+socks5://{hop}"))], ..Default::default() });
    cfg.pool_size = 0;
    let r = start_cfg(cfg);
    let (_s, rep) = socks_connect(r.addr, &connect_req(any));
    assert_eq!(rep, 1);
    wait_for("the hop to record the early bytes", Duration::from_secs(5), || {
        seen.lock().unwrap().iter().any(|x| x.early)
    });
}

#[test]
fn pipelined_chains_of_our_relays_carry_data_byte_exact() {
    let echo = echo_server();
    let r4 = start(Settings { auth: vec!["u:p".parse().unwrap()], ..Default::default() });
    let r3 = start(Settings::default());
    // r2 negotiates through r3 and r4 itself, all in one write.
    let r2 = start(Settings {
        next: vec![hop_url(&ours(&r3)), hop_url(&format!("tcpaccel+socks5://u:p@{}", r4.addr))],
        ..Default::default()
    });
    let r1 = start(Settings { next: vec![hop_url(&ours(&r2))], ..Default::default() });
    for i in 0..3u8 {
        let (mut s, rep) = socks_connect(r1.addr, &connect_req(echo));
        assert_eq!(rep, 0);
        let msg: Vec<u8> = (0..50_000u32).map(|k| (k as u8) ^ i).collect();
        let w = {
            let mut s2 = s.try_clone().unwrap();
            let msg = msg.clone();
            std::thread::spawn(move || s2.write_all(&msg).unwrap())
        };
        let mut got = vec![0u8; msg.len()];
        s.read_exact(&mut got).unwrap();
        w.join().unwrap();
        assert!(got == msg, "session {i}: echo differs");
    }
    assert_eq!(r1.stats.snapshot().connections_total, 3);
    assert_eq!(r4.stats.errors_of(Err::AuthFailed), 0);
}

#[test]
fn warm_connections_are_never_shared_between_sessions() {
    let (hop, seen) = strict_hop();
    let r = start(Settings { next: vec![hop_url(&format!("socks5://{hop}"))], ..Default::default() });
    // Let the pool fill, then open sessions at once, holding each open.
    wait_for("warm connections", Duration::from_secs(5), || seen.lock().unwrap().len() >= 2);
    let any = "127.0.0.1:9".parse().unwrap();
    let mut held = Vec::new();
    for i in 0..4u8 {
        let mut s = stream(r.addr);
        s.write_all(&[5, 1, 0]).unwrap();
        let mut m = [0u8; 2];
        s.read_exact(&mut m).unwrap();
        s.write_all(&connect_req(any)).unwrap();
        let (rep, bound) = read_reply(&mut s);
        assert_eq!(rep, 0);
        echo_back(&mut s, &[i; 100]);
        held.push((s, bound, i));
    }
    // The bound address is the relay's socket toward the hop: one each.
    let mut ports: Vec<u16> = held.iter().map(|(_, b, _)| b.port()).collect();
    ports.sort();
    ports.dedup();
    assert_eq!(ports.len(), 4, "{held:?}");
    // Every session still talks to its own connection.
    for (s, _, i) in &mut held {
        echo_back(s, &[*i ^ 0xff; 1000]);
    }
    let log = seen.lock().unwrap().clone();
    assert!(log.iter().all(|x| x.requests <= 1 && !x.early), "{log:?}");
    assert_eq!(log.iter().map(|x| x.requests).sum::<usize>(), 4, "{log:?}");
}

#[test]
fn idle_warm_connections_expire() {
    // A hop that greets and then records when each connection ends.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let hop = l.local_addr().unwrap();
    let ended: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let e2 = ended.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let ended = e2.clone();
            std::thread::spawn(move || {
                let t0 = Instant::now();
                let mut g = [0u8; 3];
                if s.read_exact(&mut g).is_ok() && s.write_all(&[5, 0]).is_ok() {
                    let mut b = [0u8; 64];
                    while matches!(s.read(&mut b), Ok(n) if n > 0) {}
                }
                ended.lock().unwrap().push(t0.elapsed());
            });
        }
    });
    let _r = start(Settings {
        next: vec![hop_url(&format!("socks5://{hop}"))],
        pool_size: Some(2),
        pool_idle: Some(Duration::from_millis(300)),
        ..Default::default()
    });
    // Closed by the relay after about 300 ms idle: once replaced, which is
    // at the last check (every 75 ms) before they expire, or at expiry.
    wait_for("idle connections to be closed", Duration::from_secs(5), || ended.lock().unwrap().len() >= 2);
    let e = ended.lock().unwrap().clone();
    assert!(e.iter().all(|d| *d >= Duration::from_millis(200) && *d < Duration::from_secs(3)), "{e:?}");
}

#[test]
fn a_warm_connection_the_hop_closed_is_replaced_by_a_fresh_one() {
    let echo = echo_server();
    // The hop gives up on handshakes after 300 ms; the pool keeps them 3 s.
    let r2 = start(Settings { handshake_timeout: Some(Duration::from_millis(300)), ..Default::default() });
    let r1 = start(Settings { next: vec![hop_url(&ours(&r2))], ..Default::default() });
    wait_for("the hop to time out the warm connections", Duration::from_secs(5), || {
        r2.stats.errors_of(Err::HandshakeTimeout) >= 2
    });
    let (mut s, rep) = socks_connect(r1.addr, &connect_req(echo));
    assert_eq!(rep, 0);
    echo_back(&mut s, b"fresh");
}

#[test]
fn failed_hops_give_the_client_the_same_reply_codes() {
    let echo = echo_server();
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let r3 = start(Settings {
        deny: vec![Rule::parse(Action::Deny, &format!("any:{}", echo.port())).unwrap()],
        ..Default::default()
    });
    let r2 = start(Settings::default());
    let locked = start(Settings { auth: vec!["u:p".parse().unwrap()], ..Default::default() });
    for pool in [0, 2] {
        for marker in ["socks5://", "tcpaccel+socks5://"] {
            let chain = |next: Vec<String>| {
                let mut c = config(Settings {
                    next: next.iter().map(|u| hop_url(u)).collect(),
                    ..Default::default()
                });
                c.pool_size = pool;
                start_cfg(c)
            };
            let ctx = format!("pool {pool}, {marker}");
            // Denied by the last hop of a two-hop chain: 2.
            let r1 = chain(vec![format!("{marker}{}", r2.addr), format!("{marker}{}", r3.addr)]);
            assert_eq!(socks_connect(r1.addr, &connect_req(echo)).1, 2, "{ctx}");
            // The target refuses: 5; a name that never resolves: 4.
            assert_eq!(socks_connect(r1.addr, &connect_req(closed)).1, 5, "{ctx}");
            let r1 = chain(vec![format!("{marker}{}", r2.addr)]);
            assert_eq!(socks_connect(r1.addr, &connect_req(closed)).1, 5, "{ctx}");
            let mut name = vec![5, 1, 0, 3, 15];
            name.extend_from_slice(b"nothing.invalid");
            name.extend_from_slice(&[0, 80]);
            assert_eq!(socks_connect(r1.addr, &name).1, 4, "{ctx}");
            // A dead first hop: 5; wrong credentials: 1.
            let r1 = chain(vec![format!("{marker}{closed}")]);
            assert_eq!(socks_connect(r1.addr, &connect_req(echo)).1, 5, "{ctx}");
            let r1 = chain(vec![format!("{marker}u:wrong@{}", locked.addr)]);
            assert_eq!(socks_connect(r1.addr, &connect_req(echo)).1, 1, "{ctx}");
            assert_eq!(r1.stats.errors_of(Err::ChainFailed), 1, "{ctx}");
        }
    }
}

/// A hop that is ours in name (`tcpaccel+socks5://`): it takes greeting and
/// CONNECT, then holds its answer until `want` bytes of data have arrived
/// behind the request, or `patience` has passed. It records whether the
/// data came before its answer, answers success and echoes.
fn patient_hop(want: usize, patience: Duration) -> (SocketAddr, Arc<Mutex<Vec<bool>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let log: Arc<Mutex<Vec<bool>>> = Arc::default();
    let log2 = log.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let log = log2.clone();
            std::thread::spawn(move || {
                let mut head = [0u8; 3 + 10];
                if s.read_exact(&mut head).is_err() || head[..3] != [5, 1, 0] || head[3..7] != [5, 1, 0, 1] {
                    return;
                }
                s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
                let t0 = Instant::now();
                let mut data = Vec::new();
                let mut b = [0u8; 4096];
                while data.len() < want && t0.elapsed() < patience {
                    match s.read(&mut b) {
                        Ok(0) => return,
                        Ok(n) => data.extend_from_slice(&b[..n]),
                        Err(_) => {}
                    }
                }
                log.lock().unwrap().push(data.len() >= want);
                s.set_read_timeout(None).unwrap();
                let mut answer = vec![5, 0];
                answer.extend_from_slice(&[5, 0, 0, 1, 127, 0, 0, 1, 0, 0]);
                answer.extend_from_slice(&data);
                if s.write_all(&answer).is_err() {
                    return;
                }
                while let Ok(n) = s.read(&mut b) {
                    if n == 0 || s.write_all(&b[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    (addr, log)
}

fn with_early_reply(next: Vec<String>, early: bool) -> TestRelay {
    start(Settings {
        next: next.iter().map(|u| hop_url(u)).collect(),
        early_reply: Some(early),
        ..Default::default()
    })
}

/// A relay of ours in front of the patient hop, with no warm connections
/// (the hop would hold their greetings unanswered).
fn before_patient_hop(hop: SocketAddr) -> TestRelay {
    start(Settings {
        next: vec![hop_url(&format!("tcpaccel+socks5://{hop}"))],
        pool_size: Some(0),
        ..Default::default()
    })
}

/// Warm connections to a relay of ours show as its handshakes in progress.
fn wait_warm(hop: &TestRelay, n: u64) {
    wait_for("warm connections", Duration::from_secs(5), || {
        hop.stats.handshakes_active.load(std::sync::atomic::Ordering::Relaxed) >= n
    });
}

#[test]
fn early_reply_sends_the_clients_data_right_behind_the_connects() {
    let (hop, saw_data_first) = patient_hop(5, Duration::from_secs(3));
    let any: SocketAddr = "127.0.0.1:9".parse().unwrap();
    // r2 is exact (no early reply) and forwards what follows the request
    // behind its own pipelined CONNECT, before the hop has answered.
    let r2 = before_patient_hop(hop);
    let r1 = with_early_reply(vec![ours(&r2)], true);
    wait_warm(&r2, 2);
    let (mut s, rep) = socks_connect(r1.addr, &connect_req(any));
    assert_eq!(rep, 0, "answered before the hop, which waits for the data, has answered");
    echo_back(&mut s, b"hello");
    echo_back(&mut s, b"and the rest, relayed as usual");
    assert_eq!(*saw_data_first.lock().unwrap(), vec![true]);
    assert_eq!(r1.stats.snapshot().early_replies, 1);
    assert_eq!(r2.stats.snapshot().early_replies, 0);
}

#[test]
fn without_early_reply_the_client_is_answered_once_the_chain_is_up() {
    let (hop, saw_data_first) = patient_hop(5, Duration::from_millis(500));
    let any: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let r2 = before_patient_hop(hop);
    // The default: off.
    let r1 = start(Settings { next: vec![hop_url(&ours(&r2))], ..Default::default() });
    wait_warm(&r2, 2);
    let (mut s, rep) = socks_connect(r1.addr, &connect_req(any));
    assert_eq!(rep, 0);
    echo_back(&mut s, b"hello");
    assert_eq!(*saw_data_first.lock().unwrap(), vec![false], "the hop answered before any data came");
    assert_eq!(r1.stats.snapshot().early_replies, 0);
}

#[test]
fn a_chain_failing_after_an_early_reply_resets_the_client_and_counts_the_code() {
    let echo = echo_server();
    let denies = Settings {
        deny: vec![Rule::parse(Action::Deny, &format!("any:{}", echo.port())).unwrap()],
        ..Default::default()
    };
    let r2 = start(denies);
    let r1 = with_early_reply(vec![ours(&r2)], true);
    wait_warm(&r2, 2);
    let (mut s, rep) = socks_connect(r1.addr, &connect_req(echo));
    assert_eq!(rep, 0, "answered early");
    let mut b = [0u8; 16];
    let e = s.read(&mut b).expect_err("the chain failed: the connection must not end cleanly");
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}");
    // Counted with the code the client would have had (2: not allowed).
    wait_for("the failure to be counted", Duration::from_secs(5), || {
        r1.stats.early_reply_failures_of(2) == 1
    });
    let snap = r1.stats.snapshot();
    assert_eq!((snap.early_replies, snap.errors["chain_failed"]), (1, 1));
    assert_eq!(snap.early_reply_failures.values().sum::<u64>(), 1);
}

#[test]
fn early_reply_keeps_the_exact_codes_where_it_cannot_apply() {
    let echo = echo_server();
    let denies = Settings {
        deny: vec![Rule::parse(Action::Deny, &format!("any:{}", echo.port())).unwrap()],
        ..Default::default()
    };
    let r2 = start(denies);
    // A hop not marked as ours, and no warm connection: the client gets 2.
    let plain = with_early_reply(vec![format!("socks5://{}", r2.addr)], true);
    let cfg = config(Settings {
        next: vec![hop_url(&ours(&r2))],
        early_reply: Some(true),
        pool_size: Some(0),
        ..Default::default()
    });
    assert_eq!(cfg.pool_size, 0);
    let cold = start_cfg(cfg);
    wait_warm(&r2, 2);
    for r in [&plain, &cold] {
        assert_eq!(socks_connect(r.addr, &connect_req(echo)).1, 2);
        let snap = r.stats.snapshot();
        assert_eq!(snap.early_replies, 0);
        assert_eq!(snap.early_reply_failures.values().sum::<u64>(), 0);
    }
}

#[test]
fn pool_size_zero_opens_no_warm_connections() {
    let (hop, seen) = strict_hop();
    let set: Settings = toml::from_str(&format!("next = [\"socks5://{hop}\"]\npool_size = 0")).unwrap();
    let r = start(set);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(seen.lock().unwrap().len(), 0, "no connection before a client comes");
    let any = "127.0.0.1:9".parse().unwrap();
    let (mut s, rep) = socks_connect(r.addr, &connect_req(any));
    assert_eq!(rep, 0);
    echo_back(&mut s, b"cold");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(seen.lock().unwrap().len(), 1, "nor after one");
}

#[test]
fn pool_and_early_reply_keys_parse_and_refuse_bad_values() {
    let ok: Settings = toml::from_str("pool_size = 8\npool_idle = \"750ms\"\nearly_reply = true").unwrap();
    let c = Config::from_settings(&ok).unwrap();
    assert_eq!((c.pool_size, c.pool_idle, c.early_reply), (8, Duration::from_millis(750), true));
    let d = Config::from_settings(&Settings::default()).unwrap();
    assert_eq!((d.pool_size, d.pool_idle, d.early_reply), (2, Duration::from_secs(3), false));
    let most: Settings = toml::from_str("pool_size = 32\npool_idle = \"100ms\"").unwrap();
    assert_eq!(Config::from_settings(&most).unwrap().pool_size, 32);
    for (text, needle) in [
        ("pool_size = 33", "pool_size"),
        ("pool_size = -1", "pool_size"),
        ("pool_size = \"two\"", "pool_size"),
        ("pool_idle = \"50ms\"", "pool_idle"),
        ("pool_idle = \"2h\"", "pool_idle"),
        ("pool_idle = 3", "pool_idle"),
        ("pool_idle = \"3\"", "missing unit"),
        ("early_reply = \"yes\"", "early_reply"),
    ] {
        let e = toml::from_str::<Settings>(text)
            .map_err(|e| e.to_string())
            .and_then(|s| Config::from_settings(&s).map_err(|e| e.to_string()))
            .err()
            .unwrap_or_else(|| panic!("{text} accepted"));
        assert!(e.contains(needle), "{text}: {e}");
    }
}

/// Sessions that outlast the idle expiry still find a warm connection:
/// expired ones are replaced while clients keep coming. (Early replies
/// are given only over a warm connection, so they count warm takes.)
#[test]
fn the_pool_stays_warm_across_sessions_longer_than_its_idle_expiry() {
    let echo = echo_server();
    let r2 = start(Settings::default());
    let r1 = start(Settings {
        next: vec![hop_url(&ours(&r2))],
        early_reply: Some(true),
        pool_idle: Some(Duration::from_millis(200)),
        ..Default::default()
    });
    wait_warm(&r2, 2);
    for i in 1..=3u64 {
        let (mut s, rep) = socks_connect(r1.addr, &connect_req(echo));
        assert_eq!(rep, 0);
        // Held for several idle expiries.
        std::thread::sleep(Duration::from_millis(700));
        echo_back(&mut s, b"still here");
        drop(s);
        assert_eq!(r1.stats.snapshot().early_replies, i, "session {i} went over a warm connection");
    }
}

/// Data a client sends right behind its CONNECT travels ahead to our next
/// relay; when that relay refuses, the client still gets the exact code.
#[test]
fn a_client_pipelining_data_still_gets_the_exact_code_when_the_chain_fails() {
    let echo = echo_server();
    let denies = Settings {
        deny: vec![Rule::parse(Action::Deny, &format!("any:{}", echo.port())).unwrap()],
        ..Default::default()
    };
    let r2 = start(denies);
    for pool in [0, 2] {
        let r1 =
            start(Settings { next: vec![hop_url(&ours(&r2))], pool_size: Some(pool), ..Default::default() });
        if pool > 0 {
            std::thread::sleep(Duration::from_millis(200));
        }
        let mut s = stream(r1.addr);
        let mut all = vec![5, 1, 0];
        all.extend_from_slice(&connect_req(echo));
        all.extend_from_slice(&[7u8; 3000]);
        s.write_all(&all).unwrap();
        let mut m = [0u8; 2];
        s.read_exact(&mut m).unwrap();
        assert_eq!(m, [5, 0]);
        assert_eq!(read_reply(&mut s).0, 2, "pool {pool}");
        assert_eq!(r1.stats.errors_of(Err::ChainFailed), 1, "pool {pool}");
    }
}
