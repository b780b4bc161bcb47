//! Server and clients on loopback (no privileges needed): every byte arrives
//! once and in order, malformed peers are cut off alone, a vanished client is
//! marked incomplete and frees its share, a foreign version is refused, and
//! an unmet target makes the server add streams.

use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tcpaccel_core::units::Rate;
use tcpaccel_gather::proto::{self, Control, ErrorCode, FrameHeader, Kind};
use tcpaccel_gather::{parse_class, Event, Limit, SendOptions, ServerConfig, SinkSpec, Source};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc::UnboundedReceiver;

mod common;
use common::{config, start, TempDir};

fn synthetic(server: SocketAddr, id: &str, class: &str, rate: Option<Rate>, limit: Limit) -> SendOptions {
    SendOptions {
        server,
        id: id.into(),
        class: class.into(),
        target: None,
        cc: None,
        timeout: tcpaccel_gather::client::DEFAULT_TIMEOUT,
        source: Source::Synthetic { rate, limit, seed: id.len() as u64 * 7919 },
    }
}

/// Waits for an event matching `f`, failing after `secs`.
async fn wait_for(rx: &mut UnboundedReceiver<Event>, secs: u64, f: impl Fn(&Event) -> bool) -> Event {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(e)) if f(&e) => return e,
            Ok(Some(_)) => {}
            Ok(None) => panic!("event channel closed"),
            Err(_) => panic!("no matching event within {secs} s"),
        }
    }
}

fn sha_file(p: &std::path::Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(p).unwrap()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_clients_every_byte_once_in_order() {
    let dir = TempDir::new("three");
    let (addr, _rx) = start(config(8 << 20, 200), SinkSpec::Dir(dir.0.clone())).await;
    let input = dir.0.join("input.bin");
    let mut rng = tcpaccel_core::rng::Rng::seeded(3);
    let bytes: Vec<u8> = (0..1_234_567).map(|_| rng.next_u64() as u8).collect();
    std::fs::write(&input, &bytes).unwrap();
    let a = tokio::spawn(tcpaccel_gather::send(SendOptions {
        server: addr,
        id: "file-a".into(),
        class: "high".into(),
        target: None,
        cc: None,
        timeout: tcpaccel_gather::client::DEFAULT_TIMEOUT,
        source: Source::File(input.clone()),
    }));
    let b = tokio::spawn(tcpaccel_gather::send(synthetic(
        addr,
        "paced-b",
        "low",
        Some(Rate::mbps(40)),
        Limit::Bytes(3_000_000),
    )));
    let c = tokio::spawn(tcpaccel_gather::send(synthetic(
        addr,
        "bulk-c",
        "high",
        None,
        Limit::Bytes(30_000_000),
    )));
    for (h, id) in [(a, "file-a"), (b, "paced-b"), (c, "bulk-c")] {
        let r = tokio::time::timeout(Duration::from_secs(60), h)
            .await
            .expect("client timed out")
            .unwrap()
            .unwrap();
        assert!(r.complete, "{id}: {r:?}");
        assert_eq!(r.sha256, r.server_sha256, "{id}");
        let f = dir.0.join(format!("{id}.data"));
        assert_eq!(std::fs::metadata(&f).unwrap().len(), r.bytes, "{id}");
        assert_eq!(sha_file(&f), r.sha256, "{id}: file differs from what was sent");
    }
    assert_eq!(sha_file(&dir.0.join("file-a.data")), hex::encode(Sha256::digest(&bytes)));
    assert_eq!(std::fs::metadata(dir.0.join("bulk-c.data")).unwrap().len(), 30_000_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_peers_are_cut_off_alone() {
    let (addr, mut rx) = start(config(8 << 20, 200), SinkSpec::Discard).await;
    let good = tokio::spawn(tcpaccel_gather::send(synthetic(
        addr,
        "good",
        "high",
        Some(Rate::mbps(80)),
        Limit::Bytes(4_000_000),
    )));

    // Not our protocol at all.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    wait_for(&mut rx, 10, |e| matches!(e, Event::ConnectionError { stage, error, .. } if stage == "preface" && error.contains("magic"))).await;

    // A hello that is not JSON: refused with an error message.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&proto::encode_preface(proto::VERSION, Kind::Control)).await.unwrap();
    s.write_all(&[0, 0, 0, 5]).await.unwrap();
    s.write_all(b"{oops").await.unwrap();
    let reply = read_control(&mut s).await;
    assert!(matches!(reply, Control::Error { code: ErrorCode::Malformed, .. }), "{reply:?}");

    // A registered client whose data stream sends a bad frame: that stream
    // closes, and that client's transfer fails (told on its control
    // connection); the other client is not disturbed.
    let mut ctl = TcpStream::connect(addr).await.unwrap();
    ctl.write_all(&proto::encode_preface(proto::VERSION, Kind::Control)).await.unwrap();
    let hello = Control::Hello { client_id: "rogue".into(), class: "low".into(), target_bps: None };
    ctl.write_all(&proto::encode_control(&hello)).await.unwrap();
    let Control::Welcome { session, token, .. } = read_control(&mut ctl).await else { panic!("no welcome") };
    let mut d = TcpStream::connect(addr).await.unwrap();
    d.write_all(&proto::encode_preface(proto::VERSION, Kind::Data)).await.unwrap();
    d.write_all(&proto::encode_attach(&session, &token, 0)).await.unwrap();
    let mut h = FrameHeader::chunk(session.tag(), 0, 0, b"abc", false).encode();
    h[0] = 0x77; // unknown frame type
    d.write_all(&h).await.unwrap();
    wait_for(&mut rx, 10, |e| matches!(e, Event::ConnectionError { stage, error, .. } if stage == "data" && error.contains("frame type"))).await;
    // The server closed it: reading gives EOF (or a reset), not data.
    let mut b = [0u8; 1];
    let n = tokio::time::timeout(Duration::from_secs(5), d.read(&mut b)).await.unwrap().unwrap_or(0);
    assert_eq!(n, 0);
    loop {
        match read_control(&mut ctl).await {
            Control::Received { .. } | Control::SetStreams { .. } => continue,
            Control::Error { code: ErrorCode::Malformed, message, .. } => {
                assert!(message.contains("data stream 0") && message.contains("frame type"), "{message}");
                break;
            }
            other => panic!("expected the rogue's transfer to fail, got {other:?}"),
        }
    }

    // Meanwhile the well-behaved client completes.
    let r = tokio::time::timeout(Duration::from_secs(30), good).await.unwrap().unwrap().unwrap();
    assert!(r.complete && r.bytes == 4_000_000, "{r:?}");
}

async fn read_control(s: &mut TcpStream) -> Control {
    let mut len = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut len)).await.unwrap().unwrap();
    let mut body = vec![0u8; proto::control_len(len).unwrap()];
    s.read_exact(&mut body).await.unwrap();
    proto::decode_control(&body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_mismatch_is_refused_cleanly() {
    let (addr, mut rx) = start(config(1 << 20, 200), SinkSpec::Discard).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&proto::encode_preface(proto::VERSION + 1, Kind::Control)).await.unwrap();
    match read_control(&mut s).await {
        Control::Error { code: ErrorCode::Version, server_version: Some(v), message } => {
            assert_eq!(v, proto::VERSION);
            assert!(message.contains(&format!("version {}", proto::VERSION + 1)), "{message}");
        }
        other => panic!("expected a version error, got {other:?}"),
    }
    let mut b = [0u8; 1];
    assert_eq!(s.read(&mut b).await.unwrap_or(0), 0, "server must close after refusing");
    wait_for(&mut rx, 5, |e| matches!(e, Event::ConnectionError { stage, .. } if stage == "preface")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_class_is_refused_with_the_known_ones() {
    let (addr, _rx) = start(config(1 << 20, 200), SinkSpec::Discard).await;
    let e = tcpaccel_gather::send(synthetic(addr, "x", "gold", None, Limit::Bytes(10))).await.unwrap_err();
    let m = e.to_string();
    assert!(m.contains("unknown class \"gold\"") && m.contains("high, low"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_client_is_incomplete_and_frees_its_share() {
    let dir = TempDir::new("killed");
    let pool = 4 << 20;
    let (addr, mut rx) = start(config(pool, 200), SinkSpec::Dir(dir.0.clone())).await;
    let stay = tokio::spawn(tcpaccel_gather::send(synthetic(
        addr,
        "stay",
        "low",
        Some(Rate::mbps(20)),
        Limit::Duration(Duration::from_secs(4)),
    )));
    let doomed = tokio::spawn(tcpaccel_gather::send(synthetic(
        addr,
        "doomed",
        "high",
        Some(Rate::mbps(20)),
        Limit::Duration(Duration::from_secs(30)),
    )));
    // Both hold a share while both run.
    let shares = |e: &Event, id: &str| matches!(e, Event::Status(s) if s.id == id && s.received > 0);
    let Event::Status(before) = wait_for(&mut rx, 10, |e| shares(e, "stay")).await else { unreachable!() };
    assert!(before.allocation < pool / 2, "two clients share the pool: {before:?}");
    // Kill it mid-stream: its sockets close without an end of data.
    doomed.abort();
    let end = wait_for(&mut rx, 10, |e| matches!(e, Event::ClientEnd { id, .. } if id == "doomed")).await;
    let Event::ClientEnd { complete, bytes, path, .. } = end else { unreachable!() };
    assert!(!complete);
    assert!(bytes > 0);
    let path = PathBuf::from(path.expect("a file"));
    assert_eq!(path, dir.0.join("doomed.incomplete"));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), bytes);
    // Its share goes back: the survivor gets the whole pool (less rounding).
    // (A tick that began before the leave may still report the old split.)
    wait_for(&mut rx, 10, |e| shares(e, "stay") && matches!(e, Event::Status(s) if s.allocation >= pool - 1))
        .await;
    assert!(tcpaccel_gather::query_status(addr).await.unwrap().iter().all(|c| c.id != "doomed"));
    let r = tokio::time::timeout(Duration::from_secs(30), stay).await.unwrap().unwrap().unwrap();
    assert!(r.complete, "{r:?}");
    assert!(dir.0.join("stay.data").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmet_target_adds_streams_and_status_shows_them() {
    // 100 Gbit/s is out of reach on loopback and the source is unpaced, so
    // [GatherQoS] §3.2 step (III) must add streams.
    let classes = vec![parse_class("huge=100gbit,1").unwrap()];
    let cfg = ServerConfig::new(classes, 16 << 20, None, 4, Duration::from_millis(200)).unwrap();
    let (addr, mut rx) = start(cfg, SinkSpec::Discard).await;
    let h = tokio::spawn(tcpaccel_gather::send(synthetic(
        addr,
        "greedy",
        "huge",
        None,
        Limit::Duration(Duration::from_secs(3)),
    )));
    wait_for(&mut rx, 10, |e| matches!(e, Event::Status(s) if s.streams >= 2 && s.window_clamp > 0)).await;
    let view = tcpaccel_gather::query_status(addr).await.unwrap();
    assert_eq!(view.len(), 1);
    assert_eq!(view[0].class, "huge");
    assert_eq!(view[0].target_bps, 100_000_000_000);
    let r = tokio::time::timeout(Duration::from_secs(30), h).await.unwrap().unwrap().unwrap();
    assert!(r.complete, "{r:?}");
    assert!(r.max_streams >= 2 && r.stream_changes >= 1, "{r:?}");
}
