//! Integrity and abuse on loopback (issue 14, items 1-5): tests that play a
//! broken or malicious client by speaking the raw protocol, and a fake
//! server that never confirms, against the real server and client.
//!
//! Each test asserts the property the issue found missing: a stream that
//! fails after acceptance fails the transfer at once with an error naming
//! the stream and offset; the client gives up on a server that does not
//! answer; ids map to distinct files; a stream must present its session's
//! token; streams beyond the grant are refused; the digest in `end` and the
//! negotiated checksums are enforced.

use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::time::Duration;
use tcpaccel_core::units::Rate;
use tcpaccel_gather::client::{ClientError, DEFAULT_TIMEOUT};
use tcpaccel_gather::proto::{self, Control, ErrorCode, FrameHeader, Kind, SessionId, Token};
use tcpaccel_gather::{Event, Limit, SendOptions, Sharing, SinkSpec, Source};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod common;
use common::{config, start, TempDir};

async fn read_control(s: &mut TcpStream) -> Option<Control> {
    let mut len = [0u8; 4];
    match tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut len)).await {
        Ok(Ok(_)) => {}
        Ok(Err(_)) => return None,
        Err(_) => panic!("no control message within 10 s"),
    }
    let mut body = vec![0u8; proto::control_len(len).unwrap()];
    s.read_exact(&mut body).await.unwrap();
    Some(proto::decode_control(&body).unwrap())
}

/// The next control message that is not a heartbeat or a stream count.
async fn next_verdict(s: &mut TcpStream) -> Control {
    loop {
        match read_control(s).await {
            Some(Control::Received { .. } | Control::SetStreams { .. }) => {}
            Some(m) => return m,
            None => panic!("control connection closed without a verdict"),
        }
    }
}

/// A client speaking the raw protocol.
struct Raw {
    addr: SocketAddr,
    ctl: TcpStream,
    session: SessionId,
    token: Token,
    streams: u32,
    checksum: bool,
}

impl Raw {
    async fn hello(addr: SocketAddr, id: &str) -> Raw {
        let mut ctl = TcpStream::connect(addr).await.unwrap();
        ctl.write_all(&proto::encode_preface(proto::VERSION, Kind::Control)).await.unwrap();
        let hello = Control::Hello { client_id: id.into(), class: "low".into(), target_bps: None };
        ctl.write_all(&proto::encode_control(&hello)).await.unwrap();
        match read_control(&mut ctl).await {
            Some(Control::Welcome { session, token, streams, checksum, .. }) => {
                Raw { addr, ctl, session, token, streams, checksum }
            }
            other => panic!("expected welcome, got {other:?}"),
        }
    }

    async fn attach_as(&self, session: &SessionId, token: &Token, index: u16) -> TcpStream {
        let mut d = TcpStream::connect(self.addr).await.unwrap();
        d.write_all(&proto::encode_preface(proto::VERSION, Kind::Data)).await.unwrap();
        d.write_all(&proto::encode_attach(session, token, index)).await.unwrap();
        d
    }

    async fn attach(&self, index: u16) -> TcpStream {
        self.attach_as(&self.session, &self.token, index).await
    }

    async fn chunk(&self, d: &mut TcpStream, index: u16, offset: u64, data: &[u8], crc: bool) {
        let h = FrameHeader::chunk(self.session.tag(), index, offset, data, crc);
        d.write_all(&h.encode()).await.unwrap();
        d.write_all(data).await.unwrap();
    }

    async fn end_stream(&self, d: &mut TcpStream, index: u16) {
        d.write_all(&FrameHeader::end(self.session.tag(), index).encode()).await.unwrap();
        d.shutdown().await.unwrap();
    }

    async fn end(&mut self, total: u64, sha256: String) {
        self.ctl.write_all(&proto::encode_control(&Control::End { total, sha256 })).await.unwrap();
    }
}

fn sha(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// Asserts that `d` was closed by the server (EOF or reset, no data).
async fn closed_by_server(d: &mut TcpStream) {
    let mut b = [0u8; 1];
    let n = tokio::time::timeout(Duration::from_secs(5), d.read(&mut b))
        .await
        .expect("the server must close the refused stream")
        .unwrap_or(0);
    assert_eq!(n, 0);
}

// ---- item 1: a stream failing after acceptance fails the transfer -------

#[derive(Clone, Copy, Debug)]
enum LastChunk {
    BadChecksum,
    Overlap,
    Truncated,
}

/// One good chunk [0, 1000), then the last chunk [1000, 2000) broken as
/// `how`, then `end`: the server must answer with an error naming stream 0
/// and offset 1000 at once (before the fix it closed the stream, logged it,
/// and left the control connection waiting forever).
async fn last_chunk_fails(how: LastChunk) {
    let (addr, mut rx) = start(config(8 << 20, 200), SinkSpec::Discard).await;
    let mut c = Raw::hello(addr, &format!("last-{how:?}")).await;
    let data = bytes(2000, 7);
    let mut d = c.attach(0).await;
    c.chunk(&mut d, 0, 0, &data[..1000], true).await;
    let expected = match how {
        LastChunk::BadChecksum => {
            let mut h = FrameHeader::chunk(c.session.tag(), 0, 1000, &data[1000..], true);
            h.checksum ^= 0x10;
            d.write_all(&h.encode()).await.unwrap();
            d.write_all(&data[1000..]).await.unwrap();
            ErrorCode::Mismatch
        }
        LastChunk::Overlap => {
            // Claims [500, 1500): overlaps what arrived; the bytes past 1000 never come.
            c.chunk(&mut d, 0, 500, &data[500..1500], true).await;
            ErrorCode::Malformed
        }
        LastChunk::Truncated => {
            let h = FrameHeader::chunk(c.session.tag(), 0, 1000, &data[1000..], true);
            d.write_all(&h.encode()).await.unwrap();
            d.write_all(&data[1000..1400]).await.unwrap();
            d.shutdown().await.unwrap();
            ErrorCode::StreamLost
        }
    };
    c.end(2000, sha(&data)).await;
    let t0 = std::time::Instant::now();
    match next_verdict(&mut c.ctl).await {
        Control::Error { code, message, .. } => {
            assert_eq!(code, expected, "{how:?}: {message}");
            assert!(message.contains("data stream 0"), "{how:?} names the stream: {message}");
            let at = match how {
                LastChunk::Overlap => "offset 500",
                _ => "offset 1000",
            };
            assert!(message.contains(at), "{how:?} names the offset ({at}): {message}");
        }
        other => panic!("{how:?}: expected an error, got {other:?}"),
    }
    assert!(t0.elapsed() < Duration::from_secs(5), "{how:?}: the failure took {:?}", t0.elapsed());
    let end = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let e @ Event::ClientEnd { .. } = rx.recv().await.unwrap() {
                return e;
            }
        }
    })
    .await
    .expect("client_end event");
    assert!(matches!(end, Event::ClientEnd { complete: false, bytes: 1000, .. }), "{end:?}");
    // The server closes the control connection after the error.
    assert!(read_control(&mut c.ctl).await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_checksum_on_the_last_chunk_fails_the_transfer_at_once() {
    last_chunk_fails(LastChunk::BadChecksum).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlap_on_the_last_chunk_fails_the_transfer_at_once() {
    last_chunk_fails(LastChunk::Overlap).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_last_chunk_fails_the_transfer_at_once() {
    last_chunk_fails(LastChunk::Truncated).await;
}

/// `--checksum`: the real client complies and completes; a chunk without a
/// CRC (flag cleared) fails the transfer with `mismatch` (before the fix it
/// was accepted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checksum_is_enforced_when_negotiated() {
    let mut cfg = config(8 << 20, 200);
    cfg.checksum = true;
    let (addr, _rx) = start(cfg, SinkSpec::Discard).await;
    let r = send_to(addr, "honest", Limit::Bytes(1_000_000), DEFAULT_TIMEOUT).await.unwrap();
    assert!(r.complete, "{r:?}");
    let mut c = Raw::hello(addr, "no-crc").await;
    assert!(c.checksum, "the welcome announces checksums");
    let mut d = c.attach(0).await;
    let data = bytes(3000, 1);
    c.chunk(&mut d, 0, 0, &data[..1500], true).await;
    c.chunk(&mut d, 0, 1500, &data[1500..], false).await;
    // The server may already have dropped the stream over the chunk without
    // a CRC: then the end frame meets a closed socket (EPIPE), no failure.
    let _ = d.write_all(&FrameHeader::end(c.session.tag(), 0).encode()).await;
    let _ = d.shutdown().await;
    c.end(3000, sha(&data)).await;
    match next_verdict(&mut c.ctl).await {
        Control::Error { code: ErrorCode::Mismatch, message, .. } => {
            assert!(message.contains("data stream 0") && message.contains("offset 1500"), "{message}");
            assert!(message.contains("no CRC-32"), "{message}");
        }
        other => panic!("a chunk without CRC must fail the transfer, got {other:?}"),
    }
}

fn synthetic(addr: SocketAddr, id: &str, limit: Limit, timeout: Duration) -> SendOptions {
    SendOptions {
        server: addr,
        id: id.into(),
        class: "low".into(),
        target: None,
        cc: None,
        timeout,
        source: Source::Synthetic { rate: None, limit, seed: 11 },
    }
}

async fn send_to(
    addr: SocketAddr,
    id: &str,
    limit: Limit,
    timeout: Duration,
) -> Result<tcpaccel_gather::SendReport, ClientError> {
    tokio::time::timeout(Duration::from_secs(30), tcpaccel_gather::send(synthetic(addr, id, limit, timeout)))
        .await
        .expect("send must return within 30 s")
}

/// Before the fix `send` waited for `done` with no deadline (this test's
/// 30 s guard then fails); now it gives up after its timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_gives_up_on_a_server_that_never_confirms() {
    for heartbeat in [true, false] {
        let addr = tcpaccel_gather::testing::silent_server(heartbeat);
        let t0 = std::time::Instant::now();
        let e = send_to(addr, "waiting", Limit::Bytes(100_000), Duration::from_secs(1)).await.unwrap_err();
        let took = t0.elapsed();
        let m = e.to_string();
        assert!(matches!(e, ClientError::Timeout(_)), "heartbeat {heartbeat}: {m}");
        let want = if heartbeat { "confirmed 0 of 100000 bytes" } else { "sent nothing for 1s" };
        assert!(m.contains(want), "heartbeat {heartbeat}: {m}");
        assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(10), "{took:?}");
    }
}

// ---- item 2: injective file names ----------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_that_used_to_collide_get_their_own_files() {
    let dir = TempDir::new("names");
    let (addr, _rx) = start(config(8 << 20, 200), SinkSpec::Dir(dir.0.clone())).await;
    // Paced so that both are connected at once (they shared x_y.partial before).
    let mk = |id: &str, seed: u64| SendOptions {
        source: Source::Synthetic {
            rate: Some(Rate::mbps(16)),
            limit: Limit::Duration(Duration::from_millis(1500)),
            seed,
        },
        ..synthetic(addr, id, Limit::Bytes(0), DEFAULT_TIMEOUT)
    };
    let a = tokio::spawn(tcpaccel_gather::send(mk("x y", 1)));
    let b = tokio::spawn(tcpaccel_gather::send(mk("x_y", 2)));
    let c = tokio::spawn(tcpaccel_gather::send(mk("x/../y", 3)));
    for (h, file) in [(a, "x%20y.data"), (b, "x_y.data"), (c, "x%2F..%2Fy.data")] {
        let r = tokio::time::timeout(Duration::from_secs(30), h).await.unwrap().unwrap().unwrap();
        assert!(r.complete, "{file}: {r:?}");
        let p = dir.0.join(file);
        let got = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert_eq!(sha(&got), r.sha256, "{file} holds exactly its client's bytes");
    }
    let mut names: Vec<String> =
        std::fs::read_dir(&dir.0).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
    names.sort();
    assert_eq!(names, ["x%20y.data", "x%2F..%2Fy.data", "x_y.data"]);
}

// ---- item 3: unguessable sessions, streams prove their session -----------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_must_present_its_sessions_token() {
    let dir = TempDir::new("token");
    let (addr, mut rx) = start(config(8 << 20, 200), SinkSpec::Dir(dir.0.clone())).await;
    let mut victim = Raw::hello(addr, "victim").await;
    let attacker = Raw::hello(addr, "attacker").await;
    assert_ne!(victim.session, attacker.session);
    assert_ne!(victim.session.0[..15], attacker.session.0[..15], "ids are not consecutive");
    assert_eq!(victim.session.to_hex().len(), 32, "128 bits");

    // The attacker knows the victim's session id (it is in `gather status`)
    // but not its token: its own token, a zero token, and a guessed one fail.
    for (what, token) in
        [("own token", attacker.token), ("zero token", Token([0; 16])), ("random", Token::random().unwrap())]
    {
        let mut d = attacker.attach_as(&victim.session, &token, 0).await;
        // Were it accepted, this chunk would land in the victim's file.
        let evil = b"injected by the attacker";
        let _ = d.write_all(&FrameHeader::chunk(victim.session.tag(), 0, 0, evil, true).encode()).await;
        let _ = d.write_all(evil).await;
        closed_by_server(&mut d).await;
        let e = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if let Event::ConnectionError { stage, error, .. } = rx.recv().await.unwrap() {
                    return (stage, error);
                }
            }
        })
        .await
        .unwrap();
        assert_eq!(e.0, "attach", "{what}");
        assert!(e.1.contains("wrong token"), "{what}: {}", e.1);
    }
    // A session id nobody holds.
    let mut d = attacker.attach_as(&SessionId::random().unwrap(), &attacker.token, 0).await;
    closed_by_server(&mut d).await;

    // The victim is undisturbed: its own stream 0 is still free, and its
    // transfer completes with its own bytes only.
    let data = bytes(5000, 3);
    let mut d = victim.attach(0).await;
    victim.chunk(&mut d, 0, 0, &data, true).await;
    victim.end_stream(&mut d, 0).await;
    victim.end(5000, sha(&data)).await;
    match next_verdict(&mut victim.ctl).await {
        Control::Done { total: 5000, sha256, complete: true } => assert_eq!(sha256, sha(&data)),
        other => panic!("the victim's transfer must complete, got {other:?}"),
    }
    assert_eq!(std::fs::read(dir.0.join("victim.data")).unwrap(), data);
}

// ---- item 4: no streams beyond the grant -----------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_beyond_the_grant_are_refused_with_per_connection_sharing() {
    let mut cfg = config(8 << 20, 200);
    cfg.sharing = Sharing::PerConnection;
    // The server never grows anyone's streams here: the grant stays at the welcome's.
    cfg.tune_streams = false;
    let (addr, mut rx) = start(cfg, SinkSpec::Discard).await;
    let mut greedy = Raw::hello(addr, "greedy").await;
    assert_eq!(greedy.streams, 1);
    let mut d0 = greedy.attach(0).await;
    greedy.chunk(&mut d0, 0, 0, &bytes(1000, 0), false).await;
    // Opening a second stream it was not told to open: refused, and the
    // transfer fails (the chunks it meant to send there would be missing).
    let mut d1 = greedy.attach(1).await;
    closed_by_server(&mut d1).await;
    match next_verdict(&mut greedy.ctl).await {
        Control::Error { code: ErrorCode::Capacity, message, .. } => {
            assert!(
                message.contains("data stream 1") && message.contains("1 stream(s) granted"),
                "{message}"
            );
        }
        other => panic!("expected a capacity error, got {other:?}"),
    }
    // The server never counted the extra stream for the pool.
    let status = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Event::Status(s) = rx.recv().await.unwrap() {
                if s.id == "greedy" {
                    return Some(s);
                }
            }
            if let Ok(v) = tcpaccel_gather::query_status(addr).await {
                if v.iter().all(|s| s.id != "greedy") {
                    return None;
                }
            }
        }
    })
    .await
    .unwrap();
    if let Some(s) = status {
        assert!(s.streams <= 1, "{s:?}");
    }
    // An index it was granted but reuses is refused too (a fresh client).
    let mut again = Raw::hello(addr, "reuse").await;
    let mut a = again.attach(0).await;
    again.end_stream(&mut a, 0).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut b = again.attach(0).await;
    closed_by_server(&mut b).await;
    match next_verdict(&mut again.ctl).await {
        Control::Error { code: ErrorCode::Malformed, message, .. } => {
            assert!(message.contains("already used"), "{message}")
        }
        other => panic!("expected a refusal of the reused index, got {other:?}"),
    }
}

// ---- item 5: the digest in `end` is checked ---------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_sha256_in_end_fails_the_transfer_with_mismatch() {
    let dir = TempDir::new("sha");
    let (addr, mut rx) = start(config(8 << 20, 200), SinkSpec::Dir(dir.0.clone())).await;
    let mut c = Raw::hello(addr, "liar").await;
    let data = bytes(4000, 9);
    let mut d = c.attach(0).await;
    c.chunk(&mut d, 0, 0, &data, true).await;
    c.end_stream(&mut d, 0).await;
    c.end(4000, sha(b"something else")).await;
    match next_verdict(&mut c.ctl).await {
        Control::Error { code: ErrorCode::Mismatch, message, .. } => {
            assert!(message.contains("sha256 mismatch") && message.contains(&sha(&data)), "{message}");
        }
        other => panic!("a wrong digest must not complete, got {other:?}"),
    }
    let end = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let e @ Event::ClientEnd { .. } = rx.recv().await.unwrap() {
                return e;
            }
        }
    })
    .await
    .unwrap();
    assert!(matches!(&end, Event::ClientEnd { complete: false, .. }), "{end:?}");
    assert!(!dir.0.join("liar.data").exists(), "a mismatched file is not published as .data");
    assert_eq!(std::fs::read(dir.0.join("liar.incomplete")).unwrap(), data);

    // A digest that is not 64 lowercase hex digits is malformed.
    let mut c = Raw::hello(addr, "garbled").await;
    c.end(0, "ABC".into()).await;
    match next_verdict(&mut c.ctl).await {
        Control::Error { code: ErrorCode::Malformed, message, .. } => {
            assert!(message.contains("sha256"), "{message}")
        }
        other => panic!("expected malformed, got {other:?}"),
    }
}
