//! Connections still in the SOCKS5 handshake must not starve the others
//! (issue 14 item 7): the listen backlog is the system's, idle handshakes
//! have their own smaller budget and a first-byte deadline, and one source
//! cannot push out the handshakes of another. Loopback only, a few seconds.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tcpaccel_relay::Settings;

mod common;
use common::{connect_req, echo_server, start};

/// Connects from `from` (any 127/8 address) to `to`.
fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    sock.bind(format!("{from}:0").parse().expect("source")).expect("bind source");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    let s = rt.block_on(sock.connect(to)).expect("connect");
    let s = s.into_std().expect("std");
    s.set_nonblocking(false).expect("blocking");
    s
}

/// The rest of a SOCKS5 handshake after `sent` greeting bytes; returns the
/// CONNECT reply code and checks one byte is echoed through.
fn finish_socks(s: &mut TcpStream, sent: usize, target: SocketAddr) -> u8 {
    s.write_all(&[5, 1, 0][sent..]).expect("greeting");
    let mut m = [0u8; 2];
    s.read_exact(&mut m).expect("method reply");
    assert_eq!(m, [5, 0]);
    s.write_all(&connect_req(target)).expect("request");
    let mut rep = [0u8; 10];
    s.read_exact(&mut rep).expect("CONNECT reply");
    if rep[1] == 0 {
        s.write_all(b"z").expect("data");
        let mut b = [0u8; 1];
        s.read_exact(&mut b).expect("echo");
        assert_eq!(&b, b"z");
    }
    rep[1]
}

/// True if the relay has closed `s` (end of file or reset) within `wait`.
fn closed_within(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).expect("timeout");
    let mut b = [0u8; 16];
    match s.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
    }
}

#[test]
fn idle_handshakes_do_not_starve_a_fresh_client() {
    let echo = echo_server();
    // Twice as many idle handshakes as connection slots, and timeouts far
    // longer than the test: only the handshake budget can let a client in.
    let r = start(Settings {
        max_conns: Some(16),
        handshake_timeout: Some(Duration::from_secs(60)),
        first_byte_timeout: Some(Duration::from_secs(60)),
        ..Default::default()
    });
    let idle: Vec<TcpStream> = (0..32)
        .map(|i| {
            let mut s = TcpStream::connect(r.addr).expect("idle connect");
            if i % 2 == 1 {
                s.write_all(&[5]).expect("one byte");
            }
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    let mut s = TcpStream::connect(r.addr).expect("fresh connect");
    // Far below the 60 s timeouts: a fresh client is admitted at once.
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    assert_eq!(finish_socks(&mut s, 0, echo), 0);
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(5), "fresh client took {took:?}");
    let snap = r.stats.snapshot();
    assert!(snap.errors["handshake_evicted"] >= 1, "{snap:?}");
    drop(idle);
}

#[test]
fn first_byte_timeout_closes_silent_clients_before_the_handshake_timeout() {
    let r = start(Settings {
        first_byte_timeout: Some(Duration::from_millis(300)),
        handshake_timeout: Some(Duration::from_secs(3)),
        ..Default::default()
    });
    let t0 = Instant::now();
    let mut silent = TcpStream::connect(r.addr).expect("connect");
    let mut one = TcpStream::connect(r.addr).expect("connect");
    one.write_all(&[5]).expect("one byte");
    assert!(
        closed_within(&mut silent, Duration::from_secs(2)),
        "silent client still open after 2 s: {:?}",
        r.stats.snapshot()
    );
    assert!(t0.elapsed() >= Duration::from_millis(250));
    // Having sent a byte, the other client has the whole handshake timeout.
    assert!(!closed_within(&mut one, Duration::from_millis(500)), "closed before its handshake timeout");
    assert!(closed_within(&mut one, Duration::from_secs(8)), "never closed by the handshake timeout");
    assert!(t0.elapsed() >= Duration::from_millis(2500), "closed after {:?}", t0.elapsed());
    let snap = r.stats.snapshot();
    assert_eq!(snap.errors["first_byte_timeout"], 1, "{snap:?}");
    assert_eq!(snap.errors["handshake_timeout"], 1, "{snap:?}");
}

#[test]
fn one_source_cannot_push_out_the_handshake_of_another() {
    let echo = echo_server();
    let r = start(Settings {
        max_handshakes: Some(8),
        per_source_handshakes: Some(4),
        first_byte_timeout: Some(Duration::from_secs(60)),
        handshake_timeout: Some(Duration::from_secs(60)),
        ..Default::default()
    });
    // A slow but honest client from 127.0.0.1 starts its handshake first...
    let mut honest = connect_from("127.0.0.1", r.addr);
    honest.write_all(&[5]).expect("first byte");
    honest.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    std::thread::sleep(Duration::from_millis(100));
    // ...then 20 idle handshakes from 127.0.0.2, more than the whole budget,
    // faster than they count as stalled: the source displaces its own oldest.
    let mut flood: Vec<TcpStream> = (0..20).map(|_| connect_from("127.0.0.2", r.addr)).collect();
    std::thread::sleep(Duration::from_millis(300));
    let closed: Vec<bool> = flood.iter_mut().map(|s| closed_within(s, Duration::from_millis(50))).collect();
    assert_eq!(
        closed.iter().filter(|&&c| c).count(),
        13,
        "7 places are left beside the honest one: {closed:?}"
    );
    assert!(closed[..13].iter().all(|&c| c), "the oldest go first: {closed:?}");
    assert_eq!(finish_socks(&mut honest, 1, echo), 0, "the honest handshake was displaced");
    // Once the flood's handshakes are stalled (1 s), a newcomer from that
    // source brings it back to its share of 4, oldest first, even with the
    // budget not full: 7 held, the newcomer in, 4 of the 7 displaced.
    std::thread::sleep(Duration::from_millis(1100));
    let mut late = connect_from("127.0.0.2", r.addr);
    for (i, s) in flood.iter_mut().enumerate().skip(13).take(4) {
        assert!(closed_within(s, Duration::from_secs(2)), "the source's stalled handshake {i} stays");
    }
    for s in &mut flood[17..] {
        assert!(!closed_within(s, Duration::from_millis(100)), "more than the share was displaced");
    }
    assert_eq!(finish_socks(&mut late, 0, echo), 0);
    assert_eq!(r.stats.snapshot().errors["handshake_evicted"], 17);
}

/// The backlog `ss` reports for the listener on `addr` (Send-Q of a listening socket).
fn listen_backlog(addr: SocketAddr) -> u64 {
    let out = Command::new("ss")
        .args(["-Hltn", &format!("sport = :{}", addr.port())])
        .output()
        .expect("run ss (iproute2)");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next().unwrap_or_else(|| panic!("ss shows no listener on {addr}: {text}"));
    line.split_whitespace().nth(2).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("ss line {line:?}"))
}

#[test]
fn the_listen_backlog_is_the_systems() {
    let somaxconn: u64 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .expect("read net.core.somaxconn")
        .trim()
        .parse()
        .expect("somaxconn");
    let r = start(Settings::default());
    assert_eq!(listen_backlog(r.addr), somaxconn);
    let small = start(Settings { backlog: Some(64), ..Default::default() });
    assert_eq!(listen_backlog(small.addr), 64.min(somaxconn));
}

/// Issue 26 item 7: a connection that closes (or resets) before sending a
/// byte — a health check, a port scan — is counted as its own kind, not as
/// a bad request.
#[test]
fn a_connection_closed_before_its_first_byte_is_not_a_bad_request() {
    use tcpaccel_relay::stats::ErrorKind as K;
    let r = start(Settings::default());
    for _ in 0..3 {
        drop(TcpStream::connect(r.addr).expect("connect"));
    }
    // And one real bad request, to tell the two apart.
    let mut bad = TcpStream::connect(r.addr).expect("connect");
    bad.write_all(&[4, 1, 0, 80]).expect("write");
    let t0 = Instant::now();
    while r.stats.errors_of(K::ClosedBeforeRequest) + r.stats.errors_of(K::BadRequest) < 4 {
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", r.stats.snapshot().errors);
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(r.stats.errors_of(K::ClosedBeforeRequest), 3, "{:?}", r.stats.snapshot().errors);
    assert_eq!(r.stats.errors_of(K::BadRequest), 1, "{:?}", r.stats.snapshot().errors);
}

/// A reconnecting flood until `stop`: two threads, each connecting from
/// `source(thread, i)` (greeting first if `greet`), holding its last 40
/// connections and opening the next every 2 ms — a displaced one is
/// replaced at once.
fn flood(
    addr: SocketAddr,
    stop: &Arc<std::sync::atomic::AtomicBool>,
    source: fn(u8, u32) -> String,
    greet: bool,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..2u8)
        .map(|t| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut held = std::collections::VecDeque::new();
                let mut i = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut s = connect_from(&source(t, i), addr);
                    if greet {
                        let _ = s.write_all(&[5, 1, 0]);
                    }
                    held.push_back(s);
                    if held.len() > 40 {
                        held.pop_front();
                    }
                    i += 1;
                    std::thread::sleep(Duration::from_millis(2));
                }
            })
        })
        .collect()
}

/// Five SOCKS clients from 127.0.0.9 under a flood, each silent for 100 ms
/// either after connecting (`silent_first`: its greeting still in flight)
/// or between its greeting and its request (a WAN round trip); how many
/// got their CONNECT reply, and how many handshakes the relay displaced.
fn honest_clients(
    r: &common::TestRelay,
    echo: SocketAddr,
    stop: &Arc<std::sync::atomic::AtomicBool>,
    flooders: Vec<std::thread::JoinHandle<()>>,
    silent_first: bool,
) -> (usize, u64) {
    std::thread::sleep(Duration::from_millis(300));
    let mut ok = 0;
    for _ in 0..5 {
        let mut s = connect_from("127.0.0.9", r.addr);
        s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        if silent_first {
            std::thread::sleep(Duration::from_millis(100));
        }
        let honest = (|| -> std::io::Result<u8> {
            s.write_all(&[5, 1, 0])?;
            let mut m = [0u8; 2];
            s.read_exact(&mut m)?;
            if !silent_first {
                std::thread::sleep(Duration::from_millis(100));
            }
            s.write_all(&connect_req(echo))?;
            let mut rep = [0u8; 10];
            s.read_exact(&mut rep)?;
            Ok(rep[1])
        })();
        if matches!(honest, Ok(0)) {
            ok += 1;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for f in flooders {
        f.join().expect("flooder");
    }
    (ok, r.stats.errors_of(tcpaccel_relay::stats::ErrorKind::HandshakeEvicted))
}

/// Issue 26 item 11: a reconnecting flood of silent handshakes from many
/// sources keeps the handshake budget full; a client that pauses 100 ms
/// (a WAN round trip) between its SOCKS messages still gets through,
/// because the silent ones are displaced before it.
#[test]
fn an_advancing_handshake_survives_a_flood_of_silent_ones_from_many_sources() {
    let echo = echo_server();
    let r = start(Settings {
        max_handshakes: Some(16),
        per_source_handshakes: Some(4),
        first_byte_timeout: Some(Duration::from_secs(30)),
        handshake_timeout: Some(Duration::from_secs(30)),
        ..Default::default()
    });
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Two threads each cycle over 100 sources.
    let flooders = flood(r.addr, &stop, |t, i| format!("127.{}.0.{}", 10 + t, 1 + i % 100), false);
    let (ok, evicted) = honest_clients(&r, echo, &stop, flooders, false);
    assert!(evicted > 20, "the flood never filled the budget ({evicted} evicted): the test proves nothing");
    assert_eq!(ok, 5, "the advancing client got through {ok} of 5 times ({evicted} evicted)");
}

/// Issue 50 item 4: handshakes that send their greeting and stall,
/// reconnecting from fewer sources than the budget has places (so some
/// source always holds two), keep the budget full; a client that stays
/// silent 100 ms after connecting (its greeting in flight on a long path)
/// still gets through: for its grace it counts as greeted, and the flood's
/// own sources pay. Before, it was the least advanced handshake and the
/// next arrival displaced it.
#[test]
fn a_silent_newcomer_survives_a_flood_of_greeted_handshakes() {
    let echo = echo_server();
    let r = start(Settings {
        max_handshakes: Some(16),
        per_source_handshakes: Some(8),
        first_byte_timeout: Some(Duration::from_secs(30)),
        handshake_timeout: Some(Duration::from_secs(30)),
        ..Default::default()
    });
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flooders = flood(r.addr, &stop, |t, i| format!("127.14.{t}.{}", 1 + i % 4), true);
    let (ok, evicted) = honest_clients(&r, echo, &stop, flooders, true);
    assert!(evicted > 50, "the flood never filled the budget ({evicted} evicted): the test proves nothing");
    assert!(ok >= 4, "the silent newcomer got through {ok} of 5 times ({evicted} evicted)");
}
