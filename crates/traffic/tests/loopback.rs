//! Loopback tests of the traffic tool: exact byte counts and checksums,
//! parallel sums, reverse mode, static pacing, refused headers. No root
//! needed; rates are modest so a busy 2-core machine keeps up.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use tcpaccel_core::units::Rate;
use tcpaccel_traffic::proto::{self, Amount, Header, Mode, Receipt, Reject};
use tcpaccel_traffic::{
    run_send, spawn_recv, ConnStatus, Event, Framing, Pace, RecvConfig, Report, SendConfig, Volume,
};

/// Tests run one at a time: the timing checks must not share two cores with
/// full-speed loopback transfers of the same binary.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn recv(checksum: bool) -> tcpaccel_traffic::RecvHandle {
    let mut cfg = RecvConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.checksum = checksum;
    spawn_recv(cfg).expect("receiver on loopback")
}

#[test]
fn byte_count_arrives_exactly_with_equal_sha256() {
    let _serial = serial();
    let r = recv(false);
    let n = 10 * 1024 * 1024 + 7;
    let mut cfg = SendConfig::new(r.local_addr());
    cfg.volume = Volume::Bytes(n);
    cfg.checksum = true;
    cfg.interval = None;
    let s = run_send(cfg, |_| {}).expect("send");
    assert_eq!(s.bytes, n);
    assert_eq!(s.streams[0].app_bytes, n);
    assert_eq!(s.checksum_ok, Some(true));
    let ours = s.streams[0].sha256.clone().expect("sender hash");
    assert_eq!(s.streams[0].peer_sha256.as_deref(), Some(ours.as_str()));
    assert!(s.duration_s > 0.0 && s.goodput_bps > 0);
    let sum = r.stop();
    assert_eq!(sum.ok, 1);
    assert_eq!(sum.bytes, n);
    assert_eq!(sum.conns[0].sha256.as_deref(), Some(ours.as_str()), "receiver's own record");
    assert_eq!(sum.sessions_complete, 1);
}

#[test]
fn parallel_streams_sum_to_the_total() {
    let _serial = serial();
    let r = recv(true);
    let n = 8 * 1024 * 1024 + 3; // not divisible by 4
    let mut cfg = SendConfig::new(r.local_addr());
    cfg.volume = Volume::Bytes(n);
    cfg.parallel = 4;
    cfg.interval = Some(Duration::from_millis(100));
    let s = run_send(cfg, |_| {}).expect("send");
    assert_eq!(s.streams.len(), 4);
    assert_eq!(s.bytes, n);
    assert_eq!(s.streams.iter().map(|x| x.bytes).sum::<u64>(), n);
    let sizes: Vec<u64> = s.streams.iter().map(|x| x.bytes).collect();
    assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1, "{sizes:?}");
    let sum = r.stop();
    assert_eq!(sum.ok, 4);
    assert_eq!(sum.bytes, n);
    assert_eq!(sum.sessions_complete, 1);
    assert!(sum.conns.iter().all(|c| c.sha256.is_some()));
}

#[test]
fn timed_run_reports_intervals_that_add_up() {
    let _serial = serial();
    let r = recv(false);
    let mut cfg = SendConfig::new(r.local_addr());
    cfg.volume = Volume::Duration(Duration::from_millis(1200));
    cfg.parallel = 2;
    // Modest rate: keeps the test light on a shared machine.
    cfg.pace = Pace::Static(Rate::mbps(100));
    cfg.interval = Some(Duration::from_millis(300));
    let mut reports = Vec::new();
    let s = run_send(cfg, |r| reports.push(r.clone())).expect("send");
    assert!(reports.len() >= 2, "{} reports", reports.len());
    let mut acked = 0;
    for rep in &reports {
        let Report::Interval(i) = rep;
        assert_eq!(i.streams.len(), 2);
        assert!(i.end_s > i.start_s);
        assert!(i.streams.iter().all(|x| x.cwnd.is_some() && x.srtt_us.is_some()));
        let json = serde_json::to_value(rep).unwrap();
        assert_eq!(json["type"], "interval");
        acked += i.bytes;
    }
    // Intervals count acknowledged data; the receipt counts received data.
    assert!(acked <= s.bytes, "reported {acked} > received {}", s.bytes);
    assert!(acked as f64 >= s.bytes as f64 * 0.9, "reported {acked} of {}", s.bytes);
    assert!(s.duration_s >= 1.2);
    let sum = r.stop();
    assert_eq!(sum.bytes, s.bytes);
}

#[test]
fn reverse_mode_downloads_exact_bytes() {
    let _serial = serial();
    let r = recv(false);
    let n = 3 * 1024 * 1024 + 11;
    let mut cfg = SendConfig::new(r.local_addr());
    cfg.volume = Volume::Bytes(n);
    cfg.reverse = true;
    cfg.checksum = true;
    cfg.parallel = 2;
    cfg.cc = Some("reno".into());
    cfg.interval = None;
    let s = run_send(cfg, |_| {}).expect("reverse send");
    assert_eq!(s.bytes, n);
    assert_eq!(s.checksum_ok, Some(true));
    let sum = r.stop();
    assert_eq!(sum.ok, 2);
    assert_eq!(sum.bytes, n);
    assert!(sum.conns.iter().all(|c| c.mode == Some(Mode::Reverse)));
}

#[test]
fn static_pacing_holds_goodput_near_the_converted_target() {
    let _serial = serial();
    let r = recv(false);
    let wire = Rate::mbps(20);
    let mut cfg = SendConfig::new(r.local_addr());
    // ~2.4 s at 20 Mbit/s.
    cfg.volume = Volume::Bytes(6_000_000);
    cfg.pace = Pace::Static(wire);
    cfg.interval = Some(Duration::from_millis(200));
    let mut reports = Vec::new();
    let s = run_send(cfg, |r| reports.push(r.clone())).expect("send");
    let st = &s.streams[0];
    let framing: Framing = st.framing;
    let target = framing.goodput(wire).bits_per_sec() as f64;
    assert_eq!(st.pacing_cap_bytes_per_sec, Some(framing.payload_bytes_per_sec(wire)));
    // Linux leaves a socket's first 10 data segments unpaced
    // (tcp_update_skb_after_send); with loopback's 32-64 KB segments that
    // is a visible head start, so judge the steady state after 0.4 s.
    let (mut bytes, mut secs) = (0u64, 0.0f64);
    for rep in &reports {
        let Report::Interval(i) = rep;
        if i.start_s >= 0.39 && i.end_s - i.start_s >= 0.1 {
            bytes += i.bytes;
            secs += i.end_s - i.start_s;
        }
    }
    assert!(secs >= 1.0, "steady state of only {secs} s");
    let steady = bytes as f64 * 8.0 / secs;
    let ratio = steady / target;
    eprintln!(
        "paced steady goodput {steady:.0} bit/s (whole run {}), target {target}, ratio {ratio:.4}",
        s.goodput_bps
    );
    assert!((0.9..=1.1).contains(&ratio), "steady goodput {steady} vs target {target}: ratio {ratio:.3}");
    // The whole run, head start included, stays well below unpaced loopback.
    assert!((s.goodput_bps as f64) < target * 1.3, "{}", s.goodput_bps);
    r.stop();
}

fn raw_exchange(hdr: [u8; proto::HEADER_LEN], addr: std::net::SocketAddr) -> Receipt {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(&hdr).unwrap();
    let mut b = [0u8; proto::RECEIPT_LEN];
    c.read_exact(&mut b).expect("a receipt for a refused header");
    let mut rest = Vec::new();
    assert_eq!(c.read_to_end(&mut rest).unwrap(), 0, "no data after a refusal");
    Receipt::decode(&b).unwrap()
}

#[test]
fn bad_magic_and_version_are_refused_and_counted() {
    let _serial = serial();
    let r = recv(false);
    let addr = r.local_addr();
    let rc = raw_exchange([b'G'; proto::HEADER_LEN], addr);
    assert_eq!(rc.status, Err(Reject::BadMagic));
    let good = Header {
        mode: Mode::Upload,
        amount: Amount::Bytes(0),
        checksum: false,
        stream: 0,
        streams: 1,
        session: 9,
        pace_bytes_per_sec: 0,
        cc: None,
    };
    let mut v2 = good.encode();
    v2[9] = 2;
    assert_eq!(raw_exchange(v2, addr).status, Err(Reject::BadVersion));
    // A client that closes before a full header is an error, not a crash.
    drop(TcpStream::connect(addr).unwrap().write_all(b"TCP"));
    // The receiver still serves a real sender afterwards.
    let mut cfg = SendConfig::new(addr);
    cfg.volume = Volume::Bytes(1000);
    cfg.interval = None;
    assert_eq!(run_send(cfg, |_| {}).unwrap().bytes, 1000);
    let mut seen = Vec::new();
    while seen.len() < 4 {
        match r.next_event(Duration::from_secs(5)) {
            Event::Conn(c) => seen.push(c),
            other => panic!("expected 4 connection events, got {} then {other:?}", seen.len()),
        }
    }
    let sum = r.stop();
    assert_eq!(sum.rejected, 2, "{:?}", sum.conns);
    assert_eq!(sum.errors, 1, "{:?}", sum.conns);
    assert_eq!(sum.ok, 1);
    assert!(sum.conns.iter().any(|c| c.status == ConnStatus::Rejected(Reject::BadMagic)));
}

#[test]
fn sender_explains_a_refusal_and_a_foreign_server() {
    let _serial = serial();
    // A "server" that answers with garbage and closes.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut h = [0u8; proto::HEADER_LEN];
        let _ = s.read_exact(&mut h);
        let _ = s.write_all(b"HTTP/1.0 400 Bad Request\r\n\r\n........................");
    });
    let mut cfg = SendConfig::new(addr);
    cfg.volume = Volume::Bytes(10);
    cfg.reverse = true;
    cfg.interval = None;
    let e = run_send(cfg, |_| {}).unwrap_err();
    assert!(e.to_string().contains("receipt"), "{e}");
    t.join().unwrap();
}

#[test]
fn once_stops_after_the_first_session() {
    let _serial = serial();
    let mut cfg = RecvConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.once = true;
    let r = spawn_recv(cfg).unwrap();
    let mut s = SendConfig::new(r.local_addr());
    s.volume = Volume::Bytes(100_000);
    s.parallel = 3;
    s.interval = None;
    run_send(s, |_| {}).unwrap();
    let mut n = 0;
    loop {
        match r.next_event(Duration::from_secs(5)) {
            Event::Conn(_) => n += 1,
            Event::Closed => break,
            Event::Timeout => panic!("receiver did not stop after one session"),
        }
    }
    assert_eq!(n, 3);
    // `Closed` is sent just before the receiver's thread returns: give it a moment.
    let t = std::time::Instant::now();
    while !r.is_finished() {
        assert!(t.elapsed() < Duration::from_secs(5), "receiver thread still running after Closed");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(r.stop().sessions_complete, 1);
}

#[test]
fn bad_settings_are_config_errors() {
    let _serial = serial();
    let mut cfg = SendConfig::new("127.0.0.1:9".parse().unwrap());
    cfg.parallel = 0;
    assert!(matches!(run_send(cfg, |_| {}), Err(tcpaccel_traffic::Error::Config(_))));
    let mut cfg = SendConfig::new("127.0.0.1:9".parse().unwrap());
    cfg.reverse = true;
    cfg.checksum = true;
    assert!(matches!(run_send(cfg, |_| {}), Err(tcpaccel_traffic::Error::Config(_))));
}

#[test]
fn reverse_mode_paces_the_server_socket() {
    let _serial = serial();
    let r = recv(false);
    let mut cfg = SendConfig::new(r.local_addr());
    // 1 MB at 20 Mbit/s takes ~0.4 s; unpaced loopback takes milliseconds.
    cfg.volume = Volume::Bytes(1_000_000);
    cfg.reverse = true;
    cfg.pace = Pace::Static(Rate::mbps(20));
    cfg.interval = None;
    let s = run_send(cfg, |_| {}).expect("reverse paced send");
    assert_eq!(s.bytes, 1_000_000);
    assert!(s.duration_s > 0.2, "took only {} s: server did not pace", s.duration_s);
    assert_eq!(s.streams[0].pacing_cap_bytes_per_sec.map(|c| c > 0), Some(true));
    r.stop();
}

#[test]
fn receiver_paces_reverse_runs_with_its_own_rate() {
    let _serial = serial();
    let mut rc = RecvConfig::new("127.0.0.1:0".parse().unwrap());
    rc.pace = Pace::Static(Rate::mbps(20));
    let r = spawn_recv(rc).unwrap();
    let mut cfg = SendConfig::new(r.local_addr());
    cfg.volume = Volume::Bytes(1_000_000);
    cfg.reverse = true;
    cfg.interval = None;
    let s = run_send(cfg, |_| {}).expect("reverse send");
    assert_eq!(s.bytes, 1_000_000);
    assert!(s.duration_s > 0.2, "took only {} s: the receiver did not pace", s.duration_s);
    r.stop();
}
