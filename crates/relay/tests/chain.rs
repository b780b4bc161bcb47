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
use tcpaccel_relay::{Config, Relay, Settings, Stats};

mod common;
use common::{connect_req, echo_server, socks_connect};

struct TestRelay {
    _rt: tokio::runtime::Runtime,
    addr: SocketAddr,
    stats: Arc<Stats>,
}

fn config(raw: Settings) -> Config {
    let raw = Settings { listen: raw.listen.or(Some("127.0.0.1:0".parse().unwrap())), ..raw };
    Config::from_settings(&raw).expect("config")
}

fn start_cfg(cfg: Config) -> TestRelay {
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let relay = rt.block_on(Relay::bind(cfg)).expect("bind relay");
    let addr = *relay.local_addrs().last().expect("a listener");
    let stats = relay.stats();
    rt.spawn(relay.run(std::future::pending()));
    TestRelay { _rt: rt, addr, stats }
}

fn start(raw: Settings) -> TestRelay {
    start_cfg(config(raw))
}

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
    let mut cfg = config(Settings { next: vec![hop_url(&format!("socks5://{hop}"))], ..Default::default() });
    cfg.pool_size = 2;
    cfg.pool_idle = Duration::from_millis(300);
    let _r = start_cfg(cfg);
    // Closed by the relay after about 300 ms idle (replaced while the pool
    // is fresh, so more follow).
    wait_for("idle connections to be closed", Duration::from_secs(5), || ended.lock().unwrap().len() >= 2);
    let e = ended.lock().unwrap().clone();
    assert!(e.iter().all(|d| *d >= Duration::from_millis(250) && *d < Duration::from_secs(3)), "{e:?}");
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
